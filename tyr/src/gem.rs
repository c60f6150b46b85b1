// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Buffer objects: contiguous DMA memory as GEM objects of the driver.
//!
//! A [`TyrBo`] owns a block of DMA memory (2M aligned from 2M up, so that VM_BIND can use 2M
//! blocks) and frees it when the last reference goes. VMs hold objects as [`BoRef`] (a
//! registered object) or, for the MCU's VM, [`FwBoRef`] (the firmware interface region,
//! created before the device is registered). [`TyrDriver`] is the driver type the objects
//! belong to; its `drm::Driver` implementation, the table of ioctls, is in `driver`, on top.

use core::marker::PhantomData;

use drm_ctx::drm::{self, gem, AnyCtx};
use drm_ctx::types::ARef;
use drm_ctx::Result as DrmResult;
use gpuvm::GemObject;

use crate::backend::{Backend, DmaMemory, DmaRegion, Lock, LockFamily, LockOf, Words, PAGE_SIZE};
use crate::vm::{self, BoBacking, EnvSlots};
use crate::{env, uapi, Error, Result};

/// The driver type for a backend.
pub struct TyrDriver<B>(PhantomData<fn() -> B>);

/// The DRM device of the driver.
pub type TyrDevice<B, C = drm::Registered> = drm::Device<TyrDriver<B>, C>;

/// A VM of the driver.
pub type TyrVm<B> = vm::Vm<
    <B as Backend>::Dma,
    BoRef<B>,
    EnvSlots<<B as Backend>::Alloc>,
    env::Arc<vm::PtBudget, <B as Backend>::Alloc>,
>;

/// A VM as the driver's objects share it: its files, bind jobs, groups and heap pools hold it,
/// locked while one of them changes it.
pub type SharedVm<B> = env::Arc<LockOf<B, TyrVm<B>>, <B as Backend>::Alloc>;

/// Arguments of a new buffer object.
pub struct BoArgs<B: Backend> {
    dma: B::Dma,
    id: u64,
    flags: u32,
    exclusive_vm: u64,
}

impl<B: Backend> BoArgs<B> {
    /// Arguments for an object in `dma` with device-unique `id`, `DRM_PANTHOR_BO_*` `flags`,
    /// private to the VM with key `exclusive_vm` (or 0).
    pub fn new(dma: B::Dma, id: u64, flags: u32, exclusive_vm: u64) -> Self {
        BoArgs {
            dma,
            id,
            flags,
            exclusive_vm,
        }
    }
}

/// A buffer object: contiguous DMA memory.
pub struct TyrBo<B: Backend> {
    dma: B::Dma,
    mem: DmaRegion,
    id: u64,
    flags: u32,
    exclusive_vm: u64,
    /// The label userspace gave the object (`BO_SET_LABEL`), without its NUL; `None` when
    /// there is none (an empty label is not the same as none).
    label: <B::Locks as LockFamily>::Lock<Option<Label<B>>>,
}

/// A buffer object's label.
pub type Label<B> = env::Vec<u8, <B as Backend>::Alloc>;

impl<B: Backend> TyrBo<B> {
    /// Device address of the first byte.
    pub fn dma_addr(&self) -> u64 {
        self.mem.addr
    }

    /// Writes `data` at byte `offset` through the CPU view (what a CPU mapping of the object
    /// does); [`Error::Invalid`] if it does not fit in the object.
    pub fn cpu_write(&self, offset: u64, data: &[u8]) -> Result {
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or(Error::Invalid)?;
        if end > self.mem.size() {
            return Err(Error::Invalid);
        }
        let w = Words(&self.dma);
        // One atomic update per 64-bit word (little-endian), the bytes outside `data` kept.
        let start = self.mem.addr + offset;
        let mut i = 0usize;
        while i < data.len() {
            let at = start + i as u64;
            let first = (at & 7) as usize;
            let n = (8 - first).min(data.len() - i);
            let mut bytes = [0u8; 8];
            bytes[first..first + n].copy_from_slice(&data[i..i + n]);
            let mask = if n == 8 {
                u64::MAX
            } else {
                ((1u64 << (n * 8)) - 1) << (first * 8)
            };
            w.update64(at, mask, u64::from_le_bytes(bytes));
            i += n;
        }
        self.dma.sync_for_device(start, data.len());
        Ok(())
    }

    /// Reads `buf.len()` bytes at byte `offset` through the CPU view; [`Error::Invalid`] if
    /// they do not fit in the object.
    pub fn cpu_read(&self, offset: u64, buf: &mut [u8]) -> Result {
        let end = offset.checked_add(buf.len() as u64).ok_or(Error::Invalid)?;
        if end > self.mem.size() {
            return Err(Error::Invalid);
        }
        let w = Words(&self.dma);
        // One load per 64-bit word (little-endian).
        let start = self.mem.addr + offset;
        let mut i = 0usize;
        while i < buf.len() {
            let at = start + i as u64;
            let first = (at & 7) as usize;
            let n = (8 - first).min(buf.len() - i);
            let bytes = w.rd64_at(at).to_le_bytes();
            buf[i..i + n].copy_from_slice(&bytes[first..first + n]);
            i += n;
        }
        Ok(())
    }

    /// `DRM_PANTHOR_BO_*` flags.
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// Device-unique ID.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Replaces the object's label (`None` removes it); the old one is dropped.
    pub fn set_label(&self, label: Option<Label<B>>) {
        // The old label is freed after the lock is let go.
        let old = self.label.with(|l| core::mem::replace(l, label));
        drop(old);
    }

    /// Runs `f` on the object's label (its bytes without the NUL), or `None` if it has none.
    pub fn with_label<R>(&self, f: impl FnOnce(Option<&[u8]>) -> R) -> R {
        self.label.with(|l| f(l.as_deref()))
    }

    /// Whether CPU mappings of the object bypass the CPU caches (write-combined), as panthor
    /// maps every object of a GPU that is not IO-coherent unless it was created with
    /// `DRM_PANTHOR_BO_WB_MMAP`.
    pub fn cpu_uncached(&self, io_coherent: bool) -> bool {
        !io_coherent && self.flags & uapi::DRM_PANTHOR_BO_WB_MMAP == 0
    }

    /// Checks that `size` bytes at `offset` lie inside the object ([`Error::Invalid`] if not,
    /// or if the end overflows).
    pub fn check_range(&self, offset: u64, size: u64) -> Result {
        match offset.checked_add(size) {
            Some(end) if end <= self.mem.size() => Ok(()),
            _ => Err(Error::Invalid),
        }
    }

    /// CPU cache maintenance over `size` bytes at `offset`: writes dirty lines back to memory
    /// and, with `invalidate`, drops them too, through the DMA memory the object lives in.
    /// Nothing to do for a mapping without CPU caches ([`cpu_uncached`](Self::cpu_uncached))
    /// or an empty range. [`Error::Invalid`] for a range outside the object.
    pub fn cpu_sync(&self, offset: u64, size: u64, invalidate: bool, io_coherent: bool) -> Result {
        self.check_range(offset, size)?;
        if self.cpu_uncached(io_coherent) || size == 0 {
            return Ok(());
        }
        let len = usize::try_from(size).map_err(|_| Error::Invalid)?;
        let addr = self.mem.addr + offset;
        self.dma.sync_for_device(addr, len);
        if invalidate {
            self.dma.sync_for_cpu(addr, len);
        }
        Ok(())
    }
}

impl<B: Backend> Drop for TyrBo<B> {
    fn drop(&mut self) {
        // SAFETY: The object owns `mem`, and no page table maps it once the last reference is
        // gone: a VM holds a reference while a user mapping of the object is in its tables
        // (its `gpuvm` VM-BO), and a group holds one while its kernel-region mapping of the
        // object is there; that mapping is removed before the group lets go
        // (`unmap_group_mem`), and wherever the MMU does not confirm a map or unmap of it
        // (`KernelMapError::Stuck`, a failed unmap) a reference is leaked on purpose, so this
        // never runs for memory the GPU may still reach.
        unsafe { self.dma.free(self.mem) };
    }
}

impl<B: Backend> gem::DriverObject for TyrBo<B> {
    type Driver = TyrDriver<B>;
    type Args = BoArgs<B>;

    fn new(size: usize, args: BoArgs<B>) -> DrmResult<Self> {
        let pages = size.div_ceil(PAGE_SIZE as usize);
        // Large objects are 2M aligned so that VM_BIND can use 2M blocks.
        let align = if size as u64 >= io_pgtable::SZ_2M {
            io_pgtable::SZ_2M
        } else {
            PAGE_SIZE
        };
        let mem = args.dma.alloc(pages, align)?;
        Ok(TyrBo {
            dma: args.dma,
            mem,
            id: args.id,
            flags: args.flags,
            exclusive_vm: args.exclusive_vm,
            label: Lock::new(None, crate::lock_class!(c"tyr_bo_label"))?,
        })
    }

    // A mapping shows the object's DMA memory, which the GPU reads and writes, not a copy.
    const MAPS_OWN_PAGES: bool = true;

    fn cpu_page(&self, index: usize) -> Option<gem::CpuPage> {
        if index >= self.mem.pages {
            return None;
        }
        let offset = (index as u64).checked_mul(PAGE_SIZE)?;
        self.dma.cpu_page(self.mem.addr.checked_add(offset)?)
    }
}

/// A registered buffer object as a VM holds it.
pub struct BoRef<B: Backend>(pub ARef<gem::Object<TyrBo<B>>>);

impl<B: Backend> Clone for BoRef<B> {
    fn clone(&self) -> Self {
        BoRef(self.0.clone())
    }
}

impl<B: Backend> GemObject for BoRef<B> {
    fn id(&self) -> u64 {
        self.0.id
    }

    fn size(&self) -> u64 {
        self.0.size() as u64
    }

    fn resv_id(&self) -> u64 {
        match self.0.exclusive_vm {
            0 => u64::MAX - self.0.id,
            vm => vm,
        }
    }
}

impl<B: Backend> BoBacking for BoRef<B> {
    fn dma_addr(&self) -> u64 {
        self.0.mem.addr
    }

    fn exclusive_vm(&self) -> u64 {
        self.0.exclusive_vm
    }
}

/// A firmware object as the MCU's VM holds it.
pub struct FwBoRef<B: Backend>(pub ARef<gem::Object<TyrBo<B>, AnyCtx>>);

impl<B: Backend> Clone for FwBoRef<B> {
    fn clone(&self) -> Self {
        FwBoRef(self.0.clone())
    }
}

impl<B: Backend> GemObject for FwBoRef<B> {
    fn id(&self) -> u64 {
        self.0.id
    }

    fn size(&self) -> u64 {
        self.0.size() as u64
    }

    fn resv_id(&self) -> u64 {
        1
    }
}

impl<B: Backend> BoBacking for FwBoRef<B> {
    fn dma_addr(&self) -> u64 {
        self.0.mem.addr
    }
}

/// The MCU's VM.
pub type McuVm<B> = vm::Vm<<B as Backend>::Dma, FwBoRef<B>, EnvSlots<<B as Backend>::Alloc>>;
