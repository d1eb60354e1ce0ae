//! What recording the host stack costs, measured the way MAGNeT was: TCP
//! throughput between two network namespaces (iperf3 over a veth pair)
//! with no recording, with `weir stack` (its default: a walk over the
//! sockets every interval, nothing on the packet path), with
//! `--with-device` (per-packet programs added up per socket in the
//! kernel), with `weir stack --events all`, and with
//! tcpdump capturing 128-byte headers of the same traffic on the
//! receiving and on the sending interface; interleaved in one run, for
//! one stream and for several (`--streams 1,8`). Reports each mode's rate
//! over the same rep's rate without recording, the recorder's CPU, and
//! what it lost. `--idle-sockets 1000,10000` then measures the default
//! mode's own CPU with that many idle TCP connections open (every one
//! walked each 100 ms interval), and the walk's cost per socket.
//!
//!   cargo run --release -p weir-bench --bin stack -- [--seconds 5] [--reps 5]
//!       [--streams 1,8] [--modes default,device,delay,all,tcpdump-rx,tcpdump-tx,
//!       no-acks,no-devices] [--idle-sockets 1000,10000] [--weir PATH] [--json FILE]
//!
//! Needs root, iperf3, tcpdump and iproute2. Traffic flows only between the
//! two namespaces this makes and removes; every iperf3 run is bounded in
//! time.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_bench::*;

const PORT: &str = "5201";
const SERVER_IP: &str = "10.77.0.2";

/// The iperf3 server, stopped when dropped: on an error return too, which
/// would otherwise leave it running in a namespace already removed.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Args {
    seconds: u64,
    reps: usize,
    /// weir stack's --ring-size.
    ring: String,
    weir: Option<PathBuf>,
    json: Option<PathBuf>,
    /// The recording modes to compare with no recording.
    modes: Vec<Mode>,
    /// iperf3 -P: parallel streams, one table per count.
    streams: Vec<u32>,
    /// Idle connections for the walk's cost, one table row per count.
    idle_sockets: Vec<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seconds: 5,
        reps: 5,
        ring: "8Mi".into(),
        weir: None,
        json: None,
        modes: vec![
            Mode::Stack,
            Mode::StackDevice,
            Mode::StackAll,
            Mode::TcpdumpRx,
        ],
        streams: vec![1, 8],
        idle_sockets: Vec::new(),
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
                    .filter(|m| !m.is_empty())
                    .map(Mode::parse)
                    .collect::<Result<_, _>>()?
            }
            "--idle-sockets" => {
                a.idle_sockets = val("--idle-sockets")?
                    .split(',')
                    .map(|n| {
                        n.parse::<usize>()
                            .map_err(|e| format!("--idle-sockets {n}: {e}"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--streams" => {
                a.streams = val("--streams")?
                    .split(',')
                    .map(|n| n.parse::<u32>().map_err(|e| format!("--streams {n}: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--quick" => {
                a.seconds = 2;
                a.reps = 2;
            }
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: stack [--seconds N] [--reps N] [--quick] \
                     [--streams 1,8] [--modes default,device,delay,all,tcpdump-rx,\
                     tcpdump-tx,no-acks,no-devices] [--idle-sockets 1000,10000] \
                     [--ring-size SIZE] [--weir PATH] [--json FILE]"
                ));
            }
        }
    }
    if a.seconds == 0 || a.seconds > 120 || a.reps == 0 {
        return Err("--seconds 1..120 and --reps ≥ 1".into());
    }
    if a.idle_sockets.iter().any(|&n| n == 0 || n > 30_000) {
        return Err("--idle-sockets: counts from 1 to 30000".into());
    }
    if a.streams.is_empty() || a.streams.iter().any(|&n| n == 0 || n > 128) {
        return Err("--streams: counts from 1 to 128".into());
    }
    Ok(a)
}

/// The ways a transfer runs.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Plain,
    /// weir stack as it runs by default: the socket walk.
    Stack,
    /// --with-device: per-packet programs added up per socket.
    StackDevice,
    /// --with-delay: and the write-to-wire delay.
    StackDelay,
    /// weir stack --events all: every event type (application, TCP,
    /// devices), one record each.
    StackAll,
    /// --events all --no-device-acks: pure ACKs left out at the device.
    StackNoAcks,
    /// --events all without device events.
    StackNoDev,
    /// tcpdump -s 128 -w on the receiving end's interface.
    TcpdumpRx,
    /// ... on the sending end's.
    TcpdumpTx,
}

impl Mode {
    /// `--modes`' names for the recording modes.
    fn parse(s: &str) -> Result<Mode, String> {
        match s {
            "default" => Ok(Mode::Stack),
            "device" => Ok(Mode::StackDevice),
            "delay" => Ok(Mode::StackDelay),
            "all" => Ok(Mode::StackAll),
            "no-acks" => Ok(Mode::StackNoAcks),
            "no-devices" => Ok(Mode::StackNoDev),
            "tcpdump-rx" => Ok(Mode::TcpdumpRx),
            "tcpdump-tx" => Ok(Mode::TcpdumpTx),
            _ => Err(format!(
                "--modes {s}: give a comma-separated list of default, device, delay, all, \
                 no-acks, no-devices, tcpdump-rx, tcpdump-tx"
            )),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Mode::Plain => "no recording",
            Mode::Stack => "weir stack (default: socket walk)",
            Mode::StackDevice => "weir stack --with-device",
            Mode::StackDelay => "weir stack --with-delay",
            Mode::StackAll => "weir stack --events all",
            Mode::StackNoAcks => "--events all --no-device-acks",
            Mode::StackNoDev => "--events all --no-devices",
            Mode::TcpdumpRx => "tcpdump -s 128 -w, receiver",
            Mode::TcpdumpTx => "tcpdump -s 128 -w, sender",
        }
    }

    fn is_tcpdump(self) -> bool {
        matches!(self, Mode::TcpdumpRx | Mode::TcpdumpTx)
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

fn transfer(net: &Net, seconds: u64, streams: u32) -> Result<f64, String> {
    let out = Command::new("timeout")
        .arg((seconds + 30).to_string())
        .args([
            "ip", "netns", "exec", &net.a, "iperf3", "-c", SERVER_IP, "-p", PORT,
        ])
        .args(["-t", &seconds.to_string(), "-P", &streams.to_string(), "-J"])
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

/// A recorder running: its process and its stderr lines.
struct Recorder {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

fn start_recorder(
    weir: &Path,
    ds: &Path,
    net: &Net,
    mode: Mode,
    ring: &str,
    program_stats: bool,
) -> Result<Recorder, String> {
    let mut cmd = if mode.is_tcpdump() {
        // tcpdump -s 128 -w on one end's interface, in its namespace (`ip
        // netns exec` execs it: the child's PID is tcpdump's, for the
        // signal and its CPU time).
        let ns = if mode == Mode::TcpdumpRx {
            &net.b
        } else {
            &net.a
        };
        fs::create_dir_all(ds).map_err(|e| format!("{}: {e}", ds.display()))?;
        let mut cmd = Command::new("ip");
        cmd.args([
            "netns", "exec", ns, "tcpdump", "-i", IFACE, "-s", "128", "-n",
        ])
        .arg("-w")
        .arg(ds.join("capture.pcap"))
        .args(["tcp", "port", PORT]);
        cmd
    } else {
        let mut cmd = Command::new(weir);
        cmd.arg("stack")
            .arg("-o")
            .arg(ds)
            .args(["--port", PORT, "--force", "--ring-size", ring]);
        if program_stats {
            cmd.arg("--program-stats");
        }
        match mode {
            Mode::StackAll => {
                cmd.args(["--events", "all"]);
            }
            Mode::StackNoDev => {
                cmd.args(["--events", "all", "--no-devices"]);
            }
            Mode::StackNoAcks => {
                cmd.args(["--events", "all", "--no-device-acks"]);
            }
            Mode::StackDevice => {
                cmd.arg("--with-device");
            }
            Mode::StackDelay => {
                cmd.arg("--with-delay");
            }
            Mode::Plain | Mode::Stack | Mode::TcpdumpRx | Mode::TcpdumpTx => {}
        }
        cmd
    };
    let ready = if mode.is_tcpdump() {
        "listening on"
    } else {
        "recording into"
    };
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", mode.name()))?;
    // Ready once it says so (weir's programs are attached by then; tcpdump
    // has its socket bound). Its later lines are kept for its counts.
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
            Ok(l) if l.contains(ready) => return Ok(Recorder { child, lines: rx }),
            Ok(l) => seen.push(l),
            Err(_) => {
                // SAFETY: kill(2) on our own child.
                unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
                let _ = child.wait();
                return Err(format!(
                    "{} did not start: {}",
                    mode.name(),
                    seen.join("; ")
                ));
            }
        }
    }
}

/// What a recorder reported: events (tcpdump: frames captured), lost
/// (tcpdump: dropped by the kernel), its CPU seconds, and the manifest's
/// per-program cost (weir with --program-stats).
struct Recorded {
    events: u64,
    lost: u64,
    cpu_s: f64,
    program_cost: Value,
}

fn stop_recorder(rec: Recorder, ds: &Path, mode: Mode) -> Result<Recorded, String> {
    let Recorder { child, lines } = rec;
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
    let cpu_s = tv(ru.ru_utime) + tv(ru.ru_stime);
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!("{} ended with status {status}", mode.name()));
    }
    if mode.is_tcpdump() {
        // "N packets captured", "N packets dropped by kernel".
        let mut captured = 0;
        let mut dropped = 0;
        while let Ok(l) = lines.recv_timeout(Duration::from_secs(5)) {
            let n = l
                .split_whitespace()
                .next()
                .and_then(|w| w.parse::<u64>().ok())
                .unwrap_or(0);
            if l.contains("packets captured") {
                captured = n;
            } else if l.contains("dropped by kernel") {
                dropped = n;
            }
        }
        let _ = fs::remove_file(ds.join("capture.pcap"));
        return Ok(Recorded {
            events: captured,
            lost: dropped,
            cpu_s,
            program_cost: Value::Null,
        });
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
        cpu_s,
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
    need_tool("tcpdump", "tcpdump")?;
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
    let server = Server(
        Command::new("ip")
            .args(["netns", "exec", &net.b, "iperf3", "-s", "-p", PORT])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("iperf3 server: {e}"))?,
    );
    std::thread::sleep(Duration::from_millis(500));

    let iperf_version = tool_output(Path::new("iperf3"), &["--version"]).unwrap_or_default();
    println!("# weir stack: TCP throughput with and without recording, beside tcpdump");
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
        "- iperf3 -c [-P streams] over a veth pair between two namespaces, {} s per run, {} reps, \
         modes interleaved; weir stack --port {PORT} --ring-size {} in the root namespace, not \
         pinned; tcpdump -s 128 -w in the receiver's or the sender's namespace on its veth \
         (filter tcp port {PORT}); ÷ no recording is the median over reps of each run's rate over \
         the same rep's run without recording; records/s: weir's rows (intervals and events), \
         tcpdump's frames captured; lost: weir's events lost (ring or socket map full), tcpdump's \
         drops by the kernel",
        args.seconds, args.reps, args.ring
    );
    println!();

    let modes: Vec<Mode> = std::iter::once(Mode::Plain)
        .chain(args.modes.iter().copied())
        .collect();
    let mut all_json = Vec::new();
    if !args.modes.is_empty() {
        for &streams in &args.streams {
            all_json.push(measure(&args, &weir, &net, &ds, &modes, streams)?);
        }
    }
    drop(server);
    let mut idle_json = Vec::new();
    if !args.idle_sockets.is_empty() {
        idle_json = idle_cost(&args, &weir, &net, &ds)?;
    }
    if let Some(p) = &args.json {
        fs::write(
            p,
            serde_json::to_string_pretty(
                &json!({ "by_streams": all_json, "idle_sockets": idle_json }),
            )
            .unwrap_or_default(),
        )
        .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// Every mode over `args.reps` interleaved reps of `streams` parallel
/// streams; prints the tables, returns them as JSON.
fn measure(
    args: &Args,
    weir: &Path,
    net: &Net,
    ds: &Path,
    modes: &[Mode],
    streams: u32,
) -> Result<Value, String> {
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); modes.len()];
    for rep in 0..args.reps {
        // Rotate the order so that no mode always runs first.
        for k in 0..modes.len() {
            let i = (k + rep) % modes.len();
            let mode = modes[i];
            check_interrupted()?;
            let run = if mode == Mode::Plain {
                Run {
                    gbps: transfer(net, args.seconds, streams)?,
                    seconds: args.seconds as f64,
                    ..Default::default()
                }
            } else {
                let rec = start_recorder(weir, ds, net, mode, &args.ring, false)?;
                let t0 = Instant::now();
                let gbps = transfer(net, args.seconds, streams);
                let secs = t0.elapsed().as_secs_f64();
                let r = stop_recorder(rec, ds, mode)?;
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
                "{streams} stream(s) rep {} {:<32} {:6.2} Gb/s  records {:>10} lost {}",
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

    // What weir's programs cost in the kernel, per run of each: one more
    // recording per weir mode with the kernel's BPF statistics on (they add
    // two clock reads per run, so these runs are not in the table above).
    let mut costs = Vec::new();
    for mode in modes.iter().skip(1).filter(|m| !m.is_tcpdump()) {
        check_interrupted()?;
        let rec = start_recorder(weir, ds, net, *mode, &args.ring, true)?;
        let gbps = transfer(net, args.seconds, streams);
        let r = stop_recorder(rec, ds, *mode)?;
        costs.push((*mode, gbps?, r.program_cost));
    }

    println!("## {streams} stream(s)");
    println!();
    println!(
        "| mode | Gb/s median (min–max) | ÷ no recording, paired | records/s | lost | recorder CPU |"
    );
    println!("|---|---|---|---|---|---|");
    let base = spread(&runs[0].iter().map(|r| r.gbps).collect::<Vec<_>>()).median;
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
                paired.show(args.reps, |x| format!("{x:.3}×"))
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
                cpu.show(args.reps, |x| format!("{:.1} %", x * 100.0))
            }
        );
        out.push(json!({
            "mode": mode.name(),
            "gbps": g.json(),
            "ratio_to_plain": g.median / base,
            "paired_ratio": paired.json(),
            "records_per_s": eps.json(),
            "lost": lost,
            "recorder_cpu_share": cpu.json(),
            "runs": r.iter().map(|x| json!({"gbps": x.gbps, "records": x.events, "lost": x.lost,
                "recorder_cpu_s": x.recorder_cpu_s, "seconds": x.seconds})).collect::<Vec<_>>(),
        }));
    }
    println!();
    let slow = |m: Mode| -> Option<f64> {
        let i = modes.iter().position(|x| *x == m)?;
        Some(1.0 - spread(&runs[i].iter().map(|r| r.paired).collect::<Vec<_>>()).median)
    };
    for mode in modes.iter().skip(1) {
        let s = slow(*mode).unwrap_or(0.0);
        let target = match mode {
            Mode::Stack => " (target ≤ 1 %, below tcpdump's on the receiver in every rep)",
            Mode::StackAll => " (target: less than tcpdump's)",
            _ => "",
        };
        println!("slowdown, {}: {:.1} %{target}", mode.name(), s * 100.0);
    }
    if let (Some(w), Some(t)) = (
        modes.iter().position(|m| *m == Mode::Stack),
        modes.iter().position(|m| *m == Mode::TcpdumpRx),
    ) {
        let below = (0..args.reps)
            .filter(|&rep| runs[w][rep].paired > runs[t][rep].paired)
            .count();
        println!(
            "reps where the default mode lost less than tcpdump on the receiver: {below} of {}",
            args.reps
        );
    }
    let plain = spread(&runs[0].iter().map(|r| r.gbps).collect::<Vec<_>>());
    println!(
        "no recording's own spread: {:.1} % ((max − min) ÷ median)",
        (plain.max - plain.min) / plain.median.max(1e-9) * 100.0
    );
    println!();
    println!(
        "In-kernel cost (weir stack --program-stats, one more run per weir mode): ns per program run"
    );
    println!();
    const PROGRAMS: [&str; 7] = [
        "dev_xmit",
        "dev_recv",
        "tcp_probe",
        "recv",
        "send",
        "state",
        "walk",
    ];
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
    println!();
    Ok(json!({"streams": streams, "results": out, "program_cost": cost_json}))
}

/// The port of the idle connections.
const IDLE_PORT: u16 = 5202;

/// `n` idle TCP connections from namespace a to b, held open while the
/// returned sockets live (client ends, then server ends).
fn hold_sockets(
    net: &Net,
    n: usize,
) -> Result<(Vec<std::net::TcpStream>, Vec<std::net::TcpStream>), String> {
    // Both ends of every connection, and some to spare, up to the hard
    // limit (raising that needs CAP_SYS_RESOURCE).
    let want = (2 * n + 256) as libc::rlim_t;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid limit block.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    if lim.rlim_max < want {
        return Err(format!(
            "--idle-sockets {n}: needs {want} open files, the hard limit is {} (ulimit -Hn)",
            lim.rlim_max
        ));
    }
    lim.rlim_cur = lim.rlim_cur.max(want);
    // SAFETY: as above.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(format!(
            "raising the open file limit to {want}: {}",
            std::io::Error::last_os_error()
        ));
    }
    let in_ns = |ns: String| -> Result<(), String> {
        let f = fs::File::open(format!("/run/netns/{ns}")).map_err(|e| format!("{ns}: {e}"))?;
        use std::os::fd::AsRawFd;
        // SAFETY: setns on a descriptor we hold; affects this thread only.
        if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!("setns {ns}: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    };
    let (tx, rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let b = net.b.clone();
    let server = std::thread::spawn(move || -> Result<Vec<std::net::TcpStream>, String> {
        let listening = (|| -> Result<std::net::TcpListener, String> {
            in_ns(b)?;
            std::net::TcpListener::bind((SERVER_IP, IDLE_PORT)).map_err(|e| e.to_string())
        })();
        let l = match listening {
            Ok(l) => {
                let _ = tx.send(Ok(()));
                l
            }
            Err(e) => {
                let _ = tx.send(Err(e.clone()));
                return Err(e);
            }
        };
        (0..n)
            .map(|_| l.accept().map(|(s, _)| s).map_err(|e| e.to_string()))
            .collect()
    });
    rx.recv().map_err(|e| e.to_string())??;
    let a = net.a.clone();
    let clients = std::thread::spawn(move || -> Result<Vec<std::net::TcpStream>, String> {
        in_ns(a)?;
        (0..n)
            .map(|_| {
                std::net::TcpStream::connect_timeout(
                    &(
                        SERVER_IP.parse::<std::net::IpAddr>().expect("an address"),
                        IDLE_PORT,
                    )
                        .into(),
                    Duration::from_secs(10),
                )
                .map_err(|e| format!("connecting idle socket: {e}"))
            })
            .collect()
    })
    .join()
    .map_err(|_| "the connecting thread panicked".to_string())??;
    let servers = server
        .join()
        .map_err(|_| "the accepting thread panicked".to_string())??;
    Ok((clients, servers))
}

/// CPU time of all of a process's threads so far, ns (the scheduler's
/// own count, finer than the clock ticks of /proc/PID/stat).
fn cpu_ns(pid: libc::pid_t) -> u64 {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The default mode's own CPU with `n` idle connections open (2n sockets
/// walked every 100 ms), and the walk program's time per socket.
fn idle_cost(args: &Args, weir: &Path, net: &Net, ds: &Path) -> Result<Vec<Value>, String> {
    println!("## The socket walk's own cost, idle connections");
    println!();
    println!(
        "weir stack --interval 100ms --port {IDLE_PORT}, {} s per run from 1 s after it \
         started recording, {} reps; sockets: both ends of the connections; CPU: weir's \
         threads' run time (/proc/PID/task/*/schedstat; the walk runs in its read(2) of the \
         iterator) over the run; walk ns/socket: the walk program's run time \
         per socket it visits (--program-stats, one more run)",
        args.seconds, args.reps
    );
    println!();
    println!("| sockets | CPU, % of a core: median (min–max) | walk ns per socket | lost |");
    println!("|---|---|---|---|");
    let mut out = Vec::new();
    for &n in &args.idle_sockets {
        check_interrupted()?;
        let held = hold_sockets(net, n)?;
        let run = |stats: bool| -> Result<(f64, Recorded), String> {
            let mut cmd = Command::new(weir);
            cmd.arg("stack").arg("-o").arg(ds).args([
                "--port",
                &IDLE_PORT.to_string(),
                "--force",
                "--interval",
                "100ms",
                "--sockets",
                &(4 * n).max(65536).to_string(),
            ]);
            if stats {
                cmd.arg("--program-stats");
            }
            let mut child = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("weir stack: {e}"))?;
            let pid = child.id() as libc::pid_t;
            let mut err = BufReader::new(child.stderr.take().ok_or("no stderr")?);
            let mut line = String::new();
            while !line.contains("recording into") {
                line.clear();
                if err.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                    let _ = child.wait();
                    return Err("weir stack ended before it recorded".into());
                }
            }
            // Its own CPU while it records: loading the programs is not
            // part of it, so the window opens after a settling second.
            std::thread::sleep(Duration::from_secs(1));
            let (c0, t0) = (cpu_ns(pid), Instant::now());
            std::thread::sleep(Duration::from_secs(args.seconds));
            let (c1, secs) = (cpu_ns(pid), t0.elapsed().as_secs_f64());
            // SAFETY: kill(2) on our own child.
            unsafe { libc::kill(pid, libc::SIGINT) };
            let status = child.wait().map_err(|e| e.to_string())?;
            if !status.success() {
                return Err(format!("weir stack ended with {status}"));
            }
            let m: Value = serde_json::from_str(
                &fs::read_to_string(ds.join("manifest.json")).map_err(|e| e.to_string())?,
            )
            .map_err(|e| e.to_string())?;
            let lost = m["stack"]["lost"]
                .as_object()
                .map(|o| o.values().filter_map(Value::as_u64).sum())
                .unwrap_or(0);
            let cpu_s = c1.saturating_sub(c0) as f64 / 1e9;
            Ok((
                cpu_s / secs,
                Recorded {
                    events: 0,
                    lost,
                    cpu_s,
                    program_cost: m["stack"]["program_cost"].clone(),
                },
            ))
        };
        let mut shares = Vec::new();
        let mut lost = 0;
        for _ in 0..args.reps {
            let (share, r) = run(false)?;
            shares.push(share);
            lost += r.lost;
        }
        let (_, r) = run(true)?;
        let walk = &r.program_cost["walk"];
        // The program runs once per socket of every namespace walked (the
        // root namespace's and the two of the benchmark, here only these).
        let per_socket = match (walk["runs"].as_u64(), walk["ns"].as_u64()) {
            (Some(runs), Some(ns)) if runs > 0 => ns as f64 / runs as f64,
            _ => f64::NAN,
        };
        drop(held);
        let s = spread(&shares);
        println!(
            "| {} | {} | {per_socket:.0} | {} |",
            group_digits(2 * n as u64),
            s.show(args.reps, |x| format!("{:.2} %", x * 100.0)),
            group_digits(lost)
        );
        out.push(
            json!({"connections": n, "sockets": 2 * n, "cpu_share": s.json(),
            "walk_ns_per_socket": per_socket, "lost": lost}),
        );
        // Let the closed connections' TIME_WAIT sockets go before the next.
        std::thread::sleep(Duration::from_millis(500));
    }
    println!();
    Ok(out)
}
