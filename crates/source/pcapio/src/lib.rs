//! Reading and writing packet traces.
//!
//! [`TraceReader`] reads pcap (µs or ns, either byte order, and the
//! "modified" Kuznetzov variant) and pcapng (several sections and
//! interfaces, any `if_tsresol`, either byte order), plain or through gzip or
//! zstd decompression detected from the content. It hands out [`Chunk`]s:
//! a few megabytes of whole, validated records plus a descriptor per frame,
//! so that parsing can be spread over worker threads while one thread reads.
//!
//! Hostile input is contained: every length is checked against a limit
//! before any memory is set aside for it, and an error names the file and
//! the byte offset, after every frame before it has been delivered.
//!
//! [`PcapWriter`] writes nanosecond pcap.

mod error;
pub mod fetch;
mod mapguard;
mod reader;
mod writer;

pub use error::{ReadError, ReadErrorKind};
pub use reader::{
    Chunk, ChunkData, Compression, Container, FrameDesc, InterfaceInfo, MAX_BLOCK_LEN,
    MAX_FRAME_LEN, ReaderOptions, TraceReader,
};
pub use writer::{PCAP_HEADER_LEN, PCAP_RECORD_HEADER_LEN, PcapWriter};
pub mod outfile;
pub mod repair;
pub mod retention;
pub mod seekable;
pub mod spool;
