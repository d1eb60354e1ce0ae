//! `flows`, `top` and `summary` answered from the flows table (see
//! `store::flows`) instead of the packets: the slices of each flow are
//! merged (sums, minima, maxima), and the rows are those of the SQL over
//! the packets, column for column and in the same order.
//!
//! The table answers when every packet file of every dataset has its flows
//! file and the filter (if any) looks only at addresses, ports and
//! protocol; otherwise [`FlowTable::load`] says why not and the caller runs
//! the SQL over the packets. Where the time window cuts through a packet
//! file's slices, that file's slices are built again from its records in
//! the window (the edges of the window, a file or two per dataset). A flow whose slices have
//! overlapping sequence ranges (a retransmission across packet files) has
//! its retransmission counts taken from the packets, by a query over that
//! flow alone.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, UInt64Array,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use store::flows::{FlowKey, FlowSlice, SeqRanges, Side, read_flow_file_in, slices_from_packets};
use util::storage::Root;

use crate::analyses::{By, flows_query, top_query};
use crate::columns::par_map;
use crate::error::AnalyzeError;
use crate::session::Session;
use crate::sql::sql_limit;
use crate::table::Table;
use crate::udf::write_ip;
use crate::window::TimeWindow;

/// The flows table of a session's datasets, restricted to its window.
pub struct FlowTable {
    slices: Vec<FlowSlice>,
    files: usize,
    /// Packet files the window cuts through, whose slices were built
    /// again from their records in the window, and the records read.
    edge_files: usize,
    edge_records: u64,
}

/// Why the flows table cannot answer (the packets do).
pub type NotUsable = String;

impl FlowTable {
    /// Reads the flows table, or says why it cannot answer for `session`.
    pub fn load(session: &Session) -> Result<Result<FlowTable, NotUsable>, AnalyzeError> {
        let mut paths = Vec::new();
        for (root, m) in session.manifests() {
            for f in store::location::table_files(&**root, m, store::dataset::PACKETS_DIR)? {
                let p = store::flows::flows_path_for(&f.rel);
                if !store::location::has_file(&**root, m, &p)? {
                    return Ok(Err(format!(
                        "{} has no flows file for {} (written by an older weir, or cut off \
                         by a crash)",
                        root.name(),
                        root.name_of(&f.rel)
                    )));
                }
                paths.push((root.clone(), f.rel.clone(), p));
            }
        }
        let files = paths.len();
        // A filter the sides of flows cannot answer is found before any
        // file is read: the same statement planned over no slices.
        if let Some(f) = session.filter()
            && let Err(why) = keep_matching_sides(session, f, &mut Vec::new())?
        {
            return Ok(Err(why));
        }
        // A flows file this weir cannot read (another version's columns,
        // damage) leaves the answer to the packets.
        let read = match read_all(&paths, session.window(), session.threads()) {
            Ok(Ok(r)) => r,
            Ok(Err(why)) => return Ok(Err(why)),
            Err(AnalyzeError::Store(e)) => return Ok(Err(format!("{e}"))),
            Err(e) => return Err(e),
        };
        let mut kept = read.slices;
        if let Some(f) = session.filter() {
            // A filter on addresses, ports and protocol holds for all of
            // one direction of a flow or none of it: it picks sides of
            // slices. Any other filter needs the packets.
            if let Err(why) = keep_matching_sides(session, f, &mut kept)? {
                return Ok(Err(why));
            }
        }
        Ok(Ok(FlowTable {
            slices: kept,
            files,
            edge_files: read.edge_files,
            edge_records: read.edge_records,
        }))
    }

    /// How it answered, for `-v`: "N slices in M files", and the files the
    /// window cuts through, read from their records.
    pub fn describe(&self) -> String {
        let mut s = format!("{} slices in {} files", self.slices.len(), self.files);
        if self.edge_files > 0 {
            s.push_str(&format!(
                "; {} cut by the time window, built from their {} records in it",
                self.edge_files, self.edge_records
            ));
        }
        s
    }

    /// `flows`, as [`crate::analyses::flows`] answers it.
    pub fn flows(&self, session: &Session, by: By, limit: usize) -> Result<Table, AnalyzeError> {
        let schema = session.plan_schema(&flows_query(by, limit))?;
        let mut rows = merge_flows(&self.slices);
        let inexact: Vec<usize> = (0..rows.len()).filter(|&i| !rows[i].exact).collect();
        if !inexact.is_empty() {
            retrans_from_packets(session, &mut rows, &inexact)?;
        }
        let mut rows: Vec<FlowRow> = rows.into_iter().map(|m| m.row).collect();
        let key = |r: &FlowRow| match by {
            By::Bytes => r.fwd.bytes + r.rev.bytes,
            By::Frames => r.fwd.frames + r.rev.frames,
        };
        rows.sort_by(|x, y| {
            key(y)
                .cmp(&key(x))
                .then(x.first_ns.cmp(&y.first_ns))
                .then_with(|| x.src.cmp(&y.src))
                .then(x.src_port.cmp(&y.src_port))
                .then_with(|| x.dst.cmp(&y.dst))
                .then(x.dst_port.cmp(&y.dst_port))
                .then(x.proto.cmp(&y.proto))
        });
        if limit > 0 {
            rows.truncate(limit);
        }
        let opt = |v: Option<i64>| v;
        let cols: Vec<ArrayRef> = vec![
            strings(rows.iter().map(|r| r.src.as_str())),
            u64s(rows.iter().map(|r| r.src_port as u64)),
            strings(rows.iter().map(|r| r.dst.as_str())),
            u64s(rows.iter().map(|r| r.dst_port as u64)),
            u64s(rows.iter().map(|r| r.proto as u64)),
            i64s(rows.iter().map(|r| Some(r.first_ns))),
            i64s(rows.iter().map(|r| Some(r.last_ns))),
            i64s(rows.iter().map(|r| Some(r.last_ns - r.first_ns))),
            u64s(rows.iter().map(|r| r.fwd.frames)),
            u64s(rows.iter().map(|r| r.fwd.bytes)),
            u64s(rows.iter().map(|r| r.rev.frames)),
            u64s(rows.iter().map(|r| r.rev.bytes)),
            u64s(rows.iter().map(|r| r.fwd.payload)),
            u64s(rows.iter().map(|r| r.rev.payload)),
            opt_u64s(rows.iter().map(|r| r.fwd.tcp_flags.map(u64::from))),
            opt_u64s(rows.iter().map(|r| r.rev.tcp_flags.map(u64::from))),
            i64s(rows.iter().map(|r| Some(r.fwd_retrans))),
            i64s(rows.iter().map(|r| Some(r.rev_retrans))),
            i64s(rows.iter().map(|r| opt(r.rtt().map(|t| t.0)))),
            i64s(rows.iter().map(|r| opt(r.rtt().map(|t| t.1)))),
            i64s(rows.iter().map(|r| opt(r.rtt().map(|t| t.2)))),
        ];
        table("flows", &schema, cols)
    }

    /// `top hosts|ports|pairs`, as [`crate::analyses::top`] answers it.
    pub fn top(
        &self,
        session: &Session,
        what: &str,
        by: By,
        limit: usize,
    ) -> Result<Table, AnalyzeError> {
        let schema = session.plan_schema(&top_query(what, by, limit)?)?;
        let limit = sql_limit(limit);
        let ip = |a: &[u8; 16]| {
            let mut s = String::new();
            write_ip(a, &mut s);
            s
        };
        let ip_slices = || self.slices.iter().filter(|s| s.key.is_ip());
        let cols: Vec<ArrayRef> = match what {
            "hosts" => {
                // frames, bytes sent; frames, bytes received.
                let mut h: HashMap<[u8; 16], [u64; 4]> = HashMap::new();
                for s in ip_slices() {
                    let k = &s.key;
                    for (from, to, side) in [(k.a_ip, k.b_ip, &s.a), (k.b_ip, k.a_ip, &s.b)] {
                        if side.frames == 0 {
                            continue;
                        }
                        let e = h.entry(from).or_default();
                        e[0] += side.frames;
                        e[1] += side.bytes;
                        let e = h.entry(to).or_default();
                        e[2] += side.frames;
                        e[3] += side.bytes;
                    }
                }
                let mut rows: Vec<(String, [u64; 4])> =
                    h.into_iter().map(|(a, v)| (ip(&a), v)).collect();
                let total = |v: &[u64; 4]| match by {
                    By::Bytes => v[1] + v[3],
                    By::Frames => v[0] + v[2],
                };
                rows.sort_by(|x, y| total(&y.1).cmp(&total(&x.1)).then_with(|| x.0.cmp(&y.0)));
                rows.truncate(limit);
                vec![
                    strings(rows.iter().map(|r| r.0.as_str())),
                    u64s(rows.iter().map(|r| r.1[0] + r.1[2])),
                    u64s(rows.iter().map(|r| r.1[1] + r.1[3])),
                    u64s(rows.iter().map(|r| r.1[0])),
                    u64s(rows.iter().map(|r| r.1[1])),
                    u64s(rows.iter().map(|r| r.1[2])),
                    u64s(rows.iter().map(|r| r.1[3])),
                ]
            }
            "ports" => {
                // Every frame counts once for its source port and once for
                // its destination port.
                let mut p: HashMap<(u8, u16), [u64; 2]> = HashMap::new();
                for s in ip_slices().filter(|s| s.key.has_ports) {
                    let k = &s.key;
                    for side in [&s.a, &s.b] {
                        if side.frames == 0 {
                            continue;
                        }
                        for port in [k.a_port, k.b_port] {
                            let e = p.entry((k.proto, port)).or_default();
                            e[0] += side.frames;
                            e[1] += side.bytes;
                        }
                    }
                }
                let name = |proto: u8| match proto {
                    6 => "tcp".to_string(),
                    17 => "udp".to_string(),
                    132 => "sctp".to_string(),
                    other => other.to_string(),
                };
                // Grouped by the name, as the SQL does.
                let mut named: BTreeMap<(String, u16), [u64; 2]> = BTreeMap::new();
                for ((proto, port), v) in p {
                    let e = named.entry((name(proto), port)).or_default();
                    e[0] += v[0];
                    e[1] += v[1];
                }
                let mut rows: Vec<((String, u16), [u64; 2])> = named.into_iter().collect();
                let total = |v: &[u64; 2]| match by {
                    By::Bytes => v[1],
                    By::Frames => v[0],
                };
                rows.sort_by(|x, y| total(&y.1).cmp(&total(&x.1)).then_with(|| x.0.cmp(&y.0)));
                rows.truncate(limit);
                vec![
                    strings(rows.iter().map(|r| r.0.0.as_str())),
                    u64s(rows.iter().map(|r| r.0.1 as u64)),
                    u64s(rows.iter().map(|r| r.1[0])),
                    u64s(rows.iter().map(|r| r.1[1])),
                ]
            }
            "pairs" => {
                // frames, bytes a to b, bytes b to a; a the smaller address.
                let mut p: HashMap<([u8; 16], [u8; 16]), [u64; 3]> = HashMap::new();
                for s in ip_slices() {
                    let k = &s.key;
                    let e = p.entry((k.a_ip, k.b_ip)).or_default();
                    e[0] += s.a.frames + s.b.frames;
                    e[1] += s.a.bytes;
                    // From b to a is "a to b" when both ends are one host.
                    if k.a_ip == k.b_ip {
                        e[1] += s.b.bytes;
                    } else {
                        e[2] += s.b.bytes;
                    }
                }
                let mut rows: Vec<(String, String, [u64; 3])> = p
                    .into_iter()
                    .map(|((a, b), v)| (ip(&a), ip(&b), v))
                    .collect();
                let total = |v: &[u64; 3]| match by {
                    By::Bytes => v[1] + v[2],
                    By::Frames => v[0],
                };
                rows.sort_by(|x, y| {
                    total(&y.2)
                        .cmp(&total(&x.2))
                        .then_with(|| x.0.cmp(&y.0))
                        .then_with(|| x.1.cmp(&y.1))
                });
                rows.truncate(limit);
                vec![
                    strings(rows.iter().map(|r| r.0.as_str())),
                    strings(rows.iter().map(|r| r.1.as_str())),
                    u64s(rows.iter().map(|r| r.2[0])),
                    u64s(rows.iter().map(|r| r.2[1] + r.2[2])),
                    u64s(rows.iter().map(|r| r.2[1])),
                    u64s(rows.iter().map(|r| r.2[2])),
                ]
            }
            other => {
                return Err(AnalyzeError::Usage(format!(
                    "top {other}: choose hosts, ports or pairs"
                )));
            }
        };
        table(&format!("top {what}"), &schema, cols)
    }

    /// `summary`'s totals and protocol mix (its loss table comes from the
    /// stats, as before).
    pub fn summary(&self, session: &Session) -> Result<Vec<Table>, AnalyzeError> {
        use crate::sql::{SUMMARY_LOSS_SQL, SUMMARY_PROTOCOLS_SQL, SUMMARY_TOTALS_SQL};
        let mut all = Side::default();
        let mut protocols: HashMap<String, [u64; 4]> = HashMap::new();
        for s in &self.slices {
            let frames = s.a.frames + s.b.frames;
            let bytes = s.a.bytes + s.b.bytes;
            all.absorb(&s.a);
            all.absorb(&s.b);
            let e = protocols.entry(protocol_name(&s.key)).or_default();
            e[0] += frames;
            e[1] += bytes;
            match s.key.ip_version {
                4 => e[2] += frames,
                6 => e[3] += frames,
                _ => {}
            }
        }
        let totals_schema = session.plan_schema(SUMMARY_TOTALS_SQL)?;
        let any = all.frames > 0;
        let totals = table(
            "totals",
            &totals_schema,
            vec![
                u64s([all.frames]),
                opt_u64s([any.then_some(all.bytes)]),
                opt_u64s([any.then_some(all.cap_bytes)]),
                i64s([all.first_ns]),
                i64s([all.last_ns]),
                opt_u64s([any.then_some(all.parse_errors)]),
            ],
        )?;
        let mut rows: Vec<(String, [u64; 4])> = protocols.into_iter().collect();
        rows.sort_by(|x, y| y.1[1].cmp(&x.1[1]).then_with(|| x.0.cmp(&y.0)));
        let proto_schema = session.plan_schema(SUMMARY_PROTOCOLS_SQL)?;
        let protocols = table(
            "protocols",
            &proto_schema,
            vec![
                strings(rows.iter().map(|r| r.0.as_str())),
                u64s(rows.iter().map(|r| r.1[0])),
                u64s(rows.iter().map(|r| r.1[1])),
                u64s(rows.iter().map(|r| r.1[2])),
                u64s(rows.iter().map(|r| r.1[3])),
            ],
        )?;
        let (schema, batches) = session.query_with_schema(SUMMARY_LOSS_SQL)?;
        Ok(vec![
            totals,
            protocols,
            Table {
                name: "loss".into(),
                schema,
                batches,
            },
        ])
    }
}

/// Keeps the sides of `slices` whose frames the tcpdump filter `f` keeps,
/// by running the filter's SQL over one row per side holding the columns a
/// flow fixes (`ip_version`, addresses, ports, `ip_proto`); a filter on any
/// other column fails to plan there, and is refused.
fn keep_matching_sides(
    session: &Session,
    f: &str,
    slices: &mut Vec<FlowSlice>,
) -> Result<Result<(), NotUsable>, AnalyzeError> {
    use datafusion::arrow::array::{FixedSizeBinaryArray, UInt8Array, UInt16Array};
    use datafusion::arrow::datatypes::{Field, Schema};
    let cond = session.filter_sql().unwrap_or("TRUE");
    let n = slices.len() * 2;
    let mut idx = Vec::with_capacity(n);
    let (mut ver, mut src, mut dst) = (Vec::new(), Vec::new(), Vec::new());
    let (mut sp, mut dp, mut proto) = (Vec::new(), Vec::new(), Vec::new());
    for (i, s) in slices.iter().enumerate() {
        let k = &s.key;
        for (side, frames) in [(0u64, s.a.frames), (1, s.b.frames)] {
            if frames == 0 {
                continue;
            }
            idx.push(i as u64 * 2 + side);
            let ip = k.is_ip();
            let (from, to, fp, tp) = if side == 0 {
                (k.a_ip, k.b_ip, k.a_port, k.b_port)
            } else {
                (k.b_ip, k.a_ip, k.b_port, k.a_port)
            };
            ver.push(ip.then_some(k.ip_version));
            src.push(ip.then_some(from));
            dst.push(ip.then_some(to));
            sp.push((ip && k.has_ports).then_some(fp));
            dp.push((ip && k.has_ports).then_some(tp));
            proto.push(ip.then_some(k.proto));
        }
    }
    let bin = |v: Vec<Option<[u8; 16]>>| -> Result<ArrayRef, AnalyzeError> {
        Ok(Arc::new(
            FixedSizeBinaryArray::try_from_sparse_iter_with_size(v.into_iter(), 16)
                .map_err(AnalyzeError::from_arrow)?,
        ))
    };
    let schema = Arc::new(Schema::new(vec![
        Field::new("side", DataType::UInt64, false),
        Field::new("ip_version", DataType::UInt8, true),
        Field::new("ip_src", DataType::FixedSizeBinary(16), true),
        Field::new("ip_dst", DataType::FixedSizeBinary(16), true),
        Field::new("src_port", DataType::UInt16, true),
        Field::new("dst_port", DataType::UInt16, true),
        Field::new("ip_proto", DataType::UInt8, true),
    ]));
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(UInt64Array::from(idx)),
            Arc::new(UInt8Array::from(ver)),
            bin(src)?,
            bin(dst)?,
            Arc::new(UInt16Array::from(sp)),
            Arc::new(UInt16Array::from(dp)),
            Arc::new(UInt8Array::from(proto)),
        ],
    )
    .map_err(AnalyzeError::from_arrow)?;
    session.register_batches("flow_sides", vec![batch])?;
    let kept = match session.query(&format!("SELECT side FROM flow_sides WHERE {cond}")) {
        Ok(b) => b,
        Err(AnalyzeError::Sql(_)) => {
            return Ok(Err(format!(
                "the filter ({f}) looks at more than addresses, ports and protocol"
            )));
        }
        Err(e) => return Err(e),
    };
    let mut keep = vec![false; n];
    for b in &kept {
        for v in b
            .column(0)
            .as_primitive::<datafusion::arrow::datatypes::UInt64Type>()
            .values()
        {
            keep[*v as usize] = true;
        }
    }
    for (i, s) in slices.iter_mut().enumerate() {
        if !keep[2 * i] {
            s.a = Side::default();
            s.a_seqs = SeqRanges::default();
        }
        if !keep[2 * i + 1] {
            s.b = Side::default();
            s.b_seqs = SeqRanges::default();
        }
    }
    slices.retain(|s| s.a.frames + s.b.frames > 0);
    Ok(Ok(()))
}

/// The protocol label `summary` gives a slice's frames.
fn protocol_name(k: &FlowKey) -> String {
    if !k.is_ip() {
        return match k.ethertype {
            Some(2054) => "arp",
            Some(34525) => "ipv6 (truncated)",
            Some(2048) => "ipv4 (truncated)",
            Some(35020) => "lldp",
            Some(34958) => "eapol",
            _ => "other link",
        }
        .to_string();
    }
    match k.proto {
        6 => "tcp".into(),
        17 => "udp".into(),
        1 => "icmp".into(),
        58 => "icmpv6".into(),
        132 => "sctp".into(),
        2 => "igmp".into(),
        47 => "gre".into(),
        50 => "esp".into(),
        89 => "ospf".into(),
        p => format!("ip proto {p}"),
    }
}

/// One flow as `weir analyze flows` prints it.
struct FlowRow {
    src: String,
    src_port: u16,
    dst: String,
    dst_port: u16,
    proto: u8,
    first_ns: i64,
    last_ns: i64,
    fwd: Side,
    rev: Side,
    fwd_retrans: i64,
    rev_retrans: i64,
}

impl FlowRow {
    /// Handshake, server and client RTT: SYN, SYN+ACK and ACK seen in
    /// order.
    fn rtt(&self) -> Option<(i64, i64, i64)> {
        let (syn, synack, ack) = (self.fwd.syn_ns?, self.rev.synack_ns?, self.fwd.ack_ns?);
        (syn <= synack && synack <= ack).then_some((ack - syn, synack - syn, ack - synack))
    }
}

struct Merged {
    row: FlowRow,
    /// Its retransmission counts add up (no slices with overlapping
    /// sequence ranges).
    exact: bool,
}

/// The flows of `slices`: each flow's slices merged and oriented by its
/// first frame, as the flows SQL does.
fn merge_flows(slices: &[FlowSlice]) -> Vec<Merged> {
    // The flows SQL keys on addresses, ports and protocol only.
    type Key = ([u8; 16], u16, [u8; 16], u16, u8);
    let key = |s: &FlowSlice| -> Key {
        let k = &s.key;
        (k.a_ip, k.a_port, k.b_ip, k.b_port, k.proto)
    };
    let mut order: Vec<&FlowSlice> = slices.iter().filter(|s| s.key.is_ip()).collect();
    order.sort_unstable_by_key(|s| key(s));
    let mut out = Vec::new();
    let mut scratch: Vec<(u32, u32)> = Vec::new();
    for group in order.chunk_by(|x, y| key(x) == key(y)) {
        let (mut a, mut b) = (Side::default(), Side::default());
        let exact = group.len() == 1
            || (SeqRanges::disjoint(group.iter().map(|s| &s.a_seqs), &mut scratch)
                && SeqRanges::disjoint(group.iter().map(|s| &s.b_seqs), &mut scratch));
        for s in group {
            a.absorb(&s.a);
            b.absorb(&s.b);
        }
        let k = group[0].key;
        let a_starts = b.first_ns.is_none() || a.first_ns.is_some_and(|x| Some(x) <= b.first_ns);
        let ip = |x: &[u8; 16]| {
            let mut s = String::new();
            write_ip(x, &mut s);
            s
        };
        let (src, sp, dst, dp, fwd, rev) = if a_starts {
            (k.a_ip, k.a_port, k.b_ip, k.b_port, a, b)
        } else {
            (k.b_ip, k.b_port, k.a_ip, k.a_port, b, a)
        };
        let first_ns = a.first_ns.into_iter().chain(b.first_ns).min().unwrap_or(0);
        let last_ns = a.last_ns.into_iter().chain(b.last_ns).max().unwrap_or(0);
        out.push(Merged {
            row: FlowRow {
                src: ip(&src),
                src_port: sp,
                dst: ip(&dst),
                dst_port: dp,
                proto: k.proto,
                first_ns,
                last_ns,
                fwd_retrans: fwd.retrans() as i64,
                rev_retrans: rev.retrans() as i64,
                fwd,
                rev,
            },
            exact,
        });
    }
    out
}

/// A flow as the flows SQL prints it: src, src_port, dst, dst_port, proto.
type FlowText = (String, u64, String, u64, u64);

/// Takes the retransmission counts of the flows `which` from the flows SQL
/// over the packets (one query, however many flows).
fn retrans_from_packets(
    session: &Session,
    rows: &mut [Merged],
    which: &[usize],
) -> Result<(), AnalyzeError> {
    let sql = "SELECT ip_text(src_ip) AS src, src_port, ip_text(dst_ip) AS dst, dst_port, proto, \
               fwd_retrans, rev_retrans FROM flows WHERE fwd_retrans + rev_retrans > 0";
    let batches = session.query(sql)?;
    let mut found: HashMap<FlowText, (i64, i64)> = HashMap::new();
    for b in &batches {
        let text = |i: usize| b.column(i).as_string::<i32>();
        let num = |i: usize| -> Result<ArrayRef, AnalyzeError> {
            cast(b.column(i), &DataType::Int64).map_err(AnalyzeError::from_arrow)
        };
        let (src, dst) = (text(0), text(2));
        let (sp, dp, pr, fr, rr) = (num(1)?, num(3)?, num(4)?, num(5)?, num(6)?);
        let v = |a: &ArrayRef, j: usize| a.as_primitive::<Int64Type>().value(j);
        for j in 0..b.num_rows() {
            found.insert(
                (
                    src.value(j).to_string(),
                    v(&sp, j) as u64,
                    dst.value(j).to_string(),
                    v(&dp, j) as u64,
                    v(&pr, j) as u64,
                ),
                (v(&fr, j), v(&rr, j)),
            );
        }
    }
    for &i in which {
        let r = &mut rows[i].row;
        let k = (
            r.src.clone(),
            r.src_port as u64,
            r.dst.clone(),
            r.dst_port as u64,
            r.proto as u64,
        );
        // Not listed: no retransmission in the packets.
        let (f, b) = found.get(&k).copied().unwrap_or((0, 0));
        r.fwd_retrans = f;
        r.rev_retrans = b;
    }
    Ok(())
}

/// Reads the flows files, a share of them per thread.
/// The slices of every flows file in the window, and what the window's
/// edges cost.
struct Read {
    slices: Vec<FlowSlice>,
    edge_files: usize,
    edge_records: u64,
}

/// One flows file against the window: the slices wholly inside it, or,
/// when the window cuts through one, the frames of all its slices (what
/// reading its edge from the records may cost).
enum FileInWindow {
    Whole(Vec<FlowSlice>),
    Cut { frames: u64 },
}

/// Reads the flows files (root, packet file, its flows file) on `threads`
/// threads. A slice wholly inside the window is kept and one wholly
/// outside dropped; a file with a slice the window cuts through gives the
/// slices of its records in the window instead (the window's edges are a
/// file or two per dataset, so what is read still grows with the flows).
/// A record costs more to read this way (through arrow, then the slicer)
/// than in the query engine's scan of a few columns, so when the files cut
/// hold a third or more of the frames of the slices wholly inside, the
/// packets answer (`Ok(Err(why))`).
fn read_all(
    paths: &[(Root, String, String)],
    w: TimeWindow,
    threads: usize,
) -> Result<Result<Read, NotUsable>, AnalyzeError> {
    let placed = par_map(threads, paths, |(root, _, flows)| {
        let mut v = Vec::new();
        read_flow_file_in(&**root, flows, &mut v)?;
        let place: Vec<Option<bool>> = v.iter().map(|s| place_in(s, &w)).collect();
        Ok(if place.contains(&None) {
            FileInWindow::Cut {
                frames: v.iter().map(|s| s.a.frames + s.b.frames).sum(),
            }
        } else {
            FileInWindow::Whole(
                v.into_iter()
                    .zip(place)
                    .filter(|(_, p)| *p == Some(true))
                    .map(|(s, _)| s)
                    .collect(),
            )
        })
    })?;
    let (mut whole_frames, mut cut_frames) = (0u64, 0u64);
    for f in &placed {
        match f {
            FileInWindow::Whole(v) => {
                whole_frames += v.iter().map(|s| s.a.frames + s.b.frames).sum::<u64>()
            }
            FileInWindow::Cut { frames } => cut_frames += frames,
        }
    }
    if cut_frames * 3 > whole_frames {
        return Ok(Err(format!(
            "the time window cuts through packet files of {cut_frames} frames and holds \
             slices of {whole_frames} whole: the packets answer sooner"
        )));
    }
    let cut: Vec<&(Root, String, String)> = paths
        .iter()
        .zip(&placed)
        .filter(|(_, f)| matches!(f, FileInWindow::Cut { .. }))
        .map(|(p, _)| p)
        .collect();
    let edges = par_map(threads, &cut, |(root, packets, _)| {
        Ok(slices_from_packets(&**root, packets, w.from_ns, w.to_ns)?)
    })?;
    let mut all = Read {
        slices: Vec::new(),
        edge_files: edges.len(),
        edge_records: edges.iter().map(|(_, n)| n).sum(),
    };
    // Moved once, into a vector of the right size.
    let whole = placed.into_iter().filter_map(|f| match f {
        FileInWindow::Whole(v) => Some(v),
        FileInWindow::Cut { .. } => None,
    });
    let parts: Vec<Vec<FlowSlice>> = whole.chain(edges.into_iter().map(|(v, _)| v)).collect();
    all.slices.reserve(parts.iter().map(Vec::len).sum());
    for mut p in parts {
        all.slices.append(&mut p);
    }
    Ok(Ok(all))
}

/// Where a slice lies against the window: wholly inside (`Some(true)`),
/// wholly outside (`Some(false)`), or cut by one of its bounds (`None`).
fn place_in(s: &FlowSlice, w: &TimeWindow) -> Option<bool> {
    if w.from_ns.is_none() && w.to_ns.is_none() {
        return Some(true);
    }
    let (Some(first), Some(last)) = (s.first_ns(), s.last_ns()) else {
        return Some(false);
    };
    let after_from = |t: i64| w.from_ns.is_none_or(|f| t >= f);
    let before_to = |t: i64| w.to_ns.is_none_or(|e| t < e);
    match (
        after_from(first) && before_to(first),
        after_from(last) && before_to(last),
    ) {
        (true, true) => Some(true),
        (false, false) if !before_to(first) || !after_from(last) => Some(false),
        _ => None,
    }
}

fn strings<'a>(v: impl IntoIterator<Item = &'a str>) -> ArrayRef {
    Arc::new(v.into_iter().map(Some).collect::<StringArray>())
}

fn u64s(v: impl IntoIterator<Item = u64>) -> ArrayRef {
    Arc::new(v.into_iter().map(Some).collect::<UInt64Array>())
}

fn opt_u64s(v: impl IntoIterator<Item = Option<u64>>) -> ArrayRef {
    Arc::new(v.into_iter().collect::<UInt64Array>())
}

fn i64s(v: impl IntoIterator<Item = Option<i64>>) -> ArrayRef {
    Arc::new(v.into_iter().collect::<Int64Array>())
}

/// A result table whose columns are cast to the types the SQL would give,
/// so that every renderer prints the two paths alike.
fn table(name: &str, schema: &SchemaRef, cols: Vec<ArrayRef>) -> Result<Table, AnalyzeError> {
    if cols.len() != schema.fields().len() {
        return Err(AnalyzeError::Engine(format!(
            "{name}: {} columns from the flows table, {} in the SQL's result",
            cols.len(),
            schema.fields().len()
        )));
    }
    let cols = cols
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| cast(c, f.data_type()).map_err(AnalyzeError::from_arrow))
        .collect::<Result<Vec<_>, _>>()?;
    let batch = RecordBatch::try_new(schema.clone(), cols).map_err(AnalyzeError::from_arrow)?;
    Ok(Table {
        name: name.into(),
        schema: schema.clone(),
        batches: vec![batch],
    })
}
