//! The packet table's columns as the writer encodes them: one encoder
//! each, how each takes its value from a row, and whether it is constant
//! within a flow.

use parquet::errors::Result as PqResult;
use pqcodec::encode::{ColumnEncoder, ColumnSpec, EncodeOptions, EncodedChunk, Mode};
use wire::{Has, PacketFields, ParseError, Tunnel, TunnelFields, TunnelHas};

use super::rows::same_flow_fields;
use crate::schema::PACKET_COLUMNS;

fn mac_num(m: &[u8; 6]) -> u128 {
    let mut b = [0u8; 16];
    b[10..].copy_from_slice(m);
    u128::from_be_bytes(b)
}

/// Declares the encoders of the packet table's columns, in file order, and
/// how each takes its value: from the record's fields (`r`), then from its
/// tunnel fields (`t`).
macro_rules! encoders {
    (
        fields |$r:ident| { $( $f:ident : $fty:ty = $fspec:expr , $fget:expr , $fpresent:expr , $fflow:expr ; )* }
        tunnel |$t:ident| { $( $u:ident : $uty:ty = $uspec:expr , $uget:expr , $upresent:expr , $uflow:expr ; )* }
    ) => {
        // Every tunnel column is constant within a flow: a stretch pushes
        // them as its head's value repeated (see `push_stretch`).
        const _: () = assert!(true $( && $uflow )*);

        /// One encoder per column of the packet table.
        pub(super) struct Encoders {
            $( $f: ColumnEncoder<$fty>, )*
            $( $u: ColumnEncoder<$uty>, )*
        }

        impl Encoders {
            pub(super) fn new(opts: &EncodeOptions) -> Self {
                debug_assert_eq!(
                    [$( stringify!($f), )* $( stringify!($u), )*].as_slice(),
                    PACKET_COLUMNS.iter().map(|c| c.name).collect::<Vec<_>>().as_slice()
                );
                Encoders {
                    $( $f: ColumnEncoder::new($fspec, opts), )*
                    $( $u: ColumnEncoder::new($uspec, opts), )*
                }
            }

            /// Pushes a stretch of rows that agree with its first, `head`,
            /// in every column constant within a flow (and so in which
            /// columns are present): those columns get the head's value
            /// once and repeated, as do the absent varying ones (nulls);
            /// each present varying column gets its values in one loop.
            #[inline(always)]
            #[allow(unused_variables)] // columns always present ignore the row
            pub(super) fn push_stretch(
                &mut self,
                head: (&PacketFields, &TunnelFields),
                stretch: &[&PacketFields],
            ) {
                let n = stretch.len() as u32;
                {
                    let ($r, $t) = head;
                    $( if $fflow || !$fpresent {
                        if $fpresent { self.$f.push($fget) } else { self.$f.push_null() }
                        self.$f.repeat(n - 1);
                    } )*
                    $( if $uflow || !$upresent {
                        if $upresent { self.$u.push($uget) } else { self.$u.push_null() }
                        self.$u.repeat(n - 1);
                    } )*
                }
                $( if !$fflow && { let $r = head.0; $fpresent } {
                    self.$f.push_each(n, stretch.iter().map(|&$r| $fget));
                } )*
            }

            /// Whether row `b` has the same fields as row `a` and the same
            /// values in every column that is constant within a flow: a
            /// stretch may go on. The fields are compared as stored
            /// ([`same_flow_fields`]); rows of a bucket without tunnels
            /// share [`NO_TUNNEL`](super::rows::NO_TUNNEL), so the tunnel
            /// columns are compared only where a bucket has tunnels.
            #[inline(always)]
            #[allow(unused_variables)] // columns always present ignore the row
            pub(super) fn same_flow(
                a: (&PacketFields, &TunnelFields),
                b: (&PacketFields, &TunnelFields),
            ) -> bool {
                same_flow_fields(a.0, b.0)
                    && (std::ptr::eq(a.1, b.1) || (true $( && (!$uflow || {
                        let pa = { let $t = a.1; $upresent };
                        let pb = { let $t = b.1; $upresent };
                        pa == pb && (!pa || { let $t = a.1; $uget } == { let $t = b.1; $uget })
                    }) )*))
            }

            /// [`same_flow`]'s part for the fields, from the columns' own
            /// values: what `same_flow_fields` must imply.
            ///
            /// [`same_flow`]: Encoders::same_flow
            #[cfg(test)]
            #[allow(unused_variables)]
            pub(super) fn same_flow_columns(a: &PacketFields, b: &PacketFields) -> bool {
                a.has == b.has
                    $( && (!$fflow || {
                        let pa = { let $r = a; $fpresent };
                        let pb = { let $r = b; $fpresent };
                        pa == pb && (!pa || { let $r = a; $fget } == { let $r = b; $fget })
                    }) )*
            }

            pub(super) fn end_page(&mut self, zstd: &mut zstd::bulk::Compressor<'static>) -> PqResult<()> {
                $( self.$f.end_page(zstd)?; )*
                $( self.$u.end_page(zstd)?; )*
                Ok(())
            }

            pub(super) fn finish(
                &mut self,
                zstd: &mut zstd::bulk::Compressor<'static>,
            ) -> PqResult<Vec<EncodedChunk>> {
                Ok(vec![ $( self.$f.finish(zstd)?, )* $( self.$u.finish(zstd)?, )* ])
            }
        }
    };
}

impl Encoders {
    /// Ends the pages of the columns read through the page index (see
    /// [`EncodeOptions::index_page_rows`]): `flow_hash`, whose pages'
    /// bounds the index keeps, and what a reader of frames takes of each
    /// row it finds there.
    pub(super) fn end_index_pages(
        &mut self,
        zstd: &mut zstd::bulk::Compressor<'static>,
    ) -> PqResult<()> {
        self.flow_hash.end_page(zstd)?;
        self.ts.end_page(zstd)?;
        self.pcap_file.end_page(zstd)?;
        self.pcap_offset.end_page(zstd)
    }
}

const fn spec(nullable: bool, mode: Mode) -> ColumnSpec {
    ColumnSpec::new(nullable, mode)
}

const fn fixed(width: usize, bloom: bool) -> ColumnSpec {
    ColumnSpec {
        bloom,
        ..ColumnSpec::fixed(true, width)
    }
}

/// Columns constant within a flow (in practice: a flow's rows in a row
/// group repeat them, and the writer extends their runs once per stretch of
/// such rows instead of once per row), and columns that vary per packet.
const FLOW: bool = true;
const EACH: bool = false;

const DICT: Mode = Mode::Dictionary;
const DELTA: Mode = Mode::Delta;

encoders! {
    fields |r| {
        ts: u64 = ColumnSpec { signed: true, ..spec(false, DELTA) }, r.ts_ns as u64, true, EACH;
        wire_len: u32 = spec(false, DICT), r.wire_len, true, EACH;
        cap_len: u32 = spec(false, DICT), r.cap_len, true, EACH;
        worker: u32 = spec(false, DICT), r.worker as u32, true, FLOW;
        iface: u32 = spec(false, DICT), r.iface as u32, true, FLOW;
        eth_src: u128 = fixed(6, false), mac_num(&r.eth_src), r.has & Has::ETH_SRC != 0, FLOW;
        eth_dst: u128 = fixed(6, false), mac_num(&r.eth_dst), r.has & Has::ETH_DST != 0, FLOW;
        vlan: u32 = spec(true, DICT), r.vlan as u32, r.has & Has::VLAN != 0, FLOW;
        ethertype: u32 = spec(true, DICT), r.ethertype as u32, r.has & Has::ETHERTYPE != 0, FLOW;
        ip_version: u32 = spec(true, DICT), r.ip_version as u32, r.has & Has::IP != 0, FLOW;
        ip_src: u128 = fixed(16, true), u128::from_be_bytes(r.ip_src), r.has & Has::IP != 0, FLOW;
        ip_dst: u128 = fixed(16, true), u128::from_be_bytes(r.ip_dst), r.has & Has::IP != 0, FLOW;
        ip_len: u32 = spec(true, DICT), r.ip_len, r.has & Has::IP != 0, EACH;
        ip_hdr_len: u32 = spec(true, DICT), r.ip_hdr_len as u32, r.has & Has::IP != 0, FLOW;
        ip_proto: u32 = spec(true, DICT), r.ip_proto as u32, r.has & Has::IP != 0, FLOW;
        ttl: u32 = spec(true, DICT), r.ttl as u32, r.has & Has::IP != 0, FLOW;
        dscp: u32 = spec(true, DICT), r.dscp as u32, r.has & Has::IP != 0, FLOW;
        ip_id: u32 = spec(true, DELTA), r.ip_id, r.has & Has::IP_ID != 0, EACH;
        frag: u32 = spec(true, DICT), r.frag as u32, r.has & Has::FRAG != 0, EACH;
        src_port: u32 = spec(true, DICT), r.src_port as u32, r.has & Has::PORTS != 0, FLOW;
        dst_port: u32 = spec(true, DICT), r.dst_port as u32, r.has & Has::PORTS != 0, FLOW;
        tcp_flags: u32 = spec(true, DICT), r.tcp_flags as u32, r.has & Has::TCP != 0, EACH;
        tcp_seq: u32 = spec(true, DELTA), r.tcp_seq, r.has & Has::TCP != 0, EACH;
        tcp_ack: u32 = spec(true, DELTA), r.tcp_ack, r.has & Has::TCP != 0, EACH;
        tcp_win: u32 = spec(true, DICT), r.tcp_win as u32, r.has & Has::TCP != 0, EACH;
        tcp_hdr_len: u32 = spec(true, DICT), r.tcp_hdr_len as u32, r.has & Has::TCP != 0, FLOW;
        udp_len: u32 = spec(true, DICT), r.udp_len as u32, r.has & Has::UDP != 0, EACH;
        icmp_type: u32 = spec(true, DICT), r.icmp_type as u32, r.has & Has::ICMP != 0, FLOW;
        icmp_code: u32 = spec(true, DICT), r.icmp_code as u32, r.has & Has::ICMP != 0, FLOW;
        payload_len: u32 = spec(true, DICT), r.payload_len, r.has & Has::PAYLOAD != 0, EACH;
        flow_hash: u32 = ColumnSpec { page_index: true, ..spec(true, DICT) },
            r.flow_hash, r.has & Has::FLOW != 0, FLOW;
        pcap_file: u32 = spec(true, DICT), r.pcap_file, r.has & Has::PCAP != 0, EACH;
        pcap_offset: u64 = spec(true, DELTA), r.pcap_offset, r.has & Has::PCAP != 0, EACH;
        parse_error: &'static str = ColumnSpec::names(true),
            r.parse_error.as_str(), r.parse_error != ParseError::None, FLOW;
    }
    tunnel |t| {
        outer_src: u128 = fixed(16, true),
            u128::from_be_bytes(t.outer_src), t.has & TunnelHas::OUTER_IP != 0, FLOW;
        outer_dst: u128 = fixed(16, true),
            u128::from_be_bytes(t.outer_dst), t.has & TunnelHas::OUTER_IP != 0, FLOW;
        tunnel: &'static str = ColumnSpec::names(true),
            t.kind.as_str(), t.kind != Tunnel::None, FLOW;
        tunnel_id: u32 = spec(true, DICT), t.id, t.has & TunnelHas::ID != 0, FLOW;
        tunnel_depth: u32 = spec(false, DICT), t.depth as u32, true, FLOW;
    }
}
