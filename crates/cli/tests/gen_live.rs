//! `weir gen -i` on a veth pair between two network namespaces that each
//! test makes and removes: frames go from namespace `a` to `b` and nowhere
//! else, and every send is bounded in count and time. The receiving end's
//! interface counters say what arrived.

mod common;

use std::sync::Mutex;
use std::time::Duration;

use common::background::Background;
use common::netns::{IFACE, VethPair};
use common::*;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// The tests measure rates on a small machine: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// A veth pair whose `a` end sends nothing of its own (no IPv6 router
/// solicitations or MLD reports), so that `b`'s counters see only weir's
/// frames.
fn quiet_pair(tag: &str) -> VethPair {
    let net = VethPair::new(tag);
    let out = VethPair::exec(&net.a, "sysctl")
        .args(["-qw", &format!("net.ipv6.conf.{IFACE}.disable_ipv6=1")])
        .output()
        .expect("run sysctl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Whatever IPv6 sent on the way down has arrived by now.
    std::thread::sleep(Duration::from_millis(200));
    net
}

fn gen_in(ns: &str, args: &[&str]) -> Run {
    let mut cmd = VethPair::exec(ns, WEIR);
    cmd.arg("gen").args(args);
    run_bounded(cmd, Duration::from_secs(60))
}

/// Runs `weir gen -i veth0 ARGS --json` in `a`; returns its report and what
/// `b` received meanwhile (frames, bytes).
fn send(net: &VethPair, args: &[&str]) -> (serde_json::Value, u64, u64) {
    let before = VethPair::rx(&net.b);
    let mut all = vec!["-i", IFACE, "--json"];
    all.extend_from_slice(args);
    let r = gen_in(&net.a, &all);
    assert_eq!(r.code(), 0, "weir gen {args:?}: {}", r.stderr());
    let after = VethPair::rx(&net.b);
    let report: serde_json::Value = serde_json::from_str(r.stdout().trim())
        .unwrap_or_else(|e| panic!("--json prints one object ({e}): {}", r.stdout()));
    (report, after.0 - before.0, after.1 - before.1)
}

fn num(v: &serde_json::Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {key:?} in {v}"))
}

#[test]
fn sends_exactly_the_frames_asked_for() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let net = quiet_pair("gen-exact");
    for tx in ["sendmmsg", "ring"] {
        let (rep, frames, bytes) = send(
            &net,
            &[
                "--count", "5000", "--rate", "50000", "--size", "128", "--tx", tx,
            ],
        );
        assert_eq!(frames, 5000, "{tx}: b received {frames} frames: {rep}");
        assert_eq!(bytes, 5000 * 128, "{tx}: b received {bytes} bytes");
        assert_eq!(rep["frames"], 5000);
        assert_eq!(rep["bytes"], 5000 * 128);
        assert_eq!(rep["method"], tx);
        assert_eq!(rep["ended_by"], "count");
        assert_eq!(rep["interface"], IFACE);
        // Paced to 50k/s: never faster. (How much slower depends on how
        // busy the machine is; `the_rate_is_honoured` checks the rate.)
        let pps = num(&rep, "pps");
        assert!(pps > 0.0 && pps < 60_000.0, "{tx}: {pps} frames/s");
        let gbps = num(&rep, "gbps");
        assert!((gbps - pps * 128.0 * 8.0 / 1e9).abs() < 1e-6, "{rep}");
        assert!(num(&rep, "wire_gbps") > gbps);
    }

    // A list of sizes is cycled: 3 × (64 + 512 + 1514) bytes per 9 frames.
    let (rep, frames, bytes) = send(&net, &["--count", "9000", "--size", "64,512,1514"]);
    assert_eq!((frames, bytes), (9000, 3000 * (64 + 512 + 1514)), "{rep}");
    assert_eq!(rep["bytes"], 3000 * (64 + 512 + 1514));

    // The plain-text summary.
    let r = gen_in(&net.a, &["-i", IFACE, "--count", "1000", "--size", "200"]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let out = r.stdout();
    assert!(
        out.starts_with("weir gen: sent 1,000 frames (200,000 bytes) in "),
        "{out}"
    );
    assert!(out.contains(" Mpps, ") && out.contains(" Gb/s"), "{out}");
}

#[test]
fn the_rate_is_honoured() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let net = quiet_pair("gen-rate");
    let (rep, frames, _) = send(
        &net,
        &["--rate", "50k", "--duration", "1s", "--size", "100"],
    );
    assert_eq!(rep["ended_by"], "duration");
    assert_eq!(rep["frames"].as_u64(), Some(frames), "reported = received");
    assert!(
        (40_000..=60_000).contains(&frames),
        "{frames} frames in 1 s at 50k/s"
    );
    let pps = num(&rep, "pps");
    assert!((40_000.0..60_000.0).contains(&pps), "{pps}");

    // 20k/s in 100 ms bursts every 200 ms: 0.5 s on in 1 s, 10k frames.
    let (rep, frames, _) = send(
        &net,
        &[
            "--rate",
            "20000",
            "--burst",
            "100ms/100ms",
            "--duration",
            "1s",
        ],
    );
    assert_eq!(rep["frames"].as_u64(), Some(frames));
    assert!((8_000..=12_000).contains(&frames), "{frames} frames");
}

#[test]
fn a_duration_ends_a_flood() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let net = quiet_pair("gen-duration");
    for tx in ["sendmmsg", "ring"] {
        let started = std::time::Instant::now();
        let (rep, frames, bytes) = send(
            &net,
            &[
                "--duration",
                "1s",
                "--rate",
                "max",
                "--size",
                "1514",
                "--tx",
                tx,
            ],
        );
        let wall = started.elapsed();
        assert!(wall < Duration::from_secs(5), "{tx}: took {wall:?}");
        assert_eq!(rep["ended_by"], "duration");
        let elapsed = num(&rep, "elapsed_s");
        assert!((1.0..1.5).contains(&elapsed), "{tx}: {elapsed} s");
        // As fast as it goes, and still every frame counted once.
        assert_eq!(rep["frames"].as_u64(), Some(frames), "{tx}");
        assert_eq!(rep["bytes"].as_u64(), Some(bytes), "{tx}");
        assert_eq!(bytes, frames * 1514);
        assert!(frames > 10_000, "{tx}: only {frames} frames in 1 s");
    }
}

#[test]
fn ctrl_c_stops_sending() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let net = quiet_pair("gen-sigint");
    let before = VethPair::rx(&net.b);
    let mut cmd = VethPair::exec(&net.a, WEIR);
    cmd.args([
        "gen",
        "-i",
        IFACE,
        "--json",
        "--rate",
        "100k",
        "--duration",
        "20s",
    ]);
    let g = Background::start(cmd, "", Duration::from_secs(30));
    // Building the frames takes up to a second in a debug build.
    std::thread::sleep(Duration::from_millis(2000));
    g.signal(libc::SIGINT);
    let r = g.wait(Duration::from_secs(10));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.elapsed < Duration::from_secs(5), "{:?}", r.elapsed);
    let rep: serde_json::Value = serde_json::from_str(r.stdout().trim()).unwrap();
    assert_eq!(rep["ended_by"], "signal");
    let after = VethPair::rx(&net.b);
    assert_eq!(rep["frames"].as_u64(), Some(after.0 - before.0));
    assert!(after.0 - before.0 > 20_000, "{rep}");
}

#[test]
fn bad_arguments_are_refused_clearly() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let net = VethPair::new("gen-args");
    let s = Scratch::new("gen-args");
    let file = s.join("x.pcap");
    let file = file.to_str().unwrap();
    // (arguments, exit status, part of the message)
    let cases: &[(&[&str], i32, &str)] = &[
        (&["-i", IFACE], 2, "-i needs --count N or --duration D"),
        (&["-i", IFACE, "-c", "10", "--rate", "0"], 2, "above 0"),
        (
            &["-i", IFACE, "-c", "10", "--rate", "fast"],
            2,
            "not a rate",
        ),
        (
            &["-i", IFACE, "-c", "10", "--size", "jumbo"],
            2,
            "not a frame size",
        ),
        (
            &["-i", IFACE, "-c", "10", "--size", "59"],
            2,
            "outside 60..=9000",
        ),
        (
            &["-i", IFACE, "-c", "10", "--size", "64,x"],
            2,
            "not a frame size",
        ),
        (&["-i", IFACE, "-c", "10", "--burst", "1s"], 2, "ON/OFF"),
        (
            &["-i", IFACE, "-c", "10", "--duration", "soon"],
            2,
            "not a duration",
        ),
        (&["-i", IFACE, "-c", "10", "--flows", "0"], 2, "--flows 0"),
        (&["-i", IFACE, "-c", "10", "--batch", "0"], 2, "--batch 0"),
        (
            &["-i", IFACE, "-c", "10", "--tx", "carrier-pigeon"],
            2,
            "carrier-pigeon",
        ),
        (
            &["-i", IFACE, "-c", "10", "-w", file],
            2,
            "cannot be used with",
        ),
        (&["-c", "10"], 2, "-w FILE (a pcap file) or -i IF"),
        (
            &["-w", file, "--rate", "max"],
            2,
            "--rate max applies to -i",
        ),
        (
            &["-w", file, "--duration", "1s"],
            2,
            "--duration applies to -i",
        ),
        (
            &["-w", file, "--model", "app", "--payload", "zero"],
            2,
            "--payload applies",
        ),
        (
            &["-w", file, "--model", "fixed", "--size", "imix"],
            2,
            "one --size",
        ),
        (
            &["-i", "nosuch0", "-c", "10"],
            1,
            "no interface named \"nosuch0\"",
        ),
        (
            &["-i", IFACE, "-c", "10", "--size", "9000"],
            1,
            "does not fit veth0 (MTU 1500",
        ),
    ];
    for (args, code, msg) in cases {
        let r = gen_in(&net.a, args);
        assert_eq!(r.code(), *code, "{args:?}: {}", r.stderr());
        assert!(r.stderr().contains(msg), "{args:?}: {}", r.stderr());
    }
    assert!(!std::path::Path::new(file).exists());

    // A link that is down.
    let out = std::process::Command::new("ip")
        .args(["-n", &net.a, "link", "set", IFACE, "down"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let r = gen_in(&net.a, &["-i", IFACE, "-c", "10"]);
    assert_eq!(r.code(), 1);
    assert!(r.stderr().contains("veth0 is down"), "{}", r.stderr());
}
