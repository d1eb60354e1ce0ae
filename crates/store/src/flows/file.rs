//! The flows file's columns: its schema, slices to and from Arrow batches,
//! and the writer of one file.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, FixedSizeBinaryBuilder, Int64Builder, ListBuilder, UInt8Builder, UInt16Builder,
    UInt32Builder,
};
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeBinaryArray, Int64Array, ListArray, RecordBatch,
    UInt8Array, UInt16Array, UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;

use super::FLOWS_SCHEMA_VERSION;
use super::slice::{FlowKey, FlowSlice, SeqRanges, Side};
use crate::error::StoreError;
use crate::files::create_file;

/// The flows table's Arrow schema.
pub fn flows_schema() -> SchemaRef {
    let mut f = vec![
        Field::new("ip_version", DataType::UInt8, true),
        Field::new("ethertype", DataType::UInt16, true),
        Field::new("a_ip", DataType::FixedSizeBinary(16), true),
        Field::new("a_port", DataType::UInt16, true),
        Field::new("b_ip", DataType::FixedSizeBinary(16), true),
        Field::new("b_port", DataType::UInt16, true),
        Field::new("proto", DataType::UInt8, true),
        Field::new("has_ports", DataType::Boolean, false),
        Field::new("first_ns", DataType::Int64, false),
        Field::new("span_ns", DataType::Int64, false),
    ];
    for s in ["a", "b"] {
        f.extend([
            Field::new(format!("{s}_first_after_ns"), DataType::Int64, true),
            Field::new(format!("{s}_last_after_ns"), DataType::Int64, true),
            Field::new(format!("{s}_frames"), DataType::UInt64, false),
            Field::new(format!("{s}_bytes"), DataType::UInt64, false),
            Field::new(format!("{s}_cap_bytes"), DataType::UInt64, false),
            Field::new(format!("{s}_payload"), DataType::UInt64, false),
            Field::new(format!("{s}_tcp_flags"), DataType::UInt16, true),
            Field::new(format!("{s}_data_segs"), DataType::UInt64, false),
            Field::new(format!("{s}_distinct_seqs"), DataType::UInt64, false),
            Field::new(
                format!("{s}_seq_spans"),
                DataType::List(Arc::new(Field::new("item", DataType::UInt32, false))),
                false,
            ),
            Field::new(format!("{s}_syn_after_ns"), DataType::Int64, true),
            Field::new(format!("{s}_synack_after_ns"), DataType::Int64, true),
            Field::new(format!("{s}_ack_after_ns"), DataType::Int64, true),
            Field::new(format!("{s}_parse_errors"), DataType::UInt64, false),
        ]);
    }
    Arc::new(Schema::new(f))
}

/// The slices as one Arrow batch of [`flows_schema`].
pub fn slices_to_batch(slices: &[&FlowSlice]) -> RecordBatch {
    let n = slices.len();
    let mut ipv = UInt8Builder::with_capacity(n);
    let mut eth = UInt16Builder::with_capacity(n);
    let mut a_ip = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut a_port = UInt16Builder::with_capacity(n);
    let mut b_ip = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut b_port = UInt16Builder::with_capacity(n);
    let mut proto = UInt8Builder::with_capacity(n);
    let mut ports = BooleanBuilder::with_capacity(n);
    let mut first = Int64Builder::with_capacity(n);
    let mut span = Int64Builder::with_capacity(n);
    for s in slices {
        let k = &s.key;
        if k.is_ip() {
            ipv.append_value(k.ip_version);
            eth.append_null();
            a_ip.append_value(k.a_ip).expect("16 bytes");
            a_port.append_value(k.a_port);
            b_ip.append_value(k.b_ip).expect("16 bytes");
            b_port.append_value(k.b_port);
            proto.append_value(k.proto);
        } else {
            ipv.append_null();
            eth.append_option(k.ethertype);
            a_ip.append_null();
            a_port.append_null();
            b_ip.append_null();
            b_port.append_null();
            proto.append_null();
        }
        ports.append_value(k.has_ports);
        let t0 = s.first_ns().unwrap_or(0);
        first.append_value(t0);
        span.append_value(s.last_ns().unwrap_or(t0) - t0);
    }
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(ipv.finish()),
        Arc::new(eth.finish()),
        Arc::new(a_ip.finish()),
        Arc::new(a_port.finish()),
        Arc::new(b_ip.finish()),
        Arc::new(b_port.finish()),
        Arc::new(proto.finish()),
        Arc::new(ports.finish()),
        Arc::new(first.finish()),
        Arc::new(span.finish()),
    ];
    type Pick = fn(&FlowSlice) -> (&Side, &SeqRanges);
    let picks: [Pick; 2] = [|s| (&s.a, &s.a_seqs), |s| (&s.b, &s.b_seqs)];
    for pick in picks {
        let sides: Vec<Side> = slices.iter().map(|s| *pick(s).0).collect();
        let mut ranges = ListBuilder::new(UInt32Builder::new()).with_field(Arc::new(Field::new(
            "item",
            DataType::UInt32,
            false,
        )));
        for s in slices {
            for &(lo, hi) in &pick(s).1.0 {
                ranges.values().append_value(lo);
                ranges.values().append_value(hi.wrapping_sub(lo));
            }
            ranges.append(true);
        }
        let i64s = |f: fn(&Side) -> Option<i64>| -> ArrayRef {
            Arc::new(
                sides
                    .iter()
                    .zip(slices)
                    .map(|(side, s)| Some(f(side)? - s.first_ns().unwrap_or(0)))
                    .collect::<Int64Array>(),
            )
        };
        let u64s = |f: fn(&Side) -> u64| -> ArrayRef {
            Arc::new(sides.iter().map(|s| Some(f(s))).collect::<UInt64Array>())
        };
        cols.extend([
            i64s(|s| s.first_ns),
            i64s(|s| s.last_ns),
            u64s(|s| s.frames),
            u64s(|s| s.bytes),
            u64s(|s| s.cap_bytes),
            u64s(|s| s.payload),
            Arc::new(sides.iter().map(|s| s.tcp_flags).collect::<UInt16Array>()) as ArrayRef,
            u64s(|s| s.data_segs),
            u64s(|s| s.distinct_seqs),
            Arc::new(ranges.finish()) as ArrayRef,
            i64s(|s| s.syn_ns),
            i64s(|s| s.synack_ns),
            i64s(|s| s.ack_ns),
            u64s(|s| s.parse_errors),
        ]);
    }
    RecordBatch::try_new(flows_schema(), cols).expect("columns match the flows schema")
}

/// The slices of a batch of [`flows_schema`] (as read back).
pub fn batch_to_slices(b: &RecordBatch, out: &mut Vec<FlowSlice>) -> Result<(), String> {
    let col = |name: &str| {
        b.column_by_name(name)
            .ok_or_else(|| format!("no column {name} (not a weir flows table?)"))
    };
    fn typed<'a, T: 'static>(a: &'a ArrayRef, name: &str) -> Result<&'a T, String> {
        a.as_any()
            .downcast_ref::<T>()
            .ok_or_else(|| format!("column {name} has type {}", a.data_type()))
    }
    let ipv = col("ip_version")?;
    let ipv: &UInt8Array = typed(ipv, "ip_version")?;
    let eth = col("ethertype")?;
    let eth: &UInt16Array = typed(eth, "ethertype")?;
    let a_ip = col("a_ip")?;
    let a_ip: &FixedSizeBinaryArray = typed(a_ip, "a_ip")?;
    let b_ip = col("b_ip")?;
    let b_ip: &FixedSizeBinaryArray = typed(b_ip, "b_ip")?;
    let a_port = col("a_port")?;
    let a_port: &UInt16Array = typed(a_port, "a_port")?;
    let b_port = col("b_port")?;
    let b_port: &UInt16Array = typed(b_port, "b_port")?;
    let proto = col("proto")?;
    let proto: &UInt8Array = typed(proto, "proto")?;
    let ports = col("has_ports")?;
    let ports: &BooleanArray = typed(ports, "has_ports")?;
    let first = col("first_ns")?;
    let first: &Int64Array = typed(first, "first_ns")?;
    struct SideCols<'a> {
        i64s: [&'a Int64Array; 5],
        u64s: [&'a UInt64Array; 7],
        flags: &'a UInt16Array,
        seqs: &'a ListArray,
    }
    let side_cols = |s: &str| -> Result<SideCols<'_>, String> {
        let i = |n: &str| -> Result<&Int64Array, String> {
            let name = format!("{s}_{n}");
            typed(col(&name)?, &name)
        };
        let u = |n: &str| -> Result<&UInt64Array, String> {
            let name = format!("{s}_{n}");
            typed(col(&name)?, &name)
        };
        let name = format!("{s}_tcp_flags");
        Ok(SideCols {
            i64s: [
                i("first_after_ns")?,
                i("last_after_ns")?,
                i("syn_after_ns")?,
                i("synack_after_ns")?,
                i("ack_after_ns")?,
            ],
            u64s: [
                u("frames")?,
                u("bytes")?,
                u("cap_bytes")?,
                u("payload")?,
                u("data_segs")?,
                u("distinct_seqs")?,
                u("parse_errors")?,
            ],
            flags: typed(col(&name)?, &name)?,
            seqs: {
                let name = format!("{s}_seq_spans");
                typed(col(&name)?, &name)?
            },
        })
    };
    let sa = side_cols("a")?;
    let sb = side_cols("b")?;
    let opt_i = |a: &Int64Array, i: usize| (!a.is_null(i)).then(|| first.value(i) + a.value(i));
    let side = |c: &SideCols, i: usize| Side {
        first_ns: opt_i(c.i64s[0], i),
        last_ns: opt_i(c.i64s[1], i),
        syn_ns: opt_i(c.i64s[2], i),
        synack_ns: opt_i(c.i64s[3], i),
        ack_ns: opt_i(c.i64s[4], i),
        frames: c.u64s[0].value(i),
        bytes: c.u64s[1].value(i),
        cap_bytes: c.u64s[2].value(i),
        payload: c.u64s[3].value(i),
        data_segs: c.u64s[4].value(i),
        distinct_seqs: c.u64s[5].value(i),
        parse_errors: c.u64s[6].value(i),
        tcp_flags: (!c.flags.is_null(i)).then(|| c.flags.value(i)),
    };
    let ranges = |c: &SideCols, i: usize| -> Result<SeqRanges, String> {
        let v = c.seqs.value(i);
        let v = v
            .as_any()
            .downcast_ref::<UInt32Array>()
            .ok_or("seq_spans holds no u32 values")?;
        if v.len() % 2 != 0 {
            return Err("seq_spans holds an odd number of values".into());
        }
        Ok(SeqRanges(
            v.values()
                .chunks(2)
                .map(|p| (p[0], p[0].wrapping_add(p[1])))
                .collect(),
        ))
    };
    let ip16 = |a: &FixedSizeBinaryArray, i: usize| -> [u8; 16] {
        a.value(i).try_into().unwrap_or([0; 16])
    };
    out.reserve(b.num_rows());
    for i in 0..b.num_rows() {
        let key = if ipv.is_null(i) {
            FlowKey {
                ip_version: 0,
                ethertype: (!eth.is_null(i)).then(|| eth.value(i)),
                a_ip: [0; 16],
                b_ip: [0; 16],
                a_port: 0,
                b_port: 0,
                proto: 0,
                has_ports: false,
            }
        } else {
            FlowKey {
                ip_version: ipv.value(i),
                ethertype: None,
                a_ip: ip16(a_ip, i),
                b_ip: ip16(b_ip, i),
                a_port: a_port.value(i),
                b_port: b_port.value(i),
                proto: proto.value(i),
                has_ports: ports.value(i),
            }
        };
        out.push(FlowSlice {
            key,
            a: side(&sa, i),
            b: side(&sb, i),
            a_seqs: ranges(&sa, i)?,
            b_seqs: ranges(&sb, i)?,
        });
    }
    Ok(())
}

/// Rows per page of a flows file: what a lookup of one address reads of
/// each file, at least (a page header and index entry per column cost
/// about 60 bytes a column).
pub const FLOW_PAGE_ROWS: usize = 2048;

/// What a finished flows file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowFileSummary {
    /// Path relative to the dataset root.
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
}

/// Writes `slices` to `path` (a hidden `.NAME.part` first, renamed when
/// complete); `relative` is the path the summary records.
pub fn write_flow_file(
    path: &Path,
    relative: &str,
    slices: &[FlowSlice],
) -> Result<FlowFileSummary, StoreError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let part = path.with_file_name(format!(".{name}.part"));
    if let Some(dir) = path.parent() {
        crate::files::create_dirs(dir)?;
    }
    let written = create_file(&part).and_then(|file| {
        // Dictionaries do not pay here: times are offsets from the slice's
        // first frame, counts are spread wide, and keys are few per file.
        // Pages of FLOW_PAGE_ROWS rows, all columns alike, and the slices
        // in flow order: the page index then says which pages hold an
        // address (`read_flow_rows`' lookup).
        let props = crate::table::writer_properties("flows", FLOWS_SCHEMA_VERSION, &[])
            .into_builder()
            .set_dictionary_enabled(false)
            .set_data_page_row_count_limit(FLOW_PAGE_ROWS)
            .build();
        let mut w = ArrowWriter::try_new(file, flows_schema(), Some(props))
            .map_err(|e| StoreError::parquet(&part, e))?;
        let mut in_order: Vec<&FlowSlice> = slices.iter().collect();
        in_order.sort_by_key(|s| (s.key, s.first_ns()));
        w.write(&slices_to_batch(&in_order))
            .map_err(|e| StoreError::parquet(&part, e))?;
        let file = w.into_inner().map_err(|e| StoreError::parquet(&part, e))?;
        file.sync_data().map_err(|e| StoreError::io(&part, e))?;
        let bytes = file.metadata().map_err(|e| StoreError::io(&part, e))?.len();
        std::fs::rename(&part, path).map_err(|e| StoreError::io(&part, e))?;
        Ok(bytes)
    });
    let bytes = match written {
        Ok(b) => b,
        Err(e) => {
            // A full disk: no half-written flows file is left behind.
            let _ = std::fs::remove_file(&part);
            return Err(e);
        }
    };
    Ok(FlowFileSummary {
        path: relative.to_string(),
        rows: slices.len() as u64,
        bytes,
    })
}
