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
    let (datasets, rest) = split_datasets(&a.words)?;
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
    if !a.quiet {
        for n in crate::describe::pending_records_notes(&datasets) {
            eprintln!("{n}");
        }
    }
    let opts = ReadOptions {
        datasets,
        filter: rest.join(" "),
        window,
        output: output.clone(),
    };
    let r = read_frames(&opts).map_err(|e| e.to_string())?;
    if !a.quiet {
        let windowed = opts.window.from_ns.is_some() || opts.window.to_ns.is_some();
        eprint!("{}", summary(&r, &opts.filter, windowed, &output));
    }
    Ok(ExitCode::SUCCESS)
}

/// What a read did, in a few short lines: what was written where, what
/// the filter kept of what, what had no frame and why, and what reading
/// the records cost.
fn summary(
    r: &analyze::read::ReadReport,
    filter: &str,
    windowed: bool,
    output: &ReadOutput,
) -> String {
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let to = match output {
        ReadOutput::Stdout => "standard output".to_string(),
        ReadOutput::File(p) => p.display().to_string(),
    };
    let mut s = format!(
        "weir read: wrote {} frame{} to {to}\n",
        group_digits(r.written),
        plural(r.written)
    );
    let within = if windowed {
        "in the time window"
    } else {
        "in the dataset"
    };
    let ix = &r.index;
    // Said on a line of its own when an inner filter narrowed the records.
    let looked = if ix.files_indexed > 0 {
        "of the flows it may match".to_string()
    } else if r.pushed_down {
        format!("{within}\n  (those the inner filter's condition on the records kept)")
    } else {
        within.to_string()
    };
    if filter.trim().is_empty() {
        s += &format!(
            "  no filter: all {} frames {looked}\n",
            group_digits(r.candidates)
        );
    } else {
        s += &format!(
            "  {filter:?} matched {} of the {} frames {looked}\n",
            group_digits(r.written),
            group_digits(r.candidates)
        );
    }
    if r.unreachable > 0 {
        s += &format!(
            "  skipped {} record{} whose frame is not in the dataset\n",
            group_digits(r.unreachable),
            plural(r.unreachable)
        );
        for n in [&r.retention_note, &r.lost_note].into_iter().flatten() {
            s += &format!("  ({n})\n");
        }
    }
    // Which way the records were found: a line (and one for the lookup).
    if ix.files_indexed > 0 {
        let share = 100.0 * ix.rows_read as f64 / ix.rows_total.max(1) as f64;
        s += &format!(
            "  by the index: {} of {} flow slices, {} of {} record pages ({share:.1} % of rows)",
            group_digits(ix.slices_matched),
            group_digits(ix.slices),
            group_digits(ix.pages_read),
            group_digits(ix.pages_total),
        );
        if ix.files_whole > 0 {
            s += &format!(
                "; {} packet file{} read whole ({})",
                ix.files_whole,
                plural(ix.files_whole),
                ix.whole_because.unwrap_or("")
            );
        }
        s += "\n";
        if ix.slices_read < ix.slices {
            // The flows files looked the filter's addresses up.
            s += &format!(
                "    (the flows files' lookup of its addresses decoded {} of the slices)\n",
                group_digits(ix.slices_read)
            );
        }
    } else if ix.files_whole > 0 {
        s += &format!(
            "  by the records: read all {} in the window ({})\n",
            group_digits(ix.rows_read),
            ix.whole_because.unwrap_or("")
        );
    }
    if r.engine_datasets > 0 {
        // Why the query engine read them, when the index could not.
        let why = match ix.whole_because {
            Some(w) if ix.files_indexed == 0 && ix.files_whole == 0 => format!(" ({w})"),
            _ => String::new(),
        };
        s += &format!(
            "  by the query engine{why}: read {} of packet records: {} row groups, {} skipped \
             by their statistics\n",
            human_bytes(r.scan.bytes_scanned),
            r.scan.row_groups_read,
            r.scan.row_groups_pruned
        );
    }
    s
}
