//! How a table's rows become its rotated files: every table but packets
//! (and the one-file-per-packet-file flows and stats tables) is written
//! through one of the two writers here, so adding a table is one file
//! that names its columns ([`crate::columns::Column`]) and how a row fills
//! them.
//!
//! - [`BatchTable`]: rows into Arrow builders ([`RowBuilders`]), a batch at
//!   a time through arrow-rs's writer ([`TableFiles`]). For tables of
//!   thousands of rows a second (stack, stack_intervals, dns, tls, http).
//! - [`EncodedTable`]: rows straight into weir's column encoders
//!   (`pqcodec::encode`, a [`ColumnSet`]), for tables written at the
//!   packet rate's order (rpc, nfs): through Arrow builders a call cost
//!   about 1.4 µs. (The packet table has its own writer, `packets/`, for
//!   its sort, flow slicing and page index.)
//!
//! Files are `DIR/PREFIX-NNNNN.parquet`, hidden `.part` names until
//! complete.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use pqcodec::encode::file::EncodedFile;
use pqcodec::encode::{ColumnSet, EncodeOptions};

use crate::error::StoreError;
use crate::files::{create_dirs, create_file};

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
/// `rotate_rows` rows. The directory is made (0750) when the first file
/// is, so a table that gets no row leaves nothing behind.
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
            if self.seq == 0 {
                create_dirs(&self.dir)?;
            }
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

/// A table's Arrow column builders: how one row fills its columns.
pub trait RowBuilders {
    type Row: ?Sized;
    /// Appends one row.
    fn push(&mut self, row: &Self::Row);
    /// The columns of the rows pushed since the last call, in the
    /// table's order; the builders are empty after.
    fn finish(&mut self) -> Vec<ArrayRef>;
}

/// One table written a batch at a time: rows go into its builders (`B`)
/// and, every `batch_rows` (or when the writer says), into its files.
pub struct BatchTable<B> {
    builders: B,
    files: TableFiles,
    batch_rows: usize,
    /// Rows in the builders, and in all.
    pending: usize,
    rows: u64,
}

impl<B: RowBuilders> BatchTable<B> {
    pub fn new(builders: B, files: TableFiles, batch_rows: usize) -> Self {
        BatchTable {
            builders,
            files,
            batch_rows,
            pending: 0,
            rows: 0,
        }
    }

    /// Adds a row; writes the batch when it is full.
    pub fn push(&mut self, row: &B::Row) -> Result<(), StoreError> {
        self.append(row);
        if self.pending >= self.batch_rows {
            self.flush()?;
        }
        Ok(())
    }

    /// Adds a row to the batch, without writing it.
    pub fn append(&mut self, row: &B::Row) {
        self.builders.push(row);
        self.pending += 1;
        self.rows += 1;
    }

    /// Rows pushed so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Writes the rows pushed since the last write as one batch.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        if self.pending == 0 {
            return Ok(());
        }
        self.pending = 0;
        let cols = self.builders.finish();
        let batch = RecordBatch::try_new(self.files.schema().clone(), cols).map_err(|e| {
            StoreError::Invalid {
                path: self.files.dir.clone(),
                message: format!(
                    "building a {} batch: {e}; this is a bug in weir, please report it",
                    self.files.table
                ),
            }
        })?;
        self.files.write(&batch)
    }

    /// Writes what is pending and starts the next file.
    pub fn close_file(&mut self) -> Result<(), StoreError> {
        self.flush()?;
        self.files.close_file()
    }

    /// Writes what is pending and closes the file; returns the
    /// dataset-relative names written.
    pub fn finish(mut self) -> Result<Vec<String>, StoreError> {
        self.flush()?;
        self.files.finish()
    }
}

/// One table's rotated files `DIR/PREFIX-NNNNN.parquet`, fed row by row
/// through weir's column encoders (`C`): pages end every
/// `opts.page_rows` rows, row groups every `row_group_rows`, files every
/// `rotate_rows`. The directory must exist.
pub struct EncodedTable<C> {
    dir: PathBuf,
    table: &'static str,
    prefix: String,
    schema: SchemaRef,
    schema_version: u32,
    opts: EncodeOptions,
    rotate_rows: u64,
    row_group_rows: u64,
    cols: C,
    file: Option<EncodedFile>,
    /// Rows in the open file, and in its open row group and page.
    in_file: u64,
    in_group: u64,
    in_page: usize,
    seq: u32,
    files: Vec<String>,
}

/// Where an [`EncodedTable`] writes and how its files are cut.
pub struct EncodedTableSpec {
    /// The table's name: its directory in the dataset and its metadata.
    pub table: &'static str,
    pub prefix: String,
    pub schema: SchemaRef,
    pub schema_version: u32,
    pub opts: EncodeOptions,
    pub rotate_rows: u64,
    pub row_group_rows: u64,
}

impl<C: ColumnSet> EncodedTable<C> {
    /// The table `spec.table` of the dataset at `root`.
    pub fn new(root: &Path, spec: EncodedTableSpec, cols: C) -> Self {
        EncodedTable {
            dir: root.join(spec.table),
            table: spec.table,
            prefix: spec.prefix,
            schema: spec.schema,
            schema_version: spec.schema_version,
            opts: spec.opts,
            rotate_rows: spec.rotate_rows.max(1),
            row_group_rows: spec.row_group_rows,
            cols,
            file: None,
            in_file: 0,
            in_group: 0,
            in_page: 0,
            seq: 0,
            files: Vec::new(),
        }
    }

    /// Pushes rows: `fill` pushes them into the columns and says how many
    /// it pushed; then pages, row groups and files end where they are
    /// due. Inlined with `fill` into the caller's loop: see
    /// `RpcWriter::push` for what that is worth.
    #[inline(always)]
    pub fn push_rows(&mut self, fill: impl FnOnce(&mut C) -> usize) -> Result<(), StoreError> {
        self.open()?;
        let n = fill(&mut self.cols);
        self.rows_added(n)
    }

    /// The file rows go to now (opened on the first row).
    #[inline(always)]
    fn open(&mut self) -> Result<(), StoreError> {
        if self.file.is_none() {
            let path = self
                .dir
                .join(format!("{}-{:05}.parquet", self.prefix, self.seq));
            let props = parquet::file::properties::WriterProperties::builder()
                .set_key_value_metadata(Some(table_metadata(self.table, self.schema_version)));
            self.file = Some(EncodedFile::create(
                &path,
                &self.schema,
                props,
                self.opts.zstd_level,
            )?);
        }
        Ok(())
    }

    /// `n` rows were pushed into the columns: end pages, row groups and
    /// files where they are due.
    #[inline(always)]
    fn rows_added(&mut self, n: usize) -> Result<(), StoreError> {
        if n == 0 {
            return Ok(());
        }
        self.in_page += n;
        self.in_group += n as u64;
        self.in_file += n as u64;
        if self.in_file >= self.rotate_rows {
            return self.close_file();
        }
        if self.in_group >= self.row_group_rows {
            return self.end_row_group();
        }
        if self.in_page >= self.opts.page_rows {
            self.in_page = 0;
            if let Some(f) = self.file.as_mut() {
                let r = self.cols.end_page(f.zstd());
                r.map_err(|e| StoreError::parquet(f.part_path(), e))?;
            }
        }
        Ok(())
    }

    fn end_row_group(&mut self) -> Result<(), StoreError> {
        if self.in_group == 0 {
            return Ok(());
        }
        let Some(f) = self.file.as_mut() else {
            return Ok(());
        };
        let chunks = self
            .cols
            .finish(f.zstd())
            .map_err(|e| StoreError::parquet(f.part_path(), e))?;
        f.write_row_group(self.in_group as usize, chunks)?;
        self.in_group = 0;
        self.in_page = 0;
        Ok(())
    }

    fn close_file(&mut self) -> Result<(), StoreError> {
        self.end_row_group()?;
        if let Some(f) = self.file.take() {
            f.finish()?;
            self.files.push(format!(
                "{}/{}-{:05}.parquet",
                self.table, self.prefix, self.seq
            ));
            self.seq += 1;
        }
        self.in_file = 0;
        Ok(())
    }

    /// Closes the open file; returns the dataset-relative names written.
    pub fn finish(mut self) -> Result<Vec<String>, StoreError> {
        self.close_file()?;
        Ok(self.files)
    }
}
