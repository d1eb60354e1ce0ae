//! Test networks: two network namespaces joined by a veth pair, made by
//! the test and removed when it ends. Traffic in tests only ever flows here.

use std::process::Command;

/// Two namespaces, `a` and `b`, each holding one end of a veth pair named
/// `veth0`, with 10.99.0.1/24 (a) and 10.99.0.2/24 (b) and fd99::1/2.
pub struct VethPair {
    pub a: String,
    pub b: String,
}

/// The interface name inside both namespaces.
pub const IFACE: &str = "veth0";

fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("run ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl VethPair {
    /// Makes the namespaces `weir-TAG-PID-a` and `-b` and the veth pair.
    pub fn new(tag: &str) -> Self {
        assert!(
            unsafe { libc::geteuid() } == 0,
            "network tests need root (they make network namespaces); run scripts/test.sh as root"
        );
        let base = format!("weir-{tag}-{}", std::process::id());
        let pair = VethPair {
            a: format!("{base}-a"),
            b: format!("{base}-b"),
        };
        // Leftovers of an earlier, killed run of this same test would clash.
        for ns in [&pair.a, &pair.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        ip(&["netns", "add", &pair.a]);
        ip(&["netns", "add", &pair.b]);
        ip(&[
            "-n", &pair.a, "link", "add", IFACE, "type", "veth", "peer", "name", IFACE, "netns",
            &pair.b,
        ]);
        for (ns, v4, v6) in [
            (&pair.a, "10.99.0.1/24", "fd99::1/64"),
            (&pair.b, "10.99.0.2/24", "fd99::2/64"),
        ] {
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["-n", ns, "link", "set", IFACE, "up"]);
            ip(&["-n", ns, "addr", "add", v4, "dev", IFACE]);
            ip(&["-n", ns, "addr", "add", v6, "dev", IFACE, "nodad"]);
        }
        pair
    }

    /// `cmd` run inside namespace `ns`.
    pub fn exec(ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }

    /// The receive counters of `veth0` in `ns`: (packets, bytes).
    pub fn rx(ns: &str) -> (u64, u64) {
        let read = |f: &str| {
            let out = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    ns,
                    "cat",
                    &format!("/sys/class/net/{IFACE}/statistics/{f}"),
                ])
                .output()
                .expect("read counters");
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u64>()
                .unwrap_or(0)
        };
        (read("rx_packets"), read("rx_bytes"))
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it, and with it
        // the pair.
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}
