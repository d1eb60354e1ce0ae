//! `weir anonymize DATASET -o OUT --key FILE`: a copy of a dataset's
//! records to share (`anon::dataset`).

use std::path::PathBuf;
use std::process::ExitCode;

use anon::dataset::{AnonymizeOptions, anonymize_dataset, new_key_file};
use clap::Args;

#[derive(Args)]
pub struct AnonymizeArgs {
    /// The dataset to anonymise: a directory, or s3://BUCKET/PREFIX (its
    /// tables are copied beside OUT first, checked against their digests).
    #[arg(required_unless_present = "new_key")]
    dataset: Option<String>,
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
    #[command(flatten)]
    sign: crate::verify_cmd::SignKeyArg,
}

pub fn run(a: AnonymizeArgs) -> Result<ExitCode, String> {
    if let Some(p) = &a.new_key {
        new_key_file(p)?;
        println!("weir anonymize: new key in {}", p.display());
        return Ok(ExitCode::SUCCESS);
    }
    let (Some(dataset), Some(output), Some(key)) = (a.dataset, a.output, a.key) else {
        return Err("give DATASET, -o OUT and --key FILE (or --new-key FILE)".into());
    };
    // Its pcap files are not copied, so not fetched either.
    let mut staging = crate::staging::Staging::beside(&output);
    let dataset = staging.local(&dataset, &|rel| {
        !rel.starts_with(&format!("{}/", store::dataset::PCAP_DIR))
    })?;
    let opts = AnonymizeOptions {
        dataset,
        output,
        key,
        force: a.force,
        sign_key: a.sign.load()?,
    };
    let r = anonymize_dataset(&opts)?;
    println!(
        "weir anonymize: {} files into {} (key fingerprint {}); pcap files not copied",
        r.files.len(),
        opts.output.display(),
        r.key_fingerprint
    );
    Ok(ExitCode::SUCCESS)
}
