//! Encapsulation headers: MPLS (on a link or in UDP), PPPoE sessions, GRE
//! (and ERSPAN, WCCP and Cisco MetaData in it), VXLAN, VXLAN-GPE, NSH,
//! GENEVE, GTP-U, PIM Registers, and IP in IP.
//!
//! Each parser checks the length of its header once (a variable part, as
//! GENEVE's options or GTP-U's extension headers, once more per part), and
//! says what it is, its id, and what follows it, as a [`Next`] that
//! [`crate::decode`] and [`crate::decode::flow_hash_of`] both walk on from.

use crate::bytes::{be16, be32};
use crate::link::ethertype;
use crate::record::{ParseError, Tunnel};

/// UDP destination ports that announce an encapsulation.
pub mod udp_port {
    pub const VXLAN: u16 = 4789;
    pub const GENEVE: u16 = 6081;
    pub const GTPU: u16 = 2152;
    pub const VXLAN_GPE: u16 = 4790;
    /// MPLS in UDP (RFC 7510).
    pub const MPLS: u16 = 6635;
}

/// How many MPLS labels are followed before giving up.
pub const MAX_MPLS_LABELS: usize = 8;

/// How many GTP-U extension headers are followed before giving up.
pub const MAX_GTPU_EXTENSIONS: usize = 16;

/// What follows an encapsulation header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next<'a> {
    /// An Ethernet frame.
    Ethernet(&'a [u8]),
    /// A payload of this ethertype.
    Ethertype(u16, &'a [u8]),
    /// An IP packet, IPv4 or IPv6 by its version nibble (MPLS and GTP-U
    /// carry no protocol field).
    Ip(&'a [u8]),
    /// Nothing weir decodes.
    Stop,
}

/// A parsed encapsulation header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encap<'a> {
    /// [`Tunnel::None`] when the header turned out not to carry a packet
    /// (a GTP-U signalling message, a GRE version weir does not read): the
    /// walk ends there and it does not count as an encapsulation.
    pub tunnel: Tunnel,
    pub id: Option<u32>,
    pub next: Next<'a>,
    /// The error for an inner packet that is cut off before its first byte.
    pub truncated: ParseError,
}

impl<'a> Encap<'a> {
    fn not_a_tunnel(truncated: ParseError) -> Self {
        Encap {
            tunnel: Tunnel::None,
            id: None,
            next: Next::Stop,
            truncated,
        }
    }
}

/// What follows a tunnel header of protocol type `ty`: transparent
/// Ethernet bridging is an Ethernet frame. Only a tunnel's protocol type
/// means that, never an Ethernet header's own ethertype: so every Ethernet
/// header inside a frame lies past one more encapsulation, and the walk
/// (and its kernel twin, `capture::shard`) ends within the encapsulation
/// limit.
fn after_type(ty: u16, payload: &[u8]) -> Next<'_> {
    if ty == ethertype::TEB {
        Next::Ethernet(payload)
    } else {
        Next::Ethertype(ty, payload)
    }
}

/// An MPLS label stack: 4-byte entries (label 20 bits, TC 3, bottom-of-
/// stack 1, TTL 8) down to the one with the bottom bit. What follows has
/// no type field; an IP version nibble is taken as IP (as tcpdump and
/// tshark guess), anything else (pseudowires) is not decoded.
pub fn mpls(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    let mut at = 0;
    let mut top = None;
    loop {
        if at == MAX_MPLS_LABELS * 4 || buf.len() < at + 4 {
            return Err(ParseError::TruncatedMpls);
        }
        let entry = be32(buf, at);
        top.get_or_insert(entry >> 12);
        at += 4;
        if entry & 0x100 != 0 {
            break;
        }
    }
    Ok(Encap {
        tunnel: Tunnel::Mpls,
        id: top,
        next: Next::Ip(&buf[at..]),
        truncated: ParseError::TruncatedMpls,
    })
}

/// A PPPoE session header (version/type 0x11, code 0, session id, length)
/// and the PPP protocol field after it.
pub fn pppoe(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    const LEN: usize = 8;
    if buf.len() < LEN {
        return Err(ParseError::TruncatedPppoe);
    }
    if buf[0] != 0x11 || buf[1] != 0 {
        return Ok(Encap::not_a_tunnel(ParseError::TruncatedPppoe));
    }
    // The length counts the PPP protocol field and its payload; cut there
    // so Ethernet padding is not taken for payload.
    let end = (6 + be16(buf, 4) as usize).clamp(LEN, buf.len());
    let payload = &buf[LEN..end];
    let next = match be16(buf, 6) {
        0x0021 => Next::Ethertype(ethertype::IPV4, payload),
        0x0057 => Next::Ethertype(ethertype::IPV6, payload),
        _ => Next::Stop,
    };
    Ok(Encap {
        tunnel: Tunnel::Pppoe,
        id: Some(be16(buf, 2) as u32),
        next,
        truncated: ParseError::TruncatedPppoe,
    })
}

/// A GRE header (RFC 2784, with RFC 2890's key and sequence number), and
/// for ERSPAN the ERSPAN header after it, for WCCP its redirect header.
/// Only version 0 without RFC 1701 routing is followed; other GRE (PPTP's
/// version 1) counts as a GRE tunnel whose payload is not decoded. A Cisco
/// MetaData header (protocol type 0x8909) is read as part of the GRE
/// tunnel: an ethertype, then 6 bytes of version, length, option and
/// security group tag, then a payload of that ethertype.
pub fn gre(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    const CHECKSUM: u8 = 0x80;
    const ROUTING: u8 = 0x40;
    const KEY: u8 = 0x20;
    const SEQUENCE: u8 = 0x10;
    if buf.len() < 4 {
        return Err(ParseError::TruncatedGre);
    }
    let flags = buf[0];
    if flags & ROUTING != 0 || buf[1] & 0x07 != 0 {
        return Ok(Encap {
            tunnel: Tunnel::Gre,
            id: None,
            next: Next::Stop,
            truncated: ParseError::TruncatedGre,
        });
    }
    let has = |f: u8| (flags & f != 0) as usize;
    let len = 4 + 4 * (has(CHECKSUM) + has(KEY) + has(SEQUENCE));
    if buf.len() < len {
        return Err(ParseError::TruncatedGre);
    }
    let key = (flags & KEY != 0).then(|| be32(buf, 4 + 4 * has(CHECKSUM)));
    let payload = &buf[len..];
    match be16(buf, 2) {
        // Type I has no header of its own (and no sequence number); type II
        // an 8-byte one.
        ethertype::ERSPAN if flags & SEQUENCE == 0 => Ok(Encap {
            tunnel: Tunnel::Erspan,
            id: None,
            next: Next::Ethernet(payload),
            truncated: ParseError::TruncatedErspan,
        }),
        ethertype::ERSPAN => {
            if payload.len() < 8 {
                return Err(ParseError::TruncatedErspan);
            }
            Ok(Encap {
                tunnel: Tunnel::Erspan,
                id: Some((be16(payload, 2) & 0x3ff) as u32),
                next: Next::Ethernet(&payload[8..]),
                truncated: ParseError::TruncatedErspan,
            })
        }
        ethertype::ERSPAN3 => erspan3(payload),
        ethertype::WCCP => wccp(payload),
        ethertype::CMD => {
            if payload.len() < 8 {
                return Err(ParseError::TruncatedGre);
            }
            Ok(Encap {
                tunnel: Tunnel::Gre,
                id: key,
                next: Next::Ethertype(be16(payload, 0), &payload[8..]),
                truncated: ParseError::TruncatedGre,
            })
        }
        proto => Ok(Encap {
            tunnel: Tunnel::Gre,
            id: key,
            next: after_type(proto, payload),
            truncated: ParseError::TruncatedGre,
        }),
    }
}

/// An ERSPAN type III header: 12 bytes, and an 8-byte platform-specific
/// subheader when its O flag is set. Frame type 0 is Ethernet; others are
/// not decoded.
fn erspan3(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    if buf.len() < 12 {
        return Err(ParseError::TruncatedErspan);
    }
    let len = if buf[11] & 0x01 != 0 { 20 } else { 12 };
    if buf.len() < len {
        return Err(ParseError::TruncatedErspan);
    }
    let frame_type = (buf[10] >> 2) & 0x1f;
    Ok(Encap {
        tunnel: Tunnel::Erspan,
        id: Some((be16(buf, 2) & 0x3ff) as u32),
        next: if frame_type == 0 {
            Next::Ethernet(&buf[len..])
        } else {
            Next::Stop
        },
        truncated: ParseError::TruncatedErspan,
    })
}

/// What follows a WCCP redirect in GRE: an IPv4 packet at once (WCCP
/// version 1), or after a 4-byte redirect header (version 2: flags,
/// service id, alternate and primary bucket), told apart as tshark does:
/// an IPv4 header's first byte has version nibble 4, a redirect header's
/// never.
fn wccp(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    let first = *buf.first().ok_or(ParseError::TruncatedWccp)?;
    let (id, at) = if first >> 4 == 4 {
        (None, 0)
    } else if buf.len() < 4 {
        return Err(ParseError::TruncatedWccp);
    } else {
        (Some(buf[1] as u32), 4)
    };
    Ok(Encap {
        tunnel: Tunnel::Wccp,
        id,
        next: Next::Ip(&buf[at..]),
        truncated: ParseError::TruncatedWccp,
    })
}

/// What follows a header whose next-protocol byte is `proto` in the
/// numbering VXLAN-GPE and NSH share: 1 IPv4, 2 IPv6, 3 Ethernet, 4 NSH,
/// 5 MPLS.
fn after_next_protocol(proto: u8, payload: &[u8]) -> Next<'_> {
    match proto {
        1 => Next::Ethertype(ethertype::IPV4, payload),
        2 => Next::Ethertype(ethertype::IPV6, payload),
        3 => Next::Ethernet(payload),
        4 => Next::Ethertype(ethertype::NSH, payload),
        5 => Next::Ethertype(ethertype::MPLS, payload),
        _ => Next::Stop,
    }
}

/// A VXLAN-GPE header: VXLAN's 8 bytes (flags, next protocol in the
/// fourth byte, 24-bit VNI) and a payload of the next protocol. Only
/// version 0 with the P flag (the next protocol present, as it must be)
/// is read: anything else to the port is not taken for a tunnel.
pub fn vxlan_gpe(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    if buf.len() < 8 {
        return Err(ParseError::TruncatedVxlan);
    }
    if buf[0] & 0x34 != 0x04 {
        return Ok(Encap::not_a_tunnel(ParseError::TruncatedVxlan));
    }
    Ok(Encap {
        tunnel: Tunnel::VxlanGpe,
        id: Some(be32(buf, 4) >> 8),
        next: after_next_protocol(buf[3], &buf[8..]),
        truncated: ParseError::TruncatedVxlan,
    })
}

/// A Network Service Header (RFC 8300), version 0: the base header (its
/// length in 4-byte words, at least the 2 of the fixed part, and the next
/// protocol), the service path (24-bit path id, index), the context
/// headers the length covers, then a payload of the next protocol.
pub fn nsh(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    if buf.len() < 8 {
        return Err(ParseError::TruncatedNsh);
    }
    if buf[0] >> 6 != 0 {
        return Ok(Encap::not_a_tunnel(ParseError::TruncatedNsh));
    }
    let len = (buf[1] & 0x3f) as usize * 4;
    if len < 8 || buf.len() < len {
        return Err(ParseError::TruncatedNsh);
    }
    Ok(Encap {
        tunnel: Tunnel::Nsh,
        id: Some(be32(buf, 4) >> 8),
        next: after_next_protocol(buf[3], &buf[len..]),
        truncated: ParseError::TruncatedNsh,
    })
}

/// A PIM version 2 message: a Register (type 1) carries the multicast
/// packet after its 8 bytes (the PIM header, then the border and null-
/// register bits); other messages carry none.
pub fn pim(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    if *buf.first().ok_or(ParseError::TruncatedPim)? != 0x21 {
        return Ok(Encap::not_a_tunnel(ParseError::TruncatedPim));
    }
    if buf.len() < 8 {
        return Err(ParseError::TruncatedPim);
    }
    Ok(Encap {
        tunnel: Tunnel::Pim,
        id: None,
        next: Next::Ip(&buf[8..]),
        truncated: ParseError::TruncatedPim,
    })
}

/// A VXLAN header (flags, 24-bit VNI) and the Ethernet frame it carries.
pub fn vxlan(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    if buf.len() < 8 {
        return Err(ParseError::TruncatedVxlan);
    }
    Ok(Encap {
        tunnel: Tunnel::Vxlan,
        id: Some(be32(buf, 4) >> 8),
        next: Next::Ethernet(&buf[8..]),
        truncated: ParseError::TruncatedVxlan,
    })
}

/// A GENEVE header (version 0): 8 fixed bytes, options skipped by the
/// length the header gives, then a payload of its protocol type.
pub fn geneve(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    if buf.len() < 8 {
        return Err(ParseError::TruncatedGeneve);
    }
    if buf[0] >> 6 != 0 {
        return Ok(Encap::not_a_tunnel(ParseError::TruncatedGeneve));
    }
    let len = 8 + (buf[0] & 0x3f) as usize * 4;
    if buf.len() < len {
        return Err(ParseError::TruncatedGeneve);
    }
    Ok(Encap {
        tunnel: Tunnel::Geneve,
        id: Some(be32(buf, 4) >> 8),
        next: after_type(be16(buf, 2), &buf[len..]),
        truncated: ParseError::TruncatedGeneve,
    })
}

/// A GTP-U (version 1) header: 8 bytes, 4 more when any of the E, S or PN
/// flags is set, then the extension headers the E flag announces. Only a
/// G-PDU (message type 255) carries a packet.
pub fn gtpu(buf: &[u8]) -> Result<Encap<'_>, ParseError> {
    if buf.len() < 8 {
        return Err(ParseError::TruncatedGtpu);
    }
    // Version 1 and protocol type GTP (not GTP').
    if buf[0] & 0xf0 != 0x30 || buf[1] != 255 {
        return Ok(Encap::not_a_tunnel(ParseError::TruncatedGtpu));
    }
    let teid = be32(buf, 4);
    // The length counts what follows the first 8 bytes.
    let end = (8 + be16(buf, 2) as usize).min(buf.len());
    let mut at = 8;
    if buf[0] & 0x07 != 0 {
        if buf.len() < 12 {
            return Err(ParseError::TruncatedGtpu);
        }
        let mut next_type = buf[11];
        at = 12;
        if buf[0] & 0x04 == 0 {
            next_type = 0;
        }
        let mut n = 0;
        while next_type != 0 {
            // Each extension header: length in 4-byte units (never 0),
            // contents, and the next type in its last byte.
            let units = buf.get(at).copied().unwrap_or(0) as usize;
            if n == MAX_GTPU_EXTENSIONS || units == 0 || buf.len() < at + units * 4 {
                return Err(ParseError::TruncatedGtpu);
            }
            next_type = buf[at + units * 4 - 1];
            at += units * 4;
            n += 1;
        }
    }
    Ok(Encap {
        tunnel: Tunnel::Gtpu,
        id: Some(teid),
        next: Next::Ip(buf.get(at..end).unwrap_or(&[])),
        truncated: ParseError::TruncatedGtpu,
    })
}

/// IPv4 (protocol 4) or IPv6 (41) carried directly by an IP header.
pub fn ip_in_ip(proto_num: u8, payload: &[u8]) -> Encap<'_> {
    let ty = if proto_num == crate::ip::proto::IPIP {
        ethertype::IPV4
    } else {
        ethertype::IPV6
    };
    Encap {
        tunnel: Tunnel::Ipip,
        id: None,
        next: Next::Ethertype(ty, payload),
        truncated: if ty == ethertype::IPV4 {
            ParseError::TruncatedIpv4
        } else {
            ParseError::TruncatedIpv6
        },
    }
}

/// The encapsulation a UDP datagram to `dst_port` carries in `payload`, if
/// its port announces one.
pub fn over_udp(dst_port: u16, payload: &[u8]) -> Option<Result<Encap<'_>, ParseError>> {
    match dst_port {
        udp_port::VXLAN => Some(vxlan(payload)),
        udp_port::GENEVE => Some(geneve(payload)),
        udp_port::GTPU => Some(gtpu(payload)),
        udp_port::VXLAN_GPE => Some(vxlan_gpe(payload)),
        udp_port::MPLS => Some(mpls(payload)),
        _ => None,
    }
}

/// The encapsulation an IP packet of protocol `proto_num` carries in
/// `payload`, if the protocol is one.
pub fn over_ip(proto_num: u8, payload: &[u8]) -> Option<Result<Encap<'_>, ParseError>> {
    use crate::ip::proto;
    match proto_num {
        proto::IPIP | proto::IPV6_ENCAP => Some(Ok(ip_in_ip(proto_num, payload))),
        proto::GRE => Some(gre(payload)),
        proto::PIM => Some(pim(payload)),
        _ => None,
    }
}
