//! `weir verify`: a dataset checked against its integrity record, step by
//! step: the chain, the seal, the signature, the files.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use util::digest::{FileDigest, to_hex};
use util::storage::{Root, Storage};

use super::{
    ChainEntry, Integrity, NAMESPACE, OnDisk, SIGNATURE_FILE, SIGNATURE_METHOD, Signature,
    VANISHED, body_digest, entry_hash, genesis, hash32, list_files, seal_message, seal_of,
};
use crate::dataset::MANIFEST;
use crate::error::StoreError;
use crate::manifest::{DATASET_FORMAT, Manifest};

/// What is wrong with a dataset, one finding per file or record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// missing, truncated, altered, reordered, moved, added, vanished,
    /// unfinished, chain, seal, signature.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub detail: String,
}

/// The signature's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignatureCheck {
    /// The dataset is not signed.
    Unsigned,
    /// Signed, but no key was given to check it with.
    NotChecked { key: String },
    /// Signed, and the key given confirms the seal: `signer` is the
    /// principals of the allowed-signers line that holds the key.
    Valid { key: String, signer: String },
    /// Signed, and the key given does not confirm it.
    Invalid { key: String },
}

/// What `weir verify` found.
#[derive(Clone, Debug, Serialize)]
pub struct Verification {
    /// Files the chain holds, and their bytes, all read and digested.
    pub files: u64,
    pub bytes: u64,
    /// The seal recomputed from the chain and the manifest.
    pub seal: String,
    pub signature: SignatureCheck,
    /// The manifest says the dataset is still being written.
    pub running: bool,
    pub findings: Vec<Finding>,
}

impl Verification {
    pub fn ok(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Checks the dataset at `root` (a directory, or a prefix of an object
/// store) against its integrity record: the chain, the seal over the
/// manifest, the signature (by one of `signers`), every file's size and
/// digest (reading `threads` files at a time), and files that are not in
/// the chain. `expected_seal` is a seal kept elsewhere. Files a linked
/// merge names outside its root (`../input/...`) are read there.
pub fn verify(
    root: &Root,
    signers: Option<&sshsig::AllowedSigners>,
    expected_seal: Option<&str>,
    threads: usize,
) -> Result<Verification, StoreError> {
    let (value, manifest) = read_manifest(root)?;
    let Some(chain) = &manifest.integrity else {
        return Err(StoreError::Invalid {
            path: root.name_of(MANIFEST).into(),
            message: "has no integrity record (written by a weir from before digests were \
                      kept); nothing can be verified"
                .into(),
        });
    };
    let mut findings = Vec::new();
    let head = check_chain(chain, &mut findings);
    let seal = check_seal(chain, &head, &value, expected_seal, &mut findings);
    let (signature, wrong) = check_signature(&**root, chain.signature.as_ref(), signers, &seal);
    findings.extend(wrong);
    let running = manifest
        .capture
        .as_ref()
        .is_some_and(|c| c.ended_by == "running");
    let (files, bytes) = check_files(root, chain, threads, running, &mut findings)?;
    Ok(Verification {
        files,
        bytes,
        seal,
        signature,
        running,
        findings,
    })
}

/// The manifest at `root`, read and parsed once: as JSON (the seal covers
/// it as it is) and as a [`Manifest`] taken from that JSON.
fn read_manifest(root: &Root) -> Result<(serde_json::Value, Manifest), StoreError> {
    let name = root.name_of(MANIFEST);
    let raw = root.read(MANIFEST).map_err(|e| StoreError::io(&name, e))?;
    let value: serde_json::Value =
        serde_json::from_slice(&raw).map_err(|e| StoreError::Invalid {
            path: name.clone().into(),
            message: format!("unreadable manifest: {e}"),
        })?;
    let manifest = match Manifest::deserialize(&value) {
        Ok(m) if m.format == DATASET_FORMAT => m,
        // JSON that is not a manifest of this format: parsed again from its
        // text, for the error's line and column.
        _ => Manifest::from_json(&name, &raw)?,
    };
    Ok((value, manifest))
}

/// A finding of `kind` about `path` (or the dataset).
fn finding(kind: &'static str, path: Option<&str>, detail: String) -> Finding {
    Finding {
        kind,
        path: path.map(str::to_string),
        detail,
    }
}

/// The chain, link by link: each entry must follow from the one before,
/// and none may be a file that vanished; the head must be the last. The
/// head it recomputed.
fn check_chain(chain: &Integrity, findings: &mut Vec<Finding>) -> [u8; 32] {
    let mut prev = genesis(&chain.inputs);
    for (i, e) in chain.entries.iter().enumerate() {
        let h = entry_hash(&prev, e);
        if hash32(&e.hash) != Some(h) {
            findings.push(finding(
                "chain",
                Some(&e.path),
                format!(
                    "entry {} of the chain does not follow from the one before: the manifest's \
                     file records were edited",
                    i + 1
                ),
            ));
        }
        prev = h;
        if e.op == "remove" && e.reason.as_deref() == Some(VANISHED) {
            findings.push(finding(
                "vanished",
                Some(&e.path),
                "was deleted while the dataset was being written, and not by retention".into(),
            ));
        }
    }
    if hash32(&chain.head) != Some(prev) {
        findings.push(finding(
            "chain",
            None,
            "the chain's head is not its last entry's hash".into(),
        ));
    }
    prev
}

/// The seal recomputed over `head` and the manifest (`value`), against the
/// manifest's and the one given with `--seal`; its hex.
fn check_seal(
    chain: &Integrity,
    head: &[u8; 32],
    value: &serde_json::Value,
    expected_seal: Option<&str>,
    findings: &mut Vec<Finding>,
) -> String {
    let seal_hex = to_hex(&seal_of(head, &body_digest(value)));
    if chain.seal != seal_hex {
        findings.push(finding(
            "seal",
            Some(MANIFEST),
            "the manifest was changed after it was sealed".into(),
        ));
    }
    if let Some(want) = expected_seal
        && !want.eq_ignore_ascii_case(&seal_hex)
    {
        findings.push(finding(
            "seal",
            Some(MANIFEST),
            format!("the seal is {seal_hex}, not the {want} given with --seal"),
        ));
    }
    seal_hex
}

/// A file's digest as read, or why it could not be (the error's kind: a
/// file not found is missing).
type Read = Result<FileDigest, (std::io::ErrorKind, String)>;

/// Files (by path) by their size and digest.
type ByContent<'a> = HashMap<(u64, String), &'a str>;

/// The files: those under the root and those a linked merge names outside
/// it, each read and digested (`threads` at a time) and checked against the
/// chain; then those the chain does not hold, and those a write left
/// unfinished (`running`: the capture is still writing them). The files
/// and bytes read.
fn check_files(
    root: &Root,
    chain: &Integrity,
    threads: usize,
    running: bool,
    findings: &mut Vec<Finding>,
) -> Result<(u64, u64), StoreError> {
    let live = chain.live();
    let (mut finished, hidden) = list_files_in(&**root)?;
    let outside: Vec<OnDisk> = live
        .iter()
        .filter(|(p, _)| p.starts_with("../"))
        .map(|(p, e)| OnDisk {
            path: p.to_string(),
            bytes: e.bytes.unwrap_or(0),
        })
        .collect();
    finished.extend(outside);
    let digests = digest_all(&**root, &finished, threads);
    let by_content: ByContent = live
        .iter()
        .filter_map(|(p, e)| Some(((e.bytes?, e.blake3.clone()?), *p)))
        .collect();
    let read = FilesRead {
        live,
        finished,
        digests,
        by_content,
    };
    let counted = read.check_chained(findings);
    read.check_added(findings);
    for h in hidden {
        let detail = if running {
            "is still being written (the capture is running)"
        } else {
            "was left by a write that did not finish; `weir recover` puts it in order"
        };
        findings.push(finding("unfinished", Some(&h.path), detail.into()));
    }
    Ok(counted)
}

/// The files as read (those under the root and those a linked merge
/// names outside it, with their digests), and the chain's live files by
/// path and by content.
struct FilesRead<'a> {
    live: BTreeMap<&'a str, &'a ChainEntry>,
    finished: Vec<OnDisk>,
    digests: Vec<Read>,
    by_content: ByContent<'a>,
}

impl FilesRead<'_> {
    /// Each file the chain holds, against what was read (`finished`, with
    /// their `digests`): missing, unreadable, reordered, truncated or
    /// altered. The files and bytes read.
    fn check_chained(&self, findings: &mut Vec<Finding>) -> (u64, u64) {
        let (finished, digests) = (&self.finished, &self.digests);
        // A file outside the root that cannot be found is missing, not there.
        let gone = |d: &Read| matches!(d, Err((std::io::ErrorKind::NotFound, _)));
        let on_disk: HashMap<&str, usize> = finished
            .iter()
            .enumerate()
            .filter(|(i, _)| !gone(&digests[*i]))
            .map(|(i, f)| (f.path.as_str(), i))
            .collect();
        let found_at: ByContent = finished
            .iter()
            .zip(digests)
            .filter_map(|(f, d)| {
                Some((
                    (d.as_ref().ok()?.bytes, d.as_ref().ok()?.hex()),
                    f.path.as_str(),
                ))
            })
            .collect();
        let (mut files, mut bytes) = (0u64, 0u64);
        for (p, e) in &self.live {
            let (want_bytes, want_digest) =
                (e.bytes.unwrap_or(0), e.blake3.clone().unwrap_or_default());
            let Some(&i) = on_disk.get(p) else {
                let detail = match found_at.get(&(want_bytes, want_digest.clone())) {
                    Some(now) => format!("is gone; its content is now at {now}"),
                    None => format!("is gone ({want_bytes} bytes when the chain took it)"),
                };
                findings.push(finding("missing", Some(p), detail));
                continue;
            };
            files += 1;
            let got = match &digests[i] {
                Ok(d) => d,
                Err((_, e)) => {
                    findings.push(finding("unreadable", Some(p), e.clone()));
                    continue;
                }
            };
            bytes += got.bytes;
            if got.bytes == want_bytes && got.hex() == want_digest {
                continue;
            }
            if let Some(other) = self.by_content.get(&(got.bytes, got.hex()))
                && other != p
            {
                findings.push(finding(
                    "reordered",
                    Some(p),
                    format!("holds what the chain gives for {other}"),
                ));
            } else if got.bytes < want_bytes {
                findings.push(finding(
                    "truncated",
                    Some(p),
                    format!("is {} bytes; the chain took {want_bytes}", got.bytes),
                ));
            } else {
                findings.push(finding(
                    "altered",
                    Some(p),
                    format!(
                        "does not match its digest ({} bytes; the chain took {want_bytes})",
                        got.bytes
                    ),
                ));
            }
        }
        (files, bytes)
    }

    /// Files read that the chain does not hold, and whose content they hold
    /// if it is one the chain gives.
    fn check_added(&self, findings: &mut Vec<Finding>) {
        for (f, d) in self.finished.iter().zip(&self.digests) {
            if self.live.contains_key(f.path.as_str()) {
                continue;
            }
            let from = d
                .as_ref()
                .ok()
                .and_then(|d| self.by_content.get(&(d.bytes, d.hex())));
            let detail = match from {
                Some(orig) => {
                    format!("is not in the chain; it holds what the chain gives for {orig}")
                }
                None => "is not in the chain: it was added after the dataset was sealed".into(),
            };
            findings.push(finding("added", Some(&f.path), detail));
        }
    }
}

/// [`list_files`] of a dataset wherever it is: the files under its root
/// but the manifest and its signature, finished and hidden. A dataset in
/// an object store holds datasets below it only as a site's prefix does,
/// and those are not its files: a listing stops at a directory holding a
/// manifest of its own.
fn list_files_in(root: &dyn Storage) -> Result<(Vec<OnDisk>, Vec<OnDisk>), StoreError> {
    if let Some(dir) = root.local_dir() {
        return list_files(dir);
    }
    let listed = root.list("").map_err(|e| StoreError::io(root.name(), e))?;
    let nested: Vec<String> = listed
        .iter()
        .filter_map(|l| l.path.strip_suffix(&format!("/{MANIFEST}")))
        .map(|d| format!("{d}/"))
        .collect();
    let (mut finished, mut hidden) = (Vec::new(), Vec::new());
    for l in listed {
        if l.path == MANIFEST
            || l.path == SIGNATURE_FILE
            || nested.iter().any(|d| l.path.starts_with(d))
        {
            continue;
        }
        let name = l.path.rsplit('/').next().unwrap_or("");
        let f = OnDisk {
            path: l.path.clone(),
            bytes: l.bytes,
        };
        if name.starts_with('.') {
            hidden.push(f);
        } else {
            finished.push(f);
        }
    }
    Ok((finished, hidden))
}

/// The signature's state, and what is wrong with it.
fn check_signature(
    root: &dyn Storage,
    signature: Option<&Signature>,
    signers: Option<&sshsig::AllowedSigners>,
    seal_hex: &str,
) -> (SignatureCheck, Vec<Finding>) {
    let finding = |path: Option<&str>, detail: String| Finding {
        kind: "signature",
        path: path.map(str::to_string),
        detail,
    };
    let (s, signers) = match (signature, signers) {
        (None, None) => return (SignatureCheck::Unsigned, Vec::new()),
        (None, Some(_)) => {
            let detail = "is not signed, but signers were given to check it with".into();
            return (SignatureCheck::Unsigned, vec![finding(None, detail)]);
        }
        (Some(s), None) => {
            let check = SignatureCheck::NotChecked { key: s.key.clone() };
            return (check, Vec::new());
        }
        (Some(s), Some(signers)) => (s, signers),
    };
    let invalid = SignatureCheck::Invalid { key: s.key.clone() };
    if s.method != SIGNATURE_METHOD {
        let detail = format!(
            "was made with {:?}, which this weir does not check; `weir recover --sign-key \
             FILE` signs it again with an Ed25519 key",
            s.method
        );
        return (invalid, vec![finding(None, detail)]);
    }
    let sig = match sshsig::Signature::from_armored(&s.sshsig) {
        Ok(sig) => sig,
        Err(e) => {
            let detail = format!("cannot be read: {e}");
            return (invalid, vec![finding(Some(MANIFEST), detail)]);
        }
    };
    let mut findings = Vec::new();
    let text = root
        .read(SIGNATURE_FILE)
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    match text {
        Ok(text) if text == s.sshsig => {}
        Ok(_) => findings.push(finding(
            Some(SIGNATURE_FILE),
            "is not the signature in the manifest; `weir recover` writes it again".into(),
        )),
        Err(e) => findings.push(finding(
            Some(SIGNATURE_FILE),
            format!("cannot be read ({e}); `weir recover` writes it again"),
        )),
    }
    let key = sig.public_key();
    let signer = signers.find(&key, NAMESPACE);
    if signer.is_none() {
        findings.push(finding(
            None,
            format!(
                "was made by key {}, which is not among the allowed signers for namespace \
                 {NAMESPACE}",
                key.fingerprint()
            ),
        ));
    }
    if let Err(e) = sig.verify(NAMESPACE, &seal_message(seal_hex)) {
        findings.push(finding(
            None,
            format!("{e} (the seal recomputed from the manifest and its chain)"),
        ));
    }
    match signer {
        Some(signer) if findings.is_empty() => (
            SignatureCheck::Valid {
                key: key.fingerprint(),
                signer: signer.principals.clone(),
            },
            findings,
        ),
        _ => (invalid, findings),
    }
}

/// Digests of `files`, `threads` at a time; an error keeps its kind (a
/// file not found is missing).
fn digest_all(root: &dyn Storage, files: &[OnDisk], threads: usize) -> Vec<Read> {
    type Slot = std::sync::Mutex<Option<Read>>;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: Vec<Slot> = files.iter().map(|_| Default::default()).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, files.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(f) = files.get(i) else { break };
                    let d = util::storage::digest(root, &f.path, 8 << 20)
                        .map_err(|e| (e.kind(), format!("cannot be read: {e}")));
                    *out[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(d);
                }
            });
        }
    });
    out.into_iter()
        .map(|m| {
            m.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| Err((std::io::ErrorKind::Other, "was not read".into())))
        })
        .collect()
}
