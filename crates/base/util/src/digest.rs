//! BLAKE3 digests of whole files, taken as the bytes are written.
//!
//! BLAKE3 rather than SHA-256 because a capture's writer digests every
//! byte it writes: with the CPU's SHA extensions SHA-256 still costs about
//! 0.6 s of a core per GB, which at 10 Gb/s is most of a core, where
//! BLAKE3's SIMD code costs a fifth of that (docs/BENCHMARKS.md,
//! "Integrity"). Anyone handed a file checks it with `b3sum`, packaged
//! by the common distributions.

use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;

/// A file's length and BLAKE3 digest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileDigest {
    pub bytes: u64,
    pub blake3: [u8; 32],
}

impl FileDigest {
    /// The digest as 64 lowercase hex digits, as `b3sum` prints it.
    pub fn hex(&self) -> String {
        to_hex(&self.blake3)
    }
}

impl fmt::Display for FileDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes, blake3 {}", self.bytes, self.hex())
    }
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

/// The bytes of `hex` (any case), if it is whole hex bytes.
pub fn from_hex(hex: &str) -> Option<Vec<u8>> {
    let hex = hex.as_bytes();
    if hex.len() % 2 != 0 {
        return None;
    }
    hex.chunks_exact(2)
        .map(|p| Some((hex_digit(p[0])? << 4) | hex_digit(p[1])?))
        .collect()
}

fn hex_digit(d: u8) -> Option<u8> {
    match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        b'A'..=b'F' => Some(d - b'A' + 10),
        _ => None,
    }
}

/// A running digest of bytes appended to a file, in order.
#[derive(Clone, Default)]
pub struct Hasher {
    hash: blake3::Hasher,
    bytes: u64,
}

impl Hasher {
    pub fn new() -> Hasher {
        Hasher::default()
    }

    pub fn update(&mut self, data: &[u8]) {
        self.hash.update(data);
        self.bytes += data.len() as u64;
    }

    /// Bytes taken so far.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    pub fn finish(self) -> FileDigest {
        FileDigest {
            bytes: self.bytes,
            blake3: self.hash.finalize().into(),
        }
    }
}

/// A writer that digests every byte that passes through it to `inner`.
/// Only bytes `inner` accepted are digested, so after an error the digest
/// still describes exactly what was written.
pub struct DigestWriter<W> {
    inner: W,
    hasher: Hasher,
}

impl<W: Write> DigestWriter<W> {
    pub fn new(inner: W) -> DigestWriter<W> {
        DigestWriter {
            inner,
            hasher: Hasher::new(),
        }
    }

    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The inner writer and the digest of what went to it.
    pub fn into_parts(self) -> (W, FileDigest) {
        (self.inner, self.hasher.finish())
    }
}

impl<W: Write> Write for DigestWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Reads `path` to its end and digests it.
pub fn digest_file(path: &Path) -> io::Result<FileDigest> {
    let mut f = std::fs::File::open(path)?;
    let mut hasher = Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_match_the_standard_test_vectors() {
        let mut h = Hasher::new();
        h.update(b"ab");
        h.update(b"c");
        let d = h.finish();
        assert_eq!(d.bytes, 3);
        // The BLAKE3 paper's test vectors for "abc" and no input.
        assert_eq!(
            d.hex(),
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
        assert_eq!(
            Hasher::new().finish().hex(),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
    }

    #[test]
    fn a_digest_writer_and_a_read_back_agree() {
        let dir = std::env::temp_dir().join(format!("weir-digest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut w = DigestWriter::new(std::fs::File::create(&path).unwrap());
        for i in 0..1000u32 {
            w.write_all(&i.to_le_bytes().repeat(i as usize % 97))
                .unwrap();
        }
        let (_, written) = w.into_parts();
        assert_eq!(written, digest_file(&path).unwrap());
        assert_eq!(written.bytes, std::fs::metadata(&path).unwrap().len());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn hex_goes_both_ways() {
        assert_eq!(
            from_hex(&to_hex(&[0, 1, 0xab, 0xff])).unwrap(),
            [0, 1, 0xab, 0xff]
        );
        assert_eq!(from_hex("ABcd").unwrap(), [0xab, 0xcd]);
        assert!(from_hex("abc").is_none());
        assert!(from_hex("zz").is_none());
    }
}
