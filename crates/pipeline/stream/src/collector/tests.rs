//! The collector without a broker: the messages a consumer would hand it,
//! taken one by one, made durable, taken again after a restart or a
//! revocation; its dataset made, resumed or refused.

use std::collections::BTreeMap;
use std::path::Path;

use testdata::Scratch;

use store::manifest::{KafkaInfo, Manifest};
use store::stats::StatsRow;
use store::{Dataset, PacketWriterOptions};
use wire::build::{FrameSpec, IpSpec, Payload, TransportSpec};
use wire::{LinkType, PacketFields, PacketRecord};

use super::*;
use crate::codec::{BatchHeader, encode};

fn options(topic: &str, group: &str) -> CollectOptions {
    CollectOptions {
        // Never contacted: nothing here polls.
        brokers: "192.0.2.1:9092".into(),
        topic: topic.into(),
        group: group.into(),
        duration: None,
        idle: None,
        flush_every: Duration::from_secs(1),
        session_timeout: Duration::from_secs(10),
        sign_key: None,
        publisher: None,
        publish_wait: Duration::ZERO,
        command: "weir collect (a test)".into(),
    }
}

/// Record `i`: a UDP frame of its own flow and time, decoded as a
/// capture's worker decodes it.
fn record(i: u32) -> PacketRecord {
    let mut frame = Vec::new();
    FrameSpec {
        eth_src: [2, 0, 0, 0, 0, 1],
        eth_dst: [2, 0, 0, 0, 0, 2],
        vlan: None,
        ip: IpSpec::V4 {
            src: [192, 0, 2, 1],
            dst: [192, 0, 2, 2],
            ttl: 64,
            id: i as u16,
            dscp: 0,
            frag: 0x4000,
        },
        transport: TransportSpec::Udp {
            sport: 10_000 + (i % 7) as u16,
            dport: 53,
        },
        payload: Payload::Bytes(&[7; 30]),
    }
    .build(&mut frame);
    let fields = PacketFields {
        ts_ns: 1_700_000_000_000_000_000 + i64::from(i) * 1_000,
        wire_len: frame.len() as u32,
        cap_len: frame.len() as u32,
        ..Default::default()
    };
    let mut r = PacketRecord {
        fields,
        ..Default::default()
    };
    let _payload = wire::decode(LinkType::ETHERNET, &frame, &mut r);
    r
}

fn records(range: std::ops::Range<u32>) -> Vec<PacketRecord> {
    range.map(record).collect()
}

/// A batch of capture 0xabc's worker `worker`, partition 0.
fn batch(worker: u16, seq: u64, recs: &[PacketRecord]) -> Vec<u8> {
    let h = BatchHeader {
        capture_id: 0xabc,
        worker,
        partition: 0,
        seq,
    };
    encode(&h, recs, 1)
}

fn stats_rows(n: i64) -> Vec<StatsRow> {
    (0..n)
        .map(|i| StatsRow {
            ts_ns: 1_700_000_000_000_000_000 + i,
            frames: 10,
            ..Default::default()
        })
        .collect()
}

/// The collector's state between polls, as `collect` keeps it.
struct Collector {
    dataset: Dataset,
    manifest: Manifest,
    kafka: KafkaInfo,
    stats: FrameStats,
    unwritten: Unwritten,
    resumed: bool,
}

impl Collector {
    fn open(root: &Path) -> Collector {
        let (dataset, resumed, manifest) = open_or_create(root, &options("t", "g")).unwrap();
        let kafka = manifest.kafka.clone().unwrap_or_default();
        Collector {
            dataset,
            manifest,
            kafka,
            stats: FrameStats::default(),
            unwritten: Unwritten::default(),
            resumed,
        }
    }

    fn take(&mut self, m: &[u8]) -> Taken {
        let (k, d, man) = (&mut self.kafka, &self.dataset, &self.manifest);
        self.unwritten.take(m, k, d, man).unwrap()
    }

    fn make_durable(&mut self) {
        let (d, m, k, s) = (
            &self.dataset,
            &mut self.manifest,
            &mut self.kafka,
            &mut self.stats,
        );
        self.unwritten.make_durable(d, m, k, s).unwrap();
    }

    /// Every record of the packet files the manifest lists, by time.
    fn records(&self) -> Vec<PacketRecord> {
        let mut v: Vec<PacketRecord> = (self.manifest.files.packets.iter())
            .flat_map(|f| {
                store::read::read_packet_file(&self.dataset.root().join(&f.path)).unwrap()
            })
            .collect();
        v.sort_by_key(|r| r.ts_ns);
        v
    }
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Batches are written once per writer (capture, worker, partition) and
/// sequence number: one handed again, or an older one after a newer, is
/// skipped and counted; another worker's batch of the same number is
/// its own. Stats rows likewise. Messages that do not decode are counted
/// dropped and said why. Made durable: the packet file and stats file
/// listed, the counts, and per writer the last number on disk, in the
/// manifest on disk too.
#[test]
fn batches_are_kept_once_per_writer_and_sequence_number() {
    let s = Scratch::new("collect-once");
    let mut c = Collector::open(&s.join("ds"));
    assert!(!c.resumed);
    assert_eq!(c.kafka.role, "collector");
    assert_eq!(
        (c.kafka.topic.as_str(), c.kafka.group.as_deref()),
        ("t", Some("g"))
    );

    let all = records(0..40);
    assert_eq!(c.take(&batch(0, 1, &all[0..10])), Taken::Kept);
    assert_eq!(c.take(&batch(0, 2, &all[10..20])), Taken::Kept);
    assert_eq!(c.take(&batch(1, 1, &all[20..25])), Taken::Kept);
    // Handed again, and an older one after a newer: read already.
    assert_eq!(c.take(&batch(0, 2, &all[10..20])), Taken::Kept);
    assert_eq!(c.take(&batch(0, 1, &all[30..40])), Taken::Kept);
    assert_eq!((c.kafka.records, c.kafka.duplicates_skipped), (25, 20));

    assert!(matches!(c.take(b"hello"), Taken::BadBatch(e) if !e.is_empty()));
    let mut cut = batch(0, 3, &all[25..30]);
    cut.truncate(cut.len() - 3);
    assert!(matches!(c.take(&cut), Taken::BadBatch(_)));
    assert_eq!(c.kafka.records_dropped, 2);

    let rows = stats_rows(3);
    assert_eq!(
        c.take(&crate::stats_msg::encode(0xabc, 1, &rows)),
        Taken::Kept
    );
    assert_eq!(
        c.take(&crate::stats_msg::encode(0xabc, 1, &rows)),
        Taken::Kept
    );
    let mut bad = crate::stats_msg::encode(0xabc, 2, &rows);
    bad.pop();
    assert!(matches!(c.take(&bad), Taken::BadStats(e) if e.contains("stats message 2")));
    assert_eq!(c.kafka.records_dropped, 3);
    assert_eq!(c.kafka.messages, 10);
    assert_eq!(c.unwritten.rows, rows, "the stats rows once");

    c.make_durable();
    let m = &c.manifest;
    assert_eq!(m.files.packets.len(), 1);
    assert_eq!(m.files.packets[0].rows, 25);
    assert_eq!(m.files.stats, ["stats/k00000.parquet"]);
    assert!(c.dataset.root().join("stats/k00000.parquet").is_file());
    assert_eq!(m.counts.frames, 25);
    let span = m.time_span.as_ref().unwrap();
    assert_eq!((span.first_ns, span.last_ns), (all[0].ts_ns, all[24].ts_ns));
    let written: BTreeMap<&str, u64> = c
        .kafka
        .written
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    let want = BTreeMap::from([
        ("0000000000000abc:0:0", 2),
        ("0000000000000abc:1:0", 1),
        ("0000000000000abc:stats", 1),
    ]);
    assert_eq!(written, want);
    let on_disk = c.dataset.read_manifest().unwrap();
    assert_eq!(on_disk.kafka.as_ref(), Some(&c.kafka));
    assert_eq!(on_disk.counts, c.manifest.counts);
    assert_eq!(c.records(), all[..25]);
    assert!(c.unwritten.writer.is_none() && c.unwritten.seqs.is_empty());
}

/// A collector killed after a packet file was finished but before the
/// manifest listed it: restarted on its dataset it removes that file (and
/// any stats file not listed), and of the batches the broker hands again
/// skips those the manifest has and writes the others.
#[test]
fn a_restarted_collector_drops_unlisted_files_and_skips_what_it_wrote() {
    let s = Scratch::new("collect-restart");
    let root = s.join("ds");
    let all = records(0..20);
    let mut c = Collector::open(&root);
    c.take(&batch(0, 1, &all[0..10]));
    c.make_durable();
    c.take(&batch(0, 2, &all[10..20]));
    // The kill: the file is in place, the manifest does not list it.
    let unlisted = c.unwritten.writer.take().unwrap().finish().unwrap();
    std::fs::create_dir_all(root.join("stats")).unwrap();
    std::fs::write(root.join("stats/k00007.parquet"), "half").unwrap();
    assert_eq!(names_in(&root.join("packets")).len(), 2);
    drop(c);

    let mut c = Collector::open(&root);
    assert!(c.resumed);
    assert_eq!(names_in(&root.join("packets")), ["w000-00000.parquet"]);
    assert!(!root.join(&unlisted.path).exists());
    assert!(!root.join("stats/k00007.parquet").exists());
    assert_eq!(c.take(&batch(0, 1, &all[0..10])), Taken::Kept);
    assert_eq!(c.take(&batch(0, 2, &all[10..20])), Taken::Kept);
    assert_eq!((c.kafka.records, c.kafka.duplicates_skipped), (20, 10));
    c.make_durable();
    assert_eq!(c.records(), all);
    assert_eq!(c.kafka.written["0000000000000abc:0:0"], 2);
}

/// Partitions taken away: what was read but not written is dropped (its
/// `.part` file too) and not remembered, so the batches are taken again
/// if they come back.
#[test]
fn a_revocation_forgets_what_was_read_but_not_written() {
    let s = Scratch::new("collect-revoke");
    let root = s.join("ds");
    let all = records(0..10);
    let mut c = Collector::open(&root);
    c.take(&batch(0, 1, &all));
    c.take(&crate::stats_msg::encode(0xabc, 1, &stats_rows(2)));
    assert_eq!(names_in(&root.join("packets")).len(), 1, "the open file");
    c.unwritten.discard();
    assert_eq!(names_in(&root.join("packets")), Vec::<String>::new());
    assert!(c.unwritten.rows.is_empty() && c.unwritten.seqs.is_empty());
    let before = c.kafka.records;
    c.take(&batch(0, 1, &all));
    assert_eq!(c.kafka.records, before + 10, "taken again, not skipped");
    assert_eq!(c.kafka.duplicates_skipped, 0);
}

/// A dataset another command made, or one collected from another topic
/// or for another group, is refused with an error that names it and says
/// what to do; a new directory becomes a collector's dataset whose
/// integrity chain names the topic and group.
#[test]
fn datasets_of_other_commands_topics_or_groups_are_refused() {
    let s = Scratch::new("collect-refuse");
    let other = s.join("converted");
    let ds = Dataset::create(&other, false).unwrap();
    ds.write_manifest(&Manifest::new(
        "convert",
        "source",
        PacketWriterOptions::default().order,
    ))
    .unwrap();
    let e = open_or_create(&other, &options("t", "g")).err().unwrap();
    assert!(e.starts_with(&other.display().to_string()), "{e}");
    assert!(
        e.contains("not made by weir collect; give a new directory"),
        "{e}"
    );

    let root = s.join("ds");
    let (_, resumed, m) = open_or_create(&root, &options("t", "g")).unwrap();
    assert!(!resumed);
    let inputs = &m.integrity.as_ref().expect("an integrity chain").inputs;
    let named: Vec<(&str, &str)> = inputs
        .iter()
        .map(|i| (i.by.as_str(), i.path.as_str()))
        .collect();
    assert_eq!(named, [("collect", "kafka topic t (group g)")]);
    for (topic, group) in [("u", "g"), ("t", "h")] {
        let e = open_or_create(&root, &options(topic, group)).err().unwrap();
        assert!(e.contains("collected topic t for group g"), "{e}");
        assert!(
            e.contains("same --topic and --group, or give a new directory"),
            "{e}"
        );
    }
    assert!(
        open_or_create(&root, &options("t", "g")).unwrap().1,
        "resumed"
    );
}

/// The static member id is the same for the same dataset (however its
/// path is written) and group, and differs for another of either.
#[test]
fn the_member_id_names_the_dataset_and_group() {
    let s = Scratch::new("collect-id");
    let (a, b) = (s.join("a"), s.join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let id = instance_id(&a, "g");
    assert!(id.starts_with("weir-collect-"), "{id}");
    assert_eq!(id, instance_id(&a.join("."), "g"));
    assert_eq!(id, instance_id(&b.join("../a"), "g"));
    assert_ne!(id, instance_id(&a, "h"));
    assert_ne!(id, instance_id(&b, "g"));
}
