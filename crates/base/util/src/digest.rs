//! SHA-256 digests of whole files, taken as the bytes are written.
//!
//! SHA-256 because anyone handed a file can check it with `sha256sum`; the
//! `sha2` crate uses the CPU's SHA extensions where it has them.

use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;

use sha2::{Digest as _, Sha256};

/// A file's length and SHA-256.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileDigest {
    pub bytes: u64,
    pub sha256: [u8; 32],
}

impl FileDigest {
    /// The digest as 64 lowercase hex digits, as `sha256sum` prints it.
    pub fn hex(&self) -> String {
        to_hex(&self.sha256)
    }
}

impl fmt::Display for FileDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes, sha256 {}", self.bytes, self.hex())
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
    sha: Sha256,
    bytes: u64,
}

impl Hasher {
    pub fn new() -> Hasher {
        Hasher::default()
    }

    pub fn update(&mut self, data: &[u8]) {
        self.sha.update(data);
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
            sha256: self.sha.finalize().into(),
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
        assert_eq!(
            d.hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            Hasher::new().finish().hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
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
