//! Results as a terminal table, JSON or CSV.
//!
//! Every format shows addresses as text (`text`: by the columns' types,
//! lists of addresses too); CSV writes a list as one field `[a, b]`.
//! Tables for people format by column name: `*_ns` integers are times
//! (RFC 3339, UTC) or, for `duration_ns`, `span_ns`, `*rtt_ns` and
//! `*after_ns` (offsets), durations; `*_fps`
//! and `*_bps` rates get SI prefixes; `*tcp_flags` are shown as letters.
//! JSON and CSV keep the raw numbers.
//!
//! A table for a terminal ([`render_terminal`]) is shorter still: it fits
//! the terminal's width by leaving out the columns that matter least, puts
//! a flow's addresses and ports in one `a:p → b:q`, gives times as seconds
//! from the first frame and numbers with their units, and shows the first
//! and last rows of a long table. Into a pipe, tables stay complete.

use std::fmt::Write as _;

use analyze::arrow::array::{Array, RecordBatch};
use analyze::arrow::util::display::{ArrayFormatter, FormatOptions};

use util::fmt::{human_duration, si};

use crate::cells::{Kind, float_at, int_at, kind_of, tcp_flags_text};
pub use crate::terminal::{Terminal, Unit, rank, render_terminal, unit_of};
use analyze::AnalyzeError;
use analyze::Table;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// Renders `tables`; with several, each is headed by its name (table and
/// CSV) or is a member of one JSON object (JSON).
pub fn render(tables: &[Table], format: Format) -> Result<String, AnalyzeError> {
    let tables: &[Table] = &crate::text::addresses_as_text(tables)?;
    match format {
        Format::Table => {
            let mut out = String::new();
            for t in tables {
                if tables.len() > 1 {
                    let _ = writeln!(out, "{}", t.name);
                }
                out.push_str(&text_table(t)?);
                if tables.len() > 1 {
                    out.push('\n');
                }
            }
            Ok(out)
        }
        Format::Csv => {
            let mut out = String::new();
            for t in tables {
                if tables.len() > 1 {
                    let _ = writeln!(out, "# {}", t.name);
                }
                out.push_str(&csv(t)?);
                if tables.len() > 1 {
                    out.push('\n');
                }
            }
            Ok(out)
        }
        Format::Json => {
            if let [t] = tables {
                return Ok(format!("{}\n", json_rows(t)?));
            }
            let mut obj = serde_json::Map::new();
            for t in tables {
                let rows: serde_json::Value =
                    serde_json::from_str(&json_rows(t)?).map_err(|e| engine(e.to_string()))?;
                obj.insert(t.name.clone(), rows);
            }
            Ok(format!(
                "{}\n",
                serde_json::to_string_pretty(&serde_json::Value::Object(obj))
                    .map_err(|e| engine(e.to_string()))?
            ))
        }
    }
}

fn engine(msg: String) -> AnalyzeError {
    AnalyzeError::Engine(msg)
}

fn json_rows(t: &Table) -> Result<String, AnalyzeError> {
    let mut buf = Vec::new();
    {
        let mut w = analyze::arrow::json::ArrayWriter::new(&mut buf);
        let refs: Vec<&RecordBatch> = t.batches.iter().collect();
        w.write_batches(&refs).map_err(|e| engine(e.to_string()))?;
        w.finish().map_err(|e| engine(e.to_string()))?;
    }
    if buf.is_empty() {
        return Ok("[]".into());
    }
    String::from_utf8(buf).map_err(|e| engine(e.to_string()))
}

fn csv(t: &Table) -> Result<String, AnalyzeError> {
    let t = &crate::text::nested_as_text(t)?;
    if t.batches.is_empty() {
        let names: Vec<&str> = t
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        return Ok(format!("{}\n", names.join(",")));
    }
    let mut buf = Vec::new();
    {
        let mut w = analyze::arrow::csv::WriterBuilder::new()
            .with_header(true)
            .build(&mut buf);
        for b in &t.batches {
            w.write(b).map_err(|e| engine(e.to_string()))?;
        }
    }
    String::from_utf8(buf).map_err(|e| engine(e.to_string()))
}

fn text_table(t: &Table) -> Result<String, AnalyzeError> {
    let fields = t.schema.fields();
    let mut cols: Vec<Vec<String>> = fields.iter().map(|f| vec![f.name().clone()]).collect();
    let mut right: Vec<bool> = fields.iter().map(|f| f.data_type().is_numeric()).collect();
    let opts = FormatOptions::default().with_null("");
    for b in &t.batches {
        for (c, f) in fields.iter().enumerate() {
            let a = b.column(c);
            let kind = kind_of(f.name(), a.data_type());
            if kind == Kind::Time || kind == Kind::TcpFlags {
                right[c] = false;
            }
            let fmt =
                ArrayFormatter::try_new(a.as_ref(), &opts).map_err(|e| engine(e.to_string()))?;
            for r in 0..a.len() {
                let cell = if a.is_null(r) {
                    String::new()
                } else {
                    match kind {
                        Kind::Time => int_at(a.as_ref(), r).map_or_else(
                            || fmt.value(r).to_string(),
                            |ns| store::time::format_ns(ns).replace('T', " "),
                        ),
                        Kind::Duration => int_at(a.as_ref(), r)
                            .map_or_else(|| fmt.value(r).to_string(), human_duration),
                        Kind::Rate => {
                            float_at(a.as_ref(), r).map_or_else(|| fmt.value(r).to_string(), si)
                        }
                        Kind::TcpFlags => int_at(a.as_ref(), r)
                            .map_or_else(|| fmt.value(r).to_string(), tcp_flags_text),
                        Kind::Plain => fmt.value(r).to_string(),
                    }
                };
                cols[c].push(cell);
            }
        }
    }
    let widths: Vec<usize> = cols
        .iter()
        .map(|c| c.iter().map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    let rows = cols.first().map_or(0, |c| c.len());
    let mut out = String::new();
    for r in 0..rows {
        let mut line = String::new();
        for (c, col) in cols.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let cell = &col[r];
            let pad = widths[c] - cell.chars().count();
            if right[c] {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
        if r == 0 {
            let total = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    if rows <= 1 {
        out.push_str("(no rows)\n");
    }
    Ok(out)
}
