//! One analysis of a session, answered the best way the datasets allow
//! (`weir analyze`): flows, top and summary from the flows table when it
//! can answer, else from the packets; rates, bursts and loss by one pass
//! over the columns unless a filter needs the SQL; each with the plot a
//! caller asks for.

use std::path::PathBuf;

use crate::analyses::{self, By};
use crate::flow_table::FlowTable;
use crate::{AnalyzeError, Session, Table};

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
        matches!(
            self,
            Analysis::Rates { .. }
                | Analysis::Bursts { .. }
                | Analysis::Loss
                | Analysis::Rpc { .. }
                | Analysis::Stack
        )
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
                crate::plot::loss(&t, p)?;
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
                crate::plot::rates(&t, &loss, *every_ns, p)?;
            }
            Ok(Answer {
                tables: vec![t],
                how: format!("answered by {by}"),
            })
        }
        Analysis::Bursts { scales_ns } => {
            let (b, by) = analyses::bursts(session, scales_ns)?;
            if let Some(p) = plot {
                crate::plot::bursts(&b, p)?;
            }
            Ok(Answer {
                tables: analyses::burst_tables(&b, opts.for_json)?,
                how: format!("answered by {by}"),
            })
        }
        Analysis::Rpc { handles } => {
            let r = crate::rpc::rpc(session, *handles, plot.is_some())?;
            if let Some(p) = plot {
                crate::plot::rpc(&r.samples, p)?;
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
                crate::plot::stack(&s, p)?;
            }
            let mut tables = vec![s.sockets, s.delays];
            if opts.for_json {
                tables.push(s.tcp);
            }
            Ok(Answer {
                tables,
                how: s.form.describe().into(),
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
                let (slices, files) = t.size();
                let how =
                    format!("answered from the flows table ({slices} slices in {files} files)");
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
