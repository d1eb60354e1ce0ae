//! The memory grower: a thread that adds staging blocks while the writer
//! falls behind and gives them back once it has kept up.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::pool::{FreeBlocks, SHRINK_AFTER, staging_block};

/// The staging pool's size follows the writer's backlog: grown while few
/// blocks are free (a quarter more at a time, up to the pool's most),
/// given back down to `ready` blocks once the writer has kept up for
/// [`SHRINK_AFTER`]. Woken by the capture side when it finds few free
/// blocks; looks again ten times a second.
pub(super) struct Grower {
    free: FreeBlocks,
    bytes: usize,
    ready: usize,
    /// [`SHRINK_AFTER`], but for tests.
    shrink_after: Duration,
    stop: Arc<AtomicBool>,
}

/// The grower's thread, as the capture side holds it: woken when few
/// blocks are free, stopped (and waited for) when the spool goes.
pub(super) struct GrowerHandle {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl GrowerHandle {
    /// The writer is falling behind: more staging.
    #[inline]
    pub(super) fn wake(&self) {
        if let Some(g) = &self.thread {
            g.thread().unpark();
        }
    }

    /// It stops at its next block; waited for, so that a spool given up
    /// (a capture that failed to start) leaves no thread running.
    pub(super) fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(g) = self.thread.take() {
            g.thread().unpark();
            let _ = g.join();
        }
    }
}

impl Drop for GrowerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Grower {
    /// The grower of `free`, when it may hold more than the `ready` blocks
    /// it has (of `bytes` of frames each); named after the spool's prefix.
    pub(super) fn start(
        free: &FreeBlocks,
        bytes: usize,
        ready: usize,
        prefix: &str,
    ) -> io::Result<GrowerHandle> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut thread = None;
        if free.max() > ready {
            let g = Grower {
                free: free.clone(),
                bytes,
                ready,
                shrink_after: SHRINK_AFTER,
                stop: stop.clone(),
            };
            thread = Some(
                std::thread::Builder::new()
                    .name(format!("weir-stage-{prefix}"))
                    .spawn(move || g.run())?,
            );
        }
        Ok(GrowerHandle { stop, thread })
    }

    /// Free blocks below which the pool grows.
    #[inline]
    pub(super) fn low_water(made: usize) -> usize {
        (made / 4).max(4)
    }

    fn run(self) {
        let mut idle_since: Option<Instant> = None;
        while !self.stop.load(Ordering::Relaxed) {
            let (free, made) = (self.free.len(), self.free.made());
            if free < Grower::low_water(made) && made < self.free.max() {
                idle_since = None;
                let more = (made / 4).max(8).min(self.free.max() - made);
                for _ in 0..more {
                    if self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    self.free.add(staging_block(self.bytes));
                }
                continue;
            }
            // All but the block being filled are free: the writer keeps up.
            let caught_up = free + 1 >= made;
            match idle_since {
                _ if !caught_up || made <= self.ready => idle_since = None,
                None => idle_since = Some(Instant::now()),
                Some(t) if t.elapsed() >= self.shrink_after => {
                    let mut given = 0;
                    while self.free.remove_cold(self.ready).is_some() {
                        given += 1;
                    }
                    if given > 0 {
                        give_back_freed_memory();
                    }
                    idle_since = None;
                }
                Some(_) => {}
            }
            std::thread::park_timeout(Duration::from_millis(100));
        }
    }
}

/// Returns memory freed to the allocator to the system (glibc keeps freed
/// heap memory for reuse otherwise).
fn give_back_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory; any argument is valid.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spool::pool::block_capacity;

    /// Waits (at most 30 s) until `cond` holds.
    fn eventually(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !cond() {
            assert!(Instant::now() < deadline, "never: {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn staging_grows_while_the_writer_is_behind_and_shrinks_after() {
        let free = FreeBlocks::new(64, block_capacity(4096));
        for _ in 0..4 {
            free.add(staging_block(4096));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let g = Grower {
            free: free.clone(),
            bytes: 4096,
            ready: 4,
            shrink_after: Duration::from_millis(50),
            stop: stop.clone(),
        };
        // A writer that keeps up: the pool stays as it is.
        let h = std::thread::spawn(move || g.run());
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(free.made(), 4);
        // The writer holds every block: more are made, up to the most.
        let mut held = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while free.made() < 64 {
            assert!(Instant::now() < deadline, "staging did not grow");
            if let (Some(b), _) = free.take() {
                held.push(b);
            }
            h.thread().unpark();
            std::thread::yield_now();
        }
        assert_eq!(free.made(), 64);
        // It caught up: given back down to what was ready.
        for b in held {
            free.give(b);
        }
        eventually("staging given back", || free.made() == 4);
        assert_eq!(free.len(), 4);
        stop.store(true, Ordering::Relaxed);
        h.thread().unpark();
        h.join().unwrap();
    }
}
