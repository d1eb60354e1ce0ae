//! One analysis of a session, answered the best way the datasets allow
//! (`weir analyze`): flows, top and summary from the flows table when it
//! can answer, else from the packets; rates, bursts and loss by one pass
//! over the columns unless a filter needs the SQL; each with the plot a
//! caller asks for.

use std::path::PathBuf;

use crate::analyses::{self, By};
use crate::flow_table::FlowTable;
use crate::{AnalyzeError, Session, Table};

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
    /// Also draw the result into this file (.svg or .png).
    pub plot: Option<PathBuf>,
}

/// The tables, and how they were answered.
pub struct Answer {
    pub tables: Vec<Table>,
    /// "answered from the flows table (N slices in M files)", "answered
    /// from the packets: why", "answered by one pass over the columns", ...
    pub how: String,
}

/// Answers `analysis` over `session`.
pub fn answer(
    session: &Session,
    analysis: &Analysis,
    opts: &AnswerOptions,
) -> Result<Answer, AnalyzeError> {
    if opts.plot.is_some() && !analysis.plots() {
        return Err(AnalyzeError::Usage(format!(
            "--plot draws rates, bursts, loss, stack and rpc, not {}; use --json or --csv and \
             a plotting tool of your choice",
            analysis.name()
        )));
    }
    let plot = opts.plot.as_deref();
    match analysis {
        Analysis::Summary | Analysis::Flows { .. } | Analysis::Top { .. } => {
            from_flows(session, analysis, opts.packets_only)
        }
        Analysis::Loss => {
            let (t, by) = analyses::loss(session)?;
            if let Some(p) = plot {
                crate::plot::loss(&t, session.span_ns(), p)?;
            }
            Ok(Answer {
                tables: vec![t],
                how: format!("answered by {by}"),
            })
        }
        Analysis::Rates {
            every_ns,
            sample_ns,
        } => {
            let (t, by) = analyses::rates(session, *every_ns, *sample_ns)?;
            if let Some(p) = plot {
                // Windows where frames were dropped are marked, so that
                // loss is not read as silence.
                let (loss, _) = analyses::loss(session)?;
                crate::plot::rates(&t, &loss, *every_ns, analyses::rates_span(session), p)?;
            }
            Ok(Answer {
                tables: vec![t],
                how: format!("answered by {by}"),
            })
        }
        Analysis::Bursts { scales_ns } => {
            let (b, by) = analyses::bursts(session, scales_ns)?;
            if let Some(p) = plot {
                crate::plot::bursts(&b, session.span_ns(), p)?;
            }
            Ok(Answer {
                tables: analyses::burst_tables(&b, opts.for_json)?,
                how: format!("answered by {by}"),
            })
        }
        Analysis::Rpc { handles } => {
            let r = crate::rpc::rpc(session, *handles, plot.is_some())?;
            if let Some(p) = plot {
                crate::plot::rpc(&r.samples, session.span_ns(), p)?;
            }
            Ok(Answer {
                tables: vec![r.procedures, r.latency, r.clients, r.handles],
                how: "answered from the rpc and nfs tables".into(),
            })
        }
        Analysis::App { kind, limit } => Ok(Answer {
            tables: crate::app::app(session, kind, *limit)?,
            how: format!("answered from the {kind} table"),
        }),
        Analysis::Stack => {
            let s = crate::stack::stack(session, 6)?;
            if let Some(p) = plot {
                crate::plot::stack(&s, session.span_ns(), p)?;
            }
            let mut tables = vec![s.sockets, s.delays];
            if opts.for_json {
                tables.push(s.tcp);
            }
            Ok(Answer {
                tables,
                how: s.form.describe(),
            })
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
    Ok(Answer { tables, how })
}
