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

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use store::manifest::{
    Files, Manifest, MergeInfo, MergeInput, PcapFileEntry, RemovedPcapEntry, RunInfo, TimeSpan,
};
use store::read::{RowGroupSpan, read_row_group, row_group_spans};
use store::rewrite::{Rewrite, rewrite_file};
use store::{Dataset, PacketWriter, PacketWriterOptions, StoreError};
use wire::{Has, PacketRecord};

use crate::FrameStats;

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

/// A row group waiting to be read, in the order of the earliest row it
/// can hold.
struct Queued<'a> {
    input: usize,
    path: &'a Path,
    span: RowGroupSpan,
}

/// A run's next row in the heap; ordered by time, then input, then run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Head {
    ts: i64,
    input: u16,
    run: usize,
}

/// The packet records of all inputs, in time order, duplicates dropped,
/// renumbered and written.
fn merge_packets(
    sources: &[Input],
    numbering: &Numbering,
    offsets: &[i64],
    out: &Dataset,
    opts: &MergeOptions,
) -> Result<MergedPackets, StoreError> {
    let mut dedup = opts.dedup_window_ns.map(|w| Dedup::new(w, offsets));
    let mut per_input = vec![InputCounts::default(); sources.len()];
    let mut stats = FrameStats::default();
    let mut writer = PacketOut::new(out, opts);
    let mut queue: Vec<Queued> = sources
        .iter()
        .enumerate()
        .flat_map(|(input, s)| {
            s.chunks.iter().map(move |c| Queued {
                input,
                path: &c.path,
                span: c.span,
            })
        })
        .collect();
    queue.sort_by_key(|q| (q.span.ts_min, q.input));
    let mut runs = Runs::default();
    let mut next = 0;
    loop {
        // No unread row group holds a row earlier than its own minimum.
        let horizon = queue.get(next).map_or(i64::MAX, |q| q.span.ts_min);
        while let Some((i, rec)) = runs.pop_before(horizon) {
            per_input[i].frames += 1;
            if let Some(d) = dedup.as_mut()
                && d.is_duplicate(rec, i)
            {
                per_input[i].duplicates += 1;
            } else {
                rec.iface = (rec.iface as usize + numbering.iface_base[i]) as u16;
                if rec.has & Has::PCAP != 0 {
                    rec.pcap_file = (rec.pcap_file as u64 + numbering.pcap_base[i]) as u32;
                }
                stats.add(rec);
                writer.push(rec)?;
            }
        }
        let Some(q) = queue.get(next) else {
            break;
        };
        next += 1;
        runs.load(q)?;
    }
    Ok(MergedPackets {
        files: writer.finish()?,
        stats,
        per_input,
    })
}

/// One sorted run per row group read; the heap holds each run's next
/// row, so it is only as big as the number of runs that overlap.
#[derive(Default)]
struct Runs {
    runs: Vec<Run>,
    free: Vec<usize>,
    heap: BinaryHeap<Reverse<Head>>,
}

impl Runs {
    /// The earliest row of all runs, with its input, if it is earlier than
    /// `horizon`.
    fn pop_before(&mut self, horizon: i64) -> Option<(usize, &mut PacketRecord)> {
        let &Reverse(head) = self.heap.peek()?;
        if head.ts >= horizon {
            return None;
        }
        self.heap.pop();
        let r = &mut self.runs[head.run];
        let at = r.order[r.pos] as usize;
        r.pos += 1;
        if let Some(&o) = r.order.get(r.pos) {
            self.heap.push(Reverse(Head {
                ts: r.recs[o as usize].ts_ns,
                ..head
            }));
        }
        if r.pos == r.order.len() {
            // Its rows stay until the slot is loaded again, after this
            // one is used.
            self.free.push(head.run);
        }
        Some((head.input as usize, &mut r.recs[at]))
    }

    /// Reads a row group into a free run and puts its first row in the
    /// heap.
    fn load(&mut self, q: &Queued) -> Result<(), StoreError> {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.runs.push(Run::default());
                self.runs.len() - 1
            }
        };
        let r = &mut self.runs[slot];
        r.recs.clear();
        read_row_group(q.path, q.span.index, &mut r.recs)?;
        r.order.clear();
        r.order.extend(0..r.recs.len() as u32);
        let recs = &r.recs;
        r.order.sort_by_key(|&o| recs[o as usize].ts_ns);
        r.pos = 0;
        match r.order.first() {
            Some(&o) => self.heap.push(Reverse(Head {
                ts: r.recs[o as usize].ts_ns,
                input: q.input as u16,
                run: slot,
            })),
            None => self.free.push(slot),
        }
        Ok(())
    }
}

impl MergedTables {
    /// Input `i`'s interfaces, sources, pcap files, stats and stack files.
    fn add(
        &mut self,
        s: &Input,
        i: usize,
        numbering: &Numbering,
        out: &Dataset,
    ) -> Result<(), StoreError> {
        let m = &s.manifest;
        let prefix = format!("i{i:02}-");
        for iface in &m.interfaces {
            let mut iface = iface.clone();
            iface.source += self.sources.len() as u32;
            self.interfaces.push(iface);
        }
        self.sources.extend(m.sources.iter().cloned());
        let pcap_base = numbering.pcap_base[i];
        for p in &m.files.pcap {
            let rel = renamed(&p.path, &prefix);
            link_or_copy(&s.root.join(&p.path), &out.root().join(&rel))?;
            self.files.pcap.push(PcapFileEntry {
                id: (p.id as u64 + pcap_base) as u32,
                path: rel,
                ..p.clone()
            });
        }
        for p in &m.files.pcap_removed {
            self.files.pcap_removed.push(RemovedPcapEntry {
                id: (p.id as u64 + pcap_base) as u32,
                // The file that took its space has a new name here.
                overwritten_by: None,
                ..p.clone()
            });
        }
        let base = numbering.iface_base[i] as u16;
        let shift = move |v: u16| v + base;
        for rel in &m.files.stats {
            let to = renamed(rel, &prefix);
            std::fs::create_dir_all(out.root().join(store::dataset::STATS_DIR))
                .map_err(|e| StoreError::io(out.root(), e))?;
            rewrite_file(
                &s.root.join(rel),
                &out.root().join(&to),
                "stats",
                &|_, column| (column == "iface").then_some(Rewrite::U16(&shift)),
            )?;
            self.files.stats.push(to);
        }
        if let Some(st) = &m.stack {
            self.add_stack(s, st, &prefix, out)?;
        }
        if let Some(a) = &m.app {
            // Each row is whole in itself: the files are carried over
            // (a query two boxes both saw is in both, as in the inputs).
            let mut moved = a.clone();
            for list in [
                &mut moved.dns_files,
                &mut moved.tls_files,
                &mut moved.http_files,
            ] {
                for rel in list.iter_mut() {
                    let to = renamed(rel, &prefix);
                    link_or_copy(&s.root.join(&*rel), &out.root().join(&to))?;
                    *rel = to;
                }
            }
            self.app.get_or_insert_with(Default::default).merge(moved);
        }
        if m.rpc.is_some() {
            self.warnings.push(format!(
                "{}: its rpc and nfs tables are not merged (the same call seen by two boxes \
                 cannot be told apart there yet); run `weir analyze {} rpc` on it alone",
                s.root.display(),
                s.root.display()
            ));
        }
        Ok(())
    }

    /// An input's stack event files, its counters added to the others'.
    fn add_stack(
        &mut self,
        s: &Input,
        st: &store::manifest::StackInfo,
        prefix: &str,
        out: &Dataset,
    ) -> Result<(), StoreError> {
        let mut moved = Vec::new();
        for rel in &st.files {
            let to = renamed(rel, prefix);
            link_or_copy(&s.root.join(rel), &out.root().join(&to))?;
            moved.push(to);
        }
        let mut intervals = Vec::new();
        for rel in &st.interval_files {
            let to = renamed(rel, prefix);
            link_or_copy(&s.root.join(rel), &out.root().join(&to))?;
            intervals.push(to);
        }
        match self.stack.as_mut() {
            None => {
                self.stack = Some(store::manifest::StackInfo {
                    files: moved,
                    interval_files: intervals,
                    ..st.clone()
                });
            }
            Some(all) => {
                all.files.extend(moved);
                all.interval_files.extend(intervals);
                for (k, v) in &st.events {
                    *all.events.entry(k.clone()).or_default() += v;
                }
                for (k, v) in &st.lost {
                    *all.lost.entry(k.clone()).or_default() += v;
                }
                self.warnings.push(format!(
                    "{}: its stack events are kept, but the manifest's stack settings are \
                     those of the first input that had any",
                    s.root.display()
                ));
            }
        }
        Ok(())
    }
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

/// The rows of one row group, and their order by time.
#[derive(Default)]
struct Run {
    recs: Vec<PacketRecord>,
    order: Vec<u32>,
    pos: usize,
}

/// The merged packet files, a new one every `file_rows` rows.
struct PacketOut<'a> {
    out: &'a Dataset,
    opts: &'a MergeOptions,
    current: Option<PacketWriter>,
    done: Vec<store::PacketFileSummary>,
}

impl<'a> PacketOut<'a> {
    fn new(out: &'a Dataset, opts: &'a MergeOptions) -> Self {
        PacketOut {
            out,
            opts,
            current: None,
            done: Vec::new(),
        }
    }

    fn push(&mut self, rec: &PacketRecord) -> Result<(), StoreError> {
        if self
            .current
            .as_ref()
            .is_some_and(|w| w.rows() >= self.opts.file_rows.max(1))
        {
            self.close()?;
        }
        let w = match self.current.as_mut() {
            Some(w) => w,
            None => {
                let (path, rel) = self.out.packet_file(0, self.done.len() as u32);
                self.current
                    .insert(PacketWriter::create(&path, &rel, self.opts.writer)?)
            }
        };
        w.push(rec)
    }

    fn close(&mut self) -> Result<(), StoreError> {
        if let Some(w) = self.current.take() {
            self.done.push(w.finish()?);
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<store::PacketFileSummary>, StoreError> {
        self.close()?;
        Ok(self.done)
    }
}

/// The headers that identify a frame wherever it was seen: for IP frames
/// the IP and transport fields routers and taps leave alone (not the TTL,
/// not the MACs), for others the Ethernet header. Absent fields are zero
/// in a record, so they hash alike.
fn header_key(r: &PacketRecord) -> u64 {
    let mut h = KeyHash(r.wire_len as u64);
    if r.has & Has::IP != 0 {
        for half in [r.ip_src, r.ip_dst] {
            h.add(u64::from_le_bytes(half[..8].try_into().unwrap_or_default()));
            h.add(u64::from_le_bytes(half[8..].try_into().unwrap_or_default()));
        }
        h.add(
            r.ip_proto as u64
                | (r.dscp as u64) << 8
                | (r.frag as u64) << 16
                | (r.ip_len as u64) << 32,
        );
        h.add(r.ip_id as u64 | (r.src_port as u64) << 32 | (r.dst_port as u64) << 48);
        h.add(r.tcp_seq as u64 | (r.tcp_ack as u64) << 32);
        h.add(r.tcp_flags as u64 | (r.tcp_win as u64) << 16 | (r.udp_len as u64) << 32);
        h.add(r.icmp_type as u64 | (r.icmp_code as u64) << 8);
    } else {
        let mut macs = [0u8; 16];
        macs[..6].copy_from_slice(&r.eth_src);
        macs[6..12].copy_from_slice(&r.eth_dst);
        macs[12..14].copy_from_slice(&r.ethertype.to_le_bytes());
        h.add(u64::from_le_bytes(macs[..8].try_into().unwrap_or_default()));
        h.add(u64::from_le_bytes(macs[8..].try_into().unwrap_or_default()));
    }
    h.finish()
}

/// A multiply-rotate word hash with a final avalanche: the key of a frame
/// is hashed once per row, so it must be cheap; 64 bits keep accidental
/// collisions between different frames within a window out of reach.
struct KeyHash(u64);

impl KeyHash {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(23) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        x ^= x >> 33;
        x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        x ^ (x >> 33)
    }
}

/// The keys are already hashes: the maps use them as they are.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ *b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<PassThrough>>;

/// A frame kept, remembered while a duplicate of it may still come.
struct Kept {
    ts: i64,
    /// `ts` on the first input's clock.
    ts_ref: i64,
    input: u16,
    /// Inputs whose copy of this frame was dropped (bit per input).
    matched: u64,
}

struct Dedup {
    window: i64,
    offsets: Vec<i64>,
    /// How long a kept frame is remembered (ns of its own clock).
    keep_for: i64,
    recent: KeyMap<Slot>,
    /// The frames remembered, oldest first.
    order: VecDeque<Remembered>,
}

/// A frame's time and header key, to forget it when it is too old.
#[derive(Clone, Copy)]
struct Remembered {
    ts: i64,
    key: u64,
}

impl Dedup {
    fn new(window: i64, offsets: &[i64]) -> Self {
        let lo = offsets.iter().copied().min().unwrap_or(0);
        let hi = offsets.iter().copied().max().unwrap_or(0);
        Dedup {
            window,
            offsets: offsets.to_vec(),
            keep_for: window.saturating_add(hi.saturating_sub(lo)),
            recent: KeyMap::default(),
            order: VecDeque::new(),
        }
    }

    /// Whether `r` (from `input`, coming in time order) repeats a frame
    /// another input already gave; if not, it is remembered.
    fn is_duplicate(&mut self, r: &PacketRecord, input: usize) -> bool {
        let oldest = r.ts_ns.saturating_sub(self.keep_for);
        while let Some(&Remembered { ts, key }) = self.order.front() {
            if ts >= oldest {
                break;
            }
            self.order.pop_front();
            if let Some(slot) = self.recent.get_mut(&key)
                && slot.forget_before(oldest)
            {
                self.recent.remove(&key);
            }
        }
        let key = header_key(r);
        let ts_ref = r.ts_ns.saturating_sub(self.offsets[input]);
        let bit = 1u64 << input;
        let this = Kept {
            ts: r.ts_ns,
            ts_ref,
            input: input as u16,
            matched: 0,
        };
        self.order.push_back(Remembered { ts: r.ts_ns, key });
        let slot = match self.recent.entry(key) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Slot::One(this));
                return false;
            }
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        };
        // The nearest copy from another input that no frame of this input
        // has matched yet.
        let nearest = slot
            .kept()
            .iter_mut()
            .filter(|k| k.input as usize != input && k.matched & bit == 0)
            .map(|k| ((k.ts_ref - ts_ref).abs(), k))
            .filter(|(d, _)| *d <= self.window)
            .min_by_key(|(d, _)| *d);
        if let Some((_, k)) = nearest {
            k.matched |= bit;
            self.order.pop_back();
            return true;
        }
        slot.push(this);
        false
    }
}

/// The frames kept under one key: nearly always one, so without a
/// vector's allocation.
enum Slot {
    One(Kept),
    Many(Vec<Kept>),
}

impl Slot {
    fn kept(&mut self) -> &mut [Kept] {
        match self {
            Slot::One(k) => std::slice::from_mut(k),
            Slot::Many(v) => v,
        }
    }

    fn push(&mut self, k: Kept) {
        match self {
            Slot::One(first) => {
                let first = std::mem::replace(
                    first,
                    Kept {
                        ts: 0,
                        ts_ref: 0,
                        input: 0,
                        matched: 0,
                    },
                );
                *self = Slot::Many(vec![first, k]);
            }
            Slot::Many(v) => v.push(k),
        }
    }

    /// Forgets frames older than `oldest`; true when none is left.
    fn forget_before(&mut self, oldest: i64) -> bool {
        match self {
            Slot::One(k) => k.ts < oldest,
            Slot::Many(v) => {
                v.retain(|k| k.ts >= oldest);
                v.is_empty()
            }
        }
    }
}

/// A header key's first time in an input's sample, and how often it
/// occurs there.
#[derive(Clone, Copy)]
struct Sampled {
    ts: i64,
    count: u32,
}

#[derive(Clone, Debug, Default)]
struct OffsetEstimate {
    offset: Option<i64>,
    frames: u64,
    spread: Option<i64>,
}

/// Each input's clock offset from the first input's, from the IP frames
/// both saw near the start of their common time: the median difference of
/// their timestamps over frames whose headers occur once in each sample.
fn estimate_offsets(
    sources: &[Input],
    opts: &MergeOptions,
) -> Result<Vec<OffsetEstimate>, StoreError> {
    let first_ts = |s: &Input| {
        s.chunks
            .iter()
            .map(|c| c.span.ts_min)
            .filter(|&t| t != i64::MIN)
            .min()
    };
    let Some(start) = sources.iter().filter_map(first_ts).max() else {
        return Ok(vec![OffsetEstimate::default(); sources.len()]);
    };
    let from = start.saturating_sub(opts.max_offset_ns);
    let sample = |s: &Input| -> Result<KeyMap<Sampled>, StoreError> {
        let mut chunks: Vec<_> = s.chunks.iter().filter(|c| c.span.ts_max >= from).collect();
        chunks.sort_by_key(|c| c.span.ts_min);
        let mut keys: KeyMap<Sampled> = KeyMap::default();
        let mut rows = 0;
        let mut batch = Vec::new();
        for Chunk { path, span } in chunks {
            if rows >= opts.offset_sample_rows {
                break;
            }
            batch.clear();
            read_row_group(path, span.index, &mut batch)?;
            for r in batch
                .iter()
                .filter(|r| r.ts_ns >= from && r.has & Has::IP != 0)
            {
                let e = keys.entry(header_key(r)).or_insert(Sampled {
                    ts: r.ts_ns,
                    count: 0,
                });
                e.count += 1;
                rows += 1;
            }
        }
        Ok(keys)
    };
    let reference = sample(&sources[0])?;
    let mut out = vec![OffsetEstimate::default()];
    for s in &sources[1..] {
        let mut diffs: Vec<i64> = sample(s)?
            .iter()
            .filter(|(_, s)| s.count == 1)
            .filter_map(|(k, s)| match reference.get(k) {
                Some(&Sampled { ts: t0, count: 1 }) => Some(s.ts - t0),
                _ => None,
            })
            .filter(|d| d.abs() <= opts.max_offset_ns)
            .collect();
        diffs.sort_unstable();
        let q = |p: usize| diffs[(diffs.len() - 1) * p / 100];
        out.push(if diffs.is_empty() {
            OffsetEstimate::default()
        } else {
            OffsetEstimate {
                offset: Some(q(50)),
                frames: diffs.len() as u64,
                spread: Some(q(90) - q(10)),
            }
        });
    }
    Ok(out)
}

/// Merges datasets that lie in one object store (or one file system)
/// without copying a byte: `out` gets a manifest that names each input by
/// its path relative to `out` (`merge.linked`) and whose chain holds every
/// file of every input, with the size and digest the input's own chain
/// gave it, under that path (`../site/a/packets/...`), and each input's
/// manifest. Readers read the inputs; `weir verify` of `out` reads their
/// files. Every frame of every input is kept (no duplicate is looked for:
/// that would need a copy to leave it out of).
pub fn link(
    inputs: &[util::storage::Root],
    out: &util::storage::Root,
    command: &str,
    key: Option<&store::integrity::SigningKey>,
) -> Result<MergeReport, StoreError> {
    let started = Instant::now();
    let invalid = |root: &dyn util::storage::Storage, message: String| StoreError::Invalid {
        path: root.name().into(),
        message,
    };
    if inputs.len() < 2 {
        return Err(invalid(
            &**out,
            "give at least two datasets to merge".into(),
        ));
    }
    let mut chain_inputs = Vec::new();
    let mut merge_inputs = Vec::new();
    let mut entries: Vec<(String, u64, String)> = Vec::new();
    let mut manifest = Manifest::new(
        "merge",
        "each input's own, as captured (merge.inputs: their clocks)",
        store::RowOrder::Flow,
    );
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    let mut seen = Vec::new();
    for root in inputs {
        let rel = util::storage::relative(&out.name(), &root.name()).ok_or_else(|| {
            invalid(
                &**root,
                format!(
                    "is not in the same store as {}: a merge without copying names its inputs \
                     by their place beside it; merge into a directory to copy them",
                    out.name()
                ),
            )
        })?;
        if rel.is_empty() || rel.split('/').all(|p| p != "..") {
            return Err(invalid(
                &**root,
                format!(
                    "is {} or inside it; write the merge beside its inputs",
                    out.name()
                ),
            ));
        }
        if seen.contains(&rel) {
            return Err(invalid(
                &**root,
                "is given twice; give each dataset once".into(),
            ));
        }
        seen.push(rel.clone());
        let raw = root
            .read(store::dataset::MANIFEST)
            .map_err(|e| store::location::io_error(&**root, store::dataset::MANIFEST, e))?;
        let m = Manifest::from_json(&root.name_of(store::dataset::MANIFEST), &raw)?;
        if m.merge.as_ref().is_some_and(|g| g.linked) {
            return Err(invalid(
                &**root,
                "is itself a merge without copies: give its inputs instead".into(),
            ));
        }
        let Some(chain) = &m.integrity else {
            return Err(invalid(
                &**root,
                "has no integrity record (an older weir's): its files cannot be named by digest"
                    .into(),
            ));
        };
        for (path, e) in chain.live() {
            if let (Some(n), Some(d)) = (e.bytes, &e.blake3) {
                entries.push((format!("{rel}/{path}"), n, d.clone()));
            }
        }
        let mut digest = util::digest::Hasher::new();
        digest.update(&raw);
        let d = digest.finish();
        entries.push((
            format!("{rel}/{}", store::dataset::MANIFEST),
            d.bytes,
            d.hex(),
        ));
        chain_inputs.push(store::integrity::Integrity::input_from("merge", &rel, &m));
        if let Some(t) = &m.time_span {
            first = first.min(t.first_ns);
            last = last.max(t.last_ns);
        }
        let c = &mut manifest.counts;
        c.frames += m.counts.frames;
        c.wire_bytes += m.counts.wire_bytes;
        c.captured_bytes += m.counts.captured_bytes;
        for (k, v) in &m.counts.parse_errors {
            *c.parse_errors.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &m.counts.protocols {
            *c.protocols.entry(k.clone()).or_default() += v;
        }
        merge_inputs.push(MergeInput {
            path: rel,
            kind: m.kind.clone(),
            clock: m.clock.clone(),
            shard: m.capture.as_ref().and_then(|c| c.shard.clone()),
            frames: m.counts.frames,
            iface_base: manifest.interfaces.len() as u16,
            ..Default::default()
        });
        manifest.interfaces.extend(m.interfaces.iter().cloned());
        manifest.sources.extend(m.sources.iter().cloned());
    }
    let mut chain = store::integrity::Integrity::new(chain_inputs);
    for (path, bytes, blake3) in &entries {
        chain.add_file(path, *bytes, blake3);
    }
    let elapsed = started.elapsed();
    manifest.time_span = (first <= last).then(|| TimeSpan::new(first, last));
    manifest.merge = Some(MergeInfo {
        linked: true,
        dedup_window_ns: None,
        duplicates_removed: 0,
        inputs: merge_inputs,
    });
    manifest.run = Some(RunInfo {
        command: command.to_string(),
        workers: 1,
        elapsed_s: elapsed.as_secs_f64(),
        frames_per_s: 0.0,
    });
    manifest.integrity = Some(chain);
    let manifest = store::location::write_sealed(&**out, &manifest, key)?;
    Ok(MergeReport {
        manifest,
        elapsed,
        warnings: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::PacketFields;

    fn frame(ts: i64, seq: u32) -> PacketRecord {
        PacketRecord {
            fields: PacketFields {
                ts_ns: ts,
                wire_len: 100,
                has: Has::IP | Has::TCP,
                tcp_seq: seq,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_frame_seen_twice_is_kept_once_and_repeats_within_one_input_stay() {
        let mut d = Dedup::new(1_000, &[0, 5_000]);
        // Input 0 sends the same headers twice (a repeat on one box is a
        // real second frame); input 1 saw both, 5 us later on its clock.
        assert!(!d.is_duplicate(&frame(0, 1), 0));
        assert!(!d.is_duplicate(&frame(500, 1), 0));
        assert!(d.is_duplicate(&frame(5_000, 1), 1));
        assert!(d.is_duplicate(&frame(5_500, 1), 1));
        // A third copy from input 1 has no partner left.
        assert!(!d.is_duplicate(&frame(5_600, 1), 1));
        // Other headers, or too far apart, are other frames.
        assert!(!d.is_duplicate(&frame(6_000, 2), 1));
        assert!(!d.is_duplicate(&frame(9_000, 3), 0));
        assert!(!d.is_duplicate(&frame(16_000, 3), 1));
    }

    #[test]
    fn kept_frames_are_forgotten_after_the_window_and_the_offsets() {
        let mut d = Dedup::new(1_000, &[0, -2_000]);
        for i in 0..10_000 {
            assert!(!d.is_duplicate(&frame(i * 10_000, i as u32), 0));
        }
        assert!(d.recent.len() <= 2, "{} remembered", d.recent.len());
    }

    #[test]
    fn names_keep_their_directory() {
        assert_eq!(
            renamed("pcap/w000-00001.pcap", "i01-"),
            "pcap/i01-w000-00001.pcap"
        );
        assert_eq!(renamed("x", "i00-"), "i00-x");
    }
}
