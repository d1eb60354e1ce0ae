//! Frames of any model carried through a tunnel between two endpoints, as
//! an overlay network's underlay would show them.

use std::fmt;
use std::str::FromStr;

use wire::build::{EncapSpec, IpSpec, OuterSpec, encapsulate};

use crate::FrameSource;

/// A tunnel to wrap frames in: `vxlan:VNI`, `geneve:VNI`, `gre`,
/// `gre:KEY`, `gtpu:TEID`, `ipip`, `wccp:SERVICE`, `vxlan-gpe:VNI` or
/// `pim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encap {
    Vxlan(u32),
    Geneve(u32),
    Gre(Option<u32>),
    Gtpu(u32),
    IpIp,
    Wccp(u8),
    VxlanGpe(u32),
    Pim,
}

impl Encap {
    fn spec(self) -> EncapSpec<'static> {
        match self {
            Encap::Vxlan(vni) => EncapSpec::Vxlan { vni },
            Encap::Geneve(vni) => EncapSpec::Geneve {
                vni,
                option_words: 0,
            },
            Encap::Gre(key) => EncapSpec::Gre {
                key,
                seq: None,
                checksum: false,
                ethernet: false,
            },
            Encap::Gtpu(teid) => EncapSpec::Gtpu {
                teid,
                extension: false,
            },
            Encap::IpIp => EncapSpec::IpIp,
            Encap::Wccp(service) => EncapSpec::Wccp { service },
            Encap::VxlanGpe(vni) => EncapSpec::VxlanGpe { vni, nsh: None },
            Encap::Pim => EncapSpec::PimRegister,
        }
    }
}

impl FromStr for Encap {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, id) = match s.split_once(':') {
            Some((k, v)) => (k, Some(v)),
            None => (s, None),
        };
        let num = |max: u64, what: &str| -> Result<u32, String> {
            let v = id.ok_or_else(|| format!("{s:?}: say the {what}, as {kind}:{what}"))?;
            match v.parse::<u64>() {
                Ok(n) if n <= max => Ok(n as u32),
                _ => Err(format!("{s:?}: the {what} is a number from 0 to {max}")),
            }
        };
        Ok(match kind {
            "vxlan" => Encap::Vxlan(num(0xff_ffff, "VNI")?),
            "geneve" => Encap::Geneve(num(0xff_ffff, "VNI")?),
            "gre" if id.is_none() => Encap::Gre(None),
            "gre" => Encap::Gre(Some(num(u32::MAX as u64, "KEY")?)),
            "gtpu" => Encap::Gtpu(num(u32::MAX as u64, "TEID")?),
            "ipip" if id.is_none() => Encap::IpIp,
            "wccp" => Encap::Wccp(num(u8::MAX as u64, "SERVICE")? as u8),
            "vxlan-gpe" => Encap::VxlanGpe(num(0xff_ffff, "VNI")?),
            "pim" if id.is_none() => Encap::Pim,
            _ => {
                return Err(format!(
                    "{s:?} is not a tunnel: use vxlan:VNI, geneve:VNI, gre, gre:KEY, gtpu:TEID, \
                     ipip, wccp:SERVICE, vxlan-gpe:VNI or pim"
                ));
            }
        })
    }
}

impl fmt::Display for Encap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Encap::Vxlan(v) => write!(f, "vxlan:{v}"),
            Encap::Geneve(v) => write!(f, "geneve:{v}"),
            Encap::Gre(None) => write!(f, "gre"),
            Encap::Gre(Some(k)) => write!(f, "gre:{k}"),
            Encap::Gtpu(t) => write!(f, "gtpu:{t}"),
            Encap::IpIp => write!(f, "ipip"),
            Encap::Wccp(s) => write!(f, "wccp:{s}"),
            Encap::VxlanGpe(v) => write!(f, "vxlan-gpe:{v}"),
            Encap::Pim => write!(f, "pim"),
        }
    }
}

/// The tunnel endpoints' addresses.
pub const TUNNEL_SRC: [u8; 4] = [172, 16, 0, 1];
pub const TUNNEL_DST: [u8; 4] = [172, 16, 0, 2];

/// `inner`'s frames, each wrapped in `encap` between [`TUNNEL_SRC`] and
/// [`TUNNEL_DST`] (frames grow by the tunnel's headers).
pub struct Encapsulated<S> {
    inner: S,
    spec: EncapSpec<'static>,
    outer: OuterSpec,
    buf: Vec<u8>,
}

impl<S: FrameSource> Encapsulated<S> {
    pub fn new(inner: S, encap: Encap) -> Self {
        Encapsulated {
            inner,
            spec: encap.spec(),
            outer: OuterSpec {
                eth_src: [0x02, 0x57, 0x54, 0, 0, 1],
                eth_dst: [0x02, 0x57, 0x54, 0, 0, 2],
                ip: IpSpec::V4 {
                    src: TUNNEL_SRC,
                    dst: TUNNEL_DST,
                    ttl: 64,
                    id: 0,
                    dscp: 0,
                    frag: 0x4000,
                },
            },
            buf: Vec::with_capacity(2048),
        }
    }
}

impl<S: FrameSource> FrameSource for Encapsulated<S> {
    fn next_frame(&mut self, out: &mut Vec<u8>) -> Option<i64> {
        let ts = self.inner.next_frame(&mut self.buf)?;
        out.clear();
        encapsulate(&self.buf, &self.spec, &self.outer, out);
        Some(ts)
    }

    // The wrapping is a function of the inner frame alone.
    fn period(&self) -> Option<u64> {
        self.inner.period()
    }
}
