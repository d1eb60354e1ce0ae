//! One parse worker and its sinks.

use store::{
    Dataset, PacketFileSummary, PacketWriter, PacketWriterOptions, RowBuffers, StoreError,
};
use wire::{Has, LinkType, decode};

use crate::app::{AppOptions, AppStage};
use crate::rpc::{RpcGate, RpcMode, RpcOptions, RpcStage, SegmentAt, SegmentGate, TablesOn};
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
    /// [`Worker::take_segments`] (counted) and the segments of them its
    /// source's stages may look at.
    handed: Option<Handed>,
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

/// A conversion worker's segments on their way to its source's stages.
struct Handed {
    /// Frames since the last [`Worker::take_segments`].
    frames: u32,
    segments: Vec<SegmentAt>,
    gate: SegmentGate,
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

    /// Keeps each frame's TCP or UDP segment that `gate` lets through
    /// from now on, for [`Worker::take_segments`].
    pub fn keep_segments(&mut self, gate: SegmentGate) {
        self.handed = Some(Handed {
            frames: 0,
            segments: Vec::new(),
            gate,
        });
    }

    /// The segments of the frames given since the last call, each
    /// naming its frame by its place among them (from 0).
    pub fn take_segments(&mut self) -> Vec<SegmentAt> {
        match self.handed.as_mut() {
            Some(h) => {
                h.frames = 0;
                std::mem::take(&mut h.segments)
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
            if let Some(h) = handed {
                let seg = SegmentAt::wanted(h.frames, rec, bytes, payload.clone(), h.gate);
                h.segments.extend(seg);
                h.frames += 1;
            }
            if !in_order || (app.is_none() && rpc.is_none()) {
                return;
            }
            // The segment is made only when a stage may look at it: most
            // frames are UDP to ports neither decodes.
            let gate = SegmentGate {
                rpc: rpc.as_ref().map_or(RpcGate::Off, RpcStage::gate),
                app: app.is_some(),
            };
            let Some(seg) = SegmentAt::wanted(0, rec, bytes, payload, gate) else {
                return;
            };
            let seg = seg.segment(bytes);
            if let Some(stage) = app
                && let Err(e) = stage.segment(&seg)
            {
                *app = None;
                app_error.get_or_insert(e);
            }
            if let Some(stage) = rpc
                && let Err(e) = stage.segment(&seg)
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

#[cfg(test)]
mod tests {
    use super::*;
    use wire::build::TransportSpec;

    fn frame(transport: TransportSpec, payload: &[u8]) -> Vec<u8> {
        crate::tests::frame(1, 2, transport, payload)
    }

    fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        frame(TransportSpec::Udp { sport, dport }, payload)
    }

    fn tcp(sport: u16, dport: u16, flags: u16, payload: &[u8]) -> Vec<u8> {
        let (seq, ack, window) = (1000, 0, 512);
        frame(
            TransportSpec::Tcp {
                sport,
                dport,
                seq,
                ack,
                flags,
                window,
            },
            payload,
        )
    }

    fn meta(i: usize, bytes: &[u8]) -> FrameMeta {
        FrameMeta {
            ts_ns: 1_000_000_000 + i as i64 * 1_000,
            wire_len: bytes.len() as u32,
            link: LinkType::ETHERNET,
            iface: 0,
            pcap: None,
        }
    }

    fn dataset(name: &str) -> (std::path::PathBuf, Dataset) {
        let root = std::env::temp_dir().join(format!("weir-worker-{name}-{}", std::process::id()));
        let ds = Dataset::create(&root, true).expect("dataset");
        (root, ds)
    }

    /// A DNS exchange among frames no stage decodes: the app stage still
    /// gets it; an `auto` RPC stage that saw no portmapper or NFS frame
    /// never starts.
    #[test]
    fn the_stages_see_what_they_decode_among_other_traffic() {
        let (root, ds) = dataset("stages");
        let opts = WorkerOptions {
            rpc: Some(RpcOptions::default()),
            app: Some(AppOptions::default()),
            ..Default::default()
        };
        let mut w = Worker::new(0, ds, opts);
        let q = app::dns::build(3, 0x0100, ("a.example", 1, 1), &[]);
        let r = app::dns::build(3, 0x8180, ("a.example", 1, 1), &[(1, 60, &[192, 0, 2, 7])]);
        let mut frames: Vec<Vec<u8>> = (0..1000).map(|_| udp(40000, 9000, &[0; 18])).collect();
        frames.insert(400, udp(33333, 53, &q));
        // The response comes back from the server.
        let back = TransportSpec::Udp {
            sport: 53,
            dport: 33333,
        };
        frames.insert(700, crate::tests::frame(2, 1, back, &r));
        for (i, f) in frames.iter().enumerate() {
            w.frame(meta(i, f), f).expect("frame");
        }
        let done = w.finish().expect("finish");
        assert_eq!(done.stats.frames, 1002);
        let app = done.app.expect("the app stage ran");
        assert_eq!((app.dns, app.counters["dns_matched"]), (1, 1));
        assert!(
            done.rpc.is_none(),
            "no portmapper or NFS frame: not started"
        );
        let _ = std::fs::remove_dir_all(root);
    }

    /// A conversion's worker hands on only the segments its source's
    /// stages may look at: not UDP to other ports with other payloads.
    #[test]
    fn a_conversion_worker_hands_on_only_what_its_stages_may_look_at() {
        let q = app::dns::build(3, 0x0100, ("a.example", 1, 1), &[]);
        let mut call = Vec::new();
        for word in [7u32, 0, 2, 100005, 3, 1, 0, 0, 0, 0] {
            call.extend_from_slice(&word.to_be_bytes());
        }
        let frames = [
            udp(40000, 9000, &[0; 18]),
            udp(33333, 5353, &q),
            tcp(40000, 8443, 0x002, &[]),
            udp(700, 2049, &[0; 18]),
            udp(800, 20048, &call),
            udp(40000, 9000, b"not a message at all"),
        ];
        for (gate, want) in [
            (
                SegmentGate::for_source(RpcMode::Auto, true),
                vec![1, 2, 3, 4],
            ),
            (SegmentGate::for_source(RpcMode::Off, true), vec![1, 2]),
            (SegmentGate::for_source(RpcMode::On, false), vec![2, 4]),
        ] {
            let (root, ds) = dataset("gate");
            let mut w = Worker::new(0, ds, WorkerOptions::default());
            w.keep_segments(gate);
            for (i, f) in frames.iter().enumerate() {
                w.frame(meta(i, f), f).expect("frame");
            }
            let got: Vec<u32> = w.take_segments().iter().map(|s| s.frame).collect();
            assert_eq!(got, want, "{gate:?}");
            w.finish().expect("finish");
            let _ = std::fs::remove_dir_all(root);
        }
    }
}
