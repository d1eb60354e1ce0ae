//! Opening a capture, the privileged part: each interface's filter and
//! programs (shard, fanout, gate) planned, then its rings opened with the
//! filter attached and the sockets of the full-size rings to come made.

use std::sync::Arc;

use capture::FanoutBy;
use capture::Interface;
use capture::bpf::SocketProgram;
use capture::filter::Filter;
use capture::gate::Gate;
use capture::ring::{RingOptions, RingSocket, RxRing, SocketFilter};
use capture::shard::{self, Shard, Verdict};
use store::manifest::Manifest;
use wire::LinkType;

use super::manifest::base_manifest;
use super::rings::{self, DealTo, Growth, Handover, OwnedFilter};
use super::{Counters, LiveError, LiveOptions, Slot};

/// Rings opened and filters attached: the privileged part. Drop privileges
/// after this, then [`Opened::run`].
pub struct Opened {
    pub(super) opts: LiveOptions,
    pub(super) slots: Vec<Slot>,
    /// Full-size rings to set up once the capture records.
    pub(super) growths: Vec<Growth>,
    /// The programs fanout groups deal by, held for the whole capture: a
    /// program's table of itself (which it runs again through for each
    /// encapsulation) is emptied by the kernel once no descriptor of it is
    /// open, and tunnelled frames would then be dealt by their outer flow.
    pub(super) fanout_programs: Vec<Arc<SocketProgram>>,
    pub(super) libpcap: String,
    /// What opening settled for, to tell the user (not a problem with
    /// the data).
    pub(super) notes: Vec<String>,
}

/// Opens every ring (all of an interface's rings in one fanout group) with
/// the filter attached. A bad filter, a missing permission or a refused ring
/// size is reported here, before any traffic is taken. Where the full-size
/// ring is large, each worker's ring is a small first one, and the socket
/// of the full-size ring is made here (the privileged step) to be set up
/// once the capture records ([`rings`]).
pub fn open(mut opts: LiveOptions) -> Result<Opened, LiveError> {
    let mut notes = Vec::new();
    if opts.interfaces.is_empty() {
        return Err(LiveError::Usage(
            "give at least one interface with -i".into(),
        ));
    }
    let first = rings::first_ring(opts.ring);
    // First every interface's programs, then the rings: weir's fanout
    // program refused on one interface means the kernel's hash on all.
    let plans = plan_interfaces(&mut opts, first, &mut notes)?;
    let mut slots: Vec<Slot> = Vec::new();
    let mut growths: Vec<Growth> = Vec::new();
    let fanout_programs: Vec<Arc<SocketProgram>> = (plans.iter())
        .filter_map(|p| p.fanout.as_ref())
        .flat_map(|(a, b)| std::iter::once(a.clone()).chain(b.clone()))
        .collect();
    for (k, (iface, plan)) in opts.interfaces.iter().zip(plans).enumerate() {
        growths.extend(open_rings(&opts, k, iface, plan, first, &mut slots)?);
    }
    if opts.scope.fanout == FanoutBy::Auto {
        opts.scope.fanout = FanoutBy::Flow;
    }
    Ok(Opened {
        opts,
        slots,
        growths,
        fanout_programs,
        notes,
        libpcap: capture::filter::libpcap_version(),
    })
}

/// What opening settled for on one interface, before its rings open.
struct IfacePlan {
    link: LinkType,
    filter: Option<Filter>,
    /// The shard program (with the filter in it), when there is one.
    program: Option<Arc<SocketProgram>>,
    /// weir's fanout program, and the one that deals to the full-size
    /// rings when first rings come before them.
    fanout: Option<FanoutPrograms>,
    /// One worker's hand-over to its full-size ring, in no group.
    gate: Option<Arc<Gate>>,
}

/// weir's fanout program, and the one that deals to the full-size rings
/// (loaded now only when the process will lose the right to later).
type FanoutPrograms = (Arc<SocketProgram>, Option<Arc<SocketProgram>>);

/// Every interface's filter and programs. With `--fanout auto`, weir's
/// fanout program refused on one interface sets `opts.scope.fanout` to the
/// kernel's hash for all of them (and says so in `notes`).
fn plan_interfaces(
    opts: &mut LiveOptions,
    first: Option<RingOptions>,
    notes: &mut Vec<String>,
) -> Result<Vec<IfacePlan>, LiveError> {
    let workers = opts.workers_per_iface.max(1);
    let mut plans: Vec<IfacePlan> = Vec::new();
    for iface in &opts.interfaces {
        let link = iface.link_type().ok_or_else(|| {
            LiveError::Usage(format!(
                "{}: weir does not capture on this kind of interface yet (ARPHRD {}); Ethernet, \
                 loopback and IP tunnels are supported",
                iface.name, iface.arphrd
            ))
        })?;
        let filter: Option<Filter> = match &opts.scope.filter {
            Some(expr) => Some(capture::compile_filter(expr, link, opts.scope.snaplen)?),
            None => None,
        };
        let program = shard_program(opts.scope.shard, iface, link, filter.as_ref())?;
        let fanout = match opts.scope.fanout {
            FanoutBy::Flow | FanoutBy::Auto if workers > 1 => {
                match fanout_programs(link, workers as u32, first, opts.keeps_privileges) {
                    Ok(p) => Some(p),
                    Err(message) if opts.scope.fanout == FanoutBy::Auto => {
                        notes.push(format!(
                            "{}: the workers share frames by the kernel's flow hash, not weir's: \
                             {message} (weir's needs root or CAP_BPF; with the kernel's, a flow \
                             inside a UDP tunnel may reach two workers)",
                            iface.name
                        ));
                        opts.scope.fanout = FanoutBy::Kernel;
                        for plan in &mut plans {
                            plan.fanout = None;
                        }
                        None
                    }
                    Err(message) => {
                        return Err(LiveError::Fanout {
                            iface: iface.name.clone(),
                            message,
                        });
                    }
                }
            }
            _ => None,
        };
        // One worker hands its first ring over to the full-size one by a
        // gate, in no group, where the programs load (root or CAP_BPF;
        // else a group of its own, as several workers do). A shard
        // program is a filter of its own: then a group too.
        let gate = match (first, workers, &program) {
            (Some(_), 1, None) => Gate::load(filter.as_ref().map(|f| f.program.as_slice()))
                .ok()
                .map(Arc::new),
            _ => None,
        };
        plans.push(IfacePlan {
            link,
            filter,
            program,
            fanout,
            gate,
        });
    }
    Ok(plans)
}

/// With a shard, one eBPF program does both: the share test, then the
/// tcpdump filter translated (a socket holds one filter).
fn shard_program(
    shard: Option<Shard>,
    iface: &Interface,
    link: LinkType,
    filter: Option<&Filter>,
) -> Result<Option<Arc<SocketProgram>>, LiveError> {
    let Some(s) = shard else {
        return Ok(None);
    };
    let program = shard::load(
        link,
        Verdict::Keep(s),
        filter.map(|f| f.program.as_slice()),
        "weir_shard",
    )
    .map_err(|message| LiveError::Shard {
        shard: s,
        iface: iface.name.clone(),
        message,
    })?;
    Ok(Some(Arc::new(program)))
}

/// Several rings: weir's flow hash deals the frames, unless the kernel's
/// is asked for, or (unasked) the process may not load it. With first
/// rings, the group deals among them, then among the full-size rings that
/// join after them; the program for those is loaded now only when the
/// process drops its privileges before it would be.
fn fanout_programs(
    link: LinkType,
    rings: u32,
    first: Option<RingOptions>,
    keeps_privileges: bool,
) -> Result<FanoutPrograms, String> {
    let verdicts = match first {
        Some(_) => (
            Verdict::FanoutAmong { rings, first: 0 },
            Some(Verdict::FanoutAmong {
                rings,
                first: rings,
            }),
        ),
        None => (Verdict::Fanout, None),
    };
    let now = verdicts.1.filter(|_| !keeps_privileges);
    let p = shard::load(link, verdicts.0, None, "weir_fanout")?;
    let then = now
        .map(|v| shard::load(link, v, None, "weir_fanout_full"))
        .transpose()?;
    Ok((Arc::new(p), then.map(Arc::new)))
}

/// One interface's rings (one a worker) with its filter attached, pushed
/// to `slots`; and, when first rings come before them, the full-size rings
/// to set up once the capture records.
fn open_rings(
    opts: &LiveOptions,
    k: usize,
    iface: &Interface,
    plan: IfacePlan,
    first: Option<RingOptions>,
    slots: &mut Vec<Slot>,
) -> Result<Option<Growth>, LiveError> {
    let workers = opts.workers_per_iface.max(1);
    let socket_filter = match (&plan.gate, &plan.program, &plan.filter) {
        (Some(g), ..) => Some(SocketFilter::Program(&g.old)),
        (None, Some(p), _) => Some(SocketFilter::Program(p.as_ref())),
        (None, None, Some(f)) => Some(SocketFilter::Classic(&f.program)),
        (None, None, None) => None,
    };
    // A larger ring follows where the group can be told to deal to it:
    // one ring (a group of its own), or weir's flow hash over several
    // (the kernel's hash cannot be told).
    let deal_to = match (first, &plan.fanout) {
        (Some(_), _) if plan.gate.is_some() => plan.gate.clone().map(DealTo::Gate),
        (Some(_), _) if workers == 1 => Some(DealTo::Member(1)),
        (Some(_), Some((_, Some(then)))) => Some(DealTo::Program(then.clone())),
        (Some(_), Some((_, None))) => Some(DealTo::Load {
            link: plan.link,
            rings: workers as u32,
        }),
        _ => None,
    };
    let ring = match (&deal_to, first) {
        (Some(_), Some(f)) => f,
        _ => opts.ring,
    };
    let mut sockets = Vec::new();
    for _ in 0..workers {
        let r = RxRing::open(iface, ring, socket_filter, opts.scope.promiscuous)?;
        let handover = match deal_to {
            Some(_) => {
                let h = Arc::new(Handover::new());
                sockets.push((RingSocket::new(iface, opts.scope.promiscuous)?, h.clone()));
                Some(h)
            }
            None => None,
        };
        slots.push(Slot {
            ring: r,
            worker: slots.len() as u16,
            iface: k as u16,
            link: plan.link,
            counters: Arc::new(Counters::default()),
            fanout: plan.fanout.as_ref().map(|(p, _)| p.clone()),
            handover,
            gated: plan.gate.is_some(),
        });
    }
    Ok(deal_to.map(|deal_to| Growth {
        iface: iface.name.clone(),
        index: k,
        sockets,
        ring: opts.ring,
        filter: OwnedFilter {
            classic: plan.filter.map(|f| f.program),
            program: plan.program,
        },
        deal_to,
        group: None,
    }))
}

impl Opened {
    /// What opening settled for (weir's fanout program refused, the
    /// kernel's hash used instead), to tell the user at the start.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Rings opened, over every interface.
    pub fn rings(&self) -> usize {
        self.slots.len()
    }

    /// The dataset's manifest before any frame: what the capture is, with
    /// `ended_by: running`. Give it to [`store::Dataset::create_with_manifest`].
    pub fn manifest(&self) -> Manifest {
        base_manifest(&self.opts, &self.libpcap, self.slots.len() as u32)
    }
}
