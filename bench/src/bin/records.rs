//! The records' cost per frame (issue 60): what a live capture's records
//! thread spends on each frame, everything in (decode, the row buffer, the
//! flows table, the app and RPC stages, Parquet encoding at each row
//! group's end and the file's close), and `weir convert -j 1` end to end
//! on the same trace, interleaved, with default flags.
//!
//! Usage: records [--weir PATH] [--reps N] [--frames N] [--app-frames N]
//!        [--trace FILE]... [--dir DIR] [--only NAME] [--once]
//!
//! Inputs, made here with `weir gen`: 64-byte UDP frames over 1,024 flows
//! (`--model fixed --size 64 --flows 1024`, `--frames`, 4 M by default)
//! and the application mix (`--model app`, `--app-frames`, 1 M); and
//! each `--trace` (a real one, e.g. the shared NFSv3 trace; compressed
//! ones are read through weir's reader). `--only NAME` keeps one input
//! (`fixed64`, `app` or a trace's file name); `--once` runs the default
//! records once without timing anything else: the run to give
//! `valgrind --tool=callgrind` (instruction counts do not depend on the
//! machine's load).
//!
//! Per input and repetition, in this order: the decode alone into one
//! reused record; the records thread's work (`Worker::frame` over every
//! frame with a live capture's options: pcap positions, app and RPC
//! stages on, buffers prefaulted, then `finish`), as CPU time of the
//! thread and of the process (the RPC stage's table writer is a thread of
//! its own); the same without the app and RPC stages (`--app off --rpc
//! off`, to show what they cost); and `weir convert -j 1`, wall time
//! (frames/s, the target's measure) and CPU time of the process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use ingest::{AppOptions, FrameMeta, RpcMode, RpcOptions, Worker, WorkerOptions};
use store::Dataset;
use weir_bench::{Scratch, find_weir, git_revision, loadavg, read_trace, run_timed, spread};
use wire::{PacketRecord, decode};

const USAGE: &str = "usage: records [--weir PATH] [--reps N] [--frames N] [--app-frames N] \
                     [--trace FILE]... [--dir DIR] [--only NAME] [--once]";

fn thread_cpu_s() -> f64 {
    // SAFETY: clock_gettime writes into the zeroed struct we pass.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

struct Input {
    name: String,
    path: PathBuf,
    chunks: Vec<pcapio::Chunk>,
    frames: u64,
}

/// Decodes every frame into one reused record: the decoder's share.
fn decode_only(input: &Input) -> f64 {
    let mut sum = 0u64;
    let t = thread_cpu_s();
    for c in &input.chunks {
        for (f, b) in c.iter() {
            let mut rec = PacketRecord::new(f.ts_ns, f.wire_len, f.cap_len);
            decode(f.link, b, &mut rec);
            sum = sum.wrapping_add(rec.flow_hash as u64);
        }
    }
    let cpu = thread_cpu_s() - t;
    std::hint::black_box(sum);
    cpu
}

/// The records thread's work over every frame, as a live capture's
/// records thread does it block by block: (thread CPU s, process CPU s,
/// wall s).
fn records(input: &Input, root: &Path, stages: bool, rg_rows: Option<usize>) -> (f64, f64, f64) {
    let dataset = Dataset::create(root, true).expect("creating the dataset");
    let mut opts = WorkerOptions {
        rpc: Some(RpcOptions {
            mode: if stages { RpcMode::Auto } else { RpcMode::Off },
            ..Default::default()
        }),
        app: Some(AppOptions {
            on: stages,
            ..Default::default()
        }),
        ..Default::default()
    };
    opts.writer.prefault = true;
    if let Some(n) = rg_rows {
        opts.writer.row_group_rows = n;
    }
    let mut w = Worker::new(0, dataset, opts);
    // A live capture opens its first file before the traffic.
    w.open_file().expect("opening the packet file");
    let (t, p, wall) = (thread_cpu_s(), weir_bench::own_cpu_s(), Instant::now());
    for c in &input.chunks {
        for (f, b) in c.iter() {
            let meta = FrameMeta {
                ts_ns: f.ts_ns,
                wire_len: f.wire_len,
                link: f.link,
                iface: 0,
                pcap: Some((1, f.record_offset)),
            };
            w.frame(meta, b).expect("a record");
        }
    }
    let done = w.finish().expect("finishing the records");
    let r = (
        thread_cpu_s() - t,
        weir_bench::own_cpu_s() - p,
        wall.elapsed().as_secs_f64(),
    );
    assert_eq!(done.stats.frames, input.frames);
    let _ = std::fs::remove_dir_all(root);
    r
}

fn main() {
    if let Err(e) = run() {
        eprintln!("records: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let mut weir = None;
    let mut reps = 5usize;
    let mut frames = 4_000_000u64;
    let mut app_frames = 1_000_000u64;
    let mut traces = Vec::new();
    let mut dir = PathBuf::from("/dev/shm/weir-records-bench");
    let mut only = None;
    let mut once = false;
    let mut rg_rows = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    let count = |v: Option<&String>, flag: &str| -> Result<u64, String> {
        match v.and_then(|v| v.parse().ok()) {
            Some(n) if n > 0 => Ok(n),
            _ => Err(format!("{flag} takes a count above 0; {USAGE}")),
        }
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--weir" => weir = it.next().map(PathBuf::from),
            "--reps" => reps = count(it.next(), "--reps")? as usize,
            "--frames" => frames = count(it.next(), "--frames")?,
            "--app-frames" => app_frames = count(it.next(), "--app-frames")?,
            "--trace" => traces.push(PathBuf::from(
                it.next().ok_or(format!("--trace takes a file; {USAGE}"))?,
            )),
            "--dir" => {
                dir = PathBuf::from(
                    it.next()
                        .ok_or(format!("--dir takes a directory; {USAGE}"))?,
                )
            }
            "--only" => only = it.next().cloned(),
            "--once" => once = true,
            "--row-group-rows" => rg_rows = Some(count(it.next(), "--row-group-rows")? as usize),
            other => return Err(format!("unknown argument {other}; {USAGE}")),
        }
    }
    let weir = find_weir(weir.as_deref())?;
    let scratch = Scratch::create(&dir)?;
    let errlog = scratch.path("stderr.log");

    let mut sources: Vec<(String, PathBuf)> = Vec::new();
    let gens: [(&str, Vec<String>); 2] = [
        (
            "fixed64",
            [
                "--model", "fixed", "--size", "64", "--flows", "1024", "--seed", "1", "-c",
            ]
            .iter()
            .map(|s| s.to_string())
            .chain([frames.to_string()])
            .collect(),
        ),
        (
            "app",
            ["--model", "app", "--seed", "1", "-c"]
                .iter()
                .map(|s| s.to_string())
                .chain([app_frames.to_string()])
                .collect(),
        ),
    ];
    for (name, args) in gens {
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let path = scratch.path(&format!("{name}.pcap"));
        let what = format!("weir gen {} -w {}", args.join(" "), path.display());
        eprintln!("{what}");
        run_timed(
            &what,
            Command::new(&weir)
                .arg("gen")
                .args(&args)
                .arg("-w")
                .arg(&path),
            &errlog,
        )?;
        sources.push((name.to_string(), path));
    }
    for t in traces {
        let name = t
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        sources.push((name, t));
    }
    let mut inputs = Vec::new();
    for (name, path) in sources {
        let chunks = read_trace(&path)?;
        let frames = chunks.iter().map(|c| c.frames.len() as u64).sum();
        inputs.push(Input {
            name,
            path,
            chunks,
            frames,
        });
    }
    let root = scratch.path("ds");

    if once {
        for input in &inputs {
            let (cpu, _, _) = records(input, &root, true, rg_rows);
            println!(
                "{}: records {:.1} ns/frame (thread CPU, one run)",
                input.name,
                cpu * 1e9 / input.frames as f64
            );
        }
        return Ok(());
    }

    println!(
        "records: {reps} interleaved repetitions, medians (range); weir {}, {}; load average {}; files in {}",
        weir.display(),
        git_revision(),
        loadavg(),
        dir.display()
    );
    for input in &inputs {
        println!(
            "  {}: {} frames ({})",
            input.name,
            input.frames,
            input.path.display()
        );
    }
    // Per input: decode, records, records without stages (thread CPU),
    // records process CPU, convert wall, convert CPU.
    let mut figures: Vec<[Vec<f64>; 6]> = inputs.iter().map(|_| Default::default()).collect();
    for rep in 0..reps {
        for (input, f) in inputs.iter().zip(figures.iter_mut()) {
            let n = input.frames as f64;
            f[0].push(decode_only(input) * 1e9 / n);
            let (cpu, proc_cpu, _) = records(input, &root, true, rg_rows);
            f[1].push(cpu * 1e9 / n);
            f[3].push(proc_cpu * 1e9 / n);
            let (bare, _, _) = records(input, &root, false, rg_rows);
            f[2].push(bare * 1e9 / n);
            let _ = std::fs::remove_dir_all(&root);
            let what = format!("weir convert {} -j 1", input.path.display());
            let m = run_timed(
                &what,
                Command::new(&weir)
                    .arg("convert")
                    .arg(&input.path)
                    .arg("-o")
                    .arg(&root)
                    .args(["-j", "1", "--quiet"]),
                &errlog,
            )?;
            let _ = std::fs::remove_dir_all(&root);
            f[4].push(n / m.wall_s / 1e6);
            f[5].push(m.cpu_s() * 1e9 / n);
            eprintln!(
                "rep {}/{reps} {}: records {:.1} ns/frame, convert -j 1 {:.2} M frames/s",
                rep + 1,
                input.name,
                f[1].last().copied().unwrap_or_default(),
                f[4].last().copied().unwrap_or_default()
            );
        }
    }
    let show = |v: &[f64], digits: usize| {
        let s = spread(v);
        format!("{:.d$} ({:.d$}–{:.d$})", s.median, s.min, s.max, d = digits)
    };
    println!();
    println!(
        "| input | decode alone, ns/frame | records thread, ns/frame (default) | records without app/RPC | records, process CPU | convert -j 1, M frames/s | convert -j 1, CPU ns/frame |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|");
    for (input, f) in inputs.iter().zip(&figures) {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            input.name,
            show(&f[0], 1),
            show(&f[1], 1),
            show(&f[2], 1),
            show(&f[3], 1),
            show(&f[4], 2),
            show(&f[5], 0)
        );
    }
    Ok(())
}
