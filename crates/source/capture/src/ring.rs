//! An AF_PACKET socket with a TPACKET_V3 receive ring.
//!
//! The kernel fills blocks of the ring with frames and hands a whole block
//! to user space at once (when it is full, or when it has been open for the
//! retire timeout). A worker walks the block's frames in place and gives
//! the block back; there is no copy and no system call per frame. Several
//! rings on one interface join a fanout group, and the kernel sends each
//! flow (hashed symmetrically, after defragmentation) to one of them.
//!
//! Opening and starting are apart: [`RxRing::open`] makes the ring and
//! attaches the filter on a socket that receives nothing, so a capture can
//! make everything else ready (staging, files, the manifest) before
//! [`RxRing::start`] binds it and the first frame arrives.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::bpf::SocketProgram;
use crate::iface::Interface;
use crate::sys::{bind_to, check, getsockopt, map_ring, packet_socket_unbound, setsockopt};

/// Sizes of a receive ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingOptions {
    /// Bytes per block (a multiple of the page size, a power of two).
    pub block_size: usize,
    pub block_count: usize,
    /// Milliseconds after which the kernel hands over a block that is not
    /// full: the latency floor at low rates.
    pub retire_ms: u32,
}

impl RingOptions {
    /// `total` bytes of ring in blocks of `block_size` (at least 4 blocks).
    pub fn with_total(total: usize, block_size: usize) -> Self {
        RingOptions {
            block_size,
            block_count: (total / block_size).max(4),
            retire_ms: 10,
        }
    }

    pub fn total(&self) -> usize {
        self.block_size * self.block_count
    }
}

/// How a fanout group deals frames to its rings (`weir capture --fanout`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FanoutBy {
    /// [`FanoutBy::Flow`] where the process may load the program (root,
    /// or CAP_BPF), else [`FanoutBy::Kernel`]: what `weir capture` does
    /// unless told.
    #[default]
    Auto,
    /// weir's own flow hash ([`crate::shard::program`]), through tunnels:
    /// each ring gets whole flows by the flow key the records carry, ring
    /// `flow_hash % rings`.
    Flow,
    /// The kernel's symmetric flow hash, which stops at the outer header of
    /// a UDP tunnel (VXLAN, VXLAN-GPE, GENEVE, GTP-U, MPLS in UDP).
    Kernel,
}

impl FanoutBy {
    /// What the manifest says about it.
    pub fn describe(self) -> &'static str {
        match self {
            FanoutBy::Flow => {
                "weir flow hash v1 (wire::flow, innermost packet), ring = flow_hash % rings                  (PACKET_FANOUT_EBPF)"
            }
            FanoutBy::Kernel => "the kernel's symmetric flow hash (PACKET_FANOUT_HASH)",
            FanoutBy::Auto => "auto",
        }
    }
}

impl std::str::FromStr for FanoutBy {
    type Err = String;

    fn from_str(s: &str) -> Result<FanoutBy, String> {
        match s {
            "auto" => Ok(FanoutBy::Auto),
            "flow" => Ok(FanoutBy::Flow),
            "kernel" => Ok(FanoutBy::Kernel),
            _ => Err(format!(
                "--fanout {s:?}: give auto, flow (weir's flow hash, through tunnels) or kernel \
                 (the kernel's own hash)"
            )),
        }
    }
}

/// The fanout group of one interface's rings. The first ring to join asks
/// the kernel for an id no group has (PACKET_FANOUT_FLAG_UNIQUEID); the
/// others join that id. An id of our own choosing could be one another
/// capture on the same interface chose too, and the kernel would then deal
/// each flow to one of the two processes only, silently.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fanout {
    id: Option<u16>,
    /// The eBPF program that deals frames (PACKET_FANOUT_EBPF), if not the
    /// kernel's own flow hash (PACKET_FANOUT_HASH).
    program: Option<RawFd>,
    /// Every frame to this member (PACKET_FANOUT_CBPF, a one-instruction
    /// classic program): a group of one ring that a larger ring takes over
    /// from later ([`RxRing::deal_all_to`]).
    member: Option<u32>,
}

impl Fanout {
    /// A group no ring has joined yet, dealing frames by the kernel's
    /// symmetric flow hash.
    pub fn new() -> Fanout {
        Fanout::default()
    }

    /// A group no ring has joined yet, dealing each frame to ring number
    /// `program`'s return value modulo the rings in the group: with
    /// [`crate::shard::program`] and [`crate::shard::Verdict::Hash`], weir's
    /// own flow hash, through tunnels. The program needs to stay loaded
    /// until the first ring has started (the group holds it from then on).
    pub fn by_program(program: &SocketProgram) -> Fanout {
        Fanout {
            id: None,
            program: Some(program.raw_fd()),
            member: None,
        }
    }

    /// A group no ring has joined yet that deals every frame to its first
    /// member, until told otherwise. It does not reassemble fragments (a
    /// group that deals by flow does, to keep a datagram's fragments on
    /// one ring): what its ring receives is what a ring alone would.
    pub fn to_first() -> Fanout {
        Fanout {
            id: None,
            program: None,
            member: Some(0),
        }
    }

    /// The kernel's id for the group, once a ring has joined.
    pub fn id(&self) -> Option<u16> {
        self.id
    }
}

/// A protocol no received frame has: Ethernet's length field ends at
/// 0x05dc and its ethertypes start at 0x0600 (a frame with a length gets
/// ETH_P_802_3 or ETH_P_802_2), and no Linux pseudo-protocol is 0x05ff.
const NO_FRAME_PROTOCOL: u16 = 0x05ff;

/// A classic program that returns `k` for every frame.
fn constant_program(k: u32) -> [libc::sock_filter; 1] {
    [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k,
    }]
}

/// What the kernel counted for one socket since the last read (the
/// counters reset when read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Frames that reached the socket, dropped ones included.
    pub packets: u64,
    /// Frames dropped because the ring was full.
    pub drops: u64,
    /// Times the ring froze the queue (TPACKET_V3 freezes when every block
    /// is in user space).
    pub freezes: u64,
}

/// Why a ring could not be set up; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RingError {
    #[error(
        "opening a packet socket needs root or CAP_NET_RAW (run as root, or `setcap cap_net_raw,cap_net_admin+ep` on the weir binary)"
    )]
    Permission,
    #[error("{iface}: {what}: {source}")]
    Setup {
        iface: String,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "{iface}: the kernel refused a receive ring of {bytes} bytes ({source}); give a smaller -B"
    )]
    RingTooBig {
        iface: String,
        bytes: usize,
        #[source]
        source: io::Error,
    },
}

/// One frame in a block, as the kernel left it.
#[derive(Clone, Copy, Debug)]
pub struct RxFrame<'a> {
    pub ts_ns: i64,
    /// Length on the wire.
    pub wire_len: u32,
    /// The captured bytes (the frame as the device saw it, less any VLAN tag
    /// the device stripped: see `vlan_tci`).
    pub data: &'a [u8],
    /// A VLAN tag the device took off the frame (TCI, and TPID if known).
    pub vlan: Option<(u16, u16)>,
    /// The timestamp came from the NIC's clock.
    pub hw_timestamp: bool,
}

/// What decides, in the kernel, which frames reach a ring.
#[derive(Clone, Copy)]
pub enum SocketFilter<'a> {
    /// libpcap's classic BPF.
    Classic(&'a [libc::sock_filter]),
    /// An eBPF socket program (the shard filter, with any tcpdump filter
    /// translated into it).
    Program(&'a SocketProgram),
}

/// A packet socket made (the step that needs CAP_NET_RAW) whose ring is
/// not set up yet: setting up a large ring takes the kernel a while when
/// its free memory is cold, so a capture may do it after it has started
/// recording on a small one, with privileges already given up.
pub struct RingSocket {
    fd: OwnedFd,
    iface: String,
    ifindex: u32,
    promiscuous: bool,
}

impl RingSocket {
    /// A socket for `iface` that receives nothing yet.
    pub fn new(iface: &Interface, promiscuous: bool) -> Result<RingSocket, RingError> {
        let name = iface.name.clone();
        // Protocol 0: the socket receives nothing until it is bound, after
        // the ring and the filter are in place.
        let fd = packet_socket_unbound().map_err(|e| {
            if e.raw_os_error() == Some(libc::EPERM) {
                RingError::Permission
            } else {
                setup_error(&name, "socket")(e)
            }
        })?;
        Ok(RingSocket {
            fd,
            iface: name,
            ifindex: iface.index,
            promiscuous,
        })
    }

    /// The socket, for reading its counters from another thread.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Sets up a ring of `opts` on the socket and attaches `filter`.
    pub fn set_up(
        self,
        opts: RingOptions,
        filter: Option<SocketFilter<'_>>,
    ) -> Result<RxRing, RingError> {
        let RingSocket {
            fd,
            iface: name,
            ifindex,
            promiscuous,
        } = self;
        let setup = |what| setup_error(&name, what);
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3)
            .map_err(setup("PACKET_VERSION TPACKET_V3"))?;
        // Ask for hardware timestamps; the kernel falls back to its own
        // clock where the NIC has none, and each frame says which it got.
        let ts_flags: libc::c_int = libc::SOF_TIMESTAMPING_RAW_HARDWARE as libc::c_int;
        let _ = setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_TIMESTAMP, &ts_flags);
        let frame_size = 2048u32;
        let req = libc::tpacket_req3 {
            tp_block_size: opts.block_size as u32,
            tp_block_nr: opts.block_count as u32,
            tp_frame_size: frame_size,
            tp_frame_nr: (opts.block_size as u32 / frame_size) * opts.block_count as u32,
            tp_retire_blk_tov: opts.retire_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req).map_err(|source| {
            RingError::RingTooBig {
                iface: name.clone(),
                bytes: opts.total(),
                source,
            }
        })?;
        let map_len = opts.total();
        let map = map_ring(&fd, map_len, true).map_err(setup("mmap of the ring"))?;
        let ring = RxRing {
            fd,
            map,
            map_len,
            opts,
            next: 0,
            iface: name.clone(),
            ifindex,
            promiscuous,
        };
        match filter {
            Some(SocketFilter::Classic(f)) => {
                attach_filter(&ring.fd, f).map_err(setup("attaching the filter"))?
            }
            Some(SocketFilter::Program(p)) => p
                .attach(&ring.fd)
                .map_err(setup("attaching the shard filter"))?,
            None => {}
        }
        Ok(ring)
    }
}

/// A receive ring on one interface.
pub struct RxRing {
    fd: OwnedFd,
    map: *mut u8,
    map_len: usize,
    opts: RingOptions,
    next: usize,
    iface: String,
    ifindex: u32,
    promiscuous: bool,
}

// SAFETY: the ring's memory is only touched through &mut self (one owner
// thread); the pointer is to a shared mapping that stays valid until drop.
unsafe impl Send for RxRing {}

const TPACKET_V3: libc::c_int = 2;

impl RxRing {
    /// Opens a socket for `iface` with a ring of `opts` and `filter`
    /// attached. It receives nothing until [`RxRing::start`]; `promiscuous`
    /// is applied there.
    pub fn open(
        iface: &Interface,
        opts: RingOptions,
        filter: Option<SocketFilter<'_>>,
        promiscuous: bool,
    ) -> Result<RxRing, RingError> {
        RingSocket::new(iface, promiscuous)?.set_up(opts, filter)
    }

    /// Binds the ring to its interface, so frames start to arrive, and
    /// joins `fanout` (one per interface, shared by its rings) if given.
    /// Needs no privilege beyond the socket's, so it may run after they
    /// are dropped. Until it has joined, a second ring of a group sees
    /// every frame: the first microseconds may hold a frame twice, never
    /// none.
    pub fn start(&mut self, fanout: Option<&mut Fanout>) -> Result<(), RingError> {
        bind_to(&self.fd, self.ifindex).map_err(setup_error(&self.iface, "bind"))?;
        if let Some(group) = fanout {
            self.join(group)?;
        }
        self.promiscuous_on()?;
        // Counters start from the moment the ring is live.
        let _ = self.kernel_stats();
        Ok(())
    }

    /// Starts a ring that is to take over from another in `group` (which
    /// has started): it joins the group without seeing a frame first (a
    /// ring bound outside a group sees every frame until it joins), then
    /// takes `filter`. It receives what the group deals it, nothing until
    /// the group's program is changed to deal to it
    /// ([`RxRing::deal_all_to`], [`RxRing::deal_by`]).
    pub fn start_standby(
        &mut self,
        group: &mut Fanout,
        filter: Option<SocketFilter<'_>>,
    ) -> Result<(), RingError> {
        let setup = |what| setup_error(&self.iface, what);
        attach_filter(&self.fd, &constant_program(0)).map_err(setup("attaching a filter"))?;
        bind_to(&self.fd, self.ifindex).map_err(setup("bind"))?;
        self.join(group)?;
        self.promiscuous_on()?;
        match filter {
            Some(SocketFilter::Classic(f)) => {
                attach_filter(&self.fd, f).map_err(setup("attaching the filter"))?
            }
            Some(SocketFilter::Program(p)) => p
                .attach(&self.fd)
                .map_err(setup("attaching the shard filter"))?,
            // Every frame whole: a program that keeps everything in place
            // of the one that kept nothing.
            None => attach_filter(&self.fd, &constant_program(u32::MAX))
                .map_err(setup("attaching a filter"))?,
        }
        let _ = self.kernel_stats();
        Ok(())
    }

    /// Starts a ring that is to take over from another, not in a group, by
    /// a [`crate::gate::Gate`]: bound with the gate's closed program, it
    /// receives nothing until [`RxRing::open_gate`].
    pub fn start_gated(&mut self, closed: &SocketProgram) -> Result<(), RingError> {
        let setup = |what| setup_error(&self.iface, what);
        closed
            .attach(&self.fd)
            .map_err(setup("attaching the hand-over's program"))?;
        bind_to(&self.fd, self.ifindex).map_err(setup("bind"))?;
        self.promiscuous_on()?;
        let _ = self.kernel_stats();
        Ok(())
    }

    /// The hand-over: from the frame after this change on, this ring
    /// (started with [`RxRing::start_gated`]) receives what the old one did.
    pub fn open_gate(&self, open: &SocketProgram) -> Result<(), RingError> {
        open.attach(&self.fd).map_err(setup_error(
            &self.iface,
            "attaching the hand-over's program",
        ))
    }

    /// Takes the ring off the interface: no frame reaches it from when this
    /// returns (the kernel waits for any on its way), and nothing is run
    /// for it per frame. What it holds can still be read. (Binding to
    /// protocol 0 would keep the protocol the socket has: it is bound to
    /// one no frame carries instead, after a filter that keeps nothing.)
    pub fn unhook(&self) -> io::Result<()> {
        attach_filter(&self.fd, &constant_program(0))?;
        crate::sys::bind_proto(&self.fd, self.ifindex, NO_FRAME_PROTOCOL)
    }

    /// Replaces the ring's filter (`None`: every frame whole, no filter
    /// run at all).
    pub fn set_filter(&self, filter: Option<SocketFilter<'_>>) -> io::Result<()> {
        match filter {
            Some(SocketFilter::Classic(f)) => attach_filter(&self.fd, f),
            Some(SocketFilter::Program(p)) => p.attach(&self.fd),
            None => {
                let none: libc::c_int = 0;
                setsockopt(&self.fd, libc::SOL_SOCKET, libc::SO_DETACH_FILTER, &none)
            }
        }
    }

    /// The group this ring is in (made with [`Fanout::to_first`]) deals
    /// every frame to its member `k` (counted from 0 in the order they
    /// joined) from now on. When this returns, no frame is on its way to
    /// another member.
    pub fn deal_all_to(&self, k: u32) -> Result<(), RingError> {
        let prog = constant_program(k);
        let fprog = libc::sock_fprog {
            len: 1,
            filter: prog.as_ptr() as *mut libc::sock_filter,
        };
        setsockopt(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT_DATA, &fprog).map_err(
            setup_error(&self.iface, "changing the fanout group's program"),
        )
    }

    /// The group this ring is in (made with [`Fanout::by_program`]) deals
    /// frames by `program` from now on. When this returns, no frame is on
    /// its way to a member the old program chose.
    pub fn deal_by(&self, program: &SocketProgram) -> Result<(), RingError> {
        let fd: libc::c_int = program.raw_fd();
        setsockopt(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT_DATA, &fd).map_err(setup_error(
            &self.iface,
            "changing the fanout group's program",
        ))
    }

    /// Joins `group`, making it if no ring has joined yet.
    fn join(&self, group: &mut Fanout) -> Result<(), RingError> {
        let setup = |what| setup_error(&self.iface, what);
        let mode = match (group.program, group.member) {
            (Some(_), _) => libc::PACKET_FANOUT_EBPF | libc::PACKET_FANOUT_FLAG_DEFRAG,
            (None, Some(_)) => libc::PACKET_FANOUT_CBPF,
            (None, None) => libc::PACKET_FANOUT_HASH | libc::PACKET_FANOUT_FLAG_DEFRAG,
        } as libc::c_int;
        match group.id {
            Some(id) => {
                let arg = libc::c_int::from(id) | (mode << 16);
                setsockopt(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg)
                    .map_err(setup("joining the fanout group"))?;
            }
            None => {
                let unique = libc::PACKET_FANOUT_FLAG_UNIQUEID as libc::c_int;
                let arg = (mode | unique) << 16;
                setsockopt(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT, &arg)
                    .map_err(setup("making a fanout group (PACKET_FANOUT_FLAG_UNIQUEID)"))?;
                // The low 16 bits are the id the kernel chose.
                let got: libc::c_int = getsockopt(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT)
                    .map_err(setup("reading the fanout group's id"))?;
                group.id = Some((got & 0xffff) as u16);
                // Until the program is in, the kernel deals every frame
                // to the first ring: no other has joined yet.
                if let Some(fd) = group.program {
                    setsockopt(&self.fd, libc::SOL_PACKET, libc::PACKET_FANOUT_DATA, &fd).map_err(
                        setup("giving the fanout group its program (PACKET_FANOUT_DATA)"),
                    )?;
                }
                if let Some(k) = group.member {
                    self.deal_all_to(k)?;
                }
            }
        }
        Ok(())
    }

    fn promiscuous_on(&self) -> Result<(), RingError> {
        if self.promiscuous {
            // SAFETY: packet_mreq is plain data.
            let mut mreq: libc::packet_mreq = unsafe { std::mem::zeroed() };
            mreq.mr_ifindex = self.ifindex as i32;
            mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
            setsockopt(
                &self.fd,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mreq,
            )
            .map_err(setup_error(&self.iface, "promiscuous mode"))?;
        }
        Ok(())
    }

    /// The socket, for reading its counters from another thread.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn options(&self) -> RingOptions {
        self.opts
    }

    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// Lets no further frame into the ring (a filter that keeps nothing
    /// replaces the capture's), so that what the ring holds can be drained
    /// to its end even while traffic goes on. Frames turned away here are
    /// not the ring's: the kernel counts them neither as received nor as
    /// dropped.
    pub fn stop_receiving(&self) -> io::Result<()> {
        attach_filter(&self.fd, &constant_program(0))
    }

    /// The kernel's counters since the last read.
    pub fn kernel_stats(&self) -> io::Result<KernelStats> {
        kernel_stats(self.fd.as_raw_fd())
    }

    fn block_ptr(&self, i: usize) -> *mut u8 {
        // In bounds: i < block_count and the map holds block_count blocks.
        self.map.wrapping_add(i * self.opts.block_size)
    }

    fn block_status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: block_status is the first u32 of the block header (after
        // version and offset_to_priv), 4-byte aligned, shared with the kernel;
        // an atomic is the right way to read and write it.
        unsafe { &*(self.block_ptr(i).wrapping_add(8) as *const AtomicU32) }
    }

    /// Blocks the kernel has handed over and user space has not returned,
    /// counted from the next one: a measure of how far behind we are.
    pub fn blocks_ready(&self) -> usize {
        let n = self.opts.block_count;
        (0..n)
            .take_while(|k| {
                let i = (self.next + k) % n;
                self.block_status(i).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
            })
            .count()
    }

    /// The ring's hand-over state, for a diagnosis: the block the worker
    /// waits on, then (status, frames) of it and the next few blocks, and
    /// how many blocks are the user's (none after a drain).
    pub fn state(&self) -> String {
        let n = self.opts.block_count;
        let user = (0..n)
            .filter(|&i| self.block_status(i).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0)
            .count();
        let ahead: Vec<(u32, u32)> = (0..n.min(6))
            .map(|k| {
                let i = (self.next + k) % n;
                // SAFETY: reading the header of a block the kernel may be
                // filling; a torn read only garbles this message.
                let pkts = unsafe {
                    (*(self.block_ptr(i) as *const libc::tpacket_block_desc))
                        .hdr
                        .bh1
                        .num_pkts
                };
                (self.block_status(i).load(Ordering::Acquire), pkts)
            })
            .collect();
        format!(
            "waiting on block {} of {n}; (status, frames) from there {ahead:?}; {user} user-owned",
            self.next
        )
    }

    /// Waits up to `timeout` for the next block and calls `f` on each of its
    /// frames; returns how many frames it had (0 on timeout). The block goes
    /// back to the kernel when `f` has seen every frame.
    pub fn next_block(
        &mut self,
        timeout: Duration,
        mut f: impl FnMut(RxFrame<'_>),
    ) -> io::Result<usize> {
        let i = self.next;
        if self.block_status(i).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            };
            let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
            // SAFETY: one valid pollfd.
            match check(unsafe { libc::poll(&mut pfd, 1, ms) }) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.block_status(i).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                return Ok(0);
            }
        }
        let block = self.block_ptr(i);
        let bs = self.opts.block_size;
        // SAFETY: the block is ours until we hand it back below; its header
        // is a tpacket_block_desc at the start of the block.
        let (num_pkts, first) = unsafe {
            let desc = &*(block as *const libc::tpacket_block_desc);
            (
                desc.hdr.bh1.num_pkts as usize,
                desc.hdr.bh1.offset_to_first_pkt as usize,
            )
        };
        let mut off = first;
        for _ in 0..num_pkts {
            if off + std::mem::size_of::<libc::tpacket3_hdr>() > bs {
                break;
            }
            // SAFETY: `off` is inside the block (checked above) and the kernel
            // placed a tpacket3_hdr there.
            let h = unsafe { &*(block.wrapping_add(off) as *const libc::tpacket3_hdr) };
            let mac = h.tp_mac as usize;
            let snap = h.tp_snaplen as usize;
            if off + mac + snap > bs {
                break;
            }
            // SAFETY: the frame's bytes lie inside the block (checked above).
            let data = unsafe { std::slice::from_raw_parts(block.wrapping_add(off + mac), snap) };
            let status = h.tp_status;
            let vlan = (status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
                let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
                    h.hv1.tp_vlan_tpid
                } else {
                    0x8100
                };
                (h.hv1.tp_vlan_tci as u16, tpid)
            });
            f(RxFrame {
                ts_ns: h.tp_sec as i64 * 1_000_000_000 + h.tp_nsec as i64,
                wire_len: h.tp_len,
                data,
                vlan,
                hw_timestamp: status & libc::TP_STATUS_TS_RAW_HARDWARE != 0,
            });
            if h.tp_next_offset == 0 {
                break;
            }
            off += h.tp_next_offset as usize;
        }
        self.block_status(i)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.next = (i + 1) % self.opts.block_count;
        Ok(num_pkts)
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in open().
        unsafe {
            libc::munmap(self.map as *mut libc::c_void, self.map_len);
        }
    }
}

/// Reads (and resets) the kernel's counters of a packet socket.
pub fn kernel_stats(fd: RawFd) -> io::Result<KernelStats> {
    struct Fd(RawFd);
    impl AsRawFd for Fd {
        fn as_raw_fd(&self) -> RawFd {
            self.0
        }
    }
    #[derive(Clone, Copy, Default)]
    #[repr(C)]
    struct StatsV3 {
        packets: u32,
        drops: u32,
        freezes: u32,
    }
    let s: StatsV3 = getsockopt(&Fd(fd), libc::SOL_PACKET, libc::PACKET_STATISTICS)?;
    Ok(KernelStats {
        packets: s.packets as u64,
        drops: s.drops as u64,
        freezes: s.freezes as u64,
    })
}

/// The error of a failed set-up step `what` of a ring on `iface`.
fn setup_error(iface: &str, what: &'static str) -> impl FnOnce(io::Error) -> RingError {
    let iface = iface.to_string();
    move |source| RingError::Setup {
        iface,
        what,
        source,
    }
}

fn attach_filter(fd: &OwnedFd, prog: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
}
