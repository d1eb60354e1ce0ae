//! Base64url without padding (RFC 4648 §5): the printable form of encrypted
//! names. Its alphabet has no `~`, `/`, `.` or space, so the output is safe
//! in paths, CSV and URLs. Decoding is strict (canonical text only), so an
//! altered name is rejected here rather than decrypted to something else.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        // A chunk of k bytes needs k + 1 characters.
        for i in 0..=chunk.len() {
            let sextet = (n >> (18 - 6 * i)) & 63;
            out.push(char::from(ALPHABET[sextet as usize]));
        }
    }
    out
}

fn value(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// `None` for anything [`encode`] cannot have produced.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.as_bytes();
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 2);
    for chunk in text.chunks(4) {
        // One character carries only 6 bits: not a whole byte.
        if chunk.len() == 1 {
            return None;
        }
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c)? << (18 - 6 * i);
        }
        let bytes = chunk.len() - 1;
        // Bits past the last whole byte must be zero, else two texts would
        // decode to the same bytes.
        if n & (0x00ff_ffff >> (8 * bytes)) != 0 {
            return None;
        }
        out.extend_from_slice(&n.to_be_bytes()[1..=bytes]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors() {
        // RFC 4648 §10, without the padding.
        let cases = [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, coded) in cases {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).as_deref(), Some(plain.as_bytes()));
        }
    }

    #[test]
    fn url_alphabet() {
        assert_eq!(encode(&[0xfb, 0xff, 0xbf]), "-_-_");
        assert_eq!(decode("-_-_"), Some(vec![0xfb, 0xff, 0xbf]));
    }

    #[test]
    fn round_trips_every_length() {
        let data: Vec<u8> = (0..=255u8).collect();
        for len in 0..data.len() {
            let text = encode(&data[..len]);
            assert_eq!(text.len(), (len * 4).div_ceil(3));
            assert_eq!(decode(&text).as_deref(), Some(&data[..len]));
        }
    }

    #[test]
    fn rejects_what_encode_never_writes() {
        for bad in [
            "A", "Zm9vY", "Zg==", "Zm9v+g", "Zm9v/g", "Zh", "Zm9", "Zm é", "~Zg",
        ] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
