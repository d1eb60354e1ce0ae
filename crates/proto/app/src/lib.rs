//! DNS, TLS and HTTP/1.x metadata from packets: the application layer
//! weir writes at ingest (the dns, tls and http tables).
//!
//! Pure, like `wire` and `rpc`: it knows nothing of files, threads or
//! Linux. The parsers ([`dns`], [`tls`] with [`x509`], [`http`]) take bytes
//! and never panic on hostile ones (they are fuzzed); [`track::Tracker`]
//! takes each TCP or UDP segment of a capture in time order and hands
//! back [`track::DnsRecord`]s, [`track::TlsRecord`]s and
//! [`track::HttpRecord`]s.

pub mod dns;
pub mod http;
mod md5;
pub mod tls;
pub mod track;
pub mod x509;

pub use md5::md5;
pub use track::{Counters, DnsRecord, HttpRecord, TlsRecord, Tracker, TrackerOptions};

#[cfg(test)]
mod tests;
