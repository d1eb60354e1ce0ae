//! Writing the packet table: `packets/*.parquet`.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::{ArrowSchemaConverter, add_encoded_arrow_schema_to_metadata};
use parquet::basic::{Compression, ZstdLevel};
use parquet::column::page::PageWriter;
use parquet::column::writer::ColumnCloseResult;
use parquet::errors::Result as PqResult;
use parquet::file::metadata::{ColumnChunkMetaData, KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::schema::types::SchemaDescriptor;
use wire::{Has, PacketRecord, ParseError};

use crate::encode::{EncodeOptions, Levels, Prefer, Values, encode_chunk};
use crate::error::StoreError;
use crate::schema::{PACKET_COLUMNS, PACKET_SCHEMA_VERSION, PARSE_ERROR_BIT, packet_schema};

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
}

impl Default for PacketWriterOptions {
    fn default() -> Self {
        PacketWriterOptions {
            row_group_rows: 1 << 20,
            order: RowOrder::Flow,
            encode: EncodeOptions::default(),
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
}

/// Writes packet records to one Parquet file, which appears under its final
/// name only when complete.
pub struct PacketWriter {
    final_path: PathBuf,
    part_path: PathBuf,
    writer: SerializedFileWriter<BufWriter<File>>,
    schema: Arc<SchemaDescriptor>,
    opts: PacketWriterOptions,
    zstd: zstd::bulk::Compressor<'static>,
    rows: Vec<PacketRecord>,
    cols: Columns,
    summary: PacketFileSummary,
}

impl PacketWriter {
    /// Starts `path` (written as a hidden `.NAME.part` beside it first).
    /// `relative` is the path recorded in the summary.
    pub fn create(
        path: &Path,
        relative: &str,
        opts: PacketWriterOptions,
    ) -> Result<Self, StoreError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let part_path = path.with_file_name(format!(".{name}.part"));
        let file = File::create(&part_path).map_err(|e| StoreError::io(&part_path, e))?;
        let arrow = packet_schema();
        let schema = Arc::new(
            ArrowSchemaConverter::new()
                .convert(&arrow)
                .map_err(|e| StoreError::parquet(path, e))?,
        );
        let mut props = WriterProperties::builder()
            .set_created_by(format!("weir version {}", env!("CARGO_PKG_VERSION")))
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_offset_index_disabled(true)
            .set_key_value_metadata(Some(vec![
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
        let mut props = props.build();
        add_encoded_arrow_schema_to_metadata(&arrow, &mut props);
        let writer = SerializedFileWriter::new(
            BufWriter::with_capacity(1 << 20, file),
            schema.root_schema_ptr(),
            Arc::new(props),
        )
        .map_err(|e| StoreError::parquet(&part_path, e))?;
        let zstd = zstd::bulk::Compressor::new(opts.encode.zstd_level)
            .map_err(|e| StoreError::io(&part_path, e))?;
        Ok(PacketWriter {
            final_path: path.to_path_buf(),
            part_path,
            writer,
            schema,
            opts,
            zstd,
            rows: Vec::with_capacity(opts.row_group_rows.min(1 << 20)),
            cols: Columns::default(),
            summary: PacketFileSummary {
                path: relative.to_string(),
                ..Default::default()
            },
        })
    }

    /// Rows written or buffered so far.
    pub fn rows(&self) -> u64 {
        self.summary.rows + self.rows.len() as u64
    }

    /// Adds one record; writes a row group when enough have gathered.
    #[inline]
    pub fn push(&mut self, rec: &PacketRecord) -> Result<(), StoreError> {
        self.rows.push(*rec);
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
        let order = sort_order(&self.rows, self.opts.order);
        self.cols.extract(&self.rows, &order);
        let n = self.rows.len();
        let (lo, hi) = self.rows.iter().fold((i64::MAX, i64::MIN), |(lo, hi), r| {
            (lo.min(r.ts_ns), hi.max(r.ts_ns))
        });
        self.summary.ts_min = Some(self.summary.ts_min.map_or(lo, |m| m.min(lo)));
        self.summary.ts_max = Some(self.summary.ts_max.map_or(hi, |m| m.max(hi)));
        self.write_columns(n)
            .map_err(|e| StoreError::parquet(&self.part_path, e))?;
        self.summary.rows += n as u64;
        self.summary.row_groups += 1;
        self.rows.clear();
        Ok(())
    }

    fn write_columns(&mut self, n: usize) -> PqResult<()> {
        let mut rg = self.writer.next_row_group()?;
        let c = &self.cols;
        let lv = |bit| Some(Levels { has: &c.has, bit });
        let enc = &self.opts.encode;
        let zstd = &mut self.zstd;
        for (i, col) in PACKET_COLUMNS.iter().enumerate() {
            let levels = col.presence.and_then(lv);
            let (values, prefer, bloom) = match col.name {
                "ts" => (
                    Values::Int64 {
                        vals: &c.ts,
                        signed: true,
                    },
                    Prefer::Delta,
                    false,
                ),
                "wire_len" => (u32v(&c.wire_len), Prefer::Dictionary, false),
                "cap_len" => (u32v(&c.cap_len), Prefer::Dictionary, false),
                "worker" => (u32v(&c.worker), Prefer::Dictionary, false),
                "iface" => (u32v(&c.iface), Prefer::Dictionary, false),
                "eth_src" => (
                    Values::Fixed {
                        vals: &c.eth_src,
                        width: 6,
                    },
                    Prefer::Dictionary,
                    false,
                ),
                "eth_dst" => (
                    Values::Fixed {
                        vals: &c.eth_dst,
                        width: 6,
                    },
                    Prefer::Dictionary,
                    false,
                ),
                "vlan" => (u32v(&c.vlan), Prefer::Dictionary, false),
                "ethertype" => (u32v(&c.ethertype), Prefer::Dictionary, false),
                "ip_version" => (u32v(&c.ip_version), Prefer::Dictionary, false),
                "ip_src" => (
                    Values::Fixed {
                        vals: &c.ip_src,
                        width: 16,
                    },
                    Prefer::Dictionary,
                    true,
                ),
                "ip_dst" => (
                    Values::Fixed {
                        vals: &c.ip_dst,
                        width: 16,
                    },
                    Prefer::Dictionary,
                    true,
                ),
                "ip_len" => (u32v(&c.ip_len), Prefer::Dictionary, false),
                "ip_hdr_len" => (u32v(&c.ip_hdr_len), Prefer::Dictionary, false),
                "ip_proto" => (u32v(&c.ip_proto), Prefer::Dictionary, false),
                "ttl" => (u32v(&c.ttl), Prefer::Dictionary, false),
                "dscp" => (u32v(&c.dscp), Prefer::Dictionary, false),
                "ip_id" => (u32v(&c.ip_id), Prefer::Delta, false),
                "frag" => (u32v(&c.frag), Prefer::Dictionary, false),
                "src_port" => (u32v(&c.src_port), Prefer::Dictionary, false),
                "dst_port" => (u32v(&c.dst_port), Prefer::Dictionary, false),
                "tcp_flags" => (u32v(&c.tcp_flags), Prefer::Dictionary, false),
                "tcp_seq" => (u32v(&c.tcp_seq), Prefer::Delta, false),
                "tcp_ack" => (u32v(&c.tcp_ack), Prefer::Delta, false),
                "tcp_win" => (u32v(&c.tcp_win), Prefer::Dictionary, false),
                "tcp_hdr_len" => (u32v(&c.tcp_hdr_len), Prefer::Dictionary, false),
                "udp_len" => (u32v(&c.udp_len), Prefer::Dictionary, false),
                "icmp_type" => (u32v(&c.icmp_type), Prefer::Dictionary, false),
                "icmp_code" => (u32v(&c.icmp_code), Prefer::Dictionary, false),
                "payload_len" => (u32v(&c.payload_len), Prefer::Dictionary, false),
                "flow_hash" => (u32v(&c.flow_hash), Prefer::Dictionary, false),
                "pcap_file" => (u32v(&c.pcap_file), Prefer::Dictionary, false),
                "pcap_offset" => (
                    Values::Int64 {
                        vals: &c.pcap_offset,
                        signed: false,
                    },
                    Prefer::Delta,
                    false,
                ),
                "parse_error" => (
                    Values::Names {
                        codes: &c.parse_error,
                        name: |code| ParseError::from_u8(code).unwrap_or_default().as_str(),
                    },
                    Prefer::Dictionary,
                    false,
                ),
                other => unreachable!("column {other} has no encoder"),
            };
            let chunk = encode_chunk(n, levels, values, prefer, bloom, enc, zstd)?;
            let descr = self.schema.column(i);
            let mut sink = TrackedWrite::new(Vec::new());
            let mut dict_offset = None;
            let mut data_offset = None;
            let mut uncompressed = 0u64;
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
                }
            }
            let bytes_written = sink.bytes_written() as u64;
            let buf = Bytes::from(sink.into_inner()?);
            let metadata = ColumnChunkMetaData::builder(descr)
                .set_compression(Compression::ZSTD(
                    ZstdLevel::try_new(enc.zstd_level).unwrap_or_default(),
                ))
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
                    column_index: None,
                    offset_index: None,
                },
            )?;
        }
        rg.close()?;
        Ok(())
    }

    /// Writes what is buffered, the footer, syncs, and renames the file into
    /// place. Returns what the file holds.
    pub fn finish(mut self) -> Result<PacketFileSummary, StoreError> {
        self.flush_row_group()?;
        let part = self.part_path.clone();
        let buffered = self
            .writer
            .into_inner()
            .map_err(|e| StoreError::parquet(&part, e))?;
        let file = buffered
            .into_inner()
            .map_err(|e| StoreError::io(&part, e.into_error()))?;
        file.sync_data().map_err(|e| StoreError::io(&part, e))?;
        self.summary.bytes = file.metadata().map_err(|e| StoreError::io(&part, e))?.len();
        drop(file);
        std::fs::rename(&part, &self.final_path)
            .map_err(|e| StoreError::io(&self.final_path, e))?;
        Ok(self.summary)
    }
}

fn u32v(vals: &[u32]) -> Values<'_> {
    Values::Int32 {
        vals,
        signed: false,
    }
}

/// The order in which to write the buffered rows.
fn sort_order(rows: &[PacketRecord], order: RowOrder) -> Vec<u32> {
    match order {
        RowOrder::Arrival => (0..rows.len() as u32).collect(),
        RowOrder::Flow => {
            let mut keys: Vec<u64> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let flow = if r.has & Has::FLOW != 0 {
                        r.flow_hash as u64
                    } else {
                        u32::MAX as u64
                    };
                    let dir = r.flow_reversed() as u64;
                    (flow << 32) | (dir << 31) | i as u64
                })
                .collect();
            keys.sort_unstable();
            keys.iter().map(|k| (*k as u32) & 0x7fff_ffff).collect()
        }
    }
}

/// The row group as columns: per row the presence flags, per column the
/// values of the rows where it is present.
#[derive(Default)]
struct Columns {
    has: Vec<u32>,
    ts: Vec<u64>,
    wire_len: Vec<u32>,
    cap_len: Vec<u32>,
    worker: Vec<u32>,
    iface: Vec<u32>,
    eth_src: Vec<u128>,
    eth_dst: Vec<u128>,
    vlan: Vec<u32>,
    ethertype: Vec<u32>,
    ip_version: Vec<u32>,
    ip_src: Vec<u128>,
    ip_dst: Vec<u128>,
    ip_len: Vec<u32>,
    ip_hdr_len: Vec<u32>,
    ip_proto: Vec<u32>,
    ttl: Vec<u32>,
    dscp: Vec<u32>,
    ip_id: Vec<u32>,
    frag: Vec<u32>,
    src_port: Vec<u32>,
    dst_port: Vec<u32>,
    tcp_flags: Vec<u32>,
    tcp_seq: Vec<u32>,
    tcp_ack: Vec<u32>,
    tcp_win: Vec<u32>,
    tcp_hdr_len: Vec<u32>,
    udp_len: Vec<u32>,
    icmp_type: Vec<u32>,
    icmp_code: Vec<u32>,
    payload_len: Vec<u32>,
    flow_hash: Vec<u32>,
    pcap_file: Vec<u32>,
    pcap_offset: Vec<u64>,
    parse_error: Vec<u8>,
}

fn mac_num(m: &[u8; 6]) -> u128 {
    let mut b = [0u8; 16];
    b[10..].copy_from_slice(m);
    u128::from_be_bytes(b)
}

impl Columns {
    fn clear(&mut self) {
        macro_rules! clear { ($($f:ident),*) => { $( self.$f.clear(); )* } }
        clear!(
            has,
            ts,
            wire_len,
            cap_len,
            worker,
            iface,
            eth_src,
            eth_dst,
            vlan,
            ethertype,
            ip_version,
            ip_src,
            ip_dst,
            ip_len,
            ip_hdr_len,
            ip_proto,
            ttl,
            dscp,
            ip_id,
            frag,
            src_port,
            dst_port,
            tcp_flags,
            tcp_seq,
            tcp_ack,
            tcp_win,
            tcp_hdr_len,
            udp_len,
            icmp_type,
            icmp_code,
            payload_len,
            flow_hash,
            pcap_file,
            pcap_offset,
            parse_error
        );
    }

    /// One pass over the rows in `order`, filling every column.
    fn extract(&mut self, rows: &[PacketRecord], order: &[u32]) {
        self.clear();
        for &i in order {
            let r = &rows[i as usize];
            let mut has = r.has;
            self.ts.push(r.ts_ns as u64);
            self.wire_len.push(r.wire_len);
            self.cap_len.push(r.cap_len);
            self.worker.push(r.worker as u32);
            self.iface.push(r.iface as u32);
            if has & Has::ETH_SRC != 0 {
                self.eth_src.push(mac_num(&r.eth_src));
            }
            if has & Has::ETH_DST != 0 {
                self.eth_dst.push(mac_num(&r.eth_dst));
            }
            if has & Has::VLAN != 0 {
                self.vlan.push(r.vlan as u32);
            }
            if has & Has::ETHERTYPE != 0 {
                self.ethertype.push(r.ethertype as u32);
            }
            if has & Has::IP != 0 {
                self.ip_version.push(r.ip_version as u32);
                self.ip_src.push(u128::from_be_bytes(r.ip_src));
                self.ip_dst.push(u128::from_be_bytes(r.ip_dst));
                self.ip_len.push(r.ip_len);
                self.ip_hdr_len.push(r.ip_hdr_len as u32);
                self.ip_proto.push(r.ip_proto as u32);
                self.ttl.push(r.ttl as u32);
                self.dscp.push(r.dscp as u32);
            }
            if has & Has::IP_ID != 0 {
                self.ip_id.push(r.ip_id);
            }
            if has & Has::FRAG != 0 {
                self.frag.push(r.frag as u32);
            }
            if has & Has::PORTS != 0 {
                self.src_port.push(r.src_port as u32);
                self.dst_port.push(r.dst_port as u32);
            }
            if has & Has::TCP != 0 {
                self.tcp_flags.push(r.tcp_flags as u32);
                self.tcp_seq.push(r.tcp_seq);
                self.tcp_ack.push(r.tcp_ack);
                self.tcp_win.push(r.tcp_win as u32);
                self.tcp_hdr_len.push(r.tcp_hdr_len as u32);
            }
            if has & Has::UDP != 0 {
                self.udp_len.push(r.udp_len as u32);
            }
            if has & Has::ICMP != 0 {
                self.icmp_type.push(r.icmp_type as u32);
                self.icmp_code.push(r.icmp_code as u32);
            }
            if has & Has::PAYLOAD != 0 {
                self.payload_len.push(r.payload_len);
            }
            if has & Has::FLOW != 0 {
                self.flow_hash.push(r.flow_hash);
            }
            if has & Has::PCAP != 0 {
                self.pcap_file.push(r.pcap_file);
                self.pcap_offset.push(r.pcap_offset);
            }
            if r.parse_error != ParseError::None {
                self.parse_error.push(r.parse_error as u8);
                has |= PARSE_ERROR_BIT;
            }
            self.has.push(has);
        }
    }
}
