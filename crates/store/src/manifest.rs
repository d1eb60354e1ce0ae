//! `manifest.json`: what a dataset holds, where it came from, and how it
//! was made. Plain JSON, so any tool can read it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::packets::{PacketFileSummary, RowOrder};

/// The value of [`Manifest::format`].
pub const DATASET_FORMAT: &str = "weir-dataset";
/// Version of the dataset layout and manifest; bumped on incompatible change.
pub const DATASET_FORMAT_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub format_version: u32,
    pub weir_version: String,
    pub packet_schema_version: u32,
    /// When the dataset was written (RFC 3339, UTC).
    pub created: String,
    /// How it was made: "convert", "capture".
    pub kind: String,
    /// Where timestamps come from: the source files' clocks for a
    /// conversion, the kernel or NIC clock for a capture.
    pub clock: String,
    pub row_order: RowOrder,
    pub sources: Vec<SourceInfo>,
    /// Interfaces, indexed by the packet table's `iface` column.
    pub interfaces: Vec<InterfaceEntry>,
    pub time_span: Option<TimeSpan>,
    pub counts: Counts,
    pub files: Files,
    /// Figures from the run that wrote the dataset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunInfo>,
    /// How a live capture was set up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureInfo>,
    /// Frames lost, by where they were lost (live captures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drops: Option<Drops>,
    /// What `weir stack` recorded into the dataset (`stack/`). Written by
    /// weir stack; every other writer of the manifest carries it over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackInfo>,
    /// ONC RPC / NFS transactions found in the packets (`rpc/`, `nfs/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc: Option<RpcInfo>,
    /// DNS, TLS and HTTP found in the packets (`dns/`, `tls/`, `http/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<AppInfo>,
    /// Set on a copy made by `weir anonymize`: how each kind of value was
    /// changed, and which key (by fingerprint) did it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anonymized: Option<AnonymizedInfo>,
    /// Set on a dataset made by `weir merge`: its inputs, their clocks,
    /// and the duplicates removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeInfo>,
    /// The Kafka stream: what a capture sent (`--kafka`), or what a
    /// collector took (`weir collect`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kafka: Option<KafkaInfo>,
    /// Packet records built from the pcap files after their frames were
    /// stored: a capture's record threads fell behind (or `weir recover`
    /// found frames with no record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_records: Option<LateRecords>,
    /// The copy of the dataset in an object store that its writer keeps
    /// up to date as files are sealed (`--upload`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<UploadInfo>,
    /// Every file's size and digest in a hash chain, and the seal over it
    /// and the rest of this manifest (see [`crate::integrity`]). Kept up
    /// to date by [`crate::Dataset::write_manifest`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrity: Option<crate::integrity::Integrity>,
}

/// A capture's stream to Kafka, or a collector's side of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KafkaInfo {
    /// "producer" (weir capture --kafka) or "collector" (weir collect).
    pub role: String,
    pub brokers: String,
    pub topic: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Producer: the capture's id in every batch header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_id: Option<String>,
    #[serde(default)]
    pub partitions: u32,
    /// Messages (batches) sent or read, records in them, bytes sent.
    pub messages: u64,
    pub records: u64,
    #[serde(default)]
    pub bytes: u64,
    /// Producer: records dropped because the queue to Kafka was full, and
    /// records of batches the broker did not take; records acknowledged.
    /// Collector: messages that were not weir batches.
    pub records_dropped: u64,
    #[serde(default)]
    pub records_failed: u64,
    #[serde(default)]
    pub records_delivered: u64,
    /// Producer: per-second stats messages dropped because the queue to
    /// Kafka was full (the dataset's stats table has them all).
    #[serde(default)]
    pub stats_dropped: u64,
    /// Collector: records of batches read again and skipped (already
    /// written), and per "capture:worker:partition" the last batch on disk.
    #[serde(default)]
    pub duplicates_skipped: u64,
    #[serde(default)]
    pub written: std::collections::BTreeMap<String, u64>,
}

/// The upload of a dataset to an object store, as of this manifest's
/// writing (the manifest in the bucket is the one before it, or this one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UploadInfo {
    /// `s3://BUCKET/PREFIX`.
    pub destination: String,
    /// Files and bytes in the bucket, and manifests sent.
    pub files: u64,
    pub bytes: u64,
    pub manifests: u64,
    /// Requests that failed (and were tried again).
    pub failures: u64,
    /// Files that could not be sent as sealed (gone from the local disk,
    /// or changed there).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped: u64,
    /// Sealed files not yet in the bucket.
    pub backlog_files: u64,
    pub backlog_bytes: u64,
    /// From a file's sealing to its upload: the last file's and the
    /// longest, in ms.
    pub lag_ms_last: u64,
    pub lag_ms_max: u64,
    /// Local copies deleted once in the bucket.
    pub local_deleted: u64,
    /// CPU time the uploader took, in seconds.
    pub cpu_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl From<util::storage::UploadFigures> for UploadInfo {
    fn from(f: util::storage::UploadFigures) -> UploadInfo {
        UploadInfo {
            destination: f.destination,
            files: f.files,
            bytes: f.bytes,
            manifests: f.manifests,
            failures: f.failures,
            skipped: f.skipped,
            backlog_files: f.backlog_files,
            backlog_bytes: f.backlog_bytes,
            lag_ms_last: f.lag_ms_last,
            lag_ms_max: f.lag_ms_max,
            local_deleted: f.local_deleted,
            cpu_s: (f.cpu_s * 1000.0).round() / 1000.0,
            last_error: f.last_error,
        }
    }
}

/// How `weir merge` combined several datasets into one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MergeInfo {
    /// The inputs' files were not copied: the merged dataset names them
    /// (its chain holds each input's files under the input's path, such as
    /// `../shard1/packets/w000-00000.parquet`), and readers read the
    /// inputs (paths relative to the merged dataset's root). Every frame of
    /// every input is kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub linked: bool,
    /// A frame was a duplicate when a frame of another input had the same
    /// headers within this many ns, after the clock offsets; `None` when
    /// duplicates were kept (`--keep-duplicates`).
    pub dedup_window_ns: Option<i64>,
    /// Frames dropped as duplicates, all inputs together.
    pub duplicates_removed: u64,
    /// The inputs, in the order given; the first is the clock reference.
    pub inputs: Vec<MergeInput>,
}

/// One input of a merge.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MergeInput {
    pub path: String,
    /// The input's own `kind` and `clock`.
    pub kind: String,
    pub clock: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// Frames read from it, and of those dropped as duplicates of another
    /// input's.
    pub frames: u64,
    pub duplicates: u64,
    /// Estimated offset of this input's clock from the first input's: its
    /// timestamp minus the first input's for the same frame, the median
    /// over the frames both saw (`offset_frames` of them, differences
    /// spread over `offset_spread_ns` between the 10th and 90th
    /// percentile). `None` when they had no frames in common. Timestamps
    /// are written as captured; the offset is only used to match
    /// duplicates.
    pub clock_offset_ns: Option<i64>,
    pub offset_frames: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_spread_ns: Option<i64>,
    /// Its interfaces are numbered from `iface_base` in the merged
    /// dataset, its pcap files from `pcap_base`.
    pub iface_base: u16,
    pub pcap_base: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnonymizedInfo {
    pub key_fingerprint: String,
    pub addresses: String,
    pub macs: String,
    pub file_handles: String,
    pub names: String,
    /// Absent in copies made before tunnel ids were anonymised.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tunnel_ids: String,
}

/// The RPC stage of a conversion or capture: how it ran, what it counted,
/// the files it wrote.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RpcInfo {
    /// "on" (`--rpc`) or "auto" (started at the first frame to or from
    /// port 111 or 2049).
    pub mode: String,
    /// Calls with no reply for this long were given up on.
    pub call_timeout_s: f64,
    /// Rows of the rpc table.
    pub transactions: u64,
    /// The tracker's counters: calls, replies, matched,
    /// calls_without_reply, replies_without_call, retransmitted_calls,
    /// gaps, gap_bytes, messages_with_gap, resyncs, malformed,
    /// long_messages, unfinished, streams_not_rpc, streams_over_limit.
    pub counters: BTreeMap<String, u64>,
    pub rpc_files: Vec<String>,
    pub nfs_files: Vec<String>,
}

/// What the DNS, TLS and HTTP decoders did (the dns, tls and http tables).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AppInfo {
    /// Rows of each table.
    pub dns: u64,
    pub tls: u64,
    pub http: u64,
    /// The tracker's counters (app::Counters): dns_messages, dns_matched,
    /// dns_unanswered, dns_unmatched_responses, dns_errors and its kinds,
    /// tls_handshakes, tls_errors, http_requests, http_errors,
    /// flows_without_start, gaps, ...
    pub counters: BTreeMap<String, u64>,
    pub dns_files: Vec<String>,
    pub tls_files: Vec<String>,
    pub http_files: Vec<String>,
}

impl AppInfo {
    /// Adds another writer's part (capture workers, conversion sources).
    pub fn merge(&mut self, other: AppInfo) {
        self.dns += other.dns;
        self.tls += other.tls;
        self.http += other.http;
        for (k, v) in other.counters {
            *self.counters.entry(k).or_default() += v;
        }
        self.dns_files.extend(other.dns_files);
        self.tls_files.extend(other.tls_files);
        self.http_files.extend(other.http_files);
        self.dns_files.sort();
        self.tls_files.sort();
        self.http_files.sort();
    }
}

impl RpcInfo {
    /// Adds another writer's part (capture workers, conversion sources).
    pub fn merge(&mut self, other: RpcInfo) {
        if self.mode.is_empty() {
            self.mode = other.mode;
            self.call_timeout_s = other.call_timeout_s;
        }
        self.transactions += other.transactions;
        for (k, v) in other.counters {
            *self.counters.entry(k).or_default() += v;
        }
        self.rpc_files.extend(other.rpc_files);
        self.nfs_files.extend(other.nfs_files);
        self.rpc_files.sort();
        self.nfs_files.sort();
    }
}

fn recorded_before_the_choice() -> bool {
    true
}

fn every_event() -> String {
    "all".to_string()
}

/// A `weir stack` recording: its settings, and its events and losses by
/// event type.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StackInfo {
    /// When recording started (RFC 3339, UTC).
    pub started: String,
    /// "duration", "signal", or "running" while it records.
    pub ended_by: String,
    /// Events are stamped with the kernel's CLOCK_MONOTONIC; this is the
    /// offset to the wall clock that was added, measured at the start.
    pub clock: String,
    pub clock_offset_ns: i64,
    /// Filters: `--pid`, `--comm`, `--port`, `--cgroup`.
    pub pid: Option<u32>,
    pub comm: Option<String>,
    #[serde(default)]
    pub ports: Vec<u16>,
    pub cgroup: Option<String>,
    /// Bytes of each CPU's ring buffer (one ring shared by all CPUs in
    /// recordings from before there was one per CPU).
    pub ring_bytes: u64,
    /// Whether device transmit/receive events were recorded.
    pub devices: bool,
    /// Whether they include pure TCP ACKs (no payload, no SYN/FIN/RST);
    /// recordings from before the choice existed did.
    #[serde(default = "recorded_before_the_choice")]
    pub device_acks: bool,
    pub snapshot_every_s: Option<f64>,
    /// Events written, by event type.
    pub events: BTreeMap<String, u64>,
    /// Events the kernel could not hand over (ring buffer full), by type.
    pub lost: BTreeMap<String, u64>,
    /// Stack table files (`stack/`).
    pub files: Vec<String>,
    pub time_span: Option<TimeSpan>,
    /// "intervals": the frequent events added up per socket in the kernel
    /// (`stack_intervals/`), state changes and retransmissions one by one
    /// (`stack/`); "all": every event one by one (`--events all`, and
    /// every recording from before the choice existed).
    #[serde(default = "every_event")]
    pub mode: String,
    /// With mode "intervals", what ran (`stack_intervals::LEVELS`):
    /// "walk" (the iter/tcp socket walk alone, nothing on the packet
    /// path), "device" (also the per-packet programs: the application and
    /// device split) or "delay" (also the write-to-wire delay). Interval
    /// recordings from before the levels existed were "delay".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// The intervals' length, with mode "intervals".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    /// Sockets the kernel's per-socket map holds, with mode "intervals".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockets: Option<u64>,
    /// Interval table files (`stack_intervals/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interval_files: Vec<String>,
    /// `--program-stats`: the programs' own CPU time in the kernel, by
    /// program (the kernel's BPF run-time statistics).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub program_cost: BTreeMap<String, ProgramCost>,
}

/// How often one eBPF program ran and the CPU time it took, in ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramCost {
    pub runs: u64,
    pub ns: u64,
}

/// The settings of a live capture.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureInfo {
    pub workers_per_interface: u32,
    pub snaplen: u32,
    pub filter: Option<String>,
    /// Receive ring bytes per worker.
    pub ring_bytes: u64,
    pub promiscuous: bool,
    pub libpcap: String,
    /// Sinks that ran: "pcap", "records", "stats".
    pub sinks: Vec<String>,
    pub rotate_bytes: Option<u64>,
    pub rotate_seconds: Option<f64>,
    /// Why it ended: "count", "duration", "signal", "disk-full".
    pub ended_by: String,
    /// `--compress`: none, lz4, zstd:LEVEL or auto.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compress: Option<String>,
    /// Whether pcap writes bypassed the page cache (O_DIRECT).
    #[serde(default)]
    pub direct_io: bool,
    /// Retention limits (`--max-disk`, `--max-age`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_disk_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_age_seconds: Option<f64>,
    /// `--shard K/N`: this capture kept only share K of N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardInfo>,
    /// How each interface's frames were dealt to its workers, when it had
    /// several (`--fanout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fanout: Option<String>,
}

/// Which share of the traffic a sharded capture kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// K, counted from 0.
    pub index: u32,
    /// N.
    pub count: u32,
    /// How frames were assigned: a frame is in share `flow_hash % count`,
    /// frames without a flow hash in share 0.
    pub hash: String,
}

/// Frames lost on the way, by stage.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drops {
    /// Frames that reached the capture sockets in the kernel.
    pub kernel_seen: u64,
    /// Dropped by the kernel: the receive ring was full.
    pub kernel: u64,
    /// Captured but not written to pcap: staging memory was full, or the
    /// disk was (then also counted in `pcap_write`). With pcap and records
    /// (the default) the records are made from what pcap staged, so these
    /// frames have no record either (but those of a block cut from a file
    /// after its write failed may).
    pub pcap: u64,
    /// Of those, frames lost because a write failed (a full disk).
    #[serde(default)]
    pub pcap_write: u64,
    /// Frames the kernel counted into a ring that no worker took
    /// (`kernel_seen - kernel - frames`): those that arrived after the
    /// workers' last read of their rings, a handful at most when traffic
    /// runs on past the end of the capture; more means frames were lost.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ring_unread: u64,
    /// Packet records not on disk because the disk was full (`--on-full
    /// drop`) or a write failed: made while a writer could not write, or
    /// in a file given up part way (its `.part` removed). Their frames are
    /// in `counts.frames`, and in the pcap files unless counted in `pcap`.
    #[serde(default)]
    pub records_write: u64,
    /// Flows-table slices lost with flows files that could not be written;
    /// their packet files are whole, and readers then use the packets.
    #[serde(default)]
    pub flows_write: u64,
    /// Per-second stats rows that could not be written.
    #[serde(default)]
    pub stats_write: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One input trace of a conversion.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceInfo {
    pub path: String,
    /// "pcap" or "pcapng".
    pub container: String,
    /// "none", "gzip" or "zstd".
    pub compression: String,
    pub frames: u64,
    /// Bytes of the (decompressed) trace read.
    pub bytes: u64,
    /// Indices into [`Manifest::interfaces`].
    pub interfaces: Vec<u16>,
    /// Set when reading stopped early; the frames before it were kept.
    pub error: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceEntry {
    /// Index into [`Manifest::sources`].
    pub source: u32,
    pub link_type: u16,
    pub link_name: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub snaplen: u32,
    /// Timestamp units per second in the source.
    pub ts_units_per_sec: u64,
    /// Drops the capturing system recorded in the source (pcapng ISB).
    pub dropped: Option<u64>,
    pub received: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeSpan {
    pub first_ns: i64,
    pub last_ns: i64,
    pub first: String,
    pub last: String,
}

impl TimeSpan {
    pub fn new(first_ns: i64, last_ns: i64) -> Self {
        TimeSpan {
            first_ns,
            last_ns,
            first: crate::time::format_ns(first_ns),
            last: crate::time::format_ns(last_ns),
        }
    }

    pub fn duration_s(&self) -> f64 {
        (self.last_ns - self.first_ns) as f64 / 1e9
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub frames: u64,
    pub wire_bytes: u64,
    pub captured_bytes: u64,
    /// Frames per `parse_error` name; frames that parsed fully are not
    /// counted here.
    pub parse_errors: BTreeMap<String, u64>,
    /// Frames per network/transport kind ("ipv4/tcp", "ipv6/udp", "arp", ...).
    pub protocols: BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Files {
    pub packets: Vec<PacketFileSummary>,
    /// Full frames (`pcap/`); records' `pcap_file` is a file's `id`.
    #[serde(default)]
    pub pcap: Vec<PcapFileEntry>,
    /// Stats table files (`stats/`).
    #[serde(default)]
    pub stats: Vec<String>,
    /// Pcap files retention deleted (`--max-disk`, `--max-age`); records
    /// still point at their frames by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pcap_removed: Vec<RemovedPcapEntry>,
}

/// A pcap file deleted by retention.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedPcapEntry {
    pub id: u32,
    pub path: String,
    pub frames: u64,
    pub stored_bytes: u64,
    pub ts_first: Option<i64>,
    pub ts_last: Option<i64>,
    /// "max-disk" or "max-age".
    pub reason: String,
    /// The pcap file (relative to the dataset root) written over this
    /// one's space: with `--max-disk` the pcap files form a ring, and the
    /// oldest is reused in place rather than deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwritten_by: Option<String>,
}

/// A pcap file of the dataset.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcapFileEntry {
    pub id: u32,
    /// Relative to the dataset root.
    pub path: String,
    pub frames: u64,
    /// Bytes of pcap (decompressed).
    pub bytes: u64,
    pub ts_first: Option<i64>,
    pub ts_last: Option<i64>,
    /// Bytes on disk, when compressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored_bytes: Option<u64>,
    /// Blocks per compression method (`zstd:3`, `stored`, `lz4`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub methods: std::collections::BTreeMap<String, u64>,
    /// The digest its writer took as it wrote the file, for the
    /// integrity chain (which is where the manifest keeps it).
    #[serde(skip)]
    pub digest: Option<util::digest::FileDigest>,
}

/// Records made from the pcap files rather than as the frames came.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LateRecords {
    /// Records built so far from the pcap files (in the packet files).
    pub built: u64,
    /// Frames whose records are still to be built (a running capture);
    /// readers of the dataset do not see those frames' records yet.
    #[serde(default)]
    pub pending: u64,
    /// Frames whose records can no longer be built: their pcap file was
    /// removed (retention) or could not be read first.
    #[serde(default)]
    pub lost: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub command: String,
    pub workers: u32,
    pub elapsed_s: f64,
    pub frames_per_s: f64,
}

impl Manifest {
    /// A manifest of this weir version, made now, with nothing in it yet:
    /// every writer of a dataset starts here and fills in its part.
    pub fn new(kind: &str, clock: &str, row_order: RowOrder) -> Manifest {
        Manifest {
            format: DATASET_FORMAT.to_string(),
            format_version: DATASET_FORMAT_VERSION,
            weir_version: env!("CARGO_PKG_VERSION").to_string(),
            packet_schema_version: crate::PACKET_SCHEMA_VERSION,
            created: crate::time::format_ns(crate::time::now_ns()),
            kind: kind.to_string(),
            clock: clock.to_string(),
            row_order,
            sources: Vec::new(),
            interfaces: Vec::new(),
            time_span: None,
            counts: Counts::default(),
            files: Files::default(),
            run: None,
            capture: None,
            drops: None,
            stack: None,
            rpc: None,
            app: None,
            anonymized: None,
            merge: None,
            kafka: None,
            late_records: None,
            upload: None,
            integrity: None,
        }
    }

    /// The manifest in `bytes` (read from `path`, which errors name).
    pub fn from_json(path: &str, bytes: &[u8]) -> Result<Manifest, crate::StoreError> {
        let invalid = |message: String| crate::StoreError::Invalid {
            path: path.into(),
            message,
        };
        let m: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| invalid(format!("unreadable manifest: {e}")))?;
        if m.format != DATASET_FORMAT {
            return Err(invalid(format!(
                "format is {:?}, not {DATASET_FORMAT:?}",
                m.format
            )));
        }
        Ok(m)
    }

    /// Bytes of all packet files.
    pub fn packet_bytes(&self) -> u64 {
        self.files.packets.iter().map(|f| f.bytes).sum()
    }
}
