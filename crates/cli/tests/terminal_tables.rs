//! `weir analyze` for people and for programs: in a terminal (forced here
//! with --width) tables fit the width and analyses pick their intervals
//! from the data; --csv and a table into a pipe stay byte for byte what
//! they were before tables learned to fit (the references in
//! tests/golden/, written by the code before that change from the dataset
//! this test makes; `WEIR_BLESS=1` rewrites them).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use wire::LinkType;
use wire::build::{FrameSpec, IpSpec, Payload, TransportSpec};

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000_000_000;
const US: i64 = 1_000;

/// A fixed pseudo-random sequence (an LCG), so the dataset is the same on
/// every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

/// About 4 s of traffic: 40 IPv4 flows (TCP and UDP, one much larger
/// than the rest) and 4 IPv6 ones, one frame every 0.5-1.5 ms, with a
/// silent 300 ms in the middle.
fn frames() -> Vec<(i64, Vec<u8>)> {
    let mut rng = Lcg(56);
    let mut out = Vec::new();
    let mut t = T0 + 123_456 * US;
    while t < T0 + 4_100_000 * US {
        let k = rng.next(60);
        let flow = if k >= 44 { 0 } else { k };
        let v6 = flow >= 40;
        let ip = if v6 {
            let mut src = [0u8; 16];
            src[..2].copy_from_slice(&[0x20, 0x01]);
            src[15] = 1;
            let mut dst = src;
            dst[15] = 2 + flow as u8;
            IpSpec::V6 {
                src,
                dst,
                hop_limit: 64,
                dscp: 0,
                flow_label: 0,
            }
        } else {
            IpSpec::V4 {
                src: [192, 168, 10, 1 + (flow % 7) as u8],
                dst: [10, 20, 30, 100 + flow as u8],
                ttl: 64,
                id: 1,
                dscp: 0,
                frag: 0,
            }
        };
        let sport = 40_000 + flow as u16;
        let transport = if flow % 3 == 0 {
            TransportSpec::Tcp {
                sport,
                dport: 443,
                seq: (t / US) as u32,
                ack: 1,
                flags: 0x18,
                window: 1000,
            }
        } else {
            TransportSpec::Udp {
                sport,
                dport: 5000 + (flow % 4) as u16,
            }
        };
        let spec = FrameSpec {
            eth_src: [2, 0, 0, 0, 0, 1],
            eth_dst: [2, 0, 0, 0, 0, 2],
            vlan: None,
            ip,
            transport,
            payload: Payload::Zeros(if flow == 0 {
                1200
            } else {
                rng.next(400) as usize
            }),
        };
        let mut bytes = Vec::new();
        spec.build(&mut bytes);
        out.push((t, bytes));
        t += 500 * US + rng.next(1000) as i64 * US;
        if (T0 + 2_000_000 * US..T0 + 2_300_000 * US).contains(&t) {
            t = T0 + 2_300_000 * US;
        }
    }
    out
}

fn dataset(s: &Scratch) -> PathBuf {
    let pcap = s.join("tables.pcap");
    {
        let file = std::fs::File::create(&pcap).unwrap();
        let mut w =
            pcapio::PcapWriter::new(std::io::BufWriter::new(file), LinkType::ETHERNET, 65535)
                .unwrap();
        for (ts, b) in frames() {
            w.write_frame(ts, b.len() as u32, &b).unwrap();
        }
        w.into_inner().unwrap();
    }
    let ds = s.join("tables");
    let mut cmd = weir();
    cmd.args(["convert", "-q", "-j", "1"])
        .arg(&pcap)
        .arg("-o")
        .arg(&ds);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    ds
}

fn analyze(ds: &Path, args: &[&str]) -> (String, String) {
    let mut cmd = weir();
    cmd.arg("analyze").arg(ds).args(args);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "weir analyze {args:?}: {}", r.stderr());
    (r.stdout(), r.stderr())
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The analyses whose CSV and piped tables must not change, and the name
/// of their reference. Rates and bursts name their intervals: their
/// defaults follow the data now.
const UNCHANGED: &[(&str, &[&str])] = &[
    ("summary", &["summary"]),
    ("flows", &["flows"]),
    ("top-hosts", &["top", "hosts"]),
    ("top-ports", &["top", "ports", "--by", "frames"]),
    ("top-pairs", &["top", "pairs"]),
    ("rates", &["rates", "--every", "1s", "--sample", "100ms"]),
    ("bursts", &["bursts", "--scales", "1ms,10ms,100ms,1s"]),
    ("loss", &["loss"]),
];

#[test]
fn csv_and_piped_tables_are_unchanged() {
    let s = Scratch::new("tables-golden");
    let ds = dataset(&s);
    let bless = std::env::var_os("WEIR_BLESS").is_some();
    for (name, args) in UNCHANGED {
        for (suffix, extra) in [("csv", &["--csv"][..]), ("txt", &[][..])] {
            let mut all: Vec<&str> = args.to_vec();
            all.extend_from_slice(extra);
            let (out, _) = analyze(&ds, &all);
            let path = golden_dir().join(format!("{name}.{suffix}"));
            if bless {
                std::fs::create_dir_all(golden_dir()).unwrap();
                std::fs::write(&path, &out).unwrap();
                continue;
            }
            let want = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(
                out,
                want,
                "weir analyze {all:?} differs from {}",
                path.display()
            );
        }
    }
}

/// The analyses a terminal shows, each at most 40 lines by default.
const ANALYSES: &[&[&str]] = &[
    &["summary"],
    &["flows"],
    &["top", "hosts"],
    &["top", "ports"],
    &["top", "pairs"],
    &["rates"],
    &["bursts"],
    &["loss"],
];

#[test]
fn terminal_tables_fit_80_and_200_columns() {
    let s = Scratch::new("tables-width");
    let ds = dataset(&s);
    let mut widths = Vec::new();
    for width in ["80", "200"] {
        let w: usize = width.parse().unwrap();
        for args in ANALYSES {
            let mut all = args.to_vec();
            all.extend(["--width", width]);
            let (out, _) = analyze(&ds, &all);
            let lines: Vec<&str> = out.lines().collect();
            assert!(lines.len() <= 40, "{all:?}: {} lines\n{out}", lines.len());
            let widest = lines.iter().map(|l| l.chars().count()).max().unwrap();
            assert!(widest <= w, "{all:?}: a line of {widest}\n{out}");
            widths.push((args.join(" "), width, widest));
        }
    }
    // At 200 columns flows shows more of its columns than at 80.
    let widest = |a: &str, w: &str| widths.iter().find(|x| x.0 == a && x.1 == w).unwrap().2;
    assert!(
        widest("flows", "200") > widest("flows", "80") + 40,
        "{widths:?}"
    );

    // A flow reads a:p → b:q, bytes and durations carry their units, times
    // count from the first frame (2026-01-01 00:00:00.123456Z).
    let (flows, _) = analyze(&ds, &["flows", "--width", "200"]);
    assert!(
        flows.contains("192.168.10.1:40000 → 10.20.30.100:443"),
        "{flows}"
    );
    assert!(
        flows.starts_with("times: seconds after the first frame, 2026-01-01 00:00:00.123456000Z\n"),
        "{flows}"
    );
    assert!(
        flows.contains(" +0.0") && flows.contains(" kB") && flows.contains(" tcp "),
        "{flows}"
    );
    assert!(!flows.contains("1767225600"), "{flows}");
    let (v6, _) = analyze(&ds, &["flows", "ip6", "--width", "80"]);
    assert!(v6.contains("[2001::1]:400"), "{v6}");
    // A long table shows its first and last rows and says what it left out.
    let (every, _) = analyze(&ds, &["flows", "--limit", "0", "--width", "80"]);
    assert!(
        every.contains("more rows (--wide, --csv or --json print every row)"),
        "{every}"
    );
    // Rates and bursts say which intervals they chose, above the table,
    // with units on the rates.
    let (rates, _) = analyze(&ds, &["rates", "--width", "80"]);
    assert!(
        rates.starts_with("windows of 20 ms, samples of 2 ms, over "),
        "{rates}"
    );
    assert!(rates.contains("fr/s") && rates.contains("b/s"), "{rates}");
    let (bursts, _) = analyze(&ds, &["bursts", "--width", "80"]);
    assert!(bursts.starts_with("intervals of 100 ms over "), "{bursts}");
    // --wide: every column and row, as into a pipe.
    let (wide, _) = analyze(&ds, &["flows", "--width", "80", "--wide"]);
    let (piped, _) = analyze(&ds, &["flows"]);
    assert_eq!(wide, piped);
    assert!(wide.lines().next().unwrap().len() > 200);
}

#[test]
fn defaults_are_chosen_from_the_span_for_csv_too() {
    let s = Scratch::new("tables-defaults");
    let ds = dataset(&s);
    // The chosen window, as CSV: one row per 20 ms, none of the line above
    // the table.
    let (csv, _) = analyze(&ds, &["rates", "--csv"]);
    let rows: Vec<&str> = csv.lines().collect();
    assert!(rows[0].starts_with("start_ns,samples,"), "{csv}");
    assert!(
        (80..=201).contains(&(rows.len() - 1)),
        "{} rows",
        rows.len() - 1
    );
    let start = |r: &str| r.split(',').next().unwrap().parse::<i64>().unwrap();
    assert_eq!(start(rows[2]) - start(rows[1]), 20_000_000);
    // --every alone keeps the one-second sample of whole seconds.
    let (csv, _) = analyze(&ds, &["rates", "--every", "2s", "--csv"]);
    assert!(
        csv.lines().nth(1).unwrap().split(',').nth(1) == Some("2"),
        "{csv}"
    );
}
