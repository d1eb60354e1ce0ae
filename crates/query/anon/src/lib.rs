//! Keyed anonymisation of packet datasets for sharing (`weir anonymize`).
//!
//! Pure functions of a secret [`Key`]: bytes and values in, bytes and values
//! out; no files, no threads. [`dataset`] applies them to a dataset's files,
//! column by column as `store::identify` tags the columns. The same key gives the same mapping in every
//! run and every dataset, so datasets anonymised under one key can still be
//! joined with one another; a different key gives an unrelated mapping.
//!
//! # The key
//!
//! A key file holds at least 32 random bytes, raw or as hex digits; the
//! forms are told apart as `util::keyfile` describes, and a passphrase is
//! refused.
//! Make one with `head -c 32 /dev/urandom > FILE` or
//! `weir anonymize --new-key FILE` (see [`Key::generate_hex`]).
//!
//! Each scheme below gets its own subkey, HMAC-SHA256(master, label) with a
//! distinct label, so no two schemes share key material and nothing one
//! reveals helps with another.
//!
//! # What each scheme keeps and hides
//!
//! | field | scheme | keeps | hides | reversible |
//! | --- | --- | --- | --- | --- |
//! | IPv4 / IPv6 address | Crypto-PAn over AES-128 ([`CryptoPan`]) | equality; the length of the prefix any two addresses share, so subnets and routing structure still show | the addresses themselves | yes, with the key |
//! | MAC address | HMAC-SHA256 cut to 48 bits | equality; the broadcast and all-zero addresses; the group (multicast) bit | the vendor (OUI) and the device | no |
//! | file handle | HMAC-SHA256 cut to 64 bits | equality | the value (pointers, inode numbers) | no |
//! | name | AES-SIV, deterministic, no nonce | equality; the empty name; the length, to within 8 bytes | the text | yes, with the key |
//! | tunnel id (VNI, MPLS label, PPPoE session, GRE key, TEID, ERSPAN session) | a keyed permutation within the id's width for its kind: an 8-round Feistel network over AES-128 ([`Key::tunnel_id`]) | equality; distinctness (no two ids of a kind collide); the width | which tenant, subscriber or session | yes, with the key |
//!
//! Why these: analyses of a trace need to tell hosts, devices, files and
//! processes apart and to group addresses by network, not to know who they
//! are. Addresses and names are reversible so that the key holder can map a
//! finding back to the real host; MACs and handles are hashes because
//! nobody needs them back. Equality is kept on purpose, and it is also the
//! limit of the protection: anyone who knows some real values (their own
//! host, a public server) can spot them by their traffic, and Crypto-PAn's
//! shared prefixes then narrow down the neighbours. Names keep their rough
//! length; IP addresses of special ranges (private, multicast, loopback)
//! are mapped like any other, so their class is not kept. The hashes may
//! collide: about n²/2⁴⁸ pairs among n MAC addresses (a million gives
//! one chance in 300), n²/2⁶⁵ among n handles.
//!
//! ```
//! let key = anon::Key::from_bytes(anon::Key::generate_hex(&[7; 32]).as_bytes())?;
//! let a = key.ip_v4("192.0.2.1".parse().unwrap());
//! assert_eq!(key.reveal_ip_v4(a), "192.0.2.1".parse::<std::net::Ipv4Addr>().unwrap());
//! let n = key.name("sshd");
//! assert!(n.starts_with('~') && !n.contains("sshd"));
//! assert_eq!(key.reveal_name(&n)?, "sshd");
//! # Ok::<(), anon::AnonError>(())
//! ```

mod base64url;
mod cryptopan;
pub mod dataset;

pub use cryptopan::CryptoPan;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use aes::Aes128;
use aes::cipher::BlockEncrypt;
use aes_siv::aead::generic_array::GenericArray;
use aes_siv::siv::Aes128Siv;
use aes_siv::{KeyInit, Tag};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

/// How to make a key, for every key error.
const MAKE_KEY: &str =
    "Make one with `head -c 32 /dev/urandom > FILE` or `weir anonymize --new-key FILE`.";

/// Errors of key loading and of name revealing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnonError {
    #[error("the key is too short: {len} raw bytes, at least 32 are needed. {make}", make = MAKE_KEY)]
    ShortRawKey { len: usize },
    #[error(
        "the key is too short: {digits} hex digits, at least 64 (32 bytes) are needed. {make}",
        make = MAKE_KEY
    )]
    ShortHexKey { digits: usize },
    #[error(
        "the key holds an odd number of hex digits ({digits}), so not whole bytes. {make}",
        make = MAKE_KEY
    )]
    OddHexKey { digits: usize },
    #[error(
        "the key is text but not hex digits; a passphrase is too weak to be a key, it must be \
         at least 32 random bytes, raw or as hex. {make}",
        make = MAKE_KEY
    )]
    TextKey,
    #[error("not an anonymised name: expected `~` followed by base64url text")]
    NotAnonymisedName,
    #[error("this name was not anonymised under this key, or it was altered")]
    NameKeyMismatch,
}

/// Marks an encrypted name; outside the base64url alphabet, so it can only
/// stand first.
const NAME_PREFIX: char = '~';

/// Encrypted names are padded to a multiple of this, so only their rough
/// length shows.
const NAME_PAD: usize = 8;

/// How many encodings `name` may try to find one that does not contain the
/// name itself (see [`Key::name`]); each try fails with a chance below
/// 10⁻³, so the second is rarely needed and the last never.
const NAME_VARIANTS: u8 = 8;

const BROADCAST_MAC: [u8; 6] = [0xff; 6];
const ZERO_MAC: [u8; 6] = [0; 6];
/// The I/G bit: set in multicast and broadcast addresses.
const GROUP_BIT: u8 = 0x01;

/// The subkey labels; changing one changes every mapping of that scheme.
mod label {
    pub const IP_V4: &[u8] = b"weir-anon/v1/ip-v4";
    pub const IP_V6: &[u8] = b"weir-anon/v1/ip-v6";
    pub const MAC: &[u8] = b"weir-anon/v1/mac";
    pub const FILE_HANDLE: &[u8] = b"weir-anon/v1/file-handle";
    pub const NAME: &[u8] = b"weir-anon/v1/name";
    pub const TUNNEL_ID: &[u8] = b"weir-anon/v1/tunnel-id";
    pub const FINGERPRINT: &[u8] = b"weir-anon/v1/fingerprint";
}

/// An anonymisation key: the subkeys of each scheme, derived once.
#[derive(Clone)]
pub struct Key {
    ip_v4: CryptoPan,
    ip_v6: CryptoPan,
    /// Keyed HMAC states, cloned per call, so the key's padding blocks are
    /// hashed once rather than per address.
    mac: HmacSha256,
    file_handle: HmacSha256,
    name: [u8; 32],
    /// The round function of the tunnel id permutation.
    tunnel_id: Aes128,
    fingerprint: [u8; 8],
}

/// Rounds of the tunnel id permutation's Feistel network (four make a
/// strong pseudorandom permutation; the ids are few and small, so more
/// cost nothing that matters).
const TUNNEL_ID_ROUNDS: u8 = 8;

/// The width in bits of a tunnel id of `kind` (the `tunnel` column's
/// name): 24 for a VXLAN, VXLAN-GPE or GENEVE VNI and an NSH service path,
/// 20 for an MPLS label, 16 for a PPPoE session, 10 for an ERSPAN session,
/// 8 for a WCCP service, 32 for a GRE key, a GTP-U TEID and anything else.
pub fn tunnel_id_bits(kind: &str) -> u32 {
    match kind {
        "vxlan" | "vxlan-gpe" | "geneve" | "nsh" => 24,
        "mpls" => 20,
        "pppoe" => 16,
        "erspan" => 10,
        "wccp" => 8,
        _ => 32,
    }
}

impl Key {
    /// Reads a key from a key file's contents; see the crate docs for the
    /// two forms and how they are told apart.
    pub fn from_bytes(bytes: &[u8]) -> Result<Key, AnonError> {
        let master = parse_key(bytes)?;
        let derive = |label: &[u8]| -> [u8; 32] {
            hmac_with_key(&master)
                .chain_update(label)
                .finalize()
                .into_bytes()
                .into()
        };
        let mut fingerprint = [0u8; 8];
        fingerprint.copy_from_slice(&derive(label::FINGERPRINT)[..8]);
        Ok(Key {
            ip_v4: CryptoPan::new(&derive(label::IP_V4)),
            ip_v6: CryptoPan::new(&derive(label::IP_V6)),
            mac: hmac_with_key(&derive(label::MAC)),
            file_handle: hmac_with_key(&derive(label::FILE_HANDLE)),
            name: derive(label::NAME),
            tunnel_id: {
                let k = derive(label::TUNNEL_ID);
                Aes128::new(&GenericArray::clone_from_slice(&k[..16]))
            },
            fingerprint,
        })
    }

    /// The text of a new key file holding `random` (which the caller draws
    /// from the OS): 64 lowercase hex digits and a newline.
    pub fn generate_hex(random: &[u8; 32]) -> String {
        let mut text: String = random.iter().map(|b| format!("{b:02x}")).collect();
        text.push('\n');
        text
    }

    /// 16 hex digits that name this key without revealing it (a keyed hash
    /// of its own), to record beside an anonymised dataset so that the key
    /// needed to reveal it can be recognised.
    pub fn fingerprint(&self) -> String {
        self.fingerprint
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Anonymises an IPv4 address, keeping shared prefixes.
    pub fn ip_v4(&self, addr: Ipv4Addr) -> Ipv4Addr {
        Ipv4Addr::from(self.ip_v4.anon_v4(u32::from(addr)))
    }

    /// Undoes [`Key::ip_v4`].
    pub fn reveal_ip_v4(&self, anon: Ipv4Addr) -> Ipv4Addr {
        Ipv4Addr::from(self.ip_v4.deanon_v4(u32::from(anon)))
    }

    /// Anonymises an IPv6 address as 128 bits, keeping shared prefixes.
    /// For IPv4 stored as IPv4-mapped IPv6 (`::ffff:a.b.c.d`, as in weir's
    /// 16-byte address columns) use [`Key::ip`], which keeps them IPv4 and
    /// mapped.
    pub fn ip_v6(&self, addr: Ipv6Addr) -> Ipv6Addr {
        Ipv6Addr::from(self.ip_v6.anon_v6(u128::from(addr)))
    }

    /// Undoes [`Key::ip_v6`].
    pub fn reveal_ip_v6(&self, anon: Ipv6Addr) -> Ipv6Addr {
        Ipv6Addr::from(self.ip_v6.deanon_v6(u128::from(anon)))
    }

    /// Anonymises either family; an IPv4-mapped IPv6 address goes through
    /// the IPv4 scheme and stays mapped, so it matches the same host seen
    /// as plain IPv4.
    pub fn ip(&self, addr: IpAddr) -> IpAddr {
        match addr {
            IpAddr::V4(a) => IpAddr::V4(self.ip_v4(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => IpAddr::V6(self.ip_v4(v4).to_ipv6_mapped()),
                None => IpAddr::V6(self.ip_v6(a)),
            },
        }
    }

    /// Undoes [`Key::ip`]. (An IPv6 address whose image happens to fall in
    /// `::ffff:0:0/96`, a chance of 2⁻⁹⁶, would not come back.)
    pub fn reveal_ip(&self, anon: IpAddr) -> IpAddr {
        match anon {
            IpAddr::V4(a) => IpAddr::V4(self.reveal_ip_v4(a)),
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => IpAddr::V6(self.reveal_ip_v4(v4).to_ipv6_mapped()),
                None => IpAddr::V6(self.reveal_ip_v6(a)),
            },
        }
    }

    /// Replaces a MAC address with a keyed hash of it. The broadcast and
    /// all-zero ("no address") values stay as they are, and the group bit
    /// keeps its value, so frames still read as unicast, multicast or
    /// broadcast; no other address is mapped onto those two.
    pub fn mac(&self, addr: &[u8; 6]) -> [u8; 6] {
        if *addr == BROADCAST_MAC || *addr == ZERO_MAC {
            return *addr;
        }
        let digest = self.mac.clone().chain_update(addr).finalize().into_bytes();
        let mut out = [0u8; 6];
        out.copy_from_slice(&digest[..6]);
        out[0] = (out[0] & !GROUP_BIT) | (addr[0] & GROUP_BIT);
        if out == BROADCAST_MAC || out == ZERO_MAC {
            out[5] ^= 1;
        }
        out
    }

    /// Replaces a file handle with a keyed hash of it.
    pub fn file_handle(&self, handle: u64) -> u64 {
        let digest = self
            .file_handle
            .clone()
            .chain_update(handle.to_be_bytes())
            .finalize()
            .into_bytes();
        let mut out = [0u8; 8];
        out.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(out)
    }

    /// Encrypts a name (process, interface, host, path…) deterministically:
    /// `~` then base64url without padding of AES-SIV's tag and ciphertext.
    /// The same name always gives the same text under one key, different
    /// names give different texts, and the empty name stays empty.
    ///
    /// The text never (in practice) contains a name of 3 or more bytes: if
    /// an encoding happens to, the next of a few variants (the variant
    /// number is the SIV associated data) is used instead. Shorter names
    /// can show up by chance, which says nothing about them.
    pub fn name(&self, name: &str) -> String {
        if name.is_empty() {
            return String::new();
        }
        let mut last = None;
        for variant in 0..NAME_VARIANTS {
            let Some(sealed) = self.seal_name(name, variant) else {
                continue;
            };
            if name.len() < 3 || !sealed.contains(name) {
                return sealed;
            }
            last = Some(sealed);
        }
        // Every variant contained the name, a chance below 10⁻²⁴: the last
        // one still reveals. Sealing cannot fail (see `seal_name`), so the
        // bare prefix, which hides everything and reveals as an error, is
        // only there to avoid a panic path.
        last.unwrap_or_else(|| NAME_PREFIX.to_string())
    }

    /// Undoes [`Key::name`]. Fails for text not made by `name` under this
    /// key, including altered text: SIV authenticates what it decrypts.
    pub fn reveal_name(&self, text: &str) -> Result<String, AnonError> {
        if text.is_empty() {
            return Ok(String::new());
        }
        let body = text
            .strip_prefix(NAME_PREFIX)
            .ok_or(AnonError::NotAnonymisedName)?;
        let sealed = base64url::decode(body).ok_or(AnonError::NotAnonymisedName)?;
        let (tag, ciphertext) = sealed
            .split_first_chunk::<16>()
            .ok_or(AnonError::NotAnonymisedName)?;
        if ciphertext.is_empty() || ciphertext.len() % NAME_PAD != 0 {
            return Err(AnonError::NotAnonymisedName);
        }
        let tag = Tag::from(*tag);
        for variant in 0..NAME_VARIANTS {
            let mut plain = ciphertext.to_vec();
            if self
                .name_cipher()
                .decrypt_in_place_detached([[variant]], &mut plain, &tag)
                .is_ok()
            {
                // Authentic, so the padding and UTF-8 are ours; a failure
                // here would mean a forged text, which only the key holder
                // could have made.
                let len = unpadded_len(&plain).ok_or(AnonError::NameKeyMismatch)?;
                plain.truncate(len);
                return String::from_utf8(plain).map_err(|_| AnonError::NameKeyMismatch);
            }
        }
        Err(AnonError::NameKeyMismatch)
    }

    /// Replaces a tunnel id of `kind` (as the `tunnel` column names it)
    /// by its image under a keyed permutation of the ids of that width
    /// ([`tunnel_id_bits`]): equal ids stay equal and distinct ones stay
    /// distinct, and a 24-bit VNI stays a 24-bit VNI. Each kind has a
    /// permutation of its own. An id too wide for its kind (which no
    /// decoder gives) is kept as it is, so it cannot meet an image.
    pub fn tunnel_id(&self, kind: &str, id: u32) -> u32 {
        self.feistel(kind, id, false)
    }

    /// Undoes [`Key::tunnel_id`].
    pub fn reveal_tunnel_id(&self, kind: &str, anon: u32) -> u32 {
        self.feistel(kind, anon, true)
    }

    /// A balanced Feistel network over the id's bits (every width is
    /// even); round `r` adds AES(kind, width, r, right half) to the left
    /// half modulo its size.
    fn feistel(&self, kind: &str, v: u32, reverse: bool) -> u32 {
        let bits = tunnel_id_bits(kind);
        if bits < 32 && v >> bits != 0 {
            return v;
        }
        let half = bits / 2;
        let mask = (1u32 << half) - 1;
        let round = |r: u8, x: u32| -> u32 {
            let mut block = [0u8; 16];
            block[0] = r;
            block[1] = bits as u8;
            let name = kind.as_bytes();
            let n = name.len().min(10);
            block[2..2 + n].copy_from_slice(&name[..n]);
            block[12..].copy_from_slice(&x.to_be_bytes());
            let mut b = GenericArray::from(block);
            self.tunnel_id.encrypt_block(&mut b);
            u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & mask
        };
        let (mut l, mut r) = (v >> half & mask, v & mask);
        if !reverse {
            for k in 0..TUNNEL_ID_ROUNDS {
                (l, r) = (r, l.wrapping_add(round(k, r)) & mask);
            }
        } else {
            for k in (0..TUNNEL_ID_ROUNDS).rev() {
                (l, r) = (r.wrapping_sub(round(k, l)) & mask, l);
            }
        }
        l << half | r
    }

    fn name_cipher(&self) -> Aes128Siv {
        // A fresh instance per call: `Siv` needs `&mut self` and is not
        // `Clone`, and its setup is small next to the work on a name.
        Aes128Siv::new(&GenericArray::from(self.name))
    }

    fn seal_name(&self, name: &str, variant: u8) -> Option<String> {
        let mut buf = name.as_bytes().to_vec();
        // ISO/IEC 7816-4 padding: 0x80 then zeros, always at least one byte.
        buf.push(0x80);
        buf.resize(buf.len().div_ceil(NAME_PAD) * NAME_PAD, 0);
        // Fails only with more than 126 headers; there is one.
        let tag = self
            .name_cipher()
            .encrypt_in_place_detached([[variant]], &mut buf)
            .ok()?;
        let mut sealed = Vec::with_capacity(tag.len() + buf.len());
        sealed.extend_from_slice(&tag);
        sealed.extend_from_slice(&buf);
        let mut text = String::from(NAME_PREFIX);
        text.push_str(&base64url::encode(&sealed));
        Some(text)
    }
}

impl std::fmt::Debug for Key {
    // Subkeys are secret; the fingerprint is made to be shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("fingerprint", &self.fingerprint())
            .finish_non_exhaustive()
    }
}

/// The master key bytes of a key file, by the rules in the crate docs.
fn parse_key(bytes: &[u8]) -> Result<Vec<u8>, AnonError> {
    use util::keyfile::KeyFileError;
    util::keyfile::parse(bytes).map_err(|e| match e {
        KeyFileError::ShortRaw { len } => AnonError::ShortRawKey { len },
        KeyFileError::ShortHex { digits } => AnonError::ShortHexKey { digits },
        KeyFileError::OddHex { digits } => AnonError::OddHexKey { digits },
        KeyFileError::Text => AnonError::TextKey,
    })
}

/// HMAC-SHA256 keyed with `key` of any length. RFC 2104 turns the key into
/// one 64-byte block (hashed if longer, zero-padded); doing that here lets
/// the infallible fixed-size constructor be used instead of a `Result` that
/// could never be an error.
fn hmac_with_key(key: &[u8]) -> HmacSha256 {
    let mut block = [0u8; 64];
    if key.len() > block.len() {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    <HmacSha256 as KeyInit>::new(&GenericArray::from(block))
}

/// The length of a name before its padding, or `None` if the padding is
/// malformed.
fn unpadded_len(padded: &[u8]) -> Option<usize> {
    let end = padded.iter().rposition(|&b| b != 0)?;
    (padded[end] == 0x80).then_some(end)
}

#[cfg(test)]
mod tests;
