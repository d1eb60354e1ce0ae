//! The spool end to end: staging, the writer, rotation, rings, the hand-on.

use super::*;
use crate::seekable::SeekableFile;
use crate::{ReaderOptions, TraceReader};
use std::io::Read;
use std::path::Path;
use std::time::Duration;

fn opts(dir: &Path) -> SpoolOptions {
    SpoolOptions {
        dir: dir.to_path_buf(),
        prefix: "w000".into(),
        single_name: None,
        link: LinkType::ETHERNET,
        snaplen: 100,
        rotate_bytes: Some(10_000),
        rotate_ns: Some(1_000_000_000),
        block_bytes: 4096,
        blocks: 8,
        first_file_id: 7,
        codec: Codec::None,
        direct: false,
        on_full: OnFull::Stop,
        retention: None,
        hand_on: None,
    }
}

/// Every staged frame reaches the reader once: in a block handed on
/// (at the offset `append` gave it) or in a span it missed, which
/// holds exactly the frames left out. Blocks the reader drops go back
/// to the pool.
#[test]
fn hands_on_written_blocks_and_names_what_the_reader_missed() {
    let dir = std::env::temp_dir().join(format!("weir-spool-handon-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (hand_on, rx) = HandOn::new(2);
    let mut o = opts(&dir);
    o.hand_on = Some(hand_on);
    let (mut s, writer) = spool(o).unwrap();
    let mut placed = Vec::new();
    for i in 0..300u32 {
        let frame: Vec<u8> = (0..150).map(|b| (b * 3 + i) as u8).collect();
        let ts = 1_000_000_000 + i as i64 * 1_000_000;
        while s.backlog() > 4 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        placed.push((s.append(ts, 150 + i, &frame).expect("staged"), ts, frame));
    }
    s.finish();
    let report = writer.join().unwrap();
    assert!(report.error.is_none());
    // The reader read nothing while the frames were staged: it holds
    // two blocks, and missed the rest.
    let mut seen = std::collections::BTreeMap::new();
    let (mut blocks, mut missed) = (Vec::new(), Vec::new());
    for m in rx.try_iter() {
        match m {
            Staged::Block(b) => {
                for f in b.frames() {
                    seen.insert(
                        (b.file_id, f.offset),
                        (f.ts_ns, f.wire_len, f.data.to_vec()),
                    );
                }
                blocks.push(b);
            }
            Staged::Missed(span) => missed.push(span),
        }
    }
    assert_eq!(blocks.len(), 2, "held blocks");
    let in_blocks: u64 = blocks.iter().map(|b| b.frames).sum();
    assert_eq!(in_blocks, seen.len() as u64);
    let missed_frames: u64 = missed.iter().map(|m| m.frames).sum();
    assert_eq!(in_blocks + missed_frames, 300);
    for ((id, offset), ts, frame) in &placed {
        let i = ts - 1_000_000_000;
        match seen.get(&(*id, *offset)) {
            Some((t, wire, data)) => {
                assert_eq!((t, *wire as i64), (ts, 150 + i / 1_000_000));
                assert_eq!(&data[..], &frame[..100]);
            }
            None => assert!(
                missed
                    .iter()
                    .any(|m| m.file_id == *id && (m.from..m.to).contains(offset)),
                "frame at {id}:{offset} neither handed on nor missed"
            ),
        }
    }
    // The spans are where the frames are in the files.
    for m in &missed {
        let info = report.files.iter().find(|f| f.id == m.file_id).unwrap();
        let bytes = std::fs::read(dir.join(&info.name)).unwrap();
        let mut at = m.from as usize;
        let mut n = 0;
        while at < m.to as usize {
            at += 16 + u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            n += 1;
        }
        assert_eq!((at as u64, n), (m.to, m.frames));
    }
    drop(blocks);
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `--compress auto`, a reader holding blocks counts as a backlog:
/// the writer compresses hard while the reader keeps up and stores
/// blocks once it holds all it may, giving the core back to it.
#[test]
fn a_reader_falling_behind_makes_auto_compression_give_way() {
    let dir = std::env::temp_dir().join(format!("weir-spool-auto-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (hand_on, rx) = HandOn::new(4);
    let mut o = opts(&dir);
    o.hand_on = Some(hand_on);
    o.codec = Codec::Auto;
    o.rotate_bytes = None;
    o.rotate_ns = None;
    // A pool so large that the writer's own queue stays on the first
    // rung: what moves the ladder is the reader.
    o.blocks = 1024;
    let (mut s, writer) = spool(o).unwrap();
    for i in 0..2000u32 {
        let frame: Vec<u8> = (0..100).map(|b| (b * 7 + i) as u8).collect();
        // (The blocks the reader holds count in the backlog.)
        while s.backlog() > 5 {
            std::thread::sleep(Duration::from_millis(1));
        }
        s.append(1_000_000_000 + i as i64, 100, &frame)
            .expect("staged");
    }
    s.finish();
    let report = writer.join().unwrap();
    assert!(report.error.is_none());
    let methods = &report.files[0].methods;
    assert!(
        methods.get("zstd:6").is_some_and(|n| *n >= 1),
        "{methods:?}"
    );
    assert!(
        methods.get("stored").is_some_and(|n| *n >= 20),
        "{methods:?}"
    );
    let held = rx
        .try_iter()
        .filter(|m| matches!(m, Staged::Block(_)))
        .count();
    assert_eq!(held, 4);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn rotates_and_points_records_at_their_frames() {
    let dir = std::env::temp_dir().join(format!("weir-spool-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (mut s, writer) = spool(opts(&dir)).unwrap();
    let mut placed = Vec::new();
    for i in 0..500u32 {
        let frame: Vec<u8> = (0..150).map(|b| (b + i) as u8).collect();
        let ts = 1_000_000_000 + i as i64 * 5_000_000; // 200 frames a second
        while s.backlog() > 6 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        placed.push((ts, s.append(ts, 150, &frame).expect("staged"), frame));
    }
    s.finish();
    let report = writer.join().unwrap();
    assert!(report.error.is_none());
    assert!(
        report.files.len() >= 5,
        "rotated by size: {} files",
        report.files.len()
    );
    assert_eq!(report.files.iter().map(|f| f.frames).sum::<u64>(), 500);
    assert!(report.files.iter().all(|f| f.bytes <= 10_000));
    for (ts, (id, offset), frame) in &placed {
        let info = report.files.iter().find(|f| f.id == *id).unwrap();
        let bytes = std::fs::read(dir.join(&info.name)).unwrap();
        let at = *offset as usize;
        let cap = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        assert_eq!(cap, 100, "snap length");
        let sec = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as i64;
        let ns = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as i64;
        assert_eq!(sec * 1_000_000_000 + ns, *ts);
        assert_eq!(&bytes[at + 16..at + 16 + cap], &frame[..100]);
    }
    // Every file reads back whole with weir's own reader.
    for f in &report.files {
        let mut r = TraceReader::open(dir.join(&f.name), ReaderOptions::default()).unwrap();
        let mut n = 0;
        while let Some(c) = r.next_chunk().unwrap() {
            n += c.frames.len() as u64;
        }
        assert_eq!(n, f.frames);
    }
    assert!(
        std::fs::read_dir(&dir).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".part"))
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// With a size limit the files form a ring: once it is full every new
/// file is an old one written over in place (the same inodes, no file
/// ever created again), each ends exactly at its own frames, and the
/// files overwritten are accounted as removed, naming their successor.
#[test]
fn a_full_ring_writes_over_its_oldest_file_in_place() {
    use std::os::unix::fs::DirEntryExt;
    for codec in [Codec::None, Codec::Zstd(1)] {
        let dir = std::env::temp_dir().join(format!(
            "weir-spool-ring-{}-{}",
            std::process::id(),
            codec.to_string().replace(':', "")
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let retention = Arc::new(Retention::new(Some(256 << 10), None));
        let mut o = opts(&dir);
        o.snaplen = 65535;
        o.codec = codec;
        o.rotate_bytes = Some(64 << 10);
        o.block_bytes = 16 << 10;
        o.retention = Some(retention.clone());
        let (mut s, writer) = spool(o).unwrap();
        // Inodes as the directory lists them (no stat: the writer renames
        // files meanwhile).
        let inodes = || -> std::collections::BTreeSet<u64> {
            std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .filter(|e| !e.file_name().to_string_lossy().ends_with(".overwrites"))
                .map(|e| e.ino())
                .collect()
        };
        // The ring's files: what the directory held over the first
        // reuses (a listing may miss a file being renamed).
        let mut ring: Option<std::collections::BTreeSet<u64>> = None;
        let mut t = 1_000_000_000i64;
        for i in 0..40_000u32 {
            // Content that differs per frame, so compression keeps the
            // files near their rotation size.
            let frame: Vec<u8> = (0..200u32).map(|b| (b * 31 + i * 7) as u8).collect();
            t += 1_000;
            while s.backlog() > 2 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            s.append(t, 200, &frame).expect("staged");
            let reused = retention.removed().0.len();
            if (2..6).contains(&reused) {
                ring.get_or_insert_with(Default::default).extend(inodes());
            }
        }
        s.finish();
        let report = writer.join().unwrap();
        assert!(report.error.is_none(), "{codec}: {:?}", report.error);
        let ring = ring.expect("the ring filled");
        let now = inodes();
        assert!(
            now.is_subset(&ring),
            "{codec}: files written after the ring filled are its old ones: {now:?} vs {ring:?}"
        );
        let (removed, errors) = retention.removed();
        assert!(errors.is_empty());
        assert!(removed.len() > 20, "{codec}: {} removed", removed.len());
        let overwritten = removed
            .iter()
            .filter(|f| f.overwritten_by.is_some())
            .count();
        assert_eq!(
            overwritten,
            removed.len(),
            "{codec}: every removal was a reuse"
        );
        // What is kept is exactly its frames: no old tail, no marker.
        let kept: Vec<_> = report
            .files
            .iter()
            .filter(|f| !removed.iter().any(|r| r.id == f.id))
            .collect();
        assert!(!kept.is_empty());
        for f in &kept {
            let path = dir.join(&f.name);
            assert_eq!(std::fs::metadata(&path).unwrap().len(), f.stored_bytes);
            let scan = crate::repair::scan_pcap(&path).unwrap();
            assert!(!scan.torn(), "{codec}: {}", f.name);
            assert_eq!(scan.frames, f.frames, "{codec}: {}", f.name);
            assert_eq!((scan.ts_first, scan.ts_last), (f.ts_first, f.ts_last));
        }
        let total: u64 = kept.iter().map(|f| f.frames).sum::<u64>()
            + removed.iter().map(|f| f.frames).sum::<u64>();
        assert_eq!(total, 40_000, "{codec}");
        assert!(
            std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .all(|e| !e.file_name().to_string_lossy().starts_with('.')),
            "{codec}: no part or marker left"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn drops_and_counts_when_the_writer_is_behind() {
    let dir = std::env::temp_dir().join(format!("weir-spool-drop-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut o = opts(&dir);
    o.rotate_bytes = None;
    o.rotate_ns = None;
    o.blocks = 2;
    let (mut s, writer) = spool(o).unwrap();
    let frame = [0u8; 1000];
    let mut kept = 0u64;
    for i in 0..20_000 {
        if s.append(i, 1000, &frame).is_some() {
            kept += 1;
        }
    }
    assert_eq!(kept + s.dropped, 20_000);
    s.finish();
    let report = writer.join().unwrap();
    assert_eq!(report.files[0].frames, kept);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compressed_files_hold_the_same_pcap_and_a_seek_table() {
    let dir = std::env::temp_dir().join(format!("weir-spool-zst-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let frames: Vec<Vec<u8>> = (0..3000u32)
        .map(|i| {
            (0..(60 + i % 1400))
                .map(|b| (b * (i % 7 + 1)) as u8)
                .collect()
        })
        .collect();
    let mut plain_bytes = None;
    for codec in [Codec::None, Codec::Zstd(3), Codec::Lz4, Codec::Auto] {
        let mut o = opts(&dir);
        o.prefix = format!("{codec}").replace(':', "");
        o.snaplen = 2000;
        o.rotate_bytes = None;
        o.rotate_ns = None;
        o.blocks = 64;
        o.codec = codec;
        o.direct = true;
        let (mut s, writer) = spool(o).unwrap();
        let mut placed = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            while s.backlog() > 60 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            placed.push(s.append(i as i64 * 1000, f.len() as u32, f).unwrap());
        }
        s.finish();
        let report = writer.join().unwrap();
        assert!(report.error.is_none(), "{codec}: {:?}", report.error);
        let info = &report.files[0];
        assert_eq!(info.frames, 3000);
        let path = dir.join(&info.name);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), info.stored_bytes);
        let pcap = match codec.container() {
            None => std::fs::read(&path).unwrap(),
            Some(_) => {
                assert!(info.name.ends_with(codec.container().unwrap().suffix()));
                let f = SeekableFile::open(&path).unwrap().unwrap();
                assert!(f.had_table, "{codec}: seek table");
                let mut v = Vec::new();
                f.into_reader().read_to_end(&mut v).unwrap();
                v
            }
        };
        assert_eq!(pcap.len() as u64, info.bytes);
        // Records' offsets point into the decompressed stream, and
        // random access finds them there.
        let random = crate::fetch::PcapFile::open(&path).unwrap().unwrap();
        let mut got = Vec::new();
        for ((_, off), f) in placed.iter().zip(&frames).step_by(97) {
            let at = *off as usize + 16;
            assert_eq!(&pcap[at..at + f.len()], &f[..]);
            random.read_at(*off, &mut got).unwrap();
            assert_eq!(&got, f, "{codec}: read_at {off}");
        }
        // And the sequential reader reads every frame.
        let mut r = TraceReader::open(&path, ReaderOptions::default()).unwrap();
        let mut n = 0;
        while let Some(c) = r.next_chunk().unwrap() {
            n += c.frames.len();
        }
        assert_eq!(n, frames.len(), "{codec}: TraceReader");
        match &plain_bytes {
            None => plain_bytes = Some(pcap),
            Some(p) => assert_eq!(p, &pcap, "{codec}: same pcap as uncompressed"),
        }
        if codec == Codec::Zstd(3) {
            let all = zstd::stream::decode_all(&std::fs::read(&path).unwrap()[..]).unwrap();
            assert_eq!(Some(&all), plain_bytes.as_ref());
            assert_eq!(
                info.methods.get("zstd:3"),
                Some(&(info.methods.values().sum()))
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
