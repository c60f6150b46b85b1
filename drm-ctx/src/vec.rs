// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A growable array in memory from a device's allocator, for the core's tables.

use crate::{mem::MemOps, Error, Result};
use core::{alloc::Layout, marker::PhantomData, ptr::NonNull};

/// A vector whose buffer comes from a [`MemOps`]; growing it fails with
/// [`Error::NoMemory`] instead of aborting.
///
/// # Invariants
///
/// - If `cap > 0` and `T` is not zero-sized, `ptr` is a block from `mem` with the layout of
///   `[T; cap]`; otherwise it is dangling and nothing is allocated.
/// - The first `len <= cap` elements are initialised.
pub(crate) struct MemVec<T> {
    ptr: NonNull<T>,
    cap: usize,
    len: usize,
    mem: MemOps,
    _owns: PhantomData<T>,
}

// SAFETY: The vector owns its elements; the allocator functions are plain `fn`s.
unsafe impl<T: Send> Send for MemVec<T> {}
// SAFETY: Shared access only gives shared references to the elements.
unsafe impl<T: Sync> Sync for MemVec<T> {}

impl<T> MemVec<T> {
    /// An empty vector (allocates nothing).
    pub(crate) const fn new(mem: MemOps) -> Self {
        Self {
            ptr: NonNull::dangling(),
            cap: if core::mem::size_of::<T>() == 0 {
                usize::MAX
            } else {
                0
            },
            len: 0,
            mem,
            _owns: PhantomData,
        }
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Makes room for `extra` more elements; [`Error::NoMemory`] if the buffer cannot grow.
    pub(crate) fn try_reserve(&mut self, extra: usize) -> Result {
        let want = self.len.checked_add(extra).ok_or(Error::NoMemory)?;
        if want <= self.cap {
            return Ok(());
        }
        let cap = want.max(self.cap.saturating_mul(2)).max(4);
        let layout = Layout::array::<T>(cap).map_err(|_| Error::NoMemory)?;
        let new = (self.mem.alloc)(layout)?.cast::<T>();
        if self.cap > 0 {
            // SAFETY: Both blocks hold at least `len` elements and are distinct; the first `len`
            // of the old one are initialised (type invariant) and move to the new one.
            unsafe { core::ptr::copy_nonoverlapping(self.ptr.as_ptr(), new.as_ptr(), self.len) };
            // SAFETY: The old block came from `mem` with the layout of `[T; cap]` (type
            // invariant) and its elements have moved out.
            unsafe {
                (self.mem.free)(
                    self.ptr.cast(),
                    Layout::array::<T>(self.cap).unwrap_or(layout),
                )
            };
        }
        // INVARIANT: `new` is a block of `[T; cap]` from `mem` holding the `len` elements.
        self.ptr = new;
        self.cap = cap;
        Ok(())
    }

    /// The address of slot `i` of the buffer (in bounds for `i <= cap`).
    fn slot(&self, i: usize) -> *mut T {
        self.ptr.as_ptr().wrapping_add(i)
    }

    /// Appends `value` if there is room (`Err(value)` back otherwise); never allocates.
    pub(crate) fn push_within_capacity(&mut self, value: T) -> core::result::Result<(), T> {
        if self.len == self.cap {
            return Err(value);
        }
        // SAFETY: `len < cap`, so the slot is inside the buffer and uninitialised.
        unsafe { self.slot(self.len).write(value) };
        // INVARIANT: The new element is initialised.
        self.len += 1;
        Ok(())
    }

    /// Appends `value`, growing the buffer if needed; [`Error::NoMemory`] (the value is then
    /// dropped) if it cannot grow.
    pub(crate) fn try_push(&mut self, value: T) -> Result {
        self.try_reserve(1)?;
        self.push_within_capacity(value)
            .map_err(|_| Error::NoMemory)
    }

    /// Removes the last element.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        // INVARIANT: The element read out is no longer counted.
        self.len -= 1;
        // SAFETY: The element at `len` was initialised and is now outside the initialised part.
        Some(unsafe { self.slot(self.len).read() })
    }

    /// Removes element `at`, putting the last one in its place; `None` if there is no such
    /// element.
    pub(crate) fn swap_remove(&mut self, at: usize) -> Option<T> {
        if at >= self.len {
            return None;
        }
        let last = self.pop()?;
        if at == self.len {
            return Some(last);
        }
        Some(core::mem::replace(&mut self.as_mut_slice()[at], last))
    }

    /// The elements.
    pub(crate) fn as_slice(&self) -> &[T] {
        // SAFETY: The first `len` elements are initialised (type invariant); `ptr` is non-null
        // and aligned even when dangling.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The elements, mutably.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: As in `as_slice`, borrowed uniquely.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// The elements, in order.
    pub(crate) fn iter(&self) -> core::slice::Iter<'_, T> {
        self.as_slice().iter()
    }

    /// The elements, front to back, by value.
    pub(crate) fn into_iter(mut self) -> IntoIter<T> {
        let end = self.len;
        // INVARIANT: The elements now belong to the iterator, which drops those it does not
        // hand out; the vector only frees its buffer.
        self.len = 0;
        IntoIter {
            buf: self,
            next: 0,
            end,
        }
    }

    /// Takes the contents, leaving an empty vector with the same allocator.
    pub(crate) fn take(&mut self) -> Self {
        core::mem::replace(self, Self::new(self.mem))
    }
}

/// The elements of a [`MemVec`], by value ([`MemVec::into_iter`]).
///
/// # Invariants
///
/// The elements `next..end` of `buf`'s buffer are initialised and owned by the iterator.
pub(crate) struct IntoIter<T> {
    buf: MemVec<T>,
    next: usize,
    end: usize,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.next == self.end {
            return None;
        }
        // SAFETY: The element is initialised and ours (type invariant); it is read out once,
        // as `next` moves past it.
        let v = unsafe { self.buf.slot(self.next).read() };
        self.next += 1;
        Some(v)
    }
}

impl<T> Drop for IntoIter<T> {
    fn drop(&mut self) {
        for i in self.next..self.end {
            // SAFETY: The elements not handed out are initialised and ours (type invariant),
            // dropped once, here.
            unsafe { core::ptr::drop_in_place(self.buf.slot(i)) };
        }
    }
}

impl<T> core::ops::Deref for MemVec<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T> Drop for MemVec<T> {
    fn drop(&mut self) {
        // SAFETY: The first `len` elements are initialised and dropped once, here.
        unsafe { core::ptr::drop_in_place(self.as_mut_slice() as *mut [T]) };
        if self.cap > 0 && core::mem::size_of::<T>() > 0 {
            if let Ok(layout) = Layout::array::<T>(self.cap) {
                // SAFETY: The block came from `mem` with this layout (type invariant) and is
                // not used again.
                unsafe { (self.mem.free)(self.ptr.cast(), layout) };
            }
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::mem::Global;

    #[test]
    fn push_pop_and_remove() {
        let mut v = MemVec::new(MemOps::of::<Global>());
        for i in 0..10u32 {
            v.try_push(i).unwrap();
        }
        assert_eq!(v.len(), 10);
        assert_eq!(v.swap_remove(2), Some(2));
        assert_eq!(v.swap_remove(9), None);
        assert_eq!(v.as_slice(), [0, 1, 9, 3, 4, 5, 6, 7, 8]);
        assert_eq!(v.pop(), Some(8));
        let w = v.take();
        assert_eq!((v.len(), w.len()), (0, 8));
        let mut it = w.into_iter();
        assert_eq!((it.next(), it.next()), (Some(0), Some(1)));
        drop(it);
        let mut s = MemVec::new(MemOps::of::<Global>());
        s.try_push(std::string::String::from("dropped with the vector"))
            .unwrap();
        assert_eq!(s.push_within_capacity(std::string::String::new()), Ok(()));
    }
}
