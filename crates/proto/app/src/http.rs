//! HTTP/1.x message heads (RFC 9112): a request's line and the headers the
//! http table keeps, a response's status and the same; and how long the
//! body after each head is, so that a stream's next message can be found.

/// Why the bytes at a message's start are not (yet) a head weir can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpError {
    /// No blank line yet: more may come.
    Incomplete,
    /// Not an HTTP/1.x request or status line.
    NotHttp,
    /// A head over [`HEAD_MAX`] bytes, or a header line without a colon.
    Malformed,
}

impl HttpError {
    pub fn name(self) -> &'static str {
        match self {
            HttpError::Incomplete => "incomplete",
            HttpError::NotHttp => "not_http",
            HttpError::Malformed => "malformed",
        }
    }
}

/// A head longer than this is not read (and is counted as malformed).
pub const HEAD_MAX: usize = 16 << 10;

/// How the body after a head is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// This many bytes (0: none).
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Until the connection closes (a response without a length).
    ToClose,
}

/// A request's head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The request target as sent (a path, or an absolute URI to a proxy).
    pub target: String,
    /// 0 or 1: HTTP/1.0 or 1.1.
    pub minor: u8,
    pub host: Option<String>,
    pub user_agent: Option<String>,
    pub content_length: Option<u64>,
    pub chunked: bool,
}

/// A response's head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Response {
    pub minor: u8,
    pub status: u16,
    pub content_type: Option<String>,
    pub content_length: Option<u64>,
    pub chunked: bool,
}

/// Where the head at the start of `b` ends (after its blank line).
fn head_end(b: &[u8]) -> Result<usize, HttpError> {
    let limit = b.len().min(HEAD_MAX);
    let mut i = 0;
    while let Some(k) = b[i..limit].iter().position(|&c| c == b'\n') {
        let nl = i + k;
        match b.get(nl + 1) {
            Some(b'\n') => return Ok(nl + 2),
            Some(b'\r') if b.get(nl + 2) == Some(&b'\n') => return Ok(nl + 3),
            Some(_) => {}
            None => break,
        }
        i = nl + 1;
    }
    if b.len() >= HEAD_MAX {
        Err(HttpError::Malformed)
    } else {
        Err(HttpError::Incomplete)
    }
}

/// Whether `b` could start a request: a method token (upper-case letters)
/// and a space within its first 17 bytes. A cheap test for a stream's
/// first bytes before its head is complete.
pub fn may_be_request(b: &[u8]) -> bool {
    let n = b
        .iter()
        .take(17)
        .take_while(|c| c.is_ascii_uppercase())
        .count();
    n >= 3 && (b.len() == n || (n < 17 && b[n] == b' '))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn trim(b: &[u8]) -> &[u8] {
    let s = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let e = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(s, |e| e + 1);
    &b[s..e.max(s)]
}

/// "HTTP/1.x": x.
fn version(b: &[u8]) -> Option<u8> {
    match b {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', d] if d.is_ascii_digit() => Some(d - b'0'),
        _ => None,
    }
}

/// The header lines of a head (after its first line), as (name, value).
fn headers(head: &[u8]) -> impl Iterator<Item = Result<(&[u8], &[u8]), HttpError>> {
    head.split(|&c| c == b'\n')
        .skip(1)
        .map(trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let colon = l
                .iter()
                .position(|&c| c == b':')
                .ok_or(HttpError::Malformed)?;
            Ok((trim(&l[..colon]), trim(&l[colon + 1..])))
        })
}

fn number(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    v.iter().try_fold(0u64, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + (c - b'0') as u64)
    })
}

fn is_chunked(v: &[u8]) -> bool {
    v.split(|&c| c == b',')
        .next_back()
        .is_some_and(|last| trim(last).eq_ignore_ascii_case(b"chunked"))
}

impl Request {
    /// The request head at the start of `b`, and its length.
    pub fn parse(b: &[u8]) -> Result<(Request, usize), HttpError> {
        if !may_be_request(b) {
            return Err(HttpError::NotHttp);
        }
        let end = head_end(b)?;
        let head = &b[..end];
        let line_end = head.iter().position(|&c| c == b'\n').unwrap_or(end);
        let line = trim(&head[..line_end]);
        let mut parts = line.split(|&c| c == b' ').filter(|p| !p.is_empty());
        let (Some(method), Some(target), Some(v), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(HttpError::NotHttp);
        };
        let minor = version(v).ok_or(HttpError::NotHttp)?;
        let mut r = Request {
            method: text(method),
            target: text(target),
            minor,
            ..Default::default()
        };
        for h in headers(head) {
            let (name, value) = h?;
            if name.eq_ignore_ascii_case(b"host") {
                r.host.get_or_insert_with(|| text(value));
            } else if name.eq_ignore_ascii_case(b"user-agent") {
                r.user_agent.get_or_insert_with(|| text(value));
            } else if name.eq_ignore_ascii_case(b"content-length") {
                r.content_length = number(value);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                r.chunked = is_chunked(value);
            }
        }
        Ok((r, end))
    }

    /// The body after this head.
    pub fn body(&self) -> Body {
        if self.chunked {
            Body::Chunked
        } else {
            Body::Length(self.content_length.unwrap_or(0))
        }
    }
}

impl Response {
    /// The response head at the start of `b`, and its length.
    pub fn parse(b: &[u8]) -> Result<(Response, usize), HttpError> {
        if !b"HTTP/".starts_with(&b[..b.len().min(5)]) {
            return Err(HttpError::NotHttp);
        }
        let end = head_end(b)?;
        let head = &b[..end];
        let line_end = head.iter().position(|&c| c == b'\n').unwrap_or(end);
        let line = trim(&head[..line_end]);
        let mut parts = line.splitn(3, |&c| c == b' ');
        let minor = parts.next().and_then(version).ok_or(HttpError::NotHttp)?;
        let status = parts
            .next()
            .filter(|s| s.len() == 3)
            .and_then(number)
            .ok_or(HttpError::NotHttp)? as u16;
        let mut r = Response {
            minor,
            status,
            ..Default::default()
        };
        for h in headers(head) {
            let (name, value) = h?;
            if name.eq_ignore_ascii_case(b"content-type") {
                r.content_type.get_or_insert_with(|| text(value));
            } else if name.eq_ignore_ascii_case(b"content-length") {
                r.content_length = number(value);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                r.chunked = is_chunked(value);
            }
        }
        Ok((r, end))
    }

    /// The body after this head, answering a request of `method`.
    pub fn body(&self, method: &str) -> Body {
        if method == "HEAD" || self.status < 200 || self.status == 204 || self.status == 304 {
            Body::Length(0)
        } else if self.chunked {
            Body::Chunked
        } else if let Some(n) = self.content_length {
            Body::Length(n)
        } else {
            Body::ToClose
        }
    }
}

/// Steps through a chunked body as its bytes arrive, without keeping
/// them: only the chunk-size lines are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Chunked {
    /// Reading a chunk-size line (hex digits, extensions, CRLF).
    #[default]
    Size,
    /// In a chunk's data and its CRLF: bytes left.
    Data(u64),
    /// After the last chunk: the trailer, up to a blank line.
    Trailer {
        line_empty: bool,
    },
    Done,
}

impl Chunked {
    /// Advances over `b` (the next bytes of the body); returns how many
    /// were part of the body (all of `b` unless it ended inside it).
    /// `size`: the digits of the chunk-size line read so far.
    pub fn advance(
        &mut self,
        b: &[u8],
        size: &mut u64,
        in_ext: &mut bool,
    ) -> Result<usize, HttpError> {
        let mut i = 0;
        while i < b.len() {
            match *self {
                Chunked::Done => return Ok(i),
                Chunked::Data(left) => {
                    let n = left.min((b.len() - i) as u64);
                    i += n as usize;
                    *self = if left == n {
                        Chunked::Size
                    } else {
                        Chunked::Data(left - n)
                    };
                }
                Chunked::Size => {
                    let c = b[i];
                    i += 1;
                    match c {
                        b'\n' => {
                            *self = if *size == 0 {
                                Chunked::Trailer { line_empty: true }
                            } else {
                                Chunked::Data(*size + 2)
                            };
                            *size = 0;
                            *in_ext = false;
                        }
                        b'\r' => {}
                        _ if *in_ext => {}
                        b';' | b' ' | b'\t' => *in_ext = true,
                        _ => {
                            let d = (c as char).to_digit(16).ok_or(HttpError::Malformed)?;
                            if *size > u64::MAX >> 8 {
                                return Err(HttpError::Malformed);
                            }
                            *size = *size << 4 | d as u64;
                        }
                    }
                }
                Chunked::Trailer { line_empty } => {
                    let c = b[i];
                    i += 1;
                    *self = match c {
                        b'\n' if line_empty => Chunked::Done,
                        b'\n' => Chunked::Trailer { line_empty: true },
                        b'\r' => Chunked::Trailer { line_empty },
                        _ => Chunked::Trailer { line_empty: false },
                    };
                }
            }
        }
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_and_response_heads() {
        let req = b"GET /index.html?q=1 HTTP/1.1\r\nHost: www.example.org\r\nUser-Agent: curl/8.0\r\n\r\nGET";
        let (r, n) = Request::parse(req).unwrap();
        assert_eq!(n, req.len() - 3);
        assert_eq!(r.method, "GET");
        assert_eq!(r.target, "/index.html?q=1");
        assert_eq!(r.host.as_deref(), Some("www.example.org"));
        assert_eq!(r.user_agent.as_deref(), Some("curl/8.0"));
        assert_eq!(r.body(), Body::Length(0));
        for k in 0..n {
            assert!(Request::parse(&req[..k]).is_err());
        }
        let resp =
            b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 12\r\n\r\n";
        let (r, n) = Response::parse(resp).unwrap();
        assert_eq!((r.status, n), (404, resp.len()));
        assert_eq!(r.content_type.as_deref(), Some("text/html"));
        assert_eq!(r.body("GET"), Body::Length(12));
        assert_eq!(r.body("HEAD"), Body::Length(0));
        assert_eq!(Request::parse(b"\x16\x03\x01"), Err(HttpError::NotHttp));
        assert_eq!(
            Response::parse(b"SSH-2.0-Open\r\n\r\n"),
            Err(HttpError::NotHttp)
        );
        assert_eq!(Response::parse(b"HTT"), Err(HttpError::Incomplete));
    }

    #[test]
    fn chunked_bodies_end_where_they_end() {
        let body = b"4;x=y\r\nWiki\r\n5\r\npedia\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1";
        for split in 0..body.len() {
            let (mut c, mut size, mut ext) = (Chunked::default(), 0, false);
            let a = c.advance(&body[..split], &mut size, &mut ext).unwrap();
            let b = c.advance(&body[split..], &mut size, &mut ext).unwrap();
            assert_eq!(c, Chunked::Done);
            assert_eq!(a + b, body.len() - 8, "{split}");
        }
    }
}
