//! From packets to transactions: TCP record-marking reassembly per
//! direction (bounded), UDP datagrams, and call/reply matching on
//! (client, server, xid).
//!
//! Time is the packets' own: timeouts run on capture time, so a trace
//! converted a year later gives the same rows as the live capture did.

use std::collections::hash_map::Entry;
use std::hash::{Hash, Hasher};

use flow::tcp::{FIN as TCP_FIN, RST as TCP_RST, SYN as TCP_SYN};
use flow::{DirKey as Dir, Place, SeqTrack, SweepClock};
use util::fasthash::FastMap;

use crate::msg::{self, Call, Message, ReplyStatus};
use crate::nfs::{self, CallDetail, Op};

/// IP protocol numbers of the transports RPC runs on.
pub use flow::{TCP, UDP};

/// Whether the tracker looks at a segment of transport `proto` with this
/// captured payload at all: every TCP segment (streams are followed
/// whatever their ports), and UDP datagrams that may be RPC messages
/// ([`msg::may_be_message`]). A caller may leave the others out without
/// making their segment: [`Tracker::track`] ignores them, and its timeouts
/// run on the segments it looks at.
#[inline]
pub fn looks_at(proto: u8, payload: &[u8]) -> bool {
    proto == TCP || (proto == UDP && msg::may_be_message(payload))
}

/// A fragment longer than this is taken as a lost record boundary.
const MAX_FRAGMENT: u32 = 64 << 20;
/// The longest RPC header: a call's with the largest credentials and
/// verifier (400 bytes each).
const HEADER_MAX: usize = 1024;
/// Bytes of a message tried for its header first: a call's with AUTH_SYS
/// credentials of a few groups, or any reply's.
const HEADER_PROBE: usize = 256;
/// Segments a stream may show without an RPC message before weir stops
/// looking at it.
const HUNT_TRIES: u8 = 8;

#[derive(Clone, Copy, Debug)]
pub struct TrackerOptions {
    /// A call with no reply for this long (capture time) is given up on.
    pub call_timeout_ns: i64,
    /// Bytes of each message kept for decoding; the rest (READ and WRITE
    /// data) is counted and skipped.
    pub max_message_prefix: usize,
    /// Streams (TCP directions) tracked at once; more are not decoded and
    /// are counted.
    pub max_streams: usize,
    /// A stream idle this long (capture time) is forgotten.
    pub stream_idle_ns: i64,
}

impl Default for TrackerOptions {
    fn default() -> Self {
        TrackerOptions {
            call_timeout_ns: 30_000_000_000,
            max_message_prefix: 8 << 10,
            max_streams: 1 << 20,
            stream_idle_ns: 300_000_000_000,
        }
    }
}

pub use wire::Segment;

/// One call with its reply, or a call that got none, or a reply whose call
/// was not seen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transaction {
    /// First and last time the call was seen (they differ when the call
    /// was retransmitted); `None` for a reply without its call.
    pub call_ts: Option<i64>,
    pub last_call_ts: Option<i64>,
    pub reply_ts: Option<i64>,
    pub client: [u8; 16],
    pub client_port: u16,
    pub server: [u8; 16],
    pub server_port: u16,
    pub proto: u8,
    pub xid: u32,
    /// The call's header, when the call was seen.
    pub call: Option<Call>,
    pub reply: Option<ReplyStatus>,
    /// The program's own status in the reply (nfsstat3, the COMPOUND's
    /// nfsstat4, mountstat3).
    pub status: Option<u32>,
    /// RPC message bytes (without TCP record marks) each way.
    pub call_bytes: u32,
    pub reply_bytes: u32,
    /// Copies of the call seen after the first.
    pub retransmits: u32,
    /// A capture gap fell inside the call or the reply.
    pub gap: bool,
    pub detail: CallDetail,
}

impl Transaction {
    /// The operations, with their statuses and results.
    pub fn ops(&self) -> &[Op] {
        &self.detail.ops
    }
}

/// What the tracker has seen, for the manifest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub messages: u64,
    pub calls: u64,
    pub replies: u64,
    pub matched: u64,
    /// Calls given up on after the timeout, or still open at the end.
    pub calls_without_reply: u64,
    pub replies_without_call: u64,
    pub retransmitted_calls: u64,
    /// Holes in a TCP stream (lost or uncaptured bytes) and their bytes.
    pub gaps: u64,
    pub gap_bytes: u64,
    /// Messages that a gap cut into (still decoded as far as they went).
    pub messages_with_gap: u64,
    /// Times a stream's message boundaries were found again after a gap or
    /// in a stream whose start was not seen.
    pub resyncs: u64,
    /// Whole messages whose length or header did not parse as RPC.
    pub malformed: u64,
    /// Messages longer than the kept prefix (their data skipped).
    pub long_messages: u64,
    /// Messages lost unread: ended by a FIN or RST before they were
    /// complete, or cut by a gap before their header was whole.
    pub unfinished: u64,
    /// TCP directions given up on as not RPC.
    pub streams_not_rpc: u64,
    /// Streams not tracked because `max_streams` were open.
    pub streams_over_limit: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CallKey {
    client: [u8; 16],
    server: [u8; 16],
    client_port: u16,
    server_port: u16,
    proto: u8,
    xid: u32,
}

/// A few words for the hasher (see [`flow::hash_addrs`]): these maps are
/// hit several times per packet.
impl Hash for CallKey {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        flow::hash_addrs(h, &self.client, &self.server);
        h.write_u64(
            (self.xid as u64) << 32 | (self.client_port as u64) << 16 | self.server_port as u64,
        );
        h.write_u8(self.proto);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// At a known position in the record marking.
    Synced,
    /// Looking for a message start at the next segment.
    Hunting,
    /// Not RPC; ignored.
    NotRpc,
}

#[derive(Debug)]
struct Stream {
    mode: Mode,
    seq: SeqTrack,
    hunt_tries: u8,
    last_ts: i64,
    /// Record mark bytes gathered so far.
    mark: [u8; 4],
    mark_have: u8,
    /// Inside a fragment: bytes of it still to come.
    in_body: bool,
    frag_left: u32,
    last_frag: bool,
    /// The message so far: its first bytes, its length, whether a gap cut
    /// into it (bytes after the gap are not kept: they would be misplaced).
    msg: Vec<u8>,
    /// Bytes of it worth keeping, once its header says (until then
    /// `max_message_prefix`).
    msg_keep: Option<usize>,
    msg_len: u64,
    msg_gap: bool,
    msg_started: bool,
    msg_ts: i64,
}

impl Stream {
    fn new(ts: i64) -> Stream {
        Stream {
            mode: Mode::Hunting,
            seq: SeqTrack::default(),
            hunt_tries: 0,
            last_ts: ts,
            mark: [0; 4],
            mark_have: 0,
            in_body: false,
            frag_left: 0,
            last_frag: false,
            msg: Vec::new(),
            msg_keep: None,
            msg_len: 0,
            msg_gap: false,
            msg_started: false,
            msg_ts: ts,
        }
    }

    fn reset_message(&mut self) {
        self.msg.clear();
        self.msg_keep = None;
        self.msg_len = 0;
        self.msg_gap = false;
        self.msg_started = false;
    }
}

/// A complete message from a stream or a datagram.
struct Whole<'a> {
    bytes: &'a [u8],
    len: u64,
    gap: bool,
    ts: i64,
}

/// Turns packets into RPC transactions. Feed it every TCP and UDP packet
/// of a capture in time order ([`Tracker::segment`]); it hands back each
/// transaction once it is complete, and the rest at [`Tracker::finish`].
pub struct Tracker {
    streams: FastMap<Dir, Stream>,
    calls: Calls,
    /// Capture time of the last sweep of timed-out calls and idle streams.
    clock: SweepClock,
}

/// What a stream's bytes are fed to: the calls awaiting replies and the
/// counters (apart from the streams, so that a stream can be worked on in
/// its map while these change).
struct Calls {
    opts: TrackerOptions,
    /// The calls awaiting replies, by key: their slot in `open`.
    pending: FastMap<CallKey, u32>,
    /// The transactions: open calls (their reply fields still empty; the
    /// reply is filled in where the call lies), then completed ones,
    /// which the caller reads there ([`Tracker::ready`]) before the slot
    /// is used again. A transaction is a few hundred bytes: kept in the
    /// map it was copied on every insert and remove (a sixth of the
    /// tracker's time), and moving it out to the caller cost 5 % of a
    /// conversion's RPC stage.
    open: Vec<Transaction>,
    /// Slots of `open` holding completed transactions, in the order they
    /// completed, until [`Tracker::release`].
    ready: Vec<u32>,
    /// Slots of `open` that are free.
    free: Vec<u32>,
    counters: Counters,
}

impl Tracker {
    pub fn new(opts: TrackerOptions) -> Tracker {
        Tracker {
            streams: FastMap::default(),
            calls: Calls {
                opts,
                pending: FastMap::default(),
                open: Vec::new(),
                ready: Vec::new(),
                free: Vec::new(),
                counters: Counters::default(),
            },
            clock: SweepClock::default(),
        }
    }

    pub fn counters(&self) -> Counters {
        self.calls.counters
    }

    /// Takes one packet; completed transactions are appended to `out`.
    pub fn segment(&mut self, seg: &Segment, out: &mut Vec<Transaction>) {
        self.track(seg);
        self.take_ready(out);
    }

    /// Ends the capture: calls still open are given up on, and appended
    /// to `out` with every completed transaction not yet taken.
    pub fn finish(&mut self, out: &mut Vec<Transaction>) {
        self.end();
        self.take_ready(out);
    }

    /// Moves the completed transactions to `out` and frees their slots.
    pub fn take_ready(&mut self, out: &mut Vec<Transaction>) {
        let calls = &mut self.calls;
        out.extend(
            calls
                .ready
                .iter()
                .map(|&i| std::mem::take(&mut calls.open[i as usize])),
        );
        self.release();
    }

    /// The transactions completed since the last [`Tracker::release`], in
    /// the order they completed, read where the tracker built them.
    pub fn ready(&self) -> impl ExactSizeIterator<Item = &Transaction> {
        self.calls
            .ready
            .iter()
            .map(|&i| &self.calls.open[i as usize])
    }

    /// Lets go of the transactions [`Tracker::ready`] gave.
    pub fn release(&mut self) {
        let calls = &mut self.calls;
        calls.free.append(&mut calls.ready);
    }

    /// Takes one packet; completed transactions wait in
    /// [`Tracker::ready`]. A caller that reads them there does best to
    /// take a batch at a time: tracking a few hundred transactions, then
    /// writing them, keeps the tracker's and the writer's code and data
    /// each in the cache in turn; a conversion's RPC stage ran 12 % faster
    /// so than writing each transaction as it completed.
    pub fn track(&mut self, seg: &Segment) {
        if !looks_at(seg.proto, seg.payload) {
            return;
        }
        if self.clock.due(seg.ts_ns) {
            self.sweep(seg.ts_ns);
        }
        if seg.proto == TCP {
            self.tcp(seg);
        } else {
            let whole = Whole {
                bytes: seg.payload,
                len: seg.payload_wire as u64,
                gap: (seg.payload.len() as u32) < seg.payload_wire,
                ts: seg.ts_ns,
            };
            self.calls.message(seg, whole, false);
        }
    }

    /// Ends the capture: calls still open are given up on, and join
    /// [`Tracker::ready`] by the time they were first seen.
    pub fn end(&mut self) {
        let calls = &mut self.calls;
        calls.counters.unfinished += self
            .streams
            .values()
            .filter(|s| s.mode == Mode::Synced && s.msg_started)
            .count() as u64;
        self.streams.clear();
        let mut open: Vec<u32> = calls.pending.drain().map(|(_, i)| i).collect();
        open.sort_by_key(|&i| calls.open[i as usize].call_ts);
        calls.counters.calls_without_reply += open.len() as u64;
        calls.ready.append(&mut open);
    }

    fn sweep(&mut self, now: i64) {
        self.clock.swept(now);
        let calls = &mut self.calls;
        let call_limit = now.saturating_sub(calls.opts.call_timeout_ns);
        let open = &calls.open;
        let mut expired = flow::expired(&calls.pending, |&i| {
            let t = &open[i as usize];
            let last = t.last_call_ts.unwrap_or(i64::MIN);
            (last < call_limit).then(|| t.call_ts.unwrap_or(i64::MIN))
        });
        expired.sort_by_key(|(first, _)| *first);
        for (_, k) in expired {
            if calls.close(&k) {
                calls.counters.calls_without_reply += 1;
            }
        }
        let idle_limit = now.saturating_sub(calls.opts.stream_idle_ns);
        self.streams.retain(|_, s| s.last_ts >= idle_limit);
    }

    fn tcp(&mut self, seg: &Segment) {
        let dir = Dir::of(seg);
        let syn = seg.tcp_flags & TCP_SYN != 0;
        let end = seg.tcp_flags & (TCP_FIN | TCP_RST) != 0;
        if seg.payload_wire == 0 && !syn {
            if end {
                self.end_stream(&dir, seg.tcp_flags & TCP_RST != 0);
            }
            return;
        }
        let full = self.streams.len() >= self.calls.opts.max_streams;
        let st = match self.streams.entry(dir) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(_) if full => {
                self.calls.counters.streams_over_limit += 1;
                return;
            }
            Entry::Vacant(e) => e.insert(Stream::new(seg.ts_ns)),
        };
        st.last_ts = seg.ts_ns;
        if syn {
            // The stream starts here: message boundaries are known.
            *st = Stream::new(seg.ts_ns);
            st.mode = Mode::Synced;
            st.seq.start(seg.tcp_seq);
            return;
        }
        if st.mode != Mode::NotRpc {
            self.calls.stream_data(seg, st);
        }
        if end {
            if st.mode == Mode::Synced && st.msg_started {
                self.calls.counters.unfinished += 1;
            }
            self.end_stream(&dir, seg.tcp_flags & TCP_RST != 0);
        }
    }

    fn end_stream(&mut self, dir: &Dir, both: bool) {
        self.streams.remove(dir);
        if both {
            self.streams.remove(&dir.reverse());
        }
    }
}

impl Calls {
    /// The open call under `key`.
    #[inline]
    fn call(&self, key: &CallKey) -> Option<&Transaction> {
        let i = *self.pending.get(key)?;
        self.open.get(i as usize)
    }

    /// Completes the open call under `key` as it is; false if there was
    /// none.
    #[inline]
    fn close(&mut self, key: &CallKey) -> bool {
        let Some(i) = self.pending.remove(key) else {
            return false;
        };
        self.ready.push(i);
        true
    }

    /// A free slot, holding a blank transaction under `key`.
    #[inline]
    fn slot(&mut self, key: &CallKey) -> u32 {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.open.push(Transaction::default());
                (self.open.len() - 1) as u32
            }
        };
        blank(&mut self.open[i as usize], key);
        i
    }

    /// Opens a call under `key` (none is open under it): its slot, blank.
    #[inline]
    fn open_call(&mut self, key: CallKey) -> &mut Transaction {
        let i = self.slot(&key);
        self.pending.insert(key, i);
        &mut self.open[i as usize]
    }

    /// Places a segment's bytes in its stream: drops what was seen
    /// before, turns missing bytes into a gap, and feeds the rest.
    fn stream_data(&mut self, seg: &Segment, st: &mut Stream) {
        let mut data = seg.payload;
        let mut wire = seg.payload_wire as u64;
        let mut seq = seg.tcp_seq;
        match st.seq.place(seq, seg.payload_wire) {
            Place::Unknown => {}
            // A retransmission: keep only bytes not seen yet.
            Place::Old => return,
            Place::New { behind } => {
                let cut = (behind as usize).min(data.len());
                data = &data[cut..];
                wire -= behind as u64;
                seq = seq.wrapping_add(behind);
            }
            Place::Ahead(ahead) => self.gap(seg, st, ahead as u64),
        }
        st.seq.taken(seq, wire as u32);
        if st.mode == Mode::Hunting {
            if !self.hunt(seg, data) {
                st.hunt_tries += 1;
                if st.hunt_tries >= HUNT_TRIES {
                    st.mode = Mode::NotRpc;
                    self.counters.streams_not_rpc += 1;
                }
                return;
            }
            st.mode = Mode::Synced;
            st.reset_message();
            st.mark_have = 0;
            st.in_body = false;
            if st.hunt_tries > 0 || st.seq.next().is_some() {
                self.counters.resyncs += 1;
            }
        }
        self.feed(seg, st, data);
        let uncaptured = wire - data.len() as u64;
        if uncaptured > 0 {
            self.gap(seg, st, uncaptured);
        }
    }

    /// Whether a message starts at the beginning of `data`.
    fn hunt(&self, seg: &Segment, data: &[u8]) -> bool {
        if data.len() < 4 + 24 {
            return false;
        }
        let mark = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
        let len = mark & 0x7fff_ffff;
        if !(24..=MAX_FRAGMENT).contains(&len) {
            return false;
        }
        let body = &data[4..data.len().min(4 + len as usize)];
        match msg::parse(body) {
            Some(Message::Call(_)) => true,
            // A reply is only believed where its call was seen.
            Some(Message::Reply(r)) => self.pending.contains_key(&CallKey {
                client: seg.dst,
                server: seg.src,
                client_port: seg.dst_port,
                server_port: seg.src_port,
                proto: TCP,
                xid: r.xid,
            }),
            None => false,
        }
    }

    /// `n` bytes of the stream are missing.
    fn gap(&mut self, seg: &Segment, st: &mut Stream, mut n: u64) {
        self.counters.gaps += 1;
        self.counters.gap_bytes += n;
        if st.mode != Mode::Synced {
            return;
        }
        if st.in_body {
            let k = n.min(st.frag_left as u64);
            st.frag_left -= k as u32;
            st.msg_len += k;
            st.msg_gap = true;
            n -= k;
            if st.frag_left == 0 {
                st.in_body = false;
                if st.last_frag {
                    self.complete(seg, st);
                }
            }
        }
        if n > 0 || st.mark_have > 0 {
            // The gap took a record mark with it: boundaries are lost.
            if st.msg_started {
                self.counters.unfinished += 1;
            }
            st.reset_message();
            st.mark_have = 0;
            st.in_body = false;
            st.mode = Mode::Hunting;
            st.hunt_tries = 0;
        }
    }

    fn feed(&mut self, seg: &Segment, st: &mut Stream, mut data: &[u8]) {
        while !data.is_empty() {
            if !st.in_body {
                if st.mark_have == 0 && data.len() >= 4 {
                    let mark = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
                    let len = (mark & 0x7fff_ffff) as usize;
                    // The common case: a whole one-fragment message in
                    // this segment, decoded where it lies.
                    if mark >> 31 == 1 && !st.msg_started && len <= data.len() - 4 {
                        let whole = Whole {
                            bytes: &data[4..4 + len],
                            len: len as u64,
                            gap: false,
                            ts: seg.ts_ns,
                        };
                        self.message(seg, whole, true);
                        data = &data[4 + len..];
                        continue;
                    }
                }
                let take = (4 - st.mark_have as usize).min(data.len());
                st.mark[st.mark_have as usize..st.mark_have as usize + take]
                    .copy_from_slice(&data[..take]);
                st.mark_have += take as u8;
                data = &data[take..];
                if st.mark_have < 4 {
                    break;
                }
                st.mark_have = 0;
                let mark = u32::from_be_bytes(st.mark);
                let len = mark & 0x7fff_ffff;
                if len > MAX_FRAGMENT || (!st.msg_started && len < 24 && mark >> 31 == 1) {
                    self.counters.malformed += 1;
                    st.reset_message();
                    st.mode = Mode::Hunting;
                    st.hunt_tries = 0;
                    return;
                }
                if !st.msg_started {
                    st.msg_started = true;
                    st.msg_ts = seg.ts_ns;
                }
                st.in_body = true;
                st.frag_left = len;
                st.last_frag = mark >> 31 == 1;
                if len == 0 {
                    st.in_body = false;
                    if st.last_frag {
                        self.complete(seg, st);
                    }
                }
                continue;
            }
            let n = (st.frag_left as usize).min(data.len());
            if !st.msg_gap {
                let mut part = &data[..n];
                // The header first, then as much as it says to keep. Most
                // headers fit the first bytes: taking the longest possible
                // one at once copied a kilobyte of every READ reply that
                // spans segments, to keep two hundred bytes of it.
                let head = HEADER_MAX.min(self.opts.max_message_prefix);
                for limit in [HEADER_PROBE.min(head), head] {
                    if st.msg_keep.is_some() || part.is_empty() {
                        break;
                    }
                    let take = limit.saturating_sub(st.msg.len()).min(part.len());
                    if take == 0 {
                        // Already this long (a header past the first
                        // bytes, seen in an earlier segment): those bytes
                        // did not parse then either.
                        continue;
                    }
                    st.msg.extend_from_slice(&part[..take]);
                    part = &part[take..];
                    st.msg_keep = self.bytes_to_keep(seg, &st.msg);
                }
                if let Some(keep) = st.msg_keep {
                    let room = keep.saturating_sub(st.msg.len());
                    st.msg.extend_from_slice(&part[..part.len().min(room)]);
                }
            }
            st.msg_len += n as u64;
            st.frag_left -= n as u32;
            data = &data[n..];
            if st.frag_left == 0 {
                st.in_body = false;
                if st.last_frag {
                    // Stamped with the segment that completed it, as
                    // tshark stamps a reassembled message.
                    st.msg_ts = seg.ts_ns;
                    self.complete(seg, st);
                }
            }
        }
    }

    /// How much of a message that spans segments to keep, from its first
    /// bytes: READ and WRITE data is most of an NFS trace's bytes and
    /// nothing the decoder reads, so copying 8 KiB of it per message was
    /// most of the tracker's copying. `None` while the header is not all
    /// there.
    fn bytes_to_keep(&self, seg: &Segment, msg: &[u8]) -> Option<usize> {
        let max = self.opts.max_message_prefix;
        let keep = match msg::parse(msg) {
            Some(Message::Call(c)) => {
                nfs::call_prefix(c.program, c.version, c.procedure).map(|n| c.args_at + n)
            }
            Some(Message::Reply(r)) => self
                .call(&reply_key(seg, r.xid))
                .and_then(|t| t.call)
                .and_then(|c| nfs::reply_prefix(c.program, c.version))
                .map(|n| r.results_at + n),
            // Past HEADER_MAX the message will not parse: keep the usual.
            None if msg.len() < HEADER_MAX.min(max) => return None,
            None => None,
        };
        Some(keep.unwrap_or(max).min(max))
    }

    fn complete(&mut self, seg: &Segment, st: &mut Stream) {
        let msg = std::mem::take(&mut st.msg);
        let whole = Whole {
            bytes: &msg,
            len: st.msg_len,
            gap: st.msg_gap,
            ts: st.msg_ts,
        };
        self.message(seg, whole, true);
        st.msg = msg;
        st.reset_message();
    }

    /// A whole message, from a stream or a datagram, from `seg`'s sender.
    fn message(&mut self, seg: &Segment, w: Whole, stream: bool) {
        let Some(m) = msg::parse(w.bytes) else {
            if w.gap {
                // A gap cut it before its header was whole.
                self.counters.unfinished += 1;
            } else if stream {
                self.counters.malformed += 1;
            }
            return;
        };
        if !stream
            && !udp_believable(seg, &m)
            && !self.pending.contains_key(&reply_key(seg, m.xid()))
        {
            return;
        }
        self.counters.messages += 1;
        if w.gap {
            self.counters.messages_with_gap += 1;
        } else if w.len > w.bytes.len() as u64 {
            self.counters.long_messages += 1;
        }
        match m {
            Message::Call(c) => {
                self.counters.calls += 1;
                let key = CallKey {
                    client: seg.src,
                    server: seg.dst,
                    client_port: seg.src_port,
                    server_port: seg.dst_port,
                    proto: seg.proto,
                    xid: c.xid,
                };
                if let Some(&i) = self.pending.get(&key) {
                    let p = &mut self.open[i as usize];
                    let same = p.call.is_some_and(|o| {
                        (o.program, o.version, o.procedure) == (c.program, c.version, c.procedure)
                    });
                    if same {
                        p.retransmits += 1;
                        p.last_call_ts = Some(w.ts);
                        self.counters.retransmitted_calls += 1;
                        return;
                    }
                    // The xid was used again for another call: the first
                    // got no reply.
                    if self.close(&key) {
                        self.counters.calls_without_reply += 1;
                    }
                }
                let t = self.open_call(key);
                t.call_ts = Some(w.ts);
                t.last_call_ts = Some(w.ts);
                t.call = Some(c);
                t.call_bytes = w.len.min(u32::MAX as u64) as u32;
                t.gap = w.gap;
                let args = w.bytes.get(c.args_at..).unwrap_or(&[]);
                nfs::decode_call_into(c.program, c.version, c.procedure, args, &mut t.detail);
            }
            Message::Reply(r) => {
                self.counters.replies += 1;
                let key = reply_key(seg, r.xid);
                match self.pending.remove(&key) {
                    Some(i) => {
                        self.counters.matched += 1;
                        // Filled in where it lies, and read there.
                        if let Some(t) = self.open.get_mut(i as usize) {
                            fill_reply(t, &r, &w);
                        }
                        self.ready.push(i);
                    }
                    None => {
                        self.counters.replies_without_call += 1;
                        let i = self.slot(&key);
                        fill_reply(&mut self.open[i as usize], &r, &w);
                        self.ready.push(i);
                    }
                }
            }
        }
    }
}

/// Makes `t` a transaction between the key's ends with nothing seen yet,
/// where it lies: built afresh and moved in, a transaction (a few hundred
/// bytes) was copied once more per call, and its old operations dropped.
fn blank(t: &mut Transaction, k: &CallKey) {
    // Every field named, so that a new one cannot be left as the last
    // call had it.
    let Transaction {
        call_ts,
        last_call_ts,
        reply_ts,
        client,
        client_port,
        server,
        server_port,
        proto,
        xid,
        call,
        reply,
        status,
        call_bytes,
        reply_bytes,
        retransmits,
        gap,
        detail: CallDetail { ops, incomplete },
    } = t;
    (*call_ts, *last_call_ts, *reply_ts) = (None, None, None);
    (*client, *client_port, *server, *server_port) =
        (k.client, k.client_port, k.server, k.server_port);
    (*proto, *xid) = (k.proto, k.xid);
    (*call, *reply, *status) = (None, None, None);
    (*call_bytes, *reply_bytes, *retransmits, *gap) = (0, 0, 0, false);
    ops.clear();
    *incomplete = false;
}

/// A reply's fields, and its results decoded for its call.
fn fill_reply(t: &mut Transaction, r: &msg::Reply, w: &Whole) {
    t.reply_ts = Some(w.ts);
    t.reply = Some(r.status);
    t.reply_bytes = w.len.min(u32::MAX as u64) as u32;
    t.gap |= w.gap;
    if let (Some(c), ReplyStatus::Accepted(0)) = (t.call, r.status) {
        let results = w.bytes.get(r.results_at..).unwrap_or(&[]);
        t.status = nfs::decode_reply(
            c.program,
            c.version,
            c.procedure,
            &mut t.detail.ops,
            results,
        );
    }
}

/// The call a reply from `seg`'s sender answers.
fn reply_key(seg: &Segment, xid: u32) -> CallKey {
    CallKey {
        client: seg.dst,
        server: seg.src,
        client_port: seg.dst_port,
        server_port: seg.src_port,
        proto: seg.proto,
        xid,
    }
}

/// UDP carries much that is not RPC: a datagram is taken as an RPC call
/// only for a program weir knows or on the portmapper and NFS ports, and
/// as a reply only to a call seen (checked by the caller) or on those
/// ports.
fn udp_believable(seg: &Segment, m: &Message) -> bool {
    let well_known = |p: u16| p == 111 || p == 2049;
    match m {
        Message::Call(c) => msg::program_name(c.program).is_some() || well_known(seg.dst_port),
        Message::Reply(_) => well_known(seg.src_port),
    }
}
