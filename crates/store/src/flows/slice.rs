//! A slice of a flow: its key, its two sides' counts that add up, and the
//! sequence ranges that keep its retransmission count exact.

use wire::{Has, PacketFields, ParseError};

/// What identifies a slice's flow. Addresses and ports are ordered as the
/// flows analysis orders them: `a` is the smaller (address, port) end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FlowKey {
    /// 4 or 6; 0 for frames without an IP layer.
    pub ip_version: u8,
    /// For frames without an IP layer: their ethertype, if any.
    pub ethertype: Option<u16>,
    pub a_ip: [u8; 16],
    pub b_ip: [u8; 16],
    /// 0 when the frames carry no ports.
    pub a_port: u16,
    pub b_port: u16,
    pub proto: u8,
    /// The frames carry ports (a UDP flow to port 0 and the later
    /// fragments of a UDP datagram differ only here).
    pub has_ports: bool,
}

/// Six words, for the slicer's map (a derived hash feeds the addresses
/// to the hasher byte slice by byte slice).
impl std::hash::Hash for FlowKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let word = |a: &[u8; 16], at: usize| {
            u64::from_le_bytes(a[at..at + 8].try_into().unwrap_or_default())
        };
        h.write_u64(word(&self.a_ip, 0));
        h.write_u64(word(&self.a_ip, 8));
        h.write_u64(word(&self.b_ip, 0));
        h.write_u64(word(&self.b_ip, 8));
        h.write_u64((self.a_port as u64) << 48 | (self.b_port as u64) << 32 | self.proto as u64);
        h.write_u64(
            (self.ip_version as u64) << 32
                | self.ethertype.map_or(0, |e| 1 << 16 | e as u64)
                | (self.has_ports as u64) << 24,
        );
    }
}

impl FlowKey {
    pub fn is_ip(&self) -> bool {
        self.ip_version != 0
    }
}

/// One direction of a slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Side {
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    pub frames: u64,
    pub bytes: u64,
    pub cap_bytes: u64,
    pub payload: u64,
    /// OR of the TCP flags of its TCP segments.
    pub tcp_flags: Option<u16>,
    /// TCP segments with payload.
    pub data_segs: u64,
    /// Distinct sequence numbers among them (their ranges are the slice's).
    pub distinct_seqs: u64,
    /// First SYN alone, SYN+ACK, and ACK without SYN.
    pub syn_ns: Option<i64>,
    pub synack_ns: Option<i64>,
    pub ack_ns: Option<i64>,
    pub parse_errors: u64,
}

fn min_opt<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn max_opt<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Disjoint ranges of sequence numbers, ascending: where a direction's
/// data segments lie.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeqRanges(pub Vec<(u32, u32)>);

impl SeqRanges {
    /// Whether `r` overlaps one of the ranges.
    pub fn overlaps(&self, r: (u32, u32)) -> bool {
        let i = self.0.partition_point(|x| x.1 < r.0);
        self.0.get(i).is_some_and(|x| x.0 <= r.1)
    }

    /// Adds `r`, which must not overlap (see [`SeqRanges::overlaps`]).
    pub fn insert(&mut self, r: (u32, u32)) {
        let i = self.0.partition_point(|x| x.1 < r.0);
        self.0.insert(i, r);
    }

    /// Whether the ranges of all of `sets` are pairwise disjoint, so their
    /// distinct counts add up.
    pub fn disjoint<'a>(
        sets: impl IntoIterator<Item = &'a SeqRanges>,
        scratch: &mut Vec<(u32, u32)>,
    ) -> bool {
        scratch.clear();
        for s in sets {
            scratch.extend_from_slice(&s.0);
        }
        scratch.sort_unstable();
        scratch.windows(2).all(|w| w[0].1 < w[1].0)
    }
}

impl Side {
    /// Adds `o`'s counters and times (sequence ranges are kept beside, in
    /// [`FlowSlice`]).
    pub fn absorb(&mut self, o: &Side) {
        self.first_ns = min_opt(self.first_ns, o.first_ns);
        self.last_ns = max_opt(self.last_ns, o.last_ns);
        self.frames += o.frames;
        self.bytes += o.bytes;
        self.cap_bytes += o.cap_bytes;
        self.payload += o.payload;
        self.tcp_flags = match (self.tcp_flags, o.tcp_flags) {
            (Some(a), Some(b)) => Some(a | b),
            (a, None) => a,
            (None, b) => b,
        };
        self.data_segs += o.data_segs;
        self.distinct_seqs += o.distinct_seqs;
        self.syn_ns = min_opt(self.syn_ns, o.syn_ns);
        self.synack_ns = min_opt(self.synack_ns, o.synack_ns);
        self.ack_ns = min_opt(self.ack_ns, o.ack_ns);
        self.parse_errors += o.parse_errors;
    }

    /// Adds the counters of a stretch of frames (not their sequence
    /// numbers: see [`FlowSlicer`](super::FlowSlicer)) that share `head`'s
    /// [`Has`] bits and parse error, as the packet writer's stretches do:
    /// what those decide is decided once.
    #[inline]
    pub(super) fn count_stretch<'a>(
        &mut self,
        head: &PacketFields,
        rows: impl Iterator<Item = &'a PacketFields> + Clone,
    ) {
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        let (mut frames, mut bytes, mut cap, mut payload) = (0u64, 0u64, 0u64, 0u64);
        for r in rows.clone() {
            lo = lo.min(r.ts_ns);
            hi = hi.max(r.ts_ns);
            frames += 1;
            bytes += r.wire_len as u64;
            cap += r.cap_len as u64;
            payload += r.payload_len as u64;
        }
        if frames == 0 {
            return;
        }
        self.first_ns = min_opt(self.first_ns, Some(lo));
        self.last_ns = max_opt(self.last_ns, Some(hi));
        self.frames += frames;
        self.bytes += bytes;
        self.cap_bytes += cap;
        if head.has(Has::PAYLOAD) {
            self.payload += payload;
        }
        if head.has(Has::TCP) {
            let mut flags = self.tcp_flags.unwrap_or(0);
            for r in rows {
                let (f, ts) = (r.tcp_flags, r.ts_ns);
                flags |= f;
                let first = |slot: &mut Option<i64>| {
                    if slot.is_none_or(|t| ts < t) {
                        *slot = Some(ts);
                    }
                };
                match f & 0x12 {
                    0x02 => first(&mut self.syn_ns),
                    0x12 => first(&mut self.synack_ns),
                    0x10 => first(&mut self.ack_ns),
                    _ => {}
                }
            }
            self.tcp_flags = Some(flags);
        }
        if head.parse_error != ParseError::None {
            self.parse_errors += frames;
        }
    }

    /// Retransmitted segments: data segments less distinct sequence
    /// numbers (exact when the pieces added had disjoint ranges).
    pub fn retrans(&self) -> u64 {
        self.data_segs - self.distinct_seqs
    }
}

/// One row of the flows table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSlice {
    pub key: FlowKey,
    pub a: Side,
    pub b: Side,
    pub a_seqs: SeqRanges,
    pub b_seqs: SeqRanges,
}

impl FlowSlice {
    pub fn first_ns(&self) -> Option<i64> {
        min_opt(self.a.first_ns, self.b.first_ns)
    }
    pub fn last_ns(&self) -> Option<i64> {
        max_opt(self.a.last_ns, self.b.last_ns)
    }
}

/// The key of a record's flow and whether it travels from `a` to `b`.
#[inline]
pub fn flow_of(r: &PacketFields) -> (FlowKey, bool) {
    if !r.has(Has::IP) {
        let key = FlowKey {
            ip_version: 0,
            ethertype: r.has(Has::ETHERTYPE).then_some(r.ethertype),
            a_ip: [0; 16],
            b_ip: [0; 16],
            a_port: 0,
            b_port: 0,
            proto: 0,
            has_ports: false,
        };
        return (key, true);
    }
    let has_ports = r.has(Has::PORTS);
    let (sp, dp) = if has_ports {
        (r.src_port, r.dst_port)
    } else {
        (0, 0)
    };
    let from_a = r.ip_src < r.ip_dst || (r.ip_src == r.ip_dst && sp <= dp);
    let (a_ip, a_port, b_ip, b_port) = if from_a {
        (r.ip_src, sp, r.ip_dst, dp)
    } else {
        (r.ip_dst, dp, r.ip_src, sp)
    };
    let key = FlowKey {
        ip_version: r.ip_version,
        ethertype: None,
        a_ip,
        b_ip,
        a_port,
        b_port,
        proto: r.ip_proto,
        has_ports,
    };
    (key, from_a)
}
