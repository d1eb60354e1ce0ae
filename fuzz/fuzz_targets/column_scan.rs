//! weir's column scan (`pqcodec::decode`) over Parquet files whose pages are
//! hostile: a valid file's footer is kept (the parquet crate reads and
//! checks it before the scan starts) and the input is XORed onto its page
//! bytes, so every page header, level run, dictionary, code and delta block
//! the scan meets may be damaged (an empty input leaves the file valid, a
//! start the fuzzer mutates from). Nothing may panic; every value the scan
//! hands out must be readable.
#![no_main]

use std::sync::{Arc, OnceLock};

use arrow_array::{ArrayRef, FixedSizeBinaryArray, Int64Array, RecordBatch, StringArray, UInt32Array};
use libfuzzer_sys::fuzz_target;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{WriterProperties, WriterVersion};
use pqcodec::decode::scan::TableScan;

const COLUMNS: [&str; 5] = ["a", "b", "c", "d", "e"];

/// Four small valid files (page versions 1 and 2, raw and zstd), with
/// dictionaries, delta, nulls, fixed-size values and text, and where each
/// one's pages end (the footer starts).
fn bases() -> &'static [(Vec<u8>, usize)] {
    static BASES: OnceLock<Vec<(Vec<u8>, usize)>> = OnceLock::new();
    BASES.get_or_init(|| {
        let n = 300;
        let a: Int64Array = (0..n).map(|i| (i % 7 != 0).then_some(i as i64 * 1000)).collect();
        let b: UInt32Array = (0..n).map(|i| (i % 5) as u32).collect();
        let c = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
            (0..n).map(|i| (i % 3 != 0).then(|| [i as u8; 16])),
            16,
        )
        .expect("fixed");
        let d: StringArray = (0..n).map(|i| (i % 4 != 0).then(|| format!("op{}", i % 6))).collect();
        let e: StringArray = (0..n).map(|i| Some(format!("name-{i}"))).collect();
        let cols: Vec<ArrayRef> = vec![Arc::new(a), Arc::new(b), Arc::new(c), Arc::new(d), Arc::new(e)];
        let batch = RecordBatch::try_from_iter(COLUMNS.iter().zip(cols).map(|(n, c)| (*n, c)))
            .expect("batch");
        let mut out = Vec::new();
        for v2 in [false, true] {
            for zstd in [false, true] {
                let props = WriterProperties::builder()
                    .set_writer_version(if v2 { WriterVersion::PARQUET_2_0 } else { WriterVersion::PARQUET_1_0 })
                    .set_compression(if zstd { Compression::ZSTD(ZstdLevel::default()) } else { Compression::UNCOMPRESSED })
                    .set_data_page_row_count_limit(100)
                    .set_write_batch_size(50)
                    .set_column_encoding("a".into(), Encoding::DELTA_BINARY_PACKED)
                    .set_column_dictionary_enabled("a".into(), false)
                    .set_column_encoding("c".into(), Encoding::PLAIN)
                    .set_column_encoding("d".into(), Encoding::PLAIN)
                    .set_column_encoding("e".into(), Encoding::PLAIN)
                    .build();
                let mut file = Vec::new();
                let mut w = ArrowWriter::try_new(&mut file, batch.schema(), Some(props)).expect("writer");
                w.write(&batch).expect("write");
                w.close().expect("close");
                let footer = u32::from_le_bytes(file[file.len() - 8..file.len() - 4].try_into().expect("4"));
                let pages_end = file.len() - 8 - footer as usize;
                out.push((file, pages_end));
            }
        }
        out
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, pages)) = data.split_first() else {
        return;
    };
    let (base, pages_end) = &bases()[pick as usize % 4];
    let mut file = base.clone();
    // The pages start after the 4-byte magic.
    let room = pages_end - 4;
    for (b, x) in file[4..4 + room].iter_mut().zip(pages) {
        *b ^= x;
    }
    let Ok(mut scan) = TableScan::of_bytes(
        std::path::Path::new("fuzz.parquet"),
        bytes::Bytes::from(file),
        &COLUMNS,
        |_| true,
    ) else {
        return;
    };
    // The first byte's top bit: integer columns give dictionary codes.
    if pick & 0x80 != 0 {
        (0..COLUMNS.len()).for_each(|k| scan.keep_codes(k));
    }
    let mut batches = 0;
    while let Ok(Some(rows)) = scan.advance() {
        batches += 1;
        assert!(batches <= 100_000, "the scan does not end");
        if scan.load().is_err() {
            return;
        }
        for k in 0..COLUMNS.len() {
            let c = scan.column(k);
            assert_eq!(c.rows(), rows);
            let (ints, fixed) = (c.ints(), c.fixed());
            for i in 0..rows {
                let _ = c.is_valid(i);
                let _ = c.text(i);
                let _ = c.int(i);
                if let Some(codes) = c.codes() {
                    let _ = codes[i];
                }
                if !ints.is_empty() {
                    let _ = ints[i];
                }
                if !fixed.is_empty() {
                    let _ = fixed[i];
                }
            }
        }
    }
});
