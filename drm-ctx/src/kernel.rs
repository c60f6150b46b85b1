// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The kernel backend, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! In the kernel the crate's driver-facing API ([`Driver`](crate::drm::Driver),
//! [`drm::Device`](crate::drm::Device) with its contexts, [`UnregisteredDevice`],
//! [`Registration`], [`File`](crate::drm::File), [`gem::Object`](crate::drm::gem::Object), ioctl
//! tables) is implemented on `kernel::drm` of Linux 7.2 instead of the crate's own core:
//!
//! | this crate | the kernel |
//! |---|---|
//! | [`device::Device<Ctx>`](crate::device::Device) | `kernel::device::Device<Ctx>` (`struct device`) |
//! | `Driver` | `kernel::drm::Driver` of [`drm::KDriver<T>`] (`struct drm_driver`) |
//! | `drm::Device<T, Ctx>` | `kernel::drm::Device<KDriver<T>, Ctx>` (`struct drm_device`) |
//! | `UnregisteredDevice::new_with_in` | `kernel::drm::UnregisteredDevice::new` (`__drm_dev_alloc`), data built after |
//! | `Registration::new` / drop | `drm_dev_register` / `drm_dev_unplug` |
//! | `Registration::new_foreign_owned` | the same, kept in the parent's devres (`kernel::devres::register`) |
//! | `Device::enter` | `drm_dev_enter` / `drm_dev_exit` |
//! | `File<F>` | `kernel::drm::File<KFile<F>>` (`struct drm_file`, `driver_priv`) |
//! | `gem::Object<T, Ctx>` | `kernel::drm::gem::shmem::Object` (`struct drm_gem_shmem_object`) |
//! | `create_handle`, `lookup_handle`, `close_handle`, `create_mmap_offset` | `drm_gem_handle_create`, `drm_gem_object_lookup`, `drm_gem_handle_delete`, `drm_gem_create_mmap_offset` |
//! | `Driver::IOCTLS` ([`declare_drm_ioctls!`](crate::declare_drm_ioctls)) | a `drm_ioctl_desc` table built at compile time, dispatched by `drm_ioctl` |
//! | `File::create_syncobj` | `drm_syncobj_create` + `drm_syncobj_get_handle` |
//! | `File::syncobj`, `File::syncobj_fence`, [`drm::syncobj`](crate::drm::syncobj) | `drm_syncobj_find`, `drm_syncobj_find_fence`, `drm_syncobj_replace_fence`, `drm_syncobj_add_point`, `dma_fence_chain_alloc`, `dma_fence_unwrap_for_each` ([`syncobj`]) |
//! | core ioctls (`VERSION`, `GEM_CLOSE`, `SYNCOBJ_*`, PRIME) | the DRM core's own |
//!
//! A small C file (`kernel/drm.c`) stands in for what Linux 7.2's Rust DRM lacks or gets
//! wrong for this crate: its `struct drm_driver` never sets `DRIVER_SYNCOBJ`, and with shmem
//! objects it offers `dumb_create` (to any primary-node client) and PRIME import of other
//! devices' buffers, both of which make plain shmem objects that a handle lookup would then
//! take for the driver's type. So each device gets, before registration, a managed copy of its
//! vtable with `DRIVER_SYNCOBJ | DRIVER_SYNCOBJ_TIMELINE` and without those two callbacks. It
//! also wraps what is not in the bindings (`drm_syncobj.h`, `drm_auth.h`, `dma-fence-chain.h`,
//! `dma-fence-unwrap.h`, the `static inline` fence reference counting).
//!
//! [`UnregisteredDevice`]: crate::drm::UnregisteredDevice
//! [`Registration`]: crate::drm::Registration

use core::alloc::Layout;
use core::ptr::NonNull;

use ::kernel::alloc::allocator::Kmalloc;
use ::kernel::alloc::{flags::GFP_KERNEL, Allocator as _, NumaNode};
use ::kernel::uaccess::{UserPtr, UserSlice};

use crate::mem::Allocator;
use crate::uaccess::UserMemory;
use crate::Error;

impl From<Error> for ::kernel::error::Error {
    fn from(e: Error) -> Self {
        ::kernel::error::Error::from_errno(e.to_errno())
    }
}

impl From<::kernel::error::Error> for Error {
    fn from(e: ::kernel::error::Error) -> Self {
        drm::from_kernel(e)
    }
}

/// Device and object memory from `kmalloc(GFP_KERNEL)`.
pub struct KernelAlloc;

// SAFETY: `Kmalloc` returns blocks of at least `layout.size()` bytes aligned to `layout.align()`
// that stay ours until `Kmalloc::free` with the same layout.
unsafe impl Allocator for KernelAlloc {
    fn alloc(layout: Layout) -> crate::Result<NonNull<u8>> {
        Kmalloc::alloc(layout, GFP_KERNEL, NumaNode::NO_NODE)
            .map(|p| p.cast::<u8>())
            .map_err(|_| Error::NoMemory)
    }

    unsafe fn free(ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: The caller passes a block from `alloc` with the same layout.
        unsafe { Kmalloc::free(ptr, layout) }
    }
}

/// The calling process's memory, reached with the kernel's user-copy routines.
pub struct KernelUserMemory;

impl UserMemory for KernelUserMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> crate::Result {
        let addr = usize::try_from(addr).map_err(|_| Error::Fault)?;
        UserSlice::new(UserPtr::from_addr(addr), buf.len())
            .reader()
            .read_slice(buf)
            .map_err(|_| Error::Fault)
    }

    fn write(&self, addr: u64, data: &[u8]) -> crate::Result {
        let addr = usize::try_from(addr).map_err(|_| Error::Fault)?;
        UserSlice::new(UserPtr::from_addr(addr), data.len())
            .writer()
            .write_slice(data)
            .map_err(|_| Error::Fault)
    }
}

pub mod device;
pub mod drm;
pub mod file;
pub mod gem;
mod kunit;
pub mod syncobj;

extern "C" {
    fn gpukit_drm_fence_get(fence: *mut ::kernel::bindings::dma_fence);
    fn gpukit_drm_fence_put(fence: *mut ::kernel::bindings::dma_fence);
}

/// One reference to a `struct dma_fence` (any driver's), to put in a syncobj with
/// [`File::create_syncobj`](crate::drm::File::create_syncobj).
///
/// # Invariants
///
/// `self.0` is a fence this value owns one reference of.
pub struct DmaFence(NonNull<::kernel::bindings::dma_fence>);

// SAFETY: Fence references may be taken, used and dropped on any thread.
unsafe impl Send for DmaFence {}
// SAFETY: Shared use only reads the pointer; the fence synchronises itself.
unsafe impl Sync for DmaFence {}

impl DmaFence {
    /// Takes over a reference to `fence` the caller owns.
    ///
    /// # Safety
    ///
    /// `fence` is a live `struct dma_fence` on which the caller owns a reference, which is
    /// handed to the new value.
    pub unsafe fn from_raw(fence: NonNull<::kernel::bindings::dma_fence>) -> Self {
        // INVARIANT: The caller hands over its reference.
        DmaFence(fence)
    }

    /// Takes a new reference to `fence`.
    ///
    /// # Safety
    ///
    /// `fence` is a live `struct dma_fence` (the caller holds a reference during the call).
    pub unsafe fn from_raw_get(fence: NonNull<::kernel::bindings::dma_fence>) -> Self {
        // SAFETY: The fence is alive (caller's guarantee).
        unsafe { gpukit_drm_fence_get(fence.as_ptr()) };
        // INVARIANT: We took the reference.
        DmaFence(fence)
    }

    /// The fence.
    pub fn as_raw(&self) -> *mut ::kernel::bindings::dma_fence {
        self.0.as_ptr()
    }
}

impl Clone for DmaFence {
    fn clone(&self) -> Self {
        // SAFETY: We hold a reference, so the fence is alive.
        unsafe { Self::from_raw_get(self.0) }
    }
}

impl Drop for DmaFence {
    fn drop(&mut self) {
        // SAFETY: We own one reference (type invariant).
        unsafe { gpukit_drm_fence_put(self.0.as_ptr()) };
    }
}
