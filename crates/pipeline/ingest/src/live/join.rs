//! Joining the workers: each worker's thread, its pcap writer and records
//! thread waited for, the late records built, and what they all made
//! gathered for the manifest.

use std::thread::JoinHandle;

use capture::ring::RxRing;
use pcapio::spool::PcapFileInfo;

use super::LiveError;
use super::records::finish_records;
use super::worker_loop::WorkerOut;
use crate::stats::FrameStats;

/// What the workers and their pcap writers handed back.
#[derive(Default)]
pub(super) struct Joined {
    pub(super) records_files: Vec<store::PacketFileSummary>,
    pub(super) rpc_info: Option<store::manifest::RpcInfo>,
    pub(super) app_info: Option<store::manifest::AppInfo>,
    pub(super) frame_stats: FrameStats,
    pub(super) pcap_files: Vec<PcapFileInfo>,
    /// Kept open until the last counts are read.
    rings: Vec<RxRing>,
    first_error: Option<String>,
    pub(super) pcap_write_lost: u64,
    pub(super) direct_io: bool,
    pub(super) warnings: Vec<String>,
}

impl Joined {
    /// Closes the rings (their last counts read), saying how each was
    /// left; the first error of a worker becomes a warning.
    pub(super) fn close_rings(&mut self) -> Vec<String> {
        let ring_states: Vec<String> = (self.rings.iter())
            .enumerate()
            .map(|(k, r)| format!("ring {k}: {}", r.state()))
            .collect();
        self.rings.clear();
        if let Some(e) = self.first_error.take() {
            self.warnings.push(e);
        }
        ring_states
    }

    /// What one worker's records made.
    fn add_records(&mut self, done: crate::worker::WorkerDone) {
        self.records_files.extend(done.files);
        self.frame_stats.merge(&done.stats);
        if let Some(info) = done.rpc {
            self.rpc_info
                .get_or_insert_with(Default::default)
                .merge(info);
        }
        if let Some(e) = done.rpc_error {
            self.warnings
                .push(format!("RPC decoding stopped early: {e}"));
        }
        if let Some(info) = done.app {
            self.app_info
                .get_or_insert_with(Default::default)
                .merge(info);
        }
        if let Some(e) = done.app_error {
            self.warnings
                .push(format!("DNS/TLS/HTTP decoding stopped early: {e}"));
        }
    }
}

/// Waits for every worker and its pcap writer and gathers what they made.
/// Every one is waited for, even after one has panicked.
pub(super) fn join_workers(handles: Vec<JoinHandle<WorkerOut>>) -> Result<Joined, LiveError> {
    let mut j = Joined::default();
    let mut panicked = None;
    let mut unfinished = Vec::new();
    for h in handles {
        let Ok(out) = h.join() else {
            panicked = Some(LiveError::Usage(
                "a capture worker panicked; this is a bug in weir".into(),
            ));
            continue;
        };
        if let Some(e) = out.error {
            j.first_error.get_or_insert(e);
        }
        if let Some(h) = out.spool {
            let Ok(report) = h.join() else {
                panicked = Some(LiveError::Usage(
                    "a pcap writer panicked; this is a bug in weir".into(),
                ));
                continue;
            };
            if let Some(e) = report.error {
                j.warnings.push(format!(
                    "pcap writing failed: {e}; {} frames staged after the last whole block \
                     on disk were not written (counted as pcap drops); every file is closed \
                     at a whole frame",
                    report.frames_lost
                ));
            }
            j.direct_io |= report.direct;
            j.pcap_write_lost += report.frames_lost;
            j.pcap_files.extend(report.files);
        }
        // Its pcap writer has ended, so the records thread ends too; what
        // it put off is built after, below.
        if let Some(t) = out.records_thread {
            match t.join() {
                Ok(r) => unfinished.push(r),
                Err(_) => {
                    panicked = Some(LiveError::Usage(
                        "a records thread panicked; this is a bug in weir".into(),
                    ));
                }
            }
        }
        if let Some(done) = out.records {
            j.add_records(done);
        }
        j.rings.extend(out.rings);
    }
    // Every worker's late records, side by side, on threads of the
    // capture's own priority (the records threads ran at the lowest).
    let finishing: Vec<_> = unfinished
        .into_iter()
        .map(|r| {
            std::thread::Builder::new()
                .name("weir-late".into())
                .spawn(move || finish_records(r))
        })
        .collect();
    for t in finishing {
        match t.map_err(LiveError::Thread).map(|t| t.join()) {
            Ok(Ok(r)) => {
                if let Some(e) = r.error {
                    j.first_error.get_or_insert(e);
                }
                j.warnings.extend(r.warnings);
                if let Some(done) = r.records {
                    j.add_records(done);
                }
            }
            Ok(Err(_)) => {
                panicked = Some(LiveError::Usage(
                    "building the late records panicked; this is a bug in weir".into(),
                ))
            }
            Err(e) => panicked = Some(e),
        }
    }
    match panicked {
        Some(e) => Err(e),
        None => Ok(j),
    }
}
