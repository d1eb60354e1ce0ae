//! The few fields of an X.509 certificate (RFC 5280) the tls table keeps:
//! subject, issuer and validity, by a minimal walk of its DER.

/// What a certificate says of itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertSummary {
    /// The subject's attributes in the certificate's order, `CN=...,O=...`
    /// (attributes weir has no short name for as their dotted OID).
    pub subject: String,
    pub issuer: String,
    /// Seconds since the epoch.
    pub not_before: Option<i64>,
    pub not_after: Option<i64>,
}

/// One DER element: (tag, contents, the rest after it).
fn element(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *b.first()?;
    let first = *b.get(1)?;
    let (len, head) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for &x in b.get(2..2 + n)? {
            len = len << 8 | x as usize;
        }
        (len, 2 + n)
    };
    let end = head.checked_add(len)?;
    Some((tag, b.get(head..end)?, b.get(end..)?))
}

/// The subject, issuer and validity of a DER certificate; `None` when it
/// does not have the shape of one.
pub fn summary(der: &[u8]) -> Option<CertSummary> {
    let (0x30, cert, _) = element(der)? else {
        return None;
    };
    let (0x30, tbs, _) = element(cert)? else {
        return None;
    };
    let mut rest = tbs;
    let (tag, _, r) = element(rest)?;
    if tag == 0xa0 {
        rest = r; // the explicit version
    }
    let (_, _, r) = element(rest)?; // serialNumber
    let (_, _, r) = element(r)?; // signature algorithm
    let (0x30, issuer, r) = element(r)? else {
        return None;
    };
    let (0x30, validity, r) = element(r)? else {
        return None;
    };
    let (0x30, subject, _) = element(r)? else {
        return None;
    };
    let (t1, nb, v) = element(validity)?;
    let (t2, na, _) = element(v)?;
    Some(CertSummary {
        subject: name(subject),
        issuer: name(issuer),
        not_before: time(t1, nb),
        not_after: time(t2, na),
    })
}

/// A Name (a sequence of sets of attribute-value pairs) as text.
fn name(mut rdns: &[u8]) -> String {
    let mut s = String::new();
    while let Some((_, set, rest)) = element(rdns) {
        rdns = rest;
        let mut atvs = set;
        while let Some((_, atv, more)) = element(atvs) {
            atvs = more;
            let Some((0x06, oid, v)) = element(atv) else {
                continue;
            };
            let Some((_, value, _)) = element(v) else {
                continue;
            };
            if !s.is_empty() {
                s.push(',');
            }
            push_oid_name(&mut s, oid);
            s.push('=');
            s.push_str(&String::from_utf8_lossy(value));
        }
    }
    s
}

fn push_oid_name(s: &mut String, oid: &[u8]) {
    let short = match oid {
        [0x55, 0x04, 0x03] => "CN",
        [0x55, 0x04, 0x06] => "C",
        [0x55, 0x04, 0x07] => "L",
        [0x55, 0x04, 0x08] => "ST",
        [0x55, 0x04, 0x0a] => "O",
        [0x55, 0x04, 0x0b] => "OU",
        [0x55, 0x04, 0x05] => "serialNumber",
        [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01] => "emailAddress",
        _ => "",
    };
    if !short.is_empty() {
        s.push_str(short);
        return;
    }
    use std::fmt::Write;
    let mut v: u64 = 0;
    let mut first = true;
    for &b in oid {
        if v > u64::MAX >> 8 {
            return;
        }
        v = (v << 7) | (b & 0x7f) as u64;
        if b & 0x80 == 0 {
            if first {
                let (a, b) = if v < 80 {
                    (v / 40, v % 40)
                } else {
                    (2, v - 80)
                };
                let _ = write!(s, "{a}.{b}");
                first = false;
            } else {
                let _ = write!(s, ".{v}");
            }
            v = 0;
        }
    }
}

/// A UTCTime (tag 23) or GeneralizedTime (tag 24) in seconds since the epoch.
fn time(tag: u8, v: &[u8]) -> Option<i64> {
    let digits = |b: &[u8]| -> Option<i64> {
        b.iter().try_fold(0i64, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + (c - b'0') as i64)
        })
    };
    let (year, rest) = match tag {
        23 => {
            let yy = digits(v.get(..2)?)?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, v.get(2..)?)
        }
        24 => (digits(v.get(..4)?)?, v.get(4..)?),
        _ => return None,
    };
    let month = digits(rest.get(..2)?)?;
    let day = digits(rest.get(2..4)?)?;
    let hour = digits(rest.get(4..6)?)?;
    let min = digits(rest.get(6..8)?)?;
    let sec = rest.get(8..10).and_then(digits).unwrap_or(0);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86400 + hour * 3600 + min * 60 + sec)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// A certificate with only the fields [`summary`] reads right (its key
/// and signature are placeholders): for tests and the traffic generator.
pub fn build_test_certificate(subject_cn: &str, issuer_cn: &str) -> Vec<u8> {
    fn tlv(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if body.len() < 128 {
            v.push(body.len() as u8);
        } else {
            v.push(0x82);
            v.extend_from_slice(&(body.len() as u16).to_be_bytes());
        }
        v.extend_from_slice(body);
        v
    }
    let cn = |s: &str| {
        let mut atv = tlv(0x06, &[0x55, 4, 3]);
        atv.extend(tlv(0x0c, s.as_bytes()));
        tlv(0x30, &tlv(0x31, &tlv(0x30, &atv)))
    };
    let alg = tlv(
        0x30,
        &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02],
    );
    let mut validity = tlv(23, b"250101000000Z");
    validity.extend(tlv(24, b"20351231235959Z"));
    let mut tbs = tlv(0xa0, &tlv(0x02, &[2]));
    tbs.extend(tlv(0x02, &[0x01, 0x23]));
    tbs.extend(&alg);
    tbs.extend(cn(issuer_cn));
    tbs.extend(tlv(0x30, &validity));
    tbs.extend(cn(subject_cn));
    tbs.extend(tlv(0x30, &[0x30, 0x00, 0x03, 0x01, 0x00]));
    let mut cert = tlv(0x30, &tbs);
    cert.extend(&alg);
    cert.extend(tlv(0x03, &[0, 1, 2, 3]));
    tlv(0x30, &cert)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_certificate_reads_back() {
        let c = summary(&build_test_certificate("www.example.org", "Example CA")).unwrap();
        assert_eq!(c.subject, "CN=www.example.org");
        assert_eq!(c.issuer, "CN=Example CA");
        assert_eq!(c.not_before, Some(1_735_689_600));
        assert_eq!(c.not_after, Some(2_082_758_399));
    }

    #[test]
    fn cut_certificates_do_not_panic() {
        let der = build_test_certificate("a", "b");
        for n in 0..der.len() {
            let _ = summary(&der[..n]);
        }
    }

    #[test]
    fn unknown_oids_are_dotted() {
        let mut s = String::new();
        push_oid_name(&mut s, &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x82, 0x37, 0x3c]);
        assert_eq!(s, "1.3.6.1.4.1.311.60");
    }
}
