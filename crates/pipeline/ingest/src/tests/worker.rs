//! The worker: what it makes of the frames it is handed, its files and
//! counters, its tap, and how a run ends.

use std::sync::{Arc, Mutex};

use store::Dataset;
use wire::{Has, LinkType, PacketRecord};

use super::{Scratch, T0, records_of, traffic, udp};
use crate::app::AppOptions;
use crate::rpc::{RpcMode, RpcOptions};
use crate::worker::{FrameMeta, RecordTap, Worker, WorkerOptions};

fn meta(ts_ns: i64, wire_len: usize) -> FrameMeta {
    FrameMeta {
        ts_ns,
        wire_len: wire_len as u32,
        link: LinkType::ETHERNET,
        iface: 0,
        pcap: None,
    }
}

fn by_time(mut recs: Vec<PacketRecord>) -> Vec<PacketRecord> {
    recs.sort_by_key(|r| r.ts_ns);
    recs
}

/// Every record carries what the caller said of its frame (time, wire
/// length, interface, place in a pcap file) and what the frame holds
/// (captured length, ports, payload length from the headers even where
/// the frame was cut short), and names the worker; the counters add up
/// the same frames.
#[test]
fn records_carry_the_frames_meta_and_contents() {
    let s = Scratch::new("ingest-worker-meta");
    let root = s.join("ds");
    let mut w = Worker::new(
        3,
        Dataset::create(&root, false).unwrap(),
        WorkerOptions::default(),
    );
    let frames = traffic(60);
    for (i, (ts, f)) in frames.iter().enumerate() {
        // Every fifth frame cut to 64 bytes, as a snaplen cuts it.
        let bytes = if i % 5 == 0 {
            &f[..f.len().min(64)]
        } else {
            &f[..]
        };
        let m = FrameMeta {
            iface: 2,
            pcap: (i % 2 == 0).then_some((9, 24 + 100 * i as u64)),
            ..meta(*ts, f.len())
        };
        w.frame(m, bytes).unwrap();
    }
    let done = w.finish().unwrap();
    assert_eq!(done.files.len(), 1, "{:?}", done.files);
    let file = &done.files[0];
    assert_eq!(file.path, "packets/w003-00000.parquet");
    assert_eq!(file.rows, 60);
    assert_eq!((file.ts_min, file.ts_max), (Some(T0), Some(T0 + 59_000)));
    assert!(root.join(&file.path).is_file());

    let recs = by_time(records_of(&root, &done.files));
    assert_eq!(recs.len(), 60);
    for (i, (r, (ts, f))) in recs.iter().zip(&frames).enumerate() {
        let cap = if i % 5 == 0 { f.len().min(64) } else { f.len() };
        assert_eq!(
            (r.ts_ns, r.wire_len, r.cap_len),
            (*ts, f.len() as u32, cap as u32),
            "{i}"
        );
        assert_eq!((r.worker, r.iface), (3, 2), "{i}");
        if i % 2 == 0 {
            assert!(r.has & Has::PCAP != 0, "{i}");
            assert_eq!(
                (r.pcap_file, r.pcap_offset),
                (9, 24 + 100 * i as u64),
                "{i}"
            );
        } else {
            assert_eq!(r.has & Has::PCAP, 0, "{i}: no pcap place was given");
        }
        let flow = (i * 7 % 12) as u16;
        let ports = [40_000 + flow, 9_000 + flow];
        assert!(
            [r.src_port, r.dst_port] == ports || [r.dst_port, r.src_port] == ports,
            "{i}: ports {} {}",
            r.src_port,
            r.dst_port
        );
        assert_eq!(r.ip_proto, if flow % 2 == 0 { 17 } else { 6 }, "{i}");
        assert_eq!(r.payload_len as usize, i * 37 % 1_100, "{i}");
    }
    let st = &done.stats;
    assert_eq!(st.frames, 60);
    let wire: u64 = frames.iter().map(|(_, f)| f.len() as u64).sum();
    let captured: u64 = recs.iter().map(|r| r.cap_len as u64).sum();
    assert_eq!((st.wire_bytes, st.captured_bytes), (wire, captured));
    assert_eq!((st.ts_min, st.ts_max), (T0, T0 + 59_000));
    let counts = st.counts();
    assert_eq!(counts.protocols["ipv4/udp"], 30);
    assert_eq!(counts.protocols["ipv4/tcp"], 30);
    assert!(
        done.rpc.is_none() && done.app.is_none(),
        "no stage was asked for"
    );
}

/// A file holds `rows_per_file` rows, then the next begins, numbered on
/// from `set_next_file`; each finished file is announced to the list
/// `publish_to` gave as it closes, the same summaries `finish` returns.
#[test]
fn files_rotate_by_rows_and_are_announced_as_they_close() {
    let s = Scratch::new("ingest-worker-rotate");
    let root = s.join("ds");
    let opts = WorkerOptions {
        rows_per_file: 100,
        ..Default::default()
    };
    let mut w = Worker::new(1, Dataset::create(&root, false).unwrap(), opts);
    w.set_next_file(7);
    let published = Arc::new(Mutex::new(Vec::new()));
    w.publish_to(published.clone());
    let frames = traffic(250);
    for (i, (ts, f)) in frames.iter().enumerate() {
        w.frame(meta(*ts, f.len()), f).unwrap();
        let announced = published.lock().unwrap().len();
        // A file closes when the frame after its last row comes.
        assert_eq!(announced, i / 100, "after frame {i}");
    }
    let done = w.finish().unwrap();
    let names: Vec<&str> = done.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        names,
        [
            "packets/w001-00007.parquet",
            "packets/w001-00008.parquet",
            "packets/w001-00009.parquet"
        ]
    );
    let rows: Vec<u64> = done.files.iter().map(|f| f.rows).collect();
    assert_eq!(rows, [100, 100, 50]);
    assert_eq!(*published.lock().unwrap(), done.files);
    // Each file holds its own stretch of the frames, none twice.
    let recs = records_of(&root, &done.files);
    let mut ts: Vec<i64> = recs.iter().map(|r| r.ts_ns).collect();
    ts.sort_unstable();
    let want: Vec<i64> = frames.iter().map(|(t, _)| *t).collect();
    assert_eq!(ts, want);
}

/// A file opened ahead of traffic that never came leaves nothing behind
/// and gives its number to the next; `close` ends a file at once; with
/// `file_every` of zero every tick closes a file that has rows, and
/// only one that has.
#[test]
fn empty_files_vanish_and_ticks_close_files_that_have_rows() {
    let s = Scratch::new("ingest-worker-close");
    let root = s.join("ds");
    let opts = WorkerOptions {
        file_every: Some(std::time::Duration::ZERO),
        ..Default::default()
    };
    let mut w = Worker::new(0, Dataset::create(&root, false).unwrap(), opts);
    w.open_file().unwrap();
    w.close().unwrap();
    w.tick().unwrap();
    let f = udp(1, 2, 1000, 2000, b"one");
    w.frame(meta(T0, f.len()), &f).unwrap();
    w.tick().unwrap();
    w.tick().unwrap();
    w.frame(meta(T0 + 1, f.len()), &f).unwrap();
    w.frame(meta(T0 + 2, f.len()), &f).unwrap();
    w.close().unwrap();
    w.close().unwrap();
    let done = w.finish().unwrap();
    let files: Vec<(&str, u64)> = done
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.rows))
        .collect();
    assert_eq!(
        files,
        [
            ("packets/w000-00000.parquet", 1),
            ("packets/w000-00001.parquet", 2)
        ]
    );
    let on_disk = std::fs::read_dir(root.join("packets")).unwrap().count();
    assert_eq!(on_disk, 2, "no empty or .part file is left");
}

/// A worker that was given no frame writes no file and counts nothing.
#[test]
fn a_worker_given_no_frame_writes_nothing() {
    let s = Scratch::new("ingest-worker-nothing");
    let root = s.join("ds");
    let w = Worker::new(
        0,
        Dataset::create(&root, false).unwrap(),
        WorkerOptions::default(),
    );
    assert_eq!((w.rows_lost(), w.flow_slices_lost()), (0, 0));
    let done = w.finish().unwrap();
    assert!(done.files.is_empty());
    assert_eq!(done.stats.frames, 0);
    assert!(!root.join("packets/w000-00000.parquet").exists());
}

/// A packet file that cannot be put in place (its directory went away
/// under it) is an error that names the file; its rows are counted lost,
/// and the worker goes on.
#[test]
fn a_file_that_cannot_be_finished_is_an_error_naming_it_and_its_rows_are_lost() {
    let s = Scratch::new("ingest-worker-lost");
    let root = s.join("ds");
    let mut w = Worker::new(
        0,
        Dataset::create(&root, false).unwrap(),
        WorkerOptions::default(),
    );
    for (ts, f) in traffic(10) {
        w.frame(meta(ts, f.len()), &f).unwrap();
    }
    std::fs::remove_dir_all(root.join("packets")).unwrap();
    let e = w
        .close()
        .expect_err("the file's directory is gone")
        .to_string();
    assert!(e.contains("w000-00000.parquet"), "{e}");
    assert_eq!(w.rows_lost(), 10);
    // Once the directory is back, the next file is made as before.
    std::fs::create_dir_all(root.join("packets")).unwrap();
    let f = udp(1, 2, 1000, 2000, b"after");
    w.frame(meta(T0, f.len()), &f).unwrap();
    let done = w.finish().unwrap();
    assert_eq!(done.files.iter().map(|f| f.rows).sum::<u64>(), 1);
    assert_eq!(done.stats.frames, 11, "the counters saw every frame");
}

/// A tap that keeps what it is given.
struct Keep {
    records: Arc<Mutex<Vec<PacketRecord>>>,
    ticks: Arc<Mutex<u32>>,
}

impl RecordTap for Keep {
    fn record(&mut self, rec: &PacketRecord) {
        self.records.lock().unwrap().push(*rec);
    }
    fn tick(&mut self) {
        *self.ticks.lock().unwrap() += 1;
    }
}

/// The tap gets a copy of every record, in the order of the frames, the
/// same as the file holds; each `tick` is passed on to it.
#[test]
fn the_tap_gets_every_record_as_written_and_each_tick() {
    let s = Scratch::new("ingest-worker-tap");
    let root = s.join("ds");
    let mut w = Worker::new(
        0,
        Dataset::create(&root, false).unwrap(),
        WorkerOptions::default(),
    );
    let (records, ticks) = (Arc::default(), Arc::default());
    w.set_tap(Box::new(Keep {
        records: Arc::clone(&records),
        ticks: Arc::clone(&ticks),
    }));
    let frames = traffic(40);
    for (ts, f) in &frames {
        w.frame(meta(*ts, f.len()), f).unwrap();
    }
    w.tick().unwrap();
    w.tick().unwrap();
    let done = w.finish().unwrap();
    let tapped = records.lock().unwrap().clone();
    let in_order: Vec<i64> = tapped.iter().map(|r| r.ts_ns).collect();
    assert_eq!(in_order, frames.iter().map(|(t, _)| *t).collect::<Vec<_>>());
    assert_eq!(by_time(tapped), by_time(records_of(&root, &done.files)));
    assert_eq!(*ticks.lock().unwrap(), 2);
}

/// Late frames (built from pcap files after the fact) get their records
/// but the DNS stage, which follows conversations in order, does not see
/// them; once the worker is back in order it does.
#[test]
fn late_frames_get_records_but_not_the_stages() {
    let s = Scratch::new("ingest-worker-late");
    let root = s.join("ds");
    let opts = WorkerOptions {
        rpc: Some(RpcOptions {
            mode: RpcMode::Off,
            ..Default::default()
        }),
        app: Some(AppOptions::default()),
        ..Default::default()
    };
    let q = app::dns::build(3, 0x0100, ("a.example", 1, 1), &[]);
    let r = app::dns::build(3, 0x8180, ("a.example", 1, 1), &[(1, 60, &[192, 0, 2, 7])]);
    let exchange = [udp(1, 2, 33333, 53, &q), udp(2, 1, 53, 33333, &r)];

    let mut w = Worker::new(0, Dataset::create(&root, false).unwrap(), opts);
    w.set_late(true);
    for (i, f) in exchange.iter().enumerate() {
        w.frame(meta(T0 + i as i64, f.len()), f).unwrap();
    }
    w.set_late(false);
    let done = w.finish().unwrap();
    assert_eq!(done.stats.frames, 2);
    assert_eq!(records_of(&root, &done.files).len(), 2);
    let app = done.app.expect("the app stage ran");
    let messages = app.counters.get("dns_messages").copied().unwrap_or(0);
    assert_eq!(
        (app.dns, messages),
        (0, 0),
        "late frames are not decoded: {app:?}"
    );
    assert!(done.rpc.is_none(), "the RPC stage is off");

    let root = s.join("ds2");
    let mut w = Worker::new(0, Dataset::create(&root, false).unwrap(), opts);
    for (i, f) in exchange.iter().enumerate() {
        w.frame(meta(T0 + i as i64, f.len()), f).unwrap();
    }
    let app = w.finish().unwrap().app.expect("the app stage ran");
    assert_eq!((app.dns, app.counters["dns_matched"]), (1, 1));
}
