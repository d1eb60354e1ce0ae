//! A mix of TCP and UDP applications, as a monitor next to the clients
//! would see it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use wire::build::{FrameSpec, IpSpec, Payload, TransportSpec};
use wire::transport::tcp_flags::{ACK, FIN, PSH, SYN};

use crate::{EPOCH_NS, FrameSource, Rng, client_v4, mac};

/// Link speed used for serialisation gaps between back-to-back segments.
const LINK_BPS: f64 = 1e9;
const MSS: u32 = 1448;
const CLIENT_HOSTS: u32 = 2000;
const SERVER_HOSTS: u32 = 400;

#[derive(Clone, Copy, Debug)]
struct Pkt {
    t: f64,
    from_client: bool,
    flags: u16,
    seq: u32,
    ack: u32,
    payload: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Dns,
    Web,
    Bulk,
    /// QUIC-like: request/response in UDP datagrams, small ACK datagrams.
    Quic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Next: a response of this many bytes, in slow-start rounds.
    Respond {
        left: u64,
    },
    /// Next: another request after think time, or the close.
    Idle,
    Done,
}

struct Session {
    kind: Kind,
    v6: bool,
    client: u32,
    server: u32,
    cport: u16,
    sport: u16,
    rtt: f64,
    c_nxt: u32,
    s_nxt: u32,
    c_ipid: u16,
    s_ipid: u16,
    c_win: u16,
    s_win: u16,
    cwnd: u32,
    requests_left: u32,
    phase: Phase,
    /// When the next round may start.
    clock: f64,
    pending: VecDeque<Pkt>,
    /// What the session says (see [`crate::content`]): its own generator,
    /// and the bytes each side is sending from the sequence number given
    /// (zeros elsewhere: encrypted or uninteresting data).
    content: Rng,
    requests_done: u32,
    c_data: Vec<u8>,
    c_data_seq: u32,
    s_data: Vec<u8>,
    s_data_seq: u32,
}

/// TCP and UDP applications: bulk downloads, web-like sessions and DNS-like
/// lookups arriving as a Poisson process; see the crate docs.
pub struct AppMix {
    rng: Rng,
    count: u64,
    sent: u64,
    sessions_per_s: f64,
    next_arrival: f64,
    slots: Vec<Option<Session>>,
    free: Vec<usize>,
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    tiebreak: u64,
    /// Time of the last frame handed out: output never goes back in time.
    last_t: f64,
}

impl AppMix {
    /// `count` frames from sessions starting `sessions_per_s` a second.
    pub fn new(sessions_per_s: f64, count: u64, seed: u64) -> Self {
        AppMix {
            rng: Rng::new(seed),
            count,
            sent: 0,
            sessions_per_s: sessions_per_s.max(0.001),
            next_arrival: 0.0,
            slots: Vec::new(),
            free: Vec::new(),
            heap: BinaryHeap::new(),
            tiebreak: 0,
            last_t: 0.0,
        }
    }

    fn schedule(&mut self, slot: usize) {
        if let Some(Some(s)) = self.slots.get(slot)
            && let Some(p) = s.pending.front()
        {
            self.tiebreak += 1;
            self.heap.push(Reverse((p.t as u64, self.tiebreak, slot)));
        }
    }

    fn start_session(&mut self, t: f64) {
        let r = &mut self.rng;
        let kind = match r.below(100) {
            0..=39 => Kind::Dns,
            40..=79 => Kind::Web,
            80..=91 => Kind::Quic,
            _ => Kind::Bulk,
        };
        // Round trips: mostly tens of milliseconds, some on the LAN.
        let rtt = if r.below(4) == 0 {
            r.range(100_000, 1_000_000) as f64
        } else {
            2e6 + r.exponential(25e6)
        };
        let server = (r.unit().powi(3) * SERVER_HOSTS as f64) as u32;
        let mut s = Session {
            kind,
            v6: r.below(5) == 0,
            client: r.below(CLIENT_HOSTS as u64) as u32,
            server,
            cport: r.range(32768, 60999) as u16,
            sport: match kind {
                Kind::Dns => 53,
                Kind::Web => [443, 443, 443, 80][r.below(4) as usize],
                Kind::Bulk | Kind::Quic => 443,
            },
            rtt,
            c_nxt: r.next_u32(),
            s_nxt: r.next_u32(),
            c_ipid: r.next_u32() as u16,
            s_ipid: r.next_u32() as u16,
            c_win: r.range(500, 2048) as u16,
            s_win: r.range(256, 1024) as u16,
            cwnd: 10,
            requests_left: match kind {
                Kind::Web | Kind::Quic => r.range(1, 8) as u32,
                _ => 1,
            },
            phase: Phase::Idle,
            clock: t,
            pending: VecDeque::new(),
            content: Rng::new(0),
            requests_done: 0,
            c_data: Vec::new(),
            c_data_seq: 0,
            s_data: Vec::new(),
            s_data_seq: 0,
        };
        s.content = Rng::new(
            (s.cport as u64) << 48
                ^ (s.client as u64) << 24
                ^ s.server as u64
                ^ (t as u64).rotate_left(29),
        );
        match kind {
            Kind::Dns => {
                // Drawn as before the content was real, so that the
                // mix's times stay as they were.
                let _ = (r.range(30, 60), r.range(60, 400));
                let (q, a) = crate::content::dns_exchange(&mut s.content, s.v6);
                s.pending.push_back(udp(t, true, q.len() as u32));
                s.pending
                    .push_back(udp(t + rtt * (0.9 + 0.2 * r.unit()), false, a.len() as u32));
                (s.c_data, s.s_data) = (q, a);
                s.phase = Phase::Done;
            }
            Kind::Web | Kind::Bulk => {
                handshake_and_request(&mut s, t, r);
            }
            Kind::Quic => {
                // The client's padded Initial, then the first request.
                s.pending.push_back(udp(t, true, 1250));
                let t1 = t + s.rtt * (1.0 + 0.1 * r.unit());
                request(&mut s, t1, r);
            }
        }
        let slot = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(s);
                i
            }
            None => {
                self.slots.push(Some(s));
                self.slots.len() - 1
            }
        };
        self.schedule(slot);
    }

    /// Refills a session's queue with its next round; frees it when done.
    fn next_round(&mut self, slot: usize) {
        let Some(Some(s)) = self.slots.get_mut(slot) else {
            return;
        };
        let r = &mut self.rng;
        match s.phase {
            Phase::Respond { left } => response_round(s, left, r),
            Phase::Idle => {
                if s.requests_left > 0 {
                    let think = r.exponential(80e6);
                    let t = s.clock + think;
                    request(s, t, r);
                } else if s.kind == Kind::Quic {
                    s.phase = Phase::Done;
                } else {
                    close(s, s.clock + r.exponential(5e6), r);
                }
            }
            Phase::Done => {}
        }
        if s.pending.is_empty() {
            self.slots[slot] = None;
            self.free.push(slot);
        } else {
            self.schedule(slot);
        }
    }

    fn build(&self, s: &Session, p: &Pkt, out: &mut Vec<u8>) {
        let (cmac, smac) = (mac(s.client), mac(0xfe_0000 | s.server));
        let (src_mac, dst_mac) = if p.from_client {
            (cmac, smac)
        } else {
            (smac, cmac)
        };
        let ipid = if p.from_client { s.c_ipid } else { s.s_ipid };
        let ttl = if p.from_client {
            64
        } else {
            64 - (s.server % 20) as u8
        };
        let ip = if s.v6 {
            let c = v6_host(0xc1, s.client);
            let v = v6_host(0x5e, s.server);
            let (src, dst) = if p.from_client { (c, v) } else { (v, c) };
            IpSpec::V6 {
                src,
                dst,
                hop_limit: ttl,
                dscp: 0,
                flow_label: (s.cport as u32) << 4,
            }
        } else {
            let c = client_v4(s.client);
            let v = [198, 18, (s.server >> 8) as u8, s.server as u8 | 1];
            let (src, dst) = if p.from_client { (c, v) } else { (v, c) };
            IpSpec::V4 {
                src,
                dst,
                ttl,
                id: ipid,
                dscp: 0,
                frag: 0x4000,
            }
        };
        let (sport, dport) = if p.from_client {
            (s.cport, s.sport)
        } else {
            (s.sport, s.cport)
        };
        let transport = if matches!(s.kind, Kind::Dns | Kind::Quic) {
            TransportSpec::Udp { sport, dport }
        } else {
            TransportSpec::Tcp {
                sport,
                dport,
                seq: p.seq,
                ack: p.ack,
                flags: p.flags,
                window: if p.from_client { s.c_win } else { s.s_win },
            }
        };
        let spec = FrameSpec {
            eth_src: src_mac,
            eth_dst: dst_mac,
            vlan: None,
            ip,
            transport,
            payload: Payload::Zeros(p.payload as usize),
        };
        let bytes = payload_bytes(s, p);
        let spec = FrameSpec {
            payload: match &bytes {
                Some(b) => Payload::Bytes(b),
                None => spec.payload,
            },
            ..spec
        };
        out.clear();
        spec.build(out);
    }
}

/// The bytes of `p`'s payload where its side is saying something (the
/// rest zeros); `None` for all zeros.
fn payload_bytes(s: &Session, p: &Pkt) -> Option<Vec<u8>> {
    let (data, from) = if p.from_client {
        (&s.c_data, s.c_data_seq)
    } else {
        (&s.s_data, s.s_data_seq)
    };
    if data.is_empty() || p.payload == 0 {
        return None;
    }
    let off = if matches!(s.kind, Kind::Dns) {
        0
    } else {
        p.seq.wrapping_sub(from) as usize
    };
    if off >= data.len() {
        return None;
    }
    let mut b = vec![0u8; p.payload as usize];
    let n = (data.len() - off).min(b.len());
    b[..n].copy_from_slice(&data[off..off + n]);
    Some(b)
}

fn v6_host(net: u8, i: u32) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[1] = net;
    a[12..].copy_from_slice(&i.to_be_bytes());
    a[15] |= 1;
    a
}

fn udp(t: f64, from_client: bool, payload: u32) -> Pkt {
    Pkt {
        t,
        from_client,
        flags: 0,
        seq: 0,
        ack: 0,
        payload,
    }
}

fn seg(t: f64, from_client: bool, flags: u16, seq: u32, ack: u32, payload: u32) -> Pkt {
    Pkt {
        t,
        from_client,
        flags,
        seq,
        ack,
        payload,
    }
}

fn handshake_and_request(s: &mut Session, t: f64, r: &mut Rng) {
    let jitter = |r: &mut Rng| 1.0 + 0.1 * r.unit();
    let c_isn = s.c_nxt;
    let s_isn = s.s_nxt;
    s.pending.push_back(seg(t, true, SYN, c_isn, 0, 0));
    let t1 = t + s.rtt * jitter(r);
    s.pending
        .push_back(seg(t1, false, SYN | ACK, s_isn, c_isn.wrapping_add(1), 0));
    s.c_nxt = c_isn.wrapping_add(1);
    s.s_nxt = s_isn.wrapping_add(1);
    let t2 = t1 + r.range(20_000, 80_000) as f64;
    s.pending.push_back(seg(t2, true, ACK, s.c_nxt, s.s_nxt, 0));
    request(s, t2 + r.range(5_000, 50_000) as f64, r);
}

fn request(s: &mut Session, t: f64, r: &mut Rng) {
    let mut len = r.range(200, 900) as u32;
    let mut size = match s.kind {
        Kind::Bulk => r.pareto(200e3, 1.1).min(50e6),
        _ => r.pareto(2e3, 1.3).min(2e6),
    } as u64;
    // What is said: a TLS handshake opens a session to 443, every
    // request to 80 is HTTP; the rest (encrypted data, QUIC) zeros.
    let first = s.requests_done == 0;
    s.requests_done += 1;
    let tcp = matches!(s.kind, Kind::Web | Kind::Bulk);
    (s.c_data, s.s_data) = (Vec::new(), Vec::new());
    if tcp && s.sport == 443 && first {
        let (hello, server) = crate::content::tls_handshake(&mut s.content);
        size = size.max(server.len() as u64);
        (s.c_data, s.s_data) = (hello, server);
    } else if tcp && s.sport == 80 {
        let (req, head, total) = crate::content::http_exchange(&mut s.content, size);
        size = total;
        (s.c_data, s.s_data) = (req, head);
    }
    if !s.c_data.is_empty() {
        len = s.c_data.len() as u32;
    }
    s.c_data_seq = s.c_nxt;
    s.s_data_seq = s.s_nxt;
    s.pending
        .push_back(seg(t, true, PSH | ACK, s.c_nxt, s.s_nxt, len));
    s.c_nxt = s.c_nxt.wrapping_add(len);
    s.requests_left = s.requests_left.saturating_sub(1);
    // The response starts a round trip (plus server time) later.
    let server_time = if s.kind == Kind::Web {
        r.exponential(300e3)
    } else {
        50e3
    };
    s.clock = t + s.rtt * (0.95 + 0.1 * r.unit()) + server_time;
    s.phase = Phase::Respond { left: size };
}

/// One slow-start round: up to `cwnd` segments back to back from the server,
/// a delayed ACK from the client for every second one.
fn response_round(s: &mut Session, left: u64, r: &mut Rng) {
    let mut t = s.clock;
    let start = t;
    let mut left = left;
    let mut unacked = 0;
    for _ in 0..s.cwnd {
        if left == 0 {
            break;
        }
        let max = if s.kind == Kind::Quic {
            1350
        } else {
            MSS as u64
        };
        let len = left.min(max) as u32;
        left -= len as u64;
        let flags = if left == 0 { PSH | ACK } else { ACK };
        s.pending
            .push_back(seg(t, false, flags, s.s_nxt, s.c_nxt, len));
        s.s_nxt = s.s_nxt.wrapping_add(len);
        unacked += 1;
        if unacked == 2 || left == 0 {
            let ack_t = t + r.range(15_000, 60_000) as f64;
            let ack_len = if s.kind == Kind::Quic {
                r.range(30, 45) as u32
            } else {
                0
            };
            s.pending
                .push_back(seg(ack_t, true, ACK, s.c_nxt, s.s_nxt, ack_len));
            unacked = 0;
        }
        let wire_bits = ((len + 78) * 8) as f64;
        t += wire_bits / LINK_BPS * 1e9 * (1.0 + 0.5 * r.unit());
    }
    sort_pending(s);
    s.cwnd = if s.cwnd < 256 { s.cwnd * 2 } else { s.cwnd + 1 };
    s.clock = (start + s.rtt).max(t);
    s.phase = if left > 0 {
        Phase::Respond { left }
    } else {
        Phase::Idle
    };
}

fn close(s: &mut Session, t: f64, r: &mut Rng) {
    s.pending
        .push_back(seg(t, true, FIN | ACK, s.c_nxt, s.s_nxt, 0));
    s.c_nxt = s.c_nxt.wrapping_add(1);
    let t1 = t + s.rtt * (1.0 + 0.1 * r.unit());
    s.pending
        .push_back(seg(t1, false, FIN | ACK, s.s_nxt, s.c_nxt, 0));
    s.s_nxt = s.s_nxt.wrapping_add(1);
    s.pending.push_back(seg(
        t1 + r.range(10_000, 40_000) as f64,
        true,
        ACK,
        s.c_nxt,
        s.s_nxt,
        0,
    ));
    s.phase = Phase::Done;
}

fn sort_pending(s: &mut Session) {
    s.pending
        .make_contiguous()
        .sort_by(|a, b| a.t.total_cmp(&b.t));
}

impl FrameSource for AppMix {
    fn next_frame(&mut self, out: &mut Vec<u8>) -> Option<i64> {
        if self.sent >= self.count {
            return None;
        }
        loop {
            let due = self.heap.peek().map(|Reverse((t, _, _))| *t as f64);
            if due.is_none_or(|t| self.next_arrival <= t) {
                let t = self.next_arrival;
                self.next_arrival += self.rng.exponential(1e9 / self.sessions_per_s);
                self.start_session(t);
                continue;
            }
            let Reverse((_, _, slot)) = self.heap.pop()?;
            let Some(Some(s)) = self.slots.get_mut(slot) else {
                continue;
            };
            let Some(p) = s.pending.pop_front() else {
                continue;
            };
            if p.from_client {
                s.c_ipid = s.c_ipid.wrapping_add(1);
            } else {
                s.s_ipid = s.s_ipid.wrapping_add(1);
            }
            let s = self.slots[slot].as_ref()?;
            self.build(s, &p, out);
            if s.pending.is_empty() {
                self.next_round(slot);
            } else {
                self.schedule(slot);
            }
            self.sent += 1;
            self.last_t = self.last_t.max(p.t);
            return Some(EPOCH_NS + self.last_t as i64);
        }
    }
}
