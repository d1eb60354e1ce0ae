//! From packets to DNS, TLS and HTTP records: DNS queries matched with
//! their responses (UDP and TCP), each TCP flow's start reassembled far
//! enough for its TLS handshake, and HTTP/1.x requests matched in order
//! with their responses (pipelined ones too: bodies are stepped over by
//! their length or chunks, not kept).
//!
//! TCP is followed from the SYN only: a flow whose start was not seen is
//! skipped (it gets no place in the tracker) and its data counted. Each
//! direction is reassembled in order, bounded; a gap ends its decoding
//! (counted). Time is the packets' own.

use std::collections::VecDeque;
use std::collections::hash_map::Entry;

use flow::tcp::{ACK, FIN, RST, SYN};
use flow::{FlowKey, Place, SeqTrack, SweepClock};
use util::fasthash::FastMap;
use wire::Segment;

use crate::dns::DnsMessage;
use crate::http::{self, Body, Chunked, HttpError, Request, Response};
use crate::tls::{self, ClientHello, ServerSide, TlsError};
use crate::x509::CertSummary;

pub use flow::{TCP, UDP};

#[derive(Clone, Copy, Debug)]
pub struct TrackerOptions {
    /// A DNS query with no response for this long (capture time) is
    /// written as unanswered.
    pub query_timeout_ns: i64,
    /// A TCP flow idle this long is ended (its open requests written);
    /// bare ACKs do not count as activity.
    pub flow_idle_ns: i64,
    /// TCP flows followed at once; more are counted and not decoded.
    pub max_flows: usize,
    /// Bytes of a client's start kept while its ClientHello arrives.
    pub client_hello_max: usize,
    /// Bytes of a server's start kept while its ServerHello and
    /// certificate arrive.
    pub server_hello_max: usize,
}

impl Default for TrackerOptions {
    fn default() -> Self {
        TrackerOptions {
            query_timeout_ns: 10_000_000_000,
            flow_idle_ns: 300_000_000_000,
            max_flows: 1 << 20,
            client_hello_max: 16 << 10,
            server_hello_max: 64 << 10,
        }
    }
}

/// The two ends of a transaction: who asked, who answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ends {
    pub client: [u8; 16],
    pub client_port: u16,
    pub server: [u8; 16],
    pub server_port: u16,
    pub proto: u8,
}

impl Ends {
    fn of(seg: &Segment, from_client: bool) -> Ends {
        if from_client {
            Ends {
                client: seg.src,
                client_port: seg.src_port,
                server: seg.dst,
                server_port: seg.dst_port,
                proto: seg.proto,
            }
        } else {
            Ends {
                client: seg.dst,
                client_port: seg.dst_port,
                server: seg.src,
                server_port: seg.src_port,
                proto: seg.proto,
            }
        }
    }

    /// The flow's [`wire::flow_hash`], as packets.flow_hash has it.
    pub fn flow_hash(&self) -> u32 {
        wire::flow_hash(
            &self.client,
            &self.server,
            self.client_port,
            self.server_port,
            self.proto,
        )
    }
}

/// One answer record of a response.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DnsAnswer {
    pub name: String,
    pub rtype: u16,
    pub ttl: u32,
    /// A, AAAA: the address (IPv4 mapped into IPv6).
    pub addr: Option<[u8; 16]>,
    /// CNAME, NS, PTR, MX: the name.
    pub target: Option<String>,
}

/// A query with its response, or either alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DnsRecord {
    pub ends: Ends,
    pub query_ts: Option<i64>,
    pub response_ts: Option<i64>,
    pub id: u16,
    /// The question (the response's when the query was not seen).
    pub qname: Option<String>,
    pub qtype: u16,
    pub qclass: u16,
    pub opcode: u8,
    /// The query's flags word.
    pub query_flags: Option<u16>,
    /// The response's flags word (its low 4 bits are the rcode).
    pub response_flags: Option<u16>,
    pub answer_count: u16,
    pub answers: Vec<DnsAnswer>,
}

impl DnsRecord {
    pub fn ts(&self) -> i64 {
        self.query_ts.or(self.response_ts).unwrap_or(0)
    }
    pub fn rcode(&self) -> Option<u8> {
        self.response_flags.map(|f| (f & 0xf) as u8)
    }
}

/// One TLS handshake: the client's hello and what the server answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsRecord {
    pub ends: Ends,
    pub ts: i64,
    pub hello: ClientHello,
    pub ja3: String,
    pub ja4: String,
    pub server_ts: Option<i64>,
    pub server: Option<ServerSide>,
}

impl TlsRecord {
    pub fn certificate(&self) -> Option<&CertSummary> {
        self.server.as_ref().and_then(|s| s.certificate.as_ref())
    }
}

/// One HTTP request and its response (or none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpRecord {
    pub ends: Ends,
    pub ts: i64,
    pub request: Request,
    pub response_ts: Option<i64>,
    pub response: Option<Response>,
    /// Body bytes of the response as its head declared them.
    pub request_body: Option<u64>,
}

/// What the tracker did, for the manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub dns_messages: u64,
    pub dns_matched: u64,
    pub dns_unanswered: u64,
    pub dns_unmatched_responses: u64,
    pub dns_retransmitted_queries: u64,
    /// DNS messages on a DNS port that did not parse (by why).
    pub dns_errors: u64,
    pub dns_truncated: u64,
    pub dns_bad_label: u64,
    pub dns_bad_pointer: u64,
    pub dns_name_too_long: u64,
    pub tls_handshakes: u64,
    pub tls_without_server: u64,
    /// TLS-looking flows whose hello did not parse or was over the bound,
    /// and flows to port 443 that did not start with a handshake.
    pub tls_errors: u64,
    pub http_requests: u64,
    pub http_unanswered: u64,
    pub http_responses_without_request: u64,
    /// Heads that did not parse, and flows to port 80 that did not
    /// start with a request.
    pub http_errors: u64,
    /// TCP flows followed: their SYN was seen.
    pub tcp_flows: u64,
    /// TCP data segments of flows whose SYN was not seen: not decoded,
    /// and the flows get no place in the tracker.
    pub segments_without_start: u64,
    pub flows_over_limit: u64,
    /// Directions whose decoding stopped at a gap in the sequence.
    pub gaps: u64,
}

/// What a TCP flow carries, as its first bytes said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Unknown,
    Dns,
    Tls,
    Http,
    /// Something else (or given up on): segments are ignored.
    Other,
}

/// One direction of a TCP flow.
#[derive(Debug, Default)]
struct Dir {
    seq: SeqTrack,
    /// Bytes received in order and not consumed.
    buf: Vec<u8>,
    /// Bytes to step over as they arrive (a body of known length).
    skip: u64,
    chunked: Option<(Chunked, u64, bool)>,
    /// No more decoding in this direction.
    done: bool,
    fin: bool,
}

struct Flow {
    /// Whether the canonical low end is the client.
    client_is_lo: bool,
    kind: Kind,
    last_ts: i64,
    ends: Ends,
    dirs: [Dir; 2],
    tls: Option<Box<TlsRecord>>,
    /// Server side decoded or given up.
    tls_server_done: bool,
    http: VecDeque<HttpRecord>,
}

/// A pending DNS query.
struct Pending {
    record: DnsRecord,
}

/// Decodes a capture's segments into DNS, TLS and HTTP records.
pub struct Tracker {
    opts: TrackerOptions,
    flows: FastMap<FlowKey, Flow>,
    pending: FastMap<(Ends, u16), Pending>,
    counters: Counters,
    msg: DnsMessage,
    scratch: Vec<u8>,
    clock: SweepClock,
    pub dns: Vec<DnsRecord>,
    pub tls: Vec<TlsRecord>,
    pub http: Vec<HttpRecord>,
}

fn is_dns_port(p: u16) -> bool {
    p == 53 || p == 5353
}

/// Whether the tracker looks at segments of transport `proto` between
/// these ports at all: UDP to or from a DNS port, and TCP (followed from
/// a SYN it sees, whatever the ports). A caller may leave the others out
/// without making their segment: [`Tracker::track`] ignores them, and
/// its timeouts run on the segments it looks at.
#[inline]
pub fn looks_at(proto: u8, src_port: u16, dst_port: u16) -> bool {
    proto == TCP || (proto == UDP && (is_dns_port(src_port) || is_dns_port(dst_port)))
}

impl Tracker {
    pub fn new(opts: TrackerOptions) -> Tracker {
        Tracker {
            opts,
            flows: FastMap::default(),
            pending: FastMap::default(),
            counters: Counters::default(),
            msg: DnsMessage::default(),
            scratch: Vec::new(),
            clock: SweepClock::default(),
            dns: Vec::new(),
            tls: Vec::new(),
            http: Vec::new(),
        }
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// TCP flows being followed now (each holds a place in the tracker).
    pub fn flows_followed(&self) -> usize {
        self.flows.len()
    }

    /// Records completed so far (taken by the caller from the three
    /// vectors).
    pub fn ready(&self) -> usize {
        self.dns.len() + self.tls.len() + self.http.len()
    }

    /// One TCP or UDP segment, in capture order.
    pub fn track(&mut self, seg: &Segment) {
        if !looks_at(seg.proto, seg.src_port, seg.dst_port) {
            return;
        }
        if self.clock.due(seg.ts_ns) {
            self.sweep(seg.ts_ns);
        }
        if seg.proto == TCP {
            self.tcp(seg);
        } else {
            // A message cut by the snap length may still hold the
            // question; a parse error says what is missing.
            self.dns_message(seg, seg.payload);
        }
    }

    /// Ends everything: open queries and requests are written unanswered,
    /// handshakes with what they have.
    pub fn end(&mut self) {
        self.sweep(i64::MAX);
    }

    /// Writes out the queries and flows timed out at `now`.
    fn sweep(&mut self, now: i64) {
        self.clock.swept(now);
        let timeout = self.opts.query_timeout_ns;
        let mut expired = flow::expired(&self.pending, |p| {
            let ts = p.record.ts();
            flow::idle(ts, timeout, now).then_some(ts)
        });
        expired.sort_by_key(|(ts, _)| *ts);
        for (_, k) in expired {
            if let Some(p) = self.pending.remove(&k) {
                self.counters.dns_unanswered += 1;
                self.dns.push(p.record);
            }
        }
        let idle = self.opts.flow_idle_ns;
        let mut done = flow::expired(&self.flows, |f| {
            flow::idle(f.last_ts, idle, now).then_some(f.last_ts)
        });
        done.sort_unstable_by_key(|(t, _)| *t);
        for (_, k) in done {
            if let Some(f) = self.flows.remove(&k) {
                self.finish_flow(f);
            }
        }
    }

    fn dns_message(&mut self, seg: &Segment, msg: &[u8]) {
        self.counters.dns_messages += 1;
        if let Err(e) = self.msg.parse(msg) {
            self.counters.dns_errors += 1;
            match e {
                crate::dns::DnsError::Truncated => self.counters.dns_truncated += 1,
                crate::dns::DnsError::BadLabel => self.counters.dns_bad_label += 1,
                crate::dns::DnsError::BadPointer => self.counters.dns_bad_pointer += 1,
                crate::dns::DnsError::NameTooLong => self.counters.dns_name_too_long += 1,
            }
            return;
        }
        let m = &self.msg;
        let response = m.is_response();
        let ends = Ends::of(seg, !response);
        let key = (ends, m.id);
        let (qname, qtype, qclass) = match &m.question {
            Some((n, t, c)) => (Some(m.name(n).to_string()), *t, *c),
            None => (None, 0, 0),
        };
        if !response {
            match self.pending.entry(key) {
                Entry::Occupied(_) => self.counters.dns_retransmitted_queries += 1,
                Entry::Vacant(v) => {
                    v.insert(Pending {
                        record: DnsRecord {
                            ends,
                            query_ts: Some(seg.ts_ns),
                            id: m.id,
                            qname,
                            qtype,
                            qclass,
                            opcode: m.opcode(),
                            query_flags: Some(m.flags),
                            ..Default::default()
                        },
                    });
                }
            }
            return;
        }
        let answers = m
            .answers
            .iter()
            .map(|a| DnsAnswer {
                name: m.name(&a.name).to_string(),
                rtype: a.rtype,
                ttl: a.ttl,
                addr: a.addr,
                target: a.target.as_ref().map(|t| m.name(t).to_string()),
            })
            .collect();
        let mut record = match self.pending.remove(&key) {
            Some(p) => {
                self.counters.dns_matched += 1;
                p.record
            }
            None => {
                self.counters.dns_unmatched_responses += 1;
                DnsRecord {
                    ends,
                    id: m.id,
                    qname,
                    qtype,
                    qclass,
                    opcode: m.opcode(),
                    ..Default::default()
                }
            }
        };
        record.response_ts = Some(seg.ts_ns);
        record.response_flags = Some(m.flags);
        record.answer_count = m.ancount;
        record.answers = answers;
        self.dns.push(record);
    }

    fn tcp(&mut self, seg: &Segment) {
        if seg.payload_wire == 0 && seg.tcp_flags & (SYN | FIN | RST) == 0 {
            // A bare ACK changes nothing the decoders keep: not looked up.
            return;
        }
        let (key, lo_is_src) = FlowKey::of(seg);
        let syn = seg.tcp_flags & SYN != 0;
        let full = self.flows.len() >= self.opts.max_flows;
        let flow = match self.flows.entry(key) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                if !syn || seg.tcp_flags & ACK != 0 {
                    // A flow whose start was not seen (or whose end was
                    // already written) is not decoded and gets no place:
                    // its data is counted.
                    if seg.payload_wire > 0 {
                        self.counters.segments_without_start += 1;
                    }
                    return;
                }
                if full {
                    // Counted at its SYN; its other segments find no room
                    // either and count as without start.
                    self.counters.flows_over_limit += 1;
                    return;
                }
                self.counters.tcp_flows += 1;
                let client_is_lo = lo_is_src;
                v.insert(Flow {
                    client_is_lo,
                    kind: Kind::Unknown,
                    last_ts: seg.ts_ns,
                    ends: Ends::of(seg, true),
                    dirs: [Dir::default(), Dir::default()],
                    tls: None,
                    tls_server_done: false,
                    http: VecDeque::new(),
                })
            }
        };
        flow.last_ts = seg.ts_ns;
        let from_client = flow.client_is_lo == lo_is_src;
        let d = if from_client { 0 } else { 1 };
        if flow.kind == Kind::Other {
            if seg.tcp_flags & RST != 0 {
                self.flows.remove(&key);
            }
            return;
        }
        let dir = &mut flow.dirs[d];
        if syn {
            dir.seq.start(seg.tcp_seq);
        }
        let payload_seq = if syn {
            seg.tcp_seq.wrapping_add(1)
        } else {
            seg.tcp_seq
        };
        let mut data: &[u8] = &[];
        let mut gap = false;
        if seg.payload_wire > 0 && !dir.done {
            let wire = seg.payload_wire;
            match dir.seq.place(payload_seq, wire) {
                Place::Unknown => gap = true,
                Place::Ahead(ahead) => {
                    if dir.skip >= ahead as u64 && dir.chunked.is_none() {
                        // Lost inside a body being stepped over: no harm.
                        dir.skip -= ahead as u64;
                        data = seg.payload;
                        dir.seq.taken(payload_seq, wire);
                    } else {
                        gap = true;
                    }
                }
                Place::New { behind } => {
                    data = seg.payload.get(behind as usize..).unwrap_or(&[]);
                    dir.seq.taken(payload_seq, wire);
                    if seg.payload.len() < wire as usize {
                        // Cut by the snap length: what follows is lost.
                        gap = true;
                    }
                }
                Place::Old => {}
            }
        }
        if gap && !dir.done {
            self.counters.gaps += 1;
            dir.done = true;
            dir.buf = Vec::new();
        }
        if seg.tcp_flags & FIN != 0 {
            dir.fin = true;
        }
        // Only this function sets `fin`: known before the data is decoded,
        // without another look-up after it.
        let end = seg.tcp_flags & RST != 0 || (flow.dirs[0].fin && flow.dirs[1].fin);
        if !data.is_empty() && !flow.dirs[d].done {
            // A flow already told apart goes to its decoder at once (one
            // look-up the fewer).
            match flow.kind {
                Kind::Tls => self.tls_data(key, from_client, seg, data),
                Kind::Http => self.http_data(key, from_client, seg, data),
                _ => self.data(key, from_client, seg, data),
            }
        }
        if end && let Some(f) = self.flows.remove(&key) {
            self.finish_flow(f);
        }
    }

    /// In-order bytes of one direction.
    fn data(&mut self, key: FlowKey, from_client: bool, seg: &Segment, data: &[u8]) {
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        if flow.kind == Kind::Unknown {
            let port = flow.ends.server_port;
            flow.kind = if is_dns_port(port) || is_dns_port(flow.ends.client_port) {
                Kind::Dns
            } else if !from_client {
                // The server spoke first: not a protocol decoded here.
                Kind::Other
            } else if data[0] == tls::CONTENT_HANDSHAKE && data.get(1).is_none_or(|&v| v == 3) {
                Kind::Tls
            } else if http::may_be_request(data) {
                Kind::Http
            } else {
                Kind::Other
            };
            if flow.kind == Kind::Other && from_client {
                match port {
                    443 => self.counters.tls_errors += 1,
                    80 => self.counters.http_errors += 1,
                    _ => {}
                }
            }
        }
        let d = if from_client { 0 } else { 1 };
        match flow.kind {
            Kind::Dns => {
                let dir = &mut flow.dirs[d];
                dir.buf.extend_from_slice(data);
                let mut at = 0;
                let mut msgs: Vec<(usize, usize)> = Vec::new();
                while let Some(l) = dir.buf.get(at..at + 2) {
                    let len = u16::from_be_bytes([l[0], l[1]]) as usize;
                    if dir.buf.len() < at + 2 + len {
                        break;
                    }
                    msgs.push((at + 2, at + 2 + len));
                    at += 2 + len;
                }
                let buf = std::mem::take(&mut dir.buf);
                for (s, e) in msgs {
                    self.dns_message(seg, &buf[s..e]);
                }
                if let Some(flow) = self.flows.get_mut(&key) {
                    let dir = &mut flow.dirs[d];
                    dir.buf = buf;
                    dir.buf.drain(..at);
                }
            }
            Kind::Tls => self.tls_data(key, from_client, seg, data),
            Kind::Http => self.http_data(key, from_client, seg, data),
            Kind::Unknown | Kind::Other => {}
        }
    }

    fn tls_data(&mut self, key: FlowKey, from_client: bool, seg: &Segment, data: &[u8]) {
        let Some(flow) = self.flows.get_mut(&key) else {
            return;
        };
        let d = if from_client { 0 } else { 1 };
        let max = if from_client {
            self.opts.client_hello_max
        } else {
            self.opts.server_hello_max
        };
        let dir = &mut flow.dirs[d];
        let room = max.saturating_sub(dir.buf.len());
        dir.buf.extend_from_slice(&data[..data.len().min(room)]);
        let full = dir.buf.len() >= max;
        if from_client {
            let mut hello = ClientHello::default();
            match hello.parse_stream(&dir.buf, &mut self.scratch) {
                Ok(()) => {
                    dir.done = true;
                    dir.buf = Vec::new();
                    flow.tls = Some(Box::new(TlsRecord {
                        ends: flow.ends,
                        ts: seg.ts_ns,
                        ja3: hello.ja3(),
                        ja4: hello.ja4(),
                        hello,
                        ..Default::default()
                    }));
                }
                Err(TlsError::Incomplete) if !full => {}
                Err(_) => {
                    self.counters.tls_errors += 1;
                    flow.kind = Kind::Other;
                    flow.dirs = [Dir::default(), Dir::default()];
                }
            }
        } else {
            match tls::server_side(&dir.buf, &mut self.scratch) {
                Ok(side) => {
                    dir.done = true;
                    dir.buf = Vec::new();
                    flow.tls_server_done = true;
                    if let Some(t) = flow.tls.as_mut() {
                        t.server_ts = Some(seg.ts_ns);
                        t.server = Some(side);
                    }
                }
                Err(TlsError::Incomplete) if !full => {}
                Err(_) => {
                    self.counters.tls_errors += 1;
                    dir.done = true;
                    dir.buf = Vec::new();
                    flow.tls_server_done = true;
                }
            }
        }
        if flow.tls.is_some() && flow.tls_server_done {
            self.emit_tls(key);
        }
    }

    fn emit_tls(&mut self, key: FlowKey) {
        if let Some(flow) = self.flows.get_mut(&key)
            && let Some(t) = flow.tls.take()
        {
            self.counters.tls_handshakes += 1;
            if t.server.is_none() {
                self.counters.tls_without_server += 1;
            }
            self.tls.push(*t);
            // The rest of the flow is encrypted: nothing more to decode.
            flow.kind = Kind::Other;
            flow.dirs = [Dir::default(), Dir::default()];
        }
    }

    fn http_data(&mut self, key: FlowKey, from_client: bool, seg: &Segment, data: &[u8]) {
        let Tracker {
            flows,
            counters,
            http: out,
            ..
        } = self;
        let Some(flow) = flows.get_mut(&key) else {
            return;
        };
        let d = if from_client { 0 } else { 1 };
        // Bodies are stepped over in the segment itself; only bytes of a
        // head still arriving are kept.
        let mut input = data;
        let mut owned;
        if !flow.dirs[d].buf.is_empty() {
            owned = std::mem::take(&mut flow.dirs[d].buf);
            owned.extend_from_slice(data);
            input = &owned[..];
        } else {
            owned = Vec::new();
        }
        let mut at = 0;
        while !flow.dirs[d].done {
            let dir = &mut flow.dirs[d];
            let b = &input[at..];
            if dir.skip > 0 {
                let n = dir.skip.min(b.len() as u64);
                dir.skip -= n;
                at += n as usize;
                if dir.skip > 0 {
                    break;
                }
                continue;
            }
            if let Some((state, size, ext)) = dir.chunked.as_mut() {
                match state.advance(b, size, ext) {
                    Ok(n) => {
                        at += n;
                        if *state != Chunked::Done {
                            break;
                        }
                        dir.chunked = None;
                        continue;
                    }
                    Err(_) => {
                        counters.http_errors += 1;
                        dir.done = true;
                        break;
                    }
                }
            }
            if b.is_empty() {
                break;
            }
            let parsed = if from_client {
                Request::parse(b).map(|(r, n)| (Some(r), None, n))
            } else {
                Response::parse(b).map(|(r, n)| (None, Some(r), n))
            };
            let (req, resp, n) = match parsed {
                Ok(p) => p,
                Err(HttpError::Incomplete) => break,
                Err(_) => {
                    counters.http_errors += 1;
                    dir.done = true;
                    break;
                }
            };
            at += n;
            if let Some(req) = req {
                counters.http_requests += 1;
                match req.body() {
                    Body::Length(l) => dir.skip = l,
                    Body::Chunked => dir.chunked = Some(Default::default()),
                    Body::ToClose => dir.done = true,
                }
                flow.http.push_back(HttpRecord {
                    ends: flow.ends,
                    ts: seg.ts_ns,
                    request_body: req.content_length,
                    request: req,
                    ..Default::default()
                });
            } else if let Some(resp) = resp {
                if (100..200).contains(&resp.status) && resp.status != 101 {
                    // Interim (100 Continue): the final response follows.
                    continue;
                }
                let body = match flow.http.front() {
                    Some(r) => resp.body(&r.request.method),
                    None => resp.body(""),
                };
                match body {
                    Body::Length(l) => dir.skip = l,
                    Body::Chunked => dir.chunked = Some(Default::default()),
                    Body::ToClose => dir.done = true,
                }
                if resp.status == 101 {
                    // Another protocol from here on.
                    dir.done = true;
                }
                match flow.http.pop_front() {
                    Some(mut r) => {
                        r.response_ts = Some(seg.ts_ns);
                        r.response = Some(resp);
                        out.push(r);
                    }
                    None => counters.http_responses_without_request += 1,
                }
            }
        }
        let dir = &mut flow.dirs[d];
        if !dir.done && at < input.len() {
            // A head still arriving: kept, bounded by http::HEAD_MAX.
            if owned.is_empty() {
                dir.buf.extend_from_slice(&input[at..]);
            } else {
                owned.drain(..at);
                dir.buf = owned;
            }
        }
    }

    /// Writes what a flow that ended still holds.
    fn finish_flow(&mut self, mut f: Flow) {
        if let Some(t) = f.tls.take() {
            self.counters.tls_handshakes += 1;
            if t.server.is_none() {
                self.counters.tls_without_server += 1;
            }
            self.tls.push(*t);
        }
        for r in f.http.drain(..) {
            self.counters.http_unanswered += 1;
            self.http.push(r);
        }
    }
}
