//! Building frames: the inverse of [`crate::decode`], for traffic generators
//! and tests. Checksums are computed, short frames padded to Ethernet's
//! 60-byte minimum, so that the frames are what a real host would send.

use crate::ip::proto;
use crate::link::ethertype;

/// The network header of a frame to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpSpec {
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
        ttl: u8,
        id: u16,
        dscp: u8,
        /// Raw flags + fragment offset field (DF = 0x4000).
        frag: u16,
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        hop_limit: u8,
        dscp: u8,
        flow_label: u32,
    },
}

/// The transport header of a frame to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportSpec {
    Tcp {
        sport: u16,
        dport: u16,
        seq: u32,
        ack: u32,
        flags: u16,
        window: u16,
    },
    Udp {
        sport: u16,
        dport: u16,
    },
    Sctp {
        sport: u16,
        dport: u16,
        vtag: u32,
    },
    /// ICMP for IPv4, ICMPv6 for IPv6.
    Icmp {
        msg_type: u8,
        code: u8,
    },
}

impl TransportSpec {
    fn header_len(&self) -> usize {
        match self {
            TransportSpec::Tcp { .. } => 20,
            TransportSpec::Udp { .. } => 8,
            TransportSpec::Sctp { .. } => 12,
            TransportSpec::Icmp { .. } => 8,
        }
    }
}

/// The payload after the transport header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    /// This many zero bytes.
    Zeros(usize),
    /// These bytes.
    Bytes(&'a [u8]),
}

impl Payload<'_> {
    pub fn len(&self) -> usize {
        match self {
            Payload::Zeros(n) => *n,
            Payload::Bytes(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An Ethernet frame to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSpec<'a> {
    pub eth_src: [u8; 6],
    pub eth_dst: [u8; 6],
    /// One 802.1Q tag with this VLAN id.
    pub vlan: Option<u16>,
    pub ip: IpSpec,
    pub transport: TransportSpec,
    pub payload: Payload<'a>,
}

/// The smallest Ethernet frame without its FCS.
pub const ETH_MIN_FRAME: usize = 60;

impl FrameSpec<'_> {
    /// Length of the built frame, padding included.
    pub fn frame_len(&self) -> usize {
        let ip_hdr = match self.ip {
            IpSpec::V4 { .. } => 20,
            IpSpec::V6 { .. } => 40,
        };
        let vlan = if self.vlan.is_some() { 4 } else { 0 };
        let len = 14 + vlan + ip_hdr + self.transport.header_len() + self.payload.len();
        len.max(ETH_MIN_FRAME)
    }

    /// The payload length that makes a frame of `frame_len` bytes (before
    /// padding), or 0 if the headers alone are longer.
    pub fn payload_for_frame_len(&self, frame_len: usize) -> usize {
        let without = FrameSpec {
            payload: Payload::Zeros(0),
            ..*self
        };
        let hdrs = 14
            + if self.vlan.is_some() { 4 } else { 0 }
            + match self.ip {
                IpSpec::V4 { .. } => 20,
                IpSpec::V6 { .. } => 40,
            }
            + without.transport.header_len();
        frame_len.saturating_sub(hdrs)
    }

    /// Appends the frame to `out` and returns its length.
    pub fn build(&self, out: &mut Vec<u8>) -> usize {
        let start = out.len();
        out.extend_from_slice(&self.eth_dst);
        out.extend_from_slice(&self.eth_src);
        if let Some(vid) = self.vlan {
            out.extend_from_slice(&ethertype::VLAN.to_be_bytes());
            out.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
        }
        let l4_len = self.transport.header_len() + self.payload.len();
        let ip_start = out.len() + 2;
        let (ip_proto, pseudo): (u8, PseudoHeader) = match self.ip {
            IpSpec::V4 {
                src,
                dst,
                ttl,
                id,
                dscp,
                frag,
            } => {
                out.extend_from_slice(&ethertype::IPV4.to_be_bytes());
                let p = self.ip_proto();
                let total = (20 + l4_len) as u16;
                out.push(0x45);
                out.push(dscp << 2);
                out.extend_from_slice(&total.to_be_bytes());
                out.extend_from_slice(&id.to_be_bytes());
                out.extend_from_slice(&frag.to_be_bytes());
                out.push(ttl);
                out.push(p);
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&src);
                out.extend_from_slice(&dst);
                let sum = checksum(&[&out[ip_start..ip_start + 20]], 0);
                out[ip_start + 10..ip_start + 12].copy_from_slice(&sum.to_be_bytes());
                (p, PseudoHeader::V4 { src, dst })
            }
            IpSpec::V6 {
                src,
                dst,
                hop_limit,
                dscp,
                flow_label,
            } => {
                out.extend_from_slice(&ethertype::IPV6.to_be_bytes());
                let p = self.ip_proto();
                let first = (6u32 << 28) | ((dscp as u32) << 22) | (flow_label & 0x000f_ffff);
                out.extend_from_slice(&first.to_be_bytes());
                out.extend_from_slice(&(l4_len as u16).to_be_bytes());
                out.push(p);
                out.push(hop_limit);
                out.extend_from_slice(&src);
                out.extend_from_slice(&dst);
                (p, PseudoHeader::V6 { src, dst })
            }
        };
        let l4_start = out.len();
        let csum_at = match self.transport {
            TransportSpec::Tcp {
                sport,
                dport,
                seq,
                ack,
                flags,
                window,
            } => {
                out.extend_from_slice(&sport.to_be_bytes());
                out.extend_from_slice(&dport.to_be_bytes());
                out.extend_from_slice(&seq.to_be_bytes());
                out.extend_from_slice(&ack.to_be_bytes());
                out.push((5 << 4) | ((flags >> 8) & 1) as u8);
                out.push(flags as u8);
                out.extend_from_slice(&window.to_be_bytes());
                out.extend_from_slice(&[0, 0, 0, 0]);
                Some(16)
            }
            TransportSpec::Udp { sport, dport } => {
                out.extend_from_slice(&sport.to_be_bytes());
                out.extend_from_slice(&dport.to_be_bytes());
                out.extend_from_slice(&(l4_len as u16).to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                Some(6)
            }
            TransportSpec::Sctp { sport, dport, vtag } => {
                out.extend_from_slice(&sport.to_be_bytes());
                out.extend_from_slice(&dport.to_be_bytes());
                out.extend_from_slice(&vtag.to_be_bytes());
                // SCTP uses CRC32c; weir's generator leaves it zero.
                out.extend_from_slice(&[0, 0, 0, 0]);
                None
            }
            TransportSpec::Icmp { msg_type, code } => {
                out.push(msg_type);
                out.push(code);
                out.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
                Some(2)
            }
        };
        match self.payload {
            Payload::Zeros(n) => out.resize(out.len() + n, 0),
            Payload::Bytes(b) => out.extend_from_slice(b),
        }
        if let Some(at) = csum_at {
            let with_pseudo = ip_proto != proto::ICMP;
            let init = if with_pseudo {
                pseudo.sum(ip_proto, l4_len as u32)
            } else {
                0
            };
            let mut sum = checksum(&[&out[l4_start..]], init);
            if ip_proto == proto::UDP && sum == 0 {
                sum = 0xffff;
            }
            out[l4_start + at..l4_start + at + 2].copy_from_slice(&sum.to_be_bytes());
        }
        if out.len() - start < ETH_MIN_FRAME {
            out.resize(start + ETH_MIN_FRAME, 0);
        }
        out.len() - start
    }

    fn ip_proto(&self) -> u8 {
        match (self.transport, self.ip) {
            (TransportSpec::Tcp { .. }, _) => proto::TCP,
            (TransportSpec::Udp { .. }, _) => proto::UDP,
            (TransportSpec::Sctp { .. }, _) => proto::SCTP,
            (TransportSpec::Icmp { .. }, IpSpec::V4 { .. }) => proto::ICMP,
            (TransportSpec::Icmp { .. }, IpSpec::V6 { .. }) => proto::ICMPV6,
        }
    }
}

enum PseudoHeader {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

impl PseudoHeader {
    /// The one's-complement sum of the pseudo-header, unfolded.
    fn sum(&self, proto_num: u8, l4_len: u32) -> u32 {
        let (s, d): (&[u8], &[u8]) = match self {
            PseudoHeader::V4 { src, dst } => (src, dst),
            PseudoHeader::V6 { src, dst } => (src, dst),
        };
        let mut acc = sum_words(s) + sum_words(d);
        acc += proto_num as u32;
        acc += l4_len >> 16;
        acc += l4_len & 0xffff;
        acc
    }
}

fn sum_words(b: &[u8]) -> u32 {
    let mut acc = 0u32;
    let mut chunks = b.chunks_exact(2);
    for c in &mut chunks {
        acc = acc.wrapping_add(u16::from_be_bytes([c[0], c[1]]) as u32);
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add((*last as u32) << 8);
    }
    acc
}

/// The Internet checksum (RFC 1071) over `parts`, starting from `init`.
pub fn checksum(parts: &[&[u8]], init: u32) -> u16 {
    let mut acc = init as u64;
    for p in parts {
        acc += sum_words(p) as u64;
    }
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}
