//! `weir capture`: live capture into a dataset (or, with -w, a pcap file).

use std::ffi::CString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use capture::{Interface, RingOptions};
use clap::Args;
use ingest::live::{self, Ended, LiveOptions, PcapOut, Second};
use store::manifest::{group_digits, human_bytes};

use crate::units::{parse_duration, parse_size};

#[derive(Args)]
pub struct CaptureArgs {
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
    /// of a second at 10 Gb/s, bounded by free memory).
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
    /// worker's first 64Mi is ready before capture starts; the rest is
    /// added in the background at idle priority.
    #[arg(long = "buffer", alias = "staging", value_parser = parse_size, value_name = "SIZE")]
    buffer: Option<u64>,
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
    /// --rotate-size says otherwise.
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
    #[arg(short = 'Z', value_name = "USER")]
    user: Option<String>,
    /// Keep only share K of N of the flows (e.g. 0/2 on one box, 1/2 on
    /// another, both on the same mirrored traffic): a filter in the kernel
    /// keeps the frames whose weir flow hash modulo N is K, both
    /// directions of a flow together; frames without one (ARP) go to 0.
    #[arg(long, value_name = "K/N")]
    shard: Option<capture::Shard>,
    /// Do not put the interfaces into promiscuous mode.
    #[arg(short = 'p', long = "no-promiscuous-mode")]
    no_promisc: bool,
    /// Print one JSON object a second on standard output.
    #[arg(long)]
    stats_json: bool,
    /// Replace DATASET if it is an existing weir dataset.
    #[arg(long)]
    force: bool,
    /// No live line and no summary.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    rpc: crate::rpc_args::RpcArgs,
    /// Also stream the packet records to Kafka (host:port[,host:port]):
    /// zstd-compressed batches, each frame to the partition of its flow
    /// hash. A slow broker never slows the capture: batches that find the
    /// queue full are dropped and counted in the manifest.
    #[arg(long, value_name = "BROKERS", requires = "topic")]
    kafka: Option<String>,
    /// The Kafka topic (it must exist, or the broker must create topics).
    #[arg(long, value_name = "TOPIC", requires = "kafka")]
    topic: Option<String>,
    /// A filter in tcpdump syntax, as trailing words (`tcp port 80`).
    #[arg(trailing_var_arg = true, value_name = "FILTER")]
    filter: Vec<String>,
}

/// The default pcap staging: an eighth of the memory available, from
/// 256 MiB to 4 GiB (at 10 Gb/s, 4 GiB rides out a 3-second stall of the
/// disk).
/// The rotation size of a `--max-disk` ring without `--rotate-size`: a
/// ring of about sixteen files, so that the oldest sixteenth goes at a time.
fn ring_file_bytes(max_disk: u64) -> u64 {
    (max_disk / 16).clamp(1 << 20, 1 << 30)
}

fn default_buffer_bytes() -> u64 {
    ((mem_available() / 8.0) as u64).clamp(256 << 20, 4 << 30)
}

fn mem_available() -> f64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(2e9, |kb| kb * 1024.0)
}

/// The default ring: a quarter second of 10 Gb/s, at most an eighth of the
/// memory available, shared by all rings.
fn default_ring_bytes(rings: usize) -> usize {
    let quarter_second = 10e9 / 8.0 / 4.0;
    let avail = mem_available();
    let per_ring = (avail / 8.0 / rings.max(1) as f64).min(quarter_second);
    (per_ring as usize).max(8 << 20)
}

pub fn run(a: CaptureArgs) -> Result<ExitCode, String> {
    if a.output.is_none() && a.write.is_none() {
        return Err(
            "say where to write: -o DATASET (records, pcap and stats) or -w FILE.pcap".into(),
        );
    }
    if a.snaplen < 64 {
        return Err(format!(
            "-s {} is too short to hold the headers weir parses (at least 64)",
            a.snaplen
        ));
    }
    let interfaces = a
        .interfaces
        .iter()
        .map(|n| Interface::by_name(n).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    for i in &interfaces {
        if !i.up {
            eprintln!(
                "weir: warning: {} is down; it will see no traffic until `ip link set {} up`",
                i.name, i.name
            );
        }
    }
    let workers = a
        .workers
        .unwrap_or(if a.write.is_some() { 1 } else { num_cpus() })
        .max(1);
    let rings = workers * interfaces.len();
    let ring_bytes = match a.buffer_kib {
        Some(kib) => (kib as usize) << 10,
        None => default_ring_bytes(rings),
    };
    if !a.ring_block.is_power_of_two() || !(64 << 10..=64 << 20).contains(&a.ring_block) {
        return Err(format!(
            "--ring-block {}: a ring block is a power of two from 64Ki to 64Mi bytes (e.g. --ring-block 4Mi)",
            a.ring_block
        ));
    }
    let block = a.ring_block as usize;
    let ring = RingOptions::with_total(ring_bytes.max(4 * block), block);
    let (pcap_on, records_on) = match (&a.write, a.pcap, a.records) {
        (Some(_), _, true) => return Err("-w writes only pcap; use -o DATASET for records".into()),
        (Some(_), _, _) => (true, false),
        (None, false, false) => (true, true),
        (None, p, r) => (p, r),
    };
    // Checked now, made once the rings are open (with its manifest).
    if let Some(dir) = &a.output {
        store::Dataset::check_new(dir, a.force).map_err(|e| e.to_string())?;
    }
    let pcap = if pcap_on {
        let (dir, single) = match (&a.output, &a.write) {
            (Some(d), _) => (d.join(store::dataset::PCAP_DIR), None),
            (None, Some(file)) => {
                let dir = file
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                check_writable(dir)?;
                let name = file
                    .file_name()
                    .ok_or("-w needs a file name")?
                    .to_string_lossy()
                    .into_owned();
                (dir.to_path_buf(), Some(name))
            }
            (None, None) => unreachable!("checked above"),
        };
        let staging = a.buffer.unwrap_or_else(default_buffer_bytes);
        Some(PcapOut {
            dir,
            single_name: single,
            rotate_bytes: a.rotate_size.or(a.max_disk.map(ring_file_bytes)),
            rotate: a.rotate_time.or_else(|| {
                // A dataset's pcap files publish with its records, unless
                // sized otherwise.
                (a.output.is_some() && a.rotate_size.is_none() && a.max_disk.is_none())
                    .then_some(a.records_every)
            }),
            staging_bytes: (staging / rings as u64).max(1 << 20) as usize,
            codec: a.compress,
            direct: !a.no_direct,
            on_full: if a.on_full == "drop" {
                pcapio::spool::OnFull::Drop
            } else {
                pcapio::spool::OnFull::Stop
            },
            max_disk: a.max_disk,
            max_age: a.max_age,
        })
    } else {
        None
    };
    let filter = (!a.filter.is_empty()).then(|| a.filter.join(" "));
    let asks = crate::rpc_args::filter_asks_for_rpc(filter.as_deref());
    if a.records_every < Duration::from_secs(1) {
        return Err(format!(
            "--records-every {:?}: at least 1s (each time closes a file per worker)",
            a.records_every
        ));
    }
    let worker = ingest::WorkerOptions {
        rpc: Some(a.rpc.options(asks)),
        file_every: Some(a.records_every),
        ..Default::default()
    };
    let kafka = match (&a.kafka, &a.topic) {
        (Some(brokers), Some(topic)) => {
            if !records_on {
                return Err(
                    "--kafka streams the packet records: give -o DATASET with records on".into(),
                );
            }
            let id = capture_id();
            let out = stream::producer::KafkaOut::start(
                stream::producer::ProducerOptions::new(brokers, topic),
                id,
            )?;
            Some((out, id))
        }
        _ => None,
    };
    let taps = kafka.as_ref().map(|(out, _)| {
        let make = out.tap_maker();
        ingest::Taps {
            records: std::sync::Arc::new(move |worker| {
                Box::new(make(worker)) as Box<dyn ingest::RecordTap>
            }),
            stats: Some(std::sync::Arc::new(out.stats_sender())),
        }
    });
    let opts = LiveOptions {
        interfaces,
        workers_per_iface: workers,
        ring,
        snaplen: a.snaplen,
        filter,
        shard: a.shard,
        promiscuous: !a.no_promisc,
        pcap,
        records: records_on,
        count: a.count,
        duration: a.duration,
        worker,
        taps,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    let opened = live::open(opts).map_err(|e| e.to_string())?;
    let dataset = match &a.output {
        Some(dir) => {
            let d = store::Dataset::create_with_manifest(dir, a.force, &opened.manifest())
                .map_err(|e| e.to_string())?;
            if pcap_on {
                d.subdir(store::dataset::PCAP_DIR)
                    .map_err(|e| e.to_string())?;
            }
            Some(d)
        }
        None => None,
    };
    if let Some(user) = &a.user {
        drop_privileges(user, a.output.as_deref().or(a.write.as_deref()))?;
    }
    crate::signals::install();
    let live_line = !a.quiet && !a.stats_json && std::io::stderr().is_terminal();
    let rings = opened.rings();
    let ring_size = human_bytes(ring.total() as u64);
    // Said once the workers are set up, so that "capturing" means it.
    let say_ready = || {
        if !a.quiet {
            eprintln!(
                "weir: capturing on {} ({} ring{} of {}){}{}; Ctrl-C to stop",
                a.interfaces.join(", "),
                rings,
                if rings == 1 { "" } else { "s" },
                ring_size,
                a.shard
                    .map(|s| format!(", flow share {s}"))
                    .unwrap_or_default(),
                a.filter
                    .is_empty()
                    .then(String::new)
                    .unwrap_or_else(|| format!(", filter {:?}", a.filter.join(" ")))
            );
        }
    };
    let report = opened
        .run(dataset.as_ref(), &crate::signals::STOP, say_ready, |s: &Second| {
            if a.stats_json {
                println!(
                    "{{\"elapsed_s\":{:.3},\"frames\":{},\"bytes\":{},\"kernel_drops\":{},\"pcap_drops\":{},\"total_frames\":{},\"total_kernel_drops\":{},\"total_pcap_drops\":{}}}",
                    s.elapsed.as_secs_f64(), s.frames, s.bytes, s.kernel_drops, s.pcap_drops,
                    s.total_frames, s.total_kernel_drops, s.total_pcap_drops
                );
                let _ = std::io::stdout().flush();
            } else if live_line {
                eprint!(
                    "\r{:>10} pkt/s {:>7.3} Gb/s  captured {:>14}  drops: kernel {}  pcap {}   ",
                    group_digits(s.frames),
                    s.bytes as f64 * 8.0 / 1e9,
                    group_digits(s.total_frames),
                    group_digits(s.total_kernel_drops),
                    group_digits(s.total_pcap_drops)
                );
            }
        })
        .map_err(|e| e.to_string())?;
    if live_line {
        eprintln!();
    }
    let mut report = report;
    if let Some((out, id)) = kafka {
        // Every worker's tap is gone (flushed): wait for the broker, then
        // say in the manifest what the stream did.
        let counters = out.counters().clone();
        let partitions = out.partitions();
        let sent = out.finish();
        let info = stream::producer::manifest_info(
            a.kafka.as_deref().unwrap_or_default(),
            a.topic.as_deref().unwrap_or_default(),
            id,
            partitions,
            &counters,
        );
        if let Err(e) = sent {
            report.warnings.push(e);
        }
        if info.records_dropped + info.records_failed > 0 {
            report.warnings.push(format!(
                "Kafka: {} records dropped (queue full), {} not taken by the broker; the \
                 dataset has them all",
                info.records_dropped, info.records_failed
            ));
        }
        if let (Some(ds), Some(m)) = (dataset.as_ref(), report.manifest.as_mut()) {
            m.kafka = Some(info);
            ds.write_manifest(m).map_err(|e| e.to_string())?;
        }
    }
    if !a.quiet {
        let ended = match report.ended {
            Ended::Count => "count reached",
            Ended::Duration => "duration over",
            Ended::Signal => "interrupted",
            Ended::DiskFull => "the disk is full (--on-full stop)",
        };
        println!(
            "weir capture: {} frames in {:.1} s ({}); kernel saw {}, dropped {}; pcap staging dropped {}",
            group_digits(report.frames),
            report.elapsed.as_secs_f64(),
            ended,
            group_digits(report.kernel_seen),
            group_digits(report.kernel_drops),
            group_digits(report.pcap_drops)
        );
        if report.pcap_write_lost > 0 {
            println!(
                "weir capture: {} of the pcap drops were frames lost to failed writes",
                group_digits(report.pcap_write_lost)
            );
        }
        if report.pcap_removed > 0 {
            println!(
                "weir capture: retention removed {} pcap file{} (listed in the manifest)",
                report.pcap_removed,
                if report.pcap_removed == 1 { "" } else { "s" }
            );
        }
        match (&report.manifest, &a.output, &a.write) {
            (Some(m), Some(dir), _) => {
                println!("weir capture: dataset {}", dir.display());
                print!("{}", crate::describe::describe(m));
            }
            (_, _, Some(_)) => {
                for f in &report.pcap_files {
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
    for w in &report.warnings {
        eprintln!("weir: warning: {w}");
    }
    Ok(if report.warnings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Fails early, with the directory named, if files cannot be made there.
fn check_writable(dir: &Path) -> Result<(), String> {
    let probe = dir.join(format!(".weir-write-test-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| {
            format!(
                "{}: cannot write there ({e}); choose a writable directory",
                dir.display()
            )
        })
}

/// Gives the output to `user` and becomes that user (tcpdump's -Z).
fn drop_privileges(user: &str, output: Option<&Path>) -> Result<(), String> {
    let c = CString::new(user).map_err(|_| format!("-Z {user:?}: not a user name"))?;
    // SAFETY: getpwnam with a valid C string; the result is read at once.
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if pw.is_null() {
        return Err(format!("-Z {user}: no such user"));
    }
    // SAFETY: pw is a valid passwd entry.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    if let Some(out) = output {
        let dirs: Vec<PathBuf> = if out.is_dir() {
            std::iter::once(out.to_path_buf())
                .chain(
                    std::fs::read_dir(out)
                        .into_iter()
                        .flatten()
                        .flatten()
                        .map(|e| e.path()),
                )
                .collect()
        } else {
            out.parent().map(Path::to_path_buf).into_iter().collect()
        };
        for d in dirs {
            std::os::unix::fs::chown(&d, Some(uid), Some(gid))
                .map_err(|e| format!("{}: cannot give it to {user}: {e}", d.display()))?;
        }
    }
    // SAFETY: plain credential calls; each result is checked.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setgid(gid) != 0
            || libc::setuid(uid) != 0
        {
            return Err(format!(
                "-Z {user}: could not become that user: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}
