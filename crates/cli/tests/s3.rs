//! Datasets on S3-compatible object storage, against a real S3 server the
//! test starts (versitygw, its posix backend on the test's directory, on
//! the loopback): a dataset uploaded as it is written reads back from the
//! bucket as it reads from the disk (info, read, analyze, sql, verify);
//! wrong credentials, a missing bucket and a server that is not there say
//! what to do; an object altered in the bucket is named by `weir verify`;
//! datasets under one prefix read as one, and `weir merge` links them
//! instead of copying.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use testdata::s3::S3Server;

const BUCKET: &str = "weir";

/// `weir ARGS` with the server's endpoint and credentials.
fn weir_at(server: &S3Server, args: &[&str]) -> Run {
    let mut cmd = weir();
    cmd.envs(server.env()).args(args);
    run_bounded(cmd, Duration::from_secs(180))
}

fn ok(server: &S3Server, args: &[&str]) -> String {
    let r = weir_at(server, args);
    assert_eq!(r.code(), 0, "weir {args:?}: {}", r.stderr());
    r.stdout()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A generated trace of `frames` frames of the application mix.
fn trace(s: &Scratch, name: &str, frames: u64, seed: u64) -> std::path::PathBuf {
    let t = s.join(&format!("{name}.pcap"));
    let mut cmd = weir();
    cmd.args(["gen", "-w", p(&t), "--model", "app", "-c"])
        .arg(frames.to_string())
        .args(["--seed", &seed.to_string()]);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "weir gen: {}", r.stderr());
    t
}

/// The keys under `prefix/` in the bucket, as the server stores them.
fn objects_under(server: &S3Server, prefix: &str) -> Vec<String> {
    let root = server.object_file(BUCKET, prefix);
    let mut out: Vec<String> = common::live::walk(&root)
        .into_iter()
        .map(|f| {
            f.strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    out.sort();
    out
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_converted_dataset_uploads_and_reads_back_as_the_local_one() {
    let s = Scratch::new("s3-convert");
    let server = S3Server::start(&s.0);
    server.make_bucket(BUCKET);
    let t = trace(&s, "t", 60_000, 7);
    let local = s.join("ds");
    let url = format!("s3://{BUCKET}/sites/a");
    // Parts of 5 MiB (the least S3 takes): the packet file goes up in parts.
    let r = weir_at(
        &server,
        &[
            "convert",
            "-q",
            "-j",
            "2",
            "--index-sources",
            "-o",
            p(&local),
            "--upload",
            &url,
            "--keep-local",
            "--upload-part-size",
            "5Mi",
            p(&t),
        ],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(
        r.stderr().contains("uploaded to s3://weir/sites/a"),
        "{}",
        r.stderr()
    );

    // What is in the bucket is what the chain holds, and the manifest.
    let m = json(&ok(&server, &["info", "--json", &url]));
    let local_m = json(&std::fs::read_to_string(local.join("manifest.json")).unwrap());
    assert_eq!(m, local_m, "the manifest in the bucket is the local one");
    let mut chained: Vec<String> = m["integrity"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_string())
        .collect();
    chained.push("manifest.json".into());
    chained.sort();
    assert_eq!(objects_under(&server, "sites/a"), chained);
    assert_eq!(m["upload"]["backlog_files"], 0);
    assert!(
        m["upload"]["files"].as_u64().unwrap() >= 4,
        "{}",
        m["upload"]
    );

    // Every reader answers from the bucket as from the disk.
    for args in [
        vec!["analyze", "--json", "DS", "flows"],
        vec!["analyze", "--json", "DS", "summary"],
        vec!["analyze", "--json", "DS", "rates", "--every", "100ms"],
        vec!["analyze", "--json", "DS", "top", "ports", "tcp"],
        vec!["analyze", "--json", "DS", "dns"],
        vec![
            "sql",
            "--json",
            "DS",
            "SELECT count(*) AS n, sum(wire_len) AS b, count(DISTINCT flow_hash) AS f FROM packets",
        ],
        vec!["sql", "--json", "DS", "SELECT count(*) AS n FROM flows"],
    ] {
        let at = |ds: &str| {
            let a: Vec<&str> = args
                .iter()
                .map(|w| if *w == "DS" { ds } else { w })
                .collect();
            ok(&server, &a)
        };
        assert_eq!(at(&url), at(p(&local)), "{args:?}");
    }
    // Frames by range: the same pcap, byte for byte.
    let from_bucket = s.join("b.pcap");
    let from_disk = s.join("d.pcap");
    for (ds, out) in [(url.as_str(), &from_bucket), (p(&local), &from_disk)] {
        ok(
            &server,
            &["read", "-q", ds, "udp or tcp port 80", "-w", p(out)],
        );
    }
    let (b, d) = (
        std::fs::read(&from_bucket).unwrap(),
        std::fs::read(&from_disk).unwrap(),
    );
    assert!(b.len() > 1000);
    assert!(b == d, "weir read from the bucket differs from the disk");

    let v = ok(&server, &["verify", &url]);
    assert!(v.contains("verified"), "{v}");
}

#[test]
fn wrong_credentials_a_missing_bucket_and_no_server_say_what_to_do() {
    let s = Scratch::new("s3-errors");
    let server = S3Server::start(&s.0);
    server.make_bucket(BUCKET);
    let t = trace(&s, "t", 2_000, 3);
    let url = format!("s3://{BUCKET}/x");
    ok(
        &server,
        &[
            "convert",
            "-q",
            "-o",
            p(&s.join("ds")),
            "--upload",
            &url,
            p(&t),
        ],
    );

    let mut wrong = weir();
    wrong
        .envs(server.env())
        .env("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        .args(["info", &url]);
    let r = run_bounded(wrong, Duration::from_secs(60));
    assert_ne!(r.code(), 0);
    let e = r.stderr();
    assert!(
        e.contains("s3://weir/x") && e.contains("AWS_SECRET_ACCESS_KEY"),
        "{e}"
    );

    let r = weir_at(&server, &["info", "s3://no-such-bucket/x"]);
    assert_ne!(r.code(), 0);
    let e = r.stderr();
    assert!(
        e.contains("no-such-bucket") && e.contains("does not exist") && e.contains("create it"),
        "{e}"
    );

    // Nothing is written when the destination cannot take the dataset.
    let r = weir_at(
        &server,
        &[
            "convert",
            "-q",
            "-o",
            p(&s.join("ds2")),
            "--upload",
            "s3://no-such-bucket/y",
            p(&t),
        ],
    );
    assert_ne!(r.code(), 0);
    assert!(r.stderr().contains("create it"), "{}", r.stderr());
    assert!(!s.join("ds2").exists());

    // A dataset already there is not written over.
    let r = weir_at(
        &server,
        &[
            "convert",
            "-q",
            "-o",
            p(&s.join("ds3")),
            "--upload",
            &url,
            p(&t),
        ],
    );
    assert_ne!(r.code(), 0);
    assert!(r.stderr().contains("already there"), "{}", r.stderr());

    let mut gone = weir();
    gone.envs(server.env())
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .args(["info", &url]);
    let r = run_bounded(gone, Duration::from_secs(90));
    assert_ne!(r.code(), 0);
    let e = r.stderr();
    assert!(
        e.contains("cannot reach") && e.contains("127.0.0.1:1") && e.contains("--s3-endpoint"),
        "{e}"
    );

    // Plain HTTP goes only to the loopback unless asked for.
    let mut far = weir();
    far.envs(server.env())
        .args(["--s3-endpoint", "http://192.0.2.1:9000", "info", &url]);
    let r = run_bounded(far, Duration::from_secs(60));
    assert_ne!(r.code(), 0);
    assert!(r.stderr().contains("AWS_ALLOW_HTTP"), "{}", r.stderr());
}

#[test]
fn verify_names_an_object_altered_or_missing_in_the_bucket() {
    let s = Scratch::new("s3-verify");
    let server = S3Server::start(&s.0);
    server.make_bucket(BUCKET);
    let t = trace(&s, "t", 20_000, 5);
    let url = format!("s3://{BUCKET}/v");
    ok(
        &server,
        &[
            "convert",
            "-q",
            "-j",
            "2",
            "-o",
            p(&s.join("ds")),
            "--upload",
            &url,
            p(&t),
        ],
    );
    // Uploaded, the local copies are gone but the manifest (the local
    // dataset is a buffer).
    assert!(!s.join("ds/packets").read_dir().unwrap().any(|e| {
        e.unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".parquet")
    }));
    assert!(ok(&server, &["verify", &url]).contains("verified"));

    let m = json(&ok(&server, &["info", "--json", &url]));
    let packet = m["files"]["packets"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let stats = objects_under(&server, "v")
        .into_iter()
        .find(|k| k.starts_with("flows/"))
        .unwrap();
    let file = server.object_file(BUCKET, &format!("v/{packet}"));
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    std::fs::remove_file(server.object_file(BUCKET, &format!("v/{stats}"))).unwrap();
    let r = weir_at(&server, &["verify", &url]);
    assert_eq!(r.code(), 1, "{}", r.stderr());
    let out = r.stdout();
    assert!(out.contains(&format!("altered    {packet}")), "{out}");
    assert!(out.contains(&format!("missing    {stats}")), "{out}");
}

#[test]
fn datasets_under_one_prefix_read_as_one_and_merge_links_them() {
    let s = Scratch::new("s3-site");
    let server = S3Server::start(&s.0);
    server.make_bucket(BUCKET);
    let mut counts = Vec::new();
    for (k, name) in ["a", "b", "c"].iter().enumerate() {
        let t = trace(&s, name, 10_000 + 1000 * k as u64, 11 + k as u64);
        let url = format!("s3://{BUCKET}/site/{name}");
        ok(
            &server,
            &[
                "convert",
                "-q",
                "-o",
                p(&s.join(name)),
                "--upload",
                &url,
                p(&t),
            ],
        );
        let n = json(&ok(
            &server,
            &["sql", "--json", &url, "SELECT count(*) AS n FROM packets"],
        ));
        counts.push(n[0]["n"].as_u64().unwrap());
    }
    let total: u64 = counts.iter().sum();
    let q = "SELECT count(*) AS n FROM packets";
    let all = json(&ok(&server, &["sql", "--json", "s3://weir/site/", q]));
    assert_eq!(all[0]["n"].as_u64().unwrap(), total);
    let info = ok(&server, &["info", "s3://weir/site"]);
    assert_eq!(
        info.matches("weir dataset s3://weir/site/").count(),
        3,
        "{info}"
    );

    // Merged in place: a manifest that names the inputs' objects.
    let r = weir_at(
        &server,
        &[
            "merge",
            "s3://weir/site/a",
            "s3://weir/site/b",
            "s3://weir/site/c",
            "-o",
            "s3://weir/all",
        ],
    );
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(objects_under(&server, "all"), ["manifest.json"]);
    let merged = json(&ok(&server, &["sql", "--json", "s3://weir/all", q]));
    assert_eq!(merged[0]["n"].as_u64().unwrap(), total);
    let flows = |ds: &str| ok(&server, &["analyze", "--json", ds, "flows"]);
    assert_eq!(flows("s3://weir/all"), flows("s3://weir/site/"));
    let v = ok(&server, &["verify", "s3://weir/all"]);
    assert!(v.contains("verified"), "{v}");
    // An input changed after the merge is found by the merge's verify.
    let key = objects_under(&server, "site/b")
        .into_iter()
        .find(|k| k.starts_with("packets/"))
        .unwrap();
    let file = server.object_file(BUCKET, &format!("site/b/{key}"));
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes.truncate(n - 10);
    std::fs::write(&file, &bytes).unwrap();
    let r = weir_at(&server, &["verify", "s3://weir/all"]);
    assert_eq!(r.code(), 1);
    assert!(
        r.stdout().contains(&format!("../site/b/{key}")),
        "{}",
        r.stdout()
    );
}
