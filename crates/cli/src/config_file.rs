//! `weir capture --config FILE`: a capture's flags in a TOML file, one key
//! per long flag, named as the flag (`interface = ["eth0"]`, `output =
//! "/data/cap"`, `max-disk = "500G"`, `pcap = true`, and `filter = "tcp
//! port 80"` for the trailing filter). Each key is checked against the
//! flag's own parser, so a bad value is an error naming its key and line;
//! the file then becomes arguments placed before the command line's, and
//! a flag given on the command line replaces the file's key.

use std::ffi::{OsStr, OsString};
use std::path::Path;

use clap::parser::ValueSource;

/// The trailing filter's argument id (`filter` in the file).
const FILTER: &str = "filter";
/// The flag that names the file.
pub const CONFIG: &str = "config";

/// A key of the file: its name, line and values (as the flag would be
/// given them on the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub line: usize,
    pub values: Vec<String>,
}

/// The path given with `--config` in `args` (the words after the
/// subcommand), if any.
fn config_path(args: &[OsString]) -> Option<OsString> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            return None;
        }
        let s = a.to_string_lossy();
        if s == "--config" {
            return it.next().cloned();
        }
        if let Some(v) = s.strip_prefix("--config=") {
            return Some(v.into());
        }
    }
    None
}

/// `args` (the whole command line) with the keys of the `--config` file of
/// subcommand `sub` added where the command line does not give the flag.
/// Anything else is returned as it was.
pub fn expand(
    cmd: &clap::Command,
    sub: &str,
    args: Vec<OsString>,
) -> Result<Vec<OsString>, String> {
    if args.get(1).is_none_or(|a| a != sub) {
        return Ok(args);
    }
    let Some(path) = config_path(&args[2..]) else {
        return Ok(args);
    };
    let path = Path::new(&path);
    let mut cmd = cmd.clone();
    cmd.build();
    let Some(sub_cmd) = cmd.find_subcommand(sub) else {
        return Ok(args);
    };
    let entries = read(path, sub_cmd)?;
    // What the command line gives, parsed leniently (a required flag may
    // be in the file).
    let given = sub_cmd
        .clone()
        .ignore_errors(true)
        .try_get_matches_from(&args[1..])
        .map_err(|e| e.to_string())?;
    let on_command_line = |arg: &clap::Arg| {
        // The flag itself, or one it conflicts with (-w over output).
        std::iter::once(arg)
            .chain(sub_cmd.get_arg_conflicts_with(arg))
            .any(|a| given.value_source(a.get_id().as_str()) == Some(ValueSource::CommandLine))
    };
    let mut out: Vec<OsString> = args[..2].to_vec();
    let mut filter = Vec::new();
    for e in &entries {
        let arg = find(sub_cmd, &e.key).expect("checked by read");
        if on_command_line(arg) {
            continue;
        }
        if arg.get_id() == FILTER {
            filter.extend(e.values.iter().map(OsString::from));
            continue;
        }
        let flag = format!("--{}", e.key);
        if !takes_values(arg) {
            if e.values.first().is_some_and(|v| v == "true") {
                out.push(flag.into());
            }
            continue;
        }
        for v in &e.values {
            out.push(format!("{flag}={v}").into());
        }
    }
    out.extend(args[2..].iter().cloned());
    out.extend(filter);
    Ok(out)
}

fn takes_values(arg: &clap::Arg) -> bool {
    arg.get_action().takes_values()
}

/// The argument a key names: a long flag, or the trailing filter.
fn find<'a>(cmd: &'a clap::Command, key: &str) -> Option<&'a clap::Arg> {
    cmd.get_arguments().find(|a| {
        a.get_id() != CONFIG
            && a.get_id() != "help"
            && (a.get_long() == Some(key) || (key == FILTER && a.get_id() == FILTER))
    })
}

/// Reads and checks the file against `cmd`'s flags.
pub fn read(path: &Path, cmd: &clap::Command) -> Result<Vec<Entry>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--config {}: {e}", path.display()))?;
    parse(&text, cmd).map_err(|e| format!("--config {}:{e}", path.display()))
}

/// The value of `key` in the file at `path` (checked against `cmd`'s
/// flags), if it is there.
pub fn value_of(path: &Path, cmd: &clap::Command, key: &str) -> Result<Option<String>, String> {
    Ok(read(path, cmd)?
        .into_iter()
        .find(|e| e.key == key)
        .and_then(|e| e.values.into_iter().next()))
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The file's keys, checked; an error starts with the line number.
pub fn parse(text: &str, cmd: &clap::Command) -> Result<Vec<Entry>, String> {
    let doc = toml_edit::Document::parse(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        format!("{line}: not TOML: {}", e.message())
    })?;
    let mut out = Vec::new();
    for (name, item) in doc.as_table().iter() {
        let line = doc
            .as_table()
            .key(name)
            .and_then(|k| k.span())
            .map_or(1, |s| line_of(text, s.start));
        let at = |m: String| format!("{line}: {name}: {m}");
        let Some(arg) = find(cmd, name) else {
            let hint = if item.is_table() || item.is_array_of_tables() {
                "sections are not used; every key is a flag's long name at the top of the file"
            } else {
                "not a flag of this command; the keys are its long flags' names without the \
                 dashes (see --help), and filter for the trailing filter"
            };
            return Err(at(format!("unknown key: {hint}")));
        };
        let value = item
            .as_value()
            .ok_or_else(|| at("a section, not a value".into()))?;
        let values: Vec<String> = match value.as_array() {
            Some(a) => a.iter().map(scalar).collect::<Result<_, _>>().map_err(at)?,
            None => vec![scalar(value).map_err(at)?],
        };
        let is_filter = arg.get_id() == FILTER;
        if !takes_values(arg) {
            if value.as_bool().is_none() {
                return Err(at(format!(
                    "is a switch: give true or false, not {}",
                    value.type_name()
                )));
            }
        } else if values.len() != 1
            && !is_filter
            && !matches!(arg.get_action(), clap::ArgAction::Append)
        {
            return Err(at("takes one value, not a list".into()));
        } else {
            for v in &values {
                if !is_filter {
                    check_value(cmd, name, v).map_err(at)?;
                }
            }
        }
        out.push(Entry {
            key: name.to_string(),
            line,
            values,
        });
    }
    Ok(out)
}

/// Parses `--key=value` alone with `cmd`'s own parser for that flag: an
/// error about the value is the key's; others (a required flag missing, a
/// flag this one requires) are not about the file's key.
fn check_value(cmd: &clap::Command, key: &str, value: &str) -> Result<(), String> {
    use clap::error::ErrorKind;
    let word = OsString::from(format!("--{key}={value}"));
    let parsed = cmd
        .clone()
        .mut_args(|a| a.required(false))
        .try_get_matches_from([OsStr::new(cmd.get_name()), word.as_os_str()]);
    match parsed {
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::InvalidValue
                    | ErrorKind::ValueValidation
                    | ErrorKind::WrongNumberOfValues
                    | ErrorKind::TooManyValues
                    | ErrorKind::TooFewValues
                    | ErrorKind::InvalidUtf8
            ) =>
        {
            Err(clap_message(&e))
        }
        _ => Ok(()),
    }
}

/// A TOML value as the flag's word: strings as they are, numbers and
/// booleans as written.
fn scalar(v: &toml_edit::Value) -> Result<String, String> {
    if let Some(s) = v.as_str() {
        return Ok(s.to_string());
    }
    if let Some(i) = v.as_integer() {
        return Ok(i.to_string());
    }
    if let Some(f) = v.as_float() {
        return Ok(f.to_string());
    }
    if let Some(b) = v.as_bool() {
        return Ok(b.to_string());
    }
    Err(format!(
        "a {} cannot be a flag's value; give a string, number or boolean",
        v.type_name()
    ))
}

/// clap's error without its "error: " and usage lines.
fn clap_message(e: &clap::Error) -> String {
    let text = e.to_string();
    let first = text.lines().next().unwrap_or("").trim();
    first.strip_prefix("error: ").unwrap_or(first).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn capture_cmd() -> clap::Command {
        let mut c = crate::Cli::command();
        c.build();
        c.find_subcommand("capture").unwrap().clone()
    }

    #[test]
    fn keys_become_flags_and_the_command_line_wins() {
        let dir = std::env::temp_dir().join(format!("weir-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.toml");
        std::fs::write(
            &file,
            "# a capture\ninterface = [\"eth0\", \"eth1\"]\noutput = \"/data/x\"\n\
             snaplen = 128\npcap = true\nrecords = false\nmax-disk = \"5G\"\n\
             filter = \"udp port 53\"\n",
        )
        .unwrap();
        let args: Vec<OsString> = [
            "weir",
            "capture",
            "--config",
            file.to_str().unwrap(),
            "-s",
            "96",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let out = expand(&crate::Cli::command(), "capture", args).unwrap();
        let words: Vec<String> = out
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            words,
            [
                "weir",
                "capture",
                "--interface=eth0",
                "--interface=eth1",
                "--output=/data/x",
                "--pcap",
                "--max-disk=5G",
                "--config",
                file.to_str().unwrap(),
                "-s",
                "96",
                "udp port 53"
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_keys_and_bad_values_name_their_key_and_line() {
        let cmd = capture_cmd();
        let err = |text: &str| parse(text, &cmd).unwrap_err();
        let e = err("interface = \"eth0\"\n\nsnaplen = \"big\"\n");
        assert!(e.starts_with("3: snaplen: "), "{e}");
        let e = err("interface = \"eth0\"\nrotate-sise = \"1G\"\n");
        assert!(e.starts_with("2: rotate-sise: unknown key"), "{e}");
        let e = err("pcap = \"yes\"\n");
        assert!(e.starts_with("1: pcap: is a switch"), "{e}");
        let e = err("on-full = \"later\"\n");
        assert!(e.starts_with("1: on-full: ") && e.contains("later"), "{e}");
        let e = err("duration = \"soon\"\n");
        assert!(e.starts_with("1: duration: "), "{e}");
        let e = err("snaplen = [1, 2]\n");
        assert!(e.starts_with("1: snaplen: takes one value"), "{e}");
        let e = err("[capture]\nsnaplen = 1\n");
        assert!(e.starts_with("1: capture: unknown key: sections"), "{e}");
        let e = err("snaplen = \n");
        assert!(e.starts_with("1: not TOML"), "{e}");
        let e = err("config = \"x\"\n");
        assert!(e.contains("unknown key"), "{e}");
        assert!(parse("user = \"weir\"\nsign-key = \"/etc/weir/key\"\n", &cmd).is_ok());
    }

    /// Every flag of `weir capture` but --config and --help has a key.
    #[test]
    fn every_capture_flag_is_a_key() {
        let cmd = capture_cmd();
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if id == CONFIG || id == "help" {
                continue;
            }
            let key = a.get_long().unwrap_or(id);
            assert!(find(&cmd, key).is_some(), "{id} has no key");
            assert!(
                a.get_long().is_some() || id == FILTER,
                "{id} has no long flag, so no key of the same name"
            );
        }
    }
}
