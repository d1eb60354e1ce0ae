//! Unit tests of the parts the CLI tests reach only through whole runs:
//! the worker, the conversion, the capture's option checking and wiring,
//! and late records. Shared here: scratch directories, frames made with
//! `wire::build`, and pcap files of them.

mod capture_run;
mod convert;
mod late;
mod worker;

use std::path::Path;

pub(crate) use testdata::Scratch;

use wire::PacketRecord;
use wire::build::{FrameSpec, IpSpec, Payload, TransportSpec};

/// An Ethernet/IPv4 frame from 192.0.2.`from` to 192.0.2.`to`.
pub(crate) fn frame(from: u8, to: u8, transport: TransportSpec, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    FrameSpec {
        eth_src: [2, 0, 0, 0, 0, from],
        eth_dst: [2, 0, 0, 0, 0, to],
        vlan: None,
        ip: IpSpec::V4 {
            src: [192, 0, 2, from],
            dst: [192, 0, 2, to],
            ttl: 64,
            id: 1,
            dscp: 0,
            frag: 0x4000,
        },
        transport,
        payload: Payload::Bytes(payload),
    }
    .build(&mut out);
    out
}

pub(crate) fn udp(from: u8, to: u8, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    frame(from, to, TransportSpec::Udp { sport, dport }, payload)
}

pub(crate) fn tcp(from: u8, to: u8, sport: u16, dport: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let t = TransportSpec::Tcp {
        sport,
        dport,
        seq,
        ack: 0,
        flags: 0x018,
        window: 512,
    };
    frame(from, to, t, payload)
}

/// Time of the first frame of [`traffic`].
pub(crate) const T0: i64 = 1_700_000_000_000_000_000;

/// `n` frames (time, bytes) of a dozen UDP and TCP flows in both
/// directions, of sizes from 60 to about 1,100 bytes, 1 µs apart.
pub(crate) fn traffic(n: usize) -> Vec<(i64, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let flow = (i * 7 % 12) as u8;
            let (a, b) = (1 + flow, 100 + flow);
            let (from, to) = if i % 3 == 0 { (b, a) } else { (a, b) };
            let (sport, dport) = (40_000 + flow as u16, 9_000 + flow as u16);
            let payload = vec![i as u8; i * 37 % 1_100];
            let bytes = if flow % 2 == 0 {
                udp(from, to, sport, dport, &payload)
            } else {
                tcp(from, to, sport, dport, i as u32 * 1_000, &payload)
            };
            (T0 + i as i64 * 1_000, bytes)
        })
        .collect()
}

/// Writes `frames` to a pcap file (each cut to `snaplen`, its wire
/// length kept); the offset of each frame's record.
pub(crate) fn write_pcap(path: &Path, frames: &[(i64, Vec<u8>)], snaplen: u32) -> Vec<u64> {
    let file = std::fs::File::create(path).expect("creating the pcap file");
    let mut w = pcapio::PcapWriter::new(
        std::io::BufWriter::new(file),
        wire::LinkType::ETHERNET,
        snaplen,
    )
    .expect("pcap header");
    let offsets = frames
        .iter()
        .map(|(ts, f)| w.write_frame(*ts, f.len() as u32, f).expect("pcap record"))
        .collect();
    w.into_inner().expect("flushing the pcap file");
    offsets
}

/// Every record of a dataset's packet files, in file order.
pub(crate) fn records_of(root: &Path, files: &[store::PacketFileSummary]) -> Vec<PacketRecord> {
    files
        .iter()
        .flat_map(|f| {
            store::read::read_packet_file(&root.join(&f.path))
                .unwrap_or_else(|e| panic!("reading {}: {e}", f.path))
        })
        .collect()
}
