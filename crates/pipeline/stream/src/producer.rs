//! The capture side: each worker's records, split by flow-hash partition
//! into batches, handed over a bounded queue to one thread that compresses
//! them and gives them to librdkafka. Nothing here waits on the broker: a
//! batch that finds the queue full is dropped and counted, so a slow or
//! absent broker costs records on the stream, never frames of the capture.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use wire::{Has, PacketRecord};

use crate::codec::{BatchHeader, encode};

#[derive(Clone, Debug)]
pub struct ProducerOptions {
    /// `host:port[,host:port...]`.
    pub brokers: String,
    pub topic: String,
    /// Records per batch (per worker and partition).
    pub batch_records: usize,
    /// Batches waiting for the Kafka thread before new ones are dropped.
    pub queue_batches: usize,
    /// A partly filled batch goes out after this long.
    pub linger: Duration,
    pub zstd_level: i32,
    /// Bytes of compressed batches librdkafka holds for the broker
    /// (`queue.buffering.max.kbytes`): how much of a broker outage the
    /// capture rides out in memory before its queue fills and batches are
    /// dropped. At least [`MIN_BUFFER_BYTES`].
    pub buffer_bytes: u64,
}

/// The smallest `buffer_bytes`: room for two full batches (a batch larger
/// than librdkafka's whole buffer would never be taken).
pub const MIN_BUFFER_BYTES: u64 = 1 << 20;

impl ProducerOptions {
    pub fn new(brokers: &str, topic: &str) -> Self {
        ProducerOptions {
            brokers: brokers.into(),
            topic: topic.into(),
            batch_records: 4096,
            queue_batches: 256,
            linger: Duration::from_millis(200),
            zstd_level: 1,
            buffer_bytes: 256 << 20,
        }
    }
}

/// What the stream did, for the manifest.
#[derive(Debug, Default)]
pub struct ProducerCounters {
    pub batches: AtomicU64,
    pub records: AtomicU64,
    /// Bytes of messages handed to Kafka.
    pub bytes: AtomicU64,
    /// Records dropped because the queue to the Kafka thread was full.
    pub records_dropped: AtomicU64,
    /// Records in batches the broker did not take (delivery failed).
    pub records_failed: AtomicU64,
    /// Records delivered (acknowledged by the broker).
    pub records_delivered: AtomicU64,
    /// Stats messages dropped because the queue to the Kafka thread was
    /// full.
    pub stats_dropped: AtomicU64,
}

enum Batch {
    Records {
        header: BatchHeader,
        records: Vec<PacketRecord>,
    },
    /// A second's stats rows, already encoded, for partition 0.
    Stats(Vec<u8>),
}

struct DeliveryCount(Arc<ProducerCounters>);

impl ClientContext for DeliveryCount {}

impl ProducerContext for DeliveryCount {
    type DeliveryOpaque = usize;
    fn delivery(&self, result: &DeliveryResult<'_>, records: usize) {
        let c = if result.is_ok() {
            &self.0.records_delivered
        } else {
            &self.0.records_failed
        };
        c.fetch_add(records as u64, Ordering::Relaxed);
    }
}

/// The stream of one capture.
pub struct KafkaOut {
    opts: ProducerOptions,
    capture_id: u64,
    partitions: u32,
    /// None once finishing.
    tx: Option<Sender<Batch>>,
    counters: Arc<ProducerCounters>,
    /// Set when the capture is over: the Kafka thread then waits for the
    /// broker only until [`FINISH_WAIT`] has passed.
    finishing: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

/// How long a finished capture waits for the broker to take what is
/// queued, in all: handing batches to librdkafka and its flush.
pub const FINISH_WAIT: Duration = Duration::from_secs(30);

impl KafkaOut {
    /// Connects, learns the topic's partitions, starts the Kafka thread.
    /// All of it on a thread without capabilities: librdkafka's threads
    /// and the Kafka thread inherit their creator's, and a capture holds
    /// CAP_NET_RAW until its rings are open, after this has started.
    pub fn start(opts: ProducerOptions, capture_id: u64) -> Result<KafkaOut, String> {
        capture::privilege::without_capabilities(move || KafkaOut::start_here(opts, capture_id))?
    }

    fn start_here(opts: ProducerOptions, capture_id: u64) -> Result<KafkaOut, String> {
        let counters = Arc::new(ProducerCounters::default());
        let producer: ThreadedProducer<DeliveryCount> = ClientConfig::new()
            .set("bootstrap.servers", &opts.brokers)
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .set("message.max.bytes", "8000000")
            .set(
                "queue.buffering.max.kbytes",
                (opts.buffer_bytes.max(MIN_BUFFER_BYTES) >> 10).to_string(),
            )
            .create_with_context(DeliveryCount(counters.clone()))
            .map_err(|e| format!("--kafka {}: {e}", opts.brokers))?;
        let partitions = partition_count(&producer, &opts)?;
        let (tx, rx) = bounded::<Batch>(opts.queue_batches.max(1));
        let finishing = Arc::new(AtomicBool::new(false));
        let (o, c, f) = (opts.clone(), counters.clone(), finishing.clone());
        let thread = std::thread::Builder::new()
            .name("weir-kafka".into())
            .spawn(move || send_batches(producer, rx, &o, &c, &f))
            .map_err(|e| format!("starting the Kafka thread: {e}"))?;
        Ok(KafkaOut {
            opts,
            capture_id,
            partitions,
            tx: Some(tx),
            counters,
            finishing,
            thread: Some(thread),
        })
    }

    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    pub fn counters(&self) -> &Arc<ProducerCounters> {
        &self.counters
    }

    /// Makes each worker's tap.
    pub fn tap_maker(&self) -> impl Fn(u16) -> KafkaTap + Send + Sync + 'static {
        let n = self.partitions as usize;
        let (capture_id, tx, counters) = (self.capture_id, self.sender(), self.counters.clone());
        let (batch_records, linger) = (self.opts.batch_records.max(1), self.opts.linger);
        move |worker| KafkaTap {
            capture_id,
            worker,
            batch_records,
            linger,
            pending: (0..n).map(|_| Vec::new()).collect(),
            seq: vec![0; n],
            tx: tx.clone(),
            counters: counters.clone(),
            last: Instant::now(),
        }
    }

    /// Sends each second's stats rows (to partition 0; dropped and counted
    /// apart from records if the queue is full).
    pub fn stats_sender(&self) -> impl Fn(&[store::stats::StatsRow]) + Send + Sync + 'static {
        let (capture_id, tx) = (self.capture_id, self.sender());
        let counters = self.counters.clone();
        let seq = AtomicU64::new(0);
        move |rows| {
            if rows.is_empty() {
                return;
            }
            let n = seq.fetch_add(1, Ordering::Relaxed) + 1;
            let msg = Batch::Stats(crate::stats_msg::encode(capture_id, n, rows));
            if tx.try_send(msg).is_err() {
                counters.stats_dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn sender(&self) -> Sender<Batch> {
        self.tx.clone().expect("the stream is not finished")
    }

    /// Once every tap is gone: waits for the queued batches to reach the
    /// broker, up to [`FINISH_WAIT`] in all; what it has not taken by then
    /// is counted as failed.
    pub fn finish(mut self) -> Result<(), String> {
        self.stop()
    }

    fn stop(&mut self) -> Result<(), String> {
        self.tx = None;
        self.finishing.store(true, Ordering::Relaxed);
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err("the Kafka thread panicked".into())),
            None => Ok(()),
        }
    }
}

/// A stream dropped unfinished (a capture that failed to start) still
/// stops its thread, and librdkafka's with it, before it is gone.
impl Drop for KafkaOut {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// A capture's stream as `weir capture` runs it (`ingest::capture_run`).
pub struct KafkaStream {
    out: KafkaOut,
}

impl KafkaStream {
    pub fn start(opts: ProducerOptions, capture_id: u64) -> Result<KafkaStream, String> {
        let out = KafkaOut::start(opts, capture_id)?;
        Ok(KafkaStream { out })
    }
}

impl ingest::capture_run::RecordStream for KafkaStream {
    fn taps(&self) -> ingest::Taps {
        let make = self.out.tap_maker();
        ingest::Taps {
            records: Arc::new(move |worker| Box::new(make(worker)) as Box<dyn ingest::RecordTap>),
            stats: Some(Arc::new(self.out.stats_sender())),
        }
    }

    fn finish(self: Box<Self>, warnings: &mut Vec<String>) -> store::manifest::KafkaInfo {
        let out = self.out;
        let (counters, partitions, id) = (out.counters.clone(), out.partitions, out.capture_id);
        let (brokers, topic) = (out.opts.brokers.clone(), out.opts.topic.clone());
        if let Err(e) = out.finish() {
            warnings.push(e);
        }
        let info = manifest_info(&brokers, &topic, id, partitions, &counters);
        if info.records_dropped + info.records_failed + info.stats_dropped > 0 {
            warnings.push(format!(
                "Kafka: {} records dropped (queue full), {} not taken by the broker, {} stats \
                 messages dropped (queue full); the dataset has them all",
                info.records_dropped, info.records_failed, info.stats_dropped
            ));
        }
        info
    }
}

/// The manifest's account of a capture's stream.
pub fn manifest_info(
    brokers: &str,
    topic: &str,
    capture_id: u64,
    partitions: u32,
    c: &ProducerCounters,
) -> store::manifest::KafkaInfo {
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    store::manifest::KafkaInfo {
        role: "producer".into(),
        brokers: brokers.into(),
        topic: topic.into(),
        group: None,
        capture_id: Some(format!("{capture_id:016x}")),
        partitions,
        messages: get(&c.batches),
        records: get(&c.records),
        bytes: get(&c.bytes),
        records_dropped: get(&c.records_dropped),
        records_failed: get(&c.records_failed),
        records_delivered: get(&c.records_delivered),
        stats_dropped: get(&c.stats_dropped),
        ..Default::default()
    }
}

fn partition_count(
    producer: &ThreadedProducer<DeliveryCount>,
    opts: &ProducerOptions,
) -> Result<u32, String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let found = producer
            .client()
            .fetch_metadata(Some(&opts.topic), Duration::from_secs(5));
        let reason = match &found {
            Ok(m) => match m.topics().iter().find(|t| t.name() == opts.topic) {
                Some(t) if !t.partitions().is_empty() => return Ok(t.partitions().len() as u32),
                Some(t) => format!("{:?}", t.error()),
                None => "not listed".into(),
            },
            Err(e) => e.to_string(),
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "--kafka {} --topic {}: no partitions found ({reason}); check that the broker \
                 runs and the topic exists (kafka-topics.sh --create --topic {} --partitions N)",
                opts.brokers, opts.topic, opts.topic
            ));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn send_batches(
    producer: ThreadedProducer<DeliveryCount>,
    rx: Receiver<Batch>,
    opts: &ProducerOptions,
    c: &ProducerCounters,
    finishing: &AtomicBool,
) -> Result<(), String> {
    let mut key = [0u8; 4];
    // Set once the capture is over: the broker has until then.
    let mut finish_by: Option<Instant> = None;
    let mut given_up = 0u64;
    for batch in rx {
        let (n, partition, message) = match batch {
            Batch::Records { header, records } => (
                records.len(),
                header.partition,
                encode(&header, &records, opts.zstd_level),
            ),
            Batch::Stats(m) => (0, 0, m),
        };
        key.copy_from_slice(&partition.to_be_bytes());
        let mut record = BaseRecord::with_opaque_to(&opts.topic, n)
            .partition(partition as i32)
            .key(&key[..])
            .payload(&message[..]);
        // librdkafka's own queue full: wait for it here, off the capture
        // path; meanwhile the workers' queue fills and they drop, counted.
        // Once the capture is over, only until the finish time: a broker
        // that is gone frees no room before librdkafka's message timeout
        // (5 minutes), and the capture would wait that long to end.
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    if finishing.load(Ordering::Relaxed) {
                        let by = *finish_by.get_or_insert_with(|| Instant::now() + FINISH_WAIT);
                        if Instant::now() >= by {
                            c.records_failed.fetch_add(n as u64, Ordering::Relaxed);
                            given_up += 1;
                            break;
                        }
                    }
                    record = r;
                    producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => {
                    c.records_failed.fetch_add(n as u64, Ordering::Relaxed);
                    eprintln!("weir: Kafka: a batch of {n} records was not sent: {e}");
                    break;
                }
            }
        }
        c.batches.fetch_add(1, Ordering::Relaxed);
        c.records.fetch_add(n as u64, Ordering::Relaxed);
        c.bytes.fetch_add(message.len() as u64, Ordering::Relaxed);
    }
    let left = finish_by.map_or(FINISH_WAIT, |by| {
        by.saturating_duration_since(Instant::now())
    });
    let flushed = producer.flush(left);
    // Dropped here: librdkafka purges what the broker has not taken, and
    // each purged batch is counted as failed (the delivery callback).
    drop(producer);
    match (given_up, flushed) {
        (0, Ok(())) => Ok(()),
        (0, Err(e)) => Err(format!(
            "Kafka: not every batch reached the broker within {} s of the capture's end: {e}",
            FINISH_WAIT.as_secs()
        )),
        (n, _) => Err(format!(
            "Kafka: the broker took nothing for {} s after the capture's end; {n} batches \
             were never handed to it",
            FINISH_WAIT.as_secs()
        )),
    }
}

/// One worker's side: records by partition into batches.
pub struct KafkaTap {
    capture_id: u64,
    worker: u16,
    batch_records: usize,
    linger: Duration,
    pending: Vec<Vec<PacketRecord>>,
    seq: Vec<u64>,
    tx: Sender<Batch>,
    counters: Arc<ProducerCounters>,
    last: Instant,
}

impl KafkaTap {
    /// The partition of a record: its flow hash modulo the partitions, so
    /// both directions of a flow meet in one; frames without a flow hash
    /// in partition 0.
    pub fn partition_of(rec: &PacketRecord, partitions: usize) -> usize {
        if rec.has & Has::FLOW != 0 {
            rec.flow_hash as usize % partitions.max(1)
        } else {
            0
        }
    }

    pub fn push(&mut self, rec: &PacketRecord) {
        let p = Self::partition_of(rec, self.pending.len());
        self.pending[p].push(*rec);
        if self.pending[p].len() >= self.batch_records {
            self.send(p);
        }
    }

    /// Sends partly filled batches older than the linger time.
    pub fn tick(&mut self) {
        if self.last.elapsed() >= self.linger {
            self.flush();
        }
    }

    pub fn flush(&mut self) {
        self.last = Instant::now();
        for p in 0..self.pending.len() {
            if !self.pending[p].is_empty() {
                self.send(p);
            }
        }
    }

    fn send(&mut self, p: usize) {
        self.seq[p] += 1;
        let records =
            std::mem::replace(&mut self.pending[p], Vec::with_capacity(self.batch_records));
        let n = records.len() as u64;
        let batch = Batch::Records {
            header: BatchHeader {
                capture_id: self.capture_id,
                worker: self.worker,
                partition: p as u32,
                seq: self.seq[p],
            },
            records,
        };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(batch)
        {
            self.counters
                .records_dropped
                .fetch_add(n, Ordering::Relaxed);
        }
    }
}

impl Drop for KafkaTap {
    fn drop(&mut self) {
        self.flush();
    }
}

impl ingest::RecordTap for KafkaTap {
    fn record(&mut self, rec: &PacketRecord) {
        self.push(rec);
    }
    fn tick(&mut self) {
        KafkaTap::tick(self);
    }
}

#[cfg(test)]
mod tests;
