//! A Parquet column encoder specialised for weir's packet table.
//!
//! arrow-rs's generic column writers cost 200–550 ns per packet row for
//! this schema (measured by `bench/encode`), several times the budget of a
//! 10 M packets/s worker. These encoders take one value at a time and keep
//! only what the file needs: for dictionary columns the dictionary and the
//! runs of indices (rows grouped by flow repeat values for long stretches),
//! for climbing values (time, sequence numbers) DELTA_BINARY_PACKED blocks
//! packed as they fill. Nothing per row is materialised, so the memory a
//! row group touches is the rows themselves and the encoded pages.
//!
//! The parquet crate still writes the page headers, column metadata, footer
//! and bloom filters, so the container is the standard one.

pub mod bits;
pub mod delta;
pub mod dict;
pub mod file;

use bytes::Bytes;
use parquet::basic::Encoding;
use parquet::bloom_filter::Sbbf;
use parquet::column::page::{CompressedPage, Page};
use parquet::data_type::{ByteArray, FixedLenByteArray};
use parquet::errors::{ParquetError, Result};
use parquet::file::statistics::Statistics;

use bits::{bit_width, encode_runs};
use delta::DeltaPage;
use dict::{Dict, DictKey};

/// A value type of a column: how it is written plainly and ordered.
pub trait Value: DictKey + Ord + Default + std::fmt::Debug {
    /// A BOOLEAN column: PLAIN values are bits, not bytes.
    const BOOLEAN: bool = false;
    /// Appends the PLAIN encoding (`width` is the FIXED_LEN_BYTE_ARRAY
    /// length, ignored for integers).
    fn put_plain(self, width: usize, out: &mut Vec<u8>) {
        let (bytes, len) = self.plain_bytes(width);
        out.extend_from_slice(&bytes[..len]);
    }
    /// The PLAIN encoding in a buffer: (bytes, how many are used).
    fn plain_bytes(self, width: usize) -> ([u8; 16], usize);
    /// The value for delta encoding.
    fn as_u64(self) -> u64;
    /// `self < other` in the column's statistics order.
    #[inline]
    fn less(self, other: Self, signed: bool) -> bool {
        let _ = signed;
        self < other
    }
    /// A column chunk's statistics from its least and greatest value.
    fn statistics(min: Option<Self>, max: Option<Self>, nulls: u64, width: usize) -> Statistics {
        let nulls = Some(nulls);
        match (std::mem::size_of::<Self>(), width) {
            (_, w) if w > 0 => {
                let bytes = |v: Self| {
                    let mut b = Vec::with_capacity(w);
                    v.put_plain(w, &mut b);
                    FixedLenByteArray::from(b)
                };
                Statistics::fixed_len_byte_array(min.map(bytes), max.map(bytes), None, nulls, false)
            }
            (4, _) => Statistics::int32(
                min.map(|v| v.as_u64() as u32 as i32),
                max.map(|v| v.as_u64() as u32 as i32),
                None,
                nulls,
                false,
            ),
            _ => Statistics::int64(
                min.map(|v| v.as_u64() as i64),
                max.map(|v| v.as_u64() as i64),
                None,
                nulls,
                false,
            ),
        }
    }
}

impl Value for u32 {
    fn plain_bytes(self, _: usize) -> ([u8; 16], usize) {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&self.to_le_bytes());
        (b, 4)
    }
    fn as_u64(self) -> u64 {
        self as u64
    }
    #[inline]
    fn less(self, other: Self, signed: bool) -> bool {
        if signed {
            (self as i32) < (other as i32)
        } else {
            self < other
        }
    }
}

impl Value for u64 {
    fn plain_bytes(self, _: usize) -> ([u8; 16], usize) {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.to_le_bytes());
        (b, 8)
    }
    fn as_u64(self) -> u64 {
        self
    }
    #[inline]
    fn less(self, other: Self, signed: bool) -> bool {
        if signed {
            (self as i64) < (other as i64)
        } else {
            self < other
        }
    }
}

/// FIXED_LEN_BYTE_ARRAY values up to 16 bytes, held as the big-endian
/// number the bytes spell, so that numeric order is byte order.
impl Value for u128 {
    fn plain_bytes(self, width: usize) -> ([u8; 16], usize) {
        // Big-endian, right-aligned: move the used bytes to the front.
        let mut b = self.to_be_bytes();
        b.copy_within(16 - width.min(16).., 0);
        (b, width.min(16))
    }
    fn as_u64(self) -> u64 {
        self as u64
    }
}

/// Names from a fixed table (BYTE_ARRAY): a dictionary of the strings
/// themselves, so names that several codes share are one entry (Arrow
/// C++ misreads a dictionary that holds a value twice).
impl Value for &'static str {
    fn put_plain(self, _: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.len() as u32).to_le_bytes());
        out.extend_from_slice(self.as_bytes());
    }
    /// Only the first 16 bytes (for bloom filters, which string columns do
    /// not have).
    fn plain_bytes(self, _: usize) -> ([u8; 16], usize) {
        let mut b = [0u8; 16];
        let n = self.len().min(16);
        b[..n].copy_from_slice(&self.as_bytes()[..n]);
        (b, n)
    }
    fn as_u64(self) -> u64 {
        0
    }
    fn statistics(min: Option<Self>, max: Option<Self>, nulls: u64, _: usize) -> Statistics {
        let text = |s: &str| ByteArray::from(s);
        Statistics::byte_array(min.map(text), max.map(text), None, Some(nulls), false)
    }
}

/// BOOLEAN columns (PLAIN only: one bit per value, packed at the page's
/// end).
impl Value for bool {
    const BOOLEAN: bool = true;
    fn plain_bytes(self, _: usize) -> ([u8; 16], usize) {
        let mut b = [0u8; 16];
        b[0] = self as u8;
        (b, 1)
    }
    fn as_u64(self) -> u64 {
        self as u64
    }
    fn statistics(min: Option<Self>, max: Option<Self>, nulls: u64, _: usize) -> Statistics {
        Statistics::boolean(min, max, None, Some(nulls), false)
    }
}

/// How a column encodes its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Dictionary + RLE runs of indices; falls back to `fallback` once the
    /// dictionary outgrows its limit.
    Dictionary,
    /// DELTA_BINARY_PACKED (integers only).
    Delta,
    /// PLAIN.
    Plain,
}

/// What a column is, for encoding and statistics.
#[derive(Clone, Copy, Debug)]
pub struct ColumnSpec {
    pub nullable: bool,
    pub mode: Mode,
    /// The mode a dictionary column falls back to.
    pub fallback: Mode,
    /// FIXED_LEN_BYTE_ARRAY length (0 for integers).
    pub width: usize,
    /// INT32/INT64 values compare as signed in statistics.
    pub signed: bool,
    /// Build a bloom filter of the values.
    pub bloom: bool,
    /// Keep each page's minimum, maximum and nulls for the page index's
    /// ColumnIndex (what lets a reader go to the pages that hold a value).
    pub page_index: bool,
}

impl ColumnSpec {
    /// An integer column; a dictionary column falls back to delta.
    pub const fn new(nullable: bool, mode: Mode) -> ColumnSpec {
        ColumnSpec {
            nullable,
            mode,
            fallback: Mode::Delta,
            width: 0,
            signed: false,
            bloom: false,
            page_index: false,
        }
    }

    /// Signed integers (times, differences): statistics order them so.
    pub const fn signed(nullable: bool, mode: Mode) -> ColumnSpec {
        ColumnSpec {
            signed: true,
            ..ColumnSpec::new(nullable, mode)
        }
    }

    /// A FIXED_LEN_BYTE_ARRAY of `width` bytes: a dictionary falling back
    /// to PLAIN.
    pub const fn fixed(nullable: bool, width: usize) -> ColumnSpec {
        ColumnSpec {
            width,
            fallback: Mode::Plain,
            ..ColumnSpec::new(nullable, Mode::Dictionary)
        }
    }

    /// Names from a fixed table: a dictionary (PLAIN should it ever
    /// overflow).
    pub const fn names(nullable: bool) -> ColumnSpec {
        ColumnSpec {
            fallback: Mode::Plain,
            ..ColumnSpec::new(nullable, Mode::Dictionary)
        }
    }
}

/// A table's encoders together: what ends a page, and a row group, of all
/// of them.
pub trait ColumnSet {
    fn end_page(&mut self, zstd: &mut zstd::bulk::Compressor<'static>) -> Result<()>;
    /// The row group's chunks, one per column in file order.
    fn finish(&mut self, zstd: &mut zstd::bulk::Compressor<'static>) -> Result<Vec<EncodedChunk>>;
}

/// Declares a table's encoders, one field per column in file order (the
/// order of `$columns`, checked in debug builds), as a [`ColumnSet`].
/// `$opts` names the [`EncodeOptions`] the constructors see.
#[macro_export]
#[doc(hidden)]
macro_rules! column_set {
    ($(#[$m:meta])* struct $name:ident for $columns:expr, |$opts:ident| {
        $( $field:ident : $ty:ty = $new:expr ),* $(,)?
    }) => {
        $(#[$m])*
        struct $name {
            $( $field: $ty, )*
        }

        impl $name {
            fn new($opts: &$crate::encode::EncodeOptions) -> Self {
                debug_assert_eq!(
                    [$( stringify!($field) ),*].as_slice(),
                    $columns.iter().map(|c| c.name).collect::<Vec<_>>().as_slice()
                );
                $name { $( $field: $new, )* }
            }
        }

        impl $crate::encode::ColumnSet for $name {
            fn end_page(
                &mut self,
                zstd: &mut zstd::bulk::Compressor<'static>,
            ) -> parquet::errors::Result<()> {
                $( self.$field.end_page(zstd)?; )*
                Ok(())
            }

            fn finish(
                &mut self,
                zstd: &mut zstd::bulk::Compressor<'static>,
            ) -> parquet::errors::Result<Vec<$crate::encode::EncodedChunk>> {
                Ok(vec![ $( self.$field.finish(zstd)?, )* ])
            }
        }
    };
}

/// Knobs of the encoders.
#[derive(Clone, Copy, Debug)]
pub struct EncodeOptions {
    /// Rows per data page.
    pub page_rows: usize,
    /// Rows per data page of the columns a reader reaches through the page
    /// index (of the packet table: `flow_hash`, and the time and frame
    /// pointer `weir read` takes of each row it finds); at most
    /// `page_rows`. Small pages let a query for a few flows decode little
    /// of each row group; the other columns keep large ones, which
    /// compress better where a row group holds many short flows. 2 Ki rows:
    /// a flow seen in every row group of 200 M packets costs a page of each
    /// (8 Ki made `weir read` of one flow 1.6x slower there; 2 Ki costs
    /// 0.1-0.2 B a packet more than 8 Ki, 1 Ki no faster than 2 Ki).
    pub index_page_rows: usize,
    /// Whether pages may be compressed at all (each column chunk then
    /// decides by its first page, see [`ChunkCodec`]); false stores every
    /// page as it is.
    pub compress: bool,
    pub zstd_level: i32,
    /// Most distinct values a dictionary may hold before the column falls
    /// back to its other encoding.
    pub dict_limit: usize,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            page_rows: 128 * 1024,
            index_page_rows: 2 * 1024,
            compress: true,
            zstd_level: 1,
            dict_limit: 64 * 1024,
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
    /// The pages are zstd-compressed (else stored as they are).
    pub compressed: bool,
    /// Per data page, for a column with [`ColumnSpec::page_index`].
    pub page_stats: Option<Vec<PageStat>>,
}

/// A data page's bounds, for the ColumnIndex.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageStat {
    /// PLAIN bytes of the page's least and greatest value; None for a page
    /// of nulls alone.
    pub bounds: Option<(Vec<u8>, Vec<u8>)>,
    pub nulls: u64,
}

/// Definition levels of one page, as runs.
#[derive(Default)]
struct LevelRuns {
    runs: Vec<(u32, u32)>,
    cur: bool,
    len: u32,
}

impl LevelRuns {
    #[inline(always)]
    fn push(&mut self, present: bool) {
        if present == self.cur {
            self.len += 1;
        } else {
            self.switch(present);
        }
    }

    #[inline(always)]
    fn push_n(&mut self, present: bool, n: u32) {
        if present == self.cur {
            self.len += n;
        } else {
            self.switch(present);
            self.len += n - 1;
        }
    }

    #[inline(never)]
    fn switch(&mut self, present: bool) {
        if self.len > 0 {
            self.runs.push((self.cur as u32, self.len));
        }
        self.cur = present;
        self.len = 1;
    }

    /// Rows of the page so far without a value.
    fn absent(&self) -> u64 {
        let open = if self.cur { 0 } else { self.len as u64 };
        open + (self.runs.iter())
            .filter(|r| r.0 == 0)
            .map(|r| r.1 as u64)
            .sum::<u64>()
    }

    /// Appends the page's levels, prefixed by their length as data page v1
    /// requires.
    fn finish(&mut self, out: &mut Vec<u8>) {
        if self.len > 0 {
            self.runs.push((self.cur as u32, self.len));
        }
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        encode_runs(&self.runs, 1, out);
        let len = (out.len() - at - 4) as u32;
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
        self.runs.clear();
        self.len = 0;
    }
}

/// One column of a row group, encoded as the rows arrive.
pub struct ColumnEncoder<K: Value> {
    spec: ColumnSpec,
    dict_limit: usize,
    mode: Mode,
    levels: LevelRuns,
    dict: Dict<K>,
    /// Runs of dictionary indices in the current page.
    runs: Vec<(u32, u32)>,
    cur_val: K,
    cur_idx: u32,
    cur_len: u32,
    /// The last value pushed (None: a null), for [`ColumnEncoder::repeat`].
    last: Option<K>,
    delta: DeltaPage,
    plain: Vec<u8>,
    rows_in_page: u32,
    min: Option<K>,
    max: Option<K>,
    nulls: u64,
    used_dict: bool,
    encodings: Vec<Encoding>,
    pages: Vec<CompressedPage>,
    bloom: Option<Sbbf>,
    raw: Vec<u8>,
    codec: ChunkCodec,
    /// The current page's least and greatest value, and the pages' so
    /// far, for a column with a page index.
    page_min: Option<K>,
    page_max: Option<K>,
    page_stats: Vec<PageStat>,
}

impl<K: Value> ColumnEncoder<K> {
    pub fn new(spec: ColumnSpec, opts: &EncodeOptions) -> Self {
        ColumnEncoder {
            spec,
            dict_limit: opts.dict_limit,
            mode: spec.mode,
            levels: LevelRuns::default(),
            dict: Dict::default(),
            runs: Vec::new(),
            cur_val: K::default(),
            cur_idx: 0,
            cur_len: 0,
            last: None,
            delta: DeltaPage::new(std::mem::size_of::<K>() <= 4),
            plain: Vec::new(),
            rows_in_page: 0,
            min: None,
            max: None,
            nulls: 0,
            used_dict: false,
            encodings: Vec::new(),
            pages: Vec::new(),
            bloom: None,
            raw: Vec::new(),
            codec: ChunkCodec::new(opts.compress),
            page_min: None,
            page_max: None,
            page_stats: Vec::new(),
        }
    }

    /// Adds a present value. The common case, a value equal to the last one
    /// of a dictionary column, is a compare and an increment.
    #[inline(always)]
    pub fn push(&mut self, v: K) {
        if self.spec.nullable {
            self.levels.push(true);
        }
        self.rows_in_page += 1;
        self.last = Some(v);
        match self.mode {
            Mode::Dictionary if self.cur_len > 0 && v.same(self.cur_val) => self.cur_len += 1,
            // Times and ids change every row: a call per value (and the
            // registers it saves) was a fifth of their cost.
            Mode::Delta => self.push_delta(v),
            _ => self.push_other(v),
        }
    }

    /// Adds the `n` present values of `values`: what [`push`] does for
    /// each, with the column's state held in registers over the loop (a
    /// writer pushing rows one by one reloads and stores it for every
    /// value of every column).
    ///
    /// [`push`]: ColumnEncoder::push
    #[inline(always)]
    pub fn push_each(&mut self, n: u32, values: impl Iterator<Item = K>) {
        if n == 0 {
            return;
        }
        if self.mode == Mode::Plain {
            values.for_each(|v| self.push(v));
            return;
        }
        if self.spec.nullable {
            self.levels.push_n(true, n);
        }
        self.rows_in_page += n;
        if self.mode == Mode::Delta {
            if self.spec.signed {
                self.push_delta_each::<true>(values);
            } else {
                self.push_delta_each::<false>(values);
            }
            return;
        }
        let (mut cur, mut len) = (self.cur_val, self.cur_len);
        for v in values {
            if len > 0 && v.same(cur) {
                len += 1;
            } else {
                self.cur_len = len;
                self.new_run(v);
                (cur, len) = (v, 1);
            }
        }
        self.cur_len = len;
        self.last = Some(cur);
    }

    /// The delta part of [`ColumnEncoder::push_each`]: the values' least
    /// and greatest found as they go, in the column's order.
    #[inline(always)]
    fn push_delta_each<const SIGNED: bool>(&mut self, mut values: impl Iterator<Item = K>) {
        let Some(first) = values.next() else {
            return;
        };
        let (mut lo, mut hi, mut last) = (first, first, first);
        self.delta.push(first.as_u64());
        self.delta.push_each(values.map(|v| {
            if v.less(lo, SIGNED) {
                lo = v;
            }
            if hi.less(v, SIGNED) {
                hi = v;
            }
            last = v;
            v.as_u64()
        }));
        self.observe(lo);
        self.observe(hi);
        self.last = Some(last);
    }

    #[inline(always)]
    fn push_delta(&mut self, v: K) {
        self.delta.push(v.as_u64());
        self.observe(v);
    }

    #[inline(never)]
    fn push_other(&mut self, v: K) {
        match self.mode {
            Mode::Dictionary => self.new_run(v),
            Mode::Delta => self.push_delta(v),
            Mode::Plain => {
                v.put_plain(self.spec.width, &mut self.plain);
                self.observe(v);
                if self.spec.bloom {
                    // Falling back means many distinct values: size for them.
                    self.bloom_insert(v, self.dict_limit * 4);
                }
            }
        }
    }

    #[inline(always)]
    pub fn push_null(&mut self) {
        debug_assert!(self.spec.nullable);
        self.levels.push(false);
        self.rows_in_page += 1;
        self.nulls += 1;
        self.last = None;
    }

    /// Pushes the last value (or null) pushed `n` more times. For a
    /// dictionary column inside a run, as rows grouped by flow mostly are,
    /// that is a few additions however large `n` is.
    #[inline]
    pub fn repeat(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        match self.last {
            Some(_) if self.cur_len > 0 && self.mode == Mode::Dictionary => {
                if self.spec.nullable {
                    self.levels.push_n(true, n);
                }
                self.rows_in_page += n;
                self.cur_len += n;
            }
            Some(v) => (0..n).for_each(|_| self.push(v)),
            None => {
                self.levels.push_n(false, n);
                self.rows_in_page += n;
                self.nulls += n as u64;
            }
        }
    }

    /// Rows in the page being built.
    pub fn rows_in_page(&self) -> u32 {
        self.rows_in_page
    }

    fn new_run(&mut self, v: K) {
        if self.cur_len > 0 {
            self.runs.push((self.cur_idx, self.cur_len));
        }
        let before = self.dict.len();
        self.cur_idx = self.dict.index(v);
        self.cur_val = v;
        self.cur_len = 1;
        if self.dict.len() > before {
            self.observe(v);
        } else if self.spec.page_index {
            self.observe_page(v);
        }
    }

    #[inline]
    fn observe(&mut self, v: K) {
        if self.spec.page_index {
            self.observe_page(v);
        }
        let signed = self.spec.signed;
        match self.min {
            Some(m) if !v.less(m, signed) => {}
            _ => self.min = Some(v),
        }
        match self.max {
            Some(m) if !m.less(v, signed) => {}
            _ => self.max = Some(v),
        }
    }

    /// Widens the current page's bounds to `v` (a run's value: a page holds
    /// the values of the runs that start in it, and the open run's).
    #[cold]
    fn observe_page(&mut self, v: K) {
        let signed = self.spec.signed;
        match self.page_min {
            Some(m) if !v.less(m, signed) => {}
            _ => self.page_min = Some(v),
        }
        match self.page_max {
            Some(m) if !m.less(v, signed) => {}
            _ => self.page_max = Some(v),
        }
    }

    /// Adds a value to the bloom filter, made on first use for `ndv`
    /// distinct values at a 1 % false-positive rate.
    fn bloom_insert(&mut self, v: K, ndv: usize) {
        let width = self.spec.width;
        let filter = self.bloom.get_or_insert_with(|| {
            Sbbf::new_with_ndv_fpp(ndv.max(1) as u64, 0.01)
                .unwrap_or_else(|_| Sbbf::new_with_num_of_bytes(32 * 1024))
        });
        // Bloom filters hash the PLAIN encoding: the fixed bytes themselves.
        let (bytes, len) = v.plain_bytes(width);
        filter.insert(&bytes[..len]);
    }

    /// Ends the current data page and compresses it.
    pub fn end_page(&mut self, zstd: &mut zstd::bulk::Compressor<'static>) -> Result<()> {
        if self.rows_in_page == 0 {
            return Ok(());
        }
        if self.spec.page_index {
            // (Every page starts a new run, so its values all passed
            // through `observe` or `new_run`.)
            let nulls = if self.spec.nullable {
                self.levels.absent()
            } else {
                0
            };
            let width = self.spec.width;
            let plain = |v: K| {
                let (bytes, len) = v.plain_bytes(width);
                bytes[..len].to_vec()
            };
            self.page_stats.push(PageStat {
                bounds: (self.page_min.take())
                    .zip(self.page_max.take())
                    .map(|(a, b)| (plain(a), plain(b))),
                nulls,
            });
        }
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        if self.spec.nullable {
            self.levels.finish(&mut raw);
        }
        let encoding = match self.mode {
            Mode::Dictionary if self.dict.is_empty() => {
                // Nothing but nulls so far: no dictionary to refer to.
                Encoding::PLAIN
            }
            Mode::Dictionary => {
                let open_run = (self.cur_idx, &mut self.cur_len);
                write_indices(&mut self.runs, open_run, self.dict.len(), &mut raw);
                self.used_dict = true;
                if self.dict.len() > self.dict_limit {
                    self.mode = self.spec.fallback;
                }
                Encoding::RLE_DICTIONARY
            }
            Mode::Delta => {
                self.delta.finish(&mut raw);
                Encoding::DELTA_BINARY_PACKED
            }
            Mode::Plain if K::BOOLEAN => {
                // One byte per value so far: pack them, first value in the
                // lowest bit.
                raw.extend(self.plain.chunks(8).map(|byte| {
                    byte.iter()
                        .enumerate()
                        .fold(0u8, |acc, (i, &b)| acc | (b & 1) << i)
                }));
                self.plain.clear();
                Encoding::PLAIN
            }
            Mode::Plain => {
                raw.extend_from_slice(&self.plain);
                self.plain.clear();
                Encoding::PLAIN
            }
        };
        if !self.encodings.contains(&encoding) {
            self.encodings.push(encoding);
        }
        let buf = self.codec.page(zstd, &raw);
        let rows = self.rows_in_page;
        self.rows_in_page = 0;
        self.raw = raw;
        self.pages.push(CompressedPage::new(
            Page::DataPage {
                buf: buf?,
                num_values: rows,
                encoding,
                def_level_encoding: Encoding::RLE,
                rep_level_encoding: Encoding::RLE,
                statistics: None,
            },
            self.raw.len(),
        ));
        Ok(())
    }

    /// Ends the column chunk: the dictionary page, the data pages, the
    /// statistics and bloom filter. The encoder is ready for the next row
    /// group afterwards.
    pub fn finish(&mut self, zstd: &mut zstd::bulk::Compressor<'static>) -> Result<EncodedChunk> {
        self.end_page(zstd)?;
        let dict_plain = if self.used_dict {
            let mut plain = Vec::with_capacity(self.dict.len() * 8);
            for v in &self.dict.values {
                v.put_plain(self.spec.width, &mut plain);
            }
            if self.spec.bloom {
                let ndv = self.dict.len();
                for i in 0..ndv {
                    let v = self.dict.values[i];
                    self.bloom_insert(v, ndv);
                }
            }
            Some(plain)
        } else {
            None
        };
        let (dict_page, encodings) = chunk_pages(
            &mut self.codec,
            zstd,
            dict_plain.as_deref().map(|p| (p, self.dict.len())),
            &self.encodings,
        )?;
        let statistics = self.statistics();
        let chunk = EncodedChunk {
            dict_page,
            data_pages: std::mem::take(&mut self.pages),
            encodings,
            statistics,
            bloom: self.bloom.take(),
            compressed: self.codec.finish(),
            page_stats: (self.spec.page_index).then(|| std::mem::take(&mut self.page_stats)),
        };
        self.reset();
        Ok(chunk)
    }

    fn statistics(&self) -> Statistics {
        K::statistics(self.min, self.max, self.nulls, self.spec.width)
    }

    fn reset(&mut self) {
        self.mode = self.spec.mode;
        self.dict.clear();
        self.runs.clear();
        self.cur_len = 0;
        self.last = None;
        self.min = None;
        self.max = None;
        self.nulls = 0;
        self.used_dict = false;
        self.encodings.clear();
    }
}

/// A dictionary-coded page's values: the bit width, then the page's runs
/// of indices, the open one (index, length) closed too: the next page
/// starts a new run even for the same value.
fn write_indices(
    runs: &mut Vec<(u32, u32)>,
    (cur_idx, cur_len): (u32, &mut u32),
    dict_len: usize,
    raw: &mut Vec<u8>,
) {
    if *cur_len > 0 {
        runs.push((cur_idx, *cur_len));
        *cur_len = 0;
    }
    // A one-entry dictionary still uses one bit: some readers mishandle a
    // zero bit width.
    let width = bit_width(dict_len.saturating_sub(1) as u64).max(1);
    raw.push(width as u8);
    encode_runs(runs, width, raw);
    runs.clear();
}

/// A chunk's dictionary page, from `dict` (its values PLAIN, and how
/// many), and the encodings its metadata lists, given those of its data
/// pages.
fn chunk_pages(
    codec: &mut ChunkCodec,
    zstd: &mut zstd::bulk::Compressor<'static>,
    dict: Option<(&[u8], usize)>,
    data: &[Encoding],
) -> Result<(Option<CompressedPage>, Vec<Encoding>)> {
    let page = match dict {
        Some((plain, n)) => Some(CompressedPage::new(
            Page::DictionaryPage {
                buf: codec.page(zstd, plain)?,
                num_values: n as u32,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            },
            plain.len(),
        )),
        None => None,
    };
    let mut encodings = vec![Encoding::RLE];
    encodings.extend_from_slice(data);
    if page.is_some() && !encodings.contains(&Encoding::PLAIN) {
        encodings.push(Encoding::PLAIN);
    }
    Ok((page, encodings))
}

/// Whether a column chunk's pages are compressed, decided by its first
/// page: zstd that saves less than an eighth is not worth its cost to the
/// reader (delta-coded times and latencies save ~3 %, and decompressing
/// them was a tenth of `weir analyze rpc`). The codec is a property of the
/// whole chunk in Parquet, so the decision holds until the chunk ends.
struct ChunkCodec {
    /// Compression allowed ([`EncodeOptions::compress`]).
    allowed: bool,
    compress: Option<bool>,
}

impl ChunkCodec {
    fn new(allowed: bool) -> Self {
        ChunkCodec {
            allowed,
            compress: None,
        }
    }

    /// The page's bytes as stored.
    fn page(&mut self, zstd: &mut zstd::bulk::Compressor<'static>, raw: &[u8]) -> Result<Bytes> {
        if !self.allowed || self.compress == Some(false) {
            return Ok(Bytes::copy_from_slice(raw));
        }
        let packed = zstd
            .compress(raw)
            .map_err(|e| ParquetError::General(format!("zstd: {e}")))?;
        if self.compress.is_none() {
            let worth = packed.len() <= raw.len() - raw.len() / 8;
            self.compress = Some(worth);
            if !worth {
                return Ok(Bytes::copy_from_slice(raw));
            }
        }
        Ok(Bytes::from(packed))
    }

    /// Ends the chunk: whether its pages were compressed.
    fn finish(&mut self) -> bool {
        self.compress.take().unwrap_or(true) && self.allowed
    }
}

/// A nullable UTF-8 column: file names. Dictionary-coded while the
/// dictionary stays small (names repeat: a workload looks up the same
/// files again and again; on the shared NFSv3 trace 99 k names are 2.2 k
/// texts, and the codes are a sixth of the PLAIN bytes and need no text
/// walk to read), PLAIN once it outgrows `dict_limit` texts or
/// [`TEXT_DICT_BYTES`], for the rest of the column chunk.
pub struct TextEncoder {
    levels: LevelRuns,
    dict_limit: usize,
    dictionary: bool,
    dict: dict::TextDict,
    /// Runs of dictionary indices in the current page.
    runs: Vec<(u32, u32)>,
    cur_idx: u32,
    cur_len: u32,
    used_dict: bool,
    plain: Vec<u8>,
    rows_in_page: u32,
    min: Option<Vec<u8>>,
    max: Option<Vec<u8>>,
    nulls: u64,
    encodings: Vec<Encoding>,
    pages: Vec<CompressedPage>,
    raw: Vec<u8>,
    codec: ChunkCodec,
}

/// Bytes of text a dictionary may hold before the column goes PLAIN: a
/// dictionary page is read whole before any of its codes.
pub const TEXT_DICT_BYTES: usize = 1 << 20;

impl TextEncoder {
    pub fn new(opts: &EncodeOptions) -> Self {
        TextEncoder {
            levels: LevelRuns::default(),
            dict_limit: opts.dict_limit,
            dictionary: true,
            dict: dict::TextDict::default(),
            runs: Vec::new(),
            cur_idx: 0,
            cur_len: 0,
            used_dict: false,
            plain: Vec::new(),
            rows_in_page: 0,
            min: None,
            max: None,
            nulls: 0,
            encodings: Vec::new(),
            pages: Vec::new(),
            raw: Vec::new(),
            codec: ChunkCodec::new(opts.compress),
        }
    }

    #[inline]
    pub fn push(&mut self, v: Option<&str>) {
        self.rows_in_page += 1;
        let Some(v) = v else {
            self.levels.push(false);
            self.nulls += 1;
            return;
        };
        self.levels.push(true);
        let b = v.as_bytes();
        if self.dictionary {
            let (idx, new) = self.dict.index(b);
            if self.cur_len > 0 && idx == self.cur_idx {
                self.cur_len += 1;
                return;
            }
            if self.cur_len > 0 {
                self.runs.push((self.cur_idx, self.cur_len));
            }
            (self.cur_idx, self.cur_len) = (idx, 1);
            // Every text is a dictionary entry once: bounds are found
            // among the new ones.
            if !new {
                return;
            }
        } else {
            self.plain
                .extend_from_slice(&(b.len() as u32).to_le_bytes());
            self.plain.extend_from_slice(b);
        }
        if self.min.as_deref().is_none_or(|m| b < m) {
            self.min = Some(b.to_vec());
        }
        if self.max.as_deref().is_none_or(|m| b > m) {
            self.max = Some(b.to_vec());
        }
    }

    /// Ends the current data page and compresses it.
    pub fn end_page(&mut self, zstd: &mut zstd::bulk::Compressor<'static>) -> Result<()> {
        if self.rows_in_page == 0 {
            return Ok(());
        }
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        self.levels.finish(&mut raw);
        let encoding = if self.dictionary && !self.dict.is_empty() {
            let open_run = (self.cur_idx, &mut self.cur_len);
            write_indices(&mut self.runs, open_run, self.dict.len(), &mut raw);
            self.used_dict = true;
            if self.dict.len() > self.dict_limit || self.dict.plain.len() > TEXT_DICT_BYTES {
                self.dictionary = false;
            }
            Encoding::RLE_DICTIONARY
        } else {
            // PLAIN, or a page of nulls alone before any text.
            raw.extend_from_slice(&self.plain);
            self.plain.clear();
            Encoding::PLAIN
        };
        if !self.encodings.contains(&encoding) {
            self.encodings.push(encoding);
        }
        let buf = self.codec.page(zstd, &raw)?;
        self.pages.push(CompressedPage::new(
            Page::DataPage {
                buf,
                num_values: self.rows_in_page,
                encoding,
                def_level_encoding: Encoding::RLE,
                rep_level_encoding: Encoding::RLE,
                statistics: None,
            },
            raw.len(),
        ));
        self.raw = raw;
        self.rows_in_page = 0;
        Ok(())
    }

    /// Ends the column chunk; ready for the next row group afterwards.
    pub fn finish(&mut self, zstd: &mut zstd::bulk::Compressor<'static>) -> Result<EncodedChunk> {
        self.end_page(zstd)?;
        let statistics = Statistics::byte_array(
            self.min.take().map(ByteArray::from),
            self.max.take().map(ByteArray::from),
            None,
            Some(std::mem::take(&mut self.nulls)),
            false,
        );
        let (dict_page, encodings) = chunk_pages(
            &mut self.codec,
            zstd,
            self.used_dict
                .then(|| (&self.dict.plain[..], self.dict.len())),
            &self.encodings,
        )?;
        self.encodings.clear();
        let chunk = EncodedChunk {
            dict_page,
            data_pages: std::mem::take(&mut self.pages),
            encodings,
            statistics,
            bloom: None,
            compressed: self.codec.finish(),
            page_stats: None,
        };
        self.dictionary = true;
        self.dict.clear();
        self.used_dict = false;
        Ok(chunk)
    }
}
