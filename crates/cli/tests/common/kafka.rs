//! A Kafka broker for the tests: Apache Kafka in KRaft mode, one node,
//! started from the release jars (scripts/lib.sh fetches them;
//! WEIR_KAFKA_JARS) inside a test's own network namespace, on its loopback.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::background::Background;
use super::netns::VethPair;
use super::run_bounded;

pub const PORT: u16 = 19092;

pub fn kafka_jars() -> PathBuf {
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
pub struct Broker {
    process: Option<Background>,
}

impl Broker {
    pub fn start(ns: &str, dir: &Path) -> Broker {
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

impl Broker {
    /// Kills the broker (SIGKILL, by its PID) and waits for it to end.
    pub fn kill(&mut self) {
        let p = self.process.take().expect("the broker runs");
        p.signal(libc::SIGKILL);
        let r = p.wait(Duration::from_secs(30));
        assert!(
            r.output.status.code().is_none(),
            "the broker was not killed"
        );
    }
}

/// Bytes the broker has written into the topic's partition logs under
/// `dir` (the broker's data directory).
pub fn topic_log_bytes(dir: &Path, topic: &str) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir.join("data")) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{topic}-"))
        })
        .flat_map(|e| std::fs::read_dir(e.path()).into_iter().flatten().flatten())
        .filter(|f| f.path().extension().is_some_and(|x| x == "log"))
        .filter_map(|f| f.metadata().ok())
        .map(|m| m.len())
        .sum()
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(p) = self.process.take() {
            p.signal(libc::SIGKILL);
            let _ = p.wait(Duration::from_secs(30));
        }
    }
}
