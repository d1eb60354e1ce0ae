//! Reading flows files: every slice, or only the columns an index needs.

use std::path::Path;

use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeBinaryArray, Int64Array, UInt8Array, UInt16Array,
    UInt64Array,
};

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

/// Hands `each` the [`FlowRow`] of every row of a flows file, reading only
/// the columns it needs (a third of the file), from memory.
pub fn read_flow_rows(path: &Path, mut each: impl FnMut(&FlowRow)) -> Result<(), StoreError> {
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
    let bytes = bytes::Bytes::from(std::fs::read(path).map_err(|e| StoreError::io(path, e))?);
    let (reader, _) = read_batches(path, bytes, &COLUMNS, None)?;
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
    Ok(())
}
