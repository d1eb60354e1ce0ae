//! The RPC stage on arbitrary traffic: `rpc::msg::parse` and the NFS
//! decoders on raw bytes, and the tracker on a stream of segments between
//! two hosts, TCP and UDP, in both directions, with gaps (wire length past
//! the captured bytes), sequence jumps and time going forward. Besides
//! "never panics": every transaction the tracker gives out is a call, a
//! reply or both, with times in order, and its counters add up.
//!
//! Input: a sequence of segments, each
//! `[flags, seq delta hi, seq delta lo, uncaptured, len, payload[len]]`;
//! flags bit 0: direction, bit 1: UDP, bit 2: SYN, bit 3: FIN,
//! bits 4-7: time step in 10 ms units.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rpc::{Segment, Tracker, TrackerOptions};

const CLIENT: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1];
const SERVER: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2];

fuzz_target!(|data: &[u8]| {
    // The message and NFS parsers alone, on the whole input.
    if let Some(m) = rpc::msg::parse(data) {
        let _ = m.xid();
    }
    for (prog, vers) in [(100003, 3), (100003, 4), (100005, 3), (100000, 2)] {
        for procedure in [0, 1, 3, 6, 7, 8] {
            let mut detail = rpc::nfs::decode_call(prog, vers, procedure, data);
            let _ = rpc::nfs::decode_reply(prog, vers, procedure, &mut detail.ops, data);
        }
    }

    let opts = TrackerOptions {
        call_timeout_ns: 2_000_000_000,
        max_message_prefix: 512,
        max_streams: 8,
        ..TrackerOptions::default()
    };
    let mut tracker = Tracker::new(opts);
    let mut out = Vec::new();
    // A second tracker over the same segments whose completed
    // transactions are read where it keeps them, a few at a time, as a
    // conversion's RPC stage reads them: it must give the same ones.
    let mut in_place = Tracker::new(opts);
    let batch = data.first().map_or(1, |b| (b % 8) as usize + 1);
    let mut read = Vec::new();
    let (mut ts, mut seq) = (1_000_000_000i64, [1000u32, 5000u32]);
    let mut rest = data;
    while let [flags, hi, lo, uncaptured, len, tail @ ..] = rest {
        let n = (*len as usize).min(tail.len());
        let (payload, more) = tail.split_at(n);
        rest = more;
        let dir = (flags & 1) as usize;
        let udp = flags & 2 != 0;
        ts += (flags >> 4) as i64 * 10_000_000;
        let (src, dst, sport, dport) = if dir == 0 {
            (CLIENT, SERVER, 800, 2049)
        } else {
            (SERVER, CLIENT, 2049, 800)
        };
        let wire = n as u32 + *uncaptured as u32;
        let seg = Segment {
            ts_ns: ts,
            src,
            dst,
            src_port: sport,
            dst_port: dport,
            proto: if udp { 17 } else { 6 },
            tcp_seq: seq[dir],
            tcp_flags: ((flags & 4 != 0) as u16) << 1 | (flags & 8 != 0) as u16 | 0x10,
            payload,
            payload_wire: wire,
        };
        tracker.segment(&seg, &mut out);
        in_place.track(&seg);
        if in_place.ready().len() >= batch {
            read.extend(in_place.ready().cloned());
            in_place.release();
        }
        // A jump forward (a lost segment) when the delta says so.
        seq[dir] = seq[dir]
            .wrapping_add(wire)
            .wrapping_add(u16::from_be_bytes([*hi, *lo]) as u32 & 0x0fff);
    }
    tracker.finish(&mut out);
    in_place.end();
    read.extend(in_place.ready().cloned());
    in_place.release();
    assert_eq!(read, out);
    for t in &out {
        assert!(t.call.is_some() || t.reply.is_some(), "{t:?}");
        if let (Some(first), Some(last)) = (t.call_ts, t.last_call_ts) {
            assert!(first <= last, "{t:?}");
        }
        if t.retransmits > 0 {
            assert!(t.call.is_some());
        }
    }
    let c = tracker.counters();
    assert!(c.matched <= c.calls && c.matched <= c.replies, "{c:?}");
    assert_eq!(
        out.len() as u64,
        c.matched + c.calls_without_reply + c.replies_without_call,
        "{c:?}"
    );
});
