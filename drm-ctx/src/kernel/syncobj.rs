// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The neutral syncobj API of [`crate::drm::syncobj`] on the kernel's own syncobjs:
//! [`Syncobj`] is a reference to a `struct drm_syncobj`, [`ChainLink`] an unused
//! `struct dma_fence_chain`, fences are [`DmaFence`]s. `drm_syncobj.h`, `dma-fence-chain.h` and
//! `dma-fence-unwrap.h` are not in Linux 7.2's bindings, so every call goes through a thin
//! wrapper in `kernel/drm.c`.
//!
//! | this crate | the kernel |
//! |---|---|
//! | [`File::syncobj`](crate::drm::File::syncobj) | `drm_syncobj_find` (`NULL`: `ENOENT`) |
//! | [`File::syncobj_fence`](crate::drm::File::syncobj_fence) | `drm_syncobj_find_fence` |
//! | [`Syncobj`] clone / drop | `drm_syncobj_get` / `drm_syncobj_put` |
//! | [`Syncobj::fence`] | `drm_syncobj_fence_get` |
//! | [`Syncobj::replace_fence`] | `drm_syncobj_replace_fence` |
//! | [`ChainLink::new`] / drop unused | `dma_fence_chain_alloc` / `dma_fence_chain_free` |
//! | [`Syncobj::add_point`] | `drm_syncobj_add_point` |
//! | [`for_each_unwrapped`] | `dma_fence_unwrap_for_each` |

use core::{
    ffi::{c_int, c_void},
    mem::ManuallyDrop,
    ptr::NonNull,
};

use ::kernel::bindings;

use super::DmaFence;
use crate::{Error, Result};

/// A `struct drm_syncobj` (opaque here: only pointers to it cross).
#[repr(C)]
pub struct RawSyncobj {
    _opaque: [u8; 0],
}

/// A `struct dma_fence_chain` (opaque here: only pointers to it cross).
#[repr(C)]
pub struct RawChain {
    _opaque: [u8; 0],
}

// Only pointers to `struct drm_file` cross the boundary (see `drm.rs`).
#[allow(improper_ctypes)]
extern "C" {
    fn gpukit_drm_syncobj_find(file: *mut bindings::drm_file, handle: u32) -> *mut RawSyncobj;
    fn gpukit_drm_syncobj_get(syncobj: *mut RawSyncobj);
    fn gpukit_drm_syncobj_put(syncobj: *mut RawSyncobj);
    fn gpukit_drm_syncobj_fence_get(syncobj: *mut RawSyncobj) -> *mut bindings::dma_fence;
    fn gpukit_drm_syncobj_find_fence(
        file: *mut bindings::drm_file,
        handle: u32,
        point: u64,
        flags: u64,
        fence: *mut *mut bindings::dma_fence,
    ) -> c_int;
    fn gpukit_drm_syncobj_replace_fence(syncobj: *mut RawSyncobj, fence: *mut bindings::dma_fence);
    fn gpukit_drm_syncobj_add_point(
        syncobj: *mut RawSyncobj,
        chain: *mut RawChain,
        fence: *mut bindings::dma_fence,
        point: u64,
    );
    fn gpukit_drm_fence_chain_alloc() -> *mut RawChain;
    fn gpukit_drm_fence_chain_free(chain: *mut RawChain);
    fn gpukit_drm_fence_unwrap_each(
        head: *mut bindings::dma_fence,
        visit: unsafe extern "C" fn(*mut c_void, *mut bindings::dma_fence),
        ctx: *mut c_void,
    );
}

/// A counted reference to a kernel syncobj (`struct drm_syncobj`).
///
/// # Invariants
///
/// `self.0` is a syncobj this value owns one reference of.
pub struct Syncobj(NonNull<RawSyncobj>);

// SAFETY: Syncobj references may be taken, used and given back on any thread; the syncobj
// synchronises its fence with its own lock.
unsafe impl Send for Syncobj {}
// SAFETY: Every method through `&Syncobj` is one of the syncobj's own thread-safe calls.
unsafe impl Sync for Syncobj {}

impl Syncobj {
    /// The syncobj `handle` names in `file` now (`drm_syncobj_find`), or `ENOENT`.
    ///
    /// # Safety
    ///
    /// `file` is an open `struct drm_file`.
    pub(crate) unsafe fn find(file: *mut bindings::drm_file, handle: u32) -> Result<Self> {
        // SAFETY: The file is open (caller's guarantee); the lookup takes a reference.
        let raw = unsafe { gpukit_drm_syncobj_find(file, handle) };
        // INVARIANT: `drm_syncobj_find` returned a reference we now own.
        NonNull::new(raw).map(Syncobj).ok_or(Error::NotFound)
    }

    /// The syncobj.
    pub fn as_raw(&self) -> *mut RawSyncobj {
        self.0.as_ptr()
    }

    /// Whether `self` and `other` are references to the same syncobj.
    pub fn same_syncobj(&self, other: &Syncobj) -> bool {
        self.0 == other.0
    }

    /// The fence the syncobj holds now (`drm_syncobj_fence_get`): for a timeline its newest
    /// chain node; `None` if it holds none.
    pub fn fence(&self) -> Option<DmaFence> {
        // SAFETY: We hold a reference, so the syncobj is alive; the call returns a reference.
        let raw = unsafe { gpukit_drm_syncobj_fence_get(self.as_raw()) };
        // SAFETY: A non-null result is a fence whose reference is handed to us.
        NonNull::new(raw).map(|f| unsafe { DmaFence::from_raw(f) })
    }

    /// Replaces the fence of the syncobj (`drm_syncobj_replace_fence`; `None` empties it). The
    /// syncobj takes its own reference. Allocates nothing and cannot fail.
    pub fn replace_fence(&self, fence: Option<&DmaFence>) {
        let f = fence.map_or(core::ptr::null_mut(), DmaFence::as_raw);
        // SAFETY: The syncobj is alive (we hold a reference); `f` is null or a live fence.
        unsafe { gpukit_drm_syncobj_replace_fence(self.as_raw(), f) };
    }

    /// Adds timeline point `point` holding `fence` in `link` (`drm_syncobj_add_point`). The
    /// syncobj owns the link from now on and the link takes its own reference to `fence`.
    /// Allocates nothing and cannot fail.
    pub fn add_point(&self, link: ChainLink, fence: &DmaFence, point: u64) {
        // The link is handed to the syncobj: it must not be freed here.
        let link = ManuallyDrop::new(link);
        // SAFETY: The syncobj is alive (we hold a reference); `link.0` is an unused chain node
        // we own (type invariant of `ChainLink`), given away here; `fence` is alive.
        unsafe {
            gpukit_drm_syncobj_add_point(self.as_raw(), link.0.as_ptr(), fence.as_raw(), point)
        };
    }
}

impl Clone for Syncobj {
    fn clone(&self) -> Self {
        // SAFETY: We hold a reference, so the syncobj is alive.
        unsafe { gpukit_drm_syncobj_get(self.as_raw()) };
        // INVARIANT: We just took the reference the clone owns.
        Syncobj(self.0)
    }
}

impl Drop for Syncobj {
    fn drop(&mut self) {
        // SAFETY: We own one reference (type invariant), given back here.
        unsafe { gpukit_drm_syncobj_put(self.as_raw()) };
    }
}

impl core::fmt::Debug for Syncobj {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.debug_tuple("Syncobj").field(&self.0).finish()
    }
}

/// The fence of `point` of the syncobj `handle` names in `file` (`drm_syncobj_find_fence`).
///
/// # Safety
///
/// `file` is an open `struct drm_file`.
pub(crate) unsafe fn find_fence(
    file: *mut bindings::drm_file,
    handle: u32,
    point: u64,
    flags: u32,
) -> Result<DmaFence> {
    let mut fence = core::ptr::null_mut();
    // SAFETY: The file is open (caller's guarantee); `fence` is a valid place for the result.
    let ret =
        unsafe { gpukit_drm_syncobj_find_fence(file, handle, point, flags.into(), &mut fence) };
    super::drm::check(ret)?;
    let fence = NonNull::new(fence).ok_or(Error::Invalid)?;
    // SAFETY: On success the call hands us a reference to the fence.
    Ok(unsafe { DmaFence::from_raw(fence) })
}

/// A timeline chain node set aside for [`Syncobj::add_point`] (`dma_fence_chain_alloc`).
///
/// # Invariants
///
/// `self.0` is a `struct dma_fence_chain` from `dma_fence_chain_alloc`, never initialised, that
/// this value owns.
pub struct ChainLink(NonNull<RawChain>);

// SAFETY: An unused chain node is plain memory owned by this value.
unsafe impl Send for ChainLink {}
// SAFETY: Nothing is reachable through `&ChainLink`.
unsafe impl Sync for ChainLink {}

impl ChainLink {
    /// Allocates a chain node (`dma_fence_chain_alloc`): [`Error::NoMemory`] if that fails.
    pub fn new() -> Result<Self> {
        // SAFETY: Allocates an uninitialised node (or returns null).
        let raw = unsafe { gpukit_drm_fence_chain_alloc() };
        // INVARIANT: A fresh node, ours.
        NonNull::new(raw).map(ChainLink).ok_or(Error::NoMemory)
    }

    /// Allocates a chain node for a timeline point of `file`'s syncobjs: in the kernel the
    /// same as [`new`](Self::new) (`dma_fence_chain_alloc`), here so that a driver's submit
    /// path reads the same on every backend (the crate's own core takes the node from the
    /// file's device memory).
    pub fn new_in<F: crate::drm::DriverFile>(_file: &crate::drm::File<F>) -> Result<Self> {
        Self::new()
    }
}

impl Drop for ChainLink {
    fn drop(&mut self) {
        // SAFETY: The node is ours and was never initialised or published (type invariant).
        unsafe { gpukit_drm_fence_chain_free(self.0.as_ptr()) };
    }
}

impl core::fmt::Debug for ChainLink {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.write_str("ChainLink")
    }
}

/// Calls `f` on each leaf fence of `fence` (`dma_fence_unwrap_for_each`): the fences of its
/// chain nodes (the nodes whose fence has signalled are unlinked on the way) and of its fence
/// arrays; a fence that is neither is its own single leaf.
///
/// `f` receives a borrowed view of each leaf, valid for the call only (the walk holds the
/// container the leaf is in); [`Clone`] it to keep the leaf.
pub fn for_each_unwrapped<F: FnMut(&DmaFence)>(fence: &DmaFence, mut f: F) {
    /// Calls the closure `ctx` points to on a borrowed view of `leaf`.
    ///
    /// # Safety
    ///
    /// `ctx` points to a `G` not otherwise used during the call; `leaf` is null or a fence
    /// alive for the call.
    unsafe extern "C" fn visit<G: FnMut(&DmaFence)>(
        ctx: *mut c_void,
        leaf: *mut bindings::dma_fence,
    ) {
        // SAFETY: `ctx` is the `&mut G` below, alive and unused elsewhere during the walk.
        let f = unsafe { &mut *ctx.cast::<G>() };
        let Some(leaf) = NonNull::new(leaf) else {
            return;
        };
        // The walk holds the leaf's container, and so the leaf, during the call: the view owns
        // no reference and must not give one back.
        // SAFETY: Never dropped (see above); only a shared reference is handed out.
        let view = ManuallyDrop::new(unsafe { DmaFence::from_raw(leaf) });
        f(&view);
    }
    let ctx = core::ptr::from_mut(&mut f).cast::<c_void>();
    // SAFETY: `fence` is alive (we borrow a reference); `visit::<F>` matches `ctx`, a closure
    // that lives across the call.
    unsafe { gpukit_drm_fence_unwrap_each(fence.as_raw(), visit::<F>, ctx) };
}
