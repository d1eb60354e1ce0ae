//! Where the tests find the data they share: tcpdump's test captures
//! (`tcpdump-tests/`, from Debian's tcpdump source package) and two real
//! NFS traces (`nfs/nfsv3.pcap.zst`, `nfs/nfsv4.pcap.zst`, recorded by
//! `tests/nfs/make-traces.sh`). `scripts/test.sh` fetches and records them
//! once into `$WEIR_CACHE/test-data` and says so in `WEIR_TEST_DATA`.
//!
//! `WEIR_SHARED_DATA`, when set, names a larger directory of the same
//! layout to use instead; the tests assert nothing that only one set of
//! data satisfies.

use std::path::PathBuf;

/// Where the data is looked for: `WEIR_SHARED_DATA`, else `WEIR_TEST_DATA`,
/// else `$WEIR_CACHE/test-data` (`~/.cache/weir/test-data`). The
/// directory may not exist.
pub fn locate() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("WEIR_SHARED_DATA")
        .or_else(|| var("WEIR_TEST_DATA"))
        .or_else(|| var("WEIR_CACHE").map(|c| c.join("test-data")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/weir/test-data")))
        .unwrap_or_else(|| PathBuf::from("test-data"))
}

/// The data directory ([`locate`]). Panics, saying how to make it, when
/// it is missing.
pub fn dir() -> PathBuf {
    let p = locate();
    assert!(
        p.join("tcpdump-tests").is_dir() && p.join("nfs").is_dir(),
        "the test data is missing at {}: run scripts/test.sh (as root; it fetches tcpdump's \
         captures and records the NFS traces into $WEIR_CACHE/test-data), or point \
         WEIR_TEST_DATA or WEIR_SHARED_DATA at a directory holding tcpdump-tests/ and nfs/",
        p.display()
    );
    p
}

/// Every capture (`.pcap`, `.pcapng`) of tcpdump's test set, sorted.
pub fn tcpdump_captures() -> Vec<PathBuf> {
    let d = tcpdump_tests();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&d)
        .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    files.sort();
    files
}

/// tcpdump's test captures.
pub fn tcpdump_tests() -> PathBuf {
    dir().join("tcpdump-tests")
}

/// One of tcpdump's test captures by name.
pub fn tcpdump_capture(name: &str) -> PathBuf {
    tcpdump_capture_of(&[name])
}

/// The first of `names` that the test set has: for a kind of capture
/// that different tcpdump releases hold under different names.
pub fn tcpdump_capture_of(names: &[&str]) -> PathBuf {
    let d = tcpdump_tests();
    names
        .iter()
        .map(|n| d.join(n))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("none of {names:?} is in {}", d.display()))
}

/// A zstd-compressed NFS trace: `nfsv3` or `nfsv4`.
pub fn nfs_trace(name: &str) -> PathBuf {
    let p = dir().join("nfs").join(format!("{name}.pcap.zst"));
    assert!(p.is_file(), "{} is missing", p.display());
    p
}

mod rng;
pub use rng::Rng;
mod scratch;
pub use scratch::Scratch;
pub mod s3;
