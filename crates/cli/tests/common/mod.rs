//! Helpers shared by the end-to-end tests of the `weir` command.
#![allow(dead_code)]

pub mod background;
pub mod kafka;
pub mod live;
pub mod netns;
pub mod stack;
pub mod web;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use store::read::read_packet_file;
use wire::PacketRecord;

/// The `weir` binary under test.
pub fn weir() -> Command {
    Command::new(env!("CARGO_BIN_EXE_weir"))
}

// Not every test binary uses all three.
#[allow(unused_imports)]
pub use testdata::{nfs_trace, tcpdump_capture, tcpdump_capture_of, tcpdump_captures};

/// The first `frames` frames of the real NFSv3 trace, as `s/NAME`
/// (decompressed with zstd, cut with tcpdump).
pub fn nfs_frames(s: &Scratch, frames: u32, name: &str) -> PathBuf {
    let full = s.join("nfsv3-full.pcap");
    let mut cmd = tool("zstd");
    cmd.arg("-q")
        .arg("-d")
        .arg(nfs_trace("nfsv3"))
        .arg("-o")
        .arg(&full);
    assert_eq!(run_bounded(cmd, Duration::from_secs(120)).code(), 0);
    let cut = s.join(name);
    let mut cmd = tool("tcpdump");
    cmd.arg("-r")
        .arg(&full)
        .args(["-c", &frames.to_string(), "-w"])
        .arg(&cut);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let _ = std::fs::remove_file(&full);
    cut
}

pub use testdata::Scratch;

/// What a finished child did, with its peak memory.
pub struct Run {
    pub output: Output,
    pub max_rss_kb: i64,
    pub elapsed: Duration,
}

impl Run {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Exit code; panics (in the test) if the child was killed by a signal.
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or_else(|| {
            panic!(
                "killed by a signal: {:?}\n{}",
                self.output.status,
                self.stderr()
            )
        })
    }
}

/// Runs `cmd` to completion, killing it (by its PID) after `limit`.
/// The child is reaped with wait4, which also gives its peak memory.
#[allow(clippy::zombie_processes)]
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Run {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the child");
    let pid = child.id() as libc::pid_t;
    // Drain the pipes on threads so a chatty child cannot block.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).ok();
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).ok();
        v
    });
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: plain wait4 on our own child with valid out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let stdout = t_out.join().unwrap();
    let stderr = t_err.join().unwrap();
    use std::os::unix::process::ExitStatusExt;
    Run {
        output: Output {
            status: std::process::ExitStatus::from_raw(status),
            stdout,
            stderr,
        },
        max_rss_kb: usage.ru_maxrss,
        elapsed: started.elapsed(),
    }
}

/// The dataset's manifest as JSON.
pub fn manifest(dataset: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dataset.join("manifest.json")).expect("manifest.json");
    serde_json::from_str(&text).expect("manifest is JSON")
}

/// Every packet record of a dataset, file by file in manifest order.
pub fn records(dataset: &Path) -> Vec<PacketRecord> {
    let m = manifest(dataset);
    let mut out = Vec::new();
    for f in m["files"]["packets"].as_array().unwrap() {
        let p = dataset.join(f["path"].as_str().unwrap());
        out.extend(read_packet_file(&p).unwrap());
    }
    out
}

/// setpriv's arguments that run the rest of its command line as nobody,
/// with no capabilities (util-linux's setpriv).
pub const AS_NOBODY: [&str; 4] = [
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "--inh-caps=-all",
];

/// A tool the tests need; a clear failure if it is missing.
pub fn tool(name: &str) -> Command {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "{name} is not installed; the test command (scripts/test) installs it"
    );
    Command::new(name)
}

/// The Python interpreter with pyarrow and duckdb (scripts/test makes a
/// virtual environment and sets WEIR_PYTHON).
pub fn python() -> Command {
    Command::new(std::env::var("WEIR_PYTHON").unwrap_or_else(|_| "python3".into()))
}

/// `weir verify DATASET ARGS`: its exit status and output.
pub fn verify(dataset: &Path, args: &[&str]) -> (i32, String) {
    let mut cmd = weir();
    cmd.arg("verify").arg(dataset).args(args);
    let r = run_bounded(cmd, Duration::from_secs(120));
    (r.code(), format!("{}{}", r.stdout(), r.stderr()))
}

/// Asserts that `weir verify` finds the dataset whole.
pub fn assert_verifies(dataset: &Path) {
    let (code, out) = verify(dataset, &[]);
    assert_eq!(code, 0, "weir verify {}:\n{out}", dataset.display());
    assert!(out.contains("result     verified"), "{out}");
}

/// An Ed25519 key pair made by OpenSSH's ssh-keygen at `path` (and
/// `path.pub`), without a passphrase.
pub fn ssh_key(path: &Path) {
    let _ = std::fs::remove_file(path);
    let mut cmd = tool("ssh-keygen");
    cmd.args(["-q", "-t", "ed25519", "-N", "", "-C", "weir-test", "-f"])
        .arg(path);
    let r = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(r.code(), 0, "ssh-keygen: {}", r.stderr());
}

/// `ssh-keygen -Y verify` of `signature` over `message` for principal
/// `identity` of the allowed-signers file: its exit status and output.
pub fn ssh_verify(
    allowed: &Path,
    identity: &str,
    signature: &Path,
    message: &Path,
) -> (i32, String) {
    let mut cmd = tool("sh");
    cmd.arg("-c")
        .arg(r#"exec ssh-keygen -Y verify -f "$1" -I "$2" -n weir-dataset -s "$3" < "$4""#)
        .arg("sh")
        .arg(allowed)
        .arg(identity)
        .arg(signature)
        .arg(message);
    let r = run_bounded(cmd, Duration::from_secs(30));
    (r.code(), format!("{}{}", r.stdout(), r.stderr()))
}

/// `ssh-keygen -l`'s SHA256 fingerprint of a public key file.
pub fn ssh_fingerprint(public: &Path) -> String {
    let mut cmd = tool("ssh-keygen");
    cmd.arg("-l").arg("-f").arg(public);
    let r = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(r.code(), 0, "ssh-keygen -l: {}", r.stderr());
    r.stdout()
        .split_whitespace()
        .nth(1)
        .unwrap_or("")
        .to_string()
}
