//! Pcap files a killed writer left behind: find the last whole frame, cut
//! the file there, and (for compressed files) give it back its seek table.
//! Also what `weir recover` uses to describe complete files.
//!
//! A file of a ring (`--max-disk`) is written over an older file's space,
//! so what lies past the new data is the old file's records, as well-formed
//! as the new ones. Before overwriting, the writer leaves a marker beside
//! the part file naming the old file and its newest frame
//! ([`OverwriteMarker`]), and it never puts a frame that old or older into
//! the new file (it cuts the old content off first). Recovery then ends the
//! new data at the first record that old ([`repair_overwritten_pcap`]).

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
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
    /// Where the last whole record starts (in the decompressed stream).
    pub last_record_at: u64,
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
    walk_records_newer_than(r, scan, None)
}

/// [`walk_records`], also stopping at the first record whose timestamp is
/// not after `newer_than`.
fn walk_records_newer_than(
    r: impl Read,
    scan: &mut PcapScan,
    newer_than: Option<i64>,
) -> io::Result<()> {
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
        if newer_than.is_some_and(|t| ts <= t) {
            return Ok(());
        }
        scan.last_record_at = scan.pcap_bytes;
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

/// What a writer leaves beside a part file it writes over an older file's
/// space (see the module's documentation).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OverwriteMarker {
    /// The newest frame of the file overwritten: every frame of the new
    /// file is newer.
    pub stale_until_ns: i64,
    /// The file overwritten.
    pub file: crate::retention::RemovedFile,
}

impl OverwriteMarker {
    /// The marker's path for the part file `part`.
    pub fn path_for(part: &Path) -> std::path::PathBuf {
        let mut name = part.file_name().unwrap_or_default().to_os_string();
        name.push(".overwrites");
        part.with_file_name(name)
    }

    /// Whether `name` is a marker's file name.
    pub fn is_marker_name(name: &str) -> bool {
        name.ends_with(".part.overwrites")
    }

    /// Whether `name` is a marker still being written (a kill left it
    /// before its rename, so the old file was not touched yet).
    pub fn is_unfinished_marker_name(name: &str) -> bool {
        name.ends_with(".part.overwrites.tmp")
    }

    /// Writes the marker for `part`, durably and whole (it must be on disk
    /// before the first byte of the old file is overwritten): written
    /// beside, synced, then renamed, so a kill never leaves half a marker.
    pub fn write(&self, part: &Path) -> io::Result<()> {
        let path = Self::path_for(part);
        let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = path.with_file_name(tmp_name);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o640)
            .open(&tmp)?;
        let json = serde_json::to_vec(self).map_err(io::Error::other)?;
        f.write_all_at(&json, 0)?;
        f.sync_data()?;
        std::fs::rename(&tmp, &path)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }

    pub fn read(path: &Path) -> io::Result<OverwriteMarker> {
        let bytes = std::fs::read(path)?;
        serde_json::from_slice(&bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not an overwrite marker: {e}", path.display()),
            )
        })
    }
}

/// A reader that ends quietly at its inner reader's first error: the data
/// past the new part of an overwritten file may not decode.
struct UntilError<R>(R);

impl<R: Read> Read for UntilError<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(self.0.read(buf).unwrap_or(0))
    }
}

/// Whether `[start, end)` of a file straddles a page: a write the kill cut
/// short stops at a page, so a record that straddles one, followed by old
/// content, may hold old bytes past the page and cannot be trusted.
fn straddles_page(start: u64, end: u64) -> bool {
    const PAGE: u64 = 4096;
    end > start && start / PAGE != (end - 1) / PAGE
}

/// Repairs a part file a ring writer was writing over an older file's
/// space when it was killed: keeps the frames newer than the marker's
/// bound, up to the first that is not, then cuts the file there (less a
/// last record or stored frame that straddles a page, which a cut-short
/// write may have left half old) as [`repair_pcap`] does.
pub fn repair_overwritten_pcap(path: &Path, stale_until_ns: i64) -> io::Result<PcapScan> {
    let file_len = std::fs::metadata(path)?.len();
    let mut scan = PcapScan {
        file_len,
        ..Default::default()
    };
    let keep_len = match SeekableFile::open(path)? {
        Some(f) => {
            let table = f.table.clone();
            walk_records_newer_than(UntilError(f.into_reader()), &mut scan, Some(stale_until_ns))?;
            let whole = table
                .frames
                .iter()
                .take_while(|fr| fr.decompressed_at + fr.decompressed_len as u64 <= scan.pcap_bytes)
                .count();
            let mut kept = &table.frames[..whole];
            let end = kept
                .last()
                .map_or(0, |fr| fr.compressed_at + fr.compressed_len as u64);
            if let Some(last) = kept.last()
                && end < file_len
                && last.compressed_len >= last.decompressed_len
                && straddles_page(last.compressed_at, end)
            {
                // A stored frame decodes whatever its bytes are.
                kept = &kept[..kept.len() - 1];
            }
            kept.last()
                .map_or(0, |fr| fr.compressed_at + fr.compressed_len as u64)
        }
        None => {
            walk_records_newer_than(
                UntilError(File::open(path)?),
                &mut scan,
                Some(stale_until_ns),
            )?;
            let end = scan.pcap_bytes;
            if scan.frames > 0 && end < file_len && straddles_page(scan.last_record_at, end) {
                scan.last_record_at
            } else {
                end
            }
        }
    };
    let f = OpenOptions::new().write(true).open(path)?;
    f.set_len(keep_len.min(file_len))?;
    drop(f);
    // Described afresh, and given a seek table when compressed.
    repair_pcap(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::seekable::{Codec, SeekTable};
    use crate::spool::{SpoolOptions, spool};
    use wire::LinkType;

    /// Writes `n` frames of one size with timestamps from `t0` to a file of
    /// its own; returns the file's path.
    fn spooled(dir: &Path, prefix: &str, codec: Codec, n: u32, t0: i64) -> std::path::PathBuf {
        let mut o = SpoolOptions::new(dir.to_path_buf(), prefix.into(), LinkType::ETHERNET, 4096);
        o.codec = codec;
        o.block_bytes = 16 << 10;
        o.blocks = 1000;
        let (mut s, w) = spool(o).unwrap();
        for i in 0..n {
            let frame = vec![(i % 251) as u8; 600];
            s.append(t0 + i as i64, 600, &frame).unwrap();
        }
        s.finish();
        dir.join(&w.join().unwrap().files[0].name)
    }

    /// A ring writer killed while writing over an older file: the records
    /// of the same size line up with the old file's, so only their age
    /// tells them apart. Recovery keeps the new frames up to the cut (less
    /// one that straddles a page into old content) and never an old one.
    #[test]
    fn an_overwritten_file_keeps_its_new_frames_and_none_of_the_old() {
        let dir = std::env::temp_dir().join(format!("weir-repair-ow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for codec in [Codec::None, Codec::Zstd(1)] {
            let old = spooled(&dir, "old", codec, 3000, 1_000);
            let new = spooled(&dir, "new", codec, 2000, 1_000_000);
            let old_scan = scan_pcap(&old).unwrap();
            let new_bytes = std::fs::read(&new).unwrap();
            let new_len = match codec.container() {
                None => new_bytes.len() as u64,
                Some(_) => {
                    // The writer strips the old table before overwriting.
                    let f = OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open(&old)
                        .unwrap();
                    let t = SeekTable::read_footer(&f, old_scan.file_len)
                        .unwrap()
                        .unwrap();
                    f.set_len(t.compressed_len()).unwrap();
                    let f = File::open(&new).unwrap();
                    SeekTable::read_footer(&f, new_bytes.len() as u64)
                        .unwrap()
                        .unwrap()
                        .compressed_len()
                }
            };
            // A write cut short by a kill stops at a page.
            for cut in [new_len / 3, new_len / 2 + 77, new_len * 9 / 10].map(|c| c / 4096 * 4096) {
                let part = dir.join(format!("part-{cut}"));
                std::fs::copy(&old, &part).unwrap();
                // What reached the file before the kill, over the old bytes.
                let f = OpenOptions::new().write(true).open(&part).unwrap();
                f.write_all_at(&new_bytes[..cut as usize], 0).unwrap();
                drop(f);
                let mut truncated = dir.join(format!("new-{cut}"));
                truncated.set_extension("cut");
                std::fs::write(&truncated, &new_bytes[..cut as usize]).unwrap();
                let whole = scan_pcap(&truncated).unwrap().frames;
                let fixed = repair_overwritten_pcap(&part, old_scan.ts_last.unwrap()).unwrap();
                assert!(
                    fixed.frames == whole || fixed.frames + 1 == whole,
                    "{codec} cut {cut}: kept {} of {whole}",
                    fixed.frames
                );
                assert!(fixed.frames > 100, "{codec} cut {cut}");
                assert_eq!(fixed.ts_first, Some(1_000_000), "{codec}");
                assert_eq!(fixed.ts_last, Some(1_000_000 + fixed.frames as i64 - 1));
                let again = scan_pcap(&part).unwrap();
                assert!(!again.torn(), "{codec} cut {cut}");
                assert_eq!(again.frames, fixed.frames);
                for p in [part, truncated] {
                    std::fs::remove_file(p).unwrap();
                }
            }
            // Without the bound the old frames would have been taken too.
            let part = dir.join("unbounded");
            std::fs::copy(&old, &part).unwrap();
            let f = OpenOptions::new().write(true).open(&part).unwrap();
            f.write_all_at(&new_bytes[..(new_len / 2) as usize], 0)
                .unwrap();
            drop(f);
            if codec.container().is_none() {
                assert!(scan_pcap(&part).unwrap().frames > 2000, "{codec}");
            }
            std::fs::remove_file(part).unwrap();
            std::fs::remove_file(old).unwrap();
            std::fs::remove_file(new).unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

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
