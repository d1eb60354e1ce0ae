//! One analysis of a session, answered the best way the datasets allow
//! (`weir analyze`): flows, top and summary from the flows table when it
//! can answer, else from the packets; rates, bursts and loss by one pass
//! over the columns unless a filter needs the SQL; each with the plot a
//! caller asks for.

use std::collections::BTreeMap;

use crate::analyses::{self, BurstScale, By};
use crate::error::AnalyzeError;
use crate::flow_table::FlowTable;
use crate::session::Session;
use crate::table::Table;

/// One analysis as callers name it: `weir analyze`, `--emit-sql` and the
/// page of `weir serve` all take their names from [`KINDS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    pub name: &'static str,
    /// What it answers, in a few words.
    pub about: &'static str,
    /// Takes what to rank after its name (`top hosts`).
    pub takes_what: bool,
    /// Can draw a plot (`--plot`).
    pub plots: bool,
    /// Its whole answer is SQL, so `--emit-sql` covers it (`stack` joins
    /// results in Rust between its queries).
    pub emits_sql: bool,
}

/// Every analysis, in the order they are listed to people.
pub const KINDS: &[Kind] = &[
    Kind {
        name: "summary",
        about: "totals, protocols, loss",
        takes_what: false,
        plots: false,
        emits_sql: true,
    },
    Kind {
        name: "flows",
        about: "bidirectional flows, largest first",
        takes_what: false,
        plots: false,
        emits_sql: true,
    },
    Kind {
        name: "rates",
        about: "least, mean and greatest rate per window",
        takes_what: false,
        plots: true,
        emits_sql: true,
    },
    Kind {
        name: "bursts",
        about: "burstiness at several scales",
        takes_what: false,
        plots: true,
        emits_sql: true,
    },
    Kind {
        name: "top",
        about: "the busiest hosts, ports or pairs",
        takes_what: true,
        plots: false,
        emits_sql: true,
    },
    Kind {
        name: "loss",
        about: "frames lost per second and stage",
        takes_what: false,
        plots: true,
        emits_sql: true,
    },
    Kind {
        name: "stack",
        about: "the host stack per socket",
        takes_what: false,
        plots: true,
        emits_sql: false,
    },
    Kind {
        name: "rpc",
        about: "RPC/NFS latency per procedure",
        takes_what: false,
        plots: true,
        emits_sql: true,
    },
    Kind {
        name: "dns",
        about: "names looked up, rcodes, latency per server",
        takes_what: false,
        plots: false,
        emits_sql: true,
    },
    Kind {
        name: "tls",
        about: "server names, versions, fingerprints",
        takes_what: false,
        plots: false,
        emits_sql: true,
    },
    Kind {
        name: "http",
        about: "hosts, methods, status codes, latency",
        takes_what: false,
        plots: false,
        emits_sql: true,
    },
];

/// What `top` ranks.
pub const TOP_WHATS: &[&str] = &["hosts", "ports", "pairs"];

/// The analysis named `name`.
pub fn kind(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

/// The analyses' names as people read them in a usage message:
/// "summary, flows, ..., top hosts|ports|pairs, ... or rpc".
pub fn kinds_text() -> String {
    let names: Vec<String> = KINDS
        .iter()
        .map(|k| {
            if k.takes_what {
                format!("{} {}", k.name, TOP_WHATS.join("|"))
            } else {
                k.name.to_string()
            }
        })
        .collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// The settings an analysis may take, as `weir analyze`'s flags give them.
#[derive(Clone, Debug)]
pub struct Settings {
    pub by: By,
    /// flows, top: rows (0: all); rpc: file handles (0: all). `None`:
    /// each analysis's default (`default_flows` for flows).
    pub limit: Option<usize>,
    /// The rows of flows when no limit is given.
    pub default_flows: usize,
    pub every_ns: i64,
    pub sample_ns: i64,
    pub scales_ns: Vec<i64>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            by: By::Bytes,
            limit: None,
            default_flows: 0,
            every_ns: 60_000_000_000,
            sample_ns: 1_000_000_000,
            scales_ns: vec![100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000],
        }
    }
}

/// An analysis and its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Analysis {
    Summary,
    /// `limit` 0: every flow.
    Flows {
        by: By,
        limit: usize,
    },
    /// `what`: hosts, ports or pairs.
    Top {
        what: String,
        by: By,
        limit: usize,
    },
    Rates {
        every_ns: i64,
        sample_ns: i64,
    },
    Bursts {
        scales_ns: Vec<i64>,
    },
    Loss,
    /// `handles`: file handles to list (0: all).
    Rpc {
        handles: usize,
    },
    Stack,
    /// dns, tls or http: ranked tables cut at `limit` rows (0: all).
    App {
        kind: &'static str,
        limit: usize,
    },
}

impl Analysis {
    /// The analysis `name` (and, for `top`, `what`) with `settings`: the
    /// one parser of analysis names.
    pub fn parse(
        name: &str,
        what: Option<&str>,
        settings: &Settings,
    ) -> Result<Analysis, AnalyzeError> {
        let s = settings;
        Ok(match name {
            "summary" => Analysis::Summary,
            "flows" => Analysis::Flows {
                by: s.by,
                limit: s.limit.unwrap_or(s.default_flows),
            },
            "top" => {
                let what = match what {
                    Some(w) if TOP_WHATS.contains(&w) => w,
                    Some(w) => {
                        return Err(AnalyzeError::Usage(format!(
                            "top {w}: choose {}",
                            TOP_WHATS.join(", ")
                        )));
                    }
                    None => {
                        return Err(AnalyzeError::Usage(format!(
                            "top what? {} (weir analyze DATASET top hosts)",
                            TOP_WHATS.join(", ")
                        )));
                    }
                };
                Analysis::Top {
                    what: what.to_string(),
                    by: s.by,
                    limit: s.limit.unwrap_or(20),
                }
            }
            "loss" => Analysis::Loss,
            "rpc" => Analysis::Rpc {
                handles: s.limit.unwrap_or(crate::rpc::TOP_HANDLES),
            },
            "stack" => Analysis::Stack,
            "rates" => Analysis::Rates {
                every_ns: s.every_ns,
                sample_ns: s.sample_ns,
            },
            "bursts" => Analysis::Bursts {
                scales_ns: s.scales_ns.clone(),
            },
            "dns" | "tls" | "http" => Analysis::App {
                kind: kind(name).map_or("dns", |k| k.name),
                limit: s.limit.unwrap_or(crate::app::TOP),
            },
            other => {
                return Err(AnalyzeError::Usage(format!(
                    "unknown analysis {other:?}: choose {}",
                    kinds_text()
                )));
            }
        })
    }

    /// The analysis's name as `weir analyze` spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Analysis::Summary => "summary",
            Analysis::Flows { .. } => "flows",
            Analysis::Top { .. } => "top",
            Analysis::Rates { .. } => "rates",
            Analysis::Bursts { .. } => "bursts",
            Analysis::Loss => "loss",
            Analysis::Rpc { .. } => "rpc",
            Analysis::Stack => "stack",
            Analysis::App { kind, .. } => kind,
        }
    }

    /// Whether it can draw a plot.
    pub fn plots(&self) -> bool {
        kind(self.name()).is_some_and(|k| k.plots)
    }
}

/// How to answer.
#[derive(Clone, Debug, Default)]
pub struct AnswerOptions {
    /// Answer flows, top and summary from the packets even when a flows
    /// table could (to check one against the other).
    pub packets_only: bool,
    /// The tables meant for JSON, which carry more (stack's TCP table,
    /// bursts' per-interval rows).
    pub for_json: bool,
    /// Also answer what a plot of the result draws ([`Answer::plot`]).
    pub plot: bool,
}

/// The tables, and how they were answered.
pub struct Answer {
    pub tables: Vec<Table>,
    /// "answered from the flows table (N slices in M files)", "answered
    /// from the packets: why", "answered by one pass over the columns", ...
    pub how: String,
    /// What a plot draws, when [`AnswerOptions::plot`] asked for one
    /// (`weir-present` draws it).
    pub plot: Option<Plot>,
}

/// The series a plot of an answer draws, and the span its time axis
/// covers.
pub enum Plot {
    Loss {
        table: Table,
        span: Option<(i64, i64)>,
    },
    /// `rates`, with `loss` to shade the windows that dropped frames.
    Rates {
        table: Table,
        loss: Table,
        every_ns: i64,
        span: Option<(i64, i64)>,
    },
    Bursts {
        scales: Vec<BurstScale>,
        span: Option<(i64, i64)>,
    },
    /// Per procedure, every answered call's latency in ns, sorted.
    Rpc {
        samples: BTreeMap<String, Vec<i64>>,
        span: Option<(i64, i64)>,
    },
    /// The busiest sockets' TCP state, and per socket its writes' delays.
    Stack {
        tcp: Table,
        delay_samples: BTreeMap<u64, Vec<i64>>,
        span: Option<(i64, i64)>,
    },
}

/// Answers `analysis` over `session`.
pub fn answer(
    session: &Session,
    analysis: &Analysis,
    opts: &AnswerOptions,
) -> Result<Answer, AnalyzeError> {
    if opts.plot && !analysis.plots() {
        return Err(AnalyzeError::Usage(format!(
            "--plot draws rates, bursts, loss, stack and rpc, not {}; use --json or --csv and \
             a plotting tool of your choice",
            analysis.name()
        )));
    }
    let plot = opts.plot;
    match analysis {
        Analysis::Summary | Analysis::Flows { .. } | Analysis::Top { .. } => {
            from_flows(session, analysis, opts.packets_only)
        }
        Analysis::Loss => {
            let (t, by) = analyses::loss(session)?;
            let plot = plot.then(|| Plot::Loss {
                table: t.clone(),
                span: session.span_ns(),
            });
            Ok(Answer {
                tables: vec![t],
                how: format!("answered by {by}"),
                plot,
            })
        }
        Analysis::Rates {
            every_ns,
            sample_ns,
        } => {
            let (t, by) = analyses::rates(session, *every_ns, *sample_ns)?;
            let plot = if plot {
                // Windows where frames were dropped are marked, so that
                // loss is not read as silence.
                let (loss, _) = analyses::loss(session)?;
                Some(Plot::Rates {
                    table: t.clone(),
                    loss,
                    every_ns: *every_ns,
                    span: analyses::rates_span(session),
                })
            } else {
                None
            };
            Ok(Answer {
                tables: vec![t],
                how: format!("answered by {by}"),
                plot,
            })
        }
        Analysis::Bursts { scales_ns } => {
            let (b, by) = analyses::bursts(session, scales_ns)?;
            Ok(Answer {
                tables: analyses::burst_tables(&b, opts.for_json)?,
                how: format!("answered by {by}"),
                plot: plot.then(|| Plot::Bursts {
                    scales: b,
                    span: session.span_ns(),
                }),
            })
        }
        Analysis::Rpc { handles } => {
            let r = crate::rpc::rpc(session, *handles, plot)?;
            Ok(Answer {
                tables: vec![r.procedures, r.latency, r.clients, r.handles],
                how: "answered from the rpc and nfs tables".into(),
                plot: plot.then(|| Plot::Rpc {
                    samples: r.samples,
                    span: session.span_ns(),
                }),
            })
        }
        Analysis::App { kind, limit } => Ok(Answer {
            tables: crate::app::app(session, kind, *limit)?,
            how: format!("answered from the {kind} table"),
            plot: None,
        }),
        Analysis::Stack => {
            let s = crate::stack::stack(session, 6)?;
            let how = s.form.describe();
            let mut tables = vec![s.sockets, s.delays];
            let plot = plot.then(|| Plot::Stack {
                tcp: s.tcp.clone(),
                delay_samples: s.delay_samples,
                span: session.span_ns(),
            });
            if opts.for_json {
                tables.push(s.tcp);
            }
            Ok(Answer { tables, how, plot })
        }
    }
}

/// flows, top and summary: from the flows table when it can answer for
/// the session (its window and filter), else from the packets.
fn from_flows(
    session: &Session,
    analysis: &Analysis,
    packets_only: bool,
) -> Result<Answer, AnalyzeError> {
    let (table, how) = if packets_only {
        (None, "answered from the packets".to_string())
    } else {
        match FlowTable::load(session)? {
            Ok(t) => {
                let how = format!("answered from the flows table ({})", t.describe());
                (Some(t), how)
            }
            Err(why) => (None, format!("answered from the packets: {why}")),
        }
    };
    let tables = match (analysis, &table) {
        (Analysis::Summary, Some(t)) => t.summary(session)?,
        (Analysis::Summary, None) => analyses::summary(session)?,
        (Analysis::Flows { by, limit }, Some(t)) => vec![t.flows(session, *by, *limit)?],
        (Analysis::Flows { by, limit }, None) => vec![analyses::flows(session, *by, *limit)?],
        (Analysis::Top { what, by, limit }, Some(t)) => vec![t.top(session, what, *by, *limit)?],
        (Analysis::Top { what, by, limit }, None) => {
            vec![analyses::top(session, what, *by, *limit)?]
        }
        _ => unreachable!("only flows, top and summary come here"),
    };
    Ok(Answer {
        tables,
        how,
        plot: None,
    })
}
