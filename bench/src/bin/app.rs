//! The DNS, TLS and HTTP decoders alone, per core: DNS messages parsed
//! (a query and a response with answers, names compressed), TLS
//! ClientHellos parsed with and without their JA3 and JA4, and HTTP
//! request heads parsed, side by side in one run, medians of 5
//! repetitions. Then `weir convert` of the app mix with the decoders and
//! with `--no-app`: CPU per frame, interleaved, medians.
//!
//! Usage: app [MESSAGES] [--weir PATH] [--frames N]
//!   (default 1M messages; 500k frames of the app mix)

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

/// Messages per second of `f` over `inputs`, `n` calls, median of 5.
fn rate(n: usize, inputs: &[Vec<u8>], mut f: impl FnMut(&[u8])) -> f64 {
    let runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for i in 0..n {
                f(&inputs[i % inputs.len()]);
            }
            n as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    median(runs)
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
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--weir" => weir = it.next().map(PathBuf::from),
            "--frames" => frames = it.next().and_then(|v| v.parse().ok()).unwrap_or(frames),
            v => {
                n = v
                    .parse()
                    .expect("usage: app [MESSAGES] [--weir PATH] [--frames N]")
            }
        }
    }
    println!("decoders, one core, {n} messages each, median of 5 runs");
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
    println!(
        "  {:<44} {:>10.2} M/s   (target >= 5 M/s)",
        "DNS messages",
        dns_rate / 1e6
    );
    println!(
        "  {:<44} {:>10.2} M/s",
        "TLS ClientHellos, parsed",
        tls_parse / 1e6
    );
    println!(
        "  {:<44} {:>10.2} M/s   (target >= 2 M/s)",
        "TLS ClientHellos, parsed + JA3 + JA4",
        tls_full / 1e6
    );
    println!(
        "  {:<44} {:>10.2} M/s",
        "HTTP request heads",
        http_rate / 1e6
    );

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
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for rep in 0..5 {
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
    }
    let (w, wo) = (median(with), median(without));
    println!(
        "weir convert of the app mix ({frames} frames, one worker, 5 interleaved runs, medians):"
    );
    println!(
        "  {:<44} {:>10.1} ns CPU/frame",
        "with DNS/TLS/HTTP decoding", w
    );
    println!("  {:<44} {:>10.1} ns CPU/frame", "--no-app", wo);
    println!("  {:<44} {:>10.3}x   (target <= 1.10x)", "ratio", w / wo);
    let _ = std::fs::remove_dir_all(&dir);
}
