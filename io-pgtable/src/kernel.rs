// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Kernel adapters, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! # Table memory and the DMA API
//!
//! A GPU's MMU walks its page tables itself, reading descriptors from memory by *bus address*
//! (the address the device uses, which an IOMMU in front of the GPU may translate, and which
//! on other systems equals the physical address). The kernel hands out such addresses only
//! through the DMA API of the device's `struct device`: a table is ordinary `kmalloc` memory
//! mapped with `dma_map_single`, and its descriptors hold the address that call returned.
//!
//! Whether the walker sees what the CPU wrote depends on the interconnect. A walker that
//! snoops the CPU caches (`coherent_walk`; "dma-coherent" in the device tree) reads the latest
//! values. One that does not, like the Mali-G610 of the RK3588, reads memory behind the
//! caches, so every batch of descriptor writes must be cleaned to memory with
//! `dma_sync_single_for_device` before the walker may look, as `io-pgtable-arm.c` does.
//!
//! [`DmaTableAlloc`] is that allocator: zeroed tables from `kmalloc` (the caller's GFP flags),
//! each `dma_map_single`d `DMA_TO_DEVICE` for the given device; a sync of the written range
//! after every batch when the walker is not coherent, and no cache maintenance at all when
//! it is; `dma_unmap_single` when a table is freed. `CONFIG_DMA_API_DEBUG` checks every one of
//! those calls. The device address never comes from `virt_to_phys`.
//!
//! The table code finds a table's CPU view from the device address in a descriptor
//! ([`TableAlloc::table_cpu`]); the DMA API gives no arithmetic for that, so the allocator
//! keeps an open-addressed hash table of its live tables, filled when a table is allocated and
//! read without locks. Without an IOMMU in front of the device (and without bounce buffers),
//! though, `dma_map_single` of `kmalloc` memory returns its physical address, and every table
//! lies at the same distance from its device address (the kernel's linear map). The allocator
//! notices: while every table it has handed out lies at one distance from its device address,
//! the CPU view is that one addition, as `__va()` is for `io-pgtable-arm.c`; the first table
//! that does not (an IOMMU, a bounce buffer) turns the shortcut off for good, and lookups go
//! through the index.
//!
//! The sync after a write names the table it wrote
//! ([`TableAlloc::sync_table_for_device`]): the page-table code always knows it, and its
//! device address is the handle of that table's own mapping, so the sync needs no lookup.
//! A sync by address alone ([`TableAlloc::sync_for_device`], a safe call anyone may make)
//! still looks its table up in the index and syncs only ranges inside a live mapping.

use core::alloc::Layout;
use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use ::kernel::alloc::allocator::Kmalloc;
use ::kernel::alloc::{flags::__GFP_ZERO, Allocator, Flags, KVec, NumaNode};
use ::kernel::device::Device;
use ::kernel::prelude::*;
use ::kernel::sync::aref::ARef;
use ::kernel::sync::{new_spinlock, SpinLock};

use crate::memory::{TableAlloc, TableMem};
use crate::walker::PhysMem;
use crate::Error;

impl From<Error> for ::kernel::error::Error {
    fn from(e: Error) -> Self {
        ::kernel::error::Error::from_errno(e.to_errno())
    }
}

// `kernel/dma.c`. The device is passed as an untyped pointer: `struct device` embeds types
// that bindgen leaves opaque, which the FFI-safety lint rejects in a by-pointer declaration.
extern "C" {
    fn gpukit_io_pgtable_dma_map(
        dev: *mut c_void,
        cpu: *mut c_void,
        size: usize,
        coherent: bool,
        dma_out: *mut u64,
    ) -> c_int;
    fn gpukit_io_pgtable_dma_sync(dev: *mut c_void, dma: u64, off: usize, len: usize);
    fn gpukit_io_pgtable_dma_unmap(dev: *mut c_void, dma: u64, size: usize, coherent: bool);
}

/// A slot of the live-table index that never held a table.
const EMPTY: u64 = 0;
/// A slot whose table was freed: lookups go on past it, inserts may reuse it.
const TOMBSTONE: u64 = 1;
/// Set in the key of every live table (`TOMBSTONE` does not have it).
const LIVE: u64 = 0x20;
/// Smallest table: 64 bytes (eight descriptors), so the low six bits of its address are free.
const MIN_SHIFT: u32 = 6;
/// Largest table: one 64 KiB granule.
const MAX_SHIFT: u32 = 16;

/// No table handed out yet: whether CPU and device addresses are a fixed distance apart is
/// not known.
const LINEAR_UNKNOWN: u8 = 0;
/// Every table handed out so far lies at `delta` bytes from its device address.
const LINEAR: u8 = 1;
/// Some table did not: CPU views come from the index only.
const NOT_LINEAR: u8 = 2;

/// The index key of the live table at device address `dma` of `1 << shift` bytes.
fn key(dma: u64, shift: u32) -> u64 {
    dma | LIVE | u64::from(shift - MIN_SHIFT)
}

/// One slot of the live-table index.
struct Entry {
    key: AtomicU64,
    cpu: AtomicPtr<u8>,
}

/// Page-table memory DMA-mapped for a device (see the [module documentation](self)).
///
/// # Invariants
///
/// - Every index slot whose key has [`LIVE`] set describes one live table: `1 << shift` bytes
///   of `kmalloc` memory at `cpu` (allocated with `Layout { size, align: size }`), mapped
///   for `dev` at device address `dma` (aligned to its size) with `dma_map_single`, and not
///   yet unmapped. `live` counts those slots and never exceeds `max`.
/// - A slot's key goes from `EMPTY` to a live key and from a live key to `TOMBSTONE` or
///   `TOMBSTONE` to a live key, never back to `EMPTY`, so the probe sequence of a live key
///   from its hash to its slot never crosses an `EMPTY` slot. Keys are written under
///   `write_lock`; `cpu` is written before the key (release) and read after it (acquire).
/// - While `linear` is [`LINEAR`], every table recorded so far has its CPU view at its
///   device address plus `delta` (wrapping). `linear` goes from [`LINEAR_UNKNOWN`] to
///   [`LINEAR`] or [`NOT_LINEAR`], and from [`LINEAR`] to [`NOT_LINEAR`], under `write_lock`
///   and before the table that decided it is recorded; `delta` is written once, before
///   `linear` becomes [`LINEAR`] (release; read after an acquire load of `linear`).
#[pin_data(PinnedDrop)]
pub struct DmaTableAlloc {
    dev: ARef<Device>,
    coherent: bool,
    flags: Flags,
    index: KVec<Entry>,
    /// `index.len() - 1` (a power of two minus one).
    mask: usize,
    max: usize,
    live: AtomicUsize,
    /// Bit `s` is set once a table of `1 << s` bytes has been handed out.
    shifts: AtomicU32,
    /// Whether the CPU view of every table is its device address plus `delta`.
    linear: AtomicU8,
    delta: AtomicU64,
    syncs: AtomicU64,
    #[pin]
    write_lock: SpinLock<()>,
}

impl DmaTableAlloc {
    /// An allocator of at most `max_tables` live tables for the page tables of `dev`.
    ///
    /// `coherent` must match the page table's `coherent_walk`: a coherent walker gets no
    /// cache maintenance (`DMA_ATTR_SKIP_CPU_SYNC`), a non-coherent one a sync after every
    /// write batch. `dev` must have a DMA mask that covers the memory `flags` allocates from.
    /// The index of live tables (`2 * max_tables` slots rounded up to a power of two) is
    /// allocated here, with `flags`.
    pub fn new(
        dev: &Device,
        coherent: bool,
        max_tables: usize,
        flags: Flags,
    ) -> Result<Pin<KBox<Self>>> {
        let slots = max_tables
            .checked_mul(2)
            .and_then(usize::checked_next_power_of_two)
            .ok_or(EINVAL)?
            .max(2);
        let mut index = KVec::with_capacity(slots, flags)?;
        for _ in 0..slots {
            index.push(
                Entry {
                    key: AtomicU64::new(EMPTY),
                    cpu: AtomicPtr::new(core::ptr::null_mut()),
                },
                flags,
            )?;
        }
        KBox::pin_init(
            pin_init!(DmaTableAlloc {
                dev: dev.into(),
                coherent,
                flags,
                index,
                mask: slots - 1,
                max: max_tables,
                live: AtomicUsize::new(0),
                shifts: AtomicU32::new(0),
                linear: AtomicU8::new(LINEAR_UNKNOWN),
                delta: AtomicU64::new(0),
                syncs: AtomicU64::new(0),
                write_lock <- new_spinlock!(()),
            }),
            flags,
        )
    }

    /// Number of tables currently allocated.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Acquire)
    }

    /// How many `dma_sync_single_range_for_device` calls were made (none when coherent).
    ///
    /// A statistic: syncs made at the same time from several threads (through the page
    /// table's `_shared` operations) may be counted once.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Counts a sync: a load and a store, not a locked increment, which QEMU's translator
    /// makes a helper call (on every map and unmap of a non-coherent walker).
    #[inline(always)]
    fn count_sync(&self) {
        let n = self.syncs.load(Ordering::Relaxed);
        self.syncs.store(n.wrapping_add(1), Ordering::Relaxed);
    }

    /// Whether the walker is coherent (no cache maintenance).
    pub fn is_coherent(&self) -> bool {
        self.coherent
    }

    /// Whether every table handed out so far lies at one fixed distance from its device
    /// address, so that [`TableAlloc::table_cpu`] is an addition rather than an index lookup
    /// (see the [module documentation](self)).
    pub fn is_linear(&self) -> bool {
        self.linear.load(Ordering::Acquire) == LINEAR
    }

    fn raw_dev(&self) -> *mut c_void {
        // `Device` is `repr(transparent)` over `Opaque<bindings::device>`, itself transparent
        // over the C struct: the address of one is the address of the other.
        core::ptr::from_ref::<Device>(&*self.dev)
            .cast::<c_void>()
            .cast_mut()
    }

    fn home(&self, k: u64) -> usize {
        // Fibonacci hashing of the address bits above the smallest table size.
        let h = (k >> MIN_SHIFT).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 32) as usize & self.mask
    }

    /// The CPU address of the live table with key `k`.
    fn lookup(&self, k: u64) -> Option<NonNull<u8>> {
        let mut i = self.home(k);
        for _ in 0..=self.mask {
            let e = self.index.get(i)?;
            match e.key.load(Ordering::Acquire) {
                EMPTY => return None,
                found if found == k => return NonNull::new(e.cpu.load(Ordering::Relaxed)),
                _ => i = (i + 1) & self.mask,
            }
        }
        None
    }

    /// The live table containing device address `addr`: its base, CPU view and size.
    fn containing(&self, addr: u64) -> Option<(u64, NonNull<u8>, usize)> {
        // Only the sizes handed out so far (usually one or two: the granule and the PGD's).
        let mut shifts = self.shifts.load(Ordering::Acquire);
        while shifts != 0 {
            let s = shifts.trailing_zeros();
            shifts &= shifts - 1;
            let base = addr & !((1u64 << s) - 1);
            if let Some(cpu) = self.lookup(key(base, s)) {
                return Some((base, cpu, 1usize << s));
            }
        }
        None
    }

    /// The CPU view of the live table at `dev`, found through the index.
    #[inline(never)]
    fn table_cpu_indexed(&self, dev: u64) -> NonNull<AtomicU64> {
        self.containing(dev)
            .filter(|(base, _, _)| *base == dev)
            .map_or(NonNull::dangling(), |(_, cpu, _)| cpu.cast())
    }

    /// Records a new live table at device address `dma`; `false` (nothing recorded) when
    /// `max` tables are live.
    fn insert(&self, k: u64, dma: u64, cpu: NonNull<u8>) -> bool {
        let _guard = self.write_lock.lock();
        if self.live.load(Ordering::Relaxed) >= self.max {
            return false;
        }
        // INVARIANT: the linear shortcut is decided before the table becomes findable.
        let delta = (cpu.as_ptr() as u64).wrapping_sub(dma);
        match self.linear.load(Ordering::Relaxed) {
            LINEAR_UNKNOWN => {
                self.delta.store(delta, Ordering::Relaxed);
                self.linear.store(LINEAR, Ordering::Release);
            }
            LINEAR if self.delta.load(Ordering::Relaxed) != delta => {
                self.linear.store(NOT_LINEAR, Ordering::Release);
            }
            _ => {}
        }
        let mut i = self.home(k);
        for _ in 0..=self.mask {
            let Some(e) = self.index.get(i) else {
                return false;
            };
            let old = e.key.load(Ordering::Relaxed);
            if old == EMPTY || old == TOMBSTONE {
                e.cpu.store(cpu.as_ptr(), Ordering::Relaxed);
                // INVARIANT: `cpu` is published before the key that makes it findable.
                e.key.store(k, Ordering::Release);
                self.live.fetch_add(1, Ordering::AcqRel);
                return true;
            }
            i = (i + 1) & self.mask;
        }
        false
    }

    /// Forgets the live table with key `k`, returning its CPU address.
    fn remove(&self, k: u64) -> Option<NonNull<u8>> {
        let _guard = self.write_lock.lock();
        let mut i = self.home(k);
        for _ in 0..=self.mask {
            let e = self.index.get(i)?;
            match e.key.load(Ordering::Relaxed) {
                EMPTY => return None,
                found if found == k => {
                    e.key.store(TOMBSTONE, Ordering::Release);
                    self.live.fetch_sub(1, Ordering::AcqRel);
                    return NonNull::new(e.cpu.load(Ordering::Relaxed));
                }
                _ => i = (i + 1) & self.mask,
            }
        }
        None
    }

    /// Unmaps and frees a table that is no longer recorded.
    ///
    /// # Safety
    ///
    /// `cpu`/`dma` are a table of `1 << shift` bytes mapped by this allocator and not yet
    /// unmapped, which nothing uses any more.
    unsafe fn release(&self, cpu: NonNull<u8>, dma: u64, shift: u32) {
        let size = 1usize << shift;
        // SAFETY: As the caller guarantees, `dma` is a live mapping of `size` bytes for this
        // device, made with the same coherence attribute.
        unsafe { gpukit_io_pgtable_dma_unmap(self.raw_dev(), dma, size, self.coherent) };
        if let Ok(layout) = Layout::from_size_align(size, size) {
            // SAFETY: `cpu` came from `Kmalloc` with this layout and is no longer used.
            unsafe { Kmalloc::free(cpu, layout) };
        }
    }
}

// SAFETY: Tables are fresh `__GFP_ZERO` allocations of `size` bytes aligned to `size` (so 8-byte
// aligned and not overlapping while live), whose device addresses are checked to be aligned
// to `size` too; `table_cpu(dev)` returns the CPU address recorded for `dev` when the table
// was allocated (type invariants); all shared state is atomic or behind `write_lock`, so the
// allocator is `Sync`.
unsafe impl TableAlloc for DmaTableAlloc {
    fn alloc_table(&self, size: usize) -> Option<TableMem> {
        if !size.is_power_of_two() || !(MIN_SHIFT..=MAX_SHIFT).contains(&size.trailing_zeros()) {
            return None;
        }
        let shift = size.trailing_zeros();
        let layout = Layout::from_size_align(size, size).ok()?;
        let cpu = Kmalloc::alloc(layout, self.flags | __GFP_ZERO, NumaNode::NO_NODE).ok()?;
        let cpu = cpu.cast::<u8>();
        let mut dma = 0u64;
        // SAFETY: `cpu` is `size` bytes of `kmalloc` memory owned here; `dev` is a live device
        // (we hold a reference).
        let ret = unsafe {
            gpukit_io_pgtable_dma_map(
                self.raw_dev(),
                cpu.as_ptr().cast(),
                size,
                self.coherent,
                &mut dma,
            )
        };
        if ret != 0 {
            // SAFETY: Allocated above with `layout`, handed to nobody.
            unsafe { Kmalloc::free(cpu, layout) };
            return None;
        }
        // A descriptor can only hold a table address aligned to the table's size (an IOMMU
        // could return one that is not), and the index would not find it either.
        if dma % (size as u64) != 0 || !self.insert(key(dma, shift), dma, cpu) {
            // SAFETY: Mapped above and never recorded or handed out.
            unsafe { self.release(cpu, dma, shift) };
            return None;
        }
        self.shifts.fetch_or(1 << shift, Ordering::AcqRel);
        Some(TableMem {
            cpu: cpu.cast(),
            dev: dma,
        })
    }

    unsafe fn free_table(&self, table: TableMem, size: usize) {
        if !size.is_power_of_two() {
            return;
        }
        let shift = size.trailing_zeros();
        if let Some(cpu) = self.remove(key(table.dev, shift)) {
            // SAFETY: The table was live (it was recorded) and the caller no longer uses it.
            unsafe { self.release(cpu, table.dev, shift) };
        }
    }

    // Every step of a walk asks: the common case, one addition, is inlined into the walk, and
    // the index lookup stays out of line (a kernel build pays for every call).
    #[inline]
    fn table_cpu(&self, dev: u64) -> NonNull<AtomicU64> {
        if self.linear.load(Ordering::Acquire) == LINEAR {
            // Every live table lies at `delta` from its device address (type invariants), so
            // for a live table's `dev` this is its CPU view; for anything else the trait lets
            // us return any pointer, and nothing here dereferences it.
            let cpu = dev.wrapping_add(self.delta.load(Ordering::Relaxed)) as usize;
            return NonNull::new(core::ptr::with_exposed_provenance_mut::<AtomicU64>(cpu))
                .unwrap_or(NonNull::dangling());
        }
        self.table_cpu_indexed(dev)
    }

    fn sync_for_device(&self, dev: u64, len: usize) {
        if self.coherent {
            return;
        }
        let Some((base, _, size)) = self.containing(dev) else {
            return;
        };
        let off = (dev - base) as usize;
        let len = len.min(size - off);
        // SAFETY: `base` is a live mapping of `size` bytes for this device and
        // `off + len <= size`.
        unsafe { gpukit_io_pgtable_dma_sync(self.raw_dev(), base, off, len) };
        self.count_sync();
    }

    unsafe fn sync_table_for_device(&self, table: TableMem, off: usize, len: usize) {
        if self.coherent {
            return;
        }
        // SAFETY: `table` is live (the caller's guarantee), so it is a mapping of at least
        // `off + len` bytes at `table.dev` for this device (each table is mapped on its own).
        unsafe { gpukit_io_pgtable_dma_sync(self.raw_dev(), table.dev, off, len) };
        self.count_sync();
    }

    fn syncs_for_device(&self) -> bool {
        true
    }
}

impl PhysMem for DmaTableAlloc {
    fn read_u64(&self, addr: u64) -> Option<u64> {
        if addr % 8 != 0 {
            return None;
        }
        let (base, cpu, _) = self.containing(addr)?;
        let word = cpu.as_ptr().wrapping_add((addr - base) as usize);
        // SAFETY: `addr` lies inside a live table (type invariants), 8-byte aligned; its
        // words are only accessed atomically.
        Some(unsafe { &*word.cast::<AtomicU64>() }.load(Ordering::Acquire))
    }
}

#[pinned_drop]
impl PinnedDrop for DmaTableAlloc {
    fn drop(self: Pin<&mut Self>) {
        // Tables still recorded were leaked by their owner (a page table frees all of its
        // tables when dropped): unmap and free them rather than lose them.
        for e in self.index.iter() {
            let k = e.key.load(Ordering::Acquire);
            if k & LIVE == 0 {
                continue;
            }
            e.key.store(TOMBSTONE, Ordering::Relaxed);
            if let Some(cpu) = NonNull::new(e.cpu.load(Ordering::Relaxed)) {
                let shift = (k & 0x1f) as u32 + MIN_SHIFT;
                // SAFETY: A live slot describes a mapped table (type invariants), and with
                // the allocator being dropped nothing can use it any more.
                unsafe { self.release(cpu, k & !0x3f, shift) };
            }
        }
    }
}

mod kunit;
#[cfg(CONFIG_GPUKIT_VS_C)]
mod vs_c;
