//! Time order across the CPUs' ring buffers.
//!
//! Each CPU has its own ring (no shared reservation lock on the traffic's
//! path), so user space reads records CPU by CPU and must merge them. A
//! record's first 8 bytes are its kernel timestamp; records are held until
//! the reader says every record stamped before some time has been read,
//! then released in timestamp order (ties keep their arrival order).

use crate::event::EVENT_SIZE;

/// Holds records back until their place in time is certain.
#[derive(Debug, Default)]
pub struct Reorder {
    /// Records not released yet, whole `EVENT_SIZE` records.
    held: Vec<u8>,
    /// (timestamp, index in `held`), sorted on each push.
    keys: Vec<(u64, u32)>,
    /// The records held back by a push, built beside `held`.
    kept: Vec<u8>,
}

fn stamp(rec: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&rec[..8]);
    u64::from_ne_bytes(b)
}

impl Reorder {
    /// Records held back.
    pub fn held(&self) -> usize {
        self.held.len() / EVENT_SIZE
    }

    /// Adds `records` (whole records; a trailing partial one is ignored)
    /// and hands every held record stamped before `until` to `release`,
    /// oldest first. `until = u64::MAX` releases everything.
    pub fn push<E>(
        &mut self,
        records: &[u8],
        until: u64,
        mut release: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let whole = records.len() / EVENT_SIZE * EVENT_SIZE;
        self.held.extend_from_slice(&records[..whole]);
        self.keys.clear();
        self.keys.extend(
            self.held
                .chunks_exact(EVENT_SIZE)
                .enumerate()
                .map(|(i, r)| (stamp(r), i as u32)),
        );
        // Each CPU's records arrive nearly sorted: the sort has little to do.
        self.keys.sort_unstable();
        let cut = self
            .keys
            .partition_point(|&(ts, _)| ts < until || until == u64::MAX);
        let record = |i: u32| &self.held[i as usize * EVENT_SIZE..(i as usize + 1) * EVENT_SIZE];
        let mut result = Ok(());
        for &(_, i) in &self.keys[..cut] {
            result = release(record(i));
            if result.is_err() {
                break;
            }
        }
        self.kept.clear();
        for &(_, i) in &self.keys[cut..] {
            self.kept.extend_from_slice(record(i));
        }
        std::mem::swap(&mut self.held, &mut self.kept);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ts: u64, tag: u8) -> Vec<u8> {
        let mut r = vec![0u8; EVENT_SIZE];
        r[..8].copy_from_slice(&ts.to_ne_bytes());
        r[EVENT_SIZE - 1] = tag;
        r
    }

    fn released(o: &mut Reorder, records: &[Vec<u8>], until: u64) -> Vec<(u64, u8)> {
        let bytes: Vec<u8> = records.concat();
        let mut out = Vec::new();
        o.push(&bytes, until, |r| {
            out.push((stamp(r), r[EVENT_SIZE - 1]));
            Ok::<(), ()>(())
        })
        .unwrap();
        out
    }

    #[test]
    fn two_rings_read_one_after_the_other_come_out_in_time_order() {
        let mut o = Reorder::default();
        // CPU 0's ring, then CPU 1's, as one read delivers them.
        let read1 = [
            rec(10, 0),
            rec(30, 0),
            rec(50, 0),
            rec(20, 1),
            rec(40, 1),
            rec(60, 1),
        ];
        // Everything stamped before 45 has been read.
        assert_eq!(
            released(&mut o, &read1, 45),
            vec![(10, 0), (20, 1), (30, 0), (40, 1)]
        );
        assert_eq!(o.held(), 2);
        // The next read brings a record stamped before the two held ones.
        let read2 = [rec(55, 0), rec(48, 1)];
        assert_eq!(
            released(&mut o, &read2, u64::MAX),
            vec![(48, 1), (50, 0), (55, 0), (60, 1)]
        );
        assert_eq!(o.held(), 0);
    }

    #[test]
    fn equal_stamps_keep_their_arrival_order() {
        let mut o = Reorder::default();
        let read = [rec(5, 1), rec(5, 2), rec(5, 3)];
        assert_eq!(
            released(&mut o, &read, u64::MAX),
            vec![(5, 1), (5, 2), (5, 3)]
        );
    }

    #[test]
    fn an_error_stops_the_release_and_keeps_nothing_twice() {
        let mut o = Reorder::default();
        let bytes = [rec(1, 0), rec(2, 0), rec(3, 0)].concat();
        let mut seen = 0;
        let r = o.push(&bytes, u64::MAX, |_| {
            seen += 1;
            if seen == 2 { Err("disk full") } else { Ok(()) }
        });
        assert_eq!(r, Err("disk full"));
        assert_eq!(seen, 2);
        assert_eq!(o.held(), 0);
    }
}
