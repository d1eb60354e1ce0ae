//! Zero-copy parsing of captured frames into packet records.
//!
//! This crate is pure: it knows nothing of files, threads or Linux. It takes
//! the bytes of one captured frame and its link type and fills a
//! [`PacketRecord`], the row that weir keeps for every frame.
//!
//! The layout follows smoltcp's `wire` module: each header has a typed view
//! over a byte slice ([`link::EthernetFrame`], [`ip::Ipv4Packet`], ...) whose
//! constructor checks the length once, after which accessors are plain reads.
//! Nothing here panics on short or hostile input and nothing copies the frame.
//!
//! [`decode`] walks the views from the link layer down to the transport
//! header, through the encapsulations of [`tunnel`] to the innermost IP
//! packet. A truncated or malformed frame still yields a record with whatever
//! parsed, and [`ParseError`] says where parsing stopped.
//!
//! [`flow_hash`] is the one symmetric 5-tuple hash used everywhere weir groups
//! packets into flows.

pub mod build;
mod bytes;
pub mod decode;
pub mod flow;
pub mod ip;
pub mod link;
pub mod linktype;
pub mod record;
mod segment;
pub mod transport;
pub mod tunnel;

pub use decode::{Layout, decode, decode_layout};
pub use flow::{FlowKey, flow_hash};
pub use linktype::LinkType;
pub use record::{Has, PacketFields, PacketRecord, ParseError, Tunnel, TunnelFields, TunnelHas};
pub use segment::Segment;
