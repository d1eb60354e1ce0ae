//! Capture -> Kafka -> collectors, against a real broker: Apache Kafka in
//! KRaft mode, one node, started from the release jars (scripts/lib.sh
//! fetches them; WEIR_KAFKA_JARS) inside the test's own network namespace,
//! on its loopback. Two collectors in one group write the partitions into
//! two datasets; one is killed with SIGKILL mid-stream and started again on
//! its dataset. The two datasets together hold exactly the records of the
//! capture's own dataset: none lost, none twice. A second test stops the
//! broker mid-stream: the capture (as a user holding only CAP_NET_RAW,
//! which no thread keeps once the rings are open, librdkafka's included)
//! loses nothing of its own, and every record the stream lost is counted
//! in the manifest.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::background::Background;
use common::kafka::{Broker, PORT, kafka_jars, topic_log_bytes};
use common::live::{assert_no_thread_holds_capabilities, capture, capture_with_net_raw_only, send};
use common::netns::VethPair;
use common::*;
use wire::PacketRecord;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

fn collector(ns: &str, out: &Path) -> Background {
    let mut cmd = VethPair::exec(ns, WEIR);
    cmd.args(["collect", "--kafka", &format!("127.0.0.1:{PORT}")])
        .args([
            "--topic",
            "weir",
            "--group",
            "g",
            "--flush-every",
            "300ms",
            "-o",
        ])
        .arg(out);
    Background::start(cmd, "collecting topic", Duration::from_secs(30))
}

/// A collector of group `group` run until the topic is quiet for 5 s.
fn collect_all(ns: &str, group: &str, out: &Path) -> serde_json::Value {
    let mut cmd = VethPair::exec(ns, WEIR);
    cmd.args(["collect", "--kafka", &format!("127.0.0.1:{PORT}")])
        .args(["--topic", "weir", "--group", group, "--idle", "5s", "-q"])
        .args(["--session-timeout", "6s", "-o"])
        .arg(out);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "collector: {}", r.stderr());
    manifest(out)
}

/// Records in a stable order, for comparing multisets.
fn sorted(mut v: Vec<PacketRecord>) -> Vec<PacketRecord> {
    v.sort_by_key(|r| {
        (
            r.ts_ns,
            r.worker,
            r.pcap_offset,
            r.wire_len,
            r.flow_hash,
            r.ip_id,
        )
    });
    v
}

fn records_written(ds: &Path) -> u64 {
    std::fs::read_to_string(ds.join("manifest.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|m| m["counts"]["frames"].as_u64())
        .unwrap_or(0)
}

#[test]
fn capture_to_kafka_to_two_collectors_loses_and_doubles_nothing_across_a_kill() {
    let net = VethPair::new("kafka");
    let s = Scratch::new("kafka");
    let broker = Broker::start(&net.b, &s.0);
    let direct = s.join("direct");
    let cap = capture(
        &net.b,
        &[
            "-o",
            direct.to_str().unwrap(),
            "-j",
            "2",
            "--duration",
            "60s",
            "--kafka",
            &format!("127.0.0.1:{PORT}"),
            "--topic",
            "weir",
        ],
    );
    let (c1, c2) = (s.join("c1"), s.join("c2"));
    let first = collector(&net.b, &c1);
    let second = collector(&net.b, &c2);
    // Let the group settle on two members before traffic starts.
    std::thread::sleep(Duration::from_secs(3));

    // Traffic in three parts; the first collector is killed after the
    // first and started again after the second.
    let part = [
        "--count", "6000", "--rate", "20000", "--size", "200", "--flows", "64",
    ];
    send(&net.a, &part);
    std::thread::sleep(Duration::from_millis(700));
    first.signal(libc::SIGKILL);
    let killed = first.wait(Duration::from_secs(30));
    assert!(
        killed.output.status.code().is_none(),
        "the collector was not killed"
    );
    send(&net.a, &part);
    let first = collector(&net.b, &c1);
    // The last part through a VXLAN tunnel: the batches carry the tunnel
    // fields (version 2), so the collected records equal the direct ones.
    let tunnelled = [&part[..], &["--encap", "vxlan:77"]].concat();
    send(&net.a, &tunnelled);
    std::thread::sleep(Duration::from_millis(500));
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(60));
    assert_eq!(r.code(), 0, "capture: {}", r.stderr());

    let want = sorted(records(&direct));
    assert!(want.len() >= 18_000, "{} records", want.len());
    let vxlan = want
        .iter()
        .filter(|r| r.tunnel.kind == wire::Tunnel::Vxlan && r.tunnel.id == 77)
        .count();
    assert!(vxlan >= 6_000, "{vxlan} records of tunnelled frames");
    let m = manifest(&direct);
    let k = &m["kafka"];
    assert_eq!(k["role"], "producer");
    assert_eq!(k["partitions"], 4);
    assert_eq!(k["records_dropped"], 0, "{k}");
    assert_eq!(k["records_failed"], 0, "{k}");
    assert_eq!(k["stats_dropped"], 0, "{k}");
    assert_eq!(k["records"].as_u64().unwrap() as usize, want.len());
    assert_eq!(
        k["records_delivered"].as_u64().unwrap() as usize,
        want.len()
    );

    // The capture's per-second stats rows, in a dataset's stats files.
    let stats_rows = |ds: &Path| {
        let mut rows = Vec::new();
        let Ok(text) = std::fs::read_to_string(ds.join("manifest.json")) else {
            return rows;
        };
        let m: serde_json::Value = serde_json::from_str(&text).unwrap();
        for f in m["files"]["stats"].as_array().into_iter().flatten() {
            rows.extend(store::stats::read_stats_file(&ds.join(f.as_str().unwrap())).unwrap());
        }
        rows
    };
    let mut want_stats = stats_rows(&direct);

    // Wait until the collectors have written everything, records and
    // stats rows (the last seconds' rows may come after the records), or
    // a limit.
    let deadline = Instant::now() + Duration::from_secs(90);
    while (records_written(&c1) + records_written(&c2) < want.len() as u64
        || stats_rows(&c1).len() + stats_rows(&c2).len() < want_stats.len())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(300));
    }
    for c in [first, second] {
        c.signal(libc::SIGINT);
        let r = c.wait(Duration::from_secs(60));
        assert_eq!(r.code(), 0, "collector: {}", r.stderr());
    }

    // Idempotence: one collector reads the whole topic; the group's
    // offsets are then set back to the start (Kafka's own tool) and the
    // collector runs again on its dataset: every batch is read again and
    // skipped, nothing is written twice.
    let c3 = s.join("c3");
    let once = collect_all(&net.b, "g3", &c3);
    assert_eq!(
        once["counts"]["frames"].as_u64().unwrap() as usize,
        want.len()
    );
    // (The collector was a static member: the group is empty once its
    // session times out, and only an empty group's offsets can be reset.)
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut reset = VethPair::exec(&net.b, "java");
        reset
            .args(["-cp", &format!("{}/*", kafka_jars().display())])
            .arg("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand")
            .args(["--bootstrap-server", &format!("127.0.0.1:{PORT}")])
            .args([
                "--group",
                "g3",
                "--reset-offsets",
                "--to-earliest",
                "--all-topics",
            ])
            .arg("--execute");
        let r = run_bounded(reset, Duration::from_secs(120));
        let said = format!("{}{}", r.stdout(), r.stderr());
        if r.code() == 0 && !said.contains("inactive") {
            break;
        }
        assert!(Instant::now() < deadline, "resetting the offsets: {said}");
        std::thread::sleep(Duration::from_secs(2));
    }
    let again = collect_all(&net.b, "g3", &c3);
    assert_eq!(again["counts"]["frames"], once["counts"]["frames"]);
    assert_eq!(
        again["kafka"]["duplicates_skipped"].as_u64().unwrap() as usize,
        want.len(),
        "{}",
        again["kafka"]
    );
    assert!(sorted(records(&c3)) == want);
    drop(broker);

    let (r1, r2) = (records(&c1), records(&c2));
    let got = sorted([r1.clone(), r2.clone()].concat());
    assert_eq!(
        got.len(),
        want.len(),
        "collected {} + {} records, captured {}",
        r1.len(),
        r2.len(),
        want.len()
    );
    assert!(
        got == want,
        "the collected records differ from the captured ones"
    );
    for c in [&c1, &c2] {
        let k = &manifest(c)["kafka"];
        eprintln!(
            "{}: {} records written, {} skipped as already written",
            c.display(),
            k["records"],
            k["duplicates_skipped"]
        );
    }
    // The capture's per-second stats rows came along too, once each.
    let key = |r: &store::stats::StatsRow| (r.ts_ns, r.worker, r.iface);
    let mut got_stats = [stats_rows(&c1), stats_rows(&c2)].concat();
    want_stats.sort_by_key(key);
    got_stats.sort_by_key(key);
    assert!(!want_stats.is_empty());
    assert!(
        got_stats == want_stats,
        "{} stats rows collected, {} written",
        got_stats.len(),
        want_stats.len()
    );
    let m1 = manifest(&c1);
    assert_eq!(m1["kind"], "collect");
    assert_eq!(m1["kafka"]["role"], "collector");
    // Each collector's dataset, one of them taken up again after a kill,
    // verifies, and its chain names the topic it read.
    for c in [&direct, &c1, &c2] {
        assert_verifies(c);
    }
    assert_eq!(m1["integrity"]["inputs"][0]["by"], "collect");
}

/// The broker is killed mid-stream while traffic goes on. The capture's own
/// dataset loses nothing; the stream's losses are in the manifest: batches
/// that found the workers' queue full (librdkafka's buffer, 1 MiB here,
/// full with what the dead broker never took), when the records keep pace
/// with the traffic, and batches purged from that buffer at the end. Every record the workers handed to the stream is
/// accounted for, and the capture ends within librdkafka's flush time.
#[test]
fn a_broker_stopped_mid_stream_costs_counted_records_and_no_frames() {
    let net = VethPair::new("kafkastop");
    let s = Scratch::new("kafka-stop");
    // The capture runs as a user holding only CAP_NET_RAW: no thread
    // keeps it once the rings are open, librdkafka's included.
    std::fs::set_permissions(&s.0, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let mut broker = Broker::start(&net.b, &s.0);
    let ds = s.join("ds");
    let cap = capture_with_net_raw_only(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "2",
            "--duration",
            "300s",
            "--kafka",
            &format!("127.0.0.1:{PORT}"),
            "--topic",
            "weir",
            "--kafka-buffer",
            "1Mi",
        ],
    );
    send(
        &net.a,
        &[
            "--count", "5000", "--rate", "10000", "--size", "200", "--flows", "64",
        ],
    );
    let threads = assert_no_thread_holds_capabilities(cap.pid());
    assert!(
        threads.iter().any(|t| t.starts_with("rdk:")),
        "librdkafka's threads are among those checked: {threads:?}"
    );
    // The broker has taken records before it goes.
    let deadline = Instant::now() + Duration::from_secs(60);
    while topic_log_bytes(&s.0, "weir") == 0 {
        assert!(
            Instant::now() < deadline,
            "no records reached the broker in 60 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The broker acknowledges what it wrote a moment after writing it: a
    // kill at once could leave the capture with nothing delivered.
    std::thread::sleep(Duration::from_secs(2));
    broker.kill();
    // 20 s of traffic: librdkafka's buffer fills within a few seconds, then
    // the workers' queue (256 batches, 40 a second from 2 workers and 4
    // partitions), and the rest is dropped at the queue.
    send(
        &net.a,
        &[
            "--count", "200000", "--rate", "10000", "--size", "200", "--flows", "64",
        ],
    );
    cap.signal(libc::SIGINT);
    // librdkafka's flush waits up to 30 s for the dead broker.
    let r = cap.wait(Duration::from_secs(120));
    assert_eq!(
        r.code(),
        1,
        "the lost records make it a warning: {}",
        r.stderr()
    );
    assert!(
        r.stderr().contains("weir: warning: Kafka:") && r.stderr().contains("records dropped"),
        "{}",
        r.stderr()
    );

    // The capture's own files hold every frame it counted.
    let m = manifest(&ds);
    assert_eq!(m["capture"]["ended_by"], "signal");
    let frames = m["counts"]["frames"].as_u64().unwrap();
    assert!(frames >= 100_000, "{frames} frames");
    assert_eq!(m["drops"]["pcap"], 0, "{}", m["drops"]);
    assert_eq!(records(&ds).len() as u64, frames);
    let mut in_pcap = 0;
    for f in m["files"]["pcap"].as_array().unwrap() {
        let mut rd =
            pcapio::TraceReader::open(ds.join(f["path"].as_str().unwrap()), Default::default())
                .expect("open pcap");
        while let Some(c) = rd.next_chunk().expect("read pcap") {
            in_pcap += c.iter().count() as u64;
        }
    }
    assert_eq!(in_pcap, frames);
    for e in common::live::walk(&ds) {
        assert!(
            !e.to_string_lossy().ends_with(".part"),
            "left behind: {}",
            e.display()
        );
    }

    // The stream: every record handed to it is delivered, dropped at the
    // workers' queue or failed (not taken by the broker).
    let k = &m["kafka"];
    let n = |key: &str| k[key].as_u64().unwrap_or_else(|| panic!("{key}: {k}"));
    assert_eq!(n("records_dropped") + n("records"), frames, "{k}");
    assert_eq!(
        n("records_delivered") + n("records_failed"),
        n("records"),
        "{k}"
    );
    assert!(
        n("records_delivered") >= 1,
        "nothing reached the broker: {k}"
    );
    // Whether the workers' queue fills (records dropped there) or the
    // batches wait in librdkafka's buffer until purged (failed) depends on
    // how far the records thread, which feeds the stream and runs in the
    // time the capture leaves, kept pace with the traffic on a busy
    // machine; either way every record is counted. (The stats rows, sent
    // beside the records, are dropped only when the queue fills.)
    assert!(
        n("records_failed") > 0,
        "nothing was left for the broker: {k}"
    );
    eprintln!("the stream across the broker stop: {k}");
}
