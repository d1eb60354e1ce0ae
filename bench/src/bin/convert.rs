//! Conversion benchmark: `weir convert` (one and two workers) against
//! `tshark -T fields` and `tcpdump -nn` on generated and real traces, plus
//! the bytes per packet of the Parquet output in flow and arrival order.
//!
//! Usage: convert [--quick] [--json OUT.json] [--dir SCRATCH] [--weir PATH] [--baseline PATH]
//!                [--nfs DIR]
//!
//! Every number comes from child processes timed one at a time: wall time
//! from spawn to exit, CPU (user + sys) and peak RSS from wait4(2). The runs
//! of all tools and inputs are interleaved inside each repetition, so slow
//! drift of the machine hits every tool. See bench/README.md.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};
use weir_bench::*;

/// The fields `weir convert` extracts, by their Wireshark names.
const TSHARK_FIELDS: [&str; 27] = [
    "frame.time_epoch",
    "frame.len",
    "frame.cap_len",
    "eth.src",
    "eth.dst",
    "vlan.id",
    "eth.type",
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "ip.len",
    "ip.proto",
    "ip.ttl",
    "ip.dsfield.dscp",
    "ip.id",
    "tcp.srcport",
    "tcp.dstport",
    "udp.srcport",
    "udp.dstport",
    "tcp.flags",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "tcp.window_size_value",
    "udp.length",
    "icmp.type",
    "icmp.code",
];

const DEFAULT_DIR: &str = "/dev/shm/weir-bench";

struct Sizes {
    reps: usize,
    fixed_frames: u64,
    app_frames: u64,
    tshark_prefix: u64,
}

const FULL: Sizes = Sizes {
    reps: 3,
    fixed_frames: 10_000_000,
    app_frames: 2_000_000,
    tshark_prefix: 500_000,
};
const QUICK: Sizes = Sizes {
    reps: 1,
    fixed_frames: 2_000_000,
    app_frames: 500_000,
    tshark_prefix: 100_000,
};

const USAGE: &str = "\
usage: convert [--quick] [--json OUT.json] [--dir SCRATCH] [--weir PATH] [--baseline PATH]
               [--nfs DIR]

  --quick        smaller inputs and one repetition (under 2 minutes on 2 cores)
  --json FILE    also write every number as JSON to FILE
  --dir DIR      scratch directory, created and removed by the benchmark
                 (default /dev/shm/weir-bench; must not exist, be empty, or be
                 a stale scratch directory of this benchmark)
  --weir PATH    the weir binary (default: next to this binary, i.e. the
                 target/release/weir of `cargo build --release -p weir`)
  --baseline PATH  another weir binary (an older build) timed with -j1 in
                 the same repetitions, for a before/after ratio
  --nfs DIR      directory holding nfsv3.pcap.zst and nfsv4.pcap.zst
                 (default: nfs/ of WEIR_SHARED_DATA, ../shared/data beside the
                 repository, or the test data of scripts/test.sh)";

struct Opts {
    quick: bool,
    json: Option<PathBuf>,
    dir: PathBuf,
    weir: Option<PathBuf>,
    baseline: Option<PathBuf>,
    nfs: PathBuf,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        quick: false,
        json: None,
        dir: PathBuf::from(DEFAULT_DIR),
        weir: None,
        baseline: None,
        nfs: weir_bench::default_data_dir().join("nfs"),
    };
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        let a = a.to_string_lossy().into_owned();
        let mut value = |name: &str| {
            args.next()
                .map(PathBuf::from)
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--quick" => o.quick = true,
            "--json" => o.json = Some(value("--json")?),
            "--dir" => o.dir = value("--dir")?,
            "--weir" => o.weir = Some(value("--weir")?),
            "--baseline" => o.baseline = Some(value("--baseline")?),
            "--nfs" => o.nfs = value("--nfs")?,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => return Err(format!("unknown argument {a:?}\n{USAGE}")),
        }
    }
    Ok(o)
}

struct Tools {
    weir: PathBuf,
    baseline: Option<PathBuf>,
    tshark: PathBuf,
    tcpdump: PathBuf,
    zstd: PathBuf,
}

fn find_tools(o: &Opts) -> Result<Tools, String> {
    Ok(Tools {
        weir: find_weir(o.weir.as_deref())?,
        baseline: o.baseline.clone(),
        tshark: need_tool("tshark", "tshark")?,
        tcpdump: need_tool("tcpdump", "tcpdump")?,
        zstd: need_tool("zstd", "zstd")?,
    })
}

// ---------------------------------------------------------------------------
// Classic pcap files: count frames while reading every byte (this is also the
// page-cache warm-up), and find where the first N records end.

struct Scan {
    frames: u64,
    bytes: u64,
    /// File offset just after frame `cut` (None if the file has fewer).
    cut_end: Option<u64>,
    /// File offset just after the first frame.
    first_end: Option<u64>,
}

fn scan_pcap(path: &Path, cut: u64) -> Result<Scan, String> {
    let err = |e: io::Error| format!("{}: {e}", path.display());
    let mut f = File::open(path).map_err(err)?;
    let mut gh = [0u8; 24];
    f.read_exact(&mut gh).map_err(err)?;
    let be = match u32::from_le_bytes([gh[0], gh[1], gh[2], gh[3]]) {
        0xa1b2_c3d4 | 0xa1b2_3c4d => false,
        0xd4c3_b2a1 | 0x4d3c_b2a1 => true,
        _ => {
            return Err(format!(
                "{}: not a classic pcap file (pcapng is not supported here)",
                path.display()
            ));
        }
    };
    let mut buf = vec![0u8; 4 << 20];
    let (mut off, mut frames, mut skip) = (24u64, 0u64, 0u64);
    let (mut hdr, mut have) = ([0u8; 16], 0usize);
    let (mut cut_end, mut first_end) = (None, None);
    loop {
        check_interrupted()?;
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(err(e)),
        };
        let mut i = 0;
        while i < n {
            if skip > 0 {
                let k = skip.min((n - i) as u64);
                i += k as usize;
                skip -= k;
                continue;
            }
            let k = (16 - have).min(n - i);
            hdr[have..have + k].copy_from_slice(&buf[i..i + k]);
            have += k;
            i += k;
            if have == 16 {
                let c = [hdr[8], hdr[9], hdr[10], hdr[11]];
                let caplen = if be {
                    u32::from_be_bytes(c)
                } else {
                    u32::from_le_bytes(c)
                } as u64;
                if caplen > 1 << 28 {
                    return Err(format!(
                        "{}: record at offset {} claims {caplen} bytes",
                        path.display(),
                        off + i as u64 - 16
                    ));
                }
                frames += 1;
                have = 0;
                skip = caplen;
                let end = off + i as u64 + caplen;
                if frames == 1 {
                    first_end = Some(end);
                }
                if frames == cut {
                    cut_end = Some(end);
                }
            }
        }
        off += n as u64;
    }
    if have != 0 || skip != 0 {
        return Err(format!("{}: the last record is truncated", path.display()));
    }
    Ok(Scan {
        frames,
        bytes: off,
        cut_end,
        first_end,
    })
}

/// Copies the first `len` bytes of `src` (a record boundary) to `dst`.
fn copy_prefix(src: &Path, dst: &Path, len: u64) -> Result<(), String> {
    let mut r = File::open(src)
        .map_err(|e| format!("{}: {e}", src.display()))?
        .take(len);
    let mut w = File::create(dst).map_err(|e| format!("{}: {e}", dst.display()))?;
    let n = io::copy(&mut r, &mut w).map_err(|e| format!("{}: {e}", dst.display()))?;
    if n != len {
        return Err(format!("{}: short copy", src.display()));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Inputs, tools and results.

struct Input {
    name: &'static str,
    origin: String,
    path: PathBuf,
    bytes: u64,
    frames: u64,
    /// The file tshark reads: the input, or its first `tshark_frames` frames.
    tshark_path: PathBuf,
    tshark_frames: u64,
    tshark_bytes: u64,
    /// File offset just after the first frame.
    first_end: u64,
    /// Seconds `weir gen` or `zstd -dc` took to make the file.
    made_s: f64,
    /// Also convert in arrival order for the storage table.
    arrival: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tool {
    WeirJ1,
    /// `--baseline`'s binary, -j1.
    BaselineJ1,
    WeirJ2,
    Tshark,
    Tcpdump,
}

impl Tools {
    /// The tools timed, in the order the first repetition runs them.
    fn timed(&self) -> Vec<Tool> {
        let mut t = vec![Tool::WeirJ1, Tool::WeirJ2, Tool::Tshark, Tool::Tcpdump];
        if self.baseline.is_some() {
            t.insert(1, Tool::BaselineJ1);
        }
        t
    }
}

impl Tool {
    fn label(self) -> &'static str {
        match self {
            Tool::WeirJ1 => "weir convert -j1",
            Tool::BaselineJ1 => "weir convert -j1, --baseline",
            Tool::WeirJ2 => "weir convert -j2",
            Tool::Tshark => "tshark -T fields",
            Tool::Tcpdump => "tcpdump -nn",
        }
    }
    fn key(self) -> &'static str {
        match self {
            Tool::WeirJ1 => "weir_j1",
            Tool::BaselineJ1 => "baseline_j1",
            Tool::WeirJ2 => "weir_j2",
            Tool::Tshark => "tshark",
            Tool::Tcpdump => "tcpdump",
        }
    }
}

struct Run {
    input: usize,
    tool: Tool,
    rep: usize,
    frames: u64,
    m: Measure,
    /// weir's own elapsed time from the manifest (no process start/exit).
    weir_elapsed_s: Option<f64>,
}

#[derive(Clone, Copy)]
struct Stored {
    files: usize,
    rows: u64,
    bytes: u64,
}

impl Stored {
    fn per_row(&self) -> f64 {
        self.bytes as f64 / self.rows.max(1) as f64
    }
    fn json(&self) -> Value {
        json!({"files": self.files, "rows": self.rows, "bytes": self.bytes,
               "bytes_per_packet": self.per_row()})
    }
}

#[derive(Default)]
struct Storage {
    flow: Option<Stored>,
    flow_j2: Option<Stored>,
    arrival: Option<Stored>,
    arrival_run: Option<Measure>,
}

/// Runs `weir convert`, checks the dataset and returns its packet files'
/// sizes, then deletes the dataset.
fn weir_convert(
    weir: &Path,
    scratch: &Scratch,
    input: &Path,
    frames: u64,
    workers: usize,
    order: &str,
) -> Result<(Measure, Stored, f64), String> {
    let out = scratch.path("dataset");
    if out.exists() {
        fs::remove_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    let what = format!(
        "weir convert -j{workers} --order {order} {}",
        input.display()
    );
    let m = run_timed(
        &what,
        Command::new(weir)
            .arg("convert")
            .arg(input)
            .arg("-o")
            .arg(&out)
            .args(["-j", &workers.to_string(), "--order", order, "-q"]),
        &scratch.path("stderr.log"),
    )?;
    let r = dataset_files(&out, frames).map_err(|e| format!("{what}: {e}"));
    fs::remove_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let (stored, elapsed) = r?;
    Ok((m, stored, elapsed))
}

/// Reads manifest.json, checks the frame count, and sums the sizes of the
/// packets/*.parquet files as they are on disk.
fn dataset_files(out: &Path, frames: u64) -> Result<(Stored, f64), String> {
    let mpath = out.join("manifest.json");
    let text = fs::read_to_string(&mpath).map_err(|e| format!("{}: {e}", mpath.display()))?;
    let m: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", mpath.display()))?;
    let got = m["counts"]["frames"].as_u64().unwrap_or(0);
    if got != frames {
        return Err(format!(
            "the dataset holds {got} frames, the input {frames}"
        ));
    }
    let listed: Vec<&Value> = m["files"]["packets"]
        .as_array()
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    let rows: u64 = listed.iter().filter_map(|f| f["rows"].as_u64()).sum();
    let listed_bytes: u64 = listed.iter().filter_map(|f| f["bytes"].as_u64()).sum();
    let dir = out.join("packets");
    let mut bytes = 0;
    let mut files = 0;
    for e in fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        if e.path().extension().is_some_and(|x| x == "parquet") {
            bytes += e
                .metadata()
                .map_err(|e| format!("{}: {e}", dir.display()))?
                .len();
            files += 1;
        }
    }
    if files != listed.len() || bytes != listed_bytes || rows != frames {
        return Err(format!(
            "packets/ holds {files} files of {bytes} bytes, the manifest lists {} of {listed_bytes} bytes with {rows} rows",
            listed.len()
        ));
    }
    let elapsed = m["run"]["elapsed_s"].as_f64().unwrap_or(f64::NAN);
    Ok((Stored { files, rows, bytes }, elapsed))
}

fn tshark_args(file: &Path) -> Vec<String> {
    let mut a = vec![
        "-n".to_string(),
        "-r".to_string(),
        file.display().to_string(),
        "-T".to_string(),
        "fields".to_string(),
    ];
    for f in TSHARK_FIELDS {
        a.push("-e".into());
        a.push(f.into());
    }
    a
}

fn tcpdump_args(file: &Path) -> Vec<String> {
    vec!["-nn".into(), "-r".into(), file.display().to_string()]
}

struct Summary {
    frames: u64,
    wall: Spread,
    fps: Spread,
    cpu_ns: Spread,
    cpu_per_wall: Spread,
    sys_share: Spread,
    max_rss_kb: u64,
    other_cores: Spread,
}

fn summarize(runs: &[&Run]) -> Summary {
    let frames = runs.first().map(|r| r.frames).unwrap_or(0);
    let f = frames.max(1) as f64;
    let col = |g: &dyn Fn(&Run) -> f64| spread(&runs.iter().map(|r| g(r)).collect::<Vec<_>>());
    Summary {
        frames,
        wall: col(&|r| r.m.wall_s),
        fps: col(&|r| f / r.m.wall_s),
        cpu_ns: col(&|r| r.m.cpu_s() * 1e9 / f),
        cpu_per_wall: col(&|r| r.m.cpu_s() / r.m.wall_s),
        sys_share: col(&|r| r.m.sys_s / r.m.cpu_s().max(1e-9)),
        max_rss_kb: runs.iter().map(|r| r.m.max_rss_kb).max().unwrap_or(0),
        other_cores: col(&|r| r.m.other_cpu_s / r.m.wall_s),
    }
}

// ---------------------------------------------------------------------------

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("convert: {e}");
            std::process::exit(2);
        }
    };
    install_signal_handlers();
    if let Err(e) = run(&opts) {
        eprintln!("convert: error: {e}");
        std::process::exit(1);
    }
}

fn run(o: &Opts) -> Result<(), String> {
    let started = Instant::now();
    let sz = if o.quick { QUICK } else { FULL };
    let tools = find_tools(o)?;
    let nfs = nfs_traces(o)?;
    let stale = stale_binary_warning(&tools.weir);
    if let Some(w) = &stale {
        eprintln!("warning: {w}");
    }
    let fs_kind = check_space(&o.dir, &sz)?;

    let scratch = Scratch::create(&o.dir)?;
    let cpu_start = machine_cpu();
    let load_start = loadavg();
    let inputs = make_inputs(&tools, &scratch, &sz, &nfs)?;
    let tshark_startup = check_tools(&tools, &scratch, &inputs[0])?;

    let mut setup = setup_json(o, &sz, &tools, &stale, &fs_kind, tshark_startup);
    setup["loadavg_start"] = json!(load_start);
    print!("{}", setup_markdown(&setup, &inputs));
    let _ = io::stdout().flush();

    let (runs, mut storage) = timed_runs(&tools, &scratch, &sz, &inputs)?;
    arrival_runs(&tools, &scratch, &inputs, &mut storage)?;
    let cpu_end = machine_cpu();
    setup["loadavg_end"] = json!(loadavg());

    let summaries: Vec<Vec<Summary>> = (0..inputs.len())
        .map(|ii| {
            tools
                .timed()
                .iter()
                .map(|&t| {
                    let rs: Vec<&Run> = runs
                        .iter()
                        .filter(|r| r.input == ii && r.tool == t)
                        .collect();
                    summarize(&rs)
                })
                .collect()
        })
        .collect();
    let report = Report {
        sz,
        tools: tools.timed(),
        setup,
        inputs,
        runs,
        storage,
        summaries,
        tshark_startup,
        // CPU of other processes over the whole benchmark, generation included.
        other_cpu_total_s: ((cpu_end.0 - cpu_start.0) - own_cpu_s() - children_cpu_s()).max(0.0),
        steal_total_s: cpu_end.1 - cpu_start.1,
        elapsed_s: started.elapsed().as_secs_f64(),
    };
    print!("{}", report.markdown());
    let _ = io::stdout().flush();
    if let Some(path) = &o.json {
        let text = serde_json::to_string_pretty(&report.json()).map_err(|e| e.to_string())?;
        fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// CPU of all reaped children so far (this process starts no others).
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn nfs_traces(o: &Opts) -> Result<Vec<(&'static str, PathBuf)>, String> {
    let nfs: Vec<(&'static str, PathBuf)> = ["nfsv3", "nfsv4"]
        .iter()
        .map(|n| (*n, o.nfs.join(format!("{n}.pcap.zst"))))
        .collect();
    for (_, p) in &nfs {
        if !p.is_file() {
            return Err(format!(
                "NFS trace {} not found; pass the directory holding nfsv3.pcap.zst and \
                 nfsv4.pcap.zst with --nfs DIR",
                p.display()
            ));
        }
    }
    Ok(nfs)
}

/// Fails early when the scratch file system (or, for tmpfs, memory) is too
/// small; returns the file system type.
fn check_space(dir: &Path, sz: &Sizes) -> Result<String, String> {
    // Generated inputs, decompressed NFS traces, tshark prefixes and one
    // dataset at a time (an overestimate).
    let need = sz.fixed_frames * 80
        + sz.app_frames * 1000
        + 1_100_000_000
        + 3 * sz.tshark_prefix * 1000
        + 300_000_000;
    let parent = dir
        .ancestors()
        .find(|a| a.exists())
        .unwrap_or(Path::new("/"));
    let (fs_kind, free) = fs_info(parent);
    if free > 0 && free < need {
        return Err(format!(
            "the benchmark needs about {} in {}, but only {} are free; choose another place with --dir",
            mb(need),
            parent.display(),
            mb(free)
        ));
    }
    let avail = meminfo_kb("MemAvailable").unwrap_or(0) * 1024;
    if fs_kind == "tmpfs" && avail > 0 && avail < need + (2 << 30) {
        return Err(format!(
            "{} is tmpfs (memory): the inputs need about {} plus ~2 GiB for the tools, but only {} \
             of memory is available; use --dir on a disk",
            parent.display(),
            mb(need),
            mb(avail)
        ));
    }
    Ok(fs_kind)
}

/// Generates the synthetic inputs, decompresses the NFS traces, reads every
/// file once (page cache warm; counts frames) and cuts the tshark prefixes.
fn make_inputs(
    tools: &Tools,
    scratch: &Scratch,
    sz: &Sizes,
    nfs: &[(&'static str, PathBuf)],
) -> Result<Vec<Input>, String> {
    let errlog = scratch.path("stderr.log");
    let strings = |a: &[&str], count: u64| -> Vec<String> {
        a.iter()
            .map(|s| s.to_string())
            .chain([count.to_string()])
            .collect()
    };
    let fixed = strings(
        &[
            "--model", "fixed", "--size", "64", "--flows", "1000", "--seed", "1", "-c",
        ],
        sz.fixed_frames,
    );
    let app = strings(&["--model", "app", "--seed", "1", "-c"], sz.app_frames);
    let mut sources = Vec::new();
    for (name, args, arrival) in [("fixed64", fixed, false), ("app", app, true)] {
        let path = scratch.path(&format!("{name}.pcap"));
        let what = format!("weir gen {}", args.join(" "));
        eprintln!("{what} ...");
        let m = run_timed(
            &what,
            Command::new(&tools.weir)
                .arg("gen")
                .args(&args)
                .arg("-w")
                .arg(&path),
            &errlog,
        )?;
        sources.push((name, what, path, arrival, m.wall_s));
    }
    for (name, src) in nfs {
        let path = scratch.path(&format!("{name}.pcap"));
        let what = format!("zstd -dc {}", src.display());
        eprintln!("{what} ...");
        let out = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let m = run_timed_with(
            &what,
            Command::new(&tools.zstd).arg("-dc").arg(src),
            &errlog,
            Stdio::from(out),
        )?;
        sources.push((name, what, path, true, m.wall_s));
    }

    let mut inputs = Vec::new();
    for (name, origin, path, arrival, made_s) in sources {
        eprintln!("reading {} ...", path.display());
        let s = scan_pcap(&path, sz.tshark_prefix)?;
        let first_end = s
            .first_end
            .ok_or_else(|| format!("{}: no frames", path.display()))?;
        let (tshark_path, tshark_frames, tshark_bytes) = match s.cut_end {
            Some(end) if s.frames > sz.tshark_prefix => {
                let p = scratch.path(&format!("{name}.tshark-prefix.pcap"));
                copy_prefix(&path, &p, end)?;
                let check = scan_pcap(&p, 0)?;
                if check.frames != sz.tshark_prefix {
                    return Err(format!(
                        "{}: the prefix has {} frames",
                        p.display(),
                        check.frames
                    ));
                }
                (p, sz.tshark_prefix, end)
            }
            _ => (path.clone(), s.frames, s.bytes),
        };
        inputs.push(Input {
            name,
            origin,
            path,
            bytes: s.bytes,
            frames: s.frames,
            first_end,
            made_s,
            tshark_path,
            tshark_frames,
            tshark_bytes,
            arrival,
        });
    }
    Ok(inputs)
}

/// Runs every tool once on a one-frame file (untimed; this also checks that
/// tshark knows every field and loads the tools' libraries into the page
/// cache), then times tshark's start-up.
fn check_tools(tools: &Tools, scratch: &Scratch, first: &Input) -> Result<Spread, String> {
    let errlog = scratch.path("stderr.log");
    let one = scratch.path("one-frame.pcap");
    copy_prefix(&first.path, &one, first.first_end)?;
    eprintln!("checking the tools on a one-frame file ...");
    let out = Command::new(&tools.tshark)
        .args(tshark_args(&one))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("tshark: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.lines().count() != 1 {
        return Err(format!(
            "tshark -T fields on one frame failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let cols = text.lines().next().unwrap_or("").split('\t').count();
    if cols != TSHARK_FIELDS.len() {
        return Err(format!(
            "tshark printed {cols} columns, expected {}",
            TSHARK_FIELDS.len()
        ));
    }
    run_timed(
        "tcpdump (check)",
        Command::new(&tools.tcpdump).args(tcpdump_args(&one)),
        &errlog,
    )?;
    weir_convert(&tools.weir, scratch, &one, 1, 1, "flow")?;
    let startup = (0..3)
        .map(|_| {
            run_timed(
                "tshark (start-up)",
                Command::new(&tools.tshark).args(tshark_args(&one)),
                &errlog,
            )
            .map(|m| m.wall_s)
        })
        .collect::<Result<Vec<_>, _>>()?;
    fs::remove_file(&one).map_err(|e| format!("{}: {e}", one.display()))?;
    Ok(spread(&startup))
}

fn setup_json(
    o: &Opts,
    sz: &Sizes,
    tools: &Tools,
    stale: &Option<String>,
    fs_kind: &str,
    tshark_startup: Spread,
) -> Value {
    let cores = fs::read_to_string("/proc/cpuinfo")
        .map(|s| s.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(0);
    let kernel = tool_output(Path::new("uname"), &["-r"]).or_else(|| {
        fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string())
    });
    json!({
        "kernel": kernel,
        "cpu_model": first_line_of("/proc/cpuinfo", "model name"),
        "cpu_cores": cores,
        "usable_cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "mem_total_bytes": meminfo_kb("MemTotal").map(|k| k * 1024),
        "mem_available_bytes": meminfo_kb("MemAvailable").map(|k| k * 1024),
        "weir_version": tool_output(&tools.weir, &["--version"]),
        "weir_path": tools.weir.display().to_string(),
        "baseline_version": tools.baseline.as_ref().map(|b| tool_output(b, &["--version"])),
        "baseline_path": tools.baseline.as_ref().map(|b| b.display().to_string()),
        "weir_stale_warning": stale,
        "git_revision": git_revision(),
        "tshark_version": tool_output(&tools.tshark, &["--version"]),
        "tcpdump_version": tool_output(&tools.tcpdump, &["--version"]),
        "zstd_version": tool_output(&tools.zstd, &["--version"]),
        "scratch_dir": o.dir.display().to_string(),
        "scratch_fs": fs_kind,
        "tz": std::env::var("TZ").ok(),
        "quick": o.quick,
        "repetitions": sz.reps,
        "tshark_prefix_frames": sz.tshark_prefix,
        "tshark_startup_s": tshark_startup.json(),
        "child_timeout_s": CHILD_TIMEOUT.as_secs(),
    })
}

fn setup_markdown(setup: &Value, inputs: &[Input]) -> String {
    let s = |k: &str| match &setup[k] {
        Value::String(s) => s.clone(),
        Value::Null => "?".into(),
        v => v.to_string(),
    };
    let bytes = |k: &str| mb(setup[k].as_u64().unwrap_or(0));
    let mut md = String::new();
    let quick = if setup["quick"] == json!(true) {
        " (--quick)"
    } else {
        ""
    };
    let _ = writeln!(md, "## weir convert benchmark{quick}\n");
    let _ = writeln!(md, "- kernel: {}", s("kernel"));
    let _ = writeln!(
        md,
        "- CPU: {}, {} cores ({} usable by this process)",
        s("cpu_model"),
        s("cpu_cores"),
        s("usable_cores")
    );
    let _ = writeln!(
        md,
        "- memory: {} total, {} available at start",
        bytes("mem_total_bytes"),
        bytes("mem_available_bytes")
    );
    let _ = writeln!(
        md,
        "- weir: {} ({}, git {})",
        s("weir_version"),
        s("weir_path"),
        s("git_revision")
    );
    if let Some(w) = setup["weir_stale_warning"].as_str() {
        let _ = writeln!(md, "- **warning**: {w}");
    }
    let _ = writeln!(md, "- tshark: {}", s("tshark_version"));
    let _ = writeln!(md, "- tcpdump: {}", s("tcpdump_version"));
    let _ = writeln!(md, "- zstd: {}", s("zstd_version"));
    let _ = writeln!(md, "- scratch: {} ({})", s("scratch_dir"), s("scratch_fs"));
    let _ = writeln!(
        md,
        "- tcpdump and tshark run with TZ=UTC (with TZ unset, glibc's localtime(3) stat()s \
         /etc/localtime for every packet, which slows tcpdump 1.6x on small frames)"
    );
    let _ = writeln!(md, "- load average at start: {}", s("loadavg_start"));
    let _ = writeln!(
        md,
        "- {} repetition(s), interleaved; tshark on the first {} frames of each input; \
         tshark start-up {:.2} s (included in its times)\n",
        s("repetitions"),
        group_digits(setup["tshark_prefix_frames"].as_u64().unwrap_or(0)),
        setup["tshark_startup_s"]["median"]
            .as_f64()
            .unwrap_or(f64::NAN)
    );
    let _ = writeln!(md, "| input | made by | file | size | frames | B/frame |");
    let _ = writeln!(md, "|---|---|---|--:|--:|--:|");
    for i in inputs {
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {} | {} | {:.1} |",
            i.name,
            i.origin,
            i.path.display(),
            mb(i.bytes),
            group_digits(i.frames),
            i.bytes as f64 / i.frames as f64
        );
    }
    md
}

/// The timed runs: repetitions outermost, then inputs, then the four tools
/// in an order that rotates with both, so that drift and position effects
/// hit every tool. The first -j1 and -j2 run of each input also records the
/// dataset's sizes (flow order).
fn timed_runs(
    tools: &Tools,
    scratch: &Scratch,
    sz: &Sizes,
    inputs: &[Input],
) -> Result<(Vec<Run>, Vec<Storage>), String> {
    let errlog = scratch.path("stderr.log");
    let mut runs = Vec::new();
    let mut storage: Vec<Storage> = inputs.iter().map(|_| Storage::default()).collect();
    for rep in 0..sz.reps {
        for (ii, inp) in inputs.iter().enumerate() {
            let timed = tools.timed();
            for k in 0..timed.len() {
                let tool = timed[(k + rep + ii) % timed.len()];
                let (m, frames, weir_elapsed_s) = match tool {
                    Tool::BaselineJ1 => {
                        let bin = tools.baseline.as_deref().unwrap_or(&tools.weir);
                        let (m, _, el) =
                            weir_convert(bin, scratch, &inp.path, inp.frames, 1, "flow")?;
                        (m, inp.frames, Some(el))
                    }
                    Tool::WeirJ1 | Tool::WeirJ2 => {
                        let j = if tool == Tool::WeirJ1 { 1 } else { 2 };
                        let (m, st, el) =
                            weir_convert(&tools.weir, scratch, &inp.path, inp.frames, j, "flow")?;
                        let slot = if j == 1 {
                            &mut storage[ii].flow
                        } else {
                            &mut storage[ii].flow_j2
                        };
                        slot.get_or_insert(st);
                        (m, inp.frames, Some(el))
                    }
                    Tool::Tshark => {
                        let m = run_timed(
                            &format!("tshark on {}", inp.tshark_path.display()),
                            Command::new(&tools.tshark)
                                .env("TZ", "UTC")
                                .args(tshark_args(&inp.tshark_path)),
                            &errlog,
                        )?;
                        (m, inp.tshark_frames, None)
                    }
                    Tool::Tcpdump => {
                        let m = run_timed(
                            &format!("tcpdump on {}", inp.path.display()),
                            // TZ=UTC spares tcpdump a stat of /etc/localtime per
                            // packet: compare against it at its best.
                            Command::new(&tools.tcpdump)
                                .env("TZ", "UTC")
                                .args(tcpdump_args(&inp.path)),
                            &errlog,
                        )?;
                        (m, inp.frames, None)
                    }
                };
                eprintln!(
                    "[{}/{}] {:8} {:17} {:8.3} s {:>7} M frames/s {:>6} ns CPU/frame, other load {:.2} cores",
                    rep + 1,
                    sz.reps,
                    inp.name,
                    tool.label(),
                    m.wall_s,
                    mfps(frames as f64 / m.wall_s),
                    ns(m.cpu_s() * 1e9 / frames as f64),
                    m.other_cpu_s / m.wall_s
                );
                runs.push(Run {
                    input: ii,
                    tool,
                    rep,
                    frames,
                    m,
                    weir_elapsed_s,
                });
            }
        }
    }
    Ok((runs, storage))
}

/// One `weir convert -j1 --order arrival` per input that asks for it, for
/// the storage table.
fn arrival_runs(
    tools: &Tools,
    scratch: &Scratch,
    inputs: &[Input],
    storage: &mut [Storage],
) -> Result<(), String> {
    for (inp, st) in inputs.iter().zip(storage) {
        if inp.arrival {
            let (m, stored, _) =
                weir_convert(&tools.weir, scratch, &inp.path, inp.frames, 1, "arrival")?;
            eprintln!(
                "[arrival] {:8} weir convert -j1 --order arrival {:.3} s",
                inp.name, m.wall_s
            );
            st.arrival = Some(stored);
            st.arrival_run = Some(m);
        }
    }
    Ok(())
}

struct Report {
    sz: Sizes,
    setup: Value,
    inputs: Vec<Input>,
    runs: Vec<Run>,
    storage: Vec<Storage>,
    /// The tools timed.
    tools: Vec<Tool>,
    /// Per input, per tool in `tools` order.
    summaries: Vec<Vec<Summary>>,
    tshark_startup: Spread,
    other_cpu_total_s: f64,
    steal_total_s: f64,
    elapsed_s: f64,
}

/// Ratios of medians for one input.
struct Ratios {
    /// weir -j1 frames/s over tshark's, and tshark's CPU per frame over weir's.
    tshark_speed: f64,
    tshark_cpu: f64,
    tcpdump_speed: f64,
    tcpdump_cpu: f64,
    /// weir -j2 frames/s over -j1's, and -j2's CPU per frame over -j1's.
    j2_speed: f64,
    j2_cpu: f64,
    /// weir -j1 frames/s over the baseline's, and its CPU per frame over
    /// the baseline's.
    baseline: Option<(f64, f64)>,
}

impl Report {
    fn summary(&self, input: usize, tool: Tool) -> &Summary {
        let t = self.tools.iter().position(|x| *x == tool).unwrap_or(0);
        &self.summaries[input][t]
    }

    fn ratios(&self, ii: usize) -> Ratios {
        let s = |t| self.summary(ii, t);
        let speed = |a, b| s(a).fps.median / s(b).fps.median;
        let cpu = |a, b| s(a).cpu_ns.median / s(b).cpu_ns.median;
        Ratios {
            tshark_speed: speed(Tool::WeirJ1, Tool::Tshark),
            tshark_cpu: cpu(Tool::Tshark, Tool::WeirJ1),
            tcpdump_speed: speed(Tool::WeirJ1, Tool::Tcpdump),
            tcpdump_cpu: cpu(Tool::Tcpdump, Tool::WeirJ1),
            j2_speed: speed(Tool::WeirJ2, Tool::WeirJ1),
            j2_cpu: cpu(Tool::WeirJ2, Tool::WeirJ1),
            baseline: self.tools.contains(&Tool::BaselineJ1).then(|| {
                (
                    speed(Tool::WeirJ1, Tool::BaselineJ1),
                    cpu(Tool::WeirJ1, Tool::BaselineJ1),
                )
            }),
        }
    }

    fn other_load(&self) -> (Spread, f64) {
        let v: Vec<f64> = self
            .runs
            .iter()
            .map(|r| r.m.other_cpu_s / r.m.wall_s)
            .collect();
        (spread(&v), self.runs.iter().map(|r| r.m.steal_s).sum())
    }

    fn markdown(&self) -> String {
        let reps = self.sz.reps;
        let mut md = String::new();
        let how = if reps > 1 {
            format!("median (min–max) of {reps} interleaved runs")
        } else {
            "one run each".to_string()
        };
        let _ = writeln!(md, "\n### Speed ({how})\n");
        let _ = writeln!(
            md,
            "| input | tool | frames timed | wall s | M frames/s | CPU ns/frame | CPU÷wall | sys | max RSS | other load |"
        );
        let _ = writeln!(md, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
        for (ii, inp) in self.inputs.iter().enumerate() {
            for &tool in &self.tools {
                let s = self.summary(ii, tool);
                let (mark, prefix) = match tool {
                    Tool::Tshark if s.frames < inp.frames => (" †", " (prefix)"),
                    Tool::Tshark => (" †", ""),
                    _ => ("", ""),
                };
                let _ = writeln!(
                    md,
                    "| {} | {}{mark} | {}{prefix} | {} | {} | {} | {:.2} | {:.0}% | {} | {:.2} |",
                    inp.name,
                    tool.label(),
                    group_digits(s.frames),
                    s.wall.show(reps, |x| format!("{x:.2}")),
                    s.fps.show(reps, mfps),
                    s.cpu_ns.show(reps, ns),
                    s.cpu_per_wall.median,
                    s.sys_share.median * 100.0,
                    mb(s.max_rss_kb * 1024),
                    s.other_cores.median,
                );
            }
        }
        let _ = writeln!(
            md,
            "\n† tshark reads only the first {} frames of each input (cut at a record boundary; the whole \
             file when it is shorter), so its rate is per frame of that prefix; its times include {:.2} s \
             of start-up. CPU = user + sys of the child (wait4); CPU÷wall = cores it kept busy; sys = \
             share of its CPU in the kernel; other load = cores used by other processes while it ran \
             (median, from /proc/stat).",
            group_digits(self.sz.tshark_prefix),
            self.tshark_startup.median
        );

        let _ = writeln!(md, "\n### Ratios (of the medians)\n");
        let _ = writeln!(
            md,
            "| input | weir -j1 vs tshark: speed | CPU | weir -j1 vs tcpdump: speed | CPU | weir -j2 vs -j1: speed | CPU per frame |"
        );
        let _ = writeln!(md, "|---|--:|--:|--:|--:|--:|--:|");
        for (ii, inp) in self.inputs.iter().enumerate() {
            let r = self.ratios(ii);
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} |",
                inp.name,
                ratio(r.tshark_speed),
                ratio(r.tshark_cpu),
                ratio(r.tcpdump_speed),
                ratio(r.tcpdump_cpu),
                ratio(r.j2_speed),
                ratio(r.j2_cpu),
            );
        }
        let _ = writeln!(
            md,
            "\nvs tshark and tcpdump: how many times more frames per second weir -j1 converts (speed) and \
             how many times less CPU it spends per frame (CPU). weir -j2 vs -j1: the speed-up from a second \
             worker (2 would be ideal on 2 idle cores) and the CPU per frame relative to -j1."
        );
        if self.tools.contains(&Tool::BaselineJ1) {
            let _ = writeln!(
                md,
                "\n### Against the baseline ({})\n\n| input | weir -j1 ÷ baseline: speed | CPU per frame |\n|---|--:|--:|",
                self.setup["baseline_version"].as_str().unwrap_or("?")
            );
            for (ii, inp) in self.inputs.iter().enumerate() {
                if let Some((speed, cpu)) = self.ratios(ii).baseline {
                    let _ = writeln!(md, "| {} | {} | {} |", inp.name, ratio(speed), ratio(cpu));
                }
            }
            let _ = writeln!(
                md,
                "\nAbove 1.00 speed and below 1.00 CPU: this weir converts faster and cheaper than the \
                 baseline, in the same repetitions."
            );
        }

        let _ = writeln!(
            md,
            "\n### Storage (bytes per packet of packets/*.parquet, weir convert -j1)\n"
        );
        let _ = writeln!(
            md,
            "| input | pcap B/frame | flow order | arrival order | arrival ÷ flow | pcap ÷ parquet (flow) | flow order, -j2 |"
        );
        let _ = writeln!(md, "|---|--:|--:|--:|--:|--:|--:|");
        for (inp, st) in self.inputs.iter().zip(&self.storage) {
            let pcap = inp.bytes as f64 / inp.frames as f64;
            let flow = st.flow.map(|s| s.per_row()).unwrap_or(f64::NAN);
            let arr = st.arrival.map(|s| s.per_row());
            let dash = || "—".to_string();
            let _ = writeln!(
                md,
                "| {} | {:.1} | {:.2} | {} | {} | {:.0}× | {} |",
                inp.name,
                pcap,
                flow,
                arr.map(|a| format!("{a:.2}")).unwrap_or_else(dash),
                arr.map(|a| format!("{:.2}", a / flow)).unwrap_or_else(dash),
                pcap / flow,
                st.flow_j2
                    .map(|s| format!("{:.2}", s.per_row()))
                    .unwrap_or_else(dash),
            );
        }
        let _ = writeln!(
            md,
            "\npcap B/frame includes the 16-byte record headers. -j2 writes one file per worker, \
             each with its own dictionaries and row groups."
        );

        let (other, steal) = self.other_load();
        let s = |k: &str| self.setup[k].as_str().unwrap_or("?").to_string();
        let _ = writeln!(
            md,
            "\nLoad average {} at start, {} at end. While the timed tools ran, other processes used \
             {:.2} cores on median ({:.2}–{:.2}); steal {:.1} s. Whole benchmark {:.0} s, in which \
             other processes used {:.0} CPU-seconds (steal {:.1} s).",
            s("loadavg_start"),
            s("loadavg_end"),
            other.median,
            other.min,
            other.max,
            steal,
            self.elapsed_s,
            self.other_cpu_total_s,
            self.steal_total_s,
        );
        md
    }

    fn json(&self) -> Value {
        let name = |i: usize| self.inputs[i].name;
        let results: Vec<Value> = (0..self.inputs.len())
            .flat_map(|ii| self.tools.iter().map(move |&t| (ii, t)))
            .map(|(ii, t)| {
                let s = self.summary(ii, t);
                json!({
                    "input": name(ii),
                    "tool": t.key(),
                    "label": t.label(),
                    "frames": s.frames,
                    "wall_s": s.wall.json(),
                    "frames_per_s": s.fps.json(),
                    "cpu_ns_per_frame": s.cpu_ns.json(),
                    "cpu_per_wall": s.cpu_per_wall.json(),
                    "sys_share": s.sys_share.json(),
                    "max_rss_bytes": s.max_rss_kb * 1024,
                    "other_load_cores": s.other_cores.json(),
                })
            })
            .collect();
        let ratios: Vec<Value> = (0..self.inputs.len())
            .map(|ii| {
                let r = self.ratios(ii);
                json!({
                    "input": name(ii),
                    "weir_j1_vs_tshark": {"speed": r.tshark_speed, "cpu_saving": r.tshark_cpu},
                    "weir_j1_vs_tcpdump": {"speed": r.tcpdump_speed, "cpu_saving": r.tcpdump_cpu},
                    "weir_j2_vs_j1": {"speed": r.j2_speed, "cpu_per_frame": r.j2_cpu},
                    "weir_j1_vs_baseline": r.baseline.map(|(speed, cpu)| {
                        json!({"speed": speed, "cpu_per_frame": cpu})
                    }),
                })
            })
            .collect();
        let inputs: Vec<Value> = self
            .inputs
            .iter()
            .map(|i| {
                json!({
                    "name": i.name,
                    "made_by": i.origin,
                    "made_in_s": i.made_s,
                    "bytes": i.bytes,
                    "frames": i.frames,
                    "tshark_frames": i.tshark_frames,
                    "tshark_bytes": i.tshark_bytes,
                })
            })
            .collect();
        let runs: Vec<Value> = self
            .runs
            .iter()
            .map(|r| {
                json!({
                    "input": name(r.input),
                    "tool": r.tool.key(),
                    "rep": r.rep,
                    "frames": r.frames,
                    "wall_s": r.m.wall_s,
                    "user_s": r.m.user_s,
                    "sys_s": r.m.sys_s,
                    "max_rss_bytes": r.m.max_rss_kb * 1024,
                    "other_cpu_s": r.m.other_cpu_s,
                    "steal_s": r.m.steal_s,
                    "weir_elapsed_s": r.weir_elapsed_s,
                })
            })
            .collect();
        let storage: Vec<Value> = self
            .inputs
            .iter()
            .zip(&self.storage)
            .map(|(i, s)| {
                json!({
                    "input": i.name,
                    "pcap_bytes_per_frame": i.bytes as f64 / i.frames as f64,
                    "flow": s.flow.map(|x| x.json()),
                    "flow_j2": s.flow_j2.map(|x| x.json()),
                    "arrival": s.arrival.map(|x| x.json()),
                    "arrival_run": s.arrival_run.map(|m| json!({
                        "wall_s": m.wall_s, "user_s": m.user_s, "sys_s": m.sys_s,
                    })),
                })
            })
            .collect();
        let (other, steal) = self.other_load();
        json!({
            "benchmark": "weir-bench convert",
            "setup": self.setup,
            "inputs": inputs,
            "runs": runs,
            "results": results,
            "ratios": ratios,
            "storage": storage,
            "background": {
                "other_load_cores_during_runs": other.json(),
                "steal_s_during_runs": steal,
                "other_cpu_s_whole_benchmark": self.other_cpu_total_s,
                "steal_s_whole_benchmark": self.steal_total_s,
            },
            "elapsed_s": self.elapsed_s,
        })
    }
}
