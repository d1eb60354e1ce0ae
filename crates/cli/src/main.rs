//! The `weir` command: argument parsing and wiring; the work happens in the
//! library crates.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

mod analyze_cmd;
mod anonymize_cmd;
mod app_args;
mod capture_cmd;
mod collect_cmd;
mod config_file;
mod describe;
mod docs_cmd;
mod gen_cmd;
mod merge_cmd;
mod read_cmd;
mod rpc_args;
mod serve_cmd;
mod signals;
mod stack_cmd;
mod staging;
mod units;
mod upload_args;
mod verify_cmd;

#[derive(Parser)]
#[command(name = "weir", version, about = "Line-rate packet capture and analysis", long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The S3 endpoint of datasets given as s3://BUCKET/PREFIX, for a
    /// self-hosted store (MinIO, Ceph, Garage, versitygw: addressed
    /// path-style); default AWS_ENDPOINT_URL, else AWS itself. Plain
    /// http:// only to the loopback, or with AWS_ALLOW_HTTP=true.
    #[arg(long, global = true, value_name = "URL")]
    s3_endpoint: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Convert pcap/pcapng traces (plain, gzip or zstd) into a dataset.
    Convert(ConvertArgs),
    /// Print what a dataset holds.
    Info(InfoArgs),
    /// Generate traffic: onto an interface (-i) or into a pcap file (-w).
    Gen(gen_cmd::GenArgs),
    /// Capture live traffic on all cores into a dataset (or a pcap file).
    Capture(Box<capture_cmd::CaptureArgs>),
    /// Built-in analyses of one or more datasets (summary, flows, rates,
    /// bursts, top, loss, stack, rpc).
    Analyze(analyze_cmd::AnalyzeArgs),
    /// Run SQL over one or more datasets (tables packets, stats, stack, rpc, nfs, dns, tls, http; view flows).
    Sql(analyze_cmd::SqlArgs),
    /// Write the frames of a dataset that match a time window and a filter
    /// to a pcap file.
    Read(read_cmd::ReadArgs),
    /// Record the host's own network stack per socket (eBPF): application
    /// send/receive, TCP state, retransmissions, device transmit/receive.
    Stack(stack_cmd::StackArgs),
    /// Copy a dataset for sharing: addresses, MACs, file handles and names
    /// under a secret key, pcap files left out.
    Anonymize(anonymize_cmd::AnonymizeArgs),
    /// Write the packet records a capture streams to Kafka (--kafka) into
    /// a dataset, as one member of a consumer group.
    Collect(collect_cmd::CollectArgs),
    /// Several datasets (capture boxes, taps, shares) as one, in time
    /// order, with frames that more than one saw kept once.
    Merge(merge_cmd::MergeArgs),
    /// Put a dataset whose capture was killed back in order: cut open pcap
    /// files at their last whole frame, keep the stats, rebuild the manifest.
    Recover(RecoverArgs),
    /// Check a dataset against its integrity record: every file's size and
    /// digest, the chain, the seal over the manifest, the signature.
    Verify(verify_cmd::VerifyArgs),
    /// Copy a dataset to an S3-compatible object store (s3://BUCKET/PREFIX):
    /// its sealed files, then its manifest; what is there already is not
    /// sent again.
    Upload(upload_args::UploadCmdArgs),
    /// Serve a web page and a JSON API over one or more datasets (also one
    /// a capture is writing): overview, filter, flows, packets, pcap
    /// download, SQL.
    Serve(serve_cmd::ServeArgs),
    /// Write the man pages and shell completions (for the package).
    #[command(hide = true)]
    GenerateDocs(docs_cmd::DocsArgs),
}

#[derive(clap::Args)]
struct RecoverArgs {
    /// The dataset directory.
    dataset: PathBuf,
    /// Nothing to do when DATASET does not exist yet (a service's first
    /// start runs `weir recover` before its first capture).
    #[arg(long)]
    missing_ok: bool,
    /// Then rename DATASET to DATASET-<its creation time> (UTC), so that
    /// a new capture can be made at DATASET (a service's next start).
    #[arg(long)]
    move_aside: bool,
    /// A capture's configuration (`weir capture --config`): its sign-key
    /// signs the recovered dataset, unless --sign-key is given.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    sign: verify_cmd::SignKeyArg,
}

#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum OrderArg {
    /// Group a row group's rows by flow (smaller files; the default).
    Flow,
    /// Keep rows in arrival order.
    Arrival,
}

impl From<OrderArg> for store::RowOrder {
    fn from(o: OrderArg) -> Self {
        match o {
            OrderArg::Flow => store::RowOrder::Flow,
            OrderArg::Arrival => store::RowOrder::Arrival,
        }
    }
}

#[derive(Args)]
struct ConvertArgs {
    /// Trace files to convert; - reads standard input.
    #[arg(required = true, value_name = "TRACE")]
    inputs: Vec<PathBuf>,
    /// The dataset directory to create.
    #[arg(short = 'o', long = "output", value_name = "DATASET")]
    output: PathBuf,
    /// Parse workers (default: one per core).
    #[arg(short = 'j', long)]
    workers: Option<usize>,
    /// Replace DATASET if it is an existing weir dataset.
    #[arg(long)]
    force: bool,
    /// Order of rows inside each row group.
    #[arg(long, value_enum, default_value = "flow")]
    order: OrderArg,
    /// Rows per Parquet row group.
    #[arg(long, default_value_t = store::packets::DEFAULT_ROW_GROUP_ROWS, value_name = "ROWS")]
    row_group_rows: usize,
    /// Make each record point at its frame in the source file
    /// (pcap_file = source number, pcap_offset = byte offset).
    #[arg(long)]
    index_sources: bool,
    /// Read plain files with read(2) instead of mapping them (use for files
    /// that may be truncated while weir reads them: a mapped file that
    /// shrinks kills the reader).
    #[arg(long)]
    no_mmap: bool,
    #[command(flatten)]
    rpc: rpc_args::RpcArgs,
    #[command(flatten)]
    app: app_args::AppArgs,
    #[command(flatten)]
    sign: verify_cmd::SignKeyArg,
    #[command(flatten)]
    upload: upload_args::UploadArg,
    /// No progress bar and no summary.
    #[arg(short, long)]
    quiet: bool,
}

#[derive(Args)]
struct InfoArgs {
    /// The dataset: a directory, or s3://BUCKET/PREFIX (a prefix holding
    /// several datasets describes each).
    dataset: String,
    /// Print the manifest as JSON.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = sql_comments_are_not_flags(std::env::args_os());
    let args = match config_file::expand(&Cli::command(), "capture", args) {
        Ok(args) => args,
        Err(msg) => {
            eprintln!("weir capture: error: {msg}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(args);
    if let Some(e) = &cli.s3_endpoint {
        objects::set_endpoint(e);
    }
    let result = match cli.command {
        Command::Convert(a) => convert(a),
        Command::Info(a) => info(a),
        Command::Gen(a) => gen_cmd::run(a),
        Command::Capture(a) => capture_cmd::run(*a),
        Command::Analyze(a) => analyze_cmd::run_analyze(a),
        Command::Sql(a) => analyze_cmd::run_sql(a),
        Command::Read(a) => read_cmd::run(a),
        Command::Stack(a) => stack_cmd::run(a),
        Command::Anonymize(a) => anonymize_cmd::run(a),
        Command::Merge(a) => merge_cmd::run(a),
        Command::Collect(a) => collect_cmd::run(a),
        Command::Recover(a) => recover(a),
        Command::Verify(a) => verify_cmd::run(a),
        Command::Upload(a) => upload_args::run(a),
        Command::Serve(a) => serve_cmd::run(a),
        Command::GenerateDocs(a) => docs_cmd::run(a, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("weir: error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn convert(a: ConvertArgs) -> Result<ExitCode, String> {
    let inputs: Vec<ingest::Input> = a
        .inputs
        .iter()
        .map(|p| {
            if p.as_os_str() == "-" {
                ingest::Input::Stdin
            } else {
                ingest::Input::Path(p.clone())
            }
        })
        .collect();
    if a.row_group_rows == 0 {
        return Err("--row-group-rows must be at least 1".into());
    }
    let key = a.sign.load()?;
    store::Dataset::check_new(&a.output, a.force).map_err(|e| e.to_string())?;
    let uploader = a.upload.start(&a.output, a.force, "weir convert")?;
    let dataset = store::Dataset::create(&a.output, a.force)
        .map_err(|e| e.to_string())?
        .signed_with(key)
        .published_to(uploader.map(|u| u as _));
    let mut opts = ingest::ConvertOptions {
        index_sources: a.index_sources,
        command: std::env::args().collect::<Vec<_>>().join(" "),
        rpc: a.rpc.options(),
        app: a.app.options(),
        ..Default::default()
    };
    if let Some(w) = a.workers {
        if w == 0 {
            return Err("--workers must be at least 1".into());
        }
        opts.workers = w;
    }
    opts.worker.writer.row_group_rows = a.row_group_rows;
    opts.reader.mmap = !a.no_mmap;
    opts.worker.writer.order = a.order.into();
    let progress = ingest::Progress::default();
    let show = !a.quiet && std::io::stderr().is_terminal();
    let total_bytes: u64 = a
        .inputs
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let done = std::sync::atomic::AtomicBool::new(false);
    let report = std::thread::scope(|s| {
        let bar = show.then(|| {
            let (progress, done) = (&progress, &done);
            s.spawn(move || show_progress(progress, done, total_bytes))
        });
        let r = ingest::convert(&inputs, &dataset, &opts, &progress);
        done.store(true, Ordering::Relaxed);
        if let Some(b) = bar {
            let _ = b.join();
        }
        r
    })
    .map_err(|e| e.to_string())?;
    upload_args::finish(&dataset, &report.manifest, "weir convert")?;
    if !a.quiet {
        let m = &report.manifest;
        println!(
            "weir convert: wrote {} frames from {} file{} into the dataset {}",
            util::fmt::group_digits(m.counts.frames),
            m.sources.len(),
            if m.sources.len() == 1 { "" } else { "s" },
            a.output.display()
        );
        print!("{}", describe::describe(&report.manifest));
    }
    for e in &report.source_errors {
        eprintln!("weir: warning: {e}");
    }
    Ok(if report.source_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A progress bar on the terminal while a conversion runs. Compressed input
/// makes the byte total inexact, so the bar shows frames and rate too.
fn show_progress(progress: &ingest::Progress, done: &std::sync::atomic::AtomicBool, total: u64) {
    let bar = indicatif::ProgressBar::new(total.max(1));
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    while !done.load(Ordering::Relaxed) {
        let frames = progress.frames.load(Ordering::Relaxed);
        let bytes = progress.bytes.load(Ordering::Relaxed);
        bar.set_position(bytes.min(total));
        let secs = bar.elapsed().as_secs_f64().max(1e-3);
        bar.set_message(format!(
            "{} frames, {} read, {:.2} M frames/s",
            util::fmt::group_digits(frames),
            util::fmt::human_bytes(bytes),
            frames as f64 / secs / 1e6
        ));
        std::thread::sleep(Duration::from_millis(100));
    }
    bar.finish_and_clear();
}

/// `weir sql DS "-- why\nSELECT ..."`: a statement that starts with an
/// SQL comment would be read as an unknown flag. No flag holds white
/// space, so a word of `weir sql` that starts with `-` and does is SQL:
/// a newline in front keeps it a statement and changes nothing in it.
fn sql_comments_are_not_flags(
    args: impl Iterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut args: Vec<_> = args.collect();
    if args.get(1).is_some_and(|a| a == "sql") {
        for a in args.iter_mut().skip(2) {
            let text = a.to_string_lossy();
            if text.starts_with('-') && text.contains(char::is_whitespace) {
                let mut sql = std::ffi::OsString::from("\n");
                sql.push(&*a);
                *a = sql;
            }
        }
    }
    args
}

fn info(a: InfoArgs) -> Result<ExitCode, String> {
    let root = objects::open(&a.dataset).map_err(|e| format!("{}: {e}", a.dataset))?;
    let found = store::location::datasets_under(&root).map_err(|e| e.to_string())?;
    if a.json {
        let manifests: Vec<_> = found.iter().map(|d| &d.manifest).collect();
        let s = match manifests.as_slice() {
            [one] => serde_json::to_string_pretty(one),
            all => serde_json::to_string_pretty(all),
        };
        println!("{}", s.map_err(|e| e.to_string())?);
        return Ok(ExitCode::SUCCESS);
    }
    for (k, d) in found.iter().enumerate() {
        if k > 0 {
            println!();
        }
        println!("weir dataset {}", d.root.name());
        print!("{}", describe::describe(&d.manifest));
    }
    Ok(ExitCode::SUCCESS)
}

/// Renames `dataset` to `DATASET-YYYYMMDDTHHMMSSZ` (its creation time), or
/// with `.N` after it if that is taken.
fn move_aside(dataset: &std::path::Path, m: Option<&store::Manifest>) -> Result<PathBuf, String> {
    let created: String = m
        .map(|m| m.created.as_str())
        .unwrap_or("")
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect();
    let name = dataset
        .file_name()
        .ok_or_else(|| format!("{}: not a directory name", dataset.display()))?
        .to_string_lossy()
        .into_owned();
    let base = dataset.with_file_name(format!("{name}-{created}Z"));
    let mut to = base.clone();
    for n in 1.. {
        if !to.exists() {
            break;
        }
        to = PathBuf::from(format!("{}.{n}", base.display()));
    }
    std::fs::rename(dataset, &to).map_err(|e| {
        format!(
            "{}: cannot move it to {}: {e}",
            dataset.display(),
            to.display()
        )
    })?;
    Ok(to)
}

fn recover(a: RecoverArgs) -> Result<ExitCode, String> {
    let mut sign = a.sign.clone();
    if let (None, Some(config)) = (&sign.sign_key, &a.config) {
        let mut cmd = Cli::command();
        cmd.build();
        let capture = cmd
            .find_subcommand("capture")
            .ok_or("no capture subcommand")?;
        sign.sign_key = config_file::value_of(config, capture, "sign-key")?.map(PathBuf::from);
    }
    let key = sign.load()?;
    let root = a.dataset.display();
    if a.missing_ok && !a.dataset.exists() {
        println!("weir recover: {root} does not exist yet; nothing to do");
        return Ok(ExitCode::SUCCESS);
    }
    // A capture that uploaded its dataset may have deleted local copies
    // of files in the bucket: they stay in it, and the rest goes up.
    let uploaded = upload_args::resume(&a.dataset, "weir recover")?;
    let publisher = uploaded.as_ref().map(|u| u.uploader.clone());
    let r =
        ingest::recover::recover(&a.dataset, key.clone(), uploaded).map_err(|e| e.to_string())?;
    if let (Some(p), Some(m)) = (publisher, &r.manifest) {
        let ds = store::Dataset::open(&a.dataset)
            .map_err(|e| e.to_string())?
            .signed_with(key)
            .published_to(Some(p));
        upload_args::finish(&ds, m, "weir recover")?;
    }
    if r.already_complete {
        let signed = if r.signature_written {
            "; its seal signed again"
        } else {
            "; nothing to do"
        };
        println!("weir recover: {root} is complete{signed}");
    }
    if a.move_aside {
        let to = move_aside(&a.dataset, r.manifest.as_ref())?;
        println!("weir recover: {root} moved to {}", to.display());
    }
    if r.already_complete {
        return Ok(ExitCode::SUCCESS);
    }
    for p in &r.pcap_repaired {
        println!(
            "weir recover: pcap/{}: kept {} whole frames, cut {} bytes of a torn tail",
            p.name,
            util::fmt::group_digits(p.frames),
            p.cut
        );
    }
    for p in &r.parts_removed {
        println!(
            "weir recover: removed {p} (never finished: its footer was not written; its frames \
             are in the pcap files)"
        );
    }
    if r.records_built > 0 {
        println!(
            "weir recover: built {} packet records from the pcap files, for frames that had none",
            util::fmt::group_digits(r.records_built)
        );
    }
    for f in &r.flows_rebuilt {
        println!("weir recover: {f}: the flows table of a packet file that had none, rebuilt");
    }
    for s in &r.stats_recovered {
        println!(
            "weir recover: stats/{s}: the per-second stats not yet in a file, from the journal"
        );
    }
    if let Some(m) = &r.manifest {
        println!("weir recover: manifest rebuilt for {root}");
        print!("{}", describe::describe(m));
    }
    Ok(ExitCode::SUCCESS)
}
