//! Scan 2 of the rpc pass: the rpc files' counts, bytes and latencies
//! per procedure and server, calls per client, joined to scan 1's bytes
//! per call id.

use foldhash::{HashMap, HashMapExt};
use store::decode::scan::Col;

use crate::columns::DataFile;
use crate::error::AnalyzeError;
use crate::window::TimeWindow;

use super::nfs_io::{CallCursor, CallsById, Io};
use super::tables::Latencies;
use super::{DictMap, NFS_PROGRAM, Names, RPC_READ, in_window, load, open};

/// A procedure as the table names it; `None` fields are NULL.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) struct Procedure {
    pub(super) program: Option<u32>,
    pub(super) version: Option<u32>,
    pub(super) procedure: Option<u32>,
    pub(super) program_name: Option<String>,
    pub(super) procedure_name: Option<String>,
}

impl Procedure {
    pub(super) fn program_label(&self) -> Option<String> {
        self.program_name
            .clone()
            .or_else(|| self.program.map(|p| p.to_string()))
    }
    pub(super) fn procedure_label(&self) -> Option<String> {
        self.procedure_name
            .clone()
            .or_else(|| self.procedure.map(|p| p.to_string()))
    }
}

#[derive(Clone, Copy, Default)]
pub(super) struct Totals {
    pub(super) calls: i64,
    pub(super) no_reply: i64,
    pub(super) no_call: i64,
    pub(super) retransmitted: i64,
    pub(super) errors: i64,
    pub(super) call_bytes: u64,
    pub(super) reply_bytes: u64,
}

impl Totals {
    pub(super) fn add(&mut self, o: &Totals) {
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
pub(super) struct ClientIo {
    pub(super) calls: i64,
    pub(super) io: Io,
}

#[derive(Default)]
pub(super) struct RpcPart {
    pub(super) procedures: Vec<Procedure>,
    pub(super) totals: Vec<Totals>,
    /// (procedure, second) -> calls.
    pub(super) per_second: HashMap<(u32, i64), i64>,
    /// (server, procedure) -> latencies in ns.
    pub(super) latencies: HashMap<(u128, u32), Latencies>,
    pub(super) clients: HashMap<u128, ClientIo>,
    pub(super) span: Option<(i64, i64)>,
}

pub(super) type ProcedureKey = (u32, u32, u32, u32, u32);

/// Numbers of the rows' procedures in a part, in front of the map a small
/// direct-mapped cache (procedures interleave, but there are few).
pub(super) struct ProcedureIndex {
    pub(super) index: HashMap<ProcedureKey, u32>,
    pub(super) cache: [Option<(ProcedureKey, u32)>; 64],
}

impl ProcedureIndex {
    #[inline(always)]
    pub(super) fn slot(k: &ProcedureKey) -> usize {
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
pub(super) struct RpcScan {
    pub(super) part: RpcPart,
    pub(super) names: Names,
    /// Per row of a batch, the numbers in `names` of its program and
    /// procedure names (u32::MAX: none), and the maps that give them.
    pub(super) program_names: (DictMap<u32>, Vec<u32>),
    pub(super) procedure_names: (DictMap<u32>, Vec<u32>),
    pub(super) procs: ProcedureIndex,
    /// The current second's count of each procedure, added to per_second
    /// when the second changes.
    pub(super) second: Vec<(i64, i64)>,
    /// Per procedure, the server and latency group of its last answered
    /// call (procedures interleave; servers mostly do not).
    pub(super) last_lat: Vec<Option<(u128, usize)>>,
    pub(super) lat_groups: Vec<((u128, u32), Latencies)>,
    pub(super) lat_index: HashMap<(u128, u32), usize>,
    pub(super) client_rows: Vec<(u128, ClientIo)>,
    pub(super) client_index: HashMap<u128, usize>,
    pub(super) last_client: Option<(u128, usize)>,
}

impl RpcScan {
    /// The scan's totals, latencies and clients.
    pub(super) fn finish(self) -> RpcPart {
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
    /// The pass's inner loop over a file's row groups and rows, kept in
    /// one piece so that it stays one loop the compiler sees whole.
    pub(super) fn file(
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
