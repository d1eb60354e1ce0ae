//! `weir recover`: puts a dataset whose capture was killed (kill -9, a
//! power cut) back in order. Pcap files left open are cut at their last
//! whole frame (compressed ones get their seek table; one with no whole
//! frame is removed; one a ring writer was writing over an older file's
//! space is cut where the old frames begin, and the old file is listed as
//! overwritten); Parquet files left
//! open cannot be read (their footer was never written) and are removed,
//! their frames still being in the pcap files; the stats rows not yet in a
//! file are written from the journal; and the manifest is rebuilt from
//! what is on disk.
//!
//! A capture that uploaded its dataset (`--upload`) may have deleted the
//! local copies of files already in the bucket: those the bucket's
//! manifest names stay in the dataset as they were sealed ([`Uploaded`]),
//! and the recovered manifest goes up once the rest has.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pcapio::repair::{OverwriteMarker, repair_overwritten_pcap, repair_pcap, scan_pcap};
use store::dataset::{PACKETS_DIR, PCAP_DIR, STATS_DIR};
use store::manifest::{Drops, PcapFileEntry, RemovedPcapEntry, TimeSpan};
use store::packets::summarize_packet_file;
use store::stats::{read_stats_file, recover_journal};
use store::{Dataset, Manifest, StoreError};

use crate::late::{self, LateError};
use crate::worker::{Worker, WorkerOptions};

/// What recovery did.
#[derive(Debug, Default)]
pub struct Recovered {
    pub manifest: Option<Manifest>,
    /// Pcap files that were open, cut at their last whole frame.
    pub pcap_repaired: Vec<RepairedPcap>,
    /// Unfinished Parquet files removed.
    pub parts_removed: Vec<String>,
    /// The stats files written from the journals.
    pub stats_recovered: Vec<String>,
    /// Records built from the pcap files for frames that had none.
    pub records_built: u64,
    /// Flows files written again for packet files that had none.
    pub flows_rebuilt: Vec<String>,
    /// Nothing needed doing to the files.
    pub already_complete: bool,
    /// The manifest of a complete dataset was signed or its signature
    /// file written again.
    pub signature_written: bool,
}

/// Whether `seal.sig` holds the manifest's signature (or neither has one).
fn signature_file_current(root: &Path, m: &Manifest) -> bool {
    let want = m
        .integrity
        .as_ref()
        .and_then(|i| i.signature.as_ref())
        .map(|s| s.sshsig.as_str());
    let file = std::fs::read_to_string(root.join(store::integrity::SIGNATURE_FILE)).ok();
    file.as_deref() == want
}

/// A pcap file that was open, cut at its last whole frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairedPcap {
    pub name: String,
    /// Whole frames kept.
    pub frames: u64,
    /// Bytes cut.
    pub cut: u64,
}

fn io(path: &Path, e: std::io::Error) -> StoreError {
    StoreError::io(path, e)
}

fn entries(dir: &Path) -> Result<Vec<String>, StoreError> {
    let mut names = Vec::new();
    match std::fs::read_dir(dir) {
        Ok(rd) => {
            for e in rd {
                let e = e.map_err(|e| io(dir, e))?;
                names.push(e.file_name().to_string_lossy().into_owned());
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(dir, e)),
    }
    names.sort();
    Ok(names)
}

/// The record id of a capture's pcap file from its name
/// (`wWWW-SSSSS.pcap[.zst|.lz4]`: worker << 20 | sequence).
fn pcap_id(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('w')?;
    let (w, rest) = rest.split_once('-')?;
    let seq = rest.split('.').next()?;
    Some((w.parse::<u32>().ok()? << 20) | seq.parse::<u32>().ok()?)
}

/// The directories of a dataset recovery looks into.
struct Dirs {
    pcap: PathBuf,
    packets: PathBuf,
    stats: PathBuf,
    flows: PathBuf,
}

/// Where the files of an uploaded dataset are whose local copies are gone.
pub struct Uploaded {
    /// The dataset's uploader, told what the bucket holds already (its
    /// [`util::storage::Publisher::held_elsewhere`] are the files whose
    /// local copy is gone); it sends the rest and the recovered manifest.
    pub uploader: Arc<dyn util::storage::Publisher>,
    /// The dataset in the bucket, to read those files.
    pub remote: util::storage::Root,
}

/// Recovers the dataset at `root`, signing its new seal with `key`.
pub fn recover(
    root: &Path,
    key: Option<Arc<store::integrity::SigningKey>>,
    uploaded: Option<Uploaded>,
) -> Result<Recovered, StoreError> {
    let ds = Dataset::open(root)?
        .signed_with(key)
        .published_to(uploaded.as_ref().map(|u| u.uploader.clone()));
    let mut m = ds.read_manifest()?;
    // The killed capture's last manifest: what it said of the files that
    // are now only in the bucket.
    let last = m.clone();
    let away: Vec<util::storage::Listed> = uploaded
        .as_ref()
        .map(|u| u.uploader.held_elsewhere())
        .unwrap_or_default();
    let away_paths: HashSet<&str> = away.iter().map(|l| l.path.as_str()).collect();
    let remote = uploaded.as_ref().map(|u| &u.remote);
    let mut out = Recovered::default();
    let dirs = Dirs {
        pcap: root.join(PCAP_DIR),
        packets: root.join(PACKETS_DIR),
        stats: root.join(STATS_DIR),
        flows: root.join(store::flows::FLOWS_DIR),
    };
    // A killed capture's space reserve goes first: recovery may need it.
    let reserve = root.join(store::dataset::SpaceReserve::NAME);
    let had_reserve = reserve.exists();
    if had_reserve {
        std::fs::remove_file(&reserve).map_err(|e| io(&reserve, e))?;
    }
    let running = m.capture.as_ref().is_some_and(|c| c.ended_by == "running");
    if !running && !had_reserve && !has_leftovers(&dirs)? {
        out.already_complete = true;
        // Complete, but a key was given (signing it anew), or the
        // signature's file is not the manifest's (a crash between the
        // two writes): the manifest is written again, which signs it.
        if ds.is_signed() || !signature_file_current(root, &m) {
            m = ds.write_manifest(&m)?;
            out.signature_written = true;
        }
        out.manifest = Some(m);
        return Ok(out);
    }

    // Pcap: repair the files left open, then describe every file.
    repair_open_pcaps(&dirs.pcap, &mut m, &mut out)?;
    clear_overwrite_markers(&dirs.pcap, &mut m)?;
    let mut pcap = pcap_entries(&dirs.pcap)?;
    let local_pcap: HashSet<u32> = pcap.iter().map(|f| f.id).collect();
    pcap.extend(
        (last.files.pcap.iter())
            .filter(|f| away_paths.contains(f.path.as_str()))
            .cloned(),
    );
    pcap.sort_by_key(|f| f.id);
    // A kill between a ring's marker and its rename leaves the old file
    // whole under its own name: it was not overwritten, so it is kept.
    m.files
        .pcap_removed
        .retain(|r| !pcap.iter().any(|f| f.id == r.id));
    // Packet records: finished files stay; unfinished ones cannot be read.
    let mut packets = packet_files(root, &dirs.packets, &mut out)?;
    let local_packets = packets.len();
    packets.extend(
        (last.files.packets.iter())
            .filter(|f| away_paths.contains(f.path.as_str()))
            .cloned(),
    );
    // Frames that have no record (put off by the record threads, or in a
    // packet file left unfinished) get theirs from the pcap files.
    let records_sink = (m.capture.as_ref()).is_some_and(|c| c.sinks.iter().any(|s| s == "records"));
    if records_sink {
        let here = Here {
            pcap: &local_pcap,
            packets: local_packets,
            remote,
        };
        let built = build_missing_records(&ds, root, &pcap, &mut packets, &here, &mut out)?;
        if built > 0 || m.late_records.is_some() {
            let l = m.late_records.get_or_insert_with(Default::default);
            l.built += built;
            l.pending = 0;
        }
    }
    remove_flow_parts(&dirs.flows, &mut out)?;
    rebuild_flow_files(root, &packets, &mut out)?;
    let mut stats = stats_files(&dirs.stats, &mut out)?;
    for f in last.files.stats.iter() {
        if let (true, Some(remote)) = (away_paths.contains(f.as_str()), remote) {
            let data = remote
                .read(f)
                .map_err(|e| io(Path::new(&remote.name_of(f)), e))?;
            for r in store::stats::stats_rows_in(&remote.name_of(f), data)? {
                stats.add(&r);
            }
            stats.files.push(f.clone());
        }
    }
    stats.files.sort();

    let (mut lo, mut hi) = (None::<i64>, None::<i64>);
    let mut widen = |a: Option<i64>, b: Option<i64>| {
        if let Some(a) = a {
            lo = Some(lo.map_or(a, |x| x.min(a)));
        }
        if let Some(b) = b {
            hi = Some(hi.map_or(b, |x| x.max(b)));
        }
    };
    for f in &pcap {
        widen(f.ts_first, f.ts_last);
    }
    for f in &packets {
        widen(f.ts_min, f.ts_max);
    }
    let pcap_frames: u64 = pcap.iter().map(|f| f.frames).sum();
    let rows: u64 = packets.iter().map(|f| f.rows).sum();
    m.counts.frames = if pcap.is_empty() { rows } else { pcap_frames };
    m.time_span = lo.zip(hi).map(|(a, b)| TimeSpan::new(a, b));
    m.files.pcap = pcap;
    m.files.packets = packets;
    m.files.stats = stats.files;
    if let Some(c) = &mut m.capture
        && c.ended_by == "running"
    {
        c.ended_by = "killed (recovered)".to_string();
    }
    if m.drops.is_none() && !m.files.stats.is_empty() {
        m.drops = Some(stats.drops);
    }
    // A chain of its own, every file digested afresh: what the killed
    // capture chained last is named by its seal, and files it finished
    // after that, or that recovery cut back, are in the new chain as
    // they now are.
    let mut chain =
        store::integrity::Integrity::new(vec![store::integrity::Integrity::input_from(
            "recover",
            &root.display().to_string(),
            &m,
        )]);
    // Files only in the bucket: as the killed capture's chain sealed them
    // (the uploader checked each against it before sending).
    if let Some(sealed) = &last.integrity {
        let live = sealed.live();
        for f in &away {
            if let Some((bytes, blake3)) = live
                .get(f.path.as_str())
                .and_then(|e| Some((e.bytes?, e.blake3.as_deref()?)))
            {
                chain.add_file(&f.path, bytes, blake3);
            }
        }
    }
    m.integrity = Some(chain);
    out.manifest = Some(ds.write_manifest(&m)?);
    Ok(out)
}

/// Whether a killed writer left anything behind: a part file, an
/// overwrite marker or a stats journal.
fn has_leftovers(dirs: &Dirs) -> Result<bool, StoreError> {
    Ok([&dirs.pcap, &dirs.packets, &dirs.stats, &dirs.flows]
        .iter()
        .map(|d| entries(d))
        .collect::<Result<Vec<_>, _>>()?
        .iter()
        .flatten()
        .any(|n| {
            n.ends_with(".part")
                || OverwriteMarker::is_marker_name(n)
                || OverwriteMarker::is_unfinished_marker_name(n)
                || n == store::stats::JOURNAL
        }))
}

/// Cuts the pcap files left open at their last whole frame and gives them
/// their final names; removes those with no whole frame.
fn repair_open_pcaps(
    pcap_dir: &Path,
    m: &mut Manifest,
    out: &mut Recovered,
) -> Result<(), StoreError> {
    for name in entries(pcap_dir)? {
        let Some(final_name) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".part")) else {
            continue;
        };
        let part = pcap_dir.join(&name);
        let before = std::fs::metadata(&part).map_err(|e| io(&part, e))?.len();
        let marker_path = OverwriteMarker::path_for(&part);
        let marker = match marker_path.exists() {
            true => Some(OverwriteMarker::read(&marker_path).map_err(|e| io(&marker_path, e))?),
            false => None,
        };
        let scan = match &marker {
            Some(mk) => repair_overwritten_pcap(&part, mk.stale_until_ns),
            None => repair_pcap(&part),
        }
        .map_err(|e| io(&part, e))?;
        if let Some(mk) = &marker {
            let by = (scan.frames > 0).then(|| format!("{PCAP_DIR}/{final_name}"));
            note_overwritten(m, mk, by);
        }
        if scan.frames == 0 {
            // Opened but killed before a whole frame (or even the file
            // header) reached it: nothing to keep.
            std::fs::remove_file(&part).map_err(|e| io(&part, e))?;
            out.parts_removed.push(format!("{PCAP_DIR}/{name}"));
            if marker.is_some() {
                std::fs::remove_file(&marker_path).map_err(|e| io(&marker_path, e))?;
            }
            continue;
        }
        let path = pcap_dir.join(final_name);
        std::fs::rename(&part, &path).map_err(|e| io(&part, e))?;
        if marker.is_some() {
            std::fs::remove_file(&marker_path).map_err(|e| io(&marker_path, e))?;
        }
        out.pcap_repaired.push(RepairedPcap {
            name: final_name.to_string(),
            frames: scan.frames,
            cut: before.saturating_sub(scan.keep_len.min(before)),
        });
    }
    Ok(())
}

/// Markers whose file was finished (killed before the marker went), and
/// markers a kill left unfinished (the old file was not touched).
fn clear_overwrite_markers(pcap_dir: &Path, m: &mut Manifest) -> Result<(), StoreError> {
    for name in entries(pcap_dir)? {
        if OverwriteMarker::is_unfinished_marker_name(&name) {
            let path = pcap_dir.join(&name);
            std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
        } else if OverwriteMarker::is_marker_name(&name) {
            let path = pcap_dir.join(&name);
            let mk = OverwriteMarker::read(&path).map_err(|e| io(&path, e))?;
            let by = name
                .strip_prefix('.')
                .and_then(|n| n.strip_suffix(".part.overwrites"))
                .map(|n| format!("{PCAP_DIR}/{n}"));
            note_overwritten(m, &mk, by);
            std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
        }
    }
    Ok(())
}

/// The manifest's entries for the capture's pcap files, by id.
fn pcap_entries(pcap_dir: &Path) -> Result<Vec<PcapFileEntry>, StoreError> {
    let mut pcap = Vec::new();
    for name in entries(pcap_dir)? {
        if name.starts_with('.') {
            continue;
        }
        let path: PathBuf = pcap_dir.join(&name);
        let scan = scan_pcap(&path).map_err(|e| io(&path, e))?;
        let Some(id) = pcap_id(&name) else { continue };
        pcap.push(PcapFileEntry {
            id,
            path: format!("{PCAP_DIR}/{name}"),
            frames: scan.frames,
            bytes: scan.pcap_bytes,
            ts_first: scan.ts_first,
            ts_last: scan.ts_last,
            stored_bytes: scan.container.map(|_| scan.file_len),
            methods: Default::default(),
            digest: None,
        });
    }
    pcap.sort_by_key(|f| f.id);
    Ok(pcap)
}

/// The finished packet files; unfinished ones removed.
fn packet_files(
    root: &Path,
    packets_dir: &Path,
    out: &mut Recovered,
) -> Result<Vec<store::PacketFileSummary>, StoreError> {
    let mut packets = Vec::new();
    for name in entries(packets_dir)? {
        let path = packets_dir.join(&name);
        if name.ends_with(".part") {
            std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
            out.parts_removed.push(format!("{PACKETS_DIR}/{name}"));
        } else if name.ends_with(".parquet") {
            packets.push(summarize_packet_file(
                root,
                &format!("{PACKETS_DIR}/{name}"),
            )?);
        }
    }
    Ok(packets)
}

/// Builds the records of every frame in the pcap files that no packet
/// file points at, into packet files of their own (numbered after each
/// worker's last); returns how many.
/// Which of the files the manifest lists are on the local disk (an
/// uploaded dataset's others are in the bucket).
struct Here<'a> {
    /// Ids of the local pcap files.
    pcap: &'a HashSet<u32>,
    /// The first this many packet files are local.
    packets: usize,
    /// Where the others are.
    remote: Option<&'a util::storage::Root>,
}

fn build_missing_records(
    ds: &Dataset,
    root: &Path,
    pcap: &[PcapFileEntry],
    packets: &mut Vec<store::PacketFileSummary>,
    here: &Here,
    out: &mut Recovered,
) -> Result<u64, StoreError> {
    use std::collections::{BTreeMap, BTreeSet};
    // What the finished packet files cover, per pcap file (also those
    // only in the bucket).
    let mut covered: BTreeMap<u32, (BTreeSet<u64>, u16)> = BTreeMap::new();
    for (k, f) in packets.iter().enumerate() {
        let pointers = match here.remote {
            Some(remote) if k >= here.packets => {
                let name = remote.name_of(&f.path);
                let data = remote.read(&f.path).map_err(|e| io(Path::new(&name), e))?;
                store::read::pcap_pointers_in(&name, data)?
            }
            _ => store::read::read_pcap_pointers(&root.join(&f.path))?,
        };
        for (file, offset, iface) in pointers {
            let e = covered
                .entry(file)
                .or_insert_with(|| (BTreeSet::new(), iface));
            e.0.insert(offset);
        }
    }
    // Each worker's next packet file number.
    let mut next_seq: BTreeMap<u16, u32> = BTreeMap::new();
    for f in packets.iter() {
        if let Some((w, seq)) = packet_file_number(&f.path) {
            let n = next_seq.entry(w).or_insert(0);
            *n = (*n).max(seq + 1);
        }
    }
    let mut workers: BTreeMap<u16, Worker> = BTreeMap::new();
    let mut built = 0u64;
    let none = (BTreeSet::new(), 0u16);
    for f in pcap {
        let (offsets, iface) = covered.get(&f.id).unwrap_or(&none);
        // A file only in the bucket lacks records when the packet file
        // that held them was still open at the kill (its local copy went
        // once it was uploaded): it is fetched beside the dataset for the
        // time it takes to build them.
        let fetched = match (here.pcap.contains(&f.id), here.remote) {
            (true, _) => None,
            (false, _) if offsets.len() as u64 >= f.frames => continue,
            (false, None) => continue,
            (false, Some(remote)) => {
                let name = remote.name_of(&f.path);
                let file_name = f.path.rsplit('/').next().unwrap_or(&f.path);
                let tmp = FetchedCopy(root.join(format!(".recover-{file_name}")));
                remote
                    .copy_to(&f.path, &tmp.0)
                    .map_err(|e| io(Path::new(&name), e))?;
                Some(tmp)
            }
        };
        let path = match &fetched {
            Some(FetchedCopy(tmp)) => tmp.clone(),
            None => root.join(&f.path),
        };
        let late_err = |e: LateError| match e {
            LateError::Store(e) => e,
            other => StoreError::Invalid {
                path: path.clone(),
                message: other.to_string(),
            },
        };
        let file = late::open_pcap(&path).map_err(late_err)?;
        let spans = late::uncovered_spans(&file, &path, offsets).map_err(late_err)?;
        if spans.is_empty() {
            continue;
        }
        let id = (f.id >> 20) as u16;
        let w = workers.entry(id).or_insert_with(|| {
            let mut w = Worker::new(id, ds.clone(), WorkerOptions::default());
            w.set_next_file(next_seq.get(&id).copied().unwrap_or(0));
            w
        });
        for (from, to, _) in spans {
            let (n, _) = late::build_span(w, &file, &path, f.id, *iface, (from, to), u64::MAX)
                .map_err(late_err)?;
            built += n;
        }
        // A file of their own per pcap file's missing frames.
        w.close()?;
    }
    for (_, w) in workers {
        packets.extend(w.finish()?.files);
    }
    out.records_built = built;
    packets.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(built)
}

/// A pcap file fetched from the bucket for recovery, removed when done.
struct FetchedCopy(std::path::PathBuf);

impl Drop for FetchedCopy {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// (worker, sequence) of a packet file's path (`packets/wWWW-SSSSS.parquet`).
fn packet_file_number(path: &str) -> Option<(u16, u32)> {
    let name = path.rsplit('/').next()?.strip_suffix(".parquet")?;
    let (w, seq) = name.strip_prefix('w')?.split_once('-')?;
    Some((w.parse().ok()?, seq.parse().ok()?))
}

/// Flows files are written after their packet file: a part one goes (its
/// packets are whole, and readers then answer from the packets).
fn remove_flow_parts(flows_dir: &Path, out: &mut Recovered) -> Result<(), StoreError> {
    for name in entries(flows_dir)? {
        if name.ends_with(".part") {
            let path = flows_dir.join(&name);
            std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
            out.parts_removed
                .push(format!("{}/{name}", store::flows::FLOWS_DIR));
        }
    }
    Ok(())
}

/// Writes the flows file of every finished packet file that has none (a
/// kill between the two, or a flows file a full disk cost), from the
/// packet file's records: the flows table is the index's first half, and
/// the packet file's page index its second.
fn rebuild_flow_files(
    root: &Path,
    packets: &[store::PacketFileSummary],
    out: &mut Recovered,
) -> Result<(), StoreError> {
    use store::flows::{flows_path_for, slices_from_packets, write_flow_file};
    let dir = util::storage::Directory::new(root);
    for f in packets {
        let rel = flows_path_for(&f.path);
        let path = root.join(&rel);
        if path.exists() {
            continue;
        }
        let (slices, _) = slices_from_packets(&dir, &f.path, None, None)?;
        write_flow_file(&path, &rel, &slices)?;
        out.flows_rebuilt.push(rel);
    }
    Ok(())
}

/// The stats files, and the drops their rows add up to.
struct StatsFiles {
    files: Vec<String>,
    drops: Drops,
}

impl StatsFiles {
    fn add(&mut self, r: &store::stats::StatsRow) {
        self.drops.kernel_seen += r.kernel_packets;
        self.drops.kernel += r.kernel_drops;
        self.drops.pcap += r.pcap_drops;
    }
}

/// Stats: the journal's rows become the last file.
fn stats_files(stats_dir: &Path, out: &mut Recovered) -> Result<StatsFiles, StoreError> {
    if stats_dir.is_dir() {
        out.stats_recovered = recover_journal(stats_dir)?;
    }
    let mut out_stats = StatsFiles {
        files: Vec::new(),
        drops: Drops::default(),
    };
    for name in entries(stats_dir)? {
        let path = stats_dir.join(&name);
        if name.ends_with(".part") {
            std::fs::remove_file(&path).map_err(|e| io(&path, e))?;
            out.parts_removed.push(format!("{STATS_DIR}/{name}"));
        } else if name.ends_with(".parquet") {
            for r in read_stats_file(&path)? {
                out_stats.add(&r);
            }
            out_stats.files.push(format!("{STATS_DIR}/{name}"));
        }
    }
    Ok(out_stats)
}

/// Lists the file a ring writer overwrote among the removed pcap files
/// (the manifest written at start does not know of it).
fn note_overwritten(m: &mut Manifest, mk: &OverwriteMarker, by: Option<String>) {
    let f = &mk.file;
    if m.files.pcap_removed.iter().any(|r| r.id == f.id) {
        return;
    }
    m.files.pcap_removed.push(RemovedPcapEntry {
        id: f.id,
        path: format!("{PCAP_DIR}/{}", f.name),
        frames: f.frames,
        stored_bytes: f.stored_bytes,
        ts_first: f.ts_first,
        ts_last: f.ts_last,
        reason: "max-disk".to_string(),
        overwritten_by: by,
    });
    m.files.pcap_removed.sort_by_key(|r| r.id);
}

#[cfg(test)]
mod tests {
    use super::{packet_file_number, pcap_id};

    #[test]
    fn packet_file_numbers_follow_the_writers_names() {
        assert_eq!(
            packet_file_number("packets/w003-00012.parquet"),
            Some((3, 12))
        );
        assert_eq!(packet_file_number("packets/part-0.parquet"), None);
    }

    #[test]
    fn pcap_ids_follow_the_writers_names() {
        assert_eq!(pcap_id("w000-00000.pcap"), Some(0));
        assert_eq!(pcap_id("w002-00013.pcap.zst"), Some((2 << 20) | 13));
        assert_eq!(pcap_id("other.pcap"), None);
    }
}
