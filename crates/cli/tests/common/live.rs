//! Live-capture helpers: `weir capture` and `weir gen` on the veth pair of
//! a [`super::netns::VethPair`], and walking what a capture wrote.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::background::Background;
use super::netns::{IFACE, VethPair};
use super::{Run, run_bounded};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// `weir capture -i IFACE ARGS` in namespace `ns`, running once it says it
/// is capturing.
pub fn capture(ns: &str, args: &[&str]) -> Background {
    let mut cmd = VethPair::exec(ns, WEIR);
    cmd.arg("capture").args(["-i", IFACE]).args(args);
    Background::start(cmd, "capturing on", Duration::from_secs(30))
}

/// `weir gen -i IFACE ARGS` in namespace `ns`, to its end; it must succeed.
pub fn send(ns: &str, args: &[&str]) -> Run {
    let mut cmd = VethPair::exec(ns, WEIR);
    cmd.arg("gen").args(["-i", IFACE]).args(args);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "weir gen failed: {}", r.stderr());
    r
}

/// Every file under `dir`.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// `weir capture -i IFACE ARGS` in namespace `ns` as nobody holding only
/// CAP_NET_RAW (inheritable and ambient, as a service would give it),
/// running once it says it is capturing.
pub fn capture_with_net_raw_only(ns: &str, args: &[&str]) -> Background {
    let mut cmd = VethPair::exec(ns, "setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["--inh-caps=-all,+net_raw", "--ambient-caps=-all,+net_raw"])
        .args([WEIR, "capture", "-i", IFACE])
        .args(args);
    Background::start(cmd, "capturing on", Duration::from_secs(30))
}

/// Every thread of process `pid` (/proc/PID/task/*/status) holds no
/// capability: CapEff, CapPrm, CapInh and CapAmb are all zero. Returns the
/// threads' names.
pub fn assert_no_thread_holds_capabilities(pid: i32) -> Vec<String> {
    let mut names = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().path();
        let Ok(status) = std::fs::read_to_string(t.join("status")) else {
            continue; // the thread ended meanwhile
        };
        let name = std::fs::read_to_string(t.join("comm")).unwrap_or_default();
        for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
            let line = status
                .lines()
                .find(|l| l.starts_with(set))
                .unwrap_or_else(|| panic!("no {set} in {status}"));
            assert!(
                line.ends_with("0000000000000000"),
                "thread {} ({}) still holds capabilities: {line}",
                t.display(),
                name.trim()
            );
        }
        names.push(name.trim().to_string());
    }
    names
}
