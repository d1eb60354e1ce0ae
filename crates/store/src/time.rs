//! Timestamps as people read them: RFC 3339 in UTC with nanoseconds.

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// (year, month, day) to days since 1970-01-01.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 } as i64;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The wall clock now, ns since the epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Formats nanoseconds since the epoch as `2024-05-01T12:00:00.123456789Z`.
pub fn format_ns(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let frac = ns.rem_euclid(1_000_000_000);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{frac:09}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// Parses `YYYY-MM-DD[THH:MM[:SS[.fraction]]][Z]` (UTC) into nanoseconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let s = s.trim().trim_end_matches('Z');
    let (date, time) = match s.split_once(['T', ' ']) {
        Some((d, t)) => (d, t),
        None => (s, "00:00:00"),
    };
    let mut dp = date.split('-');
    let y: i64 = dp.next()?.parse().ok()?;
    let m: u32 = dp.next()?.parse().ok()?;
    let d: u32 = dp.next()?.parse().ok()?;
    if dp.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let (hms, frac) = match time.split_once('.') {
        Some((a, b)) => (a, b),
        None => (time, ""),
    };
    let mut tp = hms.split(':');
    let h: i64 = tp.next()?.parse().ok()?;
    let mi: i64 = tp.next().unwrap_or("0").parse().ok()?;
    let se: i64 = tp.next().unwrap_or("0").parse().ok()?;
    if h > 23 || mi > 59 || se > 60 || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_ns: i64 = if frac.is_empty() {
        0
    } else {
        format!("{frac:0<9}").parse().ok()?
    };
    let days = days_from_civil(y, m, d);
    Some(((days * 86_400 + h * 3600 + mi * 60 + se) * 1_000_000_000) + frac_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for ns in [
            0,
            1,
            1_700_000_000_123_456_789,
            -1,
            951_782_400_000_000_000,
            4_102_444_799_999_999_999,
        ] {
            assert_eq!(parse_rfc3339(&format_ns(ns)), Some(ns), "{}", format_ns(ns));
        }
        assert_eq!(format_ns(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            format_ns(951_782_400_000_000_000),
            "2000-02-29T00:00:00.000000000Z"
        );
        assert_eq!(parse_rfc3339("2000-02-29"), Some(951_782_400_000_000_000));
        assert_eq!(
            parse_rfc3339("2000-02-29T00:00:01.5"),
            Some(951_782_401_500_000_000)
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
    }
}
