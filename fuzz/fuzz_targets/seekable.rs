//! The readers of compressed capture files on arbitrary bytes: the seek
//! table at the end, the walk over zstd and LZ4 frames that finds where a
//! torn file's last whole frame ends, decompressing each frame found, and
//! the record walk `weir recover` uses. Checks that what is found lies
//! inside the input and that nothing panics.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pcapio::repair::{PcapScan, walk_records};
use pcapio::seekable::{Container, SeekTable, decode_frame, lz4_block_size, walk_frames};

/// Bounds the work for one input.
const MAX_FRAMES: usize = 16;
/// Bytes of decompression buffers per input: a frame costs its
/// decompressed length, or for LZ4 its declared block size if larger (the
/// decoder zeroes a buffer of that size, up to 4 MiB, for each frame). Few
/// KiB of input make frames of tens of MiB, and touching those pages, not
/// our code, took most of each run. Frames past it are still found and
/// checked, only not decompressed.
const MAX_OUTPUT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    if let Some(t) = SeekTable::from_bytes(data) {
        assert!(t.compressed_len() <= data.len() as u64);
        let _ = t.locate(t.decompressed_len() / 2);
    }
    let mut out = Vec::new();
    let mut output_left = MAX_OUTPUT;
    for c in [Container::Zstd, Container::Lz4] {
        let t = walk_frames(c, data);
        assert!(t.compressed_len() <= data.len() as u64);
        for f in t.frames.iter().take(MAX_FRAMES) {
            let raw = &data[f.compressed_at as usize..][..f.compressed_len as usize];
            let cost = (f.decompressed_len as u64).max(match c {
                // An undeclared size counts as the largest there is.
                Container::Lz4 => lz4_block_size(raw).unwrap_or(4 << 20) as u64,
                Container::Zstd => 0,
            });
            if cost > output_left {
                continue;
            }
            output_left -= cost;
            if decode_frame(c, raw, f.decompressed_len as usize, &mut out).is_ok() {
                assert_eq!(out.len(), f.decompressed_len as usize);
            }
        }
    }
    let mut scan = PcapScan::default();
    if walk_records(data, &mut scan).is_ok() {
        assert!(scan.pcap_bytes <= data.len() as u64);
    }
});
