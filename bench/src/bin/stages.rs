//! Per-stage costs of the conversion path on one core, in ns per frame:
//! reading a pcap from memory, decoding frames, and writing records.
//! Usage: stages FILE.pcap

use std::time::Instant;

use pcapio::{ReaderOptions, TraceReader};
use store::{PacketWriter, PacketWriterOptions, RowOrder};
use wire::{PacketRecord, decode};

fn main() {
    let path = std::env::args().nth(1).expect("usage: stages FILE.pcap");
    let mut chunks = Vec::new();
    let t = Instant::now();
    let mut r = TraceReader::open(&path, ReaderOptions::default()).expect("open");
    while let Some(c) = r.next_chunk().expect("read") {
        chunks.push(c);
    }
    let n: usize = chunks.iter().map(|c| c.frames.len()).sum();
    let per = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
    println!("frames {n}");
    println!("read+index      {:6.1} ns/frame", per(t.elapsed()));

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
