//! The filter's words parsed: tokens, then tcpdump's grammar (primitives
//! with their qualifiers, `and`/`or` left to right, `not` tightest) into
//! the condition on the records' columns and the [`FlowTest`] it implies.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{FilterError, FlowTest, Scope, err};

/// The condition of `expr` (a filter without its scope word) on the
/// records, and what it asks of a flow.
pub(super) fn condition(
    expr: &str,
    scope: Scope,
    tunnelled: bool,
) -> Result<(String, FlowTest), FilterError> {
    let tokens = tokenize(expr)?;
    if tokens.is_empty() {
        return Ok(("TRUE".into(), FlowTest::All(Vec::new())));
    }
    let mut p = Parser {
        t: tokens,
        i: 0,
        last: None,
        scope,
        tunnelled,
    };
    let c = p.expr()?;
    if let Some(t) = p.t.get(p.i) {
        return err(format!("unexpected {t:?}"));
    }
    Ok((c.sql, c.flow))
}

/// A condition on the records, and what it asks of a flow.
struct Cond {
    sql: String,
    flow: FlowTest,
}

impl Cond {
    fn new(sql: String, flow: FlowTest) -> Cond {
        Cond { sql, flow }
    }

    /// A primitive the flows table cannot decide.
    fn unknown(sql: String) -> Cond {
        Cond::new(sql, FlowTest::Unknown)
    }
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
    scope: Scope,
    /// Outer scope on records that may be tunnelled.
    tunnelled: bool,
}

/// A tunnelled frame's outer IP version, from its outermost address.
const OUTER_VERSION: &str = "CASE WHEN outer_src IS NULL THEN NULL \
     WHEN outer_src >= arrow_cast(X'00000000000000000000ffff00000000', 'FixedSizeBinary(16)') \
     AND outer_src <= arrow_cast(X'00000000000000000000ffffffffffff', 'FixedSizeBinary(16)') \
     THEN 4 ELSE 6 END";

const PROTOS: &[&str] = &[
    "ether", "ip", "ip6", "arp", "rarp", "tcp", "udp", "sctp", "icmp", "icmp6",
];
const KINDS: &[&str] = &["host", "net", "port", "portrange"];

impl Parser {
    /// The expression for column `name` in the filter's scope: the
    /// innermost packet has no link layer; the outer packet of a tunnelled
    /// frame has its outermost IP header's addresses and version, and no
    /// protocol or ports in the records. `what` names the primitive.
    fn col(&self, name: &str, what: &str) -> Result<String, FilterError> {
        let link = matches!(
            name,
            "eth_src" | "eth_dst" | "vlan" | "ethertype" | "wire_len"
        );
        match self.scope {
            Scope::Inner if link => err(format!(
                "inner {what}: the innermost packet starts at its IP header; {what} looks \
                 at the frame (leave it outside the inner filter)"
            )),
            Scope::Inner => Ok(name.to_string()),
            Scope::Outer if !self.tunnelled || link => Ok(name.to_string()),
            Scope::Outer => match name {
                "ip_src" | "ip_dst" => Ok(format!(
                    "(CASE WHEN COALESCE(tunnel_depth, 0) = 0 THEN {name} ELSE outer_{} END)",
                    &name[3..]
                )),
                "ip_version" => Ok(format!(
                    "(CASE WHEN COALESCE(tunnel_depth, 0) = 0 THEN ip_version ELSE \
                     {OUTER_VERSION} END)"
                )),
                _ => err(format!(
                    "{what}: the records hold tunnelled frames, and of their outer packet they \
                     keep the addresses, not its protocol, ports or TCP header; write inner \
                     {what} to filter on the innermost packet (what the records' columns \
                     describe), or use weir read, which runs the filter on the frames"
                )),
            },
        }
    }

    /// A protocol alone: `ip`, `tcp`, `arp`, ...
    fn proto_only(&self, p: &str) -> Result<Cond, FilterError> {
        let version = |v: u8| -> Result<(String, FlowTest), FilterError> {
            let col = self.col("ip_version", p)?;
            let flow = self.ip_test(&col, FlowTest::Version(v));
            Ok((format!("{col} = {v}"), flow))
        };
        let proto = |n: u8| -> Result<(String, FlowTest), FilterError> {
            Ok((
                format!("{} = {n}", self.col("ip_proto", p)?),
                FlowTest::Proto(n),
            ))
        };
        let ethertype = |t: u16| -> Result<(String, FlowTest), FilterError> {
            Ok((
                format!("{} = {t}", self.col("ethertype", p)?),
                FlowTest::Ethertype(t),
            ))
        };
        let (cond, flow) = match p {
            "ip" => version(4)?,
            "ip6" => version(6)?,
            "arp" => ethertype(2054)?,
            "rarp" => ethertype(32821)?,
            "tcp" => proto(6)?,
            "udp" => proto(17)?,
            "sctp" => proto(132)?,
            "icmp" | "icmp6" => {
                let (v, n) = if p == "icmp" { (4, 1) } else { (6, 58) };
                let ((vs, vf), (ps, pf)) = (version(v)?, proto(n)?);
                (format!("{vs} AND {ps}"), FlowTest::All(vec![vf, pf]))
            }
            other => return err(format!("{other} needs host, src or dst")),
        };
        Ok(Cond::new(format!("COALESCE({cond}, FALSE)"), flow))
    }

    /// `test` on a column the flows table holds, if `col` is that column
    /// itself: an outer filter on tunnelled records reads a tunnelled
    /// frame's outer header instead, which a flow's packets need not
    /// share.
    fn ip_test(&self, col: &str, test: FlowTest) -> FlowTest {
        if col.starts_with("(CASE") {
            FlowTest::Unknown
        } else {
            test
        }
    }

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

    /// Primitives joined by `and` and `or`, which bind equally, left to
    /// right (tcpdump's grammar): a run of one operator is one group.
    fn expr(&mut self) -> Result<Cond, FilterError> {
        let mut parts = vec![self.not()?];
        let mut op: Option<&'static str> = None;
        loop {
            let next = match self.peek() {
                Some("and" | "&&") => "AND",
                Some("or" | "||") => "OR",
                _ => break,
            };
            self.i += 1;
            if op.is_some_and(|o| o != next) {
                parts = vec![group(std::mem::take(&mut parts), op.unwrap_or(next))];
            }
            op = Some(next);
            parts.push(self.not()?);
        }
        Ok(match op {
            Some(op) => group(parts, op),
            None => parts.pop().unwrap_or_else(|| Cond::unknown("TRUE".into())),
        })
    }

    fn not(&mut self) -> Result<Cond, FilterError> {
        match self.peek() {
            Some("not" | "!") => {
                self.i += 1;
                let c = self.not()?;
                Ok(Cond::new(
                    format!("(NOT {})", c.sql),
                    FlowTest::Not(Box::new(c.flow)),
                ))
            }
            Some("(") => {
                self.i += 1;
                let inner = self.expr()?;
                self.expect(")")?;
                Ok(inner)
            }
            Some(_) => self.primitive(),
            None => err("the expression ends too early"),
        }
    }

    /// One primitive and its qualifiers. One `match` over tcpdump's words
    /// (one job: reading a primitive), hence its length.
    fn primitive(&mut self) -> Result<Cond, FilterError> {
        let word = self.peek().unwrap_or_default().to_string();
        // Words that stand alone or take a plain argument.
        match word.as_str() {
            "greater" | "less" => {
                self.i += 1;
                let n = self.number("a length")?;
                let op = if word == "greater" { ">=" } else { "<=" };
                let len = self.col("wire_len", &word)?;
                return Ok(Cond::unknown(format!("({len} {op} {n})")));
            }
            "vlan" => {
                self.i += 1;
                let vlan = self.col("vlan", "vlan")?;
                if let Some(n) = self.peek().and_then(|t| parse_num(t).ok()) {
                    self.i += 1;
                    return Ok(Cond::unknown(format!("COALESCE({vlan} = {n}, FALSE)")));
                }
                return Ok(Cond::unknown(format!("({vlan} IS NOT NULL)")));
            }
            "proto" => {
                self.i += 1;
                let n = self.proto_number()?;
                let proto = self.col("ip_proto", "proto")?;
                return Ok(Cond::new(
                    format!("COALESCE({proto} = {n}, FALSE)"),
                    proto_test(n),
                ));
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
                    let what = format!("{word} proto");
                    let (version, proto) =
                        (self.col("ip_version", &what)?, self.col("ip_proto", &what)?);
                    let flow = FlowTest::All(vec![
                        self.ip_test(&version, FlowTest::Version(v)),
                        proto_test(n),
                    ]);
                    return Ok(Cond::new(
                        format!("COALESCE({version} = {v} AND {proto} = {n}, FALSE)"),
                        flow,
                    ));
                }
                Some("[") => return self.tcp_flags(&word),
                Some(w) if is_dir(w) || KINDS.contains(&w) => {}
                _ => return self.proto_only(&word),
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
        let what = match &proto {
            Some(p) => format!("{p} {kind}"),
            None => kind.clone(),
        };
        // libpcap's `host` and `net` without a protocol look into ARP too.
        let arp = proto.is_none();
        let (cond, flow) = match kind.as_str() {
            "host" if proto.as_deref() == Some("ether") => {
                let mac = parse_mac(&value)?;
                let (s, d) = (self.col("eth_src", &what)?, self.col("eth_dst", &what)?);
                let (sql, _) = directed(
                    dir,
                    &s,
                    &d,
                    |c| format!("{c} = {mac}"),
                    |_| FlowTest::Unknown,
                );
                (sql, FlowTest::Unknown)
            }
            "host" | "net" => {
                let (lo, hi) = if kind == "host" {
                    let ip: IpAddr = value.parse().map_err(|_| {
                        FilterError(format!(
                            "{value:?} is not an IP address (host names are not resolved; \
                             give the address)"
                        ))
                    })?;
                    let a = u128::from_be_bytes(mapped(ip).octets());
                    (a, a)
                } else {
                    self.net_range(&value)?
                };
                let (s, d) = (self.col("ip_src", &what)?, self.col("ip_dst", &what)?);
                let sql_of = |c: &str| {
                    if kind == "host" {
                        format!("{c} = {}", bin_literal(&lo.to_be_bytes()))
                    } else {
                        format!(
                            "({c} >= {} AND {c} <= {})",
                            bin_literal(&lo.to_be_bytes()),
                            bin_literal(&hi.to_be_bytes())
                        )
                    }
                };
                let plain = !s.starts_with("(CASE");
                directed(dir, &s, &d, sql_of, |dst| {
                    if plain {
                        FlowTest::Addr { dst, lo, hi, arp }
                    } else {
                        FlowTest::Unknown
                    }
                })
            }
            "port" => {
                let n = parse_port(&value)?;
                let (s, d) = (self.col("src_port", &what)?, self.col("dst_port", &what)?);
                directed(
                    dir,
                    &s,
                    &d,
                    |c| format!("{c} = {n}"),
                    |dst| FlowTest::Port { dst, lo: n, hi: n },
                )
            }
            "portrange" => {
                let Some((a, b)) = value.split_once('-') else {
                    return err(format!("portrange {value:?}: write it as LOW-HIGH"));
                };
                let (a, b) = (parse_port(a)?, parse_port(b)?);
                let (s, d) = (self.col("src_port", &what)?, self.col("dst_port", &what)?);
                directed(
                    dir,
                    &s,
                    &d,
                    |c| format!("({c} >= {a} AND {c} <= {b})"),
                    |dst| FlowTest::Port { dst, lo: a, hi: b },
                )
            }
            other => return err(format!("unknown primitive {other:?}")),
        };
        let proto_is = |n: u8| -> Result<(String, FlowTest), FilterError> {
            Ok((
                format!("{} = {n}", self.col("ip_proto", &what)?),
                FlowTest::Proto(n),
            ))
        };
        let version_is = |v: u8| -> Result<(String, FlowTest), FilterError> {
            let col = self.col("ip_version", &what)?;
            let flow = self.ip_test(&col, FlowTest::Version(v));
            Ok((format!("{col} = {v}"), flow))
        };
        let guard = match proto.as_deref() {
            None | Some("ether") => None,
            Some(p) if kind == "port" || kind == "portrange" => match p {
                "tcp" => Some(proto_is(6)?),
                "udp" => Some(proto_is(17)?),
                "sctp" => Some(proto_is(132)?),
                "ip" => Some(version_is(4)?),
                "ip6" => Some(version_is(6)?),
                other => return err(format!("{other} has no ports")),
            },
            Some("ip") => Some(version_is(4)?),
            Some("ip6") => Some(version_is(6)?),
            Some(other) => return err(format!("{other} {kind} is not a valid primitive")),
        };
        Ok(match guard {
            Some((g, gf)) => Cond::new(
                format!("COALESCE({g} AND {cond}, FALSE)"),
                FlowTest::All(vec![gf, flow]),
            ),
            None => Cond::new(format!("COALESCE({cond}, FALSE)"), flow),
        })
    }

    /// `tcp[tcpflags] & MASK != 0`, `tcp[13] & MASK = VALUE` and the like.
    fn tcp_flags(&mut self, proto: &str) -> Result<Cond, FilterError> {
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
        let flags = self.col("tcp_flags", "tcp[tcpflags]")?;
        let proto = self.col("ip_proto", "tcp[tcpflags]")?;
        let mut lhs = format!("({flags} & 255)");
        if self.peek() == Some("&") {
            self.i += 1;
            let m = self.flag_value()?;
            lhs = format!("({flags} & {m})");
        }
        let op = match self.next().as_deref() {
            Some("!=") => "<>",
            Some("=") => "=",
            Some(">") => ">",
            Some("<") => "<",
            other => return err(format!("tcp[tcpflags]: expected != or =, found {other:?}")),
        };
        let v = self.flag_value()?;
        // The flags differ from packet to packet; the protocol does not.
        Ok(Cond::new(
            format!("COALESCE({proto} = 6 AND {lhs} {op} {v}, FALSE)"),
            FlowTest::All(vec![FlowTest::Proto(6), FlowTest::Unknown]),
        ))
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
    fn net_range(&mut self, value: &str) -> Result<(u128, u128), FilterError> {
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
        Ok((lo, lo | mask))
    }
}

fn is_dir(w: &str) -> bool {
    w == "src" || w == "dst"
}

/// A primitive on the source, the destination, either or both: its SQL,
/// and its test of a flow.
fn directed(
    dir: Dir,
    src: &str,
    dst: &str,
    f: impl Fn(&str) -> String,
    test: impl Fn(bool) -> FlowTest,
) -> (String, FlowTest) {
    match dir {
        Dir::Src => (f(src), test(false)),
        Dir::Dst => (f(dst), test(true)),
        Dir::Either => (
            format!("({} OR {})", f(src), f(dst)),
            FlowTest::Any(vec![test(false), test(true)]),
        ),
        Dir::Both => (
            format!("({} AND {})", f(src), f(dst)),
            FlowTest::All(vec![test(false), test(true)]),
        ),
    }
}

/// Conditions joined by `op` (AND or OR) as one.
fn group(parts: Vec<Cond>, op: &str) -> Cond {
    let (sqls, flows): (Vec<String>, Vec<FlowTest>) =
        parts.into_iter().map(|c| (c.sql, c.flow)).unzip();
    let flow = if op == "AND" {
        FlowTest::all(flows)
    } else {
        FlowTest::any(flows)
    };
    Cond::new(join(sqls, op), flow)
}

fn join(parts: Vec<String>, op: &str) -> String {
    if parts.len() == 1 {
        return parts.into_iter().next().unwrap_or_default();
    }
    format!("({})", parts.join(&format!(" {op} ")))
}

/// libpcap's `proto N` (and `ip proto N`): the records' `ip_proto`.
fn proto_test(n: u64) -> FlowTest {
    u8::try_from(n).map_or(FlowTest::Unknown, FlowTest::Proto)
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
fn mapped(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// A fixed-size binary literal of the engine (DataFusion's `arrow_cast`).
fn bin_literal(b: &[u8]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("arrow_cast(X'{hex}', 'FixedSizeBinary({})')", b.len())
}
