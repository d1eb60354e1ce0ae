//! The Debian package, really installed: scripts/build-deb.sh packages the
//! binary this test run built, dpkg installs it (lintian, when installed,
//! first finds no error), systemd-analyze verifies its unit, and the
//! unit's own ExecStartPre and ExecStart lines run as the weir user with
//! exactly the unit's capabilities (setpriv) on a veth pair: the capture
//! stops cleanly on SIGTERM, `weir verify --allowed-signers` and OpenSSH's
//! `ssh-keygen -Y verify` accept its signed seal, and a changed file fails
//! both. `weir capture --help` and `man weir-capture` name the same flags.
//! The package, the weir user and its state are removed afterwards.
//!
//! Root only (it installs a package and adds a user); skipped with a
//! message otherwise, and when a weir package is already installed.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::background::Background;
use common::live::send;
use common::netns::VethPair;
use common::*;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
const INSTANCE: &str = "weirpkgtest";
const UNIT: &str = "/lib/systemd/system/weir-capture@.service";

fn sh(program: &str, args: &[&str]) -> Run {
    let mut cmd = tool(program);
    cmd.args(args);
    run_bounded(cmd, Duration::from_secs(300))
}

fn ok(program: &str, args: &[&str]) -> String {
    let r = sh(program, args);
    assert_eq!(
        r.code(),
        0,
        "{program} {args:?}: {}{}",
        r.stdout(),
        r.stderr()
    );
    r.stdout()
}

/// Everything the test adds to the machine, removed when it ends, however
/// it ends.
struct Installed {
    user_was_there: bool,
    state_was_there: bool,
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = Command::new("dpkg").args(["--purge", "weir"]).output();
        for f in [
            format!("/etc/weir/{INSTANCE}.toml"),
            format!("/etc/weir/{INSTANCE}.key"),
            format!("/etc/weir/{INSTANCE}.key.pub"),
        ] {
            let _ = std::fs::remove_file(f);
        }
        let _ = std::fs::remove_dir("/etc/weir");
        let _ = std::fs::remove_dir_all(format!("/var/lib/weir/{INSTANCE}"));
        if !self.state_was_there {
            let _ = std::fs::remove_dir_all("/var/lib/weir");
        }
        if !self.user_was_there {
            let _ = Command::new("userdel").arg("weir").output();
            let _ = Command::new("groupdel").arg("weir").output();
        }
    }
}

/// The values of `key=` lines of the unit, in order.
fn unit_values(unit: &str, key: &str) -> Vec<String> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(|v| v.replace("%i", INSTANCE))
        .collect()
}

/// setpriv's arguments for the unit's user and capabilities.
fn as_the_unit(unit: &str) -> Vec<String> {
    let user = unit_values(unit, "User").concat();
    assert_eq!(user, "weir");
    let caps: Vec<String> = unit_values(unit, "AmbientCapabilities")
        .join(" ")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    assert_eq!(caps, ["+net_raw"], "the unit gives CAP_NET_RAW only");
    assert_eq!(unit_values(unit, "CapabilityBoundingSet"), ["CAP_NET_RAW"]);
    assert_eq!(unit_values(unit, "NoNewPrivileges"), ["yes"]);
    let set = format!("-all,{}", caps.join(","));
    vec![
        format!("--reuid={user}"),
        format!("--regid={user}"),
        "--init-groups".into(),
        format!("--inh-caps={set}"),
        format!("--ambient-caps={set}"),
        format!("--bounding-set={set}"),
        "--no-new-privs".into(),
        "--".into(),
    ]
}

/// One of the unit's command lines in namespace `ns` as the unit would
/// run it.
fn unit_command(ns: &str, unit: &str, line: &str) -> Command {
    let mut cmd = VethPair::exec(ns, "setpriv");
    cmd.args(as_the_unit(unit)).args(line.split_whitespace());
    cmd
}

fn long_flags(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 3 && w.as_bytes()[2].is_ascii_alphabetic())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_package_installs_a_service_that_captures_signs_and_stops_cleanly() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the package test installs a package and adds a user; run as root");
        return;
    }
    let installed = Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", "weir"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"));
    if installed {
        eprintln!(
            "skipped: a weir package is installed on this machine; the test would replace it"
        );
        return;
    }
    let s = Scratch::new("package");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Lintian alone takes about a minute over a binary this size.
    let mut build = tool("bash");
    build
        .arg(root.join("scripts/build-deb.sh"))
        .args(["--binary", WEIR, "--fast", "--out"])
        .arg(&s.0);
    let built = run_bounded(build, Duration::from_secs(900));
    assert_eq!(built.code(), 0, "build-deb.sh: {}", built.stderr());
    eprintln!("{}", built.stderr());
    let deb = PathBuf::from(built.stdout().trim().lines().last().unwrap_or(""));
    assert!(deb.is_file(), "{}", built.stdout());

    let _guard = Installed {
        user_was_there: sh("id", &["weir"]).code() == 0,
        state_was_there: Path::new("/var/lib/weir").exists(),
    };
    ok("dpkg", &["-i", deb.to_str().unwrap()]);
    ok("id", &["weir"]);
    let meta = std::fs::metadata("/var/lib/weir").unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(meta.mode() & 0o777, 0o750);
    let files = ok("dpkg", &["-L", "weir"]);
    for f in [
        "/usr/bin/weir",
        "/usr/share/man/man1/weir.1.gz",
        "/usr/share/man/man1/weir-capture.1.gz",
        "/usr/share/man/man1/weir-verify.1.gz",
        "/usr/share/bash-completion/completions/weir",
        "/usr/share/zsh/vendor-completions/_weir",
        "/usr/share/fish/vendor_completions.d/weir.fish",
        UNIT,
        "/usr/lib/sysusers.d/weir.conf",
        "/usr/lib/tmpfiles.d/weir.conf",
        "/usr/share/doc/weir/examples/capture.toml",
    ] {
        assert!(files.lines().any(|l| l == f), "{f} is not in the package");
    }
    // No debug information left in the binary.
    let sections = ok("readelf", &["-S", "--wide", "/usr/bin/weir"]);
    assert!(!sections.contains(".debug_"), "{sections}");
    // The size target (120 MiB) is the release build's; this is the test
    // profile's, whose dependencies are not optimised, so only reported.
    let size = std::fs::metadata("/usr/bin/weir").unwrap().len();
    eprintln!("/usr/bin/weir (test profile, stripped): {size} bytes");

    // The unit, as systemd reads it.
    ok(
        "systemd-analyze",
        &["verify", &format!("weir-capture@{INSTANCE}.service")],
    );

    // --help and the installed man page name the same flags.
    let mut help = Command::new("/usr/bin/weir");
    help.args(["capture", "--help"]);
    let help = run_bounded(help, Duration::from_secs(30)).stdout();
    let mut man = tool("man");
    man.env("LC_ALL", "C")
        .env("MANWIDTH", "1000")
        .env("MANPAGER", "cat")
        .arg("weir-capture");
    let man = run_bounded(man, Duration::from_secs(30)).stdout();
    assert_eq!(long_flags(&man), long_flags(&help), "{man}");
    assert!(long_flags(&help).contains("--config"));

    // A configuration with a signing key the weir user may read.
    let key = PathBuf::from(format!("/etc/weir/{INSTANCE}.key"));
    ssh_key(&key);
    ok("chgrp", &["weir", key.to_str().unwrap()]);
    ok("chmod", &["0640", key.to_str().unwrap()]);
    std::fs::write(
        format!("/etc/weir/{INSTANCE}.toml"),
        format!(
            "interface = [\"veth0\"]\nworkers = 1\nsign-key = \"{}\"\nfilter = \"udp\"\n",
            key.display()
        ),
    )
    .unwrap();
    let allowed = s.join("allowed_signers");
    let public = std::fs::read_to_string(format!("/etc/weir/{INSTANCE}.key.pub")).unwrap();
    std::fs::write(&allowed, format!("capture-box {public}")).unwrap();
    // What StateDirectory= makes.
    let state = PathBuf::from(format!("/var/lib/weir/{INSTANCE}"));
    std::fs::create_dir_all(&state).unwrap();
    ok("chown", &["weir:weir", state.to_str().unwrap()]);
    ok("chmod", &["0750", state.to_str().unwrap()]);

    let unit = std::fs::read_to_string(UNIT).unwrap();
    let pre = unit_values(&unit, "ExecStartPre").concat();
    let start = unit_values(&unit, "ExecStart").concat();
    let net = VethPair::new("package");
    let r = run_bounded(unit_command(&net.b, &unit, &pre), Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{pre}: {}", r.stderr());
    assert!(r.stdout().contains("does not exist yet"), "{}", r.stdout());

    let cap = Background::start(
        unit_command(&net.b, &unit, &start),
        "capturing on",
        Duration::from_secs(30),
    );
    assert_no_capabilities(cap.pid());
    send(
        &net.a,
        &["--count", "300", "--rate", "20000", "--size", "100"],
    );
    cap.signal(libc::SIGTERM);
    let stop_timeout: u64 = unit_values(&unit, "TimeoutStopSec")
        .concat()
        .parse()
        .unwrap();
    let r = cap.wait(Duration::from_secs(stop_timeout));
    assert_eq!(r.code(), 0, "stopped by SIGTERM: {}", r.stderr());

    let ds = state.join("capture");
    let m = manifest(&ds);
    assert_ne!(m["capture"]["ended_by"], "running", "the manifest is final");
    assert_eq!(records(&ds).len(), 300);
    let (code, out) = verify(&ds, &["--allowed-signers", allowed.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("valid") && out.contains("capture-box"),
        "{out}"
    );
    let seal = s.join("seal");
    std::fs::write(
        &seal,
        format!("{}\n", m["integrity"]["seal"].as_str().unwrap()),
    )
    .unwrap();
    let (code, out) = ssh_verify(&allowed, "capture-box", &ds.join("seal.sig"), &seal);
    assert_eq!(code, 0, "ssh-keygen -Y verify: {out}");

    // One file changed (a copy's manifest): both refuse it.
    let changed = s.join("changed");
    ok(
        "cp",
        &["-a", ds.to_str().unwrap(), changed.to_str().unwrap()],
    );
    let mut cm = manifest(&changed);
    cm["capture"]["snaplen"] = 100.into();
    std::fs::write(
        changed.join("manifest.json"),
        serde_json::to_vec_pretty(&cm).unwrap(),
    )
    .unwrap();
    let (code, out) = verify(
        &changed,
        &["--allowed-signers", allowed.to_str().unwrap(), "--json"],
    );
    assert_eq!(code, 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    std::fs::write(&seal, format!("{}\n", v["seal"].as_str().unwrap())).unwrap();
    let (code, out) = ssh_verify(&allowed, "capture-box", &changed.join("seal.sig"), &seal);
    assert_ne!(code, 0, "ssh-keygen must refuse the changed seal: {out}");

    // The next start puts the dataset aside, still signed, for a new one.
    let r = run_bounded(unit_command(&net.b, &unit, &pre), Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{pre}: {}", r.stderr());
    assert!(!ds.exists(), "{}", r.stdout());
    let aside: Vec<PathBuf> = std::fs::read_dir(&state)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("capture-"))
        .collect();
    assert_eq!(aside.len(), 1, "{}", r.stdout());
    let (code, out) = verify(&aside[0], &["--allowed-signers", allowed.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
}

/// No thread of the running capture holds a capability.
fn assert_no_capabilities(pid: i32) {
    common::live::assert_no_thread_holds_capabilities(pid);
}
