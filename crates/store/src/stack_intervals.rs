//! The stack_intervals table: `stack_intervals/*.parquet`, one row per
//! socket per interval of `weir stack`'s interval levels: the walk level
//! (the default) reads each TCP socket's own counters every interval, the
//! per-packet levels (`--with-device`, `--with-delay`) also add the
//! frequent events (application send and receive, incoming segments,
//! device frames) up in the kernel. A column a level does not fill is
//! null ([`level_leaves_empty`]). The columns are documented in
//! [`interval_schema`] and docs/STACK.md.

use std::path::Path;
use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_array::builder::{
    BooleanBuilder, FixedSizeBinaryBuilder, Float64Builder, Int64Builder, ListBuilder,
    StringBuilder, TimestampNanosecondBuilder, UInt8Builder, UInt16Builder, UInt32Builder,
    UInt64Builder,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::columns::{addr, text, ts_type};
use crate::error::StoreError;
use crate::stack::comm_text;
use crate::table::{BatchTable, RowBuilders, TableFiles, writer_properties};

/// Where the table lives in a dataset.
pub const INTERVALS_DIR: &str = "stack_intervals";

/// Version of the table's columns; bumped when a column changes.
pub const INTERVALS_SCHEMA_VERSION: u32 = 2;

/// The counters of an interval, in [`IntervalRow::counts`]' order, with
/// what each counts over the interval.
pub const INTERVAL_COUNTS: [(&str, &str); 13] = [
    (
        "app_sent",
        "bytes the application wrote (send/write returns)",
    ),
    (
        "app_writes",
        "application send/write calls that moved bytes",
    ),
    ("app_received", "bytes the application read"),
    (
        "app_reads",
        "application receive/read calls that moved bytes",
    ),
    (
        "dev_sent",
        "transport payload handed to a device (a GSO frame counts whole; retransmissions included)",
    ),
    ("dev_frames_sent", "frames handed to a device"),
    (
        "dev_received",
        "transport payload taken from a device, joined to the socket by namespace and 4-tuple",
    ),
    ("dev_frames_received", "frames taken from a device"),
    ("segs_in", "incoming segments TCP processed (tcp_probe)"),
    ("retransmits", "segments retransmitted"),
    ("retransmitted", "sequence space retransmitted, bytes"),
    ("state_changes", "TCP state changes"),
    (
        "tcp_samples",
        "samples of the TCP state (each incoming segment, send and receive)",
    ),
];

/// Which of [`INTERVAL_COUNTS`] the walk level fills (from the socket's
/// own counters: write_seq and copied_seq for the application's bytes,
/// total_retrans and bytes_retrans for retransmissions; one TCP state
/// sample per walk); the others need the per-packet programs.
pub const WALK_FILLS: [&str; 5] = [
    "app_sent",
    "app_received",
    "retransmits",
    "retransmitted",
    "tcp_samples",
];

/// The kernel's own per-socket counters (what `ss -ti` prints from
/// tcp_info), differences over the interval, read by the socket walk at
/// every level.
pub const WALK_COUNTS: [(&str, &str); 13] = [
    (
        "tcp_bytes_sent",
        "payload bytes TCP sent, retransmissions included (tcp_info bytes_sent)",
    ),
    (
        "tcp_bytes_received",
        "sequence space received in order (tcp_info bytes_received; a FIN counts one)",
    ),
    ("tcp_bytes_acked", "sequence space the peer acknowledged"),
    ("tcp_bytes_retrans", "payload bytes retransmitted"),
    (
        "tcp_segs_in",
        "segments received (a GRO/GSO packet counts each segment)",
    ),
    ("tcp_segs_out", "segments sent (likewise)"),
    ("tcp_data_segs_in", "segments received with payload"),
    ("tcp_data_segs_out", "segments sent with payload"),
    ("tcp_retrans", "segments retransmitted (total_retrans)"),
    (
        "tcp_rtos",
        "retransmission timeouts (total_rto; null before Linux 6.7)",
    ),
    ("busy_us", "time with data unacknowledged, µs"),
    (
        "rwnd_limited_us",
        "of which limited by the peer's receive window, µs",
    ),
    (
        "sndbuf_limited_us",
        "of which limited by the send buffer, µs",
    ),
];

/// The socket's state at the walk that ended the interval.
pub const WALK_STATE: [(&str, &str); 4] = [
    ("rttvar_us", "round-trip time variation, µs"),
    ("rcv_wnd", "receive window, bytes"),
    ("mss", "send MSS, bytes"),
    (
        "delivery_rate",
        "delivery rate, bytes/s (tcp_info delivery_rate)",
    ),
];

/// The recording levels, as the manifest names them (`stack.level`).
pub const LEVELS: [&str; 3] = ["walk", "device", "delay"];

/// The columns a level leaves null, for `weir analyze`'s note.
pub fn level_leaves_empty(level: &str) -> Vec<&'static str> {
    match level {
        "walk" => {
            let mut v: Vec<&str> = INTERVAL_COUNTS
                .iter()
                .map(|(n, _)| *n)
                .filter(|n| !WALK_FILLS.contains(n))
                .collect();
            v.extend([
                "pid",
                "tid",
                "comm",
                "delay_writes",
                "delay_sum_ns",
                "delay_hist",
            ]);
            v
        }
        "device" => vec!["delay_writes", "delay_sum_ns", "delay_hist"],
        _ => Vec::new(),
    }
}

/// The TCP state sampled, with min, mean, max and last of each.
pub const INTERVAL_METRICS: [(&str, &str); 5] = [
    ("cwnd", "congestion window, segments"),
    ("ssthresh", "slow start threshold, segments"),
    ("srtt_us", "smoothed round-trip time, µs"),
    (
        "in_flight",
        "segments in the network (tcp_packets_in_flight)",
    ),
    ("snd_wnd", "peer's receive window, bytes"),
];

/// Buckets of `delay_hist`: 0 for delays ≤ 0 ns, k for [2^(k-1), 2^k) ns.
pub const DELAY_BUCKETS: usize = 32;

/// One socket's interval.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalRow {
    /// Start of the interval, ns since the epoch.
    pub ts_ns: i64,
    pub interval_ns: u64,
    pub cookie: u64,
    pub netns: u32,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub comm: Option<[u8; 16]>,
    pub family: u8,
    pub proto: u8,
    /// `None` when no event told the socket's addresses.
    pub local_addr: Option<[u8; 16]>,
    pub local_port: Option<u16>,
    pub remote_addr: Option<[u8; 16]>,
    pub remote_port: Option<u16>,
    pub closed: bool,
    /// By [`INTERVAL_COUNTS`]; `None` where the level does not count it.
    pub counts: [Option<u64>; 13],
    /// By [`WALK_COUNTS`]; `None` for a socket the walk does not read
    /// (UDP), and busy times and RTOs where the kernel does not say.
    pub walk: [Option<u64>; 13],
    /// By [`WALK_STATE`].
    pub walk_state: [Option<u64>; 4],
    /// The TCP state at the walk that ended the interval.
    pub tcp_state: Option<u8>,
    /// By [`INTERVAL_METRICS`]: (min, mean, max, last); `None` without a
    /// sample in the interval.
    pub tcp: Option<[(u32, f64, u32, u32); 5]>,
    /// `None` below the delay level.
    pub delay: Option<Delays>,
}

/// The write-to-wire delays of an interval's sampled writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Delays {
    pub writes: u64,
    pub sum_ns: i64,
    pub hist: [u64; DELAY_BUCKETS],
}

/// The table's schema.
pub fn interval_schema() -> SchemaRef {
    let mut f = vec![
        Field::new("ts", ts_type(), false),
        Field::new("interval_ns", DataType::UInt64, false),
        Field::new("cookie", DataType::UInt64, false),
        Field::new("netns", DataType::UInt32, false),
        Field::new("pid", DataType::UInt32, true),
        Field::new("tid", DataType::UInt32, true),
        Field::new("comm", text(), true),
        Field::new("family", DataType::UInt8, false),
        Field::new("proto", DataType::UInt8, false),
        Field::new("local_addr", addr(), true),
        Field::new("local_port", DataType::UInt16, true),
        Field::new("remote_addr", addr(), true),
        Field::new("remote_port", DataType::UInt16, true),
        Field::new("closed", DataType::Boolean, false),
    ];
    for (name, _) in INTERVAL_COUNTS {
        f.push(Field::new(name, DataType::UInt64, true));
    }
    for (m, _) in INTERVAL_METRICS {
        f.push(Field::new(format!("{m}_min"), DataType::UInt32, true));
        f.push(Field::new(format!("{m}_mean"), DataType::Float64, true));
        f.push(Field::new(format!("{m}_max"), DataType::UInt32, true));
        f.push(Field::new(format!("{m}_last"), DataType::UInt32, true));
    }
    f.push(Field::new("delay_writes", DataType::UInt64, true));
    f.push(Field::new("delay_sum_ns", DataType::Int64, true));
    f.push(Field::new(
        "delay_hist",
        DataType::List(Arc::new(Field::new("item", DataType::UInt64, true))),
        true,
    ));
    for (name, _) in WALK_COUNTS {
        f.push(Field::new(name, DataType::UInt64, true));
    }
    for (name, _) in WALK_STATE {
        f.push(Field::new(name, DataType::UInt64, true));
    }
    f.push(Field::new("tcp_state", text(), true));
    Arc::new(Schema::new(f))
}

struct Builders {
    ts: TimestampNanosecondBuilder,
    interval_ns: UInt64Builder,
    cookie: UInt64Builder,
    netns: UInt32Builder,
    pid: UInt32Builder,
    tid: UInt32Builder,
    comm: StringBuilder,
    family: UInt8Builder,
    proto: UInt8Builder,
    local_addr: FixedSizeBinaryBuilder,
    local_port: UInt16Builder,
    remote_addr: FixedSizeBinaryBuilder,
    remote_port: UInt16Builder,
    closed: BooleanBuilder,
    counts: Vec<UInt64Builder>,
    /// Per metric: min, mean, max, last.
    metrics: Vec<(UInt32Builder, Float64Builder, UInt32Builder, UInt32Builder)>,
    delay_writes: UInt64Builder,
    delay_sum_ns: Int64Builder,
    delay_hist: ListBuilder<UInt64Builder>,
    walk: Vec<UInt64Builder>,
    walk_state: Vec<UInt64Builder>,
    tcp_state: StringBuilder,
}

impl Builders {
    fn new() -> Self {
        Builders {
            ts: TimestampNanosecondBuilder::new().with_timezone("UTC"),
            interval_ns: UInt64Builder::new(),
            cookie: UInt64Builder::new(),
            netns: UInt32Builder::new(),
            pid: UInt32Builder::new(),
            tid: UInt32Builder::new(),
            comm: StringBuilder::new(),
            family: UInt8Builder::new(),
            proto: UInt8Builder::new(),
            local_addr: FixedSizeBinaryBuilder::new(16),
            local_port: UInt16Builder::new(),
            remote_addr: FixedSizeBinaryBuilder::new(16),
            remote_port: UInt16Builder::new(),
            closed: BooleanBuilder::new(),
            counts: (0..INTERVAL_COUNTS.len())
                .map(|_| UInt64Builder::new())
                .collect(),
            metrics: (0..INTERVAL_METRICS.len())
                .map(|_| {
                    (
                        UInt32Builder::new(),
                        Float64Builder::new(),
                        UInt32Builder::new(),
                        UInt32Builder::new(),
                    )
                })
                .collect(),
            delay_writes: UInt64Builder::new(),
            delay_sum_ns: Int64Builder::new(),
            delay_hist: ListBuilder::new(UInt64Builder::new()),
            walk: (0..WALK_COUNTS.len())
                .map(|_| UInt64Builder::new())
                .collect(),
            walk_state: (0..WALK_STATE.len())
                .map(|_| UInt64Builder::new())
                .collect(),
            tcp_state: StringBuilder::new(),
        }
    }
}

impl RowBuilders for Builders {
    type Row = IntervalRow;

    fn push(&mut self, r: &IntervalRow) {
        fn addr(b: &mut FixedSizeBinaryBuilder, a: &Option<[u8; 16]>) {
            match a {
                // The builder was made for 16-byte values, so this cannot fail.
                Some(a) => b.append_value(a).expect("16-byte address"),
                None => b.append_null(),
            }
        }
        self.ts.append_value(r.ts_ns);
        self.interval_ns.append_value(r.interval_ns);
        self.cookie.append_value(r.cookie);
        self.netns.append_value(r.netns);
        self.pid.append_option(r.pid);
        self.tid.append_option(r.tid);
        self.comm.append_option(r.comm.as_ref().map(comm_text));
        self.family.append_value(r.family);
        self.proto.append_value(r.proto);
        addr(&mut self.local_addr, &r.local_addr);
        self.local_port.append_option(r.local_port);
        addr(&mut self.remote_addr, &r.remote_addr);
        self.remote_port.append_option(r.remote_port);
        self.closed.append_value(r.closed);
        for (b, v) in self.counts.iter_mut().zip(r.counts) {
            b.append_option(v);
        }
        for (i, (min, mean, max, last)) in self.metrics.iter_mut().enumerate() {
            let m = r.tcp.map(|t| t[i]);
            min.append_option(m.map(|m| m.0));
            mean.append_option(m.map(|m| m.1));
            max.append_option(m.map(|m| m.2));
            last.append_option(m.map(|m| m.3));
        }
        match &r.delay {
            Some(d) => {
                self.delay_writes.append_value(d.writes);
                self.delay_sum_ns.append_value(d.sum_ns);
                self.delay_hist.values().append_slice(&d.hist);
                self.delay_hist.append(true);
            }
            None => {
                self.delay_writes.append_null();
                self.delay_sum_ns.append_null();
                self.delay_hist.append(false);
            }
        }
        for (b, v) in self.walk.iter_mut().zip(r.walk) {
            b.append_option(v);
        }
        for (b, v) in self.walk_state.iter_mut().zip(r.walk_state) {
            b.append_option(v);
        }
        self.tcp_state
            .append_option(r.tcp_state.map(crate::stack::state_name));
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.interval_ns.finish()),
            Arc::new(self.cookie.finish()),
            Arc::new(self.netns.finish()),
            Arc::new(self.pid.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.comm.finish()),
            Arc::new(self.family.finish()),
            Arc::new(self.proto.finish()),
            Arc::new(self.local_addr.finish()),
            Arc::new(self.local_port.finish()),
            Arc::new(self.remote_addr.finish()),
            Arc::new(self.remote_port.finish()),
            Arc::new(self.closed.finish()),
        ];
        for b in &mut self.counts {
            cols.push(Arc::new(b.finish()));
        }
        for (min, mean, max, last) in &mut self.metrics {
            cols.push(Arc::new(min.finish()));
            cols.push(Arc::new(mean.finish()));
            cols.push(Arc::new(max.finish()));
            cols.push(Arc::new(last.finish()));
        }
        cols.push(Arc::new(self.delay_writes.finish()));
        cols.push(Arc::new(self.delay_sum_ns.finish()));
        cols.push(Arc::new(self.delay_hist.finish()));
        for b in self.walk.iter_mut().chain(self.walk_state.iter_mut()) {
            cols.push(Arc::new(b.finish()));
        }
        cols.push(Arc::new(self.tcp_state.finish()));
        cols
    }
}

/// Writes interval rows into rotated Parquet files
/// `stack_intervals/intervals-NNNNN.parquet` (hidden `.part` names until
/// complete). Rows arrive an interval at a time; each interval's rows are
/// one batch.
pub struct IntervalWriter {
    table: BatchTable<Builders>,
}

impl IntervalWriter {
    pub fn new(dir: &Path, rotate_rows: u64) -> Self {
        let files = TableFiles::new(
            dir,
            INTERVALS_DIR,
            "intervals".into(),
            interval_schema(),
            writer_properties("stack_intervals", INTERVALS_SCHEMA_VERSION, &["ts"]),
            rotate_rows,
        );
        // Batches are written when the writer says (an interval's rows).
        IntervalWriter {
            table: BatchTable::new(Builders::new(), files, usize::MAX),
        }
    }

    pub fn push(&mut self, row: &IntervalRow) {
        self.table.append(row);
    }

    /// Rows pushed so far.
    pub fn rows(&self) -> u64 {
        self.table.rows()
    }

    /// Writes the rows pushed since the last flush (one interval's).
    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.table.flush()
    }

    /// Closes the open file; returns the dataset-relative names written.
    pub fn finish(self) -> Result<Vec<String>, StoreError> {
        self.table.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, UInt32Type, UInt64Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn rows_round_trip_with_their_nulls_and_histograms() {
        let dir = std::env::temp_dir().join(format!("weir-intervals-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = IntervalWriter::new(&dir, 2);
        let rows: Vec<IntervalRow> = (0..5u64)
            .map(|i| {
                let mut r = IntervalRow {
                    ts_ns: 1_000 * i as i64,
                    interval_ns: 100,
                    cookie: 40 + i,
                    netns: 1,
                    family: 2,
                    proto: 6,
                    local_port: (i != 2).then_some(5001),
                    local_addr: (i != 2).then_some([7; 16]),
                    tcp: (i % 2 == 0).then_some([(1, 1.5, 2, 2); 5]),
                    delay: (i != 4).then(|| {
                        let mut d = Delays {
                            writes: i,
                            ..Default::default()
                        };
                        d.hist[3] = i;
                        d
                    }),
                    tcp_state: Some(1),
                    ..Default::default()
                };
                r.counts[0] = (i != 3).then_some(100 * i);
                r.walk[0] = (i != 1).then_some(7 * i);
                r
            })
            .collect();
        for (i, r) in rows.iter().enumerate() {
            w.push(r);
            if i % 2 == 1 {
                w.flush().unwrap();
            }
        }
        let files = w.finish().unwrap();
        assert_eq!(files.len(), 3, "5 rows, files rotated after 2");
        let mut seen = 0;
        for f in &files {
            let path = dir.join(f.trim_start_matches("stack_intervals/"));
            let reader =
                ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
                    .unwrap()
                    .build()
                    .unwrap();
            for b in reader {
                let b = b.unwrap();
                let sent = b.column_by_name("app_sent").unwrap();
                let sent = sent.as_primitive::<UInt64Type>();
                let cwnd = b.column_by_name("cwnd_max").unwrap();
                let cwnd = cwnd.as_primitive::<UInt32Type>();
                let mean = b.column_by_name("srtt_us_mean").unwrap();
                let mean = mean.as_primitive::<Float64Type>();
                let port = b.column_by_name("local_port").unwrap();
                let hist = b.column_by_name("delay_hist").unwrap();
                let hist = hist.as_list::<i32>();
                let tcp_sent = b.column_by_name("tcp_bytes_sent").unwrap();
                let tcp_sent = tcp_sent.as_primitive::<UInt64Type>();
                let state = b.column_by_name("tcp_state").unwrap();
                let state = state.as_string::<i32>();
                for i in 0..b.num_rows() {
                    let r = &rows[seen];
                    assert_eq!((!sent.is_null(i)).then(|| sent.value(i)), r.counts[0]);
                    assert_eq!((!tcp_sent.is_null(i)).then(|| tcp_sent.value(i)), r.walk[0]);
                    assert_eq!(state.value(i), "ESTABLISHED");
                    assert_eq!(cwnd.is_null(i), r.tcp.is_none());
                    if r.tcp.is_some() {
                        assert_eq!((cwnd.value(i), mean.value(i)), (2, 1.5));
                    }
                    assert_eq!(port.is_null(i), r.local_port.is_none());
                    assert_eq!(hist.is_null(i), r.delay.is_none());
                    if let Some(d) = &r.delay {
                        let h = hist.value(i);
                        let h = h.as_primitive::<UInt64Type>();
                        assert_eq!(h.len(), DELAY_BUCKETS);
                        assert_eq!(h.value(3), d.hist[3]);
                    }
                    seen += 1;
                }
            }
        }
        assert_eq!(seen, rows.len());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
