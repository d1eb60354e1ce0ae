//! Where `rates` puts its windows and samples over a span: the grid the
//! SQL and the pass over the columns both count on.

use crate::error::AnalyzeError;

/// Windows `rates` reports at most: a table of that many rows is already
/// more than anyone reads, and a slip of `--every` or `--to` (a year in
/// windows of a millisecond) should be an error, not an exhausted memory.
pub const MAX_RATE_WINDOWS: i64 = 10_000_000;

/// How `rates --every E --sample S` places its windows and samples over a
/// span: windows on whole multiples of E (minutes at :00), samples of S
/// inside them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateGrid {
    pub origin_ns: i64,
    pub every_ns: i64,
    pub sample_ns: i64,
    /// The span's first and last sample, counted from `origin_ns`.
    pub first_sample: i64,
    pub last_sample: i64,
    pub windows: i64,
}

impl RateGrid {
    pub fn new(
        (first, last): (i64, i64),
        every_ns: i64,
        sample_ns: i64,
    ) -> Result<Self, AnalyzeError> {
        if sample_ns <= 0 || every_ns < sample_ns || every_ns % sample_ns != 0 {
            return Err(AnalyzeError::Usage(format!(
                "--every ({every_ns} ns) must be a whole multiple of --sample ({sample_ns} ns)"
            )));
        }
        let origin = first.div_euclid(every_ns) * every_ns;
        let windows = (last - origin) / every_ns + 1;
        if windows > MAX_RATE_WINDOWS {
            return Err(AnalyzeError::Usage(format!(
                "rates: windows of {every_ns} ns over {} s make {windows} rows (at most \
                 {MAX_RATE_WINDOWS}); give a longer --every, or --from/--to around the part to \
                 look at",
                (last - first) / 1_000_000_000
            )));
        }
        Ok(RateGrid {
            origin_ns: origin,
            every_ns,
            sample_ns,
            first_sample: (first - origin) / sample_ns,
            last_sample: (last - origin) / sample_ns,
            windows,
        })
    }

    pub fn samples_per_window(&self) -> i64 {
        self.every_ns / self.sample_ns
    }

    /// The samples of window `win` inside the span.
    pub fn samples_in(&self, win: i64) -> i64 {
        let k = self.samples_per_window();
        self.last_sample.min((win + 1) * k - 1) - self.first_sample.max(win * k) + 1
    }

    pub fn per_second(&self) -> f64 {
        1e9 / self.sample_ns as f64
    }
}
