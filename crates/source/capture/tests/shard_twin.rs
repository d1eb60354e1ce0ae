//! The shard filter's flow hash, run in the kernel (BPF_PROG_TEST_RUN),
//! equals the decoder's on every Ethernet and raw-IP frame of tcpdump's
//! test corpus, tunnelled ones included (both hash the innermost packet),
//! on every encapsulation weir builds, nested, cut short and damaged; a
//! tcpdump filter joined to the shard test still decides as libpcap's own
//! interpreter does. Needs root (bpf(2)).

use std::path::PathBuf;

use capture::bpf::SocketProgram;
use capture::shard::{self, Shard, Verdict};

use pcapio::{ReaderOptions, TraceReader};
use wire::build::{EncapSpec, FrameSpec, IpSpec, OuterSpec, Payload, TransportSpec, encapsulate};
use wire::{LinkType, PacketRecord, decode};

fn corpus() -> Vec<PathBuf> {
    testdata::tcpdump_captures()
}

/// Every frame of the corpus on a link the shard filter reads. Frames cut
/// short by the capture's snap length are taken as whole frames of that
/// length (the kernel always sees whole frames): that puts every bounds
/// check of the program to the test.
fn frames() -> Vec<(LinkType, Vec<u8>)> {
    let mut out = Vec::new();
    for path in corpus() {
        let Ok(mut r) = TraceReader::open(&path, ReaderOptions::default()) else {
            continue;
        };
        while let Ok(Some(c)) = r.next_chunk() {
            for (f, b) in c.iter() {
                let link = f.link;
                // A test run takes at most a page of data.
                if matches!(link, LinkType::ETHERNET | LinkType::RAW)
                    && !b.is_empty()
                    && b.len() <= TEST_RUN_MAX
                {
                    out.push((link, b.to_vec()));
                }
            }
        }
    }
    out
}

/// The most bytes a test run takes (a page, less the kernel's head and
/// tail room).
const TEST_RUN_MAX: usize = 3_000;

fn decoded_hash(link: LinkType, frame: &[u8]) -> u32 {
    let mut rec = PacketRecord::new(0, frame.len() as u32, frame.len() as u32);
    decode(link, frame, &mut rec);
    if rec.has(wire::Has::FLOW) {
        rec.flow_hash
    } else {
        0
    }
}

/// The programs, by link type: as a socket filter runs, and as a fanout
/// group's program runs on a received frame.
#[derive(Default)]
struct Kernel {
    socket: std::collections::HashMap<u16, SocketProgram>,
    fanout: Option<SocketProgram>,
    /// The program of a group's second set of 3 rings (first 3).
    among: Option<SocketProgram>,
}

impl Kernel {
    fn hash(&mut self, link: LinkType, frame: &[u8]) -> u32 {
        let prog = self.socket.entry(link.0).or_insert_with(|| {
            shard::load(link, Verdict::Hash, None, "weir_hash").unwrap_or_else(|e| panic!("{e}"))
        });
        prog.test_run(frame, 1).unwrap().0
    }

    /// The fanout program's hash of an Ethernet frame received (its link
    /// header taken off by the kernel first, as on a live interface), or
    /// `None` where the kernel's test harness takes no such frame (it
    /// refuses an IP ethertype with less than an IP header after it).
    fn received_hash(&mut self, frame: &[u8]) -> Option<u32> {
        let prog = self.fanout.get_or_insert_with(|| {
            shard::load(LinkType::ETHERNET, Verdict::Fanout, None, "weir_fanout")
                .unwrap_or_else(|e| panic!("{e}"))
        });
        match prog.test_run_received(frame) {
            Ok(hash) => Some(hash),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput && frame.len() < 54 => None,
            Err(e) => panic!("{e}: {:02x?}", &frame[..frame.len().min(40)]),
        }
    }

    /// The ring the program of a group's second set of three rings deals
    /// a received Ethernet frame to (3 to 5), as [`Kernel::received_hash`].
    fn received_among(&mut self, frame: &[u8]) -> Option<u32> {
        let prog = self.among.get_or_insert_with(|| {
            let v = Verdict::FanoutAmong { rings: 3, first: 3 };
            shard::load(LinkType::ETHERNET, v, None, "weir_fanout_b")
                .unwrap_or_else(|e| panic!("{e}"))
        });
        prog.test_run_received(frame).ok()
    }
}

fn mismatch(kernel: &mut Kernel, link: LinkType, frame: &[u8]) -> Option<String> {
    let want = decoded_hash(link, frame);
    let got = kernel.hash(link, frame);
    // The kernel takes a test frame of no more than a link header for none.
    // The fanout program returns the hash remixed (`fanout_value`).
    let received = (link == LinkType::ETHERNET && frame.len() > 14)
        .then(|| kernel.received_hash(frame))
        .flatten();
    let among = received.and_then(|_| kernel.received_among(frame));
    let received_ok = received.is_none_or(|r| r == shard::fanout_value(want))
        && among.is_none_or(|r| r == 3 + shard::fanout_ring(want, 3));
    (got != want || !received_ok).then(|| {
        format!(
            "link {} len {}: kernel {got:#x} (received by the fanout program {received:x?}, \
             dealt to ring {among:?} of 3..6) decoder {want:#x} {:02x?}",
            link.0,
            frame.len(),
            &frame[..frame.len().min(96)]
        )
    })
}

#[test]
fn kernel_flow_hash_equals_the_decoders_on_the_corpus() {
    let frames = frames();
    assert!(frames.len() > 6_000, "only {} frames", frames.len());
    let mut kernel = Kernel::default();
    let mut hashed = 0usize;
    let mismatches: Vec<String> = frames
        .iter()
        .filter_map(|(link, frame)| {
            hashed += (decoded_hash(*link, frame) != 0) as usize;
            mismatch(&mut kernel, *link, frame)
        })
        .take(10)
        .collect();
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(hashed > 4_000, "only {hashed} frames had a flow hash");
}

/// Every prefix of the corpus frames' headers, and frames with header
/// bytes changed at random: the program's bounds checks and branches
/// against the decoder's (a differential fuzz run, seeded, bounded).
#[test]
fn kernel_flow_hash_equals_the_decoders_on_cut_and_damaged_frames() {
    let frames = frames();
    let mut kernel = Kernel::default();
    let mut rng = 0x5eed_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut runs, mut mismatches) = (0usize, Vec::new());
    for (link, frame) in frames.iter().step_by(3) {
        // A tunnel's inner headers lie further in.
        let deep = if tunnelled(*link, frame) { 260 } else { 100 };
        for cut in 1..frame.len().min(deep) {
            runs += 1;
            mismatches.extend(mismatch(&mut kernel, *link, &frame[..cut]));
        }
        for _ in 0..20 {
            let mut f = frame.clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() as usize) % f.len().min(deep);
                f[at] = next() as u8;
            }
            runs += 1;
            mismatches.extend(mismatch(&mut kernel, *link, &f));
        }
        if mismatches.len() >= 10 {
            break;
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(runs > 100_000, "only {runs} runs");
}

fn tunnelled(link: LinkType, frame: &[u8]) -> bool {
    let mut rec = PacketRecord::new(0, frame.len() as u32, frame.len() as u32);
    decode(link, frame, &mut rec);
    rec.tunnel.depth > 0
}

/// The first Ethernet frame of the corpus carrying `ethertype` directly
/// with a flow hash.
fn sample(frames: &[(LinkType, Vec<u8>)], ethertype: u16) -> Vec<u8> {
    frames
        .iter()
        .find(|(l, f)| {
            *l == LinkType::ETHERNET
                && f.len() > 60
                && f[12..14] == ethertype.to_be_bytes()
                && decoded_hash(*l, f) != 0
                && !tunnelled(*l, f)
                && (ethertype != 0x86dd || matches!(f[20], 6 | 17))
        })
        .map(|(_, f)| f.clone())
        .expect("a sample frame")
}

/// `frame` with `n` VLAN tags after the MAC addresses.
fn with_tags(frame: &[u8], n: usize) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    for i in 0..n {
        let tpid: u16 = [0x88a8, 0x8100, 0x9100][i % 3];
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&(100 + i as u16).to_be_bytes());
    }
    f.extend_from_slice(&frame[12..]);
    f
}

/// An Ethernet/IPv6 `frame` with extension headers `(type, bytes)`
/// inserted before its transport header.
fn with_extensions(frame: &[u8], exts: &[(u8, Vec<u8>)]) -> Vec<u8> {
    let mut f = frame[..54].to_vec();
    let mut next = frame[20];
    let mut chain = Vec::new();
    for (ty, body) in exts.iter().rev() {
        let mut h = body.clone();
        h[0] = next;
        next = *ty;
        chain.splice(0..0, h);
    }
    f[20] = next;
    let plen = u16::from_be_bytes([f[18], f[19]]) as usize + chain.len();
    f[18..20].copy_from_slice(&(plen as u16).to_be_bytes());
    f.extend_from_slice(&chain);
    f.extend_from_slice(&frame[54..]);
    f
}

/// Options header (hop-by-hop, routing, destination) of `units` × 8 bytes.
fn options(units: u8) -> Vec<u8> {
    let mut h = vec![0u8; units as usize * 8];
    h[1] = units - 1;
    h
}

fn fragment(offset: u16, more: bool) -> Vec<u8> {
    let mut h = vec![0u8; 8];
    h[2..4].copy_from_slice(&((offset << 3) | more as u16).to_be_bytes());
    h[4..8].copy_from_slice(&0xabcd_0123u32.to_be_bytes());
    h
}

/// Stacked VLAN tags (the decoder follows four), IPv6 extension chains
/// (options, AH, first and later fragments, a chain too long to follow),
/// and a TSO frame's zero IPv4 length, built from corpus frames.
#[test]
fn kernel_flow_hash_equals_the_decoders_on_tags_extension_chains_and_fragments() {
    let frames = frames();
    let (v4, v6) = (sample(&frames, 0x0800), sample(&frames, 0x86dd));
    let mut built = Vec::new();
    for n in 0..=6 {
        built.push(with_tags(&v4, n));
        built.push(with_tags(&v6, n));
    }
    let mut tso = v4.clone();
    tso[16..18].copy_from_slice(&[0, 0]);
    built.push(tso);
    let ah = {
        let mut h = vec![0u8; 16];
        h[1] = 2;
        h
    };
    let chains: Vec<Vec<(u8, Vec<u8>)>> = vec![
        vec![(0, options(1))],
        vec![(0, options(2)), (60, options(1))],
        vec![(43, options(3))],
        vec![(51, ah.clone())],
        vec![(44, fragment(0, true))],
        vec![(44, fragment(0, false))],
        vec![(44, fragment(185, true))],
        vec![(0, options(1)), (44, fragment(7, false)), (60, options(1))],
        vec![(60, options(1)); 31],
        vec![(60, options(1)); 32],
        vec![(60, options(1)); 33],
    ];
    for c in &chains {
        built.push(with_extensions(&v6, c));
    }
    let mut kernel = Kernel::default();
    let mut distinct = std::collections::HashSet::new();
    let mut mismatches = Vec::new();
    for f in &built {
        distinct.insert(decoded_hash(LinkType::ETHERNET, f));
        mismatches.extend(mismatch(&mut kernel, LinkType::ETHERNET, f));
        // Each cut short at every length past the Ethernet header.
        for cut in 14..f.len().min(400) {
            mismatches.extend(mismatch(&mut kernel, LinkType::ETHERNET, &f[..cut]));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{}",
        mismatches[..mismatches.len().min(10)].join("\n")
    );
    // Tags, chains and fragments change what the decoder hashes: the cases
    // are not all one hash.
    assert!(distinct.len() >= 4, "{distinct:?}");
}

/// A tcpdump filter translated to eBPF behind the shard test returns what
/// libpcap's interpreter returns on the same frame, for every frame of
/// share 0 of 1 (all of them); with 2 shares, a frame passes exactly one.
#[test]
fn translated_tcpdump_filters_decide_as_libpcap_does() {
    let frames: Vec<Vec<u8>> = frames()
        .into_iter()
        .filter(|(l, _)| *l == LinkType::ETHERNET)
        .map(|(_, f)| f)
        .collect();
    let exprs = [
        "tcp",
        "udp port 53",
        "ip6",
        "vlan",
        "vlan and tcp",
        "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
        "ip[6:2] & 0x1fff = 0 and ip[2:2] > 100",
        "net 10.0.0.0/8 or net 192.168.0.0/16",
        "greater 200",
        "ether broadcast or ether multicast",
        "icmp or icmp6",
        "not arp and not ip",
        "ip6 and (tcp or udp)",
        "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
        "ip[0] & 0xf != 5",
    ];
    let mut mismatches = Vec::new();
    for expr in exprs {
        let filter = capture::compile_filter(expr, LinkType::ETHERNET, 262_144).unwrap();
        let all = Shard { index: 0, count: 1 };
        let joined = shard::load(
            LinkType::ETHERNET,
            Verdict::Keep(all),
            Some(&filter.program),
            "weir_filter",
        )
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
        // The split into two shares, for a few of the expressions.
        let halves: Vec<SocketProgram> = (0..2)
            .filter(|_| ["tcp", "vlan", "greater 200"].contains(&expr))
            .map(|index| {
                let shard = Shard { index, count: 2 };
                shard::load(
                    LinkType::ETHERNET,
                    Verdict::Keep(shard),
                    Some(&filter.program),
                    "weir_filter",
                )
                .unwrap()
            })
            .collect();
        let mut passed = 0;
        for f in &frames {
            let want = filter.matches(f.len() as u32, f);
            let (got, _) = joined.test_run(f, 1).unwrap();
            passed += want as usize;
            if (got != 0) != want {
                mismatches.push(format!(
                    "{expr}: kernel {got} libpcap {want} {:02x?}",
                    &f[..f.len().min(64)]
                ));
            }
            if halves.is_empty() {
                continue;
            }
            let kept: Vec<bool> = halves
                .iter()
                .map(|h| h.test_run(f, 1).unwrap().0 != 0)
                .collect();
            let hash = decoded_hash(LinkType::ETHERNET, f);
            let share = Shard::of(hash, 2) as usize;
            if kept != [want && share == 0, want && share == 1] {
                mismatches.push(format!(
                    "{expr}: halves kept {kept:?}, share {share}, filter {want}"
                ));
            }
        }
        assert!(
            passed > 0 || expr == "vlan and tcp",
            "{expr} matched nothing: a weak case"
        );
    }
    assert!(
        mismatches.is_empty(),
        "{}",
        mismatches[..mismatches.len().min(10)].join("\n")
    );
}

fn v4(src: [u8; 4], dst: [u8; 4]) -> IpSpec {
    IpSpec::V4 {
        src,
        dst,
        ttl: 64,
        id: 7,
        dscp: 0,
        frag: 0x4000,
    }
}

fn v6(src: u8, dst: u8) -> IpSpec {
    let addr = |last: u8| {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        a[15] = last;
        a
    };
    IpSpec::V6 {
        src: addr(src),
        dst: addr(dst),
        hop_limit: 64,
        dscp: 0,
        flow_label: 0,
    }
}

/// A tenant's packet, one way or the other: IPv4 TCP, IPv6 UDP, or an
/// IPv4 fragment.
fn tenant(kind: usize, reverse: bool) -> Vec<u8> {
    let (ip, transport) = match kind {
        0 => (
            v4([10, 1, 0, 1], [10, 1, 0, 2]),
            TransportSpec::Tcp {
                sport: 43210,
                dport: 443,
                seq: 1,
                ack: 2,
                flags: 0x10,
                window: 500,
            },
        ),
        1 => (
            v6(0x11, 0x22),
            TransportSpec::Udp {
                sport: 5000,
                dport: 53,
            },
        ),
        _ => {
            let mut ip = v4([10, 1, 0, 3], [10, 1, 0, 4]);
            if let IpSpec::V4 { frag, .. } = &mut ip {
                *frag = 0x2000;
            }
            (
                ip,
                TransportSpec::Udp {
                    sport: 7000,
                    dport: 7001,
                },
            )
        }
    };
    let (ip, transport) = if reverse {
        (
            match ip {
                IpSpec::V4 {
                    src,
                    dst,
                    ttl,
                    id,
                    dscp,
                    frag,
                } => IpSpec::V4 {
                    src: dst,
                    dst: src,
                    ttl,
                    id,
                    dscp,
                    frag,
                },
                IpSpec::V6 { .. } => v6(0x22, 0x11),
            },
            match transport {
                TransportSpec::Tcp { sport, dport, .. } => TransportSpec::Tcp {
                    sport: dport,
                    dport: sport,
                    seq: 9,
                    ack: 8,
                    flags: 0x10,
                    window: 700,
                },
                TransportSpec::Udp { sport, dport } => TransportSpec::Udp {
                    sport: dport,
                    dport: sport,
                },
                other => other,
            },
        )
    } else {
        (ip, transport)
    };
    let mut f = Vec::new();
    FrameSpec {
        eth_src: [2, 0, 0, 0, 1, 1],
        eth_dst: [2, 0, 0, 0, 1, 2],
        vlan: None,
        ip,
        transport,
        payload: Payload::Zeros(40),
    }
    .build(&mut f);
    f
}

/// The tunnel endpoints' outer header, one way or the other.
fn outer(v6_outer: bool, reverse: bool) -> OuterSpec {
    let ip = match (v6_outer, reverse) {
        (false, false) => v4([192, 0, 2, 1], [192, 0, 2, 2]),
        (false, true) => v4([192, 0, 2, 2], [192, 0, 2, 1]),
        (true, false) => v6(0xa1, 0xa2),
        (true, true) => v6(0xa2, 0xa1),
    };
    OuterSpec {
        eth_src: [2, 0, 0, 0, 9, 1],
        eth_dst: [2, 0, 0, 0, 9, 2],
        ip,
    }
}

/// Every encapsulation weir builds (over IPv4 and IPv6 where it has an
/// outer IP header), each around every tenant packet, and each nested in
/// every other: the kernel's hash is the decoder's, whole, cut at every
/// length and with bytes changed; and, the point of it, both directions of
/// a tenant flow hash alike though their tunnel's outer headers differ
/// (VXLAN, GENEVE and GTP-U pick their UDP source port from the inner flow
/// the way each endpoint sees it).
#[test]
fn kernel_flow_hash_follows_every_tunnel_as_the_decoder_does() {
    let mut frames = Vec::new();
    for e in EncapSpec::every() {
        for v6_outer in [false, true] {
            if v6_outer && !e.has_outer_ip() {
                continue;
            }
            for kind in 0..3 {
                let pair: Vec<Vec<u8>> = [false, true]
                    .iter()
                    .map(|&reverse| {
                        let mut f = Vec::new();
                        encapsulate(
                            &tenant(kind, reverse),
                            &e,
                            &outer(v6_outer, reverse),
                            &mut f,
                        );
                        f
                    })
                    .collect();
                frames.push((e, kind, pair));
            }
        }
    }
    // Nested: each encapsulation inside each other one, and five deep (one
    // more than the decoder follows).
    let mut nested = Vec::new();
    for a in EncapSpec::every() {
        for b in EncapSpec::every() {
            let mut inner = Vec::new();
            encapsulate(&tenant(0, false), &a, &outer(false, false), &mut inner);
            let mut f = Vec::new();
            encapsulate(&inner, &b, &outer(true, false), &mut f);
            nested.push(f);
        }
    }
    let mut deep = tenant(1, false);
    for e in EncapSpec::every().iter().take(6) {
        let mut f = Vec::new();
        encapsulate(&deep, e, &outer(false, false), &mut f);
        deep = f;
        nested.push(deep.clone());
    }

    let mut kernel = Kernel::default();
    let mut mismatches = Vec::new();
    let mut rng = 0x7e11_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let all: Vec<&Vec<u8>> = frames
        .iter()
        .flat_map(|(_, _, pair)| pair.iter())
        .chain(nested.iter())
        .collect();
    for f in &all {
        mismatches.extend(mismatch(&mut kernel, LinkType::ETHERNET, f));
        for cut in 14..f.len() {
            mismatches.extend(mismatch(&mut kernel, LinkType::ETHERNET, &f[..cut]));
        }
        // Every header byte changed in its lowest bit, in its highest, and
        // in all of them; then bytes changed at random.
        for at in 14..f.len().min(240) {
            for flip in [0x01, 0x80, 0xff] {
                let mut g = (*f).clone();
                g[at] ^= flip;
                mismatches.extend(mismatch(&mut kernel, LinkType::ETHERNET, &g));
            }
        }
        for _ in 0..40 {
            let mut g = (*f).clone();
            for _ in 0..1 + next() % 3 {
                let at = 14 + (next() as usize) % (g.len() - 14);
                g[at] = next() as u8;
            }
            mismatches.extend(mismatch(&mut kernel, LinkType::ETHERNET, &g));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches, e.g.\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(10)].join("\n")
    );

    for (e, kind, pair) in &frames {
        let (there, back) = (
            kernel.hash(LinkType::ETHERNET, &pair[0]),
            kernel.hash(LinkType::ETHERNET, &pair[1]),
        );
        let alone = decoded_hash(LinkType::ETHERNET, &tenant(*kind, false));
        assert_ne!(there, 0, "{e:?} tenant {kind}");
        assert_eq!(there, back, "{e:?} tenant {kind}: the two directions");
        assert_eq!(there, alone, "{e:?} tenant {kind}: the tenant's own hash");
    }
    // The nested frames hash as the tenant's packet, up to the depth
    // followed.
    let alone = decoded_hash(LinkType::ETHERNET, &tenant(1, false));
    let depth_hashes: Vec<u32> = nested[nested.len() - 6..]
        .iter()
        .map(|f| kernel.hash(LinkType::ETHERNET, f))
        .collect();
    assert!(
        depth_hashes[..4].iter().all(|&h| h == alone),
        "{depth_hashes:x?}"
    );
    assert_ne!(
        depth_hashes[4], alone,
        "a fifth encapsulation is not followed"
    );
}
