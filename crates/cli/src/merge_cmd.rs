//! `weir merge A B ... -o OUT`: several datasets as one (ingest::merge).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use std::ops::Not;

use clap::Args;

use crate::units::parse_duration;

#[derive(Args)]
pub struct MergeArgs {
    /// The datasets to merge (two or more). The first is the clock
    /// reference: the others' clock offsets are estimated against it.
    #[arg(required = true, num_args = 2.., value_name = "DATASET")]
    inputs: Vec<String>,
    /// The merged dataset: a new directory; or s3://BUCKET/PREFIX beside
    /// inputs in that bucket, which are then named, not copied (every
    /// frame kept).
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: String,
    /// Frames of different inputs with the same headers this close in time
    /// (after the estimated clock offsets) are one frame seen twice: keep
    /// the first.
    #[arg(long, default_value = "1ms", value_parser = parse_duration, value_name = "DURATION")]
    dedup_window: Duration,
    /// Keep every frame of every input (inputs known to be disjoint, such
    /// as the shares of `--shard`, merge faster without the check).
    #[arg(long, conflicts_with = "dedup_window")]
    keep_duplicates: bool,
    /// The largest clock offset between inputs to look for.
    #[arg(long, default_value = "1s", value_parser = parse_duration, value_name = "DURATION")]
    max_clock_offset: Duration,
    /// Order of rows inside each row group.
    #[arg(long, value_enum, default_value = "flow")]
    order: crate::OrderArg,
    /// Rows per Parquet row group.
    #[arg(long, default_value_t = store::packets::DEFAULT_ROW_GROUP_ROWS, value_name = "ROWS")]
    row_group_rows: usize,
    /// Replace OUT if it is an existing weir dataset.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    sign: crate::verify_cmd::SignKeyArg,
    /// Print nothing but errors.
    #[arg(short, long)]
    quiet: bool,
}

pub fn run(a: MergeArgs) -> Result<ExitCode, String> {
    let ns = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    if a.row_group_rows == 0 {
        return Err("--row-group-rows must be at least 1".into());
    }
    let mut opts = ingest::merge::MergeOptions {
        dedup_window_ns: (!a.keep_duplicates).then(|| ns(a.dedup_window)),
        max_offset_ns: ns(a.max_clock_offset),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        ..Default::default()
    };
    opts.writer.order = a.order.into();
    opts.writer.row_group_rows = a.row_group_rows;
    if objects::is_url(&a.output) {
        return link(&a);
    }
    let output = PathBuf::from(&a.output);
    // Inputs in an object store are copied beside OUT first (the merge
    // rewrites their files), and named by their URLs.
    let mut staging = crate::staging::Staging::beside(&output);
    let inputs: Vec<PathBuf> = (a.inputs.iter())
        .map(|i| staging.local(i, &|_| true))
        .collect::<Result<_, _>>()?;
    opts.input_names = a.inputs.clone();
    // Inputs are checked before OUT is made, so a typo leaves nothing behind.
    ingest::merge::check_inputs(&inputs, &output).map_err(|e| e.to_string())?;
    let key = a.sign.load()?;
    let out = store::Dataset::create(&output, a.force)
        .map_err(|e| e.to_string())?
        .signed_with(key);
    let report = ingest::merge::merge(&inputs, &out, &opts).map_err(|e| e.to_string())?;
    for w in &report.warnings {
        eprintln!("weir: warning: {w}");
    }
    if !a.quiet {
        println!(
            "weir merge: dataset {} ({:.2} s)",
            a.output,
            report.elapsed.as_secs_f64()
        );
        print!("{}", crate::describe::describe(&report.manifest));
    }
    Ok(ExitCode::SUCCESS)
}

/// A merge in an object store: a manifest naming the inputs' objects.
fn link(a: &MergeArgs) -> Result<ExitCode, String> {
    if a.keep_duplicates.not() && a.dedup_window != Duration::from_millis(1) {
        return Err(
            "--dedup-window: a merge in an object store copies nothing, so it keeps every frame; \
             merge into a directory to drop duplicates"
                .into(),
        );
    }
    let open = |w: &String| objects::open(w).map_err(|e| format!("{w}: {e}"));
    let out = open(&a.output)?;
    let inputs = a.inputs.iter().map(open).collect::<Result<Vec<_>, _>>()?;
    if out
        .exists(store::dataset::MANIFEST)
        .map_err(|e| format!("{}: {e}", a.output))?
        && !a.force
    {
        return Err(format!(
            "{}: a dataset is already there; pass --force to replace it, or choose a new prefix",
            a.output
        ));
    }
    let key = a.sign.load()?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let report =
        ingest::merge::link(&inputs, &out, &command, key.as_deref()).map_err(|e| e.to_string())?;
    if !a.quiet {
        println!(
            "weir merge: dataset {} naming its {} inputs' files (nothing copied; every frame kept)",
            a.output,
            inputs.len()
        );
        print!("{}", crate::describe::describe(&report.manifest));
    }
    Ok(ExitCode::SUCCESS)
}
