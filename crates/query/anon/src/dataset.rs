//! A dataset anonymised for sharing (`weir anonymize`): the columns that
//! identify (as [`store::identify`] tags them) rewritten under a [`Key`],
//! pcap files left out, and whatever in the manifest could name a host, a
//! file or a command replaced.

use std::io::Write;
use std::net::{IpAddr, Ipv6Addr};
use std::path::{Path, PathBuf};

use store::identify::{Identifies, TABLES, identifies, table_schema};
use store::rewrite::{Rewrite, rewrite_tables};

use crate::Key;

/// What to anonymise, and where to.
#[derive(Clone, Debug)]
pub struct AnonymizeOptions {
    pub dataset: PathBuf,
    /// The copy: a new directory (or, with `force`, an existing dataset).
    pub output: PathBuf,
    pub key: PathBuf,
    pub force: bool,
    /// Signs the copy's seal (`--sign-key`).
    pub sign_key: Option<std::sync::Arc<store::integrity::SigningKey>>,
}

/// What an anonymisation wrote.
#[derive(Clone, Debug)]
pub struct AnonymizeReport {
    /// Dataset-relative names of the files written.
    pub files: Vec<String>,
    pub key_fingerprint: String,
}

/// Writes a new key file (64 hex digits from /dev/urandom, mode 0600);
/// never overwrites one.
pub fn new_key_file(path: &Path) -> Result<(), String> {
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
    f.write_all(Key::generate_hex(&random).as_bytes())
        .and_then(|_| f.sync_all())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a key file, saying how to make one if it cannot.
pub fn read_key(path: &Path) -> Result<Key, String> {
    let bytes = std::fs::read(path).map_err(|e| {
        format!(
            "--key {}: {e}; make a key with weir anonymize --new-key FILE",
            path.display()
        )
    })?;
    Key::from_bytes(&bytes).map_err(|e| format!("--key {}: {e}", path.display()))
}

/// A 16-byte address column value (IPv4 mapped into IPv6).
fn ip16(key: &Key, b: &[u8]) -> Vec<u8> {
    let Ok(a) = <[u8; 16]>::try_from(b) else {
        return b.to_vec();
    };
    match key.ip(IpAddr::V6(Ipv6Addr::from(a))) {
        IpAddr::V6(v6) => v6.octets().to_vec(),
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets().to_vec(),
    }
}

/// A DNS name, label by label: `www.example.org` and `mail.example.org`
/// keep a common suffix under the key, and each label reveals with it.
pub fn host_name(key: &Key, name: &str) -> String {
    name.split('.')
        .map(|label| key.name(label))
        .collect::<Vec<_>>()
        .join(".")
}

/// An HTTP request target, segment by segment (the query string is part
/// of the last segment).
pub fn url_path(key: &Key, path: &str) -> String {
    path.split('/')
        .map(|seg| key.name(seg))
        .collect::<Vec<_>>()
        .join("/")
}

/// A certificate name (`CN=www.example.org,O=Example`): each value as a
/// host name, the attribute names kept.
pub fn cert_name(key: &Key, dn: &str) -> String {
    dn.split(',')
        .map(|atv| match atv.split_once('=') {
            Some((k, v)) => format!("{k}={}", host_name(key, v)),
            None => host_name(key, atv),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn mac(key: &Key, b: &[u8]) -> Vec<u8> {
    match <[u8; 6]>::try_from(b) {
        Ok(m) => key.mac(&m).to_vec(),
        Err(_) => b.to_vec(),
    }
}

/// Every column of every table file in `root` has a policy: a file with a
/// column this weir does not know, or an untagged text or binary one, is
/// refused before anything is written.
fn check_policy(root: &Path) -> Result<(), String> {
    for table in TABLES {
        let dir = root.join(table);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".parquet") || name.starts_with('.') {
                continue;
            }
            let path = e.path();
            let schema = store::read::file_schema(&path).map_err(|e| e.to_string())?;
            for f in schema.fields() {
                identifies(table, f).map_err(|e| {
                    format!(
                        "{}: {e}; nothing was written (anonymise with the weir that made the \
                         dataset, or one that knows this column)",
                        path.display()
                    )
                })?;
            }
        }
    }
    Ok(())
}

/// Copies `opts.dataset` to `opts.output` with every identifying column
/// rewritten under the key.
pub fn anonymize_dataset(opts: &AnonymizeOptions) -> Result<AnonymizeReport, String> {
    let key = read_key(&opts.key)?;
    let source = store::Dataset::open(&opts.dataset).map_err(|e| e.to_string())?;
    let mut m = source.read_manifest().map_err(|e| e.to_string())?;
    check_policy(&opts.dataset)?;
    let dataset = store::Dataset::create(&opts.output, opts.force)
        .map_err(|e| e.to_string())?
        .signed_with(opts.sign_key.clone());
    let ip_fn = |b: &[u8]| ip16(&key, b);
    let mac_fn = |b: &[u8]| mac(&key, b);
    let fh_fn = |v: u64| key.file_handle(v);
    let name_fn = |s: &str| key.name(s);
    let host_fn = |s: &str| host_name(&key, s);
    let path_fn = |s: &str| url_path(&key, s);
    let cert_fn = |s: &str| cert_name(&key, s);
    // A row without its tunnel's kind (none in records weir writes) is
    // taken at the widest.
    let tunnel_id_fn = |kind: Option<&str>, id: u32| key.tunnel_id(kind.unwrap_or(""), id);
    let plan = |table: &str, column: &str| -> Option<Rewrite<'_>> {
        let schema = table_schema(table)?;
        let field = schema.field_with_name(column).ok()?;
        Some(match identifies(table, field).ok()? {
            Identifies::Nothing => return None,
            Identifies::Address => Rewrite::Bytes(&ip_fn),
            Identifies::Mac => Rewrite::Bytes(&mac_fn),
            Identifies::FileHandle => Rewrite::U64(&fh_fn),
            Identifies::Name => Rewrite::Text(&name_fn),
            Identifies::HostName => Rewrite::Text(&host_fn),
            Identifies::UrlPath => Rewrite::Text(&path_fn),
            Identifies::CertName => Rewrite::Text(&cert_fn),
            Identifies::TunnelId => Rewrite::U32By("tunnel", &tunnel_id_fn),
            // Records point at frames in pcap files that are not copied.
            Identifies::FramePointer => Rewrite::Null,
        })
    };
    let files = rewrite_tables(&opts.dataset, dataset.root(), &plan).map_err(|e| e.to_string())?;
    // A chain of its own, naming the original by its seal (not by its
    // path, which the copy does not reveal).
    m.integrity = Some(store::integrity::Integrity::new(vec![
        store::integrity::Integrity::input_from("anonymize", "(anonymized)", &m),
    ]));
    scrub_manifest(&mut m, &key);
    dataset.write_manifest(&m).map_err(|e| e.to_string())?;
    Ok(AnonymizeReport {
        files,
        key_fingerprint: key.fingerprint(),
    })
}

/// The manifest keeps counts and times; what could name a host, a file or
/// a command goes.
fn scrub_manifest(m: &mut store::Manifest, key: &Key) {
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
        tunnel_ids: "keyed permutation within the id's width for its kind (Feistel over \
                     AES-128), reversible with the key"
            .into(),
    });
}
