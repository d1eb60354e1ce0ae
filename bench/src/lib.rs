//! Shared pieces of weir's benchmarks: timed child processes, scratch
//! directories, signal handling, spreads of repeated runs, number
//! formatting, and a description of the machine and tools.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
pub use util::fmt::group_digits;

/// Marks a scratch directory as ours, so a stale one may be removed.
pub const MARKER: &str = ".weir-bench-scratch";
/// No single child may run longer than this; it is killed and the run fails.
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(600);

// ---------------------------------------------------------------------------
// Signals: SIGINT/SIGTERM/SIGHUP set a flag; the watchdog of the running child
// kills it, the run fails with "interrupted" and the scratch guard cleans up.

pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Default data directory of the benchmarks (`--data`): `WEIR_SHARED_DATA`,
/// else `../shared/data` beside the repository when it exists (the data the
/// figures in docs/BENCHMARKS.md were measured on), else the test data
/// `scripts/test.sh` fetched and recorded (`$WEIR_CACHE/test-data`).
pub fn default_data_dir() -> PathBuf {
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data");
    if std::env::var_os("WEIR_SHARED_DATA").is_none() && beside.is_dir() {
        return beside;
    }
    testdata::locate()
}

pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe; the struct is fully initialised.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

pub fn check_interrupted() -> Result<(), String> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Scratch directory.

/// Owns the scratch directory: removes what it created on drop (also on
/// error, panic or interrupt).
pub struct Scratch {
    pub dir: PathBuf,
    /// We created the directory itself (not only its contents).
    pub created: bool,
}

impl Scratch {
    pub fn create(dir: &Path) -> Result<Scratch, String> {
        let created = match fs::read_dir(dir) {
            Ok(entries) => {
                let names: Vec<_> = entries
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name())
                    .collect();
                if names.is_empty() {
                    false
                } else if names.iter().any(|n| n == MARKER) {
                    eprintln!("removing stale scratch directory {}", dir.display());
                    fs::remove_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                    true
                } else {
                    return Err(format!(
                        "scratch directory {} exists and is not empty; choose another with --dir",
                        dir.display()
                    ));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                true
            }
            Err(e) => return Err(format!("{}: {e}", dir.display())),
        };
        let s = Scratch {
            dir: dir.to_path_buf(),
            created,
        };
        File::create(s.path(MARKER)).map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(s)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let r = if self.created {
            fs::remove_dir_all(&self.dir)
        } else {
            fs::read_dir(&self.dir).and_then(|entries| {
                for e in entries {
                    let p = e?.path();
                    if p.is_dir() {
                        fs::remove_dir_all(&p)?;
                    } else {
                        fs::remove_file(&p)?;
                    }
                }
                Ok(())
            })
        };
        match r {
            Ok(()) => eprintln!("removed scratch files in {}", self.dir.display()),
            Err(e) => eprintln!(
                "warning: could not clean up {}: {e}; remove it by hand",
                self.dir.display()
            ),
        }
    }
}

// ---------------------------------------------------------------------------
// Timed child processes.

#[derive(Clone, Copy, Default)]
pub struct Measure {
    pub wall_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    pub max_rss_kb: u64,
    /// CPU the rest of the machine used while the child ran (from /proc/stat,
    /// minus the child and this process).
    pub other_cpu_s: f64,
    pub steal_s: f64,
}

impl Measure {
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }
}

/// Busy and steal time of all CPUs, in seconds, from /proc/stat.
pub fn machine_cpu() -> (f64, f64) {
    let hz = clock_ticks_per_s();
    let Ok(s) = fs::read_to_string("/proc/stat") else {
        return (0.0, 0.0);
    };
    let Some(line) = s.lines().next() else {
        return (0.0, 0.0);
    };
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    if f.len() < 8 {
        return (0.0, 0.0);
    }
    let busy = f[0] + f[1] + f[2] + f[5] + f[6];
    (busy as f64 / hz, f[7] as f64 / hz)
}

pub fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

pub fn own_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 * 1e-6
}

pub fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Runs `cmd` with stdin and stdout on /dev/null and stderr into `errlog`,
/// and measures it. Fails if it exits non-zero, is killed, or runs longer
/// than CHILD_TIMEOUT.
pub fn run_timed(what: &str, cmd: &mut Command, errlog: &Path) -> Result<Measure, String> {
    run_timed_with(what, cmd, errlog, Stdio::null())
}

pub fn run_timed_with(
    what: &str,
    cmd: &mut Command,
    errlog: &Path,
    stdout: Stdio,
) -> Result<Measure, String> {
    check_interrupted()?;
    let err = File::create(errlog).map_err(|e| format!("{}: {e}", errlog.display()))?;
    cmd.stdin(Stdio::null()).stdout(stdout).stderr(err);
    let (busy0, steal0) = machine_cpu();
    let own0 = own_cpu_s();
    let t0 = Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| format!("{what}: cannot start {:?}: {e}", cmd.get_program()))?;
    let pid = child.id() as libc::pid_t;

    // The watchdog kills the child on timeout or interrupt. The child is not
    // reaped until `done` is set under the lock, so the pid it kills is
    // always ours (at worst a zombie).
    let done = Arc::new((Mutex::new(false), Condvar::new()));
    let killed = Arc::new(Mutex::new(None::<&'static str>));
    let watchdog = {
        let (done, killed) = (Arc::clone(&done), Arc::clone(&killed));
        std::thread::spawn(move || {
            let (lock, cv) = &*done;
            let mut g = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*g {
                let why = if INTERRUPTED.load(Ordering::SeqCst) {
                    Some("interrupted")
                } else if t0.elapsed() > CHILD_TIMEOUT {
                    Some("timed out")
                } else {
                    None
                };
                if let Some(why) = why {
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    *killed.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                    break;
                }
                g = cv
                    .wait_timeout(g, Duration::from_millis(100))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        })
    };
    // Wait for the exit without reaping.
    let waited = loop {
        // SAFETY: waitid writes into the zeroed siginfo we pass.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            break Ok(());
        }
        if errno() != libc::EINTR {
            break Err(format!("{what}: waitid: {}", io::Error::last_os_error()));
        }
    };
    let wall_s = t0.elapsed().as_secs_f64();
    {
        let (lock, cv) = &*done;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }
    let _ = watchdog.join();
    waited?;
    let mut status: libc::c_int = 0;
    // SAFETY: wait4 writes into the zeroed rusage and the status we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        if errno() != libc::EINTR {
            return Err(format!("{what}: wait4: {}", io::Error::last_os_error()));
        }
    }
    drop(child);
    let (busy1, steal1) = machine_cpu();
    let own1 = own_cpu_s();
    let m = Measure {
        wall_s,
        user_s: tv(ru.ru_utime),
        sys_s: tv(ru.ru_stime),
        max_rss_kb: ru.ru_maxrss.max(0) as u64,
        other_cpu_s: 0.0,
        steal_s: (steal1 - steal0).max(0.0),
    };
    let m = Measure {
        other_cpu_s: ((busy1 - busy0) - m.cpu_s() - (own1 - own0)).max(0.0),
        ..m
    };
    if let Some(why) = *killed.lock().unwrap_or_else(|e| e.into_inner()) {
        return Err(format!("{what}: {why} after {wall_s:.1} s; killed it"));
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let how = if libc::WIFEXITED(status) {
            format!("exited with status {}", libc::WEXITSTATUS(status))
        } else {
            format!("killed by signal {}", libc::WTERMSIG(status))
        };
        return Err(format!("{what}: {how}{}", tail(errlog)));
    }
    Ok(m)
}

/// The last lines of a log file, for error messages.
pub fn tail(p: &Path) -> String {
    let s = fs::read_to_string(p).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    let start = lines.len().saturating_sub(8);
    if lines.is_empty() {
        String::new()
    } else {
        format!("; its stderr ends:\n  {}", lines[start..].join("\n  "))
    }
}

/// First line of a tool's output (stdout, else stderr) for `args`.
pub fn tool_output(prog: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()?;
    let s = String::from_utf8_lossy(if out.stdout.is_empty() {
        &out.stderr
    } else {
        &out.stdout
    })
    .into_owned();
    s.lines()
        .find(|l| !l.trim().is_empty())
        .map(|l| l.trim().to_string())
}

pub fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Warns when the weir binary is older than the workspace sources it is
/// built from (then the benchmark would measure stale code).
pub fn stale_binary_warning(weir: &Path) -> Option<String> {
    let built = fs::metadata(weir).and_then(|m| m.modified()).ok()?;
    let ws = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let mut newest: Option<(SystemTime, PathBuf)> = None;
    for f in ["Cargo.toml", "Cargo.lock"] {
        consider(&ws.join(f), &mut newest);
    }
    // What goes into the binary: each crate's manifest and src/ tree.
    let crates = fs::read_dir(ws.join("crates")).ok()?;
    let mut stack = Vec::new();
    for c in crates.filter_map(|e| e.ok()).map(|e| e.path()) {
        consider(&c.join("Cargo.toml"), &mut newest);
        stack.push(c.join("src"));
    }
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for p in rd.filter_map(|e| e.ok()).map(|e| e.path()) {
            if p.is_dir() {
                stack.push(p);
            } else {
                consider(&p, &mut newest);
            }
        }
    }
    let (t, p) = newest?;
    (t > built).then(|| {
        format!(
            "{} is older than {}; rebuild with `cargo build --release -p weir`",
            weir.display(),
            p.display()
        )
    })
}

pub fn consider(p: &Path, newest: &mut Option<(SystemTime, PathBuf)>) {
    let Ok(t) = fs::metadata(p).and_then(|m| m.modified()) else {
        return;
    };
    if newest.as_ref().is_none_or(|(n, _)| t > *n) {
        *newest = Some((t, p.to_path_buf()));
    }
}

// ---------------------------------------------------------------------------
// Statistics and formatting.

#[derive(Clone, Copy)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

pub fn spread(v: &[f64]) -> Spread {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return Spread {
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        };
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Spread {
        median,
        min: s[0],
        max: s[n - 1],
    }
}

impl Spread {
    pub fn json(&self) -> Value {
        json!({"median": self.median, "min": self.min, "max": self.max})
    }
    pub fn show(&self, reps: usize, f: impl Fn(f64) -> String) -> String {
        if reps > 1 {
            format!("{} ({}–{})", f(self.median), f(self.min), f(self.max))
        } else {
            f(self.median)
        }
    }
}

pub fn mb(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    }
}

pub fn mfps(x: f64) -> String {
    let m = x / 1e6;
    if m >= 10.0 {
        format!("{m:.1}")
    } else if m >= 1.0 {
        format!("{m:.2}")
    } else {
        format!("{m:.3}")
    }
}

pub fn ns(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

pub fn ratio(x: f64) -> String {
    if !x.is_finite() {
        "—".into()
    } else if x >= 10.0 {
        format!("{x:.0}×")
    } else {
        format!("{x:.2}×")
    }
}

// ---------------------------------------------------------------------------
// Setup description.

pub fn first_line_of(path: &str, key: &str) -> Option<String> {
    let s = fs::read_to_string(path).ok()?;
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

pub fn meminfo_kb(key: &str) -> Option<u64> {
    first_line_of("/proc/meminfo", key)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

pub fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

pub fn fs_info(dir: &Path) -> (String, u64) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return ("?".into(), 0);
    };
    // SAFETY: statfs/statvfs write into the zeroed structs we pass.
    let mut sf: libc::statfs = unsafe { std::mem::zeroed() };
    let mut sv: libc::statvfs = unsafe { std::mem::zeroed() };
    let kind = if unsafe { libc::statfs(c.as_ptr(), &mut sf) } == 0 {
        match sf.f_type {
            libc::TMPFS_MAGIC => "tmpfs".to_string(),
            libc::EXT4_SUPER_MAGIC => "ext4".to_string(),
            libc::XFS_SUPER_MAGIC => "xfs".to_string(),
            libc::BTRFS_SUPER_MAGIC => "btrfs".to_string(),
            libc::OVERLAYFS_SUPER_MAGIC => "overlayfs".to_string(),
            t => format!("fs type {t:#x}"),
        }
    } else {
        "?".into()
    };
    let free = if unsafe { libc::statvfs(c.as_ptr(), &mut sv) } == 0 {
        sv.f_bavail as u64 * sv.f_frsize as u64
    } else {
        0
    };
    (kind, free)
}

pub fn git_revision() -> String {
    let dir = env!("CARGO_MANIFEST_DIR");
    let rev = Command::new("git")
        .args(["-C", dir, "rev-parse", "--short=12", "HEAD"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let Some(rev) = rev else {
        return "unknown".into();
    };
    let dirty = Command::new("git")
        .args(["-C", dir, "status", "--porcelain", "--untracked-files=no"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    if dirty {
        format!("{rev} (with uncommitted changes)")
    } else {
        rev
    }
}

/// The weir binary to measure: `explicit` if given, else `weir` next to the
/// benchmark binary (`target/release/weir`), else `weir` on PATH.
pub fn find_weir(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let weir = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join("weir")))
            .filter(|p| is_executable(p))
            .or_else(|| find_in_path("weir"))
            .ok_or(
                "the weir binary was not found next to this benchmark or on PATH; \
                 build it with `cargo build --release -p weir` or pass --weir PATH",
            )?,
    };
    if !is_executable(&weir) {
        return Err(format!(
            "{} is not an executable; build weir with `cargo build --release -p weir`",
            weir.display()
        ));
    }
    Ok(weir)
}

/// A tool that must be installed, with the Debian package that has it.
pub fn need_tool(name: &str, package: &str) -> Result<PathBuf, String> {
    find_in_path(name).ok_or_else(|| {
        format!("`{name}` is not installed (on Debian/Ubuntu: apt-get install {package})")
    })
}

// ---------------------------------------------------------------------------
// The network of the live benchmarks: two namespaces and a veth pair, made
// here and removed on drop.

/// The veth interface's name in both namespaces.
pub const IFACE: &str = "veth0";

pub struct Net {
    /// The sender's namespace.
    pub a: String,
    /// The capturer's namespace.
    pub b: String,
}

impl Net {
    /// Namespaces `{prefix}-{pid}-a` and `-b`, joined by a veth pair.
    pub fn create(prefix: &str) -> Result<Net, String> {
        let base = format!("{prefix}-{}", std::process::id());
        let net = Net {
            a: format!("{base}-a"),
            b: format!("{base}-b"),
        };
        for ns in [&net.a, &net.b] {
            ip(&["netns", "add", ns])?;
            // No IPv6 router or neighbour chatter among the counted frames.
            for key in ["all", "default"] {
                let _ = Command::new("ip")
                    .args(["netns", "exec", ns, "sysctl", "-qw"])
                    .arg(format!("net.ipv6.conf.{key}.disable_ipv6=1"))
                    .output();
            }
        }
        ip(&[
            "-n", &net.a, "link", "add", IFACE, "type", "veth", "peer", "name", IFACE, "netns",
            &net.b,
        ])?;
        for ns in [&net.a, &net.b] {
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
            ip(&["-n", ns, "link", "set", IFACE, "up"])?;
        }
        Ok(net)
    }

    /// rx_packets of the capture interface (namespace B).
    pub fn rx_packets(&self) -> Result<u64, String> {
        let out = Command::new("ip")
            .args(["-n", &self.b, "-s", "-j", "link", "show", IFACE])
            .output()
            .map_err(|e| format!("ip: {e}"))?;
        let v: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("ip -s -j link: unexpected output: {e}"))?;
        v[0]["stats64"]["rx"]["packets"]
            .as_u64()
            .ok_or_else(|| "ip -s -j link: no rx packet counter".into())
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip (apt-get install iproute2): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// RPC transactions of a trace, as the conversion's RPC stage makes them.

/// A trace's frames, read whole into memory.
pub fn read_trace(path: &Path) -> Result<Vec<pcapio::Chunk>, String> {
    let mut r = pcapio::TraceReader::open(path, pcapio::ReaderOptions::default())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut chunks = Vec::new();
    while let Some(c) = r
        .next_chunk()
        .map_err(|e| format!("{}: {e}", path.display()))?
    {
        chunks.push(c);
    }
    Ok(chunks)
}

/// Each chunk's TCP and UDP segments, as a conversion's workers find them.
pub fn segments_of(chunks: &[pcapio::Chunk]) -> Vec<Vec<ingest::SegmentAt>> {
    chunks
        .iter()
        .map(|c| {
            let mut segments = Vec::new();
            for (i, (f, b)) in c.iter().enumerate() {
                let mut rec = wire::PacketRecord::new(f.ts_ns, f.wire_len, f.cap_len);
                let payload = wire::decode(f.link, b, &mut rec);
                segments.extend(ingest::SegmentAt::new(i as u32, &rec, payload));
            }
            segments
        })
        .collect()
}

/// Runs the RPC tracker over each chunk's `segments` in order, as a
/// conversion's RPC stage does, handing it to `on_ready` (which takes or
/// releases the completed transactions) whenever `batch` of them are
/// complete, and once at the end.
fn run_tracker(
    chunks: &[pcapio::Chunk],
    segments: &[Vec<ingest::SegmentAt>],
    batch: usize,
    mut on_ready: impl FnMut(&mut rpc::Tracker),
) {
    let mut tracker = rpc::Tracker::new(rpc::TrackerOptions::default());
    for (c, segs) in chunks.iter().zip(segments) {
        for seg in ingest::chunk_segments(c, segs) {
            tracker.track(&seg);
            if tracker.ready().len() >= batch {
                on_ready(&mut tracker);
            }
        }
    }
    tracker.end();
    on_ready(&mut tracker);
}

/// The tracker over each chunk's `segments`, its transactions moved out
/// 1,024 at a time (as a capture worker hands them to its writer thread);
/// `keep` collects them (else each batch is dropped once taken). Returns
/// how many there were.
pub fn track(
    chunks: &[pcapio::Chunk],
    segments: &[Vec<ingest::SegmentAt>],
    mut keep: Option<&mut Vec<rpc::Transaction>>,
) -> usize {
    let (mut count, mut taken) = (0, Vec::with_capacity(1024));
    run_tracker(chunks, segments, 1024, |tracker| {
        count += tracker.ready().len();
        match keep.as_deref_mut() {
            Some(k) => tracker.take_ready(k),
            None => {
                tracker.take_ready(&mut taken);
                taken.clear();
            }
        }
    });
    count
}

/// The tracker over `segments` as a conversion's RPC stage runs it:
/// transactions written into the rpc and nfs tables under `root` from
/// where the tracker keeps them, every `batch` of them (1: each as it
/// completes). Returns the transactions written.
pub fn track_and_write(
    chunks: &[pcapio::Chunk],
    segments: &[Vec<ingest::SegmentAt>],
    root: &std::path::Path,
    batch: usize,
) -> u64 {
    let _ = std::fs::remove_dir_all(root);
    for d in [store::rpc::RPC_DIR, store::rpc::NFS_DIR] {
        std::fs::create_dir_all(root.join(d)).expect("making the table directories");
    }
    let mut w = Box::new(store::rpc::RpcWriter::new(root, 0, 1 << 22));
    run_tracker(chunks, segments, batch, |tracker| {
        ingest::write_ready_transactions(&mut w, tracker).expect("writing the rpc tables");
    });
    let rows = w.rows();
    w.finish().expect("closing the rpc tables");
    rows
}

/// DuckDB statements that make the view `packets` over the datasets'
/// `packets/*.parquet` (with `ts_ns`, as weir's) and weir's SQL functions
/// (docs/duckdb-macros.sql): what a benchmark runs before DuckDB's clock.
pub fn duckdb_packets_setup(datasets: &[PathBuf]) -> Result<Vec<String>, String> {
    let files: Vec<String> = datasets
        .iter()
        .map(|p| format!("'{}/packets/*.parquet'", p.display()))
        .collect();
    let macros = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/duckdb-macros.sql"
    ))
    .map_err(|e| format!("docs/duckdb-macros.sql: {e}"))?;
    let mut setup = vec![format!(
        "CREATE VIEW packets AS SELECT *, epoch_ns(ts) AS ts_ns FROM read_parquet([{}])",
        files.join(", ")
    )];
    setup.extend(
        macros
            .split(';')
            .map(|s| {
                s.lines()
                    .filter(|l| !l.trim_start().starts_with("--"))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .filter(|s| !s.trim().is_empty()),
    );
    Ok(setup)
}
