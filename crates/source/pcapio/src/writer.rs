//! Nanosecond pcap writing.

use std::io::{self, Write};

use wire::LinkType;

/// Bytes of the pcap file header.
pub const PCAP_HEADER_LEN: u64 = 24;
/// Bytes of a pcap record header.
pub const PCAP_RECORD_HEADER_LEN: u64 = 16;

/// Writes a little-endian, nanosecond-resolution pcap stream.
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
    /// Bytes written so far: the offset the next record will have.
    offset: u64,
    frames: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header. Frames longer than `snaplen` are cut to it.
    pub fn new(mut out: W, link: LinkType, snaplen: u32) -> io::Result<Self> {
        let mut h = [0u8; PCAP_HEADER_LEN as usize];
        h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        h[16..20].copy_from_slice(&snaplen.to_le_bytes());
        h[20..24].copy_from_slice(&(link.0 as u32).to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter {
            out,
            snaplen,
            offset: PCAP_HEADER_LEN,
            frames: 0,
        })
    }

    /// Appends one frame; returns the offset of its record header.
    /// Times before 1970 are written as 0 (pcap's seconds are unsigned).
    pub fn write_frame(&mut self, ts_ns: i64, wire_len: u32, data: &[u8]) -> io::Result<u64> {
        let at = self.offset;
        let cap = data.len().min(self.snaplen as usize);
        let ts = ts_ns.max(0) as u64;
        let mut h = [0u8; PCAP_RECORD_HEADER_LEN as usize];
        h[0..4].copy_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(cap as u32).to_le_bytes());
        h[12..16].copy_from_slice(&wire_len.max(cap as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&data[..cap])?;
        self.offset += PCAP_RECORD_HEADER_LEN + cap as u64;
        self.frames += 1;
        Ok(at)
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.offset
    }

    pub fn frames_written(&self) -> u64 {
        self.frames
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
