//! weir's packet-table encoder against arrow-rs's ArrowWriter on the same
//! records, side by side: ns per row and bytes per row, in arrival and flow
//! order. This is the measurement behind hand-writing the encoder.
//!
//! Usage: encode [FRAMES]   (default 1M frames of the application mix)

use std::sync::Arc;
use std::time::Instant;

use arrow_array::builder::{
    FixedSizeBinaryBuilder, StringBuilder, TimestampNanosecondBuilder, UInt8Builder, UInt16Builder,
    UInt32Builder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use store::{PacketWriter, PacketWriterOptions, RowOrder, packet_schema};
use traffic::{AppMix, FrameSource};
use wire::{Has, LinkType, PacketRecord, ParseError, decode};

fn fixed(b: &mut FixedSizeBinaryBuilder, present: bool, v: &[u8]) {
    if present {
        b.append_value(v).expect("width matches");
    } else {
        b.append_null();
    }
}

/// The records as an Arrow batch of the packet table's schema.
fn to_batch(rows: &[PacketRecord]) -> RecordBatch {
    let n = rows.len();
    let mut ts = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    macro_rules! b {
        ($t:ty) => {
            <$t>::with_capacity(n)
        };
    }
    let (mut wire_len, mut cap_len) = (b!(UInt32Builder), b!(UInt32Builder));
    let (mut worker, mut iface) = (b!(UInt16Builder), b!(UInt16Builder));
    let mut eth_src = FixedSizeBinaryBuilder::with_capacity(n, 6);
    let mut eth_dst = FixedSizeBinaryBuilder::with_capacity(n, 6);
    let (mut vlan, mut ethertype) = (b!(UInt16Builder), b!(UInt16Builder));
    let mut ip_version = b!(UInt8Builder);
    let mut ip_src = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut ip_dst = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let (mut ip_len, mut ip_hdr_len) = (b!(UInt32Builder), b!(UInt16Builder));
    let (mut ip_proto, mut ttl, mut dscp) = (b!(UInt8Builder), b!(UInt8Builder), b!(UInt8Builder));
    let (mut ip_id, mut frag) = (b!(UInt32Builder), b!(UInt16Builder));
    let (mut src_port, mut dst_port) = (b!(UInt16Builder), b!(UInt16Builder));
    let (mut tcp_flags, mut tcp_seq, mut tcp_ack) =
        (b!(UInt16Builder), b!(UInt32Builder), b!(UInt32Builder));
    let (mut tcp_win, mut tcp_hdr_len, mut udp_len) =
        (b!(UInt16Builder), b!(UInt8Builder), b!(UInt16Builder));
    let (mut icmp_type, mut icmp_code) = (b!(UInt8Builder), b!(UInt8Builder));
    let (mut payload_len, mut flow_hash) = (b!(UInt32Builder), b!(UInt32Builder));
    let (mut pcap_file, mut pcap_offset) = (b!(UInt32Builder), b!(UInt64Builder));
    let mut parse_error = StringBuilder::with_capacity(n, n);
    for r in rows {
        let h = |bit| r.has & bit != 0;
        ts.append_value(r.ts_ns);
        wire_len.append_value(r.wire_len);
        cap_len.append_value(r.cap_len);
        worker.append_value(r.worker);
        iface.append_value(r.iface);
        fixed(&mut eth_src, h(Has::ETH_SRC), &r.eth_src);
        fixed(&mut eth_dst, h(Has::ETH_DST), &r.eth_dst);
        vlan.append_option(h(Has::VLAN).then_some(r.vlan));
        ethertype.append_option(h(Has::ETHERTYPE).then_some(r.ethertype));
        let ip = h(Has::IP);
        ip_version.append_option(ip.then_some(r.ip_version));
        fixed(&mut ip_src, ip, &r.ip_src);
        fixed(&mut ip_dst, ip, &r.ip_dst);
        ip_len.append_option(ip.then_some(r.ip_len));
        ip_hdr_len.append_option(ip.then_some(r.ip_hdr_len));
        ip_proto.append_option(ip.then_some(r.ip_proto));
        ttl.append_option(ip.then_some(r.ttl));
        dscp.append_option(ip.then_some(r.dscp));
        ip_id.append_option(h(Has::IP_ID).then_some(r.ip_id));
        frag.append_option(h(Has::FRAG).then_some(r.frag));
        src_port.append_option(h(Has::PORTS).then_some(r.src_port));
        dst_port.append_option(h(Has::PORTS).then_some(r.dst_port));
        let tcp = h(Has::TCP);
        tcp_flags.append_option(tcp.then_some(r.tcp_flags));
        tcp_seq.append_option(tcp.then_some(r.tcp_seq));
        tcp_ack.append_option(tcp.then_some(r.tcp_ack));
        tcp_win.append_option(tcp.then_some(r.tcp_win));
        tcp_hdr_len.append_option(tcp.then_some(r.tcp_hdr_len));
        udp_len.append_option(h(Has::UDP).then_some(r.udp_len));
        icmp_type.append_option(h(Has::ICMP).then_some(r.icmp_type));
        icmp_code.append_option(h(Has::ICMP).then_some(r.icmp_code));
        payload_len.append_option(h(Has::PAYLOAD).then_some(r.payload_len));
        flow_hash.append_option(h(Has::FLOW).then_some(r.flow_hash));
        pcap_file.append_option(h(Has::PCAP).then_some(r.pcap_file));
        pcap_offset.append_option(h(Has::PCAP).then_some(r.pcap_offset));
        parse_error
            .append_option((r.parse_error != ParseError::None).then(|| r.parse_error.as_str()));
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(ts.finish()),
        Arc::new(wire_len.finish()),
        Arc::new(cap_len.finish()),
        Arc::new(worker.finish()),
        Arc::new(iface.finish()),
        Arc::new(eth_src.finish()),
        Arc::new(eth_dst.finish()),
        Arc::new(vlan.finish()),
        Arc::new(ethertype.finish()),
        Arc::new(ip_version.finish()),
        Arc::new(ip_src.finish()),
        Arc::new(ip_dst.finish()),
        Arc::new(ip_len.finish()),
        Arc::new(ip_hdr_len.finish()),
        Arc::new(ip_proto.finish()),
        Arc::new(ttl.finish()),
        Arc::new(dscp.finish()),
        Arc::new(ip_id.finish()),
        Arc::new(frag.finish()),
        Arc::new(src_port.finish()),
        Arc::new(dst_port.finish()),
        Arc::new(tcp_flags.finish()),
        Arc::new(tcp_seq.finish()),
        Arc::new(tcp_ack.finish()),
        Arc::new(tcp_win.finish()),
        Arc::new(tcp_hdr_len.finish()),
        Arc::new(udp_len.finish()),
        Arc::new(icmp_type.finish()),
        Arc::new(icmp_code.finish()),
        Arc::new(payload_len.finish()),
        Arc::new(flow_hash.finish()),
        Arc::new(pcap_file.finish()),
        Arc::new(pcap_offset.finish()),
        Arc::new(parse_error.finish()),
    ];
    RecordBatch::try_new(packet_schema(), cols).expect("records match the schema")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let frames: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut src = AppMix::new(2000.0, frames, 1);
    let mut buf = Vec::new();
    let mut rows = Vec::with_capacity(frames as usize);
    while let Some(ts) = src.next_frame(&mut buf) {
        let mut r = PacketRecord::new(ts, buf.len() as u32, buf.len() as u32);
        decode(LinkType::ETHERNET, &buf, &mut r);
        rows.push(r);
    }
    let mut flow_sorted = rows.clone();
    flow_sorted.sort_by_key(|r| (r.flow_hash, r.flow_reversed(), r.ts_ns));
    let dir = std::env::temp_dir().join(format!("weir-encode-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    println!("## Packet-table encoding: weir's encoder vs arrow-rs ArrowWriter");
    println!();
    println!(
        "- {} records of the application mix (`weir gen --model app`), built in memory first",
        rows.len()
    );
    println!(
        "- parquet/arrow-rs 60 with zstd(1), chunk statistics, bloom filters on ip_src/ip_dst, \
         1M-row row groups"
    );
    println!(
        "- arrow-rs is given the rows already sorted by flow for the flow case (its sort is not timed); weir sorts as part of writing"
    );
    println!("- median of 3 runs, interleaved");
    println!();
    println!("| writer | row order | ns/row (median, min–max) | bytes/row |");
    println!("|---|---|--:|--:|");
    for (order_name, order, arrow_rows) in [
        ("arrival", RowOrder::Arrival, &rows),
        ("flow", RowOrder::Flow, &flow_sorted),
    ] {
        let (mut weir_t, mut arrow_t) = (Vec::new(), Vec::new());
        let (mut weir_b, mut arrow_b) = (0u64, 0u64);
        for rep in 0..3 {
            let p = dir.join(format!("weir-{rep}.parquet"));
            let t = Instant::now();
            let opts = PacketWriterOptions {
                prefault: false,
                order,
                ..Default::default()
            };
            let mut w = PacketWriter::create(&p, "x", opts).expect("create");
            for r in &rows {
                w.push(r).expect("push");
            }
            weir_b = w.finish().expect("finish").bytes;
            weir_t.push(t.elapsed().as_nanos() as f64 / rows.len() as f64);

            let p = dir.join(format!("arrow-{rep}.parquet"));
            let t = Instant::now();
            let props = WriterProperties::builder()
                .set_compression(Compression::ZSTD(ZstdLevel::try_new(1).expect("level")))
                .set_statistics_enabled(EnabledStatistics::Chunk)
                .set_max_row_group_row_count(Some(1 << 20))
                .set_column_bloom_filter_enabled("ip_src".into(), true)
                .set_column_bloom_filter_enabled("ip_dst".into(), true)
                .build();
            let file = std::fs::File::create(&p).expect("create");
            let mut w = ArrowWriter::try_new(file, packet_schema(), Some(props)).expect("writer");
            for chunk in arrow_rows.chunks(64 * 1024) {
                w.write(&to_batch(chunk)).expect("write");
            }
            w.close().expect("close");
            arrow_b = std::fs::metadata(&p).expect("size").len();
            arrow_t.push(t.elapsed().as_nanos() as f64 / rows.len() as f64);
        }
        let spread = |v: &[f64]| {
            let (lo, hi) = v
                .iter()
                .fold((f64::MAX, 0f64), |(a, b), &x| (a.min(x), b.max(x)));
            format!("{:.0} ({:.0}–{:.0})", median(v.to_vec()), lo, hi)
        };
        let n = rows.len() as f64;
        println!(
            "| weir store::encode | {order_name} | {} | {:.2} |",
            spread(&weir_t),
            weir_b as f64 / n
        );
        println!(
            "| arrow-rs ArrowWriter (incl. building Arrow arrays) | {order_name} | {} | {:.2} |",
            spread(&arrow_t),
            arrow_b as f64 / n
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
