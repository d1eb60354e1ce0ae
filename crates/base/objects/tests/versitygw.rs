//! The object store layer against a real S3 server (versitygw on the
//! loopback): reads by range, listing, writes, the uploader (files as
//! sealed, the manifest last, local copies let go, a server that stops and
//! comes back), and errors that say what to do. One test: the clients
//! take their settings from the process's environment.

use std::sync::Arc;
use std::time::Duration;

use objects::{Prefix, UploadOptions, Uploader};
use testdata::s3::S3Server;
use util::storage::{Publisher, Sealed, Storage};

#[test]
fn the_store_reads_writes_uploads_and_says_what_is_wrong() {
    let dir = std::env::temp_dir().join(format!("weir-objects-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut server = S3Server::start(&dir);
    server.make_bucket("weir");
    for (k, v) in server.env() {
        // SAFETY: the only test of this binary; no other thread runs yet.
        unsafe { std::env::set_var(k, v) };
    }

    // Reads and writes.
    let root = Prefix::parse("s3://weir/t").unwrap();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    root.write("a/x.bin", &data).unwrap();
    root.write("a/b/y.bin", b"yy").unwrap();
    assert_eq!(&root.read("a/x.bin").unwrap()[..], &data[..]);
    let r = root
        .read_ranges("a/x.bin", &[10..20, 50_000..50_010])
        .unwrap();
    assert_eq!(
        (&r[0][..], &r[1][..]),
        (&data[10..20], &data[50_000..50_010])
    );
    let (tail, len) = root.read_tail("a/x.bin", 7).unwrap();
    assert_eq!((&tail[..], len), (&data[100_000 - 7..], 100_000));
    assert!(root.exists("a/x.bin").unwrap() && !root.exists("a/none").unwrap());
    let listed: Vec<_> = root
        .list("a")
        .unwrap()
        .into_iter()
        .map(|l| (l.path, l.bytes))
        .collect();
    assert_eq!(
        listed,
        [
            ("a/b/y.bin".to_string(), 2),
            ("a/x.bin".to_string(), 100_000)
        ]
    );
    let f = root.open("a/x.bin").unwrap();
    let mut buf = [0u8; 5];
    f.read_exact_at(&mut buf, 99_995).unwrap();
    assert_eq!(&buf, &data[99_995..]);
    assert!(f.read_exact_at(&mut buf, 99_996).is_err());
    assert_eq!(root.at("a/b").name(), "s3://weir/t/a/b");
    assert_eq!(root.at("../u").name_of("x"), "s3://weir/u/x");

    // Uploads: files first, the manifest last; local copies then go.
    let local = dir.join("ds");
    std::fs::create_dir_all(local.join("packets")).unwrap();
    let big: Vec<u8> = (0..12u32 << 20).map(|i| (i * 7 % 253) as u8).collect();
    std::fs::write(local.join("packets/p.parquet"), &big).unwrap();
    std::fs::write(local.join("packets/q.parquet"), b"small").unwrap();
    let sealed = |p: &str| {
        let d = util::digest::digest_file(&local.join(p)).unwrap();
        Sealed {
            path: p.to_string(),
            bytes: d.bytes,
            blake3: d.hex(),
        }
    };
    let files = [sealed("packets/p.parquet"), sealed("packets/q.parquet")];
    let dest = Prefix::parse("s3://weir/up").unwrap();
    let opts = UploadOptions {
        part_bytes: 5 << 20,
        ..Default::default()
    };
    let notes = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let n2 = notes.clone();
    let up = Uploader::start(
        &local,
        dest.clone(),
        opts,
        Box::new(move |m| n2.lock().unwrap().push(m.to_string())),
    )
    .unwrap();
    // The store goes away before anything is sent, and comes back.
    server.stop();
    up.published(&files, b"{\"manifest\": 1}\n", None, &[]);
    std::thread::sleep(Duration::from_secs(2));
    assert!(up.figures().failures > 0);
    assert!(
        dest.exists("packets/q.parquet").is_err(),
        "the server is down"
    );
    server.restart();
    assert!(up.drain(Duration::from_secs(60)), "{:?}", up.figures());
    let said = notes.lock().unwrap().clone();
    assert_eq!(
        said.iter()
            .filter(|m| m.contains("goes on locally"))
            .count(),
        1,
        "{said:?}"
    );
    assert!(said.iter().any(|m| m.contains("back after")), "{said:?}");
    assert_eq!(&dest.read("packets/p.parquet").unwrap()[..], &big[..]);
    assert_eq!(
        &dest.read("manifest.json").unwrap()[..],
        b"{\"manifest\": 1}\n"
    );
    assert!(
        !local.join("packets/p.parquet").exists(),
        "the local copy goes once uploaded"
    );
    assert_eq!(up.held_elsewhere().len(), 2);
    let fig = up.figures();
    assert_eq!(
        (fig.files, fig.backlog_files, fig.manifests),
        (2, 0, 1),
        "{fig:?}"
    );
    // Published again: nothing is sent twice, the new manifest goes.
    up.published(&files, b"{\"manifest\": 2}\n", None, &[]);
    assert!(up.drain(Duration::from_secs(30)));
    assert_eq!(up.figures().files, 2);
    assert_eq!(
        &dest.read("manifest.json").unwrap()[..],
        b"{\"manifest\": 2}\n"
    );
    let keys: Vec<_> = dest.list("").unwrap().into_iter().map(|l| l.path).collect();
    assert_eq!(
        keys,
        ["manifest.json", "packets/p.parquet", "packets/q.parquet"]
    );

    // What is wrong, said so.
    let e = Prefix::parse("s3://no-such-bucket/x")
        .unwrap()
        .exists("m")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not exist") && e.contains("create it"),
        "{e}"
    );
    unsafe { std::env::set_var("AWS_SECRET_ACCESS_KEY", "wrong") };
    server.make_bucket("other");
    let e = Prefix::parse("s3://other/x")
        .unwrap()
        .read("m")
        .unwrap_err()
        .to_string();
    assert!(e.contains("AWS_SECRET_ACCESS_KEY"), "{e}");
    server.stop();
    let e = root.read("a/x.bin").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotConnected, "{e}");
    assert!(e.to_string().contains("cannot reach"), "{e}");
    drop(up);
    let _ = std::fs::remove_dir_all(&dir);
}
