//! Compressed pcap files that can be read from the middle.
//!
//! A compressed capture file is a run of independent frames, one per
//! staging block (so a pcap record never spans two frames), followed by a
//! seek table: zstd's published *seekable format*, a skippable frame that
//! lists each frame's compressed and decompressed size and ends in a
//! footer with a magic number. Skippable frames exist with the same magic
//! range in zstd and in LZ4's frame format, so one table serves `.pcap.zst`
//! and `.pcap.lz4`, and the stock `zstd -d` and `lz4 -d` ignore it and
//! decompress the file to plain pcap.
//!
//! A reader that knows the table decompresses only the frame that holds a
//! record: offsets into the decompressed stream (what packet records keep
//! in `pcap_offset`) map to a frame by the cumulative sizes. A file without
//! a table (its writer was killed) is walked frame by frame instead, which
//! is also how `weir recover` finds where the last whole frame ends.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use util::storage::ReadAt;

/// Magic of the skippable frame that carries the seek table.
pub const SEEK_TABLE_MAGIC: u32 = 0x184D_2A5E;
/// Magic at the very end of a seekable file.
pub const SEEKABLE_FOOTER_MAGIC: u32 = 0x8F92_EAB1;
const ZSTD_MAGIC: u32 = 0xFD2F_B528;
const LZ4_MAGIC: u32 = 0x184D_2204;
const FOOTER_LEN: usize = 9;
/// Largest frame weir accepts when reading (staging blocks are far smaller;
/// a bigger claimed size means a damaged or hostile file).
pub const MAX_FRAME_DECOMPRESSED: u64 = 64 << 20;

/// The compressed container of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    Zstd,
    Lz4,
}

impl Container {
    /// File name suffix after `.pcap`.
    pub fn suffix(self) -> &'static str {
        match self {
            Container::Zstd => ".zst",
            Container::Lz4 => ".lz4",
        }
    }

    /// The container a file's first bytes announce, if any.
    pub fn sniff(head: &[u8]) -> Option<Container> {
        let magic = u32::from_le_bytes(head.get(..4)?.try_into().ok()?);
        match magic {
            ZSTD_MAGIC => Some(Container::Zstd),
            LZ4_MAGIC => Some(Container::Lz4),
            _ => None,
        }
    }
}

/// What the pcap writer compresses with (`--compress`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Plain pcap.
    None,
    Lz4,
    /// zstd at a fixed level (negative levels are zstd's fast modes).
    Zstd(i32),
    /// zstd, the level chosen per block from how far the writer is behind:
    /// strong when idle, faster as the backlog grows, down to storing the
    /// block uncompressed in a zstd frame.
    Auto,
}

impl Codec {
    /// The container its files are written in.
    pub fn container(self) -> Option<Container> {
        match self {
            Codec::None => None,
            Codec::Lz4 => Some(Container::Lz4),
            Codec::Zstd(_) | Codec::Auto => Some(Container::Zstd),
        }
    }
}

impl FromStr for Codec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "--compress {s}: expected none, lz4, zstd, zstd:LEVEL (LEVEL from -7 to 19) or \
                 auto"
            )
        };
        Ok(match s {
            "none" => Codec::None,
            "lz4" => Codec::Lz4,
            "zstd" => Codec::Zstd(3),
            "auto" => Codec::Auto,
            _ => {
                let level = s
                    .strip_prefix("zstd:")
                    .and_then(|l| l.parse::<i32>().ok())
                    .ok_or_else(bad)?;
                if !(-7..=19).contains(&level) || level == 0 {
                    return Err(bad());
                }
                Codec::Zstd(level)
            }
        })
    }
}

impl std::fmt::Display for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Codec::None => f.write_str("none"),
            Codec::Lz4 => f.write_str("lz4"),
            Codec::Zstd(l) => write!(f, "zstd:{l}"),
            Codec::Auto => f.write_str("auto"),
        }
    }
}

/// How one frame was compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// Copied into a zstd frame of raw blocks: memcpy speed.
    Stored,
    Lz4,
    Zstd(i32),
}

impl Method {
    /// A short name: `stored`, `lz4`, `zstd:3`.
    /// A number for tables: the zstd level, 0 for stored, 100 for LZ4.
    pub fn code(self) -> i16 {
        match self {
            Method::Stored => 0,
            Method::Lz4 => 100,
            Method::Zstd(l) => l as i16,
        }
    }

    pub fn from_code(code: i16) -> Method {
        match code {
            0 => Method::Stored,
            100 => Method::Lz4,
            l => Method::Zstd(l as i32),
        }
    }

    pub fn name(self) -> String {
        match self {
            Method::Stored => "stored".into(),
            Method::Lz4 => "lz4".into(),
            Method::Zstd(l) => format!("zstd:{l}"),
        }
    }
}

/// `--compress auto`'s ladder, strongest first, and the share of staging
/// in use (backlog) at which each rung is left for the next. zstd's fast
/// levels (negative) run at LZ4-class speed; the last rung is a plain copy.
pub const AUTO_LADDER: [(Method, f64); 6] = [
    (Method::Zstd(6), 0.01),
    (Method::Zstd(3), 0.03),
    (Method::Zstd(1), 0.08),
    (Method::Zstd(-3), 0.20),
    (Method::Zstd(-7), 0.40),
    (Method::Stored, f64::INFINITY),
];

/// The rung of [`AUTO_LADDER`] for a backlog (0 = idle, 1 = staging full).
pub fn auto_method(backlog: f64) -> Method {
    AUTO_LADDER
        .iter()
        .find(|(_, upto)| backlog < *upto)
        .map_or(Method::Stored, |(m, _)| *m)
}

/// Compresses blocks into independent frames, appending them to a buffer.
pub struct FrameEncoder {
    zstd: Option<(zstd::bulk::Compressor<'static>, i32)>,
    scratch: Vec<u8>,
}

impl Default for FrameEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameEncoder {
    pub fn new() -> FrameEncoder {
        FrameEncoder {
            zstd: None,
            scratch: Vec::new(),
        }
    }

    /// Appends `input` to `out` as one frame; returns the frame's length.
    pub fn encode(&mut self, method: Method, input: &[u8], out: &mut Vec<u8>) -> io::Result<usize> {
        let start = out.len();
        match method {
            Method::Stored => zstd_stored_frame(input, out),
            Method::Zstd(level) => {
                let c = match &mut self.zstd {
                    Some((c, l)) if *l == level => c,
                    Some((c, l)) => {
                        c.set_compression_level(level)?;
                        *l = level;
                        c
                    }
                    None => {
                        &mut self
                            .zstd
                            .insert((zstd::bulk::Compressor::new(level)?, level))
                            .0
                    }
                };
                self.scratch.clear();
                self.scratch
                    .reserve(zstd::zstd_safe::compress_bound(input.len()));
                c.compress_to_buffer(input, &mut self.scratch)?;
                out.extend_from_slice(&self.scratch);
            }
            Method::Lz4 => {
                use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
                let info = FrameInfo::new()
                    .block_size(BlockSize::Max4MB)
                    .block_mode(BlockMode::Independent)
                    .content_size(Some(input.len() as u64));
                let mut enc = FrameEncoder::with_frame_info(info, &mut *out);
                io::Write::write_all(&mut enc, input)?;
                enc.finish().map_err(io::Error::other)?;
            }
        }
        Ok(out.len() - start)
    }
}

/// A zstd frame holding `input` in raw (uncompressed) blocks: what a
/// decompressor needs, written at memory speed.
fn zstd_stored_frame(input: &[u8], out: &mut Vec<u8>) {
    const MAX_BLOCK: usize = 128 << 10;
    out.extend_from_slice(&ZSTD_MAGIC.to_le_bytes());
    // Single segment, 8-byte content size, no checksum, no dictionary.
    out.push(0b1110_0000);
    out.extend_from_slice(&(input.len() as u64).to_le_bytes());
    let mut chunks = input.chunks(MAX_BLOCK).peekable();
    if chunks.peek().is_none() {
        // An empty frame still needs one (last, empty) block.
        out.extend_from_slice(&1u32.to_le_bytes()[..3]);
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none() as u32;
        // Block header: last flag, type 0 (raw), size.
        let header = last | ((chunk.len() as u32) << 3);
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.extend_from_slice(chunk);
    }
}

/// One frame's place in the compressed file and in the pcap stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameEntry {
    pub compressed_at: u64,
    pub compressed_len: u32,
    pub decompressed_at: u64,
    pub decompressed_len: u32,
}

/// The frames of a file, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeekTable {
    pub frames: Vec<FrameEntry>,
}

impl SeekTable {
    /// Adds the next frame.
    pub fn push(&mut self, compressed_len: u32, decompressed_len: u32) {
        let (c, d) = self.frames.last().map_or((0, 0), |f| {
            (
                f.compressed_at + f.compressed_len as u64,
                f.decompressed_at + f.decompressed_len as u64,
            )
        });
        self.frames.push(FrameEntry {
            compressed_at: c,
            compressed_len,
            decompressed_at: d,
            decompressed_len,
        });
    }

    /// Bytes of frames (without the table).
    pub fn compressed_len(&self) -> u64 {
        self.frames
            .last()
            .map_or(0, |f| f.compressed_at + f.compressed_len as u64)
    }

    /// Bytes of the decompressed stream.
    pub fn decompressed_len(&self) -> u64 {
        self.frames
            .last()
            .map_or(0, |f| f.decompressed_at + f.decompressed_len as u64)
    }

    /// The table as a skippable frame, to append after the last frame.
    pub fn to_bytes(&self) -> Vec<u8> {
        let n = self.frames.len();
        let mut out = Vec::with_capacity(8 + 8 * n + FOOTER_LEN);
        out.extend_from_slice(&SEEK_TABLE_MAGIC.to_le_bytes());
        out.extend_from_slice(&((8 * n + FOOTER_LEN) as u32).to_le_bytes());
        for f in &self.frames {
            out.extend_from_slice(&f.compressed_len.to_le_bytes());
            out.extend_from_slice(&f.decompressed_len.to_le_bytes());
        }
        out.extend_from_slice(&(n as u32).to_le_bytes());
        out.push(0); // descriptor: no checksums
        out.extend_from_slice(&SEEKABLE_FOOTER_MAGIC.to_le_bytes());
        out
    }

    /// Reads the table at the end of a file of `file_len` bytes, if it has
    /// one that agrees with the file's size.
    pub fn read_footer(file: &File, file_len: u64) -> io::Result<Option<SeekTable>> {
        Self::from_tail(file_len, |buf, at| FileExt::read_exact_at(file, buf, at))
    }

    /// The table at the end of `bytes` (a whole file in memory), if any.
    pub fn from_bytes(bytes: &[u8]) -> Option<SeekTable> {
        Self::from_tail(bytes.len() as u64, |buf, at| {
            let at = at as usize;
            let src = bytes
                .get(at..at + buf.len())
                .ok_or(io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(src);
            Ok(())
        })
        .ok()
        .flatten()
    }

    /// The table of a file of `file_len` bytes read through `read_at`.
    fn from_tail(
        file_len: u64,
        read_at: impl Fn(&mut [u8], u64) -> io::Result<()>,
    ) -> io::Result<Option<SeekTable>> {
        if file_len < (8 + FOOTER_LEN) as u64 {
            return Ok(None);
        }
        let mut footer = [0u8; FOOTER_LEN];
        read_at(&mut footer, file_len - FOOTER_LEN as u64)?;
        let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if word(&footer[5..9]) != SEEKABLE_FOOTER_MAGIC {
            return Ok(None);
        }
        let n = word(&footer[0..4]) as u64;
        let entry = if footer[4] & 0x80 != 0 { 12 } else { 8 };
        let table_len = 8 + n * entry + FOOTER_LEN as u64;
        if table_len > file_len || n > (1 << 26) {
            return Ok(None);
        }
        let start = file_len - table_len;
        let mut head = [0u8; 8];
        read_at(&mut head, start)?;
        if word(&head[0..4]) != SEEK_TABLE_MAGIC || word(&head[4..8]) as u64 != table_len - 8 {
            return Ok(None);
        }
        let mut raw = vec![0u8; (table_len - 8 - FOOTER_LEN as u64) as usize];
        read_at(&mut raw, start + 8)?;
        let mut t = SeekTable::default();
        for e in raw.chunks_exact(entry as usize) {
            t.push(word(&e[0..4]), word(&e[4..8]));
        }
        if t.compressed_len() != start {
            return Ok(None);
        }
        Ok(Some(t))
    }

    /// The frame holding decompressed offset `at`.
    pub fn locate(&self, at: u64) -> Option<usize> {
        let i = self.frames.partition_point(|f| f.decompressed_at <= at);
        let i = i.checked_sub(1)?;
        let f = &self.frames[i];
        (at < f.decompressed_at + f.decompressed_len as u64).then_some(i)
    }
}

/// Walks the frames at the start of `bytes`, stopping at the first one that
/// is incomplete or not a frame: the whole frames found and where they end.
/// Skippable frames (a seek table) end the walk.
pub fn walk_frames(container: Container, bytes: &[u8]) -> SeekTable {
    let mut t = SeekTable::default();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let found = match container {
            Container::Zstd => zstd_frame_extent(rest),
            Container::Lz4 => lz4_frame_extent(rest),
        };
        match found {
            Some((clen, dlen)) if clen <= u32::MAX as usize && dlen <= MAX_FRAME_DECOMPRESSED => {
                t.push(clen as u32, dlen as u32);
                at += clen;
            }
            _ => break,
        }
    }
    t
}

/// A whole zstd frame at the start of `b` (weir's frames carry their
/// content size): (compressed length, decompressed length).
fn zstd_frame_extent(b: &[u8]) -> Option<(usize, u64)> {
    if Container::sniff(b) != Some(Container::Zstd) {
        return None;
    }
    let clen = zstd::zstd_safe::find_frame_compressed_size(b).ok()?;
    if clen > b.len() {
        return None;
    }
    let dlen = zstd::zstd_safe::get_frame_content_size(&b[..clen]).ok()??;
    Some((clen, dlen))
}

/// The largest block an LZ4 frame at the start of `b` declares (the size of
/// the buffer its decoder sets up), from the frame descriptor.
pub fn lz4_block_size(b: &[u8]) -> Option<usize> {
    match (b.get(5)? >> 4) & 7 {
        4 => Some(64 << 10),
        5 => Some(256 << 10),
        6 => Some(1 << 20),
        7 => Some(4 << 20),
        _ => None,
    }
}

/// A whole LZ4 frame at the start of `b` that states its content size, by
/// its block headers.
fn lz4_frame_extent(b: &[u8]) -> Option<(usize, u64)> {
    if Container::sniff(b) != Some(Container::Lz4) || b.len() < 7 {
        return None;
    }
    let flg = b[4];
    let block_checksums = flg & 0x10 != 0;
    let has_size = flg & 0x08 != 0;
    let content_checksum = flg & 0x04 != 0;
    let has_dict = flg & 0x01 != 0;
    let mut at = 6 + if has_size { 8 } else { 0 } + if has_dict { 4 } else { 0 } + 1;
    let size = if has_size {
        Some(u64::from_le_bytes(b.get(6..14)?.try_into().ok()?))
    } else {
        None
    };
    let max_block = lz4_block_size(b)?;
    // Without a content size the frame's length out is known only by
    // decompressing it; weir always writes the size.
    let size = size?;
    loop {
        let h = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?);
        at += 4;
        if h == 0 {
            break;
        }
        let len = (h & 0x7fff_ffff) as usize;
        if len > max_block {
            return None;
        }
        at += len + if block_checksums { 4 } else { 0 };
    }
    at += if content_checksum { 4 } else { 0 };
    if at > b.len() {
        return None;
    }
    Some((at, size))
}

/// Decompresses one whole frame into `out` (replacing its contents).
pub fn decode_frame(
    container: Container,
    frame: &[u8],
    decompressed_len: usize,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    out.clear();
    match container {
        Container::Zstd => {
            out.reserve(decompressed_len);
            let n = zstd::bulk::Decompressor::new()?.decompress_to_buffer(frame, out)?;
            if n != decompressed_len {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a zstd frame held {n} bytes, the seek table says {decompressed_len}"),
                ));
            }
        }
        Container::Lz4 => {
            let mut d = lz4_flex::frame::FrameDecoder::new(frame);
            d.read_to_end(out)?;
            if out.len() != decompressed_len {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "an LZ4 frame held {} bytes, the seek table says {decompressed_len}",
                        out.len()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A compressed capture file opened for reads by decompressed offset.
pub struct SeekableFile {
    path: PathBuf,
    file: Arc<dyn ReadAt>,
    pub container: Container,
    pub table: SeekTable,
    /// The table came from the file's footer (not from walking it).
    pub had_table: bool,
    /// Bytes after the last whole frame that are not a seek table: the
    /// part of a frame a killed writer left.
    pub torn_bytes: u64,
    raw: Vec<u8>,
    cached: Option<(usize, Vec<u8>)>,
}

impl SeekableFile {
    /// Opens `path` if it is a zstd or LZ4 file; `Ok(None)` otherwise.
    /// Without a seek table the frames are found by walking the file.
    pub fn open(path: &Path) -> io::Result<Option<SeekableFile>> {
        Self::open_at(path, Arc::new(File::open(path)?))
    }

    /// [`SeekableFile::open`] of a file read through `file` (one in an
    /// object store: the seek table, then one frame a read); `path` names
    /// it in errors.
    pub fn open_at(path: &Path, file: Arc<dyn ReadAt>) -> io::Result<Option<SeekableFile>> {
        let len = file.size()?;
        let mut head = [0u8; 4];
        if len < 4 {
            return Ok(None);
        }
        file.read_exact_at(&mut head, 0)?;
        let Some(container) = Container::sniff(&head) else {
            return Ok(None);
        };
        let table = SeekTable::from_tail(len, |buf, at| file.read_exact_at(buf, at))?;
        let (table, had_table, torn) = match table {
            Some(t) => (t, true, 0),
            None => {
                let mut all = vec![0u8; len as usize];
                file.read_exact_at(&mut all, 0)?;
                let t = walk_frames(container, &all);
                let torn = len - t.compressed_len();
                (t, false, torn)
            }
        };
        Ok(Some(SeekableFile {
            path: path.to_path_buf(),
            file,
            container,
            table,
            had_table,
            torn_bytes: torn,
            raw: Vec::new(),
            cached: None,
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The decompressed bytes of frame `i` (kept until another is read).
    pub fn frame(&mut self, i: usize) -> io::Result<&[u8]> {
        if self.cached.as_ref().is_none_or(|(k, _)| *k != i) {
            let f = *self.table.frames.get(i).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("no frame {i}"))
            })?;
            if f.decompressed_len as u64 > MAX_FRAME_DECOMPRESSED {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "frame {i} claims {} bytes decompressed, more than weir ever writes",
                        f.decompressed_len
                    ),
                ));
            }
            self.raw.resize(f.compressed_len as usize, 0);
            self.file.read_exact_at(&mut self.raw, f.compressed_at)?;
            let mut out = self.cached.take().map(|(_, v)| v).unwrap_or_default();
            decode_frame(
                self.container,
                &self.raw,
                f.decompressed_len as usize,
                &mut out,
            )?;
            self.cached = Some((i, out));
        }
        Ok(self.cached.as_ref().map_or(&[][..], |(_, v)| v.as_slice()))
    }

    /// The decompressed stream from the first frame on, as a reader.
    pub fn into_reader(self) -> FramesReader {
        FramesReader {
            file: self,
            next: 0,
            buf: Vec::new(),
            pos: 0,
        }
    }
}

/// Reads a [`SeekableFile`]'s decompressed stream frame by frame.
pub struct FramesReader {
    file: SeekableFile,
    next: usize,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for FramesReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.buf.len() {
            if self.next >= self.file.table.frames.len() {
                return Ok(0);
            }
            let i = self.next;
            self.next += 1;
            self.buf.clear();
            let bytes = self.file.frame(i)?;
            self.buf.extend_from_slice(bytes);
            self.pos = 0;
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks() -> Vec<Vec<u8>> {
        (0..5u32)
            .map(|k| {
                (0..(50_000 + k * 70_001))
                    .map(|i| ((i / 7) as u8).wrapping_mul(k as u8 + 1))
                    .collect()
            })
            .collect()
    }

    fn file_of(methods: &[Method], with_table: bool) -> (Vec<u8>, Vec<u8>) {
        let mut enc = FrameEncoder::new();
        let mut out = Vec::new();
        let mut plain = Vec::new();
        let mut t = SeekTable::default();
        for (b, m) in blocks().iter().zip(methods.iter().cycle()) {
            let n = enc.encode(*m, b, &mut out).unwrap();
            t.push(n as u32, b.len() as u32);
            plain.extend_from_slice(b);
        }
        if with_table {
            out.extend_from_slice(&t.to_bytes());
        }
        (out, plain)
    }

    #[test]
    fn every_method_round_trips_and_walks() {
        for (container, methods) in [
            (
                Container::Zstd,
                vec![Method::Zstd(3), Method::Stored, Method::Zstd(-5)],
            ),
            (Container::Lz4, vec![Method::Lz4]),
        ] {
            let (bytes, plain) = file_of(&methods, true);
            let t = walk_frames(container, &bytes);
            assert_eq!(t.frames.len(), 5, "{container:?}");
            assert_eq!(t.decompressed_len(), plain.len() as u64);
            let mut back = Vec::new();
            let mut one = Vec::new();
            for f in &t.frames {
                let raw = &bytes[f.compressed_at as usize..][..f.compressed_len as usize];
                decode_frame(container, raw, f.decompressed_len as usize, &mut one).unwrap();
                back.extend_from_slice(&one);
            }
            assert_eq!(back, plain);
        }
    }

    #[test]
    fn stored_frames_decompress_with_the_zstd_library() {
        let input: Vec<u8> = (0..300_000u32).map(|i| (i * 31 % 251) as u8).collect();
        let mut out = Vec::new();
        zstd_stored_frame(&input, &mut out);
        assert_eq!(zstd::stream::decode_all(&out[..]).unwrap(), input);
        let mut empty = Vec::new();
        zstd_stored_frame(&[], &mut empty);
        assert!(zstd::stream::decode_all(&empty[..]).unwrap().is_empty());
    }

    #[test]
    fn the_whole_file_decompresses_as_one_zstd_stream() {
        let (bytes, plain) = file_of(&[Method::Zstd(1), Method::Stored], true);
        assert_eq!(zstd::stream::decode_all(&bytes[..]).unwrap(), plain);
    }

    #[test]
    fn footer_is_found_and_offsets_locate_frames() {
        let dir = std::env::temp_dir().join(format!("weir-seek-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.pcap.zst");
        let (bytes, plain) = file_of(&[Method::Zstd(3)], true);
        std::fs::write(&path, &bytes).unwrap();
        let mut f = SeekableFile::open(&path).unwrap().unwrap();
        assert!(f.had_table);
        assert_eq!(f.table.decompressed_len(), plain.len() as u64);
        for at in [0u64, 49_999, 50_000, plain.len() as u64 - 1] {
            let i = f.table.locate(at).unwrap();
            let start = f.table.frames[i].decompressed_at;
            let frame = f.frame(i).unwrap();
            assert_eq!(frame[(at - start) as usize], plain[at as usize]);
        }
        assert_eq!(f.table.locate(plain.len() as u64), None);
        // Cut in the middle of the third frame, without a table: the walk
        // finds the two whole frames and the torn rest.
        let t = walk_frames(Container::Zstd, &bytes);
        let cut = t.frames[2].compressed_at as usize + 10;
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let f = SeekableFile::open(&path).unwrap().unwrap();
        assert!(!f.had_table);
        assert_eq!(f.table.frames.len(), 2);
        assert_eq!(f.torn_bytes, 10);
        let mut back = Vec::new();
        f.into_reader().read_to_end(&mut back).unwrap();
        assert_eq!(back, plain[..t.frames[2].decompressed_at as usize]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_short_lz4_header_is_not_a_frame() {
        // Found by fuzzing: the content-size flag set in a header cut
        // before the size.
        let b = [0x04, 0x22, 0x4d, 0x18, 0x68, 0x70, 0x00, 0x01];
        assert!(walk_frames(Container::Lz4, &b).frames.is_empty());
        assert!(SeekTable::from_bytes(&b).is_none());
    }

    #[test]
    fn codec_names_parse() {
        assert_eq!("auto".parse::<Codec>(), Ok(Codec::Auto));
        assert_eq!("zstd:-3".parse::<Codec>(), Ok(Codec::Zstd(-3)));
        assert_eq!("zstd".parse::<Codec>(), Ok(Codec::Zstd(3)));
        assert!("zstd:40".parse::<Codec>().is_err());
        assert!("gzip".parse::<Codec>().unwrap_err().contains("auto"));
        assert_eq!(auto_method(0.0), Method::Zstd(6));
        assert_eq!(auto_method(0.99), Method::Stored);
    }
}
