//! Tunnels against an independent decoder: in every tunnelled frame of
//! tcpdump's test captures, and of a capture built here with every
//! encapsulation weir follows (nested too), the records' inner addresses,
//! ports, TTL, IP id, TCP window and UDP length equal tshark's innermost
//! occurrence of those fields, the outer addresses its first occurrence,
//! and the tunnel kind and depth what tshark's protocol stack shows.

mod common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use wire::build::{EncapSpec, FrameSpec, IpSpec, OuterSpec, Payload, TransportSpec, encapsulate};
use wire::transport::tcp_flags;
use wire::{Has, PacketRecord, ParseError, Tunnel, TunnelHas};

/// tcpdump's captures with tunnelled frames on link types weir decodes
/// (found with `tshark -Y 'gre or vxlan or geneve or mpls or pppoes or gtp
/// or erspan or nsh or pim.type==1 or ip.proto==4 or ip.proto==41'` over
/// the whole set, and every capture where weir finds a tunnel). Not here:
/// the MPLS captures on PPP links (lspping-fec-*, mpls-traceroute,
/// wb-oobr), a link type weir does not decode.
const TCPDUMP_TUNNELLED: &[&str] = &[
    "geneve.pcap",
    "vxlan.pcap",
    "ipv6-srh-ext-header.pcap",
    "pppoes.pcap",
    "gre-heapoverflow-1.pcap",
    "gre-heapoverflow-2.pcap",
    "isis-infinite-loop.pcap",
    "mpls-label-heapoverflow.pcap",
    "tok2str-oobr-2.pcap",
    "arista_ether.pcap",
    "mpls-over-udp.pcap",
    "nsh-over-vxlan-gpe.pcap",
    "pim-packet-assortment.pcap",
    "PIM_register_register-stop.pcap",
    // PPTP's GRE version 1, which weir does not follow: the records keep
    // the outer packet, as the walk over tshark's stack below stops there
    // too.
    "pptp.pcap",
];

/// Captures of later tcpdump releases than the one the test data is
/// fetched from (Debian bookworm's 4.99.3), compared when the data holds
/// them (as `WEIR_SHARED_DATA` may): WCCP redirection and Cisco MetaData
/// in GRE. The built frames below hold both kinds in any case.
const TCPDUMP_TUNNELLED_LATER: &[&str] = &["wccp_redirect_gre.pcap", "various_gre.pcap"];

const FIELDS: &[&str] = &[
    "frame.protocols",
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "ip.ttl",
    "ipv6.hlim",
    "ip.id",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.window_size_value",
    "udp.srcport",
    "udp.dstport",
    "udp.length",
    "gre.proto",
];

/// Every occurrence of each field in every frame of `file`, in order.
fn tshark_all(file: &Path) -> Vec<HashMap<&'static str, Vec<String>>> {
    let mut cmd = tool("tshark");
    cmd.arg("-r").arg(file).args([
        "-n",
        "-T",
        "fields",
        "-E",
        "separator=/t",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
        "-o",
        "ip.defragment:FALSE",
        "-o",
        "ipv6.defragment:FALSE",
        "-o",
        "tcp.desegment_tcp_streams:FALSE",
    ]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let r = run_bounded(cmd, Duration::from_secs(120));
    String::from_utf8_lossy(&r.output.stdout)
        .lines()
        .map(|line| {
            FIELDS
                .iter()
                .zip(line.split('\t').chain(std::iter::repeat("")))
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (*k, v.split(',').map(str::to_string).collect()))
                .collect()
        })
        .collect()
}

/// What tshark's protocol stack says weir should find: the walk goes
/// through the layers weir follows and stops where weir stops (at a layer
/// weir does not decode, and after a transport header unless UDP carries a
/// tunnel weir follows). tshark's stack does not tell WCCP from other GRE,
/// nor shows VXLAN-GPE at all: the GRE protocol types and UDP ports of the
/// frame (`fields`) do.
#[derive(Debug, Default, PartialEq)]
struct Walk {
    /// Encapsulations, outermost first, in weir's names.
    tunnels: Vec<&'static str>,
    /// The first IP header: IPv6?, and its occurrence index (always 0).
    first_ip: Option<bool>,
    /// The innermost IP header: IPv6?, and its occurrence index among
    /// headers of its family.
    inner_ip: Option<(bool, usize)>,
    /// The transport after the innermost IP header: "tcp" or "udp", and
    /// its occurrence index.
    transport: Option<(&'static str, usize)>,
}

fn walk(protocols: &str, fields: &HashMap<&'static str, Vec<String>>) -> Walk {
    let tokens: Vec<&str> = protocols.split(':').collect();
    let field = |name: &str, i: usize| {
        fields
            .get(name)
            .and_then(|v| v.get(i))
            .map(|s| num(s))
            .unwrap_or(0)
    };
    let mut w = Walk::default();
    let (mut n4, mut n6, mut nudp, mut ngre) = (0, 0, 0, 0);
    let mut prev = "";
    for (i, &t) in tokens.iter().enumerate() {
        let next = tokens.get(i + 1).copied().unwrap_or("");
        if prev == "udp" {
            // tshark shows no layer of its own for VXLAN-GPE: what it
            // carries follows UDP to its port.
            let gpe = field("udp.dstport", nudp - 1) == 4790;
            if gpe && matches!(t, "ip" | "ipv6" | "eth" | "nsh" | "mpls") {
                w.tunnels.push("vxlan-gpe");
            } else if !matches!(t, "vxlan" | "geneve" | "gtp" | "mpls") {
                break;
            }
        }
        // The layers weir reads (link layers, VLAN tags, IPv6 extension
        // headers, tunnels, transports); anything else ends its walk.
        let known = matches!(
            t,
            "eth"
                | "ethertype"
                | "vlan"
                | "sll"
                | "raw"
                | "null"
                | "loop"
                | "ip"
                | "ipv6"
                | "mpls"
                | "pppoes"
                | "ppp"
                | "gre"
                | "erspan"
                | "cmd"
                | "vxlan"
                | "nsh"
                | "geneve"
                | "gtp"
                | "pim"
                | "tcp"
                | "udp"
        ) || t.starts_with("ipv6.");
        if !known {
            break;
        }
        match t {
            // After WCCP tshark always calls its IPv4 layer, which hands a
            // version 6 packet on to IPv6: one header, not IP in IP.
            "ip" if next == "ipv6" && prev == "gre" && w.tunnels.last() == Some(&"wccp") => {
                continue;
            }
            "ip" | "ipv6" => {
                let v6 = t == "ipv6";
                if matches!(prev, "ip" | "ipv6") {
                    w.tunnels.push("ipip");
                }
                let n = if v6 { &mut n6 } else { &mut n4 };
                w.first_ip.get_or_insert(v6);
                w.inner_ip = Some((v6, *n));
                *n += 1;
                w.transport = None;
            }
            "mpls" if prev != "mpls" => w.tunnels.push("mpls"),
            "pppoes" => w.tunnels.push("pppoe"),
            "gre" => {
                w.tunnels.push(match field("gre.proto", ngre) {
                    0x883e => "wccp",
                    _ => "gre",
                });
                ngre += 1;
            }
            "erspan" if prev == "gre" => *w.tunnels.last_mut().unwrap() = "erspan",
            "vxlan" => w.tunnels.push("vxlan"),
            "nsh" => w.tunnels.push("nsh"),
            // Only a Register carries a packet.
            "pim" if matches!(next, "ip" | "ipv6") => w.tunnels.push("pim"),
            "pim" => break,
            "geneve" => w.tunnels.push("geneve"),
            // Only a G-PDU carries a packet; signalling is no tunnel.
            "gtp" if matches!(next, "ip" | "ipv6") => w.tunnels.push("gtpu"),
            "gtp" => break,
            // The walk ends at the first TCP header.
            "tcp" => {
                w.transport = Some(("tcp", 0));
                break;
            }
            "udp" => {
                w.transport = Some(("udp", nudp));
                nudp += 1;
            }
            _ => {}
        }
        // Extension headers belong to their IPv6 header.
        if !t.starts_with("ipv6.") {
            prev = t;
        }
    }
    w
}

fn addr(s: &str) -> [u8; 16] {
    match s
        .parse::<IpAddr>()
        .unwrap_or_else(|_| panic!("address {s:?}"))
    {
        IpAddr::V4(a) => wire::ip::v4_mapped(a.octets()),
        IpAddr::V6(a) => a.octets(),
    }
}

fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap_or_else(|_| panic!("number {s:?}")),
    }
}

#[derive(Default, Debug)]
struct Tally {
    /// Frames compared field by field (parsed without error).
    frames: u64,
    tunnelled: u64,
    compared: HashMap<&'static str, u64>,
    mismatches: Vec<String>,
}

fn compare(
    name: &str,
    n: usize,
    r: &PacketRecord,
    t: &HashMap<&'static str, Vec<String>>,
    tally: &mut Tally,
) {
    if r.parse_error != ParseError::None {
        return;
    }
    let protocols = t
        .get("frame.protocols")
        .map(|v| v.join(","))
        .unwrap_or_default();
    let w = walk(&protocols, t);
    tally.frames += 1;
    let mut bad = |what: &str, ours: String, theirs: String| {
        tally.mismatches.push(format!(
            "{name} frame {n} ({protocols}): {what} weir {ours} tshark {theirs}"
        ));
    };
    let depth = w.tunnels.len() as u8;
    let kind = w.tunnels.first().copied().unwrap_or("none");
    *tally.compared.entry("tunnel").or_default() += 1;
    if (r.tunnel.depth, r.tunnel.kind.as_str()) != (depth, kind) {
        bad(
            "tunnel",
            format!("{} x{}", r.tunnel.kind.as_str(), r.tunnel.depth),
            format!("{kind} x{depth}"),
        );
    }
    if depth > 0 {
        tally.tunnelled += 1;
    }
    let get = |field: &str, i: usize| t.get(field).and_then(|v| v.get(i)).cloned();
    let mut check = |field: &'static str, i: usize, ours: String, parse: fn(&str) -> String| {
        if let Some(theirs) = get(field, i) {
            *tally.compared.entry(field).or_default() += 1;
            if parse(&theirs) != ours {
                tally.mismatches.push(format!(
                    "{name} frame {n} ({protocols}): {field}[{i}] weir {ours} tshark {theirs}"
                ));
            }
        }
    };
    let a = |s: &str| format!("{:?}", addr(s));
    let d = |s: &str| num(s).to_string();
    let Some((v6, k)) = w.inner_ip else {
        assert!(
            !r.has(Has::IP),
            "{name} frame {n}: IP where tshark has none"
        );
        return;
    };
    assert!(
        r.has(Has::IP),
        "{name} frame {n}: no IP; tshark {protocols}"
    );
    assert_eq!(r.ip_version == 6, v6, "{name} frame {n}: {protocols}");
    let (src, dst, ttl) = if v6 {
        ("ipv6.src", "ipv6.dst", "ipv6.hlim")
    } else {
        ("ip.src", "ip.dst", "ip.ttl")
    };
    check(src, k, format!("{:?}", r.ip_src), a);
    check(dst, k, format!("{:?}", r.ip_dst), a);
    check(ttl, k, r.ttl.to_string(), d);
    if !v6 {
        check("ip.id", k, r.ip_id.to_string(), d);
    }
    match w.transport {
        Some(("tcp", i)) if r.has(Has::TCP) => {
            check("tcp.srcport", i, r.src_port.to_string(), d);
            check("tcp.dstport", i, r.dst_port.to_string(), d);
            check("tcp.window_size_value", i, r.tcp_win.to_string(), d);
        }
        Some(("udp", i)) if r.has(Has::UDP) => {
            check("udp.srcport", i, r.src_port.to_string(), d);
            check("udp.dstport", i, r.dst_port.to_string(), d);
            check("udp.length", i, r.udp_len.to_string(), d);
        }
        _ => {}
    }
    // The outer addresses: tshark's first IP header. Absent ones read as
    // "absent", which no tshark address is.
    if let (true, Some(first_v6)) = (depth > 0, w.first_ip) {
        let (src, dst) = if first_v6 {
            ("ipv6.src", "ipv6.dst")
        } else {
            ("ip.src", "ip.dst")
        };
        let outer = |x: &[u8; 16]| match r.tunnel.has & TunnelHas::OUTER_IP {
            0 => "absent".to_string(),
            _ => format!("{x:?}"),
        };
        check(src, 0, outer(&r.tunnel.outer_src), a);
        check(dst, 0, outer(&r.tunnel.outer_dst), a);
    }
}

/// Converts `files` in one run (one worker, arrival order) and compares
/// each file's records with tshark.
fn check_files(scratch: &Scratch, files: &[PathBuf]) -> Tally {
    let ds = scratch.join("ds");
    let mut cmd = weir();
    cmd.arg("convert")
        .args(files)
        .arg("-o")
        .arg(&ds)
        .args(["-j", "1", "--order", "arrival", "-q"]);
    let r = run_bounded(cmd, Duration::from_secs(300));
    assert!(r.code() <= 1, "{}", r.stderr());
    let m = manifest(&ds);
    let interfaces = m["interfaces"].as_array().unwrap();
    let source_of = |iface: u16| interfaces[iface as usize]["source"].as_u64().unwrap() as usize;
    let mut per_file: Vec<Vec<PacketRecord>> = vec![Vec::new(); files.len()];
    for rec in records(&ds) {
        per_file[source_of(rec.iface)].push(rec);
    }
    let mut tally = Tally::default();
    for (file, ours) in files.iter().zip(&per_file) {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let theirs = tshark_all(file);
        assert_eq!(theirs.len(), ours.len(), "{name}: frame counts differ");
        for (n, (r, t)) in ours.iter().zip(&theirs).enumerate() {
            compare(&name, n + 1, r, t, &mut tally);
        }
    }
    eprintln!(
        "{} files, {} frames compared, {} tunnelled; fields: {:?}",
        files.len(),
        tally.frames,
        tally.tunnelled,
        tally.compared
    );
    assert!(
        tally.mismatches.is_empty(),
        "{} mismatches:\n{}",
        tally.mismatches.len(),
        tally.mismatches[..tally.mismatches.len().min(40)].join("\n")
    );
    tally
}

#[test]
fn tcpdump_tunnel_captures_agree_with_tshark() {
    let s = Scratch::new("tshark-tunnels");
    let later = testdata::tcpdump_tests();
    let files: Vec<PathBuf> = TCPDUMP_TUNNELLED
        .iter()
        .map(|n| tcpdump_capture(n))
        .chain(
            TCPDUMP_TUNNELLED_LATER
                .iter()
                .map(|n| later.join(n))
                .filter(|p| p.is_file()),
        )
        .collect();
    let tally = check_files(&s, &files);
    // geneve.pcap and vxlan.pcap alone have 49 tunnelled frames.
    assert!(tally.tunnelled >= 49, "{tally:?}");
    for f in ["ip.src", "ip.ttl", "ip.id", "tcp.window_size_value"] {
        assert!(
            tally.compared.get(f).copied().unwrap_or(0) >= 30,
            "{f}: {tally:?}"
        );
    }
}

/// A frame with one encapsulation of each kind, over IPv4 and IPv6 outer
/// headers, around IPv4 TCP and IPv6 UDP, and some nested two and three
/// deep.
fn built_frames() -> Vec<Vec<u8>> {
    let v6 = |last: u8| {
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        a[15] = last;
        a
    };
    let inner = |i: u8| -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let specs = [
            (
                IpSpec::V4 {
                    src: [10, 1, i, 1],
                    dst: [10, 1, i, 2],
                    ttl: 61,
                    id: 0x3344 + i as u16,
                    dscp: 0,
                    frag: 0x4000,
                },
                TransportSpec::Tcp {
                    sport: 43210 + i as u16,
                    dport: 443,
                    seq: 77,
                    ack: 88,
                    flags: tcp_flags::ACK,
                    window: 1234 + i as u16,
                },
            ),
            (
                IpSpec::V6 {
                    src: v6(0x10 + i),
                    dst: v6(0x20),
                    hop_limit: 33,
                    dscp: 0,
                    flow_label: 5,
                },
                TransportSpec::Udp {
                    sport: 5000 + i as u16,
                    dport: 53,
                },
            ),
        ];
        for (ip, transport) in specs {
            let mut f = Vec::new();
            FrameSpec {
                eth_src: [2, 0, 0, 0, 1, 1],
                eth_dst: [2, 0, 0, 0, 1, 2],
                vlan: None,
                ip,
                transport,
                payload: Payload::Zeros(20),
            }
            .build(&mut f);
            out.push(f);
        }
        out
    };
    let outer4 = OuterSpec {
        eth_src: [2, 0, 0, 0, 9, 1],
        eth_dst: [2, 0, 0, 0, 9, 2],
        ip: IpSpec::V4 {
            src: [192, 0, 2, 1],
            dst: [192, 0, 2, 2],
            ttl: 250,
            id: 9,
            dscp: 0,
            frag: 0,
        },
    };
    let outer6 = OuterSpec {
        ip: IpSpec::V6 {
            src: v6(0xa1),
            dst: v6(0xa2),
            hop_limit: 250,
            dscp: 0,
            flow_label: 0,
        },
        ..outer4
    };
    let encaps = EncapSpec::every();
    let wrap = |f: &[u8], e: &EncapSpec, o: &OuterSpec| {
        let mut g = Vec::new();
        encapsulate(f, e, o, &mut g);
        g
    };
    let mut out = Vec::new();
    for (k, e) in encaps.iter().enumerate() {
        for outer in [&outer4, &outer6] {
            if !e.has_outer_ip() && outer == &outer6 {
                continue;
            }
            for f in inner(k as u8) {
                out.push(wrap(&f, e, outer));
            }
        }
    }
    // Nested: a tenant's VXLAN carried over GRE, over GTP-U, and MPLS under
    // GENEVE under IP in IP.
    for f in inner(100) {
        let vx = wrap(&f, &EncapSpec::Vxlan { vni: 42 }, &outer4);
        out.push(wrap(
            &vx,
            &EncapSpec::Gre {
                key: Some(9),
                seq: None,
                checksum: false,
                ethernet: false,
            },
            &outer6,
        ));
        let gtp = wrap(
            &vx,
            &EncapSpec::Gtpu {
                teid: 11,
                extension: false,
            },
            &outer6,
        );
        out.push(gtp);
        let mpls = wrap(&f, &EncapSpec::Mpls { labels: &[30] }, &outer4);
        let geneve = wrap(
            &mpls,
            &EncapSpec::Geneve {
                vni: 5,
                option_words: 0,
            },
            &outer4,
        );
        out.push(wrap(&geneve, &EncapSpec::IpIp, &outer6));
    }
    out
}

#[test]
fn built_tunnels_agree_with_tshark() {
    let s = Scratch::new("tshark-built-tunnels");
    let frames = built_frames();
    let path = s.join("tunnels.pcap");
    let file = std::fs::File::create(&path).unwrap();
    let mut w = pcapio::PcapWriter::new(
        std::io::BufWriter::new(file),
        wire::LinkType::ETHERNET,
        65535,
    )
    .unwrap();
    for (i, b) in frames.iter().enumerate() {
        let ts = 1_767_225_600_000_000_000i64 + i as i64 * 1000;
        w.write_frame(ts, b.len() as u32, b).unwrap();
    }
    w.into_inner().unwrap();
    let tally = check_files(&s, std::slice::from_ref(&path));
    // Every frame is tunnelled, parses whole, and was compared.
    assert_eq!(tally.frames, frames.len() as u64);
    assert_eq!(tally.tunnelled, frames.len() as u64);
    let recs = records(&s.join("ds"));
    let kinds: std::collections::BTreeSet<Tunnel> = recs.iter().map(|r| r.tunnel.kind).collect();
    assert_eq!(kinds.len(), Tunnel::ALL.len() - 1, "{kinds:?}");
    assert_eq!(recs.iter().map(|r| r.tunnel.depth).max(), Some(3));
    for f in ["ipv6.src", "ip.id", "udp.length", "tcp.window_size_value"] {
        assert!(
            tally.compared.get(f).copied().unwrap_or(0) >= 20,
            "{f}: {tally:?}"
        );
    }
}
