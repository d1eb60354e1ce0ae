//! Datasets in an object store, for DataFusion: each bucket's client
//! registered with the sizes of the files the manifests name (so planning
//! a query makes no request), and a table's files as `s3://` URLs taken
//! from the manifest rather than from a listing of the bucket. DataFusion
//! then reads each Parquet file as it reads a local one: the footer by one
//! range request, then only the row groups and columns a query needs.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::prelude::SessionContext;
use objects::{Prefix, SizedStore};
use store::manifest::Manifest;
use util::storage::{Root, Storage};

use crate::error::AnalyzeError;

/// The object store prefix `root` is, if it is one.
pub fn prefix_of(root: &dyn Storage) -> Option<&Prefix> {
    root.as_any().downcast_ref::<Prefix>()
}

/// Registers with `ctx` the client of every bucket the datasets are in,
/// knowing the size of each file their chains hold.
pub(crate) fn register_stores(
    ctx: &SessionContext,
    datasets: &[(Root, Manifest)],
) -> Result<(), AnalyzeError> {
    // By bucket name: its client, and the sizes of the objects named.
    type Sizes = (Arc<objects::Bucket>, Vec<(String, u64)>);
    let mut buckets: HashMap<String, Sizes> = HashMap::new();
    for (root, m) in datasets {
        let Some(p) = prefix_of(&**root) else {
            continue;
        };
        let entry = buckets
            .entry(p.bucket().name().to_string())
            .or_insert_with(|| (p.bucket().clone(), Vec::new()));
        if let Some(chain) = &m.integrity {
            for (path, e) in chain.live() {
                if let (Ok(key), Some(n)) = (p.key(path), e.bytes) {
                    entry.1.push((key, n));
                }
            }
        }
    }
    for (name, (bucket, sizes)) in buckets {
        let url = ObjectStoreUrl::parse(format!("s3://{name}")).map_err(AnalyzeError::from_sql)?;
        let store = SizedStore::new(bucket.object_store(), sizes);
        ctx.register_object_store(url.as_ref(), Arc::new(store));
    }
    Ok(())
}

/// The `s3://` URLs of the Parquet files of table directory `dir` of the
/// dataset at `root` (in an object store), from its manifest.
pub(crate) fn table_urls(
    root: &dyn Storage,
    manifest: &Manifest,
    dir: &str,
) -> Result<Vec<String>, AnalyzeError> {
    let files = store::location::table_files(root, manifest, dir)?;
    Ok(files.iter().map(|f| root.name_of(&f.rel)).collect())
}
