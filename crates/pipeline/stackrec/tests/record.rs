//! `stackrec::record` through its public API: the options it refuses
//! before it loads anything, the earlier recording it keeps unless told,
//! and recordings that see nothing (filtered to port 1, which no socket
//! here uses, and told to stop at once): what they write, report and put
//! in the manifest. Those load the eBPF programs, so they run as root, as
//! the test command runs them; no traffic is needed.

use std::path::Path;

use std::sync::atomic::AtomicBool;
use std::time::Duration;
use testdata::Scratch;

use stackrec::{Level, StackOptions, record};
use store::Dataset;
use store::manifest::Manifest;
use store::stats::StackCounts;

/// The error `record` gives for `opts` (told to stop at once, should it
/// start all the same).
fn refused(root: &Path, opts: &StackOptions) -> String {
    let stop = AtomicBool::new(true);
    match record(root, opts, &stop, |_| {}, |_| {}) {
        Ok(r) => panic!("recorded: {r:?}"),
        Err(e) => e.to_string(),
    }
}

/// Options of a recording that sees nothing: the interval level, port 1.
/// Whether the kernel refused the socket walk's program (and loaded the
/// others): nothing of the default level can run there; said on stderr.
fn walk_refused(e: &impl std::fmt::Display) -> bool {
    let refused = e.to_string().contains(stack::WALK_REFUSED);
    if refused {
        eprintln!("skipped: {e}");
    }
    refused
}

fn quiet() -> StackOptions {
    StackOptions {
        ports: vec![1],
        ..Default::default()
    }
}

fn must_be_root() {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "loading the eBPF programs needs root: run the tests as root (scripts/test.sh does)"
    );
}

/// Options that cannot work are refused before the programs are loaded
/// or the dataset is made: an interval out of range, and a process filter
/// at the walk level, which has no per-packet program to match sockets
/// to processes.
#[test]
fn options_that_cannot_work_are_refused_before_anything_is_made() {
    let s = Scratch::new("stackrec-refused");
    let root = s.join("ds");
    for interval in [Duration::from_millis(5), Duration::from_secs(7200)] {
        let opts = StackOptions {
            interval,
            ..quiet()
        };
        let e = refused(&root, &opts);
        assert!(e.contains("--interval: give 10ms to 1h"), "{e}");
    }
    for (pid, comm) in [(Some(1), None), (None, Some("sshd".to_string()))] {
        let opts = StackOptions {
            pid,
            comm,
            level: Level::Walk,
            ..quiet()
        };
        let e = refused(&root, &opts);
        assert!(
            e.contains("--pid and --comm need the per-packet programs"),
            "{e}"
        );
        assert!(e.contains("add --with-device"), "{e}");
    }
    assert!(!root.exists(), "nothing was made");
}

/// A recording into a new directory that sees nothing: it ends by the
/// signal it was given, counts no event and no loss, writes no stack or
/// stack_intervals rows but a stats row for its second (one that says
/// nothing happened), and the manifest's stack section says how it was
/// set up and how it ended.
#[test]
fn a_recording_that_sees_nothing_still_says_what_it_was() {
    must_be_root();
    let s = Scratch::new("stackrec-quiet");
    let root = s.join("ds");
    let stop = AtomicBool::new(true);
    let mut ready = false;
    let report = match record(&root, &quiet(), &stop, |_| ready = true, |_| {}) {
        Err(e) if walk_refused(&e) => return,
        r => r.unwrap(),
    };
    assert!(ready, "told when the programs were attached");
    assert_eq!(report.ended_by, "signal");
    assert_eq!(
        (report.total_events(), report.total_lost()),
        (0, 0),
        "{report:?}"
    );
    assert_eq!(report.malformed, 0);
    assert!(
        report.files.is_empty() && report.interval_files.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.stats_files.len(), 1, "{report:?}");
    let rows = store::stats::read_stats_file(&root.join(&report.stats_files[0])).unwrap();
    let counts: Vec<Option<StackCounts>> = rows.iter().map(|r| r.stack).collect();
    assert_eq!(counts, [Some(StackCounts::default())]);

    let m = Dataset::open(&root).unwrap().read_manifest().unwrap();
    assert_eq!(m.kind, "stack");
    let st = m.stack.expect("a stack section");
    assert_eq!(st.ended_by, "signal");
    assert_eq!(
        (st.mode.as_str(), st.level.as_deref()),
        ("intervals", Some("walk"))
    );
    assert_eq!((st.interval_s, st.sockets), (Some(0.1), Some(65_536)));
    assert_eq!(st.ports, [1]);
    assert!(
        !st.devices && !st.device_acks,
        "the walk level records no device events"
    );
    let names: Vec<&str> = st.events.keys().map(String::as_str).collect();
    let mut want: Vec<&str> = store::stack::EVENT_NAMES.to_vec();
    want.sort_unstable();
    assert_eq!(names, want);
    assert!(
        st.events.values().chain(st.lost.values()).all(|&n| n == 0),
        "{st:?}"
    );
    assert_eq!(st.files, Vec::<String>::new());
}

/// A dataset that already holds a stack recording (a capture's, with a
/// stack table beside it) is refused, untouched, unless forced; forced,
/// the earlier recording's files go (the capture's own stay) and the new
/// recording's section is written into the capture's manifest.
#[test]
fn an_earlier_recording_is_replaced_only_when_forced() {
    must_be_root();
    let s = Scratch::new("stackrec-replace");
    let root = s.join("ds");
    let ds = Dataset::create(&root, false).unwrap();
    let order = store::PacketWriterOptions::default().order;
    ds.write_manifest(&Manifest::new("capture", "kernel", order))
        .unwrap();
    let planted = [
        "stack/s00042.parquet",
        "stack_intervals/i00042.parquet",
        "stats/stack-00042.parquet",
        "stats/w000-00042.parquet",
    ];
    for p in planted {
        let path = root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "earlier").unwrap();
    }

    let e = refused(&root, &quiet());
    assert!(e.starts_with(&root.display().to_string()), "{e}");
    assert!(
        e.contains("already holds a stack recording; pass --force"),
        "{e}"
    );
    assert!(planted.iter().all(|p| root.join(p).is_file()), "untouched");

    let forced = StackOptions {
        force: true,
        ..quiet()
    };
    let report = match record(&root, &forced, &AtomicBool::new(true), |_| {}, |_| {}) {
        Err(e) if walk_refused(&e) => return,
        r => r.unwrap(),
    };
    assert_eq!(report.ended_by, "signal");
    let (earlier, capture) = planted.split_at(3);
    assert!(earlier.iter().all(|p| !root.join(p).exists()), "removed");
    assert!(
        root.join(capture[0]).is_file(),
        "the capture's stats file stays"
    );
    let m = Dataset::open(&root).unwrap().read_manifest().unwrap();
    assert_eq!(m.kind, "capture");
    assert_eq!(m.stack.map(|st| st.ended_by).as_deref(), Some("signal"));
}
