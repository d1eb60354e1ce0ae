//! `weir analyze ... --emit-sql`: the statements an analysis runs, as one
//! script that another engine (Spark SQL, DuckDB) runs over the same
//! Parquet files. The statements are built by the same functions the
//! analyses run ([`crate::analyses`], [`crate::rpc`]); what the session
//! binds as views (the `flows` view, the `intervals` table of `bursts`) is
//! inlined as subqueries, so each statement needs only the dataset's
//! tables.

use std::fmt::Write;

use crate::analyses::{self, By};
use crate::error::AnalyzeError;
use crate::session::Session;
use crate::sql::{fill, strip_comments};
use crate::window::TimeWindow;

/// One statement of the script: its result's name, what the result is,
/// and the SQL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    pub name: String,
    pub note: String,
    pub sql: String,
}

/// What to emit: the analysis and its settings (as `weir analyze` takes
/// them).
#[derive(Clone, Debug)]
pub struct Request<'a> {
    pub kind: &'a str,
    /// `top`: hosts, ports or pairs.
    pub what: Option<&'a str>,
    pub by: By,
    /// flows, top: rows (0: all); rpc: busiest file handles (0: all).
    pub limit: usize,
    pub every_ns: i64,
    pub sample_ns: i64,
    pub scales_ns: &'a [i64],
}

/// The analyses `--emit-sql` covers: those whose whole answer is SQL
/// ([`crate::answer::Kind::emits_sql`]).
pub fn kinds() -> Vec<&'static str> {
    crate::answer::KINDS
        .iter()
        .filter(|k| k.emits_sql)
        .map(|k| k.name)
        .collect()
}

/// The span the statements of analysis `kind` place their intervals over,
/// as the analysis itself does: for `rates` its windows' span
/// ([`analyses::rates_span`]), for the others the data's in the window.
pub fn span_for(kind: &str, session: &Session) -> Option<(i64, i64)> {
    if kind == "rates" {
        analyses::rates_span(session)
    } else {
        session.span_ns()
    }
}

/// The statements of `req` over `span` ([`span_for`]: rates and bursts
/// place their intervals by it).
pub fn statements(req: &Request, span: Option<(i64, i64)>) -> Result<Vec<Statement>, AnalyzeError> {
    let st = |name: &str, note: &str, sql: String| Statement {
        name: name.into(),
        note: note.into(),
        sql: strip_comments(&sql).trim().to_string(),
    };
    let need_span = || {
        span.ok_or_else(|| {
            AnalyzeError::Usage(format!(
                "{}: the datasets hold no frames in the window, and its intervals start at the \
                 first frame; give a dataset with frames",
                req.kind
            ))
        })
    };
    Ok(match req.kind {
        "summary" => vec![
            st(
                "totals",
                "frames, bytes, span",
                analyses::SUMMARY_TOTALS_SQL.into(),
            ),
            st(
                "protocols",
                "frames and bytes per protocol",
                analyses::SUMMARY_PROTOCOLS_SQL.into(),
            ),
            st(
                "loss",
                "frames lost, by stage (stats)",
                analyses::SUMMARY_LOSS_SQL.into(),
            ),
        ],
        "flows" => {
            let view = format!("({}) AS flows", analyses::flows_sql().trim());
            vec![st(
                "flows",
                "bidirectional flows, largest first",
                analyses::flows_query_from(req.by, req.limit, &view),
            )]
        }
        "top" => {
            let what = req.what.unwrap_or_default();
            let sql = analyses::top_query(what, req.by, req.limit)?;
            vec![st(&format!("top_{what}"), "the busiest first", sql)]
        }
        "loss" => vec![st(
            "loss",
            "per second and stage (stats)",
            analyses::LOSS_SQL.into(),
        )],
        "rates" => {
            let sql = analyses::rates_query(need_span()?, req.every_ns, req.sample_ns)?;
            vec![st(
                "rates",
                "per window: least, mean and greatest rate",
                sql,
            )]
        }
        "bursts" => analyses::bursts_plan_reading(need_span()?, req.scales_ns, true)?
            .into_iter()
            .map(|(scale, intervals, source)| {
                let sql = source.sql().to_string();
                st(
                    &format!("intervals_{scale}ns"),
                    &format!(
                        "frames and bytes per non-empty interval i of {scale} ns; the span holds \
                         {intervals} intervals, the missing ones empty (weir's percentiles count \
                         them as zero)"
                    ),
                    sql,
                )
            })
            .collect(),
        "rpc" => {
            let handles = fill(
                crate::rpc::RPC_HANDLES_SQL,
                &[("limit", analyses::sql_limit(req.limit).to_string())],
            )?;
            vec![
                st(
                    "procedures",
                    "calls, ops/s, outcomes, bytes per procedure",
                    crate::rpc::RPC_PROCEDURES_SQL.into(),
                ),
                st(
                    "latency",
                    "latency quantiles per server and procedure",
                    crate::rpc::RPC_LATENCY_SQL.into(),
                ),
                st(
                    "clients",
                    "NFS bytes read and written per client",
                    crate::rpc::RPC_CLIENTS_SQL.into(),
                ),
                st("handles", "busiest file handles", handles),
            ]
        }
        "dns" | "tls" | "http" => crate::app::queries(req.kind)
            .unwrap_or_default()
            .iter()
            .map(|(name, sql)| {
                let limit = analyses::sql_limit(req.limit).to_string();
                Ok(st(name, name, fill(sql, &[("limit", limit)])?))
            })
            .collect::<Result<Vec<_>, AnalyzeError>>()?,
        other => {
            return Err(AnalyzeError::Usage(format!(
                "--emit-sql covers {}, not {other}",
                kinds().join(", ")
            )));
        }
    })
}

/// The condition `--from`/`--to` and a filter put on the tables, in
/// portable SQL (on `ts_ns`), or `None` when there is none; `tunnelled`:
/// whether the records may hold tunnelled frames (see
/// [`crate::filter::to_sql`]).
pub fn restriction(
    window: TimeWindow,
    filter: Option<&str>,
    tunnelled: bool,
) -> Result<Option<String>, AnalyzeError> {
    let mut parts = Vec::new();
    if let Some(f) = window.from_ns {
        parts.push(format!("ts_ns >= {f}"));
    }
    if let Some(t) = window.to_ns {
        parts.push(format!("ts_ns < {t}"));
    }
    if let Some(f) = filter {
        parts.push(crate::filter::to_sql(f, tunnelled)?);
    }
    Ok((!parts.is_empty()).then(|| parts.join(" AND ")))
}

/// The script: a header saying what to bind, then each statement after a
/// `-- result: NAME` line, ending with `;`.
pub fn script(
    title: &str,
    datasets: &[String],
    restriction: Option<&str>,
    statements: &[Statement],
) -> String {
    let all: String = statements.iter().map(|s| s.sql.as_str()).collect();
    let reads = |table: &str| {
        all.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == table)
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "-- {title}, as SQL for another engine (weir {}).",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(s, "-- Tables to bind, over each dataset's Parquet files:");
    let tables = [
        ("packets", store::packet_schema()),
        ("stats", store::stats::stats_schema()),
        ("rpc", store::rpc::rpc_schema()),
        ("nfs", store::rpc::nfs_schema()),
        ("dns", store::app::dns_schema()),
        ("tls", store::app::tls_schema()),
        ("http", store::app::http_schema()),
    ];
    for (table, _) in &tables {
        if reads(table) {
            let _ = writeln!(s, "--   {table:<8} DATASET/{table}/*.parquet");
        }
    }
    let _ = writeln!(
        s,
        "-- A dataset may lack a table's files (a conversion has no stats): bind an empty table."
    );
    for (table, schema) in &tables {
        if reads(table) {
            let _ = writeln!(s, "-- columns of {table}: {}", ddl(schema));
        }
    }
    let _ = writeln!(
        s,
        "-- each with one more column, ts_ns BIGINT: ts in ns since the epoch (DataFusion: \
         CAST(ts AS BIGINT);\n-- Spark: read with spark.sql.legacy.parquet.nanosAsLong=true, \
         then ts itself). Addresses are 16-byte binary."
    );
    if reads("ip_text") {
        let _ = writeln!(
            s,
            "-- Function: ip_text(addr) -> text: ::ffff:a.b.c.d as a.b.c.d, any other \
             address in RFC 5952 form."
        );
    }
    if let Some(r) = restriction {
        let _ = writeln!(s, "-- Only rows where: {r}");
    }
    if !datasets.is_empty() {
        let _ = writeln!(s, "-- Datasets: {}", datasets.join(" "));
    }
    for st in statements {
        let _ = writeln!(s, "\n-- result: {} ({})", st.name, st.note);
        let _ = writeln!(s, "{};", st.sql);
    }
    s
}

/// A table's columns as a SQL column list (`name TYPE, ...`), with the
/// types Spark reads weir's Parquet columns as (unsigned integers widened,
/// timestamps as BIGINT ns).
pub fn ddl(schema: &datafusion::arrow::datatypes::Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), ddl_type(f.data_type())))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A column type as Spark's DDL says it.
fn ddl_type(t: &datafusion::arrow::datatypes::DataType) -> String {
    use datafusion::arrow::datatypes::DataType as T;
    match t {
        T::Int8 => "TINYINT".into(),
        T::Int16 | T::UInt8 => "SMALLINT".into(),
        T::Int32 | T::UInt16 => "INT".into(),
        T::Int64 | T::UInt32 | T::Timestamp(..) => "BIGINT".into(),
        T::UInt64 => "DECIMAL(20,0)".into(),
        T::Float32 => "FLOAT".into(),
        T::Float64 => "DOUBLE".into(),
        T::Boolean => "BOOLEAN".into(),
        T::Utf8 | T::LargeUtf8 => "STRING".into(),
        // The DNS answers, TLS cipher lists and the like.
        T::List(f) | T::LargeList(f) => format!("ARRAY<{}>", ddl_type(f.data_type())),
        _ => "BINARY".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(kind: &str) -> Request<'_> {
        Request {
            kind,
            what: Some("hosts"),
            by: By::Bytes,
            limit: 0,
            every_ns: 1_000_000_000,
            sample_ns: 100_000_000,
            scales_ns: &[1_000_000, 10_000_000, 3_000_000],
        }
    }

    #[test]
    fn statements_stand_alone() {
        for kind in kinds() {
            let sts = statements(&req(kind), Some((1_000, 5_000_000_000))).unwrap();
            assert!(!sts.is_empty());
            for st in &sts {
                // Nothing the session would have to bind beyond the tables.
                assert!(!st.sql.contains("${"), "{kind}: {}", st.sql);
                assert!(!st.sql.contains("FROM flows\n") && !st.sql.ends_with("FROM flows"));
                assert!(!st.sql.contains("FROM intervals"), "{kind}: {}", st.sql);
                assert!(!st.sql.contains(';'), "{kind}");
            }
        }
        let bursts = statements(&req("bursts"), Some((0, 1))).unwrap();
        assert_eq!(bursts.len(), 3);
        assert!(bursts[1].sql.contains(") AS intervals"));
        assert!(statements(&req("stack"), None).is_err());
        assert!(statements(&req("rates"), None).is_err());
    }

    #[test]
    fn the_script_names_what_it_reads() {
        let sts = statements(&req("flows"), None).unwrap();
        let s = script(
            "weir analyze flows",
            &["/d".to_string()],
            Some("ts_ns >= 5"),
            &sts,
        );
        assert!(s.contains("--   packets  DATASET/packets/*.parquet"));
        assert!(!s.contains("--   stats"));
        assert!(s.contains("-- Function: ip_text"));
        assert!(s.contains("-- Only rows where: ts_ns >= 5"));
        assert!(s.contains("\n-- result: flows ("));
        assert!(s.trim_end().ends_with(';'));
        let w = TimeWindow {
            from_ns: Some(5),
            to_ns: None,
        };
        assert_eq!(
            restriction(w, Some("tcp"), false)
                .unwrap()
                .unwrap()
                .split(" AND ")
                .count(),
            2
        );
        assert_eq!(
            restriction(TimeWindow::default(), None, false).unwrap(),
            None
        );
    }
}
