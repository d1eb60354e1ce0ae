//! The flows table built again from a packet file's records
//! (`flows::slices_from_packets`): over the whole file the slices its
//! writer wrote beside it (what `weir recover` rebuilds a lost flows file
//! with), and over a time window the slices of the records in it (what a
//! reader whose window cuts through a file's slices takes instead).

use std::path::PathBuf;

use store::flows::{
    FLOW_PAGE_ROWS, FlowLookup, FlowRow, FlowSlicer, read_flow_file, read_flow_rows,
    slices_from_packets,
};
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
    // The file holds its slices in flow order, the slicer in its own.
    let mut again = again;
    again.sort_by_key(|s| (s.key, s.first_ns()));
    assert_eq!(again, written);
}

/// A lookup of addresses reads the pages of the flows file that may hold
/// them (the writer sorts slices by flow, pages of FLOW_PAGE_ROWS), and every
/// row that has them is among what it reads.
#[test]
fn a_lookup_reads_the_pages_of_its_addresses_and_misses_no_row() {
    let recs = records(60_000, 10_000, 5);
    let root = write(&recs, "lookup");
    let path = root.join("flows/w000-00000.parquet");
    let mut all = Vec::new();
    let whole = read_flow_rows(&path, None, |r| all.push(*r)).unwrap();
    assert_eq!(whole.read, whole.rows);
    assert_eq!(whole.rows, all.len() as u64);
    assert!(
        whole.rows > 3 * FLOW_PAGE_ROWS as u64,
        "{} slices",
        whole.rows
    );
    let has = |r: &FlowRow, ip: u128| {
        r.key.is_ip()
            && (u128::from_be_bytes(r.key.a_ip) == ip || u128::from_be_bytes(r.key.b_ip) == ip)
    };
    let look = |lookup: &FlowLookup| {
        let mut got = Vec::new();
        let n = read_flow_rows(&path, Some(lookup), |r| got.push(*r)).unwrap();
        assert_eq!((n.rows, n.read), (whole.rows, got.len() as u64));
        got
    };
    let ip = |a: [u8; 4]| u128::from_be_bytes(wire::ip::v4_mapped(a));
    // One client: a page or two of the file, its rows all there.
    let client = ip([10, 0, 5, 7]);
    let lookup = FlowLookup {
        ranges: vec![(client, client)],
        ..Default::default()
    };
    let got = look(&lookup);
    assert!(
        got.len() <= 2 * FLOW_PAGE_ROWS,
        "{} of {} read",
        got.len(),
        whole.rows
    );
    let want: Vec<_> = all.iter().filter(|r| has(r, client)).collect();
    assert!(!want.is_empty());
    assert_eq!(
        got.iter().filter(|r| has(r, client)).collect::<Vec<_>>(),
        want
    );
    // An address no flow has: nothing read; with the frames that have no
    // IP layer (ARP), their rows.
    let absent = ip([10, 9, 9, 9]);
    let mut lookup = FlowLookup {
        ranges: vec![(absent, absent)],
        ..Default::default()
    };
    assert!(look(&lookup).is_empty());
    lookup.non_ip = true;
    let got = look(&lookup);
    let non_ip = all.iter().filter(|r| !r.key.is_ip()).count();
    assert!(non_ip > 0);
    assert_eq!(got.iter().filter(|r| !r.key.is_ip()).count(), non_ip);
    // With the rows of frames weir could not parse whole: every one.
    lookup.non_ip = false;
    lookup.parse_errors = true;
    let got = look(&lookup);
    let errors = |v: &[FlowRow]| v.iter().filter(|r| r.parse_errors > 0).count();
    assert!(errors(&all) > 0);
    assert_eq!(errors(&got), errors(&all));
    // The server every flow has: every page.
    let server = ip([10, 200, 0, 1]);
    let got = look(&FlowLookup {
        ranges: vec![(server, server)],
        ..Default::default()
    });
    assert_eq!(got.len() as u64, whole.rows);
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
