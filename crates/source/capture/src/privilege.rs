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
/// a user holding only CAP_NET_RAW keeps none while it runs. Root is left
/// as it is (without CAP_DAC_OVERRIDE it could no longer write where it
/// was asked to): root gives up its power with `-Z USER` instead.
pub fn drop_capabilities() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Ok(());
    }
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
