//! The flows table: `flows/*.parquet`, one row per bidirectional flow per
//! packet file (a *slice* of the flow), written beside each packet file
//! from the rows its writer already visits grouped by flow.
//!
//! A slice holds, for each direction, what `weir analyze flows` reports of
//! a flow (frames, bytes, payload, TCP flags, first frame, SYN/SYN-ACK/ACK
//! times, retransmissions) in a form that adds up across slices, files,
//! workers and datasets: counts are sums, times are minima and maxima.
//! Retransmissions ("data segments less distinct sequence numbers") do not
//! add up by themselves, so a slice keeps its data segments, its distinct
//! sequence numbers, and the ranges they lie in (one per run of the flow
//! the writer saw): pieces whose ranges do not overlap
//! have no sequence number in common, and their distinct counts add. The
//! writer starts a new slice of a flow whenever a run's range would overlap
//! one the current slice holds, so a slice is always exact; a reader
//! merging slices whose ranges overlap cannot be, and answers those flows
//! from the packets instead.
//!
//! Frames without an IP layer are kept too, one row per ethertype, so that
//! the totals and the protocol mix of a dataset come from this table alone.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, FixedSizeBinaryBuilder, Int64Builder, ListBuilder, UInt8Builder, UInt16Builder,
    UInt32Builder,
};
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeBinaryArray, Int64Array, ListArray, RecordBatch,
    UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use wire::{Has, PacketFields, ParseError};

use crate::error::StoreError;
use crate::files::create_file;
use crate::read::read_batches;
use util::fasthash::FastMap;

/// The flows table's directory in a dataset.
pub const FLOWS_DIR: &str = "flows";

/// Version of the flows table's columns.
pub const FLOWS_SCHEMA_VERSION: u32 = 2;

/// What identifies a slice's flow. Addresses and ports are ordered as the
/// flows analysis orders them: `a` is the smaller (address, port) end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlowKey {
    /// 4 or 6; 0 for frames without an IP layer.
    pub ip_version: u8,
    /// For frames without an IP layer: their ethertype, if any.
    pub ethertype: Option<u16>,
    pub a_ip: [u8; 16],
    pub b_ip: [u8; 16],
    /// 0 when the frames carry no ports.
    pub a_port: u16,
    pub b_port: u16,
    pub proto: u8,
    /// The frames carry ports (a UDP flow to port 0 and the later
    /// fragments of a UDP datagram differ only here).
    pub has_ports: bool,
}

/// Six words, for the slicer's map (a derived hash feeds the addresses
/// to the hasher byte slice by byte slice).
impl std::hash::Hash for FlowKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let word = |a: &[u8; 16], at: usize| {
            u64::from_le_bytes(a[at..at + 8].try_into().unwrap_or_default())
        };
        h.write_u64(word(&self.a_ip, 0));
        h.write_u64(word(&self.a_ip, 8));
        h.write_u64(word(&self.b_ip, 0));
        h.write_u64(word(&self.b_ip, 8));
        h.write_u64((self.a_port as u64) << 48 | (self.b_port as u64) << 32 | self.proto as u64);
        h.write_u64(
            (self.ip_version as u64) << 32
                | self.ethertype.map_or(0, |e| 1 << 16 | e as u64)
                | (self.has_ports as u64) << 24,
        );
    }
}

impl FlowKey {
    pub fn is_ip(&self) -> bool {
        self.ip_version != 0
    }
}

/// One direction of a slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Side {
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    pub frames: u64,
    pub bytes: u64,
    pub cap_bytes: u64,
    pub payload: u64,
    /// OR of the TCP flags of its TCP segments.
    pub tcp_flags: Option<u16>,
    /// TCP segments with payload.
    pub data_segs: u64,
    /// Distinct sequence numbers among them (their ranges are the slice's).
    pub distinct_seqs: u64,
    /// First SYN alone, SYN+ACK, and ACK without SYN.
    pub syn_ns: Option<i64>,
    pub synack_ns: Option<i64>,
    pub ack_ns: Option<i64>,
    pub parse_errors: u64,
}

fn min_opt<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn max_opt<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Disjoint ranges of sequence numbers, ascending: where a direction's
/// data segments lie.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeqRanges(pub Vec<(u32, u32)>);

impl SeqRanges {
    /// Whether `r` overlaps one of the ranges.
    pub fn overlaps(&self, r: (u32, u32)) -> bool {
        let i = self.0.partition_point(|x| x.1 < r.0);
        self.0.get(i).is_some_and(|x| x.0 <= r.1)
    }

    /// Adds `r`, which must not overlap (see [`SeqRanges::overlaps`]).
    pub fn insert(&mut self, r: (u32, u32)) {
        let i = self.0.partition_point(|x| x.1 < r.0);
        self.0.insert(i, r);
    }

    /// Whether the ranges of all of `sets` are pairwise disjoint, so their
    /// distinct counts add up.
    pub fn disjoint<'a>(
        sets: impl IntoIterator<Item = &'a SeqRanges>,
        scratch: &mut Vec<(u32, u32)>,
    ) -> bool {
        scratch.clear();
        for s in sets {
            scratch.extend_from_slice(&s.0);
        }
        scratch.sort_unstable();
        scratch.windows(2).all(|w| w[0].1 < w[1].0)
    }
}

impl Side {
    /// Adds `o`'s counters and times (sequence ranges are kept beside, in
    /// [`FlowSlice`]).
    pub fn absorb(&mut self, o: &Side) {
        self.first_ns = min_opt(self.first_ns, o.first_ns);
        self.last_ns = max_opt(self.last_ns, o.last_ns);
        self.frames += o.frames;
        self.bytes += o.bytes;
        self.cap_bytes += o.cap_bytes;
        self.payload += o.payload;
        self.tcp_flags = match (self.tcp_flags, o.tcp_flags) {
            (Some(a), Some(b)) => Some(a | b),
            (a, None) => a,
            (None, b) => b,
        };
        self.data_segs += o.data_segs;
        self.distinct_seqs += o.distinct_seqs;
        self.syn_ns = min_opt(self.syn_ns, o.syn_ns);
        self.synack_ns = min_opt(self.synack_ns, o.synack_ns);
        self.ack_ns = min_opt(self.ack_ns, o.ack_ns);
        self.parse_errors += o.parse_errors;
    }

    /// Adds the counters of a stretch of frames (not their sequence
    /// numbers: see [`FlowSlicer`]) that share `head`'s [`Has`] bits and
    /// parse error, as the packet writer's stretches do: what those decide
    /// is decided once.
    #[inline]
    fn count_stretch<'a>(
        &mut self,
        head: &PacketFields,
        rows: impl Iterator<Item = &'a PacketFields> + Clone,
    ) {
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        let (mut frames, mut bytes, mut cap, mut payload) = (0u64, 0u64, 0u64, 0u64);
        for r in rows.clone() {
            lo = lo.min(r.ts_ns);
            hi = hi.max(r.ts_ns);
            frames += 1;
            bytes += r.wire_len as u64;
            cap += r.cap_len as u64;
            payload += r.payload_len as u64;
        }
        if frames == 0 {
            return;
        }
        self.first_ns = min_opt(self.first_ns, Some(lo));
        self.last_ns = max_opt(self.last_ns, Some(hi));
        self.frames += frames;
        self.bytes += bytes;
        self.cap_bytes += cap;
        if head.has(Has::PAYLOAD) {
            self.payload += payload;
        }
        if head.has(Has::TCP) {
            let mut flags = self.tcp_flags.unwrap_or(0);
            for r in rows {
                let (f, ts) = (r.tcp_flags, r.ts_ns);
                flags |= f;
                let first = |slot: &mut Option<i64>| {
                    if slot.is_none_or(|t| ts < t) {
                        *slot = Some(ts);
                    }
                };
                match f & 0x12 {
                    0x02 => first(&mut self.syn_ns),
                    0x12 => first(&mut self.synack_ns),
                    0x10 => first(&mut self.ack_ns),
                    _ => {}
                }
            }
            self.tcp_flags = Some(flags);
        }
        if head.parse_error != ParseError::None {
            self.parse_errors += frames;
        }
    }

    /// Retransmitted segments: data segments less distinct sequence
    /// numbers (exact when the pieces added had disjoint ranges).
    pub fn retrans(&self) -> u64 {
        self.data_segs - self.distinct_seqs
    }
}

/// One row of the flows table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSlice {
    pub key: FlowKey,
    pub a: Side,
    pub b: Side,
    pub a_seqs: SeqRanges,
    pub b_seqs: SeqRanges,
}

impl FlowSlice {
    pub fn first_ns(&self) -> Option<i64> {
        min_opt(self.a.first_ns, self.b.first_ns)
    }
    pub fn last_ns(&self) -> Option<i64> {
        max_opt(self.a.last_ns, self.b.last_ns)
    }
}

/// The key of a record's flow and whether it travels from `a` to `b`.
#[inline]
pub fn flow_of(r: &PacketFields) -> (FlowKey, bool) {
    if !r.has(Has::IP) {
        let key = FlowKey {
            ip_version: 0,
            ethertype: r.has(Has::ETHERTYPE).then_some(r.ethertype),
            a_ip: [0; 16],
            b_ip: [0; 16],
            a_port: 0,
            b_port: 0,
            proto: 0,
            has_ports: false,
        };
        return (key, true);
    }
    let has_ports = r.has(Has::PORTS);
    let (sp, dp) = if has_ports {
        (r.src_port, r.dst_port)
    } else {
        (0, 0)
    };
    let from_a = r.ip_src < r.ip_dst || (r.ip_src == r.ip_dst && sp <= dp);
    let (a_ip, a_port, b_ip, b_port) = if from_a {
        (r.ip_src, sp, r.ip_dst, dp)
    } else {
        (r.ip_dst, dp, r.ip_src, sp)
    };
    let key = FlowKey {
        ip_version: r.ip_version,
        ethertype: None,
        a_ip,
        b_ip,
        a_port,
        b_port,
        proto: r.ip_proto,
        has_ports,
    };
    (key, from_a)
}

/// A run of consecutive records of one flow direction, as the packet
/// writer visits them (grouped by flow).
#[derive(Default)]
struct Run {
    key: Option<(FlowKey, bool)>,
    side: Side,
    /// Sequence numbers and lengths of its data segments, in arrival
    /// order.
    seqs: Vec<(u32, u32)>,
    /// The byte ranges they cover.
    ranges: Vec<(u32, u32)>,
}

/// Builds the slices of one packet file from its records.
#[derive(Default)]
pub struct FlowSlicer {
    run: Run,
    open: FastMap<FlowKey, FlowSlice>,
    done: Vec<FlowSlice>,
}

impl FlowSlicer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one record. Consecutive records of the same flow direction are
    /// cheap: the map is visited once per run.
    pub fn push(&mut self, r: &PacketFields) {
        self.push_stretch(&[r]);
    }

    /// Adds a stretch of consecutive records that agree with the first in
    /// every column constant within a flow (its addresses, ports,
    /// protocols, [`Has`] bits and parse error), as the packet writer
    /// visits them: their flow is found once.
    #[inline]
    pub fn push_stretch(&mut self, stretch: &[&PacketFields]) {
        let Some(&head) = stretch.first() else {
            return;
        };
        let (key, from_a) = flow_of(head);
        if self.run.key != Some((key, from_a)) {
            self.end_run();
            self.run.key = Some((key, from_a));
        }
        self.run.side.count_stretch(head, stretch.iter().copied());
        if head.ip_proto == 6 && head.has(Has::PAYLOAD | Has::IP) {
            let tcp = head.has(Has::TCP);
            for r in stretch.iter().filter(|r| r.payload_len > 0) {
                self.run.side.data_segs += 1;
                if tcp {
                    self.run.seqs.push((r.tcp_seq, r.payload_len));
                }
            }
        }
    }

    /// Closes the current run: its distinct sequence numbers are counted
    /// and it joins its flow's open slice, or starts a new slice when its
    /// sequence range overlaps the open one's.
    pub fn end_run(&mut self) {
        let Some((key, from_a)) = self.run.key.take() else {
            return;
        };
        let mut side = std::mem::take(&mut self.run.side);
        let (seqs, ranges) = (&mut self.run.seqs, &mut self.run.ranges);
        ranges.clear();
        if !seqs.is_empty() {
            // Sorted (usually already: a run rises), then distinct values,
            // and the stretches of contiguous bytes: a stretch ends where
            // the next segment starts past its end (data this run did not
            // see, such as a chunk a conversion gave another worker).
            if !seqs.windows(2).all(|w| w[0].0 < w[1].0) {
                seqs.sort_unstable();
            }
            let mut distinct = 0u64;
            let mut prev = None;
            let mut cur: Option<(u64, u64)> = None;
            let close = |(lo, end): (u64, u64)| (lo as u32, (end - 1).min(u32::MAX as u64) as u32);
            for &(seq, len) in seqs.iter() {
                if prev != Some(seq) {
                    distinct += 1;
                    prev = Some(seq);
                }
                let (lo, end) = (seq as u64, seq as u64 + len.max(1) as u64);
                cur = match cur {
                    Some((a, e)) if lo <= e => Some((a, e.max(end))),
                    Some(done) => {
                        ranges.push(close(done));
                        Some((lo, end))
                    }
                    None => Some((lo, end)),
                };
            }
            if let Some(done) = cur {
                ranges.push(close(done));
            }
            side.distinct_seqs = distinct;
            seqs.clear();
        }
        let slice = self.open.entry(key).or_insert_with(|| FlowSlice {
            key,
            a: Side::default(),
            b: Side::default(),
            a_seqs: SeqRanges::default(),
            b_seqs: SeqRanges::default(),
        });
        let held = if from_a { &slice.a_seqs } else { &slice.b_seqs };
        if ranges.iter().any(|r| held.overlaps(*r)) {
            // Exact slices only: what is held so far becomes a row.
            let fresh = FlowSlice {
                key,
                a: Side::default(),
                b: Side::default(),
                a_seqs: SeqRanges::default(),
                b_seqs: SeqRanges::default(),
            };
            self.done.push(std::mem::replace(slice, fresh));
        }
        let (held, seqs) = if from_a {
            (&mut slice.a, &mut slice.a_seqs)
        } else {
            (&mut slice.b, &mut slice.b_seqs)
        };
        held.absorb(&side);
        for r in ranges.iter() {
            seqs.insert(*r);
        }
    }

    /// Every slice, for the end of the file; the slicer is then empty.
    pub fn finish(&mut self) -> Vec<FlowSlice> {
        self.end_run();
        let mut out = std::mem::take(&mut self.done);
        out.extend(self.open.drain().map(|(_, s)| s));
        out.sort_by(|x, y| x.key.cmp(&y.key).then(x.first_ns().cmp(&y.first_ns())));
        out
    }
}

/// The packet columns [`FlowSlicer`] reads: its flow key ([`flow_of`]),
/// the sides' counts, TCP's sequence numbers and the parse errors.
const SLICER_COLUMNS: &[&str] = &[
    "ts",
    "wire_len",
    "cap_len",
    "ethertype",
    "ip_version",
    "ip_src",
    "ip_dst",
    "ip_proto",
    "src_port",
    "dst_port",
    "tcp_flags",
    "tcp_seq",
    "payload_len",
    "parse_error",
];

/// The slices of one packet file built again from its records: of those
/// whose `ts` lies in `[from_ns, to_ns)` (bounds `None`: open), row group
/// by row group in file order, the order the packet writer gave its
/// slicer the rows in, so that over a whole file they are the slices it
/// wrote. `weir recover` rebuilds a flows file a crash cut off with it, and
/// a reader whose time window cuts through a file's slices reads the
/// file's edge this way. Also says how many records it read.
pub fn slices_from_packets(
    root: &dyn util::storage::Storage,
    packets_rel: &str,
    from_ns: Option<i64>,
    to_ns: Option<i64>,
) -> Result<(Vec<FlowSlice>, u64), StoreError> {
    let name = std::path::PathBuf::from(root.name_of(packets_rel));
    // A local file is mapped, not read.
    let data = root
        .read(packets_rel)
        .map_err(|e| StoreError::io(&name, e))?;
    let inside = |t: i64| from_ns.is_none_or(|f| t >= f) && to_ns.is_none_or(|e| t < e);
    let groups: Vec<usize> = crate::read::row_group_spans_of(&name, data.clone())?
        .into_iter()
        .filter(|g| {
            !(from_ns.is_some_and(|f| g.ts_max < f) || to_ns.is_some_and(|e| g.ts_min >= e))
        })
        .map(|g| g.index)
        .collect();
    let mut slicer = FlowSlicer::new();
    let mut read = 0u64;
    if groups.is_empty() {
        return Ok((slicer.finish(), read));
    }
    // Only the columns the slicer reads, a batch at a time.
    let (batches, _) = crate::read::read_batches(&name, data, SLICER_COLUMNS, Some(groups))?;
    let invalid = |message: String| StoreError::Invalid {
        path: name.clone(),
        message,
    };
    let mut rows = Vec::new();
    for batch in batches {
        let batch = batch.map_err(|e| invalid(e.to_string()))?;
        rows.clear();
        crate::read::append_partial_records(&batch, &mut rows).map_err(invalid)?;
        read += rows.len() as u64;
        for r in rows.iter().filter(|r| inside(r.fields.ts_ns)) {
            slicer.push(&r.fields);
        }
    }
    Ok((slicer.finish(), read))
}

/// The flows table's Arrow schema.
pub fn flows_schema() -> SchemaRef {
    let mut f = vec![
        Field::new("ip_version", DataType::UInt8, true),
        Field::new("ethertype", DataType::UInt16, true),
        Field::new("a_ip", DataType::FixedSizeBinary(16), true),
        Field::new("a_port", DataType::UInt16, true),
        Field::new("b_ip", DataType::FixedSizeBinary(16), true),
        Field::new("b_port", DataType::UInt16, true),
        Field::new("proto", DataType::UInt8, true),
        Field::new("has_ports", DataType::Boolean, false),
        Field::new("first_ns", DataType::Int64, false),
        Field::new("span_ns", DataType::Int64, false),
    ];
    for s in ["a", "b"] {
        f.extend([
            Field::new(format!("{s}_first_after_ns"), DataType::Int64, true),
            Field::new(format!("{s}_last_after_ns"), DataType::Int64, true),
            Field::new(format!("{s}_frames"), DataType::UInt64, false),
            Field::new(format!("{s}_bytes"), DataType::UInt64, false),
            Field::new(format!("{s}_cap_bytes"), DataType::UInt64, false),
            Field::new(format!("{s}_payload"), DataType::UInt64, false),
            Field::new(format!("{s}_tcp_flags"), DataType::UInt16, true),
            Field::new(format!("{s}_data_segs"), DataType::UInt64, false),
            Field::new(format!("{s}_distinct_seqs"), DataType::UInt64, false),
            Field::new(
                format!("{s}_seq_spans"),
                DataType::List(Arc::new(Field::new("item", DataType::UInt32, false))),
                false,
            ),
            Field::new(format!("{s}_syn_after_ns"), DataType::Int64, true),
            Field::new(format!("{s}_synack_after_ns"), DataType::Int64, true),
            Field::new(format!("{s}_ack_after_ns"), DataType::Int64, true),
            Field::new(format!("{s}_parse_errors"), DataType::UInt64, false),
        ]);
    }
    Arc::new(Schema::new(f))
}

/// The slices as one Arrow batch of [`flows_schema`].
pub fn slices_to_batch(slices: &[FlowSlice]) -> RecordBatch {
    let n = slices.len();
    let mut ipv = UInt8Builder::with_capacity(n);
    let mut eth = UInt16Builder::with_capacity(n);
    let mut a_ip = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut a_port = UInt16Builder::with_capacity(n);
    let mut b_ip = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut b_port = UInt16Builder::with_capacity(n);
    let mut proto = UInt8Builder::with_capacity(n);
    let mut ports = BooleanBuilder::with_capacity(n);
    let mut first = Int64Builder::with_capacity(n);
    let mut span = Int64Builder::with_capacity(n);
    for s in slices {
        let k = &s.key;
        if k.is_ip() {
            ipv.append_value(k.ip_version);
            eth.append_null();
            a_ip.append_value(k.a_ip).expect("16 bytes");
            a_port.append_value(k.a_port);
            b_ip.append_value(k.b_ip).expect("16 bytes");
            b_port.append_value(k.b_port);
            proto.append_value(k.proto);
        } else {
            ipv.append_null();
            eth.append_option(k.ethertype);
            a_ip.append_null();
            a_port.append_null();
            b_ip.append_null();
            b_port.append_null();
            proto.append_null();
        }
        ports.append_value(k.has_ports);
        let t0 = s.first_ns().unwrap_or(0);
        first.append_value(t0);
        span.append_value(s.last_ns().unwrap_or(t0) - t0);
    }
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(ipv.finish()),
        Arc::new(eth.finish()),
        Arc::new(a_ip.finish()),
        Arc::new(a_port.finish()),
        Arc::new(b_ip.finish()),
        Arc::new(b_port.finish()),
        Arc::new(proto.finish()),
        Arc::new(ports.finish()),
        Arc::new(first.finish()),
        Arc::new(span.finish()),
    ];
    type Pick = fn(&FlowSlice) -> (&Side, &SeqRanges);
    let picks: [Pick; 2] = [|s| (&s.a, &s.a_seqs), |s| (&s.b, &s.b_seqs)];
    for pick in picks {
        let sides: Vec<Side> = slices.iter().map(|s| *pick(s).0).collect();
        let mut ranges = ListBuilder::new(UInt32Builder::new()).with_field(Arc::new(Field::new(
            "item",
            DataType::UInt32,
            false,
        )));
        for s in slices {
            for &(lo, hi) in &pick(s).1.0 {
                ranges.values().append_value(lo);
                ranges.values().append_value(hi.wrapping_sub(lo));
            }
            ranges.append(true);
        }
        let i64s = |f: fn(&Side) -> Option<i64>| -> ArrayRef {
            Arc::new(
                sides
                    .iter()
                    .zip(slices)
                    .map(|(side, s)| Some(f(side)? - s.first_ns().unwrap_or(0)))
                    .collect::<Int64Array>(),
            )
        };
        let u64s = |f: fn(&Side) -> u64| -> ArrayRef {
            Arc::new(sides.iter().map(|s| Some(f(s))).collect::<UInt64Array>())
        };
        cols.extend([
            i64s(|s| s.first_ns),
            i64s(|s| s.last_ns),
            u64s(|s| s.frames),
            u64s(|s| s.bytes),
            u64s(|s| s.cap_bytes),
            u64s(|s| s.payload),
            Arc::new(sides.iter().map(|s| s.tcp_flags).collect::<UInt16Array>()) as ArrayRef,
            u64s(|s| s.data_segs),
            u64s(|s| s.distinct_seqs),
            Arc::new(ranges.finish()) as ArrayRef,
            i64s(|s| s.syn_ns),
            i64s(|s| s.synack_ns),
            i64s(|s| s.ack_ns),
            u64s(|s| s.parse_errors),
        ]);
    }
    RecordBatch::try_new(flows_schema(), cols).expect("columns match the flows schema")
}

/// The slices of a batch of [`flows_schema`] (as read back).
pub fn batch_to_slices(b: &RecordBatch, out: &mut Vec<FlowSlice>) -> Result<(), String> {
    let col = |name: &str| {
        b.column_by_name(name)
            .ok_or_else(|| format!("no column {name} (not a weir flows table?)"))
    };
    fn typed<'a, T: 'static>(a: &'a ArrayRef, name: &str) -> Result<&'a T, String> {
        a.as_any()
            .downcast_ref::<T>()
            .ok_or_else(|| format!("column {name} has type {}", a.data_type()))
    }
    let ipv = col("ip_version")?;
    let ipv: &UInt8Array = typed(ipv, "ip_version")?;
    let eth = col("ethertype")?;
    let eth: &UInt16Array = typed(eth, "ethertype")?;
    let a_ip = col("a_ip")?;
    let a_ip: &FixedSizeBinaryArray = typed(a_ip, "a_ip")?;
    let b_ip = col("b_ip")?;
    let b_ip: &FixedSizeBinaryArray = typed(b_ip, "b_ip")?;
    let a_port = col("a_port")?;
    let a_port: &UInt16Array = typed(a_port, "a_port")?;
    let b_port = col("b_port")?;
    let b_port: &UInt16Array = typed(b_port, "b_port")?;
    let proto = col("proto")?;
    let proto: &UInt8Array = typed(proto, "proto")?;
    let ports = col("has_ports")?;
    let ports: &BooleanArray = typed(ports, "has_ports")?;
    let first = col("first_ns")?;
    let first: &Int64Array = typed(first, "first_ns")?;
    struct SideCols<'a> {
        i64s: [&'a Int64Array; 5],
        u64s: [&'a UInt64Array; 7],
        flags: &'a UInt16Array,
        seqs: &'a ListArray,
    }
    let side_cols = |s: &str| -> Result<SideCols<'_>, String> {
        let i = |n: &str| -> Result<&Int64Array, String> {
            let name = format!("{s}_{n}");
            typed(col(&name)?, &name)
        };
        let u = |n: &str| -> Result<&UInt64Array, String> {
            let name = format!("{s}_{n}");
            typed(col(&name)?, &name)
        };
        let name = format!("{s}_tcp_flags");
        Ok(SideCols {
            i64s: [
                i("first_after_ns")?,
                i("last_after_ns")?,
                i("syn_after_ns")?,
                i("synack_after_ns")?,
                i("ack_after_ns")?,
            ],
            u64s: [
                u("frames")?,
                u("bytes")?,
                u("cap_bytes")?,
                u("payload")?,
                u("data_segs")?,
                u("distinct_seqs")?,
                u("parse_errors")?,
            ],
            flags: typed(col(&name)?, &name)?,
            seqs: {
                let name = format!("{s}_seq_spans");
                typed(col(&name)?, &name)?
            },
        })
    };
    let sa = side_cols("a")?;
    let sb = side_cols("b")?;
    let opt_i = |a: &Int64Array, i: usize| (!a.is_null(i)).then(|| first.value(i) + a.value(i));
    let side = |c: &SideCols, i: usize| Side {
        first_ns: opt_i(c.i64s[0], i),
        last_ns: opt_i(c.i64s[1], i),
        syn_ns: opt_i(c.i64s[2], i),
        synack_ns: opt_i(c.i64s[3], i),
        ack_ns: opt_i(c.i64s[4], i),
        frames: c.u64s[0].value(i),
        bytes: c.u64s[1].value(i),
        cap_bytes: c.u64s[2].value(i),
        payload: c.u64s[3].value(i),
        data_segs: c.u64s[4].value(i),
        distinct_seqs: c.u64s[5].value(i),
        parse_errors: c.u64s[6].value(i),
        tcp_flags: (!c.flags.is_null(i)).then(|| c.flags.value(i)),
    };
    let ranges = |c: &SideCols, i: usize| -> Result<SeqRanges, String> {
        let v = c.seqs.value(i);
        let v = v
            .as_any()
            .downcast_ref::<UInt32Array>()
            .ok_or("seq_spans holds no u32 values")?;
        if v.len() % 2 != 0 {
            return Err("seq_spans holds an odd number of values".into());
        }
        Ok(SeqRanges(
            v.values()
                .chunks(2)
                .map(|p| (p[0], p[0].wrapping_add(p[1])))
                .collect(),
        ))
    };
    let ip16 = |a: &FixedSizeBinaryArray, i: usize| -> [u8; 16] {
        a.value(i).try_into().unwrap_or([0; 16])
    };
    out.reserve(b.num_rows());
    for i in 0..b.num_rows() {
        let key = if ipv.is_null(i) {
            FlowKey {
                ip_version: 0,
                ethertype: (!eth.is_null(i)).then(|| eth.value(i)),
                a_ip: [0; 16],
                b_ip: [0; 16],
                a_port: 0,
                b_port: 0,
                proto: 0,
                has_ports: false,
            }
        } else {
            FlowKey {
                ip_version: ipv.value(i),
                ethertype: None,
                a_ip: ip16(a_ip, i),
                b_ip: ip16(b_ip, i),
                a_port: a_port.value(i),
                b_port: b_port.value(i),
                proto: proto.value(i),
                has_ports: ports.value(i),
            }
        };
        out.push(FlowSlice {
            key,
            a: side(&sa, i),
            b: side(&sb, i),
            a_seqs: ranges(&sa, i)?,
            b_seqs: ranges(&sb, i)?,
        });
    }
    Ok(())
}

/// What a finished flows file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowFileSummary {
    /// Path relative to the dataset root.
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
}

/// Writes `slices` to `path` (a hidden `.NAME.part` first, renamed when
/// complete); `relative` is the path the summary records.
pub fn write_flow_file(
    path: &Path,
    relative: &str,
    slices: &[FlowSlice],
) -> Result<FlowFileSummary, StoreError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let part = path.with_file_name(format!(".{name}.part"));
    if let Some(dir) = path.parent() {
        crate::files::create_dirs(dir)?;
    }
    let written = create_file(&part).and_then(|file| {
        // Dictionaries do not pay here: times are offsets from the slice's
        // first frame, counts are spread wide, and keys are few per file.
        let props = crate::table::writer_properties("flows", FLOWS_SCHEMA_VERSION, &[])
            .into_builder()
            .set_dictionary_enabled(false)
            .build();
        let mut w = ArrowWriter::try_new(file, flows_schema(), Some(props))
            .map_err(|e| StoreError::parquet(&part, e))?;
        w.write(&slices_to_batch(slices))
            .map_err(|e| StoreError::parquet(&part, e))?;
        let file = w.into_inner().map_err(|e| StoreError::parquet(&part, e))?;
        file.sync_data().map_err(|e| StoreError::io(&part, e))?;
        let bytes = file.metadata().map_err(|e| StoreError::io(&part, e))?.len();
        std::fs::rename(&part, path).map_err(|e| StoreError::io(&part, e))?;
        Ok(bytes)
    });
    let bytes = match written {
        Ok(b) => b,
        Err(e) => {
            // A full disk: no half-written flows file is left behind.
            let _ = std::fs::remove_file(&part);
            return Err(e);
        }
    };
    Ok(FlowFileSummary {
        path: relative.to_string(),
        rows: slices.len() as u64,
        bytes,
    })
}

/// Reads every slice of a flows file.
pub fn read_flow_file(path: &Path, out: &mut Vec<FlowSlice>) -> Result<(), StoreError> {
    let f = std::fs::File::open(path).map_err(|e| StoreError::io(path, e))?;
    read_flows_from(path, f, out)
}

/// Reads every slice of the flows file `rel` of the dataset at `root` (one
/// request for a file in an object store: flows files are small).
pub fn read_flow_file_in(
    root: &dyn util::storage::Storage,
    rel: &str,
    out: &mut Vec<FlowSlice>,
) -> Result<(), StoreError> {
    if let Some(dir) = root.local_dir() {
        return read_flow_file(&dir.join(rel), out);
    }
    let name = std::path::PathBuf::from(root.name_of(rel));
    let data = root.read(rel).map_err(|e| StoreError::io(&name, e))?;
    read_flows_from(&name, data, out)
}

fn read_flows_from<R: parquet::file::reader::ChunkReader + 'static>(
    path: &Path,
    f: R,
    out: &mut Vec<FlowSlice>,
) -> Result<(), StoreError> {
    let (reader, rows) = read_batches(path, f, &[], None)?;
    out.reserve(rows as usize);
    for batch in reader {
        let batch = batch.map_err(|e| StoreError::io(path, std::io::Error::other(e)))?;
        batch_to_slices(&batch, out).map_err(|e| StoreError::io(path, std::io::Error::other(e)))?;
    }
    Ok(())
}

/// A row of the flows table as an index reads it: which flow, its first
/// and last frame, its frames each way and its frames weir could not parse
/// whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRow {
    pub key: FlowKey,
    pub first_ns: i64,
    pub last_ns: i64,
    pub a_frames: u64,
    pub b_frames: u64,
    pub parse_errors: u64,
}

impl FlowRow {
    pub fn of_slice(s: &FlowSlice) -> FlowRow {
        let first = s.first_ns().unwrap_or(0);
        FlowRow {
            key: s.key,
            first_ns: first,
            last_ns: s.last_ns().unwrap_or(first),
            a_frames: s.a.frames,
            b_frames: s.b.frames,
            parse_errors: s.a.parse_errors + s.b.parse_errors,
        }
    }
}

/// Hands `each` the [`FlowRow`] of every row of a flows file, reading only
/// the columns it needs (a third of the file), from memory.
pub fn read_flow_rows(path: &Path, mut each: impl FnMut(&FlowRow)) -> Result<(), StoreError> {
    const COLUMNS: [&str; 14] = [
        "ip_version",
        "ethertype",
        "a_ip",
        "a_port",
        "b_ip",
        "b_port",
        "proto",
        "has_ports",
        "first_ns",
        "span_ns",
        "a_frames",
        "b_frames",
        "a_parse_errors",
        "b_parse_errors",
    ];
    let bytes = bytes::Bytes::from(std::fs::read(path).map_err(|e| StoreError::io(path, e))?);
    let (reader, _) = read_batches(path, bytes, &COLUMNS, None)?;
    let invalid = |message: String| StoreError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    for batch in reader {
        let b = batch.map_err(|e| invalid(e.to_string()))?;
        let col = |name: &str| {
            b.column_by_name(name)
                .ok_or_else(|| invalid(format!("no column {name} (not a weir flows table?)")))
        };
        fn typed<'a, T: 'static>(a: &'a ArrayRef, name: &str) -> Result<&'a T, String> {
            a.as_any()
                .downcast_ref::<T>()
                .ok_or_else(|| format!("column {name} has type {}", a.data_type()))
        }
        let (ipv, eth) = (col("ip_version")?, col("ethertype")?);
        let ipv: &UInt8Array = typed(ipv, "ip_version").map_err(invalid)?;
        let eth: &UInt16Array = typed(eth, "ethertype").map_err(invalid)?;
        let (a_ip, b_ip) = (col("a_ip")?, col("b_ip")?);
        let a_ip: &FixedSizeBinaryArray = typed(a_ip, "a_ip").map_err(invalid)?;
        let b_ip: &FixedSizeBinaryArray = typed(b_ip, "b_ip").map_err(invalid)?;
        let (a_port, b_port) = (col("a_port")?, col("b_port")?);
        let a_port: &UInt16Array = typed(a_port, "a_port").map_err(invalid)?;
        let b_port: &UInt16Array = typed(b_port, "b_port").map_err(invalid)?;
        let proto = col("proto")?;
        let proto: &UInt8Array = typed(proto, "proto").map_err(invalid)?;
        let ports = col("has_ports")?;
        let ports: &BooleanArray = typed(ports, "has_ports").map_err(invalid)?;
        let (first, span) = (col("first_ns")?, col("span_ns")?);
        let first: &Int64Array = typed(first, "first_ns").map_err(invalid)?;
        let span: &Int64Array = typed(span, "span_ns").map_err(invalid)?;
        let u64s = |name: &str| -> Result<&UInt64Array, StoreError> {
            typed(col(name)?, name).map_err(invalid)
        };
        let (af, bf) = (u64s("a_frames")?, u64s("b_frames")?);
        let (ae, be) = (u64s("a_parse_errors")?, u64s("b_parse_errors")?);
        let ip16 = |a: &FixedSizeBinaryArray, i: usize| -> [u8; 16] {
            a.value(i).try_into().unwrap_or([0; 16])
        };
        for i in 0..b.num_rows() {
            let ip = !ipv.is_null(i);
            let key = FlowKey {
                ip_version: if ip { ipv.value(i) } else { 0 },
                ethertype: (!ip && !eth.is_null(i)).then(|| eth.value(i)),
                a_ip: if ip { ip16(a_ip, i) } else { [0; 16] },
                b_ip: if ip { ip16(b_ip, i) } else { [0; 16] },
                a_port: if ip { a_port.value(i) } else { 0 },
                b_port: if ip { b_port.value(i) } else { 0 },
                proto: if ip { proto.value(i) } else { 0 },
                has_ports: ip && ports.value(i),
            };
            each(&FlowRow {
                key,
                first_ns: first.value(i),
                last_ns: first.value(i) + span.value(i),
                a_frames: af.value(i),
                b_frames: bf.value(i),
                parse_errors: ae.value(i) + be.value(i),
            });
        }
    }
    Ok(())
}

/// The flows file that goes with the packet file `packets/NAME.parquet`
/// (relative to the dataset root): `flows/NAME.parquet`.
pub fn flows_path_for(packets_rel: &str) -> String {
    let name = packets_rel.rsplit('/').next().unwrap_or(packets_rel);
    format!("{FLOWS_DIR}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::PacketRecord;

    /// A TCP record from 10.0.0.`src` to 10.0.0.`dst` (ports 5000/80).
    fn rec(ts: i64, src: u8, dst: u8, flags: u16, seq: u32, payload: u32) -> PacketRecord {
        let mut r = PacketRecord::new(ts, 100, 100);
        r.has = Has::IP | Has::PORTS | Has::TCP | Has::PAYLOAD;
        r.ip_version = 4;
        r.ip_proto = 6;
        r.ip_src[15] = src;
        r.ip_dst[15] = dst;
        (r.src_port, r.dst_port) = if src < dst { (5000, 80) } else { (80, 5000) };
        r.tcp_flags = flags;
        r.tcp_seq = seq;
        r.payload_len = payload;
        r
    }

    /// A retransmission that comes back after other data starts a new
    /// slice; slices whose ranges do not overlap add up exactly.
    #[test]
    fn slices_are_exact_and_split_where_sequence_ranges_overlap() {
        let mut s = FlowSlicer::new();
        // Handshake, then data 1000..5000 from the client (1 -> 2).
        s.push(&rec(1, 1, 2, 0x02, 999, 0));
        s.push(&rec(2, 2, 1, 0x12, 7, 0));
        s.push(&rec(3, 1, 2, 0x10, 1000, 0));
        for (i, seq) in [1000u32, 2000, 3000, 4000].iter().enumerate() {
            s.push(&rec(10 + i as i64, 1, 2, 0x18, *seq, 1000));
        }
        // Another flow in between, then 2000 again: a retransmission.
        s.push(&rec(20, 3, 4, 0x10, 0, 0));
        s.push(&rec(21, 1, 2, 0x18, 2000, 1000));
        let slices = s.finish();
        let ours: Vec<_> = slices.iter().filter(|x| x.key.a_ip[15] == 1).collect();
        assert_eq!(ours.len(), 2, "{ours:?}");
        let mut total = Side::default();
        for x in &ours {
            total.absorb(&x.a);
        }
        let mut scratch = Vec::new();
        assert_eq!(total.frames, 7);
        assert_eq!(total.data_segs, 5);
        // Within each slice the count is exact; across them, the overlap
        // is what tells a reader it cannot add them.
        assert!(!SeqRanges::disjoint(
            [&ours[0].a_seqs, &ours[1].a_seqs],
            &mut scratch
        ));
        assert_eq!(ours[0].a.retrans() + ours[1].a.retrans(), 0);
        let b: u64 = ours.iter().map(|x| x.b.frames).sum();
        assert_eq!(b, 1);
        assert_eq!(ours[0].a.syn_ns, Some(1));
        assert_eq!(ours[0].b.synack_ns, Some(2));
        assert_eq!(ours[0].a.ack_ns, Some(3));
        // Round trip through Arrow.
        let mut back = Vec::new();
        batch_to_slices(&slices_to_batch(&slices), &mut back).unwrap();
        assert_eq!(back, slices);
    }

    /// A flow whose frames went to two writers in turns (two sources of
    /// one conversion, or a flow a conversion forgot and dealt again):
    /// each writer's slice has one range per turn, and the two slices'
    /// ranges interleave without overlapping, so a reader adds them exactly.
    #[test]
    fn chunks_dealt_to_two_workers_merge_exactly() {
        let (mut w0, mut w1) = (FlowSlicer::new(), FlowSlicer::new());
        let mut seq = 1000u32;
        // Each worker sees its chunks of the flow as one run (its row
        // group groups them).
        for chunk in 0..6 {
            let w = if chunk % 2 == 0 { &mut w0 } else { &mut w1 };
            for _ in 0..5 {
                w.push(&rec(seq as i64, 1, 2, 0x18, seq, 100));
                seq += 100;
            }
        }
        let (a, b) = (w0.finish(), w1.finish());
        assert_eq!((a.len(), b.len()), (1, 1));
        assert_eq!(a[0].a_seqs.0.len(), 3);
        let mut scratch = Vec::new();
        assert!(SeqRanges::disjoint(
            [&a[0].a_seqs, &b[0].a_seqs],
            &mut scratch
        ));
        assert_eq!(a[0].a.distinct_seqs + b[0].a.distinct_seqs, 30);
        // A segment of chunk 0 sent again in chunk 5's worker: not disjoint.
        w1.push(&rec(9_999, 1, 2, 0x18, 1200, 100));
        let again = w1.finish();
        assert!(!SeqRanges::disjoint(
            [&a[0].a_seqs, &again[0].a_seqs],
            &mut scratch
        ));
    }
}
