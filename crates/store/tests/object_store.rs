//! A dataset in an object store (versitygw on the loopback), read as the
//! local one is: its files planned from the manifest's chain, a column
//! scan that fetches only the chunks it reads, and `verify` naming an
//! object altered in the bucket.

use std::sync::Arc;
use std::time::Duration;

use arrow_array::{Int64Array, RecordBatch, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use store::decode::scan::ScanFile;
use store::{Dataset, Manifest, RowOrder};
use testdata::s3::S3Server;
use util::storage::{Directory, Root};

fn write_table(path: &std::path::Path, rows: usize, seed: i64) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("ts", DataType::Int64, false),
        Field::new("wire_len", DataType::UInt32, false),
    ]));
    let ts: Vec<i64> = (0..rows as i64).map(|i| seed + i * 1000).collect();
    let len: Vec<u32> = (0..rows as u32).map(|i| 60 + i % 1400).collect();
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![
            Arc::new(Int64Array::from(ts)),
            Arc::new(UInt32Array::from(len)),
        ],
    )
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(10_000))
        .build();
    let mut w =
        ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// Every (ts, wire_len) of the file's row groups `keep` accepts.
fn scan(root: &Root, rel: &str, keep: impl Fn(usize) -> bool) -> Vec<(u64, u64)> {
    let (file, meta) = ScanFile::open(root, rel).unwrap();
    let mut s = file
        .scan(Arc::new(meta), &["ts", "wire_len"], |g, _| keep(g))
        .unwrap();
    let mut out = Vec::new();
    while let Some(n) = s.advance().unwrap() {
        s.load().unwrap();
        for i in 0..n {
            out.push((s.column(0).ints()[i], s.column(1).ints()[i]));
        }
    }
    out
}

#[test]
fn a_dataset_in_a_bucket_reads_and_verifies_as_the_local_one() {
    let dir = std::env::temp_dir().join(format!("weir-store-s3-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let server = S3Server::start(&dir);
    server.make_bucket("weir");
    for (k, v) in server.env() {
        // SAFETY: the only test of this binary; no other thread runs yet.
        unsafe { std::env::set_var(k, v) };
    }
    let local = dir.join("ds");
    let dest = objects::Prefix::parse("s3://weir/site/ds").unwrap();
    let up = objects::Uploader::start(
        &local,
        dest,
        objects::UploadOptions {
            delete_local: false,
            ..Default::default()
        },
        Box::new(|m| eprintln!("upload: {m}")),
    )
    .unwrap();
    let ds = Dataset::create(&local, false)
        .unwrap()
        .published_to(Some(up.clone()));
    write_table(&local.join("packets/w000-00000.parquet"), 45_000, 1_000);
    write_table(
        &local.join("packets/w000-00001.parquet"),
        5_000,
        9_000_000_000,
    );
    std::fs::create_dir_all(local.join("stats")).unwrap();
    write_table(&local.join("stats/s-00000.parquet"), 100, 5);
    let m = ds
        .write_manifest(&Manifest::new("convert", "test", RowOrder::Flow))
        .unwrap();
    assert!(util::storage::Publisher::drain(
        &*up,
        Duration::from_secs(60)
    ));

    let remote: Root = objects::open("s3://weir/site/ds").unwrap();
    let here: Root = Directory::root(&local);
    // A prefix holding one dataset below it reads as that dataset.
    let found = store::location::datasets_under(&objects::open("s3://weir/site").unwrap()).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].root.name(), "s3://weir/site/ds");
    assert_eq!(found[0].manifest, m);
    let files = |root: &Root| -> Vec<String> {
        store::location::table_files(&**root, &m, "packets")
            .unwrap()
            .into_iter()
            .map(|f| f.rel)
            .collect()
    };
    assert_eq!(files(&remote), files(&here));
    assert_eq!(files(&remote).len(), 2);
    for rel in files(&remote) {
        assert_eq!(
            scan(&remote, &rel, |_| true),
            scan(&here, &rel, |_| true),
            "{rel}"
        );
        // Only some row groups: their chunks alone are fetched.
        assert_eq!(
            scan(&remote, &rel, |g| g % 2 == 1),
            scan(&here, &rel, |g| g % 2 == 1)
        );
    }
    let v = store::integrity::verify(&remote, None, None, 4).unwrap();
    assert!(v.ok(), "{:?}", v.findings);
    assert_eq!(v.files, 3);

    // An object altered in the bucket is named.
    let obj = server.object_file("weir", "site/ds/packets/w000-00001.parquet");
    let mut bytes = std::fs::read(&obj).unwrap();
    bytes[50] ^= 1;
    std::fs::write(&obj, &bytes).unwrap();
    let v = store::integrity::verify(&remote, None, None, 4).unwrap();
    let found: Vec<_> = v
        .findings
        .iter()
        .map(|f| (f.kind, f.path.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        found,
        [("altered", "packets/w000-00001.parquet".to_string())]
    );
    drop(up);
    let _ = std::fs::remove_dir_all(&dir);
}
