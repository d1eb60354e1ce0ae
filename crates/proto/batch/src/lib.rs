//! The batch encoding of packet records on a Kafka topic (version 1),
//! written by `weir capture --kafka` and read by `weir collect`.
//!
//! ```text
//! offset  size  field (little-endian)
//!      0     8  magic "WEIRREC1"
//!      8     8  capture id (random per capture)
//!     16     2  worker
//!     18     2  reserved (0)
//!     20     4  partition the batch was written for
//!     24     8  sequence number of the batch, per (capture, worker,
//!               partition), from 1
//!     32     4  record count N
//!     36     .  zstd frame of N records of RECORD_BYTES each (below)
//! ```
//!
//! A record is [`wire::PacketRecord`] field by field in declaration
//! order, fixed widths, little-endian (see [`put_record`]): 128 bytes
//! before compression. Absent fields are zero; `has` says which are set.

use wire::{PacketRecord, ParseError};

pub const MAGIC: &[u8; 8] = b"WEIRREC1";
pub const HEADER_BYTES: usize = 36;
pub const RECORD_BYTES: usize = 128;
/// Most records one batch may claim (a hostile count must not allocate).
pub const MAX_RECORDS: u32 = 1 << 20;

/// Who wrote a batch, and where it stands in that writer's sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchHeader {
    pub capture_id: u64,
    pub worker: u16,
    pub partition: u32,
    pub seq: u64,
}

/// Why a message is not a batch.
#[derive(Debug, PartialEq, Eq)]
pub struct CodecError(pub String);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Appends `rec` in the batch layout.
pub fn put_record(rec: &PacketRecord, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&rec.ts_ns.to_le_bytes());
    out.extend_from_slice(&rec.wire_len.to_le_bytes());
    out.extend_from_slice(&rec.cap_len.to_le_bytes());
    out.extend_from_slice(&rec.worker.to_le_bytes());
    out.extend_from_slice(&rec.iface.to_le_bytes());
    out.extend_from_slice(&rec.has.to_le_bytes());
    out.extend_from_slice(&rec.eth_src);
    out.extend_from_slice(&rec.eth_dst);
    out.extend_from_slice(&rec.vlan.to_le_bytes());
    out.extend_from_slice(&rec.ethertype.to_le_bytes());
    out.extend_from_slice(&[rec.ip_version, rec.ip_proto, rec.ttl, rec.dscp]);
    out.extend_from_slice(&rec.ip_src);
    out.extend_from_slice(&rec.ip_dst);
    out.extend_from_slice(&rec.ip_len.to_le_bytes());
    out.extend_from_slice(&rec.ip_hdr_len.to_le_bytes());
    out.extend_from_slice(&rec.frag.to_le_bytes());
    out.extend_from_slice(&rec.ip_id.to_le_bytes());
    out.extend_from_slice(&rec.src_port.to_le_bytes());
    out.extend_from_slice(&rec.dst_port.to_le_bytes());
    out.extend_from_slice(&rec.tcp_flags.to_le_bytes());
    out.extend_from_slice(&rec.tcp_win.to_le_bytes());
    out.extend_from_slice(&rec.tcp_seq.to_le_bytes());
    out.extend_from_slice(&rec.tcp_ack.to_le_bytes());
    out.extend_from_slice(&[rec.tcp_hdr_len, rec.icmp_type, rec.icmp_code]);
    out.push(rec.parse_error as u8);
    out.extend_from_slice(&rec.udp_len.to_le_bytes());
    out.extend_from_slice(&rec.payload_len.to_le_bytes());
    out.extend_from_slice(&rec.flow_hash.to_le_bytes());
    out.extend_from_slice(&rec.pcap_file.to_le_bytes());
    out.extend_from_slice(&rec.pcap_offset.to_le_bytes());
    out.resize(start + RECORD_BYTES, 0);
}

/// Reads one record of the batch layout (`b` is RECORD_BYTES long).
pub fn get_record(b: &[u8]) -> Result<PacketRecord, CodecError> {
    let mut at = 0;
    let mut take = |n: usize| {
        let s = &b[at..at + n];
        at += n;
        s
    };
    macro_rules! le {
        ($t:ty) => {{
            let n = std::mem::size_of::<$t>();
            <$t>::from_le_bytes(take(n).try_into().unwrap_or_default())
        }};
    }
    let mut r = PacketRecord {
        ts_ns: le!(i64),
        wire_len: le!(u32),
        cap_len: le!(u32),
        worker: le!(u16),
        iface: le!(u16),
        has: le!(u16),
        ..Default::default()
    };
    r.eth_src.copy_from_slice(take(6));
    r.eth_dst.copy_from_slice(take(6));
    r.vlan = le!(u16);
    r.ethertype = le!(u16);
    let v = take(4);
    (r.ip_version, r.ip_proto, r.ttl, r.dscp) = (v[0], v[1], v[2], v[3]);
    r.ip_src.copy_from_slice(take(16));
    r.ip_dst.copy_from_slice(take(16));
    r.ip_len = le!(u32);
    r.ip_hdr_len = le!(u16);
    r.frag = le!(u16);
    r.ip_id = le!(u32);
    r.src_port = le!(u16);
    r.dst_port = le!(u16);
    r.tcp_flags = le!(u16);
    r.tcp_win = le!(u16);
    r.tcp_seq = le!(u32);
    r.tcp_ack = le!(u32);
    let v = take(4);
    (r.tcp_hdr_len, r.icmp_type, r.icmp_code) = (v[0], v[1], v[2]);
    r.parse_error = *ParseError::ALL
        .get(v[3] as usize)
        .ok_or_else(|| CodecError(format!("unknown parse error code {}", v[3])))?;
    r.udp_len = le!(u16);
    r.payload_len = le!(u32);
    r.flow_hash = le!(u32);
    r.pcap_file = le!(u32);
    r.pcap_offset = le!(u64);
    Ok(r)
}

/// One message: the header and the records, compressed with zstd at
/// `level`.
pub fn encode(h: &BatchHeader, records: &[PacketRecord], level: i32) -> Vec<u8> {
    let mut raw = Vec::with_capacity(records.len() * RECORD_BYTES);
    for r in records {
        put_record(r, &mut raw);
    }
    let body = zstd::bulk::compress(&raw, level).unwrap_or_default();
    let mut out = Vec::with_capacity(HEADER_BYTES + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&h.capture_id.to_le_bytes());
    out.extend_from_slice(&h.worker.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&h.partition.to_le_bytes());
    out.extend_from_slice(&h.seq.to_le_bytes());
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

/// The header of a message, without decompressing its records.
pub fn header(m: &[u8]) -> Result<(BatchHeader, u32), CodecError> {
    if m.len() < HEADER_BYTES || &m[..8] != MAGIC {
        return Err(CodecError(
            "not a weir record batch (no WEIRREC1 header): is something else writing to this \
             topic?"
                .into(),
        ));
    }
    let u64_at = |i: usize| u64::from_le_bytes(m[i..i + 8].try_into().unwrap_or_default());
    let u32_at = |i: usize| u32::from_le_bytes(m[i..i + 4].try_into().unwrap_or_default());
    let h = BatchHeader {
        capture_id: u64_at(8),
        worker: u16::from_le_bytes([m[16], m[17]]),
        partition: u32_at(20),
        seq: u64_at(24),
    };
    let n = u32_at(32);
    if n > MAX_RECORDS {
        return Err(CodecError(format!(
            "a batch claims {n} records (at most {MAX_RECORDS})"
        )));
    }
    Ok((h, n))
}

/// A whole message: header and records.
pub fn decode(m: &[u8]) -> Result<(BatchHeader, Vec<PacketRecord>), CodecError> {
    let (h, n) = header(m)?;
    let want = n as usize * RECORD_BYTES;
    let raw = zstd::bulk::decompress(&m[HEADER_BYTES..], want)
        .map_err(|e| CodecError(format!("batch {}: records do not decompress: {e}", h.seq)))?;
    if raw.len() != want {
        return Err(CodecError(format!(
            "batch {}: {} bytes of records for {n} records",
            h.seq,
            raw.len()
        )));
    }
    let records = raw
        .chunks_exact(RECORD_BYTES)
        .map(get_record)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((h, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(i: u32) -> PacketRecord {
        let mut r = PacketRecord {
            ts_ns: 1_700_000_000_000_000_000 + i as i64,
            wire_len: 60 + i,
            cap_len: 60,
            worker: 3,
            iface: 1,
            has: 0x3fff,
            vlan: 7,
            ethertype: 0x0800,
            ip_version: 4,
            ip_proto: 6,
            ttl: 64,
            dscp: 46,
            ip_len: 46 + i,
            ip_hdr_len: 20,
            frag: 0x4000,
            ip_id: i,
            src_port: 1234,
            dst_port: 443,
            tcp_flags: 0x18,
            tcp_win: 512,
            tcp_seq: i.wrapping_mul(7),
            tcp_ack: u32::MAX - i,
            tcp_hdr_len: 32,
            icmp_type: 3,
            icmp_code: 4,
            parse_error: ParseError::ALL[(i as usize) % ParseError::ALL.len()],
            udp_len: 9,
            payload_len: i,
            flow_hash: 0xdead_beef ^ i,
            pcap_file: 2,
            pcap_offset: 1 << 40 | i as u64,
            ..Default::default()
        };
        r.eth_src = [1, 2, 3, 4, 5, i as u8];
        r.eth_dst = [6, 7, 8, 9, 10, 11];
        r.ip_src[15] = i as u8;
        r.ip_dst[0] = 0xfd;
        r
    }

    #[test]
    fn batches_round_trip_every_field() {
        let recs: Vec<_> = (0..1000).map(sample).collect();
        let h = BatchHeader {
            capture_id: 0x1234_5678_9abc_def0,
            worker: 5,
            partition: 3,
            seq: 42,
        };
        let m = encode(&h, &recs, 1);
        assert!(m.len() < recs.len() * RECORD_BYTES / 2, "{} bytes", m.len());
        let (h2, back) = decode(&m).unwrap();
        assert_eq!(h2, h);
        assert_eq!(back, recs);
    }

    #[test]
    fn damaged_messages_are_refused_not_trusted() {
        let recs: Vec<_> = (0..10).map(sample).collect();
        let h = BatchHeader {
            capture_id: 1,
            worker: 0,
            partition: 0,
            seq: 1,
        };
        let m = encode(&h, &recs, 1);
        assert!(decode(b"hello").is_err());
        assert!(decode(&m[..m.len() - 3]).is_err());
        let mut big = m.clone();
        big[32..36].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&big).unwrap_err().0.contains("claims"));
        let mut fewer = m.clone();
        fewer[32..36].copy_from_slice(&9u32.to_le_bytes());
        assert!(decode(&fewer).is_err());
        for cut in 0..m.len() {
            let _ = decode(&m[..cut]);
        }
    }
}
