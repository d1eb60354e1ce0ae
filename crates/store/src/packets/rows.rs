//! The packet writer's rows of one row group: kept in flow buckets,
//! sorted into flow order, and the fields that decide a flow's stretch.

use wire::{Has, PacketFields, PacketRecord, Tunnel, TunnelFields};

use super::RowOrder;

/// Where the fields of the columns constant within a flow lie in a row:
/// wire's `PacketFields` keeps them as its last bytes, `flow_hash` first,
/// and those fields and nothing else (a test checks them against the
/// `FLOW` columns below).
const FLOW_AT: usize = std::mem::offset_of!(PacketFields, flow_hash);
const FLOW_WORDS: usize = (std::mem::size_of::<PacketFields>() - FLOW_AT) / 8;

const fn field_size<T>(_: fn(&PacketFields) -> &T) -> usize {
    std::mem::size_of::<T>()
}

const _: () = {
    assert!(std::mem::size_of::<PacketFields>() == 128);
    assert!(std::mem::align_of::<PacketFields>() == 8 && FLOW_AT % 8 == 0);
    // No padding among them: their sizes add up to the bytes they span.
    let sizes = field_size(|r: &PacketFields| &r.flow_hash)
        + field_size(|r: &PacketFields| &r.worker)
        + field_size(|r: &PacketFields| &r.iface)
        + field_size(|r: &PacketFields| &r.has)
        + field_size(|r: &PacketFields| &r.vlan)
        + field_size(|r: &PacketFields| &r.ethertype)
        + field_size(|r: &PacketFields| &r.ip_hdr_len)
        + field_size(|r: &PacketFields| &r.src_port)
        + field_size(|r: &PacketFields| &r.dst_port)
        + field_size(|r: &PacketFields| &r.ip_src)
        + field_size(|r: &PacketFields| &r.ip_dst)
        + field_size(|r: &PacketFields| &r.eth_src)
        + field_size(|r: &PacketFields| &r.eth_dst)
        + field_size(|r: &PacketFields| &r.ip_version)
        + field_size(|r: &PacketFields| &r.ip_proto)
        + field_size(|r: &PacketFields| &r.ttl)
        + field_size(|r: &PacketFields| &r.dscp)
        + field_size(|r: &PacketFields| &r.tcp_hdr_len)
        + field_size(|r: &PacketFields| &r.icmp_type)
        + field_size(|r: &PacketFields| &r.icmp_code)
        + field_size(|r: &PacketFields| &r.parse_error);
    assert!(sizes == FLOW_WORDS * 8);
};

/// A row's fields of the columns constant within a flow, as words.
#[inline(always)]
fn flow_words(r: &PacketFields) -> &[u64; FLOW_WORDS] {
    // SAFETY: the row is 128 bytes, 8-byte aligned, and its last
    // FLOW_WORDS * 8 bytes, from FLOW_AT (a multiple of 8), are fields
    // whose sizes add up to them (asserted above): no padding, so every
    // byte is initialised, and any bytes are valid words. The borrow is
    // the row's.
    unsafe {
        &*std::ptr::from_ref(r)
            .cast::<u8>()
            .add(FLOW_AT)
            .cast::<[u64; FLOW_WORDS]>()
    }
}

/// Whether row `b` holds the same value as row `a`, present or not, in
/// each field of a column constant within a flow and in its [`Has`] bits:
/// nine words compared at once, where the columns' own values cost several
/// times as much on every row. Absent fields are zero (the decoder leaves
/// them so); rows that differ only behind an absent field are merely
/// encoded as two stretches.
#[inline(always)]
pub(super) fn same_flow_fields(a: &PacketFields, b: &PacketFields) -> bool {
    let (a, b) = (flow_words(a), flow_words(b));
    a.iter().zip(b).fold(0, |d, (x, y)| d | (x ^ y)) == 0
}

/// Whether a row's tunnel columns come out as a frame without a tunnel's
/// (all null, depth 0), whatever lies behind the absent ones: three
/// bytes, where comparing the fields whole read forty on every row.
#[inline(always)]
fn untunnelled(t: &TunnelFields) -> bool {
    t.has == 0 && t.kind == Tunnel::None && t.depth == 0
}

/// The tunnel fields of every row of a bucket without tunnels: one address,
/// which [`Encoders::same_flow`] compares instead of the tunnel columns.
pub(super) static NO_TUNNEL: TunnelFields = TunnelFields::NONE;

/// The cache lines a record may span (it is 8-byte aligned, not 64).
pub(super) const RECORD_LINES: usize = std::mem::size_of::<PacketFields>().div_ceil(64) + 1;

/// Most rows in a stretch the encoders take at once: 32 KiB of rows, of
/// which the varying columns read mostly the first cache line.
pub(super) const STRETCH_ROWS: usize = 64;

/// The row buffers of a finished writer, for the next one.
pub struct RowBuffers(pub(super) RowBuffer);

/// Buckets by the top bits of the flow hash: grouping a row group by flow
/// then sorts and visits one cache-sized bucket at a time instead of a
/// random walk over a million rows.
const BUCKET_BITS: u32 = 4;
const FLOW_BUCKETS: usize = 1 << BUCKET_BITS;

/// The rows of the row group being gathered.
pub(super) struct RowBuffer {
    pub(super) order: RowOrder,
    /// For [`RowOrder::Flow`], one bucket per top-bits value of the flow
    /// hash and a last one for rows without a flow; otherwise one bucket.
    pub(super) buckets: Vec<Bucket>,
    len: usize,
    /// Earliest and latest `ts_ns` of the rows gathered.
    ts_lo: i64,
    ts_hi: i64,
}

/// Rows in arrival order, with each row's sort key beside it.
pub(super) struct Bucket {
    pub(super) rows: Vec<PacketFields>,
    /// The rows' tunnel fields, beside them, from the first tunnelled row
    /// on (the rows before it get [`TunnelFields::NONE`]); empty while no
    /// row has a tunnel, so untunnelled traffic buffers and reads 128
    /// bytes a row, not 168.
    pub(super) tunnels: Vec<TunnelFields>,
    keys: Vec<u64>,
}

impl Bucket {
    fn with_capacity(rows: usize, prefault: bool) -> Self {
        let keys: Vec<u64> = Vec::with_capacity(rows);
        if prefault {
            populate(keys.as_ptr() as usize, keys.capacity() * 8);
        }
        Bucket {
            rows: huge_vec(rows, prefault),
            tunnels: Vec::new(),
            keys,
        }
    }

    /// Keeps the tunnel fields of the row about to be pushed.
    #[cold]
    fn push_tunnel(&mut self, t: &TunnelFields) {
        self.tunnels.resize(self.rows.len(), TunnelFields::NONE);
        self.tunnels.push(*t);
    }

    /// The bucket's rows in write order, as indices into `order`.
    pub(super) fn sort_into(&mut self, order: &mut Vec<u32>, scratch: &mut Vec<u64>) {
        radix_sort_keys(&mut self.keys, scratch);
        order.clear();
        order.extend(self.keys.iter().map(|k| (*k as u32) & 0x7fff_ffff));
    }
}

impl RowBuffer {
    pub(super) fn new(order: RowOrder, row_group_rows: usize, prefault: bool) -> Self {
        let buckets = match order {
            RowOrder::Arrival => vec![Bucket::with_capacity(row_group_rows, prefault)],
            RowOrder::Flow => {
                // Room for a fair share and then some; skewed traffic grows
                // a bucket past it.
                let share = row_group_rows / FLOW_BUCKETS + row_group_rows / (4 * FLOW_BUCKETS);
                (0..=FLOW_BUCKETS)
                    .map(|_| Bucket::with_capacity(share, prefault))
                    .collect()
            }
        };
        RowBuffer {
            order,
            buckets,
            len: 0,
            ts_lo: i64::MAX,
            ts_hi: i64::MIN,
        }
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub(super) fn push(&mut self, r: &PacketRecord) {
        let (b, key) = match self.order {
            RowOrder::Arrival => (0, 0),
            RowOrder::Flow if r.has & Has::FLOW != 0 => {
                let b = (r.flow_hash >> (32 - BUCKET_BITS)) as usize;
                let dir = r.flow_reversed() as u64;
                (b, (r.flow_hash as u64) << 32 | dir << 31)
            }
            RowOrder::Flow => (FLOW_BUCKETS, 0),
        };
        let bucket = &mut self.buckets[b];
        bucket.keys.push(key | bucket.rows.len() as u64);
        if !bucket.tunnels.is_empty() || !untunnelled(&r.tunnel) {
            bucket.push_tunnel(&r.tunnel);
        }
        bucket.rows.push(r.fields);
        self.len += 1;
        // Kept as rows arrive: a scan at the end would read every row's
        // cache line once more.
        self.ts_lo = self.ts_lo.min(r.ts_ns);
        self.ts_hi = self.ts_hi.max(r.ts_ns);
    }

    pub(super) fn ts_range(&self) -> (i64, i64) {
        (self.ts_lo, self.ts_hi)
    }

    pub(super) fn clear(&mut self) {
        for b in &mut self.buckets {
            b.rows.clear();
            b.tunnels.clear();
            b.keys.clear();
        }
        self.len = 0;
        self.ts_lo = i64::MAX;
        self.ts_hi = i64::MIN;
    }
}

/// Sorts keys of the form `flow_hash << 32 | dir << 31 | row` into flow
/// order: by their upper 33 bits, rows in arrival order within each (the
/// row part rises in arrival order, so sorting whole keys is that order).
///
/// One counting pass on the 11 bits below those all the keys share (a
/// bucket's keys share the flow hash's top bits) groups them by the
/// hash's top bits, keeping arrival order; a group is then nearly always
/// one flow direction, left as it is, or one flow's two directions, split
/// in one pass. Only a group of several flows is sorted. Three radix
/// passes over every key cost three times as much.
pub(super) fn radix_sort_keys(keys: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    const BITS: u32 = 11;
    const RADIX: usize = 1 << BITS;
    if keys.len() < 64 {
        keys.sort_unstable();
        return;
    }
    let first = keys[0];
    let differ = keys.iter().fold(0, |acc, &k| acc | (k ^ first));
    let shift = (64 - differ.leading_zeros()).saturating_sub(BITS).max(31);
    let digit = |k: u64| (k >> shift) as usize & (RADIX - 1);
    let mut starts = [0u32; RADIX + 1];
    for &k in keys.iter() {
        starts[digit(k) + 1] += 1;
    }
    for d in 0..RADIX {
        starts[d + 1] += starts[d];
    }
    scratch.clear();
    scratch.resize(keys.len(), 0);
    let mut at = starts;
    for &k in keys.iter() {
        let d = digit(k);
        scratch[at[d] as usize] = k;
        at[d] += 1;
    }
    std::mem::swap(keys, scratch);
    for d in 0..RADIX {
        let group = &mut keys[starts[d] as usize..starts[d + 1] as usize];
        sort_group(group, scratch);
    }
}

/// Puts a group of keys (in arrival order) into flow order.
fn sort_group(group: &mut [u64], scratch: &mut Vec<u64>) {
    let Some(&first) = group.first() else {
        return;
    };
    if group.iter().all(|&k| k >> 31 == first >> 31) {
        // One flow direction: already in arrival order.
        return;
    }
    if group.iter().all(|&k| k >> 32 == first >> 32) {
        // One flow's two directions: the low end's rows first, each
        // direction's in arrival order.
        scratch.clear();
        scratch.extend(group.iter().filter(|&&k| k & 1 << 31 != 0));
        let mut low = 0;
        for i in 0..group.len() {
            if group[i] & 1 << 31 == 0 {
                group[low] = group[i];
                low += 1;
            }
        }
        group[low..].copy_from_slice(scratch);
        return;
    }
    group.sort_unstable();
}

/// A vector of fixed initial capacity. On Linux its memory is advised to use
/// transparent huge pages: visiting rows out of order through 4 KiB pages
/// misses the TLB on almost every row.
fn huge_vec(rows: usize, prefault: bool) -> Vec<PacketFields> {
    let v: Vec<PacketFields> = Vec::with_capacity(rows);
    let bytes = v.capacity() * std::mem::size_of::<PacketFields>();
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_ptr() as usize;
        let end = start + bytes;
        let aligned = start.next_multiple_of(HUGE);
        if end > aligned + HUGE {
            let len = (end - aligned) / HUGE * HUGE;
            // SAFETY: the range lies inside the vector's own, not yet touched
            // allocation; MADV_HUGEPAGE only changes how the kernel backs it.
            unsafe {
                libc::madvise(aligned as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
            }
        }
    }
    if prefault {
        populate(v.as_ptr() as usize, bytes);
    }
    v
}

/// Backs `bytes` of fresh allocation at `start` with memory now
/// (MADV_POPULATE_WRITE; a no-op where the kernel lacks it, before 5.14).
fn populate(start: usize, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let from = start.next_multiple_of(PAGE);
        let to = (start + bytes) / PAGE * PAGE;
        if to > from {
            // SAFETY: the range lies inside an allocation we own and have
            // not handed out; populating only backs it, contents stay.
            unsafe {
                libc::madvise(
                    from as *mut libc::c_void,
                    to - from,
                    libc::MADV_POPULATE_WRITE,
                );
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (start, bytes);
}
