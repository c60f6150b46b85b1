// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Where the simulator's memory comes from.
//!
//! A real GPU owns no memory for the driver's data: it reaches system RAM, page frame by
//! page frame, through its MMU. The simulated GPU's "system RAM" ([`SimMemory`](crate::SimMemory))
//! has to live somewhere on the machine running the simulation, and that machine may be a
//! host process (with a heap), a Linux kernel (with `vmalloc` and the page allocator, and no
//! `alloc` crate) or any other `no_std` environment. The simulator therefore takes all of its
//! memory from a [`FrameAlloc`]: zeroed, page-aligned runs of 4 KiB frames, requested with
//! a size and returned with the same size, where running out is an error value the caller
//! sees ([`SimError::OutOfMemory`]), never an abort.
//!
//! [`StdFrames`] (feature `std`) takes frames from the host's global allocator. In the kernel
//! (feature `kernel`), `kernel::KernelFrames` takes them from `vmalloc` with `__GFP_ZERO`,
//! returning `OutOfMemory` where that fails.

use core::num::NonZeroUsize;
use core::ptr::NonNull;

use crate::SimError;

/// Size of a page frame.
pub const PAGE_SIZE: usize = 4096;
/// log2 of [`PAGE_SIZE`].
pub const PAGE_SHIFT: u32 = 12;

/// A source of zeroed, page-aligned, contiguous runs of page frames.
///
/// # Safety
///
/// An implementation must guarantee, for every pointer `p` returned by
/// [`alloc_zeroed`](Self::alloc_zeroed)`(pages)` until it is passed to
/// [`free`](Self::free):
///
/// - `p` is aligned to [`PAGE_SIZE`] and points to `pages * PAGE_SIZE` bytes that are all zero
///   when returned, readable and writable (also atomically) from any thread;
/// - nothing but the caller accesses those bytes, and no two live runs overlap;
/// - the bytes stay at that address: the run never moves.
///
/// The simulator calls the methods from several threads at once when it is shared, so such use
/// also requires `Self: Sync`.
pub unsafe trait FrameAlloc {
    /// Allocates `pages` contiguous zeroed frames; [`SimError::OutOfMemory`] when that many
    /// cannot be had (nothing is allocated then).
    fn alloc_zeroed(&self, pages: NonZeroUsize) -> Result<NonNull<u8>, SimError>;

    /// Returns a run of frames.
    ///
    /// # Safety
    ///
    /// `frames` was returned by `alloc_zeroed(pages)` of this allocator, has not been freed
    /// since, and nothing accesses its bytes any more.
    unsafe fn free(&self, frames: NonNull<u8>, pages: NonZeroUsize);
}

// SAFETY: Forwards to `A`, which provides the guarantees.
unsafe impl<A: FrameAlloc + ?Sized> FrameAlloc for &A {
    fn alloc_zeroed(&self, pages: NonZeroUsize) -> Result<NonNull<u8>, SimError> {
        (**self).alloc_zeroed(pages)
    }

    unsafe fn free(&self, frames: NonNull<u8>, pages: NonZeroUsize) {
        // SAFETY: The caller's guarantees, for the same allocator.
        unsafe { (**self).free(frames, pages) }
    }
}

/// Frames from the host's global allocator (`alloc_zeroed`), so that untouched pages cost
/// nothing and a request larger than the host can give fails with
/// [`SimError::OutOfMemory`] instead of aborting.
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StdFrames;

#[cfg(feature = "std")]
impl StdFrames {
    fn layout(pages: NonZeroUsize) -> Result<std::alloc::Layout, SimError> {
        let size = pages
            .get()
            .checked_mul(PAGE_SIZE)
            .ok_or(SimError::OutOfMemory)?;
        std::alloc::Layout::from_size_align(size, PAGE_SIZE).map_err(|_| SimError::OutOfMemory)
    }
}

// SAFETY: Each run is a fresh allocation of the global allocator with a page-aligned layout,
// zeroed by `alloc_zeroed`, owned by the caller until `free` gives it back; the global
// allocator is thread-safe and never moves an allocation.
#[cfg(feature = "std")]
unsafe impl FrameAlloc for StdFrames {
    fn alloc_zeroed(&self, pages: NonZeroUsize) -> Result<NonNull<u8>, SimError> {
        let layout = Self::layout(pages)?;
        // SAFETY: The layout's size is at least one page, so not zero.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        NonNull::new(raw).ok_or(SimError::OutOfMemory)
    }

    unsafe fn free(&self, frames: NonNull<u8>, pages: NonZeroUsize) {
        // The layout was valid when the run was allocated, so it still is.
        if let Ok(layout) = Self::layout(pages) {
            // SAFETY: `frames` was allocated with this layout by `alloc_zeroed` (the
            // caller's guarantee) and is not used after.
            unsafe { std::alloc::dealloc(frames.as_ptr(), layout) };
        }
    }
}
