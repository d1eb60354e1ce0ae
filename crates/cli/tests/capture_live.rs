//! `weir capture` on a veth pair between two network namespaces that each
//! test makes and removes. Traffic comes from `weir gen -i` and from real
//! TCP connections (tests/traffic/tcp_flows.py); every sender is bounded in
//! count and time.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::background::Background;
use common::live::{
    assert_no_thread_holds_capabilities, capture, capture_with_net_raw_only, send, walk,
};
use common::netns::{IFACE, VethPair};
use common::*;
use store::stats::read_stats_file;
use wire::{Has, PacketRecord};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// Frames in a pcap file, by our own reader and by tcpdump.
fn pcap_frames(path: &Path) -> Vec<Vec<u8>> {
    let mut r = pcapio::TraceReader::open(path, Default::default()).expect("open pcap");
    let mut out = Vec::new();
    while let Some(c) = r.next_chunk().expect("read pcap") {
        out.extend(c.iter().map(|(_, b)| b.to_vec()));
    }
    let mut cmd = tool("tcpdump");
    cmd.args(["-nn", "-r"]).arg(path);
    let t = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(
        t.code(),
        0,
        "tcpdump cannot read {}: {}",
        path.display(),
        t.stderr()
    );
    assert_eq!(
        t.stdout().lines().count(),
        out.len(),
        "tcpdump counts differently"
    );
    out
}

fn dataset_pcaps(ds: &Path) -> Vec<std::path::PathBuf> {
    let m = manifest(ds);
    m["files"]["pcap"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| ds.join(f["path"].as_str().unwrap()))
        .collect()
}

fn no_part_files(dir: &Path) {
    for e in walk(dir) {
        assert!(
            !e.file_name().unwrap().to_string_lossy().ends_with(".part"),
            "left behind: {}",
            e.display()
        );
    }
}

fn stats_rows(ds: &Path) -> Vec<store::stats::StatsRow> {
    let m = manifest(ds);
    m["files"]["stats"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| read_stats_file(&ds.join(f.as_str().unwrap())).unwrap())
        .collect()
}

/// The TCP echo server of tests/traffic/tcp_flows.py in namespace `ns`,
/// listening when this returns; killed (by PID) when dropped.
struct TcpServer(std::process::Child);

const TCP_FLOWS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/traffic/tcp_flows.py"
);

impl TcpServer {
    fn start(ns: &str, port: u16) -> TcpServer {
        use std::io::BufRead;
        let mut c = VethPair::exec(ns, "python3");
        c.args([TCP_FLOWS, "serve", &port.to_string()])
            .stdout(std::process::Stdio::piped());
        let mut child = c.spawn().expect("start the TCP server");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        TcpServer(child)
    }

    /// `flows` connections from namespace `ns`; what the client reported.
    fn connect(ns: &str, port: u16, flows: u32) -> String {
        let mut client = VethPair::exec(ns, "python3");
        client.args([
            TCP_FLOWS,
            "connect",
            "10.99.0.2",
            &port.to_string(),
            &flows.to_string(),
        ]);
        let c = run_bounded(client, Duration::from_secs(60));
        assert_eq!(c.code(), 0, "{}", c.stderr());
        c.stdout().trim().to_string()
    }
}

impl Drop for TcpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn captures_exactly_what_was_sent() {
    let net = VethPair::new("exact");
    let s = Scratch::new("cap-exact");
    let ds = s.join("ds");
    let cap = capture(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "1",
            "-c",
            "3000",
            "--duration",
            "30s",
            "udp",
        ],
    );
    let gen_args = [
        "--count", "3000", "--rate", "30000", "--size", "256", "--flows", "8", "--seed", "5",
    ];
    send(&net.a, &gen_args);
    let r = cap.wait(Duration::from_secs(40));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let m = manifest(&ds);
    assert_eq!(m["counts"]["frames"], 3000);
    assert_eq!(m["drops"]["kernel"], 0);
    assert_eq!(m["drops"]["pcap"], 0);
    assert_eq!(m["capture"]["ended_by"], "count");
    no_part_files(&ds);

    // The frames are the ones sent, byte for byte and in order.
    let sent = frames_sent(&s, &gen_args);
    let pcaps = dataset_pcaps(&ds);
    assert_eq!(pcaps.len(), 1);
    let got = pcap_frames(&pcaps[0]);
    assert_eq!(got.len(), 3000);
    assert!(got == sent, "captured frames differ from the frames sent");

    // Records: one per frame, pointing at it.
    let rows = records(&ds);
    assert_eq!(rows.len(), 3000);
    let bytes = std::fs::read(&pcaps[0]).unwrap();
    for r in &rows {
        assert!(r.has(Has::PCAP) && r.has(Has::UDP));
        let at = r.pcap_offset as usize;
        let cap = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
        assert_eq!(cap, r.cap_len);
        let frame = &bytes[at + 16..at + 16 + cap as usize];
        let mut again = PacketRecord::new(r.ts_ns, r.wire_len, r.cap_len);
        wire::decode(wire::LinkType::ETHERNET, frame, &mut again);
        assert_eq!((again.flow_hash, again.ip_id), (r.flow_hash, r.ip_id));
    }
    // Stats: every frame counted, nothing dropped.
    let st = stats_rows(&ds);
    assert_eq!(st.iter().map(|r| r.frames).sum::<u64>(), 3000);
    assert_eq!(
        st.iter()
            .map(|r| r.kernel_drops + r.pcap_drops)
            .sum::<u64>(),
        0
    );
    assert_eq!(st.iter().map(|r| r.records).sum::<u64>(), 3000);
}

/// The frames `weir gen -i` sends with `gen_args`: the same generator
/// writes them to a file.
fn frames_sent(s: &Scratch, gen_args: &[&str]) -> Vec<Vec<u8>> {
    let reference = s.join("ref.pcap");
    let mut cmd = weir();
    cmd.arg("gen").args(gen_args).arg("-w").arg(&reference);
    assert_eq!(run_bounded(cmd, Duration::from_secs(30)).code(), 0);
    pcap_frames(&reference)
}

/// Packet sockets receiving every frame in the namespace of process `pid`
/// (/proc/PID/net/packet: running, protocol ETH_P_ALL), by interface
/// index.
fn receiving_packet_sockets(pid: i32) -> Vec<String> {
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/packet")).unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            (cols.get(3) == Some(&"0003") && cols.get(5) == Some(&"1"))
                .then(|| cols.get(4).unwrap_or(&"?").to_string())
        })
        .collect()
}

/// One worker starts on a small ring and hands over to its full-size one
/// by a gate, in no fanout group: every frame sent while it does is
/// captured once, in order, and once it has handed over the first ring has
/// left the interface, so the kernel delivers each frame to one socket and
/// runs nothing for it but the capture's filter.
#[test]
fn one_worker_hands_over_to_its_full_ring_without_a_fanout_group() {
    let net = VethPair::new("gate");
    let s = Scratch::new("cap-gate");
    let ds = s.join("ds");
    let cap = capture(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "1",
            "--duration",
            "60s",
            "udp",
        ],
    );
    let gen_args = [
        "--count", "40000", "--rate", "20000", "--size", "128", "--flows", "16", "--seed", "9",
    ];
    send(&net.a, &gen_args);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut sockets = receiving_packet_sockets(cap.pid());
    while sockets.len() != 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        sockets = receiving_packet_sockets(cap.pid());
    }
    assert_eq!(sockets.len(), 1, "packet sockets receiving: {sockets:?}");
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(40));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let m = manifest(&ds);
    assert_eq!(m["counts"]["frames"], 40000);
    assert_eq!(m["drops"]["kernel"], 0);
    let pcaps = dataset_pcaps(&ds);
    assert_eq!(pcaps.len(), 1);
    assert!(
        pcap_frames(&pcaps[0]) == frames_sent(&s, &gen_args),
        "captured frames differ from the frames sent"
    );
    assert_eq!(records(&ds).len(), 40000);
}

#[test]
fn fanout_keeps_each_flow_on_one_worker() {
    let net = VethPair::new("fanout");
    let s = Scratch::new("cap-fanout");
    let ds = s.join("ds");
    let server = TcpServer::start(&net.b, 7000);
    let cap = capture(
        &net.b,
        // Small ring blocks: the kernel hands frames over more often.
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "2",
            "--ring-block",
            "128Ki",
            "--duration",
            "30s",
        ],
    );
    assert_eq!(TcpServer::connect(&net.a, 7000, 40), "flows 40");
    send(
        &net.a,
        &[
            "--count", "4000", "--rate", "40000", "--size", "128", "--flows", "64",
        ],
    );
    // Tenant flows inside VXLAN and GRE: dealt by their inner flow.
    for encap in ["vxlan:42", "gre:7"] {
        send(
            &net.a,
            &[
                "--count", "1000", "--rate", "40000", "--size", "128", "--flows", "32", "--encap",
                encap,
            ],
        );
    }
    std::thread::sleep(Duration::from_millis(300));
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(30));
    drop(server);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let rows = records(&ds);
    // weir's hash deals the frames (the default, as root): each frame went
    // to worker `fanout_ring(flow_hash, 2)`, where frames without a flow
    // hash count as 0; the records' flow hash is the innermost packet's.
    let first = rows.iter().map(|r| r.ts_ns).min().unwrap_or(0);
    let misdealt: Vec<_> = rows
        .iter()
        .filter(|r| {
            r.frag & 0x3fff == 0 && r.worker as u32 != capture::shard::fanout_ring(r.flow_hash, 2)
        })
        .map(|r| {
            (
                r.worker,
                r.flow_hash,
                r.tunnel.kind,
                r.ip_proto,
                r.ts_ns - first,
            )
        })
        .take(5)
        .collect();
    assert!(
        misdealt.is_empty(),
        "frames on another worker than their flow hash's: {misdealt:?}"
    );
    let tunnelled = rows.iter().filter(|r| r.tunnel.depth > 0).count();
    assert!(tunnelled >= 2000, "{tunnelled} tunnelled frames");
    assert!(
        manifest(&ds)["capture"]["fanout"]
            .as_str()
            .is_some_and(|f| f.contains("weir flow hash")),
        "the manifest says how frames were dealt"
    );
    let mut workers_of: HashMap<u32, HashSet<u16>> = HashMap::new();
    let mut both_ways: HashMap<u32, HashSet<bool>> = HashMap::new();
    for r in rows.iter().filter(|r| r.has(Has::FLOW)) {
        workers_of.entry(r.flow_hash).or_default().insert(r.worker);
        both_ways
            .entry(r.flow_hash)
            .or_default()
            .insert(r.flow_reversed());
    }
    let split: Vec<_> = workers_of.iter().filter(|(_, w)| w.len() > 1).collect();
    assert!(split.is_empty(), "flows seen by two workers: {split:?}");
    let bidirectional = both_ways.values().filter(|d| d.len() == 2).count();
    assert!(
        bidirectional >= 40,
        "{bidirectional} flows seen in both directions"
    );
    let per_worker: HashSet<u16> = rows.iter().map(|r| r.worker).collect();
    assert_eq!(per_worker.len(), 2, "both workers get work");
    assert!(workers_of.len() >= 100, "{} flows", workers_of.len());
}

#[test]
fn a_filter_keeps_exactly_the_matching_frames() {
    let net = VethPair::new("filter");
    let s = Scratch::new("cap-filter");
    let ds = s.join("ds");
    let server = TcpServer::start(&net.b, 7001);
    let cap = capture(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "2",
            "--duration",
            "30s",
            "udp",
            "and",
            "not",
            "port",
            "53",
        ],
    );
    assert_eq!(TcpServer::connect(&net.a, 7001, 10), "flows 10");
    send(
        &net.a,
        &[
            "--count", "2500", "--rate", "25000", "--size", "100", "--flows", "16",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(30));
    drop(server);
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let rows = records(&ds);
    assert_eq!(rows.len(), 2500, "exactly the UDP frames");
    assert!(rows.iter().all(|r| r.has(Has::UDP) && r.ip_proto == 17));
    assert_eq!(manifest(&ds)["capture"]["filter"], "udp and not port 53");

    // A bad expression is refused before anything starts.
    let mut cmd = VethPair::exec(&net.b, WEIR);
    cmd.args(["capture", "-i", IFACE, "-o"])
        .arg(s.join("bad"))
        .args(["udp", "and", "port", "lots"]);
    let r = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(r.code(), 1);
    assert!(
        r.stderr().contains("bad filter expression"),
        "{}",
        r.stderr()
    );
}

#[test]
fn pcap_files_rotate_by_size_and_by_time() {
    let net = VethPair::new("rotate");
    let s = Scratch::new("cap-rotate");
    // -w with rotation by size: FILE, FILE.1, ...
    let file = s.join("out.pcap");
    let cap = capture(
        &net.b,
        &[
            "-w",
            file.to_str().unwrap(),
            "--rotate-size",
            "64k",
            "-c",
            "2000",
            "--duration",
            "30s",
            "udp",
        ],
    );
    send(
        &net.a,
        &[
            "--count", "2000", "--rate", "20000", "--size", "200", "--flows", "4",
        ],
    );
    let r = cap.wait(Duration::from_secs(40));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let mut total = 0;
    let mut files = 0;
    for e in std::fs::read_dir(&s.0).unwrap().flatten() {
        let p = e.path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("out.pcap") {
            assert!(
                std::fs::metadata(&p).unwrap().len() <= 64_000,
                "{name} is too big"
            );
            total += pcap_frames(&p).len();
            files += 1;
        }
    }
    assert_eq!(total, 2000);
    assert!(files >= 6, "{files} files");
    no_part_files(&s.0);

    // A dataset rotated by time.
    let ds = s.join("ds");
    let cap = capture(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "1",
            "--rotate-time",
            "250ms",
            "-c",
            "3000",
            "--duration",
            "30s",
            "udp",
        ],
    );
    send(
        &net.a,
        &[
            "--count", "3000", "--rate", "2500", "--size", "120", "--flows", "4",
        ],
    );
    let r = cap.wait(Duration::from_secs(40));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let pcaps = dataset_pcaps(&ds);
    assert!(pcaps.len() >= 4, "{} files in 1.2 s", pcaps.len());
    let frames: usize = pcaps.iter().map(|p| pcap_frames(p).len()).sum();
    assert_eq!(frames, 3000);
    let m = manifest(&ds);
    for f in m["files"]["pcap"].as_array().unwrap() {
        let span = f["ts_last"].as_i64().unwrap() - f["ts_first"].as_i64().unwrap();
        assert!(span < 250_000_000, "a file spans {span} ns");
    }
}

#[test]
fn sigint_during_traffic_leaves_a_complete_dataset() {
    let net = VethPair::new("sigint");
    let s = Scratch::new("cap-sigint");
    let ds = s.join("ds");
    let cap = capture(&net.b, &["-o", ds.to_str().unwrap(), "-j", "2"]);
    let mut sender_cmd = VethPair::exec(&net.a, WEIR);
    sender_cmd.args([
        "gen",
        "-i",
        IFACE,
        "--duration",
        "3s",
        "--count",
        "300000",
        "--rate",
        "50000",
        "--size",
        "300",
        "--flows",
        "32",
    ]);
    let sender = Background::start(sender_cmd, "", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(1200));
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(30));
    let _ = sender.wait(Duration::from_secs(30));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let m = manifest(&ds);
    assert_eq!(m["capture"]["ended_by"], "signal");
    no_part_files(&ds);
    let frames = m["counts"]["frames"].as_u64().unwrap();
    assert!(frames > 10_000, "{frames} frames");
    let in_pcap: usize = dataset_pcaps(&ds)
        .iter()
        .map(|p| pcap_frames(p).len())
        .sum();
    assert_eq!(
        in_pcap as u64 + m["drops"]["pcap"].as_u64().unwrap(),
        frames
    );
    // Every frame stored has its record.
    assert_eq!(records(&ds).len(), in_pcap);
    assert_verifies(&ds);
}

/// Records put off (here all of them: `--records-lag 0`, as when the
/// records threads fall behind) are built from the pcap files: every frame
/// stored ends with exactly one record, which points at its own frame
/// (same time, same length), and the manifest and `weir info` say how many
/// were built late.
#[test]
fn records_put_off_are_built_from_the_pcap_files() {
    let net = VethPair::new("late");
    let s = Scratch::new("cap-late");
    let ds = s.join("ds");
    let cap = capture(
        &net.b,
        &["-o", ds.to_str().unwrap(), "-j", "2", "--records-lag", "0"],
    );
    send(
        &net.a,
        &[
            "--count", "30000", "--rate", "15000", "--size", "200", "--flows", "64", "--seed", "5",
        ],
    );
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let m = manifest(&ds);
    no_part_files(&ds);
    let recs = records(&ds);
    let mut in_pcap = 0u64;
    let mut files = HashMap::new();
    for f in m["files"]["pcap"].as_array().unwrap() {
        let path = ds.join(f["path"].as_str().unwrap());
        in_pcap += pcap_frames(&path).len() as u64;
        let file = pcapio::fetch::PcapFile::open(&path).unwrap().unwrap();
        files.insert(f["id"].as_u64().unwrap() as u32, file);
    }
    assert!(in_pcap >= 29_000, "{in_pcap} frames stored: {m}");
    assert_eq!(recs.len() as u64, in_pcap, "{m}");
    let late = &m["late_records"];
    assert_eq!(late["built"].as_u64(), Some(in_pcap), "{m}");
    assert_eq!(late["pending"].as_u64(), Some(0), "{m}");
    assert_eq!(late["lost"].as_u64(), Some(0), "{m}");
    let mut seen = HashSet::new();
    let mut data = Vec::new();
    for rec in &recs {
        assert!(rec.has & Has::PCAP != 0);
        assert!(
            seen.insert((rec.pcap_file, rec.pcap_offset)),
            "two records of one frame"
        );
        let f = files[&rec.pcap_file]
            .read_at(rec.pcap_offset, &mut data)
            .unwrap();
        assert_eq!((f.ts_ns, f.wire_len), (rec.ts_ns, rec.wire_len));
        assert_eq!(rec.cap_len as usize, data.len());
    }
    let mut info = weir();
    info.arg("info").arg(&ds);
    let out = run_bounded(info, Duration::from_secs(30));
    assert!(
        out.stdout().contains("built late from the pcap files"),
        "{}",
        out.stdout()
    );
    assert_verifies(&ds);
}

/// `--duration` ends the capture while traffic goes on: each worker closes
/// its ring to new frames and drains what it holds (a ring under steady
/// traffic is never empty, and waiting for it to be kept the capture
/// running as long as the sender did). Nothing the kernel put in a ring is
/// left unread.
#[test]
fn duration_ends_the_capture_under_steady_traffic() {
    let net = VethPair::new("steady");
    let s = Scratch::new("cap-steady");
    let ds = s.join("ds");
    let mut g = VethPair::exec(&net.a, WEIR);
    g.arg("gen").args(["-i", IFACE]).args([
        "--duration",
        "40s",
        "--count",
        "400000",
        "--rate",
        "10000",
        "--size",
        "200",
        "--flows",
        "16",
    ]);
    let sender = Background::start(g, "", Duration::from_secs(5));
    let cap = capture(
        &net.b,
        &["-o", ds.to_str().unwrap(), "-j", "2", "--duration", "2s"],
    );
    let r = cap.wait(Duration::from_secs(15));
    sender.signal(libc::SIGINT);
    let _ = sender.wait(Duration::from_secs(30));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let m = manifest(&ds);
    assert_eq!(m["capture"]["ended_by"], "duration");
    no_part_files(&ds);
    let frames = m["counts"]["frames"].as_u64().unwrap();
    assert!(frames > 10_000, "{frames} frames");
    let unread = m["drops"]["ring_unread"].as_u64().unwrap_or(0);
    assert!(
        unread <= 100,
        "{unread} frames left in the rings: {}",
        m["drops"]
    );
    let stored = frames - m["drops"]["pcap"].as_u64().unwrap();
    assert_eq!(records(&ds).len() as u64, stored);
}

#[test]
fn overload_drops_are_counted_and_add_up() {
    let net = VethPair::new("overload");
    let s = Scratch::new("cap-overload");
    let ds = s.join("ds");
    // A small ring and little staging memory, flooded with full-size frames.
    let cap = capture(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "1",
            "-B",
            "4096",
            "--staging",
            "4Mi",
            "--duration",
            "30s",
            "udp",
        ],
    );
    let g = send(
        &net.a,
        &[
            "--count",
            "400000",
            "--duration",
            "2s",
            "--rate",
            "max",
            "--size",
            "1514",
            "--flows",
            "16",
        ],
    );
    let sent: u64 = g
        .stdout()
        .split_whitespace()
        .skip_while(|w| *w != "sent")
        .nth(1)
        .and_then(|n| n.replace(',', "").parse().ok())
        .expect("gen prints what it sent");
    std::thread::sleep(Duration::from_millis(500));
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let m = manifest(&ds);
    let captured = m["counts"]["frames"].as_u64().unwrap();
    let kernel = m["drops"]["kernel"].as_u64().unwrap();
    let seen = m["drops"]["kernel_seen"].as_u64().unwrap();
    let pcap = m["drops"]["pcap"].as_u64().unwrap();
    assert!(
        kernel + pcap > 0,
        "the overload caused no drops (captured {captured} of {sent})"
    );
    assert_eq!(
        captured + kernel,
        seen,
        "the kernel's count is captured + dropped"
    );
    // What the veth delivered is what was sent, less what the device itself
    // dropped before AF_PACKET saw it.
    let dev_dropped: u64 = {
        let mut c = VethPair::exec(&net.b, "cat");
        c.arg(format!("/sys/class/net/{IFACE}/statistics/rx_dropped"));
        run_bounded(c, Duration::from_secs(5))
            .stdout()
            .trim()
            .parse()
            .unwrap_or(0)
    };
    assert_eq!(
        seen + dev_dropped,
        sent,
        "sent {sent} = seen {seen} + dropped by the device {dev_dropped}"
    );
    // The stats table holds the same drops, and the summary says them.
    let st = stats_rows(&ds);
    assert_eq!(st.iter().map(|r| r.kernel_drops).sum::<u64>(), kernel);
    assert_eq!(st.iter().map(|r| r.pcap_drops).sum::<u64>(), pcap);
    assert!(r.stdout().contains("dropped"), "{}", r.stdout());
    // weir analyze loss: per second, the same drops in total.
    let mut c = weir();
    let plot = s.join("loss.svg");
    c.args(["analyze", ds.to_str().unwrap(), "loss", "--json", "--plot"])
        .arg(&plot);
    let a = run_bounded(c, Duration::from_secs(60));
    assert_eq!(a.code(), 0, "{}", a.stderr());
    let rows: serde_json::Value = serde_json::from_str(&a.stdout()).unwrap();
    let sum = |k: &str| -> u64 {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r[k].as_u64().unwrap())
            .sum()
    };
    assert_eq!(sum("kernel_drops"), kernel);
    assert_eq!(sum("pcap_drops"), pcap);
    assert_eq!(sum("captured"), captured);
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.contains("dropped: ring full"), "{svg}");
    // And weir read gives back every frame the pcap files hold, which
    // tcpdump opens.
    let out = s.join("all.pcap");
    let mut c = weir();
    c.arg("read").arg(&ds).arg("-w").arg(&out);
    let rd = run_bounded(c, Duration::from_secs(120));
    assert_eq!(rd.code(), 0, "{}", rd.stderr());
    let mut c = tool("tcpdump");
    c.arg("-nr").arg(&out);
    let t = run_bounded(c, Duration::from_secs(120));
    assert_eq!(t.code(), 0, "{}", t.stderr());
    assert_eq!(t.stdout().lines().count() as u64, captured - pcap);
}

#[test]
fn clear_errors_before_anything_starts() {
    let net = VethPair::new("errors");
    let s = Scratch::new("cap-errors");
    let run = |args: &[&str]| {
        let mut c = VethPair::exec(&net.b, WEIR);
        c.arg("capture").args(args);
        run_bounded(c, Duration::from_secs(30))
    };
    let r = run(&["-i", "nosuch0", "-o", s.join("a").to_str().unwrap()]);
    assert_eq!(r.code(), 1);
    assert!(
        r.stderr().contains("no interface named \"nosuch0\""),
        "{}",
        r.stderr()
    );
    let r = run(&["-i", IFACE]);
    assert_ne!(r.code(), 0);
    assert!(r.stderr().contains("-o DATASET"), "{}", r.stderr());
    let r = run(&["-i", IFACE, "-w", "/proc/nope/out.pcap", "-c", "1"]);
    assert_eq!(r.code(), 1);
    assert!(r.stderr().contains("cannot write there"), "{}", r.stderr());
    let r = run(&[
        "-i",
        IFACE,
        "-o",
        s.join("b").to_str().unwrap(),
        "--ring-block",
        "100Ki",
    ]);
    assert_eq!(r.code(), 1);
    assert!(
        r.stderr().contains("a ring block is a power of two"),
        "{}",
        r.stderr()
    );
}

#[test]
fn several_interfaces_in_one_capture() {
    let net = VethPair::new("multi");
    // A second veth pair between the same two namespaces.
    let ip = |args: &[&str]| {
        let out = std::process::Command::new("ip")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ip(&[
        "-n", &net.a, "link", "add", "veth1", "type", "veth", "peer", "name", "veth1", "netns",
        &net.b,
    ]);
    ip(&["-n", &net.a, "link", "set", "veth1", "up"]);
    ip(&["-n", &net.b, "link", "set", "veth1", "up"]);
    let s = Scratch::new("cap-multi");
    let ds = s.join("ds");
    let mut cmd = VethPair::exec(&net.b, WEIR);
    cmd.args([
        "capture",
        "-i",
        "veth0",
        "-i",
        "veth1",
        "-o",
        ds.to_str().unwrap(),
        "-j",
        "1",
        "-c",
        "3000",
        "--duration",
        "30s",
        "udp",
    ]);
    let cap = Background::start(cmd, "capturing on", Duration::from_secs(30));
    send(
        &net.a,
        &[
            "--count", "1000", "--rate", "20000", "--size", "100", "--flows", "4",
        ],
    );
    let mut c = VethPair::exec(&net.a, WEIR);
    c.args([
        "gen", "-i", "veth1", "--count", "2000", "--rate", "20000", "--size", "150", "--flows", "4",
    ]);
    assert_eq!(run_bounded(c, Duration::from_secs(30)).code(), 0);
    let r = cap.wait(Duration::from_secs(40));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let m = manifest(&ds);
    let names: Vec<&str> = m["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["veth0", "veth1"]);
    let rows = records(&ds);
    let on = |iface: u16, len: u32| {
        rows.iter()
            .filter(|r| r.iface == iface && r.wire_len == len)
            .count()
    };
    assert_eq!((on(0, 100), on(1, 150)), (1000, 2000));
    assert_eq!(rows.len(), 3000);
}

#[test]
fn without_privileges_the_error_says_what_to_do() {
    let net = VethPair::new("noroot");
    let s = Scratch::new("cap-noroot");
    // A packet socket needs CAP_NET_RAW: as nobody it is refused.
    let mut c = VethPair::exec(&net.b, "setpriv");
    c.args(AS_NOBODY)
        .args([WEIR, "capture", "-i", IFACE, "-w"])
        .arg(std::env::temp_dir().join("weir-noroot.pcap"))
        .args(["-c", "1"]);
    let r = run_bounded(c, Duration::from_secs(30));
    assert_eq!(r.code(), 1, "{}", r.stderr());
    assert!(r.stderr().contains("CAP_NET_RAW"), "{}", r.stderr());
    // -Z: open the sockets as root, then write as nobody.
    let ds = s.join("ds");
    std::fs::set_permissions(&s.0, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let cap = capture(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-Z",
            "nobody",
            "-j",
            "1",
            "-c",
            "500",
            "--duration",
            "30s",
            "udp",
        ],
    );
    send(
        &net.a,
        &["--count", "500", "--rate", "20000", "--size", "100"],
    );
    let r = cap.wait(Duration::from_secs(40));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    use std::os::unix::fs::MetadataExt;
    for f in walk(&ds) {
        let meta = std::fs::metadata(&f).unwrap();
        assert_eq!(meta.uid(), 65534, "{} is not owned by nobody", f.display());
        assert_eq!(
            meta.mode() & 0o777,
            0o640,
            "{} mode {:o}",
            f.display(),
            meta.mode() & 0o777
        );
    }
    assert_eq!(records(&ds).len(), 500);
    for d in std::iter::once(ds.clone()).chain(
        walk(&ds)
            .iter()
            .filter_map(|f| f.parent().map(Path::to_path_buf)),
    ) {
        let mode = std::fs::metadata(&d).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o750, "{} mode {mode:o}", d.display());
    }
}

/// A user holding only CAP_NET_RAW (no root) captures, and holds no
/// capability at all, on any thread, once the rings are open.
#[test]
fn cap_net_raw_is_enough_and_is_given_up_once_the_rings_are_open() {
    let net = VethPair::new("netraw");
    let s = Scratch::new("cap-netraw");
    std::fs::set_permissions(&s.0, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let ds = s.join("ds");
    let cap = capture_with_net_raw_only(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "2",
            "-c",
            "500",
            "--duration",
            "30s",
            "udp",
        ],
    );
    let threads = assert_no_thread_holds_capabilities(cap.pid());
    assert!(
        threads.len() >= 3,
        "main and two workers at least: {threads:?}"
    );
    send(
        &net.a,
        &["--count", "500", "--rate", "20000", "--size", "100"],
    );
    let r = cap.wait(Duration::from_secs(40));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert_eq!(records(&ds).len(), 500);
    // Without CAP_BPF the workers share frames by the kernel's hash, and
    // the capture says so.
    assert!(
        r.stderr().contains("by the kernel's flow hash, not weir's"),
        "{}",
        r.stderr()
    );
    assert!(
        manifest(&ds)["capture"]["fanout"]
            .as_str()
            .is_some_and(|f| f.contains("PACKET_FANOUT_HASH")),
        "the manifest says the kernel's hash dealt the frames"
    );
}

/// Two boxes' worth of `--shard`: captures of share 0/2 and 1/2 next to two
/// unsharded ones, on the same traffic, all five at once on one interface
/// and each with two rings in a fanout group (groups of different captures
/// must not merge, or the kernel deals each flow to one of them only). The
/// shares are disjoint, their union is the whole, the two unsharded
/// captures are equal, and no flow is split; a tcpdump filter still
/// applies inside a share.
/// A frame told apart by its headers: flow hash, length, IP id, TCP
/// sequence and acknowledgement numbers.
type Frame = (u32, u32, u32, u32, u32);

#[test]
fn shards_split_the_traffic_into_disjoint_complete_shares() {
    let net = VethPair::new("shard");
    let s = Scratch::new("cap-shard");
    let start = |name: &str, extra: &[&str]| {
        let ds = s.join(name);
        // Small rings: four captures start quickly side by side.
        let mut args = vec![
            "-o",
            ds.to_str().unwrap(),
            "--duration",
            "40s",
            "-B",
            "16384",
        ];
        args.extend_from_slice(extra);
        (ds.clone(), capture(&net.b, &args))
    };
    let caps = [
        start("all", &["-j", "2"]),
        start("share0", &["-j", "2", "--shard", "0/2"]),
        start("share1", &["-j", "2", "--shard", "1/2"]),
        start("share1-udp", &["-j", "2", "--shard", "1/2", "udp"]),
        start("all-again", &["-j", "2"]),
    ];
    let server = TcpServer::start(&net.b, 7002);
    assert_eq!(TcpServer::connect(&net.a, 7002, 30), "flows 30");
    send(
        &net.a,
        &[
            "--count", "3000", "--rate", "30000", "--size", "150", "--flows", "64",
        ],
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut sets = Vec::new();
    for (ds, cap) in caps {
        cap.signal(libc::SIGINT);
        let r = cap.wait(Duration::from_secs(30));
        assert_eq!(r.code(), 0, "{}", r.stderr());
        // The test's own TCP and UDP frames: what every capture saw whole.
        // (Each socket stamps its own time: frames are told apart by their
        // headers.)
        let frames: Vec<Frame> = records(&ds)
            .iter()
            .filter(|r| r.has(Has::FLOW) && (r.has(Has::TCP) || r.has(Has::UDP)))
            .map(|r| (r.flow_hash, r.wire_len, r.ip_id, r.tcp_seq, r.tcp_ack))
            .collect();
        sets.push((ds, frames));
    }
    drop(server);
    let sorted = |v: &Vec<Frame>| {
        let mut v = v.clone();
        v.sort_unstable();
        v
    };
    let all = sorted(&sets[0].1);
    let (zero, one, one_udp) = (sorted(&sets[1].1), sorted(&sets[2].1), &sets[3].1);
    assert!(all.len() > 3000, "{} frames", all.len());
    let again = sorted(&sets[4].1);
    assert!(
        again == all,
        "two unsharded captures at once kept {} and {} frames",
        all.len(),
        again.len()
    );
    // Every frame in the share its flow hash says, so no flow is split.
    assert!(zero.iter().all(|f| f.0 % 2 == 0));
    assert!(one.iter().all(|f| f.0 % 2 == 1));
    let flows = |v: &[Frame]| v.iter().map(|f| f.0).collect::<HashSet<_>>();
    assert!(flows(&zero).len() >= 20 && flows(&one).len() >= 20);
    // Disjoint (by flow hash parity above), and together the whole.
    let mut union = [zero.clone(), one.clone()].concat();
    union.sort_unstable();
    assert_eq!(
        union.len(),
        all.len(),
        "share0 {} + share1 {}",
        zero.len(),
        one.len()
    );
    let diff: Vec<_> = all
        .iter()
        .zip(&union)
        .filter(|(a, b)| a != b)
        .take(5)
        .collect();
    assert!(
        union == all,
        "the shares together differ from the unsharded capture: {diff:?}"
    );
    // The filter applies within the share: exactly share 1's UDP frames.
    let want_udp: HashSet<_> = records(&sets[2].0)
        .iter()
        .filter(|r| r.has(Has::UDP))
        .map(|r| (r.flow_hash, r.wire_len, r.ip_id))
        .collect();
    let got_udp: HashSet<_> = records(&sets[3].0)
        .iter()
        .map(|r| {
            assert!(r.has(Has::UDP), "a non-UDP frame passed the filter");
            (r.flow_hash, r.wire_len, r.ip_id)
        })
        .collect();
    assert!(!one_udp.is_empty());
    assert_eq!(got_udp, want_udp);
    let m = manifest(&sets[2].0);
    assert_eq!(m["capture"]["shard"]["index"], 1);
    assert_eq!(m["capture"]["shard"]["count"], 2);
    assert!(manifest(&sets[0].0)["capture"].get("shard").is_none());

    // `weir merge` of the two shares: nothing in common, the whole traffic.
    let tcp_udp = |ds: &Path| -> Vec<Frame> {
        let mut v: Vec<Frame> = records(ds)
            .iter()
            .filter(|r| r.has(Has::FLOW) && (r.has(Has::TCP) || r.has(Has::UDP)))
            .map(|r| (r.flow_hash, r.wire_len, r.ip_id, r.tcp_seq, r.tcp_ack))
            .collect();
        v.sort_unstable();
        v
    };
    let merge = |inputs: [&Path; 2], out: &str| {
        let mut cmd = Command::new(WEIR);
        cmd.arg("merge").args(inputs).arg("-o").arg(s.join(out));
        let r = run_bounded(cmd, Duration::from_secs(60));
        assert_eq!(r.code(), 0, "{}", r.stderr());
        s.join(out)
    };
    let shares = merge([&sets[1].0, &sets[2].0], "merged-shares");
    assert!(
        tcp_udp(&shares) == all,
        "share 0 + share 1 merged differ from the whole"
    );
    assert_eq!(manifest(&shares)["merge"]["duplicates_removed"], 0);
    // The whole capture and share 1 again, as two boxes with overlapping
    // shares: share 1's frames are found in both (each socket stamped its
    // own time, microseconds apart) and kept once.
    let overlap = merge([&sets[0].0, &sets[2].0], "merged-overlap");
    assert!(
        tcp_udp(&overlap) == all,
        "whole + share 1 merged differ from the whole"
    );
    let m = manifest(&overlap);
    let removed = m["merge"]["duplicates_removed"].as_u64().unwrap();
    assert!(
        removed as usize >= one.len()
            && removed <= m["merge"]["inputs"][1]["frames"].as_u64().unwrap(),
        "{removed} duplicates removed; share 1 has {} TCP/UDP frames",
        one.len()
    );
    let offset = m["merge"]["inputs"][1]["clock_offset_ns"].as_i64().unwrap();
    assert!(
        offset.abs() < 1_000_000,
        "clock offset {offset} ns on one host"
    );
    // The pcap files of both inputs came along, renumbered: reading the
    // merged dataset back gives a frame for every record.
    let pcap = s.join("overlap.pcap");
    let mut cmd = Command::new(WEIR);
    cmd.arg("read").arg(&overlap).arg("-w").arg(&pcap).arg("-q");
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let mut reader = pcapio::TraceReader::open(&pcap, Default::default()).unwrap();
    let mut read_back = 0;
    while let Some(chunk) = reader.next_chunk().unwrap() {
        read_back += chunk.iter().count() as u64;
    }
    assert_eq!(read_back, m["counts"]["frames"].as_u64().unwrap());

    // A bad share is refused before anything starts.
    let mut cmd = VethPair::exec(&net.b, WEIR);
    cmd.args(["capture", "-i", IFACE, "-o"])
        .arg(s.join("bad"))
        .args(["--shard", "2/2"]);
    let r = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(r.code(), 2, "{}", r.stderr());
    assert!(r.stderr().contains("below N"), "{}", r.stderr());
}

/// `weir analyze`, `weir sql` and `weir read` on a dataset whose capture is
/// still running: what was received more than `--records-every` (10 s by
/// default) earlier is there, while traffic goes on and files are being
/// written.
#[test]
fn a_running_capture_answers_for_what_it_received_ten_seconds_ago() {
    let net = VethPair::new("running");
    let s = Scratch::new("cap-running");
    let ds = s.join("ds");
    let cap = capture(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "2",
            "--duration",
            "60s",
            "udp",
        ],
    );
    send(
        &net.a,
        &[
            "--count", "3000", "--rate", "1000", "--size", "300", "--flows", "8",
        ],
    );
    let sent_at = std::time::Instant::now();
    // More traffic meanwhile, into files still being written.
    let mut g = VethPair::exec(&net.a, WEIR);
    g.arg("gen").args(["-i", IFACE]).args([
        "--duration",
        "30s",
        "--count",
        "300000",
        "--rate",
        "2000",
        "--size",
        "200",
        "--flows",
        "4",
    ]);
    let more = Background::start(g, "", Duration::from_secs(5));
    std::thread::sleep(Duration::from_secs(11).saturating_sub(sent_at.elapsed()));
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        std::path::Path::new(&format!("/proc/{}", cap.pid())).exists(),
        "the capture is still running"
    );
    let m = manifest(&ds);
    assert_eq!(m["capture"]["ended_by"], "running");
    assert!(!m["files"]["packets"].as_array().unwrap().is_empty(), "{m}");
    // The first 3000 frames (300-byte, so told apart from the 200-byte
    // stream after them) are all in the finished files: at once on an
    // idle machine; a loaded one (the test command runs tests side by
    // side) may close the files a few seconds late.
    let count_300 = || {
        let mut cmd = weir();
        cmd.arg("sql")
            .arg(&ds)
            .arg("SELECT count(*) AS n FROM packets WHERE wire_len = 300")
            .arg("--csv");
        let r = run_bounded(cmd, Duration::from_secs(60));
        assert_eq!(r.code(), 0, "{}", r.stderr());
        r.stdout().lines().last().unwrap_or_default().to_string()
    };
    let mut n = count_300();
    while n != "3000" && sent_at.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(500));
        n = count_300();
    }
    assert_eq!(n, "3000");
    for kind in ["summary", "flows", "rates"] {
        let mut cmd = weir();
        cmd.arg("analyze").arg(&ds).arg(kind).arg("--json");
        let r = run_bounded(cmd, Duration::from_secs(60));
        assert_eq!(
            r.code(),
            0,
            "analyze {kind} while capturing: {}",
            r.stderr()
        );
    }
    let out = s.join("first.pcap");
    let mut cmd = weir();
    cmd.arg("read")
        .arg(&ds)
        .arg("greater 250")
        .arg("-w")
        .arg(&out);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "read while capturing: {}", r.stderr());
    assert_eq!(pcap_frames(&out).len(), 3000);
    more.signal(libc::SIGINT);
    let _ = more.wait(Duration::from_secs(30));
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(30));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let m = manifest(&ds);
    assert_eq!(m["capture"]["ended_by"], "signal");
    no_part_files(&ds);
    assert_eq!(
        records(&ds).len() as u64,
        m["counts"]["frames"].as_u64().unwrap()
    );
}

/// A small filesystem mounted for the test, unmounted at the end.
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    fn mount(dir: &Path, size: &str) -> SmallFs {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "mounting a {size} tmpfs on {}", dir.display());
        SmallFs(dir.to_path_buf())
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The disk fills under every writer at once (pcap, records, flows, stats)
/// with `--on-full stop`: the capture stops with an error that says so,
/// every file is closed and listed, the manifest says why it ended, and
/// nothing needs `weir recover`.
#[test]
fn a_full_disk_stops_the_capture_with_every_file_whole() {
    let net = VethPair::new("fulldisk");
    let s = Scratch::new("cap-fulldisk");
    let small = SmallFs::mount(&s.join("fs"), "24M");
    let ds = small.0.join("ds");
    let cap = capture(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "2",
            "--buffer",
            "64M",
            "--duration",
            "40s",
            "--on-full",
            "stop",
            "udp",
        ],
    );
    send(
        &net.a,
        &["--count", "40000", "--rate", "8000", "--size", "1000"],
    );
    let r = cap.wait(Duration::from_secs(60));
    assert_eq!(r.code(), 1, "{}\n{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains("the disk is full"), "{}", r.stderr());
    let m = manifest(&ds);
    assert_eq!(m["capture"]["ended_by"], "disk-full", "{m}");
    no_part_files(&ds);
    assert!(!ds.join(".space-reserve").exists());
    // Every frame pcap kept has its record (records are made from what
    // pcap staged); of the frames pcap could not keep, those cut from a
    // file when its write failed may have one. Every pcap file reads to
    // its listed frame count in tcpdump.
    let frames = m["counts"]["frames"].as_u64().unwrap();
    assert!(frames > 10_000, "{frames} frames before the disk filled");
    let (pcap_lost, cut) = (
        m["drops"]["pcap"].as_u64().unwrap(),
        m["drops"]["pcap_write"].as_u64().unwrap(),
    );
    let recs = records(&ds).len() as u64;
    assert!(
        (frames - pcap_lost..=frames - pcap_lost + cut).contains(&recs),
        "{recs} records: {m}"
    );
    let pcaps = m["files"]["pcap"].as_array().unwrap();
    assert!(!pcaps.is_empty());
    for p in pcaps {
        let path = ds.join(p["path"].as_str().unwrap());
        assert_eq!(
            pcap_frames(&path).len() as u64,
            p["frames"].as_u64().unwrap(),
            "{}",
            path.display()
        );
    }
    assert!(!m["files"]["stats"].as_array().unwrap().is_empty(), "{m}");
    let mut c = weir();
    c.arg("recover").arg(&ds);
    let rec = run_bounded(c, Duration::from_secs(60));
    assert!(rec.stdout().contains("nothing to do"), "{}", rec.stdout());
    assert_verifies(&ds);
    drop(small);
}

/// Rows of each Parquet file, as pyarrow reads it.
fn pyarrow_rows(files: &[std::path::PathBuf]) -> Vec<u64> {
    let mut cmd = python();
    cmd.args([
        "-c",
        "import sys, pyarrow.parquet as pq\n\
         for p in sys.argv[1:]: print(pq.read_table(p).num_rows)",
    ])
    .args(files);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "pyarrow: {}", r.stderr());
    r.stdout().lines().map(|l| l.parse().unwrap()).collect()
}

/// With `--on-full drop` the disk fills under pcap, records and stats and
/// the capture goes on: what cannot be written is dropped and counted per
/// stage; once the test frees space, writing resumes, and at the end every
/// file listed is whole and the counts add up.
#[test]
fn a_full_disk_with_on_full_drop_counts_what_is_lost_and_resumes() {
    let net = VethPair::new("fulldrop");
    let s = Scratch::new("cap-fulldrop");
    let small = SmallFs::mount(&s.join("fs"), "24M");
    // Freed once the disk is full, so that space returns.
    let ballast = small.0.join("ballast");
    std::fs::write(&ballast, vec![0x5a; 8 << 20]).unwrap();
    let ds = small.0.join("ds");
    let mut cap = capture(
        &net.b,
        &[
            "-o",
            ds.to_str().unwrap(),
            "-j",
            "2",
            "--buffer",
            "64M",
            "--duration",
            "120s",
            "--records-every",
            "1s",
            "--on-full",
            "drop",
            "udp",
        ],
    );
    // About 30 MB of frames into 12 MiB of room (24 less the ballast and
    // the capture's 4 MiB reserve); more until a records, stats or
    // manifest write has met the full disk.
    send(
        &net.a,
        &["--count", "30000", "--rate", "10000", "--size", "1000"],
    );
    let mut full = false;
    for _ in 0..5 {
        full = cap.wait_for_line("the disk is full", Duration::from_secs(10));
        if full {
            break;
        }
        send(
            &net.a,
            &["--count", "5000", "--rate", "5000", "--size", "1000"],
        );
    }
    assert!(full, "the capture never said the disk was full");
    // Traffic while the disk is full: dropped and counted, not an end.
    send(
        &net.a,
        &["--count", "5000", "--rate", "5000", "--size", "1000"],
    );
    assert!(cap.running(), "the capture ended on a full disk");
    std::fs::remove_file(&ballast).unwrap();
    assert!(
        cap.wait_for_line("space returned", Duration::from_secs(30)),
        "the capture did not see the space return"
    );
    // Frames of another size after space returned: they must be on disk.
    let late = 4000u64;
    send(
        &net.a,
        &[
            "--count",
            &late.to_string(),
            "--rate",
            "2000",
            "--size",
            "600",
        ],
    );
    assert!(cap.running());
    cap.signal(libc::SIGINT);
    let r = cap.wait(Duration::from_secs(60));
    // Data was lost, so it ends with warnings (exit 1) that say where.
    assert_eq!(r.code(), 1, "{}\n{}", r.stdout(), r.stderr());
    assert!(r.stderr().contains("--on-full drop"), "{}", r.stderr());
    let m = manifest(&ds);
    assert_eq!(m["capture"]["ended_by"], "signal", "{m}");
    no_part_files(&ds);
    assert!(!ds.join(".space-reserve").exists());
    let drops = &m["drops"];
    let count = |k: &str| {
        drops[k]
            .as_u64()
            .unwrap_or_else(|| panic!("drops.{k} missing: {m}"))
    };
    let frames = m["counts"]["frames"].as_u64().unwrap();
    let (records_lost, pcap_lost) = (count("records_write"), count("pcap"));
    // The records are made from what pcap wrote: those of frames pcap
    // kept may or may not have met the full disk (`records_lost`).
    assert!(pcap_lost > 0, "{m}");
    // Stats rows wait in memory while the disk is full: none lost here.
    assert_eq!(count("stats_write"), 0, "{m}");
    let _ = count("flows_write");
    assert_eq!(count("kernel"), 0, "{m}");

    // Records: every frame pcap kept has one on disk unless counted lost
    // (frames cut from a pcap file whose write failed may have one too),
    // and every frame pcap kept after space returned has one.
    let recs = records(&ds);
    let cut = count("pcap_write");
    let kept = frames - pcap_lost;
    assert!(
        (kept.saturating_sub(records_lost)..=kept + cut).contains(&(recs.len() as u64)),
        "{} records: {m}",
        recs.len()
    );
    // pcap: every listed file reads in tcpdump to its listed count; they
    // hold every frame not counted as a pcap drop, and writing resumed.
    let mut in_pcap = 0;
    let mut late_in_pcap = 0;
    for p in m["files"]["pcap"].as_array().unwrap() {
        let path = ds.join(p["path"].as_str().unwrap());
        let n = p["frames"].as_u64().unwrap();
        let got = pcap_frames(&path);
        assert_eq!(got.len() as u64, n, "{}", path.display());
        in_pcap += n;
        late_in_pcap += got.iter().filter(|f| f.len() == 600).count() as u64;
    }
    assert_eq!(in_pcap, frames - pcap_lost, "{m}");
    // The first frames after space returns go while the writer reopens.
    assert!(late_in_pcap > late * 9 / 10, "{late_in_pcap} of {late}");
    assert_eq!(
        recs.iter().filter(|r| r.wire_len == 600).count() as u64,
        late_in_pcap,
        "{m}\n{}",
        r.stderr()
    );
    // Stats: a row for every second, those held while the disk was full
    // included, and the records drops per second add up to the manifest's.
    let rows = stats_rows(&ds);
    assert_eq!(rows.iter().map(|r| r.frames).sum::<u64>(), frames);
    assert_eq!(
        rows.iter().map(|r| r.records_drops).sum::<u64>(),
        records_lost
    );
    // Every Parquet file listed (and every flows file) reads in pyarrow.
    let list = |k: &str| -> Vec<std::path::PathBuf> {
        m["files"][k]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| ds.join(f.as_str().or(f["path"].as_str()).unwrap()))
            .collect()
    };
    let packets = list("packets");
    let flows: Vec<_> = walk(&ds.join("flows"));
    for f in &flows {
        let name = f.file_name().unwrap();
        assert!(
            packets.iter().any(|p| p.file_name() == Some(name)),
            "{} has no packet file",
            f.display()
        );
    }
    let stats = list("stats");
    let mut all = packets.clone();
    all.extend(flows);
    all.extend(stats.iter().cloned());
    let read = pyarrow_rows(&all);
    assert_eq!(read[..packets.len()].iter().sum::<u64>(), recs.len() as u64);
    assert_eq!(
        read[read.len() - stats.len()..].iter().sum::<u64>(),
        rows.len() as u64
    );
    let mut c = weir();
    c.arg("recover").arg(&ds);
    let rec = run_bounded(c, Duration::from_secs(60));
    assert!(rec.stdout().contains("nothing to do"), "{}", rec.stdout());
    assert_verifies(&ds);
    drop(small);
}

/// The dns, tls and http rows of a dataset, each row's key columns (not
/// its times: the live frames carry the capture's clock) as JSON text,
/// sorted; and the rows per table.
fn app_rows(ds: &Path) -> (Vec<String>, [usize; 3]) {
    let queries = [
        "SELECT transport, client_port, server_port, id, status, qname, qtype, rcode, \
         answer_count, answer_data FROM dns",
        "SELECT client_port, server_port, sni, alpn, ja3, ja4, version, cipher, cert_subject \
         FROM tls",
        "SELECT client_port, server_port, method, host, path, user_agent, status, \
         content_type, response_length FROM http",
    ];
    let mut all = Vec::new();
    let mut counts = [0; 3];
    for (i, q) in queries.iter().enumerate() {
        let mut c = weir();
        c.arg("sql").arg(ds).arg(q).arg("--json");
        let r = run_bounded(c, Duration::from_secs(60));
        assert_eq!(r.code(), 0, "weir sql {q}: {}", r.stderr());
        let rows: Vec<serde_json::Value> = serde_json::from_str(&r.stdout()).unwrap();
        counts[i] = rows.len();
        all.extend(rows.iter().map(|v| format!("{i} {v}")));
    }
    all.sort();
    (all, counts)
}

/// The app stage in a capture with default flags: the DNS, TLS and HTTP
/// sessions `weir gen --model app` sends give the same dns, tls and http
/// rows as `weir convert` of the same generator's file; `--no-app`
/// writes none of these tables.
#[test]
fn capture_writes_the_app_tables_unless_no_app() {
    let net = VethPair::new("cap-app");
    let s = Scratch::new("cap-app");
    // The mix holds VLAN-tagged full-size frames (1,522 bytes).
    for ns in [&net.a, &net.b] {
        let out = std::process::Command::new("ip")
            .args(["-n", ns, "link", "set", IFACE, "mtu", "1600"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let gen_args = [
        "--model", "app", "--count", "3000", "--rate", "20000", "--seed", "9",
    ];

    let reference = s.join("ref.pcap");
    let mut cmd = weir();
    cmd.arg("gen").args(gen_args).arg("-w").arg(&reference);
    assert_eq!(run_bounded(cmd, Duration::from_secs(30)).code(), 0);
    let ref_ds = s.join("ref");
    let mut cmd = weir();
    cmd.arg("convert")
        .arg(&reference)
        .arg("-o")
        .arg(&ref_ds)
        .arg("-q");
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let (expect, counts) = app_rows(&ref_ds);
    assert!(
        counts[0] > 50 && counts[1] > 20 && counts[2] > 20,
        "the app mix makes sessions of each kind: {counts:?}"
    );

    for no_app in [false, true] {
        let ds = s.join(if no_app { "no-app" } else { "app" });
        let mut args = vec!["-o", ds.to_str().unwrap(), "--duration", "30s"];
        if no_app {
            args.push("--no-app");
        }
        let cap = capture(&net.b, &args);
        send(&net.a, &gen_args);
        // Whatever was sent has been read off the ring by now.
        std::thread::sleep(Duration::from_millis(300));
        cap.signal(libc::SIGINT);
        let r = cap.wait(Duration::from_secs(30));
        assert_eq!(r.code(), 0, "{}", r.stderr());
        let m = manifest(&ds);
        assert!(m["counts"]["frames"].as_u64().unwrap() >= 3000, "{m}");
        assert_eq!(m["drops"]["kernel"], 0, "{m}");
        let tables = ["dns", "tls", "http"].map(|t| ds.join(t).exists());
        if no_app {
            assert!(m["app"].is_null(), "--no-app: {}", m["app"]);
            assert_eq!(tables, [false; 3], "--no-app wrote app tables");
        } else {
            assert_eq!(tables, [true; 3]);
            let app = &m["app"];
            let rows =
                [&app["dns"], &app["tls"], &app["http"]].map(|v| v.as_u64().unwrap() as usize);
            assert_eq!(rows, counts, "{app}");
            let (got, _) = app_rows(&ds);
            assert!(
                got == expect,
                "captured app rows differ from the converted file's"
            );
        }
    }
}
