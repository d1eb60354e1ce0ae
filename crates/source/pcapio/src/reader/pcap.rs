//! Classic pcap records: a tight scan over runs of plain records, and the
//! general path for the rest.

use pcap_parser::pcap::{parse_pcap_frame, parse_pcap_frame_be, parse_pcap_frame_modified};
use wire::LinkType;

use super::{Container, FrameDesc, MAX_BLOCK_LEN, MAX_FRAME_LEN, Step, TraceReader};
use crate::error::ReadErrorKind;

impl TraceReader {
    /// One classic pcap record at `pos` of `data` (stream offset `base`),
    /// read the general way: any header variant, and an error that says
    /// what is wrong with it.
    pub(super) fn parse_pcap_record(
        &mut self,
        data: &[u8],
        pos: usize,
        base: u64,
        frames: &mut Vec<FrameDesc>,
    ) -> Step {
        let Container::Pcap {
            big_endian,
            nanosecond,
            modified,
            link,
            snaplen,
        } = self.container
        else {
            return Step::End;
        };
        let rest = &data[pos..];
        if rest.is_empty() {
            return Step::End;
        }
        let hdr_len = if modified { 24 } else { 16 };
        if rest.len() < hdr_len {
            return Step::NeedBytes(hdr_len);
        }
        // Check the claimed length before asking for that many bytes.
        let caplen = {
            let b = [rest[8], rest[9], rest[10], rest[11]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let limit = MAX_FRAME_LEN.max(snaplen.min(MAX_BLOCK_LEN));
        if caplen > limit {
            return Step::Fail(self.error(
                base + pos as u64,
                ReadErrorKind::BogusLength {
                    what: "pcap record with a captured length",
                    len: caplen as u64,
                    limit: limit as u64,
                },
            ));
        }
        let parsed = if modified {
            parse_pcap_frame_modified(rest)
        } else if big_endian {
            parse_pcap_frame_be(rest)
        } else {
            parse_pcap_frame(rest)
        };
        match parsed {
            Ok((remaining, block)) => {
                let frac_ns = if nanosecond {
                    block.ts_usec as i64
                } else {
                    block.ts_usec as i64 * 1000
                };
                let ts_ns = block.ts_sec as i64 * 1_000_000_000 + frac_ns;
                let start = pos + (block.data.as_ptr() as usize - rest.as_ptr() as usize);
                frames.push(FrameDesc {
                    ts_ns,
                    record_offset: base + pos as u64,
                    start: start as u32,
                    cap_len: block.caplen,
                    wire_len: block.origlen,
                    link,
                    iface: 0,
                });
                self.last_ts = ts_ns;
                Step::Consumed(rest.len() - remaining.len())
            }
            Err(nom::Err::Incomplete(_)) => Step::NeedBytes(hdr_len + caplen as usize),
            Err(_) => Step::Fail(self.error(
                base + pos as u64,
                ReadErrorKind::Malformed("pcap record".into()),
            )),
        }
    }
}

/// What [`scan_pcap_records`] consumed.
pub(super) struct PcapRun {
    pub(super) consumed: usize,
    pub(super) last_ts: i64,
}

/// Adds every whole, plausible classic-pcap record from `data[pos..]` to
/// `frames`, stopping before the first that is cut off or claims more than
/// `limit` bytes. One tight loop instead of a dispatch per record: on
/// 64-byte frames the per-record path cost the reader thread about a
/// quarter of a worker's time.
#[allow(clippy::too_many_arguments)]
pub(super) fn scan_pcap_records(
    data: &[u8],
    pos: usize,
    base: u64,
    big_endian: bool,
    nanosecond: bool,
    link: LinkType,
    limit: u32,
    frames: &mut Vec<FrameDesc>,
) -> PcapRun {
    let frac_scale: i64 = if nanosecond { 1 } else { 1000 };
    let word = |h: &[u8], i: usize| {
        let b = [h[i], h[i + 1], h[i + 2], h[i + 3]];
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let mut p = pos;
    let mut last_ts = 0;
    while let Some(h) = data.get(p..p + 16) {
        let caplen = word(h, 8);
        if caplen > limit {
            break;
        }
        let end = p + 16 + caplen as usize;
        if end > data.len() || p + 16 > u32::MAX as usize {
            break;
        }
        last_ts = word(h, 0) as i64 * 1_000_000_000 + word(h, 4) as i64 * frac_scale;
        frames.push(FrameDesc {
            ts_ns: last_ts,
            record_offset: base + p as u64,
            start: (p + 16) as u32,
            cap_len: caplen,
            wire_len: word(h, 12),
            link,
            iface: 0,
        });
        p = end;
    }
    PcapRun {
        consumed: p - pos,
        last_ts,
    }
}
