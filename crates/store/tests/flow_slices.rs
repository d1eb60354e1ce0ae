//! The flows table built again from a packet file's records
//! (`flows::slices_from_packets`): over the whole file the slices its
//! writer wrote beside it (what `weir recover` rebuilds a lost flows file
//! with), and over a time window the slices of the records in it (what a
//! reader whose window cuts through a file's slices takes instead).

use std::path::PathBuf;

use store::flows::{FlowSlicer, read_flow_file, slices_from_packets};
use store::{PacketWriter, PacketWriterOptions};
use util::storage::Directory;
use wire::{Has, PacketRecord, ParseError};

use testdata::Rng;

/// TCP records of `flows` flows in random turns, with data, handshakes
/// and a few retransmissions, frames without an IP layer among them, and
/// a few cut short inside TCP's header (a parse error the slices count).
fn records(n: usize, flows: u64, seed: u64) -> Vec<PacketRecord> {
    let mut rng = Rng(seed);
    let mut seq = vec![1000u32; flows as usize];
    (0..n)
        .map(|i| {
            let mut r = PacketRecord::new(1_700_000_000_000_000_000 + i as i64 * 1000, 120, 120);
            r.has = Has::ETHERTYPE;
            if rng.next() % 89 == 0 {
                r.ethertype = 0x0806;
                return r;
            }
            let f = (rng.next() % flows) as usize;
            let back = rng.next() % 3 == 0;
            let (client, server) = (
                wire::ip::v4_mapped([10, 0, (f >> 8) as u8, f as u8]),
                wire::ip::v4_mapped([10, 200, 0, 1]),
            );
            r.has |= Has::IP | Has::PORTS | Has::TCP | Has::PAYLOAD | Has::FLOW;
            r.ethertype = 0x0800;
            r.ip_version = 4;
            r.ip_proto = 6;
            let cport = 1024 + f as u16;
            (r.ip_src, r.ip_dst, r.src_port, r.dst_port) = if back {
                (server, client, 80, cport)
            } else {
                (client, server, cport, 80)
            };
            r.tcp_flags = if seq[f] == 1000 { 0x02 } else { 0x18 };
            r.payload_len = if r.tcp_flags == 0x02 { 0 } else { 50 };
            // One segment in 40 is sent again.
            if !back && rng.next() % 40 == 0 && seq[f] > 1100 {
                r.tcp_seq = seq[f] - 50;
            } else {
                r.tcp_seq = seq[f];
                if !back {
                    seq[f] += r.payload_len.max(1);
                }
            }
            if rng.next() % 61 == 0 {
                r.parse_error = ParseError::TruncatedTcp;
            }
            r.flow_hash = wire::flow::flow_hash(&r.ip_src, &r.ip_dst, r.src_port, r.dst_port, 6);
            r
        })
        .collect()
}

/// A dataset directory with one packet file (row groups of 4 Ki rows) and
/// its flows file.
fn write(recs: &[PacketRecord], name: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("store-flow-slices")
        .join(name);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("packets")).unwrap();
    std::fs::create_dir_all(root.join("flows")).unwrap();
    let path = root.join("packets/w000-00000.parquet");
    let opts = PacketWriterOptions {
        row_group_rows: 4096,
        ..Default::default()
    };
    let mut w = PacketWriter::create(&path, "packets/w000-00000.parquet", opts).unwrap();
    for r in recs {
        w.push(r).unwrap();
    }
    w.finish().unwrap();
    root
}

#[test]
fn slices_built_again_from_the_records_are_the_written_ones() {
    let recs = records(30_000, 300, 7);
    let root = write(&recs, "whole");
    let mut written = Vec::new();
    read_flow_file(&root.join("flows/w000-00000.parquet"), &mut written).unwrap();
    assert!(written.len() >= 300, "{} slices", written.len());
    assert!(
        written
            .iter()
            .any(|s| s.a.parse_errors + s.b.parse_errors > 0)
    );
    let dir = Directory::new(&root);
    let (again, read) =
        slices_from_packets(&dir, "packets/w000-00000.parquet", None, None).unwrap();
    assert_eq!(read, recs.len() as u64);
    assert_eq!(again, written);
}

#[test]
fn a_window_gives_the_slices_of_the_records_inside_it() {
    let recs = records(30_000, 300, 11);
    let root = write(&recs, "window");
    let dir = Directory::new(&root);
    let t0 = recs[0].ts_ns;
    let (from, to) = (t0 + 9_000_000 + 500, t0 + 21_000_000 + 500);
    let (got, read) =
        slices_from_packets(&dir, "packets/w000-00000.parquet", Some(from), Some(to)).unwrap();
    // Only the row groups the window meets are read: 4 Ki-row groups of
    // 1 µs apart records, a window of 12,000 records.
    assert!(read < 20_000, "{read} records read");
    assert!(read >= 12_000, "{read} records read");
    // The same as a slicer given the records in the window in the order
    // the file holds them (the writer groups each row group by flow).
    let mut in_file = Vec::new();
    store::read::append_records_of(
        std::path::Path::new("w"),
        std::fs::File::open(root.join("packets/w000-00000.parquet")).unwrap(),
        None,
        &mut in_file,
    )
    .unwrap();
    let mut slicer = FlowSlicer::new();
    let mut frames = 0u64;
    for r in in_file.iter().filter(|r| r.ts_ns >= from && r.ts_ns < to) {
        slicer.push(&r.fields);
        frames += 1;
    }
    assert_eq!(frames, 12_000);
    assert_eq!(got, slicer.finish());
    let sum: u64 = got.iter().map(|s| s.a.frames + s.b.frames).sum();
    assert_eq!(sum, 12_000);
    assert!(
        got.iter()
            .all(|s| s.first_ns() >= Some(from) && s.last_ns() < Some(to))
    );
    // An empty window reads nothing.
    let (none, read) = slices_from_packets(
        &dir,
        "packets/w000-00000.parquet",
        Some(t0 - 10),
        Some(t0 - 5),
    )
    .unwrap();
    assert!(none.is_empty());
    assert_eq!(read, 0);
}
