//! tcpdump filter expressions as SQL conditions over the packet records.
//!
//! `weir read` applies a filter exactly, with libpcap, to the frames
//! themselves. The analyses see only records, so the filter is translated
//! into a condition on their columns: every primitive whose meaning the
//! records hold (addresses, nets, ports, protocols, VLAN, lengths, TCP
//! flags). Anything else is refused by name rather than approximated.
//!
//! A filter is read on the outer frame, as libpcap reads it, unless it
//! starts with the word `inner` (`outer` may be written for the default):
//! then it is read on the innermost IP packet of a tunnelled frame, which
//! is what the records' IP and transport columns describe. On the outer
//! side of a tunnelled frame the records keep the link layer and the
//! outermost IP header's addresses (`outer_src`, `outer_dst`), not its
//! protocol and ports: an outer filter on those is refused when the
//! records hold tunnelled frames. Inside, there is no link layer.
//!
//! As tcpdump reads it, `and` and `or` bind equally, left to right (`a or
//! b and c` is `(a or b) and c`); `not` binds tightest.
//!
//! The same parse also says what the filter asks of a *flow* ([`FlowTest`]):
//! a flow's packets share their addresses, ports, protocol and IP version in
//! each direction, so the flows table tells, for the primitives on those,
//! which flows may hold matching packets, and the packets' own index takes
//! a query to just those flows' rows (`crate::index`).

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

/// Which packet of a frame a filter looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The frame as captured (libpcap's reading): the default.
    Outer,
    /// The innermost IP packet (the only one of a frame without a tunnel),
    /// from its IP header on.
    Inner,
}

/// Splits the scope word (`inner`, `outer`) off the front of a filter:
/// the scope and the tcpdump expression after it.
pub fn split_scope(filter: &str) -> Result<(Scope, &str), FilterError> {
    let f = filter.trim_start();
    for (word, scope) in [("inner", Scope::Inner), ("outer", Scope::Outer)] {
        if let Some(rest) = f.strip_prefix(word)
            && rest
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace() || c == '(')
        {
            if rest.trim().is_empty() {
                return err(format!(
                    "{word} needs an expression after it ({word} tcp port 80, {word} host \
                     10.0.0.1)"
                ));
            }
            return Ok((scope, rest.trim_start()));
        }
    }
    Ok((Scope::Outer, f))
}

/// Whether `filter`'s SQL depends on the records holding tunnelled frames
/// (an outer filter that is not empty): see [`to_sql`].
pub fn depends_on_tunnels(filter: &str) -> bool {
    matches!(split_scope(filter), Ok((Scope::Outer, e)) if !e.trim().is_empty())
}

/// Translates `filter` (tcpdump syntax, perhaps after a scope word) into a
/// SQL condition that is never NULL: a record the filter would not match
/// gives FALSE. `tunnelled` says whether the records may hold tunnelled
/// frames (`tunnel_depth > 0`): an outer filter then reads their outer
/// addresses, and refuses what the records do not keep of the outer
/// packet; without tunnels the condition uses no tunnel column, so that
/// it also runs on records written before there were any.
pub fn to_sql(filter: &str, tunnelled: bool) -> Result<String, FilterError> {
    parse(filter, tunnelled).map(|f| f.sql)
}

/// A filter parsed: its condition on the records ([`to_sql`]) and what it
/// asks of a flow.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    pub scope: Scope,
    pub sql: String,
    pub flow: FlowTest,
}

/// Parses `filter` (see [`to_sql`] for `tunnelled`).
pub fn parse(filter: &str, tunnelled: bool) -> Result<Parsed, FilterError> {
    let (scope, expr) = split_scope(filter)?;
    let tokens = tokenize(expr)?;
    if tokens.is_empty() {
        return Ok(Parsed {
            scope,
            sql: "TRUE".into(),
            flow: FlowTest::All(Vec::new()),
        });
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
    Ok(Parsed {
        scope,
        sql: c.sql,
        flow: c.flow,
    })
}

/// What a filter asks of the packets of one flow direction, in terms of
/// what they all share: their IP version, addresses, ports and protocol
/// (or, without an IP layer, their ethertype). A primitive on anything
/// else (lengths, TCP flags, VLAN, MAC addresses, an outer header the
/// records describe only in part) is [`FlowTest::Unknown`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowTest {
    /// Every one holds (none: true).
    All(Vec<FlowTest>),
    /// One of them holds (none: false).
    Any(Vec<FlowTest>),
    Not(Box<FlowTest>),
    /// The source (or destination) address lies in `lo..=hi` (IPv4 mapped
    /// into IPv6). `arp`: libpcap's `host` and `net` without a protocol
    /// also look into ARP and RARP packets.
    Addr {
        dst: bool,
        lo: u128,
        hi: u128,
        arp: bool,
    },
    /// The source (or destination) port lies in `lo..=hi`.
    Port {
        dst: bool,
        lo: u16,
        hi: u16,
    },
    /// The transport protocol (after IPv6 extension headers).
    Proto(u8),
    /// The IP version.
    Version(u8),
    /// The ethertype of a frame without an IP layer.
    Ethertype(u16),
    /// Not decided by what a flow's packets share.
    Unknown,
}

/// An answer that may not be known: Kleene's three-valued logic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Truth {
    No,
    Maybe,
    Yes,
}

impl Truth {
    fn of(b: bool) -> Truth {
        if b { Truth::Yes } else { Truth::No }
    }

    fn not(self) -> Truth {
        match self {
            Truth::No => Truth::Yes,
            Truth::Maybe => Truth::Maybe,
            Truth::Yes => Truth::No,
        }
    }

    /// Yes becomes Maybe: where libpcap may read a packet otherwise than
    /// the records do, but never matches what the records do not.
    fn at_most_maybe(self) -> Truth {
        self.min(Truth::Maybe)
    }
}

/// One direction of a flow, as the flows table describes its packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowPacket {
    /// Version, source, destination, ports (if the packets carry them)
    /// and protocol of its IP layer, if it has one.
    pub ip: Option<FlowIp>,
    /// Without an IP layer: the ethertype, if any.
    pub ethertype: Option<u16>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowIp {
    pub version: u8,
    pub src: u128,
    pub dst: u128,
    pub ports: Option<(u16, u16)>,
    pub proto: u8,
}

/// Whose reading of a filter a [`FlowTest`] is asked in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reading {
    /// The records' condition ([`to_sql`]): exact.
    Records,
    /// libpcap's on the frames (`weir read`). libpcap matches a frame the
    /// records' condition does not only in a few cases, which this
    /// reading answers Maybe for: `host` and `net` also match ARP and
    /// RARP packets; and, as the file's frames may hold them, VLAN tags
    /// (libpcap's IP primitives do not look past one unless told `vlan`)
    /// and IPv6 extension headers (the records' protocol and ports are
    /// those after the chain). `inner`: libpcap runs on the innermost IP
    /// packet alone (no link layer, no ARP).
    Libpcap {
        inner: bool,
        vlan: bool,
        ipv6_ext: bool,
    },
}

impl FlowTest {
    fn all(mut v: Vec<FlowTest>) -> FlowTest {
        if v.len() == 1 {
            v.pop().unwrap_or(FlowTest::Unknown)
        } else {
            FlowTest::All(v)
        }
    }

    fn any(mut v: Vec<FlowTest>) -> FlowTest {
        if v.len() == 1 {
            v.pop().unwrap_or(FlowTest::Unknown)
        } else {
            FlowTest::Any(v)
        }
    }

    /// Whether the test decides anything about a flow (an Unknown
    /// alone, or under every branch, leaves every flow a candidate).
    pub fn decides(&self) -> bool {
        match self {
            FlowTest::Unknown => false,
            FlowTest::All(v) => v.is_empty() || v.iter().any(FlowTest::decides),
            FlowTest::Any(v) => v.iter().all(FlowTest::decides),
            FlowTest::Not(t) => t.decides(),
            _ => true,
        }
    }

    /// Whether the packets of `p` match, as `how` reads the filter.
    pub fn eval(&self, p: &FlowPacket, how: Reading) -> Truth {
        let (libpcap, inner, vlan, ipv6_ext) = match how {
            Reading::Records => (false, false, false, false),
            Reading::Libpcap {
                inner,
                vlan,
                ipv6_ext,
            } => (true, inner, vlan && !inner, ipv6_ext),
        };
        // libpcap's IP primitives on a frame with a VLAN tag see no IP.
        let ip_level = |t: Truth| if vlan { t.at_most_maybe() } else { t };
        let ext = |ip: &FlowIp| ipv6_ext && ip.version == 6;
        match self {
            FlowTest::All(v) => v.iter().map(|t| t.eval(p, how)).min().unwrap_or(Truth::Yes),
            FlowTest::Any(v) => v.iter().map(|t| t.eval(p, how)).max().unwrap_or(Truth::No),
            FlowTest::Not(t) => t.eval(p, how).not(),
            FlowTest::Unknown => Truth::Maybe,
            FlowTest::Addr { dst, lo, hi, arp } => match &p.ip {
                Some(ip) => {
                    let a = if *dst { ip.dst } else { ip.src };
                    ip_level(Truth::of(*lo <= a && a <= *hi))
                }
                // ARP and RARP packets carry addresses libpcap reads.
                None if libpcap && !inner && *arp => {
                    if matches!(p.ethertype, Some(0x0806 | 0x8035)) {
                        Truth::Maybe
                    } else {
                        Truth::No
                    }
                }
                None => Truth::No,
            },
            FlowTest::Port { dst, lo, hi } => match &p.ip {
                Some(ip) => {
                    let t = match ip.ports {
                        Some((s, d)) => {
                            let v = if *dst { d } else { s };
                            Truth::of(*lo <= v && v <= *hi)
                        }
                        None => Truth::No,
                    };
                    let t = ip_level(t);
                    if ext(ip) { t.at_most_maybe() } else { t }
                }
                None => Truth::No,
            },
            FlowTest::Proto(n) => match &p.ip {
                // libpcap reads the protocol of the header after the IPv6
                // one (`ip6 proto 0` is a hop-by-hop header), the records
                // the one after the chain.
                Some(ip) if ext(ip) => Truth::Maybe,
                Some(ip) => ip_level(Truth::of(ip.proto == *n)),
                None => Truth::No,
            },
            FlowTest::Version(v) => match &p.ip {
                Some(ip) => ip_level(Truth::of(ip.version == *v)),
                None => Truth::No,
            },
            FlowTest::Ethertype(e) => match &p.ip {
                Some(_) => Truth::No,
                None if inner => Truth::No,
                None => ip_level(Truth::of(p.ethertype == Some(*e))),
            },
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translates_common_filters() {
        assert_eq!(to_sql("", false).unwrap(), "TRUE");
        assert_eq!(
            to_sql("tcp", false).unwrap(),
            "COALESCE(ip_proto = 6, FALSE)"
        );
        let s = to_sql("tcp port 80 or 443", false).unwrap();
        assert_eq!(s.matches("ip_proto = 6").count(), 2, "{s}");
        assert!(s.contains("dst_port = 443"), "{s}");
        let s = to_sql("src host 10.0.0.1 and not udp", false).unwrap();
        assert!(
            s.contains("ip_src = arrow_cast(X'00000000000000000000ffff0a000001'"),
            "{s}"
        );
        assert!(s.contains("NOT COALESCE(ip_proto = 17"), "{s}");
        // Dotted partials, as libpcap reads them: 10.1/16 is 10.1.0.0/16.
        let s = to_sql("net 10.1/16", false).unwrap();
        assert!(
            s.contains("ffff0a010000") && s.contains("ffff0a01ffff"),
            "{s}"
        );
        assert!(to_sql("net 10.1.2.3.4", false).is_err());
        let s = to_sql("net 10.1.0.0/16", false).unwrap();
        assert!(
            s.contains("ffff0a010000") && s.contains("ffff0a01ffff"),
            "{s}"
        );
        let s = to_sql("net 192.168", false).unwrap();
        assert!(
            s.contains("ffffc0a80000") && s.contains("ffffc0a8ffff"),
            "{s}"
        );
        let s = to_sql("tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn", false).unwrap();
        assert!(s.contains("(tcp_flags & 18) = 2"), "{s}");
        assert!(
            to_sql("vlan 100 && greater 1000", false)
                .unwrap()
                .contains("wire_len >= 1000")
        );
        assert!(
            to_sql("ether host 00:11:22:33:44:55", false)
                .unwrap()
                .contains("'FixedSizeBinary(6)'")
        );
        assert!(
            to_sql("portrange 1000-2000", false)
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
            assert!(to_sql(bad, false).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn scope_words() {
        assert_eq!(split_scope("tcp").unwrap(), (Scope::Outer, "tcp"));
        assert_eq!(split_scope(" inner tcp").unwrap(), (Scope::Inner, "tcp"));
        assert_eq!(split_scope("outer  udp").unwrap(), (Scope::Outer, "udp"));
        assert_eq!(
            split_scope("inner(tcp or udp)").unwrap(),
            (Scope::Inner, "(tcp or udp)")
        );
        // A word that only starts like one is the expression's.
        assert_eq!(
            split_scope("innerhost").unwrap(),
            (Scope::Outer, "innerhost")
        );
        assert!(split_scope("inner").is_err());
        assert!(split_scope("outer ").is_err());
        assert!(depends_on_tunnels("host 10.0.0.1"));
        assert!(depends_on_tunnels("outer tcp"));
        assert!(!depends_on_tunnels("inner tcp"));
        assert!(!depends_on_tunnels(""));
    }

    #[test]
    fn inner_filters_read_the_columns_and_no_link_layer() {
        // The columns describe the innermost packet: the same SQL as an
        // outer filter on untunnelled records, whatever the records hold.
        for f in [
            "tcp port 80",
            "host 10.0.0.1 and not udp",
            "ip6 net fd00::/8",
        ] {
            let plain = to_sql(f, false).unwrap();
            assert_eq!(to_sql(&format!("inner {f}"), true).unwrap(), plain, "{f}");
            assert_eq!(to_sql(&format!("inner {f}"), false).unwrap(), plain, "{f}");
            assert!(
                !plain.contains("tunnel") && !plain.contains("outer"),
                "{plain}"
            );
        }
        for bad in [
            "inner vlan 10",
            "inner ether host 00:11:22:33:44:55",
            "inner arp",
            "inner greater 100",
            "inner tcp and less 60",
        ] {
            let e = to_sql(bad, false).unwrap_err();
            assert!(e.0.contains("starts at its IP header"), "{bad}: {e}");
        }
    }

    #[test]
    fn outer_filters_on_tunnelled_records_read_the_outer_header() {
        // Without tunnels, the SQL of before: no tunnel column.
        assert_eq!(
            to_sql("outer host 10.0.0.1", false).unwrap(),
            to_sql("host 10.0.0.1", false).unwrap()
        );
        let s = to_sql("src host 192.0.2.1", true).unwrap();
        assert!(
            s.contains(
                "THEN ip_src ELSE outer_src END) = arrow_cast(X'00000000000000000000ffffc0000201'"
            ),
            "{s}"
        );
        let s = to_sql("ip6 and net 2001:db8::/32 and vlan 5 and greater 100", true).unwrap();
        assert!(
            s.contains("outer_dst") && s.contains("outer_src IS NULL"),
            "{s}"
        );
        assert!(
            s.contains("vlan = 5") && s.contains("wire_len >= 100"),
            "{s}"
        );
        // What the records do not keep of the outer packet is refused.
        for bad in [
            "tcp",
            "udp port 4789",
            "port 80",
            "ip proto 47",
            "proto 17",
            "icmp",
            "tcp[tcpflags] & tcp-syn != 0",
            "host 10.0.0.1 or portrange 1-2",
        ] {
            let e = to_sql(bad, true).unwrap_err();
            assert!(e.0.contains("inner"), "{bad}: {e}");
            assert!(to_sql(bad, false).is_ok(), "{bad}");
            assert!(to_sql(&format!("inner {bad}"), true).is_ok(), "{bad}");
        }
    }

    fn v4(a: [u8; 4]) -> u128 {
        u128::from_be_bytes(Ipv4Addr::from(a).to_ipv6_mapped().octets())
    }

    /// One direction of a UDP or TCP flow between two IPv4 ends.
    fn packet(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, proto: u8) -> FlowPacket {
        FlowPacket {
            ip: Some(FlowIp {
                version: 4,
                src: v4(src),
                dst: v4(dst),
                ports: Some((sport, dport)),
                proto,
            }),
            ethertype: None,
        }
    }

    fn records(f: &str, p: &FlowPacket) -> Truth {
        parse(f, false).unwrap().flow.eval(p, Reading::Records)
    }

    #[test]
    fn and_and_or_bind_equally_left_to_right() {
        // tcpdump: `a or b and c` is `(a or b) and c`.
        let s = to_sql("udp or tcp and port 80", false).unwrap();
        assert!(s.starts_with("((COALESCE(ip_proto = 17"), "{s}");
        assert!(s.ends_with("FALSE))"), "{s}");
        let p = packet([10, 0, 0, 1], 5000, [10, 0, 0, 2], 53, 17);
        assert_eq!(records("udp or tcp and port 80", &p), Truth::No);
        assert_eq!(records("tcp and port 80 or udp", &p), Truth::Yes);
        // A run of one operator stays one group, as before.
        assert_eq!(
            to_sql("tcp and port 80 and host 10.0.0.1", false)
                .unwrap()
                .matches(" AND ")
                .count(),
            2
        );
    }

    #[test]
    fn flow_tests_decide_what_a_flow_shares() {
        let p = packet([10, 0, 0, 5], 1028, [10, 200, 0, 1], 9000, 17);
        for (f, want) in [
            ("host 10.0.0.5 and port 1028", Truth::Yes),
            ("src host 10.0.0.5 and dst port 9000", Truth::Yes),
            ("dst host 10.0.0.5", Truth::No),
            ("net 10.200/16", Truth::Yes),
            ("tcp or icmp", Truth::No),
            ("not udp", Truth::No),
            ("udp portrange 1000-1100", Truth::Yes),
            ("ip6 or proto 6", Truth::No),
            ("host 10.0.0.5 and greater 100", Truth::Maybe),
            ("host 10.0.0.6 and greater 100", Truth::No),
            ("not vlan", Truth::Maybe),
            ("tcp[tcpflags] & tcp-syn != 0", Truth::No),
            ("ether host 00:11:22:33:44:55 or port 9000", Truth::Yes),
            ("", Truth::Yes),
        ] {
            assert_eq!(records(f, &p), want, "{f}");
        }
        assert!(parse("host 10.0.0.5", false).unwrap().flow.decides());
        assert!(!parse("greater 100", false).unwrap().flow.decides());
        assert!(
            !parse("vlan or host 10.0.0.5", false)
                .unwrap()
                .flow
                .decides()
        );
        assert!(
            parse("vlan and host 10.0.0.5", false)
                .unwrap()
                .flow
                .decides()
        );
        // An outer address of tunnelled records is no flow's.
        assert!(!parse("host 10.0.0.5", true).unwrap().flow.decides());
        assert!(parse("inner host 10.0.0.5", true).unwrap().flow.decides());
    }

    #[test]
    fn libpcap_reads_some_packets_otherwise() {
        let arp = FlowPacket {
            ip: None,
            ethertype: Some(0x0806),
        };
        let plain = Reading::Libpcap {
            inner: false,
            vlan: false,
            ipv6_ext: false,
        };
        let f = |s: &str| parse(s, false).unwrap().flow;
        // libpcap's host looks into ARP; the records' does not.
        assert_eq!(f("host 10.0.0.5").eval(&arp, Reading::Records), Truth::No);
        assert_eq!(f("host 10.0.0.5").eval(&arp, plain), Truth::Maybe);
        assert_eq!(f("ip host 10.0.0.5").eval(&arp, plain), Truth::No);
        assert_eq!(f("arp").eval(&arp, plain), Truth::Yes);
        let inner = Reading::Libpcap {
            inner: true,
            vlan: false,
            ipv6_ext: false,
        };
        assert_eq!(f("host 10.0.0.5").eval(&arp, inner), Truth::No);
        // With VLAN tags about, what the records match libpcap may not,
        // so the negation may hold: Maybe both ways.
        let p = packet([10, 0, 0, 5], 1028, [10, 200, 0, 1], 9000, 17);
        let vlan = Reading::Libpcap {
            inner: false,
            vlan: true,
            ipv6_ext: false,
        };
        assert_eq!(f("host 10.0.0.5").eval(&p, vlan), Truth::Maybe);
        assert_eq!(f("not host 10.0.0.5").eval(&p, vlan), Truth::Maybe);
        assert_eq!(f("host 10.0.0.6").eval(&p, vlan), Truth::No);
        assert_eq!(f("not host 10.0.0.5").eval(&p, plain), Truth::No);
        // IPv6 extension headers: libpcap's protocol is the next header's.
        let mut p6 = p;
        if let Some(ip) = &mut p6.ip {
            ip.version = 6;
        }
        let ext = Reading::Libpcap {
            inner: false,
            vlan: false,
            ipv6_ext: true,
        };
        assert_eq!(f("not udp").eval(&p6, ext), Truth::Maybe);
        assert_eq!(f("udp").eval(&p6, plain), Truth::Yes);
        assert_eq!(f("port 9000").eval(&p6, ext), Truth::Maybe);
        assert_eq!(f("port 9001").eval(&p6, ext), Truth::No);
    }
}
