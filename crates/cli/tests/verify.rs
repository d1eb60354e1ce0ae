//! `weir verify`: a dataset's integrity record catches every change to its
//! files and manifest, a signature needs its key (and OpenSSH's
//! ssh-keygen checks it too), and datasets made from others name them by
//! their seals.

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
    // The app mix also gives the dns, tls and http tables a file each.
    let app: usize = ["dns", "tls", "http"]
        .iter()
        .map(|t| files(&ds, t).len())
        .sum();
    assert_eq!(entries.len(), packets.len() + flows.len() + app);
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
    ssh_key(&key);
    ssh_key(&other);
    let ds = dataset(&s, "ds", &["--sign-key", p(&key)]);
    let public = std::fs::read_to_string(s.join("key.pub")).unwrap();
    let allowed = s.join("allowed_signers");
    std::fs::write(
        &allowed,
        format!("tester@weir namespaces=\"weir-dataset\" {public}"),
    )
    .unwrap();

    let (code, out) = verify(&ds, &["--public-key", p(&s.join("key.pub"))]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("signature  valid"), "{out}");
    let (code, out) = verify(&ds, &["--allowed-signers", p(&allowed)]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("tester@weir"), "{out}");
    let (code, out) = verify(&ds, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("not checked"), "{out}");
    let (code, out) = verify(&ds, &["--public-key", p(&s.join("other.pub"))]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("not among the allowed signers"), "{out}");

    // OpenSSH checks the same signature file against the seal's line on
    // its own, and its own signature of that line is the same file
    // (Ed25519 is deterministic).
    let seal_line = s.join("seal");
    let m = manifest(&ds);
    let seal = m["integrity"]["seal"].as_str().unwrap().to_string();
    std::fs::write(&seal_line, format!("{seal}\n")).unwrap();
    let sig = ds.join("seal.sig");
    let (code, out) = ssh_verify(&allowed, "tester@weir", &sig, &seal_line);
    assert_eq!(code, 0, "ssh-keygen -Y verify: {out}");
    let mut cmd = tool("ssh-keygen");
    cmd.args(["-Y", "sign", "-q", "-n", "weir-dataset", "-f"])
        .arg(&key)
        .arg(&seal_line);
    let r = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(r.code(), 0, "ssh-keygen -Y sign: {}", r.stderr());
    assert_eq!(
        std::fs::read_to_string(s.join("seal.sig")).unwrap(),
        std::fs::read_to_string(&sig).unwrap(),
        "weir's signature is the one ssh-keygen makes"
    );
    assert_eq!(
        m["integrity"]["signature"]["key"].as_str(),
        Some(ssh_fingerprint(&s.join("key.pub")).as_str())
    );

    // One figure of the manifest changed: weir verify fails, and so does
    // ssh-keygen given the seal weir verify recomputes.
    let edited = s.join("edited");
    copy(&ds, &edited);
    let mut em = manifest(&edited);
    em["files"]["packets"][0]["rows"] = 1.into();
    std::fs::write(
        edited.join("manifest.json"),
        serde_json::to_vec_pretty(&em).unwrap(),
    )
    .unwrap();
    let (code, out) = verify(&edited, &["--allowed-signers", p(&allowed), "--json"]);
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let recomputed = v["seal"].as_str().unwrap();
    assert_ne!(recomputed, seal);
    std::fs::write(&seal_line, format!("{recomputed}\n")).unwrap();
    let (code, out) = ssh_verify(
        &allowed,
        "tester@weir",
        &edited.join("seal.sig"),
        &seal_line,
    );
    assert_ne!(code, 0, "ssh-keygen must refuse the changed seal: {out}");

    // A key file that is not an OpenSSH Ed25519 key is refused by name.
    let raw = s.join("raw-key");
    std::fs::write(&raw, (0..32u8).collect::<Vec<_>>()).unwrap();
    let mut cmd = weir();
    cmd.args(["recover", p(&ds), "--sign-key", p(&raw)]);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_ne!(r.code(), 0);
    assert!(
        r.stderr().contains("--sign-key") && r.stderr().contains("ssh-keygen -t ed25519"),
        "{}",
        r.stderr()
    );
    // A public key that is not one: the dataset cannot be checked (2).
    let (code, out) = verify(&ds, &["--public-key", p(&raw)]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--public-key"), "{out}");

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
    let (code, out) = verify(&changed, &["--public-key", p(&s.join("key.pub"))]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("is not signed"), "{out}");
    assert!(
        !changed.join("seal.sig").exists(),
        "an unsigned dataset has no seal.sig"
    );
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
