//! Where a dataset's files are read from: a local directory
//! ([`Directory`]), or a prefix of an S3-compatible bucket (the `objects`
//! crate's implementation). Readers of datasets take a [`Root`] instead
//! of a path, so that every command reads `s3://BUCKET/PREFIX` as it reads
//! a directory; the crates that parse and decode files never learn which
//! it is.
//!
//! Paths under a root are relative and use `/`. A path may climb out of
//! its root with `..` (a merged dataset naming the files of the datasets
//! beside it); each storage resolves that in its own namespace.

use std::any::Any;
use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

/// Random access to one file's bytes, for readers that take a few bytes
/// at a time by offset (the frames of a pcap file).
pub trait ReadAt: Send + Sync {
    /// The file's length in bytes.
    fn size(&self) -> io::Result<u64>;
    /// Fills `buf` from the file's bytes at `at`; `UnexpectedEof` when the
    /// file ends first.
    fn read_exact_at(&self, buf: &mut [u8], at: u64) -> io::Result<()>;
    /// Bytes a reader should fetch at once when it reads forward: a local
    /// file's read is cheap, a request to a remote store is not.
    fn read_ahead(&self) -> usize {
        1 << 20
    }
}

impl ReadAt for std::fs::File {
    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn read_exact_at(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, at)
    }
}

/// A file found under a root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// Relative to the root.
    pub path: String,
    pub bytes: u64,
}

/// A dataset's place: the files under one root.
pub trait Storage: Send + Sync + fmt::Debug + Any {
    /// The root as a person gives it: a directory, or `s3://BUCKET/PREFIX`.
    fn name(&self) -> String;
    /// The directory, when the root is one (writers and the few readers
    /// that need one: `weir recover`).
    fn local_dir(&self) -> Option<&Path>;
    /// A whole file.
    fn read(&self, rel: &str) -> io::Result<Bytes>;
    /// Ranges of a file's bytes, in the order asked.
    fn read_ranges(&self, rel: &str, ranges: &[Range<u64>]) -> io::Result<Vec<Bytes>>;
    /// The last `n` bytes of a file (all of it when shorter), and its length.
    fn read_tail(&self, rel: &str, n: u64) -> io::Result<(Bytes, u64)>;
    /// A file opened for reads by offset.
    fn open(&self, rel: &str) -> io::Result<Arc<dyn ReadAt>>;
    /// Every file under the directory `dir` of the root (`""`: all of it),
    /// however deep, sorted by path; none when `dir` does not exist.
    fn list(&self, dir: &str) -> io::Result<Vec<Listed>>;
    /// The storage rooted at `rel` (below, or with `..` beside, this root).
    fn at(&self, rel: &str) -> Root;
    /// Writes a whole (small) file: in place under its final name only
    /// when complete (a manifest).
    fn write(&self, rel: &str, data: &[u8]) -> io::Result<()>;
    /// For the readers that need the implementation itself (DataFusion
    /// registers a bucket's client).
    fn as_any(&self) -> &dyn Any;

    /// `rel` as a person names it: the path of the file, or its URL.
    fn name_of(&self, rel: &str) -> String {
        join(&self.name(), rel)
    }

    /// Copies a file to the local path `dest` piece by piece (a pcap file
    /// may be larger than memory should hold); returns its length.
    fn copy_to(&self, rel: &str, dest: &Path) -> io::Result<u64> {
        use std::io::Write;
        const PIECE: u64 = 8 << 20;
        let src = self.open(rel)?;
        let len = src.size()?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(dest)?);
        let mut buf = vec![0u8; PIECE.min(len) as usize];
        let mut at = 0u64;
        while at < len {
            let n = PIECE.min(len - at) as usize;
            src.read_exact_at(&mut buf[..n], at)?;
            out.write_all(&buf[..n])?;
            at += n as u64;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(len)
    }

    /// Whether the file exists.
    fn exists(&self, rel: &str) -> io::Result<bool> {
        match self.read_tail(rel, 0) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// A root, shared by the readers of one dataset.
pub type Root = Arc<dyn Storage>;

/// `base` and the relative path `rel` joined by one `/`.
pub fn join(base: &str, rel: &str) -> String {
    if rel.is_empty() {
        return base.to_string();
    }
    if base.is_empty() {
        return rel.to_string();
    }
    format!("{}/{}", base.trim_end_matches('/'), rel)
}

/// The relative path from the root named `from` to the one named `to`
/// (`s3://b/all` to `s3://b/site/a` is `../site/a`): `None` when they are
/// not in one namespace (another bucket, another scheme).
pub fn relative(from: &str, to: &str) -> Option<String> {
    let split = |n: &str| -> Option<(String, Vec<String>)> {
        let (scheme, rest) = match n.split_once("://") {
            Some((s, r)) => (format!("{s}://"), r),
            None => (String::new(), n),
        };
        let mut parts = rest.split('/').filter(|p| !p.is_empty() && *p != ".");
        let head = if scheme.is_empty() {
            String::new()
        } else {
            format!("{scheme}{}", parts.next()?)
        };
        let mut out: Vec<String> = Vec::new();
        for p in parts {
            if p == ".." {
                out.pop()?;
            } else {
                out.push(p.to_string());
            }
        }
        Some((head, out))
    };
    let (a_head, a) = split(from)?;
    let (b_head, b) = split(to)?;
    if a_head != b_head || (a_head.is_empty() && !(from.starts_with('/') && to.starts_with('/'))) {
        return None;
    }
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut rel: Vec<&str> = vec![".."; a.len() - common];
    rel.extend(b[common..].iter().map(String::as_str));
    Some(rel.join("/"))
}

/// A relative path with `.` and `..` taken out against the ones before
/// them (`a/b/../c` is `a/c`); `None` when it climbs above its start.
pub fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// A dataset in a local directory.
#[derive(Clone, Debug)]
pub struct Directory {
    root: PathBuf,
}

impl Directory {
    pub fn new(root: impl Into<PathBuf>) -> Directory {
        Directory { root: root.into() }
    }

    /// A root for the directory `root`.
    pub fn root(root: impl Into<PathBuf>) -> Root {
        Arc::new(Directory::new(root))
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }

    fn map(&self, rel: &str) -> io::Result<Bytes> {
        let f = std::fs::File::open(self.path(rel))?;
        if f.metadata()?.len() == 0 {
            // An empty file cannot be mapped.
            return Ok(Bytes::new());
        }
        // SAFETY: the map is only read, and a dataset's files are complete
        // when renamed into place and never written again; the one hazard
        // is a file truncated by someone else while it is read (SIGBUS).
        let map = unsafe { memmap2::Mmap::map(&f) }?;
        Ok(Bytes::from_owner(map))
    }
}

impl Storage for Directory {
    fn name(&self) -> String {
        self.root.display().to_string()
    }

    fn name_of(&self, rel: &str) -> String {
        self.path(rel).display().to_string()
    }

    fn local_dir(&self) -> Option<&Path> {
        Some(&self.root)
    }

    fn read(&self, rel: &str) -> io::Result<Bytes> {
        self.map(rel)
    }

    fn read_ranges(&self, rel: &str, ranges: &[Range<u64>]) -> io::Result<Vec<Bytes>> {
        let data = self.map(rel)?;
        ranges
            .iter()
            .map(|r| {
                let (a, b) = (r.start as usize, r.end as usize);
                if a > b || b > data.len() {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
                Ok(data.slice(a..b))
            })
            .collect()
    }

    fn read_tail(&self, rel: &str, n: u64) -> io::Result<(Bytes, u64)> {
        let data = self.map(rel)?;
        let len = data.len();
        let from = len.saturating_sub(n.min(len as u64) as usize);
        Ok((data.slice(from..), len as u64))
    }

    fn open(&self, rel: &str) -> io::Result<Arc<dyn ReadAt>> {
        Ok(Arc::new(std::fs::File::open(self.path(rel))?))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<Listed>> {
        let mut out = Vec::new();
        let mut dirs = vec![dir.trim_end_matches('/').to_string()];
        while let Some(rel) = dirs.pop() {
            let read = match std::fs::read_dir(self.path(&rel)) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for entry in read {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = join(&rel, &name);
                let meta = std::fs::symlink_metadata(self.path(&path))?;
                if meta.is_dir() {
                    dirs.push(path);
                } else {
                    out.push(Listed {
                        path,
                        bytes: meta.len(),
                    });
                }
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn at(&self, rel: &str) -> Root {
        Arc::new(Directory::new(self.path(rel)))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn exists(&self, rel: &str) -> io::Result<bool> {
        Ok(self.path(rel).is_file())
    }

    fn write(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let path = self.path(rel);
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let tmp = path.with_file_name(format!(".{}.part", name.unwrap_or_default()));
        let written = std::fs::File::create(&tmp).and_then(|mut f| {
            f.write_all(data)?;
            f.sync_data()?;
            std::fs::rename(&tmp, &path)
        });
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }
}

/// A file of a dataset as its integrity chain sealed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sealed {
    /// Relative to the dataset's root.
    pub path: String,
    pub bytes: u64,
    /// BLAKE3, hex.
    pub blake3: String,
}

/// What an uploader has done, for the manifest and the stats.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UploadFigures {
    /// Where to: `s3://BUCKET/PREFIX`.
    pub destination: String,
    /// Files and bytes in the bucket, and manifests sent.
    pub files: u64,
    pub bytes: u64,
    pub manifests: u64,
    /// Requests that failed (each retried later).
    pub failures: u64,
    /// Files that could not be sent as sealed (gone or changed locally).
    pub skipped: u64,
    /// Sealed files not yet in the bucket.
    pub backlog_files: u64,
    pub backlog_bytes: u64,
    /// From a file's sealing to its upload, the last and the longest.
    pub lag_ms_last: u64,
    pub lag_ms_max: u64,
    /// Local copies deleted once in the bucket.
    pub local_deleted: u64,
    /// CPU time the uploader's thread took.
    pub cpu_s: f64,
    pub last_error: Option<String>,
}

/// Called each time a manifest reaches the destination.
pub type CommitHook = Box<dyn Fn() + Send + Sync>;

/// Told of every manifest a writer puts in place, to copy the dataset
/// elsewhere as its files are sealed (an upload to an object store).
pub trait Publisher: Send + Sync + fmt::Debug {
    /// The manifest just written: the files its chain holds, its text,
    /// and the signature file's when it is signed. `keep_local` are files
    /// whose local copy a writer still reads (pcap files late records
    /// are built from).
    fn published(
        &self,
        files: &[Sealed],
        manifest: &[u8],
        signature: Option<&[u8]>,
        keep_local: &[String],
    );
    /// Files of the chain whose local copy was deleted once they were
    /// elsewhere: they stay in the dataset.
    fn held_elsewhere(&self) -> Vec<Listed>;
    /// Whether the local copy of `rel` may be deleted (retention wants its
    /// space): yes once the file and a manifest naming it are elsewhere,
    /// and from then on it is held there ([`Publisher::held_elsewhere`]).
    fn let_go(&self, rel: &str) -> bool;
    /// Calls `hook` each time a manifest reaches the destination, after
    /// the files it names may be let go (retention, waiting for them to
    /// be up, deletes then rather than at its next file).
    fn on_commit(&self, hook: CommitHook);
    /// What it has done so far.
    fn figures(&self) -> UploadFigures;
    /// Waits until everything published is elsewhere, or `limit` passes;
    /// whether it all is.
    fn drain(&self, limit: std::time::Duration) -> bool;
}

/// BLAKE3 of a file read through its storage, `chunk` bytes a request.
pub fn digest(root: &dyn Storage, rel: &str, chunk: u64) -> io::Result<crate::digest::FileDigest> {
    if let Some(dir) = root.local_dir() {
        return crate::digest::digest_file(&dir.join(rel));
    }
    let f = root.open(rel)?;
    let len = f.size()?;
    let mut h = crate::digest::Hasher::new();
    let mut buf = vec![0u8; chunk.min(len).max(1) as usize];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(chunk) as usize;
        f.read_exact_at(&mut buf[..n], at)?;
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_and_climb() {
        assert_eq!(join("s3://b/p", "packets/x"), "s3://b/p/packets/x");
        assert_eq!(join("s3://b/p/", ""), "s3://b/p/");
        assert_eq!(
            normalize("site/all/../a/packets/x").as_deref(),
            Some("site/a/packets/x")
        );
        assert_eq!(normalize("./a//b/").as_deref(), Some("a/b"));
        assert_eq!(normalize("a/../.."), None);
        assert_eq!(
            relative("s3://b/all", "s3://b/site/a").as_deref(),
            Some("../site/a")
        );
        assert_eq!(
            relative("s3://b/site/", "s3://b/site/a").as_deref(),
            Some("a")
        );
        assert_eq!(relative("s3://b/x", "s3://c/x"), None);
        assert_eq!(relative("/d/m", "/d/a").as_deref(), Some("../a"));
        assert_eq!(relative("rel/m", "/d/a"), None);
    }

    #[test]
    fn a_directory_lists_reads_and_opens_its_files() {
        let d = std::env::temp_dir().join(format!("weir-storage-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("a/b")).unwrap();
        std::fs::write(d.join("a/b/x"), b"0123456789").unwrap();
        std::fs::write(d.join("y"), b"").unwrap();
        let root = Directory::root(&d);
        let listed: Vec<_> = root
            .list("")
            .unwrap()
            .into_iter()
            .map(|l| (l.path, l.bytes))
            .collect();
        assert_eq!(listed, [("a/b/x".to_string(), 10), ("y".to_string(), 0)]);
        assert_eq!(root.list("a").unwrap().len(), 1);
        assert!(root.list("none").unwrap().is_empty());
        let r = root.read_ranges("a/b/x", &[2..4, 8..10]).unwrap();
        assert_eq!((&r[0][..], &r[1][..]), (&b"23"[..], &b"89"[..]));
        assert_eq!(
            root.read_tail("a/b/x", 3).unwrap(),
            (Bytes::from_static(b"789"), 10)
        );
        assert_eq!(&root.read("y").unwrap()[..], b"");
        let f = root.open("a/b/x").unwrap();
        let mut buf = [0u8; 4];
        f.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(&buf, b"6789");
        assert!(f.read_exact_at(&mut buf, 8).is_err());
        assert!(root.exists("a/b/x").unwrap() && !root.exists("a/b/z").unwrap());
        assert_eq!(
            digest(&*root, "a/b/x", 3).unwrap(),
            crate::digest::digest_file(&d.join("a/b/x")).unwrap()
        );
        assert_eq!(
            root.at("a").name_of("b/x"),
            d.join("a/b/x").display().to_string()
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
