//! `weir stack`'s recording: the programs of the stack source (loaded,
//! attached and read by the `stack` crate) into the dataset's stack table,
//! its per-second counters and the manifest's `stack` section.
//!
//! By default nothing runs on the packet path: every `--interval` an
//! iter/tcp walk reads each TCP socket's own counters and this writes
//! their differences into the stack_intervals table (state changes and
//! retransmissions still come one by one into the stack table). The
//! per-packet levels (`--with-device`, `--with-delay`) also have the
//! kernel add the frequent events up per socket, read at the same ticks;
//! with `--events all` every event is a record.
//!
//! The stack source's reader copies records off the ring buffers on the
//! calling thread; a writer thread puts them in time order, decodes them
//! and encodes them into Parquet, so that a slow disk delays only the
//! writer, and if that backs up, the kernel counts what the full ring
//! buffers could not take (per event type) instead of anything waiting.
//!
//! Its parts: `options` (what a recording is asked to do), `output` (the
//! dataset and the manifest's `stack` section), `poll` (the loop that reads
//! the ring buffers), `aggregate` (the interval levels' reading of the
//! kernel), `rows` (a socket's interval as a stack_intervals row),
//! `seconds` (the stats table's per-second rows) and `writer` (the thread
//! that orders, decodes and writes the events).

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use stack::event::kind;
use stack::{Prepared, Probe, Reader, StackError};
use store::manifest::ProgramCost;
use store::stack_intervals::INTERVALS_DIR;

mod aggregate;
mod options;
mod output;
mod poll;
mod rows;
mod seconds;
mod writer;

use aggregate::Aggregates;
pub use options::{Level, StackOptions};
use output::{Ended, Output, program_cost};
use poll::{Running, poll_until_stopped};
use seconds::Seconds;
use writer::WriterThread;

/// Why a recording could not start or go on. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Stack(#[from] StackError),
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

/// One second of a recording, for a live display.
#[derive(Clone, Debug, Default)]
pub struct Second {
    pub events: u64,
    pub lost: u64,
    pub sockets: usize,
}

/// What a recording did.
#[derive(Clone, Debug, Default)]
pub struct StackReport {
    pub events: BTreeMap<String, u64>,
    pub lost: BTreeMap<String, u64>,
    /// Records user space could not read (wrong size or type): a bug if
    /// ever non-zero.
    pub malformed: u64,
    pub files: Vec<String>,
    /// stack_intervals files (the default mode).
    pub interval_files: Vec<String>,
    pub stats_files: Vec<String>,
    pub snapshots: u64,
    /// With `program_stats`: runs and ns per program.
    pub program_cost: BTreeMap<String, ProgramCost>,
    pub elapsed: Duration,
    pub ended_by: String,
    pub prepared: Prepared,
}

impl StackReport {
    pub fn total_events(&self) -> u64 {
        self.events.values().sum()
    }
    pub fn total_lost(&self) -> u64 {
        self.lost.values().sum()
    }
}

/// Records until `stop` is set or the duration passes. `on_ready` is called
/// once the programs are attached; `each_second` once a second.
pub fn record(
    root: &Path,
    opts: &StackOptions,
    stop: &AtomicBool,
    on_ready: impl FnOnce(&Prepared),
    each_second: impl FnMut(&Second),
) -> Result<StackReport, RecordError> {
    if opts.aggregate
        && !(Duration::from_millis(10)..=Duration::from_secs(3600)).contains(&opts.interval)
    {
        return Err(StackError::Usage("--interval: give 10ms to 1h".into()).into());
    }
    let probe = Probe::prepare(&opts.probe())?;
    let out = Output::open(root, opts)?;
    let mut aggs = if opts.aggregate {
        Some(Aggregates::new(&out.ds.subdir(INTERVALS_DIR)?, opts))
    } else {
        None
    };
    let mut objects = [MaybeUninit::uninit(), MaybeUninit::uninit()];
    let loaded = probe.load(&mut objects)?;
    let mut attached = loaded.attach()?;
    if let Some(a) = aggs.as_mut() {
        // The sockets already open: the baseline the first interval is
        // counted from.
        a.tick(&loaded, &attached)?;
    }
    let (writer, to_writer) = WriterThread::start(&out, opts)?;
    let reader = Reader::new(&loaded, to_writer.chunks, to_writer.free)?;
    let started = Instant::now();
    let mut prepared = probe.prepared().clone();
    if loaded.walk_by() == Some(stack::WalkBy::Scan) {
        prepared.warnings.push(
            "this kernel refuses the iterator over socket storage (iter/bpf_sk_storage_map): \
             the socket walk scans the TCP sockets of its own network namespace and of \
             those under /run/netns instead (iter/tcp); sockets elsewhere are not walked"
                .to_string(),
        );
    }
    on_ready(&prepared);
    let mut seconds = Seconds::new(&out.stats_dir, opts.publisher.clone());
    let run = Running {
        started,
        loaded: &loaded,
        attached: &attached,
        reader: &reader,
        sockets: &writer.sockets,
        aggs: aggs.as_mut(),
    };
    let polled = poll_until_stopped(opts, stop, run, &mut seconds, each_second)?;
    let program_cost = if opts.program_stats {
        program_cost(&loaded)
    } else {
        BTreeMap::new()
    };
    // Detach the event programs first so that nothing more arrives, then
    // drain what is queued.
    attached.detach_events();
    let mut collected = reader.finish();
    // The last, partial interval: nothing adds to it any more.
    let interval_files = match aggs {
        Some(mut a) => {
            a.tick(&loaded, &attached)?;
            collected.events[kind::INTERVAL as usize] = a.rows();
            a.finish()?
        }
        None => Vec::new(),
    };
    drop(attached);
    let lost = loaded.lost();
    let last = seconds.end(&collected.events, &lost);
    seconds.write(last)?;
    let written = writer.join()?;
    let stats_files: Vec<String> = seconds
        .finish()?
        .into_iter()
        .map(|f| format!("{}/{f}", store::dataset::STATS_DIR))
        .collect();
    let ended = Ended {
        ended_by: polled.ended_by,
        events: collected.events,
        lost,
        program_cost,
        elapsed: started.elapsed(),
        interval_files,
    };
    let report = StackReport {
        malformed: collected.malformed,
        stats_files,
        snapshots: polled.snapshots,
        prepared: probe.prepared().clone(),
        ..out.finish(ended, written, opts.publish_wait)?
    };
    Ok(report)
}
