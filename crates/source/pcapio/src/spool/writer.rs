//! The file writer thread: takes staged blocks, compresses them (or not,
//! per `--compress`), appends them to the current file and hands them on
//! or back; opens, closes and rotates files, writes over the oldest one of
//! a full ring, and cuts a file back to its last whole block when a write
//! fails.

use std::collections::VecDeque;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use wire::LinkType;

use super::hand_on::HandOn;
use super::pool::FreeBlocks;
use super::{Msg, OnFull, PcapFileInfo, SpoolOptions, SpoolReport, SpoolShared};
use crate::outfile::{AlignedBuf, OutFile};
use crate::repair::OverwriteMarker;
use crate::retention::{RemovedFile, Retention};
use crate::seekable::{Codec, Container, FrameEncoder, Method, SeekTable, auto_method};
use crate::writer::PCAP_HEADER_LEN;

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
pub(super) struct FileWriter {
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
    /// The writer of a spool with `opts`, publishing to `shared` and
    /// giving blocks back to `free`.
    pub(super) fn new(
        opts: &SpoolOptions,
        shared: Arc<SpoolShared>,
        free: FreeBlocks,
    ) -> FileWriter {
        FileWriter {
            dir: opts.dir.clone(),
            header: header_bytes(opts.link, opts.snaplen),
            codec: opts.codec,
            container: opts.codec.container(),
            direct: opts.direct,
            reserve: opts.rotate_bytes,
            on_full: opts.on_full,
            retention: opts.retention.clone(),
            shared,
            free,
            encoder: FrameEncoder::new(),
            frame: Vec::new(),
            cur: None,
            report: SpoolReport::default(),
            hand_on: opts.hand_on.clone(),
        }
    }

    /// Handles the spool's messages until the capture side goes; what was
    /// written, for the spool's handle.
    pub(super) fn run(mut self, rx: Receiver<Msg>) -> SpoolReport {
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
                    r.enforce(crate::retention::wall_clock_ns());
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
                self.error(format!("{}: {e}{}", part.display(), advice(&e)));
                self.shared.writer_failed(is_full(&e), self.on_full);
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
                self.shared.writer_opened();
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
    /// share of the staging pool, or the reader's ([`HandOn::backlog`]),
    /// whichever is further.
    fn backlog(&self, queued: usize) -> f64 {
        let writer = queued as f64 / self.free.max().max(1) as f64;
        let reader = self.hand_on.as_ref().map_or(0.0, HandOn::backlog);
        writer.max(reader)
    }

    /// Whether staging runs short for the reader ([`HandOn::staging_short`]).
    fn staging_short(&self) -> bool {
        (self.hand_on.as_ref()).is_some_and(|h| h.staging_short(&self.free))
    }

    /// A written block goes to the reader ([`HandOn::pass`]), or, when
    /// there is none or the block was not written, back to the pool.
    fn hand_on(
        &mut self,
        data: AlignedBuf,
        lead: usize,
        frames: u64,
        at: Option<(u32, u64)>,
        short: bool,
    ) {
        match (&self.hand_on, at) {
            (Some(h), Some(at)) => h.pass(&self.free, data, lead, frames, at, short),
            _ => self.free.give(data),
        }
    }

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

    /// Appends a block to the current file; where it went (the file's id
    /// and the block's offset in its pcap stream) if it was written.
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
        self.error(format!("{}: {e}{}", c.part.display(), advice(&e)));
        self.shared.writer_failed(is_full(&e), self.on_full);
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
            r.enforce(crate::retention::wall_clock_ns());
        }
        self.shared.file_finished(info.clone());
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

fn header_bytes(link: LinkType, snaplen: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&(link.0 as u32).to_le_bytes());
    h
}
