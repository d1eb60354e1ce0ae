//! `weir analyze loss` as one pass over the stats columns with weir's own
//! decoder: per second, the stages' counters summed over workers and
//! interfaces. `sql/loss.sql` stays the definition (for `--emit-sql`, for
//! files the decoder cannot read, and for the tests, which check this pass
//! against it); the result takes its names and types from it.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, UInt64Array};

use crate::columns::{DataFile, engine, par_map, parquet_files};
use crate::error::AnalyzeError;
use crate::session::Session;
use crate::window::TimeWindow;

/// Summed per second, in the order of the SQL's sums.
const SUMMED: [&str; 9] = [
    "kernel_packets",
    "frames",
    "kernel_drops",
    "kernel_freezes",
    "pcap_frames",
    "pcap_drops",
    "records",
    "pcap_bytes",
    "pcap_stored_bytes",
];
/// The greatest per second.
const MAXED: [&str; 2] = ["ring_backlog", "pcap_backlog"];

/// The columns read: ts, the summed, the maxed, pcap_level, stack_event.
fn columns() -> Vec<&'static str> {
    let mut v = vec!["ts"];
    v.extend(SUMMED);
    v.extend(MAXED);
    v.extend(["pcap_level", "stack_event"]);
    v
}

/// One second's counters.
#[derive(Clone, Copy, Default)]
struct Second {
    sums: [u64; SUMMED.len()],
    maxes: [u64; MAXED.len()],
    /// The least compression level, if any row had one.
    level: Option<i64>,
}

impl Second {
    fn add(&mut self, o: &Second) {
        for (a, b) in self.sums.iter_mut().zip(o.sums) {
            *a = a.wrapping_add(b);
        }
        for (a, b) in self.maxes.iter_mut().zip(o.maxes) {
            *a = (*a).max(b);
        }
        self.level = match (self.level, o.level) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
}

/// The stats files of the session's datasets when every one has the
/// columns this pass reads in a form the decoder reads; `None` sends the
/// caller to the SQL (which reads a column older files lack as null).
pub(crate) fn files_for(session: &Session) -> Result<Option<Vec<DataFile>>, AnalyzeError> {
    let cols = columns();
    let mut files = Vec::new();
    for (root, m) in session.manifests() {
        for p in parquet_files(root, m, store::dataset::STATS_DIR)? {
            if !p.readable(&cols)? {
                return Ok(None);
            }
            files.push(p);
        }
    }
    Ok(Some(files))
}

fn scan_file(file: &DataFile, window: TimeWindow) -> Result<BTreeMap<i64, Second>, AnalyzeError> {
    let cols = columns();
    let mut s = file.scan(&cols, |_| true)?;
    let mut out: BTreeMap<i64, Second> = BTreeMap::new();
    let level_at = 1 + SUMMED.len() + MAXED.len();
    while let Some(n) = s.advance()? {
        s.load()?;
        for (k, name) in cols.iter().enumerate() {
            let c = s.column(k);
            let ok = if k == level_at + 1 {
                true
            } else if k == level_at {
                c.is_int() && c.ints().len() == n
            } else {
                c.is_int() && c.ints().len() == n && c.validity().is_empty()
            };
            if !ok {
                return Err(engine(
                    &file.path,
                    format!("column {name} has an unexpected type"),
                ));
            }
        }
        let ts = s.column(0).ints();
        let event = s.column(level_at + 1);
        let level = s.column(level_at);
        for (i, &t) in ts.iter().enumerate() {
            let t = t as i64;
            // The rows of weir stack count events, not frames.
            if event.is_valid(i)
                || window.from_ns.is_some_and(|f| t < f)
                || window.to_ns.is_some_and(|e| t >= e)
            {
                continue;
            }
            let mut row = Second::default();
            for (k, v) in row.sums.iter_mut().enumerate() {
                *v = s.column(1 + k).ints()[i];
            }
            for (k, v) in row.maxes.iter_mut().enumerate() {
                *v = s.column(1 + SUMMED.len() + k).ints()[i];
            }
            // INT32 values come zero-extended: the Int16 level's sign back.
            row.level = level
                .is_valid(i)
                .then(|| level.ints()[i] as u32 as i32 as i64);
            out.entry(t).or_default().add(&row);
        }
    }
    Ok(out)
}

/// The loss table's columns (start_ns, the sums, the maxima, the least
/// level), in `sql/loss.sql`'s order.
pub(crate) fn run(
    files: &[DataFile],
    window: TimeWindow,
    threads: usize,
) -> Result<Vec<ArrayRef>, AnalyzeError> {
    let mut seconds: BTreeMap<i64, Second> = BTreeMap::new();
    for part in par_map(threads, files, |p| scan_file(p, window))? {
        for (t, s) in part {
            seconds.entry(t).or_default().add(&s);
        }
    }
    let mut cols: Vec<ArrayRef> = vec![Arc::new(Int64Array::from_iter_values(
        seconds.keys().copied(),
    ))];
    let sums = (0..SUMMED.len()).map(|k| seconds.values().map(move |s| s.sums[k]));
    let sums: Vec<Vec<u64>> = sums.map(|v| v.collect()).collect();
    let maxes: Vec<Vec<u64>> = (0..MAXED.len())
        .map(|k| seconds.values().map(|s| s.maxes[k]).collect())
        .collect();
    // The SQL's order: kernel_seen, captured, kernel_drops, queue_freezes,
    // pcap_frames, pcap_drops, records, then the two maxima, then
    // pcap_bytes, pcap_stored_bytes, then the level.
    for v in &sums[..7] {
        cols.push(Arc::new(UInt64Array::from(v.clone())));
    }
    for v in maxes {
        cols.push(Arc::new(UInt64Array::from(v)));
    }
    for v in &sums[7..] {
        cols.push(Arc::new(UInt64Array::from(v.clone())));
    }
    cols.push(Arc::new(Int64Array::from_iter(
        seconds.values().map(|s| s.level),
    )));
    Ok(cols)
}
