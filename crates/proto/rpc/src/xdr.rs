//! A bounds-checked XDR (RFC 4506) reader: every read is a 4-byte-aligned
//! big-endian item; a read past the end gives `None` and leaves the reader
//! where it was, so a truncated message decodes as far as it goes.

#[derive(Clone, Copy, Debug)]
pub struct Xdr<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Xdr<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Xdr { buf, pos: 0 }
    }

    /// Bytes read so far.
    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    pub fn u32(&mut self) -> Option<u32> {
        let b = self.buf.get(self.pos..self.pos + 4)?;
        self.pos += 4;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Option<u64> {
        let b = self.buf.get(self.pos..self.pos + 8)?;
        self.pos += 8;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_be_bytes(a))
    }

    pub fn bool(&mut self) -> Option<bool> {
        self.u32().map(|v| v != 0)
    }

    /// `n` bytes of fixed-length opaque data (padded to 4).
    pub fn fixed(&mut self, n: usize) -> Option<&'a [u8]> {
        let padded = n.checked_add(3)? & !3;
        if padded > self.remaining() {
            return None;
        }
        let b = &self.buf[self.pos..self.pos + n];
        self.pos += padded;
        Some(b)
    }

    /// Variable-length opaque data (length, bytes, padding).
    pub fn opaque(&mut self) -> Option<&'a [u8]> {
        let save = self.pos;
        let n = self.u32()? as usize;
        let r = self.fixed(n);
        if r.is_none() {
            self.pos = save;
        }
        r
    }

    /// Variable-length opaque data of at most `max` bytes.
    pub fn opaque_max(&mut self, max: usize) -> Option<&'a [u8]> {
        let save = self.pos;
        let b = self.opaque()?;
        if b.len() > max {
            self.pos = save;
            return None;
        }
        Some(b)
    }

    /// Skips opaque data whose bytes need not be present: the length says
    /// how far, and a message cut short (bounded reassembly) just ends.
    pub fn skip_opaque(&mut self) -> Option<u32> {
        let n = self.u32()?;
        let padded = (n as usize).saturating_add(3) & !3;
        self.pos = self.pos.saturating_add(padded).min(self.buf.len());
        Some(n)
    }

    pub fn skip(&mut self, n: usize) -> Option<()> {
        if n > self.remaining() {
            return None;
        }
        self.pos += n;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_the_end_without_moving() {
        let b = [
            0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o', 0, 0, 0, 0, 0, 0, 9,
        ];
        let mut x = Xdr::new(&b);
        assert_eq!(x.opaque(), Some(&b"hello"[..]));
        assert_eq!(x.pos(), 12);
        assert_eq!(x.u64(), None);
        assert_eq!(x.pos(), 12);
        assert_eq!(x.u32(), Some(9));
        assert_eq!(x.u32(), None);
        let mut y = Xdr::new(&b[..8]);
        assert_eq!(y.opaque(), None);
        assert_eq!(y.pos(), 0);
        let huge = [0xff, 0xff, 0xff, 0xff];
        assert_eq!(Xdr::new(&huge).opaque(), None);
        assert_eq!(Xdr::new(&huge).fixed(usize::MAX), None);
    }
}
