//! Filters on the innermost packet of tunnelled frames (`inner EXPR`) and
//! tunnel ids in anonymised copies, on traffic `weir gen --encap` wraps.
//!
//! The same generated frames with and without a tunnel are the check:
//! `weir read DS inner EXPR` on the tunnelled dataset must keep exactly the
//! frames whose untunnelled twins `tcpdump -r plain.pcap EXPR` keeps, and a
//! filter without the word (or with `outer`) exactly what `tcpdump -r
//! tunnelled.pcap EXPR` keeps.

mod common;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use serde_json::Value;
use wire::{Has, Tunnel};

type Frame = (i64, u32, Vec<u8>);

fn generate(path: &Path, encap: Option<&str>) {
    let mut cmd = weir();
    cmd.args(["gen", "-w"])
        .arg(path)
        .args(["--model", "app", "--count", "3000", "--seed", "5"]);
    if let Some(e) = encap {
        cmd.args(["--encap", e]);
    }
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
}

/// A dataset whose records point into `pcap` (so that weir read finds the
/// frames there).
fn convert_indexed(s: &Scratch, pcap: &Path, name: &str) -> PathBuf {
    let ds = s.join(name);
    let mut cmd = weir();
    cmd.args(["convert", "-q", "--index-sources"])
        .arg(pcap)
        .arg("-o")
        .arg(&ds);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    ds
}

fn frames_of(path: &Path) -> Vec<Frame> {
    let mut r = pcapio::TraceReader::open(path, pcapio::ReaderOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some(chunk) = r.next_chunk().unwrap() {
        for (f, bytes) in chunk.iter() {
            out.push((f.ts_ns, f.wire_len, bytes.to_vec()));
        }
    }
    out
}

fn tcpdump_select(src: &Path, filter: &str, out: &Path) -> Vec<Frame> {
    let mut cmd = tool("tcpdump");
    cmd.arg("--time-stamp-precision=nano")
        .arg("-r")
        .arg(src)
        .arg("-w")
        .arg(out)
        .arg(filter);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "tcpdump {filter}: {}", r.stderr());
    frames_of(out)
}

/// `weir read DS FILTER`: the frames written and what it said.
fn weir_read(ds: &Path, filter: &str, out: &Path) -> (Vec<Frame>, String) {
    let mut cmd = weir();
    cmd.arg("read")
        .arg(ds)
        .args(filter.split_whitespace())
        .arg("-w")
        .arg(out)
        .arg("--force");
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir read {filter}: {}", r.stderr());
    (frames_of(out), r.stderr())
}

/// The candidates weir read says it read: "matched N of the M frames".
fn candidates(said: &str) -> usize {
    let after = said.split(" of the ").nth(1).unwrap_or_default();
    let n = after.split(' ').next().unwrap().replace(',', "");
    n.parse().unwrap_or_else(|_| panic!("{said}"))
}

/// Whether a read's summary says the records narrowed the frames to read:
/// the query engine's condition on them, or the index's flow slices (some,
/// not all, matched).
fn narrowed(said: &str) -> bool {
    if said.contains("the inner filter's condition on the records kept") {
        return true;
    }
    let Some(line) = said.lines().find(|l| l.contains("by the index:")) else {
        return false;
    };
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit() && c != ',')
        .filter_map(|w| w.replace(',', "").parse().ok())
        .collect();
    nums.len() >= 2 && nums[0] < nums[1]
}

/// Where each of `picked` (a selection of `all`, in order) stands in `all`.
fn positions(all: &[Frame], picked: &[Frame]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut next = picked.iter().peekable();
    for (i, f) in all.iter().enumerate() {
        if next.peek() == Some(&f) {
            out.push(i);
            next.next();
        }
    }
    assert!(next.peek().is_none(), "a picked frame is not in the file");
    out
}

/// An inner address and port of the generated traffic (of a TCP flow).
fn inner_host_and_port(plain_ds: &Path) -> (Ipv4Addr, u16) {
    let r = records(plain_ds)
        .into_iter()
        .find(|r| r.ip_proto == 6 && r.has(Has::PORTS) && r.ip_version == 4)
        .expect("a TCP frame");
    let a = r.ip_src;
    (Ipv4Addr::new(a[12], a[13], a[14], a[15]), r.dst_port)
}

#[test]
fn read_inner_and_outer_select_what_libpcap_selects() {
    let s = Scratch::new("inner-read");
    let plain = s.join("plain.pcap");
    generate(&plain, None);
    let plain_frames = frames_of(&plain);
    let plain_ds = convert_indexed(&s, &plain, "plain");
    let (host, port) = inner_host_and_port(&plain_ds);
    // (expression, whether the records can narrow the candidates)
    let inner: Vec<(String, bool)> = vec![
        ("tcp".into(), true),
        ("udp".into(), true),
        ("ip6".into(), true),
        (format!("host {host}"), true),
        (format!("tcp port {port} and not host {host}"), true),
        ("tcp[tcpflags] & tcp-push != 0".into(), true),
        // A byte of the IP header (the TTL): libpcap's alone.
        ("ip[8] < 64".into(), false),
    ];
    let mut wanted = Vec::new();
    for (expr, _) in &inner {
        let sel = tcpdump_select(&plain, expr, &s.join("want.pcap"));
        let at = positions(&plain_frames, &sel);
        assert!(
            !at.is_empty() && at.len() < plain_frames.len(),
            "{expr}: {}",
            at.len()
        );
        // Without a tunnel, inner EXPR is EXPR on the frame's IP packet.
        let (got, _) = weir_read(&plain_ds, &format!("inner {expr}"), &s.join("got.pcap"));
        assert!(
            got == sel,
            "plain, inner {expr}: {} frames, want {}",
            got.len(),
            sel.len()
        );
        wanted.push(at);
    }
    for encap in [
        "vxlan:4242",
        "gre:7",
        "gtpu:99",
        "ipip",
        "wccp:89",
        "vxlan-gpe:77",
        "pim",
    ] {
        let pcap = s.join(&format!("{encap}.pcap"));
        generate(&pcap, Some(encap));
        let all = frames_of(&pcap);
        assert_eq!(all.len(), plain_frames.len());
        let ds = convert_indexed(&s, &pcap, encap);
        for ((expr, narrows), at) in inner.iter().zip(&wanted) {
            let want: Vec<Frame> = at.iter().map(|&i| all[i].clone()).collect();
            let (got, said) = weir_read(&ds, &format!("inner {expr}"), &s.join("got.pcap"));
            assert!(
                got == want,
                "{encap}, inner {expr}: {} frames, want {}",
                got.len(),
                want.len()
            );
            assert_eq!(narrowed(&said), *narrows, "{encap}, inner {expr}: {said}");
            if *narrows {
                // Fewer frames read than all, and no fewer than written
                // (the records may keep more: libpcap reads tcp[] of IPv4
                // only).
                let n = candidates(&said);
                assert!(
                    n >= want.len() && n < all.len(),
                    "{encap}, inner {expr}: {said}"
                );
            }
        }
        // Without the word, or with `outer`, libpcap's own meaning on the
        // frame: the inner host is not seen, the tunnel's endpoints are.
        for expr in [
            format!("host {host}"),
            "host 172.16.0.1".to_string(),
            "udp".to_string(),
            "ip proto 47 or ip proto 4 or ip proto 103".to_string(),
        ] {
            let want = tcpdump_select(&pcap, &expr, &s.join("want.pcap"));
            for filter in [expr.clone(), format!("outer {expr}")] {
                let (got, _) = weir_read(&ds, &filter, &s.join("got.pcap"));
                assert!(
                    got == want,
                    "{encap}, {filter}: {} frames, want {}",
                    got.len(),
                    want.len()
                );
            }
            if expr.starts_with("host 172") {
                assert_eq!(want.len(), all.len(), "{encap}");
            }
            if expr == format!("host {host}") {
                assert!(want.is_empty(), "{encap}");
            }
        }
    }
    // An inner expression libpcap refuses for a bare IP packet, and the
    // word alone.
    for bad in ["inner ether host 00:11:22:33:44:55", "inner"] {
        let mut cmd = weir();
        cmd.arg("read")
            .arg(&plain_ds)
            .args(bad.split_whitespace())
            .arg("-w")
            .arg(s.join("bad.pcap"));
        let r = run_bounded(cmd, Duration::from_secs(60));
        assert_ne!(r.code(), 0, "{bad}");
        assert!(!s.join("bad.pcap").exists());
    }
}

fn convert(s: &Scratch, pcap: &Path, name: &str) -> PathBuf {
    let ds = s.join(name);
    let mut cmd = weir();
    cmd.args(["convert", "-q"]).arg(pcap).arg("-o").arg(&ds);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    ds
}

fn analyze(ds: &Path, args: &[&str]) -> Result<Value, String> {
    let mut cmd = weir();
    cmd.arg("analyze").arg(ds).args(args).arg("--json");
    let r = run_bounded(cmd, Duration::from_secs(120));
    if r.code() != 0 {
        return Err(r.stderr());
    }
    Ok(serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {}", r.stdout())))
}

/// Frames `weir analyze DS summary FILTER` counts.
fn summary_frames(ds: &Path, filter: &str) -> u64 {
    let mut args = vec!["summary"];
    args.extend(filter.split_whitespace());
    let v = analyze(ds, &args).unwrap_or_else(|e| panic!("summary {filter}: {e}"));
    let n = &v["totals"][0]["frames"];
    n.as_u64()
        .or_else(|| n.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("frames: {v}"))
}

#[test]
fn analyze_reads_inner_filters_on_the_columns_and_outer_ones_on_the_tunnel() {
    let s = Scratch::new("inner-analyze");
    let plain = s.join("plain.pcap");
    generate(&plain, None);
    let vx = s.join("vxlan.pcap");
    generate(&vx, Some("vxlan:4242"));
    let plain_ds = convert(&s, &plain, "plain");
    let ds = convert(&s, &vx, "vxlan");
    let (host, _) = inner_host_and_port(&plain_ds);
    let recs = records(&ds);
    let h = wire::ip::v4_mapped(host.octets());
    let tcp = recs.iter().filter(|r| r.ip_proto == 6).count() as u64;
    let with_host = recs
        .iter()
        .filter(|r| r.ip_src == h || r.ip_dst == h)
        .count() as u64;
    assert!(tcp > 0 && with_host > 0 && with_host < recs.len() as u64);
    let all = recs.len() as u64;
    // Inner: the columns, which describe the inner packet.
    assert_eq!(summary_frames(&ds, "inner tcp"), tcp);
    assert_eq!(
        summary_frames(&ds, &format!("inner host {host}")),
        with_host
    );
    assert_eq!(
        summary_frames(&ds, &format!("inner not host {host}")),
        all - with_host
    );
    // Outer: the tunnel's endpoints, as libpcap reads the frame.
    assert_eq!(summary_frames(&ds, "host 172.16.0.1"), all);
    assert_eq!(summary_frames(&ds, "outer src host 172.16.0.2"), 0);
    assert_eq!(summary_frames(&ds, &format!("host {host}")), 0);
    assert_eq!(summary_frames(&ds, &format!("not host {host}")), all);
    // The outer protocol is not in the records: refused, saying what to write.
    let e = analyze(&ds, &["summary", "tcp"]).unwrap_err();
    assert!(e.contains("inner tcp"), "{e}");
    // Without tunnels, inner and outer read alike, as before.
    assert_eq!(summary_frames(&plain_ds, "tcp"), tcp);
    assert_eq!(summary_frames(&plain_ds, "inner tcp"), tcp);
    assert_eq!(
        summary_frames(&plain_ds, &format!("host {host}")),
        with_host
    );
    // The flows table answers an inner filter (its flows are the inner
    // ones) with the packets' answer.
    let h_filter = ["inner", "host", &host.to_string()].join(" ");
    let words: Vec<&str> = h_filter.split_whitespace().collect();
    let from_table = analyze(&ds, &[&["flows"][..], &words].concat()).unwrap();
    let from_packets =
        analyze(&ds, &[&["flows", "--no-flows-table"][..], &words].concat()).unwrap();
    assert_eq!(from_table, from_packets);
    assert!(!from_table.as_array().unwrap().is_empty());
    // --emit-sql: an outer address on tunnelled records reads outer_src.
    let mut cmd = weir();
    cmd.arg("analyze")
        .arg(&ds)
        .args(["summary", "--emit-sql", "host", "172.16.0.1"]);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stdout().contains("outer_src"), "{}", r.stdout());
}

#[test]
fn anonymized_tunnel_ids_are_permuted_under_the_key() {
    let s = Scratch::new("inner-anon");
    let (k1, k2) = (s.join("k1"), s.join("k2"));
    for k in [&k1, &k2] {
        let mut c = weir();
        c.arg("anonymize").arg("--new-key").arg(k);
        assert_eq!(run_bounded(c, Duration::from_secs(30)).code(), 0);
    }
    let key1 = anon::dataset::read_key(&k1).unwrap();
    let key2 = anon::dataset::read_key(&k2).unwrap();
    for (encap, kind, id) in [
        ("vxlan:4242", Tunnel::Vxlan, 4242u32),
        ("gre:7", Tunnel::Gre, 7),
        ("gtpu:123456", Tunnel::Gtpu, 123456),
    ] {
        let pcap = s.join(&format!("{encap}.pcap"));
        generate(&pcap, Some(encap));
        let ds = convert(&s, &pcap, encap);
        let original = records(&ds);
        let copies = [(s.join("a1"), &k1), (s.join("a2"), &k1), (s.join("b"), &k2)];
        for (out, k) in &copies {
            let _ = std::fs::remove_dir_all(out);
            let mut c = weir();
            c.arg("anonymize")
                .arg(&ds)
                .arg("-o")
                .arg(out)
                .arg("--key")
                .arg(k);
            let r = run_bounded(c, Duration::from_secs(120));
            assert_eq!(r.code(), 0, "{}", r.stderr());
        }
        let read = |p: &Path| records(p);
        let (a1, a2, b) = (read(&copies[0].0), read(&copies[1].0), read(&copies[2].0));
        assert_eq!(a1.len(), original.len());
        let want1 = key1.tunnel_id(kind.as_str(), id);
        let want2 = key2.tunnel_id(kind.as_str(), id);
        assert_ne!(want1, id, "{encap}");
        assert_ne!(want1, want2, "{encap}");
        assert_eq!(key1.reveal_tunnel_id(kind.as_str(), want1), id);
        for ((x, y), z) in a1.iter().zip(&a2).zip(&b) {
            // The kind and depth stay; the id is the key's image of it.
            assert_eq!((x.tunnel.kind, x.tunnel.depth), (kind, 1), "{encap}");
            assert_eq!(x.tunnel.id, want1, "{encap}");
            assert_eq!(y.tunnel.id, want1, "{encap}");
            assert_eq!(z.tunnel.id, want2, "{encap}");
            assert_ne!(x.tunnel.outer_src, original[0].tunnel.outer_src);
        }
        // The copy still reads: its summary counts every frame.
        assert_eq!(summary_frames(&copies[0].0, ""), original.len() as u64);
        assert_eq!(
            summary_frames(&copies[0].0, "host 172.16.0.1"),
            0,
            "the outer address was anonymised"
        );
    }
}
