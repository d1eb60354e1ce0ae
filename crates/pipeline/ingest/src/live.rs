//! Live capture: AF_PACKET rings in a fanout group, one worker thread per
//! ring, each feeding its own sinks; a stats row per worker per second.
//!
//! A worker takes whole blocks of frames from its ring, parses each frame
//! once and hands it to its sinks: the pcap spool (staging blocks for a
//! writer thread; full staging means a counted drop, never a wait) and the
//! packet records. Nothing is shared between workers but the stop flag and,
//! with `-c`, the frame count.
//!
//! The capture's sequence, one module a step: [`open`] (the privileged
//! part: filters, fanout programs, rings), then [`Opened::run`]: each
//! worker's sinks set up and the rings started (`start`), the workers'
//! loop (`worker_loop`) and, with pcap, their records threads (`records`),
//! the stats loop (`run`, sampling through `sampler`, the disk through
//! `disk`), the workers joined (`join`) and the manifest written
//! (`manifest`). `rings` grows each worker's first ring to its full size
//! while the capture records.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use capture::bpf::SocketProgram;
use capture::ring::{RingError, RingOptions, RxRing};
use capture::{FanoutBy, Interface, Shard};
use pcapio::seekable::Codec;
use pcapio::spool::{OnFull, PcapFileInfo, SpoolShared};
use store::StoreError;
use store::manifest::Manifest;
use wire::LinkType;

use crate::worker::WorkerOptions;

mod disk;
mod join;
mod manifest;
mod open;
mod records;
mod rings;
mod run;
mod sampler;
mod start;
mod worker_loop;

pub use open::{Opened, open};

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
    pub keep: PcapKeeping,
}

/// The frames a capture takes and when it ends: what a user asks
/// (`capture_run::CaptureOptions`) and what the rings open with
/// ([`LiveOptions`]) alike.
#[derive(Clone, Debug)]
pub struct CaptureScope {
    pub snaplen: u32,
    /// tcpdump filter syntax.
    pub filter: Option<String>,
    /// Keep only this share of the flows (`--shard K/N`).
    pub shard: Option<Shard>,
    /// How an interface's rings share its frames, when it has several
    /// (`--fanout`).
    pub fanout: FanoutBy,
    pub promiscuous: bool,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
}

/// How pcap files are kept: what a user asks (`capture_run::PcapPolicy`)
/// and what each worker's writer is given ([`PcapOut`]) alike.
#[derive(Clone, Copy, Debug)]
pub struct PcapKeeping {
    pub codec: Codec,
    /// O_DIRECT writes where the filesystem takes them.
    pub direct: bool,
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
    pub scope: CaptureScope,
    pub pcap: Option<PcapOut>,
    pub records: bool,
    /// What every writer does when the disk is full (`--on-full`).
    pub on_full: OnFull,
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
