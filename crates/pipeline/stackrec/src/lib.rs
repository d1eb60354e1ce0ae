//! `weir stack`'s recording: the programs of the stack source (loaded,
//! attached and read by the `stack` crate) into the dataset's stack table,
//! its per-second counters and the manifest's `stack` section.
//!
//! By default nothing runs on the packet path: every `--interval` an
//! iter/tcp walk reads each TCP socket's own counters and this writes
//! their differences into the stack_intervals table (state changes and
//! retransmissions still come one by one into the stack table). The
//! per-packet levels (`--with-device`, `--with-delay`) also have the
//! kernel add the frequent events up per socket, read at the same ticks;
//! with `--events all` every event is a record.
//!
//! The stack source's reader copies records off the ring buffers on the
//! calling thread; a writer thread puts them in time order, decodes them
//! and encodes them into Parquet, so that a slow disk delays only the
//! writer, and if that backs up, the kernel counts what the full ring
//! buffers could not take (per event type) instead of anything waiting.

use std::collections::{BTreeMap, HashMap};
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stack::event::{Decoder, RawEvent, kind};
use stack::interval::{Interval, Intervals, TCP_METRICS};
use stack::order::Reorder;
use stack::walk::{WalkRow, Walks};
use stack::{
    Attached, CHUNK_BYTES, Chunk, Loaded, Prepared, Probe, ProbeOptions, Reader, StackError,
};
use store::Dataset;
use store::manifest::{Manifest, ProgramCost, StackInfo, TimeSpan};
use store::stack::{EVENT_NAMES, STACK_DIR, StackWriter};
use store::stack_intervals::{Delays, INTERVALS_DIR, IntervalRow, IntervalWriter};
use store::stats::{StackCounts, StatsRow, StatsWriter};

/// Why a recording could not start or go on. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Stack(#[from] StackError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

/// How a recording is set up.
#[derive(Clone, Debug)]
pub struct StackOptions {
    /// Keep only events of this process (tgid), and of the sockets it uses.
    pub pid: Option<u32>,
    /// Keep only events of processes with this command name (≤ 15 bytes).
    pub comm: Option<String>,
    /// Keep only sockets and frames with one of these ports (either end).
    pub ports: Vec<u16>,
    /// A cgroup v2 directory: attach sock_ops there, and keep only the
    /// events of its processes.
    pub cgroup: Option<PathBuf>,
    /// Bytes of each CPU's ring buffer (a power of two, at least a page).
    pub ring_bytes: u32,
    /// Memory for records read but not yet written (the writer runs only
    /// on idle CPU time; when this is full, the ring buffer fills and the
    /// kernel counts the loss).
    pub buffer_bytes: u64,
    /// Record device transmit/receive.
    pub devices: bool,
    /// ... of pure TCP ACKs too (no payload, no SYN/FIN/RST).
    pub device_acks: bool,
    /// Snapshot every TCP socket this often (iter/tcp).
    pub snapshot_every: Option<Duration>,
    /// Switch the kernel's BPF run-time statistics on while recording and
    /// report each program's CPU time (costs two clock reads per run).
    pub program_stats: bool,
    /// The interval levels (the default): one stack_intervals row per
    /// socket and `interval`, from the socket walk and, with `level`
    /// above "walk", the per-packet aggregates; false is `--events all`.
    pub aggregate: bool,
    /// With `aggregate`: "walk", "device" or "delay"
    /// (`store::stack_intervals::LEVELS`).
    pub level: Level,
    /// How often the aggregates are read: one stack_intervals row per
    /// socket that did anything in it.
    pub interval: Duration,
    /// Sockets the kernel's per-socket map holds.
    pub sockets: u32,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Rows per stack file.
    pub rotate_rows: u64,
    /// Replace an earlier stack recording in the dataset.
    pub force: bool,
    /// Signs the dataset's seal (`--sign-key`).
    pub sign_key: Option<std::sync::Arc<store::integrity::SigningKey>>,
    /// Told of every manifest written (`--upload`), and how long the end
    /// waits for what it has not sent yet.
    pub publisher: Option<std::sync::Arc<dyn util::storage::Publisher>>,
    pub publish_wait: Duration,
    /// The command line, for the manifest.
    pub command: String,
}

impl Default for StackOptions {
    fn default() -> Self {
        StackOptions {
            pid: None,
            comm: None,
            ports: Vec::new(),
            cgroup: None,
            ring_bytes: 8 << 20,
            buffer_bytes: 256 << 20,
            devices: true,
            device_acks: true,
            snapshot_every: None,
            program_stats: false,
            aggregate: true,
            level: Level::Walk,
            interval: Duration::from_millis(100),
            sockets: 65536,
            duration: None,
            rotate_rows: 4 << 20,
            force: false,
            sign_key: None,
            publisher: None,
            publish_wait: Duration::ZERO,
            command: String::new(),
        }
    }
}

impl StackOptions {
    /// What the programs record.
    fn probe(&self) -> ProbeOptions {
        ProbeOptions {
            pid: self.pid,
            comm: self.comm.clone(),
            ports: self.ports.clone(),
            cgroup: self.cgroup.clone(),
            ring_bytes: self.ring_bytes,
            devices: self.devices,
            device_acks: self.device_acks,
            snapshot_every: self.snapshot_every,
            program_stats: self.program_stats,
            walk: self.aggregate,
            aggregate: self.aggregate && self.level >= Level::Device,
            delay: self.aggregate && self.level >= Level::Delay,
            sockets: self.sockets,
        }
    }
}

/// What the interval mode runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// The socket walk alone: nothing on the packet path.
    #[default]
    Walk,
    /// Also the per-packet aggregates: the application/device split.
    Device,
    /// Also the write-to-wire delay histogram.
    Delay,
}

impl Level {
    /// As the manifest names it.
    pub fn name(self) -> &'static str {
        store::stack_intervals::LEVELS[self as usize]
    }
}

/// One second of a recording, for a live display.
#[derive(Clone, Debug, Default)]
pub struct Second {
    pub events: u64,
    pub lost: u64,
    pub sockets: usize,
}

/// What a recording did.
#[derive(Clone, Debug, Default)]
pub struct StackReport {
    pub events: BTreeMap<String, u64>,
    pub lost: BTreeMap<String, u64>,
    /// Records user space could not read (wrong size or type): a bug if
    /// ever non-zero.
    pub malformed: u64,
    pub files: Vec<String>,
    /// stack_intervals files (the default mode).
    pub interval_files: Vec<String>,
    pub stats_files: Vec<String>,
    pub snapshots: u64,
    /// With `program_stats`: runs and ns per program.
    pub program_cost: BTreeMap<String, ProgramCost>,
    pub elapsed: Duration,
    pub ended_by: String,
    pub prepared: Prepared,
}

impl StackReport {
    pub fn total_events(&self) -> u64 {
        self.events.values().sum()
    }
    pub fn total_lost(&self) -> u64 {
        self.lost.values().sum()
    }
}

/// How long a poll of the ring buffers waits for a wake-up; the programs
/// wake the reader only when a quarter of a ring is queued, and every ring
/// is read after each poll.
const POLL: Duration = Duration::from_millis(20);
/// ... at the walk level, where state changes and retransmissions are all
/// the rings carry.
const WALK_POLL: Duration = Duration::from_millis(100);
/// How far behind the newest complete read the writer holds records back
/// to put the CPUs' rings in time order: a program stamps its record just
/// after reserving it, so one still being filled during a read is at most
/// this much older than the read.
const REORDER_SLACK_NS: u64 = 2_000_000;

/// Records until `stop` is set or the duration passes. `on_ready` is called
/// once the programs are attached; `each_second` once a second.
pub fn record(
    root: &Path,
    opts: &StackOptions,
    stop: &AtomicBool,
    on_ready: impl FnOnce(&Prepared),
    each_second: impl FnMut(&Second),
) -> Result<StackReport, RecordError> {
    if opts.aggregate
        && !(Duration::from_millis(10)..=Duration::from_secs(3600)).contains(&opts.interval)
    {
        return Err(StackError::Usage("--interval: give 10ms to 1h".into()).into());
    }
    let probe = Probe::prepare(&opts.probe())?;
    let out = Output::open(root, opts)?;
    let mut aggs = if opts.aggregate {
        Some(Aggregates::new(&out.ds.subdir(INTERVALS_DIR)?, opts))
    } else {
        None
    };
    let mut object = MaybeUninit::uninit();
    let loaded = probe.load(&mut object)?;
    let mut attached = loaded.attach()?;
    if let Some(a) = aggs.as_mut() {
        // The sockets already open: the baseline the first interval is
        // counted from.
        a.tick(&loaded, &attached)?;
    }
    let (writer, to_writer) = WriterThread::start(&out, opts)?;
    let reader = Reader::new(&loaded, to_writer.chunks, to_writer.free)?;
    let started = Instant::now();
    on_ready(probe.prepared());
    let mut seconds = Seconds::new(&out.stats_dir, opts.publisher.clone());
    let run = Running {
        started,
        loaded: &loaded,
        attached: &attached,
        reader: &reader,
        sockets: &writer.sockets,
        aggs: aggs.as_mut(),
    };
    let polled = poll_until_stopped(opts, stop, run, &mut seconds, each_second)?;
    let program_cost = if opts.program_stats {
        program_cost(&loaded)
    } else {
        BTreeMap::new()
    };
    // Detach the event programs first so that nothing more arrives, then
    // drain what is queued.
    attached.detach_events();
    let mut collected = reader.finish();
    // The last, partial interval: nothing adds to it any more.
    let interval_files = match aggs {
        Some(mut a) => {
            a.tick(&loaded, &attached)?;
            collected.events[kind::INTERVAL as usize] = a.writer.rows();
            a.writer.finish()?
        }
        None => Vec::new(),
    };
    drop(attached);
    let lost = loaded.lost();
    let last = seconds.end(&collected.events, &lost);
    seconds.write(last)?;
    let written = writer.join()?;
    let stats_files: Vec<String> = seconds
        .stats
        .finish()?
        .into_iter()
        .map(|f| format!("{}/{f}", store::dataset::STATS_DIR))
        .collect();
    let ended = Ended {
        ended_by: polled.ended_by,
        events: collected.events,
        lost,
        program_cost,
        elapsed: started.elapsed(),
        interval_files,
    };
    let report = StackReport {
        malformed: collected.malformed,
        stats_files,
        snapshots: polled.snapshots,
        prepared: probe.prepared().clone(),
        ..out.finish(ended, written, opts.publish_wait)?
    };
    Ok(report)
}

/// The dataset a recording writes, and the manifest's `stack` section as
/// it goes.
struct Output {
    ds: Dataset,
    /// The manifest as it was found (or a new one).
    base: Manifest,
    stack_dir: PathBuf,
    stats_dir: PathBuf,
    clock_offset_ns: i64,
    info: StackInfo,
}

impl Output {
    /// Prepares the dataset and writes the `stack` section it starts with,
    /// so that a recording that is killed still says what it was.
    fn open(root: &Path, opts: &StackOptions) -> Result<Output, RecordError> {
        let (ds, base) = open_dataset(root, opts.force)?;
        let ds = ds
            .signed_with(opts.sign_key.clone())
            .published_to(opts.publisher.clone());
        let stack_dir = ds.subdir(STACK_DIR)?;
        let stats_dir = ds.subdir(store::dataset::STATS_DIR)?;
        let clock_offset_ns = stack::clock_offset_ns();
        let started_ns = store::time::now_ns();
        let info = StackInfo {
            started: store::time::format_ns(started_ns),
            ended_by: "running".to_string(),
            clock: "CLOCK_MONOTONIC (bpf_ktime_get_ns) + offset to CLOCK_REALTIME at start"
                .to_string(),
            clock_offset_ns,
            pid: opts.pid,
            comm: opts.comm.clone(),
            ports: opts.ports.clone(),
            cgroup: opts.cgroup.as_ref().map(|p| p.display().to_string()),
            ring_bytes: opts.ring_bytes as u64,
            devices: opts.devices && !(opts.aggregate && opts.level == Level::Walk),
            device_acks: opts.devices
                && opts.device_acks
                && !(opts.aggregate && opts.level == Level::Walk),
            snapshot_every_s: opts.snapshot_every.map(|d| d.as_secs_f64()),
            mode: if opts.aggregate { "intervals" } else { "all" }.to_string(),
            level: opts.aggregate.then(|| opts.level.name().to_string()),
            interval_s: opts.aggregate.then_some(opts.interval.as_secs_f64()),
            sockets: opts.aggregate.then_some(opts.sockets as u64),
            ..Default::default()
        };
        write_stack_info(&ds, &base, info.clone())?;
        Ok(Output {
            ds,
            base,
            stack_dir,
            stats_dir,
            clock_offset_ns,
            info,
        })
    }

    /// Writes the final `stack` section (and waits up to `publish_wait`
    /// for an upload to take it); the report of what was written.
    fn finish(
        mut self,
        ended: Ended,
        written: Written,
        publish_wait: Duration,
    ) -> Result<StackReport, RecordError> {
        let info = &mut self.info;
        info.ended_by = ended.ended_by.to_string();
        info.events = by_name(&ended.events);
        info.lost = by_name(&ended.lost);
        info.files = written.files.clone();
        info.time_span = written.span.map(|(a, b)| TimeSpan::new(a, b));
        info.program_cost = ended.program_cost.clone();
        info.interval_files = ended.interval_files.clone();
        write_stack_info(&self.ds, &self.base, self.info.clone())?;
        if self.ds.publisher().is_some() {
            let m = self.ds.read_manifest()?;
            self.ds.finish_publishing(&m, publish_wait)?;
        }
        Ok(StackReport {
            events: self.info.events,
            lost: self.info.lost,
            files: written.files,
            interval_files: ended.interval_files,
            program_cost: ended.program_cost,
            elapsed: ended.elapsed,
            ended_by: ended.ended_by.to_string(),
            ..Default::default()
        })
    }
}

/// How a recording ended, and what it counted.
struct Ended {
    ended_by: &'static str,
    events: [u64; kind::COUNT],
    lost: [u64; kind::COUNT],
    program_cost: BTreeMap<String, ProgramCost>,
    elapsed: Duration,
    interval_files: Vec<String>,
}

/// Prepares the dataset: a new one (kind "stack"), or an existing one
/// (a capture of the same traffic) that gets a stack table beside it.
fn open_dataset(root: &Path, force: bool) -> Result<(Dataset, Manifest), RecordError> {
    let has_manifest = root.join(store::dataset::MANIFEST).is_file();
    if has_manifest {
        let ds = Dataset::open(root)?;
        let m = ds.read_manifest()?;
        let dirs = [root.join(STACK_DIR), root.join(INTERVALS_DIR)];
        let has_files = dirs.iter().any(|dir| {
            std::fs::read_dir(dir)
                .map(|rd| {
                    rd.flatten()
                        .any(|e| e.file_name() != "." && e.file_name() != "..")
                })
                .unwrap_or(false)
        });
        if has_files {
            if !force {
                return Err(StackError::Usage(format!(
                    "{} already holds a stack recording; pass --force to replace it, or \
                     record into another dataset",
                    root.display()
                ))
                .into());
            }
            let mut removed = remove_stack_stats(&root.join(store::dataset::STATS_DIR))?;
            for (dir, table) in dirs.iter().zip([STACK_DIR, INTERVALS_DIR]) {
                let Ok(rd) = std::fs::read_dir(dir) else {
                    continue;
                };
                for e in rd.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    removed.insert(format!("{table}/{name}"), "replaced".into());
                }
                std::fs::remove_dir_all(dir).map_err(|e| StackError::io(dir, e))?;
            }
            // The integrity chain records why they went.
            ds.write_manifest_after_removing(&m, &removed)?;
        }
        return Ok((ds, m));
    }
    let ds = Dataset::create(root, false)?;
    let m = Manifest::new(
        "stack",
        "kernel (monotonic + offset)",
        store::RowOrder::Arrival,
    );
    Ok((ds, m))
}

/// Removes an earlier recording's stats files; returns them by
/// dataset-relative path, with the reason for the integrity chain.
fn remove_stack_stats(dir: &Path) -> Result<HashMap<String, String>, StackError> {
    let mut removed = HashMap::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(removed);
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("stack-") || name.starts_with(".stack") {
            std::fs::remove_file(e.path()).map_err(|err| StackError::io(e.path(), err))?;
            removed.insert(
                format!("{}/{name}", store::dataset::STATS_DIR),
                "replaced".to_string(),
            );
        }
    }
    Ok(removed)
}

/// Writes the `stack` section (re-reading the manifest first, since a
/// capture may have rewritten it meanwhile).
fn write_stack_info(ds: &Dataset, base: &Manifest, info: StackInfo) -> Result<(), RecordError> {
    let mut m = ds.read_manifest().unwrap_or_else(|_| base.clone());
    if m.kind == "stack" {
        m.time_span = info.time_span.clone();
    }
    m.stack = Some(info);
    ds.write_manifest(&m)?;
    Ok(())
}

/// Each program's runs and CPU time so far, for the manifest.
fn program_cost(loaded: &Loaded<'_>) -> BTreeMap<String, ProgramCost> {
    let cost = |c: stack::ProgramRuns| ProgramCost {
        runs: c.runs,
        ns: c.ns,
    };
    loaded
        .program_cost()
        .into_iter()
        .map(|(k, c)| (k, cost(c)))
        .collect()
}

fn by_name(counts: &[u64; kind::COUNT]) -> BTreeMap<String, u64> {
    EVENT_NAMES
        .iter()
        .zip(counts)
        .map(|(n, c)| (n.to_string(), *c))
        .collect()
}

/// The source while it runs, as the polling loop reads it.
struct Running<'r, 'o, 'l> {
    /// When the programs were attached and the reading began.
    started: Instant,
    loaded: &'r Loaded<'o>,
    attached: &'r Attached,
    reader: &'r Reader<'l>,
    /// Sockets the writer's decoder remembers.
    sockets: &'r AtomicUsize,
    /// The default mode's interval reader.
    aggs: Option<&'r mut Aggregates>,
}

/// What the polling loop did.
struct Polled {
    ended_by: &'static str,
    snapshots: u64,
}

/// Reads the ring buffers until `stop`, the duration, or a writer that
/// stopped; takes the snapshots when they are due, and ends each second.
fn poll_until_stopped(
    opts: &StackOptions,
    stop: &AtomicBool,
    run: Running<'_, '_, '_>,
    seconds: &mut Seconds,
    mut each_second: impl FnMut(&Second),
) -> Result<Polled, RecordError> {
    let started = run.started;
    let mut run = run;
    let mut next_second = Duration::from_secs(1);
    let mut next_snapshot = Duration::ZERO;
    let mut snapshots = 0u64;
    let ended_by = loop {
        let now = started.elapsed();
        if stop.load(Ordering::Relaxed) {
            break "signal";
        }
        if opts.duration.is_some_and(|d| now >= d) {
            break "duration";
        }
        if let Some(every) = opts.snapshot_every
            && now >= next_snapshot
        {
            run.reader.snapshot(run.attached)?;
            snapshots += 1;
            next_snapshot = now + every;
        }
        // At the walk level the rings carry only state changes and
        // retransmissions: read them at the walks, not 50 times a second
        // (a ring a quarter full still wakes the reader at once).
        let mut wait = if opts.aggregate && opts.level == Level::Walk {
            opts.interval.min(WALK_POLL)
        } else {
            POLL
        };
        if let Some(d) = opts.duration {
            wait = wait.min(d.saturating_sub(now));
        }
        if let Some(a) = &run.aggs {
            wait = wait.min(a.next.saturating_sub(now));
        }
        run.reader.read(wait)?;
        if run.reader.consumer_gone() {
            break "writer-error";
        }
        if let Some(a) = run.aggs.as_deref_mut()
            && started.elapsed() >= a.next
        {
            a.tick(run.loaded, run.attached)?;
            a.next += opts.interval;
        }
        if started.elapsed() >= next_second {
            let lost = run.loaded.lost();
            let mut events = run.reader.events();
            let mut sockets = run.sockets.load(Ordering::Relaxed);
            if let Some(a) = &run.aggs {
                events[kind::INTERVAL as usize] = a.writer.rows();
                sockets = a.sockets();
            }
            let rows = seconds.end(&events, &lost);
            each_second(&Second {
                events: rows.iter().map(|r| r.stack.map_or(0, |s| s.events)).sum(),
                lost: rows.iter().map(|r| r.stack.map_or(0, |s| s.lost)).sum(),
                sockets,
            });
            seconds.write(rows)?;
            next_second += Duration::from_secs(1);
        }
    };
    Ok(Polled {
        ended_by,
        snapshots,
    })
}

/// The interval levels' reading of the kernel: the socket walk, and the
/// per-packet aggregates at the levels that have them.
struct Aggregates {
    writer: IntervalWriter,
    level: Level,
    /// Above the walk level.
    intervals: Option<Intervals>,
    walks: Walks,
    /// The sockets already open have joined the walk.
    enrolled: bool,
    /// The epoch the programs are in (they start in 1).
    epoch: u64,
    /// When it started, wall clock.
    start_ns: i64,
    /// When the next interval is due, from the start of the recording.
    next: Duration,
}

/// An open socket whose counts have not changed for this long loses its
/// kernel entry (it starts again from zero if it comes back).
const IDLE: Duration = Duration::from_secs(60);

impl Aggregates {
    fn new(dir: &Path, opts: &StackOptions) -> Aggregates {
        let idle_reads =
            (IDLE.as_nanos() / opts.interval.as_nanos().max(1)).clamp(1, u32::MAX as u128) as u32;
        Aggregates {
            writer: IntervalWriter::new(dir, opts.rotate_rows),
            level: opts.level,
            intervals: (opts.level >= Level::Device).then(|| Intervals::new(idle_reads)),
            walks: Walks::new(),
            enrolled: false,
            epoch: 1,
            start_ns: store::time::now_ns(),
            next: opts.interval,
        }
    }

    /// Sockets remembered, for the live display.
    fn sockets(&self) -> usize {
        self.walks
            .sockets()
            .max(self.intervals.as_ref().map_or(0, |i| i.sockets()))
    }

    /// Ends the current interval: the programs move on to the next epoch,
    /// then the one that ended is read, the sockets are walked, the rows
    /// are written and the sockets that are done are removed from the
    /// kernel's map.
    fn tick(&mut self, loaded: &Loaded<'_>, attached: &Attached) -> Result<(), RecordError> {
        let mut agg = Vec::new();
        if let Some(intervals) = self.intervals.as_mut() {
            let ended = self.epoch;
            self.epoch += 1;
            loaded.start_epoch(self.epoch)?;
            let sockets = loaded.read_aggregates();
            let read = intervals.read(ended, sockets.iter().map(|(c, v)| (*c, v.as_slice())));
            loaded.delete_aggregates(&read.delete);
            agg = read.rows;
        }
        // The walk, then the sockets that closed meanwhile: one closing
        // while the walk ran is in one or both (see Walks::read). The
        // first tick enrolls the sockets already open instead.
        let walked = if self.enrolled {
            loaded.walk(attached)?
        } else {
            self.enrolled = true;
            loaded.enroll(attached)?
        };
        let finals = loaded.take_finals();
        let walk = self.walks.read(&walked, &finals);
        let end_ns = store::time::now_ns();
        let mut rows: BTreeMap<u64, (Option<&Interval>, Option<&WalkRow>)> = BTreeMap::new();
        for r in &agg {
            rows.entry(r.cookie).or_default().0 = Some(r);
        }
        for w in &walk {
            rows.entry(w.now.cookie).or_default().1 = Some(w);
        }
        for (a, w) in rows.values() {
            self.writer
                .push(&interval_row(*a, *w, self.level, self.start_ns, end_ns));
        }
        self.writer.flush()?;
        self.start_ns = end_ns;
        Ok(())
    }
}

/// The stack_intervals row of a socket's interval from `start_ns` to
/// `end_ns` (wall clock), from its per-packet aggregate and its walk
/// (either may be missing: a socket the walk does not read, or one that
/// did nothing per packet).
fn interval_row(
    agg: Option<&Interval>,
    walk: Option<&WalkRow>,
    level: Level,
    start_ns: i64,
    end_ns: i64,
) -> IntervalRow {
    let id = match (agg, walk) {
        (Some(a), _) if a.family != 0 => (
            a.netns, a.family, a.proto, a.laddr, a.raddr, a.lport, a.rport,
        ),
        (_, Some(w)) => {
            let n = &w.now;
            (n.netns, n.family, 6, n.laddr, n.raddr, n.lport, n.rport)
        }
        (Some(a), None) => (
            a.netns, a.family, a.proto, a.laddr, a.raddr, a.lport, a.rport,
        ),
        (None, None) => Default::default(),
    };
    let (netns, family, proto, laddr, raddr, lport, rport) = id;
    let known = family != 0;
    let ports = known && (proto == 6 || proto == 17);
    let per_packet = level >= Level::Device;
    let counts = if per_packet {
        let a = agg.cloned().unwrap_or_default();
        [
            a.app_sent,
            a.app_writes,
            a.app_received,
            a.app_reads,
            a.dev_sent,
            a.dev_frames_sent,
            a.dev_received,
            a.dev_frames_received,
            a.segs_in,
            a.retransmits,
            a.retransmitted,
            a.state_changes,
            a.tcp_samples,
        ]
        .map(Some)
    } else {
        let w = walk.cloned().unwrap_or_default();
        [
            w.app_sent,
            None,
            w.app_received,
            None,
            None,
            None,
            None,
            None,
            None,
            Some(w.retrans),
            Some(w.bytes_retrans),
            None,
            Some(walk.is_some() as u64),
        ]
    };
    let tcp = if per_packet {
        agg.and_then(|a| a.tcp)
            .map(|t| t.map(|m| (m.min, m.mean, m.max, m.last)))
    } else {
        walk.map(|w| {
            let n = &w.now;
            let v: [u32; TCP_METRICS] = [n.snd_cwnd, n.ssthresh, n.srtt_us, n.in_flight, n.snd_wnd];
            v.map(|x| (x, x as f64, x, x))
        })
    };
    let delay = (level >= Level::Delay).then(|| {
        let a = agg.cloned().unwrap_or_default();
        Delays {
            writes: a.delay_writes,
            sum_ns: a.delay_sum_ns,
            hist: a.delay_hist,
        }
    });
    IntervalRow {
        ts_ns: start_ns,
        interval_ns: end_ns.saturating_sub(start_ns).max(0) as u64,
        cookie: agg.map_or_else(|| walk.map_or(0, |w| w.now.cookie), |a| a.cookie),
        netns,
        pid: agg.and_then(|a| a.pid),
        tid: agg.and_then(|a| a.tid),
        comm: agg.and_then(|a| a.comm),
        family,
        proto,
        local_addr: known.then_some(laddr),
        local_port: ports.then_some(lport),
        remote_addr: known.then_some(raddr),
        remote_port: ports.then_some(rport),
        closed: agg.is_some_and(|a| a.closed) || walk.is_some_and(|w| w.closed),
        counts,
        tcp,
        delay,
        walk: walk.map_or([None; 13], walk_counts),
        walk_state: walk.map_or([None; 4], |w| {
            let n = &w.now;
            [
                Some(n.rttvar_us as u64),
                Some(n.rcv_wnd as u64),
                Some(n.mss_cache as u64),
                Some(n.delivery_rate()),
            ]
        }),
        tcp_state: walk.map(|w| w.now.state),
    }
}

/// A walk's counters by `store::stack_intervals::WALK_COUNTS`.
fn walk_counts(w: &WalkRow) -> [Option<u64>; 13] {
    [
        Some(w.bytes_sent),
        Some(w.bytes_received),
        Some(w.bytes_acked),
        Some(w.bytes_retrans),
        Some(w.segs_in),
        Some(w.segs_out),
        Some(w.data_segs_in),
        Some(w.data_segs_out),
        Some(w.retrans),
        w.rtos,
        w.busy_us,
        w.rwnd_limited_us,
        w.sndbuf_limited_us,
    ]
}

/// The stats table's per-second counters of the recording.
struct Seconds {
    stats: StatsWriter,
    /// When the second being counted started.
    start_ns: i64,
    /// The counts at its start.
    prev_events: [u64; kind::COUNT],
    prev_lost: [u64; kind::COUNT],
    /// The dataset's uploader (`--upload`), and its figures at the start
    /// of the second.
    upload: Option<(
        Arc<dyn util::storage::Publisher>,
        util::storage::UploadFigures,
    )>,
}

impl Seconds {
    fn new(stats_dir: &Path, upload: Option<Arc<dyn util::storage::Publisher>>) -> Seconds {
        Seconds {
            stats: StatsWriter::with_prefix(stats_dir, 3600, "stack"),
            start_ns: store::time::now_ns(),
            prev_events: [0; kind::COUNT],
            prev_lost: [0; kind::COUNT],
            upload: upload.map(|u| (u, Default::default())),
        }
    }

    /// Ends the second at these counts: its rows.
    fn end(&mut self, events: &[u64; kind::COUNT], lost: &[u64; kind::COUNT]) -> Vec<StatsRow> {
        let mut rows = second_rows(
            self.start_ns,
            events,
            &self.prev_events,
            lost,
            &self.prev_lost,
        );
        if let (Some((uploader, prev)), Some(first)) = (self.upload.as_mut(), rows.first_mut()) {
            first.upload = Some(store::stats::UploadSecond::since(prev, uploader.figures()));
        }
        self.prev_events = *events;
        self.prev_lost = *lost;
        rows
    }

    /// Writes a second's rows and starts the next.
    fn write(&mut self, rows: Vec<StatsRow>) -> Result<(), store::StoreError> {
        for r in rows {
            self.stats.push(r)?;
        }
        self.start_ns = store::time::now_ns();
        Ok(())
    }
}

/// The stats rows of one second: one per event type that had events or
/// losses, or one for `send` when nothing happened at all (so every second
/// of the recording has a row).
fn second_rows(
    ts_ns: i64,
    events: &[u64; kind::COUNT],
    prev_events: &[u64; kind::COUNT],
    lost: &[u64; kind::COUNT],
    prev_lost: &[u64; kind::COUNT],
) -> Vec<StatsRow> {
    let mut rows: Vec<StatsRow> = (0..kind::COUNT)
        .filter_map(|k| {
            let e = events[k] - prev_events[k];
            let l = lost[k].saturating_sub(prev_lost[k]);
            (e > 0 || l > 0).then_some(StatsRow {
                ts_ns,
                stack: Some(StackCounts {
                    event: k as u8,
                    events: e,
                    lost: l,
                }),
                ..Default::default()
            })
        })
        .collect();
    if rows.is_empty() {
        rows.push(StatsRow {
            ts_ns,
            stack: Some(StackCounts::default()),
            ..Default::default()
        });
    }
    rows
}

/// What the writer thread did.
struct Written {
    files: Vec<String>,
    span: Option<(i64, i64)>,
}

/// The thread that puts records in time order, decodes them and writes
/// the stack table.
struct WriterThread {
    handle: JoinHandle<Result<Written, store::StoreError>>,
    /// Sockets its decoder remembers, for the live display.
    sockets: Arc<AtomicUsize>,
}

/// The reader's ends of the channels to the writer thread.
struct ToWriter {
    /// Chunks of records go this way...
    chunks: mpsc::SyncSender<Chunk>,
    /// ... and come back emptied, to be filled again.
    free: mpsc::Receiver<Vec<u8>>,
}

/// What the writer thread works with.
struct WriterJob {
    dir: PathBuf,
    rotate_rows: u64,
    clock_offset_ns: i64,
    chunks: mpsc::Receiver<Chunk>,
    free: mpsc::SyncSender<Vec<u8>>,
    sockets: Arc<AtomicUsize>,
}

impl WriterThread {
    /// Starts the writer; returns it with the ends the reader hands chunks
    /// to and takes emptied ones back from.
    fn start(out: &Output, opts: &StackOptions) -> Result<(WriterThread, ToWriter), StackError> {
        let slots = (opts.buffer_bytes / CHUNK_BYTES as u64).clamp(2, 1 << 16) as usize;
        let (to_writer, from_reader) = mpsc::sync_channel::<Chunk>(slots);
        let (free_tx, free_rx) = mpsc::sync_channel::<Vec<u8>>(slots);
        let sockets = Arc::new(AtomicUsize::new(0));
        let job = WriterJob {
            dir: out.stack_dir.clone(),
            rotate_rows: opts.rotate_rows,
            clock_offset_ns: out.clock_offset_ns,
            chunks: from_reader,
            free: free_tx,
            sockets: sockets.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("weir-stack-writer".into())
            .spawn(move || write_records(job))
            .map_err(|e| StackError::io(&out.stack_dir, e))?;
        let ends = ToWriter {
            chunks: to_writer,
            free: free_rx,
        };
        Ok((WriterThread { handle, sockets }, ends))
    }

    fn join(self) -> Result<Written, RecordError> {
        match self.handle.join() {
            Ok(r) => Ok(r?),
            Err(_) => Err(StackError::Setup(
                "the stack writer thread panicked; this is a bug in weir, please report it".into(),
            )
            .into()),
        }
    }
}

/// Puts the calling thread in the SCHED_IDLE class: it runs only when a
/// CPU has nothing else to do.
fn idle_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler on the calling thread (0) with a valid
    // parameter block.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        // SAFETY: setpriority on the calling thread.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
    }
}

/// The writer thread: puts records in time order, decodes them and writes
/// the stack table.
fn write_records(job: WriterJob) -> Result<Written, store::StoreError> {
    let WriterJob {
        dir,
        rotate_rows,
        clock_offset_ns,
        chunks,
        free,
        sockets,
    } = job;
    idle_priority();
    let mut decoder = Decoder::new(clock_offset_ns);
    let mut w = StackWriter::new(&dir, rotate_rows);
    let mut span: Option<(i64, i64)> = None;
    let mut order = Reorder::default();
    let mut write = |decoder: &mut Decoder, rec: &[u8]| -> Result<(), store::StoreError> {
        let Some(e) = RawEvent::parse(rec) else {
            return Ok(()); // counted by the reader
        };
        let row = decoder.event(&e);
        span = Some(match span {
            None => (row.ts_ns, row.ts_ns),
            Some((a, b)) => (a.min(row.ts_ns), b.max(row.ts_ns)),
        });
        w.push(&row)
    };
    for mut chunk in chunks {
        let until = chunk.complete_ns.saturating_sub(REORDER_SLACK_NS);
        order.push(&chunk.records, until, |rec| write(&mut decoder, rec))?;
        sockets.store(decoder.sockets(), Ordering::Relaxed);
        chunk.records.clear();
        let _ = free.try_send(chunk.records);
    }
    order.push(&[], u64::MAX, |rec| write(&mut decoder, rec))?;
    Ok(Written {
        files: w.finish()?,
        span,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_second_has_rows_and_counts_only_its_own() {
        let mut events = [0u64; kind::COUNT];
        let mut lost = [0u64; kind::COUNT];
        let quiet = second_rows(7, &events, &events, &lost, &lost);
        assert_eq!(quiet.len(), 1);
        assert_eq!(quiet[0].ts_ns, 7);
        assert_eq!(quiet[0].stack, Some(StackCounts::default()));

        let (prev_events, prev_lost) = (events, lost);
        events[kind::SEND as usize] = 5;
        events[kind::TCP_PROBE as usize] = 2;
        lost[kind::TCP_PROBE as usize] = 3;
        let rows = second_rows(8, &events, &prev_events, &lost, &prev_lost);
        let counts: Vec<StackCounts> = rows.iter().filter_map(|r| r.stack).collect();
        assert_eq!(
            counts,
            [
                StackCounts {
                    event: kind::SEND,
                    events: 5,
                    lost: 0
                },
                StackCounts {
                    event: kind::TCP_PROBE,
                    events: 2,
                    lost: 3
                },
            ]
        );
    }
}
