//! A worker's packet records, off its capture thread: the pcap writer hands
//! each block it has written on to this thread, which makes the records of
//! the block's frames (decode, flows, the app and RPC stages, Parquet) and
//! gives the block back to the staging pool. It runs at the lowest nice
//! level while the capture lasts, so on a core shared with the capture it
//! takes little more than the time the capture leaves.
//!
//! When it falls behind, the writer stops handing blocks on and names the
//! spans of the pcap files this thread missed; their records are built
//! from the files whenever it has nothing else to do, and at the end, so
//! that every stored frame has its record.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use pcapio::spool::{MissedSpan, SpoolShared, Staged, StagedBlock};
use store::StoreError;
use wire::LinkType;

use super::Counters;
use super::disk::DiskWatch;
use crate::late::{self, LateError};
use crate::worker::{FrameMeta, Worker, WorkerDone};

/// Late records built in one go before looking for new blocks again.
const LATE_BATCH: u64 = 16_384;

pub(super) struct RecordsCtx {
    pub(super) worker: Worker,
    pub(super) from: Receiver<Staged>,
    pub(super) link: LinkType,
    pub(super) iface: u16,
    /// Where the pcap files are, and the spool's list of finished ones.
    pub(super) pcap_dir: PathBuf,
    pub(super) pcap: Arc<SpoolShared>,
    pub(super) counters: Arc<Counters>,
    pub(super) disk: DiskWatch,
    pub(super) stop: Arc<AtomicBool>,
}

pub(super) struct RecordsOut {
    pub(super) records: Option<WorkerDone>,
    pub(super) error: Option<String>,
    pub(super) warnings: Vec<String>,
}

/// Spans of the pcap files still to get their records, oldest first.
#[derive(Default)]
struct LateSpans {
    spans: VecDeque<MissedSpan>,
}

impl LateSpans {
    /// Adds a span; one that continues the last becomes part of it.
    fn push(&mut self, s: MissedSpan) {
        match self.spans.back_mut() {
            Some(last) if last.file_id == s.file_id && last.to == s.from => {
                last.to = s.to;
                last.frames += s.frames;
            }
            _ => self.spans.push_back(s),
        }
    }
}

/// Sets the calling thread's nice level (Linux applies `setpriority` to a
/// thread id as to one thread). While the capture runs the records thread
/// is at the lowest level: on a core it shares with the capture and the
/// pcap writer it takes little more than the time they leave, so a busy
/// core puts records off rather than drop frames, and where a core is
/// free it runs at full speed. Once the capture has ended the records are
/// the job: [`finish_records`] runs at the capture's own level.
fn set_nice(level: libc::c_int) {
    // SAFETY: a plain system call on this thread's own id.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, level);
    }
}

/// The lowest nice level.
const BELOW_CAPTURE: libc::c_int = 19;

pub(super) struct Records {
    w: Worker,
    link: LinkType,
    iface: u16,
    pcap_dir: PathBuf,
    pcap: Arc<SpoolShared>,
    c: Arc<Counters>,
    disk: DiskWatch,
    stop: Arc<AtomicBool>,
    error: Option<String>,
    warnings: Vec<String>,
    /// Records not made: the disk was full (`--on-full drop`).
    skipped: u64,
    late: LateSpans,
    /// The open packet file holds late records.
    in_late_file: bool,
    /// The file the late records are being read from.
    late_file: Option<(u32, PathBuf, pcapio::fetch::PcapFile)>,
}

/// The records thread while the capture runs: the blocks the pcap writer
/// hands on, and late records when none waits. Returns, once the writer
/// has ended, what is left to do ([`finish_records`]).
pub(super) fn run_records(ctx: RecordsCtx) -> Records {
    set_nice(BELOW_CAPTURE);
    let mut r = Records {
        w: ctx.worker,
        link: ctx.link,
        iface: ctx.iface,
        pcap_dir: ctx.pcap_dir,
        pcap: ctx.pcap,
        c: ctx.counters,
        disk: ctx.disk,
        stop: ctx.stop,
        error: None,
        warnings: Vec::new(),
        skipped: 0,
        late: LateSpans::default(),
        in_late_file: false,
        late_file: None,
    };
    let mut last_tick = Instant::now();
    // Late records were built last time round: look for a block without
    // waiting, and build more if there is none.
    let mut building = false;
    loop {
        let wait = if building {
            Duration::ZERO
        } else {
            Duration::from_millis(200)
        };
        match ctx.from.recv_timeout(wait) {
            Ok(Staged::Block(b)) => r.block(&b),
            Ok(Staged::Missed(span)) => {
                r.c.records_late.fetch_add(span.frames, Ordering::Relaxed);
                r.late.push(span);
            }
            Err(RecvTimeoutError::Timeout) => {}
            // The pcap writer has ended: every block has come.
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if last_tick.elapsed() >= Duration::from_millis(200) {
            last_tick = Instant::now();
            if r.error.is_none()
                && let Err(e) = r.w.tick()
            {
                r.failed(e);
            }
        }
        // Nothing new waiting: time for the records put off.
        building = ctx.from.is_empty() && r.build_late(LATE_BATCH, false);
    }
    r
}

/// The records of a capture that has ended: every late span's, built from
/// the pcap files (all finished now), then the last packet file closed.
/// Run on a thread of the capture's own priority (one the records thread
/// started at the lowest level could not raise it back without privilege).
pub(super) fn finish_records(mut r: Records) -> RecordsOut {
    while !r.late.spans.is_empty() {
        r.build_late(u64::MAX, true);
    }
    r.finish()
}

impl Records {
    /// A records error ends the capture; a full disk with `--on-full
    /// drop` only makes this thread drop (and count) until space returns.
    fn failed(&mut self, e: StoreError) {
        self.disk.failed(e, &self.stop, &mut self.error);
    }

    fn publish(&self) {
        self.c
            .records_drops
            .store(self.w.rows_lost() + self.skipped, Ordering::Relaxed);
        self.c
            .flow_slices_lost
            .store(self.w.flow_slices_lost(), Ordering::Relaxed);
    }

    fn block(&mut self, b: &StagedBlock) {
        if self.error.is_some() || self.disk.dropping() {
            self.skipped += b.frames;
            self.publish();
            return;
        }
        if self.in_late_file {
            self.in_late_file = false;
            if let Err(e) = self.w.close() {
                self.failed(e);
            }
        }
        let mut made = 0u64;
        for f in b.frames() {
            let meta = FrameMeta {
                ts_ns: f.ts_ns,
                wire_len: f.wire_len,
                link: self.link,
                iface: self.iface,
                pcap: Some((b.file_id, f.offset)),
            };
            made += 1;
            if let Err(e) = self.w.frame(meta, f.data) {
                self.failed(e);
                self.skipped += b.frames - made;
                break;
            }
        }
        self.c.records.fetch_add(made, Ordering::Relaxed);
        self.publish();
    }

    /// Builds up to `most` late records, from the oldest span whose pcap
    /// file is finished (`all`: every file is); whether there was any to
    /// build.
    fn build_late(&mut self, most: u64, all: bool) -> bool {
        let Some(span) = self.late.spans.front().copied() else {
            return false;
        };
        if self.error.is_some() {
            self.lose_front("the capture's records failed first".into());
            return true;
        }
        if self
            .late_file
            .as_ref()
            .is_none_or(|(id, ..)| *id != span.file_id)
        {
            self.late_file = None;
            let finished = self.pcap.finished_files();
            let Some(info) = finished.iter().find(|f| f.id == span.file_id) else {
                if all {
                    // The writer ended without finishing the file (it
                    // failed): nothing to read the frames from.
                    self.lose_front("its pcap file was not finished".into());
                }
                return all;
            };
            let path = self.pcap_dir.join(&info.name);
            match late::open_pcap(&path) {
                Ok(f) => self.late_file = Some((span.file_id, path, f)),
                Err(e) => {
                    // Retention took it first, or it cannot be read.
                    self.lose_front(e.to_string());
                    return true;
                }
            }
        }
        let Some((id, path, file)) = &self.late_file else {
            return false;
        };
        if !self.in_late_file {
            // Late records in files of their own, so that no file's time
            // range spans the gap.
            if let Err(e) = self.w.close() {
                self.failed(e);
                return true;
            }
            self.in_late_file = true;
        }
        let result = late::build_span(
            &mut self.w,
            file,
            path,
            *id,
            self.iface,
            (span.from, span.to),
            most,
        );
        match result {
            Ok((built, next)) => {
                self.c.records.fetch_add(built, Ordering::Relaxed);
                self.c
                    .records_late_built
                    .fetch_add(built, Ordering::Relaxed);
                let front = &mut self.late.spans[0];
                front.from = next;
                front.frames = front.frames.saturating_sub(built);
                if next >= front.to {
                    self.late.spans.pop_front();
                }
            }
            Err(LateError::Store(e)) => {
                // Counted with the packet file it gave up (a full disk);
                // the rest of the span is not tried again.
                self.failed(e);
                self.lose_front("its packet records could not be written".into());
            }
            Err(e) => self.lose_front(e.to_string()),
        }
        self.publish();
        true
    }

    /// The oldest late span's frames will have no record.
    fn lose_front(&mut self, why: String) {
        if let Some(s) = self.late.spans.pop_front() {
            self.c
                .records_late_lost
                .fetch_add(s.frames, Ordering::Relaxed);
            if self.warnings.len() < 8 {
                self.warnings.push(format!(
                    "{} frames of pcap file {} got no packet record: {why}",
                    s.frames, s.file_id
                ));
            }
        }
    }

    fn finish(mut self) -> RecordsOut {
        // The last file closes here, so that one the disk has no room for
        // is given up and counted like any other.
        if let Err(e) = self.w.close() {
            self.failed(e);
        }
        self.publish();
        let records = match self.w.finish() {
            Ok(r) => Some(r),
            Err(e) => {
                self.error.get_or_insert(e.to_string());
                None
            }
        };
        RecordsOut {
            records,
            error: self.error,
            warnings: self.warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(file_id: u32, from: u64, to: u64, frames: u64) -> MissedSpan {
        MissedSpan {
            file_id,
            from,
            to,
            frames,
        }
    }

    #[test]
    fn spans_that_continue_each_other_join() {
        let mut l = LateSpans::default();
        l.push(span(1, 24, 100, 2));
        l.push(span(1, 100, 300, 5));
        l.push(span(1, 400, 500, 1));
        l.push(span(2, 500, 600, 1));
        let got: Vec<_> = l.spans.iter().copied().collect();
        assert_eq!(
            got,
            vec![
                span(1, 24, 300, 7),
                span(1, 400, 500, 1),
                span(2, 500, 600, 1)
            ]
        );
    }
}
