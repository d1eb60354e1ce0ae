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

/// An encapsulation to wrap a built Ethernet frame in: the inverse of
/// [`crate::tunnel`], for generators and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncapSpec<'a> {
    /// The inner Ethernet frame in VXLAN, over UDP to port 4789.
    Vxlan { vni: u32 },
    /// The inner Ethernet frame in GENEVE (with `option_words` 4-byte words
    /// of options), over UDP to port 6081.
    Geneve { vni: u32, option_words: u8 },
    /// The inner IP packet (or, with `ethernet`, the whole frame as
    /// transparent Ethernet bridging) in GRE, with the optional fields.
    Gre {
        key: Option<u32>,
        seq: Option<u32>,
        checksum: bool,
        ethernet: bool,
    },
    /// The inner Ethernet frame mirrored with ERSPAN type II (`Some`
    /// session) or type I (`None`: no sequence number, no header).
    Erspan2 { session: Option<u16> },
    /// The inner Ethernet frame mirrored with ERSPAN type III.
    Erspan3 { session: u16, platform: bool },
    /// The inner IP packet directly in the outer IP header.
    IpIp,
    /// The inner IP packet in a GTP-U G-PDU, over UDP to port 2152, with
    /// one extension header (a PDU session container) if `extension`.
    Gtpu { teid: u32, extension: bool },
    /// The inner IP packet under these MPLS labels (the last at the bottom
    /// of the stack), in Ethernet: no outer IP header.
    Mpls { labels: &'a [u32] },
    /// The inner IP packet in a PPPoE session, in Ethernet: no outer IP
    /// header.
    Pppoe { session: u16 },
    /// The inner IP packet redirected by WCCP (version 2, with a redirect
    /// header naming `service`) in GRE.
    Wccp { service: u8 },
    /// The inner IP packet behind a Cisco MetaData header (security group
    /// tag `sgt`) in GRE, with a key if given.
    Cmd { key: Option<u32>, sgt: u16 },
    /// The inner IP packet in VXLAN-GPE, over UDP to port 4790: directly,
    /// or under a Network Service Header of service path `nsh`.
    VxlanGpe { vni: u32, nsh: Option<u32> },
    /// The inner IP packet under a Network Service Header of service path
    /// `spi` (with one context header), in Ethernet: no outer IP header.
    Nsh { spi: u32 },
    /// The inner IP packet under these MPLS labels, over UDP to port 6635
    /// (RFC 7510).
    MplsUdp { labels: &'a [u32] },
    /// The inner IP packet in a PIM Register (IP protocol 103).
    PimRegister,
}

impl EncapSpec<'_> {
    /// Whether the encapsulation has an IP header of its own: all but
    /// those that lie below IP, in the Ethernet frame itself (MPLS, PPPoE,
    /// NSH), which is why they are built over IPv4 only.
    pub fn has_outer_ip(&self) -> bool {
        !matches!(
            self,
            EncapSpec::Mpls { .. } | EncapSpec::Pppoe { .. } | EncapSpec::Nsh { .. }
        )
    }
}

impl EncapSpec<'static> {
    /// One of each encapsulation weir builds, in each of its forms (GRE
    /// with every optional field and with none, over IP and as Ethernet;
    /// ERSPAN of each type, with and without a platform subheader; GTP-U
    /// with and without an extension header; VXLAN-GPE with and without
    /// NSH): what tests wrap frames in.
    pub fn every() -> Vec<EncapSpec<'static>> {
        vec![
            EncapSpec::Vxlan { vni: 0xabcdef },
            EncapSpec::Geneve {
                vni: 77,
                option_words: 3,
            },
            EncapSpec::Gre {
                key: Some(0xdead_beef),
                seq: Some(5),
                checksum: true,
                ethernet: false,
            },
            EncapSpec::Gre {
                key: None,
                seq: None,
                checksum: false,
                ethernet: true,
            },
            EncapSpec::Erspan2 { session: Some(513) },
            EncapSpec::Erspan2 { session: None },
            EncapSpec::Erspan3 {
                session: 1023,
                platform: true,
            },
            EncapSpec::Erspan3 {
                session: 4,
                platform: false,
            },
            EncapSpec::IpIp,
            EncapSpec::Gtpu {
                teid: 0x0102_0304,
                extension: true,
            },
            EncapSpec::Gtpu {
                teid: 7,
                extension: false,
            },
            EncapSpec::Mpls {
                labels: &[1000, 2000, 16],
            },
            EncapSpec::Pppoe { session: 0x1234 },
            EncapSpec::Wccp { service: 89 },
            EncapSpec::Cmd {
                key: Some(0x28),
                sgt: 17,
            },
            EncapSpec::VxlanGpe {
                vni: 0x12_3456,
                nsh: Some(0xff_fffe),
            },
            EncapSpec::VxlanGpe { vni: 9, nsh: None },
            EncapSpec::Nsh { spi: 42 },
            EncapSpec::MplsUdp { labels: &[21, 300] },
            EncapSpec::PimRegister,
        ]
    }
}

/// The outer Ethernet and IP header of an encapsulated frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OuterSpec {
    pub eth_src: [u8; 6],
    pub eth_dst: [u8; 6],
    /// IPv4 or IPv6 addresses (the other fields of the spec are used as
    /// they are; `frag` should be 0 or DF).
    pub ip: IpSpec,
}

/// The IP packet of an Ethernet frame built by [`FrameSpec::build`]
/// (without padding), and its ethertype.
pub fn ip_packet_of(frame: &[u8]) -> (u16, &[u8]) {
    let mut at = 12;
    let mut ty = u16::from_be_bytes([frame[at], frame[at + 1]]);
    while ethertype::is_vlan_tag(ty) {
        at += 4;
        ty = u16::from_be_bytes([frame[at], frame[at + 1]]);
    }
    let ip = &frame[at + 2..];
    let len = if ty == ethertype::IPV6 {
        40 + u16::from_be_bytes([ip[4], ip[5]]) as usize
    } else {
        u16::from_be_bytes([ip[2], ip[3]]) as usize
    };
    (ty, &ip[..len.min(ip.len())])
}

/// Appends `inner` (an Ethernet frame built by [`FrameSpec::build`])
/// wrapped in `encap` under `outer`, and returns the frame's length. UDP
/// source ports are taken from the inner flow, as tunnel endpoints do to
/// spread flows.
pub fn encapsulate(inner: &[u8], encap: &EncapSpec, outer: &OuterSpec, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    let (inner_type, inner_ip) = ip_packet_of(inner);
    let sport = 0xc000
        | (crate::decode::flow_hash_of(crate::LinkType::ETHERNET, inner, inner.len() as u32)
            .unwrap_or(0)
            & 0x3fff) as u16;
    out.extend_from_slice(&outer.eth_dst);
    out.extend_from_slice(&outer.eth_src);
    // The encapsulation's own header and what it carries.
    let mut body = Vec::new();
    let (ip_proto, udp_dport) = match *encap {
        EncapSpec::Mpls { labels } => {
            out.extend_from_slice(&ethertype::MPLS.to_be_bytes());
            for (i, l) in labels.iter().enumerate() {
                let bottom = if i + 1 == labels.len() { 0x100 } else { 0 };
                out.extend_from_slice(&((l << 12) | bottom | 64).to_be_bytes());
            }
            out.extend_from_slice(inner_ip);
            return pad(out, start);
        }
        EncapSpec::Nsh { spi } => {
            out.extend_from_slice(&ethertype::NSH.to_be_bytes());
            nsh_header(spi, inner_type, out);
            out.extend_from_slice(inner_ip);
            return pad(out, start);
        }
        EncapSpec::Pppoe { session } => {
            out.extend_from_slice(&ethertype::PPPOE_SESSION.to_be_bytes());
            out.extend_from_slice(&[0x11, 0]);
            out.extend_from_slice(&session.to_be_bytes());
            out.extend_from_slice(&((inner_ip.len() + 2) as u16).to_be_bytes());
            let ppp: u16 = if inner_type == ethertype::IPV6 {
                0x0057
            } else {
                0x0021
            };
            out.extend_from_slice(&ppp.to_be_bytes());
            out.extend_from_slice(inner_ip);
            return pad(out, start);
        }
        EncapSpec::Vxlan { vni } => {
            body.extend_from_slice(&[0x08, 0, 0, 0]);
            body.extend_from_slice(&(vni << 8).to_be_bytes());
            body.extend_from_slice(inner);
            (proto::UDP, crate::tunnel::udp_port::VXLAN)
        }
        EncapSpec::Geneve { vni, option_words } => {
            body.push(option_words & 0x3f);
            body.push(0);
            body.extend_from_slice(&ethertype::TEB.to_be_bytes());
            body.extend_from_slice(&(vni << 8).to_be_bytes());
            for w in 0..option_words {
                // One option class/type/length word, then its data words.
                if w == 0 {
                    body.extend_from_slice(&[0x01, 0x02, 0x03, option_words - 1]);
                } else {
                    body.extend_from_slice(&[0xab; 4]);
                }
            }
            body.extend_from_slice(inner);
            (proto::UDP, crate::tunnel::udp_port::GENEVE)
        }
        EncapSpec::Gre {
            key,
            seq,
            checksum,
            ethernet,
        } => {
            let flags =
                (checksum as u8) << 7 | (key.is_some() as u8) << 5 | (seq.is_some() as u8) << 4;
            let ty = if ethernet { ethertype::TEB } else { inner_type };
            body.extend_from_slice(&[flags, 0]);
            body.extend_from_slice(&ty.to_be_bytes());
            if checksum {
                body.extend_from_slice(&[0, 0, 0, 0]);
            }
            if let Some(k) = key {
                body.extend_from_slice(&k.to_be_bytes());
            }
            if let Some(s) = seq {
                body.extend_from_slice(&s.to_be_bytes());
            }
            body.extend_from_slice(if ethernet { inner } else { inner_ip });
            if checksum {
                let sum = checksum_of(&body);
                body[4..6].copy_from_slice(&sum.to_be_bytes());
            }
            (proto::GRE, 0)
        }
        EncapSpec::Erspan2 { session } => {
            match session {
                Some(s) => {
                    body.extend_from_slice(&[0x10, 0]);
                    body.extend_from_slice(&ethertype::ERSPAN.to_be_bytes());
                    body.extend_from_slice(&1u32.to_be_bytes());
                    // Version 1, VLAN 0; COS, encapsulation, T, session id;
                    // reserved, index.
                    body.extend_from_slice(&[0x10, 0x00]);
                    body.extend_from_slice(&(s & 0x3ff).to_be_bytes());
                    body.extend_from_slice(&[0, 0, 0, 1]);
                }
                None => {
                    body.extend_from_slice(&[0, 0]);
                    body.extend_from_slice(&ethertype::ERSPAN.to_be_bytes());
                }
            }
            body.extend_from_slice(inner);
            (proto::GRE, 0)
        }
        EncapSpec::Erspan3 { session, platform } => {
            body.extend_from_slice(&[0x10, 0]);
            body.extend_from_slice(&ethertype::ERSPAN3.to_be_bytes());
            body.extend_from_slice(&1u32.to_be_bytes());
            // Version 2, VLAN 0; session; timestamp; SGT; P, FT 0, hw id,
            // D, granularity, O.
            body.extend_from_slice(&[0x20, 0x00]);
            body.extend_from_slice(&(session & 0x3ff).to_be_bytes());
            body.extend_from_slice(&0x1234_5678u32.to_be_bytes());
            body.extend_from_slice(&[0, 0, 0, 0x06 | platform as u8]);
            if platform {
                body.extend_from_slice(&[0x0c, 0, 0, 0, 0, 0, 0, 0]);
            }
            body.extend_from_slice(inner);
            (proto::GRE, 0)
        }
        EncapSpec::Wccp { service } => {
            body.extend_from_slice(&[0, 0]);
            body.extend_from_slice(&ethertype::WCCP.to_be_bytes());
            // Dynamic service, primary bucket used; alternate and primary
            // bucket.
            body.extend_from_slice(&[0x01, service, 0, 7]);
            body.extend_from_slice(inner_ip);
            (proto::GRE, 0)
        }
        EncapSpec::Cmd { key, sgt } => {
            body.extend_from_slice(&[(key.is_some() as u8) << 5, 0]);
            body.extend_from_slice(&ethertype::CMD.to_be_bytes());
            if let Some(k) = key {
                body.extend_from_slice(&k.to_be_bytes());
            }
            // The payload's ethertype; version 1, length 1, option 1 (SGT).
            body.extend_from_slice(&inner_type.to_be_bytes());
            body.extend_from_slice(&[1, 1, 0, 1]);
            body.extend_from_slice(&sgt.to_be_bytes());
            body.extend_from_slice(inner_ip);
            (proto::GRE, 0)
        }
        EncapSpec::VxlanGpe { vni, nsh } => {
            // Flags: VNI and next protocol present.
            let next = match nsh {
                Some(_) => 4,
                None => next_protocol_of(inner_type),
            };
            body.extend_from_slice(&[0x0c, 0, 0, next]);
            body.extend_from_slice(&(vni << 8).to_be_bytes());
            if let Some(spi) = nsh {
                nsh_header(spi, inner_type, &mut body);
            }
            body.extend_from_slice(inner_ip);
            (proto::UDP, crate::tunnel::udp_port::VXLAN_GPE)
        }
        EncapSpec::MplsUdp { labels } => {
            for (i, l) in labels.iter().enumerate() {
                let bottom = if i + 1 == labels.len() { 0x100 } else { 0 };
                body.extend_from_slice(&((l << 12) | bottom | 64).to_be_bytes());
            }
            body.extend_from_slice(inner_ip);
            (proto::UDP, crate::tunnel::udp_port::MPLS)
        }
        EncapSpec::PimRegister => {
            // Version 2, type 1; the checksum covers the 8-byte header
            // only; no border or null-register bit.
            body.extend_from_slice(&[0x21, 0, 0, 0, 0, 0, 0, 0]);
            let sum = checksum_of(&body);
            body[2..4].copy_from_slice(&sum.to_be_bytes());
            body.extend_from_slice(inner_ip);
            (proto::PIM, 0)
        }
        EncapSpec::IpIp => {
            body.extend_from_slice(inner_ip);
            let p = if inner_type == ethertype::IPV6 {
                proto::IPV6_ENCAP
            } else {
                proto::IPIP
            };
            (p, 0)
        }
        EncapSpec::Gtpu { teid, extension } => {
            let mut payload = Vec::new();
            if extension {
                // Sequence number, N-PDU, next type 0x85 (PDU session
                // container): one 4-byte extension header, then no more.
                payload.extend_from_slice(&[0, 1, 0, 0x85, 1, 0x00, 0x09, 0]);
            }
            payload.extend_from_slice(inner_ip);
            body.push(if extension { 0x34 } else { 0x30 });
            body.push(255);
            body.extend_from_slice(&(payload.len() as u16).to_be_bytes());
            body.extend_from_slice(&teid.to_be_bytes());
            body.extend_from_slice(&payload);
            (proto::UDP, crate::tunnel::udp_port::GTPU)
        }
    };
    let l4_len = body.len() + if ip_proto == proto::UDP { 8 } else { 0 };
    let pseudo = match outer.ip {
        IpSpec::V4 {
            src,
            dst,
            ttl,
            id,
            dscp,
            frag,
        } => {
            out.extend_from_slice(&ethertype::IPV4.to_be_bytes());
            let at = out.len();
            out.push(0x45);
            out.push(dscp << 2);
            out.extend_from_slice(&((20 + l4_len) as u16).to_be_bytes());
            out.extend_from_slice(&id.to_be_bytes());
            out.extend_from_slice(&frag.to_be_bytes());
            out.extend_from_slice(&[ttl, ip_proto, 0, 0]);
            out.extend_from_slice(&src);
            out.extend_from_slice(&dst);
            let sum = checksum(&[&out[at..at + 20]], 0);
            out[at + 10..at + 12].copy_from_slice(&sum.to_be_bytes());
            PseudoHeader::V4 { src, dst }
        }
        IpSpec::V6 {
            src,
            dst,
            hop_limit,
            dscp,
            flow_label,
        } => {
            out.extend_from_slice(&ethertype::IPV6.to_be_bytes());
            let first = (6u32 << 28) | ((dscp as u32) << 22) | (flow_label & 0x000f_ffff);
            out.extend_from_slice(&first.to_be_bytes());
            out.extend_from_slice(&(l4_len as u16).to_be_bytes());
            out.extend_from_slice(&[ip_proto, hop_limit]);
            out.extend_from_slice(&src);
            out.extend_from_slice(&dst);
            PseudoHeader::V6 { src, dst }
        }
    };
    if ip_proto == proto::UDP {
        let at = out.len();
        out.extend_from_slice(&sport.to_be_bytes());
        out.extend_from_slice(&udp_dport.to_be_bytes());
        out.extend_from_slice(&(l4_len as u16).to_be_bytes());
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&body);
        let mut sum = checksum(&[&out[at..]], pseudo.sum(proto::UDP, l4_len as u32));
        if sum == 0 {
            sum = 0xffff;
        }
        out[at + 6..at + 8].copy_from_slice(&sum.to_be_bytes());
    } else {
        out.extend_from_slice(&body);
    }
    pad(out, start)
}

/// The next-protocol number VXLAN-GPE and NSH give an IP packet of
/// ethertype `ty`.
fn next_protocol_of(ty: u16) -> u8 {
    if ty == ethertype::IPV6 { 2 } else { 1 }
}

/// A Network Service Header (version 0, MD type 2) of service path `spi`,
/// index 255, with one context header (an empty variable-length one), for
/// an IP packet of ethertype `inner_type`.
fn nsh_header(spi: u32, inner_type: u16, out: &mut Vec<u8>) {
    // Version 0, TTL 63, length 3 words; MD type 2; next protocol.
    out.extend_from_slice(&[0x0f, 0xc3, 0x02, next_protocol_of(inner_type)]);
    out.extend_from_slice(&((spi << 8) | 0xff).to_be_bytes());
    out.extend_from_slice(&[0x00, 0x01, 0x02, 0x00]);
}

fn checksum_of(b: &[u8]) -> u16 {
    checksum(&[b], 0)
}

/// Pads a frame begun at `start` to Ethernet's minimum; its length.
fn pad(out: &mut Vec<u8>, start: usize) -> usize {
    if out.len() - start < ETH_MIN_FRAME {
        out.resize(start + ETH_MIN_FRAME, 0);
    }
    out.len() - start
}
