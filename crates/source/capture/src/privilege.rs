//! Giving up privilege once the rings are open: root becomes `-Z USER`
//! (as tcpdump's `-Z`; the output is handed to the user first, so the
//! capture can still write it), and a user started with capabilities
//! (CAP_NET_RAW) gives them all up.

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// Gives the output to `user` and becomes that user (tcpdump's -Z).
pub fn become_user(user: &str, output: Option<&Path>) -> Result<(), String> {
    let c = CString::new(user).map_err(|_| format!("-Z {user:?}: not a user name"))?;
    // SAFETY: getpwnam with a valid C string; the result is read at once.
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if pw.is_null() {
        return Err(format!("-Z {user}: no such user"));
    }
    // SAFETY: pw is a valid passwd entry.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    if let Some(out) = output {
        let dirs: Vec<PathBuf> = if out.is_dir() {
            std::iter::once(out.to_path_buf())
                .chain(
                    std::fs::read_dir(out)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|e| e.path()),
                )
                .collect()
        } else {
            out.parent().map(Path::to_path_buf).into_iter().collect()
        };
        for d in dirs {
            std::os::unix::fs::chown(&d, Some(uid), Some(gid))
                .map_err(|e| format!("{}: cannot give it to {user}: {e}", d.display()))?;
        }
    }
    // SAFETY: plain credential calls; each result is checked.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setgid(gid) != 0
            || libc::setuid(uid) != 0
        {
            return Err(format!(
                "-Z {user}: could not become that user: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// The capabilities a capture needs, for messages and the README: a
/// packet socket needs CAP_NET_RAW; nothing else is needed once the rings
/// are open (binding, fanout, promiscuous mode and the filters go through
/// the socket).
pub const NEEDED: &str = "CAP_NET_RAW";

/// Gives up every capability the process holds (effective, permitted,
/// inheritable and ambient), once the rings are open: a capture started by
/// a user holding only CAP_NET_RAW keeps none while it runs, on any of its
/// threads. Capabilities belong to each thread: this gives up the calling
/// thread's; threads it starts afterwards inherit none; threads started
/// before must have been started without any ([`without_capabilities`]),
/// and every thread is checked here (/proc/self/task), so that a thread
/// that still holds one is an error naming it rather than a silent
/// privilege. Root is left as it is (without CAP_DAC_OVERRIDE it could no
/// longer write where it was asked to): root gives up its power with `-Z
/// USER` instead, which changes every thread's user (glibc's setuid does).
pub fn drop_capabilities() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
    drop_thread_capabilities()?;
    let holding = threads_holding_capabilities();
    if !holding.is_empty() {
        return Err(format!(
            "after giving up its capabilities, these threads still hold some: {}; a thread \
             started before the rings opened must start without them \
             (capture::privilege::without_capabilities)",
            holding.join(", ")
        ));
    }
    Ok(())
}

/// Runs `f` on a thread of its own that first gives up its capabilities
/// (as [`drop_capabilities`] does, so not for root), and returns what `f`
/// returns: threads `f` starts (a library's, such as librdkafka's) inherit
/// none, though the caller still holds the capabilities it needs to open
/// the rings.
pub fn without_capabilities<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        let t = std::thread::Builder::new()
            .name("weir-unprivileged".into())
            .spawn_scoped(s, || {
                // SAFETY: geteuid has no preconditions.
                if unsafe { libc::geteuid() } != 0 {
                    drop_thread_capabilities()?;
                }
                Ok(f())
            })
            .map_err(|e| format!("starting a thread: {e}"))?;
        t.join()
            .unwrap_or_else(|_| Err("a thread without capabilities panicked".into()))
    })
}

/// The threads of this process that hold any capability (effective,
/// permitted, inheritable or ambient), as `TID (NAME)`.
pub fn threads_holding_capabilities() -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            continue;
        };
        if status_holds_capabilities(&status) {
            let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            out.push(format!(
                "{} ({})",
                t.file_name().to_string_lossy(),
                name.trim()
            ));
        }
    }
    out
}

/// Whether a /proc status text gives a non-zero CapInh, CapPrm, CapEff or
/// CapAmb (the bounding set, CapBnd, is not a privilege held).
pub fn status_holds_capabilities(status: &str) -> bool {
    status.lines().any(|l| {
        ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"]
            .iter()
            .any(|k| l.starts_with(k))
            && l.split_whitespace()
                .nth(1)
                .is_some_and(|v| u64::from_str_radix(v, 16) != Ok(0))
    })
}

/// Gives up the calling thread's capabilities: every set, ambient first.
fn drop_thread_capabilities() -> Result<(), String> {
    // SAFETY: prctl with integer arguments; the result is checked.
    let ambient = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    // Kernels before 4.3 have no ambient set: nothing to clear there.
    if ambient != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
        return Err(format!(
            "clearing the ambient capabilities: {}",
            std::io::Error::last_os_error()
        ));
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset with a version-3 header and two data words, as the
    // kernel expects; lowering capabilities needs no privilege.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) };
    if r != 0 {
        return Err(format!(
            "giving up capabilities: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_with_any_capability_set_holds_one() {
        let none = "Name:\tweir\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n\
                    CapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\n\
                    CapAmb:\t0000000000000000\n";
        assert!(!status_holds_capabilities(none));
        for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
            let one = none.replace(
                &format!("{set}:\t0000000000000000"),
                &format!("{set}:\t0000000000002000"),
            );
            assert!(status_holds_capabilities(&one), "{set}");
        }
    }
}
