//! `weir analyze` and `weir sql` on datasets whose answers are known by
//! construction, and flows cross-checked against tshark on real traces.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::Value;
use wire::LinkType;
use wire::build::{FrameSpec, IpSpec, Payload, TransportSpec};

/// 2026-01-01T00:00:00Z, a whole even second.
const T0: i64 = 1_767_225_600_000_000_000;
const MS: i64 = 1_000_000;

const SYN: u16 = 0x02;
const ACK: u16 = 0x10;
const PSH: u16 = 0x08;

struct Frame {
    ts: i64,
    bytes: Vec<u8>,
    src: [u8; 4],
    dst: [u8; 4],
}

fn v4(src: [u8; 4], dst: [u8; 4]) -> IpSpec {
    IpSpec::V4 {
        src,
        dst,
        ttl: 64,
        id: 1,
        dscp: 0,
        frag: 0,
    }
}

fn frame(ts: i64, src: [u8; 4], dst: [u8; 4], t: TransportSpec, payload: usize) -> Frame {
    let spec = FrameSpec {
        eth_src: [2, 0, 0, 0, 0, src[3]],
        eth_dst: [2, 0, 0, 0, 0, dst[3]],
        vlan: None,
        ip: v4(src, dst),
        transport: t,
        payload: Payload::Zeros(payload),
    };
    let mut bytes = Vec::new();
    spec.build(&mut bytes);
    Frame {
        ts,
        bytes,
        src,
        dst,
    }
}

fn tcp(sport: u16, dport: u16, seq: u32, flags: u16) -> TransportSpec {
    TransportSpec::Tcp {
        sport,
        dport,
        seq,
        ack: 0,
        flags,
        window: 1000,
    }
}

fn udp(sport: u16, dport: u16) -> TransportSpec {
    TransportSpec::Udp { sport, dport }
}

const C: [u8; 4] = [10, 0, 0, 1];
const S: [u8; 4] = [10, 0, 0, 2];
const Q: [u8; 4] = [10, 0, 0, 3];
const R: [u8; 4] = [10, 0, 0, 4];
const LOW: [u8; 4] = [10, 0, 0, 5];
const HIGH: [u8; 4] = [10, 0, 0, 9];

/// Second 0: a TCP connection (handshake 1 ms + 2 ms, one retransmitted
/// segment), 9 frames. Seconds 1-2: 10 DNS-like UDP exchanges, 20 frames.
/// Seconds 2-3: a one-way UDP flow started by the higher address, 3 frames.
fn known_frames() -> Vec<Frame> {
    let t = T0 + 100 * MS;
    let mut f = vec![
        frame(t, C, S, tcp(40000, 80, 0, SYN), 0),
        frame(t + MS, S, C, tcp(80, 40000, 0, SYN | ACK), 0),
        frame(t + 3 * MS, C, S, tcp(40000, 80, 1, ACK), 0),
    ];
    for k in 0..4u32 {
        f.push(frame(
            t + (10 + k as i64) * MS,
            C,
            S,
            tcp(40000, 80, 1 + 100 * k, ACK | PSH),
            100,
        ));
    }
    f.push(frame(
        t + 20 * MS,
        C,
        S,
        tcp(40000, 80, 101, ACK | PSH),
        100,
    ));
    f.push(frame(t + 25 * MS, S, C, tcp(80, 40000, 1, ACK), 0));
    for k in 0..10 {
        let q = T0 + 1000 * MS + k * 100 * MS;
        f.push(frame(q, Q, R, udp(5353, 53), 50));
        f.push(frame(q + MS, R, Q, udp(53, 5353), 150));
    }
    for ms in [2000, 2500, 3000] {
        f.push(frame(T0 + ms * MS, HIGH, LOW, udp(7000, 9000), 20));
    }
    f
}

fn write_pcap(path: &Path, frames: &[Frame]) {
    let file = std::fs::File::create(path).unwrap();
    let mut w =
        pcapio::PcapWriter::new(std::io::BufWriter::new(file), LinkType::ETHERNET, 65535).unwrap();
    for f in frames {
        w.write_frame(f.ts, f.bytes.len() as u32, &f.bytes).unwrap();
    }
    w.into_inner().unwrap();
}

fn known_dataset(s: &Scratch) -> (PathBuf, Vec<Frame>) {
    let frames = known_frames();
    let pcap = s.join("known.pcap");
    write_pcap(&pcap, &frames);
    let ds = s.join("known");
    let mut cmd = weir();
    cmd.args(["convert", "-q", "-j", "1"])
        .arg(&pcap)
        .arg("-o")
        .arg(&ds);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    (ds, frames)
}

fn weir_json(args: &[&str]) -> Value {
    let mut cmd = weir();
    cmd.args(args).arg("--json");
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir {args:?}: {}", r.stderr());
    serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {}", r.stdout()))
}

fn bytes_of<'a>(frames: impl IntoIterator<Item = &'a Frame>) -> u64 {
    frames.into_iter().map(|f| f.bytes.len() as u64).sum()
}

fn num(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn summary_counts_frames_bytes_and_protocols() {
    let s = Scratch::new("an-summary");
    let (ds, frames) = known_dataset(&s);
    let d = ds.to_str().unwrap();
    let v = weir_json(&["analyze", d, "summary"]);
    let totals = &v["totals"][0];
    assert_eq!(num(&totals["frames"]), 32.0);
    assert_eq!(num(&totals["bytes"]), bytes_of(&frames) as f64);
    assert_eq!(num(&totals["first_ns"]), (T0 + 100 * MS) as f64);
    assert_eq!(num(&totals["last_ns"]), (T0 + 3000 * MS) as f64);
    let protos = v["protocols"].as_array().unwrap();
    let by_name = |n: &str| protos.iter().find(|p| p["protocol"] == n).unwrap();
    assert_eq!(num(&by_name("tcp")["frames"]), 9.0);
    assert_eq!(num(&by_name("udp")["frames"]), 23.0);
    // A filter restricts every analysis, the same way tcpdump would.
    let v = weir_json(&["analyze", d, "summary", "not", "host", "10.0.0.9"]);
    assert_eq!(num(&v["totals"][0]["frames"]), 29.0);
    let v = weir_json(&["analyze", d, "summary", "udp", "and", "src", "port", "53"]);
    assert_eq!(num(&v["totals"][0]["frames"]), 10.0);
}

#[test]
fn flows_are_oriented_by_their_first_packet_with_rtt_and_retransmissions() {
    let s = Scratch::new("an-flows");
    let (ds, frames) = known_dataset(&s);
    let d = ds.to_str().unwrap();
    let v = weir_json(&["analyze", d, "flows"]);
    let flows = v.as_array().unwrap();
    assert_eq!(flows.len(), 3, "{v}");
    let find = |src: &str| flows.iter().find(|f| f["src"] == src).unwrap();

    let t = find("10.0.0.1");
    assert_eq!(t["dst"], "10.0.0.2");
    assert_eq!((num(&t["src_port"]), num(&t["dst_port"])), (40000.0, 80.0));
    assert_eq!((num(&t["fwd_frames"]), num(&t["rev_frames"])), (7.0, 2.0));
    let fwd: Vec<&Frame> = frames.iter().filter(|f| f.src == C).collect();
    let rev: Vec<&Frame> = frames.iter().filter(|f| f.src == S).collect();
    assert_eq!(num(&t["fwd_bytes"]), bytes_of(fwd) as f64);
    assert_eq!(num(&t["rev_bytes"]), bytes_of(rev) as f64);
    assert_eq!(num(&t["fwd_payload"]), 500.0);
    assert_eq!(num(&t["handshake_rtt_ns"]), (3 * MS) as f64);
    assert_eq!(num(&t["server_rtt_ns"]), MS as f64);
    assert_eq!(num(&t["client_rtt_ns"]), (2 * MS) as f64);
    assert_eq!((num(&t["fwd_retrans"]), num(&t["rev_retrans"])), (1.0, 0.0));
    assert_eq!(num(&t["fwd_tcp_flags"]), (SYN | ACK | PSH) as f64);
    assert_eq!(num(&t["rev_tcp_flags"]), (SYN | ACK) as f64);
    assert_eq!(num(&t["duration_ns"]), (25 * MS) as f64);

    let u = find("10.0.0.3");
    assert_eq!((num(&u["fwd_frames"]), num(&u["rev_frames"])), (10.0, 10.0));
    assert!(u["handshake_rtt_ns"].is_null());
    // Started by the higher address: still its src.
    let h = find("10.0.0.9");
    assert_eq!(h["dst"], "10.0.0.5");
    assert_eq!((num(&h["fwd_frames"]), num(&h["rev_frames"])), (3.0, 0.0));
    assert_eq!(num(&h["duration_ns"]), (1000 * MS) as f64);

    // Largest first, and the same rows through the view in weir sql.
    assert_eq!(flows[0]["src"], "10.0.0.3");
    let v = weir_json(&[
        "sql",
        d,
        "SELECT count(*) AS n, sum(fwd_frames + rev_frames) AS frames FROM flows",
    ]);
    assert_eq!(num(&v[0]["n"]), 3.0);
    assert_eq!(num(&v[0]["frames"]), 32.0);
    // A statement may start with an SQL comment (as --emit-sql's do).
    let v = weir_json(&[
        "sql",
        d,
        "-- how many flows\nSELECT count(*) AS n FROM flows",
    ]);
    assert_eq!(num(&v[0]["n"]), 3.0);
}

#[test]
fn rates_give_min_mean_max_of_the_samples_in_each_window() {
    let s = Scratch::new("an-rates");
    let (ds, frames) = known_dataset(&s);
    let d = ds.to_str().unwrap();
    let v = weir_json(&["analyze", d, "rates", "--every", "2s", "--sample", "1s"]);
    let w = v.as_array().unwrap();
    assert_eq!(w.len(), 2, "{v}");
    assert_eq!(num(&w[0]["start_ns"]), T0 as f64);
    assert_eq!(
        (
            num(&w[0]["min_fps"]),
            num(&w[0]["mean_fps"]),
            num(&w[0]["max_fps"])
        ),
        (9.0, 14.5, 20.0)
    );
    assert_eq!(
        (
            num(&w[1]["min_fps"]),
            num(&w[1]["mean_fps"]),
            num(&w[1]["max_fps"])
        ),
        (1.0, 1.5, 2.0)
    );
    let in_second =
        |k: i64| bytes_of(frames.iter().filter(|f| (f.ts - T0) / 1_000_000_000 == k)) as f64 * 8.0;
    assert_eq!(num(&w[0]["max_bps"]), in_second(0).max(in_second(1)));
    assert_eq!(num(&w[1]["min_bps"]), in_second(2).min(in_second(3)));
    // A sample with no frame counts as zero: 500 ms samples in 1 s windows.
    let v = weir_json(&["analyze", d, "rates", "--every", "1s", "--sample", "500ms"]);
    let w = v.as_array().unwrap();
    assert_eq!(num(&w[0]["min_fps"]), 0.0, "{v}");
    assert_eq!(num(&w[0]["max_fps"]), 18.0);
}

#[test]
fn bursts_count_every_interval_including_empty_ones() {
    let s = Scratch::new("an-bursts");
    let (ds, _) = known_dataset(&s);
    let d = ds.to_str().unwrap();
    let v = weir_json(&["analyze", d, "bursts", "--scales", "500ms,1s"]);
    let fr = v["frame rate"].as_array().unwrap();
    assert_eq!(fr.len(), 2);
    // 500 ms: 7 intervals from T0 to T0+3.5 s, one of them empty.
    assert_eq!((num(&fr[0]["intervals"]), num(&fr[0]["empty"])), (7.0, 1.0));
    assert_eq!(num(&fr[0]["p0_fps"]), 0.0);
    assert_eq!(num(&fr[0]["p100_fps"]), 20.0); // 10 frames in 0.5 s
    // 1 s, summed from the 500 ms intervals: 9, 20, 2, 1 frames.
    assert_eq!((num(&fr[1]["intervals"]), num(&fr[1]["empty"])), (4.0, 0.0));
    assert_eq!(num(&fr[1]["p50_fps"]), 2.0);
    assert_eq!(num(&fr[1]["p100_fps"]), 20.0);
    assert_eq!(num(&fr[1]["mean_fps"]), 8.0);
    // Coarser scales summed from finer ones match counting them directly,
    // also when the data does not start on a whole interval.
    let all = weir_json(&["analyze", d, "bursts", "--scales", "100ms,300ms,500ms,1s"]);
    for (k, scale) in ["100ms", "300ms", "500ms", "1s"].iter().enumerate() {
        let one = weir_json(&["analyze", d, "bursts", "--scales", scale]);
        assert_eq!(all["frame rate"][k], one["frame rate"][0], "{scale}");
        assert_eq!(all["bit rate"][k], one["bit rate"][0], "{scale}");
    }
    let ccdf = v["ccdf"].as_array().unwrap();
    assert!(ccdf.iter().any(|p| num(&p["scale_ns"]) == 1e9
        && num(&p["rate"]) == 9.0
        && num(&p["share_above"]) == 0.25));
}

#[test]
fn top_ranks_hosts_ports_and_pairs() {
    let s = Scratch::new("an-top");
    let (ds, frames) = known_dataset(&s);
    let d = ds.to_str().unwrap();
    let v = weir_json(&["analyze", d, "top", "hosts", "--by", "frames"]);
    let hosts = v.as_array().unwrap();
    assert_eq!(hosts.len(), 6);
    assert_eq!(hosts[0]["host"], "10.0.0.3");
    assert_eq!(num(&hosts[0]["frames"]), 20.0);
    let host_bytes = |ip: [u8; 4]| bytes_of(frames.iter().filter(|f| f.src == ip || f.dst == ip));
    let q = hosts.iter().find(|h| h["host"] == "10.0.0.1").unwrap();
    assert_eq!(num(&q["bytes"]), host_bytes(C) as f64);
    let v = weir_json(&["analyze", d, "top", "ports", "--limit", "1"]);
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert!(v[0]["port"] == 53 || v[0]["port"] == 5353, "{v}");
    let v = weir_json(&["analyze", d, "top", "pairs", "tcp"]);
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(num(&v[0]["frames"]), 9.0);
}

#[test]
fn time_window_and_tables_for_people() {
    let s = Scratch::new("an-window");
    let (ds, _) = known_dataset(&s);
    let d = ds.to_str().unwrap();
    let v = weir_json(&["analyze", d, "summary", "--from", "+1s", "--to", "+2s"]);
    // From T0+1.1 s to T0+2.1 s: the last 10 UDP exchanges but one... all
    // of seconds 1.1-2.0 and the first frame of the one-way flow.
    let n = num(&v["totals"][0]["frames"]);
    assert_eq!(n, 19.0, "{v}");
    let v = weir_json(&["analyze", d, "summary", "--from", "2026-01-01T00:00:02Z"]);
    assert_eq!(num(&v["totals"][0]["frames"]), 3.0);
    // The table: times as UTC, durations with units, flags as letters.
    let mut cmd = weir();
    cmd.args(["analyze", d, "flows"]);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let out = r.stdout();
    assert!(out.contains("2026-01-01 00:00:00.100000000Z"), "{out}");
    assert!(out.contains("3.000 ms") && out.contains("SP."), "{out}");
    let mut cmd = weir();
    cmd.args(["analyze", d, "top", "hosts", "--csv"]);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert!(
        r.stdout().starts_with("host,frames,bytes"),
        "{}",
        r.stdout()
    );
}

#[test]
fn mistakes_get_clear_errors() {
    let s = Scratch::new("an-errors");
    let (ds, _) = known_dataset(&s);
    let d = ds.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["analyze", d, "flowz"], "unknown analysis"),
        (&["analyze", "/nonexistent", "flows"], "dataset"),
        (
            &["analyze", "rpc", d],
            "rpc is an analysis, and it comes after the datasets",
        ),
        (
            &["analyze", d, "flows", "host", "example.com"],
            "not an IP address",
        ),
        (&["analyze", d, "top"], "top what"),
        (
            &["analyze", d, "rates", "--every", "1s", "--sample", "300ms"],
            "multiple",
        ),
        (&["analyze", d, "summary", "--from", "yesterday"], "--from"),
        (&["sql", d, "SELECT nope FROM packets"], "nope"),
        (&["sql", d, "SELEKT 1"], "SQL"),
    ];
    for (args, want) in cases {
        let mut cmd = weir();
        cmd.args(*args);
        let r = run_bounded(cmd, Duration::from_secs(60));
        let err = r.stderr();
        assert_ne!(r.code(), 0, "{args:?} succeeded");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// A count and size as tshark prints it: `93736`, `99 MB`, `133 kB`,
/// `86 bytes`; sizes above bytes come back as (value, unit) for a check
/// within tshark's rounding.
fn tshark_bytes(value: &str, unit: &str) -> (f64, f64) {
    let v: f64 = value.parse().unwrap();
    match unit {
        "bytes" => (v, 0.0),
        "kB" => (v * 1e3, 1e3),
        "MB" => (v * 1e6, 1e6),
        "GB" => (v * 1e9, 1e9),
        other => panic!("tshark unit {other}"),
    }
}

/// tshark -z conv,tcp / conv,udp: per conversation (endpoint A, endpoint B)
/// the frames and bytes B->A and A->B, and the start and duration.
fn tshark_conversations(pcap: &Path, proto: &str) -> Vec<(String, String, [f64; 4], [f64; 2])> {
    let mut cmd = tool("tshark");
    cmd.arg("-q")
        .arg("-z")
        .arg(format!("conv,{proto}"))
        .arg("-r")
        .arg(pcap);
    let r = run_bounded(cmd, Duration::from_secs(300));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let mut out = Vec::new();
    for line in r.stdout().lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 12 || w[1] != "<->" {
            continue;
        }
        // A <-> B  f_ba n unit  f_ab n unit  f n unit  start  duration
        let (ba, ba_tol) = tshark_bytes(w[4], w[5]);
        let (ab, ab_tol) = tshark_bytes(w[7], w[8]);
        out.push((
            w[0].to_string(),
            w[2].to_string(),
            [w[3].parse().unwrap(), ba, w[6].parse().unwrap(), ab],
            [ba_tol, ab_tol],
        ));
        let _ = (w[10], w[11]);
    }
    out
}

/// The flows of a real NFSv3 trace (first 100,000 frames) against
/// tshark's TCP and UDP conversations: the same conversations, the same
/// frames each way, the same bytes (within tshark's rounding).
#[test]
fn flows_match_tshark_conversations_on_a_real_trace() {
    let s = Scratch::new("an-tshark");
    let full = s.join("nfsv3.pcap");
    let zst = nfs_trace("nfsv3");
    let mut cmd = tool("zstd");
    cmd.arg("-q").arg("-d").arg(&zst).arg("-o").arg(&full);
    assert_eq!(run_bounded(cmd, Duration::from_secs(120)).code(), 0);
    let cut = s.join("cut.pcap");
    let mut cmd = tool("tcpdump");
    cmd.args(["-r"])
        .arg(&full)
        .args(["-c", "100000", "-w"])
        .arg(&cut);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let _ = std::fs::remove_file(&full);
    let ds = s.join("ds");
    let mut cmd = weir();
    cmd.args(["convert", "-q"]).arg(&cut).arg("-o").arg(&ds);
    assert_eq!(run_bounded(cmd, Duration::from_secs(120)).code(), 0);
    let d = ds.to_str().unwrap();
    let flows = weir_json(&["analyze", d, "flows"]);
    let flows = flows.as_array().unwrap();
    let mut checked = 0;
    for (proto, num_proto) in [("tcp", 6.0), ("udp", 17.0)] {
        let convs = tshark_conversations(&cut, proto);
        let ours: Vec<&Value> = flows
            .iter()
            .filter(|f| num(&f["proto"]) == num_proto)
            .collect();
        assert_eq!(ours.len(), convs.len(), "{proto} conversations");
        assert!(!convs.is_empty());
        for (a, b, [f_ba, by_ba, f_ab, by_ab], [tol_ba, tol_ab]) in &convs {
            let ep = |f: &Value, side: &str| {
                format!(
                    "{}:{}",
                    f[side].as_str().unwrap(),
                    f[format!("{side}_port")]
                )
            };
            let flow = ours
                .iter()
                .find(|f| {
                    (ep(f, "src") == *a && ep(f, "dst") == *b)
                        || (ep(f, "src") == *b && ep(f, "dst") == *a)
                })
                .unwrap_or_else(|| panic!("no flow {a} <-> {b}"));
            // Orient ours as tshark's A -> B.
            let a_is_src = ep(flow, "src") == *a;
            let (fab, bab, fba, bba) = if a_is_src {
                ("fwd_frames", "fwd_bytes", "rev_frames", "rev_bytes")
            } else {
                ("rev_frames", "rev_bytes", "fwd_frames", "fwd_bytes")
            };
            assert_eq!(num(&flow[fab]), *f_ab, "{a} -> {b} frames");
            assert_eq!(num(&flow[fba]), *f_ba, "{b} -> {a} frames");
            assert!(
                (num(&flow[bab]) - by_ab).abs() <= tol_ab + 0.5,
                "{a} -> {b} bytes"
            );
            assert!(
                (num(&flow[bba]) - by_ba).abs() <= tol_ba + 0.5,
                "{b} -> {a} bytes"
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked} conversations compared");
}

#[test]
fn plots_of_rates_and_bursts() {
    let s = Scratch::new("an-plots");
    let (ds, _) = known_dataset(&s);
    let d = ds.to_str().unwrap();
    let svg = s.join("rates.svg");
    let mut cmd = weir();
    cmd.args([
        "analyze", d, "rates", "--every", "2s", "--sample", "500ms", "--plot",
    ])
    .arg(&svg);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") || text.contains("<svg"), "not SVG");
    // Three lines (least, mean, greatest) in each of two panels.
    assert!(text.matches("<polyline").count() >= 6, "{text}");
    assert!(text.contains("frames per second") && text.contains("greatest sample"));
    let png = s.join("bursts.png");
    let mut cmd = weir();
    cmd.args(["analyze", d, "bursts", "--scales", "100ms,1s", "--plot"])
        .arg(&png);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(bytes.len() > 10_000, "{} bytes", bytes.len());
    for (args, want) in [
        (vec!["flows", "--plot", "x.svg"], "--plot draws"),
        (vec!["rates", "--plot", "x.pdf"], ".svg or .png"),
    ] {
        let mut cmd = weir();
        cmd.args(["analyze", d]).args(&args);
        let r = run_bounded(cmd, Duration::from_secs(60));
        assert_ne!(r.code(), 0);
        assert!(r.stderr().contains(want), "{}", r.stderr());
    }
}
