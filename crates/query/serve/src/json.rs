//! The API's JSON: a table as the page reads it (rows, each column's
//! unit and rank as the terminal has them), integers a JavaScript number
//! cannot hold as text, and the small numeric helpers of the handlers.

use analyze::Table;
use analyze::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use analyze::arrow::compute::cast;
use analyze::arrow::datatypes::{DataType, Int64Type};
use present::render::{rank, unit_of};
use serde_json::{Value, json};

use crate::routes::{ApiError, api_err};

/// A bar width for the overview: 1, 2 or 5 times a power of ten ns, or a
/// whole number of seconds, minutes, hours.
pub(crate) fn nice_bucket(at_least: i64) -> i64 {
    let at_least = at_least.max(1);
    const S: i64 = 1_000_000_000;
    if at_least >= S {
        for step in [
            S,
            2 * S,
            5 * S,
            10 * S,
            15 * S,
            30 * S,
            60 * S,
            120 * S,
            300 * S,
            600 * S,
            900 * S,
            1800 * S,
            3600 * S,
            7200 * S,
            21600 * S,
            43200 * S,
            86400 * S,
        ] {
            if step >= at_least {
                return step;
            }
        }
        return (at_least + 86400 * S - 1) / (86400 * S) * 86400 * S;
    }
    let mut p = 1i64;
    loop {
        for m in [1, 2, 5] {
            if p * m >= at_least {
                return p * m;
            }
        }
        p *= 10;
    }
}

/// The named integer columns of `batches`, each as i64.
pub(crate) fn columns_i64(
    batches: &[RecordBatch],
    names: &[&str],
) -> Result<Vec<Vec<i64>>, ApiError> {
    let mut out = vec![Vec::new(); names.len()];
    for b in batches {
        for (k, n) in names.iter().enumerate() {
            let c: &ArrayRef = b
                .column_by_name(n)
                .ok_or_else(|| api_err(500, "dataset", format!("no column {n}")))?;
            let c =
                cast(c, &DataType::Int64).map_err(|e| api_err(500, "dataset", e.to_string()))?;
            let c = c.as_primitive::<Int64Type>();
            out[k].extend((0..c.len()).map(|r| if c.is_null(r) { 0 } else { c.value(r) }));
        }
    }
    Ok(out)
}

/// Integers a JavaScript number cannot hold exactly (times in ns since the
/// epoch) as strings of their digits.
fn exact_in_javascript(v: &mut Value) {
    const EXACT: u64 = 1 << 53;
    match v {
        Value::Number(n)
            if n.as_i64().is_some_and(|i| i.unsigned_abs() > EXACT)
                || n.as_u64().is_some_and(|u| u > EXACT) =>
        {
            *v = Value::String(n.to_string());
        }
        Value::Array(a) => a.iter_mut().for_each(exact_in_javascript),
        Value::Object(o) => o.values_mut().for_each(exact_in_javascript),
        _ => {}
    }
}

/// A table as `{name, columns, units, ranks, rows}`: rows from `skip`, at
/// most `max`, as objects (a null is left out, addresses are text);
/// each column's unit and rank (0 most telling) as the terminal has them;
/// `truncated` when rows were left out.
pub(crate) fn table_json(t: &Table, skip: usize, max: usize) -> Result<Value, ApiError> {
    let mut kept = Vec::new();
    let mut to_skip = skip;
    let mut left = max;
    for b in &t.batches {
        if to_skip >= b.num_rows() {
            to_skip -= b.num_rows();
            continue;
        }
        let take = (b.num_rows() - to_skip).min(left);
        if take > 0 {
            kept.push(b.slice(to_skip, take));
        }
        to_skip = 0;
        left -= take;
    }
    let total = t.rows();
    let part = Table {
        name: t.name.clone(),
        schema: t.schema.clone(),
        batches: kept,
    };
    let mut rows: Value = if part.rows() == 0 {
        json!([])
    } else {
        let text = present::render::render(&[part], present::render::Format::Json)?;
        serde_json::from_str(&text).map_err(|e| api_err(500, "dataset", e.to_string()))?
    };
    exact_in_javascript(&mut rows);
    // How the page shows each column: the terminal's units and ranks.
    let fields = t.schema.fields();
    let units: Vec<&str> = fields
        .iter()
        .map(|f| unit_of(f.name(), f.data_type()).name())
        .collect();
    let ranks: Vec<u8> = fields.iter().map(|f| rank(f.name())).collect();
    Ok(json!({
        "name": t.name,
        "columns": fields.iter().map(|f| f.name().clone()).collect::<Vec<_>>(),
        "units": units,
        "ranks": ranks,
        "rows": rows,
        "truncated": skip + max < total,
    }))
}

/// A dataset's name on the page: the last part of its path or URL.
pub(crate) fn short_name(root: &dyn util::storage::Storage) -> String {
    let name = root.name();
    let trimmed = name.trim_end_matches('/');
    trimmed.rsplit('/').next().unwrap_or(trimmed).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_round() {
        assert_eq!(nice_bucket(0), 1);
        assert_eq!(nice_bucket(3), 5);
        assert_eq!(nice_bucket(1_100), 2_000);
        assert_eq!(nice_bucket(600_000_000), 1_000_000_000);
        assert_eq!(nice_bucket(1_000_000_001), 2_000_000_000);
        assert_eq!(nice_bucket(40 * 1_000_000_000), 60_000_000_000);
    }
}
