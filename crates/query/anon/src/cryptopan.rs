//! Crypto-PAn: prefix-preserving address anonymisation (Xu, Fan, Ammar,
//! Moon, 2002) over AES-128.
//!
//! Bit `i` of the output is bit `i` of the input XOR the top bit of
//! `AES_K(input[0..i] ‖ pad[i..128])`. Since the flip of bit `i` depends
//! only on the bits before it, two addresses that share their first `k`
//! bits get the same first `k` flips and so share exactly `k` bits after
//! anonymisation; and the key holder can undo it one bit at a time.
//!
//! IPv6 uses the same construction over all 128 bits, as the common
//! extensions of the scheme do.

use aes::Aes128;
use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockEncrypt, KeyInit};

/// A Crypto-PAn instance: the expanded AES key and the pad, computed once.
#[derive(Clone)]
pub struct CryptoPan {
    aes: Aes128,
    /// `AES_K(secret[16..32])`, as a big-endian 128-bit integer.
    pad: u128,
}

impl CryptoPan {
    /// Builds the instance from a 32-byte secret: the first 16 bytes are the
    /// AES key, the last 16 are encrypted under it to make the pad, as the
    /// reference implementation does.
    pub fn new(secret: &[u8; 32]) -> CryptoPan {
        let mut key = [0u8; 16];
        let mut pad_seed = [0u8; 16];
        key.copy_from_slice(&secret[..16]);
        pad_seed.copy_from_slice(&secret[16..]);
        let aes = Aes128::new(&GenericArray::from(key));
        let mut block = GenericArray::from(pad_seed);
        aes.encrypt_block(&mut block);
        let pad = u128::from_be_bytes(block.into());
        CryptoPan { aes, pad }
    }

    /// Anonymises an IPv4 address given as its big-endian integer value.
    pub fn anon_v4(&self, addr: u32) -> u32 {
        (self.walk(u128::from(addr) << 96, 32, false) >> 96) as u32
    }

    /// Undoes [`CryptoPan::anon_v4`].
    pub fn deanon_v4(&self, anon: u32) -> u32 {
        (self.walk(u128::from(anon) << 96, 32, true) >> 96) as u32
    }

    /// Anonymises an IPv6 address given as its big-endian integer value.
    pub fn anon_v6(&self, addr: u128) -> u128 {
        self.walk(addr, 128, false)
    }

    /// Undoes [`CryptoPan::anon_v6`].
    pub fn deanon_v6(&self, anon: u128) -> u128 {
        self.walk(anon, 128, true)
    }

    /// Runs the scheme over the top `bits` bits of `value`, one AES block
    /// per bit. Both directions XOR `value` with flips computed from the
    /// *original* address's prefix: going forward that is `value` itself,
    /// going back it is the output recovered so far, which is why the
    /// inverse has to proceed from the top bit down.
    fn walk(&self, value: u128, bits: u32, reverse: bool) -> u128 {
        let mut out = 0u128;
        for pos in 0..bits {
            // The first `pos` bits; `checked_shl` covers pos == 0, where the
            // shift would be the full width.
            let mask = u128::MAX.checked_shl(128 - pos).unwrap_or(0);
            let prefix = if reverse { out } else { value };
            let mut block =
                GenericArray::from(((prefix & mask) | (self.pad & !mask)).to_be_bytes());
            self.aes.encrypt_block(&mut block);
            let flip = u128::from(block[0] >> 7);
            let bit = 127 - pos;
            out |= (((value >> bit) & 1) ^ flip) << bit;
        }
        out
    }
}

impl std::fmt::Debug for CryptoPan {
    // The key and pad are secret: never print them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CryptoPan { .. }")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// The sample key of the Crypto-PAn 1.0 reference distribution.
    const REFERENCE_KEY: [u8; 32] = [
        21, 34, 23, 141, 51, 164, 207, 128, 19, 10, 91, 22, 73, 144, 125, 16, 216, 152, 143, 131,
        121, 121, 101, 39, 98, 87, 76, 45, 42, 132, 34, 2,
    ];

    /// Raw → anonymised pairs from the reference distribution's
    /// `sample_trace_raw.dat` / `sample_trace_sanitized.dat` under
    /// [`REFERENCE_KEY`], as listed in the tests of the Go implementation
    /// (Yawning Angel's `cryptopan`).
    const REFERENCE_V4: &[(&str, &str)] = &[
        ("128.11.68.132", "135.242.180.132"),
        ("129.118.74.4", "134.136.186.123"),
        ("130.132.252.244", "133.68.164.234"),
        ("141.223.7.43", "141.167.8.160"),
        ("141.233.145.108", "141.129.237.235"),
        ("152.163.225.39", "151.140.114.167"),
        ("156.29.3.236", "147.225.12.42"),
        ("165.247.96.84", "162.9.99.234"),
        ("166.107.77.190", "160.132.178.185"),
        ("192.102.249.13", "252.138.62.131"),
        ("192.215.32.125", "252.43.47.189"),
        ("192.233.80.103", "252.25.108.8"),
        ("192.41.57.43", "252.222.221.184"),
        ("193.150.244.223", "253.169.52.216"),
        ("195.205.63.100", "255.186.223.5"),
        ("198.200.171.101", "249.199.68.213"),
        ("198.26.132.101", "249.36.123.202"),
        ("198.36.213.5", "249.7.21.132"),
        ("198.51.77.238", "249.18.186.254"),
        ("199.217.79.101", "248.38.184.213"),
        ("202.49.198.20", "245.206.7.234"),
        ("203.12.160.252", "244.248.163.4"),
        ("204.184.162.189", "243.192.77.90"),
        ("204.202.136.230", "243.178.4.198"),
        ("204.29.20.4", "243.33.20.123"),
        ("205.178.38.67", "242.108.198.51"),
        ("205.188.147.153", "242.96.16.101"),
        ("205.188.248.25", "242.96.88.27"),
        ("205.245.121.43", "242.21.121.163"),
        ("207.105.49.5", "241.118.205.138"),
        ("207.135.65.238", "241.202.129.222"),
        ("207.155.9.214", "241.220.250.22"),
        ("207.188.7.45", "241.255.249.220"),
        ("207.25.71.27", "241.33.119.156"),
        ("207.33.151.131", "241.1.233.131"),
        ("208.147.89.59", "227.237.98.191"),
        ("208.234.120.210", "227.154.67.17"),
        ("208.28.185.184", "227.39.94.90"),
        ("208.52.56.122", "227.8.63.165"),
        ("209.12.231.7", "226.243.167.8"),
        ("209.238.72.3", "226.6.119.243"),
        ("209.246.74.109", "226.22.124.76"),
        ("209.68.60.238", "226.184.220.233"),
        ("209.85.249.6", "226.170.70.6"),
        ("212.120.124.31", "228.135.163.231"),
        ("212.146.8.236", "228.19.4.234"),
        ("212.186.227.154", "228.59.98.98"),
        ("212.204.172.118", "228.71.195.169"),
        ("212.206.130.201", "228.69.242.193"),
        ("216.148.237.145", "235.84.194.111"),
        ("216.157.30.252", "235.89.31.26"),
        ("216.184.159.48", "235.96.225.78"),
        ("216.227.10.221", "235.28.253.36"),
        ("216.254.18.172", "235.7.16.162"),
        ("216.32.132.250", "235.192.139.38"),
        ("216.35.217.178", "235.195.157.81"),
        ("24.0.250.221", "100.15.198.226"),
        ("24.13.62.231", "100.2.192.247"),
        ("24.14.213.138", "100.1.42.141"),
        ("24.5.0.80", "100.9.15.210"),
        ("24.7.198.88", "100.10.6.25"),
        ("24.94.26.44", "100.88.228.35"),
        ("38.15.67.68", "64.3.66.187"),
        ("4.3.88.225", "124.60.155.63"),
        ("63.14.55.111", "95.9.215.7"),
        ("63.195.241.44", "95.179.238.44"),
        ("63.97.7.140", "95.97.9.123"),
        ("64.14.118.196", "0.255.183.58"),
        ("64.34.154.117", "0.221.154.117"),
        ("64.39.15.238", "0.219.7.41"),
        ("10.185.25.118", "117.161.29.118"),
    ];

    /// IPv6 under the same key, from the same Go tests: that implementation
    /// extends the scheme to 128 bits as this one does, while the reference
    /// distribution is IPv4 only.
    const GO_V6: &[(&str, &str)] = &[
        ("::1", "78ff:f001:9fc0:20df:8380:b1f1:704:ed"),
        ("::2", "78ff:f001:9fc0:20df:8380:b1f1:704:ef"),
        ("::ffff", "78ff:f001:9fc0:20df:8380:b1f1:704:f838"),
        ("2001:db8::1", "4401:2bc:603f:d91d:27f:ff8e:e6f1:dc1e"),
        ("2001:db8::2", "4401:2bc:603f:d91d:27f:ff8e:e6f1:dc1c"),
    ];

    fn v4(s: &str) -> u32 {
        u32::from(
            s.parse::<Ipv4Addr>()
                .expect("test vector is an IPv4 address"),
        )
    }

    fn v6(s: &str) -> u128 {
        u128::from(
            s.parse::<Ipv6Addr>()
                .expect("test vector is an IPv6 address"),
        )
    }

    use crate::tests::Rng;

    impl Rng {
        fn next_u128(&mut self) -> u128 {
            (u128::from(self.next()) << 64) | u128::from(self.next())
        }

        /// A value sharing exactly `k` leading bits with `x` (k < width):
        /// keep the prefix, flip bit k, randomise the rest. Random pairs
        /// alone almost always differ in the first few bits, which would
        /// leave long shared prefixes untested.
        fn sibling_u128(&mut self, x: u128, k: u32) -> u128 {
            let keep = u128::MAX.checked_shl(128 - k).unwrap_or(0);
            let flip = 1u128 << (127 - k);
            let rest = !keep & !flip;
            (x & keep) | (!x & flip) | (self.next_u128() & rest)
        }
    }

    #[test]
    fn matches_reference_ipv4_vectors() {
        let pan = CryptoPan::new(&REFERENCE_KEY);
        assert!(REFERENCE_V4.len() >= 20);
        for &(raw, anon) in REFERENCE_V4 {
            let got = Ipv4Addr::from(pan.anon_v4(v4(raw)));
            assert_eq!(got, anon.parse::<Ipv4Addr>().unwrap(), "{raw}");
            assert_eq!(pan.deanon_v4(v4(anon)), v4(raw), "{anon}");
        }
    }

    #[test]
    fn matches_published_ipv6_vectors() {
        let pan = CryptoPan::new(&REFERENCE_KEY);
        for &(raw, anon) in GO_V6 {
            let got = Ipv6Addr::from(pan.anon_v6(v6(raw)));
            assert_eq!(got, anon.parse::<Ipv6Addr>().unwrap(), "{raw}");
            assert_eq!(pan.deanon_v6(v6(anon)), v6(raw), "{anon}");
        }
    }

    #[test]
    fn prefixes_survive_ipv4() {
        let pan = CryptoPan::new(&REFERENCE_KEY);
        let mut rng = Rng(1);
        for i in 0..3000u32 {
            let a = rng.next() as u32;
            // Half fully random pairs, half with a chosen shared prefix.
            let b = if i % 2 == 0 {
                rng.next() as u32
            } else {
                let k = (rng.next() % 32) as u32;
                (rng.sibling_u128(u128::from(a) << 96, k) >> 96) as u32
            };
            let before = (a ^ b).leading_zeros();
            let after = (pan.anon_v4(a) ^ pan.anon_v4(b)).leading_zeros();
            assert_eq!(before, after, "{a:#x} {b:#x}");
        }
    }

    #[test]
    fn prefixes_survive_ipv6() {
        let pan = CryptoPan::new(&REFERENCE_KEY);
        let mut rng = Rng(2);
        for i in 0..600u32 {
            let a = rng.next_u128();
            let b = if i % 2 == 0 {
                rng.next_u128()
            } else {
                let k = (rng.next() % 128) as u32;
                rng.sibling_u128(a, k)
            };
            let before = (a ^ b).leading_zeros();
            let after = (pan.anon_v6(a) ^ pan.anon_v6(b)).leading_zeros();
            assert_eq!(before, after, "{a:#x} {b:#x}");
        }
    }

    #[test]
    fn equal_addresses_stay_equal() {
        let pan = CryptoPan::new(&REFERENCE_KEY);
        let a = v4("192.0.2.7");
        assert_eq!(pan.anon_v4(a), pan.anon_v4(a));
        assert_eq!((pan.anon_v4(a) ^ pan.anon_v4(a)).leading_zeros(), 32);
    }

    #[test]
    fn deanon_undoes_anon() {
        let pan = CryptoPan::new(&REFERENCE_KEY);
        let mut rng = Rng(3);
        let mut v4s = vec![0, 1, u32::MAX, 0x8000_0000, 0x7fff_ffff];
        v4s.extend((0..2000).map(|_| rng.next() as u32));
        for x in v4s {
            assert_eq!(pan.deanon_v4(pan.anon_v4(x)), x, "{x:#x}");
            assert_eq!(pan.anon_v4(pan.deanon_v4(x)), x, "{x:#x}");
        }
        let mut v6s = vec![0, 1, u128::MAX, 1 << 127, u128::MAX >> 1];
        v6s.extend((0..400).map(|_| rng.next_u128()));
        for x in v6s {
            assert_eq!(pan.deanon_v6(pan.anon_v6(x)), x, "{x:#x}");
            assert_eq!(pan.anon_v6(pan.deanon_v6(x)), x, "{x:#x}");
        }
    }

    #[test]
    fn is_a_permutation_of_a_small_prefix_space() {
        // Addresses that differ only in their last 12 bits must map to 4096
        // distinct addresses sharing the same 20-bit prefix.
        let pan = CryptoPan::new(&REFERENCE_KEY);
        let base = v4("198.51.96.0");
        let mut seen: Vec<u32> = (0..4096).map(|i| pan.anon_v4(base | i)).collect();
        let prefix = seen[0] >> 12;
        assert!(seen.iter().all(|&a| a >> 12 == prefix));
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 4096);
    }

    #[test]
    fn debug_hides_the_key() {
        let text = format!("{:?}", CryptoPan::new(&REFERENCE_KEY));
        assert_eq!(text, "CryptoPan { .. }");
    }
}
