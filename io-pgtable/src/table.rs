// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The page table: map, unmap, translate.
//!
//! [`PageTable`] owns a tree of tables obtained from a [`TableAlloc`]. Mapping walks from the
//! start-level table down to the level whose leaf size is the requested page size, creating
//! missing tables on the way, and writes one leaf per page. Unmapping walks to the same level
//! and clears leaves; a table descriptor met at that level is removed with its whole
//! subtree. Blocks are never split: unmapping part of a block is refused.
//!
//! # Semantics shared with `io-pgtable-arm.c`
//!
//! - [`PageTable::map_pages`] and [`PageTable::unmap_pages`] handle at most the entries of one
//!   table per call and report how many bytes they did; callers loop (or use
//!   [`PageTable::map`] / [`PageTable::unmap`], which loop like the IOMMU core does).
//! - `map_pages` refuses to map over a leaf (`EEXIST`). A table descriptor where a block is to
//!   go is replaced, and its subtable freed (after a walk-cache flush).
//! - New tables are installed with compare-and-swap; when the walker is not coherent, the
//!   descriptor is synced and then tagged with a software bit so later walkers skip the sync.
//! - Unmapping stops at the first empty entry and reports the prefix it cleared.
//! - Tables left empty by unmapping leaves are not freed (only by the replacement above, by
//!   unmapping the covering range at the table's own level, or on drop).
//!
//! # Deliberate differences (stricter input checking)
//!
//! - Misaligned IOVAs or physical addresses are an error ([`Error::Misaligned`]); the C code
//!   masks the low bits silently.
//! - The whole range `iova .. iova + pgsize * pgcount` (and the physical range) is checked
//!   against `ias`/`oas`, not only its start, and nothing is changed when it does not fit.
//! - A table descriptor is replaced by a block only when its subtree maps nothing; otherwise
//!   the call fails with [`Error::Exists`] and changes nothing (the C code would drop the
//!   mappings below it).
//! - `unmap_pages` of part of a block returns [`Error::PartialBlock`] (the C code warns and
//!   returns 0); invalid arguments are errors rather than 0.
//! - `iova_to_phys` of an IOVA outside `ias` is `None` (the C code would index with the
//!   truncated address).

use core::marker::PhantomData;
use core::sync::atomic::{fence, AtomicU64, Ordering};

use crate::config::{Config, Geometry, MAX_LEVELS};
use crate::flush::{FlushOps, Gather, NoFlush};
use crate::format::Format;
use crate::memory::{TableAlloc, TableMem};
use crate::prot::{Prot, Quirks};
use crate::pte;
use crate::Error;

/// An LPAE I/O page table of format `F`, with tables from `A` and TLB callbacks `T`.
///
/// # Invariants
///
/// - `pgd` is a live table of `geo.table_bytes(geo.start_level())` bytes from `alloc`.
/// - Every table descriptor reachable from `pgd` holds the device address of a live table
///   from `alloc` of `geo.granule()` bytes, owned by this page table and reachable from exactly
///   one descriptor. Tables are freed only after their descriptor has been cleared.
/// - All descriptors are accessed atomically, except the leaves written into a new table
///   before its descriptor is installed (nothing else can reach it then).
///
/// # Examples
///
/// ```
/// use io_pgtable::{host::{Granule, HostAllocator}, Arm64LpaeS1, Config, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
///
/// let mem = HostAllocator::new(Granule::Size4K, 16);
/// let mut pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 48, 40), &mem, NoFlush)?;
/// pt.map(0x10_0000, 0x8000_0000, 0x3000, Prot::READ | Prot::WRITE)?;
/// assert_eq!(pt.iova_to_phys(0x10_1234), Some(0x8000_1234));
/// assert_eq!(pt.unmap(0x10_0000, 0x3000, None)?, 0x3000);
/// assert_eq!(pt.iova_to_phys(0x10_1234), None);
/// # Ok::<(), io_pgtable::Error>(())
/// ```
pub struct PageTable<F: Format, A: TableAlloc, T: FlushOps = NoFlush> {
    cfg: Config,
    geo: Geometry,
    pgd: TableMem,
    alloc: A,
    tlb: T,
    _fmt: PhantomData<F>,
}

// SAFETY: The table memory is owned by the page table (type invariant) and only accessed
// atomically; moving the page table to another thread moves that ownership along with `A`
// and `T`, which are `Send`.
unsafe impl<F: Format, A: TableAlloc + Send, T: FlushOps + Send> Send for PageTable<F, A, T> {}

// SAFETY: The safe `&self` methods only read descriptors atomically and call `&self` methods
// of `A` and `T`, which are `Sync`. The `&self` methods that modify the table are `unsafe`
// and their callers guarantee that no concurrent operation touches an overlapping range, so
// no thread frees a table another thread is using; table installation uses compare-and-swap.
unsafe impl<F: Format, A: TableAlloc + Sync, T: FlushOps + Sync> Sync for PageTable<F, A, T> {}

/// The descriptors met by a walk for one IOVA (Linux's `arm_lpae_io_pgtable_walk_data`).
/// `Debug` prints them in hex.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct PteWalk {
    /// Descriptor read at each level; `None` for levels not visited.
    pub ptes: [Option<u64>; 4],
}

impl core::fmt::Debug for PteWalk {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        let p = self.ptes.map(crate::config::Hex);
        f.debug_struct("PteWalk").field("ptes", &p).finish()
    }
}

impl<F: Format, A: TableAlloc, T: FlushOps> PageTable<F, A, T> {
    /// Creates an empty page table.
    ///
    /// The configuration is checked and restricted as `alloc_io_pgtable_ops()` does; the
    /// effective one is [`cfg`](Self::cfg).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if the format cannot use `cfg` or if the walker is not
    /// coherent (`coherent_walk` unset) and `alloc` cannot make writes visible to it
    /// ([`TableAlloc::syncs_for_device`]); [`Error::NoMemory`] if the start-level table
    /// cannot be allocated.
    pub fn new(mut cfg: Config, alloc: A, tlb: T) -> Result<Self, Error> {
        if !cfg.coherent_walk && !alloc.syncs_for_device() {
            return Err(Error::InvalidConfig);
        }
        let geo = F::prepare(&mut cfg)?;
        let pgd = Self::alloc_raw(&alloc, &cfg, geo, geo.start_level())?;
        // Make the empty PGD visible before any base register can point at it.
        fence(Ordering::SeqCst);
        Ok(PageTable {
            cfg,
            geo,
            pgd,
            alloc,
            tlb,
            _fmt: PhantomData,
        })
    }

    /// The effective configuration.
    pub fn cfg(&self) -> &Config {
        &self.cfg
    }

    /// The table geometry (granule, start level, PGD size).
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }

    /// Device address of the start-level table (what a base register points at).
    pub fn root_dev_addr(&self) -> u64 {
        self.pgd.dev
    }

    /// The table allocator.
    pub fn allocator(&self) -> &A {
        &self.alloc
    }

    /// The TLB callbacks.
    pub fn flush_ops(&self) -> &T {
        &self.tlb
    }

    /// Maps `pgcount` physically contiguous pages of `pgsize` bytes at `iova`.
    ///
    /// Returns the number of bytes mapped and the outcome. As in Linux, one call fills at most
    /// the entries of one table, so a successful call may map less than asked: call again for
    /// the rest. On error, the bytes reported are mapped (they are a prefix of the request)
    /// and the caller normally unmaps them.
    ///
    /// Changes become visible to a walker in order; the caller must still invalidate the TLB
    /// if it may hold negative entries.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPageSize`], [`Error::OutOfRange`], [`Error::Misaligned`],
    /// [`Error::InvalidProt`] with nothing changed; [`Error::Exists`] if part of the range is
    /// mapped; [`Error::NoMemory`] when a table cannot be allocated.
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::{host::{Granule, HostAllocator}, Arm64LpaeS1, Config, Error, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
    ///
    /// let mem = HostAllocator::new(Granule::Size4K, 8);
    /// let mut pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 48, 48), &mem, NoFlush)?;
    /// // 600 pages starting 10 pages before a 2M boundary: the first call stops at the table end.
    /// let iova = SZ_2M - 10 * SZ_4K;
    /// let (mapped, res) = pt.map_pages(iova, iova, SZ_4K, 600, Prot::READ);
    /// assert_eq!((mapped, res), (10 * SZ_4K, Ok(())));
    /// // Mapping the same page again fails.
    /// assert_eq!(pt.map_pages(iova, 0, SZ_4K, 1, Prot::READ), (0, Err(Error::Exists)));
    /// # Ok::<(), io_pgtable::Error>(())
    /// ```
    pub fn map_pages(
        &mut self,
        iova: u64,
        paddr: u64,
        pgsize: u64,
        pgcount: usize,
        prot: Prot,
    ) -> (u64, Result<(), Error>) {
        self.map_pages_impl(iova, paddr, pgsize, pgcount, prot)
    }

    /// [`map_pages`](Self::map_pages) through a shared reference, for concurrent updates of
    /// disjoint ranges from several threads (tables are installed with compare-and-swap).
    ///
    /// # Safety
    ///
    /// While this call runs, no other operation on this page table (map, unmap,
    /// `iova_to_phys`, walk) may concern an IOVA range that overlaps
    /// `iova .. iova + pgsize * pgcount`.
    ///
    /// This is enough because a table is only freed by an operation whose own range covers
    /// the table's whole range (unmapping at the table's level, or a block replacing it), so
    /// operations on disjoint ranges never free a table another one is using.
    pub unsafe fn map_pages_shared(
        &self,
        iova: u64,
        paddr: u64,
        pgsize: u64,
        pgcount: usize,
        prot: Prot,
    ) -> (u64, Result<(), Error>) {
        self.map_pages_impl(iova, paddr, pgsize, pgcount, prot)
    }

    /// Unmaps up to `pgcount` pages of `pgsize` bytes at `iova`.
    ///
    /// Returns the bytes unmapped: the cleared prefix, which stops at the first unmapped entry
    /// and at the end of the table (as in Linux; call again for the rest). A table descriptor
    /// at the page-size level is removed with its whole subtree after
    /// [`FlushOps::tlb_flush_walk`]. With a gather that is not
    /// [`queued`](Gather::queued), [`FlushOps::tlb_add_page`] is called for every entry
    /// cleared.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPageSize`] (also for `pgcount == 0`), [`Error::OutOfRange`],
    /// [`Error::Misaligned`], and [`Error::PartialBlock`] if `iova` lies in a larger block;
    /// nothing is changed then.
    pub fn unmap_pages(
        &mut self,
        iova: u64,
        pgsize: u64,
        pgcount: usize,
        gather: Option<&mut Gather>,
    ) -> Result<u64, Error> {
        self.unmap_pages_impl(iova, pgsize, pgcount, gather)
    }

    /// [`unmap_pages`](Self::unmap_pages) through a shared reference.
    ///
    /// # Safety
    ///
    /// The same as for [`map_pages_shared`](Self::map_pages_shared), for the range
    /// `iova .. iova + pgsize * pgcount`.
    pub unsafe fn unmap_pages_shared(
        &self,
        iova: u64,
        pgsize: u64,
        pgcount: usize,
        gather: Option<&mut Gather>,
    ) -> Result<u64, Error> {
        self.unmap_pages_impl(iova, pgsize, pgcount, gather)
    }

    /// Maps `size` bytes at `iova` to `paddr`, choosing the largest page sizes the alignment
    /// allows, as `iommu_map()` does. All or nothing: on error, what this call mapped is
    /// unmapped again.
    ///
    /// # Errors
    ///
    /// [`Error::Misaligned`] if `iova`, `paddr` or `size` is not a multiple of the smallest
    /// page size; otherwise the errors of [`map_pages`](Self::map_pages).
    pub fn map(&mut self, iova: u64, paddr: u64, size: u64, prot: Prot) -> Result<(), Error> {
        let min = self.min_pgsize();
        if (iova | paddr | size) & (min - 1) != 0 {
            return Err(Error::Misaligned);
        }
        let mut done = 0u64;
        let mut cursor = None;
        while done < size {
            let (pgsize, count) = self.pick_pgsize(iova + done, paddr + done, size - done);
            let (mapped, res) =
                self.map_pages_at(iova + done, paddr + done, pgsize, count, prot, &mut cursor);
            done += mapped;
            if let Err(e) = res {
                if done > 0 {
                    // Unmapping what was just mapped cannot fail: it is a valid mapped range.
                    let _ = self.unmap(iova, done, None);
                }
                return Err(e);
            }
        }
        Ok(())
    }

    /// Unmaps up to `size` bytes at `iova`, as `iommu_unmap()` does: page sizes are chosen
    /// from the IOVA's alignment, and the loop stops at the first hole. Returns the bytes
    /// unmapped, which is less than `size` when it stopped early (at a hole, or at a block
    /// that reaches outside the range: call again at the returned offset to learn which).
    ///
    /// # Errors
    ///
    /// Only when nothing was unmapped: [`Error::Misaligned`] if `iova` or `size` is not a
    /// multiple of the smallest page size; [`Error::PartialBlock`] and the argument errors of
    /// [`unmap_pages`](Self::unmap_pages) for the first page.
    pub fn unmap(
        &mut self,
        iova: u64,
        size: u64,
        mut gather: Option<&mut Gather>,
    ) -> Result<u64, Error> {
        let min = self.min_pgsize();
        if (iova | size) & (min - 1) != 0 {
            return Err(Error::Misaligned);
        }
        let mut done = 0u64;
        let mut cursor = None;
        while done < size {
            let (pgsize, count) = self.pick_pgsize(iova + done, iova + done, size - done);
            match self.unmap_pages_at(
                iova + done,
                pgsize,
                count,
                gather.as_deref_mut(),
                &mut cursor,
            ) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(done)
    }

    /// Translates `iova`, or `None` if it is not mapped.
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::{host::{Granule, HostAllocator}, Arm64LpaeS1, Config, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
    ///
    /// let mem = HostAllocator::new(Granule::Size4K, 8);
    /// let mut pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 39, 40), &mem, NoFlush)?;
    /// assert_eq!(pt.iova_to_phys(42), None);
    /// pt.map_pages(SZ_2M, 0x4000_0000, SZ_2M, 1, Prot::WRITE).1?;
    /// assert_eq!(pt.iova_to_phys(SZ_2M + 42), Some(0x4000_0000 + 42));
    /// # Ok::<(), io_pgtable::Error>(())
    /// ```
    pub fn iova_to_phys(&self, iova: u64) -> Option<u64> {
        let (leaf, lvl) = self.lookup(iova, &mut PteWalk::default())?;
        let size = self.geo.block_size(lvl);
        Some(pte::pte_to_paddr(leaf, self.geo.granule_shift()) | (iova & (size - 1)))
    }

    /// The descriptors a walk for `iova` reads, level by level (Linux's `pgtable_walk`).
    pub fn walk_ptes(&self, iova: u64) -> PteWalk {
        let mut w = PteWalk::default();
        let _ = self.lookup(iova, &mut w);
        w
    }

    // ---- internals ----

    fn mali() -> bool {
        F::MALI
    }

    fn coherent(&self) -> bool {
        self.cfg.coherent_walk
    }

    fn min_pgsize(&self) -> u64 {
        1 << self.cfg.pgsize_bitmap.trailing_zeros()
    }

    /// Largest usable page size and how many of them to use, as `iommu_pgsize()` chooses.
    fn pick_pgsize(&self, iova: u64, paddr: u64, size: u64) -> (u64, usize) {
        let merged = iova | paddr;
        let mut sizes = self.cfg.pgsize_bitmap & low_mask_incl(63 - size.leading_zeros());
        if merged != 0 {
            sizes &= low_mask_incl(merged.trailing_zeros());
        }
        // `map`/`unmap` checked alignment to the smallest size, so `sizes` is not empty.
        let idx = 63 - sizes.leading_zeros();
        let pgsize = 1u64 << idx;
        let mut span = size;
        let bigger = self.cfg.pgsize_bitmap & !low_mask_incl(idx);
        if bigger != 0 {
            let next = 1u64 << bigger.trailing_zeros();
            if (iova ^ paddr) & (next - 1) == 0 {
                let to_boundary = next - (merged & (next - 1));
                if to_boundary.saturating_add(next) <= size {
                    span = to_boundary;
                }
            }
        }
        let count = usize::try_from(span >> idx).unwrap_or(usize::MAX);
        (pgsize, count)
    }

    /// Checks that `[iova, iova + len)` is inside the input address space; returns the
    /// IOVA's in-range offset.
    fn check_iova_range(&self, iova: u64, len: u64) -> Result<(), Error> {
        // `ias <= 52` (checked when the geometry was made), so the shifts are in range.
        let ias = self.cfg.ias;
        let (high, low) = (iova >> ias, iova & ((1u64 << ias) - 1));
        let expected_high = if self.cfg.quirks.contains(Quirks::ARM_TTBR1) {
            u64::MAX >> ias
        } else {
            0
        };
        if high != expected_high {
            return Err(Error::OutOfRange);
        }
        match low.checked_add(len) {
            Some(end) if end <= 1u64 << ias => Ok(()),
            _ => Err(Error::OutOfRange),
        }
    }

    fn check_pgsize(&self, pgsize: u64) -> Result<u32, Error> {
        if !pgsize.is_power_of_two() || pgsize & self.cfg.pgsize_bitmap != pgsize {
            return Err(Error::InvalidPageSize);
        }
        self.geo.level_of_size(pgsize).ok_or(Error::InvalidPageSize)
    }

    fn map_pages_impl(
        &self,
        iova: u64,
        paddr: u64,
        pgsize: u64,
        pgcount: usize,
        prot: Prot,
    ) -> (u64, Result<(), Error>) {
        self.map_pages_at(iova, paddr, pgsize, pgcount, prot, &mut NoCursor)
    }

    /// `map_pages`, starting the walk at `cursor` when it covers `iova`, and leaving there
    /// the last table above the leaf level that the walk went through.
    fn map_pages_at<C: Resume>(
        &self,
        iova: u64,
        paddr: u64,
        pgsize: u64,
        pgcount: usize,
        prot: Prot,
        cursor: &mut C,
    ) -> (u64, Result<(), Error>) {
        let leaf_lvl = match self.check_pgsize(pgsize) {
            Ok(l) => l,
            Err(e) => return (0, Err(e)),
        };
        if pgcount == 0 {
            return (0, Ok(()));
        }
        let Some(len) = range_len(pgcount, pgsize) else {
            return (0, Err(Error::OutOfRange));
        };
        if let Err(e) = self.check_iova_range(iova, len) {
            return (0, Err(e));
        }
        match paddr.checked_add(len) {
            Some(end) if end <= 1u64 << self.cfg.oas => {}
            _ => return (0, Err(Error::OutOfRange)),
        }
        if (iova | paddr) & (pgsize - 1) != 0 {
            return (0, Err(Error::Misaligned));
        }
        if !prot.intersects(Prot::READ | Prot::WRITE) {
            return (0, Err(Error::InvalidProt));
        }
        let attrs = pte::prot_to_pte(prot, Self::mali(), self.cfg.quirks);
        let res = self.map_in_one_table(iova, paddr, pgsize, pgcount, attrs, leaf_lvl, cursor);
        // Order every descriptor write before anything this thread does next (such as the
        // register write that starts a walk of the new range, whose MMIO accessor orders
        // memory against device accesses as the kernel's `writel` does).
        fence(Ordering::Release);
        match res {
            // `n <= pgcount`, so this is at most `len` and cannot wrap.
            Ok(n) => ((n as u64).wrapping_mul(pgsize), Ok(())),
            Err(e) => (0, Err(e)),
        }
    }

    /// Where a walk for `iova` down to `leaf_lvl` starts: the cursor's table if it covers
    /// `iova` and lies above the leaf level, the PGD otherwise.
    fn walk_start<C: Resume>(&self, cursor: &C, iova: u64, leaf_lvl: u32) -> (TableMem, u32) {
        match cursor.get() {
            Some(c) if c.lvl < leaf_lvl && self.covers(&c, iova) => (c.table, c.lvl),
            _ => (self.pgd, self.geo.start_level()),
        }
    }

    /// Whether the cursor's table is the one a walk for `iova` reaches at its level.
    fn covers(&self, c: &Cursor, iova: u64) -> bool {
        if c.lvl == self.geo.start_level() {
            return true;
        }
        // A table at `lvl` spans one entry of the level above.
        let span = self.geo.level_shift(c.lvl - 1);
        (iova ^ c.iova).checked_shr(span).unwrap_or(0) == 0
    }

    /// Walks to `leaf_lvl` and writes up to `pgcount` leaves into one table.
    ///
    /// The walk starts at `cursor` when that covers `iova`, and leaves in it the last table
    /// above the leaf level (see [`Cursor`] for why the cursor's table is still live).
    #[allow(clippy::too_many_arguments)]
    fn map_in_one_table<C: Resume>(
        &self,
        iova: u64,
        paddr: u64,
        pgsize: u64,
        pgcount: usize,
        attrs: u64,
        leaf_lvl: u32,
        cursor: &mut C,
    ) -> Result<usize, Error> {
        let (mut table, mut lvl) = self.walk_start(cursor, iova, leaf_lvl);
        // The common case first: descend through table descriptors that exist and have been
        // made visible to the walker, touching nothing. The loop below does the rest (and
        // everything else: empty slots, races, unsynced descriptors, leaves in the way).
        let synced = if self.coherent() { 0 } else { pte::SW_SYNC };
        while lvl < leaf_lvl {
            // SAFETY: As in the loop below; `lvl` is at or below the start level.
            let v = unsafe { self.slot(table, lvl, iova) }.load(Ordering::Acquire);
            // Above the leaf level (so below level 3) a table descriptor is of type TABLE.
            if v & (pte::TYPE_MASK | synced) != pte::TYPE_TABLE | synced {
                break;
            }
            cursor.set(Cursor { table, lvl, iova });
            table = self.child(v);
            lvl += 1;
        }
        loop {
            let idx = self.geo.index(iova, lvl);
            // SAFETY: `table` is the PGD or was read from a table descriptor of this page
            // table (type invariant: a live table of level `lvl`); it is not freed while
            // `tbl` is used, as only this call could free it and it frees only subtables of
            // the leaf level below, never `table` itself.
            let tbl = unsafe { self.table(table, lvl) };
            if lvl == leaf_lvl {
                // `tbl` has the level's entries, and `idx` indexes it.
                let n = pgcount.min(tbl.len() - idx);
                let slots = &tbl[idx..idx + n];
                self.install_leaves(table, idx, slots, iova, paddr, pgsize, attrs, lvl)?;
                return Ok(n);
            }
            cursor.set(Cursor { table, lvl, iova });
            let slot = &tbl[idx];
            let mut pte_val = slot.load(Ordering::Acquire);
            if pte_val == 0 {
                let new = Self::alloc_raw(&self.alloc, &self.cfg, self.geo, lvl + 1)?;
                if lvl + 1 == leaf_lvl {
                    // A new leaf table: fill it while it is still private, then publish it
                    // whole (the release of `install_table` orders the leaves before it).
                    let first = self.geo.index(iova, leaf_lvl);
                    let n = pgcount.min(self.geo.table_entries(leaf_lvl) - first);
                    let ty = pte::leaf_type(leaf_lvl, Self::mali());
                    // SAFETY: `new` was just allocated with `table_bytes(leaf_lvl)` bytes, so
                    // it holds `first + n <= table_entries(leaf_lvl)` words, and it is not
                    // published yet: nothing else can access it.
                    unsafe { fill_private(new, first, n, attrs | ty, paddr, pgsize) };
                    // SAFETY: `new` is live and holds entries `first .. first + n` (above).
                    unsafe { self.sync_slots(new, first, n) };
                    // SAFETY: `table` is live at `lvl` and `slot` is its entry `idx`.
                    let old = unsafe { self.install_table(table, idx, slot, new) };
                    if old == 0 {
                        return Ok(n);
                    }
                    // Lost the race: the other walker's table is used below.
                    // SAFETY: `new` came from `alloc_table` with this size and was never
                    // published.
                    unsafe { self.alloc.free_table(new, self.geo.table_bytes(lvl + 1)) };
                    pte_val = old;
                    if !pte::is_table(pte_val, lvl) {
                        return Err(Error::Exists);
                    }
                    table = self.child(pte_val);
                    lvl += 1;
                    continue;
                }
                // SAFETY: As above.
                let old = unsafe { self.install_table(table, idx, slot, new) };
                if old == 0 {
                    table = new;
                    lvl += 1;
                    continue;
                }
                // Lost the race: another walker installed something first.
                // SAFETY: `new` came from `alloc_table` with this size and was never published.
                unsafe { self.alloc.free_table(new, self.geo.table_bytes(lvl + 1)) };
                pte_val = old;
            } else if !self.coherent() && pte_val & pte::SW_SYNC == 0 {
                // SAFETY: `table` is live at `lvl` and `idx` indexes it.
                unsafe { self.sync_slots(table, idx, 1) };
            }
            if !pte::is_table(pte_val, lvl) {
                return Err(Error::Exists);
            }
            table = self.child(pte_val);
            lvl += 1;
        }
    }

    /// Writes leaves into `slots` (entries `first ..` of `table`, a live table at `lvl`),
    /// after checking that none of them maps anything and freeing the empty subtables among
    /// them.
    ///
    /// Inlined into the walk for the common case, slots that are all empty: they are read
    /// once and written once. Anything else goes to
    /// [`install_leaves_over`](Self::install_leaves_over), out of line.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn install_leaves(
        &self,
        table: TableMem,
        first: usize,
        slots: &[AtomicU64],
        iova: u64,
        paddr: u64,
        size: u64,
        attrs: u64,
        lvl: u32,
    ) -> Result<(), Error> {
        if slots.iter().any(|s| s.load(Ordering::Acquire) != 0) {
            return self.install_leaves_over(table, first, slots, iova, paddr, size, attrs, lvl);
        }
        // SAFETY: `slots` are entries `first ..` of the live `table` (the caller's guarantee).
        unsafe { self.write_leaves(table, first, slots, paddr, size, attrs, lvl) };
        Ok(())
    }

    /// Writes leaves of `size` bytes each, from `paddr`, into `slots` and syncs them for the
    /// walker (the one loop of [`install_leaves`](Self::install_leaves) and
    /// [`install_leaves_over`](Self::install_leaves_over), inlined into both).
    ///
    /// # Safety
    ///
    /// `slots` are entries `first ..` of the live `table`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn write_leaves(
        &self,
        table: TableMem,
        first: usize,
        slots: &[AtomicU64],
        paddr: u64,
        size: u64,
        attrs: u64,
        lvl: u32,
    ) {
        let ty = pte::leaf_type(lvl, Self::mali());
        let mut pa = paddr;
        for s in slots {
            s.store(attrs | ty | pte::paddr_to_pte(pa), Ordering::Relaxed);
            pa = pa.wrapping_add(size);
        }
        // SAFETY: `slots` are entries `first ..` of the live `table` (the caller's guarantee).
        unsafe { self.sync_slots(table, first, slots.len()) };
    }

    /// [`install_leaves`](Self::install_leaves) where some of `slots` are not empty: fails
    /// if one maps anything, else replaces the (empty) subtables by the leaves.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn install_leaves_over(
        &self,
        table: TableMem,
        first: usize,
        slots: &[AtomicU64],
        iova: u64,
        paddr: u64,
        size: u64,
        attrs: u64,
        lvl: u32,
    ) -> Result<(), Error> {
        let mut subtables = false;
        for s in slots {
            let v = s.load(Ordering::Acquire);
            if v == 0 {
                continue;
            }
            if pte::is_leaf(v, lvl, Self::mali()) {
                return Err(Error::Exists);
            }
            if pte::is_table(v, lvl) {
                if !self.subtree_empty(self.child(v), lvl + 1) {
                    return Err(Error::Exists);
                }
                subtables = true;
            }
        }
        // Empty subtables are replaced by the leaves; in the common case there are none, and
        // the slots are read once and written once.
        if subtables {
            for (i, s) in slots.iter().enumerate() {
                let v = s.load(Ordering::Acquire);
                if pte::is_table(v, lvl) {
                    s.store(0, Ordering::Release);
                    // SAFETY: `slots` are entries `first ..` of the live `table`.
                    unsafe { self.sync_slots(table, first + i, 1) };
                    self.tlb
                        .tlb_flush_walk(iova + i as u64 * size, size, self.geo.granule());
                    self.free_tree(self.child(v), lvl + 1);
                }
            }
        }
        // SAFETY: `slots` are entries `first ..` of the live `table` (the caller's guarantee).
        unsafe { self.write_leaves(table, first, slots, paddr, size, attrs, lvl) };
        Ok(())
    }

    /// Publishes `new` in the empty descriptor `slot`, entry `idx` of `table`; returns the
    /// descriptor's previous value (0 if `new` was installed).
    ///
    /// # Safety
    ///
    /// `table` is a live table of this page table and `slot` is its entry `idx`.
    unsafe fn install_table(
        &self,
        table: TableMem,
        idx: usize,
        slot: &AtomicU64,
        new: TableMem,
    ) -> u64 {
        let mut desc = pte::paddr_to_pte(new.dev) | pte::TYPE_TABLE;
        if self.cfg.quirks.contains(Quirks::ARM_NS) {
            desc |= pte::NSTABLE;
        }
        // Release: the zeroed table is visible to any thread that sees the descriptor.
        let old = match slot.compare_exchange(0, desc, Ordering::AcqRel, Ordering::Acquire) {
            Ok(v) | Err(v) => v,
        };
        if self.coherent() || old & pte::SW_SYNC != 0 {
            return old;
        }
        // Ours or someone else's not yet synced: push it to the device either way.
        // SAFETY: The caller's guarantee.
        unsafe { self.sync_slots(table, idx, 1) };
        if old == 0 {
            slot.store(desc | pte::SW_SYNC, Ordering::Release);
        }
        old
    }

    fn unmap_pages_impl(
        &self,
        iova: u64,
        pgsize: u64,
        pgcount: usize,
        gather: Option<&mut Gather>,
    ) -> Result<u64, Error> {
        self.unmap_pages_at(iova, pgsize, pgcount, gather, &mut NoCursor)
    }

    /// `unmap_pages`, with a walk cursor as [`map_in_one_table`](Self::map_in_one_table)
    /// uses it.
    fn unmap_pages_at<C: Resume>(
        &self,
        iova: u64,
        pgsize: u64,
        pgcount: usize,
        gather: Option<&mut Gather>,
        cursor: &mut C,
    ) -> Result<u64, Error> {
        let leaf_lvl = self.check_pgsize(pgsize)?;
        if pgcount == 0 {
            return Err(Error::InvalidPageSize);
        }
        let len = range_len(pgcount, pgsize).ok_or(Error::OutOfRange)?;
        self.check_iova_range(iova, len)?;
        if iova & (pgsize - 1) != 0 {
            return Err(Error::Misaligned);
        }
        let (mut table, mut lvl) = self.walk_start(cursor, iova, leaf_lvl);
        // Through the table descriptors above the leaf level first, as `map_in_one_table`
        // does; the loop below handles whatever else it meets.
        while lvl < leaf_lvl {
            // SAFETY: As in the loop below; `lvl` is at or below the start level.
            let v = unsafe { self.slot(table, lvl, iova) }.load(Ordering::Acquire);
            if v & pte::TYPE_MASK != pte::TYPE_TABLE {
                break;
            }
            cursor.set(Cursor { table, lvl, iova });
            table = self.child(v);
            lvl += 1;
        }
        loop {
            let idx = self.geo.index(iova, lvl);
            // SAFETY: As in `map_in_one_table`: a live table of this page table at `lvl`,
            // and this call frees only subtables below the leaf level's entries.
            let tbl = unsafe { self.table(table, lvl) };
            let v = tbl[idx].load(Ordering::Acquire);
            if v == 0 {
                return Ok(0);
            }
            if lvl == leaf_lvl {
                let n = pgcount.min(tbl.len() - idx);
                let slots = &tbl[idx..idx + n];
                let leaf_ty = pte::leaf_type(lvl, Self::mali());
                let mut cleared = 0;
                // Whole groups of leaves first: the AND and the OR of a group's descriptors
                // tell whether every one is a leaf (each has all the type bits of a leaf and
                // none has another), and then the group is cleared without a test per entry.
                // A group with an empty entry or a table descriptor is left to the loop below.
                for group in slots.chunks_exact(UNMAP_GROUP) {
                    let (mut all, mut any) = (u64::MAX, 0u64);
                    for s in group {
                        let v = s.load(Ordering::Relaxed);
                        all &= v;
                        any |= v;
                    }
                    if all & leaf_ty != leaf_ty || any & pte::TYPE_MASK & !leaf_ty != 0 {
                        break;
                    }
                    for s in group {
                        s.store(0, Ordering::Relaxed);
                    }
                    cleared += UNMAP_GROUP;
                }
                // Then entry by entry, leaves only: each is read and cleared. A table
                // descriptor (at most a few, where tables were left empty) hands the rest of
                // the range to `unmap_tables_from`, so that this path keeps no batch of
                // tables to free and little to save across calls.
                while let Some(s) = slots.get(cleared) {
                    let v = s.load(Ordering::Relaxed);
                    if v == 0 {
                        break;
                    }
                    if !pte::is_leaf(v, lvl, Self::mali()) {
                        // SAFETY: `slots` are entries `idx ..` of the live `table` at `lvl`.
                        cleared = unsafe {
                            self.unmap_tables_from(table, idx, slots, cleared, iova, pgsize, lvl)
                        };
                        break;
                    }
                    s.store(0, Ordering::Relaxed);
                    cleared += 1;
                }
                // Every clear before whatever this thread does next (the TLB invalidation).
                fence(Ordering::Release);
                if cleared > 0 {
                    // SAFETY: As above.
                    unsafe { self.sync_slots(table, idx, cleared) };
                }
                if let Some(g) = gather {
                    if !g.queued {
                        for j in 0..cleared {
                            self.tlb.tlb_add_page(g, iova + j as u64 * pgsize, pgsize);
                        }
                    }
                }
                // `cleared <= pgcount`: at most `len`, no wrap.
                return Ok((cleared as u64).wrapping_mul(pgsize));
            }
            if pte::is_leaf(v, lvl, Self::mali()) {
                return Err(Error::PartialBlock);
            }
            if !pte::is_table(v, lvl) {
                return Ok(0);
            }
            cursor.set(Cursor { table, lvl, iova });
            table = self.child(v);
            lvl += 1;
        }
    }

    /// The rest of an unmap at the leaf level from `slots[from]`, a descriptor that is not a
    /// leaf: entry by entry, leaves are cleared and table descriptors cleared with their
    /// subtrees freed, up to the first empty entry. Returns how many of `slots` are cleared
    /// then (the `from` before it included).
    ///
    /// # Safety
    ///
    /// `slots` are entries `idx ..` of `table`, a live table of this page table at `lvl`.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn unmap_tables_from(
        &self,
        table: TableMem,
        idx: usize,
        slots: &[AtomicU64],
        from: usize,
        iova: u64,
        pgsize: u64,
        lvl: u32,
    ) -> usize {
        let mut frees = FreeBatch::new();
        let mut cleared = from;
        // (An index range, not `enumerate().skip()`: the kernel build called
        // `Iterator::nth` out of line for the skip.)
        for (j, s) in slots.get(from..).unwrap_or_default().iter().enumerate() {
            let i = from + j;
            let v = s.load(Ordering::Relaxed);
            if v == 0 {
                break;
            }
            if pte::is_leaf(v, lvl, Self::mali()) {
                s.store(0, Ordering::Relaxed);
            } else {
                // Order the subtable's contents before freeing it.
                fence(Ordering::Acquire);
                s.store(0, Ordering::Release);
                // SAFETY: `slots` are entries `idx ..` of the live `table` (the caller's
                // guarantee).
                unsafe { self.sync_slots(table, idx + i, 1) };
                self.tlb
                    .tlb_flush_walk(iova + i as u64 * pgsize, pgsize, self.geo.granule());
                if pte::is_table(v, lvl) {
                    self.free_tree_into(self.child(v), lvl + 1, &mut frees);
                }
            }
            cleared += 1;
        }
        // The tables go back to the allocator in bulk, after every descriptor that pointed
        // to them was cleared and its walk-cache entries flushed.
        self.free_batch(&mut frees);
        cleared
    }

    /// Walks to the leaf for `iova`, recording descriptors; returns the leaf and its level.
    fn lookup(&self, iova: u64, walk: &mut PteWalk) -> Option<(u64, u32)> {
        self.check_iova_range(iova, 1).ok()?;
        let mut table = self.pgd;
        let mut lvl = self.geo.start_level();
        loop {
            // SAFETY: A live table of this page table at `lvl`; a lookup frees nothing, and
            // `&self` excludes concurrent safe modification (the `unsafe` shared modifiers'
            // callers guarantee no overlapping operation frees it).
            let tbl = unsafe { self.table(table, lvl) };
            let v = tbl[self.geo.index(iova, lvl)].load(Ordering::Acquire);
            walk.ptes[lvl as usize] = Some(v);
            if pte::is_leaf(v, lvl, Self::mali()) {
                return Some((v, lvl));
            }
            if !pte::is_table(v, lvl) {
                return None;
            }
            table = self.child(v);
            lvl += 1;
        }
    }

    /// Whether the table at `lvl` maps nothing (only empty entries and empty subtables).
    fn subtree_empty(&self, table: TableMem, lvl: u32) -> bool {
        // SAFETY: `table` comes from a descriptor of this page table: a live table at `lvl`
        // that nothing frees during this read-only scan.
        let tbl = unsafe { self.table(table, lvl) };
        tbl.iter().all(|e| {
            let v = e.load(Ordering::Acquire);
            v == 0 || (pte::is_table(v, lvl) && self.subtree_empty(self.child(v), lvl + 1))
        })
    }

    /// Frees the table at `lvl` and every table below it. The descriptor that pointed to it
    /// must already be cleared.
    fn free_tree(&self, table: TableMem, lvl: u32) {
        let mut frees = FreeBatch::new();
        self.free_tree_into(table, lvl, &mut frees);
        self.free_batch(&mut frees);
    }

    /// [`free_tree`](Self::free_tree), collecting the tables in `frees` (which frees them in
    /// bulk when it fills up; the caller frees the rest with [`free_batch`](Self::free_batch)).
    fn free_tree_into(&self, table: TableMem, lvl: u32, frees: &mut FreeBatch) {
        if lvl < MAX_LEVELS - 1 {
            // SAFETY: A live table of this page table at `lvl`, unreachable from the tree now
            // (its descriptor is cleared); `tbl` is dropped before `table` is freed.
            let tbl = unsafe { self.table(table, lvl) };
            for e in tbl {
                let v = e.load(Ordering::Acquire);
                if pte::is_table(v, lvl) {
                    self.free_tree_into(self.child(v), lvl + 1, frees);
                }
            }
        }
        let size = self.geo.table_bytes(lvl);
        if frees.len == FREE_BATCH || (frees.len > 0 && frees.size != size) {
            self.free_batch(frees);
        }
        if let Some(slot) = frees.tables.get_mut(frees.len) {
            slot.write(table);
            frees.len += 1;
            frees.size = size;
        }
    }

    /// Gives the tables collected in `frees` back to the allocator and empties it.
    fn free_batch(&self, frees: &mut FreeBatch) {
        let n = core::mem::take(&mut frees.len);
        if n == 0 {
            return;
        }
        // SAFETY: The first `n` entries were written by `free_tree_into`.
        let tables = unsafe { &*(core::ptr::from_ref(&frees.tables[..n]) as *const [TableMem]) };
        // SAFETY: Each table came from `alloc_table(frees.size)` of this allocator (type
        // invariant; a batch holds tables of one size), is unreachable (its descriptor was
        // cleared before it was collected) and nothing accesses it any more.
        unsafe { self.alloc.free_tables(tables, frees.size) };
    }

    /// The table a table descriptor points to.
    fn child(&self, desc: u64) -> TableMem {
        let dev = pte::pte_to_paddr(desc, self.geo.granule_shift());
        TableMem {
            cpu: self.alloc.table_cpu(dev),
            dev,
        }
    }

    /// The descriptor of `table` that a walk for `iova` reads at `lvl`: the same as
    /// `self.table(table, lvl)[self.geo.index(iova, lvl)]`, without the bounds check (a
    /// load and a branch per level, and under QEMU each branch ends a translation block).
    ///
    /// # Safety
    ///
    /// As for [`table`](Self::table), and `lvl` is at or below the start level.
    #[inline(always)]
    unsafe fn slot(&self, table: TableMem, lvl: u32, iova: u64) -> &AtomicU64 {
        let idx = self.geo.index(iova, lvl);
        // SAFETY: At or below the start level the index mask is `table_entries(lvl) - 1`
        // (`Geometry::tables`), so `idx` is an entry of the table, which the allocator
        // contract makes `table_bytes(lvl) >= table_entries(lvl) * 8` bytes at `table.cpu`.
        let p = unsafe { table.cpu.as_ptr().add(idx) };
        // SAFETY: `p` is an entry of the table (above), valid for atomic access; the caller
        // keeps the table live while the reference is used.
        unsafe { &*p }
    }

    /// The descriptors of a table.
    ///
    /// # Safety
    ///
    /// `table` is a live table of this page table at level `lvl` (the PGD or a table reached
    /// through its descriptors) and is not freed while the returned slice is in use.
    unsafe fn table(&self, table: TableMem, lvl: u32) -> &[AtomicU64] {
        let len = self.geo.table_entries(lvl);
        // SAFETY: The allocator contract makes `table.cpu` valid for atomic access to
        // `table_bytes(lvl) >= len * 8` bytes, 8-byte aligned, used by nothing else; the caller
        // keeps it live while the slice is used.
        unsafe { core::slice::from_raw_parts(table.cpu.as_ptr(), len) }
    }

    /// Makes entries `first .. first + count` of `table` visible to a walker that does not
    /// snoop the CPU caches (nothing to do for a coherent one).
    ///
    /// # Safety
    ///
    /// `table` is a live table of this page table and holds those entries.
    #[inline(always)]
    unsafe fn sync_slots(&self, table: TableMem, first: usize, count: usize) {
        if !self.coherent() {
            // SAFETY: A live table of this page table came from `alloc_table` of `self.alloc`
            // with a size of at least its entries' bytes (type invariants), and the entries
            // lie in it (the caller's guarantee), so `first * 8 + count * 8` is within it.
            unsafe {
                self.alloc
                    .sync_table_for_device(table, first * 8, count * 8)
            };
        }
    }

    /// Allocates a zeroed table for `lvl`, checking that its device address fits a
    /// descriptor, and makes the zeroes visible to a non-coherent walker.
    fn alloc_raw(alloc: &A, cfg: &Config, geo: Geometry, lvl: u32) -> Result<TableMem, Error> {
        let size = geo.table_bytes(lvl);
        let t = alloc.alloc_table(size).ok_or(Error::NoMemory)?;
        let encodable = pte::pte_to_paddr(pte::paddr_to_pte(t.dev), geo.granule_shift()) == t.dev;
        if !encodable || t.dev & (size as u64 - 1) != 0 || t.cpu.as_ptr().align_offset(8) != 0 {
            // SAFETY: Just allocated with this size and never published.
            unsafe { alloc.free_table(t, size) };
            return Err(Error::NoMemory);
        }
        if !cfg.coherent_walk {
            // SAFETY: `t` was just allocated with `size` bytes.
            unsafe { alloc.sync_table_for_device(t, 0, size) };
        }
        Ok(t)
    }
}

impl<F: Format, A: TableAlloc, T: FlushOps> Drop for PageTable<F, A, T> {
    fn drop(&mut self) {
        self.tlb.tlb_flush_all();
        self.free_tree(self.pgd, self.geo.start_level());
    }
}

impl<F: Format, A: TableAlloc, T: FlushOps> core::fmt::Debug for PageTable<F, A, T> {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        f.debug_struct("PageTable")
            .field("format", &F::NAME)
            .field("cfg", &self.cfg)
            .field("geometry", &self.geo)
            .field("root", &self.pgd.dev)
            .finish()
    }
}

/// A table above the leaf level that a range operation's previous walk went through, so the
/// next walk of the same operation can start there instead of at the PGD.
///
/// Only [`PageTable::map`] and [`PageTable::unmap`] keep one across their calls, which go
/// through the range in increasing, disjoint chunks under `&mut self`. A table is freed only
/// by a chunk whose range covers the table's whole span, so a later chunk (which lies past
/// every earlier one) is never covered by a freed table: a cursor that covers the next IOVA
/// names a live table.
#[derive(Clone, Copy)]
struct Cursor {
    table: TableMem,
    lvl: u32,
    /// An IOVA the table covers.
    iova: u64,
}

/// Where a walk keeps its [`Cursor`]: `Option<Cursor>` for the calls of a range operation,
/// [`NoCursor`] for a single `map_pages`/`unmap_pages`, whose walk then writes nothing down
/// (each level's cursor would otherwise be four stores into the caller's frame, which under
/// an emulator cost more than the arithmetic around them).
trait Resume {
    fn get(&self) -> Option<Cursor>;
    fn set(&mut self, c: Cursor);
}

impl Resume for Option<Cursor> {
    #[inline(always)]
    fn get(&self) -> Option<Cursor> {
        *self
    }

    #[inline(always)]
    fn set(&mut self, c: Cursor) {
        *self = Some(c);
    }
}

/// A walk that starts at the PGD and keeps nothing.
struct NoCursor;

impl Resume for NoCursor {
    #[inline(always)]
    fn get(&self) -> Option<Cursor> {
        None
    }

    #[inline(always)]
    fn set(&mut self, _: Cursor) {}
}

/// How many tables [`FreeBatch`] collects before freeing them.
const FREE_BATCH: usize = 32;

/// Tables of one size, unreachable from the tree, waiting to be freed together
/// ([`TableAlloc::free_tables`]).
struct FreeBatch {
    tables: [core::mem::MaybeUninit<TableMem>; FREE_BATCH],
    /// The first `len` entries of `tables` are initialised.
    len: usize,
    size: usize,
}

impl FreeBatch {
    fn new() -> Self {
        FreeBatch {
            tables: [const { core::mem::MaybeUninit::uninit() }; FREE_BATCH],
            len: 0,
            size: 0,
        }
    }
}

/// Writes `n` leaves `desc | paddr_to_pte(pa)`, `pa` starting at `paddr` and growing by
/// `size`, into words `first..first + n` of `table`, with plain stores (which the compiler
/// may vectorise).
///
/// # Safety
///
/// `table` holds at least `first + n` words and nothing else accesses it during the call (it
/// is not published yet).
unsafe fn fill_private(table: TableMem, first: usize, n: usize, desc: u64, paddr: u64, size: u64) {
    // SAFETY: `first` words are inside the table (the caller's guarantee).
    let start = unsafe { table.cpu.as_ptr().cast::<u64>().add(first) };
    // SAFETY: `n` words from `start` are inside the table; `AtomicU64` has the layout of
    // `u64`; the memory is exclusively ours for the call, so plain accesses race with nothing.
    let words = unsafe { core::slice::from_raw_parts_mut(start, n) };
    let mut pa = paddr;
    for w in words {
        *w = desc | pte::paddr_to_pte(pa);
        pa = pa.wrapping_add(size);
    }
}

/// `pgcount * pgsize` for a power-of-two `pgsize`, or `None` if it does not fit in a `u64`.
///
/// A comparison and a shift: a multiplication checked for overflow tests the overflow flag,
/// which costs QEMU's translator a call to compute the flags on every map and unmap.
#[inline(always)]
fn range_len(pgcount: usize, pgsize: u64) -> Option<u64> {
    let shift = pgsize.trailing_zeros();
    let count = pgcount as u64;
    // `pgsize` is a power of two, so `shift < 64`: the wrapping shifts are plain shifts
    // (without the kernel build's check of the shift amount).
    if count > u64::MAX.wrapping_shr(shift) {
        None
    } else {
        Some(count.wrapping_shl(shift))
    }
}

/// Leaves an unmap checks and clears as one group.
const UNMAP_GROUP: usize = 8;

/// Mask of bits `0..n` (n may be 64).
const fn low_mask(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// Mask of bits `0..=n`.
const fn low_mask_incl(n: u32) -> u64 {
    low_mask(n + 1)
}

#[cfg(test)]
mod tests;
