//! Classic BPF (what libpcap compiles tcpdump expressions to) rewritten as
//! eBPF, so that a tcpdump filter and the shard test can run as one socket
//! program: a socket holds one filter, classic or extended, not both.
//!
//! The mapping is the one the kernel itself applies to classic filters:
//! A in R8, X in R9, the sixteen scratch words on the stack, packet loads
//! through the legacy LD_ABS/LD_IND instructions (same bounds semantics:
//! a load past the end drops the packet), and the ancillary loads libpcap
//! uses read the same `struct __sk_buff` fields.

use crate::bpf::{Alu, Asm, Cond, FP, Label, R0, R6, R8, R9, Size};

/// Where scratch word `M[i]` lives (below the shard program's slots).
fn scratch(i: u32) -> i16 {
    -160 - 4 * i as i16
}

const SKF_AD_OFF: i32 = -0x1000;
const SKF_LL_OFF: i32 = -0x20_0000;

/// Offsets in `struct __sk_buff` (linux/bpf.h).
mod skb {
    pub const LEN: i16 = 0;
    pub const PKT_TYPE: i16 = 4;
    pub const MARK: i16 = 8;
    pub const QUEUE_MAPPING: i16 = 12;
    pub const PROTOCOL: i16 = 16;
    pub const VLAN_PRESENT: i16 = 20;
    pub const VLAN_TCI: i16 = 24;
    pub const VLAN_PROTO: i16 = 28;
    pub const IFINDEX: i16 = 40;
    pub const HASH: i16 = 68;
}

/// Appends `prog` to `asm`, R6 holding the socket buffer. Every path ends
/// in the classic program's own `ret`.
pub fn append(asm: &mut Asm, prog: &[libc::sock_filter]) -> Result<(), String> {
    if prog.is_empty() {
        return Err("an empty classic program".into());
    }
    if prog.last().map(|f| f.code & 0x07) != Some(0x06) {
        return Err("the classic program does not end in ret".into());
    }
    // A, X and the scratch words start at zero, as in classic BPF.
    asm.alu32_imm(Alu::Mov, R8, 0);
    asm.alu32_imm(Alu::Mov, R9, 0);
    for i in 0..16 {
        asm.store_imm(Size::W, FP, scratch(i), 0);
    }
    let labels: Vec<Label> = (0..prog.len()).map(|_| asm.label()).collect();
    let target = |i: usize, rel: u32| -> Result<Label, String> {
        labels
            .get(i + 1 + rel as usize)
            .copied()
            .ok_or_else(|| format!("instruction {i} jumps past the end"))
    };
    for (i, f) in prog.iter().enumerate() {
        asm.place(labels[i]);
        let (class, k) = (f.code & 0x07, f.k);
        let size = match f.code & 0x18 {
            0x00 => Size::W,
            0x08 => Size::H,
            _ => Size::B,
        };
        let mode = f.code & 0xe0;
        let bad = || format!("instruction {i} (code {:#04x}) is not classic BPF", f.code);
        match class {
            // LD
            0x00 => match mode {
                0x00 => asm.alu32_imm(Alu::Mov, R8, k as i32),
                0x20 if (SKF_AD_OFF..0).contains(&(k as i32)) => {
                    ancillary(asm, (k as i32 - SKF_AD_OFF) as u32, i)?
                }
                0x20 if (k as i32) < 0 && (k as i32) >= SKF_LL_OFF => {
                    return Err(format!(
                        "instruction {i} loads relative to the link or network header \
                         (SKF_LL_OFF/SKF_NET_OFF), which the shard filter does not translate"
                    ));
                }
                0x20 => {
                    asm.packet_abs(size, k as i32);
                    asm.alu32_reg(Alu::Mov, R8, R0);
                }
                0x40 => {
                    asm.packet_ind(size, R9, k as i32);
                    asm.alu32_reg(Alu::Mov, R8, R0);
                }
                0x60 if k < 16 => asm.load(Size::W, R8, FP, scratch(k)),
                0x80 => asm.load(Size::W, R8, R6, skb::LEN),
                _ => return Err(bad()),
            },
            // LDX
            0x01 => match mode {
                0x00 => asm.alu32_imm(Alu::Mov, R9, k as i32),
                0x60 if k < 16 => asm.load(Size::W, R9, FP, scratch(k)),
                0x80 => asm.load(Size::W, R9, R6, skb::LEN),
                0xa0 => {
                    asm.packet_abs(Size::B, k as i32);
                    asm.alu32_imm(Alu::And, R0, 0x0f);
                    asm.alu32_imm(Alu::Lsh, R0, 2);
                    asm.alu32_reg(Alu::Mov, R9, R0);
                }
                _ => return Err(bad()),
            },
            0x02 if k < 16 => asm.store(Size::W, FP, scratch(k), R8),
            0x03 if k < 16 => asm.store(Size::W, FP, scratch(k), R9),
            // ALU
            0x04 => {
                let op = match f.code & 0xf0 {
                    0x00 => Alu::Add,
                    0x10 => Alu::Sub,
                    0x20 => Alu::Mul,
                    0x30 => Alu::Div,
                    0x40 => Alu::Or,
                    0x50 => Alu::And,
                    0x60 => Alu::Lsh,
                    0x70 => Alu::Rsh,
                    0x80 => Alu::Neg,
                    0x90 => Alu::Mod,
                    0xa0 => Alu::Xor,
                    _ => return Err(bad()),
                };
                if op == Alu::Neg {
                    asm.alu32_imm(Alu::Neg, R8, 0);
                } else if f.code & 0x08 == 0 {
                    if matches!(op, Alu::Div | Alu::Mod) && k == 0 {
                        return Err(format!("instruction {i} divides by zero"));
                    }
                    asm.alu32_imm(op, R8, k as i32);
                } else {
                    if matches!(op, Alu::Div | Alu::Mod) {
                        // Classic BPF drops the packet on a zero divisor.
                        let ok = asm.label();
                        asm.jump32_imm(Cond::Ne, R9, 0, ok);
                        asm.ret(0);
                        asm.place(ok);
                    }
                    asm.alu32_reg(op, R8, R9);
                }
            }
            // JMP
            0x05 => {
                let cond = match f.code & 0xf0 {
                    0x00 => {
                        asm.jump(target(i, k)?);
                        continue;
                    }
                    0x10 => Cond::Eq,
                    0x20 => Cond::Gt,
                    0x30 => Cond::Ge,
                    0x40 => Cond::Set,
                    _ => return Err(bad()),
                };
                let (yes, no) = (target(i, f.jt as u32)?, target(i, f.jf as u32)?);
                if f.code & 0x08 == 0 {
                    asm.jump32_imm(cond, R8, k as i32, yes);
                } else {
                    asm.jump32_reg(cond, R8, R9, yes);
                }
                asm.jump(no);
            }
            // RET
            0x06 => match f.code & 0x18 {
                0x00 => asm.ret(k),
                0x08 => {
                    asm.alu32_reg(Alu::Mov, R0, R9);
                    asm.exit();
                }
                0x10 => {
                    asm.alu32_reg(Alu::Mov, R0, R8);
                    asm.exit();
                }
                _ => return Err(bad()),
            },
            // MISC: TAX, TXA
            0x07 => match f.code & 0xf8 {
                0x00 => asm.alu32_reg(Alu::Mov, R9, R8),
                0x80 => asm.alu32_reg(Alu::Mov, R8, R9),
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        }
    }
    Ok(())
}

/// A = one of the kernel's "ancillary" values (SKF_AD_*), from the socket
/// buffer's fields or a helper.
fn ancillary(asm: &mut Asm, which: u32, i: usize) -> Result<(), String> {
    let field = |asm: &mut Asm, off: i16| asm.load(Size::W, R8, R6, off);
    match which {
        0 => {
            field(asm, skb::PROTOCOL);
            asm.be16(R8);
        }
        4 => field(asm, skb::PKT_TYPE),
        8 => field(asm, skb::IFINDEX),
        20 => field(asm, skb::MARK),
        24 => field(asm, skb::QUEUE_MAPPING),
        32 => field(asm, skb::HASH),
        36 => {
            asm.call(8); // bpf_get_smp_processor_id
            asm.alu32_reg(Alu::Mov, R8, R0);
        }
        40 => asm.alu32_reg(Alu::Xor, R8, R9),
        44 => field(asm, skb::VLAN_TCI),
        48 => field(asm, skb::VLAN_PRESENT),
        56 => {
            asm.call(7); // bpf_get_prandom_u32
            asm.alu32_reg(Alu::Mov, R8, R0);
        }
        60 => {
            field(asm, skb::VLAN_PROTO);
            asm.be16(R8);
        }
        other => {
            return Err(format!(
                "instruction {i} reads the kernel's ancillary value SKF_AD_OFF+{other}, which the \
                 shard filter does not translate"
            ));
        }
    }
    Ok(())
}
