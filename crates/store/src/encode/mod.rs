//! A Parquet column-chunk encoder specialised for weir's packet table.
//!
//! arrow-rs's generic column writers cost 200–550 ns per packet row for
//! this schema (measured by `bench/encode`), several times the budget of a
//! 10 M packets/s worker. This module encodes whole column chunks from
//! plain vectors: dictionary + RLE/bit-packing where values repeat,
//! DELTA_BINARY_PACKED where they climb (time, sequence numbers), zstd on
//! top. The parquet crate still writes the pages' headers, the column
//! metadata, the footer and the bloom filters, so the container is the
//! standard one.

pub mod bits;
pub mod delta;
pub mod dict;

use bytes::Bytes;
use parquet::basic::Encoding;
use parquet::bloom_filter::Sbbf;
use parquet::column::page::{CompressedPage, Page};
use parquet::data_type::{ByteArray, FixedLenByteArray};
use parquet::errors::{ParquetError, Result};
use parquet::file::statistics::Statistics;

use bits::{bit_width, rle_hybrid, rle_levels};

/// The values of one column chunk: only the rows where the column is not
/// null, in row order.
pub enum Values<'a> {
    /// INT32 column; `signed` says how min/max compare.
    Int32 { vals: &'a [u32], signed: bool },
    /// INT64 column.
    Int64 { vals: &'a [u64], signed: bool },
    /// FIXED_LEN_BYTE_ARRAY of `width` ≤ 16 bytes, held as the big-endian
    /// number the bytes spell (so numeric order is byte order).
    Fixed { vals: &'a [u128], width: usize },
    /// Strings from a small table, given by their codes.
    Names {
        codes: &'a [u8],
        name: fn(u8) -> &'static str,
    },
}

/// Which encoding to try first for integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefer {
    /// Dictionary + RLE; falls back to delta when there are too many
    /// distinct values.
    Dictionary,
    /// DELTA_BINARY_PACKED.
    Delta,
}

/// Definition levels: row `i` is present when `has[i] & bit != 0`.
#[derive(Clone, Copy)]
pub struct Levels<'a> {
    pub has: &'a [u32],
    pub bit: u32,
}

/// Knobs of the encoder.
#[derive(Clone, Copy, Debug)]
pub struct EncodeOptions {
    /// Rows per data page.
    pub page_rows: usize,
    pub zstd_level: i32,
    /// Most distinct values a dictionary may hold, as a fraction of the
    /// chunk's rows (1/N) and never below 256.
    pub dict_fraction: usize,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            page_rows: 128 * 1024,
            zstd_level: 1,
            dict_fraction: 8,
        }
    }
}

/// An encoded column chunk, ready for a page writer.
pub struct EncodedChunk {
    pub dict_page: Option<CompressedPage>,
    pub data_pages: Vec<CompressedPage>,
    pub encodings: Vec<Encoding>,
    pub statistics: Statistics,
    pub bloom: Option<Sbbf>,
}

/// Encodes one column chunk of `rows` rows.
pub fn encode_chunk(
    rows: usize,
    levels: Option<Levels<'_>>,
    values: Values<'_>,
    prefer: Prefer,
    bloom: bool,
    opts: &EncodeOptions,
    zstd: &mut zstd::bulk::Compressor<'static>,
) -> Result<EncodedChunk> {
    let n_values = match &values {
        Values::Int32 { vals, .. } => vals.len(),
        Values::Int64 { vals, .. } => vals.len(),
        Values::Fixed { vals, .. } => vals.len(),
        Values::Names { codes, .. } => codes.len(),
    };
    let nulls = (rows - n_values) as u64;
    let limit = (rows / opts.dict_fraction.max(1)).max(256);
    let mut pages = Pager {
        rows,
        levels,
        opts,
        zstd,
        pages: Vec::new(),
    };
    match values {
        Values::Int32 { vals, signed } => {
            let (min, max) = min_max(
                vals.iter()
                    .map(|&v| if signed { (v as i32) as i64 } else { v as i64 }),
            );
            let statistics = Statistics::int32(
                min.map(|v| v as i32),
                max.map(|v| v as i32),
                None,
                Some(nulls),
                false,
            );
            let dict = if prefer == Prefer::Dictionary {
                let wide: Vec<u64> = vals.iter().map(|&v| v as u64).collect();
                dict::build(&wide, limit)
            } else {
                None
            };
            match dict {
                Some(d) => {
                    let mut plain = Vec::with_capacity(d.values.len() * 4);
                    for &v in &d.values {
                        plain.extend_from_slice(&(v as u32).to_le_bytes());
                    }
                    let dict_page = pages.dict_page(plain, d.values.len())?;
                    pages.dict_data_pages(&d.indices, d.values.len())?;
                    Ok(pages.finish(Some(dict_page), Encoding::RLE_DICTIONARY, statistics, None))
                }
                None => {
                    pages.data_pages(Encoding::DELTA_BINARY_PACKED, |r, out| {
                        delta::encode_i32(&vals[r], out)
                    })?;
                    Ok(pages.finish(None, Encoding::DELTA_BINARY_PACKED, statistics, None))
                }
            }
        }
        Values::Int64 { vals, signed } => {
            let statistics = if signed {
                let (min, max) = min_max(vals.iter().map(|&v| v as i64));
                Statistics::int64(min, max, None, Some(nulls), false)
            } else {
                let (min, max) = min_max(vals.iter().copied());
                Statistics::int64(
                    min.map(|v| v as i64),
                    max.map(|v| v as i64),
                    None,
                    Some(nulls),
                    false,
                )
            };
            pages.data_pages(Encoding::DELTA_BINARY_PACKED, |r, out| {
                delta::encode_i64(&vals[r], out)
            })?;
            Ok(pages.finish(None, Encoding::DELTA_BINARY_PACKED, statistics, None))
        }
        Values::Fixed { vals, width } => {
            let be = |v: u128| v.to_be_bytes()[16 - width..].to_vec();
            let dict = dict::build(vals, limit);
            let distinct: &[u128] = match &dict {
                Some(d) => &d.values,
                None => vals,
            };
            let (min, max) = min_max(distinct.iter().copied());
            let statistics = Statistics::fixed_len_byte_array(
                min.map(|v| FixedLenByteArray::from(be(v))),
                max.map(|v| FixedLenByteArray::from(be(v))),
                None,
                Some(nulls),
                false,
            );
            let bloom = if bloom {
                let ndv = match &dict {
                    Some(d) => d.values.len(),
                    None => vals.len(),
                };
                let mut f = Sbbf::new_with_ndv_fpp(ndv.max(1) as u64, 0.01)?;
                let mut last = None;
                for &v in distinct {
                    if last != Some(v) {
                        f.insert(be(v).as_slice());
                        last = Some(v);
                    }
                }
                Some(f)
            } else {
                None
            };
            match dict {
                Some(d) => {
                    let mut plain = Vec::with_capacity(d.values.len() * width);
                    for &v in &d.values {
                        plain.extend_from_slice(&v.to_be_bytes()[16 - width..]);
                    }
                    let dict_page = pages.dict_page(plain, d.values.len())?;
                    pages.dict_data_pages(&d.indices, d.values.len())?;
                    Ok(pages.finish(Some(dict_page), Encoding::RLE_DICTIONARY, statistics, bloom))
                }
                None => {
                    pages.data_pages(Encoding::PLAIN, |r, out| {
                        for &v in &vals[r] {
                            out.extend_from_slice(&v.to_be_bytes()[16 - width..]);
                        }
                    })?;
                    Ok(pages.finish(None, Encoding::PLAIN, statistics, bloom))
                }
            }
        }
        Values::Names { codes, name } => {
            let wide: Vec<u64> = codes.iter().map(|&c| c as u64).collect();
            let d = dict::build(&wide, 256)
                .ok_or_else(|| ParquetError::General("more than 256 names".into()))?;
            let mut names: Vec<&str> = d.values.iter().map(|&c| name(c as u8)).collect();
            let mut plain = Vec::new();
            for n in &names {
                plain.extend_from_slice(&(n.len() as u32).to_le_bytes());
                plain.extend_from_slice(n.as_bytes());
            }
            names.sort_unstable();
            let statistics = Statistics::byte_array(
                names.first().map(|s| ByteArray::from(*s)),
                names.last().map(|s| ByteArray::from(*s)),
                None,
                Some(nulls),
                false,
            );
            let dict_page = pages.dict_page(plain, d.values.len())?;
            pages.dict_data_pages(&d.indices, d.values.len())?;
            Ok(pages.finish(Some(dict_page), Encoding::RLE_DICTIONARY, statistics, None))
        }
    }
}

fn min_max<T: Ord + Copy>(it: impl Iterator<Item = T>) -> (Option<T>, Option<T>) {
    it.fold((None, None), |(lo, hi), v| {
        (
            Some(lo.map_or(v, |l: T| l.min(v))),
            Some(hi.map_or(v, |h: T| h.max(v))),
        )
    })
}

/// Splits a chunk into data pages of `page_rows` rows, writing each page's
/// definition levels and values and compressing it.
struct Pager<'a, 'z> {
    rows: usize,
    levels: Option<Levels<'a>>,
    opts: &'a EncodeOptions,
    zstd: &'z mut zstd::bulk::Compressor<'static>,
    pages: Vec<CompressedPage>,
}

impl Pager<'_, '_> {
    fn compress(&mut self, raw: &[u8]) -> Result<Bytes> {
        self.zstd
            .compress(raw)
            .map(Bytes::from)
            .map_err(|e| ParquetError::General(format!("zstd: {e}")))
    }

    fn dict_page(&mut self, plain: Vec<u8>, entries: usize) -> Result<CompressedPage> {
        let buf = self.compress(&plain)?;
        Ok(CompressedPage::new(
            Page::DictionaryPage {
                buf,
                num_values: entries as u32,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            },
            plain.len(),
        ))
    }

    /// Data pages whose values are dictionary indices.
    fn dict_data_pages(&mut self, indices: &[u32], entries: usize) -> Result<()> {
        // A one-entry dictionary still uses one bit: some readers mishandle
        // a zero bit width.
        let width = bit_width(entries.saturating_sub(1) as u64).max(1);
        self.data_pages(Encoding::RLE_DICTIONARY, |r, out| {
            out.push(width as u8);
            rle_hybrid(&indices[r], width, out);
        })
    }

    /// Writes pages; `encode` appends the values of a range of the present
    /// values to the page buffer.
    fn data_pages(
        &mut self,
        encoding: Encoding,
        mut encode: impl FnMut(std::ops::Range<usize>, &mut Vec<u8>),
    ) -> Result<()> {
        let page_rows = self.opts.page_rows.max(8);
        let mut raw = Vec::new();
        let mut value_at = 0usize;
        let mut row = 0usize;
        while row < self.rows || (self.rows == 0 && self.pages.is_empty()) {
            let end = (row + page_rows).min(self.rows);
            raw.clear();
            let present = match self.levels {
                Some(Levels { has, bit }) => {
                    let has = &has[row..end];
                    raw.extend_from_slice(&[0; 4]);
                    rle_levels(has.len(), |i| has[i] & bit != 0, &mut raw);
                    let len = (raw.len() - 4) as u32;
                    raw[..4].copy_from_slice(&len.to_le_bytes());
                    has.iter().filter(|&&h| h & bit != 0).count()
                }
                None => end - row,
            };
            encode(value_at..value_at + present, &mut raw);
            value_at += present;
            let buf = self.compress(&raw)?;
            self.pages.push(CompressedPage::new(
                Page::DataPage {
                    buf,
                    num_values: (end - row) as u32,
                    encoding,
                    def_level_encoding: Encoding::RLE,
                    rep_level_encoding: Encoding::RLE,
                    statistics: None,
                },
                raw.len(),
            ));
            if self.rows == 0 {
                break;
            }
            row = end;
        }
        Ok(())
    }

    fn finish(
        self,
        dict_page: Option<CompressedPage>,
        encoding: Encoding,
        statistics: Statistics,
        bloom: Option<Sbbf>,
    ) -> EncodedChunk {
        let mut encodings = vec![Encoding::RLE, encoding];
        if dict_page.is_some() {
            encodings.push(Encoding::PLAIN);
        }
        EncodedChunk {
            dict_page,
            data_pages: self.pages,
            encodings,
            statistics,
            bloom,
        }
    }
}
