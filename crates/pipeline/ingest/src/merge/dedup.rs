//! A frame seen by more than one input: its header key, the window of
//! frames kept to match it against, and the inputs' clock offsets.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use store::StoreError;
use store::read::read_row_group;
use wire::{Has, PacketRecord};

use super::{Chunk, Input, MergeOptions};

/// The headers that identify a frame wherever it was seen: for IP frames
/// the IP and transport fields routers and taps leave alone (not the TTL,
/// not the MACs), for others the Ethernet header. Absent fields are zero
/// in a record, so they hash alike.
fn header_key(r: &PacketRecord) -> u64 {
    let mut h = KeyHash(r.wire_len as u64);
    if r.has & Has::IP != 0 {
        for half in [r.ip_src, r.ip_dst] {
            h.add(u64::from_le_bytes(half[..8].try_into().unwrap_or_default()));
            h.add(u64::from_le_bytes(half[8..].try_into().unwrap_or_default()));
        }
        h.add(
            r.ip_proto as u64
                | (r.dscp as u64) << 8
                | (r.frag as u64) << 16
                | (r.ip_len as u64) << 32,
        );
        h.add(r.ip_id as u64 | (r.src_port as u64) << 32 | (r.dst_port as u64) << 48);
        h.add(r.tcp_seq as u64 | (r.tcp_ack as u64) << 32);
        h.add(r.tcp_flags as u64 | (r.tcp_win as u64) << 16 | (r.udp_len as u64) << 32);
        h.add(r.icmp_type as u64 | (r.icmp_code as u64) << 8);
    } else {
        let mut macs = [0u8; 16];
        macs[..6].copy_from_slice(&r.eth_src);
        macs[6..12].copy_from_slice(&r.eth_dst);
        macs[12..14].copy_from_slice(&r.ethertype.to_le_bytes());
        h.add(u64::from_le_bytes(macs[..8].try_into().unwrap_or_default()));
        h.add(u64::from_le_bytes(macs[8..].try_into().unwrap_or_default()));
    }
    h.finish()
}

/// A multiply-rotate word hash with a final avalanche: the key of a frame
/// is hashed once per row, so it must be cheap; 64 bits keep accidental
/// collisions between different frames within a window out of reach.
struct KeyHash(u64);

impl KeyHash {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(23) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        x ^= x >> 33;
        x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
        x ^ (x >> 33)
    }
}

/// The keys are already hashes: the maps use them as they are.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ *b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type KeyMap<V> = HashMap<u64, V, BuildHasherDefault<PassThrough>>;

/// A frame kept, remembered while a duplicate of it may still come.
struct Kept {
    ts: i64,
    /// `ts` on the first input's clock.
    ts_ref: i64,
    input: u16,
    /// Inputs whose copy of this frame was dropped (bit per input).
    matched: u64,
}

pub(super) struct Dedup {
    window: i64,
    offsets: Vec<i64>,
    /// How long a kept frame is remembered (ns of its own clock).
    keep_for: i64,
    recent: KeyMap<Slot>,
    /// The frames remembered, oldest first.
    order: VecDeque<Remembered>,
}

/// A frame's time and header key, to forget it when it is too old.
#[derive(Clone, Copy)]
struct Remembered {
    ts: i64,
    key: u64,
}

impl Dedup {
    pub(super) fn new(window: i64, offsets: &[i64]) -> Self {
        let lo = offsets.iter().copied().min().unwrap_or(0);
        let hi = offsets.iter().copied().max().unwrap_or(0);
        Dedup {
            window,
            offsets: offsets.to_vec(),
            keep_for: window.saturating_add(hi.saturating_sub(lo)),
            recent: KeyMap::default(),
            order: VecDeque::new(),
        }
    }

    /// Whether `r` (from `input`, coming in time order) repeats a frame
    /// another input already gave; if not, it is remembered.
    pub(super) fn is_duplicate(&mut self, r: &PacketRecord, input: usize) -> bool {
        let oldest = r.ts_ns.saturating_sub(self.keep_for);
        while let Some(&Remembered { ts, key }) = self.order.front() {
            if ts >= oldest {
                break;
            }
            self.order.pop_front();
            if let Some(slot) = self.recent.get_mut(&key)
                && slot.forget_before(oldest)
            {
                self.recent.remove(&key);
            }
        }
        let key = header_key(r);
        let ts_ref = r.ts_ns.saturating_sub(self.offsets[input]);
        let bit = 1u64 << input;
        let this = Kept {
            ts: r.ts_ns,
            ts_ref,
            input: input as u16,
            matched: 0,
        };
        self.order.push_back(Remembered { ts: r.ts_ns, key });
        let slot = match self.recent.entry(key) {
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(Slot::One(this));
                return false;
            }
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        };
        // The nearest copy from another input that no frame of this input
        // has matched yet.
        let nearest = slot
            .kept()
            .iter_mut()
            .filter(|k| k.input as usize != input && k.matched & bit == 0)
            .map(|k| ((k.ts_ref - ts_ref).abs(), k))
            .filter(|(d, _)| *d <= self.window)
            .min_by_key(|(d, _)| *d);
        if let Some((_, k)) = nearest {
            k.matched |= bit;
            self.order.pop_back();
            return true;
        }
        slot.push(this);
        false
    }
}

/// The frames kept under one key: nearly always one, so without a
/// vector's allocation.
enum Slot {
    One(Kept),
    Many(Vec<Kept>),
}

impl Slot {
    fn kept(&mut self) -> &mut [Kept] {
        match self {
            Slot::One(k) => std::slice::from_mut(k),
            Slot::Many(v) => v,
        }
    }

    fn push(&mut self, k: Kept) {
        match self {
            Slot::One(first) => {
                let first = std::mem::replace(
                    first,
                    Kept {
                        ts: 0,
                        ts_ref: 0,
                        input: 0,
                        matched: 0,
                    },
                );
                *self = Slot::Many(vec![first, k]);
            }
            Slot::Many(v) => v.push(k),
        }
    }

    /// Forgets frames older than `oldest`; true when none is left.
    fn forget_before(&mut self, oldest: i64) -> bool {
        match self {
            Slot::One(k) => k.ts < oldest,
            Slot::Many(v) => {
                v.retain(|k| k.ts >= oldest);
                v.is_empty()
            }
        }
    }
}

/// A header key's first time in an input's sample, and how often it
/// occurs there.
#[derive(Clone, Copy)]
struct Sampled {
    ts: i64,
    count: u32,
}

#[derive(Clone, Debug, Default)]
pub(super) struct OffsetEstimate {
    pub(super) offset: Option<i64>,
    pub(super) frames: u64,
    pub(super) spread: Option<i64>,
}

/// Each input's clock offset from the first input's, from the IP frames
/// both saw near the start of their common time: the median difference of
/// their timestamps over frames whose headers occur once in each sample.
pub(super) fn estimate_offsets(
    sources: &[Input],
    opts: &MergeOptions,
) -> Result<Vec<OffsetEstimate>, StoreError> {
    let first_ts = |s: &Input| {
        s.chunks
            .iter()
            .map(|c| c.span.ts_min)
            .filter(|&t| t != i64::MIN)
            .min()
    };
    let Some(start) = sources.iter().filter_map(first_ts).max() else {
        return Ok(vec![OffsetEstimate::default(); sources.len()]);
    };
    let from = start.saturating_sub(opts.max_offset_ns);
    let sample = |s: &Input| -> Result<KeyMap<Sampled>, StoreError> {
        let mut chunks: Vec<_> = s.chunks.iter().filter(|c| c.span.ts_max >= from).collect();
        chunks.sort_by_key(|c| c.span.ts_min);
        let mut keys: KeyMap<Sampled> = KeyMap::default();
        let mut rows = 0;
        let mut batch = Vec::new();
        for Chunk { path, span } in chunks {
            if rows >= opts.offset_sample_rows {
                break;
            }
            batch.clear();
            read_row_group(path, span.index, &mut batch)?;
            for r in batch
                .iter()
                .filter(|r| r.ts_ns >= from && r.has & Has::IP != 0)
            {
                let e = keys.entry(header_key(r)).or_insert(Sampled {
                    ts: r.ts_ns,
                    count: 0,
                });
                e.count += 1;
                rows += 1;
            }
        }
        Ok(keys)
    };
    let reference = sample(&sources[0])?;
    let mut out = vec![OffsetEstimate::default()];
    for s in &sources[1..] {
        let mut diffs: Vec<i64> = sample(s)?
            .iter()
            .filter(|(_, s)| s.count == 1)
            .filter_map(|(k, s)| match reference.get(k) {
                Some(&Sampled { ts: t0, count: 1 }) => Some(s.ts - t0),
                _ => None,
            })
            .filter(|d| d.abs() <= opts.max_offset_ns)
            .collect();
        diffs.sort_unstable();
        let q = |p: usize| diffs[(diffs.len() - 1) * p / 100];
        out.push(if diffs.is_empty() {
            OffsetEstimate::default()
        } else {
            OffsetEstimate {
                offset: Some(q(50)),
                frames: diffs.len() as u64,
                spread: Some(q(90) - q(10)),
            }
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::PacketFields;

    fn frame(ts: i64, seq: u32) -> PacketRecord {
        PacketRecord {
            fields: PacketFields {
                ts_ns: ts,
                wire_len: 100,
                has: Has::IP | Has::TCP,
                tcp_seq: seq,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn a_frame_seen_twice_is_kept_once_and_repeats_within_one_input_stay() {
        let mut d = Dedup::new(1_000, &[0, 5_000]);
        // Input 0 sends the same headers twice (a repeat on one box is a
        // real second frame); input 1 saw both, 5 us later on its clock.
        assert!(!d.is_duplicate(&frame(0, 1), 0));
        assert!(!d.is_duplicate(&frame(500, 1), 0));
        assert!(d.is_duplicate(&frame(5_000, 1), 1));
        assert!(d.is_duplicate(&frame(5_500, 1), 1));
        // A third copy from input 1 has no partner left.
        assert!(!d.is_duplicate(&frame(5_600, 1), 1));
        // Other headers, or too far apart, are other frames.
        assert!(!d.is_duplicate(&frame(6_000, 2), 1));
        assert!(!d.is_duplicate(&frame(9_000, 3), 0));
        assert!(!d.is_duplicate(&frame(16_000, 3), 1));
    }

    #[test]
    fn kept_frames_are_forgotten_after_the_window_and_the_offsets() {
        let mut d = Dedup::new(1_000, &[0, -2_000]);
        for i in 0..10_000 {
            assert!(!d.is_duplicate(&frame(i * 10_000, i as u32), 0));
        }
        assert!(d.recent.len() <= 2, "{} remembered", d.recent.len());
    }
}
