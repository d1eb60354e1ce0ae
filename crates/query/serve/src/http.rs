//! The HTTP/1.1 the server speaks: one request per connection (every
//! response closes it), the head parsed by `httparse`, a body only by
//! Content-Length and small; responses written straight to the socket, a
//! streamed one ended by closing.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The most a request's head may take.
const MAX_HEAD: usize = 16 * 1024;
/// The most a request's body may take (the SQL box's statement).
pub const MAX_BODY: usize = 64 * 1024;
const MAX_HEADERS: usize = 48;
/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A request as the handlers see it.
#[derive(Debug, Default)]
pub struct Request {
    pub method: String,
    /// The path, percent-decoded, without the query.
    pub path: String,
    /// The query's parameters, decoded, in order.
    pub query: Vec<(String, String)>,
    /// Header names lower-cased.
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
}

/// Why a request could not be read; the status to answer with.
#[derive(Debug)]
pub struct BadRequest {
    pub status: u16,
    pub message: String,
}

fn bad(status: u16, message: impl Into<String>) -> BadRequest {
    BadRequest {
        status,
        message: message.into(),
    }
}

/// Reads one request from `stream`.
pub fn read_request(stream: &mut TcpStream) -> Result<Request, BadRequest> {
    let _ = stream.set_read_timeout(Some(REQUEST_TIMEOUT));
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream
            .read(&mut chunk)
            .map_err(|e| bad(408, format!("reading the request: {e}")))?;
        if n == 0 {
            return Err(bad(400, "the connection closed before a whole request"));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(head_len)) => {
                let mut out = Request {
                    method: req.method.unwrap_or("").to_string(),
                    ..Default::default()
                };
                let target = req.path.unwrap_or("/");
                let (path, query) = target.split_once('?').unwrap_or((target, ""));
                out.path = percent_decode(path).ok_or_else(|| bad(400, "bad path encoding"))?;
                out.query = parse_query(query).ok_or_else(|| bad(400, "bad query encoding"))?;
                for h in req.headers.iter() {
                    let value = std::str::from_utf8(h.value)
                        .map_err(|_| bad(400, format!("header {} is not UTF-8", h.name)))?;
                    out.headers
                        .push((h.name.to_ascii_lowercase(), value.trim().to_string()));
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
                    return Err(bad(
                        413,
                        format!("the body is {len} bytes; at most {MAX_BODY} are taken"),
                    ));
                }
                let mut body = buf[head_len..].to_vec();
                body.truncate(len);
                while body.len() < len {
                    let n = stream
                        .read(&mut chunk)
                        .map_err(|e| bad(408, format!("reading the body: {e}")))?;
                    if n == 0 {
                        return Err(bad(400, "the connection closed inside the body"));
                    }
                    let take = n.min(len - body.len());
                    body.extend_from_slice(&chunk[..take]);
                }
                out.body = body;
                return Ok(out);
            }
            Ok(httparse::Status::Partial) => {
                if buf.len() > MAX_HEAD {
                    return Err(bad(431, "the request's head is too large"));
                }
            }
            Err(e) => return Err(bad(400, format!("not an HTTP request: {e}"))),
        }
    }
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

/// The headers every response carries: no script but the page's own, no
/// framing, no sniffing, nothing cached, nothing sent elsewhere.
const SECURITY_HEADERS: &str = "Content-Security-Policy: default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'\r\n\
     X-Content-Type-Options: nosniff\r\n\
     Referrer-Policy: no-referrer\r\n\
     X-Frame-Options: DENY\r\n\
     Cache-Control: no-store\r\n\
     Connection: close\r\n";

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Writes a whole response.
pub fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    extra_headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = start(status, content_type, extra_headers);
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

/// Writes the head of a response whose body follows until the connection
/// closes (a download of unknown length).
pub fn respond_streamed(
    stream: &mut TcpStream,
    content_type: &str,
    extra_headers: &[(&str, &str)],
) -> std::io::Result<()> {
    let mut head = start(200, content_type, extra_headers);
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())
}

fn start(status: u16, content_type: &str, extra_headers: &[(&str, &str)]) -> String {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\n{SECURITY_HEADERS}",
        reason(status)
    );
    for (n, v) in extra_headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head
}

/// Whether the client has closed its side of `stream` (a browser that went
/// away): a peek that does not block and does not change the socket.
pub fn client_gone(stream: &TcpStream) -> bool {
    use std::os::fd::AsRawFd;
    let mut b = [0u8; 1];
    // SAFETY: recv on a socket we own into a one-byte buffer; MSG_PEEK
    // leaves the data, MSG_DONTWAIT keeps it from blocking.
    let r = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if r == 0 {
        return true;
    }
    if r < 0 {
        let e = std::io::Error::last_os_error();
        return !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
        );
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode() {
        assert_eq!(
            parse_query("filter=tcp+port%2080&from=5&x").unwrap(),
            vec![
                ("filter".into(), "tcp port 80".into()),
                ("from".into(), "5".into()),
                ("x".into(), "".into())
            ]
        );
        assert!(parse_query("a=%zz").is_none());
        assert!(parse_query("a=%ff").is_none());
        assert_eq!(percent_decode("%2e%2E/").unwrap(), "../");
        assert!(percent_decode("%").is_none() && percent_decode("%4").is_none());
    }

    /// Any bytes at all: an answer or `None`, never a panic; and what an
    /// encoder makes of any text decodes back to it.
    #[test]
    fn any_input_decodes_or_is_refused() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let alphabet = b"%=&+0123456789abcdefABCDEFxyz/.\xc3\xa9 \x00";
        for _ in 0..20_000 {
            let len = (next() % 24) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
                .collect();
            let text = String::from_utf8_lossy(&bytes);
            let _ = parse_query(&text);
            if let Some(d) = percent_decode(&text) {
                let encoded: String = d.bytes().map(|b| format!("%{b:02x}")).collect();
                assert_eq!(percent_decode(&encoded).as_deref(), Some(d.as_str()));
            }
        }
    }
}
