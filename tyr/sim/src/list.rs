// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A list of at most `N` items, stored inline.
//!
//! Hardware keeps its state in registers and on-chip RAM of a size fixed when the chip was
//! made: a call stack of eight frames, a handful of error-log slots. The simulator does the
//! same with [`FixedList`], so that none of its state needs a heap: what does not fit is
//! dropped and counted, never grown into.

use core::fmt;
use core::mem::MaybeUninit;
use core::ops::Deref;

/// Up to `N` items of a `Copy` type, in insertion order, and how many more did not fit.
///
/// # Invariants
///
/// `len <= N` and `items[..len]` are initialised.
///
/// # Examples
///
/// ```
/// use mali_sim::FixedList;
///
/// let mut l = FixedList::<u32, 2>::new();
/// assert!(l.push(1).is_ok());
/// assert!(l.push(2).is_ok());
/// assert_eq!(l.push(3), Err(3)); // full: nothing is overwritten
/// assert_eq!((&*l, l.dropped()), (&[1, 2][..], 1));
/// ```
pub struct FixedList<T: Copy, const N: usize> {
    items: [MaybeUninit<T>; N],
    len: usize,
    dropped: u64,
}

impl<T: Copy, const N: usize> FixedList<T, N> {
    /// An empty list.
    pub const fn new() -> Self {
        // INVARIANT: `len == 0`: nothing needs to be initialised.
        FixedList {
            items: [MaybeUninit::uninit(); N],
            len: 0,
            dropped: 0,
        }
    }

    /// An empty list, initialised in place: no `N`-sized temporary is built (what a large
    /// list inside a kernel object needs).
    pub fn init() -> impl pin_init::Init<Self> {
        // INVARIANT: `len == 0`: nothing needs to be initialised.
        pin_init::init!(Self {
            items <- pin_init::init_array_from_fn(|_| pin_init::uninit::<T, core::convert::Infallible>()),
            len: 0,
            dropped: 0,
        })
    }

    /// Appends `item`, or gives it back (and counts it as dropped) when the list is full.
    pub fn push(&mut self, item: T) -> Result<(), T> {
        match self.items.get_mut(self.len) {
            Some(slot) => {
                slot.write(item);
                // INVARIANT: `items[len]` was just initialised and `len < N` before.
                self.len += 1;
                Ok(())
            }
            None => {
                self.dropped = self.dropped.saturating_add(1);
                Err(item)
            }
        }
    }

    /// Removes and returns the last item.
    pub fn pop(&mut self) -> Option<T> {
        let last = self.last().copied()?;
        // INVARIANT: Shrinking keeps `items[..len]` initialised.
        self.len -= 1;
        Some(last)
    }

    /// The last item, mutably.
    pub fn last_mut(&mut self) -> Option<&mut T> {
        let i = self.len.checked_sub(1)?;
        let slot = self.items.get_mut(i)?;
        // SAFETY: `i < len`, so `items[i]` is initialised (type invariant).
        Some(unsafe { slot.assume_init_mut() })
    }

    /// Empties the list and resets the dropped count.
    pub fn clear(&mut self) {
        // INVARIANT: An empty prefix is trivially initialised.
        self.len = 0;
        self.dropped = 0;
    }

    /// How many pushes found the list full since it was made (or last cleared).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The items.
    pub fn as_slice(&self) -> &[T] {
        let init = &self.items[..self.len.min(N)];
        // SAFETY: `items[..len]` are initialised (type invariant), and `MaybeUninit<T>` has
        // the layout of `T`, so the slice of them is a valid `[T]` of the same length.
        unsafe { core::slice::from_raw_parts(init.as_ptr().cast::<T>(), init.len()) }
    }
}

impl<T: Copy, const N: usize> Default for FixedList<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy, const N: usize> Clone for FixedList<T, N> {
    fn clone(&self) -> Self {
        // `MaybeUninit<T>: Copy` for `T: Copy`: copying the array copies the initialised prefix.
        FixedList {
            items: self.items,
            len: self.len,
            dropped: self.dropped,
        }
    }
}

impl<T: Copy, const N: usize> Deref for FixedList<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy + fmt::Debug, const N: usize> fmt::Debug for FixedList<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()?;
        if self.dropped != 0 {
            write!(f, " (+{} dropped)", self.dropped)?;
        }
        Ok(())
    }
}

impl<T: Copy + PartialEq, const N: usize> PartialEq for FixedList<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice() && self.dropped == other.dropped
    }
}

impl<T: Copy + Eq, const N: usize> Eq for FixedList<T, N> {}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn push_pop_and_overflow() {
        let mut l = FixedList::<(u8, u64), 3>::new();
        assert_eq!(l.pop(), None);
        assert!(l.last_mut().is_none());
        for i in 0..5u8 {
            let r = l.push((i, u64::from(i) * 10));
            assert_eq!(r.is_ok(), i < 3);
        }
        assert_eq!(l.len(), 3);
        assert_eq!(l.dropped(), 2);
        if let Some(last) = l.last_mut() {
            last.1 = 99;
        }
        let copy = l.clone();
        assert_eq!(l.pop(), Some((2, 99)));
        assert_eq!(&*l, &[(0, 0), (1, 10)]);
        assert_ne!(l, copy);
        assert_eq!(
            std::format!("{copy:?}"),
            "[(0, 0), (1, 10), (2, 99)] (+2 dropped)"
        );
        l.clear();
        assert!(l.is_empty() && l.dropped() == 0);
        assert_eq!(l, FixedList::default());
    }
}
