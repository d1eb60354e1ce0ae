//! The SQL text of the analyses (`sql/`) and how it is made ready to run:
//! `${name}` parameters filled in, comment lines stripped, a `--limit` as
//! a LIMIT Spark takes, floats as SQL literals. At the bottom of the
//! engine: it knows no session and no table.

use crate::error::AnalyzeError;

pub const FLOWS_SQL: &str = include_str!("sql/flows.sql");
pub const SUMMARY_TOTALS_SQL: &str = include_str!("sql/summary_totals.sql");
pub const SUMMARY_PROTOCOLS_SQL: &str = include_str!("sql/summary_protocols.sql");
pub const SUMMARY_LOSS_SQL: &str = include_str!("sql/summary_loss.sql");
pub const LOSS_SQL: &str = include_str!("sql/loss.sql");
pub const RATES_SQL: &str = include_str!("sql/rates.sql");
pub const INTERVALS_SQL: &str = include_str!("sql/intervals.sql");
pub const ROLLUP_SQL: &str = include_str!("sql/rollup.sql");
pub const TOP_HOSTS_SQL: &str = include_str!("sql/top_hosts.sql");
pub const TOP_PORTS_SQL: &str = include_str!("sql/top_ports.sql");
pub const TOP_PAIRS_SQL: &str = include_str!("sql/top_pairs.sql");

/// The flows view's query (without its leading comment lines).
pub fn flows_sql() -> String {
    strip_comments(FLOWS_SQL)
}

/// `sql` with every `${name}` replaced by its value. A name without a
/// value is a bug in the caller, reported rather than sent to the engine.
pub fn fill(sql: &str, params: &[(&str, String)]) -> Result<String, AnalyzeError> {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(AnalyzeError::Usage("unclosed ${ in an analysis".into()));
        };
        let name = &after[..end];
        let Some((_, value)) = params.iter().find(|(n, _)| *n == name) else {
            return Err(AnalyzeError::Usage(format!(
                "analysis parameter {name} has no value"
            )));
        };
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

pub(crate) fn strip_comments(sql: &str) -> String {
    sql.lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A `--limit` as a SQL LIMIT: 0 means all rows. Spark takes a LIMIT of
/// type INT only.
pub fn sql_limit(limit: usize) -> usize {
    if limit == 0 {
        i32::MAX as usize
    } else {
        limit.min(i32::MAX as usize)
    }
}

pub(crate) fn float_literal(x: f64) -> String {
    let s = format!("{x:?}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_parameters_and_refuses_missing_ones() {
        let s = fill("a ${x} b ${y}", &[("x", "1".into()), ("y", "2".into())]).unwrap();
        assert_eq!(s, "a 1 b 2");
        assert!(fill("a ${z}", &[("x", "1".into())]).is_err());
    }
}
