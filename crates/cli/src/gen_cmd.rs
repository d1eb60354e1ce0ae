//! `weir gen`: synthetic traffic into a pcap file (`-w`) or onto an
//! interface (`-i`).

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use capture::tx::{Burst, TxMethod, TxOptions, TxReport, TxSource};
use clap::{Args, ValueEnum};
use traffic::{
    AppMix, Encap, Encapsulated, FixedSize, Flood, FloodSpec, FrameSizes, FrameSource, Imix,
    PayloadFill, Timing,
};
use util::fmt::group_digits;

use crate::units::parse_duration;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Model {
    /// UDP frames of --size (one size, imix or a list) over --flows flows,
    /// --payload fill; the packet-rate test.
    Flood,
    /// Frames of one --size with zero payloads over --flows UDP flows.
    Fixed,
    /// IMIX sizes (7:4:1 of 60, 590, 1514 B) over --flows TCP flows.
    Imix,
    /// TCP/UDP applications: bulk, web-like, QUIC-like and DNS-like sessions.
    App,
}

impl Model {
    fn name(self) -> &'static str {
        match self {
            Model::Flood => "flood",
            Model::Fixed => "fixed",
            Model::Imix => "imix",
            Model::App => "app",
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum PayloadArg {
    /// Zero bytes.
    Zero,
    /// Random bytes (incompressible).
    Random,
    /// The first half of each payload random, the rest zero (compresses
    /// about 2:1).
    HalfRandom,
}

#[derive(Clone, Copy, ValueEnum)]
enum TxArg {
    /// sendmmsg in batches of --batch frames.
    Sendmmsg,
    /// A TPACKET_V2 TX ring, --batch frames per kick.
    Ring,
}

/// `--rate`: frames per second, or as fast as possible.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    Pps(f64),
    Max,
}

#[derive(Args)]
pub struct GenArgs {
    /// Write the frames to this pcap file (nanosecond pcap).
    #[arg(
        short = 'w',
        long = "write",
        value_name = "FILE",
        conflicts_with = "interface"
    )]
    write: Option<PathBuf>,
    /// Send the frames on this interface (needs CAP_NET_RAW, and --count
    /// or --duration).
    #[arg(short = 'i', long = "interface", value_name = "IF")]
    interface: Option<String>,
    /// Traffic model [default: flood with -i, and with -w when --size,
    /// --payload or --burst is given; app otherwise].
    #[arg(long, value_enum)]
    model: Option<Model>,
    /// Frames to generate (suffixes k, M, G allowed) [default with -w: 1M].
    #[arg(short = 'c', long, value_parser = parse_count)]
    count: Option<u64>,
    /// With -i: stop after this long (500ms, 10s, 2m); with --count too,
    /// whichever comes first.
    #[arg(short = 'd', long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Frame lengths without FCS: one length (60..=9000), imix (7:4:1 of
    /// 60, 590, 1514), or a comma list such as 64,512,1514, used in turn
    /// (cycled, not drawn at random) [default: 64].
    #[arg(long, value_name = "SIZE", value_parser = parse_sizes)]
    size: Option<FrameSizes>,
    /// Flows: distinct UDP 5-tuples (flood, fixed) or TCP flows (imix).
    #[arg(long, default_value_t = 1000)]
    flows: u32,
    /// Frames per second (suffixes k, M, G), or max (with -i) [default:
    /// max with -i; 1M with -w, where it spaces the timestamps].
    #[arg(long, value_parser = parse_rate)]
    rate: Option<Rate>,
    /// On/off schedule: send for ON, pause for OFF, repeat (10s/10s,
    /// 100ms/900ms). With -w it shapes a flood's timestamps.
    #[arg(long, value_name = "ON/OFF", value_parser = parse_burst)]
    burst: Option<Burst>,
    /// Payload of flood frames [default: half-random].
    #[arg(long, value_enum)]
    payload: Option<PayloadArg>,
    /// New sessions per second for --model app.
    #[arg(long, default_value_t = 2000.0)]
    sessions_per_s: f64,
    /// Seed: the same seed gives the same frames.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// With -i: how frames reach the kernel [default: sendmmsg, the faster
    /// on veth].
    #[arg(long, value_enum)]
    tx: Option<TxArg>,
    /// With -i: frames per system call (1..=1024) [default: 64].
    #[arg(long)]
    batch: Option<usize>,
    /// Carry every frame through a tunnel from 172.16.0.1 to 172.16.0.2:
    /// vxlan:VNI, geneve:VNI, gre, gre:KEY, gtpu:TEID, ipip, wccp:SERVICE,
    /// vxlan-gpe:VNI or pim (frames grow by the tunnel's headers; --size is
    /// the inner frame's).
    #[arg(long, value_name = "TUNNEL", value_parser = parse_encap)]
    encap: Option<Encap>,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

fn parse_encap(s: &str) -> Result<Encap, String> {
    s.parse()
}

/// Parses `10`, `10k`, `2.5M`, `1G`.
pub fn parse_count(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1e3),
        Some((i, 'M')) => (&s[..i], 1e6),
        Some((i, 'G')) => (&s[..i], 1e9),
        _ => (s, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a count (use e.g. 1000, 10k, 2.5M)"))?;
    if v.is_nan() || v < 0.0 || !v.is_finite() {
        return Err(format!("{s:?} is not a count"));
    }
    Ok((v * mult).round() as u64)
}

/// Parses `max` or a positive frame rate: `50000`, `50k`, `1.5M`.
pub fn parse_rate(s: &str) -> Result<Rate, String> {
    if s.eq_ignore_ascii_case("max") {
        return Ok(Rate::Max);
    }
    let (num, mult) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1e3),
        Some((i, 'M')) => (&s[..i], 1e6),
        Some((i, 'G')) => (&s[..i], 1e9),
        _ => (s, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| {
        format!("{s:?} is not a rate: use frames per second (50000, 50k, 1.5M) or max")
    })?;
    let pps = v * mult;
    if !pps.is_finite() || pps <= 0.0 {
        return Err(format!(
            "{s:?}: the rate must be above 0 frames per second (or max)"
        ));
    }
    if pps > 1e9 {
        return Err(format!("{s:?}: at most 1G frames per second (or max)"));
    }
    Ok(Rate::Pps(pps))
}

fn parse_sizes(s: &str) -> Result<FrameSizes, String> {
    s.parse()
}

/// Parses `ON/OFF`, two durations: `10s/10s`, `100ms/900ms`.
pub fn parse_burst(s: &str) -> Result<Burst, String> {
    let (on, off) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?} is not ON/OFF (use e.g. 10s/10s or 100ms/900ms)"))?;
    let on = parse_duration(on)?;
    let off = parse_duration(off)?;
    if on.is_zero() {
        return Err(format!("{s:?}: the on time must be above 0"));
    }
    if on + off < Duration::from_micros(100) {
        return Err(format!("{s:?}: an on/off cycle must last at least 100us"));
    }
    Ok(Burst { on, off })
}

/// A mistake in the arguments: said on stderr, exit status 2 (as clap's
/// own parse errors).
fn usage(msg: impl std::fmt::Display) -> Result<ExitCode, String> {
    eprintln!("weir: error: {msg}");
    eprintln!("For more information, try 'weir gen --help'.");
    Ok(ExitCode::from(2))
}

pub fn run(a: GenArgs) -> Result<ExitCode, String> {
    let live = a.interface.is_some();
    if a.write.is_none() && !live {
        return usage("say where the frames go: -w FILE (a pcap file) or -i IF (an interface)");
    }
    let flood_flags = a.size.is_some() || a.payload.is_some() || a.burst.is_some();
    let model = a.model.unwrap_or(if live || flood_flags {
        Model::Flood
    } else {
        Model::App
    });
    if let Some(sizes) = &a.size {
        match model {
            Model::Flood => {}
            Model::Fixed if sizes.cycle().len() == 1 => {}
            Model::Fixed => {
                return usage(format!(
                    "--model fixed takes one --size; for imix or a list of sizes use --model flood (got --size {sizes})"
                ));
            }
            Model::Imix | Model::App => {
                return usage(format!(
                    "--size applies to --model flood and fixed; --model {} chooses its own sizes",
                    model.name()
                ));
            }
        }
    }
    if a.payload.is_some() && model != Model::Flood {
        return usage("--payload applies to --model flood");
    }
    if a.flows == 0 || (model == Model::Flood && a.flows > traffic::MAX_FLOWS) {
        return usage(format!(
            "--flows {}: use 1..={}",
            a.flows,
            traffic::MAX_FLOWS
        ));
    }
    if !a.sessions_per_s.is_finite() || a.sessions_per_s <= 0.0 {
        return usage("--sessions-per-s must be above 0");
    }
    let sizes = a
        .size
        .clone()
        .unwrap_or_else(|| FrameSizes::fixed(64).expect("64 bytes is a valid frame size"));
    let payload = match a.payload.unwrap_or(PayloadArg::HalfRandom) {
        PayloadArg::Zero => PayloadFill::Zero,
        PayloadArg::Random => PayloadFill::Random,
        PayloadArg::HalfRandom => PayloadFill::HalfRandom,
    };
    match (&a.write, &a.interface) {
        (Some(path), _) => {
            if a.duration.is_some() {
                return usage("--duration applies to -i; a file gets --count frames");
            }
            if a.tx.is_some() || a.batch.is_some() {
                return usage("--tx and --batch apply to -i");
            }
            if a.burst.is_some() && model != Model::Flood {
                return usage("with -w, --burst applies to --model flood");
            }
            let rate = match a.rate {
                None => 1e6,
                Some(Rate::Pps(r)) => r,
                Some(Rate::Max) => {
                    return usage(
                        "--rate max applies to -i; a file's timestamps need a rate in frames per second",
                    );
                }
            };
            let count = a.count.unwrap_or(1_000_000);
            let timing = Timing {
                rate_pps: rate,
                burst: a
                    .burst
                    .map(|b| (b.on.as_nanos() as u64, b.off.as_nanos() as u64)),
            };
            let mut source = make_source(&a, model, &sizes, payload, count, timing)?;
            write_file(path, source.as_mut(), model, a.json)
        }
        (None, Some(iface)) => {
            if a.count.is_none() && a.duration.is_none() {
                return usage(
                    "-i needs --count N or --duration D (or both: whichever comes first), so that sending ends",
                );
            }
            if a.count == Some(0) {
                return usage("--count 0 sends nothing");
            }
            if a.duration.is_some_and(|d| d.is_zero()) {
                return usage("--duration must be above 0");
            }
            let batch = a.batch.unwrap_or(64);
            if !(1..=1024).contains(&batch) {
                return usage(format!("--batch {batch}: use 1..=1024"));
            }
            let rate = match a.rate {
                None | Some(Rate::Max) => None,
                Some(Rate::Pps(r)) => Some(r),
            };
            let timing = Timing {
                rate_pps: rate.unwrap_or(1e6),
                burst: None,
            };
            // Models that end do so after --count frames; the flood is
            // endless and the sender counts.
            let count = a.count.unwrap_or(u64::MAX);
            let mut source = make_source(&a, model, &sizes, payload, count, timing)?;
            let opts = TxOptions {
                method: match a.tx {
                    None => TxMethod::default(),
                    Some(TxArg::Sendmmsg) => TxMethod::Sendmmsg,
                    Some(TxArg::Ring) => TxMethod::Ring,
                },
                batch,
                rate_pps: rate,
                burst: a.burst,
                count: a.count,
                duration: a.duration,
                ..TxOptions::default()
            };
            crate::signals::install();
            let mut frames = ToSend(source.as_mut());
            let report = capture::tx::send(iface, &mut frames, &opts, &crate::signals::STOP)
                .map_err(|e| e.to_string())?;
            print_report(&report, model, rate, batch, a.json);
            Ok(ExitCode::SUCCESS)
        }
        (None, None) => unreachable!("checked above"),
    }
}

/// A traffic model as the sender takes its frames.
struct ToSend<'a>(&'a mut dyn FrameSource);

impl TxSource for ToSend<'_> {
    fn next_frame(&mut self, out: &mut Vec<u8>) -> bool {
        self.0.next_frame(out).is_some()
    }

    fn period(&self) -> Option<u64> {
        self.0.period()
    }
}

fn make_source(
    a: &GenArgs,
    model: Model,
    sizes: &FrameSizes,
    payload: PayloadFill,
    count: u64,
    timing: Timing,
) -> Result<Box<dyn FrameSource>, String> {
    let source: Box<dyn FrameSource> = match model {
        Model::Flood => Box::new(Flood::new(FloodSpec {
            sizes: sizes.clone(),
            flows: a.flows,
            payload,
            seed: a.seed,
            count,
            timing,
        })?),
        Model::Fixed => Box::new(FixedSize::new(
            sizes.cycle()[0],
            a.flows,
            timing.rate_pps,
            count,
        )),
        Model::Imix => Box::new(Imix::new(a.flows, timing.rate_pps, count, a.seed)),
        Model::App => Box::new(AppMix::new(a.sessions_per_s, count, a.seed)),
    };
    Ok(match a.encap {
        Some(e) => Box::new(Encapsulated::new(source, e)),
        None => source,
    })
}

fn write_file(
    path: &std::path::Path,
    source: &mut dyn FrameSource,
    model: Model,
    json: bool,
) -> Result<ExitCode, String> {
    let file = File::create(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = pcapio::PcapWriter::new(
        BufWriter::with_capacity(1 << 20, file),
        wire::LinkType::ETHERNET,
        65535,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut buf = Vec::with_capacity(2048);
    while let Some(ts) = source.next_frame(&mut buf) {
        w.write_frame(ts, buf.len() as u32, &buf)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let frames = w.frames_written();
    let bytes = w.bytes_written();
    w.into_inner()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if json {
        let v = serde_json::json!({
            "file": path.display().to_string(),
            "model": model.name(),
            "frames": frames,
            "bytes": bytes,
        });
        println!("{v}");
    } else {
        println!(
            "weir gen: wrote {} frames ({}) to {}",
            group_digits(frames),
            util::fmt::human_bytes(bytes),
            path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn print_report(r: &TxReport, model: Model, rate: Option<f64>, batch: usize, json: bool) {
    if json {
        let v = serde_json::json!({
            "interface": r.interface,
            "method": r.method.as_str(),
            "model": model.name(),
            "frames": r.frames,
            "bytes": r.bytes,
            "elapsed_s": r.elapsed.as_secs_f64(),
            "pps": r.pps(),
            "gbps": r.gbps(),
            "wire_gbps": r.wire_gbps(),
            "retries": r.retries,
            "ended_by": r.ended_by.as_str(),
            "rate_pps": rate,
            "batch": batch,
            "cycle_frames": r.cycle_frames,
        });
        println!("{v}");
        return;
    }
    println!(
        "weir gen: sent {} frames ({} bytes) in {:.3} s",
        group_digits(r.frames),
        group_digits(r.bytes),
        r.elapsed.as_secs_f64(),
    );
    println!(
        "  {:.4} Mpps, {:.4} Gb/s of frames ({:.4} Gb/s with FCS, preamble and gap)",
        r.pps() / 1e6,
        r.gbps(),
        r.wire_gbps()
    );
    println!(
        "  on {} by {} (batch {batch}), ended by {}, {} retries",
        r.interface,
        r.method,
        r.ended_by.as_str(),
        group_digits(r.retries),
    );
}
