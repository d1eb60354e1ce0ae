//! Compiles the eBPF programs with clang and generates their libbpf
//! skeleton. The programs carry CO-RE relocations against the small type
//! header in src/bpf/kernel.h, resolved by libbpf against the running
//! kernel's BTF at load time, so the build needs neither the kernel's
//! headers nor a BTF file.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/stack.bpf.c";

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(other) => panic!("weir stack: no eBPF target arch mapping for {other}"),
        Err(_) => "x86",
    };
    // Debian keeps asm/types.h under the multiarch directory.
    let multiarch = format!(
        "-I/usr/include/{}-linux-gnu",
        env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default()
    );
    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
        .clang_args([
            format!("-D__TARGET_ARCH_{arch}"),
            multiarch,
            "-Wall".to_string(),
            "-Werror".to_string(),
        ])
        .build_and_generate(out.join("stack.skel.rs"))
    {
        panic!(
            "weir stack: building {SRC} failed: {e:#}\n\
             It needs clang and libbpf's headers (Debian: apt-get install clang libbpf-dev \
             libelf-dev zlib1g-dev; scripts/test.sh installs them)."
        );
    }
    for f in ["src/bpf/stack.bpf.c", "src/bpf/kernel.h", "src/bpf/event.h"] {
        println!("cargo:rerun-if-changed={f}");
    }
}
