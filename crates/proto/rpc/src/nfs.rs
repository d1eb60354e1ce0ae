//! NFS (program 100003) versions 3 and 4, and MOUNT (100005): the
//! arguments and results that say what a call did to which file.
//!
//! A call decodes into one [`Op`] per operation (one for NFSv3 and MOUNT,
//! one per COMPOUND operation for NFSv4) with its arguments; the reply
//! then fills in each operation's status and results. File handles are
//! kept as a 64-bit hash ([`fh_hash`]), names as text.
//!
//! Messages may be cut short (bounded reassembly keeps only the first
//! bytes of a long message): decoding stops where the bytes do and keeps
//! what it has, and the data of READ and WRITE is skipped, not read.

use crate::xdr::Xdr;

pub const NFS: u32 = 100003;
pub const MOUNT: u32 = 100005;

/// Longest file handle decoded (NFSv4's NFS4_FHSIZE).
const MAX_FH: usize = 128;
/// Longest name or path kept.
const MAX_NAME: usize = 4096;
/// NFSv4 operations decoded per COMPOUND.
const MAX_OPS: usize = 256;

pub const V3_PROCEDURES: &[&str] = &[
    "NULL",
    "GETATTR",
    "SETATTR",
    "LOOKUP",
    "ACCESS",
    "READLINK",
    "READ",
    "WRITE",
    "CREATE",
    "MKDIR",
    "SYMLINK",
    "MKNOD",
    "REMOVE",
    "RMDIR",
    "RENAME",
    "LINK",
    "READDIR",
    "READDIRPLUS",
    "FSSTAT",
    "FSINFO",
    "PATHCONF",
    "COMMIT",
];

/// NFSv4 operation names from OP_ACCESS (3) to OP_RECLAIM_COMPLETE (58).
const V4_OPS: &[&str] = &[
    "ACCESS",
    "CLOSE",
    "COMMIT",
    "CREATE",
    "DELEGPURGE",
    "DELEGRETURN",
    "GETATTR",
    "GETFH",
    "LINK",
    "LOCK",
    "LOCKT",
    "LOCKU",
    "LOOKUP",
    "LOOKUPP",
    "NVERIFY",
    "OPEN",
    "OPENATTR",
    "OPEN_CONFIRM",
    "OPEN_DOWNGRADE",
    "PUTFH",
    "PUTPUBFH",
    "PUTROOTFH",
    "READ",
    "READDIR",
    "READLINK",
    "REMOVE",
    "RENAME",
    "RENEW",
    "RESTOREFH",
    "SAVEFH",
    "SECINFO",
    "SETATTR",
    "SETCLIENTID",
    "SETCLIENTID_CONFIRM",
    "VERIFY",
    "WRITE",
    "RELEASE_LOCKOWNER",
    "BACKCHANNEL_CTL",
    "BIND_CONN_TO_SESSION",
    "EXCHANGE_ID",
    "CREATE_SESSION",
    "DESTROY_SESSION",
    "FREE_STATEID",
    "GET_DIR_DELEGATION",
    "GETDEVICEINFO",
    "GETDEVICELIST",
    "LAYOUTCOMMIT",
    "LAYOUTGET",
    "LAYOUTRETURN",
    "SECINFO_NO_NAME",
    "SEQUENCE",
    "SET_SSV",
    "TEST_STATEID",
    "WANT_DELEGATION",
    "DESTROY_CLIENTID",
    "RECLAIM_COMPLETE",
];

/// The name of an NFSv4 operation.
pub fn v4_op_name(op: u32) -> &'static str {
    match op {
        3..=58 => V4_OPS[op as usize - 3],
        0 => "NULL",
        10044 => "ILLEGAL",
        _ => "UNKNOWN",
    }
}

/// The stable hash a file handle is kept as: 64-bit XXH3 (seed 0), a
/// published hash with implementations in most languages, so that a
/// handle seen elsewhere can be looked up. The same handle always gives
/// the same value, in every dataset. (Up to rpc schema version 1 this was
/// FNV-1a, which reads a byte at a time: hashing handles was a fifth of
/// the tracker's time.)
pub fn fh_hash(fh: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(fh)
}

/// File attributes a reply returned (NFSv3 fattr3, NFSv4 fattr4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attr {
    /// 1 regular, 2 directory, 3 block, 4 char, 5 symlink, 6 socket, 7 fifo
    /// (the same numbers in both versions).
    pub ftype: Option<u32>,
    pub size: Option<u64>,
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub mtime_ns: Option<i64>,
}

/// One operation: an NFSv3 or MOUNT call, or one operation of an NFSv4
/// COMPOUND.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Op {
    /// Position in the COMPOUND (0 for NFSv3 and MOUNT).
    pub index: u16,
    /// The NFSv3/MOUNT procedure or the NFSv4 operation number.
    pub op: u32,
    /// This operation's status (nfsstat3 / nfsstat4 / mountstat3);
    /// `None` without a reply, or for NFSv4 operations the server did not
    /// reach.
    pub status: Option<u32>,
    /// The file handle the operation acts on (hashed): the argument's,
    /// or in a COMPOUND the current handle a PUTFH set.
    pub fh: Option<u64>,
    /// The name argument (LOOKUP, CREATE, REMOVE, RENAME's source, the
    /// MOUNT path, ...).
    pub name: Option<String>,
    /// RENAME's new name.
    pub name2: Option<String>,
    pub offset: Option<u64>,
    /// Bytes asked for (READ, WRITE, COMMIT, READDIR).
    pub count: Option<u32>,
    /// WRITE's stable_how: 0 UNSTABLE, 1 DATA_SYNC, 2 FILE_SYNC.
    pub stable: Option<u32>,
    /// Bytes the reply says were read or written.
    pub res_count: Option<u32>,
    pub eof: Option<bool>,
    /// A handle the reply returned (LOOKUP, CREATE, GETFH, MNT), hashed.
    pub res_fh: Option<u64>,
    pub attr: Option<Attr>,
}

impl Op {
    fn new(index: u16, op: u32) -> Op {
        Op {
            index,
            op,
            ..Default::default()
        }
    }

    /// The operation's name.
    pub fn name_of(&self, program: u32, version: u32) -> &'static str {
        match (program, version) {
            (NFS, 4) => v4_op_name(self.op),
            _ => crate::msg::procedure_name(program, version, self.op).unwrap_or("UNKNOWN"),
        }
    }
}

/// A call's operations. NFSv3 and MOUNT calls have one, kept inline: a
/// heap block per call cost an allocation and a free, and the writer a
/// cache miss on a block the tracker's thread wrote.
pub type Ops = smallvec::SmallVec<[Op; 1]>;

/// What a call asked, as far as weir decodes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallDetail {
    pub ops: Ops,
    /// The arguments ended before the last operation was decoded (a cut
    /// message, or an operation weir cannot walk past).
    pub incomplete: bool,
}

/// Bytes of a call's arguments that [`decode_call`] can read, where that
/// is far less than the message: NFSv3 WRITE's handle, offset, count and
/// stable flag, before its data. `None`: any length (names, NFSv4
/// operation lists). A stream keeps no more of such a message.
pub fn call_prefix(program: u32, version: u32, procedure: u32) -> Option<usize> {
    match (program, version, procedure) {
        (NFS, 3, 7) => Some(4 + MAX_FH + 8 + 4 + 4),
        _ => None,
    }
}

/// Bytes of a reply's results that [`decode_reply`] can read for the
/// call, where bounded: every NFSv3 reply (status, at most a handle and
/// wcc data or attributes, a count and eof; READ's and READDIR's data
/// follow and are not read). `None`: any length.
pub fn reply_prefix(program: u32, version: u32) -> Option<usize> {
    // LOOKUP/CREATE, the longest: status, a follows-flag, the handle and
    // post-op attributes; WRITE: status, wcc data (pre 24 + post 84 bytes
    // with their flags) and a count.
    const FATTR3: usize = 84;
    match (program, version) {
        (NFS, 3) => Some(4 + 4 + (4 + MAX_FH) + (4 + FATTR3) + 8),
        _ => None,
    }
}

/// Decodes a call's arguments. Programs and versions weir does not
/// decode give no operations.
pub fn decode_call(program: u32, version: u32, procedure: u32, args: &[u8]) -> CallDetail {
    let mut d = CallDetail::default();
    decode_call_into(program, version, procedure, args, &mut d);
    d
}

/// [`decode_call`] into `d` (empty), where it is to be kept: a
/// [`CallDetail`] is a few hundred bytes, and the tracker decodes one per
/// call.
pub fn decode_call_into(
    program: u32,
    version: u32,
    procedure: u32,
    args: &[u8],
    d: &mut CallDetail,
) {
    let mut x = Xdr::new(args);
    let done = match (program, version) {
        (NFS, 3) => v3_call(procedure, &mut x, &mut d.ops),
        (NFS, 4) if procedure == 1 => v4_call(&mut x, &mut d.ops),
        (NFS, 4) if procedure == 0 => {
            d.ops.push(Op::new(0, 0));
            Some(())
        }
        (MOUNT, 1..=3) => mount_call(procedure, &mut x, &mut d.ops),
        _ => return,
    };
    d.incomplete = done.is_none();
}

/// Decodes a reply's results into the call's operations; returns the
/// overall status (NFSv3's nfsstat3, the COMPOUND's status, MOUNT's).
pub fn decode_reply(
    program: u32,
    version: u32,
    procedure: u32,
    ops: &mut [Op],
    results: &[u8],
) -> Option<u32> {
    let mut x = Xdr::new(results);
    match (program, version) {
        (NFS, 3) if procedure != 0 => {
            let status = x.u32()?;
            if let Some(op) = ops.first_mut() {
                op.status = Some(status);
                v3_reply(procedure, status, &mut x, op);
            }
            Some(status)
        }
        (NFS, 4) if procedure == 1 => v4_reply(&mut x, ops),
        (MOUNT, 1..=3) if procedure == 1 => {
            let status = x.u32()?;
            if let Some(op) = ops.first_mut() {
                op.status = Some(status);
                if status == 0 {
                    let fh = if version == 3 {
                        x.opaque_max(MAX_FH)
                    } else {
                        x.fixed(32)
                    };
                    op.res_fh = fh.map(fh_hash);
                }
            }
            Some(status)
        }
        _ => None,
    }
}

fn fh(x: &mut Xdr) -> Option<u64> {
    x.opaque_max(MAX_FH).map(fh_hash)
}

fn name(x: &mut Xdr) -> Option<String> {
    x.opaque_max(MAX_NAME)
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

// ---- NFSv3 (RFC 1813) ----

fn v3_call(procedure: u32, x: &mut Xdr, ops: &mut Ops) -> Option<()> {
    ops.push(Op::new(0, procedure));
    let op = ops.last_mut()?;
    if procedure == 0 {
        return Some(());
    }
    op.fh = Some(fh(x)?);
    match procedure {
        // LOOKUP, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR: dir, name.
        3 | 8..=13 => op.name = Some(name(x)?),
        6 => {
            op.offset = Some(x.u64()?);
            op.count = Some(x.u32()?);
        }
        7 => {
            op.offset = Some(x.u64()?);
            op.count = Some(x.u32()?);
            op.stable = Some(x.u32()?);
        }
        14 => {
            op.name = Some(name(x)?);
            fh(x)?;
            op.name2 = Some(name(x)?);
        }
        // LINK: the file, then the directory and the new name.
        15 => {
            fh(x)?;
            op.name = Some(name(x)?);
        }
        16 => {
            x.skip(16)?;
            op.count = Some(x.u32()?);
        }
        17 => {
            x.skip(16)?;
            let _dircount = x.u32()?;
            op.count = Some(x.u32()?);
        }
        21 => {
            op.offset = Some(x.u64()?);
            op.count = Some(x.u32()?);
        }
        _ => {}
    }
    Some(())
}

fn fattr3(x: &mut Xdr) -> Option<Attr> {
    let ftype = x.u32()?;
    let mode = x.u32()?;
    let _nlink = x.u32()?;
    let uid = x.u32()?;
    let gid = x.u32()?;
    let size = x.u64()?;
    x.skip(8 + 8 + 8 + 8 + 8)?; // used, rdev, fsid, fileid, atime
    let (sec, nsec) = (x.u32()?, x.u32()?);
    x.skip(8)?; // ctime
    Some(Attr {
        ftype: Some(ftype),
        size: Some(size),
        mode: Some(mode),
        uid: Some(uid),
        gid: Some(gid),
        mtime_ns: Some(sec as i64 * 1_000_000_000 + nsec as i64),
    })
}

fn post_op_attr(x: &mut Xdr) -> Option<Option<Attr>> {
    if x.bool()? {
        Some(Some(fattr3(x)?))
    } else {
        Some(None)
    }
}

/// wcc_data: the attributes before (skipped) and after the operation.
fn wcc(x: &mut Xdr) -> Option<Option<Attr>> {
    if x.bool()? {
        x.skip(24)?;
    }
    post_op_attr(x)
}

fn v3_reply(procedure: u32, status: u32, x: &mut Xdr, op: &mut Op) -> Option<()> {
    let ok = status == 0;
    match procedure {
        1 if ok => op.attr = Some(fattr3(x)?),
        2 | 12 | 13 | 21 => op.attr = wcc(x)?,
        3 => {
            if ok {
                op.res_fh = Some(fh(x)?);
                op.attr = post_op_attr(x)?;
            } else {
                post_op_attr(x)?;
            }
        }
        4 | 5 | 16..=20 => op.attr = post_op_attr(x)?,
        6 => {
            op.attr = post_op_attr(x)?;
            if ok {
                op.res_count = Some(x.u32()?);
                op.eof = Some(x.bool()?);
            }
        }
        7 => {
            op.attr = wcc(x)?;
            if ok {
                op.res_count = Some(x.u32()?);
            }
        }
        8..=11 if ok => {
            if x.bool()? {
                op.res_fh = Some(fh(x)?);
            }
            op.attr = post_op_attr(x)?;
        }
        15 => op.attr = post_op_attr(x)?,
        _ => {}
    }
    Some(())
}

// ---- MOUNT (RFC 1813 appendix I) ----

fn mount_call(procedure: u32, x: &mut Xdr, ops: &mut Ops) -> Option<()> {
    ops.push(Op::new(0, procedure));
    if matches!(procedure, 1 | 3) {
        let op = ops.last_mut()?;
        op.name = Some(name(x)?);
    }
    Some(())
}

// ---- NFSv4.0 (RFC 7530), with the NFSv4.1 operations that walk simply ----

const STATEID: usize = 16;
const VERIFIER: usize = 8;
const CHANGE_INFO: usize = 20;

fn bitmap(x: &mut Xdr) -> Option<Vec<u32>> {
    let n = x.u32()? as usize;
    if n > 8 {
        return None;
    }
    (0..n).map(|_| x.u32()).collect()
}

fn skip_bitmap(x: &mut Xdr) -> Option<()> {
    bitmap(x).map(|_| ())
}

/// fattr4: the bitmap and the attribute values; the attributes weir keeps
/// are picked out of the values in attribute-number order.
fn fattr4(x: &mut Xdr) -> Option<Attr> {
    let mask = bitmap(x)?;
    let vals = x.opaque()?;
    Some(attr4(&mask, vals))
}

fn attr4(mask: &[u32], vals: &[u8]) -> Attr {
    let mut a = Attr::default();
    let mut v = Xdr::new(vals);
    for n in 0..(mask.len() as u32 * 32) {
        if mask[(n / 32) as usize] & (1 << (n % 32)) == 0 {
            continue;
        }
        let ok = (|| -> Option<()> {
            match n {
                0 => skip_bitmap(&mut v)?,
                1 => a.ftype = Some(v.u32()?),
                // fh_expire_type, lease_time, rdattr_error, aclsupport,
                // maxlink, maxname, numlinks
                2 | 10 | 11 | 13 | 28 | 29 | 35 => v.skip(4)?,
                33 => a.mode = Some(v.u32()?),
                // change, fileid, files_*, maxfilesize, maxread/write,
                // quota, space_*, mounted_on_fileid
                3 | 20..=23 | 27 | 30 | 31 | 38..=40 | 42..=45 | 55 => v.skip(8)?,
                4 => a.size = Some(v.u64()?),
                // the booleans
                5..=7 | 9 | 14..=18 | 25 | 26 | 34 | 46 => v.skip(4)?,
                8 => v.skip(16)?, // fsid: major, minor
                41 => v.skip(8)?, // rawdev: specdata4
                12 => {
                    let aces = v.u32()?;
                    for _ in 0..aces.min(1024) {
                        v.skip(12)?;
                        v.opaque()?;
                    }
                }
                19 | 32 => {
                    v.opaque()?;
                }
                36 | 37 => {
                    let s = v.opaque()?;
                    // Numeric owners ("1000", or "1000@domain").
                    let digits = s.split(|&b| b == b'@').next().unwrap_or(&[]);
                    let id = std::str::from_utf8(digits)
                        .ok()
                        .and_then(|t| t.parse().ok());
                    if n == 36 {
                        a.uid = id;
                    } else {
                        a.gid = id;
                    }
                }
                47 | 49..=53 => {
                    let sec = v.u64()? as i64;
                    let nsec = v.u32()? as i64;
                    if n == 53 {
                        a.mtime_ns = Some(sec.saturating_mul(1_000_000_000).saturating_add(nsec));
                    }
                }
                48 | 54 => {
                    if v.u32()? == 1 {
                        v.skip(12)?;
                    }
                }
                _ => return None,
            }
            Some(())
        })();
        if ok.is_none() {
            break;
        }
    }
    a
}

fn v4_call(x: &mut Xdr, ops: &mut Ops) -> Option<()> {
    x.opaque_max(MAX_NAME)?; // tag
    let _minor = x.u32()?;
    let n = x.u32()? as usize;
    let mut current: Option<u64> = None;
    let mut saved: Option<u64> = None;
    for i in 0..n.min(MAX_OPS) {
        let code = x.u32()?;
        let mut op = Op::new(i as u16, code);
        op.fh = current;
        let walked = v4_args(code, x, &mut op, &mut current, &mut saved);
        ops.push(op);
        walked?;
    }
    if n > MAX_OPS { None } else { Some(()) }
}

/// Walks one operation's arguments, tracking the current file handle.
fn v4_args(
    code: u32,
    x: &mut Xdr,
    op: &mut Op,
    current: &mut Option<u64>,
    saved: &mut Option<u64>,
) -> Option<()> {
    match code {
        3 => x.skip(4)?,           // ACCESS
        4 => x.skip(4 + STATEID)?, // CLOSE
        5 | 25 => {
            // COMMIT: offset, count; READ: stateid, offset, count
            if code == 25 {
                x.skip(STATEID)?;
            }
            op.offset = Some(x.u64()?);
            op.count = Some(x.u32()?);
        }
        6 => {
            // CREATE
            match x.u32()? {
                5 => {
                    x.opaque()?;
                }
                3 | 4 => x.skip(8)?,
                _ => {}
            }
            op.name = Some(name(x)?);
            fattr4(x)?;
            *current = None;
        }
        7 => x.skip(8)?,            // DELEGPURGE
        8 | 45 => x.skip(STATEID)?, // DELEGRETURN, FREE_STATEID
        9 => skip_bitmap(x)?,       // GETATTR
        10 | 16 | 23 | 24 | 27 | 31 | 32 => {
            // GETFH, LOOKUPP, PUTPUBFH, PUTROOTFH, READLINK, RESTOREFH, SAVEFH
            match code {
                16 | 23 | 24 => *current = None,
                31 => *current = *saved,
                32 => *saved = *current,
                _ => {}
            }
        }
        11 => op.name = Some(name(x)?), // LINK
        12 => {
            // LOCK
            x.skip(4 + 4)?;
            op.offset = Some(x.u64()?);
            x.skip(8)?;
            if x.bool()? {
                x.skip(4 + STATEID + 4 + 8)?;
                x.opaque()?;
            } else {
                x.skip(STATEID + 4)?;
            }
        }
        13 => {
            // LOCKT
            x.skip(4)?;
            op.offset = Some(x.u64()?);
            x.skip(8 + 8)?;
            x.opaque()?;
        }
        14 => {
            // LOCKU
            x.skip(4 + 4 + STATEID)?;
            op.offset = Some(x.u64()?);
            x.skip(8)?;
        }
        15 | 28 | 33 => {
            // LOOKUP, REMOVE, SECINFO
            op.name = Some(name(x)?);
            if code == 15 {
                *current = None;
            }
        }
        17 | 37 => {
            fattr4(x)?; // NVERIFY, VERIFY
        }
        18 => {
            // OPEN
            x.skip(4 + 4 + 4 + 8)?;
            x.opaque()?;
            if x.u32()? == 1 {
                match x.u32()? {
                    0 | 1 => {
                        fattr4(x)?;
                    }
                    2 => x.skip(VERIFIER)?,
                    3 => {
                        x.skip(VERIFIER)?;
                        fattr4(x)?;
                    }
                    _ => return None,
                }
            }
            match x.u32()? {
                0 | 3 => op.name = Some(name(x)?),
                1 => x.skip(4)?,
                2 => {
                    x.skip(STATEID)?;
                    op.name = Some(name(x)?);
                }
                4 | 6 => {}
                5 => x.skip(STATEID)?,
                _ => return None,
            }
            *current = None;
        }
        19 => x.skip(4)?,               // OPENATTR
        20 => x.skip(STATEID + 4)?,     // OPEN_CONFIRM
        21 => x.skip(STATEID + 4 + 8)?, // OPEN_DOWNGRADE
        22 => {
            // PUTFH
            let h = fh(x)?;
            op.fh = Some(h);
            *current = Some(h);
        }
        26 => {
            // READDIR
            x.skip(8 + VERIFIER + 4)?;
            op.count = Some(x.u32()?);
            skip_bitmap(x)?;
        }
        29 => {
            // RENAME
            op.name = Some(name(x)?);
            op.name2 = Some(name(x)?);
        }
        30 | 57 => x.skip(8)?, // RENEW, DESTROY_CLIENTID
        34 => {
            // SETATTR
            x.skip(STATEID)?;
            fattr4(x)?;
        }
        35 => {
            // SETCLIENTID
            x.skip(VERIFIER)?;
            x.opaque()?;
            x.skip(4)?;
            x.opaque()?;
            x.opaque()?;
            x.skip(4)?;
        }
        36 => x.skip(8 + VERIFIER)?, // SETCLIENTID_CONFIRM
        38 => {
            // WRITE
            x.skip(STATEID)?;
            op.offset = Some(x.u64()?);
            op.stable = Some(x.u32()?);
            op.count = Some(x.skip_opaque()?);
        }
        39 => {
            x.skip(8)?; // RELEASE_LOCKOWNER
            x.opaque()?;
        }
        44 => x.skip(16)?,                 // DESTROY_SESSION
        52 => x.skip(4)?,                  // SECINFO_NO_NAME
        53 => x.skip(16 + 4 + 4 + 4 + 4)?, // SEQUENCE
        55 => {
            // TEST_STATEID
            let n = x.u32()? as usize;
            x.skip(n.checked_mul(STATEID)?)?;
        }
        58 => x.skip(4)?, // RECLAIM_COMPLETE
        _ => return None,
    }
    Some(())
}

fn v4_reply(x: &mut Xdr, ops: &mut [Op]) -> Option<u32> {
    let status = x.u32()?;
    let _ = (|| -> Option<()> {
        x.opaque_max(MAX_NAME)?; // tag
        let n = x.u32()? as usize;
        for i in 0..n.min(ops.len()) {
            let code = x.u32()?;
            let op_status = x.u32()?;
            let op = &mut ops[i];
            if op.op != code {
                return None;
            }
            op.status = Some(op_status);
            v4_result(code, op_status, x, op)?;
        }
        Some(())
    })();
    Some(status)
}

fn v4_result(code: u32, status: u32, x: &mut Xdr, op: &mut Op) -> Option<()> {
    if status != 0 {
        match (code, status) {
            (34, _) => skip_bitmap(x)?,
            (12 | 13, 10010) => {
                x.skip(8 + 8 + 4 + 8)?;
                x.opaque()?;
            }
            (35, 10017) => {
                x.opaque()?;
                x.opaque()?;
            }
            _ => {}
        }
        return Some(());
    }
    match code {
        3 => x.skip(8)?,
        4 | 12 | 14 | 20 | 21 => x.skip(STATEID)?,
        5 => x.skip(VERIFIER)?,
        6 => {
            x.skip(CHANGE_INFO)?;
            skip_bitmap(x)?;
        }
        9 => op.attr = Some(fattr4(x)?),
        10 => op.res_fh = Some(fh(x)?),
        11 | 28 => x.skip(CHANGE_INFO)?,
        18 => {
            x.skip(STATEID + CHANGE_INFO + 4)?;
            skip_bitmap(x)?;
            match x.u32()? {
                0 => {}
                d @ (1 | 2) => {
                    x.skip(STATEID + 4)?;
                    if d == 2 {
                        // space_limit4: a file size, or blocks and their size
                        x.u32()?;
                        x.skip(8)?;
                    }
                    x.skip(12)?; // the ACE's type, flag and mask
                    x.opaque()?;
                }
                3 => {
                    if matches!(x.u32()?, 1 | 2) {
                        x.skip(4)?;
                    }
                }
                _ => return None,
            }
        }
        25 => {
            op.eof = Some(x.bool()?);
            op.res_count = Some(x.skip_opaque()?);
        }
        26 => {
            x.skip(VERIFIER)?;
            let mut entries = 0u32;
            while x.bool()? {
                x.skip(8)?;
                x.opaque()?;
                fattr4(x)?;
                entries += 1;
            }
            op.eof = Some(x.bool()?);
            op.res_count = Some(entries);
        }
        27 => {
            x.opaque()?;
        }
        29 => x.skip(2 * CHANGE_INFO)?,
        33 | 52 => {
            let n = x.u32()?;
            for _ in 0..n.min(64) {
                if x.u32()? == 6 {
                    x.opaque()?;
                    x.skip(8)?;
                }
            }
        }
        34 => skip_bitmap(x)?,
        35 => x.skip(8 + VERIFIER)?,
        38 => {
            op.res_count = Some(x.u32()?);
            x.skip(4 + VERIFIER)?;
        }
        53 => x.skip(16 + 4 * 5)?,
        55 => {
            let n = x.u32()? as usize;
            x.skip(n.checked_mul(4)?)?;
        }
        // No results: DELEGPURGE, DELEGRETURN, LOOKUP, LOOKUPP, NVERIFY,
        // OPENATTR, PUT*FH, RENEW, RESTOREFH, SAVEFH, SETCLIENTID_CONFIRM,
        // VERIFY, RELEASE_LOCKOWNER, DESTROY_SESSION, FREE_STATEID,
        // DESTROY_CLIENTID, RECLAIM_COMPLETE.
        7 | 8 | 13 | 15..=17 | 19 | 22..=24 | 30..=32 | 36 | 37 | 39 | 44 | 45 | 57 | 58 => {}
        _ => return None,
    }
    Some(())
}
