//! tcpdump filter expressions, compiled by libpcap into classic BPF: the
//! capture hands the program to the kernel to run on every socket, the
//! analyses run it on stored frames with libpcap's own interpreter
//! ([`Filter::matches`]), so both read an expression as tcpdump does.
//! Only libpcap's compiler and interpreter: no sockets, no devices.

use std::ffi::{CStr, CString, c_char, c_int, c_uint};

use wire::LinkType;

#[repr(C)]
struct PcapT {
    _private: [u8; 0],
}

#[repr(C)]
struct BpfProgram {
    bf_len: c_uint,
    bf_insns: *mut libc::sock_filter,
}

#[link(name = "pcap")]
unsafe extern "C" {
    fn pcap_open_dead(linktype: c_int, snaplen: c_int) -> *mut PcapT;
    fn pcap_compile(
        p: *mut PcapT,
        fp: *mut BpfProgram,
        expr: *const c_char,
        optimize: c_int,
        netmask: u32,
    ) -> c_int;
    fn pcap_geterr(p: *mut PcapT) -> *mut c_char;
    fn pcap_freecode(fp: *mut BpfProgram);
    fn pcap_close(p: *mut PcapT);
    fn pcap_lib_version() -> *const c_char;
    fn bpf_filter(
        pc: *const libc::sock_filter,
        pkt: *const u8,
        wirelen: c_uint,
        buflen: c_uint,
    ) -> c_uint;
}

/// libpcap's "any netmask": broadcast tests are not used by weir's filters.
const PCAP_NETMASK_UNKNOWN: u32 = 0xffff_ffff;

/// A filter that did not compile.
#[derive(Debug, thiserror::Error)]
#[error("bad filter expression {expr:?}: {message} (the syntax is tcpdump's, see pcap-filter(7))")]
pub struct FilterError {
    pub expr: String,
    pub message: String,
}

/// A compiled filter: classic BPF instructions.
#[derive(Clone, Debug)]
pub struct Filter {
    pub expr: String,
    pub program: Vec<libc::sock_filter>,
}

impl Filter {
    /// Whether the filter accepts a frame of `wire_len` bytes on the wire
    /// of which `data` was captured (libpcap's own interpreter, as tcpdump
    /// -r uses it).
    pub fn matches(&self, wire_len: u32, data: &[u8]) -> bool {
        if self.program.is_empty() {
            return true;
        }
        // SAFETY: the program came from pcap_compile (libpcap validated
        // it); bpf_filter reads at most buflen bytes of pkt.
        unsafe {
            bpf_filter(
                self.program.as_ptr(),
                data.as_ptr(),
                wire_len.max(data.len() as u32) as c_uint,
                data.len().min(u32::MAX as usize) as c_uint,
            ) != 0
        }
    }
}

/// The libpcap DLT_ value for a link type (Linux numbering).
fn dlt(link: LinkType) -> c_int {
    match link {
        LinkType::RAW => 12,
        other => other.0 as c_int,
    }
}

/// Compiles `expr` for frames of `link` captured up to `snaplen` bytes.
pub fn compile(expr: &str, link: LinkType, snaplen: u32) -> Result<Filter, FilterError> {
    let err = |message: String| FilterError {
        expr: expr.to_string(),
        message,
    };
    let c_expr = CString::new(expr).map_err(|_| err("it contains a NUL byte".into()))?;
    // SAFETY: libpcap calls with valid arguments; every resource is freed
    // on each path below.
    unsafe {
        let p = pcap_open_dead(dlt(link), snaplen.min(i32::MAX as u32) as c_int);
        if p.is_null() {
            return Err(err("libpcap could not make a compiler handle".into()));
        }
        let mut prog = BpfProgram {
            bf_len: 0,
            bf_insns: std::ptr::null_mut(),
        };
        let r = pcap_compile(p, &mut prog, c_expr.as_ptr(), 1, PCAP_NETMASK_UNKNOWN);
        if r != 0 {
            let msg = CStr::from_ptr(pcap_geterr(p))
                .to_string_lossy()
                .into_owned();
            pcap_close(p);
            return Err(err(msg));
        }
        let program = if prog.bf_insns.is_null() {
            Vec::new()
        } else {
            std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize).to_vec()
        };
        pcap_freecode(&mut prog);
        pcap_close(p);
        Ok(Filter {
            expr: expr.to_string(),
            program,
        })
    }
}

/// The libpcap version string, for the manifest.
pub fn libpcap_version() -> String {
    // SAFETY: libpcap returns a static string.
    unsafe {
        CStr::from_ptr(pcap_lib_version())
            .to_string_lossy()
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet, IPv4, UDP from port 5353 to 53 with a 4-byte payload.
    fn udp_frame() -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[
            0x45, 0, 0, 32, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        f.extend_from_slice(&[0x14, 0xe9, 0, 53, 0, 12, 0, 0, 1, 2, 3, 4]);
        f
    }

    #[test]
    fn compiled_filters_read_frames_as_tcpdump_does() {
        let frame = udp_frame();
        let wire_len = frame.len() as u32;
        for (expr, want) in [
            ("udp", true),
            ("tcp", false),
            ("udp dst port 53", true),
            ("udp src port 53", false),
            ("host 10.0.0.2 and not host 10.0.0.3", true),
        ] {
            let f = compile(expr, LinkType::ETHERNET, 65535).unwrap();
            assert!(!f.program.is_empty(), "{expr}");
            assert_eq!(f.expr, expr);
            assert_eq!(f.matches(wire_len, &frame), want, "{expr}");
        }
        // A frame cut short of its UDP header fails a port test (a load
        // past the captured bytes drops it), but still passes "udp".
        let cut = &frame[..30];
        let port = compile("udp dst port 53", LinkType::ETHERNET, 65535).unwrap();
        assert!(!port.matches(wire_len, cut));
        assert!(
            compile("udp", LinkType::ETHERNET, 65535)
                .unwrap()
                .matches(wire_len, cut)
        );
        // The same packet without its link layer, for a RAW filter.
        let raw = compile("udp dst port 53", LinkType::RAW, 65535).unwrap();
        assert!(raw.matches(wire_len - 14, &frame[14..]));
        assert!(!raw.matches(wire_len, &frame));
    }

    #[test]
    fn errors_name_the_expression_and_the_syntax() {
        let e = compile("udp and", LinkType::ETHERNET, 65535).unwrap_err();
        assert_eq!(e.expr, "udp and");
        assert!(!e.message.is_empty());
        let text = e.to_string();
        assert!(
            text.starts_with("bad filter expression \"udp and\": "),
            "{text}"
        );
        assert!(
            text.ends_with("(the syntax is tcpdump's, see pcap-filter(7))"),
            "{text}"
        );
        let nul = compile("udp\0", LinkType::ETHERNET, 65535).unwrap_err();
        assert_eq!(nul.message, "it contains a NUL byte");
        assert!(libpcap_version().contains("libpcap"));
    }
}
