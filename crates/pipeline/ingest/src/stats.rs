//! Per-worker counts that end up in the manifest.

use std::collections::BTreeMap;

use store::manifest::Counts;
use wire::ip::proto;
use wire::link::ethertype;
use wire::{Has, PacketRecord, ParseError};

/// Coarse protocol classes for the manifest's protocol mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ProtocolClass {
    Ipv4Tcp,
    Ipv4Udp,
    Ipv4Icmp,
    Ipv4Sctp,
    Ipv4Other,
    Ipv6Tcp,
    Ipv6Udp,
    Ipv6Icmp,
    Ipv6Sctp,
    Ipv6Other,
    Arp,
    OtherEthertype,
    NotParsed,
}

impl ProtocolClass {
    const COUNT: usize = 13;

    pub fn of(r: &PacketRecord) -> ProtocolClass {
        use ProtocolClass::*;
        if r.has & Has::IP != 0 {
            let v6 = r.ip_version == 6;
            return match (r.ip_proto, v6) {
                (proto::TCP, false) => Ipv4Tcp,
                (proto::UDP, false) => Ipv4Udp,
                (proto::ICMP, false) => Ipv4Icmp,
                (proto::SCTP, false) => Ipv4Sctp,
                (_, false) => Ipv4Other,
                (proto::TCP, true) => Ipv6Tcp,
                (proto::UDP, true) => Ipv6Udp,
                (proto::ICMPV6, true) => Ipv6Icmp,
                (proto::SCTP, true) => Ipv6Sctp,
                (_, true) => Ipv6Other,
            };
        }
        if r.has & Has::ETHERTYPE != 0 {
            return if r.ethertype == ethertype::ARP {
                Arp
            } else {
                OtherEthertype
            };
        }
        NotParsed
    }

    pub fn name(self) -> &'static str {
        use ProtocolClass::*;
        match self {
            Ipv4Tcp => "ipv4/tcp",
            Ipv4Udp => "ipv4/udp",
            Ipv4Icmp => "ipv4/icmp",
            Ipv4Sctp => "ipv4/sctp",
            Ipv4Other => "ipv4/other",
            Ipv6Tcp => "ipv6/tcp",
            Ipv6Udp => "ipv6/udp",
            Ipv6Icmp => "ipv6/icmp",
            Ipv6Sctp => "ipv6/sctp",
            Ipv6Other => "ipv6/other",
            Arp => "arp",
            OtherEthertype => "other-ethertype",
            NotParsed => "not-parsed",
        }
    }

    fn all() -> [ProtocolClass; Self::COUNT] {
        use ProtocolClass::*;
        [
            Ipv4Tcp,
            Ipv4Udp,
            Ipv4Icmp,
            Ipv4Sctp,
            Ipv4Other,
            Ipv6Tcp,
            Ipv6Udp,
            Ipv6Icmp,
            Ipv6Sctp,
            Ipv6Other,
            Arp,
            OtherEthertype,
            NotParsed,
        ]
    }
}

/// Counts kept by one worker with plain adds; merged at the end.
#[derive(Clone, Debug)]
pub struct FrameStats {
    pub frames: u64,
    pub wire_bytes: u64,
    pub captured_bytes: u64,
    pub ts_min: i64,
    pub ts_max: i64,
    parse_errors: [u64; ParseError::ALL.len()],
    protocols: [u64; ProtocolClass::COUNT],
}

impl Default for FrameStats {
    fn default() -> Self {
        FrameStats {
            frames: 0,
            wire_bytes: 0,
            captured_bytes: 0,
            ts_min: i64::MAX,
            ts_max: i64::MIN,
            parse_errors: [0; ParseError::ALL.len()],
            protocols: [0; ProtocolClass::COUNT],
        }
    }
}

impl FrameStats {
    #[inline]
    pub fn add(&mut self, r: &PacketRecord) {
        self.frames += 1;
        self.wire_bytes += r.wire_len as u64;
        self.captured_bytes += r.cap_len as u64;
        self.ts_min = self.ts_min.min(r.ts_ns);
        self.ts_max = self.ts_max.max(r.ts_ns);
        self.parse_errors[r.parse_error as usize] += 1;
        self.protocols[ProtocolClass::of(r) as usize] += 1;
    }

    pub fn merge(&mut self, o: &FrameStats) {
        self.frames += o.frames;
        self.wire_bytes += o.wire_bytes;
        self.captured_bytes += o.captured_bytes;
        self.ts_min = self.ts_min.min(o.ts_min);
        self.ts_max = self.ts_max.max(o.ts_max);
        for (a, b) in self.parse_errors.iter_mut().zip(o.parse_errors) {
            *a += b;
        }
        for (a, b) in self.protocols.iter_mut().zip(o.protocols) {
            *a += b;
        }
    }

    /// Frames whose parsing stopped early with this code.
    pub fn parse_errors(&self, e: ParseError) -> u64 {
        self.parse_errors[e as usize]
    }

    pub fn counts(&self) -> Counts {
        let mut parse_errors = BTreeMap::new();
        for e in ParseError::ALL.iter().skip(1) {
            let n = self.parse_errors[*e as usize];
            if n > 0 {
                parse_errors.insert(e.as_str().to_string(), n);
            }
        }
        let mut protocols = BTreeMap::new();
        for p in ProtocolClass::all() {
            let n = self.protocols[p as usize];
            if n > 0 {
                protocols.insert(p.name().to_string(), n);
            }
        }
        Counts {
            frames: self.frames,
            wire_bytes: self.wire_bytes,
            captured_bytes: self.captured_bytes,
            parse_errors,
            protocols,
        }
    }
}
