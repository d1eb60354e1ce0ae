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

mod file;
mod read;
mod slice;
mod slicer;

pub use file::{
    FLOW_PAGE_ROWS, FlowFileSummary, batch_to_slices, flows_schema, slices_to_batch,
    write_flow_file,
};
pub use read::{FlowLookup, FlowRow, RowsRead, read_flow_file, read_flow_file_in, read_flow_rows};
pub use slice::{FlowKey, FlowSlice, SeqRanges, Side, flow_of};
pub use slicer::{FlowSlicer, slices_from_packets};

/// The flows table's directory in a dataset.
pub const FLOWS_DIR: &str = "flows";

/// Version of the flows table's columns.
pub const FLOWS_SCHEMA_VERSION: u32 = 2;

/// The flows file that goes with the packet file `packets/NAME.parquet`
/// (relative to the dataset root): `flows/NAME.parquet`.
pub fn flows_path_for(packets_rel: &str) -> String {
    let name = packets_rel.rsplit('/').next().unwrap_or(packets_rel);
    format!("{FLOWS_DIR}/{name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::Has;
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
        batch_to_slices(
            &slices_to_batch(&slices.iter().collect::<Vec<_>>()),
            &mut back,
        )
        .unwrap();
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
