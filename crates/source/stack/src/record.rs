//! `weir stack`: load the programs, read their ring buffer, and write the
//! stack table, its per-second counters and the manifest's `stack` section.
//!
//! One thread reads the ring buffer and turns records into rows; a writer
//! thread encodes them into Parquet, so that a slow disk delays only the
//! writer, and if that backs up, the kernel counts what the full ring
//! buffer could not take (per event type) instead of anything waiting.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Read;
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Iter, Link, MapCore, MapFlags, MapHandle, MapType, RingBufferBuilder};
use store::Dataset;
use store::manifest::{Manifest, ProgramCost, StackInfo, TimeSpan};
use store::stack::{EVENT_NAMES, STACK_DIR, StackWriter};
use store::stats::{StackCounts, StatsRow, StatsWriter};

use crate::StackError;
use crate::event::{Decoder, EVENT_SIZE, RawEvent, append_record, kind};
use crate::order::Reorder;
use crate::setup::{self, Prepared};
use crate::skel::StackSkelBuilder;

/// The most ports `--port` takes (the programs' filter table).
pub const MAX_PORTS: usize = 8;

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
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Rows per stack file.
    pub rotate_rows: u64,
    /// Replace an earlier stack recording in the dataset.
    pub force: bool,
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
            duration: None,
            rotate_rows: 4 << 20,
            force: false,
            command: String::new(),
        }
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

/// Bytes of raw records handed to the writer thread at a time.
const CHUNK_BYTES: usize = (1 << 20) / EVENT_SIZE * EVENT_SIZE;
/// How long a poll of the ring buffers waits for a wake-up; the programs
/// wake the reader only when a quarter of a ring is queued, and every ring
/// is read after each poll.
const POLL: Duration = Duration::from_millis(20);
/// How far behind the newest complete read the writer holds records back
/// to put the CPUs' rings in time order: a program stamps its record just
/// after reserving it, so one still being filled during a read is at most
/// this much older than the read.
const REORDER_SLACK_NS: u64 = 2_000_000;

/// Raw records for the writer, and how far they are complete: every
/// record stamped before `complete_ns` (kernel monotonic clock) is in this
/// chunk or an earlier one.
struct Chunk {
    records: Vec<u8>,
    complete_ns: u64,
}

/// Everything the ring buffer callback touches. The reader only counts
/// and copies records; decoding and encoding happen on the writer thread,
/// which runs on idle CPU time only, so that recording takes as little as
/// it can from the traffic being recorded.
struct Collector {
    chunk: Vec<u8>,
    /// See [`Chunk::complete_ns`]; set after each read of every ring.
    complete_ns: u64,
    to_writer: mpsc::SyncSender<Chunk>,
    /// Emptied chunks back from the writer, to be filled again (fresh
    /// pages cost more than the copy into them).
    free: mpsc::Receiver<Vec<u8>>,
    events: [u64; kind::COUNT],
    malformed: u64,
    writer_gone: bool,
}

impl Collector {
    fn take(&mut self, bytes: &[u8]) {
        let Some(t) = append_record(&mut self.chunk, bytes) else {
            self.malformed += 1;
            return;
        };
        self.events[t as usize] += 1;
        if self.chunk.len() >= CHUNK_BYTES {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.chunk.is_empty() || self.writer_gone {
            return;
        }
        let next = self
            .free
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK_BYTES));
        let full = Chunk {
            records: std::mem::replace(&mut self.chunk, next),
            complete_ns: self.complete_ns,
        };
        if self.to_writer.send(full).is_err() {
            self.writer_gone = true; // its error is reported when it is joined
        }
    }
}

/// What the writer thread did.
struct Written {
    files: Vec<String>,
    span: Option<(i64, i64)>,
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
fn write_records(
    dir: PathBuf,
    rotate_rows: u64,
    clock_offset_ns: i64,
    chunks: mpsc::Receiver<Chunk>,
    free: mpsc::SyncSender<Vec<u8>>,
    sockets: Arc<AtomicUsize>,
) -> Result<Written, store::StoreError> {
    idle_priority();
    let mut decoder = Decoder::new(clock_offset_ns);
    let mut w = StackWriter::new(&dir, rotate_rows);
    let mut span: Option<(i64, i64)> = None;
    let mut order = Reorder::default();
    let mut write = |decoder: &mut Decoder, rec: &[u8]| -> Result<(), store::StoreError> {
        let Some(e) = RawEvent::parse(rec) else {
            return Ok(()); // counted by the reader
        };
        let row = decoder.row(&e);
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

fn validate(o: &StackOptions) -> Result<(), StackError> {
    let usage = |m: String| Err(StackError::Usage(m));
    if !o.ring_bytes.is_power_of_two() || o.ring_bytes < 4096 || o.ring_bytes > (1 << 30) {
        return usage(format!(
            "--ring-size {}: give a power of two from 4KiB to 1GiB, such as 16MiB",
            o.ring_bytes
        ));
    }
    if o.ports.len() > MAX_PORTS {
        return usage(format!(
            "--port: at most {MAX_PORTS} ports (the in-kernel filter's table); got {}",
            o.ports.len()
        ));
    }
    if let Some(c) = &o.comm
        && (c.is_empty() || c.len() > 15)
    {
        return usage(format!(
            "--comm {c:?}: the kernel keeps 15 bytes of a command name; give 1 to 15"
        ));
    }
    if o.snapshot_every
        .is_some_and(|d| d < Duration::from_millis(10))
    {
        return usage("--snapshot-every: give at least 10ms".into());
    }
    Ok(())
}

/// Prepares the dataset: a new one (kind "stack"), or an existing one
/// (a capture of the same traffic) that gets a stack table beside it.
fn open_dataset(root: &Path, force: bool) -> Result<(Dataset, Manifest), StackError> {
    let has_manifest = root.join(store::dataset::MANIFEST).is_file();
    if has_manifest {
        let ds = Dataset::open(root)?;
        let m = ds.read_manifest()?;
        let dir = root.join(STACK_DIR);
        let has_files = std::fs::read_dir(&dir)
            .map(|rd| {
                rd.flatten()
                    .any(|e| e.file_name() != "." && e.file_name() != "..")
            })
            .unwrap_or(false);
        if has_files {
            if !force {
                return Err(StackError::Usage(format!(
                    "{} already holds a stack recording; pass --force to replace it, or \
                     record into another dataset",
                    root.display()
                )));
            }
            std::fs::remove_dir_all(&dir).map_err(|e| StackError::io(&dir, e))?;
            remove_stack_stats(&root.join(store::dataset::STATS_DIR))?;
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

fn remove_stack_stats(dir: &Path) -> Result<(), StackError> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("stack-") || name.starts_with(".stack") {
            std::fs::remove_file(e.path()).map_err(|err| StackError::io(e.path(), err))?;
        }
    }
    Ok(())
}

/// Writes the `stack` section (re-reading the manifest first, since a
/// capture may have rewritten it meanwhile).
fn write_stack_info(ds: &Dataset, base: &Manifest, info: StackInfo) -> Result<(), StackError> {
    let mut m = ds.read_manifest().unwrap_or_else(|_| base.clone());
    if m.kind == "stack" {
        m.time_span = info.time_span.clone();
    }
    m.stack = Some(info);
    ds.write_manifest(&m)?;
    Ok(())
}

fn sum_lost(skel_lost: &dyn MapCore) -> [u64; kind::COUNT] {
    let mut out = [0u64; kind::COUNT];
    for (k, slot) in out.iter_mut().enumerate() {
        let key = (k as u32).to_ne_bytes();
        if let Ok(Some(per_cpu)) = skel_lost.lookup_percpu(&key, MapFlags::ANY) {
            *slot = per_cpu
                .iter()
                .filter_map(|v| v.get(..8))
                .map(|v| u64::from_ne_bytes(v.try_into().unwrap_or([0; 8])))
                .sum();
        }
    }
    out
}

/// Each program's runs and CPU time so far (the kernel counts them while
/// its BPF statistics are on).
fn program_cost(skel: &crate::skel::StackSkel) -> BTreeMap<String, ProgramCost> {
    use std::os::fd::{AsFd, AsRawFd};
    let p = &skel.progs;
    let progs: [(&str, &libbpf_rs::Program); 8] = [
        ("send", &p.on_send),
        ("recv", &p.on_recv),
        ("tcp_probe", &p.on_tcp_probe),
        ("state", &p.on_state),
        ("retransmit", &p.on_retransmit),
        ("dev_xmit", &p.on_dev_xmit),
        ("dev_recv", &p.on_dev_recv),
        ("sockops", &p.on_sockops),
    ];
    let mut out = BTreeMap::new();
    for (name, prog) in progs {
        // SAFETY: bpf_prog_info is plain data; all zeros is a valid request.
        let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of_val(&info) as u32;
        // SAFETY: a valid program descriptor and out-pointers to `info`
        // and its length.
        let r = unsafe {
            libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(
                prog.as_fd().as_raw_fd(),
                &mut info,
                &mut len,
            )
        };
        if r == 0 && info.run_cnt > 0 {
            out.insert(
                name.to_string(),
                ProgramCost {
                    runs: info.run_cnt,
                    ns: info.run_time_ns,
                },
            );
        }
    }
    out
}

fn by_name(counts: &[u64; kind::COUNT]) -> BTreeMap<String, u64> {
    EVENT_NAMES
        .iter()
        .zip(counts)
        .map(|(n, c)| (n.to_string(), *c))
        .collect()
}

fn load_error(what: &str, e: libbpf_rs::Error) -> StackError {
    if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        return StackError::Setup(format!(
            "{what}: permission denied ({e}); weir stack needs CAP_BPF and CAP_PERFMON (and \
             CAP_NET_ADMIN with --cgroup): run it as root. If it already runs as root, the \
             kernel refused the program (lockdown, or kernel.unprivileged_bpf_disabled with a \
             restricted user namespace)"
        ));
    }
    StackError::Bpf {
        what: what.to_string(),
        source: e,
    }
}

/// Records until `stop` is set or the duration passes. `on_ready` is called
/// once the programs are attached; `each_second` once a second.
pub fn record(
    root: &Path,
    opts: &StackOptions,
    stop: &AtomicBool,
    on_ready: impl FnOnce(&Prepared),
    mut each_second: impl FnMut(&Second),
) -> Result<StackReport, StackError> {
    validate(opts)?;
    let prepared = setup::prepare(opts.cgroup.is_some())?;
    let cgroup = opts.cgroup.as_deref().map(setup::open_cgroup).transpose()?;
    let (ds, base) = open_dataset(root, opts.force)?;
    let stack_dir = ds.subdir(STACK_DIR)?;
    let stats_dir = ds.subdir(store::dataset::STATS_DIR)?;
    let clock_offset = setup::clock_offset_ns();
    let started_ns = store::time::now_ns();
    let mut info = StackInfo {
        started: store::time::format_ns(started_ns),
        ended_by: "running".to_string(),
        clock: "CLOCK_MONOTONIC (bpf_ktime_get_ns) + offset to CLOCK_REALTIME at start".to_string(),
        clock_offset_ns: clock_offset,
        pid: opts.pid,
        comm: opts.comm.clone(),
        ports: opts.ports.clone(),
        cgroup: opts.cgroup.as_ref().map(|p| p.display().to_string()),
        ring_bytes: opts.ring_bytes as u64,
        devices: opts.devices,
        device_acks: opts.devices && opts.device_acks,
        snapshot_every_s: opts.snapshot_every.map(|d| d.as_secs_f64()),
        ..Default::default()
    };
    // Written now so that a recording that is killed still says what it was.
    write_stack_info(&ds, &base, info.clone())?;

    // Open, configure, load.
    let mut object = MaybeUninit::uninit();
    let mut open = StackSkelBuilder::default()
        .open(&mut object)
        .map_err(|e| load_error("opening the eBPF object", e))?;
    // One ring per possible CPU (the programs index by CPU number).
    let cpus =
        libbpf_rs::num_possible_cpus().map_err(|e| load_error("counting the possible CPUs", e))?;
    let mut rings = Vec::with_capacity(cpus);
    for cpu in 0..cpus {
        let ring = MapHandle::create(
            MapType::RingBuf,
            Some(format!("weir_ring{cpu}")),
            0,
            0,
            opts.ring_bytes,
            &libbpf_rs::libbpf_sys::bpf_map_create_opts {
                sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
                ..Default::default()
            },
        )
        .map_err(|e| load_error(&format!("creating CPU {cpu}'s ring buffer"), e))?;
        rings.push(ring);
    }
    open.maps
        .rings
        .set_max_entries(cpus as u32)
        .map_err(|e| load_error("sizing the ring buffer table", e))?;
    {
        let ro =
            open.maps.rodata_data.as_deref_mut().ok_or_else(|| {
                StackError::Setup("the eBPF object has no settings section".into())
            })?;
        ro.filter_pid = opts.pid.unwrap_or(0);
        if let Some(c) = &opts.comm {
            ro.filter_comm_on = 1;
            for (d, s) in ro.filter_comm.iter_mut().zip(c.bytes()) {
                *d = s as i8;
            }
        }
        ro.filter_cgroup = cgroup.as_ref().map_or(0, |(id, _)| *id);
        ro.filter_ports_n = opts.ports.len() as u32;
        for (d, p) in ro.filter_ports.iter_mut().zip(&opts.ports) {
            *d = *p;
        }
        ro.wakeup_bytes = (opts.ring_bytes / 4) as u64;
        ro.want_dev = opts.devices as u8;
        ro.want_dev_acks = opts.device_acks as u8;
    }
    open.progs.on_sockops.set_autoload(cgroup.is_some());
    open.progs
        .dump_tcp
        .set_autoload(opts.snapshot_every.is_some());
    if !opts.devices {
        open.progs.on_dev_xmit.set_autoload(false);
        open.progs.on_dev_recv.set_autoload(false);
    }
    let skel = open
        .load()
        .map_err(|e| load_error("loading the eBPF programs", e))?;
    for (cpu, ring) in rings.iter().enumerate() {
        use std::os::fd::{AsFd, AsRawFd};
        skel.maps
            .rings
            .update(
                &(cpu as u32).to_ne_bytes(),
                &ring.as_fd().as_raw_fd().to_ne_bytes(),
                MapFlags::ANY,
            )
            .map_err(|e| load_error(&format!("installing CPU {cpu}'s ring buffer"), e))?;
    }

    // Statistics are kept while this descriptor is open.
    let _stats_on = if opts.program_stats {
        // SAFETY: a plain syscall wrapper; it returns a new descriptor or
        // a negative error.
        let fd = unsafe {
            libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
        };
        if fd < 0 {
            return Err(StackError::Setup(format!(
                "--program-stats: the kernel refused to switch on BPF statistics ({}); run \
                 without --program-stats",
                std::io::Error::from_raw_os_error(-fd)
            )));
        }
        // SAFETY: fd is a new descriptor that nothing else owns.
        Some(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    } else {
        None
    };

    // Attach.
    let mut links: Vec<Link> = Vec::new();
    let mut attach = |name: &str, p: &libbpf_rs::ProgramMut| -> Result<(), StackError> {
        links.push(
            p.attach()
                .map_err(|e| load_error(&format!("attaching {name}"), e))?,
        );
        Ok(())
    };
    attach("tp_btf/sock_send_length", &skel.progs.on_send)?;
    attach("tp_btf/sock_recv_length", &skel.progs.on_recv)?;
    attach("tp_btf/tcp_probe", &skel.progs.on_tcp_probe)?;
    attach("tp_btf/inet_sock_set_state", &skel.progs.on_state)?;
    attach("tp_btf/tcp_retransmit_skb", &skel.progs.on_retransmit)?;
    if opts.devices {
        attach("tp_btf/net_dev_start_xmit", &skel.progs.on_dev_xmit)?;
        attach("tp_btf/netif_receive_skb", &skel.progs.on_dev_recv)?;
    }
    if let Some((_, fd)) = &cgroup {
        use std::os::fd::AsRawFd;
        links.push(
            skel.progs
                .on_sockops
                .attach_cgroup(fd.as_raw_fd())
                .map_err(|e| load_error("attaching sock_ops to the cgroup", e))?,
        );
    }
    let iter_link = match opts.snapshot_every {
        Some(_) => Some(
            skel.progs
                .dump_tcp
                .attach()
                .map_err(|e| load_error("attaching the iter/tcp snapshot", e))?,
        ),
        None => None,
    };

    // The writer thread.
    let slots = (opts.buffer_bytes / CHUNK_BYTES as u64).clamp(2, 1 << 16) as usize;
    let (to_writer, from_reader) = mpsc::sync_channel::<Chunk>(slots);
    let (free_tx, free_rx) = mpsc::sync_channel::<Vec<u8>>(slots);
    let sockets = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (dir, rotate, sockets) = (stack_dir.clone(), opts.rotate_rows, sockets.clone());
        std::thread::Builder::new()
            .name("weir-stack-writer".into())
            .spawn(move || write_records(dir, rotate, clock_offset, from_reader, free_tx, sockets))
            .map_err(|e| StackError::io(&stack_dir, e))?
    };

    let collector = RefCell::new(Collector {
        chunk: Vec::with_capacity(CHUNK_BYTES),
        complete_ns: 0,
        to_writer,
        free: free_rx,
        events: [0; kind::COUNT],
        malformed: 0,
        writer_gone: false,
    });
    let mut builder = RingBufferBuilder::new();
    for ring in &rings {
        builder
            .add(ring, |b: &[u8]| {
                collector.borrow_mut().take(b);
                0
            })
            .map_err(|e| load_error("opening the ring buffer", e))?;
    }
    let ring = builder
        .build()
        .map_err(|e| load_error("opening the ring buffer", e))?;

    let mut stats = StatsWriter::with_prefix(&stats_dir, 3600, "stack");
    let started = Instant::now();
    on_ready(&prepared);
    let mut next_second = Duration::from_secs(1);
    let mut next_snapshot = Duration::ZERO;
    let mut prev_events = [0u64; kind::COUNT];
    let mut prev_lost = [0u64; kind::COUNT];
    let mut snapshots = 0u64;
    let mut second_start = store::time::now_ns();
    let ended_by = loop {
        let now = started.elapsed();
        if stop.load(Ordering::Relaxed) {
            break "signal";
        }
        if opts.duration.is_some_and(|d| now >= d) {
            break "duration";
        }
        if let (Some(every), Some(link)) = (opts.snapshot_every, &iter_link)
            && now >= next_snapshot
        {
            snapshot(link, &collector)?;
            snapshots += 1;
            next_snapshot = now + every;
        }
        let mut wait = POLL;
        if let Some(d) = opts.duration {
            wait = wait.min(d.saturating_sub(now));
        }
        match ring.poll(wait) {
            Ok(()) => {}
            Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => {}
            Err(e) => return Err(load_error("reading the ring buffer", e)),
        }
        // A poll reads only the rings that woke it; read them all, so that
        // every record stamped before `read_from` is now in hand.
        let read_from = setup::monotonic_ns();
        ring.consume()
            .map_err(|e| load_error("reading the ring buffer", e))?;
        collector.borrow_mut().complete_ns = read_from;
        if collector.borrow().writer_gone {
            break "writer-error";
        }
        if started.elapsed() >= next_second {
            let lost = sum_lost(&skel.maps.lost);
            let c = collector.borrow();
            let sec = second_rows(second_start, &c.events, &prev_events, &lost, &prev_lost);
            each_second(&Second {
                events: sec.iter().map(|r| r.stack.map_or(0, |s| s.events)).sum(),
                lost: sec.iter().map(|r| r.stack.map_or(0, |s| s.lost)).sum(),
                sockets: sockets.load(Ordering::Relaxed),
            });
            prev_events = c.events;
            drop(c);
            prev_lost = lost;
            for r in sec {
                stats.push(r)?;
            }
            second_start = store::time::now_ns();
            next_second += Duration::from_secs(1);
        }
    };
    let program_cost = if opts.program_stats {
        program_cost(&skel)
    } else {
        BTreeMap::new()
    };
    // Detach first so that nothing more arrives, then drain what is queued.
    drop(links);
    drop(iter_link);
    let _ = ring.consume();
    drop(ring);
    drop(rings);
    let lost = sum_lost(&skel.maps.lost);
    let mut c = collector.into_inner();
    c.flush();
    for r in second_rows(second_start, &c.events, &prev_events, &lost, &prev_lost) {
        stats.push(r)?;
    }
    let Collector {
        events,
        malformed,
        to_writer,
        ..
    } = c;
    drop(to_writer);
    let Written { files, span } = match writer.join() {
        Ok(r) => r?,
        Err(_) => {
            return Err(StackError::Setup(
                "the stack writer thread panicked; this is a bug in weir, please report it".into(),
            ));
        }
    };
    let stats_files: Vec<String> = stats
        .finish()?
        .into_iter()
        .map(|f| format!("{}/{f}", store::dataset::STATS_DIR))
        .collect();
    let elapsed = started.elapsed();
    info.ended_by = ended_by.to_string();
    info.events = by_name(&events);
    info.lost = by_name(&lost);
    info.files = files.clone();
    info.time_span = span.map(|(a, b)| TimeSpan::new(a, b));
    info.program_cost = program_cost.clone();
    write_stack_info(&ds, &base, info.clone())?;
    Ok(StackReport {
        events: info.events,
        lost: info.lost,
        malformed,
        files,
        stats_files,
        snapshots,
        program_cost,
        elapsed,
        ended_by: ended_by.to_string(),
        prepared,
    })
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

/// One iter/tcp pass over every network namespace we can enter (listed
/// anew each time: namespaces come and go).
fn snapshot(link: &Link, collector: &RefCell<Collector>) -> Result<(), StackError> {
    for ns in &setup::network_namespaces() {
        // The TCP iterator walks the namespace of the task that creates it.
        let bytes = setup::in_namespace(ns, || -> Result<Vec<u8>, StackError> {
            let mut it = Iter::new(link).map_err(|e| load_error("starting a snapshot", e))?;
            let mut buf = Vec::new();
            it.read_to_end(&mut buf)
                .map_err(|e| StackError::io(ns, e))?;
            Ok(buf)
        })
        .map_err(|e| StackError::io(ns, e))?;
        // A namespace that went away since it was listed has no sockets.
        let Some(bytes) = bytes.transpose()? else {
            continue;
        };
        let mut c = collector.borrow_mut();
        for rec in bytes.chunks_exact(EVENT_SIZE) {
            c.take(rec);
        }
    }
    Ok(())
}
