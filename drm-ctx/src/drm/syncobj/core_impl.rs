// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Syncobjs on the crate's own core (not built in the kernel, where `crate::kernel::syncobj`
//! puts the same API on `struct drm_syncobj`), without `std` or `alloc`.
//!
//! - [`Fence`] is a fence object that counts its own references, and [`FenceRef`] one such
//!   reference (the core's `struct dma_fence` and its `dma_fence_get`/`put`); a [`Waiter`] is a
//!   waker queued on one.
//! - [`SyncobjTable`] is the syncobjs of a file: binary and timeline syncobjs, reference
//!   counted like `struct drm_syncobj`, in a handle table numbered like the kernel's IDR.
//! - [`ChainNode`] is a timeline point (`struct dma_fence_chain`), set aside as a
//!   [`ChainPoint`].
//!
//! All their memory comes from one [`mem::Allocator`](crate::mem::Allocator): a file's
//! syncobjs from its device's. The host core ([`crate::host::syncobj`], feature `std`) adds the
//! syncobj ioctls and the waits that sleep on top of these same types.

mod chain;
mod fence;
mod table;

pub use self::chain::{live_chain_links, ChainNode, ChainPoint};
pub use self::fence::{Fence, FenceRef, SignalledFence, Waiter};
pub use self::table::{SyncobjKey, SyncobjTable};

pub(crate) use self::table::SyncobjCell;

use super::SyncobjFence;
use crate::drm::{DriverFile, File};
use crate::types::ARef;
use crate::Result;

/// `ETIME`: a wait ran out of time.
pub const ETIME: i32 = -62;

/// A counted reference to a syncobj (the kernel's `struct drm_syncobj`), from
/// [`File::syncobj`](crate::drm::File::syncobj).
///
/// It keeps the syncobj it was looked up as, even once the handle is destroyed or names
/// another syncobj.
#[derive(Clone)]
pub struct Syncobj(ARef<SyncobjCell>);

impl Syncobj {
    pub(crate) fn new(cell: ARef<SyncobjCell>) -> Self {
        Syncobj(cell)
    }

    /// Whether `self` and `other` are references to the same syncobj.
    pub fn same_syncobj(&self, other: &Syncobj) -> bool {
        ARef::ptr_eq(&self.0, &other.0)
    }

    /// The fence the syncobj holds now (`drm_syncobj_fence_get`): for a timeline its newest
    /// chain node; `None` if it holds none.
    pub fn fence(&self) -> Option<SyncobjFence> {
        self.0.get()
    }

    /// Replaces the fence of the syncobj (`drm_syncobj_replace_fence`; `None` empties it).
    /// Allocates nothing and cannot fail.
    pub fn replace_fence(&self, fence: Option<&SyncobjFence>) {
        self.0.replace(fence.cloned());
    }

    /// Adds timeline point `point` holding `fence` in `link` (`drm_syncobj_add_point`).
    /// Allocates nothing and cannot fail.
    pub fn add_point(&self, link: ChainLink, fence: &SyncobjFence, point: u64) {
        self.0.add_point(link.0, fence.clone(), point);
    }
}

impl core::fmt::Debug for Syncobj {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.debug_struct("Syncobj")
            .field("fence", &self.0.get().is_some())
            .finish()
    }
}

/// A timeline chain node set aside for [`Syncobj::add_point`] (`dma_fence_chain_alloc`);
/// dropped unused, it is freed.
#[derive(Debug)]
pub struct ChainLink(ChainPoint);

impl ChainLink {
    /// Sets a chain node aside in the host's global memory ([`ChainPoint::new`]).
    #[cfg(feature = "std")]
    pub fn new() -> Result<Self> {
        ChainPoint::new().map(ChainLink)
    }

    /// Sets a chain node aside in the memory of `file`'s syncobjs (its device's
    /// [`mem::Allocator`](crate::mem::Allocator)); [`Error::NoMemory`](crate::Error::NoMemory)
    /// if there is none.
    pub fn new_in<F: DriverFile>(file: &File<F>) -> Result<Self> {
        file.syncobjs().alloc_point().map(ChainLink)
    }
}

/// Calls `f` on each leaf fence of `fence` (`dma_fence_unwrap_for_each`): the fences of its
/// chain nodes, the nodes whose fence has signalled being unlinked on the way; a fence that is
/// not a chain node is its own single leaf.
///
/// # Examples
///
/// ```
/// use drm_ctx::drm::syncobj::{for_each_unwrapped, FenceRef, SignalledFence, SyncobjTable};
/// use drm_ctx::mem::Global;
///
/// let t = SyncobjTable::new_in::<Global>();
/// let h = t.create(None).unwrap();
/// let mine = FenceRef::signalled();
/// t.add_point(h, t.alloc_point().unwrap(), mine.clone(), 1).unwrap();
/// let mut parts = Vec::new();
/// for_each_unwrapped(&t.find_fence(h, 0, 0).unwrap(), |f| parts.push(f.clone()));
/// assert_eq!(parts.len(), 1);
/// assert!(FenceRef::ptr_eq(&parts[0], &mine));
/// assert!(parts[0].as_any().is::<SignalledFence>());
/// ```
pub fn for_each_unwrapped<F: FnMut(&SyncobjFence)>(fence: &SyncobjFence, f: F) {
    chain::for_each_unwrapped(fence, f);
}
