//! The rpc and nfs tables: `rpc/*.parquet`, one row per ONC RPC call with
//! its matched reply (or a call that got none, or a reply whose call was
//! not seen), and `nfs/*.parquet`, one row per NFS or MOUNT operation of
//! those calls (one per NFSv3 call, one per NFSv4 COMPOUND operation),
//! joined to its call by `rpc_id = rpc.id`. Columns are documented in
//! [`RPC_COLUMNS`], [`NFS_COLUMNS`] and docs/RPC.md.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, FixedSizeBinaryBuilder, Int64Builder, StringBuilder, StringDictionaryBuilder,
    TimestampNanosecondBuilder, UInt8Builder, UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::types::Int16Type;
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use rpc::{ReplyStatus, Transaction};

use crate::error::StoreError;
use crate::schema::{addr, text, ts_type, u8t, u16t, u32t, u64t};
use crate::table::{Dictionaries, TableFiles, writer_properties};

pub const RPC_DIR: &str = "rpc";
pub const NFS_DIR: &str = "nfs";
/// Version of the rpc and nfs tables' columns.
pub const RPC_SCHEMA_VERSION: u32 = 1;

/// One column: name, type, nullable, what it holds.
pub struct TableColumn {
    pub name: &'static str,
    pub data_type: fn() -> DataType,
    pub nullable: bool,
    pub doc: &'static str,
}

fn dict() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int16), Box::new(DataType::Utf8))
}
fn i64t() -> DataType {
    DataType::Int64
}
fn boolt() -> DataType {
    DataType::Boolean
}

macro_rules! col {
    ($name:literal, $ty:ident, $nullable:literal, $doc:literal) => {
        TableColumn {
            name: $name,
            data_type: $ty,
            nullable: $nullable,
            doc: $doc,
        }
    };
}

pub const RPC_COLUMNS: &[TableColumn] = &[
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
    col!("transport", dict, false, "tcp or udp"),
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
        dict,
        true,
        "the program's name, where weir knows it"
    ),
    col!(
        "procedure_name",
        dict,
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
        dict,
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

pub const NFS_COLUMNS: &[TableColumn] = &[
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
        dict,
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
        "file handle the operation acts on, hashed (64-bit FNV-1a)"
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

fn schema_of(cols: &[TableColumn]) -> SchemaRef {
    Arc::new(Schema::new(
        cols.iter()
            .map(|c| Field::new(c.name, (c.data_type)(), c.nullable))
            .collect::<Vec<_>>(),
    ))
}

pub fn rpc_schema() -> SchemaRef {
    schema_of(RPC_COLUMNS)
}

pub fn nfs_schema() -> SchemaRef {
    schema_of(NFS_COLUMNS)
}

const BATCH_ROWS: usize = 64 * 1024;

fn ts_builder() -> TimestampNanosecondBuilder {
    TimestampNanosecondBuilder::new().with_timezone("UTC")
}

fn append_addr(b: &mut FixedSizeBinaryBuilder, a: &[u8; 16]) {
    // The builder was made for 16-byte values, so this cannot fail.
    b.append_value(a).expect("16-byte address");
}

struct RpcBuilders {
    id: UInt64Builder,
    ts: TimestampNanosecondBuilder,
    call_ts: TimestampNanosecondBuilder,
    last_call_ts: TimestampNanosecondBuilder,
    reply_ts: TimestampNanosecondBuilder,
    latency: Int64Builder,
    client: FixedSizeBinaryBuilder,
    client_port: UInt16Builder,
    server: FixedSizeBinaryBuilder,
    server_port: UInt16Builder,
    transport: StringDictionaryBuilder<Int16Type>,
    xid: UInt32Builder,
    program: UInt32Builder,
    version: UInt32Builder,
    procedure: UInt32Builder,
    program_name: StringDictionaryBuilder<Int16Type>,
    procedure_name: StringDictionaryBuilder<Int16Type>,
    auth_flavor: UInt32Builder,
    uid: UInt32Builder,
    gid: UInt32Builder,
    reply_stat: StringDictionaryBuilder<Int16Type>,
    accept_stat: UInt32Builder,
    status: UInt32Builder,
    call_bytes: UInt32Builder,
    reply_bytes: UInt32Builder,
    retransmits: UInt32Builder,
    gap: BooleanBuilder,
    ops: UInt16Builder,
    rows: usize,
}

impl RpcBuilders {
    fn new() -> Self {
        RpcBuilders {
            id: UInt64Builder::new(),
            ts: ts_builder(),
            call_ts: ts_builder(),
            last_call_ts: ts_builder(),
            reply_ts: ts_builder(),
            latency: Int64Builder::new(),
            client: FixedSizeBinaryBuilder::new(16),
            client_port: UInt16Builder::new(),
            server: FixedSizeBinaryBuilder::new(16),
            server_port: UInt16Builder::new(),
            transport: StringDictionaryBuilder::new(),
            xid: UInt32Builder::new(),
            program: UInt32Builder::new(),
            version: UInt32Builder::new(),
            procedure: UInt32Builder::new(),
            program_name: StringDictionaryBuilder::new(),
            procedure_name: StringDictionaryBuilder::new(),
            auth_flavor: UInt32Builder::new(),
            uid: UInt32Builder::new(),
            gid: UInt32Builder::new(),
            reply_stat: StringDictionaryBuilder::new(),
            accept_stat: UInt32Builder::new(),
            status: UInt32Builder::new(),
            call_bytes: UInt32Builder::new(),
            reply_bytes: UInt32Builder::new(),
            retransmits: UInt32Builder::new(),
            gap: BooleanBuilder::new(),
            ops: UInt16Builder::new(),
            rows: 0,
        }
    }

    fn push(&mut self, id: u64, t: &Transaction) {
        let ts = t.call_ts.or(t.reply_ts).unwrap_or(0);
        self.id.append_value(id);
        self.ts.append_value(ts);
        self.call_ts.append_option(t.call_ts);
        self.last_call_ts.append_option(t.last_call_ts);
        self.reply_ts.append_option(t.reply_ts);
        self.latency.append_option(match (t.call_ts, t.reply_ts) {
            (Some(c), Some(r)) => Some(r - c),
            _ => None,
        });
        append_addr(&mut self.client, &t.client);
        self.client_port.append_value(t.client_port);
        append_addr(&mut self.server, &t.server);
        self.server_port.append_value(t.server_port);
        self.transport.append_value(if t.proto == rpc::track::UDP {
            "udp"
        } else {
            "tcp"
        });
        self.xid.append_value(t.xid);
        let c = t.call.as_ref();
        self.program.append_option(c.map(|c| c.program));
        self.version.append_option(c.map(|c| c.version));
        self.procedure.append_option(c.map(|c| c.procedure));
        self.program_name
            .append_option(c.and_then(|c| rpc::msg::program_name(c.program)));
        self.procedure_name.append_option(
            c.and_then(|c| rpc::msg::procedure_name(c.program, c.version, c.procedure)),
        );
        self.auth_flavor.append_option(c.map(|c| c.auth_flavor));
        self.uid.append_option(c.and_then(|c| c.uid));
        self.gid.append_option(c.and_then(|c| c.gid));
        let (stat, accept) = match t.reply {
            Some(ReplyStatus::Accepted(a)) => (Some("accepted"), Some(a)),
            Some(ReplyStatus::Denied(r)) => (Some("denied"), Some(r)),
            None => (None, None),
        };
        self.reply_stat.append_option(stat);
        self.accept_stat.append_option(accept);
        self.status.append_option(t.status);
        self.call_bytes.append_value(t.call_bytes);
        self.reply_bytes.append_value(t.reply_bytes);
        self.retransmits.append_value(t.retransmits);
        self.gap.append_value(t.gap);
        self.ops
            .append_value(t.ops().len().min(u16::MAX as usize) as u16);
        self.rows += 1;
    }

    fn finish(&mut self) -> Result<RecordBatch, arrow_schema::ArrowError> {
        self.rows = 0;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.id.finish()),
            Arc::new(self.ts.finish()),
            Arc::new(self.call_ts.finish()),
            Arc::new(self.last_call_ts.finish()),
            Arc::new(self.reply_ts.finish()),
            Arc::new(self.latency.finish()),
            Arc::new(self.client.finish()),
            Arc::new(self.client_port.finish()),
            Arc::new(self.server.finish()),
            Arc::new(self.server_port.finish()),
            Arc::new(self.transport.finish()),
            Arc::new(self.xid.finish()),
            Arc::new(self.program.finish()),
            Arc::new(self.version.finish()),
            Arc::new(self.procedure.finish()),
            Arc::new(self.program_name.finish()),
            Arc::new(self.procedure_name.finish()),
            Arc::new(self.auth_flavor.finish()),
            Arc::new(self.uid.finish()),
            Arc::new(self.gid.finish()),
            Arc::new(self.reply_stat.finish()),
            Arc::new(self.accept_stat.finish()),
            Arc::new(self.status.finish()),
            Arc::new(self.call_bytes.finish()),
            Arc::new(self.reply_bytes.finish()),
            Arc::new(self.retransmits.finish()),
            Arc::new(self.gap.finish()),
            Arc::new(self.ops.finish()),
        ];
        RecordBatch::try_new(rpc_schema(), cols)
    }
}

struct NfsBuilders {
    rpc_id: UInt64Builder,
    ts: TimestampNanosecondBuilder,
    program: UInt32Builder,
    version: UInt32Builder,
    op_index: UInt16Builder,
    op: UInt32Builder,
    op_name: StringDictionaryBuilder<Int16Type>,
    status: UInt32Builder,
    fh: UInt64Builder,
    name: StringBuilder,
    name2: StringBuilder,
    offset: UInt64Builder,
    count: UInt32Builder,
    stable: UInt8Builder,
    res_count: UInt32Builder,
    eof: BooleanBuilder,
    res_fh: UInt64Builder,
    ftype: UInt8Builder,
    size: UInt64Builder,
    mode: UInt32Builder,
    uid: UInt32Builder,
    gid: UInt32Builder,
    mtime: TimestampNanosecondBuilder,
    rows: usize,
}

impl NfsBuilders {
    fn new() -> Self {
        NfsBuilders {
            rpc_id: UInt64Builder::new(),
            ts: ts_builder(),
            program: UInt32Builder::new(),
            version: UInt32Builder::new(),
            op_index: UInt16Builder::new(),
            op: UInt32Builder::new(),
            op_name: StringDictionaryBuilder::new(),
            status: UInt32Builder::new(),
            fh: UInt64Builder::new(),
            name: StringBuilder::new(),
            name2: StringBuilder::new(),
            offset: UInt64Builder::new(),
            count: UInt32Builder::new(),
            stable: UInt8Builder::new(),
            res_count: UInt32Builder::new(),
            eof: BooleanBuilder::new(),
            res_fh: UInt64Builder::new(),
            ftype: UInt8Builder::new(),
            size: UInt64Builder::new(),
            mode: UInt32Builder::new(),
            uid: UInt32Builder::new(),
            gid: UInt32Builder::new(),
            mtime: ts_builder(),
            rows: 0,
        }
    }

    fn push(&mut self, id: u64, t: &Transaction) {
        let Some(c) = t.call.as_ref() else { return };
        let ts = t.call_ts.or(t.reply_ts).unwrap_or(0);
        for op in t.ops() {
            self.rpc_id.append_value(id);
            self.ts.append_value(ts);
            self.program.append_value(c.program);
            self.version.append_value(c.version);
            self.op_index.append_value(op.index);
            self.op.append_value(op.op);
            self.op_name.append_value(op.name_of(c.program, c.version));
            self.status.append_option(op.status);
            self.fh.append_option(op.fh);
            self.name.append_option(op.name.as_deref());
            self.name2.append_option(op.name2.as_deref());
            self.offset.append_option(op.offset);
            self.count.append_option(op.count);
            self.stable
                .append_option(op.stable.map(|s| s.min(255) as u8));
            self.res_count.append_option(op.res_count);
            self.eof.append_option(op.eof);
            self.res_fh.append_option(op.res_fh);
            let a = op.attr.unwrap_or_default();
            self.ftype.append_option(a.ftype.map(|t| t.min(255) as u8));
            self.size.append_option(a.size);
            self.mode.append_option(a.mode);
            self.uid.append_option(a.uid);
            self.gid.append_option(a.gid);
            self.mtime.append_option(a.mtime_ns);
            self.rows += 1;
        }
    }

    fn finish(&mut self) -> Result<RecordBatch, arrow_schema::ArrowError> {
        self.rows = 0;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.rpc_id.finish()),
            Arc::new(self.ts.finish()),
            Arc::new(self.program.finish()),
            Arc::new(self.version.finish()),
            Arc::new(self.op_index.finish()),
            Arc::new(self.op.finish()),
            Arc::new(self.op_name.finish()),
            Arc::new(self.status.finish()),
            Arc::new(self.fh.finish()),
            Arc::new(self.name.finish()),
            Arc::new(self.name2.finish()),
            Arc::new(self.offset.finish()),
            Arc::new(self.count.finish()),
            Arc::new(self.stable.finish()),
            Arc::new(self.res_count.finish()),
            Arc::new(self.eof.finish()),
            Arc::new(self.res_fh.finish()),
            Arc::new(self.ftype.finish()),
            Arc::new(self.size.finish()),
            Arc::new(self.mode.finish()),
            Arc::new(self.uid.finish()),
            Arc::new(self.gid.finish()),
            Arc::new(self.mtime.finish()),
        ];
        RecordBatch::try_new(nfs_schema(), cols)
    }
}

/// Writes transactions into the dataset's rpc and nfs tables, as
/// `rpc/rpc-SSSS-NNNNN.parquet` and `nfs/nfs-SSSS-NNNNN.parquet` for
/// writer number SSSS. Ids are the writer number in the top 16 bits and a
/// count below, so that several writers (capture workers, sources of a
/// conversion) never share one.
pub struct RpcWriter {
    root: PathBuf,
    rpc: RpcBuilders,
    nfs: NfsBuilders,
    rpc_files: TableFiles,
    nfs_files: TableFiles,
    writer: u16,
    next: u64,
}

impl RpcWriter {
    /// Writes into the dataset at `root` (its rpc/ and nfs/ directories
    /// must exist).
    pub fn new(root: &Path, writer: u16, rotate_rows: u64) -> Self {
        // Arrow dictionaries already; Parquet keeps them as such.
        let dict = [
            "transport",
            "program_name",
            "procedure_name",
            "reply_stat",
            "op_name",
        ];
        RpcWriter {
            root: root.to_path_buf(),
            rpc: RpcBuilders::new(),
            nfs: NfsBuilders::new(),
            rpc_files: TableFiles::new(
                &root.join(RPC_DIR),
                RPC_DIR,
                format!("rpc-{writer:04}"),
                rpc_schema(),
                writer_properties("rpc", RPC_SCHEMA_VERSION, Dictionaries::Only(&dict)),
                rotate_rows,
            ),
            nfs_files: TableFiles::new(
                &root.join(NFS_DIR),
                NFS_DIR,
                format!("nfs-{writer:04}"),
                nfs_schema(),
                writer_properties("nfs", RPC_SCHEMA_VERSION, Dictionaries::Only(&dict)),
                rotate_rows,
            ),
            writer,
            next: 0,
        }
    }

    pub fn push(&mut self, t: &Transaction) -> Result<(), StoreError> {
        let id = (self.writer as u64) << 48 | self.next;
        self.next += 1;
        self.rpc.push(id, t);
        self.nfs.push(id, t);
        if self.rpc.rows >= BATCH_ROWS || self.nfs.rows >= BATCH_ROWS {
            self.write_batches()?;
        }
        Ok(())
    }

    /// Rows written to the rpc table so far.
    pub fn rows(&self) -> u64 {
        self.next
    }

    fn write_batches(&mut self) -> Result<(), StoreError> {
        let invalid = |e: arrow_schema::ArrowError| StoreError::Invalid {
            path: self.root.clone(),
            message: format!("building an rpc batch: {e}"),
        };
        if self.rpc.rows > 0 {
            let b = self.rpc.finish().map_err(invalid)?;
            self.rpc_files.write(&b)?;
        }
        if self.nfs.rows > 0 {
            let b = self.nfs.finish().map_err(invalid)?;
            self.nfs_files.write(&b)?;
        }
        Ok(())
    }

    /// Closes the files; returns the dataset-relative names written (rpc
    /// files, nfs files).
    pub fn finish(mut self) -> Result<(Vec<String>, Vec<String>), StoreError> {
        self.write_batches()?;
        Ok((self.rpc_files.finish()?, self.nfs_files.finish()?))
    }
}
