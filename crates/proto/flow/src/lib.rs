//! The flow layer under the application trackers (`app`, `rpc`): what
//! both need of TCP and UDP before their own protocol begins.
//!
//! - [`FlowKey`] (both directions of a flow as one key) and [`DirKey`]
//!   (one direction), hashed as a few words: these maps are hit on every
//!   segment.
//! - [`SeqTrack`]: where a TCP segment's bytes fall in its direction's
//!   sequence ([`Place`]: new, already seen, or after a gap).
//! - [`SweepClock`] and [`idle`]: timeouts on capture time, swept once a
//!   second of it, and [`expired`], the entries of a map a sweep ends.
//!
//! Pure, like `wire`: it knows nothing of files, threads or Linux. Every
//! function is small and `#[inline]` (called per segment from the
//! trackers' crates), and nothing here allocates per segment.

use std::hash::{Hash, Hasher};

use util::fasthash::FastMap;
use wire::Segment;

/// IP protocol numbers of the transports the trackers follow.
pub const TCP: u8 = 6;
pub const UDP: u8 = 17;

/// TCP header flags, as [`Segment::tcp_flags`] has them.
pub mod tcp {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const ACK: u16 = 0x010;
}

/// An address as two words for the hasher: derived `Hash` feeds arrays
/// byte slice by byte slice, with a length before each.
#[inline]
fn addr_words(a: &[u8; 16]) -> (u64, u64) {
    let (hi, lo) = a.split_at(8);
    (
        u64::from_ne_bytes(hi.try_into().unwrap_or_default()),
        u64::from_ne_bytes(lo.try_into().unwrap_or_default()),
    )
}

/// Two addresses as four words for the hasher.
#[inline]
pub fn hash_addrs<H: Hasher>(h: &mut H, x: &[u8; 16], y: &[u8; 16]) {
    let (a, b) = addr_words(x);
    let (c, d) = addr_words(y);
    h.write_u64(a);
    h.write_u64(b);
    h.write_u64(c);
    h.write_u64(d);
}

/// Both directions of a TCP or UDP flow as one key: the lower (address,
/// port) end first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKey {
    pub lo: [u8; 16],
    pub hi: [u8; 16],
    pub lo_port: u16,
    pub hi_port: u16,
}

impl FlowKey {
    /// The key of `seg`'s flow, and whether `seg`'s sender is its low end.
    #[inline]
    pub fn of(seg: &Segment) -> (FlowKey, bool) {
        let lo_is_src = (seg.src, seg.src_port) <= (seg.dst, seg.dst_port);
        let key = if lo_is_src {
            FlowKey {
                lo: seg.src,
                hi: seg.dst,
                lo_port: seg.src_port,
                hi_port: seg.dst_port,
            }
        } else {
            FlowKey {
                lo: seg.dst,
                hi: seg.src,
                lo_port: seg.dst_port,
                hi_port: seg.src_port,
            }
        };
        (key, lo_is_src)
    }
}

impl Hash for FlowKey {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_addrs(h, &self.lo, &self.hi);
        h.write_u64((self.lo_port as u64) << 16 | self.hi_port as u64);
    }
}

/// One direction of a TCP or UDP flow: sender, then receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirKey {
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
}

impl DirKey {
    /// The direction `seg` travels.
    #[inline]
    pub fn of(seg: &Segment) -> DirKey {
        DirKey {
            src: seg.src,
            dst: seg.dst,
            src_port: seg.src_port,
            dst_port: seg.dst_port,
        }
    }

    /// The other direction of the same flow.
    #[inline]
    pub fn reverse(&self) -> DirKey {
        DirKey {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
        }
    }
}

impl Hash for DirKey {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_addrs(h, &self.src, &self.dst);
        h.write_u32((self.src_port as u32) << 16 | self.dst_port as u32);
    }
}

/// Where a segment's bytes fall in its direction's sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The direction's next sequence number is not known (its SYN was
    /// not seen, or it was forgotten).
    Unknown,
    /// Every byte was seen before (a retransmission).
    Old,
    /// New bytes from `behind` on (the first `behind` were seen before;
    /// 0 for a segment in order).
    New { behind: u32 },
    /// `ahead` bytes before the segment are missing: a gap.
    Ahead(u32),
}

/// One direction's place in its TCP sequence.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeqTrack {
    next: Option<u32>,
}

impl SeqTrack {
    /// The direction starts at a SYN with sequence number `seq`.
    #[inline]
    pub fn start(&mut self, seq: u32) {
        self.next = Some(seq.wrapping_add(1));
    }

    /// The next byte's sequence number, if known.
    #[inline]
    pub fn next(&self) -> Option<u32> {
        self.next
    }

    /// The bytes up to `seq + len` have been taken.
    #[inline]
    pub fn taken(&mut self, seq: u32, len: u32) {
        self.next = Some(seq.wrapping_add(len));
    }

    /// Where `wire` bytes starting at sequence number `seq` fall.
    #[inline]
    pub fn place(&self, seq: u32, wire: u32) -> Place {
        let Some(next) = self.next else {
            return Place::Unknown;
        };
        let ahead = seq.wrapping_sub(next) as i32;
        if ahead > 0 {
            return Place::Ahead(ahead as u32);
        }
        let behind = ahead.unsigned_abs();
        if behind < wire {
            Place::New { behind }
        } else {
            Place::Old
        }
    }
}

/// Sweeps of timed-out state run once per second of capture time.
pub const SWEEP_EVERY_NS: i64 = 1_000_000_000;

/// When a tracker last swept its timed-out state (capture time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepClock {
    last: i64,
}

impl Default for SweepClock {
    fn default() -> Self {
        SweepClock { last: i64::MIN }
    }
}

impl SweepClock {
    /// Whether a sweep is due at `now`.
    #[inline]
    pub fn due(&self, now: i64) -> bool {
        now.saturating_sub(self.last) >= SWEEP_EVERY_NS
    }

    /// A sweep ran at `now`.
    #[inline]
    pub fn swept(&mut self, now: i64) {
        self.last = now;
    }
}

/// Whether something last active at `last` has been idle for `timeout`
/// at `now` (ended at the timeout itself).
#[inline]
pub fn idle(last: i64, timeout: i64, now: i64) -> bool {
    last.saturating_add(timeout) <= now
}

/// The keys of `map` whose entries a sweep ends, with the time each is
/// ordered by (`ends` gives it for an entry that ends, `None` for one
/// that stays), in the map's order: the caller sorts them and writes out
/// what they hold.
pub fn expired<K: Copy, V>(
    map: &FastMap<K, V>,
    mut ends: impl FnMut(&V) -> Option<i64>,
) -> Vec<(i64, K)> {
    map.iter()
        .filter_map(|(k, v)| ends(v).map(|t| (t, *k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(src: u8, sport: u16, dst: u8, dport: u16) -> Segment<'static> {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s[15] = src;
        d[15] = dst;
        Segment {
            ts_ns: 0,
            src: s,
            dst: d,
            src_port: sport,
            dst_port: dport,
            proto: TCP,
            tcp_seq: 0,
            tcp_flags: 0,
            payload: &[],
            payload_wire: 0,
        }
    }

    #[test]
    fn both_directions_share_a_flow_key() {
        let (a, a_lo) = FlowKey::of(&seg(1, 1000, 2, 80));
        let (b, b_lo) = FlowKey::of(&seg(2, 80, 1, 1000));
        assert_eq!(a, b);
        assert!(a_lo);
        assert!(!b_lo);
        let d = DirKey::of(&seg(1, 1000, 2, 80));
        assert_eq!(d.reverse(), DirKey::of(&seg(2, 80, 1, 1000)));
        assert_ne!(d, d.reverse());
    }

    #[test]
    fn segments_are_placed_in_the_sequence() {
        let mut s = SeqTrack::default();
        assert_eq!(s.place(5, 10), Place::Unknown);
        s.start(u32::MAX);
        assert_eq!(s.next(), Some(0));
        assert_eq!(s.place(0, 10), Place::New { behind: 0 });
        s.taken(0, 10);
        assert_eq!(s.place(4, 10), Place::New { behind: 6 });
        assert_eq!(s.place(0, 10), Place::Old);
        assert_eq!(s.place(4, 6), Place::Old);
        assert_eq!(s.place(13, 1), Place::Ahead(3));
        // Across the wrap of the sequence space.
        s.taken(u32::MAX - 1, 1);
        assert_eq!(s.place(1, 1), Place::Ahead(2));
        // Half the space behind is not ahead, and does not overflow.
        s.taken(0, 0);
        assert_eq!(s.place(1 << 31, 10), Place::Old);
    }

    #[test]
    fn sweeps_run_once_a_second_of_capture_time() {
        let mut c = SweepClock::default();
        assert!(c.due(i64::MIN + SWEEP_EVERY_NS));
        assert!(c.due(0));
        c.swept(5);
        assert!(!c.due(5 + SWEEP_EVERY_NS - 1));
        assert!(c.due(5 + SWEEP_EVERY_NS));
        c.swept(i64::MAX);
        assert!(!c.due(i64::MAX));
        assert!(idle(10, 5, 15));
        assert!(!idle(10, 5, 14));
        assert!(!idle(i64::MAX - 1, 5, i64::MAX - 1));
        let mut m: FastMap<u32, i64> = FastMap::default();
        m.insert(1, 10);
        m.insert(2, 20);
        let mut e = expired(&m, |&t| idle(t, 5, 16).then_some(t));
        e.sort_unstable();
        assert_eq!(e, vec![(10, 1)]);
    }
}
