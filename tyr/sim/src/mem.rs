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
//! allocation is its own run of frames from a [`FrameAlloc`] (the host's heap with `std`, a
//! kernel's page allocator elsewhere), aligned to 4 KiB, that never moves while it is live: the
//! CPU pointer returned by [`SimMemory::host_ptr`] stays valid until the allocation is freed,
//! so a page-table library can keep writing descriptors through it while the simulated MMU
//! reads them by physical address.
//!
//! Freed physical addresses are not handed out again until the window wraps around, so a
//! stale physical address left in a page table reads as *unbacked* memory (and the GPU sees a
//! bus fault) instead of silently aliasing a newer allocation.
//!
//! The allocation table (which physical range belongs to which run) is a sorted array kept in
//! frames of the same allocator, doubled when full, behind a lock of a [`LockFamily`]:
//! memory is allocated by the driver's threads while the GPU reads it from an executor's.
//! Every way of running out (an optional page limit, which exercises a driver's
//! out-of-memory paths; a window with no free range large enough; the allocator refusing the
//! frames or a larger table) fails with [`SimError::OutOfMemory`] and changes nothing.
//!
//! Memory can also be placed by someone else: [`SimMemory::attach`] puts a run of frames that
//! its owner allocated at the physical address the owner chose, and [`SimMemory::detach`]
//! gives it back. A kernel backend does this with every block the DMA API hands its driver, at
//! the block's DMA address, so the simulated GPU reaches exactly the memory the driver was
//! given for it. Attached runs count against the page limit; the memory never frees them.
//!
//! The GPU reaches memory through the [`PhysMemory`] trait, which `SimMemory` implements
//! (and so do references and, with `std`, `Arc`s to it).
//!
//! # Soundness
//!
//! The storage of a run is viewed as an array of [`AtomicU64`]: every byte of it sits inside
//! an `UnsafeCell`, so the memory may be written through any pointer derived from it while
//! shared references to it exist. A run is zeroed when the allocator hands it out (a valid
//! array of atomics of value 0), has a stable address, and is never reached through a unique
//! (`&mut` or `Box`) reference, so handing out raw pointers into it does not conflict with the
//! simulator's own accesses. The simulator only ever touches the memory with atomic
//! operations; a user of a pointer from [`SimMemory::host_ptr`] must not race with simulator
//! accesses through non-atomic writes, and must stop using the pointer when the allocation is
//! freed (both are the usual obligations of dereferencing a raw pointer, which is `unsafe`).
//! The pointers of [`SimMemory::host_ptr_u64`] are exactly what an `AtomicU64`-based
//! page-table writer needs and are safe to use concurrently with the simulator.
//!
//! # Examples
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use mali_sim::{MemConfig, SimMemory};
//!
//! let mem = SimMemory::new(MemConfig::default());
//! let pa = mem.alloc(2)?; // two contiguous, zeroed pages
//! mem.write_u32(pa.offset(0x1000).unwrap(), 0xdead_beef)?;
//! assert_eq!(mem.read_u32(pa.offset(0x1000).unwrap())?, 0xdead_beef);
//! assert_eq!(mem.free(pa)?, 2);
//! assert!(mem.read_u32(pa).is_err()); // freed memory is unbacked
//! # }
//! # Ok::<(), mali_sim::SimError>(())
//! ```

use core::fmt;
use core::mem::MaybeUninit;
use core::num::NonZeroUsize;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use super::frames::FrameAlloc;
pub use super::frames::{PAGE_SHIFT, PAGE_SIZE};
use super::lock::{Lock, LockFamily};
use super::SimError;

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

/// Physical memory as the GPU's bus reaches it: what the MMU's walker and the GPU's data
/// accesses need.
///
/// [`SimMemory`] implements it; so do shared references to an implementation and, with
/// `std`, `Arc`s of one, so a [`Gpu`](crate::Gpu) may own its memory, share it or borrow it.
pub trait PhysMemory {
    /// Reads `buf.len()` bytes at `pa`; [`SimError::BadAddress`] where nothing is backed.
    fn read_bytes(&self, pa: PhysAddr, buf: &mut [u8]) -> Result<(), SimError>;
    /// Writes `data` at `pa`.
    fn write_bytes(&self, pa: PhysAddr, data: &[u8]) -> Result<(), SimError>;
    /// Reads the little-endian `u64` at an 8-byte aligned `pa` in one atomic access.
    fn read_u64(&self, pa: PhysAddr) -> Result<u64, SimError>;
    /// Atomically adds `v` to the little-endian `u64` at an 8-byte aligned `pa`, returning
    /// the old value.
    fn fetch_add_u64(&self, pa: PhysAddr, v: u64) -> Result<u64, SimError>;
}

impl<A: FrameAlloc, L: LockFamily> PhysMemory for SimMemory<A, L> {
    fn read_bytes(&self, pa: PhysAddr, buf: &mut [u8]) -> Result<(), SimError> {
        SimMemory::read_bytes(self, pa, buf)
    }

    fn write_bytes(&self, pa: PhysAddr, data: &[u8]) -> Result<(), SimError> {
        SimMemory::write_bytes(self, pa, data)
    }

    fn read_u64(&self, pa: PhysAddr) -> Result<u64, SimError> {
        SimMemory::read_u64(self, pa)
    }

    fn fetch_add_u64(&self, pa: PhysAddr, v: u64) -> Result<u64, SimError> {
        SimMemory::fetch_add_u64(self, pa, v)
    }
}

impl<M: PhysMemory + ?Sized> PhysMemory for &M {
    fn read_bytes(&self, pa: PhysAddr, buf: &mut [u8]) -> Result<(), SimError> {
        (**self).read_bytes(pa, buf)
    }

    fn write_bytes(&self, pa: PhysAddr, data: &[u8]) -> Result<(), SimError> {
        (**self).write_bytes(pa, data)
    }

    fn read_u64(&self, pa: PhysAddr) -> Result<u64, SimError> {
        (**self).read_u64(pa)
    }

    fn fetch_add_u64(&self, pa: PhysAddr, v: u64) -> Result<u64, SimError> {
        (**self).fetch_add_u64(pa, v)
    }
}

#[cfg(feature = "std")]
impl<M: PhysMemory + ?Sized> PhysMemory for std::sync::Arc<M> {
    fn read_bytes(&self, pa: PhysAddr, buf: &mut [u8]) -> Result<(), SimError> {
        (**self).read_bytes(pa, buf)
    }

    fn write_bytes(&self, pa: PhysAddr, data: &[u8]) -> Result<(), SimError> {
        (**self).write_bytes(pa, data)
    }

    fn read_u64(&self, pa: PhysAddr) -> Result<u64, SimError> {
        (**self).read_u64(pa)
    }

    fn fetch_add_u64(&self, pa: PhysAddr, v: u64) -> Result<u64, SimError> {
        (**self).fetch_add_u64(pa, v)
    }
}

/// One allocation: a run of frames at a physical address, from the memory's allocator
/// (`owned`) or attached by its owner ([`SimMemory::attach`]).
#[derive(Clone, Copy)]
struct Block {
    start: u64,
    pages: NonZeroUsize,
    frames: NonNull<u8>,
    owned: bool,
}

impl Block {
    fn bytes(&self) -> u64 {
        (self.pages.get() as u64) << PAGE_SHIFT
    }

    fn end(&self) -> u64 {
        self.start + self.bytes()
    }

    /// The block's storage as words.
    ///
    /// # Safety
    ///
    /// `frames` is a live run of `pages` frames from the memory's allocator (the invariant of
    /// [`Table`] for its blocks) that stays live while the returned slice is used.
    unsafe fn words<'a>(&self) -> &'a [AtomicU64] {
        // SAFETY: The run is `pages * PAGE_SIZE` bytes, page aligned, zero-initialised or
        // written only through atomics since, so it is a valid `[AtomicU64]`; it is only ever
        // reached through shared references and raw pointers (see the module's soundness
        // notes), and it stays live as long as the caller promised.
        unsafe {
            core::slice::from_raw_parts(
                self.frames.as_ptr().cast::<AtomicU64>(),
                self.pages.get() * WORDS_PER_PAGE,
            )
        }
    }
}

/// Blocks per page of table storage.
const BLOCKS_PER_PAGE: usize = PAGE_SIZE / core::mem::size_of::<Block>();

/// The allocation table: the live blocks, sorted by address, in frames of the allocator.
///
/// # Invariants
///
/// - `store` is `None` and `cap == 0`, or `store` is `Some((ptr, pages))` with `ptr` a live run
///   of `pages` frames of the memory's allocator and `cap == pages * BLOCKS_PER_PAGE`;
/// - `len <= cap` and the first `len` slots hold blocks, sorted by `start`, disjoint, page
///   aligned, inside the memory's window; an `owned` block owns a live run of its `pages`
///   frames of the memory's allocator, an attached one names a run its owner keeps live until
///   it is detached or the memory is dropped;
/// - `used_pages` is the sum of their sizes in pages.
struct Table {
    store: Option<(NonNull<Block>, NonZeroUsize)>,
    cap: usize,
    len: usize,
    cursor: u64,
    used_pages: usize,
    page_limit: Option<usize>,
    allocations: u64,
}

// SAFETY: The table owns its storage and the runs of its blocks (type invariant); moving it to
// another thread moves that ownership, and the runs' bytes are atomics.
unsafe impl Send for Table {}

impl Table {
    fn blocks(&self) -> &[Block] {
        match self.store {
            // SAFETY: The first `len` slots of the live storage hold blocks (type invariant).
            Some((ptr, _)) => unsafe { core::slice::from_raw_parts(ptr.as_ptr(), self.len) },
            None => &[],
        }
    }

    /// Index of the block containing `pa`.
    fn containing(&self, pa: u64) -> Option<usize> {
        let blocks = self.blocks();
        let i = blocks.partition_point(|b| b.start <= pa).checked_sub(1)?;
        (pa < blocks[i].end()).then_some(i)
    }

    /// Makes room for one more block; [`SimError::OutOfMemory`] when the allocator cannot
    /// provide a larger table (the table is unchanged then).
    fn reserve_one<A: FrameAlloc>(&mut self, alloc: &A) -> Result<(), SimError> {
        if self.len < self.cap {
            return Ok(());
        }
        let pages = match self.store {
            Some((_, pages)) => pages.checked_mul(NonZeroUsize::MIN.saturating_add(1)),
            None => Some(NonZeroUsize::MIN),
        }
        .ok_or(SimError::OutOfMemory)?;
        let cap = pages
            .get()
            .checked_mul(BLOCKS_PER_PAGE)
            .ok_or(SimError::OutOfMemory)?;
        let new = alloc.alloc_zeroed(pages)?.cast::<Block>();
        if let Some((old, old_pages)) = self.store {
            // SAFETY: The old storage holds `len` blocks, the new one has room for
            // `cap > len` blocks (page aligned, so aligned for `Block`), and they are distinct
            // live runs.
            unsafe { core::ptr::copy_nonoverlapping(old.as_ptr(), new.as_ptr(), self.len) };
            // SAFETY: The old storage came from this allocator with `old_pages` pages (type
            // invariant), and is not used after.
            unsafe { alloc.free(old.cast(), old_pages) };
        }
        // INVARIANT: The blocks were moved into a live run of `pages` frames.
        self.store = Some((new, pages));
        self.cap = cap;
        Ok(())
    }

    /// Every slot of the storage (empty without storage).
    fn slots(&mut self) -> &mut [MaybeUninit<Block>] {
        match self.store {
            // SAFETY: The live storage of `pages` frames holds `cap` slots (type invariant),
            // is aligned for `Block` (page aligned) and owned by the table, which `&mut self`
            // borrows; `MaybeUninit` accepts any contents.
            Some((ptr, _)) => unsafe {
                core::slice::from_raw_parts_mut(ptr.as_ptr().cast::<MaybeUninit<Block>>(), self.cap)
            },
            None => &mut [],
        }
    }

    /// Inserts `block` at `at`, keeping the order; fails as [`reserve_one`](Self::reserve_one).
    fn insert<A: FrameAlloc>(
        &mut self,
        at: usize,
        block: Block,
        alloc: &A,
    ) -> Result<(), SimError> {
        self.reserve_one(alloc)?;
        let len = self.len;
        let at = at.min(len);
        let slots = self.slots();
        if len >= slots.len() {
            return Err(SimError::OutOfMemory);
        }
        // The blocks from `at` move up one slot and `block` fills the gap.
        slots.copy_within(at..len, at + 1);
        slots[at].write(block);
        // INVARIANT: The first `len + 1` slots hold blocks; the caller keeps the order,
        // disjointness and page count.
        self.len += 1;
        Ok(())
    }

    /// Removes and returns the block at `at` (`None` if `at >= len`).
    fn remove(&mut self, at: usize) -> Option<Block> {
        let block = *self.blocks().get(at)?;
        let len = self.len;
        // The blocks after `at` move down one slot.
        self.slots().copy_within(at + 1..len, at);
        // INVARIANT: The first `len - 1` slots hold the remaining blocks, in order; the caller
        // fixes the page count.
        self.len -= 1;
        Some(block)
    }

    /// Frees every owned block and the storage, and forgets the attached blocks.
    fn release<A: FrameAlloc>(&mut self, alloc: &A) {
        while let Some(b) = self.remove(self.len.wrapping_sub(1)) {
            if b.owned {
                // SAFETY: The block owned this run of the allocator (type invariant) and was
                // just removed from the table: nothing reaches it any more.
                unsafe { alloc.free(b.frames, b.pages) };
            }
        }
        if let Some((ptr, pages)) = self.store.take() {
            // SAFETY: The storage came from this allocator with `pages` pages and is not used
            // after.
            unsafe { alloc.free(ptr.cast(), pages) };
        }
        // INVARIANT: No storage, no blocks.
        self.cap = 0;
        self.used_pages = 0;
    }
}

/// Simulated physical memory: page-frame allocations with stable host addresses.
///
/// Frames come from the allocator `A` ([`StdFrames`](crate::StdFrames) by default with
/// `std`), and the allocation table is behind a lock of the family `L`
/// ([`StdLocks`](crate::StdLocks) by default). See the [module documentation](self).
pub struct SimMemory<
    #[cfg(feature = "std")] A: FrameAlloc = crate::StdFrames,
    #[cfg(not(feature = "std"))] A: FrameAlloc,
    #[cfg(feature = "std")] L: LockFamily = crate::StdLocks,
    #[cfg(not(feature = "std"))] L: LockFamily,
> {
    base: u64,
    end: u64,
    alloc: A,
    inner: L::Lock<Table>,
}

impl<A: FrameAlloc, L: LockFamily> fmt::Debug for SimMemory<A, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (len, used, limit) = self.inner.with(|t| (t.len, t.used_pages, t.page_limit));
        f.debug_struct("SimMemory")
            .field("base", &PhysAddr(self.base))
            .field("end", &PhysAddr(self.end))
            .field("allocations", &len)
            .field("used_pages", &used)
            .field("page_limit", &limit)
            .finish()
    }
}

impl<A: FrameAlloc, L: LockFamily> Drop for SimMemory<A, L> {
    fn drop(&mut self) {
        let alloc = &self.alloc;
        self.inner.with(|t| t.release(alloc));
    }
}

#[cfg(feature = "std")]
impl SimMemory {
    /// Creates an empty memory over the host's allocator. A window that is not page aligned is
    /// shrunk to whole pages.
    pub fn new(cfg: MemConfig) -> Self {
        let mask = !(PAGE_SIZE as u64 - 1);
        let base = cfg.base.0.saturating_add(PAGE_SIZE as u64 - 1) & mask;
        SimMemory {
            base,
            end: (cfg.end.0 & mask).max(base),
            alloc: crate::StdFrames,
            inner: crate::lock::StdMutex::new(Table::new(base, cfg.page_limit)),
        }
    }
}

impl Table {
    const fn new(base: u64, page_limit: Option<usize>) -> Self {
        Table {
            store: None,
            cap: 0,
            len: 0,
            cursor: base,
            used_pages: 0,
            page_limit,
            allocations: 0,
        }
    }
}

impl<A: FrameAlloc, L: LockFamily> SimMemory<A, L> {
    /// Creates an empty memory whose frames come from `alloc`. A window that is not page
    /// aligned is shrunk to whole pages. Fails only if the lock cannot be made.
    pub fn with_alloc(cfg: MemConfig, alloc: A) -> Result<Self, SimError> {
        let mask = !(PAGE_SIZE as u64 - 1);
        let base = cfg.base.0.saturating_add(PAGE_SIZE as u64 - 1) & mask;
        Ok(SimMemory {
            base,
            end: (cfg.end.0 & mask).max(base),
            alloc,
            inner: L::Lock::new(Table::new(base, cfg.page_limit))?,
        })
    }

    /// The allocator the frames come from.
    pub fn allocator(&self) -> &A {
        &self.alloc
    }

    /// Allocates `pages` physically contiguous, zeroed page frames.
    ///
    /// Fails with [`SimError::InvalidSize`] for zero pages or more than the window holds,
    /// and with [`SimError::OutOfMemory`] when the page limit would be exceeded, no free
    /// range is large enough, or the allocator cannot provide the frames (or room in the
    /// allocation table). Nothing changes on failure.
    pub fn alloc(&self, pages: usize) -> Result<PhysAddr, SimError> {
        let window_pages = (self.end - self.base) >> PAGE_SHIFT;
        let n = NonZeroUsize::new(pages).ok_or(SimError::InvalidSize)?;
        if pages as u64 > window_pages {
            return Err(SimError::InvalidSize);
        }
        let size = (pages as u64) << PAGE_SHIFT;
        let alloc = &self.alloc;
        self.inner.with(|t| {
            if let Some(limit) = t.page_limit {
                if t.used_pages.saturating_add(pages) > limit {
                    return Err(SimError::OutOfMemory);
                }
            }
            let start = self
                .find_free(t, t.cursor, size)
                .or_else(|| self.find_free(t, self.base, size))
                .ok_or(SimError::OutOfMemory)?;
            let frames = alloc.alloc_zeroed(n)?;
            let at = t.blocks().partition_point(|b| b.start < start);
            let block = Block {
                start,
                pages: n,
                frames,
                owned: true,
            };
            if let Err(e) = t.insert(at, block, alloc) {
                // SAFETY: Just allocated with `n` pages and never handed out.
                unsafe { alloc.free(frames, n) };
                return Err(e);
            }
            t.used_pages += pages;
            t.allocations += 1;
            t.cursor = start + size;
            Ok(PhysAddr(start))
        })
    }

    /// Allocates one zeroed page frame.
    pub fn alloc_page(&self) -> Result<PhysAddr, SimError> {
        self.alloc(1)
    }

    /// First-fit search for `size` free bytes at or after `from`.
    fn find_free(&self, t: &Table, from: u64, size: u64) -> Option<u64> {
        let blocks = t.blocks();
        let mut candidate = from;
        let i = blocks.partition_point(|b| b.start <= candidate);
        // Skip past a block that contains `from`.
        if let Some(b) = i.checked_sub(1).map(|j| &blocks[j]) {
            candidate = candidate.max(b.end());
        }
        for b in &blocks[i..] {
            if b.start.checked_sub(candidate)? >= size {
                break;
            }
            candidate = b.end();
        }
        let end = candidate.checked_add(size)?;
        (end <= self.end).then_some(candidate)
    }

    /// Frees the allocation starting at `pa`; returns its size in pages.
    ///
    /// Fails with [`SimError::NotAllocated`] unless `pa` starts an allocation of
    /// [`alloc`](Self::alloc) (attached memory goes with [`detach`](Self::detach)).
    pub fn free(&self, pa: PhysAddr) -> Result<usize, SimError> {
        let alloc = &self.alloc;
        self.inner.with(|t| {
            let at = t
                .containing(pa.0)
                .filter(|&i| t.blocks()[i].start == pa.0 && t.blocks()[i].owned)
                .ok_or(SimError::NotAllocated(pa))?;
            let block = t.remove(at).ok_or(SimError::NotAllocated(pa))?;
            t.used_pages -= block.pages.get();
            // SAFETY: The block owned this run of the allocator and was just removed from the
            // table, so the simulator no longer reaches it; host pointers into it end here
            // (the documented contract of `host_ptr`).
            unsafe { alloc.free(block.frames, block.pages) };
            Ok(block.pages.get())
        })
    }

    /// Places `pages` frames that the caller owns at physical address `pa`, so that the GPU
    /// reaches them there: memory whose bus address someone else chose, as the DMA API chooses
    /// it in a kernel. The frames count against the page limit like allocated ones.
    ///
    /// Fails, changing nothing, with [`SimError::Misaligned`] if `pa` is not page aligned,
    /// [`SimError::InvalidSize`] for zero pages or a range outside the window,
    /// [`SimError::Occupied`] if the range overlaps a live allocation, and
    /// [`SimError::OutOfMemory`] past the page limit or when the allocation table cannot grow.
    ///
    /// # Safety
    ///
    /// `frames` is valid for reads and writes of `pages * PAGE_SIZE` bytes, 8-byte aligned,
    /// and stays so until [`detach`](Self::detach) returns it or the memory is dropped.
    /// While attached it is reached only through atomic accesses or raw pointers (never a
    /// `&mut` or non-atomic reference), as every run of this memory is (see the module's
    /// soundness notes).
    pub unsafe fn attach(
        &self,
        pa: PhysAddr,
        frames: NonNull<u8>,
        pages: usize,
    ) -> Result<(), SimError> {
        if !pa.is_aligned(PAGE_SIZE as u64) {
            return Err(SimError::Misaligned(pa));
        }
        let n = NonZeroUsize::new(pages).ok_or(SimError::InvalidSize)?;
        let end = (pages as u64)
            .checked_mul(PAGE_SIZE as u64)
            .and_then(|size| pa.0.checked_add(size))
            .ok_or(SimError::InvalidSize)?;
        if pa.0 < self.base || end > self.end {
            return Err(SimError::InvalidSize);
        }
        let alloc = &self.alloc;
        self.inner.with(|t| {
            let at = t.blocks().partition_point(|b| b.start < pa.0);
            let prev_overlaps = at
                .checked_sub(1)
                .is_some_and(|i| t.blocks()[i].end() > pa.0);
            let next_overlaps = t.blocks().get(at).is_some_and(|b| b.start < end);
            if prev_overlaps || next_overlaps {
                return Err(SimError::Occupied(pa));
            }
            if let Some(limit) = t.page_limit {
                if t.used_pages.saturating_add(pages) > limit {
                    return Err(SimError::OutOfMemory);
                }
            }
            let block = Block {
                start: pa.0,
                pages: n,
                frames,
                owned: false,
            };
            t.insert(at, block, alloc)?;
            t.used_pages += pages;
            t.allocations += 1;
            Ok(())
        })
    }

    /// Takes the frames attached at `pa` out of the memory and hands them back with their
    /// size in pages; the GPU no longer reaches them (a later access there is a bus fault).
    ///
    /// Fails with [`SimError::NotAllocated`] unless `pa` starts attached memory.
    pub fn detach(&self, pa: PhysAddr) -> Result<(NonNull<u8>, usize), SimError> {
        self.inner.with(|t| {
            let at = t
                .containing(pa.0)
                .filter(|&i| t.blocks()[i].start == pa.0 && !t.blocks()[i].owned)
                .ok_or(SimError::NotAllocated(pa))?;
            let block = t.remove(at).ok_or(SimError::NotAllocated(pa))?;
            t.used_pages -= block.pages.get();
            Ok((block.frames, block.pages.get()))
        })
    }

    /// Detaches every attached run, calling `f` with each run's address, frames and size in
    /// pages (what the owner needs to free it); allocated memory stays. `f` runs with the
    /// allocation table locked and must not call back into this memory.
    pub fn detach_all(&self, mut f: impl FnMut(PhysAddr, NonNull<u8>, usize)) {
        self.inner.with(|t| {
            let mut i = 0;
            while let Some(b) = t.blocks().get(i).copied() {
                if b.owned {
                    i += 1;
                    continue;
                }
                let _ = t.remove(i);
                t.used_pages -= b.pages.get();
                f(PhysAddr(b.start), b.frames, b.pages.get());
            }
        })
    }

    /// Sets (or with `None` removes) the page limit. Lowering it below the current use does
    /// not free anything; it only makes further allocations fail.
    pub fn set_page_limit(&self, limit: Option<usize>) {
        self.inner.with(|t| t.page_limit = limit);
    }

    /// The current page limit.
    pub fn page_limit(&self) -> Option<usize> {
        self.inner.with(|t| t.page_limit)
    }

    /// Number of pages currently allocated.
    pub fn allocated_pages(&self) -> usize {
        self.inner.with(|t| t.used_pages)
    }

    /// Number of live allocations.
    pub fn live_allocations(&self) -> usize {
        self.inner.with(|t| t.len)
    }

    /// Number of successful allocations since creation.
    pub fn total_allocations(&self) -> u64 {
        self.inner.with(|t| t.allocations)
    }

    /// The allocation containing `pa`: its start and size in pages.
    pub fn allocation_of(&self, pa: PhysAddr) -> Option<(PhysAddr, usize)> {
        self.inner.with(|t| {
            let b = t.blocks()[t.containing(pa.0)?];
            Some((PhysAddr(b.start), b.pages.get()))
        })
    }

    /// Whether `[pa, pa + len)` lies inside one live allocation.
    pub fn is_backed(&self, pa: PhysAddr, len: usize) -> bool {
        self.with_range(pa, len, |_, _, _| ()).is_ok()
    }

    /// Runs `f` on the block holding `[pa, pa + len)`, its words and the byte offset of `pa`
    /// in it, with the table locked (so the block stays live).
    fn with_range<R>(
        &self,
        pa: PhysAddr,
        len: usize,
        f: impl FnOnce(&Block, &[AtomicU64], usize) -> R,
    ) -> Result<R, SimError> {
        self.inner.with(|t| {
            let b = t
                .containing(pa.0)
                .map(|i| &t.blocks()[i])
                .ok_or(SimError::BadAddress(pa))?;
            let off = pa.0 - b.start;
            let end = off
                .checked_add(len as u64)
                .ok_or(SimError::BadAddress(pa))?;
            if end > b.bytes() {
                return Err(SimError::BadAddress(pa));
            }
            // SAFETY: `b` is a block of the table, whose run is live (type invariant) while the
            // table is locked, which lasts until `f` returns.
            let words = unsafe { b.words() };
            Ok(f(b, words, off as usize))
        })
    }

    /// Reads `buf.len()` bytes at `pa` (which may be unaligned, inside one allocation).
    pub fn read_bytes(&self, pa: PhysAddr, buf: &mut [u8]) -> Result<(), SimError> {
        self.with_range(pa, buf.len(), |_, words, off| {
            // One atomic load per word touched.
            let mut i = 0;
            while i < buf.len() {
                let at = off + i;
                let lane = at % 8;
                let n = (8 - lane).min(buf.len() - i);
                let w = word(words, at).load(Ordering::Relaxed).to_ne_bytes();
                buf[i..i + n].copy_from_slice(&w[lane..lane + n]);
                i += n;
            }
        })
    }

    /// Writes `data` at `pa` (which may be unaligned, inside one allocation).
    pub fn write_bytes(&self, pa: PhysAddr, data: &[u8]) -> Result<(), SimError> {
        self.with_range(pa, data.len(), |_, words, off| {
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
                let _ = word(words, at).fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
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
        self.with_range(pa, 8, |_, words, off| {
            u64::from_le_bytes(word(words, off).load(Ordering::Relaxed).to_ne_bytes())
        })
    }

    /// Writes a little-endian `u64` at an 8-byte aligned `pa` in one atomic access.
    pub fn write_u64(&self, pa: PhysAddr, v: u64) -> Result<(), SimError> {
        if !pa.is_aligned(8) {
            return Err(SimError::Misaligned(pa));
        }
        self.with_range(pa, 8, |_, words, off| {
            word(words, off).store(u64::from_ne_bytes(v.to_le_bytes()), Ordering::Relaxed)
        })
    }

    /// Atomically adds `v` to the little-endian `u64` at an 8-byte aligned `pa` and returns
    /// the previous value (a GPU atomic).
    pub fn fetch_add_u64(&self, pa: PhysAddr, v: u64) -> Result<u64, SimError> {
        if !pa.is_aligned(8) {
            return Err(SimError::Misaligned(pa));
        }
        self.with_range(pa, 8, |_, words, off| {
            let w = word(words, off);
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
        self.with_range(pa, len, |b, _, off| {
            // Derived from the run's own pointer, so it may reach all of `[pa, pa + len)`;
            // `off` is in bounds, so the result is inside the run and never null.
            NonNull::new(b.frames.as_ptr().wrapping_add(off))
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

/// The word holding byte `off` of a block's words (`off` is in bounds).
fn word(words: &[AtomicU64], off: usize) -> &AtomicU64 {
    &words[off / 8]
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::walk::WalkConfig;
    use core::sync::atomic::AtomicUsize;

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

    /// Host frames that run out on demand, counting what is live.
    #[derive(Default)]
    struct Flaky {
        /// Allocations that still succeed; `usize::MAX` for all of them.
        budget: AtomicUsize,
        live_runs: AtomicUsize,
        live_pages: AtomicUsize,
    }

    impl Flaky {
        fn with_budget(n: usize) -> Self {
            let f = Flaky::default();
            f.budget.store(n, Ordering::Relaxed);
            f
        }
    }

    // SAFETY: Forwards to `StdFrames`, which provides the guarantees; failing is allowed.
    unsafe impl FrameAlloc for Flaky {
        fn alloc_zeroed(&self, pages: NonZeroUsize) -> Result<NonNull<u8>, SimError> {
            let take = |b: usize| b.checked_sub(1);
            if self
                .budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, take)
                .is_err()
            {
                return Err(SimError::OutOfMemory);
            }
            let p = crate::StdFrames.alloc_zeroed(pages)?;
            self.live_runs.fetch_add(1, Ordering::Relaxed);
            self.live_pages.fetch_add(pages.get(), Ordering::Relaxed);
            Ok(p)
        }

        unsafe fn free(&self, frames: NonNull<u8>, pages: NonZeroUsize) {
            self.live_runs.fetch_sub(1, Ordering::Relaxed);
            self.live_pages.fetch_sub(pages.get(), Ordering::Relaxed);
            // SAFETY: The caller's guarantees; the run came from `StdFrames`.
            unsafe { crate::StdFrames.free(frames, pages) };
        }
    }

    type FlakyMemory<'a> = SimMemory<&'a Flaky, crate::StdLocks>;

    #[test]
    fn an_allocator_that_runs_out_makes_alloc_fail_and_changes_nothing() {
        // Two runs: the allocation table's first page, and one block of frames.
        let frames = Flaky::with_budget(2);
        let m = FlakyMemory::with_alloc(MemConfig::default(), &frames).unwrap();
        let a = m.alloc(2).unwrap();
        m.write_u64(a, 7).unwrap();
        assert_eq!(frames.live_runs.load(Ordering::Relaxed), 2);
        assert_eq!(m.alloc(1), Err(SimError::OutOfMemory));
        assert_eq!(m.alloc_page(), Err(SimError::OutOfMemory));
        assert_eq!((m.allocated_pages(), m.live_allocations()), (2, 1));
        assert_eq!(m.total_allocations(), 1);
        assert_eq!(m.read_u64(a), Ok(7));
        // The memory recovers when the allocator does.
        frames.budget.store(1, Ordering::Relaxed);
        let b = m.alloc(1).unwrap();
        assert_eq!(m.allocation_of(b), Some((b, 1)));
        drop(m);
        assert_eq!(
            frames.live_runs.load(Ordering::Relaxed),
            0,
            "everything is given back"
        );
        assert_eq!(frames.live_pages.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_table_that_cannot_grow_gives_the_frames_back() {
        let frames = Flaky::with_budget(usize::MAX);
        let m = FlakyMemory::with_alloc(MemConfig::default(), &frames).unwrap();
        let first: std::vec::Vec<PhysAddr> =
            (0..BLOCKS_PER_PAGE).map(|_| m.alloc(1).unwrap()).collect();
        // The table's page is full: the next block needs a larger table. Its frames are
        // allocated, the table's are refused, and the frames go back.
        frames.budget.store(1, Ordering::Relaxed);
        let (runs, pages) = (
            frames.live_runs.load(Ordering::Relaxed),
            frames.live_pages.load(Ordering::Relaxed),
        );
        assert_eq!(m.alloc(1), Err(SimError::OutOfMemory));
        assert_eq!(
            frames.budget.load(Ordering::Relaxed),
            0,
            "the frames were allocated"
        );
        assert_eq!(frames.live_runs.load(Ordering::Relaxed), runs);
        assert_eq!(frames.live_pages.load(Ordering::Relaxed), pages);
        assert_eq!(m.live_allocations(), BLOCKS_PER_PAGE);
        // With memory again the table doubles, and every block is still found.
        frames.budget.store(usize::MAX, Ordering::Relaxed);
        let last = m.alloc(3).unwrap();
        for (i, pa) in first.iter().enumerate() {
            m.write_u64(*pa, i as u64).unwrap();
        }
        for (i, pa) in first.iter().enumerate().rev() {
            assert_eq!(m.read_u64(*pa), Ok(i as u64));
            assert_eq!(m.free(*pa), Ok(1));
        }
        assert_eq!(
            m.allocation_of(last.offset(0x2fff).unwrap()),
            Some((last, 3))
        );
        assert_eq!((m.live_allocations(), m.allocated_pages()), (1, 3));
        drop(m);
        assert_eq!(frames.live_runs.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_gpu_over_exhausted_memory_reports_errors() {
        use crate::regs::{as_cmd, as_reg, AS_COMMAND, AS_TRANSCFG_LO, AS_TRANSTAB_LO};
        use crate::{AccessError, Config, Gpu};

        // The GPU borrows a memory whose allocator is out of frames after the first table.
        let frames = Flaky::with_budget(2);
        let m = FlakyMemory::with_alloc(MemConfig::default(), &frames).unwrap();
        let root = m.alloc(1).unwrap();
        assert_eq!(m.alloc(1), Err(SimError::OutOfMemory));
        let mut cfg = Config::g610();
        cfg.timings.mmu_command_ns = 0;
        let mut gpu = Gpu::with_memory(cfg, &m);
        gpu.write64(as_reg(1, AS_TRANSTAB_LO), root.0);
        gpu.write64(
            as_reg(1, AS_TRANSCFG_LO),
            WalkConfig::aarch64_4k(0, 48).transcfg,
        );
        gpu.write32(as_reg(1, AS_COMMAND), as_cmd::UPDATE);
        // Nothing is mapped: the GPU faults, nothing panics.
        let mut b = [0; 4];
        let fault = match gpu.gpu_read(1, 0x1000, &mut b) {
            Err(AccessError::Mmu(f)) => f,
            other => panic!("expected an MMU fault, got {other:?}"),
        };
        assert_eq!(fault.kind, crate::FaultKind::Translation { level: 0 });
        assert_eq!(gpu.read32(crate::regs::MMU_IRQ_RAWSTAT) & 0b10, 0b10);
        assert_eq!(gpu.memory().live_allocations(), 1);
    }

    /// A run of `pages` zeroed, page-aligned frames owned by the test (what a DMA allocator
    /// hands an owner), freed with `free_run`.
    fn run(pages: usize) -> NonNull<u8> {
        let layout = std::alloc::Layout::from_size_align(pages * PAGE_SIZE, PAGE_SIZE).unwrap();
        // SAFETY: The layout has a non-zero size.
        NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).unwrap()
    }

    fn free_run(frames: NonNull<u8>, pages: usize) {
        let layout = std::alloc::Layout::from_size_align(pages * PAGE_SIZE, PAGE_SIZE).unwrap();
        // SAFETY: `frames` came from `run(pages)`, that is from `alloc_zeroed(layout)`.
        unsafe { std::alloc::dealloc(frames.as_ptr(), layout) };
    }

    #[test]
    fn attached_memory_is_reached_at_its_address_and_handed_back() {
        let m = SimMemory::new(MemConfig {
            base: PhysAddr(0x1000),
            ..MemConfig::default()
        });
        let frames = run(2);
        let pa = PhysAddr(0x10_0000);
        // SAFETY: The run is the test's, live until it is freed after `detach`.
        unsafe { m.attach(pa, frames, 2) }.unwrap();
        assert_eq!(m.allocated_pages(), 2);
        assert_eq!(m.allocation_of(PhysAddr(0x10_1008)), Some((pa, 2)));
        m.write_u64(PhysAddr(0x10_1008), 0x1122_3344_5566_7788)
            .unwrap();
        // The GPU's write is in the owner's frames, at the same offset.
        let word = frames.as_ptr().wrapping_add(0x1008);
        // SAFETY: Inside the live run, 8-byte aligned; nothing else writes it now.
        let seen = unsafe { word.cast::<u64>().read() };
        assert_eq!(seen, 0x1122_3344_5566_7788);
        assert_eq!(m.host_ptr(PhysAddr(0x10_1008), 8).unwrap().as_ptr(), word);
        // Attached memory is not the memory's to free; allocated memory avoids it.
        assert_eq!(m.free(pa), Err(SimError::NotAllocated(pa)));
        let other = m.alloc(1).unwrap();
        assert!(other.0 + PAGE_SIZE as u64 <= pa.0 || other.0 >= pa.0 + 2 * PAGE_SIZE as u64);
        assert_eq!(m.detach(other), Err(SimError::NotAllocated(other)));
        assert_eq!(
            m.detach(PhysAddr(0x10_1000)),
            Err(SimError::NotAllocated(PhysAddr(0x10_1000)))
        );
        assert_eq!(m.detach(pa), Ok((frames, 2)));
        assert_eq!(m.read_u64(pa), Err(SimError::BadAddress(pa)));
        assert_eq!(m.allocated_pages(), 1);
        free_run(frames, 2);
    }

    #[test]
    fn attaching_refuses_bad_ranges_and_changes_nothing() {
        let m = SimMemory::new(MemConfig {
            base: PhysAddr(0x1000),
            end: PhysAddr(0x40_0000),
            page_limit: Some(3),
        });
        let frames = run(2);
        let at = PhysAddr(0x2000);
        let attach = |pa: PhysAddr, pages: usize| {
            // SAFETY: The run is the test's and outlives the memory's use of it; a failed call
            // keeps nothing, the one that succeeds is detached below before the run is freed.
            unsafe { m.attach(pa, frames, pages) }
        };
        assert_eq!(
            attach(PhysAddr(0x2008), 1),
            Err(SimError::Misaligned(PhysAddr(0x2008)))
        );
        assert_eq!(attach(at, 0), Err(SimError::InvalidSize));
        assert_eq!(attach(PhysAddr(0), 1), Err(SimError::InvalidSize));
        assert_eq!(attach(PhysAddr(0x3f_f000), 2), Err(SimError::InvalidSize));
        assert_eq!(attach(at, usize::MAX), Err(SimError::InvalidSize));
        attach(at, 2).unwrap();
        // Overlapping the start, the end or the whole of it.
        for (pa, pages) in [(0x1000, 2), (0x3000, 1), (0x1000, 3)] {
            assert_eq!(
                attach(PhysAddr(pa), pages),
                Err(SimError::Occupied(PhysAddr(pa)))
            );
        }
        // The page limit counts attached pages: one page is left.
        assert_eq!(attach(PhysAddr(0x8000), 2), Err(SimError::OutOfMemory));
        assert_eq!(m.allocated_pages(), 2);
        assert_eq!(m.live_allocations(), 1);
        let mut seen = std::vec::Vec::new();
        m.detach_all(|pa, f, pages| seen.push((pa, f, pages)));
        assert_eq!(seen, [(at, frames, 2)]);
        assert_eq!(m.live_allocations(), 0);
        free_run(frames, 2);
    }

    #[test]
    fn dropping_the_memory_leaves_attached_frames_to_their_owner() {
        let frames = run(1);
        {
            let m = SimMemory::new(MemConfig::default());
            // SAFETY: The run outlives the memory.
            unsafe { m.attach(PhysAddr(0x8000_0000), frames, 1) }.unwrap();
            m.alloc(1).unwrap();
        }
        // Still the test's: writing and freeing it is fine (Miri checks).
        // SAFETY: A live, page-aligned run of one page.
        unsafe { frames.as_ptr().cast::<u64>().write(1) };
        free_run(frames, 1);
    }

    #[test]
    fn threads_racing_attach_detach_alloc_and_free_leave_nothing() {
        const THREADS: usize = 4;
        let rounds = if cfg!(miri) { 4 } else { 200 };
        let m = SimMemory::new(MemConfig {
            base: PhysAddr(0x1000),
            ..MemConfig::default()
        });
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let m = &m;
                s.spawn(move || {
                    // Each thread attaches at an address of its own, far above where the
                    // allocator's cursor gets in these rounds, and allocates and frees beside
                    // it.
                    let pa = PhysAddr(0x1000_0000 * (t as u64 + 1));
                    for i in 0..rounds {
                        let pages = 1 + i % 3;
                        let frames = run(pages);
                        // SAFETY: The run is this thread's until it is freed after `detach`.
                        unsafe { m.attach(pa, frames, pages) }.unwrap();
                        let own = m.alloc(1).unwrap();
                        m.write_u64(pa, i as u64).unwrap();
                        assert_eq!(m.read_u64(pa), Ok(i as u64));
                        assert_eq!(m.free(own), Ok(1));
                        assert_eq!(m.detach(pa), Ok((frames, pages)));
                        free_run(frames, pages);
                    }
                });
            }
        });
        assert_eq!(m.live_allocations(), 0);
        assert_eq!(m.allocated_pages(), 0);
        assert_eq!(m.total_allocations(), (2 * THREADS * rounds) as u64);
    }
}
