//! The worker loop: blocks from the ring, each frame to the pcap spool
//! and the records; the hand-over to a full-size ring; the drain at the end.
//!
//! One round of the loop: take the full-size ring if it has come
//! ([`WorkerLoop::take_handover`]); once told to stop, close the rings'
//! doors ([`WorkerLoop::close_doors`]); read a block, each frame to the
//! sinks ([`WorkerLoop::read_block`], the per-frame path); move to the
//! full-size ring once the first one is drained; the sinks' timers
//! ([`WorkerLoop::tick`]); at the end, drain a full-size ring handed over
//! late ([`WorkerLoop::drain_next`]), then close the sinks
//! ([`WorkerLoop::finish`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use capture::ring::RxRing;
use pcapio::spool::{Spool, SpoolReport};

use super::disk::DiskWatch;
use super::records::Records;
use super::rings::Handover;
use super::start::SpoolAndWriter;
use super::{Counters, Slot};
use crate::worker::{FrameMeta, Worker, WorkerDone};

pub(super) struct WorkerOut {
    /// The ring read last, and any it took over from.
    pub(super) rings: Vec<RxRing>,
    pub(super) records: Option<WorkerDone>,
    pub(super) spool: Option<JoinHandle<SpoolReport>>,
    /// The records thread (with pcap), which ends after the pcap writer.
    pub(super) records_thread: Option<JoinHandle<Records>>,
    pub(super) error: Option<String>,
}

pub(super) struct WorkerCtx {
    pub(super) slot: Slot,
    /// The full-size ring to come.
    pub(super) handover: Option<Arc<Handover>>,
    pub(super) spool: Option<SpoolAndWriter>,
    /// Records made on this thread: a capture without pcap.
    pub(super) records: Option<Worker>,
    pub(super) records_thread: Option<JoinHandle<Records>>,
    pub(super) disk: DiskWatch,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) claimed: Arc<AtomicU64>,
    pub(super) limit: Option<u64>,
}

/// The per-worker loop: blocks from the ring, frames to the sinks.
pub(super) fn run_worker(ctx: WorkerCtx) -> WorkerOut {
    let (mut w, spool_handle, records_thread) = WorkerLoop::new(ctx);
    loop {
        if !w.take_handover() {
            break;
        }
        let stopping = w.stop.load(Ordering::Relaxed);
        if stopping && !w.door_closed && !w.close_doors() {
            break;
        }
        let Some(got) = w.read_block(stopping) else {
            break;
        };
        if got == 0 && w.next_ring_is_due() {
            continue;
        }
        w.tick();
        if stopping && got == 0 && !w.drain_next() {
            break;
        }
    }
    w.finish(spool_handle, records_thread)
}

/// A worker's state through its loop.
struct WorkerLoop {
    slot: Slot,
    handover: Option<Arc<Handover>>,
    spool: Option<Spool>,
    records: Option<Worker>,
    disk: DiskWatch,
    stop: Arc<AtomicBool>,
    claimed: Arc<AtomicU64>,
    limit: Option<u64>,
    c: Arc<Counters>,
    /// Frames that got no record: the disk was full, or records failed.
    records_skipped: u64,
    /// A frame with its VLAN tag put back.
    vlan_buf: Vec<u8>,
    error: Option<String>,
    last_tick: Instant,
    /// The ring takes no more frames: the capture is stopping.
    door_closed: bool,
    ring_blocks: usize,
    /// The wait for a ring's last partial block (its retire timer).
    retire: Duration,
    /// The full-size ring the group deals to now, read once the first
    /// ring is drained; and the rings read before, still checked now and
    /// then for a last block the kernel handed over late.
    next_ring: Option<RxRing>,
    retired: Vec<RxRing>,
}

impl WorkerLoop {
    fn new(
        ctx: WorkerCtx,
    ) -> (
        WorkerLoop,
        Option<JoinHandle<SpoolReport>>,
        Option<JoinHandle<Records>>,
    ) {
        let (spool, spool_handle) = match ctx.spool {
            Some((s, h)) => (Some(s), Some(h)),
            None => (None, None),
        };
        let opts = ctx.slot.ring.options();
        let w = WorkerLoop {
            retire: Duration::from_millis(opts.retire_ms as u64 * 2 + 5),
            ring_blocks: opts.block_count,
            c: ctx.slot.counters.clone(),
            slot: ctx.slot,
            handover: ctx.handover,
            spool,
            records: ctx.records,
            disk: ctx.disk,
            stop: ctx.stop,
            claimed: ctx.claimed,
            limit: ctx.limit,
            records_skipped: 0,
            vlan_buf: Vec::with_capacity(1 << 16),
            error: None,
            last_tick: Instant::now(),
            door_closed: false,
            next_ring: None,
            retired: Vec::new(),
        };
        (w, spool_handle, ctx.records_thread)
    }

    /// Takes the full-size ring once the grower has handed it over;
    /// false when the loop must end (its door would not close).
    fn take_handover(&mut self) -> bool {
        if self.next_ring.is_none()
            && let Some(h) = self.handover.as_ref()
            && let Some(r) = h.take()
        {
            h.settle(&self.slot.ring, &r);
            if self.door_closed && !close_door(&r, &mut self.error) {
                self.retired.push(r);
                return false;
            }
            self.next_ring = Some(r);
        }
        true
    }

    /// Drain what a ring holds, not what keeps arriving: under steady
    /// traffic the ring would never be empty. False when a door would not
    /// close.
    fn close_doors(&mut self) -> bool {
        self.door_closed = true;
        let next_ok = (self.next_ring.as_ref()).is_none_or(|r| close_door(r, &mut self.error));
        next_ok && close_door(&self.slot.ring, &mut self.error)
    }

    /// One block from the ring, each frame to the sinks (and a late block
    /// of a ring read before); publishes the counts. The frames read, or
    /// `None` when the ring failed.
    #[inline]
    fn read_block(&mut self, stopping: bool) -> Option<usize> {
        let WorkerLoop {
            slot,
            spool,
            records,
            disk,
            stop,
            claimed,
            limit,
            c,
            records_skipped,
            vlan_buf,
            error,
            ring_blocks,
            retire,
            next_ring,
            retired,
            ..
        } = self;
        let (iface, link, limit) = (slot.iface, slot.link, *limit);
        let (mut frames, mut bytes, mut staged, mut hw) = (0u64, 0u64, 0u64, 0u64);
        // Read once a block, at its first frame (not before the wait for
        // it): a frame's path does not touch shared state, and a block that
        // arrives after space returned is recorded.
        let healthy = error.is_none();
        let mut recording: Option<bool> = None;
        if let Some(s) = spool.as_mut() {
            // A frame may wait in the ring for the pcap writer rather than
            // be dropped from pcap; with records, only while the ring is at
            // most half full, so that records never lose a frame to pcap.
            s.set_patient(records.is_none() || slot.ring.blocks_ready() * 2 <= *ring_blocks);
        }
        let timeout = match (&*next_ring, stopping) {
            // The last partial block of a ring the group no longer deals
            // to comes when the kernel's retire timer fires.
            (Some(_), _) => *retire * 4,
            (None, true) => *retire,
            (None, false) => Duration::from_millis(100),
        };
        let mut on_frame = |f: capture::RxFrame<'_>| {
            if let Some(l) = limit
                && claimed.fetch_add(1, Ordering::Relaxed) >= l
            {
                stop.store(true, Ordering::Relaxed);
                return;
            }
            frames += 1;
            hw += f.hw_timestamp as u64;
            // A tag the device took off goes back in, as libpcap does.
            let (data, wire_len) = match f.vlan {
                Some((tci, tpid)) if f.data.len() >= 12 => {
                    vlan_buf.clear();
                    vlan_buf.extend_from_slice(&f.data[..12]);
                    vlan_buf.extend_from_slice(&tpid.to_be_bytes());
                    vlan_buf.extend_from_slice(&tci.to_be_bytes());
                    vlan_buf.extend_from_slice(&f.data[12..]);
                    (&vlan_buf[..], f.wire_len + 4)
                }
                _ => (f.data, f.wire_len),
            };
            bytes += wire_len as u64;
            let pcap = match spool.as_mut() {
                Some(s) => {
                    let p = s.append(f.ts_ns, wire_len, data);
                    staged += p.is_some() as u64;
                    p
                }
                None => None,
            };
            if let Some(w) = records.as_mut() {
                if !*recording.get_or_insert_with(|| healthy && !disk.dropping()) {
                    *records_skipped += 1;
                    return;
                }
                let meta = FrameMeta {
                    ts_ns: f.ts_ns,
                    wire_len,
                    link,
                    iface,
                    pcap,
                };
                if let Err(e) = w.frame(meta, data) {
                    disk.failed(e, stop, error);
                    recording = Some(false);
                }
            }
        };
        let result = slot.ring.next_block(timeout, &mut on_frame);
        // A ring read before: a block it handed over late (rare: the
        // kernel's retire timer ran later than the wait above).
        for r in retired.iter_mut() {
            if r.blocks_ready() > 0 {
                let _ = r.next_block(Duration::ZERO, &mut on_frame);
            }
        }
        c.frames.fetch_add(frames, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
        c.hw_timestamps.fetch_add(hw, Ordering::Relaxed);
        if let Some(s) = &*spool {
            c.pcap_frames.fetch_add(staged, Ordering::Relaxed);
            c.pcap_drops.store(s.dropped, Ordering::Relaxed);
        }
        if let Some(w) = &*records {
            c.records.fetch_add(frames, Ordering::Relaxed);
            c.records_drops
                .store(w.rows_lost() + *records_skipped, Ordering::Relaxed);
            c.flow_slices_lost
                .store(w.flow_slices_lost(), Ordering::Relaxed);
        }
        match result {
            Ok(n) => Some(n),
            Err(e) => {
                error.get_or_insert(format!("{}: reading the ring: {e}", slot.ring.iface()));
                None
            }
        }
    }

    /// The first ring is drained: from here on, the full-size one, if it
    /// has come (then true).
    fn next_ring_is_due(&mut self) -> bool {
        let Some(r) = self.next_ring.take() else {
            return false;
        };
        self.retired.push(std::mem::replace(&mut self.slot.ring, r));
        self.ring_blocks = self.slot.ring.options().block_count;
        true
    }

    /// Every 200 ms: the records' timers, the backlogs published, and
    /// (light traffic) staged frames written and files closed on time.
    fn tick(&mut self) {
        if self.last_tick.elapsed() < Duration::from_millis(200) {
            return;
        }
        self.last_tick = Instant::now();
        if let Some(w) = self.records.as_mut()
            && self.error.is_none()
            && let Err(e) = w.tick()
        {
            self.disk.failed(e, &self.stop, &mut self.error);
        }
        (self.c.ring_backlog).store(self.slot.ring.blocks_ready() as u64, Ordering::Relaxed);
        if let Some(s) = self.spool.as_mut() {
            // Light traffic: do not let staged frames sit in memory,
            // nor a file stay open past its time.
            s.flush_block();
            s.close_if_due(wall_ns());
            (self.c.pcap_backlog).store(s.backlog() as u64, Ordering::Relaxed);
        }
    }

    /// The ring is drained and the capture stopping: a full-size ring
    /// handed over before this worker said it is ending is drained too
    /// (then true).
    fn drain_next(&mut self) -> bool {
        match self.handover.as_ref().and_then(|h| h.close()) {
            Some(r) if close_door(&r, &mut self.error) => {
                self.next_ring = Some(r);
                true
            }
            Some(r) => {
                self.retired.push(r);
                false
            }
            None => false,
        }
    }

    /// The loop has ended: the pcap spool finished and the records closed;
    /// every ring this worker read goes back to be counted and closed.
    fn finish(
        mut self,
        spool: Option<JoinHandle<SpoolReport>>,
        records_thread: Option<JoinHandle<Records>>,
    ) -> WorkerOut {
        // No ring will be handed over once this worker has ended.
        if let Some(r) = self.handover.as_ref().and_then(|h| h.close()) {
            self.retired.push(r);
        }
        self.retired.extend(self.next_ring.take());
        if let Some(s) = self.spool.take() {
            s.finish();
        }
        // The last file closes here, so that one the disk has no room for
        // is given up and counted like any other.
        if let Some(w) = self.records.as_mut() {
            if let Err(e) = w.close() {
                self.disk.failed(e, &self.stop, &mut self.error);
            }
            (self.c.records_drops).store(w.rows_lost() + self.records_skipped, Ordering::Relaxed);
            (self.c.flow_slices_lost).store(w.flow_slices_lost(), Ordering::Relaxed);
        }
        let records = match self.records.take().map(|w| w.finish()) {
            Some(Ok(r)) => Some(r),
            Some(Err(e)) => {
                self.disk.failed(e, &self.stop, &mut self.error);
                None
            }
            None => None,
        };
        self.retired.push(self.slot.ring);
        WorkerOut {
            rings: self.retired,
            records,
            spool,
            records_thread,
            error: self.error,
        }
    }
}

/// Stops a ring taking frames; false (and the error kept) if it would not.
fn close_door(ring: &RxRing, error: &mut Option<String>) -> bool {
    match ring.stop_receiving() {
        Ok(()) => true,
        Err(e) => {
            error.get_or_insert(format!("{}: closing the ring: {e}", ring.iface()));
            false
        }
    }
}

/// The wall clock, ns since the epoch (frames' timestamps are on it).
fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}
