//! `weir serve`'s HTTP/1.1, on hyper: the accept loop, one request per
//! connection (every response closes it), the limits a request must keep
//! (head, body, time to arrive), the request as handlers see it
//! ([`Request`]) and what they answer ([`Response`], or a download of
//! unknown length through [`Responder::streamed`]).
//!
//! hyper parses the heads and frames the bodies; a handler runs on a
//! thread of its own (queries block), so the runtime here is one thread
//! that only moves bytes. A handler learns that its client went away
//! ([`Gone`]) when hyper sees the connection close before the answer.
//!
//! Nothing here knows weir's routes: a handler is any
//! `Fn(Request, Responder)`, found in a table of routes by [`route`].

mod request;
mod response;

use std::convert::Infallible;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::oneshot;

pub use request::{
    BadRequest, MAX_BODY, MAX_HEAD, MAX_HEADERS, Request, parse_query, percent_decode,
};
pub use response::{Body, Gone, JSON, Responder, Response, Streamed, error_body};

/// What answers a request: it sends one response through the
/// [`Responder`] (if it sends none, the client gets a 500).
pub type Handler = dyn Fn(Request, Responder) + Send + Sync;

/// A table of routes: method, path, handler.
pub type Routes<H> = [(&'static str, &'static str, H)];

/// The handler for `method` and `path` in `routes`, if it has one.
pub fn route<'a, H>(routes: &'a Routes<H>, method: &str, path: &str) -> Option<&'a H> {
    routes
        .iter()
        .find(|(m, p, _)| *m == method && *p == path)
        .map(|(_, _, h)| h)
}

/// How connections are served.
#[derive(Clone, Debug)]
pub struct Options {
    /// Connections served at once; more are answered 503.
    pub max_connections: usize,
    /// How long a client may take to send its request's head, and then
    /// its body.
    pub request_timeout: Duration,
    /// Whether a client may close its sending side and still wait for the
    /// answer. Off for a server: a closed side means the client went away
    /// (its query stops). On where a whole request arrives at once and
    /// then the end of the input (the fuzzer).
    pub half_close: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_connections: 64,
            request_timeout: Duration::from_secs(10),
            half_close: false,
        }
    }
}

/// Serves the connections of `listener` until the process ends.
pub fn run(listener: TcpListener, opts: Options, handler: Arc<Handler>) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("starting the server: {e}"))?;
    runtime.block_on(accept(listener, opts, handler))
}

async fn accept(listener: TcpListener, opts: Options, handler: Arc<Handler>) -> Result<(), String> {
    let listener = listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .map_err(|e| format!("listening: {e}"))?;
    let opts = Arc::new(opts);
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(_) => {
                // Out of descriptors, or a connection reset before it was
                // taken: try again shortly rather than spin.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        if active.load(Ordering::Relaxed) >= opts.max_connections {
            tokio::spawn(refuse(stream, opts.clone()));
            continue;
        }
        active.fetch_add(1, Ordering::Relaxed);
        let (opts, handler, done) = (opts.clone(), handler.clone(), active.clone());
        tokio::spawn(async move {
            serve_connection(stream, &opts, handler).await;
            done.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

fn builder(opts: &Options) -> http1::Builder {
    let mut b = http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(opts.request_timeout)
        .max_header_size(MAX_HEAD)
        .max_headers(MAX_HEADERS)
        .keep_alive(false)
        .half_close(opts.half_close);
    b
}

/// Answers the one request of a connection (any byte stream: a socket,
/// or an in-memory pipe in the fuzzer) with `handler`.
pub async fn serve_connection<I>(io: I, opts: &Options, handler: Arc<Handler>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let timeout = opts.request_timeout;
    let service = service_fn(move |req| answer(req, handler.clone(), timeout));
    // An error here is the connection's (closed, timed out, not HTTP);
    // hyper has answered what it could.
    let _ = builder(opts)
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// A connection beyond the limit: 503, whatever it asked.
async fn refuse(stream: tokio::net::TcpStream, opts: Arc<Options>) {
    let service = service_fn(|_req: hyper::Request<Incoming>| async {
        let r = Response::new(
            503,
            "text/plain; charset=utf-8",
            "too many connections; try again\n",
        );
        Ok::<_, Infallible>(r.into_hyper())
    });
    let _ = builder(&opts)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// Marks the client gone if the answer is dropped before it is ready
/// (hyper drops it when the connection closes).
struct Waiting(Arc<AtomicBool>, bool);

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.1 {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

async fn answer(
    req: hyper::Request<Incoming>,
    handler: Arc<Handler>,
    timeout: Duration,
) -> Result<hyper::Response<Body>, Infallible> {
    let request = match tokio::time::timeout(timeout, Request::read(req)).await {
        Ok(Ok(r)) => r,
        Ok(Err(bad)) => return Ok(bad.response().into_hyper()),
        Err(_) => {
            let bad = BadRequest::new(
                408,
                format!(
                    "the request did not arrive within {} s",
                    timeout.as_secs_f64()
                ),
            );
            return Ok(bad.response().into_hyper());
        }
    };
    let (tx, rx) = oneshot::channel();
    let responder = Responder::new(tx);
    let mut waiting = Waiting(responder.gone().0, true);
    let spawned = std::thread::Builder::new()
        .name("weir-serve".into())
        .spawn(move || handler(request, responder));
    if let Err(e) = spawned {
        waiting.1 = false;
        let r = Response::error(503, "busy", &format!("no thread for the request: {e}"));
        return Ok(r.into_hyper());
    }
    let answered = rx.await;
    waiting.1 = false;
    Ok(answered.unwrap_or_else(|_| {
        Response::error(500, "internal", "the request's handler gave no answer").into_hyper()
    }))
}

#[cfg(test)]
mod tests;
