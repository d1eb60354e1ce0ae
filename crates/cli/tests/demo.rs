//! scripts/demo.sh itself, small: 3 s of capture at 20,000 frames/s
//! between two network namespaces it makes and removes, with this build
//! of weir. Every line it prints fits an 80-column terminal, every
//! analysis it shows is at most 40 lines, it draws its three plots and
//! ends by saying how to browse the dataset and open the pcap.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;

#[test]
fn demo_fits_an_80_column_terminal_and_draws_its_plots() {
    assert!(
        unsafe { libc::geteuid() } == 0,
        "the demo needs root (it makes network namespaces); run scripts/test.sh as root"
    );
    let s = Scratch::new("demo");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/demo.sh");
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(&script)
        .arg("3")
        .env("WEIR_DEMO_BIN", env!("CARGO_BIN_EXE_weir"))
        .env("WEIR_DEMO_DIR", &s.0)
        .env("WEIR_DEMO_RATE", "20000")
        .env("WEIR_DEMO_NS", format!("wdemo{}", std::process::id()));
    let r = run_bounded(cmd, Duration::from_secs(120));
    let all = format!("{}{}", r.stdout(), r.stderr());
    assert_eq!(r.code(), 0, "{all}");
    let long: Vec<&str> = all.lines().filter(|l| l.chars().count() > 80).collect();
    assert!(
        long.is_empty(),
        "lines over 80 columns:\n{}",
        long.join("\n")
    );
    // Every analysis of the demo's dataset, as a terminal shows it by
    // default: at most 40 lines, none over 80 columns.
    let ds = s.join("dataset");
    for analysis in [
        &["summary"][..],
        &["flows"],
        &["rates"],
        &["bursts"],
        &["top", "hosts"],
        &["top", "ports"],
        &["top", "pairs"],
        &["loss"],
    ] {
        let mut cmd = weir();
        cmd.arg("analyze")
            .arg(&ds)
            .args(analysis)
            .args(["--width", "80"]);
        let r = run_bounded(cmd, Duration::from_secs(60));
        assert_eq!(r.code(), 0, "{analysis:?}: {}", r.stderr());
        let text = r.stdout();
        assert!(text.lines().count() <= 40, "{analysis:?}:\n{text}");
        assert!(
            text.lines().all(|l| l.chars().count() <= 80),
            "{analysis:?}:\n{text}"
        );
    }
    let out = r.stdout();
    for plot in ["rates.png", "bursts.png", "loss.png"] {
        let p = s.join(plot);
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{plot}");
        assert!(
            out.contains(p.to_str().unwrap()),
            "{plot} not named:\n{out}"
        );
    }
    let tail: Vec<&str> = out.lines().rev().take(2).collect();
    assert!(
        tail[1].contains("weir serve ") && tail[0].contains("wireshark "),
        "{tail:?}"
    );
    assert!(s.join("one-flow.pcap").exists());
}
