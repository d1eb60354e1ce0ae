//! Writing the packet table: `packets/*.parquet`.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::errors::Result as PqResult;
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::WriterProperties;
use wire::{PacketFields, PacketRecord};

use crate::error::StoreError;
use crate::flows::{FLOWS_DIR, FlowSlicer, flows_path_for, write_flow_file};
use crate::schema::{PACKET_COLUMNS, PACKET_SCHEMA_VERSION, packet_schema};
use pqcodec::encode::file::EncodedFile;
use pqcodec::encode::{EncodeOptions, EncodedChunk};

mod columns;
mod rows;

use columns::Encoders;
pub use rows::RowBuffers;
use rows::{NO_TUNNEL, RECORD_LINES, RowBuffer, STRETCH_ROWS};
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
    use super::columns::Encoders;
    use super::rows::{radix_sort_keys, same_flow_fields};
    use super::*;
    use wire::{Has, ParseError};

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
