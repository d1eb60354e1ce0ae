//! Full packets kept for days: compressed pcap (checked with the stock
//! `zstd` and `lz4` tools and tcpdump), `weir read` out of the middle of a
//! compressed file, `kill -9` then `weir recover`, and a disk that fills up
//! mid-capture. Traffic flows on a veth pair between two namespaces each
//! test makes; every sender is bounded in count and time.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::background::Background;
use common::live::{capture, send, walk};
use common::netns::{IFACE, VethPair};
use common::*;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// Decompresses with the stock tool (by suffix) and counts with tcpdump.
fn stock_frames(path: &Path, scratch: &Scratch) -> (PathBuf, usize) {
    let name = path.file_name().unwrap().to_string_lossy().to_string();
    let plain = scratch.join(&format!("{name}.plain.pcap"));
    let tool_name = if name.ends_with(".zst") {
        Some("zstd")
    } else if name.ends_with(".lz4") {
        Some("lz4")
    } else {
        None
    };
    match tool_name {
        Some(t) => {
            let mut cmd = tool(t);
            cmd.args(["-d", "-q", "-f", "-c"]).arg(path);
            let r = run_bounded(cmd, Duration::from_secs(60));
            assert_eq!(r.code(), 0, "{t} -d {}: {}", path.display(), r.stderr());
            // The tool's output is the pcap; run_bounded keeps stdout as text,
            // so decompress again straight into a file.
            let f = std::fs::File::create(&plain).unwrap();
            let mut cmd = tool(t);
            cmd.args(["-d", "-q", "-c"]).arg(path).stdout(f);
            assert!(cmd.status().unwrap().success());
        }
        None => {
            std::fs::copy(path, &plain).unwrap();
        }
    }
    let mut cmd = tool("tcpdump");
    cmd.args(["-nn", "-r"]).arg(&plain);
    let t = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(
        t.code(),
        0,
        "tcpdump -r {}: {}",
        plain.display(),
        t.stderr()
    );
    (plain, t.stdout().lines().count())
}

fn pcap_paths(ds: &Path) -> Vec<PathBuf> {
    manifest(ds)["files"]["pcap"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| ds.join(f["path"].as_str().unwrap()))
        .collect()
}

fn frames_of(path: &Path) -> Vec<(i64, Vec<u8>)> {
    let mut r = pcapio::TraceReader::open(path, Default::default()).expect("open");
    let mut out = Vec::new();
    while let Some(c) = r.next_chunk().expect("read") {
        out.extend(c.iter().map(|(d, b)| (d.ts_ns, b.to_vec())));
    }
    out
}

#[test]
fn each_compression_mode_writes_files_the_stock_tools_read() {
    let net = VethPair::new("zmodes");
    let s = Scratch::new("store-modes");
    for codec in ["zstd", "zstd:-3", "lz4", "auto"] {
        let ds = s.join(&format!("ds-{}", codec.replace(':', "")));
        let cap = capture(
            &net.b,
            &[
                "-o",
                ds.to_str().unwrap(),
                "-j",
                "1",
                "-c",
                "6000",
                "--duration",
                "30s",
                "--compress",
                codec,
                "--rotate-size",
                "512Ki",
                "udp",
            ],
        );
        send(
            &net.a,
            &[
                "--count", "6000", "--rate", "20000", "--size", "700", "--flows", "16", "--seed",
                "3",
            ],
        );
        let r = cap.wait(Duration::from_secs(40));
        assert_eq!(r.code(), 0, "{codec}: {}", r.stderr());
        let m = manifest(&ds);
        assert_eq!(m["counts"]["frames"], 6000, "{codec}");
        let named = if codec == "zstd" { "zstd:3" } else { codec };
        assert_eq!(m["capture"]["compress"], named);
        let paths = pcap_paths(&ds);
        assert!(
            paths.len() > 3,
            "{codec}: rotated into {} files",
            paths.len()
        );
        let suffix = if codec == "lz4" {
            ".pcap.lz4"
        } else {
            ".pcap.zst"
        };
        let mut total = 0;
        let mut plain_bytes = 0u64;
        let mut stored = 0u64;
        for (p, f) in paths.iter().zip(m["files"]["pcap"].as_array().unwrap()) {
            assert!(p.to_string_lossy().ends_with(suffix), "{}", p.display());
            let (_, n) = stock_frames(p, &s);
            assert_eq!(n as u64, f["frames"].as_u64().unwrap(), "{}", p.display());
            assert_eq!(frames_of(p).len(), n, "weir reads {}", p.display());
            total += n;
            plain_bytes += f["bytes"].as_u64().unwrap();
            stored += f["stored_bytes"].as_u64().unwrap();
            assert_eq!(
                std::fs::metadata(p).unwrap().len(),
                f["stored_bytes"].as_u64().unwrap()
            );
            assert!(f["methods"].as_object().is_some_and(|o| !o.is_empty()));
        }
        assert_eq!(total, 6000, "{codec}");
        // Half-random payloads: compression must have done something.
        assert!(
            stored < plain_bytes,
            "{codec}: {stored} stored of {plain_bytes}"
        );

        // A slice from the middle of the capture, out of compressed files:
        // exactly the frames of that window.
        let all: Vec<(i64, Vec<u8>)> = paths.iter().flat_map(|p| frames_of(p)).collect();
        let (t0, t1) = (all[2000].0, all[4000].0);
        let out = s.join(&format!("slice-{}.pcap", codec.replace(':', "")));
        let mut cmd = weir();
        cmd.arg("read")
            .arg(&ds)
            .args([
                "--from",
                &store::time::format_ns(t0),
                "--to",
                &store::time::format_ns(t1),
            ])
            .arg("-w")
            .arg(&out);
        let r = run_bounded(cmd, Duration::from_secs(60));
        assert_eq!(r.code(), 0, "{codec}: weir read: {}", r.stderr());
        let want: Vec<&(i64, Vec<u8>)> = all.iter().filter(|(t, _)| *t >= t0 && *t < t1).collect();
        let got = frames_of(&out);
        assert_eq!(got.len(), want.len(), "{codec}: slice");
        assert!(
            got.iter().zip(&want).all(|(a, b)| a.1 == b.1),
            "{codec}: slice bytes"
        );
        assert!(
            stats_have_levels(&ds),
            "{codec}: stats record the compression"
        );
    }
}

fn stats_have_levels(ds: &Path) -> bool {
    manifest(ds)["files"]["stats"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| store::stats::read_stats_file(&ds.join(f.as_str().unwrap())).unwrap())
        .any(|r| r.pcap_level.is_some() && r.pcap_stored_bytes > 0)
}

/// `weir recover DS` succeeds and leaves no unfinished file behind.
fn recover_whole(ds: &Path, what: &str) {
    let mut cmd = weir();
    cmd.arg("recover").arg(ds);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{what}: recover: {}", r.stderr());
    for e in walk(ds) {
        let n = e.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            !n.ends_with(".part") && n != ".journal",
            "{what}: recovered, left: {}",
            e.display()
        );
    }
    assert_verifies(ds);
}

#[test]
fn kill_9_then_recover_keeps_every_frame_before_the_cut() {
    let net = VethPair::new("kill9");
    let s = Scratch::new("store-kill9");
    // With zstd, every record is put off (built from the pcap files),
    // so the kill finds records still to build.
    for (codec, lag) in [("none", "64Mi"), ("zstd:1", "0")] {
        let ds = s.join(&format!("ds-{}", codec.replace(':', "")));
        let cap = capture(
            &net.b,
            &[
                "-o",
                ds.to_str().unwrap(),
                "-j",
                "1",
                "--compress",
                codec,
                "--records-lag",
                lag,
                "--duration",
                "60s",
                "udp",
            ],
        );
        let gen_args = [
            "--count", "40000", "--rate", "10000", "--size", "400", "--flows", "8", "--seed", "9",
        ];
        let mut g = VethPair::exec(&net.a, WEIR);
        g.arg("gen").args(["-i", IFACE]).args(gen_args);
        let sender = Background::start(g, "", Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(2600));
        cap.signal(libc::SIGKILL);
        let _ = cap.wait(Duration::from_secs(10));
        let _ = sender.wait(Duration::from_secs(30));
        assert_eq!(manifest(&ds)["capture"]["ended_by"], "running");

        recover_whole(&ds, codec);
        let m = manifest(&ds);
        assert_eq!(m["capture"]["ended_by"], "killed (recovered)", "{codec}");
        // Every frame kept is one that was sent, in order, from the first.
        let reference = s.join("sent.pcap");
        let mut cmd = weir();
        cmd.arg("gen").args(gen_args).arg("-w").arg(&reference);
        assert_eq!(run_bounded(cmd, Duration::from_secs(30)).code(), 0);
        let sent = frames_of(&reference);
        let paths = pcap_paths(&ds);
        assert_eq!(paths.len(), 1);
        let (_, n_stock) = stock_frames(&paths[0], &s);
        let got = frames_of(&paths[0]);
        assert_eq!(got.len(), n_stock);
        assert!(got.len() > 5_000, "{codec}: {} frames kept", got.len());
        assert_eq!(m["counts"]["frames"].as_u64().unwrap(), got.len() as u64);
        assert!(
            got.iter().zip(&sent).all(|(a, b)| a.1 == b.1),
            "{codec}: the recovered frames are the first ones sent"
        );
        // Every frame kept has exactly one record: those the killed
        // capture had not written yet are built from the pcap file.
        let recs = records(&ds);
        assert_eq!(recs.len(), got.len(), "{codec}: records");
        let pointers: std::collections::HashSet<_> =
            recs.iter().map(|r| (r.pcap_file, r.pcap_offset)).collect();
        assert_eq!(
            pointers.len(),
            recs.len(),
            "{codec}: two records of one frame"
        );
        // The per-second stats written before the kill are there.
        let rows: Vec<_> = m["files"]["stats"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|f| store::stats::read_stats_file(&ds.join(f.as_str().unwrap())).unwrap())
            .collect();
        assert!(rows.len() >= 2, "{codec}: {} stats rows", rows.len());
        assert!(rows.iter().map(|r| r.frames).sum::<u64>() >= 10_000);
        let again = {
            let mut c = weir();
            c.arg("recover").arg(&ds);
            run_bounded(c, Duration::from_secs(30))
        };
        assert!(
            again.stdout().contains("nothing to do"),
            "{}",
            again.stdout()
        );
    }
}

/// `weir capture` in its default mode (pcap and records, one ring per
/// core, the default staging) killed at moments from its first instant to
/// five seconds in, under steady traffic: there is never a dataset
/// directory without a manifest, and `weir recover` puts each one in
/// order: every pcap file whole and read by tcpdump, every records and
/// stats file readable, the manifest's counts those of the files.
#[test]
fn kill_9_at_any_moment_from_start_leaves_a_recoverable_dataset() {
    let net = VethPair::new("killstart");
    let s = Scratch::new("store-killstart");
    let mut g = VethPair::exec(&net.a, WEIR);
    g.arg("gen").args(["-i", IFACE]).args([
        "--count", "300000", "--rate", "10000", "--size", "300", "--flows", "16", "--seed", "3",
    ]);
    let sender = Background::start(g, "", Duration::from_secs(5));
    for ms in [0u64, 20, 60, 150, 400, 900, 1800, 3200, 5000] {
        let ds = s.join(&format!("ds-{ms}"));
        let mut cmd = VethPair::exec(&net.b, WEIR);
        cmd.arg("capture")
            .args(["-i", IFACE, "-o"])
            .arg(&ds)
            .args(["--duration", "60s"]);
        let cap = Background::start(cmd, "", Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(ms));
        cap.signal(libc::SIGKILL);
        let _ = cap.wait(Duration::from_secs(10));
        if !ds.exists() {
            // Killed before it made anything: nothing to recover.
            assert!(ms < 1000, "no dataset {ms} ms after the start");
            continue;
        }
        let listing = || format!("{:?}", walk(&ds));
        assert!(
            ds.join("manifest.json").is_file(),
            "killed at {ms} ms: a dataset directory without a manifest: {}",
            listing()
        );
        recover_whole(&ds, &format!("killed at {ms} ms"));
        let m = manifest(&ds);
        let mut frames = 0;
        for p in pcap_paths(&ds) {
            let (_, n) = stock_frames(&p, &s);
            assert_eq!(n, frames_of(&p).len(), "{ms} ms: {}", p.display());
            frames += n as u64;
        }
        assert_eq!(m["counts"]["frames"].as_u64().unwrap(), frames, "{ms} ms");
        assert!(records(&ds).len() as u64 <= frames, "{ms} ms");
        for f in m["files"]["stats"].as_array().unwrap() {
            store::stats::read_stats_file(&ds.join(f.as_str().unwrap())).unwrap();
        }
        if ms >= 5000 {
            // (Not earlier: start-up takes longer on a loaded CI machine.)
            assert!(frames > 0, "killed at {ms} ms: nothing was recorded");
        }
    }
    sender.signal(libc::SIGINT);
    let _ = sender.wait(Duration::from_secs(30));
}

/// A ring of pcap files (`--max-disk`) killed while a file is being
/// written over an older one: recovery keeps the new frames and none of
/// the old, and lists the file overwritten.
#[test]
fn kill_9_in_a_ring_of_files_keeps_no_overwritten_frame() {
    let net = VethPair::new("killring");
    let s = Scratch::new("store-killring");
    let gen_args = [
        "--count", "40000", "--rate", "10000", "--size", "400", "--flows", "8", "--seed", "5",
    ];
    let reference = s.join("sent.pcap");
    let mut cmd = weir();
    cmd.arg("gen").args(gen_args).arg("-w").arg(&reference);
    assert_eq!(run_bounded(cmd, Duration::from_secs(30)).code(), 0);
    let sent = frames_of(&reference);
    for codec in ["none", "zstd:1"] {
        let ds = s.join(&format!("ds-{}", codec.replace(':', "")));
        let cap = capture(
            &net.b,
            &[
                "-o",
                ds.to_str().unwrap(),
                "-j",
                "1",
                "--compress",
                codec,
                "--rotate-size",
                "128Ki",
                "--max-disk",
                "512Ki",
                "--duration",
                "60s",
                "udp",
            ],
        );
        let mut g = VethPair::exec(&net.a, WEIR);
        g.arg("gen").args(["-i", IFACE]).args(gen_args);
        let sender = Background::start(g, "", Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(2600));
        cap.signal(libc::SIGKILL);
        let _ = cap.wait(Duration::from_secs(10));
        let _ = sender.wait(Duration::from_secs(30));

        recover_whole(&ds, codec);
        let m = manifest(&ds);
        let removed = m["files"]["pcap_removed"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        // The file being written over is listed (naming its successor
        // when frames of that one reached the disk before the kill).
        assert!(
            !removed.is_empty(),
            "{codec}: no file listed as overwritten"
        );
        let kept_ids: Vec<u64> = m["files"]["pcap"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["id"].as_u64().unwrap())
            .collect();
        assert!(
            removed
                .iter()
                .all(|f| !kept_ids.contains(&f["id"].as_u64().unwrap())),
            "{codec}: {removed:?}"
        );
        // The files kept, in order, hold one run of the frames sent, with
        // nothing of an older file after the new frames.
        let mut got = Vec::new();
        for p in pcap_paths(&ds) {
            let (_, n_stock) = stock_frames(&p, &s);
            let frames = frames_of(&p);
            assert_eq!(frames.len(), n_stock, "{codec}: {}", p.display());
            got.extend(frames.into_iter().map(|f| f.1));
        }
        assert!(got.len() > 500, "{codec}: {} frames kept", got.len());
        let start = (0..=sent.len().saturating_sub(got.len()))
            .find(|&k| {
                sent[k..k + got.len()]
                    .iter()
                    .zip(&got)
                    .all(|(a, b)| a.1 == *b)
            })
            .unwrap_or_else(|| panic!("{codec}: the frames kept are not one run of those sent"));
        assert!(start > 0, "{codec}: the oldest frames were overwritten");
    }
}

/// A small tmpfs, unmounted when dropped.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: PathBuf, size: &str) -> SmallDisk {
        std::fs::create_dir_all(&dir).unwrap();
        let st = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "weir-test"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(st.success(), "mount a test tmpfs at {}", dir.display());
        SmallDisk(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_disk_that_fills_up_leaves_valid_files_and_a_clear_error() {
    let net = VethPair::new("full");
    let s = Scratch::new("store-full");
    for on_full in ["stop", "drop"] {
        let disk = SmallDisk::mount(s.join(&format!("disk-{on_full}")), "3m");
        let out = disk.0.join("x.pcap");
        let cap = capture(
            &net.b,
            &[
                "-w",
                out.to_str().unwrap(),
                "--rotate-size",
                "600Ki",
                "--on-full",
                on_full,
                "--buffer",
                "64Mi",
                "-c",
                "4000",
                "--duration",
                "30s",
                "udp",
            ],
        );
        send(
            &net.a,
            &[
                "--count", "4000", "--rate", "4000", "--size", "1400", "--flows", "4",
            ],
        );
        let r = cap.wait(Duration::from_secs(40));
        let said = format!("{}\n{}", r.stdout(), r.stderr());
        assert!(said.contains("the disk is full"), "{on_full}: {said}");
        assert_ne!(r.code(), 0, "{on_full}: a full disk is a failure: {said}");
        // Every file is whole: tcpdump reads each to its end.
        let mut kept = 0;
        for e in std::fs::read_dir(&disk.0).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().to_string();
            assert!(!n.ends_with(".part"), "{on_full}: left {n}");
            let (_, frames) = stock_frames(&e.path(), &s);
            assert_eq!(frames, frames_of(&e.path()).len());
            kept += frames;
        }
        assert!(kept > 1000, "{on_full}: {kept} frames kept");
        if on_full == "stop" {
            assert!(said.contains("the disk is full (--on-full stop)"), "{said}");
            assert!(kept < 4000);
        } else {
            // Capture went on: every frame is either in a file or counted.
            let count = |what: &str| -> u64 {
                let line = said.lines().find(|l| l.contains(what)).unwrap_or("");
                let tail = &line[line.find(what).map_or(0, |i| i + what.len())..];
                tail.split(|c: char| !c.is_ascii_digit() && c != ',')
                    .find(|t| !t.is_empty())
                    .map_or(0, |t| t.replace(',', "").parse().unwrap_or(0))
            };
            let captured = count("weir capture: ");
            let dropped = count("pcap staging dropped ");
            assert_eq!(captured, 4000, "{said}");
            assert_eq!(kept as u64 + dropped, captured, "{said}");
        }
        drop(disk);
    }
}

#[test]
fn retention_removes_the_oldest_files_and_says_so() {
    let net = VethPair::new("retain");
    let s = Scratch::new("store-retain");
    let ds = s.join("ds");
    let cap = capture(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "1",
            "-c",
            "6000",
            "--duration",
            "30s",
            "--rotate-size",
            "256Ki",
            "--max-disk",
            "1Mi",
            "udp",
        ],
    );
    send(
        &net.a,
        &[
            // Three seconds: files live past the capture's manifest
            // updates (one a second), so their removal is chained.
            "--count", "6000", "--rate", "2000", "--size", "700", "--flows", "8",
        ],
    );
    let r = cap.wait(Duration::from_secs(40));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stdout().contains("retention removed"), "{}", r.stdout());
    let m = manifest(&ds);
    let kept = m["files"]["pcap"].as_array().unwrap();
    let removed = m["files"]["pcap_removed"].as_array().unwrap();
    assert!(removed.len() >= 5, "{} removed", removed.len());
    assert!(removed.iter().all(|f| f["reason"] == "max-disk"));
    // The files form a ring: each removed one had its space taken by a
    // later file of the capture.
    let names: Vec<&str> = kept
        .iter()
        .chain(removed)
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    for f in removed {
        let by = f["overwritten_by"]
            .as_str()
            .unwrap_or_else(|| panic!("{f}"));
        assert!(names.contains(&by), "{by}");
    }
    // The oldest went: every removed file comes before every kept one.
    let max_removed = removed
        .iter()
        .map(|f| f["id"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(kept.iter().all(|f| f["id"].as_u64().unwrap() > max_removed));
    for f in removed {
        assert!(!ds.join(f["path"].as_str().unwrap()).exists());
    }
    // The chain records the overwritten files it held as removed by
    // retention, not as vanished.
    assert_verifies(&ds);
    let chain = m["integrity"]["entries"].as_array().unwrap();
    let chained: Vec<_> = chain.iter().filter(|e| e["op"] == "remove").collect();
    assert!(!chained.is_empty(), "{m}");
    assert!(chained.iter().all(|e| e["reason"] == "max-disk"), "{m}");
    let on_disk: u64 = std::fs::read_dir(ds.join("pcap"))
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(on_disk <= 1 << 20, "{on_disk} bytes of pcap kept");
    let in_files: u64 = kept.iter().map(|f| f["frames"].as_u64().unwrap()).sum();
    let gone: u64 = removed.iter().map(|f| f["frames"].as_u64().unwrap()).sum();
    assert_eq!(in_files + gone, 6000);
    // Records stay for every frame; weir read returns the frames still
    // kept and says where the others went.
    assert_eq!(records(&ds).len(), 6000);
    let out = s.join("all.pcap");
    let mut cmd = weir();
    cmd.arg("read").arg(&ds).arg("-w").arg(&out);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("retention removed"), "{}", r.stderr());
    assert_eq!(frames_of(&out).len() as u64, in_files);
}
