//! `weir analyze stack`: the host-stack view per socket (the `stack`
//! table, written by `weir stack`). What SQL says portably is in
//! `sql/stack_*.sql`; the quantiles of the write-to-wire delay are taken
//! here from the per-write rows that SQL returns (exact, nearest rank), as
//! `bursts` does with its interval counts.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, AsArray, Float64Array, Int64Array, RecordBatch, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Int64Type, Schema, UInt32Type, UInt64Type};

use crate::analyses::{Table, fill};
use crate::error::AnalyzeError;
use crate::session::Session;

pub const STACK_SOCKETS_SQL: &str = include_str!("sql/stack_sockets.sql");
pub const STACK_DELAYS_SQL: &str = include_str!("sql/stack_delays.sql");
pub const STACK_TCP_SQL: &str = include_str!("sql/stack_tcp.sql");

/// The result of `stack`.
pub struct StackAnalysis {
    /// `sockets`: one row per socket (stack_sockets.sql).
    pub sockets: Table,
    /// `write_to_wire`: per socket, how long application writes waited
    /// before the device sent their last byte.
    pub delays: Table,
    /// TCP state over time of the busiest sockets (for plots and JSON).
    pub tcp: Table,
    /// Per socket: every write's delay in ns, sorted (for the CCDF plot).
    pub delay_samples: BTreeMap<u64, Vec<i64>>,
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
/// `plot_sockets` busiest sockets.
pub fn stack(session: &Session, plot_sockets: usize) -> Result<StackAnalysis, AnalyzeError> {
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
        let sql = fill(STACK_TCP_SQL, &[("cookies", list)])?;
        let (schema, batches) = session.query_with_schema(&sql)?;
        Table {
            name: "tcp".into(),
            schema,
            batches,
        }
    };
    Ok(StackAnalysis {
        sockets,
        delays,
        tcp,
        delay_samples: samples,
    })
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
}
