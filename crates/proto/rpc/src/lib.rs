//! ONC RPC (RFC 5531) and NFS transactions from packets.
//!
//! Pure, like `wire`: it knows nothing of files, threads or Linux. The
//! caller hands [`Tracker`] each TCP or UDP packet of a capture in time
//! order ([`Segment`]: addresses, ports, sequence number, payload); the
//! tracker finds RPC messages in UDP datagrams and in TCP streams (record
//! marking, several messages per segment, one message over many segments,
//! with bounded reassembly and gaps counted), matches each call with its
//! reply on (client, server, xid), and hands back [`Transaction`]s with the
//! NFS (v3, v4 COMPOUND) and MOUNT detail decoded ([`nfs`]).

pub mod msg;
pub mod nfs;
pub mod track;
pub mod xdr;

pub use msg::{Call, Message, ReplyStatus};
pub use nfs::{Attr, CallDetail, Op};
pub use track::{Counters, Segment, Tracker, TrackerOptions, Transaction};

#[cfg(test)]
mod tests;
