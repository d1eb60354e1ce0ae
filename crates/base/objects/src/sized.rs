//! A bucket's client for DataFusion that knows the size of every file the
//! manifests name: DataFusion asks each file's size (a HEAD request) every
//! time it plans a query over a list of files; the manifests already say
//! it. Every request that does go out runs on this crate's runtime, so the
//! session's own runtime need not drive the client's connections.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};

/// A bucket's client, and the sizes of the objects the manifests name.
#[derive(Debug)]
pub struct SizedStore {
    inner: Arc<dyn ObjectStore>,
    sizes: HashMap<Path, u64>,
}

impl SizedStore {
    /// `sizes`: object key to bytes.
    pub fn new(
        inner: Arc<dyn ObjectStore>,
        sizes: impl IntoIterator<Item = (String, u64)>,
    ) -> Self {
        SizedStore {
            inner,
            sizes: sizes.into_iter().map(|(k, n)| (Path::from(k), n)).collect(),
        }
    }

    fn meta(&self, location: &Path) -> Option<ObjectMeta> {
        Some(ObjectMeta {
            location: location.clone(),
            last_modified: chrono::DateTime::UNIX_EPOCH,
            size: *self.sizes.get(location)?,
            e_tag: None,
            version: None,
        })
    }

    /// Runs `f` on the inner client on this crate's runtime.
    async fn on_runtime<T: Send + 'static, F>(
        &self,
        f: impl FnOnce(Arc<dyn ObjectStore>) -> F,
    ) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>> + Send + 'static,
    {
        crate::runtime().spawn(f(self.inner.clone())).await?
    }
}

impl fmt::Display for SizedStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} sizes known)", self.inner, self.sizes.len())
    }
}

#[async_trait]
impl ObjectStore for SizedStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let location = location.clone();
        self.on_runtime(|s| async move { s.put_opts(&location, payload, opts).await })
            .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        let location = location.clone();
        self.on_runtime(|s| async move { s.put_multipart_opts(&location, opts).await })
            .await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if options.head
            && let Some(meta) = self.meta(location)
        {
            return Ok(GetResult {
                payload: GetResultPayload::Stream(Box::pin(futures_util::stream::empty())),
                range: 0..meta.size,
                meta,
                attributes: Default::default(),
            });
        }
        let location = location.clone();
        self.on_runtime(|s| async move { s.get_opts(&location, options).await })
            .await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        let (location, ranges) = (location.clone(), ranges.to_vec());
        self.on_runtime(|s| async move { s.get_ranges(&location, &ranges).await })
            .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let prefix = prefix.cloned();
        self.on_runtime(|s| async move { s.list_with_delimiter(prefix.as_ref()).await })
            .await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let (from, to) = (from.clone(), to.clone());
        self.on_runtime(|s| async move { s.copy_opts(&from, &to, options).await })
            .await
    }
}
