// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Table memory.
//!
//! The tables live in memory the translating device reads by *device address* (what the
//! table descriptors and the base register hold), while the CPU writes them through its own
//! mapping. The page-table code never allocates by itself: it asks a [`TableAlloc`] for
//! zeroed tables and gives them back, translates the device address found in a table
//! descriptor back to the CPU view, and — when the walker is not cache coherent — calls
//! [`TableAlloc::sync_for_device`] after each write so the device sees it (in the kernel this
//! is `dma_sync_single_for_device`).
//!
//! [`HostAllocator`] (feature `alloc`) implements the trait on the host with synthetic device
//! addresses.
//!
#![cfg_attr(
    feature = "alloc",
    doc = "[`HostAllocator`]: crate::host::HostAllocator"
)]
#![cfg_attr(not(feature = "alloc"), doc = "[`HostAllocator`]: crate#features")]

use core::ptr::NonNull;
use core::sync::atomic::AtomicU64;

/// One table as handed out by a [`TableAlloc`]: its CPU view and its device address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableMem {
    /// Where the CPU reads and writes the table's descriptors.
    pub cpu: NonNull<AtomicU64>,
    /// The address the walker uses for the table.
    pub dev: u64,
}

/// Source of table memory.
///
/// # Safety
///
/// An implementation must guarantee, for every [`TableMem`] `t` returned by
/// [`alloc_table`](Self::alloc_table)`(size)` until it is passed to
/// [`free_table`](Self::free_table):
///
/// - `t.cpu` points to at least `size` bytes, 8-byte aligned, all zero when returned, valid
///   for atomic reads and writes from any thread, and used by nothing else (the memory may be
///   read by a device, which does not count);
/// - no two live tables overlap;
/// - [`table_cpu`](Self::table_cpu)`(t.dev)` returns `t.cpu`.
///
/// The methods may be called from several threads at once when the page table is shared
/// (see [`PageTable::map_pages_shared`](crate::PageTable::map_pages_shared)), so such use
/// also requires `Self: Sync`.
pub unsafe trait TableAlloc {
    /// Allocates a zeroed table of `size` bytes (a power of two, at least 64), whose device
    /// address is aligned to `size`. Returns `None` when out of memory.
    fn alloc_table(&self, size: usize) -> Option<TableMem>;

    /// Returns a table to the allocator.
    ///
    /// # Safety
    ///
    /// `table` was returned by `alloc_table(size)` of this allocator, has not been freed
    /// since, and nothing accesses its CPU view any more.
    unsafe fn free_table(&self, table: TableMem, size: usize);

    /// Returns several tables of `size` bytes to the allocator at once.
    ///
    /// The default frees them one by one; an allocator that can do better in bulk (one
    /// bitmap update for many slots) overrides it.
    ///
    /// # Safety
    ///
    /// Every table in `tables` meets the requirements of [`free_table`](Self::free_table)
    /// for `size`, and none appears twice.
    unsafe fn free_tables(&self, tables: &[TableMem], size: usize) {
        for t in tables {
            // SAFETY: The caller's guarantees, table by table.
            unsafe { self.free_table(*t, size) };
        }
    }

    /// The CPU view of the live table whose device address is `dev`.
    ///
    /// Called only with the device address of a table this allocator returned and that is
    /// still live; an implementation may return anything (but must not cause undefined
    /// behaviour) for other inputs.
    fn table_cpu(&self, dev: u64) -> NonNull<AtomicU64>;

    /// Makes the CPU's writes to `len` bytes at device address `dev` visible to a walker that
    /// does not snoop the CPU caches. Called only when the configuration is not
    /// `coherent_walk`.
    fn sync_for_device(&self, dev: u64, len: usize);

    /// [`sync_for_device`](Self::sync_for_device) for `len` bytes at offset `off` of a table
    /// the caller knows to be live.
    ///
    /// The page-table code always knows which table it wrote, so an allocator that must
    /// otherwise find the table that contains a device address (to sync only memory it mapped,
    /// as the kernel's DMA API requires) can skip that search here. The default forwards to
    /// `sync_for_device(table.dev + off, len)`.
    ///
    /// # Safety
    ///
    /// `table` was returned by [`alloc_table`](Self::alloc_table)`(size)` of this allocator
    /// and has not been freed since, and `off + len <= size`.
    unsafe fn sync_table_for_device(&self, table: TableMem, off: usize, len: usize) {
        self.sync_for_device(table.dev.wrapping_add(off as u64), len);
    }

    /// Whether [`sync_for_device`](Self::sync_for_device) really makes CPU writes visible to
    /// a walker that does not snoop the CPU caches.
    ///
    /// An allocator that has no device to sync for (kernel memory that was never DMA-mapped
    /// for a `struct device`) returns `false`, and a page table whose configuration is not
    /// `coherent_walk` refuses it with [`Error::InvalidConfig`](crate::Error::InvalidConfig)
    /// when it is created: its walker would read stale descriptors and nothing would report
    /// it. Memory the walker reads through the CPU's own view (host memory read by a
    /// simulator) is visible either way, so the default is `true`.
    fn syncs_for_device(&self) -> bool {
        true
    }
}

// SAFETY: Forwards every call to `A`, which upholds the contract.
unsafe impl<A: TableAlloc + ?Sized> TableAlloc for &A {
    fn alloc_table(&self, size: usize) -> Option<TableMem> {
        (**self).alloc_table(size)
    }

    unsafe fn free_table(&self, table: TableMem, size: usize) {
        // SAFETY: The caller's guarantees are the ones `A::free_table` needs.
        unsafe { (**self).free_table(table, size) }
    }

    unsafe fn free_tables(&self, tables: &[TableMem], size: usize) {
        // SAFETY: The caller's guarantees are the ones `A::free_tables` needs.
        unsafe { (**self).free_tables(tables, size) }
    }

    fn table_cpu(&self, dev: u64) -> NonNull<AtomicU64> {
        (**self).table_cpu(dev)
    }

    fn sync_for_device(&self, dev: u64, len: usize) {
        (**self).sync_for_device(dev, len)
    }

    unsafe fn sync_table_for_device(&self, table: TableMem, off: usize, len: usize) {
        // SAFETY: The caller's guarantees, for the same allocator.
        unsafe { (**self).sync_table_for_device(table, off, len) }
    }

    fn syncs_for_device(&self) -> bool {
        (**self).syncs_for_device()
    }
}
