//! Link-layer header views: Ethernet II (with VLAN tags), Linux cooked
//! capture v1 and v2, BSD loopback.

use crate::bytes::{array, be16, be32};

/// The input ended before the header did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Truncated;

/// Ethertypes weir looks at.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const VLAN: u16 = 0x8100;
    pub const IPV6: u16 = 0x86dd;
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard QinQ outer tag, still seen on old gear.
    pub const QINQ_OLD: u16 = 0x9100;
    pub const MPLS: u16 = 0x8847;
    pub const MPLS_MULTICAST: u16 = 0x8848;
    pub const PPPOE_SESSION: u16 = 0x8864;
    /// Transparent Ethernet bridging: an Ethernet frame follows (GRE,
    /// GENEVE).
    pub const TEB: u16 = 0x6558;
    /// ERSPAN type I and II (as GRE's protocol type).
    pub const ERSPAN: u16 = 0x88be;
    /// ERSPAN type III.
    pub const ERSPAN3: u16 = 0x22eb;
    /// WCCP redirection (as GRE's protocol type).
    pub const WCCP: u16 = 0x883e;
    /// Cisco MetaData (a security group tag; in GRE, before the ethertype
    /// of what it carries).
    pub const CMD: u16 = 0x8909;
    /// A Network Service Header.
    pub const NSH: u16 = 0x894f;

    /// Whether this ethertype announces an 802.1Q/802.1ad tag.
    #[inline]
    pub fn is_vlan_tag(t: u16) -> bool {
        matches!(t, VLAN | QINQ | QINQ_OLD)
    }
}

/// An Ethernet II header: destination, source, ethertype.
#[derive(Clone, Copy, Debug)]
pub struct EthernetFrame<'a> {
    buf: &'a [u8],
}

impl<'a> EthernetFrame<'a> {
    pub const HEADER_LEN: usize = 14;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, Truncated> {
        if buf.len() < Self::HEADER_LEN {
            return Err(Truncated);
        }
        Ok(EthernetFrame { buf })
    }

    pub fn dst(&self) -> [u8; 6] {
        array(self.buf, 0)
    }

    pub fn src(&self) -> [u8; 6] {
        array(self.buf, 6)
    }

    pub fn ethertype(&self) -> u16 {
        be16(self.buf, 12)
    }

    pub fn payload(&self) -> &'a [u8] {
        &self.buf[Self::HEADER_LEN..]
    }
}

/// An 802.1Q / 802.1ad tag as it follows a tag ethertype: TCI, then the
/// next ethertype.
#[derive(Clone, Copy, Debug)]
pub struct VlanTag<'a> {
    buf: &'a [u8],
}

impl<'a> VlanTag<'a> {
    pub const LEN: usize = 4;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, Truncated> {
        if buf.len() < Self::LEN {
            return Err(Truncated);
        }
        Ok(VlanTag { buf })
    }

    /// The 12-bit VLAN identifier.
    pub fn vlan_id(&self) -> u16 {
        be16(self.buf, 0) & 0x0fff
    }

    /// The 3-bit priority code point.
    pub fn pcp(&self) -> u8 {
        self.buf[0] >> 5
    }

    pub fn ethertype(&self) -> u16 {
        be16(self.buf, 2)
    }

    pub fn payload(&self) -> &'a [u8] {
        &self.buf[Self::LEN..]
    }
}

/// ARPHRD_ETHER: the link-layer address in an SLL header is a MAC.
pub const ARPHRD_ETHER: u16 = 1;

/// A Linux cooked-capture v1 header (LINKTYPE_LINUX_SLL).
#[derive(Clone, Copy, Debug)]
pub struct SllHeader<'a> {
    buf: &'a [u8],
}

impl<'a> SllHeader<'a> {
    pub const LEN: usize = 16;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, Truncated> {
        if buf.len() < Self::LEN {
            return Err(Truncated);
        }
        Ok(SllHeader { buf })
    }

    /// 0 to us, 1 broadcast, 2 multicast, 3 to someone else, 4 sent by us.
    pub fn packet_type(&self) -> u16 {
        be16(self.buf, 0)
    }

    pub fn arphrd(&self) -> u16 {
        be16(self.buf, 2)
    }

    pub fn addr_len(&self) -> u16 {
        be16(self.buf, 4)
    }

    /// The sender's link-layer address (first `addr_len` of 8 bytes).
    pub fn addr(&self) -> [u8; 8] {
        array(self.buf, 6)
    }

    /// The protocol: an ethertype, or a small Linux value for non-Ethernet
    /// payloads.
    pub fn protocol(&self) -> u16 {
        be16(self.buf, 14)
    }

    pub fn payload(&self) -> &'a [u8] {
        &self.buf[Self::LEN..]
    }
}

/// A Linux cooked-capture v2 header (LINKTYPE_LINUX_SLL2).
#[derive(Clone, Copy, Debug)]
pub struct Sll2Header<'a> {
    buf: &'a [u8],
}

impl<'a> Sll2Header<'a> {
    pub const LEN: usize = 20;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, Truncated> {
        if buf.len() < Self::LEN {
            return Err(Truncated);
        }
        Ok(Sll2Header { buf })
    }

    pub fn protocol(&self) -> u16 {
        be16(self.buf, 0)
    }

    pub fn ifindex(&self) -> u32 {
        be32(self.buf, 4)
    }

    pub fn arphrd(&self) -> u16 {
        be16(self.buf, 8)
    }

    pub fn packet_type(&self) -> u8 {
        self.buf[10]
    }

    pub fn addr_len(&self) -> u8 {
        self.buf[11]
    }

    pub fn addr(&self) -> [u8; 8] {
        array(self.buf, 12)
    }

    pub fn payload(&self) -> &'a [u8] {
        &self.buf[Self::LEN..]
    }
}

/// What a BSD loopback header says the payload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoopbackFamily {
    Ipv4,
    Ipv6,
    Other(u32),
}

/// Reads the 4-byte address family of LINKTYPE_NULL (host byte order of the
/// capturing machine, so both orders are tried) or LINKTYPE_LOOP (network
/// order). IPv6 has different AF values on Linux, the BSDs and macOS.
pub fn loopback_family(buf: &[u8], network_order: bool) -> Result<LoopbackFamily, Truncated> {
    if buf.len() < 4 {
        return Err(Truncated);
    }
    let be = be32(buf, 0);
    let candidates: &[u32] = if network_order {
        &[be]
    } else {
        &[be, be.swap_bytes()]
    };
    for &af in candidates {
        match af {
            2 => return Ok(LoopbackFamily::Ipv4),
            10 | 24 | 28 | 30 => return Ok(LoopbackFamily::Ipv6),
            _ => {}
        }
    }
    Ok(LoopbackFamily::Other(be))
}
