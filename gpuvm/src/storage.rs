// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Caller-provided slot storage.
//!
//! The VM never allocates. Its VA slots, the nodes of its address index, its VM-BO slots and
//! the op entries of a VM_BIND batch live in storage the caller hands over: a fixed array or slice (which can never grow), a
//! `Vec` behind the `alloc` feature, or the driver's own implementation over its allocator
//! (a kernel `KVec`, a slab, a carve-out). Growing is the only place where memory is requested,
//! it is fallible, and it happens only in `reserve` calls and while a batch is being planned —
//! never while ops are applied.

use crate::btree::Node as IndexNode;

/// Fallible, index-addressed storage for slots of type `T`.
///
/// Implementations must keep existing elements in place (same index, same value) when growing.
///
/// # Examples
///
/// A fixed pool of 16 VA slots that never grows:
///
/// ```
/// use gpuvm::{Storage, VaSlot};
///
/// let mut pool: [VaSlot<()>; 16] = core::array::from_fn(|_| VaSlot::new());
/// assert_eq!(pool.as_slice().len(), 16);
/// assert!(pool.try_grow(1, VaSlot::new).is_err());
/// ```
pub trait Storage<T> {
    /// Storage of the same kind for the index nodes of a VM whose VA slots are in this
    /// storage (see [`Storage::new_nodes`]).
    type Nodes: Storage<IndexNode>;

    /// Node storage to go with this storage when it holds a VM's VA slots:
    /// [`Gpuvm::new`](crate::Gpuvm::new) takes it and grows it (with [`Storage::try_grow`]) to
    /// [`IndexNode::needed`](crate::IndexNode::needed) nodes for as many VAs as this storage
    /// holds, and grows it again before [`Gpuvm::reserve`](crate::Gpuvm::reserve) grows the
    /// VA storage. Only called on storage of VA slots.
    ///
    /// A fixed array of `N` slots gives `N` nodes (more than needed: use
    /// [`Gpuvm::with_nodes`](crate::Gpuvm::with_nodes) to size them exactly), a borrowed slice
    /// none (so [`Gpuvm::new`](crate::Gpuvm::new) fails unless the slice is empty: use
    /// [`Gpuvm::with_nodes`](crate::Gpuvm::with_nodes)), a `Vec` an empty `Vec`.
    fn new_nodes(&self) -> Self::Nodes;

    /// All slots.
    fn as_slice(&self) -> &[T];

    /// All slots, mutably.
    fn as_mut_slice(&mut self) -> &mut [T];

    /// Appends `additional` slots made by `fill`, or fails without changing anything.
    fn try_grow(&mut self, additional: usize, fill: fn() -> T) -> Result<(), crate::Error> {
        let _ = (additional, fill);
        Err(crate::Error::NoMemory)
    }
}

impl<T, const N: usize> Storage<T> for [T; N] {
    type Nodes = [IndexNode; N];

    fn new_nodes(&self) -> Self::Nodes {
        [IndexNode::new(); N]
    }

    fn as_slice(&self) -> &[T] {
        self
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        self
    }
}

impl<T> Storage<T> for &mut [T] {
    type Nodes = [IndexNode; 0];

    fn new_nodes(&self) -> Self::Nodes {
        []
    }

    fn as_slice(&self) -> &[T] {
        self
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        self
    }
}

#[cfg(feature = "alloc")]
impl<T> Storage<T> for alloc::vec::Vec<T> {
    type Nodes = alloc::vec::Vec<IndexNode>;

    fn new_nodes(&self) -> Self::Nodes {
        alloc::vec::Vec::new()
    }

    fn as_slice(&self) -> &[T] {
        self
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        self
    }

    fn try_grow(&mut self, additional: usize, fill: fn() -> T) -> Result<(), crate::Error> {
        self.try_reserve(additional)
            .map_err(|_| crate::Error::NoMemory)?;
        for _ in 0..additional {
            self.push(fill());
        }
        Ok(())
    }
}
