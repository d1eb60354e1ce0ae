//! `weir read` through the index written at ingest (the flows table and
//! the packet files' page index): it says so, reads fewer pages of records
//! than the whole, and gets exactly libpcap's frames; where the index
//! cannot answer (a filter on lengths or bytes, arrival order, files
//! without it) it reads the records whole and still gets them.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use wire::Has;

type Frame = (i64, u32, Vec<u8>);

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

/// What tcpdump -r SRC FILTER selects of each file, in turn.
fn tcpdump_select(srcs: &[PathBuf], filter: &str, scratch: &Path) -> Vec<Frame> {
    let mut all = Vec::new();
    for src in srcs {
        let out = scratch.join("want.pcap");
        let mut cmd = tool("tcpdump");
        cmd.arg("--time-stamp-precision=nano")
            .arg("-r")
            .arg(src)
            .arg("-w")
            .arg(&out)
            .arg(filter);
        let r = run_bounded(cmd, Duration::from_secs(120));
        assert_eq!(r.code(), 0, "tcpdump {filter}: {}", r.stderr());
        all.extend(frames_of(&out));
    }
    all
}

fn weir_read(ds: &Path, filter: &str, out: &Path) -> (Vec<Frame>, String) {
    let mut cmd = weir();
    // The filter as one word: its first word may name a directory here
    // (`src`), which weir would take for a dataset.
    cmd.arg("read")
        .arg(ds)
        .arg(filter)
        .arg("-w")
        .arg(out)
        .arg("--force");
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir read {filter}: {}", r.stderr());
    (frames_of(out), r.stderr())
}

fn run_weir(args: &[&str]) -> Run {
    let mut cmd = weir();
    cmd.args(args);
    let r = run_bounded(cmd, Duration::from_secs(180));
    assert_eq!(r.code(), 0, "weir {args:?}: {}", r.stderr());
    r
}

/// (pages read, pages in all) from the index's line of a read's summary.
fn pages_read(said: &str) -> Option<(u64, u64)> {
    let line = said.lines().find(|l| l.contains("by the index:"))?;
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit() && c != ',')
        .filter_map(|w| w.replace(',', "").parse().ok())
        .collect();
    // "... N of M flow slices, P of Q record pages ..."
    Some((nums[2], nums[3]))
}

/// A TCP and a UDP address and port of the records, and a host that
/// sends both.
fn some_flows(ds: &Path) -> (String, String) {
    let recs = records(ds);
    let pick = |proto: u8| {
        let r = recs
            .iter()
            .find(|r| r.ip_proto == proto && r.has(Has::PORTS) && r.ip_version == 4)
            .expect("a flow of that protocol");
        let a = r.ip_src;
        (
            format!("{}.{}.{}.{}", a[12], a[13], a[14], a[15]),
            r.src_port,
        )
    };
    let (tcp_host, tcp_port) = pick(6);
    let (udp_host, udp_port) = pick(17);
    (
        format!("host {tcp_host} and port {tcp_port}"),
        format!("src host {udp_host} and udp port {udp_port}"),
    )
}

/// The application mix (TCP and UDP, DNS, many flows) converted with its
/// frames kept in place: each filter gives tcpdump's frames, through the
/// index where the flows can answer it.
#[test]
fn read_through_the_index_gets_libpcaps_frames() {
    let s = Scratch::new("read-index");
    let pcap = s.join("app.pcap");
    run_weir(&[
        "gen",
        "--model",
        "app",
        "-c",
        "60000",
        "-w",
        pcap.to_str().unwrap(),
    ]);
    let ds = s.join("ds");
    run_weir(&[
        "convert",
        "-q",
        "--index-sources",
        pcap.to_str().unwrap(),
        "-o",
        ds.to_str().unwrap(),
    ]);
    let (tcp_flow, udp_flow) = some_flows(&ds);
    let srcs = [pcap.clone()];
    // (filter, whether the flows table tells its flows apart)
    let cases = [
        (tcp_flow.clone(), true),
        (udp_flow.clone(), true),
        (format!("({tcp_flow}) or ({udp_flow})"), true),
        ("udp port 53".to_string(), true),
        (format!("not ({tcp_flow}) and tcp"), true),
        (
            "tcp[tcpflags] & tcp-syn != 0 and port 443".to_string(),
            true,
        ),
        // Lengths and bytes: the records whole.
        ("greater 1000".to_string(), false),
        ("ip[8] < 64".to_string(), false),
    ];
    for (filter, indexed) in &cases {
        let want = tcpdump_select(&srcs, filter, &s.0);
        let (got, said) = weir_read(&ds, filter, &s.join("got.pcap"));
        assert_eq!(got.len(), want.len(), "{filter}");
        assert!(got == want, "{filter}: frames differ");
        if *indexed {
            let (read, all) = pages_read(&said).unwrap_or_else(|| panic!("{filter}: {said}"));
            assert!(read <= all, "{filter}: {said}");
            // (A negation, SYNs of a port and DNS's many short flows lie
            // in every page of so small a dataset.)
            if !filter.starts_with("not")
                && !filter.contains("tcpflags")
                && !filter.contains("port 53")
            {
                assert!(read < all, "{filter}: no page passed over: {said}");
            }
        } else {
            assert!(
                said.contains("by the records: read all"),
                "{filter}: {said}"
            );
        }
    }
    // A host that is not there: nothing read but the flows tables.
    let (got, said) = weir_read(&ds, "host 192.0.2.77", &s.join("none.pcap"));
    assert!(got.is_empty());
    assert_eq!(pages_read(&said).map(|p| p.0), Some(0), "{said}");
}

/// Rewrites the packet file at `path` as another writer would: pyarrow,
/// no page index, row groups of 8 Ki rows, weir's metadata kept.
fn rewrite_without_page_index(path: &Path) {
    let mut cmd = python();
    cmd.arg("-c")
        .arg(
            "import sys, pyarrow.parquet as pq; \
             t = pq.read_table(sys.argv[1]); \
             pq.write_table(t, sys.argv[1], write_page_index=False, row_group_size=8192)",
        )
        .arg(path);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
}

/// Where the index cannot answer, the records are read whole and the
/// frames are still libpcap's: rows in arrival order, a packet file
/// whose flows file is gone, packet files written without a page index.
#[test]
fn read_falls_back_where_the_index_cannot_answer() {
    let s = Scratch::new("read-index-fallback");
    let pcap = s.join("app.pcap");
    run_weir(&[
        "gen",
        "--model",
        "app",
        "-c",
        "30000",
        "-w",
        pcap.to_str().unwrap(),
    ]);
    let convert = |name: &str, extra: &[&str]| {
        let ds = s.join(name);
        let mut args = vec!["convert", "-q", "--index-sources", pcap.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-o", ds.to_str().unwrap()]);
        run_weir(&args);
        ds
    };
    let arrival = convert("arrival", &["--order", "arrival"]);
    let (filter, _) = some_flows(&arrival);
    let want = tcpdump_select(std::slice::from_ref(&pcap), &filter, &s.0);
    assert!(!want.is_empty());
    let check = |ds: &Path, why: &[&str]| {
        let (got, said) = weir_read(ds, &filter, &s.join("got.pcap"));
        assert!(
            got == want,
            "{why:?}: {} frames, want {}",
            got.len(),
            want.len()
        );
        assert!(why.iter().any(|w| said.contains(w)), "{why:?}: {said}");
    };
    check(&arrival, &["without a page index"]);

    // A packet file without its flows file (a capture killed between the
    // two): that file read whole, the other through the index.
    let flows_gone = convert("no-flows", &["-j", "2"]);
    let flows: Vec<PathBuf> = std::fs::read_dir(flows_gone.join("flows"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(flows.len(), 2);
    std::fs::remove_file(&flows[0]).unwrap();
    check(&flows_gone, &["without its flows file"]);
    let (_, said) = weir_read(&flows_gone, &filter, &s.join("got.pcap"));
    assert!(said.contains("by the index"), "{said}");

    // Packet files another writer made without a page index (as weir's
    // were before it wrote one), their metadata kept.
    let old = convert("old", &[]);
    for e in std::fs::read_dir(old.join("packets")).unwrap() {
        rewrite_without_page_index(&e.unwrap().path());
    }
    // (pyarrow compresses with snappy: the query engine reads them.)
    check(&old, &["without a page index", "decoder does not read"]);

    // The second packet file of two written so: the engine reads the
    // dataset, and what the index found in the first file (flows of both,
    // DNS's many) is not kept twice.
    let mixed = convert("mixed", &["-j", "2"]);
    let mut files: Vec<PathBuf> = std::fs::read_dir(mixed.join("packets"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2);
    rewrite_without_page_index(&files[1]);
    let dns = "udp port 53";
    let want = tcpdump_select(std::slice::from_ref(&pcap), dns, &s.0);
    let (got, said) = weir_read(&mixed, dns, &s.join("got.pcap"));
    assert!(
        got == want,
        "{} frames, want {}: {said}",
        got.len(),
        want.len()
    );
    assert!(said.contains("decoder does not read"), "{said}");
    assert!(!said.contains("by the index"), "{said}");
}

/// `weir merge` writes the index into its packet files: a page index and
/// a flows file beside each.
#[test]
fn merge_writes_the_index() {
    let s = Scratch::new("read-index-merge");
    let mut parts = Vec::new();
    for (i, seed) in ["3", "4"].iter().enumerate() {
        let pcap = s.join(&format!("part{i}.pcap"));
        run_weir(&[
            "gen",
            "--model",
            "app",
            "-c",
            "20000",
            "--seed",
            seed,
            "-w",
            pcap.to_str().unwrap(),
        ]);
        let ds = s.join(&format!("ds{i}"));
        run_weir(&[
            "convert",
            "-q",
            pcap.to_str().unwrap(),
            "-o",
            ds.to_str().unwrap(),
        ]);
        parts.push(ds);
    }
    let merged = s.join("merged");
    run_weir(&[
        "merge",
        parts[0].to_str().unwrap(),
        parts[1].to_str().unwrap(),
        "-o",
        merged.to_str().unwrap(),
    ]);
    for e in std::fs::read_dir(merged.join("packets")).unwrap() {
        let p = e.unwrap().path();
        assert!(
            store::index::PacketIndex::open(&p).unwrap().is_some(),
            "{}: no page index",
            p.display()
        );
        let name = p.file_name().unwrap();
        assert!(merged.join("flows").join(name).is_file(), "{}", p.display());
    }
    // (merge keeps no pointers into the frames: the index serves the
    // analyses' filters.)
    let (filter, _) = some_flows(&merged);
    let mut cmd = weir();
    cmd.arg("analyze")
        .arg(&merged)
        .args(["summary", "--verbose"])
        .arg(&filter);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
}
