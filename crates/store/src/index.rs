//! The packet table's index: which pages of a packet file hold given flows.
//!
//! In flow order (`weir.row_order` = `flow`) a row group's rows are sorted
//! by `flow_hash`, so its pages hold ascending ranges of hashes that meet
//! only where a flow's rows cross a page's end. The packet writer keeps each
//! page's range in the page index: the `flow_hash` column's ColumnIndex
//! (each page's least and greatest hash and its nulls), and every column's
//! OffsetIndex (where each page lies and its first row; the columns of
//! [`INDEX_COLUMNS`] end their pages at the same rows, every 2 Ki, the
//! others every 128 Ki). It is the standard Parquet page index, which
//! arrow-rs, DataFusion and DuckDB read too, written with the footer, so it
//! is in the file's digest and is whole whenever the file is.
//!
//! A reader that knows which flows it wants (the flows table says which
//! flows match a filter, `analyze::index`) reads, of each row group, the
//! pages whose range holds one of their hashes: for one flow, a page per
//! row group instead of the row group.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use parquet::file::statistics::Statistics;

use crate::decode::scan::{PagePick, TableScan, map_file, metadata};
use crate::decode::thrift::{self, PageLocation};
use crate::decode::values::Bytes;
use crate::error::StoreError;

/// The column whose pages' bounds are indexed.
pub const INDEXED_COLUMN: &str = "flow_hash";

/// The columns whose pages end together, every
/// `EncodeOptions::index_page_rows` rows (the others' pages are larger):
/// the indexed one, then what a reader of frames takes of each row.
pub const INDEX_COLUMNS: [&str; 4] = [INDEXED_COLUMN, "ts", "pcap_file", "pcap_offset"];

/// One page of `flow_hash` in a row group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HashPage {
    pub first_row: u64,
    pub rows: u64,
    /// The least and greatest hash of the page (None: only nulls).
    pub bounds: Option<(u32, u32)>,
    /// Whether the page holds rows without a flow hash (frames without an
    /// IP layer, or whose ports were cut off).
    pub nulls: bool,
}

/// A packet file opened through its index.
pub struct PacketIndex {
    path: PathBuf,
    data: bytes::Bytes,
    meta: Arc<ParquetMetaData>,
    /// Per row group, the pages of `flow_hash`.
    groups: Vec<Vec<HashPage>>,
}

/// The pages of a file chosen for some flows: per row group read, the
/// pages (by number) to read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chosen {
    pub groups: Vec<(usize, Vec<usize>)>,
}

impl Chosen {
    pub fn pages(&self) -> usize {
        self.groups.iter().map(|(_, p)| p.len()).sum()
    }
}

fn invalid(path: &Path, message: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// The bytes of `meta`'s page-index structure at `offset`/`length`.
fn slice(data: &[u8], offset: Option<i64>, length: Option<i32>) -> Option<&[u8]> {
    let start = usize::try_from(offset?).ok()?;
    let len = usize::try_from(length?).ok()?;
    data.get(start..start.checked_add(len)?)
}

/// The leaf number of column `name`.
pub(crate) fn leaf(meta: &ParquetMetaData, name: &str) -> Option<usize> {
    let schema = meta.file_metadata().schema_descr();
    (0..schema.num_columns()).find(|&i| schema.column(i).path().parts() == [name.to_string()])
}

/// A column chunk's page locations, from its OffsetIndex (None without).
fn locations(
    data: &[u8],
    rg: &RowGroupMetaData,
    leaf: usize,
) -> Option<Result<Vec<PageLocation>, String>> {
    let c = rg.column(leaf);
    let raw = slice(data, c.offset_index_offset(), c.offset_index_length())?;
    Some(thrift::offset_index(&mut Bytes::new(raw)).map_err(|e| e.to_string()))
}

/// One page of a column chunk, as its page index tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageBounds {
    pub first_row: u64,
    pub rows: u64,
    /// The page's least and greatest value, as Parquet's statistics hold
    /// them (plain-encoded); None when it holds only nulls.
    pub bounds: Option<(Vec<u8>, Vec<u8>)>,
    /// Whether it may hold nulls.
    pub nulls: bool,
}

/// The pages of column `leaf` in row group `rg` of the file `data`, from
/// its page index: None when the chunk has none, an error when it is
/// damaged.
pub fn page_bounds(
    data: &[u8],
    rg: &RowGroupMetaData,
    leaf: usize,
) -> Result<Option<Vec<PageBounds>>, String> {
    let c = rg.column(leaf);
    let Some(raw) = slice(data, c.column_index_offset(), c.column_index_length()) else {
        return Ok(None);
    };
    let index = thrift::column_index(&mut Bytes::new(raw)).map_err(|e| e.to_string())?;
    let locs = match locations(data, rg, leaf) {
        Some(l) => l?,
        None => return Ok(None),
    };
    if locs.len() != index.null_pages.len()
        || index.min.len() != locs.len()
        || index.max.len() != locs.len()
    {
        return Err("the page index's ColumnIndex and OffsetIndex count different pages".into());
    }
    let total = rg.num_rows().max(0) as u64;
    let mut pages = Vec::with_capacity(locs.len());
    let bounds = index.min.into_iter().zip(index.max);
    for (i, (loc, (min, max))) in locs.iter().zip(bounds).enumerate() {
        let first = loc.first_row.max(0) as u64;
        let end = locs.get(i + 1).map_or(total, |n| n.first_row.max(0) as u64);
        let bounds = (!index.null_pages[i]).then_some((min, max));
        let nulls = match &index.null_counts {
            Some(n) => n.get(i).is_none_or(|&n| n > 0),
            // Unknown: a page that may hold nulls.
            None => true,
        };
        pages.push(PageBounds {
            first_row: first,
            rows: end.saturating_sub(first),
            nulls: nulls || bounds.is_none(),
            bounds,
        });
    }
    Ok(Some(pages))
}

impl PacketIndex {
    /// The packet file at `path` with its index; None when it has none
    /// (written in arrival order, before weir wrote one, or by another
    /// writer whose pages end elsewhere): a reader then reads its row
    /// groups whole.
    pub fn open(path: &Path) -> Result<Option<PacketIndex>, StoreError> {
        let data = map_file(path)?;
        let meta = Arc::new(metadata(path, &data)?);
        Self::of_parsed(path, data, meta)
    }

    /// [`PacketIndex::open`] of a file already mapped and parsed.
    pub fn of_parsed(
        path: &Path,
        data: bytes::Bytes,
        meta: Arc<ParquetMetaData>,
    ) -> Result<Option<PacketIndex>, StoreError> {
        let flow_order = meta.file_metadata().key_value_metadata().is_some_and(|kv| {
            kv.iter()
                .any(|e| e.key == "weir.row_order" && e.value.as_deref() == Some("flow"))
        });
        let Some(flow) = leaf(&meta, INDEXED_COLUMN).filter(|_| flow_order) else {
            return Ok(None);
        };
        let mut groups = Vec::with_capacity(meta.num_row_groups());
        for (g, rg) in meta.row_groups().iter().enumerate() {
            let pages = match page_bounds(&data, rg, flow) {
                Ok(Some(p)) => p,
                Ok(None) => return Ok(None),
                Err(e) => {
                    return Err(invalid(
                        path,
                        format!("the page index of {INDEXED_COLUMN}: {e}"),
                    ));
                }
            };
            // The columns read with flow_hash end their pages with it (a
            // file another writer made may not). One writer wrote every row
            // group: the first tells (a scan checks the row groups it reads
            // again, and says so if another does not).
            for name in INDEX_COLUMNS[1..].iter().filter(|_| g == 0) {
                let Some(l) = leaf(&meta, name) else {
                    return Ok(None);
                };
                match locations(&data, rg, l) {
                    Some(Ok(other))
                        if other.len() == pages.len()
                            && other
                                .iter()
                                .zip(&pages)
                                .all(|(a, b)| a.first_row.max(0) as u64 == b.first_row) => {}
                    _ => return Ok(None),
                }
            }
            let hash = |b: &[u8]| b.try_into().ok().map(u32::from_le_bytes);
            let mut hashes = Vec::with_capacity(pages.len());
            for p in pages {
                let bounds = match &p.bounds {
                    None => None,
                    Some((lo, hi)) => match (hash(lo), hash(hi)) {
                        (Some(a), Some(b)) => Some((a, b)),
                        _ => {
                            return Err(invalid(
                                path,
                                "a flow_hash page bound that is not 4 bytes",
                            ));
                        }
                    },
                };
                hashes.push(HashPage {
                    first_row: p.first_row,
                    rows: p.rows,
                    bounds,
                    nulls: p.nulls,
                });
            }
            groups.push(hashes);
        }
        Ok(Some(PacketIndex {
            path: path.to_path_buf(),
            data,
            meta,
            groups,
        }))
    }

    pub fn meta(&self) -> &Arc<ParquetMetaData> {
        &self.meta
    }

    /// The pages of `flow_hash` in row group `g`.
    pub fn hash_pages(&self, g: usize) -> &[HashPage] {
        &self.groups[g]
    }

    /// Pages of the file (of `flow_hash`; every column has as many).
    pub fn pages(&self) -> usize {
        self.groups.iter().map(Vec::len).sum()
    }

    /// The pages, of the row groups `keep` accepts, that may hold a row
    /// whose hash is in `hashes` (sorted ascending) or, with `nulls`, a
    /// row without one.
    pub fn choose(
        &self,
        hashes: &[u32],
        nulls: bool,
        keep: impl Fn(&RowGroupMetaData) -> bool,
    ) -> Chosen {
        let mut out = Chosen::default();
        for (g, pages) in self.groups.iter().enumerate() {
            if !keep(self.meta.row_group(g)) {
                continue;
            }
            let chosen: Vec<usize> = (pages.iter().enumerate())
                .filter(|(_, p)| {
                    (nulls && p.nulls)
                        || p.bounds.is_some_and(|(lo, hi)| {
                            let i = hashes.partition_point(|&h| h < lo);
                            hashes.get(i).is_some_and(|&h| h <= hi)
                        })
                })
                .map(|(i, _)| i)
                .collect();
            if !chosen.is_empty() {
                out.groups.push((g, chosen));
            }
        }
        out
    }

    /// A scan of the columns `names` over the pages `chosen`.
    pub fn scan(&self, chosen: &Chosen, names: &[&str]) -> Result<TableScan, StoreError> {
        let leaves = names
            .iter()
            .map(|n| {
                leaf(&self.meta, n).ok_or_else(|| invalid(&self.path, format!("no column {n}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut picks = Vec::with_capacity(chosen.groups.len());
        for (g, pages) in &chosen.groups {
            let rg = self.meta.row_group(*g);
            let hash_pages = &self.groups[*g];
            let mut pick = PagePick {
                group: *g,
                rows: pages.iter().map(|&p| hash_pages[p].rows as usize).sum(),
                ranges: Vec::with_capacity(names.len()),
            };
            for &l in &leaves {
                let locs = locations(&self.data, rg, l)
                    .ok_or_else(|| invalid(&self.path, "a column without its page index"))?
                    .map_err(|e| invalid(&self.path, format!("the page index: {e}")))?;
                // The columns read end their pages at the same rows.
                if locs.len() != hash_pages.len()
                    || locs
                        .iter()
                        .zip(hash_pages)
                        .any(|(l, h)| l.first_row as u64 != h.first_row)
                {
                    return Err(invalid(
                        &self.path,
                        "a column whose pages end at other rows than flow_hash's (only those \
                         of store::index::INDEX_COLUMNS end together)",
                    ));
                }
                let c = rg.column(l);
                let mut ranges = Vec::with_capacity(pages.len() + 1);
                if let Some(d) = c.dictionary_page_offset() {
                    ranges.push((d.max(0) as usize, c.data_page_offset().max(0) as usize));
                }
                for &p in pages {
                    let loc = locs[p];
                    let start = loc.offset.max(0) as usize;
                    ranges.push((start, start + loc.compressed_size.max(0) as usize));
                }
                pick.ranges.push(ranges);
            }
            picks.push(pick);
        }
        TableScan::of_pages(
            &self.path,
            self.data.clone(),
            self.meta.clone(),
            names,
            picks,
        )
    }
}

/// What the frames of a packet file may hold that a reader of its index
/// must know of, from the row groups' statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holds {
    /// Frames with a VLAN tag.
    pub vlan: bool,
    /// IP headers longer than 40 bytes: IPv6 extension headers (or IPv4
    /// options of more than 20 bytes).
    pub long_ip_headers: bool,
    /// Tunnelled frames (their IP columns describe the innermost packet).
    pub tunnels: bool,
}

/// What the row groups of `meta` that `keep` accepts hold.
pub fn holds(meta: &ParquetMetaData, keep: impl Fn(&RowGroupMetaData) -> bool) -> Holds {
    let (vlan, hdr, tunnel) = (
        leaf(meta, "vlan"),
        leaf(meta, "ip_hdr_len"),
        leaf(meta, "tunnel_depth"),
    );
    let mut h = Holds::default();
    for rg in meta.row_groups().iter().filter(|rg| keep(rg)) {
        let stats = |l: Option<usize>| l.and_then(|l| rg.column(l).statistics());
        let rows = rg.num_rows().max(0) as u64;
        // A column without statistics may hold anything.
        h.vlan |= vlan.is_some()
            && stats(vlan).is_none_or(|s| s.null_count_opt().is_none_or(|n| n < rows));
        h.long_ip_headers |= hdr.is_some()
            && match stats(hdr) {
                Some(Statistics::Int32(s)) => s.max_opt().is_some_and(|&m| m > 40),
                Some(_) => true,
                None => rows > 0,
            };
        h.tunnels |= tunnel.is_some()
            && match stats(tunnel) {
                Some(Statistics::Int32(s)) => s.max_opt().is_some_and(|&m| m > 0),
                Some(_) => true,
                None => rows > 0,
            };
    }
    h
}
