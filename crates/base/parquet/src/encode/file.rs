//! A Parquet file written from [`EncodedChunk`]s: the container around the
//! hand-written column encoders (page headers, column metadata, footer,
//! bloom filters), shared by every table written that way. The file is a
//! hidden `.NAME.part` until [`EncodedFile::finish`] renames it.

use std::fs::File;
use std::io::BufWriter;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::{ArrowSchemaConverter, add_encoded_arrow_schema_to_metadata};
use parquet::basic::{Compression, ZstdLevel};
use parquet::column::page::PageWriter;
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::Result as PqResult;
use parquet::file::metadata::{ColumnChunkMetaData, ColumnIndexBuilder, OffsetIndexBuilder};
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::properties::{EnabledStatistics, WriterPropertiesBuilder};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::SchemaDescriptor;

use util::digest::{DigestWriter, FileDigest};

use super::{EncodedChunk, PageStat};
use crate::FileError;

pub struct EncodedFile {
    final_path: PathBuf,
    part_path: PathBuf,
    writer: SerializedFileWriter<BufWriter<DigestWriter<File>>>,
    /// The file under `writer`, for starting its writeback.
    fd: RawFd,
    schema: Arc<SchemaDescriptor>,
    zstd: zstd::bulk::Compressor<'static>,
    zstd_level: i32,
}

impl EncodedFile {
    /// Starts `path` for rows of `arrow` (its schema is kept in the footer,
    /// so readers get the Arrow types back). `props` carries the table's
    /// own metadata; pages are compressed with zstd at `zstd_level`.
    pub fn create(
        path: &Path,
        arrow: &arrow_schema::Schema,
        props: WriterPropertiesBuilder,
        zstd_level: i32,
    ) -> Result<Self, FileError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let part_path = path.with_file_name(format!(".{name}.part"));
        let schema = Arc::new(
            ArrowSchemaConverter::new()
                .convert(arrow)
                .map_err(|e| FileError::parquet(path, e))?,
        );
        let mut props = props
            .set_created_by(format!("weir version {}", env!("CARGO_PKG_VERSION")))
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .build();
        add_encoded_arrow_schema_to_metadata(arrow, &mut props);
        let file = crate::files::create_file(&part_path)?;
        let fd = file.as_raw_fd();
        let writer = SerializedFileWriter::new(
            BufWriter::with_capacity(1 << 20, DigestWriter::new(file)),
            schema.root_schema_ptr(),
            Arc::new(props),
        )
        .map_err(|e| FileError::parquet(&part_path, e))?;
        let zstd =
            zstd::bulk::Compressor::new(zstd_level).map_err(|e| FileError::io(&part_path, e))?;
        Ok(EncodedFile {
            final_path: path.to_path_buf(),
            part_path,
            writer,
            fd,
            schema,
            zstd,
            zstd_level,
        })
    }

    /// The compressor the encoders end their pages with.
    pub fn zstd(&mut self) -> &mut zstd::bulk::Compressor<'static> {
        &mut self.zstd
    }

    /// The file being written (its hidden name), for errors.
    pub fn part_path(&self) -> &Path {
        &self.part_path
    }

    /// Writes one row group of `rows` rows: one chunk per column, in
    /// schema order.
    pub fn write_row_group(
        &mut self,
        rows: usize,
        chunks: Vec<EncodedChunk>,
    ) -> Result<(), FileError> {
        self.write_chunks(rows, chunks)
            .map_err(|e| FileError::parquet(&self.part_path, e))?;
        self.start_writeback();
        Ok(())
    }

    /// Asks the kernel to start writing what the file has so far to disk,
    /// without waiting: the sync in [`EncodedFile::finish`] then has only
    /// the last row group left to wait for, instead of the whole file. At
    /// the end of `weir convert --rpc` on the NFSv3 trace, closing the rpc
    /// table took 2.5 to 10 ms, most of it in that sync, and 0.7 ms after.
    /// Advisory: an error here shows again at that sync.
    fn start_writeback(&self) {
        // SAFETY: `fd` belongs to the file inside `self.writer`, open for
        // as long as `self` is; the call reads no memory of ours.
        unsafe {
            libc::sync_file_range(self.fd, 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
    }

    fn write_chunks(&mut self, n: usize, chunks: Vec<EncodedChunk>) -> PqResult<()> {
        let mut rg = self.writer.next_row_group()?;
        let level = ZstdLevel::try_new(self.zstd_level).unwrap_or_default();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let descr = self.schema.column(i);
            let mut sink = TrackedWrite::new(Vec::new());
            let mut dict_offset = None;
            let mut data_offset = None;
            let mut uncompressed = 0u64;
            // The page index: every column's page locations, and the
            // ColumnIndex of a column that keeps its pages' bounds.
            let mut locations = OffsetIndexBuilder::new();
            {
                let mut pw = SerializedPageWriter::new(&mut sink);
                if let Some(p) = chunk.dict_page {
                    let spec = pw.write_page(p)?;
                    dict_offset = Some(spec.offset as i64);
                    uncompressed += spec.uncompressed_size as u64;
                }
                for p in chunk.data_pages {
                    let spec = pw.write_page(p)?;
                    data_offset.get_or_insert(spec.offset as i64);
                    uncompressed += spec.uncompressed_size as u64;
                    locations.append_offset_and_size(spec.offset as i64, spec.bytes_written as i32);
                    locations.append_row_count(spec.num_values as i64);
                }
            }
            let column_index = match &chunk.page_stats {
                Some(stats) => Some(column_index(&descr, stats)?),
                None => None,
            };
            let bytes_written = sink.bytes_written() as u64;
            let buf = Bytes::from(sink.into_inner()?);
            let metadata = ColumnChunkMetaData::builder(descr)
                .set_compression(if chunk.compressed {
                    Compression::ZSTD(level)
                } else {
                    Compression::UNCOMPRESSED
                })
                .set_encodings(chunk.encodings)
                .set_num_values(n as i64)
                .set_total_compressed_size(bytes_written as i64)
                .set_total_uncompressed_size(uncompressed as i64)
                .set_data_page_offset(data_offset.unwrap_or(0))
                .set_dictionary_page_offset(dict_offset)
                .set_statistics(chunk.statistics)
                .build()?;
            rg.append_column(
                &buf,
                ColumnCloseResult {
                    bytes_written,
                    rows_written: n as u64,
                    metadata,
                    bloom_filter: chunk.bloom,
                    column_index,
                    offset_index: Some(locations.build()),
                },
            )?;
        }
        rg.close()?;
        Ok(())
    }

    /// Writes the footer, syncs, and renames the file into place; returns
    /// its size and the digest taken as it was written.
    pub fn finish(self) -> Result<FileDigest, FileError> {
        let part = self.part_path;
        let buffered = self
            .writer
            .into_inner()
            .map_err(|e| FileError::parquet(&part, e))?;
        let (file, digest) = buffered
            .into_inner()
            .map_err(|e| FileError::io(&part, e.into_error()))?
            .into_parts();
        file.sync_data().map_err(|e| FileError::io(&part, e))?;
        drop(file);
        std::fs::rename(&part, &self.final_path).map_err(|e| FileError::io(&self.final_path, e))?;
        Ok(digest)
    }

    /// Abandons the file: removes it.
    pub fn discard(self) {
        let _ = std::fs::remove_file(&self.part_path);
    }
}

/// The ColumnIndex of a column chunk from its pages' bounds; ASCENDING
/// where the pages' bounds climb (a row group's `flow_hash` in flow order),
/// which lets a reader search the pages instead of walking them.
fn column_index(
    descr: &parquet::schema::types::ColumnDescriptor,
    stats: &[PageStat],
) -> PqResult<ColumnIndexMetaData> {
    use parquet::basic::{BoundaryOrder, SortOrder, Type};
    let kind = descr.physical_type();
    let unsigned = descr.sort_order() == SortOrder::UNSIGNED;
    let mut b = ColumnIndexBuilder::new(kind);
    // The order readers compare the bounds in: the column's sort order.
    let key = |v: &[u8]| -> i128 {
        match (kind, v.len(), unsigned) {
            (Type::INT32, 4, true) => u32::from_le_bytes(v.try_into().unwrap_or_default()) as i128,
            (Type::INT32, 4, false) => i32::from_le_bytes(v.try_into().unwrap_or_default()) as i128,
            (Type::INT64, 8, true) => u64::from_le_bytes(v.try_into().unwrap_or_default()) as i128,
            (Type::INT64, 8, false) => i64::from_le_bytes(v.try_into().unwrap_or_default()) as i128,
            _ => 0,
        }
    };
    let mut ascending = matches!(kind, Type::INT32 | Type::INT64);
    let mut last: Option<(i128, i128)> = None;
    for s in stats {
        match &s.bounds {
            Some((lo, hi)) => {
                let (a, z) = (key(lo), key(hi));
                ascending &= last.is_none_or(|(pa, pz)| pa <= a && pz <= z);
                last = Some((a, z));
                b.append(false, lo.clone(), hi.clone(), s.nulls as i64);
            }
            None => b.append(true, Vec::new(), Vec::new(), s.nulls as i64),
        }
    }
    b.set_boundary_order(if ascending {
        BoundaryOrder::ASCENDING
    } else {
        BoundaryOrder::UNORDERED
    });
    b.build()
}
