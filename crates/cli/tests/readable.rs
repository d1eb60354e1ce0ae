//! What a person reads: `weir sql DATASET... "SELECT * FROM T"` for every
//! table of datasets that hold them all (a conversion of weir gen's
//! application mix: packets, flows, dns, tls, http; of an NFSv3 trace: rpc,
//! nfs; a live capture: stats; `weir stack` over IPv6: stack and
//! stack_intervals), as a table, `--csv` and `--json`: each works, the CSV
//! parses (Python's csv module), and every address is printed as text,
//! lists of them too, never as hex digits.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::live::{capture, send as send_frames};
use common::netns::VethPair;
use common::stack::{Server, send, start_stack, stop_stack, walk_refused_here};
use common::*;
use serde_json::Value;

/// `weir ARGS`: its standard output; it must succeed.
fn weir_out(args: &[&str]) -> String {
    let mut cmd = weir();
    cmd.args(args);
    let r = run_bounded(cmd, Duration::from_secs(180));
    assert_eq!(r.code(), 0, "weir {}: {}", args.join(" "), r.stderr());
    r.stdout()
}

fn p(x: &Path) -> String {
    x.to_str().unwrap().to_string()
}

/// A conversion of `weir gen --model app` (4,000 frames, `seed`) as
/// `s/NAME`.
fn app_dataset(s: &Scratch, seed: u32, name: &str) -> PathBuf {
    let trace = s.join(&format!("{name}.pcap"));
    let seed = seed.to_string();
    weir_out(&[
        "gen",
        "--model",
        "app",
        "-c",
        "4000",
        "--seed",
        &seed,
        "-w",
        &p(&trace),
    ]);
    let ds = s.join(name);
    weir_out(&["convert", "-q", &p(&trace), "-o", &p(&ds)]);
    ds
}

/// The four datasets.
fn datasets(s: &Scratch) -> Vec<PathBuf> {
    let app = app_dataset(s, 5, "app");
    // The first frames of a real NFSv3 trace.
    let cut = nfs_frames(s, 3000, "nfs.pcap");
    let nfs = s.join("nfs");
    weir_out(&["convert", "-q", &p(&cut), "-o", &p(&nfs)]);

    // A live capture (its stats) while weir stack records a TCP transfer
    // over IPv6 on a port of this test's own.
    const PORT: u16 = 5649;
    let net = VethPair::new("readable");
    let live = s.join("live");
    let cap = capture(&net.b, &["-o", &p(&live), "-j", "1", "--duration", "60s"]);
    // (Without the stack tables where the kernel refuses weir stack's
    // socket walk: said on stderr.)
    let stack = s.join("stack");
    let rec = (!walk_refused_here()).then(|| start_stack(&stack, &["--port", &PORT.to_string()]));
    let server = Server::start(&net.b, PORT);
    send(
        VethPair::exec(&net.a, "python3"),
        "fd99::2",
        PORT,
        2_000_000,
    );
    assert_eq!(server.received(), 2_000_000);
    send_frames(
        &net.a,
        &[
            "--count", "1500", "--rate", "1000", "--size", "200", "--flows", "3",
        ],
    );
    let stack = rec.map(|rec| {
        stop_stack(rec);
        stack
    });
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(30));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    [app, nfs, live].into_iter().chain(stack).collect()
}

/// The records of CSV `text` (Python's csv module reads it): the number
/// of fields of each.
fn csv_widths(text: &str, s: &Scratch) -> Vec<usize> {
    let path = s.join("out.csv");
    std::fs::write(&path, text).unwrap();
    let mut cmd = python();
    cmd.args([
        "-c",
        "import csv, json, sys\n\
         with open(sys.argv[1], newline='') as f:\n    \
         print(json.dumps([len(r) for r in csv.reader(f, strict=True)]))",
    ])
    .arg(&path);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "the CSV does not parse: {}", r.stderr());
    serde_json::from_str(r.stdout().trim()).unwrap()
}

/// An address as weir prints it: IPv4 dotted, IPv6 in RFC 5952 form, a
/// MAC as aa:bb:cc:dd:ee:ff.
fn is_address_text(v: &str) -> bool {
    if let Ok(a) = v.parse::<std::net::IpAddr>() {
        return a.to_string() == v;
    }
    let parts: Vec<&str> = v.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|x| x.len() == 2 && x.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Runs of `n` or more hex digits in `text`.
fn hex_runs(text: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut run = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_hexdigit() {
            run.push(c);
        } else {
            // All-decimal runs are numbers, not hex.
            if run.len() >= n && run.chars().any(|c| c.is_ascii_alphabetic()) {
                out.push(run.clone());
            }
            run.clear();
        }
    }
    out
}

#[test]
fn every_table_prints_addresses_as_text() {
    let s = Scratch::new("readable");
    let ds: Vec<String> = datasets(&s).iter().map(|d| p(d)).collect();
    let sql = |q: &str, fmt: &[&str]| {
        let mut args: Vec<&str> = vec!["sql"];
        args.extend(ds.iter().map(String::as_str));
        args.push(q);
        args.extend(fmt);
        weir_out(&args)
    };
    let listed: Value = serde_json::from_str(&sql(
        "SELECT table_name FROM information_schema.tables \
         WHERE table_schema = 'public' ORDER BY 1",
        &["--json"],
    ))
    .unwrap();
    let tables: Vec<String> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["table_name"].as_str().unwrap().to_string())
        .collect();
    for t in store::identify::TABLES
        .iter()
        .chain(&["flows", "flow_slices"])
    {
        assert!(tables.iter().any(|x| x == t), "no table {t} in {tables:?}");
    }
    // The tables with a column of addresses (by its binary type).
    let with_addresses: BTreeSet<String> = serde_json::from_str::<Value>(&sql(
        "SELECT DISTINCT table_name FROM information_schema.columns \
         WHERE data_type LIKE '%FixedSizeBinary(16)%' OR data_type LIKE '%FixedSizeBinary(6)%'",
        &["--json"],
    ))
    .unwrap()
    .as_array()
    .unwrap()
    .iter()
    .map(|r| r["table_name"].as_str().unwrap().to_string())
    .collect();
    let stack_here = !walk_refused_here();
    for t in ["packets", "flows", "dns", "rpc", "stack"] {
        if t == "stack" && !stack_here {
            continue;
        }
        assert!(with_addresses.contains(t), "{t}: {with_addresses:?}");
    }
    // Hex by nature: TLS fingerprints and NFS file handles (opaque bytes).
    let hashes = ["ja3", "ja4", "fh", "res_fh"];
    for t in &tables {
        if !stack_here && t.starts_with("stack") {
            continue;
        }
        let q = format!("SELECT * FROM {t}");
        let json: Value = serde_json::from_str(&sql(&q, &["--json"]))
            .unwrap_or_else(|e| panic!("{t}: --json: {e}"));
        let rows = json.as_array().unwrap();
        assert!(!rows.is_empty(), "{t}: no rows to look at");
        let table = sql(&q, &[]);
        let csv = sql(&q, &["--csv"]);
        // The CSV: a header and one record per row, all as wide.
        let widths = csv_widths(&csv, &s);
        let columns = rows[0].as_object().unwrap().len();
        assert_eq!(widths.len(), rows.len() + 1, "{t}: CSV records");
        assert!(widths.iter().all(|&w| w >= columns), "{t}: CSV fields");

        // Every address in the JSON is text, and the table and the CSV
        // print it as the JSON does.
        let mut addresses = BTreeSet::new();
        let mut hashed = Vec::new();
        for row in rows {
            for (col, v) in row.as_object().unwrap() {
                if hashes.contains(&col.as_str()) {
                    hashed.extend(v.as_str().map(str::to_string));
                    continue;
                }
                let items: Vec<&Value> = match v {
                    Value::Array(a) => a.iter().collect(),
                    v => vec![v],
                };
                for item in items {
                    let Some(text) = item.as_str() else { continue };
                    assert!(
                        hex_runs(text, 12).is_empty(),
                        "{t}.{col}: hex in JSON: {text}"
                    );
                    if is_address_text(text) {
                        addresses.insert(text.to_string());
                    }
                }
            }
        }
        if with_addresses.contains(t) {
            assert!(!addresses.is_empty(), "{t}: no addresses as text");
        }
        for a in addresses.iter().take(50) {
            assert!(table.contains(a.as_str()), "{t}: {a} not in the table");
            assert!(csv.contains(a.as_str()), "{t}: {a} not in the CSV");
        }
        for (what, mut text) in [("table", table), ("CSV", csv)] {
            for h in &hashed {
                text = text.replace(h.as_str(), "");
            }
            let runs = hex_runs(&text, 12);
            assert!(runs.is_empty(), "{t}: hex in the {what}: {:?}", &runs[..1]);
        }
    }
    // Lists of addresses: one CSV field `[a, b]`, a JSON list of text
    // (rows in the same order; answer_addrs leaves out CNAMEs, so rows
    // with more than one address are picked here, not in SQL).
    let q = "SELECT ts_ns, answer_addrs FROM dns ORDER BY ts_ns, qname";
    let json: Value = serde_json::from_str(&sql(q, &["--json"])).unwrap();
    let csv = sql(q, &["--csv"]);
    let mut lists = 0;
    for (row, line) in json.as_array().unwrap().iter().zip(csv.lines().skip(1)) {
        let Some(addrs) = row["answer_addrs"].as_array() else {
            continue;
        };
        if addrs.len() < 2 {
            continue;
        }
        let want: Vec<&str> = addrs.iter().map(|a| a.as_str().unwrap()).collect();
        assert!(want.iter().all(|a| is_address_text(a)), "{row}");
        let field = line.split_once(',').unwrap().1;
        assert_eq!(field, format!("\"[{}]\"", want.join(", ")));
        lists += 1;
    }
    assert!(lists > 0, "no DNS answer with two addresses");
    // IPv6 in RFC 5952 form: weir stack's sockets over fd99::/64.
    if !stack_here {
        return;
    }
    let v6 = sql(
        "SELECT DISTINCT local_addr FROM stack_intervals ORDER BY 1",
        &["--csv"],
    );
    assert!(v6.lines().any(|l| l == "fd99::1" || l == "fd99::2"), "{v6}");
}

/// docs/ANALYSIS.md's examples of addresses as text in DuckDB and Spark,
/// run as written there (tests/interop/addresses_as_text.py), give what
/// `weir sql` prints: Spark the same text, DuckDB's macro IPv6 in full.
#[test]
fn duckdb_and_spark_print_addresses_as_weir_does() {
    tool("java");
    let s = Scratch::new("readable-interop");
    let ds = app_dataset(&s, 6, "ds");
    let mut cmd = python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/interop/addresses_as_text.py"
    ))
    .arg(&ds);
    let r = run_bounded(cmd, Duration::from_secs(600));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let theirs: Value = serde_json::from_str(r.stdout().trim()).unwrap();
    let ours: Value = serde_json::from_str(&weir_out(&[
        "sql",
        &p(&ds),
        "SELECT qname, client, answer_addrs FROM dns",
        "--json",
    ]))
    .unwrap();
    let row = |o: &Value, full_v6: bool| -> Value {
        let text = |v: &Value| match v.as_str().map(str::parse::<std::net::IpAddr>) {
            Some(Ok(std::net::IpAddr::V6(a))) if full_v6 => Value::String(
                a.segments()
                    .iter()
                    .map(|g| format!("{g:04x}"))
                    .collect::<Vec<_>>()
                    .join(":"),
            ),
            _ => v.clone(),
        };
        let answers = match &o["answer_addrs"] {
            Value::Array(a) => Value::Array(a.iter().map(text).collect()),
            _ => Value::Null,
        };
        serde_json::json!([o["qname"], text(&o["client"]), answers])
    };
    let sorted = |full_v6: bool| {
        let mut v: Vec<Value> = ours
            .as_array()
            .unwrap()
            .iter()
            .map(|o| row(o, full_v6))
            .collect();
        v.sort_by_cached_key(|x| x.to_string());
        Value::Array(v)
    };
    let spark = sorted(false);
    assert!(spark.as_array().unwrap().len() > 10, "{spark}");
    assert!(
        spark
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r[2].as_array().is_some_and(|a| !a.is_empty())),
        "no answers to compare"
    );
    assert_eq!(theirs["spark"], spark);
    assert_eq!(theirs["duckdb"], sorted(true));
}
