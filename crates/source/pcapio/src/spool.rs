//! Pcap files written off the capture path.
//!
//! A capture worker stages records into blocks taken from a fixed pool
//! ([`Spool::append`]); full blocks go to a writer thread that compresses
//! each (or not, per `--compress`), appends it to the current file and
//! hands the block on (to the records) or back. The blocks are
//! page-aligned and laid out so that an uncompressed one goes to an
//! O_DIRECT file as it is ([`crate::outfile::OutFile::append_staged`]):
//! a frame is copied once, from the ring into staging. Rotation by size or time is
//! decided on the worker, so each frame's file and offset (in the
//! decompressed pcap stream) are known the moment it is staged. When the
//! writer falls behind and the pool is empty, frames are dropped and
//! counted, unless the worker has made the spool patient (its ring has
//! room): then it waits for a block, at most 20 ms.
//!
//! Files are written as hidden `.NAME.part` and renamed when complete, with
//! mode 0640. A write error (a full disk) closes the current file validly
//! at its last whole block; the frames that could not be written are
//! counted, and the worker drops (and counts) frames until a new file can
//! be opened, trying once a second, unless the capture is to stop.
//!
//! Its parts, each behind a few functions: `pool` (the staging blocks not
//! in use), `grower` (the thread that adds blocks while the writer is
//! behind and gives them back after), `staging` (the worker's side,
//! [`Spool`]), `writer` (the file writer thread: compression, rotation,
//! rings, write errors) and `hand_on` (written blocks passed on to the
//! records, [`HandOn`]).

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::unbounded;
use wire::LinkType;

use crate::outfile::AlignedBuf;
use crate::retention::Retention;
use crate::seekable::{Codec, Method};

mod grower;
mod hand_on;
mod pool;
mod staging;
#[cfg(test)]
mod tests;
mod writer;

pub use hand_on::{HandOn, MissedSpan, Staged, StagedBlock, StagedFrame, StagedFrames};
pub use pool::READY_STAGING_BYTES;
pub use staging::Spool;

/// What to do when the disk is full (`--on-full`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnFull {
    /// End the capture cleanly.
    #[default]
    Stop,
    /// Keep capturing; pcap frames are dropped (and counted) until space
    /// returns.
    Drop,
}

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
    /// Start a new file before one would exceed this many bytes (of pcap,
    /// before compression).
    pub rotate_bytes: Option<u64>,
    /// Start a new file when a frame is this much later than the file's first.
    pub rotate_ns: Option<i64>,
    pub block_bytes: usize,
    /// Staging memory is `blocks × block_bytes`.
    pub blocks: usize,
    /// The first file's id; later files count up (ids go into records).
    pub first_file_id: u32,
    pub codec: Codec,
    /// Write with O_DIRECT where the filesystem allows it.
    pub direct: bool,
    pub on_full: OnFull,
    pub retention: Option<Arc<Retention>>,
    /// Where each block goes once it is written (the packet records of a
    /// capture), instead of straight back to the pool.
    pub hand_on: Option<HandOn>,
}

impl SpoolOptions {
    /// Options with the defaults for everything but where and what.
    pub fn new(dir: PathBuf, prefix: String, link: LinkType, snaplen: u32) -> SpoolOptions {
        SpoolOptions {
            dir,
            prefix,
            single_name: None,
            link,
            snaplen,
            rotate_bytes: None,
            rotate_ns: None,
            block_bytes: 256 << 10,
            blocks: 64,
            first_file_id: 0,
            codec: Codec::None,
            direct: false,
            on_full: OnFull::Stop,
            retention: None,
            hand_on: None,
        }
    }
}

/// A finished pcap file.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PcapFileInfo {
    /// The id records use in `pcap_file`.
    pub id: u32,
    /// File name (relative to the spool's directory).
    pub name: String,
    pub frames: u64,
    /// Bytes of pcap (decompressed).
    pub bytes: u64,
    /// Bytes the file takes (compressed, with its seek table).
    pub stored_bytes: u64,
    pub ts_first: Option<i64>,
    pub ts_last: Option<i64>,
    /// Blocks written with each compression method (`zstd:3`, `stored`).
    pub methods: BTreeMap<String, u64>,
    /// Size and SHA-256 of the file, taken as it was written (none for a
    /// file a write error cut back).
    #[serde(skip)]
    pub digest: Option<util::digest::FileDigest>,
}

/// What the writer thread reports when it ends.
#[derive(Debug, Default)]
pub struct SpoolReport {
    pub files: Vec<PcapFileInfo>,
    /// The first write error, if any.
    pub error: Option<String>,
    /// Staged frames that could not be written (after an error).
    pub frames_lost: u64,
    /// Whether writes bypassed the page cache (O_DIRECT).
    pub direct: bool,
}

/// What the writer publishes while it runs, for the worker and the stats.
#[derive(Debug, Default)]
pub struct SpoolShared {
    /// The writer has no file to write to (a write error, a full disk).
    failed: AtomicBool,
    /// Of those, because the disk was full: cleared when a file opens.
    pub disk_full: AtomicBool,
    /// `--on-full stop` and the disk filled: the capture should end.
    pub stop_wanted: AtomicBool,
    /// Staged frames the writer could not write.
    pub frames_lost: AtomicU64,
    /// Bytes of pcap in, bytes to the file out (after compression).
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// The method of the latest block ([`Method::code`]); `i32::MIN` when
    /// nothing is compressed.
    pub method: AtomicI32,
    /// Files finished so far, for a running capture's manifest.
    finished: Mutex<Vec<PcapFileInfo>>,
}

impl SpoolShared {
    /// The files finished so far (under their final names).
    pub fn finished_files(&self) -> Vec<PcapFileInfo> {
        self.finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The latest block's compression method, if the spool compresses.
    pub fn method(&self) -> Option<Method> {
        let c = self.method.load(Ordering::Relaxed);
        (c != i32::MIN).then(|| Method::from_code(c as i16))
    }

    /// Whether the writer has no file to write to.
    #[inline]
    fn has_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// The writer has no file to write to, the disk `full` or not; with
    /// `--on-full stop` a full disk ends the capture.
    fn writer_failed(&self, full: bool, on_full: OnFull) {
        self.failed.store(true, Ordering::Relaxed);
        self.disk_full.store(full, Ordering::Relaxed);
        if full && on_full == OnFull::Stop {
            self.stop_wanted.store(true, Ordering::Relaxed);
        }
    }

    /// The writer has a file again.
    fn writer_opened(&self) {
        self.failed.store(false, Ordering::Relaxed);
        self.disk_full.store(false, Ordering::Relaxed);
    }

    /// A file is finished, under its final name.
    fn file_finished(&self, info: PcapFileInfo) {
        self.finished
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(info);
    }
}

enum Msg {
    Open {
        name: String,
        id: u32,
    },
    Block {
        data: AlignedBuf,
        /// Where the frames start in `data` (see [`Spool::append`]).
        lead: usize,
        frames: u64,
        ts_first: i64,
        ts_last: i64,
        /// The oldest frame in the block.
        ts_min: i64,
    },
    Close,
}

/// Starts a spool: its writer thread and the staging pool, of which
/// [`READY_STAGING_BYTES`] (at least two blocks) are written here, so the
/// capture path never meets fresh memory; more is added only while the
/// writer falls behind, up to `blocks`.
pub fn spool(opts: SpoolOptions) -> io::Result<(Spool, JoinHandle<SpoolReport>)> {
    let blocks = opts.blocks.max(2);
    let ready = blocks.min((READY_STAGING_BYTES / opts.block_bytes.max(1)).max(2));
    let free = pool::FreeBlocks::ready(blocks, ready, opts.block_bytes);
    let mut grower = grower::Grower::start(&free, opts.block_bytes, ready, &opts.prefix)?;
    let shared = Arc::new(SpoolShared {
        method: AtomicI32::new(i32::MIN),
        ..Default::default()
    });
    let (tx, rx) = unbounded();
    let writer = writer::FileWriter::new(&opts, shared.clone(), free.clone());
    let handle = match std::thread::Builder::new()
        .name(format!("weir-pcap-{}", opts.prefix))
        .spawn(move || writer.run(rx))
    {
        Ok(h) => h,
        Err(e) => {
            grower.stop();
            return Err(e);
        }
    };
    Ok((Spool::new(opts, tx, free, shared, grower), handle))
}
