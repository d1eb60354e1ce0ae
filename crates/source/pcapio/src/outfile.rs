//! A file written in large aligned pieces, for the capture writers.
//!
//! With `direct`, the file is opened with O_DIRECT: the device reads the
//! writer's memory itself and the kernel neither copies it into the page
//! cache nor has to write back and evict those pages later, which on this
//! class of machine is where a buffered writer spends its time (see
//! docs/BENCHMARKS.md). A spool's staging blocks are page-aligned and go
//! to the file as they are ([`OutFile::append_staged`]): only the last
//! few bytes of a block that are not a whole 4 KiB unit wait (copied into
//! the next block's free lead) for the next write. Other pieces (the
//! header, compressed frames) collect in an aligned buffer that goes to
//! the file a whole buffer at a time. Filesystems that refuse O_DIRECT
//! (tmpfs before 6.6, some FUSE) get ordinary writes, and so does tmpfs,
//! where it gains nothing; ordinary writes take large pieces without the
//! buffer. Space is reserved up front with fallocate (the file's size stays
//! what has been written, so a crash never leaves a tail of zeros that
//! would read as records).

use std::alloc::{Layout, alloc, dealloc};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// O_DIRECT needs buffers, offsets and lengths aligned to the device's
/// logical block; 4 KiB covers every common device.
pub const ALIGN: usize = 4096;

/// Pieces at least this large skip the buffer of a file written through
/// the page cache (a staging block is 256 KiB).
const STRAIGHT_WRITE: usize = 64 << 10;

/// Whether `path`'s directory is on tmpfs, where O_DIRECT (accepted since
/// Linux 6.6) saves nothing: the file is memory either way, and buffered
/// files take whole staging blocks without a copy into the aligned buffer.
fn on_tmpfs(path: &Path) -> bool {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs is plain data; zeroed is a valid value.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a valid out pointer for the call.
    unsafe { libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type == libc::TMPFS_MAGIC }
}

/// An aligned, fixed-capacity byte buffer.
pub struct AlignedBuf {
    ptr: *mut u8,
    cap: usize,
    len: usize,
}

// SAFETY: the buffer owns its allocation exclusively.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared references only read.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `cap` bytes (rounded up to whole 4 KiB units), every byte written
    /// now, not on the capture's time.
    pub fn new(cap: usize) -> AlignedBuf {
        let b = AlignedBuf::unwritten(cap);
        // SAFETY: ptr is valid for cap bytes.
        unsafe { std::ptr::write_bytes(b.ptr, 0, b.cap) };
        b
    }

    /// `cap` bytes (rounded up to whole 4 KiB units) with one byte of every
    /// page written: every page is faulted in (not just allocated), without
    /// pushing the whole buffer through the caches.
    pub fn touched(cap: usize) -> AlignedBuf {
        let b = AlignedBuf::unwritten(cap);
        for i in (0..b.cap).step_by(4096) {
            // SAFETY: i < cap; volatile, so that the store is not dropped as
            // one never read.
            unsafe { std::ptr::write_volatile(b.ptr.add(i), 0xa5) };
        }
        b
    }

    fn unwritten(cap: usize) -> AlignedBuf {
        let cap = cap.next_multiple_of(ALIGN).max(ALIGN);
        let layout = Layout::from_size_align(cap, ALIGN).expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        AlignedBuf { ptr, cap, len: 0 }
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes written so far.
    pub fn filled(&self) -> &[u8] {
        self.filled_from(0)
    }

    /// The bytes written so far from `from` on.
    pub fn filled_from(&self, from: usize) -> &[u8] {
        let from = from.min(self.len);
        // SAFETY: the bytes below len are written (`push`, `push_record`,
        // or before `set_len`'s caller reads them).
        unsafe { std::slice::from_raw_parts(self.ptr.add(from), self.len - from) }
    }

    /// Copies as much of `bytes` as fits after the filled part; how much.
    pub fn push(&mut self, bytes: &[u8]) -> usize {
        let n = bytes.len().min(self.cap - self.len);
        // SAFETY: n bytes fit after len.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(self.len), n) };
        self.len += n;
        n
    }

    /// Appends a pcap record header and its frame, which must fit (the
    /// capture path's copy: one bounds check, then two plain copies).
    #[inline]
    pub fn push_record(&mut self, header: &[u8; 16], frame: &[u8]) {
        assert!(self.cap - self.len >= 16 + frame.len(), "record fits");
        // SAFETY: checked above that both fit after len.
        unsafe {
            let at = self.ptr.add(self.len);
            std::ptr::copy_nonoverlapping(header.as_ptr(), at, 16);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), at.add(16), frame.len());
        }
        self.len += 16 + frame.len();
    }

    /// Sets the filled length to `len` (at most the capacity), leaving a
    /// lead of bytes to be written later ([`AlignedBuf::fill_head`]).
    ///
    /// # Safety
    /// The bytes below `len` not written before must be written before
    /// anything reads them.
    pub unsafe fn set_len(&mut self, len: usize) {
        assert!(len <= self.cap);
        self.len = len;
    }

    /// Empties the buffer.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Drops the first `n` bytes, moving the rest to the front.
    fn consume(&mut self, n: usize) {
        // SAFETY: both ranges lie within the first len bytes.
        unsafe { std::ptr::copy(self.ptr.add(n), self.ptr, self.len - n) };
        self.len -= n;
    }

    /// Writes `bytes` at the buffer's start (at most its filled length).
    fn fill_head(&mut self, bytes: &[u8]) {
        assert!(bytes.len() <= self.len);
        // SAFETY: bytes.len() <= len <= cap bytes of our own allocation.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr, bytes.len()) };
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.cap, ALIGN).expect("valid layout");
        // SAFETY: allocated with this layout in `new`.
        unsafe { dealloc(self.ptr, layout) };
    }
}

/// A file being appended to.
pub struct OutFile {
    path: PathBuf,
    file: File,
    direct: bool,
    buf: AlignedBuf,
    /// Bytes in the file (all of them aligned writes when direct).
    on_disk: u64,
    /// Bytes of the buffer's start already copied to the file by
    /// [`OutFile::sync_tail`] (they are written again, aligned, later).
    tail_synced: bool,
    /// Every byte appended, in order: the finished file's digest.
    hasher: util::digest::Hasher,
}

impl OutFile {
    /// Creates (truncating) `path`, mode 0640, with `buffer` bytes of
    /// buffer; `direct` asks for O_DIRECT, `reserve` for space up front.
    pub fn create(
        path: &Path,
        direct: bool,
        buffer: usize,
        reserve: Option<u64>,
    ) -> io::Result<OutFile> {
        OutFile::open(path, direct, buffer, reserve, true)
    }

    /// Opens the existing file `path` to write over it from its start,
    /// keeping the space it has: what lies beyond the bytes written is the
    /// old content until [`OutFile::finish`] (or [`OutFile::drop_stale`])
    /// cuts it off.
    pub fn overwrite(
        path: &Path,
        direct: bool,
        buffer: usize,
        reserve: Option<u64>,
    ) -> io::Result<OutFile> {
        OutFile::open(path, direct, buffer, reserve, false)
    }

    fn open(
        path: &Path,
        direct: bool,
        buffer: usize,
        reserve: Option<u64>,
        fresh: bool,
    ) -> io::Result<OutFile> {
        let open = |flags: i32| {
            OpenOptions::new()
                .write(true)
                .create(fresh)
                .truncate(fresh)
                .mode(0o640)
                .custom_flags(flags)
                .open(path)
        };
        let (file, direct) = if direct && !on_tmpfs(path) {
            match open(libc::O_DIRECT) {
                Ok(f) => (f, true),
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (open(0)?, false),
                Err(e) => return Err(e),
            }
        } else {
            (open(0)?, false)
        };
        if let Some(n) = reserve.filter(|n| *n > 0) {
            // SAFETY: a valid descriptor; failure (no support) is harmless.
            unsafe {
                libc::fallocate(
                    file.as_raw_fd(),
                    libc::FALLOC_FL_KEEP_SIZE,
                    0,
                    n.min(i64::MAX as u64) as libc::off_t,
                )
            };
        }
        Ok(OutFile {
            path: path.to_path_buf(),
            file,
            direct,
            buf: AlignedBuf::new(buffer),
            on_disk: 0,
            tail_synced: false,
            hasher: util::digest::Hasher::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether writes bypass the page cache.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Bytes appended so far.
    pub fn len(&self) -> u64 {
        self.on_disk + self.buf.len as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes already in the file.
    pub fn on_disk(&self) -> u64 {
        self.on_disk
    }

    /// Appends `bytes`, writing whole buffers as they fill. On an error the
    /// file holds exactly `on_disk()` bytes of what was appended.
    pub fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.hasher.update(bytes);
        self.append_unhashed(bytes)
    }

    /// Appends staged blocks, each `(block, lead)`: its bytes from `lead`
    /// on. A block is page-aligned and its first `lead` bytes are free:
    /// where the file's unwritten tail is exactly `lead` bytes long (the
    /// block starts that far past a 4 KiB unit of the file, as a spool lays
    /// its blocks out), the tail goes there and the block is written as it
    /// is, every whole 4 KiB unit of it with no copy, and what is left of
    /// its last unit goes in front of the next block, so that the blocks
    /// go to the file in one vectored write (fewer, larger requests to the
    /// device). Anything else is appended as by [`OutFile::append`]. On an
    /// error the file holds exactly `on_disk()` bytes of what was appended.
    pub fn append_staged(&mut self, blocks: &mut [(&mut AlignedBuf, usize)]) -> io::Result<()> {
        for (b, lead) in blocks.iter() {
            self.hasher.update(b.filled_from(*lead));
        }
        let laid_out = self.direct
            && blocks
                .first()
                .is_some_and(|(_, lead)| *lead == self.buf.len);
        if !laid_out {
            for (b, lead) in blocks.iter() {
                self.append_unhashed(b.filled_from(*lead))?;
            }
            return Ok(());
        }
        let mut tail = self.buf.filled().to_vec();
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(blocks.len());
        let mut total = 0usize;
        for (b, lead) in blocks.iter_mut() {
            if *lead != tail.len() {
                return Err(io::Error::other(
                    "a staged block does not continue the one before it",
                ));
            }
            b.fill_head(&tail);
            let whole = b.len() / ALIGN * ALIGN;
            if whole > 0 {
                iov.push(libc::iovec {
                    iov_base: b.filled().as_ptr() as *mut libc::c_void,
                    iov_len: whole,
                });
                total += whole;
            }
            tail = b.filled()[whole..].to_vec();
        }
        if let Err(e) = self.write_vectored_at(&iov, total) {
            let _ = self.file.set_len(self.on_disk);
            return Err(e);
        }
        self.on_disk += total as u64;
        self.buf.clear();
        self.buf.push(&tail);
        self.tail_synced = false;
        Ok(())
    }

    /// Writes the `total` bytes of `iov` at the file's end, all of them.
    fn write_vectored_at(&self, iov: &[libc::iovec], total: usize) -> io::Result<()> {
        let mut done = 0usize;
        while done < total {
            // The segments not yet (wholly) written, the first cut to what
            // is left of it.
            let mut skip = done;
            let mut rest: Vec<libc::iovec> = Vec::with_capacity(iov.len());
            for v in iov {
                if skip >= v.iov_len {
                    skip -= v.iov_len;
                    continue;
                }
                rest.push(libc::iovec {
                    // SAFETY: skip < iov_len: within the segment.
                    iov_base: unsafe { (v.iov_base as *mut u8).add(skip) } as *mut libc::c_void,
                    iov_len: v.iov_len - skip,
                });
                skip = 0;
            }
            let n = rest.len().min(libc::UIO_MAXIOV as usize) as libc::c_int;
            // SAFETY: every segment points into a live block of ours, of
            // the length given; the kernel only reads them.
            let r = unsafe {
                libc::pwritev(
                    self.file.as_raw_fd(),
                    rest.as_ptr(),
                    n,
                    (self.on_disk + done as u64) as libc::off_t,
                )
            };
            match r {
                r if r > 0 => done += r as usize,
                0 => return Err(io::ErrorKind::WriteZero.into()),
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    fn append_unhashed(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        if !self.direct && bytes.len() >= STRAIGHT_WRITE {
            // Through the page cache a large piece goes to the file as it
            // is: copying it into the buffer first would be one copy more
            // of every byte (and one the capture's core pays for).
            if self.buf.len > 0 {
                self.write_buffer(self.buf.len)?;
            }
            if let Err(e) = self.file.write_all_at(bytes, self.on_disk) {
                let _ = self.file.set_len(self.on_disk);
                return Err(e);
            }
            self.on_disk += bytes.len() as u64;
            self.tail_synced = false;
            return Ok(());
        }
        while !bytes.is_empty() {
            let n = self.buf.push(bytes);
            bytes = &bytes[n..];
            if self.buf.len == self.buf.cap {
                self.write_buffer(self.buf.cap)?;
            }
        }
        Ok(())
    }

    /// Writes the first `n` buffered bytes (aligned when direct).
    fn write_buffer(&mut self, n: usize) -> io::Result<()> {
        let data = &self.buf.filled()[..n];
        if let Err(e) = self.file.write_all_at(data, self.on_disk) {
            // A short write may have put part of the buffer in the file;
            // cut it back to what is whole.
            let _ = self.file.set_len(self.on_disk);
            return Err(e);
        }
        self.on_disk += n as u64;
        self.buf.consume(n);
        self.tail_synced = false;
        Ok(())
    }

    /// Puts everything appended so far into the file (through the page
    /// cache for the unaligned tail), so that a crash loses nothing the
    /// writer has been idle on. The buffer keeps the tail, so that direct
    /// writes stay aligned.
    pub fn sync_tail(&mut self) -> io::Result<()> {
        if self.tail_synced || self.buf.len == 0 {
            return Ok(());
        }
        let whole = self.buf.len / ALIGN * ALIGN;
        if self.direct && whole > 0 {
            self.write_buffer(whole)?;
        }
        if self.buf.len > 0 {
            let tail = self.buf.filled();
            if self.direct {
                let plain = OpenOptions::new().write(true).open(&self.path)?;
                plain.write_all_at(tail, self.on_disk)?;
            } else {
                self.file.write_all_at(tail, self.on_disk)?;
                self.on_disk += tail.len() as u64;
                self.buf.len = 0;
            }
        }
        self.tail_synced = true;
        Ok(())
    }

    /// Writes what is left, trims the file to its length and makes it
    /// durable. Returns the file's length. After an error the file holds
    /// `on_disk()` bytes and can still be cut back and closed.
    pub fn finish(&mut self) -> io::Result<u64> {
        let len = self.len();
        if self.buf.len > 0 {
            let whole = self.buf.len / ALIGN * ALIGN;
            if self.direct && whole > 0 {
                self.write_buffer(whole)?;
            }
            if self.buf.len > 0 {
                if self.direct {
                    // The tail is not a whole block: write it through the
                    // page cache.
                    // SAFETY: a valid descriptor; clearing O_DIRECT.
                    unsafe {
                        let fd = self.file.as_raw_fd();
                        let fl = libc::fcntl(fd, libc::F_GETFL);
                        libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_DIRECT);
                    }
                }
                let tail_len = self.buf.len;
                if let Err(e) = self.file.write_all_at(self.buf.filled(), self.on_disk) {
                    let _ = self.file.set_len(self.on_disk);
                    return Err(e);
                }
                self.on_disk += tail_len as u64;
                self.buf.len = 0;
            }
        }
        // Gives back space reserved beyond the end.
        self.file.set_len(len)?;
        self.file.sync_data()?;
        Ok(len)
    }

    /// The size and digest of everything appended: the file's, once
    /// [`OutFile::finish`] has succeeded (not after a failure cut it back).
    pub fn digest(&self) -> util::digest::FileDigest {
        self.hasher.clone().finish()
    }

    /// Cuts off whatever the file held beyond what has been written to it
    /// (the old content of a file being overwritten).
    pub fn drop_stale(&mut self) -> io::Result<()> {
        self.file.set_len(self.on_disk)
    }

    /// Cuts the file back to `len` bytes (at most what is on disk) after a
    /// failure, drops the buffer, makes it durable and closes it.
    pub fn truncate_and_close(self, len: u64) -> io::Result<u64> {
        let len = len.min(self.on_disk);
        self.file.set_len(len)?;
        self.file.sync_data()?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_exactly_what_was_appended_direct_or_not() {
        let dir = std::env::temp_dir().join(format!("weir-outfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data: Vec<u8> = (0..1_000_003u32).map(|i| (i * 7 % 253) as u8).collect();
        for direct in [false, true] {
            let path = dir.join(format!("f{direct}"));
            let mut f = OutFile::create(&path, direct, 64 << 10, Some(4 << 20)).unwrap();
            // Small pieces through the buffer, and large ones that skip it
            // when not direct, in between each other.
            let mut rest = &data[..];
            for size in [24, 9_999, 262_144, 70_000, 3].iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (piece, more) = rest.split_at((*size).min(rest.len()));
                f.append(piece).unwrap();
                rest = more;
            }
            f.sync_tail().unwrap();
            assert_eq!(
                std::fs::read(&path).unwrap(),
                data,
                "synced tail, direct {direct}"
            );
            f.append(b"more").unwrap();
            assert_eq!(f.finish().unwrap(), data.len() as u64 + 4);
            let back = std::fs::read(&path).unwrap();
            assert_eq!(&back[..data.len()], &data[..]);
            assert_eq!(&back[data.len()..], b"more");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Staged blocks laid out as a spool lays them (each starting as far
    /// past a 4 KiB unit as the file's length), written as they are, with
    /// small pieces and a synced tail in between: the file is every byte in
    /// order and the digest is the file's, direct or not.
    #[test]
    fn staged_blocks_go_to_the_file_in_place() {
        let dir = std::env::temp_dir().join(format!("weir-outfile-st-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let data: Vec<u8> = (0..3_000_017u32).map(|i| (i * 13 % 251) as u8).collect();
        for direct in [false, true] {
            let path = dir.join(format!("s{direct}"));
            let mut f = OutFile::create(&path, direct, 64 << 10, None).unwrap();
            f.append(&data[..24]).unwrap();
            let mut at = 24;
            let mut block = AlignedBuf::touched(264 << 10);
            let mut second = AlignedBuf::touched(264 << 10);
            for (i, size) in [262_000, 100, 4096, 70_001, 8191, 250_000, 5]
                .iter()
                .cycle()
                .enumerate()
            {
                if at == data.len() {
                    break;
                }
                let end = (at + size).min(data.len());
                if i % 5 == 4 {
                    // A piece appended as it is, not staged.
                    f.append(&data[at..end]).unwrap();
                } else {
                    let lead = f.len() as usize % ALIGN;
                    assert_eq!(lead, at % ALIGN);
                    // One block, or the piece cut in two blocks written
                    // together.
                    let cut = at + (end - at) / 2;
                    block.clear();
                    // SAFETY: the lead is written by append_staged.
                    unsafe { block.set_len(lead) };
                    if i % 2 == 0 {
                        block.push(&data[at..end]);
                        f.append_staged(&mut [(&mut block, lead)]).unwrap();
                    } else {
                        block.push(&data[at..cut]);
                        let lead2 = cut % ALIGN;
                        second.clear();
                        // SAFETY: as above.
                        unsafe { second.set_len(lead2) };
                        second.push(&data[cut..end]);
                        f.append_staged(&mut [(&mut block, lead), (&mut second, lead2)])
                            .unwrap();
                    }
                }
                at = end;
                if i % 7 == 3 {
                    f.sync_tail().unwrap();
                    assert_eq!(
                        std::fs::read(&path).unwrap(),
                        &data[..at],
                        "direct {direct}"
                    );
                }
                assert_eq!(f.len(), at as u64);
            }
            let digest = f.digest();
            assert_eq!(f.finish().unwrap(), data.len() as u64);
            assert_eq!(std::fs::read(&path).unwrap(), data, "direct {direct}");
            assert_eq!(digest, util::digest::digest_file(&path).unwrap());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
