//! The built-in analyses. Each is SQL text in `sql/` with `${name}`
//! parameters filled in here; the text is portable (DataFusion and Spark
//! SQL) and reads only the tables `packets` and `stats` (plus the view
//! `flows`, itself `sql/flows.sql`).
//!
//! The answers themselves live by job, in the order they depend on each
//! other: [`crate::sql`] (the text), [`crate::table`] (a result),
//! [`crate::rates`] and [`crate::bursts`] (over the passes); this module
//! holds summary, flows, top and loss, and names them all in one place.

use crate::error::AnalyzeError;
use crate::loss_pass;
use crate::session::Session;
use crate::table::run;

pub use crate::bursts::{
    BURST_PERCENTILES, BurstScale, BurstSource, burst_tables, bursts, bursts_by_sql, bursts_plan,
    bursts_plan_reading, default_burst_scales, default_burst_scales_for,
};
pub use crate::grid::{MAX_RATE_WINDOWS, RateGrid};
pub use crate::rates::{
    DEFAULT_RATE_WINDOWS, default_rate_grid, default_rate_grid_for, rates, rates_by_sql,
    rates_query, rates_span, round_lengths_ns,
};
pub use crate::sql::{
    FLOWS_SQL, INTERVALS_SQL, LOSS_SQL, RATES_SQL, ROLLUP_SQL, SUMMARY_LOSS_SQL,
    SUMMARY_PROTOCOLS_SQL, SUMMARY_TOTALS_SQL, TOP_HOSTS_SQL, TOP_PAIRS_SQL, TOP_PORTS_SQL, fill,
    flows_sql, sql_limit,
};
pub use crate::table::{AnsweredBy, Table};

/// `summary`: totals, protocol mix, loss.
pub fn summary(session: &Session) -> Result<Vec<Table>, AnalyzeError> {
    Ok(vec![
        run(session, "totals", SUMMARY_TOTALS_SQL)?,
        run(session, "protocols", SUMMARY_PROTOCOLS_SQL)?,
        run(session, "loss", SUMMARY_LOSS_SQL)?,
    ])
}

/// What `flows` lists first, and how many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    Bytes,
    Frames,
}

impl By {
    fn column(self) -> &'static str {
        match self {
            By::Bytes => "bytes",
            By::Frames => "frames",
        }
    }
}

/// The query of `flows`: the view's rows, largest first; `limit` 0 lists
/// all.
pub fn flows_query(by: By, limit: usize) -> String {
    flows_query_from(by, limit, "flows")
}

/// [`flows_query`] reading `source`: the view's name, or the view's own
/// query inlined as `(...) AS flows` for an engine without it.
pub fn flows_query_from(by: By, limit: usize, source: &str) -> String {
    let order = match by {
        By::Bytes => "fwd_bytes + rev_bytes",
        By::Frames => "fwd_frames + rev_frames",
    };
    let limit = if limit == 0 {
        String::new()
    } else {
        format!(" LIMIT {limit}")
    };
    format!(
        "SELECT ip_text(src_ip) AS src, src_port, ip_text(dst_ip) AS dst, dst_port, proto, \
         first_ns, last_ns, duration_ns, fwd_frames, fwd_bytes, rev_frames, rev_bytes, \
         fwd_payload, rev_payload, fwd_tcp_flags, rev_tcp_flags, fwd_retrans, rev_retrans, \
         handshake_rtt_ns, server_rtt_ns, client_rtt_ns \
         FROM {source} ORDER BY {order} DESC, first_ns, src, src_port, dst, dst_port, proto{limit}"
    )
}

/// `flows`, largest first; `limit` 0 lists all.
pub fn flows(session: &Session, by: By, limit: usize) -> Result<Table, AnalyzeError> {
    run(session, "flows", &flows_query(by, limit))
}

/// The query of `top --by bytes|frames hosts|ports|pairs`; `limit` 0 lists
/// all.
pub fn top_query(what: &str, by: By, limit: usize) -> Result<String, AnalyzeError> {
    let text = match what {
        "hosts" => TOP_HOSTS_SQL,
        "ports" => TOP_PORTS_SQL,
        "pairs" => TOP_PAIRS_SQL,
        other => {
            return Err(AnalyzeError::Usage(format!(
                "top {other}: choose hosts, ports or pairs"
            )));
        }
    };
    fill(
        text,
        &[
            ("by", by.column().into()),
            ("limit", sql_limit(limit).to_string()),
        ],
    )
}

/// `top --by bytes|frames hosts|ports|pairs`.
pub fn top(session: &Session, what: &str, by: By, limit: usize) -> Result<Table, AnalyzeError> {
    run(
        session,
        &format!("top {what}"),
        &top_query(what, by, limit)?,
    )
}

/// `loss`: per second and stage, from the stats table, and which way it
/// was answered.
pub fn loss(session: &Session) -> Result<(Table, AnsweredBy), AnalyzeError> {
    if let Some(files) = loss_pass::files_for(session)? {
        let columns = loss_pass::run(&files, session.window(), session.threads())?;
        let schema = session.plan_schema(LOSS_SQL)?;
        return Ok((
            crate::columns::table("loss", schema, columns)?,
            AnsweredBy::Pass,
        ));
    }
    Ok((loss_by_sql(session)?, AnsweredBy::Sql))
}

/// `loss` by its SQL.
pub fn loss_by_sql(session: &Session) -> Result<Table, AnalyzeError> {
    run(session, "loss", LOSS_SQL)
}
