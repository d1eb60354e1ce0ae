//! Reading packet records back, through the standard Arrow reader (the
//! same path any other Parquet client takes).

use std::fs::File;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{TimestampNanosecondType, UInt8Type, UInt16Type, UInt32Type, UInt64Type};
use arrow_array::{Array, RecordBatch};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::file::reader::ChunkReader;
use wire::{Has, PacketRecord, ParseError, Tunnel, TunnelHas};

use crate::error::StoreError;

/// The Arrow schema of a Parquet file of any table, from its footer.
pub fn file_schema(path: &Path) -> Result<arrow_schema::SchemaRef, StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io(path, e))?;
    let b =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| StoreError::parquet(path, e))?;
    Ok(b.schema().clone())
}

/// Rows per batch of [`read_batches`].
pub(crate) const BATCH_ROWS: usize = 64 * 1024;

/// Every table's reader through arrow-rs: the batches of the Parquet
/// file `file` (`path` names it in errors), 64 Ki rows each, of the
/// columns `columns` only (all of them when it is empty) and the row
/// groups `row_groups` only (all when `None`); and the file's row count.
pub fn read_batches<R: ChunkReader + 'static>(
    path: &Path,
    file: R,
    columns: &[&str],
    row_groups: Option<Vec<usize>>,
) -> Result<(ParquetRecordBatchReader, u64), StoreError> {
    let mut b =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| StoreError::parquet(path, e))?;
    let rows = b.metadata().file_metadata().num_rows().max(0) as u64;
    if !columns.is_empty() {
        let mask = ProjectionMask::columns(b.parquet_schema(), columns.iter().copied());
        b = b.with_projection(mask);
    }
    if let Some(groups) = row_groups {
        b = b.with_row_groups(groups);
    }
    let reader = b
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| StoreError::parquet(path, e))?;
    Ok((reader, rows))
}

/// Every record of one packet file, in file order.
pub fn read_packet_file(path: &Path) -> Result<Vec<PacketRecord>, StoreError> {
    let mut out = Vec::new();
    append_file_records(path, None, &mut out)?;
    Ok(out)
}

/// The records of the packet file at `path` (of its row groups
/// `row_groups`, or all), appended to `out`.
fn append_file_records(
    path: &Path,
    row_groups: Option<Vec<usize>>,
    out: &mut Vec<PacketRecord>,
) -> Result<(), StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io(path, e))?;
    append_records_of(path, file, row_groups, out)
}

/// The records of the packet file `file` (of its row groups `row_groups`,
/// or all), appended to `out`; `path` names it in errors.
pub fn append_records_of<R: ChunkReader + 'static>(
    path: &Path,
    file: R,
    row_groups: Option<Vec<usize>>,
    out: &mut Vec<PacketRecord>,
) -> Result<(), StoreError> {
    let (reader, _) = read_batches(path, file, &[], row_groups)?;
    let invalid = |message: String| StoreError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    for batch in reader {
        let batch = batch.map_err(|e| invalid(e.to_string()))?;
        append_records(&batch, out).map_err(invalid)?;
    }
    Ok(())
}

/// Where each record of one packet file points in the pcap files:
/// (pcap file id, record offset, interface) of every record that has a
/// frame there. Reads those three columns only.
pub fn read_pcap_pointers(path: &Path) -> Result<Vec<(u32, u64, u16)>, StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io(path, e))?;
    pcap_pointers(path, file)
}

/// [`read_pcap_pointers`] of a file read whole from elsewhere (`name`,
/// for messages: its URL).
pub fn pcap_pointers_in(
    name: &str,
    data: bytes::Bytes,
) -> Result<Vec<(u32, u64, u16)>, StoreError> {
    pcap_pointers(Path::new(name), data)
}

fn pcap_pointers<R: ChunkReader + 'static>(
    path: &Path,
    file: R,
) -> Result<Vec<(u32, u64, u16)>, StoreError> {
    let want = ["pcap_file", "pcap_offset", "iface"];
    let (reader, _) = read_batches(path, file, &want, None)?;
    let invalid = |message: String| StoreError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| invalid(e.to_string()))?;
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| invalid(format!("column {name} is missing")))
        };
        let file = col("pcap_file")?
            .as_primitive_opt::<UInt32Type>()
            .ok_or_else(|| invalid("pcap_file type".into()))?;
        let offset = col("pcap_offset")?
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| invalid("pcap_offset type".into()))?;
        let iface = col("iface")?
            .as_primitive_opt::<UInt16Type>()
            .ok_or_else(|| invalid("iface type".into()))?;
        for i in 0..batch.num_rows() {
            if file.is_valid(i) && offset.is_valid(i) {
                out.push((file.value(i), offset.value(i), iface.value(i)));
            }
        }
    }
    Ok(out)
}

/// Converts a batch of the packet table back into records.
pub fn append_records(batch: &RecordBatch, out: &mut Vec<PacketRecord>) -> Result<(), String> {
    fill_records(batch, out, false)
}

/// [`append_records`] of a batch that holds only some of the packet
/// columns (a projection): the others are left at their defaults, and
/// their [`Has`] bits unset. `ts` is always needed.
pub fn append_partial_records(
    batch: &RecordBatch,
    out: &mut Vec<PacketRecord>,
) -> Result<(), String> {
    fill_records(batch, out, true)
}

fn fill_records(
    batch: &RecordBatch,
    out: &mut Vec<PacketRecord>,
    partial: bool,
) -> Result<(), String> {
    let col = |name: &str| {
        batch
            .column_by_name(name)
            .ok_or_else(|| format!("column {name} is missing"))
    };
    // A column a projection left out is skipped; in a whole batch it is
    // an error.
    let opt_col = |name: &str| match batch.column_by_name(name) {
        Some(a) => Ok(Some(a)),
        None if partial => Ok(None),
        None => Err(format!("column {name} is missing")),
    };
    let n = batch.num_rows();
    let base = out.len();
    out.resize(base + n, PacketRecord::default());
    let rows = &mut out[base..];

    let ts = col("ts")?
        .as_primitive_opt::<TimestampNanosecondType>()
        .ok_or("ts type")?;
    for (r, v) in rows.iter_mut().zip(ts.values()) {
        r.ts_ns = *v;
    }
    // One column's valid values into the rows, its Has bit set; a column
    // a projection left out is skipped.
    macro_rules! column {
        ($name:literal, $cast:ident $(::<$ty:ty>)?, $bit:expr, |$r:ident, $v:ident| $set:expr) => {{
            if let Some(a) = opt_col($name)? {
                let a = a
                    .$cast$(::<$ty>)?()
                    .ok_or(concat!($name, " has the wrong type"))?;
                for (i, $r) in rows.iter_mut().enumerate() {
                    if a.is_valid(i) {
                        let $v = a.value(i);
                        $set;
                        $r.has |= $bit;
                    }
                }
            }
        }};
    }
    macro_rules! prim {
        ($name:literal, $ty:ty, $bit:expr, |$r:ident, $v:ident| $set:expr) => {
            column!($name, as_primitive_opt::<$ty>, $bit, |$r, $v| $set)
        };
    }
    macro_rules! fixed {
        ($name:literal, $bit:expr, |$r:ident, $v:ident| $set:expr) => {
            column!($name, as_fixed_size_binary_opt, $bit, |$r, $v| $set)
        };
    }
    prim!("wire_len", UInt32Type, 0, |r, v| r.wire_len = v);
    prim!("cap_len", UInt32Type, 0, |r, v| r.cap_len = v);
    prim!("worker", UInt16Type, 0, |r, v| r.worker = v);
    prim!("iface", UInt16Type, 0, |r, v| r.iface = v);
    fixed!("eth_src", Has::ETH_SRC, |r, v| r.eth_src.copy_from_slice(v));
    fixed!("eth_dst", Has::ETH_DST, |r, v| r.eth_dst.copy_from_slice(v));
    prim!("vlan", UInt16Type, Has::VLAN, |r, v| r.vlan = v);
    prim!("ethertype", UInt16Type, Has::ETHERTYPE, |r, v| r
        .ethertype =
        v);
    prim!("ip_version", UInt8Type, Has::IP, |r, v| r.ip_version = v);
    fixed!("ip_src", Has::IP, |r, v| r.ip_src.copy_from_slice(v));
    fixed!("ip_dst", Has::IP, |r, v| r.ip_dst.copy_from_slice(v));
    prim!("ip_len", UInt32Type, Has::IP, |r, v| r.ip_len = v);
    prim!("ip_hdr_len", UInt16Type, Has::IP, |r, v| r.ip_hdr_len = v);
    prim!("ip_proto", UInt8Type, Has::IP, |r, v| r.ip_proto = v);
    prim!("ttl", UInt8Type, Has::IP, |r, v| r.ttl = v);
    prim!("dscp", UInt8Type, Has::IP, |r, v| r.dscp = v);
    prim!("ip_id", UInt32Type, Has::IP_ID, |r, v| r.ip_id = v);
    prim!("frag", UInt16Type, Has::FRAG, |r, v| r.frag = v);
    prim!("src_port", UInt16Type, Has::PORTS, |r, v| r.src_port = v);
    prim!("dst_port", UInt16Type, Has::PORTS, |r, v| r.dst_port = v);
    prim!("tcp_flags", UInt16Type, Has::TCP, |r, v| r.tcp_flags = v);
    prim!("tcp_seq", UInt32Type, Has::TCP, |r, v| r.tcp_seq = v);
    prim!("tcp_ack", UInt32Type, Has::TCP, |r, v| r.tcp_ack = v);
    prim!("tcp_win", UInt16Type, Has::TCP, |r, v| r.tcp_win = v);
    prim!("tcp_hdr_len", UInt8Type, Has::TCP, |r, v| r.tcp_hdr_len = v);
    prim!("udp_len", UInt16Type, Has::UDP, |r, v| r.udp_len = v);
    prim!("icmp_type", UInt8Type, Has::ICMP, |r, v| r.icmp_type = v);
    prim!("icmp_code", UInt8Type, Has::ICMP, |r, v| r.icmp_code = v);
    prim!("payload_len", UInt32Type, Has::PAYLOAD, |r, v| r
        .payload_len =
        v);
    prim!("flow_hash", UInt32Type, Has::FLOW, |r, v| r.flow_hash = v);
    prim!("pcap_file", UInt32Type, Has::PCAP, |r, v| r.pcap_file = v);
    prim!("pcap_offset", UInt64Type, Has::PCAP, |r, v| r.pcap_offset =
        v);
    if let Some(pe) = opt_col("parse_error")? {
        let pe = pe
            .as_string_opt::<i32>()
            .ok_or("parse_error has the wrong type")?;
        for (i, r) in rows.iter_mut().enumerate() {
            if pe.is_valid(i) {
                r.parse_error = ParseError::from_name(pe.value(i))
                    .ok_or_else(|| format!("unknown parse_error {:?}", pe.value(i)))?;
            }
        }
    }
    // Files of packet schema 1 have no tunnel columns: no tunnels then.
    if batch.column_by_name("tunnel_depth").is_none() {
        return Ok(());
    }
    for (name, is_src) in [("outer_src", true), ("outer_dst", false)] {
        let a = col(name)?
            .as_fixed_size_binary_opt()
            .ok_or_else(|| format!("{name} has the wrong type"))?;
        for (i, r) in rows.iter_mut().enumerate() {
            if a.is_valid(i) {
                let to = if is_src {
                    &mut r.tunnel.outer_src
                } else {
                    &mut r.tunnel.outer_dst
                };
                to.copy_from_slice(a.value(i));
                r.tunnel.has |= TunnelHas::OUTER_IP;
            }
        }
    }
    let kind = col("tunnel")?
        .as_string_opt::<i32>()
        .ok_or("tunnel has the wrong type")?;
    let id = col("tunnel_id")?
        .as_primitive_opt::<UInt32Type>()
        .ok_or("tunnel_id has the wrong type")?;
    let depth = col("tunnel_depth")?
        .as_primitive_opt::<UInt8Type>()
        .ok_or("tunnel_depth has the wrong type")?;
    for (i, r) in rows.iter_mut().enumerate() {
        if kind.is_valid(i) {
            r.tunnel.kind = Tunnel::from_name(kind.value(i))
                .ok_or_else(|| format!("unknown tunnel {:?}", kind.value(i)))?;
        }
        if id.is_valid(i) {
            r.tunnel.id = id.value(i);
            r.tunnel.has |= TunnelHas::ID;
        }
        r.tunnel.depth = depth.value(i);
    }
    Ok(())
}

/// One row group of a packet file and the span of its `ts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowGroupSpan {
    pub index: usize,
    pub rows: u64,
    /// Earliest and latest `ts` (ns) from the row group's statistics;
    /// `i64::MIN` / `i64::MAX` when the writer left them out.
    pub ts_min: i64,
    pub ts_max: i64,
}

/// The row groups of a packet file, from its footer alone.
pub fn row_group_spans(path: &Path) -> Result<Vec<RowGroupSpan>, StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io(path, e))?;
    row_group_spans_of(path, file)
}

/// [`row_group_spans`] of a packet file read from elsewhere (`path` names
/// it in errors).
pub fn row_group_spans_of<R: ChunkReader + 'static>(
    path: &Path,
    file: R,
) -> Result<Vec<RowGroupSpan>, StoreError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::file::statistics::Statistics;
    let reader = SerializedFileReader::new(file).map_err(|e| StoreError::parquet(path, e))?;
    let meta = reader.metadata();
    let ts_col = meta
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .position(|c| c.name() == "ts")
        .ok_or_else(|| StoreError::Invalid {
            path: path.to_path_buf(),
            message: "not a packet file: it has no ts column".into(),
        })?;
    Ok(meta
        .row_groups()
        .iter()
        .enumerate()
        .map(|(index, rg)| {
            let (mut lo, mut hi) = (i64::MIN, i64::MAX);
            if let Some(Statistics::Int64(s)) = rg.column(ts_col).statistics() {
                lo = s.min_opt().copied().unwrap_or(lo);
                hi = s.max_opt().copied().unwrap_or(hi);
            }
            RowGroupSpan {
                index,
                rows: rg.num_rows().max(0) as u64,
                ts_min: lo,
                ts_max: hi,
            }
        })
        .collect())
}

/// The records of one row group of a packet file, appended to `out`.
pub fn read_row_group(
    path: &Path,
    row_group: usize,
    out: &mut Vec<PacketRecord>,
) -> Result<(), StoreError> {
    append_file_records(path, Some(vec![row_group]), out)
}
