//! Parquet page headers, read from Thrift's compact protocol: the fields a
//! reader of flat columns needs, every other field skipped (nesting is
//! bounded, so a hostile header cannot recurse without end).

use super::DecodeError;
use super::values::Bytes;

/// A page's kind and the fields of its header that decoding needs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct PageHeader {
    pub kind: i32,
    pub uncompressed_size: i32,
    pub compressed_size: i32,
    pub num_values: i32,
    pub encoding: i32,
    pub def_encoding: i32,
    /// Data page v2: bytes of repetition and definition levels (stored
    /// uncompressed, before the values), nulls, and whether the values
    /// are compressed.
    pub v2: Option<V2>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct V2 {
    pub num_nulls: i32,
    pub num_rows: i32,
    pub def_bytes: i32,
    pub rep_bytes: i32,
    pub compressed: bool,
}

pub const DATA_PAGE: i32 = 0;
pub const DICTIONARY_PAGE: i32 = 2;
pub const DATA_PAGE_V2: i32 = 3;

// Compact protocol field types.
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;

const MAX_DEPTH: u32 = 16;

/// The fields of one struct: (field id, type) pairs, read one at a time.
struct Fields {
    last: i16,
}

impl Fields {
    fn new() -> Self {
        Fields { last: 0 }
    }

    /// The next field's id and type, or None at the struct's end.
    fn next(&mut self, src: &mut Bytes) -> Result<Option<(i16, u8)>, DecodeError> {
        let b = src.byte()?;
        if b == 0 {
            return Ok(None);
        }
        let kind = b & 0x0f;
        let delta = (b >> 4) as i16;
        let id = if delta == 0 {
            i16::try_from(src.zigzag()?).map_err(|_| corrupt())?
        } else {
            self.last.checked_add(delta).ok_or_else(corrupt)?
        };
        self.last = id;
        Ok(Some((id, kind)))
    }
}

fn corrupt() -> DecodeError {
    DecodeError::corrupt("a page header that is not valid Thrift")
}

fn i32_of(src: &mut Bytes, kind: u8) -> Result<i32, DecodeError> {
    if kind != I32 {
        return Err(corrupt());
    }
    i32::try_from(src.zigzag()?).map_err(|_| corrupt())
}

fn bool_of(kind: u8) -> Result<bool, DecodeError> {
    match kind {
        BOOL_TRUE => Ok(true),
        BOOL_FALSE => Ok(false),
        _ => Err(corrupt()),
    }
}

/// Skips a value of type `kind`.
fn skip(src: &mut Bytes, kind: u8, depth: u32) -> Result<(), DecodeError> {
    if depth > MAX_DEPTH {
        return Err(DecodeError::corrupt("a page header nested too deeply"));
    }
    match kind {
        BOOL_TRUE | BOOL_FALSE => {}
        BYTE => {
            src.byte()?;
        }
        I16 | I32 | I64 => {
            src.uleb()?;
        }
        DOUBLE => {
            src.take(8)?;
        }
        BINARY => {
            let n = usize::try_from(src.uleb()?).map_err(|_| corrupt())?;
            src.take(n)?;
        }
        LIST | SET => {
            let h = src.byte()?;
            let n = match h >> 4 {
                15 => src.uleb()?,
                n => u64::from(n),
            };
            elements(src, n, &[h & 0x0f], depth)?;
        }
        MAP => {
            let n = src.uleb()?;
            if n > 0 {
                let kv = src.byte()?;
                elements(src, n, &[kv >> 4, kv & 0x0f], depth)?;
            }
        }
        STRUCT => {
            let mut f = Fields::new();
            while let Some((_, k)) = f.next(src)? {
                skip(src, k, depth + 1)?;
            }
        }
        _ => return Err(corrupt()),
    }
    Ok(())
}

/// Skips `n` elements of a list, set or map, each of the `kinds` in turn.
/// Each takes at least a byte (a bool is a byte of its own here), so a
/// count beyond the bytes left is refused before any is read.
fn elements(src: &mut Bytes, n: u64, kinds: &[u8], depth: u32) -> Result<(), DecodeError> {
    if n > src.rest().len() as u64 {
        return Err(DecodeError::corrupt(
            "a page header list longer than the page",
        ));
    }
    for _ in 0..n {
        for &k in kinds {
            if k == BOOL_TRUE || k == BOOL_FALSE {
                src.byte()?;
            } else {
                skip(src, k, depth + 1)?;
            }
        }
    }
    Ok(())
}

/// Reads a page header from the front of `src`.
pub fn page_header(src: &mut Bytes) -> Result<PageHeader, DecodeError> {
    let mut h = PageHeader::default();
    let (mut kind, mut sizes, mut detail) = (false, 0, false);
    let mut f = Fields::new();
    while let Some((id, k)) = f.next(src)? {
        match id {
            1 => (h.kind, kind) = (i32_of(src, k)?, true),
            2 => (h.uncompressed_size, sizes) = (i32_of(src, k)?, sizes | 1),
            3 => (h.compressed_size, sizes) = (i32_of(src, k)?, sizes | 2),
            5 | 7 | 8 if k == STRUCT => {
                detail = true;
                data_header(src, id, &mut h)?;
            }
            _ => skip(src, k, 0)?,
        }
    }
    if !kind || sizes != 3 || h.compressed_size < 0 || h.uncompressed_size < 0 {
        return Err(DecodeError::corrupt("a page header without its sizes"));
    }
    if !detail && matches!(h.kind, DATA_PAGE | DICTIONARY_PAGE | DATA_PAGE_V2) {
        return Err(DecodeError::corrupt("a page header without its details"));
    }
    Ok(h)
}

/// A DataPageHeader (5), DictionaryPageHeader (7) or DataPageHeaderV2 (8).
fn data_header(src: &mut Bytes, which: i16, h: &mut PageHeader) -> Result<(), DecodeError> {
    let mut v2 = V2 {
        compressed: true,
        ..V2::default()
    };
    let mut f = Fields::new();
    while let Some((id, k)) = f.next(src)? {
        match (which, id) {
            (_, 1) => h.num_values = i32_of(src, k)?,
            (5 | 7, 2) | (8, 4) => h.encoding = i32_of(src, k)?,
            (5, 3) => h.def_encoding = i32_of(src, k)?,
            (8, 2) => v2.num_nulls = i32_of(src, k)?,
            (8, 3) => v2.num_rows = i32_of(src, k)?,
            (8, 5) => v2.def_bytes = i32_of(src, k)?,
            (8, 6) => v2.rep_bytes = i32_of(src, k)?,
            (8, 7) => v2.compressed = bool_of(k)?,
            _ => skip(src, k, 1)?,
        }
    }
    if which == 8 {
        h.v2 = Some(v2);
    }
    Ok(())
}

/// A list's element type and length.
fn list_header(src: &mut Bytes, kind: u8) -> Result<(u8, usize), DecodeError> {
    if kind != LIST {
        return Err(corrupt());
    }
    let h = src.byte()?;
    let n = match h >> 4 {
        15 => src.uleb()?,
        n => u64::from(n),
    };
    // Every element takes a byte at least: a count past the bytes left is
    // refused before anything is sized by it.
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n <= src.rest().len())
        .ok_or_else(corrupt)?;
    Ok((h & 0x0f, n))
}

fn i64_of(src: &mut Bytes, kind: u8) -> Result<i64, DecodeError> {
    if kind != I64 && kind != I32 {
        return Err(corrupt());
    }
    src.zigzag()
}

/// Where a data page of a column chunk lies: an OffsetIndex entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageLocation {
    pub offset: i64,
    pub compressed_size: i32,
    pub first_row: i64,
}

/// An OffsetIndex (the page index's page locations of one column chunk).
pub fn offset_index(src: &mut Bytes) -> Result<Vec<PageLocation>, DecodeError> {
    let mut pages = None;
    let mut f = Fields::new();
    while let Some((id, k)) = f.next(src)? {
        match id {
            1 => {
                let (t, n) = list_header(src, k)?;
                if t != STRUCT {
                    return Err(corrupt());
                }
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    let mut loc = PageLocation::default();
                    let mut g = Fields::new();
                    while let Some((id, k)) = g.next(src)? {
                        match id {
                            1 => loc.offset = i64_of(src, k)?,
                            2 => loc.compressed_size = i32_of(src, k)?,
                            3 => loc.first_row = i64_of(src, k)?,
                            _ => skip(src, k, 1)?,
                        }
                    }
                    v.push(loc);
                }
                pages = Some(v);
            }
            _ => skip(src, k, 0)?,
        }
    }
    pages.ok_or_else(|| DecodeError::corrupt("an offset index without page locations"))
}

/// A ColumnIndex (the page index's statistics of one column chunk): per
/// page whether it holds only nulls, its minimum and maximum (PLAIN
/// bytes), and its nulls when written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ColumnIndex {
    pub null_pages: Vec<bool>,
    pub min: Vec<Vec<u8>>,
    pub max: Vec<Vec<u8>>,
    pub null_counts: Option<Vec<i64>>,
}

pub fn column_index(src: &mut Bytes) -> Result<ColumnIndex, DecodeError> {
    let mut c = ColumnIndex::default();
    let mut f = Fields::new();
    let binaries = |src: &mut Bytes, k: u8| -> Result<Vec<Vec<u8>>, DecodeError> {
        let (t, n) = list_header(src, k)?;
        if t != BINARY {
            return Err(corrupt());
        }
        (0..n)
            .map(|_| {
                let len = usize::try_from(src.uleb()?).map_err(|_| corrupt())?;
                Ok(src.take(len)?.to_vec())
            })
            .collect()
    };
    while let Some((id, k)) = f.next(src)? {
        match id {
            1 => {
                let (t, n) = list_header(src, k)?;
                if t != BOOL_TRUE && t != BOOL_FALSE {
                    return Err(corrupt());
                }
                c.null_pages = (0..n)
                    .map(|_| src.byte().map(|b| b == BOOL_TRUE))
                    .collect::<Result<_, _>>()?;
            }
            2 => c.min = binaries(src, k)?,
            3 => c.max = binaries(src, k)?,
            5 => {
                let (t, n) = list_header(src, k)?;
                if t != I64 {
                    return Err(corrupt());
                }
                c.null_counts = Some((0..n).map(|_| src.zigzag()).collect::<Result<_, _>>()?);
            }
            _ => skip(src, k, 0)?,
        }
    }
    let n = c.null_pages.len();
    if c.min.len() != n || c.max.len() != n || c.null_counts.as_ref().is_some_and(|v| v.len() != n)
    {
        return Err(DecodeError::corrupt(
            "a column index whose lists differ in length",
        ));
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DataPageHeader as the parquet crate writes it, statistics and all.
    #[test]
    fn reads_what_the_parquet_crate_writes() {
        use parquet::basic::{Compression, Encoding};
        use parquet::file::properties::WriterProperties;
        use parquet::file::reader::{FileReader, SerializedFileReader};
        use std::sync::Arc;
        let schema = Arc::new(
            parquet::schema::parser::parse_message_type(
                "message m { optional int64 a; required binary b (UTF8); }",
            )
            .unwrap(),
        );
        for v2 in [false, true] {
            let props = WriterProperties::builder()
                .set_compression(Compression::UNCOMPRESSED)
                .set_writer_version(if v2 {
                    parquet::file::properties::WriterVersion::PARQUET_2_0
                } else {
                    parquet::file::properties::WriterVersion::PARQUET_1_0
                })
                .build();
            let mut buf = Vec::new();
            let mut w = parquet::file::writer::SerializedFileWriter::new(
                &mut buf,
                schema.clone(),
                props.into(),
            )
            .unwrap();
            let mut rg = w.next_row_group().unwrap();
            let mut c = rg.next_column().unwrap().unwrap();
            c.typed::<parquet::data_type::Int64Type>()
                .write_batch(&[5, 6], Some(&[1, 0, 1]), None)
                .unwrap();
            c.close().unwrap();
            let mut c = rg.next_column().unwrap().unwrap();
            c.typed::<parquet::data_type::ByteArrayType>()
                .write_batch(&["x".into(), "y".into(), "x".into()], None, None)
                .unwrap();
            c.close().unwrap();
            rg.close().unwrap();
            w.close().unwrap();
            let bytes = bytes::Bytes::from(buf);
            let r = SerializedFileReader::new(bytes.clone()).unwrap();
            let col = r.metadata().row_group(0).column(0);
            let start = col
                .dictionary_page_offset()
                .unwrap_or(col.data_page_offset()) as usize;
            let mut src = Bytes::new(&bytes[start..]);
            let mut h = page_header(&mut src).unwrap();
            if h.kind == DICTIONARY_PAGE {
                assert_eq!(h.num_values, 2);
                src.take(h.compressed_size as usize).unwrap();
                h = page_header(&mut src).unwrap();
            }
            assert_eq!(h.kind, if v2 { DATA_PAGE_V2 } else { DATA_PAGE });
            assert_eq!(h.num_values, 3);
            assert!(h.compressed_size > 0);
            assert!(
                h.encoding == Encoding::RLE_DICTIONARY as i32
                    || h.encoding == Encoding::PLAIN_DICTIONARY as i32,
                "{}",
                h.encoding
            );
            if v2 {
                let v = h.v2.unwrap();
                assert_eq!((v.num_nulls, v.num_rows), (1, 3));
                assert!(v.def_bytes > 0);
            }
        }
    }

    #[test]
    fn refuses_headers_that_are_cut_or_nested_without_end() {
        // type 0, sizes 10 and 10, a DataPageHeader of 1 value: then cut.
        let whole = [
            0x15, 0x00, 0x15, 0x14, 0x15, 0x14, 0x2c, 0x15, 0x02, 0x00, 0x00,
        ];
        let h = page_header(&mut Bytes::new(&whole)).unwrap();
        assert_eq!((h.kind, h.num_values, h.compressed_size), (0, 1, 10));
        for n in 0..whole.len() {
            assert!(page_header(&mut Bytes::new(&whole[..n])).is_err(), "{n}");
        }
        // Field 9 as a struct holding a struct holding a struct ...
        let mut deep = vec![0x15, 0x00, 0x15, 0x14, 0x15, 0x14];
        deep.extend(std::iter::repeat_n(0x1c, 64));
        assert!(page_header(&mut Bytes::new(&deep)).is_err());
    }
}
