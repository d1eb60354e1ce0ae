//! A hint to the CPU's cache, for loops that know which bytes they will
//! read a few steps ahead (records in a sorted order, payloads of the next
//! segments): a miss there costs more than the work done on the bytes.

/// Asks the CPU to bring the `lines` cache lines from `p` on into its
/// cache. It reads nothing and cannot fault, whatever `p` is.
#[inline(always)]
pub fn prefetch<T>(p: *const T, lines: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let p = p as *const i8;
        for i in 0..lines {
            // SAFETY: a prefetch is only a hint to the cache: it reads
            // nothing and never faults, and SSE is part of the x86_64
            // baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64 * i)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, lines);
}
