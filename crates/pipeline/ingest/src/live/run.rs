//! A capture from its start to its manifest: the workers started, the
//! stats loop once a second (which ends the capture on a signal, `-c`,
//! `--duration` or a full disk, and keeps the running manifest current),
//! the workers joined, the last stats and the final manifest written.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use capture::bpf::SocketProgram;
use capture::ring::KernelStats;
use pcapio::retention::{RemovedFile, Retention};
use pcapio::spool::{OnFull, PcapFileInfo};
use store::Dataset;
use store::manifest::{Drops, Files, Manifest, RunInfo, TimeSpan};
use store::stats::StatsWriter;

use super::disk::DiskWatch;
use super::join::{Joined, join_workers};
use super::manifest::{
    Announced, base_manifest, pcap_entries, removed_entries, running_manifest, span, totals_bytes,
};
use super::open::Opened;
use super::sampler::{Sampler, Watched, flow_slices_lost, late_records};
use super::worker_loop::WorkerOut;
use super::{Ended, LiveError, LiveOptions, LiveReport, Second};

impl Opened {
    /// Captures until `stop` is set, the count is reached or the duration
    /// is over. Starts the workers and their sinks, calls `on_ready` once
    /// every one is set up (staging written, record buffers backed), then
    /// reports each second through `on_second` until the capture ends.
    /// Writes the dataset (when one is given) and returns the totals.
    pub fn run(
        self,
        dataset: Option<&Dataset>,
        stop: &AtomicBool,
        on_ready: impl FnOnce(),
        mut on_second: impl FnMut(&Second),
    ) -> Result<LiveReport, LiveError> {
        let Opened {
            opts,
            slots,
            growths,
            fanout_programs: _held_until_the_end,
            libpcap,
            notes: _,
        } = self;
        // The manifest before the first data file, so that a capture killed
        // at any moment leaves a dataset `weir recover` can put in order.
        if let Some(d) = dataset.filter(|d| !d.root().join(store::dataset::MANIFEST).is_file()) {
            d.write_manifest(&base_manifest(&opts, &libpcap, slots.len() as u32))?;
        }
        let stats = match dataset {
            Some(d) => Some(StatsWriter::new(
                &d.subdir(store::dataset::STATS_DIR)?,
                60 * slots.len().max(1),
            )),
            None => None,
        };
        let watched: Vec<Watched> = slots.iter().map(Watched::of).collect();
        let retention = retention_of(&opts, dataset.and_then(|d| d.publisher().cloned()));
        let disk = DiskWatch::for_dataset(dataset, opts.on_full == OnFull::Drop)?;
        let live = Live {
            opts: &opts,
            libpcap: &libpcap,
            dataset,
            stop_flag: Arc::new(AtomicBool::new(false)),
            claimed: Arc::new(AtomicU64::new(0)),
            retention,
            published: Default::default(),
            disk: disk.clone(),
            grow_warnings: Default::default(),
            late_programs: Default::default(),
        };
        let handles = live.start_workers(slots, growths)?;
        on_ready();
        // Time counts from here: setting up (writing gigabytes of staging,
        // slow when memory must first be reclaimed) must not eat into
        // --duration, or the capture would end as it starts and the
        // traffic that follows would sit unread in the rings.
        let upload = dataset.and_then(|d| d.publisher().cloned());
        let tap = opts.taps.as_ref().and_then(|t| t.stats.clone());
        let mut sampler = Sampler::new(watched, stats, tap, disk, upload);
        let ended = match live.watch(&handles, stop, &mut sampler, &mut on_second) {
            Ok(e) => e,
            Err(e) => {
                // The workers run until told to stop: a failed capture
                // stops them and waits, leaving no thread behind.
                live.stop_flag.store(true, Ordering::Relaxed);
                let _ = join_workers(handles);
                return Err(e);
            }
        };
        // Every worker has drained its ring and closed its sinks.
        let done = join_workers(handles)?;
        // The last counts, read with the rings still open.
        let last = sampler.sample()?;
        on_second(&last);
        live.end(done, sampler, ended)
    }
}

/// The pcap files' retention, when there is a limit; of the local copies
/// only when the dataset is uploaded by `uploader`.
fn retention_of(
    opts: &LiveOptions,
    uploader: Option<Arc<dyn util::storage::Publisher>>,
) -> Option<Arc<Retention>> {
    opts.pcap
        .as_ref()
        .filter(|p| p.keep.max_disk.is_some() || p.keep.max_age.is_some())
        .map(|p| {
            let r = Retention::new(p.keep.max_disk, p.keep.max_age.map(|d| d.as_nanos() as i64));
            match uploader {
                Some(u) => r.uploaded_first(u, store::dataset::PCAP_DIR),
                None => Arc::new(r),
            }
        })
}

/// Every frame the kernel put in a ring is taken by its worker or counted
/// as a kernel drop, except those that arrived after the workers' last
/// read (traffic does not stop with the capture). The difference is kept;
/// a large one means frames were lost between kernel and worker, and is
/// said as a fault.
fn unread_frames(
    kernel_total: &KernelStats,
    frames: u64,
    ring_states: &[String],
    warnings: &mut Vec<String>,
) -> u64 {
    let unread = kernel_total
        .packets
        .saturating_sub(kernel_total.drops)
        .saturating_sub(frames);
    if unread > 1000 && unread * 100 > frames {
        warnings.push(format!(
            "{unread} frames the kernel placed in the capture rings never reached a worker \
             (kernel saw {}, dropped {}, workers took {frames}); they are counted as \
             drops.ring_unread in the manifest. This is a fault in weir's ring handling: \
             please report it with the manifest and this: {}",
            kernel_total.packets,
            kernel_total.drops,
            ring_states.join("; ")
        ));
    }
    unread
}

/// What a running capture's steps share.
pub(super) struct Live<'a> {
    pub(super) opts: &'a LiveOptions,
    libpcap: &'a str,
    pub(super) dataset: Option<&'a Dataset>,
    /// Tells the workers to stop.
    pub(super) stop_flag: Arc<AtomicBool>,
    /// Frames the workers have taken, for `-c`.
    pub(super) claimed: Arc<AtomicU64>,
    pub(super) retention: Option<Arc<Retention>>,
    /// Files finished while the capture runs, for its manifest.
    pub(super) published: crate::worker::Published,
    pub(super) disk: DiskWatch,
    /// What went wrong setting up the full-size rings.
    pub(super) grow_warnings: Arc<Mutex<Vec<String>>>,
    /// Fanout programs loaded while capturing, held to its end.
    pub(super) late_programs: Arc<Mutex<Vec<Arc<SocketProgram>>>>,
}

/// How the capture ended, for its manifest.
struct CaptureEnd {
    ended: Ended,
    elapsed: Duration,
    /// Frames the kernel put in the rings that no worker took.
    unread: u64,
    stats_files: Vec<String>,
    removed: Vec<RemovedFile>,
}

impl Live<'_> {
    /// The stats loop: once a second until every worker is done, telling
    /// the workers to stop when the capture should end.
    fn watch(
        &self,
        handles: &[JoinHandle<WorkerOut>],
        stop: &AtomicBool,
        sampler: &mut Sampler,
        on_second: &mut impl FnMut(&Second),
    ) -> Result<Ended, LiveError> {
        let mut ended = None;
        let mut next_tick = sampler.started + Duration::from_secs(1);
        let mut announced = Announced::default();
        loop {
            let all_done = handles.iter().all(|h| h.is_finished());
            if all_done {
                break;
            }
            if !self.stop_flag.load(Ordering::Relaxed)
                && let Some(why) = self.should_end(stop, sampler)
            {
                self.stop_flag.store(true, Ordering::Relaxed);
                ended = Some(why);
            }
            let now = Instant::now();
            if now < next_tick {
                std::thread::sleep((next_tick - now).min(Duration::from_millis(20)));
                continue;
            }
            next_tick += Duration::from_secs(1);
            sampler.disk.recheck();
            let second = sampler.sample()?;
            on_second(&second);
            if let Some(d) = self.dataset {
                self.announce(d, &sampler.watched, &mut announced)?;
            }
        }
        // A worker stops the capture itself when its records cannot be
        // written; a full disk is then the reason.
        Ok(ended.unwrap_or(if self.disk.is_full() && !self.disk.drop {
            Ended::DiskFull
        } else {
            Ended::Signal
        }))
    }

    /// Why the capture should end now, if it should.
    fn should_end(&self, stop: &AtomicBool, sampler: &Sampler) -> Option<Ended> {
        if stop.load(Ordering::Relaxed) {
            Some(Ended::Signal)
        } else if (self.opts.scope.duration).is_some_and(|d| sampler.started.elapsed() >= d) {
            Some(Ended::Duration)
        } else if (self.opts.scope.count).is_some_and(|c| self.claimed.load(Ordering::Relaxed) >= c)
        {
            Some(Ended::Count)
        } else if sampler.watched.iter().any(|w| {
            (w.counters.spool.get()).is_some_and(|s| s.stop_wanted.load(Ordering::Relaxed))
        }) || (self.disk.is_full() && !self.disk.drop)
        {
            self.disk.release();
            Some(Ended::DiskFull)
        } else {
            None
        }
    }

    /// What has been finished is readable now: the manifest says so
    /// (replaced whole, so a reader sees one or the other), when it
    /// changed since the last time.
    fn announce(
        &self,
        d: &Dataset,
        watched: &[Watched],
        announced: &mut Announced,
    ) -> Result<(), LiveError> {
        let packets = (self.published.lock())
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let pcap: Vec<PcapFileInfo> = watched
            .iter()
            .filter_map(|w| w.counters.spool.get())
            .flat_map(|s| s.finished_files())
            .collect();
        let removed = (self.retention.as_ref())
            .map(|r| r.removed().0)
            .unwrap_or_default();
        let late = late_records(watched);
        let now = Announced {
            packets: packets.len(),
            pcap: pcap.len(),
            removed: removed.len(),
            late,
        };
        if now != *announced {
            let mut m = running_manifest(
                base_manifest(self.opts, self.libpcap, watched.len() as u32),
                packets,
                &pcap,
                &removed,
            );
            m.late_records = late;
            match d.write_manifest(&m) {
                Ok(_) => *announced = now,
                // Tried again next second; the manifest on disk stays whole.
                Err(e) if e.is_disk_full() => self.disk.hit(),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Once every worker is joined and the last counts read: the last
    /// stats written, what was lost said, and the final manifest.
    fn end(
        &self,
        mut done: Joined,
        mut sampler: Sampler,
        ended: Ended,
    ) -> Result<LiveReport, LiveError> {
        let ring_states = done.close_rings();
        done.warnings.extend(std::mem::take(
            &mut *self.grow_warnings.lock().unwrap_or_else(|e| e.into_inner()),
        ));
        let elapsed = sampler.started.elapsed();
        // Whatever ended the capture, the last stats file and the manifest
        // get the reserve's space.
        sampler.disk.release();
        let stats_files = sampler.finish_stats(&mut done.warnings);
        self.say_disk_full(ended, &sampler, &mut done.warnings);
        let frames = sampler.totals.total_frames;
        let kernel_total = sampler.kernel_total;
        let unread = unread_frames(&kernel_total, frames, &ring_states, &mut done.warnings);
        let (removed, retention_errors) = (self.retention.as_ref())
            .map(|r| r.removed())
            .unwrap_or_default();
        done.warnings.extend(retention_errors);
        let removed_ids: std::collections::HashSet<u32> = removed.iter().map(|f| f.id).collect();
        done.pcap_files.retain(|f| !removed_ids.contains(&f.id));
        let end = CaptureEnd {
            ended,
            elapsed,
            unread,
            stats_files,
            removed,
        };
        let manifest = match self.dataset {
            Some(d) => {
                let m = self.final_manifest(&mut done, &sampler, &end);
                Some(d.write_manifest(&m)?)
            }
            None => None,
        };
        Ok(LiveReport {
            manifest,
            frames,
            kernel_seen: kernel_total.packets,
            kernel_drops: kernel_total.drops,
            pcap_drops: sampler.totals.total_pcap_drops,
            pcap_write_lost: done.pcap_write_lost,
            pcap_files: done.pcap_files,
            pcap_removed: end.removed.len(),
            ended,
            elapsed,
            warnings: done.warnings,
        })
    }

    /// A disk that filled: the capture stopped (`--on-full stop`), or what
    /// the writers could not write (`--on-full drop`).
    fn say_disk_full(&self, ended: Ended, sampler: &Sampler, warnings: &mut Vec<String>) {
        let output = || {
            (self.dataset).map_or_else(|| "the output".into(), |d| d.root().display().to_string())
        };
        if ended == Ended::DiskFull || (sampler.disk.is_full() && !sampler.disk.drop) {
            warnings.push(format!(
                "{}: the disk is full, so the capture stopped (--on-full stop); every file \
                 listed in the manifest is complete. Free space, write elsewhere, or use \
                 --on-full drop to keep capturing and count what is lost",
                output()
            ));
        }
        let lost_to_disk = [
            sampler.totals.total_records_drops,
            flow_slices_lost(&sampler.watched),
            sampler.stats_lost,
        ];
        if sampler.disk.drop && lost_to_disk.iter().any(|&n| n > 0) {
            let [records, slices, rows] = lost_to_disk;
            warnings.push(format!(
                "{}: the disk filled during the capture (--on-full drop): {records} packet \
                 records, {slices} flows slices and {rows} stats rows could not be written; \
                 they are counted in the manifest's drops, and every file it lists is whole",
                output()
            ));
        }
    }

    /// The finished capture's manifest.
    fn final_manifest(&self, done: &mut Joined, sampler: &Sampler, end: &CaptureEnd) -> Manifest {
        let watched = &sampler.watched;
        let kernel_total = &sampler.kernel_total;
        let frames = sampler.totals.total_frames;
        let hw = watched
            .iter()
            .all(|w| w.counters.hw_timestamps.load(Ordering::Relaxed) > 0);
        let mut files = std::mem::take(&mut done.records_files);
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let pcap = pcap_entries(&done.pcap_files);
        let (first, last) = span(&done.frame_stats, &done.pcap_files);
        let mut m = base_manifest(self.opts, self.libpcap, watched.len() as u32);
        m.clock = if hw { "hardware" } else { "kernel" }.to_string();
        m.counts = done.frame_stats.counts();
        m.rpc = done.rpc_info.take();
        m.app = done.app_info.take();
        m.counts.frames = frames;
        m.counts.wire_bytes = totals_bytes(watched);
        m.time_span = first.zip(last).map(|(a, b)| TimeSpan::new(a, b));
        m.files = Files {
            packets: files,
            pcap,
            stats: (end.stats_files.iter())
                .map(|n| format!("{}/{n}", store::dataset::STATS_DIR))
                .collect(),
            pcap_removed: removed_entries(&end.removed),
        };
        m.run = Some(RunInfo {
            command: self.opts.command.clone(),
            workers: watched.len() as u32,
            elapsed_s: end.elapsed.as_secs_f64(),
            frames_per_s: frames as f64 / end.elapsed.as_secs_f64().max(1e-9),
        });
        if let Some(c) = &mut m.capture {
            c.ended_by = match end.ended {
                Ended::Count => "count",
                Ended::Duration => "duration",
                Ended::Signal => "signal",
                Ended::DiskFull => "disk-full",
            }
            .to_string();
            c.direct_io = done.direct_io;
        }
        m.late_records = late_records(watched);
        m.drops = Some(Drops {
            kernel_seen: kernel_total.packets,
            kernel: kernel_total.drops,
            pcap: sampler.totals.total_pcap_drops,
            pcap_write: done.pcap_write_lost,
            ring_unread: end.unread,
            records_write: sampler.totals.total_records_drops,
            flows_write: flow_slices_lost(watched),
            stats_write: sampler.stats_lost,
        });
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_the_workers_never_took_are_counted_and_said_only_when_many() {
        let k = KernelStats {
            packets: 10_000,
            drops: 500,
            ..Default::default()
        };
        let mut warnings = Vec::new();
        // A few frames after the last read: counted, not a fault.
        assert_eq!(unread_frames(&k, 9_000, &[], &mut warnings), 500);
        assert!(warnings.is_empty());
        // Thousands lost between kernel and worker: a fault, with the rings.
        let states = ["r0".to_string(), "r1".to_string()];
        assert_eq!(unread_frames(&k, 5_000, &states, &mut warnings), 4_500);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("4500 frames the kernel placed"));
        assert!(warnings[0].ends_with("r0; r1"), "{}", warnings[0]);
        // The workers took more than the kernel counted: none unread.
        assert_eq!(unread_frames(&k, 20_000, &[], &mut warnings), 0);
    }
}
