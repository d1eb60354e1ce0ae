//! `--shard K/N`: a socket filter that keeps only the flows whose weir flow
//! hash falls in share K of N, so that N capture boxes on the same mirrored
//! traffic keep disjoint, complete shares with both directions of each
//! flow together.
//!
//! The program is the kernel-side twin of [`wire::decode`]'s flow hash
//! (`wire::flow`, version 1): the same headers followed (Ethernet, up to
//! four VLAN tags, IPv4, IPv6 and its extension headers, and the
//! encapsulations of `wire::tunnel`: MPLS (on a link or in UDP), PPPoE,
//! GRE with ERSPAN, WCCP or Cisco MetaData, VXLAN, VXLAN-GPE, NSH, GENEVE,
//! GTP-U, PIM Registers and IP in IP, up to [`MAX_ENCAPSULATIONS`] deep), the same
//! rules for fragments (no ports) and for frames that cannot be hashed
//! (hash 0), the same arithmetic. A tunnelled frame hashes as its innermost
//! IP packet, so both directions of a tenant flow share out together
//! whatever source ports their tunnel endpoints pick. The share of a frame
//! is `flow_hash % N`; frames without a flow hash (ARP, broken headers)
//! hash to 0 and land in share 0, so every frame has exactly one share. The
//! tests run the program on every frame of the shared captures
//! (BPF_PROG_TEST_RUN) and compare it with the decoder.
//!
//! Each encapsulated packet is parsed by the program running itself again
//! (a tail call through a one-slot program table), carrying where parsing
//! stands in the socket buffer's control block: see [`program`].
//!
//! The same program, returning the hash ([`Verdict::Hash`]), deals frames
//! to a live capture's workers (`PACKET_FANOUT_EBPF`), so each worker gets
//! whole flows by weir's own flow key, tunnels included.
//!
//! A tcpdump filter given with the shard is translated from classic BPF
//! ([`crate::classic`]) and runs after the shard test in the same program.

use std::fmt;
use std::str::FromStr;

use wire::LinkType;
use wire::decode::MAX_ENCAPSULATIONS;
use wire::flow::{M, SEED};
use wire::ip::proto;
use wire::link::ethertype;
use wire::tunnel::{MAX_GTPU_EXTENSIONS, MAX_MPLS_LABELS, udp_port};

use std::os::fd::RawFd;

use crate::bpf::{
    Alu, Asm, Cond, FP, HELPER_TAIL_CALL, Insn, Label, R0, R1, R2, R3, R6, R7, R8, R9, Size,
    SocketProgram,
};

/// The odd constant [`fanout_ring`] multiplies by (2^64 over the golden
/// ratio).
const FANOUT_MIX: u64 = 0x9e37_79b9_7f4a_7c15;

/// The ring of `rings` that a fanout group dealt by [`Verdict::Fanout`]
/// gives a frame of flow hash `flow_hash` (0 when it has none): the high
/// half of the hash times an odd constant, modulo the rings. Not the hash
/// itself modulo the rings: shares (`--shard K/N`) and Kafka partitions
/// take the hash modulo their count, and a worker would otherwise get only
/// the flows of some of them (with `--shard 0/2` and two workers, all of
/// them).
pub fn fanout_ring(flow_hash: u32, rings: u32) -> u32 {
    fanout_value(flow_hash) % rings.max(1)
}

/// What the [`Verdict::Fanout`] program returns for a frame of flow hash
/// `flow_hash`.
pub fn fanout_value(flow_hash: u32) -> u32 {
    ((flow_hash as u64).wrapping_mul(FANOUT_MIX) >> 32) as u32
}

/// Share `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// The most shares weir splits into.
    pub const MAX_COUNT: u32 = 4096;

    /// The share a frame of flow hash `flow_hash` (0 when it has none)
    /// belongs to.
    #[inline]
    pub fn of(flow_hash: u32, count: u32) -> u32 {
        flow_hash % count.max(1)
    }

    /// Whether a frame of `flow_hash` is in this share.
    #[inline]
    pub fn keeps(&self, flow_hash: u32) -> bool {
        Shard::of(flow_hash, self.count) == self.index
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || {
            format!(
                "--shard {s:?}: give K/N, share K (counted from 0) of N boxes, e.g. --shard 0/2 \
                 and --shard 1/2 on two boxes"
            )
        };
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if count == 0 || count > Shard::MAX_COUNT {
            return Err(format!("--shard {s}: N must be 1 to {}", Shard::MAX_COUNT));
        }
        if index >= count {
            return Err(format!(
                "--shard {s}: K counts from 0, so it must be below N ({count})"
            ));
        }
        Ok(Shard { index, count })
    }
}

/// What the program returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The flow hash itself (0 for frames without one), run as a socket
    /// filter would be: for tests and benchmarks through
    /// BPF_PROG_TEST_RUN.
    Hash,
    /// The flow hash remixed, run as a fanout group's program
    /// (`PACKET_FANOUT_EBPF`): the kernel takes the value modulo the
    /// group's rings, which makes the ring [`fanout_ring`]. The kernel runs it before a socket sees the frame: a frame
    /// sent out starts at its link header, but a received one at its
    /// network header (the link header already taken off, its ethertype
    /// in the socket buffer's protocol, VLAN tags the device took in its
    /// metadata), so the program starts there.
    Fanout,
    /// As [`Verdict::Fanout`], for a group of `rings` rings that a second
    /// set of rings joins and takes over from: `first` plus the ring
    /// [`fanout_ring`] of `rings` gives, so that a group of the first set
    /// then the second deals to the first set with `first` 0 and to the
    /// second with `first` equal to `rings`, each flow to the same worker.
    FanoutAmong { rings: u32, first: u32 },
    /// 0 (drop) for frames of other shares; frames of this share go on to
    /// the tcpdump filter if any, else are kept whole.
    Keep(Shard),
}

impl Verdict {
    /// A fanout group's program, run before a socket sees the frame.
    fn deals(self) -> bool {
        matches!(self, Verdict::Fanout | Verdict::FanoutAmong { .. })
    }
}

// Stack slots (8 bytes each) of the parsed fields.
const SRC_HI: i16 = -8;
const SRC_LO: i16 = -16;
const DST_HI: i16 = -24;
const DST_LO: i16 = -32;
const SPORT: i16 = -40;
const DPORT: i16 = -48;
const PROTO: i16 = -56;
/// Non-zero for any fragment (its ports are not hashed).
const FRAG: i16 = -64;
/// The latest IPv6 fragment header's offset.
const FRAG_OFF: i16 = -72;
/// Captured transport bytes.
const L4_LEN: i16 = -80;
/// IPv6 extension headers walked.
const ITER: i16 = -88;
const TMP: i16 = -96;
/// The flow hash of the packet around the one being parsed (0 at the
/// outermost): what a frame hashes to when an encapsulated packet is not
/// reached.
const OUTER_HASH: i16 = -104;
/// The transport length the IP header states (not cut to what was
/// captured).
const L4_WIRE: i16 = -120;
/// 0, computed so that the verifier does not know it (see [`forget_offset`]).
const ZERO: i16 = -112;
/// Encapsulations entered before this run.
const DEPTH: i16 = -152;
/// Where an IPv6 packet's payload starts.
const PAYLOAD_AT: i16 = -128;
/// GTP-U: where the header's length says the payload ends, and the type of
/// the next extension header.
const GTPU_END: i16 = -136;
const GTPU_NEXT: i16 = -144;

/// `struct __sk_buff`: the length, and the control block words that carry
/// a run's state to the next: the step (encapsulations entered << 8 |
/// [`Entry`]), where parsing is, where the buffer ends, the enclosing
/// packet's hash, and an ethertype.
const SKB_LEN: i16 = 0;
const SKB_PKT_TYPE: i16 = 4;
const SKB_PROTOCOL: i16 = 16;
/// `pkt_type` of a frame the host sends.
const PACKET_OUTGOING: i32 = 4;
const CB_STEP: i16 = 48;
const CB_AT: i16 = 52;
const CB_END: i16 = 56;
const CB_OUTER: i16 = 60;
const CB_TYPE: i16 = 64;

/// IPv4 addresses are hashed mapped into `::ffff:0:0/96`.
const V4_MAPPED_LOW: u64 = 0xffff_0000_0000;
const VLAN_TAGS: [u16; 3] = [ethertype::VLAN, ethertype::QINQ, ethertype::QINQ_OLD];
const MAX_VLAN_TAGS: i32 = 4;
const MAX_IPV6_HEADERS: i32 = 32;

/// The program for frames of `link`: the flow hash, then `verdict`, then
/// (for [`Verdict::Keep`]) the classic `filter` if one is given. `table`
/// is the program table it runs itself again through
/// ([`SocketProgram::load_self_calling`]; [`load`] does both).
///
/// Each run parses one packet: the frame's outermost one, or (when the
/// packet before it carried an encapsulation) the next one in, run by a
/// tail call with where parsing stands in the socket buffer's control
/// block. One program holding every level would be simpler, but the
/// verifier's work grows with the product of the levels' paths and
/// exceeds its limit at the second level; a tail call starts afresh.
pub fn program(
    link: LinkType,
    verdict: Verdict,
    filter: Option<&[libc::sock_filter]>,
    table: RawFd,
) -> Result<Vec<Insn>, String> {
    let mut a = Asm::new();
    let l = Labels {
        none: a.label(),
        outer: a.label(),
        decide: a.label(),
        eth: a.label(),
        eth_type: a.label(),
        ethertype: a.label(),
        ip: a.label(),
        v4: a.label(),
        v6: a.label(),
        transport: a.label(),
        no_ports: a.label(),
        hashed: a.label(),
        mpls: a.label(),
        next_protocol: a.label(),
    };
    let next = Next {
        eth: a.label(),
        ethertype: a.label(),
        ip: a.label(),
        v4: a.label(),
        v6: a.label(),
    };
    let start = a.label();
    // R6: the socket buffer; R7: where parsing is; R8: where the buffer
    // being parsed ends (the frame's length, then an inner packet's end).
    a.alu64_reg(Alu::Mov, R6, R1);
    for slot in [FRAG, FRAG_OFF, SPORT, DPORT] {
        a.store_imm(Size::DW, FP, slot, 0);
    }
    a.load(Size::W, R1, R6, SKB_LEN);
    a.load(Size::W, R2, R6, SKB_LEN);
    a.alu64_reg(Alu::Sub, R1, R2);
    a.store(Size::DW, FP, ZERO, R1);
    // The control block is zero on the first run (the kernel clears it for
    // a program that uses it).
    a.load(Size::W, R1, R6, CB_STEP);
    a.alu64_reg(Alu::Mov, R2, R1);
    a.alu64_imm(Alu::Rsh, R2, 8);
    a.store(Size::DW, FP, DEPTH, R2);
    a.alu64_imm(Alu::And, R1, 0xff);
    a.jump_imm(Cond::Eq, R1, Entry::Start as i32, start);
    a.store(Size::DW, FP, TMP, R1);
    a.load(Size::W, R7, R6, CB_AT);
    a.load(Size::W, R8, R6, CB_END);
    a.load(Size::W, R1, R6, CB_OUTER);
    a.store(Size::DW, FP, OUTER_HASH, R1);
    a.load(Size::DW, R1, FP, TMP);
    a.load(Size::W, R0, R6, CB_TYPE);
    a.jump_imm(Cond::Eq, R1, Entry::Eth as i32, l.eth);
    a.jump_imm(Cond::Eq, R1, Entry::Ethertype as i32, l.ethertype);
    a.jump_imm(Cond::Eq, R1, Entry::Ip as i32, l.ip);
    a.jump_imm(Cond::Eq, R1, Entry::V4 as i32, l.v4);
    a.jump_imm(Cond::Eq, R1, Entry::V6 as i32, l.v6);
    a.jump(l.none);

    a.place(start);
    a.store_imm(Size::DW, FP, OUTER_HASH, 0);
    a.alu64_imm(Alu::Mov, R7, 0);
    a.load(Size::W, R8, R6, SKB_LEN);
    match link {
        LinkType::ETHERNET if verdict.deals() => {
            a.load(Size::W, R1, R6, SKB_PKT_TYPE);
            a.jump_imm(Cond::Eq, R1, PACKET_OUTGOING, l.eth);
            a.load(Size::W, R0, R6, SKB_PROTOCOL);
            a.be16(R0);
            a.jump(l.eth_type);
        }
        LinkType::ETHERNET => a.jump(l.eth),
        LinkType::RAW => {
            a.jump_imm(Cond::Eq, R8, 0, l.none);
            a.packet_abs(Size::B, 0);
            a.alu64_imm(Alu::Rsh, R0, 4);
            a.jump_imm(Cond::Eq, R0, 4, l.v4);
            a.jump_imm(Cond::Eq, R0, 6, l.v6);
            a.jump(l.none);
        }
        other => {
            return Err(format!(
                "flow-hash sharding reads Ethernet or raw IP frames, not link type {}",
                other.0
            ));
        }
    }
    ethernet(&mut a, &l);
    below_ip(&mut a, &l, &next);
    next_protocol(&mut a, &l, &next);
    ip_by_version(&mut a, &l);
    ipv4(&mut a, &l);
    ipv6(&mut a, &l);
    transport(&mut a, &l);
    over_ip(&mut a, &l, &next);
    for (label, entry) in [
        (next.eth, Entry::Eth),
        (next.ethertype, Entry::Ethertype),
        (next.ip, Entry::Ip),
        (next.v4, Entry::V4),
        (next.v6, Entry::V6),
    ] {
        run_again(&mut a, &l, label, entry, table);
    }

    a.place(l.outer);
    a.load(Size::DW, R0, FP, OUTER_HASH);
    a.jump(l.decide);
    a.place(l.none);
    a.alu64_imm(Alu::Mov, R0, 0);
    a.place(l.decide);
    match verdict {
        Verdict::Hash => a.exit(),
        Verdict::Fanout => {
            // The ring is a remix of the hash modulo the rings (see
            // [`fanout_ring`]).
            a.load_u64(R1, FANOUT_MIX);
            a.alu64_reg(Alu::Mul, R0, R1);
            a.alu64_imm(Alu::Rsh, R0, 32);
            a.exit();
        }
        Verdict::FanoutAmong { rings, first } => {
            a.load_u64(R1, FANOUT_MIX);
            a.alu64_reg(Alu::Mul, R0, R1);
            a.alu64_imm(Alu::Rsh, R0, 32);
            a.alu64_imm(Alu::Mod, R0, rings.max(1) as i32);
            a.alu64_imm(Alu::Add, R0, first as i32);
            a.exit();
        }
        Verdict::Keep(shard) => {
            let keep = a.label();
            a.alu64_reg(Alu::Mov, R1, R0);
            a.alu64_imm(Alu::Mod, R1, shard.count as i32);
            a.jump_imm(Cond::Eq, R1, shard.index as i32, keep);
            a.ret(0);
            a.place(keep);
            match filter {
                Some(f) if !f.is_empty() => crate::classic::append(&mut a, f)?,
                _ => a.ret(u32::MAX),
            }
        }
    }
    a.finish()
}

/// [`program`] loaded, in its own table.
pub fn load(
    link: LinkType,
    verdict: Verdict,
    filter: Option<&[libc::sock_filter]>,
    name: &str,
) -> Result<SocketProgram, String> {
    SocketProgram::load_self_calling(|table| program(link, verdict, filter, table), name)
        .map_err(|e| e.to_string())
}

/// Where a run starts parsing (the control block's step, low byte).
#[derive(Clone, Copy)]
enum Entry {
    /// The frame's first byte: the first run.
    Start = 0,
    Eth = 1,
    /// A payload of the ethertype in the control block.
    Ethertype = 2,
    Ip = 3,
    V4 = 4,
    V6 = 5,
}

/// The entry points of the run after this one.
struct Next {
    eth: Label,
    ethertype: Label,
    ip: Label,
    v4: Label,
    v6: Label,
}

/// At `label`: one more encapsulation entered; the next run parses what
/// it carries from `entry` on, unless [`MAX_ENCAPSULATIONS`] are already
/// open (the decoder stops there): then, as when the tail call fails,
/// this packet's hash stands.
fn run_again(a: &mut Asm, l: &Labels, label: Label, entry: Entry, table: RawFd) {
    a.place(label);
    if let Entry::Ethertype = entry {
        a.store(Size::W, R6, CB_TYPE, R0);
    }
    a.load(Size::DW, R1, FP, DEPTH);
    a.jump_imm(Cond::Ge, R1, MAX_ENCAPSULATIONS as i32, l.outer);
    a.alu64_imm(Alu::Add, R1, 1);
    a.alu64_imm(Alu::Lsh, R1, 8);
    a.alu64_imm(Alu::Or, R1, entry as i32);
    a.store(Size::W, R6, CB_STEP, R1);
    a.store(Size::W, R6, CB_AT, R7);
    a.store(Size::W, R6, CB_END, R8);
    a.load(Size::DW, R1, FP, OUTER_HASH);
    a.store(Size::W, R6, CB_OUTER, R1);
    a.alu64_reg(Alu::Mov, R1, R6);
    a.load_map(R2, table);
    a.alu64_imm(Alu::Mov, R3, 0);
    a.call(HELPER_TAIL_CALL);
    a.jump(l.outer);
}

/// The entry points of one run's parsers (each expects R7 at the header
/// it names and R8 at the end of the buffer around it), and its exits.
struct Labels {
    /// No flow hash: R0 = 0, then the verdict.
    none: Label,
    /// The packet inside was not reached: the enclosing packet's hash (0
    /// when there is none), then the verdict.
    outer: Label,
    /// R0 = the flow hash.
    decide: Label,
    /// An Ethernet header (VLAN tags follow).
    eth: Label,
    /// What follows an Ethernet header's addresses: R0 its ethertype, R7
    /// past it (VLAN tags follow).
    eth_type: Label,
    /// A payload of the ethertype in R0.
    ethertype: Label,
    /// An IP header of either version, by its version nibble (MPLS, GTP-U,
    /// WCCP and PIM say no more).
    ip: Label,
    v4: Label,
    v6: Label,
    /// The transport header; PROTO, FRAG, L4_LEN, L4_WIRE set, R8 at the
    /// end of its captured bytes.
    transport: Label,
    /// Hash with both ports 0.
    no_ports: Label,
    /// R0 = this IP packet's flow hash: kept, then any encapsulation it
    /// carries is followed.
    hashed: Label,
    /// An MPLS label stack (on a link, or in UDP).
    mpls: Label,
    /// R0 = a VXLAN-GPE or NSH next-protocol number, R7 at the payload.
    next_protocol: Label,
}

/// Adds [`ZERO`] to R7: the verifier no longer knows where parsing is.
/// Where the offset is a constant (a frame without VLAN tags or IPv6
/// extension headers), the verifier decides bounds checks by it, and then
/// has to tell states apart by every offset each header layout gives: the
/// states multiply past its limit. Unknown, they prune.
fn forget_offset(a: &mut Asm) {
    a.load(Size::DW, R1, FP, ZERO);
    a.alu64_reg(Alu::Add, R7, R1);
}

/// Jumps to `to` unless `R7 + need <= R8` (that many bytes left).
fn need(a: &mut Asm, at: u8, need: i32, to: Label) {
    a.alu64_reg(Alu::Mov, R1, at);
    a.alu64_imm(Alu::Add, R1, need);
    a.jump_reg(Cond::Gt, R1, R8, to);
}

/// Jumps to `to` unless `R7 + R9 <= R8`.
fn need_r9(a: &mut Asm, to: Label) {
    a.alu64_reg(Alu::Mov, R1, R7);
    a.alu64_reg(Alu::Add, R1, R9);
    a.jump_reg(Cond::Gt, R1, R8, to);
}

/// `slot = min(R8 - R7, slot)`: what was captured of a length a header
/// states.
fn clamp_to_captured(a: &mut Asm, slot: i16) {
    let done = a.label();
    a.alu64_reg(Alu::Mov, R2, R8);
    a.alu64_reg(Alu::Sub, R2, R7);
    a.load(Size::DW, R3, FP, slot);
    a.jump_reg(Cond::Le, R2, R3, done);
    a.alu64_reg(Alu::Mov, R2, R3);
    a.place(done);
    a.store(Size::DW, FP, slot, R2);
}

/// An Ethernet header and its VLAN tags, outermost or inside a tunnel.
fn ethernet(a: &mut Asm, l: &Labels) {
    let (tags, tag) = (a.label(), a.label());
    a.place(l.eth);
    forget_offset(a);
    need(a, R7, 14, l.outer);
    a.packet_ind(Size::H, R7, 12);
    a.alu64_imm(Alu::Add, R7, 14);
    a.place(l.eth_type);
    forget_offset(a);
    a.alu64_imm(Alu::Mov, R9, 0);
    a.place(tags);
    for t in VLAN_TAGS {
        a.jump_imm(Cond::Eq, R0, t as i32, tag);
    }
    a.jump(l.ethertype);
    a.place(tag);
    a.jump_imm(Cond::Eq, R9, MAX_VLAN_TAGS, l.outer);
    need(a, R7, 4, l.outer);
    a.packet_ind(Size::H, R7, 2);
    a.alu64_imm(Alu::Add, R7, 4);
    a.alu64_imm(Alu::Add, R9, 1);
    a.jump(tags);
}

/// What an ethertype leads to, and the encapsulations below IP: MPLS label
/// stacks, PPPoE sessions and NSH, whose packet is the next level's.
fn below_ip(a: &mut Asm, l: &Labels, next: &Next) {
    a.place(l.ethertype);
    a.jump_imm(Cond::Eq, R0, ethertype::IPV4 as i32, l.v4);
    a.jump_imm(Cond::Eq, R0, ethertype::IPV6 as i32, l.v6);
    let (mpls_label, pppoe, at_least_8, within, nsh) =
        (a.label(), a.label(), a.label(), a.label(), a.label());
    a.jump_imm(Cond::Eq, R0, ethertype::MPLS as i32, l.mpls);
    a.jump_imm(Cond::Eq, R0, ethertype::MPLS_MULTICAST as i32, l.mpls);
    a.jump_imm(Cond::Eq, R0, ethertype::PPPOE_SESSION as i32, pppoe);
    a.jump_imm(Cond::Eq, R0, ethertype::NSH as i32, nsh);
    a.jump(l.outer);

    // NSH version 0: its length (in 4-byte words, at least the fixed 2)
    // covers the context headers; then a payload of its next protocol.
    a.place(nsh);
    need(a, R7, 8, l.outer);
    a.packet_ind(Size::B, R7, 0);
    a.jump_imm(Cond::Set, R0, 0xc0, l.outer);
    a.packet_ind(Size::B, R7, 1);
    a.alu64_imm(Alu::And, R0, 0x3f);
    a.jump_imm(Cond::Lt, R0, 2, l.outer);
    a.alu64_imm(Alu::Lsh, R0, 2);
    a.alu64_reg(Alu::Mov, R9, R0);
    need_r9(a, l.outer);
    a.packet_ind(Size::B, R7, 3);
    a.alu64_reg(Alu::Add, R7, R9);
    a.jump(l.next_protocol);

    // Label stack entries down to the one with the bottom-of-stack bit;
    // then IP by its version nibble.
    a.place(l.mpls);
    a.alu64_imm(Alu::Mov, R9, 0);
    a.place(mpls_label);
    a.jump_imm(Cond::Eq, R9, MAX_MPLS_LABELS as i32, l.outer);
    need(a, R7, 4, l.outer);
    a.packet_ind(Size::B, R7, 2);
    a.alu64_imm(Alu::Add, R7, 4);
    a.alu64_imm(Alu::Add, R9, 1);
    a.jump_imm(Cond::Set, R0, 0x01, next.ip);
    a.jump(mpls_label);

    // Version/type 0x11 and code 0; the length (counting the PPP protocol
    // field) ends the payload, kept between the header and the buffer's
    // end.
    a.place(pppoe);
    need(a, R7, 8, l.outer);
    a.packet_ind(Size::B, R7, 0);
    a.jump_imm(Cond::Ne, R0, 0x11, l.outer);
    a.packet_ind(Size::B, R7, 1);
    a.jump_imm(Cond::Ne, R0, 0, l.outer);
    a.packet_ind(Size::H, R7, 4);
    a.alu64_imm(Alu::Add, R0, 6);
    a.jump_imm(Cond::Ge, R0, 8, at_least_8);
    a.alu64_imm(Alu::Mov, R0, 8);
    a.place(at_least_8);
    a.alu64_reg(Alu::Mov, R1, R8);
    a.alu64_reg(Alu::Sub, R1, R7);
    a.jump_reg(Cond::Le, R0, R1, within);
    a.alu64_reg(Alu::Mov, R0, R1);
    a.place(within);
    a.alu64_reg(Alu::Add, R0, R7);
    a.alu64_reg(Alu::Mov, R8, R0);
    a.packet_ind(Size::H, R7, 6);
    a.alu64_imm(Alu::Add, R7, 8);
    a.jump_imm(Cond::Eq, R0, 0x0021, next.v4);
    a.jump_imm(Cond::Eq, R0, 0x0057, next.v6);
    a.jump(l.outer);
}

/// What a VXLAN-GPE or NSH next-protocol number (R0) leads to: 1 IPv4,
/// 2 IPv6, 3 Ethernet, 4 NSH, 5 MPLS, each the next level's.
fn next_protocol(a: &mut Asm, l: &Labels, next: &Next) {
    let (nsh, mpls) = (a.label(), a.label());
    a.place(l.next_protocol);
    a.jump_imm(Cond::Eq, R0, 1, next.v4);
    a.jump_imm(Cond::Eq, R0, 2, next.v6);
    a.jump_imm(Cond::Eq, R0, 3, next.eth);
    a.jump_imm(Cond::Eq, R0, 4, nsh);
    a.jump_imm(Cond::Eq, R0, 5, mpls);
    a.jump(l.outer);
    a.place(nsh);
    a.alu64_imm(Alu::Mov, R0, ethertype::NSH as i32);
    a.jump(next.ethertype);
    a.place(mpls);
    a.alu64_imm(Alu::Mov, R0, ethertype::MPLS as i32);
    a.jump(next.ethertype);
}

/// An IP header known by its version nibble only (after MPLS, GTP-U,
/// WCCP and PIM).
fn ip_by_version(a: &mut Asm, l: &Labels) {
    a.place(l.ip);
    forget_offset(a);
    need(a, R7, 1, l.outer);
    a.packet_ind(Size::B, R7, 0);
    a.alu64_imm(Alu::Rsh, R0, 4);
    a.jump_imm(Cond::Eq, R0, 4, l.v4);
    a.jump_imm(Cond::Eq, R0, 6, l.v6);
    a.jump(l.outer);
}

/// An IPv4 address at `R7 + off` into `slot`, mapped.
fn v4_addr(a: &mut Asm, off: i32, hi: i16, lo: i16) {
    a.packet_ind(Size::W, R7, off);
    a.load_u64(R1, V4_MAPPED_LOW);
    a.alu64_reg(Alu::Or, R1, R0);
    a.store(Size::DW, FP, lo, R1);
    a.store_imm(Size::DW, FP, hi, 0);
}

fn ipv4(a: &mut Asm, l: &Labels) {
    let have_total = a.label();
    a.place(l.v4);
    forget_offset(a);
    // Too short for a header, or not version 4: the packet around it.
    need(a, R7, 20, l.outer);
    a.packet_ind(Size::B, R7, 0);
    a.alu64_reg(Alu::Mov, R1, R0);
    a.alu64_imm(Alu::Rsh, R1, 4);
    a.jump_imm(Cond::Ne, R1, 4, l.outer);
    a.alu64_imm(Alu::And, R0, 0x0f);
    a.alu64_imm(Alu::Lsh, R0, 2);
    a.alu64_reg(Alu::Mov, R9, R0); // header length
    a.packet_ind(Size::H, R7, 2);
    // A zero total length (TSO on the sending host): the buffer's.
    a.jump_imm(Cond::Ne, R0, 0, have_total);
    a.alu64_reg(Alu::Mov, R0, R8);
    a.alu64_reg(Alu::Sub, R0, R7);
    a.place(have_total);
    a.jump_imm(Cond::Lt, R9, 20, l.none);
    a.jump_reg(Cond::Lt, R0, R9, l.none);
    a.alu64_reg(Alu::Sub, R0, R9);
    a.store(Size::DW, FP, L4_LEN, R0);
    a.store(Size::DW, FP, L4_WIRE, R0);
    v4_addr(a, 12, SRC_HI, SRC_LO);
    v4_addr(a, 16, DST_HI, DST_LO);
    a.packet_ind(Size::B, R7, 9);
    a.store(Size::DW, FP, PROTO, R0);
    a.packet_ind(Size::H, R7, 6);
    a.alu64_reg(Alu::Mov, R1, R0);
    a.alu64_imm(Alu::And, R1, 0x3fff); // more fragments, or an offset
    a.store(Size::DW, FP, FRAG, R1);
    a.alu64_imm(Alu::And, R0, 0x1fff);
    a.jump_imm(Cond::Ne, R0, 0, l.no_ports);
    // The whole header must be there before the transport is read.
    a.alu64_reg(Alu::Add, R7, R9);
    a.jump_reg(Cond::Gt, R7, R8, l.none);
    clamp_to_captured(a, L4_LEN);
    a.load(Size::DW, R8, FP, L4_LEN);
    a.alu64_reg(Alu::Add, R8, R7);
    a.jump(l.transport);
}

fn ipv6(a: &mut Asm, l: &Labels) {
    let (chain, opt, ah, frag, advance, walked, first, wire_done) = (
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
    );
    a.place(l.v6);
    forget_offset(a);
    need(a, R7, 40, l.outer);
    a.packet_ind(Size::B, R7, 0);
    a.alu64_imm(Alu::Rsh, R0, 4);
    a.jump_imm(Cond::Ne, R0, 6, l.outer);
    a.store_imm(Size::DW, FP, FRAG, 0);
    a.store_imm(Size::DW, FP, FRAG_OFF, 0);
    a.packet_ind(Size::H, R7, 4);
    a.store(Size::DW, FP, L4_LEN, R0);
    a.store(Size::DW, FP, L4_WIRE, R0);
    for (slot, off) in [(SRC_HI, 8), (SRC_LO, 16), (DST_HI, 24), (DST_LO, 32)] {
        a.packet_ind(Size::W, R7, off);
        a.alu64_imm(Alu::Lsh, R0, 32);
        a.store(Size::DW, FP, slot, R0);
        a.packet_ind(Size::W, R7, off + 4);
        a.load(Size::DW, R1, FP, slot);
        a.alu64_reg(Alu::Or, R1, R0);
        a.store(Size::DW, FP, slot, R1);
    }
    a.packet_ind(Size::B, R7, 6);
    a.store(Size::DW, FP, PROTO, R0);
    a.alu64_imm(Alu::Add, R7, 40);
    a.store(Size::DW, FP, PAYLOAD_AT, R7);
    // The payload is what the payload length states, as far as captured;
    // R9 = where it ends, R7 = the header being walked.
    clamp_to_captured(a, L4_LEN);
    a.load(Size::DW, R9, FP, L4_LEN);
    a.alu64_reg(Alu::Add, R9, R7);
    a.store_imm(Size::DW, FP, ITER, 0);

    a.place(chain);
    a.load(Size::DW, R1, FP, ITER);
    a.jump_imm(Cond::Eq, R1, MAX_IPV6_HEADERS, l.none);
    a.alu64_imm(Alu::Add, R1, 1);
    a.store(Size::DW, FP, ITER, R1);
    a.alu64_reg(Alu::Mov, R2, R9);
    a.alu64_reg(Alu::Sub, R2, R7); // bytes left
    a.load(Size::DW, R3, FP, PROTO);
    for p in [proto::HOPOPT, proto::IPV6_ROUTING, proto::IPV6_DSTOPTS] {
        a.jump_imm(Cond::Eq, R3, p as i32, opt);
    }
    a.jump_imm(Cond::Eq, R3, proto::AH as i32, ah);
    a.jump_imm(Cond::Eq, R3, proto::IPV6_FRAGMENT as i32, frag);
    a.jump(walked);

    // Options headers count 8-byte units past the first; AH 4-byte units
    // past the first two.
    for (label, add, shift) in [(opt, 1, 3), (ah, 2, 2)] {
        a.place(label);
        a.jump_imm(Cond::Lt, R2, 2, l.none);
        a.packet_ind(Size::B, R7, 1);
        a.alu64_imm(Alu::Add, R0, add);
        a.alu64_imm(Alu::Lsh, R0, shift);
        a.jump(advance);
    }

    a.place(frag);
    a.jump_imm(Cond::Lt, R2, 8, l.none);
    a.packet_ind(Size::H, R7, 2);
    a.alu64_imm(Alu::Rsh, R0, 3);
    a.store(Size::DW, FP, FRAG_OFF, R0);
    a.store_imm(Size::DW, FP, FRAG, 1);
    a.alu64_imm(Alu::Mov, R0, 8);

    // R0 = this header's length.
    a.place(advance);
    a.alu64_reg(Alu::Mov, R2, R9);
    a.alu64_reg(Alu::Sub, R2, R7);
    a.jump_reg(Cond::Lt, R2, R0, l.none);
    a.store(Size::DW, FP, TMP, R0);
    a.packet_ind(Size::B, R7, 0);
    a.store(Size::DW, FP, PROTO, R0);
    a.load(Size::DW, R1, FP, TMP);
    a.alu64_reg(Alu::Add, R7, R1);
    // After a fragment header with an offset, the rest is data.
    a.load(Size::DW, R1, FP, FRAG_OFF);
    a.jump_imm(Cond::Eq, R1, 0, chain);
    a.load(Size::DW, R1, FP, FRAG);
    a.jump_imm(Cond::Eq, R1, 0, chain);

    a.place(walked);
    a.load(Size::DW, R1, FP, FRAG);
    a.jump_imm(Cond::Eq, R1, 0, first);
    a.load(Size::DW, R1, FP, FRAG_OFF);
    a.jump_imm(Cond::Ne, R1, 0, l.no_ports);
    a.place(first);
    a.alu64_reg(Alu::Mov, R2, R9);
    a.alu64_reg(Alu::Sub, R2, R7);
    a.store(Size::DW, FP, L4_LEN, R2);
    a.alu64_reg(Alu::Mov, R8, R9);
    // The stated transport length: the payload length less the extension
    // headers, 0 if they overran it.
    a.alu64_reg(Alu::Mov, R1, R7);
    a.load(Size::DW, R2, FP, PAYLOAD_AT);
    a.alu64_reg(Alu::Sub, R1, R2);
    a.load(Size::DW, R2, FP, L4_WIRE);
    a.alu64_imm(Alu::Mov, R3, 0);
    a.jump_reg(Cond::Lt, R2, R1, wire_done);
    a.alu64_reg(Alu::Mov, R3, R2);
    a.alu64_reg(Alu::Sub, R3, R1);
    a.place(wire_done);
    a.store(Size::DW, FP, L4_WIRE, R3);
    a.jump(l.transport);
}

/// Ports for TCP, UDP and SCTP when not a fragment; then the hash, in
/// both endpoint orders.
fn transport(a: &mut Asm, l: &Labels) {
    let (ports, hash, forward, reverse) = (a.label(), a.label(), a.label(), a.label());
    a.place(l.transport);
    a.load(Size::DW, R1, FP, FRAG);
    a.jump_imm(Cond::Ne, R1, 0, l.no_ports);
    a.load(Size::DW, R1, FP, PROTO);
    for p in [proto::TCP, proto::UDP, proto::SCTP] {
        a.jump_imm(Cond::Eq, R1, p as i32, ports);
    }
    a.jump(l.no_ports);

    a.place(ports);
    a.load(Size::DW, R1, FP, L4_LEN);
    // Ports cut off: a portless hash would put the frame in another flow.
    a.jump_imm(Cond::Lt, R1, 4, l.none);
    a.packet_ind(Size::H, R7, 0);
    a.store(Size::DW, FP, SPORT, R0);
    a.packet_ind(Size::H, R7, 2);
    a.store(Size::DW, FP, DPORT, R0);
    a.jump(hash);

    a.place(l.no_ports);
    a.store_imm(Size::DW, FP, SPORT, 0);
    a.store_imm(Size::DW, FP, DPORT, 0);

    // (src, sport) <= (dst, dport), addresses first: src is the low end.
    a.place(hash);
    for (s, d) in [(SRC_HI, DST_HI), (SRC_LO, DST_LO)] {
        a.load(Size::DW, R1, FP, s);
        a.load(Size::DW, R2, FP, d);
        a.jump_reg(Cond::Lt, R1, R2, forward);
        a.jump_reg(Cond::Gt, R1, R2, reverse);
    }
    a.load(Size::DW, R1, FP, SPORT);
    a.load(Size::DW, R2, FP, DPORT);
    a.jump_reg(Cond::Le, R1, R2, forward);
    a.jump(reverse);

    a.place(forward);
    hash_words(a, [SRC_HI, SRC_LO, DST_HI, DST_LO], SPORT, DPORT, l.hashed);
    a.place(reverse);
    hash_words(a, [DST_HI, DST_LO, SRC_HI, SRC_LO], DPORT, SPORT, l.hashed);
}

/// After an IP packet's hash: the encapsulation it carries, if any (IP in
/// IP, GRE and what it carries, PIM Registers; VXLAN, VXLAN-GPE, GENEVE,
/// GTP-U and MPLS by UDP destination port), whose inner packet's hash (the
/// next level's) replaces it; a fragment's payload is not looked into.
fn over_ip(a: &mut Asm, l: &Labels, next: &Next) {
    a.place(l.hashed);
    let (udp, vxlan, geneve, gtpu, gre) = (a.label(), a.label(), a.label(), a.label(), a.label());
    let (gpe, pim) = (a.label(), a.label());
    a.store(Size::DW, FP, OUTER_HASH, R0);
    a.load(Size::DW, R1, FP, FRAG);
    a.jump_imm(Cond::Ne, R1, 0, l.decide);
    a.load(Size::DW, R1, FP, PROTO);
    a.jump_imm(Cond::Eq, R1, proto::UDP as i32, udp);
    a.jump_imm(Cond::Eq, R1, proto::GRE as i32, gre);
    a.jump_imm(Cond::Eq, R1, proto::IPIP as i32, next.v4);
    a.jump_imm(Cond::Eq, R1, proto::IPV6_ENCAP as i32, next.v6);
    a.jump_imm(Cond::Eq, R1, proto::PIM as i32, pim);
    a.jump(l.decide);

    // A whole UDP header whose length is at least its own and at most the
    // IP header's; the payload ends at that length, as far as captured.
    let cut = a.label();
    a.place(udp);
    a.load(Size::DW, R1, FP, L4_LEN);
    a.jump_imm(Cond::Lt, R1, 8, l.outer);
    a.packet_ind(Size::H, R7, 4);
    a.jump_imm(Cond::Lt, R0, 8, l.outer);
    a.load(Size::DW, R1, FP, L4_WIRE);
    a.jump_reg(Cond::Gt, R0, R1, l.outer);
    a.load(Size::DW, R1, FP, L4_LEN);
    a.jump_reg(Cond::Le, R0, R1, cut);
    a.alu64_reg(Alu::Mov, R0, R1);
    a.place(cut);
    a.alu64_reg(Alu::Add, R0, R7);
    a.alu64_reg(Alu::Mov, R8, R0);
    a.alu64_imm(Alu::Add, R7, 8);
    a.load(Size::DW, R1, FP, DPORT);
    a.jump_imm(Cond::Eq, R1, udp_port::VXLAN as i32, vxlan);
    a.jump_imm(Cond::Eq, R1, udp_port::GENEVE as i32, geneve);
    a.jump_imm(Cond::Eq, R1, udp_port::GTPU as i32, gtpu);
    a.jump_imm(Cond::Eq, R1, udp_port::VXLAN_GPE as i32, gpe);
    a.jump_imm(Cond::Eq, R1, udp_port::MPLS as i32, l.mpls);
    a.jump(l.outer);

    // VXLAN-GPE version 0 with its P flag: 8 bytes, then a payload of the
    // next protocol in the fourth.
    a.place(gpe);
    need(a, R7, 8, l.outer);
    a.packet_ind(Size::B, R7, 0);
    a.alu64_imm(Alu::And, R0, 0x34);
    a.jump_imm(Cond::Ne, R0, 0x04, l.outer);
    a.packet_ind(Size::B, R7, 3);
    a.alu64_imm(Alu::Add, R7, 8);
    a.jump(l.next_protocol);

    // A PIM version 2 Register: 8 bytes, then IP by its version nibble.
    a.place(pim);
    need(a, R7, 8, l.outer);
    a.packet_ind(Size::B, R7, 0);
    a.jump_imm(Cond::Ne, R0, 0x21, l.outer);
    a.alu64_imm(Alu::Add, R7, 8);
    a.jump(next.ip);

    // VXLAN: 8 bytes, then Ethernet.
    a.place(vxlan);
    need(a, R7, 8, l.outer);
    a.alu64_imm(Alu::Add, R7, 8);
    a.jump(next.eth);

    // GENEVE version 0: 8 bytes and the options' length, then a payload
    // of its protocol type.
    a.place(geneve);
    need(a, R7, 8, l.outer);
    a.packet_ind(Size::B, R7, 0);
    a.alu64_reg(Alu::Mov, R1, R0);
    a.alu64_imm(Alu::Rsh, R1, 6);
    a.jump_imm(Cond::Ne, R1, 0, l.outer);
    a.alu64_imm(Alu::And, R0, 0x3f);
    a.alu64_imm(Alu::Lsh, R0, 2);
    a.alu64_imm(Alu::Add, R0, 8);
    a.alu64_reg(Alu::Mov, R9, R0);
    need_r9(a, l.outer);
    a.packet_ind(Size::H, R7, 2);
    a.alu64_reg(Alu::Add, R7, R9);
    a.jump_imm(Cond::Eq, R0, ethertype::TEB as i32, next.eth);
    a.jump(next.ethertype);

    gtpu_header(a, l, gtpu, next);
    gre_header(a, l, gre, next);
}

/// GTP-U version 1 carrying a G-PDU: 8 bytes, 4 more when any of the E,
/// S or PN flags is set, the extension headers the E flag announces; the
/// packet ends where the header's length says (or the buffer does).
fn gtpu_header(a: &mut Asm, l: &Labels, at: Label, next: &Next) {
    let (end_cut, fixed, ext, walk, units_ok, done) = (
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
    );
    a.place(at);
    need(a, R7, 8, l.outer);
    a.packet_ind(Size::B, R7, 1);
    a.jump_imm(Cond::Ne, R0, 255, l.outer);
    a.packet_ind(Size::H, R7, 2);
    a.alu64_imm(Alu::Add, R0, 8);
    a.alu64_reg(Alu::Mov, R1, R8);
    a.alu64_reg(Alu::Sub, R1, R7);
    a.jump_reg(Cond::Le, R0, R1, end_cut);
    a.alu64_reg(Alu::Mov, R0, R1);
    a.place(end_cut);
    a.store(Size::DW, FP, GTPU_END, R0);
    a.packet_ind(Size::B, R7, 0);
    a.store(Size::DW, FP, TMP, R0);
    a.alu64_imm(Alu::And, R0, 0xf0);
    a.jump_imm(Cond::Ne, R0, 0x30, l.outer);
    a.alu64_imm(Alu::Mov, R9, 8);
    a.load(Size::DW, R1, FP, TMP);
    a.jump_imm(Cond::Set, R1, 0x07, ext);
    a.jump(done);

    a.place(ext);
    need(a, R7, 12, l.outer);
    a.alu64_imm(Alu::Mov, R9, 12);
    a.packet_ind(Size::B, R7, 11);
    a.load(Size::DW, R1, FP, TMP);
    a.jump_imm(Cond::Set, R1, 0x04, fixed);
    a.alu64_imm(Alu::Mov, R0, 0);
    a.place(fixed);
    a.store(Size::DW, FP, GTPU_NEXT, R0);
    a.store_imm(Size::DW, FP, ITER, 0);

    // Each extension header: its length in 4-byte units (never 0), and the
    // next one's type in its last byte.
    a.place(walk);
    a.load(Size::DW, R1, FP, GTPU_NEXT);
    a.jump_imm(Cond::Eq, R1, 0, done);
    a.load(Size::DW, R1, FP, ITER);
    a.jump_imm(Cond::Ge, R1, MAX_GTPU_EXTENSIONS as i32, l.outer);
    a.alu64_imm(Alu::Add, R1, 1);
    a.store(Size::DW, FP, ITER, R1);
    // R1 = where the length byte is, which must be inside the buffer.
    need_r9(a, l.outer);
    a.jump_reg(Cond::Eq, R1, R8, l.outer);
    a.packet_ind(Size::B, R1, 0);
    a.jump_imm(Cond::Ne, R0, 0, units_ok);
    a.jump(l.outer);
    a.place(units_ok);
    a.alu64_imm(Alu::Lsh, R0, 2);
    a.alu64_reg(Alu::Add, R9, R0);
    need_r9(a, l.outer);
    a.alu64_reg(Alu::Mov, R1, R9);
    a.alu64_reg(Alu::Add, R1, R7);
    a.packet_ind(Size::B, R1, -1);
    a.store(Size::DW, FP, GTPU_NEXT, R0);
    a.jump(walk);

    // The packet: from after the headers to the stated end; none when the
    // headers reach past it.
    a.place(done);
    a.load(Size::DW, R1, FP, GTPU_END);
    a.jump_reg(Cond::Gt, R9, R1, l.outer);
    a.alu64_reg(Alu::Mov, R8, R7);
    a.alu64_reg(Alu::Add, R8, R1);
    a.alu64_reg(Alu::Add, R7, R9);
    a.jump(next.ip);
}

/// GRE version 0 without routing: 4 bytes and the optional checksum, key
/// and sequence words; then ERSPAN (type I: nothing more; type II: 8 bytes;
/// type III: 12, or 20 with its platform subheader) and Ethernet; a WCCP
/// redirect header (none before an IPv4 header, else 4 bytes) and IP; a
/// Cisco MetaData header (8 bytes, the first two the ethertype of what
/// follows); or a payload of the protocol type.
fn gre_header(a: &mut Asm, l: &Labels, at: Label, next: &Next) {
    let (erspan, erspan2, erspan3, subheader) = (a.label(), a.label(), a.label(), a.label());
    let (wccp, cmd) = (a.label(), a.label());
    a.place(at);
    need(a, R7, 4, l.outer);
    a.packet_ind(Size::B, R7, 1);
    a.jump_imm(Cond::Set, R0, 0x07, l.outer);
    a.packet_ind(Size::B, R7, 0);
    a.store(Size::DW, FP, TMP, R0);
    a.jump_imm(Cond::Set, R0, 0x40, l.outer);
    a.alu64_imm(Alu::Mov, R9, 4);
    // A word each for the checksum, key and sequence number present.
    for bit in [0x80, 0x20, 0x10] {
        let (present, skip) = (a.label(), a.label());
        a.jump_imm(Cond::Set, R0, bit, present);
        a.jump(skip);
        a.place(present);
        a.alu64_imm(Alu::Add, R9, 4);
        a.place(skip);
    }
    need_r9(a, l.outer);
    a.packet_ind(Size::H, R7, 2);
    a.alu64_reg(Alu::Add, R7, R9);
    a.jump_imm(Cond::Eq, R0, ethertype::ERSPAN as i32, erspan);
    a.jump_imm(Cond::Eq, R0, ethertype::ERSPAN3 as i32, erspan3);
    a.jump_imm(Cond::Eq, R0, ethertype::TEB as i32, next.eth);
    a.jump_imm(Cond::Eq, R0, ethertype::WCCP as i32, wccp);
    a.jump_imm(Cond::Eq, R0, ethertype::CMD as i32, cmd);
    a.jump(next.ethertype);

    a.place(wccp);
    need(a, R7, 1, l.outer);
    a.packet_ind(Size::B, R7, 0);
    a.alu64_imm(Alu::Rsh, R0, 4);
    a.jump_imm(Cond::Eq, R0, 4, next.ip);
    need(a, R7, 4, l.outer);
    a.alu64_imm(Alu::Add, R7, 4);
    a.jump(next.ip);

    a.place(cmd);
    need(a, R7, 8, l.outer);
    a.packet_ind(Size::H, R7, 0);
    a.alu64_imm(Alu::Add, R7, 8);
    a.jump(next.ethertype);

    a.place(erspan);
    a.load(Size::DW, R1, FP, TMP);
    a.jump_imm(Cond::Set, R1, 0x10, erspan2);
    a.jump(next.eth);
    a.place(erspan2);
    need(a, R7, 8, l.outer);
    a.alu64_imm(Alu::Add, R7, 8);
    a.jump(next.eth);

    a.place(erspan3);
    need(a, R7, 12, l.outer);
    a.alu64_imm(Alu::Mov, R9, 12);
    a.packet_ind(Size::B, R7, 11);
    a.jump_imm(Cond::Set, R0, 0x01, subheader);
    let sized = a.label();
    a.jump(sized);
    a.place(subheader);
    a.alu64_imm(Alu::Mov, R9, 20);
    a.place(sized);
    need_r9(a, l.outer);
    a.packet_ind(Size::B, R7, 10);
    a.alu64_imm(Alu::And, R0, 0x7c); // the frame type, 0: Ethernet
    a.jump_imm(Cond::Ne, R0, 0, l.outer);
    a.alu64_reg(Alu::Add, R7, R9);
    a.jump(next.eth);
}

/// R0 = `wire::flow`'s hash of the four address words and the port word.
fn hash_words(a: &mut Asm, addr: [i16; 4], lo_port: i16, hi_port: i16, then: Label) {
    let round = |a: &mut Asm| {
        a.alu64_reg(Alu::Xor, R0, R1);
        a.load_u64(R3, M);
        a.alu64_reg(Alu::Mul, R0, R3);
        a.alu64_reg(Alu::Mov, R1, R0);
        a.alu64_imm(Alu::Rsh, R1, 29);
        a.alu64_reg(Alu::Xor, R0, R1);
    };
    a.load_u64(R0, SEED);
    for slot in addr {
        a.load(Size::DW, R1, FP, slot);
        round(a);
    }
    a.load(Size::DW, R1, FP, lo_port);
    a.alu64_imm(Alu::Lsh, R1, 32);
    a.load(Size::DW, R2, FP, hi_port);
    a.alu64_imm(Alu::Lsh, R2, 16);
    a.alu64_reg(Alu::Or, R1, R2);
    a.load(Size::DW, R2, FP, PROTO);
    a.alu64_reg(Alu::Or, R1, R2);
    round(a);
    // SplitMix64's finaliser, upper half.
    for (shift, mul) in [(30, 0xbf58_476d_1ce4_e5b9u64), (27, 0x94d0_49bb_1331_11eb)] {
        a.alu64_reg(Alu::Mov, R1, R0);
        a.alu64_imm(Alu::Rsh, R1, shift);
        a.alu64_reg(Alu::Xor, R0, R1);
        a.load_u64(R3, mul);
        a.alu64_reg(Alu::Mul, R0, R3);
    }
    a.alu64_reg(Alu::Mov, R1, R0);
    a.alu64_imm(Alu::Rsh, R1, 31);
    a.alu64_reg(Alu::Xor, R0, R1);
    a.alu64_imm(Alu::Rsh, R0, 32);
    a.jump(then);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flows of one share, or of one Kafka partition, still spread
    /// over every worker, and evenly.
    #[test]
    fn a_shares_flows_spread_over_every_worker() {
        let mut h = 0x1234_5678u32;
        let mut next = move || {
            h ^= h << 13;
            h ^= h >> 17;
            h ^= h << 5;
            h
        };
        for (modulus, class) in [(2u32, 0u32), (2, 1), (4, 3), (8, 5)] {
            for rings in [2u32, 3, 4] {
                let mut per_ring = vec![0u32; rings as usize];
                let mut n = 0;
                while n < 40_000 {
                    let f = next();
                    if f % modulus == class {
                        per_ring[fanout_ring(f, rings) as usize] += 1;
                        n += 1;
                    }
                }
                let (lo, hi) = (
                    per_ring.iter().min().unwrap(),
                    per_ring.iter().max().unwrap(),
                );
                assert!(
                    *lo as f64 > 0.9 * *hi as f64,
                    "share {class}/{modulus} over {rings} rings: {per_ring:?}"
                );
            }
        }
        assert_eq!(
            fanout_ring(0, 4),
            0,
            "frames without a flow hash go to ring 0"
        );
    }
}
