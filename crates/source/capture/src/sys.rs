//! Thin, checked wrappers over the libc calls this crate makes.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `htons` for the protocol numbers AF_PACKET takes in network order.
pub(crate) fn htons(v: u16) -> u16 {
    v.to_be()
}

/// Turns a -1 return into the OS error.
pub(crate) fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// An AF_PACKET raw socket that receives nothing until it is bound with a
/// protocol (so a ring and filter can be set up before traffic arrives).
pub(crate) fn packet_socket_unbound() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned from here on.
    let fd =
        check(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd is a fresh, valid descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` with a plain-data value.
pub(crate) fn setsockopt<T: Copy>(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to size_of::<T>() readable bytes for the call.
    check(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// `getsockopt` into a plain-data value.
pub(crate) fn getsockopt<T: Copy + Default>(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<T> {
    let mut value = T::default();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is writable for `len` bytes; the kernel writes at most that.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            &mut value as *mut T as *mut libc::c_void,
            &mut len,
        )
    })?;
    Ok(value)
}

/// Binds an AF_PACKET socket to one interface (and all protocols).
pub(crate) fn bind_to(fd: &impl AsRawFd, ifindex: u32) -> io::Result<()> {
    bind_proto(fd, ifindex, libc::ETH_P_ALL as u16)
}

/// Binds an AF_PACKET socket to one interface with protocol `proto` (host
/// order); protocol 0 makes a socket that only sends and never receives.
pub(crate) fn bind_proto(fd: &impl AsRawFd, ifindex: u32, proto: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = htons(proto);
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll of the length given.
    check(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Maps `len` bytes of a packet ring configured on `fd`, pre-faulted, and
/// locked in memory when `locked` is asked and RLIMIT_MEMLOCK allows it.
pub(crate) fn map_ring(fd: &impl AsRawFd, len: usize, locked: bool) -> io::Result<*mut u8> {
    let map = |flags: libc::c_int| {
        // SAFETY: maps the ring the kernel made for this socket; the
        // result is checked by the caller of the closure.
        unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE | flags,
                fd.as_raw_fd(),
                0,
            )
        }
    };
    let mut m = if locked {
        map(libc::MAP_LOCKED)
    } else {
        libc::MAP_FAILED
    };
    if m == libc::MAP_FAILED {
        m = map(0);
    }
    if m == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(m as *mut u8)
    }
}
