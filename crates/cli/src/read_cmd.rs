//! `weir read`: frames found through the packet records, filtered exactly
//! by libpcap, written as a nanosecond pcap.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use analyze::{ScanReport, Session, TimeWindow};
use clap::Args;
use datafusion_arrays::{Candidate, candidates_of};
use pcapio::fetch::PcapFile;
use pcapio::{PcapWriter, ReaderOptions, TraceReader};
use wire::LinkType;

use crate::analyze_cmd::{parse_window, split_datasets};

#[derive(Args)]
pub struct ReadArgs {
    /// One or more datasets, then an optional filter in tcpdump syntax.
    #[arg(required = true, value_name = "DATASET... [FILTER]")]
    words: Vec<String>,
    /// The pcap file to write (- for standard output).
    #[arg(short = 'w', long = "write", value_name = "OUT.pcap")]
    out: PathBuf,
    /// Only frames at or after T: a UTC time or +D after the first frame.
    #[arg(long, value_name = "T")]
    from: Option<String>,
    /// Only frames before T (same forms as --from).
    #[arg(long, value_name = "T")]
    to: Option<String>,
    /// Replace OUT.pcap if it exists.
    #[arg(long)]
    force: bool,
    /// No summary on standard error.
    #[arg(short, long)]
    quiet: bool,
}

/// Frames read in sequence, by (file, record offset): time, wire length,
/// link type, bytes.
type Loaded = HashMap<(u32, u64), (i64, u32, LinkType, Vec<u8>)>;

/// Where a dataset's records point: pcap file id -> path.
fn frame_files(root: &Path, m: &store::Manifest) -> HashMap<u32, PathBuf> {
    if m.kind == "convert" {
        // Converted datasets point into their sources (--index-sources).
        m.sources
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let p = PathBuf::from(&s.path);
                let p = if p.is_absolute() || p.exists() {
                    p
                } else {
                    root.join("..").join(&p)
                };
                (i as u32, p)
            })
            .collect()
    } else {
        m.files
            .pcap
            .iter()
            .map(|f| (f.id, root.join(&f.path)))
            .collect()
    }
}

pub fn run(a: ReadArgs) -> Result<ExitCode, String> {
    let (datasets, rest) = split_datasets(&a.words);
    if datasets.is_empty() {
        return Err(format!(
            "{}: no such dataset directory; usage: weir read DATASET... [FILTER] -w OUT.pcap",
            a.words[0]
        ));
    }
    let filter_expr = rest.join(" ");
    let to_stdout = a.out.as_os_str() == "-";
    if !to_stdout && a.out.exists() && !a.force {
        return Err(format!(
            "{} exists; pass --force to replace it, or choose another name",
            a.out.display()
        ));
    }
    let window: TimeWindow = parse_window(&datasets, a.from.as_deref(), a.to.as_deref())?;

    // 1. Candidates: every record in the window that points at a frame.
    let mut cands: Vec<Candidate> = Vec::new();
    let mut scan = ScanReport::default();
    let mut files: Vec<PathBuf> = Vec::new();
    let mut unreachable = 0u64;
    let mut retention_note = String::new();
    for (d, root) in datasets.iter().enumerate() {
        let session = Session::open(std::slice::from_ref(root), window, None, 0)
            .map_err(|e| e.to_string())?;
        let m = &session.manifests()[0].1;
        let paths = frame_files(root, m);
        let (batches, report) = session
            .query_with_scan("SELECT ts_ns, pcap_file, pcap_offset FROM packets")
            .map_err(|e| e.to_string())?;
        scan.bytes_scanned += report.bytes_scanned;
        scan.row_groups_pruned += report.row_groups_pruned;
        scan.row_groups_read += report.row_groups_read;
        let base = files.len() as u32;
        let mut ids: Vec<u32> = paths.keys().copied().collect();
        ids.sort_unstable();
        let index: HashMap<u32, u32> = ids
            .iter()
            .enumerate()
            .map(|(k, id)| (*id, base + k as u32))
            .collect();
        files.extend(ids.iter().map(|id| paths[id].clone()));
        let (found, missing) = candidates_of(&batches, |id| index.get(&id).copied())
            .map_err(|e| format!("{}: {e}", root.display()))?;
        if missing > 0 && !m.files.pcap_removed.is_empty() {
            retention_note = format!(
                "; frames of {} are gone with the pcap files retention removed (--max-disk, \
                 --max-age: listed under files.pcap_removed in {}/manifest.json)",
                root.display(),
                root.display()
            );
        }
        if missing > 0 && found.is_empty() && m.files.pcap_removed.is_empty() {
            return Err(format!(
                "{}: its records do not point at frames ({missing} in the window); frames are \
                 kept by weir capture --pcap, or by weir convert --index-sources (which points \
                 into the converted files)",
                root.display()
            ));
        }
        unreachable += missing;
        let _ = d;
        cands.extend(found);
    }
    let cands = merge_in_time(cands);

    // 2. Frames: read by offset from plain pcap files; other files (pcapng,
    // compressed) in one pass each, keeping the wanted records.
    let mut random: HashMap<u32, PcapFile> = HashMap::new();
    let mut loaded: Loaded = HashMap::new();
    let mut wanted: HashMap<u32, Vec<u64>> = HashMap::new();
    for c in &cands {
        wanted.entry(c.file).or_default().push(c.offset);
    }
    for (&file, offsets) in &mut wanted {
        let path = &files[file as usize];
        match PcapFile::open(path).map_err(|e| e.to_string())? {
            Some(f) => {
                random.insert(file, f);
            }
            None => {
                offsets.sort_unstable();
                load_in_sequence(path, file, offsets, &mut loaded)?;
            }
        }
    }

    // 3. The filter, compiled per link type, applied to each frame.
    let mut filters: HashMap<LinkType, capture::filter::Filter> = HashMap::new();
    let mut out_link: Option<LinkType> = None;
    let mut writer: Option<PcapWriter<Box<dyn Write>>> = None;
    let tmp = a.out.with_extension("pcap.part");
    let mut data = Vec::new();
    let mut written = 0u64;
    for c in &cands {
        let (ts_ns, wire_len, link) = if let Some(f) = random.get(&c.file) {
            let fr = f.read_at(c.offset, &mut data).map_err(|e| e.to_string())?;
            (fr.ts_ns, fr.wire_len, f.link)
        } else if let Some((ts, wl, link, bytes)) = loaded.remove(&(c.file, c.offset)) {
            data = bytes;
            (ts, wl, link)
        } else {
            return Err(format!(
                "{}: no frame at byte {} where the records say one is; the file changed \
                 after the dataset was made",
                files[c.file as usize].display(),
                c.offset
            ));
        };
        if !filter_expr.is_empty() {
            let f = match filters.get(&link) {
                Some(f) => f,
                None => {
                    let f = capture::filter::compile(&filter_expr, link, 262_144)
                        .map_err(|e| e.to_string())?;
                    filters.entry(link).or_insert(f)
                }
            };
            if !f.matches(wire_len, &data) {
                continue;
            }
        }
        match out_link {
            None => {
                out_link = Some(link);
                let sink: Box<dyn Write> = if to_stdout {
                    Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
                } else {
                    let f = std::fs::File::create(&tmp)
                        .map_err(|e| format!("{}: {e}", tmp.display()))?;
                    Box::new(std::io::BufWriter::with_capacity(1 << 20, f))
                };
                writer = Some(
                    PcapWriter::new(sink, link, 262_144)
                        .map_err(|e| format!("{}: {e}", a.out.display()))?,
                );
            }
            Some(l) if l != link => {
                return Err(format!(
                    "the frames have different link types ({} and {}); one pcap file holds \
                     one: narrow the selection with a filter or --from/--to",
                    l.name(),
                    link.name()
                ));
            }
            Some(_) => {}
        }
        if let Some(w) = writer.as_mut() {
            w.write_frame(ts_ns, wire_len, &data)
                .map_err(|e| format!("{}: {e}", a.out.display()))?;
            written += 1;
        }
    }
    // No frame: still a valid, empty pcap (Ethernet).
    let w = match writer {
        Some(w) => w,
        None => {
            let sink: Box<dyn Write> = if to_stdout {
                Box::new(std::io::stdout().lock())
            } else {
                Box::new(
                    std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?,
                )
            };
            PcapWriter::new(sink, LinkType::ETHERNET, 262_144)
                .map_err(|e| format!("{}: {e}", a.out.display()))?
        }
    };
    let mut sink = w
        .into_inner()
        .map_err(|e| format!("{}: {e}", a.out.display()))?;
    sink.flush()
        .map_err(|e| format!("{}: {e}", a.out.display()))?;
    drop(sink);
    if !to_stdout {
        std::fs::rename(&tmp, &a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    }
    if !a.quiet {
        eprintln!(
            "weir read: {} frames to {} ({} candidates in the window{}); read {} of packet \
             records, {} row groups read, {} skipped by their time statistics",
            util::fmt::group_digits(written),
            if to_stdout {
                "standard output".to_string()
            } else {
                a.out.display().to_string()
            },
            util::fmt::group_digits(cands.len() as u64),
            if unreachable > 0 {
                format!(", {unreachable} records without a frame{retention_note}")
            } else {
                String::new()
            },
            util::fmt::human_bytes(scan.bytes_scanned),
            scan.row_groups_read,
            scan.row_groups_pruned,
        );
    }
    Ok(ExitCode::SUCCESS)
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

/// Reads `path` from the start and keeps the frames whose records start at
/// `offsets` (sorted); stops after the last one.
fn load_in_sequence(
    path: &Path,
    file: u32,
    offsets: &[u64],
    loaded: &mut Loaded,
) -> Result<(), String> {
    let Some(&last) = offsets.last() else {
        return Ok(());
    };
    let mut reader =
        TraceReader::open(path, ReaderOptions::default()).map_err(|e| e.to_string())?;
    while let Some(chunk) = reader.next_chunk().map_err(|e| e.to_string())? {
        for (f, bytes) in chunk.iter() {
            if offsets.binary_search(&f.record_offset).is_ok() {
                loaded.insert(
                    (file, f.record_offset),
                    (f.ts_ns, f.wire_len, f.link, bytes.to_vec()),
                );
            }
        }
        if chunk.frames.last().is_some_and(|f| f.record_offset >= last) {
            break;
        }
    }
    Ok(())
}

mod datafusion_arrays {
    //! The candidate list out of the query's Arrow batches.

    use analyze::arrow::array::{Array, AsArray, RecordBatch};
    use analyze::arrow::datatypes::{Int64Type, UInt32Type, UInt64Type};

    #[derive(Clone, Copy, Debug)]
    pub struct Candidate {
        pub ts_ns: i64,
        /// Index into the list of frame files of all datasets.
        pub file: u32,
        pub offset: u64,
    }

    /// Candidates from (ts_ns, pcap_file, pcap_offset) batches; `file_index`
    /// maps a dataset's file id to the global index. Returns the records
    /// that point nowhere as a count.
    pub fn candidates_of(
        batches: &[RecordBatch],
        file_index: impl Fn(u32) -> Option<u32>,
    ) -> Result<(Vec<Candidate>, u64), String> {
        let mut out = Vec::new();
        let mut missing = 0;
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
                if file.is_null(r) || off.is_null(r) {
                    missing += 1;
                    continue;
                }
                match file_index(file.value(r)) {
                    Some(f) => out.push(Candidate {
                        ts_ns: ts.value(r),
                        file: f,
                        offset: off.value(r),
                    }),
                    None => missing += 1,
                }
            }
        }
        Ok((out, missing))
    }
}
