//! The batch encoding of packet records on a Kafka topic (version 2),
//! written by `weir capture --kafka` and read by `weir collect`.
//!
//! ```text
//! offset  size  field (little-endian)
//!      0     8  magic "WEIRREC2" (version 1: "WEIRREC1")
//!      8     8  capture id (random per capture)
//!     16     2  worker
//!     18     2  reserved (0)
//!     20     4  partition the batch was written for
//!     24     8  sequence number of the batch, per (capture, worker,
//!               partition), from 1
//!     32     4  record count N
//!     36     .  zstd frame of the body (below)
//! ```
//!
//! The body is N records of RECORD_BYTES each, then (version 2) the
//! tunnel section: a bitmap of ceil(N/8) bytes, bit `i % 8` of byte
//! `i / 8` set when record `i` came through a tunnel, and then one block
//! of TUNNEL_BYTES per set bit, in record order. An untunnelled record
//! costs its bit, which zstd squeezes to nothing. A version 1 body is the
//! records alone: they read with no tunnel.
//!
//! A record is [`wire::PacketRecord`] field by field in declaration
//! order up to `pcap_offset`, fixed widths, little-endian (see
//! [`put_record`]): 128 bytes before compression. A tunnel block is
//! `outer_src`, `outer_dst`, `tunnel_id` (u32), `tunnel`, `tunnel_depth`,
//! `tunnel_has` (a byte each). Absent fields are zero; `has` and
//! `tunnel_has` say which are set.

use wire::{PacketFields, PacketRecord, ParseError, Tunnel};

/// The magic of the version written.
pub const MAGIC: &[u8; 8] = b"WEIRREC2";
/// The magic of version 1 (records without tunnel fields), still read.
pub const MAGIC_V1: &[u8; 8] = b"WEIRREC1";
/// A tunnel block's bytes.
pub const TUNNEL_BYTES: usize = 39;
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
        fields: PacketFields {
            ts_ns: le!(i64),
            wire_len: le!(u32),
            cap_len: le!(u32),
            worker: le!(u16),
            iface: le!(u16),
            has: le!(u16),
            ..Default::default()
        },
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

/// Appends `rec`'s tunnel block.
pub fn put_tunnel(rec: &PacketRecord, out: &mut Vec<u8>) {
    out.extend_from_slice(&rec.tunnel.outer_src);
    out.extend_from_slice(&rec.tunnel.outer_dst);
    out.extend_from_slice(&rec.tunnel.id.to_le_bytes());
    out.extend_from_slice(&[rec.tunnel.kind as u8, rec.tunnel.depth, rec.tunnel.has]);
}

/// Reads a tunnel block (`b` is TUNNEL_BYTES long) into `r`.
pub fn get_tunnel(b: &[u8], r: &mut PacketRecord) -> Result<(), CodecError> {
    r.tunnel.outer_src.copy_from_slice(&b[..16]);
    r.tunnel.outer_dst.copy_from_slice(&b[16..32]);
    r.tunnel.id = u32::from_le_bytes([b[32], b[33], b[34], b[35]]);
    r.tunnel.kind = *Tunnel::ALL
        .get(b[36] as usize)
        .ok_or_else(|| CodecError(format!("unknown tunnel code {}", b[36])))?;
    (r.tunnel.depth, r.tunnel.has) = (b[37], b[38]);
    Ok(())
}

/// One message: the header and the records, compressed with zstd at
/// `level`.
pub fn encode(h: &BatchHeader, records: &[PacketRecord], level: i32) -> Vec<u8> {
    let bitmap = records.len().div_ceil(8);
    let mut raw = Vec::with_capacity(records.len() * RECORD_BYTES + bitmap);
    for r in records {
        put_record(r, &mut raw);
    }
    let map_at = raw.len();
    raw.resize(map_at + bitmap, 0);
    for (i, r) in records.iter().enumerate() {
        if !r.tunnel.is_none() {
            raw[map_at + i / 8] |= 1 << (i % 8);
            put_tunnel(r, &mut raw);
        }
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
    header_version(m).map(|(h, n, _)| (h, n))
}

/// The header, the record count and the encoding's version (1 or 2).
fn header_version(m: &[u8]) -> Result<(BatchHeader, u32, u8), CodecError> {
    let version = match m.get(..8) {
        Some(magic) if m.len() >= HEADER_BYTES && magic == MAGIC => 2,
        Some(magic) if m.len() >= HEADER_BYTES && magic == MAGIC_V1 => 1,
        Some(magic) if m.len() >= HEADER_BYTES && magic.starts_with(b"WEIRREC") => {
            return Err(CodecError(format!(
                "a record batch of version {:?}, which this weir does not read: collect with \
                 the weir that captured",
                magic[7] as char
            )));
        }
        _ => {
            return Err(CodecError(
                "not a weir record batch (no WEIRREC header): is something else writing to \
                 this topic?"
                    .into(),
            ));
        }
    };
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
    Ok((h, n, version))
}

/// A whole message: header and records.
pub fn decode(m: &[u8]) -> Result<(BatchHeader, Vec<PacketRecord>), CodecError> {
    let (h, n, version) = header_version(m)?;
    let n = n as usize;
    let (bitmap, most) = match version {
        1 => (0, n * RECORD_BYTES),
        _ => {
            let bitmap = n.div_ceil(8);
            (bitmap, n * (RECORD_BYTES + TUNNEL_BYTES) + bitmap)
        }
    };
    let raw = zstd::bulk::decompress(&m[HEADER_BYTES..], most)
        .map_err(|e| CodecError(format!("batch {}: records do not decompress: {e}", h.seq)))?;
    let bad_size = || {
        CodecError(format!(
            "batch {}: {} bytes of records for {n} records",
            h.seq,
            raw.len()
        ))
    };
    let (recs, rest) = raw
        .split_at_checked(n * RECORD_BYTES)
        .ok_or_else(bad_size)?;
    let (map, mut blocks) = rest.split_at_checked(bitmap).ok_or_else(bad_size)?;
    let set: usize = map.iter().map(|b| b.count_ones() as usize).sum();
    // Bits past the last record are clear; every set bit has its block.
    let stray = n % 8 != 0 && map.get(n / 8).is_some_and(|b| b >> (n % 8) != 0);
    if blocks.len() != set * TUNNEL_BYTES || stray {
        return Err(bad_size());
    }
    let mut records = Vec::with_capacity(n);
    for (i, b) in recs.chunks_exact(RECORD_BYTES).enumerate() {
        let mut r = get_record(b)?;
        if map.get(i / 8).is_some_and(|m| m & (1 << (i % 8)) != 0) {
            get_tunnel(&blocks[..TUNNEL_BYTES], &mut r)?;
            blocks = &blocks[TUNNEL_BYTES..];
        }
        records.push(r);
    }
    Ok((h, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(i: u32) -> PacketRecord {
        let mut r = PacketRecord {
            fields: PacketFields {
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
            },
            ..Default::default()
        };
        r.eth_src = [1, 2, 3, 4, 5, i as u8];
        r.eth_dst = [6, 7, 8, 9, 10, 11];
        r.ip_src[15] = i as u8;
        r.ip_dst[0] = 0xfd;
        r
    }

    /// `sample` with tunnel fields on every third record.
    fn tunnelled_sample(i: u32) -> PacketRecord {
        let mut r = sample(i);
        if i % 3 == 0 {
            // Every kind in turn (by i / 3, so that no kind count sharing
            // a factor with 3 leaves some out).
            r.tunnel.kind = Tunnel::ALL[1 + (i as usize / 3) % (Tunnel::ALL.len() - 1)];
            r.tunnel.depth = 1 + (i % 4) as u8;
            r.tunnel.has = (i % 4) as u8;
            r.tunnel.id = 0xff00_0000 | i;
            r.tunnel.outer_src = [0xfe; 16];
            r.tunnel.outer_dst[15] = i as u8;
        }
        r
    }

    /// A version 1 message of `recs` (which must have no tunnel fields),
    /// as weir wrote them before there were tunnels.
    fn encode_v1(h: &BatchHeader, recs: &[PacketRecord]) -> Vec<u8> {
        let mut m = encode(h, &[], 1);
        m.truncate(HEADER_BYTES);
        m[..8].copy_from_slice(MAGIC_V1);
        m[32..36].copy_from_slice(&(recs.len() as u32).to_le_bytes());
        let mut raw = Vec::new();
        for r in recs {
            put_record(r, &mut raw);
        }
        m.extend_from_slice(&zstd::bulk::compress(&raw, 1).unwrap());
        m
    }

    const H: BatchHeader = BatchHeader {
        capture_id: 9,
        worker: 1,
        partition: 2,
        seq: 3,
    };

    #[test]
    fn tunnel_fields_round_trip() {
        for n in [0, 1, 3, 7, 8, 9, 1000] {
            let recs: Vec<_> = (0..n).map(tunnelled_sample).collect();
            let (h, back) = decode(&encode(&H, &recs, 1)).unwrap();
            assert_eq!(h, H);
            assert_eq!(back, recs, "{n} records");
        }
        // Each kind of tunnel took part.
        let kinds: std::collections::BTreeSet<Tunnel> =
            (0..1000).map(|i| tunnelled_sample(i).tunnel.kind).collect();
        assert_eq!(kinds.len(), Tunnel::ALL.len(), "{kinds:?}");
        // One field alone is enough to be kept.
        let mut r = sample(1);
        r.tunnel.id = 5;
        let (_, back) = decode(&encode(&H, &[sample(0), r], 1)).unwrap();
        assert_eq!(back, vec![sample(0), r]);
    }

    #[test]
    fn version_1_batches_still_decode_without_tunnels() {
        let recs: Vec<_> = (0..100).map(sample).collect();
        let m = encode_v1(&H, &recs);
        assert_eq!(header(&m).unwrap(), (H, 100));
        let (h, back) = decode(&m).unwrap();
        assert_eq!((h, back), (H, recs.clone()));
        // And version 2 of the same records decodes to the same.
        assert_eq!(decode(&encode(&H, &recs, 1)).unwrap().1, recs);
        // A later version is named, not misread.
        let mut v3 = m.clone();
        v3[7] = b'3';
        assert!(decode(&v3).unwrap_err().0.contains("version '3'"));
    }

    #[test]
    fn untunnelled_records_cost_next_to_nothing() {
        let recs: Vec<_> = (0..4096).map(sample).collect();
        let v1 = encode_v1(&H, &recs).len();
        let v2 = encode(&H, &recs, 1).len();
        assert!(v2 <= v1 + 32, "version 2: {v2} bytes, version 1: {v1}");
    }

    #[test]
    fn damaged_tunnel_sections_are_refused() {
        let recs: Vec<_> = (0..10).map(tunnelled_sample).collect();
        let raw_of = |m: &[u8]| zstd::bulk::decompress(&m[HEADER_BYTES..], 1 << 20).unwrap();
        let with_body = |raw: &[u8]| {
            let mut m = encode(&H, &recs, 1);
            m.truncate(HEADER_BYTES);
            m.extend_from_slice(&zstd::bulk::compress(raw, 1).unwrap());
            m
        };
        let raw = raw_of(&encode(&H, &recs, 1));
        let map_at = 10 * RECORD_BYTES;
        assert_eq!(raw.len(), map_at + 2 + 4 * TUNNEL_BYTES);
        assert_eq!(decode(&with_body(&raw)).unwrap().1, recs);
        // A bit without its block, a block without its bit, a bit past
        // the last record, an unknown kind, a cut body.
        let mut extra_bit = raw.clone();
        extra_bit[map_at] |= 2;
        let mut lost_bit = raw.clone();
        lost_bit[map_at] &= !1;
        let mut stray = raw.clone();
        stray[map_at + 1] |= 0x80;
        stray.extend_from_slice(&raw[raw.len() - TUNNEL_BYTES..]);
        let mut kind = raw.clone();
        kind[map_at + 2 + 36] = Tunnel::ALL.len() as u8;
        for bad in [extra_bit, lost_bit, stray, raw[..map_at + 1].to_vec()] {
            assert!(
                decode(&with_body(&bad))
                    .unwrap_err()
                    .0
                    .contains("bytes of records")
            );
        }
        assert!(
            decode(&with_body(&kind))
                .unwrap_err()
                .0
                .contains("tunnel code")
        );
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
