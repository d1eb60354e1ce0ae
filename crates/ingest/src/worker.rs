//! One parse worker and its sinks.

use store::{
    Dataset, PacketFileSummary, PacketWriter, PacketWriterOptions, RowBuffers, StoreError,
};
use wire::{Has, LinkType, decode};

use crate::stats::FrameStats;

/// Knobs of a [`Worker`].
#[derive(Clone, Copy, Debug)]
pub struct WorkerOptions {
    pub writer: PacketWriterOptions,
    /// Start a new packet file after this many rows.
    pub rows_per_file: u64,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            writer: PacketWriterOptions::default(),
            rows_per_file: 32 << 20,
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
    /// Row buffers of the last finished file, for the next.
    spare: Option<RowBuffers>,
    file_seq: u32,
    files: Vec<PacketFileSummary>,
    pub stats: FrameStats,
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
        Worker {
            id,
            dataset,
            opts,
            writer: None,
            spare: None,
            file_seq: 0,
            files: Vec::new(),
            stats: FrameStats::default(),
        }
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
        // The record is built where the writer keeps it: no copy.
        writer.push_with(|rec| {
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
            decode(meta.link, bytes, rec);
            stats.add(rec);
        })
    }

    /// Starts the next packet file now rather than at the next frame (live
    /// capture does this before it starts, so the first frame does not wait
    /// for the writer's buffers).
    pub fn open_file(&mut self) -> Result<(), StoreError> {
        self.close_file()?;
        let (path, rel) = self.dataset.packet_file(self.id, self.file_seq);
        self.file_seq += 1;
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
                let (summary, buffers) = w.finish_keeping_buffers()?;
                self.files.push(summary);
                self.spare = Some(buffers);
            }
        }
        Ok(())
    }

    /// Closes the current file; returns every file written and the counts.
    pub fn finish(mut self) -> Result<(Vec<PacketFileSummary>, FrameStats), StoreError> {
        self.close_file()?;
        Ok((self.files, self.stats))
    }
}
