//! Frames found again through the packet records (`weir read`): the
//! records in a time window name each frame's file and offset; the frames
//! are read from there, filtered exactly by libpcap, merged by time as
//! mergecap does, and written as one nanosecond pcap.
//!
//! A filter is libpcap's on the frame as captured, or, after the word
//! `inner`, libpcap's for a bare IP packet (LINKTYPE_RAW) run on the frame
//! from its innermost IP header (where `wire::decode_layout` finds the
//! packet the records' IP columns describe) to its end. An inner filter is
//! also put on the records, as far as it translates to their columns
//! (`crate::filter`), so that only frames it may match are read.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Int64Type, UInt32Type, UInt64Type};
use pcapio::fetch::PcapFile;
use pcapio::{PcapWriter, ReaderOptions, TraceReader};
use wire::LinkType;

use util::storage::Root;

use crate::error::AnalyzeError;
use crate::filter::{Scope, split_scope};
use crate::session::{ScanReport, Session};
use crate::window::TimeWindow;

/// The snap length of the pcap written, and of the filters compiled.
const SNAPLEN: u32 = 262_144;

/// Where the frames go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadOutput {
    /// A file, written under a `.part` name and renamed when complete.
    File(PathBuf),
    Stdout,
}

impl ReadOutput {
    fn name(&self) -> String {
        match self {
            ReadOutput::File(p) => p.display().to_string(),
            ReadOutput::Stdout => "standard output".into(),
        }
    }
}

/// What to read.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Directories or prefixes of an object store (one holding several
    /// datasets stands for all of them).
    pub datasets: Vec<Root>,
    /// A tcpdump filter expression (empty: every frame), perhaps after
    /// the word `inner` (or `outer`, the default).
    pub filter: String,
    pub window: TimeWindow,
    pub output: ReadOutput,
}

/// What a read did.
#[derive(Clone, Debug, Default)]
pub struct ReadReport {
    /// Frames written.
    pub written: u64,
    /// Records in the window that point at a frame (and that an inner
    /// filter's condition on the records kept).
    pub candidates: u64,
    /// Whether an inner filter narrowed the records (in every dataset).
    pub pushed_down: bool,
    /// Records in the window that point at no frame (or at one gone).
    pub unreachable: u64,
    /// Why some frames are gone, when retention removed their files.
    pub retention_note: Option<String>,
    /// Why some frames are gone, when a full disk cut their files short.
    pub lost_note: Option<String>,
    /// The scan of the packet records by the query engine.
    pub scan: ScanReport,
    /// Datasets whose records the query engine read (an inner filter the
    /// flows cannot tell apart, files weir's decoder does not read).
    pub engine_datasets: u64,
    /// What weir's own reading of the records did: through the index, or
    /// files read whole.
    pub index: crate::index::IndexReport,
}

/// A frame the records point at.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    ts_ns: i64,
    /// Index into the list of frame files of all datasets.
    file: u32,
    offset: u64,
}

/// The records of one dataset that point at frames, as they are taken:
/// those found, and those that point past the end of a file cut short (a
/// full disk) or at none.
#[derive(Default)]
struct Taken {
    found: Vec<Candidate>,
    cut: u64,
    missing: u64,
}

/// A frame read in a pass over a file that cannot be read by offset.
struct LoadedFrame {
    ts_ns: i64,
    wire_len: u32,
    link: LinkType,
    bytes: Vec<u8>,
}

/// Frames read in sequence, by (file, record offset).
type Loaded = HashMap<(u32, u64), LoadedFrame>;

/// A file of frames: a path (a capture's pcap file, or a converted trace
/// the records point into), or a file of a dataset in an object store.
#[derive(Clone, Debug)]
enum FrameFile {
    Path(PathBuf),
    In(Root, String),
}

impl FrameFile {
    fn name(&self) -> PathBuf {
        match self {
            FrameFile::Path(p) => p.clone(),
            FrameFile::In(root, rel) => PathBuf::from(root.name_of(rel)),
        }
    }

    /// Opened for reads by offset, if it can be.
    fn open(&self) -> Result<Option<PcapFile>, AnalyzeError> {
        let opened = match self {
            FrameFile::Path(p) => PcapFile::open(p),
            FrameFile::In(root, rel) => {
                let f = root.open(rel).map_err(|e| io(&self.name(), e))?;
                PcapFile::open_at(&self.name(), f)
            }
        };
        opened.map_err(|e| usage(e.to_string()))
    }
}

fn usage(m: impl Into<String>) -> AnalyzeError {
    AnalyzeError::Usage(m.into())
}

fn io(path: &Path, e: impl std::fmt::Display) -> AnalyzeError {
    AnalyzeError::Usage(format!("{}: {e}", path.display()))
}

/// Finds the frames and writes them to `opts.output`.
pub fn read_frames(opts: &ReadOptions) -> Result<ReadReport, AnalyzeError> {
    read_to(opts, PcapOut::new(&opts.output, None))
}

/// Finds the frames and writes them, as [`read_frames`] writes its file,
/// to `sink` as they are read (`opts.output` only names it in errors); a
/// sink that fails (a client gone away) stops the read.
pub fn read_frames_into(
    opts: &ReadOptions,
    sink: Box<dyn Write + '_>,
) -> Result<ReadReport, AnalyzeError> {
    read_to(opts, PcapOut::new(&opts.output, Some(sink)))
}

/// Checks that `filter` compiles with libpcap for frames of `link` (an
/// inner filter: for a bare IP packet), as [`read_frames`] compiles it: the
/// error is libpcap's.
pub fn check_filter(filter: &str, link: LinkType) -> Result<(), AnalyzeError> {
    let (scope, expr) = split_scope(filter)?;
    if expr.trim().is_empty() {
        return Ok(());
    }
    let link = if scope == Scope::Inner {
        LinkType::RAW
    } else {
        link
    };
    pcapfilter::compile(expr, link, SNAPLEN)
        .map(|_| ())
        .map_err(|e| AnalyzeError::Filter(e.to_string()))
}

fn read_to(opts: &ReadOptions, mut out: PcapOut<'_>) -> Result<ReadReport, AnalyzeError> {
    let mut report = ReadReport::default();
    let (scope, expr) = split_scope(&opts.filter)?;
    // An inner filter is compiled once, for a bare IP packet; an outer one
    // per link type met. Compiled first, so that a bad one fails at once.
    let inner = match scope {
        Scope::Inner => Some(
            pcapfilter::compile(expr, LinkType::RAW, SNAPLEN).map_err(|e| {
                AnalyzeError::Filter(format!(
                    "inner: {e}; an inner filter is read on the innermost IP packet, from \
                     its IP header on (no link layer)"
                ))
            })?,
        ),
        Scope::Outer => None,
    };
    let (cands, files) = find_candidates(opts, &mut report)?;
    report.candidates = cands.len() as u64;
    let mut frames = FrameSource::open(&cands, &files)?;
    let mut filters: HashMap<LinkType, pcapfilter::Filter> = HashMap::new();
    let mut data = Vec::new();
    for c in &cands {
        let (ts_ns, wire_len, link) = frames.read(c, &mut data)?;
        if let Some(f) = &inner {
            if !matches_inner(f, link, ts_ns, wire_len, &data) {
                continue;
            }
        } else if !expr.is_empty() {
            let f = match filters.get(&link) {
                Some(f) => f,
                None => {
                    let f = pcapfilter::compile(expr, link, SNAPLEN)
                        .map_err(|e| AnalyzeError::Filter(e.to_string()))?;
                    filters.entry(link).or_insert(f)
                }
            };
            if !f.matches(wire_len, &data) {
                continue;
            }
        }
        out.write(link, ts_ns, wire_len, &data)?;
        report.written += 1;
    }
    out.finish()?;
    Ok(report)
}

/// Whether the inner filter `f` (compiled for LINKTYPE_RAW) accepts the
/// frame's innermost IP packet: the bytes from its header to the frame's
/// end, `wire_len` less the bytes before it on the wire. A frame without
/// an IP header is not matched.
fn matches_inner(
    f: &pcapfilter::Filter,
    link: LinkType,
    ts_ns: i64,
    wire_len: u32,
    data: &[u8],
) -> bool {
    let mut rec = wire::PacketRecord::new(ts_ns, wire_len, data.len() as u32);
    match wire::decode_layout(link, data, &mut rec).ip {
        Some(at) => f.matches(wire_len.saturating_sub(at as u32), &data[at..]),
        None => false,
    }
}

/// Every record of the window that points at a frame, merged by time, and
/// the frame files they index.
fn find_candidates(
    opts: &ReadOptions,
    report: &mut ReadReport,
) -> Result<(Vec<Candidate>, Vec<FrameFile>), AnalyzeError> {
    let mut cands: Vec<Candidate> = Vec::new();
    let mut files: Vec<FrameFile> = Vec::new();
    report.pushed_down = !opts.datasets.is_empty();
    // The filter as far as weir reads it (libpcap still decides each
    // frame): what it asks of a flow, for the index.
    let parsed = crate::filter::parse(&opts.filter, false).ok();
    let mut located = Vec::new();
    for given in &opts.datasets {
        located.extend(store::location::datasets_under(given)?);
    }
    for d in located {
        let root = &d.root;
        let m = &d.manifest;
        let paths = frame_files(root, m);
        let base = files.len() as u32;
        let mut ids: Vec<u32> = paths.keys().copied().collect();
        ids.sort_unstable();
        let index: HashMap<u32, u32> = ids
            .iter()
            .enumerate()
            .map(|(k, id)| (*id, base + k as u32))
            .collect();
        files.extend(ids.iter().map(|id| paths[id].0.clone()));
        // A pcap write that failed (a full disk) cut its file back to its
        // last whole block: records of the frames after it point past the
        // end the manifest lists.
        let take = |t: &mut Taken, ts_ns: i64, pointer: Option<(u32, u64)>| {
            let Some((id, offset)) = pointer else {
                t.missing += 1;
                return;
            };
            let at = match paths.get(&id) {
                Some((_, Some(end))) if offset >= *end => {
                    t.cut += 1;
                    None
                }
                Some(_) => index.get(&id).copied(),
                None => None,
            };
            match at {
                Some(file) => t.found.push(Candidate {
                    ts_ns,
                    file,
                    offset,
                }),
                None => t.missing += 1,
            }
        };
        let mut taken = Taken::default();
        // An inner filter the flows cannot tell apart (a length, TCP flags)
        // still narrows the records through the query engine.
        let by_engine = parsed
            .as_ref()
            .is_some_and(|p| p.scope == Scope::Inner && !p.flow.decides());
        // The index is read from a local dataset; one in an object store
        // goes through the query engine, which fetches only what it needs.
        let read_by_index = match (by_engine, root.local_dir()) {
            (false, Some(dir)) => crate::index::frame_refs(
                dir,
                parsed.as_ref().filter(|p| p.sql != "TRUE"),
                &opts.window,
                &mut report.index,
                |r, pointed| take(&mut taken, r.ts_ns, pointed.then_some((r.file, r.offset))),
            )?,
            _ => None,
        };
        if read_by_index.is_none() {
            // What the index gave before it met a file it cannot read.
            taken = Taken::default();
            let session = Session::open(std::slice::from_ref(root), opts.window, None, 0)?;
            let cond = inner_condition(&session, &opts.filter)?;
            report.pushed_down &= cond.is_some();
            let (batches, scan) = session.query_with_scan(&format!(
                "SELECT ts_ns, pcap_file, pcap_offset FROM packets WHERE {}",
                cond.as_deref().unwrap_or("TRUE")
            ))?;
            report.scan.bytes_scanned += scan.bytes_scanned;
            report.scan.row_groups_pruned += scan.row_groups_pruned;
            report.scan.row_groups_read += scan.row_groups_read;
            report.engine_datasets += 1;
            each_pointer(&batches, &mut |ts, p| take(&mut taken, ts, p))
                .map_err(|e| usage(format!("{}: {e}", root.name())))?;
        } else {
            report.pushed_down = false;
        }
        let Taken {
            found,
            cut,
            missing,
        } = taken;
        if cut > 0 {
            report.lost_note = Some(format!(
                "{cut} of them point at frames lost when the disk of {} was full (counted in \
                 drops.pcap_write of its manifest)",
                root.name()
            ));
        }
        if missing > 0 && !m.files.pcap_removed.is_empty() {
            report.retention_note = Some(format!(
                "frames of {} are gone with the pcap files retention removed (--max-disk, \
                 --max-age: listed under files.pcap_removed in {})",
                root.name(),
                root.name_of(store::dataset::MANIFEST)
            ));
        }
        if missing > 0 && found.is_empty() && m.files.pcap_removed.is_empty() {
            return Err(usage(format!(
                "{}: its records do not point at frames ({missing} in the window); frames are \
                 kept by weir capture --pcap, or by weir convert --index-sources (which points \
                 into the converted files)",
                root.name()
            )));
        }
        report.unreachable += missing;
        cands.extend(found);
    }
    Ok((merge_in_time(cands), files))
}

/// An inner filter as a condition on the records that holds for every
/// frame libpcap could match (the records' IP and transport columns
/// describe the innermost packet, and the condition is no stricter than
/// libpcap on it), or `None`: no inner filter, one the records cannot
/// express (libpcap alone decides), or records written before tunnels were
/// followed (no `tunnel_depth` column: their columns describe the outer
/// packet).
fn inner_condition(session: &Session, filter: &str) -> Result<Option<String>, AnalyzeError> {
    let Ok((Scope::Inner, expr)) = split_scope(filter) else {
        return Ok(None);
    };
    // libpcap's `ip6 proto N` also matches an extension header N (`ip6
    // proto 44`: fragments) where the records keep the protocol after the
    // chain: left to libpcap alone.
    if expr
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w == "proto")
    {
        return Ok(None);
    }
    let schema = session.plan_schema("SELECT * FROM packet_files")?;
    if schema.field_with_name("tunnel_depth").is_err() {
        return Ok(None);
    }
    Ok(crate::filter::to_sql(filter, false).ok())
}

/// Where a dataset's records point: pcap file id -> file, and the end of
/// the frames the manifest lists in it (pcap bytes, decompressed).
fn frame_files(root: &Root, m: &store::Manifest) -> HashMap<u32, (FrameFile, Option<u64>)> {
    if m.kind == "convert" {
        // Converted datasets point into their sources (--index-sources):
        // paths as the conversion was given them.
        m.sources
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let p = PathBuf::from(&s.path);
                let p = match root.local_dir() {
                    Some(dir) if !(p.is_absolute() || p.exists()) => dir.join("..").join(&p),
                    _ => p,
                };
                (i as u32, (FrameFile::Path(p), None))
            })
            .collect()
    } else {
        m.files
            .pcap
            .iter()
            .map(|f| {
                let file = match root.local_dir() {
                    Some(dir) => FrameFile::Path(dir.join(&f.path)),
                    None => FrameFile::In(root.clone(), f.path.clone()),
                };
                (f.id, (file, Some(f.bytes)))
            })
            .collect()
    }
}

/// Hands each record of the (ts_ns, pcap_file, pcap_offset) batches to
/// `take`, with the frame it points at (None: at none).
fn each_pointer(
    batches: &[RecordBatch],
    mut take: impl FnMut(i64, Option<(u32, u64)>),
) -> Result<(), String> {
    for b in batches {
        let ts = b
            .column(0)
            .as_primitive_opt::<Int64Type>()
            .ok_or("ts_ns type")?;
        let file = b
            .column(1)
            .as_primitive_opt::<UInt32Type>()
            .ok_or("pcap_file type")?;
        let off = b
            .column(2)
            .as_primitive_opt::<UInt64Type>()
            .ok_or("pcap_offset type")?;
        for r in 0..b.num_rows() {
            let pointer =
                (!file.is_null(r) && !off.is_null(r)).then(|| (file.value(r), off.value(r)));
            take(ts.value(r), pointer);
        }
    }
    Ok(())
}

/// The frames of each file in file order, the files merged by time (as
/// mergecap does): one file comes out exactly as tcpdump -r reads it, even
/// where its timestamps step backwards.
fn merge_in_time(mut cands: Vec<Candidate>) -> Vec<Candidate> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    cands.sort_unstable_by_key(|c| (c.file, c.offset));
    let mut runs: Vec<&[Candidate]> = cands.chunk_by(|a, b| a.file == b.file).collect();
    let mut heap: BinaryHeap<Reverse<(i64, u32, usize)>> = runs
        .iter()
        .enumerate()
        .map(|(k, r)| Reverse((r[0].ts_ns, r[0].file, k)))
        .collect();
    let mut out = Vec::with_capacity(cands.len());
    while let Some(Reverse((_, _, k))) = heap.pop() {
        let (first, rest) = runs[k].split_first().expect("runs are never empty");
        out.push(*first);
        runs[k] = rest;
        if let Some(next) = rest.first() {
            heap.push(Reverse((next.ts_ns, next.file, k)));
        }
    }
    out
}

/// The frames' files: plain pcap files read by offset; the others
/// (pcapng, compressed) read once, in sequence, keeping the wanted frames.
struct FrameSource<'a> {
    files: &'a [FrameFile],
    by_offset: HashMap<u32, PcapFile>,
    loaded: Loaded,
}

impl<'a> FrameSource<'a> {
    fn open(cands: &[Candidate], files: &'a [FrameFile]) -> Result<Self, AnalyzeError> {
        let mut by_offset = HashMap::new();
        let mut loaded = Loaded::new();
        let mut wanted: HashMap<u32, Vec<u64>> = HashMap::new();
        for c in cands {
            wanted.entry(c.file).or_default().push(c.offset);
        }
        for (&file, offsets) in &mut wanted {
            let frames = &files[file as usize];
            match (frames.open()?, frames) {
                (Some(f), _) => {
                    offsets.sort_unstable();
                    f.plan(std::mem::take(offsets));
                    by_offset.insert(file, f);
                }
                (None, FrameFile::Path(path)) => {
                    offsets.sort_unstable();
                    load_in_sequence(path, file, offsets, &mut loaded)?;
                }
                (None, FrameFile::In(..)) => {
                    return Err(usage(format!(
                        "{}: not a pcap file that can be read by offset (weir writes pcap, plain \
                         or compressed with a seek table)",
                        frames.name().display()
                    )));
                }
            }
        }
        Ok(FrameSource {
            files,
            by_offset,
            loaded,
        })
    }

    /// The frame `c` into `data`: its time, wire length and link type.
    fn read(
        &mut self,
        c: &Candidate,
        data: &mut Vec<u8>,
    ) -> Result<(i64, u32, LinkType), AnalyzeError> {
        if let Some(f) = self.by_offset.get(&c.file) {
            let fr = f
                .read_at(c.offset, data)
                .map_err(|e| usage(e.to_string()))?;
            Ok((fr.ts_ns, fr.wire_len, f.link))
        } else if let Some(fr) = self.loaded.remove(&(c.file, c.offset)) {
            *data = fr.bytes;
            Ok((fr.ts_ns, fr.wire_len, fr.link))
        } else {
            Err(usage(format!(
                "{}: no frame at byte {} where the records say one is; the file changed \
                 after the dataset was made",
                self.files[c.file as usize].name().display(),
                c.offset
            )))
        }
    }
}

/// Reads `path` from the start and keeps the frames whose records start at
/// `offsets` (sorted); stops after the last one.
fn load_in_sequence(
    path: &Path,
    file: u32,
    offsets: &[u64],
    loaded: &mut Loaded,
) -> Result<(), AnalyzeError> {
    let Some(&last) = offsets.last() else {
        return Ok(());
    };
    let mut reader =
        TraceReader::open(path, ReaderOptions::default()).map_err(|e| usage(e.to_string()))?;
    while let Some(chunk) = reader.next_chunk().map_err(|e| usage(e.to_string()))? {
        for (f, bytes) in chunk.iter() {
            if offsets.binary_search(&f.record_offset).is_ok() {
                loaded.insert(
                    (file, f.record_offset),
                    LoadedFrame {
                        ts_ns: f.ts_ns,
                        wire_len: f.wire_len,
                        link: f.link,
                        bytes: bytes.to_vec(),
                    },
                );
            }
        }
        if chunk.frames.last().is_some_and(|f| f.record_offset >= last) {
            break;
        }
    }
    Ok(())
}

/// The pcap being written: opened at the first frame (its link type is the
/// file's), a `.part` name until complete; or into a sink given.
struct PcapOut<'a> {
    output: &'a ReadOutput,
    sink: Option<Box<dyn Write + 'a>>,
    /// Whether a `.part` file was made (to rename when complete).
    rename: bool,
    link: Option<LinkType>,
    writer: Option<PcapWriter<Box<dyn Write + 'a>>>,
}

impl<'a> PcapOut<'a> {
    fn new(output: &'a ReadOutput, sink: Option<Box<dyn Write + 'a>>) -> Self {
        PcapOut {
            output,
            sink,
            rename: false,
            link: None,
            writer: None,
        }
    }

    fn part(path: &Path) -> PathBuf {
        path.with_extension("pcap.part")
    }

    fn err(&self, e: impl std::fmt::Display) -> AnalyzeError {
        usage(format!("{}: {e}", self.output.name()))
    }

    fn open(&mut self, link: LinkType) -> Result<(), AnalyzeError> {
        let sink: Box<dyn Write + 'a> = match (self.sink.take(), self.output) {
            (Some(given), _) => given,
            (None, ReadOutput::Stdout) => {
                Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
            }
            (None, ReadOutput::File(p)) => {
                self.rename = true;
                let tmp = Self::part(p);
                let f = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
                Box::new(std::io::BufWriter::with_capacity(1 << 20, f))
            }
        };
        self.writer = Some(PcapWriter::new(sink, link, SNAPLEN).map_err(|e| self.err(e))?);
        self.link = Some(link);
        Ok(())
    }

    fn write(
        &mut self,
        link: LinkType,
        ts_ns: i64,
        wire_len: u32,
        data: &[u8],
    ) -> Result<(), AnalyzeError> {
        match self.link {
            None => self.open(link)?,
            Some(l) if l != link => {
                return Err(usage(format!(
                    "the frames have different link types ({} and {}); one pcap file holds \
                     one: narrow the selection with a filter or --from/--to",
                    l.name(),
                    link.name()
                )));
            }
            Some(_) => {}
        }
        let output = self.output;
        let Some(w) = self.writer.as_mut() else {
            unreachable!("opened above")
        };
        w.write_frame(ts_ns, wire_len, data)
            .map(|_| ())
            .map_err(|e| usage(format!("{}: {e}", output.name())))
    }

    /// Flushes and renames into place; no frame still makes a valid, empty
    /// pcap (Ethernet).
    fn finish(mut self) -> Result<(), AnalyzeError> {
        if self.writer.is_none() {
            self.open(LinkType::ETHERNET)?;
        }
        let Some(w) = self.writer.take() else {
            unreachable!("opened above")
        };
        let mut sink = w.into_inner().map_err(|e| self.err(e))?;
        sink.flush().map_err(|e| self.err(e))?;
        drop(sink);
        if let (true, ReadOutput::File(p)) = (self.rename, self.output) {
            std::fs::rename(Self::part(p), p).map_err(|e| io(p, e))?;
        }
        Ok(())
    }
}
