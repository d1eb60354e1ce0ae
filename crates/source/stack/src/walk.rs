//! The walk level (the default): every interval the walk reads the own
//! counters and state of each TCP socket it follows, what the kernel
//! keeps per socket and `ss -ti` prints from tcp_info (`struct
//! sock_walk`, src/bpf/event.h), and a socket that reached CLOSE since
//! leaves its final counters behind. Nothing runs on the packet path.
//! The walk writes a record only for a socket whose counts changed since
//! its last one.
//!
//! Pure: records in, [`WalkRow`]s out. The kernel's counters only grow;
//! [`Walks`] keeps each socket's last record and reports the difference,
//! as [`crate::interval::Intervals`] does for the per-packet aggregates.

use util::fasthash::FastMap;

/// Bytes of one record (`WALK_SIZE`).
pub const WALK_SIZE: usize = 208;
/// `have` bits (`WALK_HAVE_*`).
pub const HAVE_CHRONO: u8 = 1;
pub const HAVE_RTO: u8 = 2;
pub const HAVE_START: u8 = 4;
/// The socket's first record.
pub const FIRST: u8 = 8;

/// One `struct sock_walk`, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockWalk {
    pub cookie: u64,
    pub ts_ns: u64,
    pub netns: u32,
    pub family: u8,
    pub state: u8,
    pub is_final: u8,
    pub have: u8,
    pub laddr: [u8; 16],
    pub raddr: [u8; 16],
    pub lport: u16,
    pub rport: u16,
    pub uid: u32,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub bytes_acked: u64,
    pub bytes_retrans: u64,
    pub busy_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
    pub segs_in: u32,
    pub segs_out: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub total_retrans: u32,
    pub total_rto: u32,
    pub write_seq: u32,
    pub copied_seq: u32,
    pub snd_cwnd: u32,
    pub ssthresh: u32,
    pub srtt_us: u32,
    pub rttvar_us: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub packets_out: u32,
    pub in_flight: u32,
    pub mss_cache: u32,
    pub rate_delivered: u32,
    pub rate_interval_us: u32,
    pub write_seq0: u32,
    pub copied_seq0: u32,
    pub pad1: u32,
}

const _: () = assert!(std::mem::size_of::<SockWalk>() == WALK_SIZE);

impl SockWalk {
    /// One record as the kernel wrote it; `None` when too short.
    pub fn parse(b: &[u8]) -> Option<SockWalk> {
        if b.len() < WALK_SIZE {
            return None;
        }
        // SAFETY: SockWalk is plain integers and arrays of them (every bit
        // pattern is a value), and `b` holds at least its size.
        Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<SockWalk>()) })
    }

    /// The delivery rate tcp_info reports, bytes per second.
    pub fn delivery_rate(&self) -> u64 {
        if self.rate_interval_us == 0 {
            return 0;
        }
        self.rate_delivered as u64 * self.mss_cache as u64 * 1_000_000
            / self.rate_interval_us as u64
    }

    /// What the application wrote and read since ESTABLISHED, when the
    /// walk level saw that moment.
    fn app_totals(&self) -> Option<(u64, u64)> {
        (self.have & HAVE_START != 0).then(|| {
            (
                self.write_seq.wrapping_sub(self.write_seq0) as u64,
                self.copied_seq.wrapping_sub(self.copied_seq0) as u64,
            )
        })
    }
}

/// One socket's interval at the walk level: differences of the kernel's
/// counters since the last walk, and its state at this one.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WalkRow {
    /// The record of this walk (or of the socket's close): identity and
    /// state.
    pub now: SockWalk,
    /// The socket reached CLOSE (its final counters).
    pub closed: bool,
    /// Bytes the application wrote and read (write_seq, copied_seq);
    /// `None` for a socket already open when recording started, at its
    /// first walk.
    pub app_sent: Option<u64>,
    pub app_received: Option<u64>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub bytes_acked: u64,
    pub bytes_retrans: u64,
    pub segs_in: u64,
    pub segs_out: u64,
    pub data_segs_in: u64,
    pub data_segs_out: u64,
    pub retrans: u64,
    /// `None` on kernels before 6.7 (no total_rto).
    pub rtos: Option<u64>,
    /// `None` when the kernel's tick rate is unknown.
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
}

/// Each socket's last record, to take differences from: kept until its
/// final record (an unchanged socket has no record in a walk).
#[derive(Debug, Default)]
pub struct Walks {
    seen: FastMap<u64, SockWalk>,
}

impl Walks {
    pub fn new() -> Walks {
        Walks::default()
    }

    /// Sockets remembered.
    pub fn sockets(&self) -> usize {
        self.seen.len()
    }

    /// One interval from this walk's records (sockets whose counts
    /// changed) and the final records of the sockets that reached CLOSE
    /// since the last read (`finals`, read after the walk: a socket
    /// closing while the walk ran is in one or both).
    pub fn read(&mut self, walked: &[SockWalk], finals: &[SockWalk]) -> Vec<WalkRow> {
        let mut rows = Vec::new();
        for w in walked {
            let prev = self.seen.insert(w.cookie, *w);
            if let Some(r) = counted(prev.as_ref(), w).and_then(|p| delta(p, w)) {
                rows.push(r);
            }
        }
        for f in finals {
            let prev = self.seen.remove(&f.cookie);
            if let Some(r) = counted(prev.as_ref(), f).and_then(|p| delta(p, f)) {
                rows.push(r);
            }
        }
        rows
    }
}

/// What a record is counted from: the socket's last record; for its first
/// one, zero (it was seen at ESTABLISHED, or never established and at its
/// close); `None` (a baseline) for a socket open before recording.
fn counted(prev: Option<&SockWalk>, now: &SockWalk) -> Option<Option<SockWalk>> {
    match prev {
        Some(p) => Some(Some(*p)),
        None if now.have & FIRST == 0 => None,
        None if now.have & HAVE_START == 0 && now.is_final == 0 => None,
        None => Some(None),
    }
}

/// The difference from `prev` (none: from zero, the application's bytes
/// from ESTABLISHED) to `now`; `None` when nothing changed.
fn delta(prev: Option<SockWalk>, now: &SockWalk) -> Option<WalkRow> {
    let zero = SockWalk::default();
    let p = prev.as_ref().unwrap_or(&zero);
    let d64 = |a: u64, b: u64| a.saturating_sub(b);
    let d32 = |a: u32, b: u32| a.wrapping_sub(b) as u64;
    let (app_sent, app_received) = match &prev {
        Some(p) => (
            Some(d32(now.write_seq, p.write_seq)),
            Some(d32(now.copied_seq, p.copied_seq)),
        ),
        None => match now.app_totals() {
            Some((s, r)) => (Some(s), Some(r)),
            None => (None, None),
        },
    };
    let chrono = now.have & HAVE_CHRONO != 0;
    let r = WalkRow {
        now: *now,
        closed: now.is_final != 0,
        app_sent,
        app_received,
        bytes_sent: d64(now.bytes_sent, p.bytes_sent),
        bytes_received: d64(now.bytes_received, p.bytes_received),
        bytes_acked: d64(now.bytes_acked, p.bytes_acked),
        bytes_retrans: d64(now.bytes_retrans, p.bytes_retrans),
        segs_in: d32(now.segs_in, p.segs_in),
        segs_out: d32(now.segs_out, p.segs_out),
        data_segs_in: d32(now.data_segs_in, p.data_segs_in),
        data_segs_out: d32(now.data_segs_out, p.data_segs_out),
        retrans: d32(now.total_retrans, p.total_retrans),
        rtos: (now.have & HAVE_RTO != 0).then(|| d32(now.total_rto, p.total_rto) & 0xffff),
        busy_us: chrono.then(|| d64(now.busy_us, p.busy_us)),
        rwnd_limited_us: chrono.then(|| d64(now.rwnd_limited_us, p.rwnd_limited_us)),
        sndbuf_limited_us: chrono.then(|| d64(now.sndbuf_limited_us, p.sndbuf_limited_us)),
    };
    let changed = r.closed
        || r.app_sent.unwrap_or(0) > 0
        || r.app_received.unwrap_or(0) > 0
        || r.segs_in > 0
        || r.segs_out > 0
        || r.bytes_acked > 0
        || r.retrans > 0
        || now.state != p.state;
    changed.then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(cookie: u64, sent: u64, segs: u32, write_seq: u32) -> SockWalk {
        SockWalk {
            cookie,
            family: 2,
            state: 1,
            lport: 5001,
            rport: 40000,
            have: HAVE_START | HAVE_CHRONO,
            bytes_sent: sent,
            segs_out: segs,
            data_segs_out: segs,
            write_seq,
            write_seq0: 1000,
            busy_us: sent,
            ..Default::default()
        }
    }

    fn first(mut s: SockWalk) -> SockWalk {
        s.have |= FIRST;
        s
    }

    fn closed(mut s: SockWalk) -> SockWalk {
        s.is_final = 1;
        s
    }

    #[test]
    fn the_layout_matches_event_h() {
        let a = SockWalk::default();
        let base = &a as *const SockWalk as usize;
        let at = |p: *const u8| p as usize - base;
        assert_eq!(at(&a.uid as *const u32 as *const u8), 60);
        assert_eq!(at(&a.bytes_sent as *const u64 as *const u8), 64);
        assert_eq!(at(&a.segs_in as *const u32 as *const u8), 120);
        assert_eq!(at(&a.write_seq0 as *const u32 as *const u8), 196);
        let mut b = vec![0u8; WALK_SIZE];
        b[64..72].copy_from_slice(&77u64.to_ne_bytes());
        b[196..200].copy_from_slice(&5u32.to_ne_bytes());
        let p = SockWalk::parse(&b).unwrap();
        assert_eq!((p.bytes_sent, p.write_seq0), (77, 5));
        assert!(SockWalk::parse(&b[..WALK_SIZE - 1]).is_none());
    }

    #[test]
    fn rows_are_differences_and_a_socket_open_before_is_a_baseline() {
        let mut w = Walks::new();
        // Open before recording (enrolled, not seen at ESTABLISHED).
        let mut before = first(sock(7, 500, 5, 1500));
        before.have &= !HAVE_START;
        assert!(w.read(&[before], &[]).is_empty());
        let r = w.read(&[sock(7, 800, 8, 1800)], &[]);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].bytes_sent, r[0].segs_out, r[0].app_sent),
            (300, 3, Some(300))
        );
        assert_eq!(r[0].busy_us, Some(300));
        assert_eq!(r[0].rtos, None);
        // Unchanged sockets are not in a walk; a new one, seen at
        // ESTABLISHED, is counted from there.
        let r = w.read(&[first(sock(8, 40, 2, 1040))], &[]);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].now.cookie, r[0].bytes_sent, r[0].app_sent),
            (8, 40, Some(40))
        );
        assert!(w.read(&[], &[]).is_empty());
        assert_eq!(w.sockets(), 2, "kept while unchanged");
        // Sequence numbers wrap.
        let mut a = sock(7, 900, 9, 1800);
        let mut b = a;
        a.write_seq = u32::MAX - 9;
        b.write_seq = 20;
        b.bytes_sent = 930;
        w.read(&[a], &[]);
        assert_eq!(w.read(&[b], &[])[0].app_sent, Some(30));
        // A record that is not a socket's first, of a socket not known
        // here: a baseline, never counted from zero.
        assert!(w.read(&[sock(9, 5000, 50, 6000)], &[]).is_empty());
    }

    #[test]
    fn a_socket_that_opens_and_closes_between_walks_is_counted_whole() {
        let mut w = Walks::new();
        let r = w.read(&[], &[first(closed(sock(9, 4000, 6, 5000)))]);
        assert_eq!(r.len(), 1);
        assert!(r[0].closed);
        assert_eq!((r[0].bytes_sent, r[0].app_sent), (4000, Some(4000)));
        // Walked, then closed: only what came after the walk.
        w.read(&[first(sock(10, 100, 1, 1100))], &[]);
        let r = w.read(&[], &[closed(sock(10, 250, 3, 1250))]);
        assert_eq!((r[0].bytes_sent, r[0].app_sent), (150, Some(150)));
        assert_eq!(w.sockets(), 0);
        // Closed while the walk ran: in the walk and among the finals.
        w.read(&[first(sock(11, 100, 1, 1100))], &[]);
        let r = w.read(&[sock(11, 180, 2, 1180)], &[closed(sock(11, 200, 3, 1200))]);
        let sent: u64 = r.iter().map(|r| r.bytes_sent).sum();
        assert_eq!(sent, 100, "counted once");
        assert!(r.last().unwrap().closed);
        // A connection that never got established closes with its SYNs.
        let mut syn = first(closed(sock(12, 0, 2, 1000)));
        syn.have &= !HAVE_START;
        let r = w.read(&[], &[syn]);
        assert_eq!((r[0].segs_out, r[0].app_sent), (2, None));
    }

    #[test]
    fn the_delivery_rate_is_tcp_infos() {
        let s = SockWalk {
            rate_delivered: 10,
            rate_interval_us: 1000,
            mss_cache: 1448,
            ..Default::default()
        };
        assert_eq!(s.delivery_rate(), 14_480_000);
        assert_eq!(SockWalk::default().delivery_rate(), 0);
    }
}
