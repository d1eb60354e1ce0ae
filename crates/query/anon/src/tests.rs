use super::*;

/// splitmix64, for reproducible random inputs without a dependency
/// (shared with cryptopan's tests).
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        for b in &mut out {
            *b = self.next() as u8;
        }
        out
    }

    /// A short string over a small alphabet, so that substring hits are
    /// likely enough to exercise `name`'s variants.
    fn word(&mut self, len: usize) -> String {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzAB0-_~.";
        (0..len)
            .map(|_| char::from(CHARS[(self.next() % CHARS.len() as u64) as usize]))
            .collect()
    }
}

fn key(seed: u8) -> Key {
    Key::from_bytes(Key::generate_hex(&[seed; 32]).as_bytes()).expect("generated key loads")
}

/// 32 bytes that are not text, as `head -c 32 /dev/urandom` gives.
fn raw_key_bytes() -> [u8; 32] {
    let mut raw = [0u8; 32];
    for (i, b) in raw.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37) ^ 0xa5;
    }
    raw
}

fn same_mappings(a: &Key, b: &Key) -> bool {
    let v4: Ipv4Addr = "203.0.113.9".parse().unwrap();
    let v6: Ipv6Addr = "2001:db8:1::9".parse().unwrap();
    let mac = [0x00, 0x1b, 0x21, 0x3a, 0x4f, 0x02];
    a.ip_v4(v4) == b.ip_v4(v4)
        && a.ip_v6(v6) == b.ip_v6(v6)
        && a.mac(&mac) == b.mac(&mac)
        && a.file_handle(42) == b.file_handle(42)
        && a.name("nginx") == b.name("nginx")
        && a.fingerprint() == b.fingerprint()
}

fn mappings_all_differ(a: &Key, b: &Key) -> bool {
    let v4: Ipv4Addr = "203.0.113.9".parse().unwrap();
    let v6: Ipv6Addr = "2001:db8:1::9".parse().unwrap();
    let mac = [0x00, 0x1b, 0x21, 0x3a, 0x4f, 0x02];
    a.ip_v4(v4) != b.ip_v4(v4)
        && a.ip_v6(v6) != b.ip_v6(v6)
        && a.mac(&mac) != b.mac(&mac)
        && a.file_handle(42) != b.file_handle(42)
        && a.name("nginx") != b.name("nginx")
        && a.fingerprint() != b.fingerprint()
}

// ---- key files ----

#[test]
fn hex_and_raw_forms_of_one_key_agree() {
    let raw = raw_key_bytes();
    let from_raw = Key::from_bytes(&raw).unwrap();
    let hex = Key::generate_hex(&raw);
    let from_hex = Key::from_bytes(hex.as_bytes()).unwrap();
    assert!(same_mappings(&from_raw, &from_hex));
    // Upper case, surrounding and inner whitespace (`xxd -p` wraps lines).
    let messy = format!("  \r\n{}\n{}\t\n", &hex[..60].to_uppercase(), &hex[60..64]);
    assert!(same_mappings(
        &from_raw,
        &Key::from_bytes(messy.as_bytes()).unwrap()
    ));
}

#[test]
fn generate_hex_writes_64_digits_and_a_newline() {
    let text = Key::generate_hex(&[0xab; 32]);
    assert_eq!(text.len(), 65);
    assert!(text.ends_with('\n'));
    assert!(
        text[..64]
            .chars()
            .all(|c| matches!(c, '0'..='9' | 'a'..='f'))
    );
    assert_eq!(&text[..4], "abab");
}

#[test]
fn longer_keys_are_used_whole() {
    let mut long = [0u8; 100];
    long[..32].copy_from_slice(&raw_key_bytes());
    long[99] = 1;
    let a = Key::from_bytes(&long).unwrap();
    long[99] = 2;
    let b = Key::from_bytes(&long).unwrap();
    assert!(mappings_all_differ(&a, &b));
    let c = Key::from_bytes(format!("{}{}", "00".repeat(40), "ff").as_bytes());
    assert!(c.is_ok());
}

#[test]
fn short_keys_are_refused_with_how_to_make_one() {
    let errors = [
        Key::from_bytes(b"").unwrap_err(),
        Key::from_bytes(&raw_key_bytes()[..31]).unwrap_err(),
        Key::from_bytes("ab".repeat(31).as_bytes()).unwrap_err(),
        // 40 hex digits would be 40 raw bytes, but hex is read as hex.
        Key::from_bytes("0123456789".repeat(4).as_bytes()).unwrap_err(),
        Key::from_bytes("a".repeat(65).as_bytes()).unwrap_err(),
        Key::from_bytes(b"correct horse battery staple, my very long secret").unwrap_err(),
        Key::from_bytes("pâte à choux, une phrase de passe assez longue".as_bytes()).unwrap_err(),
    ];
    assert_eq!(errors[0], AnonError::ShortRawKey { len: 0 });
    assert_eq!(errors[1], AnonError::ShortRawKey { len: 31 });
    assert_eq!(errors[2], AnonError::ShortHexKey { digits: 62 });
    assert_eq!(errors[3], AnonError::ShortHexKey { digits: 40 });
    assert_eq!(errors[4], AnonError::OddHexKey { digits: 65 });
    assert_eq!(errors[5], AnonError::TextKey);
    assert_eq!(errors[6], AnonError::TextKey);
    for e in errors {
        let text = e.to_string();
        assert!(text.contains("head -c 32 /dev/urandom > FILE"), "{text}");
        assert!(text.contains("weir anonymize --new-key FILE"), "{text}");
    }
}

#[test]
fn hmac_key_block_matches_the_hmac_crate() {
    // `hmac_with_key` does RFC 2104's key preparation itself; it must give
    // what the crate's variable-length constructor gives.
    for len in [0, 1, 32, 63, 64, 65, 100, 200] {
        let k: Vec<u8> = (0..len).map(|i| i as u8 ^ 0x5c).collect();
        let ours = hmac_with_key(&k)
            .chain_update(b"msg")
            .finalize()
            .into_bytes();
        let theirs = <HmacSha256 as KeyInit>::new_from_slice(&k)
            .unwrap()
            .chain_update(b"msg")
            .finalize()
            .into_bytes();
        assert_eq!(ours, theirs, "key length {len}");
    }
}

#[test]
fn subkeys_are_distinct() {
    let master = raw_key_bytes();
    let labels = [
        label::IP_V4,
        label::IP_V6,
        label::MAC,
        label::FILE_HANDLE,
        label::NAME,
        label::TUNNEL_ID,
        label::FINGERPRINT,
    ];
    let mut subkeys: Vec<Vec<u8>> = labels
        .iter()
        .map(|l| {
            hmac_with_key(&master)
                .chain_update(l)
                .finalize()
                .into_bytes()
                .to_vec()
        })
        .collect();
    subkeys.sort();
    subkeys.dedup();
    assert_eq!(subkeys.len(), labels.len());
}

#[test]
fn same_key_same_mapping_other_key_other_mapping() {
    assert!(same_mappings(&key(1), &key(1)));
    assert!(mappings_all_differ(&key(1), &key(2)));
    // A key differing in one bit.
    let mut raw = raw_key_bytes();
    let a = Key::from_bytes(&raw).unwrap();
    raw[31] ^= 1;
    assert!(mappings_all_differ(&a, &Key::from_bytes(&raw).unwrap()));
}

#[test]
fn debug_shows_no_secret() {
    let k = key(3);
    let text = format!("{k:?}");
    assert_eq!(
        text,
        format!("Key {{ fingerprint: {:?}, .. }}", k.fingerprint())
    );
    assert_eq!(k.fingerprint().len(), 16);
}

// ---- IP addresses ----

#[test]
fn ip_round_trips_and_keeps_prefixes() {
    let k = key(4);
    let mut rng = Rng(10);
    for _ in 0..500 {
        let a = Ipv4Addr::from(rng.next() as u32);
        // A random difference whose first set bit is anywhere, or none.
        let diff = (rng.next() as u32).checked_shr((rng.next() % 33) as u32);
        let b = Ipv4Addr::from(u32::from(a) ^ diff.unwrap_or(0));
        assert_eq!(k.reveal_ip_v4(k.ip_v4(a)), a);
        let shared = (u32::from(a) ^ u32::from(b)).leading_zeros();
        let after = (u32::from(k.ip_v4(a)) ^ u32::from(k.ip_v4(b))).leading_zeros();
        assert_eq!(shared, after);
    }
    for _ in 0..100 {
        let a = Ipv6Addr::from(rng.bytes::<16>());
        assert_eq!(k.reveal_ip_v6(k.ip_v6(a)), a);
    }
}

#[test]
fn ip_keeps_ipv4_mapped_addresses_ipv4() {
    let k = key(5);
    let v4: Ipv4Addr = "198.51.100.23".parse().unwrap();
    let mapped = IpAddr::V6(v4.to_ipv6_mapped());
    let anon = k.ip(mapped);
    assert_eq!(anon, IpAddr::V6(k.ip_v4(v4).to_ipv6_mapped()));
    assert_eq!(k.ip(IpAddr::V4(v4)), IpAddr::V4(k.ip_v4(v4)));
    assert_eq!(k.reveal_ip(anon), mapped);
    let v6: IpAddr = "2001:db8::77".parse().unwrap();
    assert_eq!(k.reveal_ip(k.ip(v6)), v6);
    assert_eq!(k.reveal_ip(k.ip(IpAddr::V4(v4))), IpAddr::V4(v4));
}

#[test]
fn ipv4_and_ipv6_use_different_subkeys() {
    // The top 32 bits of an IPv6 image would equal the IPv4 image if the
    // two schemes shared a key.
    let k = key(6);
    let mut rng = Rng(11);
    let same = (0..64)
        .filter(|_| {
            let a = rng.next() as u32;
            let v6 = Ipv6Addr::from(u128::from(a) << 96);
            (u128::from(k.ip_v6(v6)) >> 96) as u32 == u32::from(k.ip_v4(Ipv4Addr::from(a)))
        })
        .count();
    assert_eq!(same, 0);
}

// ---- MAC addresses ----

#[test]
fn mac_keeps_broadcast_zero_and_group_bit() {
    let k = key(7);
    assert_eq!(k.mac(&BROADCAST_MAC), BROADCAST_MAC);
    assert_eq!(k.mac(&ZERO_MAC), ZERO_MAC);
    let mut rng = Rng(12);
    let mut changed = 0;
    for _ in 0..2000 {
        let addr = rng.bytes::<6>();
        let out = k.mac(&addr);
        assert_eq!(out[0] & GROUP_BIT, addr[0] & GROUP_BIT, "{addr:02x?}");
        assert_ne!(out, BROADCAST_MAC);
        assert_ne!(out, ZERO_MAC);
        assert_eq!(out, k.mac(&addr));
        if out != addr {
            changed += 1;
        }
    }
    assert_eq!(changed, 2000);
    // Common multicast addresses stay multicast.
    for addr in [
        [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb],
        [0x33, 0x33, 0x00, 0x00, 0x00, 0x01],
    ] {
        assert_eq!(k.mac(&addr)[0] & GROUP_BIT, GROUP_BIT);
    }
}

#[test]
fn mac_has_no_collisions_among_many() {
    let k = key(8);
    let mut rng = Rng(13);
    let mut outs: Vec<[u8; 6]> = (0..5000).map(|_| k.mac(&rng.bytes::<6>())).collect();
    outs.sort_unstable();
    outs.dedup();
    assert_eq!(outs.len(), 5000);
}

// ---- file handles ----

#[test]
fn file_handles_are_hashed_consistently() {
    let k = key(9);
    let mut outs: Vec<u64> = (0..5000u64).map(|h| k.file_handle(h)).collect();
    assert_eq!(outs[7], k.file_handle(7));
    assert!((0..5000u64).all(|h| k.file_handle(h) != h));
    outs.sort_unstable();
    outs.dedup();
    assert_eq!(outs.len(), 5000);
    assert_ne!(k.file_handle(u64::MAX), key(10).file_handle(u64::MAX));
}

// ---- names ----

#[test]
fn names_round_trip() {
    let k = key(11);
    let long = "x".repeat(10_000);
    for name in [
        "a",
        "ab",
        "sshd",
        "eth0",
        "kworker/u16:3-events_unbound",
        "/var/lib/weir/data.parquet",
        "héllo wörld ✓",
        "\0\u{7f}\n",
        "~AAAA",
        long.as_str(),
    ] {
        let text = k.name(name);
        assert!(text.starts_with(NAME_PREFIX), "{text}");
        assert!(
            text.bytes().all(|b| b.is_ascii_graphic()),
            "printable: {text}"
        );
        assert_eq!(k.reveal_name(&text).as_deref(), Ok(name));
        assert_eq!(k.name(name), text, "deterministic");
    }
}

#[test]
fn empty_name_stays_empty() {
    let k = key(12);
    assert_eq!(k.name(""), "");
    assert_eq!(k.reveal_name(""), Ok(String::new()));
}

#[test]
fn names_hide_length_to_within_the_padding() {
    let k = key(13);
    // 1 to 7 bytes plus the padding byte fill one 8-byte block.
    let lens: Vec<usize> = (1..=7).map(|n| k.name(&"q".repeat(n)).len()).collect();
    assert!(lens.iter().all(|&l| l == lens[0]), "{lens:?}");
    assert!(k.name(&"q".repeat(8)).len() > lens[0]);
}

#[test]
fn different_names_differ_and_none_contains_its_input() {
    let k = key(14);
    let mut rng = Rng(14);
    let mut names: Vec<String> = Vec::new();
    for len in 3..=12 {
        for _ in 0..400 {
            names.push(rng.word(len));
        }
    }
    names.sort();
    names.dedup();
    let mut texts: Vec<String> = Vec::with_capacity(names.len());
    for name in &names {
        let text = k.name(name);
        assert!(!text.contains(name.as_str()), "{name} in {text}");
        assert_eq!(k.reveal_name(&text).as_deref(), Ok(name.as_str()));
        texts.push(text);
    }
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), names.len());
}

#[test]
fn variants_cover_names_found_in_their_first_encoding() {
    // Find names whose first encoding contains them: `name` must have moved
    // on to another variant, which must still reveal.
    let k = key(15);
    let mut found = 0;
    let mut rng = Rng(15);
    for _ in 0..100_000 {
        let name = rng.word(3);
        let first = k.seal_name(&name, 0).unwrap();
        if first.contains(name.as_str()) {
            found += 1;
            let text = k.name(&name);
            assert_ne!(text, first);
            assert!(!text.contains(name.as_str()));
            assert_eq!(k.reveal_name(&text).as_deref(), Ok(name.as_str()));
        }
        if found >= 3 {
            break;
        }
    }
    assert!(found >= 3, "found only {found}");
}

#[test]
fn reveal_refuses_foreign_and_altered_text() {
    let k = key(16);
    let text = k.name("postgres");
    assert_eq!(key(17).reveal_name(&text), Err(AnonError::NameKeyMismatch));
    // Flip one character of the body to another alphabet character.
    let mut bytes = text.clone().into_bytes();
    let i = bytes.len() / 2;
    bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(bytes).unwrap();
    assert_eq!(k.reveal_name(&altered), Err(AnonError::NameKeyMismatch));
    for bad in [
        "postgres",
        "~",
        "~~",
        "~A",
        "~AAAA",
        "~not base64!",
        "~AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        &text[1..],
        &text[..text.len() - 1],
    ] {
        let err = k.reveal_name(bad).unwrap_err();
        assert!(
            matches!(
                err,
                AnonError::NotAnonymisedName | AnonError::NameKeyMismatch
            ),
            "{bad}: {err}"
        );
    }
    // 16-byte tag plus one 8-byte block, all zero: well formed, not ours.
    let forged = format!("~{}", base64url::encode(&[0u8; 24]));
    assert_eq!(k.reveal_name(&forged), Err(AnonError::NameKeyMismatch));
}

#[test]
fn nothing_panics_on_arbitrary_input() {
    let k = key(18);
    let mut rng = Rng(19);
    for len in 0..200 {
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let _ = Key::from_bytes(&bytes);
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let _ = k.reveal_name(&text);
        let _ = k.reveal_name(&format!("~{text}"));
        let _ = k.reveal_name(&format!("~{}", base64url::encode(&bytes)));
        let _ = k.name(&text);
    }
}

/// Every kind of tunnel id, with its width and the ids tested: all of them
/// for the narrow kinds, the first 40,000 and the top of the range for the
/// others.
fn tunnel_kinds() -> Vec<(&'static str, u32, Vec<u32>)> {
    [
        ("wccp", 8),
        ("erspan", 10),
        ("pppoe", 16),
        ("mpls", 20),
        ("vxlan", 24),
        ("vxlan-gpe", 24),
        ("geneve", 24),
        ("nsh", 24),
        ("gre", 32),
        ("gtpu", 32),
    ]
    .into_iter()
    .map(|(kind, bits)| {
        let top = if bits == 32 {
            u32::MAX
        } else {
            (1u32 << bits) - 1
        };
        let ids = if bits <= 16 {
            (0..=top).collect()
        } else {
            (0..40_000).chain(top - 1000..=top).collect()
        };
        (kind, bits, ids)
    })
    .collect()
}

#[test]
fn tunnel_ids_are_permuted_within_their_width() {
    let k = key(1);
    for (kind, bits, ids) in tunnel_kinds() {
        assert_eq!(tunnel_id_bits(kind), bits);
        let images: Vec<u32> = ids.iter().map(|&v| k.tunnel_id(kind, v)).collect();
        // Within the width, all distinct, and back with the key.
        assert!(
            bits == 32 || images.iter().all(|&a| a >> bits == 0),
            "{kind}"
        );
        let mut sorted = images.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "{kind}: two ids collide");
        for (&v, &a) in ids.iter().zip(&images) {
            assert_eq!(k.reveal_tunnel_id(kind, a), v, "{kind}");
        }
        // A permutation, not the identity: most ids move (a random one
        // fixes about one; of a WCCP service's 256, a few more may stay).
        let moved = ids.iter().zip(&images).filter(|(v, a)| v != a).count();
        assert!(
            ids.len() - moved <= (ids.len() / 100).max(6),
            "{kind}: {moved} of {} moved",
            ids.len()
        );
        if bits <= 16 {
            // The whole range: the images are exactly the range.
            assert_eq!(sorted, ids, "{kind}");
        }
    }
}

#[test]
fn tunnel_ids_are_keyed_and_per_kind() {
    let (a, a2, b) = (key(1), key(1), key(2));
    for (kind, bits, ids) in tunnel_kinds() {
        let ids = &ids[..ids.len().min(1000)];
        let under = |k: &Key| {
            ids.iter()
                .map(|&v| k.tunnel_id(kind, v))
                .collect::<Vec<_>>()
        };
        assert_eq!(under(&a), under(&a2), "{kind}: the same key maps alike");
        let differ = under(&a)
            .iter()
            .zip(under(&b))
            .filter(|(x, y)| **x != *y)
            .count();
        // Another key: a mapping unrelated to the first (a chance match
        // per id of 2^-bits).
        assert!(
            ids.len() - differ <= (ids.len() / 100).max(6),
            "{kind}/{bits}: only {differ} of {} differ",
            ids.len()
        );
    }
    // Two kinds of one width map the same id apart.
    let same = (0..1000)
        .filter(|&v| a.tunnel_id("vxlan", v) == a.tunnel_id("geneve", v))
        .count();
    assert!(same < 5, "{same}");
}

#[test]
fn tunnel_ids_too_wide_for_their_kind_stay() {
    let k = key(4);
    assert_eq!(k.tunnel_id("vxlan", 1 << 24), 1 << 24);
    assert_eq!(k.tunnel_id("erspan", 1024), 1024);
    assert_eq!(k.tunnel_id("pppoe", 0x1_0000), 0x1_0000);
    assert_ne!(k.tunnel_id("gre", 1 << 24), 1 << 24);
}
