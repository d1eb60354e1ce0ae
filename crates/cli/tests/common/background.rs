//! A command left running while the test does other things (a capture
//! while traffic is sent), stopped by signal and waited for with a limit.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::Run;

pub struct Background {
    child: Child,
    lines: mpsc::Receiver<String>,
    stderr_seen: Vec<String>,
    stdout: std::thread::JoinHandle<Vec<u8>>,
    started: Instant,
}

impl Background {
    /// Starts `cmd` and waits until its standard error prints a line
    /// containing `ready` (the command is then listening); an empty `ready`
    /// does not wait.
    pub fn start(mut cmd: Command, ready: &str, limit: Duration) -> Background {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the command");
        let err = child.stderr.take().unwrap();
        let mut out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdout = std::thread::spawn(move || {
            let mut v = Vec::new();
            out.read_to_end(&mut v).ok();
            v
        });
        let mut bg = Background {
            child,
            lines: rx,
            stderr_seen: Vec::new(),
            stdout,
            started: Instant::now(),
        };
        if ready.is_empty() {
            return bg;
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match bg.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(ready);
                    bg.stderr_seen.push(line);
                    if found {
                        return bg;
                    }
                }
                Err(_) => {
                    let _ = bg.child.kill();
                    let _ = bg.child.wait();
                    panic!(
                        "{cmd:?} did not print {ready:?} within {limit:?}: {:?}",
                        bg.stderr_seen
                    );
                }
            }
        }
    }

    /// The lines of standard error read so far.
    pub fn lines_seen(&self) -> &[String] {
        &self.stderr_seen
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits until the command's standard error prints a line containing
    /// `text`; false if it has not within `limit` (or it ended).
    pub fn wait_for_line(&mut self, text: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let found = line.contains(text);
                    self.stderr_seen.push(line);
                    if found {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// Whether the command is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends `sig` to the command (by its PID).
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.pid(), sig) };
    }

    /// Waits for the command to end, killing it after `limit`.
    pub fn wait(mut self, limit: Duration) -> Run {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the command did not end within {limit:?}: {:?}",
                    self.stderr_seen
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stdout = self.stdout.join().unwrap_or_default();
        let mut stderr = self.stderr_seen.join("\n");
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            stderr.push('\n');
            stderr.push_str(&l);
        }
        Run {
            output: std::process::Output {
                status,
                stdout,
                stderr: stderr.into_bytes(),
            },
            max_rss_kb: 0,
            elapsed: self.started.elapsed(),
        }
    }
}
