//! Streams built by hand, with exact expectations: several messages per
//! segment, one message over several segments, lost segments, replies
//! without calls, timeouts, retransmitted calls.

use crate::msg::tests::{call_header, reply_header};
use crate::track::{Segment, TCP, Tracker, TrackerOptions, Transaction, UDP};

const CLIENT: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2];
const SERVER: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1];
const FH: &[u8] = &[7; 32];

fn be(v: &mut Vec<u8>, w: u32) {
    v.extend_from_slice(&w.to_be_bytes());
}

fn opaque(v: &mut Vec<u8>, b: &[u8]) {
    be(v, b.len() as u32);
    v.extend_from_slice(b);
    v.resize(v.len().next_multiple_of(4), 0);
}

/// A record-marked message.
fn marked(msg: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    be(&mut v, 0x8000_0000 | msg.len() as u32);
    v.extend_from_slice(msg);
    v
}

fn getattr(xid: u32) -> Vec<u8> {
    let mut m = call_header(xid, 100003, 3, 1);
    opaque(&mut m, FH);
    m
}

fn read(xid: u32, offset: u64, count: u32) -> Vec<u8> {
    let mut m = call_header(xid, 100003, 3, 6);
    opaque(&mut m, FH);
    m.extend_from_slice(&offset.to_be_bytes());
    be(&mut m, count);
    m
}

fn write(xid: u32, data: usize) -> Vec<u8> {
    let mut m = call_header(xid, 100003, 3, 7);
    opaque(&mut m, FH);
    m.extend_from_slice(&4096u64.to_be_bytes());
    be(&mut m, data as u32);
    be(&mut m, 2);
    opaque(&mut m, &vec![0xab; data]);
    m
}

fn fattr3(v: &mut Vec<u8>, size: u64) {
    for w in [1u32, 0o644, 1, 1000, 1000] {
        be(v, w);
    }
    v.extend_from_slice(&size.to_be_bytes());
    v.extend_from_slice(&[0; 40]);
    be(v, 1_700_000_000);
    be(v, 5);
    v.extend_from_slice(&[0; 8]);
}

fn getattr_reply(xid: u32, size: u64) -> Vec<u8> {
    let mut m = reply_header(xid);
    be(&mut m, 0);
    fattr3(&mut m, size);
    m
}

fn read_reply(xid: u32, n: usize) -> Vec<u8> {
    let mut m = reply_header(xid);
    be(&mut m, 0);
    be(&mut m, 1);
    fattr3(&mut m, 1 << 20);
    be(&mut m, n as u32);
    be(&mut m, 0);
    opaque(&mut m, &vec![0; n]);
    m
}

struct Conn {
    t: Tracker,
    out: Vec<Transaction>,
    seq: [u32; 2],
    ts: i64,
}

impl Conn {
    /// A TCP connection from its SYNs on.
    fn new() -> Conn {
        let mut c = Conn {
            t: Tracker::new(TrackerOptions::default()),
            out: Vec::new(),
            seq: [1000, 50_000],
            ts: 1_000_000_000,
        };
        c.raw(0, 0x002, &[], None);
        c.raw(1, 0x012, &[], None);
        c.seq[0] += 1;
        c.seq[1] += 1;
        c
    }

    /// Sends `data` from the client (0) or the server (1); `skip` sends
    /// nothing but moves the sequence on (a segment the capture lost).
    fn raw(&mut self, from: usize, flags: u16, data: &[u8], at: Option<u32>) {
        self.ts += 1000;
        let (src, dst, sp, dp) = if from == 0 {
            (CLIENT, SERVER, 801, 2049)
        } else {
            (SERVER, CLIENT, 2049, 801)
        };
        let seg = Segment {
            ts_ns: self.ts,
            src,
            dst,
            src_port: sp,
            dst_port: dp,
            proto: TCP,
            tcp_seq: at.unwrap_or(self.seq[from]),
            tcp_flags: flags | 0x010,
            payload: data,
            payload_wire: data.len() as u32,
        };
        self.t.segment(&seg, &mut self.out);
    }

    fn send(&mut self, from: usize, data: &[u8]) {
        self.raw(from, 0x018, data, None);
        self.seq[from] = self.seq[from].wrapping_add(data.len() as u32);
    }

    fn lose(&mut self, from: usize, data: &[u8]) {
        self.seq[from] = self.seq[from].wrapping_add(data.len() as u32);
    }
}

#[test]
fn several_messages_in_one_segment() {
    let mut c = Conn::new();
    let mut calls = marked(&getattr(1));
    calls.extend(marked(&read(2, 8192, 4096)));
    c.send(0, &calls);
    let call_ts = c.ts;
    let mut replies = marked(&getattr_reply(1, 77));
    replies.extend(marked(&read_reply(2, 4096)));
    c.send(1, &replies);
    assert_eq!(c.out.len(), 2);
    let (g, r) = (&c.out[0], &c.out[1]);
    assert_eq!((g.xid, r.xid), (1, 2));
    assert_eq!(g.call_ts, Some(call_ts));
    assert_eq!(g.reply_ts, Some(c.ts));
    assert_eq!(g.status, Some(0));
    let ga = g.ops()[0].attr.unwrap();
    assert_eq!(
        (ga.size, ga.mode, ga.uid),
        (Some(77), Some(0o644), Some(1000))
    );
    assert_eq!(ga.mtime_ns, Some(1_700_000_000_000_000_005));
    let op = &r.ops()[0];
    assert_eq!((op.offset, op.count), (Some(8192), Some(4096)));
    assert_eq!((op.res_count, op.eof), (Some(4096), Some(false)));
    assert_eq!(op.fh, Some(crate::nfs::fh_hash(FH)));
    let call = r.call.unwrap();
    assert_eq!((call.uid, call.gid), (Some(1000), Some(100)));
    let k = c.t.counters();
    assert_eq!((k.calls, k.replies, k.matched, k.gaps), (2, 2, 2, 0));
}

#[test]
fn one_message_over_several_segments() {
    let mut c = Conn::new();
    let w = marked(&write(9, 10_000));
    // Cut inside the record mark, inside the header, inside the data.
    c.send(0, &w[..2]);
    c.send(0, &w[2..60]);
    c.send(0, &w[60..5000]);
    c.send(0, &w[5000..]);
    let last = c.ts;
    c.send(1, &marked(&getattr_reply(9, 0)));
    assert_eq!(c.out.len(), 1);
    let t = &c.out[0];
    // Stamped with the segment that completed it, as tshark does.
    assert_eq!(t.call_ts, Some(last));
    assert_eq!(t.call_bytes as usize, w.len() - 4);
    let op = &t.ops()[0];
    assert_eq!(
        (op.offset, op.count, op.stable),
        (Some(4096), Some(10_000), Some(2))
    );
    assert!(!t.gap);
}

/// A call whose header is longer than the first bytes the tracker tries
/// (AUTH_SYS with a long machine name and 16 groups: 336 bytes of
/// header), over segments: still decoded whole.
#[test]
fn a_call_with_long_credentials_over_several_segments() {
    let mut m = Vec::new();
    for w in [21u32, 0, 2, 100003, 3, 7, 1] {
        be(&mut m, w);
    }
    let mut cred = Vec::new();
    be(&mut cred, 7);
    opaque(&mut cred, &[b'h'; 200]);
    for w in [1234u32, 100, 16] {
        be(&mut cred, w);
    }
    (0..16).for_each(|g| be(&mut cred, 500 + g));
    opaque(&mut m, &cred);
    m.extend_from_slice(&[0; 8]);
    let header = m.len();
    assert!(header > 300, "{header}");
    opaque(&mut m, FH);
    m.extend_from_slice(&8192u64.to_be_bytes());
    be(&mut m, 6000);
    be(&mut m, 1);
    opaque(&mut m, &[0xcd; 6000]);
    let w = marked(&m);
    let mut c = Conn::new();
    // The header alone, then the rest of the header with the arguments,
    // then the data.
    c.send(0, &w[..150]);
    c.send(0, &w[150..1448]);
    c.send(0, &w[1448..]);
    c.send(1, &marked(&getattr_reply(21, 0)));
    assert_eq!(c.out.len(), 1);
    let t = &c.out[0];
    assert_eq!(
        t.call.map(|c| (c.uid, c.gid)),
        Some((Some(1234), Some(100)))
    );
    let op = &t.ops()[0];
    assert_eq!(
        (op.offset, op.count, op.stable),
        (Some(8192), Some(6000), Some(1))
    );
    assert_eq!(t.call_bytes as usize, w.len() - 4);
    assert_eq!(c.t.counters().long_messages, 1);
}

/// A stream keeps only the front of a READ reply (its data is not
/// decoded): the results before the data must still be read whole when
/// the reply arrives cut inside its attributes, and the next message of
/// the stream, which is not a READ, is kept whole again.
#[test]
fn a_long_read_reply_over_several_segments_keeps_its_results() {
    let mut c = Conn::new();
    c.send(0, &marked(&read(4, 0, 30_000)));
    c.send(0, &marked(&getattr(5)));
    let r = marked(&read_reply(4, 30_000));
    c.send(1, &r[..40]);
    c.send(1, &r[40..100]);
    c.send(1, &r[100..1448]);
    for part in r[1448..].chunks(1448) {
        c.send(1, part);
    }
    let g = marked(&getattr_reply(5, 123));
    c.send(1, &g[..50]);
    c.send(1, &g[50..]);
    assert_eq!(c.out.len(), 2);
    let (t, g) = (&c.out[0], &c.out[1]);
    assert_eq!(t.reply_bytes as usize, r.len() - 4);
    let op = &t.ops()[0];
    assert_eq!((op.res_count, op.eof), (Some(30_000), Some(false)));
    assert_eq!(op.attr.and_then(|a| a.size), Some(1 << 20));
    assert_eq!(g.ops()[0].attr.and_then(|a| a.size), Some(123));
    assert!(!t.gap && !g.gap);
    assert_eq!(c.t.counters().long_messages, 1);
}

#[test]
fn a_lost_segment_inside_a_message_keeps_the_stream_in_step() {
    let mut c = Conn::new();
    let w = marked(&write(3, 6000));
    c.send(0, &w[..1000]);
    c.lose(0, &w[1000..3000]);
    c.send(0, &w[3000..]);
    // The next call is found where the record marks say it starts.
    c.send(0, &marked(&getattr(4)));
    let mut replies = marked(&getattr_reply(3, 1));
    replies.extend(marked(&getattr_reply(4, 2)));
    c.send(1, &replies);
    assert_eq!(c.out.len(), 2);
    assert!(c.out[0].gap, "the write lost bytes");
    assert_eq!(c.out[0].ops()[0].count, Some(6000));
    assert!(!c.out[1].gap);
    let k = c.t.counters();
    assert_eq!((k.gaps, k.gap_bytes, k.messages_with_gap), (1, 2000, 1));
    assert_eq!((k.matched, k.resyncs), (2, 0));
}

#[test]
fn a_lost_record_mark_ends_the_message_and_the_next_start_is_found() {
    let mut c = Conn::new();
    let a = marked(&getattr(5));
    let b = marked(&getattr(6));
    let mut both = a.clone();
    both.extend(&b);
    // The segment holding the end of A and the start of B is lost.
    c.send(0, &both[..20]);
    c.lose(0, &both[20..a.len() + 10]);
    c.send(0, &both[a.len() + 10..]);
    // C starts a segment: found again.
    c.send(0, &marked(&getattr(7)));
    c.send(1, &marked(&getattr_reply(7, 3)));
    assert_eq!(c.out.len(), 1);
    assert_eq!(c.out[0].xid, 7);
    let k = c.t.counters();
    assert_eq!((k.gaps, k.unfinished, k.resyncs, k.calls), (1, 1, 1, 1));
}

#[test]
fn a_reply_without_its_call() {
    let mut c = Conn::new();
    c.send(1, &marked(&getattr_reply(42, 1)));
    assert_eq!(c.out.len(), 1);
    let t = &c.out[0];
    assert!(t.call.is_none() && t.call_ts.is_none());
    assert_eq!((t.xid, t.client, t.server), (42, CLIENT, SERVER));
    assert_eq!(c.t.counters().replies_without_call, 1);
}

#[test]
fn unanswered_calls_time_out_and_retransmissions_are_counted() {
    let mut t = Tracker::new(TrackerOptions::default());
    let mut out = Vec::new();
    let call = read(77, 0, 512);
    fn seg(ts: i64, payload: &[u8]) -> Segment<'_> {
        Segment {
            ts_ns: ts,
            src: CLIENT,
            dst: SERVER,
            src_port: 900,
            dst_port: 2049,
            proto: UDP,
            tcp_seq: 0,
            tcp_flags: 0,
            payload,
            payload_wire: payload.len() as u32,
        }
    }
    t.segment(&seg(1_000_000_000, &call), &mut out);
    t.segment(&seg(2_000_000_000, &call), &mut out);
    assert!(out.is_empty());
    // 31 s later (capture time) the call is given up on.
    t.segment(&seg(33_000_000_000, &getattr(78)), &mut out);
    assert_eq!(out.len(), 1);
    let u = &out[0];
    assert_eq!(
        (u.call_ts, u.last_call_ts),
        (Some(1_000_000_000), Some(2_000_000_000))
    );
    assert_eq!((u.retransmits, u.reply_ts), (1, None));
    t.finish(&mut out);
    assert_eq!(out.len(), 2);
    let k = t.counters();
    assert_eq!((k.calls_without_reply, k.retransmitted_calls), (2, 1));
}

/// A caller that reads completed transactions where the tracker keeps
/// them, a few at a time, sees what one taking them segment by segment
/// does: slots are not reused before they are released.
#[test]
fn transactions_read_in_place_equal_those_taken() {
    // Calls over several UDP ports, most answered late and out of order,
    // some retransmitted, some never answered, replies to calls never
    // seen, an xid used again for another call, and a jump past the call
    // timeout.
    let mut segs: Vec<(i64, bool, u16, Vec<u8>)> = Vec::new();
    let mut ts = 1_000_000_000i64;
    for i in 0..400u32 {
        ts += 1_000_000;
        let port = 700 + (i % 5) as u16;
        segs.push((ts, true, port, getattr(i)));
        if i % 9 == 0 {
            segs.push((ts + 10, true, port, getattr(i)));
        }
        if i % 13 == 0 {
            segs.push((ts + 20, true, port, read(i, 4096, 512)));
        }
        if i >= 3 && i % 11 != 0 {
            let j = i - 3;
            segs.push((
                ts + 30,
                false,
                700 + (j % 5) as u16,
                getattr_reply(j, j as u64),
            ));
        }
        if i % 17 == 0 {
            segs.push((ts + 40, false, 799, getattr_reply(90_000 + i, 1)));
        }
        if i == 200 {
            ts += 40_000_000_000;
        }
    }
    fn seg((ts, call, port, payload): &(i64, bool, u16, Vec<u8>)) -> Segment<'_> {
        let (src, dst, sp, dp) = if *call {
            (CLIENT, SERVER, *port, 2049)
        } else {
            (SERVER, CLIENT, 2049, *port)
        };
        Segment {
            ts_ns: *ts,
            src,
            dst,
            src_port: sp,
            dst_port: dp,
            proto: UDP,
            tcp_seq: 0,
            tcp_flags: 0,
            payload: &payload[..],
            payload_wire: payload.len() as u32,
        }
    }
    let mut taken = Vec::new();
    let mut a = Tracker::new(TrackerOptions::default());
    for s in &segs {
        a.segment(&seg(s), &mut taken);
    }
    a.finish(&mut taken);
    for batch in [1, 7, 64] {
        let mut read = Vec::new();
        let mut b = Tracker::new(TrackerOptions::default());
        for s in &segs {
            b.track(&seg(s));
            if b.ready().len() >= batch {
                read.extend(b.ready().cloned());
                b.release();
            }
        }
        b.end();
        read.extend(b.ready().cloned());
        b.release();
        assert_eq!(read, taken, "batches of {batch}");
        assert_eq!(b.counters(), a.counters());
    }
    let k = a.counters();
    assert!(k.matched > 300 && k.calls_without_reply > 30, "{k:?}");
    assert!(
        k.replies_without_call > 20 && k.retransmitted_calls > 40,
        "{k:?}"
    );
}

#[test]
fn nothing_panics_on_hostile_streams() {
    let mut t = Tracker::new(TrackerOptions::default());
    let mut out = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let good = marked(&write(1, 300));
    for i in 0..20_000u32 {
        let n = (next() % 200) as usize;
        let mut p: Vec<u8> = (0..n).map(|_| next() as u8).collect();
        if i % 7 == 0 {
            p = good[..(next() as usize % good.len())].to_vec();
        }
        let seg = Segment {
            ts_ns: i as i64 * 1000,
            src: CLIENT,
            dst: SERVER,
            src_port: (next() % 4) as u16,
            dst_port: 2049,
            proto: if i % 3 == 0 { UDP } else { TCP },
            tcp_seq: next() as u32 % 4096,
            tcp_flags: (next() % 64) as u16,
            payload: &p,
            payload_wire: p.len() as u32 + (next() % 3) as u32,
        };
        t.segment(&seg, &mut out);
    }
    t.finish(&mut out);
}

/// Handles hash as XXH3-64 with seed 0 does elsewhere, so that a handle
/// seen in another tool can be looked up (the values are Python xxhash's
/// `xxh3_64_intdigest`).
#[test]
fn file_handles_hash_as_xxh3_64() {
    assert_eq!(crate::nfs::fh_hash(&[7; 32]), 0x62eb_8654_f1fe_d9ee);
    assert_eq!(crate::nfs::fh_hash(&[]), 0x2d06_8005_38d3_94c2);
    let fh: Vec<u8> = (0..64).collect();
    assert_eq!(crate::nfs::fh_hash(&fh), 0x6187_eb90_89b0_ed55);
}
