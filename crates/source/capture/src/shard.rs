//! `--shard K/N`: a socket filter that keeps only the flows whose weir flow
//! hash falls in share K of N, so that N capture boxes on the same mirrored
//! traffic keep disjoint, complete shares with both directions of each
//! flow together.
//!
//! The program is the kernel-side twin of [`wire::decode`]'s flow hash
//! (`wire::flow`, version 1): the same headers followed (Ethernet, up to
//! four VLAN tags, IPv4, IPv6 and its extension headers), the same rules
//! for fragments (no ports) and for frames that cannot be hashed (hash 0),
//! the same arithmetic. The share of a frame is `flow_hash % N`; frames
//! without a flow hash (ARP, broken headers) hash to 0 and land in share 0,
//! so every frame has exactly one share. The tests run the program on
//! every frame of the shared captures (BPF_PROG_TEST_RUN) and compare it
//! with the decoder.
//!
//! It does not follow tunnels as the decoder does: a tunnelled frame's
//! share is its outer header's, while its record's `flow_hash` is the
//! innermost packet's. Every frame still has exactly one share, but the
//! two directions of a tunnelled flow share out together only when their
//! outer headers are one flow (GRE, IP in IP; not VXLAN, GENEVE or GTP-U,
//! whose source ports each endpoint picks).
//!
//! A tcpdump filter given with the shard is translated from classic BPF
//! ([`crate::classic`]) and runs after the shard test in the same program.

use std::fmt;
use std::str::FromStr;

use wire::LinkType;
use wire::flow::{M, SEED};
use wire::ip::proto;
use wire::link::ethertype;

use crate::bpf::{Alu, Asm, Cond, FP, Insn, Label, R0, R1, R2, R3, R6, R7, R8, R9, Size};

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
    /// The flow hash itself (0 for frames without one): for tests and
    /// benchmarks through BPF_PROG_TEST_RUN.
    Hash,
    /// 0 (drop) for frames of other shares; frames of this share go on to
    /// the tcpdump filter if any, else are kept whole.
    Keep(Shard),
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

/// IPv4 addresses are hashed mapped into `::ffff:0:0/96`.
const V4_MAPPED_LOW: u64 = 0xffff_0000_0000;
const VLAN_TAGS: [u16; 3] = [ethertype::VLAN, ethertype::QINQ, ethertype::QINQ_OLD];
const MAX_VLAN_TAGS: i32 = 4;
const MAX_IPV6_HEADERS: i32 = 32;

/// The program for frames of `link`: the flow hash, then `verdict`, then
/// (for [`Verdict::Keep`]) the classic `filter` if one is given.
pub fn program(
    link: LinkType,
    verdict: Verdict,
    filter: Option<&[libc::sock_filter]>,
) -> Result<Vec<Insn>, String> {
    let mut a = Asm::new();
    let l = Labels {
        none: a.label(),
        v4: a.label(),
        v6: a.label(),
        transport: a.label(),
        no_ports: a.label(),
        decide: a.label(),
    };
    // R6: the socket buffer; R7: where parsing is; R8: the frame's length.
    a.alu64_reg(Alu::Mov, R6, R1);
    a.load(Size::W, R8, R6, 0);
    for slot in [FRAG, FRAG_OFF, SPORT, DPORT] {
        a.store_imm(Size::DW, FP, slot, 0);
    }
    match link {
        LinkType::ETHERNET => ethernet(&mut a, &l),
        LinkType::RAW => {
            a.alu64_imm(Alu::Mov, R7, 0);
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
    ipv4(&mut a, &l);
    ipv6(&mut a, &l);
    transport(&mut a, &l);
    a.place(l.none);
    a.alu64_imm(Alu::Mov, R0, 0);
    a.place(l.decide);
    match verdict {
        Verdict::Hash => a.exit(),
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

struct Labels {
    /// No flow hash: R0 = 0, then the verdict.
    none: Label,
    /// R7 at the IPv4 / IPv6 header.
    v4: Label,
    v6: Label,
    /// R7 at the transport header; PROTO, FRAG, L4_LEN set.
    transport: Label,
    /// Hash with both ports 0.
    no_ports: Label,
    /// R0 = the flow hash.
    decide: Label,
}

/// Jumps to `to` unless `R7 + need <= R8` (that many bytes left).
fn need(a: &mut Asm, at: u8, need: i32, to: Label) {
    a.alu64_reg(Alu::Mov, R1, at);
    a.alu64_imm(Alu::Add, R1, need);
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

fn ethernet(a: &mut Asm, l: &Labels) {
    let (tags, tag, network) = (a.label(), a.label(), a.label());
    a.jump_imm(Cond::Lt, R8, 14, l.none);
    a.packet_abs(Size::H, 12);
    a.alu64_imm(Alu::Mov, R7, 14);
    a.alu64_imm(Alu::Mov, R9, 0);
    a.place(tags);
    for t in VLAN_TAGS {
        a.jump_imm(Cond::Eq, R0, t as i32, tag);
    }
    a.jump(network);
    a.place(tag);
    a.jump_imm(Cond::Eq, R9, MAX_VLAN_TAGS, l.none);
    need(a, R7, 4, l.none);
    a.packet_ind(Size::H, R7, 2);
    a.alu64_imm(Alu::Add, R7, 4);
    a.alu64_imm(Alu::Add, R9, 1);
    a.jump(tags);
    a.place(network);
    a.jump_imm(Cond::Eq, R0, ethertype::IPV4 as i32, l.v4);
    a.jump_imm(Cond::Eq, R0, ethertype::IPV6 as i32, l.v6);
    a.jump(l.none);
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
    need(a, R7, 20, l.none);
    a.packet_ind(Size::B, R7, 0);
    a.alu64_reg(Alu::Mov, R1, R0);
    a.alu64_imm(Alu::Rsh, R1, 4);
    a.jump_imm(Cond::Ne, R1, 4, l.none);
    a.alu64_imm(Alu::And, R0, 0x0f);
    a.alu64_imm(Alu::Lsh, R0, 2);
    a.alu64_reg(Alu::Mov, R9, R0); // header length
    a.packet_ind(Size::H, R7, 2);
    // A zero total length (TSO on the sending host): the frame's.
    a.jump_imm(Cond::Ne, R0, 0, have_total);
    a.alu64_reg(Alu::Mov, R0, R8);
    a.alu64_reg(Alu::Sub, R0, R7);
    a.place(have_total);
    a.jump_imm(Cond::Lt, R9, 20, l.none);
    a.jump_reg(Cond::Lt, R0, R9, l.none);
    a.alu64_reg(Alu::Sub, R0, R9);
    a.store(Size::DW, FP, L4_LEN, R0);
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
    a.jump(l.transport);
}

fn ipv6(a: &mut Asm, l: &Labels) {
    let (chain, opt, ah, frag, advance, walked) = (
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
        a.label(),
    );
    a.place(l.v6);
    need(a, R7, 40, l.none);
    a.packet_ind(Size::B, R7, 0);
    a.alu64_imm(Alu::Rsh, R0, 4);
    a.jump_imm(Cond::Ne, R0, 6, l.none);
    a.packet_ind(Size::H, R7, 4);
    a.store(Size::DW, FP, L4_LEN, R0);
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
    let first = a.label();
    a.jump_imm(Cond::Eq, R1, 0, first);
    a.load(Size::DW, R1, FP, FRAG_OFF);
    a.jump_imm(Cond::Ne, R1, 0, l.no_ports);
    a.place(first);
    a.alu64_reg(Alu::Mov, R2, R9);
    a.alu64_reg(Alu::Sub, R2, R7);
    a.store(Size::DW, FP, L4_LEN, R2);
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
    hash_words(a, [SRC_HI, SRC_LO, DST_HI, DST_LO], SPORT, DPORT, l.decide);
    a.place(reverse);
    hash_words(a, [DST_HI, DST_LO, SRC_HI, SRC_LO], DPORT, SPORT, l.decide);
}

/// R0 = `wire::flow`'s hash of the four address words and the port word.
fn hash_words(a: &mut Asm, addr: [i16; 4], lo_port: i16, hi_port: i16, decide: Label) {
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
    a.jump(decide);
}
