//! The records a filter can match, found through the index written at
//! ingest: the flows table says which flows of each packet file the filter
//! may match (a flow's packets share their addresses, ports, protocol and
//! IP version: `filter::FlowTest`), and the packet file's page index
//! (`store::index`) which pages of each row group hold those flows. The
//! pages are read by weir's own column decoder (`store::decode`): no query
//! engine is started.
//!
//! A packet file without its flows file (a capture killed before writing
//! it), without a page index (written in arrival order, or before weir
//! wrote one), or whose flows the filter cannot tell apart (lengths, TCP
//! flags, payload bytes) is read whole, as before.

use std::path::{Path, PathBuf};

use store::flows::{FlowLookup, FlowRow, FlowSlice, flows_path_for};
use store::index::{PacketIndex, holds};

use crate::columns::par_map;
use crate::error::AnalyzeError;
use crate::filter::{FlowIp, FlowPacket, Parsed, Reading, Scope, Truth};
use crate::window::TimeWindow;

/// The columns a read of candidate frames needs, `flow_hash` first: those
/// whose pages end together.
const COLUMNS: [&str; 4] = store::index::INDEX_COLUMNS;

/// Whose reading of the filter picks the flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judge {
    /// The records' condition (the analyses, `weir sql`): exact.
    Records,
    /// libpcap's, on the frames (`weir read`), which a few kinds of frame
    /// leave less certain (`filter::Reading::Libpcap`).
    Libpcap,
}

/// The flows of one packet file a filter may match, as hashes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Wanted {
    /// Sorted, distinct.
    pub hashes: Vec<u32>,
    /// Rows without a flow hash may match too.
    pub nulls: bool,
    /// Slices of the flows file, those read (the rest in pages its page
    /// index ruled out), and those the filter may match.
    pub slices: u64,
    pub read: u64,
    pub matched: u64,
}

/// The hashes a record of the flow of `row` may carry: with its ports,
/// and without (fragments, protocols without ports); and whether it may
/// carry none (no IP layer, or ports cut off).
fn row_hashes(row: &FlowRow, out: &mut Vec<u32>) -> bool {
    let k = &row.key;
    if !k.is_ip() {
        return true;
    }
    let flow = |sp: u16, dp: u16| wire::flow::flow_hash(&k.a_ip, &k.b_ip, sp, dp, k.proto);
    if k.has_ports {
        out.push(flow(k.a_port, k.b_port));
    }
    out.push(flow(0, 0));
    !k.has_ports && matches!(k.proto, 6 | 17 | 132)
}

/// The directions of `row` that have frames, as a filter sees their
/// packets.
fn row_sides(row: &FlowRow) -> impl Iterator<Item = FlowPacket> + '_ {
    let k = &row.key;
    let packet = move |from_a: bool| {
        let ip = k.is_ip().then(|| {
            let (src, dst, sp, dp) = if from_a {
                (k.a_ip, k.b_ip, k.a_port, k.b_port)
            } else {
                (k.b_ip, k.a_ip, k.b_port, k.a_port)
            };
            FlowIp {
                version: k.ip_version,
                src: u128::from_be_bytes(src),
                dst: u128::from_be_bytes(dst),
                ports: k.has_ports.then_some((sp, dp)),
                proto: k.proto,
            }
        });
        FlowPacket {
            ip,
            ethertype: k.ethertype,
        }
    };
    [(true, row.a_frames), (false, row.b_frames)]
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(move |(a, _)| packet(a))
}

impl Wanted {
    /// Adds `row` if `parsed`, read as `how` says, may match its frames.
    pub fn consider(&mut self, row: &FlowRow, parsed: &Parsed, how: Reading, window: &TimeWindow) {
        let in_window = window.from_ns.is_none_or(|f| row.last_ns >= f)
            && window.to_ns.is_none_or(|t| row.first_ns < t);
        if !in_window {
            return;
        }
        // A frame weir could not parse whole may read otherwise to libpcap.
        let unsure = matches!(how, Reading::Libpcap { .. }) && row.parse_errors > 0;
        if unsure || row_sides(row).any(|p| parsed.flow.eval(&p, how) != Truth::No) {
            self.matched += 1;
            self.nulls |= row_hashes(row, &mut self.hashes);
        }
    }

    fn finish(mut self) -> Wanted {
        self.hashes.sort_unstable();
        self.hashes.dedup();
        self
    }
}

/// The flows of the flows file at `path` that `parsed` may match, read as
/// `how` says; only the columns that say which flow a row is are read.
pub fn wanted_in_file(
    path: &Path,
    parsed: &Parsed,
    how: Reading,
    window: &TimeWindow,
) -> Result<Wanted, AnalyzeError> {
    let mut w = Wanted::default();
    let lookup = parsed.flow.addresses().map(|(ranges, arp)| FlowLookup {
        ranges,
        non_ip: arp,
        // libpcap may read a frame weir could not parse whole otherwise.
        parse_errors: matches!(how, Reading::Libpcap { .. }),
    });
    let rows = store::flows::read_flow_rows(path, lookup.as_ref(), |row| {
        w.consider(row, parsed, how, window)
    })?;
    (w.slices, w.read) = (rows.rows, rows.read);
    Ok(w.finish())
}

/// The flows of `slices` that `parsed` may match, read as `how` says.
pub fn wanted(slices: &[FlowSlice], parsed: &Parsed, how: Reading, window: &TimeWindow) -> Wanted {
    let n = slices.len() as u64;
    let mut w = Wanted {
        slices: n,
        read: n,
        ..Default::default()
    };
    for s in slices {
        w.consider(&FlowRow::of_slice(s), parsed, how, window);
    }
    w.finish()
}

/// A packet file's records that may match, read through the index or
/// whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexReport {
    /// Packet files read through their index, and read whole.
    pub files_indexed: u64,
    pub files_whole: u64,
    /// Flow slices in the flows files of the files indexed, and those the
    /// filter may match.
    pub slices: u64,
    pub slices_read: u64,
    pub slices_matched: u64,
    /// Pages of the records read, and in the row groups of the window (a
    /// file without a page index counts a page per row group).
    pub pages_read: u64,
    pub pages_total: u64,
    /// Rows of the pages read, and of the row groups of the window.
    pub rows_read: u64,
    pub rows_total: u64,
    /// Why a file was read whole (the last reason met).
    pub whole_because: Option<&'static str>,
}

impl IndexReport {
    /// Adds another file's figures (the reason a file was read whole is
    /// the last one met).
    fn add(&mut self, o: &IndexReport) {
        self.files_indexed += o.files_indexed;
        self.files_whole += o.files_whole;
        self.slices += o.slices;
        self.slices_read += o.slices_read;
        self.slices_matched += o.slices_matched;
        self.pages_read += o.pages_read;
        self.pages_total += o.pages_total;
        self.rows_read += o.rows_read;
        self.rows_total += o.rows_total;
        self.whole_because = o.whole_because.or(self.whole_because);
    }
}

/// A record that points at a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRef {
    pub ts_ns: i64,
    pub file: u32,
    pub offset: u64,
}

/// The packet files of a dataset (finished ones: their directory's
/// `*.parquet`, as the query engine lists them), sorted.
pub fn packet_files(root: &Path) -> Result<Vec<PathBuf>, AnalyzeError> {
    let dir = root.join(store::dataset::PACKETS_DIR);
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(AnalyzeError::Io {
                path: dir,
                source: e,
            });
        }
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| AnalyzeError::Io {
            path: dir.clone(),
            source: e,
        })?;
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with('.') && name.ends_with(".parquet") {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// The flows file beside the packet file `packets`, if there is one.
fn flows_file(root: &Path, packets: &Path) -> Option<PathBuf> {
    let name = packets.file_name()?.to_string_lossy().into_owned();
    let p = root.join(flows_path_for(&format!(
        "{}/{name}",
        store::dataset::PACKETS_DIR
    )));
    p.is_file().then_some(p)
}

/// Whether a row group may hold rows of `window`, by its `ts` statistics.
fn group_in_window(
    rg: &datafusion::parquet::file::metadata::RowGroupMetaData,
    ts: Option<usize>,
    w: &TimeWindow,
) -> bool {
    use datafusion::parquet::file::statistics::Statistics;
    let Some(Statistics::Int64(s)) = ts.and_then(|i| rg.column(i).statistics()) else {
        return true;
    };
    let (Some(&lo), Some(&hi)) = (s.min_opt(), s.max_opt()) else {
        return true;
    };
    w.from_ns.is_none_or(|f| hi >= f) && w.to_ns.is_none_or(|t| lo < t)
}

/// Every record of the dataset at `root` in `window` that may point at a
/// frame `parsed` matches (as libpcap reads it), with what it pointed at;
/// `sink` gets them file by file. None when a packet file is not one
/// weir's decoder reads (the caller then asks the query engine, and drops
/// what `sink` was given).
///
/// Files are read a core each, as many at once as there are cores (their
/// footers, page indexes and pages are each file's own work); what they
/// found goes to `sink` in file order, a round of files at a time, so
/// that no more than a round's records wait in memory.
pub fn frame_refs(
    root: &Path,
    parsed: Option<&Parsed>,
    window: &TimeWindow,
    report: &mut IndexReport,
    mut sink: impl FnMut(FrameRef, bool),
) -> Result<Option<()>, AnalyzeError> {
    let files = packet_files(root)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Counted into `report` once every file is read: a file met later
    // that the decoder cannot read sends the whole dataset to the engine.
    let mut mine = IndexReport::default();
    for round in files.chunks(threads) {
        let found = par_map(threads, round, |path| file_refs(root, path, parsed, window))?;
        for file in found {
            let Some(file) = file else {
                report.whole_because = Some(
                    "packet files weir's decoder does not read: arrival order, or another \
                     writer's",
                );
                return Ok(None);
            };
            mine.add(&file.report);
            for (r, pointed) in file.refs {
                sink(r, pointed);
            }
        }
    }
    report.add(&mine);
    Ok(Some(()))
}

/// What one packet file gave [`frame_refs`].
struct FileRefs {
    report: IndexReport,
    refs: Vec<(FrameRef, bool)>,
}

/// The candidate records of the packet file at `path` (see
/// [`frame_refs`]); None when weir's decoder does not read it.
fn file_refs(
    root: &Path,
    path: &Path,
    parsed: Option<&Parsed>,
    window: &TimeWindow,
) -> Result<Option<FileRefs>, AnalyzeError> {
    let mut report = IndexReport::default();
    let data = store::decode::scan::map_file(path)?;
    let meta = std::sync::Arc::new(store::decode::scan::metadata(path, &data)?);
    if !store::decode::scan::supports(&meta, &COLUMNS) {
        return Ok(None);
    }
    let schema = meta.file_metadata().schema_descr();
    let ts_leaf = (0..schema.num_columns()).find(|&i| schema.column(i).name() == "ts");
    let keep = |rg: &datafusion::parquet::file::metadata::RowGroupMetaData| {
        group_in_window(rg, ts_leaf, window)
    };
    // The records of packet schema 1 describe a tunnelled frame's outer
    // packet, not the innermost one an inner filter reads.
    let inner_ok = parsed.is_none_or(|p| p.scope == Scope::Outer)
        || (0..schema.num_columns()).any(|i| schema.column(i).name() == "tunnel_depth");
    let index = match parsed {
        Some(p) if p.flow.decides() && inner_ok => {
            PacketIndex::of_parsed(path, data.clone(), meta.clone())?
        }
        _ => None,
    };
    let flows = index.as_ref().and_then(|_| flows_file(root, path));
    let found = holds(&meta, keep);
    // An outer filter on tunnelled frames: the records' addresses are
    // the innermost packet's, not those libpcap reads.
    let usable = !(found.tunnels && parsed.is_some_and(|p| p.scope == Scope::Outer));
    let groups: Vec<usize> = (0..meta.num_row_groups())
        .filter(|&g| keep(meta.row_group(g)))
        .collect();
    report.rows_total += groups
        .iter()
        .map(|&g| meta.row_group(g).num_rows().max(0) as u64)
        .sum::<u64>();
    let mut scan = match (index, flows, parsed) {
        (Some(index), Some(flows), Some(parsed)) if usable => {
            let how = Reading::Libpcap {
                inner: parsed.scope == Scope::Inner,
                vlan: found.vlan,
                ipv6_ext: found.long_ip_headers,
            };
            let w = wanted_in_file(&flows, parsed, how, window)?;
            let chosen = index.choose(&w.hashes, w.nulls, keep);
            report.files_indexed += 1;
            report.slices += w.slices;
            report.slices_read += w.read;
            report.slices_matched += w.matched;
            report.pages_read += chosen.pages() as u64;
            report.pages_total += groups
                .iter()
                .map(|&g| index.hash_pages(g).len() as u64)
                .sum::<u64>();
            report.rows_read += (chosen.groups.iter())
                .flat_map(|(g, pages)| pages.iter().map(|&p| index.hash_pages(*g)[p].rows))
                .sum::<u64>();
            let scan = index.scan(&chosen, &COLUMNS)?;
            Scan {
                scan,
                hashes: Some(w),
            }
        }
        (index, flows, _) => {
            report.whole_because = Some(match (parsed, index.is_some(), flows.is_some()) {
                (None, ..) => "no filter the flows table can answer",
                (Some(p), ..) if !p.flow.decides() => {
                    "the filter looks at more than addresses, ports and protocols"
                }
                _ if !inner_ok => "records written before tunnels were followed",
                _ if !usable => "an outer filter on tunnelled frames",
                (_, false, _) => "a packet file without a page index (arrival order, or older)",
                (_, true, false) => {
                    "a packet file without its flows file (weir recover rebuilds it)"
                }
                _ => "",
            });
            report.files_whole += 1;
            report.pages_read += groups.len() as u64;
            report.pages_total += groups.len() as u64;
            report.rows_read += groups
                .iter()
                .map(|&g| meta.row_group(g).num_rows().max(0) as u64)
                .sum::<u64>();
            let scan = store::decode::scan::TableScan::of_parsed(
                path,
                data.clone(),
                meta.clone(),
                &COLUMNS,
                |_, rg| keep(rg),
            )?;
            Scan { scan, hashes: None }
        }
    };
    let mut refs = Vec::new();
    scan.each(window, &mut |r, pointed| refs.push((r, pointed)))?;
    Ok(Some(FileRefs { report, refs }))
}

/// A scan of the candidate rows of one file; with the hashes wanted, rows
/// of other flows in the pages read are passed over.
struct Scan {
    scan: store::decode::scan::TableScan,
    hashes: Option<Wanted>,
}

impl Scan {
    fn each(
        &mut self,
        window: &TimeWindow,
        sink: &mut impl FnMut(FrameRef, bool),
    ) -> Result<(), AnalyzeError> {
        let s = &mut self.scan;
        while let Some(n) = s.advance()? {
            s.load()?;
            let (hash, ts, file, off) = (s.column(0), s.column(1), s.column(2), s.column(3));
            for i in 0..n {
                if let Some(w) = &self.hashes {
                    let keep = match hash.int(i) {
                        Some(h) => w.hashes.binary_search(&(h as u32)).is_ok(),
                        None => w.nulls,
                    };
                    if !keep {
                        continue;
                    }
                }
                let Some(t) = ts.int(i).map(|t| t as i64) else {
                    continue;
                };
                if window.from_ns.is_some_and(|f| t < f) || window.to_ns.is_some_and(|e| t >= e) {
                    continue;
                }
                match (file.int(i), off.int(i)) {
                    (Some(f), Some(o)) => sink(
                        FrameRef {
                            ts_ns: t,
                            file: f as u32,
                            offset: o,
                        },
                        true,
                    ),
                    _ => sink(
                        FrameRef {
                            ts_ns: t,
                            file: 0,
                            offset: 0,
                        },
                        false,
                    ),
                }
            }
        }
        Ok(())
    }
}

/// Most flow hashes put in a condition: past a few dozen, DataFusion no
/// longer prunes pages by a list (and a filter matching that many flows
/// gains little from it).
const MAX_HASHES: usize = 20;

/// The flows of every packet file of `roots` that `parsed` may match, as
/// a condition on `flow_hash` (the records' reading: exact), which the
/// packet files' page index lets the query engine answer from a few pages.
/// None when it would not help or cannot be told: a packet file without
/// its flows file, a filter the flows do not decide, too many flows.
pub fn hash_condition(
    roots: &[&Path],
    parsed: &Parsed,
    window: &TimeWindow,
) -> Result<Option<String>, AnalyzeError> {
    if !parsed.flow.decides() {
        return Ok(None);
    }
    let (mut hashes, mut nulls) = (Vec::new(), false);
    for root in roots {
        for path in packet_files(root)? {
            let Some(flows) = flows_file(root, &path) else {
                return Ok(None);
            };
            let w = wanted_in_file(&flows, parsed, Reading::Records, window)?;
            hashes.extend(w.hashes);
            nulls |= w.nulls;
            if hashes.len() > 4 * MAX_HASHES {
                return Ok(None);
            }
        }
    }
    hashes.sort_unstable();
    hashes.dedup();
    if hashes.len() > MAX_HASHES {
        return Ok(None);
    }
    let list = hashes
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Some(match (hashes.is_empty(), nulls) {
        (true, false) => "FALSE".to_string(),
        (true, true) => "flow_hash IS NULL".to_string(),
        (false, false) => format!("flow_hash IN ({list})"),
        (false, true) => format!("(flow_hash IN ({list}) OR flow_hash IS NULL)"),
    }))
}
