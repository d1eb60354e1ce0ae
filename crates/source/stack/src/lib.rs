//! weir stack: the host's own network stack per socket, from eBPF.
//!
//! MAGNeT recorded traffic as the application made it and as the stack
//! shaped it, with a patched kernel; this crate does it on a stock one.
//! The programs (src/bpf/stack.bpf.c) use BTF tracepoints for application
//! send/receive, TCP state on every incoming segment, state changes,
//! retransmissions and device transmit/receive; sock_ops on a cgroup; and
//! the iter/tcp iterator for snapshots. Events reach user space through a
//! BPF ring buffer per CPU, merged in time order; the kernel counts, per
//! event type, every event a full ring could not take, and those counts go
//! to the stats table.
//!
//! This crate loads and attaches the programs, reads their rings
//! ([`probe`]'s [`Probe`], [`Loaded`], [`Reader`]) and decodes their
//! records ([`event`], [`order`]); writing them into a dataset is the
//! pipeline's (the `stackrec` crate).
//!
//! Linux only; needs BTF (/sys/kernel/btf/vmlinux), CAP_BPF and
//! CAP_PERFMON.

use std::path::PathBuf;

pub mod event;
pub mod interval;
pub mod order;
pub mod probe;
mod setup;
pub mod walk;

pub use probe::{
    Attached, CHUNK_BYTES, Chunk, Collected, Loaded, MAX_PORTS, Probe, ProbeOptions, ProgramRuns,
    Reader, WALK_REFUSED, WalkBy,
};
pub use setup::{Prepared, clock_offset_ns};

#[allow(
    clippy::all,
    clippy::pedantic,
    dead_code,
    unused_imports,
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/stack.skel.rs"));
}

/// Why a recording could not start or go on. Each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum StackError {
    /// A wrong option.
    #[error("{0}")]
    Usage(String),
    /// Privileges, kernel support or system setup.
    #[error("{0}")]
    Setup(String),
    #[error("{what}: {source}")]
    Bpf {
        what: String,
        #[source]
        source: libbpf_rs::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl StackError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StackError::Io {
            path: path.into(),
            source,
        }
    }
}
