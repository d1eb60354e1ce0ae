//! TLS handshakes (RFC 5246, RFC 8446) as they start a TCP stream: the
//! ClientHello with its extensions, the ServerHello's choice, and the
//! server's certificate where it travels in the clear (TLS 1.2 and below).
//!
//! The functions take the bytes of one direction from its first byte on
//! (records, unencrypted) and say [`TlsError::Incomplete`] while a
//! message is still arriving, so that a caller can reassemble up to a
//! bound of its own and try again.

use crate::x509;

pub const CONTENT_HANDSHAKE: u8 = 22;
pub const HS_CLIENT_HELLO: u8 = 1;
pub const HS_SERVER_HELLO: u8 = 2;
pub const HS_CERTIFICATE: u8 = 11;

pub const EXT_SERVER_NAME: u16 = 0;
pub const EXT_SUPPORTED_GROUPS: u16 = 10;
pub const EXT_EC_POINT_FORMATS: u16 = 11;
pub const EXT_SIGNATURE_ALGORITHMS: u16 = 13;
pub const EXT_ALPN: u16 = 16;
pub const EXT_SUPPORTED_VERSIONS: u16 = 43;

/// Why a direction's start is not (yet) a handshake weir can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsError {
    /// The message is not complete in the bytes given: more may come.
    Incomplete,
    /// The first record is not a TLS handshake record.
    NotTls,
    /// A handshake record whose message is not the one expected there
    /// (a ClientHello from the client, a ServerHello from the server).
    Unexpected,
    /// A length inside the message runs past its end, or a field is
    /// shorter than its type requires.
    Malformed,
}

impl TlsError {
    pub fn name(self) -> &'static str {
        match self {
            TlsError::Incomplete => "incomplete",
            TlsError::NotTls => "not_tls",
            TlsError::Unexpected => "unexpected_message",
            TlsError::Malformed => "malformed",
        }
    }
}

/// Whether `v` is a GREASE value (RFC 8701): 0x?A?A with equal bytes.
#[inline]
pub fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

/// A ClientHello's fields the tables and fingerprints use. Parsing into a
/// kept one reuses its buffers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientHello {
    /// legacy_version (0x0303 for TLS 1.2 and 1.3).
    pub version: u16,
    pub ciphers: Vec<u16>,
    /// Extension types in the order sent.
    pub extensions: Vec<u16>,
    pub groups: Vec<u16>,
    pub point_formats: Vec<u8>,
    pub signature_algorithms: Vec<u16>,
    /// supported_versions, as sent.
    pub versions: Vec<u16>,
    /// The first host_name of server_name, as text (bytes that are not
    /// UTF-8 replaced).
    pub sni: Option<String>,
    /// ALPN protocol names, in order.
    pub alpn: Vec<String>,
}

/// A ServerHello's choice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerHello {
    pub version: u16,
    pub cipher: u16,
    /// supported_versions' selected version (TLS 1.3).
    pub selected_version: Option<u16>,
    pub alpn: Option<String>,
}

impl ServerHello {
    /// The version agreed: supported_versions' where given.
    pub fn negotiated(&self) -> u16 {
        self.selected_version.unwrap_or(self.version)
    }
}

/// The handshake bytes of the handshake records at the start of `stream`
/// (one message may span records, and one record may hold several),
/// appended to `out`. Returns whether a record that is not a handshake
/// followed them (ChangeCipherSpec, an alert, application data: no more
/// clear handshake can come); a partial last record is left out.
pub fn handshake_bytes(stream: &[u8], out: &mut Vec<u8>) -> Result<bool, TlsError> {
    let mut at = 0;
    while let Some(h) = stream.get(at..at + 5) {
        let len = u16::from_be_bytes([h[3], h[4]]) as usize;
        if h[0] != CONTENT_HANDSHAKE || h[1] != 3 || len > (1 << 14) + 2048 {
            // After the handshake records anything may follow (other
            // records, or bytes that are not TLS): no more clear
            // handshake comes.
            return if at == 0 {
                Err(TlsError::NotTls)
            } else {
                Ok(true)
            };
        }
        let Some(body) = stream.get(at + 5..at + 5 + len) else {
            break;
        };
        out.extend_from_slice(body);
        at += 5 + len;
    }
    if at == 0 && !stream.is_empty() && stream[0] != CONTENT_HANDSHAKE {
        return Err(TlsError::NotTls);
    }
    Ok(false)
}

/// The next handshake message of `hs` at `*at`: (type, body); advances.
pub fn next_message<'a>(hs: &'a [u8], at: &mut usize) -> Result<(u8, &'a [u8]), TlsError> {
    let h = hs.get(*at..*at + 4).ok_or(TlsError::Incomplete)?;
    let len = u32::from_be_bytes([0, h[1], h[2], h[3]]) as usize;
    let body = hs.get(*at + 4..*at + 4 + len).ok_or(TlsError::Incomplete)?;
    *at += 4 + len;
    Ok((h[0], body))
}

/// A cursor over a message's bytes; every read checks its length.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TlsError> {
        if n > self.b.len() {
            return Err(TlsError::Malformed);
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, TlsError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, TlsError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    /// A vector with an `n`-byte length.
    fn vec(&mut self, n: usize) -> Result<&'a [u8], TlsError> {
        let len = match n {
            1 => self.u8()? as usize,
            _ => self.u16()? as usize,
        };
        self.take(len)
    }
}

fn u16s(b: &[u8], out: &mut Vec<u16>) -> Result<(), TlsError> {
    if b.len() % 2 != 0 {
        return Err(TlsError::Malformed);
    }
    out.extend(b.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])));
    Ok(())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl ClientHello {
    /// Parses the ClientHello that starts the client's `stream` (records).
    pub fn parse_stream(&mut self, stream: &[u8], scratch: &mut Vec<u8>) -> Result<(), TlsError> {
        scratch.clear();
        handshake_bytes(stream, scratch)?;
        let mut at = 0;
        match next_message(scratch, &mut at)? {
            (HS_CLIENT_HELLO, body) => self.parse(body),
            _ => Err(TlsError::Unexpected),
        }
    }

    /// Parses a ClientHello message's body.
    pub fn parse(&mut self, body: &[u8]) -> Result<(), TlsError> {
        self.ciphers.clear();
        self.extensions.clear();
        self.groups.clear();
        self.point_formats.clear();
        self.signature_algorithms.clear();
        self.versions.clear();
        self.sni = None;
        self.alpn.clear();
        let mut r = Reader { b: body };
        self.version = r.u16()?;
        r.take(32)?;
        r.vec(1)?;
        u16s(r.vec(2)?, &mut self.ciphers)?;
        r.vec(1)?;
        if r.b.is_empty() {
            return Ok(());
        }
        let mut exts = Reader { b: r.vec(2)? };
        while !exts.b.is_empty() {
            let t = exts.u16()?;
            let mut e = Reader { b: exts.vec(2)? };
            self.extensions.push(t);
            match t {
                EXT_SERVER_NAME if !e.b.is_empty() => {
                    let mut list = Reader { b: e.vec(2)? };
                    while !list.b.is_empty() {
                        let kind = list.u8()?;
                        let name = list.vec(2)?;
                        if kind == 0 && self.sni.is_none() {
                            self.sni = Some(text(name));
                        }
                    }
                }
                EXT_SUPPORTED_GROUPS => u16s(e.vec(2)?, &mut self.groups)?,
                EXT_EC_POINT_FORMATS => self.point_formats.extend_from_slice(e.vec(1)?),
                EXT_SIGNATURE_ALGORITHMS => u16s(e.vec(2)?, &mut self.signature_algorithms)?,
                EXT_ALPN => {
                    let mut list = Reader { b: e.vec(2)? };
                    while !list.b.is_empty() {
                        self.alpn.push(text(list.vec(1)?));
                    }
                }
                EXT_SUPPORTED_VERSIONS => u16s(e.vec(1)?, &mut self.versions)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// The highest version offered (supported_versions' where sent),
    /// GREASE aside.
    pub fn max_version(&self) -> u16 {
        self.versions
            .iter()
            .copied()
            .filter(|&v| !is_grease(v))
            .max()
            .unwrap_or(self.version)
    }

    /// The JA3 string: version, ciphers, extensions, groups, point
    /// formats; lists dash-separated, GREASE left out.
    pub fn ja3_string(&self) -> String {
        let mut s = String::with_capacity(256);
        push_decimal(&mut s, self.version);
        s.push(',');
        let list = |s: &mut String, vals: &mut dyn Iterator<Item = u16>| {
            for (i, v) in vals.enumerate() {
                if i > 0 {
                    s.push('-');
                }
                push_decimal(s, v);
            }
        };
        list(
            &mut s,
            &mut self.ciphers.iter().copied().filter(|&v| !is_grease(v)),
        );
        s.push(',');
        list(
            &mut s,
            &mut self.extensions.iter().copied().filter(|&v| !is_grease(v)),
        );
        s.push(',');
        list(
            &mut s,
            &mut self.groups.iter().copied().filter(|&v| !is_grease(v)),
        );
        s.push(',');
        list(&mut s, &mut self.point_formats.iter().map(|&v| v as u16));
        s
    }

    /// JA3: the MD5 of [`ClientHello::ja3_string`], in hex.
    pub fn ja3(&self) -> String {
        hex(&crate::md5::md5(self.ja3_string().as_bytes()))
    }

    /// The JA4 client fingerprint (FoxIO's JA4 specification) of a hello
    /// over TCP: `t`, the version, `d` or `i` (SNI or not), the cipher and
    /// extension counts and ALPN's first and last character; then 12 hex
    /// digits of the SHA-256 of the sorted ciphers; then of the sorted
    /// extensions (SNI and ALPN left out) and the signature algorithms as
    /// sent.
    pub fn ja4(&self) -> String {
        let version = match self.max_version() {
            0x0304 => "13",
            0x0303 => "12",
            0x0302 => "11",
            0x0301 => "10",
            0x0300 => "s3",
            0x0002 => "s2",
            _ => "00",
        };
        let mut ciphers: Vec<u16> = self
            .ciphers
            .iter()
            .copied()
            .filter(|&v| !is_grease(v))
            .collect();
        let exts: Vec<u16> = self
            .extensions
            .iter()
            .copied()
            .filter(|&v| !is_grease(v))
            .collect();
        let alpn = match self.alpn.first().map(|a| a.as_bytes()) {
            Some([first, .., last])
                if first.is_ascii_alphanumeric() && last.is_ascii_alphanumeric() =>
            {
                [*first as char, *last as char]
            }
            Some([only]) if only.is_ascii_alphanumeric() => [*only as char, *only as char],
            Some(a @ [first, ..]) => {
                let last = a[a.len() - 1];
                let digit = |n: u8| char::from_digit(n as u32, 16).unwrap_or('0');
                [digit(first >> 4), digit(last & 0xf)]
            }
            _ => ['0', '0'],
        };
        let mut s = String::with_capacity(36);
        s.push('t');
        s.push_str(version);
        s.push(if self.sni.is_some() { 'd' } else { 'i' });
        for n in [ciphers.len(), exts.len()] {
            let n = n.min(99) as u8;
            s.push((b'0' + n / 10) as char);
            s.push((b'0' + n % 10) as char);
        }
        s.push(alpn[0]);
        s.push(alpn[1]);
        s.push('_');
        ciphers.sort_unstable();
        let mut text = String::with_capacity(256);
        hex_list(&mut text, &ciphers);
        hash12(&mut s, &text, ciphers.is_empty());
        s.push('_');
        let mut sorted: Vec<u16> = exts
            .into_iter()
            .filter(|&e| e != EXT_SERVER_NAME && e != EXT_ALPN)
            .collect();
        sorted.sort_unstable();
        text.clear();
        hex_list(&mut text, &sorted);
        if !self.signature_algorithms.is_empty() {
            text.push('_');
            hex_list(&mut text, &self.signature_algorithms);
        }
        hash12(&mut s, &text, sorted.is_empty());
        s
    }
}

/// `v` in decimal. By hand rather than through `core::fmt`, which was
/// most of a JA3's cost.
fn push_decimal(s: &mut String, v: u16) {
    let mut digits = [0u8; 5];
    let mut at = digits.len();
    let mut v = v;
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        s.push(d as char);
    }
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `v` as comma-separated 4-digit lowercase hex (by hand, as
/// [`push_decimal`]).
fn hex_list(s: &mut String, v: &[u16]) {
    for (i, &x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        for shift in [12, 8, 4, 0] {
            s.push(HEX_DIGITS[(x >> shift) as usize & 0xf] as char);
        }
    }
}

/// Appends the first 12 hex digits of the SHA-256 of `text` (zeros when
/// there was nothing to hash).
fn hash12(s: &mut String, text: &str, nothing: bool) {
    if nothing {
        s.push_str("000000000000");
        return;
    }
    use sha2::Digest;
    let d = sha2::Sha256::digest(text.as_bytes());
    push_hex(s, &d[..6]);
}

/// Lowercase hex of `b`.
pub fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    push_hex(&mut s, b);
    s
}

fn push_hex(s: &mut String, b: &[u8]) {
    for &x in b {
        s.push(HEX_DIGITS[(x >> 4) as usize] as char);
        s.push(HEX_DIGITS[(x & 0xf) as usize] as char);
    }
}

impl ServerHello {
    /// Parses a ServerHello message's body.
    pub fn parse(body: &[u8]) -> Result<ServerHello, TlsError> {
        let mut r = Reader { b: body };
        let mut sh = ServerHello {
            version: r.u16()?,
            ..Default::default()
        };
        r.take(32)?;
        r.vec(1)?;
        sh.cipher = r.u16()?;
        r.u8()?;
        if r.b.is_empty() {
            return Ok(sh);
        }
        let mut exts = Reader { b: r.vec(2)? };
        while !exts.b.is_empty() {
            let t = exts.u16()?;
            let mut e = Reader { b: exts.vec(2)? };
            match t {
                EXT_SUPPORTED_VERSIONS => sh.selected_version = Some(e.u16()?),
                EXT_ALPN => {
                    let mut list = Reader { b: e.vec(2)? };
                    sh.alpn = Some(text(list.vec(1)?));
                }
                _ => {}
            }
        }
        Ok(sh)
    }
}

/// What the server's side of a handshake showed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerSide {
    pub hello: ServerHello,
    /// The first certificate (the server's own), where sent in the clear.
    pub certificate: Option<x509::CertSummary>,
}

/// Parses the server's start of a handshake: its ServerHello and, for TLS
/// 1.2 and below, its Certificate. [`TlsError::Incomplete`] while either
/// is still arriving (the certificate is waited for only while the
/// server may still send it in the clear).
pub fn server_side(stream: &[u8], scratch: &mut Vec<u8>) -> Result<ServerSide, TlsError> {
    scratch.clear();
    let closed = handshake_bytes(stream, scratch)?;
    let mut at = 0;
    let hello = match next_message(scratch, &mut at)? {
        (HS_SERVER_HELLO, body) => ServerHello::parse(body)?,
        _ => return Err(TlsError::Unexpected),
    };
    let mut side = ServerSide {
        hello,
        certificate: None,
    };
    if side.hello.negotiated() >= 0x0304 {
        return Ok(side);
    }
    match next_message(scratch, &mut at) {
        Ok((HS_CERTIFICATE, body)) => {
            side.certificate = first_certificate(body).and_then(x509::summary);
            Ok(side)
        }
        // ServerKeyExchange, ServerHelloDone...: no certificate (an
        // anonymous suite, or a resumed session: it comes first).
        Ok(_) => Ok(side),
        Err(TlsError::Incomplete) if !closed => Err(TlsError::Incomplete),
        Err(_) => Ok(side),
    }
}

/// The first certificate of a Certificate message's body (TLS 1.2).
fn first_certificate(body: &[u8]) -> Option<&[u8]> {
    let list_len = u32::from_be_bytes([0, *body.first()?, *body.get(1)?, *body.get(2)?]) as usize;
    let list = body.get(3..3 + list_len)?;
    let len = u32::from_be_bytes([0, *list.first()?, *list.get(1)?, *list.get(2)?]) as usize;
    list.get(3..3 + len)
}

/// Writes a ClientHello record (for tests, the traffic generator and the
/// benchmarks): `versions` empty means no supported_versions extension.
pub fn build_client_hello(
    random: [u8; 32],
    ciphers: &[u16],
    sni: Option<&str>,
    alpn: &[&str],
    versions: &[u16],
    groups: &[u16],
) -> Vec<u8> {
    let mut exts = Vec::new();
    let mut ext = |t: u16, body: &[u8]| {
        exts.extend_from_slice(&t.to_be_bytes());
        exts.extend_from_slice(&(body.len() as u16).to_be_bytes());
        exts.extend_from_slice(body);
    };
    if let Some(name) = sni {
        let mut b = Vec::new();
        b.extend_from_slice(&((name.len() + 3) as u16).to_be_bytes());
        b.push(0);
        b.extend_from_slice(&(name.len() as u16).to_be_bytes());
        b.extend_from_slice(name.as_bytes());
        ext(EXT_SERVER_NAME, &b);
    }
    ext(23, &[]); // extended_master_secret
    ext(0xff01, &[0]); // renegotiation_info
    let mut g = ((groups.len() * 2) as u16).to_be_bytes().to_vec();
    groups
        .iter()
        .for_each(|v| g.extend_from_slice(&v.to_be_bytes()));
    ext(EXT_SUPPORTED_GROUPS, &g);
    ext(EXT_EC_POINT_FORMATS, &[1, 0]);
    if !alpn.is_empty() {
        let mut list = Vec::new();
        for a in alpn {
            list.push(a.len() as u8);
            list.extend_from_slice(a.as_bytes());
        }
        let mut b = (list.len() as u16).to_be_bytes().to_vec();
        b.extend_from_slice(&list);
        ext(EXT_ALPN, &b);
    }
    let sigs: [u16; 8] = [
        0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601,
    ];
    let mut b = 16u16.to_be_bytes().to_vec();
    sigs.iter()
        .for_each(|v| b.extend_from_slice(&v.to_be_bytes()));
    ext(EXT_SIGNATURE_ALGORITHMS, &b);
    if !versions.is_empty() {
        let mut b = vec![(versions.len() * 2) as u8];
        versions
            .iter()
            .for_each(|v| b.extend_from_slice(&v.to_be_bytes()));
        ext(EXT_SUPPORTED_VERSIONS, &b);
        // key_share: one X25519 share, as a TLS 1.3 client sends.
        let mut ks = 36u16.to_be_bytes().to_vec();
        ks.extend_from_slice(&29u16.to_be_bytes());
        ks.extend_from_slice(&32u16.to_be_bytes());
        ks.extend_from_slice(&random);
        ext(51, &ks);
    }
    let mut body = Vec::new();
    body.extend_from_slice(&0x0303u16.to_be_bytes());
    body.extend_from_slice(&random);
    body.push(32);
    body.extend_from_slice(&random);
    body.extend_from_slice(&((ciphers.len() * 2) as u16).to_be_bytes());
    ciphers
        .iter()
        .for_each(|v| body.extend_from_slice(&v.to_be_bytes()));
    body.extend_from_slice(&[1, 0]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    record(HS_CLIENT_HELLO, &body, 0x0301)
}

/// Writes a ServerHello record (`tls13`: with supported_versions 1.3),
/// followed for TLS 1.2 by a Certificate record holding `cert` when given.
pub fn build_server_hello(
    random: [u8; 32],
    cipher: u16,
    tls13: bool,
    alpn: Option<&str>,
    cert: Option<&[u8]>,
) -> Vec<u8> {
    let mut exts = Vec::new();
    if tls13 {
        exts.extend_from_slice(&[0, 43, 0, 2, 3, 4]);
        exts.extend_from_slice(&[0, 51, 0, 36, 0, 29, 0, 32]);
        exts.extend_from_slice(&random);
    }
    if let Some(a) = alpn {
        exts.extend_from_slice(&EXT_ALPN.to_be_bytes());
        exts.extend_from_slice(&((a.len() + 3) as u16).to_be_bytes());
        exts.extend_from_slice(&((a.len() + 1) as u16).to_be_bytes());
        exts.push(a.len() as u8);
        exts.extend_from_slice(a.as_bytes());
    }
    let mut body = Vec::new();
    body.extend_from_slice(&0x0303u16.to_be_bytes());
    body.extend_from_slice(&random);
    body.push(32);
    body.extend_from_slice(&random);
    body.extend_from_slice(&cipher.to_be_bytes());
    body.push(0);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut out = record(HS_SERVER_HELLO, &body, 0x0303);
    if tls13 {
        // ChangeCipherSpec, then what follows is encrypted.
        out.extend_from_slice(&[20, 3, 3, 0, 1, 1]);
    } else if let Some(c) = cert {
        let mut b = Vec::new();
        let l = c.len() + 3;
        b.extend_from_slice(&(l as u32).to_be_bytes()[1..]);
        b.extend_from_slice(&(c.len() as u32).to_be_bytes()[1..]);
        b.extend_from_slice(c);
        out.extend_from_slice(&record(HS_CERTIFICATE, &b, 0x0303));
        // ServerHelloDone.
        out.extend_from_slice(&record(14, &[], 0x0303));
    }
    out
}

/// A handshake record holding one message.
fn record(hs_type: u8, body: &[u8], version: u16) -> Vec<u8> {
    let mut r = vec![CONTENT_HANDSHAKE];
    r.extend_from_slice(&version.to_be_bytes());
    r.extend_from_slice(&((body.len() + 4) as u16).to_be_bytes());
    r.push(hs_type);
    r.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    r.extend_from_slice(body);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chrome_like() -> Vec<u8> {
        build_client_hello(
            [7; 32],
            &[0x1a1a, 0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f],
            Some("www.example.org"),
            &["h2", "http/1.1"],
            &[0x2a2a, 0x0304, 0x0303],
            &[0x3a3a, 29, 23, 24],
        )
    }

    #[test]
    fn client_hello_fields_and_fingerprints() {
        let mut ch = ClientHello::default();
        let mut scratch = Vec::new();
        ch.parse_stream(&chrome_like(), &mut scratch).unwrap();
        assert_eq!(ch.sni.as_deref(), Some("www.example.org"));
        assert_eq!(ch.alpn, ["h2", "http/1.1"]);
        assert_eq!(ch.max_version(), 0x0304);
        assert_eq!(
            ch.ja3_string(),
            "771,4865-4866-4867-49195-49199,0-23-65281-10-11-16-13-43-51,29-23-24,0"
        );
        assert_eq!(ch.ja3().len(), 32);
        let ja4 = ch.ja4();
        assert!(ja4.starts_with("t13d0509h2_"), "{ja4}");
        assert_eq!(ja4.len(), 36);
    }

    #[test]
    fn split_and_truncated_hellos() {
        let rec = chrome_like();
        let mut ch = ClientHello::default();
        let mut scratch = Vec::new();
        for n in 0..rec.len() {
            assert_eq!(
                ch.parse_stream(&rec[..n], &mut scratch),
                Err(TlsError::Incomplete),
                "{n}"
            );
        }
        // The same message over two records.
        let body = &rec[5..];
        let mut two = vec![22, 3, 1, 0, 10];
        two.extend_from_slice(&body[..10]);
        two.extend_from_slice(&[22, 3, 1]);
        two.extend_from_slice(&((body.len() - 10) as u16).to_be_bytes());
        two.extend_from_slice(&body[10..]);
        ch.parse_stream(&two, &mut scratch).unwrap();
        assert_eq!(ch.sni.as_deref(), Some("www.example.org"));
        assert_eq!(
            ch.parse_stream(b"GET / HTTP/1.1\r\n", &mut scratch),
            Err(TlsError::NotTls)
        );
    }

    #[test]
    fn server_sides() {
        let mut scratch = Vec::new();
        let s = build_server_hello([1; 32], 0x1301, true, Some("h2"), None);
        let side = server_side(&s, &mut scratch).unwrap();
        assert_eq!(side.hello.negotiated(), 0x0304);
        assert_eq!(side.hello.alpn.as_deref(), Some("h2"));
        let cert = crate::x509::build_test_certificate("example.org", "Test CA");
        let s = build_server_hello([1; 32], 0xc02f, false, None, Some(&cert));
        for n in 0..s.len() - 9 {
            assert!(server_side(&s[..n], &mut scratch).is_err(), "{n}");
        }
        let side = server_side(&s, &mut scratch).unwrap();
        assert_eq!(side.hello.cipher, 0xc02f);
        let c = side.certificate.unwrap();
        assert_eq!(c.subject, "CN=example.org");
        assert_eq!(c.issuer, "CN=Test CA");
    }

    #[test]
    fn grease() {
        assert!(is_grease(0x0a0a) && is_grease(0xfafa));
        assert!(!is_grease(0x0a1a) && !is_grease(0x1301));
    }
}
