//! The thread that puts the records in time order, decodes them and writes
//! the stack table, on idle CPU time.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use stack::event::{Decoder, RawEvent};
use stack::order::Reorder;
use stack::{CHUNK_BYTES, Chunk, StackError};
use store::stack::StackWriter;

use crate::output::Output;
use crate::{RecordError, StackOptions};

/// How far behind the newest complete read the writer holds records back
/// to put the CPUs' rings in time order: a program stamps its record just
/// after reserving it, so one still being filled during a read is at most
/// this much older than the read.
const REORDER_SLACK_NS: u64 = 2_000_000;

/// What the writer thread did.
pub(crate) struct Written {
    pub(crate) files: Vec<String>,
    pub(crate) span: Option<(i64, i64)>,
}

/// The thread that puts records in time order, decodes them and writes
/// the stack table.
pub(crate) struct WriterThread {
    handle: JoinHandle<Result<Written, store::StoreError>>,
    /// Sockets its decoder remembers, for the live display.
    pub(crate) sockets: Arc<AtomicUsize>,
}

/// The reader's ends of the channels to the writer thread.
pub(crate) struct ToWriter {
    /// Chunks of records go this way...
    pub(crate) chunks: mpsc::SyncSender<Chunk>,
    /// ... and come back emptied, to be filled again.
    pub(crate) free: mpsc::Receiver<Vec<u8>>,
}

/// What the writer thread works with.
struct WriterJob {
    dir: PathBuf,
    rotate_rows: u64,
    clock_offset_ns: i64,
    chunks: mpsc::Receiver<Chunk>,
    free: mpsc::SyncSender<Vec<u8>>,
    sockets: Arc<AtomicUsize>,
}

impl WriterThread {
    /// Starts the writer; returns it with the ends the reader hands chunks
    /// to and takes emptied ones back from.
    pub(crate) fn start(
        out: &Output,
        opts: &StackOptions,
    ) -> Result<(WriterThread, ToWriter), StackError> {
        let slots = (opts.buffer_bytes / CHUNK_BYTES as u64).clamp(2, 1 << 16) as usize;
        let (to_writer, from_reader) = mpsc::sync_channel::<Chunk>(slots);
        let (free_tx, free_rx) = mpsc::sync_channel::<Vec<u8>>(slots);
        let sockets = Arc::new(AtomicUsize::new(0));
        let job = WriterJob {
            dir: out.stack_dir.clone(),
            rotate_rows: opts.rotate_rows,
            clock_offset_ns: out.clock_offset_ns,
            chunks: from_reader,
            free: free_tx,
            sockets: sockets.clone(),
        };
        let handle = std::thread::Builder::new()
            .name("weir-stack-writer".into())
            .spawn(move || write_records(job))
            .map_err(|e| StackError::io(&out.stack_dir, e))?;
        let ends = ToWriter {
            chunks: to_writer,
            free: free_rx,
        };
        Ok((WriterThread { handle, sockets }, ends))
    }

    pub(crate) fn join(self) -> Result<Written, RecordError> {
        match self.handle.join() {
            Ok(r) => Ok(r?),
            Err(_) => Err(StackError::Setup(
                "the stack writer thread panicked; this is a bug in weir, please report it".into(),
            )
            .into()),
        }
    }
}

/// Puts the calling thread in the SCHED_IDLE class: it runs only when a
/// CPU has nothing else to do.
fn idle_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler on the calling thread (0) with a valid
    // parameter block.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        // SAFETY: setpriority on the calling thread.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
    }
}

/// The writer thread: puts records in time order, decodes them and writes
/// the stack table.
fn write_records(job: WriterJob) -> Result<Written, store::StoreError> {
    let WriterJob {
        dir,
        rotate_rows,
        clock_offset_ns,
        chunks,
        free,
        sockets,
    } = job;
    idle_priority();
    let mut decoder = Decoder::new(clock_offset_ns);
    let mut w = StackWriter::new(&dir, rotate_rows);
    let mut span: Option<(i64, i64)> = None;
    let mut order = Reorder::default();
    let mut write = |decoder: &mut Decoder, rec: &[u8]| -> Result<(), store::StoreError> {
        let Some(e) = RawEvent::parse(rec) else {
            return Ok(()); // counted by the reader
        };
        let row = decoder.event(&e);
        span = Some(match span {
            None => (row.ts_ns, row.ts_ns),
            Some((a, b)) => (a.min(row.ts_ns), b.max(row.ts_ns)),
        });
        w.push(&row)
    };
    for mut chunk in chunks {
        let until = chunk.complete_ns.saturating_sub(REORDER_SLACK_NS);
        order.push(&chunk.records, until, |rec| write(&mut decoder, rec))?;
        sockets.store(decoder.sockets(), Ordering::Relaxed);
        chunk.records.clear();
        let _ = free.try_send(chunk.records);
    }
    order.push(&[], u64::MAX, |rec| write(&mut decoder, rec))?;
    Ok(Written {
        files: w.finish()?,
        span,
    })
}
