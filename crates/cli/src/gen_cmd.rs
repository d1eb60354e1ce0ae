//! `weir gen`: synthetic traffic into a pcap file.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use traffic::{AppMix, FixedSize, FrameSource, Imix};

#[derive(Clone, Copy, ValueEnum)]
pub enum Model {
    /// Frames of --size bytes over --flows UDP flows at --rate.
    Fixed,
    /// IMIX sizes (7:4:1 of 60, 590, 1514 B) over --flows TCP flows.
    Imix,
    /// TCP/UDP applications: bulk, web-like, QUIC-like and DNS-like sessions.
    App,
}

#[derive(Args)]
pub struct GenArgs {
    /// Write the frames to this pcap file (nanosecond pcap).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    write: PathBuf,
    /// Traffic model.
    #[arg(long, value_enum, default_value = "app")]
    model: Model,
    /// Frames to generate (suffixes k, M, G allowed).
    #[arg(short = 'c', long, default_value = "1M", value_parser = parse_count)]
    count: u64,
    /// Frame length for --model fixed, without FCS (60..=9000).
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Flows for --model fixed and imix.
    #[arg(long, default_value_t = 1000)]
    flows: u32,
    /// Frames per second for --model fixed and imix (timestamps only).
    #[arg(long, default_value = "1M", value_parser = parse_count)]
    rate: u64,
    /// New sessions per second for --model app.
    #[arg(long, default_value_t = 2000.0)]
    sessions_per_s: f64,
    /// Seed: the same seed gives the same frames.
    #[arg(long, default_value_t = 1)]
    seed: u64,
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

pub fn run(a: GenArgs) -> Result<ExitCode, String> {
    if !(60..=9000).contains(&a.size) {
        return Err(format!("--size {} is outside 60..=9000 bytes", a.size));
    }
    let mut source: Box<dyn FrameSource> = match a.model {
        Model::Fixed => Box::new(FixedSize::new(a.size, a.flows, a.rate as f64, a.count)),
        Model::Imix => Box::new(Imix::new(a.flows, a.rate as f64, a.count, a.seed)),
        Model::App => Box::new(AppMix::new(a.sessions_per_s, a.count, a.seed)),
    };
    let file = File::create(&a.write).map_err(|e| format!("{}: {e}", a.write.display()))?;
    let mut w = pcapio::PcapWriter::new(
        BufWriter::with_capacity(1 << 20, file),
        wire::LinkType::ETHERNET,
        65535,
    )
    .map_err(|e| format!("{}: {e}", a.write.display()))?;
    let mut buf = Vec::with_capacity(2048);
    while let Some(ts) = source.next_frame(&mut buf) {
        w.write_frame(ts, buf.len() as u32, &buf)
            .map_err(|e| format!("{}: {e}", a.write.display()))?;
    }
    let frames = w.frames_written();
    let bytes = w.bytes_written();
    w.into_inner()
        .map_err(|e| format!("{}: {e}", a.write.display()))?;
    println!(
        "weir gen: wrote {} frames ({}) to {}",
        store::manifest::group_digits(frames),
        store::manifest::human_bytes(bytes),
        a.write.display()
    );
    Ok(ExitCode::SUCCESS)
}
