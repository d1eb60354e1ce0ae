//! Secret key files, as `weir anonymize --key` reads them (`--sign-key`
//! takes an OpenSSH Ed25519 key instead: `crates/base/sshsig`).
//!
//! A key file holds either at least 32 raw random bytes, or text with at
//! least 64 hex digits (whitespace anywhere is ignored, so `xxd -p` output
//! and a trailing newline are fine). The two are told apart by content: a
//! file that is all hex digits and whitespace is hex; any other text (UTF-8
//! without control characters) is refused, since it would be a passphrase,
//! too weak to be a key; anything else is taken as raw bytes. 32 random
//! bytes read as text about once in 5·10¹⁰ tries, so real raw keys are not
//! refused.

/// The least key length: 256 bits.
pub const MIN_KEY_BYTES: usize = 32;

/// Why a key file's contents are not a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyFileError {
    #[error("the key is too short: {len} raw bytes, at least 32 are needed")]
    ShortRaw { len: usize },
    #[error("the key is too short: {digits} hex digits, at least 64 (32 bytes) are needed")]
    ShortHex { digits: usize },
    #[error("the key holds an odd number of hex digits ({digits}), so not whole bytes")]
    OddHex { digits: usize },
    #[error(
        "the key is text but not hex digits; a passphrase is too weak to be a key, it must be \
         at least 32 random bytes, raw or as hex"
    )]
    Text,
}

/// The key bytes of a key file's contents.
pub fn parse(bytes: &[u8]) -> Result<Vec<u8>, KeyFileError> {
    let digits: Vec<u8> = bytes
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if !digits.is_empty() && digits.iter().all(u8::is_ascii_hexdigit) {
        if digits.len() % 2 != 0 {
            return Err(KeyFileError::OddHex {
                digits: digits.len(),
            });
        }
        if digits.len() < 2 * MIN_KEY_BYTES {
            return Err(KeyFileError::ShortHex {
                digits: digits.len(),
            });
        }
        let text = std::str::from_utf8(&digits).unwrap_or_default();
        return crate::digest::from_hex(text).ok_or(KeyFileError::Text);
    }
    // Checked after the hex case so that a short file of random bytes gets
    // the length error, which is the useful one, not the text error.
    if bytes.len() < MIN_KEY_BYTES {
        return Err(KeyFileError::ShortRaw { len: bytes.len() });
    }
    if is_text(bytes) {
        return Err(KeyFileError::Text);
    }
    Ok(bytes.to_vec())
}

/// UTF-8 with no control characters but whitespace: what a person types.
fn is_text(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes).is_ok_and(|s| {
        s.chars()
            .all(|c| !c.is_control() || c.is_ascii_whitespace())
    })
}
