//! `weir read`: frames found through the packet records, filtered exactly
//! by libpcap, written as a nanosecond pcap (`analyze::read`).

use std::path::PathBuf;
use std::process::ExitCode;

use analyze::read::{ReadOptions, ReadOutput, read_frames};
use clap::Args;
use util::fmt::{group_digits, human_bytes};

use crate::analyze_cmd::{parse_window, split_datasets};

#[derive(Args)]
pub struct ReadArgs {
    /// One or more datasets, then an optional filter in tcpdump syntax, on
    /// the frame as captured; `inner EXPR` runs EXPR on the innermost IP
    /// packet of tunnelled frames (the only one of the others).
    #[arg(required = true, value_name = "DATASET... [FILTER]")]
    words: Vec<String>,
    /// The pcap file to write (- for standard output).
    #[arg(short = 'w', long = "write", value_name = "OUT.pcap")]
    out: PathBuf,
    /// Only frames at or after T: a UTC time or +D after the first frame.
    #[arg(long, value_name = "T")]
    from: Option<String>,
    /// Only frames before T (same forms as --from).
    #[arg(long, value_name = "T")]
    to: Option<String>,
    /// Replace OUT.pcap if it exists.
    #[arg(long)]
    force: bool,
    /// No summary on standard error.
    #[arg(short, long)]
    quiet: bool,
}

pub fn run(a: ReadArgs) -> Result<ExitCode, String> {
    let (datasets, rest) = split_datasets(&a.words);
    if datasets.is_empty() {
        return Err(format!(
            "{}: no such dataset directory; usage: weir read DATASET... [FILTER] -w OUT.pcap",
            a.words[0]
        ));
    }
    let output = if a.out.as_os_str() == "-" {
        ReadOutput::Stdout
    } else {
        ReadOutput::File(a.out.clone())
    };
    if output != ReadOutput::Stdout && a.out.exists() && !a.force {
        return Err(format!(
            "{} exists; pass --force to replace it, or choose another name",
            a.out.display()
        ));
    }
    let window = parse_window(&datasets, a.from.as_deref(), a.to.as_deref())?;
    let opts = ReadOptions {
        datasets,
        filter: rest.join(" "),
        window,
        output: output.clone(),
    };
    let r = read_frames(&opts).map_err(|e| e.to_string())?;
    if !a.quiet {
        eprintln!(
            "weir read: {} frames to {} ({} candidates in the window{}{}); read {} of packet \
             records, {} row groups read, {} skipped by their statistics",
            group_digits(r.written),
            match &output {
                ReadOutput::Stdout => "standard output".to_string(),
                ReadOutput::File(p) => p.display().to_string(),
            },
            group_digits(r.candidates),
            if r.pushed_down {
                " that the inner filter's condition on the records kept"
            } else {
                ""
            },
            if r.unreachable > 0 {
                let note: String = [r.retention_note, r.lost_note]
                    .into_iter()
                    .flatten()
                    .map(|n| format!("; {n}"))
                    .collect();
                format!(", {} records without a frame{note}", r.unreachable)
            } else {
                String::new()
            },
            human_bytes(r.scan.bytes_scanned),
            r.scan.row_groups_read,
            r.scan.row_groups_pruned,
        );
    }
    Ok(ExitCode::SUCCESS)
}
