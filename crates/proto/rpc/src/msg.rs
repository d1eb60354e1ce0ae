//! ONC RPC message headers (RFC 5531): calls and replies, with AUTH_SYS
//! credentials. The procedure's arguments and results are left to the
//! program's decoder ([`crate::nfs`]).

use crate::xdr::Xdr;

/// `msg_type`.
const CALL: u32 = 0;
const REPLY: u32 = 1;
/// Authentication flavours.
pub const AUTH_NONE: u32 = 0;
pub const AUTH_SYS: u32 = 1;
/// Credentials and verifiers are at most 400 bytes (RFC 5531 section 8.2).
const MAX_AUTH: usize = 400;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub xid: u32,
    pub program: u32,
    pub version: u32,
    pub procedure: u32,
    pub auth_flavor: u32,
    /// AUTH_SYS uid and gid.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Where the procedure's arguments start in the message.
    pub args_at: usize,
}

/// `reply_stat` and what follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyStatus {
    /// MSG_ACCEPTED with its `accept_stat` (0 = SUCCESS).
    Accepted(u32),
    /// MSG_DENIED with its `reject_stat` (0 = RPC_MISMATCH, 1 = AUTH_ERROR).
    Denied(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply {
    pub xid: u32,
    pub status: ReplyStatus,
    /// Where the procedure's results start (meaningful when accepted
    /// with SUCCESS).
    pub results_at: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    Call(Call),
    Reply(Reply),
}

impl Message {
    pub fn xid(&self) -> u32 {
        match self {
            Message::Call(c) => c.xid,
            Message::Reply(r) => r.xid,
        }
    }
}

/// Whether `buf` may start an RPC message: the first words [`parse`]
/// checks, without parsing (a call's message type and RPC version, a
/// reply's type and status). Every message `parse` takes passes; of other
/// datagrams, about one in two billion.
#[inline]
pub fn may_be_message(buf: &[u8]) -> bool {
    let word = |at: usize| {
        buf.get(at..at + 4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    };
    match word(4) {
        Some(CALL) => word(8) == Some(2),
        Some(REPLY) => matches!(word(8), Some(0 | 1)),
        _ => false,
    }
}

/// Parses an RPC message header from the start of `buf` (one whole
/// message, without TCP's record mark). `None` if `buf` is not an RPC
/// message as far as its header goes: the checks are strict enough to
/// find message boundaries again in a stream that lost bytes.
pub fn parse(buf: &[u8]) -> Option<Message> {
    let mut x = Xdr::new(buf);
    let xid = x.u32()?;
    match x.u32()? {
        CALL => {
            if x.u32()? != 2 {
                return None;
            }
            let program = x.u32()?;
            let version = x.u32()?;
            let procedure = x.u32()?;
            let auth_flavor = x.u32()?;
            let cred = x.opaque_max(MAX_AUTH)?;
            let (mut uid, mut gid) = (None, None);
            if auth_flavor == AUTH_SYS {
                let mut c = Xdr::new(cred);
                let _stamp = c.u32();
                if c.opaque_max(255).is_some() {
                    uid = c.u32();
                    gid = c.u32();
                }
            }
            let _verf_flavor = x.u32()?;
            x.opaque_max(MAX_AUTH)?;
            Some(Message::Call(Call {
                xid,
                program,
                version,
                procedure,
                auth_flavor,
                uid,
                gid,
                args_at: x.pos(),
            }))
        }
        REPLY => {
            let status = match x.u32()? {
                0 => {
                    let _verf_flavor = x.u32()?;
                    x.opaque_max(MAX_AUTH)?;
                    let accept = x.u32()?;
                    if accept > 5 {
                        return None;
                    }
                    ReplyStatus::Accepted(accept)
                }
                1 => {
                    let reject = x.u32()?;
                    if reject > 1 {
                        return None;
                    }
                    ReplyStatus::Denied(reject)
                }
                _ => return None,
            };
            Some(Message::Reply(Reply {
                xid,
                status,
                results_at: x.pos(),
            }))
        }
        _ => None,
    }
}

/// Programs weir names.
pub fn program_name(program: u32) -> Option<&'static str> {
    Some(match program {
        100000 => "portmap",
        100003 => "nfs",
        100005 => "mount",
        100011 => "rquota",
        100021 => "nlm",
        100024 => "status",
        100227 => "nfs_acl",
        _ => return None,
    })
}

/// The procedure's name for programs weir knows.
pub fn procedure_name(program: u32, version: u32, procedure: u32) -> Option<&'static str> {
    const PMAP2: &[&str] = &["NULL", "SET", "UNSET", "GETPORT", "DUMP", "CALLIT"];
    const RPCB: &[&str] = &[
        "NULL",
        "SET",
        "UNSET",
        "GETADDR",
        "DUMP",
        "CALLIT",
        "GETTIME",
        "UADDR2TADDR",
        "TADDR2UADDR",
        "GETVERSADDR",
        "INDIRECT",
        "GETADDRLIST",
        "GETSTAT",
    ];
    const MOUNT: &[&str] = &["NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"];
    const NFS2: &[&str] = &[
        "NULL",
        "GETATTR",
        "SETATTR",
        "ROOT",
        "LOOKUP",
        "READLINK",
        "READ",
        "WRITECACHE",
        "WRITE",
        "CREATE",
        "REMOVE",
        "RENAME",
        "LINK",
        "SYMLINK",
        "MKDIR",
        "RMDIR",
        "READDIR",
        "STATFS",
    ];
    const NFS4: &[&str] = &["NULL", "COMPOUND"];
    let table = match (program, version) {
        (100000, 2) => PMAP2,
        (100000, 3 | 4) => RPCB,
        (100005, 1..=3) => MOUNT,
        (100003, 2) => NFS2,
        (100003, 3) => crate::nfs::V3_PROCEDURES,
        (100003, 4) => NFS4,
        _ => return None,
    };
    table.get(procedure as usize).copied()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An AUTH_SYS call header, as the tests build them.
    pub fn call_header(xid: u32, prog: u32, vers: u32, proc_: u32) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [xid, 0, 2, prog, vers, proc_, AUTH_SYS] {
            v.extend_from_slice(&w.to_be_bytes());
        }
        let mut cred = Vec::new();
        cred.extend_from_slice(&7u32.to_be_bytes());
        cred.extend_from_slice(&4u32.to_be_bytes());
        cred.extend_from_slice(b"host");
        for w in [1000u32, 100, 0] {
            cred.extend_from_slice(&w.to_be_bytes());
        }
        v.extend_from_slice(&(cred.len() as u32).to_be_bytes());
        v.extend_from_slice(&cred);
        v.extend_from_slice(&[0; 8]);
        v
    }

    pub fn reply_header(xid: u32) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [xid, 1, 0, 0, 0, 0] {
            v.extend_from_slice(&w.to_be_bytes());
        }
        v
    }

    #[test]
    fn a_call_and_its_reply() {
        let c = call_header(0x1234, 100003, 3, 6);
        let Some(Message::Call(call)) = parse(&c) else {
            panic!("not a call")
        };
        assert_eq!(
            (call.xid, call.program, call.version, call.procedure),
            (0x1234, 100003, 3, 6)
        );
        assert_eq!((call.uid, call.gid), (Some(1000), Some(100)));
        assert_eq!(call.args_at, c.len());
        let r = reply_header(0x1234);
        assert_eq!(
            parse(&r),
            Some(Message::Reply(Reply {
                xid: 0x1234,
                status: ReplyStatus::Accepted(0),
                results_at: 24
            }))
        );
        assert_eq!(procedure_name(100003, 3, 6), Some("READ"));
    }

    /// The gate before the parse: every message `parse` takes passes it;
    /// zeros (a generator's payload), text and a wrong version do not.
    #[test]
    fn may_be_message_lets_every_parsed_message_through() {
        let mut call = call_header(9, 100003, 3, 1);
        let reply = reply_header(9);
        let mut denied = reply_header(9);
        denied[11] = 1;
        denied.truncate(16);
        for m in [&call, &reply, &denied] {
            assert!(parse(m).is_some());
            assert!(may_be_message(m));
            for cut in 0..m.len() {
                assert!(parse(&m[..cut]).is_none() || may_be_message(&m[..cut]));
            }
        }
        assert!(!may_be_message(&[0; 18]));
        assert!(!may_be_message(&[0; 64]));
        assert!(!may_be_message(b"GET / HTTP/1.1\r\n\r\n"));
        assert!(!may_be_message(&call[..11]));
        call[11] = 3;
        assert!(!may_be_message(&call));
    }

    #[test]
    fn not_rpc() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\n\r\n"), None);
        assert_eq!(parse(&[0; 3]), None);
        let mut c = call_header(1, 100003, 3, 0);
        c[11] = 3; // rpcvers 3
        assert_eq!(parse(&c), None);
        for cut in 0..c.len() {
            let _ = parse(&c[..cut]);
        }
    }
}
