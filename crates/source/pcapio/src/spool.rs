//! Pcap files written off the capture path.
//!
//! A capture worker stages records into blocks taken from a fixed pool
//! ([`Spool::append`]); full blocks go to a writer thread that compresses
//! each (or not, per `--compress`), appends it to the current file and
//! hands the block on (to the records) or back. The blocks are
//! page-aligned and laid out so that an uncompressed one goes to an
//! O_DIRECT file as it is ([`crate::outfile::OutFile::append_staged`]):
//! a frame is copied once, from the ring into staging. Rotation by size or time is
//! decided on the worker, so each frame's file and offset (in the
//! decompressed pcap stream) are known the moment it is staged. When the
//! writer falls behind and the pool is empty, frames are dropped and
//! counted, unless the worker has made the spool patient (its ring has
//! room): then it waits for a block, at most 20 ms.
//!
//! Files are written as hidden `.NAME.part` and renamed when complete, with
//! mode 0640. A write error (a full disk) closes the current file validly
//! at its last whole block; the frames that could not be written are
//! counted, and the worker drops (and counts) frames until a new file can
//! be opened, trying once a second, unless the capture is to stop.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, unbounded};
use wire::LinkType;

use crate::outfile::{ALIGN, AlignedBuf, OutFile};
use crate::repair::OverwriteMarker;
use crate::retention::{RemovedFile, Retention};
use crate::seekable::{Codec, Container, FrameEncoder, Method, SeekTable, auto_method};
use crate::writer::{PCAP_HEADER_LEN, PCAP_RECORD_HEADER_LEN};

/// What to do when the disk is full (`--on-full`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFull {
    /// End the capture cleanly.
    #[default]
    Stop,
    /// Keep capturing; pcap frames are dropped (and counted) until space
    /// returns.
    Drop,
}

/// Where and how a spool writes.
#[derive(Clone, Debug)]
pub struct SpoolOptions {
    pub dir: PathBuf,
    /// File names: `{prefix}-{seq:05}.pcap`, unless `single_name` is set.
    pub prefix: String,
    /// Write exactly this file name (and `NAME.1`, `NAME.2`, ... on
    /// rotation), as `tcpdump -w` does.
    pub single_name: Option<String>,
    pub link: LinkType,
    pub snaplen: u32,
    /// Start a new file before one would exceed this many bytes (of pcap,
    /// before compression).
    pub rotate_bytes: Option<u64>,
    /// Start a new file when a frame is this much later than the file's first.
    pub rotate_ns: Option<i64>,
    pub block_bytes: usize,
    /// Staging memory is `blocks × block_bytes`.
    pub blocks: usize,
    /// The first file's id; later files count up (ids go into records).
    pub first_file_id: u32,
    pub codec: Codec,
    /// Write with O_DIRECT where the filesystem allows it.
    pub direct: bool,
    pub on_full: OnFull,
    pub retention: Option<Arc<Retention>>,
    /// Where each block goes once it is written (the packet records of a
    /// capture), instead of straight back to the pool.
    pub hand_on: Option<HandOn>,
}

impl SpoolOptions {
    /// Options with the defaults for everything but where and what.
    pub fn new(dir: PathBuf, prefix: String, link: LinkType, snaplen: u32) -> SpoolOptions {
        SpoolOptions {
            dir,
            prefix,
            single_name: None,
            link,
            snaplen,
            rotate_bytes: None,
            rotate_ns: None,
            block_bytes: 256 << 10,
            blocks: 64,
            first_file_id: 0,
            codec: Codec::None,
            direct: false,
            on_full: OnFull::Stop,
            retention: None,
            hand_on: None,
        }
    }
}

/// Written blocks handed on to a reader of the frames (the records of a
/// capture), so that the frames are copied once, into staging, and read
/// from there off the capture thread. A reader that falls behind never
/// holds the pcap path up: once it holds `most` blocks, or while staging
/// runs short, each further block goes back to the pool at once and
/// the reader is told only which span of which file it missed
/// ([`Staged::Missed`]), to read from the file later. With `--compress
/// auto` the blocks it holds count as the writer's backlog, so
/// compression gives way before the reader misses a block.
#[derive(Clone)]
pub struct HandOn {
    tx: crossbeam_channel::Sender<Staged>,
    held: Arc<AtomicUsize>,
    most: usize,
}

impl std::fmt::Debug for HandOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandOn").field("most", &self.most).finish()
    }
}

impl HandOn {
    /// A hand-on that lets its reader hold at most `most` blocks (0: none,
    /// the reader is told only what it missed), and the reader's end.
    pub fn new(most: usize) -> (HandOn, Receiver<Staged>) {
        let (tx, rx) = unbounded();
        let held = Arc::new(AtomicUsize::new(0));
        (HandOn { tx, held, most }, rx)
    }
}

/// What a spool's writer hands on, in the order the frames were staged.
pub enum Staged {
    Block(StagedBlock),
    Missed(MissedSpan),
}

/// Frames of a pcap file the reader was not handed (it held too many
/// blocks): `from..to` in the file's decompressed pcap stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissedSpan {
    pub file_id: u32,
    pub from: u64,
    pub to: u64,
    pub frames: u64,
}

/// A written staging block: its frames as they are in the pcap file. It
/// goes back to the spool's pool when dropped.
pub struct StagedBlock {
    /// Taken when the block goes back to the pool.
    data: Option<AlignedBuf>,
    /// Where the frames start in `data`.
    lead: usize,
    /// The file the frames are in, and the first frame's offset there.
    pub file_id: u32,
    pub offset: u64,
    pub frames: u64,
    home: FreeBlocks,
    held: Arc<AtomicUsize>,
}

impl StagedBlock {
    /// The block's frames with their offsets in the file.
    pub fn frames(&self) -> StagedFrames<'_> {
        StagedFrames {
            bytes: (self.data.as_ref()).map_or(&[][..], |d| d.filled_from(self.lead)),
            at: 0,
            offset: self.offset,
        }
    }
}

impl Drop for StagedBlock {
    fn drop(&mut self) {
        if let Some(data) = self.data.take() {
            self.home.give(data);
        }
        self.held.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A frame of a [`StagedBlock`].
#[derive(Clone, Copy, Debug)]
pub struct StagedFrame<'a> {
    /// The frame's record offset in its file.
    pub offset: u64,
    pub ts_ns: i64,
    pub wire_len: u32,
    pub data: &'a [u8],
}

/// The frames of a staging block, in the spool's own record layout
/// (little-endian, nanoseconds).
pub struct StagedFrames<'a> {
    bytes: &'a [u8],
    at: usize,
    offset: u64,
}

impl<'a> Iterator for StagedFrames<'a> {
    type Item = StagedFrame<'a>;
    fn next(&mut self) -> Option<StagedFrame<'a>> {
        let h = self.bytes.get(self.at..self.at + 16)?;
        let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let cap = word(8) as usize;
        let data = self.bytes.get(self.at + 16..self.at + 16 + cap)?;
        let frame = StagedFrame {
            offset: self.offset,
            ts_ns: word(0) as i64 * 1_000_000_000 + word(4) as i64,
            wire_len: word(12),
            data,
        };
        self.at += 16 + cap;
        self.offset += 16 + cap as u64;
        Some(frame)
    }
}

/// A finished pcap file.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PcapFileInfo {
    /// The id records use in `pcap_file`.
    pub id: u32,
    /// File name (relative to the spool's directory).
    pub name: String,
    pub frames: u64,
    /// Bytes of pcap (decompressed).
    pub bytes: u64,
    /// Bytes the file takes (compressed, with its seek table).
    pub stored_bytes: u64,
    pub ts_first: Option<i64>,
    pub ts_last: Option<i64>,
    /// Blocks written with each compression method (`zstd:3`, `stored`).
    pub methods: BTreeMap<String, u64>,
    /// Size and SHA-256 of the file, taken as it was written (none for a
    /// file a write error cut back).
    #[serde(skip)]
    pub digest: Option<util::digest::FileDigest>,
}

/// What the writer thread reports when it ends.
#[derive(Debug, Default)]
pub struct SpoolReport {
    pub files: Vec<PcapFileInfo>,
    /// The first write error, if any.
    pub error: Option<String>,
    /// Staged frames that could not be written (after an error).
    pub frames_lost: u64,
    /// Whether writes bypassed the page cache (O_DIRECT).
    pub direct: bool,
}

/// What the writer publishes while it runs, for the worker and the stats.
#[derive(Debug, Default)]
pub struct SpoolShared {
    /// The writer has no file to write to (a write error, a full disk).
    failed: AtomicBool,
    /// Of those, because the disk was full: cleared when a file opens.
    pub disk_full: AtomicBool,
    /// `--on-full stop` and the disk filled: the capture should end.
    pub stop_wanted: AtomicBool,
    /// Staged frames the writer could not write.
    pub frames_lost: AtomicU64,
    /// Bytes of pcap in, bytes to the file out (after compression).
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// The method of the latest block ([`Method::code`]); `i32::MIN` when
    /// nothing is compressed.
    pub method: AtomicI32,
    /// Files finished so far, for a running capture's manifest.
    finished: Mutex<Vec<PcapFileInfo>>,
}

impl SpoolShared {
    /// The files finished so far (under their final names).
    pub fn finished_files(&self) -> Vec<PcapFileInfo> {
        self.finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The latest block's compression method, if the spool compresses.
    pub fn method(&self) -> Option<Method> {
        let c = self.method.load(Ordering::Relaxed);
        (c != i32::MIN).then(|| Method::from_code(c as i16))
    }
}

enum Msg {
    Open {
        name: String,
        id: u32,
    },
    Block {
        data: AlignedBuf,
        /// Where the frames start in `data` (see [`Spool::append`]).
        lead: usize,
        frames: u64,
        ts_first: i64,
        ts_last: i64,
        /// The oldest frame in the block.
        ts_min: i64,
    },
    Close,
}

/// The capture side of a spool.
pub struct Spool {
    opts: SpoolOptions,
    tx: crossbeam_channel::Sender<Msg>,
    free: FreeBlocks,
    shared: Arc<SpoolShared>,
    cur: Option<AlignedBuf>,
    /// Where the frames start in `cur`.
    cur_lead: usize,
    cur_frames: u64,
    /// First, last and oldest frame of the block being filled.
    cur_ts: (i64, i64, i64),
    file: Option<PcapFileInfo>,
    next_seq: u32,
    /// While the writer has failed: the frame time of the next retry.
    retry_at: Option<i64>,
    /// Frames dropped because no staging block was free or the writer had
    /// no file.
    pub dropped: u64,
    /// Frames staged.
    pub staged: u64,
    /// Tells the thread growing the staging pool to stop.
    stop_growing: Arc<AtomicBool>,
    /// That thread, waited for when the spool goes.
    grower: Option<JoinHandle<()>>,
    /// Wait for the writer to return a block rather than drop a frame
    /// ([`Spool::set_patient`]).
    patient: bool,
}

/// How long a patient spool waits for a free block before it drops.
const PATIENCE: Duration = Duration::from_millis(20);

impl Drop for Spool {
    fn drop(&mut self) {
        self.stop_growing.store(true, Ordering::Relaxed);
        // It stops at its next block; waited for, so that a spool given up
        // (a capture that failed to start) leaves no thread running.
        if let Some(g) = self.grower.take() {
            g.thread().unpark();
            let _ = g.join();
        }
    }
}

/// Staging blocks not in use, last in first out: the block the writer
/// just emptied is the next one filled, while it is still in the cache. A
/// first-in-first-out pool would cycle through all of staging memory and
/// make both copies of every frame miss the cache. Blocks added while the
/// pool grows go to the bottom, behind the warm ones, and the bottom ones
/// are given back first.
#[derive(Clone)]
struct FreeBlocks {
    list: Arc<(Mutex<VecDeque<AlignedBuf>>, Condvar)>,
    /// Blocks made so far and not given back, free or not.
    made: Arc<AtomicUsize>,
    /// The most there may be (`--buffer`).
    max: usize,
    /// A block's capacity: a block of another size (one made for a frame
    /// larger than a block) is freed when given back.
    cap: usize,
}

impl FreeBlocks {
    fn new(max: usize, cap: usize) -> FreeBlocks {
        FreeBlocks {
            list: Arc::new((Mutex::new(VecDeque::with_capacity(max)), Condvar::new())),
            made: Arc::new(AtomicUsize::new(0)),
            max,
            cap,
        }
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<AlignedBuf>> {
        self.list.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// A free block, and how many are left free.
    fn take(&self) -> (Option<AlignedBuf>, usize) {
        let mut list = self.lock();
        let b = list.pop_back();
        (b, list.len())
    }
    /// A free block, waiting up to `limit` for the writer to return one
    /// (or the pool to grow).
    fn take_within(&self, limit: Duration) -> Option<AlignedBuf> {
        let deadline = Instant::now() + limit;
        let mut list = self.lock();
        loop {
            if let Some(b) = list.pop_back() {
                return Some(b);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            list = self
                .list
                .1
                .wait_timeout(list, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
    fn give(&self, mut b: AlignedBuf) {
        if b.capacity() != self.cap {
            return;
        }
        b.clear();
        self.lock().push_back(b);
        self.list.1.notify_one();
    }
    /// A new block, at the bottom of the pool.
    fn add(&self, b: AlignedBuf) {
        // Counted before it can be seen in the pool, so that a reader of
        // the pool's length and then of `made` never finds more free
        // blocks than made ones.
        let mut list = self.lock();
        self.made.fetch_add(1, Ordering::Relaxed);
        list.push_front(b);
        drop(list);
        self.list.1.notify_one();
    }
    /// Takes the coldest free block out of the pool for good, if more than
    /// `keep` are made and it is free.
    fn remove_cold(&self, keep: usize) -> Option<AlignedBuf> {
        let mut list = self.lock();
        if self.made() <= keep {
            return None;
        }
        let b = list.pop_front()?;
        self.made.fetch_sub(1, Ordering::Relaxed);
        Some(b)
    }
    fn len(&self) -> usize {
        self.lock().len()
    }
    fn made(&self) -> usize {
        self.made.load(Ordering::Relaxed)
    }
}

/// Staging written before a spool starts: enough for the writer's usual
/// lag, and fast to write (fresh memory is slow on VMs whose host takes
/// free pages back, and a capture must be recording within 300 ms of its
/// launch). More is added only while the writer falls behind.
pub const READY_STAGING_BYTES: usize = 8 << 20;

/// Staging added back to the system once the writer has kept up this long.
const SHRINK_AFTER: Duration = Duration::from_secs(5);

/// A staging block: page-aligned, so that the writer hands it to an
/// O_DIRECT file as it is, with a lead of up to 4 KiB before its frames
/// ([`Spool::append`]), and every page faulted in (not just allocated:
/// fresh memory faults in slowly on VMs that hand free pages back to the
/// host, the first time the capture path fills the block). One byte a
/// page is enough: filling the whole block would push megabytes through
/// the caches the capture thread is using (at 64-byte frames that tripled
/// its cost per frame while staging grew).
fn staging_block(bytes: usize) -> AlignedBuf {
    AlignedBuf::touched(block_capacity(bytes))
}

/// The capacity of a staging block of `bytes` of frames.
fn block_capacity(bytes: usize) -> usize {
    (bytes + ALIGN).next_multiple_of(ALIGN)
}

/// The staging pool's size follows the writer's backlog: grown while few
/// blocks are free (a quarter more at a time, up to the pool's most),
/// given back down to `ready` blocks once the writer has kept up for
/// [`SHRINK_AFTER`]. Woken by the capture side when it finds few free
/// blocks; looks again ten times a second.
struct Grower {
    free: FreeBlocks,
    bytes: usize,
    ready: usize,
    /// [`SHRINK_AFTER`], but for tests.
    shrink_after: Duration,
    stop: Arc<AtomicBool>,
}

impl Grower {
    /// Free blocks below which the pool grows.
    fn low_water(made: usize) -> usize {
        (made / 4).max(4)
    }

    fn run(self) {
        let mut idle_since: Option<Instant> = None;
        while !self.stop.load(Ordering::Relaxed) {
            let (free, made) = (self.free.len(), self.free.made());
            if free < Grower::low_water(made) && made < self.free.max {
                idle_since = None;
                let more = (made / 4).max(8).min(self.free.max - made);
                for _ in 0..more {
                    if self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    self.free.add(staging_block(self.bytes));
                }
                continue;
            }
            // All but the block being filled are free: the writer keeps up.
            let caught_up = free + 1 >= made;
            match idle_since {
                _ if !caught_up || made <= self.ready => idle_since = None,
                None => idle_since = Some(Instant::now()),
                Some(t) if t.elapsed() >= self.shrink_after => {
                    let mut given = 0;
                    while self.free.remove_cold(self.ready).is_some() {
                        given += 1;
                    }
                    if given > 0 {
                        give_back_freed_memory();
                    }
                    idle_since = None;
                }
                Some(_) => {}
            }
            std::thread::park_timeout(Duration::from_millis(100));
        }
    }
}

/// Returns memory freed to the allocator to the system (glibc keeps freed
/// heap memory for reuse otherwise).
fn give_back_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory; any argument is valid.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Starts a spool: its writer thread and the staging pool, of which
/// [`READY_STAGING_BYTES`] (at least two blocks) are written here, so the
/// capture path never meets fresh memory; more is added only while the
/// writer falls behind, up to `blocks`.
pub fn spool(opts: SpoolOptions) -> io::Result<(Spool, JoinHandle<SpoolReport>)> {
    let blocks = opts.blocks.max(2);
    let ready = blocks.min((READY_STAGING_BYTES / opts.block_bytes.max(1)).max(2));
    let free = FreeBlocks::new(blocks, block_capacity(opts.block_bytes));
    for _ in 0..ready {
        free.add(staging_block(opts.block_bytes));
    }
    let stop_growing = Arc::new(AtomicBool::new(false));
    let mut grower = None;
    if blocks > ready {
        let g = Grower {
            free: free.clone(),
            bytes: opts.block_bytes,
            ready,
            shrink_after: SHRINK_AFTER,
            stop: stop_growing.clone(),
        };
        grower = Some(
            std::thread::Builder::new()
                .name(format!("weir-stage-{}", opts.prefix))
                .spawn(move || g.run())?,
        );
    }
    let stop_grower = |grower: Option<JoinHandle<()>>| {
        stop_growing.store(true, Ordering::Relaxed);
        if let Some(g) = grower {
            g.thread().unpark();
            let _ = g.join();
        }
    };
    let shared = Arc::new(SpoolShared {
        method: AtomicI32::new(i32::MIN),
        ..Default::default()
    });
    let (tx, rx) = unbounded();
    let writer = FileWriter {
        dir: opts.dir.clone(),
        header: header_bytes(opts.link, opts.snaplen),
        codec: opts.codec,
        container: opts.codec.container(),
        direct: opts.direct,
        reserve: opts.rotate_bytes,
        on_full: opts.on_full,
        retention: opts.retention.clone(),
        shared: shared.clone(),
        free: free.clone(),
        encoder: FrameEncoder::new(),
        frame: Vec::new(),
        cur: None,
        report: SpoolReport::default(),
        hand_on: opts.hand_on.clone(),
    };
    let handle = match std::thread::Builder::new()
        .name(format!("weir-pcap-{}", opts.prefix))
        .spawn(move || writer.run(rx))
    {
        Ok(h) => h,
        Err(e) => {
            stop_grower(grower);
            return Err(e);
        }
    };
    Ok((
        Spool {
            opts,
            tx,
            free,
            shared,
            cur: None,
            cur_lead: 0,
            cur_frames: 0,
            cur_ts: (0, 0, 0),
            file: None,
            next_seq: 0,
            retry_at: None,
            dropped: 0,
            staged: 0,
            stop_growing,
            grower,
            patient: false,
        },
        handle,
    ))
}

fn header_bytes(link: LinkType, snaplen: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&(link.0 as u32).to_le_bytes());
    h
}

impl Spool {
    /// Stages one frame. Returns the frame's (file id, offset), or `None` if
    /// it was dropped for want of staging memory.
    #[inline]
    pub fn append(&mut self, ts_ns: i64, wire_len: u32, frame: &[u8]) -> Option<(u32, u64)> {
        let cap = frame.len().min(self.opts.snaplen as usize);
        let need = PCAP_RECORD_HEADER_LEN as usize + cap;
        if self.shared.failed.load(Ordering::Relaxed) {
            // The writer has no file: drop, and once a second start a new
            // file so that the writer tries again.
            let retry = *self.retry_at.get_or_insert(ts_ns + 1_000_000_000);
            if ts_ns >= retry && self.opts.on_full == OnFull::Drop {
                self.retry_at = Some(ts_ns + 1_000_000_000);
                self.close_file();
                self.open_file();
            }
            self.dropped += 1;
            return None;
        }
        self.retry_at = None;
        if let Some(f) = &self.file {
            let too_big = self
                .opts
                .rotate_bytes
                .is_some_and(|limit| f.frames > 0 && f.bytes + need as u64 > limit);
            let too_old = self
                .opts
                .rotate_ns
                .is_some_and(|limit| f.ts_first.is_some_and(|first| ts_ns - first >= limit));
            if too_big || too_old {
                self.close_file();
            }
        }
        if self.file.is_none() {
            self.open_file();
        }
        if self
            .cur
            .as_ref()
            .is_some_and(|b| b.len() - self.cur_lead + need > self.opts.block_bytes)
        {
            self.flush_block();
        }
        if self.cur.is_none() {
            let (block, left) = self.free.take();
            let made = self.free.made();
            if left < Grower::low_water(made)
                && made < self.free.max
                && let Some(g) = &self.grower
            {
                // The writer is falling behind: more staging.
                g.thread().unpark();
            }
            let block = match block {
                None if self.patient => {
                    let b = self.free.take_within(PATIENCE);
                    // A writer that does not answer in time will not answer
                    // the next frame either: drop until told again.
                    self.patient = b.is_some();
                    b
                }
                b => b,
            };
            let block = match block {
                // A frame larger than a block gets a block of its own size
                // (freed when given back).
                Some(b) if b.capacity() < need + ALIGN => {
                    self.free.give(b);
                    Some(AlignedBuf::touched(need + ALIGN))
                }
                b => b,
            };
            let Some(mut b) = block else {
                self.dropped += 1;
                return None;
            };
            // The block starts as far past a 4 KiB unit of the file as the
            // frames do: the writer puts the file's unwritten tail in
            // front of them and hands the block to the file as it is.
            let lead = self.file.as_ref().map_or(0, |f| f.bytes as usize % ALIGN);
            // SAFETY: the lead is written by the writer before it is read.
            unsafe { b.set_len(lead) };
            self.cur_lead = lead;
            self.cur = Some(b);
        }
        let buf = self.cur.as_mut()?;
        let file = self.file.as_mut()?;
        let offset = file.bytes;
        let ts = ts_ns.max(0) as u64;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(cap as u32).to_le_bytes());
        h[12..16].copy_from_slice(&wire_len.max(cap as u32).to_le_bytes());
        buf.push_record(&h, &frame[..cap]);
        file.bytes += need as u64;
        file.frames += 1;
        file.ts_first.get_or_insert(ts_ns);
        file.ts_last = Some(ts_ns);
        if self.cur_frames == 0 {
            self.cur_ts = (ts_ns, ts_ns, ts_ns);
        }
        self.cur_ts.1 = ts_ns;
        self.cur_ts.2 = self.cur_ts.2.min(ts_ns);
        self.cur_frames += 1;
        self.staged += 1;
        Some((file.id, offset))
    }

    /// With `patient`, a frame that finds no free staging block waits (up
    /// to 20 ms) for the writer to return one instead of being dropped. A
    /// worker sets it while its receive ring has room: frames then wait in
    /// the ring, and on a core shared with the writer the wait is the
    /// writer's time to run, as in a single-threaded capturer. Without it
    /// (the ring filling up) frames are dropped here and counted, and the
    /// worker keeps the ring moving, so records lose nothing.
    pub fn set_patient(&mut self, patient: bool) {
        self.patient = patient;
    }

    /// What the writer publishes (compression, lost frames, a full disk).
    pub fn shared(&self) -> Arc<SpoolShared> {
        self.shared.clone()
    }

    /// Blocks queued for the writer or being written: how far behind it is.
    pub fn backlog(&self) -> usize {
        // The pool's length first: a block the grower adds in between is
        // then in `made` and not in the length, never the other way round.
        let free = self.free.len();
        self.free
            .made()
            .saturating_sub(free)
            .saturating_sub(self.cur.is_some() as usize)
    }

    /// Sends the partly filled block to the writer (call now and then, so
    /// that data does not wait in memory when traffic is light).
    pub fn flush_block(&mut self) {
        if let Some(b) = self.cur.take() {
            if b.len() == self.cur_lead {
                self.cur = Some(b);
                return;
            }
            let frames = std::mem::take(&mut self.cur_frames);
            let _ = self.tx.send(Msg::Block {
                data: b,
                lead: self.cur_lead,
                frames,
                ts_first: self.cur_ts.0,
                ts_last: self.cur_ts.1,
                ts_min: self.cur_ts.2,
            });
        }
    }

    fn open_file(&mut self) {
        let id = self.opts.first_file_id + self.next_seq;
        let suffix = self.opts.codec.container().map_or("", Container::suffix);
        let name = match &self.opts.single_name {
            Some(n) if self.next_seq == 0 => format!("{n}{suffix}"),
            Some(n) => format!("{n}.{}{suffix}", self.next_seq),
            None => format!("{}-{:05}.pcap{suffix}", self.opts.prefix, self.next_seq),
        };
        self.next_seq += 1;
        let _ = self.tx.send(Msg::Open {
            name: name.clone(),
            id,
        });
        self.file = Some(PcapFileInfo {
            id,
            name,
            bytes: PCAP_HEADER_LEN,
            ..Default::default()
        });
    }

    /// Closes the current file when its first frame is a rotation period
    /// older than `now_ns` (the wall clock): with rotation by time, a file
    /// is finished even when traffic stops, so that readers get it.
    pub fn close_if_due(&mut self, now_ns: i64) {
        let due = self.opts.rotate_ns.is_some_and(|limit| {
            self.file
                .as_ref()
                .and_then(|f| f.ts_first)
                .is_some_and(|first| now_ns - first >= limit)
        });
        if due {
            self.close_file();
        }
    }

    fn close_file(&mut self) {
        self.flush_block();
        if self.file.take().is_some() {
            let _ = self.tx.send(Msg::Close);
        }
    }

    /// Writes out what is staged and closes the current file. The writer
    /// thread ends once every message is handled; join its handle for the
    /// report.
    pub fn finish(mut self) {
        self.close_file();
    }
}

/// The file being written.
struct Current {
    out: OutFile,
    part: PathBuf,
    path: PathBuf,
    table: SeekTable,
    info: PcapFileInfo,
    /// Where each block not yet known to be on disk ends, with the frame
    /// count and newest frame there: what a failed file is cut back to.
    ends: VecDeque<(u64, u64, Option<i64>)>,
    /// (length, frames, newest frame) at the last block end on disk.
    whole: (u64, u64, Option<i64>),
    /// Writing over an older file: the old content past what is written
    /// is cut off at close; its newest frame (no frame of this file may be
    /// as old) and the marker that tells recovery so.
    stale: Option<(i64, PathBuf)>,
}

/// The writer thread's state.
struct FileWriter {
    dir: PathBuf,
    header: [u8; 24],
    codec: Codec,
    container: Option<Container>,
    direct: bool,
    reserve: Option<u64>,
    on_full: OnFull,
    retention: Option<Arc<Retention>>,
    shared: Arc<SpoolShared>,
    free: FreeBlocks,
    encoder: FrameEncoder,
    frame: Vec<u8>,
    cur: Option<Current>,
    report: SpoolReport,
    hand_on: Option<HandOn>,
}

/// Buffer of a writer's file: large writes, a few per staging pool.
const WRITE_BUFFER: usize = 4 << 20;

/// Staged blocks queued for the writer go to the file in one write of up
/// to this much.
const STAGED_WRITE: usize = 4 << 20;

/// How long the writer waits for more blocks to write with one.
const GATHER: Duration = Duration::from_millis(10);

/// A staging block the writer has taken.
struct Incoming {
    data: AlignedBuf,
    lead: usize,
    frames: u64,
    /// First, last and oldest frame.
    ts: (i64, i64, i64),
}

impl Incoming {
    fn of(m: Msg) -> Option<Incoming> {
        match m {
            Msg::Block {
                data,
                lead,
                frames,
                ts_first,
                ts_last,
                ts_min,
            } => Some(Incoming {
                data,
                lead,
                frames,
                ts: (ts_first, ts_last, ts_min),
            }),
            _ => None,
        }
    }
}

/// Bytes of frames in the blocks of `batch`.
fn batch_bytes(batch: &[Msg]) -> usize {
    batch
        .iter()
        .map(|m| match m {
            Msg::Block { data, lead, .. } => data.len() - lead,
            _ => 0,
        })
        .sum()
}

impl FileWriter {
    fn run(mut self, rx: Receiver<Msg>) -> SpoolReport {
        let mut last_sync = Instant::now();
        // A message taken while gathering blocks, handled next.
        let mut next: Option<Msg> = None;
        loop {
            let msg = match next.take() {
                Some(m) => Ok(m),
                None => rx.recv_timeout(Duration::from_millis(500)),
            };
            match msg {
                Ok(Msg::Open { name, id }) => self.open(name, id),
                Ok(block @ Msg::Block { .. }) => {
                    // Uncompressed blocks go to the file several at a
                    // time, in one write: those queued, and those that come
                    // within GATHER (fewer, larger requests to the device;
                    // each costs the core a kick of the device, its
                    // completion and a wake-up).
                    let mut batch = vec![block];
                    let mut bytes = STAGED_WRITE.min(batch_bytes(&batch));
                    let until = Instant::now() + GATHER;
                    while self.container.is_none() && bytes < STAGED_WRITE {
                        match rx.recv_deadline(until) {
                            Ok(b @ Msg::Block { .. }) => {
                                batch.push(b);
                                bytes = batch_bytes(&batch);
                            }
                            Ok(other) => {
                                next = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    let backlog = self.backlog(rx.len());
                    let mut blocks: Vec<Incoming> =
                        batch.into_iter().filter_map(Incoming::of).collect();
                    let at = self.blocks(&mut blocks, backlog);
                    let short = self.staging_short();
                    for (b, at) in blocks.into_iter().zip(at) {
                        self.hand_on(b.data, b.lead, b.frames, at, short);
                    }
                }
                Ok(Msg::Close) => self.close(),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            // Once a second: what is written reaches the file even when
            // traffic is light (a crash then loses at most a second), and
            // old files age out.
            if last_sync.elapsed() >= Duration::from_secs(1) {
                last_sync = Instant::now();
                if let Some(c) = &mut self.cur
                    && let Err(e) = c.out.sync_tail()
                {
                    self.fail(e);
                }
                if let Some(r) = &self.retention {
                    r.enforce(now_ns());
                }
            }
        }
        self.close();
        self.report
    }

    fn error(&mut self, what: String) {
        if self.report.error.is_none() {
            self.report.error = Some(what);
        }
    }

    fn open(&mut self, name: String, id: u32) {
        self.close();
        let path = self.dir.join(&name);
        let part = self.dir.join(format!(".{name}.part"));
        let stale = self.take_for_reuse(&name, &part);
        let out = match &stale {
            Some(_) => OutFile::overwrite(&part, self.direct, WRITE_BUFFER, self.reserve),
            None => OutFile::create(&part, self.direct, WRITE_BUFFER, self.reserve),
        };
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                let full = is_full(&e);
                self.error(format!("{}: {e}{}", part.display(), advice(&e)));
                self.shared.failed.store(true, Ordering::Relaxed);
                self.shared.disk_full.store(full, Ordering::Relaxed);
                if full && self.on_full == OnFull::Stop {
                    self.shared.stop_wanted.store(true, Ordering::Relaxed);
                }
                return;
            }
        };
        self.report.direct |= out.is_direct();
        let mut c = Current {
            out,
            part,
            path,
            table: SeekTable::default(),
            info: PcapFileInfo {
                id,
                name,
                ..Default::default()
            },
            ends: VecDeque::new(),
            whole: (0, 0, None),
            stale,
        };
        let header = self.header;
        let written = match self.container {
            None => c.out.append(&header).map(|_| header.len()),
            Some(container) => {
                self.frame.clear();
                let method = match container {
                    Container::Zstd => Method::Stored,
                    Container::Lz4 => Method::Lz4,
                };
                self.encoder
                    .encode(method, &header, &mut self.frame)
                    .and_then(|n| c.out.append(&self.frame).map(|_| n))
            }
        };
        match written {
            Ok(n) => {
                if self.container.is_some() {
                    c.table.push(n as u32, header.len() as u32);
                }
                c.info.bytes = PCAP_HEADER_LEN;
                c.ends.push_back((c.out.len(), 0, None));
                self.cur = Some(c);
                self.shared.failed.store(false, Ordering::Relaxed);
                self.shared.disk_full.store(false, Ordering::Relaxed);
                if let Some(r) = &self.retention {
                    r.open_bytes_changed(n as i64);
                }
            }
            Err(e) => {
                self.cur = Some(c);
                self.fail(e);
            }
        }
    }

    /// With a ring (a size limit and a rotation size), the oldest finished
    /// file when the new one would not fit beside it: renamed to `part`
    /// and written over. The marker goes to disk first; anything that
    /// fails on the way deletes the old file instead, as retention would.
    fn take_for_reuse(&mut self, name: &str, part: &std::path::Path) -> Option<(i64, PathBuf)> {
        let r = self.retention.as_ref()?;
        let (old, file) = r.take_for_reuse(self.reserve?, name)?;
        let marker = OverwriteMarker::path_for(part);
        let reused = (|| -> io::Result<i64> {
            let until = file
                .ts_last
                .ok_or_else(|| io::Error::other("no frames to be newer than"))?;
            OverwriteMarker {
                stale_until_ns: until,
                file: file.clone(),
            }
            .write(part)?;
            if self.container.is_some() {
                // Its seek table would describe the old frames to a reader
                // of a killed part file.
                let f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&old)?;
                let len = f.metadata()?.len();
                if let Some(t) = SeekTable::read_footer(&f, len)? {
                    f.set_len(t.compressed_len())?;
                }
            }
            std::fs::rename(&old, part)?;
            Ok(until)
        })();
        match reused {
            Ok(until) => Some((until, marker)),
            Err(_) => {
                let _ = std::fs::remove_file(&old);
                let _ = std::fs::remove_file(&marker);
                r.reuse_failed(&file.name);
                None
            }
        }
    }

    /// The file no longer holds old content past what is written: its
    /// marker goes.
    fn forget_stale(stale: &mut Option<(i64, PathBuf)>) {
        if let Some((_, marker)) = stale.take() {
            let _ = std::fs::remove_file(marker);
        }
    }

    /// How far behind the frames' consumers are, for `--compress auto`'s
    /// ladder ([`auto_method`]): the blocks queued for this writer as a
    /// share of the staging pool, or the reader's, whichever is further.
    /// The reader's blocks count as a share of its own budget, scaled so
    /// that a reader holding all it may puts the ladder on its last rung
    /// (stored): on a busy core, records fall behind for the CPU that
    /// compression takes, and compression gives way first, as it does for
    /// the capture.
    fn backlog(&self, queued: usize) -> f64 {
        let writer = queued as f64 / self.free.max.max(1) as f64;
        let reader = self.hand_on.as_ref().map_or(0.0, |h| {
            let held = h.held.load(Ordering::Relaxed) as f64;
            let stored_from =
                crate::seekable::AUTO_LADDER[crate::seekable::AUTO_LADDER.len() - 2].1;
            held / h.most.max(1) as f64 * stored_from
        });
        writer.max(reader)
    }

    /// Whether staging is running short: the blocks free or still to be
    /// made are fewer than twice what the reader may hold. The reader then
    /// gets no block (it is told what it missed), so that it never holds
    /// memory the capture needs. Short of that it gets every block, even
    /// while this writer has a backlog: the blocks are written already and
    /// the reader runs on what CPU is left.
    fn staging_short(&self) -> bool {
        let Some(h) = &self.hand_on else {
            return false;
        };
        let room = self.free.max.saturating_sub(self.free.made()) + self.free.len();
        room < 2 * h.most.max(1)
    }

    /// A written block goes to the reader, or (the reader holds too many,
    /// staging runs short, or there is none) back to the pool; a reader that misses it is told
    /// which span of which file it missed.
    fn hand_on(
        &mut self,
        data: AlignedBuf,
        lead: usize,
        frames: u64,
        at: Option<(u32, u64)>,
        short: bool,
    ) {
        if let (Some(h), Some((file_id, offset))) = (&self.hand_on, at) {
            if !short && h.held.load(Ordering::Relaxed) < h.most {
                h.held.fetch_add(1, Ordering::Relaxed);
                let b = StagedBlock {
                    data: Some(data),
                    lead,
                    file_id,
                    offset,
                    frames,
                    home: self.free.clone(),
                    held: h.held.clone(),
                };
                // A reader that has gone drops the block: back to the pool.
                let _ = h.tx.send(Staged::Block(b));
                return;
            }
            let _ = h.tx.send(Staged::Missed(MissedSpan {
                file_id,
                from: offset,
                to: offset + (data.len() - lead) as u64,
                frames,
            }));
        }
        self.free.give(data);
    }

    /// Appends a block to the current file; where it went (the file's id
    /// and the block's offset in its pcap stream) if it was written.
    /// Appends blocks to the current file (compressed one by one, or
    /// uncompressed in one write); where each went, as [`Self::block`].
    fn blocks(&mut self, blocks: &mut [Incoming], backlog: f64) -> Vec<Option<(u32, u64)>> {
        if self.container.is_some() || blocks.len() == 1 {
            return (blocks.iter_mut())
                .map(|b| self.block(&mut b.data, b.lead, b.frames, b.ts, backlog))
                .collect();
        }
        let frames: u64 = blocks.iter().map(|b| b.frames).sum();
        let Some(c) = &mut self.cur else {
            self.report.frames_lost += frames;
            self.shared.frames_lost.fetch_add(frames, Ordering::Relaxed);
            return blocks.iter().map(|_| None).collect();
        };
        let oldest = blocks.iter().map(|b| b.ts.2).min().unwrap_or(i64::MAX);
        if c.stale.as_ref().is_some_and(|(until, _)| oldest <= *until) {
            // As in `block`.
            if let Err(e) = c.out.drop_stale() {
                self.fail(e);
                return blocks.iter().map(|_| None).collect();
            }
            Self::forget_stale(&mut c.stale);
        }
        let before = c.out.len();
        let mut refs: Vec<(&mut AlignedBuf, usize)> =
            blocks.iter_mut().map(|b| (&mut b.data, b.lead)).collect();
        if let Err(e) = c.out.append_staged(&mut refs) {
            // The blocks are lost with the file's unwritten tail.
            c.info.frames += frames;
            self.fail(e);
            return blocks.iter().map(|_| None).collect();
        }
        let mut at = Vec::with_capacity(blocks.len());
        let mut end = before;
        for b in blocks.iter() {
            let len = (b.data.len() - b.lead) as u64;
            at.push(Some((c.info.id, c.info.bytes.max(PCAP_HEADER_LEN))));
            end += len;
            c.info.frames += b.frames;
            c.info.bytes += len;
            c.info.ts_first.get_or_insert(b.ts.0);
            c.info.ts_last = Some(b.ts.1);
            c.ends.push_back((end, c.info.frames, c.info.ts_last));
        }
        Self::settle_ends(c);
        let grown = c.out.len() - before;
        self.shared.bytes_in.fetch_add(grown, Ordering::Relaxed);
        self.shared.bytes_out.fetch_add(grown, Ordering::Relaxed);
        if let Some(r) = &self.retention {
            r.open_bytes_changed(grown as i64);
        }
        at
    }

    /// Block ends now on disk are settled: what a failed file is cut back to.
    fn settle_ends(c: &mut Current) {
        while let Some(&(end, f, t)) = c.ends.front() {
            if end > c.out.on_disk() {
                break;
            }
            c.whole = (end, f, t);
            c.ends.pop_front();
        }
    }

    fn block(
        &mut self,
        block: &mut AlignedBuf,
        lead: usize,
        frames: u64,
        ts: (i64, i64, i64),
        backlog: f64,
    ) -> Option<(u32, u64)> {
        let Some(c) = &mut self.cur else {
            self.report.frames_lost += frames;
            self.shared.frames_lost.fetch_add(frames, Ordering::Relaxed);
            return None;
        };
        if c.stale.as_ref().is_some_and(|(until, _)| ts.2 <= *until) {
            // A frame as old as the overwritten file's newest (a clock
            // stepped back): recovery could not tell them apart, so the old
            // content goes now.
            if let Err(e) = c.out.drop_stale() {
                self.fail(e);
                return None;
            }
            Self::forget_stale(&mut c.stale);
        }
        let before = c.out.len();
        let at = (c.info.id, c.info.bytes.max(PCAP_HEADER_LEN));
        let len = block.len() - lead;
        let result = match self.container {
            None => c.out.append_staged(&mut [(block, lead)]).map(|_| None),
            Some(_) => {
                let data = block.filled_from(lead);
                let method = match self.codec {
                    Codec::Zstd(l) => Method::Zstd(l),
                    Codec::Lz4 => Method::Lz4,
                    _ => auto_method(backlog),
                };
                self.frame.clear();
                self.encoder
                    .encode(method, data, &mut self.frame)
                    .and_then(|n| c.out.append(&self.frame).map(|_| Some((n, method))))
            }
        };
        match result {
            Ok(m) => {
                if let Some((n, method)) = m {
                    c.table.push(n as u32, len as u32);
                    *c.info.methods.entry(method.name()).or_default() += 1;
                    self.shared
                        .method
                        .store(method.code() as i32, Ordering::Relaxed);
                }
                let grown = c.out.len() - before;
                c.info.frames += frames;
                c.info.bytes += len as u64;
                if c.info.ts_first.is_none() {
                    c.info.ts_first = Some(ts.0);
                }
                c.info.ts_last = Some(ts.1);
                c.ends
                    .push_back((c.out.len(), c.info.frames, c.info.ts_last));
                Self::settle_ends(c);
                self.shared
                    .bytes_in
                    .fetch_add(len as u64, Ordering::Relaxed);
                self.shared.bytes_out.fetch_add(grown, Ordering::Relaxed);
                if let Some(r) = &self.retention {
                    r.open_bytes_changed(grown as i64);
                }
                Some(at)
            }
            Err(e) => {
                // The block is lost with the file's unwritten tail.
                c.info.frames += frames;
                self.fail(e);
                None
            }
        }
    }

    /// A write failed: the file is cut back to its last whole block on
    /// disk and closed validly; the frames after it are counted lost.
    fn fail(&mut self, e: io::Error) {
        let Some(mut c) = self.cur.take() else { return };
        let mut stale = c.stale.take();
        let full = is_full(&e);
        self.error(format!("{}: {e}{}", c.part.display(), advice(&e)));
        self.shared.failed.store(true, Ordering::Relaxed);
        self.shared.disk_full.store(full, Ordering::Relaxed);
        if full && self.on_full == OnFull::Stop {
            self.shared.stop_wanted.store(true, Ordering::Relaxed);
        }
        let (len, frames, ts_last) = c.whole;
        let lost = c.info.frames - frames;
        self.report.frames_lost += lost;
        self.shared.frames_lost.fetch_add(lost, Ordering::Relaxed);
        let open_len = c.out.len();
        let mut info = c.info;
        let mut table = c.table;
        table
            .frames
            .retain(|f| f.compressed_at + f.compressed_len as u64 <= len);
        info.frames = frames;
        info.bytes = table.decompressed_len().max(PCAP_HEADER_LEN);
        if self.container.is_none() {
            info.bytes = len;
        }
        info.ts_last = ts_last;
        if frames == 0 {
            info.ts_first = None;
        }
        if frames == 0 {
            // Not one whole frame on disk: no file is better than an empty
            // or headless one.
            drop(c.out);
            let _ = std::fs::remove_file(&c.part);
            Self::forget_stale(&mut stale);
            if let Some(r) = &self.retention {
                r.open_bytes_changed(-(open_len as i64));
            }
            return;
        }
        let closed = c.out.truncate_and_close(len).and_then(|len| {
            let mut stored = len;
            if self.container.is_some() {
                // The seek table, if there is room; readers walk the frames
                // without it.
                let t = table.to_bytes();
                let f = std::fs::OpenOptions::new().write(true).open(&c.part)?;
                use std::os::unix::fs::FileExt;
                match f.write_all_at(&t, len).and_then(|_| f.sync_data()) {
                    Ok(()) => stored += t.len() as u64,
                    Err(_) => f.set_len(len)?,
                }
            }
            std::fs::rename(&c.part, &c.path)?;
            Ok(stored)
        });
        if closed.is_ok() {
            Self::forget_stale(&mut stale);
        }
        if let Some(r) = &self.retention {
            r.open_bytes_changed(-(open_len as i64));
        }
        match closed {
            Ok(stored) => {
                info.stored_bytes = stored;
                self.finished(c.path, info);
            }
            Err(e) => {
                let what = format!("{}: {e}", c.part.display());
                self.error(what);
            }
        }
    }

    fn close(&mut self) {
        let Some(mut c) = self.cur.take() else { return };
        let open_len = c.out.len();
        if self.container.is_some() {
            let t = c.table.to_bytes();
            if let Err(e) = c.out.append(&t) {
                self.cur = Some(c);
                self.fail(e);
                return;
            }
        }
        match c.out.finish() {
            Ok(stored) => {
                c.info.digest = Some(c.out.digest());
                if let Some(r) = &self.retention {
                    r.open_bytes_changed(-(open_len as i64));
                }
                match std::fs::rename(&c.part, &c.path) {
                    Ok(()) => {
                        Self::forget_stale(&mut c.stale);
                        c.info.stored_bytes = stored;
                        self.finished(c.path, c.info);
                    }
                    Err(e) => self.error(format!("{}: {e}", c.part.display())),
                }
            }
            Err(e) => {
                // finish() left the file at what is on disk; cut it back to
                // whole blocks.
                self.cur = Some(c);
                self.fail(e);
            }
        }
    }

    fn finished(&mut self, path: PathBuf, info: PcapFileInfo) {
        if let Some(r) = &self.retention {
            r.file_closed(
                path,
                RemovedFile {
                    id: info.id,
                    name: info.name.clone(),
                    frames: info.frames,
                    stored_bytes: info.stored_bytes,
                    ts_first: info.ts_first,
                    ts_last: info.ts_last,
                    reason: String::new(),
                    overwritten_by: None,
                },
            );
            r.enforce(now_ns());
        }
        self.shared
            .finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(info.clone());
        self.report.files.push(info);
    }
}

fn is_full(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
}

fn advice(e: &io::Error) -> &'static str {
    if is_full(e) {
        " (the disk is full: free space, or bound the capture with --max-disk or --max-age)"
    } else {
        ""
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seekable::SeekableFile;
    use crate::{ReaderOptions, TraceReader};
    use std::io::Read;
    use std::path::Path;

    fn opts(dir: &Path) -> SpoolOptions {
        SpoolOptions {
            dir: dir.to_path_buf(),
            prefix: "w000".into(),
            single_name: None,
            link: LinkType::ETHERNET,
            snaplen: 100,
            rotate_bytes: Some(10_000),
            rotate_ns: Some(1_000_000_000),
            block_bytes: 4096,
            blocks: 8,
            first_file_id: 7,
            codec: Codec::None,
            direct: false,
            on_full: OnFull::Stop,
            retention: None,
            hand_on: None,
        }
    }

    /// Every staged frame reaches the reader once: in a block handed on
    /// (at the offset `append` gave it) or in a span it missed, which
    /// holds exactly the frames left out. Blocks the reader drops go back
    /// to the pool.
    #[test]
    fn hands_on_written_blocks_and_names_what_the_reader_missed() {
        let dir = std::env::temp_dir().join(format!("weir-spool-handon-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (hand_on, rx) = HandOn::new(2);
        let mut o = opts(&dir);
        o.hand_on = Some(hand_on);
        let (mut s, writer) = spool(o).unwrap();
        let mut placed = Vec::new();
        for i in 0..300u32 {
            let frame: Vec<u8> = (0..150).map(|b| (b * 3 + i) as u8).collect();
            let ts = 1_000_000_000 + i as i64 * 1_000_000;
            while s.backlog() > 4 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            placed.push((s.append(ts, 150 + i, &frame).expect("staged"), ts, frame));
        }
        s.finish();
        let report = writer.join().unwrap();
        assert!(report.error.is_none());
        // The reader read nothing while the frames were staged: it holds
        // two blocks, and missed the rest.
        let mut seen = std::collections::BTreeMap::new();
        let (mut blocks, mut missed) = (Vec::new(), Vec::new());
        for m in rx.try_iter() {
            match m {
                Staged::Block(b) => {
                    for f in b.frames() {
                        seen.insert(
                            (b.file_id, f.offset),
                            (f.ts_ns, f.wire_len, f.data.to_vec()),
                        );
                    }
                    blocks.push(b);
                }
                Staged::Missed(span) => missed.push(span),
            }
        }
        assert_eq!(blocks.len(), 2, "held blocks");
        let in_blocks: u64 = blocks.iter().map(|b| b.frames).sum();
        assert_eq!(in_blocks, seen.len() as u64);
        let missed_frames: u64 = missed.iter().map(|m| m.frames).sum();
        assert_eq!(in_blocks + missed_frames, 300);
        for ((id, offset), ts, frame) in &placed {
            let i = ts - 1_000_000_000;
            match seen.get(&(*id, *offset)) {
                Some((t, wire, data)) => {
                    assert_eq!((t, *wire as i64), (ts, 150 + i / 1_000_000));
                    assert_eq!(&data[..], &frame[..100]);
                }
                None => assert!(
                    missed
                        .iter()
                        .any(|m| m.file_id == *id && (m.from..m.to).contains(offset)),
                    "frame at {id}:{offset} neither handed on nor missed"
                ),
            }
        }
        // The spans are where the frames are in the files.
        for m in &missed {
            let info = report.files.iter().find(|f| f.id == m.file_id).unwrap();
            let bytes = std::fs::read(dir.join(&info.name)).unwrap();
            let mut at = m.from as usize;
            let mut n = 0;
            while at < m.to as usize {
                at += 16 + u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
                n += 1;
            }
            assert_eq!((at as u64, n), (m.to, m.frames));
        }
        drop(blocks);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// With `--compress auto`, a reader holding blocks counts as a backlog:
    /// the writer compresses hard while the reader keeps up and stores
    /// blocks once it holds all it may, giving the core back to it.
    #[test]
    fn a_reader_falling_behind_makes_auto_compression_give_way() {
        let dir = std::env::temp_dir().join(format!("weir-spool-auto-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (hand_on, rx) = HandOn::new(4);
        let mut o = opts(&dir);
        o.hand_on = Some(hand_on);
        o.codec = Codec::Auto;
        o.rotate_bytes = None;
        o.rotate_ns = None;
        // A pool so large that the writer's own queue stays on the first
        // rung: what moves the ladder is the reader.
        o.blocks = 1024;
        let (mut s, writer) = spool(o).unwrap();
        for i in 0..2000u32 {
            let frame: Vec<u8> = (0..100).map(|b| (b * 7 + i) as u8).collect();
            // (The blocks the reader holds count in the backlog.)
            while s.backlog() > 5 {
                std::thread::sleep(Duration::from_millis(1));
            }
            s.append(1_000_000_000 + i as i64, 100, &frame)
                .expect("staged");
        }
        s.finish();
        let report = writer.join().unwrap();
        assert!(report.error.is_none());
        let methods = &report.files[0].methods;
        assert!(
            methods.get("zstd:6").is_some_and(|n| *n >= 1),
            "{methods:?}"
        );
        assert!(
            methods.get("stored").is_some_and(|n| *n >= 20),
            "{methods:?}"
        );
        let held = rx
            .try_iter()
            .filter(|m| matches!(m, Staged::Block(_)))
            .count();
        assert_eq!(held, 4);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn rotates_and_points_records_at_their_frames() {
        let dir = std::env::temp_dir().join(format!("weir-spool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (mut s, writer) = spool(opts(&dir)).unwrap();
        let mut placed = Vec::new();
        for i in 0..500u32 {
            let frame: Vec<u8> = (0..150).map(|b| (b + i) as u8).collect();
            let ts = 1_000_000_000 + i as i64 * 5_000_000; // 200 frames a second
            while s.backlog() > 6 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            placed.push((ts, s.append(ts, 150, &frame).expect("staged"), frame));
        }
        s.finish();
        let report = writer.join().unwrap();
        assert!(report.error.is_none());
        assert!(
            report.files.len() >= 5,
            "rotated by size: {} files",
            report.files.len()
        );
        assert_eq!(report.files.iter().map(|f| f.frames).sum::<u64>(), 500);
        assert!(report.files.iter().all(|f| f.bytes <= 10_000));
        for (ts, (id, offset), frame) in &placed {
            let info = report.files.iter().find(|f| f.id == *id).unwrap();
            let bytes = std::fs::read(dir.join(&info.name)).unwrap();
            let at = *offset as usize;
            let cap = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            assert_eq!(cap, 100, "snap length");
            let sec = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as i64;
            let ns = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as i64;
            assert_eq!(sec * 1_000_000_000 + ns, *ts);
            assert_eq!(&bytes[at + 16..at + 16 + cap], &frame[..100]);
        }
        // Every file reads back whole with weir's own reader.
        for f in &report.files {
            let mut r = TraceReader::open(dir.join(&f.name), ReaderOptions::default()).unwrap();
            let mut n = 0;
            while let Some(c) = r.next_chunk().unwrap() {
                n += c.frames.len() as u64;
            }
            assert_eq!(n, f.frames);
        }
        assert!(
            std::fs::read_dir(&dir).unwrap().all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".part"))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// With a size limit the files form a ring: once it is full every new
    /// file is an old one written over in place (the same inodes, no file
    /// ever created again), each ends exactly at its own frames, and the
    /// files overwritten are accounted as removed, naming their successor.
    #[test]
    fn a_full_ring_writes_over_its_oldest_file_in_place() {
        use std::os::unix::fs::DirEntryExt;
        for codec in [Codec::None, Codec::Zstd(1)] {
            let dir = std::env::temp_dir().join(format!(
                "weir-spool-ring-{}-{}",
                std::process::id(),
                codec.to_string().replace(':', "")
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let retention = Arc::new(Retention::new(Some(256 << 10), None));
            let mut o = opts(&dir);
            o.snaplen = 65535;
            o.codec = codec;
            o.rotate_bytes = Some(64 << 10);
            o.block_bytes = 16 << 10;
            o.retention = Some(retention.clone());
            let (mut s, writer) = spool(o).unwrap();
            // Inodes as the directory lists them (no stat: the writer renames
            // files meanwhile).
            let inodes = || -> std::collections::BTreeSet<u64> {
                std::fs::read_dir(&dir)
                    .unwrap()
                    .flatten()
                    .filter(|e| !e.file_name().to_string_lossy().ends_with(".overwrites"))
                    .map(|e| e.ino())
                    .collect()
            };
            // The ring's files: what the directory held over the first
            // reuses (a listing may miss a file being renamed).
            let mut ring: Option<std::collections::BTreeSet<u64>> = None;
            let mut t = 1_000_000_000i64;
            for i in 0..40_000u32 {
                // Content that differs per frame, so compression keeps the
                // files near their rotation size.
                let frame: Vec<u8> = (0..200u32).map(|b| (b * 31 + i * 7) as u8).collect();
                t += 1_000;
                while s.backlog() > 2 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                s.append(t, 200, &frame).expect("staged");
                let reused = retention.removed().0.len();
                if (2..6).contains(&reused) {
                    ring.get_or_insert_with(Default::default).extend(inodes());
                }
            }
            s.finish();
            let report = writer.join().unwrap();
            assert!(report.error.is_none(), "{codec}: {:?}", report.error);
            let ring = ring.expect("the ring filled");
            let now = inodes();
            assert!(
                now.is_subset(&ring),
                "{codec}: files written after the ring filled are its old ones: {now:?} vs {ring:?}"
            );
            let (removed, errors) = retention.removed();
            assert!(errors.is_empty());
            assert!(removed.len() > 20, "{codec}: {} removed", removed.len());
            let overwritten = removed
                .iter()
                .filter(|f| f.overwritten_by.is_some())
                .count();
            assert_eq!(
                overwritten,
                removed.len(),
                "{codec}: every removal was a reuse"
            );
            // What is kept is exactly its frames: no old tail, no marker.
            let kept: Vec<_> = report
                .files
                .iter()
                .filter(|f| !removed.iter().any(|r| r.id == f.id))
                .collect();
            assert!(!kept.is_empty());
            for f in &kept {
                let path = dir.join(&f.name);
                assert_eq!(std::fs::metadata(&path).unwrap().len(), f.stored_bytes);
                let scan = crate::repair::scan_pcap(&path).unwrap();
                assert!(!scan.torn(), "{codec}: {}", f.name);
                assert_eq!(scan.frames, f.frames, "{codec}: {}", f.name);
                assert_eq!((scan.ts_first, scan.ts_last), (f.ts_first, f.ts_last));
            }
            let total: u64 = kept.iter().map(|f| f.frames).sum::<u64>()
                + removed.iter().map(|f| f.frames).sum::<u64>();
            assert_eq!(total, 40_000, "{codec}");
            assert!(
                std::fs::read_dir(&dir)
                    .unwrap()
                    .flatten()
                    .all(|e| !e.file_name().to_string_lossy().starts_with('.')),
                "{codec}: no part or marker left"
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    /// Waits (at most 30 s) until `cond` holds.
    fn eventually(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cond() {
            assert!(Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn staging_grows_while_the_writer_is_behind_and_shrinks_after() {
        let free = FreeBlocks::new(64, block_capacity(4096));
        for _ in 0..4 {
            free.add(staging_block(4096));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let g = Grower {
            free: free.clone(),
            bytes: 4096,
            ready: 4,
            shrink_after: Duration::from_millis(50),
            stop: stop.clone(),
        };
        // A writer that keeps up: the pool stays as it is.
        let h = std::thread::spawn(move || g.run());
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(free.made(), 4);
        // The writer holds every block: more are made, up to the most.
        let mut held = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while free.made() < 64 {
            assert!(Instant::now() < deadline, "staging did not grow");
            if let (Some(b), _) = free.take() {
                held.push(b);
            }
            h.thread().unpark();
            std::thread::yield_now();
        }
        assert_eq!(free.made(), 64);
        // It caught up: given back down to what was ready.
        for b in held {
            free.give(b);
        }
        eventually("staging given back", || free.made() == 4);
        assert_eq!(free.len(), 4);
        stop.store(true, Ordering::Relaxed);
        h.thread().unpark();
        h.join().unwrap();
    }

    #[test]
    fn drops_and_counts_when_the_writer_is_behind() {
        let dir = std::env::temp_dir().join(format!("weir-spool-drop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut o = opts(&dir);
        o.rotate_bytes = None;
        o.rotate_ns = None;
        o.blocks = 2;
        let (mut s, writer) = spool(o).unwrap();
        let frame = [0u8; 1000];
        let mut kept = 0u64;
        for i in 0..20_000 {
            if s.append(i, 1000, &frame).is_some() {
                kept += 1;
            }
        }
        assert_eq!(kept + s.dropped, 20_000);
        s.finish();
        let report = writer.join().unwrap();
        assert_eq!(report.files[0].frames, kept);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn compressed_files_hold_the_same_pcap_and_a_seek_table() {
        let dir = std::env::temp_dir().join(format!("weir-spool-zst-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let frames: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| {
                (0..(60 + i % 1400))
                    .map(|b| (b * (i % 7 + 1)) as u8)
                    .collect()
            })
            .collect();
        let mut plain_bytes = None;
        for codec in [Codec::None, Codec::Zstd(3), Codec::Lz4, Codec::Auto] {
            let mut o = opts(&dir);
            o.prefix = format!("{codec}").replace(':', "");
            o.snaplen = 2000;
            o.rotate_bytes = None;
            o.rotate_ns = None;
            o.blocks = 64;
            o.codec = codec;
            o.direct = true;
            let (mut s, writer) = spool(o).unwrap();
            let mut placed = Vec::new();
            for (i, f) in frames.iter().enumerate() {
                while s.backlog() > 60 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                placed.push(s.append(i as i64 * 1000, f.len() as u32, f).unwrap());
            }
            s.finish();
            let report = writer.join().unwrap();
            assert!(report.error.is_none(), "{codec}: {:?}", report.error);
            let info = &report.files[0];
            assert_eq!(info.frames, 3000);
            let path = dir.join(&info.name);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), info.stored_bytes);
            let pcap = match codec.container() {
                None => std::fs::read(&path).unwrap(),
                Some(_) => {
                    assert!(info.name.ends_with(codec.container().unwrap().suffix()));
                    let f = SeekableFile::open(&path).unwrap().unwrap();
                    assert!(f.had_table, "{codec}: seek table");
                    let mut v = Vec::new();
                    f.into_reader().read_to_end(&mut v).unwrap();
                    v
                }
            };
            assert_eq!(pcap.len() as u64, info.bytes);
            // Records' offsets point into the decompressed stream, and
            // random access finds them there.
            let random = crate::fetch::PcapFile::open(&path).unwrap().unwrap();
            let mut got = Vec::new();
            for ((_, off), f) in placed.iter().zip(&frames).step_by(97) {
                let at = *off as usize + 16;
                assert_eq!(&pcap[at..at + f.len()], &f[..]);
                random.read_at(*off, &mut got).unwrap();
                assert_eq!(&got, f, "{codec}: read_at {off}");
            }
            // And the sequential reader reads every frame.
            let mut r = TraceReader::open(&path, ReaderOptions::default()).unwrap();
            let mut n = 0;
            while let Some(c) = r.next_chunk().unwrap() {
                n += c.frames.len();
            }
            assert_eq!(n, frames.len(), "{codec}: TraceReader");
            match &plain_bytes {
                None => plain_bytes = Some(pcap),
                Some(p) => assert_eq!(p, &pcap, "{codec}: same pcap as uncompressed"),
            }
            if codec == Codec::Zstd(3) {
                let all = zstd::stream::decode_all(&std::fs::read(&path).unwrap()[..]).unwrap();
                assert_eq!(Some(&all), plain_bytes.as_ref());
                assert_eq!(
                    info.methods.get("zstd:3"),
                    Some(&(info.methods.values().sum()))
                );
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
