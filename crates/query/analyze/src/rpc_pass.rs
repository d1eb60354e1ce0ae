//! `weir analyze rpc` as one hand-written pass over the rpc and nfs
//! columns, instead of four SQL queries on DataFusion (which cost ~10 ns per
//! row for each aggregate expression: 2 M rows/s for the analysis, a tenth
//! of its target). The SQL in `sql/rpc_*.sql` stays the definition: it is
//! what `--emit-sql` hands to Spark, the results' names and types are
//! planned from it, and the tests check this pass against it.
//!
//! Three scans, each over the files in parallel (a file is a unit of work):
//! 1. nfs (`nfs_io`): READ/WRITE bytes per call id and per file handle;
//! 2. rpc (`rpc_scan`): counts, bytes and latencies per procedure and
//!    server, calls per client, joined to step 1's bytes per call id (a
//!    merge: ids rise within a writer's files);
//! 3. nfs again (`handle_names`), only for the busiest handles: the names
//!    they were seen under, reading the name column for those rows alone.
//!
//! `tables` merges the threads' parts into the result's tables; this
//! module holds what the scans share (the files, reading a row group's
//! columns in the window) and runs them.
//!
//! It relies on how weir writes the tables (store::rpc): `program`,
//! `version` and `procedure` are set exactly when the call was seen (so
//! they stand for `call_ts IS NOT NULL`), `latency_ns` exactly when call
//! and reply both were, and an NFSv4 COMPOUND's operations are consecutive
//! rows in op_index order. Ids are unique within a dataset, so calls are
//! joined to their operations dataset by dataset.

mod handle_names;
mod nfs_io;
mod rpc_scan;
mod tables;

use std::collections::BTreeMap;

use datafusion::arrow::array::ArrayRef;
use datafusion::parquet::file::statistics::Statistics;
use foldhash::{HashMap, HashMapExt};
use store::decode::scan::{Col, Dictionary, TableScan};
use store::manifest::Manifest;
use util::storage::Root;

use crate::columns::{DataFile, engine, par_fold, par_map, parquet_files};
use crate::error::AnalyzeError;
use crate::window::TimeWindow;

use handle_names::handles_table;
use nfs_io::{CallsById, HandleIo, scan_nfs_io};
use rpc_scan::{RpcPart, RpcScan};
use tables::{clients_table, latency_table, merge_parts, procedures_table};

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

/// The four tables' rows, before they take the SQL's types.
pub(crate) struct RpcResult {
    pub tables: [(Vec<ArrayRef>, &'static str); 4],
    /// Latencies per "program vN PROCEDURE" label (unsorted), if asked for.
    pub samples: BTreeMap<String, Vec<i64>>,
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

#[cfg(test)]
mod tests {
    use super::nfs_io::{CallCursor, CallIo, Io, NfsPart};
    use super::tables::{Latencies, percentiles_cont};
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
