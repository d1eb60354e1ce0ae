//! The worker's side of a spool: frames staged into blocks on the capture
//! thread, each frame's file and offset decided as it is staged.

use std::sync::Arc;
use std::time::Duration;

use super::grower::{Grower, GrowerHandle};
use super::pool::FreeBlocks;
use super::{Msg, OnFull, PcapFileInfo, SpoolOptions, SpoolShared};
use crate::outfile::{ALIGN, AlignedBuf};
use crate::seekable::Container;
use crate::writer::{PCAP_HEADER_LEN, PCAP_RECORD_HEADER_LEN};

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
    /// The thread growing the staging pool, stopped when the spool goes.
    grower: GrowerHandle,
    /// Wait for the writer to return a block rather than drop a frame
    /// ([`Spool::set_patient`]).
    patient: bool,
}

/// How long a patient spool waits for a free block before it drops.
const PATIENCE: Duration = Duration::from_millis(20);

impl Drop for Spool {
    fn drop(&mut self) {
        self.grower.stop();
    }
}

impl Spool {
    pub(super) fn new(
        opts: SpoolOptions,
        tx: crossbeam_channel::Sender<Msg>,
        free: FreeBlocks,
        shared: Arc<SpoolShared>,
        grower: GrowerHandle,
    ) -> Spool {
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
            grower,
            patient: false,
        }
    }

    /// Stages one frame. Returns the frame's (file id, offset), or `None` if
    /// it was dropped for want of staging memory.
    #[inline]
    pub fn append(&mut self, ts_ns: i64, wire_len: u32, frame: &[u8]) -> Option<(u32, u64)> {
        let cap = frame.len().min(self.opts.snaplen as usize);
        let need = PCAP_RECORD_HEADER_LEN as usize + cap;
        if self.shared.has_failed() {
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
            if left < Grower::low_water(made) && made < self.free.max() {
                self.grower.wake();
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
