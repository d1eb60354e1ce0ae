//! Real clients read weir's files: pyarrow and DuckDB see the same rows in
//! the Parquet that weir's own reader sees; tcpdump and tshark read the
//! pcap files weir writes.

mod common;

use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use wire::{Has, PacketRecord, ParseError};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What weir's reader sees, in the script's shape.
fn expected(rows: &[PacketRecord]) -> Value {
    type Get = fn(&PacketRecord) -> Option<u64>;
    let numeric: &[(&str, Get)] = &[
        ("wire_len", |r| Some(r.wire_len as u64)),
        ("cap_len", |r| Some(r.cap_len as u64)),
        ("worker", |r| Some(r.worker as u64)),
        ("iface", |r| Some(r.iface as u64)),
        ("vlan", |r| r.has(Has::VLAN).then_some(r.vlan as u64)),
        ("ethertype", |r| {
            r.has(Has::ETHERTYPE).then_some(r.ethertype as u64)
        }),
        ("ip_version", |r| {
            r.has(Has::IP).then_some(r.ip_version as u64)
        }),
        ("ip_len", |r| r.has(Has::IP).then_some(r.ip_len as u64)),
        ("ip_hdr_len", |r| {
            r.has(Has::IP).then_some(r.ip_hdr_len as u64)
        }),
        ("ip_proto", |r| r.has(Has::IP).then_some(r.ip_proto as u64)),
        ("ttl", |r| r.has(Has::IP).then_some(r.ttl as u64)),
        ("dscp", |r| r.has(Has::IP).then_some(r.dscp as u64)),
        ("ip_id", |r| r.has(Has::IP_ID).then_some(r.ip_id as u64)),
        ("frag", |r| r.has(Has::FRAG).then_some(r.frag as u64)),
        ("src_port", |r| {
            r.has(Has::PORTS).then_some(r.src_port as u64)
        }),
        ("dst_port", |r| {
            r.has(Has::PORTS).then_some(r.dst_port as u64)
        }),
        ("tcp_flags", |r| {
            r.has(Has::TCP).then_some(r.tcp_flags as u64)
        }),
        ("tcp_seq", |r| r.has(Has::TCP).then_some(r.tcp_seq as u64)),
        ("tcp_ack", |r| r.has(Has::TCP).then_some(r.tcp_ack as u64)),
        ("tcp_win", |r| r.has(Has::TCP).then_some(r.tcp_win as u64)),
        ("tcp_hdr_len", |r| {
            r.has(Has::TCP).then_some(r.tcp_hdr_len as u64)
        }),
        ("udp_len", |r| r.has(Has::UDP).then_some(r.udp_len as u64)),
        ("icmp_type", |r| {
            r.has(Has::ICMP).then_some(r.icmp_type as u64)
        }),
        ("icmp_code", |r| {
            r.has(Has::ICMP).then_some(r.icmp_code as u64)
        }),
        ("payload_len", |r| {
            r.has(Has::PAYLOAD).then_some(r.payload_len as u64)
        }),
        ("flow_hash", |r| {
            r.has(Has::FLOW).then_some(r.flow_hash as u64)
        }),
        ("pcap_file", |r| {
            r.has(Has::PCAP).then_some(r.pcap_file as u64)
        }),
        ("pcap_offset", |r| r.has(Has::PCAP).then_some(r.pcap_offset)),
    ];
    let mut cols = serde_json::Map::new();
    for (name, get) in numeric {
        let vals: Vec<u64> = rows.iter().filter_map(get).collect();
        let sum: u128 = vals.iter().map(|&v| v as u128).sum();
        cols.insert(
            name.to_string(),
            json!({"non_null": vals.len(), "sum": sum as u64}),
        );
    }
    type Bin = fn(&PacketRecord) -> Option<String>;
    let binary: &[(&str, Bin)] = &[
        ("eth_src", |r| r.has(Has::ETH_SRC).then(|| hex(&r.eth_src))),
        ("eth_dst", |r| r.has(Has::ETH_DST).then(|| hex(&r.eth_dst))),
        ("ip_src", |r| r.has(Has::IP).then(|| hex(&r.ip_src))),
        ("ip_dst", |r| r.has(Has::IP).then(|| hex(&r.ip_dst))),
        ("parse_error", |r| {
            (r.parse_error != ParseError::None).then(|| r.parse_error.as_str().to_string())
        }),
    ];
    for (name, get) in binary {
        let vals: Vec<String> = rows.iter().filter_map(get).collect();
        let distinct: std::collections::BTreeSet<&String> = vals.iter().collect();
        cols.insert(
            name.to_string(),
            json!({"non_null": vals.len(), "distinct": distinct.len()}),
        );
    }
    let opt = |b: bool, v: Value| if b { v } else { Value::Null };
    let mut table: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!([
                r.ts_ns,
                r.wire_len,
                opt(r.has(Has::IP), json!(hex(&r.ip_src))),
                opt(r.has(Has::IP), json!(hex(&r.ip_dst))),
                opt(r.has(Has::PORTS), json!(r.src_port)),
                opt(r.has(Has::PORTS), json!(r.dst_port)),
                opt(r.has(Has::TCP), json!(r.tcp_seq)),
                opt(r.has(Has::TCP), json!(r.tcp_ack)),
                opt(r.has(Has::TCP), json!(r.tcp_flags)),
                opt(r.has(Has::PAYLOAD), json!(r.payload_len)),
                opt(r.has(Has::FLOW), json!(r.flow_hash)),
                opt(
                    r.parse_error != ParseError::None,
                    json!(r.parse_error.as_str())
                ),
            ])
        })
        .collect();
    // The script sorts rows by their JSON text; do the same.
    table.sort_by_cached_key(python_json);
    json!({"rows": rows.len(), "columns": cols, "table": table})
}

/// JSON as Python's json.dumps writes it (", " and ": " separators), so
/// that both sides sort rows alike.
fn python_json(v: &Value) -> String {
    match v {
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(python_json).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

fn check_dataset(ds: &std::path::Path) {
    let ours = expected(&records(ds));
    let mut cmd = python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/interop/parquet_check.py"
    ))
    .arg(ds);
    let r = run_bounded(cmd, Duration::from_secs(300));
    assert_eq!(
        r.code(),
        0,
        "the pyarrow/DuckDB check failed (scripts/test installs them in a virtual \
         environment and sets WEIR_PYTHON):\n{}",
        r.stderr()
    );
    let theirs: Value = serde_json::from_str(&r.stdout()).expect("script output is JSON");
    for engine in ["pyarrow", "duckdb"] {
        let t = &theirs[engine];
        assert_eq!(t["rows"], ours["rows"], "{engine} row count");
        for (name, want) in ours["columns"].as_object().unwrap() {
            assert_eq!(&t["columns"][name], want, "{engine}: column {name}");
        }
        assert_eq!(t["table"], ours["table"], "{engine}: rows differ");
    }
}

#[test]
fn pyarrow_and_duckdb_see_the_same_rows() {
    let s = Scratch::new("interop");
    // A generated application mix, converted in both row orders and with
    // pointers into the source, plus a real trace with odd frames in it.
    let trace = s.join("app.pcap");
    let mut cmd = weir();
    cmd.args(["gen", "--model", "app", "-c", "40k", "--seed", "9", "-w"])
        .arg(&trace);
    assert_eq!(run_bounded(cmd, Duration::from_secs(60)).code(), 0);
    for (name, extra) in [
        ("flow", vec!["--index-sources"]),
        ("arrival", vec!["--order", "arrival"]),
    ] {
        let ds = s.join(name);
        let mut cmd = weir();
        cmd.arg("convert")
            .arg(&trace)
            .arg("-o")
            .arg(&ds)
            .args(["-q", "--row-group-rows", "15000"])
            .args(extra);
        assert_eq!(run_bounded(cmd, Duration::from_secs(120)).code(), 0);
        check_dataset(&ds);
    }
    let ds = s.join("corpus");
    let mut cmd = weir();
    cmd.arg("convert");
    // Extension headers, pcapng, an impossible jumbogram, a tunnel,
    // stacked VLANs, truncated IPsec, frames without IP.
    for f in [
        "ipv6-routing-header.pcap",
        "icmpv6-length-zero.pcapng",
        "ipv6-too-long-jumbo.pcap",
        "vxlan.pcap",
        "espudp1.pcap",
        "3560_CDP.pcap",
    ] {
        cmd.arg(tcpdump_capture(f));
    }
    // tcpdump 4.99.3 (Debian 12) and later releases name theirs apart.
    cmd.arg(tcpdump_capture_of(&[
        "QinQpacket.pcap",
        "802.1ad_QinQ.pcap",
    ]));
    cmd.arg("-o").arg(&ds).arg("-q");
    assert!(run_bounded(cmd, Duration::from_secs(60)).code() <= 1);
    check_dataset(&ds);
}

#[test]
fn tcpdump_and_tshark_read_weir_pcaps() {
    let s = Scratch::new("pcapread");
    let trace = s.join("imix.pcap");
    let mut cmd = weir();
    cmd.args(["gen", "--model", "imix", "-c", "5000", "--rate", "1M", "-w"])
        .arg(&trace);
    assert_eq!(run_bounded(cmd, Duration::from_secs(60)).code(), 0);
    let mut cmd = tool("tcpdump");
    cmd.args(["-nn", "--time-stamp-precision=nano", "-tt", "-r"])
        .arg(&trace);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let lines: Vec<String> = r.stdout().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 5000);
    let ours = {
        let ds = s.join("ds");
        let mut cmd = weir();
        cmd.arg("convert")
            .arg(&trace)
            .arg("-o")
            .arg(&ds)
            .args(["-q", "--order", "arrival", "-j", "1"]);
        assert_eq!(run_bounded(cmd, Duration::from_secs(60)).code(), 0);
        records(&ds)
    };
    // tcpdump prints seconds.nanoseconds: the same instants weir stored.
    for (line, r) in lines.iter().zip(&ours) {
        let ts = line.split_whitespace().next().unwrap();
        let (sec, ns) = ts.split_once('.').unwrap();
        let t: i64 = sec.parse::<i64>().unwrap() * 1_000_000_000 + ns.parse::<i64>().unwrap();
        assert_eq!(t, r.ts_ns, "{line}");
        assert!(line.contains(&format!(".{} > ", r.src_port)), "{line}");
    }
    let mut cmd = tool("tshark");
    cmd.args(["-n", "-T", "fields", "-e", "frame.len", "-r"])
        .arg(&trace);
    let r = run_bounded(cmd, Duration::from_secs(60));
    let lens: Vec<u32> = r.stdout().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(lens, ours.iter().map(|r| r.wire_len).collect::<Vec<_>>());
}

/// The DuckDB macros of docs/duckdb-macros.sql format addresses as weir's
/// ip_text and mac_text do.
#[test]
fn duckdb_macros_match_weir_sql() {
    let s = Scratch::new("macros");
    let trace = s.join("app.pcap");
    let mut cmd = weir();
    cmd.args(["gen", "--model", "app", "-c", "5k", "--seed", "3", "-w"])
        .arg(&trace);
    assert_eq!(run_bounded(cmd, Duration::from_secs(60)).code(), 0);
    let ds = s.join("ds");
    let mut cmd = weir();
    cmd.arg("convert").arg(&trace).arg("-o").arg(&ds).arg("-q");
    assert_eq!(run_bounded(cmd, Duration::from_secs(60)).code(), 0);
    let mut cmd = python();
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/interop/duckdb_macros.py"
    ))
    .arg(&ds);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let theirs: Value = serde_json::from_str(&r.stdout()).unwrap();
    let mut cmd = weir();
    cmd.arg("sql").arg(&ds).arg(
        "SELECT ip_text(ip_src) AS s, mac_text(eth_src) AS m, count(*) AS n \
         FROM packets GROUP BY 1, 2",
    );
    cmd.arg("--json");
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let ours: Value = serde_json::from_str(&r.stdout()).unwrap();
    let mut ours: Vec<Value> = ours
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            // The macro writes IPv6 in full (uncompressed) form.
            let s = match o["s"].as_str().map(str::parse::<std::net::Ipv6Addr>) {
                Some(Ok(a)) => json!(
                    a.segments()
                        .iter()
                        .map(|g| format!("{g:04x}"))
                        .collect::<Vec<_>>()
                        .join(":")
                ),
                _ => o["s"].clone(),
            };
            json!([s, o["m"], o["n"]])
        })
        .collect();
    ours.sort_by_cached_key(python_json);
    assert!(ours.len() > 3, "{ours:?}");
    assert_eq!(Value::Array(ours), theirs);
}
