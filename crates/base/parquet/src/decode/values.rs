//! Decoders of the encodings weir writes (see `encode`): ULEB128 and
//! zigzag varints, bit unpacking, the RLE / bit-packing hybrid, PLAIN and
//! DELTA_BINARY_PACKED. Every read is bounds-checked: a page that ends
//! early or claims more than it holds is an error, never a panic, and no
//! count read from the page sizes an allocation before it is checked
//! against the bytes that back it.

use super::DecodeError;

/// A cursor over a page's bytes.
pub struct Bytes<'a> {
    buf: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Bytes { buf }
    }

    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::corrupt("a page ends inside a value"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    pub fn byte(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub fn uleb(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                break;
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(DecodeError::corrupt("a varint longer than 64 bits"))
    }

    pub fn zigzag(&mut self) -> Result<i64, DecodeError> {
        let v = self.uleb()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }
}

/// Eight values of `W` bits from the `W` bytes of `src` (values are
/// packed in groups of eight, which fill whole bytes). With the width a
/// constant, the shifts and masks are constants too and the loop unrolls.
#[inline(always)]
fn group<const W: usize, T: Copy>(src: &[u8], out: &mut [T], from: impl Fn(u64) -> T) {
    // Read in place where 8 bytes from each value's first byte are there
    // (values up to 56 bits: one load each); a padded copy otherwise.
    if W <= 56 && src.len() >= W + 8 {
        let mask = (1u64 << W) - 1;
        for (j, o) in out.iter_mut().enumerate().take(8) {
            let bit = j * W;
            let at = bit / 8;
            let x = u64::from_le_bytes(src[at..at + 8].try_into().expect("8 bytes"));
            *o = from((x >> (bit % 8)) & mask);
        }
        return;
    }
    let mut b = [0u8; 80];
    b[..W].copy_from_slice(&src[..W]);
    let mask = if W == 64 { u64::MAX } else { (1u64 << W) - 1 };
    for (j, o) in out.iter_mut().enumerate().take(8) {
        let bit = j * W;
        let at = bit / 8;
        let x = u128::from_le_bytes(b[at..at + 16].try_into().expect("16 bytes"));
        *o = from((x >> (bit % 8)) as u64 & mask);
    }
}

/// Unpacks `out.len()` values of `W` bits from `buf` (checked to hold
/// them): whole groups in place, the last part-group from a padded copy.
#[inline(always)]
fn unpack_width<const W: usize, T: Copy>(
    buf: &[u8],
    out: &mut [T],
    from: impl Fn(u64) -> T + Copy,
) {
    let full = out.len() / 8;
    for (g, chunk) in out.chunks_exact_mut(8).enumerate() {
        group::<W, T>(&buf[g * W..], chunk, from);
    }
    let tail = &mut out[full * 8..];
    if !tail.is_empty() {
        let mut last = [0u8; 64];
        let have = buf.len().saturating_sub(full * W).min(W);
        last[..have].copy_from_slice(&buf[full * W..full * W + have]);
        let mut vals = [from(0); 8];
        group::<W, T>(&last, &mut vals, from);
        let n = tail.len();
        tail.copy_from_slice(&vals[..n]);
    }
}

macro_rules! by_width {
    ($width:expr, $buf:expr, $out:expr, $from:expr, $($w:literal)*) => {
        match $width {
            0 => $out.fill($from(0)),
            $( $w => unpack_width::<$w, _>($buf, $out, $from), )*
            _ => unreachable!("widths are checked"),
        }
    };
}

fn check_room(buf: &[u8], width: u32, n: usize) -> Result<(), DecodeError> {
    let need = n
        .checked_mul(width as usize)
        .map(|bits| bits.div_ceil(8))
        .ok_or_else(|| DecodeError::corrupt("too many bit-packed values"))?;
    if need > buf.len() {
        return Err(DecodeError::corrupt("bit-packed values run past the page"));
    }
    Ok(())
}

/// Unpacks `out.len()` values of `width` bits (≤ 64), packed LSB-first,
/// from `buf`, which must hold them all.
pub fn unpack(buf: &[u8], width: u32, out: &mut [u64]) -> Result<(), DecodeError> {
    if width > 64 {
        return Err(DecodeError::corrupt("a bit width over 64"));
    }
    check_room(buf, width, out.len())?;
    let from = |v: u64| v;
    by_width!(width, buf, out, from,
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
        62 63 64);
    Ok(())
}

/// [`unpack`] for widths ≤ 32 (dictionary codes, levels).
pub fn unpack32(buf: &[u8], width: u32, out: &mut [u32]) -> Result<(), DecodeError> {
    if width > 32 {
        return Err(DecodeError::corrupt("a bit width over 32"));
    }
    check_room(buf, width, out.len())?;
    let from = |v: u64| v as u32;
    by_width!(width, buf, out, from,
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32);
    Ok(())
}

/// Decodes `n` values of the RLE / bit-packing hybrid at `width` bits
/// (≤ 32) into `out` (cleared first), each checked to be under `bound` and
/// passed through `map` on the way (dictionary codes to values, levels to flags):
/// a run is checked and mapped once, however long.
pub fn hybrid_map<T: Copy>(
    src: &mut Bytes,
    width: u32,
    n: usize,
    bound: u64,
    out: &mut Vec<T>,
    map: impl Fn(u32) -> T,
) -> Result<(), DecodeError> {
    out.clear();
    if width > 32 {
        return Err(DecodeError::corrupt("a dictionary or level width over 32"));
    }
    let past = || DecodeError::corrupt("a dictionary code or level out of range");
    let value_bytes = width.div_ceil(8) as usize;
    let mut codes = [0u32; 1024];
    while out.len() < n {
        let header = src.uleb()?;
        let left = n - out.len();
        if header & 1 == 0 {
            let run = usize::try_from(header >> 1).unwrap_or(usize::MAX);
            let mut b = [0u8; 4];
            b[..value_bytes].copy_from_slice(src.take(value_bytes)?);
            let v = u32::from_le_bytes(b);
            if run == 0 {
                continue;
            }
            if u64::from(v) >= bound {
                return Err(past());
            }
            out.extend(std::iter::repeat_n(map(v), run.min(left)));
        } else {
            let groups = usize::try_from(header >> 1).unwrap_or(usize::MAX);
            // Whole groups of 8 are stored even past the last value.
            let bytes = groups
                .checked_mul(width as usize)
                .ok_or_else(|| DecodeError::corrupt("a bit-packed run too long"))?;
            let packed = src.take(bytes)?;
            // At width 0 the groups take no bytes, so any count passes the
            // length check above: saturate rather than overflow.
            let count = groups.saturating_mul(8).min(left);
            // A slice of codes at a time, small enough to stay in cache.
            let mut done = 0;
            while done < count {
                let m = (count - done).min(codes.len());
                let at = done / 8 * width as usize;
                unpack32(&packed[at..], width, &mut codes[..m])?;
                let max = codes[..m].iter().fold(0, |a, &b| a.max(b));
                if u64::from(max) >= bound {
                    return Err(past());
                }
                out.extend(codes[..m].iter().map(|&c| map(c)));
                done += m;
            }
        }
    }
    Ok(())
}

/// Decodes a DELTA_BINARY_PACKED run of values into `out` (cleared first):
/// at most `limit` of them (the page's value count). `narrow`: INT32, whose
/// arithmetic wraps at 32 bits; values are then kept zero-extended.
pub fn delta(
    src: &mut Bytes,
    narrow: bool,
    limit: usize,
    out: &mut Vec<u64>,
) -> Result<(), DecodeError> {
    out.clear();
    let block = usize::try_from(src.uleb()?).unwrap_or(usize::MAX);
    let minis = usize::try_from(src.uleb()?).unwrap_or(usize::MAX);
    let total = usize::try_from(src.uleb()?).unwrap_or(usize::MAX);
    let first = src.zigzag()?;
    if block == 0 || block % 128 != 0 || minis == 0 || block % minis != 0 || block > 1 << 20 {
        return Err(DecodeError::corrupt("a delta block of an impossible shape"));
    }
    let per_mini = block / minis;
    if per_mini % 32 != 0 {
        return Err(DecodeError::corrupt(
            "a delta miniblock not a multiple of 32",
        ));
    }
    if total > limit {
        return Err(DecodeError::corrupt(
            "more delta values than the page holds",
        ));
    }
    if total == 0 {
        return Ok(());
    }
    out.reserve(total);
    let wrap = |v: i64| if narrow { v as u32 as u64 } else { v as u64 };
    let mut prev = first;
    out.push(wrap(first));
    let mut residuals = vec![0u64; per_mini];
    let mut widths = vec![0u8; minis];
    while out.len() < total {
        let min = src.zigzag()?;
        widths.copy_from_slice(src.take(minis)?);
        for &w in &widths {
            if out.len() >= total {
                break;
            }
            let w = u32::from(w);
            if w > 64 {
                return Err(DecodeError::corrupt("a delta bit width over 64"));
            }
            let packed = src.take(per_mini * w as usize / 8)?;
            unpack(packed, w, &mut residuals)?;
            let take = (total - out.len()).min(per_mini);
            // One loop per width, each value one add (a running sum cannot
            // be vectorised, but it need not branch or check capacity).
            let residuals = &residuals[..take];
            if narrow {
                out.extend(residuals.iter().map(|&r| {
                    prev = (prev as i32)
                        .wrapping_add(min as i32)
                        .wrapping_add(r as u32 as i32) as i64;
                    wrap(prev)
                }));
            } else {
                out.extend(residuals.iter().map(|&r| {
                    prev = prev.wrapping_add(min).wrapping_add(r as i64);
                    prev as u64
                }));
            }
        }
    }
    Ok(())
}

/// PLAIN INT32 (zero-extended) or INT64 values: `n` of them.
pub fn plain_ints(
    src: &mut Bytes,
    narrow: bool,
    n: usize,
    out: &mut Vec<u64>,
) -> Result<(), DecodeError> {
    out.clear();
    let size = if narrow { 4 } else { 8 };
    let bytes = src.take(
        n.checked_mul(size)
            .ok_or_else(|| DecodeError::corrupt("too many values"))?,
    )?;
    if narrow {
        out.extend(
            bytes
                .chunks_exact(4)
                .map(|c| u64::from(u32::from_le_bytes(c.try_into().expect("4 bytes")))),
        );
    } else {
        out.extend(
            bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))),
        );
    }
    Ok(())
}

/// PLAIN FIXED_LEN_BYTE_ARRAY values of `width` ≤ 16 bytes, each read as a
/// big-endian number (weir's addresses and hashes).
pub fn plain_fixed(
    src: &mut Bytes,
    width: usize,
    n: usize,
    out: &mut Vec<u128>,
) -> Result<(), DecodeError> {
    out.clear();
    if width == 0 || width > 16 {
        return Err(DecodeError::unsupported(format!(
            "fixed-size values of {width} bytes"
        )));
    }
    let bytes = src.take(
        n.checked_mul(width)
            .ok_or_else(|| DecodeError::corrupt("too many values"))?,
    )?;
    out.extend(bytes.chunks_exact(width).map(|c| {
        let mut b = [0u8; 16];
        b[16 - width..].copy_from_slice(c);
        u128::from_be_bytes(b)
    }));
    Ok(())
}

/// PLAIN BYTE_ARRAY values, found in place: per row of `valid` (empty:
/// `rows` rows, all with values) the span of its value in `src`'s bytes,
/// (0, 0) for a row without one. Returns the bytes the values take.
pub fn plain_spans(
    src: &[u8],
    rows: usize,
    valid: &[bool],
    spans: &mut Vec<(u32, u32)>,
) -> Result<usize, DecodeError> {
    spans.clear();
    if src.len() > u32::MAX as usize {
        return Err(DecodeError::corrupt("a text page over 4 GiB"));
    }
    spans.reserve(rows);
    let mut at = 0usize;
    for r in 0..rows {
        if !(valid.is_empty() || valid[r]) {
            spans.push((0, 0));
            continue;
        }
        let len = src
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
            .ok_or_else(|| DecodeError::corrupt("a page ends inside a value"))?;
        let start = at + 4;
        let end = start
            .checked_add(len)
            .filter(|&e| e <= src.len())
            .ok_or_else(|| DecodeError::corrupt("a page ends inside a value"))?;
        spans.push((start as u32, end as u32));
        at = end;
    }
    Ok(at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::bits::{encode_runs, pack64};
    use crate::encode::delta::DeltaPage;

    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// Found by the column_scan fuzzer (a long run, 2026-11-26): a
    /// bit-packed run of 2^62 groups at width 0 takes no bytes, and its
    /// count of values overflowed.
    #[test]
    fn a_huge_bit_packed_run_at_width_zero_does_not_overflow() {
        // uleb((2^62 << 1) | 1): a bit-packed header of 2^62 groups.
        let mut header = Vec::new();
        let mut v: u64 = (1u64 << 63) | 1;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                header.push(b);
                break;
            }
            header.push(b | 0x80);
        }
        let mut out = Vec::new();
        let r = hybrid_map(&mut Bytes::new(&header), 0, 10, 1, &mut out, |c| c);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(out, [0; 10]);
    }

    #[test]
    fn unpack_reads_what_pack_wrote_at_every_width() {
        let mut s = 7u64;
        for w in 0..=64u32 {
            for n in [1usize, 7, 8, 9, 31, 64, 100] {
                let vals: Vec<u64> = (0..n)
                    .map(|_| match w {
                        0 => 0,
                        64 => xorshift(&mut s),
                        _ => xorshift(&mut s) & ((1 << w) - 1),
                    })
                    .collect();
                let mut buf = Vec::new();
                pack64(&vals, w, &mut buf);
                let mut out = vec![0u64; n];
                unpack(&buf, w, &mut out).unwrap();
                assert_eq!(out, vals, "width {w}, {n} values");
                if w > 0 {
                    assert!(unpack(&buf[..buf.len() - 1], w, &mut out).is_err());
                }
            }
        }
    }

    #[test]
    fn hybrid_reads_what_encode_runs_wrote() {
        let mut s = 99u64;
        for case in 0..300u32 {
            let width = case % 20 + 1;
            let n = (case as usize * 7) % 500 + 1;
            let mut runs: Vec<(u32, u32)> = Vec::new();
            let mut total = 0;
            while total < n {
                let v = (xorshift(&mut s) as u32) & ((1u64 << width) - 1) as u32;
                let len = if s % 3 == 0 {
                    (s >> 40) as usize % 30 + 1
                } else {
                    1
                };
                let len = len.min(n - total);
                runs.push((v, len as u32));
                total += len;
            }
            let want: Vec<u32> = runs
                .iter()
                .flat_map(|&(v, l)| std::iter::repeat_n(v, l as usize))
                .collect();
            let mut buf = Vec::new();
            encode_runs(&runs, width, &mut buf);
            let mut out = Vec::new();
            hybrid_map(&mut Bytes::new(&buf), width, n, u64::MAX, &mut out, |v| v).unwrap();
            assert_eq!(out, want, "width {width}");
            let cut = &buf[..buf.len() - 1];
            assert!(hybrid_map(&mut Bytes::new(cut), width, n, u64::MAX, &mut out, |v| v).is_err());
        }
    }

    #[test]
    fn delta_reads_what_delta_page_wrote() {
        let mut s = 3u64;
        for (narrow, n) in [
            (false, 1),
            (false, 129),
            (true, 500),
            (false, 1000),
            (true, 1),
        ] {
            let vals: Vec<u64> = (0..n)
                .map(|i| {
                    let v = match i % 5 {
                        0 => xorshift(&mut s),
                        _ => 1_700_000_000_000_000_000 + i as u64 * 1000,
                    };
                    if narrow { v as u32 as u64 } else { v }
                })
                .collect();
            let mut page = DeltaPage::new(narrow);
            vals.iter().for_each(|&v| page.push(v));
            let mut buf = Vec::new();
            page.finish(&mut buf);
            let mut out = Vec::new();
            delta(&mut Bytes::new(&buf), narrow, n, &mut out).unwrap();
            assert_eq!(out, vals, "narrow {narrow}, {n} values");
            assert!(delta(&mut Bytes::new(&buf), narrow, n - 1, &mut out).is_err());
            if n > 1 {
                let cut = &buf[..buf.len() - 1];
                assert!(delta(&mut Bytes::new(cut), narrow, n, &mut out).is_err());
            }
        }
    }

    #[test]
    fn varints_refuse_overlong_input() {
        let mut b = Bytes::new(&[0xff; 11]);
        assert!(b.uleb().is_err());
        let mut b = Bytes::new(&[0x80]);
        assert!(b.uleb().is_err());
        let mut b = Bytes::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(b.uleb().unwrap(), u64::MAX);
        let mut b = Bytes::new(&[3]);
        assert_eq!(b.zigzag().unwrap(), -2);
    }
}
