//! What the app mix's sessions say: real DNS queries and responses, TLS
//! ClientHellos (several SNIs and ALPNs, TLS 1.2 and 1.3) with the
//! server's hello (and certificate, for 1.2), and HTTP/1.1 requests with
//! their response heads, so that decoders and tshark have something to
//! read. Drawn from a generator of the session's own, so that the mix's
//! shape (frames, times) does not depend on it.

use app::dns;
use app::tls;

use crate::Rng;

const NAMES: &[&str] = &[
    "www.example.com",
    "mail.example.com",
    "api.example.net",
    "cdn.example.org",
    "login.example.com",
    "static.example.net",
    "video.example.org",
    "updates.example.com",
];

/// Names that do not exist: answered NXDOMAIN.
const MISSING: &[&str] = &["nothing.example.org", "typo.example.com"];

const AGENTS: &[&str] = &[
    "curl/8.5.0",
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Wget/1.21.3",
];

const PATHS: &[&str] = &[
    "/",
    "/index.html",
    "/api/v1/items?page=2",
    "/static/app.js",
    "/login",
];

const ALPNS: &[&[&str]] = &[&["h2", "http/1.1"], &["http/1.1"], &["h2"], &[]];

/// A DNS lookup: (query, response).
pub fn dns_exchange(r: &mut Rng, v6: bool) -> (Vec<u8>, Vec<u8>) {
    let id = r.next_u32() as u16;
    let qtype = if v6 { dns::TYPE_AAAA } else { dns::TYPE_A };
    if r.below(10) == 0 {
        let name = MISSING[r.below(MISSING.len() as u64) as usize];
        let q = dns::build(id, 0x0100, (name, qtype, 1), &[]);
        let a = dns::build(id, 0x8183, (name, qtype, 1), &[]);
        return (q, a);
    }
    let name = NAMES[r.below(NAMES.len() as u64) as usize];
    let q = dns::build(id, 0x0100, (name, qtype, 1), &[]);
    let n = r.range(1, 3) as usize;
    let addrs: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let mut a = if v6 {
                let mut a = vec![0x20, 0x01, 0x0d, 0xb8];
                a.extend_from_slice(&[0; 12]);
                a
            } else {
                vec![203, 0, 113, 0]
            };
            let last = a.len() - 1;
            a[last] = r.range(1, 254) as u8;
            a
        })
        .collect();
    let answers: Vec<(u16, u32, &[u8])> = addrs
        .iter()
        .map(|a| (qtype, r.range(30, 3600) as u32, a.as_slice()))
        .collect();
    let a = dns::build(id, 0x8180, (name, qtype, 1), &answers);
    (q, a)
}

/// A TLS handshake's start: (ClientHello record, the server's records).
pub fn tls_handshake(r: &mut Rng) -> (Vec<u8>, Vec<u8>) {
    let mut random = [0u8; 32];
    random.iter_mut().for_each(|b| *b = r.next_u32() as u8);
    let sni = NAMES[r.below(NAMES.len() as u64) as usize];
    let alpn = ALPNS[r.below(ALPNS.len() as u64) as usize];
    let tls13 = r.below(3) != 0;
    let grease = r.below(2) == 0;
    let g = 0x0a0a + 0x1010 * r.below(15) as u16;
    let mut ciphers = Vec::new();
    if grease {
        ciphers.push(g);
    }
    if tls13 {
        ciphers.extend_from_slice(&[0x1301, 0x1302, 0x1303]);
    }
    ciphers.extend_from_slice(&[0xc02b, 0xc02f, 0xc02c, 0xc030, 0x009c]);
    let versions: Vec<u16> = if tls13 {
        let mut v = if grease { vec![g] } else { Vec::new() };
        v.extend_from_slice(&[0x0304, 0x0303]);
        v
    } else {
        Vec::new()
    };
    let mut groups = if grease { vec![g] } else { Vec::new() };
    groups.extend_from_slice(&[29, 23, 24]);
    let hello = tls::build_client_hello(
        random,
        &ciphers,
        (r.below(8) != 0).then_some(sni),
        alpn,
        &versions,
        &groups,
    );
    let chosen_alpn = alpn.first().copied();
    let server = if tls13 {
        tls::build_server_hello(random, 0x1301, true, chosen_alpn, None)
    } else {
        let cert = app::x509::build_test_certificate(sni, "Example Test CA");
        tls::build_server_hello(random, 0xc02f, false, chosen_alpn, Some(&cert))
    };
    (hello, server)
}

/// An HTTP/1.1 exchange: (request, the response's head), the head
/// declaring a body that brings the response to `size` bytes (at least
/// the head's).
pub fn http_exchange(r: &mut Rng, size: u64) -> (Vec<u8>, Vec<u8>, u64) {
    let host = NAMES[r.below(NAMES.len() as u64) as usize];
    let path = PATHS[r.below(PATHS.len() as u64) as usize];
    let agent = AGENTS[r.below(AGENTS.len() as u64) as usize];
    let post = r.below(6) == 0;
    let mut req = format!(
        "{} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {agent}\r\nAccept: */*\r\n",
        if post { "POST" } else { "GET" }
    );
    if post {
        req.push_str("Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 11\r\n\r\nname=weir&x");
    } else {
        req.push_str("\r\n");
    }
    let (status, reason) = match r.below(10) {
        0 => (404, "Not Found"),
        1 => (301, "Moved Permanently"),
        _ => (200, "OK"),
    };
    let kind = ["text/html", "application/json", "image/png"][r.below(3) as usize];
    // The head's length depends on the body's digits: settle it in two goes.
    let head = |body: u64| {
        format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {body}\r\n\r\n"
        )
    };
    let guess = head(size).len() as u64;
    let body = size.saturating_sub(guess);
    let h = head(body);
    let total = h.len() as u64 + body;
    (req.into_bytes(), h.into_bytes(), total)
}
