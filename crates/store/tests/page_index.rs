//! The packet table's page index: written with every packet file, read by
//! arrow-rs as the standard one, and what `store::index` takes a query for
//! a few flows to just their pages with.

use std::path::PathBuf;

use parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};
use parquet::file::page_index::column_index::ColumnIndexMetaData;

use pqcodec::encode::EncodeOptions;
use store::index::{PacketIndex, holds};
use store::{PacketWriter, PacketWriterOptions, RowOrder};
use wire::{Has, PacketRecord};

use testdata::Rng;

/// UDP records of `flows` flows in random turns, a few frames without an
/// IP layer among them; each record's `pcap_offset` is its number.
fn records(n: usize, flows: u64, seed: u64) -> Vec<PacketRecord> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|i| {
            let mut r = PacketRecord::new(1_700_000_000_000_000_000 + i as i64 * 1000, 64, 64);
            r.has = Has::ETHERTYPE | Has::PCAP;
            r.pcap_file = 0;
            r.pcap_offset = i as u64;
            if rng.next() % 97 == 0 {
                r.ethertype = 0x0806;
                return r;
            }
            let f = rng.next() % flows;
            r.has |= Has::IP | Has::PORTS | Has::UDP | Has::FLOW;
            r.ethertype = 0x0800;
            r.ip_version = 4;
            r.ip_proto = 17;
            r.ip_src = wire::ip::v4_mapped([10, 0, (f >> 8) as u8, f as u8]);
            r.ip_dst = wire::ip::v4_mapped([10, 200, 0, 1]);
            r.src_port = 1024 + f as u16;
            r.dst_port = 9000;
            r.flow_hash = wire::flow::flow_hash(&r.ip_src, &r.ip_dst, r.src_port, 9000, 17);
            r
        })
        .collect()
}

fn tmp(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("store-page-index");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Writes `recs` in row groups of 8 Ki rows, pages of 1 Ki, and pages of
/// `index_page_rows` for the columns read through the index.
fn write(recs: &[PacketRecord], name: &str, order: RowOrder, index_page_rows: usize) -> PathBuf {
    let path = tmp(name);
    let opts = PacketWriterOptions {
        prefault: false,
        flows: false,
        row_group_rows: 8192,
        order,
        encode: EncodeOptions {
            page_rows: 1024,
            index_page_rows,
            ..Default::default()
        },
    };
    let mut w = PacketWriter::create(&path, name, opts).unwrap();
    for r in recs {
        w.push(r).unwrap();
    }
    w.finish().unwrap();
    path
}

/// The offsets of the records a scan of `index`'s pages for `hashes`
/// (and, with `nulls`, rows without a hash) keeps, and the pages read.
fn offsets_through_index(index: &PacketIndex, hashes: &[u32], nulls: bool) -> (Vec<u64>, usize) {
    let chosen = index.choose(hashes, nulls, |_| true);
    let mut scan = index.scan(&chosen, &["flow_hash", "pcap_offset"]).unwrap();
    let mut out = Vec::new();
    while let Some(n) = scan.advance().unwrap() {
        scan.load().unwrap();
        let (h, o) = (scan.column(0), scan.column(1));
        for i in 0..n {
            let keep = match h.int(i) {
                Some(v) => hashes.contains(&(v as u32)),
                None => nulls,
            };
            if keep {
                out.push(o.int(i).unwrap());
            }
        }
    }
    out.sort_unstable();
    (out, chosen.pages())
}

#[test]
fn a_flow_is_found_in_a_page_of_each_row_group() {
    let recs = records(40_000, 400, 5);
    let path = write(&recs, "flow.parquet", RowOrder::Flow, 512);
    let index = PacketIndex::open(&path).unwrap().expect("a page index");
    assert!(index.pages() >= 16 * 4, "{} pages", index.pages());
    for f in [0usize, 17, 399] {
        let h = recs
            .iter()
            .find(|r| r.has(Has::FLOW) && r.src_port == 1024 + f as u16)
            .unwrap()
            .flow_hash;
        let want: Vec<u64> = (recs.iter())
            .filter(|r| r.has(Has::FLOW) && r.flow_hash == h)
            .map(|r| r.pcap_offset)
            .collect();
        let (got, pages) = offsets_through_index(&index, &[h], false);
        assert_eq!(got, want, "flow {f}");
        // A page or two of each of the five row groups, of 16 each.
        assert!(pages <= 2 * 5, "flow {f}: {pages} pages");
    }
    // Rows without a hash sit in pages of their own at each group's end.
    let want: Vec<u64> = (recs.iter())
        .filter(|r| !r.has(Has::FLOW))
        .map(|r| r.pcap_offset)
        .collect();
    let (got, pages) = offsets_through_index(&index, &[], true);
    assert_eq!(got, want);
    assert!(pages < index.pages() / 4, "{pages} pages");
    // A hash no flow has: no page.
    assert_eq!(offsets_through_index(&index, &[7], false), (vec![], 0));
    let found = holds(index.meta(), |_| true);
    assert!(!found.vlan && !found.tunnels && !found.long_ip_headers);
}

#[test]
fn the_page_index_is_the_standard_one() {
    let recs = records(20_000, 300, 9);
    let path = write(&recs, "standard.parquet", RowOrder::Flow, 256);
    let file = std::fs::File::open(&path).unwrap();
    let meta = ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Required)
        .parse_and_finish(&file)
        .unwrap();
    let schema = meta.file_metadata().schema_descr();
    let flow = (0..schema.num_columns())
        .find(|&i| schema.column(i).name() == "flow_hash")
        .unwrap();
    let (columns, offsets) = (meta.column_index().unwrap(), meta.offset_index().unwrap());
    let leaf = |name: &str| {
        (0..schema.num_columns())
            .find(|&i| schema.column(i).name() == name)
            .unwrap()
    };
    for (g, rg) in meta.row_groups().iter().enumerate() {
        let first = |c: usize| -> Vec<i64> {
            (offsets[g][c].page_locations().iter())
                .map(|l| l.first_row_index)
                .collect()
        };
        // Every column's pages located: those read through the index every
        // 256 rows, together; the others every 1024.
        let small = first(flow);
        assert_eq!(small.len(), (rg.num_rows() as usize).div_ceil(256));
        for name in store::index::INDEX_COLUMNS {
            assert_eq!(first(leaf(name)), small, "{name}");
        }
        assert_eq!(
            first(leaf("ip_src")).len(),
            (rg.num_rows() as usize).div_ceil(1024)
        );
        // flow_hash's bounds climb page by page.
        assert!(columns[g][flow].is_sorted(), "row group {g}");
        match &columns[g][flow] {
            ColumnIndexMetaData::INT32(ix) => {
                // Unsigned (UINT_32), pages of nulls alone without bounds.
                let mins: Vec<u32> = ix.min_values_iter().flatten().map(|&v| v as u32).collect();
                assert!(mins.len() > 1 && mins.windows(2).all(|w| w[0] <= w[1]));
            }
            other => panic!("flow_hash's column index: {other:?}"),
        }
    }
    // arrow-rs reads the file back whole with the index in place.
    let back = store::read::read_packet_file(&path).unwrap();
    assert_eq!(back.len(), recs.len());
}

#[test]
fn arrival_order_has_no_index_to_use() {
    let recs = records(10_000, 50, 3);
    let path = write(&recs, "arrival.parquet", RowOrder::Arrival, 512);
    assert!(PacketIndex::open(&path).unwrap().is_none());
}
