//! The dataset's integrity record: every file's size and BLAKE3 digest in an
//! append-only hash chain, sealed together with the rest of the manifest,
//! and optionally signed with an Ed25519 key in OpenSSH's signature format.
//!
//! Each entry of the chain (a file added, or one removed by retention)
//! commits to the one before it, the first to the seals of the datasets
//! this one was made from. The seal commits to the chain's head and to
//! every other field of the manifest, so that no file, entry or figure can
//! change without the seal changing. Anyone who can write the directory
//! can also recompute an unkeyed seal; what makes it evidence is a seal
//! kept elsewhere (`weir verify --seal`) or a signature under a key the
//! writer of the dataset does not hand out (`--sign-key`): an SSHSIG
//! signature (namespace `weir-dataset`) over the seal's line (its hex and a
//! newline), kept in the manifest and in `seal.sig` beside it, which the
//! receiver checks with the public key alone, with `weir verify
//! --allowed-signers` or with OpenSSH's `ssh-keygen -Y verify`.
//!
//! Entries are added when the manifest is written ([`Integrity::extend`],
//! called by [`crate::Dataset::write_manifest`]): every finished file under
//! the dataset's root that the chain does not hold yet is added, with the
//! digest its writer took as it wrote it (packets and pcap files, which
//! digest on their writer threads) or, for the small tables, read back
//! then. A file of the chain that is gone is recorded as removed, with the
//! reason retention gave, or as vanished.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use util::digest::{FileDigest, digest_file, from_hex, to_hex};

use crate::error::StoreError;
use crate::manifest::Manifest;

mod verify;
pub use verify::{Finding, SignatureCheck, Verification, verify};

/// The value of [`Integrity::algorithm`].
pub const ALGORITHM: &str = "blake3";
/// The value of [`Signature::method`].
pub const SIGNATURE_METHOD: &str = "sshsig-ed25519";
/// The SSHSIG namespace of a seal's signature (`ssh-keygen -Y verify -n`).
pub const NAMESPACE: &str = "weir-dataset";
/// The signature's file beside the manifest, for `ssh-keygen -Y verify -s`.
pub const SIGNATURE_FILE: &str = "seal.sig";

const ENTRY_DOMAIN: &[u8] = b"weir chain entry 1\n";
const GENESIS_DOMAIN: &[u8] = b"weir chain inputs 1\n";
const SEAL_DOMAIN: &[u8] = b"weir seal 1\n";

/// The manifest's `integrity` section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integrity {
    /// The digest of files and chain: "blake3".
    pub algorithm: String,
    /// What this dataset was made from, by the inputs' seals; the chain's
    /// first entry commits to them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<ChainInput>,
    pub entries: Vec<ChainEntry>,
    /// The last entry's hash (the inputs' hash when there is none).
    pub head: String,
    /// BLAKE3 over the head and the rest of the manifest.
    pub seal: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<Signature>,
}

/// A dataset (or stream) another was made from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainInput {
    /// The command that made this dataset from it: "recover", "merge",
    /// "anonymize", "collect".
    pub by: String,
    /// The input as the command was given it.
    pub path: String,
    /// The input's seal when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<String>,
}

/// One link of the chain.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainEntry {
    /// "add" (a file finished) or "remove" (a file gone).
    pub op: String,
    /// Relative to the dataset root.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
    /// Why a file was removed: "max-disk", "max-age" (retention), or
    /// "vanished" (gone while the dataset was written, not by weir).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// BLAKE3 over the previous entry's hash and this entry.
    pub hash: String,
}

/// A signature over the seal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    /// "sshsig-ed25519" (an older weir wrote "blake3-keyed", a MAC this
    /// weir no longer checks).
    pub method: String,
    /// The public key's fingerprint as `ssh-keygen -l` prints it
    /// (`SHA256:...`).
    pub key: String,
    /// The armored SSHSIG signature of [`seal_message`], as in
    /// [`SIGNATURE_FILE`].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sshsig: String,
}

/// What is signed: the seal's hex and a newline, so that `weir verify
/// --json | jq -r .seal | ssh-keygen -Y verify ...` feeds it exactly.
pub fn seal_message(seal_hex: &str) -> Vec<u8> {
    format!("{seal_hex}\n").into_bytes()
}

/// The reason of a file that left the chain without retention removing it.
pub const VANISHED: &str = "vanished";

/// An Ed25519 private key for signing seals (`--sign-key FILE`, a key
/// file as `ssh-keygen -t ed25519 -N ''` writes it).
#[derive(Debug)]
pub struct SigningKey {
    key: sshsig::PrivateKey,
    fingerprint: String,
}

impl SigningKey {
    pub fn new(key: sshsig::PrivateKey) -> SigningKey {
        let fingerprint = key.public().fingerprint();
        SigningKey { key, fingerprint }
    }

    /// Reads the key file `path`.
    pub fn from_file(path: &Path) -> Result<SigningKey, StoreError> {
        let bytes = std::fs::read(path).map_err(|e| StoreError::io(path, e))?;
        let text = String::from_utf8_lossy(&bytes);
        sshsig::PrivateKey::from_openssh(&text)
            .map(SigningKey::new)
            .map_err(|e| StoreError::Invalid {
                path: path.to_path_buf(),
                message: format!(
                    "{e}. --sign-key takes an Ed25519 key made by `ssh-keygen -t ed25519 -N '' \
                     -f FILE`; keep it apart from the datasets it signs and hand out FILE.pub"
                ),
            })
    }

    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    pub fn public(&self) -> sshsig::PublicKey {
        self.key.public()
    }

    fn sign(&self, seal_hex: &str) -> Signature {
        Signature {
            method: SIGNATURE_METHOD.to_string(),
            key: self.fingerprint.clone(),
            sshsig: self
                .key
                .sign(NAMESPACE, &seal_message(seal_hex))
                .to_armored(),
        }
    }
}

fn hash32(hex: &str) -> Option<[u8; 32]> {
    from_hex(hex)?.try_into().ok()
}

/// The hash the first entry follows: of the inputs.
fn genesis(inputs: &[ChainInput]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(GENESIS_DOMAIN);
    for i in inputs {
        for part in [
            i.by.as_str(),
            i.path.as_str(),
            i.seal.as_deref().unwrap_or(""),
        ] {
            h.update(part.as_bytes());
            h.update(&[0]);
        }
    }
    h.finalize().into()
}

/// An entry's hash, given the one before.
fn entry_hash(prev: &[u8; 32], e: &ChainEntry) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(ENTRY_DOMAIN);
    h.update(prev);
    for part in [e.op.as_str(), e.path.as_str()] {
        h.update(part.as_bytes());
        h.update(&[0]);
    }
    h.update(&e.bytes.unwrap_or(u64::MAX).to_le_bytes());
    h.update(e.blake3.as_deref().unwrap_or("").as_bytes());
    h.update(&[0]);
    h.update(e.reason.as_deref().unwrap_or("").as_bytes());
    h.update(&[0]);
    h.finalize().into()
}

/// The manifest without its `integrity` section, in one canonical form:
/// what the seal covers. Both the writer and a reader get here from the
/// manifest's text parsed into a JSON value, so both print it the same
/// way.
fn body_digest(manifest: &serde_json::Value) -> [u8; 32] {
    let mut body = manifest.clone();
    if let Some(o) = body.as_object_mut() {
        o.remove("integrity");
    }
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    blake3::hash(&bytes).into()
}

fn seal_of(head: &[u8; 32], body: &[u8; 32]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(SEAL_DOMAIN);
    h.update(head);
    h.update(body);
    h.finalize().into()
}

/// A finished file found under the dataset's root.
#[derive(Clone, Debug)]
pub struct OnDisk {
    pub path: String,
    pub bytes: u64,
}

/// Every file under `root` but the manifest, relative to it, split into
/// finished files and hidden ones (`.NAME.part`, journals, markers: files
/// still being written or left by a crash).
pub fn list_files(root: &Path) -> Result<(Vec<OnDisk>, Vec<OnDisk>), StoreError> {
    let mut finished = Vec::new();
    let mut hidden = Vec::new();
    let mut dirs = vec![PathBuf::new()];
    while let Some(rel) = dirs.pop() {
        let dir = root.join(&rel);
        let read = std::fs::read_dir(&dir).map_err(|e| StoreError::io(&dir, e))?;
        for entry in read {
            let entry = entry.map_err(|e| StoreError::io(&dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = rel.join(&name);
            let meta = std::fs::symlink_metadata(root.join(&path))
                .map_err(|e| StoreError::io(root.join(&path), e))?;
            if meta.is_dir() {
                dirs.push(path);
                continue;
            }
            let rel_path = path.to_string_lossy().into_owned();
            if rel_path == crate::dataset::MANIFEST || rel_path == SIGNATURE_FILE {
                continue;
            }
            let f = OnDisk {
                path: rel_path,
                bytes: meta.len(),
            };
            if name.starts_with('.') {
                hidden.push(f);
            } else {
                finished.push(f);
            }
        }
    }
    finished.sort_by(|a, b| a.path.cmp(&b.path));
    hidden.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((finished, hidden))
}

impl Integrity {
    /// A new chain for a dataset made from `inputs`.
    pub fn new(inputs: Vec<ChainInput>) -> Integrity {
        let head = to_hex(&genesis(&inputs));
        Integrity {
            algorithm: ALGORITHM.to_string(),
            inputs,
            entries: Vec::new(),
            head,
            seal: String::new(),
            signature: None,
        }
    }

    /// The input a dataset made from `manifest` (at `path`, as it is to
    /// be shown) names: its seal, if any.
    pub fn input_from(by: &str, path: &str, manifest: &Manifest) -> ChainInput {
        ChainInput {
            by: by.to_string(),
            path: path.to_string(),
            seal: manifest.integrity.as_ref().map(|i| i.seal.clone()),
        }
    }

    fn push(&mut self, mut e: ChainEntry) {
        let prev = hash32(&self.head).unwrap_or_else(|| genesis(&self.inputs));
        let h = entry_hash(&prev, &e);
        e.hash = to_hex(&h);
        self.head = e.hash.clone();
        self.entries.push(e);
    }

    /// The files the chain holds now (the last add of each path not
    /// removed since), by path.
    pub fn live(&self) -> BTreeMap<&str, &ChainEntry> {
        let mut live = BTreeMap::new();
        for e in &self.entries {
            if e.op == "add" {
                live.insert(e.path.as_str(), e);
            } else {
                live.remove(e.path.as_str());
            }
        }
        live
    }

    /// The files the chain holds now with their size and BLAKE3, as an
    /// uploader takes them.
    pub fn live_sealed(&self) -> Vec<util::storage::Sealed> {
        self.live()
            .into_iter()
            .filter_map(|(path, e)| {
                Some(util::storage::Sealed {
                    path: path.to_string(),
                    bytes: e.bytes?,
                    blake3: e.blake3.clone()?,
                })
            })
            .collect()
    }

    /// Adds a file the caller vouches for (its size and BLAKE3 taken from
    /// the chain of the dataset it belongs to): a linked merge naming its
    /// inputs' files.
    pub fn add_file(&mut self, path: &str, bytes: u64, blake3: &str) {
        self.push(ChainEntry {
            op: "add".into(),
            path: path.to_string(),
            bytes: Some(bytes),
            blake3: Some(blake3.to_string()),
            ..Default::default()
        });
    }

    /// Brings the chain up to the files under `root`: files gone are
    /// removed (with the reason in `removed`, by path, or as vanished),
    /// new or changed files are added with the digest in `known` when its
    /// size matches, or read back otherwise. Files `elsewhere` (their
    /// local copy deleted once uploaded) count as present.
    pub fn extend(
        &mut self,
        root: &Path,
        known: &HashMap<String, FileDigest>,
        removed: &HashMap<String, String>,
        elsewhere: &[util::storage::Listed],
    ) -> Result<(), StoreError> {
        let (mut finished, _) = list_files(root)?;
        let here: std::collections::HashSet<String> =
            finished.iter().map(|f| f.path.clone()).collect();
        let away: Vec<OnDisk> = elsewhere
            .iter()
            .filter(|l| !here.contains(&l.path))
            .map(|l| OnDisk {
                path: l.path.clone(),
                bytes: l.bytes,
            })
            .collect();
        let away_paths: std::collections::HashSet<String> =
            away.iter().map(|f| f.path.clone()).collect();
        finished.extend(away);
        let on_disk: HashMap<&str, u64> = finished
            .iter()
            .map(|f| (f.path.as_str(), f.bytes))
            .collect();
        let live: Vec<(String, Option<u64>, Option<String>)> = self
            .live()
            .into_iter()
            .map(|(p, e)| (p.to_string(), e.bytes, e.blake3.clone()))
            .collect();
        let mut chained: HashMap<String, (Option<u64>, Option<String>)> = HashMap::new();
        for (path, bytes, digest) in live {
            if on_disk.contains_key(path.as_str()) {
                chained.insert(path, (bytes, digest));
                continue;
            }
            let reason = removed.get(&path).cloned().unwrap_or(VANISHED.to_string());
            self.push(ChainEntry {
                op: "remove".into(),
                path,
                reason: Some(reason),
                ..Default::default()
            });
        }
        for f in &finished {
            if away_paths.contains(&f.path) {
                // Held elsewhere: in the chain already, never read back.
                continue;
            }
            let known = known.get(&f.path).filter(|d| d.bytes == f.bytes);
            if let Some((bytes, digest)) = chained.get(&f.path) {
                // Already held: added again only when its writer says it
                // changed (a table rewritten in place).
                let same = match known {
                    Some(d) => digest.as_deref() == Some(d.hex().as_str()),
                    None => *bytes == Some(f.bytes),
                };
                if same {
                    continue;
                }
            }
            let digest = match known {
                Some(d) => *d,
                None => {
                    let path = root.join(&f.path);
                    digest_file(&path).map_err(|e| StoreError::io(&path, e))?
                }
            };
            self.push(ChainEntry {
                op: "add".into(),
                path: f.path.clone(),
                bytes: Some(digest.bytes),
                blake3: Some(digest.hex()),
                ..Default::default()
            });
        }
        Ok(())
    }

    /// Seals the chain with `manifest` (whose own `integrity` is ignored)
    /// and signs the seal with `key`.
    pub fn seal(&mut self, manifest: &Manifest, key: Option<&SigningKey>) {
        // Through text, as a reader gets it: serde_json's float parsing
        // is not an exact inverse of its printing, so the value printed
        // must be parsed here as the reader will parse it.
        let body = serde_json::to_vec(manifest)
            .and_then(|text| serde_json::from_slice(&text))
            .unwrap_or_default();
        let head = hash32(&self.head).unwrap_or_else(|| genesis(&self.inputs));
        let seal = seal_of(&head, &body_digest(&body));
        self.seal = to_hex(&seal);
        self.signature = key.map(|k| k.sign(&self.seal));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("weir-integrity-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("pcap")).unwrap();
        d
    }

    #[test]
    fn the_chain_adds_new_files_once_and_says_why_files_went() {
        let root = scratch("extend");
        for n in ["a", "b", "c"] {
            std::fs::write(root.join(format!("pcap/{n}.pcap")), n.repeat(100)).unwrap();
        }
        std::fs::write(root.join("pcap/.d.pcap.part"), b"unfinished").unwrap();
        let mut chain = Integrity::new(Vec::new());
        let none = HashMap::new();
        chain.extend(&root, &none, &HashMap::new(), &[]).unwrap();
        assert_eq!(chain.entries.len(), 3, "hidden files are not chained");
        let head = chain.head.clone();
        chain.extend(&root, &none, &HashMap::new(), &[]).unwrap();
        assert_eq!(chain.head, head, "nothing new, nothing added");

        std::fs::remove_file(root.join("pcap/a.pcap")).unwrap();
        std::fs::remove_file(root.join("pcap/b.pcap")).unwrap();
        std::fs::write(root.join("pcap/c.pcap"), b"rewritten").unwrap();
        let retention = HashMap::from([("pcap/a.pcap".to_string(), "max-disk".to_string())]);
        chain.extend(&root, &none, &retention, &[]).unwrap();
        let tail: Vec<_> = chain.entries[3..]
            .iter()
            .map(|e| (e.op.as_str(), e.path.as_str(), e.reason.as_deref()))
            .collect();
        assert_eq!(
            tail,
            [
                ("remove", "pcap/a.pcap", Some("max-disk")),
                ("remove", "pcap/b.pcap", Some(VANISHED)),
                ("add", "pcap/c.pcap", None),
            ]
        );
        assert_eq!(chain.live().len(), 1);
        // Each entry follows from the one before.
        let mut prev = genesis(&chain.inputs);
        for e in &chain.entries {
            prev = entry_hash(&prev, e);
            assert_eq!(to_hex(&prev), e.hash);
        }
        assert_eq!(to_hex(&prev), chain.head);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_writers_digest_is_used_when_its_size_matches() {
        let root = scratch("known");
        std::fs::write(root.join("pcap/a.pcap"), b"0123456789").unwrap();
        let claimed = FileDigest {
            bytes: 10,
            blake3: [7; 32],
        };
        let known = HashMap::from([("pcap/a.pcap".to_string(), claimed)]);
        let mut chain = Integrity::new(Vec::new());
        chain.extend(&root, &known, &HashMap::new(), &[]).unwrap();
        assert_eq!(
            chain.entries[0].blake3.as_deref(),
            Some(claimed.hex().as_str())
        );
        // A size that does not match is not trusted: the file is read.
        let wrong = HashMap::from([(
            "pcap/a.pcap".to_string(),
            FileDigest {
                bytes: 11,
                blake3: [7; 32],
            },
        )]);
        let mut chain = Integrity::new(Vec::new());
        chain.extend(&root, &wrong, &HashMap::new(), &[]).unwrap();
        let read = digest_file(&root.join("pcap/a.pcap")).unwrap();
        assert_eq!(
            chain.entries[0].blake3.as_deref(),
            Some(read.hex().as_str())
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn inputs_change_the_chain_and_keys_change_the_signature() {
        let a = Integrity::new(Vec::new());
        let b = Integrity::new(vec![ChainInput {
            by: "merge".into(),
            path: "x".into(),
            seal: Some("00".into()),
        }]);
        assert_ne!(a.head, b.head);
        let k1 = SigningKey::new(sshsig::PrivateKey::from_seed(&[1; 32], ""));
        let k2 = SigningKey::new(sshsig::PrivateKey::from_seed(&[2; 32], ""));
        assert_ne!(k1.fingerprint(), k2.fingerprint());
        assert_ne!(k1.sign("00"), k2.sign("00"));
        let s = sshsig::Signature::from_armored(&k1.sign("00").sshsig).unwrap();
        assert_eq!(s.verify(NAMESPACE, b"00\n"), Ok(()));
        assert!(s.verify(NAMESPACE, b"01\n").is_err());
    }
}
