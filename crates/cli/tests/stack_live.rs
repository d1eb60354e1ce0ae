//! `weir stack` on real TCP transfers between two network namespaces that
//! each test makes and removes (tests/traffic/tcp_transfer.py at both
//! ends, bounded in bytes and time). The recorder runs in the root
//! namespace, as a user would run it; the eBPF programs see every
//! namespace, and each test keeps to its own port with --port.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::netns::{IFACE, VethPair};
use common::stack::{
    Server, TRANSFER, send, send_pausing, start_stack, stop_stack, walk_refused_here,
};
use common::*;
use serde_json::Value;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
const LOSSY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/traffic/lossy.bpf.c"
);

fn sql(ds: &Path, q: &str) -> Vec<Value> {
    let mut cmd = weir();
    cmd.arg("sql").arg(ds).arg(q).arg("--json");
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "weir sql {q}: {}", r.stderr());
    let v: Value =
        serde_json::from_str(&r.stdout()).unwrap_or_else(|e| panic!("{e}: {}", r.stdout()));
    v.as_array()
        .cloned()
        .unwrap_or_else(|| panic!("not rows: {v}"))
}

fn num(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("not a number: {v}"))
}

fn one(ds: &Path, q: &str) -> f64 {
    let rows = sql(ds, q);
    assert_eq!(rows.len(), 1, "{q}: {rows:?}");
    let obj = rows[0].as_object().unwrap();
    num(obj.values().next().unwrap())
}

/// The single socket that matches `cond`.
fn cookie_of(ds: &Path, cond: &str) -> u64 {
    let rows = sql(
        ds,
        &format!("SELECT DISTINCT cookie FROM stack WHERE {cond} AND cookie IS NOT NULL"),
    );
    assert_eq!(rows.len(), 1, "sockets where {cond}: {rows:?}");
    num(&rows[0]["cookie"]) as u64
}

fn states(ds: &Path, cookie: u64) -> Vec<(String, String)> {
    sql(
        ds,
        &format!(
            "SELECT old_state, state FROM stack WHERE event = 'state' AND cookie = {cookie} \
             ORDER BY ts"
        ),
    )
    .iter()
    .map(|r| {
        (
            r["old_state"].as_str().unwrap().to_string(),
            r["state"].as_str().unwrap().to_string(),
        )
    })
    .collect()
}

fn has(states: &[(String, String)], from: &str, to: &str) -> bool {
    states.iter().any(|(a, b)| a == from && b == to)
}

#[test]
fn a_tcp_transfer_is_seen_from_the_application_to_the_device() {
    const PORT: u16 = 5601;
    const N: u64 = 3_000_000 + 12_345;
    let net = VethPair::new("stk");
    let s = Scratch::new("stack-transfer");
    let ds = s.join("ds");
    let rec = start_stack(
        &ds,
        &[
            "--events",
            "all",
            "--port",
            "5601",
            "--snapshot-every",
            "200ms",
            "--program-stats",
        ],
    );
    let server = Server::start(&net.b, PORT);
    // Long enough for a snapshot to see the listening socket: the transfer
    // itself may be over within one snapshot interval.
    std::thread::sleep(Duration::from_millis(600));
    let client_port = send(VethPair::exec(&net.a, "python3"), "10.99.0.2", PORT, N);
    assert_eq!(server.received(), N);
    std::thread::sleep(Duration::from_millis(500));
    let r = stop_stack(rec);
    assert!(r.stdout().contains("0 lost"), "{}", r.stdout());

    let client = cookie_of(
        &ds,
        &format!("event = 'send' AND local_port = {client_port}"),
    );
    let server_sock = cookie_of(&ds, &format!("event = 'recv' AND local_port = {PORT}"));
    // What the application wrote and read, exactly.
    assert_eq!(
        one(
            &ds,
            &format!("SELECT sum(bytes) FROM stack WHERE event = 'send' AND cookie = {client}")
        ) as u64,
        N
    );
    assert_eq!(
        one(
            &ds,
            &format!(
                "SELECT sum(bytes) FROM stack WHERE event = 'recv' AND cookie = {server_sock}"
            )
        ) as u64,
        N
    );
    let comm = sql(
        &ds,
        &format!("SELECT DISTINCT comm FROM stack WHERE cookie = {client} AND comm IS NOT NULL"),
    );
    assert_eq!(comm.len(), 1);
    assert!(comm[0]["comm"].as_str().unwrap().starts_with("python"));

    // TCP state on incoming segments, plausible for a veth link.
    let probe = &sql(
        &ds,
        &format!(
            "SELECT count(*) AS n, min(snd_cwnd) AS min_cwnd, max(snd_cwnd) AS max_cwnd, \
             max(srtt_us) AS max_srtt, min(srtt_us) AS min_srtt FROM stack \
             WHERE event = 'tcp_probe' AND cookie = {client}"
        ),
    )[0];
    assert!(num(&probe["n"]) >= 10.0, "{probe}");
    assert!(num(&probe["min_cwnd"]) >= 1.0, "{probe}");
    assert!(num(&probe["max_cwnd"]) >= 10.0, "{probe}");
    assert!(num(&probe["min_srtt"]) >= 1.0, "{probe}");
    assert!(num(&probe["max_srtt"]) < 1_000_000.0, "{probe}");

    // The handshake and the close, on both ends.
    let cs = states(&ds, client);
    assert!(has(&cs, "CLOSE", "SYN_SENT"), "{cs:?}");
    assert!(has(&cs, "SYN_SENT", "ESTABLISHED"), "{cs:?}");
    assert!(has(&cs, "ESTABLISHED", "FIN_WAIT1"), "{cs:?}");
    let ss = states(&ds, server_sock);
    assert!(has(&ss, "SYN_RECV", "ESTABLISHED"), "{ss:?}");
    assert!(has(&ss, "ESTABLISHED", "CLOSE_WAIT"), "{ss:?}");
    assert!(has(&ss, "LAST_ACK", "CLOSE"), "{ss:?}");

    // The device: every payload byte left the client's veth and reached the
    // server's (received frames are joined to the socket by 4-tuple).
    let retrans = one(
        &ds,
        &format!("SELECT count(*) FROM stack WHERE event = 'retransmit' AND cookie = {client}"),
    );
    let dev = &sql(
        &ds,
        &format!(
            "SELECT sum(CASE WHEN event = 'dev_xmit' AND cookie = {client} THEN payload END) AS tx, \
             sum(CASE WHEN event = 'dev_recv' AND cookie = {server_sock} THEN payload END) AS rx, \
             max(CASE WHEN event = 'dev_xmit' AND cookie = {client} THEN dev END) AS dev \
             FROM stack"
        ),
    )[0];
    if retrans == 0.0 {
        assert_eq!(num(&dev["tx"]) as u64, N, "{dev}");
        assert_eq!(num(&dev["rx"]) as u64, N, "{dev}");
    } else {
        assert!(num(&dev["tx"]) as u64 >= N, "{dev}");
    }
    assert_eq!(dev["dev"].as_str(), Some(IFACE));
    // Pure ACKs are recorded at the device by default (the lossy test
    // leaves them out).
    assert!(one(&ds, PURE_ACKS) >= 1.0, "no pure ACK at the device");

    // Snapshots of the sockets in the test's namespaces.
    assert!(
        one(
            &ds,
            &format!("SELECT count(*) FROM stack WHERE event = 'snapshot' AND local_port = {PORT}")
        ) >= 1.0
    );

    // Every event counted; none lost; the counts are in the stats table.
    let m = manifest(&ds);
    let st = &m["stack"];
    assert_eq!(st["ended_by"], "signal");
    let events: u64 = st["events"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    let lost: u64 = st["lost"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(lost, 0);
    assert_eq!(one(&ds, "SELECT count(*) FROM stack") as u64, events);
    // --program-stats: every kept event came from a program run the kernel
    // counted, and the runs took time.
    let cost = st["program_cost"].as_object().expect("program_cost");
    for (name, kept) in st["events"].as_object().unwrap() {
        let kept = kept.as_u64().unwrap();
        if kept == 0 || name == "snapshot" {
            continue; // snapshots come from the iterator, not a traced event
        }
        let program = if name.starts_with("sockops") {
            "sockops"
        } else {
            name
        };
        let c = &cost[program];
        assert!(
            c["runs"].as_u64().unwrap() >= kept,
            "{name}: {c} for {kept} events"
        );
        assert!(c["ns"].as_u64().unwrap() > 0, "{name}: {c}");
    }
    assert!(r.stdout().contains("ns per run"), "{}", r.stdout());
    assert_eq!(
        one(
            &ds,
            "SELECT sum(stack_events) FROM stats WHERE stack_event IS NOT NULL"
        ) as u64,
        events
    );

    // The per-socket analysis.
    let mut cmd = weir();
    cmd.arg("analyze").arg(&ds).args(["stack", "--json"]);
    let plot = s.join("stack.png");
    cmd.arg("--plot").arg(&plot);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(
        r.stderr().contains("from the stack table"),
        "{}",
        r.stderr()
    );
    assert_eq!(one(&ds, "SELECT count(*) FROM stack_intervals"), 0.0);
    assert_eq!(st["mode"], "all");
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    let sock = v["sockets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| num(&r["cookie"]) as u64 == client)
        .expect("the client socket");
    assert_eq!(num(&sock["app_sent"]) as u64, N);
    assert!(num(&sock["dev_sent"]) as u64 >= N);
    assert_eq!(sock["remote_ip"], "10.99.0.2");
    let delays = v["write_to_wire"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| num(&r["cookie"]) as u64 == client)
        .expect("the client's write-to-wire delays");
    let writes = one(
        &ds,
        &format!("SELECT count(*) FROM stack WHERE event = 'send' AND cookie = {client}"),
    );
    assert_eq!(
        num(&delays["writes"]),
        writes,
        "every write reached the wire"
    );
    assert_eq!(num(&delays["bytes"]) as u64, N);
    // Measured from the end of the write call: negative when the segment
    // left while the call still ran, as it mostly does on an idle link.
    assert!(num(&delays["p50_delay_ns"]).abs() < 1e9, "{delays}");
    assert!(num(&delays["max_delay_ns"]) >= num(&delays["p50_delay_ns"]));
    assert!(!v["tcp"].as_array().unwrap().is_empty());
    assert!(std::fs::metadata(&plot).unwrap().len() > 1000);
}

/// The per-packet levels (`--with-delay`): sends, receives, incoming
/// segments and device frames added up per socket in the kernel, read
/// every interval into the stack_intervals table; state changes still one
/// by one.
#[test]
fn the_per_packet_level_adds_up_a_transfer_per_socket_in_the_kernel() {
    if walk_refused_here() {
        return;
    }
    const PORT: u16 = 5605;
    const N: u64 = 5_000_000 + 4_321;
    let net = VethPair::new("sti");
    let s = Scratch::new("stack-intervals");
    let ds = s.join("ds");
    let rec = start_stack(&ds, &["--port", "5605", "--with-delay"]);
    let server = Server::start(&net.b, PORT);
    let client_port = send(VethPair::exec(&net.a, "python3"), "10.99.0.2", PORT, N);
    assert_eq!(server.received(), N);
    // Past an interval's end, so that the close is read too.
    std::thread::sleep(Duration::from_millis(300));
    let r = stop_stack(rec);
    assert!(r.stdout().contains(" 0 lost"), "{}", r.stdout());
    assert!(r.stdout().contains("interval rows"), "{}", r.stdout());

    let one_cookie = |cond: &str| -> u64 {
        let rows = sql(
            &ds,
            &format!("SELECT DISTINCT cookie FROM stack_intervals WHERE {cond}"),
        );
        assert_eq!(rows.len(), 1, "sockets where {cond}: {rows:?}");
        num(&rows[0]["cookie"]) as u64
    };
    let client = one_cookie(&format!("local_port = {client_port}"));
    let server_sock = one_cookie(&format!(
        "local_port = {PORT} AND remote_port = {client_port}"
    ));
    let sum = |col: &str, cookie: u64| -> u64 {
        one(
            &ds,
            &format!("SELECT sum({col}) FROM stack_intervals WHERE cookie = {cookie}"),
        ) as u64
    };
    // What the application wrote and read, exactly.
    assert_eq!(sum("app_sent", client), N);
    assert_eq!(sum("app_received", server_sock), N);
    assert!(sum("app_writes", client) >= 1);
    // What crossed the devices: every payload byte left the client's veth
    // and reached the server's (joined to its socket by 4-tuple in the
    // kernel); more only if something was sent again.
    let retransmits = sum("retransmits", client);
    if retransmits == 0 {
        assert_eq!(sum("dev_sent", client), N);
        assert_eq!(sum("dev_received", server_sock), N);
    } else {
        assert!(sum("dev_sent", client) >= N);
    }
    assert!(sum("dev_frames_sent", client) >= 1);
    assert!(sum("segs_in", client) >= 10, "ACKs reach the client");
    // The handshake and the close were counted, and were recorded one by
    // one in the stack table under the same cookie.
    assert!(sum("state_changes", client) >= 3);
    let cs = states(&ds, client);
    assert!(has(&cs, "SYN_SENT", "ESTABLISHED"), "{cs:?}");
    assert!(has(&cs, "ESTABLISHED", "FIN_WAIT1"), "{cs:?}");
    assert_eq!(
        one(
            &ds,
            "SELECT count(*) FROM stack WHERE event IN \
             ('send', 'recv', 'tcp_probe', 'dev_xmit', 'dev_recv')"
        ),
        0.0,
        "the frequent events are not records in this mode"
    );
    // TCP state columns filled, plausible for a veth link.
    let t = &sql(
        &ds,
        &format!(
            "SELECT count(*) AS n, min(cwnd_min) AS min_cwnd, max(cwnd_max) AS max_cwnd, \
             max(srtt_us_max) AS max_srtt, min(srtt_us_min) AS min_srtt, \
             min(srtt_us_mean) AS min_mean, count(cwnd_last) AS lasts \
             FROM stack_intervals WHERE cookie = {client} AND tcp_samples > 0"
        ),
    )[0];
    assert!(num(&t["n"]) >= 1.0, "{t}");
    assert_eq!(num(&t["lasts"]), num(&t["n"]), "{t}");
    assert!(num(&t["min_cwnd"]) >= 1.0, "{t}");
    assert!(num(&t["max_cwnd"]) >= 10.0, "{t}");
    assert!(num(&t["min_srtt"]) >= 1.0, "{t}");
    assert!(num(&t["min_mean"]) >= num(&t["min_srtt"]), "{t}");
    assert!(num(&t["max_srtt"]) < 1_000_000.0, "{t}");
    // Who used the sockets, and where they are.
    let id = &sql(
        &ds,
        &format!(
            "SELECT max(comm) AS comm, ip_text(max(remote_addr)) AS ip, bool_or(closed) AS closed \
             FROM stack_intervals WHERE cookie = {client}"
        ),
    )[0];
    assert!(id["comm"].as_str().unwrap().starts_with("python"), "{id}");
    assert_eq!(id["ip"], "10.99.0.2");
    assert_eq!(id["closed"], true);

    // Nothing lost at the default ring and map sizes; the intervals are
    // counted like events, in the manifest and the stats table.
    let m = manifest(&ds);
    let st = &m["stack"];
    assert_eq!(st["mode"], "intervals");
    assert_eq!(st["level"], "delay");
    let lost: u64 = st["lost"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(lost, 0, "{st}");
    let rows = one(&ds, "SELECT count(*) FROM stack_intervals") as u64;
    assert_eq!(st["events"]["interval"].as_u64(), Some(rows));
    assert_eq!(
        one(
            &ds,
            "SELECT sum(stack_events) FROM stats WHERE stack_event = 'interval'"
        ) as u64,
        rows
    );

    // The per-socket analysis, from the intervals, says so.
    let mut cmd = weir();
    cmd.arg("analyze").arg(&ds).args(["stack", "--json"]);
    let plot = s.join("stack.png");
    cmd.arg("--plot").arg(&plot);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(
        r.stderr().contains("from the stack_intervals table"),
        "{}",
        r.stderr()
    );
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    let sock = v["sockets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| num(&r["cookie"]) as u64 == client)
        .expect("the client socket");
    assert_eq!(num(&sock["app_sent"]) as u64, N);
    assert!(num(&sock["dev_sent"]) as u64 >= N);
    assert!(num(&sock["max_cwnd"]) >= 10.0);
    assert_eq!(sock["remote_ip"], "10.99.0.2");
    let delays = v["write_to_wire"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| num(&r["cookie"]) as u64 == client)
        .expect("the client's write-to-wire delays");
    assert!(num(&delays["writes"]) >= 1.0, "{delays}");
    assert!(num(&delays["writes"]) <= sum("app_writes", client) as f64);
    assert_eq!(num(&delays["bytes"]) as u64, N);
    assert!(num(&delays["max_delay_ns"]) >= num(&delays["p50_delay_ns"]));
    assert!(num(&delays["max_delay_ns"]) < 1e10, "{delays}");
    assert!(!v["tcp"].as_array().unwrap().is_empty());
    assert!(std::fs::metadata(&plot).unwrap().len() > 1000);
}

/// The walk level (the default) against the per-packet level on the same
/// transfers, recorded at once: the same sockets (the kernel's cookies),
/// the same bytes per socket. Three connections, data going each way
/// between the namespaces; the first two pause past a walk, the third is
/// short enough to open and close between two walks and is counted from
/// its final record.
#[test]
fn the_socket_walk_counts_what_the_per_packet_programs_count() {
    if walk_refused_here() {
        return;
    }
    const PORTS: [u16; 2] = [5606, 5607];
    let net = VethPair::new("stw");
    let s = Scratch::new("stack-walk");
    let (walk_ds, dev_ds) = (s.join("walk"), s.join("device"));
    let common = ["--port", "5606", "--port", "5607", "--interval", "1s"];
    let walk = start_stack(&walk_ds, &common);
    let mut dev_args = common.to_vec();
    dev_args.push("--with-device");
    let dev = start_stack(&dev_ds, &dev_args);
    // a → b, pausing past a walk.
    let server = Server::start(&net.b, PORTS[0]);
    let c1 = send_pausing(
        VethPair::exec(&net.a, "python3"),
        "10.99.0.2",
        PORTS[0],
        3_000_017,
        1.5,
    );
    assert_eq!(server.received(), 3_000_017);
    // b → a, likewise.
    let server = Server::start(&net.a, PORTS[1]);
    let c2 = send_pausing(
        VethPair::exec(&net.b, "python3"),
        "10.99.0.1",
        PORTS[1],
        2_000_003,
        1.5,
    );
    assert_eq!(server.received(), 2_000_003);
    // a → b, a few milliseconds from connect to close.
    let server = Server::start(&net.b, PORTS[0]);
    let c3 = send(
        VethPair::exec(&net.a, "python3"),
        "10.99.0.2",
        PORTS[0],
        20_011,
    );
    assert_eq!(server.received(), 20_011);
    let walk_run = stop_stack(walk);
    let dev_run = stop_stack(dev);
    assert!(
        walk_run.stdout().contains(" 0 lost"),
        "{}",
        walk_run.stdout()
    );
    assert!(dev_run.stdout().contains(" 0 lost"), "{}", dev_run.stdout());
    assert_eq!(manifest(&walk_ds)["stack"]["level"], "walk");
    assert_eq!(manifest(&dev_ds)["stack"]["level"], "device");

    // Per socket, summed over its intervals.
    let per_socket = |ds: &Path, cols: &str| -> std::collections::BTreeMap<u64, Value> {
        sql(
            ds,
            &format!(
                "SELECT cookie, max(local_port) AS lport, max(remote_port) AS rport, \
                 bool_or(closed) AS closed, count(*) AS rows, {cols} \
                 FROM stack_intervals GROUP BY cookie \
                 HAVING coalesce(sum(app_sent), 0) + coalesce(sum(app_received), 0) > 0"
            ),
        )
        .into_iter()
        .map(|r| (num(&r["cookie"]) as u64, r))
        .collect()
    };
    let sums = "sum(app_sent) AS app_sent, sum(app_received) AS app_received, \
                sum(tcp_bytes_sent) AS tcp_sent, sum(tcp_bytes_received) AS tcp_received, \
                sum(tcp_data_segs_out) AS segs_out, sum(tcp_data_segs_in) AS segs_in, \
                sum(dev_sent) AS dev_sent, sum(dev_received) AS dev_received, \
                sum(tcp_bytes_retrans) AS retrans_sent, count(app_writes) AS with_writes";
    let w = per_socket(&walk_ds, sums);
    let d = per_socket(&dev_ds, sums);
    // Six sockets: both ends of three connections (the listeners moved no
    // bytes).
    assert_eq!(w.len(), 6, "{w:?}");
    assert_eq!(
        w.keys().collect::<Vec<_>>(),
        d.keys().collect::<Vec<_>>(),
        "the same sockets"
    );
    let cookie_at = |lport: u16| -> u64 {
        *w.iter()
            .find(|(_, r)| num(&r["lport"]) as u16 == lport)
            .unwrap_or_else(|| panic!("no socket at port {lport}: {w:?}"))
            .0
    };
    let expect = [
        (c1, 3_000_017u64, true),
        (c2, 2_000_003, true),
        (c3, 20_011, false),
    ];
    for (port, n, paused) in expect {
        let client = cookie_at(port);
        let server = *w
            .iter()
            .find(|(_, r)| num(&r["rport"]) as u16 == port)
            .unwrap()
            .0;
        for (cookie, peer, sent, received) in [(client, server, n, 0), (server, client, 0, n)] {
            let (wr, dr) = (&w[&cookie], &d[&cookie]);
            let ctx = format!(
                "socket {cookie}: walk {wr} per-packet {dr}; peer's walk {}",
                w[&peer]
            );
            // What the application wrote and read, exactly, both ways.
            assert_eq!(num(&wr["app_sent"]) as u64, sent, "{ctx}");
            assert_eq!(num(&wr["app_received"]) as u64, received, "{ctx}");
            assert_eq!(num(&dr["app_sent"]) as u64, sent, "{ctx}");
            assert_eq!(num(&dr["app_received"]) as u64, received, "{ctx}");
            // What TCP sent and received against what crossed the device:
            // payload bytes sent equal, retransmissions in both; bytes
            // received count the peer's FIN as one more, and the device
            // also saw again what the peer retransmitted (none on a veth
            // pair unless a loaded machine made a timer fire early).
            assert_eq!(num(&wr["tcp_sent"]), num(&dr["dev_sent"]), "{ctx}");
            let seen_again = num(&dr["dev_received"]) + 1.0 - num(&wr["tcp_received"]);
            assert!(
                (0.0..=num(&w[&peer]["retrans_sent"])).contains(&seen_again),
                "{ctx}"
            );
            // The kernel's segment counts are the same whichever level
            // read them, and there are enough of them for the bytes.
            assert_eq!(num(&wr["segs_out"]), num(&dr["segs_out"]), "{ctx}");
            assert_eq!(num(&wr["segs_in"]), num(&dr["segs_in"]), "{ctx}");
            assert!(num(&wr["segs_out"]) * 65536.0 >= sent as f64, "{ctx}");
            assert!(num(&wr["segs_in"]) * 65536.0 >= received as f64, "{ctx}");
            assert_eq!(wr["closed"], true, "{ctx}");
            // The walk level leaves the per-packet columns empty.
            assert_eq!(num(&wr["with_writes"]), 0.0, "{ctx}");
            assert!(wr["dev_sent"].is_null(), "{ctx}");
            if paused {
                assert!(num(&wr["rows"]) >= 2.0, "walked while open: {ctx}");
            }
        }
    }

    // The analysis says what the walk level leaves empty.
    let mut cmd = weir();
    cmd.arg("analyze").arg(&walk_ds).args(["stack", "--json"]);
    let r = run_bounded(cmd, Duration::from_secs(120));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    assert!(r.stderr().contains("level walk"), "{}", r.stderr());
    assert!(r.stderr().contains("dev_sent"), "{}", r.stderr());
    let v: Value = serde_json::from_str(&r.stdout()).unwrap();
    let sock = v["sockets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| num(&r["cookie"]) as u64 == cookie_at(c1))
        .expect("the first client");
    assert_eq!(num(&sock["app_sent"]) as u64, 3_000_017);
    assert!(v["write_to_wire"].as_array().unwrap().is_empty());
}

/// The walk's TCP state is what `ss -ti` reads from tcp_info: during a
/// pause of a transfer (all acknowledged, nothing changing) `ss` reads
/// the client's cwnd and srtt, and the last walk before the transfer
/// resumed read the same.
#[test]
fn the_walk_reads_the_cwnd_and_srtt_ss_reads() {
    if walk_refused_here() {
        return;
    }
    const PORT: u16 = 5608;
    let net = VethPair::new("sts");
    let s = Scratch::new("stack-ss");
    let ds = s.join("ds");
    let rec = start_stack(&ds, &["--port", "5608", "--interval", "200ms"]);
    let server = Server::start(&net.b, PORT);
    let mut client = VethPair::exec(&net.a, "python3")
        .args([TRANSFER, "send", "10.99.0.2", "5608", "4000000", "1.5"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the client");
    let mut err = std::io::BufReader::new(client.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    assert_eq!(line.trim(), "paused", "the client said {line:?}");
    // While the client waits with everything acknowledged.
    let mut ss = VethPair::exec(&net.a, "ss");
    ss.args(["-tinH", "state", "established", "( dport = :5608 )"]);
    let r = run_bounded(ss, Duration::from_secs(10));
    assert_eq!(r.code(), 0, "ss: {}", r.stderr());
    let text = r.stdout();
    let field = |name: &str| -> f64 {
        let at = text
            .find(&format!(" {name}:"))
            .unwrap_or_else(|| panic!("ss printed no {name}: {text}"));
        text[at + name.len() + 2..]
            .split([' ', '/', '\n'])
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("ss's {name}: {text}"))
    };
    let (ss_cwnd, ss_rtt_ms) = (field("cwnd"), field("rtt"));
    line.clear();
    std::io::BufRead::read_line(&mut err, &mut line).unwrap();
    let resumed: i64 = line
        .trim()
        .strip_prefix("resuming ")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("the client said {line:?}"));
    let out = client.wait_with_output().expect("the client ends");
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    let client_port: u16 = said
        .split_whitespace()
        .nth(2)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the client said {said:?}"));
    assert_eq!(server.received(), 4_000_000);
    let _ = stop_stack(rec);

    // The last walk that read the socket before the transfer resumed (a
    // row's walk ends its interval).
    let rows = sql(
        &ds,
        &format!(
            "SELECT cwnd_last AS cwnd, srtt_us_last AS srtt, tcp_state \
             FROM stack_intervals WHERE local_port = {client_port} \
             AND CAST(ts AS BIGINT) + CAST(interval_ns AS BIGINT) < {resumed} \
             ORDER BY ts DESC LIMIT 1"
        ),
    );
    assert_eq!(rows.len(), 1, "no walk before the pause ended");
    let row = &rows[0];
    assert_eq!(row["tcp_state"], "ESTABLISHED", "{row}");
    assert_eq!(num(&row["cwnd"]), ss_cwnd, "ss: {text} walk: {row}");
    // ss prints srtt in ms with µs precision.
    assert!(
        (num(&row["srtt"]) - ss_rtt_ms * 1000.0).abs() < 1.0,
        "ss: {text} walk: {row}"
    );
}

/// Builds the lossy tc program and attaches it to `veth0`'s ingress in
/// `ns`: loss the sender cannot see (a frame dropped on its own egress is
/// reported back to TCP, which sends it again as if new, not as a
/// retransmission).
fn make_lossy(ns: &str, dir: &Path, permille: u32) {
    let obj: PathBuf = dir.join("lossy.o");
    let mut cc = tool("clang");
    cc.args([
        "-O2",
        "-g",
        "-target",
        "bpf",
        "-I/usr/include/x86_64-linux-gnu",
    ])
    .arg(format!("-DDROP_PERMILLE={permille}"))
    .args(["-c", LOSSY, "-o"])
    .arg(&obj);
    let r = run_bounded(cc, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "clang: {}", r.stderr());
    for args in [
        vec!["qdisc", "add", "dev", IFACE, "clsact"],
        vec![
            "filter",
            "add",
            "dev",
            IFACE,
            "ingress",
            "bpf",
            "da",
            "obj",
            obj.to_str().unwrap(),
            "sec",
            "tc",
        ],
    ] {
        let mut c = VethPair::exec(ns, "tc");
        c.args(&args);
        let r = run_bounded(c, Duration::from_secs(30));
        assert_eq!(r.code(), 0, "tc {args:?}: {}", r.stderr());
    }
}

#[test]
fn a_lossy_link_shows_retransmissions() {
    const PORT: u16 = 5602;
    const N: u64 = 20_000_000;
    let net = VethPair::new("stl");
    let s = Scratch::new("stack-lossy");
    // 2 % of the frames reaching the server (each up to 64 KiB: GSO) are
    // dropped.
    make_lossy(&net.b, &s.0, 20);
    let ds = s.join("ds");
    let rec = start_stack(
        &ds,
        &["--events", "all", "--port", "5602", "--no-device-acks"],
    );
    let server = Server::start(&net.b, PORT);
    let client_port = send(VethPair::exec(&net.a, "python3"), "10.99.0.2", PORT, N);
    assert_eq!(
        server.received(),
        N,
        "TCP delivers everything despite the loss"
    );
    std::thread::sleep(Duration::from_millis(300));
    stop_stack(rec);
    let client = cookie_of(
        &ds,
        &format!("event = 'send' AND local_port = {client_port}"),
    );
    let r = &sql(
        &ds,
        &format!(
            "SELECT sum(CASE WHEN event = 'retransmit' THEN 1 ELSE 0 END) AS n, \
             sum(CASE WHEN event = 'retransmit' THEN bytes ELSE 0 END) AS bytes, \
             max(total_retrans) AS total FROM stack WHERE cookie = {client}"
        ),
    )[0];
    assert!(num(&r["n"]) >= 1.0, "2% loss and no retransmission? {r}");
    assert!(num(&r["bytes"]) >= 1.0, "{r}");
    // The socket's own count (read on later events) agrees there were some.
    assert!(num(&r["total"]) >= 1.0, "{r}");
    // Retransmitted segments also left through the device: the device saw
    // more payload than the application wrote.
    let tx = one(
        &ds,
        &format!("SELECT sum(payload) FROM stack WHERE event = 'dev_xmit' AND cookie = {client}"),
    );
    assert!(tx as u64 > N, "device payload {tx} vs {N} written");
    // --no-device-acks: no pure ACK at the device, the data frames all there.
    assert_eq!(one(&ds, PURE_ACKS), 0.0);
    assert_eq!(manifest(&ds)["stack"]["device_acks"], false);
}

/// Device events of TCP frames with no payload and no SYN, FIN or RST.
const PURE_ACKS: &str = "SELECT count(*) FROM stack WHERE event IN ('dev_xmit', 'dev_recv') \
     AND proto = 6 AND payload = 0 AND tcp_flags & 7 = 0";

#[test]
fn a_tiny_ring_buffer_loses_events_and_counts_every_one() {
    const PORT: u16 = 5603;
    const N: u64 = 30_000_000;
    let net = VethPair::new("stt");
    let s = Scratch::new("stack-tiny");
    let ds = s.join("ds");
    // One page: room for about 22 events between two reads.
    let rec = start_stack(
        &ds,
        &["--events", "all", "--port", "5603", "--ring-size", "4Ki"],
    );
    let server = Server::start(&net.b, PORT);
    send(VethPair::exec(&net.a, "python3"), "10.99.0.2", PORT, N);
    assert_eq!(server.received(), N);
    std::thread::sleep(Duration::from_millis(300));
    let r = stop_stack(rec);
    assert!(r.stdout().contains("lost by type"), "{}", r.stdout());
    let m = manifest(&ds);
    let sum = |k: &str| -> u64 {
        m["stack"][k]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum()
    };
    let (events, lost) = (sum("events"), sum("lost"));
    assert!(lost > 0, "a 4 KiB ring kept up with a 30 MB transfer?");
    assert!(events > 0, "nothing got through at all");
    // What was written and what was lost are both in the data.
    assert_eq!(one(&ds, "SELECT count(*) FROM stack") as u64, events);
    let st = &sql(
        &ds,
        "SELECT sum(stack_events) AS e, sum(stack_lost) AS l FROM stats \
         WHERE stack_event IS NOT NULL",
    )[0];
    assert_eq!(num(&st["e"]) as u64, events);
    assert_eq!(num(&st["l"]) as u64, lost);
}

/// A cgroup v2 directory for the test, removed when dropped.
struct Cgroup(PathBuf);

impl Cgroup {
    fn new(name: &str) -> Option<Cgroup> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
        let root = mounts.lines().find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
        })?;
        let dir = root.join(format!("weir-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        Some(Cgroup(dir))
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_cgroup_keeps_its_own_sockets_and_gets_sock_ops_callbacks() {
    const PORT: u16 = 5604;
    const N: u64 = 1_000_000;
    let cg = Cgroup::new("stc").expect("a cgroup2 hierarchy (the kernel's cgroup v2)");
    let net = VethPair::new("stc");
    let s = Scratch::new("stack-cgroup");
    let ds = s.join("ds");
    let rec = start_stack(
        &ds,
        &[
            "--events",
            "all",
            "--port",
            "5604",
            "--cgroup",
            cg.0.to_str().unwrap(),
        ],
    );
    let server = Server::start(&net.b, PORT);
    // The client joins the cgroup before it execs into the namespace.
    let mut c = Command::new("sh");
    c.args([
        "-c",
        r#"echo $$ > "$1/cgroup.procs" && shift && exec "$@""#,
        "sh",
        cg.0.to_str().unwrap(),
        "ip",
        "netns",
        "exec",
        &net.a,
        "python3",
    ]);
    let client_port = send(c, "10.99.0.2", PORT, N);
    assert_eq!(server.received(), N);
    std::thread::sleep(Duration::from_millis(300));
    stop_stack(rec);
    // Only the client's socket: the server is outside the cgroup.
    assert_eq!(
        one(
            &ds,
            &format!("SELECT count(*) FROM stack WHERE event = 'recv' AND local_port = {PORT}")
        ),
        0.0
    );
    let client = cookie_of(
        &ds,
        &format!("event = 'send' AND local_port = {client_port}"),
    );
    assert_eq!(
        one(
            &ds,
            &format!("SELECT sum(bytes) FROM stack WHERE event = 'send' AND cookie = {client}")
        ) as u64,
        N
    );
    // sock_ops: RTT callbacks for the client's socket, with the same cookie.
    let rtt = &sql(
        &ds,
        &format!(
            "SELECT count(*) AS n, max(srtt_us) AS srtt FROM stack \
             WHERE event = 'sockops_rtt' AND cookie = {client}"
        ),
    )[0];
    assert!(num(&rtt["n"]) >= 1.0, "{rtt}");
    assert!(num(&rtt["srtt"]) >= 1.0, "{rtt}");
    let st = states(&ds, client);
    assert!(has(&st, "SYN_SENT", "ESTABLISHED"), "{st:?}");
}

#[test]
fn bad_options_and_missing_privileges_are_clear_errors() {
    let s = Scratch::new("stack-errors");
    let ds = s.join("ds");
    for (args, says) in [
        (vec!["--ring-size", "5000"], "power of two"),
        (vec!["--comm", "a-name-longer-than-15"], "15 bytes"),
        (vec!["--pid", "1"], "add --with-device"),
        (
            vec!["--events", "all", "--with-device"],
            "give one or the other",
        ),
        (
            vec!["--cgroup", "/nonexistent/cgroup"],
            "give a cgroup v2 directory",
        ),
    ] {
        let mut cmd = weir();
        cmd.arg("stack").arg("-o").arg(&ds).args(&args);
        let r = run_bounded(cmd, Duration::from_secs(30));
        assert_eq!(r.code(), 1, "{args:?}");
        assert!(r.stderr().contains(says), "{args:?}: {}", r.stderr());
    }
    // Without CAP_BPF and CAP_PERFMON it says which are missing and how to
    // get them, before touching anything.
    let mut c = Command::new("setpriv");
    c.args(AS_NOBODY)
        .args([WEIR, "stack", "-o"])
        .arg(s.join("noroot"))
        .args(["--duration", "1s"]);
    let r = run_bounded(c, Duration::from_secs(30));
    assert_eq!(r.code(), 1);
    assert!(
        r.stderr().contains("CAP_BPF") && r.stderr().contains("run it as root"),
        "{}",
        r.stderr()
    );
    assert!(!s.join("noroot").exists());
}
