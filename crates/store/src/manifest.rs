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
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub command: String,
    pub workers: u32,
    pub elapsed_s: f64,
    pub frames_per_s: f64,
}
