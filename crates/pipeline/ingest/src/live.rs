//! Live capture: AF_PACKET rings in a fanout group, one worker thread per
//! ring, each feeding its own sinks; a stats row per worker per second.
//!
//! A worker takes whole blocks of frames from its ring, parses each frame
//! once and hands it to its sinks: the pcap spool (staging blocks for a
//! writer thread; full staging means a counted drop, never a wait) and the
//! packet records. Nothing is shared between workers but the stop flag and,
//! with `-c`, the frame count.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use capture::FanoutBy;
use capture::Interface;
use capture::bpf::SocketProgram;
use capture::filter::Filter;
use capture::ring::{
    Fanout, KernelStats, RingError, RingOptions, RxRing, SocketFilter, kernel_stats,
};
use capture::shard::{self, Shard, Verdict};
use pcapio::retention::{RemovedFile, Retention};
use pcapio::seekable::Codec;
use pcapio::spool::{OnFull, PcapFileInfo, Spool, SpoolOptions, SpoolReport, SpoolShared, spool};
use store::manifest::{
    CaptureInfo, Drops, Files, InterfaceEntry, Manifest, PcapFileEntry, RemovedPcapEntry, RunInfo,
    ShardInfo, TimeSpan,
};
use store::stats::{StatsRow, StatsWriter};
use store::{Dataset, StoreError};
use wire::LinkType;

use crate::stats::FrameStats;
use crate::worker::{FrameMeta, Worker, WorkerOptions};

/// Where the pcap sink writes.
#[derive(Clone, Debug)]
pub struct PcapOut {
    pub dir: PathBuf,
    /// `-w FILE`: exactly this name (one worker), else per-worker names.
    pub single_name: Option<String>,
    pub rotate_bytes: Option<u64>,
    pub rotate: Option<Duration>,
    /// Staging memory per worker.
    pub staging_bytes: usize,
    pub codec: Codec,
    /// O_DIRECT writes where the filesystem takes them.
    pub direct: bool,
    pub on_full: OnFull,
    /// Retention: delete the oldest files past this many bytes of pcap on
    /// disk, or once their newest frame is this old.
    pub max_disk: Option<u64>,
    pub max_age: Option<Duration>,
}

/// Everything a live capture needs to know.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    pub interfaces: Vec<Interface>,
    pub workers_per_iface: usize,
    pub ring: RingOptions,
    pub snaplen: u32,
    pub filter: Option<String>,
    /// Keep only this share of the flows (`--shard K/N`).
    pub shard: Option<Shard>,
    /// How an interface's rings share its frames, when it has several.
    pub fanout: FanoutBy,
    pub promiscuous: bool,
    pub pcap: Option<PcapOut>,
    pub records: bool,
    /// What every writer does when the disk is full (`--on-full`).
    pub on_full: OnFull,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub worker: WorkerOptions,
    /// A copy of every record to each worker's tap (`--kafka`).
    pub taps: Option<crate::worker::Taps>,
    pub command: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Ring(#[from] RingError),
    #[error(transparent)]
    Filter(#[from] capture::FilterError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Usage(String),
    #[error(
        "{iface}: the kernel did not take weir's fanout program ({message}); pass --fanout \
         kernel (or auto) to deal frames to the workers by the kernel's own flow hash"
    )]
    Fanout { iface: String, message: String },
    #[error("--shard {shard} on {iface}: {message}")]
    Shard {
        shard: Shard,
        iface: String,
        message: String,
    },
    #[error("starting a thread: {0}")]
    Thread(std::io::Error),
}

/// Counters a worker publishes for the stats thread.
#[derive(Debug, Default)]
struct Counters {
    frames: AtomicU64,
    bytes: AtomicU64,
    /// The pcap writer's numbers, when there is one.
    spool: std::sync::OnceLock<Arc<SpoolShared>>,
    pcap_frames: AtomicU64,
    pcap_drops: AtomicU64,
    records: AtomicU64,
    /// Of those, records not on disk (a full disk), since the start.
    records_drops: AtomicU64,
    /// Flows-table slices lost with flows files not written.
    flow_slices_lost: AtomicU64,
    ring_backlog: AtomicU64,
    pcap_backlog: AtomicU64,
    hw_timestamps: AtomicU64,
}

/// One ring and what its worker will need.
struct Slot {
    ring: RxRing,
    worker: u16,
    iface: u16,
    link: LinkType,
    counters: Arc<Counters>,
    /// The program that deals the interface's frames to its rings
    /// (`--fanout flow` with several rings).
    fanout: Option<Arc<SocketProgram>>,
}

/// Rings opened and filters attached: the privileged part. Drop privileges
/// after this, then [`Opened::run`].
pub struct Opened {
    opts: LiveOptions,
    slots: Vec<Slot>,
    libpcap: String,
    /// What opening settled for, to tell the user (not a problem with
    /// the data).
    notes: Vec<String>,
}

/// Opens every ring (all of an interface's rings in one fanout group) with
/// the filter attached. A bad filter, a missing permission or a refused ring
/// size is reported here, before any traffic is taken.
pub fn open(mut opts: LiveOptions) -> Result<Opened, LiveError> {
    let mut notes = Vec::new();
    if opts.interfaces.is_empty() {
        return Err(LiveError::Usage(
            "give at least one interface with -i".into(),
        ));
    }
    let workers = opts.workers_per_iface.max(1);
    let mut slots: Vec<Slot> = Vec::new();
    for (k, iface) in opts.interfaces.iter().enumerate() {
        let link = iface.link_type().ok_or_else(|| {
            LiveError::Usage(format!(
                "{}: weir does not capture on this kind of interface yet (ARPHRD {}); Ethernet, \
                 loopback and IP tunnels are supported",
                iface.name, iface.arphrd
            ))
        })?;
        let filter: Option<Filter> = match &opts.filter {
            Some(expr) => Some(capture::compile_filter(expr, link, opts.snaplen)?),
            None => None,
        };
        // With a shard, one eBPF program does both: the share test, then
        // the tcpdump filter translated (a socket holds one filter).
        let program = match opts.shard {
            Some(s) => {
                let fail = |message: String| LiveError::Shard {
                    shard: s,
                    iface: iface.name.clone(),
                    message,
                };
                Some(
                    shard::load(
                        link,
                        Verdict::Keep(s),
                        filter.as_ref().map(|f| f.program.as_slice()),
                        "weir_shard",
                    )
                    .map_err(fail)?,
                )
            }
            None => None,
        };
        // Several rings: weir's flow hash deals the frames, unless the
        // kernel's is asked for, or (unasked) the process may not load it.
        let fanout = match opts.fanout {
            FanoutBy::Flow | FanoutBy::Auto if workers > 1 => {
                match shard::load(link, Verdict::Fanout, None, "weir_fanout") {
                    Ok(p) => Some(Arc::new(p)),
                    Err(message) if opts.fanout == FanoutBy::Auto => {
                        notes.push(format!(
                            "{}: the workers share frames by the kernel's flow hash, not weir's: \
                             {message} (weir's needs root or CAP_BPF; with the kernel's, a flow \
                             inside a UDP tunnel may reach two workers)",
                            iface.name
                        ));
                        opts.fanout = FanoutBy::Kernel;
                        for slot in &mut slots {
                            slot.fanout = None;
                        }
                        None
                    }
                    Err(message) => {
                        return Err(LiveError::Fanout {
                            iface: iface.name.clone(),
                            message,
                        });
                    }
                }
            }
            _ => None,
        };
        let socket_filter = match (&program, &filter) {
            (Some(p), _) => Some(SocketFilter::Program(p)),
            (None, Some(f)) => Some(SocketFilter::Classic(&f.program)),
            (None, None) => None,
        };
        for _ in 0..workers {
            let ring = RxRing::open(iface, opts.ring, socket_filter, opts.promiscuous)?;
            slots.push(Slot {
                ring,
                worker: slots.len() as u16,
                iface: k as u16,
                link,
                counters: Arc::new(Counters::default()),
                fanout: fanout.clone(),
            });
        }
    }
    if opts.fanout == FanoutBy::Auto {
        opts.fanout = FanoutBy::Flow;
    }
    Ok(Opened {
        opts,
        slots,
        notes,
        libpcap: capture::filter::libpcap_version(),
    })
}

/// Once a second while the capture runs.
#[derive(Clone, Debug, Default)]
pub struct Second {
    pub elapsed: Duration,
    /// Over the last second, all workers together.
    pub frames: u64,
    pub bytes: u64,
    pub kernel_drops: u64,
    pub pcap_drops: u64,
    pub records_drops: u64,
    /// Since the start.
    pub total_frames: u64,
    pub total_kernel_drops: u64,
    pub total_pcap_drops: u64,
    pub total_records_drops: u64,
    /// `--on-full drop`: the disk is full, and the records, flows and stats
    /// writers drop (and count) what they cannot write until space returns.
    pub disk_full: bool,
}

/// What ended a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    Count,
    Duration,
    Signal,
    /// The disk filled and `--on-full stop` was in force.
    DiskFull,
}

/// The outcome of a capture.
#[derive(Debug)]
pub struct LiveReport {
    pub manifest: Option<Manifest>,
    pub frames: u64,
    pub kernel_seen: u64,
    pub kernel_drops: u64,
    pub pcap_drops: u64,
    /// Of the pcap drops, frames lost to failed writes.
    pub pcap_write_lost: u64,
    pub pcap_files: Vec<PcapFileInfo>,
    /// Files retention deleted.
    pub pcap_removed: usize,
    pub ended: Ended,
    pub elapsed: Duration,
    /// Problems that did not stop the capture (a pcap write error, say).
    pub warnings: Vec<String>,
}

struct WorkerOut {
    ring: RxRing,
    records: Option<crate::worker::WorkerDone>,
    spool: Option<JoinHandle<SpoolReport>>,
    error: Option<String>,
}

impl Opened {
    /// Interfaces and rings, for messages.
    /// What opening settled for (weir's fanout program refused, the
    /// kernel's hash used instead), to tell the user at the start.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn rings(&self) -> usize {
        self.slots.len()
    }

    /// The dataset's manifest before any frame: what the capture is, with
    /// `ended_by: running`. Give it to [`store::Dataset::create_with_manifest`].
    pub fn manifest(&self) -> Manifest {
        base_manifest(&self.opts, &self.libpcap, self.slots.len() as u32)
    }

    /// Captures until `stop` is set, the count is reached or the duration
    /// is over; `on_second` sees the totals once a second. Writes the
    /// dataset (when one is given) and returns the totals.
    /// Starts the workers and their sinks, calls `on_ready` once every one
    /// is set up (staging written, record buffers backed), then reports
    /// each second through `on_second` until the capture ends.
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
            libpcap,
            notes: _,
        } = self;
        // The manifest before the first data file, so that a capture killed
        // at any moment leaves a dataset `weir recover` can put in order.
        if let Some(d) = dataset.filter(|d| !d.root().join(store::dataset::MANIFEST).is_file()) {
            d.write_manifest(&base_manifest(&opts, &libpcap, slots.len() as u32))?;
        }
        let stats_dir = match dataset {
            Some(d) => Some(d.subdir(store::dataset::STATS_DIR)?),
            None => None,
        };
        let stats = stats_dir
            .as_ref()
            .map(|d| StatsWriter::new(d, 60 * slots.len().max(1)));
        let watched: Vec<Watched> = slots.iter().map(Watched::of).collect();
        let retention = retention_of(&opts);
        let disk = DiskWatch {
            full: Default::default(),
            drop: opts.on_full == OnFull::Drop,
            dir: dataset.map(|d| d.root().to_path_buf()),
            reserve: match dataset {
                Some(d) => Some(Arc::new(store::dataset::SpaceReserve::hold(
                    d.root(),
                    SPACE_RESERVE,
                )?)),
                None => None,
            },
        };
        let live = Live {
            opts: &opts,
            libpcap: &libpcap,
            dataset,
            stop_flag: Arc::new(AtomicBool::new(false)),
            claimed: Arc::new(AtomicU64::new(0)),
            retention,
            published: Default::default(),
            disk: disk.clone(),
        };
        let handles = live.start_workers(slots)?;
        on_ready();
        // Time counts from here: setting up (writing gigabytes of staging,
        // slow when memory must first be reclaimed) must not eat into
        // --duration, or the capture would end as it starts and the
        // traffic that follows would sit unread in the rings.
        let mut sampler = Sampler {
            prev: vec![[0; 8]; watched.len()],
            held: Default::default(),
            held_limit: STATS_HELD_SECONDS * watched.len().max(1),
            stats_lost: 0,
            watched,
            kernel_total: KernelStats::default(),
            started: Instant::now(),
            stats,
            stats_files: Vec::new(),
            stats_tap: opts.taps.as_ref().and_then(|t| t.stats.clone()),
            totals: Second::default(),
            disk,
        };
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
        let mut done = join_workers(handles)?;
        // The last counts, read with the rings still open.
        let last = sampler.sample()?;
        on_second(&last);
        let ring_states: Vec<String> = (done.rings.iter())
            .enumerate()
            .map(|(k, r)| format!("ring {k}: {}", r.state()))
            .collect();
        done.rings.clear();
        if let Some(e) = done.first_error.take() {
            done.warnings.push(e);
        }
        let elapsed = sampler.started.elapsed();
        // Whatever ended the capture, the last stats file and the manifest
        // get the reserve's space.
        sampler.disk.release();
        let mut stats_files = std::mem::take(&mut sampler.stats_files);
        if let Some(mut s) = sampler.stats.take() {
            // Rows held while the disk was full go in first; those that
            // cannot are lost.
            while let Some(r) = sampler.held.pop_front() {
                if s.push(r).is_err() {
                    sampler.stats_lost += sampler.held.len() as u64;
                    sampler.held.clear();
                }
            }
            let (files, failed) = s.finish_or_give_up();
            stats_files.extend(files);
            if let Some((e, lost)) = failed {
                sampler.stats_lost += lost;
                if e.is_disk_full() {
                    sampler.disk.hit();
                }
                done.warnings
                    .push(format!("the last {lost} stats rows are lost: {e}"));
            }
        }
        if ended == Ended::DiskFull || (sampler.disk.is_full() && !sampler.disk.drop) {
            done.warnings.push(format!(
                "{}: the disk is full, so the capture stopped (--on-full stop); every file \
                 listed in the manifest is complete. Free space, write elsewhere, or use \
                 --on-full drop to keep capturing and count what is lost",
                dataset.map_or_else(|| "the output".into(), |d| d.root().display().to_string())
            ));
        }
        let frames = sampler.totals.total_frames;
        let lost_to_disk = [
            sampler.totals.total_records_drops,
            flow_slices_lost(&sampler.watched),
            sampler.stats_lost,
        ];
        if sampler.disk.drop && lost_to_disk.iter().any(|&n| n > 0) {
            let [records, slices, rows] = lost_to_disk;
            done.warnings.push(format!(
                "{}: the disk filled during the capture (--on-full drop): {records} packet \
                 records, {slices} flows slices and {rows} stats rows could not be written; \
                 they are counted in the manifest's drops, and every file it lists is whole",
                dataset.map_or_else(|| "the output".into(), |d| d.root().display().to_string())
            ));
        }
        let kernel_total = sampler.kernel_total;
        let unread = unread_frames(&kernel_total, frames, &ring_states, &mut done.warnings);
        let (removed, retention_errors) = (live.retention.as_ref())
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
        let manifest = match dataset {
            Some(d) => {
                let m = live.final_manifest(&mut done, &sampler, &end);
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
}

/// A worker's ring and counters, as the stats loop reads them.
struct Watched {
    worker: u16,
    iface: u16,
    fd: i32,
    counters: Arc<Counters>,
}

impl Watched {
    fn of(s: &Slot) -> Watched {
        Watched {
            worker: s.worker,
            iface: s.iface,
            fd: s.ring.raw_fd(),
            counters: s.counters.clone(),
        }
    }
}

/// The pcap files' retention, when there is a limit.
fn retention_of(opts: &LiveOptions) -> Option<Arc<Retention>> {
    opts.pcap
        .as_ref()
        .filter(|p| p.max_disk.is_some() || p.max_age.is_some())
        .map(|p| {
            Arc::new(Retention::new(
                p.max_disk,
                p.max_age.map(|d| d.as_nanos() as i64),
            ))
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

/// Space a capture holds in its dataset's directory: enough for every
/// writer's last block and footer and the manifest. `--on-full stop` gives
/// it back when the disk fills, so that every file can close; `--on-full
/// drop` keeps it until the workers are done (files that cannot be written
/// are given up and counted instead), so that the last stats rows and the
/// final manifest always have room, however long the disk stays full.
const SPACE_RESERVE: usize = 4 << 20;

/// `--on-full drop`: the writers resume once the dataset's file system has
/// this much free again, room for a records row group or a stats file, so
/// that a writer does not start a file only to give it up at once.
const RESUME_FREE: u64 = SPACE_RESERVE as u64;

/// `--on-full drop`: stats rows held in memory (per worker) while the disk
/// is full, written when space returns; older ones are dropped and counted.
const STATS_HELD_SECONDS: usize = 3600;

/// What a running capture's steps share.
struct Live<'a> {
    opts: &'a LiveOptions,
    libpcap: &'a str,
    dataset: Option<&'a Dataset>,
    /// Tells the workers to stop.
    stop_flag: Arc<AtomicBool>,
    /// Frames the workers have taken, for `-c`.
    claimed: Arc<AtomicU64>,
    retention: Option<Arc<Retention>>,
    /// Files finished while the capture runs, for its manifest.
    published: crate::worker::Published,
    disk: DiskWatch,
}

/// The stats loop's counts: each worker's at the last second, and the
/// totals since the start.
struct Sampler {
    watched: Vec<Watched>,
    prev: Vec<[u64; 8]>,
    /// Rows sampled while the disk is full (`--on-full drop`), oldest first.
    held: std::collections::VecDeque<StatsRow>,
    held_limit: usize,
    /// Stats rows that could not be written.
    stats_lost: u64,
    kernel_total: KernelStats,
    started: Instant,
    stats: Option<StatsWriter>,
    /// Stats files finished early (the disk filled).
    stats_files: Vec<String>,
    stats_tap: Option<crate::worker::StatsTap>,
    totals: Second,
    disk: DiskWatch,
}

impl Sampler {
    fn sample(&mut self) -> Result<Second, LiveError> {
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
            let mut queue: std::collections::VecDeque<StatsRow> = std::mem::take(&mut self.held);
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
        second.disk_full = self.disk.dropping();
        Ok(second)
    }
}

/// The disk filling under any writer but the pcap spool (which watches its
/// own writes): a flag, and the reserve. With `--on-full stop` the stats
/// loop ends the capture on the flag and the reserve is given back at once
/// so that every file can close; with `--on-full drop` the writers drop
/// and count while the flag is set, and the stats loop clears it once a
/// second if space has returned.
#[derive(Clone, Default)]
struct DiskWatch {
    full: Arc<AtomicBool>,
    reserve: Option<Arc<store::dataset::SpaceReserve>>,
    /// `--on-full drop`.
    drop: bool,
    /// The dataset, whose file system's free space says when to resume.
    dir: Option<PathBuf>,
}

impl DiskWatch {
    fn hit(&self) {
        self.full.store(true, Ordering::SeqCst);
        if !self.drop {
            self.release();
        }
    }

    fn release(&self) {
        if let Some(r) = &self.reserve {
            r.release();
        }
    }

    fn is_full(&self) -> bool {
        self.full.load(Ordering::SeqCst)
    }

    /// `--on-full drop` and the disk is full: drop and count.
    fn dropping(&self) -> bool {
        self.drop && self.is_full()
    }

    /// `--on-full drop`, once a second: space has returned when the file
    /// system has [`RESUME_FREE`] free; the writers then resume.
    fn recheck(&self) {
        if self.dropping()
            && (self.dir.as_deref())
                .and_then(free_bytes)
                .is_some_and(|b| b >= RESUME_FREE)
        {
            self.full.store(false, Ordering::SeqCst);
        }
    }
}

/// Bytes an unprivileged writer may still use on the file system of `dir`.
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a NUL-terminated path and a buffer statvfs fills on success.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    // The casts widen on 32-bit targets, where these fields are narrower.
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// Flows-table slices the workers lost, together.
fn flow_slices_lost(watched: &[Watched]) -> u64 {
    (watched.iter())
        .map(|w| w.counters.flow_slices_lost.load(Ordering::Relaxed))
        .sum()
}

/// What the workers and their pcap writers handed back.
#[derive(Default)]
struct Joined {
    records_files: Vec<store::PacketFileSummary>,
    rpc_info: Option<store::manifest::RpcInfo>,
    app_info: Option<store::manifest::AppInfo>,
    frame_stats: FrameStats,
    pcap_files: Vec<PcapFileInfo>,
    /// Kept open until the last counts are read.
    rings: Vec<RxRing>,
    first_error: Option<String>,
    pcap_write_lost: u64,
    direct_io: bool,
    warnings: Vec<String>,
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
    /// Sets up every worker's sinks, starts the rings (one fanout group per
    /// interface, when it has several rings) and the worker threads.
    fn start_workers(&self, slots: Vec<Slot>) -> Result<Vec<JoinHandle<WorkerOut>>, LiveError> {
        let opts = self.opts;
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
        let mut groups: Vec<Option<Fanout>> = vec![None; opts.interfaces.len()];
        let fan = opts.workers_per_iface > 1;
        let started = ctxs.iter_mut().try_for_each(|ctx| {
            let group =
                groups[ctx.slot.iface as usize].get_or_insert_with(|| match &ctx.slot.fanout {
                    Some(p) => Fanout::by_program(p),
                    None => Fanout::new(),
                });
            ctx.slot.ring.start(fan.then_some(group))
        });
        if let Err(e) = started {
            abandon(ctxs);
            return Err(e.into());
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

    /// One worker's sinks: its pcap spool (and writer thread) and its
    /// records worker with the first file open.
    fn set_up_worker(&self, slot: Slot, rings: usize) -> Result<WorkerCtx, LiveError> {
        let opts = self.opts;
        let spool = match &opts.pcap {
            Some(p) => Some(self.start_spool(p, &slot, rings)?),
            None => None,
        };
        let records = match (opts.records, self.dataset) {
            (true, Some(d)) => {
                // Row buffers backed and the first file open before any
                // frame arrives: the capture path never meets fresh memory.
                let mut wo = opts.worker;
                wo.writer.prefault = true;
                let mut w = Worker::new(slot.worker, d.clone(), wo);
                w.publish_to(self.published.clone());
                if let Some(t) = &opts.taps {
                    w.set_tap((t.records)(slot.worker));
                }
                if let Err(e) = w.open_file() {
                    end_spool(spool);
                    return Err(e.into());
                }
                Some(w)
            }
            _ => None,
        };
        Ok(WorkerCtx {
            slot,
            spool,
            records,
            disk: self.disk.clone(),
            stop: self.stop_flag.clone(),
            claimed: self.claimed.clone(),
            limit: opts.count,
        })
    }

    /// A worker's pcap spool and its writer thread.
    fn start_spool(
        &self,
        p: &PcapOut,
        slot: &Slot,
        rings: usize,
    ) -> Result<(Spool, JoinHandle<SpoolReport>), LiveError> {
        let single = p.single_name.clone().filter(|_| rings == 1);
        let o = SpoolOptions {
            dir: p.dir.clone(),
            prefix: match &p.single_name {
                Some(n) => format!("{n}.w{}", slot.worker),
                None => format!("w{:03}", slot.worker),
            },
            single_name: single,
            link: slot.link,
            snaplen: self.opts.snaplen,
            rotate_bytes: p.rotate_bytes,
            rotate_ns: p.rotate.map(|d| d.as_nanos() as i64),
            // A block being filled and the one being written
            // both fit in a core's L2 cache.
            block_bytes: 256 << 10,
            blocks: (p.staging_bytes >> 18).max(4),
            first_file_id: (slot.worker as u32) << 20,
            codec: p.codec,
            direct: p.direct,
            on_full: p.on_full,
            retention: self.retention.clone(),
        };
        let (s, h) = spool(o).map_err(LiveError::Thread)?;
        let _ = slot.counters.spool.set(s.shared());
        Ok((s, h))
    }

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
        } else if (self.opts.duration).is_some_and(|d| sampler.started.elapsed() >= d) {
            Some(Ended::Duration)
        } else if (self.opts.count).is_some_and(|c| self.claimed.load(Ordering::Relaxed) >= c) {
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
        let now = Announced {
            packets: packets.len(),
            pcap: pcap.len(),
            removed: removed.len(),
        };
        if now != *announced {
            let m = running_manifest(
                base_manifest(self.opts, self.libpcap, watched.len() as u32),
                packets,
                &pcap,
                &removed,
            );
            match d.write_manifest(&m) {
                Ok(_) => *announced = now,
                // Tried again next second; the manifest on disk stays whole.
                Err(e) if e.is_disk_full() => self.disk.hit(),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
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

/// How many files the running manifest last listed.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Announced {
    packets: usize,
    pcap: usize,
    removed: usize,
}

/// Workers set up but not started, given up (a later step failed): each
/// pcap writer is told to end (its channel closes) and waited for.
fn abandon(ctxs: Vec<WorkerCtx>) {
    for ctx in ctxs {
        end_spool(ctx.spool);
    }
}

fn end_spool(spool: Option<(Spool, JoinHandle<SpoolReport>)>) {
    if let Some((s, h)) = spool {
        drop(s);
        let _ = h.join();
    }
}

/// Waits for every worker and its pcap writer and gathers what they made.
/// Every one is waited for, even after one has panicked.
fn join_workers(handles: Vec<JoinHandle<WorkerOut>>) -> Result<Joined, LiveError> {
    let mut j = Joined::default();
    let mut panicked = None;
    for h in handles {
        let Ok(out) = h.join() else {
            panicked = Some(LiveError::Usage(
                "a capture worker panicked; this is a bug in weir".into(),
            ));
            continue;
        };
        if let Some(e) = out.error {
            j.first_error.get_or_insert(e);
        }
        if let Some(done) = out.records {
            j.records_files.extend(done.files);
            j.frame_stats.merge(&done.stats);
            if let Some(info) = done.rpc {
                j.rpc_info.get_or_insert_with(Default::default).merge(info);
            }
            if let Some(e) = done.rpc_error {
                j.warnings.push(format!("RPC decoding stopped early: {e}"));
            }
            if let Some(info) = done.app {
                j.app_info.get_or_insert_with(Default::default).merge(info);
            }
            if let Some(e) = done.app_error {
                j.warnings
                    .push(format!("DNS/TLS/HTTP decoding stopped early: {e}"));
            }
        }
        if let Some(h) = out.spool {
            let Ok(report) = h.join() else {
                panicked = Some(LiveError::Usage(
                    "a pcap writer panicked; this is a bug in weir".into(),
                ));
                continue;
            };
            if let Some(e) = report.error {
                j.warnings.push(format!(
                    "pcap writing failed: {e}; {} frames staged after the last whole block \
                     on disk were not written (counted as pcap drops); every file is closed \
                     at a whole frame",
                    report.frames_lost
                ));
            }
            j.direct_io |= report.direct;
            j.pcap_write_lost += report.frames_lost;
            j.pcap_files.extend(report.files);
        }
        j.rings.push(out.ring);
    }
    match panicked {
        Some(e) => Err(e),
        None => Ok(j),
    }
}

/// The wall clock, ns since the epoch (frames' timestamps are on it).
fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The manifest's entries for pcap files, by id.
fn pcap_entries(files: &[PcapFileInfo]) -> Vec<PcapFileEntry> {
    let mut pcap: Vec<PcapFileEntry> = files
        .iter()
        .map(|f| PcapFileEntry {
            id: f.id,
            path: format!("{}/{}", store::dataset::PCAP_DIR, f.name),
            frames: f.frames,
            bytes: f.bytes,
            ts_first: f.ts_first,
            ts_last: f.ts_last,
            stored_bytes: (!f.methods.is_empty()).then_some(f.stored_bytes),
            methods: f.methods.clone(),
            digest: f.digest,
        })
        .collect();
    pcap.sort_by_key(|f| f.id);
    pcap
}

/// The manifest's entries for pcap files retention removed.
fn removed_entries(removed: &[RemovedFile]) -> Vec<RemovedPcapEntry> {
    removed
        .iter()
        .map(|f| RemovedPcapEntry {
            id: f.id,
            path: format!("{}/{}", store::dataset::PCAP_DIR, f.name),
            frames: f.frames,
            stored_bytes: f.stored_bytes,
            ts_first: f.ts_first,
            ts_last: f.ts_last,
            reason: f.reason.clone(),
            overwritten_by: f
                .overwritten_by
                .as_ref()
                .map(|n| format!("{}/{n}", store::dataset::PCAP_DIR)),
        })
        .collect()
}

/// The manifest of a running capture: its finished files, and the time
/// span and frames they hold (still `ended_by: running`).
fn running_manifest(
    mut m: Manifest,
    mut packets: Vec<store::PacketFileSummary>,
    pcap: &[PcapFileInfo],
    removed: &[RemovedFile],
) -> Manifest {
    packets.sort_by(|a, b| a.path.cmp(&b.path));
    let gone: std::collections::HashSet<u32> = removed.iter().map(|f| f.id).collect();
    let kept: Vec<PcapFileInfo> = pcap
        .iter()
        .filter(|f| !gone.contains(&f.id))
        .cloned()
        .collect();
    let mut lo = packets.iter().filter_map(|f| f.ts_min).min();
    let mut hi = packets.iter().filter_map(|f| f.ts_max).max();
    for f in &kept {
        lo = lo.into_iter().chain(f.ts_first).min();
        hi = hi.into_iter().chain(f.ts_last).max();
    }
    m.time_span = lo.zip(hi).map(|(a, b)| TimeSpan::new(a, b));
    let rows: u64 = packets.iter().map(|f| f.rows).sum();
    let frames: u64 = kept.iter().map(|f| f.frames).sum();
    m.counts.frames = if packets.is_empty() { frames } else { rows };
    m.files.packets = packets;
    m.files.pcap = pcap_entries(&kept);
    m.files.pcap_removed = removed_entries(removed);
    m
}

/// The manifest of a capture before anything is known of its traffic:
/// written when the capture starts (ended_by "running"), so that a dataset
/// whose capture was killed still says how it was made, and completed at
/// the end (or by `weir recover`).
fn base_manifest(opts: &LiveOptions, libpcap: &str, workers: u32) -> Manifest {
    Manifest {
        interfaces: opts
            .interfaces
            .iter()
            .map(|i| {
                let link = i.link_type().unwrap_or(LinkType::ETHERNET);
                InterfaceEntry {
                    source: 0,
                    link_type: link.0,
                    link_name: link.name().to_string(),
                    name: Some(i.name.clone()),
                    description: None,
                    snaplen: opts.snaplen,
                    ts_units_per_sec: 1_000_000_000,
                    dropped: None,
                    received: None,
                }
            })
            .collect(),
        run: Some(RunInfo {
            command: opts.command.clone(),
            workers,
            elapsed_s: 0.0,
            frames_per_s: 0.0,
        }),
        capture: Some(CaptureInfo {
            workers_per_interface: opts.workers_per_iface as u32,
            snaplen: opts.snaplen,
            filter: opts.filter.clone(),
            ring_bytes: opts.ring.total() as u64,
            promiscuous: opts.promiscuous,
            libpcap: libpcap.to_string(),
            sinks: [
                opts.pcap.as_ref().map(|_| "pcap"),
                opts.records.then_some("records"),
                Some("stats"),
            ]
            .into_iter()
            .flatten()
            .map(str::to_string)
            .collect(),
            rotate_bytes: opts.pcap.as_ref().and_then(|p| p.rotate_bytes),
            rotate_seconds: opts
                .pcap
                .as_ref()
                .and_then(|p| p.rotate)
                .map(|d| d.as_secs_f64()),
            ended_by: "running".to_string(),
            compress: opts.pcap.as_ref().map(|p| p.codec.to_string()),
            direct_io: false,
            max_disk_bytes: opts.pcap.as_ref().and_then(|p| p.max_disk),
            fanout: (opts.workers_per_iface > 1).then(|| opts.fanout.describe().to_string()),
            shard: opts.shard.map(|s| ShardInfo {
                index: s.index,
                count: s.count,
                hash: "weir flow hash v1 (wire::flow); share = flow_hash % count, frames \
                       without a flow hash in share 0"
                    .to_string(),
            }),
            max_age_seconds: opts
                .pcap
                .as_ref()
                .and_then(|p| p.max_age)
                .map(|d| d.as_secs_f64()),
        }),
        ..Manifest::new("capture", "kernel", opts.worker.writer.order)
    }
}

fn totals_bytes(watched: &[Watched]) -> u64 {
    (watched.iter())
        .map(|w| w.counters.bytes.load(Ordering::Relaxed))
        .sum()
}

fn span(st: &FrameStats, pcap: &[PcapFileInfo]) -> (Option<i64>, Option<i64>) {
    let mut first = (st.frames > 0).then_some(st.ts_min);
    let mut last = (st.frames > 0).then_some(st.ts_max);
    for f in pcap {
        if let Some(t) = f.ts_first {
            first = Some(first.map_or(t, |x| x.min(t)));
        }
        if let Some(t) = f.ts_last {
            last = Some(last.map_or(t, |x| x.max(t)));
        }
    }
    (first, last)
}

/// Reads every worker's counters and the kernel's, writes a stats row per
/// worker, and sums them for the caller.
/// What a stats tap is called as.
type StatsTapFn = dyn Fn(&[StatsRow]) + Send + Sync;

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
        let k = kernel_stats(w.fd).unwrap_or_default();
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

struct WorkerCtx {
    slot: Slot,
    spool: Option<(Spool, JoinHandle<SpoolReport>)>,
    records: Option<Worker>,
    disk: DiskWatch,
    stop: Arc<AtomicBool>,
    claimed: Arc<AtomicU64>,
    limit: Option<u64>,
}

/// The per-worker loop: blocks from the ring, frames to the sinks.
fn run_worker(ctx: WorkerCtx) -> WorkerOut {
    let WorkerCtx {
        mut slot,
        spool,
        mut records,
        disk,
        stop,
        claimed,
        limit,
    } = ctx;
    // A records error ends the capture; a full disk also gives the reserve
    // back, so that this worker's file (and the others') can still close.
    // With --on-full drop the worker has given its file up (counted) and
    // goes on, dropping records until space returns.
    let failed = |e: StoreError, error: &mut Option<String>| {
        if e.is_disk_full() {
            disk.hit();
            if disk.drop {
                return;
            }
        }
        error.get_or_insert(e.to_string());
        stop.store(true, Ordering::Relaxed);
    };
    // Frames that got no record: the disk was full, or records failed.
    let mut records_skipped = 0u64;
    let (mut spool, spool_handle) = match spool {
        Some((s, h)) => (Some(s), Some(h)),
        None => (None, None),
    };
    let retire = Duration::from_millis(slot.ring.options().retire_ms as u64 * 2 + 5);
    let mut vlan_buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut error: Option<String> = None;
    let mut last_tick = Instant::now();
    let c = slot.counters.clone();
    let (worker_id, iface, link) = (slot.worker, slot.iface, slot.link);
    let _ = worker_id;
    let mut door_closed = false;
    let ring_blocks = slot.ring.options().block_count;
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping && !door_closed {
            // Drain what the ring holds, not what keeps arriving: under
            // steady traffic the ring would never be empty.
            door_closed = true;
            if let Err(e) = slot.ring.stop_receiving() {
                error.get_or_insert(format!("{}: closing the ring: {e}", slot.ring.iface()));
                break;
            }
        }
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
            s.set_patient(records.is_none() || slot.ring.blocks_ready() * 2 <= ring_blocks);
        }
        let timeout = if stopping {
            retire
        } else {
            Duration::from_millis(100)
        };
        let result = slot.ring.next_block(timeout, |f| {
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
                    records_skipped += 1;
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
                    failed(e, &mut error);
                    recording = Some(false);
                }
            }
        });
        c.frames.fetch_add(frames, Ordering::Relaxed);
        c.bytes.fetch_add(bytes, Ordering::Relaxed);
        c.hw_timestamps.fetch_add(hw, Ordering::Relaxed);
        if let Some(s) = &spool {
            c.pcap_frames.fetch_add(staged, Ordering::Relaxed);
            c.pcap_drops.store(s.dropped, Ordering::Relaxed);
        }
        if let Some(w) = &records {
            c.records.fetch_add(frames, Ordering::Relaxed);
            c.records_drops
                .store(w.rows_lost() + records_skipped, Ordering::Relaxed);
            c.flow_slices_lost
                .store(w.flow_slices_lost(), Ordering::Relaxed);
        }
        let got = match result {
            Ok(n) => n,
            Err(e) => {
                error.get_or_insert(format!("{}: reading the ring: {e}", slot.ring.iface()));
                break;
            }
        };
        if last_tick.elapsed() >= Duration::from_millis(200) {
            last_tick = Instant::now();
            if let Some(w) = records.as_mut()
                && error.is_none()
                && let Err(e) = w.tick()
            {
                failed(e, &mut error);
            }
            c.ring_backlog
                .store(slot.ring.blocks_ready() as u64, Ordering::Relaxed);
            if let Some(s) = spool.as_mut() {
                // Light traffic: do not let staged frames sit in memory,
                // nor a file stay open past its time.
                s.flush_block();
                s.close_if_due(wall_ns());
                c.pcap_backlog.store(s.backlog() as u64, Ordering::Relaxed);
            }
        }
        if stopping && got == 0 {
            break;
        }
    }
    if let Some(s) = spool.take() {
        s.finish();
    }
    // The last file closes here, so that one the disk has no room for is
    // given up and counted like any other.
    if let Some(w) = records.as_mut() {
        if let Err(e) = w.close() {
            failed(e, &mut error);
        }
        c.records_drops
            .store(w.rows_lost() + records_skipped, Ordering::Relaxed);
        c.flow_slices_lost
            .store(w.flow_slices_lost(), Ordering::Relaxed);
    }
    let records = match records.take().map(|w| w.finish()) {
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            failed(e, &mut error);
            None
        }
        None => None,
    };
    WorkerOut {
        ring: slot.ring,
        records,
        spool: spool_handle,
        error,
    }
}
