//! What the integrity record costs: BLAKE3 per GB as weir's writers take
//! it (util::digest, on the bytes as they are written), reading a file
//! back and digesting it (what `weir verify` and the small tables do),
//! `b3sum` on the same file, and SHA-256 beside them (`openssl dgst
//! -sha256`, coreutils' `sha256sum`: the hash weir does not use, and
//! why), in one run, repetitions interleaved, medians.
//!
//! Usage: digest [--mib N] [--reps N] [--dir DIR]   (default 512 MiB, 5
//! reps, a scratch directory under /var/tmp)

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use weir_bench::{Scratch, spread};

fn main() {
    let mut mib = 512usize;
    let mut reps = 5usize;
    let mut dir = PathBuf::from("/var/tmp/weir-bench-digest");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&a));
        match a.as_str() {
            "--mib" => mib = value().parse().unwrap_or_else(|_| usage("--mib")),
            "--reps" => reps = value().parse().unwrap_or_else(|_| usage("--reps")),
            "--dir" => dir = PathBuf::from(value()),
            _ => usage(&a),
        }
    }
    let scratch = Scratch::create(&dir).unwrap_or_else(|e| {
        eprintln!("digest: {e}");
        std::process::exit(2)
    });
    let cpu = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpu
        .lines()
        .find_map(|l| l.strip_prefix("model name\t: "))
        .unwrap_or("?");
    let sha_ni = cpu
        .lines()
        .any(|l| l.starts_with("flags") && l.contains(" sha_ni"));
    println!("# digest: what a file digest costs per GB");
    println!(
        "setup: {mib} MiB of random bytes, {reps} reps interleaved; CPU {model} (SHA extensions: {}, AVX-512: {}); {} cores",
        if sha_ni { "yes" } else { "no" },
        if cpu.contains(" avx512f") {
            "yes"
        } else {
            "no"
        },
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    // Random bytes (xorshift), so no stage can shortcut them.
    let mut data = vec![0u8; mib << 20];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for chunk in data.chunks_exact_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes());
    }
    let file = scratch.path("data.bin");
    std::fs::File::create(&file)
        .and_then(|mut f| f.write_all(&data))
        .expect("write the scratch file");
    let gb = data.len() as f64 / 1e9;
    let tool = |prog: &str, args: &[&str]| -> Option<f64> {
        let t = Instant::now();
        let ok = Command::new(prog)
            .args(args)
            .arg(&file)
            .output()
            .ok()?
            .status
            .success();
        ok.then(|| gb / t.elapsed().as_secs_f64())
    };
    let names = [
        "weir BLAKE3, as written (util::digest::Hasher, in memory)",
        "weir BLAKE3, read back (util::digest::digest_file, page cache)",
        "b3sum --num-threads 1",
        "openssl dgst -sha256 (SHA-256, the CPU's SHA extensions)",
        "sha256sum (coreutils)",
    ];
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for _ in 0..reps {
        let t = Instant::now();
        let mut h = util::digest::Hasher::new();
        for piece in data.chunks(1 << 20) {
            h.update(piece);
        }
        std::hint::black_box(h.finish());
        runs[0].push(gb / t.elapsed().as_secs_f64());
        let t = Instant::now();
        std::hint::black_box(util::digest::digest_file(&file).expect("read back"));
        runs[1].push(gb / t.elapsed().as_secs_f64());
        if let Some(r) = tool("b3sum", &["--num-threads", "1"]) {
            runs[2].push(r);
        }
        if let Some(r) = tool("openssl", &["dgst", "-sha256"]) {
            runs[3].push(r);
        }
        if let Some(r) = tool("sha256sum", &[]) {
            runs[4].push(r);
        }
    }
    println!("| digest | GB/s (median, min–max) | s of one core per GB |");
    println!("|---|--:|--:|");
    for (name, r) in names.iter().zip(&runs) {
        if r.is_empty() {
            println!("| {name} | not run (tool missing) | |");
            continue;
        }
        let s = spread(r);
        println!(
            "| {name} | {} | {:.2} |",
            s.show(r.len(), |v| format!("{v:.2}")),
            1.0 / s.median
        );
    }
}

fn usage(what: &str) -> ! {
    eprintln!("digest: bad argument {what}; usage: digest [--mib N] [--reps N] [--dir DIR]");
    std::process::exit(2)
}
