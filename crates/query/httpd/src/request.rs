//! A request as the handlers see it: method, decoded path and query,
//! headers, and a body taken only by Content-Length and small.

use std::pin::pin;

use http_body::Body as _;
use hyper::body::Incoming;

use crate::Response;

/// The most a request's head may take (hyper answers 431 beyond).
pub const MAX_HEAD: usize = 16 * 1024;
/// The most headers a request may have (hyper answers 431 beyond).
pub const MAX_HEADERS: usize = 48;
/// The most a request's body may take (the SQL box's statement).
pub const MAX_BODY: usize = 64 * 1024;

/// A request as the handlers see it.
#[derive(Debug, Default)]
pub struct Request {
    pub method: String,
    /// The path, percent-decoded, without the query.
    pub path: String,
    /// The query's parameters, decoded, in order.
    pub query: Vec<(String, String)>,
    /// Header names lower-cased, values trimmed.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// A whole-number parameter; an empty one counts as absent. The error
    /// names the parameter.
    pub fn param_i64(&self, name: &str) -> Result<Option<i64>, String> {
        match self.param(name).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("{name}={v}: give a whole number")),
        }
    }

    /// Takes hyper's request: its target decoded, its headers as text, its
    /// body read whole within [`MAX_BODY`].
    pub(crate) async fn read(req: hyper::Request<Incoming>) -> Result<Request, BadRequest> {
        let (parts, body) = req.into_parts();
        let mut out = Request {
            method: parts.method.as_str().to_string(),
            ..Default::default()
        };
        out.path = percent_decode(parts.uri.path()).ok_or_else(|| bad(400, "bad path encoding"))?;
        out.query = parse_query(parts.uri.query().unwrap_or(""))
            .ok_or_else(|| bad(400, "bad query encoding"))?;
        for (name, value) in &parts.headers {
            let value = std::str::from_utf8(value.as_bytes())
                .map_err(|_| bad(400, format!("header {name} is not UTF-8")))?;
            out.headers
                .push((name.as_str().to_string(), value.trim().to_string()));
        }
        if out.header("transfer-encoding").is_some() {
            return Err(bad(411, "send the body with a Content-Length"));
        }
        let len = match out.header("content-length") {
            None => 0,
            Some(v) => v
                .parse::<usize>()
                .map_err(|_| bad(400, "bad Content-Length"))?,
        };
        if len > MAX_BODY {
            return Err(too_large(len));
        }
        let mut body = pin!(body);
        let mut data = Vec::with_capacity(len);
        while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            let frame = frame.map_err(|e| bad(400, format!("reading the body: {e}")))?;
            if let Ok(chunk) = frame.into_data() {
                if data.len() + chunk.len() > MAX_BODY {
                    return Err(too_large(data.len() + chunk.len()));
                }
                data.extend_from_slice(&chunk);
            }
        }
        out.body = data;
        Ok(out)
    }
}

/// Why a request could not be read; the status to answer with.
#[derive(Debug)]
pub struct BadRequest {
    pub status: u16,
    pub message: String,
}

impl BadRequest {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        BadRequest {
            status,
            message: message.into(),
        }
    }

    /// The answer: `{"error": ..., "kind": "request"}`.
    pub fn response(&self) -> Response {
        Response::error(self.status, "request", &self.message)
    }
}

fn bad(status: u16, message: impl Into<String>) -> BadRequest {
    BadRequest::new(status, message)
}

fn too_large(len: usize) -> BadRequest {
    bad(
        413,
        format!("the body is {len} bytes; at most {MAX_BODY} are taken"),
    )
}

/// `a=1&b=x%20y` as pairs; `+` is a space, as forms send it.
pub fn parse_query(q: &str) -> Option<Vec<(String, String)>> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((
                percent_decode(&k.replace('+', " "))?,
                percent_decode(&v.replace('+', " "))?,
            ))
        })
        .collect()
}

/// Decodes %XX escapes; `None` for a broken escape or bytes that are not
/// UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
