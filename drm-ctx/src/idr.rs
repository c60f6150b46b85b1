// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Per-file handle tables numbered like the kernel's IDR.
//!
//! Handles start at 1 and a new entry always gets the lowest free handle (`idr_alloc(.., 1, 0,
//! ..)`), up to `INT_MAX`. Allocation and removal cost `O(log n)`; allocation fails with
//! [`Error::NoMemory`] instead of aborting when memory runs out, and removal never allocates.

use crate::{mem::MemOps, vec::MemVec, Error, Result};

/// Largest handle (the kernel's IDR limit, `INT_MAX`).
pub(crate) const MAX_HANDLE: u32 = i32::MAX as u32;

/// A handle table.
///
/// # Invariants
///
/// - Handle `h` lives in `slots[h - 1]`.
/// - `free` holds exactly the handles `h <= slots.len()` whose slot is empty, as a binary
///   min-heap (each entry no larger than its children `2i + 1` and `2i + 2`), and has room for
///   `slots.len()` entries, so that [`remove`](Self::remove) never allocates.
/// - `len` is the number of occupied slots.
pub(crate) struct Idr<V> {
    slots: MemVec<Option<V>>,
    free: MemVec<u32>,
    len: usize,
}

impl<V> Idr<V> {
    /// An empty table whose memory comes from `mem`.
    pub(crate) const fn new(mem: MemOps) -> Self {
        Self {
            slots: MemVec::new(mem),
            free: MemVec::new(mem),
            len: 0,
        }
    }

    /// Takes the lowest free handle off the heap.
    fn pop_free(&mut self) -> Option<u32> {
        let n = self.free.len();
        if n == 0 {
            return None;
        }
        let heap = self.free.as_mut_slice();
        heap.swap(0, n - 1);
        let mut i = 0;
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut least = i;
            if l < n - 1 && heap[l] < heap[least] {
                least = l;
            }
            if r < n - 1 && heap[r] < heap[least] {
                least = r;
            }
            if least == i {
                break;
            }
            heap.swap(i, least);
            i = least;
        }
        self.free.pop()
    }

    /// Puts a free handle on the heap; `false` (nothing changed) if it has no room.
    fn push_free(&mut self, handle: u32) -> bool {
        if self.free.push_within_capacity(handle).is_err() {
            return false;
        }
        let heap = self.free.as_mut_slice();
        let mut i = heap.len() - 1;
        while i > 0 {
            let parent = (i - 1) / 2;
            if heap[parent] <= heap[i] {
                break;
            }
            heap.swap(i, parent);
            i = parent;
        }
        true
    }

    /// Stores `value` under the lowest free handle and returns the handle.
    ///
    /// [`Error::NoSpace`] past [`MAX_HANDLE`], [`Error::NoMemory`] if the table cannot grow (the
    /// value is dropped in both cases).
    pub(crate) fn alloc(&mut self, value: V) -> Result<u32> {
        if let Some(h) = self.pop_free() {
            self.slots.as_mut_slice()[(h - 1) as usize] = Some(value);
            self.len += 1;
            return Ok(h);
        }
        let h = u32::try_from(self.slots.len() + 1).map_err(|_| Error::NoSpace)?;
        if h > MAX_HANDLE {
            return Err(Error::NoSpace);
        }
        self.slots.try_reserve(1)?;
        let want = self.slots.len() + 1;
        self.free
            .try_reserve(want.saturating_sub(self.free.len()))?;
        // INVARIANT: `free` has room for every slot, including the new one.
        self.slots
            .push_within_capacity(Some(value))
            .map_err(|_| Error::NoMemory)?;
        self.len += 1;
        Ok(h)
    }

    /// Removes the entry of `handle`, if any.
    pub(crate) fn remove(&mut self, handle: u32) -> Option<V> {
        let slot = self.slot_mut(handle)?;
        let v = slot.take()?;
        self.len -= 1;
        // Cannot fail: `free` has room for every slot (type invariant).
        let _ = self.push_free(handle);
        Some(v)
    }

    fn slot_mut(&mut self, handle: u32) -> Option<&mut Option<V>> {
        let i = usize::try_from(handle.checked_sub(1)?).ok()?;
        self.slots.as_mut_slice().get_mut(i)
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
    pub(crate) fn take_all(&mut self) -> TakenAll<V> {
        let slots = self.slots.take();
        drop(self.free.take());
        self.len = 0;
        TakenAll { slots, next: 0 }
    }
}

/// The entries of an [`Idr`] taken out by [`Idr::take_all`], in increasing handle order.
pub(crate) struct TakenAll<V> {
    slots: MemVec<Option<V>>,
    next: usize,
}

impl<V> Iterator for TakenAll<V> {
    type Item = (u32, V);

    fn next(&mut self) -> Option<(u32, V)> {
        while let Some(slot) = self.slots.as_mut_slice().get_mut(self.next) {
            self.next += 1;
            if let Some(v) = slot.take() {
                return Some((self.next as u32, v));
            }
        }
        None
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::mem::Global;
    use std::vec::Vec;

    #[test]
    fn lowest_free_handle_first() {
        let mut t = Idr::new(MemOps::of::<Global>());
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
