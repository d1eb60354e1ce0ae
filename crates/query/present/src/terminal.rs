//! Tables for a terminal: as wide as the terminal, no wider. Columns are
//! left out by how little they tell at a glance (flags, payload counts,
//! the rarer percentiles before frames, bytes and the flow); a flow's
//! addresses and ports read `a:p → b:q`; times are seconds from the
//! first frame; bytes, rates and durations carry their units; a long
//! table shows its first and last rows and says how many it left out.
//! Every analysis gets this by its column names, as the plain tables do.

use analyze::arrow::array::{Array, AsArray};
use analyze::arrow::datatypes::{
    DataType, Decimal128Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use analyze::arrow::util::display::{ArrayFormatter, FormatOptions};

use util::fmt::{group_digits, human_bytes, short_duration};

use crate::cells::{Kind, float_at, int_at, kind_of, tcp_flags_text};
use analyze::AnalyzeError;
use analyze::Table;

/// The terminal a table is laid out for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Terminal {
    /// Characters a line may take.
    pub width: usize,
    /// Rows of one table shown at most; a longer one shows its first and
    /// last rows.
    pub rows: usize,
    /// Times are shown as seconds after this one (the first frame of the
    /// span analysed).
    pub t0_ns: Option<i64>,
}

impl Terminal {
    /// A terminal of `width` columns, showing up to 30 rows of a table.
    pub fn new(width: usize, t0_ns: Option<i64>) -> Self {
        Terminal {
            width: width.max(20),
            rows: 30,
            t0_ns,
        }
    }
}

/// One column as shown.
struct Shown {
    header: String,
    cells: Vec<String>,
    right: bool,
    /// 0: kept longest; higher ranks are left out first.
    rank: u8,
}

/// Renders `tables` for `term`: each headed by its name when there are
/// several, and (once) what the times count from.
pub fn render_terminal(tables: &[Table], term: &Terminal) -> Result<String, AnalyzeError> {
    let tables: &[Table] = &crate::text::addresses_as_text(tables)?;
    let mut out = String::new();
    let mut relative_times = false;
    for t in tables {
        if tables.len() > 1 {
            out.push_str(&t.name);
            out.push('\n');
        }
        let (text, times) = table(t, term)?;
        relative_times |= times;
        out.push_str(&text);
        if tables.len() > 1 {
            out.push('\n');
        }
    }
    if relative_times && let Some(t0) = term.t0_ns {
        let head = format!(
            "times: seconds after the first frame, {}",
            store::time::format_ns(t0).replace('T', " ")
        );
        out.insert_str(0, &format!("{}\n", clip(&head, term.width)));
    }
    Ok(out)
}

/// The table for `term`, and whether it shows times from the first frame.
fn table(t: &Table, term: &Terminal) -> Result<(String, bool), AnalyzeError> {
    let mut shown = columns(t, term)?;
    let relative = term.t0_ns.is_some()
        && t.schema
            .fields()
            .iter()
            .any(|f| kind_of(f.name(), f.data_type()) == Kind::Time);
    // Leave out columns, least telling and rightmost first, until the
    // rest fit (the first column always stays).
    loop {
        let total: usize = shown.iter().map(width_of).sum::<usize>() + 2 * (shown.len() - 1);
        if total <= term.width || shown.len() <= 1 {
            break;
        }
        let drop = (1..shown.len())
            .max_by_key(|&i| (shown[i].rank, i))
            .expect("more than one column");
        shown.remove(drop);
    }
    let rows = shown.first().map_or(0, |c| c.cells.len());
    let widths: Vec<usize> = shown.iter().map(width_of).collect();
    let line = |cells: Vec<&str>| -> String {
        let mut line = String::new();
        for (c, cell) in cells.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = widths[c] - cell.chars().count();
            if shown[c].right {
                line.extend(std::iter::repeat_n(' ', pad));
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        clip(line.trim_end(), term.width)
    };
    let mut out = String::new();
    out.push_str(&line(shown.iter().map(|c| c.header.as_str()).collect()));
    out.push('\n');
    let total = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    out.push_str(&"-".repeat(total.min(term.width)));
    out.push('\n');
    // A long table: its first rows and its last few.
    let (head, tail) = if rows > term.rows {
        let tail = (term.rows / 6).max(1);
        (term.rows - tail - 1, tail)
    } else {
        (rows, 0)
    };
    for r in (0..head).chain(rows - tail..rows) {
        if r == rows - tail && tail > 0 {
            let left = rows - head - tail;
            out.push_str(&clip(
                &format!("… {left} more rows (--wide, --csv or --json print every row)"),
                term.width,
            ));
            out.push('\n');
        }
        out.push_str(&line(shown.iter().map(|c| c.cells[r].as_str()).collect()));
        out.push('\n');
    }
    if rows == 0 {
        out.push_str("(no rows)\n");
    }
    Ok((out, relative))
}

fn width_of(c: &Shown) -> usize {
    c.cells
        .iter()
        .chain(std::iter::once(&c.header))
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0)
}

/// `line` cut to `width` characters, the last one an ellipsis.
fn clip(line: &str, width: usize) -> String {
    let line = line.trim_end_matches('\n');
    let n = line.chars().count();
    if n <= width {
        return line.to_string();
    }
    let mut s: String = line.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// The table's columns formatted for the terminal, a flow's endpoints
/// joined into one.
fn columns(t: &Table, term: &Terminal) -> Result<Vec<Shown>, AnalyzeError> {
    let fields = t.schema.fields();
    // Cells per field; None where null.
    let mut cells: Vec<Vec<Option<String>>> = vec![Vec::new(); fields.len()];
    let mut right: Vec<bool> = fields.iter().map(|f| f.data_type().is_numeric()).collect();
    let opts = FormatOptions::default().with_null("");
    for b in &t.batches {
        for (c, f) in fields.iter().enumerate() {
            let a = b.column(c);
            let kind = kind_of(f.name(), a.data_type());
            if matches!(kind, Kind::TcpFlags) || is_port(f.name()) {
                right[c] = false;
            }
            let fmt =
                ArrayFormatter::try_new(a.as_ref(), &opts).map_err(|e| engine(e.to_string()))?;
            let unit = unit_of(f.name(), a.data_type());
            for r in 0..a.len() {
                cells[c].push((!a.is_null(r)).then(|| {
                    let plain = || fmt.value(r).to_string();
                    match unit {
                        Unit::Time => {
                            int_at(a.as_ref(), r).map_or_else(plain, |ns| match term.t0_ns {
                                Some(t0) => seconds_after(ns - t0),
                                None => store::time::format_ns(ns).replace('T', " "),
                            })
                        }
                        Unit::Duration => int_at(a.as_ref(), r).map_or_else(plain, short_duration),
                        Unit::BitRate | Unit::FrameRate => float_at(a.as_ref(), r)
                            .map_or_else(plain, |x| with_unit(x, unit.rate_unit())),
                        Unit::TcpFlags => int_at(a.as_ref(), r).map_or_else(plain, tcp_flags_text),
                        Unit::Protocol => integer(a.as_ref(), r).map_or_else(plain, protocol_name),
                        Unit::Bytes => integer(a.as_ref(), r).map_or_else(plain, |v| {
                            human_bytes(v.clamp(0, u64::MAX as i128) as u64)
                        }),
                        Unit::Count => integer(a.as_ref(), r)
                            .filter(|v| (0..=u64::MAX as i128).contains(v))
                            .map_or_else(plain, |v| group_digits(v as u64)),
                        Unit::Decimal => float_at(a.as_ref(), r).map_or_else(plain, three_digits),
                        Unit::Plain => plain(),
                    }
                }));
            }
        }
    }
    let names: Vec<&str> = fields.iter().map(|f| f.name().as_str()).collect();
    let index = |n: &str| names.iter().position(|&x| x == n);
    let mut joined: Vec<(usize, Shown)> = Vec::new();
    let mut used = vec![false; fields.len()];
    // A flow: src:src_port → dst:dst_port.
    if let (Some(s), Some(d)) = (index("src"), index("dst")) {
        let sp = index("src_port");
        let dp = index("dst_port");
        let rows = cells[s].len();
        let flow = (0..rows)
            .map(|r| {
                let end = |a: usize, p: Option<usize>| {
                    endpoint(
                        cells[a][r].as_deref().unwrap_or("-"),
                        p.and_then(|p| cells[p][r].as_deref()),
                    )
                };
                format!("{} → {}", end(s, sp), end(d, dp))
            })
            .collect();
        for i in [Some(s), Some(d), sp, dp].into_iter().flatten() {
            used[i] = true;
        }
        joined.push((
            s,
            Shown {
                header: "flow".into(),
                cells: flow,
                right: false,
                rank: 0,
            },
        ));
    }
    // A pair of hosts.
    if let (Some(a), Some(b)) = (index("host_a"), index("host_b")) {
        let rows = cells[a].len();
        let pair = (0..rows)
            .map(|r| {
                format!(
                    "{} ↔ {}",
                    cells[a][r].as_deref().unwrap_or("-"),
                    cells[b][r].as_deref().unwrap_or("-")
                )
            })
            .collect();
        used[a] = true;
        used[b] = true;
        joined.push((
            a,
            Shown {
                header: "hosts".into(),
                cells: pair,
                right: false,
                rank: 0,
            },
        ));
    }
    let mut out: Vec<(usize, Shown)> = joined;
    for (c, f) in fields.iter().enumerate() {
        if used[c] {
            continue;
        }
        let kind = kind_of(f.name(), f.data_type());
        let header = match kind {
            Kind::Time | Kind::Duration => f.name().trim_end_matches("_ns").to_string(),
            _ => f.name().clone(),
        };
        out.push((
            c,
            Shown {
                header,
                cells: std::mem::take(&mut cells[c])
                    .into_iter()
                    .map(Option::unwrap_or_default)
                    .collect(),
                right: right[c],
                rank: rank(f.name()),
            },
        ));
    }
    out.sort_by_key(|(c, _)| *c);
    Ok(out.into_iter().map(|(_, s)| s).collect())
}

fn engine(msg: String) -> AnalyzeError {
    AnalyzeError::Engine(msg)
}

fn is_port(name: &str) -> bool {
    name == "port" || name.ends_with("_port")
}

/// How much a column tells at a glance: 0 (the row's subject and its
/// size) to 3 (detail for those who asked with --wide).
pub fn rank(name: &str) -> u8 {
    const SUBJECT: &[&str] = &[
        "host",
        "port",
        "protocol",
        "proto",
        "start_ns",
        "scale_ns",
        "frames",
        "bytes",
        "seconds",
        "procedure",
        "proc",
        "socket",
        "cookie",
        "captured",
    ];
    const DETAIL: &[&str] = &[
        "tcp_flags",
        "_payload",
        "retrans",
        "_a_to_b",
        "_b_to_a",
        "queue_freezes",
        "pcap_level",
        "pcap_stored_bytes",
        "backlog",
        "captured_bytes",
        "parse_errors",
        "samples",
        "p1_",
        "p10_",
        "p25_",
        "p75_",
        "p99_9_",
        "p0_",
        "ipv4_frames",
        "ipv6_frames",
    ];
    if SUBJECT.contains(&name) {
        0
    } else if DETAIL.iter().any(|d| name.contains(d)) {
        3
    } else if name.contains("rtt") || name.ends_with("_ns") || name == "records" {
        2
    } else {
        1
    }
}

/// `a:p`, with an IPv6 address in brackets; the address alone without a
/// port.
fn endpoint(addr: &str, port: Option<&str>) -> String {
    match port {
        Some(p) if addr.contains(':') => format!("[{addr}]:{p}"),
        Some(p) => format!("{addr}:{p}"),
        None => addr.to_string(),
    }
}

/// `+1.234 s`: a time after the first frame.
fn seconds_after(ns: i64) -> String {
    format!(
        "{}{:.3} s",
        if ns < 0 { "-" } else { "+" },
        ns.abs() as f64 / 1e9
    )
}

/// `1.23 Mb/s`: three significant digits, an SI prefix and the unit.
pub fn with_unit(x: f64, unit: &str) -> String {
    let (v, p) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(s, _)| x.abs() >= *s * 0.9995)
        .map_or((x, ""), |(s, p)| (x / s, p));
    format!("{} {p}{unit}", three_digits(v))
}

/// `v` to three significant digits (whole numbers below 1000 as they are).
fn three_digits(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1000.0 {
        return format!("{v:.0}");
    }
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// What a column holds, by its name and type: how the terminal prints
/// its cells, and how the page (weir serve) formats them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// ns since the epoch: seconds after the first frame.
    Time,
    Duration,
    /// `*_bps`: b/s with an SI prefix.
    BitRate,
    /// `*_fps` and other rates: fr/s with an SI prefix.
    FrameRate,
    TcpFlags,
    /// An IP protocol number, by its name.
    Protocol,
    /// A byte count: B, kB, MB, GB.
    Bytes,
    /// Any other count: digits grouped.
    Count,
    /// A floating-point number: three significant digits.
    Decimal,
    /// Text, identifiers (ports, ids, versions) and the rest: as they are.
    Plain,
}

impl Unit {
    /// Its name in the page's API.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Time => "time",
            Unit::Duration => "duration",
            Unit::BitRate => "b/s",
            Unit::FrameRate => "fr/s",
            Unit::TcpFlags => "tcp_flags",
            Unit::Protocol => "protocol",
            Unit::Bytes => "bytes",
            Unit::Count => "count",
            Unit::Decimal => "decimal",
            Unit::Plain => "plain",
        }
    }

    fn rate_unit(self) -> &'static str {
        if self == Unit::BitRate { "b/s" } else { "fr/s" }
    }
}

/// The unit of column `name` of type `ty`.
pub fn unit_of(name: &str, ty: &DataType) -> Unit {
    match kind_of(name, ty) {
        Kind::Time => return Unit::Time,
        Kind::Duration => return Unit::Duration,
        Kind::Rate if name.ends_with("_bps") => return Unit::BitRate,
        Kind::Rate => return Unit::FrameRate,
        Kind::TcpFlags => return Unit::TcpFlags,
        Kind::Plain => {}
    }
    let int = ty.is_integer() || matches!(ty, DataType::Decimal128(_, 0));
    if (name == "proto" || name == "ip_proto") && int {
        return Unit::Protocol;
    }
    let identifier = [
        "port", "proto", "cookie", "version", "_id", "iface", "vlan", "level",
    ]
    .iter()
    .any(|k| name.contains(k));
    if identifier {
        Unit::Plain
    } else if matches!(ty, DataType::Float64) {
        Unit::Decimal
    } else if int
        && (name == "bytes"
            || name.ends_with("_bytes")
            || name.starts_with("bytes_")
            || name.ends_with("_payload"))
    {
        Unit::Bytes
    } else if int {
        Unit::Count
    } else {
        Unit::Plain
    }
}

/// An integer cell of any width, or a decimal without a fraction (what
/// SQL's sum of a byte count gives).
fn integer(a: &dyn Array, r: usize) -> Option<i128> {
    Some(match a.data_type() {
        DataType::Int8 => a.as_primitive::<Int8Type>().value(r) as i128,
        DataType::Int16 => a.as_primitive::<Int16Type>().value(r) as i128,
        DataType::Int32 => a.as_primitive::<Int32Type>().value(r) as i128,
        DataType::Int64 => a.as_primitive::<Int64Type>().value(r) as i128,
        DataType::UInt8 => a.as_primitive::<UInt8Type>().value(r) as i128,
        DataType::UInt16 => a.as_primitive::<UInt16Type>().value(r) as i128,
        DataType::UInt32 => a.as_primitive::<UInt32Type>().value(r) as i128,
        DataType::UInt64 => a.as_primitive::<UInt64Type>().value(r) as i128,
        DataType::Decimal128(_, 0) => a.as_primitive::<Decimal128Type>().value(r),
        _ => return None,
    })
}

/// An IP protocol number by its name where it has a common one.
fn protocol_name(p: i128) -> String {
    match p {
        1 => "icmp".into(),
        2 => "igmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        47 => "gre".into(),
        50 => "esp".into(),
        58 => "icmpv6".into(),
        132 => "sctp".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_endpoints() {
        assert_eq!(with_unit(1_234_567.0, "b/s"), "1.23 Mb/s");
        assert_eq!(with_unit(150_000.0, "fr/s"), "150 kfr/s");
        assert_eq!(with_unit(12.0, "fr/s"), "12 fr/s");
        assert_eq!(with_unit(999_999.0, "b/s"), "1.00 Mb/s");
        assert_eq!(endpoint("10.0.0.1", Some("80")), "10.0.0.1:80");
        assert_eq!(endpoint("2001::1", Some("53")), "[2001::1]:53");
        assert_eq!(endpoint("10.0.0.1", None), "10.0.0.1");
        assert_eq!(seconds_after(1_500_000_000), "+1.500 s");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert!(rank("fwd_tcp_flags") > rank("fwd_bytes"));
        assert!(rank("p99_9_fps") > rank("p99_fps"));
    }
}
