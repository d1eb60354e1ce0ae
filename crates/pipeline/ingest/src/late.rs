//! Packet records built from the pcap files, after their frames were
//! stored: spans a capture's record threads had no time for, and frames
//! `weir recover` finds with no record after a crash. The records are the
//! ones the frames would have had (the pcap file keeps the frame, its time
//! and its length), made by the same [`Worker`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use pcapio::fetch::PcapFile;
use store::StoreError;

use crate::worker::{FrameMeta, Worker};

/// Why late records could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LateError {
    /// The pcap file could not be read: its frames keep no record.
    #[error("{path}: reading frames to build their records: {message}")]
    Pcap { path: PathBuf, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl LateError {
    fn pcap(path: &Path, message: impl std::fmt::Display) -> LateError {
        LateError::Pcap {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}

/// Opens a pcap file weir wrote, for [`build_span`].
pub fn open_pcap(path: &Path) -> Result<PcapFile, LateError> {
    match PcapFile::open(path) {
        Ok(Some(f)) => Ok(f),
        Ok(None) => Err(LateError::pcap(path, "not a pcap file")),
        Err(e) => Err(LateError::pcap(path, e)),
    }
}

/// Builds into `worker` the records of the frames at `from..to` (record
/// offsets in the pcap stream) of `file`, whose id in the records is
/// `file_id`, at most `most` of them; returns how many were built and
/// where the next frame starts (`to` when the span is done).
pub fn build_span(
    worker: &mut Worker,
    file: &PcapFile,
    path: &Path,
    file_id: u32,
    iface: u16,
    (from, to): (u64, u64),
    most: u64,
) -> Result<(u64, u64), LateError> {
    let mut data = Vec::with_capacity(2048);
    let (mut at, mut built) = (from, 0u64);
    worker.set_late(true);
    let mut step = || -> Result<(), LateError> {
        while at < to && built < most {
            let f = file
                .read_at(at, &mut data)
                .map_err(|e| LateError::pcap(path, e))?;
            let meta = FrameMeta {
                ts_ns: f.ts_ns,
                wire_len: f.wire_len,
                link: file.link,
                iface,
                pcap: Some((file_id, at)),
            };
            built += 1;
            at += pcapio::PCAP_RECORD_HEADER_LEN + data.len() as u64;
            worker.frame(meta, &data)?;
        }
        Ok(())
    };
    let r = step();
    worker.set_late(false);
    r?;
    Ok((built, at))
}

/// The spans of `file` whose frames' offsets are not in `covered`: the
/// frames that have no record. Each span is a run of such frames.
pub fn uncovered_spans(
    file: &PcapFile,
    path: &Path,
    covered: &BTreeSet<u64>,
) -> Result<Vec<(u64, u64, u64)>, LateError> {
    let len = file.stream_len().map_err(|e| LateError::pcap(path, e))?;
    let mut spans: Vec<(u64, u64, u64)> = Vec::new();
    let mut data = Vec::new();
    let mut at = pcapio::PCAP_HEADER_LEN;
    while at + pcapio::PCAP_RECORD_HEADER_LEN <= len {
        file.read_at(at, &mut data)
            .map_err(|e| LateError::pcap(path, e))?;
        let next = at + pcapio::PCAP_RECORD_HEADER_LEN + data.len() as u64;
        if !covered.contains(&at) {
            match spans.last_mut() {
                Some((_, end, n)) if *end == at => {
                    *end = next;
                    *n += 1;
                }
                _ => spans.push((at, next, 1)),
            }
        }
        at = next;
    }
    Ok(spans)
}
