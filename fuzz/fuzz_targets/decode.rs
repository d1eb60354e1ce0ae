//! `wire::decode` on arbitrary frames of every supported link type (and one
//! unsupported type), with a wire length above, equal to or below the
//! captured length. Besides "never panics", checks that decode leaves the
//! capture metadata alone and that what it fills is self-consistent, and
//! that the flow hash is symmetric and that `flow_hash_of` finds the same
//! hash without a record, through tunnels too; and that the tunnel fields
//! hang together.
//!
//! Input layout: `[link selector, wire_len mode, delta hi, delta lo, frame...]`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::flow::FlowKey;
use wire::ip::{proto, v4_unmapped};
use wire::decode::flow_hash_of;
use wire::decode::MAX_ENCAPSULATIONS;
use wire::{
    Has, LinkType, PacketRecord, ParseError, Tunnel, TunnelHas, decode, decode_layout, flow_hash,
};

/// Every link type `decode` understands, then one it does not (USER0).
const LINKS: [LinkType; 11] = [
    LinkType::NULL,
    LinkType::ETHERNET,
    LinkType::RAW_BSD12,
    LinkType::RAW_BSD14,
    LinkType::RAW,
    LinkType::LOOP,
    LinkType::LINUX_SLL,
    LinkType::IPV4,
    LinkType::IPV6,
    LinkType::LINUX_SLL2,
    LinkType(147),
];

/// Every `Has` bit that decode may set.
const PARSED_BITS: u16 = Has::ETH
    | Has::VLAN
    | Has::ETHERTYPE
    | Has::IP
    | Has::IP_ID
    | Has::FRAG
    | Has::PORTS
    | Has::TCP
    | Has::UDP
    | Has::ICMP
    | Has::PAYLOAD
    | Has::FLOW;

fuzz_target!(|data: &[u8]| {
    let [sel, mode, hi, lo, frame @ ..] = data else {
        return;
    };
    let link = LINKS[*sel as usize % LINKS.len()];
    let supported = (*sel as usize % LINKS.len()) < LINKS.len() - 1;
    assert_eq!(link.is_supported(), supported);

    let cap_len = frame.len() as u32;
    let delta = u16::from_be_bytes([*hi, *lo]) as u32;
    let wire_len = match mode % 3 {
        0 => cap_len,
        1 => cap_len.saturating_add(delta),
        _ => cap_len.saturating_sub(delta),
    };

    // Capture metadata that decode must not touch.
    let mut meta = PacketRecord::new(0x1122_3344_5566_7788, wire_len, cap_len);
    meta.worker = 7;
    meta.iface = 3;
    meta.pcap_file = 0xabcd;
    meta.pcap_offset = 0x0102_0304_0506;
    meta.has = Has::PCAP;

    let mut rec = meta;
    decode(link, frame, &mut rec);
    assert_eq!(
        flow_hash_of(link, frame, wire_len),
        rec.has(Has::FLOW).then_some(rec.flow_hash),
        "flow_hash_of disagrees with decode: {rec:?}"
    );

    assert_eq!(rec.ts_ns, meta.ts_ns);
    assert_eq!(rec.wire_len, wire_len);
    assert_eq!(rec.cap_len, cap_len);
    assert_eq!(rec.worker, meta.worker);
    assert_eq!(rec.iface, meta.iface);
    assert_eq!(rec.pcap_file, meta.pcap_file);
    assert_eq!(rec.pcap_offset, meta.pcap_offset);
    assert!(rec.has(Has::PCAP), "decode cleared the PCAP bit");
    assert_eq!(rec.has & !(PARSED_BITS | Has::PCAP), 0, "unknown Has bits");

    // Tunnels: a kind exactly when something was entered, no deeper than
    // the limit, outer addresses only with an IP header, and fields the
    // bits leave out still zero.
    assert!(rec.tunnel.depth <= MAX_ENCAPSULATIONS);
    assert_eq!(rec.tunnel.kind == Tunnel::None, rec.tunnel.depth == 0, "{rec:?}");
    assert_eq!(rec.tunnel.has & !(TunnelHas::OUTER_IP | TunnelHas::ID), 0);
    if rec.tunnel.has & TunnelHas::OUTER_IP != 0 {
        assert!(rec.has(Has::IP) && rec.tunnel.depth > 0, "{rec:?}");
    } else {
        assert_eq!((rec.tunnel.outer_src, rec.tunnel.outer_dst), ([0; 16], [0; 16]));
    }
    if rec.tunnel.has & TunnelHas::ID == 0 {
        assert_eq!(rec.tunnel.id, 0);
    }
    if rec.parse_error == ParseError::EncapsulationTooDeep {
        assert_eq!(rec.tunnel.depth, MAX_ENCAPSULATIONS);
    }

    // Deterministic: a second decode of the same bytes gives the same record.
    let mut again = meta;
    let payload = decode(link, frame, &mut again);
    assert_eq!(rec, again);
    // The layout: the same record and payload, and an IP header inside
    // the frame exactly when the record has IP fields.
    let mut laid = meta;
    let layout = decode_layout(link, frame, &mut laid);
    assert_eq!(laid, rec);
    assert_eq!(layout.payload, payload);
    assert_eq!(layout.ip.is_some(), rec.has(Has::IP), "{rec:?}");
    if let Some(at) = layout.ip {
        assert!(at < frame.len());
    }

    if !supported {
        let mut want = meta;
        want.parse_error = ParseError::UnsupportedLinkType;
        assert_eq!(
            rec, want,
            "an unsupported link type must only set the error"
        );
        return;
    }
    assert_ne!(rec.parse_error, ParseError::UnsupportedLinkType);
    let ok = rec.parse_error == ParseError::None;

    if rec.has(Has::ETH_DST) {
        assert_eq!(link, LinkType::ETHERNET);
    }
    if rec.has & (Has::TCP | Has::UDP | Has::ICMP | Has::PORTS | Has::FLOW | Has::IP_ID) != 0 {
        assert!(rec.has(Has::IP), "transport fields without IP: {rec:?}");
    }
    if rec.has(Has::TCP) {
        assert!(rec.has(Has::PORTS));
        assert_eq!(rec.ip_proto, proto::TCP);
        assert_eq!(rec.tcp_flags & !0x1ff, 0);
        assert_eq!(rec.tcp_hdr_len % 4, 0);
        if ok {
            assert!(rec.tcp_hdr_len >= 20);
        }
    }
    if rec.has(Has::UDP) {
        assert!(rec.has(Has::PORTS));
        assert_eq!(rec.ip_proto, proto::UDP);
        if ok {
            assert!(rec.udp_len >= 8);
            assert!(rec.has(Has::PAYLOAD));
            assert_eq!(rec.payload_len, rec.udp_len as u32 - 8);
        }
    }
    if rec.has(Has::ICMP) {
        assert!(matches!(rec.ip_proto, proto::ICMP | proto::ICMPV6));
    }
    if rec.has(Has::VLAN) {
        assert!(rec.vlan < 0x1000);
        if ok {
            assert!(rec.has(Has::ETHERTYPE));
        }
    }

    if rec.has(Has::IP) {
        match rec.ip_version {
            4 => {
                assert!(v4_unmapped(&rec.ip_src).is_some());
                assert!(v4_unmapped(&rec.ip_dst).is_some());
                assert!(rec.has(Has::IP_ID | Has::FRAG));
                assert!(rec.ip_id <= u16::MAX as u32);
                if ok {
                    assert!(rec.ip_hdr_len >= 20 && rec.ip_hdr_len <= 60);
                    // A zero total length (TSO) takes the length from the frame.
                    if rec.ip_len != 0 {
                        assert!(rec.ip_hdr_len as u32 <= rec.ip_len);
                    }
                }
            }
            6 => {
                assert!(rec.ip_hdr_len >= 40);
                assert!(rec.ip_hdr_len as u32 <= rec.ip_len);
                assert!(rec.ip_len <= 40 + u16::MAX as u32);
            }
            v => panic!("IP bit with ip_version {v}"),
        }
        assert!(rec.dscp < 64);
        if ok {
            // Every successful walk ends in a payload length and a flow hash.
            assert!(rec.has(Has::PAYLOAD), "no payload_len: {rec:?}");
            assert!(rec.has(Has::FLOW), "no flow hash: {rec:?}");
        }
    } else {
        assert_eq!(rec.has & (Has::PAYLOAD | Has::FLOW), 0);
    }

    if rec.has(Has::FLOW) {
        // The hash decode stored is the public flow_hash of the record's own
        // 5-tuple: ports count only for port protocols and never for
        // fragments.
        let is_fragment = match rec.ip_version {
            4 => rec.frag & 0x3fff != 0,
            _ => rec.has(Has::FRAG),
        };
        let port_proto = matches!(rec.ip_proto, proto::TCP | proto::UDP | proto::SCTP);
        let (sport, dport) = if is_fragment || !port_proto {
            (0, 0)
        } else {
            assert!(rec.has(Has::PORTS));
            (rec.src_port, rec.dst_port)
        };
        let h = flow_hash(&rec.ip_src, &rec.ip_dst, sport, dport, rec.ip_proto);
        assert_eq!(rec.flow_hash, h, "stored flow hash differs: {rec:?}");
    }

    // Symmetry of the flow hash on the parsed (or, if nothing parsed, zero)
    // endpoints, and agreement with FlowKey.
    let (src, dst) = (&rec.ip_src, &rec.ip_dst);
    let (sp, dp, p) = (rec.src_port, rec.dst_port, rec.ip_proto);
    let forward = flow_hash(src, dst, sp, dp, p);
    assert_eq!(forward, flow_hash(dst, src, dp, sp, p));
    let key = FlowKey::new(src, dst, sp, dp, p);
    assert_eq!(key, FlowKey::new(dst, src, dp, sp, p));
    assert_eq!(key.hash(), forward);
    assert!((key.lo_addr, key.lo_port) <= (key.hi_addr, key.hi_port));
    let reversed = rec.flow_reversed();
    assert_eq!(reversed, (key.lo_addr, key.lo_port) != (*src, sp));
    // Frame bytes used as a second pair of endpoints: symmetry for
    // addresses that differ only late in the array, or not at all.
    if frame.len() >= 36 {
        let a: [u8; 16] = frame[..16].try_into().unwrap();
        let b: [u8; 16] = frame[16..32].try_into().unwrap();
        let (pa, pb) = (
            u16::from_be_bytes([frame[32], frame[33]]),
            u16::from_be_bytes([frame[34], frame[35]]),
        );
        assert_eq!(
            flow_hash(&a, &b, pa, pb, *sel),
            flow_hash(&b, &a, pb, pa, *sel)
        );
        assert_eq!(
            flow_hash(&a, &a, pa, pb, *sel),
            flow_hash(&a, &a, pb, pa, *sel)
        );
    }
});
