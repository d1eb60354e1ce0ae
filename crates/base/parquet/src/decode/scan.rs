//! [`TableScan`]: the rows of some columns of a Parquet file, batch by
//! batch. A batch is as many rows as every column has left in its current
//! page (weir ends all columns' pages together, so its batches are whole
//! pages); columns are decoded only when [`TableScan::load`] asks, so a
//! caller that needs a column in a few batches skips the rest undecoded.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parquet::basic::{Compression, Encoding, Type as Physical};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader, RowGroupMetaData};

use super::DecodeError;
use super::thrift::{self, DATA_PAGE, DATA_PAGE_V2, DICTIONARY_PAGE, PageHeader};
use super::values::{self, Bytes};
use crate::FileError;
use util::storage::Root;

/// Pages claiming more rows or bytes are refused as corrupt (weir writes
/// 64 Ki rows a page), so a hostile header cannot size a huge allocation.
const MAX_PAGE_ROWS: usize = 1 << 24;
const MAX_PAGE_BYTES: usize = 1 << 28;

const PLAIN: i32 = 0;
const PLAIN_DICTIONARY: i32 = 2;
const RLE: i32 = 3;
const DELTA_BINARY_PACKED: i32 = 5;
const RLE_DICTIONARY: i32 = 8;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// INT32 (values zero-extended) or INT64.
    Int {
        narrow: bool,
    },
    /// FIXED_LEN_BYTE_ARRAY of this many bytes (≤ 16), read big-endian.
    Fixed(usize),
    Text,
}

/// A column chunk's dictionary.
#[derive(Default)]
pub struct Dictionary {
    ints: Vec<u64>,
    fixed: Vec<u128>,
    /// Text: value k is `text[spans[k].0..spans[k].1]`.
    spans: Vec<(u32, u32)>,
    text: Vec<u8>,
    len: usize,
    generation: u64,
}

impl Dictionary {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A number no other dictionary read in this process has, so a
    /// caller may keep what it derived from a dictionary until the
    /// generation changes.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Integer value `k` (of an integer column's dictionary).
    #[inline]
    pub fn int(&self, k: usize) -> Option<u64> {
        self.ints.get(..self.len)?.get(k).copied()
    }

    /// Text value `k`.
    pub fn text(&self, k: usize) -> Option<&[u8]> {
        let &(a, b) = self.spans.get(k)?;
        self.text.get(a as usize..b as usize)
    }
}

/// One column's current page, decoded row by row: a row without a value
/// holds 0 (or empty text) in the value vectors.
#[derive(Default)]
struct Decoded {
    /// Per row whether it has a value; empty when every row does.
    valid: Vec<bool>,
    ints: Vec<u64>,
    fixed: Vec<u128>,
    /// Dictionary codes per row, when a text page (or a page of a column
    /// that keeps codes) is dictionary-coded.
    codes: Vec<u32>,
    coded: bool,
    /// Text of PLAIN pages: the page's bytes, and per row the span of its
    /// value in them.
    spans: Vec<(u32, u32)>,
    text: Vec<u8>,
}

struct Column {
    name: String,
    kind: Kind,
    optional: bool,
    codec: Compression,
    /// The chunk's pages not yet read: [next, end) of the file; in a scan
    /// of chosen pages, the ranges of the pages still to read after it.
    next: usize,
    end: usize,
    ranges: std::collections::VecDeque<(usize, usize)>,
    page: Option<(PageHeader, usize, usize)>,
    page_rows: usize,
    /// The first row of the current batch within the page.
    at: usize,
    decoded: bool,
    /// Integer pages that are dictionary-coded give their codes, not
    /// values (see [`TableScan::keep_codes`]).
    keep_codes: bool,
    dict: Dictionary,
    out: Decoded,
    /// Decompressed page bytes.
    buf: Vec<u8>,
}

/// A file's bytes as a scan reads them: all of them (a mapped local
/// file), or only the column chunks the scan needs (fetched by range from
/// an object store), at their offsets in the file.
#[derive(Clone, Debug)]
pub struct FileData {
    len: usize,
    /// (offset in the file, bytes), by offset, not overlapping.
    pieces: Vec<(usize, bytes::Bytes)>,
}

impl FileData {
    /// The whole file.
    pub fn whole(data: bytes::Bytes) -> FileData {
        FileData {
            len: data.len(),
            pieces: vec![(0, data)],
        }
    }

    /// A file of `len` bytes of which `pieces` (offset, bytes) are known.
    pub fn pieces(len: usize, mut pieces: Vec<(usize, bytes::Bytes)>) -> FileData {
        pieces.sort_by_key(|p| p.0);
        FileData { len, pieces }
    }

    /// The file's length.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes of `range`, when one piece holds all of them.
    pub fn get(&self, range: std::ops::Range<usize>) -> Option<&[u8]> {
        let k = self.pieces.partition_point(|p| p.0 <= range.start);
        let (at, bytes) = self.pieces.get(k.checked_sub(1)?)?;
        bytes.get(range.start - at..range.end.checked_sub(*at)?)
    }
}

impl From<bytes::Bytes> for FileData {
    fn from(data: bytes::Bytes) -> FileData {
        FileData::whole(data)
    }
}

/// The rows of some columns of one file, batch by batch.
pub struct TableScan {
    path: PathBuf,
    data: FileData,
    meta: Arc<ParquetMetaData>,
    groups: Vec<usize>,
    next_group: usize,
    group_rows: (usize, usize),
    leaves: Vec<usize>,
    cols: Vec<Column>,
    batch: usize,
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    /// A scan of chosen pages: per row group of `groups`, what to read.
    picks: Option<Vec<PagePick>>,
}

/// The pages a scan of chosen pages reads of one row group: per column
/// (in the order named), the byte ranges of its dictionary page (if it
/// has one) and of the pages chosen, which hold `rows` rows together
/// (every column's pages cover the same rows).
#[derive(Clone, Debug, Default)]
pub struct PagePick {
    pub group: usize,
    pub rows: usize,
    pub ranges: Vec<Vec<(usize, usize)>>,
}

/// Why `meta`'s columns `names` cannot be scanned, if they cannot; and
/// their leaf numbers.
fn check(meta: &ParquetMetaData, names: &[&str]) -> Result<Vec<usize>, DecodeError> {
    let schema = meta.file_metadata().schema_descr();
    let mut leaves = Vec::with_capacity(names.len());
    for name in names {
        let leaf = (0..schema.num_columns())
            .find(|&i| schema.column(i).path().parts() == [name.to_string()])
            .ok_or_else(|| DecodeError::unsupported(format!("no column {name}")))?;
        let d = schema.column(leaf);
        if d.max_rep_level() != 0 || d.max_def_level() > 1 {
            return Err(DecodeError::unsupported(format!("{name} is nested")));
        }
        kind_of(d.physical_type(), d.type_length())
            .ok_or_else(|| DecodeError::unsupported(format!("{name}'s type")))?;
        for rg in meta.row_groups() {
            let c = rg.column(leaf);
            if !matches!(
                c.compression(),
                Compression::UNCOMPRESSED | Compression::ZSTD(_)
            ) {
                return Err(DecodeError::unsupported(format!(
                    "{name} is compressed with {}",
                    c.compression()
                )));
            }
            if let Some(e) = c.encodings().find(|e| {
                !matches!(
                    e,
                    Encoding::PLAIN
                        | Encoding::RLE
                        | Encoding::RLE_DICTIONARY
                        | Encoding::PLAIN_DICTIONARY
                        | Encoding::DELTA_BINARY_PACKED
                )
            }) {
                return Err(DecodeError::unsupported(format!("{name} is encoded {e}")));
            }
        }
        leaves.push(leaf);
    }
    Ok(leaves)
}

fn kind_of(t: Physical, length: i32) -> Option<Kind> {
    match t {
        Physical::INT32 => Some(Kind::Int { narrow: true }),
        Physical::INT64 => Some(Kind::Int { narrow: false }),
        Physical::FIXED_LEN_BYTE_ARRAY if (1..=16).contains(&length) => {
            Some(Kind::Fixed(length as usize))
        }
        Physical::BYTE_ARRAY => Some(Kind::Text),
        _ => None,
    }
}

/// The file's bytes, mapped: pages are read in place.
pub fn map_file(path: &Path) -> Result<bytes::Bytes, FileError> {
    let f = std::fs::File::open(path).map_err(|e| FileError::io(path, e))?;
    // SAFETY: the map is only read, and a dataset's files are complete
    // when renamed into place and never written again; the one hazard is
    // a file truncated by someone else while it is read (SIGBUS), as for
    // the traces `weir convert` maps.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| FileError::io(path, e))?;
    Ok(bytes::Bytes::from_owner(map))
}

/// The footer of the file `data` (`path` names it in errors).
pub fn metadata(path: &Path, data: &bytes::Bytes) -> Result<ParquetMetaData, FileError> {
    ParquetMetaDataReader::new()
        .parse_and_finish(data)
        .map_err(|e| FileError::parquet(path, e))
}

/// Whether the file at `path` has the columns `names` in a form
/// [`TableScan`] reads (`Ok(false)` for a missing column or an encoding,
/// codec or type it does not handle).
pub fn readable(path: &Path, names: &[&str]) -> Result<bool, FileError> {
    let data = map_file(path)?;
    Ok(supports(&metadata(path, &data)?, names))
}

/// Whether a file with footer `meta` has the columns `names` in a form
/// [`TableScan`] reads.
pub fn supports(meta: &ParquetMetaData, names: &[&str]) -> bool {
    check(meta, names).is_ok()
}

/// Bytes fetched from the end of a file in an object store at first: the
/// footer of a packet file (a few KiB a row group) is in them at once.
const FOOTER_HINT: u64 = 256 << 10;

/// A Parquet file to scan: mapped from the local disk, or read by range
/// from an object store (its footer first, then only the column chunks a
/// scan needs).
#[derive(Clone, Debug)]
pub enum ScanFile {
    Mapped { path: PathBuf, data: bytes::Bytes },
    Remote { root: Root, rel: String, len: u64 },
}

impl ScanFile {
    /// The file `rel` of the dataset at `root`, and its footer.
    pub fn open(root: &Root, rel: &str) -> Result<(ScanFile, ParquetMetaData), FileError> {
        if let Some(dir) = root.local_dir() {
            let path = dir.join(rel);
            let data = map_file(&path)?;
            let meta = metadata(&path, &data)?;
            return Ok((ScanFile::Mapped { path, data }, meta));
        }
        let name = PathBuf::from(root.name_of(rel));
        let io = |e| FileError::io(&name, e);
        let (mut tail, len) = root.read_tail(rel, FOOTER_HINT).map_err(io)?;
        let bad = |m: String| FileError::Invalid {
            path: name.clone(),
            message: m,
        };
        let last8: &[u8; 8] = (tail.len() >= 8)
            .then(|| tail[tail.len() - 8..].try_into().ok())
            .flatten()
            .ok_or_else(|| bad("too short for a Parquet file".into()))?;
        let footer = parquet::file::metadata::FooterTail::try_new(last8)
            .map_err(|e| FileError::parquet(&name, e))?;
        let need = footer.metadata_length() as u64 + 8;
        if need > len {
            return Err(bad("a footer longer than the file".into()));
        }
        if need > tail.len() as u64 {
            tail = root.read_tail(rel, need).map_err(io)?.0;
        }
        let start = tail.len().saturating_sub(need as usize);
        let meta = ParquetMetaDataReader::decode_metadata(&tail[start..tail.len() - 8])
            .map_err(|e| FileError::parquet(&name, e))?;
        let file = ScanFile::Remote {
            root: root.clone(),
            rel: rel.to_string(),
            len,
        };
        Ok((file, meta))
    }

    /// How errors name it.
    pub fn path(&self) -> PathBuf {
        match self {
            ScanFile::Mapped { path, .. } => path.clone(),
            ScanFile::Remote { root, rel, .. } => PathBuf::from(root.name_of(rel)),
        }
    }

    /// What a scan of the columns `names` over the row groups `keep`
    /// accepts reads: the mapped file, or those column chunks fetched.
    pub fn data(
        &self,
        meta: &ParquetMetaData,
        names: &[&str],
        keep: impl Fn(usize, &RowGroupMetaData) -> bool,
    ) -> Result<FileData, FileError> {
        let (root, rel, len) = match self {
            ScanFile::Mapped { data, .. } => return Ok(FileData::whole(data.clone())),
            ScanFile::Remote { root, rel, len } => (root, rel, *len),
        };
        let path = self.path();
        let leaves = check(meta, names).map_err(|e| FileError::Invalid {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let mut ranges = Vec::new();
        for (g, rg) in meta.row_groups().iter().enumerate() {
            if !keep(g, rg) {
                continue;
            }
            for &leaf in &leaves {
                let m = rg.column(leaf);
                let start = m.dictionary_page_offset().unwrap_or(m.data_page_offset());
                let (start, n) = (start.max(0) as u64, m.compressed_size().max(0) as u64);
                if start.checked_add(n).is_none_or(|e| e > len) {
                    return Err(FileError::Invalid {
                        path,
                        message: "a column chunk past the file's end".into(),
                    });
                }
                ranges.push(start..start + n);
            }
        }
        let got = root
            .read_ranges(rel, &ranges)
            .map_err(|e| FileError::io(&path, e))?;
        let pieces = ranges
            .iter()
            .zip(got)
            .map(|(r, b)| (r.start as usize, b))
            .collect();
        Ok(FileData::pieces(len as usize, pieces))
    }

    /// A scan of the columns `names` over the row groups `keep` accepts.
    pub fn scan(
        &self,
        meta: Arc<ParquetMetaData>,
        names: &[&str],
        keep: impl Fn(usize, &RowGroupMetaData) -> bool,
    ) -> Result<TableScan, FileError> {
        let data = self.data(&meta, names, &keep)?;
        TableScan::of_parsed(&self.path(), data, meta, names, keep)
    }
}

/// A scan of the columns `names` of the file `rel` of the dataset at
/// `root`, over the row groups `keep` accepts.
pub fn open_in(
    root: &Root,
    rel: &str,
    names: &[&str],
    keep: impl Fn(&RowGroupMetaData) -> bool,
) -> Result<TableScan, FileError> {
    let (file, meta) = ScanFile::open(root, rel)?;
    file.scan(Arc::new(meta), names, |_, rg| keep(rg))
}

/// Whether the file `rel` of the dataset at `root` has the columns
/// `names` in a form [`TableScan`] reads (its footer alone is read).
pub fn readable_in(root: &Root, rel: &str, names: &[&str]) -> Result<bool, FileError> {
    Ok(supports(&ScanFile::open(root, rel)?.1, names))
}

impl TableScan {
    /// A scan of the columns `names` of the file at `path`, over the row
    /// groups `keep` accepts.
    pub fn open(
        path: &Path,
        names: &[&str],
        keep: impl Fn(&RowGroupMetaData) -> bool,
    ) -> Result<TableScan, FileError> {
        TableScan::of_bytes(path, map_file(path)?, names, keep)
    }

    /// [`TableScan::open`] of a file already in memory (`path` names it in
    /// errors).
    pub fn of_bytes(
        path: &Path,
        data: bytes::Bytes,
        names: &[&str],
        keep: impl Fn(&RowGroupMetaData) -> bool,
    ) -> Result<TableScan, FileError> {
        let meta = Arc::new(metadata(path, &data)?);
        TableScan::of_parsed(path, data, meta, names, |_, rg| keep(rg))
    }

    /// [`TableScan::of_bytes`] with the footer already parsed ([`metadata`]),
    /// over the row groups `keep` accepts by number and metadata: scans of
    /// one file's row groups on several threads share one parse.
    pub fn of_parsed(
        path: &Path,
        data: impl Into<FileData>,
        meta: Arc<ParquetMetaData>,
        names: &[&str],
        keep: impl Fn(usize, &RowGroupMetaData) -> bool,
    ) -> Result<TableScan, FileError> {
        let invalid = |e: DecodeError| FileError::Invalid {
            path: path.into(),
            message: e.to_string(),
        };
        let leaves = check(&meta, names).map_err(invalid)?;
        let schema = meta.file_metadata().schema_descr();
        let cols = leaves
            .iter()
            .zip(names)
            .map(|(&leaf, name)| {
                let d = schema.column(leaf);
                Column {
                    name: name.to_string(),
                    kind: kind_of(d.physical_type(), d.type_length()).expect("checked"),
                    optional: d.max_def_level() == 1,
                    codec: Compression::UNCOMPRESSED,
                    next: 0,
                    end: 0,
                    ranges: Default::default(),
                    page: None,
                    page_rows: 0,
                    at: 0,
                    decoded: false,
                    keep_codes: false,
                    dict: Dictionary::default(),
                    out: Decoded::default(),
                    buf: Vec::new(),
                }
            })
            .collect();
        let groups = (meta.row_groups().iter().enumerate())
            .filter(|(i, rg)| keep(*i, rg))
            .map(|(i, _)| i)
            .collect();
        Ok(TableScan {
            path: path.into(),
            data: data.into(),
            meta,
            groups,
            next_group: 0,
            group_rows: (0, 0),
            leaves,
            cols,
            batch: 0,
            zstd: None,
            picks: None,
        })
    }

    /// A scan of the columns `names` that reads only the pages `picks`
    /// name (found through the file's page index), row group by row
    /// group in their order; its batches are the pages' rows.
    pub fn of_pages(
        path: &Path,
        data: bytes::Bytes,
        meta: Arc<ParquetMetaData>,
        names: &[&str],
        picks: Vec<PagePick>,
    ) -> Result<TableScan, FileError> {
        let groups: Vec<usize> = picks.iter().map(|p| p.group).collect();
        if picks.iter().any(|p| p.ranges.len() != names.len())
            || groups.iter().any(|&g| g >= meta.num_row_groups())
        {
            return Err(FileError::Invalid {
                path: path.into(),
                message: "pages chosen for other columns or row groups".into(),
            });
        }
        let mut scan = TableScan::of_parsed(path, data, meta, names, |_, _| false)?;
        scan.groups = groups;
        scan.picks = Some(picks);
        Ok(scan)
    }

    fn corrupt(&self, message: impl std::fmt::Display) -> FileError {
        FileError::Invalid {
            path: self.path.clone(),
            message: message.to_string(),
        }
    }

    /// Moves to the next batch; its row count, or None at the end.
    pub fn advance(&mut self) -> Result<Option<usize>, FileError> {
        self.advance_inner().map_err(|e| self.corrupt(e))
    }

    fn advance_inner(&mut self) -> Result<Option<usize>, DecodeError> {
        if self.cols.is_empty() {
            // No column to say how many rows there are.
            return Ok(None);
        }
        let step = std::mem::take(&mut self.batch);
        // A decoded page stays decoded while the window moves through it.
        for c in &mut self.cols {
            c.at += step;
        }
        loop {
            let mut ended = 0;
            for k in 0..self.cols.len() {
                if self.cols[k].at >= self.cols[k].page_rows && !self.next_page(k)? {
                    ended += 1;
                }
            }
            if ended == 0 {
                break;
            }
            if ended < self.cols.len() {
                return Err(DecodeError::corrupt(
                    "the columns of a row group hold different numbers of rows",
                ));
            }
            if self.group_rows.0 != self.group_rows.1 {
                return Err(DecodeError::corrupt(format!(
                    "a row group of {} rows whose pages hold {}",
                    self.group_rows.1, self.group_rows.0
                )));
            }
            let Some(&g) = self.groups.get(self.next_group) else {
                return Ok(None);
            };
            let pick = self.picks.as_ref().map(|p| &p[self.next_group]);
            self.next_group += 1;
            let rg = self.meta.row_group(g);
            self.group_rows = (0, usize::try_from(rg.num_rows()).unwrap_or(usize::MAX));
            if let Some(pick) = pick {
                self.group_rows.1 = pick.rows;
                for (c, (ranges, &leaf)) in self
                    .cols
                    .iter_mut()
                    .zip(pick.ranges.iter().zip(&self.leaves))
                {
                    if ranges.iter().any(|&(a, b)| a > b || b > self.data.len()) {
                        return Err(DecodeError::corrupt("a page past the file's end"));
                    }
                    c.ranges = ranges.iter().copied().collect();
                    (c.next, c.end) = (0, 0);
                    c.codec = rg.column(leaf).compression();
                    (c.page, c.page_rows, c.at, c.decoded) = (None, 0, 0, false);
                    (c.dict.generation, c.dict.len) = (0, 0);
                }
                continue;
            }
            for (c, &leaf) in self.cols.iter_mut().zip(&self.leaves) {
                let m = rg.column(leaf);
                let start = m.dictionary_page_offset().unwrap_or(m.data_page_offset());
                let start = usize::try_from(start)
                    .map_err(|_| DecodeError::corrupt("a negative page offset"))?;
                let len = usize::try_from(m.compressed_size())
                    .map_err(|_| DecodeError::corrupt("a negative chunk size"))?;
                let end = start
                    .checked_add(len)
                    .filter(|&e| e <= self.data.len())
                    .ok_or_else(|| DecodeError::corrupt("a column chunk past the file's end"))?;
                (c.next, c.end, c.codec) = (start, end, m.compression());
                (c.page, c.page_rows, c.at, c.decoded) = (None, 0, 0, false);
                // A chunk's pages refer to its own dictionary only.
                (c.dict.generation, c.dict.len) = (0, 0);
            }
        }
        self.batch = (self.cols.iter())
            .map(|c| c.page_rows - c.at)
            .min()
            .unwrap_or(0);
        self.group_rows.0 += self.batch;
        Ok(Some(self.batch))
    }

    /// Reads column `k`'s next data page header (decoding a dictionary
    /// page on the way); false at the end of its chunk.
    fn next_page(&mut self, k: usize) -> Result<bool, DecodeError> {
        loop {
            let c = &mut self.cols[k];
            if c.next >= c.end {
                if let Some((a, b)) = c.ranges.pop_front() {
                    (c.next, c.end) = (a, b);
                    continue;
                }
                c.page = None;
                return Ok(false);
            }
            let chunk = (self.data.get(c.next..c.end))
                .ok_or_else(|| DecodeError::corrupt("a column chunk that was not read"))?;
            let mut src = Bytes::new(chunk);
            let h = thrift::page_header(&mut src)?;
            let body_start = c.end - src.rest().len();
            let body_end = body_start
                .checked_add(h.compressed_size as usize)
                .filter(|&e| e <= c.end)
                .ok_or_else(|| DecodeError::corrupt("a page past its column chunk"))?;
            c.next = body_end;
            if h.uncompressed_size as usize > MAX_PAGE_BYTES {
                return Err(DecodeError::corrupt("a page of more than 256 MiB"));
            }
            match h.kind {
                DICTIONARY_PAGE => self.dictionary(k, &h, body_start, body_end)?,
                DATA_PAGE | DATA_PAGE_V2 => {
                    let rows = match h.v2 {
                        Some(v2) => v2.num_rows,
                        None => h.num_values,
                    };
                    let rows = usize::try_from(rows)
                        .ok()
                        .filter(|&r| r <= MAX_PAGE_ROWS)
                        .ok_or_else(|| DecodeError::corrupt("a page of impossibly many rows"))?;
                    if rows == 0 {
                        continue;
                    }
                    let c = &mut self.cols[k];
                    (c.page, c.page_rows, c.at, c.decoded) =
                        (Some((h, body_start, body_end)), rows, 0, false);
                    return Ok(true);
                }
                // Index pages and any future kind: not needed to decode.
                _ => {}
            }
        }
    }

    /// The page's bytes, decompressed if they are compressed (`skip`
    /// leading bytes are stored raw, as a v2 page's levels are).
    fn page_bytes<'a>(
        data: &'a [u8],
        codec: Compression,
        compressed: bool,
        uncompressed: usize,
        skip: usize,
        zstd: &mut Option<zstd::bulk::Decompressor<'static>>,
        buf: &'a mut Vec<u8>,
    ) -> Result<&'a [u8], DecodeError> {
        if codec == Compression::UNCOMPRESSED || !compressed {
            return Ok(data);
        }
        if skip > data.len() || skip > uncompressed {
            return Err(DecodeError::corrupt("page levels longer than the page"));
        }
        buf.clear();
        buf.reserve(uncompressed);
        buf.extend_from_slice(&data[..skip]);
        let want = uncompressed - skip;
        if want > 0 {
            let z = match zstd {
                Some(z) => z,
                None => zstd.insert(
                    zstd::bulk::Decompressor::new()
                        .map_err(|e| DecodeError::corrupt(format!("zstd: {e}")))?,
                ),
            };
            // Decompresses after the raw prefix, into the reserved room
            // (no more: a frame that would grow past it is an error).
            let mut cursor = std::io::Cursor::new(&mut *buf);
            cursor.set_position(skip as u64);
            let n = z
                .decompress_to_buffer(&data[skip..], &mut cursor)
                .map_err(|e| DecodeError::corrupt(format!("zstd: {e}")))?;
            if n != want {
                return Err(DecodeError::corrupt(
                    "a page that decompresses to another size than its header says",
                ));
            }
        }
        if buf.len() != uncompressed {
            return Err(DecodeError::corrupt(
                "a page that decompresses to another size than its header says",
            ));
        }
        Ok(buf)
    }

    fn dictionary(
        &mut self,
        k: usize,
        h: &PageHeader,
        start: usize,
        end: usize,
    ) -> Result<(), DecodeError> {
        // Unique in the process, so a caller that keeps maps across files
        // never mistakes one file's dictionary for another's.
        static GENERATIONS: AtomicU64 = AtomicU64::new(0);
        let generation = GENERATIONS.fetch_add(1, Ordering::Relaxed) + 1;
        let c = &mut self.cols[k];
        if h.encoding != PLAIN && h.encoding != PLAIN_DICTIONARY {
            return Err(DecodeError::unsupported("a dictionary not stored PLAIN"));
        }
        let n = usize::try_from(h.num_values)
            .ok()
            .filter(|&n| n <= MAX_PAGE_ROWS)
            .ok_or_else(|| DecodeError::corrupt("a dictionary of impossibly many values"))?;
        let page = (self.data.get(start..end))
            .ok_or_else(|| DecodeError::corrupt("a page that was not read"))?;
        let bytes = Self::page_bytes(
            page,
            c.codec,
            true,
            h.uncompressed_size as usize,
            0,
            &mut self.zstd,
            &mut c.buf,
        )?;
        let mut src = Bytes::new(bytes);
        let d = &mut c.dict;
        // Until it is whole, no page may refer to it.
        (d.generation, d.len) = (0, 0);
        match c.kind {
            Kind::Int { narrow } => values::plain_ints(&mut src, narrow, n, &mut d.ints)?,
            Kind::Fixed(w) => values::plain_fixed(&mut src, w, n, &mut d.fixed)?,
            Kind::Text => {
                d.text.clear();
                d.text.extend_from_slice(src.rest());
                values::plain_spans(&d.text, n, &[], &mut d.spans)?;
            }
        }
        (d.generation, d.len) = (generation, n);
        Ok(())
    }

    /// Makes integer column `k`'s dictionary-coded pages give their codes
    /// ([`Col::codes`], values through [`Dictionary::int`]) instead of
    /// values: a caller that derives something from each dictionary entry
    /// once then skips both the lookup per row and its own work per row.
    /// Pages stored PLAIN or delta-coded still give values.
    pub fn keep_codes(&mut self, k: usize) {
        if let Some(c) = self.cols.get_mut(k)
            && matches!(c.kind, Kind::Int { .. })
        {
            c.keep_codes = true;
        }
    }

    /// Decodes the current batch's pages of every column not yet decoded.
    pub fn load(&mut self) -> Result<(), FileError> {
        for k in 0..self.cols.len() {
            if !self.cols[k].decoded {
                self.decode(k).map_err(|e| {
                    let name = &self.cols[k].name;
                    self.corrupt(format!("column {name}: {e}"))
                })?;
                self.cols[k].decoded = true;
            }
        }
        Ok(())
    }

    fn decode(&mut self, k: usize) -> Result<(), DecodeError> {
        let c = &mut self.cols[k];
        let Some((h, start, end)) = c.page.clone() else {
            return Err(DecodeError::corrupt("no page to decode"));
        };
        let rows = c.page_rows;
        let (skip, compressed) = match h.v2 {
            Some(v2) => {
                if v2.rep_bytes != 0 {
                    return Err(DecodeError::unsupported("repetition levels"));
                }
                let skip = usize::try_from(v2.def_bytes)
                    .map_err(|_| DecodeError::corrupt("negative level bytes"))?;
                (skip, v2.compressed)
            }
            None => (0, true),
        };
        let page = (self.data.get(start..end))
            .ok_or_else(|| DecodeError::corrupt("a page that was not read"))?;
        let bytes = Self::page_bytes(
            page,
            c.codec,
            compressed,
            h.uncompressed_size as usize,
            skip,
            &mut self.zstd,
            &mut c.buf,
        )?;
        let out = &mut c.out;
        let mut src = Bytes::new(bytes);
        // Definition levels: which rows have values.
        out.valid.clear();
        let mut present = rows;
        if c.optional {
            let levels = match h.v2 {
                Some(_) => src.take(skip)?,
                None => {
                    if h.def_encoding != RLE {
                        return Err(DecodeError::unsupported("levels not RLE-encoded"));
                    }
                    let len = u32::from_le_bytes(src.take(4)?.try_into().expect("4 bytes"));
                    src.take(len as usize)?
                }
            };
            values::hybrid_map(&mut Bytes::new(levels), 1, rows, 2, &mut out.valid, |l| {
                l == 1
            })?;
            present = out.valid.iter().filter(|&&v| v).count();
            if present == rows {
                out.valid.clear();
            }
        } else if skip > 0 {
            return Err(DecodeError::corrupt("levels in a required column"));
        }
        out.coded = false;
        match (h.encoding, c.kind) {
            (RLE_DICTIONARY | PLAIN_DICTIONARY, kind) => {
                if c.dict.generation == 0 {
                    return Err(DecodeError::corrupt(
                        "a dictionary-coded page without a dictionary",
                    ));
                }
                let width = u32::from(src.byte()?);
                let (d, bound) = (&c.dict, c.dict.len as u64);
                // Numbers and addresses are looked up as they are decoded;
                // text keeps its codes (callers map a dictionary once).
                match kind {
                    Kind::Int { .. } if c.keep_codes => {
                        values::hybrid_map(&mut src, width, present, bound, &mut out.codes, |x| x)?;
                        spread(&mut out.codes, &out.valid);
                        out.coded = true;
                    }
                    Kind::Int { .. } => {
                        let map = |x: u32| d.ints[x as usize];
                        values::hybrid_map(&mut src, width, present, bound, &mut out.ints, map)?;
                        spread(&mut out.ints, &out.valid);
                    }
                    Kind::Fixed(_) => {
                        let map = |x: u32| d.fixed[x as usize];
                        values::hybrid_map(&mut src, width, present, bound, &mut out.fixed, map)?;
                        spread(&mut out.fixed, &out.valid);
                    }
                    Kind::Text => {
                        values::hybrid_map(&mut src, width, present, bound, &mut out.codes, |x| x)?;
                        spread(&mut out.codes, &out.valid);
                        out.coded = true;
                    }
                }
            }
            (PLAIN, Kind::Int { narrow }) => {
                values::plain_ints(&mut src, narrow, present, &mut out.ints)?;
                spread(&mut out.ints, &out.valid);
            }
            (DELTA_BINARY_PACKED, Kind::Int { narrow }) => {
                values::delta(&mut src, narrow, present, &mut out.ints)?;
                if out.ints.len() != present {
                    return Err(DecodeError::corrupt(
                        "fewer delta values than the page's rows",
                    ));
                }
                spread(&mut out.ints, &out.valid);
            }
            (PLAIN, Kind::Fixed(w)) => {
                values::plain_fixed(&mut src, w, present, &mut out.fixed)?;
                spread(&mut out.fixed, &out.valid);
            }
            (PLAIN, Kind::Text) => {
                // The values' bytes in one copy, the rows pointing into it
                // (not a copy per value).
                out.text.clear();
                out.text.extend_from_slice(src.rest());
                values::plain_spans(&out.text, rows, &out.valid, &mut out.spans)?;
            }
            (e, kind) => {
                return Err(DecodeError::unsupported(format!(
                    "encoding {e} for {kind:?} values"
                )));
            }
        }
        Ok(())
    }

    /// Column `k` (in the order they were named) of the current batch;
    /// [`TableScan::load`] must have decoded it.
    pub fn column(&self, k: usize) -> Col<'_> {
        let c = &self.cols[k];
        debug_assert!(c.decoded, "column {} read before load", c.name);
        let (at, n) = (c.at, self.batch);
        let o = &c.out;
        Col {
            rows: n,
            int: matches!(c.kind, Kind::Int { .. }),
            valid: o.valid.get(at..at + n).unwrap_or(&[]),
            ints: if matches!(c.kind, Kind::Int { .. }) && !o.coded {
                o.ints.get(at..at + n).unwrap_or(&[])
            } else {
                &[]
            },
            fixed: if matches!(c.kind, Kind::Fixed(_)) {
                o.fixed.get(at..at + n).unwrap_or(&[])
            } else {
                &[]
            },
            codes: o.coded.then(|| o.codes.get(at..at + n).unwrap_or(&[])),
            spans: if c.kind == Kind::Text && !o.coded {
                o.spans.get(at..at + n).unwrap_or(&[])
            } else {
                &[]
            },
            text: &o.text,
            dict: &c.dict,
        }
    }
}

/// Moves `v`'s values (one per present row: every decoder gives exactly
/// that many or an error) to their rows; rows without a value get the
/// default. `valid` empty means every row is present.
fn spread<T: Copy + Default>(v: &mut Vec<T>, valid: &[bool]) {
    if valid.is_empty() {
        return;
    }
    let mut k = v.len();
    debug_assert_eq!(k, valid.iter().filter(|&&b| b).count());
    v.resize(valid.len(), T::default());
    // Backwards, 64 rows at a time (row r's value sits at or before r, so
    // a stretch's values are read before anything is written over them): a
    // stretch with every value present (most, where nulls are rare) moves
    // as one copy; in any other the stretch's values (none, most often,
    // where values are rare) are set aside, the stretch cleared, and each
    // value put back on its row by the bits of a validity mask.
    let mut held = [T::default(); 64];
    let mut end = valid.len();
    while end > 0 {
        let start = end.saturating_sub(64);
        let mut mask = 0u64;
        for (b, &x) in valid[start..end].iter().enumerate() {
            mask |= u64::from(x) << b;
        }
        let present = mask.count_ones() as usize;
        let from = k - present;
        if present == end - start {
            v.copy_within(from..k, start);
        } else {
            held[..present].copy_from_slice(&v[from..k]);
            let stretch = &mut v[start..end];
            stretch.fill(T::default());
            for &x in &held[..present] {
                stretch[mask.trailing_zeros() as usize] = x;
                mask &= mask - 1;
            }
        }
        k = from;
        end = start;
    }
}

/// One column of a batch.
pub struct Col<'a> {
    rows: usize,
    int: bool,
    valid: &'a [bool],
    ints: &'a [u64],
    fixed: &'a [u128],
    codes: Option<&'a [u32]>,
    spans: &'a [(u32, u32)],
    text: &'a [u8],
    dict: &'a Dictionary,
}

impl<'a> Col<'a> {
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Whether row `i` has a value.
    #[inline(always)]
    pub fn is_valid(&self, i: usize) -> bool {
        self.valid.is_empty() || self.valid[i]
    }

    /// Whether the column holds integers (given as values, or as codes
    /// where it keeps them).
    pub fn is_int(&self) -> bool {
        self.int
    }

    /// Per row whether it has a value; empty when every row does.
    pub fn validity(&self) -> &'a [bool] {
        self.valid
    }

    /// Integer values per row (0 where a row has none); empty for other
    /// columns, and for pages that give codes instead.
    pub fn ints(&self) -> &'a [u64] {
        self.ints
    }

    /// Integer value of row `i` (None where it has none), whether the
    /// page gives values or codes.
    #[inline]
    pub fn int(&self, i: usize) -> Option<u64> {
        if !self.is_valid(i) {
            return None;
        }
        match self.codes {
            Some(codes) if self.int => self.dict.int(*codes.get(i)? as usize),
            _ => self.ints.get(i).copied(),
        }
    }

    /// Fixed-size values per row, read big-endian.
    pub fn fixed(&self) -> &'a [u128] {
        self.fixed
    }

    /// Dictionary codes per row, when a text page is dictionary-coded, or
    /// an integer page of a column that keeps codes
    /// ([`TableScan::keep_codes`]; other numbers and addresses come looked
    /// up, in [`Col::ints`] and [`Col::fixed`]).
    pub fn codes(&self) -> Option<&'a [u32]> {
        self.codes
    }

    pub fn dictionary(&self) -> &'a Dictionary {
        self.dict
    }

    /// Text of row `i` (None where it has no value).
    pub fn text(&self, i: usize) -> Option<&'a [u8]> {
        if !self.is_valid(i) {
            return None;
        }
        match self.codes {
            Some(codes) => self.dict.text(codes[i] as usize),
            None => {
                let &(a, b) = self.spans.get(i)?;
                self.text.get(a as usize..b as usize)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::spread;

    /// Stretches of 64 rows all present, none present, and mixed, at
    /// every alignment, against the plain definition.
    #[test]
    fn spread_puts_each_value_on_its_row() {
        let mut s = 5u64;
        for case in 0..200 {
            let rows = case * 7 % 700 + 1;
            let valid: Vec<bool> = (0..rows)
                .map(|r| {
                    s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                    match (r / 64 + case) % 3 {
                        0 => true,
                        1 => false,
                        _ => (s >> 40) % 3 != 0,
                    }
                })
                .collect();
            let dense: Vec<u64> = (1..=valid.iter().filter(|&&b| b).count() as u64).collect();
            let mut want = Vec::new();
            let mut k = 0;
            for &b in &valid {
                want.push(if b { dense[k] } else { 0 });
                k += b as usize;
            }
            let mut got = dense.clone();
            spread(&mut got, &valid);
            assert_eq!(got, want, "case {case}");
        }
    }
}
