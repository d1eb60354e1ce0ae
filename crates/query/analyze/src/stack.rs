//! `weir analyze stack`: the host-stack view per socket, from either form
//! `weir stack` records: the per-socket intervals of its default mode
//! (`stack_intervals`), or every event one by one (`stack`, `--events
//! all`). Both give the same tables; [`StackAnalysis::form`] says which
//! answered. What SQL says portably is in `sql/stack_*.sql`. From events,
//! the quantiles of the write-to-wire delay are taken here from the
//! per-write rows that SQL returns (exact, nearest rank), as `bursts` does
//! with its interval counts; from intervals, from the kernel's log2
//! histograms (each quantile the upper bound of its bucket: within a
//! factor of two).

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, AsArray, Float64Array, Int64Array, RecordBatch, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, UInt32Type, UInt64Type};

use crate::error::AnalyzeError;
use crate::session::Session;
use crate::sql::fill;
use crate::table::Table;

pub const STACK_SOCKETS_SQL: &str = include_str!("sql/stack_sockets.sql");
pub const STACK_DELAYS_SQL: &str = include_str!("sql/stack_delays.sql");
pub const STACK_TCP_SQL: &str = include_str!("sql/stack_tcp.sql");
pub const STACK_SOCKETS_INTERVALS_SQL: &str = include_str!("sql/stack_sockets_intervals.sql");
pub const STACK_DELAYS_INTERVALS_SQL: &str = include_str!("sql/stack_delays_intervals.sql");
pub const STACK_TCP_INTERVALS_SQL: &str = include_str!("sql/stack_tcp_intervals.sql");

/// Which table answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackForm {
    /// `stack_intervals`: per-socket intervals, recorded at this level
    /// (`store::stack_intervals::LEVELS`).
    Intervals { level: &'static str },
    /// `stack`: every event (`--events all`).
    Events,
}

impl StackForm {
    /// For the answer's "how": which table, and which columns the level
    /// it was recorded at leaves empty.
    pub fn describe(self) -> String {
        match self {
            StackForm::Intervals { level } => {
                let empty = store::stack_intervals::level_leaves_empty(level);
                let mut s = format!(
                    "answered from the stack_intervals table (per-socket intervals, level \
                     {level}"
                );
                if empty.is_empty() {
                    s.push_str(
                        "; write_to_wire from sampled writes, quantiles within a factor of 2)",
                    );
                } else {
                    s.push_str(&format!(
                        "; it leaves these columns empty: {}; weir stack --with-device or \
                         --with-delay fills them)",
                        empty.join(", ")
                    ));
                }
                s
            }
            StackForm::Events => "answered from the stack table (every event)".into(),
        }
    }
}

/// The level the intervals were recorded at, from which columns they
/// fill: the per-packet counts (app_writes) come from the device level
/// on, the delay histogram at the delay level.
fn interval_level(session: &Session) -> Result<&'static str, AnalyzeError> {
    let b = session.query(
        "SELECT count(app_writes) AS per_packet, count(delay_writes) AS delays \
         FROM stack_intervals",
    )?;
    let Some(b) = b.first().filter(|b| b.num_rows() > 0) else {
        return Ok("walk");
    };
    let per_packet = column(b, "per_packet")?[0].unwrap_or(0);
    let delays = column(b, "delays")?[0].unwrap_or(0);
    Ok(if delays > 0 {
        "delay"
    } else if per_packet > 0 {
        "device"
    } else {
        "walk"
    })
}

/// The result of `stack`.
pub struct StackAnalysis {
    /// `sockets`: one row per socket (stack_sockets.sql).
    pub sockets: Table,
    /// `write_to_wire`: per socket, how long application writes waited
    /// before the device sent their last byte.
    pub delays: Table,
    /// TCP state over time of the busiest sockets (for plots and JSON).
    pub tcp: Table,
    /// Per socket: every write's delay in ns, sorted (for the CCDF plot);
    /// from intervals, each sampled write at its bucket's upper bound.
    pub delay_samples: BTreeMap<u64, Vec<i64>>,
    /// Which table answered.
    pub form: StackForm,
}

/// Quantiles reported for the write-to-wire delay.
pub const DELAY_QUANTILES: [(&str, f64); 4] = [
    ("p50_delay_ns", 0.50),
    ("p90_delay_ns", 0.90),
    ("p99_delay_ns", 0.99),
    ("max_delay_ns", 1.0),
];

/// The value at quantile `q` of `sorted` (nearest rank).
pub fn nearest_rank(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

fn u64_values(a: &dyn Array) -> Result<Vec<Option<u64>>, AnalyzeError> {
    let get = |i: usize| -> Option<u64> {
        if a.is_null(i) {
            return None;
        }
        Some(match a.data_type() {
            DataType::UInt64 => a.as_primitive::<UInt64Type>().value(i),
            DataType::UInt32 => a.as_primitive::<UInt32Type>().value(i) as u64,
            DataType::Int64 => a.as_primitive::<Int64Type>().value(i) as u64,
            _ => return None,
        })
    };
    if !matches!(
        a.data_type(),
        DataType::UInt64 | DataType::UInt32 | DataType::Int64
    ) {
        return Err(AnalyzeError::Engine(format!(
            "expected an integer column, got {}",
            a.data_type()
        )));
    }
    Ok((0..a.len()).map(get).collect())
}

fn column(batch: &RecordBatch, name: &str) -> Result<Vec<Option<u64>>, AnalyzeError> {
    let c = batch
        .column_by_name(name)
        .ok_or_else(|| AnalyzeError::Engine(format!("the result has no column {name}")))?;
    u64_values(c.as_ref())
}

/// `stack`: sockets, write-to-wire delays, and the TCP timeline of the
/// `plot_sockets` busiest sockets; from the intervals when the datasets
/// have any (the default mode), else from the events.
pub fn stack(session: &Session, plot_sockets: usize) -> Result<StackAnalysis, AnalyzeError> {
    let n = session.query("SELECT count(*) AS n FROM stack_intervals")?;
    let intervals = match n.first() {
        Some(b) if b.num_rows() > 0 => column(b, "n")?[0].unwrap_or(0) > 0,
        _ => false,
    };
    if intervals {
        from_intervals(session, plot_sockets)
    } else {
        from_events(session, plot_sockets)
    }
}

/// The per-write delays of the events.
fn from_events(session: &Session, plot_sockets: usize) -> Result<StackAnalysis, AnalyzeError> {
    let (schema, batches) = session.query_with_schema(STACK_SOCKETS_SQL)?;
    let sockets = Table {
        name: "sockets".into(),
        schema,
        batches,
    };
    // Per-write delays, gathered per socket.
    let mut samples: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    let mut bytes: BTreeMap<u64, u64> = BTreeMap::new();
    for b in session.query(STACK_DELAYS_SQL)? {
        let cookie = column(&b, "cookie")?;
        let delay = column(&b, "delay_ns")?;
        let size = column(&b, "bytes")?;
        for i in 0..b.num_rows() {
            if let (Some(c), Some(d)) = (cookie[i], delay[i]) {
                samples.entry(c).or_default().push(d as i64);
                *bytes.entry(c).or_default() += size[i].unwrap_or(0);
            }
        }
    }
    for v in samples.values_mut() {
        v.sort_unstable();
    }
    let delays = delay_table(&samples, &bytes)?;
    let tcp = tcp_table(session, &sockets, plot_sockets, STACK_TCP_SQL)?;
    Ok(StackAnalysis {
        sockets,
        delays,
        tcp,
        delay_samples: samples,
        form: StackForm::Events,
    })
}

/// Samples drawn for the plot from a socket's histogram at most (scaled
/// down past this: a CCDF needs the shape, not every write).
const PLOT_SAMPLES: u64 = 200_000;

/// The same tables from the default mode's intervals.
fn from_intervals(session: &Session, plot_sockets: usize) -> Result<StackAnalysis, AnalyzeError> {
    let (schema, batches) = session.query_with_schema(STACK_SOCKETS_INTERVALS_SQL)?;
    let sockets = Table {
        name: "sockets".into(),
        schema,
        batches,
    };
    let mut hists: BTreeMap<u64, DelayHist> = BTreeMap::new();
    for b in session.query(STACK_DELAYS_INTERVALS_SQL)? {
        let cookie = column(&b, "cookie")?;
        let writes = column(&b, "delay_writes")?;
        let sent = column(&b, "app_sent")?;
        let sums = b
            .column_by_name("delay_sum_ns")
            .ok_or_else(|| AnalyzeError::Engine("no delay_sum_ns".into()))?;
        let sums = sums.as_primitive::<Int64Type>();
        let hist = b
            .column_by_name("delay_hist")
            .ok_or_else(|| AnalyzeError::Engine("no delay_hist".into()))?;
        let hist = hist.as_list::<i32>();
        for i in 0..b.num_rows() {
            let Some(c) = cookie[i] else { continue };
            let h = hists.entry(c).or_default();
            h.bytes += sent[i].unwrap_or(0);
            // Below the delay level the histogram is null.
            if hist.is_null(i) || sums.is_null(i) {
                continue;
            }
            h.writes += writes[i].unwrap_or(0);
            h.sum_ns += sums.value(i) as i128;
            let counts = hist.value(i);
            for (k, v) in u64_values(counts.as_ref())?.into_iter().enumerate() {
                if let Some(slot) = h.buckets.get_mut(k) {
                    *slot += v.unwrap_or(0);
                }
            }
        }
    }
    hists.retain(|_, h| h.writes > 0);
    let delays = hist_delay_table(&hists)?;
    let samples = hists
        .iter()
        .map(|(c, h)| {
            let scale = (h.writes as f64 / PLOT_SAMPLES as f64).max(1.0);
            let mut v = Vec::new();
            for (k, n) in h.buckets.iter().enumerate() {
                let n = (*n as f64 / scale).round() as usize;
                v.extend(std::iter::repeat_n(bucket_upper_ns(k), n));
            }
            (*c, v)
        })
        .collect();
    let tcp = tcp_table(session, &sockets, plot_sockets, STACK_TCP_INTERVALS_SQL)?;
    Ok(StackAnalysis {
        sockets,
        delays,
        tcp,
        delay_samples: samples,
        form: StackForm::Intervals {
            level: interval_level(session)?,
        },
    })
}

/// One socket's write-to-wire histogram, merged over its intervals.
#[derive(Default)]
struct DelayHist {
    writes: u64,
    bytes: u64,
    sum_ns: i128,
    buckets: [u64; store::stack_intervals::DELAY_BUCKETS],
}

/// The upper bound of log2 bucket `k`, ns (0 for the bucket of ≤ 0).
pub fn bucket_upper_ns(k: usize) -> i64 {
    if k == 0 { 0 } else { 1i64 << k.min(62) }
}

/// The bucket holding quantile `q` of the counts (nearest rank).
pub fn hist_rank(buckets: &[u64], q: f64) -> Option<usize> {
    let n: u64 = buckets.iter().sum();
    if n == 0 {
        return None;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let mut seen = 0;
    for (k, c) in buckets.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return Some(k);
        }
    }
    None
}

fn hist_delay_table(hists: &BTreeMap<u64, DelayHist>) -> Result<Table, AnalyzeError> {
    let mut fields = vec![
        Field::new("cookie", DataType::UInt64, false),
        Field::new("writes", DataType::UInt64, false),
        Field::new("bytes", DataType::UInt64, false),
        Field::new("mean_delay_us", DataType::Float64, false),
    ];
    for (name, _) in DELAY_QUANTILES {
        fields.push(Field::new(name, DataType::Int64, false));
    }
    let schema = Arc::new(Schema::new(fields));
    let mut cols: Vec<Arc<dyn Array>> = vec![
        Arc::new(UInt64Array::from(hists.keys().copied().collect::<Vec<_>>())),
        Arc::new(UInt64Array::from(
            hists.values().map(|h| h.writes).collect::<Vec<_>>(),
        )),
        Arc::new(UInt64Array::from(
            hists.values().map(|h| h.bytes).collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            hists
                .values()
                .map(|h| h.sum_ns as f64 / h.writes.max(1) as f64 / 1e3)
                .collect::<Vec<_>>(),
        )),
    ];
    for (_, q) in DELAY_QUANTILES {
        cols.push(Arc::new(Int64Array::from(
            hists
                .values()
                .map(|h| hist_rank(&h.buckets, q).map_or(0, bucket_upper_ns))
                .collect::<Vec<_>>(),
        )));
    }
    let batch = RecordBatch::try_new(schema.clone(), cols)
        .map_err(|e| AnalyzeError::Engine(format!("building the delay table: {e}")))?;
    Ok(Table {
        name: "write_to_wire".into(),
        schema,
        batches: vec![batch],
    })
}

/// The TCP timeline (`sql`, filled with the cookies) of the busiest
/// `plot_sockets` sockets of `sockets`.
fn tcp_table(
    session: &Session,
    sockets: &Table,
    plot_sockets: usize,
    sql: &str,
) -> Result<Table, AnalyzeError> {
    // The busiest sockets, in the sockets table's order.
    let mut busiest = Vec::new();
    for b in &sockets.batches {
        for c in column(b, "cookie")?.into_iter().flatten() {
            if busiest.len() < plot_sockets && !busiest.contains(&c) {
                busiest.push(c);
            }
        }
    }
    let tcp = if busiest.is_empty() {
        Table {
            name: "tcp".into(),
            schema: Arc::new(Schema::empty()),
            batches: Vec::new(),
        }
    } else {
        let list = busiest
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let sql = fill(sql, &[("cookies", list)])?;
        let (schema, batches) = session.query_with_schema(&sql)?;
        Table {
            name: "tcp".into(),
            schema,
            batches,
        }
    };
    Ok(tcp)
}

fn delay_table(
    samples: &BTreeMap<u64, Vec<i64>>,
    bytes: &BTreeMap<u64, u64>,
) -> Result<Table, AnalyzeError> {
    let mut fields = vec![
        Field::new("cookie", DataType::UInt64, false),
        Field::new("writes", DataType::UInt64, false),
        Field::new("bytes", DataType::UInt64, false),
        Field::new("mean_delay_us", DataType::Float64, false),
    ];
    for (name, _) in DELAY_QUANTILES {
        fields.push(Field::new(name, DataType::Int64, false));
    }
    let schema = Arc::new(Schema::new(fields));
    let cookies: Vec<u64> = samples.keys().copied().collect();
    let mut cols: Vec<Arc<dyn Array>> = vec![
        Arc::new(UInt64Array::from(cookies.clone())),
        Arc::new(UInt64Array::from(
            samples.values().map(|v| v.len() as u64).collect::<Vec<_>>(),
        )),
        Arc::new(UInt64Array::from(
            cookies
                .iter()
                .map(|c| bytes.get(c).copied().unwrap_or(0))
                .collect::<Vec<_>>(),
        )),
        Arc::new(Float64Array::from(
            samples
                .values()
                .map(|v| v.iter().map(|&d| d as f64).sum::<f64>() / v.len().max(1) as f64 / 1e3)
                .collect::<Vec<_>>(),
        )),
    ];
    for (_, q) in DELAY_QUANTILES {
        cols.push(Arc::new(Int64Array::from(
            samples
                .values()
                .map(|v| nearest_rank(v, q).unwrap_or(0))
                .collect::<Vec<_>>(),
        )));
    }
    let batch = RecordBatch::try_new(schema.clone(), cols)
        .map_err(|e| AnalyzeError::Engine(format!("building the delay table: {e}")))?;
    Ok(Table {
        name: "write_to_wire".into(),
        schema,
        batches: vec![batch],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let v = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
        assert_eq!(nearest_rank(&v, 0.5), Some(50));
        assert_eq!(nearest_rank(&v, 0.9), Some(90));
        assert_eq!(nearest_rank(&v, 0.99), Some(100));
        assert_eq!(nearest_rank(&v, 1.0), Some(100));
        assert_eq!(nearest_rank(&v, 0.0), Some(10));
        assert_eq!(nearest_rank(&[], 0.5), None);
    }

    #[test]
    fn histogram_quantiles_are_their_buckets_upper_bounds() {
        // 10 writes: 5 at ≤ 0, 4 in [512, 1024) ns, 1 in [2^19, 2^20).
        let mut b = [0u64; 32];
        b[0] = 5;
        b[10] = 4;
        b[20] = 1;
        assert_eq!(hist_rank(&b, 0.5).map(bucket_upper_ns), Some(0));
        assert_eq!(hist_rank(&b, 0.9).map(bucket_upper_ns), Some(1024));
        assert_eq!(hist_rank(&b, 0.99).map(bucket_upper_ns), Some(1 << 20));
        assert_eq!(hist_rank(&b, 1.0).map(bucket_upper_ns), Some(1 << 20));
        assert_eq!(hist_rank(&[0; 32], 0.5), None);
    }
}
