//! `convert`: pcap files made here, converted; what the dataset and its
//! manifest say, and what damaged and missing sources do.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;

use store::Dataset;
use wire::PacketRecord;

use super::{Scratch, T0, records_of, traffic, write_pcap};
use crate::convert::{ConvertError, ConvertOptions, ConvertReport, Input, Progress, convert};

fn run(inputs: &[&Path], root: &Path, opts: &ConvertOptions) -> (ConvertReport, Progress) {
    let ds = Dataset::create(root, false).unwrap();
    let inputs: Vec<Input> = inputs
        .iter()
        .map(|p| Input::Path(p.to_path_buf()))
        .collect();
    let progress = Progress::default();
    let report = convert(&inputs, &ds, opts, &progress).unwrap();
    (report, progress)
}

fn opts(workers: usize) -> ConvertOptions {
    ConvertOptions {
        workers,
        command: "weir convert (a test)".into(),
        ..Default::default()
    }
}

/// The records by time, without the worker that made each.
fn by_time(recs: &[PacketRecord]) -> Vec<PacketRecord> {
    let mut v: Vec<PacketRecord> = recs
        .iter()
        .map(|r| {
            let mut r = *r;
            r.worker = 0;
            r
        })
        .collect();
    v.sort_by_key(|r| r.ts_ns);
    v
}

/// One trace, by one worker and by three: the same records, each flow on
/// one worker; the manifest counts the frames, bytes and time span the
/// trace holds, names the source as it was read, and is the one on disk;
/// the progress counters saw every frame and record.
#[test]
fn a_trace_converts_into_records_and_a_manifest_that_adds_them_up() {
    let s = Scratch::new("ingest-convert-one");
    let pcap = s.join("a.pcap");
    let frames = traffic(3_000);
    write_pcap(&pcap, &frames, 65_535);
    let file_len = std::fs::metadata(&pcap).unwrap().len();
    let wire: u64 = frames.iter().map(|(_, f)| f.len() as u64).sum();

    let mut seen = Vec::new();
    for workers in [1, 3] {
        let root = s.join(&format!("ds{workers}"));
        let (report, progress) = run(&[&pcap], &root, &opts(workers));
        assert!(
            report.source_errors.is_empty(),
            "{:?}",
            report.source_errors
        );
        let m = &report.manifest;
        assert_eq!(m.kind, "convert");
        assert_eq!(m.sources.len(), 1);
        let src = &m.sources[0];
        assert_eq!(src.path, pcap.display().to_string());
        assert_eq!(
            (src.container.as_str(), src.compression.as_str()),
            ("pcap", "none")
        );
        assert_eq!(
            (src.frames, src.bytes, src.error.as_deref()),
            (3_000, file_len, None)
        );
        assert_eq!(src.interfaces, [0]);
        assert_eq!(m.interfaces.len(), 1);
        let i = &m.interfaces[0];
        assert_eq!((i.source, i.link_type, i.snaplen), (0, 1, 65_535));
        assert_eq!((m.counts.frames, m.counts.wire_bytes), (3_000, wire));
        assert_eq!(m.counts.captured_bytes, wire, "nothing was cut");
        assert_eq!(
            m.counts.protocols["ipv4/udp"] + m.counts.protocols["ipv4/tcp"],
            3_000
        );
        let span = m.time_span.as_ref().expect("a time span");
        assert_eq!((span.first_ns, span.last_ns), (T0, T0 + 2_999_000));
        let run = m.run.as_ref().expect("the run's figures");
        assert_eq!(
            (run.workers, run.command.as_str()),
            (workers as u32, "weir convert (a test)")
        );
        assert_eq!(m.files.packets.iter().map(|f| f.rows).sum::<u64>(), 3_000);

        let on_disk = Dataset::open(&root).unwrap().read_manifest().unwrap();
        assert_eq!(on_disk.counts, m.counts);
        let files = |m: &store::Manifest| -> Vec<(String, u64)> {
            m.files
                .packets
                .iter()
                .map(|f| (f.path.clone(), f.rows))
                .collect()
        };
        assert_eq!(files(&on_disk), files(m));

        assert_eq!(progress.frames.load(Ordering::Relaxed), 3_000);
        // The bytes of the records: the file header was read on opening.
        let records = file_len - pcapio::PCAP_HEADER_LEN;
        assert_eq!(progress.bytes.load(Ordering::Relaxed), records);
        assert_eq!(progress.files_done.load(Ordering::Relaxed), 1);

        let recs = records_of(&root, &m.files.packets);
        let mut owner: HashMap<u32, u16> = HashMap::new();
        for r in &recs {
            let w = *owner.entry(r.flow_hash).or_insert(r.worker);
            assert_eq!(w, r.worker, "flow {:08x} on two workers", r.flow_hash);
        }
        let recs = by_time(&recs);
        let times: Vec<i64> = recs.iter().map(|r| r.ts_ns).collect();
        assert_eq!(times, frames.iter().map(|(t, _)| *t).collect::<Vec<_>>());
        seen.push(recs);
    }
    assert!(
        seen[0] == seen[1],
        "one worker and three made other records"
    );
}

/// With `index_sources`, each record names its source and the offset of
/// its frame there: the frame at that offset is the one of its time. Each
/// source's interface gets a number of its own, and its records carry it.
#[test]
fn index_sources_points_each_record_at_its_frame() {
    let s = Scratch::new("ingest-convert-index");
    let (a, b) = (s.join("a.pcap"), s.join("b.pcap"));
    let fa = traffic(500);
    // The second source an hour later, so times say which source.
    let fb: Vec<(i64, Vec<u8>)> = traffic(800)
        .into_iter()
        .map(|(t, f)| (t + 3_600_000_000_000, f))
        .collect();
    let offsets = [write_pcap(&a, &fa, 65_535), write_pcap(&b, &fb, 65_535)];
    let root = s.join("ds");
    let opts = ConvertOptions {
        index_sources: true,
        ..opts(2)
    };
    let (report, _) = run(&[&a, &b], &root, &opts);
    let m = &report.manifest;
    assert_eq!(m.interfaces.len(), 2);
    for (k, src) in m.sources.iter().enumerate() {
        assert_eq!(src.interfaces.len(), 1, "source {k}");
        assert_eq!(m.interfaces[src.interfaces[0] as usize].source, k as u32);
    }

    let mut at: HashMap<(u32, u64), i64> = HashMap::new();
    for (src, (frames, offs)) in [(&fa, &offsets[0]), (&fb, &offsets[1])]
        .into_iter()
        .enumerate()
    {
        for ((t, _), o) in frames.iter().zip(offs) {
            at.insert((src as u32, *o), *t);
        }
    }
    let recs = records_of(&root, &m.files.packets);
    assert_eq!(recs.len(), 1_300);
    for r in &recs {
        assert!(r.has & wire::Has::PCAP != 0);
        let place = (r.pcap_file, r.pcap_offset);
        let t = at
            .remove(&place)
            .unwrap_or_else(|| panic!("{place:?}: no frame, or named twice"));
        assert_eq!(t, r.ts_ns, "{place:?}");
        let iface = m.sources[r.pcap_file as usize].interfaces[0];
        assert_eq!(r.iface, iface, "source {}'s interface", r.pcap_file);
    }
    assert!(at.is_empty(), "frames without a record: {}", at.len());
}

/// Damaged and missing sources do not stop the others: what a damaged
/// one held before the damage is kept, and each error names its file and
/// what is wrong, in the report and in the manifest's source.
#[test]
fn damaged_or_missing_sources_keep_what_came_before_and_are_named() {
    let s = Scratch::new("ingest-convert-damaged");
    let frames = traffic(300);
    let good = s.join("good.pcap");
    let offsets = write_pcap(&good, &frames, 65_535);
    let bytes = std::fs::read(&good).unwrap();
    // Cut inside the last record.
    let cut = s.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    // The 101st record's captured length a lie no trace tells.
    let bogus = s.join("bogus.pcap");
    let mut lie = bytes.clone();
    let at = offsets[100] as usize;
    lie[at + 8..at + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    std::fs::write(&bogus, &lie).unwrap();
    let missing = s.join("missing.pcap");

    let root = s.join("ds");
    let (report, _) = run(&[&good, &cut, &bogus, &missing], &root, &opts(2));
    let m = &report.manifest;
    let frames_of: Vec<u64> = m.sources.iter().map(|s| s.frames).collect();
    assert_eq!(frames_of, [300, 299, 100, 0]);
    assert_eq!(m.counts.frames, 699);
    assert_eq!(records_of(&root, &m.files.packets).len(), 699);
    assert_eq!(m.sources[0].error, None);
    for (i, words) in [
        (1, ["cut.pcap", "ends inside a pcap record"]),
        (2, ["bogus.pcap", "exceeds the limit"]),
        (3, ["missing.pcap", "No such file"]),
    ] {
        let e = m.sources[i]
            .error
            .as_deref()
            .unwrap_or_else(|| panic!("source {i}: no error"));
        let reported = report
            .source_errors
            .iter()
            .filter(|r| r.as_str() == e)
            .count();
        assert_eq!(reported, 1, "{e:?} not once in {:?}", report.source_errors);
        for w in words {
            assert!(e.contains(w), "{w:?} not in {e:?}");
        }
    }
    assert_eq!(report.source_errors.len(), 3);
}

/// Nothing to convert is an error that says what to give, and leaves the
/// dataset without a manifest.
#[test]
fn no_inputs_is_an_error_that_says_what_to_give() {
    let s = Scratch::new("ingest-convert-none");
    let root = s.join("ds");
    let ds = Dataset::create(&root, false).unwrap();
    let e = convert(&[], &ds, &opts(1), &Progress::default()).expect_err("no inputs");
    assert!(matches!(e, ConvertError::NoInputs));
    assert!(
        e.to_string().contains("give one or more pcap/pcapng files"),
        "{e}"
    );
    assert!(!root.join(store::dataset::MANIFEST).exists());
}
