//! Incremental dictionaries: distinct values in first-seen order, found
//! again by an open-addressing hash table.

/// A value that can be a dictionary key.
pub trait DictKey: Copy + Eq {
    fn hash(self) -> u64;
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
        self.bytes()
            .fold(self.len() as u64, |h, b| {
                (h.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
            })
            .hash()
    }
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
            if self.values[s as usize] == v {
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
}
