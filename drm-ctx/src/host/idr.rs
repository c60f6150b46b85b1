// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Per-file handle tables numbered like the kernel's IDR.
//!
//! Handles start at 1 and a new entry always gets the lowest free handle (`idr_alloc(.., 1, 0,
//! ..)`), up to `INT_MAX`. Allocation and removal cost `O(log n)`; allocation fails with
//! [`Error::NoMemory`] instead of aborting when memory runs out, and removal never allocates.

use crate::{Error, Result};
use core::cmp::Reverse;
use std::{collections::BinaryHeap, vec::Vec};

/// Largest handle (the kernel's IDR limit, `INT_MAX`).
pub(crate) const MAX_HANDLE: u32 = i32::MAX as u32;

/// A handle table.
///
/// # Invariants
///
/// - Handle `h` lives in `slots[h - 1]`.
/// - `free` holds exactly the handles `h <= slots.len()` whose slot is empty, and has room for
///   `slots.len()` entries, so that [`remove`](Self::remove) never allocates.
/// - `len` is the number of occupied slots.
pub(crate) struct Idr<V> {
    slots: Vec<Option<V>>,
    free: BinaryHeap<Reverse<u32>>,
    len: usize,
}

impl<V> Default for Idr<V> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            free: BinaryHeap::new(),
            len: 0,
        }
    }
}

impl<V> Idr<V> {
    /// Stores `value` under the lowest free handle and returns the handle.
    ///
    /// [`Error::NoSpace`] past [`MAX_HANDLE`], [`Error::NoMemory`] if the table cannot grow (the
    /// value is dropped in both cases).
    pub(crate) fn alloc(&mut self, value: V) -> Result<u32> {
        if let Some(Reverse(h)) = self.free.pop() {
            self.slots[(h - 1) as usize] = Some(value);
            self.len += 1;
            return Ok(h);
        }
        let h = u32::try_from(self.slots.len() + 1).map_err(|_| Error::NoSpace)?;
        if h > MAX_HANDLE {
            return Err(Error::NoSpace);
        }
        self.slots.try_reserve(1).map_err(|_| Error::NoMemory)?;
        let want = self.slots.len() + 1;
        self.free
            .try_reserve(want.saturating_sub(self.free.len()))
            .map_err(|_| Error::NoMemory)?;
        // INVARIANT: `free` has room for every slot, including the new one.
        self.slots.push(Some(value));
        self.len += 1;
        Ok(h)
    }

    /// Removes the entry of `handle`, if any.
    pub(crate) fn remove(&mut self, handle: u32) -> Option<V> {
        let slot = self.slot_mut(handle)?;
        let v = slot.take()?;
        self.len -= 1;
        // Cannot allocate: `free` has room for every slot (type invariant).
        self.free.push(Reverse(handle));
        Some(v)
    }

    fn slot_mut(&mut self, handle: u32) -> Option<&mut Option<V>> {
        let i = usize::try_from(handle.checked_sub(1)?).ok()?;
        self.slots.get_mut(i)
    }

    /// The entry of `handle`.
    pub(crate) fn get(&self, handle: u32) -> Option<&V> {
        let i = usize::try_from(handle.checked_sub(1)?).ok()?;
        self.slots.get(i)?.as_ref()
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The entries in increasing handle order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &V)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((i as u32 + 1, v.as_ref()?)))
    }

    /// Empties the table, returning its entries in increasing handle order.
    pub(crate) fn take_all(&mut self) -> impl Iterator<Item = (u32, V)> {
        let slots = core::mem::take(&mut self.slots);
        self.free = BinaryHeap::new();
        self.len = 0;
        slots
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| Some((i as u32 + 1, v?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_free_handle_first() {
        let mut t = Idr::default();
        assert_eq!(t.alloc('a'), Ok(1));
        assert_eq!(t.alloc('b'), Ok(2));
        assert_eq!(t.alloc('c'), Ok(3));
        assert_eq!(t.remove(2), Some('b'));
        assert_eq!(t.remove(2), None);
        assert_eq!(t.remove(0), None);
        assert_eq!(t.remove(9), None);
        assert_eq!(t.remove(1), Some('a'));
        assert_eq!(t.len(), 1);
        assert_eq!(t.alloc('d'), Ok(1));
        assert_eq!(t.alloc('e'), Ok(2));
        assert_eq!(t.alloc('f'), Ok(4));
        assert_eq!(t.get(4), Some(&'f'));
        assert_eq!(
            t.iter().collect::<Vec<_>>(),
            [(1, &'d'), (2, &'e'), (3, &'c'), (4, &'f')]
        );
        assert_eq!(t.take_all().count(), 4);
        assert_eq!((t.len(), t.get(1)), (0, None));
        assert_eq!(t.alloc('h'), Ok(1));
    }
}
