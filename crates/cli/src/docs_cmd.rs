//! `weir generate-docs --out DIR` (hidden): man pages for weir and every
//! subcommand (clap_mangen) and bash, zsh and fish completions
//! (clap_complete), all from the one CLI definition, for the package
//! (scripts/build-deb.sh). A subcommand rather than a binary of its own:
//! the definition lives in this binary's modules, and the two generators
//! add little to it.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub struct DocsArgs {
    /// Directory to write into: man/ (weir.1, weir-capture.1, ...) and
    /// completions/ (weir.bash, _weir, weir.fish).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub fn run(a: DocsArgs, cmd: clap::Command) -> Result<ExitCode, String> {
    let man = a.out.join("man");
    let completions = a.out.join("completions");
    for d in [&man, &completions] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    clap_mangen::generate_to(cmd.clone(), &man)
        .map_err(|e| format!("{}: writing the man pages: {e}", man.display()))?;
    let mut cmd = cmd;
    for shell in [
        clap_complete::Shell::Bash,
        clap_complete::Shell::Zsh,
        clap_complete::Shell::Fish,
    ] {
        clap_complete::generate_to(shell, &mut cmd, "weir", &completions).map_err(|e| {
            format!(
                "{}: writing the {shell} completions: {e}",
                completions.display()
            )
        })?;
    }
    Ok(ExitCode::SUCCESS)
}
