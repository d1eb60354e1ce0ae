use std::collections::HashMap;

use traffic::{AppMix, FixedSize, FrameSource, Imix};
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
