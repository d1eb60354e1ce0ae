//! Pcap files a killed writer left behind: find the last whole frame, cut
//! the file there, and (for compressed files) give it back its seek table.
//! Also what `weir recover` uses to describe complete files.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::seekable::{Container, SeekableFile};
use crate::writer::{PCAP_HEADER_LEN, PCAP_RECORD_HEADER_LEN};

/// Records longer than this are not records weir wrote.
const MAX_RECORD: u32 = 1 << 20;

/// What a pcap file holds, up to its last whole record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PcapScan {
    pub frames: u64,
    /// Bytes of pcap (decompressed) that are whole.
    pub pcap_bytes: u64,
    pub ts_first: Option<i64>,
    pub ts_last: Option<i64>,
    /// The file's length, and the length it keeps when repaired.
    pub file_len: u64,
    pub keep_len: u64,
    pub container: Option<Container>,
    /// A compressed file had its seek table (it was closed properly).
    pub had_table: bool,
}

impl PcapScan {
    /// Whether the file needs cutting back (or a seek table).
    pub fn torn(&self) -> bool {
        self.keep_len != self.file_len || (self.container.is_some() && !self.had_table)
    }
}

/// Reads a nanosecond or microsecond little-endian classic pcap stream,
/// counting whole records; stops quietly at the first incomplete one.
pub fn walk_records(r: impl Read, scan: &mut PcapScan) -> io::Result<()> {
    let mut r = BufReader::with_capacity(1 << 20, r);
    let mut h = [0u8; 24];
    if read_full(&mut r, &mut h)? < 24 {
        return Ok(());
    }
    let nano = match u32::from_le_bytes([h[0], h[1], h[2], h[3]]) {
        0xa1b2_3c4d => true,
        0xa1b2_c3d4 => false,
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a little-endian classic pcap file (weir writes those)",
            ));
        }
    };
    scan.pcap_bytes = PCAP_HEADER_LEN;
    let mut rec = [0u8; 16];
    let mut skip = vec![0u8; 64 << 10];
    loop {
        if read_full(&mut r, &mut rec)? < 16 {
            return Ok(());
        }
        let w = |i: usize| u32::from_le_bytes([rec[i], rec[i + 1], rec[i + 2], rec[i + 3]]);
        let caplen = w(8);
        if caplen > MAX_RECORD {
            return Ok(());
        }
        let mut left = caplen as usize;
        while left > 0 {
            let n = left.min(skip.len());
            if read_full(&mut r, &mut skip[..n])? < n {
                return Ok(());
            }
            left -= n;
        }
        let ts = w(0) as i64 * 1_000_000_000 + w(4) as i64 * if nano { 1 } else { 1000 };
        scan.frames += 1;
        scan.pcap_bytes += PCAP_RECORD_HEADER_LEN + caplen as u64;
        scan.ts_first.get_or_insert(ts);
        scan.ts_last = Some(ts);
    }
}

/// Fills `buf` as far as the stream goes; the count read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Describes a pcap file (plain, or zstd/LZ4 frames as weir writes them)
/// without changing it.
pub fn scan_pcap(path: &Path) -> io::Result<PcapScan> {
    let file_len = std::fs::metadata(path)?.len();
    let mut scan = PcapScan {
        file_len,
        ..Default::default()
    };
    match SeekableFile::open(path)? {
        Some(f) => {
            scan.container = Some(f.container);
            scan.had_table = f.had_table;
            scan.keep_len = f.table.compressed_len();
            if f.had_table {
                scan.keep_len = file_len;
            }
            walk_records(f.into_reader(), &mut scan)?;
        }
        None => {
            walk_records(File::open(path)?, &mut scan)?;
            scan.keep_len = scan.pcap_bytes;
        }
    }
    Ok(scan)
}

/// Cuts a torn file back to its last whole record (whole frame, when
/// compressed, then appends the seek table) and makes it durable.
pub fn repair_pcap(path: &Path) -> io::Result<PcapScan> {
    let scan = scan_pcap(path)?;
    if !scan.torn() {
        return Ok(scan);
    }
    let f = OpenOptions::new().write(true).open(path)?;
    f.set_len(scan.keep_len)?;
    let mut out = scan.clone();
    if scan.container.is_some() {
        let table = SeekableFile::open(path)?
            .map(|s| s.table)
            .unwrap_or_default();
        let bytes = table.to_bytes();
        f.write_all_at(&bytes, scan.keep_len)?;
        out.keep_len += bytes.len() as u64;
        out.had_table = true;
    }
    f.sync_all()?;
    out.file_len = out.keep_len;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seekable::{Codec, SeekTable};
    use crate::spool::{SpoolOptions, spool};
    use wire::LinkType;

    #[test]
    fn torn_files_are_cut_at_their_last_whole_frame() {
        let dir = std::env::temp_dir().join(format!("weir-repair-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for codec in [Codec::None, Codec::Zstd(1), Codec::Lz4] {
            let mut o = SpoolOptions::new(
                dir.clone(),
                format!("c{}", codec.to_string().len()),
                LinkType::ETHERNET,
                4096,
            );
            o.codec = codec;
            o.block_bytes = 16 << 10;
            o.blocks = 1000;
            let (mut s, w) = spool(o).unwrap();
            for i in 0..2000u32 {
                let frame = vec![(i % 251) as u8; 100 + (i % 300) as usize];
                s.append(1_000 + i as i64, frame.len() as u32, &frame)
                    .unwrap();
            }
            s.finish();
            let report = w.join().unwrap();
            let path = dir.join(&report.files[0].name);
            let whole = scan_pcap(&path).unwrap();
            assert!(!whole.torn(), "{codec}");
            assert_eq!(whole.frames, 2000);
            assert_eq!((whole.ts_first, whole.ts_last), (Some(1_000), Some(2_999)));
            // A kill in the middle of a frame: no table, a torn tail.
            let len = match codec.container() {
                None => whole.file_len,
                Some(_) => {
                    let f = File::open(&path).unwrap();
                    SeekTable::read_footer(&f, whole.file_len)
                        .unwrap()
                        .unwrap()
                        .compressed_len()
                }
            };
            let cut = len * 2 / 3;
            OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(cut)
                .unwrap();
            let torn = scan_pcap(&path).unwrap();
            assert!(torn.torn(), "{codec}");
            assert!(
                torn.frames > 100 && torn.frames < 2000,
                "{codec}: {}",
                torn.frames
            );
            let fixed = repair_pcap(&path).unwrap();
            assert_eq!(fixed.frames, torn.frames);
            let again = scan_pcap(&path).unwrap();
            assert!(!again.torn(), "{codec}: repaired");
            assert_eq!(again.frames, torn.frames);
            // The repaired file reads to its end with weir's reader.
            let mut r = crate::TraceReader::open(&path, Default::default()).unwrap();
            let mut n = 0;
            while let Some(c) = r.next_chunk().unwrap() {
                n += c.frames.len() as u64;
            }
            assert_eq!(n, torn.frames, "{codec}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
