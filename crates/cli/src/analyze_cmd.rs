//! `weir analyze` and `weir sql`: wiring to the analyze crate.

use std::path::PathBuf;
use std::process::ExitCode;

use analyze::answer::{Analysis, AnswerOptions, answer};
use analyze::render::{Format, render};
use analyze::{By, Session, TimeWindow};
use clap::{Args, ValueEnum};

use crate::units::parse_duration;

#[derive(Args)]
pub struct OutputArgs {
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV instead of a table.
    #[arg(long)]
    csv: bool,
    /// Cores to use (default: all).
    #[arg(short = 'j', long, value_name = "N")]
    threads: Option<usize>,
    /// Only frames at or after T: a time (2026-11-22T07:00:00.5Z) or an
    /// offset from the first frame (+90s).
    #[arg(long, value_name = "T")]
    from: Option<String>,
    /// Only frames before T (same forms as --from).
    #[arg(long, value_name = "T")]
    to: Option<String>,
}

impl OutputArgs {
    fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else if self.csv {
            Format::Csv
        } else {
            Format::Table
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ByArg {
    Bytes,
    Frames,
}

#[derive(Args)]
pub struct AnalyzeArgs {
    /// One or more datasets, then the analysis (summary, flows, rates,
    /// bursts, top hosts|ports|pairs, loss, stack, rpc, dns, tls, http),
    /// then an optional
    /// filter in tcpdump syntax: on the frame as captured, or after the
    /// word `inner` on the innermost IP packet of tunnelled frames.
    #[arg(required = true, value_name = "DATASET... KIND")]
    words: Vec<String>,
    #[command(flatten)]
    out: OutputArgs,
    /// flows, top: order by bytes or frames.
    #[arg(long, value_enum, default_value = "bytes")]
    by: ByArg,
    /// flows, top: rows to print (0: all; default 20 in a table, all in
    /// JSON/CSV for flows); rpc: file handles (0: all; default 20); dns,
    /// tls, http: names, servers, hosts (0: all; default 20).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// rates: window length.
    #[arg(long, default_value = "1min", value_name = "D")]
    every: String,
    /// rates: sample length inside each window.
    #[arg(long, default_value = "1s", value_name = "D")]
    sample: String,
    /// rates, bursts, loss, stack, rpc: also draw the result into FILE (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// bursts: interval lengths.
    #[arg(
        long,
        default_value = "100us,1ms,10ms,100ms,1s",
        value_name = "D,D,..."
    )]
    scales: String,
    /// Print the analysis as SQL instead of running it: the statements,
    /// and the tables to bind for them, for Spark SQL or DuckDB over the
    /// same Parquet files (rates and bursts need the dataset: their
    /// intervals start at its first frame).
    #[arg(long)]
    emit_sql: bool,
    /// flows, top, summary: answer from the packets even when the dataset
    /// has a flows table (for checking one against the other).
    #[arg(long)]
    no_flows_table: bool,
    /// Say on stderr how the analysis was answered: flows, top, summary
    /// from the flows table or the packets, and why; rates, bursts, loss by
    /// one pass over the columns or by the SQL on DataFusion (with a
    /// filter).
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Args)]
pub struct SqlArgs {
    /// One or more datasets, then one SQL statement over the tables
    /// packets, stats and stack and the view flows.
    #[arg(required = true, num_args = 2.., value_name = "DATASET... SQL")]
    words: Vec<String>,
    #[command(flatten)]
    out: OutputArgs,
}

/// Splits leading dataset directories from the words after them.
pub(crate) fn split_datasets(words: &[String]) -> (Vec<PathBuf>, &[String]) {
    let n = words
        .iter()
        .take_while(|w| std::path::Path::new(w.as_str()).is_dir())
        .count();
    (words[..n].iter().map(PathBuf::from).collect(), &words[n..])
}

fn ns_of(d: std::time::Duration) -> i64 {
    d.as_nanos().min(i64::MAX as u128) as i64
}

/// Parses --from/--to: an RFC 3339 time, or +D after the datasets' start.
fn parse_time(s: &str, start: Option<i64>, flag: &str) -> Result<i64, String> {
    if let Some(off) = s.strip_prefix('+') {
        let d = parse_duration(off).map_err(|e| format!("{flag}: {e}"))?;
        let start = start.ok_or_else(|| {
            format!("{flag} {s}: the dataset has no frames, so an offset has no start")
        })?;
        return Ok(start.saturating_add(ns_of(d)));
    }
    store::time::parse_rfc3339(s).ok_or_else(|| {
        format!(
            "{flag} {s:?}: give a UTC time like 2026-11-22T07:00:00.5Z or an offset from the \
             first frame like +90s"
        )
    })
}

/// The window of --from/--to; offsets count from the datasets' first frame.
pub(crate) fn parse_window(
    datasets: &[PathBuf],
    from: Option<&str>,
    to: Option<&str>,
) -> Result<TimeWindow, String> {
    let mut window = TimeWindow::default();
    if from.is_none() && to.is_none() {
        return Ok(window);
    }
    let probe = Session::open(datasets, window, None, 1).map_err(|e| e.to_string())?;
    let start = probe.span_ns().map(|s| s.0);
    if let Some(f) = from {
        window.from_ns = Some(parse_time(f, start, "--from")?);
    }
    if let Some(t) = to {
        window.to_ns = Some(parse_time(t, start, "--to")?);
    }
    Ok(window)
}

fn open(datasets: &[PathBuf], out: &OutputArgs, filter: Option<&str>) -> Result<Session, String> {
    let window = parse_window(datasets, out.from.as_deref(), out.to.as_deref())?;
    Session::open(datasets, window, filter, out.threads.unwrap_or(0)).map_err(|e| e.to_string())
}

/// The analyses, by the names `weir analyze` takes.
const KINDS: [&str; 11] = [
    "summary", "flows", "rates", "bursts", "top", "loss", "stack", "rpc", "dns", "tls", "http",
];

pub fn run_analyze(a: AnalyzeArgs) -> Result<ExitCode, String> {
    let (datasets, rest) = split_datasets(&a.words);
    if a.emit_sql {
        return emit_sql(&a, &datasets, rest);
    }
    if datasets.is_empty() {
        let first = a.words.first().map_or("", String::as_str);
        if KINDS.contains(&first) && a.words.len() > 1 {
            return Err(format!(
                "{first} is an analysis, and it comes after the datasets: weir analyze \
                 DATASET... {first}"
            ));
        }
        return Err(format!(
            "{first}: no such dataset directory; give one or more datasets (made by weir \
             convert or weir capture), then the analysis"
        ));
    }
    let Some((kind, args)) = rest.split_first() else {
        let hint = a
            .words
            .first()
            .map(|w| format!(" ({w} is not a directory)"))
            .unwrap_or_default();
        return Err(format!(
            "give the dataset, then the analysis: summary, flows, rates, bursts, top \
             hosts|ports|pairs, loss, stack, rpc, dns, tls or http{hint}"
        ));
    };
    // `top` takes what to rank; the words after are the filter.
    let (what, filter_words) = if kind == "top" {
        match args.split_first() {
            Some((w, rest)) => (Some(w.as_str()), rest),
            None => {
                return Err(
                    "top what? hosts, ports or pairs (weir analyze DATASET top hosts)".into(),
                );
            }
        }
    } else {
        (None, args)
    };
    let filter = (!filter_words.is_empty()).then(|| filter_words.join(" "));
    let format = a.out.format();
    let by = match a.by {
        ByArg::Bytes => By::Bytes,
        ByArg::Frames => By::Frames,
    };
    let analysis = match kind.as_str() {
        "summary" => Analysis::Summary,
        "flows" => Analysis::Flows {
            by,
            limit: a
                .limit
                .unwrap_or(if format == Format::Table { 20 } else { 0 }),
        },
        "top" => Analysis::Top {
            what: what.unwrap_or_default().to_string(),
            by,
            limit: a.limit.unwrap_or(20),
        },
        "loss" => Analysis::Loss,
        "rpc" => Analysis::Rpc {
            handles: a.limit.unwrap_or(analyze::rpc::TOP_HANDLES),
        },
        "stack" => Analysis::Stack,
        "dns" | "tls" | "http" => Analysis::App {
            kind: KINDS.iter().find(|k| *k == kind).copied().unwrap_or("dns"),
            limit: a.limit.unwrap_or(analyze::app::TOP),
        },
        "rates" => Analysis::Rates {
            every_ns: ns_of(parse_duration(&a.every).map_err(|e| format!("--every: {e}"))?),
            sample_ns: ns_of(parse_duration(&a.sample).map_err(|e| format!("--sample: {e}"))?),
        },
        "bursts" => Analysis::Bursts {
            scales_ns: scales_ns(&a.scales)?,
        },
        other => {
            return Err(format!(
                "unknown analysis {other:?}: choose summary, flows, rates, bursts, top \
                 hosts|ports|pairs, loss, stack, rpc, dns, tls or http"
            ));
        }
    };
    let session = open(&datasets, &a.out, filter.as_deref())?;
    let opts = AnswerOptions {
        packets_only: a.no_flows_table,
        for_json: format == Format::Json,
        plot: a.plot.clone(),
    };
    let answered = answer(&session, &analysis, &opts).map_err(|e| e.to_string())?;
    // stack always says which of its two forms answered: their tables
    // agree in shape, not in resolution.
    if a.verbose || matches!(analysis, Analysis::Stack) {
        eprintln!("{kind}: {}", answered.how);
    }
    print!(
        "{}",
        render(&answered.tables, format).map_err(|e| e.to_string())?
    );
    Ok(ExitCode::SUCCESS)
}

/// Parses --scales.
fn scales_ns(scales: &str) -> Result<Vec<i64>, String> {
    scales
        .split(',')
        .map(|s| {
            parse_duration(s)
                .map(ns_of)
                .map_err(|e| format!("--scales: {e}"))
        })
        .collect()
}

/// `--emit-sql`: the analysis's statements, for another engine.
fn emit_sql(a: &AnalyzeArgs, datasets: &[PathBuf], rest: &[String]) -> Result<ExitCode, String> {
    let Some((kind, args)) = rest.split_first() else {
        return Err(format!(
            "--emit-sql: give the analysis ({}), after the datasets",
            analyze::emit::KINDS.join(", ")
        ));
    };
    let (what, filter_words) = match (kind.as_str(), args.split_first()) {
        ("top", Some((w, rest))) => (Some(w.as_str()), rest),
        ("top", None) => return Err("top what? hosts, ports or pairs".into()),
        _ => (None, args),
    };
    let filter = (!filter_words.is_empty()).then(|| filter_words.join(" "));
    // An outer filter reads a tunnelled frame's outer header: whether the
    // datasets hold any decides its SQL (without datasets: none).
    let (window, span, tunnelled) = if datasets.is_empty() {
        if a.out.from.is_some() || a.out.to.is_some() {
            return Err("--from/--to need the dataset (give it before the analysis)".into());
        }
        (TimeWindow::default(), None, false)
    } else {
        let session = open(datasets, &a.out, None)?;
        let tunnelled = filter
            .as_deref()
            .is_some_and(analyze::filter::depends_on_tunnels)
            && session.holds_tunnels().map_err(|e| e.to_string())?;
        (
            session.window(),
            analyze::emit::span_for(kind, &session),
            tunnelled,
        )
    };
    let scales = scales_ns(&a.scales)?;
    let req = analyze::emit::Request {
        kind,
        what,
        by: match a.by {
            ByArg::Bytes => By::Bytes,
            ByArg::Frames => By::Frames,
        },
        limit: a.limit.unwrap_or(if kind == "rpc" {
            analyze::rpc::TOP_HANDLES
        } else {
            0
        }),
        every_ns: ns_of(parse_duration(&a.every).map_err(|e| format!("--every: {e}"))?),
        sample_ns: ns_of(parse_duration(&a.sample).map_err(|e| format!("--sample: {e}"))?),
        scales_ns: &scales,
    };
    let statements = analyze::emit::statements(&req, span).map_err(|e| e.to_string())?;
    let restriction = analyze::emit::restriction(window, filter.as_deref(), tunnelled)
        .map_err(|e| e.to_string())?;
    let title = format!(
        "weir analyze {}",
        [kind.as_str()]
            .into_iter()
            .chain(what)
            .collect::<Vec<_>>()
            .join(" ")
    );
    print!(
        "{}",
        analyze::emit::script(&title, datasets, restriction.as_deref(), &statements)
    );
    Ok(ExitCode::SUCCESS)
}

pub fn run_sql(a: SqlArgs) -> Result<ExitCode, String> {
    let (datasets, rest) = split_datasets(&a.words);
    if datasets.is_empty() {
        return Err(format!(
            "{}: no such dataset directory; usage: weir sql DATASET... \"SELECT ...\"",
            a.words[0]
        ));
    }
    let [sql] = rest else {
        return Err(
            "give the dataset directories, then one SQL statement in quotes: \
             weir sql DATASET \"SELECT count(*) FROM packets\""
                .into(),
        );
    };
    let session = open(&datasets, &a.out, None)?;
    let (schema, batches) = session.query_with_schema(sql).map_err(|e| e.to_string())?;
    let table = analyze::Table {
        name: "result".into(),
        schema,
        batches,
    };
    print!(
        "{}",
        render(&[table], a.out.format()).map_err(|e| e.to_string())?
    );
    Ok(ExitCode::SUCCESS)
}
