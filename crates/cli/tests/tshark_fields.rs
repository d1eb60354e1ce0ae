//! Field agreement with an independent decoder: for tcpdump's test captures
//! on the link types weir decodes, the addresses, ports, IP lengths,
//! protocol, TCP flags and sequence numbers in weir's records equal what
//! `tshark -T fields` prints, frame by frame.

mod common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use common::*;
use wire::ip::proto;
use wire::{Has, PacketRecord, ParseError};

const FIELDS: &[&str] = &[
    "frame.number",
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "ip.len",
    "ipv6.plen",
    "ip.proto",
    "ipv6.nxt",
    "ip.hdr_len",
    "tcp.srcport",
    "tcp.dstport",
    "udp.srcport",
    "udp.dstport",
    "tcp.flags",
    "tcp.seq_raw",
    "tcp.ack_raw",
    "tcp.hdr_len",
    "udp.length",
];

/// tshark's first-occurrence fields of every frame of `file`.
fn tshark(file: &PathBuf) -> Vec<HashMap<&'static str, String>> {
    tshark_first(file, None)
}

/// tshark's first-occurrence fields of the first `count` frames of `file`.
fn tshark_first(file: &PathBuf, count: Option<usize>) -> Vec<HashMap<&'static str, String>> {
    let mut cmd = tool("tshark");
    if let Some(c) = count {
        cmd.args(["-c", &c.to_string()]);
    }
    cmd.arg("-r").arg(file).args([
        "-n",
        "-T",
        "fields",
        "-E",
        "separator=/t",
        "-E",
        "occurrence=f",
    ]);
    // Frame by frame, as captured: no reassembly across frames.
    cmd.args([
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
                .map(|(k, v)| (*k, v.to_string()))
                .collect()
        })
        .collect()
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
    frames: u64,
    compared: HashMap<&'static str, u64>,
    mismatches: Vec<String>,
}

/// Compares one frame; records every field both sides have.
fn compare(file: &str, n: usize, r: &PacketRecord, t: &HashMap<&str, String>, tally: &mut Tally) {
    tally.frames += 1;
    // A tunnelled frame's record is its innermost packet, which is not
    // tshark's first occurrence: tshark_tunnels.rs compares those.
    if r.parse_error != ParseError::None || !r.has(Has::IP) || r.tunnel.depth > 0 {
        return;
    }
    let (src, dst) = if r.ip_version == 4 {
        ("ip.src", "ip.dst")
    } else {
        ("ipv6.src", "ipv6.dst")
    };
    for (field, ours) in [(src, r.ip_src), (dst, r.ip_dst)] {
        if let Some(v) = t.get(field) {
            *tally.compared.entry(field).or_default() += 1;
            if addr(v) != ours {
                tally.mismatches.push(format!(
                    "{file} frame {n}: {field} weir {ours:?} tshark {v}"
                ));
            }
        }
    }
    let mut check = |name: &'static str, ours: u64, theirs: Option<u64>| {
        if let Some(theirs) = theirs {
            *tally.compared.entry(name).or_default() += 1;
            if ours != theirs {
                tally.mismatches.push(format!(
                    "{file} frame {n}: {name} weir {ours} tshark {theirs}"
                ));
            }
        }
    };
    let get = |k: &str| t.get(k).map(|v| num(v));
    if r.ip_version == 4 {
        check("ip.len", r.ip_len as u64, get("ip.len"));
        check("ip.proto", r.ip_proto as u64, get("ip.proto"));
        check("ip.hdr_len", r.ip_hdr_len as u64, get("ip.hdr_len"));
    } else {
        check("ipv6.plen", r.ip_len as u64 - 40, get("ipv6.plen"));
        if r.ip_hdr_len == 40 {
            check("ipv6.nxt", r.ip_proto as u64, get("ipv6.nxt"));
        }
    }
    if !r.has(Has::PORTS) || r.frag & 0x1fff != 0 {
        return;
    }
    match r.ip_proto {
        proto::TCP => {
            check("tcp.srcport", r.src_port as u64, get("tcp.srcport"));
            check("tcp.dstport", r.dst_port as u64, get("tcp.dstport"));
            if r.has(Has::TCP) {
                check(
                    "tcp.flags",
                    r.tcp_flags as u64,
                    get("tcp.flags").map(|f| f & 0x1ff),
                );
                check("tcp.seq_raw", r.tcp_seq as u64, get("tcp.seq_raw"));
                check("tcp.ack_raw", r.tcp_ack as u64, get("tcp.ack_raw"));
                check("tcp.hdr_len", r.tcp_hdr_len as u64, get("tcp.hdr_len"));
            }
        }
        proto::UDP => {
            check("udp.srcport", r.src_port as u64, get("udp.srcport"));
            check("udp.dstport", r.dst_port as u64, get("udp.dstport"));
            check("udp.length", r.udp_len as u64, get("udp.length"));
        }
        _ => {}
    }
}

#[test]
fn fields_agree_with_tshark() {
    let s = Scratch::new("tshark");
    let files = tcpdump_captures();
    // One conversion, one worker, arrival order: rows come out in file order.
    let ds = s.join("ds");
    let mut cmd = weir();
    cmd.arg("convert")
        .args(&files)
        .arg("-o")
        .arg(&ds)
        .args(["-j", "1", "--order", "arrival", "-q"]);
    let r = run_bounded(cmd, Duration::from_secs(300));
    assert!(r.code() <= 1, "{}", r.stderr());
    let m = manifest(&ds);
    let interfaces = m["interfaces"].as_array().unwrap();
    let link_of = |iface: u16| interfaces[iface as usize]["link_type"].as_u64().unwrap() as u16;
    let source_of = |iface: u16| interfaces[iface as usize]["source"].as_u64().unwrap() as usize;
    let mut per_file: Vec<Vec<PacketRecord>> = vec![Vec::new(); files.len()];
    for rec in records(&ds) {
        per_file[source_of(rec.iface)].push(rec);
    }
    // Files whose every frame is on a link type weir decodes and has IP.
    let chosen: Vec<usize> = (0..files.len())
        .filter(|&i| {
            !per_file[i].is_empty()
                && per_file[i]
                    .iter()
                    .all(|r| wire::LinkType(link_of(r.iface)).is_supported())
                && per_file[i].iter().any(|r| r.has(Has::IP))
        })
        .collect();
    assert!(chosen.len() > 300, "{} files chosen", chosen.len());

    let tally = Mutex::new(Tally::default());
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                loop {
                    let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&i) = chosen.get(k) else { break };
                    let theirs = tshark(&files[i]);
                    let name = files[i].file_name().unwrap().to_string_lossy().into_owned();
                    let mut local = Tally::default();
                    assert_eq!(
                        theirs.len(),
                        per_file[i].len(),
                        "{name}: frame counts differ"
                    );
                    for (n, (ours, t)) in per_file[i].iter().zip(&theirs).enumerate() {
                        compare(&name, n + 1, ours, t, &mut local);
                    }
                    let mut all = tally.lock().unwrap();
                    all.frames += local.frames;
                    for (k, v) in local.compared {
                        *all.compared.entry(k).or_default() += v;
                    }
                    all.mismatches.extend(local.mismatches);
                }
            });
        }
    });
    let tally = tally.into_inner().unwrap();
    eprintln!(
        "{} files, {} frames; fields compared: {:?}",
        chosen.len(),
        tally.frames,
        tally.compared
    );
    assert!(
        tally.mismatches.is_empty(),
        "{} mismatches:\n{}",
        tally.mismatches.len(),
        tally
            .mismatches
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    for field in [
        "ip.src",
        "ipv6.src",
        "ip.len",
        "tcp.seq_raw",
        "tcp.flags",
        "udp.srcport",
        "ipv6.plen",
    ] {
        let n = tally.compared.get(field).copied().unwrap_or(0);
        assert!(n > 200, "only {n} values of {field} compared");
    }
}

/// Real NFSv3 traffic (TCP, hundreds of thousands of segments): the first
/// 20,000 frames field by field.
#[test]
fn nfs_trace_fields_agree_with_tshark() {
    let s = Scratch::new("tshark-nfs");
    let plain = s.join("nfsv3.pcap");
    let src = nfs_trace("nfsv3");
    let ok = tool("zstd")
        .args(["-q", "-d", "-c"])
        .arg(&src)
        .stdout(std::fs::File::create(&plain).unwrap())
        .status()
        .unwrap();
    assert!(ok.success());
    let ds = s.join("ds");
    let mut cmd = weir();
    cmd.arg("convert")
        .arg(&src)
        .arg("-o")
        .arg(&ds)
        .args(["-j", "1", "--order", "arrival", "-q"]);
    let r = run_bounded(cmd, Duration::from_secs(300));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let ours = records(&ds);
    const N: usize = 20_000;
    assert!(ours.len() > N, "{} frames", ours.len());
    let theirs = tshark_first(&plain, Some(N));
    assert_eq!(theirs.len(), N);
    let mut tally = Tally::default();
    for (n, (r, t)) in ours.iter().zip(&theirs).enumerate() {
        compare("nfsv3.pcap", n + 1, r, t, &mut tally);
    }
    assert!(
        tally.mismatches.is_empty(),
        "{:?}",
        &tally.mismatches[..tally.mismatches.len().min(20)]
    );
    assert!(
        tally.compared["tcp.seq_raw"] > 19_000,
        "{:?}",
        tally.compared
    );
}
