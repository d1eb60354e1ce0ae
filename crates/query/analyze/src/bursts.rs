//! `bursts`: the distribution of rates over intervals of several lengths,
//! the finest counted from the packets (one pass over the columns, or its
//! SQL) and the coarser summed from it; the scales picked when none are
//! given; the result as tables.

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Int64Type, UInt64Type};

use crate::count_pass;
use crate::error::AnalyzeError;
use crate::session::Session;
use crate::sql::{INTERVALS_SQL, ROLLUP_SQL, fill, strip_comments};
use crate::table::{AnsweredBy, Table};

/// `bursts`' scales when not told: powers of ten from the first that
/// holds about ten frames on average (at least 1 µs) up to a tenth of the
/// span, at most six; a single scale when the span is too short for that.
pub fn default_burst_scales(span: Option<(i64, i64)>, frames: u64) -> Vec<i64> {
    let Some((first, last)) = span else {
        return vec![1_000_000, 10_000_000, 100_000_000, 1_000_000_000];
    };
    let len = (last - first).max(1);
    let gap = len / frames.max(1) as i64;
    let decades: Vec<i64> = (3..=14).map(|k| 10i64.pow(k)).collect();
    let finest = decades
        .iter()
        .copied()
        .find(|&d| d >= 10 * gap)
        .unwrap_or(decades[decades.len() - 1]);
    let coarsest = decades
        .iter()
        .copied()
        .rev()
        .find(|&d| d <= len / 10)
        .unwrap_or(decades[0]);
    if finest > coarsest {
        return vec![coarsest];
    }
    decades
        .into_iter()
        .filter(|&d| d >= finest && d <= coarsest)
        .take(6)
        .collect()
}

/// [`default_burst_scales`] for the span of `session`; the frames in the
/// window are estimated from the manifests' counts (no scan).
pub fn default_burst_scales_for(session: &Session) -> Vec<i64> {
    let span = session.span_ns();
    let frames: u64 = session
        .manifests()
        .iter()
        .map(|(_, m)| m.counts.frames)
        .sum();
    let share = match (span, session.data_span_ns()) {
        (Some((a, b)), Some((c, d))) if d > c => (b - a) as f64 / (d - c) as f64,
        _ => 1.0,
    };
    default_burst_scales(span, (frames as f64 * share.min(1.0)) as u64)
}

/// Percentiles given for each time scale by `bursts`.
pub const BURST_PERCENTILES: &[f64] = &[0.0, 1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 100.0];

/// The distribution of rates over all intervals of one length.
#[derive(Clone, Debug, PartialEq)]
pub struct BurstScale {
    pub scale_ns: i64,
    /// Intervals in the span, empty ones included.
    pub intervals: u64,
    pub empty: u64,
    /// Frames/s and bits/s at each of [`BURST_PERCENTILES`].
    pub fps: Vec<f64>,
    pub bps: Vec<f64>,
    pub mean_fps: f64,
    pub mean_bps: f64,
    /// Complementary CDF of the frame rate: (rate, share of intervals with
    /// a higher rate), one point per distinct rate (thinned to 200).
    pub ccdf_fps: Vec<(f64, f64)>,
    pub ccdf_bps: Vec<(f64, f64)>,
}

/// How `bursts` counts one scale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BurstSource {
    /// The finest scale: `INTERVALS_SQL` over the packets, intervals from
    /// `origin_ns`, kept as the table `intervals`.
    Finest { sql: String, origin_ns: i64 },
    /// Summed from `intervals` (`ROLLUP_SQL`), `factor` of them at a time.
    Rollup { sql: String, factor: i64 },
    /// Counted from the packets on its own (not a multiple of the finest),
    /// intervals from `origin_ns`.
    Direct { sql: String, origin_ns: i64 },
}

impl BurstSource {
    pub fn sql(&self) -> &str {
        match self {
            BurstSource::Finest { sql, .. }
            | BurstSource::Rollup { sql, .. }
            | BurstSource::Direct { sql, .. } => sql,
        }
    }
}

/// The plan of `bursts`: per scale (ascending), its query and how many
/// intervals of it the span holds.
pub fn bursts_plan(
    span: (i64, i64),
    scales_ns: &[i64],
) -> Result<Vec<(i64, u64, BurstSource)>, AnalyzeError> {
    bursts_plan_reading(span, scales_ns, false)
}

/// [`bursts_plan`]; with `inline`, each rollup reads the finest scale's
/// query as a subquery instead of the table `intervals`, so that every
/// statement stands alone (`--emit-sql`).
pub fn bursts_plan_reading(
    (first, last): (i64, i64),
    scales_ns: &[i64],
    inline: bool,
) -> Result<Vec<(i64, u64, BurstSource)>, AnalyzeError> {
    let mut scales: Vec<i64> = scales_ns.to_vec();
    scales.sort_unstable();
    scales.dedup();
    if scales.first().is_none_or(|&s| s <= 0) {
        return Err(AnalyzeError::Usage(
            "--scales needs one or more positive durations".into(),
        ));
    }
    let finest = scales[0];
    // The finest intervals start on a multiple of every scale summed from
    // them, so that each coarser interval is a whole number of fine ones
    // and starts where a direct count would start it.
    let mut period = finest;
    for &s in &scales[1..] {
        if s % finest == 0 {
            let l = lcm(period, s);
            if l <= 86_400_000_000_000 {
                period = l;
            }
        }
    }
    let origin = first.div_euclid(period) * period;
    let finest_sql = fill(
        INTERVALS_SQL,
        &[
            ("origin_ns", origin.to_string()),
            ("scale_ns", finest.to_string()),
        ],
    )?;
    let intervals_from = if inline {
        format!("({}) AS intervals", strip_comments(&finest_sql))
    } else {
        "intervals".to_string()
    };
    let mut plan = Vec::new();
    for &scale in &scales {
        let o = first.div_euclid(scale) * scale;
        let intervals = ((last - o) / scale + 1) as u64;
        let source = if scale == finest {
            BurstSource::Finest {
                sql: finest_sql.clone(),
                origin_ns: origin,
            }
        } else if scale % finest == 0 && period % scale == 0 {
            BurstSource::Rollup {
                sql: fill(
                    ROLLUP_SQL,
                    &[
                        ("factor", (scale / finest).to_string()),
                        ("intervals", intervals_from.clone()),
                    ],
                )?,
                factor: scale / finest,
            }
        } else {
            BurstSource::Direct {
                sql: fill(
                    INTERVALS_SQL,
                    &[
                        ("origin_ns", o.to_string()),
                        ("scale_ns", scale.to_string()),
                    ],
                )?,
                origin_ns: o,
            }
        };
        plan.push((scale, intervals, source));
    }
    Ok(plan)
}

/// `bursts --scales ...`, and which way it was answered: the finest scale
/// is counted from the packets in one scan; each coarser one that is a
/// multiple of it is summed from those intervals instead of scanning
/// again.
pub fn bursts(
    session: &Session,
    scales_ns: &[i64],
) -> Result<(Vec<BurstScale>, AnsweredBy), AnalyzeError> {
    let Some(span) = session.span_ns() else {
        bursts_plan((0, 0), scales_ns)?;
        return Ok((Vec::new(), AnsweredBy::Sql));
    };
    let plan = bursts_plan(span, scales_ns)?;
    if let Some(files) = count_pass::files_for(session)? {
        return Ok((bursts_by_pass(session, &files, &plan)?, AnsweredBy::Pass));
    }
    Ok((bursts_by_sql(session, scales_ns)?, AnsweredBy::Sql))
}

/// `bursts` by its SQL on DataFusion.
pub fn bursts_by_sql(
    session: &Session,
    scales_ns: &[i64],
) -> Result<Vec<BurstScale>, AnalyzeError> {
    let Some(span) = session.span_ns() else {
        bursts_plan((0, 0), scales_ns)?;
        return Ok(Vec::new());
    };
    let plan = bursts_plan(span, scales_ns)?;
    let mut fine = Vec::new();
    let mut out = Vec::new();
    let mut registered = false;
    for (scale, intervals, source) in plan {
        let batches = match source {
            BurstSource::Finest { sql, .. } => {
                fine = session.query(&sql)?;
                fine.clone()
            }
            BurstSource::Rollup { .. } if fine.iter().all(|b| b.num_rows() == 0) => Vec::new(),
            BurstSource::Rollup { sql, .. } => {
                if !registered {
                    session.register_batches("intervals", fine.clone())?;
                    registered = true;
                }
                session.query(&sql)?
            }
            BurstSource::Direct { sql, .. } => session.query(&sql)?,
        };
        let (frames, bytes) = interval_counts(&batches)?;
        out.push(distribution(scale, intervals, frames, bytes));
    }
    if registered {
        session.deregister("intervals")?;
    }
    Ok(out)
}

/// [`bursts`] by one pass over the packets' times and lengths, counting
/// the finest scale and each direct one together; rollups are summed from
/// the finest counts as the SQL sums them.
fn bursts_by_pass(
    session: &Session,
    files: &count_pass::PacketFiles,
    plan: &[(i64, u64, BurstSource)],
) -> Result<Vec<BurstScale>, AnalyzeError> {
    let grids: Vec<(i64, i64)> = plan
        .iter()
        .filter_map(|(scale, _, source)| match source {
            BurstSource::Finest { origin_ns, .. } | BurstSource::Direct { origin_ns, .. } => {
                Some((*origin_ns, *scale))
            }
            BurstSource::Rollup { .. } => None,
        })
        .collect();
    let mut counted =
        count_pass::count(files, session.window(), session.threads(), &grids)?.into_iter();
    let mut finest: Option<count_pass::Intervals> = None;
    let mut out = Vec::new();
    for (scale, intervals, source) in plan {
        let c = match source {
            BurstSource::Finest { .. } => {
                let c = counted.next().unwrap_or_default();
                finest = Some(c.clone());
                c
            }
            BurstSource::Direct { .. } => counted.next().unwrap_or_default(),
            BurstSource::Rollup { factor, .. } => finest
                .as_ref()
                .map(|f| f.rolled_up(*factor))
                .unwrap_or_default(),
        };
        out.push(distribution(*scale, *intervals, c.frames, c.bytes));
    }
    Ok(out)
}

fn lcm(a: i64, b: i64) -> i64 {
    fn gcd(a: i64, b: i64) -> i64 {
        if b == 0 { a } else { gcd(b, a % b) }
    }
    (a / gcd(a, b)).saturating_mul(b)
}

fn interval_counts(batches: &[RecordBatch]) -> Result<(Vec<u64>, Vec<u64>), AnalyzeError> {
    let mut frames = Vec::new();
    let mut bytes = Vec::new();
    for b in batches {
        frames.extend(as_u64(b.column(1).as_ref())?);
        bytes.extend(as_u64(b.column(2).as_ref())?);
    }
    Ok((frames, bytes))
}

/// The values of an integer column as u64 (nulls as 0).
pub(crate) fn as_u64(a: &dyn Array) -> Result<Vec<u64>, AnalyzeError> {
    match a.data_type() {
        DataType::Int64 => Ok(a
            .as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.unwrap_or(0).max(0) as u64)
            .collect()),
        DataType::UInt64 => Ok(a
            .as_primitive::<UInt64Type>()
            .iter()
            .map(|v| v.unwrap_or(0))
            .collect()),
        other => Err(AnalyzeError::Engine(format!(
            "expected an integer count, got {other}"
        ))),
    }
}

fn distribution(scale_ns: i64, intervals: u64, frames: Vec<u64>, bytes: Vec<u64>) -> BurstScale {
    let per_s = 1e9 / scale_ns as f64;
    let busy = frames.len() as u64;
    let intervals = intervals.max(busy);
    let empty = intervals - busy;
    let summarise = |mut v: Vec<u64>, unit: f64| {
        v.sort_unstable();
        let total: f64 = v.iter().map(|&x| x as f64).sum();
        let mean = total * unit * per_s / intervals.max(1) as f64;
        // The k-th smallest of all intervals, empty ones (zeros) first.
        let nth = |k: u64| -> f64 {
            if k < empty {
                0.0
            } else {
                v[(k - empty) as usize] as f64 * unit * per_s
            }
        };
        let pct = BURST_PERCENTILES
            .iter()
            .map(|&p| {
                // Nearest rank.
                let rank = ((p / 100.0) * intervals as f64).ceil() as u64;
                nth(rank.clamp(1, intervals.max(1)) - 1)
            })
            .collect();
        let mut ccdf = Vec::new();
        let n = intervals.max(1) as f64;
        let mut i = 0usize;
        if empty > 0 {
            ccdf.push((0.0, busy as f64 / n));
        }
        while i < v.len() {
            let x = v[i];
            let mut j = i;
            while j < v.len() && v[j] == x {
                j += 1;
            }
            ccdf.push((x as f64 * unit * per_s, (v.len() - j) as f64 / n));
            i = j;
        }
        if ccdf.len() > 200 {
            let step = ccdf.len() as f64 / 200.0;
            let last = ccdf[ccdf.len() - 1];
            ccdf = (0..200).map(|k| ccdf[(k as f64 * step) as usize]).collect();
            ccdf.push(last);
        }
        (pct, mean, ccdf)
    };
    let (fps, mean_fps, ccdf_fps) = summarise(frames, 1.0);
    let (bps, mean_bps, ccdf_bps) = summarise(bytes, 8.0);
    BurstScale {
        scale_ns,
        intervals,
        empty,
        fps,
        bps,
        mean_fps,
        mean_bps,
        ccdf_fps,
        ccdf_bps,
    }
}

/// `bursts` as tables: the frame-rate and bit-rate percentiles per scale,
/// and (for JSON and plots) both CCDFs in long form.
pub fn burst_tables(scales: &[BurstScale], with_ccdf: bool) -> Result<Vec<Table>, AnalyzeError> {
    use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray, UInt64Array};
    use datafusion::arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    let mut tables = Vec::new();
    for (name, unit) in [("frame rate", "fps"), ("bit rate", "bps")] {
        let mut fields = vec![
            Field::new("scale_ns", DataType::Int64, false),
            Field::new("intervals", DataType::UInt64, false),
            Field::new("empty", DataType::UInt64, false),
            Field::new(format!("mean_{unit}"), DataType::Float64, false),
        ];
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from_iter_values(
                scales.iter().map(|s| s.scale_ns),
            )),
            Arc::new(UInt64Array::from_iter_values(
                scales.iter().map(|s| s.intervals),
            )),
            Arc::new(UInt64Array::from_iter_values(
                scales.iter().map(|s| s.empty),
            )),
            Arc::new(Float64Array::from_iter_values(scales.iter().map(|s| {
                if unit == "fps" {
                    s.mean_fps
                } else {
                    s.mean_bps
                }
            }))),
        ];
        for (k, p) in BURST_PERCENTILES.iter().enumerate() {
            let label = format!("{p}").replace('.', "_");
            fields.push(Field::new(
                format!("p{label}_{unit}"),
                DataType::Float64,
                false,
            ));
            cols.push(Arc::new(Float64Array::from_iter_values(scales.iter().map(
                |s| {
                    if unit == "fps" { s.fps[k] } else { s.bps[k] }
                },
            ))));
        }
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(schema.clone(), cols)
            .map_err(|e| AnalyzeError::Engine(e.to_string()))?;
        tables.push(Table {
            name: name.into(),
            schema,
            batches: vec![batch],
        });
    }
    if with_ccdf {
        let (mut scale, mut unit, mut rate, mut share) = (vec![], vec![], vec![], vec![]);
        for s in scales {
            for (u, pts) in [("fps", &s.ccdf_fps), ("bps", &s.ccdf_bps)] {
                for &(r, sh) in pts {
                    scale.push(s.scale_ns);
                    unit.push(u);
                    rate.push(r);
                    share.push(sh);
                }
            }
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("scale_ns", DataType::Int64, false),
            Field::new("unit", DataType::Utf8, false),
            Field::new("rate", DataType::Float64, false),
            Field::new("share_above", DataType::Float64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(scale)),
                Arc::new(StringArray::from(unit)),
                Arc::new(Float64Array::from(rate)),
                Arc::new(Float64Array::from(share)),
            ],
        )
        .map_err(|e| AnalyzeError::Engine(e.to_string()))?;
        tables.push(Table {
            name: "ccdf".into(),
            schema,
            batches: vec![batch],
        });
    }
    Ok(tables)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_scales_follow_the_span_and_the_frame_rate() {
        const MS: i64 = 1_000_000;
        const S: i64 = 1_000 * MS;
        let t = 1_767_225_600 * S + 123 * MS;
        // 600 k frames in 4 s: 100 µs (about 15 frames) to 100 ms.
        assert_eq!(
            default_burst_scales(Some((t, t + 4 * S)), 600_000),
            vec![MS / 10, MS, 10 * MS, 100 * MS]
        );
        // 30 frames in 3 s: one scale.
        assert_eq!(
            default_burst_scales(Some((t, t + 3 * S)), 30),
            vec![100 * MS]
        );
    }

    #[test]
    fn burst_percentiles_count_empty_intervals() {
        // 10 intervals of 1 s: 6 empty, then 1, 2, 3, 10 frames.
        let d = distribution(
            1_000_000_000,
            10,
            vec![3, 1, 10, 2],
            vec![300, 100, 1000, 200],
        );
        assert_eq!(d.empty, 6);
        assert_eq!(d.fps[0], 0.0); // p0
        assert_eq!(d.fps[4], 0.0); // p50: the 5th of 10 is empty
        assert_eq!(d.fps[6], 3.0); // p90: the 9th
        assert_eq!(d.fps[9], 10.0); // p100
        assert!((d.mean_fps - 1.6).abs() < 1e-9);
        assert_eq!(d.bps[9], 8000.0);
        assert_eq!(d.ccdf_fps[0], (0.0, 0.4));
        assert_eq!(d.ccdf_fps.last(), Some(&(10.0, 0.0)));
    }
}
