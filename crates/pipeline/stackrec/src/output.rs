//! The dataset a recording writes and the manifest's `stack` section.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use stack::event::kind;
use stack::{Loaded, StackError};
use store::Dataset;
use store::manifest::{Manifest, ProgramCost, StackInfo, TimeSpan};
use store::stack::{EVENT_NAMES, STACK_DIR};
use store::stack_intervals::INTERVALS_DIR;

use crate::writer::Written;
use crate::{Level, RecordError, StackOptions, StackReport};

/// The dataset a recording writes, and the manifest's `stack` section as
/// it goes.
pub(crate) struct Output {
    pub(crate) ds: Dataset,
    /// The manifest as it was found (or a new one).
    base: Manifest,
    pub(crate) stack_dir: PathBuf,
    pub(crate) stats_dir: PathBuf,
    pub(crate) clock_offset_ns: i64,
    info: StackInfo,
}

impl Output {
    /// Prepares the dataset and writes the `stack` section it starts with,
    /// so that a recording that is killed still says what it was.
    pub(crate) fn open(root: &Path, opts: &StackOptions) -> Result<Output, RecordError> {
        let (ds, base) = open_dataset(root, opts.force)?;
        let ds = ds
            .signed_with(opts.sign_key.clone())
            .published_to(opts.publisher.clone());
        let stack_dir = ds.subdir(STACK_DIR)?;
        let stats_dir = ds.subdir(store::dataset::STATS_DIR)?;
        let clock_offset_ns = stack::clock_offset_ns();
        let started_ns = store::time::now_ns();
        let info = StackInfo {
            started: store::time::format_ns(started_ns),
            ended_by: "running".to_string(),
            clock: "CLOCK_MONOTONIC (bpf_ktime_get_ns) + offset to CLOCK_REALTIME at start"
                .to_string(),
            clock_offset_ns,
            pid: opts.pid,
            comm: opts.comm.clone(),
            ports: opts.ports.clone(),
            cgroup: opts.cgroup.as_ref().map(|p| p.display().to_string()),
            ring_bytes: opts.ring_bytes as u64,
            devices: opts.devices && !(opts.aggregate && opts.level == Level::Walk),
            device_acks: opts.devices
                && opts.device_acks
                && !(opts.aggregate && opts.level == Level::Walk),
            snapshot_every_s: opts.snapshot_every.map(|d| d.as_secs_f64()),
            mode: if opts.aggregate { "intervals" } else { "all" }.to_string(),
            level: opts.aggregate.then(|| opts.level.name().to_string()),
            interval_s: opts.aggregate.then_some(opts.interval.as_secs_f64()),
            sockets: opts.aggregate.then_some(opts.sockets as u64),
            ..Default::default()
        };
        write_stack_info(&ds, &base, info.clone())?;
        Ok(Output {
            ds,
            base,
            stack_dir,
            stats_dir,
            clock_offset_ns,
            info,
        })
    }

    /// Writes the final `stack` section (and waits up to `publish_wait`
    /// for an upload to take it); the report of what was written.
    pub(crate) fn finish(
        mut self,
        ended: Ended,
        written: Written,
        publish_wait: Duration,
    ) -> Result<StackReport, RecordError> {
        let info = &mut self.info;
        info.ended_by = ended.ended_by.to_string();
        info.events = by_name(&ended.events);
        info.lost = by_name(&ended.lost);
        info.files = written.files.clone();
        info.time_span = written.span.map(|(a, b)| TimeSpan::new(a, b));
        info.program_cost = ended.program_cost.clone();
        info.interval_files = ended.interval_files.clone();
        write_stack_info(&self.ds, &self.base, self.info.clone())?;
        if self.ds.publisher().is_some() {
            let m = self.ds.read_manifest()?;
            self.ds.finish_publishing(&m, publish_wait)?;
        }
        Ok(StackReport {
            events: self.info.events,
            lost: self.info.lost,
            files: written.files,
            interval_files: ended.interval_files,
            program_cost: ended.program_cost,
            elapsed: ended.elapsed,
            ended_by: ended.ended_by.to_string(),
            ..Default::default()
        })
    }
}

/// How a recording ended, and what it counted.
pub(crate) struct Ended {
    pub(crate) ended_by: &'static str,
    pub(crate) events: [u64; kind::COUNT],
    pub(crate) lost: [u64; kind::COUNT],
    pub(crate) program_cost: BTreeMap<String, ProgramCost>,
    pub(crate) elapsed: Duration,
    pub(crate) interval_files: Vec<String>,
}

/// Prepares the dataset: a new one (kind "stack"), or an existing one
/// (a capture of the same traffic) that gets a stack table beside it.
fn open_dataset(root: &Path, force: bool) -> Result<(Dataset, Manifest), RecordError> {
    let has_manifest = root.join(store::dataset::MANIFEST).is_file();
    if has_manifest {
        let ds = Dataset::open(root)?;
        let m = ds.read_manifest()?;
        let dirs = [root.join(STACK_DIR), root.join(INTERVALS_DIR)];
        let has_files = dirs.iter().any(|dir| {
            std::fs::read_dir(dir)
                .map(|rd| {
                    rd.flatten()
                        .any(|e| e.file_name() != "." && e.file_name() != "..")
                })
                .unwrap_or(false)
        });
        if has_files {
            if !force {
                return Err(StackError::Usage(format!(
                    "{} already holds a stack recording; pass --force to replace it, or \
                     record into another dataset",
                    root.display()
                ))
                .into());
            }
            let mut removed = remove_stack_stats(&root.join(store::dataset::STATS_DIR))?;
            for (dir, table) in dirs.iter().zip([STACK_DIR, INTERVALS_DIR]) {
                let Ok(rd) = std::fs::read_dir(dir) else {
                    continue;
                };
                for e in rd.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    removed.insert(format!("{table}/{name}"), "replaced".into());
                }
                std::fs::remove_dir_all(dir).map_err(|e| StackError::io(dir, e))?;
            }
            // The integrity chain records why they went.
            ds.write_manifest_after_removing(&m, &removed)?;
        }
        return Ok((ds, m));
    }
    let ds = Dataset::create(root, false)?;
    let m = Manifest::new(
        "stack",
        "kernel (monotonic + offset)",
        store::RowOrder::Arrival,
    );
    Ok((ds, m))
}

/// Removes an earlier recording's stats files; returns them by
/// dataset-relative path, with the reason for the integrity chain.
fn remove_stack_stats(dir: &Path) -> Result<HashMap<String, String>, StackError> {
    let mut removed = HashMap::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Ok(removed);
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("stack-") || name.starts_with(".stack") {
            std::fs::remove_file(e.path()).map_err(|err| StackError::io(e.path(), err))?;
            removed.insert(
                format!("{}/{name}", store::dataset::STATS_DIR),
                "replaced".to_string(),
            );
        }
    }
    Ok(removed)
}

/// Writes the `stack` section (re-reading the manifest first, since a
/// capture may have rewritten it meanwhile).
fn write_stack_info(ds: &Dataset, base: &Manifest, info: StackInfo) -> Result<(), RecordError> {
    let mut m = ds.read_manifest().unwrap_or_else(|_| base.clone());
    if m.kind == "stack" {
        m.time_span = info.time_span.clone();
    }
    m.stack = Some(info);
    ds.write_manifest(&m)?;
    Ok(())
}

/// Each program's runs and CPU time so far, for the manifest.
pub(crate) fn program_cost(loaded: &Loaded<'_>) -> BTreeMap<String, ProgramCost> {
    let cost = |c: stack::ProgramRuns| ProgramCost {
        runs: c.runs,
        ns: c.ns,
    };
    loaded
        .program_cost()
        .into_iter()
        .map(|(k, c)| (k, cost(c)))
        .collect()
}

fn by_name(counts: &[u64; kind::COUNT]) -> BTreeMap<String, u64> {
    EVENT_NAMES
        .iter()
        .zip(counts)
        .map(|(n, c)| (n.to_string(), *c))
        .collect()
}
