// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A host table allocator with synthetic device addresses.
//!
//! [`HostAllocator`] carves tables out of one preallocated arena of fixed-size slots. Slot
//! `i` has the device address `base + i * slot_size`, so a separate walker (a device
//! simulator, or [`walker::walk`](crate::walker::walk)) can read the tables through
//! [`PhysMem`] by device address alone.
//!
//! A non-coherent allocator ([`HostAllocator::new_noncoherent`]) keeps a second copy of the
//! arena as the *device's view*: a walker reads only that copy, and CPU writes reach it only
//! through [`TableAlloc::sync_for_device`]. A missing sync then shows up as a wrong
//! translation in tests, as it would on hardware.
//!
//! The arena has a fixed capacity, which also makes out-of-memory easy to provoke in tests.

extern crate alloc;

use alloc::alloc::Layout;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::memory::{TableAlloc, TableMem};
use crate::walker::PhysMem;
use crate::Error;

/// Slot size of a [`HostAllocator`]: the largest table it hands out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granule {
    /// 4 KiB slots.
    Size4K,
    /// 16 KiB slots.
    Size16K,
    /// 64 KiB slots.
    Size64K,
}

impl Granule {
    /// The slot size in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            Granule::Size4K => 4096,
            Granule::Size16K => 16384,
            Granule::Size64K => 65536,
        }
    }
}

fn arena_failed() -> ! {
    alloc::alloc::handle_alloc_error(Layout::new::<AtomicU64>())
}

/// Default device address of slot 0.
pub const DEFAULT_BASE: u64 = 0x8000_0000;

/// Table memory for the host, with synthetic device addresses.
///
/// # Invariants
///
/// `cpu` (and `dev` if present) hold `capacity * slot_words` words; bit `i` of `used` is set
/// exactly while slot `i` is allocated; a free slot whose bit in `dirty` is clear holds only
/// zeroes in `cpu`; `base` is aligned to the slot size.
///
/// # Examples
///
/// ```
/// use io_pgtable::host::{Granule, HostAllocator};
/// use io_pgtable::TableAlloc;
///
/// let mem = HostAllocator::new(Granule::Size4K, 2);
/// let t = mem.alloc_table(4096).unwrap();
/// assert_eq!(t.dev, io_pgtable::host::DEFAULT_BASE);
/// assert_eq!(mem.table_cpu(t.dev), t.cpu);
/// assert_eq!(mem.in_use(), 1);
/// // SAFETY: `t` came from `alloc_table(4096)` and is not used any more.
/// unsafe { mem.free_table(t, 4096) };
/// assert_eq!(mem.in_use(), 0);
/// ```
pub struct HostAllocator {
    slot_words: usize,
    capacity: usize,
    base: u64,
    cpu: Box<[AtomicU64]>,
    dev: Option<Box<[AtomicU64]>>,
    used: Box<[AtomicU64]>,
    /// Bit `i` set: slot `i` was handed out before and must be zeroed when reused.
    dirty: Box<[AtomicU64]>,
    in_use: AtomicUsize,
    peak: AtomicUsize,
    syncs: AtomicUsize,
}

/// A zero-filled slice of `n` atomics, straight from the allocator's zeroed memory.
fn zeroed(n: usize) -> Result<Box<[AtomicU64]>, Error> {
    if n == 0 {
        return Ok(Vec::new().into_boxed_slice());
    }
    let layout = Layout::array::<AtomicU64>(n).map_err(|_| Error::NoMemory)?;
    // SAFETY: `layout` has a non-zero size (`n > 0` and `AtomicU64` is not zero-sized).
    let p = unsafe { alloc::alloc::alloc_zeroed(layout) }.cast::<AtomicU64>();
    if p.is_null() {
        return Err(Error::NoMemory);
    }
    // SAFETY: `p` was allocated by the global allocator with the layout of `[AtomicU64; n]`;
    // all-zero bytes are a valid `AtomicU64` (the value 0); the `Box` becomes its only owner.
    Ok(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(p, n)) })
}

impl HostAllocator {
    /// A coherent allocator of `capacity` slots of `granule` bytes.
    ///
    /// The arena is allocated up front; like `Vec`, this aborts through
    /// [`handle_alloc_error`](alloc::alloc::handle_alloc_error) if that fails. Use
    /// [`try_new`](Self::try_new) to get an error instead.
    pub fn new(granule: Granule, capacity: usize) -> Self {
        Self::try_new(granule, capacity).unwrap_or_else(|_| arena_failed())
    }

    /// A non-coherent allocator: the device view changes only on
    /// [`sync_for_device`](TableAlloc::sync_for_device). Aborts like [`new`](Self::new) if
    /// the arena cannot be allocated.
    pub fn new_noncoherent(granule: Granule, capacity: usize) -> Self {
        Self::try_new_noncoherent(granule, capacity).unwrap_or_else(|_| arena_failed())
    }

    /// [`new`](Self::new), returning [`Error::NoMemory`] if the arena cannot be allocated.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`] when the arena is too large for the address space or the global
    /// allocator fails.
    pub fn try_new(granule: Granule, capacity: usize) -> Result<Self, Error> {
        Self::build(granule, capacity, false)
    }

    /// [`new_noncoherent`](Self::new_noncoherent), returning [`Error::NoMemory`] if the arena
    /// cannot be allocated.
    ///
    /// # Errors
    ///
    /// As [`try_new`](Self::try_new).
    pub fn try_new_noncoherent(granule: Granule, capacity: usize) -> Result<Self, Error> {
        Self::build(granule, capacity, true)
    }

    fn build(granule: Granule, capacity: usize, noncoherent: bool) -> Result<Self, Error> {
        let slot_words = granule.bytes() / 8;
        let words = capacity.checked_mul(slot_words).ok_or(Error::NoMemory)?;
        Ok(HostAllocator {
            slot_words,
            capacity,
            base: DEFAULT_BASE,
            cpu: zeroed(words)?,
            dev: if noncoherent {
                Some(zeroed(words)?)
            } else {
                None
            },
            used: zeroed(capacity.div_ceil(64))?,
            dirty: zeroed(capacity.div_ceil(64))?,
            in_use: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            syncs: AtomicUsize::new(0),
        })
    }

    /// The same allocator with slot 0 at device address `base`, rounded down to the slot
    /// size. Addresses that do not fit a descriptor make table allocation fail.
    pub fn with_base(mut self, base: u64) -> Self {
        self.base = base & !(self.slot_bytes() as u64 - 1);
        self
    }

    fn slot_bytes(&self) -> usize {
        self.slot_words * 8
    }

    /// Number of tables currently allocated.
    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Relaxed)
    }

    /// Largest number of tables allocated at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Number of [`sync_for_device`](TableAlloc::sync_for_device) calls so far.
    pub fn syncs(&self) -> usize {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Whether this allocator simulates a non-coherent device view.
    pub fn is_noncoherent(&self) -> bool {
        self.dev.is_some()
    }

    /// Marks the slots of `mask` in bitmap word `word` free (and to be zeroed on reuse).
    fn release(&self, word: usize, mask: u64) {
        if let (Some(dirty), Some(used)) = (self.dirty.get(word), self.used.get(word)) {
            dirty.fetch_or(mask, Ordering::Relaxed);
            used.fetch_and(!mask, Ordering::AcqRel);
        }
    }

    /// Slot index and word offset of a device address inside an allocated slot.
    fn locate(&self, addr: u64) -> Option<(usize, usize)> {
        let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        // Slot sizes are powers of two.
        let slot = off >> self.slot_bytes().trailing_zeros();
        if slot >= self.capacity || addr & 7 != 0 {
            return None;
        }
        let bit = self.used[slot / 64].load(Ordering::Acquire) & (1 << (slot % 64));
        (bit != 0).then_some((slot, off / 8))
    }
}

// SAFETY: Each slot is handed out at most once until freed (the `used` bitmap is updated with
// compare-and-swap), slots do not overlap, are 8-byte aligned words inside `cpu`, which lives
// as long as `self`, and are zero when returned (fresh arena memory is zeroed, reused slots are
// zeroed on allocation, see the `dirty` invariant); `table_cpu` maps a slot's device
// address back to the same pointer and otherwise returns a dangling pointer it never reads.
unsafe impl TableAlloc for HostAllocator {
    fn alloc_table(&self, size: usize) -> Option<TableMem> {
        if size > self.slot_bytes() {
            return None;
        }
        for (w, word) in self.used.iter().enumerate() {
            let mut cur = word.load(Ordering::Relaxed);
            loop {
                let free = !cur;
                if free == 0 {
                    break;
                }
                let bit = free.trailing_zeros() as usize;
                let slot = w * 64 + bit;
                if slot >= self.capacity {
                    break;
                }
                match word.compare_exchange(
                    cur,
                    cur | (1 << bit),
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        let start = slot * self.slot_words;
                        let words = &self.cpu[start..start + self.slot_words];
                        let was_dirty = self.dirty[w].fetch_and(!(1 << bit), Ordering::Relaxed);
                        if was_dirty & (1 << bit) != 0 {
                            // SAFETY: The slot's words are in bounds (`words`) and the slot
                            // is ours alone: the compare-and-swap above took it, and a freed
                            // table is reachable from no descriptor, so nothing else accesses
                            // it. All-zero bytes are a valid `AtomicU64`. One `memset` is
                            // what a kernel's zeroed page allocation costs too.
                            unsafe {
                                core::ptr::write_bytes(
                                    words.as_ptr().cast::<AtomicU64>().cast_mut(),
                                    0,
                                    words.len(),
                                )
                            };
                        }
                        let Some(dev) = self.base.checked_add((start * 8) as u64) else {
                            // Not addressable: give the (zeroed) slot back.
                            self.used[w].fetch_and(!(1 << bit), Ordering::AcqRel);
                            return None;
                        };
                        let n = self.in_use.fetch_add(1, Ordering::Relaxed) + 1;
                        self.peak.fetch_max(n, Ordering::Relaxed);
                        return Some(TableMem {
                            cpu: NonNull::from(words).cast::<AtomicU64>(),
                            dev,
                        });
                    }
                    Err(now) => cur = now,
                }
            }
        }
        None
    }

    unsafe fn free_table(&self, table: TableMem, _size: usize) {
        if let Some((slot, _)) = self.locate(table.dev) {
            self.dirty[slot / 64].fetch_or(1 << (slot % 64), Ordering::Relaxed);
            self.used[slot / 64].fetch_and(!(1 << (slot % 64)), Ordering::AcqRel);
            self.in_use.fetch_sub(1, Ordering::Relaxed);
        }
    }

    unsafe fn free_tables(&self, tables: &[TableMem], _size: usize) {
        // Consecutive slots in one bitmap word (the common case: tables allocated one after
        // the other) are released with one update of each bitmap.
        let mut word = usize::MAX;
        let mut mask = 0u64;
        let mut count = 0;
        for t in tables {
            let Some((slot, _)) = self.locate(t.dev) else {
                continue;
            };
            if slot / 64 != word {
                self.release(word, mask);
                word = slot / 64;
                mask = 0;
            }
            mask |= 1 << (slot % 64);
            count += 1;
        }
        self.release(word, mask);
        self.in_use.fetch_sub(count, Ordering::Relaxed);
    }

    fn table_cpu(&self, dev: u64) -> NonNull<AtomicU64> {
        match self.locate(dev) {
            Some((slot, word)) => {
                // Derive the pointer from the rest of the slot so it may cover the table.
                let end = (slot + 1) * self.slot_words;
                NonNull::from(&self.cpu[word..end]).cast::<AtomicU64>()
            }
            None => NonNull::dangling(),
        }
    }

    fn sync_for_device(&self, dev: u64, len: usize) {
        self.syncs.fetch_add(1, Ordering::Relaxed);
        let Some(view) = &self.dev else { return };
        let Some((_, first)) = self.locate(dev) else {
            return;
        };
        let end = first.saturating_add(len.div_ceil(8)).min(self.cpu.len());
        for i in first..end {
            view[i].store(self.cpu[i].load(Ordering::Acquire), Ordering::Release);
        }
    }
}

impl PhysMem for HostAllocator {
    /// Reads the device view (the CPU view when coherent) of an allocated slot.
    fn read_u64(&self, addr: u64) -> Option<u64> {
        let (_, word) = self.locate(addr)?;
        let view = self.dev.as_deref().unwrap_or(&self.cpu);
        Some(view[word].load(Ordering::Acquire))
    }
}

impl core::fmt::Debug for HostAllocator {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        f.debug_struct("HostAllocator")
            .field("slot_bytes", &self.slot_bytes())
            .field("capacity", &self.capacity)
            .field("base", &self.base)
            .field("in_use", &self.in_use())
            .field("noncoherent", &self.is_noncoherent())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 512 words of a live 4K table of `_mem`.
    fn words(_mem: &HostAllocator, t: TableMem) -> &[AtomicU64] {
        // SAFETY: `t` is a live table of `_mem`, whose 4K slots are handed out whole, so 4096
        // bytes are valid for atomic access; callers stop using the slice before freeing `t`.
        unsafe { core::slice::from_raw_parts(t.cpu.as_ptr(), 512) }
    }

    #[test]
    fn arena_too_large_is_an_error() {
        assert_eq!(
            HostAllocator::try_new(Granule::Size64K, usize::MAX).err(),
            Some(Error::NoMemory)
        );
        assert!(HostAllocator::try_new(Granule::Size4K, 0).is_ok());
    }

    #[test]
    fn noncoherent_view_changes_only_on_sync() {
        let mem = HostAllocator::new_noncoherent(Granule::Size4K, 2);
        let t = mem.alloc_table(4096).unwrap();
        words(&mem, t)[3].store(0x1234, Ordering::Relaxed);
        assert_eq!(mem.read_u64(t.dev + 24), Some(0));
        mem.sync_for_device(t.dev + 24, 8);
        assert_eq!(mem.read_u64(t.dev + 24), Some(0x1234));
        assert_eq!(mem.read_u64(t.dev + 4), None);
        assert_eq!(mem.read_u64(t.dev + 4096), None, "slot 1 is not allocated");
        // SAFETY: `t` came from `alloc_table(4096)`; its words are not used after this.
        unsafe { mem.free_table(t, 4096) };
        assert_eq!(mem.read_u64(t.dev + 24), None);
    }

    #[test]
    fn reused_slot_is_zeroed_and_capacity_is_enforced() {
        let mem = HostAllocator::new(Granule::Size4K, 1).with_base(0x1_0000_0123);
        let t = mem.alloc_table(64).unwrap();
        assert_eq!(t.dev, 0x1_0000_0000);
        assert!(mem.alloc_table(64).is_none());
        assert!(mem.alloc_table(8192).is_none());
        words(&mem, t)[511].store(7, Ordering::Relaxed);
        // SAFETY: `t` came from `alloc_table(64)` and is not used any more.
        unsafe { mem.free_table(t, 64) };
        let t2 = mem.alloc_table(4096).unwrap();
        assert_eq!(t2.dev, t.dev);
        assert_eq!(mem.read_u64(t2.dev + 511 * 8), Some(0));
        assert_eq!(mem.peak(), 1);
        mem.sync_for_device(t2.dev, usize::MAX);
        // SAFETY: As above.
        unsafe { mem.free_table(t2, 4096) };
        // A base at the top of the address space: only slot 0 is addressable.
        let top = HostAllocator::new(Granule::Size4K, 2).with_base(u64::MAX);
        let t = top.alloc_table(64).unwrap();
        assert!(top.alloc_table(64).is_none());
        assert_eq!(top.in_use(), 1);
        // SAFETY: As above.
        unsafe { top.free_table(t, 64) };
    }
}
