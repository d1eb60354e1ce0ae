//! The man pages and completions `weir generate-docs` writes (the package
//! ships them): a page for weir and for every subcommand, whose flags are
//! exactly those of the subcommand's --help, as man(1) shows them.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::*;

/// The long flags (`--name`) in a text.
fn long_flags(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in text.match_indices("--") {
        let before = text[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '-') {
            continue;
        }
        let name: String = text[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if name.len() > 1 && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
            out.insert(format!("--{name}"));
        }
    }
    out
}

/// `weir [SUB] --help`.
fn help(sub: &str) -> String {
    let mut cmd = weir();
    if !sub.is_empty() {
        cmd.arg(sub);
    }
    cmd.arg("--help");
    let r = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(r.code(), 0, "weir {sub} --help: {}", r.stderr());
    r.stdout()
}

/// man(1)'s text of a page: a file, or an installed page by name.
pub fn man_text(page: &str) -> String {
    let mut cmd = tool("man");
    cmd.env("LC_ALL", "C")
        .env("MANWIDTH", "1000")
        .env("MANPAGER", "cat")
        .env_remove("MAN_KEEP_FORMATTING");
    if Path::new(page).is_file() {
        cmd.arg("-l");
    }
    cmd.arg(page);
    let r = run_bounded(cmd, Duration::from_secs(30));
    assert_eq!(r.code(), 0, "man {page}: {}", r.stderr());
    r.stdout()
}

/// The subcommands `weir --help` lists.
fn subcommands() -> Vec<String> {
    let text = help("");
    let mut in_list = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("Commands:") {
            in_list = true;
            continue;
        }
        if in_list {
            if line.trim().is_empty() {
                break;
            }
            if let Some(name) = line
                .strip_prefix("  ")
                .and_then(|l| l.split_whitespace().next())
                && !line.starts_with("   ")
                && name != "help"
            {
                out.push(name.to_string());
            }
        }
    }
    out
}

#[test]
fn every_subcommand_has_a_man_page_with_the_flags_of_its_help() {
    let s = Scratch::new("docs");
    let mut cmd = weir();
    cmd.args(["generate-docs", "--out"]).arg(&s.0);
    let r = run_bounded(cmd, Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr());
    let subs = subcommands();
    assert!(
        subs.len() >= 10 && subs.contains(&"capture".to_string()),
        "{subs:?}"
    );
    assert!(
        !subs.contains(&"generate-docs".to_string()),
        "hidden: {subs:?}"
    );
    let top = man_text(s.join("man/weir.1").to_str().unwrap());
    for sub in &subs {
        assert!(top.contains(sub.as_str()), "weir(1) does not name {sub}");
        let page = s.join(&format!("man/weir-{sub}.1"));
        let want = long_flags(&help(sub));
        let got = long_flags(&man_text(page.to_str().unwrap()));
        assert_eq!(got, want, "weir {sub} --help and man weir-{sub} differ");
    }
    assert!(long_flags(&help("capture")).contains("--config"));
    for (file, word) in [
        ("completions/weir.bash", "complete "),
        ("completions/_weir", "#compdef weir"),
        ("completions/weir.fish", "complete -c weir"),
    ] {
        let text = std::fs::read_to_string(s.join(file)).unwrap();
        assert!(text.contains(word), "{file}");
        assert!(
            text.contains("max-disk"),
            "{file} completes capture's flags"
        );
    }
}
