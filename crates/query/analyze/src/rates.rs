//! `rates`: frames and bits per second in windows of a grid, by one pass
//! over the columns ([`crate::count_pass`]) or by its SQL; the window
//! picked when none is given.

use crate::count_pass;
use crate::error::AnalyzeError;
use crate::grid::RateGrid;
use crate::session::Session;
use crate::sql::{RATES_SQL, fill, float_literal};
use crate::table::{AnsweredBy, Table, run};

/// The span `rates` reports windows over: from `--from` (else the first
/// frame of the datasets) to `--to` (else their last frame); `None` when
/// that leaves nothing.
pub fn rates_span(session: &Session) -> Option<(i64, i64)> {
    let window = session.window();
    let data = session.data_span_ns();
    let first = window.from_ns.or(data.map(|d| d.0))?;
    let last = window.to_ns.map(|t| t - 1).or(data.map(|d| d.1))?;
    (first <= last).then_some((first, last))
}

/// Lengths an analysis picks among when not told one: 1, 2 and 5 times a
/// power of ten up to 500 ms, then lengths a clock reads (15 s, 1 min,
/// 15 min, 1 h, 6 h, 1 day, a week).
pub fn round_lengths_ns() -> Vec<i64> {
    const S: i64 = 1_000_000_000;
    let mut out = Vec::new();
    let mut p = 1_000; // 1 µs
    while p < S {
        out.extend([p, 2 * p, 5 * p]);
        p *= 10;
    }
    out.extend(
        [
            1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21_600, 43_200, 86_400,
            172_800, 604_800,
        ]
        .map(|k| k * S),
    );
    out
}

/// Windows `rates` aims for when it picks the window itself: at most this
/// many, and (lengths being at most 2.5 times apart) more than 2/5 of it.
pub const DEFAULT_RATE_WINDOWS: i64 = 200;

/// `rates`' window and sample when not told: the shortest round window
/// (at least 10 µs) that makes at most [`DEFAULT_RATE_WINDOWS`] windows
/// over `span`, and samples a tenth of it. Without a span: a minute of
/// one-second samples.
pub fn default_rate_grid(span: Option<(i64, i64)>) -> (i64, i64) {
    let Some((first, last)) = span else {
        return (60_000_000_000, 1_000_000_000);
    };
    let lengths = round_lengths_ns();
    let every = lengths
        .iter()
        .copied()
        .filter(|&e| e >= 10_000)
        .find(|&e| (last - first.div_euclid(e) * e) / e < DEFAULT_RATE_WINDOWS)
        .unwrap_or(lengths[lengths.len() - 1]);
    (every, every / 10)
}

/// [`default_rate_grid`] over the span `rates` reports on in `session`.
pub fn default_rate_grid_for(session: &Session) -> (i64, i64) {
    default_rate_grid(rates_span(session))
}

/// The query of `rates --every E --sample S` (both in ns; E a multiple of
/// S): a row for every window of `span` (see [`rates_span`]).
pub fn rates_query(
    span: (i64, i64),
    every_ns: i64,
    sample_ns: i64,
) -> Result<String, AnalyzeError> {
    let g = RateGrid::new(span, every_ns, sample_ns)?;
    fill(
        RATES_SQL,
        &[
            ("origin_ns", g.origin_ns.to_string()),
            ("sample_ns", sample_ns.to_string()),
            ("every_ns", every_ns.to_string()),
            ("samples_per_window", g.samples_per_window().to_string()),
            ("first_sample", g.first_sample.to_string()),
            ("last_sample", g.last_sample.to_string()),
            ("windows", g.windows.to_string()),
            ("per_second", float_literal(g.per_second())),
        ],
    )
}

/// `rates --every E --sample S` (both in ns; E a multiple of S), and which
/// way it was answered.
pub fn rates(
    session: &Session,
    every_ns: i64,
    sample_ns: i64,
) -> Result<(Table, AnsweredBy), AnalyzeError> {
    if let Some(span) = rates_span(session)
        && let Some(files) = count_pass::files_for(session)?
    {
        let sql = rates_query(span, every_ns, sample_ns)?;
        let grid = RateGrid::new(span, every_ns, sample_ns)?;
        let samples = count_pass::count(
            &files,
            session.window(),
            session.threads(),
            &[(grid.origin_ns, sample_ns)],
        )?
        .pop()
        .unwrap_or_default();
        let columns = count_pass::rate_columns(&grid, &samples);
        let table = crate::columns::table("rates", session.plan_schema(&sql)?, columns)?;
        return Ok((table, AnsweredBy::Pass));
    }
    Ok((rates_by_sql(session, every_ns, sample_ns)?, AnsweredBy::Sql))
}

/// `rates` by its SQL on DataFusion.
pub fn rates_by_sql(
    session: &Session,
    every_ns: i64,
    sample_ns: i64,
) -> Result<Table, AnalyzeError> {
    let span = rates_span(session);
    // Checked even without data, so that a mistake is reported.
    let sql = rates_query(span.unwrap_or((0, 0)), every_ns, sample_ns)?;
    if span.is_none() {
        return run(
            session,
            "rates",
            "SELECT 0 AS start_ns, 0 AS samples WHERE FALSE",
        );
    }
    run(session, "rates", &sql)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_windows_follow_the_span() {
        const MS: i64 = 1_000_000;
        const S: i64 = 1_000 * MS;
        let t = 1_767_225_600 * S + 123 * MS;
        // 4 s: windows of 50 ms (81 of them, the first and last partial)
        // and samples of 5 ms.
        assert_eq!(default_rate_grid(Some((t, t + 4 * S))), (50 * MS, 5 * MS));
        // An hour: 30 s windows, 3 s samples. A day: 10 minutes.
        assert_eq!(default_rate_grid(Some((t, t + 3600 * S))), (30 * S, 3 * S));
        assert_eq!(default_rate_grid(Some((t, t + 86_400 * S))).0, 600 * S);
        for len in [MS, 7 * S, 1000 * S, 3 * 86_400 * S] {
            let (every, sample) = default_rate_grid(Some((t, t + len)));
            let g = RateGrid::new((t, t + len), every, sample).unwrap();
            assert!((80..=200).contains(&g.windows), "{len}: {g:?}");
        }
        assert_eq!(default_rate_grid(None), (60 * S, S));
    }
}
