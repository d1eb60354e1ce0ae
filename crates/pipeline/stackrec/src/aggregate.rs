//! The interval levels' reading of the kernel: each tick's aggregates and
//! socket walk into stack_intervals rows.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use stack::interval::{Interval, Intervals};
use stack::walk::{WalkRow, Walks};
use stack::{Attached, Loaded};
use store::stack_intervals::IntervalWriter;

use crate::rows::interval_row;
use crate::{Level, RecordError, StackOptions};

/// The interval levels' reading of the kernel: the socket walk, and the
/// per-packet aggregates at the levels that have them.
pub(crate) struct Aggregates {
    writer: IntervalWriter,
    level: Level,
    /// Above the walk level.
    intervals: Option<Intervals>,
    walks: Walks,
    /// The sockets already open have joined the walk.
    enrolled: bool,
    /// The epoch the programs are in (they start in 1).
    epoch: u64,
    /// When it started, wall clock.
    start_ns: i64,
    /// When the next interval is due, from the start of the recording.
    next: Duration,
    /// How long an interval is.
    interval: Duration,
}

/// An open socket whose counts have not changed for this long loses its
/// kernel entry (it starts again from zero if it comes back).
const IDLE: Duration = Duration::from_secs(60);

impl Aggregates {
    pub(crate) fn new(dir: &Path, opts: &StackOptions) -> Aggregates {
        let idle_reads =
            (IDLE.as_nanos() / opts.interval.as_nanos().max(1)).clamp(1, u32::MAX as u128) as u32;
        Aggregates {
            writer: IntervalWriter::new(dir, opts.rotate_rows),
            level: opts.level,
            intervals: (opts.level >= Level::Device).then(|| Intervals::new(idle_reads)),
            walks: Walks::new(),
            enrolled: false,
            epoch: 1,
            start_ns: store::time::now_ns(),
            next: opts.interval,
            interval: opts.interval,
        }
    }

    /// When the next interval is due, from the start of the recording.
    pub(crate) fn next_due(&self) -> Duration {
        self.next
    }

    /// Ends the interval that is due ([`Aggregates::tick`]); the next is
    /// due an interval later.
    pub(crate) fn tick_due(
        &mut self,
        loaded: &Loaded<'_>,
        attached: &Attached,
    ) -> Result<(), RecordError> {
        self.tick(loaded, attached)?;
        self.next += self.interval;
        Ok(())
    }

    /// stack_intervals rows written so far.
    pub(crate) fn rows(&self) -> u64 {
        self.writer.rows()
    }

    /// Writes what is left; the stack_intervals files.
    pub(crate) fn finish(self) -> Result<Vec<String>, store::StoreError> {
        self.writer.finish()
    }

    /// Sockets remembered, for the live display.
    pub(crate) fn sockets(&self) -> usize {
        self.walks
            .sockets()
            .max(self.intervals.as_ref().map_or(0, |i| i.sockets()))
    }

    /// Ends the current interval: the programs move on to the next epoch,
    /// then the one that ended is read, the sockets are walked, the rows
    /// are written and the sockets that are done are removed from the
    /// kernel's map.
    pub(crate) fn tick(
        &mut self,
        loaded: &Loaded<'_>,
        attached: &Attached,
    ) -> Result<(), RecordError> {
        let mut agg = Vec::new();
        if let Some(intervals) = self.intervals.as_mut() {
            let ended = self.epoch;
            self.epoch += 1;
            loaded.start_epoch(self.epoch)?;
            let sockets = loaded.read_aggregates();
            let read = intervals.read(ended, sockets.iter().map(|(c, v)| (*c, v.as_slice())));
            loaded.delete_aggregates(&read.delete);
            agg = read.rows;
        }
        // The walk, then the sockets that closed meanwhile: one closing
        // while the walk ran is in one or both (see Walks::read). The
        // first tick enrolls the sockets already open instead.
        let walked = if self.enrolled {
            loaded.walk(attached)?
        } else {
            self.enrolled = true;
            loaded.enroll(attached)?
        };
        let finals = loaded.take_finals();
        let walk = self.walks.read(&walked, &finals);
        let end_ns = store::time::now_ns();
        let mut rows: BTreeMap<u64, (Option<&Interval>, Option<&WalkRow>)> = BTreeMap::new();
        for r in &agg {
            rows.entry(r.cookie).or_default().0 = Some(r);
        }
        for w in &walk {
            rows.entry(w.now.cookie).or_default().1 = Some(w);
        }
        for (a, w) in rows.values() {
            self.writer
                .push(&interval_row(*a, *w, self.level, self.start_ns, end_ns));
        }
        self.writer.flush()?;
        self.start_ns = end_ns;
        Ok(())
    }
}
