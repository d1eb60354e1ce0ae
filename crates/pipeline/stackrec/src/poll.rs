//! The loop that reads the ring buffers while the recording runs.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use stack::event::kind;
use stack::{Attached, Loaded, Reader};

use crate::aggregate::Aggregates;
use crate::seconds::Seconds;
use crate::{Level, RecordError, Second, StackOptions};

/// How long a poll of the ring buffers waits for a wake-up; the programs
/// wake the reader only when a quarter of a ring is queued, and every ring
/// is read after each poll.
const POLL: Duration = Duration::from_millis(20);
/// ... at the walk level, where state changes and retransmissions are all
/// the rings carry.
const WALK_POLL: Duration = Duration::from_millis(100);

/// The source while it runs, as the polling loop reads it.
pub(crate) struct Running<'r, 'o, 'l> {
    /// When the programs were attached and the reading began.
    pub(crate) started: Instant,
    pub(crate) loaded: &'r Loaded<'o>,
    pub(crate) attached: &'r Attached,
    pub(crate) reader: &'r Reader<'l>,
    /// Sockets the writer's decoder remembers.
    pub(crate) sockets: &'r AtomicUsize,
    /// The default mode's interval reader.
    pub(crate) aggs: Option<&'r mut Aggregates>,
}

/// What the polling loop did.
pub(crate) struct Polled {
    pub(crate) ended_by: &'static str,
    pub(crate) snapshots: u64,
}

/// Reads the ring buffers until `stop`, the duration, or a writer that
/// stopped; takes the snapshots when they are due, and ends each second.
pub(crate) fn poll_until_stopped(
    opts: &StackOptions,
    stop: &AtomicBool,
    run: Running<'_, '_, '_>,
    seconds: &mut Seconds,
    mut each_second: impl FnMut(&Second),
) -> Result<Polled, RecordError> {
    let started = run.started;
    let mut run = run;
    let mut next_second = Duration::from_secs(1);
    let mut next_snapshot = Duration::ZERO;
    let mut snapshots = 0u64;
    let ended_by = loop {
        let now = started.elapsed();
        if stop.load(Ordering::Relaxed) {
            break "signal";
        }
        if opts.duration.is_some_and(|d| now >= d) {
            break "duration";
        }
        if let Some(every) = opts.snapshot_every
            && now >= next_snapshot
        {
            run.reader.snapshot(run.attached)?;
            snapshots += 1;
            next_snapshot = now + every;
        }
        // At the walk level the rings carry only state changes and
        // retransmissions: read them at the walks, not 50 times a second
        // (a ring a quarter full still wakes the reader at once).
        let mut wait = if opts.aggregate && opts.level == Level::Walk {
            opts.interval.min(WALK_POLL)
        } else {
            POLL
        };
        if let Some(d) = opts.duration {
            wait = wait.min(d.saturating_sub(now));
        }
        if let Some(a) = &run.aggs {
            wait = wait.min(a.next_due().saturating_sub(now));
        }
        run.reader.read(wait)?;
        if run.reader.consumer_gone() {
            break "writer-error";
        }
        if let Some(a) = run.aggs.as_deref_mut()
            && started.elapsed() >= a.next_due()
        {
            a.tick_due(run.loaded, run.attached)?;
        }
        if started.elapsed() >= next_second {
            let lost = run.loaded.lost();
            let mut events = run.reader.events();
            let mut sockets = run.sockets.load(Ordering::Relaxed);
            if let Some(a) = &run.aggs {
                events[kind::INTERVAL as usize] = a.rows();
                sockets = a.sockets();
            }
            let rows = seconds.end(&events, &lost);
            each_second(&Second {
                events: rows.iter().map(|r| r.stack.map_or(0, |s| s.events)).sum(),
                lost: rows.iter().map(|r| r.stack.map_or(0, |s| s.lost)).sum(),
                sockets,
            });
            seconds.write(rows)?;
            next_second += Duration::from_secs(1);
        }
    };
    Ok(Polled {
        ended_by,
        snapshots,
    })
}
