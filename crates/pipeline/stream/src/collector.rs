//! `weir collect`: one member of a consumer group, writing the partitions
//! it holds into an ordinary dataset.
//!
//! Nothing is lost or doubled when a collector dies at any instant:
//! records go into a packet file; every `flush_every` the file is finished
//! (synced, renamed into place), then the manifest is rewritten (synced,
//! renamed) with, per (capture, worker, partition), the last batch
//! sequence number now on disk, and only then are the offsets committed
//! to Kafka. Restarted on the same dataset, a collector drops packet files
//! the manifest does not list (finished after the last manifest), and
//! skips every batch whose sequence number the manifest already covers
//! (the broker hands again what was read after the last commit). When the
//! group takes partitions away, what was read but not yet written is
//! dropped: the new owner reads it again from the committed offsets.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ingest::FrameStats;
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use store::manifest::{KafkaInfo, Manifest, RunInfo, TimeSpan};
use store::{Dataset, PacketWriter, PacketWriterOptions};

use crate::codec;

#[derive(Clone, Debug)]
pub struct CollectOptions {
    pub brokers: String,
    pub topic: String,
    pub group: String,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Stop when no message came for this long.
    pub idle: Option<Duration>,
    /// Make what was read durable and commit it this often.
    pub flush_every: Duration,
    /// How long the group waits for a collector that stopped answering
    /// before its partitions go to the others.
    pub session_timeout: Duration,
    /// Signs the dataset's seal at every write (`--sign-key`).
    pub sign_key: Option<std::sync::Arc<store::integrity::SigningKey>>,
    /// Told of every manifest written (`--upload`), and how long the end
    /// waits for what it has not sent yet.
    pub publisher: Option<std::sync::Arc<dyn util::storage::Publisher>>,
    pub publish_wait: Duration,
    pub command: String,
}

pub struct CollectReport {
    pub manifest: Manifest,
    /// The dataset was already a collector's: this run went on with it.
    pub resumed: bool,
    pub elapsed: Duration,
}

struct Revocations(Arc<AtomicBool>);

impl ClientContext for Revocations {}

impl ConsumerContext for Revocations {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if matches!(rebalance, Rebalance::Revoke(_)) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

/// The collector's static member id in the group: the same for the same
/// host, group and dataset directory, so a restart is recognised.
pub fn instance_id(root: &Path, group: &str) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let path = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    // FNV-1a: stable across runs and builds (std's hasher is not).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in format!("{}\0{group}\0{}", host.trim(), path.display()).bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("weir-collect-{}-{h:016x}", host.trim())
}

/// The key of a writer's sequence: capture id, worker, partition.
fn seq_key(h: &codec::BatchHeader) -> String {
    format!("{:016x}:{}:{}", h.capture_id, h.worker, h.partition)
}

pub fn collect(
    opts: &CollectOptions,
    root: &Path,
    stop: &AtomicBool,
) -> Result<CollectReport, String> {
    let started = Instant::now();
    let (dataset, resumed, mut manifest) = open_or_create(root, opts)?;
    let mut stats = FrameStats::default();
    for f in &manifest.files.packets {
        let path = root.join(&f.path);
        for r in store::read::read_packet_file(&path).map_err(|e| e.to_string())? {
            stats.add(&r);
        }
    }
    let revoked = Arc::new(AtomicBool::new(false));
    let consumer: BaseConsumer<Revocations> = ClientConfig::new()
        .set("bootstrap.servers", &opts.brokers)
        .set("group.id", &opts.group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        // Static membership: a collector restarted on its dataset within
        // the session timeout gets its own partitions back, with no
        // rebalance, and skips what its manifest says it wrote.
        .set("group.instance.id", instance_id(root, &opts.group))
        .set(
            "session.timeout.ms",
            opts.session_timeout.as_millis().to_string(),
        )
        .set("heartbeat.interval.ms", "1000")
        .set("fetch.message.max.bytes", "8000000")
        .create_with_context(Revocations(revoked.clone()))
        .map_err(|e| format!("--kafka {}: {e}", opts.brokers))?;
    consumer
        .subscribe(&[&opts.topic])
        .map_err(|e| format!("--topic {}: {e}", opts.topic))?;

    let mut kafka = manifest.kafka.clone().unwrap_or_default();
    let mut unwritten = Unwritten::default();
    let mut dirty = false;
    let mut last_flush = Instant::now();
    let mut last_message = Instant::now();
    // The idle clock starts at the first batch: joining the group and
    // being given partitions may take a while.
    let mut kafka_seen = false;
    let mut warned = 0;
    loop {
        if stop.load(Ordering::Relaxed)
            || opts.duration.is_some_and(|d| started.elapsed() >= d)
            || opts
                .idle
                .is_some_and(|d| kafka_seen && last_message.elapsed() >= d)
        {
            break;
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                last_message = Instant::now();
                kafka_seen = true;
                let Some(payload) = m.payload() else { continue };
                match unwritten.take(payload, &mut kafka, &dataset, &manifest)? {
                    Taken::Kept => dirty = true,
                    Taken::BadStats(e) => {
                        eprintln!("weir: warning: partition {}: {e}", m.partition());
                    }
                    Taken::BadBatch(e) => {
                        if warned < 5 {
                            warned += 1;
                            eprintln!(
                                "weir: warning: partition {} offset {}: {e}",
                                m.partition(),
                                m.offset()
                            );
                        }
                    }
                }
            }
            Some(Err(e)) if warned < 5 => {
                warned += 1;
                eprintln!("weir: warning: Kafka: {e}");
            }
            Some(Err(_)) => {}
            None => {}
        }
        if revoked.swap(false, Ordering::SeqCst) {
            // Partitions moved: what is read but not on disk is the new
            // owner's to read again.
            unwritten.discard();
            dirty = false;
        }
        if dirty && last_flush.elapsed() >= opts.flush_every {
            unwritten.make_durable(&dataset, &mut manifest, &mut kafka, &mut stats)?;
            commit(&consumer);
            dirty = false;
            last_flush = Instant::now();
        }
    }
    if dirty {
        unwritten.make_durable(&dataset, &mut manifest, &mut kafka, &mut stats)?;
        commit(&consumer);
    }
    manifest.run = Some(RunInfo {
        command: opts.command.clone(),
        workers: 1,
        elapsed_s: started.elapsed().as_secs_f64(),
        frames_per_s: kafka.records as f64 / started.elapsed().as_secs_f64().max(1e-9),
    });
    dataset
        .write_manifest(&manifest)
        .map_err(|e| e.to_string())?;
    let manifest = dataset
        .finish_publishing(&manifest, opts.publish_wait)
        .map_err(|e| e.to_string())?
        .unwrap_or(manifest);
    Ok(CollectReport {
        manifest,
        resumed,
        elapsed: started.elapsed(),
    })
}

/// What was read and not yet made durable: the open packet file, the last
/// sequence number read per writer, the frames' counts, the stats rows.
#[derive(Default)]
struct Unwritten {
    writer: Option<PacketWriter>,
    seqs: HashMap<String, u64>,
    frames: FrameStats,
    rows: Vec<store::stats::StatsRow>,
}

/// What became of one message.
#[derive(Debug, PartialEq)]
enum Taken {
    /// Its records or stats rows are read, or it was read before (a batch
    /// the broker hands again): its offset may be committed.
    Kept,
    /// A stats message that does not decode (dropped, counted).
    BadStats(String),
    /// A message that is neither a stats message nor a batch (dropped,
    /// counted).
    BadBatch(String),
}

impl Unwritten {
    /// Takes one message: a batch's records go to the open packet file,
    /// a stats message's rows are kept, unless the sequence number of its
    /// writer says it was read before (then counted as skipped); a
    /// message that does not decode is counted as dropped. Errors are
    /// the packet file's.
    fn take(
        &mut self,
        payload: &[u8],
        kafka: &mut KafkaInfo,
        dataset: &Dataset,
        manifest: &Manifest,
    ) -> Result<Taken, String> {
        kafka.messages += 1;
        if payload.starts_with(crate::stats_msg::MAGIC) {
            return Ok(match crate::stats_msg::decode(payload) {
                Ok((id, seq, rows)) => {
                    let key = format!("{id:016x}:stats");
                    if seq > self.last_seq(&key, kafka) {
                        self.rows.extend(rows);
                        self.seqs.insert(key, seq);
                    }
                    Taken::Kept
                }
                Err(e) => {
                    kafka.records_dropped += 1;
                    Taken::BadStats(e)
                }
            });
        }
        match codec::decode(payload) {
            Ok((h, records)) => {
                let key = seq_key(&h);
                if h.seq <= self.last_seq(&key, kafka) {
                    kafka.duplicates_skipped += records.len() as u64;
                } else {
                    let w = match self.writer.as_mut() {
                        Some(w) => w,
                        None => self.writer.insert(new_file(dataset, manifest)?),
                    };
                    for r in &records {
                        w.push(r).map_err(|e| e.to_string())?;
                        self.frames.add(r);
                    }
                    kafka.records += records.len() as u64;
                    self.seqs.insert(key, h.seq);
                }
                Ok(Taken::Kept)
            }
            Err(e) => {
                kafka.records_dropped += 1;
                Ok(Taken::BadBatch(e.to_string()))
            }
        }
    }

    /// The last sequence number of `key` read or on disk (0: none).
    fn last_seq(&self, key: &str, kafka: &KafkaInfo) -> u64 {
        self.seqs
            .get(key)
            .or_else(|| kafka.written.get(key))
            .copied()
            .unwrap_or(0)
    }

    /// Forgets it all (the partitions went to another collector).
    fn discard(&mut self) {
        if let Some(w) = self.writer.take() {
            w.discard();
        }
        *self = Unwritten::default();
    }

    /// Finishes the open file and writes the stats rows, then records them
    /// and the sequence numbers they cover in the manifest: in that order
    /// (the caller then commits the offsets, [`commit`]).
    fn make_durable(
        &mut self,
        dataset: &Dataset,
        manifest: &mut Manifest,
        kafka: &mut KafkaInfo,
        stats: &mut FrameStats,
    ) -> Result<(), String> {
        if let Some(w) = self.writer.take() {
            let summary = w.finish().map_err(|e| e.to_string())?;
            manifest.files.packets.push(summary);
        }
        if !self.rows.is_empty() {
            let dir = dataset
                .subdir(store::dataset::STATS_DIR)
                .map_err(|e| e.to_string())?;
            let mut n = manifest.files.stats.len();
            let name = loop {
                let name = format!("k{n:05}.parquet");
                if !dir.join(&name).exists() {
                    break name;
                }
                n += 1;
            };
            store::stats::write_stats_file(&dir.join(&name), &self.rows)
                .map_err(|e| e.to_string())?;
            manifest
                .files
                .stats
                .push(format!("{}/{name}", store::dataset::STATS_DIR));
        }
        kafka.written.extend(self.seqs.drain());
        stats.merge(&self.frames);
        *self = Unwritten::default();
        manifest.counts = stats.counts();
        manifest.time_span = (stats.frames > 0).then(|| TimeSpan::new(stats.ts_min, stats.ts_max));
        manifest.kafka = Some(kafka.clone());
        dataset
            .write_manifest(manifest)
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// Commits the offsets read, once what they hold is durable
/// ([`Unwritten::make_durable`]). A failed commit loses nothing: the
/// batches come again and are skipped by their sequence numbers.
fn commit(consumer: &BaseConsumer<Revocations>) {
    if let Err(e) = consumer.commit_consumer_state(CommitMode::Sync) {
        eprintln!(
            "weir: warning: committing offsets: {e} (the batches will be skipped when read \
             again)"
        );
    }
}

fn new_file(dataset: &Dataset, manifest: &Manifest) -> Result<PacketWriter, String> {
    let seq = manifest.files.packets.len() as u32;
    // Names a collector never used before, also after a kill.
    let mut n = seq;
    loop {
        let (path, rel) = dataset.packet_file(0, n);
        if !path.exists() {
            return PacketWriter::create(&path, &rel, PacketWriterOptions::default())
                .map_err(|e| e.to_string());
        }
        n += 1;
    }
}

/// A collector's dataset: made new, or taken up again after a stop or a
/// kill (files the manifest does not list are removed first).
fn open_or_create(root: &Path, opts: &CollectOptions) -> Result<(Dataset, bool, Manifest), String> {
    if root.join(store::dataset::MANIFEST).is_file() {
        let ds = Dataset::open(root)
            .map_err(|e| e.to_string())?
            .signed_with(opts.sign_key.clone())
            .published_to(opts.publisher.clone());
        let m = ds.read_manifest().map_err(|e| e.to_string())?;
        let k = m
            .kafka
            .as_ref()
            .filter(|k| k.role == "collector")
            .ok_or_else(|| {
                format!(
                    "{}: is a weir dataset not made by weir collect; give a new directory",
                    root.display()
                )
            })?;
        if k.topic != opts.topic || k.group.as_deref() != Some(opts.group.as_str()) {
            return Err(format!(
                "{}: collected topic {} for group {}; go on with the same --topic and --group, \
                 or give a new directory",
                root.display(),
                k.topic,
                k.group.as_deref().unwrap_or("?")
            ));
        }
        let listed: Vec<&str> = m
            .files
            .packets
            .iter()
            .map(|f| f.path.as_str())
            .chain(m.files.stats.iter().map(String::as_str))
            .collect();
        for sub in [store::dataset::PACKETS_DIR, store::dataset::STATS_DIR] {
            let dir = root.join(sub);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries {
                let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
                let rel = format!("{sub}/{}", e.file_name().to_string_lossy());
                if !listed.contains(&rel.as_str()) {
                    std::fs::remove_file(e.path())
                        .map_err(|err| format!("{}: {err}", e.path().display()))?;
                }
            }
        }
        return Ok((ds, true, m));
    }
    let ds = Dataset::create(root, false)
        .map_err(|e| e.to_string())?
        .signed_with(opts.sign_key.clone())
        .published_to(opts.publisher.clone());
    let m = Manifest {
        kafka: Some(KafkaInfo {
            role: "collector".into(),
            brokers: opts.brokers.clone(),
            topic: opts.topic.clone(),
            group: Some(opts.group.clone()),
            ..Default::default()
        }),
        // The stream carries no seal: the chain names what it read.
        integrity: Some(store::integrity::Integrity::new(vec![
            store::integrity::ChainInput {
                by: "collect".into(),
                path: format!("kafka topic {} (group {})", opts.topic, opts.group),
                seal: None,
            },
        ])),
        ..Manifest::new(
            "collect",
            "the capturing boxes' (records as they captured them)",
            PacketWriterOptions::default().order,
        )
    };
    ds.write_manifest(&m).map_err(|e| e.to_string())?;
    Ok((ds, false, m))
}

#[cfg(test)]
mod tests;
