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
