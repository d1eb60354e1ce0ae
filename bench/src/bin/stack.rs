//! What recording the host stack costs: TCP throughput between two network
//! namespaces (iperf3 over a veth pair) with and without `weir stack`
//! recording, interleaved in one run, and the events per second it kept
//! without loss.
//!
//!   cargo run --release -p weir-bench --bin stack -- [--seconds 5] [--reps 5]
//!       [--modes all,no-acks,no-devices] [--weir PATH] [--json FILE]
//!
//! Needs root, iperf3 and iproute2. Traffic flows only between the two
//! namespaces this makes and removes; every iperf3 run is bounded in time.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_bench::*;

const PORT: &str = "5201";
const SERVER_IP: &str = "10.77.0.2";

struct Args {
    seconds: u64,
    reps: usize,
    /// weir stack's --ring-size.
    ring: String,
    weir: Option<PathBuf>,
    json: Option<PathBuf>,
    /// The recording modes to compare with no recording (all by default).
    modes: Vec<Mode>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 5,
        reps: 5,
        ring: "8Mi".into(),
        weir: None,
        json: None,
        modes: vec![Mode::Stack, Mode::StackNoAcks, Mode::StackNoDev],
    };
    let mut it = std::env::args().skip(1);
    while let Some(w) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match w.as_str() {
            "--seconds" => a.seconds = val("--seconds")?.parse().map_err(|e| format!("{e}"))?,
            "--reps" => a.reps = val("--reps")?.parse().map_err(|e| format!("{e}"))?,
            "--weir" => a.weir = Some(PathBuf::from(val("--weir")?)),
            "--ring-size" => a.ring = val("--ring-size")?,
            "--json" => a.json = Some(PathBuf::from(val("--json")?)),
            "--modes" => {
                a.modes = val("--modes")?
                    .split(',')
                    .map(Mode::parse)
                    .collect::<Result<_, _>>()?
            }
            "--quick" => {
                a.seconds = 2;
                a.reps = 2;
            }
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: stack [--seconds N] [--reps N] [--quick] \
                     [--modes all,no-acks,no-devices] [--ring-size SIZE] [--weir PATH] \
                     [--json FILE]"
                ));
            }
        }
    }
    if a.seconds == 0 || a.seconds > 120 || a.reps == 0 {
        return Err("--seconds 1..120 and --reps ≥ 1".into());
    }
    Ok(a)
}

/// The ways a transfer runs.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    /// weir stack, every event type (application, TCP, devices).
    Stack,
    /// weir stack --no-device-acks: pure ACKs left out at the device.
    StackNoAcks,
    /// weir stack without device events.
    StackNoDev,
}

impl Mode {
    /// `--modes`' names for the recording modes.
    fn parse(s: &str) -> Result<Mode, String> {
        match s {
            "all" => Ok(Mode::Stack),
            "no-acks" => Ok(Mode::StackNoAcks),
            "no-devices" => Ok(Mode::StackNoDev),
            _ => Err(format!(
                "--modes {s}: give a comma-separated list of all, no-acks, no-devices"
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Plain => "no recording",
            Mode::Stack => "weir stack (all events)",
            Mode::StackNoAcks => "weir stack --no-device-acks",
            Mode::StackNoDev => "weir stack --no-devices",
        }
    }
}

#[derive(Default, Clone)]
struct Run {
    gbps: f64,
    /// This run's rate over the same rep's run without recording.
    paired: f64,
    events: u64,
    lost: u64,
    recorder_cpu_s: f64,
    seconds: f64,
}

fn iperf_json(out: &[u8]) -> Result<f64, String> {
    let v: Value =
        serde_json::from_slice(out).map_err(|e| format!("iperf3 -J: unreadable output: {e}"))?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .ok_or_else(|| format!("iperf3 -J: no received rate: {}", v["error"]))
}

fn transfer(net: &Net, seconds: u64) -> Result<f64, String> {
    let out = Command::new("timeout")
        .arg((seconds + 30).to_string())
        .args([
            "ip", "netns", "exec", &net.a, "iperf3", "-c", SERVER_IP, "-p", PORT,
        ])
        .args(["-t", &seconds.to_string(), "-J"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("iperf3: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "iperf3 client failed: {}",
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .find(|l| l.contains("error"))
                .unwrap_or("")
        ));
    }
    Ok(iperf_json(&out.stdout)? / 1e9)
}

fn start_recorder(
    weir: &Path,
    ds: &Path,
    mode: Mode,
    ring: &str,
    program_stats: bool,
) -> Result<Child, String> {
    let mut cmd = Command::new(weir);
    cmd.arg("stack")
        .arg("-o")
        .arg(ds)
        .args(["--port", PORT, "--force", "--ring-size", ring]);
    if program_stats {
        cmd.arg("--program-stats");
    }
    match mode {
        Mode::StackNoDev => {
            cmd.arg("--no-devices");
        }
        Mode::StackNoAcks => {
            cmd.arg("--no-device-acks");
        }
        Mode::Plain | Mode::Stack => {}
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("weir stack: {e}"))?;
    // Ready once it says so (the programs are attached by then).
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().ok_or("no stderr")?;
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) if l.contains("recording into") => return Ok(child),
            Ok(l) => seen.push(l),
            Err(_) => {
                // SAFETY: kill(2) on our own child.
                unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
                let _ = child.wait();
                return Err(format!("weir stack did not start: {}", seen.join("; ")));
            }
        }
    }
}

/// What `weir stack` reported: events, lost, its CPU seconds, and the
/// manifest's per-program cost (with --program-stats).
struct Recorded {
    events: u64,
    lost: u64,
    cpu_s: f64,
    program_cost: Value,
}

fn stop_recorder(child: Child, ds: &Path) -> Result<Recorded, String> {
    let pid = child.id() as libc::pid_t;
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child with valid out-pointers.
    if unsafe { libc::wait4(pid, &mut status, 0, &mut ru) } != pid {
        return Err(format!("wait4: {}", std::io::Error::last_os_error()));
    }
    drop(child);
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!("weir stack ended with status {status}"));
    }
    let m: Value = serde_json::from_str(
        &fs::read_to_string(ds.join("manifest.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let sum = |k: &str| -> u64 {
        m["stack"][k]
            .as_object()
            .map(|o| o.values().filter_map(Value::as_u64).sum())
            .unwrap_or(0)
    };
    Ok(Recorded {
        events: sum("events"),
        lost: sum("lost"),
        cpu_s: tv(ru.ru_utime) + tv(ru.ru_stime),
        program_cost: m["stack"]["program_cost"].clone(),
    })
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("bench stack: {e}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<(), String> {
    let args = parse_args()?;
    install_signal_handlers();
    let weir = find_weir(args.weir.as_deref())?;
    need_tool("iperf3", "iperf3")?;
    let net = Net::create("weir-stackbench")?;
    for (ns, addr) in [(&net.a, "10.77.0.1/24"), (&net.b, "10.77.0.2/24")] {
        let ok = Command::new("ip")
            .args(["-n", ns, "addr", "add", addr, "dev", IFACE])
            .status()
            .map_err(|e| e.to_string())?
            .success();
        if !ok {
            return Err(format!("ip addr add {addr} in {ns} failed"));
        }
    }
    let scratch = Scratch::create(&std::env::temp_dir().join("weir-bench-stack"))?;
    let ds = scratch.path("ds");
    let mut server = Command::new("ip")
        .args(["netns", "exec", &net.b, "iperf3", "-s", "-p", PORT])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("iperf3 server: {e}"))?;
    std::thread::sleep(Duration::from_millis(500));

    let iperf_version = tool_output(Path::new("iperf3"), &["--version"]).unwrap_or_default();
    println!("# weir stack: TCP throughput with and without recording");
    println!();
    println!("- git {}", git_revision());
    println!(
        "- kernel {}, {} CPUs, {}",
        fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        first_line_of("/proc/cpuinfo", "model name").unwrap_or_default()
    );
    println!("- {iperf_version}");
    println!(
        "- iperf3 -c over a veth pair between two namespaces, {} s per run, {} reps, modes \
         interleaved; weir stack --port {PORT} --ring-size {} in the root namespace, not pinned; \
         ÷ no recording is the median over reps of each run's rate over the same rep's run \
         without recording",
        args.seconds, args.reps, args.ring
    );
    println!();

    let modes: Vec<Mode> = std::iter::once(Mode::Plain)
        .chain(args.modes.iter().copied())
        .collect();
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); modes.len()];
    for rep in 0..args.reps {
        // Rotate the order so that no mode always runs first.
        for k in 0..modes.len() {
            let i = (k + rep) % modes.len();
            let mode = modes[i];
            check_interrupted()?;
            let run = if mode == Mode::Plain {
                Run {
                    gbps: transfer(&net, args.seconds)?,
                    seconds: args.seconds as f64,
                    ..Default::default()
                }
            } else {
                let rec = start_recorder(&weir, &ds, mode, &args.ring, false)?;
                let t0 = Instant::now();
                let gbps = transfer(&net, args.seconds);
                let secs = t0.elapsed().as_secs_f64();
                let r = stop_recorder(rec, &ds)?;
                Run {
                    gbps: gbps?,
                    events: r.events,
                    lost: r.lost,
                    recorder_cpu_s: r.cpu_s,
                    seconds: secs,
                    ..Default::default()
                }
            };
            eprintln!(
                "rep {} {:<26} {:6.2} Gb/s  events {:>10} lost {}",
                rep + 1,
                mode.name(),
                run.gbps,
                group_digits(run.events),
                group_digits(run.lost)
            );
            runs[i].push(run);
        }
    }
    for rep in 0..args.reps {
        let plain = runs[0][rep].gbps;
        for r in runs.iter_mut() {
            r[rep].paired = r[rep].gbps / plain;
        }
    }

    // What the programs cost in the kernel, per run of each: one more
    // recording per mode with the kernel's BPF statistics on (they add two
    // clock reads per run, so these runs are not in the table above).
    let mut costs = Vec::new();
    for mode in modes.iter().skip(1) {
        check_interrupted()?;
        let rec = start_recorder(&weir, &ds, *mode, &args.ring, true)?;
        let gbps = transfer(&net, args.seconds);
        let r = stop_recorder(rec, &ds)?;
        costs.push((*mode, gbps?, r.program_cost));
    }
    let _ = server.kill();
    let _ = server.wait();

    let base = spread(&runs[0].iter().map(|r| r.gbps).collect::<Vec<_>>()).median;
    println!("| mode | Gb/s median (min–max) | ÷ no recording | events/s | lost | recorder CPU |");
    println!("|---|---|---|---|---|---|");
    let mut out = Vec::new();
    for (i, mode) in modes.iter().enumerate() {
        let r = &runs[i];
        let g = spread(&r.iter().map(|x| x.gbps).collect::<Vec<_>>());
        let paired = spread(&r.iter().map(|x| x.paired).collect::<Vec<_>>());
        let eps = spread(
            &r.iter()
                .map(|x| x.events as f64 / x.seconds.max(1e-9))
                .collect::<Vec<_>>(),
        );
        let lost: u64 = r.iter().map(|x| x.lost).sum();
        let cpu = spread(
            &r.iter()
                .map(|x| x.recorder_cpu_s / x.seconds.max(1e-9))
                .collect::<Vec<_>>(),
        );
        let is_plain = *mode == Mode::Plain;
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            mode.name(),
            g.show(args.reps, |x| format!("{x:.2}")),
            if is_plain {
                ratio(1.0)
            } else {
                paired.show(args.reps, |x| format!("{x:.2}×"))
            },
            if is_plain {
                "—".into()
            } else {
                eps.show(args.reps, |x| group_digits(x as u64))
            },
            if is_plain {
                "—".into()
            } else {
                group_digits(lost)
            },
            if is_plain {
                "—".into()
            } else {
                cpu.show(args.reps, |x| format!("{:.0} %", x * 100.0))
            }
        );
        out.push(json!({
            "mode": mode.name(),
            "gbps": g.json(),
            "ratio_to_plain": g.median / base,
            "paired_ratio": paired.json(),
            "events_per_s": eps.json(),
            "lost": lost,
            "recorder_cpu_share": cpu.json(),
            "runs": r.iter().map(|x| json!({"gbps": x.gbps, "events": x.events, "lost": x.lost,
                "recorder_cpu_s": x.recorder_cpu_s, "seconds": x.seconds})).collect::<Vec<_>>(),
        }));
    }
    println!();
    for (mode, r) in modes.iter().zip(&runs).skip(1) {
        let slow = 1.0 - spread(&r.iter().map(|r| r.paired).collect::<Vec<_>>()).median;
        let target = if *mode == Mode::Stack {
            " (target ≤ 5 %)"
        } else {
            ""
        };
        println!("slowdown, {}: {:.1} %{target}", mode.name(), slow * 100.0);
    }
    println!();
    println!(
        "In-kernel cost (weir stack --program-stats, one more run per mode): ns per program run"
    );
    println!();
    const PROGRAMS: [&str; 5] = ["dev_xmit", "dev_recv", "tcp_probe", "recv", "send"];
    println!(
        "| mode | Gb/s | {} | kernel CPU per second |",
        PROGRAMS.join(" | ")
    );
    println!("|---|---|{}---|", "---|".repeat(PROGRAMS.len()));
    let mut cost_json = Vec::new();
    for (mode, gbps, cost) in &costs {
        let per_run = |p: &str| -> String {
            let c = &cost[p];
            match (c["runs"].as_u64(), c["ns"].as_u64()) {
                (Some(n), Some(ns)) if n > 0 => format!("{:.0}", ns as f64 / n as f64),
                _ => "—".into(),
            }
        };
        let total_ns: u64 = cost
            .as_object()
            .map(|o| o.values().filter_map(|c| c["ns"].as_u64()).sum())
            .unwrap_or(0);
        println!(
            "| {} | {gbps:.2} | {} | {:.1} % |",
            mode.name(),
            PROGRAMS.map(per_run).join(" | "),
            total_ns as f64 / 1e9 / args.seconds as f64 * 100.0
        );
        cost_json.push(json!({"mode": mode.name(), "gbps": gbps, "program_cost": cost}));
    }
    if let Some(p) = &args.json {
        fs::write(
            p,
            serde_json::to_string_pretty(&json!({"results": out, "program_cost": cost_json}))
                .unwrap_or_default(),
        )
        .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}
