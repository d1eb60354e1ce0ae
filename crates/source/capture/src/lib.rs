//! Linux packet sources: AF_PACKET sockets with TPACKET_V3 receive rings
//! joined in a fanout group (the kernel spreads flows over the workers), the
//! kernel's packet counters, classic BPF filters compiled by libpcap, the
//! flow-hash shard filter (eBPF, generated here), the frame sender behind
//! `weir gen -i`, and giving up root once the rings are open.
//!
//! Everything that touches the kernel lives here, behind small safe types;
//! the parsing and storage crates know nothing of it.

pub mod bpf;
mod classic;
pub mod iface;
pub mod privilege;
pub mod shard;
mod sys;
pub mod tx;

pub use iface::Interface;
/// libpcap's filter compiler (its own crate, which the analyses use too).
pub use pcapfilter as filter;
pub mod gate;
pub mod ring;

pub use filter::{Filter, FilterError, compile as compile_filter};
pub use ring::{
    Fanout, FanoutBy, KernelStats, RingError, RingOptions, RingSocket, RxFrame, RxRing,
    SocketFilter,
};
pub use shard::Shard;
