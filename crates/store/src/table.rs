//! Rotated Parquet files of one table written from Arrow batches: the
//! part of every small table's writer (stack, rpc, nfs) that is not about
//! its columns. Files are hidden `.part` names until complete.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::error::StoreError;
use crate::files::create_file;

/// Writer properties of a table: zstd, large row groups, the table's name
/// and schema version in the key-value metadata, a dictionary for every
/// column but `no_dictionary` (values that rise with every row: the writer
/// would hash each into a dictionary it then abandons).
pub fn writer_properties(
    table: &str,
    schema_version: u32,
    no_dictionary: &[&str],
) -> WriterProperties {
    use parquet::schema::types::ColumnPath;
    let mut b = WriterProperties::builder();
    for c in no_dictionary {
        b = b.set_column_dictionary_enabled(ColumnPath::from(*c), false);
    }
    b.set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(1 << 20))
        .set_created_by(format!("weir version {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(table_metadata(table, schema_version)))
        .build()
}

/// The key-value metadata of a weir table's files: weir's version, the
/// table's name and the version of its columns.
pub fn table_metadata(table: &str, schema_version: u32) -> Vec<KeyValue> {
    vec![
        KeyValue::new("weir.version".into(), env!("CARGO_PKG_VERSION").to_string()),
        KeyValue::new("weir.table".into(), table.to_string()),
        KeyValue::new(
            format!("weir.{table}_schema_version"),
            schema_version.to_string(),
        ),
    ]
}

/// Files `DIR/PREFIX-NNNNN.parquet` of one table, a new one every
/// `rotate_rows` rows.
pub struct TableFiles {
    dir: PathBuf,
    /// The table's directory in the dataset, for the names returned.
    table: &'static str,
    prefix: String,
    schema: SchemaRef,
    props: WriterProperties,
    rotate_rows: u64,
    open: Option<(ArrowWriter<File>, PathBuf, String)>,
    rows_in_file: u64,
    seq: u32,
    files: Vec<String>,
}

impl TableFiles {
    pub fn new(
        dir: &Path,
        table: &'static str,
        prefix: String,
        schema: SchemaRef,
        props: WriterProperties,
        rotate_rows: u64,
    ) -> Self {
        TableFiles {
            dir: dir.to_path_buf(),
            table,
            prefix,
            schema,
            props,
            rotate_rows: rotate_rows.max(1),
            open: None,
            rows_in_file: 0,
            seq: 0,
            files: Vec::new(),
        }
    }

    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Appends a batch (of this table's schema); starts the next file
    /// after it once the current one holds `rotate_rows` (writers that
    /// rotate at an exact row call [`TableFiles::close_file`]).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), StoreError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.open.is_none() {
            let name = format!("{}-{:05}.parquet", self.prefix, self.seq);
            let part = self.dir.join(format!(".{name}.part"));
            let file = create_file(&part)?;
            let w = ArrowWriter::try_new(file, self.schema.clone(), Some(self.props.clone()))
                .map_err(|e| StoreError::parquet(&part, e))?;
            self.open = Some((w, part, name));
        }
        if let Some((w, part, _)) = &mut self.open {
            w.write(batch).map_err(|e| StoreError::parquet(&*part, e))?;
        }
        self.rows_in_file += batch.num_rows() as u64;
        if self.rows_in_file >= self.rotate_rows {
            self.close_file()?;
        }
        Ok(())
    }

    /// Closes the current file now; the next batch starts another.
    pub fn close_file(&mut self) -> Result<(), StoreError> {
        if let Some((w, part, name)) = self.open.take() {
            let file = w.into_inner().map_err(|e| StoreError::parquet(&part, e))?;
            file.sync_data().map_err(|e| StoreError::io(&part, e))?;
            let path = self.dir.join(&name);
            std::fs::rename(&part, &path).map_err(|e| StoreError::io(&path, e))?;
            self.files.push(format!("{}/{name}", self.table));
            self.seq += 1;
        }
        self.rows_in_file = 0;
        Ok(())
    }

    /// Closes the open file; returns the dataset-relative names written.
    pub fn finish(mut self) -> Result<Vec<String>, StoreError> {
        self.close_file()?;
        Ok(self.files)
    }
}
