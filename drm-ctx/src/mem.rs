// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Memory for devices and GEM objects.
//!
//! The DRM core allocates one block per device (the core's bookkeeping followed by the driver's
//! data) and one per GEM object. In the kernel that memory comes from `kmalloc`; elsewhere the
//! environment supplies an [`Allocator`]. A device remembers its allocator, and the GEM objects
//! created with it use the same one, so a whole driver instance draws from one place. Allocation
//! failure is an ordinary [`Error::NoMemory`](crate::Error::NoMemory).

use crate::Result;
use core::{alloc::Layout, ptr::NonNull};

/// A source of memory blocks for the DRM core.
///
/// # Safety
///
/// A successful [`alloc`](Self::alloc) must return a block valid for reads and writes of
/// `layout.size()` bytes, aligned to `layout.align()`, not used by anything else until it is given
/// to [`free`](Self::free) with the same layout.
pub unsafe trait Allocator: 'static {
    /// Allocates a block for `layout` (whose size is never zero).
    fn alloc(layout: Layout) -> Result<NonNull<u8>>;

    /// Frees a block.
    ///
    /// # Safety
    ///
    /// `ptr` must come from [`alloc`](Self::alloc) of the same allocator with the same `layout`,
    /// and must not be used afterwards.
    unsafe fn free(ptr: NonNull<u8>, layout: Layout);
}

/// The global allocator of the host program.
#[cfg(feature = "std")]
pub struct Global;

#[cfg(feature = "std")]
// SAFETY: `std::alloc::alloc` returns blocks that fit `layout` and stay ours until `dealloc`.
unsafe impl Allocator for Global {
    fn alloc(layout: Layout) -> Result<NonNull<u8>> {
        // SAFETY: The trait promises a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        NonNull::new(p).ok_or(crate::Error::NoMemory)
    }

    unsafe fn free(ptr: NonNull<u8>, layout: Layout) {
        // SAFETY: The caller passes a block from `alloc` with the same layout.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
    }
}

/// The functions of one allocator, stored in the objects it allocated (by the crate's own core;
/// in the kernel the DRM core allocates).
#[cfg(not(gpukit_kernel))]
#[derive(Clone, Copy)]
pub(crate) struct MemOps {
    pub(crate) alloc: fn(Layout) -> Result<NonNull<u8>>,
    pub(crate) free: unsafe fn(NonNull<u8>, Layout),
}

#[cfg(not(gpukit_kernel))]
impl MemOps {
    pub(crate) const fn of<A: Allocator>() -> MemOps {
        MemOps {
            alloc: A::alloc,
            free: A::free,
        }
    }
}
