//! The hand-on of written blocks to a reader of their frames (the records
//! of a capture), and what the reader gets: blocks, or the spans it missed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crossbeam_channel::{Receiver, unbounded};

use super::pool::FreeBlocks;
use crate::outfile::AlignedBuf;

/// Written blocks handed on to a reader of the frames (the records of a
/// capture), so that the frames are copied once, into staging, and read
/// from there off the capture thread. A reader that falls behind never
/// holds the pcap path up: once it holds `most` blocks, or while staging
/// runs short, each further block goes back to the pool at once and
/// the reader is told only which span of which file it missed
/// ([`Staged::Missed`]), to read from the file later. With `--compress
/// auto` the blocks it holds count as the writer's backlog, so
/// compression gives way before the reader misses a block.
#[derive(Clone)]
pub struct HandOn {
    tx: crossbeam_channel::Sender<Staged>,
    held: Arc<AtomicUsize>,
    most: usize,
}

impl std::fmt::Debug for HandOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandOn").field("most", &self.most).finish()
    }
}

impl HandOn {
    /// A hand-on that lets its reader hold at most `most` blocks (0: none,
    /// the reader is told only what it missed), and the reader's end.
    pub fn new(most: usize) -> (HandOn, Receiver<Staged>) {
        let (tx, rx) = unbounded();
        let held = Arc::new(AtomicUsize::new(0));
        (HandOn { tx, held, most }, rx)
    }

    /// How far behind the reader is, on `--compress auto`'s ladder
    /// ([`crate::seekable::auto_method`]): the blocks it holds as a share of
    /// its budget, scaled so that a reader holding all it may puts the
    /// ladder on its last rung (stored). On a busy core records fall
    /// behind for the CPU that compression takes, and compression gives
    /// way first, as it does for the capture.
    pub(super) fn backlog(&self) -> f64 {
        let held = self.held.load(Ordering::Relaxed) as f64;
        let stored_from = crate::seekable::AUTO_LADDER[crate::seekable::AUTO_LADDER.len() - 2].1;
        held / self.most.max(1) as f64 * stored_from
    }

    /// Whether staging is running short: the blocks free or still to be
    /// made are fewer than twice what the reader may hold. The reader then
    /// gets no block (it is told what it missed), so that it never holds
    /// memory the capture needs. Short of that it gets every block, even
    /// while the writer has a backlog: the blocks are written already and
    /// the reader runs on what CPU is left.
    pub(super) fn staging_short(&self, free: &FreeBlocks) -> bool {
        let room = free.max().saturating_sub(free.made()) + free.len();
        room < 2 * self.most.max(1)
    }

    /// A written block, `frames` frames from `lead` on, at `offset` in file
    /// `file_id`: goes to the reader, or (it holds too many, or staging
    /// runs `short`) back to the pool, and the reader is told which span
    /// of which file it missed.
    pub(super) fn pass(
        &self,
        free: &FreeBlocks,
        data: AlignedBuf,
        lead: usize,
        frames: u64,
        (file_id, offset): (u32, u64),
        short: bool,
    ) {
        if !short && self.held.load(Ordering::Relaxed) < self.most {
            self.held.fetch_add(1, Ordering::Relaxed);
            let b = StagedBlock {
                data: Some(data),
                lead,
                file_id,
                offset,
                frames,
                home: free.clone(),
                held: self.held.clone(),
            };
            // A reader that has gone drops the block: back to the pool.
            let _ = self.tx.send(Staged::Block(b));
            return;
        }
        let _ = self.tx.send(Staged::Missed(MissedSpan {
            file_id,
            from: offset,
            to: offset + (data.len() - lead) as u64,
            frames,
        }));
        free.give(data);
    }
}

/// What a spool's writer hands on, in the order the frames were staged.
pub enum Staged {
    Block(StagedBlock),
    Missed(MissedSpan),
}

/// Frames of a pcap file the reader was not handed (it held too many
/// blocks): `from..to` in the file's decompressed pcap stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MissedSpan {
    pub file_id: u32,
    pub from: u64,
    pub to: u64,
    pub frames: u64,
}

/// A written staging block: its frames as they are in the pcap file. It
/// goes back to the spool's pool when dropped.
pub struct StagedBlock {
    /// Taken when the block goes back to the pool.
    data: Option<AlignedBuf>,
    /// Where the frames start in `data`.
    lead: usize,
    /// The file the frames are in, and the first frame's offset there.
    pub file_id: u32,
    pub offset: u64,
    pub frames: u64,
    home: FreeBlocks,
    held: Arc<AtomicUsize>,
}

impl StagedBlock {
    /// The block's frames with their offsets in the file.
    pub fn frames(&self) -> StagedFrames<'_> {
        StagedFrames {
            bytes: (self.data.as_ref()).map_or(&[][..], |d| d.filled_from(self.lead)),
            at: 0,
            offset: self.offset,
        }
    }
}

impl Drop for StagedBlock {
    fn drop(&mut self) {
        if let Some(data) = self.data.take() {
            self.home.give(data);
        }
        self.held.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A frame of a [`StagedBlock`].
#[derive(Clone, Copy, Debug)]
pub struct StagedFrame<'a> {
    /// The frame's record offset in its file.
    pub offset: u64,
    pub ts_ns: i64,
    pub wire_len: u32,
    pub data: &'a [u8],
}

/// The frames of a staging block, in the spool's own record layout
/// (little-endian, nanoseconds).
pub struct StagedFrames<'a> {
    bytes: &'a [u8],
    at: usize,
    offset: u64,
}

impl<'a> Iterator for StagedFrames<'a> {
    type Item = StagedFrame<'a>;
    fn next(&mut self) -> Option<StagedFrame<'a>> {
        let h = self.bytes.get(self.at..self.at + 16)?;
        let word = |i: usize| u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]);
        let cap = word(8) as usize;
        let data = self.bytes.get(self.at + 16..self.at + 16 + cap)?;
        let frame = StagedFrame {
            offset: self.offset,
            ts_ns: word(0) as i64 * 1_000_000_000 + word(4) as i64,
            wire_len: word(12),
            data,
        };
        self.at += 16 + cap;
        self.offset += 16 + cap as u64;
        Some(frame)
    }
}
