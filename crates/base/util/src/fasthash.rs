//! A fast hasher for small in-memory maps keyed by addresses, ports and
//! ids (the stack decoder's sockets, the RPC tracker's streams and calls).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The multiply-rotate hash rustc uses (FxHash): a few cycles per word
/// where the standard SipHash spends tens of ns, and these maps are hit
/// several times per event or packet. Keys are addresses, ports and
/// ids of bounded maps, not worth defending against chosen collisions.
#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

/// One round of the hash: `h` with the word `w` mixed in. Also the step
/// of the store's hash of dictionary texts.
#[inline(always)]
pub fn mix(h: u64, w: u64) -> u64 {
    (h.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

impl FastHasher {
    fn add(&mut self, w: u64) {
        self.0 = mix(self.0, w);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, v: u8) {
        self.add(v as u64);
    }
    fn write_u16(&mut self, v: u16) {
        self.add(v as u64);
    }
    fn write_u32(&mut self, v: u32) {
        self.add(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    fn write_usize(&mut self, v: usize) {
        self.add(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
