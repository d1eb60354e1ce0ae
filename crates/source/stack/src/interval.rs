//! The default mode's per-socket aggregates: what the kernel's per-CPU
//! `struct sock_agg` values (src/bpf/event.h) add up to over one interval.
//!
//! Pure: per-CPU values in, [`Interval`]s out. The kernel's counters only
//! grow; [`Intervals`] keeps each socket's last totals and reports the
//! difference. Reading and then zeroing a slot would lose whatever a
//! program added between the read and the write; a difference loses
//! nothing, and a value read torn (a program adding while it is copied)
//! is made good by the next read. Minimum and maximum cannot be
//! differenced, so the kernel keeps them per epoch (one interval) in the
//! half of the arrays of the epoch's parity: user space starts epoch E+1,
//! then reads E's half, which no program writes any more.

use util::fasthash::FastMap;

/// TCP state kept per sample: snd_cwnd, ssthresh, srtt_us, in_flight,
/// snd_wnd (`TCP_METRICS`).
pub const TCP_METRICS: usize = 5;
/// The metrics' names, in the kernel's order.
pub const TCP_METRIC_NAMES: [&str; TCP_METRICS] =
    ["cwnd", "ssthresh", "srtt_us", "in_flight", "snd_wnd"];
/// log2 buckets of the write-to-transmission delay (`DELAY_BUCKETS`):
/// bucket 0 holds delays ≤ 0 ns, bucket k those in [2^(k-1), 2^k) ns.
pub const DELAY_BUCKETS: usize = 32;
/// Bytes of one CPU's value (`AGG_SIZE`).
pub const AGG_SIZE: usize = 624;

/// One CPU's `struct sock_agg`, field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockAgg {
    pub netns: u32,
    pub family: u8,
    pub proto: u8,
    pub state: u8,
    pub closed: u8,
    pub laddr: [u8; 16],
    pub raddr: [u8; 16],
    pub lport: u16,
    pub rport: u16,
    pub pid: u32,
    pub tid: u32,
    pub comm: [u8; 16],
    pub app_ts: u64,
    pub app_sent: u64,
    pub app_writes: u64,
    pub app_received: u64,
    pub app_reads: u64,
    pub dev_sent: u64,
    pub dev_frames_sent: u64,
    pub dev_received: u64,
    pub dev_frames_received: u64,
    pub segs_in: u64,
    pub retransmits: u64,
    pub retransmitted: u64,
    pub state_changes: u64,
    pub tcp_n: u64,
    pub tcp_last_ts: u64,
    pub tcp_sum: [u64; TCP_METRICS],
    pub tcp_last: [u32; TCP_METRICS],
    pub pad2: u32,
    pub mm_epoch: [u64; 2],
    pub tcp_min: [[u32; TCP_METRICS]; 2],
    pub tcp_max: [[u32; TCP_METRICS]; 2],
    pub delay_n: u64,
    pub delay_sum_ns: i64,
    pub delay_hist: [u64; DELAY_BUCKETS],
}

const _: () = assert!(std::mem::size_of::<SockAgg>() == AGG_SIZE);

impl SockAgg {
    /// One CPU's value as the kernel hands it over; `None` when too short.
    pub fn parse(b: &[u8]) -> Option<SockAgg> {
        if b.len() < AGG_SIZE {
            return None;
        }
        // SAFETY: SockAgg is plain integers and arrays of them (every bit
        // pattern is a value), and `b` holds at least its size.
        Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<SockAgg>()) })
    }
}

/// A metric's samples in one interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Metric {
    pub min: u32,
    pub mean: f64,
    pub max: u32,
    pub last: u32,
}

/// One socket's interval: a row of the stack_intervals table.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Interval {
    pub cookie: u64,
    pub netns: u32,
    pub family: u8,
    pub proto: u8,
    pub laddr: [u8; 16],
    pub raddr: [u8; 16],
    pub lport: u16,
    pub rport: u16,
    /// The last process that sent or received on the socket (so far).
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub comm: Option<[u8; 16]>,
    /// The socket reached CLOSE (in this interval or before).
    pub closed: bool,
    pub app_sent: u64,
    pub app_writes: u64,
    pub app_received: u64,
    pub app_reads: u64,
    pub dev_sent: u64,
    pub dev_frames_sent: u64,
    pub dev_received: u64,
    pub dev_frames_received: u64,
    pub segs_in: u64,
    pub retransmits: u64,
    pub retransmitted: u64,
    pub state_changes: u64,
    pub tcp_samples: u64,
    /// By [`TCP_METRIC_NAMES`]; `None` without samples in the interval.
    pub tcp: Option<[Metric; TCP_METRICS]>,
    pub delay_writes: u64,
    pub delay_sum_ns: i64,
    pub delay_hist: [u64; DELAY_BUCKETS],
}

/// What only grows, summed over the CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Totals {
    counts: [u64; 13],
    tcp_sum: [u64; TCP_METRICS],
    delay_n: u64,
    delay_sum_ns: i64,
    delay_hist: [u64; DELAY_BUCKETS],
}

impl Totals {
    fn of(cpus: &[SockAgg]) -> Totals {
        let mut t = Totals::default();
        for a in cpus {
            let c = [
                a.app_sent,
                a.app_writes,
                a.app_received,
                a.app_reads,
                a.dev_sent,
                a.dev_frames_sent,
                a.dev_received,
                a.dev_frames_received,
                a.segs_in,
                a.retransmits,
                a.retransmitted,
                a.state_changes,
                a.tcp_n,
            ];
            for (s, v) in t.counts.iter_mut().zip(c) {
                *s = s.wrapping_add(v);
            }
            for (s, v) in t.tcp_sum.iter_mut().zip(a.tcp_sum) {
                *s = s.wrapping_add(v);
            }
            t.delay_n = t.delay_n.wrapping_add(a.delay_n);
            t.delay_sum_ns = t.delay_sum_ns.wrapping_add(a.delay_sum_ns);
            for (s, v) in t.delay_hist.iter_mut().zip(a.delay_hist) {
                *s = s.wrapping_add(v);
            }
        }
        t
    }

    /// `self - prev`; a counter that went down (a value read torn) reads
    /// as no change until the next read makes it good.
    fn minus(&self, prev: &Totals) -> Totals {
        let mut d = Totals::default();
        for i in 0..d.counts.len() {
            d.counts[i] = self.counts[i].saturating_sub(prev.counts[i]);
        }
        for i in 0..TCP_METRICS {
            d.tcp_sum[i] = self.tcp_sum[i].saturating_sub(prev.tcp_sum[i]);
        }
        d.delay_n = self.delay_n.saturating_sub(prev.delay_n);
        d.delay_sum_ns = self.delay_sum_ns.wrapping_sub(prev.delay_sum_ns);
        for i in 0..DELAY_BUCKETS {
            d.delay_hist[i] = self.delay_hist[i].saturating_sub(prev.delay_hist[i]);
        }
        d
    }

    fn is_zero(&self) -> bool {
        self.counts.iter().all(|&c| c == 0) && self.delay_n == 0
    }

    /// Keeps, per value, the larger of the two: a torn read never moves a
    /// baseline backwards (which would count the same bytes twice).
    fn max(&self, other: &Totals) -> Totals {
        let mut m = *self;
        for i in 0..m.counts.len() {
            m.counts[i] = m.counts[i].max(other.counts[i]);
        }
        for i in 0..TCP_METRICS {
            m.tcp_sum[i] = m.tcp_sum[i].max(other.tcp_sum[i]);
        }
        m.delay_n = m.delay_n.max(other.delay_n);
        for i in 0..DELAY_BUCKETS {
            m.delay_hist[i] = m.delay_hist[i].max(other.delay_hist[i]);
        }
        m
    }
}

/// What is remembered of a socket between reads.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    totals: Totals,
    /// Reads since its counts last changed.
    idle: u32,
    /// It was closed at the last read too.
    closed: bool,
}

/// Each socket's totals at the last read, to take differences from.
#[derive(Debug)]
pub struct Intervals {
    seen: FastMap<u64, Seen>,
    /// Reads without a change after which a socket's entry is removed.
    idle_reads: u32,
}

/// One read's result.
#[derive(Debug, Default)]
pub struct Read {
    /// One per socket that did anything since the last read.
    pub rows: Vec<Interval>,
    /// Entries to delete from the kernel's map: sockets closed at this read
    /// and the one before (nothing more comes for them), or idle for
    /// `idle_reads` reads. Deleting them forgets them here too, so a
    /// socket that comes back starts from zero on both sides.
    pub delete: Vec<u64>,
}

impl Intervals {
    /// `idle_reads`: reads with no change after which an open socket's
    /// entry is removed (its memory back; it starts again from zero).
    pub fn new(idle_reads: u32) -> Intervals {
        Intervals {
            seen: FastMap::default(),
            idle_reads: idle_reads.max(1),
        }
    }

    /// Sockets remembered.
    pub fn sockets(&self) -> usize {
        self.seen.len()
    }

    /// The interval of epoch `epoch` (programs have moved on to the next)
    /// from every socket's per-CPU values.
    pub fn read<'a>(
        &mut self,
        epoch: u64,
        sockets: impl IntoIterator<Item = (u64, &'a [SockAgg])>,
    ) -> Read {
        let mut out = Read::default();
        let mut present = Vec::new();
        for (cookie, cpus) in sockets {
            present.push(cookie);
            let now = Totals::of(cpus);
            let closed = cpus.iter().any(|a| a.closed != 0);
            let prev = self.seen.get(&cookie).copied().unwrap_or_default();
            let d = now.minus(&prev.totals);
            let changed = !d.is_zero();
            if changed || (closed && !prev.closed) {
                out.rows.push(row(cookie, epoch, cpus, &d, closed));
            }
            let idle = if changed { 0 } else { prev.idle + 1 };
            if (closed && prev.closed) || idle >= self.idle_reads {
                out.delete.push(cookie);
                self.seen.remove(&cookie);
            } else {
                self.seen.insert(
                    cookie,
                    Seen {
                        totals: now.max(&prev.totals),
                        idle,
                        closed,
                    },
                );
            }
        }
        // Entries gone from the map (deleted by us) are forgotten.
        if self.seen.len() > present.len() {
            present.sort_unstable();
            self.seen.retain(|c, _| present.binary_search(c).is_ok());
        }
        out
    }
}

/// A row from the difference `d` and the CPUs' values.
fn row(cookie: u64, epoch: u64, cpus: &[SockAgg], d: &Totals, closed: bool) -> Interval {
    // The identity: a CPU's slot with the whole tuple, else any with one.
    let id = cpus
        .iter()
        .filter(|a| a.family != 0)
        .max_by_key(|a| (a.lport != 0 && a.rport != 0, a.lport != 0))
        .copied()
        .unwrap_or_default();
    let owner = cpus
        .iter()
        .filter(|a| a.pid != 0)
        .max_by_key(|a| a.app_ts)
        .copied();
    let samples = d.counts[12];
    let tcp = (samples > 0).then(|| {
        let half = (epoch & 1) as usize;
        let last_cpu = cpus
            .iter()
            .filter(|a| a.tcp_n > 0)
            .max_by_key(|a| a.tcp_last_ts);
        let mut m = [Metric::default(); TCP_METRICS];
        for (i, mi) in m.iter_mut().enumerate() {
            let last = last_cpu.map_or(0, |a| a.tcp_last[i]);
            let this = cpus.iter().filter(|a| a.mm_epoch[half] == epoch);
            let min = this.clone().map(|a| a.tcp_min[half][i]).min();
            let max = this.map(|a| a.tcp_max[half][i]).max();
            *mi = Metric {
                // A sample stamped at the turn of the epoch may have gone
                // to the next epoch's half; the last value stands in.
                min: min.unwrap_or(last),
                mean: d.tcp_sum[i] as f64 / samples as f64,
                max: max.unwrap_or(last),
                last,
            };
        }
        m
    });
    Interval {
        cookie,
        netns: id.netns,
        family: id.family,
        proto: id.proto,
        laddr: id.laddr,
        raddr: id.raddr,
        lport: id.lport,
        rport: id.rport,
        pid: owner.map(|a| a.pid),
        tid: owner.map(|a| a.tid),
        comm: owner.map(|a| a.comm),
        closed,
        app_sent: d.counts[0],
        app_writes: d.counts[1],
        app_received: d.counts[2],
        app_reads: d.counts[3],
        dev_sent: d.counts[4],
        dev_frames_sent: d.counts[5],
        dev_received: d.counts[6],
        dev_frames_received: d.counts[7],
        segs_in: d.counts[8],
        retransmits: d.counts[9],
        retransmitted: d.counts[10],
        state_changes: d.counts[11],
        tcp_samples: samples,
        tcp,
        delay_writes: d.delay_n,
        delay_sum_ns: d.delay_sum_ns,
        delay_hist: d.delay_hist,
    }
}

/// The upper bound of delay bucket `k`, ns (0 for the bucket of ≤ 0).
pub fn bucket_upper_ns(k: usize) -> i64 {
    if k == 0 { 0 } else { 1i64 << k.min(62) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(sent: u64, n: u64, cwnd: u32, epoch: u64) -> SockAgg {
        let mut a = SockAgg {
            family: 2,
            proto: 6,
            lport: 5001,
            rport: 40000,
            app_sent: sent,
            app_writes: n,
            tcp_n: n,
            tcp_last_ts: n,
            ..Default::default()
        };
        a.tcp_sum[0] = cwnd as u64 * n;
        a.tcp_last[0] = cwnd;
        let h = (epoch & 1) as usize;
        a.mm_epoch[h] = epoch;
        a.tcp_min[h][0] = cwnd;
        a.tcp_max[h][0] = cwnd;
        a
    }

    #[test]
    fn the_layout_matches_event_h() {
        // Offsets event.h's layout puts the fields at (sizes pinned there
        // by _Static_assert, here by the const assert above).
        let a = SockAgg::default();
        let base = &a as *const SockAgg as usize;
        let at = |p: *const u8| p as usize - base;
        assert_eq!(at(&a.app_ts as *const u64 as *const u8), 72);
        assert_eq!(at(a.tcp_sum.as_ptr() as *const u8), 192);
        assert_eq!(at(a.mm_epoch.as_ptr() as *const u8), 256);
        assert_eq!(at(&a.delay_n as *const u64 as *const u8), 352);
        let mut b = vec![0u8; AGG_SIZE + 8]; // the kernel rounds values up to 8
        b[72..80].copy_from_slice(&5u64.to_ne_bytes());
        b[352..360].copy_from_slice(&9u64.to_ne_bytes());
        let p = SockAgg::parse(&b).unwrap();
        assert_eq!((p.app_ts, p.delay_n), (5, 9));
        assert!(SockAgg::parse(&b[..AGG_SIZE - 1]).is_none());
    }

    #[test]
    fn intervals_are_differences_summed_over_cpus() {
        let mut iv = Intervals::new(10);
        let r = iv.read(1, [(7u64, &[cpu(100, 2, 10, 1), cpu(50, 1, 20, 1)][..])]);
        assert_eq!(r.rows.len(), 1);
        let row = &r.rows[0];
        assert_eq!((row.app_sent, row.app_writes, row.tcp_samples), (150, 3, 3));
        let cw = row.tcp.unwrap()[0];
        assert_eq!((cw.min, cw.max), (10, 20));
        assert!((cw.mean - 40.0 / 3.0).abs() < 1e-9);
        // The first CPU's sample is later (tcp_last_ts 2 > 1).
        assert_eq!(cw.last, 10);
        // Next interval: only what was added since; min/max from epoch 2.
        let r = iv.read(2, [(7u64, &[cpu(300, 4, 30, 2), cpu(50, 1, 20, 1)][..])]);
        let row = &r.rows[0];
        assert_eq!((row.app_sent, row.app_writes, row.tcp_samples), (200, 2, 2));
        let cw = row.tcp.unwrap()[0];
        assert_eq!((cw.min, cw.max, cw.last), (30, 30, 30));
        assert!((cw.mean - (120.0 - 20.0) / 2.0).abs() < 1e-9);
        // Nothing new: no row.
        let r = iv.read(3, [(7u64, &[cpu(300, 4, 30, 2), cpu(50, 1, 20, 1)][..])]);
        assert!(r.rows.is_empty() && r.delete.is_empty());
    }

    #[test]
    fn a_torn_read_is_made_good_and_never_counted_twice() {
        let mut iv = Intervals::new(10);
        iv.read(1, [(7u64, &[cpu(100, 1, 10, 1)][..])]);
        // A read that saw less than the last one (torn): no row...
        let r = iv.read(2, [(7u64, &[cpu(90, 1, 10, 1)][..])]);
        assert!(r.rows.is_empty());
        // ... and the next whole read counts from the larger baseline.
        let r = iv.read(3, [(7u64, &[cpu(160, 2, 10, 3)][..])]);
        assert_eq!(r.rows[0].app_sent, 60);
    }

    #[test]
    fn closed_and_idle_sockets_are_deleted_and_forgotten() {
        let mut iv = Intervals::new(2);
        let mut c = cpu(10, 1, 10, 1);
        iv.read(1, [(7u64, &[c][..]), (8u64, &[cpu(5, 1, 1, 1)][..])]);
        c.closed = 1;
        c.state_changes = 1;
        let r = iv.read(2, [(7u64, &[c][..]), (8u64, &[cpu(5, 1, 1, 1)][..])]);
        assert_eq!(r.rows.len(), 1);
        assert!(r.rows[0].closed && r.rows[0].state_changes == 1);
        assert!(r.delete.is_empty(), "read once more after its close");
        let r = iv.read(3, [(7u64, &[c][..]), (8u64, &[cpu(5, 1, 1, 1)][..])]);
        assert!(r.rows.is_empty());
        assert_eq!(r.delete, vec![7, 8], "closed twice; idle two reads");
        assert_eq!(iv.sockets(), 0);
        // A socket deleted and seen again counts from zero.
        let r = iv.read(4, [(8u64, &[cpu(3, 1, 1, 4)][..])]);
        assert_eq!(r.rows[0].app_sent, 3);
    }

    #[test]
    fn delay_buckets_are_powers_of_two() {
        assert_eq!(bucket_upper_ns(0), 0);
        assert_eq!(bucket_upper_ns(1), 2);
        assert_eq!(bucket_upper_ns(10), 1024);
    }
}
