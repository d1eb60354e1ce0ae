//! `weir convert`: trace files into a dataset, on every core.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use pcapio::{Chunk, ReaderOptions, TraceReader};
use store::manifest::{
    AppInfo, Files, InterfaceEntry, Manifest, RpcInfo, RunInfo, SourceInfo, TimeSpan,
};
use store::{Dataset, StoreError};

use crate::app::{AppOptions, AppStage};
use crate::rpc::{RpcMode, RpcOptions, RpcStage, SegmentAt, SegmentGate, TablesOn, chunk_segments};
use crate::stats::FrameStats;
use crate::worker::{FrameMeta, Worker, WorkerOptions};
use util::fasthash::FastMap;
use wire::decode::flow_hash_of;

/// A trace to convert.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    Path(PathBuf),
    /// Standard input (a pipe from tcpdump -w -, say).
    Stdin,
}

impl Input {
    pub fn display(&self) -> String {
        match self {
            Input::Path(p) => p.display().to_string(),
            Input::Stdin => "-".to_string(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ConvertOptions {
    pub workers: usize,
    pub worker: WorkerOptions,
    pub reader: ReaderOptions,
    /// Make each record point at its frame in the source trace
    /// (`pcap_file` = source index, `pcap_offset` = record offset).
    pub index_sources: bool,
    /// The command line, for the manifest.
    pub command: String,
    /// ONC RPC / NFS transactions into the rpc and nfs tables.
    pub rpc: RpcOptions,
    /// DNS, TLS and HTTP into the dns, tls and http tables.
    pub app: AppOptions,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            worker: WorkerOptions::default(),
            reader: ReaderOptions::default(),
            index_sources: false,
            command: String::new(),
            rpc: RpcOptions::default(),
            app: AppOptions::default(),
        }
    }
}

/// Counters a caller may watch while [`convert`] runs.
#[derive(Debug, Default)]
pub struct Progress {
    pub frames: AtomicU64,
    /// Bytes of trace consumed (decompressed).
    pub bytes: AtomicU64,
    pub files_done: AtomicU64,
}

/// What a conversion did.
#[derive(Debug)]
pub struct ConvertReport {
    pub manifest: Manifest,
    pub elapsed: Duration,
    /// Sources whose reading stopped early (their earlier frames were kept).
    pub source_errors: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("nothing to convert: give one or more pcap/pcapng files, or - for standard input")]
    NoInputs,
}

/// A chunk on its way to the workers. Every worker gets every chunk and
/// decodes the frames of the flows it owns, as a live capture's fanout
/// deals them: each flow is then one worker's, and the flows table holds
/// one slice of it per file rather than one per worker. The chunk's buffer
/// goes back to its reader when the last holder lets go of it.
struct Job {
    chunk: Chunk,
    /// The worker that decodes each frame (empty: worker 0, the only one).
    owners: Vec<u16>,
    /// Global interface index of each of the reader's interfaces.
    ifaces: Arc<Vec<u16>>,
    source: u32,
    back: Sender<Vec<u8>>,
    /// The source's RPC stage, which takes the chunk after the workers.
    rpc: Option<Sender<RpcJob>>,
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(buf) = std::mem::take(&mut self.chunk).data.into_buffer() {
            let _ = self.back.send(buf);
        }
    }
}

/// One worker's part of a chunk it is done with: the TCP and UDP segments
/// of its frames as it decoded them, on their way to the source's RPC
/// stage, which waits for every worker's part.
struct RpcJob {
    job: Arc<Job>,
    segments: Vec<SegmentAt>,
}

#[derive(Default)]
struct Registry {
    sources: Vec<SourceInfo>,
    interfaces: Vec<InterfaceEntry>,
    errors: Vec<String>,
    rpc: Option<store::manifest::RpcInfo>,
    app: Option<AppInfo>,
}

/// Converts `inputs` into `dataset` (already created, empty) and writes its
/// manifest. Unreadable or damaged inputs do not stop the others: what they
/// held up to the damage is kept and the error is reported.
pub fn convert(
    inputs: &[Input],
    dataset: &Dataset,
    opts: &ConvertOptions,
    progress: &Progress,
) -> Result<ConvertReport, ConvertError> {
    if inputs.is_empty() {
        return Err(ConvertError::NoInputs);
    }
    let started = Instant::now();
    let workers = opts.workers.clamp(1, 1024);
    let registry = Mutex::new(Registry {
        sources: inputs
            .iter()
            .map(|i| SourceInfo {
                path: i.display(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    });
    let abort = AtomicBool::new(false);
    let load = Load::new(workers);
    let next_input = AtomicUsize::new(0);
    let (job_txs, job_rxs): (Vec<_>, Vec<_>) =
        (0..workers).map(|_| bounded::<Arc<Job>>(32)).unzip();
    // Readers: enough to keep decompression from starving the workers when
    // there are several files, one for a single file.
    let readers = inputs.len().min(workers.div_ceil(2)).max(1);

    let results = std::thread::scope(|s| {
        let worker_handles: Vec<_> = job_rxs
            .into_iter()
            .enumerate()
            .map(|(w, rx)| {
                let (abort, progress, dataset, load) = (&abort, progress, dataset.clone(), &load);
                let (wopts, index_sources) = (opts.worker, opts.index_sources);
                let gate = SegmentGate::for_source(opts.rpc.mode, opts.app.on);
                std::thread::Builder::new()
                    .name(format!("weir-work{w}"))
                    .spawn_scoped(s, move || {
                        let on = (abort, progress, load);
                        run_worker(w as u16, rx, dataset, (wopts, gate), index_sources, on)
                    })
                    .expect("spawning a worker thread")
            })
            .collect();
        let reader_handles: Vec<_> = (0..readers)
            .map(|_| {
                let tx = job_txs.clone();
                let (registry, abort, next_input, load) = (&registry, &abort, &next_input, &load);
                let (reader_opts, rpc_opts, app_opts) = (opts.reader, opts.rpc, opts.app);
                std::thread::Builder::new()
                    .name("weir-read".into())
                    .spawn_scoped(s, move || {
                        loop {
                            let i = next_input.fetch_add(1, Ordering::Relaxed);
                            if i >= inputs.len() || abort.load(Ordering::Relaxed) {
                                break;
                            }
                            let read = |rpc: Option<Sender<RpcJob>>| {
                                read_input(
                                    i,
                                    &inputs[i],
                                    reader_opts,
                                    Outlets {
                                        workers: &tx,
                                        rpc,
                                        load,
                                    },
                                    registry,
                                    abort,
                                    progress,
                                )
                            };
                            if rpc_opts.mode == RpcMode::Off && !app_opts.on {
                                read(None);
                            } else {
                                let id = i.min(u16::MAX as usize) as u16;
                                let stages = Stages {
                                    rpc: (rpc_opts.mode != RpcMode::Off).then(|| {
                                        RpcStage::new(dataset, id, rpc_opts, TablesOn::Caller)
                                    }),
                                    app: app_opts.on.then(|| AppStage::new(dataset, id, app_opts)),
                                };
                                read(start_rpc_stage(s, i, stages, workers, registry));
                            }
                            progress.files_done.fetch_add(1, Ordering::Relaxed);
                        }
                    })
                    .expect("spawning a reader thread")
            })
            .collect();
        drop(job_txs);
        let mut reader_panicked = false;
        for h in reader_handles {
            reader_panicked |= h.join().is_err();
        }
        let mut results: Vec<_> = worker_handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(panicked("worker"))))
            .collect();
        if reader_panicked {
            results.push(Err(panicked("reader")));
        }
        results
    });

    let converted = gather(results)?;
    let elapsed = started.elapsed();
    let mut registry = registry.into_inner().unwrap_or_default();
    let errors = std::mem::take(&mut registry.errors);
    let manifest = convert_manifest(registry, converted, opts, workers, elapsed);
    let manifest = dataset.write_manifest(&manifest)?;
    Ok(ConvertReport {
        manifest,
        elapsed,
        source_errors: errors,
    })
}

/// The converted dataset's manifest.
fn convert_manifest(
    registry: Registry,
    converted: Converted,
    opts: &ConvertOptions,
    workers: usize,
    elapsed: Duration,
) -> Manifest {
    let Converted { mut files, stats } = converted;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Manifest {
        sources: registry.sources,
        interfaces: registry.interfaces,
        time_span: (stats.frames > 0).then(|| TimeSpan::new(stats.ts_min, stats.ts_max)),
        counts: stats.counts(),
        files: Files {
            packets: files,
            ..Default::default()
        },
        run: Some(RunInfo {
            command: opts.command.clone(),
            workers: workers as u32,
            elapsed_s: elapsed.as_secs_f64(),
            frames_per_s: stats.frames as f64 / elapsed.as_secs_f64().max(1e-9),
        }),
        rpc: registry.rpc,
        app: registry.app,
        ..Manifest::new("convert", "source", opts.worker.writer.order)
    }
}

fn panicked(what: &str) -> StoreError {
    StoreError::Invalid {
        path: PathBuf::from(format!("<{what} thread>")),
        message: format!("a conversion {what} panicked; this is a bug in weir, please report it"),
    }
}

/// What a worker wrote: its packet files and the frames' stats.
#[derive(Default)]
struct Converted {
    files: Vec<store::PacketFileSummary>,
    stats: FrameStats,
}

type WorkerResult = Result<Converted, StoreError>;

/// The workers' files and stats together, or the first error.
fn gather(results: Vec<WorkerResult>) -> WorkerResult {
    let mut all = Converted::default();
    let mut first_error = None;
    for r in results {
        match r {
            Ok(c) => {
                all.files.extend(c.files);
                all.stats.merge(&c.stats);
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(all),
    }
}

fn run_worker(
    id: u16,
    rx: Receiver<Arc<Job>>,
    dataset: Dataset,
    (opts, gate): (WorkerOptions, SegmentGate),
    index_sources: bool,
    (abort, progress, load): (&AtomicBool, &Progress, &Load),
) -> WorkerResult {
    let mut worker = Worker::new(id, dataset, opts);
    let mut keeping_segments = false;
    let mut failed = None;
    // The chunk's index of each frame this worker decoded, to name the
    // frames of its segments as the RPC stage counts them.
    let mut mine = Vec::new();
    for job in rx.iter() {
        if job.rpc.is_some() && !keeping_segments {
            worker.keep_segments(gate);
            keeping_segments = true;
        }
        mine.clear();
        if failed.is_none() {
            let r = (|| {
                for (i, f) in job.chunk.frames.iter().enumerate() {
                    if job.owners.get(i).is_some_and(|&o| o != id) {
                        continue;
                    }
                    mine.push(i as u32);
                    let meta = FrameMeta {
                        ts_ns: f.ts_ns,
                        wire_len: f.wire_len,
                        link: f.link,
                        iface: job
                            .ifaces
                            .get(f.iface as usize)
                            .copied()
                            .unwrap_or(u16::MAX),
                        pcap: index_sources.then_some((job.source, f.record_offset)),
                    };
                    worker.frame(meta, job.chunk.frame_bytes(f))?;
                }
                Ok::<(), StoreError>(())
            })();
            progress
                .frames
                .fetch_add(mine.len() as u64, Ordering::Relaxed);
            load.done[id as usize].fetch_add(mine.len() as u64, Ordering::Relaxed);
            if let Err(e) = r {
                // Stop the readers; keep draining so that none blocks.
                abort.store(true, Ordering::Relaxed);
                failed = Some(e);
            }
        }
        // Segments of a chunk cut short by an error are still handed on:
        // the stage takes chunks in order and must see every one.
        let mut segments = worker.take_segments();
        if let Some(stage) = &job.rpc {
            for seg in &mut segments {
                seg.frame = mine.get(seg.frame as usize).copied().unwrap_or(u32::MAX);
            }
            let _ = stage.send(RpcJob {
                job: job.clone(),
                segments,
            });
        }
    }
    match failed {
        Some(e) => Err(e),
        None => worker.finish().map(|d| Converted {
            files: d.files,
            stats: d.stats,
        }),
    }
}

/// Frames dealt to each worker and frames each has decoded: what it has
/// queued, for giving new flows to the least busy.
struct Load {
    dealt: Vec<AtomicU64>,
    done: Vec<AtomicU64>,
}

impl Load {
    fn new(workers: usize) -> Self {
        let zeros = || (0..workers).map(|_| AtomicU64::new(0)).collect();
        Load {
            dealt: zeros(),
            done: zeros(),
        }
    }
}

/// Deals a source's frames to the workers by flow: a flow stays on the
/// worker that got its first frame, and a new flow goes to the worker with
/// the fewest frames queued (counting those just dealt), so that a few
/// long flows do not leave one worker idle. Flows not seen for a while
/// are forgotten (they may then go elsewhere: another slice, still exact).
struct FlowDealer<'a> {
    load: &'a Load,
    owner: FastMap<u32, (u16, u64)>,
    chunks: u64,
    queued: Vec<u64>,
}

impl<'a> FlowDealer<'a> {
    /// Chunks after which a quiet flow is forgotten.
    const FORGET_AFTER: u64 = 64;

    fn new(load: &'a Load) -> Self {
        FlowDealer {
            load,
            owner: FastMap::default(),
            chunks: 0,
            queued: Vec::new(),
        }
    }

    /// Which worker decodes each frame of `chunk` (frames without a flow
    /// go by load too); empty for one worker.
    fn deal(&mut self, chunk: &Chunk, out: &mut Vec<u16>) {
        out.clear();
        let workers = self.load.dealt.len();
        if workers <= 1 {
            return;
        }
        self.chunks += 1;
        if self.chunks % Self::FORGET_AFTER == 0 {
            let since = self.chunks - Self::FORGET_AFTER;
            self.owner.retain(|_, (_, last)| *last >= since);
        }
        self.queued.clear();
        self.queued
            .extend(self.load.dealt.iter().zip(&self.load.done).map(|(d, e)| {
                d.load(Ordering::Relaxed)
                    .saturating_sub(e.load(Ordering::Relaxed))
            }));
        let before = self.queued.clone();
        let (queued, owner, now) = (&mut self.queued, &mut self.owner, self.chunks);
        let least = |q: &[u64]| (0..q.len()).min_by_key(|&w| q[w]).unwrap_or(0) as u16;
        out.extend(chunk.iter().map(|(f, bytes)| {
            let w = match flow_hash_of(f.link, bytes, f.wire_len) {
                Some(h) => {
                    let e = owner.entry(h).or_insert_with(|| (least(queued), now));
                    e.1 = now;
                    e.0
                }
                None => least(queued),
            };
            queued[w as usize] += 1;
            w
        }));
        // What this chunk dealt each worker is what its count grew by.
        for ((d, after), was) in self.load.dealt.iter().zip(&self.queued).zip(before) {
            d.fetch_add(after - was, Ordering::Relaxed);
        }
    }
}

/// The stages a source's segments go through, in order.
struct Stages {
    rpc: Option<RpcStage>,
    app: Option<AppStage>,
}

/// What a source's stages did.
struct StagesDone {
    rpc: Result<Option<RpcInfo>, String>,
    app: Result<Option<AppInfo>, String>,
}

/// Starts the RPC and app stages of source `index` on a thread of its own and
/// returns where its chunks go. Each of the `workers` hands on its part of
/// every chunk (the segments of the frames it decoded); the stage puts the
/// parts of a chunk together and the chunks in order (it needs each flow's
/// frames in order, and the workers finish chunks at their own pace), and
/// tracks them; the last part to go gives the chunk's buffer back.
/// Once the workers have handed on the source's last chunk it finishes and
/// records what it did in the registry (nobody waits for it but the end
/// of the conversion's scope: the reader goes on to the next source and
/// the workers to their last row groups meanwhile).
fn start_rpc_stage<'scope>(
    s: &'scope std::thread::Scope<'scope, '_>,
    index: usize,
    stages: Stages,
    workers: usize,
    registry: &'scope Mutex<Registry>,
) -> Option<Sender<RpcJob>> {
    let (tx, rx) = bounded::<RpcJob>(4);
    let record = move |done: StagesDone| {
        let mut reg = registry.lock().unwrap_or_else(|p| p.into_inner());
        let path = reg.sources[index].path.clone();
        match done.rpc {
            Ok(Some(info)) => reg.rpc.get_or_insert_with(Default::default).merge(info),
            Ok(None) => {}
            Err(e) => reg.errors.push(format!("{path}: RPC stage: {e}")),
        }
        match done.app {
            Ok(Some(info)) => reg.app.get_or_insert_with(Default::default).merge(info),
            Ok(None) => {}
            Err(e) => reg.errors.push(format!("{path}: DNS/TLS/HTTP stage: {e}")),
        }
    };
    let Stages { mut rpc, mut app } = stages;
    let stage = move || {
        // Each stage's first error stops it alone.
        let mut error = None;
        let mut app_error = None;
        let mut next = 0u64;
        // Chunks by sequence number: the parts come so far.
        let mut early: BTreeMap<u64, Vec<RpcJob>> = BTreeMap::new();
        for part in rx.iter() {
            early.entry(part.job.chunk.seq).or_default().push(part);
            while early.get(&next).is_some_and(|parts| parts.len() == workers) {
                let mut parts = early.remove(&next).unwrap_or_default();
                next += 1;
                let Some(first) = parts.pop() else { continue };
                let mut segments = first.segments;
                for p in parts {
                    segments.extend(p.segments);
                }
                segments.sort_unstable_by_key(|s| s.frame);
                for seg in chunk_segments(&first.job.chunk, &segments) {
                    if let Some(r) = rpc.as_mut()
                        && let Err(e) = r.segment(&seg)
                    {
                        error = Some(e);
                        rpc = None;
                    }
                    if let Some(a) = app.as_mut()
                        && let Err(e) = a.segment(&seg)
                    {
                        app_error = Some(e);
                        app = None;
                    }
                }
            }
        }
        // Chunks after one that never came (the conversion was stopped)
        // are left unread.
        let rpc = match (error, rpc) {
            (Some(e), _) => Err(e.to_string()),
            (None, Some(r)) => r.finish().map_err(|e| e.to_string()),
            (None, None) => Ok(None),
        };
        let app = match (app_error, app) {
            (Some(e), _) => Err(e.to_string()),
            (None, Some(a)) => a.finish().map(Some).map_err(|e| e.to_string()),
            (None, None) => Ok(None),
        };
        StagesDone { rpc, app }
    };
    let started = std::thread::Builder::new()
        .name("weir-rpc".into())
        .spawn_scoped(s, move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(stage));
            record(result.unwrap_or_else(|_| {
                let bug = "the stage panicked; this is a bug in weir, please report it";
                StagesDone {
                    rpc: Err(bug.into()),
                    app: Err(bug.into()),
                }
            }));
        });
    match started {
        Ok(_) => Some(tx),
        Err(e) => {
            let e = format!("starting the RPC/app thread: {e}");
            record(StagesDone {
                rpc: Err(e.clone()),
                app: Err(e),
            });
            None
        }
    }
}

/// Where a reader sends its chunks.
struct Outlets<'a> {
    workers: &'a [Sender<Arc<Job>>],
    /// The source's RPC stage, named in each chunk for the workers.
    rpc: Option<Sender<RpcJob>>,
    load: &'a Load,
}

fn read_input(
    index: usize,
    input: &Input,
    opts: ReaderOptions,
    to: Outlets,
    registry: &Mutex<Registry>,
    abort: &AtomicBool,
    progress: &Progress,
) {
    let opened = match input {
        Input::Path(p) => TraceReader::open(p, opts),
        Input::Stdin => {
            TraceReader::from_read(PathBuf::from("<stdin>"), Box::new(std::io::stdin()), opts)
        }
    };
    let mut reader = match opened {
        Ok(r) => r,
        Err(e) => {
            let mut reg = registry.lock().unwrap_or_else(|p| p.into_inner());
            reg.sources[index].error = Some(e.to_string());
            reg.errors.push(e.to_string());
            return;
        }
    };
    let (back_tx, back_rx) = unbounded::<Vec<u8>>();
    let mut ifaces: Arc<Vec<u16>> = Arc::new(Vec::new());
    let mut error = None;
    let mut last_bytes = reader.bytes_read();
    let mut dealer = FlowDealer::new(to.load);
    'chunks: while !abort.load(Ordering::Relaxed) {
        while let Ok(buf) = back_rx.try_recv() {
            reader.recycle(buf);
        }
        match reader.next_chunk() {
            Ok(Some(chunk)) => {
                if reader.interfaces().len() > ifaces.len() {
                    ifaces = Arc::new(register_interfaces(index, &reader, &ifaces, registry));
                }
                let bytes = reader.bytes_read();
                progress
                    .bytes
                    .fetch_add(bytes - last_bytes, Ordering::Relaxed);
                last_bytes = bytes;
                let mut owners = Vec::new();
                dealer.deal(&chunk, &mut owners);
                let job = Arc::new(Job {
                    chunk,
                    owners,
                    ifaces: ifaces.clone(),
                    source: index as u32,
                    back: back_tx.clone(),
                    rpc: to.rpc.clone(),
                });
                for worker in to.workers {
                    if worker.send(job.clone()).is_err() {
                        break 'chunks;
                    }
                }
            }
            Ok(None) => break,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    // Interfaces declared after the last frame, and final drop counts.
    let ifaces = register_interfaces(index, &reader, &ifaces, registry);
    let mut reg = registry.lock().unwrap_or_else(|p| p.into_inner());
    for (local, &global) in ifaces.iter().enumerate() {
        let info = &reader.interfaces()[local];
        let entry = &mut reg.interfaces[global as usize];
        entry.dropped = info.dropped;
        entry.received = info.received;
    }
    let src = &mut reg.sources[index];
    src.container = reader.container().name().to_string();
    src.compression = reader.compression().name().to_string();
    src.frames = reader.frames_read();
    src.bytes = reader.bytes_read();
    src.interfaces = ifaces;
    if let Some(e) = error {
        src.error = Some(e.clone());
        reg.errors.push(e);
    }
}

/// Gives the reader's new interfaces global numbers; returns the full map.
fn register_interfaces(
    index: usize,
    reader: &TraceReader,
    known: &[u16],
    registry: &Mutex<Registry>,
) -> Vec<u16> {
    let mut map = known.to_vec();
    if reader.interfaces().len() == map.len() {
        return map;
    }
    let mut reg = registry.lock().unwrap_or_else(|p| p.into_inner());
    for info in &reader.interfaces()[map.len()..] {
        let global = reg.interfaces.len().min(u16::MAX as usize) as u16;
        reg.interfaces.push(InterfaceEntry {
            source: index as u32,
            link_type: info.link.0,
            link_name: info.link.name().to_string(),
            name: info.name.clone(),
            description: info.description.clone(),
            snaplen: info.snaplen,
            ts_units_per_sec: info.ts_units_per_sec,
            dropped: info.dropped,
            received: info.received,
        });
        map.push(global);
    }
    map
}
