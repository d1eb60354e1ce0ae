//! Socket-filter eBPF programs written from Rust: an instruction encoder
//! with labels, and the three bpf(2) calls weir needs (load, attach, test
//! run). The programs are small and generated (the shard filter, a
//! translated libpcap filter), so they are assembled here rather than
//! compiled from C: no clang at capture time, and the classic program
//! libpcap returns can be joined to them instruction by instruction.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// One eBPF instruction (the kernel's `struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    pub code: u8,
    /// dst register in the low nibble, src in the high one.
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

/// Registers. R0 holds results, R1-R5 are clobbered by calls and by the
/// legacy packet loads, R6-R9 survive both, R10 is the frame pointer.
pub type Reg = u8;
pub const R0: Reg = 0;
pub const R1: Reg = 1;
pub const R2: Reg = 2;
pub const R3: Reg = 3;
pub const R4: Reg = 4;
pub const R6: Reg = 6;
pub const R7: Reg = 7;
pub const R8: Reg = 8;
pub const R9: Reg = 9;
pub const FP: Reg = 10;

// Instruction classes, sizes, modes and operations (linux/bpf_common.h).
const LD: u8 = 0x00;
const LDX: u8 = 0x01;
const ST: u8 = 0x02;
const STX: u8 = 0x03;
const ALU: u8 = 0x04;
const JMP: u8 = 0x05;
const JMP32: u8 = 0x06;
const ALU64: u8 = 0x07;
const K: u8 = 0x00;
const X: u8 = 0x08;
const IMM: u8 = 0x00;
const ABS: u8 = 0x20;
const IND: u8 = 0x40;
const MEM: u8 = 0x60;
const DW: u8 = 0x18;
const EXIT: u8 = 0x90;
const CALL: u8 = 0x80;
const END: u8 = 0xd0;

/// Load and store widths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    B = 0x10,
    H = 0x08,
    W = 0x00,
    DW = 0x18,
}

/// ALU operations (the same numbers in classic and extended BPF).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alu {
    Add = 0x00,
    Sub = 0x10,
    Mul = 0x20,
    Div = 0x30,
    Or = 0x40,
    And = 0x50,
    Lsh = 0x60,
    Rsh = 0x70,
    Neg = 0x80,
    Mod = 0x90,
    Xor = 0xa0,
    Mov = 0xb0,
}

/// Conditional jumps, unsigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Eq = 0x10,
    Gt = 0x20,
    Ge = 0x30,
    Set = 0x40,
    Ne = 0x50,
    Lt = 0xa0,
    Le = 0xb0,
}

/// A jump target, placed with [`Asm::place`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// A program under construction.
#[derive(Default)]
pub struct Asm {
    insns: Vec<Insn>,
    /// Where each label was placed.
    places: Vec<Option<usize>>,
    /// (instruction, label) for every jump still to resolve.
    jumps: Vec<(usize, Label)>,
}

fn insn(code: u8, dst: Reg, src: Reg, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }

    pub fn label(&mut self) -> Label {
        self.places.push(None);
        Label(self.places.len() - 1)
    }

    /// The next instruction is `l`'s target.
    pub fn place(&mut self, l: Label) {
        debug_assert!(self.places[l.0].is_none(), "label placed twice");
        self.places[l.0] = Some(self.insns.len());
    }

    fn push(&mut self, i: Insn) {
        self.insns.push(i);
    }

    /// 64-bit `dst op= imm`.
    pub fn alu64_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        self.push(insn(ALU64 | op as u8 | K, dst, 0, 0, imm));
    }

    /// 64-bit `dst op= src`.
    pub fn alu64_reg(&mut self, op: Alu, dst: Reg, src: Reg) {
        self.push(insn(ALU64 | op as u8 | X, dst, src, 0, 0));
    }

    /// 32-bit `dst op= imm` (the upper half of dst becomes zero).
    pub fn alu32_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        self.push(insn(ALU | op as u8 | K, dst, 0, 0, imm));
    }

    /// 32-bit `dst op= src`.
    pub fn alu32_reg(&mut self, op: Alu, dst: Reg, src: Reg) {
        self.push(insn(ALU | op as u8 | X, dst, src, 0, 0));
    }

    /// `dst = imm` for any 64-bit constant (two instruction slots).
    pub fn load_u64(&mut self, dst: Reg, v: u64) {
        self.push(insn(LD | DW | IMM, dst, 0, 0, v as u32 as i32));
        self.push(insn(0, 0, 0, 0, (v >> 32) as u32 as i32));
    }

    /// `dst = ` the map whose descriptor is `fd` (two instruction slots;
    /// the kernel puts the map's address in at load time).
    pub fn load_map(&mut self, dst: Reg, fd: RawFd) {
        const BPF_PSEUDO_MAP_FD: Reg = 1;
        self.push(insn(LD | DW | IMM, dst, BPF_PSEUDO_MAP_FD, 0, fd));
        self.push(insn(0, 0, 0, 0, 0));
    }

    /// 16-bit network order to host order (the low half of `dst`).
    pub fn be16(&mut self, dst: Reg) {
        // BPF_TO_BE: a swap on this little-endian host.
        self.push(insn(ALU | END | X, dst, 0, 0, 16));
    }

    /// `dst = *(size *)(src + off)`.
    pub fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.push(insn(LDX | MEM | size as u8, dst, src, off, 0));
    }

    /// `*(size *)(dst + off) = src`.
    pub fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) {
        self.push(insn(STX | MEM | size as u8, dst, src, off, 0));
    }

    /// `*(size *)(dst + off) = imm`.
    pub fn store_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) {
        self.push(insn(ST | MEM | size as u8, dst, 0, off, imm));
    }

    /// R0 = the packet's bytes at `off`, network order made host order
    /// (legacy packet access: R6 must hold the context; R1-R5 are lost;
    /// an access past the end ends the program with 0).
    pub fn packet_abs(&mut self, size: Size, off: i32) {
        self.push(insn(LD | ABS | size as u8, 0, 0, 0, off));
    }

    /// R0 = the packet's bytes at `src + off`, as [`Asm::packet_abs`].
    pub fn packet_ind(&mut self, size: Size, src: Reg, off: i32) {
        self.push(insn(LD | IND | size as u8, 0, src, 0, off));
    }

    pub fn jump(&mut self, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.push(insn(JMP, 0, 0, 0, 0));
    }

    /// 64-bit compare of `dst` with `imm` (sign-extended).
    pub fn jump_imm(&mut self, c: Cond, dst: Reg, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.push(insn(JMP | c as u8 | K, dst, 0, 0, imm));
    }

    /// 64-bit compare of `dst` with `src`.
    pub fn jump_reg(&mut self, c: Cond, dst: Reg, src: Reg, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.push(insn(JMP | c as u8 | X, dst, src, 0, 0));
    }

    /// 32-bit compare of `dst` with `imm`, as classic BPF compares.
    pub fn jump32_imm(&mut self, c: Cond, dst: Reg, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.push(insn(JMP32 | c as u8 | K, dst, 0, 0, imm));
    }

    /// 32-bit compare of `dst` with `src`.
    pub fn jump32_reg(&mut self, c: Cond, dst: Reg, src: Reg, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.push(insn(JMP32 | c as u8 | X, dst, src, 0, 0));
    }

    /// A kernel helper by number; the result lands in R0.
    pub fn call(&mut self, helper: i32) {
        self.push(insn(JMP | CALL, 0, 0, 0, helper));
    }

    /// Ends the program with R0.
    pub fn exit(&mut self) {
        self.push(insn(JMP | EXIT, 0, 0, 0, 0));
    }

    /// Ends the program with `v`.
    pub fn ret(&mut self, v: u32) {
        self.alu32_imm(Alu::Mov, R0, v as i32);
        self.exit();
    }

    /// The finished program, every jump resolved.
    pub fn finish(mut self) -> Result<Vec<Insn>, String> {
        for &(at, Label(l)) in &self.jumps {
            let to = self.places[l].ok_or("a jump to a label never placed")?;
            let off = to as i64 - at as i64 - 1;
            self.insns[at].off = i16::try_from(off).map_err(|_| "a jump too far for eBPF")?;
        }
        Ok(self.insns)
    }
}

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_TYPE_PROG_ARRAY: u32 = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_PROG_TYPE_SOCKET_FILTER: u32 = 1;
const SO_ATTACH_BPF: libc::c_int = 50;

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: attr is a live, correctly laid out bpf_attr prefix of the
    // size given; the kernel reads and writes only within it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A socket-filter program the kernel accepted.
#[derive(Debug)]
pub struct SocketProgram {
    fd: OwnedFd,
    pub insns: usize,
    /// The table the program tail-calls through, if it does: held as long
    /// as the program, since the kernel empties a program table once no
    /// descriptor of it is left, and the tail calls would then fail.
    _table: Option<OwnedFd>,
}

/// The helper that jumps to a program of a table (never returns when it
/// succeeds).
pub const HELPER_TAIL_CALL: i32 = 12;

/// The helper that finds a map's value by key (R1 the map, R2 a pointer
/// to the key): a pointer to the value in R0, or 0.
pub const HELPER_MAP_LOOKUP_ELEM: i32 = 1;

const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;

/// A map of one 32-bit word per CPU (key 0), for programs to pass a word
/// between the programs that run on one frame. A program that uses it
/// holds it; the descriptor here only needs to live until they are loaded.
#[derive(Debug)]
pub struct PerCpuWord {
    fd: OwnedFd,
}

impl PerCpuWord {
    pub fn create() -> io::Result<PerCpuWord> {
        let mut create = MapCreateAttr {
            map_type: BPF_MAP_TYPE_PERCPU_ARRAY,
            key_size: 4,
            value_size: 4,
            max_entries: 1,
            map_flags: 0,
        };
        let fd = bpf(BPF_MAP_CREATE, &mut create)?;
        // SAFETY: a new descriptor the kernel just returned.
        Ok(PerCpuWord {
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
        })
    }

    /// The descriptor, for [`Asm::load_map`].
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Why the kernel refused a program: the error and the verifier's log.
#[derive(Debug, thiserror::Error)]
#[error("the kernel refused the socket filter program ({source}){}", verifier_tail(.log))]
pub struct LoadError {
    pub source: io::Error,
    pub log: String,
}

fn verifier_tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    if lines.is_empty() {
        return String::new();
    }
    let tail = &lines[lines.len().saturating_sub(8)..];
    format!("; the verifier said:\n  {}", tail.join("\n  "))
}

impl SocketProgram {
    /// Loads `insns` as a socket filter; on refusal the verifier's log
    /// comes back in the error.
    pub fn load(insns: &[Insn], name: &str) -> Result<SocketProgram, LoadError> {
        let license = c"Apache-2.0";
        let mut log = vec![0u8; 1 << 20];
        let mut prog_name = [0u8; 16];
        for (d, s) in prog_name.iter_mut().zip(name.bytes().take(15)) {
            *d = s;
        }
        let mut attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_SOCKET_FILTER,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            prog_name,
            ..Default::default()
        };
        match bpf(BPF_PROG_LOAD, &mut attr) {
            // SAFETY: a new descriptor the kernel just returned.
            Ok(fd) => Ok(SocketProgram {
                fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
                insns: insns.len(),
                _table: None,
            }),
            Err(source) => {
                // Again with the verifier's log, to say why.
                attr.log_level = 1;
                attr.log_size = log.len() as u32;
                attr.log_buf = log.as_mut_ptr() as u64;
                let _ = bpf(BPF_PROG_LOAD, &mut attr).map(|fd| {
                    // SAFETY: as above; accepted the second time, closed.
                    drop(unsafe { OwnedFd::from_raw_fd(fd as i32) })
                });
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                Err(LoadError {
                    source,
                    log: String::from_utf8_lossy(&log[..end]).into_owned(),
                })
            }
        }
    }

    /// Loads a program that tail-calls itself: `build` gets the
    /// descriptor of a one-slot program table (for [`Asm::load_map`] and
    /// [`HELPER_TAIL_CALL`] with index 0), and the program, once loaded,
    /// is put in that slot. A program that runs itself again starts each
    /// time with the verifier's full budget, where one long program would
    /// not fit it.
    pub fn load_self_calling(
        build: impl FnOnce(RawFd) -> Result<Vec<Insn>, String>,
        name: &str,
    ) -> Result<SocketProgram, LoadError> {
        let refused = |source: io::Error, what: &str| LoadError {
            source: io::Error::new(source.kind(), format!("{what}: {source}")),
            log: String::new(),
        };
        let mut create = MapCreateAttr {
            map_type: BPF_MAP_TYPE_PROG_ARRAY,
            key_size: 4,
            value_size: 4,
            max_entries: 1,
            map_flags: 0,
        };
        let table = bpf(BPF_MAP_CREATE, &mut create)
            .map_err(|e| refused(e, "creating its program table"))?;
        // SAFETY: a new descriptor the kernel just returned.
        let table = unsafe { OwnedFd::from_raw_fd(table as i32) };
        let insns = build(table.as_raw_fd()).map_err(|e| LoadError {
            source: io::Error::new(io::ErrorKind::InvalidInput, e),
            log: String::new(),
        })?;
        let mut prog = SocketProgram::load(&insns, name)?;
        let (key, value) = (0u32, prog.fd.as_raw_fd() as u32);
        let mut update = MapElemAttr {
            map_fd: table.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            ..Default::default()
        };
        bpf(BPF_MAP_UPDATE_ELEM, &mut update)
            .map_err(|e| refused(e, "putting it in its program table"))?;
        prog._table = Some(table);
        Ok(prog)
    }

    /// The program's descriptor, for the kernel interfaces that take one.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Attaches the program to `socket` (replacing any filter on it).
    pub fn attach(&self, socket: &impl AsRawFd) -> io::Result<()> {
        let fd: libc::c_int = self.fd.as_raw_fd();
        // SAFETY: SO_ATTACH_BPF takes the program's descriptor as an int.
        let r = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_ATTACH_BPF,
                &fd as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Runs the program `repeat` times on one Ethernet frame in the kernel
    /// (BPF_PROG_TEST_RUN): its return value and the mean time per run in
    /// ns.
    ///
    /// The kernel strips an Ethernet header off test input before a socket
    /// filter sees it, where a packet socket would see the whole frame; a
    /// dummy header goes in front so the program sees `frame` as captured.
    pub fn test_run(&self, frame: &[u8], repeat: u32) -> io::Result<(u32, u32)> {
        let mut data = vec![0u8; 14];
        data[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental
        data.extend_from_slice(frame);
        self.run_on(&data, repeat)
    }

    /// Runs the program on an Ethernet `frame` as the kernel hands a
    /// received frame to a fanout group's program: its link header taken
    /// off, its ethertype in the socket buffer's protocol (at least 14
    /// bytes).
    pub fn test_run_received(&self, frame: &[u8]) -> io::Result<u32> {
        self.run_on(frame, 1).map(|(r, _)| r)
    }

    fn run_on(&self, data: &[u8], repeat: u32) -> io::Result<(u32, u32)> {
        let mut attr = TestRunAttr {
            prog_fd: self.fd.as_raw_fd() as u32,
            data_size_in: data.len() as u32,
            data_in: data.as_ptr() as u64,
            repeat: repeat.max(1),
            ..Default::default()
        };
        bpf(BPF_PROG_TEST_RUN, &mut attr)?;
        Ok((attr.retval, attr.duration))
    }
}
