//! Bit-level building blocks of Parquet's encodings: ULEB128 varints,
//! zigzag, bit packing, and the RLE / bit-packing hybrid.

/// Appends `v` as an unsigned LEB128 varint.
#[inline]
pub fn put_uleb(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-encoded as a varint.
#[inline]
pub fn put_zigzag(out: &mut Vec<u8>, v: i64) {
    put_uleb(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Bits needed to represent `v` (0 for 0).
#[inline]
pub fn bit_width(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// Packs `values` LSB-first with `width` bits each (≤ 32). A multiple of 8
/// values fills whole bytes; otherwise the last byte is zero-padded.
pub fn pack32(values: &[u32], width: u32, out: &mut Vec<u8>) {
    pack_narrow(values, width, out);
}

/// Like [`pack32`] for 64-bit values and widths up to 64.
pub fn pack64(values: &[u64], width: u32, out: &mut Vec<u8>) {
    if width <= 32 {
        // The common case (small deltas): a 64-bit accumulator suffices.
        return pack_narrow(values, width, out);
    }
    debug_assert!(width <= 64);
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    let mut acc = 0u128;
    let mut bits = 0u32;
    for &v in values {
        acc |= ((v & mask) as u128) << bits;
        bits += width;
        if bits >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            bits -= 64;
        }
    }
    let tail = bits.div_ceil(8) as usize;
    out.extend_from_slice(&acc.to_le_bytes()[..tail]);
}

/// Packing at widths up to 32 bits through a 64-bit accumulator, flushed
/// 32 bits at a time into bytes made room for at once (an `extend` per
/// four bytes was most of the cost of packing a miniblock).
#[inline]
fn pack_narrow<T: Copy + Into<u64>>(values: &[T], width: u32, out: &mut Vec<u8>) {
    if width == 0 {
        return;
    }
    debug_assert!(width <= 32);
    let start = out.len();
    out.resize(start + (values.len() * width as usize).div_ceil(8), 0);
    let dst = &mut out[start..];
    let mask = (1u64 << width) - 1;
    let mut acc = 0u64;
    let mut bits = 0u32;
    let mut at = 0;
    for &v in values {
        acc |= (v.into() & mask) << bits;
        bits += width;
        if bits >= 32 {
            dst[at..at + 4].copy_from_slice(&(acc as u32).to_le_bytes());
            at += 4;
            acc >>= 32;
            bits -= 32;
        }
    }
    let tail = bits.div_ceil(8) as usize;
    dst[at..at + tail].copy_from_slice(&acc.to_le_bytes()[..tail]);
}

/// Encodes runs of `(value, length)` with Parquet's RLE / bit-packing
/// hybrid at `width` bits: runs of 8 or more become RLE runs, shorter ones
/// bit-packed groups of 8 (the last group zero-padded). Working from runs
/// keeps the cost proportional to the number of runs on sorted data.
pub fn encode_runs(runs: &[(u32, u32)], width: u32, out: &mut Vec<u8>) {
    let value_bytes = width.div_ceil(8) as usize;
    let mut pending: Vec<u32> = Vec::new();
    for &(v, len) in runs {
        let len = len as usize;
        // Literal groups hold multiples of 8 values: lend the run's first
        // few values to the pending literals if needed.
        let pad = (8 - pending.len() % 8) % 8;
        if len >= 8 + pad {
            pending.extend(std::iter::repeat_n(v, pad));
            if !pending.is_empty() {
                literal_groups(&pending, width, out);
                pending.clear();
            }
            put_uleb(out, ((len - pad) as u64) << 1);
            out.extend_from_slice(&v.to_le_bytes()[..value_bytes]);
        } else {
            // Shorter than 16 (8 + pad): 16 copies written and the excess
            // cut, with no loop whose exit depends on the run's length
            // (values that change every row would mispredict it).
            let at = pending.len();
            pending.extend_from_slice(&[v; 16]);
            pending.truncate(at + len);
        }
    }
    if !pending.is_empty() {
        literal_groups(&pending, width, out);
    }
}

fn literal_groups(values: &[u32], width: u32, out: &mut Vec<u8>) {
    let groups = values.len().div_ceil(8);
    put_uleb(out, ((groups as u64) << 1) | 1);
    let full = values.len() / 8 * 8;
    pack32(&values[..full], width, out);
    if full < values.len() {
        let mut last = [0u32; 8];
        last[..values.len() - full].copy_from_slice(&values[full..]);
        pack32(&last, width, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A straightforward decoder of the hybrid encoding, for checking.
    fn decode_hybrid(mut buf: &[u8], width: u32, n: usize) -> Vec<u32> {
        let mut out = Vec::new();
        let uleb = |b: &mut &[u8]| {
            let mut v = 0u64;
            let mut shift = 0;
            loop {
                let byte = b[0];
                *b = &b[1..];
                v |= ((byte & 0x7f) as u64) << shift;
                if byte & 0x80 == 0 {
                    return v;
                }
                shift += 7;
            }
        };
        while out.len() < n {
            let h = uleb(&mut buf);
            if h & 1 == 0 {
                let nb = width.div_ceil(8) as usize;
                let mut b = [0u8; 4];
                b[..nb].copy_from_slice(&buf[..nb]);
                buf = &buf[nb..];
                out.extend(std::iter::repeat_n(
                    u32::from_le_bytes(b),
                    (h >> 1) as usize,
                ));
            } else {
                let count = (h >> 1) as usize * 8;
                let bytes = count * width as usize / 8;
                let (packed, rest) = buf.split_at(bytes);
                buf = rest;
                for k in 0..count {
                    let mut v = 0u32;
                    for bit in 0..width as usize {
                        let p = k * width as usize + bit;
                        v |= (((packed[p / 8] >> (p % 8)) & 1) as u32) << bit;
                    }
                    out.push(v);
                }
            }
        }
        out.truncate(n);
        out
    }

    #[test]
    fn hybrid_round_trips() {
        let mut s = 99u64;
        for case in 0..300 {
            let width = (case % 20) as u32 + 1;
            let n = (case * 7) % 500 + 1;
            let mut vals = Vec::new();
            while vals.len() < n {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let v = (s as u32) & ((1u64 << width) - 1) as u32;
                let run = if s % 3 == 0 {
                    (s >> 40) as usize % 30
                } else {
                    1
                };
                vals.extend(std::iter::repeat_n(v, run.max(1)));
            }
            vals.truncate(n);
            let mut runs: Vec<(u32, u32)> = Vec::new();
            for &v in &vals {
                match runs.last_mut() {
                    Some((last, len)) if *last == v && s % 2 == 0 => *len += 1,
                    _ => runs.push((v, 1)),
                }
            }
            let mut buf = Vec::new();
            encode_runs(&runs, width, &mut buf);
            assert_eq!(decode_hybrid(&buf, width, n), vals, "width {width}");
        }
    }

    #[test]
    fn packing_widths() {
        let vals: Vec<u64> = (0..64u64)
            .map(|i| i.wrapping_mul(0x0123_4567_89ab_cdef))
            .collect();
        for w in [33, 47, 64] {
            let mut out = Vec::new();
            let masked: Vec<u64> = vals
                .iter()
                .map(|v| if w == 64 { *v } else { v & ((1 << w) - 1) })
                .collect();
            pack64(&masked, w, &mut out);
            assert_eq!(out.len(), 64 * w as usize / 8);
            for (k, v) in masked.iter().enumerate() {
                let mut got = 0u64;
                for bit in 0..w as usize {
                    let p = k * w as usize + bit;
                    got |= (((out[p / 8] >> (p % 8)) & 1) as u64) << bit;
                }
                assert_eq!(got, *v);
            }
        }
    }
}
