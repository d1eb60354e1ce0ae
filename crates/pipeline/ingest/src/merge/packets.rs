//! The packet files' interleave: the inputs' row groups through a heap
//! in time order, rows out when no unread row group can hold an earlier
//! one, duplicates left out, into the merged packet files.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;

use store::read::{RowGroupSpan, read_row_group};
use store::{Dataset, PacketWriter, StoreError};
use wire::{Has, PacketRecord};

use super::dedup::Dedup;
use super::{Input, InputCounts, MergeOptions, MergedPackets, Numbering};
use crate::FrameStats;

/// A row group waiting to be read, in the order of the earliest row it
/// can hold.
struct Queued<'a> {
    input: usize,
    path: &'a Path,
    span: RowGroupSpan,
}

/// A run's next row in the heap; ordered by time, then input, then run.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Head {
    ts: i64,
    input: u16,
    run: usize,
}

/// The packet records of all inputs, in time order, duplicates dropped,
/// renumbered and written.
pub(super) fn merge_packets(
    sources: &[Input],
    numbering: &Numbering,
    offsets: &[i64],
    out: &Dataset,
    opts: &MergeOptions,
) -> Result<MergedPackets, StoreError> {
    let mut dedup = opts.dedup_window_ns.map(|w| Dedup::new(w, offsets));
    let mut per_input = vec![InputCounts::default(); sources.len()];
    let mut stats = FrameStats::default();
    let mut writer = PacketOut::new(out, opts);
    let mut queue: Vec<Queued> = sources
        .iter()
        .enumerate()
        .flat_map(|(input, s)| {
            s.chunks.iter().map(move |c| Queued {
                input,
                path: &c.path,
                span: c.span,
            })
        })
        .collect();
    queue.sort_by_key(|q| (q.span.ts_min, q.input));
    let mut runs = Runs::default();
    let mut next = 0;
    loop {
        // No unread row group holds a row earlier than its own minimum.
        let horizon = queue.get(next).map_or(i64::MAX, |q| q.span.ts_min);
        while let Some((i, rec)) = runs.pop_before(horizon) {
            per_input[i].frames += 1;
            if let Some(d) = dedup.as_mut()
                && d.is_duplicate(rec, i)
            {
                per_input[i].duplicates += 1;
            } else {
                rec.iface = (rec.iface as usize + numbering.iface_base[i]) as u16;
                if rec.has & Has::PCAP != 0 {
                    rec.pcap_file = (rec.pcap_file as u64 + numbering.pcap_base[i]) as u32;
                }
                stats.add(rec);
                writer.push(rec)?;
            }
        }
        let Some(q) = queue.get(next) else {
            break;
        };
        next += 1;
        runs.load(q)?;
    }
    Ok(MergedPackets {
        files: writer.finish()?,
        stats,
        per_input,
    })
}

/// One sorted run per row group read; the heap holds each run's next
/// row, so it is only as big as the number of runs that overlap.
#[derive(Default)]
struct Runs {
    runs: Vec<Run>,
    free: Vec<usize>,
    heap: BinaryHeap<Reverse<Head>>,
}

impl Runs {
    /// The earliest row of all runs, with its input, if it is earlier than
    /// `horizon`.
    fn pop_before(&mut self, horizon: i64) -> Option<(usize, &mut PacketRecord)> {
        let &Reverse(head) = self.heap.peek()?;
        if head.ts >= horizon {
            return None;
        }
        self.heap.pop();
        let r = &mut self.runs[head.run];
        let at = r.order[r.pos] as usize;
        r.pos += 1;
        if let Some(&o) = r.order.get(r.pos) {
            self.heap.push(Reverse(Head {
                ts: r.recs[o as usize].ts_ns,
                ..head
            }));
        }
        if r.pos == r.order.len() {
            // Its rows stay until the slot is loaded again, after this
            // one is used.
            self.free.push(head.run);
        }
        Some((head.input as usize, &mut r.recs[at]))
    }

    /// Reads a row group into a free run and puts its first row in the
    /// heap.
    fn load(&mut self, q: &Queued) -> Result<(), StoreError> {
        let slot = match self.free.pop() {
            Some(slot) => slot,
            None => {
                self.runs.push(Run::default());
                self.runs.len() - 1
            }
        };
        let r = &mut self.runs[slot];
        r.recs.clear();
        read_row_group(q.path, q.span.index, &mut r.recs)?;
        r.order.clear();
        r.order.extend(0..r.recs.len() as u32);
        let recs = &r.recs;
        r.order.sort_by_key(|&o| recs[o as usize].ts_ns);
        r.pos = 0;
        match r.order.first() {
            Some(&o) => self.heap.push(Reverse(Head {
                ts: r.recs[o as usize].ts_ns,
                input: q.input as u16,
                run: slot,
            })),
            None => self.free.push(slot),
        }
        Ok(())
    }
}

/// The rows of one row group, and their order by time.
#[derive(Default)]
struct Run {
    recs: Vec<PacketRecord>,
    order: Vec<u32>,
    pos: usize,
}

/// The merged packet files, a new one every `file_rows` rows.
struct PacketOut<'a> {
    out: &'a Dataset,
    opts: &'a MergeOptions,
    current: Option<PacketWriter>,
    done: Vec<store::PacketFileSummary>,
}

impl<'a> PacketOut<'a> {
    fn new(out: &'a Dataset, opts: &'a MergeOptions) -> Self {
        PacketOut {
            out,
            opts,
            current: None,
            done: Vec::new(),
        }
    }

    fn push(&mut self, rec: &PacketRecord) -> Result<(), StoreError> {
        if self
            .current
            .as_ref()
            .is_some_and(|w| w.rows() >= self.opts.file_rows.max(1))
        {
            self.close()?;
        }
        let w = match self.current.as_mut() {
            Some(w) => w,
            None => {
                let (path, rel) = self.out.packet_file(0, self.done.len() as u32);
                self.current
                    .insert(PacketWriter::create(&path, &rel, self.opts.writer)?)
            }
        };
        w.push(rec)
    }

    fn close(&mut self) -> Result<(), StoreError> {
        if let Some(w) = self.current.take() {
            self.done.push(w.finish()?);
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<store::PacketFileSummary>, StoreError> {
        self.close()?;
        Ok(self.done)
    }
}
