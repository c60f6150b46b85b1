// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The kernel backend's DMA memory: the DMA API on the GPU's `struct device`.
//!
//! A device reaches system memory by *DMA address* (bus address): the physical address on a
//! system without an IOMMU, an I/O virtual address behind one. A driver never makes one up:
//! it asks the DMA API, which returns for each block both names, the DMA address to write into
//! page tables and registers and the kernel virtual address to fill it through. A coherent
//! block (`dma_alloc_attrs`) needs no cache maintenance: what the CPU writes, the device reads.
//! The device's reach is declared first, as DMA masks of as many bits as its physical
//! addresses have (the Mali-G610 reports 40), so that the kernel never hands out a block the
//! device cannot address.
//!
//! Here the device is the simulated Mali-G610 compiled into the kernel, and its bus is a
//! [`DmaBus`]: every block the driver allocates is attached to the simulator's memory map at
//! the DMA address the kernel chose ([`SimMemory::attach`]), so the simulated MMU walks the
//! driver's real page-table pages and the command-stream engine reads and writes the driver's
//! real buffers, at the addresses the driver wrote. An address the DMA API did not hand out
//! (or took back) is unbacked: the simulated GPU sees a bus fault where an IOMMU would fault.
//! With `CONFIG_DMA_API_DEBUG` the kernel checks every free against its allocation (size,
//! address, device).
//!
//! Each block is one coherent allocation, so it is contiguous in DMA space, as the driver's
//! [`DmaMemory`] contract asks; the kernel aligns a block to its size rounded up to a power of
//! two pages, and a block that must be aligned more (a 2 MiB-aligned buffer object smaller
//! than that) is carved from a larger one. Blocks come from the page allocator, so one is at
//! most `MAX_PAGE_ORDER` pages (4 MiB on x86-64) without CMA; larger requests fail with
//! `ENOMEM`. A real Mali backend would back buffer objects with shmem pages mapped through
//! `dma_map_sgtable` instead, as panthor does; the page tables and firmware memory would stay
//! coherent blocks like these.
//!
//! The wrappers over `dma_alloc_attrs`/`dma_free_attrs` and the mask setters are thin calls
//! into `bindings`: Linux 7.2's `kernel::dma::Coherent` needs a `Device<Bound>` at every
//! allocation, and the driver allocates from paths that hold none (ioctls, bind jobs), while
//! a block's lifetime is the driver object that owns it.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use ::kernel::bindings;
use ::kernel::device::Device;
use ::kernel::error::to_result;
use ::kernel::ffi::c_ulong;
use ::kernel::sync::{aref::ARef, Arc};
use ::kernel::{pr_warn, prelude::GFP_KERNEL};

use drm_ctx::drm::gem::CpuPage;
use mali_sim::kernel::{KernelFrames, KernelLocks as SimLocks};
use mali_sim::{MemConfig, PhysAddr, PhysMemory, SimError, SimMemory};

use crate::backend::{DmaMemory, DmaRegion, PAGE_SIZE};
use crate::{Error, Result};

/// Pages of DMA memory the backends hold, all devices together.
static LIVE_DMA_PAGES: AtomicUsize = AtomicUsize::new(0);

/// How many pages of DMA memory the kernel backends hold, all devices together: a leak
/// counter for tests (0 once every block is freed).
pub fn live_pages() -> usize {
    LIVE_DMA_PAGES.load(Ordering::Relaxed)
}

fn sim_err(e: SimError) -> Error {
    Error::from_errno(e.to_errno())
}

fn kernel_err(e: ::kernel::error::Error) -> Error {
    Error::from_errno(e.to_errno())
}

/// The simulated GPU's bus: the blocks of DMA memory the driver holds, at their DMA
/// addresses, on one device.
///
/// # Invariants
///
/// Every run attached to `map` is a live coherent allocation of `dev`, made by
/// [`DmaBus::alloc_block`] at the DMA address it is attached at, with as many pages as it is
/// attached with; it is freed only after it is detached.
pub struct DmaBus {
    dev: ARef<Device>,
    map: SimMemory<KernelFrames, SimLocks>,
}

impl DmaBus {
    /// The device the bus allocates for (the GPU's).
    pub(crate) fn device(&self) -> &Device {
        &self.dev
    }

    /// A bus for `dev`, whose DMA masks are set to `pa_bits` bits; with `page_limit`, at most
    /// that many pages are allocated at once (to exercise the driver's out-of-memory paths).
    ///
    /// # Errors
    ///
    /// The DMA API's error if the masks cannot be set, [`Error::NoMemory`] if the bus's
    /// table or lock cannot be allocated.
    ///
    /// # Safety
    ///
    /// Nothing else allocates or maps DMA memory of `dev` during the call (its masks change):
    /// the caller is probing the device, or owns a device no driver uses.
    pub unsafe fn new(dev: &Device, pa_bits: u32, page_limit: Option<usize>) -> Result<Arc<Self>> {
        let mask = match pa_bits {
            0..=63 => (1u64 << pa_bits) - 1,
            _ => u64::MAX,
        };
        let raw = raw_device(dev);
        // SAFETY: `raw` is a live device (`dev` is a reference), and nothing allocates or maps
        // its DMA memory meanwhile, as the caller guarantees.
        to_result(unsafe { bindings::dma_set_coherent_mask(raw, mask) }).map_err(kernel_err)?;
        // SAFETY: As above; `dma_mask` is read once, with nothing changing it concurrently.
        if !unsafe { (*raw).dma_mask }.is_null() {
            // SAFETY: As above, and the device has a streaming mask to set (a platform device
            // does; a faux device has only the coherent one).
            to_result(unsafe { bindings::dma_set_mask(raw, mask) }).map_err(kernel_err)?;
        }
        let cfg = MemConfig {
            base: PhysAddr(0),
            end: PhysAddr(mask.saturating_add(1)),
            page_limit,
        };
        let map = SimMemory::with_alloc(cfg, KernelFrames::new(GFP_KERNEL)).map_err(sim_err)?;
        // INVARIANT: Nothing is attached yet.
        Arc::new(
            DmaBus {
                dev: dev.into(),
                map,
            },
            GFP_KERNEL,
        )
        .map_err(|_| Error::NoMemory)
    }

    /// Allocates a coherent block of `pages` pages and attaches it at its DMA address.
    fn alloc_block(&self, pages: usize) -> Result<(u64, NonNull<u8>)> {
        let size = pages
            .checked_mul(PAGE_SIZE as usize)
            .ok_or(Error::NoMemory)?;
        let mut handle: bindings::dma_addr_t = 0;
        // SAFETY: `self.dev` is a live device (we hold a reference); `size` is not zero (every
        // caller asks for at least one page). The block is zeroed by the DMA API; no warning
        // for a failure, which userspace can cause with a large buffer object.
        let cpu = unsafe {
            bindings::dma_alloc_attrs(
                self.raw(),
                size,
                &mut handle,
                bindings::GFP_KERNEL | bindings::__GFP_NOWARN,
                bindings::DMA_ATTR_NO_WARN as c_ulong,
            )
        };
        let cpu = NonNull::new(cpu.cast::<u8>()).ok_or(Error::NoMemory)?;
        // SAFETY: The block is `size` bytes of coherent memory, page aligned, ours until
        // `dma_free_attrs`, which happens only after it is detached (type invariant); the CPU
        // reaches it only through raw pointers and atomics (the `DmaMemory` contract's CPU
        // views are atomic words, and userspace mappings are outside Rust's model).
        match unsafe { self.map.attach(PhysAddr(handle), cpu, pages) } {
            Ok(()) => {
                // INVARIANT: The run attached is the block just allocated, at its address.
                LIVE_DMA_PAGES.fetch_add(pages, Ordering::Relaxed);
                Ok((handle, cpu))
            }
            Err(e) => {
                // SAFETY: Allocated above with these arguments and never attached.
                unsafe { self.free_raw(handle, cpu, pages) };
                Err(sim_err(e))
            }
        }
    }

    /// Detaches the block at `handle` and frees it; an address that is not the start of one
    /// of our blocks is left alone.
    fn free_block(&self, handle: u64) {
        if let Ok((cpu, pages)) = self.map.detach(PhysAddr(handle)) {
            // SAFETY: By the type invariant the run was a live block allocated at `handle` with
            // `pages` pages; detached, the simulated GPU no longer reaches it, and the caller's
            // `DmaMemory::free` contract says nothing else uses it.
            unsafe { self.free_raw(handle, cpu, pages) };
            LIVE_DMA_PAGES.fetch_sub(pages, Ordering::Relaxed);
        }
    }

    /// # Safety
    ///
    /// `cpu` and `handle` are a live block of `pages` pages from `dma_alloc_attrs` on this
    /// bus's device, not attached and not used after.
    unsafe fn free_raw(&self, handle: u64, cpu: NonNull<u8>, pages: usize) {
        // SAFETY: As the caller guarantees; the size is the one the block was allocated with
        // (it did not overflow then).
        unsafe {
            bindings::dma_free_attrs(
                self.raw(),
                pages * PAGE_SIZE as usize,
                cpu.as_ptr().cast(),
                handle,
                bindings::DMA_ATTR_NO_WARN as c_ulong,
            )
        };
    }

    fn raw(&self) -> *mut bindings::device {
        raw_device(&self.dev)
    }
}

impl Drop for DmaBus {
    fn drop(&mut self) {
        // Every owner of a block holds the bus, so a block still attached now is one its owner
        // forgot to free: give it back to the kernel, and say so.
        let mut leaked = 0usize;
        let bus = &*self;
        self.map.detach_all(|pa, cpu, pages| {
            // SAFETY: An attached run is a live block at `pa` (type invariant), just detached;
            // no owner is left to use it.
            unsafe { bus.free_raw(pa.0, cpu, pages) };
            LIVE_DMA_PAGES.fetch_sub(pages, Ordering::Relaxed);
            leaked += 1;
        });
        if leaked != 0 {
            pr_warn!(
                "tyr: {} DMA blocks were never freed; freed with the bus\n",
                leaked
            );
        }
    }
}

pub(crate) fn raw_device(dev: &Device) -> *mut bindings::device {
    // CAST: `kernel::device::Device` is a transparent wrapper of `struct device` (in an
    // `Opaque`, so the C side may change it through a shared reference).
    core::ptr::from_ref(dev).cast_mut().cast()
}

/// The simulated GPU's memory: the bus, shared with the DMA allocator.
#[derive(Clone)]
pub struct BusMemory(pub(crate) Arc<DmaBus>);

impl PhysMemory for BusMemory {
    fn read_bytes(&self, pa: PhysAddr, buf: &mut [u8]) -> core::result::Result<(), SimError> {
        super::note_stack();
        self.0.map.read_bytes(pa, buf)
    }

    fn write_bytes(&self, pa: PhysAddr, data: &[u8]) -> core::result::Result<(), SimError> {
        super::note_stack();
        self.0.map.write_bytes(pa, data)
    }

    fn read_u64(&self, pa: PhysAddr) -> core::result::Result<u64, SimError> {
        self.0.map.read_u64(pa)
    }

    fn fetch_add_u64(&self, pa: PhysAddr, v: u64) -> core::result::Result<u64, SimError> {
        self.0.map.fetch_add_u64(pa, v)
    }
}

/// The driver's DMA memory: coherent blocks of the DMA API on the GPU's device.
#[derive(Clone)]
pub struct KernelDma(pub(crate) Arc<DmaBus>);

// SAFETY: Blocks are coherent allocations of the DMA API: zeroed, page aligned (aligned more
// when asked, see `alloc`), disjoint while live (the DMA API never hands out an address
// twice, and the bus refuses overlaps), and allocated until `free`. `cpu_u64` returns a
// pointer into the live block holding the address, derived from the block's own CPU address
// and 8-byte aligned, valid for atomic accesses until the block is freed; anything else is
// `None`.
unsafe impl DmaMemory for KernelDma {
    fn alloc(&self, pages: usize, align: u64) -> Result<DmaRegion> {
        if pages == 0 || !align.is_power_of_two() {
            return Err(Error::Invalid);
        }
        let align = align.max(PAGE_SIZE);
        let (handle, _) = self.0.alloc_block(pages)?;
        if handle.is_multiple_of(align) {
            return Ok(DmaRegion {
                addr: handle,
                pages,
                cookie: handle,
            });
        }
        // Not aligned enough: a larger block holds an aligned run of `pages` pages.
        self.0.free_block(handle);
        let extra = usize::try_from(align / PAGE_SIZE - 1).map_err(|_| Error::NoMemory)?;
        let total = pages.checked_add(extra).ok_or(Error::NoMemory)?;
        let (base, _) = self.0.alloc_block(total)?;
        Ok(DmaRegion {
            addr: base.next_multiple_of(align),
            pages,
            cookie: base,
        })
    }

    unsafe fn free(&self, region: DmaRegion) {
        self.0.free_block(region.cookie);
    }

    fn alloc_page(&self) -> Result<u64> {
        self.0.alloc_block(1).map(|(handle, _)| handle)
    }

    unsafe fn free_page(&self, addr: u64) {
        self.0.free_block(addr);
    }

    fn cpu_u64(&self, addr: u64) -> Option<NonNull<AtomicU64>> {
        self.0.map.host_ptr_u64(PhysAddr(addr)).ok()
    }

    // Coherent memory: the device sees the CPU's writes without cache maintenance.
    fn sync_for_device(&self, _addr: u64, _len: usize) {}

    fn cpu_page(&self, addr: u64) -> Option<CpuPage> {
        if !addr.is_multiple_of(PAGE_SIZE) {
            return None;
        }
        let ptr = self
            .0
            .map
            .host_ptr(PhysAddr(addr), PAGE_SIZE as usize)
            .ok()?;
        // SAFETY: A page-aligned DMA address of a live block is the start of one of its pages:
        // blocks are page-aligned kernel memory (the direct map, or `vmalloc` space where the
        // DMA API remaps) holding whole pages; `CpuPage::new` refuses anything else. The page
        // stays allocated until the block is freed, which its owner does only when it goes.
        unsafe { CpuPage::new(ptr) }
    }
}
