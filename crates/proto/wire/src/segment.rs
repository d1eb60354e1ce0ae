//! A TCP or UDP segment as the stream decoders after the records see it
//! (rpc's and app's trackers): what they need of a packet and its payload.

/// One packet's transport view: what a tracker needs of it.
#[derive(Clone, Copy, Debug)]
pub struct Segment<'a> {
    pub ts_ns: i64,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub src_port: u16,
    pub dst_port: u16,
    /// The IP protocol: 6 (TCP) or 17 (UDP).
    pub proto: u8,
    pub tcp_seq: u32,
    pub tcp_flags: u16,
    /// The captured payload.
    pub payload: &'a [u8],
    /// The payload's length on the wire (more than `payload.len()` when
    /// the capture cut the frame short: the rest is a gap).
    pub payload_wire: u32,
}
