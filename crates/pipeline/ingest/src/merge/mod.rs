//! `weir merge`: several datasets (capture boxes sharing a link, two taps,
//! shares of one capture) written as one, in time order, with a frame that
//! more than one of them saw kept once.
//!
//! Inputs are read a row group at a time, in order of their earliest
//! timestamp, through a heap: a row leaves the heap when no row group still
//! unread can hold an earlier one. Memory is then bounded by the row groups
//! that overlap in time (about one per capture worker per input), not by
//! the size of the inputs.
//!
//! Two frames are the same frame seen twice when they come from different
//! inputs, have the same headers (the IP and transport fields that do not
//! change on the way: not the TTL, not the MACs of an IP frame), and their
//! timestamps, each corrected by its input's clock offset, are within the
//! window. The offsets are estimated first, from the frames the inputs
//! have in common near the start of their overlap.

mod dedup;
mod link;
mod packets;
mod tables;

pub use link::link;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use store::manifest::{Files, Manifest, MergeInfo, MergeInput, RunInfo, TimeSpan};
use store::read::{RowGroupSpan, row_group_spans};
use store::{Dataset, PacketWriterOptions, StoreError};

use crate::FrameStats;
use dedup::{OffsetEstimate, estimate_offsets};
use packets::merge_packets;

/// Most inputs one merge takes (a duplicate's inputs are kept as bits of a
/// word).
pub const MAX_INPUTS: usize = 64;

#[derive(Clone, Debug)]
pub struct MergeOptions {
    /// Frames of different inputs with the same headers this close (ns,
    /// after the clock offsets) are one frame; `None` keeps every frame.
    pub dedup_window_ns: Option<i64>,
    /// The largest clock offset between inputs looked for (ns).
    pub max_offset_ns: i64,
    /// Frames per input read to estimate the clock offsets.
    pub offset_sample_rows: usize,
    pub writer: PacketWriterOptions,
    /// Rows per packet file of the merged dataset.
    pub file_rows: u64,
    pub command: String,
    /// The inputs as the manifest names them (URLs of inputs copied from
    /// an object store first); empty: their paths.
    pub input_names: Vec<String>,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions {
            dedup_window_ns: Some(1_000_000),
            max_offset_ns: 1_000_000_000,
            offset_sample_rows: 1 << 20,
            writer: PacketWriterOptions::default(),
            file_rows: 16 << 20,
            command: String::new(),
            input_names: Vec::new(),
        }
    }
}

pub struct MergeReport {
    pub manifest: Manifest,
    pub elapsed: Duration,
    /// What was not carried into the merged dataset, and why.
    pub warnings: Vec<String>,
}

struct Input {
    root: PathBuf,
    manifest: Manifest,
    chunks: Vec<Chunk>,
}

/// One row group of an input's packet file.
struct Chunk {
    path: PathBuf,
    span: RowGroupSpan,
}

/// Where each input's interfaces and pcap files start in the merged
/// numbering (they are renumbered input after input).
struct Numbering {
    iface_base: Vec<usize>,
    pcap_base: Vec<u64>,
}

/// What one input gave to the merged packet files.
#[derive(Clone, Copy, Default)]
struct InputCounts {
    frames: u64,
    duplicates: u64,
}

/// The merged packet files and what went into them.
struct MergedPackets {
    files: Vec<store::PacketFileSummary>,
    stats: FrameStats,
    per_input: Vec<InputCounts>,
}

/// The inputs' other tables and files, carried into the merged dataset.
#[derive(Default)]
struct MergedTables {
    files: Files,
    interfaces: Vec<store::manifest::InterfaceEntry>,
    sources: Vec<store::manifest::SourceInfo>,
    stack: Option<store::manifest::StackInfo>,
    app: Option<store::manifest::AppInfo>,
    warnings: Vec<String>,
}

/// Refuses what cannot be merged before anything is written: fewer than
/// two inputs or too many, one given twice, one that is not a dataset, an
/// output that is one of the inputs.
pub fn check_inputs(inputs: &[PathBuf], out: &Path) -> Result<(), StoreError> {
    let usage = |path: &Path, message: String| StoreError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    if inputs.len() < 2 {
        return Err(usage(out, "give at least two datasets to merge".into()));
    }
    if inputs.len() > MAX_INPUTS {
        return Err(usage(
            out,
            format!(
                "{} datasets given; one merge takes at most {MAX_INPUTS}: merge them in groups, \
                 then merge the results",
                inputs.len()
            ),
        ));
    }
    let out_real = out.canonicalize().ok();
    let mut seen = Vec::new();
    for root in inputs {
        Dataset::open(root)?;
        let real = root.canonicalize().ok();
        if real.is_some() && real == out_real {
            return Err(usage(
                root,
                "is also the output; write the merged dataset to a new directory".into(),
            ));
        }
        if seen.contains(&real) {
            return Err(usage(root, "is given twice; give each dataset once".into()));
        }
        seen.push(real);
    }
    Ok(())
}

/// Merges `inputs` (in that order; the first is the clock reference) into
/// `out`, an empty dataset.
pub fn merge(
    inputs: &[PathBuf],
    out: &Dataset,
    opts: &MergeOptions,
) -> Result<MergeReport, StoreError> {
    let started = Instant::now();
    check_inputs(inputs, out.root())?;
    let sources = open_inputs(inputs)?;
    let estimates = match opts.dedup_window_ns {
        Some(_) => estimate_offsets(&sources, opts)?,
        None => vec![OffsetEstimate::default(); sources.len()],
    };
    let offsets: Vec<i64> = estimates.iter().map(|e| e.offset.unwrap_or(0)).collect();
    let numbering = number_inputs(&sources, out)?;
    let packets = merge_packets(&sources, &numbering, &offsets, out, opts)?;
    let mut tables = MergedTables {
        files: Files {
            packets: packets.files,
            ..Default::default()
        },
        ..Default::default()
    };
    for (i, s) in sources.iter().enumerate() {
        tables.add(s, i, &numbering, out)?;
    }
    let merge_info = merge_info(&sources, &estimates, &packets.per_input, &numbering, opts);
    let elapsed = started.elapsed();
    let stats = packets.stats;
    let first = &sources[0].manifest;
    let manifest = Manifest {
        sources: tables.sources,
        interfaces: tables.interfaces,
        time_span: (stats.frames > 0).then(|| TimeSpan::new(stats.ts_min, stats.ts_max)),
        counts: stats.counts(),
        files: tables.files,
        run: Some(RunInfo {
            command: opts.command.clone(),
            workers: 1,
            elapsed_s: elapsed.as_secs_f64(),
            frames_per_s: stats.frames as f64 / elapsed.as_secs_f64().max(1e-9),
        }),
        drops: merged_drops(&sources),
        stack: tables.stack,
        app: tables.app,
        anonymized: first.anonymized.clone(),
        merge: Some(merge_info),
        // A chain of its own, naming each input by its seal.
        integrity: Some(store::integrity::Integrity::new(
            inputs
                .iter()
                .zip(&sources)
                .enumerate()
                .map(|(i, (p, s))| {
                    store::integrity::Integrity::input_from(
                        "merge",
                        &input_name(opts, i, p),
                        &s.manifest,
                    )
                })
                .collect(),
        )),
        ..Manifest::new(
            "merge",
            "each input's own, as captured (merge.inputs: their clocks and estimated offsets)",
            opts.writer.order,
        )
    };
    let manifest = out.write_manifest(&manifest)?;
    Ok(MergeReport {
        manifest,
        elapsed,
        warnings: tables.warnings,
    })
}

/// Each input's manifest and the row groups of its packet files.
fn open_inputs(inputs: &[PathBuf]) -> Result<Vec<Input>, StoreError> {
    let mut sources = Vec::new();
    for root in inputs {
        let ds = Dataset::open(root)?;
        let manifest = ds.read_manifest()?;
        let mut chunks = Vec::new();
        for f in &manifest.files.packets {
            let path = root.join(&f.path);
            for span in row_group_spans(&path)? {
                if span.rows > 0 {
                    chunks.push(Chunk {
                        path: path.clone(),
                        span,
                    });
                }
            }
        }
        sources.push(Input {
            root: root.clone(),
            manifest,
            chunks,
        });
    }
    Ok(sources)
}

/// Interfaces and pcap files are renumbered input after input; refuses
/// inputs with more than one dataset can number.
fn number_inputs(sources: &[Input], out: &Dataset) -> Result<Numbering, StoreError> {
    let mut iface_base = Vec::new();
    let mut pcap_base = Vec::new();
    let (mut next_iface, mut next_pcap) = (0usize, 0u64);
    for s in sources {
        iface_base.push(next_iface);
        pcap_base.push(next_pcap);
        next_iface += s.manifest.interfaces.len();
        let ids = s.manifest.files.pcap.iter().map(|p| p.id);
        let removed = s.manifest.files.pcap_removed.iter().map(|p| p.id);
        next_pcap += ids.chain(removed).max().map_or(0, |m| m as u64 + 1);
    }
    if next_iface > u16::MAX as usize + 1 || next_pcap > u32::MAX as u64 + 1 {
        return Err(StoreError::Invalid {
            path: out.root().to_path_buf(),
            message: "the inputs have more interfaces or pcap files than one dataset can \
                      number; merge fewer at a time"
                .into(),
        });
    }
    Ok(Numbering {
        iface_base,
        pcap_base,
    })
}

/// The manifest's account of the merge: each input, its counts, its clock
/// offset and where its numbering starts.
fn merge_info(
    sources: &[Input],
    estimates: &[OffsetEstimate],
    per_input: &[InputCounts],
    numbering: &Numbering,
    opts: &MergeOptions,
) -> MergeInfo {
    MergeInfo {
        linked: false,
        dedup_window_ns: opts.dedup_window_ns,
        duplicates_removed: per_input.iter().map(|p| p.duplicates).sum(),
        inputs: sources
            .iter()
            .zip(estimates)
            .zip(per_input)
            .enumerate()
            .map(|(i, ((s, e), counts))| MergeInput {
                path: input_name(opts, i, &s.root),
                kind: s.manifest.kind.clone(),
                clock: s.manifest.clock.clone(),
                shard: s.manifest.capture.as_ref().and_then(|c| c.shard.clone()),
                frames: counts.frames,
                duplicates: counts.duplicates,
                clock_offset_ns: if i == 0 { Some(0) } else { e.offset },
                offset_frames: e.frames,
                offset_spread_ns: e.spread,
                iface_base: numbering.iface_base[i] as u16,
                pcap_base: numbering.pcap_base[i] as u32,
            })
            .collect(),
    }
}

/// How the manifest names input `i`, at `path`.
fn input_name(opts: &MergeOptions, i: usize, path: &Path) -> String {
    match opts.input_names.get(i) {
        Some(n) => n.clone(),
        None => path.display().to_string(),
    }
}

/// The inputs' drop counters added up (each box lost its own frames).
fn merged_drops(sources: &[Input]) -> Option<store::manifest::Drops> {
    let mut all: Option<store::manifest::Drops> = None;
    for d in sources.iter().filter_map(|s| s.manifest.drops.as_ref()) {
        let a = all.get_or_insert_with(Default::default);
        a.kernel_seen += d.kernel_seen;
        a.kernel += d.kernel;
        a.pcap += d.pcap;
        a.pcap_write += d.pcap_write;
        a.ring_unread += d.ring_unread;
        a.records_write += d.records_write;
        a.flows_write += d.flows_write;
        a.stats_write += d.stats_write;
    }
    all
}

/// `dir/name` as `dir/PREFIXname`.
fn renamed(rel: &str, prefix: &str) -> String {
    match rel.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/{prefix}{name}"),
        None => format!("{prefix}{rel}"),
    }
}

/// A hard link when both are on one file system, else a copy.
fn link_or_copy(from: &Path, to: &Path) -> Result<(), StoreError> {
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, e))?;
    }
    if std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| StoreError::io(from, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_their_directory() {
        assert_eq!(
            renamed("pcap/w000-00001.pcap", "i01-"),
            "pcap/i01-w000-00001.pcap"
        );
        assert_eq!(renamed("x", "i00-"), "i00-x");
    }
}
