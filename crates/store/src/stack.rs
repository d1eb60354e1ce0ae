//! The stack table: `stack/*.parquet`, one row per event that `weir stack`
//! saw in the host's own network stack (application send and receive, TCP
//! state, connection state changes, retransmissions, device transmit and
//! receive, sock_ops callbacks, iterator snapshots). The columns are
//! documented in [`STACK_COLUMNS`] and docs/STACK.md.
//!
//! Written with arrow-rs's own writer: tens to hundreds of thousands of
//! events a second, not millions, so the generic writer keeps up.

use std::path::Path;
use std::sync::Arc;

use arrow_array::ArrayRef;
use arrow_array::builder::{
    FixedSizeBinaryBuilder, Int32Builder, StringBuilder, StringDictionaryBuilder,
    TimestampNanosecondBuilder, UInt8Builder, UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_array::types::Int8Type;
use arrow_schema::SchemaRef;

use ::stack::event::StackEvent;

use crate::columns::{
    Column, addr, col, dict8, i32t, schema_of, text, ts_type, u8t, u16t, u32t, u64t,
};
use crate::error::StoreError;
use crate::table::{BatchTable, RowBuilders, TableFiles, writer_properties};

/// Where the table lives in a dataset.
pub const STACK_DIR: &str = "stack";

/// Version of the stack table's columns; bumped when a column changes.
pub const STACK_SCHEMA_VERSION: u32 = 1;

/// Event names, indexed by [`StackEvent::event`] (the eBPF programs' numbering).
/// The last, "interval", is never a row here: in the manifest's and the
/// stats table's counts its events are stack_intervals rows written and
/// its losses are updates the kernel's full per-socket map refused.
pub const EVENT_NAMES: [&str; 12] = [
    "send",
    "recv",
    "tcp_probe",
    "state",
    "retransmit",
    "dev_xmit",
    "dev_recv",
    "sockops_rtt",
    "sockops_retrans",
    "sockops_state",
    "snapshot",
    "interval",
];

/// The kernel's TCP states (include/net/tcp_states.h), by number.
pub const TCP_STATES: [&str; 14] = [
    "UNKNOWN",
    "ESTABLISHED",
    "SYN_SENT",
    "SYN_RECV",
    "FIN_WAIT1",
    "FIN_WAIT2",
    "TIME_WAIT",
    "CLOSE",
    "CLOSE_WAIT",
    "LAST_ACK",
    "LISTEN",
    "CLOSING",
    "NEW_SYN_RECV",
    "BOUND_INACTIVE",
];

/// A TCP state's name (`ESTABLISHED`, ...).
pub fn state_name(s: u8) -> &'static str {
    TCP_STATES.get(s as usize).copied().unwrap_or("UNKNOWN")
}

/// The columns, in file order. Only `ts`, `event`, `netns`, `family` and
/// `proto` are never null.
pub const STACK_COLUMNS: &[Column] = &[
    col!(
        "ts",
        ts_type,
        false,
        "when the kernel ran the event, ns since the epoch, UTC"
    ),
    col!(
        "event",
        dict8,
        false,
        "send, recv, tcp_probe, state, retransmit, dev_xmit, dev_recv, sockops_rtt, sockops_retrans, sockops_state, snapshot"
    ),
    col!(
        "pid",
        u32t,
        true,
        "process: the caller for send/recv, else the socket's owner (the last process that sent or received on it)"
    ),
    col!("tid", u32t, true, "thread, as pid"),
    col!("comm", text, true, "command name, as pid"),
    col!(
        "cookie",
        u64t,
        true,
        "socket cookie (SO_COOKIE): the socket's identity; device receives are joined to their socket by namespace and 4-tuple"
    ),
    col!(
        "netns",
        u32t,
        false,
        "network namespace inode (ls -l /proc/PID/ns/net)"
    ),
    col!("family", u8t, false, "2 IPv4, 10 IPv6"),
    col!("proto", u8t, false, "6 TCP, 17 UDP"),
    col!(
        "local_addr",
        addr,
        true,
        "this host's address, IPv4 mapped into IPv6 space"
    ),
    col!("local_port", u16t, true, "this host's port"),
    col!("remote_addr", addr, true, "the peer's address"),
    col!("remote_port", u16t, true, "the peer's port"),
    col!(
        "bytes",
        u32t,
        true,
        "send/recv: bytes the application moved; dev_*: frame length; retransmit: sequence space retransmitted"
    ),
    col!(
        "payload",
        u32t,
        true,
        "dev_*: transport payload bytes of the frame (a GSO frame counts whole)"
    ),
    col!(
        "seq",
        u64t,
        true,
        "sequence number, unwrapped per socket and direction: send: end of the data written (write_seq); recv: end of the data read (copied_seq); dev_xmit/dev_recv: end of the segment; retransmit: start of the segment; tcp_probe: rcv_nxt; snapshot: write_seq"
    ),
    col!(
        "ack",
        u32t,
        true,
        "dev_*: the segment's ack field; retransmit: end of the segment; snapshot: copied_seq"
    ),
    col!(
        "state",
        dict8,
        true,
        "TCP state at the event (state: the new state)"
    ),
    col!(
        "old_state",
        dict8,
        true,
        "state, sockops_state: the state left"
    ),
    col!("snd_cwnd", u32t, true, "congestion window, segments"),
    col!("ssthresh", u32t, true, "slow start threshold, segments"),
    col!("srtt_us", u32t, true, "smoothed round-trip time, µs"),
    col!(
        "rttvar_us",
        u32t,
        true,
        "round-trip time variation (mdev), µs"
    ),
    col!("snd_wnd", u32t, true, "peer's receive window, bytes"),
    col!("rcv_wnd", u32t, true, "our receive window, bytes"),
    col!("snd_nxt", u32t, true, "next sequence number to send"),
    col!(
        "snd_una",
        u32t,
        true,
        "oldest unacknowledged sequence number"
    ),
    col!(
        "packets_out",
        u32t,
        true,
        "segments sent and not yet acknowledged"
    ),
    col!(
        "in_flight",
        u32t,
        true,
        "segments in the network (tcp_packets_in_flight)"
    ),
    col!(
        "total_retrans",
        u32t,
        true,
        "retransmissions over the socket's life"
    ),
    col!(
        "ifindex",
        u32t,
        true,
        "dev_*: interface index in its namespace"
    ),
    col!("dev", text, true, "dev_*: interface name"),
    col!(
        "ret",
        i32t,
        true,
        "send/recv: the call's return (bytes or -errno); retransmit: error; sockops_retrans: error; snapshot: socket owner's uid"
    ),
    col!("tcp_flags", u8t, true, "dev_*: the TCP header's flags"),
];

/// The stack table's schema.
pub fn stack_schema() -> SchemaRef {
    schema_of(STACK_COLUMNS)
}

/// A kernel name (comm, device): NUL-terminated in 16 bytes. Borrowed, so
/// a row costs no allocation; a name that is not UTF-8 reads as "?".
pub(crate) fn comm_text(c: &[u8; 16]) -> &str {
    let end = c.iter().position(|&b| b == 0).unwrap_or(16);
    std::str::from_utf8(&c[..end]).unwrap_or("?")
}

/// Column builders for one batch.
struct Builders {
    ts: TimestampNanosecondBuilder,
    event: StringDictionaryBuilder<Int8Type>,
    pid: UInt32Builder,
    tid: UInt32Builder,
    comm: StringBuilder,
    cookie: UInt64Builder,
    netns: UInt32Builder,
    family: UInt8Builder,
    proto: UInt8Builder,
    local_addr: FixedSizeBinaryBuilder,
    local_port: UInt16Builder,
    remote_addr: FixedSizeBinaryBuilder,
    remote_port: UInt16Builder,
    bytes: UInt32Builder,
    payload: UInt32Builder,
    seq: UInt64Builder,
    ack: UInt32Builder,
    state: StringDictionaryBuilder<Int8Type>,
    old_state: StringDictionaryBuilder<Int8Type>,
    /// The eleven TCP columns, in [`TcpInfo`](::stack::event::TcpInfo)'s order.
    tcp: Vec<UInt32Builder>,
    ifindex: UInt32Builder,
    dev: StringBuilder,
    ret: Int32Builder,
    tcp_flags: UInt8Builder,
}

impl Builders {
    fn new() -> Self {
        Builders {
            ts: TimestampNanosecondBuilder::new().with_timezone("UTC"),
            event: StringDictionaryBuilder::new(),
            pid: UInt32Builder::new(),
            tid: UInt32Builder::new(),
            comm: StringBuilder::new(),
            cookie: UInt64Builder::new(),
            netns: UInt32Builder::new(),
            family: UInt8Builder::new(),
            proto: UInt8Builder::new(),
            local_addr: FixedSizeBinaryBuilder::new(16),
            local_port: UInt16Builder::new(),
            remote_addr: FixedSizeBinaryBuilder::new(16),
            remote_port: UInt16Builder::new(),
            bytes: UInt32Builder::new(),
            payload: UInt32Builder::new(),
            seq: UInt64Builder::new(),
            ack: UInt32Builder::new(),
            state: StringDictionaryBuilder::new(),
            old_state: StringDictionaryBuilder::new(),
            tcp: (0..11).map(|_| UInt32Builder::new()).collect(),
            ifindex: UInt32Builder::new(),
            dev: StringBuilder::new(),
            ret: Int32Builder::new(),
            tcp_flags: UInt8Builder::new(),
        }
    }
}

impl RowBuilders for Builders {
    type Row = StackEvent;

    fn push(&mut self, r: &StackEvent) {
        fn addr(b: &mut FixedSizeBinaryBuilder, a: &Option<[u8; 16]>) {
            match a {
                // The builder was made for 16-byte values, so this cannot fail.
                Some(a) => b.append_value(a).expect("16-byte address"),
                None => b.append_null(),
            }
        }
        self.ts.append_value(r.ts_ns);
        self.event
            .append_value(EVENT_NAMES.get(r.event as usize).unwrap_or(&"unknown"));
        self.pid.append_option(r.pid);
        self.tid.append_option(r.tid);
        self.comm.append_option(r.comm.as_ref().map(comm_text));
        self.cookie.append_option(r.cookie);
        self.netns.append_value(r.netns);
        self.family.append_value(r.family);
        self.proto.append_value(r.proto);
        addr(&mut self.local_addr, &r.local_addr);
        self.local_port.append_option(r.local_port);
        addr(&mut self.remote_addr, &r.remote_addr);
        self.remote_port.append_option(r.remote_port);
        self.bytes.append_option(r.bytes);
        self.payload.append_option(r.payload);
        self.seq.append_option(r.seq);
        self.ack.append_option(r.ack);
        self.state.append_option(r.state.map(state_name));
        self.old_state.append_option(r.old_state.map(state_name));
        match &r.tcp {
            Some(t) => {
                let v = [
                    t.snd_cwnd,
                    t.ssthresh,
                    t.srtt_us,
                    t.rttvar_us,
                    t.snd_wnd,
                    t.rcv_wnd,
                    t.snd_nxt,
                    t.snd_una,
                    t.packets_out,
                    t.in_flight,
                    t.total_retrans,
                ];
                for (b, v) in self.tcp.iter_mut().zip(v) {
                    b.append_value(v);
                }
            }
            None => self.tcp.iter_mut().for_each(|b| b.append_null()),
        }
        self.ifindex.append_option(r.ifindex);
        self.dev.append_option(r.dev.as_ref().map(comm_text));
        self.ret.append_option(r.ret);
        self.tcp_flags.append_option(r.tcp_flags);
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.event.finish()),
            Arc::new(self.pid.finish()),
            Arc::new(self.tid.finish()),
            Arc::new(self.comm.finish()),
            Arc::new(self.cookie.finish()),
            Arc::new(self.netns.finish()),
            Arc::new(self.family.finish()),
            Arc::new(self.proto.finish()),
            Arc::new(self.local_addr.finish()),
            Arc::new(self.local_port.finish()),
            Arc::new(self.remote_addr.finish()),
            Arc::new(self.remote_port.finish()),
            Arc::new(self.bytes.finish()),
            Arc::new(self.payload.finish()),
            Arc::new(self.seq.finish()),
            Arc::new(self.ack.finish()),
            Arc::new(self.state.finish()),
            Arc::new(self.old_state.finish()),
        ];
        cols.extend(
            self.tcp
                .iter_mut()
                .map(|b| Arc::new(b.finish()) as ArrayRef),
        );
        cols.push(Arc::new(self.ifindex.finish()));
        cols.push(Arc::new(self.dev.finish()));
        cols.push(Arc::new(self.ret.finish()));
        cols.push(Arc::new(self.tcp_flags.finish()));
        cols
    }
}

/// Rows per Arrow batch handed to the Parquet writer.
const BATCH_ROWS: usize = 64 * 1024;

/// Writes stack rows into rotated Parquet files `stack/stack-NNNNN.parquet`
/// (hidden `.part` names until complete), `rotate_rows` rows a file
/// exactly.
pub struct StackWriter {
    table: BatchTable<Builders>,
    rotate_rows: u64,
    rows_in_file: u64,
}

impl StackWriter {
    /// Writes into `dir`, starting a new file every `rotate_rows` rows.
    pub fn new(dir: &Path, rotate_rows: u64) -> Self {
        // Dictionaries only where values repeat.
        let climbing = [
            "ts",
            "seq",
            "ack",
            "snd_nxt",
            "snd_una",
            "bytes",
            "payload",
            "srtt_us",
            "rttvar_us",
            "snd_wnd",
            "rcv_wnd",
        ];
        let files = TableFiles::new(
            dir,
            STACK_DIR,
            "stack".into(),
            stack_schema(),
            writer_properties("stack", STACK_SCHEMA_VERSION, &climbing),
            rotate_rows,
        );
        StackWriter {
            table: BatchTable::new(Builders::new(), files, BATCH_ROWS),
            rotate_rows: rotate_rows.max(1),
            rows_in_file: 0,
        }
    }

    pub fn push(&mut self, row: &StackEvent) -> Result<(), StoreError> {
        self.table.push(row)?;
        self.rows_in_file += 1;
        if self.rows_in_file >= self.rotate_rows {
            self.table.close_file()?;
            self.rows_in_file = 0;
        }
        Ok(())
    }

    /// Rows pushed so far.
    pub fn rows(&self) -> u64 {
        self.table.rows()
    }

    /// Closes the open file; returns the dataset-relative names written.
    pub fn finish(self) -> Result<Vec<String>, StoreError> {
        self.table.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{UInt32Type, UInt64Type};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    #[test]
    fn rows_round_trip_with_their_nulls() {
        let dir = std::env::temp_dir().join(format!("weir-stack-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut w = StackWriter::new(&dir, 3);
        let mut comm = [0u8; 16];
        comm[..4].copy_from_slice(b"curl");
        let rows: Vec<StackEvent> = (0..7u32)
            .map(|i| StackEvent {
                ts_ns: 1_000 + i as i64,
                event: (i % 11) as u8,
                pid: (i % 2 == 0).then_some(100 + i),
                comm: (i % 2 == 0).then_some(comm),
                cookie: Some(42),
                netns: 4026531840,
                family: 2,
                proto: 6,
                bytes: Some(i * 10),
                seq: Some((1u64 << 32) + i as u64),
                state: Some(1),
                tcp: (i == 3).then(|| ::stack::event::TcpInfo {
                    snd_cwnd: 10,
                    srtt_us: 250,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        for r in &rows {
            w.push(r).unwrap();
        }
        let files = w.finish().unwrap();
        assert_eq!(files.len(), 3, "7 rows at 3 a file");
        let mut seen = 0;
        for f in &files {
            let path = dir.join(f.trim_start_matches("stack/"));
            let reader =
                ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
                    .unwrap()
                    .build()
                    .unwrap();
            for b in reader {
                let b = b.unwrap();
                let pid = b
                    .column_by_name("pid")
                    .unwrap()
                    .as_primitive::<UInt32Type>();
                let seq = b
                    .column_by_name("seq")
                    .unwrap()
                    .as_primitive::<UInt64Type>();
                let cwnd = b
                    .column_by_name("snd_cwnd")
                    .unwrap()
                    .as_primitive::<UInt32Type>();
                for i in 0..b.num_rows() {
                    let r = &rows[seen];
                    assert_eq!(pid.is_null(i), r.pid.is_none());
                    assert_eq!(seq.value(i), r.seq.unwrap());
                    assert_eq!(cwnd.is_null(i), r.tcp.is_none());
                    if let Some(t) = r.tcp {
                        assert_eq!(cwnd.value(i), t.snd_cwnd);
                    }
                    seen += 1;
                }
            }
        }
        assert_eq!(seen, rows.len());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
