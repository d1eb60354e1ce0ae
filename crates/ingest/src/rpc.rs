//! The RPC stage: packets of one capture or source, in time order, into
//! the dataset's rpc and nfs tables.
//!
//! Calls and replies must meet in one tracker, so the stage sits where a
//! flow's packets arrive in order: in each capture worker (the fanout
//! group's flow hash keeps both directions of a flow on one worker), and
//! in each reader of a conversion (its workers take chunks in any order).

use std::collections::BTreeMap;
use std::ops::Range;

use rpc::{Segment, Tracker, TrackerOptions, Transaction};
use store::manifest::RpcInfo;
use store::rpc::{NFS_DIR, RPC_DIR, RpcWriter};
use store::{Dataset, StoreError};
use wire::{Has, LinkType, PacketRecord, decode};

/// Whether and when the stage runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcMode {
    Off,
    /// From the first frame to or from port 111 (portmapper) or 2049
    /// (NFS) on: the frames before it are not RPC the stage could
    /// place anyway, short of a MOUNT before any NFS or portmap frame.
    Auto,
    /// Every frame.
    On,
}

impl RpcMode {
    pub fn name(self) -> &'static str {
        match self {
            RpcMode::Off => "off",
            RpcMode::Auto => "auto",
            RpcMode::On => "on",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct RpcOptions {
    pub mode: RpcMode,
    pub tracker: TrackerOptions,
}

impl Default for RpcOptions {
    fn default() -> Self {
        RpcOptions {
            mode: RpcMode::Auto,
            tracker: TrackerOptions::default(),
        }
    }
}

/// One tracker and its writer.
pub struct RpcStage {
    opts: RpcOptions,
    /// Running (Auto turns it on at the first NFS or portmapper frame).
    active: bool,
    tracker: Tracker,
    writer: Option<RpcWriter>,
    dataset: Dataset,
    writer_id: u16,
    done: Vec<Transaction>,
}

impl RpcStage {
    /// A stage writing as `writer_id` (unique among the dataset's stages).
    pub fn new(dataset: &Dataset, writer_id: u16, opts: RpcOptions) -> RpcStage {
        RpcStage {
            opts,
            active: opts.mode == RpcMode::On,
            tracker: Tracker::new(opts.tracker),
            writer: None,
            dataset: dataset.clone(),
            writer_id,
            done: Vec::new(),
        }
    }

    /// A frame not decoded yet (a conversion's reader).
    pub fn frame(
        &mut self,
        ts_ns: i64,
        wire_len: u32,
        link: LinkType,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        if self.opts.mode == RpcMode::Off {
            return Ok(());
        }
        let mut rec = PacketRecord::new(ts_ns, wire_len, bytes.len() as u32);
        let payload = decode(link, bytes, &mut rec);
        self.decoded(&rec, bytes, payload)
    }

    /// A frame its caller decoded: `payload` is what [`wire::decode`]
    /// returned for it.
    #[inline]
    pub fn decoded(
        &mut self,
        rec: &PacketRecord,
        bytes: &[u8],
        payload: Range<usize>,
    ) -> Result<(), StoreError> {
        if !rec.has(Has::PORTS | Has::PAYLOAD)
            || !matches!(rec.ip_proto, rpc::track::TCP | rpc::track::UDP)
        {
            return Ok(());
        }
        if !self.active {
            let port = |p: u16| p == 111 || p == 2049;
            if self.opts.mode == RpcMode::Off || !(port(rec.src_port) || port(rec.dst_port)) {
                return Ok(());
            }
            self.active = true;
        }
        let seg = Segment {
            ts_ns: rec.ts_ns,
            src: rec.ip_src,
            dst: rec.ip_dst,
            src_port: rec.src_port,
            dst_port: rec.dst_port,
            proto: rec.ip_proto,
            tcp_seq: rec.tcp_seq,
            tcp_flags: rec.tcp_flags,
            payload: bytes.get(payload).unwrap_or(&[]),
            payload_wire: rec.payload_len,
        };
        self.tracker.segment(&seg, &mut self.done);
        self.flush()
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        if self.done.is_empty() {
            return Ok(());
        }
        if self.writer.is_none() {
            self.dataset.subdir(RPC_DIR)?;
            self.dataset.subdir(NFS_DIR)?;
            self.writer = Some(RpcWriter::new(self.dataset.root(), self.writer_id, 1 << 22));
        }
        if let Some(w) = self.writer.as_mut() {
            for t in self.done.drain(..) {
                w.push(&t)?;
            }
        }
        Ok(())
    }

    /// Ends the stage: open calls are written as unanswered. `None` if
    /// it never ran.
    pub fn finish(mut self) -> Result<Option<RpcInfo>, StoreError> {
        if !self.active {
            return Ok(None);
        }
        self.tracker.finish(&mut self.done);
        self.flush()?;
        let (rpc_files, nfs_files) = match self.writer.take() {
            Some(w) => w.finish()?,
            None => (Vec::new(), Vec::new()),
        };
        let c = self.tracker.counters();
        let counters: BTreeMap<String, u64> = [
            ("messages", c.messages),
            ("calls", c.calls),
            ("replies", c.replies),
            ("matched", c.matched),
            ("calls_without_reply", c.calls_without_reply),
            ("replies_without_call", c.replies_without_call),
            ("retransmitted_calls", c.retransmitted_calls),
            ("gaps", c.gaps),
            ("gap_bytes", c.gap_bytes),
            ("messages_with_gap", c.messages_with_gap),
            ("resyncs", c.resyncs),
            ("malformed", c.malformed),
            ("long_messages", c.long_messages),
            ("unfinished", c.unfinished),
            ("streams_not_rpc", c.streams_not_rpc),
            ("streams_over_limit", c.streams_over_limit),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        Ok(Some(RpcInfo {
            mode: self.opts.mode.name().to_string(),
            call_timeout_s: self.opts.tracker.call_timeout_ns as f64 / 1e9,
            transactions: c.matched + c.calls_without_reply + c.replies_without_call,
            counters,
            rpc_files,
            nfs_files,
        }))
    }
}
