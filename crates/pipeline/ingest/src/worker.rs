//! One parse worker and its sinks.

use store::{
    Dataset, PacketFileSummary, PacketWriter, PacketWriterOptions, RowBuffers, StoreError,
};
use wire::{Has, LinkType, decode};

use crate::app::{AppOptions, AppStage};
use crate::rpc::{RpcMode, RpcOptions, RpcStage, SegmentAt, TablesOn};
use crate::stats::FrameStats;
use store::manifest::{AppInfo, RpcInfo};

/// Takes a copy of every record a worker makes (the Kafka stream of a
/// capture). It runs on the capture path: it must not block.
pub trait RecordTap: Send {
    fn record(&mut self, rec: &wire::PacketRecord);
    /// Called a few times a second: hand over what is pending.
    fn tick(&mut self);
}

/// Makes each worker's tap, given the worker's id; and takes each
/// second's stats rows as they are written.
#[derive(Clone)]
pub struct Taps {
    pub records: std::sync::Arc<dyn Fn(u16) -> Box<dyn RecordTap> + Send + Sync>,
    pub stats: Option<StatsTap>,
}

/// Takes a copy of each second's stats rows (it must not block).
pub type StatsTap = std::sync::Arc<dyn Fn(&[store::stats::StatsRow]) + Send + Sync>;

impl std::fmt::Debug for Taps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Taps")
    }
}

/// Knobs of a [`Worker`].
#[derive(Clone, Copy, Debug)]
pub struct WorkerOptions {
    pub writer: PacketWriterOptions,
    /// Start a new packet file after this many rows.
    pub rows_per_file: u64,
    /// And (live capture) once a file is this old, so that what was
    /// received is readable that long after (`--records-every`).
    pub file_every: Option<std::time::Duration>,
    /// An RPC stage in the worker (live capture, whose fanout keeps each
    /// flow on one worker; a conversion runs its own per source).
    pub rpc: Option<RpcOptions>,
    /// A DNS/TLS/HTTP stage in the worker (live capture, as for `rpc`).
    pub app: Option<AppOptions>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            writer: PacketWriterOptions::default(),
            rows_per_file: 32 << 20,
            file_every: None,
            rpc: None,
            app: None,
        }
    }
}

/// Parses frames into records and writes them to the worker's own packet
/// files in the dataset.
pub struct Worker {
    id: u16,
    dataset: Dataset,
    opts: WorkerOptions,
    writer: Option<PacketWriter>,
    /// When the open file was opened (for [`WorkerOptions::file_every`]).
    opened: std::time::Instant,
    /// Where finished files are announced while the capture runs.
    published: Option<Published>,
    /// Row buffers of the last finished file, for the next.
    spare: Option<RowBuffers>,
    file_seq: u32,
    files: Vec<PacketFileSummary>,
    pub stats: FrameStats,
    rpc: Option<RpcStage>,
    /// The RPC stage's first error; the packets go on without it.
    rpc_error: Option<StoreError>,
    app: Option<AppStage>,
    /// The app stage's first error; the packets go on without it.
    app_error: Option<StoreError>,
    /// A conversion's worker: the frames since the last
    /// [`Worker::take_segments`] (counted) and their segments, for the RPC
    /// stage of their source.
    handed: Option<(u32, Vec<SegmentAt>)>,
    tap: Option<Box<dyn RecordTap>>,
    /// Records lost with packet files that could not be written whole
    /// (a full disk): the files are given up, their `.part` removed.
    rows_lost: u64,
    /// Flows-table slices lost with flows files that could not be written.
    flow_slices_lost: u64,
    /// Frames given now are late ones, built from the pcap files: they
    /// get their packet records, but the RPC and app stages, which follow
    /// conversations in order, do not see them.
    late: bool,
}

/// Packet files the workers of a running capture have finished.
pub type Published = std::sync::Arc<std::sync::Mutex<Vec<PacketFileSummary>>>;

/// What a worker wrote.
pub struct WorkerDone {
    pub files: Vec<PacketFileSummary>,
    pub stats: FrameStats,
    pub rpc: Option<RpcInfo>,
    /// Why the RPC stage stopped early, if it did.
    pub rpc_error: Option<String>,
    pub app: Option<AppInfo>,
    /// Why the app stage stopped early, if it did.
    pub app_error: Option<String>,
}

/// Where a frame came from, for the record's capture fields.
#[derive(Clone, Copy, Debug)]
pub struct FrameMeta {
    pub ts_ns: i64,
    pub wire_len: u32,
    pub link: LinkType,
    pub iface: u16,
    /// (file, offset) of the frame in a pcap file the dataset refers to.
    pub pcap: Option<(u32, u64)>,
}

impl Worker {
    pub fn new(id: u16, dataset: Dataset, opts: WorkerOptions) -> Self {
        let rpc = opts
            .rpc
            .filter(|o| o.mode != RpcMode::Off)
            .map(|o| RpcStage::new(&dataset, id, o, TablesOn::WriterThread));
        let app = opts
            .app
            .filter(|o| o.on)
            .map(|o| AppStage::new(&dataset, id, o));
        Worker {
            id,
            dataset,
            opts,
            writer: None,
            opened: std::time::Instant::now(),
            published: None,
            spare: None,
            file_seq: 0,
            files: Vec::new(),
            stats: FrameStats::default(),
            rpc,
            rpc_error: None,
            app,
            app_error: None,
            handed: None,
            tap: None,
            rows_lost: 0,
            flow_slices_lost: 0,
            late: false,
        }
    }

    /// From now on the frames given are late ones ([`Worker::frame`]
    /// makes their records only), or again frames as they come.
    pub fn set_late(&mut self, late: bool) {
        self.late = late;
    }

    /// Numbers this worker's next packet file `seq` (and those after it
    /// from there): for records added to a dataset that has files.
    pub fn set_next_file(&mut self, seq: u32) {
        if self.writer.is_none() {
            self.file_seq = seq;
        }
    }

    /// Records lost so far with packet files given up (a full disk).
    pub fn rows_lost(&self) -> u64 {
        self.rows_lost
    }

    /// Flows-table slices lost so far with flows files not written.
    pub fn flow_slices_lost(&self) -> u64 {
        self.flow_slices_lost
    }

    /// Closes the open file now (the next frame opens another). On an
    /// error the file is given up and its rows counted in
    /// [`Worker::rows_lost`].
    pub fn close(&mut self) -> Result<(), StoreError> {
        self.close_file()
    }

    /// Keeps each frame's TCP or UDP segment from now on, for
    /// [`Worker::take_segments`].
    pub fn keep_segments(&mut self) {
        self.handed = Some((0, Vec::new()));
    }

    /// The segments of the frames given since the last call, each
    /// naming its frame by its place among them (from 0).
    pub fn take_segments(&mut self) -> Vec<SegmentAt> {
        match self.handed.as_mut() {
            Some((frames, segs)) => {
                *frames = 0;
                std::mem::take(segs)
            }
            None => Vec::new(),
        }
    }

    /// Copies every record from now on to `tap` too.
    pub fn set_tap(&mut self, tap: Box<dyn RecordTap>) {
        self.tap = Some(tap);
    }

    /// Lets the tap hand over what it holds (a few times a second).
    /// Called a few times a second by a live capture: the tap's turn, and
    /// the open file closes once it is [`WorkerOptions::file_every`] old.
    pub fn tick(&mut self) -> Result<(), StoreError> {
        if let Some(t) = self.tap.as_mut() {
            t.tick();
        }
        if self
            .opts
            .file_every
            .is_some_and(|every| self.opened.elapsed() >= every)
            && self.writer.as_ref().is_some_and(|w| w.rows() > 0)
        {
            self.close_file()?;
        }
        Ok(())
    }

    /// Announces each finished packet file to `to` as it closes.
    pub fn publish_to(&mut self, to: Published) {
        self.published = Some(to);
    }

    pub fn id(&self) -> u16 {
        self.id
    }

    /// Parses one frame and writes its record.
    #[inline]
    pub fn frame(&mut self, meta: FrameMeta, bytes: &[u8]) -> Result<(), StoreError> {
        if self
            .writer
            .as_ref()
            .is_some_and(|w| w.rows() >= self.opts.rows_per_file)
        {
            self.close_file()?;
        }
        if self.writer.is_none() {
            self.open_file()?;
        }
        let Some(writer) = self.writer.as_mut() else {
            unreachable!("opened above")
        };
        let (id, stats) = (self.id, &mut self.stats);
        let (rpc, rpc_error) = (&mut self.rpc, &mut self.rpc_error);
        let (tap, handed) = (&mut self.tap, &mut self.handed);
        let (app, app_error) = (&mut self.app, &mut self.app_error);
        let in_order = !self.late;
        // The record is built where the writer keeps it: no copy.
        let pushed = writer.push_with(|rec| {
            rec.ts_ns = meta.ts_ns;
            rec.wire_len = meta.wire_len;
            rec.cap_len = bytes.len() as u32;
            rec.worker = id;
            rec.iface = meta.iface;
            if let Some((file, offset)) = meta.pcap {
                rec.pcap_file = file;
                rec.pcap_offset = offset;
                rec.has |= Has::PCAP;
            }
            let payload = decode(meta.link, bytes, rec);
            stats.add(rec);
            if let Some(t) = tap {
                t.record(rec);
            }
            if let Some((frames, segs)) = handed {
                segs.extend(SegmentAt::new(*frames, rec, payload.clone()));
                *frames += 1;
            }
            if in_order
                && let Some(stage) = app
                && let Some(seg) = SegmentAt::new(0, rec, payload.clone())
                && let Err(e) = stage.segment(&seg.segment(bytes))
            {
                *app = None;
                app_error.get_or_insert(e);
            }
            if in_order
                && let Some(stage) = rpc
                && let Err(e) = stage.decoded(rec, bytes, payload)
            {
                *rpc = None;
                rpc_error.get_or_insert(e);
            }
        });
        if pushed.is_err() {
            // A row group could not be written: the file is not whole, so
            // it goes, with its rows (this frame's among them).
            self.give_up_file();
        }
        pushed
    }

    /// Removes the open file (its `.part`) and counts its rows lost.
    fn give_up_file(&mut self) {
        if let Some(w) = self.writer.take() {
            self.rows_lost += w.rows();
            self.spare = Some(w.discard());
        }
    }

    /// Starts the next packet file now rather than at the next frame (live
    /// capture does this before it starts, so the first frame does not wait
    /// for the writer's buffers).
    pub fn open_file(&mut self) -> Result<(), StoreError> {
        self.close_file()?;
        let (path, rel) = self.dataset.packet_file(self.id, self.file_seq);
        self.file_seq += 1;
        self.opened = std::time::Instant::now();
        self.writer = Some(PacketWriter::create_reusing(
            &path,
            &rel,
            self.opts.writer,
            self.spare.take(),
        )?);
        Ok(())
    }

    fn close_file(&mut self) -> Result<(), StoreError> {
        if let Some(w) = self.writer.take() {
            if w.rows() == 0 {
                // Opened ahead of traffic that never came.
                self.spare = Some(w.discard());
                self.file_seq -= 1;
            } else {
                let rows = w.rows();
                let (finished, buffers) = w.finish_keeping_buffers();
                self.spare = Some(buffers);
                let f = finished.inspect_err(|_| self.rows_lost += rows)?;
                if let Some(p) = &self.published {
                    p.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(f.summary.clone());
                }
                self.files.push(f.summary);
                if let Some((slices, e)) = f.flows_lost {
                    self.flow_slices_lost += slices;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Closes the current file; returns every file written and the counts.
    pub fn finish(mut self) -> Result<WorkerDone, StoreError> {
        self.close_file()?;
        let mut rpc_error = self.rpc_error.map(|e| e.to_string());
        let rpc = match self.rpc.map(RpcStage::finish) {
            Some(Ok(info)) => info,
            Some(Err(e)) => {
                rpc_error.get_or_insert(e.to_string());
                None
            }
            None => None,
        };
        let mut app_error = self.app_error.map(|e| e.to_string());
        let app = match self.app.map(AppStage::finish) {
            Some(Ok(info)) => Some(info),
            Some(Err(e)) => {
                app_error.get_or_insert(e.to_string());
                None
            }
            None => None,
        };
        Ok(WorkerDone {
            files: self.files,
            stats: self.stats,
            rpc,
            rpc_error,
            app,
            app_error,
        })
    }
}
