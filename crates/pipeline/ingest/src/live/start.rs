//! Starting a capture: each worker's sinks set up (its pcap spool and
//! writer thread, its records, on a thread of their own with pcap), then
//! the rings started, the thread that grows them, and the workers.

use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use capture::ring::Fanout;
use pcapio::spool::{HandOn, Spool, SpoolOptions, SpoolReport, spool};

use super::join::join_workers;
use super::records::{Records, RecordsCtx, finish_records, run_records};
use super::rings::{self, Growth};
use super::run::Live;
use super::worker_loop::{WorkerCtx, WorkerOut, run_worker};
use super::{LiveError, PcapOut, Slot};
use crate::worker::Worker;

/// A worker's pcap spool and the writer thread behind it.
pub(super) type SpoolAndWriter = (Spool, JoinHandle<SpoolReport>);

impl Live<'_> {
    /// Sets up every worker's sinks, starts the rings (one fanout group per
    /// interface, when it has several rings) and the worker threads.
    pub(super) fn start_workers(
        &self,
        slots: Vec<Slot>,
        growths: Vec<Growth>,
    ) -> Result<Vec<JoinHandle<WorkerOut>>, LiveError> {
        let rings = slots.len();
        // A step that fails stops what the steps before it started: the
        // caller gets its error with no thread of the capture left running.
        let mut ctxs = Vec::with_capacity(rings);
        for slot in slots {
            match self.set_up_worker(slot, rings) {
                Ok(ctx) => ctxs.push(ctx),
                Err(e) => {
                    abandon(ctxs);
                    return Err(e);
                }
            }
        }
        // Everything is ready: now the frames may come.
        let groups = match self.start_rings(&mut ctxs) {
            Ok(g) => g,
            Err(e) => {
                abandon(ctxs);
                return Err(e);
            }
        };
        if let Err(e) = self.start_growing(growths, &groups) {
            abandon(ctxs);
            return Err(e);
        }
        let mut handles = Vec::new();
        for ctx in ctxs {
            let name = format!("weir-cap{}", ctx.slot.worker);
            match std::thread::Builder::new()
                .name(name)
                .spawn(move || run_worker(ctx))
            {
                Ok(h) => handles.push(h),
                Err(e) => {
                    // (The worker that did not start took its pcap writer
                    // down with it: its channel is gone, so it ends.)
                    self.stop_flag.store(true, Ordering::Relaxed);
                    let _ = join_workers(handles);
                    return Err(LiveError::Thread(e));
                }
            }
        }
        Ok(handles)
    }

    /// Starts every ring, each interface's in its fanout group; returns
    /// the groups, by interface.
    fn start_rings(&self, ctxs: &mut [WorkerCtx]) -> Result<Vec<Option<Fanout>>, LiveError> {
        let mut groups: Vec<Option<Fanout>> = vec![None; self.opts.interfaces.len()];
        let fan = self.opts.workers_per_iface > 1;
        ctxs.iter_mut().try_for_each(|ctx| {
            let first = ctx.slot.handover.is_some();
            let group = groups[ctx.slot.iface as usize].get_or_insert_with(|| {
                match &ctx.slot.fanout {
                    Some(p) => Fanout::by_program(p),
                    // One first ring: a group of its own, that its
                    // full-size ring joins.
                    None if first && !fan => Fanout::to_first(),
                    None => Fanout::new(),
                }
            });
            ctx.slot
                .ring
                .start((fan || (first && !ctx.slot.gated)).then_some(group))
        })?;
        Ok(groups)
    }

    /// The full-size rings are set up while the capture records, on a
    /// thread of their own.
    fn start_growing(
        &self,
        mut growths: Vec<Growth>,
        groups: &[Option<Fanout>],
    ) -> Result<(), LiveError> {
        for g in &mut growths {
            g.group = groups[g.index];
        }
        if growths.is_empty() {
            return Ok(());
        }
        let (stop, warnings) = (self.stop_flag.clone(), self.grow_warnings.clone());
        let held = self.late_programs.clone();
        // Not waited for: a capture shorter than the set-up ends without
        // it (it sees the stop flag, or that the workers ended, and hands
        // nothing over).
        std::thread::Builder::new()
            .name("weir-rings".into())
            .spawn(move || rings::grow(growths, &stop, &warnings, &held))
            .map(drop)
            .map_err(LiveError::Thread)
    }

    /// One worker's sinks: its pcap spool (and writer thread) and its
    /// records worker with the first file open.
    fn set_up_worker(&self, slot: Slot, rings: usize) -> Result<WorkerCtx, LiveError> {
        let opts = self.opts;
        let records = match (opts.records, self.dataset) {
            (true, Some(d)) => {
                // Row buffers backed and the first file open before any
                // frame arrives: the records never meet fresh memory.
                let mut wo = opts.worker;
                wo.writer.prefault = true;
                let mut w = Worker::new(slot.worker, d.clone(), wo);
                w.publish_to(self.published.clone());
                if let Some(t) = &opts.taps {
                    w.set_tap((t.records)(slot.worker));
                }
                w.open_file()?;
                Some(w)
            }
            _ => None,
        };
        let Some(p) = &opts.pcap else {
            return Ok(self.worker_ctx(slot, None, records, None));
        };
        // With pcap, the records are made off the capture thread, from the
        // blocks the pcap writer has written.
        let Some(worker) = records else {
            let spool = self.start_spool(p, &slot, rings, None)?;
            return Ok(self.worker_ctx(slot, Some(spool), None, None));
        };
        let (hand_on, from) = HandOn::new(records_lag_blocks(p.staging_bytes, p.records_lag));
        let spool = self.start_spool(p, &slot, rings, Some(hand_on))?;
        let ctx = RecordsCtx {
            worker,
            from,
            link: slot.link,
            iface: slot.iface,
            pcap_dir: p.dir.clone(),
            pcap: spool.0.shared(),
            counters: slot.counters.clone(),
            disk: self.disk.clone(),
            stop: self.stop_flag.clone(),
        };
        let t = std::thread::Builder::new()
            .name(format!("weir-rec{}", slot.worker))
            .spawn(move || run_records(ctx));
        match t {
            Ok(t) => Ok(self.worker_ctx(slot, Some(spool), None, Some(t))),
            Err(e) => {
                end_spool(Some(spool));
                Err(LiveError::Thread(e))
            }
        }
    }

    fn worker_ctx(
        &self,
        slot: Slot,
        spool: Option<SpoolAndWriter>,
        records: Option<Worker>,
        records_thread: Option<JoinHandle<Records>>,
    ) -> WorkerCtx {
        WorkerCtx {
            handover: slot.handover.clone(),
            slot,
            spool,
            records,
            records_thread,
            disk: self.disk.clone(),
            stop: self.stop_flag.clone(),
            claimed: self.claimed.clone(),
            limit: self.opts.scope.count,
        }
    }

    /// A worker's pcap spool and its writer thread.
    fn start_spool(
        &self,
        p: &PcapOut,
        slot: &Slot,
        rings: usize,
        hand_on: Option<HandOn>,
    ) -> Result<SpoolAndWriter, LiveError> {
        let single = p.single_name.clone().filter(|_| rings == 1);
        let o = SpoolOptions {
            dir: p.dir.clone(),
            prefix: match &p.single_name {
                Some(n) => format!("{n}.w{}", slot.worker),
                None => format!("w{:03}", slot.worker),
            },
            single_name: single,
            link: slot.link,
            snaplen: self.opts.scope.snaplen,
            rotate_bytes: p.rotate_bytes,
            rotate_ns: p.rotate.map(|d| d.as_nanos() as i64),
            block_bytes: STAGING_BLOCK,
            blocks: (p.staging_bytes / STAGING_BLOCK).max(4),
            first_file_id: (slot.worker as u32) << 20,
            codec: p.keep.codec,
            direct: p.keep.direct,
            on_full: self.opts.on_full,
            retention: self.retention.clone(),
            hand_on,
        };
        let (s, h) = spool(o).map_err(LiveError::Thread)?;
        let _ = slot.counters.spool.set(s.shared());
        Ok((s, h))
    }
}

/// Workers set up but not started, given up (a later step failed): each
/// pcap writer is told to end (its channel closes) and waited for.
fn abandon(ctxs: Vec<WorkerCtx>) {
    for ctx in ctxs {
        end_spool(ctx.spool);
        // Its pcap writer gone, the records thread ends too (its file,
        // opened ahead of frames that never came, goes).
        if let Some(Ok(r)) = ctx.records_thread.map(|t| t.join()) {
            let _ = finish_records(r);
        }
    }
}

/// Blocks the records thread may hold before the pcap writer hands it no
/// more and names the spans it missed instead: by default a quarter of
/// the staging, at most 64 MiB (a few seconds of small frames at full
/// rate), so that the pcap path always has the rest.
fn records_lag_blocks(staging_bytes: usize, lag: Option<usize>) -> usize {
    let blocks = staging_bytes / STAGING_BLOCK;
    match lag {
        Some(bytes) => (bytes / STAGING_BLOCK).min(blocks / 2),
        None => (blocks / 4).clamp(4, (64 << 20) / STAGING_BLOCK),
    }
}

/// A pcap staging block: the one being filled and the one being written
/// both fit in a core's L2 cache.
const STAGING_BLOCK: usize = 256 << 10;

/// Tells a pcap writer to end (its channel closes) and waits for it.
fn end_spool(spool: Option<SpoolAndWriter>) {
    if let Some((s, h)) = spool {
        drop(s);
        let _ = h.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_records_lag_is_a_quarter_of_the_staging_within_bounds() {
        // 256 MiB of staging: a quarter is 256 blocks, more than 64 MiB.
        assert_eq!(
            records_lag_blocks(256 << 20, None),
            (64 << 20) / STAGING_BLOCK
        );
        // 4 MiB: a quarter is 4 blocks, the least.
        assert_eq!(records_lag_blocks(4 << 20, None), 4);
        assert_eq!(records_lag_blocks(1 << 20, None), 4);
        // 32 MiB: 128 blocks, a quarter is 32.
        assert_eq!(records_lag_blocks(32 << 20, None), 32);
        // Asked for: at most half the staging.
        assert_eq!(records_lag_blocks(32 << 20, Some(8 << 20)), 32);
        assert_eq!(records_lag_blocks(32 << 20, Some(1 << 30)), 64);
    }
}
