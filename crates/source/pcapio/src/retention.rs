//! Retention of finished pcap files: `--max-disk` and `--max-age`.
//!
//! Every writer of a capture reports the files it finishes and the bytes of
//! the file it has open to one shared [`Retention`]; when the total passes
//! the limit, or a file's newest frame is older than the age limit, the
//! oldest finished files (by their newest frame) are deleted first. A file
//! still being written is never deleted. What was removed, and why, is
//! kept for the manifest.
//!
//! When the dataset is also uploaded (`--upload`), retention applies to
//! the local copy only: a file goes only once it and a manifest naming it
//! are in the bucket, and it stays in the dataset (held there). Files not
//! yet uploaded are kept past the limits until they are.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use util::storage::Publisher;

/// The wall clock, in ns since the epoch (what `enforce` takes).
pub(crate) fn wall_clock_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// A file retention deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RemovedFile {
    pub id: u32,
    /// File name (relative to its directory).
    pub name: String,
    pub frames: u64,
    /// Bytes it took on disk.
    pub stored_bytes: u64,
    pub ts_first: Option<i64>,
    pub ts_last: Option<i64>,
    /// `max-disk` or `max-age`.
    pub reason: String,
    /// The file written over this one's space, when it was reused in
    /// place rather than deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overwritten_by: Option<String>,
}

#[derive(Debug)]
struct Kept {
    path: PathBuf,
    file: RemovedFile,
}

/// Limits shared by all the writers of one capture.
#[derive(Debug, Default)]
pub struct Retention {
    pub max_bytes: Option<u64>,
    pub max_age_ns: Option<i64>,
    /// The dataset's uploader, and the files' directory in the dataset
    /// (`pcap`): only files it lets go are deleted, and they stay in the
    /// dataset.
    uploaded_first: Option<(Arc<dyn Publisher>, String)>,
    /// Bytes in files still being written, all writers together.
    open_bytes: AtomicU64,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    kept: Vec<Kept>,
    kept_bytes: u64,
    removed: Vec<RemovedFile>,
    errors: Vec<String>,
    /// Local copies of uploaded files deleted.
    let_go: u64,
}

impl Retention {
    pub fn new(max_bytes: Option<u64>, max_age_ns: Option<i64>) -> Retention {
        Retention {
            max_bytes,
            max_age_ns,
            ..Default::default()
        }
    }

    /// Retention of the local copies of an uploaded dataset: a file goes
    /// only once `uploader` lets it go (it is in the bucket); `dir` is
    /// the files' directory in the dataset. Each manifest the uploader
    /// gets up runs the limits again, so that files sealed before their
    /// upload was confirmed go then, not at the next file's close (there
    /// may be none: the capture ended).
    pub fn uploaded_first(mut self, uploader: Arc<dyn Publisher>, dir: &str) -> Arc<Retention> {
        self.uploaded_first = Some((uploader.clone(), dir.to_string()));
        let r = Arc::new(self);
        let weak = Arc::downgrade(&r);
        uploader.on_commit(Box::new(move || {
            if let Some(r) = weak.upgrade() {
                r.enforce(wall_clock_ns());
            }
        }));
        r
    }

    /// A writer's open file grew (or shrank, when it closed) by `delta`.
    pub fn open_bytes_changed(&self, delta: i64) {
        if delta >= 0 {
            self.open_bytes.fetch_add(delta as u64, Ordering::Relaxed);
        } else {
            self.open_bytes
                .fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
        }
    }

    /// A finished file, now under its final name.
    pub fn file_closed(&self, path: PathBuf, file: RemovedFile) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.kept_bytes += file.stored_bytes;
        s.kept.push(Kept { path, file });
    }

    /// Deletes what the limits say must go; `now_ns` is the wall clock.
    pub fn enforce(&self, now_ns: i64) {
        if self.max_bytes.is_none() && self.max_age_ns.is_none() {
            return;
        }
        let open = self.open_bytes.load(Ordering::Relaxed);
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Oldest newest-frame first.
        s.kept
            .sort_by_key(|k| (k.file.ts_last.unwrap_or(i64::MIN), k.file.id));
        let mut at = 0;
        while let Some(oldest) = s.kept.get(at) {
            let reason = if self.max_bytes.is_some_and(|max| s.kept_bytes + open > max) {
                "max-disk"
            } else if self.max_age_ns.is_some_and(|age| {
                oldest
                    .file
                    .ts_last
                    .is_some_and(|t| now_ns.saturating_sub(t) > age)
            }) {
                "max-age"
            } else {
                break;
            };
            // Uploaded: only the local copy goes, once it is in the bucket.
            let held = match &self.uploaded_first {
                Some((uploader, dir)) => {
                    if !uploader.let_go(&format!("{dir}/{}", oldest.file.name)) {
                        at += 1;
                        continue;
                    }
                    true
                }
                None => false,
            };
            let k = s.kept.remove(at);
            s.kept_bytes -= k.file.stored_bytes;
            match std::fs::remove_file(&k.path) {
                Ok(()) if held => s.let_go += 1,
                Ok(()) => {
                    let mut f = k.file;
                    f.reason = reason.to_string();
                    s.removed.push(f);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => s.errors.push(format!(
                    "{}: could not delete for retention: {e}",
                    k.path.display()
                )),
            }
        }
    }

    /// Local copies of uploaded files deleted so far.
    pub fn let_go(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).let_go
    }

    /// The oldest finished file, when starting one of `need` more bytes
    /// would take the total over the size limit: its space is reused by
    /// the file `new_name` (the caller renames and overwrites it). It is
    /// accounted as removed.
    pub fn take_for_reuse(&self, need: u64, new_name: &str) -> Option<(PathBuf, RemovedFile)> {
        if self.uploaded_first.is_some() {
            // A file written over would be lost to the bucket's readers
            // too; uploaded files are deleted instead, once they are up.
            return None;
        }
        let max = self.max_bytes?;
        let open = self.open_bytes.load(Ordering::Relaxed);
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.kept_bytes + open + need <= max || s.kept.is_empty() {
            return None;
        }
        let oldest = (0..s.kept.len()).min_by_key(|&i| {
            (
                s.kept[i].file.ts_last.unwrap_or(i64::MIN),
                s.kept[i].file.id,
            )
        })?;
        let k = s.kept.remove(oldest);
        s.kept_bytes -= k.file.stored_bytes;
        let mut f = k.file;
        f.reason = "max-disk".to_string();
        f.overwritten_by = Some(new_name.to_string());
        s.removed.push(f.clone());
        Some((k.path, f))
    }

    /// A file taken for reuse could not be reused after all (it vanished,
    /// or the rename failed): it is gone, as if deleted.
    pub fn reuse_failed(&self, name: &str) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = s.removed.iter_mut().rev().find(|f| f.name == name) {
            f.overwritten_by = None;
        }
    }

    /// Files deleted so far, and deletions that failed.
    pub fn removed(&self) -> (Vec<RemovedFile>, Vec<String>) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (s.removed.clone(), s.errors.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_go_first_and_open_files_count() {
        let dir = std::env::temp_dir().join(format!("weir-retention-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let r = Retention::new(Some(250), Some(1_000));
        for (id, ts) in [(2u32, 300i64), (1, 100), (3, 500)] {
            let path = dir.join(format!("f{id}"));
            std::fs::write(&path, [0u8; 100]).unwrap();
            r.file_closed(
                path,
                RemovedFile {
                    id,
                    name: format!("f{id}"),
                    stored_bytes: 100,
                    ts_last: Some(ts),
                    ..Default::default()
                },
            );
        }
        r.open_bytes_changed(40);
        r.enforce(600);
        let (gone, errors) = r.removed();
        assert!(errors.is_empty());
        // 300 + 40 open > 250: the file with the oldest frames goes; then
        // 200 + 40 fits.
        assert_eq!(gone.iter().map(|f| f.id).collect::<Vec<_>>(), [1]);
        assert_eq!(gone[0].reason, "max-disk");
        assert!(!dir.join("f1").exists() && dir.join("f2").exists());
        // By age: f2's newest frame (300) is more than 1000 ns old at 1400.
        r.enforce(1_400);
        let (gone, _) = r.removed();
        assert_eq!(gone.iter().map(|f| f.id).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(gone[1].reason, "max-age");
        assert!(dir.join("f3").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// An uploader that has the files it is given in its bucket; `commit`
    /// calls the hooks as a manifest reaching the bucket would.
    #[derive(Default)]
    struct InBucket(Mutex<Vec<String>>, Mutex<Vec<util::storage::CommitHook>>);

    impl std::fmt::Debug for InBucket {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "InBucket({:?})", self.0)
        }
    }

    impl InBucket {
        fn commit(&self, up: &[&str]) {
            self.0
                .lock()
                .unwrap()
                .extend(up.iter().map(|p| p.to_string()));
            for hook in self.1.lock().unwrap().iter() {
                hook();
            }
        }
    }

    impl Publisher for InBucket {
        fn published(&self, _: &[util::storage::Sealed], _: &[u8], _: Option<&[u8]>, _: &[String]) {
        }
        fn held_elsewhere(&self) -> Vec<util::storage::Listed> {
            Vec::new()
        }
        fn let_go(&self, rel: &str) -> bool {
            self.0.lock().unwrap().iter().any(|p| p == rel)
        }
        fn on_commit(&self, hook: util::storage::CommitHook) {
            self.1.lock().unwrap().push(hook);
        }
        fn figures(&self) -> util::storage::UploadFigures {
            Default::default()
        }
        fn drain(&self, _: std::time::Duration) -> bool {
            true
        }
    }

    #[test]
    fn an_uploaded_dataset_loses_only_local_copies_of_files_in_the_bucket() {
        let dir = std::env::temp_dir().join(format!("weir-retention-up-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bucket = Arc::new(InBucket::default());
        bucket.0.lock().unwrap().push("pcap/f2".to_string());
        let r = Retention::new(Some(150), None).uploaded_first(bucket.clone(), "pcap");
        for id in 1..=3u32 {
            let path = dir.join(format!("f{id}"));
            std::fs::write(&path, [0u8; 100]).unwrap();
            r.file_closed(
                path,
                RemovedFile {
                    id,
                    name: format!("f{id}"),
                    stored_bytes: 100,
                    ts_last: Some(id as i64),
                    ..Default::default()
                },
            );
        }
        // 300 > 150: f1 is the oldest but not uploaded; f2 is, and goes,
        // as a local copy (not removed from the dataset); f3 is kept past
        // the limit, and no file is reused in place.
        r.enforce(10);
        assert!(dir.join("f1").exists() && !dir.join("f2").exists() && dir.join("f3").exists());
        assert_eq!((r.removed().0.len(), r.let_go()), (0, 1));
        assert!(r.take_for_reuse(100, "f4").is_none());
        // Once up (a manifest naming them reached the bucket), the oldest
        // go first until the rest fit, with no file closed to run the
        // limits.
        bucket.commit(&["pcap/f1", "pcap/f3"]);
        assert!(!dir.join("f1").exists() && dir.join("f3").exists());
        assert_eq!((r.removed().0.len(), r.let_go()), (0, 2));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
