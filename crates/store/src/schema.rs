//! The packet table's schema: one row per frame (DESIGN.md, "The packet
//! record").

use arrow_schema::SchemaRef;
use wire::Has;

use crate::columns::{Column, addr, mac, schema_of, text, ts_type, u8t, u16t, u32t, u64t};

/// Version of the packet table's columns; bumped when a column changes.
/// 2: the tunnel columns (`outer_src` .. `tunnel_depth`); the IP and
/// transport columns describe a tunnelled frame's innermost packet.
pub const PACKET_SCHEMA_VERSION: u32 = 2;

/// Presence of `parse_error`, which has no [`Has`] bit of its own (those
/// stop at bit 13): a column's nulls follow `parse_error != None`.
pub const PARSE_ERROR_BIT: u16 = 1 << 15;

/// Presence of the tunnel columns, which follow the record's
/// [`wire::TunnelHas`] bits (or its tunnel kind) rather than [`Has`].
pub const TUNNEL_BIT: u16 = 1 << 15;

/// `col!(name, type, presence, doc)`: a column of the packet table, null
/// where its presence bit (the record's [`Has`] bit, or one of the bits
/// above) is clear; `None` for columns that are never null. The bits are
/// the writer's (`packets/columns.rs`); here they say which columns may
/// be null.
macro_rules! col {
    ($name:literal, $ty:ident, $presence:expr, $doc:literal) => {
        crate::columns::col!($name, $ty, Option::<u16>::is_some(&$presence), $doc)
    };
}

/// The columns, in file order.
pub const PACKET_COLUMNS: &[Column] = &[
    col!("ts", ts_type, None, "arrival time, ns since the epoch, UTC"),
    col!("wire_len", u32t, None, "frame length on the wire"),
    col!("cap_len", u32t, None, "bytes of the frame captured"),
    col!("worker", u16t, None, "worker that saw the frame"),
    col!(
        "iface",
        u16t,
        None,
        "interface index (manifest: interfaces)"
    ),
    col!("eth_src", mac, Some(Has::ETH_SRC), "source MAC"),
    col!("eth_dst", mac, Some(Has::ETH_DST), "destination MAC"),
    col!("vlan", u16t, Some(Has::VLAN), "outer VLAN id"),
    col!(
        "ethertype",
        u16t,
        Some(Has::ETHERTYPE),
        "ethertype after VLAN tags"
    ),
    col!("ip_version", u8t, Some(Has::IP), "4 or 6"),
    col!(
        "ip_src",
        addr,
        Some(Has::IP),
        "source address, IPv4 mapped into IPv6"
    ),
    col!(
        "ip_dst",
        addr,
        Some(Has::IP),
        "destination address, IPv4 mapped into IPv6"
    ),
    col!(
        "ip_len",
        u32t,
        Some(Has::IP),
        "IP length incl. header (IPv6: 40 + payload length)"
    ),
    col!(
        "ip_hdr_len",
        u16t,
        Some(Has::IP),
        "IP header bytes (IPv6: incl. extension headers)"
    ),
    col!(
        "ip_proto",
        u8t,
        Some(Has::IP),
        "transport protocol (IPv6: after extension headers)"
    ),
    col!("ttl", u8t, Some(Has::IP), "TTL / hop limit"),
    col!("dscp", u8t, Some(Has::IP), "DSCP"),
    col!(
        "ip_id",
        u32t,
        Some(Has::IP_ID),
        "IPv4 id, or IPv6 fragment id"
    ),
    col!(
        "frag",
        u16t,
        Some(Has::FRAG),
        "DF 0x4000 | MF 0x2000 | offset/8"
    ),
    col!(
        "src_port",
        u16t,
        Some(Has::PORTS),
        "TCP/UDP/SCTP source port"
    ),
    col!(
        "dst_port",
        u16t,
        Some(Has::PORTS),
        "TCP/UDP/SCTP destination port"
    ),
    col!("tcp_flags", u16t, Some(Has::TCP), "NS..FIN, 9 bits"),
    col!("tcp_seq", u32t, Some(Has::TCP), "TCP sequence number"),
    col!(
        "tcp_ack",
        u32t,
        Some(Has::TCP),
        "TCP acknowledgement number"
    ),
    col!("tcp_win", u16t, Some(Has::TCP), "TCP window (unscaled)"),
    col!("tcp_hdr_len", u8t, Some(Has::TCP), "TCP header bytes"),
    col!("udp_len", u16t, Some(Has::UDP), "UDP length field"),
    col!("icmp_type", u8t, Some(Has::ICMP), "ICMP / ICMPv6 type"),
    col!("icmp_code", u8t, Some(Has::ICMP), "ICMP / ICMPv6 code"),
    col!(
        "payload_len",
        u32t,
        Some(Has::PAYLOAD),
        "transport payload bytes on the wire"
    ),
    col!(
        "flow_hash",
        u32t,
        Some(Has::FLOW),
        "symmetric 5-tuple hash (wire::flow_hash)"
    ),
    col!(
        "pcap_file",
        u32t,
        Some(Has::PCAP),
        "pcap file of the dataset holding the frame"
    ),
    col!(
        "pcap_offset",
        u64t,
        Some(Has::PCAP),
        "offset of the frame's record in that file"
    ),
    col!(
        "parse_error",
        text,
        Some(PARSE_ERROR_BIT),
        "where parsing stopped, null if it did not"
    ),
    col!(
        "outer_src",
        addr,
        Some(TUNNEL_BIT),
        "outermost IP source of a tunnelled frame"
    ),
    col!(
        "outer_dst",
        addr,
        Some(TUNNEL_BIT),
        "outermost IP destination of a tunnelled frame"
    ),
    col!(
        "tunnel",
        text,
        Some(TUNNEL_BIT),
        "outermost encapsulation (mpls, gre, vxlan, ...)"
    ),
    col!(
        "tunnel_id",
        u32t,
        Some(TUNNEL_BIT),
        "its VNI, GRE key, top label, TEID or session id"
    ),
    col!(
        "tunnel_depth",
        u8t,
        None,
        "encapsulations walked through, 0 for none"
    ),
];

/// The Arrow schema of the packet table.
pub fn packet_schema() -> SchemaRef {
    schema_of(PACKET_COLUMNS)
}
