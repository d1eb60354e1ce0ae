//! The app tracker on a stream of segments between a client and a server
//! on `port`, shared by the dns, tls and http targets: per segment
//! `[flags, seq delta hi, seq delta lo, uncaptured, len, payload[len]]`;
//! flags bit 0: direction, bit 1: UDP, bit 2: SYN, bit 3: FIN, bits 4-7:
//! time step in 10 ms units. Besides "never panics": every record it
//! gives out is whole, and its counters add up.

use app::{Tracker, TrackerOptions};
use wire::Segment;

const CLIENT: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1];
const SERVER: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2];

pub fn track(data: &[u8], port: u16) {
    let opts = TrackerOptions {
        query_timeout_ns: 2_000_000_000,
        max_flows: 8,
        client_hello_max: 2048,
        server_hello_max: 4096,
        ..TrackerOptions::default()
    };
    let mut tracker = Tracker::new(opts);
    let (mut ts, mut seq) = (1_000_000_000i64, [1000u32, 5000u32]);
    let mut rest = data;
    while let [flags, hi, lo, uncaptured, len, tail @ ..] = rest {
        let n = (*len as usize).min(tail.len());
        let (payload, more) = tail.split_at(n);
        rest = more;
        let dir = (flags & 1) as usize;
        ts += (flags >> 4) as i64 * 10_000_000;
        let (src, dst, sport, dport) = if dir == 0 {
            (CLIENT, SERVER, 40000, port)
        } else {
            (SERVER, CLIENT, port, 40000)
        };
        let syn = flags & 4 != 0;
        let wire = n as u32 + *uncaptured as u32;
        tracker.track(&Segment {
            ts_ns: ts,
            src,
            dst,
            src_port: sport,
            dst_port: dport,
            proto: if flags & 2 != 0 { 17 } else { 6 },
            tcp_seq: seq[dir],
            tcp_flags: (syn as u16) << 1 | (flags & 8 != 0) as u16 | if syn && dir == 0 { 0 } else { 0x10 },
            payload,
            payload_wire: wire,
        });
        seq[dir] = seq[dir]
            .wrapping_add(wire)
            .wrapping_add(syn as u32)
            .wrapping_add(u16::from_be_bytes([*hi, *lo]) as u32 & 0x0fff);
    }
    tracker.end();
    let c = tracker.counters().clone();
    assert_eq!(
        tracker.dns.len() as u64,
        c.dns_matched + c.dns_unanswered + c.dns_unmatched_responses,
        "{c:?}"
    );
    assert_eq!(tracker.tls.len() as u64, c.tls_handshakes, "{c:?}");
    assert!(tracker.http.len() as u64 <= c.http_requests, "{c:?}");
    for d in &tracker.dns {
        assert!(d.query_ts.is_some() || d.response_ts.is_some(), "{d:?}");
        if let (Some(q), Some(r)) = (d.query_ts, d.response_ts) {
            assert!(q <= r, "{d:?}");
        }
    }
    for h in &tracker.http {
        if let Some(r) = h.response_ts {
            assert!(h.ts <= r, "{h:?}");
        }
    }
    for t in &tracker.tls {
        assert_eq!(t.ja4.len(), 36, "{t:?}");
        assert_eq!(t.ja3.len(), 32, "{t:?}");
    }
}
