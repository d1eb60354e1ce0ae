//! `weir stack`: record the host's own network stack per socket (eBPF)
//! into a dataset's stack table.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, ValueEnum};
use util::fmt::group_digits;

use crate::units::{parse_duration, parse_size};

/// What the interval table is made from (`--events changes`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LevelArg {
    /// Each TCP socket's own counters and state, read by a socket walk
    /// every --interval: nothing on the packet path.
    Walk,
    /// Also programs on every send, receive, incoming segment and device
    /// frame: what the application wrote and read against what crossed
    /// the device.
    Device,
    /// Also the write-to-wire delay of sampled writes.
    Delay,
}

/// What comes one by one.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Events {
    /// State changes and retransmissions; every --interval each socket's
    /// counters go into the stack_intervals table (see --level).
    Changes,
    /// Every event, one row each (the stack table); costs the traffic
    /// several times more.
    All,
}

#[derive(Args)]
pub struct StackArgs {
    /// The dataset: a new directory, or an existing dataset (say, a capture
    /// of the same traffic started first) that gets a stack table beside
    /// its packets.
    #[arg(short = 'o', long = "output", value_name = "DATASET")]
    output: PathBuf,
    /// Stop after this long (e.g. 30s, 5m); otherwise at Ctrl-C.
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Which events are recorded one by one: `changes` (the default: the
    /// rest is added up per socket and interval in the kernel) or `all`.
    #[arg(long, value_enum, default_value = "changes", value_name = "WHICH")]
    events: Events,
    /// What the interval rows are made from: `walk` (the default: each
    /// socket's own counters, nothing on the packet path), `device` or
    /// `delay`.
    #[arg(long, value_enum, value_name = "LEVEL", conflicts_with_all = ["with_device", "with_delay"])]
    level: Option<LevelArg>,
    /// The application/device split per socket: programs on every send,
    /// receive, incoming segment and device frame (`--level device`).
    #[arg(long)]
    with_device: bool,
    /// ... and the write-to-wire delay histogram (`--level delay`).
    #[arg(long)]
    with_delay: bool,
    /// How often each socket's counters are read and written (the
    /// interval levels).
    #[arg(long, value_parser = parse_duration, default_value = "100ms", value_name = "D")]
    interval: Duration,
    /// Sockets the kernel's per-socket map holds (the default mode); an
    /// update that finds it full is counted as lost.
    #[arg(long, default_value_t = 65536, value_name = "N")]
    sockets: u32,
    /// Only this process (and the sockets it sends or receives on).
    #[arg(long)]
    pid: Option<u32>,
    /// Only processes with this command name (and their sockets).
    #[arg(long)]
    comm: Option<String>,
    /// Only sockets and frames with this port at either end (repeat, up to 8).
    #[arg(long = "port", value_name = "PORT")]
    ports: Vec<u16>,
    /// A cgroup v2 directory: attach sock_ops there (RTT, retransmission
    /// and state callbacks) and keep only its processes' events.
    #[arg(long, value_name = "DIR")]
    cgroup: Option<PathBuf>,
    /// Snapshot every TCP socket's state this often (iter/tcp), in this
    /// namespace and every one under /run/netns.
    #[arg(long, value_parser = parse_duration, value_name = "D")]
    snapshot_every: Option<Duration>,
    /// Each CPU's ring buffer (a power of two); events that do not fit
    /// are counted per type, never lost silently.
    #[arg(long, value_parser = parse_size, default_value = "8Mi", value_name = "SIZE")]
    ring_size: u64,
    /// Memory for events read but not yet written: the writer encodes
    /// Parquet on idle CPU time only, and catches up after a burst.
    #[arg(long, value_parser = parse_size, default_value = "256Mi", value_name = "SIZE")]
    buffer: u64,
    /// Leave out device transmit/receive (fewer events on a busy host).
    #[arg(long)]
    no_devices: bool,
    /// Leave out pure TCP ACKs (no payload, no SYN/FIN/RST) at the
    /// device: about a quarter of a bulk transfer's events.
    #[arg(long)]
    no_device_acks: bool,
    /// Measure what the programs cost: switch the kernel's BPF statistics
    /// on while recording and report each program's runs and CPU time
    /// (adds two clock reads to every run).
    #[arg(long)]
    program_stats: bool,
    /// Events per stack file.
    #[arg(long, default_value_t = 4 << 20, value_name = "ROWS")]
    rotate_rows: u64,
    /// Replace an earlier stack recording in DATASET.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    sign: crate::verify_cmd::SignKeyArg,
    #[command(flatten)]
    upload: crate::upload_args::UploadArg,
    /// No live line and no summary.
    #[arg(short, long)]
    quiet: bool,
}

pub fn run(a: StackArgs) -> Result<ExitCode, String> {
    if a.events == Events::All && (a.level.is_some() || a.with_device || a.with_delay) {
        return Err(
            "--level, --with-device and --with-delay choose what the interval rows are made \
             from; --events all records every event instead: give one or the other"
                .into(),
        );
    }
    let ring_bytes = u32::try_from(a.ring_size).map_err(|_| {
        format!(
            "--ring-size {}: at most 1Gi (the kernel's ring buffer limit here)",
            a.ring_size
        )
    })?;
    let opts = stackrec::StackOptions {
        pid: a.pid,
        comm: a.comm.clone(),
        ports: a.ports.clone(),
        cgroup: a.cgroup.clone(),
        ring_bytes,
        buffer_bytes: a.buffer,
        devices: !a.no_devices,
        device_acks: !a.no_device_acks,
        snapshot_every: a.snapshot_every,
        program_stats: a.program_stats,
        aggregate: a.events == Events::Changes,
        level: match (a.level, a.with_device, a.with_delay) {
            (Some(LevelArg::Delay), _, _) | (None, _, true) => stackrec::Level::Delay,
            (Some(LevelArg::Device), _, _) | (None, true, false) => stackrec::Level::Device,
            _ => stackrec::Level::Walk,
        },
        interval: a.interval,
        sockets: a.sockets,
        duration: a.duration,
        rotate_rows: a.rotate_rows,
        force: a.force,
        sign_key: a.sign.load()?,
        // Into an existing dataset (a capture's), its copy in the bucket
        // is brought up to date.
        publisher: a
            .upload
            .start(
                &a.output,
                a.output.join(store::dataset::MANIFEST).is_file(),
                "weir stack",
            )?
            .map(|u| u as std::sync::Arc<dyn util::storage::Publisher>),
        publish_wait: crate::upload_args::CAPTURE_WAIT,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    crate::signals::install();
    let live_line = !a.quiet && std::io::stderr().is_terminal();
    let report = stackrec::record(
        &a.output,
        &opts,
        &crate::signals::STOP,
        |prepared| {
            if a.quiet {
                return;
            }
            for m in &prepared.mounted {
                eprintln!("weir stack: mounted {m}");
            }
            for w in &prepared.warnings {
                eprintln!("weir stack: warning: {w}");
            }
            eprintln!(
                "weir stack: recording into {}; Ctrl-C to stop",
                a.output.display()
            );
        },
        |s| {
            if live_line {
                eprint!(
                    "\r{:>10} events/s  lost {:>8}  sockets {:>6}   ",
                    group_digits(s.events),
                    group_digits(s.lost),
                    s.sockets
                );
            }
        },
    )
    .map_err(|e| e.to_string())?;
    if live_line {
        eprintln!();
    }
    if !a.quiet {
        let kinds: Vec<String> = report
            .events
            .iter()
            .filter(|(k, n)| **n > 0 && k.as_str() != "interval")
            .map(|(k, n)| format!("{k} {}", group_digits(*n)))
            .collect();
        if a.events == Events::Changes {
            println!(
                "weir stack: {} interval rows (per socket, every {:?})",
                group_digits(report.events.get("interval").copied().unwrap_or(0)),
                a.interval
            );
        }
        println!(
            "weir stack: {} events in {:.1} s ({}), {} lost (ring buffer or socket map full); \
             ended by {}",
            group_digits(
                report.total_events() - report.events.get("interval").copied().unwrap_or(0)
            ),
            report.elapsed.as_secs_f64(),
            if kinds.is_empty() {
                "none".to_string()
            } else {
                kinds.join(", ")
            },
            group_digits(report.total_lost()),
            report.ended_by
        );
        if report.total_lost() > 0 {
            let lost: Vec<String> = report
                .lost
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{k} {}", group_digits(*n)))
                .collect();
            println!(
                "weir stack: lost by type: {} (a larger --ring-size or --sockets, --port or \
                 --no-devices keeps more)",
                lost.join(", ")
            );
        }
        if !report.program_cost.is_empty() {
            let runs: u64 = report.program_cost.values().map(|c| c.runs).sum();
            let ns: u64 = report.program_cost.values().map(|c| c.ns).sum();
            let each: Vec<String> = report
                .program_cost
                .iter()
                .map(|(k, c)| format!("{k} {:.0}", c.ns as f64 / c.runs.max(1) as f64))
                .collect();
            println!(
                "weir stack: programs ran {} times, {:.1} ms of CPU in the kernel; ns per run: {}",
                group_digits(runs),
                ns as f64 / 1e6,
                each.join(", ")
            );
        }
        if report.malformed > 0 {
            println!(
                "weir stack: {} records could not be read (a bug in weir, please report it)",
                report.malformed
            );
        }
        println!(
            "weir stack: {} stack files, {} interval files, {} stats files in {}",
            report.files.len(),
            report.interval_files.len(),
            report.stats_files.len(),
            a.output.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
