//! Random access to the records of a classic pcap file, plain or
//! compressed as weir writes it (zstd or LZ4 frames with a seek table):
//! what `weir read` uses to pull single frames out of large files by the
//! offsets the packet records keep, without reading what lies between them.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use util::storage::ReadAt;

use crate::seekable::SeekableFile;

use wire::LinkType;

use crate::error::{ReadError, ReadErrorKind};
use crate::reader::{MAX_BLOCK_LEN, MAX_FRAME_LEN};

/// One frame read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchedFrame {
    pub ts_ns: i64,
    pub wire_len: u32,
}

/// Bytes read ahead from a plain file: candidates come sorted by offset,
/// so one read of this much serves the records that follow (a read(2) per
/// record costs more than the record).
const READ_AHEAD: usize = 1 << 20;

/// Bytes read at a record far from the last window (the records of a few
/// flows lie scattered through a file): a megabyte for each would read
/// far more than the frames: 200 MB for the 200 frames of one flow in 1.6
/// GB of 64-byte frames.
const READ_SCATTERED: usize = 4 << 10;

/// Records closer than this to the one before are read with it in one read
/// (when the caller says which it wants, [`PcapFile::plan`]): a read of its
/// own costs about as much as copying this much more, from the page cache
/// (a system call) or from the disk (a request). IMIX frames of one flow
/// among a thousand lie ~50 KB apart.
const GAP: u64 = 16 << 10;

/// A window of a plain file: the offset of its first byte, its bytes, and
/// the records the caller will want (sorted; see [`PcapFile::plan`]).
#[derive(Default)]
struct Window {
    at: u64,
    bytes: Vec<u8>,
    wanted: Vec<u64>,
}

impl Window {
    /// How much to read at `at` (a miss), `need` bytes at least: the
    /// records wanted after it that lie close together, read in one go;
    /// without a plan, a megabyte when reading on from the window (a
    /// stretch of records), a record's worth after a jump.
    fn ahead(&self, at: u64, need: usize) -> usize {
        if self.wanted.is_empty() {
            let end = self.at + self.bytes.len() as u64;
            let on = !self.bytes.is_empty() && at >= end && at - end < READ_AHEAD as u64;
            return if on {
                READ_AHEAD
            } else {
                READ_SCATTERED.max(need)
            };
        }
        let i = self.wanted.partition_point(|&o| o < at);
        let mut last = at;
        for &o in &self.wanted[i..] {
            if o - last > GAP || o - at >= (READ_AHEAD - READ_SCATTERED) as u64 {
                break;
            }
            last = o;
        }
        ((last - at) as usize + READ_SCATTERED).max(need)
    }
}

/// Where the pcap bytes come from.
enum Body {
    /// The file (local or in an object store), and a window of it.
    Plain(Arc<dyn ReadAt>, Mutex<Window>),
    /// Offsets are into the decompressed stream.
    Packed(Mutex<SeekableFile>),
}

impl Body {
    fn read_exact_at(&self, mut buf: &mut [u8], mut at: u64) -> std::io::Result<()> {
        match self {
            Body::Plain(f, window) => {
                let mut w = window.lock().unwrap_or_else(|e| e.into_inner());
                let inside =
                    |w: &Window| at >= w.at && at + buf.len() as u64 <= w.at + w.bytes.len() as u64;
                if !inside(&w) {
                    let ahead = f.read_ahead();
                    if buf.len() > ahead {
                        return f.read_exact_at(buf, at);
                    }
                    // The records wanted next that lie close together, or
                    // a stretch, as much of it as the file holds from `at`.
                    let want = w.ahead(at, buf.len());
                    let n = f.size()?.saturating_sub(at).min(want as u64) as usize;
                    w.bytes.resize(n, 0);
                    if let Err(e) = f.read_exact_at(&mut w.bytes, at) {
                        w.bytes.clear();
                        return Err(e);
                    }
                    w.at = at;
                    if !inside(&w) {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                }
                let from = (at - w.at) as usize;
                buf.copy_from_slice(&w.bytes[from..from + buf.len()]);
                Ok(())
            }
            Body::Packed(m) => {
                let mut f = m.lock().unwrap_or_else(|e| e.into_inner());
                while !buf.is_empty() {
                    let i = f
                        .table
                        .locate(at)
                        .ok_or(std::io::ErrorKind::UnexpectedEof)?;
                    let start = f.table.frames[i].decompressed_at;
                    let frame = f.frame(i)?;
                    let from = (at - start) as usize;
                    let n = buf.len().min(frame.len() - from);
                    buf[..n].copy_from_slice(&frame[from..from + n]);
                    buf = &mut buf[n..];
                    at += n as u64;
                }
                Ok(())
            }
        }
    }
}

/// A classic pcap file opened for reads at record offsets.
pub struct PcapFile {
    path: PathBuf,
    file: Body,
    big_endian: bool,
    nanosecond: bool,
    pub link: LinkType,
    pub snaplen: u32,
}

impl PcapFile {
    /// Opens `path` if it is a classic pcap file, plain or in zstd or LZ4
    /// frames; `Ok(None)` for anything else (pcapng, gzip, the modified
    /// variant), which must be read in sequence instead.
    pub fn open(path: &Path) -> Result<Option<PcapFile>, ReadError> {
        let file = File::open(path).map_err(|e| ReadError {
            path: path.to_path_buf(),
            offset: 0,
            decompressed: false,
            kind: ReadErrorKind::Io(e),
        })?;
        Self::open_at(path, Arc::new(file))
    }

    /// [`PcapFile::open`] of a file read through `file` (one in an object
    /// store, read by range); `path` names it in errors.
    pub fn open_at(path: &Path, file: Arc<dyn ReadAt>) -> Result<Option<PcapFile>, ReadError> {
        let err = |offset, kind| ReadError {
            path: path.to_path_buf(),
            offset,
            decompressed: false,
            kind,
        };
        let packed =
            SeekableFile::open_at(path, file.clone()).map_err(|e| err(0, ReadErrorKind::Io(e)))?;
        let file = match packed {
            Some(f) => Body::Packed(Mutex::new(f)),
            None => Body::Plain(file, Mutex::new(Window::default())),
        };
        let mut h = [0u8; 24];
        match file.read_exact_at(&mut h, 0) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(err(0, ReadErrorKind::Io(e))),
        }
        let magic = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let (big_endian, nanosecond) = match magic {
            0xa1b2_c3d4 => (false, false),
            0xa1b2_3c4d => (false, true),
            0xd4c3_b2a1 => (true, false),
            0x4d3c_b2a1 => (true, true),
            _ => return Ok(None),
        };
        let word = |i: usize| {
            let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        Ok(Some(PcapFile {
            path: path.to_path_buf(),
            file,
            big_endian,
            nanosecond,
            link: LinkType((word(20) & 0xffff) as u16),
            snaplen: word(16),
        }))
    }

    /// Says which records will be read (their offsets, sorted): a plain
    /// file is then read in one go where they lie close together, and
    /// record by record where they are scattered, never the bytes between
    /// far-apart ones (the frames of a few flows in a large file).
    pub fn plan(&self, offsets: Vec<u64>) {
        if let Body::Plain(_, w) = &self.file {
            w.lock().unwrap_or_else(|e| e.into_inner()).wanted = offsets;
        }
    }

    /// Bytes of the pcap stream (decompressed), header included.
    pub fn stream_len(&self) -> std::io::Result<u64> {
        match &self.file {
            Body::Plain(f, _) => f.size(),
            Body::Packed(m) => Ok(m
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .table
                .decompressed_len()),
        }
    }

    /// Reads the record at `offset` (as the packet records keep it) into
    /// `data`, replacing its contents.
    pub fn read_at(&self, offset: u64, data: &mut Vec<u8>) -> Result<FetchedFrame, ReadError> {
        let err = |kind| ReadError {
            path: self.path.clone(),
            offset,
            decompressed: false,
            kind,
        };
        let io = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                err(ReadErrorKind::Truncated {
                    what: "pcap record",
                    needed: 16,
                    have: 0,
                })
            } else {
                err(ReadErrorKind::Io(e))
            }
        };
        let mut h = [0u8; 16];
        self.file.read_exact_at(&mut h, offset).map_err(io)?;
        let word = |i: usize| {
            let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if self.big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let caplen = word(8);
        let limit = MAX_FRAME_LEN.max(self.snaplen.min(MAX_BLOCK_LEN));
        if caplen > limit {
            return Err(err(ReadErrorKind::BogusLength {
                what: "pcap record with a captured length",
                len: caplen as u64,
                limit: limit as u64,
            }));
        }
        data.clear();
        data.resize(caplen as usize, 0);
        self.file.read_exact_at(data, offset + 16).map_err(io)?;
        let frac = word(4) as i64 * if self.nanosecond { 1 } else { 1000 };
        Ok(FetchedFrame {
            ts_ns: word(0) as i64 * 1_000_000_000 + frac,
            wire_len: word(12),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PcapWriter;

    #[test]
    fn reads_records_back_by_offset() {
        let dir = std::env::temp_dir().join(format!("weir-fetch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.pcap");
        let mut w = PcapWriter::new(
            std::fs::File::create(&path).unwrap(),
            LinkType::ETHERNET,
            100,
        )
        .unwrap();
        let a = w.write_frame(1_000_000_123, 60, &[1u8; 60]).unwrap();
        let b = w.write_frame(2_000_000_456, 500, &[2u8; 200]).unwrap();
        w.into_inner().unwrap();
        let f = PcapFile::open(&path).unwrap().unwrap();
        assert_eq!((f.link, f.snaplen), (LinkType::ETHERNET, 100));
        let mut data = Vec::new();
        let fb = f.read_at(b, &mut data).unwrap();
        assert_eq!(
            fb,
            FetchedFrame {
                ts_ns: 2_000_000_456,
                wire_len: 500
            }
        );
        assert_eq!(data, vec![2u8; 100]); // cut to the snaplen by the writer
        let fa = f.read_at(a, &mut data).unwrap();
        assert_eq!((fa.ts_ns, data.len()), (1_000_000_123, 60));
        assert!(f.read_at(b + 3, &mut data).is_err());
        assert!(f.read_at(10_000, &mut data).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
