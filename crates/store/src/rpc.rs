//! The rpc and nfs tables: `rpc/*.parquet`, one row per ONC RPC call with
//! its matched reply (or a call that got none, or a reply whose call was
//! not seen), and `nfs/*.parquet`, one row per NFS or MOUNT operation of
//! those calls (one per NFSv3 call, one per NFSv4 COMPOUND operation),
//! joined to its call by `rpc_id = rpc.id`. Columns are documented in
//! [`RPC_COLUMNS`], [`NFS_COLUMNS`] and docs/RPC.md. The rows are the RPC
//! tracker's own: [`rpc::Transaction`] and its [`rpc::Op`]s, written as
//! they are.

use std::path::Path;

use arrow_schema::SchemaRef;
use pqcodec::encode::{ColumnEncoder, ColumnSpec, EncodeOptions, Mode, TextEncoder, Value};
use rpc::{Call, ReplyStatus, Transaction};

use crate::columns::{
    Column, addr, boolt, col, dict16, i64t, schema_of, text, ts_type, u8t, u16t, u32t, u64t,
};
use crate::error::StoreError;
use crate::table::{EncodedTable, EncodedTableSpec};

pub const RPC_DIR: &str = "rpc";
pub const NFS_DIR: &str = "nfs";
/// Version of the rpc and nfs tables' columns.
/// 2: file handles hashed with XXH3-64 (1: FNV-1a).
pub const RPC_SCHEMA_VERSION: u32 = 2;

pub const RPC_COLUMNS: &[Column] = &[
    col!(
        "id",
        u64t,
        false,
        "the call's id in the dataset; nfs.rpc_id refers to it"
    ),
    col!(
        "ts",
        ts_type,
        false,
        "the call's first time, or the reply's for a reply without its call"
    ),
    col!(
        "call_ts",
        ts_type,
        true,
        "first time the call was seen (the segment completing it)"
    ),
    col!(
        "last_call_ts",
        ts_type,
        true,
        "last time the call was seen (differs when retransmitted)"
    ),
    col!(
        "reply_ts",
        ts_type,
        true,
        "time of the reply; null when none came"
    ),
    col!("latency_ns", i64t, true, "reply_ts - call_ts, ns"),
    col!(
        "client",
        addr,
        false,
        "the caller's address, IPv4 mapped into IPv6"
    ),
    col!("client_port", u16t, false, "the caller's port"),
    col!("server", addr, false, "the server's address"),
    col!("server_port", u16t, false, "the server's port"),
    col!("transport", dict16, false, "tcp or udp"),
    col!("xid", u32t, false, "the transaction id"),
    col!(
        "program",
        u32t,
        true,
        "RPC program (100003 nfs, 100005 mount, 100000 portmap)"
    ),
    col!("version", u32t, true, "program version"),
    col!("procedure", u32t, true, "procedure number"),
    col!(
        "program_name",
        dict16,
        true,
        "the program's name, where weir knows it"
    ),
    col!(
        "procedure_name",
        dict16,
        true,
        "the procedure's name (NFSv4: COMPOUND)"
    ),
    col!(
        "auth_flavor",
        u32t,
        true,
        "credential flavour (0 none, 1 AUTH_SYS, 6 RPCSEC_GSS)"
    ),
    col!("uid", u32t, true, "AUTH_SYS uid"),
    col!("gid", u32t, true, "AUTH_SYS gid"),
    col!(
        "reply_stat",
        dict16,
        true,
        "accepted or denied; null without a reply"
    ),
    col!(
        "accept_stat",
        u32t,
        true,
        "accepted: 0 SUCCESS .. 5 SYSTEM_ERR; denied: the reject_stat"
    ),
    col!(
        "status",
        u32t,
        true,
        "the program's status: nfsstat3, the COMPOUND's nfsstat4, mountstat3"
    ),
    col!(
        "call_bytes",
        u32t,
        false,
        "RPC bytes of the call (without TCP record marks)"
    ),
    col!("reply_bytes", u32t, false, "RPC bytes of the reply"),
    col!(
        "retransmits",
        u32t,
        false,
        "copies of the call seen after the first"
    ),
    col!(
        "gap",
        boolt,
        false,
        "a capture gap fell inside the call or reply"
    ),
    col!("ops", u16t, false, "rows of this call in the nfs table"),
];

pub const NFS_COLUMNS: &[Column] = &[
    col!("rpc_id", u64t, false, "the call: rpc.id"),
    col!("ts", ts_type, false, "the call's ts (as rpc.ts)"),
    col!("program", u32t, false, "100003 nfs or 100005 mount"),
    col!("version", u32t, false, "NFS or MOUNT version"),
    col!(
        "op_index",
        u16t,
        false,
        "position in the COMPOUND (0 for NFSv3 and MOUNT)"
    ),
    col!(
        "op",
        u32t,
        false,
        "NFSv3/MOUNT procedure or NFSv4 operation number"
    ),
    col!(
        "op_name",
        dict16,
        false,
        "its name (READ, LOOKUP, PUTFH, MNT, ...)"
    ),
    col!(
        "status",
        u32t,
        true,
        "the operation's status; null without a reply or when not reached"
    ),
    col!(
        "fh",
        u64t,
        true,
        "file handle the operation acts on, hashed (XXH3-64, seed 0)"
    ),
    col!(
        "name",
        text,
        true,
        "name argument (LOOKUP, CREATE, REMOVE, RENAME from, MNT path, ...)"
    ),
    col!("name2", text, true, "RENAME's new name"),
    col!("offset", u64t, true, "READ, WRITE, COMMIT, LOCK offset"),
    col!(
        "count",
        u32t,
        true,
        "bytes asked for (READ, WRITE, COMMIT, READDIR)"
    ),
    col!(
        "stable",
        u8t,
        true,
        "WRITE: 0 UNSTABLE, 1 DATA_SYNC, 2 FILE_SYNC"
    ),
    col!(
        "res_count",
        u32t,
        true,
        "bytes read or written per the reply (READDIR: entries)"
    ),
    col!("eof", boolt, true, "READ/READDIR reached the end"),
    col!(
        "res_fh",
        u64t,
        true,
        "handle returned (LOOKUP, CREATE, GETFH, MNT), hashed"
    ),
    col!(
        "ftype",
        u8t,
        true,
        "returned attributes: 1 file, 2 directory, 5 symlink, ..."
    ),
    col!("size", u64t, true, "returned attributes: size"),
    col!("mode", u32t, true, "returned attributes: permission bits"),
    col!("uid", u32t, true, "returned attributes: owner"),
    col!("gid", u32t, true, "returned attributes: group"),
    col!(
        "mtime",
        ts_type,
        true,
        "returned attributes: modification time"
    ),
];

pub fn rpc_schema() -> SchemaRef {
    schema_of(RPC_COLUMNS)
}

pub fn nfs_schema() -> SchemaRef {
    schema_of(NFS_COLUMNS)
}

/// Rows per row group. A row group's pages stay in memory until it ends,
/// and only then are they written: with a million rows, the NFSv3 trace's
/// whole tables (133 k calls) were written, and synced, after its last
/// transaction, with nothing else left to run; `weir convert --rpc` took
/// 4 % longer. 64 Ki rows cost `weir analyze rpc` about 1 %.
pub const ROW_GROUP_ROWS: u64 = 1 << 16;

const DICT: Mode = Mode::Dictionary;
const DELTA: Mode = Mode::Delta;

pqcodec::column_set! {
    /// The rpc table's encoders.
    struct RpcColumns for RPC_COLUMNS, |o| {
        id: ColumnEncoder<u64> = ColumnEncoder::new(ColumnSpec::new(false, DELTA), o),
        ts: ColumnEncoder<u64> = ColumnEncoder::new(ColumnSpec::signed(false, DELTA), o),
        call_ts: ColumnEncoder<u64> = ColumnEncoder::new(ColumnSpec::signed(true, DELTA), o),
        last_call_ts: ColumnEncoder<u64> =
            ColumnEncoder::new(ColumnSpec::signed(true, DELTA), o),
        reply_ts: ColumnEncoder<u64> = ColumnEncoder::new(ColumnSpec::signed(true, DELTA), o),
        latency_ns: ColumnEncoder<u64> = ColumnEncoder::new(ColumnSpec::signed(true, DELTA), o),
        client: ColumnEncoder<u128> = ColumnEncoder::new(ColumnSpec::fixed(false, 16), o),
        client_port: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DICT), o),
        server: ColumnEncoder<u128> = ColumnEncoder::new(ColumnSpec::fixed(false, 16), o),
        server_port: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DICT), o),
        transport: ColumnEncoder<&'static str> = ColumnEncoder::new(ColumnSpec::names(false), o),
        xid: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DELTA), o),
        program: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        version: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        procedure: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        program_name: ColumnEncoder<&'static str> = ColumnEncoder::new(ColumnSpec::names(true), o),
        procedure_name: ColumnEncoder<&'static str> = ColumnEncoder::new(ColumnSpec::names(true), o),
        auth_flavor: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        uid: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        gid: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        reply_stat: ColumnEncoder<&'static str> = ColumnEncoder::new(ColumnSpec::names(true), o),
        accept_stat: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        status: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        call_bytes: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DICT), o),
        reply_bytes: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DICT), o),
        retransmits: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DICT), o),
        gap: ColumnEncoder<bool> = ColumnEncoder::new(ColumnSpec::new(false, Mode::Plain), o),
        ops: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DICT), o),
    }
}

pqcodec::column_set! {
    /// The nfs table's encoders.
    struct NfsColumns for NFS_COLUMNS, |o| {
        rpc_id: ColumnEncoder<u64> = ColumnEncoder::new(ColumnSpec::new(false, DELTA), o),
        ts: ColumnEncoder<u64> = ColumnEncoder::new(ColumnSpec::signed(false, DELTA), o),
        program: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DICT), o),
        version: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DICT), o),
        op_index: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DICT), o),
        op: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(false, DICT), o),
        op_name: ColumnEncoder<&'static str> = ColumnEncoder::new(ColumnSpec::names(false), o),
        status: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        fh: ColumnEncoder<u64> = ColumnEncoder::new(hashes(), o),
        name: TextEncoder = TextEncoder::new(o),
        name2: TextEncoder = TextEncoder::new(o),
        offset: ColumnEncoder<u64> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        count: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        stable: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        res_count: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        eof: ColumnEncoder<bool> = ColumnEncoder::new(ColumnSpec::new(true, Mode::Plain), o),
        res_fh: ColumnEncoder<u64> = ColumnEncoder::new(hashes(), o),
        ftype: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        size: ColumnEncoder<u64> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        mode: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        uid: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        gid: ColumnEncoder<u32> = ColumnEncoder::new(ColumnSpec::new(true, DICT), o),
        mtime: ColumnEncoder<u64> = ColumnEncoder::new(ColumnSpec::signed(true, DICT), o),
    }
}

/// Hashed file handles: repeated, but random where they are not, so a
/// dictionary that overflows goes PLAIN rather than delta.
const fn hashes() -> ColumnSpec {
    ColumnSpec {
        fallback: Mode::Plain,
        ..ColumnSpec::new(true, DICT)
    }
}

#[inline(always)]
fn put<K: Value>(e: &mut ColumnEncoder<K>, v: Option<K>) {
    match v {
        Some(v) => e.push(v),
        None => e.push_null(),
    }
}

impl RpcColumns {
    /// The row of `t`, call number `id`, with `ops` rows in the nfs table.
    /// The row's `id`, `ts`, `latency_ns`, `transport`, the names and `ops`
    /// are derived here.
    #[inline(always)]
    fn push(&mut self, id: u64, t: &Transaction, ops: usize) {
        let ts = t.call_ts.or(t.reply_ts).unwrap_or(0);
        let c = t.call.as_ref();
        self.id.push(id);
        self.ts.push(ts as u64);
        put(&mut self.call_ts, t.call_ts.map(|v| v as u64));
        put(&mut self.last_call_ts, t.last_call_ts.map(|v| v as u64));
        put(&mut self.reply_ts, t.reply_ts.map(|v| v as u64));
        put(
            &mut self.latency_ns,
            match (t.call_ts, t.reply_ts) {
                (Some(c), Some(r)) => Some((r - c) as u64),
                _ => None,
            },
        );
        self.client.push(u128::from_be_bytes(t.client));
        self.client_port.push(t.client_port as u32);
        self.server.push(u128::from_be_bytes(t.server));
        self.server_port.push(t.server_port as u32);
        self.transport.push(if t.proto == rpc::track::UDP {
            "udp"
        } else {
            "tcp"
        });
        self.xid.push(t.xid);
        put(&mut self.program, c.map(|c| c.program));
        put(&mut self.version, c.map(|c| c.version));
        put(&mut self.procedure, c.map(|c| c.procedure));
        put(
            &mut self.program_name,
            c.and_then(|c| rpc::msg::program_name(c.program)),
        );
        put(
            &mut self.procedure_name,
            c.and_then(|c| rpc::msg::procedure_name(c.program, c.version, c.procedure)),
        );
        put(&mut self.auth_flavor, c.map(|c| c.auth_flavor));
        put(&mut self.uid, c.and_then(|c| c.uid));
        put(&mut self.gid, c.and_then(|c| c.gid));
        let (stat, accept) = match t.reply {
            Some(ReplyStatus::Accepted(a)) => (Some("accepted"), Some(a)),
            Some(ReplyStatus::Denied(r)) => (Some("denied"), Some(r)),
            None => (None, None),
        };
        put(&mut self.reply_stat, stat);
        put(&mut self.accept_stat, accept);
        put(&mut self.status, t.status);
        self.call_bytes.push(t.call_bytes);
        self.reply_bytes.push(t.reply_bytes);
        self.retransmits.push(t.retransmits);
        self.gap.push(t.gap);
        self.ops.push(ops.min(u16::MAX as usize) as u32);
    }
}

impl NfsColumns {
    /// The operations of `t`, call number `id` with the header `c`, one row
    /// each (`rpc_id`, `ts`, `program`, `version` and the operation's name
    /// from the call); returns how many rows that made.
    #[inline(always)]
    fn push(&mut self, id: u64, t: &Transaction, c: &Call) -> usize {
        let ts = t.call_ts.or(t.reply_ts).unwrap_or(0);
        let mut n = 0;
        for op in t.ops() {
            let a = op.attr.unwrap_or_default();
            self.rpc_id.push(id);
            self.ts.push(ts as u64);
            self.program.push(c.program);
            self.version.push(c.version);
            self.op_index.push(op.index as u32);
            self.op.push(op.op);
            self.op_name.push(op.name_of(c.program, c.version));
            put(&mut self.status, op.status);
            put(&mut self.fh, op.fh);
            self.name.push(op.name.as_deref());
            self.name2.push(op.name2.as_deref());
            put(&mut self.offset, op.offset);
            put(&mut self.count, op.count);
            put(&mut self.stable, op.stable.map(|s| s.min(255)));
            put(&mut self.res_count, op.res_count);
            put(&mut self.eof, op.eof);
            put(&mut self.res_fh, op.res_fh);
            put(&mut self.ftype, a.ftype.map(|t| t.min(255)));
            put(&mut self.size, a.size);
            put(&mut self.mode, a.mode);
            put(&mut self.uid, a.uid);
            put(&mut self.gid, a.gid);
            put(&mut self.mtime, a.mtime_ns.map(|v| v as u64));
            n += 1;
        }
        n
    }
}

/// Writes transactions into the dataset's rpc and nfs tables, as
/// `rpc/rpc-SSSS-NNNNN.parquet` and `nfs/nfs-SSSS-NNNNN.parquet` for
/// writer number SSSS. Ids are the writer number in the top 16 bits and a
/// count below, so that several writers (capture workers, sources of a
/// conversion) never share one. Rows go straight into weir's own column
/// encoders (as packet records do): through Arrow builders and arrow-rs's
/// writer they cost about 1.4 µs per call on the NFSv3 trace.
pub struct RpcWriter {
    rpc: EncodedTable<RpcColumns>,
    nfs: EncodedTable<NfsColumns>,
    writer: u16,
    next: u64,
}

impl RpcWriter {
    /// Writes into the dataset at `root` (its rpc/ and nfs/ directories
    /// must exist), starting a new file of a table every `rotate_rows`.
    pub fn new(root: &Path, writer: u16, rotate_rows: u64) -> Self {
        // One set of options for the encoders and the page size they are
        // ended at. 16 Ki rows: with 64 Ki, the pages being built (a run
        // list per column where values change row to row) outgrew the
        // cache; 16 Ki made the RPC stage 4 % faster and `weir analyze
        // rpc` 8 % faster, for files 2 % larger. No compression: these
        // tables are a hundredth of the trace's bytes, and on the NFSv3
        // trace storing their pages as they are made `weir analyze rpc`
        // 22 % faster and `weir convert --rpc` 4 % faster, for files 24 %
        // larger.
        let opts = EncodeOptions {
            page_rows: 16 * 1024,
            compress: false,
            ..EncodeOptions::default()
        };
        let spec = |table, schema| EncodedTableSpec {
            table,
            prefix: format!("{table}-{writer:04}"),
            schema,
            schema_version: RPC_SCHEMA_VERSION,
            opts,
            rotate_rows,
            row_group_rows: ROW_GROUP_ROWS,
        };
        RpcWriter {
            rpc: EncodedTable::new(root, spec(RPC_DIR, rpc_schema()), RpcColumns::new(&opts)),
            nfs: EncodedTable::new(root, spec(NFS_DIR, nfs_schema()), NfsColumns::new(&opts)),
            writer,
            next: 0,
        }
    }

    /// Writes one row of the rpc table and, when the call was seen, the
    /// rows of its operations in the nfs table: the tracker's transaction
    /// as it is.
    ///
    /// Inlined, with the column pushes, into the caller's loop over the
    /// tracker's transactions: the fields go straight from the
    /// transaction into the encoders. Out of line, the rows were built in
    /// memory and read back, and with `open` and `rows_added` called
    /// rather than inlined, the RPC stage ran 4 % more instructions on the
    /// NFSv3 trace (1.4 % more inlined, within the noise in time).
    #[inline(always)]
    pub fn push(&mut self, t: &Transaction) -> Result<(), StoreError> {
        let id = (self.writer as u64) << 48 | self.next;
        self.next += 1;
        let n_ops = t.ops().len();
        self.rpc.push_rows(|cols| {
            cols.push(id, t, n_ops);
            1
        })?;
        if let (Some(c), true) = (t.call.as_ref(), n_ops != 0) {
            self.nfs.push_rows(|cols| cols.push(id, t, c))?;
        }
        Ok(())
    }

    /// Rows written to the rpc table so far.
    pub fn rows(&self) -> u64 {
        self.next
    }

    /// Closes the files; returns the dataset-relative names written (rpc
    /// files, nfs files).
    pub fn finish(self) -> Result<(Vec<String>, Vec<String>), StoreError> {
        Ok((self.rpc.finish()?, self.nfs.finish()?))
    }
}
