//! `weir merge`: two overlapping recordings of the same traffic, one with a
//! clock 2.1 ms ahead, merge into exactly the whole traffic; bad
//! invocations are refused before anything is written.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use wire::PacketRecord;

/// A frame by its time and headers, as a sortable tuple.
type Frame = (i64, u32, [u8; 16], [u8; 16], u32, u16, u16, u32, u32);

fn frame(r: &PacketRecord) -> Frame {
    (
        r.ts_ns, r.wire_len, r.ip_src, r.ip_dst, r.ip_id, r.src_port, r.dst_port, r.tcp_seq,
        r.tcp_ack,
    )
}

fn weir_ok(args: &[&str]) -> String {
    let mut cmd = weir();
    cmd.args(args);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir {args:?}: {}", r.stderr());
    r.stdout()
}

fn editcap(args: &[&str]) {
    let mut cmd = tool("editcap");
    cmd.args(args);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "editcap {args:?}: {}", r.stderr());
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn overlapping_recordings_merge_into_the_whole_traffic_once() {
    let s = Scratch::new("merge");
    let (all, a, b0, b) = (
        s.join("all.pcap"),
        s.join("a.pcap"),
        s.join("b0.pcap"),
        s.join("b.pcap"),
    );
    weir_ok(&["gen", "-w", p(&all), "--count", "20000", "--rate", "100k"]);
    // Box A saw frames 1-12000, box B frames 8001-20000 on a clock 2.1 ms
    // ahead: 4000 frames were seen by both.
    editcap(&["-r", p(&all), p(&a), "1-12000"]);
    editcap(&["-r", p(&all), p(&b0), "8001-20000"]);
    editcap(&["-t", "0.0021", p(&b0), p(&b)]);
    for (trace, ds) in [(&a, "ds-a"), (&b, "ds-b")] {
        weir_ok(&["convert", "-q", p(trace), "-o", p(&s.join(ds))]);
    }
    // One worker in arrival order: row i is frame i.
    let ds_all = s.join("ds-all");
    let whole = ["convert", "-q", p(&all), "-o", p(&ds_all), "-j", "1"];
    weir_ok(&[&whole[..], &["--order", "arrival"]].concat());
    let merged = s.join("merged");
    let out = weir_ok(&[
        "merge",
        p(&s.join("ds-a")),
        p(&s.join("ds-b")),
        "-o",
        p(&merged),
        "--order",
        "arrival",
        "--row-group-rows",
        "3000",
    ]);
    assert!(out.contains("4,000 duplicate frames removed"), "{out}");

    // Exactly the whole traffic: A's frames as A stamped them, then the
    // frames only B saw, as B stamped them.
    let offset = 2_100_000;
    let mut want: Vec<Frame> = records(&ds_all)
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let mut f = frame(r);
            if i >= 12000 {
                f.0 += offset;
            }
            f
        })
        .collect();
    let got_records = records(&merged);
    let mut got: Vec<Frame> = got_records.iter().map(frame).collect();
    // Arrival order: the merged rows run in time order across files and
    // row groups.
    assert!(
        got.windows(2).all(|w| w[0].0 <= w[1].0),
        "not in time order"
    );
    want.sort_unstable();
    got.sort_unstable();
    assert_eq!(got.len(), 20000);
    assert!(
        got == want,
        "the merged frames differ from the whole traffic"
    );
    // Each input's interface got its own number.
    assert!(got_records[..].iter().all(|r| r.iface <= 1));
    assert!(got_records.iter().any(|r| r.iface == 1));

    let m = manifest(&merged);
    assert_eq!(m["kind"], "merge");
    assert_eq!(m["counts"]["frames"], 20000);
    assert_eq!(m["interfaces"].as_array().unwrap().len(), 2);
    let info = &m["merge"];
    assert_eq!(info["duplicates_removed"], 4000);
    assert_eq!(info["dedup_window_ns"], 1_000_000);
    assert_eq!(info["inputs"][0]["frames"], 12000);
    assert_eq!(info["inputs"][0]["duplicates"], 0);
    assert_eq!(info["inputs"][1]["duplicates"], 4000);
    assert_eq!(info["inputs"][1]["clock_offset_ns"], offset);
    assert!(info["inputs"][1]["offset_frames"].as_u64().unwrap() > 3000);
    assert_eq!(info["inputs"][1]["offset_spread_ns"], 0);

    // Without the check every frame of both stays; analyses read the result.
    let kept = s.join("kept");
    weir_ok(&[
        "merge",
        p(&s.join("ds-a")),
        p(&s.join("ds-b")),
        "-o",
        p(&kept),
        "--keep-duplicates",
        "-q",
    ]);
    assert_eq!(manifest(&kept)["counts"]["frames"], 24000);
    assert!(manifest(&kept)["merge"]["dedup_window_ns"].is_null());
    let n = weir_ok(&[
        "sql",
        p(&merged),
        "SELECT count(*) AS n FROM packets",
        "--csv",
    ]);
    assert!(n.contains("20000"), "{n}");

    // A window narrower than what is left of the offset after correcting
    // it still finds the duplicates (the offset is measured, not assumed);
    // inputs merged the other way round see the offset negated.
    let back = s.join("back");
    weir_ok(&[
        "merge",
        p(&s.join("ds-b")),
        p(&s.join("ds-a")),
        "-o",
        p(&back),
        "--dedup-window",
        "1us",
        "-q",
    ]);
    let m = manifest(&back);
    assert_eq!(m["merge"]["duplicates_removed"], 4000);
    assert_eq!(m["merge"]["inputs"][1]["clock_offset_ns"], -offset);
}

#[test]
fn bad_merges_are_refused_and_write_nothing() {
    let s = Scratch::new("merge-bad");
    let trace = s.join("t.pcap");
    weir_ok(&["gen", "-w", p(&trace), "--count", "100"]);
    let ds = s.join("ds");
    weir_ok(&["convert", "-q", p(&trace), "-o", p(&ds)]);
    weir_ok(&["convert", "-q", p(&trace), "-o", p(&s.join("ds2"))]);
    let refused = |args: &[&str], says: &str| {
        let mut cmd = weir();
        cmd.arg("merge").args(args);
        let r = run_bounded(cmd, Duration::from_secs(60));
        assert_ne!(r.code(), 0, "{args:?} was accepted");
        assert!(r.stderr().contains(says), "{args:?}: {}", r.stderr());
    };
    let out = s.join("out");
    refused(&[p(&ds), "-o", p(&out)], "DATASET");
    refused(&[p(&ds), p(&ds), "-o", p(&out)], "given twice");
    refused(
        &[p(&ds), p(&s.join("missing")), "-o", p(&out)],
        "does not exist",
    );
    refused(&[p(&ds), p(&trace), "-o", p(&out)], "does not exist");
    refused(
        &[p(&ds), p(&s.join("ds2")), "-o", p(&ds)],
        "is also the output",
    );
    refused(
        &[p(&ds), p(&ds), "-o", p(&out), "--dedup-window", "soon"],
        "--dedup-window",
    );
    assert!(!out.join("manifest.json").exists());
}
