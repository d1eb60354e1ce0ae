//! RPC decoding's cost in `weir convert` and the speed of `weir analyze
//! rpc`, on the shared NFSv3 trace (bench/README.md, `rpc`).
//!
//! 1. `weir convert --no-rpc` and `weir convert --rpc` on the same trace,
//!    interleaved, REPS times each: medians and their ratio.
//! 2. `weir analyze DS rpc --threads 1` over a dataset whose rpc and nfs
//!    tables are the trace's, copied COPIES times: rpc rows per second on
//!    one core.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::{Array, ArrayRef, RecordBatch, UInt64Array};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

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
    let mut data = PathBuf::from("../shared/data/nfs");
    let (mut reps, mut copies) = (7usize, 150usize);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--weir" => weir = PathBuf::from(val()?),
            "--data" => data = PathBuf::from(val()?),
            "--reps" => reps = val()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--copies" => copies = val()?.parse().map_err(|e| format!("--copies: {e}"))?,
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: rpc [--weir PATH] [--data DIR] [--reps N] \
                     [--copies N]"
                ));
            }
        }
    }
    let tmp = std::env::temp_dir().join(format!("weir-bench-rpc-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let result = bench(&weir, &data, &tmp, reps, copies);
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

fn bench(weir: &Path, data: &Path, tmp: &Path, reps: usize, copies: usize) -> Result<(), String> {
    let pcap = tmp.join("nfsv3.pcap");
    run(Command::new("zstd")
        .args(["-q", "-d", "--long=27", "-o"])
        .arg(&pcap)
        .arg(data.join("nfsv3.pcap.zst")))?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("## rpc: RPC decoding in weir convert, and weir analyze rpc\n");
    println!(
        "- trace: nfsv3.pcap from {} (541 MB, 602,286 frames, 133,150 RPC calls), page cache warm",
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
    let (mut plain, mut rpc) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        plain.push(convert("--no-rpc")?);
        rpc.push(convert("--rpc")?);
    }
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

    // A big rpc table: the trace's files, copied, each copy's ids moved
    // into a range of their own (identical ids would make every rpc-nfs
    // join quadratic in the number of copies).
    let big = tmp.join("big");
    for t in ["rpc", "nfs", "packets"] {
        std::fs::create_dir_all(big.join(t)).map_err(|e| e.to_string())?;
    }
    std::fs::copy(ds.join("manifest.json"), big.join("manifest.json"))
        .map_err(|e| e.to_string())?;
    let mut rows = 0u64;
    for (t, id) in [("rpc", "id"), ("nfs", "rpc_id")] {
        for e in std::fs::read_dir(ds.join(t))
            .map_err(|e| e.to_string())?
            .flatten()
        {
            let batches = read_parquet(&e.path())?;
            for k in 0..copies {
                let out = big
                    .join(t)
                    .join(format!("c{k:04}-{}", e.file_name().to_string_lossy()));
                write_with_id_offset(&batches, id, (k as u64) << 40, &out)?;
            }
        }
    }
    rows += 133_150 * copies as u64;
    let mut times = Vec::new();
    for _ in 0..3 {
        times.push(run(Command::new(weir).arg("analyze").arg(&big).args([
            "rpc",
            "--threads",
            "1",
        ]))?);
    }
    let t = median(times);
    println!("| weir analyze rpc, 1 thread | rpc rows | median s | rows/s |");
    println!("|---|---|---|---|");
    println!(
        "| {copies} copies of the trace's tables | {rows} | {t:.2} | {:.1} M |",
        rows as f64 / t / 1e6
    );
    Ok(())
}

fn read_parquet(path: &Path) -> Result<Vec<RecordBatch>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| b.build())
        .map_err(|e| format!("{}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// `batches` to `out` with `offset` added to the UInt64 column `id`.
fn write_with_id_offset(
    batches: &[RecordBatch],
    id: &str,
    offset: u64,
    out: &Path,
) -> Result<(), String> {
    let Some(first) = batches.first() else {
        return Ok(());
    };
    let schema = first.schema();
    let col = schema.index_of(id).map_err(|e| e.to_string())?;
    let file = std::fs::File::create(out).map_err(|e| format!("{}: {e}", out.display()))?;
    // Compressed as weir's own rpc files are, so reading costs the same.
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut w =
        ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(|e| e.to_string())?;
    for b in batches {
        let ids = b
            .column(col)
            .as_any()
            .downcast_ref::<UInt64Array>()
            .ok_or(format!("{id} is not UInt64"))?;
        let moved: UInt64Array = ids.iter().map(|v| v.map(|v| v + offset)).collect();
        let mut cols: Vec<ArrayRef> = b.columns().to_vec();
        cols[col] = Arc::new(moved);
        let b = RecordBatch::try_new(schema.clone(), cols).map_err(|e| e.to_string())?;
        w.write(&b).map_err(|e| e.to_string())?;
    }
    w.close().map_err(|e| e.to_string())?;
    Ok(())
}
