//! What a handler answers: a whole [`Response`], or a download whose
//! head goes out before its first byte ([`Streamed`]); both through the
//! request's [`Responder`], from the handler's own thread.

use std::convert::Infallible;
use std::io::Write;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::sync::{mpsc, oneshot};

pub const JSON: &str = "application/json";

/// The headers every response carries: no script but the page's own, no
/// framing, no sniffing, nothing cached, nothing sent elsewhere; and the
/// connection closes after it.
const SECURITY_HEADERS: [(&str, &str); 6] = [
    (
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
         connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cache-control", "no-store"),
    ("connection", "close"),
];

/// Chunks of a download in flight between the handler and the socket.
const STREAM_CHUNKS: usize = 4;

/// `{"error": message, "kind": kind}`: how every refusal reads.
pub fn error_body(kind: &str, message: &str) -> String {
    serde_json::json!({ "error": message, "kind": kind }).to_string()
}

/// A whole response.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    /// Besides the content type and the security headers.
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> Self {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// A refusal as JSON ([`error_body`]).
    pub fn error(status: u16, kind: &str, message: &str) -> Self {
        Response::new(status, JSON, error_body(kind, message))
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub(crate) fn into_hyper(self) -> hyper::Response<Body> {
        let head = self.head();
        head.body(Body::full(self.body))
            .unwrap_or_else(|_| internal())
    }

    /// The head, for a body that follows until the connection closes: an
    /// HTTP/1.0 response, so that hyper ends it by closing rather than
    /// cutting it into chunks (what `weir serve` has always sent).
    fn into_streamed(self, chunks: mpsc::Receiver<Bytes>) -> hyper::Response<Body> {
        self.head()
            .version(hyper::Version::HTTP_10)
            .body(Body::Stream(chunks))
            .unwrap_or_else(|_| internal())
    }

    fn head(&self) -> hyper::http::response::Builder {
        let mut b = hyper::Response::builder()
            .status(self.status)
            .header("content-type", self.content_type);
        for (n, v) in SECURITY_HEADERS {
            b = b.header(n, v);
        }
        for (n, v) in &self.headers {
            b = b.header(*n, v.as_str());
        }
        b
    }
}

/// A response whose status or headers hyper refused (a value with a
/// control character): a bare 500.
fn internal() -> hyper::Response<Body> {
    let mut r = hyper::Response::new(Body::full(Bytes::from_static(
        b"{\"error\":\"the response had a malformed header\",\"kind\":\"internal\"}",
    )));
    *r.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
    r
}

/// A response's body: whole, or chunks from a handler until it ends.
#[derive(Debug)]
pub enum Body {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Bytes>),
}

impl Body {
    fn full(b: Bytes) -> Body {
        Body::Full(Some(b).filter(|b| !b.is_empty()))
    }
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Body::Stream(rx) => rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Stream(_) => SizeHint::default(),
        }
    }
}

/// Whether the client went away before its answer was ready (the
/// connection closed): a running query asks it, to stop.
#[derive(Clone, Debug)]
pub struct Gone(pub(crate) Arc<AtomicBool>);

impl Gone {
    pub fn is_gone(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Where a handler sends its one answer.
pub struct Responder {
    reply: Mutex<Option<oneshot::Sender<hyper::Response<Body>>>>,
    gone: Gone,
}

impl Responder {
    pub(crate) fn new(reply: oneshot::Sender<hyper::Response<Body>>) -> Self {
        Responder {
            reply: Mutex::new(Some(reply)),
            gone: Gone(Arc::new(AtomicBool::new(false))),
        }
    }

    /// Sends `r`; false if an answer went already or nobody waits for it.
    pub fn send(&self, r: Response) -> bool {
        self.send_hyper(r.into_hyper())
    }

    fn send_hyper(&self, r: hyper::Response<Body>) -> bool {
        let tx = self.reply.lock().unwrap_or_else(|e| e.into_inner()).take();
        tx.is_some_and(|tx| tx.send(r).is_ok())
    }

    /// Whether an answer went (or began to).
    pub fn sent(&self) -> bool {
        self.reply
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    pub fn gone(&self) -> Gone {
        self.gone.clone()
    }

    /// A download of unknown length, status 200 with `head`'s type and
    /// headers (its body is ignored): the head goes out with the first
    /// byte written, so that an error found before any is still answered
    /// as one; the body ends when the writer is dropped.
    pub fn streamed(&self, head: Response) -> Streamed<'_> {
        Streamed {
            responder: self,
            head: Some(head),
            chunks: None,
        }
    }
}

/// The body of a download, written from the handler's thread.
pub struct Streamed<'a> {
    responder: &'a Responder,
    head: Option<Response>,
    chunks: Option<mpsc::Sender<Bytes>>,
}

impl Streamed<'_> {
    /// Whether the head went out (something was written).
    pub fn started(&self) -> bool {
        self.head.is_none()
    }
}

fn went_away() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the client went away")
}

impl Write for Streamed<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if let Some(mut head) = self.head.take() {
            head.status = 200;
            let (tx, rx) = mpsc::channel(STREAM_CHUNKS);
            if !self.responder.send_hyper(head.into_streamed(rx)) {
                return Err(went_away());
            }
            self.chunks = Some(tx);
        }
        let tx = self.chunks.as_ref().ok_or_else(went_away)?;
        tx.blocking_send(Bytes::copy_from_slice(buf))
            .map_err(|_| went_away())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
