//! The staging pool: page-aligned blocks not in use, shared by the capture
//! side (which fills them), the writer (which empties them) and the grower.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::outfile::{ALIGN, AlignedBuf};

/// Staging blocks not in use, last in first out: the block the writer
/// just emptied is the next one filled, while it is still in the cache. A
/// first-in-first-out pool would cycle through all of staging memory and
/// make both copies of every frame miss the cache. Blocks added while the
/// pool grows go to the bottom, behind the warm ones, and the bottom ones
/// are given back first.
#[derive(Clone)]
pub(super) struct FreeBlocks {
    list: Arc<(Mutex<VecDeque<AlignedBuf>>, Condvar)>,
    /// Blocks made so far and not given back, free or not.
    made: Arc<AtomicUsize>,
    /// The most there may be (`--buffer`).
    max: usize,
    /// A block's capacity: a block of another size (one made for a frame
    /// larger than a block) is freed when given back.
    cap: usize,
}

impl FreeBlocks {
    /// A pool of at most `max` blocks of `bytes` of frames, `ready` of
    /// them made (and faulted in) now.
    pub(super) fn ready(max: usize, ready: usize, bytes: usize) -> FreeBlocks {
        let free = FreeBlocks::new(max, block_capacity(bytes));
        for _ in 0..ready {
            free.add(staging_block(bytes));
        }
        free
    }

    pub(super) fn new(max: usize, cap: usize) -> FreeBlocks {
        FreeBlocks {
            list: Arc::new((Mutex::new(VecDeque::with_capacity(max)), Condvar::new())),
            made: Arc::new(AtomicUsize::new(0)),
            max,
            cap,
        }
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<AlignedBuf>> {
        self.list.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// A free block, and how many are left free.
    #[inline]
    pub(super) fn take(&self) -> (Option<AlignedBuf>, usize) {
        let mut list = self.lock();
        let b = list.pop_back();
        (b, list.len())
    }
    /// A free block, waiting up to `limit` for the writer to return one
    /// (or the pool to grow).
    pub(super) fn take_within(&self, limit: Duration) -> Option<AlignedBuf> {
        let deadline = Instant::now() + limit;
        let mut list = self.lock();
        loop {
            if let Some(b) = list.pop_back() {
                return Some(b);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            list = self
                .list
                .1
                .wait_timeout(list, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
    #[inline]
    pub(super) fn give(&self, mut b: AlignedBuf) {
        if b.capacity() != self.cap {
            return;
        }
        b.clear();
        self.lock().push_back(b);
        self.list.1.notify_one();
    }
    /// A new block, at the bottom of the pool.
    pub(super) fn add(&self, b: AlignedBuf) {
        // Counted before it can be seen in the pool, so that a reader of
        // the pool's length and then of `made` never finds more free
        // blocks than made ones.
        let mut list = self.lock();
        self.made.fetch_add(1, Ordering::Relaxed);
        list.push_front(b);
        drop(list);
        self.list.1.notify_one();
    }
    /// Takes the coldest free block out of the pool for good, if more than
    /// `keep` are made and it is free.
    pub(super) fn remove_cold(&self, keep: usize) -> Option<AlignedBuf> {
        let mut list = self.lock();
        if self.made() <= keep {
            return None;
        }
        let b = list.pop_front()?;
        self.made.fetch_sub(1, Ordering::Relaxed);
        Some(b)
    }
    /// Blocks free now.
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
    /// Blocks made and not given back, free or not.
    #[inline]
    pub(super) fn made(&self) -> usize {
        self.made.load(Ordering::Relaxed)
    }
    /// The most blocks there may be.
    #[inline]
    pub(super) fn max(&self) -> usize {
        self.max
    }
}

/// Staging written before a spool starts: enough for the writer's usual
/// lag, and fast to write (fresh memory is slow on VMs whose host takes
/// free pages back, and a capture must be recording within 300 ms of its
/// launch). More is added only while the writer falls behind.
pub const READY_STAGING_BYTES: usize = 8 << 20;

/// Staging added back to the system once the writer has kept up this long.
pub(super) const SHRINK_AFTER: Duration = Duration::from_secs(5);

/// A staging block: page-aligned, so that the writer hands it to an
/// O_DIRECT file as it is, with a lead of up to 4 KiB before its frames
/// ([`super::Spool::append`]), and every page faulted in (not just allocated:
/// fresh memory faults in slowly on VMs that hand free pages back to the
/// host, the first time the capture path fills the block). One byte a
/// page is enough: filling the whole block would push megabytes through
/// the caches the capture thread is using (at 64-byte frames that tripled
/// its cost per frame while staging grew).
pub(super) fn staging_block(bytes: usize) -> AlignedBuf {
    AlignedBuf::touched(block_capacity(bytes))
}

/// The capacity of a staging block of `bytes` of frames.
pub(super) fn block_capacity(bytes: usize) -> usize {
    (bytes + ALIGN).next_multiple_of(ALIGN)
}
