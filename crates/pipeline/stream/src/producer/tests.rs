//! A worker's tap without a broker: records into batches by partition,
//! numbered, handed to the Kafka thread's queue, dropped and counted when
//! it is full; the manifest's account of the counters.

use std::collections::BTreeMap;

use super::*;

/// A tap as `KafkaOut::tap_maker` makes it, for a topic of `partitions`,
/// its queue of `queue` batches read here; it never lingers on its own.
fn tap(
    partitions: usize,
    batch_records: usize,
    queue: usize,
) -> (KafkaTap, Receiver<Batch>, Arc<ProducerCounters>) {
    let (tx, rx) = bounded(queue);
    let counters = Arc::new(ProducerCounters::default());
    let t = KafkaTap {
        capture_id: 0xabc,
        worker: 3,
        batch_records,
        linger: Duration::from_secs(3600),
        pending: (0..partitions).map(|_| Vec::new()).collect(),
        seq: vec![0; partitions],
        tx,
        counters: counters.clone(),
        last: Instant::now(),
    };
    (t, rx, counters)
}

/// Record `i`, of flow hash `hash` (None: a frame without a flow).
fn record(i: i64, hash: Option<u32>) -> PacketRecord {
    let mut fields = wire::PacketFields {
        ts_ns: i,
        ..Default::default()
    };
    if let Some(h) = hash {
        fields.has = Has::FLOW;
        fields.flow_hash = h;
    }
    PacketRecord {
        fields,
        ..Default::default()
    }
}

/// The record batches queued so far: (header, records).
fn queued(rx: &Receiver<Batch>) -> Vec<(BatchHeader, Vec<PacketRecord>)> {
    rx.try_iter()
        .map(|b| match b {
            Batch::Records { header, records } => (header, records),
            Batch::Stats(_) => panic!("a stats message from a record tap"),
        })
        .collect()
}

/// Each record goes to the partition of its flow hash (frames without a
/// flow to 0), in batches of at most `batch_records` that go out when
/// full, the rest at a flush; each partition's batches are numbered from
/// 1 in order and hold its records in the order they came; every batch
/// names the capture and the worker.
#[test]
fn records_go_in_numbered_batches_to_their_flows_partition() {
    let (mut t, rx, counters) = tap(4, 3, 100);
    let pushed: Vec<PacketRecord> = (0..40)
        .map(|i| record(i, (i % 7 != 0).then_some(i as u32 * 5 + 1)))
        .collect();
    for r in &pushed {
        t.push(r);
    }
    let full = queued(&rx);
    assert!(
        full.iter().all(|(_, recs)| recs.len() == 3),
        "only full batches before a flush"
    );
    t.tick();
    assert!(queued(&rx).is_empty(), "not lingered long enough");
    t.flush();
    let all: Vec<_> = full.into_iter().chain(queued(&rx)).collect();

    let mut by_partition: BTreeMap<u32, Vec<PacketRecord>> = BTreeMap::new();
    let mut seqs: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (h, recs) in &all {
        assert_eq!((h.capture_id, h.worker), (0xabc, 3));
        assert!(
            (1..=3).contains(&recs.len()),
            "{h:?}: {} records",
            recs.len()
        );
        for r in recs {
            assert_eq!(KafkaTap::partition_of(r, 4), h.partition as usize);
        }
        by_partition.entry(h.partition).or_default().extend(recs);
        seqs.entry(h.partition).or_default().push(h.seq);
    }
    for (p, s) in &seqs {
        let want: Vec<u64> = (1..=s.len() as u64).collect();
        assert_eq!(s, &want, "partition {p}");
    }
    for p in 0..4u32 {
        let want: Vec<PacketRecord> = (pushed.iter())
            .filter(|r| KafkaTap::partition_of(r, 4) == p as usize)
            .copied()
            .collect();
        assert_eq!(
            by_partition.get(&p).cloned().unwrap_or_default(),
            want,
            "partition {p}"
        );
    }
    assert!(by_partition[&0].iter().any(|r| r.has & Has::FLOW == 0));
    assert_eq!(counters.records_dropped.load(Ordering::Relaxed), 0);

    // Dropped, a tap hands over what it holds.
    t.push(&record(99, Some(2)));
    drop(t);
    let last = queued(&rx);
    assert_eq!(last.len(), 1);
    assert_eq!((last[0].0.partition, last[0].1.len()), (2, 1));
}

/// A tap whose linger time has passed sends its partly filled batches at
/// the next tick.
#[test]
fn a_tick_after_the_linger_time_sends_partial_batches() {
    let (mut t, rx, _) = tap(2, 100, 10);
    t.linger = Duration::ZERO;
    t.push(&record(1, Some(1)));
    t.push(&record(2, Some(2)));
    t.tick();
    let sent: Vec<(u32, usize)> = queued(&rx)
        .iter()
        .map(|(h, r)| (h.partition, r.len()))
        .collect();
    assert_eq!(sent, [(0, 1), (1, 1)]);
}

/// A batch that finds the queue full, or the Kafka thread gone, is
/// dropped and its records counted; the capture never waits. Its number
/// is used all the same (a collector sees a gap, not a repeat).
#[test]
fn a_full_queue_drops_batches_and_counts_their_records() {
    let (mut t, rx, counters) = tap(1, 2, 1);
    for i in 0..4 {
        t.push(&record(i, Some(9)));
    }
    assert_eq!(counters.records_dropped.load(Ordering::Relaxed), 2);
    t.push(&record(4, Some(9)));
    let first = queued(&rx);
    t.flush();
    let second = queued(&rx);
    let seqs: Vec<u64> = first.iter().chain(&second).map(|(h, _)| h.seq).collect();
    assert_eq!(seqs, [1, 3]);
    assert_eq!(second[0].1, [record(4, Some(9))]);
    drop(rx);
    t.push(&record(5, Some(9)));
    t.push(&record(6, Some(9)));
    assert_eq!(counters.records_dropped.load(Ordering::Relaxed), 4);
}

/// The manifest's account of a stream is its counters as they stand.
#[test]
fn the_manifest_says_what_the_counters_counted() {
    let c = ProducerCounters::default();
    for (a, v) in [
        (&c.batches, 1),
        (&c.records, 2),
        (&c.bytes, 3),
        (&c.records_dropped, 4),
        (&c.records_failed, 5),
        (&c.records_delivered, 6),
        (&c.stats_dropped, 7),
    ] {
        a.store(v, Ordering::Relaxed);
    }
    let k = manifest_info("b1:9092,b2:9092", "records", 0xabc, 8, &c);
    assert_eq!(k.role, "producer");
    assert_eq!(
        (k.brokers.as_str(), k.topic.as_str()),
        ("b1:9092,b2:9092", "records")
    );
    assert_eq!(k.capture_id.as_deref(), Some("0000000000000abc"));
    assert_eq!((k.group, k.partitions), (None, 8));
    let counted = [
        k.messages,
        k.records,
        k.bytes,
        k.records_dropped,
        k.records_failed,
        k.records_delivered,
        k.stats_dropped,
    ];
    assert_eq!(counted, [1, 2, 3, 4, 5, 6, 7]);
}
