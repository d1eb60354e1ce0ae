//! `weir analyze rpc` as one hand-written pass over the rpc and nfs
//! columns, instead of four SQL queries on DataFusion (which cost ~10 ns per
//! row for each aggregate expression: 2 M rows/s for the analysis, a tenth
//! of its target). The SQL in `sql/rpc_*.sql` stays the definition: it is
//! what `--emit-sql` hands to Spark, the results' names and types are
//! planned from it, and the tests check this pass against it.
//!
//! Three scans, each over the files in parallel (a file is a unit of work):
//! 1. nfs: READ/WRITE bytes per call id and per file handle;
//! 2. rpc: counts, bytes and latencies per procedure and server, calls per
//!    client, joined to step 1's bytes per call id (a merge: ids rise
//!    within a writer's files);
//! 3. nfs again, only for the busiest handles: the names they were seen
//!    under, reading the name column for those rows alone.
//!
//! It relies on how weir writes the tables (store::rpc): `program`,
//! `version` and `procedure` are set exactly when the call was seen (so
//! they stand for `call_ts IS NOT NULL`), `latency_ns` exactly when call
//! and reply both were, and an NFSv4 COMPOUND's operations are consecutive
//! rows in op_index order. Ids are unique within a dataset, so calls are
//! joined to their operations dataset by dataset.

use std::collections::BTreeMap;
use std::sync::Arc;
use store::manifest::Manifest;
use util::storage::Root;

use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int64Array, StringArray, UInt32Array, UInt64Array,
};
use datafusion::parquet::file::statistics::Statistics;
use foldhash::{HashMap, HashMapExt, HashSet};
use store::decode::scan::{Col, Dictionary, TableScan};

use crate::columns::{DataFile, engine, par_fold, par_map, parquet_files};
use crate::error::AnalyzeError;
use crate::window::TimeWindow;

const NFS_PROGRAM: u64 = 100003;

/// The rpc and nfs files of one dataset.
pub(crate) struct DatasetFiles {
    pub rpc: Vec<DataFile>,
    pub nfs: Vec<DataFile>,
}

impl DatasetFiles {
    pub fn of(root: &Root, manifest: &Manifest) -> Result<DatasetFiles, AnalyzeError> {
        Ok(DatasetFiles {
            rpc: parquet_files(root, manifest, store::rpc::RPC_DIR)?,
            nfs: parquet_files(root, manifest, store::rpc::NFS_DIR)?,
        })
    }
}

/// Whether every file has the columns this pass reads, in a form weir's
/// column scan reads (older or foreign files may not: the caller then runs
/// the SQL, which reads missing columns as null).
pub(crate) fn readable(files: &[DatasetFiles]) -> Result<bool, AnalyzeError> {
    for d in files {
        for (paths, cols) in [(&d.rpc, RPC_READ), (&d.nfs, NFS_READ)] {
            for p in paths {
                if !p.readable(cols)? {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

const RPC_READ: &[&str] = &[
    "id",
    "ts",
    "latency_ns",
    "client",
    "server",
    "program",
    "version",
    "procedure",
    "program_name",
    "procedure_name",
    "status",
    "retransmits",
    "call_bytes",
    "reply_bytes",
];
const NFS_READ: &[&str] = &[
    "rpc_id",
    "ts",
    "program",
    "version",
    "op_index",
    "op_name",
    "fh",
    "res_count",
    "res_fh",
    "name",
];

/// A scan of a file's columns `cols`, skipping row groups the window
/// excludes by their ts statistics.
fn open(file: &DataFile, cols: &[&str], window: TimeWindow) -> Result<TableScan, AnalyzeError> {
    file.scan(cols, |rg| {
        let ts = rg
            .columns()
            .iter()
            .find(|c| c.column_path().string() == "ts");
        let Some(Statistics::Int64(s)) = ts.and_then(|c| c.statistics()) else {
            return true;
        };
        let (Some(&lo), Some(&hi)) = (s.min_opt(), s.max_opt()) else {
            return true;
        };
        window.from_ns.is_none_or(|f| hi >= f) && window.to_ns.is_none_or(|t| lo < t)
    })
}

/// The columns to read: `cols`, and ts last when the window is bounded
/// (delta-coded times cost a few ns a row to decode; most scans need them
/// only to test the window).
fn with_ts<'a>(cols: &[&'a str], window: TimeWindow) -> Vec<&'a str> {
    let mut v = cols.to_vec();
    if window != TimeWindow::default() {
        v.push("ts");
    }
    v
}

/// Decodes the batch's columns `cols` and checks they have the types the
/// pass reads them as (a foreign file may store a column otherwise).
fn load(s: &mut TableScan, cols: &[&str], file: &DataFile) -> Result<(), AnalyzeError> {
    s.load()?;
    for (k, name) in cols.iter().enumerate() {
        let c = s.column(k);
        let ok = match *name {
            "op_name" | "program_name" | "procedure_name" | "name" => true,
            "client" | "server" => c.fixed().len() == c.rows(),
            _ => c.is_int() && (c.ints().len() == c.rows() || c.codes().is_some()),
        };
        if !ok {
            return Err(engine(
                &file.path,
                format!("column {name} has an unexpected type"),
            ));
        }
    }
    Ok(())
}

/// The batch's times if it has them (see [`with_ts`]): the last column of
/// `cols`.
fn times<'a>(s: &'a TableScan, cols: &[&str]) -> Option<&'a [u64]> {
    (cols.last() == Some(&"ts")).then(|| s.column(cols.len() - 1).ints())
}

fn in_window(w: TimeWindow, ts: u64) -> bool {
    let ts = ts as i64;
    w.from_ns.is_none_or(|f| ts >= f) && w.to_ns.is_none_or(|t| ts < t)
}

/// Something derived from each entry of a column chunk's dictionary, kept
/// while the chunk lasts: a column's values mapped once per dictionary
/// entry rather than once per row.
struct DictMap<T> {
    generation: u64,
    map: Vec<T>,
}

impl<T: Copy> Default for DictMap<T> {
    fn default() -> Self {
        DictMap {
            generation: 0,
            map: Vec::new(),
        }
    }
}

impl<T: Copy> DictMap<T> {
    /// Per entry of `d`, `f` of it (computed when `d` is new).
    fn of(&mut self, d: &Dictionary, f: impl FnMut(usize) -> T) -> &[T] {
        if d.generation() != self.generation {
            self.map = (0..d.len()).map(f).collect();
            self.generation = d.generation();
        }
        &self.map
    }

    /// Per row of text column `c`, `f` of its text, or `null` where it has
    /// none.
    fn rows(&mut self, c: &Col, null: T, mut f: impl FnMut(&[u8]) -> T, out: &mut Vec<T>) {
        out.clear();
        match c.codes() {
            Some(codes) => {
                let d = c.dictionary();
                let map = self.of(d, |k| d.text(k).map_or(null, &mut f));
                out.extend(codes.iter().enumerate().map(|(i, &k)| {
                    if c.is_valid(i) {
                        map.get(k as usize).copied().unwrap_or(null)
                    } else {
                        null
                    }
                }));
            }
            None => out.extend((0..c.rows()).map(|i| c.text(i).map_or(null, &mut f))),
        }
    }
}

/// Names, each kept once, by number.
#[derive(Default)]
struct Names {
    names: Vec<String>,
    index: HashMap<Vec<u8>, u32>,
}

impl Names {
    fn intern(&mut self, v: &[u8]) -> u32 {
        if let Some(&k) = self.index.get(v) {
            return k;
        }
        self.names.push(String::from_utf8_lossy(v).into_owned());
        let k = (self.names.len() - 1) as u32;
        self.index.insert(v.to_vec(), k);
        k
    }
}

// ---- scan 1: nfs bytes per call and per handle ----

/// READ and WRITE operations and the bytes their replies counted.
#[derive(Clone, Copy, Default)]
struct Io {
    read: i64,
    written: i64,
    reads: i64,
    writes: i64,
}

impl Io {
    fn add(&mut self, o: &Io) {
        self.read += o.read;
        self.written += o.written;
        self.reads += o.reads;
        self.writes += o.writes;
    }
}

/// The READ/WRITE of one call (an NFSv4 COMPOUND may hold several).
#[derive(Clone, Copy, Default)]
struct CallIo {
    id: u64,
    io: Io,
}

/// READ/WRITE totals of one file handle. A sum with no non-null term is
/// NULL in SQL, hence the flags.
#[derive(Clone, Copy, Default)]
struct HandleIo {
    read: i64,
    written: i64,
    read_seen: bool,
    written_seen: bool,
    ops: i64,
}

impl HandleIo {
    fn add(&mut self, o: &HandleIo) {
        self.read += o.read;
        self.written += o.written;
        self.read_seen |= o.read_seen;
        self.written_seen |= o.written_seen;
        self.ops += o.ops;
    }
}

#[derive(Default)]
struct NfsPart {
    calls: Vec<CallIo>,
    handles: HashMap<u64, HandleIo>,
    /// The file has GETFH operations (NFSv4), whose handle names the
    /// LOOKUP/OPEN/CREATE before them.
    getfh: bool,
}

/// An operation's kind: 1 READ, 2 WRITE, 3 LOOKUP/OPEN/CREATE, 4 GETFH,
/// 0 any other.
fn op_kind(name: &[u8]) -> u8 {
    match name {
        b"READ" => 1,
        b"WRITE" => 2,
        b"LOOKUP" | b"OPEN" | b"CREATE" => 3,
        b"GETFH" => 4,
        _ => 0,
    }
}

fn scan_nfs_io(path: &DataFile, window: TimeWindow) -> Result<NfsPart, AnalyzeError> {
    let cols = with_ts(&["rpc_id", "program", "op_name", "fh", "res_count"], window);
    let mut part = NfsPart::default();
    let mut kinds = DictMap::default();
    let mut kind = Vec::new();
    let mut s = open(path, &cols, window)?;
    // Handles and counts are read for READ and WRITE rows only (a few per
    // cent): looked up from their codes there, not for every row.
    s.keep_codes(3);
    s.keep_codes(4);
    while let Some(n) = s.advance()? {
        load(&mut s, &cols, path)?;
        let (id, program, fh, count) = (s.column(0), s.column(1), s.column(3), s.column(4));
        let ts = times(&s, &cols);
        kinds.rows(&s.column(2), 0, op_kind, &mut kind);
        part.getfh |= kind.contains(&4);
        let (ids, programs) = (id.ints(), program.ints());
        for i in 0..n {
            let kind = kind[i];
            if !(kind == 1 || kind == 2) || !program.is_valid(i) || programs[i] != NFS_PROGRAM {
                continue;
            }
            if ts.is_some_and(|t| !in_window(window, t[i])) {
                continue;
            }
            let n = count.int(i).map(|c| c as i64);
            let bytes = n.unwrap_or(0);
            let id = ids[i];
            let c = match part.calls.last_mut() {
                Some(c) if c.id == id => c,
                _ => {
                    part.calls.push(CallIo {
                        id,
                        ..CallIo::default()
                    });
                    part.calls.last_mut().expect("just pushed")
                }
            };
            let h = HandleIo {
                read: if kind == 1 { bytes } else { 0 },
                written: if kind == 2 { bytes } else { 0 },
                read_seen: kind == 2 || n.is_some(),
                written_seen: kind == 1 || n.is_some(),
                ops: 1,
            };
            if kind == 1 {
                c.io.read += bytes;
                c.io.reads += 1;
            } else {
                c.io.written += bytes;
                c.io.writes += 1;
            }
            if let Some(fh) = fh.int(i) {
                part.handles.entry(fh).or_default().add(&h);
            }
        }
    }
    Ok(part)
}

/// The calls' bytes by id, one entry per id: in runs, each rising and
/// each above the one before. Each nfs file's calls are one, as the files
/// hold them (tens of MB at 20 M calls: not copied into one vector on a
/// single thread while the others wait), unless they are out of order.
struct CallsById {
    runs: Vec<Vec<CallIo>>,
}

/// Where the last lookup in [`CallsById`] ended: run, place in it, the
/// run's last id, and the id looked up.
#[derive(Default)]
struct CallCursor {
    run: usize,
    at: usize,
    run_end: u64,
    last: Option<u64>,
}

impl CallsById {
    fn of(parts: &mut [NfsPart]) -> CallsById {
        let mut runs: Vec<Vec<CallIo>> = (parts.iter_mut())
            .map(|p| std::mem::take(&mut p.calls))
            .filter(|c| !c.is_empty())
            .collect();
        let rising = runs.iter().all(|r| r.windows(2).all(|w| w[0].id < w[1].id))
            && runs
                .windows(2)
                .all(|w| w[0][w[0].len() - 1].id < w[1][0].id);
        if !rising {
            let mut calls: Vec<CallIo> = runs.concat();
            calls.sort_by_key(|c| c.id);
            calls.dedup_by(|b, a| {
                if a.id != b.id {
                    return false;
                }
                a.io.add(&b.io);
                true
            });
            runs = vec![calls];
        }
        CallsById { runs }
    }

    /// The call `id`'s bytes, if it has any. Ids that rise from one lookup
    /// to the next (the rows of an rpc file) are found by walking on.
    #[inline]
    fn find(&self, id: u64, cur: &mut CallCursor) -> Option<&CallIo> {
        let walk = cur.last.is_some_and(|l| l <= id) && id <= cur.run_end;
        cur.last = Some(id);
        if walk {
            let run = &self.runs[cur.run];
            while cur.at < run.len() && run[cur.at].id < id {
                cur.at += 1;
            }
        } else {
            cur.run = (self.runs).partition_point(|r| r.last().is_some_and(|c| c.id < id));
            let Some(run) = self.runs.get(cur.run) else {
                // Past every run: the next lookup searches again.
                cur.last = None;
                return None;
            };
            cur.at = run.partition_point(|c| c.id < id);
            cur.run_end = run.last().map_or(0, |c| c.id);
        }
        self.runs.get(cur.run)?.get(cur.at).filter(|c| c.id == id)
    }
}

// ---- scan 2: the rpc table ----

/// A procedure as the table names it; `None` fields are NULL.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Procedure {
    program: Option<u32>,
    version: Option<u32>,
    procedure: Option<u32>,
    program_name: Option<String>,
    procedure_name: Option<String>,
}

impl Procedure {
    fn program_label(&self) -> Option<String> {
        self.program_name
            .clone()
            .or_else(|| self.program.map(|p| p.to_string()))
    }
    fn procedure_label(&self) -> Option<String> {
        self.procedure_name
            .clone()
            .or_else(|| self.procedure.map(|p| p.to_string()))
    }
}

#[derive(Clone, Copy, Default)]
struct Totals {
    calls: i64,
    no_reply: i64,
    no_call: i64,
    retransmitted: i64,
    errors: i64,
    call_bytes: u64,
    reply_bytes: u64,
}

impl Totals {
    fn add(&mut self, o: &Totals) {
        self.calls += o.calls;
        self.no_reply += o.no_reply;
        self.no_call += o.no_call;
        self.retransmitted += o.retransmitted;
        self.errors += o.errors;
        self.call_bytes += o.call_bytes;
        self.reply_bytes += o.reply_bytes;
    }
}

/// Calls per client, and the READ/WRITE of its calls.
#[derive(Clone, Copy, Default)]
struct ClientIo {
    calls: i64,
    io: Io,
}

#[derive(Default)]
struct RpcPart {
    procedures: Vec<Procedure>,
    totals: Vec<Totals>,
    /// (procedure, second) -> calls.
    per_second: HashMap<(u32, i64), i64>,
    /// (server, procedure) -> latencies in ns.
    latencies: HashMap<(u128, u32), Latencies>,
    clients: HashMap<u128, ClientIo>,
    span: Option<(i64, i64)>,
}

type ProcedureKey = (u32, u32, u32, u32, u32);

/// Numbers of the rows' procedures in a part, in front of the map a small
/// direct-mapped cache (procedures interleave, but there are few).
struct ProcedureIndex {
    index: HashMap<ProcedureKey, u32>,
    cache: [Option<(ProcedureKey, u32)>; 64],
}

impl ProcedureIndex {
    #[inline(always)]
    fn slot(k: &ProcedureKey) -> usize {
        (k.2 ^ k.1.rotate_left(5) ^ k.0.rotate_left(11)) as usize & 63
    }
}

impl Default for ProcedureIndex {
    fn default() -> Self {
        ProcedureIndex {
            index: HashMap::new(),
            cache: [None; 64],
        }
    }
}

/// One thread's scan of rpc files, grown file by file: a part per file,
/// merged at the end, held every latency twice (320 MB at 20 M calls, all
/// of it fresh pages).
#[derive(Default)]
struct RpcScan {
    part: RpcPart,
    names: Names,
    /// Per row of a batch, the numbers in `names` of its program and
    /// procedure names (u32::MAX: none), and the maps that give them.
    program_names: (DictMap<u32>, Vec<u32>),
    procedure_names: (DictMap<u32>, Vec<u32>),
    procs: ProcedureIndex,
    /// The current second's count of each procedure, added to per_second
    /// when the second changes.
    second: Vec<(i64, i64)>,
    /// Per procedure, the server and latency group of its last answered
    /// call (procedures interleave; servers mostly do not).
    last_lat: Vec<Option<(u128, usize)>>,
    lat_groups: Vec<((u128, u32), Latencies)>,
    lat_index: HashMap<(u128, u32), usize>,
    client_rows: Vec<(u128, ClientIo)>,
    client_index: HashMap<u128, usize>,
    last_client: Option<(u128, usize)>,
}

impl RpcScan {
    /// The scan's totals, latencies and clients.
    fn finish(self) -> RpcPart {
        let mut part = self.part;
        for (g, (sec, n)) in self.second.into_iter().enumerate() {
            if n > 0 {
                *part.per_second.entry((g as u32, sec)).or_default() += n;
            }
        }
        part.latencies = self.lat_groups.into_iter().collect();
        part.clients = self.client_rows.into_iter().collect();
        part
    }

    /// Adds the rows of the rpc file at `path`.
    fn file(
        &mut self,
        path: &DataFile,
        window: TimeWindow,
        calls: &CallsById,
    ) -> Result<(), AnalyzeError> {
        let RpcScan {
            part,
            names,
            program_names,
            procedure_names,
            procs,
            second,
            last_lat,
            lat_groups,
            lat_index,
            client_rows,
            client_index,
            last_client,
        } = self;
        let mut cursor = CallCursor::default();
        let bounded = window != TimeWindow::default();
        let mut s = open(path, RPC_READ, window)?;
        while let Some(n) = s.advance()? {
            load(&mut s, RPC_READ, path)?;
            let col = |k: usize| s.column(k);
            let (id, ts, latency) = (col(0).ints(), col(1).ints(), col(2));
            let (client, server) = (col(3).fixed(), col(4).fixed());
            let (program, version, procedure) = (col(5), col(6), col(7));
            let (status, retransmits) = (col(10), col(11).ints());
            let (call_bytes, reply_bytes) = (col(12).ints(), col(13).ints());
            let (latencies, programs, statuses) = (latency.ints(), program.ints(), status.ints());
            let (pn, prn) = (&mut program_names.1, &mut procedure_names.1);
            program_names
                .0
                .rows(&col(8), u32::MAX, |t| names.intern(t), pn);
            procedure_names
                .0
                .rows(&col(9), u32::MAX, |t| names.intern(t), prn);
            let opt = |c: &Col, i: usize| {
                if c.is_valid(i) {
                    c.ints()[i] as u32
                } else {
                    u32::MAX
                }
            };
            for i in 0..n {
                let t = ts[i] as i64;
                if bounded && !in_window(window, ts[i]) {
                    continue;
                }
                let (lo, hi) = part.span.get_or_insert((i64::MAX, i64::MIN));
                (*lo, *hi) = ((*lo).min(t), (*hi).max(t));
                let called = program.is_valid(i);
                // u32::MAX stands for NULL in the key; Procedure keeps the
                // real Options (a program number of u32::MAX and a NULL one
                // share a key only if the rest agrees too, which the writer
                // never produces).
                let key = (
                    opt(&program, i),
                    opt(&version, i),
                    opt(&procedure, i),
                    pn[i],
                    prn[i],
                );
                let slot = ProcedureIndex::slot(&key);
                let g = match procs.cache[slot] {
                    Some((k, g)) if k == key => g,
                    _ => {
                        let n = procs.index.len() as u32;
                        let g = *procs.index.entry(key).or_insert_with(|| {
                            let name =
                                |c: u32| (c != u32::MAX).then(|| names.names[c as usize].clone());
                            let value = |c: &Col| c.is_valid(i).then(|| c.ints()[i] as u32);
                            part.procedures.push(Procedure {
                                program: value(&program),
                                version: value(&version),
                                procedure: value(&procedure),
                                program_name: name(key.3),
                                procedure_name: name(key.4),
                            });
                            part.totals.push(Totals::default());
                            second.push((i64::MIN, 0));
                            last_lat.push(None);
                            n
                        });
                        procs.cache[slot] = Some((key, g));
                        g
                    }
                };
                let tot = &mut part.totals[g as usize];
                let answered = latency.is_valid(i);
                tot.calls += 1;
                tot.no_reply += (called && !answered) as i64;
                tot.no_call += !called as i64;
                tot.retransmitted += (retransmits[i] > 0) as i64;
                tot.errors += (status.is_valid(i) && statuses[i] != 0) as i64;
                tot.call_bytes += call_bytes[i];
                tot.reply_bytes += reply_bytes[i];
                let s = &mut second[g as usize];
                // Most calls fall in their procedure's current second
                // (a second starting at s.0 ≥ 0 holds [s.0, s.0 + 1 s)).
                if s.0 >= 0 && (t.wrapping_sub(s.0) as u64) < 1_000_000_000 {
                    s.1 += 1;
                } else {
                    if s.1 > 0 {
                        *part.per_second.entry((g, s.0)).or_default() += s.1;
                    }
                    *s = (t - t % 1_000_000_000, 1);
                }
                if answered {
                    let server = server[i];
                    let at = match last_lat[g as usize] {
                        Some((k, at)) if k == server => at,
                        _ => {
                            let at = *lat_index.entry((server, g)).or_insert_with(|| {
                                lat_groups.push(((server, g), Latencies::default()));
                                lat_groups.len() - 1
                            });
                            last_lat[g as usize] = Some((server, at));
                            at
                        }
                    };
                    lat_groups[at].1.push(latencies[i] as i64);
                }
                // Calls per client, with the bytes of the call's NFS
                // operations (the SQL's `nfs JOIN rpc ON id`).
                let a = client[i];
                let at = match *last_client {
                    Some((k, at)) if k == a => at,
                    _ => {
                        let at = *client_index.entry(a).or_insert_with(|| {
                            client_rows.push((a, ClientIo::default()));
                            client_rows.len() - 1
                        });
                        *last_client = Some((a, at));
                        at
                    }
                };
                let c = &mut client_rows[at].1;
                if called && programs[i] == NFS_PROGRAM {
                    c.calls += 1;
                }
                if let Some(io) = calls.find(id[i], &mut cursor) {
                    c.io.add(&io.io);
                }
            }
        }
        Ok(())
    }
}

// ---- scan 3: names of the busiest handles ----

/// Rows of a file that name a handle in `top`: (row, handle), rows rising;
/// and the rows read.
fn naming_rows(
    path: &DataFile,
    getfh: bool,
    window: TimeWindow,
    top: &HashSet<u64>,
) -> Result<(Vec<(usize, u64)>, usize), AnalyzeError> {
    if !getfh {
        return own_handle_rows(path, window, top);
    }
    let cols = with_ts(
        &["rpc_id", "version", "op_index", "op_name", "res_fh"],
        window,
    );
    let mut out = Vec::new();
    let mut row = 0usize;
    // The previous row, if it was an NFSv4 LOOKUP/OPEN/CREATE: (row,
    // rpc_id, op_index); a GETFH right after it gives its handle.
    let mut prev: Option<(usize, u64, u64)> = None;
    let mut kinds = DictMap::default();
    let mut kind = Vec::new();
    let mut s = open(path, &cols, window)?;
    while let Some(n) = s.advance()? {
        load(&mut s, &cols, path)?;
        let (id, version, op_index, res_fh) = (s.column(0), s.column(1), s.column(2), s.column(4));
        let ts = times(&s, &cols);
        kinds.rows(&s.column(3), 0, op_kind, &mut kind);
        let (ids, versions, indexes, fhs) =
            (id.ints(), version.ints(), op_index.ints(), res_fh.ints());
        for i in 0..n {
            let r = row + i;
            let before = prev.take();
            if ts.is_some_and(|t| !in_window(window, t[i])) {
                continue;
            }
            let fh = res_fh.is_valid(i).then(|| fhs[i]);
            let (id, index) = (ids[i], indexes[i]);
            if let Some(fh) = fh.filter(|f| top.contains(f)) {
                if kind[i] == 4
                    && let Some((pr, pid, pindex)) = before
                    && pid == id
                    && pindex.checked_add(1) == Some(index)
                {
                    out.push((pr, fh));
                }
                out.push((r, fh));
            }
            if kind[i] == 3 && version.is_valid(i) && versions[i] == 4 {
                prev = Some((r, id, index));
            }
        }
        row += n;
    }
    out.sort_unstable();
    out.dedup();
    Ok((out, row))
}

/// [`naming_rows`] of a file without GETFH: a row names only its own
/// result handle, and res_fh is all there is to read.
fn own_handle_rows(
    path: &DataFile,
    window: TimeWindow,
    top: &HashSet<u64>,
) -> Result<(Vec<(usize, u64)>, usize), AnalyzeError> {
    let cols = with_ts(&["res_fh"], window);
    let mut out = Vec::new();
    let mut row = 0usize;
    let mut s = open(path, &cols, window)?;
    // Most rows name a handle (LOOKUP results): whether it is a top one is
    // asked once per dictionary entry, not once per row.
    s.keep_codes(0);
    let mut in_top = DictMap::default();
    while let Some(n) = s.advance()? {
        load(&mut s, &cols, path)?;
        let ts = times(&s, &cols);
        let res_fh = s.column(0);
        let keep = |i: usize| res_fh.is_valid(i) && ts.is_none_or(|t| in_window(window, t[i]));
        match res_fh.codes() {
            Some(codes) => {
                let d = res_fh.dictionary();
                let top_code = in_top.of(d, |k| d.int(k).is_some_and(|v| top.contains(&v)));
                for (i, &k) in codes.iter().enumerate() {
                    if top_code.get(k as usize) == Some(&true)
                        && keep(i)
                        && let Some(v) = d.int(k as usize)
                    {
                        out.push((row + i, v));
                    }
                }
            }
            None => {
                for (i, &v) in res_fh.ints().iter().enumerate() {
                    if keep(i) && top.contains(&v) {
                        out.push((row + i, v));
                    }
                }
            }
        }
        row += n;
    }
    Ok((out, row))
}

fn names_of(
    path: &DataFile,
    getfh: bool,
    window: TimeWindow,
    top: &HashSet<u64>,
) -> Result<Vec<(u64, String)>, AnalyzeError> {
    let (rows, _) = naming_rows(path, getfh, window, top)?;
    let mut out = Vec::new();
    let mut at = 0usize;
    let mut row = 0usize;
    let mut s = open(path, &["name"], window)?;
    // Only the batches that hold a naming row are decoded.
    while at < rows.len()
        && let Some(n) = s.advance()?
    {
        if rows[at].0 >= row + n {
            row += n;
            continue;
        }
        load(&mut s, &["name"], path)?;
        let name = s.column(0);
        while at < rows.len() && rows[at].0 < row + n {
            let (r, fh) = rows[at];
            if let Some(t) = name.text(r - row) {
                out.push((fh, String::from_utf8_lossy(t).into_owned()));
            }
            at += 1;
        }
        row += n;
    }
    Ok(out)
}

// ---- the analysis ----

/// The four tables' rows, before they take the SQL's types.
pub(crate) struct RpcResult {
    pub tables: [(Vec<ArrayRef>, &'static str); 4],
    /// Latencies per "program vN PROCEDURE" label (unsorted), if asked for.
    pub samples: BTreeMap<String, Vec<i64>>,
}

struct LatencyRow {
    server: String,
    program: Option<String>,
    version: Option<u32>,
    procedure: Option<String>,
    /// Each scan thread's latencies: merged by the thread that works out
    /// the row's quantiles.
    values: Vec<Latencies>,
    count: usize,
}

/// The latencies of one server and procedure in ns: those under 2^32 ns
/// (4.3 s: nearly all) in half the memory, the rest apart. 20 M calls'
/// latencies are written once into fresh pages and selected from, so their
/// size is their cost.
#[derive(Default)]
struct Latencies {
    short: Vec<u32>,
    long: Vec<i64>,
}

impl Latencies {
    #[inline(always)]
    fn push(&mut self, ns: i64) {
        match u32::try_from(ns) {
            Ok(v) => self.short.push(v),
            Err(_) => self.long.push(ns),
        }
    }

    fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }

    fn append(&mut self, o: &Latencies) {
        self.short.extend_from_slice(&o.short);
        self.long.extend_from_slice(&o.long);
    }

    fn sum(&self) -> i128 {
        let short: u64 = self.short.iter().map(|&x| u64::from(x)).sum();
        short as i128 + self.long.iter().map(|&x| x as i128).sum::<i128>()
    }

    fn max(&self) -> i64 {
        let short = self.short.iter().copied().max().map(i64::from);
        short.max(self.long.iter().copied().max()).unwrap_or(0)
    }

    /// [`percentiles_cont`] of all of them; reorders them.
    fn percentiles(&mut self, ps: &[f64]) -> Vec<f64> {
        if self.long.is_empty() {
            return percentiles_cont(&mut self.short, ps);
        }
        let mut all: Vec<i64> = self.short.iter().map(|&x| i64::from(x)).collect();
        all.extend_from_slice(&self.long);
        percentiles_cont(&mut all, ps)
    }
}

/// DataFusion's `percentile_cont` at each of `ps` (rising) over `v`:
/// linear between the neighbours at p × (n − 1), the weight quantised to
/// 1e-6 as it does. Each selection works on the part above the previous
/// one, and the upper neighbour is the least value above the lower.
fn percentiles_cont<T: Copy + Ord + Into<i64>>(v: &mut [T], ps: &[f64]) -> Vec<f64> {
    let n = v.len();
    let mut out = Vec::with_capacity(ps.len());
    let mut from = 0usize;
    for &p in ps {
        if n == 1 {
            out.push(v[0].into() as f64);
            continue;
        }
        let index = p * (n - 1) as f64;
        let (lo, hi) = (index.floor() as usize, index.ceil() as usize);
        let low = if lo >= from {
            let (_, &mut x, _) = v[from..].select_nth_unstable(lo - from);
            from = lo;
            x
        } else {
            // Same lower index as the previous p: already in place.
            v[lo]
        };
        let low = low.into() as f64;
        if lo == hi {
            out.push(low);
            continue;
        }
        let high = v[lo + 1..]
            .iter()
            .copied()
            .min()
            .map_or(low, |x| x.into() as f64);
        let weight = ((index - lo as f64) * 1e6) as usize as f64 / 1e6;
        out.push(low + (high - low) * weight);
    }
    out
}

fn ip_text(a: u128) -> String {
    let mut s = String::new();
    crate::udf::write_ip(&a.to_be_bytes(), &mut s);
    s
}

/// An nfs table file, and whether it has the `getfh` column names are
/// read from.
struct NfsFile<'a> {
    path: &'a DataFile,
    getfh: bool,
}

/// What scans 1 and 2 found over all datasets.
struct Scanned<'a> {
    /// Each scan thread's rpc part.
    parts: Vec<RpcPart>,
    /// Bytes and operations per file handle.
    handles: HashMap<u64, HandleIo>,
    nfs_files: Vec<NfsFile<'a>>,
}

/// A procedure as the SQL groups them: program, version and procedure
/// labels (ordered in that order).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Label {
    program: String,
    version: u32,
    procedure: String,
}

impl Label {
    fn of(p: &Procedure) -> Label {
        Label {
            program: p.program_label().unwrap_or_else(|| "unknown".into()),
            version: p.version.unwrap_or(0),
            procedure: p.procedure_label().unwrap_or_else(|| "unknown".into()),
        }
    }
}

/// The scan threads' parts put together.
struct Merged {
    totals: BTreeMap<Label, Totals>,
    /// Per label, its busiest second's calls.
    peak: HashMap<Label, i64>,
    /// The calls' time span in seconds (at least 1).
    seconds: f64,
    /// Latencies per (server, procedure), as each thread kept them.
    latencies: BTreeMap<(u128, Procedure), Vec<Latencies>>,
    clients: BTreeMap<u128, ClientIo>,
}

/// A latency row's count, mean, median, 90th and 99th percentile and
/// maximum, with its latencies merged.
struct RowStats {
    row: usize,
    stats: [i64; 6],
    values: Latencies,
}

/// The latency table and, if asked for, its samples.
struct LatencyTable {
    columns: Vec<ArrayRef>,
    samples: BTreeMap<String, Vec<i64>>,
}

/// An NFS client, by address text, with its calls and bytes.
struct ClientRow {
    addr: String,
    client: ClientIo,
}

/// A file handle with its bytes and operations.
struct HandleRow {
    fh: u64,
    io: HandleIo,
}

/// Runs the pass over `datasets` on `threads` threads.
pub(crate) fn run(
    datasets: &[DatasetFiles],
    window: TimeWindow,
    threads: usize,
    top_handles: usize,
    want_samples: bool,
) -> Result<RpcResult, AnalyzeError> {
    let threads = threads.max(1);
    let scanned = scan_datasets(datasets, window, threads)?;
    let merged = merge_parts(scanned.parts);
    let procedures = procedures_table(&merged);
    let latency = latency_table(merged.latencies, threads, want_samples)?;
    let clients = clients_table(merged.clients);
    let handles = handles_table(
        scanned.handles,
        &scanned.nfs_files,
        top_handles,
        threads,
        window,
    )?;
    Ok(RpcResult {
        tables: [
            (procedures, "procedures"),
            (latency.columns, "latency"),
            (clients, "clients"),
            (handles, "handles"),
        ],
        samples: latency.samples,
    })
}

/// Scans 1 and 2, dataset by dataset (ids are the dataset's own): the nfs
/// files' bytes per handle and per call, then the rpc files.
fn scan_datasets(
    datasets: &[DatasetFiles],
    window: TimeWindow,
    threads: usize,
) -> Result<Scanned<'_>, AnalyzeError> {
    let mut handles: HashMap<u64, HandleIo> = HashMap::new();
    let mut scans: Vec<RpcScan> = (0..threads).map(|_| RpcScan::default()).collect();
    let mut nfs_files: Vec<NfsFile> = Vec::new();
    for d in datasets {
        let mut nfs = par_map(threads, &d.nfs, |p| scan_nfs_io(p, window))?;
        nfs_files.extend(d.nfs.iter().zip(&nfs).map(|(path, p)| NfsFile {
            path,
            getfh: p.getfh,
        }));
        for p in &nfs {
            for (fh, h) in &p.handles {
                handles.entry(*fh).or_default().add(h);
            }
        }
        let calls = CallsById::of(&mut nfs);
        drop(nfs);
        let scans = &mut scans[..threads.min(d.rpc.len()).max(1)];
        par_fold(scans, &d.rpc, |scan, _, p| scan.file(p, window, &calls))?;
    }
    Ok(Scanned {
        parts: scans.into_iter().map(RpcScan::finish).collect(),
        handles,
        nfs_files,
    })
}

/// The parts merged; procedures by their labels, as the SQL groups them.
fn merge_parts(rpc_parts: Vec<RpcPart>) -> Merged {
    let mut totals: BTreeMap<Label, Totals> = BTreeMap::new();
    let mut per_second: HashMap<(Label, i64), i64> = HashMap::new();
    let mut span: Option<(i64, i64)> = None;
    let mut latencies: BTreeMap<(u128, Procedure), Vec<Latencies>> = BTreeMap::new();
    let mut clients: BTreeMap<u128, ClientIo> = BTreeMap::new();
    for part in rpc_parts {
        let labels: Vec<Label> = part.procedures.iter().map(Label::of).collect();
        for (g, t) in part.totals.iter().enumerate() {
            totals.entry(labels[g].clone()).or_default().add(t);
        }
        for ((g, sec), n) in part.per_second {
            *per_second
                .entry((labels[g as usize].clone(), sec))
                .or_default() += n;
        }
        if let Some((lo, hi)) = part.span {
            span = Some(span.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        }
        for ((server, g), v) in part.latencies {
            let key = (server, part.procedures[g as usize].clone());
            latencies.entry(key).or_default().push(v);
        }
        for (a, c) in part.clients {
            let e = clients.entry(a).or_default();
            e.calls += c.calls;
            e.io.add(&c.io);
        }
    }
    let mut peak: HashMap<Label, i64> = HashMap::new();
    for ((label, _), n) in per_second {
        let p = peak.entry(label).or_default();
        *p = (*p).max(n);
    }
    Merged {
        totals,
        peak,
        seconds: span.map_or(1.0, |(lo, hi)| ((hi - lo) as f64 / 1e9).max(1.0)),
        latencies,
        clients,
    }
}

/// The procedures table: busiest first.
fn procedures_table(m: &Merged) -> Vec<ArrayRef> {
    let mut procs: Vec<(&Label, &Totals)> = m.totals.iter().collect();
    procs.sort_by(|a, b| b.1.calls.cmp(&a.1.calls).then_with(|| a.0.cmp(b.0)));
    let seconds = m.seconds;
    vec![
        Arc::new(StringArray::from_iter_values(
            procs.iter().map(|p| &p.0.program),
        )),
        Arc::new(UInt32Array::from_iter_values(
            procs.iter().map(|p| p.0.version),
        )),
        Arc::new(StringArray::from_iter_values(
            procs.iter().map(|p| &p.0.procedure),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| p.1.calls),
        )),
        Arc::new(Float64Array::from_iter_values(
            procs.iter().map(|p| p.1.calls as f64 / seconds),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| m.peak.get(p.0).copied().unwrap_or(0)),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| p.1.no_reply),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| p.1.no_call),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| p.1.retransmitted),
        )),
        Arc::new(Int64Array::from_iter_values(
            procs.iter().map(|p| p.1.errors),
        )),
        Arc::new(UInt64Array::from_iter_values(
            procs.iter().map(|p| p.1.call_bytes),
        )),
        Arc::new(UInt64Array::from_iter_values(
            procs.iter().map(|p| p.1.reply_bytes),
        )),
    ]
}

/// The latency table: quantiles per server and procedure.
fn latency_table(
    latencies: BTreeMap<(u128, Procedure), Vec<Latencies>>,
    threads: usize,
    want_samples: bool,
) -> Result<LatencyTable, AnalyzeError> {
    let mut rows: Vec<LatencyRow> = latencies
        .into_iter()
        .map(|((server, p), values)| LatencyRow {
            server: ip_text(server),
            program: p.program_label(),
            version: p.version,
            procedure: p.procedure_label(),
            count: values.iter().map(Latencies::len).sum(),
            values,
        })
        .collect();
    rows.sort_by(|a, b| {
        a.server
            .cmp(&b.server)
            .then(b.count.cmp(&a.count))
            .then_with(|| a.program.cmp(&b.program))
            .then(a.version.cmp(&b.version))
            .then_with(|| a.procedure.cmp(&b.procedure))
    });
    let done = latency_stats(&mut rows, threads)?;
    let mut samples: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for (r, d) in rows.iter().zip(&done).filter(|_| want_samples) {
        let label = format!(
            "{} v{} {}",
            r.program.as_deref().unwrap_or(""),
            r.version.map(|v| v.to_string()).unwrap_or_default(),
            r.procedure.as_deref().unwrap_or("")
        );
        let s = samples.entry(label).or_default();
        s.extend(d.values.short.iter().map(|&x| i64::from(x)));
        s.extend_from_slice(&d.values.long);
    }
    let stat = |k: usize| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(
            done.iter().map(|d| d.stats[k]),
        ))
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| &r.server),
        )),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.program.as_deref()),
        )),
        Arc::new(UInt32Array::from_iter(rows.iter().map(|r| r.version))),
        Arc::new(StringArray::from_iter(
            rows.iter().map(|r| r.procedure.as_deref()),
        )),
        stat(0),
        stat(1),
        stat(2),
        stat(3),
        stat(4),
        stat(5),
    ];
    Ok(LatencyTable { columns, samples })
}

/// The rows' quantiles over the threads (a few procedures hold most
/// calls, so two threads take ~0.7 of one's time): each merges its row's
/// latencies (the other threads' added to the longest) and selects from
/// them. Takes the rows' values; gives them back merged, in the rows'
/// order.
fn latency_stats(rows: &mut [LatencyRow], threads: usize) -> Result<Vec<RowStats>, AnalyzeError> {
    let parts: Vec<std::sync::Mutex<Vec<Latencies>>> = (rows.iter_mut())
        .map(|r| std::sync::Mutex::new(std::mem::take(&mut r.values)))
        .collect();
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&k| std::cmp::Reverse(rows[k].count));
    let mut done = par_map(threads, &order, |&k| {
        let mut parts = std::mem::take(&mut *parts[k].lock().unwrap_or_else(|p| p.into_inner()));
        parts.sort_by_key(Latencies::len);
        let mut v = parts.pop().unwrap_or_default();
        parts.iter().for_each(|o| v.append(o));
        drop(parts);
        let n = v.len();
        let mean = (v.sum() as f64 / n as f64) as i64;
        let max = v.max();
        let q = v.percentiles(&[0.5, 0.9, 0.99]);
        let q = |k: usize| q[k].round() as i64;
        Ok(RowStats {
            row: k,
            stats: [n as i64, mean, q(0), q(1), q(2), max],
            values: v,
        })
    })?;
    // Back in the rows' order.
    done.sort_unstable_by_key(|d| d.row);
    Ok(done)
}

/// The clients table: NFS callers only, by bytes.
fn clients_table(clients: BTreeMap<u128, ClientIo>) -> Vec<ArrayRef> {
    let mut cl: Vec<ClientRow> = clients
        .into_iter()
        .filter(|(_, c)| c.calls > 0)
        .map(|(a, client)| ClientRow {
            addr: ip_text(a),
            client,
        })
        .collect();
    cl.sort_by(|a, b| {
        (b.client.io.read + b.client.io.written)
            .cmp(&(a.client.io.read + a.client.io.written))
            .then_with(|| a.addr.cmp(&b.addr))
    });
    vec![
        Arc::new(StringArray::from_iter_values(cl.iter().map(|c| &c.addr))),
        Arc::new(Int64Array::from_iter_values(
            cl.iter().map(|c| c.client.calls),
        )),
        Arc::new(Int64Array::from_iter_values(
            cl.iter().map(|c| c.client.io.read),
        )),
        Arc::new(Int64Array::from_iter_values(
            cl.iter().map(|c| c.client.io.written),
        )),
        Arc::new(Int64Array::from_iter_values(
            cl.iter().map(|c| c.client.io.reads),
        )),
        Arc::new(Int64Array::from_iter_values(
            cl.iter().map(|c| c.client.io.writes),
        )),
    ]
}

/// The handles table: the busiest by bytes (a NULL total first, as SQL's
/// DESC puts it), then their names (scan 3).
fn handles_table(
    handles: HashMap<u64, HandleIo>,
    nfs_files: &[NfsFile],
    top_handles: usize,
    threads: usize,
    window: TimeWindow,
) -> Result<Vec<ArrayRef>, AnalyzeError> {
    let total = |h: &HandleIo| (h.read_seen && h.written_seen).then_some(h.read + h.written);
    let order = |a: &HandleRow, b: &HandleRow| {
        match (total(&a.io), total(&b.io)) {
            (None, None) => std::cmp::Ordering::Equal,
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => y.cmp(&x),
        }
        .then(a.fh.cmp(&b.fh))
    };
    let mut hs: Vec<HandleRow> = handles
        .into_iter()
        .map(|(fh, io)| HandleRow { fh, io })
        .collect();
    if top_handles < hs.len() {
        if top_handles > 0 {
            hs.select_nth_unstable_by(top_handles - 1, order);
        }
        hs.truncate(top_handles);
    }
    hs.sort_unstable_by(order);
    let top: HashSet<u64> = hs.iter().map(|h| h.fh).collect();
    let mut names: HashMap<u64, String> = HashMap::new();
    if !top.is_empty() {
        let names_in = |f: &NfsFile| names_of(f.path, f.getfh, window, &top);
        for found in par_map(threads, nfs_files, names_in)? {
            for (fh, name) in found {
                match names.get_mut(&fh) {
                    Some(n) if *n >= name => {}
                    Some(n) => *n = name,
                    None => {
                        names.insert(fh, name);
                    }
                }
            }
        }
    }
    Ok(vec![
        Arc::new(UInt64Array::from_iter_values(hs.iter().map(|h| h.fh))),
        Arc::new(StringArray::from_iter(
            hs.iter().map(|h| names.get(&h.fh).map(String::as_str)),
        )),
        Arc::new(Int64Array::from_iter(
            hs.iter().map(|h| h.io.read_seen.then_some(h.io.read)),
        )),
        Arc::new(Int64Array::from_iter(
            hs.iter().map(|h| h.io.written_seen.then_some(h.io.written)),
        )),
        Arc::new(Int64Array::from_iter_values(hs.iter().map(|h| h.io.ops))),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_as_datafusion_does() {
        let mut v = vec![40, 10, 30, 20];
        // 0.5 × 3 = 1.5: halfway between 20 and 30; 0.9 × 3 = 2.7:
        // 30 + 0.7 × 10; 0.99 × 3 = 2.97.
        let q = percentiles_cont(&mut v, &[0.5, 0.9, 0.99]);
        assert_eq!(q[0], 25.0);
        assert!((q[1] - 37.0).abs() < 1e-9);
        // 2.97 − 2 is 0.96999…: the quantised weight is 0.969999.
        assert!((q[2] - 39.69999).abs() < 1e-9, "{}", q[2]);
        assert_eq!(percentiles_cont(&mut [7], &[0.5, 0.99]), vec![7.0, 7.0]);
        let mut v: Vec<i64> = (0..101).rev().collect();
        assert_eq!(percentiles_cont(&mut v, &[0.5, 0.99]), vec![50.0, 99.0]);
        // Two ps on one lower index, and ties.
        let mut v = vec![5, 5, 5, 1, 9];
        assert_eq!(
            percentiles_cont(&mut v, &[0.5, 0.6, 0.99]),
            vec![5.0, 5.0, 9.0 - 0.16]
        );
    }

    /// Against a sort, on values with many ties, for many sizes.
    #[test]
    fn percentiles_match_a_sort() {
        let mut x = 12345u64;
        for n in 1..200usize {
            let mut v: Vec<i64> = (0..n)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) % 50) as i64
                })
                .collect();
            let mut sorted = v.clone();
            sorted.sort_unstable();
            let ps = [0.5, 0.9, 0.99];
            let got = percentiles_cont(&mut v, &ps);
            for (k, p) in ps.iter().enumerate() {
                let index = p * (n - 1) as f64;
                let (lo, hi) = (index.floor() as usize, index.ceil() as usize);
                let w = ((index - lo as f64) * 1e6) as usize as f64 / 1e6;
                let want = sorted[lo] as f64 + (sorted[hi] - sorted[lo]) as f64 * w;
                assert!(
                    (got[k] - want).abs() < 1e-9,
                    "n {n} p {p}: {} vs {want}",
                    got[k]
                );
            }
        }
    }

    #[test]
    fn latencies_kept_short_and_long_give_what_one_vector_gives() {
        // Under 2^32 ns, 4.3 s and more, and negative (a clock step):
        // merged from two threads' sets.
        let values: Vec<i64> = (0..301i64)
            .map(|i| match i % 7 {
                0 => 5_000_000_000 + i,
                1 => -i,
                _ => (i * 7919) % 1_000_003,
            })
            .collect();
        let (a, b) = values.split_at(120);
        let mut set = Latencies::default();
        let mut other = Latencies::default();
        a.iter().for_each(|&v| set.push(v));
        b.iter().for_each(|&v| other.push(v));
        set.append(&other);
        assert!(!set.short.is_empty() && !set.long.is_empty());
        assert_eq!(set.len(), values.len());
        assert_eq!(set.sum(), values.iter().map(|&v| v as i128).sum::<i128>());
        assert_eq!(set.max(), *values.iter().max().unwrap());
        let ps = [0.5, 0.9, 0.99];
        assert_eq!(
            set.percentiles(&ps),
            percentiles_cont(&mut values.clone(), &ps)
        );
        let mut only_short = Latencies::default();
        only_short.push(7);
        only_short.push(3);
        assert_eq!(only_short.percentiles(&[0.5]), vec![5.0]);
        assert_eq!(only_short.max(), 7);
    }

    #[test]
    fn calls_out_of_order_are_sorted_and_merged() {
        let io = |id, read| CallIo {
            id,
            io: Io {
                read,
                reads: 1,
                ..Io::default()
            },
        };
        let mut parts = vec![
            NfsPart {
                calls: vec![io(5, 1), io(9, 2)],
                ..NfsPart::default()
            },
            NfsPart {
                calls: vec![io(2, 4), io(5, 8)],
                ..NfsPart::default()
            },
        ];
        let c = CallsById::of(&mut parts);
        let got: Vec<(u64, i64, i64)> = (c.runs.iter().flatten())
            .map(|c| (c.id, c.io.read, c.io.reads))
            .collect();
        assert_eq!(got, vec![(2, 4, 1), (5, 9, 2), (9, 2, 1)]);
    }

    /// Lookups rising, falling, between runs and past the last, against
    /// a search of every call.
    #[test]
    fn calls_are_found_across_runs() {
        let io = |id| CallIo {
            id,
            io: Io {
                read: id as i64,
                ..Io::default()
            },
        };
        let runs: Vec<Vec<u64>> = vec![vec![3, 4, 8], vec![], vec![10, 20], vec![21, 40, 41]];
        let mut parts: Vec<NfsPart> = (runs.iter())
            .map(|r| NfsPart {
                calls: r.iter().map(|&id| io(id)).collect(),
                ..NfsPart::default()
            })
            .collect();
        let c = CallsById::of(&mut parts);
        assert_eq!(c.runs.len(), 3, "kept as they were, the empty one left out");
        let all: Vec<u64> = runs.concat();
        let mut cur = CallCursor::default();
        let mut x = 7u64;
        for step in 0..2000 {
            // Mostly rising, as an rpc file's rows are; sometimes anywhere.
            x = if step % 13 == 0 {
                (x * 7919 + 3) % 45
            } else {
                (x + step % 3) % 45
            };
            let want = all.contains(&x).then_some(x as i64);
            assert_eq!(c.find(x, &mut cur).map(|c| c.io.read), want, "id {x}");
        }
    }
}
