//! Reading flows files: every slice, or only the columns an index needs.

use std::path::Path;

use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeBinaryArray, Int64Array, UInt8Array, UInt16Array,
    UInt64Array,
};

use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
};
use parquet::file::metadata::PageIndexPolicy;

use super::file::batch_to_slices;
use super::slice::{FlowKey, FlowSlice};
use crate::error::StoreError;
use crate::read::read_batches;

/// Reads every slice of a flows file.
pub fn read_flow_file(path: &Path, out: &mut Vec<FlowSlice>) -> Result<(), StoreError> {
    let f = std::fs::File::open(path).map_err(|e| StoreError::io(path, e))?;
    read_flows_from(path, f, out)
}

/// Reads every slice of the flows file `rel` of the dataset at `root` (one
/// request for a file in an object store: flows files are small).
pub fn read_flow_file_in(
    root: &dyn util::storage::Storage,
    rel: &str,
    out: &mut Vec<FlowSlice>,
) -> Result<(), StoreError> {
    if let Some(dir) = root.local_dir() {
        return read_flow_file(&dir.join(rel), out);
    }
    let name = std::path::PathBuf::from(root.name_of(rel));
    let data = root.read(rel).map_err(|e| StoreError::io(&name, e))?;
    read_flows_from(&name, data, out)
}

fn read_flows_from<R: parquet::file::reader::ChunkReader + 'static>(
    path: &Path,
    f: R,
    out: &mut Vec<FlowSlice>,
) -> Result<(), StoreError> {
    let (reader, rows) = read_batches(path, f, &[], None)?;
    out.reserve(rows as usize);
    for batch in reader {
        let batch = batch.map_err(|e| StoreError::io(path, std::io::Error::other(e)))?;
        batch_to_slices(&batch, out).map_err(|e| StoreError::io(path, std::io::Error::other(e)))?;
    }
    Ok(())
}

/// A row of the flows table as an index reads it: which flow, its first
/// and last frame, its frames each way and its frames weir could not parse
/// whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRow {
    pub key: FlowKey,
    pub first_ns: i64,
    pub last_ns: i64,
    pub a_frames: u64,
    pub b_frames: u64,
    pub parse_errors: u64,
}

impl FlowRow {
    pub fn of_slice(s: &FlowSlice) -> FlowRow {
        let first = s.first_ns().unwrap_or(0);
        FlowRow {
            key: s.key,
            first_ns: first,
            last_ns: s.last_ns().unwrap_or(first),
            a_frames: s.a.frames,
            b_frames: s.b.frames,
            parse_errors: s.a.parse_errors + s.b.parse_errors,
        }
    }
}

/// The rows of a flows file a reader looks up: those whose flow has an
/// address (either side) in one of `ranges` (IPv4 mapped into IPv6),
/// and those without an IP layer when `non_ip`, and those with frames
/// weir could not parse whole when `parse_errors`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowLookup {
    pub ranges: Vec<(u128, u128)>,
    pub non_ip: bool,
    pub parse_errors: bool,
}

/// What a read of flow rows took of its file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowsRead {
    /// The file's rows, and those read (the rest are in pages the lookup
    /// ruled out).
    pub rows: u64,
    pub read: u64,
}

/// The columns of a flows file whose page index a lookup consults.
const LOOKUP_COLUMNS: [&str; 5] = [
    "a_ip",
    "b_ip",
    "ip_version",
    "a_parse_errors",
    "b_parse_errors",
];

/// The rows of a flows file, as ranges per file, that may hold rows
/// `lookup` wants, from the page index (the writer sorts a file's slices
/// by flow, so an address's rows share a page or two); None when the file
/// has no page index for it (it is read whole).
fn looked_up(
    path: &Path,
    data: &[u8],
    meta: &parquet::file::metadata::ParquetMetaData,
    lookup: &FlowLookup,
) -> Result<Option<Vec<std::ops::Range<usize>>>, StoreError> {
    let mut leaves = [0usize; LOOKUP_COLUMNS.len()];
    for (l, name) in leaves.iter_mut().zip(LOOKUP_COLUMNS) {
        match crate::index::leaf(meta, name) {
            Some(i) => *l = i,
            None => return Ok(None),
        }
    }
    let ip = |b: &[u8]| -> Option<u128> { Some(u128::from_be_bytes(b.try_into().ok()?)) };
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    let mut base = 0usize;
    for rg in meta.row_groups() {
        let mut wanted = Vec::new();
        for (k, &leaf) in leaves.iter().enumerate() {
            let pages = match crate::index::page_bounds(data, rg, leaf) {
                Ok(Some(p)) => p,
                Ok(None) => return Ok(None),
                Err(e) => {
                    return Err(StoreError::Invalid {
                        path: path.to_path_buf(),
                        message: format!("the page index of {}: {e}", LOOKUP_COLUMNS[k]),
                    });
                }
            };
            for p in pages {
                let keep = match k {
                    // An address column: a range meets the page's bounds
                    // (bounds that are not 16 bytes: kept, unread).
                    0 | 1 => p
                        .bounds
                        .as_ref()
                        .is_some_and(|(lo, hi)| match (ip(lo), ip(hi)) {
                            (Some(lo), Some(hi)) => {
                                lookup.ranges.iter().any(|&(a, b)| a <= hi && b >= lo)
                            }
                            _ => true,
                        }),
                    // ip_version is null for rows without an IP layer.
                    2 => lookup.non_ip && p.nulls,
                    // A page whose greatest count is not zero.
                    _ => {
                        lookup.parse_errors
                            && p.bounds
                                .as_ref()
                                .is_none_or(|(_, hi)| hi.iter().any(|&b| b != 0))
                    }
                };
                if keep {
                    wanted
                        .push(base + p.first_row as usize..base + (p.first_row + p.rows) as usize);
                }
            }
        }
        wanted.sort_by_key(|r| r.start);
        for r in wanted {
            match out.last_mut() {
                Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
                _ => out.push(r),
            }
        }
        base += rg.num_rows().max(0) as usize;
    }
    Ok(Some(out))
}

/// Hands `each` the [`FlowRow`] of every row of a flows file, reading only
/// the columns it needs (a third of the file), mapped; with a
/// `lookup`, only the rows of the pages that may hold the rows it wants
/// (and maybe others: `each` decides).
pub fn read_flow_rows(
    path: &Path,
    lookup: Option<&FlowLookup>,
    mut each: impl FnMut(&FlowRow),
) -> Result<RowsRead, StoreError> {
    const COLUMNS: [&str; 14] = [
        "ip_version",
        "ethertype",
        "a_ip",
        "a_port",
        "b_ip",
        "b_port",
        "proto",
        "has_ports",
        "first_ns",
        "span_ns",
        "a_frames",
        "b_frames",
        "a_parse_errors",
        "b_parse_errors",
    ];
    // Mapped: a lookup touches the footer and a page or two of each file.
    let bytes = crate::decode::scan::map_file(path)?;
    let parquet = |e| StoreError::parquet(path, e);
    let options = ArrowReaderOptions::new()
        .with_column_index_policy(PageIndexPolicy::Skip)
        .with_offset_index_policy(PageIndexPolicy::Optional);
    let meta = ArrowReaderMetadata::load(&bytes, options).map_err(parquet)?;
    let rows = meta.metadata().file_metadata().num_rows().max(0) as u64;
    let ranges = match lookup {
        Some(l) => looked_up(path, &bytes, meta.metadata(), l)?,
        None => None,
    };
    let read = ranges
        .as_ref()
        .map_or(rows, |r| r.iter().map(|r| r.len() as u64).sum());
    let mut b = ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), meta);
    let mask = ProjectionMask::columns(b.parquet_schema(), COLUMNS);
    b = b.with_projection(mask);
    if let Some(r) = ranges {
        // Pages without a selected row are skipped, not decoded.
        b = b.with_row_selection(RowSelection::from_consecutive_ranges(
            r.into_iter(),
            rows as usize,
        ));
    }
    let reader = b
        .with_batch_size(crate::read::BATCH_ROWS)
        .build()
        .map_err(parquet)?;
    let invalid = |message: String| StoreError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    for batch in reader {
        let b = batch.map_err(|e| invalid(e.to_string()))?;
        let col = |name: &str| {
            b.column_by_name(name)
                .ok_or_else(|| invalid(format!("no column {name} (not a weir flows table?)")))
        };
        fn typed<'a, T: 'static>(a: &'a ArrayRef, name: &str) -> Result<&'a T, String> {
            a.as_any()
                .downcast_ref::<T>()
                .ok_or_else(|| format!("column {name} has type {}", a.data_type()))
        }
        let (ipv, eth) = (col("ip_version")?, col("ethertype")?);
        let ipv: &UInt8Array = typed(ipv, "ip_version").map_err(invalid)?;
        let eth: &UInt16Array = typed(eth, "ethertype").map_err(invalid)?;
        let (a_ip, b_ip) = (col("a_ip")?, col("b_ip")?);
        let a_ip: &FixedSizeBinaryArray = typed(a_ip, "a_ip").map_err(invalid)?;
        let b_ip: &FixedSizeBinaryArray = typed(b_ip, "b_ip").map_err(invalid)?;
        let (a_port, b_port) = (col("a_port")?, col("b_port")?);
        let a_port: &UInt16Array = typed(a_port, "a_port").map_err(invalid)?;
        let b_port: &UInt16Array = typed(b_port, "b_port").map_err(invalid)?;
        let proto = col("proto")?;
        let proto: &UInt8Array = typed(proto, "proto").map_err(invalid)?;
        let ports = col("has_ports")?;
        let ports: &BooleanArray = typed(ports, "has_ports").map_err(invalid)?;
        let (first, span) = (col("first_ns")?, col("span_ns")?);
        let first: &Int64Array = typed(first, "first_ns").map_err(invalid)?;
        let span: &Int64Array = typed(span, "span_ns").map_err(invalid)?;
        let u64s = |name: &str| -> Result<&UInt64Array, StoreError> {
            typed(col(name)?, name).map_err(invalid)
        };
        let (af, bf) = (u64s("a_frames")?, u64s("b_frames")?);
        let (ae, be) = (u64s("a_parse_errors")?, u64s("b_parse_errors")?);
        let ip16 = |a: &FixedSizeBinaryArray, i: usize| -> [u8; 16] {
            a.value(i).try_into().unwrap_or([0; 16])
        };
        for i in 0..b.num_rows() {
            let ip = !ipv.is_null(i);
            let key = FlowKey {
                ip_version: if ip { ipv.value(i) } else { 0 },
                ethertype: (!ip && !eth.is_null(i)).then(|| eth.value(i)),
                a_ip: if ip { ip16(a_ip, i) } else { [0; 16] },
                b_ip: if ip { ip16(b_ip, i) } else { [0; 16] },
                a_port: if ip { a_port.value(i) } else { 0 },
                b_port: if ip { b_port.value(i) } else { 0 },
                proto: if ip { proto.value(i) } else { 0 },
                has_ports: ip && ports.value(i),
            };
            each(&FlowRow {
                key,
                first_ns: first.value(i),
                last_ns: first.value(i) + span.value(i),
                a_frames: af.value(i),
                b_frames: bf.value(i),
                parse_errors: ae.value(i) + be.value(i),
            });
        }
    }
    Ok(RowsRead { rows, read })
}
