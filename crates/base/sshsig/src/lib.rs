//! Ed25519 signatures in OpenSSH's own formats, so that what weir signs
//! the receiver checks with `ssh-keygen -Y verify` and nothing of weir's:
//!
//! - [`PrivateKey`]: a key file as `ssh-keygen -t ed25519` writes it
//!   (`openssh-key-v1`, unencrypted: a service reads it unattended);
//! - [`PublicKey`]: the `ssh-ed25519 AAAA... comment` line of a `.pub`
//!   file or of an allowed-signers file;
//! - [`Signature`]: an SSHSIG signature (OpenSSH's PROTOCOL.sshsig), the
//!   armored text `ssh-keygen -Y sign` writes;
//! - [`AllowedSigners`]: the file `ssh-keygen -Y verify -f` reads.
//!
//! Only Ed25519: the one algorithm whose keys are small, fast and
//! deterministic to sign with, and the one `ssh-keygen -t ed25519` makes.
//! Pure parsing and arithmetic: the caller reads the files.

mod wire;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use ed25519_dalek::{Signer, Verifier};
use sha2::Digest;

use wire::{Reader, Writer};

/// The key type this crate knows, as OpenSSH names it.
pub const ED25519: &str = "ssh-ed25519";
const MAGIC: &[u8; 6] = b"SSHSIG";
const SIG_VERSION: u32 = 1;
const KEY_MAGIC: &[u8] = b"openssh-key-v1\0";
const ARMOR_BEGIN: &str = "-----BEGIN SSH SIGNATURE-----";
const ARMOR_END: &str = "-----END SSH SIGNATURE-----";
const KEY_BEGIN: &str = "-----BEGIN OPENSSH PRIVATE KEY-----";
const KEY_END: &str = "-----END OPENSSH PRIVATE KEY-----";
/// The hash `ssh-keygen -Y sign` uses, and this crate signs with.
const HASH: &str = "sha512";

/// What is wrong with a key, a signature or an allowed-signers file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error(
        "not an OpenSSH private key (no \"{KEY_BEGIN}\" line); make one with \
         `ssh-keygen -t ed25519 -N '' -f FILE`"
    )]
    NotPrivateKey,
    #[error(
        "the key is protected by a passphrase ({0}), which a service cannot type; make a copy \
         without one with `ssh-keygen -p -N '' -f FILE` and keep it readable only by its user"
    )]
    Encrypted(String),
    #[error("the key is of type {0}, not {ED25519}; make one with `ssh-keygen -t ed25519`")]
    KeyType(String),
    #[error("the key file holds {0} keys; it must hold exactly one")]
    KeyCount(u32),
    #[error("not an SSH signature (no \"{ARMOR_BEGIN}\" line)")]
    NotSignature,
    #[error("the signature is of version {0}; this weir reads version 1")]
    Version(u32),
    #[error("the signature uses hash {0}; OpenSSH signs with sha512 or sha256")]
    Hash(String),
    #[error("not a public key line (`{ED25519} AAAA... [comment]`): {0}")]
    PublicKeyLine(String),
    #[error("{0}")]
    Malformed(String),
}

/// Why a signature does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("was made for namespace {got:?}, not {want:?}")]
    Namespace { got: String, want: String },
    #[error("does not match the message: it was changed after signing, or signed by another key")]
    Mismatch,
}

/// An Ed25519 public key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    pub fn from_bytes(bytes: [u8; 32]) -> PublicKey {
        PublicKey(bytes)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// The key's wire form: string "ssh-ed25519", string key.
    fn blob(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.string(ED25519.as_bytes());
        w.string(&self.0);
        w.into_inner()
    }

    fn from_blob(blob: &[u8]) -> Result<PublicKey, Error> {
        let mut r = Reader::new(blob);
        let kind = r.utf8("key type")?;
        if kind != ED25519 {
            return Err(Error::KeyType(kind));
        }
        let key = r.array::<32>("Ed25519 public key")?;
        r.end("public key")?;
        Ok(PublicKey(key))
    }

    /// `ssh-keygen -l`'s fingerprint: `SHA256:` and the unpadded base64
    /// of the SHA-256 of the key's wire form.
    pub fn fingerprint(&self) -> String {
        format!(
            "SHA256:{}",
            STANDARD_NO_PAD.encode(sha2::Sha256::digest(self.blob()))
        )
    }

    /// The line of a `.pub` file: `ssh-ed25519 AAAA...`.
    pub fn to_openssh(&self) -> String {
        format!("{ED25519} {}", STANDARD.encode(self.blob()))
    }

    /// A `.pub` file's line (`ssh-ed25519 AAAA... [comment]`).
    pub fn from_openssh(line: &str) -> Result<PublicKey, Error> {
        let mut words = line.split_whitespace();
        let (Some(kind), Some(b64)) = (words.next(), words.next()) else {
            return Err(Error::PublicKeyLine(clip(line)));
        };
        if kind != ED25519 {
            return Err(Error::KeyType(kind.to_string()));
        }
        let blob = STANDARD
            .decode(b64)
            .map_err(|e| Error::PublicKeyLine(format!("{}: {e}", clip(b64))))?;
        PublicKey::from_blob(&blob)
    }
}

fn clip(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// An Ed25519 private key, from a key file `ssh-keygen -t ed25519` wrote.
pub struct PrivateKey {
    key: ed25519_dalek::SigningKey,
    comment: String,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrivateKey({})", self.public().fingerprint())
    }
}

impl PrivateKey {
    /// A key from its 32-byte seed.
    pub fn from_seed(seed: &[u8; 32], comment: &str) -> PrivateKey {
        PrivateKey {
            key: ed25519_dalek::SigningKey::from_bytes(seed),
            comment: comment.to_string(),
        }
    }

    /// A key file's text (`-----BEGIN OPENSSH PRIVATE KEY-----`).
    pub fn from_openssh(text: &str) -> Result<PrivateKey, Error> {
        let body = armored_body(text, KEY_BEGIN, KEY_END).ok_or(Error::NotPrivateKey)?;
        let raw = STANDARD
            .decode(body)
            .map_err(|e| Error::Malformed(format!("the key's base64 is damaged: {e}")))?;
        let rest = raw
            .strip_prefix(KEY_MAGIC)
            .ok_or_else(|| Error::Malformed("the key does not start with openssh-key-v1".into()))?;
        let mut r = Reader::new(rest);
        let cipher = r.utf8("cipher name")?;
        let kdf = r.utf8("kdf name")?;
        r.bytes("kdf options")?;
        if cipher != "none" || kdf != "none" {
            return Err(Error::Encrypted(format!("cipher {cipher}, kdf {kdf}")));
        }
        let n = r.u32("key count")?;
        if n != 1 {
            return Err(Error::KeyCount(n));
        }
        let public = PublicKey::from_blob(r.bytes("public key")?)?;
        let mut p = Reader::new(r.bytes("private section")?);
        if p.u32("check number")? != p.u32("check number")? {
            return Err(Error::Malformed(
                "the key's two check numbers differ: the key is damaged (or encrypted)".into(),
            ));
        }
        let kind = p.utf8("key type")?;
        if kind != ED25519 {
            return Err(Error::KeyType(kind));
        }
        let inner_public = p.array::<32>("Ed25519 public key")?;
        let pair = p.array::<64>("Ed25519 private key")?;
        let comment = p.utf8("comment")?;
        let seed: [u8; 32] = pair[..32].try_into().unwrap_or([0; 32]);
        let key = PrivateKey::from_seed(&seed, &comment);
        if inner_public != public.0 || pair[32..] != public.0 || key.public() != public {
            return Err(Error::Malformed(
                "the key's public half does not belong to its private half: the key is damaged"
                    .into(),
            ));
        }
        Ok(key)
    }

    /// The key file's text, as `ssh-keygen -t ed25519 -N ''` writes it
    /// (check numbers derived from the key, so that the same key gives the
    /// same file).
    pub fn to_openssh(&self) -> String {
        let public = self.public();
        let check = u32::from_be_bytes(
            sha2::Sha256::digest(self.key.to_bytes())[..4]
                .try_into()
                .unwrap_or([0; 4]),
        );
        let mut p = Writer::default();
        p.u32(check);
        p.u32(check);
        p.string(ED25519.as_bytes());
        p.string(public.as_bytes());
        let mut pair = self.key.to_bytes().to_vec();
        pair.extend_from_slice(public.as_bytes());
        p.string(&pair);
        p.string(self.comment.as_bytes());
        let mut private = p.into_inner();
        let mut pad = 1u8;
        while private.len() % 8 != 0 {
            private.push(pad);
            pad += 1;
        }
        let mut w = Writer::default();
        w.raw(KEY_MAGIC);
        w.string(b"none");
        w.string(b"none");
        w.string(b"");
        w.u32(1);
        w.string(&public.blob());
        w.string(&private);
        armor(&w.into_inner(), KEY_BEGIN, KEY_END)
    }

    pub fn public(&self) -> PublicKey {
        PublicKey(self.key.verifying_key().to_bytes())
    }

    pub fn comment(&self) -> &str {
        &self.comment
    }

    /// Signs `message` for `namespace` (what `ssh-keygen -Y sign -n
    /// NAMESPACE` does).
    pub fn sign(&self, namespace: &str, message: &[u8]) -> Signature {
        let signed = signed_data(namespace, HASH, message);
        let sig = self.key.sign(&signed).to_bytes();
        Signature {
            public: self.public(),
            namespace: namespace.to_string(),
            hash: HASH.to_string(),
            sig,
        }
    }
}

/// An SSHSIG signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    public: PublicKey,
    namespace: String,
    hash: String,
    sig: [u8; 64],
}

/// What is signed: the magic, the namespace, an empty reserved string,
/// the hash's name and the message's hash.
fn signed_data(namespace: &str, hash: &str, message: &[u8]) -> Vec<u8> {
    let digest: Vec<u8> = match hash {
        "sha256" => sha2::Sha256::digest(message).to_vec(),
        _ => sha2::Sha512::digest(message).to_vec(),
    };
    let mut w = Writer::default();
    w.raw(MAGIC);
    w.string(namespace.as_bytes());
    w.string(b"");
    w.string(hash.as_bytes());
    w.string(&digest);
    w.into_inner()
}

impl Signature {
    /// The key that made it (as the signature says: see
    /// [`Signature::verify`]).
    pub fn public_key(&self) -> PublicKey {
        self.public
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Checks that the signature's own key signed `message` for
    /// `namespace`. Whether that key is one to trust is the caller's
    /// question ([`AllowedSigners::find`]).
    pub fn verify(&self, namespace: &str, message: &[u8]) -> Result<(), VerifyError> {
        if self.namespace != namespace {
            return Err(VerifyError::Namespace {
                got: self.namespace.clone(),
                want: namespace.to_string(),
            });
        }
        let key = ed25519_dalek::VerifyingKey::from_bytes(&self.public.0)
            .map_err(|_| VerifyError::Mismatch)?;
        let sig = ed25519_dalek::Signature::from_bytes(&self.sig);
        key.verify(&signed_data(&self.namespace, &self.hash, message), &sig)
            .map_err(|_| VerifyError::Mismatch)
    }

    /// The armored text (`-----BEGIN SSH SIGNATURE-----`, base64 in lines
    /// of 70, as ssh-keygen writes it).
    pub fn to_armored(&self) -> String {
        let mut inner = Writer::default();
        inner.string(ED25519.as_bytes());
        inner.string(&self.sig);
        let mut w = Writer::default();
        w.raw(MAGIC);
        w.u32(SIG_VERSION);
        w.string(&self.public.blob());
        w.string(self.namespace.as_bytes());
        w.string(b"");
        w.string(self.hash.as_bytes());
        w.string(&inner.into_inner());
        armor(&w.into_inner(), ARMOR_BEGIN, ARMOR_END)
    }

    /// Reads the armored text.
    pub fn from_armored(text: &str) -> Result<Signature, Error> {
        let body = armored_body(text, ARMOR_BEGIN, ARMOR_END).ok_or(Error::NotSignature)?;
        let raw = STANDARD
            .decode(body)
            .map_err(|e| Error::Malformed(format!("the signature's base64 is damaged: {e}")))?;
        let rest = raw
            .strip_prefix(MAGIC.as_slice())
            .ok_or_else(|| Error::Malformed("the signature does not start with SSHSIG".into()))?;
        let mut r = Reader::new(rest);
        let version = r.u32("version")?;
        if version != SIG_VERSION {
            return Err(Error::Version(version));
        }
        let public = PublicKey::from_blob(r.bytes("public key")?)?;
        let namespace = r.utf8("namespace")?;
        r.bytes("reserved")?;
        let hash = r.utf8("hash algorithm")?;
        if hash != "sha512" && hash != "sha256" {
            return Err(Error::Hash(hash));
        }
        let mut s = Reader::new(r.bytes("signature")?);
        let kind = s.utf8("signature type")?;
        if kind != ED25519 {
            return Err(Error::KeyType(kind));
        }
        let sig = s.array::<64>("Ed25519 signature")?;
        s.end("signature")?;
        r.end("signature")?;
        Ok(Signature {
            public,
            namespace,
            hash,
            sig,
        })
    }
}

fn armor(bytes: &[u8], begin: &str, end: &str) -> String {
    let b64 = STANDARD.encode(bytes);
    let mut out = format!("{begin}\n");
    for chunk in b64.as_bytes().chunks(70) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(end);
    out.push('\n');
    out
}

/// The base64 between the armor lines, white space removed.
fn armored_body(text: &str, begin: &str, end: &str) -> Option<String> {
    let start = text.find(begin)? + begin.len();
    let stop = start + text[start..].find(end)?;
    Some(
        text[start..stop]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect(),
    )
}

/// One line of an allowed-signers file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedSigner {
    /// The principals (comma-separated patterns), as written.
    pub principals: String,
    /// `namespaces="..."`: the namespaces the key may sign for (any when
    /// absent).
    pub namespaces: Option<Vec<String>>,
    pub key: PublicKey,
    /// The line's number, from 1.
    pub line: usize,
}

/// An allowed-signers file (`ssh-keygen`'s ALLOWED SIGNERS format):
/// `principals [options] keytype base64-key [comment]` a line. Lines of
/// other key types, and certificate authorities, are kept out (they
/// cannot sign an Ed25519 signature of their own), and counted.
#[derive(Clone, Debug, Default)]
pub struct AllowedSigners {
    pub signers: Vec<AllowedSigner>,
    /// Lines of other key types or `cert-authority` lines: not used.
    pub skipped: usize,
}

impl AllowedSigners {
    pub fn parse(text: &str) -> Result<AllowedSigners, Error> {
        let mut out = AllowedSigners::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |m: String| Error::Malformed(format!("line {}: {m}", i + 1));
            let words = split_words(line).map_err(at)?;
            // principals, then options unless the next word is a key type.
            let mut it = words.into_iter();
            let principals = it.next().unwrap_or_default();
            let mut next = it
                .next()
                .ok_or_else(|| at("no key after the principals".into()))?;
            let mut namespaces = None;
            let mut authority = false;
            if !is_key_type(&next) {
                for opt in split_options(&next) {
                    let (name, value) = opt.split_once('=').unwrap_or((opt.as_str(), ""));
                    match name.to_ascii_lowercase().as_str() {
                        "namespaces" => {
                            namespaces = Some(
                                value
                                    .trim_matches('"')
                                    .split(',')
                                    .map(|s| s.trim().to_string())
                                    .collect(),
                            )
                        }
                        "cert-authority" => authority = true,
                        _ => {}
                    }
                }
                next = it
                    .next()
                    .ok_or_else(|| at("no key type after the options".into()))?;
            }
            let b64 = it
                .next()
                .ok_or_else(|| at(format!("no key after the key type {next}")))?;
            if next != ED25519 || authority {
                out.skipped += 1;
                continue;
            }
            let key =
                PublicKey::from_openssh(&format!("{next} {b64}")).map_err(|e| at(e.to_string()))?;
            out.signers.push(AllowedSigner {
                principals,
                namespaces,
                key,
                line: i + 1,
            });
        }
        Ok(out)
    }

    /// The first signer with `key` allowed to sign for `namespace`.
    pub fn find(&self, key: &PublicKey, namespace: &str) -> Option<&AllowedSigner> {
        self.signers.iter().find(|s| {
            s.key == *key
                && s.namespaces
                    .as_ref()
                    .is_none_or(|ns| ns.iter().any(|n| pattern_match(n, namespace)))
        })
    }
}

fn is_key_type(word: &str) -> bool {
    word.starts_with("ssh-") || word.starts_with("ecdsa-") || word.starts_with("sk-")
}

/// Splits on blanks outside double quotes (options may quote blanks).
fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if quoted {
        return Err("a quote is not closed".into());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    Ok(words)
}

/// Splits options on commas outside double quotes.
fn split_options(word: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in word.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// OpenSSH's patterns: `*` any run, `?` one character.
fn pattern_match(pattern: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pattern.chars().collect(), s.chars().collect());
    let (mut pi, mut si, mut star, mut mark) = (0, 0, None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            pi += 1;
            mark = si;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> PrivateKey {
        PrivateKey::from_seed(&[n; 32], "test@weir")
    }

    #[test]
    fn a_signature_survives_its_text_and_checks_its_message() {
        let k = key(1);
        let s = k.sign("weir-dataset", b"seal\n");
        let text = s.to_armored();
        assert!(text.starts_with(ARMOR_BEGIN));
        assert!(
            text.lines()
                .all(|l| l.len() <= 70 || l.starts_with("-----"))
        );
        let back = Signature::from_armored(&text).unwrap();
        assert_eq!(back, s);
        assert_eq!(back.verify("weir-dataset", b"seal\n"), Ok(()));
        assert_eq!(
            back.verify("weir-dataset", b"seal!\n"),
            Err(VerifyError::Mismatch)
        );
        assert!(matches!(
            back.verify("file", b"seal\n"),
            Err(VerifyError::Namespace { .. })
        ));
        // Another key's signature over the same message is another one.
        assert_ne!(key(2).sign("weir-dataset", b"seal\n"), s);
    }

    #[test]
    fn a_key_file_reads_back_as_written() {
        let k = key(3);
        let text = k.to_openssh();
        let back = PrivateKey::from_openssh(&text).unwrap();
        assert_eq!(back.public(), k.public());
        assert_eq!(back.comment(), "test@weir");
        let pubkey = PublicKey::from_openssh(&format!("{} me", k.public().to_openssh())).unwrap();
        assert_eq!(pubkey, k.public());
        assert!(k.public().fingerprint().starts_with("SHA256:"));
        assert_eq!(k.public().fingerprint().len(), 7 + 43);
    }

    #[test]
    fn bad_key_files_say_what_is_wrong() {
        assert_eq!(
            PrivateKey::from_openssh("hello").unwrap_err(),
            Error::NotPrivateKey
        );
        let good = key(4).to_openssh();
        // One base64 character changed inside the private section.
        let mut lines: Vec<String> = good.lines().map(str::to_string).collect();
        let l = &mut lines[3];
        let c = if l.as_bytes()[10] == b'A' { "B" } else { "A" };
        l.replace_range(10..11, c);
        assert!(PrivateKey::from_openssh(&lines.join("\n")).is_err());
        assert!(matches!(
            PublicKey::from_openssh("ssh-rsa AAAAB3NzaC1yc2E="),
            Err(Error::KeyType(_))
        ));
        assert!(Signature::from_armored("nope").is_err());
    }

    #[test]
    fn allowed_signers_find_keys_by_namespace() {
        let (a, b) = (key(5).public(), key(6).public());
        let text = format!(
            "# comment\n\
             alice@example.org {}\n\
             bob,carol namespaces=\"file,weir-*\" {} bob's key\n\
             dave cert-authority {}\n\
             erin ssh-rsa AAAAB3NzaC1yc2E=\n",
            a.to_openssh(),
            b.to_openssh(),
            a.to_openssh()
        );
        let s = AllowedSigners::parse(&text).unwrap();
        assert_eq!(s.signers.len(), 2);
        assert_eq!(s.skipped, 2);
        assert_eq!(
            s.find(&a, "weir-dataset").map(|s| s.principals.as_str()),
            Some("alice@example.org")
        );
        assert_eq!(s.find(&b, "weir-dataset").map(|s| s.line), Some(3));
        assert!(s.find(&b, "git").is_none());
        assert!(s.find(&key(7).public(), "weir-dataset").is_none());
        let bad = AllowedSigners::parse("alice ssh-ed25519 !!!\n").unwrap_err();
        assert!(bad.to_string().starts_with("line 1:"), "{bad}");
    }

    #[test]
    fn patterns_match_as_openssh_does() {
        assert!(pattern_match("weir-*", "weir-dataset"));
        assert!(pattern_match("*", ""));
        assert!(pattern_match("w?ir-dataset", "weir-dataset"));
        assert!(!pattern_match("weir", "weir-dataset"));
        assert!(!pattern_match("*-x", "weir-dataset"));
    }
}
