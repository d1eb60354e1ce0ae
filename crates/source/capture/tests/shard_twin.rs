//! The shard filter's flow hash, run in the kernel (BPF_PROG_TEST_RUN),
//! equals the decoder's on every Ethernet and raw-IP frame of
//! tcpdump's test corpus that is not tunnelled (the filter does not follow
//! tunnels: it shares a tunnelled frame out by its outer header, where the
//! decoder hashes the innermost packet); a tcpdump filter joined to the shard test still
//! decides as libpcap's own interpreter does. Needs root (bpf(2)).

use std::path::PathBuf;

use capture::bpf::SocketProgram;
use capture::shard::{Shard, Verdict, program};

use pcapio::{ReaderOptions, TraceReader};
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

/// What [`decoded_hash`] gives for a tunnelled frame: no hash to compare.
const TUNNELLED: u32 = 0xffff_ffff;

/// The most bytes a test run takes (a page, less the kernel's head and
/// tail room).
const TEST_RUN_MAX: usize = 3_000;

fn decoded_hash(link: LinkType, frame: &[u8]) -> u32 {
    let mut rec = PacketRecord::new(0, frame.len() as u32, frame.len() as u32);
    decode(link, frame, &mut rec);
    if rec.tunnel_depth > 0 {
        // Not the twin's business (see the top).
        return TUNNELLED;
    }
    if rec.has(wire::Has::FLOW) {
        rec.flow_hash
    } else {
        0
    }
}

struct Kernel(std::collections::HashMap<u16, SocketProgram>);

impl Kernel {
    fn hash(&mut self, link: LinkType, frame: &[u8]) -> u32 {
        let prog = self.0.entry(link.0).or_insert_with(|| {
            let insns = program(link, Verdict::Hash, None).unwrap();
            SocketProgram::load(&insns, "weir_hash").unwrap_or_else(|e| panic!("{e}"))
        });
        prog.test_run(frame, 1).unwrap().0
    }
}

fn mismatch(kernel: &mut Kernel, link: LinkType, frame: &[u8]) -> Option<String> {
    let want = decoded_hash(link, frame);
    if want == TUNNELLED {
        return None;
    }
    let got = kernel.hash(link, frame);
    (got != want).then(|| {
        format!(
            "link {} len {}: kernel {got:#x} decoder {want:#x} {:02x?}",
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
    let mut kernel = Kernel(Default::default());
    let mut hashed = 0usize;
    let mismatches: Vec<String> = frames
        .iter()
        .filter_map(|(link, frame)| {
            hashed += !matches!(decoded_hash(*link, frame), 0 | TUNNELLED) as usize;
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
    let mut kernel = Kernel(Default::default());
    let mut rng = 0x5eed_u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut runs, mut mismatches) = (0usize, Vec::new());
    for (link, frame) in frames.iter().step_by(3) {
        for cut in 1..frame.len().min(100) {
            runs += 1;
            mismatches.extend(mismatch(&mut kernel, *link, &frame[..cut]));
        }
        for _ in 0..20 {
            let mut f = frame.clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() as usize) % f.len().min(100);
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

/// The first Ethernet frame of the corpus carrying `ethertype` directly
/// with a flow hash.
fn sample(frames: &[(LinkType, Vec<u8>)], ethertype: u16) -> Vec<u8> {
    frames
        .iter()
        .find(|(l, f)| {
            *l == LinkType::ETHERNET
                && f.len() > 60
                && f[12..14] == ethertype.to_be_bytes()
                && !matches!(decoded_hash(*l, f), 0 | TUNNELLED)
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
    let mut kernel = Kernel(Default::default());
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
        let insns = program(
            LinkType::ETHERNET,
            Verdict::Keep(all),
            Some(&filter.program),
        )
        .unwrap();
        let joined =
            SocketProgram::load(&insns, "weir_filter").unwrap_or_else(|e| panic!("{expr}: {e}"));
        // The split into two shares, for a few of the expressions.
        let halves: Vec<SocketProgram> = (0..2)
            .filter(|_| ["tcp", "vlan", "greater 200"].contains(&expr))
            .map(|index| {
                let shard = Shard { index, count: 2 };
                let insns = program(
                    LinkType::ETHERNET,
                    Verdict::Keep(shard),
                    Some(&filter.program),
                )
                .unwrap();
                SocketProgram::load(&insns, "weir_filter").unwrap()
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
            if hash == TUNNELLED {
                continue;
            }
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
