//! RPC/NFS transactions from the shared real NFS traces (nfs-ganesha and
//! libnfs, ../shared/data/nfs), checked against tshark's own service
//! response time statistics (`-z rpc,srt`) on the same files.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// The trace, decompressed into the test's scratch directory (tshark 4.0
/// does not read zstd).
fn trace(s: &Scratch, name: &str) -> PathBuf {
    let src = shared_data().join("nfs").join(format!("{name}.pcap.zst"));
    let out = s.join(&format!("{name}.pcap"));
    let mut z = tool("zstd");
    z.args(["-q", "-d", "--long=27", "-o"]).arg(&out).arg(&src);
    let r = run_bounded(z, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "zstd: {}", r.stderr());
    out
}

fn convert(pcap: &Path, ds: &Path, extra: &[&str]) {
    let mut c = weir();
    c.arg("convert")
        .arg(pcap)
        .arg("-o")
        .arg(ds)
        .arg("-q")
        .args(extra);
    let r = run_bounded(c, Duration::from_secs(300));
    assert_eq!(r.code(), 0, "weir convert: {}", r.stderr());
}

fn sql(ds: &Path, q: &str) -> Vec<Value> {
    let mut c = weir();
    c.arg("sql").arg(ds).arg(q).arg("--json");
    let r = run_bounded(c, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir sql {q}: {}", r.stderr());
    serde_json::from_str::<Value>(&r.stdout())
        .unwrap()
        .as_array()
        .cloned()
        .unwrap()
}

fn num(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

/// tshark's SRT table for NFS version `v`: procedure -> (calls, avg s,
/// sum s), as printed (six decimals).
fn tshark_srt(pcap: &Path, v: u32) -> BTreeMap<String, (u64, f64, f64)> {
    let mut t = tool("tshark");
    t.args(["-q", "-z", &format!("rpc,srt,100003,{v}"), "-r"])
        .arg(pcap);
    let r = run_bounded(t, Duration::from_secs(300));
    assert_eq!(r.code(), 0, "tshark: {}", r.stderr());
    let mut out = BTreeMap::new();
    for line in r.stdout().lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Index Procedure Calls Min Max Avg Sum
        if f.len() == 7 && f[0].parse::<u32>().is_ok() {
            out.insert(
                f[1].to_string(),
                (
                    f[2].parse().unwrap(),
                    f[5].parse().unwrap(),
                    f[6].parse().unwrap(),
                ),
            );
        }
    }
    assert!(!out.is_empty(), "no SRT table in: {}", r.stdout());
    out
}

fn check_against_tshark(pcap: &Path, ds: &Path, v: u32) {
    let theirs = tshark_srt(pcap, v);
    let rows = sql(
        ds,
        &format!(
            "SELECT procedure_name AS p, count(*) AS calls, sum(latency_ns) AS sum_ns \
             FROM rpc WHERE program = 100003 AND version = {v} AND latency_ns IS NOT NULL \
             GROUP BY procedure_name"
        ),
    );
    let ours: BTreeMap<String, (u64, f64)> = rows
        .iter()
        .map(|r| {
            (
                r["p"].as_str().unwrap().to_string(),
                (num(&r["calls"]) as u64, num(&r["sum_ns"]) / 1e9),
            )
        })
        .collect();
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "procedures"
    );
    for (p, (calls, avg, sum)) in &theirs {
        let (n, s) = ours[p];
        assert_eq!(n, *calls, "NFSv{v} {p}: calls");
        // tshark rounds to microseconds.
        assert!(
            (s - sum).abs() <= 0.6e-6,
            "NFSv{v} {p}: sum {s} vs tshark {sum}"
        );
        let mean = s / n as f64;
        assert!(
            (mean - avg).abs() <= 0.6e-6,
            "NFSv{v} {p}: mean {mean} vs tshark {avg}"
        );
    }
}

#[test]
fn nfsv3_transactions_match_tshark() {
    let s = Scratch::new("rpc-nfsv3");
    let pcap = trace(&s, "nfsv3");
    let ds = s.join("ds");
    convert(&pcap, &ds, &[]);
    check_against_tshark(&pcap, &ds, 3);
    // Every call has its reply (the trace's README, from tshark's
    // request/reply links): 133,150 of each, over TCP and UDP.
    let m = manifest(&ds);
    let c = &m["rpc"]["counters"];
    for k in ["calls", "replies", "matched"] {
        assert_eq!(c[k], 133_150, "{k}: {c}");
    }
    for k in [
        "calls_without_reply",
        "replies_without_call",
        "gaps",
        "malformed",
    ] {
        assert_eq!(c[k], 0, "{k}: {c}");
    }
    assert_eq!(m["rpc"]["mode"], "auto");
    // NFS status per the README: 373 failed LOOKUPs, 149 failed MKDIRs.
    let errs = sql(
        &ds,
        "SELECT op_name, count(*) AS n FROM nfs WHERE program = 100003 AND status <> 0 \
         GROUP BY op_name ORDER BY op_name",
    );
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(
        (errs[0]["op_name"].as_str(), num(&errs[0]["n"])),
        (Some("LOOKUP"), 373.0)
    );
    assert_eq!(
        (errs[1]["op_name"].as_str(), num(&errs[1]["n"])),
        (Some("MKDIR"), 149.0)
    );
    // MOUNT's MNT gives the export's root handle (libnfs also mounts
    // subdirectories); LOOKUPs start from it.
    let mnt = sql(
        &ds,
        "SELECT DISTINCT res_fh FROM nfs WHERE program = 100005 AND op_name = 'MNT' \
         AND name = '/export'",
    );
    assert_eq!(mnt.len(), 1, "{mnt:?}");
    let from_root = sql(
        &ds,
        "SELECT count(*) AS n FROM nfs WHERE op_name = 'LOOKUP' AND fh IN \
         (SELECT res_fh FROM nfs WHERE op_name = 'MNT' AND name = '/export')",
    );
    assert!(num(&from_root[0]["n"]) > 1000.0);
    // The analysis runs and draws.
    let png = s.join("rpc.png");
    let mut a = weir();
    a.arg("analyze").arg(&ds).arg("rpc").arg("--plot").arg(&png);
    let r = run_bounded(a, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stdout().contains("LOOKUP"), "{}", r.stdout());
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
}

#[test]
fn nfsv4_compounds_match_tshark() {
    let s = Scratch::new("rpc-nfsv4");
    let pcap = trace(&s, "nfsv4");
    let ds = s.join("ds");
    convert(&pcap, &ds, &["--rpc"]);
    check_against_tshark(&pcap, &ds, 4);
    let c = &manifest(&ds)["rpc"]["counters"];
    assert_eq!(
        (c["calls"].as_u64(), c["matched"].as_u64()),
        (Some(101_444), Some(101_444))
    );
    // Operations inside the COMPOUNDs, counted in calls and in replies,
    // as the trace's README has them from tshark.
    let ops = sql(
        &ds,
        "SELECT op_name, count(*) AS calls, count(status) AS replies, \
         sum(CASE WHEN status <> 0 THEN 1 ELSE 0 END) AS errors \
         FROM nfs WHERE version = 4 GROUP BY op_name",
    );
    let get = |name: &str| -> (f64, f64, f64) {
        let r = ops
            .iter()
            .find(|r| r["op_name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {ops:?}"));
        (num(&r["calls"]), num(&r["replies"]), num(&r["errors"]))
    };
    assert_eq!(get("PUTFH"), (102_115.0, 102_115.0, 0.0));
    assert_eq!(get("LOOKUP"), (83_754.0, 83_754.0, 354.0));
    assert_eq!(get("GETATTR"), (28_466.0, 28_112.0, 0.0));
    assert_eq!(get("GETFH"), (20_674.0, 20_320.0, 0.0));
    assert_eq!(get("WRITE"), (61_471.0, 61_471.0, 0.0));
    assert_eq!(get("CREATE"), (1_069.0, 1_069.0, 139.0));
    assert_eq!(get("OPEN"), (5_744.0, 5_744.0, 0.0));
    assert_eq!(get("READ"), (2_466.0, 2_466.0, 0.0));
    // WRITE's bytes: the v4 client wrote in 3,584-byte chunks.
    let w = sql(
        &ds,
        "SELECT max(count) AS m, sum(res_count) AS s FROM nfs WHERE op_name = 'WRITE'",
    );
    assert_eq!(num(&w[0]["m"]), 3584.0);
}

#[test]
fn no_rpc_writes_no_tables() {
    let s = Scratch::new("rpc-off");
    let pcap = trace(&s, "nfsv4");
    let ds = s.join("ds");
    convert(&pcap, &ds, &["--no-rpc"]);
    assert!(manifest(&ds).get("rpc").is_none());
    assert!(!ds.join("rpc").exists());
    // The tables are still there to query, empty.
    let n = sql(&ds, "SELECT count(*) AS n FROM rpc");
    assert_eq!(num(&n[0]["n"]), 0.0);
}
