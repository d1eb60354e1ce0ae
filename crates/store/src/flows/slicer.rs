//! The slicer: the slices of one packet file from its records as the
//! packet writer visits them, and the same built again from a packet file.

use util::fasthash::FastMap;
use wire::{Has, PacketFields};

use super::slice::{FlowKey, FlowSlice, SeqRanges, Side, flow_of};
use crate::error::StoreError;

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
