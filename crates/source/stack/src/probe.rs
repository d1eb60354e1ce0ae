//! Loading the programs, attaching them, and reading their ring buffers.
//!
//! [`Probe::prepare`] checks the options and the system, [`Probe::load`]
//! loads the programs with their filters, [`Loaded::attach`] starts them,
//! and a [`Reader`] copies their records, in chunks, to whoever decodes
//! and writes them (the pipeline's stack recorder, on a thread of its
//! own).
//!
//! The reader only counts and copies records, so that reading takes as
//! little as it can from the traffic being recorded; if the consumer
//! backs up, the kernel counts what the full ring buffers could not take
//! (per event type) instead of anything waiting.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Read;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use libbpf_rs::RingBufferBuilder;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Iter, Link, MapCore, MapFlags, MapHandle, MapType, OpenObject, RingBuffer};

use crate::StackError;
use crate::event::{EVENT_SIZE, append_record, kind};
use crate::interval::SockAgg;
use crate::setup::{self, Prepared};
use crate::skel::{OpenStackSkel, StackSkel, StackSkelBuilder};
use crate::walk::{SockWalk, WALK_SIZE};

/// The most ports `--port` takes (the programs' filter table).
pub const MAX_PORTS: usize = 8;

/// What the programs record.
#[derive(Clone, Debug)]
pub struct ProbeOptions {
    /// Keep only events of this process (tgid), and of the sockets it uses.
    pub pid: Option<u32>,
    /// Keep only events of processes with this command name (≤ 15 bytes).
    pub comm: Option<String>,
    /// Keep only sockets and frames with one of these ports (either end).
    pub ports: Vec<u16>,
    /// A cgroup v2 directory: attach sock_ops there, and keep only the
    /// events of its processes.
    pub cgroup: Option<PathBuf>,
    /// Bytes of each CPU's ring buffer (a power of two, at least a page).
    pub ring_bytes: u32,
    /// Record device transmit/receive.
    pub devices: bool,
    /// ... of pure TCP ACKs too (no payload, no SYN/FIN/RST).
    pub device_acks: bool,
    /// Snapshot every TCP socket this often (iter/tcp).
    pub snapshot_every: Option<Duration>,
    /// Switch the kernel's BPF run-time statistics on while recording and
    /// report each program's CPU time (costs two clock reads per run).
    pub program_stats: bool,
    /// The walk level: an iter/tcp walk reads every TCP socket's own
    /// counters and state each interval ([`Loaded::walk`]), and sockets
    /// that reach CLOSE leave their final counters ([`Loaded::take_finals`]).
    /// Without `aggregate` nothing runs on the packet path.
    pub walk: bool,
    /// Per-packet views (`--with-device`): send, receive, incoming
    /// segments and device frames add to per-socket aggregates in the
    /// kernel (read with [`Loaded::read_aggregates`]) instead of each
    /// being a record.
    pub aggregate: bool,
    /// ... with the write-to-wire delay histogram (`--with-delay`).
    pub delay: bool,
    /// Sockets the aggregate map holds (its entries are allocated as
    /// sockets appear; an update that finds it full is counted as lost).
    pub sockets: u32,
}

impl ProbeOptions {
    fn validate(&self) -> Result<(), StackError> {
        let usage = |m: String| Err(StackError::Usage(m));
        if !self.ring_bytes.is_power_of_two()
            || self.ring_bytes < 4096
            || self.ring_bytes > (1 << 30)
        {
            return usage(format!(
                "--ring-size {}: give a power of two from 4KiB to 1GiB, such as 16MiB",
                self.ring_bytes
            ));
        }
        if self.ports.len() > MAX_PORTS {
            return usage(format!(
                "--port: at most {MAX_PORTS} ports (the in-kernel filter's table); got {}",
                self.ports.len()
            ));
        }
        if let Some(c) = &self.comm
            && (c.is_empty() || c.len() > 15)
        {
            return usage(format!(
                "--comm {c:?}: the kernel keeps 15 bytes of a command name; give 1 to 15"
            ));
        }
        if self.walk && !self.aggregate && (self.pid.is_some() || self.comm.is_some()) {
            return usage(
                "--pid and --comm need the per-packet programs (a socket is matched to a \
                 process when it sends or receives): add --with-device, or use --cgroup or \
                 --port, which the socket walk applies itself"
                    .into(),
            );
        }
        if (self.aggregate || self.walk) && !(16..=1 << 24).contains(&self.sockets) {
            return usage(format!(
                "--sockets {}: give 16 to 16777216 (the kernel's per-socket map)",
                self.sockets
            ));
        }
        if self
            .snapshot_every
            .is_some_and(|d| d < Duration::from_millis(10))
        {
            return usage("--snapshot-every: give at least 10ms".into());
        }
        Ok(())
    }
}

/// A program's runs and CPU time (with [`ProbeOptions::program_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramRuns {
    pub runs: u64,
    pub ns: u64,
}

/// Bytes of raw records handed to the consumer at a time.
pub const CHUNK_BYTES: usize = (1 << 20) / EVENT_SIZE * EVENT_SIZE;

/// Raw records for the consumer, and how far they are complete: every
/// record stamped before `complete_ns` (kernel monotonic clock) is in this
/// chunk or an earlier one.
pub struct Chunk {
    pub records: Vec<u8>,
    pub complete_ns: u64,
}

/// Options checked and the system set up for loading the programs.
pub struct Probe {
    opts: ProbeOptions,
    prepared: Prepared,
    cgroup: Option<(u64, std::fs::File)>,
}

impl Probe {
    /// Checks the options and the privileges, mounts what the programs
    /// need, and opens the cgroup.
    pub fn prepare(opts: &ProbeOptions) -> Result<Probe, StackError> {
        opts.validate()?;
        let prepared = setup::prepare(opts.cgroup.is_some())?;
        let cgroup = opts.cgroup.as_deref().map(setup::open_cgroup).transpose()?;
        Ok(Probe {
            opts: opts.clone(),
            prepared,
            cgroup,
        })
    }

    /// What setting up the system did.
    pub fn prepared(&self) -> &Prepared {
        &self.prepared
    }

    /// Opens, configures and loads the programs into the first of
    /// `objects`, with a ring buffer per possible CPU; into the second with
    /// the socket walk of [`WalkBy::Scan`] where the kernel refuses the
    /// iterator over socket storage.
    pub fn load<'obj>(
        &'obj self,
        objects: &'obj mut [MaybeUninit<OpenObject>; 2],
    ) -> Result<Loaded<'obj>, StackError> {
        let [object, spare] = objects;
        let opts = &self.opts;
        // One ring per possible CPU (the programs index by CPU number).
        let cpus = libbpf_rs::num_possible_cpus()
            .map_err(|e| load_error("counting the possible CPUs", e))?;
        let rings = (0..cpus)
            .map(|cpu| ring_buffer(cpu, opts.ring_bytes))
            .collect::<Result<Vec<_>, _>>()?;
        let walk = opts.walk.then_some(WalkBy::Storage);
        let (skel, walk) = match self.open(object, cpus, walk)?.load() {
            Ok(skel) => (skel, walk),
            Err(e) if opts.walk && is_eperm(&e) => {
                match self.open(spare, cpus, Some(WalkBy::Scan))?.load() {
                    Ok(skel) => (skel, Some(WalkBy::Scan)),
                    Err(_) if self.loads_without_walk(cpus) => return Err(walk_refused(&e)),
                    Err(_) => return Err(load_error("loading the eBPF programs", e)),
                }
            }
            Err(e) => return Err(load_error("loading the eBPF programs", e)),
        };
        for (cpu, ring) in rings.iter().enumerate() {
            use std::os::fd::{AsFd, AsRawFd};
            skel.maps
                .rings
                .update(
                    &(cpu as u32).to_ne_bytes(),
                    &ring.as_fd().as_raw_fd().to_ne_bytes(),
                    MapFlags::ANY,
                )
                .map_err(|e| load_error(&format!("installing CPU {cpu}'s ring buffer"), e))?;
        }
        let stats_on = if opts.program_stats {
            Some(enable_stats()?)
        } else {
            None
        };
        Ok(Loaded {
            probe: self,
            skel,
            walk,
            rings,
            _stats_on: stats_on,
        })
    }

    /// Opens the eBPF object into `object` and configures it as the
    /// options say, with the socket walk's programs of `walk` or none.
    fn open<'obj>(
        &self,
        object: &'obj mut MaybeUninit<OpenObject>,
        cpus: usize,
        walk: Option<WalkBy>,
    ) -> Result<OpenStackSkel<'obj>, StackError> {
        let opts = &self.opts;
        let mut open = StackSkelBuilder::default()
            .open(object)
            .map_err(|e| load_error("opening the eBPF object", e))?;
        open.maps
            .rings
            .set_max_entries(cpus as u32)
            .map_err(|e| load_error("sizing the ring buffer table", e))?;
        if opts.aggregate {
            open.maps
                .aggs
                .set_max_entries(opts.sockets)
                .map_err(|e| load_error("sizing the per-socket map", e))?;
        }
        if walk.is_some() {
            open.maps
                .finals
                .set_max_entries(opts.sockets)
                .map_err(|e| load_error("sizing the closed-socket map", e))?;
        }
        {
            let ro = open.maps.rodata_data.as_deref_mut().ok_or_else(|| {
                StackError::Setup("the eBPF object has no settings section".into())
            })?;
            ro.filter_pid = opts.pid.unwrap_or(0);
            if let Some(c) = &opts.comm {
                ro.filter_comm_on = 1;
                for (d, s) in ro.filter_comm.iter_mut().zip(c.bytes()) {
                    *d = s as i8;
                }
            }
            ro.filter_cgroup = self.cgroup.as_ref().map_or(0, |(id, _)| *id);
            ro.filter_ports_n = opts.ports.len() as u32;
            for (d, p) in ro.filter_ports.iter_mut().zip(&opts.ports) {
                *d = *p;
            }
            ro.wakeup_bytes = (opts.ring_bytes / 4) as u64;
            ro.want_dev = opts.devices as u8;
            ro.want_dev_acks = opts.device_acks as u8;
            ro.aggregate = opts.aggregate as u8;
            ro.want_delay = opts.delay as u8;
            ro.walk = walk.is_some() as u8;
        }
        open.progs.on_sockops.set_autoload(self.cgroup.is_some());
        open.progs
            .dump_tcp
            .set_autoload(opts.snapshot_every.is_some());
        open.progs
            .walk_tcp
            .set_autoload(walk == Some(WalkBy::Storage));
        open.progs
            .walk_tcp_scan
            .set_autoload(walk == Some(WalkBy::Scan));
        open.progs.enroll_tcp.set_autoload(walk.is_some());
        // The walk level alone: nothing on the packet path.
        let per_packet = walk.is_none() || opts.aggregate;
        open.progs.on_send.set_autoload(per_packet);
        open.progs.on_recv.set_autoload(per_packet);
        open.progs.on_tcp_probe.set_autoload(per_packet);
        if !opts.devices || !per_packet {
            open.progs.on_dev_xmit.set_autoload(false);
            open.progs.on_dev_recv.set_autoload(false);
        }
        Ok(open)
    }

    /// Whether the programs load without the socket walk's: told apart
    /// from a missing privilege when the whole set is refused.
    fn loads_without_walk(&self, cpus: usize) -> bool {
        let mut object = MaybeUninit::uninit();
        self.open(&mut object, cpus, None)
            .is_ok_and(|open| open.load().is_ok())
    }
}

/// CPU `cpu`'s ring buffer.
fn ring_buffer(cpu: usize, ring_bytes: u32) -> Result<MapHandle, StackError> {
    MapHandle::create(
        MapType::RingBuf,
        Some(format!("weir_ring{cpu}")),
        0,
        0,
        ring_bytes,
        &libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        },
    )
    .map_err(|e| load_error(&format!("creating CPU {cpu}'s ring buffer"), e))
}

/// Switches the kernel's BPF run-time statistics on; they are kept while
/// the descriptor returned is open.
fn enable_stats() -> Result<OwnedFd, StackError> {
    // SAFETY: a plain syscall wrapper; it returns a new descriptor or a
    // negative error.
    let fd = unsafe {
        libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
    };
    if fd < 0 {
        return Err(StackError::Setup(format!(
            "--program-stats: the kernel refused to switch on BPF statistics ({}); run \
             without --program-stats",
            std::io::Error::from_raw_os_error(-fd)
        )));
    }
    // SAFETY: fd is a new descriptor that nothing else owns.
    Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// How the interval levels walk the sockets they follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkBy {
    /// One iterator over the sockets' storage: only the sockets followed,
    /// every namespace at once.
    Storage,
    /// Where the kernel refuses that iterator: iter/tcp in each network
    /// namespace weir can enter, every TCP socket there looked at (the
    /// socket table's buckets scanned, ~0.8 ms a namespace a walk).
    Scan,
}

/// The programs, loaded, with their ring buffers.
pub struct Loaded<'obj> {
    probe: &'obj Probe,
    skel: StackSkel<'obj>,
    /// The socket walk's way, with [`ProbeOptions::walk`].
    walk: Option<WalkBy>,
    rings: Vec<MapHandle>,
    /// Statistics are kept while this descriptor is open.
    _stats_on: Option<OwnedFd>,
}

/// The programs' attachments: they run until this is dropped.
pub struct Attached {
    /// Held only to keep the programs attached.
    links: Vec<Link>,
    /// The iter/tcp snapshot, with [`ProbeOptions::snapshot_every`].
    iter_link: Option<Link>,
    /// The walk over the sockets it follows, with [`ProbeOptions::walk`].
    walk_link: Option<Link>,
    /// The iter/tcp pass that enrolls the sockets already open.
    enroll_link: Option<Link>,
}

impl Attached {
    /// Detaches the event programs; the iterators stay, for a last walk.
    pub fn detach_events(&mut self) {
        self.links.clear();
    }
}

impl Loaded<'_> {
    /// How the socket walk runs (none without [`ProbeOptions::walk`]).
    pub fn walk_by(&self) -> Option<WalkBy> {
        self.walk
    }

    /// Attaches the programs: events flow from here on.
    pub fn attach(&self) -> Result<Attached, StackError> {
        let opts = &self.probe.opts;
        let progs = &self.skel.progs;
        let mut links: Vec<Link> = Vec::new();
        let mut attach = |name: &str, p: &libbpf_rs::ProgramMut| -> Result<(), StackError> {
            links.push(
                p.attach()
                    .map_err(|e| load_error(&format!("attaching {name}"), e))?,
            );
            Ok(())
        };
        let per_packet = !opts.walk || opts.aggregate;
        if per_packet {
            attach("tp_btf/sock_send_length", &progs.on_send)?;
            attach("tp_btf/sock_recv_length", &progs.on_recv)?;
            attach("tp_btf/tcp_probe", &progs.on_tcp_probe)?;
        }
        attach("tp_btf/inet_sock_set_state", &progs.on_state)?;
        attach("tp_btf/tcp_retransmit_skb", &progs.on_retransmit)?;
        if opts.devices && per_packet {
            attach("tp_btf/net_dev_start_xmit", &progs.on_dev_xmit)?;
            attach("tp_btf/netif_receive_skb", &progs.on_dev_recv)?;
        }
        if let Some((_, fd)) = &self.probe.cgroup {
            use std::os::fd::AsRawFd;
            links.push(
                progs
                    .on_sockops
                    .attach_cgroup(fd.as_raw_fd())
                    .map_err(|e| load_error("attaching sock_ops to the cgroup", e))?,
            );
        }
        let iter_link = match opts.snapshot_every {
            Some(_) => Some(
                progs
                    .dump_tcp
                    .attach()
                    .map_err(|e| load_error("attaching the iter/tcp snapshot", e))?,
            ),
            None => None,
        };
        let (walk_link, enroll_link) = if let Some(by) = self.walk {
            use std::os::fd::AsFd;
            let walk = match by {
                WalkBy::Storage => progs.walk_tcp.attach_iter(self.skel.maps.starts.as_fd()),
                WalkBy::Scan => progs.walk_tcp_scan.attach(),
            }
            .map_err(|e| load_error("attaching the socket walk", e))?;
            let enroll = progs
                .enroll_tcp
                .attach()
                .map_err(|e| load_error("attaching the iter/tcp enrolment", e))?;
            (Some(walk), Some(enroll))
        } else {
            (None, None)
        };
        Ok(Attached {
            links,
            iter_link,
            walk_link,
            enroll_link,
        })
    }

    /// The TCP sockets already open, in every network namespace we can
    /// enter, join the walk: their records (the baselines); nothing
    /// without [`ProbeOptions::walk`].
    pub fn enroll(&self, attached: &Attached) -> Result<Vec<SockWalk>, StackError> {
        let Some(link) = &attached.enroll_link else {
            return Ok(Vec::new());
        };
        Ok(parse_walk(&iterate(
            link,
            "enrolling the open TCP sockets",
        )?))
    }

    /// One walk: the counters and state of each socket the walk follows
    /// whose counts changed since its last record (none without
    /// [`ProbeOptions::walk`]).
    pub fn walk(&self, attached: &Attached) -> Result<Vec<SockWalk>, StackError> {
        let Some(link) = &attached.walk_link else {
            return Ok(Vec::new());
        };
        if self.walk == Some(WalkBy::Scan) {
            return Ok(parse_walk(&iterate(link, "walking the TCP sockets")?));
        }
        let mut it = Iter::new(link).map_err(|e| load_error("walking the TCP sockets", e))?;
        let mut buf = Vec::new();
        it.read_to_end(&mut buf)
            .map_err(|e| StackError::io("the socket walk", e))?;
        Ok(parse_walk(&buf))
    }

    /// The final counters of the sockets that reached CLOSE since the last
    /// call, removed from the kernel's map as they are read.
    pub fn take_finals(&self) -> Vec<SockWalk> {
        let map = &self.skel.maps.finals;
        let keys: Vec<Vec<u8>> = map.keys().collect();
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            if let Ok(Some(v)) = map.lookup(&k, MapFlags::ANY) {
                out.extend(SockWalk::parse(&v));
            }
            let _ = map.delete(&k);
        }
        out
    }

    /// Events each type lost so far to a full ring, summed over the CPUs.
    pub fn lost(&self) -> [u64; kind::COUNT] {
        let mut out = [0u64; kind::COUNT];
        for (k, slot) in out.iter_mut().enumerate() {
            let key = (k as u32).to_ne_bytes();
            if let Ok(Some(per_cpu)) = self.skel.maps.lost.lookup_percpu(&key, MapFlags::ANY) {
                *slot = per_cpu
                    .iter()
                    .filter_map(|v| v.get(..8))
                    .map(|v| u64::from_ne_bytes(v.try_into().unwrap_or([0; 8])))
                    .sum();
            }
        }
        out
    }

    /// Starts aggregation epoch `epoch` (≥ 2; the programs start in 1):
    /// from here on the programs keep minima and maxima in its half, and
    /// the previous epoch's half is whole for [`Loaded::read_aggregates`].
    pub fn start_epoch(&self, epoch: u64) -> Result<(), StackError> {
        // The .data section holds `epoch` alone.
        self.skel
            .maps
            .data
            .update(&0u32.to_ne_bytes(), &epoch.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| load_error("starting an aggregation interval", e))
    }

    /// Every socket's per-CPU aggregate, as the kernel holds it now.
    pub fn read_aggregates(&self) -> Vec<(u64, Vec<SockAgg>)> {
        let map = &self.skel.maps.aggs;
        // Keys first, then values: a walk restarts from the beginning
        // when the key it stands on is deleted.
        let keys: Vec<Vec<u8>> = map.keys().collect();
        let mut out = Vec::with_capacity(keys.len());
        for k in keys {
            let Ok(Some(per_cpu)) = map.lookup_percpu(&k, MapFlags::ANY) else {
                continue; // deleted meanwhile
            };
            let Ok(cookie) = <[u8; 8]>::try_from(k.as_slice()) else {
                continue;
            };
            let cpus: Vec<SockAgg> = per_cpu.iter().filter_map(|v| SockAgg::parse(v)).collect();
            out.push((u64::from_ne_bytes(cookie), cpus));
        }
        out
    }

    /// Removes sockets' aggregates (closed, or idle: see
    /// [`crate::interval::Intervals`]).
    pub fn delete_aggregates(&self, cookies: &[u64]) {
        for c in cookies {
            let _ = self.skel.maps.aggs.delete(&c.to_ne_bytes());
        }
    }

    /// Each program's runs and CPU time so far (the kernel counts them
    /// while its BPF statistics are on).
    pub fn program_cost(&self) -> BTreeMap<String, ProgramRuns> {
        use std::os::fd::{AsFd, AsRawFd};
        let p = &self.skel.progs;
        let progs: [(&str, &libbpf_rs::Program); 12] = [
            ("send", &p.on_send),
            ("recv", &p.on_recv),
            ("tcp_probe", &p.on_tcp_probe),
            ("state", &p.on_state),
            ("retransmit", &p.on_retransmit),
            ("dev_xmit", &p.on_dev_xmit),
            ("dev_recv", &p.on_dev_recv),
            ("sockops", &p.on_sockops),
            // Iterators: one run per socket visited.
            ("walk", &p.walk_tcp),
            ("walk_scan", &p.walk_tcp_scan),
            ("enroll", &p.enroll_tcp),
            ("snapshot", &p.dump_tcp),
        ];
        let mut out = BTreeMap::new();
        for (name, prog) in progs {
            // SAFETY: bpf_prog_info is plain data; all zeros is a valid request.
            let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of_val(&info) as u32;
            // SAFETY: a valid program descriptor and out-pointers to `info`
            // and its length.
            let r = unsafe {
                libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(
                    prog.as_fd().as_raw_fd(),
                    &mut info,
                    &mut len,
                )
            };
            if r == 0 && info.run_cnt > 0 {
                out.insert(
                    name.to_string(),
                    ProgramRuns {
                        runs: info.run_cnt,
                        ns: info.run_time_ns,
                    },
                );
            }
        }
        out
    }
}

/// Everything the ring buffer callback touches: it only counts and copies
/// records into chunks for the consumer.
struct Collector {
    chunk: Vec<u8>,
    /// See [`Chunk::complete_ns`]; set after each read of every ring.
    complete_ns: u64,
    to_consumer: mpsc::SyncSender<Chunk>,
    /// Emptied chunks back from the consumer, to be filled again (fresh
    /// pages cost more than the copy into them).
    free: mpsc::Receiver<Vec<u8>>,
    events: [u64; kind::COUNT],
    malformed: u64,
    consumer_gone: bool,
}

impl Collector {
    fn take(&mut self, bytes: &[u8]) {
        let Some(t) = append_record(&mut self.chunk, bytes) else {
            self.malformed += 1;
            return;
        };
        self.events[t as usize] += 1;
        if self.chunk.len() >= CHUNK_BYTES {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.chunk.is_empty() || self.consumer_gone {
            return;
        }
        let next = self
            .free
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK_BYTES));
        let full = Chunk {
            records: std::mem::replace(&mut self.chunk, next),
            complete_ns: self.complete_ns,
        };
        if self.to_consumer.send(full).is_err() {
            self.consumer_gone = true; // its error is reported when it is joined
        }
    }
}

/// What a reader counted, at its end.
pub struct Collected {
    /// Records read, per event type.
    pub events: [u64; kind::COUNT],
    /// Records that could not be read (wrong size or type): a bug if ever
    /// non-zero.
    pub malformed: u64,
}

/// Reads the ring buffers: records go, in chunks, to `to_consumer`, and
/// emptied chunks come back through `free`.
pub struct Reader<'a> {
    ring: RingBuffer<'a>,
    collector: Rc<RefCell<Collector>>,
}

impl<'a> Reader<'a> {
    pub fn new(
        loaded: &'a Loaded<'_>,
        to_consumer: mpsc::SyncSender<Chunk>,
        free: mpsc::Receiver<Vec<u8>>,
    ) -> Result<Reader<'a>, StackError> {
        let collector = Rc::new(RefCell::new(Collector {
            chunk: Vec::with_capacity(CHUNK_BYTES),
            complete_ns: 0,
            to_consumer,
            free,
            events: [0; kind::COUNT],
            malformed: 0,
            consumer_gone: false,
        }));
        let mut builder = RingBufferBuilder::new();
        for ring in &loaded.rings {
            let c = collector.clone();
            builder
                .add(ring, move |b: &[u8]| {
                    c.borrow_mut().take(b);
                    0
                })
                .map_err(|e| load_error("opening the ring buffer", e))?;
        }
        let ring = builder
            .build()
            .map_err(|e| load_error("opening the ring buffer", e))?;
        Ok(Reader { ring, collector })
    }

    /// Waits up to `wait` for records, then reads every ring.
    pub fn read(&self, wait: Duration) -> Result<(), StackError> {
        match self.ring.poll(wait) {
            Ok(()) => {}
            Err(e) if e.kind() == libbpf_rs::ErrorKind::Interrupted => {}
            Err(e) => return Err(load_error("reading the ring buffer", e)),
        }
        // A poll reads only the rings that woke it; read them all, so that
        // every record stamped before `read_from` is now in hand.
        let read_from = setup::monotonic_ns();
        self.ring
            .consume()
            .map_err(|e| load_error("reading the ring buffer", e))?;
        self.collector.borrow_mut().complete_ns = read_from;
        Ok(())
    }

    /// The consumer stopped taking chunks (its error says why).
    pub fn consumer_gone(&self) -> bool {
        self.collector.borrow().consumer_gone
    }

    /// Records read so far, per event type.
    pub fn events(&self) -> [u64; kind::COUNT] {
        self.collector.borrow().events
    }

    /// One iter/tcp pass over every network namespace we can enter (listed
    /// anew each time: namespaces come and go); nothing without
    /// [`ProbeOptions::snapshot_every`].
    pub fn snapshot(&self, attached: &Attached) -> Result<(), StackError> {
        let Some(link) = &attached.iter_link else {
            return Ok(());
        };
        let bytes = iterate(link, "starting a snapshot")?;
        let mut c = self.collector.borrow_mut();
        for rec in bytes.chunks_exact(EVENT_SIZE) {
            c.take(rec);
        }
        Ok(())
    }

    /// Reads what is left in the rings (detach the programs first, so
    /// that nothing more arrives), hands the last chunk over and lets go
    /// of the consumer.
    pub fn finish(self) -> Collected {
        let _ = self.ring.consume();
        drop(self.ring);
        let mut c = self.collector.borrow_mut();
        c.flush();
        Collected {
            events: c.events,
            malformed: c.malformed,
        }
    }
}

fn parse_walk(bytes: &[u8]) -> Vec<SockWalk> {
    bytes
        .chunks_exact(WALK_SIZE)
        .filter_map(SockWalk::parse)
        .collect()
}

/// Runs an iter/tcp program in every network namespace we can enter
/// (listed anew each time: namespaces come and go); its output, all
/// namespaces' one after the other.
fn iterate(link: &Link, what: &str) -> Result<Vec<u8>, StackError> {
    let mut all = Vec::new();
    for ns in &setup::network_namespaces() {
        // The TCP iterator walks the namespace of the task that creates it.
        let bytes = setup::in_namespace(ns, || -> Result<Vec<u8>, StackError> {
            let mut it = Iter::new(link).map_err(|e| load_error(what, e))?;
            let mut buf = Vec::new();
            it.read_to_end(&mut buf)
                .map_err(|e| StackError::io(ns, e))?;
            Ok(buf)
        })
        .map_err(|e| StackError::io(ns, e))?;
        // A namespace that went away since it was listed has no sockets.
        if let Some(bytes) = bytes.transpose()? {
            all.extend_from_slice(&bytes);
        }
    }
    Ok(all)
}

/// What the error says where the kernel refuses the socket walk's program
/// and loads the others (the interval levels cannot run there; `--events
/// all` can).
pub const WALK_REFUSED: &str = "this kernel refuses the socket walk's program";

/// The error where the kernel refuses both ways of the socket walk and
/// loads the other programs.
fn walk_refused(e: &libbpf_rs::Error) -> StackError {
    StackError::Setup(format!(
        "loading the eBPF programs: {e}: {WALK_REFUSED} (iter/bpf_sk_storage_map, and iter/tcp \
         with socket storage), which the interval levels read each socket with; the other \
         programs load. Run `weir stack --events all` (every event, no socket walk), or on a \
         kernel that allows the iterators"
    ))
}

/// Whether libbpf's error is EPERM: the kernel's refusal before it looks
/// at a program (the verifier's own refusals are EACCES or EINVAL, with its
/// log). libbpf-rs keeps the errno only in the message.
fn is_eperm(e: &libbpf_rs::Error) -> bool {
    e.kind() == libbpf_rs::ErrorKind::PermissionDenied && e.to_string().contains("(os error 1)")
}

pub(crate) fn load_error(what: &str, e: libbpf_rs::Error) -> StackError {
    if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        return StackError::Setup(format!(
            "{what}: permission denied ({e}); weir stack needs CAP_BPF and CAP_PERFMON (and \
             CAP_NET_ADMIN with --cgroup): run it as root. If it already runs as root, the \
             kernel refused the program (lockdown, or kernel.unprivileged_bpf_disabled with a \
             restricted user namespace)"
        ));
    }
    StackError::Bpf {
        what: what.to_string(),
        source: e,
    }
}
