//! What the hand-written passes over a dataset's columns share (`rpc_pass`,
//! `count_pass`, `loss_pass`): the files, work spread over threads, and
//! results shaped as the SQL they stand for would shape them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::parquet::file::metadata::RowGroupMetaData;
use store::decode::scan::TableScan;
use store::manifest::Manifest;
use util::storage::Root;

use crate::error::AnalyzeError;
use crate::table::Table;

/// A Parquet file of one of a dataset's tables, wherever the dataset is.
#[derive(Clone, Debug)]
pub(crate) struct DataFile {
    pub root: Root,
    /// Relative to the dataset's root.
    pub rel: String,
    /// How errors name it: its path, or its URL.
    pub path: PathBuf,
}

impl DataFile {
    /// A scan of the columns `cols` over the row groups `keep` accepts
    /// (from an object store, only those column chunks are fetched).
    pub fn scan(
        &self,
        cols: &[&str],
        keep: impl Fn(&RowGroupMetaData) -> bool,
    ) -> Result<TableScan, AnalyzeError> {
        Ok(store::decode::scan::open_in(
            &self.root, &self.rel, cols, keep,
        )?)
    }

    /// Whether it has the columns `cols` in a form the scan reads.
    pub fn readable(&self, cols: &[&str]) -> Result<bool, AnalyzeError> {
        Ok(store::decode::scan::readable_in(
            &self.root, &self.rel, cols,
        )?)
    }
}

/// The Parquet files of the table directory `dir` of the dataset at
/// `root`, by name (none if there are none).
pub(crate) fn parquet_files(
    root: &Root,
    manifest: &Manifest,
    dir: &str,
) -> Result<Vec<DataFile>, AnalyzeError> {
    Ok(store::location::table_files(&**root, manifest, dir)?
        .into_iter()
        .map(|f| DataFile {
            root: root.clone(),
            path: PathBuf::from(root.name_of(&f.rel)),
            rel: f.rel,
        })
        .collect())
}

/// An error about the file at `path`.
pub(crate) fn engine(path: &Path, what: impl std::fmt::Display) -> AnalyzeError {
    AnalyzeError::Engine(format!("{}: {what}", path.display()))
}

/// Runs `f` on every item over `threads` threads; results in item order.
pub(crate) fn par_map<T: Sync, R: Send>(
    threads: usize,
    items: &[T],
    f: impl Fn(&T) -> Result<R, AnalyzeError> + Sync,
) -> Result<Vec<R>, AnalyzeError> {
    let threads = threads.clamp(1, items.len().max(1));
    let mut outs: Vec<Vec<(usize, R)>> = (0..threads).map(|_| Vec::new()).collect();
    par_fold(&mut outs, items, |out, i, item| {
        out.push((i, f(item)?));
        Ok(())
    })?;
    let mut done: Vec<(usize, R)> = outs.into_iter().flatten().collect();
    done.sort_by_key(|(i, _)| *i);
    Ok(done.into_iter().map(|(_, r)| r).collect())
}

/// Runs `f` on every item (with its index) over as many threads as there
/// are `states` (at least one), each thread folding the items it takes
/// into a state of its own.
pub(crate) fn par_fold<T: Sync, S: Send>(
    states: &mut [S],
    items: &[T],
    f: impl Fn(&mut S, usize, &T) -> Result<(), AnalyzeError> + Sync,
) -> Result<(), AnalyzeError> {
    if let [state] = states {
        return (items.iter().enumerate()).try_for_each(|(i, item)| f(state, i, item));
    }
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let workers: Vec<_> = states
            .iter_mut()
            .map(|state| {
                let (next, f) = (&next, &f);
                s.spawn(move || {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return Ok(());
                        };
                        f(state, i, item)?;
                    }
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .unwrap_or_else(|_| Err(AnalyzeError::Engine("a scan thread failed".into())))
        })
    })
}

/// `columns` as a table of `schema` (planned from the SQL): the same
/// names and types the SQL would give.
pub(crate) fn table(
    name: &str,
    schema: SchemaRef,
    columns: Vec<ArrayRef>,
) -> Result<Table, AnalyzeError> {
    if schema.fields().len() != columns.len() {
        return Err(AnalyzeError::Engine(format!(
            "{name}: {} columns planned, {} computed",
            schema.fields().len(),
            columns.len()
        )));
    }
    let mut cols = Vec::with_capacity(columns.len());
    for (f, c) in schema.fields().iter().zip(columns) {
        let c = if c.data_type() == f.data_type() {
            c
        } else {
            cast(&c, f.data_type())
                .map_err(|e| AnalyzeError::Engine(format!("{name}.{}: {e}", f.name())))?
        };
        cols.push(c);
    }
    let batch = RecordBatch::try_new(schema.clone(), cols)
        .map_err(|e| AnalyzeError::Engine(format!("{name}: {e}")))?;
    Ok(Table {
        name: name.into(),
        schema,
        batches: vec![batch],
    })
}
