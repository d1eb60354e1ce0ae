//! The tracker on hand-made conversations.

use wire::Segment;

use crate::dns::{self, TYPE_A};
use crate::tls;
use crate::track::{TCP, Tracker, TrackerOptions, UDP};

const C: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1];
const S: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 2];

/// A TCP conversation between C:40000 and S:`port`, its segments made in
/// order with their sequence numbers.
struct Conv {
    port: u16,
    cport: u16,
    seq: [u32; 2],
    ts: i64,
    segs: Vec<(i64, bool, u16, u32, Vec<u8>)>,
}

impl Conv {
    fn new(port: u16) -> Conv {
        let mut c = Conv {
            port,
            cport: 40000,
            seq: [1000, 90000],
            ts: 1_000_000_000,
            segs: Vec::new(),
        };
        c.flags(true, 0x002);
        c.flags(false, 0x012);
        c
    }
    fn push(&mut self, from_client: bool, flags: u16, data: &[u8]) {
        let d = if from_client { 0 } else { 1 };
        self.ts += 1_000_000;
        self.segs
            .push((self.ts, from_client, flags, self.seq[d], data.to_vec()));
        self.seq[d] = self.seq[d].wrapping_add(data.len() as u32 + (flags & 0x003 != 0) as u32);
    }
    fn flags(&mut self, from_client: bool, flags: u16) {
        self.push(from_client, flags, &[]);
    }
    fn data(&mut self, from_client: bool, data: &[u8]) {
        self.push(from_client, 0x018, data);
    }
    fn feed(&self, t: &mut Tracker) {
        for (ts, from_client, flags, seq, data) in &self.segs {
            let (src, dst, sp, dp) = if *from_client {
                (C, S, self.cport, self.port)
            } else {
                (S, C, self.port, self.cport)
            };
            t.track(&Segment {
                ts_ns: *ts,
                src,
                dst,
                src_port: sp,
                dst_port: dp,
                proto: TCP,
                tcp_seq: *seq,
                tcp_flags: *flags,
                payload: data,
                payload_wire: data.len() as u32,
            });
        }
    }
}

fn udp(t: &mut Tracker, ts: i64, from_client: bool, port: u16, data: &[u8]) {
    let (src, dst, sp, dp) = if from_client {
        (C, S, 33333, port)
    } else {
        (S, C, port, 33333)
    };
    t.track(&Segment {
        ts_ns: ts,
        src,
        dst,
        src_port: sp,
        dst_port: dp,
        proto: UDP,
        tcp_seq: 0,
        tcp_flags: 0,
        payload: data,
        payload_wire: data.len() as u32,
    });
}

#[test]
fn tls_hello_split_over_segments_with_its_certificate() {
    let hello = tls::build_client_hello(
        [3; 32],
        &[0xc02f, 0xc030],
        Some("shop.example.com"),
        &["http/1.1"],
        &[],
        &[29, 23],
    );
    let cert = crate::x509::build_test_certificate("shop.example.com", "Example CA");
    let server = tls::build_server_hello([4; 32], 0xc02f, false, None, Some(&cert));
    let mut c = Conv::new(443);
    c.data(true, &hello[..20]);
    c.data(true, &hello[20..]);
    c.data(false, &server[..100]);
    c.data(false, &server[100..]);
    c.data(true, &[23, 3, 3, 0, 4, 1, 2, 3, 4]);
    let mut t = Tracker::new(TrackerOptions::default());
    c.feed(&mut t);
    assert_eq!(t.tls.len(), 1);
    let r = &t.tls[0];
    assert_eq!(r.hello.sni.as_deref(), Some("shop.example.com"));
    assert_eq!(r.ends.client_port, 40000);
    assert_eq!(r.ends.server_port, 443);
    let s = r.server.as_ref().unwrap();
    assert_eq!(s.hello.cipher, 0xc02f);
    assert_eq!(
        s.certificate.as_ref().unwrap().subject,
        "CN=shop.example.com"
    );
    assert!(r.ja4.starts_with("t12d0207h1_"), "{}", r.ja4);
    assert_eq!(t.counters().tls_handshakes, 1);
}

#[test]
fn tls_13_hello_without_server_is_written_at_the_end() {
    let hello = tls::build_client_hello(
        [3; 32],
        &[0x1301],
        Some("a.example"),
        &["h2"],
        &[0x0304],
        &[29],
    );
    let mut c = Conv::new(8443);
    c.data(true, &hello);
    let mut t = Tracker::new(TrackerOptions::default());
    c.feed(&mut t);
    assert!(t.tls.is_empty());
    t.end();
    assert_eq!(t.tls.len(), 1);
    assert!(t.tls[0].server.is_none());
    assert_eq!(t.counters().tls_without_server, 1);
}

#[test]
fn http_pipelined_with_bodies_matched_in_order() {
    let mut c = Conv::new(80);
    c.data(
        true,
        b"GET /a HTTP/1.1\r\nHost: h.example\r\n\r\nPOST /b HTTP/1.1\r\nHost: h.example\r\nContent-Length: 5\r\n\r\nhello",
    );
    c.data(true, b"HEAD /c HTTP/1.1\r\nHost: h.example\r\n\r\n");
    c.data(
        false,
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nabc",
    );
    c.data(
        false,
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n",
    );
    c.data(
        false,
        b"0\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 999\r\n\r\n",
    );
    c.data(true, b"GET /d HTTP/1.1\r\nHost: h.example\r\n\r\n");
    c.flags(true, 0x011);
    c.flags(false, 0x011);
    let mut t = Tracker::new(TrackerOptions::default());
    c.feed(&mut t);
    let got: Vec<(&str, Option<u16>)> = t
        .http
        .iter()
        .map(|r| {
            (
                r.request.target.as_str(),
                r.response.as_ref().map(|s| s.status),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("/a", Some(200)),
            ("/b", Some(201)),
            ("/c", Some(404)),
            ("/d", None)
        ]
    );
    assert_eq!(t.counters().http_requests, 4);
    assert_eq!(t.counters().http_unanswered, 1);
}

#[test]
fn dns_matched_unanswered_and_unmatched() {
    let mut t = Tracker::new(TrackerOptions::default());
    let q = dns::build(1, 0x0100, ("www.example.com", TYPE_A, 1), &[]);
    let r = dns::build(
        1,
        0x8180,
        ("www.example.com", TYPE_A, 1),
        &[(TYPE_A, 60, &[192, 0, 2, 80])],
    );
    udp(&mut t, 1_000_000_000, true, 53, &q);
    udp(&mut t, 1_002_000_000, false, 53, &r);
    let lone = dns::build(2, 0x0100, ("nothing.example", TYPE_A, 1), &[]);
    udp(&mut t, 1_003_000_000, true, 53, &lone);
    let stray = dns::build(3, 0x8183, ("gone.example", TYPE_A, 1), &[]);
    udp(&mut t, 1_004_000_000, false, 53, &stray);
    // Garbage and a loop on port 53: counted, no row.
    udp(&mut t, 1_005_000_000, true, 53, &[1, 2, 3]);
    let mut looped = vec![0, 9, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    looped.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
    udp(&mut t, 1_006_000_000, true, 53, &looped);
    t.end();
    assert_eq!(t.dns.len(), 3);
    let answered = &t.dns[0];
    assert_eq!(answered.qname.as_deref(), Some("www.example.com"));
    assert_eq!(answered.response_ts, Some(1_002_000_000));
    assert_eq!(answered.answers[0].addr.unwrap()[12..], [192, 0, 2, 80]);
    let stray = &t.dns[1];
    assert!(stray.query_ts.is_none());
    assert_eq!(stray.rcode(), Some(3));
    let lone = &t.dns[2];
    assert!(lone.response_ts.is_none());
    let c = t.counters();
    assert_eq!(
        (c.dns_matched, c.dns_unanswered, c.dns_unmatched_responses),
        (1, 1, 1)
    );
    assert_eq!(
        (c.dns_errors, c.dns_truncated, c.dns_bad_pointer),
        (2, 1, 1)
    );
}

#[test]
fn dns_over_tcp_with_length_prefixes() {
    let q = dns::build(7, 0x0100, ("tcp.example", TYPE_A, 1), &[]);
    let r = dns::build(
        7,
        0x8180,
        ("tcp.example", TYPE_A, 1),
        &[(TYPE_A, 5, &[1, 2, 3, 4])],
    );
    let framed = |m: &[u8]| {
        let mut v = (m.len() as u16).to_be_bytes().to_vec();
        v.extend_from_slice(m);
        v
    };
    let mut c = Conv::new(53);
    let fq = framed(&q);
    c.data(true, &fq[..3]);
    c.data(true, &fq[3..]);
    c.data(false, &framed(&r));
    let mut t = Tracker::new(TrackerOptions::default());
    c.feed(&mut t);
    assert_eq!(t.dns.len(), 1);
    assert_eq!(t.dns[0].ends.proto, TCP);
    assert_eq!(t.dns[0].answers.len(), 1);
}

#[test]
fn flows_without_start_and_garbage_are_counted() {
    let mut c = Conv::new(443);
    c.segs.clear(); // no handshake seen
    c.data(
        true,
        &tls::build_client_hello([1; 32], &[0x1301], None, &[], &[], &[29]),
    );
    let mut g = Conv::new(443);
    g.data(true, b"SSH-2.0-OpenSSH_9.2\r\n");
    let mut h = Conv::new(80);
    h.data(true, &[0u8; 40]);
    g.cport = 40001;
    h.cport = 40002;
    let mut t = Tracker::new(TrackerOptions::default());
    c.feed(&mut t);
    g.feed(&mut t);
    h.feed(&mut t);
    t.end();
    let n = t.counters();
    assert_eq!(n.segments_without_start, 1);
    assert_eq!(n.tls_errors, 1);
    assert_eq!(n.http_errors, 1);
    assert!(t.tls.is_empty() && t.http.is_empty());
}

/// The stage's gate: DNS on its two ports (either end), TCP on any port,
/// other UDP not at all.
#[test]
fn looks_at_dns_ports_and_tcp_only() {
    use crate::track::looks_at;
    for (sp, dp) in [(33333, 53), (53, 33333), (5353, 5353), (40000, 5353)] {
        assert!(looks_at(UDP, sp, dp), "{sp} -> {dp}");
    }
    for (sp, dp) in [(40000, 443), (40000, 8443), (1, 2)] {
        assert!(looks_at(TCP, sp, dp));
    }
    for (sp, dp) in [(40000, 9000), (443, 40000), (54, 52), (5354, 1)] {
        assert!(!looks_at(UDP, sp, dp), "{sp} -> {dp}");
    }
    assert!(!looks_at(132, 53, 53), "SCTP");
}

/// DNS on 5353 (mDNS) is decoded as on 53; the same message between other
/// UDP ports is not looked at.
#[test]
fn dns_on_both_ports_and_not_elsewhere() {
    let mut t = Tracker::new(TrackerOptions::default());
    let q = dns::build(7, 0x0100, ("printer.local", TYPE_A, 1), &[]);
    let r = dns::build(
        7,
        0x8400,
        ("printer.local", TYPE_A, 1),
        &[(TYPE_A, 120, &[192, 0, 2, 9])],
    );
    udp(&mut t, 1_000, true, 5353, &q);
    udp(&mut t, 2_000, false, 5353, &r);
    udp(&mut t, 3_000, true, 53, &q);
    udp(&mut t, 4_000, false, 53, &r);
    udp(&mut t, 5_000, true, 5000, &q);
    udp(&mut t, 6_000, false, 5000, &r);
    t.end();
    assert_eq!(t.dns.len(), 2);
    assert!(t.dns.iter().all(|d| d.response_ts.is_some()));
    assert_eq!(t.counters().dns_messages, 4);
}

/// A TCP flow whose SYN was not seen gets no place in the tracker, however
/// many segments it has (its data is counted); one whose SYN was seen is
/// followed on any port.
#[test]
fn flows_without_start_take_no_place() {
    let hello =
        tls::build_client_hello([5; 32], &[0x1301], Some("b.example"), &[], &[0x0304], &[29]);
    let mut late = Conv::new(8443);
    late.segs.clear();
    for _ in 0..5 {
        late.data(true, &hello);
        late.flags(false, 0x010);
    }
    let mut t = Tracker::new(TrackerOptions::default());
    late.feed(&mut t);
    assert_eq!(t.flows_followed(), 0);
    assert_eq!(t.counters().segments_without_start, 5);
    assert_eq!(t.counters().tcp_flows, 0);
    let mut seen = Conv::new(8443);
    seen.cport = 40001;
    seen.data(true, &hello);
    seen.feed(&mut t);
    assert_eq!(t.flows_followed(), 1);
    t.end();
    assert_eq!(t.tls.len(), 1);
    assert_eq!(t.tls[0].hello.sni.as_deref(), Some("b.example"));
    assert_eq!(t.counters().tcp_flows, 1);
}
