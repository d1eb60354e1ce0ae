//! pcapng blocks: sections, interfaces, packets and their statistics.

use pcap_parser::PcapError;
use pcap_parser::pcapng::{
    Block, InterfaceDescriptionBlock, InterfaceStatisticsBlock, parse_block_be, parse_block_le,
};
use pcap_parser::traits::PcapNGPacketBlock;
use wire::LinkType;

use super::{FrameDesc, InterfaceInfo, MAX_BLOCK_LEN, PCAPNG_BOM, PCAPNG_SHB, Step, TraceReader};
use crate::error::ReadErrorKind;

impl TraceReader {
    /// One pcapng block at `pos` of `data` (stream offset `base`): a
    /// section header, an interface, a packet or interface statistics.
    pub(super) fn parse_ng_block(
        &mut self,
        data: &[u8],
        pos: usize,
        base: u64,
        frames: &mut Vec<FrameDesc>,
    ) -> Step {
        let rest = &data[pos..];
        if rest.is_empty() {
            return Step::End;
        }
        if rest.len() < 12 {
            return Step::NeedBytes(12);
        }
        let at = base + pos as u64;
        let block_len = match self.ng_block_len(rest, at) {
            Ok(n) => n,
            Err(step) => return step,
        };
        let be = self.ng.big_endian;
        let parsed = if be {
            parse_block_be(rest)
        } else {
            parse_block_le(rest)
        };
        let block = match parsed {
            Ok((_, block)) => block,
            // The whole block is present, so a parser that wants more bytes
            // found contents (a captured length, an option) that overrun the
            // block's own length. Asking for more would never end.
            Err(nom::Err::Incomplete(_)) => {
                return Step::Fail(self.error(
                    at,
                    ReadErrorKind::Malformed(format!(
                        "pcapng block of type {:#010x} (its contents overrun its length of \
                         {block_len} bytes)",
                        word(rest, 0, be)
                    )),
                ));
            }
            Err(e) => {
                let what = match e {
                    nom::Err::Error(PcapError::HeaderNotRecognized)
                    | nom::Err::Failure(PcapError::HeaderNotRecognized) => {
                        "pcapng section header".to_string()
                    }
                    _ => format!("pcapng block of type {:#010x}", word(rest, 0, be)),
                };
                return Step::Fail(self.error(at, ReadErrorKind::Malformed(what)));
            }
        };
        match block {
            Block::SectionHeader(shb) => {
                if shb.major_version != 1 {
                    return Step::Fail(self.error(
                        at,
                        ReadErrorKind::Unsupported(format!(
                            "pcapng version {}.{} (only 1.x exists)",
                            shb.major_version, shb.minor_version
                        )),
                    ));
                }
                self.ng.ifaces.clear();
            }
            Block::InterfaceDescription(idb) => {
                if let Err(step) = self.ng_interface(&idb, at, be) {
                    return step;
                }
            }
            Block::EnhancedPacket(epb) => {
                let Some(&iface) = self.ng.ifaces.get(epb.if_id as usize) else {
                    return Step::Fail(self.error(
                        at,
                        ReadErrorKind::Malformed(format!(
                            "enhanced packet block for interface {} (the section declares {})",
                            epb.if_id,
                            self.ng.ifaces.len()
                        )),
                    ));
                };
                let info = &self.interfaces[iface as usize];
                let raw = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                let ts_ns = ts_to_ns(raw, info.ts_units_per_sec, info.ts_offset_s);
                let bytes = epb.packet_data();
                let start = pos + (bytes.as_ptr() as usize - rest.as_ptr() as usize);
                frames.push(FrameDesc {
                    ts_ns,
                    record_offset: at,
                    start: start as u32,
                    cap_len: bytes.len() as u32,
                    wire_len: epb.origlen,
                    link: info.link,
                    iface,
                });
                self.last_ts = ts_ns;
            }
            Block::SimplePacket(spb) => {
                let Some(&iface) = self.ng.ifaces.first() else {
                    return Step::Fail(self.error(
                        at,
                        ReadErrorKind::Malformed(
                            "simple packet block before any interface description".into(),
                        ),
                    ));
                };
                let info = &self.interfaces[iface as usize];
                let bytes = spb.packet_data();
                let start = pos + (bytes.as_ptr() as usize - rest.as_ptr() as usize);
                // Simple packets carry no time: they inherit the last one seen.
                frames.push(FrameDesc {
                    ts_ns: self.last_ts,
                    record_offset: at,
                    start: start as u32,
                    cap_len: bytes.len() as u32,
                    wire_len: spb.origlen,
                    link: info.link,
                    iface,
                });
            }
            Block::InterfaceStatistics(isb) => self.ng_statistics(&isb, be),
            _ => {}
        }
        Step::Consumed(block_len as usize)
    }

    /// The length of the block at the start of `rest` (stream offset
    /// `at`), in its section's byte order, which a Section Header Block
    /// sets; `Err` with the step to take when the length is implausible or
    /// the block is not all there yet.
    fn ng_block_len(&mut self, rest: &[u8], at: u64) -> Result<u32, Step> {
        if word(rest, 0, false) == PCAPNG_SHB {
            let bom = word(rest, 8, false);
            if bom == PCAPNG_BOM {
                self.ng.big_endian = false;
            } else if bom == PCAPNG_BOM.swap_bytes() {
                self.ng.big_endian = true;
            } else {
                return Err(Step::Fail(self.error(
                    at,
                    ReadErrorKind::Malformed(format!(
                        "pcapng section header (byte-order magic {bom:#010x})"
                    )),
                )));
            }
        }
        let block_len = word(rest, 4, self.ng.big_endian);
        if block_len > MAX_BLOCK_LEN {
            return Err(Step::Fail(self.error(
                at,
                ReadErrorKind::BogusLength {
                    what: "pcapng block with a length",
                    len: block_len as u64,
                    limit: MAX_BLOCK_LEN as u64,
                },
            )));
        }
        if block_len < 12 || block_len % 4 != 0 {
            return Err(Step::Fail(self.error(
                at,
                ReadErrorKind::Malformed(format!("pcapng block (length {block_len})")),
            )));
        }
        if rest.len() < block_len as usize {
            return Err(Step::NeedBytes(block_len as usize));
        }
        Ok(block_len)
    }

    /// An Interface Description Block: a new interface of the section;
    /// `Err` with the failing step when it cannot be one.
    fn ng_interface(
        &mut self,
        idb: &InterfaceDescriptionBlock<'_>,
        at: u64,
        be: bool,
    ) -> Result<(), Step> {
        if self.interfaces.len() > u16::MAX as usize {
            return Err(Step::Fail(self.error(
                at,
                ReadErrorKind::Unsupported("more than 65536 interfaces".into()),
            )));
        }
        let Some(units) = ts_units_per_sec(idb.if_tsresol) else {
            return Err(Step::Fail(self.error(
                at,
                ReadErrorKind::Malformed(format!(
                    "interface description (if_tsresol {:#04x})",
                    idb.if_tsresol
                )),
            )));
        };
        let text = |o: Option<Result<&str, _>>| o.and_then(|r| r.ok()).map(str::to_owned);
        self.ng.ifaces.push(self.interfaces.len() as u16);
        self.interfaces.push(InterfaceInfo {
            link: LinkType(idb.linktype.0 as u16),
            snaplen: idb.snaplen,
            name: text(idb.if_name()),
            description: text(idb.if_description()),
            ts_units_per_sec: units,
            ts_offset_s: option_u64(&idb.options, OPT_IF_TSOFFSET, be).unwrap_or(0) as i64,
            dropped: None,
            received: None,
        });
        Ok(())
    }

    /// An Interface Statistics Block: the drops and receptions the
    /// capturing system counted for an interface.
    fn ng_statistics(&mut self, isb: &InterfaceStatisticsBlock<'_>, be: bool) {
        if let Some(&iface) = self.ng.ifaces.get(isb.if_id as usize) {
            let opt = |code| option_u64(&isb.options, code, be);
            let info = &mut self.interfaces[iface as usize];
            let drops = [opt(OPT_ISB_IFDROP), opt(OPT_ISB_OSDROP)];
            if drops.iter().any(Option::is_some) {
                info.dropped = Some(
                    drops
                        .iter()
                        .flatten()
                        .fold(0u64, |a, b| a.saturating_add(*b)),
                );
            }
            if let Some(r) = opt(OPT_ISB_IFRECV) {
                info.received = Some(r);
            }
        }
    }
}

/// The 32-bit word at `i` of `rest`, big-endian or not.
fn word(rest: &[u8], i: usize, be: bool) -> u32 {
    let b = [rest[i], rest[i + 1], rest[i + 2], rest[i + 3]];
    if be {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    }
}

/// The first 8-byte option with `code`, in the section's byte order
/// (pcap-parser's own accessors for these assume little-endian).
fn option_u64(options: &[pcap_parser::PcapNGOption], code: u16, big_endian: bool) -> Option<u64> {
    options
        .iter()
        .find(|o| o.code.0 == code)
        .and_then(|o| <[u8; 8]>::try_from(o.value.get(..8)?).ok())
        .map(|b| {
            if big_endian {
                u64::from_be_bytes(b)
            } else {
                u64::from_le_bytes(b)
            }
        })
}

/// pcapng option codes read with [`option_u64`].
const OPT_IF_TSOFFSET: u16 = 14;
const OPT_ISB_IFRECV: u16 = 4;
const OPT_ISB_IFDROP: u16 = 5;
const OPT_ISB_OSDROP: u16 = 7;

/// Units per second of a pcapng `if_tsresol` value: a power of ten, or of
/// two when the top bit is set. `None` when it does not fit in 64 bits.
fn ts_units_per_sec(tsresol: u8) -> Option<u64> {
    let exp = (tsresol & 0x7f) as u32;
    if tsresol & 0x80 == 0 {
        10u64.checked_pow(exp)
    } else {
        1u64.checked_shl(exp).filter(|_| exp < 64)
    }
}

/// A pcapng timestamp in nanoseconds, saturating instead of overflowing on
/// absurd values.
fn ts_to_ns(raw: u64, units_per_sec: u64, offset_s: i64) -> i64 {
    let units = units_per_sec.max(1) as u128;
    let secs = raw as u128 / units;
    let frac = raw as u128 % units;
    let ns = secs * 1_000_000_000 + frac * 1_000_000_000 / units;
    let ns = i64::try_from(ns).unwrap_or(i64::MAX);
    ns.saturating_add(offset_s.saturating_mul(1_000_000_000))
}
