//! The `--shard` filter in the kernel: its cost per frame, and how evenly
//! it splits real traffic (bench/README.md, `shard`).
//!
//! 1. Cost: BPF_PROG_TEST_RUN runs each program REPEAT times on each of a
//!    sample of real frames (tcpdump's test corpus); the mean time per run
//!    of an empty program (`return -1`: the test harness itself) is
//!    subtracted. Programs: the shard test alone, the shard test with a
//!    translated tcpdump filter, the hash alone. Rounds interleave the
//!    programs; medians are printed.
//! 2. Evenness: frames and flows per share for N = 2, 4, 8, by the weir
//!    flow hash (the one the program computes, as the capture tests
//!    prove), on the corpus and on the shared NFS traces.
//!
//! Usage: shard [--data DIR] [--rounds N] [--repeat N]

use std::collections::HashSet;
use std::path::PathBuf;

use capture::bpf::{Asm, SocketProgram};
use capture::shard::{self, Shard, Verdict};
use pcapio::{ReaderOptions, TraceReader};
use wire::{Has, LinkType, PacketRecord, decode};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// (link, bytes) of every Ethernet or raw-IP frame of `paths` up to `max_len` bytes.
fn frames_of(paths: &[PathBuf], max_len: usize) -> Vec<(LinkType, Vec<u8>)> {
    let mut out = Vec::new();
    for p in paths {
        let Ok(mut r) = TraceReader::open(p, ReaderOptions::default()) else {
            continue;
        };
        while let Ok(Some(c)) = r.next_chunk() {
            for (f, b) in c.iter() {
                if matches!(f.link, LinkType::ETHERNET | LinkType::RAW)
                    && !b.is_empty()
                    && b.len() <= max_len
                {
                    out.push((f.link, b.to_vec()));
                }
            }
        }
    }
    out
}

fn flow_hash(link: LinkType, frame: &[u8]) -> Option<u32> {
    let mut rec = PacketRecord::new(0, frame.len() as u32, frame.len() as u32);
    decode(link, frame, &mut rec);
    rec.has(Has::FLOW).then_some(rec.flow_hash)
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("shard bench: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<(), String> {
    let mut data = weir_bench::default_data_dir();
    let (mut rounds, mut repeat) = (5usize, 200u32);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--data" => data = PathBuf::from(val()?),
            "--rounds" => rounds = val()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--repeat" => repeat = val()?.parse().map_err(|e| format!("--repeat: {e}"))?,
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: shard [--data DIR] [--rounds N] [--repeat N]"
                ));
            }
        }
    }
    let mut corpus: Vec<PathBuf> = std::fs::read_dir(data.join("tcpdump-tests"))
        .map_err(|e| format!("{}: {e}", data.join("tcpdump-tests").display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    corpus.sort();
    // A test run takes one page of data at most.
    let frames = frames_of(&corpus, 3000);
    let eth: Vec<&[u8]> = frames
        .iter()
        .filter(|(l, _)| *l == LinkType::ETHERNET)
        .map(|(_, f)| f.as_slice())
        .collect();
    println!("## shard: the --shard filter's cost in the kernel, and how evenly it splits\n");
    println!(
        "- frames: {} Ethernet frames of tcpdump's test corpus ({}), each run {repeat} times \
         per round through BPF_PROG_TEST_RUN; {rounds} rounds, programs interleaved",
        eth.len(),
        data.join("tcpdump-tests").display()
    );
    println!("- kernel {}", uname());

    let empty = {
        let mut a = Asm::new();
        a.ret(u32::MAX);
        a.finish()?
    };
    let filter = capture::compile_filter("tcp or udp", LinkType::ETHERNET, 262_144)
        .map_err(|e| e.to_string())?;
    let half = Verdict::Keep(Shard { index: 0, count: 2 });
    let empty = SocketProgram::load(&empty, "weir_bench").map_err(|e| e.to_string())?;
    let load = |name: &str, verdict, filter: Option<&[libc::sock_filter]>| {
        shard::load(LinkType::ETHERNET, verdict, filter, "weir_bench")
            .map_err(|e| format!("{name}: {e}"))
    };
    let loaded: Vec<(&str, usize, SocketProgram)> = vec![
        ("empty program (harness)", empty),
        (
            "flow hash only",
            load("flow hash only", Verdict::Hash, None)?,
        ),
        ("--shard 0/2", load("--shard 0/2", half, None)?),
        (
            "--shard 0/2 + \"tcp or udp\"",
            load("--shard 0/2 + tcp or udp", half, Some(&filter.program))?,
        ),
    ]
    .into_iter()
    .map(|(n, p)| (n, p.insns, p))
    .collect();
    let mut per_round: Vec<Vec<f64>> = vec![Vec::new(); loaded.len()];
    for _ in 0..rounds {
        for (k, (_, _, p)) in loaded.iter().enumerate() {
            let mut total_ns = 0f64;
            for f in &eth {
                let (_, ns) = p.test_run(f, repeat).map_err(|e| e.to_string())?;
                total_ns += ns as f64;
            }
            per_round[k].push(total_ns / eth.len() as f64);
        }
    }
    let base = median(per_round[0].clone());
    println!("\n| program | instructions | ns per frame (median) | less the harness |");
    println!("|---|---|---|---|");
    for ((name, insns, _), runs) in loaded.iter().zip(&per_round) {
        let m = median(runs.clone());
        println!("| {name} | {insns} | {m:.1} | {:.1} |", m - base);
    }

    println!(
        "\n| trace | N | frames: largest / smallest share | flows: largest / smallest | \
         frames without a flow hash (all in share 0) | largest flow's frames |"
    );
    println!("|---|---|---|---|---|---|");
    let nfs: Vec<PathBuf> = ["nfsv3", "nfsv4"]
        .iter()
        .map(|n| data.join("nfs").join(format!("{n}.pcap.zst")))
        .collect();
    for (name, set) in [
        ("tcpdump test corpus", frames),
        ("NFSv3 + NFSv4 traces", frames_of(&nfs, usize::MAX)),
    ] {
        let hashed: Vec<Option<u32>> = set.iter().map(|(l, f)| flow_hash(*l, f)).collect();
        let unhashed = hashed.iter().filter(|h| h.is_none()).count();
        let hashes: Vec<u32> = hashed.iter().map(|h| h.unwrap_or(0)).collect();
        let mut per_flow = std::collections::HashMap::new();
        for h in hashed.iter().flatten() {
            *per_flow.entry(*h).or_insert(0u64) += 1;
        }
        let largest = per_flow.values().max().copied().unwrap_or(0);
        for n in [2u32, 4, 8] {
            let mut frames = vec![0u64; n as usize];
            let mut flows = vec![HashSet::new(); n as usize];
            for &h in &hashes {
                let s = Shard::of(h, n) as usize;
                frames[s] += 1;
                flows[s].insert(h);
            }
            let ratio = |v: Vec<u64>| {
                let (max, min) = (*v.iter().max().unwrap(), *v.iter().min().unwrap());
                if min == 0 {
                    f64::INFINITY
                } else {
                    max as f64 / min as f64
                }
            };
            let flow_counts: Vec<u64> = flows.iter().map(|s| s.len() as u64).collect();
            println!(
                "| {name} ({} frames, {} flows) | {n} | {:.2} | {:.2} | {:.1} % | {:.1} % |",
                hashes.len(),
                per_flow.len(),
                ratio(frames),
                ratio(flow_counts),
                unhashed as f64 * 100.0 / hashes.len() as f64,
                largest as f64 * 100.0 / hashes.len() as f64
            );
        }
    }
    Ok(())
}

fn uname() -> String {
    std::process::Command::new("uname")
        .arg("-r")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
