//! The dns, tls and http tables: what the hosts said, decoded at ingest by
//! the `app` crate. `dns/*.parquet`: one row per DNS query with its
//! response (or a query that got none, or a response whose query was not
//! seen); `tls/*.parquet`: one row per TLS handshake; `http/*.parquet`:
//! one row per HTTP/1.x request with its response. The columns are
//! documented in [`DNS_COLUMNS`], [`TLS_COLUMNS`], [`HTTP_COLUMNS`] and
//! docs/DESIGN.md.

use std::path::Path;
use std::sync::Arc;

use app::{DnsRecord, HttpRecord, TlsRecord};
use arrow_array::ArrayRef;
use arrow_array::builder::{
    FixedSizeBinaryBuilder, Int64Builder, ListBuilder, StringBuilder, TimestampNanosecondBuilder,
    UInt8Builder, UInt16Builder, UInt32Builder, UInt64Builder,
};
use arrow_schema::SchemaRef;

use crate::columns::{
    Column, addr, addrs, col, i64t, schema_of, text, texts, ts_type, u8t, u16s, u16t, u32s, u32t,
    u64t,
};
use crate::error::StoreError;
use crate::table::{BatchTable, RowBuilders, TableFiles, writer_properties};

pub const DNS_DIR: &str = "dns";
pub const TLS_DIR: &str = "tls";
pub const HTTP_DIR: &str = "http";
/// Version of the three tables' columns.
pub const APP_SCHEMA_VERSION: u32 = 1;

/// A table's columns: those every table starts with (when, and between
/// whom), then its own.
macro_rules! with_ends {
    ($when:literal, [$($rest:expr),* $(,)?]) => {
        &[
            col!("ts", ts_type, false, $when),
            col!(
                "flow_hash",
                u32t,
                false,
                "the flow's packets.flow_hash (wire::flow_hash)"
            ),
            col!(
                "client",
                addr,
                false,
                "the asking end's address, IPv4 mapped into IPv6"
            ),
            col!("client_port", u16t, false, "the asking end's port"),
            col!("server", addr, false, "the answering end's address"),
            col!("server_port", u16t, false, "the answering end's port"),
            col!("transport", text, false, "tcp or udp"),
            $($rest),*
        ]
    };
}

pub const DNS_COLUMNS: &[Column] = with_ends!(
    "the query's time, or the response's for a response without its query",
    [
        col!("id", u16t, false, "the transaction id"),
        col!(
            "status",
            text,
            false,
            "answered, unanswered (no response within 10 s) or response_only (its query not seen)"
        ),
        col!(
            "qname",
            text,
            true,
            "the first question's name, dotted, no final dot"
        ),
        col!(
            "qtype",
            u16t,
            true,
            "the question's type (1 A, 28 AAAA, 5 CNAME, 12 PTR, ...)"
        ),
        col!(
            "qclass",
            u16t,
            true,
            "the question's class (1 IN; mDNS sets the top bit)"
        ),
        col!("opcode", u8t, false, "0 QUERY, 4 NOTIFY, 5 UPDATE, ..."),
        col!("query_flags", u16t, true, "the query's flags word"),
        col!("response_flags", u16t, true, "the response's flags word"),
        col!(
            "rcode",
            u8t,
            true,
            "the response's rcode (0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, ...)"
        ),
        col!("answer_count", u16t, true, "the response's ANCOUNT"),
        col!(
            "answer_names",
            texts,
            true,
            "each answer's owner name (the first 64 answers)"
        ),
        col!("answer_types", u16s, true, "each answer's type"),
        col!("answer_ttls", u32s, true, "each answer's TTL, s"),
        col!(
            "answer_data",
            texts,
            true,
            "each answer's name data (CNAME, NS, PTR, MX); null for others"
        ),
        col!(
            "answer_addrs",
            addrs,
            true,
            "the A and AAAA answers' addresses, in order"
        ),
        col!("response_ts", ts_type, true, "the response's time"),
        col!("latency_ns", i64t, true, "response_ts - ts, ns"),
    ]
);

pub const TLS_COLUMNS: &[Column] = with_ends!(
    "the time the ClientHello was complete",
    [
        col!(
            "client_version",
            u16t,
            false,
            "the ClientHello's legacy_version (771 = TLS 1.2)"
        ),
        col!(
            "supported_versions",
            u16s,
            false,
            "supported_versions as offered (GREASE kept)"
        ),
        col!("sni", text, true, "server_name's host_name"),
        col!("alpn", texts, false, "the ALPN protocols offered, in order"),
        col!(
            "ciphers",
            u16s,
            false,
            "cipher suites offered, in order (GREASE kept)"
        ),
        col!("extensions", u16s, false, "extension types, in order"),
        col!(
            "ja3",
            text,
            false,
            "JA3: MD5 of version,ciphers,extensions,groups,point formats"
        ),
        col!("ja4", text, false, "JA4 client fingerprint (FoxIO)"),
        col!(
            "server_ts",
            ts_type,
            true,
            "the time the server's hello (and certificate) were complete"
        ),
        col!(
            "version",
            u16t,
            true,
            "the version the server chose (supported_versions' where sent)"
        ),
        col!("cipher", u16t, true, "the cipher suite the server chose"),
        col!("server_alpn", text, true, "the protocol the server chose"),
        col!(
            "cert_subject",
            text,
            true,
            "the server certificate's subject (TLS 1.2 and below)"
        ),
        col!("cert_issuer", text, true, "its issuer"),
        col!("cert_not_before", ts_type, true, "its validity's start"),
        col!("cert_not_after", ts_type, true, "its validity's end"),
        col!("latency_ns", i64t, true, "server_ts - ts, ns"),
    ]
);

pub const HTTP_COLUMNS: &[Column] = with_ends!(
    "the time the request's head was complete",
    [
        col!("method", text, false, "the request's method"),
        col!("host", text, true, "the Host header"),
        col!("path", text, false, "the request target as sent"),
        col!("version", text, false, "1.0 or 1.1"),
        col!("user_agent", text, true, "the User-Agent header"),
        col!("request_length", u64t, true, "the request's Content-Length"),
        col!(
            "status",
            u16t,
            true,
            "the response's status; null without a response"
        ),
        col!("content_type", text, true, "the response's Content-Type"),
        col!(
            "response_length",
            u64t,
            true,
            "the response's Content-Length"
        ),
        col!(
            "response_ts",
            ts_type,
            true,
            "the time the response's head was complete"
        ),
        col!("latency_ns", i64t, true, "response_ts - ts, ns"),
    ]
);

pub fn dns_schema() -> SchemaRef {
    schema_of(DNS_COLUMNS)
}
pub fn tls_schema() -> SchemaRef {
    schema_of(TLS_COLUMNS)
}
pub fn http_schema() -> SchemaRef {
    schema_of(HTTP_COLUMNS)
}

/// The columns every table starts with.
struct EndsBuilders {
    ts: TimestampNanosecondBuilder,
    flow_hash: UInt32Builder,
    client: FixedSizeBinaryBuilder,
    client_port: UInt16Builder,
    server: FixedSizeBinaryBuilder,
    server_port: UInt16Builder,
    transport: StringBuilder,
}

fn ts_builder() -> TimestampNanosecondBuilder {
    TimestampNanosecondBuilder::new().with_timezone("UTC")
}

impl EndsBuilders {
    fn new() -> Self {
        EndsBuilders {
            ts: ts_builder(),
            flow_hash: UInt32Builder::new(),
            client: FixedSizeBinaryBuilder::new(16),
            client_port: UInt16Builder::new(),
            server: FixedSizeBinaryBuilder::new(16),
            server_port: UInt16Builder::new(),
            transport: StringBuilder::new(),
        }
    }

    fn push(&mut self, ts: i64, e: &app::track::Ends) {
        self.ts.append_value(ts);
        self.flow_hash.append_value(e.flow_hash());
        // 16-byte builders: the values are 16 bytes.
        let _ = self.client.append_value(e.client);
        self.client_port.append_value(e.client_port);
        let _ = self.server.append_value(e.server);
        self.server_port.append_value(e.server_port);
        self.transport.append_value(if e.proto == app::track::UDP {
            "udp"
        } else {
            "tcp"
        });
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(self.ts.finish()),
            Arc::new(self.flow_hash.finish()),
            Arc::new(self.client.finish()),
            Arc::new(self.client_port.finish()),
            Arc::new(self.server.finish()),
            Arc::new(self.server_port.finish()),
            Arc::new(self.transport.finish()),
        ]
    }
}

struct DnsBuilders {
    ends: EndsBuilders,
    id: UInt16Builder,
    status: StringBuilder,
    qname: StringBuilder,
    qtype: UInt16Builder,
    qclass: UInt16Builder,
    opcode: UInt8Builder,
    query_flags: UInt16Builder,
    response_flags: UInt16Builder,
    rcode: UInt8Builder,
    answer_count: UInt16Builder,
    answer_names: ListBuilder<StringBuilder>,
    answer_types: ListBuilder<UInt16Builder>,
    answer_ttls: ListBuilder<UInt32Builder>,
    answer_data: ListBuilder<StringBuilder>,
    answer_addrs: ListBuilder<FixedSizeBinaryBuilder>,
    response_ts: TimestampNanosecondBuilder,
    latency: Int64Builder,
}

impl DnsBuilders {
    fn new() -> Self {
        DnsBuilders {
            ends: EndsBuilders::new(),
            id: UInt16Builder::new(),
            status: StringBuilder::new(),
            qname: StringBuilder::new(),
            qtype: UInt16Builder::new(),
            qclass: UInt16Builder::new(),
            opcode: UInt8Builder::new(),
            query_flags: UInt16Builder::new(),
            response_flags: UInt16Builder::new(),
            rcode: UInt8Builder::new(),
            answer_count: UInt16Builder::new(),
            answer_names: ListBuilder::new(StringBuilder::new()),
            answer_types: ListBuilder::new(UInt16Builder::new()),
            answer_ttls: ListBuilder::new(UInt32Builder::new()),
            answer_data: ListBuilder::new(StringBuilder::new()),
            answer_addrs: ListBuilder::new(FixedSizeBinaryBuilder::new(16)),
            response_ts: ts_builder(),
            latency: Int64Builder::new(),
        }
    }
}

impl RowBuilders for DnsBuilders {
    type Row = DnsRecord;

    fn push(&mut self, r: &DnsRecord) {
        self.ends.push(r.ts(), &r.ends);
        self.id.append_value(r.id);
        self.status.append_value(match (r.query_ts, r.response_ts) {
            (Some(_), Some(_)) => "answered",
            (Some(_), None) => "unanswered",
            _ => "response_only",
        });
        self.qname.append_option(r.qname.as_deref());
        let q = r.qname.is_some();
        self.qtype.append_option(q.then_some(r.qtype));
        self.qclass.append_option(q.then_some(r.qclass));
        self.opcode.append_value(r.opcode);
        self.query_flags.append_option(r.query_flags);
        self.response_flags.append_option(r.response_flags);
        self.rcode.append_option(r.rcode());
        let resp = r.response_ts.is_some();
        self.answer_count
            .append_option(resp.then_some(r.answer_count));
        for a in &r.answers {
            self.answer_names.values().append_value(&a.name);
            self.answer_types.values().append_value(a.rtype);
            self.answer_ttls.values().append_value(a.ttl);
            self.answer_data.values().append_option(a.target.as_deref());
            if let Some(addr) = a.addr {
                let _ = self.answer_addrs.values().append_value(addr);
            }
        }
        self.answer_names.append(resp);
        self.answer_types.append(resp);
        self.answer_ttls.append(resp);
        self.answer_data.append(resp);
        self.answer_addrs.append(resp);
        self.response_ts.append_option(r.response_ts);
        self.latency
            .append_option(r.query_ts.zip(r.response_ts).map(|(q, s)| s - q));
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        let mut c = self.ends.finish();
        c.extend([
            Arc::new(self.id.finish()) as ArrayRef,
            Arc::new(self.status.finish()),
            Arc::new(self.qname.finish()),
            Arc::new(self.qtype.finish()),
            Arc::new(self.qclass.finish()),
            Arc::new(self.opcode.finish()),
            Arc::new(self.query_flags.finish()),
            Arc::new(self.response_flags.finish()),
            Arc::new(self.rcode.finish()),
            Arc::new(self.answer_count.finish()),
            Arc::new(self.answer_names.finish()),
            Arc::new(self.answer_types.finish()),
            Arc::new(self.answer_ttls.finish()),
            Arc::new(self.answer_data.finish()),
            Arc::new(self.answer_addrs.finish()),
            Arc::new(self.response_ts.finish()),
            Arc::new(self.latency.finish()),
        ]);
        c
    }
}

struct TlsBuilders {
    ends: EndsBuilders,
    client_version: UInt16Builder,
    supported_versions: ListBuilder<UInt16Builder>,
    sni: StringBuilder,
    alpn: ListBuilder<StringBuilder>,
    ciphers: ListBuilder<UInt16Builder>,
    extensions: ListBuilder<UInt16Builder>,
    ja3: StringBuilder,
    ja4: StringBuilder,
    server_ts: TimestampNanosecondBuilder,
    version: UInt16Builder,
    cipher: UInt16Builder,
    server_alpn: StringBuilder,
    cert_subject: StringBuilder,
    cert_issuer: StringBuilder,
    cert_not_before: TimestampNanosecondBuilder,
    cert_not_after: TimestampNanosecondBuilder,
    latency: Int64Builder,
}

impl TlsBuilders {
    fn new() -> Self {
        TlsBuilders {
            ends: EndsBuilders::new(),
            client_version: UInt16Builder::new(),
            supported_versions: ListBuilder::new(UInt16Builder::new()),
            sni: StringBuilder::new(),
            alpn: ListBuilder::new(StringBuilder::new()),
            ciphers: ListBuilder::new(UInt16Builder::new()),
            extensions: ListBuilder::new(UInt16Builder::new()),
            ja3: StringBuilder::new(),
            ja4: StringBuilder::new(),
            server_ts: ts_builder(),
            version: UInt16Builder::new(),
            cipher: UInt16Builder::new(),
            server_alpn: StringBuilder::new(),
            cert_subject: StringBuilder::new(),
            cert_issuer: StringBuilder::new(),
            cert_not_before: ts_builder(),
            cert_not_after: ts_builder(),
            latency: Int64Builder::new(),
        }
    }
}

impl RowBuilders for TlsBuilders {
    type Row = TlsRecord;

    fn push(&mut self, r: &TlsRecord) {
        let h = &r.hello;
        self.ends.push(r.ts, &r.ends);
        self.client_version.append_value(h.version);
        self.supported_versions.values().append_slice(&h.versions);
        self.supported_versions.append(true);
        self.sni.append_option(h.sni.as_deref());
        for a in &h.alpn {
            self.alpn.values().append_value(a);
        }
        self.alpn.append(true);
        self.ciphers.values().append_slice(&h.ciphers);
        self.ciphers.append(true);
        self.extensions.values().append_slice(&h.extensions);
        self.extensions.append(true);
        self.ja3.append_value(&r.ja3);
        self.ja4.append_value(&r.ja4);
        self.server_ts.append_option(r.server_ts);
        let s = r.server.as_ref().map(|s| &s.hello);
        self.version.append_option(s.map(|s| s.negotiated()));
        self.cipher.append_option(s.map(|s| s.cipher));
        self.server_alpn
            .append_option(s.and_then(|s| s.alpn.as_deref()));
        let c = r.certificate();
        self.cert_subject
            .append_option(c.map(|c| c.subject.as_str()));
        self.cert_issuer.append_option(c.map(|c| c.issuer.as_str()));
        let ns = |s: i64| s.saturating_mul(1_000_000_000);
        self.cert_not_before
            .append_option(c.and_then(|c| c.not_before).map(ns));
        self.cert_not_after
            .append_option(c.and_then(|c| c.not_after).map(ns));
        self.latency.append_option(r.server_ts.map(|s| s - r.ts));
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        let mut c = self.ends.finish();
        c.extend([
            Arc::new(self.client_version.finish()) as ArrayRef,
            Arc::new(self.supported_versions.finish()),
            Arc::new(self.sni.finish()),
            Arc::new(self.alpn.finish()),
            Arc::new(self.ciphers.finish()),
            Arc::new(self.extensions.finish()),
            Arc::new(self.ja3.finish()),
            Arc::new(self.ja4.finish()),
            Arc::new(self.server_ts.finish()),
            Arc::new(self.version.finish()),
            Arc::new(self.cipher.finish()),
            Arc::new(self.server_alpn.finish()),
            Arc::new(self.cert_subject.finish()),
            Arc::new(self.cert_issuer.finish()),
            Arc::new(self.cert_not_before.finish()),
            Arc::new(self.cert_not_after.finish()),
            Arc::new(self.latency.finish()),
        ]);
        c
    }
}

struct HttpBuilders {
    ends: EndsBuilders,
    method: StringBuilder,
    host: StringBuilder,
    path: StringBuilder,
    version: StringBuilder,
    user_agent: StringBuilder,
    request_length: UInt64Builder,
    status: UInt16Builder,
    content_type: StringBuilder,
    response_length: UInt64Builder,
    response_ts: TimestampNanosecondBuilder,
    latency: Int64Builder,
}

impl HttpBuilders {
    fn new() -> Self {
        HttpBuilders {
            ends: EndsBuilders::new(),
            method: StringBuilder::new(),
            host: StringBuilder::new(),
            path: StringBuilder::new(),
            version: StringBuilder::new(),
            user_agent: StringBuilder::new(),
            request_length: UInt64Builder::new(),
            status: UInt16Builder::new(),
            content_type: StringBuilder::new(),
            response_length: UInt64Builder::new(),
            response_ts: ts_builder(),
            latency: Int64Builder::new(),
        }
    }
}

impl RowBuilders for HttpBuilders {
    type Row = HttpRecord;

    fn push(&mut self, r: &HttpRecord) {
        let q = &r.request;
        self.ends.push(r.ts, &r.ends);
        self.method.append_value(&q.method);
        self.host.append_option(q.host.as_deref());
        self.path.append_value(&q.target);
        self.version
            .append_value(if q.minor == 0 { "1.0" } else { "1.1" });
        self.user_agent.append_option(q.user_agent.as_deref());
        self.request_length.append_option(q.content_length);
        let s = r.response.as_ref();
        self.status.append_option(s.map(|s| s.status));
        self.content_type
            .append_option(s.and_then(|s| s.content_type.as_deref()));
        self.response_length
            .append_option(s.and_then(|s| s.content_length));
        self.response_ts.append_option(r.response_ts);
        self.latency.append_option(r.response_ts.map(|t| t - r.ts));
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        let mut c = self.ends.finish();
        c.extend([
            Arc::new(self.method.finish()) as ArrayRef,
            Arc::new(self.host.finish()),
            Arc::new(self.path.finish()),
            Arc::new(self.version.finish()),
            Arc::new(self.user_agent.finish()),
            Arc::new(self.request_length.finish()),
            Arc::new(self.status.finish()),
            Arc::new(self.content_type.finish()),
            Arc::new(self.response_length.finish()),
            Arc::new(self.response_ts.finish()),
            Arc::new(self.latency.finish()),
        ]);
        c
    }
}

/// Rows held before they are written as a batch.
const BATCH_ROWS: usize = 8192;

/// Writes the dns, tls and http tables of one writer (a conversion's
/// source, a capture's worker) into `DIR/{dns,tls,http}/app-WWWWW-NNNNN.parquet`.
pub struct AppWriter {
    dns: BatchTable<DnsBuilders>,
    tls: BatchTable<TlsBuilders>,
    http: BatchTable<HttpBuilders>,
}

/// The files an [`AppWriter`] wrote, by table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppFiles {
    pub dns: Vec<String>,
    pub tls: Vec<String>,
    pub http: Vec<String>,
}

impl AppWriter {
    pub fn new(root: &Path, writer_id: u16, rotate_rows: u64) -> Self {
        let files = |dir: &'static str, schema: SchemaRef| {
            TableFiles::new(
                &root.join(dir),
                dir,
                format!("app-{writer_id:05}"),
                schema,
                writer_properties(dir, APP_SCHEMA_VERSION, &["ts"]),
                rotate_rows,
            )
        };
        AppWriter {
            dns: BatchTable::new(DnsBuilders::new(), files(DNS_DIR, dns_schema()), BATCH_ROWS),
            tls: BatchTable::new(TlsBuilders::new(), files(TLS_DIR, tls_schema()), BATCH_ROWS),
            http: BatchTable::new(
                HttpBuilders::new(),
                files(HTTP_DIR, http_schema()),
                BATCH_ROWS,
            ),
        }
    }

    pub fn push_dns(&mut self, r: &DnsRecord) -> Result<(), StoreError> {
        self.dns.push(r)
    }

    pub fn push_tls(&mut self, r: &TlsRecord) -> Result<(), StoreError> {
        self.tls.push(r)
    }

    pub fn push_http(&mut self, r: &HttpRecord) -> Result<(), StoreError> {
        self.http.push(r)
    }

    /// Writes what is pending and closes the files; returns their
    /// dataset-relative names.
    pub fn finish(self) -> Result<AppFiles, StoreError> {
        Ok(AppFiles {
            dns: self.dns.finish()?,
            tls: self.tls.finish()?,
            http: self.http.finish()?,
        })
    }
}
