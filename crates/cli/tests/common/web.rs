//! `weir serve` from the tests: a plain HTTP client for its API, and
//! headless Chromium driven over WebDriver (Debian's chromium and
//! chromium-driver) for its page.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::background::Background;
use super::weir;

/// A response: status, head (lower-cased), body.
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request (the server closes every connection after its response).
pub fn http(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut s = TcpStream::connect(addr).expect("connect to the server");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut req = format!("{method} {target} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str(&format!(
        "Connection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    ));
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    // Read to the end of the body its Content-Length gives, else to the
    // close (chromedriver keeps connections open whatever it says).
    let mut all = Vec::new();
    let mut buf = [0u8; 65536];
    let (split, head) = loop {
        if let Some(split) = all.windows(4).position(|w| w == b"\r\n\r\n") {
            break (
                split,
                String::from_utf8_lossy(&all[..split]).to_ascii_lowercase(),
            );
        }
        let n = s.read(&mut buf).expect("read the response");
        assert!(n > 0, "the connection closed before a response head");
        all.extend_from_slice(&buf[..n]);
    };
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok());
    loop {
        if length.is_some_and(|len| all.len() >= split + 4 + len) {
            break;
        }
        let n = s.read(&mut buf).expect("read the response");
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
    }
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    Response {
        status,
        head,
        body: all[split + 4..].to_vec(),
    }
}

pub fn get(addr: SocketAddr, target: &str) -> Response {
    http(addr, "GET", target, &[], b"")
}

/// `weir serve ARGS --listen 127.0.0.1:0`, running; its address.
pub fn serve(args: &[&str]) -> (Background, SocketAddr) {
    let mut cmd = weir();
    cmd.arg("serve")
        .args(args)
        .args(["--listen", "127.0.0.1:0"]);
    let bg = Background::start(cmd, "listening on", Duration::from_secs(30));
    let line = bg
        .lines_seen()
        .iter()
        .find(|l| l.contains("listening on"))
        .unwrap()
        .clone();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("an address in {line:?}"));
    (bg, addr)
}

/// Percent-encodes a query value.
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Headless Chromium under chromedriver, one WebDriver session.
pub struct Browser {
    driver: Child,
    base: SocketAddr,
    session: String,
    pub downloads: PathBuf,
    _profile: super::Scratch,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Browser {
    pub fn start(tag: &str, downloads: &Path) -> Browser {
        let _ = super::tool("chromium");
        let port = free_port();
        let driver = super::tool("chromedriver")
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let base: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let profile = super::Scratch::new(&format!("chromium-{tag}"));
        let mut b = Browser {
            driver,
            base,
            session: String::new(),
            downloads: downloads.to_path_buf(),
            _profile: profile,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if TcpStream::connect(base).is_ok()
                && b.raw("GET", "/status", None)["value"]["ready"] == true
            {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--window-size=1280,800",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--user-data-dir={}", b._profile.0.display())])
        .collect::<Vec<_>>();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": args,
                "prefs": {
                    "download.default_directory": downloads.display().to_string(),
                    "download.prompt_for_download": false,
                },
            },
        }}});
        let r = b.raw("POST", "/session", Some(caps));
        b.session = r["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no WebDriver session: {r}"))
            .to_string();
        // Downloads without asking, into `downloads` (headless Chromium).
        b.cmd(
            "POST",
            "/goog/cdp/execute",
            json!({"cmd": "Browser.setDownloadBehavior", "params": {
                "behavior": "allow", "downloadPath": downloads.display().to_string()}}),
        );
        b
    }

    fn raw(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let body = body.map(|v| v.to_string()).unwrap_or_default();
        let r = http(
            self.base,
            method,
            path,
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        );
        r.json()
    }

    /// A command of the session; panics on a WebDriver error.
    pub fn cmd(&self, method: &str, path: &str, body: Value) -> Value {
        let body = if method == "GET" || method == "DELETE" {
            None
        } else {
            Some(body)
        };
        let r = self.raw(method, &format!("/session/{}{path}", self.session), body);
        if let Some(e) = r["value"]["error"].as_str() {
            panic!("WebDriver {method} {path}: {e}: {}", r["value"]["message"]);
        }
        r["value"].clone()
    }

    pub fn goto(&self, url: &str) {
        self.cmd("POST", "/url", json!({ "url": url }));
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    pub fn exec(&self, script: &str, args: Value) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            json!({ "script": script, "args": args }),
        )
    }

    /// The first element `css` selects: its id.
    pub fn find(&self, css: &str) -> String {
        self.find_ref(css).1
    }

    /// The element reference (the object WebDriver passes around; an
    /// SVG element comes back under another key than an HTML one) and id.
    fn find_ref(&self, css: &str) -> (Value, String) {
        let v = self.cmd(
            "POST",
            "/element",
            json!({"using": "css selector", "value": css}),
        );
        let id = v
            .as_object()
            .and_then(|o| {
                o.iter()
                    .find(|(k, _)| k.starts_with("element-"))
                    .and_then(|(_, id)| id.as_str())
            })
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string();
        (v, id)
    }

    pub fn click(&self, css: &str) {
        let id = self.find(css);
        self.cmd("POST", &format!("/element/{id}/click"), json!({}));
    }

    /// Replaces the text of the input `css` with `text`, as typed.
    pub fn type_into(&self, css: &str, text: &str) {
        let id = self.find(css);
        self.cmd("POST", &format!("/element/{id}/clear"), json!({}));
        self.cmd(
            "POST",
            &format!("/element/{id}/value"),
            json!({ "text": text }),
        );
    }

    pub fn text(&self, css: &str) -> String {
        self.exec(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            json!([css]),
        )
        .as_str()
        .unwrap_or("")
        .to_string()
    }

    /// Waits until `script` returns true, `limit` at most.
    pub fn wait_until(&self, what: &str, script: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if self.exec(script, json!([])) == true {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the page did not {what} within {limit:?}; status: {}",
                self.text("#status")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the page has no request outstanding.
    pub fn settle(&self) {
        self.wait_until(
            "finish loading",
            "return document.body.dataset.pending === '0';",
            Duration::from_secs(120),
        );
    }

    /// Presses the mouse on `css` at `from` (a fraction of its width from
    /// its left edge), moves to `to` and releases it.
    pub fn drag(&self, css: &str, from: f64, to: f64) {
        let (origin, _) = self.find_ref(css);
        let w = self
            .exec(
                "return document.querySelector(arguments[0]).getBoundingClientRect().width;",
                json!([css]),
            )
            .as_f64()
            .unwrap();
        let x = |f: f64| ((f - 0.5) * w).round() as i64;
        self.cmd(
            "POST",
            "/actions",
            json!({"actions": [{"type": "pointer", "id": "mouse",
                "parameters": {"pointerType": "mouse"}, "actions": [
                {"type": "pointerMove", "duration": 0, "origin": origin, "x": x(from), "y": 0},
                {"type": "pointerDown", "button": 0},
                {"type": "pointerMove", "duration": 200, "origin": origin, "x": x(to), "y": 0},
                {"type": "pointerUp", "button": 0}]}]}),
        );
    }

    /// Saves a screenshot of the page as PNG.
    pub fn screenshot(&self, path: &Path) {
        use std::io::Write as _;
        let b64 = self.cmd("GET", "/screenshot", Value::Null);
        let bytes = base64_decode(b64.as_str().unwrap());
        std::fs::File::create(path)
            .and_then(|mut f| f.write_all(&bytes))
            .unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.raw("DELETE", &format!("/session/{}", self.session), None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            _ => 63,
        }
    };
    let clean: Vec<u8> = s
        .bytes()
        .filter(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= val(c) << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    out
}

/// The frames tcpdump reads from `pcap`.
pub fn tcpdump_frames(pcap: &Path) -> usize {
    let out = super::tool("tcpdump")
        .args(["-n", "-r"])
        .arg(pcap)
        .stderr(Stdio::null())
        .output()
        .expect("run tcpdump");
    assert!(out.status.success(), "tcpdump -r {}", pcap.display());
    String::from_utf8_lossy(&out.stdout).lines().count()
}
