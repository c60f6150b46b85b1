// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Kernel adapters, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! The typestate core runs unchanged in the kernel; what an environment supplies are the
//! seams. Here: memory for devices and GEM objects from the kernel's slab ([`Kmalloc`] with
//! `GFP_KERNEL`, the flags `drm_dev_alloc` and `drm_gem_object_init` use), user copies through
//! the kernel's `copy_from_user`/`copy_to_user` ([`KernelUserMemory`]), and the error
//! conversion. Replacing the crate's own DRM core bookkeeping by `struct drm_device` and the C
//! helpers is the driver backend's work (Tyr), not this crate's.
//!
//! [`Kmalloc`]: ::kernel::alloc::allocator::Kmalloc

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

mod kunit;
