//! The flow hash of frames without a tunnel, pinned to the values weir
//! gave before it looked inside tunnels: following encapsulations must not
//! move an untunnelled flow (sharded captures and stored datasets depend on
//! it).

use wire::build::{FrameSpec, IpSpec, Payload, TransportSpec};
use wire::decode::flow_hash_of;
use wire::transport::tcp_flags;
use wire::{Has, LinkType, PacketRecord, decode};

fn v4(src: [u8; 4], dst: [u8; 4], frag: u16) -> IpSpec {
    IpSpec::V4 {
        src,
        dst,
        ttl: 64,
        id: 0x4242,
        dscp: 0,
        frag,
    }
}

fn v6(src_last: u8, dst_last: u8) -> IpSpec {
    let mut src = [0u8; 16];
    src[..2].copy_from_slice(&[0x20, 0x01]);
    src[15] = src_last;
    let mut dst = src;
    dst[15] = dst_last;
    IpSpec::V6 {
        src,
        dst,
        hop_limit: 64,
        dscp: 0,
        flow_label: 7,
    }
}

/// Frames of every kind the decoder hashed before tunnels, with the link
/// type to read them as.
fn frames() -> Vec<(&'static str, LinkType, Vec<u8>)> {
    let tcp = |sport, dport| TransportSpec::Tcp {
        sport,
        dport,
        seq: 1,
        ack: 2,
        flags: tcp_flags::ACK,
        window: 100,
    };
    let udp = |sport, dport| TransportSpec::Udp { sport, dport };
    let icmp = TransportSpec::Icmp {
        msg_type: 8,
        code: 0,
    };
    let sctp = TransportSpec::Sctp {
        sport: 5000,
        dport: 38412,
        vtag: 9,
    };
    let a = [192, 0, 2, 1];
    let b = [198, 51, 100, 7];
    let specs: Vec<(&str, IpSpec, TransportSpec, Option<u16>)> = vec![
        ("v4 tcp", v4(a, b, 0x4000), tcp(40000, 443), None),
        ("v4 tcp reply", v4(b, a, 0x4000), tcp(443, 40000), None),
        ("v4 udp", v4(a, b, 0), udp(5353, 53), None),
        // VXLAN-GPE's port, but zeros are no VXLAN-GPE header (no P flag).
        ("v4 udp to 4790", v4(a, b, 0), udp(1234, 4790), None),
        ("v4 icmp", v4(a, b, 0), icmp, None),
        ("v4 sctp", v4(a, b, 0), sctp, None),
        ("v4 first fragment", v4(a, b, 0x2000), udp(1, 2), None),
        ("v4 later fragment", v4(a, b, 0x0010), udp(1, 2), None),
        ("v4 tcp vlan", v4(a, b, 0x4000), tcp(40000, 443), Some(100)),
        ("v6 tcp", v6(1, 2), tcp(22, 50000), None),
        ("v6 udp", v6(2, 1), udp(546, 547), None),
        ("v6 icmp", v6(1, 2), icmp, None),
        ("v6 udp vlan", v6(3, 4), udp(123, 123), Some(7)),
    ];
    let mut out = Vec::new();
    for (name, ip, t, vlan) in specs {
        let mut f = Vec::new();
        FrameSpec {
            eth_src: [2, 0, 0, 0, 0, 1],
            eth_dst: [2, 0, 0, 0, 0, 2],
            vlan,
            ip,
            transport: t,
            payload: Payload::Zeros(40),
        }
        .build(&mut f);
        let raw = f[if vlan.is_some() { 18 } else { 14 }..].to_vec();
        out.push((name, LinkType::ETHERNET, f));
        if vlan.is_none() {
            out.push((name, LinkType::RAW, raw));
        }
    }
    out
}

fn hash(link: LinkType, f: &[u8]) -> Option<u32> {
    let mut r = PacketRecord::new(0, f.len() as u32, f.len() as u32);
    decode(link, f, &mut r);
    assert_eq!(
        flow_hash_of(link, f, f.len() as u32),
        r.has(Has::FLOW).then_some(r.flow_hash)
    );
    r.has(Has::FLOW).then_some(r.flow_hash)
}

/// Computed by weir before tunnels (commit 74d7f6a), frame by frame.
const PINNED: &[(&str, u32)] = &[
    ("v4 tcp ethernet", 0xbb141289),
    ("v4 tcp raw", 0xbb141289),
    ("v4 tcp reply ethernet", 0xbb141289),
    ("v4 tcp reply raw", 0xbb141289),
    ("v4 udp ethernet", 0x69fbf8d2),
    ("v4 udp raw", 0x69fbf8d2),
    ("v4 udp to 4790 ethernet", 0x331d059d),
    ("v4 udp to 4790 raw", 0x331d059d),
    ("v4 icmp ethernet", 0x742c3407),
    ("v4 icmp raw", 0x742c3407),
    ("v4 sctp ethernet", 0x4c54d11f),
    ("v4 sctp raw", 0x4c54d11f),
    ("v4 first fragment ethernet", 0x9247e170),
    ("v4 first fragment raw", 0x9247e170),
    ("v4 later fragment ethernet", 0x9247e170),
    ("v4 later fragment raw", 0x9247e170),
    ("v4 tcp vlan ethernet", 0xbb141289),
    ("v6 tcp ethernet", 0xa7d11a1e),
    ("v6 tcp raw", 0xa7d11a1e),
    ("v6 udp ethernet", 0xfeeeec44),
    ("v6 udp raw", 0xfeeeec44),
    ("v6 icmp ethernet", 0x567dd751),
    ("v6 icmp raw", 0x567dd751),
    ("v6 udp vlan ethernet", 0x7072681f),
];

#[test]
fn untunnelled_flow_hashes_are_unchanged() {
    let frames = frames();
    assert_eq!(frames.len(), PINNED.len());
    for ((name, link, f), (pinned_name, pinned)) in frames.iter().zip(PINNED) {
        let label = format!("{name} {}", link.name());
        assert_eq!(&label, pinned_name);
        assert_eq!(hash(*link, f), Some(*pinned), "{label}");
        // Not a tunnel: no tunnel fields either.
        let mut r = PacketRecord::new(0, f.len() as u32, f.len() as u32);
        decode(*link, f, &mut r);
        assert_eq!(
            (r.tunnel.kind, r.tunnel.depth, r.tunnel.has),
            (wire::Tunnel::None, 0, 0)
        );
    }
}
