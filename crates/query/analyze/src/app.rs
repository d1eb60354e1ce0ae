//! `weir analyze dns|tls|http`: what the hosts said, from the dns, tls and
//! http tables (written at ingest by `weir convert` and `weir capture`).
//! The SQL is in `sql/{dns,tls,http}_*.sql`, portable to Spark like the
//! others.

use crate::error::AnalyzeError;
use crate::session::Session;
use crate::sql::{fill, sql_limit};
use crate::table::Table;

pub const DNS_NAMES_SQL: &str = include_str!("sql/dns_names.sql");
pub const DNS_RCODES_SQL: &str = include_str!("sql/dns_rcodes.sql");
pub const DNS_SERVERS_SQL: &str = include_str!("sql/dns_servers.sql");
pub const TLS_SERVERS_SQL: &str = include_str!("sql/tls_servers.sql");
pub const TLS_CLIENTS_SQL: &str = include_str!("sql/tls_clients.sql");
pub const HTTP_HOSTS_SQL: &str = include_str!("sql/http_hosts.sql");
pub const HTTP_STATUS_SQL: &str = include_str!("sql/http_status.sql");

/// Rows of each ranked table when not told how many.
pub const TOP: usize = 20;

/// The analyses' names and their tables: (table name, SQL); the names are
/// unique across the three, so one --emit-sql script may hold them all.
pub fn queries(kind: &str) -> Option<&'static [(&'static str, &'static str)]> {
    Some(match kind {
        "dns" => &[
            ("dns_names", DNS_NAMES_SQL),
            ("dns_rcodes", DNS_RCODES_SQL),
            ("dns_servers", DNS_SERVERS_SQL),
        ],
        "tls" => &[
            ("tls_servers", TLS_SERVERS_SQL),
            ("tls_clients", TLS_CLIENTS_SQL),
        ],
        "http" => &[
            ("http_hosts", HTTP_HOSTS_SQL),
            ("http_status", HTTP_STATUS_SQL),
        ],
        _ => return None,
    })
}

/// Answers `kind` (dns, tls or http), ranked tables cut at `limit` rows
/// (0: all).
pub fn app(session: &Session, kind: &str, limit: usize) -> Result<Vec<Table>, AnalyzeError> {
    let Some(qs) = queries(kind) else {
        return Err(AnalyzeError::Usage(format!(
            "{kind}: not one of dns, tls, http"
        )));
    };
    let limit = sql_limit(limit).to_string();
    qs.iter()
        .map(|(name, sql)| {
            let sql = fill(sql, &[("limit", limit.clone())])?;
            let (schema, batches) = session.query_with_schema(&sql)?;
            Ok(Table {
                name: (*name).into(),
                schema,
                batches,
            })
        })
        .collect()
}
