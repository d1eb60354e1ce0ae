//! SSH's wire encoding (RFC 4251): big-endian u32, and strings as a u32
//! length then the bytes.

use crate::Error;

#[derive(Default)]
pub(crate) struct Writer(Vec<u8>);

impl Writer {
    pub(crate) fn raw(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn string(&mut self, b: &[u8]) {
        self.u32(u32::try_from(b.len()).unwrap_or(u32::MAX));
        self.raw(b);
    }

    pub(crate) fn into_inner(self) -> Vec<u8> {
        self.0
    }
}

pub(crate) struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Reader<'a> {
        Reader(b)
    }

    fn short(what: &str) -> Error {
        Error::Malformed(format!(
            "it ends inside its {what}: it is cut short or damaged"
        ))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, Error> {
        let (head, rest) = self
            .0
            .split_first_chunk::<4>()
            .ok_or_else(|| Self::short(what))?;
        self.0 = rest;
        Ok(u32::from_be_bytes(*head))
    }

    pub(crate) fn bytes(&mut self, what: &str) -> Result<&'a [u8], Error> {
        let n = self.u32(what)? as usize;
        if n > self.0.len() {
            return Err(Self::short(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    pub(crate) fn utf8(&mut self, what: &str) -> Result<String, Error> {
        let b = self.bytes(what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| Error::Malformed(format!("its {what} is not text")))
    }

    pub(crate) fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Error> {
        let b = self.bytes(what)?;
        b.try_into()
            .map_err(|_| Error::Malformed(format!("its {what} is {} bytes, not {N}", b.len())))
    }

    /// Nothing may follow.
    pub(crate) fn end(&self, what: &str) -> Result<(), Error> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(Error::Malformed(format!(
                "{} bytes follow the end of its {what}",
                self.0.len()
            )))
        }
    }
}
