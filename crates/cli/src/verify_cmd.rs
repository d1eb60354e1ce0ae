//! `weir verify`: a dataset checked against its integrity record; and the
//! `--sign-key` flag of every command that writes a dataset.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use store::integrity::{SignatureCheck, SigningKey, Verification};

#[derive(Args)]
pub struct VerifyArgs {
    /// The dataset: a directory, or s3://BUCKET/PREFIX (its objects are
    /// read from the store).
    dataset: String,
    /// Check the signature over the seal against the keys of an OpenSSH
    /// allowed-signers file (as `ssh-keygen -Y verify -f` reads it; lines
    /// with `namespaces=` must allow weir-dataset).
    #[arg(long, value_name = "FILE", conflicts_with = "public_key")]
    allowed_signers: Option<PathBuf>,
    /// Check the signature over the seal against this one public key (the
    /// `.pub` file `ssh-keygen -t ed25519` wrote beside the signing key).
    #[arg(long, value_name = "FILE")]
    public_key: Option<PathBuf>,
    /// The seal as it was noted when the dataset was made (printed by
    /// `weir verify`, in `weir info --json`): checks that nothing, the
    /// integrity record included, was rewritten since.
    #[arg(long, value_name = "HEX")]
    seal: Option<String>,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
}

/// `--sign-key FILE`, for every command that writes a dataset.
#[derive(Args, Clone, Default)]
pub struct SignKeyArg {
    /// Sign the dataset's seal with the Ed25519 key in FILE (made by
    /// `ssh-keygen -t ed25519 -N '' -f FILE`), in OpenSSH's signature
    /// format (namespace weir-dataset, also written to seal.sig); `weir
    /// verify --public-key FILE.pub` or `ssh-keygen -Y verify` checks it.
    #[arg(long, value_name = "FILE")]
    pub sign_key: Option<PathBuf>,
}

impl SignKeyArg {
    pub fn load(&self) -> Result<Option<Arc<SigningKey>>, String> {
        self.sign_key
            .as_deref()
            .map(|p| {
                SigningKey::from_file(p)
                    .map(Arc::new)
                    .map_err(|e| format!("--sign-key: {e}"))
            })
            .transpose()
    }
}

/// Exit status 0 when every check passes, 1 when something is wrong with
/// the dataset, 2 when it cannot be checked at all.
pub fn run(a: VerifyArgs) -> Result<ExitCode, String> {
    let signers = match signers(&a) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("weir verify: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let root = match objects::open(&a.dataset) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("weir verify: {}: {e}", a.dataset);
            return Ok(ExitCode::from(2));
        }
    };
    // Objects are read over the network: more at a time than files.
    let threads = if root.local_dir().is_some() {
        threads
    } else {
        threads.max(8)
    };
    let v = match store::integrity::verify(&root, signers.as_ref(), a.seal.as_deref(), threads) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("weir verify: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    if a.json {
        let s = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
        println!("{s}");
    } else {
        print!("{}", render(&root.name(), &v));
    }
    Ok(if v.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The keys `--allowed-signers` or `--public-key` trust.
fn signers(a: &VerifyArgs) -> Result<Option<sshsig::AllowedSigners>, String> {
    let read = |flag: &str, p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| format!("{flag} {}: {e}", p.display()))
    };
    if let Some(p) = &a.allowed_signers {
        let s = sshsig::AllowedSigners::parse(&read("--allowed-signers", p)?)
            .map_err(|e| format!("--allowed-signers {}: {e}", p.display()))?;
        if s.signers.is_empty() {
            return Err(format!(
                "--allowed-signers {}: holds no {} key (lines look like `alice@example.org \
                 ssh-ed25519 AAAA...`)",
                p.display(),
                sshsig::ED25519
            ));
        }
        return Ok(Some(s));
    }
    if let Some(p) = &a.public_key {
        let text = read("--public-key", p)?;
        let line = text
            .lines()
            .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .unwrap_or("");
        let key = sshsig::PublicKey::from_openssh(line).map_err(|e| {
            format!(
                "--public-key {}: {e}; give the .pub file ssh-keygen wrote beside the key",
                p.display()
            )
        })?;
        return Ok(Some(sshsig::AllowedSigners {
            signers: vec![sshsig::AllowedSigner {
                principals: format!("--public-key {}", p.display()),
                namespaces: None,
                key,
                line: 1,
            }],
            skipped: 0,
        }));
    }
    Ok(None)
}

fn render(dataset: &str, v: &Verification) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "weir verify: {dataset}");
    let _ = writeln!(
        s,
        "  files      {} ({}), every one read and digested",
        util::fmt::group_digits(v.files),
        util::fmt::human_bytes(v.bytes)
    );
    let _ = writeln!(s, "  seal       {}", v.seal);
    let sig = match &v.signature {
        SignatureCheck::Unsigned => {
            "not signed: the seal shows the files match the manifest, but anyone who can \
             write the directory could rewrite both; keep the seal elsewhere (--seal) or sign \
             with --sign-key"
                .to_string()
        }
        SignatureCheck::NotChecked { key } => {
            format!(
                "signed with key {key}; not checked (give --allowed-signers FILE or \
                 --public-key FILE.pub)"
            )
        }
        SignatureCheck::Valid { key, signer } => format!("valid (key {key}, {signer})"),
        SignatureCheck::Invalid { key } => format!("INVALID (signed with key {key})"),
    };
    let _ = writeln!(s, "  signature  {sig}");
    if v.running {
        let _ = writeln!(
            s,
            "  note       the capture is still running: files it has not finished are not \
             in the chain yet"
        );
    }
    for f in &v.findings {
        let _ = writeln!(
            s,
            "  {:<10} {}{}",
            f.kind,
            f.path
                .as_deref()
                .map(|p| format!("{p}: "))
                .unwrap_or_default(),
            f.detail
        );
    }
    if v.ok() {
        let _ = writeln!(
            s,
            "  result     verified: nothing missing, altered, truncated, reordered or added"
        );
    } else {
        let _ = writeln!(
            s,
            "  result     {} problem{} found",
            v.findings.len(),
            if v.findings.len() == 1 { "" } else { "s" }
        );
    }
    s
}
