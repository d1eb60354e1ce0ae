//! The packet record: one row per captured frame.

/// Bits of [`PacketFields::has`]: which optional fields hold a value.
///
/// A field whose bit is clear is absent (null in the dataset) and its value
/// in the struct is meaningless (usually zero).
pub struct Has;

impl Has {
    /// `eth_src` (Ethernet, and cooked captures that know the sender).
    pub const ETH_SRC: u16 = 1 << 0;
    /// `eth_dst` (Ethernet only).
    pub const ETH_DST: u16 = 1 << 13;
    /// Both MAC addresses.
    pub const ETH: u16 = Self::ETH_SRC | Self::ETH_DST;
    /// `vlan` (the outer tag's VLAN id).
    pub const VLAN: u16 = 1 << 1;
    /// `ethertype` (after VLAN tags).
    pub const ETHERTYPE: u16 = 1 << 2;
    /// `ip_version`, `ip_src`, `ip_dst`, `ip_len`, `ip_hdr_len`, `ip_proto`,
    /// `ttl`, `dscp`.
    pub const IP: u16 = 1 << 3;
    /// `ip_id`: IPv4's identification, or the IPv6 fragment header's.
    pub const IP_ID: u16 = 1 << 4;
    /// `frag`: IPv4 flags + offset, or the IPv6 fragment header's M + offset.
    pub const FRAG: u16 = 1 << 5;
    /// `src_port`, `dst_port` (TCP, UDP, SCTP).
    pub const PORTS: u16 = 1 << 6;
    /// `tcp_flags`, `tcp_seq`, `tcp_ack`, `tcp_win`, `tcp_hdr_len`.
    pub const TCP: u16 = 1 << 7;
    /// `udp_len`.
    pub const UDP: u16 = 1 << 8;
    /// `icmp_type`, `icmp_code` (ICMP and ICMPv6).
    pub const ICMP: u16 = 1 << 9;
    /// `payload_len`.
    pub const PAYLOAD: u16 = 1 << 10;
    /// `flow_hash`.
    pub const FLOW: u16 = 1 << 11;
    /// `pcap_file`, `pcap_offset`.
    pub const PCAP: u16 = 1 << 12;
}

/// Where parsing of a frame stopped early, and why.
///
/// Stored in the dataset as a short string (see [`ParseError::as_str`]);
/// `None` is stored as null.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ParseError {
    /// The frame parsed as far as weir parses it.
    #[default]
    None = 0,
    /// weir does not decode this link type; only lengths and time are kept.
    UnsupportedLinkType,
    /// Shorter than its link-layer header.
    TruncatedLink,
    /// Ends inside an 802.1Q/802.1ad tag, or has more tags than weir follows.
    TruncatedVlan,
    /// Raw-IP link type, but the version nibble is neither 4 nor 6.
    BadIpVersion,
    /// Ends inside the IPv4 header (fixed part or options).
    TruncatedIpv4,
    /// IPv4 header length below 20 bytes or total length below header length.
    BadIpv4Header,
    /// Ends inside the fixed 40-byte IPv6 header.
    TruncatedIpv6,
    /// Ends inside an IPv6 extension header, or the chain is malformed.
    BadIpv6ExtHeader,
    /// Ends inside the fixed 20-byte TCP header.
    TruncatedTcp,
    /// TCP data offset below 5 words, or beyond the IP payload.
    BadTcpHeader,
    /// Ends inside the 8-byte UDP header.
    TruncatedUdp,
    /// UDP length below 8 or beyond the IP payload.
    BadUdpLength,
    /// Ends inside the 12-byte SCTP common header.
    TruncatedSctp,
    /// Ends inside the ICMP/ICMPv6 type and code.
    TruncatedIcmp,
    /// Ends inside an MPLS label stack, or has more labels than weir follows.
    TruncatedMpls,
    /// Ends inside the PPPoE session header or its PPP protocol field.
    TruncatedPppoe,
    /// Ends inside the GRE header (with the fields its flags announce).
    TruncatedGre,
    /// Ends inside an ERSPAN type II or III header.
    TruncatedErspan,
    /// Ends inside the 8-byte VXLAN header.
    TruncatedVxlan,
    /// Ends inside the GENEVE header or its options.
    TruncatedGeneve,
    /// Ends inside the GTP-U header or its extension headers.
    TruncatedGtpu,
    /// An encapsulation deeper than weir follows
    /// ([`crate::decode::MAX_ENCAPSULATIONS`]); the record describes the
    /// innermost packet reached.
    EncapsulationTooDeep,
    /// Ends inside a WCCP redirect header (in GRE).
    TruncatedWccp,
    /// Ends inside the NSH header (with the context headers its length
    /// announces).
    TruncatedNsh,
    /// Ends inside the 8-byte header of a PIM Register.
    TruncatedPim,
}

impl ParseError {
    /// Every code, in numeric order.
    pub const ALL: [ParseError; 26] = [
        ParseError::None,
        ParseError::UnsupportedLinkType,
        ParseError::TruncatedLink,
        ParseError::TruncatedVlan,
        ParseError::BadIpVersion,
        ParseError::TruncatedIpv4,
        ParseError::BadIpv4Header,
        ParseError::TruncatedIpv6,
        ParseError::BadIpv6ExtHeader,
        ParseError::TruncatedTcp,
        ParseError::BadTcpHeader,
        ParseError::TruncatedUdp,
        ParseError::BadUdpLength,
        ParseError::TruncatedSctp,
        ParseError::TruncatedIcmp,
        ParseError::TruncatedMpls,
        ParseError::TruncatedPppoe,
        ParseError::TruncatedGre,
        ParseError::TruncatedErspan,
        ParseError::TruncatedVxlan,
        ParseError::TruncatedGeneve,
        ParseError::TruncatedGtpu,
        ParseError::EncapsulationTooDeep,
        ParseError::TruncatedWccp,
        ParseError::TruncatedNsh,
        ParseError::TruncatedPim,
    ];

    /// The name stored in the dataset's `parse_error` column.
    pub fn as_str(self) -> &'static str {
        match self {
            ParseError::None => "none",
            ParseError::UnsupportedLinkType => "unsupported_link_type",
            ParseError::TruncatedLink => "truncated_link",
            ParseError::TruncatedVlan => "truncated_vlan",
            ParseError::BadIpVersion => "bad_ip_version",
            ParseError::TruncatedIpv4 => "truncated_ipv4",
            ParseError::BadIpv4Header => "bad_ipv4_header",
            ParseError::TruncatedIpv6 => "truncated_ipv6",
            ParseError::BadIpv6ExtHeader => "bad_ipv6_ext_header",
            ParseError::TruncatedTcp => "truncated_tcp",
            ParseError::BadTcpHeader => "bad_tcp_header",
            ParseError::TruncatedUdp => "truncated_udp",
            ParseError::BadUdpLength => "bad_udp_length",
            ParseError::TruncatedSctp => "truncated_sctp",
            ParseError::TruncatedIcmp => "truncated_icmp",
            ParseError::TruncatedMpls => "truncated_mpls",
            ParseError::TruncatedPppoe => "truncated_pppoe",
            ParseError::TruncatedGre => "truncated_gre",
            ParseError::TruncatedErspan => "truncated_erspan",
            ParseError::TruncatedVxlan => "truncated_vxlan",
            ParseError::TruncatedGeneve => "truncated_geneve",
            ParseError::TruncatedGtpu => "truncated_gtpu",
            ParseError::EncapsulationTooDeep => "encapsulation_too_deep",
            ParseError::TruncatedWccp => "truncated_wccp",
            ParseError::TruncatedNsh => "truncated_nsh",
            ParseError::TruncatedPim => "truncated_pim",
        }
    }

    /// The code for a stored name.
    pub fn from_name(name: &str) -> Option<ParseError> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// The code for its numeric value.
    pub fn from_u8(v: u8) -> Option<ParseError> {
        Self::ALL.get(v as usize).copied()
    }
}

/// Bits of [`TunnelFields::has`]: which tunnel fields hold a value
/// (kept apart from [`Has`], whose bits are spoken for).
pub struct TunnelHas;

impl TunnelHas {
    /// `outer_src`, `outer_dst`.
    pub const OUTER_IP: u8 = 1 << 0;
    /// `tunnel_id`.
    pub const ID: u8 = 1 << 1;
}

/// An encapsulation weir looks through, as stored in the `tunnel` column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Tunnel {
    /// No encapsulation (stored as null).
    #[default]
    None = 0,
    /// An MPLS label stack (ethertype 0x8847/0x8848); id: the top label.
    Mpls,
    /// A PPPoE session (ethertype 0x8864); id: the session id.
    Pppoe,
    /// GRE (IP protocol 47); id: the key, when present.
    Gre,
    /// ERSPAN type I, II or III over GRE; id: the session id (II and III).
    Erspan,
    /// VXLAN (UDP port 4789); id: the VNI.
    Vxlan,
    /// GENEVE (UDP port 6081); id: the VNI.
    Geneve,
    /// IPv4 or IPv6 directly in IPv4 or IPv6 (IP protocols 4 and 41).
    Ipip,
    /// GTP-U (UDP port 2152) carrying a G-PDU; id: the TEID.
    Gtpu,
    /// WCCP redirection in GRE (protocol type 0x883e); id: the service id
    /// of a version 2 redirect header.
    Wccp,
    /// VXLAN-GPE (UDP port 4790); id: the VNI, when its flag says so.
    VxlanGpe,
    /// A Network Service Header (ethertype 0x894f, VXLAN-GPE's next
    /// protocol 4); id: the service path id.
    Nsh,
    /// A PIM Register (IP protocol 103, message type 1) carrying a
    /// multicast packet to the rendezvous point.
    Pim,
}

impl Tunnel {
    /// Every kind, in numeric order.
    pub const ALL: [Tunnel; 13] = [
        Tunnel::None,
        Tunnel::Mpls,
        Tunnel::Pppoe,
        Tunnel::Gre,
        Tunnel::Erspan,
        Tunnel::Vxlan,
        Tunnel::Geneve,
        Tunnel::Ipip,
        Tunnel::Gtpu,
        Tunnel::Wccp,
        Tunnel::VxlanGpe,
        Tunnel::Nsh,
        Tunnel::Pim,
    ];

    /// The name stored in the dataset's `tunnel` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Tunnel::None => "none",
            Tunnel::Mpls => "mpls",
            Tunnel::Pppoe => "pppoe",
            Tunnel::Gre => "gre",
            Tunnel::Erspan => "erspan",
            Tunnel::Vxlan => "vxlan",
            Tunnel::Geneve => "geneve",
            Tunnel::Ipip => "ipip",
            Tunnel::Gtpu => "gtpu",
            Tunnel::Wccp => "wccp",
            Tunnel::VxlanGpe => "vxlan-gpe",
            Tunnel::Nsh => "nsh",
            Tunnel::Pim => "pim",
        }
    }

    /// The kind for a stored name.
    pub fn from_name(name: &str) -> Option<Tunnel> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// One row per captured frame: the packet record of DESIGN.md.
///
/// Its per-frame [`PacketFields`] (reached through `Deref`, as `rec.ip_src`)
/// and the [`TunnelFields`] that only a tunnelled frame fills. Writers keep
/// the two apart: millions of buffered rows hold the fields alone, and the
/// tunnel fields only for the frames that have them.
///
/// In a tunnelled frame the IP and transport fields, and the flow hash,
/// describe the innermost IP packet reached; the link-layer fields stay
/// those of the outermost frame, and the tunnel fields keep the rest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketRecord {
    pub fields: PacketFields,
    pub tunnel: TunnelFields,
}

/// A frame's fields other than its tunnel's.
///
/// Plain values; [`PacketFields::has`] says which optional ones are
/// present. IPv4 addresses are kept IPv4-mapped in IPv6 space
/// (`::ffff:a.b.c.d`) so that one 16-byte column holds both families.
///
/// Laid out by hand, by alignment (so without padding): the fields that
/// vary from packet to packet first, in the first cache line, then those
/// of the columns constant within a flow, `flow_hash` to `parse_error`, as
/// one stretch of 72 bytes that the packet writer compares between rows
/// at once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PacketFields {
    /// Arrival time, nanoseconds since the Unix epoch (UTC).
    pub ts_ns: i64,
    /// Byte offset of the frame's record header in the pcap file
    /// `pcap_file` names.
    pub pcap_offset: u64,
    /// Length of the frame on the wire.
    pub wire_len: u32,
    /// Bytes of the frame that were captured.
    pub cap_len: u32,
    /// Length of the IP packet as the header states it, header included
    /// (for IPv6: 40 + payload length). An IPv4 total length of 0, which
    /// TSO and BIG TCP super-packets captured on the sending host carry, is
    /// replaced by the length the frame gives, as tshark does.
    pub ip_len: u32,
    /// IPv4 identification, or the IPv6 fragment header's identification.
    pub ip_id: u32,
    pub tcp_seq: u32,
    pub tcp_ack: u32,
    /// Transport payload bytes on the wire (from the headers' lengths, not
    /// from what was captured).
    pub payload_len: u32,
    /// Which pcap file of the dataset holds the frame.
    pub pcap_file: u32,
    /// Fragment field in IPv4's layout: bit 14 DF, bit 13 MF, bits 0..13 the
    /// offset in 8-byte units. IPv6 fragment headers map onto the same bits.
    pub frag: u16,
    /// The nine TCP flag bits: NS (0x100), CWR, ECE, URG, ACK, PSH, RST, SYN,
    /// FIN (0x001).
    pub tcp_flags: u16,
    pub tcp_win: u16,
    /// UDP length field.
    pub udp_len: u16,
    // The fields of the columns constant within a flow, from here to the
    // end, side by side (see above).
    /// [`crate::flow_hash`] of the 5-tuple.
    pub flow_hash: u32,
    /// Worker that saw the frame.
    pub worker: u16,
    /// Interface index within the capture or source file.
    pub iface: u16,
    /// [`Has`] bits.
    pub has: u16,
    /// Outer VLAN id (12 bits).
    pub vlan: u16,
    /// Ethertype after any VLAN tags (or the SLL protocol field).
    pub ethertype: u16,
    /// IP header length; for IPv6, 40 plus the extension headers before the
    /// transport header.
    pub ip_hdr_len: u16,
    pub src_port: u16,
    pub dst_port: u16,
    pub ip_src: [u8; 16],
    pub ip_dst: [u8; 16],
    pub eth_src: [u8; 6],
    pub eth_dst: [u8; 6],
    /// 4 or 6.
    pub ip_version: u8,
    /// The transport protocol: IPv4's protocol field, or for IPv6 the next
    /// header that follows the extension-header chain.
    pub ip_proto: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// DSCP, the upper six bits of the TOS / traffic class byte.
    pub dscp: u8,
    /// TCP header length in bytes.
    pub tcp_hdr_len: u8,
    pub icmp_type: u8,
    pub icmp_code: u8,
    /// Where parsing stopped early; [`ParseError::None`] if it did not.
    pub parse_error: ParseError,
}

// Two cache lines: writers buffer millions of these and visit them out of
// order, so every byte here is memory traffic per packet. Their sizes add
// up to 128, so there is no padding; the flow's fields are the last 72.
const _: () = assert!(std::mem::size_of::<PacketFields>() == 128);
const _: () = assert!(std::mem::offset_of!(PacketFields, flow_hash) == 56);

/// What a tunnelled frame keeps of its outer layers; all at their defaults
/// ([`TunnelFields::NONE`]) for a frame without a tunnel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunnelFields {
    /// Addresses of the outermost IP header of a tunnelled frame (the same
    /// as `ip_src`/`ip_dst` when the only encapsulations lie below IP, as
    /// MPLS or PPPoE); [`TunnelHas::OUTER_IP`].
    pub outer_src: [u8; 16],
    pub outer_dst: [u8; 16],
    /// The outermost encapsulation's id (VNI, GRE key, top MPLS label, GTP
    /// TEID, ERSPAN or PPPoE session id); [`TunnelHas::ID`].
    pub id: u32,
    /// The outermost encapsulation; [`Tunnel::None`] if there is none.
    pub kind: Tunnel,
    /// Encapsulations walked through (an MPLS label stack counts once).
    pub depth: u8,
    /// [`TunnelHas`] bits.
    pub has: u8,
}

impl TunnelFields {
    /// The tunnel fields of a frame without a tunnel.
    pub const NONE: TunnelFields = TunnelFields {
        outer_src: [0; 16],
        outer_dst: [0; 16],
        id: 0,
        kind: Tunnel::None,
        depth: 0,
        has: 0,
    };

    /// Whether every field is at its default: no tunnel.
    #[inline]
    pub fn is_none(&self) -> bool {
        *self == Self::NONE
    }
}

impl std::ops::Deref for PacketRecord {
    type Target = PacketFields;

    #[inline(always)]
    fn deref(&self) -> &PacketFields {
        &self.fields
    }
}

impl std::ops::DerefMut for PacketRecord {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut PacketFields {
        &mut self.fields
    }
}

impl PacketRecord {
    /// A record for a frame with only its capture metadata filled.
    pub fn new(ts_ns: i64, wire_len: u32, cap_len: u32) -> Self {
        PacketRecord {
            fields: PacketFields {
                ts_ns,
                wire_len,
                cap_len,
                ..Default::default()
            },
            tunnel: TunnelFields::NONE,
        }
    }
}

impl PacketFields {
    /// Whether all the given [`Has`] bits are set.
    #[inline]
    pub fn has(&self, bits: u16) -> bool {
        self.has & bits == bits
    }

    /// True when the (unordered) endpoint pair was swapped to put the smaller
    /// (address, port) first, i.e. this packet travels from the "high" end to
    /// the "low" end of its flow. Used to group a flow's two directions.
    #[inline]
    pub fn flow_reversed(&self) -> bool {
        crate::flow::is_reversed(&self.ip_src, &self.ip_dst, self.src_port, self.dst_port)
    }
}
