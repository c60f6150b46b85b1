// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The syncobj API on the host core (not built in the kernel, where `crate::kernel::syncobj`
//! puts it on `struct drm_syncobj`): a [`Syncobj`] is a counted reference to a syncobj of a
//! file's [`SyncobjTable`](crate::host::syncobj::SyncobjTable).

use super::SyncobjFence;
use crate::host::syncobj::{self as host, ChainPoint, SyncobjCell};
use crate::types::ARef;
use crate::Result;

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
    /// Sets a chain node aside ([`ChainPoint::new`]).
    pub fn new() -> Result<Self> {
        ChainPoint::new().map(ChainLink)
    }
}

/// Calls `f` on each leaf fence of `fence` (`dma_fence_unwrap_for_each`): the fences of its
/// chain nodes, the nodes whose fence has signalled being unlinked on the way; a fence that is
/// not a chain node is its own single leaf ([`host::for_each_unwrapped`]).
pub fn for_each_unwrapped<F: FnMut(&SyncobjFence)>(fence: &SyncobjFence, f: F) {
    host::for_each_unwrapped(fence, f);
}
