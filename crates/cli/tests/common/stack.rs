//! `weir stack` and real TCP transfers between the namespaces of a
//! [`super::netns::VethPair`] (tests/traffic/tcp_transfer.py at both ends,
//! bounded in bytes and time).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::background::Background;
use super::netns::VethPair;
use super::{Run, run_bounded};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
pub const TRANSFER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/traffic/tcp_transfer.py"
);

/// Whether this machine's kernel refuses the socket walk's program (weir
/// stack says so and names it): the tests of the interval levels have
/// nothing to run there, and say that they skipped. Asked once a test
/// binary, by a one-second `weir stack` on a port nothing uses.
pub fn walk_refused_here() -> bool {
    static REFUSED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let refused = *REFUSED.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("weir-test-walk-{}", std::process::id()));
        let mut cmd = Command::new(WEIR);
        cmd.args(["stack", "--force", "--duration", "1s", "--port", "9", "-o"])
            .arg(&dir);
        let r = run_bounded(cmd, Duration::from_secs(60));
        let _ = std::fs::remove_dir_all(&dir);
        r.stderr().contains(stack::WALK_REFUSED)
    });
    if refused {
        eprintln!(
            "skipped: {} (iter/bpf_sk_storage_map); the interval levels cannot run here",
            stack::WALK_REFUSED
        );
    }
    refused
}

/// `weir stack ARGS -o DS`, recording once it says so.
pub fn start_stack(ds: &Path, args: &[&str]) -> Background {
    let mut cmd = Command::new(WEIR);
    cmd.arg("stack").arg("-o").arg(ds).args(args);
    Background::start(cmd, "recording into", Duration::from_secs(60))
}

/// Ends the recording (SIGINT, by PID) and checks it ended well.
pub fn stop_stack(bg: Background) -> Run {
    bg.signal(libc::SIGINT);
    let r = bg.wait(Duration::from_secs(60));
    assert_eq!(r.code(), 0, "weir stack failed: {}", r.stderr());
    r
}

/// The receiving end, listening in `ns` when this returns; killed by PID
/// if it is still there when dropped.
pub struct Server(Child);

impl Server {
    pub fn start(ns: &str, port: u16) -> Server {
        let mut child = VethPair::exec(ns, "python3")
            .args([TRANSFER, "serve", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the server");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the server did not start");
        // Keep the pipe for the final line.
        child.stdout = Some(out.into_inner());
        Server(child)
    }

    /// Bytes the server received, once the transfer is over.
    pub fn received(mut self) -> u64 {
        let mut text = String::new();
        std::io::Read::read_to_string(self.0.stdout.as_mut().unwrap(), &mut text).unwrap();
        let _ = self.0.wait();
        text.trim()
            .strip_prefix("received ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("server said {text:?}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends `n` bytes from `ns` to the server at `addr`; returns the client's
/// local port.
pub fn send(cmd: Command, addr: &str, port: u16, n: u64) -> u16 {
    send_pausing(cmd, addr, port, n, 0.0)
}

/// [`send`], pausing `pause` seconds halfway.
pub fn send_pausing(cmd: Command, addr: &str, port: u16, n: u64, pause: f64) -> u16 {
    let mut cmd = cmd;
    cmd.args([TRANSFER, "send", addr, &port.to_string(), &n.to_string()]);
    cmd.arg(pause.to_string());
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "the client failed: {}", r.stderr());
    let out = r.stdout();
    let f: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(f.first(), Some(&"sent"), "client said {out:?}");
    assert_eq!(f[1].parse::<u64>().unwrap(), n);
    f[2].parse().unwrap()
}
