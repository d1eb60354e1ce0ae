//! The RPC stage: packets of one capture or source, in time order, into
//! the dataset's rpc and nfs tables.
//!
//! Calls and replies must meet in one tracker, so the stage sits where a
//! flow's packets arrive in order: in each capture worker (the fanout
//! group's flow hash keeps both directions of a flow on one worker), and
//! in a conversion on a thread per source, which takes the chunks back
//! from the workers in the reader's order (they finish them in any order).

use std::collections::BTreeMap;
use std::ops::Range;

use rpc::{Segment, Tracker, TrackerOptions, Transaction};
use store::manifest::RpcInfo;
use store::rpc::{NFS_DIR, RPC_DIR, RpcWriter};
use store::{Dataset, StoreError};
use wire::{Has, PacketRecord};

/// Whether and when the stage runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcMode {
    Off,
    /// From the first frame to or from port 111 (portmapper) or 2049
    /// (NFS) on: the frames before it are not RPC the stage could
    /// place anyway, short of a MOUNT before any NFS or portmap frame.
    Auto,
    /// Every frame.
    On,
}

impl RpcMode {
    pub fn name(self) -> &'static str {
        match self {
            RpcMode::Off => "off",
            RpcMode::Auto => "auto",
            RpcMode::On => "on",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct RpcOptions {
    pub mode: RpcMode,
    pub tracker: TrackerOptions,
}

impl Default for RpcOptions {
    fn default() -> Self {
        RpcOptions {
            mode: RpcMode::Auto,
            tracker: TrackerOptions::default(),
        }
    }
}

/// A frame's transport fields as the RPC stage needs them, its payload
/// given as a place in the frame's bytes: a conversion's workers decode
/// each frame once and hand these, with the chunk, to their source's
/// stage, which meets the bytes again there.
#[derive(Clone, Copy, Debug)]
pub struct SegmentAt {
    /// Index of the frame in its chunk.
    pub frame: u32,
    payload_start: u32,
    payload_end: u32,
    payload_wire: u32,
    ts_ns: i64,
    src: [u8; 16],
    dst: [u8; 16],
    src_port: u16,
    dst_port: u16,
    tcp_seq: u32,
    tcp_flags: u16,
    proto: u8,
}

impl SegmentAt {
    /// The segment of a decoded frame, if it is TCP or UDP with its ports
    /// (what RPC can run on).
    #[inline]
    pub fn new(frame: u32, rec: &PacketRecord, payload: Range<usize>) -> Option<SegmentAt> {
        if !rec.has(Has::PORTS | Has::PAYLOAD)
            || !matches!(rec.ip_proto, rpc::track::TCP | rpc::track::UDP)
        {
            return None;
        }
        Some(SegmentAt {
            frame,
            payload_start: payload.start as u32,
            payload_end: payload.end as u32,
            payload_wire: rec.payload_len,
            ts_ns: rec.ts_ns,
            src: rec.ip_src,
            dst: rec.ip_dst,
            src_port: rec.src_port,
            dst_port: rec.dst_port,
            tcp_seq: rec.tcp_seq,
            tcp_flags: rec.tcp_flags,
            proto: rec.ip_proto,
        })
    }

    /// The segment of a decoded frame (as [`SegmentAt::new`]) if `gate`
    /// lets it through, asked before the segment is made: most frames are
    /// of no stage's interest.
    #[inline(always)]
    pub fn wanted(
        frame: u32,
        rec: &PacketRecord,
        bytes: &[u8],
        payload: Range<usize>,
        gate: SegmentGate,
    ) -> Option<SegmentAt> {
        if !rec.has(Has::PORTS | Has::PAYLOAD)
            || !gate.wants(rec.ip_proto, rec.src_port, rec.dst_port, || {
                bytes.get(payload.clone()).unwrap_or(&[])
            })
        {
            return None;
        }
        SegmentAt::new(frame, rec, payload)
    }

    /// Asks the CPU to fetch the first lines of the payload (the RPC
    /// header and the call's arguments) from the frame's `bytes`.
    #[inline(always)]
    fn prefetch(&self, bytes: &[u8]) {
        util::hint::prefetch(bytes.as_ptr().wrapping_add(self.payload_start as usize), 3);
    }

    /// The segment, its payload taken from the frame's `bytes`.
    #[inline]
    pub fn segment<'a>(&self, bytes: &'a [u8]) -> Segment<'a> {
        Segment {
            ts_ns: self.ts_ns,
            src: self.src,
            dst: self.dst,
            src_port: self.src_port,
            dst_port: self.dst_port,
            proto: self.proto,
            tcp_seq: self.tcp_seq,
            tcp_flags: self.tcp_flags,
            payload: bytes
                .get(self.payload_start as usize..self.payload_end as usize)
                .unwrap_or(&[]),
            payload_wire: self.payload_wire,
        }
    }
}

/// The ports whose first frame starts an `auto` RPC stage: the portmapper
/// and NFS.
#[inline]
fn starts_auto(port: u16) -> bool {
    port == 111 || port == 2049
}

/// Whether a stage may look at UDP to or from `port` for the port alone
/// (DNS's, or one that starts an `auto` RPC stage): one bit of a table
/// of the ports below 8,192 (all of them are), where four compares each
/// way were a tenth of a small frame's record.
#[inline(always)]
fn port_watched(port: u16) -> bool {
    const WATCHED: [u16; 4] = [53, 111, 2049, 5353];
    const BITS: [u64; 128] = {
        let mut bits = [0u64; 128];
        let mut i = 0;
        while i < WATCHED.len() {
            let p = WATCHED[i] as usize;
            bits[p / 64] |= 1 << (p % 64);
            i += 1;
        }
        bits
    };
    let p = port as usize;
    p < 8192 && BITS[p / 64] >> (p % 64) & 1 != 0
}

/// Which segments an RPC stage may look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcGate {
    /// None: no stage, or one that is off.
    Off,
    /// Those to or from the ports that start an `auto` stage (one that
    /// has not started yet).
    StartPorts,
    /// Those its tracker looks at ([`rpc::track::looks_at`]): a stage
    /// that has started, or runs from the first frame.
    Tracked,
    /// Either: a conversion's workers, which cannot tell whether the
    /// `auto` stage of their source has started.
    Either,
}

impl RpcGate {
    /// The gate for a stage in `mode` whose state the gate's user does not
    /// know.
    pub fn for_mode(mode: RpcMode) -> RpcGate {
        match mode {
            RpcMode::Off => RpcGate::Off,
            RpcMode::Auto => RpcGate::Either,
            RpcMode::On => RpcGate::Tracked,
        }
    }
}

/// Which segments the RPC and app stages may look at: a frame's segment is
/// made, and handed on, only when it passes. A superset of what the
/// stages take (each looks again), so it changes nothing they write.
#[derive(Clone, Copy, Debug)]
pub struct SegmentGate {
    pub rpc: RpcGate,
    /// The app stage is on.
    pub app: bool,
}

impl SegmentGate {
    /// The gate of a source's stages for its conversion workers.
    pub fn for_source(rpc: RpcMode, app: bool) -> SegmentGate {
        SegmentGate {
            rpc: RpcGate::for_mode(rpc),
            app,
        }
    }

    /// Whether a segment of transport `proto` between these ports, with
    /// the captured payload `payload` gives, may matter to a stage. UDP
    /// to ports no stage watches, the common case, costs a compare or a
    /// bit of a table each way, and a look at the payload only where an
    /// RPC stage takes any datagram that may be a message.
    #[inline(always)]
    pub fn wants<'a>(
        &self,
        proto: u8,
        src_port: u16,
        dst_port: u16,
        payload: impl FnOnce() -> &'a [u8],
    ) -> bool {
        let watched = port_watched(src_port) || port_watched(dst_port);
        let app = self.app
            && (proto == app::track::TCP
                || (watched && app::track::looks_at(proto, src_port, dst_port)));
        if app {
            return true;
        }
        let start_ports = || {
            watched
                && (proto == rpc::track::TCP || proto == rpc::track::UDP)
                && (starts_auto(src_port) || starts_auto(dst_port))
        };
        match self.rpc {
            RpcGate::Off => false,
            RpcGate::StartPorts => start_ports(),
            RpcGate::Tracked => rpc::track::looks_at(proto, payload()),
            RpcGate::Either => start_ports() || rpc::track::looks_at(proto, payload()),
        }
    }
}

/// Which thread encodes a stage's tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TablesOn {
    /// A writer thread of the stage's own: for a stage inside a capture
    /// worker, whose thread must get back to its ring.
    WriterThread,
    /// The thread that feeds the stage: for a conversion's stage, which
    /// has a thread to itself. Handing the transactions to another thread
    /// there only added their copying from core to core (they are a few
    /// hundred bytes each): 4 % of a conversion's CPU time.
    Caller,
}

/// Where transactions go once complete.
enum Tables {
    /// Nothing written yet.
    NotStarted,
    Thread(WriterThread),
    /// Boxed: the encoders are a few hundred KiB.
    Inline(Box<RpcWriter>),
}

/// The segments a worker found in `chunk`, in order, each ready for the
/// tracker; the payloads of the next few are fetched into the cache
/// meanwhile (the worker read only the frames' headers, and the tracker
/// waits on every payload it reads otherwise).
pub fn chunk_segments<'a>(
    chunk: &'a pcapio::Chunk,
    segments: &'a [SegmentAt],
) -> impl Iterator<Item = Segment<'a>> + 'a {
    const AHEAD: usize = 4;
    let bytes = |s: &SegmentAt| {
        chunk
            .frames
            .get(s.frame as usize)
            .map_or(&[][..], |f| chunk.frame_bytes(f))
    };
    segments.iter().enumerate().map(move |(k, s)| {
        if let Some(next) = segments.get(k + AHEAD) {
            next.prefetch(bytes(next));
        }
        s.segment(bytes(s))
    })
}

/// One tracker and its writer.
pub struct RpcStage {
    opts: RpcOptions,
    /// Running (Auto turns it on at the first NFS or portmapper frame).
    active: bool,
    tracker: Tracker,
    tables_on: TablesOn,
    tables: Tables,
    dataset: Dataset,
    writer_id: u16,
}

impl RpcStage {
    /// A stage writing as `writer_id` (unique among the dataset's stages).
    pub fn new(
        dataset: &Dataset,
        writer_id: u16,
        opts: RpcOptions,
        tables_on: TablesOn,
    ) -> RpcStage {
        RpcStage {
            opts,
            active: opts.mode == RpcMode::On,
            tracker: Tracker::new(opts.tracker),
            tables_on,
            tables: Tables::NotStarted,
            dataset: dataset.clone(),
            writer_id,
        }
    }

    /// Which segments the stage may look at now.
    #[inline]
    pub fn gate(&self) -> RpcGate {
        match (self.active, self.opts.mode) {
            (true, _) => RpcGate::Tracked,
            (false, RpcMode::Off) => RpcGate::Off,
            (false, _) => RpcGate::StartPorts,
        }
    }

    /// A TCP or UDP segment, in capture order.
    pub fn segment(&mut self, seg: &Segment) -> Result<(), StoreError> {
        if !self.active {
            if self.opts.mode == RpcMode::Off
                || !(starts_auto(seg.src_port) || starts_auto(seg.dst_port))
            {
                return Ok(());
            }
            self.active = true;
        }
        self.tracker.track(seg);
        self.flush(false)
    }

    /// Writes the completed transactions once there are enough of them
    /// (`all`: whatever there is). Tables encoded on this thread read them
    /// where the tracker keeps them; a writer thread is sent them, moved.
    #[inline]
    fn flush(&mut self, all: bool) -> Result<(), StoreError> {
        let ready = self.tracker.ready().len();
        let batch = match self.tables_on {
            TablesOn::Caller => INLINE_BATCH,
            TablesOn::WriterThread => WRITE_BATCH,
        };
        if ready == 0 || (ready < batch && !all) {
            return Ok(());
        }
        match &mut self.tables {
            Tables::Inline(w) => write_ready_transactions(w, &mut self.tracker),
            _ => self.hand_over(),
        }
    }

    /// Out of line: starting the writer puts its encoders (a few hundred
    /// KiB) on the stack, and a function with such a frame probes every
    /// page of it on each call. So `flush` writes an inline stage's
    /// transactions itself and comes here only to start it: sending every
    /// write through here made a conversion with RPC 8 % slower, and
    /// splitting the start into a function of its own still 3 %.
    #[inline(never)]
    fn hand_over(&mut self) -> Result<(), StoreError> {
        if let Tables::NotStarted = self.tables {
            self.dataset.subdir(RPC_DIR)?;
            self.dataset.subdir(NFS_DIR)?;
            let w = RpcWriter::new(self.dataset.root(), self.writer_id, 1 << 22);
            self.tables = match self.tables_on {
                TablesOn::WriterThread => Tables::Thread(WriterThread::start(w)?),
                TablesOn::Caller => Tables::Inline(Box::new(w)),
            };
        }
        match &mut self.tables {
            Tables::Thread(w) => {
                let mut batch = Vec::with_capacity(WRITE_BATCH);
                self.tracker.take_ready(&mut batch);
                w.send(batch)
            }
            Tables::Inline(w) => write_ready_transactions(w, &mut self.tracker),
            Tables::NotStarted => Ok(()),
        }
    }

    /// Ends the stage: open calls are written as unanswered. `None` if
    /// it never ran.
    pub fn finish(mut self) -> Result<Option<RpcInfo>, StoreError> {
        if !self.active {
            return Ok(None);
        }
        self.tracker.end();
        self.flush(true)?;
        let (rpc_files, nfs_files) = match std::mem::replace(&mut self.tables, Tables::NotStarted) {
            Tables::Thread(w) => w.finish()?,
            Tables::Inline(w) => w.finish()?,
            Tables::NotStarted => (Vec::new(), Vec::new()),
        };
        let c = self.tracker.counters();
        let counters: BTreeMap<String, u64> = [
            ("messages", c.messages),
            ("calls", c.calls),
            ("replies", c.replies),
            ("matched", c.matched),
            ("calls_without_reply", c.calls_without_reply),
            ("replies_without_call", c.replies_without_call),
            ("retransmitted_calls", c.retransmitted_calls),
            ("gaps", c.gaps),
            ("gap_bytes", c.gap_bytes),
            ("messages_with_gap", c.messages_with_gap),
            ("resyncs", c.resyncs),
            ("malformed", c.malformed),
            ("long_messages", c.long_messages),
            ("unfinished", c.unfinished),
            ("streams_not_rpc", c.streams_not_rpc),
            ("streams_over_limit", c.streams_over_limit),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Ok(Some(RpcInfo {
            mode: self.opts.mode.name().to_string(),
            call_timeout_s: self.opts.tracker.call_timeout_ns as f64 / 1e9,
            transactions: c.matched + c.calls_without_reply + c.replies_without_call,
            counters,
            rpc_files,
            nfs_files,
        }))
    }
}

/// Transactions handed to the writer thread at a time.
const WRITE_BATCH: usize = 1024;
/// Transactions written at a time on the tracker's thread: see
/// [`Tracker::track`] (128 and 512 were no faster, 64 and 1,024 slower).
const INLINE_BATCH: usize = 256;

/// An [`RpcWriter`] on a thread of its own: encoding the tables costs about
/// as much as tracking does, and only the tracker must see every segment
/// in order, so the two run side by side.
struct WriterThread {
    tx: Option<crossbeam_channel::Sender<Vec<Transaction>>>,
    handle: Option<std::thread::JoinHandle<WriterResult>>,
}

type WriterResult = Result<(Vec<String>, Vec<String>), StoreError>;

impl WriterThread {
    fn start(mut w: RpcWriter) -> Result<WriterThread, StoreError> {
        let (tx, rx) = crossbeam_channel::bounded::<Vec<Transaction>>(8);
        let handle = std::thread::Builder::new()
            .name("weir-rpcw".into())
            .spawn(move || {
                for batch in rx {
                    for t in &batch {
                        w.push(t)?;
                    }
                }
                w.finish()
            })
            .map_err(|e| StoreError::Invalid {
                path: "<rpc writer thread>".into(),
                message: format!("starting the rpc table writer: {e}"),
            })?;
        Ok(WriterThread {
            tx: Some(tx),
            handle: Some(handle),
        })
    }

    fn send(&mut self, batch: Vec<Transaction>) -> Result<(), StoreError> {
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(batch).is_ok());
        if sent {
            return Ok(());
        }
        // The writer stopped: its error says why.
        self.tx = None;
        match self.join() {
            Err(e) => Err(e),
            Ok(_) => Err(writer_gone()),
        }
    }

    fn join(&mut self) -> WriterResult {
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            _ => Err(writer_gone()),
        }
    }

    fn finish(mut self) -> WriterResult {
        self.tx = None;
        self.join()
    }
}

fn writer_gone() -> StoreError {
    StoreError::Invalid {
        path: "<rpc writer thread>".into(),
        message: "the rpc table writer stopped; this is a bug in weir, please report it".into(),
    }
}

/// Writes the tracker's completed transactions, read where it keeps
/// them, and lets go of them.
pub fn write_ready_transactions(
    w: &mut RpcWriter,
    tracker: &mut Tracker,
) -> Result<(), StoreError> {
    for t in tracker.ready() {
        w.push(t)?;
    }
    tracker.release();
    Ok(())
}
