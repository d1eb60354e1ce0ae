//! `weir serve`: a web page and a JSON API over the datasets named on the
//! command line, from the same process and binary. Every asset is built in
//! (`assets/`); the page fetches nothing from elsewhere.
//!
//! Safe by default: it listens on the loopback unless told otherwise, and
//! any other address needs a bearer token, checked in constant time on
//! every request (a browser gets it once in the address, then as a
//! cookie). On the loopback without a token, a request must name the
//! loopback as its Host, so that a web page whose name was rebound to
//! 127.0.0.1 cannot read the API. No path of a request reaches the file
//! system: the datasets are those named at start. Every query runs with a
//! row limit and a time limit, stops when the client goes away, runs at a
//! lower CPU priority than a capture, and only so many run at once.
//!
//! The HTTP is `httpd`'s (hyper); every endpoint is a line of
//! `routes::ROUTES`, its handler in `handlers`, which asks `analyze` only.

mod handlers;
mod json;
mod routes;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use util::storage::Root;

pub use httpd::{parse_query, percent_decode};

/// What a request may cost.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Rows a table or query returns at most.
    pub max_rows: usize,
    /// How long a request's queries may run.
    pub time_limit: Duration,
    /// Queries running at once (more wait, within their time limit).
    pub max_queries: usize,
    /// Cores each query uses.
    pub query_threads: usize,
    /// The server's nice value (its queries yield to a capture).
    pub nice: i32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_rows: 10_000,
            time_limit: Duration::from_secs(30),
            max_queries: 2,
            query_threads: 1,
            nice: 10,
        }
    }
}

/// What to serve, where.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Directories or prefixes of an object store (one holding several
    /// datasets serves all of them).
    pub datasets: Vec<Root>,
    pub listen: SocketAddr,
    /// The bearer token (from `--token FILE`).
    pub token: Option<String>,
    pub limits: Limits,
}

/// Reads a token file: its text, trimmed; at least 16 characters.
pub fn load_token(path: &Path) -> Result<String, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--token {}: {e}", path.display()))?;
    let token = text.trim().to_string();
    if token.len() < 16 || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "--token {}: a token is one word of at least 16 characters; make one with \
             head -c 24 /dev/urandom | base64 > {}",
            path.display(),
            path.display()
        ));
    }
    Ok(token)
}

/// Checks the options before anything is opened: an address other than
/// the loopback needs a token; the datasets must open.
pub fn check(opts: &ServeOptions) -> Result<(), String> {
    if !opts.listen.ip().is_loopback() && opts.token.is_none() {
        return Err(format!(
            "--listen {}: an address other than the loopback needs --token FILE (a bearer \
             token every request must carry); or listen on 127.0.0.1",
            opts.listen
        ));
    }
    if opts.datasets.is_empty() {
        return Err("give one or more datasets: weir serve DATASET...".into());
    }
    for d in &opts.datasets {
        // The store's error names the directory or the URL.
        analyze::served::datasets(std::slice::from_ref(d)).map_err(|e| e.to_string())?;
    }
    if opts.limits.max_queries == 0 || opts.limits.max_rows == 0 {
        return Err("--max-queries and --max-rows must be at least 1".into());
    }
    Ok(())
}

/// Counts queries running; bounds them.
pub(crate) struct Slots {
    used: Mutex<usize>,
    freed: Condvar,
    max: usize,
    /// Requests waiting for a slot now.
    waiting: AtomicUsize,
}

/// A query slot, held until dropped.
pub(crate) struct Slot<'a> {
    slots: &'a Slots,
    /// How long the request waited for it (all were taken when it came);
    /// `None` if one was free.
    pub waited: Option<Duration>,
}

impl Slots {
    fn new(max: usize) -> Self {
        Slots {
            used: Mutex::new(0),
            freed: Condvar::new(),
            max,
            waiting: AtomicUsize::new(0),
        }
    }

    /// A slot, waiting until `deadline` at most.
    pub(crate) fn take(&self, deadline: Instant) -> Option<Slot<'_>> {
        let came = Instant::now();
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let waited = *used >= self.max;
        if waited {
            self.waiting.fetch_add(1, Ordering::Relaxed);
        }
        while *used >= self.max {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                self.waiting.fetch_sub(1, Ordering::Relaxed);
                return None;
            };
            used = self
                .freed
                .wait_timeout(used, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        if waited {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        *used += 1;
        Some(Slot {
            slots: self,
            waited: waited.then(|| came.elapsed()),
        })
    }

    /// Requests waiting for a slot now.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut used = self.slots.used.lock().unwrap_or_else(|e| e.into_inner());
        *used -= 1;
        self.slots.freed.notify_one();
    }
}

/// What every request's handler shares.
pub(crate) struct Shared {
    pub datasets: Vec<Root>,
    pub token: Option<blake3::Hash>,
    pub limits: Limits,
    pub slots: Slots,
    pub listen: SocketAddr,
    pub verified: Mutex<Option<(Instant, serde_json::Value)>>,
}

impl Shared {
    /// Whether `presented` is the token: compared as BLAKE3 digests, whose
    /// equality is constant-time.
    pub fn token_matches(&self, presented: &str) -> bool {
        self.token
            .is_some_and(|t| blake3::hash(presented.as_bytes()) == t)
    }
}

/// Serves until the process ends; `ready` is told the address listened on.
pub fn serve(opts: ServeOptions, ready: impl FnOnce(SocketAddr)) -> Result<(), String> {
    check(&opts)?;
    // Before any thread starts, so that every thread (the queries' too)
    // inherits it: on Linux the nice value is per thread.
    // SAFETY: setpriority on the calling thread.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, opts.limits.nice);
    }
    let listener =
        TcpListener::bind(opts.listen).map_err(|e| format!("--listen {}: {e}", opts.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let shared = Arc::new(Shared {
        datasets: opts.datasets.clone(),
        token: opts.token.as_deref().map(|t| blake3::hash(t.as_bytes())),
        slots: Slots::new(opts.limits.max_queries),
        limits: opts.limits.clone(),
        listen: addr,
        verified: Mutex::new(None),
    });
    ready(addr);
    let handler: Arc<httpd::Handler> =
        Arc::new(move |req: httpd::Request, responder: httpd::Responder| {
            routes::handle(shared.clone(), req, responder)
        });
    httpd::run(listener, httpd::Options::default(), handler)
}

/// Whether `host` (a Host header) names the loopback, as a browser sends
/// it for 127.0.0.1, [::1] or localhost.
pub(crate) fn host_is_loopback(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in [
            "127.0.0.1:8080",
            "localhost:1",
            "[::1]:9",
            "127.0.0.1",
            "LOCALHOST",
        ] {
            assert!(host_is_loopback(h), "{h}");
        }
        for h in [
            "evil.example:8080",
            "10.0.0.1:80",
            "[fe80::1]:80",
            "",
            "127.0.0.1.evil:80",
        ] {
            assert!(!host_is_loopback(h), "{h}");
        }
    }

    #[test]
    fn slots_bound_and_free() {
        let s = Slots::new(1);
        let a = s.take(Instant::now()).unwrap();
        assert!(s.take(Instant::now() + Duration::from_millis(20)).is_none());
        drop(a);
        assert!(s.take(Instant::now()).is_some());
    }

    /// A request that found every slot taken says it waited; one that
    /// found one free says it did not.
    #[test]
    fn slots_tell_waiting_from_free() {
        let slots = Slots::new(1);
        let far = Instant::now() + Duration::from_secs(600);
        let first = slots.take(far).unwrap();
        assert!(first.waited.is_none());
        std::thread::scope(|s| {
            let second = s.spawn(|| slots.take(far).map(|t| t.waited.is_some()));
            while slots.waiting() == 0 {
                std::thread::yield_now();
            }
            drop(first);
            assert_eq!(second.join().unwrap(), Some(true));
        });
        assert_eq!(slots.waiting(), 0);
        assert!(slots.take(far).unwrap().waited.is_none());
        // One whose deadline passes while it waits gets none, and waits
        // no longer.
        let _held = slots.take(far).unwrap();
        assert!(slots.take(Instant::now()).is_none());
        assert_eq!(slots.waiting(), 0);
    }
}
