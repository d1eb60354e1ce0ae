//! Analysis benchmark: `weir analyze` flows, rates and bursts over a
//! dataset of (by default) 100 M packet records, side by side with DuckDB
//! running the same SQL text on the same Parquet files; and `weir read` of
//! a one-second window out of a 100 M-frame dataset, with the bytes of
//! records it had to read.
//!
//! Usage: analyze [--quick] [--records N] [--reps R] [--json OUT.json]
//!                [--dir SCRATCH] [--weir PATH] [--only NAME,...]
//!
//! weir is timed as a whole process (start-up included) with wait4(2);
//! DuckDB inside its Python process around the queries only (views and
//! macros set up before the clock starts), which favours DuckDB. Runs of the
//! two engines alternate inside each repetition.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use analyze::analyses::{self, BurstSource, By};
use serde_json::{Value, json};
use weir_bench::*;

const DEFAULT_DIR: &str = "/dev/shm/weir-bench-analyze";
/// Records per generated part (bounds the scratch space a part needs).
const PART: u64 = 5_000_000;

struct Opts {
    records: u64,
    reps: usize,
    quick: bool,
    json: Option<PathBuf>,
    dir: PathBuf,
    weir: Option<PathBuf>,
    /// Only these of flows, rates, bursts and read.
    only: Option<Vec<String>>,
}

impl Opts {
    fn runs(&self, name: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|n| n == name))
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: analyze [--quick] [--records N] [--reps R] [--json OUT.json] [--dir SCRATCH] \
         [--weir PATH]\n\n  --quick      5 M records, one repetition\n  --records N  records \
         in the dataset (default 100 M)\n  --reps R     repetitions (default 3)\n  --json FILE  \
         also write every number as JSON\n  --dir DIR    scratch directory (default {DEFAULT_DIR}); \
         needs ~9 GB free for the read test at 100 M\n  --weir PATH  the weir binary\n  --only N,..  only these of flows, rates, bursts, read"
    );
    std::process::exit(2)
}

fn parse_args() -> Opts {
    let mut o = Opts {
        records: 100_000_000,
        reps: 3,
        quick: false,
        json: None,
        dir: PathBuf::from(DEFAULT_DIR),
        weir: None,
        only: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--quick" => {
                o.quick = true;
                o.records = 5_000_000;
                o.reps = 1;
            }
            "--records" => o.records = val().replace('_', "").parse().unwrap_or_else(|_| usage()),
            "--reps" => o.reps = val().parse().unwrap_or_else(|_| usage()),
            "--json" => o.json = Some(PathBuf::from(val())),
            "--dir" => o.dir = PathBuf::from(val()),
            "--weir" => o.weir = Some(PathBuf::from(val())),
            "--only" => o.only = Some(val().split(',').map(str::to_string).collect()),
            _ => usage(),
        }
    }
    o
}

fn python() -> PathBuf {
    std::env::var_os("WEIR_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"))
}

fn run_ok(what: &str, cmd: &mut Command, log: &Path) -> Result<Measure, String> {
    let m = run_timed(what, cmd, log)?;
    Ok(m)
}

/// The dataset parts' manifests: (records, first_ns, last_ns) in total.
fn span_of(parts: &[PathBuf]) -> Result<(u64, i64, i64), String> {
    let (mut n, mut a, mut b) = (0u64, i64::MAX, i64::MIN);
    for p in parts {
        let m: Value = serde_json::from_slice(
            &fs::read(p.join("manifest.json")).map_err(|e| format!("{}: {e}", p.display()))?,
        )
        .map_err(|e| e.to_string())?;
        n += m["counts"]["frames"].as_u64().unwrap_or(0);
        a = a.min(m["time_span"]["first_ns"].as_i64().unwrap_or(i64::MAX));
        b = b.max(m["time_span"]["last_ns"].as_i64().unwrap_or(i64::MIN));
    }
    Ok((n, a, b))
}

struct Analysis {
    name: &'static str,
    weir_args: Vec<String>,
    /// DuckDB: statements before the clock, and the timed queries.
    setup: Vec<String>,
    queries: Vec<String>,
}

fn analyses_for(parts: &[PathBuf], span: (i64, i64)) -> Result<Vec<Analysis>, String> {
    let base = duckdb_packets_setup(parts)?;
    let e = |e: analyze::AnalyzeError| e.to_string();
    let mut flows_setup = base.clone();
    flows_setup.push(format!("CREATE VIEW flows AS {}", analyses::flows_sql()));
    let rates = analyses::rates_query(span, 60_000_000_000, 1_000_000_000).map_err(e)?;
    let scales = [100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000];
    let mut burst_queries = Vec::new();
    for (_, _, source) in analyses::bursts_plan(span, &scales).map_err(e)? {
        match source {
            BurstSource::Finest { sql, .. } => {
                burst_queries.push(format!("CREATE TEMP TABLE intervals AS {sql}"));
                burst_queries.push("SELECT frames, bytes FROM intervals".into());
            }
            BurstSource::Rollup { sql, .. } | BurstSource::Direct { sql, .. } => {
                burst_queries.push(sql)
            }
        }
    }
    let dirs: Vec<String> = parts.iter().map(|p| p.display().to_string()).collect();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v = vec!["analyze".to_string()];
        v.extend(dirs.iter().cloned());
        v.extend(extra.iter().map(|s| s.to_string()));
        v.push("--json".into());
        v
    };
    Ok(vec![
        Analysis {
            name: "flows",
            weir_args: args(&["flows", "--limit", "20"]),
            setup: flows_setup,
            queries: vec![analyses::flows_query(By::Bytes, 20)],
        },
        Analysis {
            name: "rates",
            weir_args: args(&["rates", "--every", "1min", "--sample", "1s"]),
            setup: base.clone(),
            queries: vec![rates],
        },
        Analysis {
            name: "bursts",
            weir_args: args(&["bursts", "--scales", "100us,1ms,10ms,100ms,1s"]),
            setup: base,
            queries: burst_queries,
        },
    ])
}

fn duckdb_run(scratch: &Scratch, a: &Analysis) -> Result<(Measure, Value), String> {
    let job = scratch.path(&format!("{}.json", a.name));
    fs::write(
        &job,
        json!({"setup": a.setup, "queries": a.queries}).to_string(),
    )
    .map_err(|e| e.to_string())?;
    let out = scratch.path("duckdb.out");
    let f = File::create(&out).map_err(|e| e.to_string())?;
    let mut cmd = Command::new(python());
    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/duckdb/run_sql.py"))
        .arg(&job);
    let m = run_timed_with(
        "duckdb",
        &mut cmd,
        &scratch.path("duckdb.err"),
        Stdio::from(f),
    )?;
    let v: Value = serde_json::from_str(&fs::read_to_string(&out).map_err(|e| e.to_string())?)
        .map_err(|e| format!("duckdb output: {e}: {}", tail(&scratch.path("duckdb.err"))))?;
    Ok((m, v))
}

fn main() {
    install_signal_handlers();
    let o = parse_args();
    if let Err(e) = run(&o) {
        eprintln!("analyze benchmark: {e}");
        std::process::exit(1);
    }
}

fn run(o: &Opts) -> Result<(), String> {
    let weir = find_weir(o.weir.as_deref())?;
    let mut probe = Command::new(python());
    probe.args(["-c", "import duckdb; print(duckdb.__version__)"]);
    let duckdb_version = probe
        .output()
        .ok()
        .filter(|r| r.status.success())
        .map(|r| String::from_utf8_lossy(&r.stdout).trim().to_string())
        .ok_or(
            "DuckDB for Python is needed: pip install duckdb (or set WEIR_PYTHON to a Python \
             that has it; scripts/test.sh makes one in ~/.cache/weir/venv)",
        )?;
    let scratch = Scratch::create(&o.dir)?;
    let log = scratch.path("step.err");
    let started = Instant::now();

    // The analysis dataset: the application mix, in parts of PART records.
    let nparts = o.records.div_ceil(PART).max(1);
    let mut parts = Vec::new();
    let t = Instant::now();
    for i in 0..nparts {
        let n = PART.min(o.records - i * PART);
        let pcap = scratch.path("part.pcap");
        let ds = scratch.path(&format!("ds{i:03}"));
        eprintln!(
            "making part {} of {nparts}: {n} records of the application mix",
            i + 1
        );
        run_ok(
            "gen",
            Command::new(&weir)
                .args([
                    "gen",
                    "--model",
                    "app",
                    "-c",
                    &n.to_string(),
                    "--seed",
                    &i.to_string(),
                ])
                .arg("-w")
                .arg(&pcap),
            &log,
        )?;
        run_ok(
            "convert",
            Command::new(&weir)
                .arg("convert")
                .arg(&pcap)
                .arg("-o")
                .arg(&ds)
                .arg("-q"),
            &log,
        )?;
        fs::remove_file(&pcap).map_err(|e| e.to_string())?;
        parts.push(ds);
    }
    let make_s = t.elapsed().as_secs_f64();
    let (records, first, last) = span_of(&parts)?;
    let parquet_bytes: u64 = parts
        .iter()
        .flat_map(|p| {
            fs::read_dir(p.join("packets"))
                .into_iter()
                .flatten()
                .flatten()
        })
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let mut list = analyses_for(&parts, (first, last))?;
    list.retain(|a| o.runs(a.name));

    let mut results: Vec<(String, &str, Vec<Measure>)> = Vec::new();
    for a in &list {
        results.push((a.name.to_string(), "weir", Vec::new()));
        results.push((a.name.to_string(), "duckdb", Vec::new()));
    }
    let mut duck_rows = Vec::new();
    for rep in 0..o.reps {
        for (k, a) in list.iter().enumerate() {
            eprintln!("rep {}: {}", rep + 1, a.name);
            let weir_first = (rep + k) % 2 == 0;
            for turn in 0..2 {
                if (turn == 0) == weir_first {
                    let m = run_ok(
                        "weir analyze",
                        Command::new(&weir).args(&a.weir_args),
                        &scratch.path("weir.err"),
                    )?;
                    results[2 * k].2.push(m);
                } else {
                    let (mut m, v) = duckdb_run(&scratch, a)?;
                    // In-process numbers: the queries only.
                    m.wall_s = v["wall_s"].as_f64().unwrap_or(f64::NAN);
                    m.user_s = v["cpu_s"].as_f64().unwrap_or(f64::NAN);
                    m.sys_s = 0.0;
                    duck_rows.push(v);
                    results[2 * k + 1].2.push(m);
                }
            }
        }
    }

    let read = if o.runs("read") {
        // weir read: a one-second window out of a dataset of 64-byte frames at
        // 1 M frames/s, with its pcap.
        let read_frames = o.records;
        let big = scratch.path("frames.pcap");
        let dsr = scratch.path("read-ds");
        eprintln!("making the read dataset: {read_frames} 64-byte frames at 1 M/s");
        run_ok(
            "gen",
            Command::new(&weir)
                .args(["gen", "--model", "fixed", "--size", "64", "--flows", "1000"])
                .args(["--rate", "1M", "-c", &read_frames.to_string(), "-w"])
                .arg(&big),
            &log,
        )?;
        run_ok(
            "convert",
            Command::new(&weir)
                .arg("convert")
                .arg(&big)
                .arg("-o")
                .arg(&dsr)
                .args(["-q", "--index-sources"]),
            &log,
        )?;
        let mid = (read_frames / 1_000_000 / 2).max(1);
        let mut reads = Vec::new();
        let mut read_msg = String::new();
        for _ in 0..o.reps {
            let out = scratch.path("window.pcap");
            let err = scratch.path("read.err");
            let m = run_ok(
                "weir read",
                Command::new(&weir)
                    .arg("read")
                    .arg(&dsr)
                    .args([
                        "--from",
                        &format!("+{mid}s"),
                        "--to",
                        &format!("+{}s", mid + 1),
                    ])
                    .arg("-w")
                    .arg(&out)
                    .arg("--force"),
                &err,
            )?;
            read_msg = fs::read_to_string(&err)
                .unwrap_or_default()
                .trim()
                .to_string();
            reads.push(m);
        }
        let read_ds_bytes: u64 = fs::read_dir(dsr.join("packets"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum();
        Some((reads, read_msg, read_ds_bytes, mid, read_frames))
    } else {
        None
    };

    // Report.
    let kernel = tool_output(Path::new("uname"), &["-r"]).unwrap_or_default();
    let cpu = first_line_of("/proc/cpuinfo", "model name").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## weir analyze benchmark{}\n",
        if o.quick { " (--quick)" } else { "" }
    );
    let _ = writeln!(
        md,
        "Machine: {cpu}, {cores} cores, kernel {}; git {}; DuckDB {duckdb_version} (Python).",
        kernel.trim(),
        git_revision()
    );
    let _ = writeln!(
        md,
        "Dataset: {} records of the application mix in {nparts} parts ({} of Parquet, {:.2} \
         B/record), made in {make_s:.0} s; {} repetitions, engines alternating.\n",
        group_digits(records),
        mb(parquet_bytes),
        parquet_bytes as f64 / records.max(1) as f64,
        o.reps
    );
    let _ = writeln!(
        md,
        "| analysis | engine | wall s | CPU s | cores | M records/s | M records/s per core |"
    );
    let _ = writeln!(md, "|---|---|--:|--:|--:|--:|--:|");
    let mut js = Vec::new();
    for (name, engine, ms) in &results {
        let wall = spread(&ms.iter().map(|m| m.wall_s).collect::<Vec<_>>());
        let cpu = spread(&ms.iter().map(|m| m.cpu_s()).collect::<Vec<_>>());
        let per_core = spread(
            &ms.iter()
                .map(|m| records as f64 / m.cpu_s() / 1e6)
                .collect::<Vec<_>>(),
        );
        let rate = records as f64 / wall.median / 1e6;
        let _ = writeln!(
            md,
            "| {name} | {engine} | {} | {} | {:.2} | {rate:.1} | {} |",
            wall.show(o.reps, |x| format!("{x:.2}")),
            cpu.show(o.reps, |x| format!("{x:.2}")),
            cpu.median / wall.median,
            per_core.show(o.reps, |x| format!("{x:.1}")),
        );
        js.push(
            json!({"analysis": name, "engine": engine, "wall_s": wall.json(),
            "cpu_s": cpu.json(), "records_per_core_s": per_core.json()}),
        );
    }
    let _ = writeln!(
        md,
        "\n| analysis | weir ÷ DuckDB, wall | weir ÷ DuckDB, CPU |"
    );
    let _ = writeln!(md, "|---|--:|--:|");
    for k in 0..list.len() {
        let w = &results[2 * k].2;
        let d = &results[2 * k + 1].2;
        let med = |v: &[Measure], f: fn(&Measure) -> f64| {
            spread(&v.iter().map(f).collect::<Vec<_>>()).median
        };
        let _ = writeln!(
            md,
            "| {} | {:.2} | {:.2} |",
            list[k].name,
            med(w, |m| m.wall_s) / med(d, |m| m.wall_s),
            med(w, |m| m.cpu_s()) / med(d, |m| m.cpu_s()),
        );
    }
    let mut read_json = Value::Null;
    if let Some((reads, read_msg, read_ds_bytes, mid, read_frames)) = &read {
        let rd = spread(&reads.iter().map(|m| m.wall_s).collect::<Vec<_>>());
        let _ = writeln!(
            md,
            "\n`weir read --from +{mid}s --to +{}s` of a dataset of {} 64-byte frames (1 M/s, {} of \
             records): {} s wall (median of {}).\nweir said: {read_msg}",
            mid + 1,
            group_digits(*read_frames),
            mb(*read_ds_bytes),
            rd.show(o.reps, |x| format!("{x:.3}")),
            o.reps
        );
        read_json = json!({"wall_s": rd.json(), "message": read_msg,
            "dataset_records_bytes": read_ds_bytes});
    }
    let _ = writeln!(
        md,
        "\nweir is timed as a process (start-up, planning and result formatting included), \
         DuckDB around its queries only. M records/s per core = records ÷ CPU seconds. \
         Whole benchmark {:.0} s.",
        started.elapsed().as_secs_f64()
    );
    print!("{md}");
    if let Some(p) = &o.json {
        let v = json!({"records": records, "parts": nparts, "parquet_bytes": parquet_bytes,
            "runs": js, "read": read_json, "duckdb": duckdb_version});
        fs::write(p, serde_json::to_string_pretty(&v).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    drop(scratch);
    Ok(())
}
