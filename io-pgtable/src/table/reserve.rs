// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Reserved tables, and unmapping that splits blocks.
//!
//! # Reserving tables for a later commit
//!
//! A driver that applies a batch of page-table changes where it must not fail (the commit of a
//! `VM_BIND`, which runs in a fence-signalling path) prepares the table memory first:
//!
//! 1. [`PageTable::tables_to_map`] bounds the tables one [`map`](PageTable::map) can
//!    allocate, [`PageTable::tables_to_split`] those one
//!    [`unmap_split`](PageTable::unmap_split) can; both look only at the arguments and the
//!    configuration (not at what is mapped now), so the sum over a batch bounds the batch
//!    whatever runs between planning and commit;
//! 2. [`PageTable::reserve_tables`] draws that many tables from the [`TableAlloc`] into the
//!    page table's reserve (the step that can fail with [`Error::NoMemory`]);
//! 3. the batch runs through the returned [`Reservation`], whose maps and splits take new
//!    tables from the reserve only and never ask the allocator for one; when it is dropped,
//!    the tables it drew and did not use go back to the allocator.
//!
//! A driver that prepares early and commits later (an asynchronous bind queue) keeps tables in
//! the reserve between the two with [`PageTable::fill_reserve`] and
//! [`PageTable::trim_reserve`], and commits through [`PageTable::reserved`].
//!
//! # Splitting blocks
//!
//! [`PageTable::unmap`] refuses to unmap part of a block ([`Error::PartialBlock`]), as the C
//! code does. A GPU VM whose mappings use blocks (4K pages and 2M blocks, as panthor and Tyr
//! configure) must still be able to unmap any page-aligned part of a mapping, which is what a
//! `gpuvm` remap asks for. [`PageTable::unmap_split`] does it the way panthor does:
//! each block that the range cuts (at most one at each end) is unmapped whole and mapped
//! again, with the block's own output address and attributes, in the largest pages that do
//! not cross an end of the range; then the range itself is unmapped, and the parts of the
//! blocks outside it stay mapped as before.
//! [`PageTable::split_extent`] says which addresses that touches, so that the caller can keep
//! the walker out of them (panthor locks that region of the MMU) and invalidate the TLB for
//! them afterwards.

use core::ops::{Deref, Range};
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::{range_len, NoCursor, PageTable, PteWalk};
use crate::config::MAX_LEVELS;
use crate::flush::{FlushOps, Gather, NoFlush};
use crate::format::Format;
use crate::memory::{TableAlloc, TableMem};
use crate::prot::Prot;
use crate::{pte, Error};

/// Where a map takes the tables it creates; a type, so that the choice costs nothing on the
/// common path.
pub(crate) trait Source {
    /// Only from the page table's reserve (never the allocator).
    const RESERVE: bool;
}

/// New tables come from the allocator.
pub(crate) struct FromAlloc;

impl Source for FromAlloc {
    const RESERVE: bool = false;
}

/// New tables come from the reserve only. Used only with the page table held exclusively
/// (through `&mut` or a [`Reservation`]), which is what makes the reserve's plain loads and
/// stores enough.
pub(crate) struct FromReserve;

impl Source for FromReserve {
    const RESERVE: bool = true;
}

/// Tables drawn from the allocator ahead of time, linked through their first word.
///
/// # Invariants
///
/// `len` tables are in the reserve. If `len > 0`, `head` is the device address of the first;
/// the first word of each holds the device address of the next (anything for the last), the
/// rest of it is zero (and was made visible as zero to a non-coherent walker). Each is a live
/// table of [`PageTable::stock_bytes`] bytes from the page table's allocator, reachable from
/// no descriptor. Both fields change only while the page table is held exclusively.
pub(crate) struct Stock {
    head: AtomicU64,
    len: AtomicUsize,
}

impl Stock {
    pub(crate) const fn new() -> Self {
        Stock {
            head: AtomicU64::new(0),
            len: AtomicUsize::new(0),
        }
    }
}

/// Tables counted by [`PageTable::count_tables`].
struct TableCount {
    /// The last table counted at each level (as the index of its IOVAs one level up), or
    /// `u64::MAX`.
    last: [u64; MAX_LEVELS as usize],
    tables: usize,
}

impl TableCount {
    fn new() -> Self {
        TableCount {
            last: [u64::MAX; MAX_LEVELS as usize],
            tables: 0,
        }
    }
}

impl<F: Format, A: TableAlloc, T: FlushOps> PageTable<F, A, T> {
    /// An upper bound of the tables [`map`](Self::map)`(iova, paddr, size, _)` allocates,
    /// whatever is mapped when it runs (it counts every table the range's pages and blocks
    /// would sit in, as if none existed yet).
    ///
    /// Of `paddr` only its offset in the largest page size matters (it decides where blocks
    /// can be used). 0 for a request that `map` refuses before it allocates (misaligned, or
    /// `size == 0`).
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::{host::{Granule, HostAllocator}, Arm64LpaeS1, Config, NoFlush, PageTable, SZ_2M, SZ_4K};
    ///
    /// let mem = HostAllocator::new(Granule::Size4K, 8);
    /// let pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 48, 40), &mem, NoFlush)?;
    /// // Levels 1 and 2 for 4 MiB of 2M blocks; a level-3 table too when the physical
    /// // address is not 2M aligned with the IOVA.
    /// assert_eq!(pt.tables_to_map(SZ_2M, 0x8000_0000, 2 * SZ_2M), 2);
    /// assert_eq!(pt.tables_to_map(SZ_2M, 0x8000_1000, 2 * SZ_2M), 2 + 2);
    /// # Ok::<(), io_pgtable::Error>(())
    /// ```
    pub fn tables_to_map(&self, iova: u64, paddr: u64, size: u64) -> usize {
        let mut count = TableCount::new();
        self.count_tables(&mut count, iova, paddr, size, self.geo.start_level() + 1);
        count.tables
    }

    /// An upper bound of the tables [`unmap_split`](Self::unmap_split)`(iova, size, _)`
    /// allocates, whatever is mapped when it runs: at each end of the range that does not fall
    /// on a block boundary, the tables that mapping again the largest block that could lie
    /// there takes, in pages that do not cross the end.
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::{host::{Granule, HostAllocator}, Arm64LpaeS1, Config, NoFlush, PageTable, SZ_2M, SZ_4K};
    ///
    /// let mem = HostAllocator::new(Granule::Size4K, 8);
    /// let pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 48, 40), &mem, NoFlush)?;
    /// // Both ends inside 2M blocks: one level-3 table for each end's remainder.
    /// assert_eq!(pt.tables_to_split(SZ_2M + SZ_4K, SZ_2M), 2);
    /// // Ends on block boundaries: nothing to split.
    /// assert_eq!(pt.tables_to_split(SZ_2M, SZ_2M), 0);
    /// # Ok::<(), io_pgtable::Error>(())
    /// ```
    pub fn tables_to_split(&self, iova: u64, size: u64) -> usize {
        let min = self.min_pgsize();
        if size == 0 || (iova | size) & (min - 1) != 0 {
            return 0;
        }
        let Some(end) = iova.checked_add(size) else {
            return 0;
        };
        let (mut at_start, mut at_end) = (0usize, 0usize);
        let mut blocks = self.cfg.pgsize_bitmap & !(min | (min - 1));
        while blocks != 0 {
            let block = 1u64 << blocks.trailing_zeros();
            blocks &= blocks - 1;
            let Some(lvl) = self.geo.level_of_size(block) else {
                continue;
            };
            // A block around an end is mapped again in two parts, cut at the end, from an
            // output address with the same offset in the block as the IOVA.
            let cut = |at: u64| {
                let off = at & (block - 1);
                if off == 0 {
                    return 0;
                }
                let first = at - off;
                let mut count = TableCount::new();
                self.count_tables(&mut count, first, first, off, lvl + 1);
                self.count_tables(&mut count, at, at, block - off, lvl + 1);
                count.tables
            };
            at_start = at_start.max(cut(iova));
            at_end = at_end.max(cut(end));
        }
        at_start.saturating_add(at_end)
    }

    /// The addresses [`unmap_split`](Self::unmap_split)`(iova, size, _)` would change as the
    /// tables are now: the range, widened to the start of the block that maps `iova` and to
    /// the end of the one that maps its last byte, if those are blocks.
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::{host::{Granule, HostAllocator}, Arm64LpaeS1, Config, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
    ///
    /// let mem = HostAllocator::new(Granule::Size4K, 8);
    /// let mut pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 48, 40), &mem, NoFlush)?;
    /// pt.map(SZ_2M, 0x8000_0000, 2 * SZ_2M, Prot::READ)?;
    /// assert_eq!(pt.split_extent(SZ_2M + SZ_4K, SZ_4K), SZ_2M..2 * SZ_2M);
    /// assert_eq!(pt.split_extent(2 * SZ_2M - SZ_4K, 2 * SZ_4K), SZ_2M..3 * SZ_2M);
    /// # Ok::<(), io_pgtable::Error>(())
    /// ```
    pub fn split_extent(&self, iova: u64, size: u64) -> Range<u64> {
        let end = iova.saturating_add(size);
        let mut r = iova..end;
        if size == 0 {
            return r;
        }
        if let Some((first, _)) = self.leaf_span(iova) {
            r.start = r.start.min(first);
        }
        if let Some((_, last)) = self.leaf_span(end - 1) {
            r.end = r.end.max(last.saturating_add(1));
        }
        r
    }

    /// Unmaps `size` bytes at `iova` as [`unmap`](Self::unmap) does, first splitting the
    /// blocks that the range covers only in part (at most one at each end): each is unmapped
    /// whole and mapped again, with the same output addresses and attributes, in the largest
    /// pages that do not cross an end of the range, which needs new tables. Then the range is
    /// unmapped, and what stays of those blocks keeps its translations. Returns the bytes
    /// unmapped, which stop at the first hole as for [`unmap`](Self::unmap).
    ///
    /// While it runs, what lies in [`split_extent`](Self::split_extent) may be unmapped for a
    /// moment: keep the walker out of it (Mali: lock the region) and invalidate the TLB for it
    /// afterwards. With `gather`, [`FlushOps::tlb_add_page`] is also called for each block
    /// that is split.
    ///
    /// # Errors
    ///
    /// [`Error::Misaligned`] if `iova` or `size` is not a multiple of the smallest page size,
    /// [`Error::OutOfRange`]; [`Error::NoMemory`] if a block's remainder needs a table the
    /// allocator cannot give (every translation is then as before: the block is put back). The
    /// table allocation can be made certain to succeed beforehand with
    /// [`reserve_tables`](Self::reserve_tables) and
    /// [`tables_to_split`](Self::tables_to_split).
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::{host::{Granule, HostAllocator}, Arm64LpaeS1, Config, Error, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
    ///
    /// let mem = HostAllocator::new(Granule::Size4K, 8);
    /// let mut pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 48, 40), &mem, NoFlush)?;
    /// pt.map(SZ_2M, 0x8000_0000, SZ_2M, Prot::READ | Prot::WRITE)?; // one 2M block
    /// assert_eq!(pt.unmap(SZ_2M + SZ_4K, SZ_4K, None), Err(Error::PartialBlock));
    /// assert_eq!(pt.unmap_split(SZ_2M + SZ_4K, SZ_4K, None)?, SZ_4K);
    /// assert_eq!(pt.iova_to_phys(SZ_2M), Some(0x8000_0000));
    /// assert_eq!(pt.iova_to_phys(SZ_2M + SZ_4K), None);
    /// assert_eq!(pt.iova_to_phys(SZ_2M + 2 * SZ_4K), Some(0x8000_2000));
    /// # Ok::<(), io_pgtable::Error>(())
    /// ```
    pub fn unmap_split(
        &mut self,
        iova: u64,
        size: u64,
        gather: Option<&mut Gather>,
    ) -> Result<u64, Error> {
        self.unmap_split_with::<FromAlloc>(iova, size, gather)
    }

    /// Tables in the reserve ([`fill_reserve`](Self::fill_reserve),
    /// [`reserve_tables`](Self::reserve_tables)).
    pub fn reserved_tables(&self) -> usize {
        self.stock.len.load(Ordering::Relaxed)
    }

    /// Fills the reserve up to `count` tables, drawing the missing ones from the allocator.
    /// Only the maps and splits of a [`Reservation`] take tables from it; it is emptied when
    /// the page table is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`] if the allocator runs out, or says beforehand that it would
    /// ([`TableAlloc::expect_tables`]); the tables this call drew go back then.
    pub fn fill_reserve(&mut self, count: usize) -> Result<(), Error> {
        let before = self.reserved_tables();
        let more = count.saturating_sub(before);
        if more > 0 && !self.alloc.expect_tables(more, self.stock_bytes()) {
            return Err(Error::NoMemory);
        }
        while self.reserved_tables() < count {
            let t = match Self::alloc_raw(&self.alloc, &self.cfg, self.geo, self.stock_level()) {
                Ok(t) => t,
                Err(e) => {
                    self.trim_reserve(before);
                    return Err(e);
                }
            };
            // SAFETY: `t` was just allocated (at least 64 bytes, 8-byte aligned) and is not
            // published: nothing else accesses its first word.
            let first = unsafe { t.cpu.as_ref() };
            first.store(self.stock.head.load(Ordering::Relaxed), Ordering::Relaxed);
            self.stock.head.store(t.dev, Ordering::Relaxed);
            self.stock.len.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Gives the tables of the reserve beyond `keep` back to the allocator.
    pub fn trim_reserve(&mut self, keep: usize) {
        while self.reserved_tables() > keep {
            let Some(t) = self.stock_pop() else {
                break;
            };
            // SAFETY: A table of the reserve was allocated with `stock_bytes()` bytes by this
            // allocator, is reachable from no descriptor, and left the reserve just now.
            unsafe { self.alloc.free_table(t, self.stock_bytes()) };
        }
    }

    /// Draws `count` more tables into the reserve and returns the [`Reservation`] through
    /// which a batch uses them; when it is dropped, the reserve goes back to what it held
    /// before (the tables of these `count` that were not used return to the allocator).
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`] if the allocator cannot give them (nothing is drawn then).
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::{host::{Granule, HostAllocator}, Arm64LpaeS1, Config, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
    ///
    /// let mem = HostAllocator::new(Granule::Size4K, 8);
    /// let mut pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 48, 40), &mem, NoFlush)?;
    /// let (iova, pa, size) = (SZ_2M - SZ_4K, 0x8000_0000 - SZ_4K, SZ_2M + 2 * SZ_4K);
    /// let need = pt.tables_to_map(iova, pa, size) + pt.tables_to_split(iova + SZ_4K, SZ_4K);
    /// let mut batch = pt.reserve_tables(need)?; // the only step that allocates
    /// batch.map(iova, pa, size, Prot::READ)?;
    /// batch.unmap_split(iova + SZ_4K, SZ_4K, None)?;
    /// drop(batch); // what the batch did not use goes back to `mem`
    /// assert_eq!(pt.reserved_tables(), 0);
    /// assert_eq!(pt.iova_to_phys(iova + 2 * SZ_4K), Some(pa + 2 * SZ_4K));
    /// # Ok::<(), io_pgtable::Error>(())
    /// ```
    pub fn reserve_tables(&mut self, count: usize) -> Result<Reservation<'_, F, A, T>, Error> {
        let keep = self.reserved_tables();
        let want = keep.checked_add(count).ok_or(Error::NoMemory)?;
        self.fill_reserve(want)?;
        Ok(Reservation { pt: self, keep })
    }

    /// A [`Reservation`] over the tables the reserve holds now ([`fill_reserve`](
    /// Self::fill_reserve)); dropping it gives nothing back.
    pub fn reserved(&mut self) -> Reservation<'_, F, A, T> {
        let keep = self.reserved_tables();
        Reservation { pt: self, keep }
    }

    // ---- internals ----

    /// A new table for `lvl` (below the start level), from `S`.
    #[inline(always)]
    pub(super) fn new_table<S: Source>(&self, lvl: u32) -> Result<TableMem, Error> {
        if S::RESERVE {
            self.stock_pop().ok_or(Error::NoMemory)
        } else {
            Self::alloc_raw(&self.alloc, &self.cfg, self.geo, lvl)
        }
    }

    /// The level whose tables the reserve holds: every level below the start level has
    /// tables of one granule.
    fn stock_level(&self) -> u32 {
        (self.geo.start_level() + 1).min(MAX_LEVELS - 1)
    }

    /// The size of the reserve's tables.
    pub(super) fn stock_bytes(&self) -> usize {
        self.geo.table_bytes(self.stock_level())
    }

    /// Takes the first table of the reserve, zeroed.
    ///
    /// Only with the page table held exclusively (the [`Stock`] invariant).
    #[inline(never)]
    fn stock_pop(&self) -> Option<TableMem> {
        let len = self.stock.len.load(Ordering::Relaxed);
        if len == 0 {
            return None;
        }
        let dev = self.stock.head.load(Ordering::Relaxed);
        let t = TableMem {
            cpu: self.alloc.table_cpu(dev),
            dev,
        };
        // SAFETY: `t` is the first table of the reserve: a live table of this allocator,
        // reachable from no descriptor and used by nothing else (the `Stock` invariant), so its
        // first word is valid for atomic access.
        let first = unsafe { t.cpu.as_ref() };
        let next = first.swap(0, Ordering::Relaxed);
        if !self.coherent() {
            // SAFETY: `t` is live with `stock_bytes() >= 64` bytes, and the word is its first.
            unsafe { self.alloc.sync_table_for_device(t, 0, 8) };
        }
        self.stock.head.store(next, Ordering::Relaxed);
        self.stock.len.store(len - 1, Ordering::Relaxed);
        Some(t)
    }

    /// Adds to `count` the tables a map of `size` bytes at `iova` to `paddr` creates at levels
    /// `from` and below, at most, counting each table once even when several chunks share it
    /// (the maps counted into one `count` go in increasing order of IOVA).
    fn count_tables(&self, count: &mut TableCount, iova: u64, paddr: u64, size: u64, from: u32) {
        let min = self.min_pgsize();
        if size == 0 || (iova | paddr | size) & (min - 1) != 0 {
            return;
        }
        // A map that would wrap fails before it gets there; count what precedes the wrap.
        let room = (u64::MAX - iova.max(paddr)) & !(min - 1);
        let size = size.min(room.saturating_add(min));
        let from = from.max(self.geo.start_level() + 1);
        let TableCount { last, tables } = count;
        let mut done = 0u64;
        // The chunks `map` uses, in increasing order: pages of one size each.
        while done < size {
            let (a, pa) = (iova.wrapping_add(done), paddr.wrapping_add(done));
            let (pgsize, count) = self.pick_pgsize(a, pa, size - done);
            let Some(leaf) = self.geo.level_of_size(pgsize) else {
                break;
            };
            let len = range_len(count, pgsize)
                .unwrap_or(u64::MAX)
                .min(size - done);
            if len == 0 {
                break;
            }
            let end = a.wrapping_add(len - 1);
            for lvl in from..=leaf {
                let span = self.geo.level_shift(lvl - 1);
                let (lo, hi) = (a >> span, end >> span);
                let seen = last[lvl as usize];
                let new = if seen != u64::MAX && seen >= lo {
                    hi.saturating_sub(seen)
                } else {
                    hi - lo + 1
                };
                *tables = tables.saturating_add(usize::try_from(new).unwrap_or(usize::MAX));
                last[lvl as usize] = hi;
            }
            done += len;
        }
    }

    /// The first and last address of the leaf mapping `iova`, if it is larger than the
    /// smallest page size.
    fn leaf_span(&self, iova: u64) -> Option<(u64, u64)> {
        let (_, lvl) = self.lookup(iova, &mut PteWalk::default())?;
        let size = self.geo.block_size(lvl);
        if size <= self.min_pgsize() {
            return None;
        }
        let first = iova & !(size - 1);
        Some((first, first + (size - 1)))
    }

    /// [`unmap_split`](Self::unmap_split), new tables taken from `S`. The caller holds the
    /// page table exclusively.
    fn unmap_split_with<S: Source>(
        &self,
        iova: u64,
        size: u64,
        mut gather: Option<&mut Gather>,
    ) -> Result<u64, Error> {
        let min = self.min_pgsize();
        if (iova | size) & (min - 1) != 0 {
            return Err(Error::Misaligned);
        }
        if size == 0 {
            return Ok(0);
        }
        self.check_iova_range(iova, size)?;
        // In range, so no overflow.
        let last = iova + (size - 1);
        self.split_block::<S>(iova, iova, last, gather.as_deref_mut())?;
        self.split_block::<S>(last, iova, last, gather.as_deref_mut())?;
        self.unmap_range(iova, size, gather)
    }

    /// If the leaf mapping `at` is a block that reaches outside `[lo, hi]` (inclusive),
    /// unmaps it and maps it again in smaller pages, none of which crosses `lo` or `hi`: the
    /// translations stay as they were.
    fn split_block<S: Source>(
        &self,
        at: u64,
        lo: u64,
        hi: u64,
        gather: Option<&mut Gather>,
    ) -> Result<(), Error> {
        let Some((leaf, lvl)) = self.lookup(at, &mut PteWalk::default()) else {
            return Ok(());
        };
        let size = self.geo.block_size(lvl);
        let first = at & !(size - 1);
        let last = first + (size - 1);
        if first >= lo && last <= hi {
            // The range unmaps it whole.
            return Ok(());
        }
        let pa = pte::pte_to_paddr(leaf, self.geo.granule_shift());
        let attrs = leaf & !(pte::ADDR_MASK | pte::TYPE_MASK);
        if self.unmap_pages_at(first, size, 1, gather, &mut NoCursor)? != size {
            // Nothing there after all (the caller holds the table exclusively, so this does
            // not happen): nothing to split.
            return Ok(());
        }
        // The block's parts before, inside and after `[lo, hi]`, each mapped on its own so that
        // no page crosses an end of the range. The inner part holds `at`, so it is not empty.
        let (inner_first, inner_last) = (first.max(lo), last.min(hi));
        let pieces = [
            (first < lo).then(|| (first, lo - first)),
            Some((inner_first, inner_last - inner_first + 1)),
            (hi < last).then(|| (hi + 1, last - hi)),
        ];
        let mut mapped = [None; 2];
        for (i, (start, len)) in pieces.into_iter().flatten().enumerate() {
            let res = self.map_range::<S>(start, pa + (start - first), len, Some(attrs));
            if let Err(e) = res {
                for (s, l) in mapped.into_iter().flatten() {
                    // A valid mapped range: unmapping it cannot fail.
                    let _ = self.unmap_range(s, l, None);
                }
                // The block goes back as it was. Every table above it is still there and its
                // entry holds nothing or empty tables, so this needs no new table and cannot
                // fail.
                let _ = self.map_pages_raw::<_, S>(first, pa, size, 1, Some(attrs), &mut NoCursor);
                return Err(e);
            }
            if let Some(m) = mapped.get_mut(i) {
                *m = Some((start, len));
            }
        }
        Ok(())
    }
}

/// Tables set aside in a page table's reserve, and the operations that use them: new tables
/// come from the reserve only, so these maps and splits never fail for want of memory while
/// the reserve holds what [`PageTable::tables_to_map`] and [`PageTable::tables_to_split`]
/// counted for them, and never ask the allocator for a table (tables an unmap frees still go
/// back to it).
///
/// Made by [`PageTable::reserve_tables`] (which draws the tables, and gives back on drop the
/// ones the batch did not use) or [`PageTable::reserved`] (over what the reserve already
/// holds). Reads go to the page table through `Deref`.
///
/// # Examples
///
/// A batch that commits while the allocator has nothing left:
///
/// ```
/// use io_pgtable::{host::{Granule, HostAllocator}, Arm64LpaeS1, Config, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
///
/// let mem = HostAllocator::new(Granule::Size4K, 4); // the root and three tables
/// let mut pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 48, 40), &mem, NoFlush)?;
/// let need = pt.tables_to_map(0x1000, 0x9000_1000, 0x3000);
/// assert_eq!(need, 3);
/// let mut batch = pt.reserve_tables(need)?;
/// assert_eq!(mem.in_use(), 4); // nothing left to allocate
/// batch.map(0x1000, 0x9000_1000, 0x3000, Prot::READ)?;
/// assert_eq!(batch.remaining(), 0);
/// assert_eq!(batch.iova_to_phys(0x2000), Some(0x9000_2000));
/// # Ok::<(), io_pgtable::Error>(())
/// ```
pub struct Reservation<'a, F: Format, A: TableAlloc, T: FlushOps = NoFlush> {
    pt: &'a mut PageTable<F, A, T>,
    /// What the reserve goes back to on drop (at most).
    keep: usize,
}

impl<F: Format, A: TableAlloc, T: FlushOps> Reservation<'_, F, A, T> {
    /// Tables left in the reserve.
    pub fn remaining(&self) -> usize {
        self.pt.reserved_tables()
    }

    /// [`PageTable::map`], with new tables from the reserve.
    ///
    /// # Errors
    ///
    /// Those of [`PageTable::map`]; [`Error::NoMemory`] only if the reserve runs out.
    pub fn map(&mut self, iova: u64, paddr: u64, size: u64, prot: Prot) -> Result<(), Error> {
        let attrs = self.pt.leaf_attrs(prot);
        self.pt.map_range::<FromReserve>(iova, paddr, size, attrs)
    }

    /// [`PageTable::map_pages`], with new tables from the reserve.
    pub fn map_pages(
        &mut self,
        iova: u64,
        paddr: u64,
        pgsize: u64,
        pgcount: usize,
        prot: Prot,
    ) -> (u64, Result<(), Error>) {
        self.pt
            .map_pages_at::<_, FromReserve>(iova, paddr, pgsize, pgcount, prot, &mut NoCursor)
    }

    /// [`PageTable::unmap`] (which takes no new table).
    ///
    /// # Errors
    ///
    /// Those of [`PageTable::unmap`].
    pub fn unmap(
        &mut self,
        iova: u64,
        size: u64,
        gather: Option<&mut Gather>,
    ) -> Result<u64, Error> {
        self.pt.unmap(iova, size, gather)
    }

    /// [`PageTable::unmap_split`], with new tables from the reserve.
    ///
    /// # Errors
    ///
    /// Those of [`PageTable::unmap_split`]; [`Error::NoMemory`] only if the reserve runs out.
    pub fn unmap_split(
        &mut self,
        iova: u64,
        size: u64,
        gather: Option<&mut Gather>,
    ) -> Result<u64, Error> {
        self.pt.unmap_split_with::<FromReserve>(iova, size, gather)
    }
}

impl<F: Format, A: TableAlloc, T: FlushOps> Deref for Reservation<'_, F, A, T> {
    type Target = PageTable<F, A, T>;

    fn deref(&self) -> &Self::Target {
        self.pt
    }
}

impl<F: Format, A: TableAlloc, T: FlushOps> Drop for Reservation<'_, F, A, T> {
    fn drop(&mut self) {
        self.pt.trim_reserve(self.keep);
    }
}

impl<F: Format, A: TableAlloc, T: FlushOps> core::fmt::Debug for Reservation<'_, F, A, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Reservation")
            .field("remaining", &self.remaining())
            .field("keep", &self.keep)
            .finish()
    }
}
