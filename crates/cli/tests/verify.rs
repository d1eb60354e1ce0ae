//! `weir verify`: a dataset's integrity record catches every change to its
//! files and manifest, a signature needs its key, and datasets made from
//! others name them by their seals.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

fn weir_ok(args: &[&str]) -> String {
    let mut cmd = weir();
    cmd.args(args);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir {args:?}: {}", r.stderr());
    r.stdout()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A dataset of two workers' files (packets and flows each), from a
/// generated trace.
fn dataset(s: &Scratch, name: &str, extra: &[&str]) -> PathBuf {
    let trace = s.join(&format!("{name}.pcap"));
    let seed = name.bytes().map(u64::from).sum::<u64>().to_string();
    weir_ok(&[
        "gen",
        "-w",
        p(&trace),
        "--model",
        "app",
        "-c",
        "20000",
        "--seed",
        &seed,
    ]);
    let ds = s.join(name);
    let mut args = vec!["convert", "-q", "--workers", "2", "-o", p(&ds), p(&trace)];
    args.extend_from_slice(extra);
    weir_ok(&args);
    ds
}

fn copy(from: &Path, to: &Path) {
    let r = std::process::Command::new("cp")
        .args(["-a", p(from), p(to)])
        .status()
        .unwrap();
    assert!(r.success());
}

fn files(ds: &Path, dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(ds.join(dir))
        .unwrap()
        .map(|e| format!("{dir}/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    v.sort();
    v
}

/// `weir verify --json`'s findings: (kind, path).
fn findings(ds: &Path) -> (i32, Vec<(String, String)>, String) {
    let (code, out) = verify(ds, &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let found = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["path"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    (code, found, out)
}

#[test]
fn an_untouched_dataset_verifies_and_every_change_is_caught() {
    let s = Scratch::new("verify-tamper");
    let ds = dataset(&s, "ds", &[]);
    assert_verifies(&ds);

    // The chain's digests are the files' BLAKE3, as b3sum gives them.
    let m = manifest(&ds);
    let entries = m["integrity"]["entries"].as_array().unwrap();
    let packets = files(&ds, "packets");
    let flows = files(&ds, "flows");
    assert!(packets.len() >= 2, "two workers' files: {packets:?}");
    assert_eq!(entries.len(), packets.len() + flows.len());
    for e in entries {
        let mut cmd = tool("b3sum");
        cmd.arg(ds.join(e["path"].as_str().unwrap()));
        let out = run_bounded(cmd, Duration::from_secs(30)).stdout();
        assert_eq!(out.split_whitespace().next(), e["blake3"].as_str(), "{e}");
    }

    type Change = fn(&Path, &[String]);
    let changes: [(&str, Change, &str, usize); 8] = [
        (
            "flip one byte",
            |d, f| {
                let path = d.join(&f[0]);
                let mut b = std::fs::read(&path).unwrap();
                b[100] ^= 1;
                std::fs::write(&path, b).unwrap();
            },
            "altered",
            0,
        ),
        (
            "truncate",
            |d, f| {
                let path = d.join(&f[0]);
                let len = std::fs::metadata(&path).unwrap().len();
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(len - 10)
                    .unwrap();
            },
            "truncated",
            0,
        ),
        (
            "delete",
            |d, f| std::fs::remove_file(d.join(&f[0])).unwrap(),
            "missing",
            0,
        ),
        (
            "rename",
            |d, f| std::fs::rename(d.join(&f[0]), d.join("packets/w009-00000.parquet")).unwrap(),
            "missing",
            0,
        ),
        (
            "swap two files",
            |d, f| {
                let (a, b) = (d.join(&f[0]), d.join(&f[1]));
                let tmp = d.join("swap");
                std::fs::rename(&a, &tmp).unwrap();
                std::fs::rename(&b, &a).unwrap();
                std::fs::rename(&tmp, &b).unwrap();
            },
            "reordered",
            0,
        ),
        (
            "add a file",
            |d, f| {
                std::fs::copy(d.join(&f[0]), d.join("packets/w000-99999.parquet"))
                    .map(|_| ())
                    .unwrap()
            },
            "added",
            usize::MAX,
        ),
        (
            "edit the manifest",
            |d, _| {
                let path = d.join("manifest.json");
                let mut m: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                let frames = m["counts"]["frames"].as_u64().unwrap();
                m["counts"]["frames"] = (frames - 1).into();
                std::fs::write(&path, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
            },
            "seal",
            usize::MAX,
        ),
        (
            "edit a digest in the chain",
            |d, _| {
                let path = d.join("manifest.json");
                let mut m: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                m["integrity"]["entries"][0]["bytes"] = 1.into();
                std::fs::write(&path, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
            },
            "chain",
            usize::MAX,
        ),
    ];
    for (i, (what, change, kind, file)) in changes.into_iter().enumerate() {
        let copy_ds = s.join(&format!("changed-{i}"));
        copy(&ds, &copy_ds);
        change(&copy_ds, &packets);
        let (code, found, out) = findings(&copy_ds);
        assert_eq!(code, 1, "{what}: weir verify must fail:\n{out}");
        assert!(
            found
                .iter()
                .any(|(k, path)| k == kind && (file == usize::MAX || *path == packets[file])),
            "{what}: expected a {kind} finding:\n{out}"
        );
    }
}

#[test]
fn a_signature_needs_its_key_and_a_kept_seal_catches_a_rewritten_record() {
    let s = Scratch::new("verify-sign");
    let key = s.join("key");
    let other = s.join("other");
    std::fs::write(&key, (0..32u8).collect::<Vec<_>>()).unwrap();
    std::fs::write(&other, (100..132u8).collect::<Vec<_>>()).unwrap();
    let ds = dataset(&s, "ds", &["--sign-key", p(&key)]);

    let (code, out) = verify(&ds, &["--key", p(&key)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("signature  valid"), "{out}");
    let (code, out) = verify(&ds, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("not checked"), "{out}");
    let (code, out) = verify(&ds, &["--key", p(&other)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("not with the key given"), "{out}");

    // Someone rewrites a file and re-runs the chain without the key (here:
    // recover, which starts a new chain): the signature is gone.
    let changed = s.join("changed");
    copy(&ds, &changed);
    let m = manifest(&ds);
    let seal = m["integrity"]["seal"].as_str().unwrap().to_string();
    let target = files(&changed, "packets")[0].clone();
    std::fs::remove_file(changed.join(&target)).unwrap();
    std::fs::write(changed.join(".space-reserve"), b"").unwrap();
    weir_ok(&["recover", p(&changed)]);
    let (code, out) = verify(&changed, &[]);
    assert_eq!(code, 0, "a fresh chain verifies on its own:\n{out}");
    let (code, out) = verify(&changed, &["--key", p(&key)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("is not signed"), "{out}");
    let (code, out) = verify(&changed, &["--seal", &seal]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("not the"), "{out}");
    let (code, out) = verify(&ds, &["--seal", &seal]);
    assert_eq!(code, 0, "{out}");
    // The new chain names the old seal.
    let m = manifest(&changed);
    assert_eq!(m["integrity"]["inputs"][0]["by"], "recover");
    assert_eq!(m["integrity"]["inputs"][0]["seal"], seal.as_str());
}

#[test]
fn merged_and_anonymised_copies_have_chains_that_name_their_inputs() {
    let s = Scratch::new("verify-derived");
    let one = dataset(&s, "one", &[]);
    let two = dataset(&s, "two", &[]);
    let merged = s.join("merged");
    weir_ok(&["merge", "-q", "-o", p(&merged), p(&one), p(&two)]);
    assert_verifies(&merged);
    let m = manifest(&merged);
    let inputs = m["integrity"]["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 2);
    for (input, ds) in inputs.iter().zip([&one, &two]) {
        assert_eq!(input["by"], "merge");
        assert_eq!(input["seal"], manifest(ds)["integrity"]["seal"]);
    }

    let key = s.join("anon.key");
    weir_ok(&["anonymize", "--new-key", p(&key)]);
    let anon = s.join("anon");
    weir_ok(&["anonymize", p(&one), "-o", p(&anon), "--key", p(&key)]);
    assert_verifies(&anon);
    let m = manifest(&anon);
    assert_eq!(m["integrity"]["inputs"][0]["by"], "anonymize");
    assert_eq!(m["integrity"]["inputs"][0]["path"], "(anonymized)");
    assert_eq!(
        m["integrity"]["inputs"][0]["seal"],
        manifest(&one)["integrity"]["seal"]
    );
}
