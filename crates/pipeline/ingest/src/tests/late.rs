//! Late records: the records built from a pcap file after its frames were
//! stored are the ones the frames got in time; the spans without records
//! are found; a file that cannot be read is named.

use std::collections::BTreeSet;
use std::path::Path;

use pcapio::PCAP_HEADER_LEN;
use store::Dataset;
use wire::{LinkType, PacketRecord};

use super::{Scratch, records_of, traffic, write_pcap};
use crate::late::{build_span, open_pcap, uncovered_spans};
use crate::worker::{FrameMeta, Worker, WorkerOptions};

fn worker(root: &Path) -> Worker {
    Worker::new(
        0,
        Dataset::create(root, false).unwrap(),
        WorkerOptions::default(),
    )
}

fn by_time(mut v: Vec<PacketRecord>) -> Vec<PacketRecord> {
    v.sort_by_key(|r| r.ts_ns);
    v
}

/// A capture's worker makes each frame's record as it comes, naming its
/// place in the pcap file; records built later from that file, in spans
/// of at most 150 frames, are the same records, field for field (frames
/// cut by the snaplen too), and the counts say how many each span built
/// and where the next begins.
#[test]
fn records_built_late_equal_those_built_in_time() {
    let s = Scratch::new("ingest-late-equal");
    let frames = traffic(400);
    let path = s.join("w000-00000.pcap");
    let offsets = write_pcap(&path, &frames, 200);
    let len = std::fs::metadata(&path).unwrap().len();

    let in_time_root = s.join("in-time");
    let mut w = worker(&in_time_root);
    for ((ts, f), &at) in frames.iter().zip(&offsets) {
        let meta = FrameMeta {
            ts_ns: *ts,
            wire_len: f.len() as u32,
            link: LinkType::ETHERNET,
            iface: 1,
            pcap: Some((5, at)),
        };
        w.frame(meta, &f[..f.len().min(200)]).unwrap();
    }
    let in_time = w.finish().unwrap();

    let late_root = s.join("late");
    let mut w = worker(&late_root);
    let file = open_pcap(&path).unwrap();
    let mut at = PCAP_HEADER_LEN;
    let mut spans = Vec::new();
    while at < len {
        let (built, next) = build_span(&mut w, &file, &path, 5, 1, (at, len), 150).unwrap();
        spans.push((built, next));
        at = next;
    }
    assert_eq!(
        spans,
        [(150, offsets[150]), (150, offsets[300]), (100, len)]
    );
    let late = w.finish().unwrap();

    let a = by_time(records_of(&in_time_root, &in_time.files));
    let b = by_time(records_of(&late_root, &late.files));
    assert_eq!((a.len(), b.len()), (400, 400));
    assert!(
        a.iter().any(|r| r.cap_len < r.wire_len),
        "some frames were cut"
    );
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "frame {i}");
    }
    assert_eq!(in_time.stats.counts(), late.stats.counts());
}

/// The frames whose offsets have no record, as runs: (first offset, end,
/// frames).
#[test]
fn uncovered_spans_are_the_runs_of_frames_without_a_record() {
    let s = Scratch::new("ingest-late-spans");
    let path = s.join("p.pcap");
    let offsets = write_pcap(&path, &traffic(120), 65_535);
    let len = std::fs::metadata(&path).unwrap().len();
    let file = open_pcap(&path).unwrap();

    let all: BTreeSet<u64> = offsets.iter().copied().collect();
    assert!(uncovered_spans(&file, &path, &all).unwrap().is_empty());
    let none = BTreeSet::new();
    assert_eq!(
        uncovered_spans(&file, &path, &none).unwrap(),
        [(PCAP_HEADER_LEN, len, 120)]
    );
    let mut some = all.clone();
    for i in (50..60).chain([100]).chain(117..120) {
        some.remove(&offsets[i]);
    }
    assert_eq!(
        uncovered_spans(&file, &path, &some).unwrap(),
        [
            (offsets[50], offsets[60], 10),
            (offsets[100], offsets[101], 1),
            (offsets[117], len, 3)
        ]
    );
}

/// A file that is not a pcap file, one that is missing, and one cut
/// inside a frame: each error names the file; the frames before the cut
/// got their records.
#[test]
fn a_pcap_file_that_cannot_be_read_is_an_error_naming_it() {
    let s = Scratch::new("ingest-late-bad");
    let text = s.join("notes.pcap");
    std::fs::write(&text, "not a capture at all, but long enough to be read").unwrap();
    let missing = s.join("missing.pcap");
    for p in [&text, &missing] {
        let e = open_pcap(p)
            .err()
            .expect("not a readable pcap file")
            .to_string();
        assert!(e.starts_with(&p.display().to_string()), "{e}");
        assert!(e.contains("reading frames to build their records"), "{e}");
    }

    let path = s.join("cut.pcap");
    let offsets = write_pcap(&path, &traffic(20), 65_535);
    let len = std::fs::metadata(&path).unwrap().len();
    // Cut inside the data of the tenth frame.
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(offsets[9] + 16 + 10).unwrap();
    let file = open_pcap(&path).unwrap();
    let e = uncovered_spans(&file, &path, &BTreeSet::new())
        .expect_err("the file is cut")
        .to_string();
    assert!(e.starts_with(&path.display().to_string()), "{e}");

    let root = s.join("ds");
    let mut w = worker(&root);
    let e = build_span(&mut w, &file, &path, 0, 0, (PCAP_HEADER_LEN, len), 100)
        .expect_err("the file is cut")
        .to_string();
    assert!(e.starts_with(&path.display().to_string()), "{e}");
    assert_eq!(w.stats.frames, 9, "the frames before the cut");
    assert_eq!(
        w.finish()
            .unwrap()
            .files
            .iter()
            .map(|f| f.rows)
            .sum::<u64>(),
        9
    );
}
