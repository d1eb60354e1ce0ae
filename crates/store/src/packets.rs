//! Writing the packet table: `packets/*.parquet`.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::errors::Result as PqResult;
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::WriterProperties;
use wire::{Has, PacketFields, PacketRecord, ParseError, Tunnel, TunnelFields, TunnelHas};

use crate::error::StoreError;
use crate::flows::{FLOWS_DIR, FlowSlicer, flows_path_for, write_flow_file};
use crate::schema::{PACKET_COLUMNS, PACKET_SCHEMA_VERSION, packet_schema};
use pqcodec::encode::file::EncodedFile;
use pqcodec::encode::{ColumnEncoder, ColumnSpec, EncodeOptions, EncodedChunk, Mode};

/// Order of rows inside a row group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowOrder {
    /// As the frames arrived.
    Arrival,
    /// Grouped by flow (`flow_hash`, then direction), arrival order within
    /// a flow. Row groups still cover consecutive stretches of arrival, so
    /// their `ts` statistics remain a time index; inside a group, a flow's
    /// addresses, ports and lengths repeat and its sequence numbers and
    /// times climb in small steps, which is what makes records small.
    Flow,
}

/// Knobs of a [`PacketWriter`].
#[derive(Clone, Copy, Debug)]
pub struct PacketWriterOptions {
    pub row_group_rows: usize,
    pub order: RowOrder,
    pub encode: EncodeOptions,
    /// Back the row buffers with memory when they are made, not when rows
    /// first land in them: live capture pays that before it starts.
    pub prefault: bool,
    /// Write the flows table beside the file: `flows/NAME.parquet` for
    /// `packets/NAME.parquet` (only for a file in a `packets` directory).
    pub flows: bool,
}

/// Rows per row group unless asked otherwise. A quarter million rows (32
/// MiB of records) rather than a million: the row buffer then stays in
/// the caches while a row group is grouped by flow and encoded, and costs a
/// quarter of the fresh memory to set up. Measured with `weir convert -j 1`
/// (3 runs each): 64-byte frames 1.60 -> 1.19 s for 10 M, the application
/// mix 1.40 -> 0.66 s for 2 M, for 5 % more bytes (5.48 -> 5.75 B/packet).
pub const DEFAULT_ROW_GROUP_ROWS: usize = 256 * 1024;

impl Default for PacketWriterOptions {
    fn default() -> Self {
        PacketWriterOptions {
            row_group_rows: DEFAULT_ROW_GROUP_ROWS,
            order: RowOrder::Flow,
            encode: EncodeOptions::default(),
            prefault: false,
            flows: true,
        }
    }
}

/// What a finished packet file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PacketFileSummary {
    /// Path relative to the dataset root.
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
    pub row_groups: u32,
    /// Earliest and latest `ts` in the file (ns), if it has rows.
    pub ts_min: Option<i64>,
    pub ts_max: Option<i64>,
    /// The digest taken as the file was written, for the integrity chain
    /// (which is where the manifest keeps it).
    #[serde(skip)]
    pub digest: Option<util::digest::FileDigest>,
}

/// A packet file closed by [`PacketWriter::finish_keeping_buffers`].
#[derive(Debug)]
pub struct FinishedFile {
    pub summary: PacketFileSummary,
    /// Its flows file could not be written (and is removed): the slices
    /// lost, and why.
    pub flows_lost: Option<(u64, StoreError)>,
}

/// Writes packet records to one Parquet file, which appears under its final
/// name only when complete.
pub struct PacketWriter {
    file: EncodedFile,
    opts: PacketWriterOptions,
    rows: RowBuffer,
    enc: Encoders,
    order: Vec<u32>,
    sort_scratch: Vec<u64>,
    summary: PacketFileSummary,
    /// The flows file's slices, path and path relative to the dataset.
    flows: Option<(FlowSlicer, PathBuf, String)>,
}

impl PacketWriter {
    /// Starts `path` (written as a hidden `.NAME.part` beside it first).
    /// `relative` is the path recorded in the summary.
    pub fn create(
        path: &Path,
        relative: &str,
        opts: PacketWriterOptions,
    ) -> Result<Self, StoreError> {
        Self::create_reusing(path, relative, opts, None)
    }

    /// As [`PacketWriter::create`], gathering rows in the buffers of a
    /// finished writer (see [`PacketWriter::finish_keeping_buffers`]) so the
    /// next file starts on memory that is already backed.
    pub fn create_reusing(
        path: &Path,
        relative: &str,
        opts: PacketWriterOptions,
        buffers: Option<RowBuffers>,
    ) -> Result<Self, StoreError> {
        let mut props = WriterProperties::builder().set_key_value_metadata(Some(vec![
            KeyValue::new("weir.version".into(), env!("CARGO_PKG_VERSION").to_string()),
            KeyValue::new("weir.table".into(), "packets".to_string()),
            KeyValue::new(
                "weir.schema_version".into(),
                PACKET_SCHEMA_VERSION.to_string(),
            ),
            KeyValue::new(
                "weir.row_order".into(),
                match opts.order {
                    RowOrder::Arrival => "arrival",
                    RowOrder::Flow => "flow",
                }
                .to_string(),
            ),
        ]));
        if opts.order == RowOrder::Flow {
            let flow_col = PACKET_COLUMNS
                .iter()
                .position(|c| c.name == "flow_hash")
                .unwrap_or(0) as i32;
            props = props.set_sorting_columns(Some(vec![SortingColumn {
                column_idx: flow_col,
                descending: false,
                nulls_first: false,
            }]));
        }
        let file = EncodedFile::create(path, &packet_schema(), props, opts.encode.zstd_level)?;
        let in_packets_dir = path
            .parent()
            .and_then(|d| d.file_name())
            .is_some_and(|n| n == crate::dataset::PACKETS_DIR);
        let flows = (opts.flows && in_packets_dir).then(|| {
            let name = path.file_name().unwrap_or_default();
            let dir = path
                .parent()
                .and_then(|d| d.parent())
                .unwrap_or(Path::new("."));
            (
                FlowSlicer::new(),
                dir.join(FLOWS_DIR).join(name),
                flows_path_for(relative),
            )
        });
        Ok(PacketWriter {
            file,
            opts,
            rows: match buffers {
                Some(RowBuffers(b)) if b.order == opts.order => b,
                _ => RowBuffer::new(opts.order, opts.row_group_rows, opts.prefault),
            },
            enc: Encoders::new(&opts.encode),
            order: Vec::new(),
            sort_scratch: Vec::new(),
            summary: PacketFileSummary {
                path: relative.to_string(),
                ..Default::default()
            },
            flows,
        })
    }

    /// Rows written or buffered so far.
    pub fn rows(&self) -> u64 {
        self.summary.rows + self.rows.len() as u64
    }

    /// Adds one record; writes a row group when enough have gathered.
    #[inline]
    pub fn push(&mut self, rec: &PacketRecord) -> Result<(), StoreError> {
        self.rows.push(rec);
        if self.rows.len() >= self.opts.row_group_rows {
            self.flush_row_group()?;
        }
        Ok(())
    }

    /// Adds a record that `fill` builds in place (no copy of the record);
    /// `fill` receives a default record.
    #[inline]
    pub fn push_with(&mut self, fill: impl FnOnce(&mut PacketRecord)) -> Result<(), StoreError> {
        let mut rec = PacketRecord::default();
        fill(&mut rec);
        self.rows.push(&rec);
        if self.rows.len() >= self.opts.row_group_rows {
            self.flush_row_group()?;
        }
        Ok(())
    }

    /// Encodes and writes the buffered rows as one row group.
    pub fn flush_row_group(&mut self) -> Result<(), StoreError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let (lo, hi) = self.rows.ts_range();
        self.summary.ts_min = Some(self.summary.ts_min.map_or(lo, |m| m.min(lo)));
        self.summary.ts_max = Some(self.summary.ts_max.map_or(hi, |m| m.max(hi)));
        let n = self.rows.len();
        let chunks = self
            .encode_rows()
            .map_err(|e| StoreError::parquet(self.file.part_path(), e))?;
        self.file.write_row_group(n, chunks)?;
        self.summary.rows += n as u64;
        self.summary.row_groups += 1;
        self.rows.clear();
        Ok(())
    }

    /// Feeds the rows, in write order, through the column encoders, a
    /// stretch at a time: consecutive rows that agree in every column
    /// constant within a flow (a flow's rows, grouped). The columns
    /// constant within a flow take the stretch as one value repeated; each
    /// varying column takes its values in one loop over the stretch, and
    /// the flows slicer takes the stretch whole (one key for all its rows).
    fn encode_rows(&mut self) -> PqResult<Vec<EncodedChunk>> {
        // Rows are visited out of order (grouped by flow): fetch a few ahead
        // so that the loads overlap instead of stalling one by one.
        const AHEAD: usize = 12;
        let page_rows = self.opts.encode.page_rows.max(8);
        let index_rows = self.opts.encode.index_page_rows.clamp(8, page_rows);
        let enc = &mut self.enc;
        let mut flows = self.flows.as_mut().map(|f| &mut f.0);
        let zstd = self.file.zstd();
        let mut page_left = page_rows;
        // Rows to the next end of the index columns' smaller pages.
        let mut index_left = index_rows;
        // The rows of the stretch being gathered.
        let mut stretch: Vec<&PacketFields> = Vec::with_capacity(STRETCH_ROWS);
        for bucket in &mut self.rows.buckets {
            if bucket.rows.is_empty() {
                continue;
            }
            bucket.sort_into(&mut self.order, &mut self.sort_scratch);
            let rows = &bucket.rows[..];
            let tunnels = &bucket.tunnels[..];
            let order = &self.order[..];
            let tunnel = |i: usize| tunnels.get(i).unwrap_or(&NO_TUNNEL);
            let mut k = 0;
            while k < order.len() {
                let head = order[k] as usize;
                let (h, ht) = (&rows[head], tunnel(head));
                // A stretch ends at a page's end, and is kept short enough
                // that its rows stay in the L1 cache while each varying
                // column is read from them in turn.
                let most = (order.len() - k)
                    .min(page_left.min(index_left))
                    .min(STRETCH_ROWS);
                stretch.clear();
                stretch.push(h);
                while stretch.len() < most {
                    if let Some(&next) = order.get(k + stretch.len() + AHEAD) {
                        util::hint::prefetch(&rows[next as usize], RECORD_LINES);
                    }
                    let i = order[k + stretch.len()] as usize;
                    if !Encoders::same_flow((h, ht), (&rows[i], tunnel(i))) {
                        break;
                    }
                    stretch.push(&rows[i]);
                }
                let n = stretch.len();
                enc.push_stretch((h, ht), &stretch);
                if let Some(f) = flows.as_deref_mut() {
                    f.push_stretch(&stretch);
                }
                k += n;
                page_left -= n;
                index_left -= n;
                if page_left == 0 {
                    enc.end_page(zstd)?;
                    page_left = page_rows;
                    index_left = index_rows;
                } else if index_left == 0 {
                    enc.end_index_pages(zstd)?;
                    index_left = index_rows;
                }
            }
        }
        enc.finish(zstd)
    }

    /// Writes what is buffered, the footer, syncs, and renames the file into
    /// place. Returns what the file holds.
    pub fn finish(self) -> Result<PacketFileSummary, StoreError> {
        let f = self.finish_keeping_buffers().0?;
        match f.flows_lost {
            Some((_, e)) => Err(e),
            None => Ok(f.summary),
        }
    }

    /// As [`PacketWriter::finish`], and hands back the (empty) row buffers
    /// for the next file, whatever happened. A packet file that cannot be
    /// written whole (a full disk) is given up: its `.part` is removed and
    /// its rows are lost. A flows file that cannot be written is removed
    /// and said in [`FinishedFile::flows_lost`]; the packet file is whole
    /// without it.
    pub fn finish_keeping_buffers(mut self) -> (Result<FinishedFile, StoreError>, RowBuffers) {
        let flushed = self.flush_row_group();
        let PacketWriter {
            file,
            mut rows,
            mut summary,
            flows,
            ..
        } = self;
        rows.clear();
        let buffers = RowBuffers(rows);
        if let Err(e) = flushed {
            file.discard();
            return (Err(e), buffers);
        }
        let part = file.part_path().to_path_buf();
        match file.finish() {
            Ok(digest) => {
                summary.bytes = digest.bytes;
                summary.digest = Some(digest);
            }
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                return (Err(e), buffers);
            }
        }
        // After the packet file: a flows file never exists without its
        // packets (readers use the flows table only when every packet file
        // has one).
        let flows_lost = flows.and_then(|(mut slicer, path, rel)| {
            let slices = slicer.finish();
            write_flow_file(&path, &rel, &slices)
                .err()
                .map(|e| (slices.len() as u64, e))
        });
        (
            Ok(FinishedFile {
                summary,
                flows_lost,
            }),
            buffers,
        )
    }

    /// Abandons a file that received no rows: removes it and hands back the
    /// row buffers.
    pub fn discard(self) -> RowBuffers {
        let PacketWriter { file, mut rows, .. } = self;
        file.discard();
        rows.clear();
        RowBuffers(rows)
    }
}

/// Where the fields of the columns constant within a flow lie in a row:
/// wire's `PacketFields` keeps them as its last bytes, `flow_hash` first,
/// and those fields and nothing else (a test checks them against the
/// `FLOW` columns below).
const FLOW_AT: usize = std::mem::offset_of!(PacketFields, flow_hash);
const FLOW_WORDS: usize = (std::mem::size_of::<PacketFields>() - FLOW_AT) / 8;

const fn field_size<T>(_: fn(&PacketFields) -> &T) -> usize {
    std::mem::size_of::<T>()
}

const _: () = {
    assert!(std::mem::size_of::<PacketFields>() == 128);
    assert!(std::mem::align_of::<PacketFields>() == 8 && FLOW_AT % 8 == 0);
    // No padding among them: their sizes add up to the bytes they span.
    let sizes = field_size(|r: &PacketFields| &r.flow_hash)
        + field_size(|r: &PacketFields| &r.worker)
        + field_size(|r: &PacketFields| &r.iface)
        + field_size(|r: &PacketFields| &r.has)
        + field_size(|r: &PacketFields| &r.vlan)
        + field_size(|r: &PacketFields| &r.ethertype)
        + field_size(|r: &PacketFields| &r.ip_hdr_len)
        + field_size(|r: &PacketFields| &r.src_port)
        + field_size(|r: &PacketFields| &r.dst_port)
        + field_size(|r: &PacketFields| &r.ip_src)
        + field_size(|r: &PacketFields| &r.ip_dst)
        + field_size(|r: &PacketFields| &r.eth_src)
        + field_size(|r: &PacketFields| &r.eth_dst)
        + field_size(|r: &PacketFields| &r.ip_version)
        + field_size(|r: &PacketFields| &r.ip_proto)
        + field_size(|r: &PacketFields| &r.ttl)
        + field_size(|r: &PacketFields| &r.dscp)
        + field_size(|r: &PacketFields| &r.tcp_hdr_len)
        + field_size(|r: &PacketFields| &r.icmp_type)
        + field_size(|r: &PacketFields| &r.icmp_code)
        + field_size(|r: &PacketFields| &r.parse_error);
    assert!(sizes == FLOW_WORDS * 8);
};

/// A row's fields of the columns constant within a flow, as words.
#[inline(always)]
fn flow_words(r: &PacketFields) -> &[u64; FLOW_WORDS] {
    // SAFETY: the row is 128 bytes, 8-byte aligned, and its last
    // FLOW_WORDS * 8 bytes, from FLOW_AT (a multiple of 8), are fields
    // whose sizes add up to them (asserted above): no padding, so every
    // byte is initialised, and any bytes are valid words. The borrow is
    // the row's.
    unsafe {
        &*std::ptr::from_ref(r)
            .cast::<u8>()
            .add(FLOW_AT)
            .cast::<[u64; FLOW_WORDS]>()
    }
}

/// Whether row `b` holds the same value as row `a`, present or not, in
/// each field of a column constant within a flow and in its [`Has`] bits:
/// nine words compared at once, where the columns' own values cost several
/// times as much on every row. Absent fields are zero (the decoder leaves
/// them so); rows that differ only behind an absent field are merely
/// encoded as two stretches.
#[inline(always)]
fn same_flow_fields(a: &PacketFields, b: &PacketFields) -> bool {
    let (a, b) = (flow_words(a), flow_words(b));
    a.iter().zip(b).fold(0, |d, (x, y)| d | (x ^ y)) == 0
}

/// Whether a row's tunnel columns come out as a frame without a tunnel's
/// (all null, depth 0), whatever lies behind the absent ones: three
/// bytes, where comparing the fields whole read forty on every row.
#[inline(always)]
fn untunnelled(t: &TunnelFields) -> bool {
    t.has == 0 && t.kind == Tunnel::None && t.depth == 0
}

/// The tunnel fields of every row of a bucket without tunnels: one address,
/// which [`Encoders::same_flow`] compares instead of the tunnel columns.
static NO_TUNNEL: TunnelFields = TunnelFields::NONE;

/// The cache lines a record may span (it is 8-byte aligned, not 64).
const RECORD_LINES: usize = std::mem::size_of::<PacketFields>().div_ceil(64) + 1;

/// Most rows in a stretch the encoders take at once: 32 KiB of rows, of
/// which the varying columns read mostly the first cache line.
const STRETCH_ROWS: usize = 64;

/// The row buffers of a finished writer, for the next one.
pub struct RowBuffers(RowBuffer);

/// Buckets by the top bits of the flow hash: grouping a row group by flow
/// then sorts and visits one cache-sized bucket at a time instead of a
/// random walk over a million rows.
const BUCKET_BITS: u32 = 4;
const FLOW_BUCKETS: usize = 1 << BUCKET_BITS;

/// The rows of the row group being gathered.
struct RowBuffer {
    order: RowOrder,
    /// For [`RowOrder::Flow`], one bucket per top-bits value of the flow
    /// hash and a last one for rows without a flow; otherwise one bucket.
    buckets: Vec<Bucket>,
    len: usize,
    /// Earliest and latest `ts_ns` of the rows gathered.
    ts_lo: i64,
    ts_hi: i64,
}

/// Rows in arrival order, with each row's sort key beside it.
struct Bucket {
    rows: Vec<PacketFields>,
    /// The rows' tunnel fields, beside them, from the first tunnelled row
    /// on (the rows before it get [`TunnelFields::NONE`]); empty while no
    /// row has a tunnel, so untunnelled traffic buffers and reads 128
    /// bytes a row, not 168.
    tunnels: Vec<TunnelFields>,
    keys: Vec<u64>,
}

impl Bucket {
    fn with_capacity(rows: usize, prefault: bool) -> Self {
        let keys: Vec<u64> = Vec::with_capacity(rows);
        if prefault {
            populate(keys.as_ptr() as usize, keys.capacity() * 8);
        }
        Bucket {
            rows: huge_vec(rows, prefault),
            tunnels: Vec::new(),
            keys,
        }
    }

    /// Keeps the tunnel fields of the row about to be pushed.
    #[cold]
    fn push_tunnel(&mut self, t: &TunnelFields) {
        self.tunnels.resize(self.rows.len(), TunnelFields::NONE);
        self.tunnels.push(*t);
    }

    /// The bucket's rows in write order, as indices into `order`.
    fn sort_into(&mut self, order: &mut Vec<u32>, scratch: &mut Vec<u64>) {
        radix_sort_keys(&mut self.keys, scratch);
        order.clear();
        order.extend(self.keys.iter().map(|k| (*k as u32) & 0x7fff_ffff));
    }
}

impl RowBuffer {
    fn new(order: RowOrder, row_group_rows: usize, prefault: bool) -> Self {
        let buckets = match order {
            RowOrder::Arrival => vec![Bucket::with_capacity(row_group_rows, prefault)],
            RowOrder::Flow => {
                // Room for a fair share and then some; skewed traffic grows
                // a bucket past it.
                let share = row_group_rows / FLOW_BUCKETS + row_group_rows / (4 * FLOW_BUCKETS);
                (0..=FLOW_BUCKETS)
                    .map(|_| Bucket::with_capacity(share, prefault))
                    .collect()
            }
        };
        RowBuffer {
            order,
            buckets,
            len: 0,
            ts_lo: i64::MAX,
            ts_hi: i64::MIN,
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn push(&mut self, r: &PacketRecord) {
        let (b, key) = match self.order {
            RowOrder::Arrival => (0, 0),
            RowOrder::Flow if r.has & Has::FLOW != 0 => {
                let b = (r.flow_hash >> (32 - BUCKET_BITS)) as usize;
                let dir = r.flow_reversed() as u64;
                (b, (r.flow_hash as u64) << 32 | dir << 31)
            }
            RowOrder::Flow => (FLOW_BUCKETS, 0),
        };
        let bucket = &mut self.buckets[b];
        bucket.keys.push(key | bucket.rows.len() as u64);
        if !bucket.tunnels.is_empty() || !untunnelled(&r.tunnel) {
            bucket.push_tunnel(&r.tunnel);
        }
        bucket.rows.push(r.fields);
        self.len += 1;
        // Kept as rows arrive: a scan at the end would read every row's
        // cache line once more.
        self.ts_lo = self.ts_lo.min(r.ts_ns);
        self.ts_hi = self.ts_hi.max(r.ts_ns);
    }

    fn ts_range(&self) -> (i64, i64) {
        (self.ts_lo, self.ts_hi)
    }

    fn clear(&mut self) {
        for b in &mut self.buckets {
            b.rows.clear();
            b.tunnels.clear();
            b.keys.clear();
        }
        self.len = 0;
        self.ts_lo = i64::MAX;
        self.ts_hi = i64::MIN;
    }
}

/// Sorts keys of the form `flow_hash << 32 | dir << 31 | row` into flow
/// order: by their upper 33 bits, rows in arrival order within each (the
/// row part rises in arrival order, so sorting whole keys is that order).
///
/// One counting pass on the 11 bits below those all the keys share (a
/// bucket's keys share the flow hash's top bits) groups them by the
/// hash's top bits, keeping arrival order; a group is then nearly always
/// one flow direction, left as it is, or one flow's two directions, split
/// in one pass. Only a group of several flows is sorted. Three radix
/// passes over every key cost three times as much.
fn radix_sort_keys(keys: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    const BITS: u32 = 11;
    const RADIX: usize = 1 << BITS;
    if keys.len() < 64 {
        keys.sort_unstable();
        return;
    }
    let first = keys[0];
    let differ = keys.iter().fold(0, |acc, &k| acc | (k ^ first));
    let shift = (64 - differ.leading_zeros()).saturating_sub(BITS).max(31);
    let digit = |k: u64| (k >> shift) as usize & (RADIX - 1);
    let mut starts = [0u32; RADIX + 1];
    for &k in keys.iter() {
        starts[digit(k) + 1] += 1;
    }
    for d in 0..RADIX {
        starts[d + 1] += starts[d];
    }
    scratch.clear();
    scratch.resize(keys.len(), 0);
    let mut at = starts;
    for &k in keys.iter() {
        let d = digit(k);
        scratch[at[d] as usize] = k;
        at[d] += 1;
    }
    std::mem::swap(keys, scratch);
    for d in 0..RADIX {
        let group = &mut keys[starts[d] as usize..starts[d + 1] as usize];
        sort_group(group, scratch);
    }
}

/// Puts a group of keys (in arrival order) into flow order.
fn sort_group(group: &mut [u64], scratch: &mut Vec<u64>) {
    let Some(&first) = group.first() else {
        return;
    };
    if group.iter().all(|&k| k >> 31 == first >> 31) {
        // One flow direction: already in arrival order.
        return;
    }
    if group.iter().all(|&k| k >> 32 == first >> 32) {
        // One flow's two directions: the low end's rows first, each
        // direction's in arrival order.
        scratch.clear();
        scratch.extend(group.iter().filter(|&&k| k & 1 << 31 != 0));
        let mut low = 0;
        for i in 0..group.len() {
            if group[i] & 1 << 31 == 0 {
                group[low] = group[i];
                low += 1;
            }
        }
        group[low..].copy_from_slice(scratch);
        return;
    }
    group.sort_unstable();
}

/// A vector of fixed initial capacity. On Linux its memory is advised to use
/// transparent huge pages: visiting rows out of order through 4 KiB pages
/// misses the TLB on almost every row.
fn huge_vec(rows: usize, prefault: bool) -> Vec<PacketFields> {
    let v: Vec<PacketFields> = Vec::with_capacity(rows);
    let bytes = v.capacity() * std::mem::size_of::<PacketFields>();
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_ptr() as usize;
        let end = start + bytes;
        let aligned = start.next_multiple_of(HUGE);
        if end > aligned + HUGE {
            let len = (end - aligned) / HUGE * HUGE;
            // SAFETY: the range lies inside the vector's own, not yet touched
            // allocation; MADV_HUGEPAGE only changes how the kernel backs it.
            unsafe {
                libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            }
        }
    }
    if prefault {
        populate(v.as_ptr() as usize, bytes);
    }
    v
}

/// Backs `bytes` of fresh allocation at `start` with memory now
/// (MADV_POPULATE_WRITE; a no-op where the kernel lacks it, before 5.14).
fn populate(start: usize, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let from = start.next_multiple_of(PAGE);
        let to = (start + bytes) / PAGE * PAGE;
        if to > from {
            // SAFETY: the range lies inside an allocation we own and have
            // not handed out; populating only backs it, contents stay.
            unsafe {
                libc::madvise(
                    from as *mut libc::c_void,
                    to - from,
                    libc::MADV_POPULATE_WRITE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}

fn mac_num(m: &[u8; 6]) -> u128 {
    let mut b = [0u8; 16];
    b[10..].copy_from_slice(m);
    u128::from_be_bytes(b)
}

/// Declares the encoders of the packet table's columns, in file order, and
/// how each takes its value: from the record's fields (`r`), then from its
/// tunnel fields (`t`).
macro_rules! encoders {
    (
        fields |$r:ident| { $( $f:ident : $fty:ty = $fspec:expr , $fget:expr , $fpresent:expr , $fflow:expr ; )* }
        tunnel |$t:ident| { $( $u:ident : $uty:ty = $uspec:expr , $uget:expr , $upresent:expr , $uflow:expr ; )* }
    ) => {
        // Every tunnel column is constant within a flow: a stretch pushes
        // them as its head's value repeated (see `push_stretch`).
        const _: () = assert!(true $( && $uflow )*);

        /// One encoder per column of the packet table.
        struct Encoders {
            $( $f: ColumnEncoder<$fty>, )*
            $( $u: ColumnEncoder<$uty>, )*
        }

        impl Encoders {
            fn new(opts: &EncodeOptions) -> Self {
                debug_assert_eq!(
                    [$( stringify!($f), )* $( stringify!($u), )*].as_slice(),
                    PACKET_COLUMNS.iter().map(|c| c.name).collect::<Vec<_>>().as_slice()
                );
                Encoders {
                    $( $f: ColumnEncoder::new($fspec, opts), )*
                    $( $u: ColumnEncoder::new($uspec, opts), )*
                }
            }

            /// Pushes a stretch of rows that agree with its first, `head`,
            /// in every column constant within a flow (and so in which
            /// columns are present): those columns get the head's value
            /// once and repeated, as do the absent varying ones (nulls);
            /// each present varying column gets its values in one loop.
            #[inline(always)]
            #[allow(unused_variables)] // columns always present ignore the row
            fn push_stretch(
                &mut self,
                head: (&PacketFields, &TunnelFields),
                stretch: &[&PacketFields],
            ) {
                let n = stretch.len() as u32;
                {
                    let ($r, $t) = head;
                    $( if $fflow || !$fpresent {
                        if $fpresent { self.$f.push($fget) } else { self.$f.push_null() }
                        self.$f.repeat(n - 1);
                    } )*
                    $( if $uflow || !$upresent {
                        if $upresent { self.$u.push($uget) } else { self.$u.push_null() }
                        self.$u.repeat(n - 1);
                    } )*
                }
                $( if !$fflow && { let $r = head.0; $fpresent } {
                    self.$f.push_each(n, stretch.iter().map(|&$r| $fget));
                } )*
            }

            /// Whether row `b` has the same fields as row `a` and the same
            /// values in every column that is constant within a flow: a
            /// stretch may go on. The fields are compared as stored
            /// ([`same_flow_fields`]); rows of a bucket without tunnels
            /// share [`NO_TUNNEL`], so the tunnel columns are compared
            /// only where a bucket has tunnels.
            #[inline(always)]
            #[allow(unused_variables)] // columns always present ignore the row
            fn same_flow(
                a: (&PacketFields, &TunnelFields),
                b: (&PacketFields, &TunnelFields),
            ) -> bool {
                same_flow_fields(a.0, b.0)
                    && (std::ptr::eq(a.1, b.1) || (true $( && (!$uflow || {
                        let pa = { let $t = a.1; $upresent };
                        let pb = { let $t = b.1; $upresent };
                        pa == pb && (!pa || { let $t = a.1; $uget } == { let $t = b.1; $uget })
                    }) )*))
            }

            /// [`same_flow`]'s part for the fields, from the columns' own
            /// values: what `same_flow_fields` must imply.
            ///
            /// [`same_flow`]: Encoders::same_flow
            #[cfg(test)]
            #[allow(unused_variables)]
            fn same_flow_columns(a: &PacketFields, b: &PacketFields) -> bool {
                a.has == b.has
                    $( && (!$fflow || {
                        let pa = { let $r = a; $fpresent };
                        let pb = { let $r = b; $fpresent };
                        pa == pb && (!pa || { let $r = a; $fget } == { let $r = b; $fget })
                    }) )*
            }

            fn end_page(&mut self, zstd: &mut zstd::bulk::Compressor<'static>) -> PqResult<()> {
                $( self.$f.end_page(zstd)?; )*
                $( self.$u.end_page(zstd)?; )*
                Ok(())
            }

            fn finish(
                &mut self,
                zstd: &mut zstd::bulk::Compressor<'static>,
            ) -> PqResult<Vec<EncodedChunk>> {
                Ok(vec![ $( self.$f.finish(zstd)?, )* $( self.$u.finish(zstd)?, )* ])
            }
        }
    };
}

impl Encoders {
    /// Ends the pages of the columns read through the page index (see
    /// [`EncodeOptions::index_page_rows`]): `flow_hash`, whose pages'
    /// bounds the index keeps, and what a reader of frames takes of each
    /// row it finds there.
    fn end_index_pages(&mut self, zstd: &mut zstd::bulk::Compressor<'static>) -> PqResult<()> {
        self.flow_hash.end_page(zstd)?;
        self.ts.end_page(zstd)?;
        self.pcap_file.end_page(zstd)?;
        self.pcap_offset.end_page(zstd)
    }
}

const fn spec(nullable: bool, mode: Mode) -> ColumnSpec {
    ColumnSpec::new(nullable, mode)
}

const fn fixed(width: usize, bloom: bool) -> ColumnSpec {
    ColumnSpec {
        bloom,
        ..ColumnSpec::fixed(true, width)
    }
}

/// Columns constant within a flow (in practice: a flow's rows in a row
/// group repeat them, and the writer extends their runs once per stretch of
/// such rows instead of once per row), and columns that vary per packet.
const FLOW: bool = true;
const EACH: bool = false;

const DICT: Mode = Mode::Dictionary;
const DELTA: Mode = Mode::Delta;

encoders! {
    fields |r| {
        ts: u64 = ColumnSpec { signed: true, ..spec(false, DELTA) }, r.ts_ns as u64, true, EACH;
        wire_len: u32 = spec(false, DICT), r.wire_len, true, EACH;
        cap_len: u32 = spec(false, DICT), r.cap_len, true, EACH;
        worker: u32 = spec(false, DICT), r.worker as u32, true, FLOW;
        iface: u32 = spec(false, DICT), r.iface as u32, true, FLOW;
        eth_src: u128 = fixed(6, false), mac_num(&r.eth_src), r.has & Has::ETH_SRC != 0, FLOW;
        eth_dst: u128 = fixed(6, false), mac_num(&r.eth_dst), r.has & Has::ETH_DST != 0, FLOW;
        vlan: u32 = spec(true, DICT), r.vlan as u32, r.has & Has::VLAN != 0, FLOW;
        ethertype: u32 = spec(true, DICT), r.ethertype as u32, r.has & Has::ETHERTYPE != 0, FLOW;
        ip_version: u32 = spec(true, DICT), r.ip_version as u32, r.has & Has::IP != 0, FLOW;
        ip_src: u128 = fixed(16, true), u128::from_be_bytes(r.ip_src), r.has & Has::IP != 0, FLOW;
        ip_dst: u128 = fixed(16, true), u128::from_be_bytes(r.ip_dst), r.has & Has::IP != 0, FLOW;
        ip_len: u32 = spec(true, DICT), r.ip_len, r.has & Has::IP != 0, EACH;
        ip_hdr_len: u32 = spec(true, DICT), r.ip_hdr_len as u32, r.has & Has::IP != 0, FLOW;
        ip_proto: u32 = spec(true, DICT), r.ip_proto as u32, r.has & Has::IP != 0, FLOW;
        ttl: u32 = spec(true, DICT), r.ttl as u32, r.has & Has::IP != 0, FLOW;
        dscp: u32 = spec(true, DICT), r.dscp as u32, r.has & Has::IP != 0, FLOW;
        ip_id: u32 = spec(true, DELTA), r.ip_id, r.has & Has::IP_ID != 0, EACH;
        frag: u32 = spec(true, DICT), r.frag as u32, r.has & Has::FRAG != 0, EACH;
        src_port: u32 = spec(true, DICT), r.src_port as u32, r.has & Has::PORTS != 0, FLOW;
        dst_port: u32 = spec(true, DICT), r.dst_port as u32, r.has & Has::PORTS != 0, FLOW;
        tcp_flags: u32 = spec(true, DICT), r.tcp_flags as u32, r.has & Has::TCP != 0, EACH;
        tcp_seq: u32 = spec(true, DELTA), r.tcp_seq, r.has & Has::TCP != 0, EACH;
        tcp_ack: u32 = spec(true, DELTA), r.tcp_ack, r.has & Has::TCP != 0, EACH;
        tcp_win: u32 = spec(true, DICT), r.tcp_win as u32, r.has & Has::TCP != 0, EACH;
        tcp_hdr_len: u32 = spec(true, DICT), r.tcp_hdr_len as u32, r.has & Has::TCP != 0, FLOW;
        udp_len: u32 = spec(true, DICT), r.udp_len as u32, r.has & Has::UDP != 0, EACH;
        icmp_type: u32 = spec(true, DICT), r.icmp_type as u32, r.has & Has::ICMP != 0, FLOW;
        icmp_code: u32 = spec(true, DICT), r.icmp_code as u32, r.has & Has::ICMP != 0, FLOW;
        payload_len: u32 = spec(true, DICT), r.payload_len, r.has & Has::PAYLOAD != 0, EACH;
        flow_hash: u32 = ColumnSpec { page_index: true, ..spec(true, DICT) },
            r.flow_hash, r.has & Has::FLOW != 0, FLOW;
        pcap_file: u32 = spec(true, DICT), r.pcap_file, r.has & Has::PCAP != 0, EACH;
        pcap_offset: u64 = spec(true, DELTA), r.pcap_offset, r.has & Has::PCAP != 0, EACH;
        parse_error: &'static str = ColumnSpec::names(true),
            r.parse_error.as_str(), r.parse_error != ParseError::None, FLOW;
    }
    tunnel |t| {
        outer_src: u128 = fixed(16, true),
            u128::from_be_bytes(t.outer_src), t.has & TunnelHas::OUTER_IP != 0, FLOW;
        outer_dst: u128 = fixed(16, true),
            u128::from_be_bytes(t.outer_dst), t.has & TunnelHas::OUTER_IP != 0, FLOW;
        tunnel: &'static str = ColumnSpec::names(true),
            t.kind.as_str(), t.kind != Tunnel::None, FLOW;
        tunnel_id: u32 = spec(true, DICT), t.id, t.has & TunnelHas::ID != 0, FLOW;
        tunnel_depth: u32 = spec(false, DICT), t.depth as u32, true, FLOW;
    }
}

/// The summary of a finished packet file, from its footer alone (what
/// `weir recover` lists when no manifest says it).
pub fn summarize_packet_file(root: &Path, rel: &str) -> Result<PacketFileSummary, StoreError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::statistics::Statistics;
    let path = root.join(rel);
    let file = File::open(&path).map_err(|e| StoreError::io(&path, e))?;
    let bytes = file.metadata().map_err(|e| StoreError::io(&path, e))?.len();
    let reader = SerializedFileReader::new(file).map_err(|e| StoreError::parquet(&path, e))?;
    let meta = reader.metadata();
    let ts_col = meta
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|c| c.name() == "ts");
    let (mut lo, mut hi) = (None::<i64>, None::<i64>);
    for rg in meta.row_groups() {
        if let Some(Statistics::Int64(s)) = ts_col.and_then(|i| rg.column(i).statistics()) {
            if let Some(&m) = s.min_opt() {
                lo = Some(lo.map_or(m, |x| x.min(m)));
            }
            if let Some(&m) = s.max_opt() {
                hi = Some(hi.map_or(m, |x| x.max(m)));
            }
        }
    }
    Ok(PacketFileSummary {
        path: rel.to_string(),
        rows: meta.file_metadata().num_rows().max(0) as u64,
        bytes,
        row_groups: meta.num_row_groups() as u32,
        ts_min: lo,
        ts_max: hi,
        digest: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sort gives what sorting the whole keys does, for keys as the
    /// row buffer makes them: one flow direction, one flow both ways,
    /// many flows, flows whose hashes share their top bits, a bucket's
    /// shared top bits, and keys without a flow.
    #[test]
    fn keys_sort_into_flow_order() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let hashes: Vec<Vec<u32>> = vec![
            vec![0xa123_4567],
            vec![0xa123_4567, 0xa123_4567],
            (0..1000).map(|_| next() as u32).collect(),
            (0..50)
                .map(|i| 0x5000_0000 | (next() as u32 & 0x0fff_ffff) | i)
                .collect(),
            (0..8).map(|i| 0x7fff_0000 | i).collect(),
            vec![0],
        ];
        let (mut keys, mut scratch) = (Vec::new(), Vec::new());
        for flows in &hashes {
            for rows in [10usize, 63, 64, 65, 5000, 40_000] {
                keys.clear();
                for row in 0..rows as u64 {
                    let h = flows[next() as usize % flows.len()] as u64;
                    let dir = if flows.len() > 1 { next() & 1 } else { 0 };
                    keys.push(h << 32 | dir << 31 | row);
                }
                let mut want = keys.clone();
                want.sort_unstable();
                radix_sort_keys(&mut keys, &mut scratch);
                assert_eq!(keys, want, "{} flows, {rows} rows", flows.len());
            }
        }
    }

    /// `same_flow_fields` names exactly the fields of the columns constant
    /// within a flow: a row changed in one field alone (every field
    /// present) agrees with the original by it exactly when it does by the
    /// columns' own values.
    #[test]
    fn same_flow_fields_are_the_flow_columns() {
        let mut a = PacketFields {
            ts_ns: 1,
            wire_len: 2,
            cap_len: 3,
            worker: 4,
            iface: 5,
            has: u16::MAX,
            eth_src: [6; 6],
            eth_dst: [7; 6],
            vlan: 8,
            ethertype: 9,
            ip_version: 4,
            ip_proto: 6,
            ttl: 10,
            dscp: 11,
            ip_src: [12; 16],
            ip_dst: [13; 16],
            ip_len: 14,
            ip_hdr_len: 15,
            frag: 16,
            ip_id: 17,
            src_port: 18,
            dst_port: 19,
            tcp_flags: 20,
            tcp_win: 21,
            tcp_seq: 22,
            tcp_ack: 23,
            tcp_hdr_len: 24,
            icmp_type: 25,
            icmp_code: 26,
            parse_error: ParseError::TruncatedTcp,
            udp_len: 27,
            payload_len: 28,
            flow_hash: 29,
            pcap_file: 30,
            pcap_offset: 31,
        };
        let changes: [fn(&mut PacketFields); 36] = [
            |r| r.ts_ns += 1,
            |r| r.wire_len += 1,
            |r| r.cap_len += 1,
            |r| r.worker += 1,
            |r| r.iface += 1,
            |r| r.has &= !Has::VLAN,
            |r| r.eth_src[5] += 1,
            |r| r.eth_dst[0] += 1,
            |r| r.vlan += 1,
            |r| r.ethertype += 1,
            |r| r.ip_version = 6,
            |r| r.ip_proto += 1,
            |r| r.ttl += 1,
            |r| r.dscp += 1,
            |r| r.ip_src[15] += 1,
            |r| r.ip_dst[0] += 1,
            |r| r.ip_len += 1,
            |r| r.ip_hdr_len += 1,
            |r| r.frag += 1,
            |r| r.ip_id += 1,
            |r| r.src_port += 1,
            |r| r.dst_port += 1,
            |r| r.tcp_flags += 1,
            |r| r.tcp_win += 1,
            |r| r.tcp_seq += 1,
            |r| r.tcp_ack += 1,
            |r| r.tcp_hdr_len += 1,
            |r| r.icmp_type += 1,
            |r| r.icmp_code += 1,
            |r| r.parse_error = ParseError::BadTcpHeader,
            |r| r.udp_len += 1,
            |r| r.payload_len += 1,
            |r| r.flow_hash += 1,
            |r| r.pcap_file += 1,
            |r| r.pcap_offset += 1,
            |r| r.parse_error = ParseError::None,
        ];
        for (i, change) in changes.iter().enumerate() {
            let mut b = a;
            change(&mut b);
            assert_ne!(a, b, "change {i} changes nothing");
            assert_eq!(
                same_flow_fields(&a, &b),
                Encoders::same_flow_columns(&a, &b),
                "change {i}"
            );
        }
        // And the same where a field is absent: rows that differ behind it
        // agree by the columns, and are only split by the fields.
        a.has &= !Has::VLAN;
        let mut b = a;
        b.vlan += 1;
        assert!(Encoders::same_flow_columns(&a, &b));
        assert!(!same_flow_fields(&a, &b));
    }
}
