//! weir's column scan against files the parquet crate writes in every
//! layout it reads (page versions, codecs, dictionaries, delta, nulls,
//! pages that end at different rows in different columns), and against
//! damaged copies of them.

use std::sync::Arc;

use arrow_array::{
    ArrayRef, FixedSizeBinaryArray, Int64Array, RecordBatch, StringArray, UInt32Array,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{WriterProperties, WriterVersion};
use pqcodec::decode::scan::TableScan;

use testdata::Rng;

/// The columns' values, row by row.
struct Rows {
    a: Vec<Option<i64>>,
    b: Vec<u32>,
    c: Vec<Option<u128>>,
    d: Vec<Option<String>>,
    e: Vec<String>,
}

fn rows(n: usize, seed: u64) -> Rows {
    let mut r = Rng(seed);
    let mut t = 1_700_000_000_000_000_000i64;
    let mut rows = Rows {
        a: Vec::new(),
        b: Vec::new(),
        c: Vec::new(),
        d: Vec::new(),
        e: Vec::new(),
    };
    for i in 0..n {
        t += (r.next() % 5000) as i64 - 100;
        rows.a.push((r.next() % 7 != 0).then_some(t));
        rows.b.push(if i % 100 < 60 {
            3
        } else {
            (r.next() % 40) as u32
        });
        rows.c
            .push((r.next() % 5 != 0).then(|| u128::from(r.next() % 3) << 100 | 0xc0a8_0001));
        rows.d
            .push((r.next() % 3 != 0).then(|| format!("op{}", r.next() % 9)));
        rows.e.push(format!("name-{}", r.next() % 100_000));
    }
    rows
}

fn batch(rows: &Rows) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::UInt32, false),
        Field::new("c", DataType::FixedSizeBinary(16), true),
        Field::new("d", DataType::Utf8, true),
        Field::new("e", DataType::Utf8, false),
    ]));
    let c = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
        rows.c.iter().map(|v| v.map(|v| v.to_be_bytes())),
        16,
    )
    .unwrap();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(rows.a.clone())),
        Arc::new(UInt32Array::from(rows.b.clone())),
        Arc::new(c),
        Arc::new(StringArray::from(rows.d.clone())),
        Arc::new(StringArray::from(rows.e.clone())),
    ];
    RecordBatch::try_new(schema, cols).unwrap()
}

fn write(rows: &Rows, props: WriterProperties) -> Vec<u8> {
    let b = batch(rows);
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, b.schema(), Some(props)).unwrap();
    // Written in slices, so row groups and pages end at many places.
    for at in (0..b.num_rows()).step_by(700) {
        w.write(&b.slice(at, 700.min(b.num_rows() - at))).unwrap();
    }
    w.close().unwrap();
    out
}

/// How the scan is asked to give the integer columns a and b.
#[derive(Clone, Copy, PartialEq)]
enum Ints {
    Values,
    /// Dictionary codes where pages are dictionary-coded
    /// (`TableScan::keep_codes`; asked of c, d and e too, which ignore it).
    Codes,
}

/// Every row of the kept row groups, through the scan, as `Rows`; the
/// columns are loaded only in the batches `load_batch` picks (the other
/// rows are left out). Also how many batches gave codes for a or b.
fn scan(
    file: &[u8],
    keep_group: impl Fn(usize) -> bool,
    load_batch: impl Fn(usize) -> bool,
    ints: Ints,
) -> (Rows, usize, usize) {
    let data = bytes::Bytes::copy_from_slice(file);
    let groups = std::cell::Cell::new(0usize);
    let mut s = TableScan::of_bytes(
        std::path::Path::new("test.parquet"),
        data,
        &["a", "b", "c", "d", "e"],
        |_| {
            let g = groups.get();
            groups.set(g + 1);
            keep_group(g)
        },
    )
    .unwrap();
    if ints == Ints::Codes {
        (0..5).for_each(|k| s.keep_codes(k));
    }
    let mut coded = 0;
    let mut out = Rows {
        a: Vec::new(),
        b: Vec::new(),
        c: Vec::new(),
        d: Vec::new(),
        e: Vec::new(),
    };
    let mut batches = 0;
    let mut skipped = 0;
    while let Some(n) = s.advance().unwrap() {
        batches += 1;
        if !load_batch(batches) {
            skipped += n;
            continue;
        }
        s.load().unwrap();
        let (a, b, c, d, e) = (
            s.column(0),
            s.column(1),
            s.column(2),
            s.column(3),
            s.column(4),
        );
        if ints == Ints::Codes {
            coded += usize::from(a.codes().is_some()) + usize::from(b.codes().is_some());
        }
        for i in 0..n {
            if ints == Ints::Values {
                out.a.push(a.is_valid(i).then(|| a.ints()[i] as i64));
                out.b.push(b.ints()[i] as u32);
            } else {
                out.a.push(a.int(i).map(|v| v as i64));
                out.b.push(b.int(i).unwrap() as u32);
            }
            out.c.push(c.is_valid(i).then(|| c.fixed()[i]));
            out.d
                .push(d.text(i).map(|t| String::from_utf8(t.to_vec()).unwrap()));
            out.e
                .push(String::from_utf8(e.text(i).unwrap().to_vec()).unwrap());
        }
    }
    (out, skipped, coded)
}

fn layouts() -> Vec<(String, WriterProperties)> {
    let mut v = Vec::new();
    for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
        for zstd in [false, true] {
            for dict in [false, true] {
                let mut p = WriterProperties::builder()
                    .set_writer_version(version)
                    .set_max_row_group_row_count(Some(3000))
                    .set_data_page_row_count_limit(900)
                    .set_data_page_size_limit(2000)
                    .set_write_batch_size(128)
                    .set_dictionary_enabled(dict)
                    .set_compression(if zstd {
                        Compression::ZSTD(ZstdLevel::default())
                    } else {
                        Compression::UNCOMPRESSED
                    });
                // Text the v2 writer would encode DELTA_BYTE_ARRAY (not
                // read by the scan): PLAIN, when no dictionary or past it.
                for col in ["c", "d", "e"] {
                    p = p.set_column_encoding(col.into(), Encoding::PLAIN);
                }
                if !dict {
                    p = p
                        .set_column_encoding("a".into(), Encoding::DELTA_BINARY_PACKED)
                        .set_column_encoding("b".into(), Encoding::DELTA_BINARY_PACKED);
                }
                v.push((
                    format!("{version:?} zstd {zstd} dictionary {dict}"),
                    p.build(),
                ));
            }
        }
    }
    v
}

#[test]
fn scan_reads_what_the_parquet_crate_writes_in_every_layout() {
    let want = rows(10_000, 42);
    for (name, props) in layouts() {
        let file = write(&want, props);
        for ints in [Ints::Values, Ints::Codes] {
            let (got, skipped, coded) = scan(&file, |_| true, |_| true, ints);
            assert_eq!(skipped, 0);
            assert_eq!(got.a, want.a, "{name}: a");
            assert_eq!(got.b, want.b, "{name}: b");
            assert_eq!(got.c, want.c, "{name}: c");
            assert_eq!(got.d, want.d, "{name}: d");
            assert_eq!(got.e, want.e, "{name}: e");
            // Codes come exactly where there are dictionaries.
            assert_eq!(
                coded > 0,
                ints == Ints::Codes && name.contains("dictionary true"),
                "{name}"
            );
        }

        // Row groups left out, and batches read without decoding: the
        // rows that are decoded are still the right ones.
        let (got, skipped, _) = scan(&file, |g| g % 2 == 1, |b| b % 3 == 0, Ints::Codes);
        let mut expect = Vec::new();
        for (g, at) in (0..want.a.len()).step_by(3000).enumerate() {
            if g % 2 == 1 {
                expect.extend_from_slice(&want.e[at..(at + 3000).min(want.e.len())]);
            }
        }
        assert_eq!(got.e.len() + skipped, expect.len(), "{name}");
        assert!(got.e.iter().all(|e| expect.contains(e)), "{name}");
    }
}

/// The name the damaged copies go by, which every error must give.
const DAMAGED: &str = "damaged-copy.parquet";

fn names_the_file(e: &pqcodec::FileError) -> bool {
    e.to_string().starts_with(&format!("{DAMAGED}: "))
}

/// Where a copy was damaged.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// Cut short: its footer is gone.
    Cut,
    /// A bit flipped in the footer, which may then say anything.
    Footer,
    /// A bit flipped in the column chunk of this row group and column.
    Chunk(usize, usize),
    /// A bit flipped elsewhere (the leading magic, the page index): read
    /// by no scan.
    Unread,
}

/// Row `i` of the batch as the scan gives it, column by column (none of
/// the accessors may panic, however damaged the file).
type Row<'a> = (
    Option<i64>,
    Option<u32>,
    Option<u128>,
    Option<&'a [u8]>,
    Option<&'a [u8]>,
);

fn row_of(s: &TableScan, i: usize) -> Row<'_> {
    let fixed = s.column(2);
    (
        s.column(0).int(i).map(|v| v as i64),
        s.column(1).int(i).map(|v| v as u32),
        fixed
            .is_valid(i)
            .then(|| fixed.fixed().get(i).copied())
            .flatten(),
        s.column(3).text(i),
        s.column(4).text(i),
    )
}

/// Damaged copies of the files, cut short or with a bit flipped in the
/// pages or the footer: nothing panics, and every error names the file.
/// Where the footer is whole, each row the scan gives is the undamaged
/// file's row in every column chunk the damage is not in (the pages carry
/// no checksum, so a flipped value bit in the damaged chunk can read as
/// another value: its rows are not compared), and a scan that ends
/// without an error gave every row.
#[test]
fn damaged_files_give_errors_naming_them_and_right_rows() {
    let want = rows(6_500, 7);
    let mut r = Rng(99);
    let (mut errors, mut compared) = (0usize, 0usize);
    for (name, props) in layouts() {
        let file = write(&want, props);
        let meta = pqcodec::decode::scan::metadata(
            std::path::Path::new("undamaged.parquet"),
            &bytes::Bytes::from(file.clone()),
        )
        .unwrap();
        let footer_len =
            u32::from_le_bytes(file[file.len() - 8..file.len() - 4].try_into().unwrap());
        let footer_at = file.len() - 8 - footer_len as usize;
        let groups: Vec<(usize, usize)> = (meta.row_groups().iter())
            .scan(0, |start, g| {
                let rows = (*start, g.num_rows() as usize);
                *start += rows.1;
                Some(rows)
            })
            .collect();
        assert!(groups.len() >= 3, "{name}: {groups:?}");
        let chunk_of = |at: usize| -> Damage {
            if at >= footer_at {
                return Damage::Footer;
            }
            for (g, rg) in meta.row_groups().iter().enumerate() {
                for k in 0..5 {
                    let (start, len) = rg.column(k).byte_range();
                    if (start..start + len).contains(&(at as u64)) {
                        return Damage::Chunk(g, k);
                    }
                }
            }
            Damage::Unread
        };
        for _ in 0..150 {
            let mut bad = file.clone();
            let damage = match r.next() % 3 {
                0 => {
                    bad.truncate((r.next() as usize) % file.len());
                    Damage::Cut
                }
                _ => {
                    let at = (r.next() as usize) % file.len();
                    bad[at] ^= 1 << (r.next() % 8);
                    chunk_of(at)
                }
            };
            let scan = TableScan::of_bytes(
                std::path::Path::new(DAMAGED),
                bytes::Bytes::from(bad),
                &["a", "b", "c", "d", "e"],
                |_| true,
            );
            let mut s = match scan {
                Ok(s) => s,
                Err(e) => {
                    assert!(names_the_file(&e), "{name} {damage:?}: {e}");
                    errors += 1;
                    continue;
                }
            };
            assert!(!matches!(damage, Damage::Cut), "{name}: a cut file opened");
            if r.next() % 2 == 0 {
                s.keep_codes(0);
                s.keep_codes(1);
            }
            let footer_whole = matches!(damage, Damage::Chunk(..) | Damage::Unread);
            let mut row = 0;
            let ended = loop {
                let n = match s.advance() {
                    Ok(Some(n)) => n,
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                };
                if let Err(e) = s.load() {
                    break Err(e);
                }
                for i in 0..n {
                    let got = row_of(&s, i);
                    if !footer_whole {
                        continue;
                    }
                    let at = row + i;
                    let g = groups.iter().rposition(|&(start, _)| start <= at).unwrap();
                    let same =
                        |k: usize| !matches!(damage, Damage::Chunk(dg, dk) if (dg, dk) == (g, k));
                    if same(0) {
                        assert_eq!(got.0, want.a[at], "{name} {damage:?}: row {at}: a");
                    }
                    if same(1) {
                        assert_eq!(got.1, Some(want.b[at]), "{name} {damage:?}: row {at}: b");
                    }
                    if same(2) {
                        assert_eq!(got.2, want.c[at], "{name} {damage:?}: row {at}: c");
                    }
                    if same(3) {
                        assert_eq!(
                            got.3,
                            want.d[at].as_deref().map(str::as_bytes),
                            "{name} {damage:?}: row {at}: d"
                        );
                    }
                    if same(4) {
                        assert_eq!(
                            got.4,
                            Some(want.e[at].as_bytes()),
                            "{name} {damage:?}: row {at}: e"
                        );
                    }
                    compared += 1;
                }
                row += n;
            };
            match ended {
                Err(e) => {
                    assert!(names_the_file(&e), "{name} {damage:?}: {e}");
                    errors += 1;
                }
                Ok(()) if footer_whole => {
                    assert_eq!(row, want.a.len(), "{name} {damage:?}: rows given");
                }
                Ok(()) => {}
            }
        }
    }
    // The damage was such that both happened, many times.
    assert!(
        errors > 300 && compared > 1_000_000,
        "{errors} errors, {compared} rows compared"
    );
}
