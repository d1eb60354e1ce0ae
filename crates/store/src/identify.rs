//! What each column of a dataset's tables may reveal about the hosts,
//! people and files in the traffic: the policy `weir anonymize` follows.
//!
//! Every column whose type could carry an address, a MAC, a name or any
//! other text (fixed-size or variable binary, strings, dictionaries of
//! strings) must be tagged here, as identifying or as [`Identifies::Nothing`];
//! [`identifies`] refuses an untagged one, and a test walks every table's
//! schema, so a new column cannot reach an anonymised copy unexamined.
//! Integer columns are taken as counts and times unless tagged (file
//! handles, frame pointers).

use arrow_schema::{DataType, Field, SchemaRef};

/// What a column may reveal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identifies {
    /// Nothing about who or what: counts, times, protocol names.
    Nothing,
    /// IP addresses (16 bytes, IPv4 mapped into IPv6).
    Address,
    /// Ethernet addresses.
    Mac,
    /// NFS file handles (hashed to 64 bits).
    FileHandle,
    /// File, process or device names.
    Name,
    /// Where a frame is in pcap files that an anonymised copy leaves out.
    FramePointer,
    /// A DNS name (DNS questions and answers, TLS SNI, HTTP Host): each
    /// label pseudonymised alone, so that names sharing a suffix still do.
    HostName,
    /// An HTTP request target: each `/`-separated segment pseudonymised
    /// alone.
    UrlPath,
    /// A certificate's subject or issuer (`CN=...,O=...`): each value
    /// pseudonymised as a host name, the attribute names kept.
    CertName,
    /// A tunnel's id (VXLAN/VXLAN-GPE/GENEVE VNI, GTP-U TEID, GRE key, MPLS
    /// label, PPPoE or ERSPAN session, WCCP service, NSH service path),
    /// whose width its row's `tunnel` gives:
    /// names a tenant, a subscriber's session or a link.
    TunnelId,
}

/// The tables of a dataset, by directory name, with their schemas.
pub fn table_schema(table: &str) -> Option<SchemaRef> {
    Some(match table {
        "packets" => crate::schema::packet_schema(),
        "flows" => crate::flows::flows_schema(),
        "stats" => crate::stats::stats_schema(),
        "stack" => crate::stack::stack_schema(),
        "stack_intervals" => crate::stack_intervals::interval_schema(),
        "rpc" => crate::rpc::rpc_schema(),
        "nfs" => crate::rpc::nfs_schema(),
        "dns" => crate::app::dns_schema(),
        "tls" => crate::app::tls_schema(),
        "http" => crate::app::http_schema(),
        _ => return None,
    })
}

/// The tables [`table_schema`] knows.
pub const TABLES: &[&str] = &[
    "packets",
    "flows",
    "stats",
    "stack",
    "stack_intervals",
    "rpc",
    "nfs",
    "dns",
    "tls",
    "http",
];

/// The tags: (table, or `*` for any; column; what it reveals).
const TAGS: &[(&str, &str, Identifies)] = &[
    ("*", "ip_src", Identifies::Address),
    ("*", "ip_dst", Identifies::Address),
    ("*", "eth_src", Identifies::Mac),
    ("*", "eth_dst", Identifies::Mac),
    ("packets", "pcap_file", Identifies::FramePointer),
    ("packets", "pcap_offset", Identifies::FramePointer),
    ("packets", "parse_error", Identifies::Nothing),
    ("packets", "outer_src", Identifies::Address),
    ("packets", "outer_dst", Identifies::Address),
    ("packets", "tunnel", Identifies::Nothing),
    ("packets", "tunnel_id", Identifies::TunnelId),
    ("flows", "a_ip", Identifies::Address),
    ("flows", "b_ip", Identifies::Address),
    ("stack", "local_addr", Identifies::Address),
    ("stack", "remote_addr", Identifies::Address),
    ("stack", "comm", Identifies::Name),
    ("stack", "dev", Identifies::Name),
    ("stack", "event", Identifies::Nothing),
    ("stack", "state", Identifies::Nothing),
    ("stack", "old_state", Identifies::Nothing),
    ("stats", "stack_event", Identifies::Nothing),
    ("stack_intervals", "local_addr", Identifies::Address),
    ("stack_intervals", "remote_addr", Identifies::Address),
    ("stack_intervals", "comm", Identifies::Name),
    ("stack_intervals", "tcp_state", Identifies::Nothing),
    ("*", "client", Identifies::Address),
    ("*", "server", Identifies::Address),
    ("*", "transport", Identifies::Nothing),
    ("*", "program_name", Identifies::Nothing),
    ("*", "procedure_name", Identifies::Nothing),
    ("*", "reply_stat", Identifies::Nothing),
    ("nfs", "op_name", Identifies::Nothing),
    ("nfs", "fh", Identifies::FileHandle),
    ("nfs", "res_fh", Identifies::FileHandle),
    ("nfs", "name", Identifies::Name),
    ("nfs", "name2", Identifies::Name),
    ("dns", "status", Identifies::Nothing),
    ("dns", "qname", Identifies::HostName),
    ("dns", "answer_names", Identifies::HostName),
    ("dns", "answer_data", Identifies::HostName),
    ("dns", "answer_addrs", Identifies::Address),
    ("tls", "sni", Identifies::HostName),
    ("tls", "alpn", Identifies::Nothing),
    ("tls", "ja3", Identifies::Nothing),
    ("tls", "ja4", Identifies::Nothing),
    ("tls", "server_alpn", Identifies::Nothing),
    ("tls", "cert_subject", Identifies::CertName),
    ("tls", "cert_issuer", Identifies::CertName),
    ("http", "method", Identifies::Nothing),
    ("http", "host", Identifies::HostName),
    ("http", "path", Identifies::UrlPath),
    ("http", "version", Identifies::Nothing),
    ("http", "user_agent", Identifies::Name),
    ("http", "content_type", Identifies::Nothing),
];

/// Whether values of `t` could hold an address, a name or other text.
pub fn may_identify(t: &DataType) -> bool {
    match t {
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_)
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => may_identify(v),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            may_identify(f.data_type())
        }
        DataType::Struct(fs) => fs.iter().any(|f| may_identify(f.data_type())),
        _ => false,
    }
}

/// The addresses a column of type `t` holds, for showing them as text:
/// every 16-byte column is an IP address (IPv4 mapped into IPv6), every
/// 6-byte one a MAC, a list of either a list of them. The one rule
/// readers follow (weir's tables, CSV, JSON and the page print these as
/// text); the tags above agree with it for every table (tested).
pub fn address_type(t: &DataType) -> Option<Identifies> {
    match t {
        DataType::FixedSizeBinary(16) => Some(Identifies::Address),
        DataType::FixedSizeBinary(6) => Some(Identifies::Mac),
        DataType::List(f) | DataType::LargeList(f) => address_type(f.data_type()),
        _ => None,
    }
}

/// What column `field` of `table` reveals; an error for a table or column
/// this weir does not know, or a text or binary column without a tag.
pub fn identifies(table: &str, field: &Field) -> Result<Identifies, String> {
    let name = field.name();
    let Some(schema) = table_schema(table) else {
        return Err(format!("{table}: not a table this weir knows"));
    };
    if schema.field_with_name(name).is_err() {
        return Err(format!(
            "{table}.{name}: not a column this weir knows (a newer weir wrote it?)"
        ));
    }
    let tag = TAGS
        .iter()
        .find(|(t, c, _)| (*t == table || *t == "*") && *c == name)
        .map(|(_, _, i)| *i);
    match tag {
        Some(i) => Ok(i),
        None if may_identify(field.data_type()) => Err(format!(
            "{table}.{name}: a {} column with no anonymisation tag (store::identify)",
            field.data_type()
        )),
        None => Ok(Identifies::Nothing),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_column_of_every_table_has_a_policy() {
        for table in TABLES {
            let schema = table_schema(table).unwrap();
            for f in schema.fields() {
                if let Err(e) = identifies(table, f) {
                    panic!("{e}");
                }
            }
        }
    }

    #[test]
    fn addresses_everywhere_are_addresses() {
        let tagged = |table: &str, col: &str| {
            let schema = table_schema(table).unwrap();
            identifies(table, schema.field_with_name(col).unwrap()).unwrap()
        };
        assert_eq!(tagged("packets", "ip_src"), Identifies::Address);
        assert_eq!(tagged("packets", "outer_src"), Identifies::Address);
        assert_eq!(tagged("packets", "outer_dst"), Identifies::Address);
        assert_eq!(tagged("flows", "b_ip"), Identifies::Address);
        assert_eq!(tagged("stack", "remote_addr"), Identifies::Address);
        assert_eq!(tagged("packets", "eth_dst"), Identifies::Mac);
        assert_eq!(tagged("nfs", "fh"), Identifies::FileHandle);
        assert_eq!(tagged("packets", "tunnel_id"), Identifies::TunnelId);
        // A column holds addresses (and is shown as text) exactly when
        // it is tagged as addresses or MACs.
        let mut lists = 0;
        for table in TABLES {
            for f in table_schema(table).unwrap().fields() {
                let tag = identifies(table, f).unwrap();
                let by_type = address_type(f.data_type());
                let tagged = matches!(tag, Identifies::Address | Identifies::Mac).then_some(tag);
                assert_eq!(by_type, tagged, "{table}.{}", f.name());
                lists += usize::from(by_type.is_some() && f.data_type().is_nested());
            }
        }
        assert!(lists > 0, "dns.answer_addrs is a list of addresses");
    }

    #[test]
    fn an_untagged_text_column_is_refused() {
        let f = Field::new("owner", DataType::Utf8, true);
        assert!(identifies("packets", &f).is_err());
        let f = Field::new("ts", DataType::Utf8, true);
        assert!(identifies("nowhere", &f).is_err());
        assert!(may_identify(&DataType::Dictionary(
            Box::new(DataType::Int8),
            Box::new(DataType::Utf8)
        )));
    }
}
