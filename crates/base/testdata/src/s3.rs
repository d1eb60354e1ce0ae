//! A real S3 server for the tests: versitygw (Apache-2.0), its posix
//! backend on a directory the test gives, listening on the loopback at a
//! free port. `scripts/test.sh` installs it (`go install`, see
//! `scripts/lib.sh`) and says where in `WEIR_VERSITYGW`.
//!
//! Each bucket is a directory under the backend's directory and each
//! object a file under it, so a test can alter an object behind the
//! server's back.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The root account's keys the server is started with.
pub const ACCESS_KEY: &str = "weirtestaccess";
pub const SECRET_KEY: &str = "weirtestsecret-0123456789";

/// Where the versitygw binary is: `WEIR_VERSITYGW`, else under
/// `$WEIR_CACHE` (or `~/.cache/weir`) where scripts/lib.sh installs it.
pub fn versitygw() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let p = var("WEIR_VERSITYGW").unwrap_or_else(|| {
        var("WEIR_CACHE")
            .or_else(|| var("HOME").map(|h| h.join(".cache/weir")))
            .unwrap_or_else(|| PathBuf::from("."))
            .join("versitygw/bin/versitygw")
    });
    assert!(
        p.is_file(),
        "versitygw is missing at {}: the test command (scripts/test.sh) installs it with \
         `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`; or set WEIR_VERSITYGW",
        p.display()
    );
    p
}

/// A versitygw process; killed (by its PID) when dropped.
pub struct S3Server {
    child: Option<Child>,
    /// The network namespace it runs in (its loopback), if not the test's.
    netns: Option<String>,
    pub port: u16,
    /// The posix backend's directory: one directory per bucket.
    pub dir: PathBuf,
    log: PathBuf,
}

impl S3Server {
    /// A server on a free loopback port, its data under `dir` (made).
    pub fn start(dir: &Path) -> S3Server {
        let port = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port on the loopback");
        Self::start_at(dir, None, port)
    }

    /// A server on the loopback of the network namespace `ns` (for a
    /// capture that runs there), at port 17070.
    pub fn start_in(dir: &Path, ns: &str) -> S3Server {
        Self::start_at(dir, Some(ns.to_string()), 17070)
    }

    fn start_at(dir: &Path, netns: Option<String>, port: u16) -> S3Server {
        let data = dir.join("s3");
        std::fs::create_dir_all(&data).expect("the server's directory");
        let mut s = S3Server {
            child: None,
            netns,
            port,
            dir: data,
            log: dir.join("versitygw.log"),
        };
        s.restart();
        s
    }

    /// Starts it again (after [`S3Server::stop`]) on the same port and data.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "the server is running");
        let log = std::fs::File::create(&self.log).expect("the server's log");
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(versitygw());
                c
            }
            None => Command::new(versitygw()),
        };
        let child = cmd
            .env("ROOT_ACCESS_KEY", ACCESS_KEY)
            .env("ROOT_SECRET_KEY", SECRET_KEY)
            .arg("--port")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--quiet")
            .arg("posix")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log"))
            .stderr(log)
            .spawn()
            .expect("starting versitygw");
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(20);
        while !self.listens() {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(status)) = c.try_wait()
            {
                panic!(
                    "versitygw ended at start ({status}): {}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            assert!(
                Instant::now() < until,
                "versitygw did not listen on port {} within 20 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether it answers on its port.
    fn listens(&self) -> bool {
        match &self.netns {
            None => {
                let at = SocketAddrV4::new(Ipv4Addr::LOCALHOST, self.port);
                TcpStream::connect_timeout(&at.into(), Duration::from_millis(200)).is_ok()
            }
            Some(ns) => Command::new("ip")
                .args(["netns", "exec", ns, "bash", "-c"])
                .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{}", self.port))
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success()),
        }
    }

    /// Kills it (SIGKILL, by its PID) and waits for it to end.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The network namespace it runs in ([`S3Server::start_in`]): its
    /// clients run there too.
    pub fn netns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Makes bucket `name` (a directory of the posix backend).
    pub fn make_bucket(&self, name: &str) {
        std::fs::create_dir_all(self.dir.join(name)).expect("the bucket's directory");
    }

    /// The file that holds object `key` of `bucket`.
    pub fn object_file(&self, bucket: &str, key: &str) -> PathBuf {
        self.dir.join(bucket).join(key)
    }

    /// The environment a client needs to reach it (as the AWS tools and
    /// weir read it).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.to_string()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.to_string()),
            ("AWS_REGION", "us-east-1".to_string()),
            ("AWS_ENDPOINT_URL", self.endpoint()),
        ]
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
