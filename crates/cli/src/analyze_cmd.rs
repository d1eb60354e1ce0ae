//! `weir analyze` and `weir sql`: wiring to the analyze crate.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use analyze::answer::{Analysis, AnswerOptions, Settings, answer};
use analyze::{By, Session, TimeWindow};
use clap::{Args, ValueEnum};
use present::render::{Format, Terminal, render, render_terminal};
use util::storage::Root;

use crate::units::parse_duration;

#[derive(Args)]
pub struct OutputArgs {
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV instead of a table.
    #[arg(long)]
    csv: bool,
    /// In a terminal, print every column and row, as into a pipe (a table
    /// for a terminal fits its width and shows the first and last rows).
    #[arg(long)]
    wide: bool,
    /// Lay tables out for a terminal of N columns, wherever the output
    /// goes (for tests and scripts).
    #[arg(long, value_name = "N", hide = true)]
    width: Option<usize>,
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

    /// The terminal to lay tables out for: none for JSON, CSV, --wide or
    /// a pipe; else --width, $COLUMNS or the terminal's own width.
    fn terminal(&self, t0_ns: Option<i64>) -> Option<Terminal> {
        if self.format() != Format::Table || self.wide {
            return None;
        }
        let width = match self.width {
            Some(w) => w,
            None if std::io::stdout().is_terminal() => crate::units::terminal_width(),
            None => return None,
        };
        Some(Terminal::new(width, t0_ns))
    }

    /// Prints `tables` as asked, for a terminal when it is one.
    fn print(&self, tables: &[analyze::Table], session: &Session) -> Result<(), String> {
        let text = match self.terminal(session.span_ns().map(|s| s.0)) {
            Some(term) => render_terminal(tables, &term),
            None => render(tables, self.format()),
        };
        print!("{}", text.map_err(|e| e.to_string())?);
        Ok(())
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
    /// rates: window length (default: a round length giving 80-200
    /// windows over the span).
    #[arg(long, value_name = "D")]
    every: Option<String>,
    /// rates: sample length inside each window (default: a tenth of the
    /// window, or 1s with an --every of whole seconds).
    #[arg(long, value_name = "D")]
    sample: Option<String>,
    /// rates, bursts, loss, stack, rpc: also draw the result into FILE (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// bursts: interval lengths (default: powers of ten from the one
    /// holding about ten frames to a tenth of the span).
    #[arg(long, value_name = "D,D,...")]
    scales: Option<String>,
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

/// Splits leading datasets (directories, `s3://BUCKET/PREFIX` URLs) from
/// the words after them.
pub(crate) fn split_datasets(words: &[String]) -> Result<(Vec<Root>, &[String]), String> {
    let n = words
        .iter()
        .take_while(|w| objects::is_url(w) || std::path::Path::new(w.as_str()).is_dir())
        .count();
    let roots = words[..n]
        .iter()
        .map(|w| objects::open(w).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    Ok((roots, &words[n..]))
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
    datasets: &[Root],
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

fn open(datasets: &[Root], out: &OutputArgs, filter: Option<&str>) -> Result<Session, String> {
    let window = parse_window(datasets, out.from.as_deref(), out.to.as_deref())?;
    for n in crate::describe::pending_records_notes(datasets) {
        eprintln!("{n}");
    }
    Session::open(datasets, window, filter, out.threads.unwrap_or(0)).map_err(|e| e.to_string())
}

pub fn run_analyze(a: AnalyzeArgs) -> Result<ExitCode, String> {
    let (datasets, rest) = split_datasets(&a.words)?;
    if a.emit_sql {
        return emit_sql(&a, &datasets, rest);
    }
    if datasets.is_empty() {
        let first = a.words.first().map_or("", String::as_str);
        if analyze::answer::kind(first).is_some() && a.words.len() > 1 {
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
            "give the dataset, then the analysis: {}{hint}",
            analyze::answer::kinds_text()
        ));
    };
    // `top` takes what to rank; the words after are the filter.
    let takes_what = analyze::answer::kind(kind).is_some_and(|k| k.takes_what);
    let (what, filter_words) = match args.split_first() {
        Some((w, rest)) if takes_what => (Some(w.as_str()), rest),
        _ => (None, args),
    };
    let filter = (!filter_words.is_empty()).then(|| filter_words.join(" "));
    let format = a.out.format();
    // Intervals not given are 0 (none) here and chosen from the span once
    // the session is open (`choose_intervals`).
    let (every_ns, sample_ns) = rate_args(&a)?;
    let settings = Settings {
        by: match a.by {
            ByArg::Bytes => By::Bytes,
            ByArg::Frames => By::Frames,
        },
        limit: a.limit,
        default_flows: if format == Format::Table { 20 } else { 0 },
        every_ns: every_ns.unwrap_or(0),
        sample_ns: sample_ns.unwrap_or(0),
        scales_ns: match &a.scales {
            Some(s) => scales_ns(s)?,
            None => Vec::new(),
        },
    };
    let analysis = Analysis::parse(kind, what, &settings).map_err(|e| e.to_string())?;
    let session = open(&datasets, &a.out, filter.as_deref())?;
    let (analysis, chosen) = choose_intervals(analysis, &a, &session)?;
    let opts = AnswerOptions {
        packets_only: a.no_flows_table,
        for_json: format == Format::Json,
        plot: a.plot.is_some(),
    };
    let answered = answer(&session, &analysis, &opts).map_err(|e| e.to_string())?;
    if let (Some(path), Some(plot)) = (&a.plot, &answered.plot) {
        present::plot::draw(plot, path).map_err(|e| e.to_string())?;
    }
    // stack always says which of its two forms answered: their tables
    // agree in shape, not in resolution.
    if a.verbose || matches!(analysis, Analysis::Stack) {
        eprintln!("{kind}: {}", answered.how);
    }
    if let Some(line) = chosen
        && format == Format::Table
    {
        println!("{line}");
    }
    a.out.print(&answered.tables, &session)?;
    Ok(ExitCode::SUCCESS)
}

/// --every and --sample as given (ns), each None when not.
fn rate_args(a: &AnalyzeArgs) -> Result<(Option<i64>, Option<i64>), String> {
    let every = a
        .every
        .as_deref()
        .map(|e| {
            parse_duration(e)
                .map(ns_of)
                .map_err(|e| format!("--every: {e}"))
        })
        .transpose()?;
    let sample = a
        .sample
        .as_deref()
        .map(|e| {
            parse_duration(e)
                .map(ns_of)
                .map_err(|e| format!("--sample: {e}"))
        })
        .transpose()?;
    Ok((every, sample))
}

/// rates' window and sample: as given; what is not given is chosen, the
/// window from the span ([`analyze::analyses::default_rate_grid`]), the
/// sample to fit the window (1 s in whole seconds, as before, else a
/// tenth); the window for a given sample is the chosen one rounded up to
/// a multiple of it. Without a span: a minute of one-second samples.
fn rate_grid(given: (Option<i64>, Option<i64>), chosen: impl FnOnce() -> (i64, i64)) -> (i64, i64) {
    const S: i64 = 1_000_000_000;
    match given {
        (Some(e), Some(s)) => (e, s),
        (Some(e), None) if e % S == 0 => (e, S),
        (Some(e), None) => (e, (e / 10).max(1)),
        (None, Some(s)) => {
            let e = chosen().0.max(s);
            let s = s.max(1);
            ((e + s - 1) / s * s, s)
        }
        (None, None) => chosen(),
    }
}

/// Fills in the intervals rates and bursts were not given, and says what
/// was chosen (a line to print above the table).
fn choose_intervals(
    analysis: Analysis,
    a: &AnalyzeArgs,
    session: &Session,
) -> Result<(Analysis, Option<String>), String> {
    use analyze::analyses::{default_burst_scales_for, default_rate_grid_for, rates_span};
    use util::fmt::{human_duration, short_duration};
    match analysis {
        Analysis::Rates { .. } => {
            let given = rate_args(a)?;
            let (every_ns, sample_ns) = rate_grid(given, || default_rate_grid_for(session));
            let line = (given.0.is_none()).then(|| {
                let span = rates_span(session).map_or(0, |(f, l)| l - f);
                format!(
                    "windows of {}, samples of {}, over {} (--every and --sample choose)",
                    short_duration(every_ns),
                    short_duration(sample_ns),
                    human_duration(span)
                )
            });
            Ok((
                Analysis::Rates {
                    every_ns,
                    sample_ns,
                },
                line,
            ))
        }
        Analysis::Bursts { scales_ns } if scales_ns.is_empty() => {
            let scales_ns = default_burst_scales_for(session);
            let span = session.span_ns().map_or(0, |(f, l)| l - f);
            let line = format!(
                "intervals of {} over {} (--scales chooses)",
                scales_ns
                    .iter()
                    .map(|&s| short_duration(s))
                    .collect::<Vec<_>>()
                    .join(", "),
                human_duration(span)
            );
            Ok((Analysis::Bursts { scales_ns }, Some(line)))
        }
        other => Ok((other, None)),
    }
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
fn emit_sql(a: &AnalyzeArgs, datasets: &[Root], rest: &[String]) -> Result<ExitCode, String> {
    let Some((kind, args)) = rest.split_first() else {
        return Err(format!(
            "--emit-sql: give the analysis ({}), after the datasets",
            analyze::emit::kinds().join(", ")
        ));
    };
    let takes_what = analyze::answer::kind(kind).is_some_and(|k| k.takes_what);
    let (what, filter_words) = match args.split_first() {
        Some((w, rest)) if takes_what => (Some(w.as_str()), rest),
        None if takes_what => {
            return Err(format!(
                "{kind} what? {}",
                analyze::answer::TOP_WHATS.join(", ")
            ));
        }
        _ => (None, args),
    };
    let filter = (!filter_words.is_empty()).then(|| filter_words.join(" "));
    // An outer filter reads a tunnelled frame's outer header: whether the
    // datasets hold any decides its SQL (without datasets: none).
    let (window, span, tunnelled, session) = if datasets.is_empty() {
        if a.out.from.is_some() || a.out.to.is_some() {
            return Err("--from/--to need the dataset (give it before the analysis)".into());
        }
        (TimeWindow::default(), None, false, None)
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
            Some(session),
        )
    };
    let (scales, (every_ns, sample_ns)) = match &session {
        Some(session) => (
            match &a.scales {
                Some(s) => scales_ns(s)?,
                None => analyze::analyses::default_burst_scales_for(session),
            },
            rate_grid(rate_args(a)?, || {
                analyze::analyses::default_rate_grid_for(session)
            }),
        ),
        None => (
            match &a.scales {
                Some(s) => scales_ns(s)?,
                None => analyze::analyses::default_burst_scales(None, 0),
            },
            rate_grid(rate_args(a)?, || analyze::analyses::default_rate_grid(None)),
        ),
    };
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
        every_ns,
        sample_ns,
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
        analyze::emit::script(
            &title,
            &names(datasets),
            restriction.as_deref(),
            &statements
        )
    );
    Ok(ExitCode::SUCCESS)
}

pub fn run_sql(a: SqlArgs) -> Result<ExitCode, String> {
    let (datasets, rest) = split_datasets(&a.words)?;
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
    a.out.print(&[table], &session)?;
    Ok(ExitCode::SUCCESS)
}

/// The datasets as they were given.
pub(crate) fn names(datasets: &[Root]) -> Vec<String> {
    datasets.iter().map(|d| d.name()).collect()
}
