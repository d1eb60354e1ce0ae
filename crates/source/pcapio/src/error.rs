use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a trace could not be read (further).
#[derive(Debug)]
pub enum ReadErrorKind {
    /// The operating system refused to open or read the file.
    Io(io::Error),
    /// The file has no bytes.
    Empty,
    /// The first bytes are not a pcap or pcapng header.
    NotATrace { magic: [u8; 4] },
    /// A format weir recognises but does not read.
    Unsupported(String),
    /// The input ends inside a header or record.
    Truncated {
        what: &'static str,
        needed: u64,
        have: u64,
    },
    /// A length field claims more than any sane trace holds.
    BogusLength {
        what: &'static str,
        len: u64,
        limit: u64,
    },
    /// A header or block is malformed.
    Malformed(String),
    /// The file shrank while it was being read (truncated or rewritten).
    Shrank { was: u64, now: u64 },
}

/// An error reading a trace: which file, where in it, and what went wrong.
///
/// `offset` counts bytes of the (decompressed) trace stream. Every frame
/// before `offset` has been delivered already.
#[derive(Debug)]
pub struct ReadError {
    pub path: PathBuf,
    pub offset: u64,
    /// Whether `offset` counts decompressed bytes.
    pub decompressed: bool,
    pub kind: ReadErrorKind,
}

impl ReadError {
    /// Whether the frames read before the error are all the file had to give
    /// up to that point, i.e. the error is in the data rather than in access.
    pub fn is_data_error(&self) -> bool {
        !matches!(self.kind, ReadErrorKind::Io(_))
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        let at = if self.decompressed {
            format!("byte {} of the decompressed stream", self.offset)
        } else {
            format!("byte {}", self.offset)
        };
        match &self.kind {
            ReadErrorKind::Io(e) => write!(f, "{path}: {e} (at {at})"),
            ReadErrorKind::Empty => write!(f, "{path}: the file is empty; nothing to read"),
            ReadErrorKind::Shrank { was, now } => write!(
                f,
                "{path}: the file shrank from {was} to {now} bytes while being read (something \
                 truncated or rewrote it); every frame before {at} was read, those past byte \
                 {now} as zeros if they were still being decoded. Read a copy that nothing \
                 writes to"
            ),
            ReadErrorKind::NotATrace { magic } => write!(
                f,
                "{path}: not a pcap or pcapng file (it starts with {:02x} {:02x} {:02x} {:02x}); \
                 give a capture file, optionally gzip- or zstd-compressed",
                magic[0], magic[1], magic[2], magic[3]
            ),
            ReadErrorKind::Unsupported(what) => write!(f, "{path}: {what} (at {at})"),
            ReadErrorKind::Truncated { what, needed, have } => write!(
                f,
                "{path}: the file ends inside a {what} at {at} ({have} of {needed} bytes present); \
                 every frame before it was read. A capture that was cut off while being \
                 written looks like this"
            ),
            ReadErrorKind::BogusLength { what, len, limit } => write!(
                f,
                "{path}: {what} of {len} bytes at {at} exceeds the limit of {limit} bytes; \
                 the file is corrupt from here on and every frame before it was read"
            ),
            ReadErrorKind::Malformed(what) => write!(
                f,
                "{path}: malformed {what} at {at}; the file is corrupt from here on and every \
                 frame before it was read"
            ),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ReadErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}
