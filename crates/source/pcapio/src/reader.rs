//! The chunking trace reader: opening a trace (compression, container,
//! file header) and cutting it into chunks of whole records here; the
//! chunks' types in `chunk`, classic pcap records in `pcap`, pcapng blocks
//! in `pcapng`.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wire::LinkType;

use crate::error::{ReadError, ReadErrorKind};
use crate::mapguard::GuardedMap;

mod chunk;
mod pcap;
mod pcapng;

pub use chunk::{Chunk, ChunkData, FrameDesc};
use pcap::scan_pcap_records;

/// Largest captured frame accepted from a pcap record, unless the file's
/// snap length asks for more (libpcap's own ceiling is 256 KiB).
pub const MAX_FRAME_LEN: u32 = 256 * 1024;
/// Largest pcapng block accepted. Bounds the memory one block may claim.
pub const MAX_BLOCK_LEN: u32 = 16 * 1024 * 1024;

/// Chunk buffers kept for reuse.
const MAX_SPARE_CHUNKS: usize = 32;

const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;
const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
const PCAP_MAGIC_MODIFIED: u32 = 0xa1b2_cd34;
const PCAPNG_SHB: u32 = 0x0a0d_0d0a;
const PCAPNG_BOM: u32 = 0x1a2b_3c4d;

/// How the trace bytes are compressed on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    Lz4,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
        }
    }
}

/// The container format of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    Pcap {
        big_endian: bool,
        nanosecond: bool,
        /// The "modified" format with 24-byte record headers.
        modified: bool,
        link: LinkType,
        snaplen: u32,
    },
    PcapNg,
}

impl Container {
    pub fn name(&self) -> &'static str {
        match self {
            Container::Pcap { .. } => "pcap",
            Container::PcapNg => "pcapng",
        }
    }
}

/// An interface as the trace describes it. For pcap there is one; for
/// pcapng one per Interface Description Block, numbered across sections in
/// the order they appear.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceInfo {
    pub link: LinkType,
    pub snaplen: u32,
    pub name: Option<String>,
    pub description: Option<String>,
    /// Timestamp units per second.
    pub ts_units_per_sec: u64,
    /// Seconds added to every timestamp (`if_tsoffset`).
    pub ts_offset_s: i64,
    /// Packets the capturing system reported dropped for this interface
    /// (pcapng Interface Statistics Blocks: `isb_ifdrop` + `isb_osdrop`).
    pub dropped: Option<u64>,
    /// Packets the capturing system reported received (`isb_ifrecv`).
    pub received: Option<u64>,
}

/// Tunables of a [`TraceReader`].
#[derive(Clone, Copy, Debug)]
pub struct ReaderOptions {
    /// Bytes of trace per chunk (a chunk grows past this only to hold one
    /// record that is larger).
    pub chunk_bytes: usize,
    /// Map plain (uncompressed) regular files into memory instead of
    /// copying them through `read`: chunks are then views of the page
    /// cache, several times cheaper for large frames. A file truncated
    /// while mapped reads as zeros past its new end (not SIGBUS: see
    /// `mapguard`) and the next chunk is an error saying it shrank.
    pub mmap: bool,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            chunk_bytes: 4 << 20,
            mmap: true,
        }
    }
}

/// pcapng state of the current section.
#[derive(Debug, Default)]
struct NgSection {
    big_endian: bool,
    /// Global interface index of each of this section's interfaces.
    ifaces: Vec<u16>,
}

/// Reads a pcap or pcapng trace in validated chunks.
pub struct TraceReader {
    path: PathBuf,
    input: Box<dyn Read + Send>,
    compression: Compression,
    container: Container,
    options: ReaderOptions,
    /// Bytes read but not yet part of a chunk (an incomplete record).
    carry: Vec<u8>,
    /// Stream offset of `carry[0]`.
    offset: u64,
    eof: bool,
    /// An error found after the frames before it were handed out.
    pending: Option<ReadError>,
    finished: bool,
    interfaces: Vec<InterfaceInfo>,
    ng: NgSection,
    last_ts: i64,
    chunks: u64,
    frames: u64,
    spare: Vec<Vec<u8>>,
    /// The whole file, when it is read through a memory map, and the file
    /// (to see it shrink).
    mapped: Option<(Arc<GuardedMap>, File)>,
    /// Faults the map guard had answered when the map was made.
    faults_at_open: u64,
}

impl TraceReader {
    /// Opens a trace file, detecting compression and format.
    pub fn open(path: impl AsRef<Path>, options: ReaderOptions) -> Result<Self, ReadError> {
        let path = path.as_ref().to_path_buf();
        let io_err = |e| ReadError {
            path: path.clone(),
            offset: 0,
            decompressed: false,
            kind: ReadErrorKind::Io(e),
        };
        let file = File::open(&path).map_err(io_err)?;
        let mut head = [0u8; 4];
        let lz4 = file.read_exact_at(&mut head, 0).is_ok()
            && crate::seekable::Container::sniff(&head) == Some(crate::seekable::Container::Lz4);
        if lz4 {
            // LZ4 files as weir writes them (one frame per block, a seek
            // table at the end), read frame by frame.
            if let Some(f) = crate::seekable::SeekableFile::open(&path).map_err(io_err)?
                && !f.table.frames.is_empty()
            {
                let mut reader = Self::from_read(path.clone(), Box::new(f.into_reader()), options)?;
                reader.compression = Compression::Lz4;
                return Ok(reader);
            }
        }
        let stream = file.try_clone().map_err(io_err)?;
        let mut reader = Self::from_read(path.clone(), Box::new(stream), options)?;
        let is_file = file.metadata().map(|m| m.is_file()).unwrap_or(false);
        if options.mmap && is_file && reader.compression == Compression::None {
            // SAFETY: the map is only read. The one hazard, the file being
            // truncated under us, is what the guard answers: pages past the
            // new end read as zeros, and the reader stops with an error.
            if let Ok(map) = unsafe { GuardedMap::map(&file) } {
                let _ = map.map_ref().advise(memmap2::Advice::Sequential);
                // Headers were read through the stream; records come from
                // the map, starting where the stream stopped.
                reader.carry.clear();
                reader.faults_at_open = map.faults();
                reader.mapped = Some((Arc::new(map), file));
            }
        }
        Ok(reader)
    }

    /// Reads a trace from any byte stream (a pipe, standard input); `name`
    /// is used in messages.
    pub fn from_read(
        name: PathBuf,
        raw: Box<dyn Read + Send>,
        options: ReaderOptions,
    ) -> Result<Self, ReadError> {
        let mut raw = raw;
        let err = |kind, decompressed| ReadError {
            path: name.clone(),
            offset: 0,
            decompressed,
            kind,
        };
        // Sniff the first bytes, then put them back in front of the stream.
        let mut head = Vec::with_capacity(8);
        read_to_len(&mut raw, &mut head, 6).map_err(|e| err(ReadErrorKind::Io(e), false))?;
        if head.is_empty() {
            return Err(err(ReadErrorKind::Empty, false));
        }
        let sniffed = head.clone();
        let buffered = BufReader::with_capacity(256 * 1024, io::Cursor::new(head).chain(raw));
        let (compression, input): (Compression, Box<dyn Read + Send>) = match sniffed.as_slice() {
            [0x1f, 0x8b, ..] => (
                Compression::Gzip,
                Box::new(flate2::read::MultiGzDecoder::new(buffered)),
            ),
            [0x28, 0xb5, 0x2f, 0xfd, ..] => {
                let dec = zstd::stream::read::Decoder::with_buffer(buffered)
                    .map_err(|e| err(ReadErrorKind::Io(e), false))?;
                (Compression::Zstd, Box::new(dec))
            }
            [0xfd, b'7', b'z', b'X', b'Z', 0x00] => {
                return Err(err(
                    ReadErrorKind::Unsupported(
                        "xz-compressed; decompress it first (xz -dk FILE) or recompress with zstd"
                            .into(),
                    ),
                    false,
                ));
            }
            [b'B', b'Z', b'h', ..] => {
                return Err(err(
                    ReadErrorKind::Unsupported(
                        "bzip2-compressed; decompress it first (bunzip2 -k FILE) or recompress \
                         with zstd"
                            .into(),
                    ),
                    false,
                ));
            }
            [0x04, 0x22, 0x4d, 0x18, ..] => (
                Compression::Lz4,
                Box::new(lz4_flex::frame::FrameDecoder::new(buffered)),
            ),
            _ => (Compression::None, Box::new(buffered)),
        };
        let mut reader = TraceReader {
            path: name,
            input,
            compression,
            container: Container::PcapNg,
            options,
            carry: Vec::new(),
            offset: 0,
            eof: false,
            pending: None,
            finished: false,
            interfaces: Vec::new(),
            ng: NgSection::default(),
            last_ts: 0,
            chunks: 0,
            frames: 0,
            spare: Vec::new(),
            mapped: None,
            faults_at_open: 0,
        };
        reader.read_file_header()?;
        Ok(reader)
    }

    /// The file (or stream name) being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn compression(&self) -> Compression {
        self.compression
    }

    pub fn container(&self) -> Container {
        self.container
    }

    /// The interfaces described so far (all of them once the trace is read).
    pub fn interfaces(&self) -> &[InterfaceInfo] {
        &self.interfaces
    }

    /// Frames handed out so far.
    pub fn frames_read(&self) -> u64 {
        self.frames
    }

    /// Bytes of the trace stream consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.offset
    }

    /// Returns a chunk's buffer for reuse, so that steady reading touches no
    /// fresh memory (on some machines fresh pages cost more than the copy).
    /// Keeps as many as can be in flight in a pipeline of a few dozen chunks.
    pub fn recycle(&mut self, mut buf: Vec<u8>) {
        if self.spare.len() < MAX_SPARE_CHUNKS {
            buf.clear();
            self.spare.push(buf);
        }
    }

    fn error(&self, offset: u64, kind: ReadErrorKind) -> ReadError {
        ReadError {
            path: self.path.clone(),
            offset,
            decompressed: self.compression != Compression::None,
            kind,
        }
    }

    /// Reads into `carry` until it holds `want` bytes or the input ends.
    fn fill_carry(&mut self, want: usize) -> Result<(), ReadError> {
        if self.carry.len() >= want || self.eof {
            return Ok(());
        }
        let mut buf = std::mem::take(&mut self.carry);
        let r = read_to_len(&mut self.input, &mut buf, want);
        self.carry = buf;
        match r {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.eof = true;
                Ok(())
            }
            Err(e) => {
                let at = self.offset + self.carry.len() as u64;
                Err(self.error(at, ReadErrorKind::Io(e)))
            }
        }
    }

    fn read_file_header(&mut self) -> Result<(), ReadError> {
        self.fill_carry(24)?;
        if self.carry.len() < 4 {
            return Err(self.error(
                0,
                ReadErrorKind::Truncated {
                    what: "file header",
                    needed: 24,
                    have: self.carry.len() as u64,
                },
            ));
        }
        let magic_le = u32::from_le_bytes(self.carry[..4].try_into().unwrap_or([0; 4]));
        let magic_be = magic_le.swap_bytes();
        if magic_le == PCAPNG_SHB {
            self.container = Container::PcapNg;
            // The Section Header Block stays in `carry`; the block loop reads it.
            return Ok(());
        }
        let (big_endian, nanosecond, modified) = match (magic_le, magic_be) {
            (PCAP_MAGIC_US, _) => (false, false, false),
            (PCAP_MAGIC_NS, _) => (false, true, false),
            (PCAP_MAGIC_MODIFIED, _) => (false, false, true),
            (_, PCAP_MAGIC_US) => (true, false, false),
            (_, PCAP_MAGIC_NS) => (true, true, false),
            (_, PCAP_MAGIC_MODIFIED) => {
                return Err(self.error(
                    0,
                    ReadErrorKind::Unsupported(
                        "big-endian \"modified\" pcap is not supported".into(),
                    ),
                ));
            }
            _ => {
                let mut magic = [0u8; 4];
                magic.copy_from_slice(&self.carry[..4]);
                return Err(self.error(0, ReadErrorKind::NotATrace { magic }));
            }
        };
        if self.carry.len() < 24 {
            return Err(self.error(
                0,
                ReadErrorKind::Truncated {
                    what: "pcap file header",
                    needed: 24,
                    have: self.carry.len() as u64,
                },
            ));
        }
        let h = &self.carry[..24];
        let u32_at = |at: usize| {
            let b = [h[at], h[at + 1], h[at + 2], h[at + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let snaplen = u32_at(16);
        // The upper bits of the link-type field carry FCS information.
        let link = LinkType((u32_at(20) & 0xffff) as u16);
        self.container = Container::Pcap {
            big_endian,
            nanosecond,
            modified,
            link,
            snaplen,
        };
        self.interfaces.push(InterfaceInfo {
            link,
            snaplen,
            name: None,
            description: None,
            ts_units_per_sec: if nanosecond { 1_000_000_000 } else { 1_000_000 },
            ts_offset_s: 0,
            dropped: None,
            received: None,
        });
        self.carry.drain(..24);
        self.offset = 24;
        Ok(())
    }

    /// The next chunk of frames, `Ok(None)` at the end of the trace, or the
    /// error that stopped reading (after every frame before it was handed
    /// out in earlier chunks).
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, ReadError> {
        loop {
            if let Some(chunk) = self.try_chunk()? {
                return Ok(Some(chunk));
            }
            if self.finished {
                return Ok(None);
            }
        }
    }

    /// One round of reading: a chunk, or `None` when the round found only
    /// metadata blocks (or the end, which sets `finished`).
    fn try_chunk(&mut self) -> Result<Option<Chunk>, ReadError> {
        if let Some(e) = self.pending.take() {
            self.finished = true;
            return Err(e);
        }
        if self.finished {
            return Ok(None);
        }
        if let Some((map, _)) = self.mapped.as_ref() {
            let map = map.clone();
            self.check_not_shrunk(map.len())?;
            return self.try_chunk_mapped(map);
        }
        let target = self.options.chunk_bytes.max(64 * 1024);
        let mut data = self.spare.pop().unwrap_or_default();
        data.clear();
        data.reserve(target.max(self.carry.len()));
        data.extend_from_slice(&self.carry);
        self.carry.clear();
        let base = self.offset;
        if !self.eof {
            match read_to_len(&mut self.input, &mut data, target) {
                Ok(true) => {}
                Ok(false) => self.eof = true,
                Err(e) => {
                    let at = base + data.len() as u64;
                    self.pending = Some(self.error(at, ReadErrorKind::Io(e)));
                    self.eof = true;
                }
            }
        }
        let mut frames = Vec::with_capacity(data.len() / 80 + 1);
        let mut pos = 0usize;
        loop {
            let step = self.parse_record(&data, pos, base, &mut frames);
            match step {
                Step::Consumed(n) => pos += n,
                Step::NeedBytes(total) if data.len() - pos >= total => {
                    self.pending = Some(self.overrun(base + pos as u64, total));
                    break;
                }
                Step::NeedBytes(total) => {
                    // Nothing complete yet and more input exists: read the rest
                    // of this (possibly large, but bounded) record and go on.
                    if frames.is_empty() && !self.eof && self.pending.is_none() {
                        match read_to_len(&mut self.input, &mut data, pos + total) {
                            Ok(true) => continue,
                            Ok(false) => {
                                self.eof = true;
                                continue;
                            }
                            Err(e) => {
                                let at = base + data.len() as u64;
                                self.pending = Some(self.error(at, ReadErrorKind::Io(e)));
                                self.eof = true;
                                break;
                            }
                        }
                    }
                    if self.eof && self.pending.is_none() {
                        let have = data.len() - pos;
                        if have > 0 {
                            self.pending = Some(self.truncated(base + pos as u64, total, have));
                        }
                    }
                    break;
                }
                Step::End => break,
                Step::Fail(e) => {
                    self.pending = Some(e);
                    break;
                }
            }
        }
        self.carry.extend_from_slice(&data[pos..]);
        data.truncate(pos);
        self.offset = base + pos as u64;
        if frames.is_empty() {
            // Only metadata blocks, an error, or the end: never hand out an
            // empty chunk.
            self.recycle(data);
            if self.pending.is_none() && self.eof && self.carry.is_empty() {
                self.finished = true;
            }
            return Ok(None);
        }
        let chunk = Chunk {
            data: ChunkData::Owned(data),
            seq: self.chunks,
            first_frame: self.frames,
            frames,
        };
        self.chunks += 1;
        self.frames += chunk.frames.len() as u64;
        if self.eof && self.carry.is_empty() && self.pending.is_none() {
            self.finished = true;
        }
        Ok(Some(chunk))
    }

    /// [`Self::try_chunk`] for a mapped file: the chunk is a view of the map
    /// from where the last one ended, over whole records.
    /// A mapped file that shrank since it was mapped (or whose map met a
    /// page past the file's end) ends the reading with an error that says
    /// so, before any frame of the missing part is handed out.
    fn check_not_shrunk(&mut self, mapped: usize) -> Result<(), ReadError> {
        let Some((map, file)) = self.mapped.as_ref() else {
            return Ok(());
        };
        let now = file.metadata().map(|m| m.len()).unwrap_or(0);
        if now < mapped as u64 || map.faults() != self.faults_at_open {
            self.finished = true;
            return Err(ReadError {
                path: self.path.clone(),
                offset: self.offset,
                decompressed: false,
                kind: ReadErrorKind::Shrank {
                    was: mapped as u64,
                    now,
                },
            });
        }
        Ok(())
    }

    fn try_chunk_mapped(&mut self, map: Arc<GuardedMap>) -> Result<Option<Chunk>, ReadError> {
        let len = map.len();
        let start = self.offset as usize;
        if start >= len {
            self.finished = true;
            return Ok(None);
        }
        let target = self.options.chunk_bytes.max(64 * 1024);
        let mut end = start.saturating_add(target).min(len);
        let base = start as u64;
        let mut frames = Vec::with_capacity((end - start) / 80 + 1);
        let mut pos = 0usize;
        loop {
            let data = &map[start..end];
            let step = self.parse_record(data, pos, base, &mut frames);
            match step {
                Step::Consumed(n) => pos += n,
                Step::NeedBytes(total) if data.len() - pos >= total => {
                    self.pending = Some(self.overrun(base + pos as u64, total));
                    break;
                }
                Step::NeedBytes(total) => {
                    if end < len {
                        if frames.is_empty() {
                            // Stretch the chunk over this (bounded) record.
                            end = (start + pos).saturating_add(total).min(len);
                            continue;
                        }
                        break;
                    }
                    self.pending =
                        Some(self.truncated(base + pos as u64, total, len - start - pos));
                    break;
                }
                Step::End => break,
                Step::Fail(e) => {
                    self.pending = Some(e);
                    break;
                }
            }
        }
        self.offset = base + pos as u64;
        if frames.is_empty() {
            if self.pending.is_none() && self.offset as usize >= len {
                self.finished = true;
            }
            return Ok(None);
        }
        let chunk = Chunk {
            data: ChunkData::Mapped {
                map,
                range: start..start + pos,
            },
            seq: self.chunks,
            first_frame: self.frames,
            frames,
        };
        self.chunks += 1;
        self.frames += chunk.frames.len() as u64;
        if self.pending.is_none() && self.offset as usize >= len {
            self.finished = true;
        }
        Ok(Some(chunk))
    }

    /// Parses the record or block at `pos` of `data` (which starts at stream
    /// offset `base`), adding a descriptor to `frames` if it holds a frame.
    fn parse_record(
        &mut self,
        data: &[u8],
        pos: usize,
        base: u64,
        frames: &mut Vec<FrameDesc>,
    ) -> Step {
        match self.container {
            Container::Pcap {
                big_endian,
                nanosecond,
                modified: false,
                link,
                snaplen,
            } => {
                let limit = MAX_FRAME_LEN.max(snaplen.min(MAX_BLOCK_LEN));
                let run =
                    scan_pcap_records(data, pos, base, big_endian, nanosecond, link, limit, frames);
                if run.consumed > 0 {
                    self.last_ts = run.last_ts;
                    return Step::Consumed(run.consumed);
                }
                // The next record is incomplete, too long or the end: the
                // general path says which.
                self.parse_pcap_record(data, pos, base, frames)
            }
            Container::Pcap { .. } => self.parse_pcap_record(data, pos, base, frames),
            Container::PcapNg => self.parse_ng_block(data, pos, base, frames),
        }
    }

    /// A parser asked for bytes that are already there: reading more would
    /// never end, so the record is malformed.
    fn overrun(&self, at: u64, total: usize) -> ReadError {
        self.error(
            at,
            ReadErrorKind::Malformed(format!(
                "record (it needs {total} bytes but does not fit in them)"
            )),
        )
    }

    /// The input ended `have` bytes into a record of `needed` bytes.
    fn truncated(&self, at: u64, needed: usize, have: usize) -> ReadError {
        let what = match self.container {
            Container::Pcap { .. } => "pcap record",
            Container::PcapNg => "pcapng block",
        };
        self.error(
            at,
            ReadErrorKind::Truncated {
                what,
                needed: needed as u64,
                have: have as u64,
            },
        )
    }
}

/// What parsing at a position of a chunk found.
enum Step {
    /// A record or block of this many bytes was taken.
    Consumed(usize),
    /// The record at the position needs this many bytes in all.
    NeedBytes(usize),
    /// No more bytes at the position.
    End,
    Fail(ReadError),
}

/// Reads until `buf` holds `len` bytes; `Ok(false)` if the input ended first.
/// Reads into spare capacity without zero-filling it first.
fn read_to_len(input: &mut dyn Read, buf: &mut Vec<u8>, len: usize) -> io::Result<bool> {
    if buf.len() >= len {
        return Ok(true);
    }
    let remaining = len - buf.len();
    buf.reserve(remaining);
    // read_to_end retries interrupted reads itself.
    Read::take(input, remaining as u64).read_to_end(buf)?;
    Ok(buf.len() >= len)
}
