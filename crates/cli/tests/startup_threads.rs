//! A capture whose start-up fails after it has started threads stops them
//! all before it returns its error. Measured in-process, by the threads
//! of this process (/proc/self/task) before and after: hence one test in a
//! binary of its own, its steps one after another.

mod common;

use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use capture::{Interface, RingOptions};
use common::Scratch;
use common::kafka::{Broker, PORT};
use common::netns::{IFACE, VethPair};
use ingest::WorkerOptions;
use ingest::capture_run::{CaptureOptions, CaptureScope, PcapKeeping, PcapPolicy, Target, capture};
use ingest::live::{self, LiveOptions, PcapOut};
use pcapio::seekable::Codec;
use pcapio::spool::OnFull;
use stream::producer::{KafkaStream, ProducerOptions};

/// The names of this process's threads.
fn threads() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .map(|t| {
            std::fs::read_to_string(t.path().join("comm"))
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .collect();
    names.sort();
    names
}

/// Runs `f` with this thread on one CPU at real-time priority, and the
/// threads it starts on that CPU too (they inherit both): they then run
/// only while `f` waits (sleeps in the kernel).
/// A thread that `f` told to stop but did not wait for has had no chance
/// to end when `f` returns, so the count after `f` sees it.
fn alone_on_one_cpu<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: plain scheduler calls on this thread (0) with valid arguments.
    unsafe {
        let mut all: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, size_of_val(&all), &mut all), 0);
        let cpu = (0..libc::CPU_SETSIZE as usize)
            .find(|&c| libc::CPU_ISSET(c, &all))
            .unwrap();
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        assert_eq!(libc::sched_setaffinity(0, size_of_val(&one), &one), 0);
        let rt = libc::sched_param { sched_priority: 1 };
        assert_eq!(
            libc::sched_setscheduler(0, libc::SCHED_FIFO, &rt),
            0,
            "SCHED_FIFO: {}",
            std::io::Error::last_os_error()
        );
        let out = f();
        let normal = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_OTHER, &normal);
        libc::sched_setaffinity(0, size_of_val(&all), &all);
        out
    }
}

fn ip(ns: &str, args: &[&str]) {
    let out = Command::new("ip")
        .args(["-n", ns])
        .args(args)
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every frame, no end but the test's: both captures' scope.
fn scope() -> CaptureScope {
    CaptureScope {
        snaplen: 65535,
        filter: None,
        shard: None,
        fanout: capture::FanoutBy::Flow,
        promiscuous: true,
        count: None,
        duration: None,
    }
}

/// Pcap files as they are written, kept.
fn keeping() -> PcapKeeping {
    PcapKeeping {
        codec: Codec::None,
        direct: false,
        max_disk: None,
        max_age: None,
    }
}

#[test]
fn a_capture_that_fails_to_start_leaves_no_thread_behind() {
    // The test runs again as a child inside namespace b (`ip netns exec`
    // also gives it that namespace's /sys, which finds interfaces by
    // name); this one makes the namespaces and removes them.
    if let Ok(ns) = std::env::var("WEIR_STARTUP_NETNS") {
        return in_namespace(&ns);
    }
    let net = VethPair::new("startup");
    let mut child = VethPair::exec(&net.b, &std::env::current_exe().unwrap().to_string_lossy());
    child
        .args([
            "--exact",
            "a_capture_that_fails_to_start_leaves_no_thread_behind",
        ])
        .args(["--nocapture", "--test-threads", "1"])
        .env("WEIR_STARTUP_NETNS", &net.b);
    let r = common::run_bounded(child, Duration::from_secs(120));
    assert!(
        r.code() == 0 && r.stdout().contains("1 passed"),
        "{}\n{}",
        r.stdout(),
        r.stderr()
    );
}

fn in_namespace(ns: &str) {
    let s = Scratch::new("startup-threads");
    // A second interface, removed once its rings are open: its first ring
    // then fails to start, after every worker's pcap writer (and staging
    // thread) is running and the first interface's rings are live.
    ip(
        ns,
        &[
            "link", "add", "gone0", "type", "veth", "peer", "name", "gone1",
        ],
    );
    ip(ns, &["link", "set", "gone0", "up"]);

    let before = threads();
    let dir = s.join("ds");
    let opts = LiveOptions {
        interfaces: vec![
            Interface::by_name(IFACE).unwrap(),
            Interface::by_name("gone0").unwrap(),
        ],
        workers_per_iface: 2,
        ring: RingOptions::with_total(4 << 20, 1 << 20),
        scope: scope(),
        pcap: Some(PcapOut {
            dir: dir.join(store::dataset::PCAP_DIR),
            single_name: None,
            rotate_bytes: None,
            rotate: Some(Duration::from_secs(10)),
            // Beyond what is written up front, so each spool also has a
            // thread growing its staging.
            staging_bytes: pcapio::spool::READY_STAGING_BYTES + (8 << 20),
            records_lag: None,
            keep: keeping(),
        }),
        records: true,
        on_full: OnFull::Stop,
        worker: WorkerOptions {
            file_every: Some(Duration::from_secs(10)),
            ..Default::default()
        },
        taps: None,
        command: "startup_threads".into(),
        keeps_privileges: false,
    };
    let opened = live::open(opts).expect("open the rings");
    let ds = store::Dataset::create_with_manifest(&dir, false, &opened.manifest()).unwrap();
    ds.subdir(store::dataset::PCAP_DIR).unwrap();
    ip(ns, &["link", "del", "gone0"]);
    let stop = AtomicBool::new(false);
    let (result, after) = alone_on_one_cpu(|| {
        let r = opened.run(Some(&ds), &stop, || {}, |_| {});
        (r, threads())
    });
    let err = match result {
        Ok(_) => panic!("the capture started on an interface that is gone"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("gone0"), "{err}");
    assert_eq!(
        after, before,
        "threads left behind by a capture that failed to start ({err})"
    );

    // A broker that does not answer: the Kafka client's threads go with
    // the error.
    let before = threads();
    let (result, after) = alone_on_one_cpu(|| {
        let opts = ProducerOptions::new("127.0.0.1:1", "weir");
        (KafkaStream::start(opts, 1).map(|_| ()), threads())
    });
    let err = result.expect_err("a stream started without a broker");
    assert_eq!(
        after, before,
        "threads left behind by a stream that failed to start ({err})"
    );

    // A stream running (its thread and librdkafka's) when the capture
    // fails to make its dataset: the stream stops with the capture.
    std::fs::create_dir_all(s.join("broker")).unwrap();
    let broker = Broker::start(ns, &s.join("broker"));
    let before = threads();
    let (result, after) = alone_on_one_cpu(|| {
        let opts = ProducerOptions::new(&format!("127.0.0.1:{PORT}"), "weir");
        let stream = KafkaStream::start(opts, 2).expect("start the stream");
        let file = s.join("a-file");
        std::fs::write(&file, b"").unwrap();
        let opts = CaptureOptions {
            interfaces: vec![IFACE.into()],
            target: Target::Dataset {
                dir: file.join("ds"),
                force: false,
                pcap: true,
                records: true,
            },
            workers: Some(1),
            ring_bytes: Some(4 << 20),
            ring_block: 1 << 20,
            scope: scope(),
            pcap: PcapPolicy {
                rotate_size: None,
                rotate_time: None,
                staging_bytes: Some(8 << 20),
                records_lag: None,
                on_full: OnFull::Stop,
                keep: keeping(),
            },
            records_every: Duration::from_secs(10),
            rpc: Default::default(),
            app: Default::default(),
            user: None,
            sign_key: None,
            publisher: None,
            publish_wait: Duration::ZERO,
            command: "startup_threads".into(),
        };
        let stop = AtomicBool::new(false);
        let r = capture(opts, Some(Box::new(stream)), &stop, |_| {});
        (r.map(|_| ()), threads())
    });
    let err = result.expect_err("a capture into a path under a file");
    assert!(err.contains("a-file"), "{err}");
    assert_eq!(
        after, before,
        "threads left behind by a capture that failed to start ({err})"
    );
    drop(broker);
}
