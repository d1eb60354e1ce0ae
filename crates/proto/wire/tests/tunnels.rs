//! Decoding through encapsulations: each kind with hand-built frames, cut
//! short at every byte, damaged, nested, and nested too deep.

use wire::build::{EncapSpec, FrameSpec, IpSpec, OuterSpec, Payload, TransportSpec, encapsulate};
use wire::decode::{MAX_ENCAPSULATIONS, flow_hash_of};
use wire::ip::v4_mapped;
use wire::transport::tcp_flags;
use wire::{
    Has, LinkType, PacketFields, PacketRecord, ParseError, Tunnel, TunnelHas, decode, decode_layout,
};

const PAYLOAD: usize = 20;

fn parse(frame: &[u8], wire_len: u32) -> PacketRecord {
    let mut r = PacketRecord::new(0, wire_len, frame.len() as u32);
    decode(LinkType::ETHERNET, frame, &mut r);
    r
}

fn v6_addr(last: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = last;
    a
}

/// The tenant's packets: IPv4 TCP and IPv6 UDP.
fn inner_frames() -> Vec<Vec<u8>> {
    let specs = [
        (
            IpSpec::V4 {
                src: [10, 1, 0, 1],
                dst: [10, 1, 0, 2],
                ttl: 61,
                id: 0x3344,
                dscp: 0,
                frag: 0x4000,
            },
            TransportSpec::Tcp {
                sport: 43210,
                dport: 443,
                seq: 77,
                ack: 88,
                flags: tcp_flags::ACK,
                window: 1234,
            },
        ),
        (
            IpSpec::V6 {
                src: v6_addr(0x11),
                dst: v6_addr(0x22),
                hop_limit: 33,
                dscp: 0,
                flow_label: 5,
            },
            TransportSpec::Udp {
                sport: 5000,
                dport: 53,
            },
        ),
    ];
    specs
        .iter()
        .map(|&(ip, transport)| {
            let mut f = Vec::new();
            FrameSpec {
                eth_src: [2, 0, 0, 0, 1, 1],
                eth_dst: [2, 0, 0, 0, 1, 2],
                vlan: None,
                ip,
                transport,
                payload: Payload::Zeros(PAYLOAD),
            }
            .build(&mut f);
            f
        })
        .collect()
}

fn outers() -> [OuterSpec; 2] {
    let eth = ([2, 0, 0, 0, 9, 1], [2, 0, 0, 0, 9, 2]);
    [
        OuterSpec {
            eth_src: eth.0,
            eth_dst: eth.1,
            ip: IpSpec::V4 {
                src: [192, 0, 2, 1],
                dst: [192, 0, 2, 2],
                ttl: 250,
                id: 9,
                dscp: 0,
                frag: 0x4000,
            },
        },
        OuterSpec {
            eth_src: eth.0,
            eth_dst: eth.1,
            ip: IpSpec::V6 {
                src: v6_addr(0xa1),
                dst: v6_addr(0xa2),
                hop_limit: 250,
                dscp: 0,
                flow_label: 0,
            },
        },
    ]
}

/// Every encapsulation weir builds, with the kind and id decode must find.
fn encaps() -> Vec<(EncapSpec<'static>, Tunnel, Option<u32>)> {
    vec![
        (
            EncapSpec::Vxlan { vni: 0xabcdef },
            Tunnel::Vxlan,
            Some(0xabcdef),
        ),
        (
            EncapSpec::Geneve {
                vni: 77,
                option_words: 3,
            },
            Tunnel::Geneve,
            Some(77),
        ),
        (
            EncapSpec::Gre {
                key: Some(0xdead_beef),
                seq: Some(5),
                checksum: true,
                ethernet: false,
            },
            Tunnel::Gre,
            Some(0xdead_beef),
        ),
        (
            EncapSpec::Gre {
                key: None,
                seq: None,
                checksum: false,
                ethernet: false,
            },
            Tunnel::Gre,
            None,
        ),
        (
            EncapSpec::Gre {
                key: Some(1),
                seq: None,
                checksum: false,
                ethernet: true,
            },
            Tunnel::Gre,
            Some(1),
        ),
        (
            EncapSpec::Erspan2 { session: Some(513) },
            Tunnel::Erspan,
            Some(513),
        ),
        (EncapSpec::Erspan2 { session: None }, Tunnel::Erspan, None),
        (
            EncapSpec::Erspan3 {
                session: 1023,
                platform: true,
            },
            Tunnel::Erspan,
            Some(1023),
        ),
        (
            EncapSpec::Erspan3 {
                session: 4,
                platform: false,
            },
            Tunnel::Erspan,
            Some(4),
        ),
        (EncapSpec::IpIp, Tunnel::Ipip, None),
        (
            EncapSpec::Gtpu {
                teid: 0x0102_0304,
                extension: true,
            },
            Tunnel::Gtpu,
            Some(0x0102_0304),
        ),
        (
            EncapSpec::Gtpu {
                teid: 7,
                extension: false,
            },
            Tunnel::Gtpu,
            Some(7),
        ),
        (
            EncapSpec::Mpls {
                labels: &[1000, 2000, 16],
            },
            Tunnel::Mpls,
            Some(1000),
        ),
        (
            EncapSpec::Pppoe { session: 0x1234 },
            Tunnel::Pppoe,
            Some(0x1234),
        ),
        (EncapSpec::Wccp { service: 89 }, Tunnel::Wccp, Some(89)),
        (
            EncapSpec::Cmd {
                key: Some(0x28),
                sgt: 17,
            },
            Tunnel::Gre,
            Some(0x28),
        ),
        (EncapSpec::Cmd { key: None, sgt: 0 }, Tunnel::Gre, None),
        (
            EncapSpec::VxlanGpe {
                vni: 0x12_3456,
                nsh: Some(0xff_fffe),
            },
            Tunnel::VxlanGpe,
            Some(0x12_3456),
        ),
        (
            EncapSpec::VxlanGpe { vni: 9, nsh: None },
            Tunnel::VxlanGpe,
            Some(9),
        ),
        (EncapSpec::Nsh { spi: 42 }, Tunnel::Nsh, Some(42)),
        (
            EncapSpec::MplsUdp { labels: &[21, 300] },
            Tunnel::Mpls,
            Some(21),
        ),
        (EncapSpec::PimRegister, Tunnel::Pim, None),
    ]
}

fn has_outer_ip(e: &EncapSpec) -> bool {
    e.has_outer_ip()
}

/// Encapsulations the frame goes through: VXLAN-GPE's NSH is one more.
fn depth_of(e: &EncapSpec) -> u8 {
    match e {
        EncapSpec::VxlanGpe { nsh: Some(_), .. } => 2,
        _ => 1,
    }
}

/// Every tunnelled frame: (encapsulation, kind, id, outer, inner, frame).
#[allow(clippy::type_complexity)]
fn tunnelled() -> Vec<(
    EncapSpec<'static>,
    Tunnel,
    Option<u32>,
    OuterSpec,
    Vec<u8>,
    Vec<u8>,
)> {
    let mut out = Vec::new();
    for (e, kind, id) in encaps() {
        for outer in outers() {
            if !has_outer_ip(&e) && matches!(outer.ip, IpSpec::V6 { .. }) {
                continue;
            }
            for inner in inner_frames() {
                let mut f = Vec::new();
                encapsulate(&inner, &e, &outer, &mut f);
                out.push((e, kind, id, outer, inner, f));
            }
        }
    }
    out
}

fn addrs(ip: &IpSpec) -> ([u8; 16], [u8; 16]) {
    match *ip {
        IpSpec::V4 { src, dst, .. } => (v4_mapped(src), v4_mapped(dst)),
        IpSpec::V6 { src, dst, .. } => (src, dst),
    }
}

/// The fields an inner packet decoded alone and the same packet decoded
/// through its tunnel must share.
fn l3_l4(r: &PacketRecord) -> PacketRecord {
    PacketRecord {
        fields: PacketFields {
            has: r.has & !(Has::ETH | Has::VLAN | Has::ETHERTYPE),
            ip_version: r.ip_version,
            ip_proto: r.ip_proto,
            ttl: r.ttl,
            dscp: r.dscp,
            ip_src: r.ip_src,
            ip_dst: r.ip_dst,
            ip_len: r.ip_len,
            ip_hdr_len: r.ip_hdr_len,
            frag: r.frag,
            ip_id: r.ip_id,
            src_port: r.src_port,
            dst_port: r.dst_port,
            tcp_flags: r.tcp_flags,
            tcp_win: r.tcp_win,
            tcp_seq: r.tcp_seq,
            tcp_ack: r.tcp_ack,
            tcp_hdr_len: r.tcp_hdr_len,
            udp_len: r.udp_len,
            payload_len: r.payload_len,
            flow_hash: r.flow_hash,
            parse_error: r.parse_error,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn agrees(f: &[u8], wire_len: u32) -> PacketRecord {
    let r = parse(f, wire_len);
    assert_eq!(
        flow_hash_of(LinkType::ETHERNET, f, wire_len),
        r.has(Has::FLOW).then_some(r.flow_hash),
        "flow_hash_of disagrees: {r:?}\n{f:02x?}"
    );
    // Tunnel fields hang together.
    assert!(r.tunnel.depth <= MAX_ENCAPSULATIONS);
    assert_eq!(r.tunnel.depth == 0, r.tunnel.kind == Tunnel::None, "{r:?}");
    if r.tunnel.depth == 0 {
        assert_eq!(r.tunnel.has, 0);
    }
    if r.tunnel.has & TunnelHas::OUTER_IP != 0 {
        assert!(r.has(Has::IP));
    }
    // The layout's IP offset is where the header the record describes
    // starts: decoded alone from there, it gives the same addresses.
    let mut again = PacketRecord::new(0, wire_len, f.len() as u32);
    let layout = decode_layout(LinkType::ETHERNET, f, &mut again);
    assert_eq!(again, r);
    match layout.ip {
        None => assert!(!r.has(Has::IP), "{r:?}"),
        Some(at) if r.parse_error != ParseError::EncapsulationTooDeep => {
            let alone = parse_raw(&f[at..], wire_len - at as u32);
            assert_eq!(
                (alone.ip_version, alone.ip_src, alone.ip_dst),
                (r.ip_version, r.ip_src, r.ip_dst),
                "{r:?}\n{f:02x?}"
            );
        }
        Some(_) => {}
    }
    r
}

fn parse_raw(packet: &[u8], wire_len: u32) -> PacketRecord {
    let mut r = PacketRecord::new(0, wire_len, packet.len() as u32);
    decode(LinkType::RAW, packet, &mut r);
    r
}

#[test]
fn each_encapsulation_gives_the_inner_packet_and_the_tunnel() {
    let all = tunnelled();
    assert_eq!(all.len(), 19 * 4 + 3 * 2);
    for (e, kind, id, outer, inner, f) in &all {
        let r = agrees(f, f.len() as u32);
        let alone = parse(inner, inner.len() as u32);
        assert_eq!(r.parse_error, ParseError::None, "{e:?}: {r:?}");
        assert_eq!(l3_l4(&r), l3_l4(&alone), "{e:?}");
        assert!(r.has(Has::FLOW));
        assert_eq!(
            (r.tunnel.kind, r.tunnel.depth),
            (*kind, depth_of(e)),
            "{e:?}"
        );
        assert_eq!(
            r.tunnel.has & TunnelHas::ID != 0,
            id.is_some(),
            "{e:?}: {r:?}"
        );
        if let Some(id) = id {
            assert_eq!(r.tunnel.id, *id, "{e:?}");
        }
        assert_ne!(r.tunnel.has & TunnelHas::OUTER_IP, 0);
        let want = if has_outer_ip(e) {
            addrs(&outer.ip)
        } else {
            (alone.ip_src, alone.ip_dst)
        };
        assert_eq!((r.tunnel.outer_src, r.tunnel.outer_dst), want, "{e:?}");
        // The innermost IP header starts where the inner frame's did.
        let mut again = PacketRecord::new(0, f.len() as u32, f.len() as u32);
        let at = decode_layout(LinkType::ETHERNET, f, &mut again).ip;
        assert_eq!(at, Some(f.len() - (inner.len() - 14)), "{e:?}");
        assert_eq!(&f[f.len() - (inner.len() - 14)..], &inner[14..]);
        // The link layer stays the outer frame's.
        assert_eq!(r.eth_src, outer.eth_src);
        assert_eq!(r.ethertype, u16::from_be_bytes([f[12], f[13]]));
    }
}

#[test]
fn a_tunnelled_frame_cut_anywhere_in_its_headers_says_where() {
    for (e, kind, _, _, _, f) in tunnelled() {
        // The inner transport payload is the frame's last PAYLOAD bytes.
        let headers = f.len() - PAYLOAD;
        let mut errors = std::collections::BTreeSet::new();
        for n in 0..=f.len() {
            for wire_len in [f.len() as u32, n as u32] {
                let r = agrees(&f[..n], wire_len);
                if n < headers {
                    assert_ne!(r.parse_error, ParseError::None, "{e:?} cut at {n}");
                    errors.insert(r.parse_error);
                } else if wire_len == f.len() as u32 {
                    assert_eq!(r.parse_error, ParseError::None, "{e:?} cut at {n}");
                    assert_eq!(r.tunnel.kind, kind);
                }
            }
        }
        // Each layer's own error shows up somewhere along the cut.
        let own = match kind {
            Tunnel::Vxlan => ParseError::TruncatedVxlan,
            Tunnel::Geneve => ParseError::TruncatedGeneve,
            Tunnel::Gre => ParseError::TruncatedGre,
            Tunnel::Erspan if matches!(e, EncapSpec::Erspan2 { session: None }) => {
                ParseError::TruncatedGre
            }
            Tunnel::Erspan => ParseError::TruncatedErspan,
            Tunnel::Gtpu => ParseError::TruncatedGtpu,
            Tunnel::Wccp => ParseError::TruncatedWccp,
            Tunnel::VxlanGpe => ParseError::TruncatedVxlan,
            Tunnel::Nsh => ParseError::TruncatedNsh,
            Tunnel::Pim => ParseError::TruncatedPim,
            Tunnel::Mpls => ParseError::TruncatedMpls,
            Tunnel::Pppoe => ParseError::TruncatedPppoe,
            Tunnel::Ipip | Tunnel::None => ParseError::None,
        };
        let own_seen = match own {
            // IP in IP has no header of its own: the inner one is cut.
            ParseError::None => {
                errors.contains(&ParseError::TruncatedIpv4)
                    || errors.contains(&ParseError::TruncatedIpv6)
            }
            e => errors.contains(&e),
        };
        assert!(own_seen, "{e:?}: {errors:?}");
    }
}

#[test]
fn damaged_tunnelled_frames_parse_and_hash_alike() {
    let mut checked = 0;
    for (_, _, _, _, _, f) in tunnelled() {
        for i in 0..f.len().min(140) {
            for v in [
                0x00, 0xff, 0x01, 0x04, 0x06, 0x08, 0x10, 0x11, 0x12, 0x17, 0x29, 0x2c, 0x2f, 0x30,
                0x34, 0x45, 0x4f, 0x60, 0x65, 0x81, 0x88, 0xbe, 0x22, 0xeb,
            ] {
                let mut g = f.clone();
                g[i] = v;
                agrees(&g, g.len() as u32);
                agrees(&g, g.len() as u32 + 100);
                checked += 1;
            }
        }
    }
    assert!(checked > 20_000, "{checked}");
}

#[test]
fn nested_tunnels_up_to_the_limit_and_no_further() {
    let inner = &inner_frames()[0];
    let alone = parse(inner, inner.len() as u32);
    let outer = outers()[0];
    let layers = [
        EncapSpec::Gtpu {
            teid: 3,
            extension: false,
        },
        EncapSpec::Gre {
            key: Some(2),
            seq: None,
            checksum: false,
            ethernet: true,
        },
        EncapSpec::Mpls { labels: &[99] },
        EncapSpec::Geneve {
            vni: 1,
            option_words: 0,
        },
        EncapSpec::Vxlan { vni: 0 },
    ];
    let mut f = inner.clone();
    for (n, e) in layers.iter().enumerate() {
        let mut g = Vec::new();
        encapsulate(&f, e, &outer, &mut g);
        f = g;
        let r = agrees(&f, f.len() as u32);
        let depth = n as u8 + 1;
        if depth <= MAX_ENCAPSULATIONS {
            assert_eq!(r.parse_error, ParseError::None, "{depth}");
            let mut again = PacketRecord::new(0, f.len() as u32, f.len() as u32);
            let at = decode_layout(LinkType::ETHERNET, &f, &mut again).ip;
            assert_eq!(at, Some(f.len() - (inner.len() - 14)), "{depth}");
            assert_eq!(r.tunnel.depth, depth);
            assert_eq!(l3_l4(&r), l3_l4(&alone), "{depth}");
        } else {
            // One too many: the record is the packet that carries it.
            assert_eq!(r.parse_error, ParseError::EncapsulationTooDeep);
            assert_eq!(r.tunnel.depth, MAX_ENCAPSULATIONS);
            assert_eq!(r.ip_src, v4_mapped([192, 0, 2, 1]));
            assert_eq!(r.dst_port, 2152);
            assert!(r.has(Has::FLOW));
        }
        // The outermost encapsulation names the tunnel.
        let (kind, id) = match e {
            EncapSpec::Gtpu { .. } => (Tunnel::Gtpu, 3),
            EncapSpec::Gre { .. } => (Tunnel::Gre, 2),
            EncapSpec::Mpls { .. } => (Tunnel::Mpls, 99),
            EncapSpec::Geneve { .. } => (Tunnel::Geneve, 1),
            _ => (Tunnel::Vxlan, 0),
        };
        assert_eq!((r.tunnel.kind, r.tunnel.id), (kind, id));
        assert_eq!(r.tunnel.outer_src, v4_mapped([192, 0, 2, 1]));
    }
}

#[test]
fn what_only_looks_like_a_tunnel_is_not_one() {
    let inner = &inner_frames()[0];
    let outer = outers()[0];
    let mut gtp = Vec::new();
    encapsulate(
        inner,
        &EncapSpec::Gtpu {
            teid: 1,
            extension: false,
        },
        &outer,
        &mut gtp,
    );
    // A GTP-U echo request: signalling, no packet inside.
    let at = 14 + 20 + 8;
    gtp[at + 1] = 1;
    let r = agrees(&gtp, gtp.len() as u32);
    assert_eq!(
        (r.tunnel.kind, r.tunnel.depth, r.parse_error),
        (Tunnel::None, 0, ParseError::None)
    );
    assert_eq!(r.dst_port, 2152);

    // GRE version 1 (PPTP) is GRE, but what it carries is not read: the
    // record is the outer packet.
    let mut gre = Vec::new();
    encapsulate(inner, &EncapSpec::IpIp, &outer, &mut gre);
    let mut g = gre[..34].to_vec();
    g[23] = 47;
    g.extend_from_slice(&[0x30, 0x01, 0x88, 0x0b, 0, 0, 0, 0, 0, 0, 0, 0]);
    let r = agrees(&g, g.len() as u32);
    assert_eq!(
        (r.tunnel.kind, r.tunnel.depth, r.parse_error),
        (Tunnel::Gre, 1, ParseError::None)
    );
    assert_eq!((r.ip_proto, r.ip_src), (47, v4_mapped([192, 0, 2, 1])));
    assert!(r.has(Has::FLOW));
}

#[test]
fn hostile_lengths_stop_with_the_layers_error() {
    let inner = &inner_frames()[0];
    let outer = outers()[0];
    let build = |e: EncapSpec| {
        let mut f = Vec::new();
        encapsulate(inner, &e, &outer, &mut f);
        f
    };
    let udp_payload = 14 + 20 + 8;
    // GENEVE options longer than the frame.
    let mut f = build(EncapSpec::Geneve {
        vni: 1,
        option_words: 1,
    });
    f[udp_payload] = 0x3f;
    let r = agrees(&f, f.len() as u32);
    assert_eq!(
        (r.parse_error, r.tunnel.depth),
        (ParseError::TruncatedGeneve, 0)
    );
    // A GTP-U extension header of length 0.
    let mut f = build(EncapSpec::Gtpu {
        teid: 1,
        extension: true,
    });
    f[udp_payload + 12] = 0;
    assert_eq!(
        agrees(&f, f.len() as u32).parse_error,
        ParseError::TruncatedGtpu
    );
    // An MPLS stack without a bottom label.
    let labels = [1u32; 9];
    let mut f = build(EncapSpec::Mpls { labels: &labels });
    f[14 + 8 * 4 + 2] &= !1;
    assert_eq!(
        agrees(&f, f.len() as u32).parse_error,
        ParseError::TruncatedMpls
    );
    let f = build(EncapSpec::Mpls {
        labels: &labels[..8],
    });
    assert_eq!(agrees(&f, f.len() as u32).parse_error, ParseError::None);
}

#[test]
fn fragments_are_not_followed_into() {
    let inner = &inner_frames()[0];
    let mut outer = outers()[0];
    if let IpSpec::V4 { frag, .. } = &mut outer.ip {
        *frag = 0x2000;
    }
    let mut f = Vec::new();
    encapsulate(inner, &EncapSpec::Vxlan { vni: 5 }, &outer, &mut f);
    let r = agrees(&f, f.len() as u32);
    assert_eq!((r.tunnel.depth, r.dst_port), (0, 4789));
}

/// Several random bytes changed at once, and random cuts: what one-byte
/// damage cannot reach (a length and the type it guards, both wrong).
#[test]
fn randomly_damaged_tunnelled_frames_parse_and_hash_alike() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let frames: Vec<Vec<u8>> = tunnelled().into_iter().map(|t| t.5).collect();
    let mut tunnels_seen = std::collections::BTreeSet::new();
    for _ in 0..100_000 {
        let mut g = frames[next() as usize % frames.len()].clone();
        for _ in 0..1 + next() % 4 {
            let at = next() as usize % g.len().min(160);
            g[at] = next() as u8;
        }
        let cut = g
            .len()
            .saturating_sub((next() as usize % 8) * (next() as usize % 16));
        let r = agrees(&g[..cut], g.len() as u32);
        tunnels_seen.insert(r.tunnel.kind);
    }
    // The damage still lets every kind through now and then.
    assert_eq!(tunnels_seen.len(), Tunnel::ALL.len(), "{tunnels_seen:?}");
}

/// The forms `EncapSpec` does not build: WCCP version 1 (no redirect
/// header), a PIM null register (its dummy header states no payload),
/// PIM messages other than Register, and NSH of another version.
#[test]
fn wccp_without_redirect_header_null_registers_and_other_pim() {
    let inner = &inner_frames()[0];
    let outer = outers()[0];
    let build = |e: EncapSpec| {
        let mut f = Vec::new();
        encapsulate(inner, &e, &outer, &mut f);
        f
    };
    let alone = parse(inner, inner.len() as u32);
    let gre_payload = 14 + 20 + 4;

    // WCCP version 1: the IPv4 packet right after the GRE header.
    let wccp = build(EncapSpec::Wccp { service: 5 });
    let mut v1 = wccp[..gre_payload].to_vec();
    v1.extend_from_slice(&wccp[gre_payload + 4..]);
    let total = (v1.len() - 14) as u16;
    v1[16..18].copy_from_slice(&total.to_be_bytes());
    let r = agrees(&v1, v1.len() as u32);
    assert_eq!(r.parse_error, ParseError::None, "{r:?}");
    assert_eq!((r.tunnel.kind, r.tunnel.depth), (Tunnel::Wccp, 1));
    assert_eq!(r.tunnel.has & TunnelHas::ID, 0);
    assert_eq!(l3_l4(&r), l3_l4(&alone));

    // A null register: the inner header alone, of protocol PIM, stating
    // no payload. It is the record's packet, whole.
    let pim = build(EncapSpec::PimRegister);
    let pim_payload = 14 + 20;
    let mut null = pim[..pim_payload + 8].to_vec();
    null[pim_payload + 4] = 0x40;
    let mut dummy = pim[pim_payload + 8..pim_payload + 8 + 20].to_vec();
    dummy[2..4].copy_from_slice(&20u16.to_be_bytes());
    dummy[9] = 103;
    null.extend_from_slice(&dummy);
    let total = (null.len() - 14) as u16;
    null[16..18].copy_from_slice(&total.to_be_bytes());
    let r = agrees(&null, null.len() as u32);
    assert_eq!(r.parse_error, ParseError::None, "{r:?}");
    assert_eq!((r.tunnel.kind, r.tunnel.depth), (Tunnel::Pim, 1));
    assert_eq!((r.ip_proto, r.ip_src), (103, alone.ip_src));
    assert!(r.has(Has::FLOW));
    // Cut before the register's first byte, it says so.
    let r = agrees(&null[..pim_payload], null.len() as u32);
    assert_eq!(r.parse_error, ParseError::TruncatedPim);

    // A PIM Hello (type 0) carries no packet: the record is its own.
    let mut hello = pim.clone();
    hello[pim_payload] = 0x20;
    let r = agrees(&hello, hello.len() as u32);
    assert_eq!(
        (r.tunnel.kind, r.tunnel.depth, r.parse_error),
        (Tunnel::None, 0, ParseError::None)
    );
    assert_eq!((r.ip_proto, r.ip_src), (103, v4_mapped([192, 0, 2, 1])));

    // NSH of version 1 is not read; nor is it counted.
    let mut nsh = build(EncapSpec::Nsh { spi: 3 });
    nsh[14] |= 0x40;
    let r = agrees(&nsh, nsh.len() as u32);
    assert_eq!(
        (r.tunnel.kind, r.tunnel.depth, r.parse_error, r.has(Has::IP)),
        (Tunnel::None, 0, ParseError::None, false)
    );
}
