//! `weir convert` and `weir info` end to end.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use wire::{Has, PacketRecord};

fn generate(s: &Scratch, name: &str, args: &[&str]) -> std::path::PathBuf {
    let path = s.join(name);
    let mut cmd = weir();
    cmd.arg("gen").args(args).arg("-w").arg(&path);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    path
}

fn convert(args: &[&std::ffi::OsStr]) -> Run {
    let mut cmd = weir();
    cmd.arg("convert").args(args);
    run_bounded(cmd, Duration::from_secs(300))
}

/// A record's fields as a comparable key (rows may come in another order).
fn key(r: &PacketRecord) -> String {
    format!("{r:?}").replace(&format!("worker: {}", r.worker), "")
}

/// Every one of tcpdump's test captures (several hundred), in one conversion: each either
/// converts or is reported with an error naming it; nothing panics, hangs
/// or grows memory without bound.
#[test]
fn tcpdump_corpus_converts_or_fails_clearly() {
    let s = Scratch::new("corpus");
    let files = tcpdump_captures();
    assert!(files.len() >= 300, "{} captures", files.len());
    let ds = s.join("ds");
    let mut args: Vec<&std::ffi::OsStr> = files.iter().map(|p| p.as_os_str()).collect();
    args.extend([std::ffi::OsStr::new("-o"), ds.as_os_str()]);
    let r = convert(&args);
    let stderr = r.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        r.code() == 0 || r.code() == 1,
        "exit {}: {stderr}",
        r.code()
    );
    assert!(r.max_rss_kb < 1_500_000, "peak memory {} kB", r.max_rss_kb);
    let m = manifest(&ds);
    let sources = m["sources"].as_array().unwrap();
    assert_eq!(sources.len(), files.len());
    let mut frames = 0;
    for (src, file) in sources.iter().zip(&files) {
        assert_eq!(src["path"].as_str().unwrap(), file.to_str().unwrap());
        if let Some(e) = src["error"].as_str() {
            let name = file.file_name().unwrap().to_str().unwrap();
            assert!(e.contains(name) && stderr.contains(e), "unclear error: {e}");
        }
        frames += src["frames"].as_u64().unwrap();
    }
    assert_eq!(m["counts"]["frames"].as_u64().unwrap(), frames);
    assert_eq!(records(&ds).len() as u64, frames);
    assert!(frames > 7_000, "only {frames} frames");
}

/// Damaged files: the frames before the damage are kept, the error names
/// the file and the byte, and the exit status says something went wrong.
#[test]
fn damaged_files_keep_what_came_before() {
    let s = Scratch::new("damaged");
    let good = generate(&s, "good.pcap", &["--model", "imix", "-c", "1000"]);
    let bytes = std::fs::read(&good).unwrap();
    // Cut in the middle of the last record.
    let cut = s.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    // A bogus captured length in the 501st record (records are walked to find it).
    let mut bogus = bytes.clone();
    let mut at = 24usize;
    for _ in 0..500 {
        let caplen = u32::from_le_bytes(bogus[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
    }
    bogus[at + 8..at + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let bogus_path = s.join("bogus.pcap");
    std::fs::write(&bogus_path, &bogus).unwrap();
    let text = s.join("notes.txt");
    std::fs::write(&text, "not a capture").unwrap();

    for (file, kept, words) in [
        (
            &cut,
            999u64,
            vec![
                "cut.pcap",
                "ends inside a pcap record",
                "every frame before it",
            ],
        ),
        (
            &bogus_path,
            500,
            vec!["bogus.pcap", &*format!("byte {at}"), "exceeds the limit"],
        ),
        (&text, 0, vec!["notes.txt", "not a pcap or pcapng file"]),
    ] {
        let ds = s.join("ds");
        let r = convert(&[
            file.as_os_str(),
            "-o".as_ref(),
            ds.as_os_str(),
            "--force".as_ref(),
        ]);
        assert_eq!(r.code(), 1, "{}", r.stderr());
        for w in words {
            assert!(r.stderr().contains(w), "{w:?} not in: {}", r.stderr());
        }
        assert_eq!(records(&ds).len() as u64, kept);
        assert_eq!(manifest(&ds)["counts"]["frames"].as_u64(), Some(kept));
    }
}

#[test]
fn workers_compression_and_stdin_give_the_same_rows() {
    let s = Scratch::new("same");
    let trace = generate(
        &s,
        "app.pcap",
        &["--model", "app", "-c", "60k", "--seed", "3"],
    );
    let reference = s.join("ref");
    let r = convert(&[
        trace.as_os_str(),
        "-o".as_ref(),
        reference.as_os_str(),
        "-j".as_ref(),
        "1".as_ref(),
    ]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let mut expect: Vec<String> = records(&reference).iter().map(key).collect();
    expect.sort();
    assert_eq!(expect.len(), 60_000);

    let zst = s.join("app.pcap.zst");
    let gz = s.join("app.pcap.gz");
    assert!(
        tool("zstd")
            .args(["-q", "-f", "-o"])
            .arg(&zst)
            .arg(&trace)
            .status()
            .unwrap()
            .success()
    );
    assert!(
        tool("sh")
            .arg("-c")
            .arg(format!("gzip -c {} > {}", trace.display(), gz.display()))
            .status()
            .unwrap()
            .success()
    );
    for (name, input, workers, extra) in [
        ("j2", &trace, "2", "--order=flow"),
        ("read", &trace, "2", "--no-mmap"),
        ("zstd", &zst, "2", "--order=flow"),
        ("gzip", &gz, "1", "--order=flow"),
    ] {
        let ds = s.join(name);
        let r = convert(&[
            input.as_os_str(),
            "-o".as_ref(),
            ds.as_os_str(),
            "-j".as_ref(),
            workers.as_ref(),
            extra.as_ref(),
        ]);
        assert_eq!(r.code(), 0, "{name}: {}", r.stderr());
        let rows = records(&ds);
        let mut got: Vec<String> = rows.iter().map(key).collect();
        got.sort();
        assert_eq!(got, expect, "{name}");
        // Frames are dealt to workers by flow: one worker per flow, and
        // both workers busy.
        let mut worker_of = std::collections::HashMap::new();
        let mut per_worker = [0usize; 2];
        for r in rows.iter().filter(|r| r.has(wire::Has::FLOW)) {
            per_worker[r.worker as usize] += 1;
            let w = *worker_of.entry(r.flow_hash).or_insert(r.worker);
            assert_eq!(
                w, r.worker,
                "{name}: flow {:08x} on two workers",
                r.flow_hash
            );
        }
        if workers == "2" {
            assert!(
                per_worker.iter().all(|&n| n > 10_000),
                "{name}: {per_worker:?}"
            );
        }
    }

    // Standard input, in arrival order: exactly the file's order.
    let ds = s.join("stdin");
    let mut cmd = tool("sh");
    cmd.arg("-c").arg(format!(
        "cat {} | {} convert - -o {} --order arrival -j 1",
        trace.display(),
        env!("CARGO_BIN_EXE_weir"),
        ds.display()
    ));
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let rows = records(&ds);
    assert!(rows.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    let mut got: Vec<String> = rows.iter().map(key).collect();
    got.sort();
    assert_eq!(got, expect);
}

#[test]
fn records_point_at_their_frames_with_index_sources() {
    let s = Scratch::new("index");
    let a = generate(
        &s,
        "a.pcap",
        &["--model", "imix", "-c", "3000", "--seed", "1"],
    );
    let b = generate(
        &s,
        "b.pcap",
        &["--model", "fixed", "-c", "2000", "--size", "200"],
    );
    let ds = s.join("ds");
    let r = convert(&[
        a.as_os_str(),
        b.as_os_str(),
        "-o".as_ref(),
        ds.as_os_str(),
        "--index-sources".as_ref(),
    ]);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let files = [std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap()];
    let rows = records(&ds);
    assert_eq!(rows.len(), 5000);
    let mut per_file = [0, 0];
    for r in &rows {
        assert!(r.has(Has::PCAP));
        let f = &files[r.pcap_file as usize];
        per_file[r.pcap_file as usize] += 1;
        let at = r.pcap_offset as usize;
        let sec = u32::from_le_bytes(f[at..at + 4].try_into().unwrap()) as i64;
        let nsec = u32::from_le_bytes(f[at + 4..at + 8].try_into().unwrap()) as i64;
        let cap = u32::from_le_bytes(f[at + 8..at + 12].try_into().unwrap());
        assert_eq!((sec * 1_000_000_000 + nsec, cap), (r.ts_ns, r.cap_len));
    }
    assert_eq!(per_file, [3000, 2000]);
    let m = manifest(&ds);
    assert_eq!(
        m["sources"][1]["path"].as_str().unwrap(),
        b.to_str().unwrap()
    );
}

#[test]
fn info_repeats_the_summary_and_datasets_are_protected() {
    let s = Scratch::new("info");
    let trace = generate(&s, "t.pcap", &["--model", "app", "-c", "5000"]);
    let ds = s.join("ds");
    let r = convert(&[trace.as_os_str(), "-o".as_ref(), ds.as_os_str()]);
    assert_eq!(r.code(), 0);
    let summary = r.stdout();
    assert!(summary.contains("frames     5,000"), "{summary}");
    let mut cmd = weir();
    cmd.arg("info").arg(&ds);
    let info = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(info.code(), 0);
    // Everything but the first line (which names the command) is the same.
    let tail = |t: &str| t.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(tail(&info.stdout()), tail(&summary));
    let mut cmd = weir();
    cmd.args(["info", "--json"]).arg(&ds);
    let json: serde_json::Value =
        serde_json::from_str(&run_bounded(cmd, Duration::from_secs(30)).stdout()).unwrap();
    assert_eq!(json["counts"]["frames"], 5000);
    let protocols: BTreeMap<String, u64> =
        serde_json::from_value(json["counts"]["protocols"].clone()).unwrap();
    assert_eq!(protocols.values().sum::<u64>(), 5000);

    // An existing dataset is not overwritten without --force; other
    // directories never are.
    let r = convert(&[trace.as_os_str(), "-o".as_ref(), ds.as_os_str()]);
    assert_eq!(r.code(), 1);
    assert!(r.stderr().contains("--force"), "{}", r.stderr());
    let other = s.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("keep.txt"), "mine").unwrap();
    let r = convert(&[
        trace.as_os_str(),
        "-o".as_ref(),
        other.as_os_str(),
        "--force".as_ref(),
    ]);
    assert_eq!(r.code(), 1);
    assert!(r.stderr().contains("not empty"), "{}", r.stderr());
    assert!(other.join("keep.txt").exists());
    // Bad flags and missing files say what is wrong.
    let r = convert(&[
        "/nonexistent/x.pcap".as_ref(),
        "-o".as_ref(),
        s.join("ds2").as_os_str(),
    ]);
    assert_eq!(r.code(), 1);
    assert!(r.stderr().contains("/nonexistent/x.pcap"), "{}", r.stderr());
    let r = convert(&[
        trace.as_os_str(),
        "-o".as_ref(),
        s.join("ds3").as_os_str(),
        "-j".as_ref(),
        "0".as_ref(),
    ]);
    assert_ne!(r.code(), 0);
    assert!(r.stderr().contains("--workers"), "{}", r.stderr());
    let mut cmd = weir();
    cmd.args(["info"]).arg(s.join("nothing"));
    let r = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(r.code(), 1);
    assert!(r.stderr().contains("does not exist"), "{}", r.stderr());
}
