//! Transport header views: TCP, UDP, SCTP, ICMP/ICMPv6.

use crate::bytes::{be16, be32};
use crate::link::Truncated;

/// A TCP header; `new_checked` guarantees the fixed 20 bytes (options may be
/// cut off by the snap length).
#[derive(Clone, Copy, Debug)]
pub struct TcpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> TcpHeader<'a> {
    pub const MIN_LEN: usize = 20;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, Truncated> {
        if buf.len() < Self::MIN_LEN {
            return Err(Truncated);
        }
        Ok(TcpHeader { buf })
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buf, 0)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buf, 2)
    }

    pub fn seq(&self) -> u32 {
        be32(self.buf, 4)
    }

    pub fn ack(&self) -> u32 {
        be32(self.buf, 8)
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        ((self.buf[12] >> 4) as usize) * 4
    }

    /// The nine flag bits, NS in bit 8 down to FIN in bit 0.
    pub fn flags(&self) -> u16 {
        (((self.buf[12] & 1) as u16) << 8) | self.buf[13] as u16
    }

    pub fn window(&self) -> u16 {
        be16(self.buf, 14)
    }
}

/// TCP flag bits as in [`TcpHeader::flags`].
pub mod tcp_flags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;
    pub const NS: u16 = 0x100;
}

/// A UDP header.
#[derive(Clone, Copy, Debug)]
pub struct UdpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> UdpHeader<'a> {
    pub const LEN: usize = 8;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, Truncated> {
        if buf.len() < Self::LEN {
            return Err(Truncated);
        }
        Ok(UdpHeader { buf })
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buf, 0)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buf, 2)
    }

    /// The length field: header plus payload.
    pub fn len(&self) -> u16 {
        be16(self.buf, 4)
    }

    pub fn is_empty(&self) -> bool {
        self.len() <= Self::LEN as u16
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buf, 6)
    }
}

/// The SCTP common header.
#[derive(Clone, Copy, Debug)]
pub struct SctpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> SctpHeader<'a> {
    pub const LEN: usize = 12;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, Truncated> {
        if buf.len() < Self::LEN {
            return Err(Truncated);
        }
        Ok(SctpHeader { buf })
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buf, 0)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buf, 2)
    }

    pub fn verification_tag(&self) -> u32 {
        be32(self.buf, 4)
    }
}

/// The ICMP / ICMPv6 type and code (the first two bytes of the header).
#[derive(Clone, Copy, Debug)]
pub struct IcmpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> IcmpHeader<'a> {
    /// The type, code and checksum; most messages have 4 more header bytes.
    pub const MIN_LEN: usize = 2;
    /// The header length used for `payload_len`: type, code, checksum and
    /// the 4-byte rest-of-header that every common message has.
    pub const HEADER_LEN: usize = 8;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, Truncated> {
        if buf.len() < Self::MIN_LEN {
            return Err(Truncated);
        }
        Ok(IcmpHeader { buf })
    }

    pub fn msg_type(&self) -> u8 {
        self.buf[0]
    }

    pub fn code(&self) -> u8 {
        self.buf[1]
    }
}
