//! Durations and sizes as people type them: `500ms`, `10s`, `2m`, `1h`;
//! `64k`, `100M`, `2G` (bytes, powers of 1000 unless `Ki`/`Mi`/`Gi`).

use std::time::Duration;

/// Parses `D` with an optional unit: ns, us, ms, s (default), m, h.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (use e.g. 500ms, 10s, 2m, 1h)"))?;
    let secs = match unit {
        "ns" => v / 1e9,
        "us" | "µs" => v / 1e6,
        "ms" => v / 1e3,
        "" | "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (use ns, us, ms, s, m or h)"
            ));
        }
    };
    if !(0.0..=1e9).contains(&secs) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses a byte size: `1000`, `64k`, `100M`, `2G`, `512Ki`, `1Mi`, `4Gi`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (use e.g. 64k, 100M, 2G, 512Mi)"))?;
    let mult = match unit.trim_end_matches(['B', 'b']) {
        "" => 1.0,
        "k" | "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit {unit:?} (use k, M, G, Ki, Mi or Gi)"
            ));
        }
    };
    let bytes = v * mult;
    if !(0.0..=1e18).contains(&bytes) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(bytes.round() as u64)
}

/// The width of the terminal on standard output: $COLUMNS when set (as
/// shells do for their children), else what the terminal says, else 80.
pub fn terminal_width() -> usize {
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&w| w > 0)
    {
        return w;
    }
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills the winsize it is given, on our own stdout.
    let r = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    if r == 0 && size.ws_col > 0 {
        size.ws_col as usize
    } else {
        80
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("1.5m").unwrap(), Duration::from_secs(90));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
        assert_eq!(parse_size("100M").unwrap(), 100_000_000);
        assert_eq!(parse_size("1Gi").unwrap(), 1 << 30);
        assert_eq!(parse_size("64kB").unwrap(), 64_000);
        assert!(parse_size("lots").is_err());
    }
}
