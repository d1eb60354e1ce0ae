//! Incremental dictionaries: distinct values in first-seen order, found
//! again by an open-addressing hash table.

/// A value that can be a dictionary key.
pub trait DictKey: Copy + Eq {
    fn hash(self) -> u64;
    /// `self == other`, sooner where the type allows.
    #[inline(always)]
    fn same(self, other: Self) -> bool {
        self == other
    }
}

impl DictKey for u64 {
    #[inline]
    fn hash(self) -> u64 {
        let h = (self ^ (self >> 31)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^ (h >> 29)
    }
}

impl DictKey for u32 {
    #[inline]
    fn hash(self) -> u64 {
        (self as u64).hash()
    }
}

impl DictKey for &'static str {
    #[inline]
    fn hash(self) -> u64 {
        hash_bytes(self.as_bytes())
    }
    /// The names a column holds are mostly the same few constants: the
    /// same address and length is equal without comparing the bytes (a
    /// call to `memcmp` each; 3 % of a conversion's RPC stage).
    #[inline(always)]
    fn same(self, other: Self) -> bool {
        std::ptr::eq(self, other) || self == other
    }
}

/// A hash of a text, eight bytes at a time, its last eight read where they
/// lie (overlapping the word before) and a shorter text as two halves that
/// may overlap: copying a text's last bytes into a word was a call to
/// `memcpy` per lookup.
#[inline]
pub fn hash_bytes(b: &[u8]) -> u64 {
    use util::fasthash::mix;
    let n = b.len();
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    let half = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default()) as u64;
    let h = n as u64;
    let h = match n {
        0 => h,
        1..=3 => mix(
            h,
            b[0] as u64 | (b[n / 2] as u64) << 8 | (b[n - 1] as u64) << 16,
        ),
        4..=7 => mix(h, half(0) | half(n - 4) << 32),
        _ => {
            let mut h = h;
            let mut at = 0;
            while at + 8 < n {
                h = mix(h, word(at));
                at += 8;
            }
            mix(h, word(n - 8))
        }
    };
    h.hash()
}

impl DictKey for bool {
    #[inline]
    fn hash(self) -> u64 {
        self as u64
    }
}

impl DictKey for u128 {
    #[inline]
    fn hash(self) -> u64 {
        ((self as u64) ^ ((self >> 64) as u64).rotate_left(23)).hash()
    }
}

const EMPTY: u32 = u32::MAX;

/// A dictionary being built.
#[derive(Clone, Debug)]
pub struct Dict<K> {
    pub values: Vec<K>,
    slots: Vec<u32>,
}

impl<K: DictKey> Default for Dict<K> {
    fn default() -> Self {
        Dict {
            values: Vec::new(),
            slots: vec![EMPTY; 256],
        }
    }
}

impl<K: DictKey> Dict<K> {
    /// Forgets every value, keeping the allocations.
    pub fn clear(&mut self) {
        self.values.clear();
        self.slots.fill(EMPTY);
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The index of `v`, adding it if new.
    #[inline]
    pub fn index(&mut self, v: K) -> u32 {
        let mask = self.slots.len() - 1;
        let mut at = v.hash() as usize & mask;
        loop {
            let s = self.slots[at];
            if s == EMPTY {
                let idx = self.values.len() as u32;
                self.values.push(v);
                self.slots[at] = idx;
                if self.values.len() * 2 > self.slots.len() {
                    self.grow();
                }
                return idx;
            }
            if self.values[s as usize].same(v) {
                return s;
            }
            at = (at + 1) & mask;
        }
    }

    fn grow(&mut self) {
        self.slots = vec![EMPTY; self.slots.len() * 2];
        let mask = self.slots.len() - 1;
        for (i, &k) in self.values.iter().enumerate() {
            let mut a = k.hash() as usize & mask;
            while self.slots[a] != EMPTY {
                a = (a + 1) & mask;
            }
            self.slots[a] = i as u32;
        }
    }
}

/// A dictionary of texts being built: the distinct texts in first-seen
/// order, stored as the dictionary page holds them (PLAIN: each after its
/// length), found again by an open-addressing hash table.
#[derive(Clone, Debug)]
pub struct TextDict {
    /// The dictionary page's bytes.
    pub plain: Vec<u8>,
    /// Per index, where its text starts in `plain` and its length.
    spans: Vec<(u32, u32)>,
    slots: Vec<u32>,
}

impl Default for TextDict {
    fn default() -> Self {
        TextDict {
            plain: Vec::new(),
            spans: Vec::new(),
            slots: vec![EMPTY; 256],
        }
    }
}

impl TextDict {
    pub fn clear(&mut self) {
        self.plain.clear();
        self.spans.clear();
        self.slots.fill(EMPTY);
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    fn text(&self, i: u32) -> &[u8] {
        let (at, len) = self.spans[i as usize];
        &self.plain[at as usize..(at + len) as usize]
    }

    /// The index of `v`, and whether it was added (new).
    #[inline]
    pub fn index(&mut self, v: &[u8]) -> (u32, bool) {
        let mask = self.slots.len() - 1;
        let mut at = hash_bytes(v) as usize & mask;
        loop {
            let s = self.slots[at];
            if s == EMPTY {
                let idx = self.spans.len() as u32;
                self.plain
                    .extend_from_slice(&(v.len() as u32).to_le_bytes());
                self.spans.push((self.plain.len() as u32, v.len() as u32));
                self.plain.extend_from_slice(v);
                self.slots[at] = idx;
                if self.spans.len() * 2 > self.slots.len() {
                    self.grow();
                }
                return (idx, true);
            }
            if self.text(s) == v {
                return (s, false);
            }
            at = (at + 1) & mask;
        }
    }

    fn grow(&mut self) {
        self.slots = vec![EMPTY; self.slots.len() * 2];
        let mask = self.slots.len() - 1;
        for i in 0..self.spans.len() as u32 {
            let mut a = hash_bytes(self.text(i)) as usize & mask;
            while self.slots[a] != EMPTY {
                a = (a + 1) & mask;
            }
            self.slots[a] = i;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_stable_and_distinct() {
        let vals: Vec<u64> = (0..10_000u64).map(|i| (i * 7919) % 3001).collect();
        let mut d = Dict::default();
        let idx: Vec<u32> = vals.iter().map(|&v| d.index(v)).collect();
        assert_eq!(d.len(), 3001);
        for (v, i) in vals.iter().zip(&idx) {
            assert_eq!(d.values[*i as usize], *v);
        }
        let mut w: Dict<u128> = Dict::default();
        let a = w.index(5 << 70);
        let b = w.index(5);
        assert_eq!((a, b, w.index(5 << 70)), (0, 1, 0));
        d.clear();
        assert!(d.is_empty());
        assert_eq!(d.index(9), 0);
    }

    #[test]
    fn texts_are_found_again_and_laid_out_as_the_page_holds_them() {
        // Prefixes of one another, equal in their first eight bytes, empty.
        let texts: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| {
                let mut t = b"abcdefgh".repeat((i % 3) as usize);
                t.extend_from_slice(format!("{}", i % 1234).as_bytes());
                t.truncate((i % 23) as usize);
                t
            })
            .collect();
        let mut d = TextDict::default();
        let mut first: Vec<&[u8]> = Vec::new();
        for t in &texts {
            let (i, new) = d.index(t);
            assert_eq!(new, i as usize == first.len());
            if new {
                first.push(t);
            }
            assert_eq!(first[i as usize], &t[..]);
        }
        assert_eq!(d.len(), first.len());
        let mut plain = Vec::new();
        for t in &first {
            plain.extend_from_slice(&(t.len() as u32).to_le_bytes());
            plain.extend_from_slice(t);
        }
        assert_eq!(d.plain, plain);
        d.clear();
        assert_eq!((d.is_empty(), d.index(b"x")), (true, (0, true)));
    }
}
