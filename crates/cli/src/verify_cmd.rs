//! `weir verify`: a dataset checked against its integrity record; and the
//! `--sign-key` flag of every command that writes a dataset.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use store::integrity::{SignatureCheck, SigningKey, Verification};

#[derive(Args)]
pub struct VerifyArgs {
    /// The dataset directory.
    dataset: PathBuf,
    /// The key file the dataset was signed with (`--sign-key` when it was
    /// written): checks the signature over its seal.
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
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
    /// Sign the dataset's seal (BLAKE3, keyed) with the secret key in FILE
    /// (32 random bytes, raw or hex: `head -c 32 /dev/urandom > FILE`);
    /// `weir verify --key FILE` checks it.
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
    let key = match &a.key {
        Some(p) => Some(SigningKey::from_file(p).map_err(|e| format!("--key: {e}"))?),
        None => None,
    };
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let v = match store::integrity::verify(&a.dataset, key.as_ref(), a.seal.as_deref(), threads) {
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
        print!("{}", render(&a.dataset, &v));
    }
    Ok(if v.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn render(dataset: &std::path::Path, v: &Verification) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "weir verify: {}", dataset.display());
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
            format!("signed with key {key}; not checked (give it with --key FILE)")
        }
        SignatureCheck::Valid { key } => format!("valid (key {key})"),
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
