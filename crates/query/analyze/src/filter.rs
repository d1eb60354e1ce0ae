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
//!
//! The grammar (tokens, qualifiers, precedence) is `grammar`; this module
//! holds what callers see: the scope, the parse's result and [`FlowTest`].

mod grammar;

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
    let (sql, flow) = grammar::condition(expr, scope, tunnelled)?;
    Ok(Parsed { scope, sql, flow })
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

    /// The addresses a flow must have on one side or the other for the
    /// test to hold (ranges, IPv4 mapped into IPv6), and whether a flow
    /// without an IP layer may hold it too (libpcap's `host` looks into
    /// ARP); None when it asks for no address. What a lookup in the flows
    /// files' page index seeks (`store::flows::FlowLookup`).
    pub fn addresses(&self) -> Option<(Vec<(u128, u128)>, bool)> {
        let span = |r: &[(u128, u128)]| {
            r.iter().fold(0u128, |n, &(lo, hi)| {
                n.saturating_add(hi.saturating_sub(lo))
            })
        };
        match self {
            FlowTest::Addr { lo, hi, arp, .. } => Some((vec![(*lo, *hi)], *arp)),
            // Each must hold: the narrowest one's addresses will do.
            FlowTest::All(v) => v
                .iter()
                .filter_map(FlowTest::addresses)
                .min_by_key(|(r, arp)| (*arp, span(r))),
            // One must hold: any one's addresses.
            FlowTest::Any(v) => {
                let (mut ranges, mut non_ip) = (Vec::new(), false);
                for t in v {
                    let (r, arp) = t.addresses()?;
                    ranges.extend(r);
                    non_ip |= arp;
                }
                // `host` is `src host or dst host`: one range.
                ranges.sort_unstable();
                ranges.dedup();
                Some((ranges, non_ip))
            }
            _ => None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

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

    /// What a lookup in the flows files seeks: addresses every matching
    /// flow has on one side, or None.
    #[test]
    fn the_addresses_a_filter_asks_for() {
        let ip = |a: [u8; 4]| u128::from_be_bytes(wire::ip::v4_mapped(a));
        let (five, six) = (ip([10, 0, 0, 5]), ip([10, 0, 0, 6]));
        let addrs = |f: &str| parse(f, false).unwrap().flow.addresses();
        // libpcap's `host` without a protocol also reads ARP.
        assert_eq!(
            addrs("host 10.0.0.5 and port 1028"),
            Some((vec![(five, five)], true))
        );
        assert_eq!(addrs("ip host 10.0.0.5"), Some((vec![(five, five)], false)));
        assert_eq!(
            addrs("src host 10.0.0.5 or dst host 10.0.0.6"),
            Some((vec![(five, five), (six, six)], true))
        );
        // Of two that must both hold, the narrower.
        assert_eq!(
            addrs("ip net 10.0.0.0/8 and ip host 10.0.0.6"),
            Some((vec![(six, six)], false))
        );
        let net = addrs("net 10.0.0.0/24").unwrap().0;
        assert_eq!(net, [(ip([10, 0, 0, 0]), ip([10, 0, 0, 255]))]);
        for none in [
            "not host 10.0.0.5",
            "host 10.0.0.5 or port 80",
            "udp",
            "greater 100",
        ] {
            assert_eq!(addrs(none), None, "{none}");
        }
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
