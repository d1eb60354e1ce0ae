//! tcpdump filter expressions as SQL conditions over the packet records.
//!
//! `weir read` applies a filter exactly, with libpcap, to the frames
//! themselves. The analyses see only records, so the filter is translated
//! into a condition on their columns: every primitive whose meaning the
//! records hold (addresses, nets, ports, protocols, VLAN, lengths, TCP
//! flags). Anything else is refused by name rather than approximated.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, PartialEq, Eq)]
pub struct FilterError(pub String);

impl std::fmt::Display for FilterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "filter: {}", self.0)
    }
}

impl std::error::Error for FilterError {}

fn err<T>(msg: impl Into<String>) -> Result<T, FilterError> {
    Err(FilterError(msg.into()))
}

/// Translates `expr` (tcpdump syntax) into a SQL condition that is never
/// NULL: a record the filter would not match gives FALSE.
pub fn to_sql(expr: &str) -> Result<String, FilterError> {
    let tokens = tokenize(expr)?;
    if tokens.is_empty() {
        return Ok("TRUE".into());
    }
    let mut p = Parser {
        t: tokens,
        i: 0,
        last: None,
    };
    let sql = p.or()?;
    if let Some(t) = p.t.get(p.i) {
        return err(format!("unexpected {t:?}"));
    }
    Ok(sql)
}

fn tokenize(s: &str) -> Result<Vec<String>, FilterError> {
    let mut out = Vec::new();
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
        } else if "()[]".contains(c) {
            out.push(c.to_string());
            i += 1;
        } else if c == '&' && b.get(i + 1) == Some(&'&') || c == '|' && b.get(i + 1) == Some(&'|') {
            out.push(format!("{c}{c}"));
            i += 2;
        } else if c == '!' && b.get(i + 1) == Some(&'=') {
            out.push("!=".into());
            i += 2;
        } else if c == '=' && b.get(i + 1) == Some(&'=') {
            out.push("=".into());
            i += 2;
        } else if "!&|=".contains(c) {
            out.push(c.to_string());
            i += 1;
        } else {
            let start = i;
            while i < b.len() && !b[i].is_whitespace() && !"()[]!&|=".contains(b[i]) {
                i += 1;
            }
            out.push(b[start..i].iter().collect());
        }
    }
    Ok(out)
}

/// A primitive's qualifiers, remembered for `port 80 or 443`.
#[derive(Clone, Debug)]
struct Qualifiers {
    proto: Option<String>,
    dir: Dir,
    kind: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Either,
    Both,
    Src,
    Dst,
}

struct Parser {
    t: Vec<String>,
    i: usize,
    last: Option<Qualifiers>,
}

const PROTOS: &[&str] = &[
    "ether", "ip", "ip6", "arp", "rarp", "tcp", "udp", "sctp", "icmp", "icmp6",
];
const KINDS: &[&str] = &["host", "net", "port", "portrange"];

impl Parser {
    fn peek(&self) -> Option<&str> {
        self.t.get(self.i).map(String::as_str)
    }

    fn next(&mut self) -> Option<String> {
        let t = self.t.get(self.i).cloned();
        self.i += 1;
        t
    }

    fn expect(&mut self, what: &str) -> Result<(), FilterError> {
        match self.next() {
            Some(t) if t == what => Ok(()),
            Some(t) => err(format!("expected {what:?}, found {t:?}")),
            None => err(format!("expected {what:?} at the end")),
        }
    }

    fn or(&mut self) -> Result<String, FilterError> {
        let mut parts = vec![self.and()?];
        while matches!(self.peek(), Some("or" | "||")) {
            self.i += 1;
            parts.push(self.and()?);
        }
        Ok(join(parts, "OR"))
    }

    fn and(&mut self) -> Result<String, FilterError> {
        let mut parts = vec![self.not()?];
        while matches!(self.peek(), Some("and" | "&&")) {
            self.i += 1;
            parts.push(self.not()?);
        }
        Ok(join(parts, "AND"))
    }

    fn not(&mut self) -> Result<String, FilterError> {
        match self.peek() {
            Some("not" | "!") => {
                self.i += 1;
                Ok(format!("(NOT {})", self.not()?))
            }
            Some("(") => {
                self.i += 1;
                let inner = self.or()?;
                self.expect(")")?;
                Ok(inner)
            }
            Some(_) => self.primitive(),
            None => err("the expression ends too early"),
        }
    }

    fn primitive(&mut self) -> Result<String, FilterError> {
        let word = self.peek().unwrap_or_default().to_string();
        // Words that stand alone or take a plain argument.
        match word.as_str() {
            "greater" | "less" => {
                self.i += 1;
                let n = self.number("a length")?;
                let op = if word == "greater" { ">=" } else { "<=" };
                return Ok(format!("(wire_len {op} {n})"));
            }
            "vlan" => {
                self.i += 1;
                if let Some(n) = self.peek().and_then(|t| parse_num(t).ok()) {
                    self.i += 1;
                    return Ok(format!("COALESCE(vlan = {n}, FALSE)"));
                }
                return Ok("(vlan IS NOT NULL)".into());
            }
            "proto" => {
                self.i += 1;
                let n = self.proto_number()?;
                return Ok(format!("COALESCE(ip_proto = {n}, FALSE)"));
            }
            _ => {}
        }
        // [proto] [dir] [kind] value, or a protocol alone.
        let mut proto = None;
        if PROTOS.contains(&word.as_str()) {
            proto = Some(word.clone());
            self.i += 1;
            match self.peek() {
                Some("proto") if word == "ip" || word == "ip6" => {
                    self.i += 1;
                    let n = self.proto_number()?;
                    let v = if word == "ip" { 4 } else { 6 };
                    return Ok(format!(
                        "COALESCE(ip_version = {v} AND ip_proto = {n}, FALSE)"
                    ));
                }
                Some("[") => return self.tcp_flags(&word),
                Some(w) if is_dir(w) || KINDS.contains(&w) => {}
                _ => return proto_only(&word),
            }
        }
        let mut dir = Dir::Either;
        if let Some(w) = self.peek().filter(|w| is_dir(w)).map(str::to_string) {
            let w = w.as_str();
            dir = if w == "src" { Dir::Src } else { Dir::Dst };
            self.i += 1;
            // `src or dst host`, `src and dst host`
            if let (Some(op @ ("or" | "and")), Some(d2)) = (
                self.t.get(self.i).map(String::as_str),
                self.t.get(self.i + 1).map(String::as_str),
            ) && is_dir(d2)
                && d2 != w
            {
                dir = if op == "or" { Dir::Either } else { Dir::Both };
                self.i += 2;
            }
        }
        let kind = match self.peek() {
            Some(k) if KINDS.contains(&k) => {
                let k = k.to_string();
                self.i += 1;
                k
            }
            _ if proto.is_some() || dir != Dir::Either => "host".to_string(),
            Some(v) => {
                // A bare value: the last primitive's qualifiers apply.
                let Some(q) = self.last.clone() else {
                    return err(format!(
                        "{v:?} is not something weir can filter records on; primitives: \
                         host, net, port, portrange, src/dst, ether, ip, ip6, arp, tcp, udp, \
                         sctp, icmp, icmp6, vlan, proto, greater, less, tcp[tcpflags]"
                    ));
                };
                proto = q.proto;
                dir = q.dir;
                q.kind
            }
            None => return err("a value is missing at the end"),
        };
        let Some(value) = self.next() else {
            return err(format!("{kind} needs a value"));
        };
        self.last = Some(Qualifiers {
            proto: proto.clone(),
            dir,
            kind: kind.clone(),
        });
        let cond = match kind.as_str() {
            "host" if proto.as_deref() == Some("ether") => {
                let mac = parse_mac(&value)?;
                directed(dir, "eth_src", "eth_dst", |c| format!("{c} = {mac}"))
            }
            "host" => {
                let ip: IpAddr = value.parse().map_err(|_| {
                    FilterError(format!(
                        "{value:?} is not an IP address (host names are not resolved; give \
                         the address)"
                    ))
                })?;
                let lit = addr_literal(ip);
                directed(dir, "ip_src", "ip_dst", |c| format!("{c} = {lit}"))
            }
            "net" => {
                let (lo, hi) = self.net_range(&value)?;
                directed(dir, "ip_src", "ip_dst", |c| {
                    format!("({c} >= {lo} AND {c} <= {hi})")
                })
            }
            "port" => {
                let n = parse_port(&value)?;
                directed(dir, "src_port", "dst_port", |c| format!("{c} = {n}"))
            }
            "portrange" => {
                let Some((a, b)) = value.split_once('-') else {
                    return err(format!("portrange {value:?}: write it as LOW-HIGH"));
                };
                let (a, b) = (parse_port(a)?, parse_port(b)?);
                directed(dir, "src_port", "dst_port", |c| {
                    format!("({c} >= {a} AND {c} <= {b})")
                })
            }
            other => return err(format!("unknown primitive {other:?}")),
        };
        let guard = match proto.as_deref() {
            None | Some("ether") => None,
            Some(p) if kind == "port" || kind == "portrange" => match p {
                "tcp" => Some("ip_proto = 6".to_string()),
                "udp" => Some("ip_proto = 17".to_string()),
                "sctp" => Some("ip_proto = 132".to_string()),
                "ip" => Some("ip_version = 4".to_string()),
                "ip6" => Some("ip_version = 6".to_string()),
                other => return err(format!("{other} has no ports")),
            },
            Some("ip") => Some("ip_version = 4".to_string()),
            Some("ip6") => Some("ip_version = 6".to_string()),
            Some(other) => return err(format!("{other} {kind} is not a valid primitive")),
        };
        Ok(match guard {
            Some(g) => format!("COALESCE({g} AND {cond}, FALSE)"),
            None => format!("COALESCE({cond}, FALSE)"),
        })
    }

    /// `tcp[tcpflags] & MASK != 0`, `tcp[13] & MASK = VALUE` and the like.
    fn tcp_flags(&mut self, proto: &str) -> Result<String, FilterError> {
        if proto != "tcp" {
            return err(format!(
                "{proto}[...]: only tcp[tcpflags] (or tcp[13]) can be read from the records"
            ));
        }
        self.expect("[")?;
        match self.next().as_deref() {
            Some("tcpflags" | "13") => {}
            other => {
                return err(format!(
                    "tcp[{}]: only tcp[tcpflags] (or tcp[13]) can be read from the records",
                    other.unwrap_or("")
                ));
            }
        }
        self.expect("]")?;
        let mut lhs = "(tcp_flags & 255)".to_string();
        if self.peek() == Some("&") {
            self.i += 1;
            let m = self.flag_value()?;
            lhs = format!("(tcp_flags & {m})");
        }
        let op = match self.next().as_deref() {
            Some("!=") => "<>",
            Some("=") => "=",
            Some(">") => ">",
            Some("<") => "<",
            other => return err(format!("tcp[tcpflags]: expected != or =, found {other:?}")),
        };
        let v = self.flag_value()?;
        Ok(format!("COALESCE(ip_proto = 6 AND {lhs} {op} {v}, FALSE)"))
    }

    /// A flag name, a number, or `(a|b|...)`.
    fn flag_value(&mut self) -> Result<u32, FilterError> {
        if self.peek() == Some("(") {
            self.i += 1;
            let mut v = self.flag_value()?;
            while self.peek() == Some("|") {
                self.i += 1;
                v |= self.flag_value()?;
            }
            self.expect(")")?;
            return Ok(v);
        }
        let Some(t) = self.next() else {
            return err("a TCP flag value is missing");
        };
        let named = match t.as_str() {
            "tcp-fin" => 0x01,
            "tcp-syn" => 0x02,
            "tcp-rst" => 0x04,
            "tcp-push" => 0x08,
            "tcp-ack" => 0x10,
            "tcp-urg" => 0x20,
            "tcp-ece" => 0x40,
            "tcp-cwr" => 0x80,
            _ => return parse_num(&t).map(|n| n as u32),
        };
        Ok(named)
    }

    fn number(&mut self, what: &str) -> Result<u64, FilterError> {
        match self.next() {
            Some(t) => parse_num(&t),
            None => err(format!("{what} is missing")),
        }
    }

    fn proto_number(&mut self) -> Result<u64, FilterError> {
        match self.next().as_deref() {
            Some("tcp") => Ok(6),
            Some("udp") => Ok(17),
            Some("icmp") => Ok(1),
            Some("icmp6") => Ok(58),
            Some("sctp") => Ok(132),
            Some(t) => parse_num(t),
            None => err("proto needs a protocol number or name"),
        }
    }

    /// `a.b.c.d/len`, `a.b.c` (implied length), `addr mask m`, IPv6/len.
    fn net_range(&mut self, value: &str) -> Result<(String, String), FilterError> {
        let (addr, len) = if let Some((a, l)) = value.split_once('/') {
            let l: u32 = l
                .parse()
                .map_err(|_| FilterError(format!("net {value:?}: bad prefix length")))?;
            (a.to_string(), Some(l))
        } else {
            (value.to_string(), None)
        };
        let (ip, len) = if let Ok(ip) = addr.parse::<IpAddr>() {
            let len = if self.peek() == Some("mask") {
                self.i += 1;
                let m: Ipv4Addr =
                    self.next().unwrap_or_default().parse().map_err(|_| {
                        FilterError("net ... mask: give the mask as a.b.c.d".into())
                    })?;
                let m = u32::from(m);
                if m.leading_ones() + m.trailing_zeros() != 32 {
                    return err("net ... mask: the mask must be contiguous");
                }
                m.leading_ones()
            } else {
                len.unwrap_or(if ip.is_ipv4() { 32 } else { 128 })
            };
            (ip, len)
        } else {
            // Classful shorthand: 10 -> 10/8, 192.168 -> /16, 10.1.2 -> /24.
            let parts: Vec<&str> = addr.split('.').collect();
            if parts.len() > 3 || parts.iter().any(|p| p.parse::<u8>().is_err()) {
                return err(format!("net {value:?}: not a network address"));
            }
            let mut o = [0u8; 4];
            for (k, p) in parts.iter().enumerate() {
                o[k] = p.parse().unwrap_or(0);
            }
            (
                IpAddr::V4(Ipv4Addr::from(o)),
                len.unwrap_or(8 * parts.len() as u32),
            )
        };
        let (bits, total) = match ip {
            IpAddr::V4(v4) => (u128::from(v4.to_ipv6_mapped()), 32),
            IpAddr::V6(v6) => (u128::from(v6), 128),
        };
        if len > total {
            return err(format!(
                "net {value:?}: the prefix is longer than the address"
            ));
        }
        let host_bits = total - len;
        let mask: u128 = if host_bits == 0 {
            0
        } else {
            (1u128 << host_bits) - 1
        };
        let lo = bits & !mask;
        let hi = lo | mask;
        Ok((
            bin_literal(&lo.to_be_bytes()),
            bin_literal(&hi.to_be_bytes()),
        ))
    }
}

fn is_dir(w: &str) -> bool {
    w == "src" || w == "dst"
}

fn proto_only(p: &str) -> Result<String, FilterError> {
    Ok(match p {
        "ip" => "COALESCE(ip_version = 4, FALSE)",
        "ip6" => "COALESCE(ip_version = 6, FALSE)",
        "arp" => "COALESCE(ethertype = 2054, FALSE)",
        "rarp" => "COALESCE(ethertype = 32821, FALSE)",
        "tcp" => "COALESCE(ip_proto = 6, FALSE)",
        "udp" => "COALESCE(ip_proto = 17, FALSE)",
        "sctp" => "COALESCE(ip_proto = 132, FALSE)",
        "icmp" => "COALESCE(ip_version = 4 AND ip_proto = 1, FALSE)",
        "icmp6" => "COALESCE(ip_version = 6 AND ip_proto = 58, FALSE)",
        other => return err(format!("{other} needs host, src or dst")),
    }
    .into())
}

fn directed(dir: Dir, src: &str, dst: &str, f: impl Fn(&str) -> String) -> String {
    match dir {
        Dir::Src => f(src),
        Dir::Dst => f(dst),
        Dir::Either => format!("({} OR {})", f(src), f(dst)),
        Dir::Both => format!("({} AND {})", f(src), f(dst)),
    }
}

fn join(parts: Vec<String>, op: &str) -> String {
    if parts.len() == 1 {
        return parts.into_iter().next().unwrap_or_default();
    }
    format!("({})", parts.join(&format!(" {op} ")))
}

fn parse_num(t: &str) -> Result<u64, FilterError> {
    let r = if let Some(h) = t.strip_prefix("0x") {
        u64::from_str_radix(h, 16)
    } else {
        t.parse()
    };
    r.map_err(|_| FilterError(format!("{t:?} is not a number")))
}

fn parse_port(t: &str) -> Result<u16, FilterError> {
    t.parse().map_err(|_| {
        FilterError(format!(
            "port {t:?}: give the number (service names are not looked up)"
        ))
    })
}

fn parse_mac(t: &str) -> Result<String, FilterError> {
    let parts: Vec<&str> = t.split([':', '-', '.']).collect();
    let bytes: Option<Vec<u8>> = if parts.len() == 6 {
        parts
            .iter()
            .map(|p| u8::from_str_radix(p, 16).ok())
            .collect()
    } else {
        None
    };
    match bytes {
        Some(b) => Ok(bin_literal(&b)),
        None => err(format!("{t:?} is not a MAC address (aa:bb:cc:dd:ee:ff)")),
    }
}

/// How the records keep an address: IPv4 mapped into IPv6.
fn addr_literal(ip: IpAddr) -> String {
    let v6: Ipv6Addr = match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    };
    bin_literal(&v6.octets())
}

/// A fixed-size binary literal of the engine (DataFusion's `arrow_cast`).
fn bin_literal(b: &[u8]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("arrow_cast(X'{hex}', 'FixedSizeBinary({})')", b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translates_common_filters() {
        assert_eq!(to_sql("").unwrap(), "TRUE");
        assert_eq!(to_sql("tcp").unwrap(), "COALESCE(ip_proto = 6, FALSE)");
        let s = to_sql("tcp port 80 or 443").unwrap();
        assert_eq!(s.matches("ip_proto = 6").count(), 2, "{s}");
        assert!(s.contains("dst_port = 443"), "{s}");
        let s = to_sql("src host 10.0.0.1 and not udp").unwrap();
        assert!(
            s.contains("ip_src = arrow_cast(X'00000000000000000000ffff0a000001'"),
            "{s}"
        );
        assert!(s.contains("NOT COALESCE(ip_proto = 17"), "{s}");
        // Dotted partials, as libpcap reads them: 10.1/16 is 10.1.0.0/16.
        let s = to_sql("net 10.1/16").unwrap();
        assert!(
            s.contains("ffff0a010000") && s.contains("ffff0a01ffff"),
            "{s}"
        );
        assert!(to_sql("net 10.1.2.3.4").is_err());
        let s = to_sql("net 10.1.0.0/16").unwrap();
        assert!(
            s.contains("ffff0a010000") && s.contains("ffff0a01ffff"),
            "{s}"
        );
        let s = to_sql("net 192.168").unwrap();
        assert!(
            s.contains("ffffc0a80000") && s.contains("ffffc0a8ffff"),
            "{s}"
        );
        let s = to_sql("tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn").unwrap();
        assert!(s.contains("(tcp_flags & 18) = 2"), "{s}");
        assert!(
            to_sql("vlan 100 && greater 1000")
                .unwrap()
                .contains("wire_len >= 1000")
        );
        assert!(
            to_sql("ether host 00:11:22:33:44:55")
                .unwrap()
                .contains("'FixedSizeBinary(6)'")
        );
        assert!(
            to_sql("portrange 1000-2000")
                .unwrap()
                .contains("src_port >= 1000")
        );
    }

    #[test]
    fn refuses_what_records_cannot_answer() {
        for bad in [
            "host example.com",
            "ip[0] & 0xf != 5",
            "port http",
            "tcp port",
            "(tcp",
            "tcp )",
            "foo",
            "icmp port 1",
        ] {
            assert!(to_sql(bad).is_err(), "{bad} accepted");
        }
    }
}
