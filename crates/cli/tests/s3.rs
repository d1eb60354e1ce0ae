//! Datasets on S3-compatible object storage, against a real S3 server the
//! test starts (versitygw, its posix backend on the test's directory, on
//! the loopback): a dataset uploaded as it is written reads back from the
//! bucket as it reads from the disk (info, read, analyze, sql, verify);
//! wrong credentials, a missing bucket and a server that is not there say
//! what to do; an object altered in the bucket is named by `weir verify`;
//! datasets under one prefix read as one, and `weir merge` links them
//! instead of copying; a capture uploads through a server stopped and
//! started again, and `weir recover` after a killed capture keeps the
//! files only the bucket holds; DuckDB and Spark read the bucket and give
//! weir's answers.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::background::Background;
use common::netns::{IFACE, VethPair};
use common::*;
use serde_json::Value;
use testdata::s3::S3Server;

const BUCKET: &str = "weir";

/// `weir ARGS` with the server's endpoint and credentials (in its
/// network namespace when it runs in one).
fn weir_at(server: &S3Server, args: &[&str]) -> Run {
    let mut cmd = match server.netns() {
        Some(ns) => VethPair::exec(ns, env!("CARGO_BIN_EXE_weir")),
        None => weir(),
    };
    cmd.envs(server.env()).args(args);
    run_bounded(cmd, Duration::from_secs(180))
}

fn ok(server: &S3Server, args: &[&str]) -> String {
    let r = weir_at(server, args);
    assert_eq!(r.code(), 0, "weir {args:?}: {}", r.stderr());
    r.stdout()
}

/// `weir convert -q TRACE -o OUT --upload URL EXTRA...`, which must
/// succeed.
fn convert_up(server: &S3Server, out: &Path, url: &str, trace: &Path, extra: &[&str]) {
    let mut args = vec!["convert", "-q", "-o", p(out), "--upload", url, p(trace)];
    args.extend_from_slice(extra);
    ok(server, &args);
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
    // (Nothing is under a prefix before its first upload.)
    if !root.exists() {
        return Vec::new();
    }
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

    // Anonymized from the bucket as from the disk (its tables fetched
    // beside the output, and gone after).
    let key = s.join("anon.key");
    ok(&server, &["anonymize", "--new-key", p(&key)]);
    let anon = |ds: &str, out: &str| {
        let o = s.join(out);
        ok(&server, &["anonymize", ds, "-o", p(&o), "--key", p(&key)]);
        ok(&server, &["analyze", "--json", p(&o), "flows"])
    };
    assert_eq!(anon(&url, "anon-b"), anon(p(&local), "anon-d"));
    assert!(!s.join(".anon-b.inputs").exists());
}

#[test]
fn wrong_credentials_a_missing_bucket_and_no_server_say_what_to_do() {
    let s = Scratch::new("s3-errors");
    let server = S3Server::start(&s.0);
    server.make_bucket(BUCKET);
    let t = trace(&s, "t", 2_000, 3);
    let url = format!("s3://{BUCKET}/x");
    convert_up(&server, &s.join("ds"), &url, &t, &[]);

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
    convert_up(&server, &s.join("ds"), &url, &t, &["-j", "2"]);
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
fn weir_upload_sends_a_finished_dataset_and_says_how_much() {
    let s = Scratch::new("s3-upload-cmd");
    let server = S3Server::start(&s.0);
    server.make_bucket(BUCKET);
    let t = trace(&s, "t", 20_000, 9);
    let ds = s.join("ds");
    let r = weir_at(&server, &["convert", "-q", "-j", "2", "-o", p(&ds), p(&t)]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let url = format!("s3://{BUCKET}/later");
    let r = weir_at(&server, &["upload", p(&ds), &url]);
    assert_eq!(r.code(), 0, "{}", r.stderr());

    // Every file of the chain went up once, the manifest last, and the
    // figures (in the manifest and said) count them.
    let m = json(&ok(&server, &["info", "--json", &url]));
    let chained = live_chain(&m);
    let mut want = chained.clone();
    want.push("manifest.json".into());
    want.sort();
    assert_eq!(objects_under(&server, "later"), want);
    let u = &m["upload"];
    assert_eq!(u["files"].as_u64().unwrap(), chained.len() as u64, "{u}");
    assert_eq!(u["backlog_files"], 0, "{u}");
    let said = format!("uploaded to {url}: {} files", chained.len());
    assert!(r.stderr().contains(&said), "{}", r.stderr());
    assert!(ok(&server, &["verify", &url]).contains("verified"));
    // The local copies stay (no --delete-local).
    assert!(!local_files(&ds, "packets").is_empty());
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
        convert_up(&server, &s.join(name), &url, &t, &[]);
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

    // Merged into a directory: a and c copied from the bucket (checked
    // against their digests: b, altered above, is refused by name).
    let local = s.join("ac");
    ok(
        &server,
        &[
            "merge",
            "-q",
            "--keep-duplicates",
            "s3://weir/site/a",
            "s3://weir/site/c",
            "-o",
            p(&local),
        ],
    );
    let n = json(&ok(&server, &["sql", "--json", p(&local), q]));
    assert_eq!(n[0]["n"].as_u64().unwrap(), counts[0] + counts[2]);
    let m = json(&std::fs::read_to_string(local.join("manifest.json")).unwrap());
    assert_eq!(m["merge"]["inputs"][1]["path"], "s3://weir/site/c");
    assert_verifies(&local);
    assert!(!s.join(".ac.inputs").exists());
    let r = weir_at(
        &server,
        &[
            "merge",
            "s3://weir/site/a",
            "s3://weir/site/b",
            "-o",
            p(&s.join("ab")),
        ],
    );
    assert_ne!(r.code(), 0);
    assert!(
        r.stderr().contains(&format!("s3://weir/site/b/{key}")) && r.stderr().contains("BLAKE3"),
        "{}",
        r.stderr()
    );
    assert!(!s.join("ab").exists() && !s.join(".ab.inputs").exists());
}

/// `weir capture ARGS` on the veth pair's end in namespace `ns`, with the
/// server's endpoint and keys, running once it says it is capturing.
fn capture_to(server: &S3Server, ns: &str, args: &[&str]) -> Background {
    let mut cmd = VethPair::exec(ns, env!("CARGO_BIN_EXE_weir"));
    cmd.envs(server.env())
        .args(["capture", "-i", IFACE])
        .args(args);
    Background::start(cmd, "capturing on", Duration::from_secs(30))
}

/// `n` UDP frames of 300 bytes from namespace `ns`, at 3000 a second.
fn send_udp(ns: &str, n: u64) {
    common::live::send(
        ns,
        &[
            "--count",
            &n.to_string(),
            "--rate",
            "3000",
            "--size",
            "300",
            "--flows",
            "8",
        ],
    );
}

/// Waits (at most `limit`) until `done` holds.
fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < until, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Files under `dir` of the local dataset `ds` (relative to `ds`).
fn local_files(ds: &Path, dir: &str) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(ds.join(dir)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .map(|e| format!("{dir}/{}", e.file_name().to_string_lossy()))
        .filter(|n| !n.contains("/."))
        .collect();
    out.sort();
    out
}

fn live_chain(m: &Value) -> Vec<String> {
    let mut live = std::collections::BTreeSet::new();
    for e in m["integrity"]["entries"].as_array().unwrap() {
        let path = e["path"].as_str().unwrap().to_string();
        if e["op"] == "add" {
            live.insert(path);
        } else {
            live.remove(&path);
        }
    }
    live.into_iter().collect()
}

#[test]
fn a_capture_uploads_through_a_server_stopped_and_started_again() {
    let net = VethPair::new("i62-s3up");
    let s = Scratch::new("s3-capture");
    let mut server = S3Server::start_in(&s.0, &net.b);
    server.make_bucket(BUCKET);
    let ds = s.join("ds");
    let url = format!("s3://{BUCKET}/cap");
    // Local copies kept, the local pcap files bounded to 512k: the
    // oldest go once they are in the bucket, and stay in the dataset.
    let mut cap = capture_to(
        &server,
        &net.b,
        &[
            "-o",
            p(&ds),
            "-j",
            "1",
            "--rotate-size",
            "64k",
            "--max-disk",
            "512k",
            "--keep-local",
            "--upload",
            &url,
            "--duration",
            "90s",
            "-c",
            "9000",
            "udp",
        ],
    );
    send_udp(&net.a, 3000);
    wait_until("pcap files in the bucket", Duration::from_secs(30), || {
        objects_under(&server, "cap")
            .iter()
            .filter(|k| k.starts_with("pcap/"))
            .count()
            >= 4
    });
    // The store goes away: the capture goes on, and says so once.
    server.stop();
    send_udp(&net.a, 2000);
    assert!(
        cap.wait_for_line("goes on locally", Duration::from_secs(30)),
        "{:?}",
        cap.lines_seen()
    );
    // Frames while the failed file waits: the second they fall in is
    // sampled with a backlog (a second without frames has no stats row).
    send_udp(&net.a, 1000);
    std::thread::sleep(Duration::from_millis(2500));
    server.restart();
    assert!(
        cap.wait_for_line("the store is back", Duration::from_secs(60)),
        "{:?}",
        cap.lines_seen()
    );
    send_udp(&net.a, 3000);
    let r = cap.wait(Duration::from_secs(150));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let e = r.stderr();
    assert_eq!(e.matches("goes on locally").count(), 1, "{e}");
    assert_eq!(e.matches("the store is back").count(), 1, "{e}");

    // The bucket holds the dataset as the capture wrote it, every file
    // sent once.
    let m = json(&std::fs::read_to_string(ds.join("manifest.json")).unwrap());
    assert_eq!(json(&ok(&server, &["info", "--json", &url])), m);
    assert_eq!(m["counts"]["frames"], 9000, "{}", m["drops"]);
    let chained = live_chain(&m);
    let mut want = chained.clone();
    want.push("manifest.json".into());
    want.sort();
    assert_eq!(objects_under(&server, "cap"), want);
    let u = &m["upload"];
    assert_eq!(u["backlog_files"], 0, "{u}");
    assert_eq!(u["files"].as_u64().unwrap(), chained.len() as u64, "{u}");
    assert!(u["failures"].as_u64().unwrap() >= 1, "{u}");
    let n = json(&ok(
        &server,
        &["sql", "--json", &url, "SELECT count(*) AS n FROM packets"],
    ));
    assert_eq!(n[0]["n"], 9000);
    assert!(ok(&server, &["verify", &url]).contains("verified"));

    // Retention took local copies only: nothing is removed from the
    // dataset, and what is gone locally is in the bucket.
    assert!(m["files"]["pcap_removed"].is_null(), "{}", m["files"]);
    let listed: Vec<String> = m["files"]["pcap"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    // The oldest went (files sealed while the store was away are kept
    // past the limit until they are up; each manifest that reaches the
    // bucket runs the limits again, the capture's last one too).
    let here = local_files(&ds, "pcap");
    assert!(here.len() < listed.len(), "{here:?}");
    assert!(here.iter().all(|f| listed.contains(f)));
    assert!(!here.contains(&listed[0]), "{here:?}");

    // The per-second stats say what the upload did.
    let st = json(&ok(
        &server,
        &[
            "sql",
            "--json",
            &url,
            "SELECT sum(upload_bytes) AS b, sum(upload_failures) AS f, \
             max(upload_backlog_bytes) AS q, count(upload_bytes) AS n, count(*) AS rows FROM stats",
        ],
    ));
    let st = &st[0];
    assert!(st["b"].as_u64().unwrap() > 0, "{st}");
    assert!(st["f"].as_u64().unwrap() >= 1, "{st}");
    assert!(st["q"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(
        st["n"], st["rows"],
        "one worker: every row has the upload's"
    );
}

#[test]
fn recover_after_a_killed_capture_keeps_the_files_only_in_the_bucket() {
    let net = VethPair::new("i62-s3kill");
    let s = Scratch::new("s3-recover");
    let server = S3Server::start_in(&s.0, &net.b);
    server.make_bucket(BUCKET);
    let ds = s.join("ds");
    let url = format!("s3://{BUCKET}/k");
    let cap = capture_to(
        &server,
        &net.b,
        &[
            "-o",
            p(&ds),
            "-j",
            "1",
            "--rotate-size",
            "64k",
            "--upload",
            &url,
            "--duration",
            "90s",
            "udp",
        ],
    );
    send_udp(&net.a, 3000);
    // Uploaded files' local copies are deleted once a manifest naming
    // them is up.
    wait_until("local copies let go", Duration::from_secs(30), || {
        objects_under(&server, "k")
            .iter()
            .any(|k| k.starts_with("pcap/") && !ds.join(k).exists())
    });
    cap.signal(libc::SIGKILL);
    let _ = cap.wait(Duration::from_secs(30));
    let only_there: Vec<String> = objects_under(&server, "k")
        .into_iter()
        .filter(|k| k != "manifest.json" && !ds.join(k).exists())
        .collect();
    assert!(!only_there.is_empty());

    let r = weir_at(&server, &["recover", p(&ds)]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let m = json(&std::fs::read_to_string(ds.join("manifest.json")).unwrap());
    assert_eq!(m["capture"]["ended_by"], "killed (recovered)");
    // The files only the bucket holds stay in the dataset.
    let chained = live_chain(&m);
    for f in &only_there {
        assert!(chained.contains(f), "{f} left the chain");
    }
    let removed = m["integrity"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["op"] == "remove")
        .count();
    assert_eq!(removed, 0, "{}", m["integrity"]);
    // And the recovered dataset is in the bucket, whole: every frame has
    // one record (none built twice for the files it holds).
    assert_eq!(json(&ok(&server, &["info", "--json", &url])), m);
    assert!(ok(&server, &["verify", &url]).contains("verified"));
    let frames = m["counts"]["frames"].as_u64().unwrap();
    assert!(frames > 1000, "{frames}");
    let n = json(&ok(
        &server,
        &[
            "sql",
            "--json",
            &url,
            "SELECT count(*) AS n, (SELECT count(*) FROM (SELECT DISTINCT pcap_file, \
             pcap_offset FROM packets)) AS frames FROM packets",
        ],
    ));
    assert_eq!(n[0]["n"], frames);
    assert_eq!(n[0]["frames"], frames);
}

/// A tool's file under the cache the test command fills: `var`, else
/// `$WEIR_CACHE/under` (or `~/.cache/weir/under`).
fn cached(var: &str, under: &str) -> PathBuf {
    let p = std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("WEIR_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/weir")
                })
                .join(under)
        });
    assert!(
        p.exists(),
        "{} is missing: the test command (scripts/test.sh) installs it; or set {var}",
        p.display()
    );
    p
}

/// Rows as sorted text, numbers as integers (Spark sums to decimals).
fn rows_text(rows: &[Vec<Value>]) -> Vec<String> {
    let mut out: Vec<String> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| match v.as_f64() {
                    Some(f) if v.is_f64() => format!("{}", f as i64),
                    _ => v.to_string(),
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    out.sort();
    out
}

#[test]
fn duckdb_and_spark_read_the_bucket_and_give_weirs_answers() {
    tool("java");
    let s = Scratch::new("s3-others");
    let server = S3Server::start(&s.0);
    server.make_bucket(BUCKET);
    let t = trace(&s, "t", 30_000, 9);
    let url = format!("s3://{BUCKET}/o");
    convert_up(&server, &s.join("ds"), &url, &t, &["-j", "2"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tools/s3/read_bucket.py");
    let duckdb = cached("WEIR_DUCKDB_S3_PYTHON", "venv-duckdb-s3/bin/python");
    let jars = cached("WEIR_SPARK_S3_JARS", "spark-s3-jars");
    for engine in ["duckdb", "spark"] {
        let mut cmd = match engine {
            "duckdb" => std::process::Command::new(&duckdb),
            _ => python(),
        };
        cmd.envs(server.env())
            .env("WEIR_SPARK_S3_JARS", &jars)
            .args([script, engine, &url]);
        let r = run_bounded(cmd, Duration::from_secs(300));
        assert_eq!(r.code(), 0, "{engine}: {}", r.stderr());
        let got = json(r.stdout().trim());
        for table in ["packets", "flows"] {
            let sql = got[table]["weir"].as_str().unwrap();
            let cols: Vec<String> = got[table]["columns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_str().unwrap().to_string())
                .collect();
            let weirs: Vec<Vec<Value>> = json(&ok(&server, &["sql", "--json", &url, sql]))
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    cols.iter()
                        .map(|c| r.get(c).cloned().unwrap_or(Value::Null))
                        .collect()
                })
                .collect();
            let theirs: Vec<Vec<Value>> =
                serde_json::from_value(got[table]["rows"].clone()).unwrap();
            assert!(weirs.len() >= if table == "flows" { 10 } else { 1 });
            assert_eq!(rows_text(&theirs), rows_text(&weirs), "{engine}: {sql}");
        }
    }
}
