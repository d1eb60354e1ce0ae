//! Scan 1 of the rpc pass: the nfs files' READ/WRITE bytes per call id
//! and per file handle, and the calls by id for scan 2 to join.

use foldhash::HashMap;

use crate::columns::DataFile;
use crate::error::AnalyzeError;
use crate::window::TimeWindow;

use super::{DictMap, NFS_PROGRAM, in_window, load, open, times, with_ts};

/// READ and WRITE operations and the bytes their replies counted.
#[derive(Clone, Copy, Default)]
pub(super) struct Io {
    pub(super) read: i64,
    pub(super) written: i64,
    pub(super) reads: i64,
    pub(super) writes: i64,
}

impl Io {
    pub(super) fn add(&mut self, o: &Io) {
        self.read += o.read;
        self.written += o.written;
        self.reads += o.reads;
        self.writes += o.writes;
    }
}

/// The READ/WRITE of one call (an NFSv4 COMPOUND may hold several).
#[derive(Clone, Copy, Default)]
pub(super) struct CallIo {
    pub(super) id: u64,
    pub(super) io: Io,
}

/// READ/WRITE totals of one file handle. A sum with no non-null term is
/// NULL in SQL, hence the flags.
#[derive(Clone, Copy, Default)]
pub(super) struct HandleIo {
    pub(super) read: i64,
    pub(super) written: i64,
    pub(super) read_seen: bool,
    pub(super) written_seen: bool,
    pub(super) ops: i64,
}

impl HandleIo {
    pub(super) fn add(&mut self, o: &HandleIo) {
        self.read += o.read;
        self.written += o.written;
        self.read_seen |= o.read_seen;
        self.written_seen |= o.written_seen;
        self.ops += o.ops;
    }
}

#[derive(Default)]
pub(super) struct NfsPart {
    pub(super) calls: Vec<CallIo>,
    pub(super) handles: HashMap<u64, HandleIo>,
    /// The file has GETFH operations (NFSv4), whose handle names the
    /// LOOKUP/OPEN/CREATE before them.
    pub(super) getfh: bool,
}

/// An operation's kind: 1 READ, 2 WRITE, 3 LOOKUP/OPEN/CREATE, 4 GETFH,
/// 0 any other.
pub(super) fn op_kind(name: &[u8]) -> u8 {
    match name {
        b"READ" => 1,
        b"WRITE" => 2,
        b"LOOKUP" | b"OPEN" | b"CREATE" => 3,
        b"GETFH" => 4,
        _ => 0,
    }
}

pub(super) fn scan_nfs_io(path: &DataFile, window: TimeWindow) -> Result<NfsPart, AnalyzeError> {
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
pub(super) struct CallsById {
    pub(super) runs: Vec<Vec<CallIo>>,
}

/// Where the last lookup in [`CallsById`] ended: run, place in it, the
/// run's last id, and the id looked up.
#[derive(Default)]
pub(super) struct CallCursor {
    pub(super) run: usize,
    pub(super) at: usize,
    pub(super) run_end: u64,
    pub(super) last: Option<u64>,
}

impl CallsById {
    pub(super) fn of(parts: &mut [NfsPart]) -> CallsById {
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
    pub(super) fn find(&self, id: u64, cur: &mut CallCursor) -> Option<&CallIo> {
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
