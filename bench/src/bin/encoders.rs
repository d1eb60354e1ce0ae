//! What one value costs weir's column encoders, by the pattern of the
//! values: the same value again (rows grouped by flow), a few or many
//! values in random order (the rpc and nfs tables, where a column's value
//! changes nearly every row), mostly nulls (nfs detail columns), climbing
//! times (DELTA_BINARY_PACKED). Pages of 64 Ki rows and zstd level 1, as
//! the rpc tables are written; ns per value, median of the runs.
//!
//! Usage: encoders [VALUES] [RUNS]   (default 4 Mi values, 5 runs)

use std::time::Instant;

use pqcodec::encode::{ColumnEncoder, ColumnSpec, EncodeOptions, Mode, Value};
use weir_bench::spread;

const PAGE_ROWS: usize = 64 * 1024;
/// One case: ns per value of a run.
type Case<'a> = Box<dyn Fn() -> f64 + 'a>;
const GROUP_ROWS: usize = 1 << 20;

/// Pushes `values` into a fresh encoder, ending pages and row groups
/// where the rpc writer does; ns per value.
fn time<K: Value>(spec: ColumnSpec, values: &[Option<K>]) -> f64 {
    let opts = EncodeOptions {
        page_rows: PAGE_ROWS,
        ..EncodeOptions::default()
    };
    let mut zstd = zstd::bulk::Compressor::new(opts.zstd_level).expect("zstd");
    let mut e = ColumnEncoder::new(spec, &opts);
    let t = Instant::now();
    for (i, v) in values.iter().enumerate() {
        match *v {
            Some(v) => e.push(v),
            None => e.push_null(),
        }
        if (i + 1) % PAGE_ROWS == 0 {
            e.end_page(&mut zstd).expect("page");
        }
        if (i + 1) % GROUP_ROWS == 0 {
            e.finish(&mut zstd).expect("row group");
        }
    }
    e.finish(&mut zstd).expect("row group");
    t.elapsed().as_nanos() as f64 / values.len().max(1) as f64
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4 << 20);
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5).max(1);
    // A fixed xorshift, so every run and machine sees the same values.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let u32s = |f: &mut dyn FnMut(usize) -> Option<u32>| (0..n).map(f).collect::<Vec<_>>();
    let same = u32s(&mut |_| Some(7));
    let four = u32s(&mut |_| Some((next() % 4) as u32));
    let thousand = u32s(&mut |_| Some((next() % 1000) as u32));
    let sparse = u32s(&mut |_| (next() % 10 == 0).then(|| (next() % 1000) as u32));
    let times: Vec<Option<u64>> = (0..n as u64)
        .map(|i| Some(1_700_000_000_000_000_000 + i * 1000 + next() % 500))
        .collect();
    let dict = |nullable| ColumnSpec::new(nullable, Mode::Dictionary);
    let cases: Vec<(&str, Case)> = vec![
        (
            "dictionary, the same value",
            Box::new(|| time(dict(false), &same)),
        ),
        (
            "dictionary, 4 values at random",
            Box::new(|| time(dict(false), &four)),
        ),
        (
            "dictionary, 1000 values at random",
            Box::new(|| time(dict(false), &thousand)),
        ),
        (
            "dictionary, nullable, 90 % null",
            Box::new(|| time(dict(true), &sparse)),
        ),
        (
            "delta, climbing times",
            Box::new(|| time(ColumnSpec::signed(false, Mode::Delta), &times)),
        ),
    ];
    println!("## encoders: ns per value of weir's column encoders");
    println!();
    println!(
        "- {n} values per case, pages of {PAGE_ROWS} rows, row groups of {GROUP_ROWS}, zstd level 1; median of {runs} runs, cases interleaved"
    );
    println!();
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..runs {
        for (r, (_, case)) in results.iter_mut().zip(&cases) {
            r.push(case());
        }
    }
    println!("| values | ns per value, median (min–max) |");
    println!("|---|---|");
    for ((name, _), r) in cases.iter().zip(results) {
        let s = spread(&r);
        println!("| {name} | {:.2} ({:.2}–{:.2}) |", s.median, s.min, s.max);
    }
}
