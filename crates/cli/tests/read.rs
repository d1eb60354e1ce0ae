//! `weir read` against tcpdump's own filter on the same files: the same
//! frames, byte for byte, in the same order.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;

/// (ts_ns, wire_len, bytes) of every frame of a capture file.
fn frames_of(path: &Path) -> Vec<(i64, u32, Vec<u8>)> {
    let mut r = pcapio::TraceReader::open(path, pcapio::ReaderOptions::default()).unwrap();
    let mut out = Vec::new();
    while let Some(chunk) = r.next_chunk().unwrap() {
        for (f, bytes) in chunk.iter() {
            out.push((f.ts_ns, f.wire_len, bytes.to_vec()));
        }
    }
    out
}

fn tcpdump_select(src: &Path, filter: &str, out: &Path) -> Vec<(i64, u32, Vec<u8>)> {
    let mut cmd = tool("tcpdump");
    // Nanosecond output, as weir writes (tcpdump keeps µs by default).
    cmd.arg("--time-stamp-precision=nano")
        .arg("-r")
        .arg(src)
        .arg("-w")
        .arg(out);
    if !filter.is_empty() {
        cmd.arg(filter);
    }
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "tcpdump {filter}: {}", r.stderr());
    frames_of(out)
}

fn weir_read(ds: &Path, args: &[&str], out: &Path) -> (Vec<(i64, u32, Vec<u8>)>, String) {
    let mut cmd = weir();
    cmd.arg("read")
        .arg(ds)
        .args(args)
        .arg("-w")
        .arg(out)
        .arg("--force");
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir read {args:?}: {}", r.stderr());
    (frames_of(out), r.stderr())
}

fn convert_indexed(s: &Scratch, inputs: &[PathBuf], name: &str) -> PathBuf {
    let ds = s.join(name);
    let mut cmd = weir();
    cmd.args(["convert", "-q", "--index-sources"])
        .args(inputs)
        .arg("-o")
        .arg(&ds);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    ds
}

/// A real NFSv3 trace (first 50,000 frames): for each filter, weir read
/// returns exactly what tcpdump -r FILTER does, and tcpdump opens the file
/// weir wrote.
#[test]
fn read_selects_exactly_what_tcpdump_selects() {
    let s = Scratch::new("read-nfs");
    let cut = nfs_frames(&s, 50_000, "cut.pcap");
    let ds = convert_indexed(&s, std::slice::from_ref(&cut), "ds");
    for filter in [
        "",
        "udp",
        "tcp and dst port 2049 and greater 1000",
        "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
        "not port 2049",
        "host 10.88.0.1 and portrange 100-200",
    ] {
        let want = tcpdump_select(&cut, filter, &s.join("want.pcap"));
        let words: Vec<&str> = filter.split_whitespace().collect();
        let (got, _) = weir_read(&ds, &words, &s.join("got.pcap"));
        assert_eq!(got.len(), want.len(), "filter {filter:?}");
        assert!(got == want, "filter {filter:?}: frames differ");
    }
    // A time window: the frames tcpdump selects that fall in it.
    let all = frames_of(&cut);
    let t0 = all[0].0;
    let (from, to) = (t0 + 100_000_000, t0 + 200_000_000);
    let want: Vec<_> = all
        .iter()
        .filter(|f| f.0 >= from && f.0 < to)
        .cloned()
        .collect();
    assert!(!want.is_empty());
    let (got, msg) = weir_read(
        &ds,
        &["--from", "+100ms", "--to", "+200ms"],
        &s.join("win.pcap"),
    );
    assert!(
        got == want,
        "window: {} frames, want {}",
        got.len(),
        want.len()
    );
    // It says how it found the records: through the index, or the
    // records read whole (by weir's decoder or the query engine).
    assert!(
        ["by the index", "by the records", "row groups"]
            .iter()
            .any(|w| msg.contains(w)),
        "{msg}"
    );
    // tcpdump reads what weir wrote.
    let mut cmd = tool("tcpdump");
    cmd.arg("-nr").arg(s.join("win.pcap"));
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(r.stdout().lines().count(), want.len());
}

/// Sources that cannot be read by offset (pcapng, compressed) are read in
/// sequence, and several sources come out merged.
#[test]
fn read_from_pcapng_and_compressed_sources() {
    let s = Scratch::new("read-ng");
    // AHCP over IPv6 UDP, in pcapng.
    let ng = tcpdump_capture("ahcp.pcapng");
    let plain = s.join("imix.pcap");
    let mut cmd = weir();
    cmd.args(["gen", "--model", "imix", "-c", "2000", "-w"])
        .arg(&plain);
    assert_eq!(run_bounded(cmd, Duration::from_secs(60)).code(), 0);
    let mut cmd = tool("zstd");
    cmd.arg("-q").arg("-k").arg(&plain);
    assert_eq!(run_bounded(cmd, Duration::from_secs(60)).code(), 0);
    let zst = s.join("imix.pcap.zst");
    let ds = convert_indexed(&s, &[ng.clone(), zst], "ds");
    let want = tcpdump_select(&plain, "tcp", &s.join("want.pcap"));
    let (got, _) = weir_read(&ds, &["tcp"], &s.join("got.pcap"));
    assert!(
        !want.is_empty() && got == want,
        "{} vs {}",
        got.len(),
        want.len()
    );
    let want = tcpdump_select(&ng, "ip6 and udp port 5359", &s.join("want2.pcap"));
    let (got, _) = weir_read(
        &ds,
        &["ip6", "and", "udp", "port", "5359"],
        &s.join("got2.pcap"),
    );
    assert!(
        !want.is_empty() && got == want,
        "{} vs {}",
        got.len(),
        want.len()
    );
}

#[test]
fn read_errors_say_what_to_do() {
    let s = Scratch::new("read-errors");
    let plain = s.join("f.pcap");
    let mut cmd = weir();
    cmd.args(["gen", "--model", "imix", "-c", "100", "-w"])
        .arg(&plain);
    assert_eq!(run_bounded(cmd, Duration::from_secs(60)).code(), 0);
    // Converted without --index-sources: the records point nowhere.
    let ds = s.join("ds");
    let mut cmd = weir();
    cmd.args(["convert", "-q"]).arg(&plain).arg("-o").arg(&ds);
    assert_eq!(run_bounded(cmd, Duration::from_secs(60)).code(), 0);
    let out = s.join("o.pcap");
    for (args, want) in [
        (vec![ds.to_str().unwrap()], "--index-sources"),
        (vec!["/nonexistent"], "no such dataset"),
    ] {
        let mut cmd = weir();
        cmd.arg("read").args(&args).arg("-w").arg(&out);
        let r = run_bounded(cmd, Duration::from_secs(60));
        assert_ne!(r.code(), 0);
        assert!(r.stderr().contains(want), "{}", r.stderr());
        assert!(!r.stderr().contains("panicked"));
    }
    let ds2 = convert_indexed(&s, std::slice::from_ref(&plain), "ds2");
    let mut cmd = weir();
    cmd.arg("read")
        .arg(&ds2)
        .args(["tcp", "port", "bogus"])
        .arg("-w")
        .arg(&out);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_ne!(r.code(), 0);
    assert!(r.stderr().contains("bad filter"), "{}", r.stderr());
    std::fs::write(&out, b"keep").unwrap();
    let mut cmd = weir();
    cmd.arg("read").arg(&ds2).arg("-w").arg(&out);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert!(r.stderr().contains("--force"), "{}", r.stderr());
    assert_eq!(std::fs::read(&out).unwrap(), b"keep");
}
