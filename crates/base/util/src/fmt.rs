//! Numbers, sizes and durations written for people: the one place the
//! reports of every command and benchmark take them from, so that the
//! same quantity reads the same everywhere.

/// `1234567` as `1,234,567`.
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in B/kB/MB/GB (decimal, as networks count).
pub fn human_bytes(n: u64) -> String {
    let f = n as f64;
    match n {
        0..1_000 => format!("{n} B"),
        1_000..1_000_000 => format!("{:.1} kB", f / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", f / 1e6),
        _ => format!("{:.2} GB", f / 1e9),
    }
}

/// 1234567.0 -> "1.23 M".
pub fn si(x: f64) -> String {
    let (v, p) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(s, _)| x.abs() >= *s)
        .map_or((x, ""), |(s, p)| (x / s, p));
    let digits = format!("{v:.3}");
    let digits = digits.trim_end_matches('0').trim_end_matches('.');
    format!("{digits} {p}").trim_end().to_string()
}

/// Nanoseconds in ns, us, ms or s, three decimals above ns.
pub fn human_duration(ns: i64) -> String {
    let x = ns as f64;
    if ns.abs() >= 1_000_000_000 {
        format!("{:.3} s", x / 1e9)
    } else if ns.abs() >= 1_000_000 {
        format!("{:.3} ms", x / 1e6)
    } else if ns.abs() >= 1_000 {
        format!("{:.3} us", x / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// A round length as people write it (50 ms, 100 us, 15 s, 10 min, 6 h);
/// other lengths as [`human_duration`] gives them.
pub fn short_duration(ns: i64) -> String {
    for (unit, name) in [
        (86_400_000_000_000, "d"),
        (3_600_000_000_000, "h"),
        (60_000_000_000, "min"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ] {
        if ns >= unit {
            // Whole, or with up to three decimals (1.5 ms, not 1500 us).
            let v = ns as f64 / unit as f64;
            let text = format!("{v}");
            if ns % (unit / 1000).max(1) == 0 && text.split('.').nth(1).is_none_or(|d| d.len() <= 3)
            {
                return format!("{text} {name}");
            }
            break;
        }
    }
    human_duration(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn people_formats() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1_000), "1,000");
        assert_eq!(group_digits(1_234_567), "1,234,567");
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_500), "1.5 kB");
        assert_eq!(human_bytes(2_500_000_000), "2.50 GB");
        assert_eq!(si(1_234_567.0), "1.235 M");
        assert_eq!(si(12.0), "12");
        assert_eq!(si(300_000.0), "300 k");
        assert_eq!(si(3.5e9), "3.5 G");
        assert_eq!(human_duration(1_500_000), "1.500 ms");
        assert_eq!(human_duration(999), "999 ns");
        assert_eq!(short_duration(50_000_000), "50 ms");
        assert_eq!(short_duration(900_000_000_000), "15 min");
        assert_eq!(short_duration(1_500_000), "1.5 ms");
        assert_eq!(short_duration(1_000_000_001), "1.000 s");
        assert_eq!(short_duration(999), "999 ns");
    }
}
