//! The rpc pass's parts merged into its tables (procedures, latency
//! with its percentiles, clients), as the SQL in `sql/rpc_*.sql` defines
//! them.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int64Array, StringArray, UInt32Array, UInt64Array,
};
use foldhash::{HashMap, HashMapExt};

use crate::columns::par_map;
use crate::error::AnalyzeError;

use super::nfs_io::HandleIo;
use super::rpc_scan::{ClientIo, Procedure, RpcPart, Totals};

pub(super) struct LatencyRow {
    pub(super) server: String,
    pub(super) program: Option<String>,
    pub(super) version: Option<u32>,
    pub(super) procedure: Option<String>,
    /// Each scan thread's latencies: merged by the thread that works out
    /// the row's quantiles.
    pub(super) values: Vec<Latencies>,
    pub(super) count: usize,
}

/// The latencies of one server and procedure in ns: those under 2^32 ns
/// (4.3 s: nearly all) in half the memory, the rest apart. 20 M calls'
/// latencies are written once into fresh pages and selected from, so their
/// size is their cost.
#[derive(Default)]
pub(super) struct Latencies {
    pub(super) short: Vec<u32>,
    pub(super) long: Vec<i64>,
}

impl Latencies {
    #[inline(always)]
    pub(super) fn push(&mut self, ns: i64) {
        match u32::try_from(ns) {
            Ok(v) => self.short.push(v),
            Err(_) => self.long.push(ns),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    pub(super) fn append(&mut self, o: &Latencies) {
        self.short.extend_from_slice(&o.short);
        self.long.extend_from_slice(&o.long);
    }

    pub(super) fn sum(&self) -> i128 {
        let short: u64 = self.short.iter().map(|&x| u64::from(x)).sum();
        short as i128 + self.long.iter().map(|&x| x as i128).sum::<i128>()
    }

    pub(super) fn max(&self) -> i64 {
        let short = self.short.iter().copied().max().map(i64::from);
        short.max(self.long.iter().copied().max()).unwrap_or(0)
    }

    /// [`percentiles_cont`] of all of them; reorders them.
    pub(super) fn percentiles(&mut self, ps: &[f64]) -> Vec<f64> {
        if self.long.is_empty() {
            return percentiles_cont(&mut self.short, ps);
        }
        let mut all: Vec<i64> = self.short.iter().map(|&x| i64::from(x)).collect();
        all.extend_from_slice(&self.long);
        percentiles_cont(&mut all, ps)
    }
}

/// DataFusion's `percentile_cont` at each of `ps` (rising) over `v`:
/// linear between the neighbours at p × (n − 1), the weight quantised to
/// 1e-6 as it does. Each selection works on the part above the previous
/// one, and the upper neighbour is the least value above the lower.
pub(super) fn percentiles_cont<T: Copy + Ord + Into<i64>>(v: &mut [T], ps: &[f64]) -> Vec<f64> {
    let n = v.len();
    let mut out = Vec::with_capacity(ps.len());
    let mut from = 0usize;
    for &p in ps {
        if n == 1 {
            out.push(v[0].into() as f64);
            continue;
        }
        let index = p * (n - 1) as f64;
        let (lo, hi) = (index.floor() as usize, index.ceil() as usize);
        let low = if lo >= from {
            let (_, &mut x, _) = v[from..].select_nth_unstable(lo - from);
            from = lo;
            x
        } else {
            // Same lower index as the previous p: already in place.
            v[lo]
        };
        let low = low.into() as f64;
        if lo == hi {
            out.push(low);
            continue;
        }
        let high = v[lo + 1..]
            .iter()
            .copied()
            .min()
            .map_or(low, |x| x.into() as f64);
        let weight = ((index - lo as f64) * 1e6) as usize as f64 / 1e6;
        out.push(low + (high - low) * weight);
    }
    out
}

pub(super) fn ip_text(a: u128) -> String {
    let mut s = String::new();
    crate::udf::write_ip(&a.to_be_bytes(), &mut s);
    s
}

/// A procedure as the SQL groups them: program, version and procedure
/// labels (ordered in that order).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Label {
    pub(super) program: String,
    pub(super) version: u32,
    pub(super) procedure: String,
}

impl Label {
    pub(super) fn of(p: &Procedure) -> Label {
        Label {
            program: p.program_label().unwrap_or_else(|| "unknown".into()),
            version: p.version.unwrap_or(0),
            procedure: p.procedure_label().unwrap_or_else(|| "unknown".into()),
        }
    }
}

/// The scan threads' parts put together.
pub(super) struct Merged {
    pub(super) totals: BTreeMap<Label, Totals>,
    /// Per label, its busiest second's calls.
    pub(super) peak: HashMap<Label, i64>,
    /// The calls' time span in seconds (at least 1).
    pub(super) seconds: f64,
    /// Latencies per (server, procedure), as each thread kept them.
    pub(super) latencies: BTreeMap<(u128, Procedure), Vec<Latencies>>,
    pub(super) clients: BTreeMap<u128, ClientIo>,
}

/// A latency row's count, mean, median, 90th and 99th percentile and
/// maximum, with its latencies merged.
pub(super) struct RowStats {
    pub(super) row: usize,
    pub(super) stats: [i64; 6],
    pub(super) values: Latencies,
}

/// The latency table and, if asked for, its samples.
pub(super) struct LatencyTable {
    pub(super) columns: Vec<ArrayRef>,
    pub(super) samples: BTreeMap<String, Vec<i64>>,
}

/// An NFS client, by address text, with its calls and bytes.
pub(super) struct ClientRow {
    pub(super) addr: String,
    pub(super) client: ClientIo,
}

/// A file handle with its bytes and operations.
pub(super) struct HandleRow {
    pub(super) fh: u64,
    pub(super) io: HandleIo,
}

/// The parts merged; procedures by their labels, as the SQL groups them.
pub(super) fn merge_parts(rpc_parts: Vec<RpcPart>) -> Merged {
    let mut totals: BTreeMap<Label, Totals> = BTreeMap::new();
    let mut per_second: HashMap<(Label, i64), i64> = HashMap::new();
    let mut span: Option<(i64, i64)> = None;
    let mut latencies: BTreeMap<(u128, Procedure), Vec<Latencies>> = BTreeMap::new();
    let mut clients: BTreeMap<u128, ClientIo> = BTreeMap::new();
    for part in rpc_parts {
        let labels: Vec<Label> = part.procedures.iter().map(Label::of).collect();
        for (g, t) in part.totals.iter().enumerate() {
            totals.entry(labels[g].clone()).or_default().add(t);
        }
        for ((g, sec), n) in part.per_second {
            *per_second
                .entry((labels[g as usize].clone(), sec))
                .or_default() += n;
        }
        if let Some((lo, hi)) = part.span {
            span = Some(span.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        }
        for ((server, g), v) in part.latencies {
            let key = (server, part.procedures[g as usize].clone());
            latencies.entry(key).or_default().push(v);
        }
        for (a, c) in part.clients {
            let e = clients.entry(a).or_default();
            e.calls += c.calls;
            e.io.add(&c.io);
        }
    }
    let mut peak: HashMap<Label, i64> = HashMap::new();
    for ((label, _), n) in per_second {
        let p = peak.entry(label).or_default();
        *p = (*p).max(n);
    }
    Merged {
        totals,
        peak,
        seconds: span.map_or(1.0, |(lo, hi)| ((hi - lo) as f64 / 1e9).max(1.0)),
        latencies,
        clients,
    }
}

/// The procedures table: busiest first.
pub(super) fn procedures_table(m: &Merged) -> Vec<ArrayRef> {
    let mut procs: Vec<(&Label, &Totals)> = m.totals.iter().collect();
    procs.sort_by(|a, b| b.1.calls.cmp(&a.1.calls).then_with(|| a.0.cmp(b.0)));
    let seconds = m.seconds;
    vec![
        Arc::new(StringArray::from_iter_values(
            procs.iter().map(|p| &p.0.program),
        )),
        Arc::new(UInt32Array::from_iter_values(
            procs.iter().map(|p| p.0.version),
        )),
        Arc::new(StringArray::from_iter_values(
            procs.iter().map(|p| &p.0.procedure),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| p.1.calls),
        )),
        Arc::new(Float64Array::from_iter_values(
            procs.iter().map(|p| p.1.calls as f64 / seconds),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| m.peak.get(p.0).copied().unwrap_or(0)),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| p.1.no_reply),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| p.1.no_call),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| p.1.retransmitted),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| p.1.errors),
        )),
        Arc::new(UInt64Array::from_iter_values(
            procs.iter().map(|p| p.1.call_bytes),
        )),
        Arc::new(UInt64Array::from_iter_values(
            procs.iter().map(|p| p.1.reply_bytes),
        )),
    ]
}

/// The latency table: quantiles per server and procedure.
pub(super) fn latency_table(
    latencies: BTreeMap<(u128, Procedure), Vec<Latencies>>,
    threads: usize,
    want_samples: bool,
) -> Result<LatencyTable, AnalyzeError> {
    let mut rows: Vec<LatencyRow> = latencies
        .into_iter()
        .map(|((server, p), values)| LatencyRow {
            server: ip_text(server),
            program: p.program_label(),
            version: p.version,
            procedure: p.procedure_label(),
            count: values.iter().map(Latencies::len).sum(),
            values,
        })
        .collect();
    rows.sort_by(|a, b| {
        a.server
            .cmp(&b.server)
            .then(b.count.cmp(&a.count))
            .then_with(|| a.program.cmp(&b.program))
            .then(a.version.cmp(&b.version))
            .then_with(|| a.procedure.cmp(&b.procedure))
    });
    let done = latency_stats(&mut rows, threads)?;
    let mut samples: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (r, d) in rows.iter().zip(&done).filter(|_| want_samples) {
        let label = format!(
            "{} v{} {}",
            r.program.as_deref().unwrap_or(""),
            r.version.map(|v| v.to_string()).unwrap_or_default(),
            r.procedure.as_deref().unwrap_or("")
        );
        let s = samples.entry(label).or_default();
        s.extend(d.values.short.iter().map(|&x| i64::from(x)));
        s.extend_from_slice(&d.values.long);
    }
    let stat = |k: usize| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(
            done.iter().map(|d| d.stats[k]),
        ))
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| &r.server),
        )),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.program.as_deref()),
        )),
        Arc::new(UInt32Array::from_iter(rows.iter().map(|r| r.version))),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.procedure.as_deref()),
        )),
        stat(0),
        stat(1),
        stat(2),
        stat(3),
        stat(4),
        stat(5),
    ];
    Ok(LatencyTable { columns, samples })
}

/// The rows' quantiles over the threads (a few procedures hold most
/// calls, so two threads take ~0.7 of one's time): each merges its row's
/// latencies (the other threads' added to the longest) and selects from
/// them. Takes the rows' values; gives them back merged, in the rows'
/// order.
pub(super) fn latency_stats(
    rows: &mut [LatencyRow],
    threads: usize,
) -> Result<Vec<RowStats>, AnalyzeError> {
    let parts: Vec<std::sync::Mutex<Vec<Latencies>>> = (rows.iter_mut())
        .map(|r| std::sync::Mutex::new(std::mem::take(&mut r.values)))
        .collect();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(rows[k].count));
    let mut done = par_map(threads, &order, |&k| {
        let mut parts = std::mem::take(&mut *parts[k].lock().unwrap_or_else(|p| p.into_inner()));
        parts.sort_by_key(Latencies::len);
        let mut v = parts.pop().unwrap_or_default();
        parts.iter().for_each(|o| v.append(o));
        drop(parts);
        let n = v.len();
        let mean = (v.sum() as f64 / n as f64) as i64;
        let max = v.max();
        let q = v.percentiles(&[0.5, 0.9, 0.99]);
        let q = |k: usize| q[k].round() as i64;
        Ok(RowStats {
            row: k,
            stats: [n as i64, mean, q(0), q(1), q(2), max],
            values: v,
        })
    })?;
    // Back in the rows' order.
    done.sort_unstable_by_key(|d| d.row);
    Ok(done)
}

/// The clients table: NFS callers only, by bytes.
pub(super) fn clients_table(clients: BTreeMap<u128, ClientIo>) -> Vec<ArrayRef> {
    let mut cl: Vec<ClientRow> = clients
        .into_iter()
        .filter(|(_, c)| c.calls > 0)
        .map(|(a, client)| ClientRow {
            addr: ip_text(a),
            client,
        })
        .collect();
    cl.sort_by(|a, b| {
        (b.client.io.read + b.client.io.written)
            .cmp(&(a.client.io.read + a.client.io.written))
            .then_with(|| a.addr.cmp(&b.addr))
    });
    vec![
        Arc::new(StringArray::from_iter_values(cl.iter().map(|c| &c.addr))),
        Arc::new(Int64Array::from_iter_values(
            cl.iter().map(|c| c.client.calls),
        )),
        Arc::new(Int64Array::from_iter_values(
            cl.iter().map(|c| c.client.io.read),
        )),
        Arc::new(Int64Array::from_iter_values(
            cl.iter().map(|c| c.client.io.written),
        )),
        Arc::new(Int64Array::from_iter_values(
            cl.iter().map(|c| c.client.io.reads),
        )),
        Arc::new(Int64Array::from_iter_values(
            cl.iter().map(|c| c.client.io.writes),
        )),
    ]
}
