//! The stats table's per-second counters of a recording.

use std::path::Path;
use std::sync::Arc;

use stack::event::kind;
use store::stats::{StackCounts, StatsRow, StatsWriter};

/// The stats table's per-second counters of the recording.
pub(crate) struct Seconds {
    stats: StatsWriter,
    /// When the second being counted started.
    start_ns: i64,
    /// The counts at its start.
    prev_events: [u64; kind::COUNT],
    prev_lost: [u64; kind::COUNT],
    /// The dataset's uploader (`--upload`), and its figures at the start
    /// of the second.
    upload: Option<(
        Arc<dyn util::storage::Publisher>,
        util::storage::UploadFigures,
    )>,
}

impl Seconds {
    pub(crate) fn new(
        stats_dir: &Path,
        upload: Option<Arc<dyn util::storage::Publisher>>,
    ) -> Seconds {
        Seconds {
            stats: StatsWriter::with_prefix(stats_dir, 3600, "stack"),
            start_ns: store::time::now_ns(),
            prev_events: [0; kind::COUNT],
            prev_lost: [0; kind::COUNT],
            upload: upload.map(|u| (u, Default::default())),
        }
    }

    /// Ends the second at these counts: its rows.
    pub(crate) fn end(
        &mut self,
        events: &[u64; kind::COUNT],
        lost: &[u64; kind::COUNT],
    ) -> Vec<StatsRow> {
        let mut rows = second_rows(
            self.start_ns,
            events,
            &self.prev_events,
            lost,
            &self.prev_lost,
        );
        if let (Some((uploader, prev)), Some(first)) = (self.upload.as_mut(), rows.first_mut()) {
            first.upload = Some(store::stats::UploadSecond::since(prev, uploader.figures()));
        }
        self.prev_events = *events;
        self.prev_lost = *lost;
        rows
    }

    /// Writes a second's rows and starts the next.
    pub(crate) fn write(&mut self, rows: Vec<StatsRow>) -> Result<(), store::StoreError> {
        for r in rows {
            self.stats.push(r)?;
        }
        self.start_ns = store::time::now_ns();
        Ok(())
    }

    /// Closes the stats file; the files written.
    pub(crate) fn finish(self) -> Result<Vec<String>, store::StoreError> {
        self.stats.finish()
    }
}

/// The stats rows of one second: one per event type that had events or
/// losses, or one for `send` when nothing happened at all (so every second
/// of the recording has a row).
fn second_rows(
    ts_ns: i64,
    events: &[u64; kind::COUNT],
    prev_events: &[u64; kind::COUNT],
    lost: &[u64; kind::COUNT],
    prev_lost: &[u64; kind::COUNT],
) -> Vec<StatsRow> {
    let mut rows: Vec<StatsRow> = (0..kind::COUNT)
        .filter_map(|k| {
            let e = events[k] - prev_events[k];
            let l = lost[k].saturating_sub(prev_lost[k]);
            (e > 0 || l > 0).then_some(StatsRow {
                ts_ns,
                stack: Some(StackCounts {
                    event: k as u8,
                    events: e,
                    lost: l,
                }),
                ..Default::default()
            })
        })
        .collect();
    if rows.is_empty() {
        rows.push(StatsRow {
            ts_ns,
            stack: Some(StackCounts::default()),
            ..Default::default()
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_second_has_rows_and_counts_only_its_own() {
        let mut events = [0u64; kind::COUNT];
        let mut lost = [0u64; kind::COUNT];
        let quiet = second_rows(7, &events, &events, &lost, &lost);
        assert_eq!(quiet.len(), 1);
        assert_eq!(quiet[0].ts_ns, 7);
        assert_eq!(quiet[0].stack, Some(StackCounts::default()));

        let (prev_events, prev_lost) = (events, lost);
        events[kind::SEND as usize] = 5;
        events[kind::TCP_PROBE as usize] = 2;
        lost[kind::TCP_PROBE as usize] = 3;
        let rows = second_rows(8, &events, &prev_events, &lost, &prev_lost);
        let counts: Vec<StackCounts> = rows.iter().filter_map(|r| r.stack).collect();
        assert_eq!(
            counts,
            [
                StackCounts {
                    event: kind::SEND,
                    events: 5,
                    lost: 0
                },
                StackCounts {
                    event: kind::TCP_PROBE,
                    events: 2,
                    lost: 3
                },
            ]
        );
    }
}
