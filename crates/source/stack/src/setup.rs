//! What the kernel needs before eBPF programs load: file systems mounted,
//! the memory-lock limit raised, the privileges there, BTF present. Each
//! missing piece becomes an error that says what to do.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::StackError;

/// The kernel's type information, which CO-RE relocations are resolved
/// against.
const BTF: &str = "/sys/kernel/btf/vmlinux";

/// Mount points the kernel documents; libbpf looks for tracefs at the
/// first (and at /sys/kernel/debug/tracing).
const MOUNTS: [(&str, &str); 2] = [("/sys/kernel/tracing", "tracefs"), ("/sys/fs/bpf", "bpf")];

/// Linux capability numbers (include/uapi/linux/capability.h).
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// What setting up did, for the user to see.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    /// File systems this run mounted (left mounted: others may use them).
    pub mounted: Vec<String>,
    /// Things that did not work but need not stop the run.
    pub warnings: Vec<String>,
}

/// Checks privileges and kernel support, mounts tracefs and bpffs where
/// absent, raises RLIMIT_MEMLOCK. `cgroup` means sock_ops will be attached.
pub fn prepare(cgroup: bool) -> Result<Prepared, StackError> {
    check_capabilities(cgroup)?;
    if !Path::new(BTF).exists() {
        return Err(StackError::Setup(format!(
            "{BTF} is missing: this kernel was built without BTF (CONFIG_DEBUG_INFO_BTF=y), \
             which weir stack needs to fit its programs to the running kernel; use a kernel \
             with BTF (every major distribution's kernel has it)"
        )));
    }
    let mut out = Prepared::default();
    for (dir, fstype) in MOUNTS {
        match mounted_type(dir) {
            Some(t) if t == fstype => {}
            _ => match mount(dir, fstype) {
                Ok(()) => out.mounted.push(format!("{fstype} on {dir}")),
                Err(e) => out.warnings.push(format!(
                    "could not mount {fstype} on {dir} ({e}); continuing, since the programs \
                     weir stack loads do not need it"
                )),
            },
        }
    }
    // Kernels before 5.11 charge BPF maps to the locked-memory limit;
    // newer ones charge the memory cgroup and ignore it, so only there is
    // a limit that cannot be raised worth a word.
    if let Err(e) = raise_memlock()
        && kernel_older_than(5, 11)
    {
        out.warnings.push(format!(
            "could not raise RLIMIT_MEMLOCK ({e}); this kernel charges BPF maps to it, so \
             loading may fail: raise it with `ulimit -l unlimited`"
        ));
    }
    Ok(out)
}

/// Lifts the locked-memory limit as far as allowed: to infinity, else the
/// soft limit up to the hard one.
fn raise_memlock() -> std::io::Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit/getrlimit read and write the struct we pass.
    unsafe {
        if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) == 0
                && lim.rlim_max == libc::RLIM_INFINITY
            {
                return Ok(());
            }
        }
        Err(err)
    }
}

/// Whether the running kernel is older than MAJOR.MINOR.
fn kernel_older_than(major: u32, minor: u32) -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    match (parts.next(), parts.next()) {
        (Some(a), Some(b)) => (a, b) < (major, minor),
        _ => false,
    }
}

/// The effective capability set of this process (/proc/self/status).
fn effective_capabilities() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.trim_start_matches("CapEff:").trim(), 16).ok()
}

fn check_capabilities(cgroup: bool) -> Result<(), StackError> {
    let Some(caps) = effective_capabilities() else {
        return Ok(()); // no /proc: let the kernel decide
    };
    let has = |c: u32| caps & (1u64 << c) != 0;
    let mut missing = Vec::new();
    // CAP_SYS_ADMIN stands in for both on kernels before 5.8.
    if !has(CAP_BPF) && !has(CAP_SYS_ADMIN) {
        missing.push("CAP_BPF");
    }
    if !has(CAP_PERFMON) && !has(CAP_SYS_ADMIN) {
        missing.push("CAP_PERFMON");
    }
    if cgroup && !has(CAP_NET_ADMIN) {
        missing.push("CAP_NET_ADMIN");
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(StackError::Setup(format!(
        "weir stack needs {} to load its eBPF programs; run it as root, or grant them: \
         setcap cap_bpf,cap_perfmon,cap_net_admin+ep $(command -v weir)",
        missing.join(" and ")
    )))
}

/// The type of the file system mounted exactly at `dir`, if any.
fn mounted_type(dir: &str) -> Option<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    // The last mount at a place is the one in effect.
    mounts.lines().rev().find_map(|l| {
        let mut f = l.split(' ');
        let (_, at, t) = (f.next()?, f.next()?, f.next()?);
        (at == dir).then(|| t.to_string())
    })
}

fn mount(dir: &str, fstype: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let c = |s: &str| CString::new(s).map_err(std::io::Error::other);
    let (src, target, t) = (c(fstype)?, c(dir)?, c(fstype)?);
    // SAFETY: all pointers are NUL-terminated strings that outlive the call.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            t.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The id the kernel gives a cgroup v2 directory (its inode number), as
/// `bpf_get_current_cgroup_id()` returns it; and an open descriptor for
/// attaching sock_ops programs.
pub fn open_cgroup(path: &Path) -> Result<(u64, std::fs::File), StackError> {
    use std::os::unix::fs::MetadataExt;
    let bad = |why: String| {
        StackError::Setup(format!(
            "--cgroup {}: {why}; give a cgroup v2 directory, such as \
             /sys/fs/cgroup/unified/NAME or /sys/fs/cgroup/NAME on a cgroup2-only system",
            path.display()
        ))
    };
    let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
    if !meta.is_dir() {
        return Err(bad("not a directory".into()));
    }
    let cpath = CString::new(path.as_os_str().as_bytes()).map_err(|e| bad(e.to_string()))?;
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: cpath is NUL-terminated; st is a valid out-pointer.
    if unsafe { libc::statfs(cpath.as_ptr(), &mut st) } != 0 {
        return Err(bad(std::io::Error::last_os_error().to_string()));
    }
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    if st.f_type as i64 != CGROUP2_SUPER_MAGIC {
        return Err(bad("not on a cgroup2 file system".into()));
    }
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    Ok((meta.ino(), file))
}

/// Network namespaces a snapshot can walk: this process's own and every
/// one named by `ip netns` (/run/netns), each once.
pub fn network_namespaces() -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut out = vec![PathBuf::from("/proc/self/ns/net")];
    let mut seen: Vec<u64> = std::fs::metadata(&out[0])
        .map(|m| vec![m.ino()])
        .unwrap_or_default();
    if let Ok(rd) = std::fs::read_dir("/run/netns") {
        let mut named: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        named.sort();
        for p in named {
            if let Ok(m) = std::fs::metadata(&p)
                && !seen.contains(&m.ino())
            {
                seen.push(m.ino());
                out.push(p);
            }
        }
    }
    out
}

/// Runs `f` with this thread in the network namespace at `ns`, then moves
/// the thread back. `None` when the namespace cannot be entered: it went
/// away after it was listed (`ip netns del` leaves the name behind for a
/// moment, and entering it then fails with EINVAL).
pub fn in_namespace<T>(ns: &Path, f: impl FnOnce() -> T) -> std::io::Result<Option<T>> {
    use std::os::fd::AsRawFd;
    let home = std::fs::File::open("/proc/thread-self/ns/net")?;
    let Ok(target) = std::fs::File::open(ns) else {
        return Ok(None);
    };
    // SAFETY: setns on descriptors we hold open; affects this thread only.
    if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Ok(None);
    }
    let out = f();
    // SAFETY: as above.
    if unsafe { libc::setns(home.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Some(out))
}

fn now(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// The kernel's monotonic clock, the one the programs stamp events with.
pub fn monotonic_ns() -> u64 {
    now(libc::CLOCK_MONOTONIC) as u64
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC (what bpf_ktime_get_ns reads), in
/// ns: the closest of a few tightly bracketed readings.
pub fn clock_offset_ns() -> i64 {
    let mut best = (i64::MAX, 0);
    for _ in 0..9 {
        let a = now(libc::CLOCK_MONOTONIC);
        let r = now(libc::CLOCK_REALTIME);
        let b = now(libc::CLOCK_MONOTONIC);
        if b - a < best.0 {
            best = (b - a, r - (a + (b - a) / 2));
        }
    }
    best.1
}
