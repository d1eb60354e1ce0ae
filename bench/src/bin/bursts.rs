//! Bursts to disk, as in the driverdump paper's Figure 4: `weir gen --burst
//! 10s/10s` at the generator's maximum (1514- and 64-byte frames) while weir
//! captures full frames to disk with `--compress auto`, next to `tcpdump -w`
//! on the same bursts; and, in the same run, the disk's own direct-write
//! bandwidth, which is what a capture to disk is held against.
//!
//! Two network namespaces joined by a veth pair, made here and removed at
//! the end; the generator is bounded by --duration.
//!
//! Usage: bursts [--quick] [--seconds S] [--dir DISKDIR] [--json OUT.json]
//!               [--weir PATH]
//!
//! Per second (from the dataset's stats table, which is the point: loss
//! is data) it plots offered vs captured frames and the compression level
//! chosen (`weir analyze DS loss --plot`), and prints a table of frames
//! offered (the capture interface's rx counter), kept, dropped, write
//! rate, compression ratio and the capturer's CPU.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_bench::*;

struct Opts {
    seconds: u64,
    quick: bool,
    dir: PathBuf,
    json: Option<PathBuf>,
    weir: Option<PathBuf>,
    disk_gib: u64,
}

fn usage() -> ! {
    eprintln!(
        "usage: bursts [--quick] [--seconds S] [--dir DISKDIR] [--json OUT.json] [--weir PATH]\n\n  \
         --seconds S  traffic per run, in 10 s on / 10 s off cycles (default 40)\n  \
         --quick      20 s per run, a 1 GiB disk probe\n  \
         --dir DIR    a directory on the disk to measure (default /var/tmp/weir-bench-bursts)\n  \
         --json FILE  also write every number as JSON\n  \
         --weir PATH  the weir binary"
    );
    std::process::exit(2)
}

fn parse_args() -> Opts {
    let mut o = Opts {
        seconds: 40,
        quick: false,
        dir: PathBuf::from("/var/tmp/weir-bench-bursts"),
        json: None,
        weir: None,
        disk_gib: 4,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--quick" => {
                o.quick = true;
                o.seconds = 20;
                o.disk_gib = 1;
            }
            "--seconds" => o.seconds = val().parse().unwrap_or_else(|_| usage()),
            "--dir" => o.dir = PathBuf::from(val()),
            "--json" => o.json = Some(PathBuf::from(val())),
            "--weir" => o.weir = Some(PathBuf::from(val())),
            _ => usage(),
        }
    }
    o
}

/// The disk's direct-write bandwidth: GiB of incompressible bytes written
/// with O_DIRECT in 4 MiB pieces (the writer's own path), made durable.
fn disk_direct_bandwidth(dir: &Path, gib: u64) -> Result<(f64, bool), String> {
    let path = dir.join("probe.bin");
    let mut f = pcapio::outfile::OutFile::create(&path, true, 4 << 20, Some(gib << 30))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let direct = f.is_direct();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let block: Vec<u8> = (0..4 << 20)
        .map(|_| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng as u8
        })
        .collect();
    let t = Instant::now();
    for _ in 0..(gib << 8) {
        check_interrupted()?;
        f.append(&block)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    f.finish().map_err(|e| format!("{}: {e}", path.display()))?;
    let s = t.elapsed().as_secs_f64();
    drop(f);
    let _ = fs::remove_file(&path);
    Ok(((gib << 30) as f64 / s, direct))
}

/// Each compression method's speed and ratio on the traffic the benchmark
/// sends (`size`-byte frames, half-random payloads) in staging-block pieces,
/// on one core: what the `auto` ladder trades.
fn ladder(weir: &Path, scratch: &Scratch, size: u32) -> Result<Vec<(String, f64, f64)>, String> {
    use pcapio::seekable::{AUTO_LADDER, FrameEncoder, Method};
    let pcap = scratch.path("ladder.pcap");
    let frames = (256u64 << 20) / (size as u64 + 16);
    let st = Command::new(weir)
        .args(["gen", "--model", "flood", "--size", &size.to_string()])
        .args([
            "--payload",
            "half-random",
            "--flows",
            "1000",
            "-c",
            &frames.to_string(),
            "-w",
        ])
        .arg(&pcap)
        .output()
        .map_err(|e| format!("weir gen: {e}"))?;
    if !st.status.success() {
        return Err(format!("weir gen: {}", String::from_utf8_lossy(&st.stderr)));
    }
    let data = fs::read(&pcap).map_err(|e| e.to_string())?;
    let _ = fs::remove_file(&pcap);
    let mut methods: Vec<Method> = AUTO_LADDER.iter().map(|(m, _)| *m).collect();
    methods.push(Method::Lz4);
    let mut enc = FrameEncoder::new();
    let mut out = Vec::with_capacity(data.len() + (1 << 20));
    let mut rows = Vec::new();
    for m in methods {
        out.clear();
        let t = Instant::now();
        for block in data.chunks(256 << 10) {
            enc.encode(m, block, &mut out).map_err(|e| e.to_string())?;
        }
        let s = t.elapsed().as_secs_f64();
        rows.push((
            m.name(),
            data.len() as f64 / s / 1e6,
            data.len() as f64 / out.len() as f64,
        ));
    }
    Ok(rows)
}

/// CPU seconds (user + system) of a child, once it has exited.
fn reap_cpu(child: Child, limit: Duration) -> Result<f64, String> {
    let pid = child.id() as libc::pid_t;
    let t = Instant::now();
    loop {
        let mut status = 0;
        // SAFETY: an rusage out-parameter for our own child.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        if r == pid {
            return Ok(tv(ru.ru_utime) + tv(ru.ru_stime));
        }
        if r < 0 {
            return Err(format!("wait4: errno {}", errno()));
        }
        if t.elapsed() > limit {
            // SAFETY: our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for(path: &Path, text: &str, child: &mut Child) -> Result<(), String> {
    let t = Instant::now();
    while !fs::read_to_string(path).unwrap_or_default().contains(text) {
        if let Ok(Some(s)) = child.try_wait() {
            return Err(format!("exited ({s}) before it was ready:{}", tail(path)));
        }
        check_interrupted()?;
        if t.elapsed() > Duration::from_secs(60) {
            return Err(format!("not ready within 60 s:{}", tail(path)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

#[derive(Default)]
struct Outcome {
    offered: u64,
    kept: u64,
    dropped_reported: u64,
    cpu_s: f64,
    pcap_bytes: u64,
    stored_bytes: u64,
    /// Per second of the weir run: (offered, captured, kept, drops, level, MB/s).
    seconds: Vec<(u64, u64, u64, u64, Option<f64>, f64)>,
}

/// One capture during one burst pattern.
fn one(
    o: &Opts,
    weir: &Path,
    net: &Net,
    scratch: &Scratch,
    size: u32,
    tcpdump: Option<&Path>,
) -> Result<Outcome, String> {
    let out = scratch.path("out");
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let log = scratch.path("cap.err");
    let ds = out.join("ds");
    let pcap = out.join("tcpdump.pcap");
    let mut cmd = Command::new("ip");
    // The generator has core 0 to itself; each capturer gets core 1, all
    // its threads (weir's compressing writer competes with its worker).
    cmd.args(["netns", "exec", &net.b, "taskset", "-c", "1"]);
    match tcpdump {
        None => {
            cmd.arg(weir)
                .args([
                    "capture",
                    "-i",
                    IFACE,
                    "-j",
                    "1",
                    "--pcap",
                    "--compress",
                    "auto",
                ])
                .arg("-o")
                .arg(&ds);
        }
        Some(t) => {
            cmd.arg(t)
                .args(["-i", IFACE, "-n", "-B", "1048576", "-w"])
                .arg(&pcap);
        }
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(File::create(scratch.path("cap.out")).map_err(|e| e.to_string())?)
        .stderr(File::create(&log).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("cannot start the capture: {e}"))?;
    let ready = if tcpdump.is_some() {
        "listening on"
    } else {
        "capturing on"
    };
    if let Err(e) = wait_for(&log, ready, &mut child) {
        // SAFETY: our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
        let _ = child.wait();
        return Err(e);
    }
    std::thread::sleep(Duration::from_millis(300));
    let rx0 = net.rx_packets()?;
    let gen_out = Command::new("ip")
        .args(["netns", "exec", &net.a, "taskset", "-c", "0"])
        .arg(weir)
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
            "--burst",
            "10s/10s",
            "--duration",
            &format!("{}s", o.seconds),
        ])
        .args(["--flows", "1000", "--payload", "half-random"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("weir gen: {e}"))?;
    let rx1 = net.rx_packets()?;
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let cpu_s = reap_cpu(child, Duration::from_secs(300))?;
    if !gen_out.status.success() {
        return Err(format!(
            "weir gen: {}",
            String::from_utf8_lossy(&gen_out.stderr).trim()
        ));
    }
    let mut r = Outcome {
        offered: rx1 - rx0,
        cpu_s,
        ..Default::default()
    };
    let err_text = fs::read_to_string(&log).unwrap_or_default();
    if tcpdump.is_some() {
        let mut rd =
            pcapio::TraceReader::open(&pcap, Default::default()).map_err(|e| e.to_string())?;
        while let Some(c) = rd.next_chunk().map_err(|e| e.to_string())? {
            r.kept += c.frames.len() as u64;
        }
        r.pcap_bytes = fs::metadata(&pcap).map_or(0, |m| m.len());
        r.stored_bytes = r.pcap_bytes;
        r.dropped_reported = err_text
            .lines()
            .find(|l| l.contains("dropped by kernel"))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        return Ok(r);
    }
    let m: Value = serde_json::from_slice(
        &fs::read(ds.join("manifest.json")).map_err(|e| format!("manifest: {e}"))?,
    )
    .map_err(|e| e.to_string())?;
    for f in m["files"]["pcap"].as_array().into_iter().flatten() {
        r.kept += f["frames"].as_u64().unwrap_or(0);
        r.pcap_bytes += f["bytes"].as_u64().unwrap_or(0);
        r.stored_bytes += f["stored_bytes"].as_u64().unwrap_or(0);
    }
    r.dropped_reported =
        m["drops"]["kernel"].as_u64().unwrap_or(0) + m["drops"]["pcap"].as_u64().unwrap_or(0);
    // Per second, and the plot, from weir's own analysis of its stats.
    let plot = PathBuf::from(format!("bursts-{size}.svg"));
    let loss = Command::new(weir)
        .arg("analyze")
        .arg(&ds)
        .args(["loss", "--json", "--plot"])
        .arg(&plot)
        .output()
        .map_err(|e| format!("weir analyze: {e}"))?;
    if !loss.status.success() {
        return Err(format!(
            "weir analyze loss: {}",
            String::from_utf8_lossy(&loss.stderr)
        ));
    }
    let rows: Value = serde_json::from_slice(&loss.stdout).map_err(|e| e.to_string())?;
    for row in rows.as_array().into_iter().flatten() {
        let n = |k: &str| row[k].as_u64().unwrap_or(0);
        r.seconds.push((
            n("kernel_seen"),
            n("captured"),
            n("pcap_frames"),
            n("kernel_drops") + n("pcap_drops"),
            row["pcap_level"].as_f64(),
            n("pcap_stored_bytes") as f64 / 1e6,
        ));
    }
    eprintln!("  plot: {}", plot.display());
    Ok(r)
}

fn main() {
    install_signal_handlers();
    let o = parse_args();
    if let Err(e) = run(&o) {
        eprintln!("bursts benchmark: {e}");
        std::process::exit(1);
    }
}

fn run(o: &Opts) -> Result<(), String> {
    let weir = find_weir(o.weir.as_deref())?;
    let tcpdump = need_tool("tcpdump", "tcpdump")?;
    let scratch = Scratch::create(&o.dir)?;
    let (fs_type, free) = fs_info(scratch.path("").as_path());
    eprintln!(
        "measuring the disk: {} GiB written with O_DIRECT",
        o.disk_gib
    );
    let (disk_bps, direct) = disk_direct_bandwidth(scratch.path("").as_path(), o.disk_gib)?;
    let mut rungs = Vec::new();
    for size in [1514u32, 64] {
        eprintln!("compression methods on {size}-byte frames");
        rungs.push((size, ladder(&weir, &scratch, size)?));
    }
    let net = Net::create("weir-bb")?;
    let mut md = String::new();
    let kernel = tool_output(Path::new("uname"), &["-r"]).unwrap_or_default();
    let cpu = first_line_of("/proc/cpuinfo", "model name").unwrap_or_default();
    let _ = writeln!(
        md,
        "## Bursts to disk{}\n\nMachine: {cpu}, {} cores, kernel {}; git {}. Disk: {} ({fs_type}, \
         {} free), direct-write bandwidth {:.2} GB/s{}. Traffic: `weir gen --rate max --burst \
         10s/10s --duration {}s --payload half-random` from one namespace on core 0; capture in \
         the other on core 1: `weir capture -j 1 --pcap --compress auto` (O_DIRECT) and \
         `tcpdump -w -B 1048576`.\n",
        if o.quick { " (--quick)" } else { "" },
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel.trim(),
        git_revision(),
        o.dir.display(),
        mb(free),
        disk_bps / 1e9,
        if direct {
            ""
        } else {
            " (O_DIRECT refused: buffered)"
        },
        o.seconds,
    );
    let _ = writeln!(
        md,
        "Compression on one core, 256 KiB blocks of the benchmark's traffic (MB/s in, \
         ratio):\n\n| method | 1514 B frames | 64 B frames |\n|---|--:|--:|"
    );
    for (k, (name, _, _)) in rungs[0].1.iter().enumerate() {
        let cell = |i: usize| {
            let (_, speed, ratio) = &rungs[i].1[k];
            format!("{speed:.0} MB/s, {ratio:.2}")
        };
        let _ = writeln!(md, "| {name} | {} | {} |", cell(0), cell(1));
    }
    let _ = writeln!(md);
    let _ = writeln!(
        md,
        "| frames | capturer | offered | kept | kept % | drops reported | written GB/s (bursts) | \
         ratio | CPU s |\n|--:|---|--:|--:|--:|--:|--:|--:|--:|"
    );
    let mut js = Vec::new();
    let mut series = Vec::new();
    for size in [1514u32, 64] {
        for capturer in ["weir", "tcpdump"] {
            eprintln!("{size}-byte frames: {capturer}");
            let t = (capturer == "tcpdump").then_some(tcpdump.as_path());
            let r = one(o, &weir, &net, &scratch, size, t)?;
            // Write rate while bursting: seconds whose traffic was above
            // half the busiest second's.
            let busiest = r.seconds.iter().map(|s| s.0).max().unwrap_or(0);
            let busy: Vec<f64> = r
                .seconds
                .iter()
                .filter(|s| s.0 * 2 > busiest)
                .map(|s| s.5 / 1e3)
                .collect();
            let write_gbs = spread(&busy).median;
            let ratio = r.pcap_bytes as f64 / r.stored_bytes.max(1) as f64;
            let _ = writeln!(
                md,
                "| {size} | {capturer} | {} | {} | {:.1} % | {} | {} | {} | {:.1} |",
                group_digits(r.offered),
                group_digits(r.kept),
                r.kept as f64 * 100.0 / r.offered.max(1) as f64,
                group_digits(r.dropped_reported),
                if busy.is_empty() {
                    "–".to_string()
                } else {
                    format!(
                        "{write_gbs:.2} ({:.0} % of the disk)",
                        write_gbs * 1e11 / disk_bps
                    )
                },
                if capturer == "weir" {
                    format!("{ratio:.2}")
                } else {
                    "1 (none)".into()
                },
                r.cpu_s
            );
            js.push(
                json!({"size": size, "capturer": capturer, "offered": r.offered,
                "kept": r.kept, "drops_reported": r.dropped_reported, "cpu_s": r.cpu_s,
                "pcap_bytes": r.pcap_bytes, "stored_bytes": r.stored_bytes,
                "burst_write_gbs": write_gbs}),
            );
            if capturer == "weir" {
                series.push((size, r.seconds));
            }
        }
    }
    for (size, secs) in &series {
        let _ = writeln!(
            md,
            "\nweir, {size}-byte frames, per second: offered (kernel) / kept in pcap / dropped \
             / zstd level (0 = stored) / MB written:\n"
        );
        let line: Vec<String> = secs
            .iter()
            .map(|s| {
                format!(
                    "{}/{}/{}/{}/{:.0}",
                    s.0,
                    s.2,
                    s.3,
                    s.4.map_or("-".into(), |l| format!("{l:.0}")),
                    s.5
                )
            })
            .collect();
        let _ = writeln!(md, "`{}`", line.join(" "));
    }
    let _ = writeln!(
        md,
        "\nOffered = rx_packets of the capture interface while the generator ran; kept = \
         frames in the files (for weir, the manifest's pcap files; tcpdump's file read back); \
         written GB/s = median over the burst seconds of the bytes weir's writer put on disk \
         (after compression). Plots: bursts-1514.svg, bursts-64.svg."
    );
    print!("{md}");
    if let Some(p) = &o.json {
        let v = json!({"disk_direct_bps": disk_bps, "direct": direct, "runs": js,
            "seconds": o.seconds});
        fs::write(p, serde_json::to_string_pretty(&v).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    drop(net);
    drop(scratch);
    Ok(())
}
