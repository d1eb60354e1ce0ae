//! A copy of a dataset's tables with some columns rewritten, value by
//! value (`weir anonymize`; `weir merge` renumbering interfaces). The caller says, per table and column, how;
//! columns it leaves alone are copied as they are. pcap files are not
//! copied: the copy is of the records, not of the frames.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt16Type, UInt32Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, FixedSizeBinaryArray, ListArray, RecordBatch, RecordBatchReader, StringArray,
    UInt16Array, UInt32Array, UInt64Array,
};
use arrow_schema::DataType;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::StoreError;
use crate::files::create_file;

/// How one column's values change.
pub enum Rewrite<'a> {
    /// Fixed-size binary values (addresses) through a function of the
    /// bytes; it must return as many bytes as it was given.
    Bytes(&'a dyn Fn(&[u8]) -> Vec<u8>),
    U16(&'a dyn Fn(u16) -> u16),
    U64(&'a dyn Fn(u64) -> u64),
    /// A u32 column through a function of each value and of the same
    /// row's value in the text column named first (null, or absent from
    /// the file: `None`).
    U32By(&'a str, &'a dyn Fn(Option<&str>, u32) -> u32),
    Text(&'a dyn Fn(&str) -> String),
    /// Dropped: every value becomes null (the column must be nullable).
    Null,
}

/// The tables a dataset may hold, by directory.
pub const TABLE_DIRS: &[&str] = crate::identify::TABLES;

/// Copies every Parquet file of `src`'s tables into `dst` (an existing,
/// empty dataset directory), rewriting the columns `plan(table, column)`
/// names. Returns the dataset-relative names written.
pub fn rewrite_tables<'a>(
    src: &Path,
    dst: &Path,
    plan: &dyn Fn(&str, &str) -> Option<Rewrite<'a>>,
) -> Result<Vec<String>, StoreError> {
    let mut written = Vec::new();
    for table in TABLE_DIRS {
        let dir = src.join(table);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".parquet") && !n.starts_with('.'))
            .collect();
        names.sort();
        if names.is_empty() {
            continue;
        }
        let out_dir = dst.join(table);
        crate::files::create_dirs(&out_dir)?;
        for name in names {
            let from = dir.join(&name);
            let to = out_dir.join(&name);
            rewrite_file(&from, &to, table, plan)?;
            written.push(format!("{table}/{name}"));
        }
    }
    Ok(written)
}

/// Copies one Parquet file of `table` from `from` to `to` (written under a
/// hidden name, synced, renamed into place), rewriting the columns
/// `plan(table, column)` names.
pub fn rewrite_file<'a>(
    from: &Path,
    to: &Path,
    table: &str,
    plan: &dyn Fn(&str, &str) -> Option<Rewrite<'a>>,
) -> Result<(), StoreError> {
    let file = File::open(from).map_err(|e| StoreError::io(from, e))?;
    let (reader, _) = crate::read::read_batches(from, file, &[], None)?;
    let schema = reader.schema();
    let part = to.with_file_name(format!(
        ".{}.part",
        to.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_created_by(format!("weir version {}", env!("CARGO_PKG_VERSION")))
        .build();
    let out = create_file(&part)?;
    let mut w = ArrowWriter::try_new(out, schema.clone(), Some(props))
        .map_err(|e| StoreError::parquet(&part, e))?;
    let invalid = |message: String| StoreError::Invalid {
        path: from.to_path_buf(),
        message,
    };
    for batch in reader {
        let batch = batch.map_err(|e| invalid(format!("reading: {e}")))?;
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(batch.num_columns());
        for (field, col) in schema.fields().iter().zip(batch.columns()) {
            cols.push(match plan(table, field.name()) {
                Some(r) => {
                    apply(col, &r, &batch).map_err(|m| invalid(format!("{}: {m}", field.name())))?
                }
                None => col.clone(),
            });
        }
        let batch = RecordBatch::try_new(schema.clone(), cols)
            .map_err(|e| invalid(format!("rebuilding a batch: {e}")))?;
        w.write(&batch).map_err(|e| StoreError::parquet(&part, e))?;
    }
    let f = w.into_inner().map_err(|e| StoreError::parquet(&part, e))?;
    f.sync_data().map_err(|e| StoreError::io(&part, e))?;
    std::fs::rename(&part, to).map_err(|e| StoreError::io(to, e))
}

fn apply(col: &ArrayRef, r: &Rewrite, batch: &RecordBatch) -> Result<ArrayRef, String> {
    Ok(match (r, col.data_type()) {
        (Rewrite::U32By(by, f), DataType::UInt32) => {
            let a = col.as_primitive::<UInt32Type>();
            let texts = batch.column_by_name(by).map(text_values).transpose()?;
            let text = |i: usize| texts.as_ref().and_then(|t| t[i].as_deref());
            Arc::new(
                (0..a.len())
                    .map(|i| (!a.is_null(i)).then(|| f(text(i), a.value(i))))
                    .collect::<UInt32Array>(),
            )
        }
        (Rewrite::Null, t) => arrow_array::new_null_array(t, col.len()),
        (Rewrite::Bytes(f), DataType::FixedSizeBinary(n)) => {
            let a = col.as_fixed_size_binary();
            let vals: Vec<Option<Vec<u8>>> = (0..a.len())
                .map(|i| (!a.is_null(i)).then(|| f(a.value(i))))
                .collect();
            if vals.iter().flatten().any(|v| v.len() != *n as usize) {
                return Err("a rewritten value changed its size".into());
            }
            let arr = FixedSizeBinaryArray::try_from_sparse_iter_with_size(
                vals.iter().map(|v| v.as_deref()),
                *n,
            )
            .map_err(|e| e.to_string())?;
            Arc::new(arr)
        }
        (Rewrite::U16(f), DataType::UInt16) => {
            let a = col.as_primitive::<UInt16Type>();
            Arc::new(a.iter().map(|v| v.map(f)).collect::<UInt16Array>())
        }
        (Rewrite::U64(f), DataType::UInt64) => {
            let a = col.as_primitive::<UInt64Type>();
            Arc::new(a.iter().map(|v| v.map(f)).collect::<UInt64Array>())
        }
        (Rewrite::Text(f), DataType::Utf8) => {
            let a = col.as_string::<i32>();
            Arc::new(a.iter().map(|v| v.map(f)).collect::<StringArray>())
        }
        // A list's values are rewritten as a column of their own (the
        // answers' names and addresses of a DNS response).
        (_, DataType::List(field)) => {
            let l = col.as_list::<i32>();
            let values = apply(l.values(), r, batch)?;
            Arc::new(
                ListArray::try_new(
                    field.clone(),
                    l.offsets().clone(),
                    values,
                    l.nulls().cloned(),
                )
                .map_err(|e| e.to_string())?,
            )
        }
        (_, t) => return Err(format!("cannot rewrite a column of type {t}")),
    })
}

/// The values of a text column, plain or dictionary-encoded.
fn text_values(col: &ArrayRef) -> Result<Vec<Option<String>>, String> {
    let texts = |a: &StringArray| a.iter().map(|v| v.map(str::to_string)).collect::<Vec<_>>();
    match col.data_type() {
        DataType::Utf8 => Ok(texts(col.as_string::<i32>())),
        DataType::Dictionary(_, v) if **v == DataType::Utf8 => {
            let d = col.as_any_dictionary();
            let values = texts(d.values().as_string::<i32>());
            let keys = d.normalized_keys();
            Ok((0..col.len())
                .map(|i| {
                    if col.is_null(i) {
                        None
                    } else {
                        values.get(keys[i]).cloned().flatten()
                    }
                })
                .collect())
        }
        t => Err(format!("a column of type {t} read as text")),
    }
}
