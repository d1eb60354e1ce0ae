//! Live capture benchmark: weir against tcpdump and netsniff-ng on the same
//! offered load, side by side in one run.
//!
//! Usage: capture [--quick] [--json OUT.json] [--seconds S] [--reps N]
//!                [--sizes 64,1514] [--only LABEL,...] [--shm DIR] [--disk DIR]
//!                [--weir PATH] [--workers N]
//!
//! Two network namespaces joined by a veth pair, made here and removed at
//! the end. `weir gen` sends at its maximum rate from namespace A, pinned to
//! CPU 0; each capturer in turn listens in namespace B, pinned to CPU 1 (as
//! in shared/BASELINES.md). Offered = the capture interface's rx_packets
//! delta; captured = frames counted in the files the capturer wrote;
//! capturer CPU = its utime+stime from /proc and wait4(2), from the moment
//! the generator starts until the capturer has written everything and
//! exited. Repetitions are outermost and the order of capturers rotates, so
//! drift of the machine hits every capturer alike. See bench/README.md.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pcapio::{ReaderOptions, TraceReader};
use serde_json::{Value, json};
use weir_bench::*;

const USAGE: &str = "\
usage: capture [--quick] [--json OUT.json] [--seconds S] [--reps N] [--sizes 64,1514]
               [--only LABEL,...] [--shm DIR] [--disk DIR] [--weir PATH] [--workers N]

Runs weir capture (pcap, records, both; to /dev/shm and to disk), tcpdump -w
(to /dev/shm and to disk) and netsniff-ng on a veth pair fed by weir gen at
its maximum rate, and prints a Markdown table (run as root).
Labels for --only: weir-pcap-shm weir-records-shm weir-both-shm weir-pcap-disk weir-both-disk
weir-ring-shm weir-ring-disk weir-pcap-disk-buffered
weir-records-shard-shm weir-records-kernel-fanout-shm tcpdump-shm tcpdump-disk netsniff-shm";

/// Receive ring of every capturer, in MiB (tcpdump -B takes KiB).
const RING_MIB: u64 = 256;

struct Opts {
    json: Option<PathBuf>,
    seconds: f64,
    reps: usize,
    sizes: Vec<u32>,
    only: Option<Vec<String>>,
    shm: PathBuf,
    disk: PathBuf,
    weir: Option<PathBuf>,
    workers: usize,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        json: None,
        seconds: 5.0,
        reps: 3,
        sizes: vec![64, 1514],
        only: None,
        shm: PathBuf::from("/dev/shm/weir-bench-capture"),
        disk: PathBuf::from("/var/tmp/weir-bench-capture"),
        weir: None,
        workers: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--quick" => {
                o.seconds = 2.0;
                o.reps = 1;
            }
            "--json" => o.json = Some(PathBuf::from(val("--json")?)),
            "--seconds" => {
                o.seconds = val("--seconds")?
                    .parse()
                    .ok()
                    .filter(|s: &f64| (0.5..=60.0).contains(s))
                    .ok_or("--seconds takes a number from 0.5 to 60")?
            }
            "--reps" => {
                o.reps = val("--reps")?
                    .parse()
                    .ok()
                    .filter(|n: &usize| (1..=20).contains(n))
                    .ok_or("--reps takes a number from 1 to 20")?
            }
            "--sizes" => {
                o.sizes = val("--sizes")?
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<u32>()
                            .ok()
                            .filter(|n| (60..=9000).contains(n))
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or("--sizes takes frame sizes from 60 to 9000, e.g. 64,1514")?
            }
            "--only" => {
                let v: Vec<String> = val("--only")?.split(',').map(str::to_string).collect();
                for l in &v {
                    if !CAPTURERS.iter().any(|c| c.label() == l) {
                        return Err(format!("--only: unknown capturer {l:?}\n{USAGE}"));
                    }
                }
                o.only = Some(v);
            }
            "--shm" => o.shm = PathBuf::from(val("--shm")?),
            "--disk" => o.disk = PathBuf::from(val("--disk")?),
            "--weir" => o.weir = Some(PathBuf::from(val("--weir")?)),
            "--workers" => {
                o.workers = val("--workers")?
                    .parse()
                    .ok()
                    .filter(|n: &usize| (1..=64).contains(n))
                    .ok_or("--workers takes a number from 1 to 64")?
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok(o)
}

// ---------------------------------------------------------------------------
// The capturers.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Capturer {
    WeirPcapShm,
    WeirRecordsShm,
    WeirBothShm,
    WeirPcapDisk,
    WeirBothDisk,
    WeirRingShm,
    WeirRingDisk,
    WeirPcapDiskBuffered,
    WeirRecordsShardShm,
    /// The kernel's own hash deals frames to the workers (`--fanout
    /// kernel`), against weir's program (the default): compare with
    /// `--workers 2`.
    WeirRecordsKernelFanoutShm,
    TcpdumpShm,
    TcpdumpDisk,
    NetsniffShm,
}

const CAPTURERS: [Capturer; 13] = [
    Capturer::WeirPcapShm,
    Capturer::WeirRecordsShm,
    Capturer::WeirBothShm,
    Capturer::WeirPcapDisk,
    Capturer::WeirBothDisk,
    Capturer::WeirRingShm,
    Capturer::WeirRingDisk,
    Capturer::WeirPcapDiskBuffered,
    Capturer::WeirRecordsShardShm,
    Capturer::WeirRecordsKernelFanoutShm,
    Capturer::TcpdumpShm,
    Capturer::TcpdumpDisk,
    Capturer::NetsniffShm,
];

impl Capturer {
    fn label(self) -> &'static str {
        match self {
            Capturer::WeirPcapShm => "weir-pcap-shm",
            Capturer::WeirRecordsShm => "weir-records-shm",
            Capturer::WeirBothShm => "weir-both-shm",
            Capturer::WeirPcapDisk => "weir-pcap-disk",
            Capturer::WeirBothDisk => "weir-both-disk",
            Capturer::WeirRingShm => "weir-ring-shm",
            Capturer::WeirRingDisk => "weir-ring-disk",
            Capturer::WeirPcapDiskBuffered => "weir-pcap-disk-buffered",
            Capturer::WeirRecordsShardShm => "weir-records-shard-shm",
            Capturer::WeirRecordsKernelFanoutShm => "weir-records-kernel-fanout-shm",
            Capturer::TcpdumpShm => "tcpdump-shm",
            Capturer::TcpdumpDisk => "tcpdump-disk",
            Capturer::NetsniffShm => "netsniff-shm",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Capturer::WeirPcapShm => "weir --pcap → /dev/shm",
            Capturer::WeirRecordsShm => "weir --records → /dev/shm",
            Capturer::WeirBothShm => "weir --pcap --records → /dev/shm",
            Capturer::WeirPcapDisk => "weir --pcap → disk (O_DIRECT)",
            Capturer::WeirBothDisk => "weir --pcap --records → disk",
            Capturer::WeirRingShm => "weir --pcap --records --max-disk 512M → /dev/shm",
            Capturer::WeirRingDisk => "weir --pcap --records --max-disk 512M → disk",
            Capturer::WeirPcapDiskBuffered => "weir --pcap --no-direct → disk",
            // Share 0 of 1 keeps every frame, so the counts compare with
            // weir-records-shm; the filter still hashes each frame.
            Capturer::WeirRecordsShardShm => "weir --records --shard 0/1 → /dev/shm",
            Capturer::WeirRecordsKernelFanoutShm => "weir --records --fanout kernel → /dev/shm",
            Capturer::TcpdumpShm => "tcpdump -w → /dev/shm",
            Capturer::TcpdumpDisk => "tcpdump -w → disk",
            Capturer::NetsniffShm => "netsniff-ng → /dev/shm",
        }
    }

    fn on_disk(self) -> bool {
        matches!(
            self,
            Capturer::WeirPcapDisk
                | Capturer::WeirBothDisk
                | Capturer::WeirRingDisk
                | Capturer::WeirPcapDiskBuffered
                | Capturer::TcpdumpDisk
        )
    }

    /// The line on stderr/stdout that says the capturer is listening.
    fn ready_line(self) -> &'static str {
        match self {
            Capturer::TcpdumpShm | Capturer::TcpdumpDisk => "listening on",
            Capturer::NetsniffShm => "Running!",
            _ => "capturing on",
        }
    }

    /// The command, run inside namespace B on CPU 1, writing under `out`.
    fn command(self, tools: &Tools, out: &Path, workers: usize) -> Vec<String> {
        let o = |p: &str| out.join(p).to_string_lossy().into_owned();
        let ring_kib = (RING_MIB * 1024).to_string();
        let weir = |sinks: &[&str]| {
            let mut v = vec![
                tools.weir.to_string_lossy().into_owned(),
                "capture".into(),
                "-i".into(),
                IFACE.into(),
                "-o".into(),
                o("ds"),
                "-B".into(),
                ring_kib.clone(),
                "-j".into(),
                workers.to_string(),
            ];
            v.extend(sinks.iter().map(|s| s.to_string()));
            v
        };
        match self {
            Capturer::WeirPcapShm | Capturer::WeirPcapDisk => weir(&["--pcap"]),
            Capturer::WeirPcapDiskBuffered => weir(&["--pcap", "--no-direct"]),
            Capturer::WeirRecordsShm => weir(&["--records"]),
            Capturer::WeirRecordsShardShm => weir(&["--records", "--shard", "0/1"]),
            Capturer::WeirRecordsKernelFanoutShm => weir(&["--records", "--fanout", "kernel"]),
            Capturer::WeirBothShm | Capturer::WeirBothDisk => weir(&["--pcap", "--records"]),
            // A ring of sixteen 32 MiB files, full after about a second
            // at the generator's rate: the steady state reuses their space.
            Capturer::WeirRingShm | Capturer::WeirRingDisk => {
                weir(&["--pcap", "--records", "--max-disk", "512M"])
            }
            Capturer::TcpdumpShm | Capturer::TcpdumpDisk => vec![
                tools.tcpdump.to_string_lossy().into_owned(),
                "-i".into(),
                IFACE.into(),
                "-n".into(),
                "-B".into(),
                ring_kib,
                "-w".into(),
                o("tcpdump.pcap"),
            ],
            Capturer::NetsniffShm => vec![
                tools.netsniff.to_string_lossy().into_owned(),
                "--in".into(),
                IFACE.into(),
                "--out".into(),
                o("netsniff.pcap"),
                "--silent".into(),
                "--no-sock-mem".into(),
                "--ring-size".into(),
                format!("{RING_MIB}MiB"),
            ],
        }
    }

    fn is_weir(self) -> bool {
        matches!(
            self,
            Capturer::WeirPcapShm
                | Capturer::WeirRecordsShm
                | Capturer::WeirBothShm
                | Capturer::WeirPcapDisk
                | Capturer::WeirBothDisk
                | Capturer::WeirRingShm
                | Capturer::WeirRingDisk
                | Capturer::WeirPcapDiskBuffered
                | Capturer::WeirRecordsShardShm
                | Capturer::WeirRecordsKernelFanoutShm
        )
    }
}

struct Tools {
    weir: PathBuf,
    tcpdump: PathBuf,
    netsniff: PathBuf,
    ip: PathBuf,
    taskset: PathBuf,
}

// ---------------------------------------------------------------------------
// One run.

#[derive(Clone, Default)]
struct Run {
    rep: usize,
    size: u32,
    label: &'static str,
    /// Frames the generator reported sent, and its rate.
    sent: u64,
    gen_mpps: f64,
    /// rx_packets delta of the capture interface.
    offered: u64,
    /// Frames counted in the files.
    captured: u64,
    /// Frames in pcap files and rows in Parquet files (weir both: each).
    pcap_frames: Option<u64>,
    record_rows: Option<u64>,
    /// What the capturer itself reported as dropped (kernel + its own).
    reported_drops: Option<u64>,
    cpu_s: f64,
    /// Of the capturer's CPU, what weir's background staging writer
    /// (`weir-stage-*` threads) spent: a one-off set-up cost, not per frame,
    /// kept out of `cpu_s`.
    staging_cpu_s: f64,
    /// How long the capturer took to finish after the generator stopped.
    drain_s: f64,
    bytes_written: u64,
    /// CPU time the hypervisor took from this VM during the run (all CPUs).
    steal_s: f64,
}

impl Run {
    fn captured_share(&self) -> f64 {
        self.captured as f64 / self.offered.max(1) as f64
    }
    fn computed_drops(&self) -> u64 {
        self.offered.saturating_sub(self.captured)
    }
    fn cpu_ns_per_frame(&self) -> f64 {
        if self.captured == 0 {
            return f64::NAN;
        }
        self.cpu_s * 1e9 / self.captured as f64
    }
    fn json(&self) -> Value {
        json!({
            "rep": self.rep, "size": self.size, "capturer": self.label,
            "sent": self.sent, "gen_mpps": self.gen_mpps, "offered": self.offered,
            "captured": self.captured, "pcap_frames": self.pcap_frames,
            "record_rows": self.record_rows, "reported_drops": self.reported_drops,
            "computed_drops": self.computed_drops(), "captured_share": self.captured_share(),
            "cpu_s": self.cpu_s, "cpu_ns_per_captured_frame": self.cpu_ns_per_frame(),
            "staging_cpu_s": self.staging_cpu_s,
            "drain_s": self.drain_s, "bytes_written": self.bytes_written, "steal_s": self.steal_s,
        })
    }
}

/// CPU seconds of the threads of `pid` whose name starts with `prefix`,
/// sampled every 50 ms until stopped (a thread that ends takes its count
/// out of /proc with it): the last count seen of each, summed.
struct ThreadMeter {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<f64>,
}

impl ThreadMeter {
    fn start(pid: u32, prefix: &'static str) -> ThreadMeter {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut seen: std::collections::HashMap<String, f64> = Default::default();
            loop {
                let done = flag.load(Ordering::Relaxed);
                for e in fs::read_dir(format!("/proc/{pid}/task"))
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    let stat = fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                    let (Some(a), Some(b)) = (stat.find('('), stat.rfind(')')) else {
                        continue;
                    };
                    if !stat[a + 1..b].starts_with(prefix) {
                        continue;
                    }
                    let f: Vec<&str> = stat[b + 2..].split_whitespace().collect();
                    let ticks = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
                        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
                    seen.insert(e.file_name().to_string_lossy().into_owned(), ticks);
                }
                if done {
                    return seen.values().sum::<f64>() / clock_ticks_per_s();
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        ThreadMeter { stop, handle }
    }

    fn finish(self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or(0.0)
    }
}

/// CPU seconds (utime + stime, all threads) of a live process.
fn proc_cpu_s(pid: u32) -> Option<f64> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses.
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / clock_ticks_per_s())
}

/// Whether the child `pid` has exited (it is left unreaped: a zombie's
/// /proc entry would still read as alive).
fn exited(pid: u32) -> bool {
    // SAFETY: waitid writes into the zeroed siginfo we pass; WNOWAIT leaves
    // the child to be reaped later.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid to read for a waitid result.
    r == 0 && unsafe { info.si_pid() } == pid as libc::pid_t
}

/// Waits for `pid` to exit (killing it after `limit`), reaping it with its
/// CPU time from wait4(2). Returns (cpu seconds, exited cleanly).
fn reap(child: Child, limit: Duration) -> Result<(f64, bool), String> {
    let pid = child.id() as libc::pid_t;
    let t0 = Instant::now();
    let mut killed = false;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: wait4 writes into the status and zeroed rusage we pass.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            drop(child);
            let ok = !killed && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
            return Ok((tv(ru.ru_utime) + tv(ru.ru_stime), ok));
        }
        if r < 0 && errno() != libc::EINTR {
            let e = std::io::Error::last_os_error();
            // SAFETY: the pid is our child; do not leave it running.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            return Err(format!("wait4: {e}"));
        }
        if !killed
            && (t0.elapsed() > limit || INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst))
        {
            // SAFETY: the pid is our unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn read_text(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_default()
}

/// Numbers in `text` on the first line containing `key`, in order.
fn numbers_on_line(text: &str, key: &str) -> Vec<u64> {
    text.lines()
        .find(|l| l.contains(key))
        .map(|l| {
            l.split(|c: char| !(c.is_ascii_digit() || c == ','))
                .map(|w| w.replace(',', ""))
                .filter_map(|w| w.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Drops the capturer reported on exit.
fn reported_drops(c: Capturer, out: &str, err: &str) -> Option<u64> {
    if c.is_weir() {
        // "  the kernel saw K frames and dropped D; pcap staging dropped P"
        let line = out.lines().find(|l| l.contains("kernel saw"))?;
        let after = |key: &str| {
            line.split(key)
                .nth(1)?
                .split(|ch: char| !(ch.is_ascii_digit() || ch == ','))
                .find(|w| !w.is_empty())?
                .replace(',', "")
                .parse::<u64>()
                .ok()
        };
        Some(after("dropped ")? + after("staging dropped ").unwrap_or(0))
    } else if c == Capturer::NetsniffShm {
        // netsniff-ng: "N packets failed filter (out of space)" is what its
        // ring dropped (with TPACKET_V3, "incoming" and "passed filter" are
        // what it read and what the kernel delivered).
        numbers_on_line(out, "out of space").first().copied()
    } else {
        numbers_on_line(err, "dropped by kernel").first().copied()
    }
}

/// Frames in every pcap file under `dir`, rows in every Parquet file, and
/// all bytes written.
fn count_output(dir: &Path) -> Result<(Option<u64>, Option<u64>, u64), String> {
    let (mut pcap, mut rows, mut bytes) = (None::<u64>, None::<u64>, 0u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        for e in rd.filter_map(|e| e.ok()) {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            if name == "manifest.json" {
                // Files a --max-disk ring wrote over were captured and
                // written all the same.
                let m: Value = fs::read(&p)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or_default();
                let gone: u64 = m["files"]["pcap_removed"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|f| f["frames"].as_u64()).sum())
                    .unwrap_or(0);
                if gone > 0 {
                    *pcap.get_or_insert(0) += gone;
                }
            } else if name.ends_with(".pcap") {
                let mut r = TraceReader::open(&p, ReaderOptions::default())
                    .map_err(|e| format!("{}: {e}", p.display()))?;
                let mut n = 0u64;
                loop {
                    match r.next_chunk() {
                        Ok(Some(c)) => n += c.frames.len() as u64,
                        Ok(None) => break,
                        Err(e) => {
                            eprintln!(
                                "  warning: {}: {e} (counted {n} frames before it)",
                                p.display()
                            );
                            break;
                        }
                    }
                }
                *pcap.get_or_insert(0) += n;
            } else if name.ends_with(".parquet")
                && p.parent().is_some_and(|d| d.ends_with("packets"))
            {
                use parquet::file::reader::{FileReader, SerializedFileReader};
                let f = File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                let r =
                    SerializedFileReader::new(f).map_err(|e| format!("{}: {e}", p.display()))?;
                *rows.get_or_insert(0) += r.metadata().file_metadata().num_rows() as u64;
            }
        }
    }
    Ok((pcap, rows, bytes))
}

fn remove_contents(dir: &Path) {
    if let Ok(rd) = fs::read_dir(dir) {
        for p in rd.filter_map(|e| e.ok()).map(|e| e.path()) {
            if p.file_name().is_some_and(|n| n == MARKER) {
                continue;
            }
            let _ = if p.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
        }
    }
}

struct Ctx<'a> {
    o: &'a Opts,
    tools: &'a Tools,
    net: &'a Net,
    shm: &'a Scratch,
    disk: &'a Scratch,
}

fn one_run(cx: &Ctx, c: Capturer, size: u32, rep: usize) -> Result<Run, String> {
    check_interrupted()?;
    let scratch = if c.on_disk() { cx.disk } else { cx.shm };
    let out = scratch.path("out");
    fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let logs = cx.shm.path("logs");
    fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let (out_log, err_log) = (logs.join("cap.out"), logs.join("cap.err"));
    let argv = c.command(cx.tools, &out, cx.o.workers);
    let child = Command::new(&cx.tools.ip)
        .args(["netns", "exec", &cx.net.b])
        .arg(&cx.tools.taskset)
        .args(["-c", "1"])
        .args(&argv)
        .stdin(Stdio::null())
        .stdout(File::create(&out_log).map_err(|e| format!("{}: {e}", out_log.display()))?)
        .stderr(File::create(&err_log).map_err(|e| format!("{}: {e}", err_log.display()))?)
        .spawn()
        .map_err(|e| format!("{}: cannot start: {e}", c.label()))?;
    let pid = child.id();
    let fail = |child: Child, why: String| -> String {
        // SAFETY: the pid is our unreaped child.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        let _ = reap(child, Duration::from_secs(10));
        format!("{}: {why}{}", c.label(), tail(&err_log))
    };

    // Wait until it listens (ring allocation can take a few seconds).
    let t0 = Instant::now();
    loop {
        if read_text(&err_log).contains(c.ready_line())
            || read_text(&out_log).contains(c.ready_line())
        {
            break;
        }
        if exited(pid) {
            return Err(fail(child, "exited before it started listening".into()));
        }
        if check_interrupted().is_err() {
            return Err(fail(child, "interrupted".into()));
        }
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(fail(child, "did not start listening within 60 s".into()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));

    let rx0 = match cx.net.rx_packets() {
        Ok(n) => n,
        Err(e) => return Err(fail(child, e)),
    };
    let cpu0 = proc_cpu_s(pid).unwrap_or(0.0);
    // Staging written in the background before the generator started is
    // in cpu0 already; what is written after counts from its count now.
    let staging0 = ThreadMeter::start(pid, "weir-stage").finish();
    let staging = ThreadMeter::start(pid, "weir-stage");
    let (_, steal0) = machine_cpu();
    let gen_out = match Command::new(&cx.tools.ip)
        .args(["netns", "exec", &cx.net.a])
        .arg(&cx.tools.taskset)
        .args(["-c", "0"])
        .arg(&cx.tools.weir)
        .args([
            "gen",
            "-i",
            IFACE,
            "--size",
            &size.to_string(),
            "--rate",
            "max",
        ])
        .args([
            "--duration",
            &format!("{}ms", (cx.o.seconds * 1000.0) as u64),
        ])
        .args(["--flows", "1000", "--payload", "half-random"])
        .stdin(Stdio::null())
        .output()
    {
        Ok(out) => out,
        Err(e) => return Err(fail(child, format!("cannot run weir gen: {e}"))),
    };
    let gen_text = String::from_utf8_lossy(&gen_out.stdout).into_owned();
    if !gen_out.status.success() {
        return Err(fail(
            child,
            format!(
                "weir gen failed: {}",
                String::from_utf8_lossy(&gen_out.stderr).trim()
            ),
        ));
    }
    let rx1 = match cx.net.rx_packets() {
        Ok(n) => n,
        Err(e) => return Err(fail(child, e)),
    };
    // Let the capturer take what is in its ring, then stop it as a user would.
    let stop_at = Instant::now();
    // Longer than tcpdump's 1 s buffer timeout, so that its last, partly
    // filled ring block is handed over too (weir retires blocks after 10 ms).
    std::thread::sleep(Duration::from_millis(1500));
    let staging_cpu_s = (staging.finish() - staging0).max(0.0);
    // SAFETY: the pid is our unreaped child.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    let (cpu_total, clean) = reap(child, Duration::from_secs(120))?;
    let drain_s = stop_at.elapsed().as_secs_f64();
    let (_, steal1) = machine_cpu();
    check_interrupted()?;
    let (out_text, err_text) = (read_text(&out_log), read_text(&err_log));
    if !clean {
        return Err(format!(
            "{}: did not exit cleanly after SIGINT{}",
            c.label(),
            tail(&err_log)
        ));
    }
    let (pcap_frames, record_rows, bytes_written) = count_output(&out)?;
    remove_contents(&out);
    let sent = numbers_on_line(&gen_text, "sent")
        .first()
        .copied()
        .unwrap_or(0);
    let gen_mpps = gen_text
        .split(" Mpps")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN);
    Ok(Run {
        rep,
        size,
        label: c.label(),
        sent,
        gen_mpps,
        offered: rx1.saturating_sub(rx0),
        captured: pcap_frames.or(record_rows).unwrap_or(0),
        pcap_frames,
        record_rows,
        reported_drops: reported_drops(c, &out_text, &err_text),
        cpu_s: (cpu_total - cpu0 - staging_cpu_s).max(0.0),
        staging_cpu_s,
        drain_s,
        bytes_written,
        steal_s: (steal1 - steal0).max(0.0),
    })
}

// ---------------------------------------------------------------------------

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("capture: {e}");
            std::process::exit(2);
        }
    };
    install_signal_handlers();
    if let Err(e) = run(&opts) {
        eprintln!("capture: error: {e}");
        std::process::exit(1);
    }
}

fn run(o: &Opts) -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root: it makes network namespaces and captures on them".into());
    }
    let tools = Tools {
        weir: find_weir(o.weir.as_deref())?,
        tcpdump: need_tool("tcpdump", "tcpdump")?,
        netsniff: need_tool("netsniff-ng", "netsniff-ng")?,
        ip: need_tool("ip", "iproute2")?,
        taskset: need_tool("taskset", "util-linux")?,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        return Err("needs at least 2 CPUs (generator on CPU 0, capturer on CPU 1)".into());
    }
    let capturers: Vec<Capturer> = CAPTURERS
        .iter()
        .copied()
        .filter(|c| {
            o.only
                .as_ref()
                .is_none_or(|v| v.iter().any(|l| l == c.label()))
        })
        .collect();
    // Space for one run (each run's output is deleted before the next): the
    // largest frames at ~1.3 Mpps, the generator's best here.
    let biggest = *o.sizes.iter().max().unwrap_or(&1514) as f64 + 16.0;
    let need = (biggest * 1.3e6 * (o.seconds + 1.0)) as u64 + (1 << 30);
    let shm = Scratch::create(&o.shm)?;
    let disk = Scratch::create(&o.disk)?;
    for (s, used) in [
        (&shm, capturers.iter().any(|c| !c.on_disk())),
        (&disk, capturers.iter().any(|c| c.on_disk())),
    ] {
        let (_, free) = fs_info(&s.dir);
        if used && free < need {
            return Err(format!(
                "{}: {} free, the run needs about {}; use a shorter --seconds or another directory",
                s.dir.display(),
                mb(free),
                mb(need)
            ));
        }
    }
    if fs_info(&disk.dir).0 == "tmpfs" {
        eprintln!(
            "warning: {} is tmpfs, not a disk; pass --disk DIR on a disk",
            disk.dir.display()
        );
    }
    let net = Net::create("weir-bc")?;
    let setup = setup_json(o, &tools, &shm, &disk, cores);
    print!("{}", setup_markdown(&setup));
    let cx = Ctx {
        o,
        tools: &tools,
        net: &net,
        shm: &shm,
        disk: &disk,
    };
    let mut runs: Vec<Run> = Vec::new();
    let total = o.reps * o.sizes.len() * capturers.len();
    for rep in 0..o.reps {
        for (si, &size) in o.sizes.iter().enumerate() {
            let n = capturers.len();
            for k in 0..n {
                let c = capturers[(k + rep + si) % n];
                eprintln!(
                    "[{}/{total}] rep {} · {size} B · {}",
                    runs.len() + 1,
                    rep + 1,
                    c.describe()
                );
                let r = one_run(&cx, c, size, rep)?;
                eprintln!(
                    "    offered {} captured {} ({:.1} %), CPU {:.2} s = {} ns/frame",
                    group_digits(r.offered),
                    group_digits(r.captured),
                    r.captured_share() * 100.0,
                    r.cpu_s,
                    ns(r.cpu_ns_per_frame())
                );
                runs.push(r);
            }
        }
    }
    let report = report(o, &capturers, &runs);
    print!("{report}");
    if let Some(p) = &o.json {
        let v = json!({
            "setup": setup,
            "runs": runs.iter().map(Run::json).collect::<Vec<_>>(),
            "summary": summary_json(o, &capturers, &runs),
        });
        fs::write(p, serde_json::to_string_pretty(&v).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    Ok(())
}

fn setup_json(o: &Opts, t: &Tools, shm: &Scratch, disk: &Scratch, cores: usize) -> Value {
    let uname = Command::new("uname")
        .arg("-r")
        .output()
        .map(|x| String::from_utf8_lossy(&x.stdout).trim().to_string())
        .unwrap_or_default();
    let tcpdump_v = Command::new(&t.tcpdump)
        .arg("--version")
        .output()
        .map(|x| {
            String::from_utf8_lossy(&x.stdout)
                .lines()
                .take(2)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let (shm_fs, shm_free) = fs_info(&shm.dir);
    let (disk_fs, disk_free) = fs_info(&disk.dir);
    json!({
        "date": Command::new("date").arg("-u").arg("+%Y-%m-%d %H:%M UTC").output()
            .map(|x| String::from_utf8_lossy(&x.stdout).trim().to_string()).unwrap_or_default(),
        "kernel": uname,
        "cpu": first_line_of("/proc/cpuinfo", "model name").unwrap_or_default(),
        "cores": cores,
        "mem_total_kib": meminfo_kb("MemTotal"),
        "mem_available_kib": meminfo_kb("MemAvailable"),
        "weir": tool_output(&t.weir, &["--version"]),
        "git": git_revision(),
        "tcpdump": tcpdump_v,
        "netsniff_ng": tool_output(&t.netsniff, &["-v"]),
        "ring_mib": RING_MIB,
        "weir_workers": o.workers,
        "seconds": o.seconds,
        "reps": o.reps,
        "sizes": o.sizes,
        "shm": {"dir": shm.dir, "fs": shm_fs, "free": shm_free},
        "disk": {"dir": disk.dir, "fs": disk_fs, "free": disk_free},
        "loadavg": loadavg(),
        "stale_binary": stale_binary_warning(&t.weir),
    })
}

fn setup_markdown(s: &Value) -> String {
    let g = |k: &str| match &s[k] {
        Value::String(x) => x.clone(),
        Value::Null => "?".into(),
        v => v.to_string(),
    };
    let mut m = String::new();
    let _ = writeln!(m, "# Live capture: weir vs tcpdump vs netsniff-ng\n");
    let _ = writeln!(m, "| setup | |\n|---|---|");
    for (k, v) in [
        ("date", g("date")),
        ("kernel", g("kernel")),
        ("CPU", format!("{} × {}", g("cores"), g("cpu"))),
        (
            "memory",
            format!(
                "{} total, {} available",
                mb(s["mem_total_kib"].as_u64().unwrap_or(0) * 1024),
                mb(s["mem_available_kib"].as_u64().unwrap_or(0) * 1024)
            ),
        ),
        ("weir", format!("{} (git {})", g("weir"), g("git"))),
        ("tcpdump", g("tcpdump")),
        ("netsniff-ng", g("netsniff_ng")),
        (
            "network",
            "veth pair between two network namespaces; `weir gen --rate max --flows 1000 \
             --payload half-random` pinned to CPU 0, capturer pinned to CPU 1"
                .into(),
        ),
        (
            "rings",
            format!(
                "{} MiB per ring (weir -B, per worker; tcpdump -B; netsniff-ng --ring-size); weir -j {}",
                g("ring_mib"),
                g("weir_workers")
            ),
        ),
        (
            "runs",
            format!(
                "{} s of traffic per run, {} repetition(s), capturer order rotating",
                g("seconds"),
                g("reps")
            ),
        ),
        (
            "/dev/shm output",
            format!(
                "{} ({})",
                s["shm"]["dir"].as_str().unwrap_or("?"),
                s["shm"]["fs"].as_str().unwrap_or("?")
            ),
        ),
        (
            "disk output",
            format!(
                "{} ({})",
                s["disk"]["dir"].as_str().unwrap_or("?"),
                s["disk"]["fs"].as_str().unwrap_or("?")
            ),
        ),
        ("load average at start", g("loadavg")),
    ] {
        let _ = writeln!(m, "| {k} | {v} |");
    }
    if let Some(w) = s["stale_binary"].as_str() {
        let _ = writeln!(m, "\n**Warning:** {w}");
    }
    m.push('\n');
    m
}

struct Summary {
    label: &'static str,
    offered_mpps: Spread,
    captured: Spread,
    reported: Spread,
    computed: Spread,
    cores: Spread,
    cpu_ns: Spread,
    steal: Spread,
}

fn summarize(o: &Opts, label: &'static str, size: u32, runs: &[Run]) -> Option<Summary> {
    let rs: Vec<&Run> = runs
        .iter()
        .filter(|r| r.label == label && r.size == size)
        .collect();
    if rs.is_empty() {
        return None;
    }
    let col = |f: &dyn Fn(&Run) -> f64| spread(&rs.iter().map(|r| f(r)).collect::<Vec<_>>());
    Some(Summary {
        label,
        offered_mpps: col(&|r| r.offered as f64 / o.seconds / 1e6),
        captured: col(&|r| r.captured_share() * 100.0),
        reported: col(&|r| r.reported_drops.map_or(f64::NAN, |d| d as f64)),
        computed: col(&|r| r.computed_drops() as f64),
        cores: col(&|r| r.cpu_s / o.seconds),
        cpu_ns: col(&|r| r.cpu_ns_per_frame()),
        steal: col(&|r| r.steal_s / o.seconds),
    })
}

fn report(o: &Opts, capturers: &[Capturer], runs: &[Run]) -> String {
    let mut m = String::new();
    let reps = o.reps;
    for &size in &o.sizes {
        let _ = writeln!(m, "## {size}-byte frames\n");
        let _ = writeln!(
            m,
            "| capturer | offered Mpps | captured % | drops reported | drops computed | capturer CPU, cores | CPU ns per captured frame | steal, cores |"
        );
        let _ = writeln!(m, "|---|--:|--:|--:|--:|--:|--:|--:|");
        let sums: Vec<(Capturer, Summary)> = capturers
            .iter()
            .filter_map(|&c| summarize(o, c.label(), size, runs).map(|s| (c, s)))
            .collect();
        for (c, s) in &sums {
            let count = |x: f64| {
                if x.is_finite() {
                    group_digits(x as u64)
                } else {
                    "—".into()
                }
            };
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                c.describe(),
                s.offered_mpps.show(reps, |x| format!("{x:.3}")),
                s.captured.show(reps, |x| format!("{x:.1}")),
                s.reported.show(reps, count),
                s.computed.show(reps, count),
                s.cores.show(reps, |x| format!("{x:.2}")),
                s.cpu_ns.show(reps, ns),
                s.steal.show(reps, |x| format!("{x:.2}")),
            );
        }
        let find = |l: &str| sums.iter().find(|(c, _)| c.label() == l).map(|(_, s)| s);
        if let (Some(w), Some(t)) = (find("weir-pcap-shm"), find("tcpdump-shm")) {
            let _ = writeln!(
                m,
                "\nweir --pcap against tcpdump -w, both to /dev/shm (medians): {} the share captured, {} less CPU per captured frame.",
                ratio(w.captured.median / t.captured.median),
                ratio(t.cpu_ns.median / w.cpu_ns.median),
            );
        }
        if let (Some(w), Some(t)) = (find("weir-pcap-disk"), find("tcpdump-disk")) {
            let _ = writeln!(
                m,
                "weir --pcap against tcpdump -w, both to disk (medians): {} the share captured, {} less CPU per captured frame.",
                ratio(w.captured.median / t.captured.median),
                ratio(t.cpu_ns.median / w.cpu_ns.median),
            );
        }
        m.push('\n');
    }
    let _ = writeln!(
        m,
        "Offered = rx_packets delta of the capture interface while the generator ran; captured = frames counted in the files written (rows in packets/*.parquet for records-only); drops reported = what the capturer said it dropped (kernel ring and, for weir, its own staging); computed = offered − captured. CPU = the capturer's user+sys from the generator's start to its exit, in cores over the seconds of traffic (above 1.0 when it was still writing after the generator stopped); for weir, less what its weir-stage threads spent writing staging memory in the background, a one-off set-up cost (staging_cpu_s in the JSON). Steal = CPU time the hypervisor took from this VM meanwhile (/proc/stat); much of it means the host disturbed the run."
    );
    m
}

fn summary_json(o: &Opts, capturers: &[Capturer], runs: &[Run]) -> Value {
    let mut v = Vec::new();
    for &size in &o.sizes {
        for &c in capturers {
            if let Some(s) = summarize(o, c.label(), size, runs) {
                v.push(json!({
                    "size": size, "capturer": s.label,
                    "offered_mpps": s.offered_mpps.json(), "captured_pct": s.captured.json(),
                    "drops_reported": s.reported.json(), "drops_computed": s.computed.json(),
                    "capturer_cores": s.cores.json(), "cpu_ns_per_captured_frame": s.cpu_ns.json(),
                    "steal_cores": s.steal.json(),
                }));
            }
        }
    }
    Value::Array(v)
}
