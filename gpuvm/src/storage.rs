// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Caller-provided slot storage.
//!
//! The VM never allocates. Its VA nodes, its VM-BO slots and the op entries of a VM_BIND batch
//! live in storage the caller hands over: a fixed array or slice (which can never grow), a
//! `Vec` behind the `alloc` feature, or the driver's own implementation over its allocator
//! (a kernel `KVec`, a slab, a carve-out). Growing is the only place where memory is requested,
//! it is fallible, and it happens only in `reserve` calls and while a batch is being planned —
//! never while ops are applied.

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
    fn as_slice(&self) -> &[T] {
        self
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        self
    }
}

impl<T> Storage<T> for &mut [T] {
    fn as_slice(&self) -> &[T] {
        self
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        self
    }
}

#[cfg(feature = "alloc")]
impl<T> Storage<T> for alloc::vec::Vec<T> {
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
