//! A chunk of whole records and the descriptors of its frames.

use std::ops::{Deref, Range};
use std::sync::Arc;

use wire::LinkType;

use crate::mapguard::GuardedMap;

/// One frame inside a [`Chunk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameDesc {
    /// Arrival time, nanoseconds since the Unix epoch.
    pub ts_ns: i64,
    /// Offset in the trace stream of the record (pcap) or block (pcapng)
    /// that holds the frame.
    pub record_offset: u64,
    /// Where the frame's bytes start in [`Chunk::data`].
    pub start: u32,
    pub cap_len: u32,
    pub wire_len: u32,
    pub link: LinkType,
    /// Index into [`crate::TraceReader::interfaces`].
    pub iface: u16,
}

/// The bytes of a chunk: a buffer of its own, or a stretch of a mapped file.
#[derive(Debug)]
pub enum ChunkData {
    Owned(Vec<u8>),
    Mapped {
        map: Arc<GuardedMap>,
        range: Range<usize>,
    },
}

impl Default for ChunkData {
    fn default() -> Self {
        ChunkData::Owned(Vec::new())
    }
}

impl Deref for ChunkData {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            ChunkData::Owned(v) => v,
            ChunkData::Mapped { map, range } => &map[range.clone()],
        }
    }
}

impl ChunkData {
    /// The buffer, for [`crate::TraceReader::recycle`], if the chunk owns one.
    pub fn into_buffer(mut self) -> Option<Vec<u8>> {
        match &mut self {
            ChunkData::Owned(v) => Some(std::mem::take(v)),
            ChunkData::Mapped { .. } => None,
        }
    }
}

impl Drop for ChunkData {
    /// A mapped chunk's pages are let go of as soon as the chunk is done
    /// with, by whichever thread is last to use it: unmapping a whole
    /// trace at once (~150 ns a page) would otherwise fall on one thread
    /// at the very end of a conversion, when nothing else is left to run.
    fn drop(&mut self) {
        if let ChunkData::Mapped { map, range } = self {
            let page = page_size();
            let start = range.start.next_multiple_of(page);
            let end = range.end / page * page;
            if end > start {
                // SAFETY: the map is read-only and shared, so dropping its
                // pages loses nothing: a later read (a record that spans
                // into a page of the next chunk) maps them again from the
                // page cache.
                let _ = unsafe {
                    map.map_ref().unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        start,
                        end - start,
                    )
                };
            }
        }
    }
}

fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    // SAFETY: sysconf has no preconditions.
    *PAGE.get_or_init(|| match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as usize,
        _ => 4096,
    })
}

/// A run of whole records read from a trace, with one descriptor per frame.
#[derive(Debug, Default)]
pub struct Chunk {
    /// Raw trace bytes; the frames point into it.
    pub data: ChunkData,
    pub frames: Vec<FrameDesc>,
    /// Sequence number of the chunk within its trace, from 0.
    pub seq: u64,
    /// Number of frames in the trace before this chunk.
    pub first_frame: u64,
}

impl Chunk {
    /// The bytes of frame `i`.
    #[inline]
    pub fn frame_bytes(&self, f: &FrameDesc) -> &[u8] {
        &self.data[f.start as usize..f.start as usize + f.cap_len as usize]
    }

    /// Each frame's descriptor with its bytes.
    pub fn iter(&self) -> impl Iterator<Item = (&FrameDesc, &[u8])> {
        self.frames.iter().map(move |f| (f, self.frame_bytes(f)))
    }
}
