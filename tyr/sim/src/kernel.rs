// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Kernel adapters, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! The simulated GPU needs two things from its environment: frames for the memory it
//! simulates ([`FrameAlloc`]) and a lock for that memory's allocation table ([`LockFamily`]).
//! In the kernel the frames come from `vmalloc` (the simulated memory is large and sparse, and
//! nothing but the simulator touches it, so it need not be physically contiguous), zeroed
//! with `__GFP_ZERO`; the locks are the kernel's own `Mutex`es, each in a pinned box of its
//! own because a kernel mutex must not move once initialised.

use core::alloc::Layout;
use core::num::NonZeroUsize;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};

use ::kernel::alloc::allocator::Vmalloc;
use ::kernel::alloc::{flags::__GFP_ZERO, Allocator, Flags, KBox, NumaNode};
use ::kernel::new_mutex;
use ::kernel::prelude::*;
use ::kernel::sync::Mutex;

use crate::{FrameAlloc, Lock, LockFamily, SimError, PAGE_SIZE};

/// Frames of simulated memory from `vmalloc`, with the caller's GFP flags.
pub struct KernelFrames {
    flags: Flags,
}

impl KernelFrames {
    /// An allocator that asks `vmalloc` with `flags` (plus `__GFP_ZERO`).
    pub fn new(flags: Flags) -> Self {
        KernelFrames { flags }
    }

    fn layout(pages: NonZeroUsize) -> Result<Layout, SimError> {
        let size = pages
            .get()
            .checked_mul(PAGE_SIZE)
            .ok_or(SimError::OutOfMemory)?;
        Layout::from_size_align(size, PAGE_SIZE).map_err(|_| SimError::OutOfMemory)
    }
}

// SAFETY: `vmalloc` memory of `pages * PAGE_SIZE` bytes, page aligned, zeroed by
// `__GFP_ZERO`, owned by the caller until `free`; it never moves.
unsafe impl FrameAlloc for KernelFrames {
    fn alloc_zeroed(&self, pages: NonZeroUsize) -> Result<NonNull<u8>, SimError> {
        let layout = Self::layout(pages)?;
        Vmalloc::alloc(layout, self.flags | __GFP_ZERO, NumaNode::NO_NODE)
            .map(|p| {
                LIVE_PAGES.fetch_add(pages.get(), Ordering::Relaxed);
                p.cast::<u8>()
            })
            .map_err(|_| SimError::OutOfMemory)
    }

    unsafe fn free(&self, frames: NonNull<u8>, pages: NonZeroUsize) {
        if let Ok(layout) = Self::layout(pages) {
            // SAFETY: As the caller guarantees, `frames` came from `alloc_zeroed(pages)`, that
            // is from `Vmalloc::alloc` with this layout, and nothing uses it any more.
            unsafe { Vmalloc::free(frames, layout) };
            LIVE_PAGES.fetch_sub(pages.get(), Ordering::Relaxed);
        }
    }
}

/// Pages of [`KernelFrames`] memory not freed yet, all simulated GPUs together.
static LIVE_PAGES: AtomicUsize = AtomicUsize::new(0);

/// How many pages of [`KernelFrames`] memory are allocated, all simulated GPUs together: a
/// leak counter for tests (0 once every simulated GPU and its memory are gone).
pub fn live_pages() -> usize {
    LIVE_PAGES.load(Ordering::Relaxed)
}

/// The kernel's `Mutex`es as the simulator's locks.
pub struct KernelLocks;

impl LockFamily for KernelLocks {
    type Lock<T: Send> = KernelLock<T>;
}

/// A kernel `Mutex` in a pinned box of its own.
pub struct KernelLock<T>(Pin<KBox<Mutex<Unpinned<T>>>>);

/// The locked value. The mutex hands out `&mut` only to `Unpin` values; the simulator's
/// values are never pinned (nothing here makes a `Pin<&mut T>`), so the wrapper is `Unpin`
/// whatever `T` is.
struct Unpinned<T>(T);

impl<T> Unpin for Unpinned<T> {}

impl<T: Send> Lock<T> for KernelLock<T> {
    fn new(value: T) -> Result<Self, SimError> {
        KBox::pin_init(new_mutex!(Unpinned(value)), GFP_KERNEL)
            .map(KernelLock)
            .map_err(|_| SimError::OutOfMemory)
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut guard = self.0.lock();
        f(&mut guard.0)
    }
}

mod kunit;
