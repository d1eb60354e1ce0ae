//! Turning the eBPF programs' records into events, the rows of the stack
//! table (the pipeline's stack recorder writes them there).
//!
//! Pure: bytes in, [`StackEvent`]s out. `RawEvent::parse` mirrors
//! `src/bpf/event.h` (one fixed layout for every event type, native byte
//! order); [`Decoder`] adds what only user space can know: the wall-clock
//! time, the socket a received frame belongs to, the process that owns a
//! socket, and sequence numbers unwrapped past 4 GiB.

use util::fasthash::FastMap;

/// Bytes of one event record (`EVENT_SIZE` in event.h).
pub const EVENT_SIZE: usize = 176;
/// Bytes the programs write for a device event (`DEV_EVENT_SIZE`): the
/// record's first part; the rest reads as zeros.
pub const DEV_EVENT_SIZE: usize = 104;
/// Where a record says its type.
pub const TYPE_AT: usize = 20;

/// Event types, as numbered by the eBPF programs (and the stack table's
/// event names).
pub mod kind {
    pub const SEND: u8 = 0;
    pub const RECV: u8 = 1;
    pub const TCP_PROBE: u8 = 2;
    pub const STATE: u8 = 3;
    pub const RETRANSMIT: u8 = 4;
    pub const DEV_XMIT: u8 = 5;
    pub const DEV_RECV: u8 = 6;
    pub const SOCKOPS_RTT: u8 = 7;
    pub const SOCKOPS_RETRANS: u8 = 8;
    pub const SOCKOPS_STATE: u8 = 9;
    pub const SNAPSHOT: u8 = 10;
    /// The default mode's per-socket aggregates: never a record; its
    /// `lost` count is updates the kernel's full map refused, its events
    /// count the interval rows written.
    pub const INTERVAL: u8 = 11;
    /// Types that come as records (all but INTERVAL).
    pub const RECORDS: usize = 11;
    /// Number of types counted.
    pub const COUNT: usize = 12;
}

const TCP_SYN_SENT: u8 = 2;
const TCP_CLOSE: u8 = 7;

/// A socket's TCP state at the event (MAGNeT's "TCP extra data").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    pub snd_cwnd: u32,
    pub ssthresh: u32,
    pub srtt_us: u32,
    pub rttvar_us: u32,
    pub snd_wnd: u32,
    pub rcv_wnd: u32,
    pub snd_nxt: u32,
    pub snd_una: u32,
    pub packets_out: u32,
    pub in_flight: u32,
    pub total_retrans: u32,
}

/// One decoded event: what a row of the stack table holds. `None` is a
/// null: a field the event type does not have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackEvent {
    /// ns since the epoch (the kernel's monotonic clock moved onto the
    /// wall clock by the offset measured when recording started).
    pub ts_ns: i64,
    /// The event's type ([`kind`]).
    pub event: u8,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub comm: Option<[u8; 16]>,
    pub cookie: Option<u64>,
    pub netns: u32,
    pub family: u8,
    pub proto: u8,
    pub local_addr: Option<[u8; 16]>,
    pub local_port: Option<u16>,
    pub remote_addr: Option<[u8; 16]>,
    pub remote_port: Option<u16>,
    pub bytes: Option<u32>,
    pub payload: Option<u32>,
    pub seq: Option<u64>,
    pub ack: Option<u32>,
    pub state: Option<u8>,
    pub old_state: Option<u8>,
    pub tcp: Option<TcpInfo>,
    pub ifindex: Option<u32>,
    pub dev: Option<[u8; 16]>,
    pub ret: Option<i32>,
    pub tcp_flags: Option<u8>,
}

/// One record as the kernel wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawEvent {
    pub ts_ns: u64,
    pub cookie: u64,
    pub pid: u32,
    pub tid: u32,
    pub netns: u32,
    pub kind: u8,
    pub family: u8,
    pub proto: u8,
    pub state: u8,
    pub comm: [u8; 16],
    pub laddr: [u8; 16],
    pub raddr: [u8; 16],
    pub lport: u16,
    pub rport: u16,
    pub bytes: u32,
    pub payload: u32,
    pub seq: u32,
    pub ack: u32,
    pub tcp: TcpInfo,
    pub ifindex: u32,
    pub ret: i32,
    pub old_state: u8,
    pub tcp_flags: u8,
    pub has_tcp: bool,
    pub dev: [u8; 16],
}

/// Appends a record as the ring buffer delivered it to `out`, padded to
/// `EVENT_SIZE` (device events come as their first `DEV_EVENT_SIZE`
/// bytes). Returns its type, or `None` (nothing appended) when `b` is no
/// record: a wrong length for its type, or an unknown type.
pub fn append_record(out: &mut Vec<u8>, b: &[u8]) -> Option<u8> {
    let t = *b.get(TYPE_AT)?;
    let whole = b.len() == EVENT_SIZE && (t as usize) < kind::RECORDS;
    let device = b.len() == DEV_EVENT_SIZE && matches!(t, kind::DEV_XMIT | kind::DEV_RECV);
    if !whole && !device {
        return None;
    }
    out.extend_from_slice(b);
    out.resize(out.len() + EVENT_SIZE - b.len(), 0);
    Some(t)
}

impl RawEvent {
    /// Reads a record; `None` when `b` is not one (wrong length or type).
    pub fn parse(b: &[u8]) -> Option<RawEvent> {
        if b.len() != EVENT_SIZE || b[TYPE_AT] as usize >= kind::RECORDS {
            return None;
        }
        let u16_at = |o: usize| u16::from_ne_bytes([b[o], b[o + 1]]);
        let u32_at = |o: usize| u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_ne_bytes(a)
        };
        let arr16 = |o: usize| {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[o..o + 16]);
            a
        };
        Some(RawEvent {
            ts_ns: u64_at(0),
            cookie: u64_at(8),
            netns: u32_at(16),
            kind: b[TYPE_AT],
            family: b[21],
            proto: b[22],
            state: b[23],
            laddr: arr16(24),
            raddr: arr16(40),
            lport: u16_at(56),
            rport: u16_at(58),
            bytes: u32_at(60),
            payload: u32_at(64),
            seq: u32_at(68),
            ack: u32_at(72),
            ifindex: u32_at(76),
            dev: arr16(80),
            tcp_flags: b[96],
            old_state: b[97],
            has_tcp: b[98] != 0,
            ret: u32_at(100) as i32,
            pid: u32_at(104),
            tid: u32_at(108),
            comm: arr16(112),
            tcp: TcpInfo {
                snd_cwnd: u32_at(128),
                ssthresh: u32_at(132),
                srtt_us: u32_at(136),
                rttvar_us: u32_at(140),
                snd_wnd: u32_at(144),
                rcv_wnd: u32_at(148),
                snd_nxt: u32_at(152),
                snd_una: u32_at(156),
                packets_out: u32_at(160),
                in_flight: u32_at(164),
                total_retrans: u32_at(168),
            },
        })
    }
}

/// A socket's place: namespace and 4-tuple from this host's side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Tuple {
    netns: u32,
    laddr: [u8; 16],
    lport: u16,
    raddr: [u8; 16],
    rport: u16,
}

/// Who last used a socket from a process.
#[derive(Clone, Copy, Debug)]
struct Owner {
    pid: u32,
    tid: u32,
    comm: [u8; 16],
}

/// Sockets remembered at most; past this the tables start over (a busy
/// host's closed sockets are forgotten on CLOSE already).
const MAX_SOCKETS: usize = 1 << 20;

/// Turns records into events, keeping per-socket context.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Wall clock minus the kernel's monotonic clock, ns.
    clock_offset_ns: i64,
    owners: FastMap<u64, Owner>,
    sockets: FastMap<Tuple, u64>,
    /// Last unwrapped sequence number per (cookie, transmit direction).
    seqs: FastMap<(u64, bool), u64>,
}

/// The direction an event's sequence number belongs to: `Some(true)` for
/// the data this host sends, `Some(false)` for the data it receives.
fn seq_direction(kind: u8) -> Option<bool> {
    match kind {
        kind::SEND | kind::DEV_XMIT | kind::RETRANSMIT | kind::SNAPSHOT | kind::SOCKOPS_RETRANS => {
            Some(true)
        }
        kind::RECV | kind::DEV_RECV | kind::TCP_PROBE => Some(false),
        _ => None,
    }
}

/// The 64-bit value nearest to `prev` whose low 32 bits are `raw`.
pub fn unwrap_seq(prev: u64, raw: u32) -> u64 {
    let base = (prev & !0xffff_ffff) | raw as u64;
    let mut best = base;
    for c in [base.wrapping_add(1 << 32), base.wrapping_sub(1 << 32)] {
        // Stay at or above 0: the first epoch has nothing below it.
        if c < (1u64 << 63) && c.abs_diff(prev) < best.abs_diff(prev) {
            best = c;
        }
    }
    best
}

impl Decoder {
    pub fn new(clock_offset_ns: i64) -> Self {
        Decoder {
            clock_offset_ns,
            ..Default::default()
        }
    }

    /// Sockets currently remembered.
    pub fn sockets(&self) -> usize {
        self.owners.len().max(self.sockets.len())
    }

    /// The event of one record.
    pub fn event(&mut self, e: &RawEvent) -> StackEvent {
        if self.owners.len() > MAX_SOCKETS || self.sockets.len() > MAX_SOCKETS {
            self.owners.clear();
            self.sockets.clear();
            self.seqs.clear();
        }
        let is_dev = matches!(e.kind, kind::DEV_XMIT | kind::DEV_RECV);
        let has_ports = e.proto == 6 || e.proto == 17;
        let tuple = Tuple {
            netns: e.netns,
            laddr: e.laddr,
            lport: e.lport,
            raddr: e.raddr,
            rport: e.rport,
        };
        // The socket: the kernel's cookie, or for a frame the kernel could
        // not tie to one, the socket with the frame's namespace and 4-tuple.
        let mut cookie = (e.cookie != 0).then_some(e.cookie);
        if cookie.is_none() && is_dev && has_ports {
            cookie = self.sockets.get(&tuple).copied();
        } else if let Some(c) = cookie
            && e.netns != 0
            && e.rport != 0
            // The events that see a socket's tuple first or change it;
            // the frequent ones (tcp_probe) need not touch the map.
            && matches!(e.kind, kind::SEND | kind::RECV | kind::STATE | kind::SNAPSHOT)
        {
            self.sockets.insert(tuple, c);
        }
        // The process: the caller of send/recv (and of connect), else the
        // socket's owner.
        let from_caller = matches!(e.kind, kind::SEND | kind::RECV)
            || (e.kind == kind::STATE && e.state == TCP_SYN_SENT);
        let owner = if from_caller {
            let o = Owner {
                pid: e.pid,
                tid: e.tid,
                comm: e.comm,
            };
            if let Some(c) = cookie {
                self.owners.insert(c, o);
            }
            Some(o)
        } else {
            cookie.and_then(|c| self.owners.get(&c).copied())
        };
        let seq = match (seq_direction(e.kind), cookie) {
            (Some(dir), Some(c))
                if e.proto == 6 && (e.has_tcp || is_dev || e.kind == kind::SOCKOPS_RETRANS) =>
            {
                let slot = self.seqs.entry((c, dir)).or_insert(e.seq as u64);
                *slot = unwrap_seq(*slot, e.seq);
                Some(*slot)
            }
            (Some(_), None) if e.proto == 6 && is_dev => Some(e.seq as u64),
            _ => None,
        };
        let known_ports = has_ports && (e.lport != 0 || e.rport != 0);
        let row = StackEvent {
            ts_ns: (e.ts_ns as i64).saturating_add(self.clock_offset_ns),
            event: e.kind,
            pid: owner.map(|o| o.pid),
            tid: owner.map(|o| o.tid),
            comm: owner.map(|o| o.comm),
            cookie,
            netns: e.netns,
            family: e.family,
            proto: e.proto,
            local_addr: (e.family != 0).then_some(e.laddr),
            local_port: known_ports.then_some(e.lport),
            remote_addr: (e.family != 0).then_some(e.raddr),
            remote_port: known_ports.then_some(e.rport),
            bytes: match e.kind {
                kind::SEND
                | kind::RECV
                | kind::DEV_XMIT
                | kind::DEV_RECV
                | kind::RETRANSMIT
                | kind::TCP_PROBE => Some(e.bytes),
                kind::SOCKOPS_RETRANS => Some(e.bytes),
                _ => None,
            },
            payload: is_dev.then_some(e.payload),
            seq,
            ack: match e.kind {
                kind::DEV_XMIT | kind::DEV_RECV if e.proto == 6 => Some(e.ack),
                kind::RETRANSMIT | kind::SNAPSHOT => Some(e.ack),
                _ => None,
            },
            state: (e.proto == 6 && !is_dev).then_some(e.state),
            old_state: matches!(e.kind, kind::STATE | kind::SOCKOPS_STATE).then_some(e.old_state),
            tcp: e.has_tcp.then_some(e.tcp),
            ifindex: is_dev.then_some(e.ifindex),
            dev: is_dev.then_some(e.dev),
            ret: match e.kind {
                kind::SEND
                | kind::RECV
                | kind::RETRANSMIT
                | kind::SOCKOPS_RETRANS
                | kind::SNAPSHOT => Some(e.ret),
                _ => None,
            },
            tcp_flags: (is_dev && e.proto == 6).then_some(e.tcp_flags),
        };
        // A closed socket's context is no longer needed: its cookie is
        // never reused, its 4-tuple may be.
        if e.kind == kind::STATE
            && e.state == TCP_CLOSE
            && let Some(c) = cookie
        {
            self.owners.remove(&c);
            self.seqs.remove(&(c, true));
            self.seqs.remove(&(c, false));
            if self.sockets.get(&tuple) == Some(&c) {
                self.sockets.remove(&tuple);
            }
        }
        row
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(kind: u8) -> Vec<u8> {
        let mut b = vec![0u8; EVENT_SIZE];
        b[TYPE_AT] = kind;
        b
    }

    #[test]
    fn the_layout_matches_event_h() {
        let mut b = raw(kind::SEND);
        b[0..8].copy_from_slice(&7u64.to_ne_bytes());
        b[8..16].copy_from_slice(&99u64.to_ne_bytes());
        b[16..20].copy_from_slice(&4026531840u32.to_ne_bytes());
        b[21] = 2;
        b[22] = 6;
        b[56..58].copy_from_slice(&80u16.to_ne_bytes());
        b[60..64].copy_from_slice(&1000u32.to_ne_bytes());
        b[76..80].copy_from_slice(&3u32.to_ne_bytes());
        b[80..84].copy_from_slice(b"eth0");
        b[96] = 0x12;
        b[98] = 1;
        b[100..104].copy_from_slice(&(-11i32).to_ne_bytes());
        b[104..108].copy_from_slice(&1234u32.to_ne_bytes());
        b[112..116].copy_from_slice(b"curl");
        b[128..132].copy_from_slice(&10u32.to_ne_bytes());
        b[168..172].copy_from_slice(&3u32.to_ne_bytes());
        let e = RawEvent::parse(&b).unwrap();
        assert_eq!(
            (e.ts_ns, e.cookie, e.netns, e.pid),
            (7, 99, 4026531840, 1234)
        );
        assert_eq!((e.family, e.proto, e.lport, e.bytes), (2, 6, 80, 1000));
        assert_eq!((e.ifindex, e.tcp_flags), (3, 0x12));
        assert_eq!(&e.comm[..5], b"curl\0");
        assert_eq!((e.tcp.snd_cwnd, e.tcp.total_retrans, e.ret), (10, 3, -11));
        assert!(e.has_tcp);
        assert_eq!(&e.dev[..4], b"eth0");
    }

    #[test]
    fn a_device_events_short_record_is_padded_whole() {
        let mut b = raw(kind::DEV_XMIT);
        b[60..64].copy_from_slice(&1514u32.to_ne_bytes());
        b[80..84].copy_from_slice(b"veth");
        b[100..104].copy_from_slice(&7i32.to_ne_bytes()); // last field of the short record
        let mut out = vec![0xaa; 3];
        assert_eq!(
            append_record(&mut out, &b[..DEV_EVENT_SIZE]),
            Some(kind::DEV_XMIT)
        );
        assert_eq!(out.len(), 3 + EVENT_SIZE);
        let e = RawEvent::parse(&out[3..]).unwrap();
        assert_eq!((e.bytes, e.ret, &e.dev[..4]), (1514, 7, &b"veth"[..]));
        assert_eq!((e.pid, e.comm, e.tcp.snd_cwnd), (0, [0; 16], 0));
        // Only device events may be short; nothing is appended otherwise.
        let send = raw(kind::SEND);
        assert_eq!(append_record(&mut out, &send[..DEV_EVENT_SIZE]), None);
        assert_eq!(append_record(&mut out, &b[..DEV_EVENT_SIZE - 8]), None);
        assert_eq!(append_record(&mut out, &[]), None);
        assert_eq!(out.len(), 3 + EVENT_SIZE);
        assert_eq!(append_record(&mut out, &send), Some(kind::SEND));
    }

    #[test]
    fn records_of_another_size_or_type_are_refused() {
        assert!(RawEvent::parse(&[0u8; EVENT_SIZE - 1]).is_none());
        assert!(RawEvent::parse(&raw(kind::COUNT as u8)).is_none());
        assert!(RawEvent::parse(&raw(kind::INTERVAL)).is_none());
        assert!(RawEvent::parse(&raw(kind::SNAPSHOT)).is_some());
    }

    #[test]
    fn sequence_numbers_unwrap_both_ways() {
        assert_eq!(unwrap_seq(10, 20), 20);
        assert_eq!(unwrap_seq(0xffff_fff0, 0x10), 0x1_0000_0010);
        assert_eq!(unwrap_seq(0x1_0000_0010, 0xffff_fff0), 0xffff_fff0);
        assert_eq!(unwrap_seq(5, 0xffff_fff0), 0xffff_fff0, "no epoch below 0");
    }

    fn ev(kind: u8, cookie: u64, seq: u32) -> RawEvent {
        RawEvent {
            kind,
            cookie,
            seq,
            netns: 1,
            family: 2,
            proto: 6,
            lport: 5001,
            rport: 40000,
            pid: 77,
            comm: *b"iperf3\0\0\0\0\0\0\0\0\0\0",
            has_tcp: kind != kind::DEV_RECV,
            ..Default::default()
        }
    }

    #[test]
    fn frames_join_their_socket_and_events_their_owner() {
        let mut d = Decoder::new(1_000);
        let send = d.event(&ev(kind::SEND, 5, 0xffff_ff00));
        assert_eq!(send.pid, Some(77));
        assert_eq!(send.ts_ns, 1_000);
        // A received frame has no cookie: joined by namespace and 4-tuple.
        let mut rx = ev(kind::DEV_RECV, 0, 0x10);
        rx.pid = 1; // whoever ran the softirq
        let r = d.event(&rx);
        assert_eq!(r.cookie, Some(5));
        assert_eq!(
            r.pid,
            Some(77),
            "the socket's owner, not the softirq's task"
        );
        // Transmit direction wraps past 2^32.
        let x = d.event(&ev(kind::DEV_XMIT, 5, 0x40));
        assert_eq!(x.seq, Some(0x1_0000_0040));
        // Another namespace with the same tuple is another socket.
        let mut other = ev(kind::DEV_RECV, 0, 1);
        other.netns = 2;
        assert_eq!(d.event(&other).cookie, None);
        // After CLOSE the tuple is forgotten.
        let mut close = ev(kind::STATE, 5, 0);
        close.state = TCP_CLOSE;
        d.event(&close);
        assert_eq!(d.event(&rx).cookie, None);
    }

    #[test]
    fn arbitrary_records_never_panic() {
        // The records come from our own programs, but a decoder that trusts
        // its input is a decoder that can crash: random bytes of every
        // length around the record size, and valid-looking records with
        // random fields, decode or are refused, without panicking.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut d = Decoder::new(i64::MAX - 5);
        for round in 0..50_000 {
            let len = if round % 10 == 0 {
                (next() % (2 * EVENT_SIZE as u64)) as usize
            } else {
                EVENT_SIZE
            };
            let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if len == EVENT_SIZE {
                b[TYPE_AT] %= kind::COUNT as u8 + 1;
                if round % 3 == 0 {
                    b[8..16].copy_from_slice(&(next() % 4).to_ne_bytes());
                }
            }
            if let Some(e) = RawEvent::parse(&b) {
                let r = d.event(&e);
                assert_eq!(r.event, e.kind);
            }
        }
    }
}
