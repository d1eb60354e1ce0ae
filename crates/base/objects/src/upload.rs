//! The uploader: a dataset's files copied to `s3://BUCKET/PREFIX` as they
//! are sealed, the manifest last.
//!
//! A writer tells it of every manifest it puts in place
//! ([`util::storage::Publisher::published`]): the files the integrity
//! chain holds, and the manifest's text. Files not yet in the bucket are
//! queued, oldest first; the manifest waits until every file it names is
//! up, then goes up itself: it is the commit point, so a reader of the
//! bucket never finds a manifest naming a file that is not there. Each
//! file is read from the local disk as it is sent, its BLAKE3 checked
//! against the chain's (the file is what was sealed), and each request
//! carries the SHA-256 of its body, which the server checks; files larger
//! than a part go up as a multipart upload, part by part.
//!
//! The local dataset is a bounded buffer: once a file is in the bucket
//! and a manifest naming it is too, its local copy is deleted (the writer
//! keeps it in the chain: [`util::storage::Publisher::held_elsewhere`]).
//! When the store cannot be reached the uploader says so once, keeps the
//! backlog, retries with a growing pause and catches up when it returns;
//! the writer never waits for it. Its thread runs at the lowest priority,
//! CPU and disk, so that it takes what the capture leaves.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};
use util::storage::{CommitHook, Listed, Publisher, Sealed, UploadFigures};

use crate::error::ObjectError;
use crate::{Prefix, config};

/// How the uploader works.
#[derive(Clone, Debug)]
pub struct UploadOptions {
    /// Delete a file's local copy once it and a manifest naming it are in
    /// the bucket.
    pub delete_local: bool,
    /// A file larger than this goes up in parts of this size.
    pub part_bytes: usize,
}

impl Default for UploadOptions {
    fn default() -> Self {
        UploadOptions {
            delete_local: true,
            part_bytes: 16 << 20,
        }
    }
}

/// Says a line to the person running the command.
pub type Notice = Box<dyn Fn(&str) + Send + Sync>;

/// A file to send.
#[derive(Clone, Debug)]
struct Job {
    file: Sealed,
    sealed: Instant,
}

/// A manifest waiting for the files it names.
struct Commit {
    manifest: Bytes,
    signature: Option<Bytes>,
    names: Vec<Sealed>,
    keep_local: HashSet<String>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    queued: HashSet<String>,
    /// In the bucket: path to (bytes, BLAKE3) as sent.
    uploaded: HashMap<String, (u64, String)>,
    /// Named by a manifest in the bucket: their local copies may go.
    committed: HashSet<String>,
    /// Deleted locally once in the bucket.
    elsewhere: BTreeMap<String, u64>,
    /// Files that cannot be sent as sealed (gone from the local disk, or
    /// changed there): path to (bytes, BLAKE3) as sealed. A manifest does
    /// not wait for them.
    refused: HashMap<String, (u64, String)>,
    commit: Option<Commit>,
    figures: UploadFigures,
    /// Since when the store cannot be reached (said once).
    down: Option<Instant>,
    stop: bool,
}

struct Shared {
    local: PathBuf,
    dest: Prefix,
    opts: UploadOptions,
    state: Mutex<State>,
    wake: Condvar,
    notice: Notice,
    on_commit: Mutex<Vec<CommitHook>>,
}

/// Uploads one dataset's files as they are sealed.
pub struct Uploader {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl std::fmt::Debug for Uploader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Uploader({} -> {})",
            self.shared.local.display(),
            util::storage::Storage::name(&self.shared.dest)
        )
    }
}

impl Uploader {
    /// An uploader of the dataset at `local` to `dest`, its thread
    /// started; `notice` says when the store goes away and comes back.
    pub fn start(
        local: &Path,
        dest: Prefix,
        opts: UploadOptions,
        notice: Notice,
    ) -> Result<Arc<Uploader>, ObjectError> {
        // Its own client: its connections live on the uploader's thread.
        let (store, _) = config::client(dest.bucket().name())?;
        let shared = Arc::new(Shared {
            local: local.to_path_buf(),
            dest,
            opts,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            notice,
            on_commit: Mutex::new(Vec::new()),
        });
        shared.lock().figures.destination = util::storage::Storage::name(&shared.dest);
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("weir-upload".into())
            .spawn(move || s.run(Arc::new(store)))
            .map_err(|e| ObjectError::Config(format!("starting the uploader: {e}")))?;
        Ok(Arc::new(Uploader {
            shared,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Files the bucket holds already, as sealed (the destination's own
    /// manifest names them): not sent again, and those whose local copy
    /// is gone are held there (a writer taking its dataset up again, or
    /// `weir recover` after a capture was killed).
    pub fn seed(&self, held: Vec<Sealed>) {
        let mut s = self.shared.lock();
        for f in held {
            if !self.shared.local.join(&f.path).exists() {
                s.elsewhere.insert(f.path.clone(), f.bytes);
            }
            s.committed.insert(f.path.clone());
            s.uploaded.insert(f.path, (f.bytes, f.blake3));
        }
    }

    /// Waits until everything published is in the bucket, or `limit`
    /// passes; whether it all is.
    fn wait_drained(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        let mut s = self.shared.lock();
        loop {
            if s.queue.is_empty() && s.commit.is_none() {
                return true;
            }
            let now = Instant::now();
            if now >= until || s.stop {
                return false;
            }
            s = self
                .shared
                .wake
                .wait_timeout(s, until - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Stops the thread (what is not up stays in the local dataset).
    pub fn stop(&self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Drop for Uploader {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Publisher for Uploader {
    fn published(
        &self,
        files: &[Sealed],
        manifest: &[u8],
        signature: Option<&[u8]>,
        keep_local: &[String],
    ) {
        let mut s = self.shared.lock();
        let now = Instant::now();
        for f in files {
            let same = |m: &HashMap<String, (u64, String)>| {
                m.get(&f.path)
                    .is_some_and(|(n, d)| *n == f.bytes && *d == f.blake3)
            };
            if same(&s.uploaded) || same(&s.refused) || s.queued.contains(&f.path) {
                continue;
            }
            s.queued.insert(f.path.clone());
            s.figures.backlog_files += 1;
            s.figures.backlog_bytes += f.bytes;
            s.queue.push_back(Job {
                file: f.clone(),
                sealed: now,
            });
        }
        s.commit = Some(Commit {
            manifest: Bytes::copy_from_slice(manifest),
            signature: signature.map(Bytes::copy_from_slice),
            names: files.to_vec(),
            keep_local: keep_local.iter().cloned().collect(),
        });
        drop(s);
        self.shared.wake.notify_all();
    }

    fn held_elsewhere(&self) -> Vec<Listed> {
        let s = self.shared.lock();
        s.elsewhere
            .iter()
            .map(|(path, bytes)| Listed {
                path: path.clone(),
                bytes: *bytes,
            })
            .collect()
    }

    fn let_go(&self, rel: &str) -> bool {
        let mut s = self.shared.lock();
        if !s.committed.contains(rel) {
            return false;
        }
        if let Some((bytes, _)) = s.uploaded.get(rel).cloned() {
            s.elsewhere.insert(rel.to_string(), bytes);
        }
        true
    }

    fn on_commit(&self, hook: CommitHook) {
        (self.shared.on_commit.lock())
            .unwrap_or_else(|e| e.into_inner())
            .push(hook);
    }

    fn figures(&self) -> UploadFigures {
        self.shared.lock().figures.clone()
    }

    fn drain(&self, limit: Duration) -> bool {
        self.wait_drained(limit)
    }
}

/// The calling thread at the lowest CPU and disk priority.
fn lowest_priority() {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 19);
        // ioprio_set(IOPRIO_WHO_PROCESS, tid, IOPRIO_CLASS_IDLE << 13).
        libc::syscall(libc::SYS_ioprio_set, 1, tid, 3 << 13);
    }
}

/// CPU time of the calling thread, in seconds.
fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes the struct given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Why a file was not sent.
enum Failed {
    /// The store: try again later.
    Store(ObjectError),
    /// The local file: it is gone (retention took it) or is not what was
    /// sealed; it is not sent.
    Local(String),
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(&self, store: Arc<object_store::aws::AmazonS3>) {
        lowest_priority();
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                (self.notice)(&format!("cannot start the uploader: {e}"));
                return;
            }
        };
        let cpu0 = thread_cpu_s();
        let mut pause = Duration::from_millis(500);
        loop {
            let next = {
                let mut s = self.lock();
                loop {
                    if s.stop {
                        return;
                    }
                    if let Some(j) = s.queue.front() {
                        break Some(j.clone());
                    }
                    let ready = s.commit.as_ref().is_some_and(|c| {
                        c.names.iter().all(|f| {
                            [&s.uploaded, &s.refused].iter().any(|m| {
                                m.get(&f.path)
                                    .is_some_and(|(n, d)| *n == f.bytes && *d == f.blake3)
                            })
                        })
                    });
                    if ready {
                        break None;
                    }
                    s = self.wake.wait(s).unwrap_or_else(|e| e.into_inner());
                }
            };
            let result = match &next {
                Some(job) => self.send_file(&rt, &store, &job.file).map(|_| ()),
                None => self.send_commit(&rt, &store),
            };
            let mut s = self.lock();
            s.figures.cpu_s = thread_cpu_s() - cpu0;
            match result {
                Ok(()) => {
                    pause = Duration::from_millis(500);
                    if let Some(since) = s.down.take() {
                        let (n, b) = (s.figures.backlog_files, s.figures.backlog_bytes);
                        drop(s);
                        (self.notice)(&format!(
                            "the store is back after {:.0} s; catching up {n} files ({} bytes)",
                            since.elapsed().as_secs_f64(),
                            util::fmt::group_digits(b)
                        ));
                        s = self.lock();
                    }
                    if let Some(job) = next {
                        let lag = job.sealed.elapsed().as_millis() as u64;
                        s.figures.files += 1;
                        s.figures.bytes += job.file.bytes;
                        s.figures.lag_ms_last = lag;
                        s.figures.lag_ms_max = s.figures.lag_ms_max.max(lag);
                        self.done(&mut s, &job.file);
                        s.uploaded
                            .insert(job.file.path.clone(), (job.file.bytes, job.file.blake3));
                    }
                }
                Err(Failed::Local(why)) => {
                    // Not sendable as sealed: left out of the bucket (its
                    // readers and `weir verify` find it missing).
                    if let Some(job) = next {
                        self.done(&mut s, &job.file);
                        s.figures.skipped += 1;
                        s.figures.last_error = Some(why.clone());
                        s.refused
                            .insert(job.file.path.clone(), (job.file.bytes, job.file.blake3));
                        drop(s);
                        (self.notice)(&why);
                        s = self.lock();
                    }
                }
                Err(Failed::Store(e)) => {
                    s.figures.failures += 1;
                    s.figures.last_error = Some(e.to_string());
                    if s.down.is_none() {
                        s.down = Some(Instant::now());
                        drop(s);
                        (self.notice)(&format!(
                            "{}: {e}; the dataset goes on locally and is uploaded when the store \
                             answers again",
                            util::storage::Storage::name(&self.dest)
                        ));
                        s = self.lock();
                    }
                    // Wait (or stop) before the next try.
                    let (g, _) = self
                        .wake
                        .wait_timeout_while(s, pause, |s| !s.stop)
                        .unwrap_or_else(|e| e.into_inner());
                    s = g;
                    pause = (pause * 2).min(Duration::from_secs(30));
                }
            }
            drop(s);
            self.wake.notify_all();
        }
    }

    /// A job is over (sent, or not sendable).
    fn done(&self, s: &mut State, f: &Sealed) {
        s.queue.pop_front();
        s.queued.remove(&f.path);
        s.figures.backlog_files = s.figures.backlog_files.saturating_sub(1);
        s.figures.backlog_bytes = s.figures.backlog_bytes.saturating_sub(f.bytes);
    }

    /// Sends one file, checking it is what the chain sealed.
    fn send_file(
        &self,
        rt: &tokio::runtime::Runtime,
        store: &Arc<object_store::aws::AmazonS3>,
        f: &Sealed,
    ) -> Result<u64, Failed> {
        let path = self.local.join(&f.path);
        let local = |e: io::Error| {
            Failed::Local(format!(
                "{}: not uploaded: {e} (a file of the chain that is no longer on the local disk \
                 stays out of the bucket)",
                path.display()
            ))
        };
        let file = std::fs::File::open(&path).map_err(local)?;
        let len = file.metadata().map_err(local)?.len();
        if len != f.bytes {
            return Err(Failed::Local(format!(
                "{}: not uploaded: {len} bytes, but {} when it was sealed",
                path.display(),
                f.bytes
            )));
        }
        let key = self
            .dest
            .key(&f.path)
            .map_err(|e| Failed::Local(e.to_string()))?;
        let key = ObjectPath::from(key);
        let fail = |e: object_store::Error| {
            Failed::Store(ObjectError::from_store(
                self.dest.bucket().name(),
                self.dest.bucket().endpoint(),
                e,
            ))
        };
        let part = self.opts.part_bytes.max(5 << 20) as u64;
        let mut digest = util::digest::Hasher::new();
        let read = |at: u64, n: u64, digest: &mut util::digest::Hasher| -> Result<Bytes, Failed> {
            let mut buf = vec![0u8; n as usize];
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf, at).map_err(local)?;
            digest.update(&buf);
            // The pages were read once, to be sent: not kept in the cache.
            // SAFETY: advice on a file descriptor we hold.
            unsafe {
                libc::posix_fadvise(
                    std::os::fd::AsRawFd::as_raw_fd(&file),
                    at as i64,
                    n as i64,
                    libc::POSIX_FADV_DONTNEED,
                );
            }
            Ok(Bytes::from(buf))
        };
        let check = |digest: util::digest::Hasher| {
            let got = digest.finish().hex();
            if got == f.blake3 {
                Ok(())
            } else {
                Err(Failed::Local(format!(
                    "{}: not uploaded: its BLAKE3 is {got}, not the {} the chain sealed: the file \
                     changed on the local disk",
                    path.display(),
                    f.blake3
                )))
            }
        };
        if len <= part {
            let data = read(0, len, &mut digest)?;
            check(digest)?;
            rt.block_on(store.put(&key, PutPayload::from(data)))
                .map_err(fail)?;
            return Ok(len);
        }
        let mut upload = rt.block_on(store.put_multipart(&key)).map_err(fail)?;
        let mut at = 0;
        let sent: Result<(), Failed> = (|| {
            while at < len {
                let n = part.min(len - at);
                let data = read(at, n, &mut digest)?;
                rt.block_on(upload.put_part(PutPayload::from(data)))
                    .map_err(fail)?;
                at += n;
            }
            check(std::mem::take(&mut digest))?;
            rt.block_on(upload.complete()).map_err(fail)?;
            Ok(())
        })();
        if let Err(e) = sent {
            let _ = rt.block_on(upload.abort());
            return Err(e);
        }
        Ok(len)
    }

    /// Sends the newest manifest (and its signature file), then lets the
    /// local copies of the files it names go.
    fn send_commit(
        &self,
        rt: &tokio::runtime::Runtime,
        store: &Arc<object_store::aws::AmazonS3>,
    ) -> Result<(), Failed> {
        let Some((manifest, signature, names, keep)) = self.lock().commit.as_ref().map(|c| {
            (
                c.manifest.clone(),
                c.signature.clone(),
                c.names.clone(),
                c.keep_local.clone(),
            )
        }) else {
            return Ok(());
        };
        let fail = |e: object_store::Error| {
            Failed::Store(ObjectError::from_store(
                self.dest.bucket().name(),
                self.dest.bucket().endpoint(),
                e,
            ))
        };
        let key = |rel: &str| {
            self.dest
                .key(rel)
                .map(ObjectPath::from)
                .map_err(|e| Failed::Local(e.to_string()))
        };
        rt.block_on(store.put(&key("manifest.json")?, PutPayload::from(manifest.clone())))
            .map_err(fail)?;
        let sig_key = key(SIGNATURE_FILE)?;
        match signature {
            Some(sig) => rt
                .block_on(store.put(&sig_key, PutPayload::from(sig)))
                .map(|_| ())
                .map_err(fail)?,
            None => match rt.block_on(store.delete(&sig_key)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(fail(e)),
            },
        }
        let mut s = self.lock();
        // A newer manifest may have come meanwhile: it stays to be sent.
        if s.commit.as_ref().is_some_and(|c| c.manifest == manifest) {
            s.commit = None;
        }
        s.figures.manifests += 1;
        s.committed.extend(names.iter().map(|f| f.path.clone()));
        if self.opts.delete_local {
            for f in names.iter().filter(|f| !keep.contains(&f.path)) {
                if s.elsewhere.contains_key(&f.path) {
                    continue;
                }
                let p = self.local.join(&f.path);
                match std::fs::remove_file(&p) {
                    Ok(()) => {
                        s.elsewhere.insert(f.path.clone(), f.bytes);
                        s.figures.local_deleted += 1;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        s.elsewhere.insert(f.path.clone(), f.bytes);
                    }
                    Err(e) => s.figures.last_error = Some(format!("{}: {e}", p.display())),
                }
            }
        }
        drop(s);
        // Before a writer waiting in drain hears of it: what the hooks
        // delete is gone when the writer ends.
        for hook in self
            .on_commit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            hook();
        }
        Ok(())
    }
}

/// The signature file beside the manifest (`store::integrity`'s name).
const SIGNATURE_FILE: &str = "seal.sig";
