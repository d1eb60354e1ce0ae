//! `capture_run`: the options a capture refuses before it opens anything,
//! and the live capture it plans from the others (no ring is opened).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use capture::Interface;
use store::manifest::KafkaInfo;

use super::Scratch;
use crate::capture_run::{
    CaptureOptions, CaptureScope, PcapKeeping, PcapPolicy, RecordStream, Target, capture,
    filter_asks_for_rpc, live_options,
};
use crate::rpc::{RpcMode, RpcOptions};

fn options(target: Target) -> CaptureOptions {
    CaptureOptions {
        interfaces: vec!["lo".into()],
        target,
        workers: None,
        ring_bytes: None,
        ring_block: 4 << 20,
        scope: CaptureScope {
            snaplen: 262_144,
            filter: None,
            shard: None,
            fanout: Default::default(),
            promiscuous: true,
            count: None,
            duration: None,
        },
        pcap: PcapPolicy {
            rotate_size: None,
            rotate_time: None,
            staging_bytes: None,
            records_lag: None,
            on_full: Default::default(),
            keep: PcapKeeping {
                codec: pcapio::seekable::Codec::None,
                direct: true,
                max_disk: None,
                max_age: None,
            },
        },
        records_every: Duration::from_secs(10),
        rpc: RpcOptions::default(),
        app: Default::default(),
        user: None,
        sign_key: None,
        publisher: None,
        publish_wait: Duration::ZERO,
        command: "weir capture (a test)".into(),
    }
}

fn dataset(dir: &Path) -> Target {
    Target::Dataset {
        dir: dir.to_path_buf(),
        force: false,
        pcap: true,
        records: true,
    }
}

/// A record stream that must not be reached.
struct Unused;

impl RecordStream for Unused {
    fn taps(&self) -> crate::Taps {
        unreachable!("the capture was to be refused before its taps were made")
    }
    fn finish(self: Box<Self>, _: &mut Vec<String>) -> KafkaInfo {
        KafkaInfo::default()
    }
}

/// `capture`'s error for options it must refuse before opening anything
/// (told to stop at once, should it start all the same).
fn refused(o: CaptureOptions, stream: Option<Box<dyn RecordStream>>) -> String {
    let stop = AtomicBool::new(true);
    match capture(o, stream, &stop, |_| {}) {
        Ok(_) => panic!("the capture started"),
        Err(e) => e,
    }
}

/// Each option that cannot work is refused with an error that names the
/// flag or the interface or the directory and says what would, and no
/// dataset is made.
#[test]
fn options_that_cannot_work_are_refused_before_anything_is_opened() {
    let s = Scratch::new("ingest-capture-refused");
    let ds = s.join("ds");
    type Change = Box<dyn Fn(&mut CaptureOptions)>;
    let cases: [(Change, &[&str]); 5] = [
        (
            Box::new(|o: &mut CaptureOptions| o.scope.snaplen = 10),
            &["-s 10 is too short", "at least 64"],
        ),
        (
            Box::new(|o: &mut CaptureOptions| o.ring_block = 5_000),
            &["--ring-block 5000", "power of two"],
        ),
        (
            Box::new(|o: &mut CaptureOptions| o.ring_block = 128 << 20),
            &["--ring-block 134217728", "64Mi"],
        ),
        (
            Box::new(|o: &mut CaptureOptions| o.records_every = Duration::from_millis(500)),
            &["--records-every 500ms", "at least 1s"],
        ),
        (
            Box::new(|o: &mut CaptureOptions| o.interfaces = vec!["weir-nosuch0".into()]),
            &["no interface named \"weir-nosuch0\"", "ip link"],
        ),
    ];
    for (change, words) in cases {
        let mut o = options(dataset(&ds));
        change(&mut o);
        let e = refused(o, None);
        for w in words {
            assert!(e.contains(w), "{w:?} not in {e:?}");
        }
        assert!(!ds.exists(), "{e}: the dataset was made");
    }

    // Streaming records needs records.
    let target = Target::Dataset {
        dir: ds.clone(),
        force: false,
        pcap: true,
        records: false,
    };
    let e = refused(options(target), Some(Box::new(Unused)));
    assert!(e.contains("--kafka streams the packet records"), "{e}");
    assert!(!ds.exists());

    // A directory that holds something else, and a dataset without --force.
    std::fs::create_dir_all(&ds).unwrap();
    std::fs::write(ds.join("notes.txt"), "mine").unwrap();
    let e = refused(options(dataset(&ds)), None);
    let named = e.contains(&ds.display().to_string());
    assert!(named && e.contains("exists and is not empty"), "{e}");
    std::fs::remove_file(ds.join("notes.txt")).unwrap();
    store::Dataset::create(&ds, false).unwrap();
    std::fs::write(ds.join(store::dataset::MANIFEST), "{}").unwrap();
    let e = refused(options(dataset(&ds)), None);
    assert!(e.contains("is already a weir dataset; pass --force"), "{e}");
    assert_eq!(
        std::fs::read_to_string(ds.join(store::dataset::MANIFEST)).unwrap(),
        "{}"
    );

    // -w into a directory that is not there.
    let file = s.join("nowhere/out.pcap");
    let e = refused(options(Target::PcapFile(file)), None);
    assert!(
        e.contains("nowhere") && e.contains("cannot write there"),
        "{e}"
    );
}

fn iface(name: &str) -> Interface {
    Interface {
        name: name.into(),
        index: 7,
        arphrd: 1,
        mtu: 1500,
        up: true,
    }
}

/// A dataset capture on two interfaces: a worker per core on each unless
/// told, rings of at least four blocks, the pcap files in the dataset's
/// `pcap/` turning over with the records, the staging and the records'
/// lag shared by the rings, the workers' stages and file age as asked.
#[test]
fn a_dataset_capture_is_planned_with_the_machines_defaults() {
    let s = Scratch::new("ingest-capture-plan");
    let dir = s.join("ds");
    let mut o = options(dataset(&dir));
    o.ring_bytes = Some(1 << 20);
    o.pcap.staging_bytes = Some(256 << 20);
    o.pcap.records_lag = Some(64 << 20);
    let live = live_options(&o, vec![iface("a0"), iface("a1")]).unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(live.workers_per_iface, cores);
    let rings = 2 * cores;
    assert_eq!((live.ring.block_size, live.ring.block_count), (4 << 20, 4));
    assert!(live.records);
    assert!(live.taps.is_none());
    let pcap = live.pcap.as_ref().expect("pcap files");
    assert_eq!(pcap.dir, dir.join(store::dataset::PCAP_DIR));
    assert_eq!(pcap.single_name, None);
    assert_eq!(
        (pcap.rotate, pcap.rotate_bytes),
        (Some(o.records_every), None)
    );
    assert_eq!(pcap.staging_bytes, ((256usize << 20) / rings).max(1 << 20));
    assert_eq!(pcap.records_lag, Some((64usize << 20) / rings));
    assert_eq!(live.worker.file_every, Some(o.records_every));
    assert_eq!(live.worker.rpc.map(|r| r.mode), Some(RpcMode::Auto));
    assert!(live.worker.app.is_some_and(|a| a.on));
    assert!(!dir.exists(), "planning makes nothing");

    o.workers = Some(0);
    o.user = Some("nobody".into());
    o.pcap.keep.max_disk = Some(1 << 30);
    let live = live_options(&o, vec![iface("a0")]).unwrap();
    assert_eq!(live.workers_per_iface, 1, "at least one worker");
    assert!(!live.keeps_privileges, "-Z gives the privileges up");
    let pcap = live.pcap.as_ref().unwrap();
    // A ring of about sixteen files, not turned over by time.
    assert_eq!((pcap.rotate_bytes, pcap.rotate), (Some(64 << 20), None));

    o.pcap.rotate_size = Some(5 << 20);
    o.pcap.keep.max_disk = Some(1 << 20);
    let live = live_options(&o, vec![iface("a0")]).unwrap();
    assert_eq!(live.pcap.as_ref().unwrap().rotate_bytes, Some(5 << 20));

    o.target = Target::Dataset {
        dir: dir.clone(),
        force: false,
        pcap: false,
        records: true,
    };
    assert!(live_options(&o, vec![iface("a0")]).unwrap().pcap.is_none());
}

/// `-w FILE`: one worker unless told, the file's own name in its
/// directory, no records, turned over only as asked.
#[test]
fn a_pcap_file_capture_is_one_named_file_without_records() {
    let s = Scratch::new("ingest-capture-plan-w");
    let file = s.join("out.pcap");
    let live = live_options(&options(Target::PcapFile(file.clone())), vec![iface("a0")]).unwrap();
    assert_eq!(live.workers_per_iface, 1);
    assert!(!live.records);
    let pcap = live.pcap.as_ref().unwrap();
    assert_eq!(pcap.dir, file.parent().unwrap());
    assert_eq!(pcap.single_name.as_deref(), Some("out.pcap"));
    assert_eq!((pcap.rotate, pcap.rotate_bytes), (None, None));
}

/// A filter that keeps RPC traffic switches the RPC stage on from the
/// first frame, unless it was switched off; other filters leave it be.
#[test]
fn a_filter_for_rpc_traffic_starts_the_rpc_stage_at_once() {
    for (f, asks) in [
        ("udp port 2049", true),
        ("tcp port 111 or port 80", true),
        ("host 192.0.2.1 and port nfs", true),
        ("port sunrpc", true),
        ("port 20490", false),
        ("port 80", false),
        ("nfsd", false),
    ] {
        assert_eq!(filter_asks_for_rpc(Some(f)), asks, "{f}");
    }
    assert!(!filter_asks_for_rpc(None));

    let s = Scratch::new("ingest-capture-plan-rpc");
    for (mode, filter, want) in [
        (RpcMode::Auto, Some("port 2049"), RpcMode::On),
        (RpcMode::Auto, Some("port 80"), RpcMode::Auto),
        (RpcMode::Auto, None, RpcMode::Auto),
        (RpcMode::Off, Some("port 2049"), RpcMode::Off),
    ] {
        let mut o = options(dataset(&s.join("ds")));
        o.rpc.mode = mode;
        o.scope.filter = filter.map(String::from);
        let live = live_options(&o, vec![iface("a0")]).unwrap();
        assert_eq!(
            live.worker.rpc.map(|r| r.mode),
            Some(want),
            "{mode:?} {filter:?}"
        );
        assert_eq!(live.scope.filter.as_deref(), filter);
    }
}
