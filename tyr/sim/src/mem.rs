// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Simulated physical memory.
//!
//! A GPU reaches system memory by *physical* (bus) address: its MMU walks page tables that
//! hold physical addresses, and then reads and writes data at the physical address the walk
//! produced. The CPU, meanwhile, reaches the same memory through its own mapping. A driver
//! therefore handles two names for every page it gives to the GPU: the device address it
//! writes into descriptors and registers, and the CPU pointer it uses to fill the page (in
//! Linux, what `dma_alloc_coherent` returns as a pair).
//!
//! [`SimMemory`] models that memory for the simulated GPU and is also where a driver's host
//! backend gets its "DMA memory" from. Memory is handed out in *allocations* of one or more
//! physically contiguous 4 KiB page frames, placed in a physical window (by default
//! `0x8000_0000..1 << 40`, the 40 physical-address bits a Mali-G610 reports). Every
//! allocation is its own heap block, aligned to 4 KiB, that never moves while it is live: the
//! CPU pointer returned by [`SimMemory::host_ptr`] stays valid until the allocation is freed,
//! so a page-table library can keep writing descriptors through it while the simulated MMU
//! reads them by physical address.
//!
//! Freed physical addresses are not handed out again until the window wraps around, so a
//! stale physical address left in a page table reads as *unbacked* memory (and the GPU sees a
//! bus fault) instead of silently aliasing a newer allocation.
//!
//! An optional page limit makes allocation fail with [`SimError::OutOfMemory`], to exercise a
//! driver's out-of-memory paths.
//!
//! # Soundness
//!
//! The storage of a frame is an array of [`AtomicU64`]: every byte of it sits inside an
//! `UnsafeCell`, so the memory may be written through any pointer derived from it while
//! shared references to it exist. Blocks are kept as a `Block`, a zeroed heap allocation
//! obtained with `alloc_zeroed` (so that an allocation larger than the host can give fails with
//! [`SimError::OutOfMemory`] instead of aborting, and untouched pages cost nothing), whose data
//! has a stable address and is never reached through a unique (`&mut` or `Box`) reference, so handing out raw pointers into it does not conflict with the simulator's own
//! accesses. The simulator only ever touches the memory with atomic operations; a user of a
//! pointer from [`SimMemory::host_ptr`] must not race with simulator accesses through
//! non-atomic writes, and must stop using the pointer when the allocation is freed (both
//! are the usual obligations of dereferencing a raw pointer, which is `unsafe`). The
//! pointers of [`SimMemory::host_ptr_u64`] are exactly what an `AtomicU64`-based page-table
//! writer needs and are safe to use concurrently with the simulator.
//!
//! # Examples
//!
//! ```
//! use mali_sim::{MemConfig, SimMemory};
//!
//! let mem = SimMemory::new(MemConfig::default());
//! let pa = mem.alloc(2)?; // two contiguous, zeroed pages
//! mem.write_u32(pa.offset(0x1000).unwrap(), 0xdead_beef)?;
//! assert_eq!(mem.read_u32(pa.offset(0x1000).unwrap())?, 0xdead_beef);
//! assert_eq!(mem.free(pa)?, 2);
//! assert!(mem.read_u32(pa).is_err()); // freed memory is unbacked
//! # Ok::<(), mali_sim::SimError>(())
//! ```

use core::alloc::Layout;
use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::SimError;

/// Size of a page frame.
pub const PAGE_SIZE: usize = 4096;
/// log2 of [`PAGE_SIZE`].
pub const PAGE_SHIFT: u32 = 12;

const WORDS_PER_PAGE: usize = PAGE_SIZE / 8;

/// A physical (bus) address as the GPU sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PhysAddr(pub u64);

impl PhysAddr {
    /// The raw address.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// `self + bytes`, or `None` on overflow.
    ///
    /// # Examples
    ///
    /// ```
    /// use mali_sim::PhysAddr;
    ///
    /// assert_eq!(PhysAddr(0x1000).offset(0x10), Some(PhysAddr(0x1010)));
    /// assert_eq!(PhysAddr(u64::MAX).offset(1), None);
    /// ```
    pub const fn offset(self, bytes: u64) -> Option<PhysAddr> {
        match self.0.checked_add(bytes) {
            Some(a) => Some(PhysAddr(a)),
            None => None,
        }
    }

    /// Whether the address is a multiple of `align` (a power of two).
    pub const fn is_aligned(self, align: u64) -> bool {
        self.0 & (align.wrapping_sub(1)) == 0
    }
}

impl fmt::Display for PhysAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Where the physical window lies and how much of it may be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemConfig {
    /// First physical address handed out (page aligned).
    pub base: PhysAddr,
    /// End of the window (exclusive, page aligned).
    pub end: PhysAddr,
    /// Maximum number of pages allocated at once; `None` for no limit.
    pub page_limit: Option<usize>,
}

impl Default for MemConfig {
    fn default() -> Self {
        MemConfig {
            base: PhysAddr(0x8000_0000),
            end: PhysAddr(1 << 40),
            page_limit: None,
        }
    }
}

/// One 4 KiB page frame.
#[repr(C, align(4096))]
struct Frame([AtomicU64; WORDS_PER_PAGE]);

/// The frames of one allocation: zeroed heap memory owned through a raw pointer.
///
/// # Invariants
///
/// `ptr` is an allocation of the global allocator with layout `Layout::array::<Frame>(len)`,
/// `len > 0`, zero-initialised (a valid `[Frame]`: atomics of value 0) and only ever accessed
/// through shared references.
struct Block {
    ptr: NonNull<Frame>,
    len: usize,
}

// SAFETY: `Block` owns its frames, which are atomics (`Send + Sync`).
unsafe impl Send for Block {}
// SAFETY: Shared access only reads through `&[Frame]`, whose words are atomics.
unsafe impl Sync for Block {}

impl Block {
    /// `pages` zeroed frames; [`SimError::OutOfMemory`] if the host cannot provide them.
    fn zeroed(pages: usize) -> Result<Self, SimError> {
        let layout = Layout::array::<Frame>(pages).map_err(|_| SimError::OutOfMemory)?;
        if pages == 0 {
            return Err(SimError::InvalidSize);
        }
        // SAFETY: The layout has a non-zero size (`pages > 0`, frames are 4 KiB).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw.cast::<Frame>()).ok_or(SimError::OutOfMemory)?;
        // INVARIANT: Allocated with that layout, zeroed, `len > 0`.
        Ok(Block { ptr, len: pages })
    }
}

impl core::ops::Deref for Block {
    type Target = [Frame];

    fn deref(&self) -> &[Frame] {
        // SAFETY: `ptr` holds `len` initialised frames for as long as `self` lives, accessed only
        // through shared references (type invariant).
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // The layout was valid when the block was made, so it still is.
        if let Ok(layout) = Layout::array::<Frame>(self.len) {
            // SAFETY: `ptr` was allocated with this layout (type invariant) and is not used after.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }
}

/// The allocation table.
///
/// # Invariants
///
/// Blocks are disjoint, page aligned and lie inside `[base, end)`; `used_pages` is the sum of
/// their lengths in pages.
struct Inner {
    blocks: BTreeMap<u64, Block>,
    cursor: u64,
    used_pages: usize,
    page_limit: Option<usize>,
    allocations: u64,
}

/// Simulated physical memory: page-frame allocations with stable host addresses.
///
/// See the [module documentation](self).
pub struct SimMemory {
    base: u64,
    end: u64,
    inner: Mutex<Inner>,
}

impl fmt::Debug for SimMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("SimMemory")
            .field("base", &PhysAddr(self.base))
            .field("end", &PhysAddr(self.end))
            .field("allocations", &inner.blocks.len())
            .field("used_pages", &inner.used_pages)
            .field("page_limit", &inner.page_limit)
            .finish()
    }
}

impl SimMemory {
    /// Creates an empty memory. A window that is not page aligned is shrunk to whole pages.
    pub fn new(cfg: MemConfig) -> Self {
        let mask = !(PAGE_SIZE as u64 - 1);
        let base = cfg.base.0.saturating_add(PAGE_SIZE as u64 - 1) & mask;
        let end = (cfg.end.0 & mask).max(base);
        SimMemory {
            base,
            end,
            inner: Mutex::new(Inner {
                blocks: BTreeMap::new(),
                cursor: base,
                used_pages: 0,
                page_limit: cfg.page_limit,
                allocations: 0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while holding the lock, so a poisoned lock still holds a consistent
        // table.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Allocates `pages` physically contiguous, zeroed page frames.
    ///
    /// Fails with [`SimError::InvalidSize`] for zero pages or more than the window holds,
    /// and with [`SimError::OutOfMemory`] when the page limit would be exceeded or no free
    /// range is large enough. Nothing changes on failure.
    pub fn alloc(&self, pages: usize) -> Result<PhysAddr, SimError> {
        let window_pages = (self.end - self.base) >> PAGE_SHIFT;
        if pages == 0 || pages as u64 > window_pages {
            return Err(SimError::InvalidSize);
        }
        let size = (pages as u64) << PAGE_SHIFT;
        let mut inner = self.lock();
        if let Some(limit) = inner.page_limit {
            if inner.used_pages.saturating_add(pages) > limit {
                return Err(SimError::OutOfMemory);
            }
        }
        let start = self
            .find_free(&inner, inner.cursor, size)
            .or_else(|| self.find_free(&inner, self.base, size))
            .ok_or(SimError::OutOfMemory)?;
        let frames = Block::zeroed(pages)?;
        inner.blocks.insert(start, frames);
        inner.used_pages += pages;
        inner.allocations += 1;
        inner.cursor = start + size;
        Ok(PhysAddr(start))
    }

    /// Allocates one zeroed page frame.
    pub fn alloc_page(&self) -> Result<PhysAddr, SimError> {
        self.alloc(1)
    }

    /// First-fit search for `size` free bytes at or after `from`.
    fn find_free(&self, inner: &Inner, from: u64, size: u64) -> Option<u64> {
        let mut candidate = from;
        // Skip past a block that contains `from`.
        if let Some((&start, block)) = inner.blocks.range(..=candidate).next_back() {
            candidate = candidate.max(start + block_bytes(block));
        }
        for (&start, block) in inner.blocks.range(candidate..) {
            if start.checked_sub(candidate)? >= size {
                break;
            }
            candidate = start + block_bytes(block);
        }
        let end = candidate.checked_add(size)?;
        (end <= self.end).then_some(candidate)
    }

    /// Frees the allocation starting at `pa`; returns its size in pages.
    pub fn free(&self, pa: PhysAddr) -> Result<usize, SimError> {
        let mut inner = self.lock();
        let block = inner
            .blocks
            .remove(&pa.0)
            .ok_or(SimError::NotAllocated(pa))?;
        inner.used_pages -= block.len();
        Ok(block.len())
    }

    /// Sets (or with `None` removes) the page limit. Lowering it below the current use does
    /// not free anything; it only makes further allocations fail.
    pub fn set_page_limit(&self, limit: Option<usize>) {
        self.lock().page_limit = limit;
    }

    /// The current page limit.
    pub fn page_limit(&self) -> Option<usize> {
        self.lock().page_limit
    }

    /// Number of pages currently allocated.
    pub fn allocated_pages(&self) -> usize {
        self.lock().used_pages
    }

    /// Number of live allocations.
    pub fn live_allocations(&self) -> usize {
        self.lock().blocks.len()
    }

    /// Number of successful allocations since creation.
    pub fn total_allocations(&self) -> u64 {
        self.lock().allocations
    }

    /// The allocation containing `pa`: its start and size in pages.
    pub fn allocation_of(&self, pa: PhysAddr) -> Option<(PhysAddr, usize)> {
        let inner = self.lock();
        let (&start, block) = inner.blocks.range(..=pa.0).next_back()?;
        (pa.0 < start + block_bytes(block)).then_some((PhysAddr(start), block.len()))
    }

    /// Whether `[pa, pa + len)` lies inside one live allocation.
    pub fn is_backed(&self, pa: PhysAddr, len: usize) -> bool {
        self.with_range(pa, len, |_, _| ()).is_ok()
    }

    /// Runs `f` on the block holding `[pa, pa + len)` and the byte offset of `pa` in it.
    fn with_range<R>(
        &self,
        pa: PhysAddr,
        len: usize,
        f: impl FnOnce(&[Frame], usize) -> R,
    ) -> Result<R, SimError> {
        let inner = self.lock();
        let (&start, block) = inner
            .blocks
            .range(..=pa.0)
            .next_back()
            .ok_or(SimError::BadAddress(pa))?;
        let off = pa.0 - start;
        let end = off
            .checked_add(len as u64)
            .ok_or(SimError::BadAddress(pa))?;
        if end > block_bytes(block) || off >= block_bytes(block) {
            return Err(SimError::BadAddress(pa));
        }
        Ok(f(block, off as usize))
    }

    /// Reads `buf.len()` bytes at `pa` (which may be unaligned, inside one allocation).
    pub fn read_bytes(&self, pa: PhysAddr, buf: &mut [u8]) -> Result<(), SimError> {
        self.with_range(pa, buf.len(), |frames, off| {
            // One atomic load per word touched.
            let mut i = 0;
            while i < buf.len() {
                let at = off + i;
                let lane = at % 8;
                let n = (8 - lane).min(buf.len() - i);
                let w = word(frames, at).load(Ordering::Relaxed).to_ne_bytes();
                buf[i..i + n].copy_from_slice(&w[lane..lane + n]);
                i += n;
            }
        })
    }

    /// Writes `data` at `pa` (which may be unaligned, inside one allocation).
    pub fn write_bytes(&self, pa: PhysAddr, data: &[u8]) -> Result<(), SimError> {
        self.with_range(pa, data.len(), |frames, off| {
            let mut i = 0;
            while i < data.len() {
                let at = off + i;
                let lane = at % 8;
                let n = (8 - lane).min(data.len() - i);
                let mut mask = [0u8; 8];
                let mut val = [0u8; 8];
                mask[lane..lane + n].fill(0xff);
                val[lane..lane + n].copy_from_slice(&data[i..i + n]);
                let (mask, val) = (u64::from_ne_bytes(mask), u64::from_ne_bytes(val));
                let _ = word(frames, at).fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                    Some((w & !mask) | val)
                });
                i += n;
            }
        })
    }

    /// Reads a little-endian `u32` at a 4-byte aligned `pa`.
    pub fn read_u32(&self, pa: PhysAddr) -> Result<u32, SimError> {
        if !pa.is_aligned(4) {
            return Err(SimError::Misaligned(pa));
        }
        let mut b = [0; 4];
        self.read_bytes(pa, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Writes a little-endian `u32` at a 4-byte aligned `pa`.
    pub fn write_u32(&self, pa: PhysAddr, v: u32) -> Result<(), SimError> {
        if !pa.is_aligned(4) {
            return Err(SimError::Misaligned(pa));
        }
        self.write_bytes(pa, &v.to_le_bytes())
    }

    /// Reads a little-endian `u64` at an 8-byte aligned `pa` in one atomic access (as the
    /// MMU reads a descriptor).
    pub fn read_u64(&self, pa: PhysAddr) -> Result<u64, SimError> {
        if !pa.is_aligned(8) {
            return Err(SimError::Misaligned(pa));
        }
        self.with_range(pa, 8, |frames, off| {
            u64::from_le_bytes(word(frames, off).load(Ordering::Relaxed).to_ne_bytes())
        })
    }

    /// Writes a little-endian `u64` at an 8-byte aligned `pa` in one atomic access.
    pub fn write_u64(&self, pa: PhysAddr, v: u64) -> Result<(), SimError> {
        if !pa.is_aligned(8) {
            return Err(SimError::Misaligned(pa));
        }
        self.with_range(pa, 8, |frames, off| {
            word(frames, off).store(u64::from_ne_bytes(v.to_le_bytes()), Ordering::Relaxed)
        })
    }

    /// Atomically adds `v` to the little-endian `u64` at an 8-byte aligned `pa` and returns
    /// the previous value (a GPU atomic).
    pub fn fetch_add_u64(&self, pa: PhysAddr, v: u64) -> Result<u64, SimError> {
        if !pa.is_aligned(8) {
            return Err(SimError::Misaligned(pa));
        }
        self.with_range(pa, 8, |frames, off| {
            let w = word(frames, off);
            let old = w
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| {
                    let cur = u64::from_le_bytes(x.to_ne_bytes());
                    Some(u64::from_ne_bytes(cur.wrapping_add(v).to_le_bytes()))
                })
                .unwrap_or_else(|x| x);
            u64::from_le_bytes(old.to_ne_bytes())
        })
    }

    /// The CPU address of `[pa, pa + len)`, which must lie inside one allocation.
    ///
    /// The pointer stays valid until the allocation is freed (see the module's soundness
    /// notes); `len` may be zero, which still requires `pa` to be inside an allocation.
    pub fn host_ptr(&self, pa: PhysAddr, len: usize) -> Result<NonNull<u8>, SimError> {
        self.with_range(pa, len, |frames, off| {
            // Derived from the whole block so the pointer may reach all of `[pa, pa + len)`;
            // `off` is in bounds, so the result is inside the heap block and never null.
            let base = NonNull::from(frames).cast::<u8>();
            NonNull::new(base.as_ptr().wrapping_add(off))
        })?
        .ok_or(SimError::BadAddress(pa))
    }

    /// The CPU address of the 8-byte aligned word at `pa`, as an atomic (what a page-table
    /// writer needs for a descriptor).
    ///
    /// Like [`host_ptr`](Self::host_ptr), the pointer may reach every following word of the
    /// same allocation (a whole table, say) and stays valid until the allocation is freed.
    pub fn host_ptr_u64(&self, pa: PhysAddr) -> Result<NonNull<AtomicU64>, SimError> {
        if !pa.is_aligned(8) {
            return Err(SimError::Misaligned(pa));
        }
        Ok(self.host_ptr(pa, 8)?.cast::<AtomicU64>())
    }
}

fn block_bytes(block: &[Frame]) -> u64 {
    (block.len() as u64) << PAGE_SHIFT
}

/// The word holding byte `off` of a block (`off` is in bounds).
fn word(frames: &[Frame], off: usize) -> &AtomicU64 {
    &frames[off / PAGE_SIZE].0[(off % PAGE_SIZE) / 8]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem() -> SimMemory {
        SimMemory::new(MemConfig::default())
    }

    #[test]
    fn alloc_is_zeroed_aligned_and_contiguous() {
        let m = mem();
        let a = m.alloc(3).unwrap();
        assert!(a.is_aligned(PAGE_SIZE as u64));
        assert_eq!(m.allocated_pages(), 3);
        let mut buf = [0xffu8; 16];
        m.read_bytes(a.offset(3 * 4096 - 16).unwrap(), &mut buf)
            .unwrap();
        assert_eq!(buf, [0; 16]);
        assert_eq!(m.allocation_of(a.offset(0x2fff).unwrap()), Some((a, 3)));
        assert_eq!(m.allocation_of(a.offset(0x3000).unwrap()), None);
        let host = m.host_ptr(a, 3 * 4096).unwrap();
        assert_eq!(host.as_ptr() as usize % 4096, 0);
    }

    #[test]
    fn rw_helpers_and_bounds() {
        let m = mem();
        let a = m.alloc(1).unwrap();
        m.write_u64(a.offset(8).unwrap(), 0x1122_3344_5566_7788)
            .unwrap();
        assert_eq!(m.read_u32(a.offset(8).unwrap()).unwrap(), 0x5566_7788);
        assert_eq!(m.read_u32(a.offset(12).unwrap()).unwrap(), 0x1122_3344);
        m.write_bytes(a.offset(9).unwrap(), &[0xaa, 0xbb]).unwrap();
        assert_eq!(
            m.read_u64(a.offset(8).unwrap()).unwrap(),
            0x1122_3344_55bb_aa88
        );
        // Crossing words.
        m.write_bytes(a.offset(6).unwrap(), &[1, 2, 3, 4]).unwrap();
        let mut b = [0; 4];
        m.read_bytes(a.offset(6).unwrap(), &mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4]);
        assert_eq!(
            m.read_u32(a.offset(2).unwrap()),
            Err(SimError::Misaligned(PhysAddr(a.0 + 2)))
        );
        assert_eq!(
            m.read_u64(a.offset(4).unwrap()),
            Err(SimError::Misaligned(PhysAddr(a.0 + 4)))
        );
        let end = a.offset(4096).unwrap();
        assert_eq!(m.read_u32(end), Err(SimError::BadAddress(end)));
        let mut big = [0; 8];
        assert!(m.read_bytes(a.offset(4092).unwrap(), &mut big).is_err());
        // Bytes 8 and 9 now hold 3 and 4.
        assert_eq!(
            m.fetch_add_u64(a.offset(8).unwrap(), 1).unwrap(),
            0x1122_3344_55bb_0403
        );
        assert_eq!(
            m.read_u64(a.offset(8).unwrap()).unwrap(),
            0x1122_3344_55bb_0404
        );
    }

    #[test]
    fn limit_and_free() {
        let m = mem();
        m.set_page_limit(Some(2));
        let a = m.alloc(2).unwrap();
        assert_eq!(m.alloc(1), Err(SimError::OutOfMemory));
        assert_eq!(m.allocated_pages(), 2);
        assert_eq!(m.free(a), Ok(2));
        assert_eq!(m.free(a), Err(SimError::NotAllocated(a)));
        let b = m.alloc(1).unwrap();
        assert_ne!(a, b, "freed addresses are not reused before wrap-around");
        assert_eq!(m.alloc(0), Err(SimError::InvalidSize));
        assert_eq!(m.page_limit(), Some(2));
        assert_eq!(m.live_allocations(), 1);
        assert_eq!(m.total_allocations(), 2);
    }

    #[test]
    fn wraps_around_to_free_holes() {
        let m = SimMemory::new(MemConfig {
            base: PhysAddr(0x10000),
            end: PhysAddr(0x10000 + 4 * 4096),
            page_limit: None,
        });
        let a = m.alloc(1).unwrap();
        let b = m.alloc(2).unwrap();
        let c = m.alloc(1).unwrap();
        assert_eq!((a.0, b.0, c.0), (0x10000, 0x11000, 0x13000));
        assert_eq!(m.alloc(1), Err(SimError::OutOfMemory));
        m.free(b).unwrap();
        assert_eq!(m.alloc(3), Err(SimError::OutOfMemory));
        assert_eq!(m.alloc(2).unwrap(), b);
        assert_eq!(m.alloc(5), Err(SimError::InvalidSize));
    }

    #[test]
    fn host_pointers_see_simulator_writes_and_back() {
        let m = mem();
        let a = m.alloc(1).unwrap();
        let w = m.host_ptr_u64(a.offset(16).unwrap()).unwrap();
        // SAFETY: The allocation is live and `w` points to one of its atomic words.
        let word = unsafe { w.as_ref() };
        word.store(0x42, Ordering::Relaxed);
        assert_eq!(m.read_u64(a.offset(16).unwrap()).unwrap(), 0x42);
        m.write_u32(a.offset(16).unwrap(), 7).unwrap();
        assert_eq!(word.load(Ordering::Relaxed), 7);
        // The word pointer reaches the rest of the allocation, as a table pointer must.
        let table = m.host_ptr_u64(a).unwrap();
        // SAFETY: Word 2 is in bounds of the live allocation `table` points into.
        let w2 = unsafe { table.add(2) };
        // SAFETY: `w2` points to an atomic word of the live allocation.
        let w2 = unsafe { w2.as_ref() };
        assert_eq!(w2.load(Ordering::Relaxed), 7);
        let p = m.host_ptr(a.offset(100).unwrap(), 4).unwrap();
        // SAFETY: In bounds of the live allocation; nothing else accesses it concurrently.
        unsafe { p.as_ptr().write(9) };
        let mut b = [0u8];
        m.read_bytes(a.offset(100).unwrap(), &mut b).unwrap();
        assert_eq!(b, [9]);
        assert!(m.host_ptr(a.offset(4090).unwrap(), 8).is_err());
    }
}
