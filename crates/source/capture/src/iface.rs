//! Network interfaces by name: index, link type, MTU, state.

use std::ffi::CString;
use std::io;
use std::path::Path;

use wire::LinkType;

/// An interface of this network namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub index: u32,
    /// ARPHRD_* type from sysfs.
    pub arphrd: u16,
    pub mtu: u32,
    pub up: bool,
}

/// Why an interface cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum InterfaceError {
    #[error(
        "no interface named {name:?} here (see `ip link`); interfaces in other network namespaces need `ip netns exec NS weir ...`"
    )]
    Missing { name: String },
    #[error("{name:?} is not a valid interface name")]
    BadName { name: String },
    #[error("{name}: {source}")]
    Io {
        name: String,
        #[source]
        source: io::Error,
    },
}

impl Interface {
    /// Looks an interface up by name.
    pub fn by_name(name: &str) -> Result<Interface, InterfaceError> {
        let c = CString::new(name).map_err(|_| InterfaceError::BadName { name: name.into() })?;
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') {
            return Err(InterfaceError::BadName { name: name.into() });
        }
        // SAFETY: c is a valid NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if index == 0 {
            return Err(InterfaceError::Missing { name: name.into() });
        }
        let sys = Path::new("/sys/class/net").join(name);
        let read = |f: &str| std::fs::read_to_string(sys.join(f)).map(|s| s.trim().to_string());
        let io = |source| InterfaceError::Io {
            name: name.into(),
            source,
        };
        let arphrd = read("type").map_err(io)?.parse().unwrap_or(1);
        let mtu = read("mtu").map_err(io)?.parse().unwrap_or(1500);
        let flags = read("flags").map_err(io)?;
        let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).unwrap_or(0);
        Ok(Interface {
            name: name.into(),
            index,
            arphrd,
            mtu,
            up: flags & libc::IFF_UP as u32 != 0,
        })
    }

    /// The pcap link type frames of this interface have on an AF_PACKET
    /// socket of type SOCK_RAW, if weir captures on this kind of interface.
    pub fn link_type(&self) -> Option<LinkType> {
        match self.arphrd {
            // Ethernet, and loopback (which Linux gives Ethernet headers).
            1 | 772 => Some(LinkType::ETHERNET),
            // Tunnels without a link header (tun, ipip, sit, WireGuard...).
            65534 | 768 | 776 | 778 => Some(LinkType::RAW),
            _ => None,
        }
    }
}
