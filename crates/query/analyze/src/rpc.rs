//! `weir analyze rpc`: what the file servers did, from the rpc and nfs
//! tables (`weir convert`/`weir capture` with RPC decoding). The SQL is in
//! `sql/rpc_*.sql`; latency samples for the CCDF plot are gathered here.

use std::collections::BTreeMap;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Int64Type;

use crate::error::AnalyzeError;
use crate::rpc_pass::{self, DatasetFiles};
use crate::session::Session;
use crate::sql::{fill, sql_limit};
use crate::table::Table;

pub const RPC_PROCEDURES_SQL: &str = include_str!("sql/rpc_procedures.sql");
pub const RPC_LATENCY_SQL: &str = include_str!("sql/rpc_latency.sql");
pub const RPC_CLIENTS_SQL: &str = include_str!("sql/rpc_clients.sql");
pub const RPC_HANDLES_SQL: &str = include_str!("sql/rpc_handles.sql");

/// Per-procedure latencies, for the plot: one query, no per-row work in SQL.
const LATENCY_SAMPLES_SQL: &str = "SELECT concat(coalesce(program_name, CAST(program AS STRING)), \
     ' v', CAST(version AS STRING), ' ', coalesce(procedure_name, CAST(procedure AS STRING))) \
     AS label, latency_ns FROM rpc WHERE latency_ns IS NOT NULL";

pub struct RpcAnalysis {
    /// `procedures`: calls, ops/s, outcomes and bytes per procedure.
    pub procedures: Table,
    /// `latency`: response-time quantiles per server and procedure.
    pub latency: Table,
    /// `clients`: NFS bytes read and written per client.
    pub clients: Table,
    /// `handles`: the busiest file handles by bytes.
    pub handles: Table,
    /// With `samples`: every answered call's latency in ns, sorted, per
    /// "program vN PROC" (for the CCDF plot).
    pub samples: BTreeMap<String, Vec<i64>>,
}

fn table(session: &Session, name: &str, sql: &str) -> Result<Table, AnalyzeError> {
    let (schema, batches) = session.query_with_schema(sql)?;
    Ok(Table {
        name: name.into(),
        schema,
        batches,
    })
}

/// File handles `rpc` lists when not told how many.
pub const TOP_HANDLES: usize = 20;

/// `rpc`, with the `top_handles` busiest file handles (0: all), and the
/// latency samples if `samples`. Runs as one pass over the columns
/// (`rpc_pass`); through the SQL when a file lacks a column the
/// pass reads (the SQL reads it as null).
pub fn rpc(
    session: &Session,
    top_handles: usize,
    samples: bool,
) -> Result<RpcAnalysis, AnalyzeError> {
    let top_handles = sql_limit(top_handles);
    let handles_sql = fill(RPC_HANDLES_SQL, &[("limit", top_handles.to_string())])?;
    let sql = [
        RPC_PROCEDURES_SQL,
        RPC_LATENCY_SQL,
        RPC_CLIENTS_SQL,
        handles_sql.as_str(),
    ];
    let files = session
        .manifests()
        .iter()
        .map(|(root, m)| DatasetFiles::of(root, m))
        .collect::<Result<Vec<_>, _>>()?;
    if !rpc_pass::readable(&files)? {
        return rpc_sql(session, &sql, samples);
    }
    let r = rpc_pass::run(
        &files,
        session.window(),
        session.threads(),
        top_handles,
        samples,
    )?;
    let [procedures, latency, clients, handles] = r.tables;
    let t = |(cols, name): (Vec<_>, &str), sql: &str| {
        crate::columns::table(name, session.plan_schema(sql)?, cols)
    };
    let mut out = RpcAnalysis {
        procedures: t(procedures, sql[0])?,
        latency: t(latency, sql[1])?,
        clients: t(clients, sql[2])?,
        handles: t(handles, sql[3])?,
        samples: BTreeMap::new(),
    };
    out.samples = r.samples;
    for v in out.samples.values_mut() {
        v.sort_unstable();
    }
    Ok(out)
}

/// The same analysis by its SQL, query by query.
pub fn rpc_sql(
    session: &Session,
    sql: &[&str; 4],
    samples: bool,
) -> Result<RpcAnalysis, AnalyzeError> {
    Ok(RpcAnalysis {
        procedures: table(session, "procedures", sql[0])?,
        latency: table(session, "latency", sql[1])?,
        clients: table(session, "clients", sql[2])?,
        handles: table(session, "handles", sql[3])?,
        samples: if samples {
            latency_samples(session)?
        } else {
            BTreeMap::new()
        },
    })
}

/// Every answered call's latency in ns, sorted, per "program vN PROC".
fn latency_samples(session: &Session) -> Result<BTreeMap<String, Vec<i64>>, AnalyzeError> {
    let mut out: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for b in session.query(LATENCY_SAMPLES_SQL)? {
        let label = datafusion::arrow::compute::cast(
            b.column(0),
            &datafusion::arrow::datatypes::DataType::Utf8,
        )
        .map_err(|e| AnalyzeError::Engine(format!("latency labels: {e}")))?;
        let label = label.as_string::<i32>();
        let lat = b.column(1).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            if label.is_null(i) || lat.is_null(i) {
                continue;
            }
            out.entry(label.value(i).to_string())
                .or_default()
                .push(lat.value(i));
        }
    }
    for v in out.values_mut() {
        v.sort_unstable();
    }
    Ok(out)
}
