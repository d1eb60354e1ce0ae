//! The stats table: `stats/*.parquet`, one row per second per worker.
//! Loss is data: every counter a capture keeps lands here.
//!
//! Low volume, so it is written with arrow-rs's own writer. Files are short
//! (a new one every `rotate_rows` rows), and the rows not yet in a file are
//! also appended, as they come, to a small journal (`stats/.journal`,
//! one line a row): after a crash `weir recover` turns it into the last
//! file, so every second sampled before the crash is kept.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    Int16Builder, StringBuilder, TimestampNanosecondBuilder, UInt16Builder, UInt32Builder,
    UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::error::StoreError;
use crate::files::create_file;

/// One second of one worker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatsRow {
    /// Start of the second, ns since the epoch.
    pub ts_ns: i64,
    pub worker: u16,
    pub iface: u16,
    /// Frames the worker took from its ring.
    pub frames: u64,
    /// Their bytes on the wire.
    pub bytes: u64,
    /// Frames that reached the socket in the kernel (dropped ones included).
    pub kernel_packets: u64,
    /// Frames the kernel dropped because the ring was full.
    pub kernel_drops: u64,
    /// Times the kernel froze the ring's queue.
    pub kernel_freezes: u64,
    /// Frames staged for the pcap files.
    pub pcap_frames: u64,
    /// Frames the pcap sink dropped (staging memory full).
    pub pcap_drops: u64,
    /// Frames handed to the packet records.
    pub records: u64,
    /// Of those, records not on disk: the disk was full (`--on-full drop`)
    /// or a write failed; counted in the second it became known.
    pub records_drops: u64,
    /// Ring blocks full and waiting for the worker, at the sample.
    pub ring_backlog: u32,
    /// Staging blocks waiting for the pcap writer, at the sample.
    pub pcap_backlog: u32,
    /// Bytes of pcap the writer handled, and the bytes they took on disk
    /// (after compression).
    pub pcap_bytes: u64,
    pub pcap_stored_bytes: u64,
    /// Compression of the writer's latest block: the zstd level, 0 for a
    /// stored (uncompressed) block, 100 for LZ4; null when not compressing.
    pub pcap_level: Option<i16>,
    /// Rows of `weir stack`: one event type's second (the frame counters
    /// above are 0). Null in a capture's rows.
    pub stack: Option<StackCounts>,
    /// The dataset's upload (`--upload`) in this second: on one row a
    /// second (the first worker's), null on the others.
    pub upload: Option<UploadSecond>,
}

/// What the uploader did in one second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UploadSecond {
    /// Bytes of files that reached the bucket.
    pub bytes: u64,
    /// Requests that failed (each tried again later).
    pub failures: u64,
    /// Bytes of sealed files not yet in the bucket, at the sample.
    pub backlog_bytes: u64,
    /// From its sealing to its upload, of the last file uploaded so far.
    pub lag_ms: u64,
}

impl UploadSecond {
    /// The second since `prev`, the uploader's figures then (made the
    /// figures now).
    pub fn since(
        prev: &mut util::storage::UploadFigures,
        now: util::storage::UploadFigures,
    ) -> UploadSecond {
        let u = UploadSecond {
            bytes: now.bytes.saturating_sub(prev.bytes),
            failures: now.failures.saturating_sub(prev.failures),
            backlog_bytes: now.backlog_bytes,
            lag_ms: now.lag_ms_last,
        };
        *prev = now;
        u
    }
}

/// What the stack monitor counted of one event type in one second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackCounts {
    /// Index into [`crate::stack::EVENT_NAMES`].
    pub event: u8,
    /// Events delivered to user space.
    pub events: u64,
    /// Events the kernel could not hand over: the ring buffer was full.
    pub lost: u64,
}

impl StatsRow {
    /// The frame counters, in the schema's order (from `frames` to
    /// `records_drops`): one list for the Parquet writer; the journal
    /// writes the first eight, and `records_drops` last (it came later).
    fn counters(&self) -> [u64; 9] {
        [
            self.frames,
            self.bytes,
            self.kernel_packets,
            self.kernel_drops,
            self.kernel_freezes,
            self.pcap_frames,
            self.pcap_drops,
            self.records,
            self.records_drops,
        ]
    }
}

/// The stats table's schema.
pub fn stats_schema() -> SchemaRef {
    let u64f = |n: &str| Field::new(n, DataType::UInt64, false);
    Arc::new(Schema::new(vec![
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())),
            false,
        ),
        Field::new("worker", DataType::UInt16, false),
        Field::new("iface", DataType::UInt16, false),
        u64f("frames"),
        u64f("bytes"),
        u64f("kernel_packets"),
        u64f("kernel_drops"),
        u64f("kernel_freezes"),
        u64f("pcap_frames"),
        u64f("pcap_drops"),
        u64f("records"),
        u64f("records_drops"),
        Field::new("ring_backlog", DataType::UInt32, false),
        Field::new("pcap_backlog", DataType::UInt32, false),
        u64f("pcap_bytes"),
        u64f("pcap_stored_bytes"),
        Field::new("pcap_level", DataType::Int16, true),
        Field::new("stack_event", DataType::Utf8, true),
        Field::new("stack_events", DataType::UInt64, true),
        Field::new("stack_lost", DataType::UInt64, true),
        Field::new("upload_bytes", DataType::UInt64, true),
        Field::new("upload_failures", DataType::UInt64, true),
        Field::new("upload_backlog_bytes", DataType::UInt64, true),
        Field::new("upload_lag_ms", DataType::UInt64, true),
    ]))
}

/// Writes stats rows into rotated Parquet files.
pub struct StatsWriter {
    dir: PathBuf,
    /// File names are `PREFIX-NNNNN.parquet`, the journal `.PREFIX.journal`
    /// (`stats` keeps its historical `.journal`), so that a capture and a
    /// stack monitor can write into one dataset side by side.
    prefix: &'static str,
    rotate_rows: usize,
    pending: Vec<StatsRow>,
    seq: u32,
    files: Vec<String>,
    journal: Option<File>,
    /// Bytes of whole lines in the journal: a line the disk had no room
    /// for is cut off, so that the next one does not join a torn line.
    journal_len: u64,
}

/// The journal of rows not yet in a file.
pub const JOURNAL: &str = ".journal";

/// The file-name prefixes of stats writers, and their journals.
const WRITERS: [(&str, &str); 2] = [("stats", JOURNAL), ("stack", ".stack.journal")];

fn journal_name(prefix: &str) -> &'static str {
    WRITERS
        .iter()
        .find(|(p, _)| *p == prefix)
        .map_or(JOURNAL, |(_, j)| j)
}

impl StatsWriter {
    /// Writes into `dir` (`stats-NNNNN.parquet`), a file every `rotate_rows`.
    pub fn new(dir: &Path, rotate_rows: usize) -> Self {
        Self::with_prefix(dir, rotate_rows, "stats")
    }

    /// As [`StatsWriter::new`], for the stack monitor's rows
    /// (`stack-NNNNN.parquet`): `prefix` is "stats" or "stack".
    pub fn with_prefix(dir: &Path, rotate_rows: usize, prefix: &'static str) -> Self {
        StatsWriter {
            prefix,
            dir: dir.to_path_buf(),
            rotate_rows: rotate_rows.max(1),
            pending: Vec::new(),
            seq: 0,
            files: Vec::new(),
            journal: None,
            journal_len: 0,
        }
    }

    /// Adds a row; writes the pending rows as a file once there are
    /// `rotate_rows`. On an error (a full disk) the row is still held, with
    /// the others not yet in a file, for the next flush.
    pub fn push(&mut self, row: StatsRow) -> Result<(), StoreError> {
        self.pending.push(row);
        self.journal_row(&row)?;
        if self.pending.len() >= self.rotate_rows {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the pending rows as one complete file. A file that cannot be
    /// written whole is removed; its rows stay pending.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let name = format!("{}-{:05}.parquet", self.prefix, self.seq);
        let path = self.dir.join(&name);
        let part = self.dir.join(format!(".{name}.part"));
        let written = create_file(&part).and_then(|file| {
            write_rows(file, &self.pending).map_err(|e| StoreError::parquet(&part, e))?;
            std::fs::rename(&part, &path).map_err(|e| StoreError::io(&path, e))
        });
        if let Err(e) = written {
            let _ = std::fs::remove_file(&part);
            return Err(e);
        }
        self.files.push(name);
        self.seq += 1;
        self.pending.clear();
        if let Some(j) = &self.journal {
            j.set_len(0)
                .map_err(|e| StoreError::io(self.dir.join(journal_name(self.prefix)), e))?;
            self.journal_len = 0;
        }
        Ok(())
    }

    /// Rows not yet in a file.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Flushes and returns the files written; when the last flush fails
    /// (a full disk), also the error and the rows lost. Those rows leave
    /// the journal too, so that `weir recover` does not bring back rows
    /// the caller counts as lost.
    pub fn finish_or_give_up(mut self) -> (Vec<String>, Option<(StoreError, u64)>) {
        let failed = self
            .flush()
            .err()
            .map(|e| (e, std::mem::take(&mut self.pending).len() as u64));
        if self.journal.take().is_some() {
            let _ = std::fs::remove_file(self.dir.join(journal_name(self.prefix)));
        }
        (self.files, failed)
    }

    /// Appends a row to the journal (one write, so a crash keeps whole
    /// lines; a torn last line is skipped when read).
    fn journal_row(&mut self, r: &StatsRow) -> Result<(), StoreError> {
        use std::io::Write;
        let path = self.dir.join(journal_name(self.prefix));
        if self.journal.is_none() {
            use std::os::unix::fs::OpenOptionsExt;
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o640)
                .open(&path)
                .map_err(|e| StoreError::io(&path, e))?;
            self.journal_len = f.metadata().map_err(|e| StoreError::io(&path, e))?.len();
            self.journal = Some(f);
        }
        let counters = r.counters()[..8]
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        let stack = match r.stack {
            Some(s) => format!("{} {} {}", s.event, s.events, s.lost),
            None => "- - -".to_string(),
        };
        let upload = match r.upload {
            Some(u) => format!(
                "{} {} {} {}",
                u.bytes, u.failures, u.backlog_bytes, u.lag_ms
            ),
            None => "- - - -".to_string(),
        };
        let line = format!(
            "{} {} {} {counters} {} {} {} {} {} {stack} {} {upload}\n",
            r.ts_ns,
            r.worker,
            r.iface,
            r.ring_backlog,
            r.pcap_backlog,
            r.pcap_bytes,
            r.pcap_stored_bytes,
            r.pcap_level.map_or("-".to_string(), |l| l.to_string()),
            r.records_drops,
        );
        if let Some(j) = &mut self.journal {
            if let Err(e) = j.write_all(line.as_bytes()) {
                let _ = j.set_len(self.journal_len);
                return Err(StoreError::io(&path, e));
            }
            self.journal_len += line.len() as u64;
        }
        Ok(())
    }

    /// Flushes and returns the names of the files written.
    pub fn finish(mut self) -> Result<Vec<String>, StoreError> {
        self.flush()?;
        if self.journal.take().is_some() {
            let _ = std::fs::remove_file(self.dir.join(journal_name(self.prefix)));
        }
        Ok(self.files)
    }
}

/// Writes `rows` as one stats file at `path`: under a hidden name first,
/// synced, then renamed into place (`weir collect`).
pub fn write_stats_file(path: &Path, rows: &[StatsRow]) -> Result<(), StoreError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let part = path.with_file_name(format!(".{name}.part"));
    let file = create_file(&part)?;
    let copy = file.try_clone().map_err(|e| StoreError::io(&part, e))?;
    write_rows(file, rows).map_err(|e| StoreError::parquet(&part, e))?;
    copy.sync_data().map_err(|e| StoreError::io(&part, e))?;
    std::fs::rename(&part, path).map_err(|e| StoreError::io(path, e))
}

/// After a crash: each journal's rows (those not yet in a file) are written
/// as one more stats file, and the journal removed. Returns the new files'
/// names.
pub fn recover_journal(dir: &Path) -> Result<Vec<String>, StoreError> {
    let mut names = Vec::new();
    for (prefix, journal) in WRITERS {
        let path = dir.join(journal);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(StoreError::io(&path, e)),
        };
        let rows: Vec<StatsRow> = text.lines().filter_map(parse_journal_line).collect();
        if !rows.is_empty() {
            let mut seq = 0;
            while dir.join(format!("{prefix}-{seq:05}.parquet")).exists() {
                seq += 1;
            }
            let n = format!("{prefix}-{seq:05}.parquet");
            let part = dir.join(format!(".{n}.part"));
            let file = create_file(&part)?;
            write_rows(file, &rows).map_err(|e| StoreError::parquet(&part, e))?;
            std::fs::rename(&part, dir.join(&n)).map_err(|e| StoreError::io(&part, e))?;
            names.push(n);
        }
        std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
    }
    Ok(names)
}

fn parse_journal_line(line: &str) -> Option<StatsRow> {
    let f: Vec<&str> = line.split(' ').collect();
    // 16 fields before the stack counters were added, 19 with them, 20
    // since records_drops, 24 since the upload's.
    if ![16, 19, 20, 24].contains(&f.len()) {
        return None;
    }
    let u = |i: usize| f[i].parse::<u64>().ok();
    Some(StatsRow {
        ts_ns: f[0].parse().ok()?,
        worker: f[1].parse().ok()?,
        iface: f[2].parse().ok()?,
        frames: u(3)?,
        bytes: u(4)?,
        kernel_packets: u(5)?,
        kernel_drops: u(6)?,
        kernel_freezes: u(7)?,
        pcap_frames: u(8)?,
        pcap_drops: u(9)?,
        records: u(10)?,
        ring_backlog: f[11].parse().ok()?,
        pcap_backlog: f[12].parse().ok()?,
        pcap_bytes: u(13)?,
        pcap_stored_bytes: u(14)?,
        pcap_level: match f[15] {
            "-" => None,
            l => Some(l.parse().ok()?),
        },
        stack: match f.get(16..19) {
            Some([e, n, l]) if *e != "-" => Some(StackCounts {
                event: e.parse().ok()?,
                events: n.parse().ok()?,
                lost: l.parse().ok()?,
            }),
            _ => None,
        },
        records_drops: match f.get(19) {
            Some(n) => n.parse().ok()?,
            None => 0,
        },
        upload: match f.get(20..24) {
            Some([b, n, q, l]) if *b != "-" => Some(UploadSecond {
                bytes: b.parse().ok()?,
                failures: n.parse().ok()?,
                backlog_bytes: q.parse().ok()?,
                lag_ms: l.parse().ok()?,
            }),
            _ => None,
        },
    })
}

fn write_rows(file: File, rows: &[StatsRow]) -> parquet::errors::Result<()> {
    let n = rows.len();
    let mut ts = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut worker = UInt16Builder::with_capacity(n);
    let mut iface = UInt16Builder::with_capacity(n);
    let mut u64s: Vec<UInt64Builder> = (0..9).map(|_| UInt64Builder::with_capacity(n)).collect();
    let mut ring = UInt32Builder::with_capacity(n);
    let mut pcap = UInt32Builder::with_capacity(n);
    let mut pcap_bytes = UInt64Builder::with_capacity(n);
    let mut pcap_stored = UInt64Builder::with_capacity(n);
    let mut level = Int16Builder::with_capacity(n);
    let mut stack_event = StringBuilder::with_capacity(n, 0);
    let mut stack_events = UInt64Builder::with_capacity(n);
    let mut stack_lost = UInt64Builder::with_capacity(n);
    let mut upload: Vec<UInt64Builder> = (0..4).map(|_| UInt64Builder::with_capacity(n)).collect();
    for r in rows {
        let u = r
            .upload
            .map(|u| [u.bytes, u.failures, u.backlog_bytes, u.lag_ms]);
        for (k, b) in upload.iter_mut().enumerate() {
            b.append_option(u.map(|u| u[k]));
        }
        let name = |s: &StackCounts| {
            crate::stack::EVENT_NAMES
                .get(s.event as usize)
                .copied()
                .unwrap_or("unknown")
        };
        stack_event.append_option(r.stack.as_ref().map(name));
        stack_events.append_option(r.stack.map(|s| s.events));
        stack_lost.append_option(r.stack.map(|s| s.lost));
        pcap_bytes.append_value(r.pcap_bytes);
        pcap_stored.append_value(r.pcap_stored_bytes);
        level.append_option(r.pcap_level);
        ts.append_value(r.ts_ns);
        worker.append_value(r.worker);
        iface.append_value(r.iface);
        for (b, v) in u64s.iter_mut().zip(r.counters()) {
            b.append_value(v);
        }
        ring.append_value(r.ring_backlog);
        pcap.append_value(r.pcap_backlog);
    }
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(ts.finish()),
        Arc::new(worker.finish()),
        Arc::new(iface.finish()),
    ];
    cols.extend(u64s.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    cols.push(Arc::new(ring.finish()));
    cols.push(Arc::new(pcap.finish()));
    cols.push(Arc::new(pcap_bytes.finish()));
    cols.push(Arc::new(pcap_stored.finish()));
    cols.push(Arc::new(level.finish()));
    cols.push(Arc::new(stack_event.finish()));
    cols.push(Arc::new(stack_events.finish()));
    cols.push(Arc::new(stack_lost.finish()));
    cols.extend(upload.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef));
    let batch = RecordBatch::try_new(stats_schema(), cols)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_created_by(format!("weir version {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![
            KeyValue::new("weir.version".into(), env!("CARGO_PKG_VERSION").to_string()),
            KeyValue::new("weir.table".into(), "stats".to_string()),
        ]))
        .build();
    let mut w = ArrowWriter::try_new(file, stats_schema(), Some(props))?;
    w.write(&batch)?;
    let file = w.into_inner()?;
    file.sync_data()?;
    Ok(())
}

/// Every row of one stats file.
pub fn read_stats_file(path: &Path) -> Result<Vec<StatsRow>, StoreError> {
    let file = File::open(path).map_err(|e| StoreError::io(path, e))?;
    stats_rows(path, file)
}

/// [`read_stats_file`] of a file read whole from elsewhere (`name`, for
/// messages: its URL).
pub fn stats_rows_in(name: &str, data: bytes::Bytes) -> Result<Vec<StatsRow>, StoreError> {
    stats_rows(Path::new(name), data)
}

fn stats_rows<R: parquet::file::reader::ChunkReader + 'static>(
    path: &Path,
    file: R,
) -> Result<Vec<StatsRow>, StoreError> {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{TimestampNanosecondType, UInt16Type, UInt32Type, UInt64Type};

    let (reader, _) = crate::read::read_batches(path, file, &[], None)?;
    let bad = |what: &str| StoreError::Invalid {
        path: path.to_path_buf(),
        message: format!("not a stats table: {what}"),
    };
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| bad(&e.to_string()))?;
        let col = |n: &str| batch.column_by_name(n).ok_or_else(|| bad(n));
        let ts = col("ts")?
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or_else(|| bad("ts"))?;
        let u16c = |n: &str| {
            col(n)?
                .as_primitive_opt::<UInt16Type>()
                .ok_or_else(|| bad(n))
                .cloned()
        };
        let u32c = |n: &str| {
            col(n)?
                .as_primitive_opt::<UInt32Type>()
                .ok_or_else(|| bad(n))
                .cloned()
        };
        let u64c = |n: &str| {
            col(n)?
                .as_primitive_opt::<UInt64Type>()
                .ok_or_else(|| bad(n))
                .cloned()
        };
        let (worker, iface) = (u16c("worker")?, u16c("iface")?);
        let names = [
            "frames",
            "bytes",
            "kernel_packets",
            "kernel_drops",
            "kernel_freezes",
            "pcap_frames",
            "pcap_drops",
            "records",
        ];
        let cols = names
            .iter()
            .map(|n| u64c(n))
            .collect::<Result<Vec<_>, _>>()?;
        let (ring, pcap) = (u32c("ring_backlog")?, u32c("pcap_backlog")?);
        // Columns added later: absent in older files.
        let opt64 = |n: &str| {
            batch
                .column_by_name(n)
                .and_then(|c| c.as_primitive_opt::<UInt64Type>().cloned())
        };
        let (pb, ps) = (opt64("pcap_bytes"), opt64("pcap_stored_bytes"));
        let (se, sn, sl) = (
            batch
                .column_by_name("stack_event")
                .and_then(|c| c.as_string_opt::<i32>().cloned()),
            opt64("stack_events"),
            opt64("stack_lost"),
        );
        let rd = opt64("records_drops");
        let up = [
            "upload_bytes",
            "upload_failures",
            "upload_backlog_bytes",
            "upload_lag_ms",
        ]
        .map(opt64);
        let lv = batch.column_by_name("pcap_level").and_then(|c| {
            c.as_primitive_opt::<arrow_array::types::Int16Type>()
                .cloned()
        });
        for i in 0..batch.num_rows() {
            let v = |k: usize| cols[k].value(i);
            out.push(StatsRow {
                ts_ns: ts.value(i),
                worker: worker.value(i),
                iface: iface.value(i),
                frames: v(0),
                bytes: v(1),
                kernel_packets: v(2),
                kernel_drops: v(3),
                kernel_freezes: v(4),
                pcap_frames: v(5),
                pcap_drops: v(6),
                records: v(7),
                records_drops: rd.as_ref().map_or(0, |c| c.value(i)),
                ring_backlog: ring.value(i),
                pcap_backlog: pcap.value(i),
                pcap_bytes: pb.as_ref().map_or(0, |c| c.value(i)),
                pcap_stored_bytes: ps.as_ref().map_or(0, |c| c.value(i)),
                pcap_level: lv
                    .as_ref()
                    .and_then(|c| (!c.is_null(i)).then(|| c.value(i))),
                stack: match (&se, &sn, &sl) {
                    (Some(e), Some(n), Some(l)) if !e.is_null(i) => Some(StackCounts {
                        event: crate::stack::EVENT_NAMES
                            .iter()
                            .position(|x| *x == e.value(i))
                            .unwrap_or(u8::MAX as usize) as u8,
                        events: n.value(i),
                        lost: l.value(i),
                    }),
                    _ => None,
                },
                upload: match &up {
                    [Some(b), Some(n), Some(q), Some(l)] if !b.is_null(i) => Some(UploadSecond {
                        bytes: b.value(i),
                        failures: n.value(i),
                        backlog_bytes: q.value(i),
                        lag_ms: l.value(i),
                    }),
                    _ => None,
                },
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_through_rotated_files() {
        let dir = std::env::temp_dir().join(format!("weir-stats-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = StatsWriter::new(&dir, 3);
        let rows: Vec<StatsRow> = (0..7u64)
            .map(|i| StatsRow {
                ts_ns: 1_000_000_000 * i as i64,
                worker: (i % 2) as u16,
                frames: i * 10,
                kernel_drops: i,
                pcap_backlog: i as u32,
                pcap_stored_bytes: i * 3,
                records_drops: i * 2,
                pcap_level: (i % 3 != 0).then_some(i as i16 - 4),
                stack: (i == 5).then_some(StackCounts {
                    event: 4,
                    events: 9,
                    lost: 2,
                }),
                upload: (i % 2 == 0).then_some(UploadSecond {
                    bytes: i << 20,
                    failures: i / 3,
                    backlog_bytes: 7 * i,
                    lag_ms: 40 + i,
                }),
                ..Default::default()
            })
            .collect();
        for r in &rows {
            w.push(*r).unwrap();
        }
        let files = w.finish().unwrap();
        assert_eq!(files.len(), 3);
        let back: Vec<StatsRow> = files
            .iter()
            .flat_map(|f| read_stats_file(&dir.join(f)).unwrap())
            .collect();
        assert_eq!(back, rows);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn rows_not_yet_in_a_file_survive_a_crash_in_the_journal() {
        let dir = std::env::temp_dir().join(format!("weir-stats-j-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = StatsWriter::new(&dir, 4);
        let rows: Vec<StatsRow> = (0..6u64)
            .map(|i| StatsRow {
                ts_ns: i as i64,
                frames: i,
                records_drops: i % 3,
                pcap_level: (i == 5).then_some(-3),
                stack: (i == 4).then_some(StackCounts {
                    event: 1,
                    events: 7,
                    lost: 3,
                }),
                upload: (i == 5).then_some(UploadSecond {
                    bytes: 5 << 20,
                    failures: 1,
                    backlog_bytes: 12,
                    lag_ms: 900,
                }),
                ..Default::default()
            })
            .collect();
        for r in &rows {
            w.push(*r).unwrap();
        }
        // A crash: the writer vanishes without finish(); a torn line too.
        std::mem::forget(w);
        std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join(JOURNAL))
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"17 0 0 3"))
            .unwrap();
        let names = recover_journal(&dir).unwrap();
        assert_eq!(names, ["stats-00001.parquet"]);
        let name = &names[0];
        let mut back = read_stats_file(&dir.join("stats-00000.parquet")).unwrap();
        back.extend(read_stats_file(&dir.join(name)).unwrap());
        assert_eq!(back, rows);
        assert!(!dir.join(JOURNAL).exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
