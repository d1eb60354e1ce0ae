//! The flows table (issue 38): `weir analyze flows` answered from it,
//! against the same analysis over the packets (`--no-flows-table`) and
//! against DuckDB running the flows SQL over `packets/*.parquet`; what the
//! table costs on disk per packet; and what building it adds to the packet
//! writer's CPU per frame, against `weir convert`'s whole CPU per frame.
//!
//! Usage: flows [--records N] [--reps R] [--dir SCRATCH] [--weir PATH]
//!
//! Data: the application mix of `weir gen --model app`, converted in parts
//! of 5 M records. weir is timed as a whole process (wait4); DuckDB around
//! its queries only. The writer comparison runs in this process over the
//! records of the first part, flows table on and off, interleaved.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use analyze::analyses::{self, By};
use serde_json::{Value, json};
use store::{PacketWriter, PacketWriterOptions};
use weir_bench::*;

const PART: u64 = 5_000_000;

struct Opts {
    records: u64,
    reps: usize,
    dir: PathBuf,
    weir: Option<PathBuf>,
}

fn usage() -> ! {
    eprintln!(
        "usage: flows [--records N] [--reps R] [--dir SCRATCH] [--weir PATH]\n  \
         --records N  application-mix records (default 20 M)\n  --reps R     repetitions \
         (default 3)\n  --dir DIR    scratch (default /dev/shm/weir-bench-flows)"
    );
    std::process::exit(2)
}

fn parse_args() -> Opts {
    let mut o = Opts {
        records: 20_000_000,
        reps: 3,
        dir: PathBuf::from("/dev/shm/weir-bench-flows"),
        weir: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--records" => o.records = val().replace('_', "").parse().unwrap_or_else(|_| usage()),
            "--reps" => o.reps = val().parse().unwrap_or_else(|_| usage()),
            "--dir" => o.dir = PathBuf::from(val()),
            "--weir" => o.weir = Some(PathBuf::from(val())),
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

fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}

fn main() {
    install_signal_handlers();
    if let Err(e) = run(&parse_args()) {
        eprintln!("flows benchmark: {e}");
        std::process::exit(1);
    }
}

fn run(o: &Opts) -> Result<(), String> {
    let weir = find_weir(o.weir.as_deref())?;
    let scratch = Scratch::create(&o.dir)?;
    let log = scratch.path("step.err");
    let nparts = o.records.div_ceil(PART).max(1);
    let mut parts = Vec::new();
    let mut convert_cpu = 0.0;
    for i in 0..nparts {
        check_interrupted()?;
        let n = PART.min(o.records - i * PART);
        let pcap = scratch.path("part.pcap");
        let ds = scratch.path(&format!("ds{i:03}"));
        eprintln!("part {} of {nparts}: {n} records", i + 1);
        run_timed(
            "gen",
            Command::new(&weir)
                .args(["gen", "--model", "app", "-c", &n.to_string()])
                .args(["--seed", &i.to_string(), "-w"])
                .arg(&pcap),
            &log,
        )?;
        let m = run_timed(
            "convert",
            Command::new(&weir)
                .arg("convert")
                .arg(&pcap)
                .arg("-o")
                .arg(&ds)
                .arg("-q"),
            &log,
        )?;
        convert_cpu += m.cpu_s();
        fs::remove_file(&pcap).map_err(|e| e.to_string())?;
        parts.push(ds);
    }
    let records = o.records;
    let packets_bytes: u64 = parts.iter().map(|p| dir_bytes(&p.join("packets"))).sum();
    let flows_bytes: u64 = parts.iter().map(|p| dir_bytes(&p.join("flows"))).sum();

    // The writer with and without the flows table, over the first part.
    let mut recs = Vec::new();
    for e in fs::read_dir(parts[0].join("packets")).map_err(|e| e.to_string())? {
        let p = e.map_err(|e| e.to_string())?.path();
        recs.extend(store::read::read_packet_file(&p).map_err(|e| e.to_string())?);
    }
    let wdir = scratch.path("writer/packets");
    fs::create_dir_all(&wdir).map_err(|e| e.to_string())?;
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for rep in 0..o.reps.max(3) {
        for flows in [rep % 2 == 0, rep % 2 != 0] {
            check_interrupted()?;
            let opts = PacketWriterOptions {
                flows,
                ..Default::default()
            };
            let c0 = own_cpu_s();
            let mut w = PacketWriter::create(&wdir.join("w.parquet"), "packets/w.parquet", opts)
                .map_err(|e| e.to_string())?;
            for r in &recs {
                w.push(r).map_err(|e| e.to_string())?;
            }
            w.finish().map_err(|e| e.to_string())?;
            let ns = (own_cpu_s() - c0) * 1e9 / recs.len() as f64;
            if flows { &mut with } else { &mut without }.push(ns);
        }
    }

    // The analysis three ways.
    let mut setup = duckdb_packets_setup(&parts)?;
    setup.push(format!("CREATE VIEW flows AS {}", analyses::flows_sql()));
    let job = scratch.path("duck.json");
    fs::write(
        &job,
        json!({"setup": setup, "queries": [analyses::flows_query(By::Bytes, 20)]}).to_string(),
    )
    .map_err(|e| e.to_string())?;
    let weir_args = |extra: &[&str]| -> Vec<String> {
        let mut v = vec!["analyze".to_string()];
        v.extend(parts.iter().map(|p| p.display().to_string()));
        v.extend(["flows", "--limit", "20", "--json"].map(String::from));
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let (mut table, mut packets, mut duck) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..o.reps {
        eprintln!("rep {}", rep + 1);
        for turn in 0..3 {
            check_interrupted()?;
            match (turn + rep) % 3 {
                0 => table.push(run_timed(
                    "weir analyze flows",
                    Command::new(&weir).args(weir_args(&[])),
                    &log,
                )?),
                1 => packets.push(run_timed(
                    "weir analyze flows --no-flows-table",
                    Command::new(&weir).args(weir_args(&["--no-flows-table"])),
                    &log,
                )?),
                _ => {
                    let out = scratch.path("duck.out");
                    let f = fs::File::create(&out).map_err(|e| e.to_string())?;
                    let mut cmd = Command::new(python());
                    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/duckdb/run_sql.py"))
                        .arg(&job);
                    let mut m = run_timed_with("duckdb", &mut cmd, &log, Stdio::from(f))?;
                    let v: Value =
                        serde_json::from_str(&fs::read_to_string(&out).map_err(|e| e.to_string())?)
                            .map_err(|e| format!("duckdb: {e}: {}", tail(&log)))?;
                    m.wall_s = v["wall_s"].as_f64().unwrap_or(f64::NAN);
                    m.user_s = v["cpu_s"].as_f64().unwrap_or(f64::NAN);
                    m.sys_s = 0.0;
                    duck.push(m);
                }
            }
        }
    }

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("# The flows table (issue 38)\n");
    println!(
        "{} records of `weir gen --model app` in {nparts} dataset(s) under {}; {cores} cores; \
         weir {}; {} repetitions, medians (min–max).\n",
        group_digits(records),
        o.dir.display(),
        git_revision(),
        o.reps
    );
    println!("| flows, top 20 by bytes | wall s | CPU s | M packets per CPU-second |");
    println!("|---|--:|--:|--:|");
    let show = |name: &str, ms: &[Measure]| {
        let wall = spread(&ms.iter().map(|m| m.wall_s).collect::<Vec<_>>());
        let cpu = spread(&ms.iter().map(|m| m.cpu_s()).collect::<Vec<_>>());
        let rate = spread(
            &ms.iter()
                .map(|m| records as f64 / m.cpu_s() / 1e6)
                .collect::<Vec<_>>(),
        );
        println!(
            "| {name} | {} | {} | {} |",
            wall.show(o.reps, |x| format!("{x:.2}")),
            cpu.show(o.reps, |x| format!("{x:.2}")),
            rate.show(o.reps, |x| format!("{x:.1}"))
        );
        wall.median
    };
    let t = show("weir, flows table", &table);
    let p = show("weir, packets (--no-flows-table)", &packets);
    let d = show("DuckDB, flows SQL over packets (queries only)", &duck);
    println!(
        "\nflows table against DuckDB: {} faster (wall, medians); against weir over the \
         packets: {} faster.",
        ratio(d / t),
        ratio(p / t)
    );
    let w = spread(&with);
    let wo = spread(&without);
    let convert_ns = convert_cpu * 1e9 / records as f64;
    println!(
        "\nOn disk: packets {} B per packet, flows table {} B per packet ({} and {}).",
        format_args!("{:.2}", packets_bytes as f64 / records as f64),
        format_args!("{:.3}", flows_bytes as f64 / records as f64),
        mb(packets_bytes),
        mb(flows_bytes)
    );
    println!(
        "Packet writer CPU per frame over {} records: {:.1} ns with the flows table, {:.1} \
         without (medians of {}); the difference, {:.1} ns, is {:.1} % of weir convert's \
         {:.1} ns of CPU per frame.",
        group_digits(recs.len() as u64),
        w.median,
        wo.median,
        with.len(),
        w.median - wo.median,
        (w.median - wo.median) / convert_ns * 100.0,
        convert_ns
    );
    Ok(())
}
