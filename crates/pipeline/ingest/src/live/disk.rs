//! The disk filling under the records, flows and stats writers: a flag
//! the writers and the stats loop share, and the space held back so that
//! every file can still close.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use store::dataset::SpaceReserve;
use store::{Dataset, StoreError};

/// Space a capture holds in its dataset's directory: enough for every
/// writer's last block and footer and the manifest. `--on-full stop` gives
/// it back when the disk fills, so that every file can close; `--on-full
/// drop` keeps it until the workers are done (files that cannot be written
/// are given up and counted instead), so that the last stats rows and the
/// final manifest always have room, however long the disk stays full.
const SPACE_RESERVE: usize = 4 << 20;

/// `--on-full drop`: the writers resume once the dataset's file system has
/// this much free again, room for a records row group or a stats file, so
/// that a writer does not start a file only to give it up at once.
const RESUME_FREE: u64 = SPACE_RESERVE as u64;

/// The disk filling under any writer but the pcap spool (which watches its
/// own writes): a flag, and the reserve. With `--on-full stop` the stats
/// loop ends the capture on the flag and the reserve is given back at once
/// so that every file can close; with `--on-full drop` the writers drop
/// and count while the flag is set, and the stats loop clears it once a
/// second if space has returned.
#[derive(Clone, Default)]
pub(super) struct DiskWatch {
    full: Arc<AtomicBool>,
    reserve: Option<Arc<SpaceReserve>>,
    /// `--on-full drop`.
    pub(super) drop: bool,
    /// The dataset, whose file system's free space says when to resume.
    dir: Option<PathBuf>,
}

impl DiskWatch {
    /// The watch over a capture's dataset (none: nothing to watch), with
    /// [`SPACE_RESERVE`] held in its directory.
    pub(super) fn for_dataset(dataset: Option<&Dataset>, drop: bool) -> Result<Self, StoreError> {
        Ok(DiskWatch {
            full: Default::default(),
            drop,
            dir: dataset.map(|d| d.root().to_path_buf()),
            reserve: match dataset {
                Some(d) => Some(Arc::new(SpaceReserve::hold(d.root(), SPACE_RESERVE)?)),
                None => None,
            },
        })
    }

    /// A records (or flows) writer failed: that ends the capture (the
    /// first error is kept in `error`); a full disk also gives the reserve
    /// back, so that every file can still close. With `--on-full drop` a
    /// full disk only makes the writer drop (and count) until space
    /// returns.
    pub(super) fn failed(&self, e: StoreError, stop: &AtomicBool, error: &mut Option<String>) {
        if e.is_disk_full() {
            self.hit();
            if self.drop {
                return;
            }
        }
        error.get_or_insert(e.to_string());
        stop.store(true, Ordering::Relaxed);
    }

    pub(super) fn hit(&self) {
        self.full.store(true, Ordering::SeqCst);
        if !self.drop {
            self.release();
        }
    }

    pub(super) fn release(&self) {
        if let Some(r) = &self.reserve {
            r.release();
        }
    }

    pub(super) fn is_full(&self) -> bool {
        self.full.load(Ordering::SeqCst)
    }

    /// `--on-full drop` and the disk is full: drop and count.
    pub(super) fn dropping(&self) -> bool {
        self.drop && self.is_full()
    }

    /// `--on-full drop`, once a second: space has returned when the file
    /// system has [`RESUME_FREE`] free; the writers then resume.
    pub(super) fn recheck(&self) {
        if self.dropping()
            && (self.dir.as_deref())
                .and_then(free_bytes)
                .is_some_and(|b| b >= RESUME_FREE)
        {
            self.full.store(false, Ordering::SeqCst);
        }
    }
}

/// Bytes an unprivileged writer may still use on the file system of `dir`.
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a NUL-terminated path and a buffer statvfs fills on success.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    // The casts widen on 32-bit targets, where these fields are narrower.
    #[allow(clippy::unnecessary_cast)]
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_stops_or_drops_and_drop_resumes_once_space_returns() {
        let dir = std::env::temp_dir();
        let stop = DiskWatch::default();
        assert!(!stop.is_full() && !stop.dropping());
        stop.hit();
        assert!(stop.is_full(), "--on-full stop: full until the end");
        assert!(!stop.dropping());
        stop.recheck();
        assert!(stop.is_full());

        let drop = DiskWatch {
            drop: true,
            dir: Some(dir.clone()),
            ..Default::default()
        };
        drop.hit();
        assert!(drop.dropping(), "--on-full drop: the writers drop");
        // The temporary directory has room again: writing resumes.
        assert!(free_bytes(&dir).is_some_and(|b| b >= RESUME_FREE));
        drop.recheck();
        assert!(!drop.is_full() && !drop.dropping());
    }

    #[test]
    fn free_bytes_of_a_missing_directory_is_unknown() {
        assert_eq!(
            free_bytes(std::path::Path::new("/nonexistent/weir/dir")),
            None
        );
    }
}
