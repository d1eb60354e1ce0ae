//! `weir anonymize DATASET -o OUT --key FILE`: a copy of a dataset's
//! records to share. Addresses by Crypto-PAn, MACs and file handles by
//! keyed hashes, file names by keyed encryption (weir-anon); pcap files,
//! and anything in the manifest that could name a host, a file or a
//! command, are left out.

use std::io::Write;
use std::net::{IpAddr, Ipv6Addr};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use store::rewrite::{Rewrite, rewrite_tables};

#[derive(Args)]
pub struct AnonymizeArgs {
    /// The dataset to anonymise.
    #[arg(required_unless_present = "new_key")]
    dataset: Option<PathBuf>,
    /// The anonymised copy (a new directory).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "OUT",
        required_unless_present = "new_key"
    )]
    output: Option<PathBuf>,
    /// The secret key (32+ random bytes, or 64+ hex digits). Keep it: the
    /// same key gives the same mapping, and reveals names and addresses.
    #[arg(long, value_name = "FILE", required_unless_present = "new_key")]
    key: Option<PathBuf>,
    /// Make a new key file (64 hex digits from /dev/urandom, mode 0600)
    /// and exit.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dataset", "output", "key"])]
    new_key: Option<PathBuf>,
    /// Replace OUT if it is an existing weir dataset.
    #[arg(long)]
    force: bool,
}

fn new_key(path: &PathBuf) -> Result<ExitCode, String> {
    let mut random = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut random))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| {
            format!(
                "{}: {e}; choose a path that does not exist (a key is never overwritten)",
                path.display()
            )
        })?;
    f.write_all(anon::Key::generate_hex(&random).as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    println!("weir anonymize: new key in {}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// A 16-byte address column value (IPv4 mapped into IPv6).
fn ip16(key: &anon::Key, b: &[u8]) -> Vec<u8> {
    let Ok(a) = <[u8; 16]>::try_from(b) else {
        return b.to_vec();
    };
    match key.ip(IpAddr::V6(Ipv6Addr::from(a))) {
        IpAddr::V6(v6) => v6.octets().to_vec(),
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets().to_vec(),
    }
}

fn mac(key: &anon::Key, b: &[u8]) -> Vec<u8> {
    match <[u8; 6]>::try_from(b) {
        Ok(m) => key.mac(&m).to_vec(),
        Err(_) => b.to_vec(),
    }
}

pub fn run(a: AnonymizeArgs) -> Result<ExitCode, String> {
    if let Some(p) = &a.new_key {
        return new_key(p);
    }
    let (Some(src), Some(out), Some(key_path)) = (&a.dataset, &a.output, &a.key) else {
        return Err("give DATASET, -o OUT and --key FILE (or --new-key FILE)".into());
    };
    let bytes = std::fs::read(key_path).map_err(|e| {
        format!(
            "--key {}: {e}; make a key with weir anonymize --new-key FILE",
            key_path.display()
        )
    })?;
    let key =
        anon::Key::from_bytes(&bytes).map_err(|e| format!("--key {}: {e}", key_path.display()))?;
    let source = store::Dataset::open(src).map_err(|e| e.to_string())?;
    let mut m = source.read_manifest().map_err(|e| e.to_string())?;
    let dataset = store::Dataset::create(out, a.force).map_err(|e| e.to_string())?;
    let ip_fn = |b: &[u8]| ip16(&key, b);
    let mac_fn = |b: &[u8]| mac(&key, b);
    let fh_fn = |v: u64| key.file_handle(v);
    let name_fn = |s: &str| key.name(s);
    let plan = |table: &str, column: &str| -> Option<Rewrite<'_>> {
        Some(match (table, column) {
            (_, "ip_src" | "ip_dst" | "local_addr" | "remote_addr" | "client" | "server") => {
                Rewrite::Bytes(&ip_fn)
            }
            (_, "eth_src" | "eth_dst") => Rewrite::Bytes(&mac_fn),
            ("nfs", "fh" | "res_fh") => Rewrite::U64(&fh_fn),
            ("nfs", "name" | "name2") => Rewrite::Text(&name_fn),
            // Records point at frames in pcap files that are not copied.
            ("packets", "pcap_file" | "pcap_offset") => Rewrite::Null,
            // The host's process and device names.
            ("stack", "comm" | "dev") => Rewrite::Text(&name_fn),
            _ => return None,
        })
    };
    let written = rewrite_tables(src, dataset.root(), &plan).map_err(|e| e.to_string())?;
    // The manifest keeps counts and times; what could name a host, a file
    // or a command goes.
    for s in &mut m.sources {
        s.path = "(anonymized)".into();
        s.error = None;
    }
    for i in &mut m.interfaces {
        i.name = i.name.as_deref().map(|n| key.name(n));
        i.description = None;
    }
    m.files.pcap.clear();
    m.files.pcap_removed.clear();
    if let Some(r) = &mut m.run {
        r.command = "(anonymized)".into();
    }
    if let Some(c) = &mut m.capture {
        c.filter = c.filter.as_ref().map(|_| "(anonymized)".into());
    }
    if let Some(st) = &mut m.stack {
        st.comm = st.comm.as_deref().map(|c| key.name(c));
        st.cgroup = st.cgroup.as_ref().map(|_| "(anonymized)".into());
    }
    if let Some(k) = &mut m.kafka {
        k.brokers = "(anonymized)".into();
    }
    if let Some(mg) = &mut m.merge {
        for i in &mut mg.inputs {
            i.path = "(anonymized)".into();
        }
    }
    m.kind = format!("{} (anonymized)", m.kind);
    m.anonymized = Some(store::manifest::AnonymizedInfo {
        key_fingerprint: key.fingerprint(),
        addresses: "Crypto-PAn (AES-128), prefix-preserving, reversible with the key".into(),
        macs: "HMAC-SHA256, 48 bits; broadcast and group bit kept".into(),
        file_handles: "HMAC-SHA256, 64 bits".into(),
        names: "AES-SIV, deterministic, reversible with the key".into(),
    });
    dataset.write_manifest(&m).map_err(|e| e.to_string())?;
    println!(
        "weir anonymize: {} files into {} (key fingerprint {}); pcap files not copied",
        written.len(),
        out.display(),
        key.fingerprint()
    );
    Ok(ExitCode::SUCCESS)
}
