//! Pcap files written off the capture path.
//!
//! A capture worker stages records into blocks taken from a fixed pool
//! ([`Spool::append`]); full blocks go to a writer thread that appends them
//! to the current file and hands the block back. Rotation by size or time
//! is decided on the worker, so each frame's file and offset are known the
//! moment it is staged. When the writer falls behind and the pool is
//! empty, frames are dropped and counted: the worker never waits for a disk.
//!
//! Files are written as hidden `.NAME.part` and renamed when complete, with
//! mode 0640.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, unbounded};
use wire::LinkType;

use crate::writer::{PCAP_HEADER_LEN, PCAP_RECORD_HEADER_LEN};

/// Where and how a spool writes.
#[derive(Clone, Debug)]
pub struct SpoolOptions {
    pub dir: PathBuf,
    /// File names: `{prefix}-{seq:05}.pcap`, unless `single_name` is set.
    pub prefix: String,
    /// Write exactly this file name (and `NAME.1`, `NAME.2`, ... on
    /// rotation), as `tcpdump -w` does.
    pub single_name: Option<String>,
    pub link: LinkType,
    pub snaplen: u32,
    /// Start a new file before one would exceed this many bytes.
    pub rotate_bytes: Option<u64>,
    /// Start a new file when a frame is this much later than the file's first.
    pub rotate_ns: Option<i64>,
    pub block_bytes: usize,
    /// Staging memory is `blocks × block_bytes`.
    pub blocks: usize,
    /// The first file's id; later files count up (ids go into records).
    pub first_file_id: u32,
}

/// A finished pcap file.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PcapFileInfo {
    /// The id records use in `pcap_file`.
    pub id: u32,
    /// File name (relative to the spool's directory).
    pub name: String,
    pub frames: u64,
    pub bytes: u64,
    pub ts_first: Option<i64>,
    pub ts_last: Option<i64>,
}

/// What the writer thread reports when it ends.
#[derive(Debug, Default)]
pub struct SpoolReport {
    pub files: Vec<PcapFileInfo>,
    /// The first write error, if any; later blocks were discarded.
    pub error: Option<String>,
    /// Frames in blocks discarded after an error.
    pub frames_lost: u64,
}

enum Msg {
    Open { name: String },
    Block { data: Vec<u8>, frames: u64 },
    Close { info: PcapFileInfo },
}

/// The capture side of a spool.
pub struct Spool {
    opts: SpoolOptions,
    tx: crossbeam_channel::Sender<Msg>,
    free: FreeBlocks,
    cur: Option<Vec<u8>>,
    cur_frames: u64,
    file: Option<PcapFileInfo>,
    next_seq: u32,
    /// Frames dropped because no staging block was free.
    pub dropped: u64,
    /// Frames staged.
    pub staged: u64,
}

/// Staging blocks not in use, last in first out: the block the writer
/// just emptied is the next one filled, while it is still in the cache. A
/// first-in-first-out pool would cycle through all of staging memory and
/// make both copies of every frame miss the cache.
#[derive(Clone)]
struct FreeBlocks(Arc<Mutex<Vec<Vec<u8>>>>);

impl FreeBlocks {
    fn take(&self) -> Option<Vec<u8>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }
    fn give(&self, b: Vec<u8>) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(b);
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Starts a spool: the staging pool (written once here, so the capture
/// path never meets fresh memory) and its writer thread.
pub fn spool(opts: SpoolOptions) -> io::Result<(Spool, JoinHandle<SpoolReport>)> {
    let blocks = opts.blocks.max(2);
    let free = FreeBlocks(Arc::new(Mutex::new(Vec::with_capacity(blocks))));
    for _ in 0..blocks {
        // Written, not just allocated: `vec![0; n]` would map zero pages
        // that fault in (slowly, on VMs that hand free pages back to the
        // host) the first time the capture path fills the block.
        let mut b = Vec::with_capacity(opts.block_bytes);
        b.resize(opts.block_bytes, 0xa5);
        b.clear();
        free.give(b);
    }
    let free_rx = free.clone();
    let free_tx = free;
    let (tx, rx) = unbounded();
    let dir = opts.dir.clone();
    let header = header_bytes(opts.link, opts.snaplen);
    let handle = std::thread::Builder::new()
        .name(format!("weir-pcap-{}", opts.prefix))
        .spawn(move || write_files(&dir, header, rx, free_tx))?;
    Ok((
        Spool {
            opts,
            tx,
            free: free_rx,
            cur: None,
            cur_frames: 0,
            file: None,
            next_seq: 0,
            dropped: 0,
            staged: 0,
        },
        handle,
    ))
}

fn header_bytes(link: LinkType, snaplen: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    h[4..6].copy_from_slice(&2u16.to_le_bytes());
    h[6..8].copy_from_slice(&4u16.to_le_bytes());
    h[16..20].copy_from_slice(&snaplen.to_le_bytes());
    h[20..24].copy_from_slice(&(link.0 as u32).to_le_bytes());
    h
}

impl Spool {
    /// Stages one frame. Returns the frame's (file id, offset), or `None` if
    /// it was dropped for want of staging memory.
    #[inline]
    pub fn append(&mut self, ts_ns: i64, wire_len: u32, frame: &[u8]) -> Option<(u32, u64)> {
        let cap = frame.len().min(self.opts.snaplen as usize);
        let need = PCAP_RECORD_HEADER_LEN as usize + cap;
        if let Some(f) = &self.file {
            let too_big = self
                .opts
                .rotate_bytes
                .is_some_and(|limit| f.frames > 0 && f.bytes + need as u64 > limit);
            let too_old = self
                .opts
                .rotate_ns
                .is_some_and(|limit| f.ts_first.is_some_and(|first| ts_ns - first >= limit));
            if too_big || too_old {
                self.close_file();
            }
        }
        if self.file.is_none() {
            self.open_file();
        }
        if self
            .cur
            .as_ref()
            .is_some_and(|b| b.len() + need > self.opts.block_bytes)
        {
            self.flush_block();
        }
        if self.cur.is_none() {
            match self.free.take() {
                Some(b) => self.cur = Some(b),
                None => {
                    self.dropped += 1;
                    return None;
                }
            }
        }
        let buf = self.cur.as_mut()?;
        let file = self.file.as_mut()?;
        let offset = file.bytes;
        let ts = ts_ns.max(0) as u64;
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(cap as u32).to_le_bytes());
        h[12..16].copy_from_slice(&wire_len.max(cap as u32).to_le_bytes());
        buf.extend_from_slice(&h);
        buf.extend_from_slice(&frame[..cap]);
        file.bytes += need as u64;
        file.frames += 1;
        file.ts_first.get_or_insert(ts_ns);
        file.ts_last = Some(ts_ns);
        self.cur_frames += 1;
        self.staged += 1;
        Some((file.id, offset))
    }

    /// Blocks queued for the writer or being written: how far behind it is.
    pub fn backlog(&self) -> usize {
        self.opts.blocks.max(2) - self.free.len() - self.cur.is_some() as usize
    }

    /// Sends the partly filled block to the writer (call now and then, so
    /// that data does not wait in memory when traffic is light).
    pub fn flush_block(&mut self) {
        if let Some(b) = self.cur.take() {
            if b.is_empty() {
                self.cur = Some(b);
                return;
            }
            let frames = std::mem::take(&mut self.cur_frames);
            let _ = self.tx.send(Msg::Block { data: b, frames });
        }
    }

    fn open_file(&mut self) {
        let id = self.opts.first_file_id + self.next_seq;
        let name = match &self.opts.single_name {
            Some(n) if self.next_seq == 0 => n.clone(),
            Some(n) => format!("{n}.{}", self.next_seq),
            None => format!("{}-{:05}.pcap", self.opts.prefix, self.next_seq),
        };
        self.next_seq += 1;
        let _ = self.tx.send(Msg::Open { name: name.clone() });
        self.file = Some(PcapFileInfo {
            id,
            name,
            bytes: PCAP_HEADER_LEN,
            ..Default::default()
        });
    }

    fn close_file(&mut self) {
        self.flush_block();
        if let Some(info) = self.file.take() {
            let _ = self.tx.send(Msg::Close { info });
        }
    }

    /// Writes out what is staged and closes the current file. The writer
    /// thread ends once every message is handled; join its handle for the
    /// report.
    pub fn finish(mut self) {
        self.close_file();
    }
}

/// The writer thread: appends blocks to files, renames them when closed.
fn write_files(dir: &Path, header: [u8; 24], rx: Receiver<Msg>, free: FreeBlocks) -> SpoolReport {
    let mut report = SpoolReport::default();
    let mut open: Option<(File, PathBuf, PathBuf)> = None;
    let fail = |report: &mut SpoolReport, what: String| {
        if report.error.is_none() {
            report.error = Some(what);
        }
    };
    for msg in rx.iter() {
        match msg {
            Msg::Open { name, .. } => {
                let path = dir.join(&name);
                let part = dir.join(format!(".{name}.part"));
                let created = OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o640)
                    .open(&part)
                    .and_then(|mut f| f.write_all(&header).map(|_| f));
                match created {
                    Ok(f) => open = Some((f, part, path)),
                    Err(e) => fail(&mut report, format!("{}: {e}", part.display())),
                }
            }
            Msg::Block { mut data, frames } => {
                let ok = match (&mut open, &report.error) {
                    (Some((f, part, _)), None) => match f.write_all(&data) {
                        Ok(()) => true,
                        Err(e) => {
                            fail(&mut report, format!("{}: {e}", part.display()));
                            false
                        }
                    },
                    _ => false,
                };
                if !ok {
                    report.frames_lost += frames;
                }
                data.clear();
                free.give(data);
            }
            Msg::Close { info } => {
                if let Some((f, part, path)) = open.take() {
                    let done = f.sync_data().and_then(|_| std::fs::rename(&part, &path));
                    match done {
                        Ok(()) if report.error.is_none() => report.files.push(info),
                        Ok(()) => {}
                        Err(e) => fail(&mut report, format!("{}: {e}", part.display())),
                    }
                }
            }
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ReaderOptions, TraceReader};

    fn opts(dir: &Path) -> SpoolOptions {
        SpoolOptions {
            dir: dir.to_path_buf(),
            prefix: "w000".into(),
            single_name: None,
            link: LinkType::ETHERNET,
            snaplen: 100,
            rotate_bytes: Some(10_000),
            rotate_ns: Some(1_000_000_000),
            block_bytes: 4096,
            blocks: 8,
            first_file_id: 7,
        }
    }

    #[test]
    fn rotates_and_points_records_at_their_frames() {
        let dir = std::env::temp_dir().join(format!("weir-spool-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (mut s, writer) = spool(opts(&dir)).unwrap();
        let mut placed = Vec::new();
        for i in 0..500u32 {
            let frame: Vec<u8> = (0..150).map(|b| (b + i) as u8).collect();
            let ts = 1_000_000_000 + i as i64 * 5_000_000; // 200 frames a second
            while s.backlog() > 6 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            placed.push((ts, s.append(ts, 150, &frame).expect("staged"), frame));
        }
        s.finish();
        let report = writer.join().unwrap();
        assert!(report.error.is_none());
        assert!(
            report.files.len() >= 5,
            "rotated by size: {} files",
            report.files.len()
        );
        assert_eq!(report.files.iter().map(|f| f.frames).sum::<u64>(), 500);
        assert!(report.files.iter().all(|f| f.bytes <= 10_000));
        for (ts, (id, offset), frame) in &placed {
            let info = report.files.iter().find(|f| f.id == *id).unwrap();
            let bytes = std::fs::read(dir.join(&info.name)).unwrap();
            let at = *offset as usize;
            let cap = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            assert_eq!(cap, 100, "snap length");
            let sec = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as i64;
            let ns = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as i64;
            assert_eq!(sec * 1_000_000_000 + ns, *ts);
            assert_eq!(&bytes[at + 16..at + 16 + cap], &frame[..100]);
        }
        // Every file reads back whole with weir's own reader.
        for f in &report.files {
            let mut r = TraceReader::open(dir.join(&f.name), ReaderOptions::default()).unwrap();
            let mut n = 0;
            while let Some(c) = r.next_chunk().unwrap() {
                n += c.frames.len() as u64;
            }
            assert_eq!(n, f.frames);
        }
        assert!(
            std::fs::read_dir(&dir).unwrap().all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".part"))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn drops_and_counts_when_the_writer_is_behind() {
        let dir = std::env::temp_dir().join(format!("weir-spool-drop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut o = opts(&dir);
        o.rotate_bytes = None;
        o.rotate_ns = None;
        o.blocks = 2;
        let (mut s, writer) = spool(o).unwrap();
        let frame = [0u8; 1000];
        let mut kept = 0u64;
        for i in 0..20_000 {
            if s.append(i, 1000, &frame).is_some() {
                kept += 1;
            }
        }
        assert_eq!(kept + s.dropped, 20_000);
        s.finish();
        let report = writer.join().unwrap();
        assert_eq!(report.files[0].frames, kept);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
