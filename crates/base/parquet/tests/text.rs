//! The text column encoder (file names in the nfs table): dictionary-coded
//! while its dictionary is small, PLAIN after it outgrows its limit, as
//! the parquet crate and weir's own column scan read it back.

use arrow_array::{Array, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Encoding;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use pqcodec::decode::scan::TableScan;
use pqcodec::encode::file::EncodedFile;
use pqcodec::encode::{EncodeOptions, TextEncoder};

use testdata::Rng;

const PAGE: usize = 1000;

/// Row groups of texts: a page of nulls first, then few names repeated
/// (runs of one among them), then, in the second group, names nearly all
/// distinct, more than the dictionary may hold.
fn groups() -> Vec<Vec<Option<String>>> {
    let mut rng = Rng(7);
    let mut few = vec![None; PAGE];
    for i in 0..4 * PAGE {
        let r = rng.next();
        few.push(match r % 10 {
            0 => None,
            1 if i > 0 => few.last().cloned().flatten(),
            _ => Some(format!("file-{}.dat", r % 37)),
        });
    }
    let mut many = Vec::new();
    for i in 0..6 * PAGE {
        let r = rng.next();
        many.push((r % 7 != 0).then(|| match i % 3 {
            0 => String::new(),
            1 => format!("a longer name than eight bytes, number {}", r % 5000),
            _ => format!("n{}", r % 90),
        }));
    }
    vec![few, many]
}

fn dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("weir-text-{}", std::process::id()))
}

fn write(groups: &[Vec<Option<String>>], limit: usize) -> std::path::PathBuf {
    let dir = dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("text-{limit}.parquet"));
    let schema = Schema::new(vec![Field::new("name", DataType::Utf8, true)]);
    let opts = EncodeOptions {
        dict_limit: limit,
        ..EncodeOptions::default()
    };
    let mut f = EncodedFile::create(&path, &schema, WriterProperties::builder(), 1).unwrap();
    let mut enc = TextEncoder::new(&opts);
    for g in groups {
        for (i, v) in g.iter().enumerate() {
            if i > 0 && i % PAGE == 0 {
                enc.end_page(f.zstd()).unwrap();
            }
            enc.push(v.as_deref());
        }
        let chunk = enc.finish(f.zstd()).unwrap();
        f.write_row_group(g.len(), vec![chunk]).unwrap();
    }
    f.finish().unwrap();
    path
}

#[test]
fn texts_round_trip_through_dictionary_and_fallback() {
    let groups = groups();
    let want: Vec<Option<String>> = groups.iter().flatten().cloned().collect();
    for limit in [64 * 1024, 100] {
        let path = write(&groups, limit);

        // The encodings say what happened: dictionary pages in both groups,
        // PLAIN pages only in the second when the limit is small.
        let meta = SerializedFileReader::new(std::fs::File::open(&path).unwrap())
            .unwrap()
            .metadata()
            .clone();
        for (g, rg) in meta.row_groups().iter().enumerate() {
            let enc = rg.column(0).encodings().collect::<Vec<_>>();
            assert!(
                enc.contains(&Encoding::RLE_DICTIONARY),
                "{limit} {g}: {enc:?}"
            );
            assert!(rg.column(0).dictionary_page_offset().is_some());
            let stats = rg.column(0).statistics().unwrap();
            let texts = groups[g].iter().flatten();
            let (min, max) = (texts.clone().min().unwrap(), texts.max().unwrap());
            assert_eq!(stats.min_bytes_opt(), Some(min.as_bytes()));
            assert_eq!(stats.max_bytes_opt(), Some(max.as_bytes()));
            assert_eq!(
                stats.null_count_opt(),
                Some(groups[g].iter().filter(|v| v.is_none()).count() as u64)
            );
        }

        // The parquet crate reads every row back.
        let file = std::fs::File::open(&path).unwrap();
        let mut got = Vec::new();
        for b in ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
        {
            let b = b.unwrap();
            let a = b.column(0).as_any().downcast_ref::<StringArray>().unwrap();
            got.extend((0..a.len()).map(|i| a.is_valid(i).then(|| a.value(i).to_string())));
        }
        assert_eq!(got, want, "parquet crate, limit {limit}");

        // So does weir's scan, codes and all.
        let mut s = TableScan::open(&path, &["name"], |_| true).unwrap();
        let mut got = Vec::new();
        let (mut coded, mut plain) = (0, 0);
        while let Some(n) = s.advance().unwrap() {
            s.load().unwrap();
            let c = s.column(0);
            match c.codes() {
                Some(_) => coded += 1,
                None if (0..n).any(|i| c.is_valid(i)) => plain += 1,
                None => {}
            }
            got.extend((0..n).map(|i| c.text(i).map(|t| String::from_utf8(t.to_vec()).unwrap())));
        }
        assert_eq!(got, want, "weir's scan, limit {limit}");
        // The small limit is passed in the second group's first page.
        assert!(coded > 0);
        assert_eq!(plain > 0, limit == 100, "{coded} coded, {plain} plain");
        std::fs::remove_file(&path).unwrap();
    }
    std::fs::remove_dir_all(dir()).unwrap();
}
