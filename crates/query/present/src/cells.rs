//! A cell as people read it, by its column's name and type: times,
//! durations, rates and TCP flags (shared by the plain tables of
//! [`crate::render`] and the terminal's of [`crate::terminal`]).

use analyze::arrow::array::{Array, AsArray};
use analyze::arrow::datatypes::{DataType, Float64Type, Int64Type, UInt16Type, UInt64Type};

/// How a column is shown to people.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Time,
    Duration,
    Rate,
    TcpFlags,
    Plain,
}

pub(crate) fn kind_of(name: &str, ty: &DataType) -> Kind {
    let int = matches!(ty, DataType::Int64 | DataType::UInt64);
    if int
        && (name == "duration_ns"
            || name.ends_with("rtt_ns")
            || name.ends_with("delay_ns")
            || name.ends_with("latency_ns")
            || name.ends_with("after_ns")
            || name == "span_ns"
            || name == "scale_ns")
    {
        Kind::Duration
    } else if int && name.ends_with("_ns") {
        Kind::Time
    } else if name.ends_with("_fps") || name.ends_with("_bps") {
        Kind::Rate
    } else if name.ends_with("tcp_flags") && matches!(ty, DataType::UInt16 | DataType::Int64) {
        Kind::TcpFlags
    } else {
        Kind::Plain
    }
}

pub(crate) fn int_at(a: &dyn Array, r: usize) -> Option<i64> {
    match a.data_type() {
        DataType::Int64 => Some(a.as_primitive::<Int64Type>().value(r)),
        DataType::UInt64 => Some(a.as_primitive::<UInt64Type>().value(r) as i64),
        DataType::UInt16 => Some(a.as_primitive::<UInt16Type>().value(r) as i64),
        _ => None,
    }
}

pub(crate) fn float_at(a: &dyn Array, r: usize) -> Option<f64> {
    match a.data_type() {
        DataType::Float64 => Some(a.as_primitive::<Float64Type>().value(r)),
        _ => int_at(a, r).map(|v| v as f64),
    }
}

/// TCP flags as tcpdump names them, in its order: S F R P . (ACK) U E W.
pub fn tcp_flags_text(f: i64) -> String {
    let mut s = String::new();
    for (bit, c) in [
        (0x02, 'S'),
        (0x01, 'F'),
        (0x04, 'R'),
        (0x08, 'P'),
        (0x10, '.'),
        (0x20, 'U'),
        (0x40, 'E'),
        (0x80, 'W'),
    ] {
        if f & bit != 0 {
            s.push(c);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn people_formats() {
        assert_eq!(tcp_flags_text(0x12), "S.");
        assert_eq!(tcp_flags_text(0x19), "FP.");
    }
}
