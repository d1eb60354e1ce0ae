//! The per-second sampler: every worker's counters and the kernel's, a
//! stats row per worker, held while the disk is full.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use capture::ring::{KernelStats, kernel_stats};
use store::stats::{StatsRow, StatsWriter};
use util::storage::{Publisher, UploadFigures};

use super::disk::DiskWatch;
use super::rings::Handover;
use super::{Counters, LiveError, Second, Slot};

/// `--on-full drop`: stats rows held in memory (per worker) while the disk
/// is full, written when space returns; older ones are dropped and counted.
const STATS_HELD_SECONDS: usize = 3600;

/// A worker's ring and counters, as the stats loop reads them.
pub(super) struct Watched {
    pub(super) worker: u16,
    pub(super) iface: u16,
    pub(super) fd: i32,
    /// The full-size ring that takes over, once it is set up.
    pub(super) handover: Option<Arc<Handover>>,
    pub(super) counters: Arc<Counters>,
}

impl Watched {
    pub(super) fn of(s: &Slot) -> Watched {
        Watched {
            worker: s.worker,
            iface: s.iface,
            fd: s.ring.raw_fd(),
            handover: s.handover.clone(),
            counters: s.counters.clone(),
        }
    }

    /// The kernel's counters of the worker's rings since the last read.
    pub(super) fn kernel_stats(&self) -> KernelStats {
        let mut k = kernel_stats(self.fd).unwrap_or_default();
        if let Some(fd) = self.handover.as_ref().and_then(|h| h.fd()) {
            let more = kernel_stats(fd).unwrap_or_default();
            k.packets += more.packets;
            k.drops += more.drops;
            k.freezes += more.freezes;
        }
        k
    }
}

/// The stats loop's counts: each worker's at the last second, and the
/// totals since the start.
pub(super) struct Sampler {
    pub(super) watched: Vec<Watched>,
    prev: Vec<[u64; 8]>,
    /// A pcap writer had met a full disk at the last sample.
    pcap_full: bool,
    /// Rows sampled while the disk is full (`--on-full drop`), oldest first.
    held: VecDeque<StatsRow>,
    held_limit: usize,
    /// Stats rows that could not be written.
    pub(super) stats_lost: u64,
    pub(super) kernel_total: KernelStats,
    pub(super) started: Instant,
    stats: Option<StatsWriter>,
    /// Stats files finished early (the disk filled).
    stats_files: Vec<String>,
    stats_tap: Option<crate::worker::StatsTap>,
    pub(super) totals: Second,
    pub(super) disk: DiskWatch,
    /// The dataset's uploader (`--upload`), and its figures at the last
    /// sample.
    upload: Option<(Arc<dyn Publisher>, UploadFigures)>,
}

impl Sampler {
    /// The capture's clock starts here: once every worker is set up.
    pub(super) fn new(
        watched: Vec<Watched>,
        stats: Option<StatsWriter>,
        stats_tap: Option<crate::worker::StatsTap>,
        disk: DiskWatch,
        uploader: Option<Arc<dyn Publisher>>,
    ) -> Sampler {
        Sampler {
            prev: vec![[0; 8]; watched.len()],
            held: VecDeque::new(),
            pcap_full: false,
            held_limit: STATS_HELD_SECONDS * watched.len().max(1),
            stats_lost: 0,
            watched,
            kernel_total: KernelStats::default(),
            started: Instant::now(),
            stats,
            stats_files: Vec::new(),
            stats_tap,
            totals: Second::default(),
            disk,
            upload: uploader.map(|p| (p, Default::default())),
        }
    }

    /// The last stats file: rows held while the disk was full go in first
    /// (those that cannot are lost), then it closes. Returns every stats
    /// file written; what was lost goes to `warnings`.
    pub(super) fn finish_stats(&mut self, warnings: &mut Vec<String>) -> Vec<String> {
        let mut stats_files = std::mem::take(&mut self.stats_files);
        if let Some(mut s) = self.stats.take() {
            while let Some(r) = self.held.pop_front() {
                if s.push(r).is_err() {
                    self.stats_lost += self.held.len() as u64;
                    self.held.clear();
                }
            }
            let (files, failed) = s.finish_or_give_up();
            stats_files.extend(files);
            if let Some((e, lost)) = failed {
                self.stats_lost += lost;
                if e.is_disk_full() {
                    self.disk.hit();
                }
                warnings.push(format!("the last {lost} stats rows are lost: {e}"));
            }
        }
        stats_files
    }

    /// Reads every worker's counters and the kernel's: the second's
    /// figures, and a stats row per worker (written, or held while the
    /// disk is full).
    pub(super) fn sample(&mut self) -> Result<Second, LiveError> {
        let mut rows = Vec::new();
        let mut second = sample(
            &self.watched,
            &mut self.prev,
            &mut self.kernel_total,
            self.started,
            &mut rows,
            self.stats_tap.as_deref(),
            &mut self.totals,
        )?;
        if let (Some((uploader, prev)), Some(first)) = (self.upload.as_mut(), rows.first_mut()) {
            let u = store::stats::UploadSecond::since(prev, uploader.figures());
            first.upload = Some(u);
            second.upload = Some(u);
        }
        if self.stats.is_some() && self.disk.dropping() {
            // Kept until space returns: rows are small, and loss is data.
            for r in rows {
                if self.held.len() >= self.held_limit {
                    self.held.pop_front();
                    self.stats_lost += 1;
                }
                self.held.push_back(r);
            }
        } else if let Some(s) = self.stats.as_mut() {
            let mut queue: VecDeque<StatsRow> = std::mem::take(&mut self.held);
            queue.extend(rows);
            let mut give_up = false;
            while let Some(r) = queue.pop_front() {
                match s.push(r) {
                    // A row that met a full disk stays in the writer, for
                    // its next flush.
                    Ok(()) => {}
                    Err(e) if e.is_disk_full() => {
                        self.disk.hit();
                        give_up = !self.disk.drop;
                        break;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            if give_up {
                // --on-full stop: no more stats; close what there is, with
                // the space the reserve gives back.
                self.stats_lost += queue.len() as u64;
                queue.clear();
                if let Some(s) = self.stats.take() {
                    let (files, failed) = s.finish_or_give_up();
                    self.stats_files.extend(files);
                    self.stats_lost += failed.map_or(0, |(_, n)| n);
                }
            }
            self.held = queue;
        }
        // A pcap writer that has just met a full disk (the records, made
        // from what pcap wrote, then write nothing that would meet it)
        // says so too; once, not every second it stays so.
        let pcap_full = self
            .watched
            .iter()
            .any(|w| (w.counters.spool.get()).is_some_and(|s| s.disk_full.load(Ordering::Relaxed)));
        if pcap_full && !self.pcap_full {
            self.disk.hit();
        }
        self.pcap_full = pcap_full;
        second.disk_full = self.disk.dropping();
        Ok(second)
    }
}

/// What a stats tap is called as.
type StatsTapFn = dyn Fn(&[StatsRow]) + Send + Sync;

/// Reads every worker's counters and the kernel's, writes a stats row per
/// worker, and sums them for the caller.
fn sample(
    watched: &[Watched],
    prev: &mut [[u64; 8]],
    kernel_total: &mut KernelStats,
    started: Instant,
    stats_rows: &mut Vec<StatsRow>,
    stats_tap: Option<&StatsTapFn>,
    totals: &mut Second,
) -> Result<Second, LiveError> {
    let now = store::time::now_ns();
    let second_start = now - now.rem_euclid(1_000_000_000);
    let mut out = Second {
        elapsed: started.elapsed(),
        ..Default::default()
    };
    let mut rows = Vec::new();
    for (w, p) in watched.iter().zip(prev.iter_mut()) {
        let c = &w.counters;
        let cur = [
            c.frames.load(Ordering::Relaxed),
            c.bytes.load(Ordering::Relaxed),
            c.pcap_frames.load(Ordering::Relaxed),
            // Dropped at staging, plus staged but lost to a failed write.
            c.pcap_drops.load(Ordering::Relaxed)
                + c.spool
                    .get()
                    .map_or(0, |x| x.frames_lost.load(Ordering::Relaxed)),
            c.records.load(Ordering::Relaxed),
            c.spool
                .get()
                .map_or(0, |s| s.bytes_in.load(Ordering::Relaxed)),
            c.spool
                .get()
                .map_or(0, |s| s.bytes_out.load(Ordering::Relaxed)),
            c.records_drops.load(Ordering::Relaxed),
        ];
        let d: Vec<u64> = cur.iter().zip(p.iter()).map(|(a, b)| a - b).collect();
        *p = cur;
        let k = w.kernel_stats();
        kernel_total.packets += k.packets;
        kernel_total.drops += k.drops;
        kernel_total.freezes += k.freezes;
        out.frames += d[0];
        out.bytes += d[1];
        out.pcap_drops += d[3];
        out.records_drops += d[7];
        out.kernel_drops += k.drops;
        rows.push(StatsRow {
            ts_ns: second_start,
            worker: w.worker,
            iface: w.iface,
            frames: d[0],
            bytes: d[1],
            kernel_packets: k.packets,
            kernel_drops: k.drops,
            kernel_freezes: k.freezes,
            pcap_frames: d[2],
            pcap_drops: d[3],
            records: d[4],
            records_drops: d[7],
            ring_backlog: c.ring_backlog.load(Ordering::Relaxed) as u32,
            pcap_backlog: c.pcap_backlog.load(Ordering::Relaxed) as u32,
            pcap_bytes: d[5],
            pcap_stored_bytes: d[6],
            pcap_level: c.spool.get().and_then(|s| s.method()).map(|m| m.code()),
            stack: None,
            upload: None,
        });
    }
    if let Some(t) = stats_tap {
        t(&rows);
    }
    *stats_rows = rows;
    totals.total_frames += out.frames;
    totals.total_kernel_drops += out.kernel_drops;
    totals.total_pcap_drops += out.pcap_drops;
    totals.total_records_drops += out.records_drops;
    out.total_frames = totals.total_frames;
    out.total_kernel_drops = totals.total_kernel_drops;
    out.total_pcap_drops = totals.total_pcap_drops;
    out.total_records_drops = totals.total_records_drops;
    Ok(out)
}

/// Records put off by the records threads so far: built since, still to
/// build, and lost (their pcap file went first); `None` if none were.
pub(super) fn late_records(watched: &[Watched]) -> Option<store::manifest::LateRecords> {
    let sum = |f: fn(&Counters) -> &AtomicU64| -> u64 {
        (watched.iter())
            .map(|w| f(&w.counters).load(Ordering::Relaxed))
            .sum()
    };
    let late = sum(|c| &c.records_late);
    let built = sum(|c| &c.records_late_built);
    let lost = sum(|c| &c.records_late_lost);
    (late > 0).then(|| store::manifest::LateRecords {
        built,
        pending: late.saturating_sub(built + lost),
        lost,
    })
}

/// Flows-table slices the workers lost, together.
pub(super) fn flow_slices_lost(watched: &[Watched]) -> u64 {
    (watched.iter())
        .map(|w| w.counters.flow_slices_lost.load(Ordering::Relaxed))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker's counters with no ring behind them (the kernel's
    /// counters then read as zero).
    fn watched(worker: u16) -> Watched {
        Watched {
            worker,
            iface: 0,
            fd: -1,
            handover: None,
            counters: Arc::new(Counters::default()),
        }
    }

    #[test]
    fn each_second_counts_what_changed_and_the_totals_add_up() {
        let w = [watched(0), watched(1)];
        let mut prev = vec![[0; 8]; 2];
        let mut kernel = KernelStats::default();
        let mut rows = Vec::new();
        let mut totals = Second::default();
        let started = Instant::now();
        w[0].counters.frames.store(10, Ordering::Relaxed);
        w[0].counters.bytes.store(1000, Ordering::Relaxed);
        w[1].counters.frames.store(5, Ordering::Relaxed);
        w[1].counters.records_drops.store(2, Ordering::Relaxed);
        let s = sample(
            &w,
            &mut prev,
            &mut kernel,
            started,
            &mut rows,
            None,
            &mut totals,
        )
        .unwrap();
        assert_eq!((s.frames, s.bytes, s.records_drops), (15, 1000, 2));
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].worker, rows[0].frames), (0, 10));
        assert_eq!((rows[1].worker, rows[1].frames), (1, 5));
        w[0].counters.frames.store(12, Ordering::Relaxed);
        let s = sample(
            &w,
            &mut prev,
            &mut kernel,
            started,
            &mut rows,
            None,
            &mut totals,
        )
        .unwrap();
        assert_eq!((s.frames, s.total_frames), (2, 17));
        assert_eq!(s.total_records_drops, 2);
        assert_eq!(rows[0].frames, 2);
        assert_eq!(rows[1].frames, 0);
    }
}
