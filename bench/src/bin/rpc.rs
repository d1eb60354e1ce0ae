//! RPC decoding's cost in `weir convert` and the speed of `weir analyze
//! rpc`, on the shared NFSv3 trace (bench/README.md, `rpc`).
//!
//! 1. `weir convert --no-rpc` and `weir convert --rpc` on the same trace,
//!    interleaved, REPS times each: medians and their ratio, and the
//!    spread of each pair's own ratio.
//! 2. `weir analyze DS rpc --threads 1` over a dataset whose rpc and nfs
//!    tables hold the trace's transactions COPIES times, written by weir's
//!    own rpc writer: rpc rows per second on one core.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use store::rpc::RpcWriter;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn run(cmd: &mut Command) -> Result<f64, String> {
    let t = Instant::now();
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(t.elapsed().as_secs_f64())
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("rpc bench: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<(), String> {
    let mut weir = PathBuf::from("target/release/weir");
    let mut data = weir_bench::default_data_dir().join("nfs");
    let (mut reps, mut copies) = (31usize, 150usize);
    let mut keep: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--weir" => weir = PathBuf::from(val()?),
            "--data" => data = PathBuf::from(val()?),
            "--reps" => {
                reps = val()?.parse().map_err(|e| format!("--reps: {e}"))?;
                if reps == 0 {
                    return Err("--reps must be at least 1".into());
                }
            }
            "--copies" => copies = val()?.parse().map_err(|e| format!("--copies: {e}"))?,
            "--keep" => keep = Some(PathBuf::from(val()?)),
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: rpc [--weir PATH] [--data DIR] [--reps N] \
                     [--copies N] [--keep DIR]"
                ));
            }
        }
    }
    // --keep DIR: work in DIR and leave the datasets there (DIR/ds: the
    // trace converted; DIR/big: the copied tables) for weir sql or a profiler.
    let tmp = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("weir-bench-rpc-{}", std::process::id()))
    });
    if tmp.join("big").exists() {
        std::fs::remove_dir_all(tmp.join("big")).map_err(|e| e.to_string())?;
    }
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let result = bench(&weir, &data, &tmp, reps, copies);
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

fn bench(weir: &Path, data: &Path, tmp: &Path, reps: usize, copies: usize) -> Result<(), String> {
    let pcap = tmp.join("nfsv3.pcap");
    run(Command::new("zstd")
        .args(["-q", "-f", "-d", "--long=27", "-o"])
        .arg(&pcap)
        .arg(data.join("nfsv3.pcap.zst")))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("## rpc: RPC decoding in weir convert, and weir analyze rpc\n");
    println!(
        "- trace: nfsv3.pcap from {} (541 MB, 602,286 frames, 133,150 RPC calls), decompressed afresh: in the page cache as just written, by small pages (a trace read in from disk may be mapped by 2 MiB, and records only then runs ~15 % faster)",
        data.display()
    );
    println!("- {cores} cores; convert with all of them; {reps} runs per mode, interleaved\n");
    let ds = tmp.join("ds");
    let convert = |extra: &str| -> Result<f64, String> {
        run(Command::new(weir)
            .arg("convert")
            .arg(&pcap)
            .arg("-o")
            .arg(&ds)
            .args(["--force", "-q", extra]))
    };
    convert("--rpc")?; // warm
    // Each pair in the other order from the last, so that neither mode
    // always runs just after the other; each pair's own ratio too, for
    // the spread (on this noisy machine the ratio of two 11-run medians
    // moved by up to a tenth from one run of the bench to the next).
    let (mut plain, mut rpc, mut pairs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..reps {
        let (p, r) = if i % 2 == 0 {
            let p = convert("--no-rpc")?;
            (p, convert("--rpc")?)
        } else {
            let r = convert("--rpc")?;
            (convert("--no-rpc")?, r)
        };
        plain.push(p);
        rpc.push(r);
        pairs.push(r / p);
    }
    pairs.sort_by(|a, b| a.total_cmp(b));
    let quartile = |q: usize| pairs[(pairs.len() - 1) * q / 4];
    let (p, r) = (median(plain), median(rpc));
    println!("| convert | median s | frames/s |");
    println!("|---|---|---|");
    println!(
        "| records only (--no-rpc) | {p:.3} | {:.2} M |",
        0.602286 / p
    );
    println!("| records + rpc (--rpc) | {r:.3} | {:.2} M |", 0.602286 / r);
    println!(
        "\nRPC decoding adds {:.0} % to convert time (ratio {:.2}).\n",
        (r / p - 1.0) * 100.0,
        r / p
    );
    println!(
        "Each pair's own ratio: median {:.2}, quartiles {:.2} to {:.2}.\n",
        quartile(2),
        quartile(1),
        quartile(3)
    );

    // A big rpc table: the trace's transactions written COPIES times by
    // weir's own rpc writer, each copy as a writer of its own (so its ids
    // and files are its own, as several capture workers' are).
    let big = tmp.join("big");
    for t in ["rpc", "nfs", "packets"] {
        std::fs::create_dir_all(big.join(t)).map_err(|e| e.to_string())?;
    }
    std::fs::copy(ds.join("manifest.json"), big.join("manifest.json"))
        .map_err(|e| e.to_string())?;
    let chunks = weir_bench::read_trace(&pcap)?;
    let mut txs = Vec::new();
    weir_bench::track(&chunks, &weir_bench::segments_of(&chunks), Some(&mut txs));
    drop(chunks);
    let writer = |k: usize| u16::try_from(k).map_err(|_| "--copies: at most 65536".to_string());
    for k in 0..copies {
        let mut w = RpcWriter::new(&big, writer(k)?, 1 << 22);
        for t in &txs {
            w.push(t).map_err(|e| e.to_string())?;
        }
        w.finish().map_err(|e| e.to_string())?;
    }
    let rows = txs.len() as u64 * copies as u64;
    drop(txs);
    // The analysis as weir runs it (one pass over the columns), on one core
    // and on all; and the same analysis's SQL on DataFusion (what Spark is
    // handed), statement by statement, on one core.
    let analyze = |threads: &str| -> Result<f64, String> {
        run(Command::new(weir)
            .arg("analyze")
            .arg(&big)
            .args(["rpc", "--threads", threads]))
    };
    let handles = analyze::analyses::fill(
        analyze::rpc::RPC_HANDLES_SQL,
        &[("limit", "20".to_string())],
    )
    .map_err(|e| e.to_string())?;
    let statements = [
        analyze::rpc::RPC_PROCEDURES_SQL,
        analyze::rpc::RPC_LATENCY_SQL,
        analyze::rpc::RPC_CLIENTS_SQL,
        handles.as_str(),
    ];
    let sql = || -> Result<f64, String> {
        let mut t = 0.0;
        for q in statements {
            t += run(Command::new(weir)
                .arg("sql")
                .arg(&big)
                .arg(q)
                .args(["--threads", "1"]))?;
        }
        Ok(t)
    };
    let (mut one, mut all, mut by_sql) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..3 {
        one.push(analyze("1")?);
        all.push(analyze(&cores.to_string())?);
        by_sql.push(sql()?);
    }
    let (one, all, by_sql) = (median(one), median(all), median(by_sql));
    println!(
        "{copies} copies of the trace's rpc and nfs tables (encoded as weir's): {rows} rpc rows\n"
    );
    println!("| weir analyze rpc | cores | median s | rows/s | rows/s per core |");
    println!("|---|---|---|---|---|");
    let line = |what: &str, n: usize, t: f64| {
        println!(
            "| {what} | {n} | {t:.2} | {:.1} M | {:.1} M |",
            rows as f64 / t / 1e6,
            rows as f64 / t / 1e6 / n as f64
        );
    };
    line("one pass over the columns", 1, one);
    line("one pass over the columns", cores, all);
    line("its SQL on DataFusion (weir sql, 4 statements)", 1, by_sql);
    println!(
        "\nThe pass takes {:.2}× the SQL's time on one core.",
        one / by_sql
    );
    Ok(())
}
