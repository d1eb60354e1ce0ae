//! `rates`, `bursts` and `loss` as passes over the columns: every window
//! of the span reported (silent ones as zero, in every output and in the
//! SQL `--emit-sql` gives), and the passes' answers equal to their SQL's
//! on DataFusion, over tcpdump's captures, generated traffic and traffic
//! with long silences.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use analyze::analyses::{self, AnsweredBy};
use analyze::{Session, TimeWindow};
use common::*;
use present::render::{Format, render};
use serde_json::Value;
use wire::LinkType;
use wire::build::{FrameSpec, IpSpec, Payload, TransportSpec};

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000_000_000;
const MS: i64 = 1_000_000;
const S: i64 = 1_000_000_000;

fn udp_frame(payload: usize, port: u16) -> Vec<u8> {
    let spec = FrameSpec {
        eth_src: [2, 0, 0, 0, 0, 1],
        eth_dst: [2, 0, 0, 0, 0, 2],
        vlan: None,
        ip: IpSpec::V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            ttl: 64,
            id: 1,
            dscp: 0,
            frag: 0,
        },
        transport: TransportSpec::Udp {
            sport: port,
            dport: 53,
        },
        payload: Payload::Zeros(payload),
    };
    let mut bytes = Vec::new();
    spec.build(&mut bytes);
    bytes
}

/// Traffic in seconds 0, 1, 5 and 9 after T0 only (three and three silent
/// seconds between), `per_second` frames spread over each.
fn gappy_frames(per_second: i64) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    for sec in [0, 1, 5, 9] {
        for k in 0..per_second {
            let ts = T0 + sec * S + 7 * MS + k * (990 * MS / per_second);
            out.push((ts, udp_frame(10 + (k as usize * 37) % 900, 1000 + k as u16)));
        }
    }
    out
}

fn dataset_of(
    s: &Scratch,
    name: &str,
    frames: &[(i64, Vec<u8>)],
    convert_flags: &[&str],
) -> PathBuf {
    let pcap = s.join(&format!("{name}.pcap"));
    let file = std::fs::File::create(&pcap).unwrap();
    let mut w =
        pcapio::PcapWriter::new(std::io::BufWriter::new(file), LinkType::ETHERNET, 65535).unwrap();
    for (ts, bytes) in frames {
        w.write_frame(*ts, bytes.len() as u32, bytes).unwrap();
    }
    w.into_inner().unwrap();
    convert(&pcap, &s.join(name), convert_flags)
}

fn convert(pcap: &Path, ds: &Path, flags: &[&str]) -> PathBuf {
    let mut cmd = weir();
    cmd.args(["convert", "-q"])
        .args(flags)
        .arg(pcap)
        .arg("-o")
        .arg(ds);
    let r = run_bounded(cmd, Duration::from_secs(300));
    assert_eq!(r.code(), 0, "convert {}: {}", pcap.display(), r.stderr());
    ds.to_path_buf()
}

fn weir_out(args: &[&str]) -> String {
    let mut cmd = weir();
    cmd.args(args);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir {args:?}: {}", r.stderr());
    r.stdout()
}

fn json(args: &[&str]) -> Value {
    let out = weir_out(&[args, &["--json"]].concat());
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The one statement of an `--emit-sql` script.
fn emitted(script: &str) -> String {
    let body: Vec<&str> = script
        .lines()
        .skip_while(|l| !l.starts_with("-- result: "))
        .skip(1)
        .filter(|l| !l.starts_with("--"))
        .collect();
    body.join("\n").trim().trim_end_matches(';').to_string()
}

/// A stats file in `ds` with dropped frames in the second from `drop_at`.
fn stats_with_drops(ds: &Path, seconds: &[i64], drop_at: i64) {
    let dir = ds.join("stats");
    std::fs::create_dir_all(&dir).unwrap();
    let mut rows = Vec::new();
    for (k, &t) in seconds.iter().enumerate() {
        for worker in 0..2u16 {
            rows.push(store::stats::StatsRow {
                ts_ns: t,
                worker,
                frames: 100 + k as u64,
                kernel_packets: 110 + k as u64,
                kernel_drops: if t == drop_at { 7 + worker as u64 } else { 0 },
                pcap_drops: if t == drop_at && worker == 1 { 3 } else { 0 },
                ring_backlog: (k as u32 * 3 + worker as u32) % 5,
                pcap_level: (worker == 1).then_some(k as i16 - 1),
                ..Default::default()
            });
        }
    }
    // A row of weir stack, which loss leaves out.
    rows.push(store::stats::StatsRow {
        ts_ns: seconds[0],
        stack: Some(store::stats::StackCounts {
            event: 0,
            events: 5,
            lost: 1,
        }),
        ..Default::default()
    });
    store::stats::write_stats_file(&dir.join("stats-0.parquet"), &rows).unwrap();
}

#[test]
fn rates_report_silent_windows_as_zero_in_every_output() {
    let s = Scratch::new("rates-gaps");
    let frames = gappy_frames(20);
    let ds = dataset_of(&s, "gaps", &frames, &[]);
    let d = ds.to_str().unwrap();
    let args = ["analyze", d, "rates", "--every", "1s", "--sample", "100ms"];
    let v = json(&args);
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 10, "{v}");
    for (k, row) in rows.iter().enumerate() {
        assert_eq!(row["start_ns"].as_i64(), Some(T0 + k as i64 * S), "{row}");
        let busy = [0, 1, 5, 9].contains(&k);
        let want_frames = if busy { 20 } else { 0 };
        assert_eq!(
            row["frames"].as_i64(),
            Some(want_frames),
            "window {k}: {row}"
        );
        if !busy {
            for col in [
                "bytes", "min_fps", "mean_fps", "max_fps", "min_bps", "mean_bps", "max_bps",
            ] {
                assert_eq!(row[col].as_f64(), Some(0.0), "window {k} {col}: {row}");
            }
        }
        assert_eq!(row["samples"].as_i64(), Some(10));
    }
    // CSV and the table: a line per window too.
    let csv = weir_out(&[&args[..], &["--csv"]].concat());
    assert_eq!(csv.lines().count(), 11, "{csv}");
    let table = weir_out(&args);
    assert_eq!(
        table.lines().filter(|l| l.contains("2026-01-01")).count(),
        10,
        "{table}"
    );
    // The SQL --emit-sql gives (what Spark runs) gives the same rows.
    let sql = emitted(&weir_out(&[&args[..], &["--emit-sql"]].concat()));
    let by_sql: Value = serde_json::from_str(&weir_out(&["sql", d, &sql, "--json"])).unwrap();
    assert_eq!(by_sql, v);
    // --from/--to set the span: windows before and after the data are
    // there, empty.
    let wide = [
        "--from",
        "2025-12-31T23:59:58Z",
        "--to",
        "2026-01-01T00:00:12Z",
    ];
    let v = json(&[&args[..], &wide].concat());
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 14, "{v}");
    assert_eq!(rows[0]["start_ns"].as_i64(), Some(T0 - 2 * S));
    let frames: Vec<i64> = rows.iter().map(|r| r["frames"].as_i64().unwrap()).collect();
    assert_eq!(frames, [0, 0, 20, 20, 0, 0, 0, 20, 0, 0, 0, 20, 0, 0]);
    let sql = emitted(&weir_out(&[&args[..], &wide, &["--emit-sql"]].concat()));
    let by_sql: Value = serde_json::from_str(&weir_out(
        &[&["sql", d, &sql, "--json"][..], &wide].concat(),
    ))
    .unwrap();
    assert_eq!(by_sql, v);
    // A filter goes to the SQL, which gives the same windows.
    let mut cmd = weir();
    cmd.args(args)
        .args(["udp", "port", "1000", "--json", "--verbose"]);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("its SQL"), "{}", r.stderr());
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    let frames: Vec<i64> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["frames"].as_i64().unwrap())
        .collect();
    assert_eq!(frames, [1, 1, 0, 0, 0, 1, 0, 0, 0, 1]);
    let mut cmd = weir();
    cmd.args(args).arg("--verbose");
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert!(
        r.stderr().contains("one pass over the columns"),
        "{}",
        r.stderr()
    );
}

#[test]
fn the_rates_plot_draws_a_step_per_window_and_marks_drops() {
    let s = Scratch::new("rates-plot");
    let ds = dataset_of(&s, "gaps", &gappy_frames(20), &[]);
    // Frames dropped in second 6, where the records hold none.
    stats_with_drops(
        &ds,
        &(0..10).map(|k| T0 + k * S).collect::<Vec<_>>(),
        T0 + 6 * S,
    );
    let d = ds.to_str().unwrap();
    let svg = s.join("rates.svg");
    let mut cmd = weir();
    cmd.args([
        "analyze", d, "rates", "--every", "1s", "--sample", "100ms", "--plot",
    ])
    .arg(&svg);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let text = std::fs::read_to_string(&svg).unwrap();
    // Three series in each of two panels, each two points (a step) for
    // each of the 10 windows.
    let points: Vec<usize> = text
        .split("<polyline")
        .skip(1)
        .map(|p| {
            let at = p.find("points=\"").unwrap() + 8;
            p[at..p[at..].find('"').unwrap() + at]
                .split_whitespace()
                .count()
        })
        .collect();
    assert_eq!(points.iter().filter(|&&n| n == 20).count(), 6, "{points:?}");
    assert!(text.contains("frames dropped (stats)"), "no drop marks");
    // Without drops, no marks.
    std::fs::remove_dir_all(ds.join("stats")).unwrap();
    let mut cmd = weir();
    cmd.args([
        "analyze", d, "rates", "--every", "1s", "--sample", "100ms", "--plot",
    ])
    .arg(&svg);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(
        !std::fs::read_to_string(&svg)
            .unwrap()
            .contains("frames dropped")
    );
}

fn as_json(t: &analyze::Table) -> String {
    render(std::slice::from_ref(t), Format::Json).unwrap()
}

/// The passes against their SQL on one session.
fn check_passes(datasets: &[PathBuf], window: TimeWindow, what: &str) {
    let roots: Vec<_> = datasets
        .iter()
        .map(util::storage::Directory::root)
        .collect();
    let s = Session::open(&roots, window, None, 2).unwrap();
    for (every, sample) in [(S, 100 * MS), (10 * MS, MS), (60 * S, S)] {
        let want = analyses::rates_by_sql(&s, every, sample);
        match analyses::rates(&s, every, sample) {
            Ok((t, by)) => {
                assert_eq!(by, AnsweredBy::Pass, "{what}");
                let want = want.unwrap();
                assert_eq!(t.schema, want.schema, "{what}");
                assert_eq!(
                    as_json(&t),
                    as_json(&want),
                    "{what}: rates {every}/{sample}"
                );
            }
            // Too many windows for a long capture: refused both ways.
            Err(e) => assert_eq!(e.to_string(), want.err().unwrap().to_string(), "{what}"),
        }
    }
    for scales in [
        &[100_000, MS, 10 * MS, 100 * MS, S][..],
        &[MS, 3 * MS, 7 * MS],
    ] {
        let (b, by) = analyses::bursts(&s, scales).unwrap();
        assert_eq!(by, AnsweredBy::Pass, "{what}");
        assert_eq!(
            b,
            analyses::bursts_by_sql(&s, scales).unwrap(),
            "{what}: bursts {scales:?}"
        );
    }
    let (t, by) = analyses::loss(&s).unwrap();
    assert_eq!(by, AnsweredBy::Pass, "{what}");
    let want = analyses::loss_by_sql(&s).unwrap();
    assert_eq!(t.schema, want.schema, "{what}");
    assert_eq!(as_json(&t), as_json(&want), "{what}: loss");
}

#[test]
fn passes_give_their_sqls_answers() {
    let s = Scratch::new("passes-sql");
    // Silences, several row groups (small ones, so that some hold one
    // interval and some straddle), stats with drops and stack rows.
    let gaps = dataset_of(
        &s,
        "gaps",
        &gappy_frames(3000),
        &["--row-group-rows", "1000"],
    );
    stats_with_drops(
        &gaps,
        &(0..10).map(|k| T0 + k * S).collect::<Vec<_>>(),
        T0 + 5 * S,
    );
    // Generated traffic.
    let pcap = s.join("generated.pcap");
    weir_out(&["gen", "-w", pcap.to_str().unwrap(), "--count", "300000"]);
    let generated = convert(&pcap, &s.join("generated"), &["--row-group-rows", "65536"]);
    // tcpdump's captures: the largest that convert takes.
    let mut captures = tcpdump_captures();
    captures.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).map_or(0, |m| m.len())));
    let mut corpus = Vec::new();
    for p in captures {
        let ds = s.join(&format!("tcpdump-{}", corpus.len()));
        let mut cmd = weir();
        cmd.args(["convert", "-q"]).arg(&p).arg("-o").arg(&ds);
        if run_bounded(cmd, Duration::from_secs(120)).code() == 0
            && manifest(&ds)["time_span"].is_object()
        {
            corpus.push(ds);
        }
        if corpus.len() == 6 {
            break;
        }
    }
    assert_eq!(corpus.len(), 6);

    let mid = TimeWindow {
        from_ns: Some(T0 + 1_234 * MS),
        to_ns: Some(T0 + 9_456 * MS),
    };
    check_passes(std::slice::from_ref(&gaps), TimeWindow::default(), "gaps");
    check_passes(std::slice::from_ref(&gaps), mid, "gaps, window");
    check_passes(
        std::slice::from_ref(&generated),
        TimeWindow::default(),
        "gen",
    );
    let span = manifest(&generated)["time_span"].clone();
    let (a, b) = (
        span["first_ns"].as_i64().unwrap(),
        span["last_ns"].as_i64().unwrap(),
    );
    let third = TimeWindow {
        from_ns: Some(a + (b - a) / 3),
        to_ns: Some(a + 2 * (b - a) / 3),
    };
    check_passes(std::slice::from_ref(&generated), third, "gen, window");
    for ds in &corpus {
        check_passes(
            std::slice::from_ref(ds),
            TimeWindow::default(),
            &ds.display().to_string(),
        );
    }
    check_passes(&corpus[..3], TimeWindow::default(), "three captures as one");
}
