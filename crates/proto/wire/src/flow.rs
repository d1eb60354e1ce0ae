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
        if is_reversed(src, dst, sport, dport) {
            FlowKey {
                lo_addr: *dst,
                hi_addr: *src,
                lo_port: dport,
                hi_port: sport,
                proto,
            }
        } else {
            FlowKey {
                lo_addr: *src,
                hi_addr: *dst,
                lo_port: sport,
                hi_port: dport,
                proto,
            }
        }
    }

    /// The weir flow hash of this key.
    #[inline]
    pub fn hash(&self) -> u32 {
        hash_words(
            addr_words(&self.lo_addr),
            addr_words(&self.hi_addr),
            self.lo_port,
            self.hi_port,
            self.proto,
        )
    }
}

/// An address as big-endian halves `[high, low]`.
#[inline]
pub fn addr_words(a: &[u8; 16]) -> [u64; 2] {
    let v = u128::from_be_bytes(*a);
    [(v >> 64) as u64, v as u64]
}

/// Whether `src:sport` is the "high" end of its flow, i.e. the canonical
/// order swaps the endpoints.
#[inline]
pub fn is_reversed(src: &[u8; 16], dst: &[u8; 16], sport: u16, dport: u16) -> bool {
    let (s, d) = (addr_words(src), addr_words(dst));
    (s[0], s[1], sport) > (d[0], d[1], dport)
}

/// [`flow_hash`] of addresses given as big-endian halves `[high, low]`, for
/// callers that hold them so. Only 64-bit compares: a decoder that has just
/// stored the address does not wait on a wide reload of it.
#[inline]
pub fn flow_hash_words(src: [u64; 2], dst: [u64; 2], sport: u16, dport: u16, proto: u8) -> u32 {
    if (src[0], src[1], sport) <= (dst[0], dst[1], dport) {
        hash_words(src, dst, sport, dport, proto)
    } else {
        hash_words(dst, src, dport, sport, proto)
    }
}

#[inline]
fn hash_words(lo: [u64; 2], hi: [u64; 2], lo_port: u16, hi_port: u16, proto: u8) -> u32 {
    let words = [
        lo[0],
        lo[1],
        hi[0],
        hi[1],
        (lo_port as u64) << 32 | (hi_port as u64) << 16 | proto as u64,
    ];
    let mut h = SEED;
    for w in words {
        h = (h ^ w).wrapping_mul(M);
        h ^= h >> 29;
    }
    (splitmix64_finish(h) >> 32) as u32
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
    flow_hash_words(addr_words(src), addr_words(dst), sport, dport, proto)
}
