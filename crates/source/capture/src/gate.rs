//! Hands a capture over from one ring to another on the same interface
//! without a fanout group, so that a capture with one worker has nothing
//! run per frame in the kernel but its own filter once it has handed over
//! (a group runs its program, or hashes the flow, on every frame for as
//! long as the capture lasts).
//!
//! Two sockets bound to one interface each see every frame, the newer one
//! first (the kernel walks an interface's packet taps newest first, on one
//! CPU, with bottom halves off, so nothing runs in between). The old ring
//! runs [`Gate::old`]: it keeps a frame (if the filter does) unless the
//! new ring's program, run just before on the same CPU, left a 1 in a
//! per-CPU word. The new ring starts with [`Gate::closed`], which leaves
//! a 0 and keeps nothing; replacing it with [`Gate::open`], which leaves a
//! 1 and keeps what the filter keeps, is one atomic change of one socket's
//! filter: every frame goes to exactly one of the two rings, the frames
//! before the change to the old one and those after it to the new one.
//! The old ring then stops receiving (the kernel waits for any frame on its
//! way to it), and the new ring's filter becomes the plain one.

use crate::bpf::{
    Alu, Asm, Cond, FP, HELPER_MAP_LOOKUP_ELEM, Insn, PerCpuWord, R0, R1, R2, R6, Size,
    SocketProgram,
};

/// The three programs of a hand-over, sharing their per-CPU word.
#[derive(Debug)]
pub struct Gate {
    /// The old ring's filter from its start.
    pub old: SocketProgram,
    /// The new ring's filter until the hand-over.
    pub closed: SocketProgram,
    /// The new ring's filter from the hand-over, until the plain filter
    /// replaces it.
    pub open: SocketProgram,
}

/// What a program does with the word and the frame.
#[derive(Clone, Copy)]
enum Role {
    Old,
    Closed,
    Open,
}

impl Gate {
    /// The programs, each ending in `filter` (classic BPF, as libpcap
    /// compiles it) where it keeps frames. Loading needs CAP_BPF (root).
    pub fn load(filter: Option<&[libc::sock_filter]>) -> Result<Gate, String> {
        let word = PerCpuWord::create().map_err(|e| format!("creating its per-CPU word: {e}"))?;
        let load = |role: Role, name: &str| -> Result<SocketProgram, String> {
            let insns = program(role, word.raw_fd(), filter)?;
            SocketProgram::load(&insns, name).map_err(|e| e.to_string())
        };
        Ok(Gate {
            old: load(Role::Old, "weir_gate_old")?,
            closed: load(Role::Closed, "weir_gate_shut")?,
            open: load(Role::Open, "weir_gate_open")?,
        })
    }
}

fn program(
    role: Role,
    word: std::os::fd::RawFd,
    filter: Option<&[libc::sock_filter]>,
) -> Result<Vec<Insn>, String> {
    let mut a = Asm::new();
    let (keep, drop) = (a.label(), a.label());
    // The socket buffer stays in R6 for the filter.
    a.alu64_reg(Alu::Mov, R6, R1);
    a.store_imm(Size::W, FP, -4, 0);
    a.load_map(R1, word);
    a.alu64_reg(Alu::Mov, R2, FP);
    a.alu64_imm(Alu::Add, R2, -4);
    a.call(HELPER_MAP_LOOKUP_ELEM);
    // (The word of an array map always exists; the verifier wants the
    // check. The verifier also refuses code no path reaches, so each role
    // has only its own exits.)
    let filter = |a: &mut Asm| -> Result<(), String> {
        match filter {
            Some(f) if !f.is_empty() => crate::classic::append(a, f),
            _ => {
                a.ret(u32::MAX);
                Ok(())
            }
        }
    };
    match role {
        Role::Old => {
            a.jump_imm(Cond::Eq, R0, 0, keep);
            a.load(Size::W, R1, R0, 0);
            a.jump_imm(Cond::Ne, R1, 0, drop);
            a.place(keep);
            filter(&mut a)?;
            a.place(drop);
            a.ret(0);
        }
        Role::Closed => {
            a.jump_imm(Cond::Eq, R0, 0, drop);
            a.store_imm(Size::W, R0, 0, 0);
            a.place(drop);
            a.ret(0);
        }
        Role::Open => {
            a.jump_imm(Cond::Eq, R0, 0, keep);
            a.store_imm(Size::W, R0, 0, 1);
            a.place(keep);
            filter(&mut a)?;
        }
    }
    a.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The programs load (the tests run as root) and decide as they should
    /// on one CPU: the old ring keeps what the filter keeps while the new
    /// one is closed, and nothing once it has opened. Needs root (bpf(2)).
    #[test]
    fn the_gate_passes_each_frame_to_one_ring() {
        // Pinned, so that the programs' runs share one CPU's word.
        // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
        // "udp" for Ethernet, as libpcap compiles it (tcpdump -dd udp).
        let udp = crate::compile_filter("udp", wire::LinkType::ETHERNET, 65535).unwrap();
        let gate = Gate::load(Some(&udp.program)).unwrap();
        let mut frame = vec![0u8; 60];
        frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        frame[14] = 0x45;
        frame[23] = 17;
        let mut tcp = frame.clone();
        tcp[23] = 6;
        let run = |p: &SocketProgram, f: &[u8]| p.test_run(f, 1).unwrap().0;
        assert_eq!(run(&gate.closed, &frame), 0);
        assert_ne!(run(&gate.old, &frame), 0);
        assert_eq!(run(&gate.old, &tcp), 0, "the filter still applies");
        assert_ne!(run(&gate.open, &frame), 0);
        assert_eq!(
            run(&gate.old, &frame),
            0,
            "after the new ring's open program"
        );
        assert_eq!(run(&gate.open, &tcp), 0);
        assert_eq!(run(&gate.closed, &frame), 0);
        assert_ne!(run(&gate.old, &frame), 0, "after the closed program again");
    }
}
