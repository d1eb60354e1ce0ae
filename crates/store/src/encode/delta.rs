//! Parquet's DELTA_BINARY_PACKED encoding, for INT32 and INT64 columns.
//!
//! Blocks of 128 deltas in 4 miniblocks of 32; each block stores its
//! smallest delta and each miniblock the residuals at its own bit width.
//! Arithmetic wraps in the column's own width, as the format requires, so
//! unsigned 32-bit values stored as INT32 (TCP sequence numbers) delta-encode
//! in at most 32 bits.

use super::bits::{bit_width, pack32, pack64, put_uleb, put_zigzag};

const BLOCK: usize = 128;
const MINIBLOCKS: usize = 4;
const MINI: usize = BLOCK / MINIBLOCKS;

/// Encodes 32-bit values (their bit patterns as INT32).
pub fn encode_i32(values: &[u32], out: &mut Vec<u8>) {
    put_uleb(out, BLOCK as u64);
    put_uleb(out, MINIBLOCKS as u64);
    put_uleb(out, values.len() as u64);
    put_zigzag(out, values.first().map_or(0, |&v| v as i32 as i64));
    if values.len() < 2 {
        return;
    }
    let mut deltas = [0i32; BLOCK];
    let mut residuals = [0u32; BLOCK];
    let mut start = 1;
    while start < values.len() {
        let n = (values.len() - start).min(BLOCK);
        for (k, d) in deltas.iter_mut().enumerate().take(n) {
            let i = start + k;
            *d = (values[i] as i32).wrapping_sub(values[i - 1] as i32);
        }
        let min = deltas[..n].iter().copied().min().unwrap_or(0);
        put_zigzag(out, min as i64);
        for (r, d) in residuals.iter_mut().zip(&deltas[..n]) {
            *r = d.wrapping_sub(min) as u32;
        }
        residuals[n..].fill(0);
        let used = n.div_ceil(MINI);
        let mut widths = [0u8; MINIBLOCKS];
        for (m, w) in widths.iter_mut().enumerate().take(used) {
            let max = residuals[m * MINI..(m + 1) * MINI]
                .iter()
                .fold(0u32, |a, &b| a | b);
            *w = bit_width(max as u64) as u8;
        }
        out.extend_from_slice(&widths);
        for (m, &w) in widths.iter().enumerate().take(used) {
            pack32(&residuals[m * MINI..(m + 1) * MINI], w as u32, out);
        }
        start += n;
    }
}

/// Encodes 64-bit values (their bit patterns as INT64).
pub fn encode_i64(values: &[u64], out: &mut Vec<u8>) {
    put_uleb(out, BLOCK as u64);
    put_uleb(out, MINIBLOCKS as u64);
    put_uleb(out, values.len() as u64);
    put_zigzag(out, values.first().map_or(0, |&v| v as i64));
    if values.len() < 2 {
        return;
    }
    let mut deltas = [0i64; BLOCK];
    let mut residuals = [0u64; BLOCK];
    let mut start = 1;
    while start < values.len() {
        let n = (values.len() - start).min(BLOCK);
        for (k, d) in deltas.iter_mut().enumerate().take(n) {
            let i = start + k;
            *d = (values[i] as i64).wrapping_sub(values[i - 1] as i64);
        }
        let min = deltas[..n].iter().copied().min().unwrap_or(0);
        put_zigzag(out, min);
        for (r, d) in residuals.iter_mut().zip(&deltas[..n]) {
            *r = d.wrapping_sub(min) as u64;
        }
        residuals[n..].fill(0);
        let used = n.div_ceil(MINI);
        let mut widths = [0u8; MINIBLOCKS];
        for (m, w) in widths.iter_mut().enumerate().take(used) {
            let max = residuals[m * MINI..(m + 1) * MINI]
                .iter()
                .fold(0u64, |a, &b| a | b);
            *w = bit_width(max) as u8;
        }
        out.extend_from_slice(&widths);
        for (m, &w) in widths.iter().enumerate().take(used) {
            pack64(&residuals[m * MINI..(m + 1) * MINI], w as u32, out);
        }
        start += n;
    }
}
