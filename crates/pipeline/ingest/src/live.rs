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
    Fanout, KernelStats, RingError, RingOptions, RingSocket, RxRing, SocketFilter, kernel_stats,
};
use capture::shard::{self, Shard, Verdict};
use pcapio::retention::{RemovedFile, Retention};
use pcapio::seekable::Codec;
use pcapio::spool::{
    HandOn, OnFull, PcapFileInfo, Spool, SpoolOptions, SpoolReport, SpoolShared, spool,
};
use store::manifest::{
    CaptureInfo, Drops, Files, InterfaceEntry, Manifest, PcapFileEntry, RemovedPcapEntry, RunInfo,
    ShardInfo, TimeSpan,
};
use store::stats::{StatsRow, StatsWriter};
use store::{Dataset, StoreError};
use wire::LinkType;

use crate::stats::FrameStats;
use crate::worker::{FrameMeta, Worker, WorkerOptions};

mod disk;
mod manifest;
mod records;
mod rings;
mod sampler;
mod worker_loop;

use disk::*;
use manifest::*;
use records::*;
use sampler::*;
use worker_loop::*;

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
    /// Staged bytes per worker the records may fall behind the pcap files
    /// by before further records are built from the files (default: from
    /// the staging).
    pub records_lag: Option<usize>,
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
    /// The process keeps its privileges while it captures (root, no
    /// `-Z`): the program that deals to the full-size rings is loaded once
    /// the capture records, not before (the kernel's verifier takes tens
    /// of milliseconds over it, hundreds on a loaded machine).
    pub keeps_privileges: bool,
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
    /// Frames whose records the records thread put off (it fell behind),
    /// of those the records built since from the pcap files, and those
    /// that could not be (their file went first).
    records_late: AtomicU64,
    records_late_built: AtomicU64,
    records_late_lost: AtomicU64,
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
    /// The full-size ring to come, when the worker starts on a first ring.
    handover: Option<Arc<rings::Handover>>,
    /// The first ring hands over by a gate, in no fanout group.
    gated: bool,
}

/// Rings opened and filters attached: the privileged part. Drop privileges
/// after this, then [`Opened::run`].
pub struct Opened {
    opts: LiveOptions,
    slots: Vec<Slot>,
    /// Full-size rings to set up once the capture records.
    growths: Vec<rings::Growth>,
    /// The programs fanout groups deal by, held for the whole capture: a
    /// program's table of itself (which it runs again through for each
    /// encapsulation) is emptied by the kernel once no descriptor of it is
    /// open, and tunnelled frames would then be dealt by their outer flow.
    fanout_programs: Vec<Arc<SocketProgram>>,
    libpcap: String,
    /// What opening settled for, to tell the user (not a problem with
    /// the data).
    notes: Vec<String>,
}

/// Opens every ring (all of an interface's rings in one fanout group) with
/// the filter attached. A bad filter, a missing permission or a refused ring
/// size is reported here, before any traffic is taken. Where the full-size
/// ring is large, each worker's ring is a small first one, and the socket
/// of the full-size ring is made here (the privileged step) to be set up
/// once the capture records ([`rings`]).
pub fn open(mut opts: LiveOptions) -> Result<Opened, LiveError> {
    let mut notes = Vec::new();
    if opts.interfaces.is_empty() {
        return Err(LiveError::Usage(
            "give at least one interface with -i".into(),
        ));
    }
    let workers = opts.workers_per_iface.max(1);
    let first = rings::first_ring(opts.ring);
    // First every interface's programs, then the rings: weir's fanout
    // program refused on one interface means the kernel's hash on all.
    let mut plans: Vec<IfacePlan> = Vec::new();
    for iface in &opts.interfaces {
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
                Some(Arc::new(
                    shard::load(
                        link,
                        Verdict::Keep(s),
                        filter.as_ref().map(|f| f.program.as_slice()),
                        "weir_shard",
                    )
                    .map_err(fail)?,
                ))
            }
            None => None,
        };
        // Several rings: weir's flow hash deals the frames, unless the
        // kernel's is asked for, or (unasked) the process may not load it.
        // With first rings, the group deals among them, then among the
        // full-size rings that join after them.
        let n = workers as u32;
        let verdicts = match first {
            Some(_) => (
                Verdict::FanoutAmong { rings: n, first: 0 },
                Some(Verdict::FanoutAmong { rings: n, first: n }),
            ),
            None => (Verdict::Fanout, None),
        };
        let fanout = match opts.fanout {
            FanoutBy::Flow | FanoutBy::Auto if workers > 1 => {
                let now = verdicts.1.filter(|_| !opts.keeps_privileges);
                let loaded = shard::load(link, verdicts.0, None, "weir_fanout").and_then(|p| {
                    let then = now
                        .map(|v| shard::load(link, v, None, "weir_fanout_full"))
                        .transpose()?;
                    Ok((Arc::new(p), then.map(Arc::new)))
                });
                match loaded {
                    Ok(p) => Some(p),
                    Err(message) if opts.fanout == FanoutBy::Auto => {
                        notes.push(format!(
                            "{}: the workers share frames by the kernel's flow hash, not weir's: \
                             {message} (weir's needs root or CAP_BPF; with the kernel's, a flow \
                             inside a UDP tunnel may reach two workers)",
                            iface.name
                        ));
                        opts.fanout = FanoutBy::Kernel;
                        for plan in &mut plans {
                            plan.fanout = None;
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
        // One worker hands its first ring over to the full-size one by a
        // gate, in no group, where the programs load (root or CAP_BPF;
        // else a group of its own, as several workers do). A shard
        // program is a filter of its own: then a group too.
        let gate = match (first, workers, &program) {
            (Some(_), 1, None) => {
                capture::gate::Gate::load(filter.as_ref().map(|f| f.program.as_slice()))
                    .ok()
                    .map(Arc::new)
            }
            _ => None,
        };
        plans.push(IfacePlan {
            link,
            filter,
            program,
            fanout,
            gate,
        });
    }
    let mut slots: Vec<Slot> = Vec::new();
    let mut growths: Vec<rings::Growth> = Vec::new();
    let fanout_programs: Vec<Arc<SocketProgram>> = (plans.iter())
        .filter_map(|p| p.fanout.as_ref())
        .flat_map(|(a, b)| std::iter::once(a.clone()).chain(b.clone()))
        .collect();
    for (k, (iface, plan)) in opts.interfaces.iter().zip(plans).enumerate() {
        let socket_filter = match (&plan.gate, &plan.program, &plan.filter) {
            (Some(g), ..) => Some(SocketFilter::Program(&g.old)),
            (None, Some(p), _) => Some(SocketFilter::Program(p.as_ref())),
            (None, None, Some(f)) => Some(SocketFilter::Classic(&f.program)),
            (None, None, None) => None,
        };
        // A larger ring follows where the group can be told to deal to it:
        // one ring (a group of its own), or weir's flow hash over several
        // (the kernel's hash cannot be told).
        let deal_to = match (first, &plan.fanout) {
            (Some(_), _) if plan.gate.is_some() => plan.gate.clone().map(rings::DealTo::Gate),
            (Some(_), _) if workers == 1 => Some(rings::DealTo::Member(1)),
            (Some(_), Some((_, Some(then)))) => Some(rings::DealTo::Program(then.clone())),
            (Some(_), Some((_, None))) => Some(rings::DealTo::Load {
                link: plan.link,
                rings: workers as u32,
            }),
            _ => None,
        };
        let ring = match (&deal_to, first) {
            (Some(_), Some(f)) => f,
            _ => opts.ring,
        };
        let mut sockets = Vec::new();
        for _ in 0..workers {
            let r = RxRing::open(iface, ring, socket_filter, opts.promiscuous)?;
            let handover = match deal_to {
                Some(_) => {
                    let h = Arc::new(rings::Handover::new());
                    sockets.push((RingSocket::new(iface, opts.promiscuous)?, h.clone()));
                    Some(h)
                }
                None => None,
            };
            slots.push(Slot {
                ring: r,
                worker: slots.len() as u16,
                iface: k as u16,
                link: plan.link,
                counters: Arc::new(Counters::default()),
                fanout: plan.fanout.as_ref().map(|(p, _)| p.clone()),
                handover,
                gated: plan.gate.is_some(),
            });
        }
        if let Some(deal_to) = deal_to {
            growths.push(rings::Growth {
                iface: iface.name.clone(),
                index: k,
                sockets,
                ring: opts.ring,
                filter: rings::OwnedFilter {
                    classic: plan.filter.map(|f| f.program),
                    program: plan.program,
                },
                deal_to,
                group: None,
            });
        }
    }
    if opts.fanout == FanoutBy::Auto {
        opts.fanout = FanoutBy::Flow;
    }
    Ok(Opened {
        opts,
        slots,
        growths,
        fanout_programs,
        notes,
        libpcap: capture::filter::libpcap_version(),
    })
}

/// What opening settled for on one interface, before its rings open.
struct IfacePlan {
    link: LinkType,
    filter: Option<Filter>,
    /// The shard program (with the filter in it), when there is one.
    program: Option<Arc<SocketProgram>>,
    /// weir's fanout program, and the one that deals to the full-size
    /// rings when first rings come before them.
    fanout: Option<(Arc<SocketProgram>, Option<Arc<SocketProgram>>)>,
    /// One worker's hand-over to its full-size ring, in no group.
    gate: Option<Arc<capture::gate::Gate>>,
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
    /// The dataset's upload over the last second (`--upload`).
    pub upload: Option<store::stats::UploadSecond>,
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
        let stats_dir = match dataset {
            Some(d) => Some(d.subdir(store::dataset::STATS_DIR)?),
            None => None,
        };
        let stats = stats_dir
            .as_ref()
            .map(|d| StatsWriter::new(d, 60 * slots.len().max(1)));
        let watched: Vec<Watched> = slots.iter().map(Watched::of).collect();
        let retention = retention_of(&opts, dataset.and_then(|d| d.publisher().cloned()));
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
            grow_warnings: Default::default(),
            late_programs: Default::default(),
        };
        let handles = live.start_workers(slots, growths)?;
        on_ready();
        // Time counts from here: setting up (writing gigabytes of staging,
        // slow when memory must first be reclaimed) must not eat into
        // --duration, or the capture would end as it starts and the
        // traffic that follows would sit unread in the rings.
        let mut sampler = Sampler {
            prev: vec![[0; 8]; watched.len()],
            held: Default::default(),
            pcap_full: false,
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
            upload: dataset
                .and_then(|d| d.publisher().cloned())
                .map(|p| (p, Default::default())),
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
        done.warnings.extend(std::mem::take(
            &mut *live.grow_warnings.lock().unwrap_or_else(|e| e.into_inner()),
        ));
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

/// The pcap files' retention, when there is a limit; of the local copies
/// only when the dataset is uploaded by `uploader`.
fn retention_of(
    opts: &LiveOptions,
    uploader: Option<Arc<dyn util::storage::Publisher>>,
) -> Option<Arc<Retention>> {
    opts.pcap
        .as_ref()
        .filter(|p| p.max_disk.is_some() || p.max_age.is_some())
        .map(|p| {
            let r = Retention::new(p.max_disk, p.max_age.map(|d| d.as_nanos() as i64));
            Arc::new(match uploader {
                Some(u) => r.uploaded_first(u, store::dataset::PCAP_DIR),
                None => r,
            })
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
    /// What went wrong setting up the full-size rings.
    grow_warnings: Arc<std::sync::Mutex<Vec<String>>>,
    /// Fanout programs loaded while capturing, held to its end.
    late_programs: Arc<std::sync::Mutex<Vec<Arc<SocketProgram>>>>,
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

impl Joined {
    /// What one worker's records made.
    fn add_records(&mut self, done: crate::worker::WorkerDone) {
        self.records_files.extend(done.files);
        self.frame_stats.merge(&done.stats);
        if let Some(info) = done.rpc {
            self.rpc_info
                .get_or_insert_with(Default::default)
                .merge(info);
        }
        if let Some(e) = done.rpc_error {
            self.warnings
                .push(format!("RPC decoding stopped early: {e}"));
        }
        if let Some(info) = done.app {
            self.app_info
                .get_or_insert_with(Default::default)
                .merge(info);
        }
        if let Some(e) = done.app_error {
            self.warnings
                .push(format!("DNS/TLS/HTTP decoding stopped early: {e}"));
        }
    }
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
    fn start_workers(
        &self,
        slots: Vec<Slot>,
        mut growths: Vec<rings::Growth>,
    ) -> Result<Vec<JoinHandle<WorkerOut>>, LiveError> {
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
        });
        if let Err(e) = started {
            abandon(ctxs);
            return Err(e.into());
        }
        // The full-size rings are set up while the capture records.
        for g in &mut growths {
            g.group = groups[g.index];
        }
        if !growths.is_empty() {
            let (stop, warnings) = (self.stop_flag.clone(), self.grow_warnings.clone());
            let held = self.late_programs.clone();
            // Not waited for: a capture shorter than the set-up ends
            // without it (it sees the stop flag, or that the workers
            // ended, and hands nothing over).
            let grower = std::thread::Builder::new()
                .name("weir-rings".into())
                .spawn(move || rings::grow(growths, &stop, &warnings, &held));
            if let Err(e) = grower {
                abandon(ctxs);
                return Err(LiveError::Thread(e));
            }
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
        // With pcap, the records are made off the capture thread, from the
        // blocks the pcap writer has written.
        let (hand_on, from_writer) = match (&opts.pcap, &records) {
            (Some(p), Some(_)) => {
                let (h, rx) = HandOn::new(records_lag_blocks(p.staging_bytes, p.records_lag));
                (Some(h), Some(rx))
            }
            _ => (None, None),
        };
        let spool = match &opts.pcap {
            Some(p) => Some(self.start_spool(p, &slot, rings, hand_on)?),
            None => None,
        };
        let (records, records_thread) = match (records, from_writer, &spool, &opts.pcap) {
            (Some(worker), Some(from), Some((s, _)), Some(p)) => {
                let ctx = RecordsCtx {
                    worker,
                    from,
                    link: slot.link,
                    iface: slot.iface,
                    pcap_dir: p.dir.clone(),
                    pcap: s.shared(),
                    counters: slot.counters.clone(),
                    disk: self.disk.clone(),
                    stop: self.stop_flag.clone(),
                };
                let t = std::thread::Builder::new()
                    .name(format!("weir-rec{}", slot.worker))
                    .spawn(move || run_records(ctx));
                match t {
                    Ok(t) => (None, Some(t)),
                    Err(e) => {
                        end_spool(spool);
                        return Err(LiveError::Thread(e));
                    }
                }
            }
            (records, ..) => (records, None),
        };
        Ok(WorkerCtx {
            handover: slot.handover.clone(),
            slot,
            spool,
            records,
            records_thread,
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
        hand_on: Option<HandOn>,
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
            block_bytes: STAGING_BLOCK,
            blocks: (p.staging_bytes / STAGING_BLOCK).max(4),
            first_file_id: (slot.worker as u32) << 20,
            codec: p.codec,
            direct: p.direct,
            on_full: p.on_full,
            retention: self.retention.clone(),
            hand_on,
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
    let mut unfinished = Vec::new();
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
        // Its pcap writer has ended, so the records thread ends too; what
        // it put off is built after, below.
        if let Some(t) = out.records_thread {
            match t.join() {
                Ok(r) => unfinished.push(r),
                Err(_) => {
                    panicked = Some(LiveError::Usage(
                        "a records thread panicked; this is a bug in weir".into(),
                    ));
                }
            }
        }
        if let Some(done) = out.records {
            j.add_records(done);
        }
        j.rings.extend(out.rings);
    }
    // Every worker's late records, side by side, on threads of the
    // capture's own priority (the records threads ran at the lowest).
    let finishing: Vec<_> = unfinished
        .into_iter()
        .map(|r| {
            std::thread::Builder::new()
                .name("weir-late".into())
                .spawn(move || finish_records(r))
        })
        .collect();
    for t in finishing {
        match t.map_err(LiveError::Thread).map(|t| t.join()) {
            Ok(Ok(r)) => {
                if let Some(e) = r.error {
                    j.first_error.get_or_insert(e);
                }
                j.warnings.extend(r.warnings);
                if let Some(done) = r.records {
                    j.add_records(done);
                }
            }
            Ok(Err(_)) => {
                panicked = Some(LiveError::Usage(
                    "building the late records panicked; this is a bug in weir".into(),
                ))
            }
            Err(e) => panicked = Some(e),
        }
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
