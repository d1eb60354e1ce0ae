//! Link-layer header types, numbered as in the pcap and pcapng formats
//! (<https://www.tcpdump.org/linktypes.html>).

/// A pcap `LINKTYPE_*` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkType(pub u16);

impl LinkType {
    /// BSD loopback: a 4-byte address family in the capturing host's byte order.
    pub const NULL: LinkType = LinkType(0);
    /// Ethernet II, with 802.1Q / 802.1ad tags in front of the ethertype.
    pub const ETHERNET: LinkType = LinkType(1);
    /// DLT_RAW as numbered on some BSDs: a bare IPv4 or IPv6 packet.
    pub const RAW_BSD12: LinkType = LinkType(12);
    /// DLT_RAW as numbered on OpenBSD: a bare IPv4 or IPv6 packet.
    pub const RAW_BSD14: LinkType = LinkType(14);
    /// A bare IPv4 or IPv6 packet.
    pub const RAW: LinkType = LinkType(101);
    /// OpenBSD loopback: a 4-byte address family in network byte order.
    pub const LOOP: LinkType = LinkType(108);
    /// Linux "cooked" capture, version 1 (16-byte header).
    pub const LINUX_SLL: LinkType = LinkType(113);
    /// A bare IPv4 packet.
    pub const IPV4: LinkType = LinkType(228);
    /// A bare IPv6 packet.
    pub const IPV6: LinkType = LinkType(229);
    /// Linux "cooked" capture, version 2 (20-byte header).
    pub const LINUX_SLL2: LinkType = LinkType(276);

    /// Whether [`crate::decode`] understands this link type.
    pub fn is_supported(self) -> bool {
        matches!(
            self,
            Self::NULL
                | Self::ETHERNET
                | Self::RAW_BSD12
                | Self::RAW_BSD14
                | Self::RAW
                | Self::LOOP
                | Self::LINUX_SLL
                | Self::IPV4
                | Self::IPV6
                | Self::LINUX_SLL2
        )
    }

    /// A short name for messages and the manifest.
    pub fn name(self) -> &'static str {
        match self {
            Self::NULL => "null",
            Self::ETHERNET => "ethernet",
            Self::RAW_BSD12 | Self::RAW_BSD14 | Self::RAW => "raw",
            Self::LOOP => "loop",
            Self::LINUX_SLL => "linux_sll",
            Self::IPV4 => "ipv4",
            Self::IPV6 => "ipv6",
            Self::LINUX_SLL2 => "linux_sll2",
            _ => "other",
        }
    }
}
