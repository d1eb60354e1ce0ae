//! Mapped traces that shrink under the reader. Touching a page of a
//! mapping past the end of its file raises SIGBUS, which kills the
//! process; a trace truncated or rewritten during `weir convert` would do
//! that. While a guarded map is alive, a SIGBUS inside it is answered by
//! mapping a page of zeros at the faulting address and counting the event:
//! the access goes on, and the reader, which checks the file's size and
//! the count at every chunk, stops with an error that says what happened.
//! A SIGBUS anywhere else still ends the process as it would have.

use std::fs::File;
use std::ops::Deref;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Address ranges of the live guarded maps: (start, end), 0 when free.
const SLOTS: usize = 64;
static RANGES: [(AtomicUsize, AtomicUsize); SLOTS] =
    [const { (AtomicUsize::new(0), AtomicUsize::new(0)) }; SLOTS];
/// Faults answered with zeros, ever, per slot: a reader looks only at its
/// own map's (another map shrinking says nothing of this one).
static FAULTS: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static INSTALL: Once = Once::new();

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let inside = RANGES.iter().position(|(s, e)| {
        let (s, e) = (s.load(Ordering::SeqCst), e.load(Ordering::SeqCst));
        s != 0 && addr >= s && addr < e
    });
    if let Some(slot) = inside {
        // SAFETY: sysconf and mmap are plain system calls; the page lies in
        // a read-only map of ours, which a page of zeros replaces.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let at = addr / page * page;
        let p = unsafe {
            libc::mmap(
                at as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            FAULTS[slot].fetch_add(1, Ordering::SeqCst);
            return;
        }
    }
    // Not ours (or the page could not be replaced): the default action,
    // taken when the access runs again on return.
    // SAFETY: resetting a signal's disposition is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGBUS, libc::SIG_DFL);
    }
}

fn install() {
    INSTALL.call_once(|| {
        // SAFETY: a zeroed sigaction with our handler and SA_SIGINFO is a
        // valid argument; the old disposition is not needed.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigbus as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_NODEFER;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
        }
    });
}

/// A read-only map of a whole file, guarded against the file shrinking.
#[derive(Debug)]
pub struct GuardedMap {
    map: memmap2::Mmap,
    /// Its slot in `RANGES`, if one was free (else it is unguarded, as a
    /// plain map: 64 traces mapped at once is far beyond any conversion).
    slot: Option<usize>,
}

impl GuardedMap {
    /// Maps `file`.
    ///
    /// # Safety
    /// As for `memmap2::Mmap::map`: the file must not be modified while
    /// mapped, except that it may shrink (what this type is for).
    pub unsafe fn map(file: &File) -> std::io::Result<GuardedMap> {
        install();
        // SAFETY: the caller's promise, above.
        let map = unsafe { memmap2::Mmap::map(file) }?;
        let (start, end) = (map.as_ptr() as usize, map.as_ptr() as usize + map.len());
        let slot = (0..SLOTS).find(|&i| {
            RANGES[i]
                .0
                .compare_exchange(0, start, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        });
        if let Some(i) = slot {
            RANGES[i].1.store(end, Ordering::SeqCst);
        }
        Ok(GuardedMap { map, slot })
    }

    /// Faults in this map's slot so far (a reader compares it between
    /// chunks); always 0 for an unguarded map.
    pub(crate) fn faults(&self) -> u64 {
        self.slot.map_or(0, |i| FAULTS[i].load(Ordering::SeqCst))
    }

    pub fn map_ref(&self) -> &memmap2::Mmap {
        &self.map
    }
}

impl Deref for GuardedMap {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for GuardedMap {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            RANGES[i].1.store(0, Ordering::SeqCst);
            RANGES[i].0.store(0, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_map_whose_file_shrinks_reads_zeros_instead_of_dying() {
        let dir = std::env::temp_dir().join(format!("weir-mapguard-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        drop(f);
        let f = File::open(&path).unwrap();
        // SAFETY: the test shrinks the file on purpose, which is what the
        // guard answers for.
        let map = unsafe { GuardedMap::map(&f) }.unwrap();
        assert_eq!(map[1000], 7);
        let before = map.faults();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(4096)
            .unwrap();
        // Past the new end: zeros, and the fault is counted.
        let far = std::hint::black_box(&map[..])[900_000];
        assert_eq!(far, 0);
        assert!(map.faults() > before);
        assert_eq!(map[100], 7);
        drop(map);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
