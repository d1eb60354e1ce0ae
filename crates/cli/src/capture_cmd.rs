//! `weir capture`: live capture into a dataset (or, with -w, a pcap file).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use ingest::capture_run::{
    CaptureEvent, CaptureOptions, CaptureReport, CaptureScope, PcapKeeping, PcapPolicy,
    RecordStream, Target, capture,
};
use ingest::live::{Ended, Second};
use pcapio::spool::OnFull;
use util::fmt::{group_digits, human_bytes};

use crate::units::{parse_duration, parse_size};

#[derive(Args)]
pub struct CaptureArgs {
    /// Read flags from this TOML file: each key is a flag's long name
    /// (`interface = ["eth0"]`, `max-disk = "500G"`, `pcap = true`,
    /// `filter = "tcp port 80"`); flags on the command line override it.
    #[arg(long, value_name = "FILE")]
    #[allow(dead_code)] // read by config_file::expand, before parsing
    config: Option<PathBuf>,
    /// Interface to capture on (repeat for several).
    #[arg(short = 'i', long = "interface", value_name = "IF", required = true)]
    interfaces: Vec<String>,
    /// The dataset directory to create.
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DATASET",
        conflicts_with = "write"
    )]
    output: Option<PathBuf>,
    /// Only full frames, to this pcap file (with rotation: FILE, FILE.1, ...).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    write: Option<PathBuf>,
    /// Keep full frames in pcap files (default with -o: pcap and records).
    #[arg(long)]
    pcap: bool,
    /// Keep packet records in Parquet (default with -o: pcap and records).
    #[arg(long)]
    records: bool,
    /// Bytes of each frame to keep (pcap); records always parse what is kept.
    #[arg(short = 's', long = "snaplen", default_value_t = 262144)]
    snaplen: u32,
    /// Stop after this many frames.
    #[arg(short = 'c', long = "count")]
    count: Option<u64>,
    /// Stop after this long (e.g. 30s, 5m).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// With -o: close and publish records files (and, unless --rotate-size
    /// or --rotate-time say otherwise, pcap files) at least this often, so
    /// that weir analyze, sql and read see what was received up to that
    /// long ago while the capture runs.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "D")]
    records_every: Duration,
    /// Receive ring per worker, in KiB as for tcpdump (default: a quarter
    /// of a second at 10 Gb/s, bounded by free memory). A large ring is
    /// set up while capturing on a 16Mi one, so recording starts at once.
    #[arg(short = 'B', long = "buffer-size", value_name = "KIB")]
    buffer_kib: Option<u64>,
    /// Size of one ring block (the kernel hands frames over a block at a
    /// time); the ring holds -B / this many blocks. A power of two from
    /// 64Ki to 64Mi.
    #[arg(long, value_parser = parse_size, default_value = "1Mi", value_name = "SIZE")]
    ring_block: u64,
    /// Workers (rings) per interface; the kernel spreads flows over them.
    #[arg(short = 'j', long)]
    workers: Option<usize>,
    /// Start a new pcap file when one reaches this size (e.g. 1G).
    #[arg(long, value_parser = parse_size)]
    rotate_size: Option<u64>,
    /// Start a new pcap file this often (e.g. 60s).
    #[arg(long, value_parser = parse_duration)]
    rotate_time: Option<Duration>,
    /// Memory staging full frames for the pcap writers, all workers
    /// together (frames are dropped and counted when it is full). Default:
    /// an eighth of the memory available, from 256Mi up to 4Gi. Each
    /// worker's first 8Mi is ready before capture starts; more is added
    /// only while the writer falls behind, and given back after.
    #[arg(long = "buffer", alias = "staging", value_parser = parse_size, value_name = "SIZE")]
    buffer: Option<u64>,
    /// Staged frames the packet records may fall behind the pcap files by,
    /// all workers together, before the records of further frames are put
    /// off and built from the pcap files instead (when the records catch
    /// up, and at the end). 0 builds every record from the pcap files,
    /// leaving the capture's cores to the capture. Default: a quarter of
    /// --buffer, at most 64Mi a worker.
    #[arg(long = "records-lag", value_parser = parse_size, value_name = "SIZE")]
    records_lag: Option<u64>,
    /// Compress pcap files off the capture path: none, lz4, zstd,
    /// zstd:LEVEL (-7..19), or auto (the zstd level follows the writer's
    /// backlog, down to storing blocks as they are). Compressed files are
    /// in zstd's seekable format (.pcap.zst) or LZ4 frames (.pcap.lz4).
    #[arg(long, default_value = "none", value_name = "CODEC")]
    compress: pcapio::seekable::Codec,
    /// Write pcap files through the page cache instead of O_DIRECT.
    #[arg(long)]
    no_direct: bool,
    /// Keep the pcap files under this size (e.g. 500G) as a ring: once it
    /// is full, each new file is written over the oldest in place (its
    /// space, on tmpfs its pages, reused; the manifest names what was
    /// overwritten). Files rotate at a sixteenth of it (1Mi to 1Gi) unless
    /// --rotate-size says otherwise. With --upload it bounds the local
    /// copy only: a file's local copy goes once it is in the bucket (the
    /// dataset keeps it there), and files not uploaded yet are kept.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    max_disk: Option<u64>,
    /// Delete finished pcap files once their newest frame is this old
    /// (e.g. 7d, 12h).
    #[arg(long, value_parser = parse_duration, value_name = "AGE")]
    max_age: Option<Duration>,
    /// When the disk is full: stop (end the capture cleanly) or drop
    /// (keep capturing; frames not written are counted, writing resumes
    /// when space returns).
    #[arg(long, default_value = "stop", value_parser = ["stop", "drop"])]
    on_full: String,
    /// Drop root privileges to this user once the sockets are open.
    #[arg(short = 'Z', long = "user", value_name = "USER")]
    user: Option<String>,
    /// Keep only share K of N of the flows (e.g. 0/2 on one box, 1/2 on
    /// another, both on the same mirrored traffic): a filter in the kernel
    /// keeps the frames whose weir flow hash modulo N is K, both
    /// directions of a flow together; frames without one (ARP) go to 0.
    #[arg(long, value_name = "K/N")]
    shard: Option<capture::Shard>,
    /// How an interface's workers share its frames: flow (weir's flow
    /// hash in an eBPF program, through tunnels: each worker gets whole
    /// flows by the key the records carry; needs root or CAP_BPF), kernel
    /// (the kernel's own symmetric hash, which stops at a UDP tunnel's
    /// outer header), or auto: flow where the process may load the
    /// program, else kernel, with a warning.
    #[arg(long, default_value = "auto", value_name = "auto|flow|kernel")]
    fanout: capture::FanoutBy,
    /// Do not put the interfaces into promiscuous mode.
    #[arg(short = 'p', long = "no-promiscuous-mode")]
    no_promisc: bool,
    /// Print one JSON object a second on standard output.
    #[arg(long)]
    stats_json: bool,
    /// Replace DATASET if it is an existing weir dataset.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    sign: crate::verify_cmd::SignKeyArg,
    /// No live line and no summary.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    rpc: crate::rpc_args::RpcArgs,
    #[command(flatten)]
    app: crate::app_args::AppArgs,
    /// Also stream the packet records to Kafka (host:port[,host:port]):
    /// zstd-compressed batches, each frame to the partition of its flow
    /// hash. A slow broker never slows the capture: batches that find the
    /// queue full are dropped and counted in the manifest.
    #[arg(long, value_name = "BROKERS", requires = "topic")]
    kafka: Option<String>,
    /// The Kafka topic (it must exist, or the broker must create topics).
    #[arg(long, value_name = "TOPIC", requires = "kafka")]
    topic: Option<String>,
    /// Memory for compressed record batches waiting for the broker: how
    /// much of a slow or stopped broker the capture rides out before
    /// batches are dropped (counted in the manifest). At least 1Mi.
    #[arg(long, value_parser = parse_size, default_value = "256Mi", value_name = "SIZE",
          requires = "kafka")]
    kafka_buffer: u64,
    #[command(flatten)]
    upload: crate::upload_args::UploadArg,
    /// A filter in tcpdump syntax, as trailing words (`tcp port 80`).
    #[arg(trailing_var_arg = true, value_name = "FILTER")]
    filter: Vec<String>,
}

pub fn run(a: CaptureArgs) -> Result<ExitCode, String> {
    let target = match (&a.output, &a.write) {
        (Some(dir), _) => {
            let (pcap, records) = match (a.pcap, a.records) {
                (false, false) => (true, true),
                (p, r) => (p, r),
            };
            Target::Dataset {
                dir: dir.clone(),
                force: a.force,
                pcap,
                records,
            }
        }
        (None, Some(_)) if a.records => {
            return Err("-w writes only pcap; use -o DATASET for records".into());
        }
        (None, Some(file)) => Target::PcapFile(file.clone()),
        (None, None) => {
            return Err(
                "say where to write: -o DATASET (records, pcap and stats) or -w FILE.pcap".into(),
            );
        }
    };
    let filter = (!a.filter.is_empty()).then(|| a.filter.join(" "));
    let publisher = match (&a.upload.upload, &a.output) {
        (None, _) => None,
        (Some(_), None) => return Err("--upload copies a dataset: give -o DATASET".into()),
        (Some(_), Some(dir)) => {
            // Its threads (and the object store's) start without the
            // capabilities the capture drops once the rings are open.
            let upload = a.upload.clone();
            let (dir, force) = (dir.clone(), a.force);
            capture::privilege::without_capabilities(move || {
                upload.start(&dir, force, "weir capture")
            })??
            .map(|u| u as std::sync::Arc<dyn util::storage::Publisher>)
        }
    };
    let opts = CaptureOptions {
        interfaces: a.interfaces.clone(),
        target,
        workers: a.workers,
        ring_bytes: a.buffer_kib.map(|kib| (kib as usize) << 10),
        ring_block: a.ring_block as usize,
        scope: CaptureScope {
            snaplen: a.snaplen,
            filter,
            shard: a.shard,
            fanout: a.fanout,
            promiscuous: !a.no_promisc,
            count: a.count,
            duration: a.duration,
        },
        pcap: PcapPolicy {
            rotate_size: a.rotate_size,
            rotate_time: a.rotate_time,
            staging_bytes: a.buffer,
            records_lag: a.records_lag,
            on_full: if a.on_full == "drop" {
                OnFull::Drop
            } else {
                OnFull::Stop
            },
            keep: PcapKeeping {
                codec: a.compress,
                direct: !a.no_direct,
                max_disk: a.max_disk,
                max_age: a.max_age,
            },
        },
        records_every: a.records_every,
        rpc: a.rpc.options(),
        app: a.app.options(),
        user: a.user.clone(),
        sign_key: a.sign.load()?,
        publisher,
        publish_wait: crate::upload_args::CAPTURE_WAIT,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    let stream: Option<Box<dyn RecordStream>> = match (&a.kafka, &a.topic) {
        (Some(brokers), Some(topic)) => {
            if a.kafka_buffer < stream::producer::MIN_BUFFER_BYTES {
                return Err(format!(
                    "--kafka-buffer {}: at least 1Mi (a batch of records is up to 512Ki)",
                    a.kafka_buffer
                ));
            }
            let opts = stream::producer::ProducerOptions {
                buffer_bytes: a.kafka_buffer,
                ..stream::producer::ProducerOptions::new(brokers, topic)
            };
            Some(Box::new(stream::producer::KafkaStream::start(
                opts,
                capture_id(),
            )?))
        }
        _ => None,
    };
    crate::signals::install();
    let live_line = !a.quiet && !a.stats_json && std::io::stderr().is_terminal();
    let mut disk_full = false;
    let report = capture(opts, stream, &crate::signals::STOP, |e| match e {
        CaptureEvent::Warning(w) => eprintln!("weir: warning: {w}"),
        // Said once the workers are set up, so that "capturing" means it.
        CaptureEvent::Ready { rings, ring_bytes } => {
            if !a.quiet {
                say_ready(&a, rings, ring_bytes);
            }
        }
        CaptureEvent::Second(s) => {
            if s.disk_full != disk_full {
                disk_full = s.disk_full;
                if live_line {
                    eprintln!();
                }
                eprintln!(
                    "{}",
                    if disk_full {
                        "weir: the disk is full: records and stats not written are dropped and \
                         counted until space returns (--on-full drop)"
                    } else {
                        "weir: space returned: writing again"
                    }
                );
            }
            if a.stats_json {
                print_second_json(s);
            } else if live_line {
                let upload = s.upload.map_or(String::new(), |u| {
                    format!("  to upload {}", human_bytes(u.backlog_bytes))
                });
                eprint!(
                    "\r{:>10} pkt/s {:>7.3} Gb/s  captured {:>14}  drops: kernel {}  pcap {}{upload}   ",
                    group_digits(s.frames),
                    s.bytes as f64 * 8.0 / 1e9,
                    group_digits(s.total_frames),
                    group_digits(s.total_kernel_drops),
                    group_digits(s.total_pcap_drops)
                );
            }
        }
    })?;
    if live_line {
        eprintln!();
    }
    if !a.quiet {
        print_summary(&a, &report);
    }
    let warnings = &report.live.warnings;
    for w in warnings {
        eprintln!("weir: warning: {w}");
    }
    Ok(if warnings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn say_ready(a: &CaptureArgs, rings: usize, ring_bytes: usize) {
    eprintln!(
        "weir: capturing on {} ({} ring{} of {}){}{}; Ctrl-C to stop",
        a.interfaces.join(", "),
        rings,
        if rings == 1 { "" } else { "s" },
        human_bytes(ring_bytes as u64),
        a.shard
            .map(|s| format!(", flow share {s}"))
            .unwrap_or_default(),
        a.filter
            .is_empty()
            .then(String::new)
            .unwrap_or_else(|| format!(", filter {:?}", a.filter.join(" ")))
    );
}

fn print_second_json(s: &Second) {
    let upload = s.upload.map_or(String::new(), |u| {
        format!(
            ",\"upload_bytes\":{},\"upload_failures\":{},\"upload_backlog_bytes\":{},\"upload_lag_ms\":{}",
            u.bytes, u.failures, u.backlog_bytes, u.lag_ms
        )
    });
    println!(
        "{{\"elapsed_s\":{:.3},\"frames\":{},\"bytes\":{},\"kernel_drops\":{},\"pcap_drops\":{},\"total_frames\":{},\"total_kernel_drops\":{},\"total_pcap_drops\":{}{upload}}}",
        s.elapsed.as_secs_f64(),
        s.frames,
        s.bytes,
        s.kernel_drops,
        s.pcap_drops,
        s.total_frames,
        s.total_kernel_drops,
        s.total_pcap_drops
    );
    let _ = std::io::stdout().flush();
}

fn print_summary(a: &CaptureArgs, report: &CaptureReport) {
    let r = &report.live;
    let ended = match r.ended {
        Ended::Count => "--count reached",
        Ended::Duration => "--duration over",
        Ended::Signal => "interrupted",
        Ended::DiskFull => "the disk is full (--on-full stop)",
    };
    println!(
        "weir capture: captured {} frames in {:.1} s (stopped: {ended})",
        group_digits(r.frames),
        r.elapsed.as_secs_f64(),
    );
    // Its words are what scripts (bench/) look for: "kernel saw",
    // "dropped", "pcap staging dropped".
    println!(
        "  the kernel saw {} frames and dropped {}; pcap staging dropped {}",
        group_digits(r.kernel_seen),
        group_digits(r.kernel_drops),
        group_digits(r.pcap_drops)
    );
    if r.pcap_write_lost > 0 {
        println!(
            "weir capture: {} of the pcap drops were frames lost to failed writes",
            group_digits(r.pcap_write_lost)
        );
    }
    if r.pcap_removed > 0 {
        println!(
            "weir capture: retention removed {} pcap file{} (listed in the manifest)",
            r.pcap_removed,
            if r.pcap_removed == 1 { "" } else { "s" }
        );
    }
    match (&r.manifest, &report.dataset, &a.write) {
        (Some(m), Some(dir), _) => {
            println!("weir capture: dataset {}", dir.display());
            print!("{}", crate::describe::describe(m));
            crate::upload_args::say_uploaded(m, dir, "weir capture");
        }
        (_, _, Some(_)) => {
            for f in &r.pcap_files {
                println!(
                    "weir capture: wrote {} ({} frames)",
                    f.name,
                    group_digits(f.frames)
                );
            }
        }
        _ => {}
    }
}

/// A random id for the batches of this capture (the collectors' key for
/// skipping what they already wrote).
fn capture_id() -> u64 {
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_err()
    {
        let t = store::time::now_ns() as u64;
        b = (t ^ (std::process::id() as u64).rotate_left(32)).to_le_bytes();
    }
    u64::from_le_bytes(b)
}
