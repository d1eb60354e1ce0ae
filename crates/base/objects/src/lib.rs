//! Datasets on S3-compatible object storage (AWS S3, MinIO, Ceph, Garage,
//! versitygw): `s3://BUCKET/PREFIX` read as a directory is read, and the
//! uploader that copies a dataset's files there as they are sealed.
//!
//! A dataset's root is a [`util::storage::Root`]: [`open`] makes one from a
//! word of the command line, a [`Prefix`] of a [`Bucket`] for an `s3://`
//! URL and a [`util::storage::Directory`] for anything else. The bucket's
//! client is the `object_store` crate's (the one DataFusion reads through),
//! set up the way the AWS tools are ([`config`]): credentials from the
//! environment, a profile or the instance's role; a path-style endpoint
//! for self-hosted stores; HTTPS unless the endpoint is on the loopback or
//! plain HTTP is asked for. Every request runs on one small runtime of this
//! crate's, so callers block on it from any thread.

pub mod config;
mod error;
mod sized;
pub mod upload;

use std::any::Any;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use futures_util::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutPayload};
use util::storage::{Directory, Listed, ReadAt, Root, Storage};

pub use error::ObjectError;
pub use sized::SizedStore;
pub use upload::{UploadOptions, Uploader};

/// The scheme of object store URLs.
pub const SCHEME: &str = "s3://";

/// Whether `text` names a place in an object store rather than a path.
pub fn is_url(text: &str) -> bool {
    text.starts_with(SCHEME)
}

/// The root that `text` names: `s3://BUCKET/PREFIX` or a directory.
pub fn open(text: &str) -> Result<Root, ObjectError> {
    if is_url(text) {
        Ok(Arc::new(Prefix::parse(text)?))
    } else {
        Ok(Directory::root(text))
    }
}

/// The runtime every request of this crate runs on.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("weir-s3")
            .enable_all()
            .build()
            .expect("starting the object store's runtime")
    })
}

/// Runs `fut` on this crate's runtime and waits for it, from any thread
/// (also one of another runtime, which a nested `block_on` would refuse).
fn block<T: Send + 'static>(
    fut: impl Future<Output = Result<T, object_store::Error>> + Send + 'static,
) -> Result<T, object_store::Error> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    runtime().spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().unwrap_or_else(|_| {
        Err(object_store::Error::Generic {
            store: "S3",
            source: "the request's task ended without an answer".into(),
        })
    })
}

/// One bucket's client.
pub struct Bucket {
    name: String,
    /// Where requests go, for messages: the endpoint URL, or AWS and its
    /// region.
    endpoint: String,
    store: Arc<object_store::aws::AmazonS3>,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bucket(s3://{} at {})", self.name, self.endpoint)
    }
}

impl Bucket {
    /// The client of bucket `name`, made once per process and shared.
    pub fn get(name: &str) -> Result<Arc<Bucket>, ObjectError> {
        static CLIENTS: OnceLock<Mutex<HashMap<String, Arc<Bucket>>>> = OnceLock::new();
        let mut clients = CLIENTS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(b) = clients.get(name) {
            return Ok(b.clone());
        }
        let (store, endpoint) = config::client(name)?;
        let b = Arc::new(Bucket {
            name: name.to_string(),
            endpoint,
            store: Arc::new(store),
        });
        clients.insert(name.to_string(), b.clone());
        Ok(b)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `s3://BUCKET`, the URL DataFusion registers the client under.
    pub fn url(&self) -> String {
        format!("{SCHEME}{}", self.name)
    }

    /// Where requests go, for messages.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The client, for DataFusion.
    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        self.store.clone()
    }

    fn fail(&self, e: object_store::Error) -> ObjectError {
        ObjectError::from_store(&self.name, &self.endpoint, e)
    }

    pub fn get_ranges(&self, key: &str, ranges: &[Range<u64>]) -> Result<Vec<Bytes>, ObjectError> {
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let (store, path, ranges) = (self.store.clone(), ObjectPath::from(key), ranges.to_vec());
        block(async move { store.get_ranges(&path, &ranges).await }).map_err(|e| self.fail(e))
    }

    pub fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes, ObjectError> {
        let (store, path) = (self.store.clone(), ObjectPath::from(key));
        block(async move { store.get_range(&path, range).await }).map_err(|e| self.fail(e))
    }

    pub fn get_all(&self, key: &str) -> Result<Bytes, ObjectError> {
        let (store, path) = (self.store.clone(), ObjectPath::from(key));
        block(async move { store.get(&path).await?.bytes().await }).map_err(|e| self.fail(e))
    }

    /// The last `n` bytes and the object's length.
    pub fn get_tail(&self, key: &str, n: u64) -> Result<(Bytes, u64), ObjectError> {
        if n == 0 {
            return Ok((Bytes::new(), self.size(key)?));
        }
        let (store, path) = (self.store.clone(), ObjectPath::from(key));
        block(async move {
            let options = GetOptions {
                range: Some(GetRange::Suffix(n)),
                ..Default::default()
            };
            let r = store.get_opts(&path, options).await?;
            let size = r.meta.size;
            Ok((r.bytes().await?, size))
        })
        .map_err(|e| self.fail(e))
    }

    pub fn size(&self, key: &str) -> Result<u64, ObjectError> {
        let (store, path) = (self.store.clone(), ObjectPath::from(key));
        block(async move { Ok(store.head(&path).await?.size) }).map_err(|e| self.fail(e))
    }

    /// Every object whose key starts with `prefix` (a directory's, ending
    /// in `/`), with its size.
    pub fn list(&self, prefix: &str) -> Result<Vec<(String, u64)>, ObjectError> {
        let store = self.store.clone();
        let path = (!prefix.is_empty()).then(|| ObjectPath::from(prefix));
        let mut out: Vec<(String, u64)> = block(async move {
            let found: Vec<_> = store.list(path.as_ref()).try_collect().await?;
            Ok(found
                .into_iter()
                .map(|m| (m.location.to_string(), m.size))
                .collect())
        })
        .map_err(|e| self.fail(e))?;
        out.sort();
        Ok(out)
    }

    pub fn put(&self, key: &str, data: Bytes) -> Result<(), ObjectError> {
        let (store, path) = (self.store.clone(), ObjectPath::from(key));
        block(async move { store.put(&path, PutPayload::from(data)).await.map(|_| ()) })
            .map_err(|e| self.fail(e))
    }

    pub fn delete(&self, key: &str) -> Result<(), ObjectError> {
        let (store, path) = (self.store.clone(), ObjectPath::from(key));
        block(async move { store.delete(&path).await }).map_err(|e| self.fail(e))
    }
}

/// A prefix of a bucket: a dataset's root in an object store.
#[derive(Clone, Debug)]
pub struct Prefix {
    bucket: Arc<Bucket>,
    /// Without slashes at either end; empty for the bucket's top.
    prefix: String,
}

impl Prefix {
    /// `s3://BUCKET/PREFIX`.
    pub fn parse(url: &str) -> Result<Prefix, ObjectError> {
        let rest = url.strip_prefix(SCHEME).unwrap_or(url);
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(ObjectError::Config(format!(
                "{url}: no bucket; give s3://BUCKET/PREFIX"
            )));
        }
        let prefix = util::storage::normalize(prefix).ok_or_else(|| {
            ObjectError::Config(format!("{url}: the prefix climbs above the bucket"))
        })?;
        Ok(Prefix {
            bucket: Bucket::get(bucket)?,
            prefix,
        })
    }

    pub fn bucket(&self) -> &Arc<Bucket> {
        &self.bucket
    }

    /// The prefix in the bucket (no slash at either end).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key of `rel` under the prefix.
    pub fn key(&self, rel: &str) -> io::Result<String> {
        util::storage::normalize(&util::storage::join(&self.prefix, rel)).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{rel} climbs above the bucket s3://{}", self.bucket.name),
            )
        })
    }

    /// `s3://BUCKET/KEY` of `rel`.
    pub fn url_of(&self, rel: &str) -> String {
        match self.key(rel) {
            Ok(k) => format!("{SCHEME}{}/{k}", self.bucket.name),
            Err(_) => util::storage::join(&self.name(), rel),
        }
    }
}

impl Storage for Prefix {
    fn name(&self) -> String {
        if self.prefix.is_empty() {
            format!("{SCHEME}{}", self.bucket.name)
        } else {
            format!("{SCHEME}{}/{}", self.bucket.name, self.prefix)
        }
    }

    fn name_of(&self, rel: &str) -> String {
        self.url_of(rel)
    }

    fn local_dir(&self) -> Option<&std::path::Path> {
        None
    }

    fn read(&self, rel: &str) -> io::Result<Bytes> {
        Ok(self.bucket.get_all(&self.key(rel)?)?)
    }

    fn read_ranges(&self, rel: &str, ranges: &[Range<u64>]) -> io::Result<Vec<Bytes>> {
        Ok(self.bucket.get_ranges(&self.key(rel)?, ranges)?)
    }

    fn read_tail(&self, rel: &str, n: u64) -> io::Result<(Bytes, u64)> {
        Ok(self.bucket.get_tail(&self.key(rel)?, n)?)
    }

    fn open(&self, rel: &str) -> io::Result<Arc<dyn ReadAt>> {
        Ok(Arc::new(RemoteFile {
            bucket: self.bucket.clone(),
            key: self.key(rel)?,
            len: OnceLock::new(),
        }))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<Listed>> {
        let base = self.key(dir)?;
        let prefix = if base.is_empty() {
            String::new()
        } else {
            format!("{base}/")
        };
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        Ok(self
            .bucket
            .list(&prefix)?
            .into_iter()
            .filter_map(|(key, bytes)| {
                let path = key.strip_prefix(&strip)?.to_string();
                Some(Listed { path, bytes })
            })
            .collect())
    }

    fn at(&self, rel: &str) -> Root {
        let prefix = self.key(rel).unwrap_or_else(|_| self.prefix.clone());
        Arc::new(Prefix {
            bucket: self.bucket.clone(),
            prefix,
        })
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn write(&self, rel: &str, data: &[u8]) -> io::Result<()> {
        // An object appears whole or not at all.
        Ok(self
            .bucket
            .put(&self.key(rel)?, Bytes::copy_from_slice(data))?)
    }

    fn exists(&self, rel: &str) -> io::Result<bool> {
        // A GET of its last byte, not a HEAD: an answer without a body
        // could not tell a missing bucket from a missing object.
        match self.bucket.get_tail(&self.key(rel)?, 1) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// An object read by offset: each read past what was fetched asks for
/// the range.
struct RemoteFile {
    bucket: Arc<Bucket>,
    key: String,
    len: OnceLock<u64>,
}

impl ReadAt for RemoteFile {
    fn size(&self) -> io::Result<u64> {
        if let Some(n) = self.len.get() {
            return Ok(*n);
        }
        let n = self.bucket.size(&self.key)?;
        Ok(*self.len.get_or_init(|| n))
    }

    fn read_exact_at(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let end = at + buf.len() as u64;
        if end > self.size()? {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let got = self.bucket.get_range(&self.key, at..end)?;
        if got.len() != buf.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&got);
        Ok(())
    }

    fn read_ahead(&self) -> usize {
        // A request costs a round trip: fetch more per request than from
        // a local file.
        8 << 20
    }
}

/// The endpoint that `--s3-endpoint` gave, for every bucket this process
/// opens after (AWS_ENDPOINT_URL otherwise).
pub fn set_endpoint(url: &str) {
    config::set_endpoint(url);
}
