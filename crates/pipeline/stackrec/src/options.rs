//! What a recording is asked to do.

use std::path::PathBuf;
use std::time::Duration;

use stack::ProbeOptions;

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
    pub(crate) fn probe(&self) -> ProbeOptions {
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
