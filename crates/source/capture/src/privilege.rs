//! Giving up root once the rings are open (`weir capture -Z USER`, as
//! tcpdump's `-Z`): the output is handed to the user first, so the capture
//! can still write it.

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
