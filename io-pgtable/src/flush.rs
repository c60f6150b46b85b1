// SPDX-License-Identifier: GPL-2.0 OR MIT

//! TLB maintenance.
//!
//! A translating device caches descriptors in its TLB, including the *walk cache* of table
//! descriptors. After the page table removes a mapping, stale entries must be invalidated
//! before the memory is reused. The page table tells the driver what to invalidate through
//! [`FlushOps`]:
//!
//! - [`FlushOps::tlb_flush_walk`] when a table descriptor is removed (the subtable is freed
//!   right after, so the walker must forget it synchronously);
//! - [`FlushOps::tlb_add_page`] for each leaf removed by
//!   [`unmap_pages`](crate::PageTable::unmap_pages) when the caller passes a [`Gather`]; the
//!   driver may invalidate at once or widen the gather and invalidate once at the end;
//! - [`FlushOps::tlb_flush_all`] when the whole table is torn down.
//!
//! GPU firmware often handles invalidation itself by range (as panthor does with its lock
//! region), in which case [`NoFlush`] is enough.

/// A range of IOVAs whose leaf TLB entries still need invalidating.
///
/// # Examples
///
/// ```
/// use io_pgtable::Gather;
///
/// let mut g = Gather::new();
/// assert!(g.is_empty());
/// g.add_page(0x3000, 0x1000);
/// g.add_page(0x1000, 0x1000);
/// assert_eq!((g.start, g.end), (0x1000, 0x3fff));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gather {
    /// First IOVA to invalidate.
    pub start: u64,
    /// Last IOVA to invalidate (inclusive).
    pub end: u64,
    /// The page size seen, 0 if none yet.
    pub pgsize: u64,
    /// The invalidation is queued for later (a flush queue): the page table then skips
    /// [`FlushOps::tlb_add_page`] altogether.
    pub queued: bool,
}

impl Gather {
    /// An empty gather.
    pub const fn new() -> Self {
        Gather {
            start: u64::MAX,
            end: 0,
            pgsize: 0,
            queued: false,
        }
    }

    /// Whether nothing has been gathered.
    pub const fn is_empty(&self) -> bool {
        self.start > self.end
    }

    /// Widens the range to cover `size` bytes at `iova`.
    pub fn add_page(&mut self, iova: u64, size: u64) {
        let last = iova.saturating_add(size.saturating_sub(1));
        self.start = self.start.min(iova);
        self.end = self.end.max(last);
        self.pgsize = size;
    }
}

impl Default for Gather {
    fn default() -> Self {
        Self::new()
    }
}

/// TLB maintenance callbacks (Linux's `iommu_flush_ops`). The implementor is the cookie.
pub trait FlushOps {
    /// Invalidates every TLB entry of the context, synchronously.
    fn tlb_flush_all(&self);

    /// Invalidates the walk-cache (and leaf) entries for `size` bytes at `iova`,
    /// synchronously; `granule` is the table granule.
    fn tlb_flush_walk(&self, iova: u64, size: u64, granule: u64);

    /// Queues invalidation of one leaf of `granule` bytes at `iova`. The default widens
    /// `gather` so the driver can invalidate the whole range once.
    fn tlb_add_page(&self, gather: &mut Gather, iova: u64, granule: u64) {
        gather.add_page(iova, granule);
    }
}

/// Flush callbacks that do nothing, for walkers whose TLB the driver manages by range (the
/// Linux Rust binding uses the same for Tyr).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoFlush;

impl FlushOps for NoFlush {
    fn tlb_flush_all(&self) {}
    fn tlb_flush_walk(&self, _iova: u64, _size: u64, _granule: u64) {}
}

impl<T: FlushOps + ?Sized> FlushOps for &T {
    fn tlb_flush_all(&self) {
        (**self).tlb_flush_all()
    }
    fn tlb_flush_walk(&self, iova: u64, size: u64, granule: u64) {
        (**self).tlb_flush_walk(iova, size, granule)
    }
    fn tlb_add_page(&self, gather: &mut Gather, iova: u64, granule: u64) {
        (**self).tlb_add_page(gather, iova, granule)
    }
}
