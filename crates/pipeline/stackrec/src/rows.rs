//! A socket's interval, from its aggregate and its walk, as a
//! stack_intervals row.

use stack::interval::{Interval, TCP_METRICS};
use stack::walk::WalkRow;
use store::stack_intervals::{Delays, IntervalRow};

use crate::Level;

/// The stack_intervals row of a socket's interval from `start_ns` to
/// `end_ns` (wall clock), from its per-packet aggregate and its walk
/// (either may be missing: a socket the walk does not read, or one that
/// did nothing per packet).
pub(crate) fn interval_row(
    agg: Option<&Interval>,
    walk: Option<&WalkRow>,
    level: Level,
    start_ns: i64,
    end_ns: i64,
) -> IntervalRow {
    let id = match (agg, walk) {
        (Some(a), _) if a.family != 0 => (
            a.netns, a.family, a.proto, a.laddr, a.raddr, a.lport, a.rport,
        ),
        (_, Some(w)) => {
            let n = &w.now;
            (n.netns, n.family, 6, n.laddr, n.raddr, n.lport, n.rport)
        }
        (Some(a), None) => (
            a.netns, a.family, a.proto, a.laddr, a.raddr, a.lport, a.rport,
        ),
        (None, None) => Default::default(),
    };
    let (netns, family, proto, laddr, raddr, lport, rport) = id;
    let known = family != 0;
    let ports = known && (proto == 6 || proto == 17);
    let per_packet = level >= Level::Device;
    let counts = if per_packet {
        let a = agg.cloned().unwrap_or_default();
        [
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
            a.tcp_samples,
        ]
        .map(Some)
    } else {
        let w = walk.cloned().unwrap_or_default();
        [
            w.app_sent,
            None,
            w.app_received,
            None,
            None,
            None,
            None,
            None,
            None,
            Some(w.retrans),
            Some(w.bytes_retrans),
            None,
            Some(walk.is_some() as u64),
        ]
    };
    let tcp = if per_packet {
        agg.and_then(|a| a.tcp)
            .map(|t| t.map(|m| (m.min, m.mean, m.max, m.last)))
    } else {
        walk.map(|w| {
            let n = &w.now;
            let v: [u32; TCP_METRICS] = [n.snd_cwnd, n.ssthresh, n.srtt_us, n.in_flight, n.snd_wnd];
            v.map(|x| (x, x as f64, x, x))
        })
    };
    let delay = (level >= Level::Delay).then(|| {
        let a = agg.cloned().unwrap_or_default();
        Delays {
            writes: a.delay_writes,
            sum_ns: a.delay_sum_ns,
            hist: a.delay_hist,
        }
    });
    IntervalRow {
        ts_ns: start_ns,
        interval_ns: end_ns.saturating_sub(start_ns).max(0) as u64,
        cookie: agg.map_or_else(|| walk.map_or(0, |w| w.now.cookie), |a| a.cookie),
        netns,
        pid: agg.and_then(|a| a.pid),
        tid: agg.and_then(|a| a.tid),
        comm: agg.and_then(|a| a.comm),
        family,
        proto,
        local_addr: known.then_some(laddr),
        local_port: ports.then_some(lport),
        remote_addr: known.then_some(raddr),
        remote_port: ports.then_some(rport),
        closed: agg.is_some_and(|a| a.closed) || walk.is_some_and(|w| w.closed),
        counts,
        tcp,
        delay,
        walk: walk.map_or([None; 13], walk_counts),
        walk_state: walk.map_or([None; 4], |w| {
            let n = &w.now;
            [
                Some(n.rttvar_us as u64),
                Some(n.rcv_wnd as u64),
                Some(n.mss_cache as u64),
                Some(n.delivery_rate()),
            ]
        }),
        tcp_state: walk.map(|w| w.now.state),
    }
}

/// A walk's counters by `store::stack_intervals::WALK_COUNTS`.
fn walk_counts(w: &WalkRow) -> [Option<u64>; 13] {
    [
        Some(w.bytes_sent),
        Some(w.bytes_received),
        Some(w.bytes_acked),
        Some(w.bytes_retrans),
        Some(w.segs_in),
        Some(w.segs_out),
        Some(w.data_segs_in),
        Some(w.data_segs_out),
        Some(w.retrans),
        w.rtos,
        w.busy_us,
        w.rwnd_limited_us,
        w.sndbuf_limited_us,
    ]
}
