//! Parquet's DELTA_BINARY_PACKED encoding, streamed: blocks of 128 deltas
//! in 4 miniblocks of 32 are packed as values arrive; the page header, which
//! needs the count, is written when the page ends.
//!
//! Arithmetic wraps in the column's own width, as the format requires, so
//! unsigned 32-bit values stored as INT32 (TCP sequence numbers) delta-encode
//! in at most 32 bits.

use super::bits::{bit_width, pack64, put_uleb, put_zigzag};

const BLOCK: usize = 128;
const MINIBLOCKS: usize = 4;
const MINI: usize = BLOCK / MINIBLOCKS;

/// A page of DELTA_BINARY_PACKED values being built.
#[derive(Clone, Debug)]
pub struct DeltaPage {
    /// Values are 32-bit (INT32) rather than 64-bit (INT64).
    narrow: bool,
    count: u64,
    first: u64,
    prev: u64,
    block: [i64; BLOCK],
    in_block: usize,
    body: Vec<u8>,
}

impl DeltaPage {
    pub fn new(narrow: bool) -> Self {
        DeltaPage {
            narrow,
            count: 0,
            first: 0,
            prev: 0,
            block: [0; BLOCK],
            in_block: 0,
            body: Vec::new(),
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    #[inline]
    pub fn push(&mut self, v: u64) {
        if self.count == 0 {
            self.first = v;
        } else {
            let d = if self.narrow {
                (v as u32 as i32).wrapping_sub(self.prev as u32 as i32) as i64
            } else {
                (v as i64).wrapping_sub(self.prev as i64)
            };
            self.block[self.in_block] = d;
            self.in_block += 1;
            if self.in_block == BLOCK {
                self.flush_block();
            }
        }
        self.prev = v;
        self.count += 1;
    }

    /// [`DeltaPage::push`] of each value of `values`, with the page's state
    /// in registers over the loop and a block's worth at a time.
    #[inline(always)]
    pub fn push_each(&mut self, mut values: impl Iterator<Item = u64>) {
        if self.count == 0 {
            let Some(v) = values.next() else {
                return;
            };
            self.push(v);
        }
        let (mut prev, mut at, mut count) = (self.prev, self.in_block, self.count);
        loop {
            let room = &mut self.block[at..];
            let mut filled = 0;
            if self.narrow {
                for (slot, v) in room.iter_mut().zip(values.by_ref()) {
                    *slot = (v as u32 as i32).wrapping_sub(prev as u32 as i32) as i64;
                    prev = v;
                    filled += 1;
                }
            } else {
                for (slot, v) in room.iter_mut().zip(values.by_ref()) {
                    *slot = (v as i64).wrapping_sub(prev as i64);
                    prev = v;
                    filled += 1;
                }
            }
            at += filled;
            count += filled as u64;
            if at < BLOCK {
                break;
            }
            (self.prev, self.in_block, self.count) = (prev, at, count);
            self.flush_block();
            at = 0;
        }
        (self.prev, self.in_block, self.count) = (prev, at, count);
    }

    fn flush_block(&mut self) {
        let n = self.in_block;
        if n == 0 {
            return;
        }
        let deltas = &self.block[..n];
        let min = deltas.iter().copied().min().unwrap_or(0);
        put_zigzag(&mut self.body, min);
        let mut residuals = [0u64; BLOCK];
        for (r, d) in residuals.iter_mut().zip(deltas) {
            *r = if self.narrow {
                (*d as i32).wrapping_sub(min as i32) as u32 as u64
            } else {
                d.wrapping_sub(min) as u64
            };
        }
        let used = n.div_ceil(MINI);
        let mut widths = [0u8; MINIBLOCKS];
        for (m, w) in widths.iter_mut().enumerate().take(used) {
            let max = residuals[m * MINI..(m + 1) * MINI]
                .iter()
                .fold(0u64, |a, &b| a | b);
            *w = bit_width(max) as u8;
        }
        self.body.extend_from_slice(&widths);
        for (m, &w) in widths.iter().enumerate().take(used) {
            // A narrow column's residuals fit in 32 bits: packed as such.
            pack64(
                &residuals[m * MINI..(m + 1) * MINI],
                w as u32,
                &mut self.body,
            );
        }
        self.in_block = 0;
    }

    /// Appends the encoded page to `out` and starts a new one.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        self.flush_block();
        put_uleb(out, BLOCK as u64);
        put_uleb(out, MINIBLOCKS as u64);
        put_uleb(out, self.count);
        let first = if self.narrow {
            self.first as u32 as i32 as i64
        } else {
            self.first as i64
        };
        put_zigzag(out, first);
        out.extend_from_slice(&self.body);
        self.body.clear();
        self.count = 0;
    }
}
