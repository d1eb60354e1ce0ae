//! Dictionary building: distinct values in first-seen order and one index
//! per value, with a fast path for runs (rows sorted by flow repeat values).

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

impl DictKey for u128 {
    #[inline]
    fn hash(self) -> u64 {
        ((self as u64) ^ ((self >> 64) as u64).rotate_left(23)).hash()
    }
}

/// Distinct values in order of first appearance, and the index of each
/// input value into them.
pub struct Dictionary<K> {
    pub values: Vec<K>,
    pub indices: Vec<u32>,
}

const EMPTY: u32 = u32::MAX;

/// Builds the dictionary of `vals`, or `None` once it would exceed `limit`
/// distinct values (the caller then falls back to another encoding).
pub fn build<K: DictKey>(vals: &[K], limit: usize) -> Option<Dictionary<K>> {
    let mut slots: Vec<u32> = vec![EMPTY; 1024];
    let mut mask = slots.len() - 1;
    let mut values: Vec<K> = Vec::new();
    let mut indices: Vec<u32> = Vec::with_capacity(vals.len());
    let mut prev: Option<(K, u32)> = None;
    for &v in vals {
        if let Some((pv, pi)) = prev
            && pv == v
        {
            indices.push(pi);
            continue;
        }
        let mut at = v.hash() as usize & mask;
        let idx = loop {
            let s = slots[at];
            if s == EMPTY {
                if values.len() >= limit {
                    return None;
                }
                let idx = values.len() as u32;
                values.push(v);
                slots[at] = idx;
                if values.len() * 2 > slots.len() {
                    slots = vec![EMPTY; slots.len() * 2];
                    mask = slots.len() - 1;
                    for (i, &k) in values.iter().enumerate() {
                        let mut a = k.hash() as usize & mask;
                        while slots[a] != EMPTY {
                            a = (a + 1) & mask;
                        }
                        slots[a] = i as u32;
                    }
                }
                break idx;
            }
            if values[s as usize] == v {
                break s;
            }
            at = (at + 1) & mask;
        };
        indices.push(idx);
        prev = Some((v, idx));
    }
    Some(Dictionary { values, indices })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dictionary_round_trip_and_limit() {
        let vals: Vec<u64> = (0..10_000u64).map(|i| (i * 7919) % 3001).collect();
        let d = build(&vals, 5000).unwrap();
        assert_eq!(d.values.len(), 3001);
        for (v, i) in vals.iter().zip(&d.indices) {
            assert_eq!(d.values[*i as usize], *v);
        }
        assert!(build(&vals, 3000).is_none());
        let wide: Vec<u128> = vals.iter().map(|&v| (v as u128) << 70 | 5).collect();
        let d = build(&wide, 5000).unwrap();
        assert_eq!(d.values.len(), 3001);
        assert_eq!(d.values[d.indices[17] as usize], wide[17]);
    }
}
