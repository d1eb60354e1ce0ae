//! Capture -> Kafka -> collectors, against a real broker: Apache Kafka in
//! KRaft mode, one node, started from the release jars (scripts/lib.sh
//! fetches them; WEIR_KAFKA_JARS) inside the test's own network namespace,
//! on its loopback. Two collectors in one group write the partitions into
//! two datasets; one is killed with SIGKILL mid-stream and started again on
//! its dataset. The two datasets together hold exactly the records of the
//! capture's own dataset: none lost, none twice.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::background::Background;
use common::live::{capture, send};
use common::netns::VethPair;
use common::*;
use wire::PacketRecord;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
const PORT: u16 = 19092;

fn kafka_jars() -> PathBuf {
    let p = std::env::var_os("WEIR_KAFKA_JARS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root/.cache/weir/kafka-jars"));
    assert!(
        p.join(".complete").is_file() || p.read_dir().is_ok_and(|mut d| d.next().is_some()),
        "the Kafka broker's jars are missing at {}; the test command (scripts/test.sh) fetches \
         them from Maven Central (or set WEIR_KAFKA_JARS)",
        p.display()
    );
    p
}

/// A one-node KRaft broker in namespace `ns`, its data under `dir`.
struct Broker {
    process: Option<Background>,
}

impl Broker {
    fn start(ns: &str, dir: &Path) -> Broker {
        let jars = format!("{}/*", kafka_jars().display());
        let props = dir.join("server.properties");
        std::fs::write(
            &props,
            format!(
                "process.roles=broker,controller\nnode.id=1\n\
                 controller.quorum.voters=1@127.0.0.1:{c}\n\
                 listeners=PLAINTEXT://127.0.0.1:{PORT},CONTROLLER://127.0.0.1:{c}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{PORT}\n\
                 controller.listener.names=CONTROLLER\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
                 inter.broker.listener.name=PLAINTEXT\nlog.dirs={d}\nnum.partitions=4\n\
                 offsets.topic.replication.factor=1\noffsets.topic.num.partitions=4\n\
                 transaction.state.log.replication.factor=1\n\
                 transaction.state.log.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n\
                 auto.create.topics.enable=true\n",
                c = PORT + 1,
                d = dir.join("data").display()
            ),
        )
        .unwrap();
        let mut format = VethPair::exec(ns, "java");
        format
            .args(["-cp", &jars, "kafka.tools.StorageTool", "format", "-t"])
            .arg("weir-test-cluster-0001")
            .arg("-c")
            .arg(&props)
            .arg("--standalone");
        let r = run_bounded(format, Duration::from_secs(120));
        assert_eq!(
            r.code(),
            0,
            "formatting the broker's storage: {}",
            r.stderr()
        );
        let mut cmd = VethPair::exec(ns, "java");
        cmd.args(["-Xmx512m", "-cp", &jars, "kafka.Kafka"])
            .arg(&props);
        let process = Background::start(cmd, "", Duration::from_secs(1));
        // Ready when it answers on its port (it logs nothing by default).
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let mut probe = VethPair::exec(ns, "bash");
            probe.args(["-c", &format!("exec 3<>/dev/tcp/127.0.0.1/{PORT}")]);
            if run_bounded(probe, Duration::from_secs(10)).code() == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the Kafka broker did not start in 90 s"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        Broker {
            process: Some(process),
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(p) = self.process.take() {
            p.signal(libc::SIGKILL);
            let _ = p.wait(Duration::from_secs(30));
        }
    }
}

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
    send(&net.a, &part);
    std::thread::sleep(Duration::from_millis(500));
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(60));
    assert_eq!(r.code(), 0, "capture: {}", r.stderr());

    let want = sorted(records(&direct));
    assert!(want.len() >= 18_000, "{} records", want.len());
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

    // Wait until the collectors have written everything (or a limit).
    let deadline = Instant::now() + Duration::from_secs(90);
    while records_written(&c1) + records_written(&c2) < want.len() as u64
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
    let stats_rows = |ds: &Path| {
        let m = manifest(ds);
        let mut rows = Vec::new();
        for f in m["files"]["stats"].as_array().unwrap() {
            rows.extend(store::stats::read_stats_file(&ds.join(f.as_str().unwrap())).unwrap());
        }
        rows
    };
    let key = |r: &store::stats::StatsRow| (r.ts_ns, r.worker, r.iface);
    let mut want_stats = stats_rows(&direct);
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
}
