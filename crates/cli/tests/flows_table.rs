//! The flows table (`flows/*.parquet`, written beside the packets): `weir
//! analyze flows`, `top` and `summary` answered from it give the rows the
//! same analyses give from the packets, on the tcpdump corpus, both NFS
//! traces, generated application traffic split over files and datasets,
//! and a retransmission that crosses datasets.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;

/// The analyses the flows table answers, as `weir analyze` arguments.
const ANALYSES: &[&[&str]] = &[
    &["flows", "--limit", "0"],
    &["flows", "--limit", "0", "--by", "frames"],
    &["top", "hosts", "--limit", "0"],
    &["top", "ports", "--limit", "0", "--by", "frames"],
    &["top", "pairs", "--limit", "0"],
    &["summary"],
];

fn convert(sources: &[&Path], ds: &Path, extra: &[&str]) {
    let mut cmd = weir();
    cmd.args(["convert", "-q", "--force"])
        .args(sources)
        .arg("-o")
        .arg(ds)
        .args(extra);
    let r = run_bounded(cmd, Duration::from_secs(300));
    assert_eq!(r.code(), 0, "convert {sources:?}: {}", r.stderr());
}

/// `weir analyze DATASETS ARGS --json -v`: the output and how it was
/// answered.
fn analyze(datasets: &[&Path], args: &[&str], from_packets: bool) -> (String, String) {
    let mut cmd = weir();
    cmd.arg("analyze")
        .args(datasets)
        .args(args)
        .args(["--json", "-v"]);
    if from_packets {
        cmd.arg("--no-flows-table");
    }
    let r = run_bounded(cmd, Duration::from_secs(300));
    assert_eq!(r.code(), 0, "analyze {datasets:?} {args:?}: {}", r.stderr());
    (r.stdout(), r.stderr())
}

/// Every analysis of `datasets` both ways: the same rows; `expect_table`
/// says whether the flows table must have answered.
fn both_ways(datasets: &[&Path], extra: &[&str], expect_table: bool) {
    for a in ANALYSES {
        let args: Vec<&str> = a.iter().chain(extra).copied().collect();
        let (table, how) = analyze(datasets, &args, false);
        let (packets, _) = analyze(datasets, &args, true);
        assert_eq!(
            how.contains("answered from the flows table"),
            expect_table,
            "{datasets:?} {args:?}: {how}"
        );
        assert!(
            table == packets,
            "{datasets:?} {args:?}: the flows table and the packets disagree\n{}",
            first_difference(&table, &packets)
        );
    }
}

fn first_difference(a: &str, b: &str) -> String {
    let (a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(a).unwrap_or_default(),
        serde_json::from_str(b).unwrap_or_default(),
    );
    let rows = |v: &serde_json::Value| -> Vec<serde_json::Value> {
        match v {
            serde_json::Value::Array(x) => x.clone(),
            serde_json::Value::Object(o) => o.values().cloned().collect(),
            other => vec![other.clone()],
        }
    };
    let (ra, rb) = (rows(&a), rows(&b));
    for (x, y) in ra.iter().zip(&rb) {
        if x != y {
            return format!("flows table: {x}\npackets:     {y}");
        }
    }
    format!("{} against {} rows", ra.len(), rb.len())
}

/// `editcap -r IN OUT FIRST-LAST`: frames FIRST..=LAST (from 1).
fn frames_of(input: &Path, out: &Path, first: u64, last: u64) {
    let mut cmd = Command::new("editcap");
    cmd.arg("-r")
        .arg(input)
        .arg(out)
        .arg(format!("{first}-{last}"));
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "editcap: {}", r.stderr());
}

#[test]
fn the_flows_table_answers_as_the_packets_do_on_the_tcpdump_corpus() {
    let s = Scratch::new("flows-table-corpus");
    let ds = s.join("ds");
    let mut checked = 0;
    // Every tenth capture: the corpus's protocols, in a minute.
    for pcap in tcpdump_captures().iter().step_by(10) {
        let mut cmd = weir();
        cmd.args(["convert", "-q", "--force"])
            .arg(pcap)
            .arg("-o")
            .arg(&ds);
        // Some of the corpus is deliberately broken beyond reading.
        if run_bounded(cmd, Duration::from_secs(60)).code() != 0 {
            continue;
        }
        both_ways(&[&ds], &[], true);
        checked += 1;
    }
    assert!(checked > 50, "{checked} captures checked");
}

#[test]
fn the_flows_table_answers_as_the_packets_do_on_the_nfs_traces() {
    let s = Scratch::new("flows-table-nfs");
    for name in ["nfsv3", "nfsv4"] {
        let trace = nfs_trace(name);
        // Two workers (a file each), small row groups, and the trace cut in
        // two datasets: flows in several slices.
        let pcap = trace.as_path();
        let n = frames_in(pcap);
        let (h1, h2) = (s.join("h1.pcap"), s.join("h2.pcap"));
        frames_of(pcap, &h1, 1, n / 2);
        frames_of(pcap, &h2, n / 2 + 1, n);
        let (d1, d2) = (s.join("d1"), s.join("d2"));
        convert(&[&h1], &d1, &["-j", "2", "--row-group-rows", "4096"]);
        convert(&[&h2], &d2, &["-j", "2", "--row-group-rows", "4096"]);
        both_ways(&[&d1, &d2], &[], true);
        let whole = s.join("whole");
        convert(&[pcap], &whole, &[]);
        both_ways(&[&whole], &[], true);
    }
}

fn frames_in(pcap: &Path) -> u64 {
    let mut cmd = Command::new("capinfos");
    cmd.args(["-c", "-M", "-T"]).arg(pcap);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "capinfos: {}", r.stderr());
    r.stdout()
        .lines()
        .last()
        .and_then(|l| l.split('\t').nth(1))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("capinfos: {}", r.stdout()))
}

#[test]
fn the_flows_table_answers_as_the_packets_do_on_split_application_traffic() {
    let s = Scratch::new("flows-table-app");
    let app = s.join("app.pcap");
    let mut cmd = weir();
    cmd.args([
        "gen", "--model", "app", "-c", "150000", "--seed", "11", "-w",
    ])
    .arg(&app);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    // Three parts: two in one dataset (two sources, two workers), one in
    // another.
    // (d2 the smaller: a window that cuts it and holds d1 whole is one the
    // flows table answers.)
    let parts: Vec<PathBuf> = (0..3).map(|i| s.join(&format!("p{i}.pcap"))).collect();
    for (p, (first, last)) in parts
        .iter()
        .zip([(1, 65_000), (65_001, 130_000), (130_001, 150_000)])
    {
        frames_of(&app, p, first, last);
    }
    let (d1, d2) = (s.join("d1"), s.join("d2"));
    convert(
        &[&parts[0], &parts[1]],
        &d1,
        &["-j", "2", "--row-group-rows", "8192"],
    );
    convert(&[&parts[2]], &d2, &["-j", "1"]);
    both_ways(&[&d1, &d2], &[], true);
    // A window on a whole dataset's bounds is the flows table's alone. One
    // that cuts through slices is too while the files it cuts hold under a
    // third of the frames of the slices it holds whole: those files are
    // read from their records in the window. The same rows as from the
    // packets.
    let m = manifest(&d2);
    let from = m["time_span"]["first_ns"].as_i64().unwrap();
    let from_arg = store::time::format_ns(from);
    both_ways(&[&d1, &d2], &["--from", &from_arg], true);
    let d2_last = m["time_span"]["last_ns"].as_i64().unwrap();
    let cut = store::time::format_ns(from + (d2_last - from) / 2);
    for f in [
        None,
        Some("tcp"),
        Some("port 443"),
        Some("src host 10.0.0.1"),
    ] {
        let mut args = vec!["--to", cut.as_str()];
        args.extend(f);
        both_ways(&[&d1, &d2], &args, true);
    }
    let (_, how) = analyze(&[&d1, &d2], &["flows", "--to", &cut], false);
    assert!(how.contains("1 cut by the time window"), "{how}");
    // Otherwise the packets answer, and say why.
    both_ways(&[&d1, &d2], &["--from", &cut], false);
    let (_, how) = analyze(&[&d1, &d2], &["flows", "--from", &cut], false);
    assert!(how.contains("the packets answer sooner"), "{how}");
    let m1 = manifest(&d1);
    let (first, last) = (
        m1["time_span"]["first_ns"].as_i64().unwrap(),
        m1["time_span"]["last_ns"].as_i64().unwrap(),
    );
    let third = (last - first) / 3;
    let (lo, hi) = (
        store::time::format_ns(first + third),
        store::time::format_ns(last - third),
    );
    both_ways(&[&d1, &d2], &["--from", &lo, "--to", &hi], false);
    // A filter on addresses, ports and protocol picks sides of slices;
    // any other is answered from the packets.
    for f in [
        "tcp",
        "port 443",
        "src host 10.0.0.1",
        "net 198.18.0.0/24 and not udp",
    ] {
        both_ways(&[&d1, &d2], &[f], true);
    }
    both_ways(&[&d1], &["greater 100"], false);
    // `weir sql`'s flow_slices gives the times absolute (the files keep
    // offsets from each slice's first frame): they bound the packets.
    let sql = "SELECT \
        (SELECT sum(a_frames + b_frames) FROM flow_slices) = (SELECT count(*) FROM packets) AS frames, \
        (SELECT min(first_ns) FROM flow_slices) = (SELECT min(ts_ns) FROM packets) AS first, \
        (SELECT max(last_ns) FROM flow_slices) = (SELECT max(ts_ns) FROM packets) AS last, \
        (SELECT max(greatest(a_last_ns, b_last_ns)) FROM flow_slices) = (SELECT max(ts_ns) FROM packets) AS sides, \
        (SELECT count(*) FROM flow_slices WHERE a_syn_ns < first_ns OR b_ack_ns > last_ns \
            OR a_first_ns > a_last_ns) = 0 AS inside";
    let mut cmd = weir();
    cmd.arg("sql").arg(&d1).args([sql, "--json"]);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let v: serde_json::Value = serde_json::from_str(&r.stdout()).unwrap();
    for k in ["frames", "first", "last", "sides", "inside"] {
        assert_eq!(v[0][k], serde_json::json!(true), "{k}: {v}");
    }
}

/// A TCP segment from 10.0.0.1:40000 to 10.0.0.2:80 (or back).
fn segment(ts: i64, back: bool, seq: u32, flags: u16, payload: usize) -> (i64, Vec<u8>) {
    use wire::build::{FrameSpec, IpSpec, Payload, TransportSpec};
    let (c, srv) = ([10, 0, 0, 1], [10, 0, 0, 2]);
    let (src, dst, sport, dport) = if back {
        (srv, c, 80, 40000)
    } else {
        (c, srv, 40000, 80)
    };
    let spec = FrameSpec {
        eth_src: [2, 0, 0, 0, 0, src[3]],
        eth_dst: [2, 0, 0, 0, 0, dst[3]],
        vlan: None,
        ip: IpSpec::V4 {
            src,
            dst,
            ttl: 64,
            id: 1,
            dscp: 0,
            frag: 0,
        },
        transport: TransportSpec::Tcp {
            sport,
            dport,
            seq,
            ack: 0,
            flags,
            window: 1000,
        },
        payload: Payload::Zeros(payload),
    };
    let mut bytes = Vec::new();
    spec.build(&mut bytes);
    (ts, bytes)
}

fn write_pcap(path: &Path, frames: &[(i64, Vec<u8>)]) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = pcapio::PcapWriter::new(
        std::io::BufWriter::new(file),
        wire::LinkType::ETHERNET,
        65535,
    )
    .unwrap();
    for (ts, b) in frames {
        w.write_frame(*ts, b.len() as u32, b).unwrap();
    }
    w.into_inner().unwrap();
}

/// A segment sent in one dataset and sent again in the next: the slices'
/// sequence ranges overlap, so the flows table takes that flow's
/// retransmissions from the packets, and the answer counts it.
#[test]
fn a_retransmission_across_datasets_is_counted_once() {
    let s = Scratch::new("flows-table-retrans");
    let t0 = 1_767_225_600_000_000_000i64;
    let ms = 1_000_000i64;
    let first = vec![
        segment(t0, false, 0, 0x02, 0),
        segment(t0 + ms, true, 0, 0x12, 0),
        segment(t0 + 2 * ms, false, 1, 0x10, 0),
        segment(t0 + 3 * ms, false, 1, 0x18, 100),
        segment(t0 + 4 * ms, false, 101, 0x18, 100),
        segment(t0 + 5 * ms, false, 201, 0x18, 100),
    ];
    let second = vec![
        segment(t0 + 300 * ms, false, 101, 0x18, 100),
        segment(t0 + 301 * ms, false, 301, 0x18, 100),
        segment(t0 + 302 * ms, true, 1, 0x10, 0),
    ];
    let (p1, p2) = (s.join("a.pcap"), s.join("b.pcap"));
    write_pcap(&p1, &first);
    write_pcap(&p2, &second);
    let (d1, d2) = (s.join("d1"), s.join("d2"));
    convert(&[&p1], &d1, &["-j", "1"]);
    convert(&[&p2], &d2, &["-j", "1"]);
    both_ways(&[&d1, &d2], &[], true);
    let (out, _) = analyze(&[&d1, &d2], &["flows"], false);
    let rows: serde_json::Value = serde_json::from_str(&out).unwrap();
    let row = &rows.as_array().unwrap()[0];
    assert_eq!(row["fwd_retrans"], 1, "{row}");
    assert_eq!(row["fwd_frames"], 7, "{row}");
    assert_eq!(row["rev_frames"], 2, "{row}");
    assert!(row["handshake_rtt_ns"].is_number(), "{row}");
}
