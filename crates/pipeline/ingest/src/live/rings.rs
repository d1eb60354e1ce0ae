//! Rings that grow once recording: a capture starts on a small ring per
//! worker and sets up the full-size ring (`-B`) beside it, then hands over.
//!
//! Setting up a ring of hundreds of megabytes takes the kernel the better
//! part of a second when its free memory is cold (a few seconds after a
//! previous capture gave it back, on a VM whose host reclaims free pages),
//! and the rings of a capture cannot be set up side by side any faster
//! (measured in docs/BENCHMARKS.md). So each worker starts on a ring of
//! [`FIRST_RING_BYTES`], and a thread sets up the full-size rings while the
//! capture runs. A full-size ring joins its interface's fanout group seeing
//! nothing (its filter keeps nothing until it has joined), then one change
//! of the group's program deals every frame to the new rings instead of
//! the first ones. The kernel makes that change between two frames, and
//! returns only once no frame is on its way to an old ring: no frame is
//! lost or held twice, and each flow stays on its worker. Each worker
//! drains its first ring, then reads the new one. The first rings stay open
//! (empty) until the end: leaving the group would renumber its members.
//!
//! A capture with one worker hands over without a group where it may load
//! eBPF programs (root, CAP_BPF): the two rings pass the frames by a
//! [`capture::gate::Gate`], as exactly, and once the worker has taken the
//! new ring the first one leaves the interface and the new one keeps only
//! the capture's own filter: nothing else runs in the kernel per frame.
//! Without that privilege it uses a group of its own, as above.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use capture::bpf::SocketProgram;
use capture::gate::Gate;
use capture::ring::{Fanout, RingOptions, RingSocket, RxRing, SocketFilter};
use capture::shard::{self, Verdict};

/// Bytes of the ring each worker starts on when its full ring is larger:
/// a few tens of milliseconds to set up even from cold memory.
pub(crate) const FIRST_RING_BYTES: usize = 16 << 20;

/// The first ring's blocks, when the full ring's are larger: many small
/// blocks, so that light traffic (a block handed over every retire
/// timeout, however few frames it holds) fills the small ring no sooner
/// than it would the full one, should the worker be held up.
const FIRST_RING_BLOCK: usize = 128 << 10;

/// The ring a worker starts on, and whether a larger one follows: the
/// first ring when the full one is at least twice its size.
pub(crate) fn first_ring(full: RingOptions) -> Option<RingOptions> {
    let block = full.block_size.min(FIRST_RING_BLOCK);
    let first = RingOptions::with_total(FIRST_RING_BYTES, block);
    (first.total() * 2 <= full.total()).then_some(RingOptions {
        retire_ms: full.retire_ms,
        ..first
    })
}

/// A worker's full-size ring on its way from the growing thread.
#[derive(Default)]
pub(crate) struct Handover {
    state: Mutex<HandState>,
    ready: AtomicBool,
    /// The new ring's socket once it has joined the group, for its
    /// counters (-1 before): it stays open from then until the capture's
    /// end, with the worker or here.
    fd: AtomicI32,
    /// After a gated hand-over, the new ring's own filter, to put in place
    /// once the first ring has left ([`Handover::settle`]).
    plain: Mutex<Option<OwnedFilter>>,
}

#[derive(Default)]
enum HandState {
    #[default]
    Pending,
    Ready(RxRing),
    Taken,
    /// No ring will come (the worker ended first, or setting up failed);
    /// one that joined the group is kept open here.
    Abandoned {
        _kept: Option<RxRing>,
    },
}

impl Handover {
    pub(crate) fn new() -> Handover {
        Handover {
            fd: AtomicI32::new(-1),
            ..Default::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, HandState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The full-size ring, once frames are dealt to it (one atomic load
    /// until then).
    pub(crate) fn take(&self) -> Option<RxRing> {
        if !self.ready.load(Ordering::Acquire) {
            return None;
        }
        let mut s = self.lock();
        match std::mem::replace(&mut *s, HandState::Taken) {
            HandState::Ready(r) => Some(r),
            other => {
                *s = other;
                None
            }
        }
    }

    /// The worker is ending: no ring may be handed over after this. A ring
    /// that frames are already dealt to is returned (it must be drained).
    pub(crate) fn close(&self) -> Option<RxRing> {
        let mut s = self.lock();
        match std::mem::replace(&mut *s, HandState::Abandoned { _kept: None }) {
            HandState::Ready(r) => {
                *s = HandState::Taken;
                Some(r)
            }
            HandState::Pending => None,
            other => {
                *s = other;
                None
            }
        }
    }

    /// After a gated hand-over, once the worker has taken the new ring:
    /// the old ring leaves the interface, then the new one's filter
    /// becomes the capture's own. Either failing leaves the gate's
    /// programs in place, which still pass every frame exactly once.
    pub(crate) fn settle(&self, old: &RxRing, new: &RxRing) {
        let plain = self.plain.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(f) = plain
            && old.unhook().is_ok()
        {
            let _ = new.set_filter(f.get());
        }
    }

    /// The new ring's socket, when it has one, for its counters.
    pub(crate) fn fd(&self) -> Option<RawFd> {
        let fd = self.fd.load(Ordering::Acquire);
        (fd >= 0).then_some(fd)
    }
}

/// The capture's filter, owned, for rings set up after the opening.
#[derive(Clone, Default)]
pub(crate) struct OwnedFilter {
    pub classic: Option<Vec<libc::sock_filter>>,
    pub program: Option<Arc<SocketProgram>>,
}

impl OwnedFilter {
    fn get(&self) -> Option<SocketFilter<'_>> {
        match (&self.program, &self.classic) {
            (Some(p), _) => Some(SocketFilter::Program(p.as_ref())),
            (None, Some(f)) => Some(SocketFilter::Classic(f)),
            (None, None) => None,
        }
    }
}

/// How an interface's group is told to deal to the new rings.
pub(crate) enum DealTo {
    /// Every frame to this member (one worker: the first ring is member
    /// 0, the new one 1).
    Member(u32),
    /// By this program (weir's flow hash over the new rings).
    Program(Arc<SocketProgram>),
    /// By weir's flow hash over the new rings, the program loaded when
    /// they are ready (the process keeps its privileges).
    Load { link: wire::LinkType, rings: u32 },
    /// No group: one worker's rings, passing the frames by a gate.
    Gate(Arc<Gate>),
}

/// One interface's full-size rings to set up, in its workers' order.
pub(crate) struct Growth {
    pub iface: String,
    /// The interface's place in the capture's list.
    pub index: usize,
    pub sockets: Vec<(RingSocket, Arc<Handover>)>,
    pub ring: RingOptions,
    pub filter: OwnedFilter,
    pub deal_to: DealTo,
    /// The group the first rings made (filled in once they started).
    pub group: Option<Fanout>,
}

/// Sets up every interface's full-size rings and hands them over; what
/// went wrong (the capture goes on with its first rings) goes to
/// `warnings`. Stops early once `stop` is set.
pub(crate) fn grow(
    growths: Vec<Growth>,
    stop: &AtomicBool,
    warnings: &Mutex<Vec<String>>,
    held: &Mutex<Vec<Arc<SocketProgram>>>,
) {
    for g in growths {
        let handovers: Vec<Arc<Handover>> = g.sockets.iter().map(|(_, h)| h.clone()).collect();
        let iface = g.iface.clone();
        let ring = g.ring;
        match grow_one(g, stop, held) {
            Ok(()) => {}
            Err(e) => {
                for h in &handovers {
                    let mut s = h.lock();
                    if matches!(*s, HandState::Pending) {
                        *s = HandState::Abandoned { _kept: None };
                    }
                }
                if let Some(e) = e {
                    warnings
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(format!(
                            "{iface}: the full-size capture rings ({} each) could not be set up, \
                             so the capture went on with its first rings of {}: {e}",
                            util::fmt::human_bytes(ring.total() as u64),
                            util::fmt::human_bytes(FIRST_RING_BYTES as u64)
                        ));
                }
            }
        }
    }
}

/// One interface: `Err(None)` when it stopped early (the capture ended).
/// A program it loads goes to `held`, which the capture keeps to its end.
fn grow_one(
    g: Growth,
    stop: &AtomicBool,
    held: &Mutex<Vec<Arc<SocketProgram>>>,
) -> Result<(), Option<String>> {
    let Growth {
        sockets,
        ring,
        filter,
        deal_to,
        group,
        ..
    } = g;
    let Some(mut group) = group else {
        return Err(None);
    };
    let mut rings: Vec<(RxRing, Arc<Handover>)> = Vec::with_capacity(sockets.len());
    // Rings that joined the group stay open with their handovers (their
    // counters are read): parked there when the rest fails.
    let park = |rings: Vec<(RxRing, Arc<Handover>)>| {
        for (r, h) in rings {
            *h.lock() = HandState::Abandoned { _kept: Some(r) };
        }
    };
    for (socket, handover) in sockets {
        if stop.load(Ordering::Relaxed) {
            park(rings);
            return Err(None);
        }
        let mut r = match socket.set_up(ring, None) {
            Ok(r) => r,
            Err(e) => {
                park(rings);
                return Err(Some(e.to_string()));
            }
        };
        let started = match &deal_to {
            DealTo::Gate(g) => r.start_gated(&g.closed),
            _ => r.start_standby(&mut group, filter.get()),
        };
        if let Err(e) = started {
            park(rings);
            return Err(Some(e.to_string()));
        }
        handover.fd.store(r.raw_fd(), Ordering::Release);
        rings.push((r, handover));
    }
    let deal_to = match deal_to {
        DealTo::Load { link, rings: n } => {
            let v = Verdict::FanoutAmong { rings: n, first: n };
            match shard::load(link, v, None, "weir_fanout_full") {
                Ok(p) => {
                    let p = Arc::new(p);
                    held.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(p.clone());
                    DealTo::Program(p)
                }
                Err(e) => {
                    park(rings);
                    return Err(Some(format!("loading weir's fanout program: {e}")));
                }
            }
        }
        d => d,
    };
    // Every worker's lock held: either every worker is still reading its
    // first ring (and will take the new one), or one has ended and the
    // group keeps dealing to the first rings.
    let handovers: Vec<Arc<Handover>> = rings.iter().map(|(_, h)| h.clone()).collect();
    let mut guards: Vec<MutexGuard<'_, HandState>> = handovers.iter().map(|h| h.lock()).collect();
    let dealt = if guards.iter().any(|s| !matches!(**s, HandState::Pending)) {
        Err(None)
    } else {
        match (rings.first(), &deal_to) {
            (None, _) => return Ok(()),
            (Some((first, _)), DealTo::Member(k)) => first.deal_all_to(*k),
            (Some((first, _)), DealTo::Program(p)) => first.deal_by(p),
            (Some((new, h)), DealTo::Gate(g)) => new.open_gate(&g.open).inspect(|_| {
                *h.plain.lock().unwrap_or_else(|e| e.into_inner()) = Some(filter.clone())
            }),
            (Some(_), DealTo::Load { .. }) => unreachable!("loaded above"),
        }
        .map_err(|e| Some(e.to_string()))
    };
    let ok = dealt.is_ok();
    for ((r, _), s) in rings.into_iter().zip(guards.iter_mut()) {
        **s = match ok {
            true => HandState::Ready(r),
            false => HandState::Abandoned { _kept: Some(r) },
        };
    }
    drop(guards);
    if ok {
        for h in handovers {
            h.ready.store(true, Ordering::Release);
        }
    }
    dealt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_ring_only_when_the_full_one_is_twice_its_size() {
        let full = RingOptions::with_total(312 << 20, 1 << 20);
        let first = first_ring(full).expect("a first ring");
        assert_eq!(first.total(), FIRST_RING_BYTES);
        assert_eq!(first.block_size, 128 << 10);
        let small_blocks = RingOptions::with_total(312 << 20, 64 << 10);
        assert_eq!(first_ring(small_blocks).unwrap().block_size, 64 << 10);
        assert!(first_ring(RingOptions::with_total(24 << 20, 1 << 20)).is_none());
        assert!(first_ring(RingOptions::with_total(32 << 20, 64 << 10)).is_some());
    }

    #[test]
    fn a_closed_handover_takes_no_ring_later() {
        let h = Handover::new();
        assert!(h.take().is_none());
        assert!(h.close().is_none());
        assert!(matches!(*h.lock(), HandState::Abandoned { _kept: None }));
        assert!(h.fd().is_none());
    }
}
