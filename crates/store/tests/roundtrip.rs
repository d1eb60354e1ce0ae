use std::path::PathBuf;

use parquet::basic::Compression;
use parquet::file::reader::{FileReader, SerializedFileReader};

use pqcodec::encode::EncodeOptions;
use store::read::read_packet_file;
use store::{PacketWriter, PacketWriterOptions, RowOrder};
use wire::{Has, PacketRecord, ParseError, Tunnel, TunnelHas};

use testdata::Rng;

/// Zeroes the fields that `has` says are absent, as a reader returns them.
fn normalize(mut r: PacketRecord) -> PacketRecord {
    let h = r.has;
    if h & Has::ETH_SRC == 0 {
        r.eth_src = [0; 6];
    }
    if h & Has::ETH_DST == 0 {
        r.eth_dst = [0; 6];
    }
    if h & Has::VLAN == 0 {
        r.vlan = 0;
    }
    if h & Has::ETHERTYPE == 0 {
        r.ethertype = 0;
    }
    if h & Has::IP == 0 {
        (
            r.ip_version,
            r.ip_src,
            r.ip_dst,
            r.ip_len,
            r.ip_hdr_len,
            r.ip_proto,
            r.ttl,
            r.dscp,
        ) = (0, [0; 16], [0; 16], 0, 0, 0, 0, 0);
    }
    if h & Has::IP_ID == 0 {
        r.ip_id = 0;
    }
    if h & Has::FRAG == 0 {
        r.frag = 0;
    }
    if h & Has::PORTS == 0 {
        (r.src_port, r.dst_port) = (0, 0);
    }
    if h & Has::TCP == 0 {
        (r.tcp_flags, r.tcp_seq, r.tcp_ack, r.tcp_win, r.tcp_hdr_len) = (0, 0, 0, 0, 0);
    }
    if h & Has::UDP == 0 {
        r.udp_len = 0;
    }
    if h & Has::ICMP == 0 {
        (r.icmp_type, r.icmp_code) = (0, 0);
    }
    if h & Has::PAYLOAD == 0 {
        r.payload_len = 0;
    }
    if h & Has::FLOW == 0 {
        r.flow_hash = 0;
    }
    if h & Has::PCAP == 0 {
        (r.pcap_file, r.pcap_offset) = (0, 0);
    }
    if r.tunnel.has & TunnelHas::OUTER_IP == 0 {
        (r.tunnel.outer_src, r.tunnel.outer_dst) = ([0; 16], [0; 16]);
    }
    if r.tunnel.has & TunnelHas::ID == 0 {
        r.tunnel.id = 0;
    }
    r
}

/// Records with every mix of present and absent fields, flows that repeat
/// (so dictionaries and runs are exercised) and a few wild values (so the
/// fallbacks are too).
fn records(n: usize, seed: u64) -> Vec<PacketRecord> {
    let mut rng = Rng(seed);
    let mut ts = 1_700_000_000_000_000_000i64;
    (0..n)
        .map(|i| {
            ts += (rng.next() % 5000) as i64 + 1;
            let flow = rng.next() % 300;
            let wild = rng.next() % 50 == 0;
            let mut r = PacketRecord::new(ts, 60 + (flow as u32 * 7) % 1454, 60);
            r.worker = (flow % 3) as u16;
            r.iface = (flow % 2) as u16;
            r.has = (rng.next() as u16) & 0x3fff;
            r.eth_src = [2, 0, 0, 0, (flow >> 8) as u8, flow as u8];
            r.eth_dst = [2, 0, 0, 0, 0, (flow % 7) as u8];
            r.vlan = (flow % 4096) as u16;
            r.ethertype = [0x0800, 0x86dd, 0x0806][flow as usize % 3];
            r.ip_version = [4, 6][flow as usize % 2];
            r.ip_src[15] = flow as u8;
            r.ip_src[0] = if wild { rng.next() as u8 } else { 0xfd };
            r.ip_dst[15] = (flow * 3) as u8;
            r.ip_len = if wild {
                rng.next() as u32
            } else {
                40 + flow as u32
            };
            r.ip_hdr_len = 20;
            r.ip_proto = [6, 17, 1][flow as usize % 3];
            r.ttl = 64;
            r.dscp = (flow % 64) as u8;
            r.ip_id = i as u32 * 3;
            r.frag = 0x4000;
            r.src_port = 1024 + flow as u16;
            r.dst_port = 443;
            r.tcp_flags = 0x18;
            r.tcp_seq = (flow as u32)
                .wrapping_mul(0x9e37_79b9)
                .wrapping_add(i as u32 * 1448);
            r.tcp_ack = if wild {
                rng.next() as u32
            } else {
                7 * i as u32
            };
            r.tcp_win = 501;
            r.tcp_hdr_len = 32;
            r.udp_len = 100;
            r.icmp_type = 8;
            r.payload_len = 1448;
            r.flow_hash = (flow as u32).wrapping_mul(0x0101_0101);
            r.pcap_file = (i / 1000) as u32;
            r.pcap_offset = 24 + i as u64 * 100;
            r.parse_error = ParseError::ALL[(rng.next() % 30) as usize % ParseError::ALL.len()];
            r.tunnel.kind = Tunnel::ALL[(flow / 3) as usize % Tunnel::ALL.len()];
            r.tunnel.depth = (flow % 5) as u8;
            r.tunnel.has = (rng.next() % 4) as u8;
            r.tunnel.outer_src = wire::ip::v4_mapped([192, 0, 2, flow as u8]);
            r.tunnel.outer_dst[0] = 0x20;
            r.tunnel.outer_dst[15] = (flow / 2) as u8;
            r.tunnel.id = if wild {
                rng.next() as u32
            } else {
                flow as u32 * 4099
            };
            normalize(r)
        })
        .collect()
}

/// A file in this test binary's directory under the target directory (not
/// /tmp, where each run left its own directory behind), emptied once per run.
fn tmp(name: &str) -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("store-roundtrip");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    });
    dir.join(name)
}

fn write(recs: &[PacketRecord], name: &str, opts: PacketWriterOptions) -> PathBuf {
    let path = tmp(name);
    let mut w = PacketWriter::create(&path, name, opts).unwrap();
    for r in recs {
        w.push(r).unwrap();
    }
    let summary = w.finish().unwrap();
    assert_eq!(summary.rows, recs.len() as u64);
    assert!(path.exists() && !tmp(&format!(".{name}.part")).exists());
    path
}

#[test]
fn arrival_order_round_trips_exactly() {
    let recs = records(20_000, 7);
    let opts = PacketWriterOptions {
        prefault: false,
        flows: false,
        row_group_rows: 7000,
        order: RowOrder::Arrival,
        encode: EncodeOptions {
            page_rows: 1024,
            ..Default::default()
        },
    };
    let path = write(&recs, "arrival.parquet", opts);
    let back = read_packet_file(&path).unwrap();
    assert_eq!(back.len(), recs.len());
    for (a, b) in recs.iter().zip(&back) {
        assert_eq!(a, b);
    }
    // A chunk is compressed only where zstd pays: times climbing by random
    // steps are stored as they are, offsets climbing by one step (delta
    // runs zstd halves) compressed; both read back the same, above.
    let file = SerializedFileReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    for rg in file.metadata().row_groups() {
        let codec = |name: &str| {
            rg.columns()
                .iter()
                .find(|c| c.column_path().string() == name)
                .map(|c| c.compression())
                .unwrap()
        };
        assert_eq!(codec("ts"), Compression::UNCOMPRESSED);
        assert!(matches!(codec("pcap_offset"), Compression::ZSTD(_)));
    }
}

#[test]
fn flow_order_keeps_every_row_and_groups_flows() {
    let recs = records(30_000, 11);
    let opts = PacketWriterOptions {
        prefault: true,
        flows: false,
        row_group_rows: 10_000,
        order: RowOrder::Flow,
        encode: EncodeOptions {
            page_rows: 4096,
            ..Default::default()
        },
    };
    let back = read_packet_file(&write(&recs, "flow.parquet", opts)).unwrap();
    assert_eq!(back.len(), recs.len());
    // Same rows within each row group, and within a group a flow's rows are
    // contiguous and in arrival order.
    for (g, (a, b)) in recs.chunks(10_000).zip(back.chunks(10_000)).enumerate() {
        let mut x = a.to_vec();
        let mut y = b.to_vec();
        x.sort_by_key(|r| r.ts_ns);
        y.sort_by_key(|r| r.ts_ns);
        assert_eq!(x, y, "row group {g}");
        let mut seen_done = std::collections::HashSet::new();
        let mut last: Option<&PacketRecord> = None;
        for r in b.iter().filter(|r| r.has & Has::FLOW != 0) {
            if let Some(l) = last {
                if l.flow_hash != r.flow_hash {
                    assert!(seen_done.insert(l.flow_hash), "flow split in group {g}");
                } else if l.flow_reversed() == r.flow_reversed() {
                    assert!(l.ts_ns < r.ts_ns);
                }
            }
            last = Some(r);
        }
    }
}

/// The writer keeps tunnel fields beside a bucket's rows only from its first
/// tunnelled row on: rows without a tunnel before it, rows of a bucket that
/// never sees one, and a flow whose rows come with and without a tunnel
/// (one stretch of repeated flow columns broken by the tunnel alone) all
/// read back as written, in both row orders and across row groups.
#[test]
fn tunnel_fields_start_mid_bucket_and_stop_at_row_groups() {
    let recs: Vec<PacketRecord> = records(24_000, 31)
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            // No tunnel in the first third, and none in every third row group
            // of 5,000 rows; the rest alternate by row within each flow.
            if i < 8_000 || (i / 5_000) % 3 == 0 || i % 2 == 0 {
                r.tunnel = wire::TunnelFields::NONE;
            }
            r
        })
        .collect();
    let untunnelled = recs.iter().filter(|r| r.tunnel.is_none()).count();
    assert!(
        untunnelled > 12_000 && untunnelled < 24_000,
        "{untunnelled}"
    );
    for order in [RowOrder::Arrival, RowOrder::Flow] {
        let opts = PacketWriterOptions {
            prefault: false,
            flows: false,
            row_group_rows: 5_000,
            order,
            encode: EncodeOptions {
                page_rows: 1024,
                ..Default::default()
            },
        };
        let name = format!("tunnels-{order:?}.parquet");
        let back = read_packet_file(&write(&recs, &name, opts)).unwrap();
        for (g, (a, b)) in recs.chunks(5_000).zip(back.chunks(5_000)).enumerate() {
            let (mut x, mut y) = (a.to_vec(), b.to_vec());
            x.sort_by_key(|r| r.ts_ns);
            y.sort_by_key(|r| r.ts_ns);
            assert_eq!(x, y, "{order:?}, row group {g}");
        }
    }
}

#[test]
fn empty_and_tiny_files() {
    for n in [0, 1, 2, 9, 129] {
        let recs = records(n, 3);
        let name = format!("tiny{n}.parquet");
        let back = read_packet_file(&write(&recs, &name, PacketWriterOptions::default())).unwrap();
        assert_eq!(back.len(), n);
    }
}

/// Rows of a flow that repeat its constant columns (the writer extends those
/// columns' runs once per stretch), broken now and then by a changed TTL, a
/// missing field or a parse error, across small pages and a dictionary that
/// overflows into its fallback encoding.
#[test]
fn repeated_flow_columns_round_trip_exactly() {
    let mut recs = records(40_000, 23);
    for (i, r) in recs.iter_mut().enumerate() {
        let flow = r.flow_hash.wrapping_mul(0xc2b2_ae35) >> 28;
        r.has = 0x3fff & !((flow as u16 & 3) << 5);
        r.parse_error = ParseError::None;
        if i % 97 == 0 {
            r.ttl = 63;
        }
        if i % 331 == 0 {
            r.has &= !Has::ETH_DST;
            r.parse_error = ParseError::TruncatedTcp;
        }
        *r = normalize(*r);
    }
    let opts = PacketWriterOptions {
        flows: false,
        row_group_rows: 15_000,
        order: RowOrder::Flow,
        encode: EncodeOptions {
            page_rows: 1000,
            dict_limit: 100,
            ..Default::default()
        },
        prefault: false,
    };
    let mut back = read_packet_file(&write(&recs, "repeats.parquet", opts)).unwrap();
    assert_eq!(back.len(), recs.len());
    // Flow order changes the order within a row group, not the rows.
    for (a, b) in recs.chunks(15_000).zip(back.chunks_mut(15_000)) {
        let mut a = a.to_vec();
        a.sort_by_key(|r| r.ts_ns);
        b.sort_by_key(|r| r.ts_ns);
        assert_eq!(a.as_slice(), &*b);
    }
}
