//! IPv4 and IPv6 header views, and the IPv6 extension-header chain.

use crate::bytes::{array, be16, be32};
use crate::link::Truncated;

/// IP protocol numbers weir looks at.
pub mod proto {
    pub const HOPOPT: u8 = 0;
    pub const ICMP: u8 = 1;
    /// IPv4 encapsulated in IP.
    pub const IPIP: u8 = 4;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    /// IPv6 encapsulated in IP.
    pub const IPV6_ENCAP: u8 = 41;
    pub const IPV6_ROUTING: u8 = 43;
    pub const IPV6_FRAGMENT: u8 = 44;
    pub const GRE: u8 = 47;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const IPV6_NONXT: u8 = 59;
    pub const IPV6_DSTOPTS: u8 = 60;
    pub const PIM: u8 = 103;
    pub const SCTP: u8 = 132;
}

/// Maps an IPv4 address into IPv6 space (`::ffff:a.b.c.d`).
#[inline]
pub fn v4_mapped(a: [u8; 4]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[10] = 0xff;
    out[11] = 0xff;
    out[12..].copy_from_slice(&a);
    out
}

/// The IPv4 address inside an IPv4-mapped IPv6 address, if it is one.
#[inline]
pub fn v4_unmapped(a: &[u8; 16]) -> Option<[u8; 4]> {
    if a[..10].iter().all(|&b| b == 0) && a[10] == 0xff && a[11] == 0xff {
        Some([a[12], a[13], a[14], a[15]])
    } else {
        None
    }
}

/// Formats a 16-byte address the way people write it: dotted quad for
/// IPv4-mapped addresses, RFC 5952 for IPv6.
pub fn format_addr(a: &[u8; 16]) -> String {
    match v4_unmapped(a) {
        Some(v4) => std::net::Ipv4Addr::from(v4).to_string(),
        None => std::net::Ipv6Addr::from(*a).to_string(),
    }
}

/// An IPv4 header. `new_checked` guarantees the fixed 20 bytes; options and
/// the total length are checked by the caller through [`Ipv4Packet::header_len`]
/// and [`Ipv4Packet::total_len`].
#[derive(Clone, Copy, Debug)]
pub struct Ipv4Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv4Packet<'a> {
    pub const MIN_HEADER_LEN: usize = 20;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, Truncated> {
        if buf.len() < Self::MIN_HEADER_LEN {
            return Err(Truncated);
        }
        Ok(Ipv4Packet { buf })
    }

    pub fn version(&self) -> u8 {
        self.buf[0] >> 4
    }

    /// Header length in bytes (IHL × 4); may be below 20 in a bad packet.
    pub fn header_len(&self) -> usize {
        ((self.buf[0] & 0x0f) as usize) * 4
    }

    pub fn dscp(&self) -> u8 {
        self.buf[1] >> 2
    }

    pub fn ecn(&self) -> u8 {
        self.buf[1] & 0x03
    }

    pub fn total_len(&self) -> u16 {
        be16(self.buf, 2)
    }

    pub fn ident(&self) -> u16 {
        be16(self.buf, 4)
    }

    /// Flags and fragment offset as on the wire: DF 0x4000, MF 0x2000,
    /// offset in 8-byte units in the low 13 bits.
    pub fn frag_field(&self) -> u16 {
        be16(self.buf, 6)
    }

    pub fn more_fragments(&self) -> bool {
        self.frag_field() & 0x2000 != 0
    }

    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        self.frag_field() & 0x1fff
    }

    pub fn ttl(&self) -> u8 {
        self.buf[8]
    }

    pub fn protocol(&self) -> u8 {
        self.buf[9]
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buf, 10)
    }

    pub fn src(&self) -> [u8; 4] {
        array(self.buf, 12)
    }

    pub fn dst(&self) -> [u8; 4] {
        array(self.buf, 16)
    }

    /// The bytes after the header, up to what was captured.
    pub fn after_header(&self) -> Option<&'a [u8]> {
        self.buf.get(self.header_len()..)
    }
}

/// The fixed IPv6 header.
#[derive(Clone, Copy, Debug)]
pub struct Ipv6Packet<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv6Packet<'a> {
    pub const HEADER_LEN: usize = 40;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, Truncated> {
        if buf.len() < Self::HEADER_LEN {
            return Err(Truncated);
        }
        Ok(Ipv6Packet { buf })
    }

    pub fn version(&self) -> u8 {
        self.buf[0] >> 4
    }

    pub fn traffic_class(&self) -> u8 {
        ((be16(self.buf, 0) >> 4) & 0xff) as u8
    }

    pub fn flow_label(&self) -> u32 {
        be32(self.buf, 0) & 0x000f_ffff
    }

    pub fn payload_len(&self) -> u16 {
        be16(self.buf, 4)
    }

    pub fn next_header(&self) -> u8 {
        self.buf[6]
    }

    pub fn hop_limit(&self) -> u8 {
        self.buf[7]
    }

    pub fn src(&self) -> [u8; 16] {
        array(self.buf, 8)
    }

    pub fn dst(&self) -> [u8; 16] {
        array(self.buf, 24)
    }

    pub fn payload(&self) -> &'a [u8] {
        &self.buf[Self::HEADER_LEN..]
    }
}

/// What the IPv6 extension-header chain led to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Chain {
    /// The protocol after the last extension header.
    pub upper_proto: u8,
    /// Bytes of extension headers walked.
    pub ext_len: usize,
    /// Fragment header, if one was present: (identification, offset in
    /// 8-byte units, more-fragments flag).
    pub fragment: Option<(u32, u16, bool)>,
}

/// The chain ended inside an extension header, or was malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadChain {
    /// How far the chain got before it broke.
    pub partial: Ipv6Chain,
}

/// Walks hop-by-hop, routing, fragment, destination-options and AH headers
/// from `first` over `buf` (the bytes after the fixed header). Stops at the
/// first header that is not an extension header, and after a non-first
/// fragment's header (what follows is not a header).
pub fn walk_ipv6_chain(first: u8, buf: &[u8]) -> Result<Ipv6Chain, BadChain> {
    let mut chain = Ipv6Chain {
        upper_proto: first,
        ext_len: 0,
        fragment: None,
    };
    // Every extension header is at least 8 bytes, so the walk is bounded by
    // the buffer; the cap only guards against absurd but valid-looking chains.
    for _ in 0..32 {
        let rest = &buf[chain.ext_len..];
        let len = match chain.upper_proto {
            proto::HOPOPT | proto::IPV6_ROUTING | proto::IPV6_DSTOPTS => {
                if rest.len() < 2 {
                    return Err(BadChain { partial: chain });
                }
                (rest[1] as usize + 1) * 8
            }
            proto::AH => {
                if rest.len() < 2 {
                    return Err(BadChain { partial: chain });
                }
                (rest[1] as usize + 2) * 4
            }
            proto::IPV6_FRAGMENT => {
                if rest.len() < 8 {
                    return Err(BadChain { partial: chain });
                }
                let off_m = be16(rest, 2);
                let offset = off_m >> 3;
                let more = off_m & 1 != 0;
                chain.fragment = Some((be32(rest, 4), offset, more));
                8
            }
            _ => return Ok(chain),
        };
        if rest.len() < len {
            return Err(BadChain { partial: chain });
        }
        chain.upper_proto = rest[0];
        chain.ext_len += len;
        if let Some((_, offset, _)) = chain.fragment
            && offset != 0
        {
            return Ok(chain);
        }
    }
    Err(BadChain { partial: chain })
}
