//! Sending frames on an interface (`weir gen -i`).
//!
//! Frames go out through an AF_PACKET socket bound to the interface with
//! protocol 0 (it never receives) and PACKET_QDISC_BYPASS (straight to the
//! driver: the queueing discipline would only add cost to a flood). Two ways
//! of handing them over:
//!
//! - [`TxMethod::Sendmmsg`]: `sendmmsg` with a batch of frames per call
//!   (64 by default); each message points at a frame that was built once
//!   and is reused, and the kernel copies it.
//! - [`TxMethod::Ring`]: a TPACKET_V2 TX ring shared with the kernel; weir
//!   copies a batch of frames into free slots and one `send` hands over all
//!   of them.
//!
//! On the veth pairs of the test machines `sendmmsg` is the faster of the
//! two (see [`TxMethod::default`]).
//!
//! Frames come from a [`TxSource`], the caller's traffic model (`weir gen`
//! wires in the traffic crate's models). A periodic source (the flood
//! model) is built once, one whole cycle, and replayed; other sources (and
//! cycles larger than the memory allowed) are asked for each frame into a
//! ring of buffers that are reused, so the send loop never allocates. A token
//! bucket on the monotonic clock paces frames when a rate is given, an
//! on/off schedule makes bursts, and the loop stops at a frame count, after
//! a duration, or when a stop flag is set. Frames the kernel refuses for
//! want of room (ENOBUFS, EAGAIN) are sent again, so every frame counted
//! went out once.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use wire::LinkType;

use crate::iface::{Interface, InterfaceError};
use crate::sys;

/// Where [`send`] takes its frames from: the caller's traffic model.
pub trait TxSource {
    /// Writes the next frame into `out` (after clearing it); `false` when
    /// the source is exhausted.
    fn next_frame(&mut self, out: &mut Vec<u8>) -> bool;

    /// `Some(p)` if the frames repeat byte for byte every `p` frames for
    /// as long as the source runs: the sender then builds `p` frames once
    /// and sends them round and round, treating the source as endless.
    /// `None` (the default): every frame is asked for.
    fn period(&self) -> Option<u64> {
        None
    }
}

/// How frames are handed to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxMethod {
    /// `sendmmsg` in batches.
    Sendmmsg,
    /// A TPACKET_V2 TX ring.
    Ring,
}

impl Default for TxMethod {
    /// `sendmmsg`, batch 64: on a veth pair between two namespaces of the
    /// 2-core test machines (medians of 3 runs of 5 s, 1000 flows,
    /// half-random payloads) it sent 1.27 Mpps of 64-byte frames against
    /// the TX ring's 1.25 (batch 64) and 1.16 (batch 256), and 1.19 Mpps of
    /// 1514-byte frames against the ring's 1.01 and 0.99. Runs vary by
    /// ±20 % on these shared machines.
    fn default() -> Self {
        TxMethod::Sendmmsg
    }
}

impl TxMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            TxMethod::Sendmmsg => "sendmmsg",
            TxMethod::Ring => "ring",
        }
    }
}

impl fmt::Display for TxMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TxMethod {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sendmmsg" => Ok(TxMethod::Sendmmsg),
            "ring" => Ok(TxMethod::Ring),
            _ => Err(format!("{s:?} is not a TX method: use sendmmsg or ring")),
        }
    }
}

/// An on/off schedule: send for `on`, pause for `off`, repeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    pub on: Duration,
    pub off: Duration,
}

/// How to send.
#[derive(Clone, Debug)]
pub struct TxOptions {
    pub method: TxMethod,
    /// Frames per system call at most.
    pub batch: usize,
    /// Frames per second; `None` sends as fast as the kernel takes them.
    pub rate_pps: Option<f64>,
    pub burst: Option<Burst>,
    /// Stop after this many frames.
    pub count: Option<u64>,
    /// Stop after this long (counted from the first frame, pauses included).
    pub duration: Option<Duration>,
    /// Memory for frames built once and replayed.
    pub pool_bytes: usize,
    /// Socket send buffer (`sendmmsg`).
    pub sndbuf: usize,
    /// Size of the TX ring (`ring`).
    pub ring_bytes: usize,
    /// Give up when no frame has gone out for this long.
    pub stall_timeout: Duration,
}

impl Default for TxOptions {
    fn default() -> Self {
        TxOptions {
            method: TxMethod::default(),
            batch: 64,
            rate_pps: None,
            burst: None,
            count: None,
            duration: None,
            pool_bytes: 64 << 20,
            sndbuf: 4 << 20,
            ring_bytes: 4 << 20,
            stall_timeout: Duration::from_secs(5),
        }
    }
}

/// Why sending stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    Count,
    Duration,
    /// The stop flag was set (Ctrl-C).
    Signal,
    /// The frame source had no more frames.
    SourceEnd,
}

impl EndReason {
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Count => "count",
            EndReason::Duration => "duration",
            EndReason::Signal => "signal",
            EndReason::SourceEnd => "source_end",
        }
    }
}

/// What was sent.
#[derive(Clone, Debug)]
pub struct TxReport {
    pub interface: String,
    pub method: TxMethod,
    /// Frames the kernel accepted for the interface.
    pub frames: u64,
    /// Their bytes (frames without FCS, as in the interface counters).
    pub bytes: u64,
    /// From the first send to the end.
    pub elapsed: Duration,
    /// Times the kernel had no room (ENOBUFS, EAGAIN, a full TX ring) and
    /// weir paused and tried the same frames again. No frame was lost.
    pub retries: u64,
    pub ended_by: EndReason,
    /// Frames built once and replayed; 0 when frames were built as they
    /// were sent.
    pub cycle_frames: usize,
}

/// Bytes a frame occupies on an Ethernet wire beyond the frame itself:
/// FCS (4), preamble and start delimiter (8), inter-frame gap (12).
pub const WIRE_OVERHEAD: u64 = 24;

impl TxReport {
    pub fn pps(&self) -> f64 {
        self.frames as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Gb/s of frame bytes (without FCS, preamble and gap).
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64().max(1e-9) / 1e9
    }

    /// Gb/s as the wire would carry it: each frame plus [`WIRE_OVERHEAD`].
    pub fn wire_gbps(&self) -> f64 {
        (self.bytes + self.frames * WIRE_OVERHEAD) as f64 * 8.0
            / self.elapsed.as_secs_f64().max(1e-9)
            / 1e9
    }
}

/// Why frames cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    #[error(transparent)]
    Interface(#[from] InterfaceError),
    #[error(
        "{name} is not an Ethernet interface (ARPHRD type {arphrd}); weir sends Ethernet frames"
    )]
    NotEthernet { name: String, arphrd: u16 },
    #[error("{name} is down; bring it up first (`ip link set {name} up`)")]
    Down { name: String },
    #[error("{name} has no carrier (its link is down), so frames would go nowhere")]
    NoCarrier { name: String },
    #[error(
        "sending raw frames needs CAP_NET_RAW: run weir as root, or give it the capability \
         (`setcap cap_net_raw+ep $(command -v weir)`)"
    )]
    Permission,
    #[error(
        "a frame of {len} bytes does not fit {name} (MTU {mtu}: frames up to {max} bytes \
         without FCS); use a smaller --size or raise the MTU (`ip link set {name} mtu ...`)"
    )]
    TooBig {
        name: String,
        len: usize,
        mtu: u32,
        max: usize,
    },
    #[error("no frame went out on {name} for {secs} s (is the link congested or down?)")]
    Stalled { name: String, secs: u64 },
    #[error("a send needs a bound: give a frame count or a duration")]
    Unbounded,
    #[error("{name}: {what}: {source}")]
    Io {
        name: String,
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

/// The frames to send: one whole cycle of a periodic source built once and
/// replayed, or frames built as they are needed into a ring of reused
/// buffers (after a prefix built up front, if a cycle did not fit).
struct Frames<'a> {
    source: &'a mut dyn TxSource,
    /// Frames built up front, back to back: the whole cycle, or a prefix.
    data: Vec<u8>,
    /// Where frame i of `data` starts; one more entry for the end.
    starts: Vec<usize>,
    /// `data` holds one whole period of the source, replayed for ever.
    cycle: bool,
    /// Frames after the prefix, built into these buffers in turn.
    bufs: Vec<Vec<u8>>,
    /// Frames built so far (prefix included).
    built: u64,
    exhausted: bool,
    max_len: usize,
}

/// Buffers for frames built as they are sent.
const STREAM_SLOTS: usize = 1024;
/// The longest cycle weir replays.
const MAX_CYCLE_FRAMES: u64 = 1 << 22;

impl<'a> Frames<'a> {
    fn new(source: &'a mut dyn TxSource, max_len: usize, opts: &TxOptions) -> Result<Self, usize> {
        let period = source.period().filter(|&p| p > 0 && p <= MAX_CYCLE_FRAMES);
        let mut data = Vec::new();
        let mut starts = vec![0];
        let mut exhausted = false;
        if let Some(p) = period {
            let mut buf = Vec::with_capacity(2048);
            while ((starts.len() - 1) as u64) < p && data.len() < opts.pool_bytes {
                if !source.next_frame(&mut buf) {
                    exhausted = true;
                    break;
                }
                if !fits(&buf, max_len) {
                    return Err(buf.len());
                }
                data.extend_from_slice(&buf);
                starts.push(data.len());
            }
        }
        let built = (starts.len() - 1) as u64;
        let cycle = !exhausted && period == Some(built);
        let bufs = if cycle {
            Vec::new()
        } else {
            (0..STREAM_SLOTS.max(opts.batch))
                .map(|_| Vec::with_capacity(2048))
                .collect()
        };
        Ok(Frames {
            source,
            data,
            starts,
            cycle,
            bufs,
            built,
            exhausted,
            max_len,
        })
    }

    /// Frames built up front.
    fn prefix(&self) -> u64 {
        (self.starts.len() - 1) as u64
    }

    /// Frame number `a` of the run; it must be ready (see `ready`).
    fn frame(&self, a: u64) -> &[u8] {
        let p = self.prefix();
        if self.cycle || a < p {
            let i = (a % p) as usize;
            &self.data[self.starts[i]..self.starts[i + 1]]
        } else {
            &self.bufs[((a - p) % self.bufs.len() as u64) as usize]
        }
    }

    /// Makes frames `next..next + k` ready, building them if need be, and
    /// says how many are: fewer than `k` at the end of the prefix or of the
    /// source. `k` must not exceed the number of buffers.
    fn ready(&mut self, next: u64, k: usize) -> Result<usize, usize> {
        if self.cycle {
            return Ok(k);
        }
        let p = self.prefix();
        if next < p {
            return Ok(k.min((p - next) as usize));
        }
        debug_assert!(k <= self.bufs.len());
        let mut have = (self.built - next) as usize;
        while have < k && !self.exhausted {
            let n = self.bufs.len() as u64;
            let b = &mut self.bufs[((self.built - p) % n) as usize];
            if !self.source.next_frame(b) {
                self.exhausted = true;
                break;
            }
            if !fits(b, self.max_len) {
                return Err(b.len());
            }
            self.built += 1;
            have += 1;
        }
        Ok(have.min(k))
    }

    /// Bytes of frames `from..from + n`.
    fn bytes(&self, from: u64, n: usize) -> u64 {
        (from..from + n as u64)
            .map(|a| self.frame(a).len() as u64)
            .sum()
    }

    /// The longest frame that can come.
    fn longest(&self) -> usize {
        if self.cycle {
            self.starts
                .windows(2)
                .map(|w| w[1] - w[0])
                .max()
                .unwrap_or(0)
        } else {
            self.max_len + 4
        }
    }
}

/// Whether the kernel takes `f` on an interface that carries frames of up
/// to `max_len` bytes (one more VLAN tag's worth if it is tagged).
fn fits(f: &[u8], max_len: usize) -> bool {
    let tagged = f.len() >= 14 && matches!(u16::from_be_bytes([f[12], f[13]]), 0x8100 | 0x88a8);
    f.len() >= 14 && f.len() <= max_len + if tagged { 4 } else { 0 }
}

/// The result of one hand-over to the kernel.
struct Handed {
    frames: usize,
    /// The kernel had no room for (some of) them.
    congested: bool,
}

fn is_congestion(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR)
    )
}

/// `sendmmsg` over messages that point at the frames.
struct Mmsg {
    fd: OwnedFd,
    iov: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

impl Mmsg {
    fn new(fd: OwnedFd, batch: usize) -> Self {
        let mut iov = vec![
            libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            };
            batch
        ];
        // SAFETY: mmsghdr is plain data; zeroed is a valid value.
        let mut msgs: Vec<libc::mmsghdr> =
            (0..batch).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        Mmsg { fd, iov, msgs }
    }

    /// Sends frames `next..next + k` (k at most the batch).
    fn send(&mut self, frames: &Frames, next: u64, k: usize) -> io::Result<Handed> {
        for (i, v) in self.iov[..k].iter_mut().enumerate() {
            let f = frames.frame(next + i as u64);
            v.iov_base = f.as_ptr() as *mut libc::c_void;
            v.iov_len = f.len();
        }
        // SAFETY: messages 0..k point at iovecs that point at frames, all of
        // which outlive the call.
        let r = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                self.msgs.as_mut_ptr(),
                k as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if is_congestion(&e) {
                return Ok(Handed {
                    frames: 0,
                    congested: true,
                });
            }
            return Err(e);
        }
        // A short count means the kernel refused the next message (ENOBUFS
        // on a full queue): the rest is sent again.
        Ok(Handed {
            frames: r as usize,
            congested: (r as usize) < k,
        })
    }
}

/// Where frame data starts in a TPACKET_V2 TX slot (without
/// PACKET_TX_HAS_OFF): the aligned header, less the sockaddr_ll the kernel
/// leaves room for on receive.
const TX_DATA_OFFSET: usize = libc::TPACKET2_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>();

/// A TPACKET_V2 TX ring.
struct TxRing {
    fd: OwnedFd,
    map: *mut u8,
    map_len: usize,
    frame_size: usize,
    slots: usize,
    head: usize,
}

impl Drop for TxRing {
    fn drop(&mut self) {
        // SAFETY: map/map_len are the mapping made in `open`.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

impl TxRing {
    fn open(fd: OwnedFd, max_len: usize, ring_bytes: usize) -> io::Result<Self> {
        let version = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &version)?;
        let frame_size = (max_len + 4 + TX_DATA_OFFSET).next_power_of_two().max(2048);
        let block_size = frame_size.max(1 << 16);
        let blocks = (ring_bytes / block_size).max(2);
        let req = libc::tpacket_req {
            tp_block_size: block_size as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: (blocks * (block_size / frame_size)) as u32,
        };
        sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_TX_RING, &req)?;
        let map_len = block_size * blocks;
        let map = sys::map_ring(&fd, map_len, false)?;
        Ok(TxRing {
            fd,
            map,
            map_len,
            frame_size,
            slots: req.tp_frame_nr as usize,
            head: 0,
        })
    }

    fn slot(&self, i: usize) -> *mut u8 {
        // SAFETY: i < slots; every block holds a whole number of frames, so
        // slot i starts i * frame_size into the mapping.
        unsafe { self.map.add(i * self.frame_size) }
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: tp_status is the first, 4-byte aligned field of the slot's
        // tpacket2_hdr, shared with the kernel; only atomics touch it.
        unsafe { &*(self.slot(i) as *const AtomicU32) }
    }

    fn kick(&self) -> io::Result<()> {
        // SAFETY: send with no data: "transmit what the ring holds".
        let r = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Copies frames `next..next + k` into free slots and kicks.
    fn send(&mut self, frames: &Frames, next: u64, k: usize) -> io::Result<Handed> {
        let mut put = 0;
        for a in next..next + k as u64 {
            let f = frames.frame(a);
            let st = self.status(self.head).load(Ordering::Acquire);
            if st != libc::TP_STATUS_AVAILABLE {
                if st & libc::TP_STATUS_WRONG_FORMAT != 0 {
                    return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
                }
                break;
            }
            let slot = self.slot(self.head);
            // SAFETY: the slot is ours while its status is AVAILABLE; the
            // frame fits (frame_size was chosen for the longest frame).
            unsafe {
                std::ptr::copy_nonoverlapping(f.as_ptr(), slot.add(TX_DATA_OFFSET), f.len());
                let hdr = slot as *mut libc::tpacket2_hdr;
                (*hdr).tp_len = f.len() as u32;
                (*hdr).tp_snaplen = f.len() as u32;
            }
            self.status(self.head)
                .store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.head = (self.head + 1) % self.slots;
            put += 1;
        }
        match self.kick() {
            Ok(()) => Ok(Handed {
                frames: put,
                congested: put < k,
            }),
            // Frames refused stay in the ring, marked for sending, and go
            // with the next kick.
            Err(e) if is_congestion(&e) => Ok(Handed {
                frames: put,
                congested: true,
            }),
            Err(e) => Err(e),
        }
    }

    /// Kicks until every slot is free again or `limit` passes; returns the
    /// frames and bytes still unsent.
    fn drain(&mut self, limit: Duration) -> (u64, u64) {
        let until = Instant::now() + limit;
        loop {
            let _ = self.kick();
            let mut frames = 0;
            let mut bytes = 0;
            for i in 0..self.slots {
                if self.status(i).load(Ordering::Acquire) != libc::TP_STATUS_AVAILABLE {
                    frames += 1;
                    // SAFETY: reads the header of a slot handed to the kernel.
                    bytes +=
                        unsafe { (*(self.slot(i) as *const libc::tpacket2_hdr)).tp_len } as u64;
                }
            }
            if frames == 0 || Instant::now() >= until {
                return (frames, bytes);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

enum Backend {
    Mmsg(Mmsg),
    Ring(TxRing),
}

/// The shortest pause between sends when pacing.
const MIN_SLEEP: Duration = Duration::from_micros(200);

/// Paces frames: a token bucket over the time spent "on".
struct Pacer {
    start: Instant,
    rate: Option<f64>,
    burst: Option<(u64, u64)>,
    /// Tokens the bucket holds at most (frames that may go at once after a
    /// stall; more than this are forgiven).
    depth: u64,
    /// Tokens forgiven so far.
    forgiven: u64,
}

enum Pace {
    /// Send up to this many frames now.
    Go(u64),
    /// Wait this long (off period or the next token).
    Wait(Duration),
}

impl Pacer {
    fn new(start: Instant, opts: &TxOptions) -> Self {
        let rate = opts.rate_pps;
        Pacer {
            start,
            rate,
            // An "on" time of zero would never send: taken as no schedule.
            burst: opts
                .burst
                .filter(|b| !b.on.is_zero())
                .map(|b| (b.on.as_nanos() as u64, b.off.as_nanos() as u64)),
            // 10 ms of frames, or one batch: short stalls are made up for,
            // long ones do not turn into a flood.
            depth: rate.map_or(u64::MAX, |r| ((r * 0.01) as u64).max(opts.batch as u64)),
            forgiven: 0,
        }
    }

    fn pace(&mut self, now: Instant, sent: u64) -> Pace {
        let t = now.duration_since(self.start).as_nanos() as u64;
        let on_ns = match self.burst {
            Some((on, off)) => {
                let cycle = on + off;
                let phase = t % cycle;
                if phase >= on {
                    return Pace::Wait(Duration::from_nanos(cycle - phase));
                }
                t / cycle * on + phase
            }
            None => t,
        };
        let Some(rate) = self.rate else {
            return Pace::Go(u64::MAX);
        };
        let due = (on_ns as f64 * rate / 1e9) as u64 + 1;
        let tokens = due.saturating_sub(self.forgiven).saturating_sub(sent);
        if tokens > self.depth {
            self.forgiven += tokens - self.depth;
            return Pace::Go(self.depth);
        }
        if tokens > 0 {
            return Pace::Go(tokens);
        }
        // The next frame is due when on_ns reaches (sent + forgiven) / rate;
        // but sleep at least MIN_SLEEP: every wake-up costs some 15 µs of
        // system time here, so low rates go out in small bunches (at most
        // rate × MIN_SLEEP frames) instead of burning a core.
        let next_ns = ((sent + self.forgiven) as f64 * 1e9 / rate).ceil() as u64;
        let wait = Duration::from_nanos(next_ns.saturating_sub(on_ns));
        Pace::Wait(wait.max(MIN_SLEEP))
    }
}

/// Sets the thread's timer slack to 1 ns while it lives, so that short
/// sleeps of the pacer end on time.
struct TimerSlack(libc::c_ulong);

impl TimerSlack {
    fn tight() -> Self {
        // SAFETY: prctl on the calling thread with plain integer arguments.
        let old = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        TimerSlack(old.max(1) as libc::c_ulong)
    }
}

impl Drop for TimerSlack {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, self.0, 0, 0, 0) };
    }
}

/// Opens the socket for `iface` and the chosen method.
fn open(ifc: &Interface, opts: &TxOptions, max_len: usize) -> Result<Backend, TxError> {
    let io = |what: &'static str| {
        let name = ifc.name.clone();
        move |source: io::Error| TxError::Io { name, what, source }
    };
    let fd = sys::packet_socket_unbound().map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => TxError::Permission,
        _ => io("opening a packet socket")(e),
    })?;
    let one: libc::c_int = 1;
    sys::setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one)
        .map_err(io("PACKET_QDISC_BYPASS"))?;
    let backend = match opts.method {
        TxMethod::Sendmmsg => {
            let sndbuf = opts.sndbuf.min(i32::MAX as usize) as libc::c_int;
            // SO_SNDBUFFORCE passes net.core.wmem_max (root); else take what
            // SO_SNDBUF allows.
            if sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &sndbuf).is_err() {
                sys::setsockopt(&fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &sndbuf)
                    .map_err(io("SO_SNDBUF"))?;
            }
            Backend::Mmsg(Mmsg::new(fd, opts.batch))
        }
        TxMethod::Ring => Backend::Ring(
            TxRing::open(fd, max_len, opts.ring_bytes).map_err(io("setting up the TX ring"))?,
        ),
    };
    let fd = match &backend {
        Backend::Mmsg(m) => &m.fd,
        Backend::Ring(r) => &r.fd,
    };
    sys::bind_proto(fd, ifc.index, 0).map_err(io("binding to the interface"))?;
    Ok(backend)
}

/// Checks that frames can go out on `name`: it exists here, carries
/// Ethernet, is up and has a carrier.
pub fn check_interface(name: &str) -> Result<Interface, TxError> {
    let ifc = Interface::by_name(name)?;
    if ifc.link_type() != Some(LinkType::ETHERNET) {
        return Err(TxError::NotEthernet {
            name: ifc.name,
            arphrd: ifc.arphrd,
        });
    }
    if !ifc.up {
        return Err(TxError::Down { name: ifc.name });
    }
    let carrier = std::fs::read_to_string(format!("/sys/class/net/{name}/carrier"));
    if carrier.is_ok_and(|c| c.trim() == "0") {
        return Err(TxError::NoCarrier { name: ifc.name });
    }
    Ok(ifc)
}

/// Sends frames from `source` on interface `iface` until `opts.count`
/// frames, `opts.duration`, the end of the source, or `stop` (at least one
/// of count and duration must be given). A periodic source is treated as
/// endless (see [`TxSource::period`]).
pub fn send(
    iface: &str,
    source: &mut dyn TxSource,
    opts: &TxOptions,
    stop: &AtomicBool,
) -> Result<TxReport, TxError> {
    if opts.count.is_none() && opts.duration.is_none() {
        return Err(TxError::Unbounded);
    }
    let ifc = check_interface(iface)?;
    let max_len = ifc.mtu as usize + 14;
    let too_big = |len| TxError::TooBig {
        name: ifc.name.clone(),
        len,
        mtu: ifc.mtu,
        max: max_len,
    };
    let mut opts = opts.clone();
    opts.batch = opts.batch.clamp(1, 1024);
    let mut frames = Frames::new(source, max_len, &opts).map_err(too_big)?;
    let mut backend = open(&ifc, &opts, frames.longest())?;
    let _slack = TimerSlack::tight();

    let count = opts.count.unwrap_or(u64::MAX);
    let start = Instant::now();
    let deadline = opts.duration.map(|d| start + d);
    let mut pacer = Pacer::new(start, &opts);
    let (mut sent, mut bytes, mut retries) = (0u64, 0u64, 0u64);
    let mut congested_in_a_row = 0u32;
    let mut last_progress = start;
    let ended_by = loop {
        if stop.load(Ordering::Relaxed) {
            break EndReason::Signal;
        }
        if sent >= count {
            break EndReason::Count;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            break EndReason::Duration;
        }
        let allowed = match pacer.pace(now, sent) {
            Pace::Go(n) => n,
            Pace::Wait(w) => {
                let mut w = w.min(Duration::from_millis(10));
                if let Some(d) = deadline {
                    w = w.min(d.saturating_duration_since(now));
                }
                std::thread::sleep(w);
                last_progress = Instant::now().max(last_progress);
                continue;
            }
        };
        let want = allowed.min(count - sent).min(opts.batch as u64) as usize;
        let k = frames.ready(sent, want).map_err(too_big)?;
        if k == 0 {
            break EndReason::SourceEnd;
        }
        let handed = match &mut backend {
            Backend::Mmsg(m) => m.send(&frames, sent, k),
            Backend::Ring(r) => r.send(&frames, sent, k),
        }
        .map_err(|e| send_error(&ifc, e))?;
        if handed.frames > 0 {
            bytes += frames.bytes(sent, handed.frames);
            sent += handed.frames as u64;
            last_progress = Instant::now();
        }
        if handed.congested {
            retries += 1;
            congested_in_a_row += 1;
            if last_progress.elapsed() > opts.stall_timeout {
                return Err(TxError::Stalled {
                    name: ifc.name.clone(),
                    secs: opts.stall_timeout.as_secs(),
                });
            }
            // Let the queue drain: yield at first, then sleep a little longer
            // each time, up to a millisecond.
            if congested_in_a_row < 4 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(
                    (10 * congested_in_a_row as u64).min(1000),
                ));
            }
        } else {
            congested_in_a_row = 0;
        }
    };
    if let Backend::Ring(r) = &mut backend {
        let (frames_left, bytes_left) = r.drain(Duration::from_secs(2));
        sent -= frames_left;
        bytes -= bytes_left;
    }
    let elapsed = start.elapsed();
    Ok(TxReport {
        interface: ifc.name.clone(),
        method: opts.method,
        frames: sent,
        bytes,
        elapsed,
        retries,
        ended_by,
        cycle_frames: if frames.cycle {
            frames.prefix() as usize
        } else {
            0
        },
    })
}

fn send_error(ifc: &Interface, e: io::Error) -> TxError {
    match e.raw_os_error() {
        Some(libc::ENETDOWN | libc::ENXIO | libc::ENODEV) => TxError::Down {
            name: ifc.name.clone(),
        },
        Some(libc::EMSGSIZE) => TxError::TooBig {
            name: ifc.name.clone(),
            len: 0,
            mtu: ifc.mtu,
            max: ifc.mtu as usize + 14,
        },
        Some(libc::EPERM | libc::EACCES) => TxError::Permission,
        _ => TxError::Io {
            name: ifc.name.clone(),
            what: "sending",
            source: e,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer(rate: Option<f64>, burst: Option<(u64, u64)>) -> (Pacer, Instant) {
        let start = Instant::now();
        let opts = TxOptions {
            rate_pps: rate,
            burst: burst.map(|(on, off)| Burst {
                on: Duration::from_millis(on),
                off: Duration::from_millis(off),
            }),
            batch: 8,
            ..TxOptions::default()
        };
        (Pacer::new(start, &opts), start)
    }

    fn go(p: Pace) -> u64 {
        match p {
            Pace::Go(n) => n,
            Pace::Wait(w) => panic!("waits {w:?}"),
        }
    }

    #[test]
    fn pacer_spaces_frames_and_forgives_long_stalls() {
        let ms = Duration::from_millis;
        let (mut p, t0) = pacer(Some(1000.0), None);
        assert_eq!(go(p.pace(t0, 0)), 1);
        match p.pace(t0 + Duration::from_micros(10), 1) {
            Pace::Wait(w) => assert!(w >= ms(0) && w <= ms(1), "{w:?}"),
            Pace::Go(n) => panic!("{n} frames too early"),
        }
        // A short pause sleeps at least MIN_SLEEP.
        match p.pace(t0 + Duration::from_micros(999_950), 1000) {
            Pace::Wait(w) => assert_eq!(w, MIN_SLEEP),
            Pace::Go(n) => panic!("{n}"),
        }
        assert_eq!(go(p.pace(t0 + ms(5), 1)), 5);
        // After a stall of a second only 10 ms of frames (or a batch) go at
        // once; the rest is forgiven and the schedule goes on from there.
        assert_eq!(go(p.pace(t0 + ms(1005), 6)), 10);
        assert_eq!(go(p.pace(t0 + ms(1006), 16)), 1);
    }

    #[test]
    fn pacer_pauses_in_off_periods() {
        let (mut p, t0) = pacer(None, Some((100, 300)));
        assert_eq!(go(p.pace(t0 + Duration::from_millis(50), 0)), u64::MAX);
        match p.pace(t0 + Duration::from_millis(150), 0) {
            Pace::Wait(w) => assert_eq!(w, Duration::from_millis(250)),
            Pace::Go(_) => panic!("sends while off"),
        }
        // With a rate, only time spent on earns frames: 1.25 s in, 350 ms
        // on, 36 frames due.
        let (mut p, t0) = pacer(Some(100.0), Some((100, 300)));
        assert_eq!(go(p.pace(t0 + Duration::from_millis(1250), 30)), 6);
    }

    #[test]
    fn frames_must_fit_the_mtu() {
        let mut f = vec![0u8; 1514];
        assert!(fits(&f, 1514));
        f.push(0);
        assert!(!fits(&f, 1514));
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        assert!(fits(&f, 1514));
        assert!(!fits(&[0u8; 10], 1514));
    }
}
