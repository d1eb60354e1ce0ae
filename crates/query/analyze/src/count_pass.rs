//! Frames and bytes per interval of time, as one pass over the packets'
//! `ts` and `wire_len` columns with weir's own decoder (`store::decode`),
//! row groups spread over threads: what `rates` and `bursts` count. Their
//! SQL (`sql/rates.sql`, `sql/intervals.sql`, `sql/rollup.sql`) stays the
//! definition, for `--emit-sql`, for a filter (which only the SQL
//! evaluates) and for the tests, which check this pass against it.
//!
//! A row group whose `ts` statistics put all its rows in one interval of
//! every grid counted (and inside the time window) is counted without its
//! times: its row count and the sum of its lengths are the interval's.
//! Otherwise rows are counted in runs: packets are stored in time order, so
//! an interval's rows follow one another and a run ends where the time
//! leaves the interval; rows out of order only make more runs, which are
//! sorted and summed at the end.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array};
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::parquet::file::statistics::Statistics;
use store::decode::scan::{self as decode, ScanFile};

use crate::columns::{engine, par_fold, parquet_files};
use crate::error::AnalyzeError;
use crate::grid::RateGrid;
use crate::session::Session;
use crate::window::TimeWindow;

const TS: &str = "ts";
const WIRE_LEN: &str = "wire_len";

/// The packet files of a session's datasets, mapped (or, in an object
/// store, their footers fetched), with their footers.
pub(crate) struct PacketFiles {
    files: Vec<PacketFile>,
}

struct PacketFile {
    file: ScanFile,
    meta: Arc<ParquetMetaData>,
    /// The leaf of `ts`, for its statistics.
    ts_leaf: usize,
}

/// The session's packet files when this pass can answer for it: without a
/// filter (only the SQL evaluates one), and with `ts` and `wire_len` in
/// every file, required and in a form the decoder reads; `None` sends the
/// caller to the SQL.
pub(crate) fn files_for(session: &Session) -> Result<Option<PacketFiles>, AnalyzeError> {
    if session.filter().is_some_and(|f| !f.trim().is_empty()) {
        return Ok(None);
    }
    let mut files = Vec::new();
    for (root, m) in session.manifests() {
        for f in parquet_files(root, m, store::dataset::PACKETS_DIR)? {
            let (file, meta) = ScanFile::open(root, &f.rel)?;
            let schema = meta.file_metadata().schema_descr();
            let leaf = |name: &str| {
                (0..schema.num_columns()).find(|&i| {
                    let c = schema.column(i);
                    c.path().parts() == [name.to_string()] && c.max_def_level() == 0
                })
            };
            let (Some(ts_leaf), Some(_)) = (leaf(TS), leaf(WIRE_LEN)) else {
                return Ok(None);
            };
            if !decode::supports(&meta, &[TS, WIRE_LEN]) {
                return Ok(None);
            }
            files.push(PacketFile {
                file,
                meta: Arc::new(meta),
                ts_leaf,
            });
        }
    }
    Ok(Some(PacketFiles { files }))
}

/// Frames and bytes of the non-empty intervals of one grid, by interval
/// number, ascending.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Intervals {
    pub index: Vec<i64>,
    pub frames: Vec<u64>,
    pub bytes: Vec<u64>,
}

impl Intervals {
    /// Sorted by interval, one entry per interval (runs of the same one
    /// summed).
    fn of_runs(mut runs: Vec<Run>) -> Intervals {
        let mut out = Intervals::default();
        if !runs.is_sorted_by_key(|r| r.index) {
            // Row groups overlap in time at their edges, and threads take
            // them out of order: where the intervals are few for the runs,
            // they are summed in place, in one step over the runs and one
            // over the intervals, rather than sorted.
            let lo = runs.iter().map(|r| r.index).min().unwrap_or(0);
            let hi = runs.iter().map(|r| r.index).max().unwrap_or(0);
            let span = usize::try_from(hi.wrapping_sub(lo)).unwrap_or(usize::MAX);
            if span < runs.len().saturating_mul(4).max(1 << 16) {
                let mut counts = vec![[0u64; 2]; span + 1];
                for r in &runs {
                    let c = &mut counts[(r.index - lo) as usize];
                    c[0] += r.frames;
                    c[1] += r.bytes;
                }
                for (k, &[frames, bytes]) in counts.iter().enumerate() {
                    if frames > 0 {
                        out.index.push(lo + k as i64);
                        out.frames.push(frames);
                        out.bytes.push(bytes);
                    }
                }
                return out;
            }
            runs.sort_unstable_by_key(|r| r.index);
        }
        for r in runs {
            if out.index.last() == Some(&r.index) {
                *out.frames.last_mut().expect("same length") += r.frames;
                *out.bytes.last_mut().expect("same length") += r.bytes;
            } else {
                out.index.push(r.index);
                out.frames.push(r.frames);
                out.bytes.push(r.bytes);
            }
        }
        out
    }

    /// The intervals `factor` times longer that these make up (as
    /// `sql/rollup.sql` sums them).
    pub fn rolled_up(&self, factor: i64) -> Intervals {
        let runs = (0..self.index.len())
            .map(|k| Run {
                index: self.index[k].div_euclid(factor),
                frames: self.frames[k],
                bytes: self.bytes[k],
            })
            .collect();
        Intervals::of_runs(runs)
    }
}

/// Rows of one interval, counted together.
#[derive(Clone, Copy, Debug)]
struct Run {
    index: i64,
    frames: u64,
    bytes: u64,
}

/// One grid's run in progress: the interval `[lo, lo + scale)` it counts.
struct Counter {
    origin: i64,
    scale: i64,
    lo: i64,
    run: Run,
}

impl Counter {
    fn new((origin, scale): (i64, i64)) -> Counter {
        Counter {
            origin,
            scale,
            lo: 0,
            run: Run {
                index: 0,
                frames: 0,
                bytes: 0,
            },
        }
    }

    fn end_run(&mut self, out: &mut Vec<Run>) {
        if self.run.frames > 0 {
            out.push(self.run);
        }
        self.run.frames = 0;
        self.run.bytes = 0;
    }

    fn start_run(&mut self, ts: i64, out: &mut Vec<Run>) {
        self.end_run(out);
        // The SQL's floor((ts_ns - origin) / scale); ts is never before
        // the origin, which is at or before the span's start.
        self.run.index = (ts - self.origin).div_euclid(self.scale);
        self.lo = self.origin + self.run.index * self.scale;
    }

    /// Whether `ts` is in the run's interval: one unsigned comparison.
    #[inline(always)]
    fn holds(&self, ts: i64) -> bool {
        (ts.wrapping_sub(self.lo) as u64) < self.scale as u64 && self.run.frames > 0
    }

    /// Counts rows of times `ts` and lengths `lens`: each stretch of rows in
    /// one interval at once.
    fn add(&mut self, ts: &[u64], lens: &[u64], out: &mut Vec<Run>) {
        let n = ts.len();
        let mut i = 0;
        while i < n {
            let t = ts[i] as i64;
            if !self.holds(t) {
                self.start_run(t, out);
            }
            let start = i;
            let (lo, scale) = (self.lo, self.scale as u64);
            i += 1;
            while i < n && ((ts[i] as i64).wrapping_sub(lo) as u64) < scale {
                i += 1;
            }
            self.run.frames += (i - start) as u64;
            self.run.bytes += lens[start..i].iter().sum::<u64>();
        }
    }

    /// [`Counter::add`] of the rows inside `window` only.
    fn add_within(&mut self, ts: &[u64], lens: &[u64], window: TimeWindow, out: &mut Vec<Run>) {
        for (&t, &len) in ts.iter().zip(lens) {
            let t = t as i64;
            if window.from_ns.is_some_and(|f| t < f) || window.to_ns.is_some_and(|e| t >= e) {
                continue;
            }
            if !self.holds(t) {
                self.start_run(t, out);
            }
            self.run.frames += 1;
            self.run.bytes += len;
        }
    }
}

/// One grid's counts over the intervals a row group's times span
/// (`[lo, hi]` by its statistics), held in a vector by interval: rows
/// grouped by flow (weir's default order) visit a row group's intervals
/// back and forth, which would make a run of nearly every row.
struct Dense {
    first: i64,
    base_ns: i64,
    scale: u64,
    /// 1 / scale, for an estimate of the interval corrected by one step.
    inv: f64,
    /// Frames and bytes per interval, side by side (one cache line a row).
    counts: Vec<[u64; 2]>,
}

impl Dense {
    /// Counts for grid `(origin, scale)` over `[lo, hi]`, if they take no
    /// more room than a few times the row group's `rows`.
    /// `counts` is a vector to reuse (a thread's, from its last row group:
    /// fresh memory costs a page fault a page).
    fn new(
        (origin, scale): (i64, i64),
        (lo, hi): (i64, i64),
        rows: usize,
        mut counts: Vec<[u64; 2]>,
    ) -> Option<Dense> {
        let first = (lo - origin).div_euclid(scale);
        let last = (hi - origin).div_euclid(scale);
        let n = usize::try_from(last - first + 1).ok()?;
        if n > rows.saturating_mul(2).max(4096) {
            return None;
        }
        counts.clear();
        counts.resize(n, [0; 2]);
        Some(Dense {
            first,
            base_ns: origin + first * scale,
            scale: scale as u64,
            inv: 1.0 / scale as f64,
            counts,
        })
    }

    /// The slot of time `t`, or one past the end for a time outside the
    /// row group's span (whose statistics were then wrong): a time before
    /// it wraps to a huge offset.
    #[inline(always)]
    fn slot(&self, t: u64) -> usize {
        let d = (t as i64).wrapping_sub(self.base_ns) as u64;
        // d × (1/scale) is off by at most one either way (exactly so for
        // d < 2^52 intervals; anything larger is out of the span anyway).
        let mut q = (d as f64 * self.inv) as u64;
        q = q.wrapping_sub(u64::from(q.wrapping_mul(self.scale) > d));
        q = q.wrapping_add(u64::from(q.wrapping_add(1).wrapping_mul(self.scale) <= d));
        usize::try_from(q).map_or(self.counts.len(), |q| q.min(self.counts.len()))
    }

    fn add(&mut self, ts: &[u64], lens: &[u64]) -> Result<(), ()> {
        for (&t, &len) in ts.iter().zip(lens) {
            let q = self.slot(t);
            let c = self.counts.get_mut(q).ok_or(())?;
            c[0] += 1;
            c[1] += len;
        }
        Ok(())
    }

    /// [`Dense::add`] of the rows inside `window` only.
    fn add_within(&mut self, ts: &[u64], lens: &[u64], window: TimeWindow) -> Result<(), ()> {
        let (from, to) = (
            window.from_ns.unwrap_or(i64::MIN),
            window.to_ns.unwrap_or(i64::MAX),
        );
        for (&t, &len) in ts.iter().zip(lens) {
            if (t as i64) < from || (t as i64) >= to {
                continue;
            }
            let q = self.slot(t);
            let c = self.counts.get_mut(q).ok_or(())?;
            c[0] += 1;
            c[1] += len;
        }
        Ok(())
    }

    fn runs(&self, out: &mut Vec<Run>) {
        for (k, &[frames, bytes]) in self.counts.iter().enumerate() {
            if frames > 0 {
                out.push(Run {
                    index: self.first + k as i64,
                    frames,
                    bytes,
                });
            }
        }
    }
}

/// What to read of one row group.
enum Work {
    /// All rows in interval `index[k]` of grid k, inside the window: the
    /// lengths only.
    Whole(Vec<i64>),
    /// Every row's time; `bounded` when some rows may be outside the window;
    /// `span` the times' least and greatest by the statistics.
    Rows {
        bounded: bool,
        span: Option<(i64, i64)>,
    },
}

struct Unit {
    file: usize,
    group: usize,
    work: Work,
}

/// Per thread: the runs of each grid.
#[derive(Default)]
struct Worker {
    runs: Vec<Vec<Run>>,
    /// Dense counts' vectors, kept for the next row group.
    spare: Vec<Vec<[u64; 2]>>,
}

/// Counts the frames and bytes in `files`, within `window`, per interval of
/// each grid `(origin_ns, scale_ns)`, on `threads` threads.
pub(crate) fn count(
    files: &PacketFiles,
    window: TimeWindow,
    threads: usize,
    grids: &[(i64, i64)],
) -> Result<Vec<Intervals>, AnalyzeError> {
    let units = plan(files, window, grids);
    let mut workers: Vec<Worker> = (0..threads.clamp(1, units.len().max(1)))
        .map(|_| Worker {
            runs: vec![Vec::new(); grids.len()],
            spare: Vec::new(),
        })
        .collect();
    par_fold(&mut workers, &units, |w, _, u| {
        count_unit(&files.files[u.file], u, window, grids, w)
    })?;
    Ok((0..grids.len())
        .map(|k| {
            let runs: Vec<Run> = workers
                .iter_mut()
                .flat_map(|w| std::mem::take(&mut w.runs[k]))
                .collect();
            Intervals::of_runs(runs)
        })
        .collect())
}

/// The row groups to read and how, by their `ts` statistics.
fn plan(files: &PacketFiles, window: TimeWindow, grids: &[(i64, i64)]) -> Vec<Unit> {
    let mut units = Vec::new();
    for (k, f) in files.files.iter().enumerate() {
        for (g, rg) in f.meta.row_groups().iter().enumerate() {
            if rg.num_rows() == 0 {
                continue;
            }
            let range = match rg.column(f.ts_leaf).statistics() {
                Some(Statistics::Int64(s)) => s.min_opt().copied().zip(s.max_opt().copied()),
                _ => None,
            };
            let work = match range {
                Some((lo, hi))
                    if window.from_ns.is_some_and(|f| hi < f)
                        || window.to_ns.is_some_and(|t| lo >= t) =>
                {
                    continue;
                }
                Some((lo, hi)) => {
                    let inside = window.from_ns.is_none_or(|f| lo >= f)
                        && window.to_ns.is_none_or(|t| hi < t);
                    let index =
                        |(origin, scale): (i64, i64), t: i64| (t - origin).div_euclid(scale);
                    if inside && grids.iter().all(|&g| index(g, lo) == index(g, hi)) {
                        Work::Whole(grids.iter().map(|&g| index(g, lo)).collect())
                    } else {
                        Work::Rows {
                            bounded: !inside,
                            span: Some((lo, hi)),
                        }
                    }
                }
                None => Work::Rows {
                    bounded: window != TimeWindow::default(),
                    span: None,
                },
            };
            units.push(Unit {
                file: k,
                group: g,
                work,
            });
        }
    }
    units
}

fn count_unit(
    f: &PacketFile,
    u: &Unit,
    window: TimeWindow,
    grids: &[(i64, i64)],
    w: &mut Worker,
) -> Result<(), AnalyzeError> {
    let cols: &[&str] = match u.work {
        Work::Whole(_) => &[WIRE_LEN],
        Work::Rows { .. } => &[WIRE_LEN, TS],
    };
    let mut s = f.file.scan(f.meta.clone(), cols, |g, _| g == u.group)?;
    // Per grid: dense counts where the span allows, else runs.
    let rows = f.meta.row_group(u.group).num_rows().max(0) as usize;
    let mut counters: Vec<(Option<Dense>, Counter)> = grids
        .iter()
        .map(|&g| {
            let dense = match u.work {
                Work::Rows {
                    span: Some(span), ..
                } => Dense::new(g, span, rows, w.spare.pop().unwrap_or_default()),
                _ => None,
            };
            (dense, Counter::new(g))
        })
        .collect();
    let (mut rows, mut bytes) = (0u64, 0u64);
    while let Some(n) = s.advance()? {
        s.load()?;
        let lens = s.column(0);
        if !lens.is_int() || lens.ints().len() != n || !lens.validity().is_empty() {
            return Err(engine(
                &f.file.path(),
                "column wire_len has an unexpected type",
            ));
        }
        let lens = lens.ints();
        match u.work {
            Work::Whole(_) => {
                rows += n as u64;
                bytes += lens.iter().sum::<u64>();
            }
            Work::Rows { bounded, .. } => {
                let ts = s.column(1);
                if !ts.is_int() || ts.ints().len() != n || !ts.validity().is_empty() {
                    return Err(engine(&f.file.path(), "column ts has an unexpected type"));
                }
                let ts = ts.ints();
                for ((dense, c), out) in counters.iter_mut().zip(&mut w.runs) {
                    match dense {
                        Some(d) => if bounded {
                            d.add_within(ts, lens, window)
                        } else {
                            d.add(ts, lens)
                        }
                        .map_err(|_| {
                            engine(
                                &f.file.path(),
                                "a time outside its row group's ts statistics",
                            )
                        })?,
                        None if bounded => c.add_within(ts, lens, window, out),
                        None => c.add(ts, lens, out),
                    }
                }
            }
        }
    }
    match &u.work {
        Work::Whole(index) => {
            if rows > 0 {
                for (out, &index) in w.runs.iter_mut().zip(index) {
                    out.push(Run {
                        index,
                        frames: rows,
                        bytes,
                    });
                }
            }
        }
        Work::Rows { .. } => {
            for ((dense, c), out) in counters.iter_mut().zip(&mut w.runs) {
                match dense {
                    Some(d) => {
                        d.runs(out);
                        w.spare.push(std::mem::take(&mut d.counts));
                    }
                    None => c.end_run(out),
                }
            }
        }
    }
    Ok(())
}

/// The columns of `rates` (as `sql/rates.sql` computes them, operation for
/// operation, so that the floats are the same) from the counts per sample.
pub(crate) fn rate_columns(g: &RateGrid, samples: &Intervals) -> Vec<ArrayRef> {
    let per_second = g.per_second();
    let k = g.samples_per_window();
    let windows = g.windows.max(0) as usize;
    let mut start = Vec::with_capacity(windows);
    let mut n_samples = Vec::with_capacity(windows);
    let mut frames = Vec::with_capacity(windows);
    let mut bytes = Vec::with_capacity(windows);
    let mut rates: [Vec<f64>; 6] = std::array::from_fn(|_| Vec::with_capacity(windows));
    let mut next = 0usize;
    for win in 0..g.windows {
        // The window's non-empty samples (any before it lie outside the
        // span, as the SQL's join drops them).
        while next < samples.index.len() && samples.index[next].div_euclid(k) < win {
            next += 1;
        }
        let (mut busy, mut f, mut b) = (0i64, 0i64, 0i64);
        let (mut min_f, mut max_f, mut min_b, mut max_b) = (i64::MAX, 0i64, i64::MAX, 0i64);
        while next < samples.index.len() && samples.index[next].div_euclid(k) == win {
            let (sf, sb) = (samples.frames[next] as i64, samples.bytes[next] as i64);
            busy += 1;
            f += sf;
            b += sb;
            (min_f, max_f) = (min_f.min(sf), max_f.max(sf));
            (min_b, max_b) = (min_b.min(sb), max_b.max(sb));
            next += 1;
        }
        let n = g.samples_in(win);
        let (min_f, min_b) = if busy < n { (0, 0) } else { (min_f, min_b) };
        start.push(g.origin_ns + win * g.every_ns);
        n_samples.push(n);
        frames.push(f);
        bytes.push(b);
        rates[0].push(min_f as f64 * per_second);
        rates[1].push(f as f64 * per_second / n as f64);
        rates[2].push(max_f as f64 * per_second);
        rates[3].push((min_b * 8) as f64 * per_second);
        rates[4].push((b * 8) as f64 * per_second / n as f64);
        rates[5].push((max_b * 8) as f64 * per_second);
    }
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(start)),
        Arc::new(Int64Array::from(n_samples)),
        Arc::new(Int64Array::from(frames)),
        Arc::new(Int64Array::from(bytes)),
    ];
    cols.extend(
        rates
            .into_iter()
            .map(|v| Arc::new(Float64Array::from(v)) as ArrayRef),
    );
    cols
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(grid: (i64, i64), ts: &[u64], lens: &[u64], batches: &[usize]) -> Intervals {
        let mut c = Counter::new(grid);
        let mut out = Vec::new();
        let mut at = 0;
        for &n in batches {
            c.add(&ts[at..at + n], &lens[at..at + n], &mut out);
            at += n;
        }
        c.end_run(&mut out);
        Intervals::of_runs(out)
    }

    #[test]
    fn runs_split_at_interval_ends_and_rows_out_of_order_are_summed() {
        // Intervals of 10 from 5: [5, 15), [15, 25), ...; 37 and 40 are in
        // [35, 45), 14 comes back to the first after 16.
        let ts = [5, 9, 14, 15, 16, 14, 37, 40, 100];
        let lens = [1, 2, 3, 4, 5, 6, 7, 8, 9];
        let want = Intervals {
            index: vec![0, 1, 3, 9],
            frames: vec![4, 2, 2, 1],
            bytes: vec![1 + 2 + 3 + 6, 4 + 5, 7 + 8, 9],
        };
        for batches in [&[9][..], &[1, 1, 1, 1, 1, 1, 1, 1, 1], &[4, 5], &[2, 0, 7]] {
            assert_eq!(counted((5, 10), &ts, &lens, batches), want, "{batches:?}");
        }
        assert_eq!(
            want.rolled_up(2),
            Intervals {
                index: vec![0, 1, 4],
                frames: vec![6, 2, 1],
                bytes: vec![21, 15, 9],
            }
        );
    }

    #[test]
    fn runs_are_summed_by_interval_whether_near_or_far_apart() {
        let run = |index, frames| Run {
            index,
            frames,
            bytes: 10 * frames,
        };
        for far in [3, 1 << 40] {
            let runs = vec![run(far, 1), run(-2, 2), run(far, 4), run(0, 8), run(-2, 16)];
            assert_eq!(
                Intervals::of_runs(runs),
                Intervals {
                    index: vec![-2, 0, far],
                    frames: vec![18, 8, 5],
                    bytes: vec![180, 80, 50],
                },
                "{far}"
            );
        }
    }

    #[test]
    fn dense_counts_equal_runs_whatever_the_order() {
        let ts: Vec<u64> = (0..5000u64).map(|k| 1_000 + (k * 7919) % 100_003).collect();
        let lens: Vec<u64> = (0..5000u64).map(|k| 60 + k % 1400).collect();
        for grid in [(0, 13), (1_000, 20), (-3, 977), (999, 100_000)] {
            let mut d = Dense::new(grid, (1_000, 101_002), ts.len(), Vec::new()).unwrap();
            d.add(&ts, &lens).unwrap();
            let mut out = Vec::new();
            d.runs(&mut out);
            assert_eq!(
                Intervals::of_runs(out),
                counted(grid, &ts, &lens, &[5000]),
                "{grid:?}"
            );
        }
        // A time outside the statistics' span is an error, not a panic.
        let mut d = Dense::new((0, 10), (100, 200), 10, vec![[5, 5]; 3]).unwrap();
        assert!(d.add(&[99], &[1]).is_err());
        assert!(d.add(&[210], &[1]).is_err());
        assert!(d.add(&[u64::MAX], &[1]).is_err());
        assert!(d.add(&[200], &[1]).is_ok());
    }

    #[test]
    fn rows_outside_the_window_are_not_counted() {
        let mut c = Counter::new((0, 10));
        let mut out = Vec::new();
        let w = TimeWindow {
            from_ns: Some(3),
            to_ns: Some(12),
        };
        c.add_within(&[1, 3, 4, 11, 12, 13], &[1, 2, 4, 8, 16, 32], w, &mut out);
        c.end_run(&mut out);
        let got = Intervals::of_runs(out);
        assert_eq!(got.index, vec![0, 1]);
        assert_eq!(got.frames, vec![2, 1]);
        assert_eq!(got.bytes, vec![6, 8]);
    }

    #[test]
    fn rates_count_empty_samples_and_windows_as_zero() {
        // Windows of 4 samples of 1 s over samples 1..=13: window 0 holds
        // samples 1-3, window 1 none with frames, window 3 only sample 12-13.
        let g = RateGrid::new(
            (1_000_000_000, 13_500_000_000),
            4_000_000_000,
            1_000_000_000,
        )
        .unwrap();
        assert_eq!(
            (g.origin_ns, g.windows, g.first_sample, g.last_sample),
            (0, 4, 1, 13)
        );
        let samples = Intervals {
            index: vec![1, 2, 3, 9, 13],
            frames: vec![2, 4, 6, 1, 3],
            bytes: vec![20, 40, 60, 10, 30],
        };
        let cols = rate_columns(&g, &samples);
        let ints = |k: usize| -> Vec<i64> {
            cols[k]
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap()
                .values()
                .to_vec()
        };
        let floats = |k: usize| -> Vec<f64> {
            cols[k]
                .as_any()
                .downcast_ref::<Float64Array>()
                .unwrap()
                .values()
                .to_vec()
        };
        assert_eq!(
            ints(0),
            vec![0, 4_000_000_000, 8_000_000_000, 12_000_000_000]
        );
        assert_eq!(ints(1), vec![3, 4, 4, 2]);
        assert_eq!(ints(2), vec![12, 0, 1, 3]);
        assert_eq!(floats(4), vec![2.0, 0.0, 0.0, 0.0]); // min fps
        assert_eq!(floats(5), vec![4.0, 0.0, 0.25, 1.5]); // mean fps
        assert_eq!(floats(6), vec![6.0, 0.0, 1.0, 3.0]); // max fps
        assert_eq!(floats(9), vec![480.0, 0.0, 80.0, 240.0]); // max bps
    }
}
