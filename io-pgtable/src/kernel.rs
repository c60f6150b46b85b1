// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Kernel adapters, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! [`KernelTableAlloc`] gives the page-table code zeroed tables from the kernel's slab
//! (`kmalloc` with the caller's GFP flags plus `__GFP_ZERO`, naturally aligned to the table
//! size), with the table's *physical* address as its device address, which is what a
//! cache-coherent walker (an SMMU or a Mali MMU with coherency enabled) is given. It also keeps
//! a fixed-capacity record of the live tables, so it can act as the [`PhysMem`] a software walk
//! reads through ([`walker::walk`](crate::walker::walk)), and so exhausting it is a plain
//! `None` from [`TableAlloc::alloc_table`] (which the page table reports as `ENOMEM`).
//!
//! A walker that does not snoop CPU caches needs its tables DMA-mapped for a `struct device`
//! (`dma_map_single`/`dma_sync_single_for_device`); that allocator belongs to a driver with a
//! bound device and is not provided here.

use core::alloc::Layout;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ::kernel::alloc::allocator::Kmalloc;
use ::kernel::alloc::{flags::__GFP_ZERO, Allocator, Flags, NumaNode};

use crate::memory::{TableAlloc, TableMem};
use crate::walker::PhysMem;
use crate::Error;

impl From<Error> for ::kernel::error::Error {
    fn from(e: Error) -> Self {
        ::kernel::error::Error::from_errno(e.to_errno())
    }
}

extern "C" {
    fn gpukit_io_pgtable_virt_to_phys(addr: *const core::ffi::c_void) -> u64;
    fn gpukit_io_pgtable_phys_to_virt(phys: u64) -> *mut core::ffi::c_void;
}

/// Table memory from the kernel's slab, addressed physically, for at most `CAP` live tables.
///
/// # Invariants
///
/// A non-zero `slots[i]` is `dev | log2(size)` of a live table: `size` bytes (a power of two,
/// at least 64) of `kmalloc` memory at `phys_to_virt(dev)`, allocated with `Layout { size,
/// align: size }` and zeroed when handed out. `live` counts the non-zero slots.
pub struct KernelTableAlloc<const CAP: usize> {
    flags: Flags,
    slots: [AtomicU64; CAP],
    live: AtomicUsize,
}

impl<const CAP: usize> KernelTableAlloc<CAP> {
    /// An allocator that allocates with `flags` (e.g. `GFP_KERNEL`; `__GFP_ZERO` is added).
    pub fn new(flags: Flags) -> Self {
        KernelTableAlloc {
            flags,
            slots: [const { AtomicU64::new(0) }; CAP],
            live: AtomicUsize::new(0),
        }
    }

    /// Number of tables currently allocated.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    fn cpu_of(dev: u64) -> *mut u8 {
        // SAFETY: `phys_to_virt` only computes an address.
        unsafe { gpukit_io_pgtable_phys_to_virt(dev) }.cast()
    }

    /// The live table containing physical address `addr`, as `(dev, size)`.
    fn find(&self, addr: u64) -> Option<(u64, u64)> {
        self.slots.iter().find_map(|s| {
            let v = s.load(Ordering::Acquire);
            let size = 1u64 << (v & 63);
            let dev = v & !63;
            (v != 0 && addr >= dev && addr - dev < size).then_some((dev, size))
        })
    }
}

// SAFETY: Tables are fresh `__GFP_ZERO` allocations of `size` bytes aligned to `size` (so 8-byte
// aligned and never overlapping while live); `table_cpu(dev)` is `phys_to_virt(dev)`, the
// inverse of the `virt_to_phys` that produced `dev` for direct-mapped slab memory; all state
// is atomic, so the allocator is `Sync`.
unsafe impl<const CAP: usize> TableAlloc for KernelTableAlloc<CAP> {
    fn alloc_table(&self, size: usize) -> Option<TableMem> {
        if !size.is_power_of_two() || size < 64 {
            return None;
        }
        let layout = Layout::from_size_align(size, size).ok()?;
        let mem = Kmalloc::alloc(layout, self.flags | __GFP_ZERO, NumaNode::NO_NODE).ok()?;
        let cpu = mem.cast::<u8>();
        // SAFETY: `virt_to_phys` only computes an address; `cpu` is direct-mapped slab memory.
        let dev = unsafe { gpukit_io_pgtable_virt_to_phys(cpu.as_ptr().cast()) };
        let tag = dev | u64::from(size.trailing_zeros());
        let claimed = self.slots.iter().any(|s| {
            s.compare_exchange(0, tag, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        });
        if !claimed {
            // SAFETY: `cpu` was allocated just above with `layout` and handed to nobody.
            unsafe { Kmalloc::free(cpu, layout) };
            return None;
        }
        self.live.fetch_add(1, Ordering::AcqRel);
        Some(TableMem {
            cpu: cpu.cast(),
            dev,
        })
    }

    unsafe fn free_table(&self, table: TableMem, size: usize) {
        let tag = table.dev | u64::from(size.trailing_zeros());
        if let Some(s) = self.slots.iter().find(|s| s.load(Ordering::Acquire) == tag) {
            s.store(0, Ordering::Release);
            self.live.fetch_sub(1, Ordering::AcqRel);
        }
        if let Ok(layout) = Layout::from_size_align(size, size) {
            // SAFETY: The caller guarantees `table` came from `alloc_table(size)`, i.e. from
            // `Kmalloc` with this layout, and is no longer used.
            unsafe { Kmalloc::free(table.cpu.cast(), layout) };
        }
    }

    fn table_cpu(&self, dev: u64) -> NonNull<AtomicU64> {
        NonNull::new(Self::cpu_of(dev).cast()).unwrap_or(NonNull::dangling())
    }

    fn sync_for_device(&self, _dev: u64, _len: usize) {
        // The walker is cache coherent (see the module documentation); order the CPU's writes
        // before whatever tells the walker to look.
        core::sync::atomic::fence(Ordering::SeqCst);
    }
}

impl<const CAP: usize> PhysMem for KernelTableAlloc<CAP> {
    fn read_u64(&self, addr: u64) -> Option<u64> {
        if addr % 8 != 0 {
            return None;
        }
        let (dev, _) = self.find(addr)?;
        let cpu = Self::cpu_of(dev).wrapping_add(usize::try_from(addr - dev).ok()?);
        // SAFETY: `addr` lies inside a live table (the type invariant), 8-byte aligned; its
        // words are only accessed atomically.
        Some(unsafe { &*cpu.cast::<AtomicU64>() }.load(Ordering::Acquire))
    }
}

impl<const CAP: usize> Drop for KernelTableAlloc<CAP> {
    fn drop(&mut self) {
        // Tables still recorded here were leaked by their owner (a page table frees all of its
        // tables when dropped); give the memory back rather than lose it.
        for s in &self.slots {
            let v = s.swap(0, Ordering::AcqRel);
            if v != 0 {
                let size = 1usize << (v & 63);
                if let (Some(cpu), Ok(layout)) = (
                    NonNull::new(Self::cpu_of(v & !63)),
                    Layout::from_size_align(size, size),
                ) {
                    // SAFETY: A recorded table is live `Kmalloc` memory of this layout, and
                    // with `&mut self` nobody can use it any more.
                    unsafe { Kmalloc::free(cpu, layout) };
                }
            }
        }
    }
}

mod kunit;
