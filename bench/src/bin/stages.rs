//! Per-stage costs of the conversion path on one core, in ns per frame:
//! reading a pcap from memory, decoding frames, writing records, and the
//! RPC stage (tracking transactions, writing the rpc and nfs tables).
//! Usage: stages FILE.pcap [--rpc-only] [--reps N]
//! (`--rpc-only` skips the packet stages; `--reps` times the RPC stage's
//! halves N times and prints each run and the medians, for a profiler or a
//! noisy machine. Without the packet stages before it, the RPC stage's
//! first run allocates fresh pages, which are slow on these machines: take
//! the median of several, and compare like with like.)

use std::time::Instant;

use store::rpc::{NFS_DIR, RPC_DIR, RpcWriter};
use store::{PacketWriter, PacketWriterOptions, RowOrder};
use weir_bench::{read_trace, segments_of, spread, track};
use wire::{PacketRecord, decode};

fn main() {
    const USAGE: &str = "usage: stages FILE.pcap [--rpc-only] [--reps N]";
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first().filter(|a| !a.starts_with('-')) else {
        eprintln!("{USAGE}");
        std::process::exit(2);
    };
    let rpc_only = args.iter().any(|a| a == "--rpc-only");
    let reps: usize = match args.iter().position(|a| a == "--reps") {
        Some(i) => match args.get(i + 1).and_then(|v| v.parse().ok()) {
            Some(n) if n > 0 => n,
            _ => {
                eprintln!("--reps takes a count above 0; {USAGE}");
                std::process::exit(2);
            }
        },
        None => 1,
    };
    let t = Instant::now();
    let chunks = read_trace(std::path::Path::new(path)).expect("read");
    let n: usize = chunks.iter().map(|c| c.frames.len()).sum();
    let per = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
    println!("frames {n}");
    println!("read+index      {:6.1} ns/frame", per(t.elapsed()));

    if !rpc_only {
        // Decode into a reused buffer: what a worker does, without the writer.
        let mut recs: Vec<PacketRecord> = Vec::with_capacity(1 << 16);
        let mut sum = 0u64;
        let t = Instant::now();
        for c in &chunks {
            recs.clear();
            for (f, b) in c.iter() {
                let mut rec = PacketRecord::new(f.ts_ns, f.wire_len, f.cap_len);
                decode(f.link, b, &mut rec);
                recs.push(rec);
            }
            sum += recs.iter().map(|r| r.flow_hash as u64).sum::<u64>();
        }
        let decode_ns = per(t.elapsed());
        println!("decode          {decode_ns:6.1} ns/frame  (checksum {sum:x})");

        for order in [RowOrder::Arrival, RowOrder::Flow] {
            let dir = std::env::temp_dir().join("weir-stages.parquet");
            let t = Instant::now();
            let opts = PacketWriterOptions {
                prefault: false,
                order,
                ..Default::default()
            };
            let mut w = PacketWriter::create(&dir, "x", opts).expect("create");
            for c in &chunks {
                for (f, b) in c.iter() {
                    w.push_with(|rec| {
                        rec.ts_ns = f.ts_ns;
                        rec.wire_len = f.wire_len;
                        rec.cap_len = f.cap_len;
                        decode(f.link, b, rec);
                    })
                    .expect("push");
                }
            }
            let s = w.finish().expect("finish");
            let total = per(t.elapsed());
            println!(
                "decode+write {:8}  {total:6.1} ns/frame  (write {:5.1})  {:.2} B/frame",
                format!("{order:?}"),
                total - decode_ns,
                s.bytes as f64 / n as f64
            );
        }
    }

    // The RPC stage: the tracker alone over every TCP/UDP segment in
    // capture order (decoded beforehand, as the workers do), its
    // transactions taken in batches as the stage takes them; then the
    // tables written from them.
    let segments = segments_of(&chunks);
    // Timed: each batch of transactions is dropped once taken, as the
    // stage's are once written (their memory is then reused; keeping them
    // all would make every allocation touch new pages and double the
    // figure). Then, untimed, the same again keeping them for the writer.
    let mut txs = Vec::new();
    track(&chunks, &segments, Some(&mut txs));
    let per_tx = |ns_per_frame: f64| ns_per_frame * n as f64 / txs.len().max(1) as f64;
    let root = std::env::temp_dir().join("weir-stages-rpc");
    let (mut tracks, mut writes) = (Vec::new(), Vec::new());
    let (mut each, mut batched) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        let count = track(&chunks, &segments, None);
        let track_ns = per(t.elapsed());
        assert_eq!(count, txs.len());
        println!(
            "rpc track       {track_ns:6.1} ns/frame  ({:.0} ns per transaction, {} transactions)",
            per_tx(track_ns),
            txs.len()
        );
        let _ = std::fs::remove_dir_all(&root);
        for d in [RPC_DIR, NFS_DIR] {
            std::fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        let t = Instant::now();
        let mut w = RpcWriter::new(&root, 0, 1 << 22);
        for tx in &txs {
            w.push(tx).expect("push");
        }
        w.finish().expect("finish");
        let write_ns = per(t.elapsed());
        println!(
            "rpc write       {write_ns:6.1} ns/frame  ({:.0} ns per transaction)",
            per_tx(write_ns)
        );
        for (batch, into) in [(1, &mut each), (256, &mut batched)] {
            let t = Instant::now();
            let rows = weir_bench::track_and_write(&chunks, &segments, &root, batch);
            let ns = per(t.elapsed());
            assert_eq!(rows as usize, txs.len());
            println!(
                "rpc stage, written {batch:3} at a time  {ns:6.1} ns/frame  ({:.0} ns per transaction)",
                per_tx(ns)
            );
            into.push(ns);
        }
        tracks.push(track_ns);
        writes.push(write_ns);
    }
    if reps > 1 {
        let (t, w) = (spread(&tracks).median, spread(&writes).median);
        println!(
            "median of {reps}: rpc track {t:.1} ns/frame ({:.0} per transaction), rpc write {w:.1} ns/frame ({:.0} per transaction)",
            per_tx(t),
            per_tx(w)
        );
        let (e, b) = (spread(&each).median, spread(&batched).median);
        println!(
            "median of {reps}: rpc stage (track and write), each transaction written as it completes {e:.1} ns/frame ({:.0} per transaction), 256 at a time {b:.1} ns/frame ({:.0} per transaction)",
            per_tx(e),
            per_tx(b)
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}
