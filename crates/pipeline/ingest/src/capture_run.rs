//! A whole live capture (`weir capture`): the defaults a capture takes
//! from the machine, the dataset made once the rings are open, privileges
//! given up, the run, and a record stream (Kafka) finished into the
//! manifest. Callers give options and watch events; they print.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use capture::{Interface, RingOptions};
use pcapio::spool::OnFull;
use store::Dataset;
use store::manifest::KafkaInfo;

use crate::live::{self, LiveOptions, LiveReport, PcapOut, Second};
pub use crate::live::{CaptureScope, PcapKeeping};
use crate::rpc::{RpcMode, RpcOptions};
use crate::worker::{Taps, WorkerOptions};

/// Where a capture goes.
#[derive(Clone, Debug)]
pub enum Target {
    /// A dataset directory: pcap files, records, or both.
    Dataset {
        dir: PathBuf,
        /// Replace it if it is an existing weir dataset.
        force: bool,
        pcap: bool,
        records: bool,
    },
    /// Only full frames, to this pcap file (rotated: FILE, FILE.1, ...).
    PcapFile(PathBuf),
}

/// How pcap files are written.
#[derive(Clone, Debug)]
pub struct PcapPolicy {
    pub rotate_size: Option<u64>,
    pub rotate_time: Option<Duration>,
    /// Staging memory for all workers together (default: an eighth of the
    /// memory available, from 256 MiB to 4 GiB).
    pub staging_bytes: Option<u64>,
    /// How far the records may fall behind pcap, all workers together
    /// (`--records-lag`; default from the staging).
    pub records_lag: Option<u64>,
    /// What every writer does when the disk is full (`--on-full`).
    pub on_full: OnFull,
    /// `max_disk`: a ring of files under this many bytes.
    pub keep: PcapKeeping,
}

/// Everything a capture is asked to do.
#[derive(Clone, Debug)]
pub struct CaptureOptions {
    pub interfaces: Vec<String>,
    pub target: Target,
    /// Workers (rings) per interface (default: one for a pcap file, else
    /// one per core).
    pub workers: Option<usize>,
    /// Bytes of each receive ring (default: a quarter second at 10 Gb/s,
    /// bounded by free memory).
    pub ring_bytes: Option<usize>,
    /// Bytes of one ring block: a power of two from 64 KiB to 64 MiB.
    pub ring_block: usize,
    pub scope: CaptureScope,
    pub pcap: PcapPolicy,
    /// Records (and, unless sized otherwise, pcap) files close at least
    /// this often, so that queries see a running capture.
    pub records_every: Duration,
    pub rpc: RpcOptions,
    /// DNS, TLS and HTTP into the dns, tls and http tables (records on).
    pub app: crate::app::AppOptions,
    /// Become this user once the rings are open.
    pub user: Option<String>,
    /// Signs the manifest's seal at every write (`--sign-key`).
    pub sign_key: Option<std::sync::Arc<store::integrity::SigningKey>>,
    /// Told of every manifest written (`--upload`: the files go to an
    /// object store as they are sealed), and how long the end of the
    /// capture waits for what it has not sent yet.
    pub publisher: Option<std::sync::Arc<dyn util::storage::Publisher>>,
    pub publish_wait: Duration,
    /// The command line, for the manifest.
    pub command: String,
}

/// A copy of the records to somewhere else while capturing (Kafka): its
/// taps go to the workers; once they are done, it finishes and says what
/// it did, for the manifest.
pub trait RecordStream {
    fn taps(&self) -> Taps;
    /// Waits for what is in flight; problems go to `warnings`.
    fn finish(self: Box<Self>, warnings: &mut Vec<String>) -> KafkaInfo;
}

/// What a capture tells its caller while it runs.
pub enum CaptureEvent<'a> {
    /// Something to know that does not stop it (an interface is down).
    Warning(String),
    /// Every worker is set up and capturing.
    Ready { rings: usize, ring_bytes: usize },
    /// Once a second.
    Second(&'a Second),
}

/// A finished capture.
pub struct CaptureReport {
    pub live: LiveReport,
    /// The dataset written, if any.
    pub dataset: Option<PathBuf>,
}

/// Runs a capture until `stop` is set, the count is reached or the
/// duration is over.
pub fn capture(
    opts: CaptureOptions,
    stream: Option<Box<dyn RecordStream>>,
    stop: &AtomicBool,
    mut on_event: impl FnMut(CaptureEvent),
) -> Result<CaptureReport, String> {
    check(&opts)?;
    let interfaces = opts
        .interfaces
        .iter()
        .map(|n| Interface::by_name(n).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    for i in interfaces.iter().filter(|i| !i.up) {
        on_event(CaptureEvent::Warning(format!(
            "{} is down; it will see no traffic until `ip link set {} up`",
            i.name, i.name
        )));
    }
    let (pcap_on, records_on) = outputs(&opts.target);
    if stream.is_some() && !records_on {
        return Err("--kafka streams the packet records: give -o DATASET with records on".into());
    }
    let mut live_opts = live_options(&opts, interfaces)?;
    live_opts.taps = stream.as_ref().map(|s| s.taps());
    let ring = live_opts.ring;
    let opened = live::open(live_opts).map_err(|e| e.to_string())?;
    for note in opened.notes() {
        on_event(CaptureEvent::Warning(note.clone()));
    }
    let dataset = match &opts.target {
        Target::Dataset { dir, force, .. } => {
            let d = Dataset::create_with_manifest(dir, *force, &opened.manifest())
                .map_err(|e| e.to_string())?
                .signed_with(opts.sign_key.clone())
                .published_to(opts.publisher.clone());
            if pcap_on {
                d.subdir(store::dataset::PCAP_DIR)
                    .map_err(|e| e.to_string())?;
            }
            Some(d)
        }
        Target::PcapFile(_) => None,
    };
    if let Some(user) = &opts.user {
        let out = match &opts.target {
            Target::Dataset { dir, .. } => dir.as_path(),
            Target::PcapFile(f) => f.as_path(),
        };
        capture::privilege::become_user(user, Some(out))?;
    }
    capture::privilege::drop_capabilities()?;
    let rings = opened.rings();
    // Both callbacks report through the caller's one function, in turn.
    let on_event = std::cell::RefCell::new(&mut on_event);
    let mut report = opened
        .run(
            dataset.as_ref(),
            stop,
            || {
                (on_event.borrow_mut())(CaptureEvent::Ready {
                    rings,
                    ring_bytes: ring.total(),
                })
            },
            |s: &Second| (on_event.borrow_mut())(CaptureEvent::Second(s)),
        )
        .map_err(|e| e.to_string())?;
    if let Some(stream) = stream {
        // Every worker's tap is gone (flushed): finish the stream, then
        // say in the manifest what it did.
        let info = stream.finish(&mut report.warnings);
        if let (Some(ds), Some(m)) = (dataset.as_ref(), report.manifest.as_mut()) {
            m.kafka = Some(info);
            *m = ds.write_manifest(m).map_err(|e| e.to_string())?;
        }
    }
    if let (Some(ds), Some(m)) = (dataset.as_ref(), report.manifest.as_mut()) {
        // The uploads still to go, and the manifest with their figures.
        if let Some(done) = ds
            .finish_publishing(m, opts.publish_wait)
            .map_err(|e| e.to_string())?
        {
            *m = done;
        }
    }
    Ok(CaptureReport {
        live: report,
        dataset: dataset.map(|d| d.root().to_path_buf()),
    })
}

/// Whether a capture to `target` writes pcap files and records.
fn outputs(target: &Target) -> (bool, bool) {
    match target {
        Target::Dataset { pcap, records, .. } => (*pcap, *records),
        Target::PcapFile(_) => (true, false),
    }
}

/// The live capture `opts` asks for on `interfaces`, with the machine's
/// defaults filled in (no record tap yet): the workers and rings, the
/// pcap sink, the workers' stages. Fails, before anything is opened, if
/// the dataset directory may not be used or a pcap file's directory is
/// not writable.
pub(crate) fn live_options(
    opts: &CaptureOptions,
    interfaces: Vec<Interface>,
) -> Result<LiveOptions, String> {
    let (pcap_on, records_on) = outputs(&opts.target);
    let workers = opts
        .workers
        .unwrap_or(match opts.target {
            Target::PcapFile(_) => 1,
            Target::Dataset { .. } => num_cpus(),
        })
        .max(1);
    let rings = workers * interfaces.len();
    let ring_bytes = opts.ring_bytes.unwrap_or_else(|| default_ring_bytes(rings));
    let ring = RingOptions::with_total(ring_bytes.max(4 * opts.ring_block), opts.ring_block);
    // Checked now, made once the rings are open (with its manifest).
    if let Target::Dataset { dir, force, .. } = &opts.target {
        store::Dataset::check_new(dir, *force).map_err(|e| e.to_string())?;
    }
    let pcap = pcap_on.then(|| pcap_out(opts, rings)).transpose()?;
    let mut rpc = opts.rpc;
    if rpc.mode == RpcMode::Auto && filter_asks_for_rpc(opts.scope.filter.as_deref()) {
        // The filter keeps RPC traffic: decode it from the first frame.
        rpc.mode = RpcMode::On;
    }
    let worker = WorkerOptions {
        rpc: Some(rpc),
        app: Some(opts.app),
        file_every: Some(opts.records_every),
        ..Default::default()
    };
    Ok(LiveOptions {
        interfaces,
        workers_per_iface: workers,
        ring,
        scope: opts.scope.clone(),
        pcap,
        records: records_on,
        on_full: opts.pcap.on_full,
        worker,
        taps: None,
        command: opts.command.clone(),
        // Root keeps its privileges unless -Z names a user
        // (`capture::privilege::drop_capabilities` leaves root as it is).
        // SAFETY: geteuid cannot fail.
        keeps_privileges: opts.user.is_none() && unsafe { libc::geteuid() } == 0,
    })
}

/// What the options alone can be told to be wrong.
fn check(opts: &CaptureOptions) -> Result<(), String> {
    if opts.scope.snaplen < 64 {
        return Err(format!(
            "-s {} is too short to hold the headers weir parses (at least 64)",
            opts.scope.snaplen
        ));
    }
    let block = opts.ring_block;
    if !block.is_power_of_two() || !(64 << 10..=64 << 20).contains(&block) {
        return Err(format!(
            "--ring-block {block}: a ring block is a power of two from 64Ki to 64Mi bytes (e.g. \
             --ring-block 4Mi)"
        ));
    }
    if opts.records_every < Duration::from_secs(1) {
        return Err(format!(
            "--records-every {:?}: at least 1s (each time closes a file per worker)",
            opts.records_every
        ));
    }
    Ok(())
}

/// The pcap sink's settings, with the machine's defaults.
fn pcap_out(opts: &CaptureOptions, rings: usize) -> Result<PcapOut, String> {
    let p = &opts.pcap;
    let (dir, single_name) = match &opts.target {
        Target::Dataset { dir, .. } => (dir.join(store::dataset::PCAP_DIR), None),
        Target::PcapFile(file) => {
            let dir = file
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            check_writable(dir)?;
            let name = file
                .file_name()
                .ok_or("-w needs a file name")?
                .to_string_lossy()
                .into_owned();
            (dir.to_path_buf(), Some(name))
        }
    };
    let is_dataset = matches!(opts.target, Target::Dataset { .. });
    let staging = p.staging_bytes.unwrap_or_else(default_staging_bytes);
    Ok(PcapOut {
        dir,
        single_name,
        rotate_bytes: p.rotate_size.or(p.keep.max_disk.map(ring_file_bytes)),
        rotate: p.rotate_time.or_else(|| {
            // A dataset's pcap files publish with its records, unless
            // sized otherwise.
            (is_dataset && p.rotate_size.is_none() && p.keep.max_disk.is_none())
                .then_some(opts.records_every)
        }),
        staging_bytes: (staging / rings as u64).max(1 << 20) as usize,
        records_lag: p.records_lag.map(|b| (b / rings as u64) as usize),
        keep: p.keep,
    })
}

/// The rotation size of a `--max-disk` ring without `--rotate-size`: a
/// ring of about sixteen files, so that the oldest sixteenth goes at a time.
fn ring_file_bytes(max_disk: u64) -> u64 {
    (max_disk / 16).clamp(1 << 20, 1 << 30)
}

/// The default pcap staging: an eighth of the memory available, from
/// 256 MiB to 4 GiB (at 10 Gb/s, 4 GiB rides out a 3-second stall of the
/// disk).
fn default_staging_bytes() -> u64 {
    ((mem_available() / 8.0) as u64).clamp(256 << 20, 4 << 30)
}

fn mem_available() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(2e9, |kb| kb * 1024.0)
}

/// The default ring: a quarter second of 10 Gb/s, at most an eighth of the
/// memory available, shared by all rings.
fn default_ring_bytes(rings: usize) -> usize {
    let quarter_second = 10e9 / 8.0 / 4.0;
    let avail = mem_available();
    let per_ring = (avail / 8.0 / rings.max(1) as f64).min(quarter_second);
    (per_ring as usize).max(8 << 20)
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Fails early, with the directory named, if files cannot be made there.
fn check_writable(dir: &Path) -> Result<(), String> {
    let probe = dir.join(format!(".weir-write-test-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| {
            format!(
                "{}: cannot write there ({e}); choose a writable directory",
                dir.display()
            )
        })
}

/// Whether a tcpdump filter asks for RPC traffic: it names port 111 or
/// 2049 (or the nfs/sunrpc service names).
pub fn filter_asks_for_rpc(filter: Option<&str>) -> bool {
    let Some(f) = filter else { return false };
    f.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .any(|w| matches!(w, "111" | "2049" | "nfs" | "sunrpc"))
}
