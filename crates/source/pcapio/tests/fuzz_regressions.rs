//! Inputs found by the `trace_reader` fuzz target (see fuzz/README.md).

use std::io::Cursor;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use pcapio::{ReadErrorKind, ReaderOptions, TraceReader};

/// Reads `bytes` to the end on another thread; panics if that takes longer
/// than a few seconds (a reader that loops must fail the test, not hang it).
/// Returns the frames read and the error that ended reading, if any.
fn read_with_deadline(bytes: Vec<u8>) -> (usize, Option<pcapio::ReadError>) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let input = Box::new(Cursor::new(bytes));
        let options = ReaderOptions {
            chunk_bytes: 64 * 1024,
            ..Default::default()
        };
        let mut r = TraceReader::from_read(PathBuf::from("regression"), input, options).unwrap();
        let mut frames = 0;
        let end = loop {
            match r.next_chunk() {
                Ok(Some(c)) => frames += c.frames.len(),
                Ok(None) => break None,
                Err(e) => break Some(e),
            }
        };
        let _ = tx.send((frames, end));
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the reader did not finish: it loops on this input")
}

/// The first 196 bytes of fuzz artifact
/// timeout-9c207f5e03e8ab5e9ed2aad82d915d2b77758b76 (a mutated capture from
/// the tcpdump tests), minimised: a little-endian Section Header Block, an
/// Ethernet Interface Description Block, and an Enhanced Packet Block of 108
/// bytes whose captured length field says 0x00ff004a (16711754).
const SHB_IDB_BAD_EPB: &str = concat!(
    // Section Header Block, 44 bytes.
    "0a0d0d0a2c0000004d3c2b1a01000000ffffffffffffffff040008006d657267",
    "65636170000000002c000000",
    // Interface Description Block, 44 bytes: Ethernet, snap length 65535.
    "010000002c00000001000000ffff000008000800ffffffffffffffff09000100",
    "06000000000000002c000000",
    // Enhanced Packet Block, 108 bytes, interface 0, captured length
    // 0x00ff004a: far past the end of its own block.
    "060000006c000000000000007fe90400c3315a2e4a00ff004a00000000000000",
    "000000000000000008004500003caefd400040068dbc7f0000017f00000119e9",
    "e44f99ff17f9e9edbc878018005efe3000000101080a000e7268000e6d870402",
    "00080000002e00006c000000",
);

fn hex(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    s.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn assert_overrun_error(e: &pcapio::ReadError) {
    assert_eq!(e.offset, 88, "{e}");
    match &e.kind {
        ReadErrorKind::Malformed(what) => assert!(what.contains("overrun"), "{e}"),
        other => panic!("expected a malformed block, got {other:?}: {e}"),
    }
}

/// A pcapng block whose contents claim more bytes than the block holds made
/// the reader ask for "the rest of the block", which it already had, forever
/// when the stream went on past the first chunk.
#[test]
fn epb_caplen_past_its_block_fails_instead_of_looping() {
    let mut bytes = hex(SHB_IDB_BAD_EPB);
    assert_eq!(bytes.len(), 196);
    // The stream must reach the end of the first 64 KiB read for the reader
    // to expect more input; what follows the bad block does not matter.
    bytes.resize(64 * 1024, 0);
    let (frames, err) = read_with_deadline(bytes);
    assert_eq!(frames, 0);
    assert_overrun_error(&err.expect("an error"));
}

/// The same block at the end of the input was reported as a truncated file.
#[test]
fn epb_caplen_past_its_block_at_end_is_malformed_not_truncated() {
    let (frames, err) = read_with_deadline(hex(SHB_IDB_BAD_EPB));
    assert_eq!(frames, 0);
    assert_overrun_error(&err.expect("an error"));
}
