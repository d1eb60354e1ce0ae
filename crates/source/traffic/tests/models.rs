use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use traffic::{
    AppMix, FixedSize, Flood, FloodSpec, FrameSizes, FrameSource, Imix, PayloadFill, Timing,
};
use wire::{Has, LinkType, PacketRecord, ParseError, decode};

fn records(src: &mut dyn FrameSource) -> Vec<PacketRecord> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while let Some(ts) = src.next_frame(&mut buf) {
        let mut r = PacketRecord::new(ts, buf.len() as u32, buf.len() as u32);
        decode(LinkType::ETHERNET, &buf, &mut r);
        assert_eq!(r.parse_error, ParseError::None);
        out.push(r);
    }
    out
}

#[test]
fn fixed_size_frames() {
    let recs = records(&mut FixedSize::new(64, 100, 1e6, 1000));
    assert_eq!(recs.len(), 1000);
    assert!(recs.iter().all(|r| r.wire_len == 64 && r.ip_proto == 17));
    assert_eq!(recs[1].ts_ns - recs[0].ts_ns, 1000);
    let flows: std::collections::HashSet<u32> = recs.iter().map(|r| r.flow_hash).collect();
    assert_eq!(flows.len(), 100);
}

#[test]
fn imix_sizes_and_sequence_numbers() {
    let recs = records(&mut Imix::new(1000, 1e5, 12_000, 1));
    let small = recs.iter().filter(|r| r.wire_len == 60).count() as f64 / 12_000.0;
    assert!((0.5..0.66).contains(&small), "7/12 small: {small}");
    let mut next: HashMap<u32, u32> = HashMap::new();
    for r in &recs {
        if let Some(&n) = next.get(&r.flow_hash) {
            assert_eq!(r.tcp_seq, n);
        }
        next.insert(r.flow_hash, r.tcp_seq.wrapping_add(r.payload_len));
    }
}

#[test]
fn appmix_is_plausible_tcp_and_udp() {
    let recs = records(&mut AppMix::new(300.0, 100_000, 42));
    assert_eq!(recs.len(), 100_000);
    assert!(
        recs.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns),
        "time order"
    );
    let tcp = recs.iter().filter(|r| r.has(Has::TCP)).count();
    let udp = recs.iter().filter(|r| r.has(Has::UDP)).count();
    let v6 = recs.iter().filter(|r| r.ip_version == 6).count();
    assert!(
        tcp > 50_000 && udp > 5000 && v6 > 5000,
        "tcp {tcp} udp {udp} v6 {v6}"
    );
    let syns = recs.iter().filter(|r| r.tcp_flags == 0x002).count();
    assert!(syns > 100, "{syns} connections");
    // Per direction of each TCP connection, data segments are contiguous.
    let mut next: HashMap<(u32, bool), u32> = HashMap::new();
    let mut checked = 0;
    for r in recs.iter().filter(|r| r.has(Has::TCP)) {
        let key = (r.flow_hash, r.flow_reversed());
        if r.payload_len > 0 {
            if let Some(&n) = next.get(&key) {
                assert_eq!(r.tcp_seq, n, "gap in a flow");
                checked += 1;
            }
            next.insert(key, r.tcp_seq.wrapping_add(r.payload_len));
        }
    }
    assert!(checked > 10_000);
    // Deterministic for a seed.
    let again = records(&mut AppMix::new(300.0, 1000, 42));
    assert_eq!(&recs[..1000], &again[..]);
}

fn flood(sizes: &str, flows: u32, payload: PayloadFill, seed: u64, count: u64) -> Flood {
    Flood::new(FloodSpec {
        sizes: sizes.parse().unwrap(),
        flows,
        payload,
        seed,
        count,
        timing: Timing {
            rate_pps: 1e6,
            burst: None,
        },
    })
    .unwrap()
}

fn frames(src: &mut dyn FrameSource) -> Vec<Vec<u8>> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while src.next_frame(&mut buf).is_some() {
        out.push(buf.clone());
    }
    out
}

/// The one's-complement sum over the IPv4 header and over the UDP datagram
/// with its pseudo-header both come out as 0xffff.
fn checksums_ok(f: &[u8]) -> bool {
    let ip = &f[14..34];
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    let udp = &f[34..14 + total];
    let pseudo = [&ip[12..20], &[0, 17], &(udp.len() as u16).to_be_bytes()[..]].concat();
    wire::build::checksum(&[ip], 0) == 0 && wire::build::checksum(&[&pseudo, udp], 0) == 0
}

#[test]
fn flood_sizes_parse() {
    assert_eq!(FrameSizes::from_str("64").unwrap().cycle(), &[64]);
    assert_eq!(
        "64, 512,1514".parse::<FrameSizes>().unwrap().cycle(),
        &[64, 512, 1514]
    );
    let imix: FrameSizes = "IMIX".parse().unwrap();
    assert_eq!(imix.cycle().len(), 12);
    assert_eq!(imix.cycle().iter().filter(|&&s| s == 60).count(), 7);
    assert_eq!(imix.cycle().iter().filter(|&&s| s == 590).count(), 4);
    assert_eq!(imix.to_string(), "imix");
    for bad in ["59", "9001", "", "big", "64,,128", "0x40"] {
        assert!(bad.parse::<FrameSizes>().is_err(), "{bad:?} accepted");
    }
    assert!("half".parse::<PayloadFill>().is_err());
}

#[test]
fn flood_frames_are_valid_udp_over_distinct_flows() {
    let recs = records(&mut flood("64,512,1514", 100, PayloadFill::Random, 1, 3000));
    assert_eq!(recs.len(), 3000);
    assert!(recs.iter().all(|r| r.ip_proto == 17 && r.has(Has::UDP)));
    // Sizes cycle: any three consecutive frames hold one of each.
    for w in recs.chunks(3) {
        let mut l: Vec<u32> = w.iter().map(|r| r.wire_len).collect();
        l.sort();
        assert_eq!(l, [64, 512, 1514]);
    }
    let flows: HashSet<u32> = recs.iter().map(|r| r.flow_hash).collect();
    assert_eq!(flows.len(), 100);
    let tuples: HashSet<_> = recs.iter().map(|r| (r.ip_src, r.src_port)).collect();
    assert_eq!(tuples.len(), 100);
    // Every flow meets every size within one cycle (flows × sizes frames).
    let mut seen: HashMap<u32, HashSet<u32>> = HashMap::new();
    for r in &recs[..300] {
        seen.entry(r.flow_hash).or_default().insert(r.wire_len);
    }
    assert!(seen.values().all(|s| s.len() == 3));
    let all = frames(&mut flood("64,512,1514", 100, PayloadFill::Random, 1, 3000));
    assert!(all.iter().all(|f| checksums_ok(f)));
}

#[test]
fn flood_is_periodic_and_deterministic() {
    let f = flood("imix", 10, PayloadFill::Zero, 7, 1000);
    assert_eq!(f.period(), Some(120));
    let a = frames(&mut flood("imix", 10, PayloadFill::Zero, 7, 1000));
    for i in 120..a.len() {
        assert_eq!(a[i], a[i - 120]);
    }
    for fill in [PayloadFill::Random, PayloadFill::HalfRandom] {
        // Random payloads: a cycle of flows × sizes frames repeated until it
        // holds RANDOM_CYCLE_BYTES, every frame's payload its own.
        let f = flood("1514", 10, fill, 7, u64::MAX);
        let p = f.period().unwrap() as usize;
        assert_eq!(p % 10, 0);
        assert!(p as u64 * 1514 >= traffic::RANDOM_CYCLE_BYTES);
        assert!(((p - 10) as u64 * 1514) < traffic::RANDOM_CYCLE_BYTES);
        let a = frames(&mut flood("1514", 10, fill, 7, 2 * p as u64 + 5));
        for i in p..a.len() {
            assert_eq!(a[i], a[i - p]);
        }
        let payloads: HashSet<&[u8]> = a[..p].iter().map(|f| &f[42..]).collect();
        assert_eq!(payloads.len(), p, "repeated payloads within a cycle");
        assert_eq!(a[..50], frames(&mut flood("1514", 10, fill, 7, 50))[..]);
        assert_ne!(a[..50], frames(&mut flood("1514", 10, fill, 8, 50))[..]);
    }
    // Large flow counts: every flow appears once per cycle of one size.
    let recs = records(&mut flood("60", 70_000, PayloadFill::Zero, 1, 70_000));
    let tuples: HashSet<_> = recs.iter().map(|r| (r.ip_src, r.src_port)).collect();
    assert_eq!(tuples.len(), 70_000);
}

#[test]
fn flood_payload_fills() {
    let zero_share = |fill| {
        let fs = frames(&mut flood("1514", 4, fill, 3, 40));
        let payload: Vec<u8> = fs.iter().flat_map(|f| f[42..].to_vec()).collect();
        payload.iter().filter(|&&b| b == 0).count() as f64 / payload.len() as f64
    };
    assert_eq!(zero_share(PayloadFill::Zero), 1.0);
    let r = zero_share(PayloadFill::Random);
    assert!(r < 0.01, "{r}");
    let h = zero_share(PayloadFill::HalfRandom);
    assert!((0.49..0.52).contains(&h), "{h}");
}

#[test]
fn flood_timestamps_follow_rate_and_bursts() {
    let mut f = Flood::new(FloodSpec {
        sizes: FrameSizes::fixed(100).unwrap(),
        flows: 1,
        payload: PayloadFill::Zero,
        seed: 1,
        count: 30,
        timing: Timing {
            rate_pps: 10.0,
            burst: Some((1_000_000_000, 4_000_000_000)),
        },
    })
    .unwrap();
    let mut buf = Vec::new();
    let ts: Vec<i64> = std::iter::from_fn(|| f.next_frame(&mut buf)).collect();
    assert_eq!(ts.len(), 30);
    let off: Vec<i64> = ts.iter().map(|t| (t - ts[0]) / 1_000_000).collect();
    // Ten frames 100 ms apart in each second on, then four seconds off.
    assert_eq!(&off[..3], &[0, 100, 200]);
    assert_eq!(off[9], 900);
    assert_eq!(off[10], 5000);
    assert_eq!(off[20], 10_000);
}
