//! `weir capture --config FILE`: the file's keys are the capture's flags,
//! the command line overrides them, and a bad key or value is an error
//! that names the file, the key and its line.

mod common;

use std::time::Duration;

use common::*;

fn capture(args: &[&str]) -> (i32, String) {
    let mut cmd = weir();
    cmd.arg("capture").args(args);
    let r = run_bounded(cmd, Duration::from_secs(60));
    (r.code(), format!("{}{}", r.stdout(), r.stderr()))
}

#[test]
fn the_file_gives_flags_the_command_line_overrides_and_errors_name_the_line() {
    let s = Scratch::new("config");
    let file = s.join("capture.toml");
    let out = s.join("ds");
    std::fs::write(
        &file,
        format!(
            "# a capture\ninterface = [\"weir-nosuch0\"]\noutput = \"{}\"\n\
             max-disk = \"1G\"\nrecords-every = \"5s\"\npcap = true\nfilter = \"udp\"\n",
            out.display()
        ),
    )
    .unwrap();
    let f = file.to_str().unwrap();
    // The file's interface is the one used...
    let (code, text) = capture(&["--config", f]);
    assert_ne!(code, 0);
    assert!(text.contains("weir-nosuch0"), "{text}");
    // ...unless the command line names another.
    let (code, text) = capture(&["--config", f, "-i", "weir-nosuch1"]);
    assert_ne!(code, 0);
    assert!(
        text.contains("weir-nosuch1") && !text.contains("weir-nosuch0"),
        "{text}"
    );

    std::fs::write(&file, "interface = [\"eth0\"]\n\nrotate-sise = \"1G\"\n").unwrap();
    let (code, text) = capture(&["--config", f]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains(&format!("{f}:3: rotate-sise: unknown key")),
        "{text}"
    );
    std::fs::write(&file, "interface = [\"eth0\"]\nmax-age = \"forever\"\n").unwrap();
    let (code, text) = capture(&["--config", f]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains(&format!("{f}:2: max-age: ")), "{text}");
    let (code, text) = capture(&["--config", s.join("none.toml").to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("none.toml"), "{text}");
}
