//! The capture's manifest: before any frame, while it runs (the files
//! finished so far), and the entries for its pcap files.

use std::sync::atomic::Ordering;

use pcapio::retention::RemovedFile;
use pcapio::spool::PcapFileInfo;
use store::manifest::{
    CaptureInfo, InterfaceEntry, Manifest, PcapFileEntry, RemovedPcapEntry, RunInfo, ShardInfo,
    TimeSpan,
};
use wire::LinkType;

use super::LiveOptions;
use super::sampler::Watched;
use crate::stats::FrameStats;

/// The manifest's entries for pcap files, by id.
pub(super) fn pcap_entries(files: &[PcapFileInfo]) -> Vec<PcapFileEntry> {
    let mut pcap: Vec<PcapFileEntry> = files
        .iter()
        .map(|f| PcapFileEntry {
            id: f.id,
            path: format!("{}/{}", store::dataset::PCAP_DIR, f.name),
            frames: f.frames,
            bytes: f.bytes,
            ts_first: f.ts_first,
            ts_last: f.ts_last,
            stored_bytes: (!f.methods.is_empty()).then_some(f.stored_bytes),
            methods: f.methods.clone(),
            digest: f.digest,
        })
        .collect();
    pcap.sort_by_key(|f| f.id);
    pcap
}

/// The manifest's entries for pcap files retention removed.
pub(super) fn removed_entries(removed: &[RemovedFile]) -> Vec<RemovedPcapEntry> {
    removed
        .iter()
        .map(|f| RemovedPcapEntry {
            id: f.id,
            path: format!("{}/{}", store::dataset::PCAP_DIR, f.name),
            frames: f.frames,
            stored_bytes: f.stored_bytes,
            ts_first: f.ts_first,
            ts_last: f.ts_last,
            reason: f.reason.clone(),
            overwritten_by: f
                .overwritten_by
                .as_ref()
                .map(|n| format!("{}/{n}", store::dataset::PCAP_DIR)),
        })
        .collect()
}

/// The manifest of a running capture: its finished files, and the time
/// span and frames they hold (still `ended_by: running`).
pub(super) fn running_manifest(
    mut m: Manifest,
    mut packets: Vec<store::PacketFileSummary>,
    pcap: &[PcapFileInfo],
    removed: &[RemovedFile],
) -> Manifest {
    packets.sort_by(|a, b| a.path.cmp(&b.path));
    let gone: std::collections::HashSet<u32> = removed.iter().map(|f| f.id).collect();
    let kept: Vec<PcapFileInfo> = pcap
        .iter()
        .filter(|f| !gone.contains(&f.id))
        .cloned()
        .collect();
    let mut lo = packets.iter().filter_map(|f| f.ts_min).min();
    let mut hi = packets.iter().filter_map(|f| f.ts_max).max();
    for f in &kept {
        lo = lo.into_iter().chain(f.ts_first).min();
        hi = hi.into_iter().chain(f.ts_last).max();
    }
    m.time_span = lo.zip(hi).map(|(a, b)| TimeSpan::new(a, b));
    let rows: u64 = packets.iter().map(|f| f.rows).sum();
    let frames: u64 = kept.iter().map(|f| f.frames).sum();
    m.counts.frames = if packets.is_empty() { frames } else { rows };
    m.files.packets = packets;
    m.files.pcap = pcap_entries(&kept);
    m.files.pcap_removed = removed_entries(removed);
    m
}

/// The manifest of a capture before anything is known of its traffic:
/// written when the capture starts (ended_by "running"), so that a dataset
/// whose capture was killed still says how it was made, and completed at
/// the end (or by `weir recover`).
pub(super) fn base_manifest(opts: &LiveOptions, libpcap: &str, workers: u32) -> Manifest {
    Manifest {
        interfaces: opts
            .interfaces
            .iter()
            .map(|i| {
                let link = i.link_type().unwrap_or(LinkType::ETHERNET);
                InterfaceEntry {
                    source: 0,
                    link_type: link.0,
                    link_name: link.name().to_string(),
                    name: Some(i.name.clone()),
                    description: None,
                    snaplen: opts.scope.snaplen,
                    ts_units_per_sec: 1_000_000_000,
                    dropped: None,
                    received: None,
                }
            })
            .collect(),
        run: Some(RunInfo {
            command: opts.command.clone(),
            workers,
            elapsed_s: 0.0,
            frames_per_s: 0.0,
        }),
        capture: Some(CaptureInfo {
            workers_per_interface: opts.workers_per_iface as u32,
            snaplen: opts.scope.snaplen,
            filter: opts.scope.filter.clone(),
            ring_bytes: opts.ring.total() as u64,
            promiscuous: opts.scope.promiscuous,
            libpcap: libpcap.to_string(),
            sinks: [
                opts.pcap.as_ref().map(|_| "pcap"),
                opts.records.then_some("records"),
                Some("stats"),
            ]
            .into_iter()
            .flatten()
            .map(str::to_string)
            .collect(),
            rotate_bytes: opts.pcap.as_ref().and_then(|p| p.rotate_bytes),
            rotate_seconds: opts
                .pcap
                .as_ref()
                .and_then(|p| p.rotate)
                .map(|d| d.as_secs_f64()),
            ended_by: "running".to_string(),
            compress: opts.pcap.as_ref().map(|p| p.keep.codec.to_string()),
            direct_io: false,
            max_disk_bytes: opts.pcap.as_ref().and_then(|p| p.keep.max_disk),
            fanout: (opts.workers_per_iface > 1).then(|| opts.scope.fanout.describe().to_string()),
            shard: opts.scope.shard.map(|s| ShardInfo {
                index: s.index,
                count: s.count,
                hash: "weir flow hash v1 (wire::flow); share = flow_hash % count, frames \
                       without a flow hash in share 0"
                    .to_string(),
            }),
            max_age_seconds: opts
                .pcap
                .as_ref()
                .and_then(|p| p.keep.max_age)
                .map(|d| d.as_secs_f64()),
        }),
        ..Manifest::new("capture", "kernel", opts.worker.writer.order)
    }
}

pub(super) fn totals_bytes(watched: &[Watched]) -> u64 {
    (watched.iter())
        .map(|w| w.counters.bytes.load(Ordering::Relaxed))
        .sum()
}

pub(super) fn span(st: &FrameStats, pcap: &[PcapFileInfo]) -> (Option<i64>, Option<i64>) {
    let mut first = (st.frames > 0).then_some(st.ts_min);
    let mut last = (st.frames > 0).then_some(st.ts_max);
    for f in pcap {
        if let Some(t) = f.ts_first {
            first = Some(first.map_or(t, |x| x.min(t)));
        }
        if let Some(t) = f.ts_last {
            last = Some(last.map_or(t, |x| x.max(t)));
        }
    }
    (first, last)
}

/// How many files the running manifest last listed.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Announced {
    pub(super) packets: usize,
    pub(super) pcap: usize,
    pub(super) removed: usize,
    /// Records put off and built since.
    pub(super) late: Option<store::manifest::LateRecords>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcap(id: u32, frames: u64, first: i64, last: i64) -> PcapFileInfo {
        PcapFileInfo {
            id,
            name: format!("w000-{id:05}.pcap"),
            frames,
            bytes: 24 + frames * 80,
            ts_first: Some(first),
            ts_last: Some(last),
            ..Default::default()
        }
    }

    #[test]
    fn a_running_manifest_lists_the_pcap_files_kept_and_their_span() {
        let base = Manifest::new("capture", "kernel", store::RowOrder::Flow);
        let files = [pcap(2, 30, 5_000, 6_000), pcap(1, 10, 1_000, 2_000)];
        let removed = [RemovedFile {
            id: 1,
            name: "w000-00001.pcap".into(),
            frames: 10,
            reason: "max-disk".into(),
            ts_first: Some(1_000),
            ts_last: Some(2_000),
            ..Default::default()
        }];
        let m = running_manifest(base, Vec::new(), &files, &removed);
        let kept: Vec<u32> = m.files.pcap.iter().map(|f| f.id).collect();
        assert_eq!(kept, [2]);
        assert_eq!(m.files.pcap[0].path, "pcap/w000-00002.pcap");
        assert_eq!(m.files.pcap_removed.len(), 1);
        assert_eq!(m.files.pcap_removed[0].path, "pcap/w000-00001.pcap");
        // Without records, the frames are the kept pcap files'.
        assert_eq!(m.counts.frames, 30);
        let span = m.time_span.expect("a time span");
        assert_eq!((span.first_ns, span.last_ns), (5_000, 6_000));
    }

    #[test]
    fn pcap_entries_are_in_id_order() {
        let e = pcap_entries(&[pcap(7, 1, 0, 0), pcap(3, 2, 0, 0), pcap(5, 3, 0, 0)]);
        let ids: Vec<u32> = e.iter().map(|f| f.id).collect();
        assert_eq!(ids, [3, 5, 7]);
        assert!(e.iter().all(|f| f.path.starts_with("pcap/")));
    }

    #[test]
    fn the_span_takes_records_and_pcap_files_together() {
        let st = FrameStats::default();
        assert_eq!(span(&st, &[]), (None, None));
        let files = [pcap(1, 3, 100, 900), pcap(2, 3, 50, 400)];
        assert_eq!(span(&st, &files), (Some(50), Some(900)));
    }
}
