//! One pass over a frame, from the link layer to the transport header,
//! filling a [`PacketRecord`].

use std::ops::Range;

use crate::flow::{addr_words, flow_hash_words};
use crate::ip::{Ipv4Packet, Ipv6Packet, proto, v4_mapped, walk_ipv6_chain};
use crate::link::{
    ARPHRD_ETHER, EthernetFrame, LoopbackFamily, Sll2Header, SllHeader, VlanTag, ethertype,
    loopback_family,
};
use crate::linktype::LinkType;
use crate::record::{Has, PacketRecord, ParseError, Tunnel, TunnelHas};
use crate::transport::{IcmpHeader, SctpHeader, TcpHeader, UdpHeader};
use crate::tunnel::{self, Encap, Next};

/// The low half of `::ffff:a.b.c.d` without the address: IPv4 addresses
/// live in the 16-byte columns mapped into `::ffff:0:0/96`.
const V4_MAPPED_LOW: u64 = 0xffff_0000_0000;

/// How many stacked VLAN tags are followed before giving up.
const MAX_VLAN_TAGS: usize = 4;

/// How many encapsulations (tunnels, MPLS stacks, PPPoE) are followed
/// before giving up with [`ParseError::EncapsulationTooDeep`].
pub const MAX_ENCAPSULATIONS: u8 = 4;

/// The transport-layer bits an inner IP header clears: the outer packet's
/// ports and lengths must not be taken for the inner one's.
const PER_IP_PACKET: u16 = Has::IP_ID
    | Has::FRAG
    | Has::PORTS
    | Has::TCP
    | Has::UDP
    | Has::ICMP
    | Has::PAYLOAD
    | Has::FLOW;

type Step = Result<(), ParseError>;

/// Parses `frame`, captured on a link of type `link`, into `rec`.
///
/// `rec` must hold the capture metadata (`ts_ns`, `wire_len`, `cap_len`,
/// `worker`, `iface`, and the pcap pointer if any) with every parsed field
/// still clear, as [`PacketRecord::new`] leaves it. `decode` only sets
/// fields. It never panics and never reads outside `frame`; on a truncated
/// or malformed frame it keeps what parsed and sets `rec.parse_error`.
///
/// A tunnelled frame is followed to its innermost IP packet (see
/// [`crate::tunnel`]), up to [`MAX_ENCAPSULATIONS`] deep.
///
/// Returns where the captured TCP or UDP payload lies in `frame` (empty
/// for other frames), for stages that read past the headers (RPC).
#[inline]
pub fn decode(link: LinkType, frame: &[u8], rec: &mut PacketRecord) -> Range<usize> {
    decode_layout(link, frame, rec).payload
}

/// Where [`decode_layout`] found a frame's parts, as offsets into it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// The captured TCP or UDP payload (empty for other frames), as
    /// [`decode`] returns it.
    pub payload: Range<usize>,
    /// The start of the IP header the record's IP columns describe: the
    /// innermost one reached in a tunnelled frame, the only one otherwise;
    /// `None` when the frame holds no IP header of a valid version.
    pub ip: Option<usize>,
}

/// [`decode`], also saying where the IP header the record describes
/// starts: for stages that look at the innermost packet itself (`weir
/// read` runs a filter from there to the frame's end).
pub fn decode_layout(link: LinkType, frame: &[u8], rec: &mut PacketRecord) -> Layout {
    let uncaptured = rec.wire_len.saturating_sub(frame.len() as u32);
    let mut d = Decoder {
        has: rec.has,
        rec,
        uncaptured,
        src: [0; 2],
        dst: [0; 2],
        base: frame.as_ptr() as usize,
        payload: 0..0,
        ip_at: None,
        depth: 0,
        ip_seen: 0,
    };
    let step = match link {
        LinkType::ETHERNET => d.ethernet(frame),
        LinkType::LINUX_SLL => d.sll(frame),
        LinkType::LINUX_SLL2 => d.sll2(frame),
        LinkType::RAW | LinkType::RAW_BSD12 | LinkType::RAW_BSD14 => d.raw_ip(frame),
        LinkType::IPV4 => d.ipv4(frame),
        LinkType::IPV6 => d.ipv6(frame),
        LinkType::NULL => d.loopback(frame, false),
        LinkType::LOOP => d.loopback(frame, true),
        _ => Err(ParseError::UnsupportedLinkType),
    };
    if let Err(e) = step {
        d.rec.parse_error = e;
    }
    d.rec.has = d.has;
    Layout {
        payload: d.payload,
        ip: d.ip_at,
    }
}

struct Decoder<'r> {
    rec: &'r mut PacketRecord,
    /// The record's [`Has`] bits, kept here and stored once at the end: a
    /// read-modify-write of the record's field per header would wait on the
    /// stores just made around it.
    has: u16,
    /// Bytes of the frame on the wire that were not captured: lengths in
    /// headers may reach this far past the end of the buffer legitimately.
    uncaptured: u32,
    /// The IP addresses as numbers, kept for the flow hash rather than read
    /// back from the record just written.
    src: [u64; 2],
    dst: [u64; 2],
    /// The frame's address, to turn a payload slice into offsets.
    base: usize,
    payload: Range<usize>,
    /// Where the last IP header reached starts in the frame.
    ip_at: Option<usize>,
    /// Encapsulations entered so far.
    depth: u8,
    /// IP headers reached so far (the version checked): the innermost one
    /// reached is the one the record describes.
    ip_seen: u8,
}

impl Decoder<'_> {
    #[inline(always)]
    fn ethernet(&mut self, frame: &[u8]) -> Step {
        let eth = EthernetFrame::new_checked(frame).map_err(|_| ParseError::TruncatedLink)?;
        self.rec.eth_src = eth.src();
        self.rec.eth_dst = eth.dst();
        self.has |= Has::ETH;
        self.ethertype(eth.ethertype(), eth.payload())
    }

    fn sll(&mut self, frame: &[u8]) -> Step {
        let sll = SllHeader::new_checked(frame).map_err(|_| ParseError::TruncatedLink)?;
        if sll.arphrd() == ARPHRD_ETHER && sll.addr_len() == 6 {
            // Cooked captures know only the sender's address.
            let a = sll.addr();
            self.rec.eth_src.copy_from_slice(&a[..6]);
            self.has |= Has::ETH_SRC;
        }
        self.ethertype(sll.protocol(), sll.payload())
    }

    fn sll2(&mut self, frame: &[u8]) -> Step {
        let sll = Sll2Header::new_checked(frame).map_err(|_| ParseError::TruncatedLink)?;
        if sll.arphrd() == ARPHRD_ETHER && sll.addr_len() == 6 {
            let a = sll.addr();
            self.rec.eth_src.copy_from_slice(&a[..6]);
            self.has |= Has::ETH_SRC;
        }
        self.ethertype(sll.protocol(), sll.payload())
    }

    fn loopback(&mut self, frame: &[u8], network_order: bool) -> Step {
        let family =
            loopback_family(frame, network_order).map_err(|_| ParseError::TruncatedLink)?;
        match family {
            LoopbackFamily::Ipv4 => self.ipv4(&frame[4..]),
            LoopbackFamily::Ipv6 => self.ipv6(&frame[4..]),
            LoopbackFamily::Other(_) => Ok(()),
        }
    }

    fn raw_ip(&mut self, frame: &[u8]) -> Step {
        match frame.first().map(|b| b >> 4) {
            None => Err(ParseError::TruncatedLink),
            Some(4) => self.ipv4(frame),
            Some(6) => self.ipv6(frame),
            Some(_) => Err(ParseError::BadIpVersion),
        }
    }

    /// Follows VLAN tags (keeping the outer id), then the network layer.
    #[inline(always)]
    fn ethertype(&mut self, ty: u16, payload: &[u8]) -> Step {
        let (ty, payload) = self.vlan_tags(ty, payload, true)?;
        self.rec.ethertype = ty;
        self.has |= Has::ETHERTYPE;
        self.network(ty, payload)
    }

    /// Skips VLAN tags, keeping the first one's id if `outer`.
    #[inline(always)]
    fn vlan_tags<'a>(
        &mut self,
        mut ty: u16,
        mut payload: &'a [u8],
        outer: bool,
    ) -> Result<(u16, &'a [u8]), ParseError> {
        let mut tags = 0;
        while ethertype::is_vlan_tag(ty) {
            if tags == MAX_VLAN_TAGS {
                return Err(ParseError::TruncatedVlan);
            }
            let tag = VlanTag::new_checked(payload).map_err(|_| ParseError::TruncatedVlan)?;
            if tags == 0 && outer {
                self.rec.vlan = tag.vlan_id();
                self.has |= Has::VLAN;
            }
            ty = tag.ethertype();
            payload = tag.payload();
            tags += 1;
        }
        Ok((ty, payload))
    }

    /// The network layer of ethertype `ty`, or an encapsulation below IP.
    #[inline(always)]
    fn network(&mut self, ty: u16, payload: &[u8]) -> Step {
        match ty {
            ethertype::IPV4 => self.ipv4(payload),
            ethertype::IPV6 => self.ipv6(payload),
            ethertype::MPLS
            | ethertype::MPLS_MULTICAST
            | ethertype::PPPOE_SESSION
            | ethertype::NSH => self.below_ip(ty, payload),
            _ => Ok(()),
        }
    }

    /// The encapsulations below IP, out of the common path.
    #[cold]
    #[inline(never)]
    fn below_ip(&mut self, ty: u16, payload: &[u8]) -> Step {
        match ty {
            ethertype::PPPOE_SESSION => self.enter(tunnel::pppoe(payload)?),
            ethertype::NSH => self.enter(tunnel::nsh(payload)?),
            _ => self.enter(tunnel::mpls(payload)?),
        }
    }

    /// An Ethernet frame inside an encapsulation: the record keeps the
    /// outer frame's link-layer fields.
    #[cold]
    #[inline(never)]
    fn inner_ethernet(&mut self, frame: &[u8]) -> Step {
        let eth = EthernetFrame::new_checked(frame).map_err(|_| ParseError::TruncatedLink)?;
        let (ty, payload) = self.vlan_tags(eth.ethertype(), eth.payload(), false)?;
        self.network(ty, payload)
    }

    /// Goes into an encapsulation whose header parsed: counts it, keeps the
    /// outermost one's kind, id and outer addresses, and walks on inside.
    /// Kept out of line: it closes the recursion, so that the walk of an
    /// untunnelled frame can still be inlined into one function.
    #[cold]
    #[inline(never)]
    fn enter(&mut self, e: Encap<'_>) -> Step {
        if e.tunnel == Tunnel::None {
            return Ok(());
        }
        if self.depth == MAX_ENCAPSULATIONS {
            return Err(ParseError::EncapsulationTooDeep);
        }
        self.depth += 1;
        let rec = &mut *self.rec;
        rec.tunnel.depth = self.depth;
        if self.depth == 1 {
            rec.tunnel.kind = e.tunnel;
            if let Some(id) = e.id {
                rec.tunnel.id = id;
                rec.tunnel.has |= TunnelHas::ID;
            }
            if self.ip_seen > 0 {
                self.note_outer();
            }
        }
        match e.next {
            Next::Ethernet(b) => self.inner_ethernet(b),
            Next::Ethertype(ty, b) => self.network(ty, b),
            Next::Ip(b) => match b.first().map(|v| v >> 4) {
                None => Err(e.truncated),
                Some(4) => self.ipv4(b),
                Some(6) => self.ipv6(b),
                Some(_) => Ok(()),
            },
            Next::Stop => Ok(()),
        }
    }

    /// Keeps the addresses of the IP header just written, the outermost one
    /// of a tunnelled frame.
    fn note_outer(&mut self) {
        let rec = &mut *self.rec;
        rec.tunnel.outer_src = rec.ip_src;
        rec.tunnel.outer_dst = rec.ip_dst;
        rec.tunnel.has |= TunnelHas::OUTER_IP;
    }

    /// Called once an IP header's version checked, with the header: an
    /// inner packet clears what the outer one's transport set.
    #[inline]
    fn new_ip_packet(&mut self, header: &[u8]) {
        self.ip_at = Some(header.as_ptr() as usize - self.base);
        if self.ip_seen > 0 {
            self.has &= !PER_IP_PACKET;
            self.payload = 0..0;
            // Absent fields are zero (the batch encoding relies on it).
            let rec = &mut *self.rec;
            (rec.ip_id, rec.frag, rec.src_port, rec.dst_port) = (0, 0, 0, 0);
            (rec.tcp_flags, rec.tcp_win, rec.tcp_seq, rec.tcp_ack) = (0, 0, 0, 0);
            (rec.tcp_hdr_len, rec.icmp_type, rec.icmp_code) = (0, 0, 0);
            (rec.udp_len, rec.payload_len) = (0, 0);
        }
        self.ip_seen = self.ip_seen.saturating_add(1);
    }

    #[inline(always)]
    fn ipv4(&mut self, buf: &[u8]) -> Step {
        let ip = Ipv4Packet::new_checked(buf).map_err(|_| ParseError::TruncatedIpv4)?;
        if ip.version() != 4 {
            return Err(ParseError::BadIpVersion);
        }
        self.new_ip_packet(buf);
        self.src = [0, V4_MAPPED_LOW | u32::from_be_bytes(ip.src()) as u64];
        self.dst = [0, V4_MAPPED_LOW | u32::from_be_bytes(ip.dst()) as u64];
        let rec = &mut *self.rec;
        rec.ip_version = 4;
        rec.ip_src = v4_mapped(ip.src());
        rec.ip_dst = v4_mapped(ip.dst());
        rec.ip_hdr_len = ip.header_len() as u16;
        rec.ip_proto = ip.protocol();
        rec.ttl = ip.ttl();
        rec.dscp = ip.dscp();
        rec.ip_id = ip.ident() as u32;
        rec.frag = ip.frag_field();
        self.has |= Has::IP | Has::IP_ID | Has::FRAG;
        if self.depth > 0 && self.ip_seen == 1 {
            // The first IP header, inside an encapsulation below IP.
            self.note_outer();
        }

        let hdr_len = ip.header_len();
        // A zero total length is what TSO/GSO super-packets carry when
        // captured on the sending host: the frame itself gives the length.
        let total = match ip.total_len() as usize {
            0 => buf.len() + self.uncaptured as usize,
            n => n,
        };
        self.rec.ip_len = total.min(u32::MAX as usize) as u32;
        if hdr_len < Ipv4Packet::MIN_HEADER_LEN || total < hdr_len {
            return Err(ParseError::BadIpv4Header);
        }
        let l4_wire = (total - hdr_len) as u32;
        let is_fragment = ip.more_fragments() || ip.frag_offset() != 0;
        if ip.frag_offset() != 0 {
            // Not the first fragment: what follows is data, not a header.
            return self.finish_without_transport(l4_wire, is_fragment);
        }
        let l4 = ip.after_header().ok_or(ParseError::TruncatedIpv4)?;
        let l4 = &l4[..l4.len().min(total - hdr_len)];
        self.transport(ip.protocol(), l4, l4_wire, is_fragment)
    }

    fn ipv6(&mut self, buf: &[u8]) -> Step {
        let ip = Ipv6Packet::new_checked(buf).map_err(|_| ParseError::TruncatedIpv6)?;
        if ip.version() != 6 {
            return Err(ParseError::BadIpVersion);
        }
        self.new_ip_packet(buf);
        let plen = ip.payload_len() as usize;
        self.src = addr_words(&ip.src());
        self.dst = addr_words(&ip.dst());
        let rec = &mut *self.rec;
        rec.ip_version = 6;
        rec.ip_src = ip.src();
        rec.ip_dst = ip.dst();
        rec.ip_len = (Ipv6Packet::HEADER_LEN + plen) as u32;
        rec.ttl = ip.hop_limit();
        rec.dscp = ip.traffic_class() >> 2;
        rec.ip_proto = ip.next_header();
        rec.ip_hdr_len = Ipv6Packet::HEADER_LEN as u16;
        self.has |= Has::IP;
        if self.depth > 0 && self.ip_seen == 1 {
            self.note_outer();
        }
        let rec = &mut *self.rec;

        let payload = ip.payload();
        let payload = &payload[..payload.len().min(plen)];
        let chain = walk_ipv6_chain(ip.next_header(), payload);
        let (chain, broken) = match chain {
            Ok(c) => (c, false),
            Err(b) => (b.partial, true),
        };
        rec.ip_proto = chain.upper_proto;
        rec.ip_hdr_len = (Ipv6Packet::HEADER_LEN + chain.ext_len).min(u16::MAX as usize) as u16;
        let mut is_fragment = false;
        if let Some((id, offset, more)) = chain.fragment {
            rec.ip_id = id;
            rec.frag = (offset & 0x1fff) | if more { 0x2000 } else { 0 };
            self.has |= Has::IP_ID | Has::FRAG;
            is_fragment = true;
        }
        if broken {
            return Err(ParseError::BadIpv6ExtHeader);
        }
        let l4_wire = plen.saturating_sub(chain.ext_len) as u32;
        if matches!(chain.fragment, Some((_, off, _)) if off != 0) {
            return self.finish_without_transport(l4_wire, is_fragment);
        }
        let l4 = &payload[chain.ext_len..];
        self.transport(chain.upper_proto, l4, l4_wire, is_fragment)
    }

    /// A non-first fragment: the payload is all there is, and the flow is
    /// hashed without ports, like every fragment.
    fn finish_without_transport(&mut self, l4_wire: u32, is_fragment: bool) -> Step {
        self.rec.payload_len = l4_wire;
        self.has |= Has::PAYLOAD;
        self.hash_flow(is_fragment);
        Ok(())
    }

    /// Parses the transport header in `l4` (captured bytes, trimmed to the IP
    /// length); `l4_wire` is the transport length the IP header states.
    /// Goes into what it encapsulates, unless the packet is a fragment.
    #[inline(always)]
    fn transport(&mut self, proto_num: u8, l4: &[u8], l4_wire: u32, is_fragment: bool) -> Step {
        let ip_seen = self.ip_seen;
        let step = match proto_num {
            proto::TCP => self.tcp(l4, l4_wire),
            proto::UDP => self.udp(l4, l4_wire, is_fragment),
            proto::SCTP => self.sctp(l4, l4_wire),
            proto::ICMP | proto::ICMPV6 => self.icmp(l4, l4_wire),
            _ => {
                self.rec.payload_len = l4_wire;
                self.has |= Has::PAYLOAD;
                if matches!(
                    proto_num,
                    proto::IPIP | proto::IPV6_ENCAP | proto::GRE | proto::PIM
                ) && !is_fragment
                {
                    self.over_ip(proto_num, l4, l4_wire)
                } else {
                    Ok(())
                }
            }
        };
        // The flow is the innermost packet's: an inner one hashed itself.
        if self.ip_seen == ip_seen {
            self.hash_flow(is_fragment);
        }
        step
    }

    fn ports_from_prefix(&mut self, l4: &[u8]) {
        if l4.len() >= 4 {
            self.rec.src_port = u16::from_be_bytes([l4[0], l4[1]]);
            self.rec.dst_port = u16::from_be_bytes([l4[2], l4[3]]);
            self.has |= Has::PORTS;
        }
    }

    #[inline(always)]
    fn tcp(&mut self, l4: &[u8], l4_wire: u32) -> Step {
        let Ok(tcp) = TcpHeader::new_checked(l4) else {
            self.ports_from_prefix(l4);
            return Err(ParseError::TruncatedTcp);
        };
        let rec = &mut *self.rec;
        rec.src_port = tcp.src_port();
        rec.dst_port = tcp.dst_port();
        rec.tcp_seq = tcp.seq();
        rec.tcp_ack = tcp.ack();
        rec.tcp_flags = tcp.flags();
        rec.tcp_win = tcp.window();
        rec.tcp_hdr_len = tcp.header_len() as u8;
        self.has |= Has::PORTS | Has::TCP;
        let hdr_len = tcp.header_len() as u32;
        if hdr_len < TcpHeader::MIN_LEN as u32 || hdr_len > l4_wire {
            return Err(ParseError::BadTcpHeader);
        }
        rec.payload_len = l4_wire - hdr_len;
        self.has |= Has::PAYLOAD;
        self.set_payload(l4, hdr_len as usize, l4_wire as usize);
        Ok(())
    }

    #[inline(always)]
    fn udp(&mut self, l4: &[u8], l4_wire: u32, is_fragment: bool) -> Step {
        let Ok(udp) = UdpHeader::new_checked(l4) else {
            self.ports_from_prefix(l4);
            return Err(ParseError::TruncatedUdp);
        };
        let rec = &mut *self.rec;
        rec.src_port = udp.src_port();
        rec.dst_port = udp.dst_port();
        rec.udp_len = udp.len();
        self.has |= Has::PORTS | Has::UDP;
        let len = udp.len() as u32;
        if len < UdpHeader::LEN as u32 || len > l4_wire {
            return Err(ParseError::BadUdpLength);
        }
        rec.payload_len = len - UdpHeader::LEN as u32;
        self.has |= Has::PAYLOAD;
        self.set_payload(l4, UdpHeader::LEN, len as usize);
        if is_fragment {
            return Ok(());
        }
        let dport = udp.dst_port();
        if matches!(
            dport,
            tunnel::udp_port::VXLAN
                | tunnel::udp_port::GENEVE
                | tunnel::udp_port::GTPU
                | tunnel::udp_port::VXLAN_GPE
                | tunnel::udp_port::MPLS
        ) {
            let payload = &l4[UdpHeader::LEN..l4.len().min(len as usize)];
            return self.over_udp(dport, payload);
        }
        Ok(())
    }

    /// An encapsulation an IP header announces, out of the common path.
    #[cold]
    #[inline(never)]
    fn over_ip(&mut self, proto_num: u8, l4: &[u8], l4_wire: u32) -> Step {
        if proto_num == proto::PIM && l4_wire == 0 {
            // An IP header that states no payload (a null register's
            // dummy header) holds no PIM message to be cut off.
            return Ok(());
        }
        match tunnel::over_ip(proto_num, l4) {
            Some(encap) => self.enter(encap?),
            None => Ok(()),
        }
    }

    /// An encapsulation a UDP port announces, out of the common path.
    #[cold]
    #[inline(never)]
    fn over_udp(&mut self, dst_port: u16, payload: &[u8]) -> Step {
        match tunnel::over_udp(dst_port, payload) {
            Some(encap) => self.enter(encap?),
            None => Ok(()),
        }
    }

    fn sctp(&mut self, l4: &[u8], l4_wire: u32) -> Step {
        let Ok(sctp) = SctpHeader::new_checked(l4) else {
            self.ports_from_prefix(l4);
            return Err(ParseError::TruncatedSctp);
        };
        let rec = &mut *self.rec;
        rec.src_port = sctp.src_port();
        rec.dst_port = sctp.dst_port();
        rec.payload_len = l4_wire.saturating_sub(SctpHeader::LEN as u32);
        self.has |= Has::PORTS | Has::PAYLOAD;
        Ok(())
    }

    fn icmp(&mut self, l4: &[u8], l4_wire: u32) -> Step {
        let icmp = IcmpHeader::new_checked(l4).map_err(|_| ParseError::TruncatedIcmp)?;
        let rec = &mut *self.rec;
        rec.icmp_type = icmp.msg_type();
        rec.icmp_code = icmp.code();
        rec.payload_len = l4_wire.saturating_sub(IcmpHeader::HEADER_LEN as u32);
        self.has |= Has::ICMP | Has::PAYLOAD;
        Ok(())
    }

    /// The captured bytes of `l4` from `start` to `end` (the transport
    /// length), as offsets into the frame.
    #[inline(always)]
    fn set_payload(&mut self, l4: &[u8], start: usize, end: usize) {
        let end = end.min(l4.len());
        if start < end {
            let at = l4.as_ptr() as usize - self.base;
            self.payload = at + start..at + end;
        }
    }

    /// Sets `flow_hash` once the IP header (and the ports, if the protocol
    /// has them) are known. Protocols with ports get no hash when the ports
    /// were cut off: a portless hash would put the packet in the wrong flow.
    #[inline(always)]
    fn hash_flow(&mut self, is_fragment: bool) {
        let rec = &mut *self.rec;
        debug_assert_eq!(addr_words(&rec.ip_src), self.src);
        let has_ports_proto = matches!(rec.ip_proto, proto::TCP | proto::UDP | proto::SCTP);
        let (sport, dport) = if is_fragment || !has_ports_proto {
            (0, 0)
        } else if self.has & Has::PORTS != 0 {
            (rec.src_port, rec.dst_port)
        } else {
            return;
        };
        rec.flow_hash = flow_hash_words(self.src, self.dst, sport, dport, rec.ip_proto);
        self.has |= Has::FLOW;
    }
}

/// The flow hash [`decode`] gives `frame` (on the wire `wire_len` bytes
/// long), or `None` where it gives none, found without filling a record:
/// for dealing frames to workers by flow before any of them decodes
/// (`weir convert`). The same walk over the same layers, keeping only
/// what the hash needs.
pub fn flow_hash_of(link: LinkType, frame: &[u8], wire_len: u32) -> Option<u32> {
    let uncaptured = wire_len.saturating_sub(frame.len() as u32) as usize;
    let (ty, payload) = match link {
        LinkType::ETHERNET => {
            let eth = EthernetFrame::new_checked(frame).ok()?;
            (eth.ethertype(), eth.payload())
        }
        LinkType::LINUX_SLL => {
            let sll = SllHeader::new_checked(frame).ok()?;
            (sll.protocol(), sll.payload())
        }
        LinkType::LINUX_SLL2 => {
            let sll = Sll2Header::new_checked(frame).ok()?;
            (sll.protocol(), sll.payload())
        }
        LinkType::RAW | LinkType::RAW_BSD12 | LinkType::RAW_BSD14 => match frame.first()? >> 4 {
            4 => (ethertype::IPV4, frame),
            6 => (ethertype::IPV6, frame),
            _ => return None,
        },
        LinkType::IPV4 => (ethertype::IPV4, frame),
        LinkType::IPV6 => (ethertype::IPV6, frame),
        LinkType::NULL | LinkType::LOOP => {
            match loopback_family(frame, link == LinkType::LOOP).ok()? {
                LoopbackFamily::Ipv4 => (ethertype::IPV4, &frame[4..]),
                LoopbackFamily::Ipv6 => (ethertype::IPV6, &frame[4..]),
                LoopbackFamily::Other(_) => return None,
            }
        }
        _ => return None,
    };
    let (mut ty, mut payload) = (ty, payload);
    let mut tags = 0;
    while ethertype::is_vlan_tag(ty) {
        if tags == MAX_VLAN_TAGS {
            return None;
        }
        let tag = VlanTag::new_checked(payload).ok()?;
        (ty, payload, tags) = (tag.ethertype(), tag.payload(), tags + 1);
    }
    // Each round: the next IP header and, if what it carries is an
    // encapsulation, the round after; the hash is the innermost IP header's,
    // found as decode finds it.
    let mut next = Next::Ethertype(ty, payload);
    let mut depth = 0u8;
    let mut outer_hash = None;
    loop {
        let Some((v4, buf)) = ip_below(next, &mut depth) else {
            return outer_hash;
        };
        let ip = match hash_fields(v4, buf, uncaptured) {
            IpForHash::NotReached => return outer_hash,
            IpForHash::Failed => return None,
            IpForHash::Parsed(ip) => ip,
        };
        let has_ports = matches!(ip.proto, proto::TCP | proto::UDP | proto::SCTP);
        let hash = if ip.fragment || !has_ports {
            Some((0, 0))
        } else if ip.l4.len() >= 4 {
            Some((be16_at(ip.l4, 0), be16_at(ip.l4, 2)))
        } else {
            None
        }
        .map(|(sport, dport)| flow_hash_words(ip.src, ip.dst, sport, dport, ip.proto));
        if ip.fragment {
            return hash;
        }
        let encap = match ip.proto {
            proto::UDP => {
                let Ok(udp) = UdpHeader::new_checked(ip.l4) else {
                    return hash;
                };
                let len = udp.len() as usize;
                if len < UdpHeader::LEN || len > ip.l4_wire {
                    return hash;
                }
                let payload = &ip.l4[UdpHeader::LEN..ip.l4.len().min(len)];
                tunnel::over_udp(udp.dst_port(), payload)
            }
            p => tunnel::over_ip(p, ip.l4),
        };
        match encap {
            Some(Ok(e)) if e.tunnel != Tunnel::None && depth < MAX_ENCAPSULATIONS => {
                depth += 1;
                next = e.next;
                outer_hash = hash;
            }
            _ => return hash,
        }
    }
}

/// Follows `next` through what may lie between an encapsulation and an IP
/// header (Ethernet, VLAN tags, MPLS, PPPoE, NSH) as decode does: whether the IP
/// header is IPv4, and where it starts.
fn ip_below<'a>(mut next: Next<'a>, depth: &mut u8) -> Option<(bool, &'a [u8])> {
    loop {
        next = match next {
            Next::Ethernet(b) => {
                let eth = EthernetFrame::new_checked(b).ok()?;
                let (mut ty, mut payload) = (eth.ethertype(), eth.payload());
                let mut tags = 0;
                while ethertype::is_vlan_tag(ty) {
                    if tags == MAX_VLAN_TAGS {
                        return None;
                    }
                    let tag = VlanTag::new_checked(payload).ok()?;
                    (ty, payload, tags) = (tag.ethertype(), tag.payload(), tags + 1);
                }
                Next::Ethertype(ty, payload)
            }
            Next::Ethertype(ethertype::IPV4, b) => return Some((true, b)),
            Next::Ethertype(ethertype::IPV6, b) => return Some((false, b)),
            Next::Ethertype(ty, b) => {
                let e = match ty {
                    ethertype::MPLS | ethertype::MPLS_MULTICAST => tunnel::mpls(b),
                    ethertype::PPPOE_SESSION => tunnel::pppoe(b),
                    ethertype::NSH => tunnel::nsh(b),
                    _ => return None,
                }
                .ok()?;
                if e.tunnel == Tunnel::None || *depth == MAX_ENCAPSULATIONS {
                    return None;
                }
                *depth += 1;
                e.next
            }
            Next::Ip(b) => match b.first()? >> 4 {
                4 => return Some((true, b)),
                6 => return Some((false, b)),
                _ => return None,
            },
            Next::Stop => return None,
        }
    }
}

/// What [`flow_hash_of`] needs of an IP header.
struct IpFields<'a> {
    src: [u64; 2],
    dst: [u64; 2],
    proto: u8,
    /// The captured transport bytes (none for a non-first fragment).
    l4: &'a [u8],
    /// The transport length the header states.
    l4_wire: usize,
    fragment: bool,
}

enum IpForHash<'a> {
    /// Too short for the fixed header, or the wrong version: decode takes
    /// the packet around it for the flow.
    NotReached,
    /// Reached, but decode gives it no hash.
    Failed,
    Parsed(IpFields<'a>),
}

/// The IP header in `buf`, read as [`Decoder::ipv4`] / [`Decoder::ipv6`]
/// read it.
fn hash_fields(v4: bool, buf: &[u8], uncaptured: usize) -> IpForHash<'_> {
    use IpForHash::*;
    if v4 {
        let Ok(ip) = Ipv4Packet::new_checked(buf) else {
            return NotReached;
        };
        if ip.version() != 4 {
            return NotReached;
        }
        let hdr_len = ip.header_len();
        let total = match ip.total_len() as usize {
            0 => buf.len() + uncaptured,
            n => n,
        };
        if hdr_len < Ipv4Packet::MIN_HEADER_LEN || total < hdr_len {
            return Failed;
        }
        let word = |a: [u8; 4]| [0, V4_MAPPED_LOW | u32::from_be_bytes(a) as u64];
        let l4 = if ip.frag_offset() != 0 {
            &[][..]
        } else {
            let Some(l4) = ip.after_header() else {
                return Failed;
            };
            &l4[..l4.len().min(total - hdr_len)]
        };
        Parsed(IpFields {
            src: word(ip.src()),
            dst: word(ip.dst()),
            proto: ip.protocol(),
            l4,
            l4_wire: total - hdr_len,
            fragment: ip.more_fragments() || ip.frag_offset() != 0,
        })
    } else {
        let Ok(ip) = Ipv6Packet::new_checked(buf) else {
            return NotReached;
        };
        if ip.version() != 6 {
            return NotReached;
        }
        let plen = ip.payload_len() as usize;
        let payload = ip.payload();
        let payload = &payload[..payload.len().min(plen)];
        let Ok(chain) = walk_ipv6_chain(ip.next_header(), payload) else {
            return Failed;
        };
        let l4 = match chain.fragment {
            Some((_, off, _)) if off != 0 => &[][..],
            _ => &payload[chain.ext_len..],
        };
        Parsed(IpFields {
            src: addr_words(&ip.src()),
            dst: addr_words(&ip.dst()),
            proto: chain.upper_proto,
            l4,
            l4_wire: plen.saturating_sub(chain.ext_len),
            fragment: chain.fragment.is_some(),
        })
    }
}

#[inline]
fn be16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
