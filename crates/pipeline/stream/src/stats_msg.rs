//! The capture's per-second stats rows on the topic (version 1): the
//! stats table's rows of one second, so a collected dataset has the
//! drops and ring levels of the capture next to its records.
//!
//! ```text
//! offset  size  field (little-endian)
//!      0     8  magic "WEIRSTA1"
//!      8     8  capture id
//!     16     8  sequence number, from 1
//!     24     4  row count N (at most 65,536)
//!     28     .  N rows of ROW_BYTES: ts_ns i64, worker u16, iface u16,
//!               frames, bytes, kernel_packets, kernel_drops,
//!               kernel_freezes, pcap_frames, pcap_drops, records,
//!               pcap_bytes, pcap_stored_bytes (u64 each), ring_backlog
//!               u32, pcap_backlog u32, pcap_level i16 (i16::MIN: none)
//! ```

use store::stats::StatsRow;

pub const MAGIC: &[u8; 8] = b"WEIRSTA1";
const HEADER_BYTES: usize = 28;
pub const ROW_BYTES: usize = 8 + 2 + 2 + 10 * 8 + 4 + 4 + 2;
const MAX_ROWS: usize = 1 << 16;

pub fn encode(capture_id: u64, seq: u64, rows: &[StatsRow]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + rows.len() * ROW_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&capture_id.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(rows.len() as u32).to_le_bytes());
    for r in rows {
        out.extend_from_slice(&r.ts_ns.to_le_bytes());
        out.extend_from_slice(&r.worker.to_le_bytes());
        out.extend_from_slice(&r.iface.to_le_bytes());
        for v in [
            r.frames,
            r.bytes,
            r.kernel_packets,
            r.kernel_drops,
            r.kernel_freezes,
            r.pcap_frames,
            r.pcap_drops,
            r.records,
            r.pcap_bytes,
            r.pcap_stored_bytes,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&r.ring_backlog.to_le_bytes());
        out.extend_from_slice(&r.pcap_backlog.to_le_bytes());
        out.extend_from_slice(&r.pcap_level.unwrap_or(i16::MIN).to_le_bytes());
    }
    out
}

/// (capture id, sequence number, rows), or why the message is not one.
pub fn decode(m: &[u8]) -> Result<(u64, u64, Vec<StatsRow>), String> {
    if m.len() < HEADER_BYTES || &m[..8] != MAGIC {
        return Err("not a weir stats message".into());
    }
    let u64_at =
        |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
    let (id, seq) = (u64_at(m, 8), u64_at(m, 16));
    let n = u32::from_le_bytes(m[24..28].try_into().unwrap_or_default()) as usize;
    if n > MAX_ROWS || m.len() != HEADER_BYTES + n * ROW_BYTES {
        return Err(format!(
            "stats message {seq}: {} bytes for {n} rows",
            m.len()
        ));
    }
    let rows = m[HEADER_BYTES..]
        .chunks_exact(ROW_BYTES)
        .map(|b| {
            let u = |i: usize| u64_at(b, 12 + 8 * i);
            let level = i16::from_le_bytes([b[100], b[101]]);
            StatsRow {
                ts_ns: u64_at(b, 0) as i64,
                worker: u16::from_le_bytes([b[8], b[9]]),
                iface: u16::from_le_bytes([b[10], b[11]]),
                frames: u(0),
                bytes: u(1),
                kernel_packets: u(2),
                kernel_drops: u(3),
                kernel_freezes: u(4),
                pcap_frames: u(5),
                pcap_drops: u(6),
                records: u(7),
                // Not carried by WEIRSTA1 rows (a later version may).
                records_drops: 0,
                pcap_bytes: u(8),
                pcap_stored_bytes: u(9),
                ring_backlog: u32::from_le_bytes(b[92..96].try_into().unwrap_or_default()),
                pcap_backlog: u32::from_le_bytes(b[96..100].try_into().unwrap_or_default()),
                pcap_level: (level != i16::MIN).then_some(level),
                stack: None,
                upload: None,
            }
        })
        .collect();
    Ok((id, seq, rows))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_and_damage_is_refused() {
        let rows: Vec<StatsRow> = (0..5)
            .map(|i| StatsRow {
                ts_ns: 1_700_000_000_000_000_000 + i,
                worker: i as u16,
                iface: 1,
                frames: 10 + i as u64,
                bytes: 600,
                kernel_packets: 11,
                kernel_drops: 1,
                kernel_freezes: 2,
                pcap_frames: 3,
                pcap_drops: 4,
                records: 5,
                records_drops: 0,
                pcap_bytes: 6,
                pcap_stored_bytes: 7,
                ring_backlog: 8,
                pcap_backlog: 9,
                pcap_level: (i % 2 == 0).then_some(3),
                stack: None,
                upload: None,
            })
            .collect();
        let m = encode(42, 7, &rows);
        assert_eq!(decode(&m).unwrap(), (42, 7, rows));
        for cut in 0..m.len() {
            assert!(decode(&m[..cut]).is_err());
        }
        let mut lie = m.clone();
        lie[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&lie).is_err());
    }
}
