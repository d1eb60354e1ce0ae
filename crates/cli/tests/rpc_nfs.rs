//! RPC/NFS transactions from real NFS traces (nfs-ganesha and libnfs,
//! recorded by tests/nfs/make-traces.sh), checked against tshark's own
//! reading of the same files: its service response time statistics
//! (`-z rpc,srt`), its call/reply links, statuses and NFSv4 operations.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::Value;

/// The trace, decompressed into the test's scratch directory (tshark 4.0
/// does not read zstd).
fn trace(s: &Scratch, name: &str) -> PathBuf {
    let src = nfs_trace(name);
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

/// What tshark makes of every ONC RPC message of a trace (two passes, so
/// that calls know their replies).
#[derive(Default, Debug)]
struct TsharkRpc {
    calls: u64,
    replies: u64,
    /// Calls tshark links to a reply.
    matched: u64,
    /// NFSv3 replies with a status other than NFS3_OK, per procedure.
    v3_errors: BTreeMap<u64, u64>,
    /// NFSv3 procedures with at least one reply.
    v3_answered: std::collections::BTreeSet<u64>,
    /// NFSv4 operations per opcode: in calls, in replies, failed. The
    /// NULL procedure counts as operation 0 in calls only, as weir's nfs
    /// table holds it (a row with op 0 and no status).
    v4_ops: BTreeMap<u64, [u64; 3]>,
}

fn tshark_rpc(pcap: &Path) -> TsharkRpc {
    let mut t = tool("tshark");
    t.args(["-2", "-n", "-Y", "rpc", "-T", "fields"])
        .args(["-E", "occurrence=a", "-E", "aggregator=,"])
        .args([
            "-e",
            "frame.number",
            "-e",
            "rpc.msgtyp",
            "-e",
            "rpc.repframe",
        ])
        .args(["-e", "nfs.procedure_v3", "-e", "nfs.status3"])
        .args([
            "-e",
            "nfs.opcode",
            "-e",
            "nfs.nfsstat4",
            "-e",
            "nfs.procedure_v4",
            "-r",
        ])
        .arg(pcap);
    let r = run_bounded(t, Duration::from_secs(300));
    assert_eq!(r.code(), 0, "tshark: {}", r.stderr());
    let mut out = TsharkRpc::default();
    let list = |f: &str| -> Vec<u64> {
        f.split(',')
            .filter(|v| !v.is_empty())
            .map(|v| v.parse().unwrap_or_else(|_| panic!("tshark gave {v:?}")))
            .collect()
    };
    for line in r.stdout().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 8, "{line}");
        let types = list(f[1]);
        let calls = types.iter().filter(|&&t| t == 0).count() as u64;
        out.calls += calls;
        out.replies += types.len() as u64 - calls;
        out.matched += list(f[2]).len() as u64;
        let (procs, st3, ops, st4) = (list(f[3]), list(f[4]), list(f[5]), list(f[6]));
        let reply = types.iter().all(|&t| t == 1);
        if !reply {
            let nulls = list(f[7]).iter().filter(|&&p| p == 0).count() as u64;
            if nulls > 0 {
                out.v4_ops.entry(0).or_default()[0] += nulls;
            }
        }
        if reply && st3.is_empty() && procs == [0] {
            // NULL: a reply without a status.
            out.v3_answered.insert(0);
        }
        if reply && !st3.is_empty() {
            // One reply a frame: the clients wait for each answer.
            assert_eq!(procs.len(), st3.len(), "frame {line}");
            for (p, s) in procs.iter().zip(&st3) {
                out.v3_answered.insert(*p);
                if *s != 0 {
                    *out.v3_errors.entry(*p).or_default() += 1;
                }
            }
        }
        if !reply {
            for op in &ops {
                out.v4_ops.entry(*op).or_default()[0] += 1;
            }
        } else if !ops.is_empty() {
            // The COMPOUND's status, then one per operation done.
            assert_eq!(st4.len(), ops.len() + 1, "frame {line}");
            for (op, s) in ops.iter().zip(&st4[1..]) {
                let e = out.v4_ops.entry(*op).or_default();
                e[1] += 1;
                e[2] += u64::from(*s != 0);
            }
        }
    }
    out
}

/// The manifest's call/reply counters against tshark's links: every call
/// tshark pairs with a reply, weir pairs too.
fn check_counters_against_tshark(ds: &Path, theirs: &TsharkRpc) {
    let m = manifest(ds);
    let c = &m["rpc"]["counters"];
    assert!(theirs.calls > 0, "{theirs:?}");
    assert_eq!(c["calls"], theirs.calls, "calls: {c}");
    assert_eq!(c["replies"], theirs.replies, "replies: {c}");
    assert_eq!(c["matched"], theirs.matched, "matched: {c}");
    assert_eq!(
        c["calls_without_reply"],
        theirs.calls - theirs.matched,
        "{c}"
    );
    assert_eq!(
        c["replies_without_call"],
        theirs.replies - theirs.matched,
        "{c}"
    );
    // The recording lost nothing (tcpdump dropped no frame).
    for k in ["gaps", "malformed"] {
        assert_eq!(c[k], 0, "{k}: {c}");
    }
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

/// `weir analyze DATASETS rpc --json` (one pass over the columns) against
/// the analysis's own SQL run by `weir sql` on the same datasets, with the
/// same `flags`: the named tables equal, row for row.
fn check_pass_against_sql(datasets: &[&Path], tables: &[&str], flags: &[&str]) -> Value {
    check_pass_against_sql_limit(datasets, tables, flags, None)
}

/// The same with `weir analyze rpc --limit N` (handles; the default if
/// `None`).
/// Returns the analysis's report.
fn check_pass_against_sql_limit(
    datasets: &[&Path],
    tables: &[&str],
    flags: &[&str],
    limit: Option<usize>,
) -> Value {
    let mut a = weir();
    a.arg("analyze")
        .args(datasets)
        .args(["rpc", "--json"])
        .args(flags);
    if let Some(n) = limit {
        a.args(["--limit", &n.to_string()]);
    }
    let r = run_bounded(a, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir analyze rpc: {}", r.stderr());
    let report: Value = serde_json::from_str(&r.stdout()).unwrap();
    let handles = analyze::analyses::fill(
        analyze::rpc::RPC_HANDLES_SQL,
        &[(
            "limit",
            analyze::analyses::sql_limit(limit.unwrap_or(analyze::rpc::TOP_HANDLES)).to_string(),
        )],
    )
    .unwrap();
    for (name, q) in [
        ("procedures", analyze::rpc::RPC_PROCEDURES_SQL),
        ("latency", analyze::rpc::RPC_LATENCY_SQL),
        ("clients", analyze::rpc::RPC_CLIENTS_SQL),
        ("handles", handles.as_str()),
    ] {
        if !tables.contains(&name) {
            continue;
        }
        let mut c = weir();
        c.arg("sql").args(datasets).arg(q).arg("--json").args(flags);
        let r = run_bounded(c, Duration::from_secs(120));
        assert_eq!(r.code(), 0, "weir sql ({name}): {}", r.stderr());
        let want: Value = serde_json::from_str(&r.stdout()).unwrap();
        let got = &report[name];
        assert!(
            want.as_array().is_some_and(|w| !w.is_empty()),
            "{name} {flags:?}: the SQL gave no rows"
        );
        assert_eq!(
            got, &want,
            "{name} {flags:?}: the pass differs from the SQL"
        );
    }
    report
}

#[test]
fn nfsv3_transactions_match_tshark() {
    let s = Scratch::new("rpc-nfsv3");
    let pcap = trace(&s, "nfsv3");
    let ds = s.join("ds");
    convert(&pcap, &ds, &[]);
    check_against_tshark(&pcap, &ds, 3);
    let theirs = tshark_rpc(&pcap);
    check_counters_against_tshark(&ds, &theirs);
    assert_eq!(manifest(&ds)["rpc"]["mode"], "auto");
    // Every procedure answered in the trace has its latency (the recorded
    // trace holds all 22: tests/nfs sends each).
    let procs = sql(
        &ds,
        "SELECT DISTINCT procedure FROM rpc WHERE program = 100003 AND version = 3 \
         AND latency_ns IS NOT NULL ORDER BY procedure",
    );
    let procs: Vec<u64> = procs.iter().map(|r| num(&r["procedure"]) as u64).collect();
    let answered: Vec<u64> = theirs.v3_answered.iter().copied().collect();
    assert_eq!(procs, answered, "NFSv3 procedures with a reply");
    assert!(procs.len() >= 15, "only procedures {procs:?}");
    // Failed calls (the workload makes some on purpose), per procedure, as
    // tshark reads the replies' status.
    let errs: BTreeMap<u64, u64> = sql(
        &ds,
        "SELECT op, count(*) AS n FROM nfs WHERE program = 100003 AND version = 3 \
         AND status <> 0 GROUP BY op",
    )
    .iter()
    .map(|r| (num(&r["op"]) as u64, num(&r["n"]) as u64))
    .collect();
    assert!(!errs.is_empty());
    assert_eq!(errs, theirs.v3_errors, "NFSv3 errors per procedure");
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
    assert!(num(&from_root[0]["n"]) > 10.0);
    // The analysis runs and draws.
    let png = s.join("rpc.png");
    let mut a = weir();
    a.arg("analyze").arg(&ds).arg("rpc").arg("--plot").arg(&png);
    let r = run_bounded(a, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stdout().contains("LOOKUP"), "{}", r.stdout());
    assert!(std::fs::metadata(&png).unwrap().len() > 10_000);
    // Its per-client bytes agree with the nfs table summed directly.
    let mut a = weir();
    a.arg("analyze").arg(&ds).arg("rpc").arg("--json");
    let r = run_bounded(a, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let report: Value = serde_json::from_str(&r.stdout()).unwrap();
    let clients = report["clients"].as_array().unwrap();
    assert_eq!(clients.len(), 1, "{clients:?}");
    let direct = sql(
        &ds,
        "SELECT (SELECT count(*) FROM rpc WHERE program = 100003) AS calls, \
         sum(CASE WHEN op_name = 'READ' THEN res_count ELSE 0 END) AS bytes_read, \
         sum(CASE WHEN op_name = 'WRITE' THEN res_count ELSE 0 END) AS bytes_written, \
         sum(CASE WHEN op_name = 'READ' THEN 1 ELSE 0 END) AS reads, \
         sum(CASE WHEN op_name = 'WRITE' THEN 1 ELSE 0 END) AS writes \
         FROM nfs WHERE program = 100003",
    );
    for k in ["calls", "bytes_read", "bytes_written", "reads", "writes"] {
        assert_eq!(num(&clients[0][k]), num(&direct[0][k]), "{k}");
    }
    assert!(num(&clients[0]["bytes_read"]) > 1e6);
    // The analysis's one pass gives what its SQL does, whole and in a
    // window that cuts calls off from their replies.
    let all = ["procedures", "latency", "clients", "handles"];
    let top20 = check_pass_against_sql(&[&ds], &all, &[]);
    check_pass_against_sql(&[&ds], &all, &["--from", "+2s", "--to", "+9.5s", "-j", "1"]);
    // --limit 0 lists every handle, as it does every flow.
    let every = check_pass_against_sql_limit(&[&ds], &["handles"], &[], Some(0));
    let n = |r: &Value| r["handles"].as_array().map_or(0, |a| a.len());
    assert_eq!(n(&top20), 20);
    assert!(n(&every) > 20, "--limit 0 gave {} handles", n(&every));
    falls_back_to_sql_on_files_it_cannot_scan(&s, &ds);
}

/// A copy of `ds` whose rpc files another writer re-encoded, latency_ns
/// in BYTE_STREAM_SPLIT (valid Parquet that weir's column scan does not
/// read): the analysis runs its SQL instead and gives the same report.
fn falls_back_to_sql_on_files_it_cannot_scan(s: &Scratch, ds: &Path) {
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::basic::Encoding;
    use parquet::file::properties::WriterProperties;
    let copy = s.join("ds-foreign");
    let mut cp = std::process::Command::new("cp");
    cp.arg("-r").arg(ds).arg(&copy);
    assert_eq!(run_bounded(cp, Duration::from_secs(60)).code(), 0);
    for e in std::fs::read_dir(copy.join("rpc")).unwrap().flatten() {
        let path = e.path();
        let batches: Vec<_> =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
                .unwrap()
                .build()
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
        let col = parquet::schema::types::ColumnPath::from("latency_ns");
        let props = WriterProperties::builder()
            .set_column_dictionary_enabled(col.clone(), false)
            .set_column_encoding(col, Encoding::BYTE_STREAM_SPLIT)
            .build();
        let out = std::fs::File::create(&path).unwrap();
        let mut w = ArrowWriter::try_new(out, batches[0].schema(), Some(props)).unwrap();
        batches.iter().for_each(|b| w.write(b).unwrap());
        w.close().unwrap();
        assert!(!store::decode::scan::readable(&path, &["latency_ns"]).unwrap());
    }
    let report = |d: &Path| {
        let mut a = weir();
        a.arg("analyze").arg(d).arg("rpc").arg("--json");
        let r = run_bounded(a, Duration::from_secs(120));
        assert_eq!(r.code(), 0, "{}", r.stderr());
        serde_json::from_str::<Value>(&r.stdout()).unwrap()
    };
    assert_eq!(report(&copy), report(ds));
}

#[test]
fn nfsv4_compounds_match_tshark() {
    let s = Scratch::new("rpc-nfsv4");
    let pcap = trace(&s, "nfsv4");
    let ds = s.join("ds");
    convert(&pcap, &ds, &["--rpc"]);
    check_against_tshark(&pcap, &ds, 4);
    let theirs = tshark_rpc(&pcap);
    check_counters_against_tshark(&ds, &theirs);
    // Operations inside the COMPOUNDs, counted in calls, in replies (an
    // operation after a failed one is not done) and failed, as tshark
    // counts them.
    let ops: BTreeMap<u64, [u64; 3]> = sql(
        &ds,
        "SELECT op, count(*) AS calls, count(status) AS replies, \
         sum(CASE WHEN status <> 0 THEN 1 ELSE 0 END) AS errors \
         FROM nfs WHERE version = 4 GROUP BY op",
    )
    .iter()
    .map(|r| {
        (
            num(&r["op"]) as u64,
            [&r["calls"], &r["replies"], &r["errors"]].map(|v| num(v) as u64),
        )
    })
    .collect();
    assert_eq!(
        ops, theirs.v4_ops,
        "NFSv4 operations: [calls, replies, failed]"
    );
    // A mix: the usual operations of a v4.0 client, some failing.
    for op in [3, 9, 10, 15, 18, 22, 25, 38] {
        assert!(ops.contains_key(&op), "no operation {op} in {ops:?}");
    }
    assert!(ops.values().any(|v| v[2] > 0), "{ops:?}");
    // The analysis's one pass gives what its SQL does (handles named
    // through GETFH after LOOKUP/OPEN/CREATE), whole and in a window.
    let all = ["procedures", "latency", "clients", "handles"];
    check_pass_against_sql(&[&ds], &all, &[]);
    check_pass_against_sql(&[&ds], &all, &["--from", "+3s", "--to", "+8s"]);
    // Two datasets: ids are each dataset's own, so the SQL's id joins
    // (clients, handles) pair calls across them; the rest must agree.
    let v3 = s.join("v3");
    convert(&trace(&s, "nfsv3"), &v3, &[]);
    check_pass_against_sql(&[&ds, &v3], &["procedures", "latency"], &[]);
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

/// Everything a dataset says, as text: every table in full (addresses and
/// MACs formatted), and the manifest.
fn dump(ds: &Path) -> String {
    let mut all = std::fs::read_to_string(ds.join("manifest.json")).unwrap();
    for q in [
        "SELECT ip_text(ip_src) AS a, ip_text(ip_dst) AS b, mac_text(eth_src) AS c, \
         mac_text(eth_dst) AS d, * FROM packets ORDER BY ts, ip_id",
        "SELECT ip_text(client) AS a, ip_text(server) AS b, * FROM rpc ORDER BY id",
        "SELECT * FROM nfs ORDER BY rpc_id, op_index",
    ] {
        let mut c = weir();
        c.arg("sql").arg(ds).arg(q).arg("--csv");
        let r = run_bounded(c, Duration::from_secs(120));
        assert_eq!(r.code(), 0, "{q}: {}", r.stderr());
        all.push_str(&r.stdout());
    }
    all
}

fn anonymize(ds: &Path, out: &Path, key: &Path) {
    let mut c = weir();
    c.arg("anonymize")
        .arg(ds)
        .arg("-o")
        .arg(out)
        .arg("--key")
        .arg(key);
    let r = run_bounded(c, Duration::from_secs(300));
    assert_eq!(r.code(), 0, "weir anonymize: {}", r.stderr());
}

#[test]
fn anonymized_copies_keep_structure_and_hide_addresses_macs_and_names() {
    let s = Scratch::new("rpc-anon");
    let pcap = trace(&s, "nfsv3");
    let ds = s.join("ds");
    convert(&pcap, &ds, &[]);
    let (k1, k2) = (s.join("k1"), s.join("k2"));
    for k in [&k1, &k2] {
        let mut c = weir();
        c.arg("anonymize").arg("--new-key").arg(k);
        assert_eq!(run_bounded(c, Duration::from_secs(30)).code(), 0);
    }
    let (a1, a2, b) = (s.join("a1"), s.join("a2"), s.join("b"));
    anonymize(&ds, &a1, &k1);
    anonymize(&ds, &a2, &k1);
    anonymize(&ds, &b, &k2);
    let original = dump(&ds);
    let (one, two, other) = (dump(&a1), dump(&a2), dump(&b));
    // One key, one mapping; another key, another.
    assert_eq!(one, two);
    assert_ne!(one, other);
    assert!(!a1.join("pcap").exists());
    // What must not survive: the addresses (printed as text), the MACs,
    // file names and paths, the hashed handles.
    let mut secrets: Vec<String> = vec![
        "10.88.0.1".into(),
        "10.88.0.2".into(),
        "zero001.img".into(),
        "/export".into(),
    ];
    for r in sql(&ds, "SELECT DISTINCT mac_text(eth_src) AS m FROM packets") {
        secrets.push(r["m"].as_str().unwrap().to_string());
    }
    for r in sql(
        &ds,
        "SELECT CAST(fh AS VARCHAR) AS f FROM nfs WHERE fh IS NOT NULL GROUP BY fh \
         ORDER BY count(*) DESC LIMIT 20",
    ) {
        secrets.push(r["f"].as_str().unwrap().to_string());
    }
    for secret in &secrets {
        assert!(
            original.contains(secret.as_str()),
            "{secret} not in the original"
        );
        assert!(
            !one.contains(secret.as_str()),
            "{secret} survived anonymisation"
        );
    }
    // And not in any file's bytes either.
    let mut stack = vec![a1.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            for secret in &secrets {
                let hit = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
                assert!(!hit, "{secret} in {}", p.display());
            }
        }
    }
    // Prefix relations survive: the two hosts shared 30 leading bits.
    let hosts = sql(
        &a1,
        "SELECT DISTINCT ip_text(client) AS c, ip_text(server) AS s FROM rpc",
    );
    assert_eq!(hosts.len(), 1);
    let bits = |t: &str| u32::from(t.parse::<std::net::Ipv4Addr>().unwrap());
    let (c, sv) = (
        bits(hosts[0]["c"].as_str().unwrap()),
        bits(hosts[0]["s"].as_str().unwrap()),
    );
    assert_eq!((c ^ sv).leading_zeros(), 30, "{hosts:?}");
    // The analyses still run and give the same numbers.
    let count = |d: &Path| sql(d, "SELECT count(*) AS n, sum(latency_ns) AS l FROM rpc");
    assert_eq!(count(&ds), count(&a1));
    // The flows table is copied, its addresses mapped as the packets' are:
    // the flows it gives are the flows the anonymised packets give.
    let ends = |d: &Path, t: &str, a: &str, b: &str| {
        let q = format!(
            "SELECT DISTINCT ip_text({a}) AS x FROM {t} UNION SELECT ip_text({b}) FROM {t} ORDER BY x"
        );
        sql(d, &q)
    };
    let flow_hosts = ends(&a1, "flow_slices", "a_ip", "b_ip");
    assert!(!flow_hosts.is_empty());
    assert_eq!(flow_hosts, ends(&a1, "packets", "ip_src", "ip_dst"));
    for secret in ["10.88.0.1", "10.88.0.2"] {
        assert!(
            !format!("{flow_hosts:?}").contains(secret),
            "{flow_hosts:?}"
        );
    }
    let flows = |d: &Path, extra: &[&str]| {
        let mut c = weir();
        c.arg("analyze")
            .arg(d)
            .args(["flows", "--limit", "0", "--json", "-v"])
            .args(extra);
        let r = run_bounded(c, Duration::from_secs(120));
        assert_eq!(r.code(), 0, "{}", r.stderr());
        (r.stdout(), r.stderr())
    };
    let (from_table, how) = flows(&a1, &[]);
    assert!(how.contains("answered from the flows table"), "{how}");
    assert_eq!(from_table, flows(&a1, &["--no-flows-table"]).0);
    let m = manifest(&a1);
    assert_eq!(m["sources"][0]["path"], "(anonymized)");
    assert!(m["anonymized"]["key_fingerprint"].is_string());
}
