//! The DNS, TLS and HTTP decoders alone, per core: DNS messages parsed
//! (a query and a response with answers, names compressed), TLS
//! ClientHellos parsed with and without their JA3 and JA4, and HTTP
//! request heads parsed, side by side in one run, medians of 5
//! repetitions. Then, given `--weir`, `weir convert` of the app mix
//! (`weir gen --model app`) with the decoders and with `--no-app`: CPU
//! (user + system) per frame, REPS runs of each interleaved, medians and
//! the median of the per-pair ratios. bench/app.sh runs it with its setup.
//!
//! Usage: app [MESSAGES] [--weir PATH] [--frames N] [--reps N]
//!   (default 1M messages; 500k frames of the app mix; 5 repetitions)

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use app::dns::{self, DnsMessage, TYPE_A, TYPE_CNAME};
use app::http::Request;
use app::tls::{self, ClientHello};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// This thread's CPU time, s: on a shared machine the rate per CPU
/// second is the rate per core, where the wall clock would count the time
/// other processes had the core.
fn thread_cpu() -> f64 {
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Messages per CPU second (and per wall second) of `f` over `inputs`,
/// `n` calls, medians of 5.
fn rate(n: usize, inputs: &[Vec<u8>], mut f: impl FnMut(&[u8])) -> (f64, f64) {
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let (c, t) = (thread_cpu(), Instant::now());
        for i in 0..n {
            f(&inputs[i % inputs.len()]);
        }
        wall.push(n as f64 / t.elapsed().as_secs_f64());
        cpu.push(n as f64 / (thread_cpu() - c));
    }
    (median(cpu), median(wall))
}

/// CPU seconds (user + sys) of a child process.
fn cpu_of(cmd: &mut Command) -> f64 {
    let mut child = cmd.spawn().expect("spawning weir");
    let pid = child.id() as i32;
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child, with valid pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid, "wait4");
    let _ = child.try_wait();
    assert!(status == 0, "weir exited with {status}");
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut n = 1_000_000usize;
    let mut weir: Option<PathBuf> = None;
    let mut frames = 500_000u64;
    let mut reps = 5usize;
    const USAGE: &str = "usage: app [MESSAGES] [--weir PATH] [--frames N] [--reps N]";
    let count = |v: Option<&String>, flag: &str| -> u64 {
        match v.and_then(|v| v.parse().ok()) {
            Some(n) if n > 0 => n,
            _ => {
                eprintln!("{flag} takes a count above 0; {USAGE}");
                std::process::exit(2)
            }
        }
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--weir" => weir = it.next().map(PathBuf::from),
            "--frames" => frames = count(it.next(), "--frames"),
            "--reps" => reps = count(it.next(), "--reps") as usize,
            v => n = count(Some(&v.to_string()), "MESSAGES") as usize,
        }
    }
    println!(
        "decoders, one thread, {n} messages each, medians of 5 runs, per CPU second (and per wall second)"
    );
    let mut cname = Vec::new();
    dns::push_name(&mut cname, "edge.cdn.example.net");
    let dns_msgs: Vec<Vec<u8>> = vec![
        dns::build(0x1234, 0x0100, ("www.example.com", TYPE_A, 1), &[]),
        dns::build(
            0x1234,
            0x8180,
            ("www.example.com", TYPE_A, 1),
            &[
                (TYPE_CNAME, 300, &cname),
                (TYPE_A, 60, &[192, 0, 2, 1]),
                (TYPE_A, 60, &[192, 0, 2, 2]),
            ],
        ),
    ];
    let mut m = DnsMessage::default();
    let dns_rate = rate(n, &dns_msgs, |b| {
        let _ = black_box(m.parse(black_box(b)));
    });
    let hellos: Vec<Vec<u8>> = [
        (
            Some("www.example.com"),
            &["h2", "http/1.1"][..],
            &[0x0a0a, 0x0304, 0x0303][..],
        ),
        (Some("api.example.net"), &["http/1.1"][..], &[][..]),
    ]
    .iter()
    .map(|(sni, alpn, v)| {
        tls::build_client_hello(
            [9; 32],
            &[
                0x0a0a, 0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8,
            ],
            *sni,
            alpn,
            v,
            &[0x0a0a, 29, 23, 24],
        )
    })
    .collect();
    let (mut ch, mut scratch) = (ClientHello::default(), Vec::new());
    let tls_parse = rate(n, &hellos, |b| {
        let _ = black_box(ch.parse_stream(black_box(b), &mut scratch));
    });
    let tls_full = rate(n, &hellos, |b| {
        if ch.parse_stream(black_box(b), &mut scratch).is_ok() {
            black_box((ch.ja3(), ch.ja4()));
        }
    });
    let reqs: Vec<Vec<u8>> = vec![
        b"GET /index.html HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n"
            .to_vec(),
    ];
    let http_rate = rate(n, &reqs, |b| {
        let _ = black_box(Request::parse(black_box(b)));
    });
    println!("  {:<44} {:>10} {:>10}", "", "M/CPU-s", "(M/wall-s)");
    for (what, (cpu, wall), target) in [
        ("DNS messages", dns_rate, "   (target >= 5 M/s)"),
        ("TLS ClientHellos, parsed", tls_parse, ""),
        (
            "TLS ClientHellos, parsed + JA3 + JA4",
            tls_full,
            "   (target >= 2 M/s)",
        ),
        ("HTTP request heads", http_rate, ""),
    ] {
        println!(
            "  {what:<44} {:>10.2} {:>10}{target}",
            cpu / 1e6,
            format!("({:.2})", wall / 1e6)
        );
    }

    let Some(weir) = weir else {
        println!("(give --weir PATH to compare weir convert with and without the decoders)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("weir-bench-app-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("app.pcap");
    let ok = Command::new(&weir)
        .args([
            "gen",
            "--model",
            "app",
            "-c",
            &frames.to_string(),
            "--seed",
            "1",
            "-w",
        ])
        .arg(&pcap)
        .status()
        .unwrap()
        .success();
    assert!(ok, "weir gen");
    // The stage's tracker alone over the trace's segments (decoded
    // beforehand, as the workers do), its records dropped as the stage
    // takes them: what the stage adds before its tables are written.
    let chunks = weir_bench::read_trace(&pcap).expect("reading the generated trace");
    let segments = weir_bench::segments_of(&chunks);
    let mut tracker_ns = Vec::new();
    let mut rows = 0;
    for _ in 0..reps {
        let c = thread_cpu();
        let mut t = app::Tracker::new(app::TrackerOptions::default());
        rows = 0;
        for (chunk, segs) in chunks.iter().zip(&segments) {
            for seg in ingest::chunk_segments(chunk, segs) {
                t.track(&seg);
                if t.ready() >= 256 {
                    rows += t.ready();
                    t.dns.clear();
                    t.tls.clear();
                    t.http.clear();
                }
            }
        }
        t.end();
        rows += t.ready();
        tracker_ns.push((thread_cpu() - c) / frames as f64 * 1e9);
    }
    drop((chunks, segments));
    println!(
        "the app tracker alone over the same trace ({rows} dns/tls/http rows), median of {reps}: {:.1} ns CPU/frame",
        median(tracker_ns)
    );
    println!(
        "weir convert of the app mix ({frames} frames, one worker), with and without the decoders, {reps} interleaved runs:"
    );
    let (mut with, mut without, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps {
        for no_app in [false, true] {
            let out = dir.join(format!("ds-{rep}-{no_app}"));
            let mut c = Command::new(&weir);
            c.arg("convert")
                .arg(&pcap)
                .arg("-o")
                .arg(&out)
                .args(["-q", "-j", "1"]);
            if no_app {
                c.arg("--no-app");
            }
            let cpu = cpu_of(&mut c);
            let _ = std::fs::remove_dir_all(&out);
            if no_app { &mut without } else { &mut with }.push(cpu / frames as f64 * 1e9);
        }
        ratios.push(with[rep] / without[rep]);
        println!(
            "  run {}: {:.1} / {:.1} ns CPU/frame with / without",
            rep + 1,
            with[rep],
            without[rep]
        );
    }
    let (w, wo) = (median(with), median(without));
    println!("  medians:");
    println!(
        "  {:<44} {:>10.1} ns CPU/frame",
        "with DNS/TLS/HTTP decoding", w
    );
    println!("  {:<44} {:>10.1} ns CPU/frame", "--no-app", wo);
    println!(
        "  {:<44} {:>10.3}x   (target <= 1.10x)",
        "ratio of the medians",
        w / wo
    );
    println!(
        "  {:<44} {:>10.3}x",
        "median of the per-run ratios",
        median(ratios)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
