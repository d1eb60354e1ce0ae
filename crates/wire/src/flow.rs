//! The symmetric 5-tuple flow hash: weir's one definition of "same flow".
//!
//! # Definition (weir flow hash, version 1)
//!
//! Inputs: two 16-byte addresses (IPv4 mapped into `::ffff:0:0/96`), two
//! ports (0 when the protocol has none, and for every IP fragment so that
//! all fragments of a datagram agree), and the transport protocol number.
//!
//! 1. Order the endpoints: `(addr, port)` pairs compare lexicographically,
//!    address bytes first; the smaller is `lo`, the larger `hi`. This is what
//!    makes the hash symmetric: both directions of a flow give the same input.
//! 2. Form five 64-bit words, big-endian: `lo.addr[0..8]`, `lo.addr[8..16]`,
//!    `hi.addr[0..8]`, `hi.addr[8..16]`, and
//!    `lo.port << 32 | hi.port << 16 | proto`.
//! 3. `h = SEED`; for each word `w`: `h = (h ^ w) * M; h ^= h >> 29`
//!    (wrapping 64-bit multiply).
//! 4. Finish with the SplitMix64 finaliser and keep the upper 32 bits.
//!
//! Only shifts, xors and 64-bit multiplies are used, so the same function can
//! be written as an eBPF socket filter for flow-hash sharding.

/// Initial state: the ASCII bytes of "weirflow".
pub const SEED: u64 = 0x7765_6972_666c_6f77;
/// The round multiplier (2^64 / golden ratio, odd).
pub const M: u64 = 0x9e37_79b9_7f4a_7c15;

/// A flow's endpoints in canonical order (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub lo_addr: [u8; 16],
    pub hi_addr: [u8; 16],
    pub lo_port: u16,
    pub hi_port: u16,
    pub proto: u8,
}

impl FlowKey {
    /// The canonical key of a packet from `src:sport` to `dst:dport`.
    #[inline]
    pub fn new(src: &[u8; 16], dst: &[u8; 16], sport: u16, dport: u16, proto: u8) -> Self {
        if (src, sport) <= (dst, dport) {
            FlowKey {
                lo_addr: *src,
                hi_addr: *dst,
                lo_port: sport,
                hi_port: dport,
                proto,
            }
        } else {
            FlowKey {
                lo_addr: *dst,
                hi_addr: *src,
                lo_port: dport,
                hi_port: sport,
                proto,
            }
        }
    }

    /// The weir flow hash of this key.
    #[inline]
    pub fn hash(&self) -> u32 {
        let word = |a: &[u8; 16], half: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&a[half * 8..half * 8 + 8]);
            u64::from_be_bytes(b)
        };
        let words = [
            word(&self.lo_addr, 0),
            word(&self.lo_addr, 1),
            word(&self.hi_addr, 0),
            word(&self.hi_addr, 1),
            (self.lo_port as u64) << 32 | (self.hi_port as u64) << 16 | self.proto as u64,
        ];
        let mut h = SEED;
        for w in words {
            h = (h ^ w).wrapping_mul(M);
            h ^= h >> 29;
        }
        (splitmix64_finish(h) >> 32) as u32
    }
}

#[inline]
fn splitmix64_finish(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The weir flow hash of a packet from `src:sport` to `dst:dport`; the same
/// for the reply direction.
#[inline]
pub fn flow_hash(src: &[u8; 16], dst: &[u8; 16], sport: u16, dport: u16, proto: u8) -> u32 {
    FlowKey::new(src, dst, sport, dport, proto).hash()
}
