// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Containers the driver's bookkeeping lives in, over an allocator of its environment.
//!
//! Linux builds no `alloc` crate for its Rust code: a kernel driver gets its memory from
//! `kmalloc` and its containers from the `kernel` crate (`KVec`, `Arc`), whose interfaces are
//! not `alloc`'s (every growth takes GFP flags and can fail; `Arc` has no weak references). The
//! driver's logic is the same wherever it runs, so it does not name either: it keeps its lists
//! in [`Vec`] and shares objects with [`Arc`] and [`Weak`], all three drawing their memory from
//! a [`drm_ctx::mem::Allocator`] type chosen by the environment (`kmalloc(GFP_KERNEL)` in the
//! kernel, the global allocator on the host, anything that implements the trait elsewhere).
//!
//! Every growth is fallible: a failed allocation is [`Error::NoMemory`] and leaves the
//! container as it was, never an abort. A reference count that would overflow saturates (the
//! object then lives on, as the kernel's `refcount_t` does), never wraps.
//!
//! # Examples
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use drm_ctx::mem::Global;
//! use tyr::env::{Arc, Vec};
//!
//! let mut v = Vec::<u32, Global>::new();
//! v.try_push(7)?;
//! v.try_extend_from_slice(&[8, 9])?;
//! assert_eq!(&v[..], &[7, 8, 9]);
//!
//! let shared = Arc::<_, Global>::try_new(v)?;
//! let weak = Arc::downgrade(&shared);
//! assert_eq!(weak.upgrade().map(|v| v.len()), Some(3));
//! drop(shared);
//! assert!(weak.upgrade().is_none());
//! # }
//! # Ok::<(), tyr::Error>(())
//! ```

use core::alloc::Layout;
use core::marker::PhantomData;
use core::mem::{self, ManuallyDrop, MaybeUninit};
use core::ops::{Deref, DerefMut};
use core::ptr::{self, NonNull};
use core::sync::atomic::{fence, AtomicUsize, Ordering};
use core::{fmt, slice};

use drm_ctx::mem::Allocator;

use crate::{Error, Result};

/// The largest block a container asks its allocator for: `INT_MAX` bytes, above which the
/// kernel's `kvmalloc` fails with a warning. A growth beyond it is [`Error::NoMemory`].
pub const MAX_BLOCK: usize = i32::MAX as usize;

/// A growable array whose memory comes from `A`.
///
/// # Invariants
///
/// `ptr` points to a block of `cap` elements allocated from `A` with `Layout::array::<T>(cap)`
/// (dangling, and not allocated, when `cap` is 0 or `T` is zero-sized, in which case `cap` is
/// `usize::MAX`); its first `len` elements are initialised; `len <= cap`.
pub struct Vec<T, A: Allocator> {
    ptr: NonNull<T>,
    cap: usize,
    len: usize,
    _owns: PhantomData<(T, fn() -> A)>,
}

// SAFETY: The vector owns its elements: sending it sends them.
unsafe impl<T: Send, A: Allocator> Send for Vec<T, A> {}
// SAFETY: Shared access gives only shared access to the elements.
unsafe impl<T: Sync, A: Allocator> Sync for Vec<T, A> {}

impl<T, A: Allocator> Vec<T, A> {
    /// An empty vector; allocates nothing.
    pub const fn new() -> Self {
        // INVARIANT: No element, nothing allocated; zero-sized elements need no memory.
        Vec {
            ptr: NonNull::dangling(),
            cap: if mem::size_of::<T>() == 0 {
                usize::MAX
            } else {
                0
            },
            len: 0,
            _owns: PhantomData,
        }
    }

    /// The place of element `i` (not necessarily inside the block: callers check).
    fn at(&self, i: usize) -> *mut T {
        self.ptr.as_ptr().wrapping_add(i)
    }

    /// Frees the block of a vector with `cap != 0` and sized elements.
    ///
    /// # Safety
    ///
    /// `ptr` and `cap` describe a block from `A` (the type invariant), not used afterwards.
    unsafe fn free_block(ptr: NonNull<T>, cap: usize) {
        // SAFETY: The layout was computed successfully when the block was allocated.
        let layout = unsafe { Layout::array::<T>(cap).unwrap_unchecked() };
        // SAFETY: The block came from `A` with that layout (caller's guarantee).
        unsafe { A::free(ptr.cast(), layout) };
    }

    /// An empty vector with room for `n` elements.
    pub fn try_with_capacity(n: usize) -> Result<Self> {
        let mut v = Self::new();
        v.try_reserve(n)?;
        Ok(v)
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many elements fit without a new allocation.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Makes room for `additional` more elements; [`Error::NoMemory`] (and no change) if the
    /// memory cannot be had or the size overflows.
    pub fn try_reserve(&mut self, additional: usize) -> Result {
        let need = self.len.checked_add(additional).ok_or(Error::NoMemory)?;
        if need <= self.cap {
            return Ok(());
        }
        // Grow geometrically so that a run of pushes costs amortised constant time.
        let new_cap = need.max(self.cap.saturating_mul(2)).max(4);
        self.grow_to(new_cap).or_else(|_| self.grow_to(need))
    }

    /// Makes room for exactly `additional` more elements (no more than needed).
    pub fn try_reserve_exact(&mut self, additional: usize) -> Result {
        let need = self.len.checked_add(additional).ok_or(Error::NoMemory)?;
        if need <= self.cap {
            return Ok(());
        }
        self.grow_to(need)
    }

    fn grow_to(&mut self, new_cap: usize) -> Result {
        let layout = Layout::array::<T>(new_cap).map_err(|_| Error::NoMemory)?;
        // What `kvmalloc` refuses (with a warning): no block is ever asked for above it,
        // whatever length a client makes a list reach.
        if layout.size() > MAX_BLOCK {
            return Err(Error::NoMemory);
        }
        let new = A::alloc(layout).map_err(|_| Error::NoMemory)?.cast::<T>();
        if self.cap != 0 {
            // SAFETY: The old block holds `len` initialised elements (invariant); the new one is
            // a distinct block of `new_cap >= len` elements.
            unsafe { ptr::copy_nonoverlapping(self.ptr.as_ptr(), new.as_ptr(), self.len) };
            // SAFETY: The old block came from `A` (invariant); its elements were moved out
            // bitwise above and are not dropped there, and it is not used again.
            unsafe { Self::free_block(self.ptr, self.cap) };
        }
        // INVARIANT: `new` holds `new_cap` elements, the first `len` initialised.
        self.ptr = new;
        self.cap = new_cap;
        Ok(())
    }

    /// Appends `value`; [`Error::NoMemory`] (and `value` dropped, the vector unchanged) if the
    /// vector cannot grow.
    pub fn try_push(&mut self, value: T) -> Result {
        self.try_reserve(1)?;
        self.push_within_capacity(value)
            .map_err(|_| Error::NoMemory)
    }

    /// Appends `value` if there is room for it without allocating, else hands it back.
    pub fn push_within_capacity(&mut self, value: T) -> core::result::Result<(), T> {
        if self.len == self.cap {
            return Err(value);
        }
        // SAFETY: `len < cap`: the slot is inside the block and not initialised.
        unsafe { self.at(self.len).write(value) };
        // INVARIANT: The new element is initialised.
        self.len += 1;
        Ok(())
    }

    /// Inserts `value` at `index`, moving the later elements up; [`Error::Range`] if `index`
    /// is past the end, [`Error::NoMemory`] if the vector cannot grow (unchanged either way).
    pub fn try_insert(&mut self, index: usize, value: T) -> Result {
        if index > self.len {
            return Err(Error::Range);
        }
        self.try_reserve(1)?;
        let at = self.at(index);
        // SAFETY: `index <= len < cap`: the moved range `index..len` and its destination
        // `index + 1..=len` are inside the block.
        unsafe { ptr::copy(at, self.at(index + 1), self.len - index) };
        // SAFETY: The slot is inside the block; its old element was moved up.
        unsafe { at.write(value) };
        // INVARIANT: Elements `0..=len` are initialised after the move and the write.
        self.len += 1;
        Ok(())
    }

    /// Removes and returns the last element.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        // INVARIANT: The last element is read out and no longer counted.
        self.len -= 1;
        // SAFETY: The element at the old `len - 1` was initialised and is now out of range.
        Some(unsafe { self.at(self.len).read() })
    }

    /// Removes and returns the element at `index`, moving the later ones down; `None` if there
    /// is no such element.
    pub fn remove(&mut self, index: usize) -> Option<T> {
        if index >= self.len {
            return None;
        }
        // SAFETY: `index < len`: the element is initialised, and read out once.
        let value = unsafe { self.at(index).read() };
        // SAFETY: The range `index + 1..len` and its destination are inside the initialised
        // part; the element at `index` was read out.
        unsafe { ptr::copy(self.at(index + 1), self.at(index), self.len - index - 1) };
        // INVARIANT: Elements `0..len - 1` are initialised after the move.
        self.len -= 1;
        Some(value)
    }

    /// Removes and returns the element at `index`, putting the last one in its place; `None` if
    /// there is no such element.
    pub fn swap_remove(&mut self, index: usize) -> Option<T> {
        if index >= self.len {
            return None;
        }
        let last = self.len - 1;
        self.swap(index, last);
        self.pop()
    }

    /// Drops the elements from `len` on.
    pub fn truncate(&mut self, len: usize) {
        while self.len > len {
            drop(self.pop());
        }
    }

    /// Drops every element; keeps the memory.
    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Keeps only the elements for which `keep` returns true, in their order.
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.retain_mut(|v| keep(v));
    }

    /// Keeps only the elements for which `keep` returns true, in their order; `keep` may
    /// change them.
    pub fn retain_mut(&mut self, mut keep: impl FnMut(&mut T) -> bool) {
        let len = self.len;
        // Elements are examined from the front; while `keep` runs, the vector claims only the
        // kept prefix, so a panic in `keep` leaks the rest instead of dropping anything twice.
        // INVARIANT: Only `0..kept` is counted as initialised until the end.
        self.len = 0;
        let mut kept = 0;
        for i in 0..len {
            // SAFETY: `i < len`: element `i` is initialised and not yet moved or dropped.
            let cur = unsafe { &mut *self.at(i) };
            if keep(cur) {
                if i != kept {
                    // SAFETY: `kept < i`: slot `kept` was moved out or dropped; both in range.
                    unsafe { ptr::copy_nonoverlapping(cur, self.at(kept), 1) };
                }
                kept += 1;
                self.len = kept;
            } else {
                // SAFETY: The element is initialised and dropped once; its slot is reused or
                // left uncounted.
                unsafe { ptr::drop_in_place(cur) };
            }
        }
    }

    /// The elements as a slice.
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: The first `len` elements are initialised (invariant) and the pointer is
        // aligned and non-null.
        unsafe { slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The elements as a mutable slice.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: As in `as_slice`; `&mut self` makes the access exclusive.
        unsafe { slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Clone, A: Allocator> Vec<T, A> {
    /// Appends clones of `items`; [`Error::NoMemory`] (and no change) if the vector cannot grow.
    pub fn try_extend_from_slice(&mut self, items: &[T]) -> Result {
        self.try_reserve(items.len())?;
        for item in items {
            // Room was reserved above.
            let _ = self.push_within_capacity(item.clone());
        }
        Ok(())
    }

    /// A new vector with clones of `items`.
    pub fn try_from_slice(items: &[T]) -> Result<Self> {
        let mut v = Self::new();
        v.try_extend_from_slice(items)?;
        Ok(v)
    }

    /// Makes the length `len`, filling new places with clones of `value`.
    pub fn try_resize(&mut self, len: usize, value: T) -> Result {
        if len <= self.len {
            self.truncate(len);
            return Ok(());
        }
        self.try_reserve(len - self.len)?;
        while self.len < len {
            let _ = self.push_within_capacity(value.clone());
        }
        Ok(())
    }
}

impl<T, A: Allocator> Drop for Vec<T, A> {
    fn drop(&mut self) {
        // SAFETY: The first `len` elements are initialised and dropped once, here.
        unsafe { ptr::drop_in_place(self.as_mut_slice()) };
        if self.cap != 0 && mem::size_of::<T>() != 0 {
            // SAFETY: The block came from `A` (invariant) and goes with the vector.
            unsafe { Self::free_block(self.ptr, self.cap) };
        }
    }
}

impl<T, A: Allocator> Default for Vec<T, A> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, A: Allocator> Deref for Vec<T, A> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T, A: Allocator> DerefMut for Vec<T, A> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

// Printed as the slice it holds.
impl<T, A> fmt::Debug for Vec<T, A>
where
    T: fmt::Debug,
    A: Allocator,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

impl<T: PartialEq, A: Allocator> PartialEq for Vec<T, A> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Eq, A: Allocator> Eq for Vec<T, A> {}

impl<'a, T, A: Allocator> IntoIterator for &'a Vec<T, A> {
    type Item = &'a T;
    type IntoIter = slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, T, A: Allocator> IntoIterator for &'a mut Vec<T, A> {
    type Item = &'a mut T;
    type IntoIter = slice::IterMut<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

/// The elements of a [`Vec`] taken out of it, front to back ([`Vec::into_iter`]).
pub struct IntoIter<T, A: Allocator> {
    vec: ManuallyDrop<Vec<T, A>>,
    next: usize,
}

impl<T, A: Allocator> IntoIterator for Vec<T, A> {
    type Item = T;
    type IntoIter = IntoIter<T, A>;

    fn into_iter(self) -> IntoIter<T, A> {
        IntoIter {
            vec: ManuallyDrop::new(self),
            next: 0,
        }
    }
}

impl<T, A: Allocator> Iterator for IntoIter<T, A> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.next == self.vec.len {
            return None;
        }
        // SAFETY: `next < len`: the element is initialised and read out once (`next` moves on).
        let value = unsafe { self.vec.at(self.next).read() };
        self.next += 1;
        Some(value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.vec.len - self.next;
        (left, Some(left))
    }
}

impl<T, A: Allocator> Drop for IntoIter<T, A> {
    fn drop(&mut self) {
        let (next, len) = (self.next, self.vec.len);
        // The vector no longer counts any element: `0..next` were read out, the rest are
        // dropped here, and dropping the vector then frees only the block.
        self.vec.len = 0;
        let rest = ptr::slice_from_raw_parts_mut(self.vec.at(next), len - next);
        // SAFETY: Elements `next..len` are initialised and not yet taken; each drops once.
        unsafe { ptr::drop_in_place(rest) };
        // SAFETY: The vector is dropped once, here, and not used afterwards.
        unsafe { ManuallyDrop::drop(&mut self.vec) };
    }
}

// gpuvm keeps its slot arrays in any `Storage`; a driver's vectors grow fallibly.
impl<T, A: Allocator> gpuvm::Storage<T> for Vec<T, A> {
    type Nodes = Vec<gpuvm::IndexNode, A>;

    fn new_nodes(&self) -> Self::Nodes {
        Vec::new()
    }

    fn as_slice(&self) -> &[T] {
        self
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        self
    }

    fn try_grow(
        &mut self,
        additional: usize,
        fill: fn() -> T,
    ) -> core::result::Result<(), gpuvm::Error> {
        self.try_reserve(additional)
            .map_err(|_| gpuvm::Error::NoMemory)?;
        for _ in 0..additional {
            // Room was reserved above.
            let _ = self.push_within_capacity(fill());
        }
        Ok(())
    }
}

/// A `T` in a block of its own from `A`.
///
/// Besides moving a value to the heap ([`try_new`](Self::try_new)), it can have a value made
/// in place ([`try_new_in_place`](Self::try_new_in_place)): a value too large to pass through
/// a few stack frames (a job queue with its slots inline is tens of KiB, a kernel stack 16 KiB)
/// is written straight into its block.
///
/// # Invariants
///
/// `ptr` points to an initialised `T` in a block from `A` with `Layout::new::<T>()` that this
/// value owns (dangling, and not allocated, when `T` is zero-sized).
pub struct Box<T, A: Allocator> {
    ptr: NonNull<T>,
    _owns: PhantomData<(T, fn() -> A)>,
}

// SAFETY: The box owns its value: sending it sends the value.
unsafe impl<T: Send, A: Allocator> Send for Box<T, A> {}
// SAFETY: Shared access gives only shared access to the value.
unsafe impl<T: Sync, A: Allocator> Sync for Box<T, A> {}

impl<T, A: Allocator> Box<T, A> {
    fn alloc_block() -> Result<NonNull<T>> {
        if mem::size_of::<T>() == 0 {
            return Ok(NonNull::dangling());
        }
        A::alloc(Layout::new::<T>())
            .map(NonNull::cast)
            .map_err(|_| Error::NoMemory)
    }

    fn free_block(ptr: NonNull<T>) {
        if mem::size_of::<T>() != 0 {
            // SAFETY: The block came from `alloc_block` with this layout and holds no value.
            unsafe { A::free(ptr.cast(), Layout::new::<T>()) };
        }
    }

    /// Moves `value` into a new block; [`Error::NoMemory`] (and `value` dropped) if there is
    /// none.
    pub fn try_new(value: T) -> Result<Self> {
        let ptr = Self::alloc_block()?;
        // SAFETY: The block is fresh, sized and aligned for a `T` (or `T` is zero-sized).
        unsafe { ptr.as_ptr().write(value) };
        // INVARIANT: The block holds the value.
        Ok(Box {
            ptr,
            _owns: PhantomData,
        })
    }

    /// A new block whose value `init` makes in place: `init` gets the uninitialised block and
    /// returns the value it made there (a reference into the block, as
    /// `MaybeUninit::write` or an in-place constructor returns one). [`Error::NoMemory`] if
    /// there is no block; `init`'s error (the block freed) if it fails, or
    /// [`Error::Invalid`] if it returns a reference to anything but the block.
    pub fn try_new_in_place(
        init: impl FnOnce(&mut MaybeUninit<T>) -> Result<&mut T>,
    ) -> Result<Self> {
        let ptr = Self::alloc_block()?;
        // SAFETY: The block is sized and aligned for a `T`; `MaybeUninit` needs no
        // initialisation, and nothing else uses the block.
        let slot = unsafe { &mut *ptr.as_ptr().cast::<MaybeUninit<T>>() };
        let made = init(slot).map(|v| ptr::eq(v, ptr.as_ptr()));
        match made {
            // Safe code gets a `&mut T` into the block only by initialising it
            // (`MaybeUninit::write`); unsafe code that claims it did answers for it.
            // INVARIANT: The block holds the value `init` made.
            Ok(true) if mem::size_of::<T>() != 0 => Ok(Box {
                ptr,
                _owns: PhantomData,
            }),
            Ok(_) => {
                // A reference to something else (or a zero-sized value, whose block proves
                // nothing): the block may be uninitialised. It is freed without a drop.
                Self::free_block(ptr);
                Err(Error::Invalid)
            }
            Err(e) => {
                Self::free_block(ptr);
                Err(e)
            }
        }
    }
}

impl<T, A: Allocator> Deref for Box<T, A> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: The value is initialised and owned by `self` (invariant).
        unsafe { self.ptr.as_ref() }
    }
}

impl<T, A: Allocator> DerefMut for Box<T, A> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: As in `deref`; `&mut self` makes the access exclusive.
        unsafe { self.ptr.as_mut() }
    }
}

impl<T, A: Allocator> Drop for Box<T, A> {
    fn drop(&mut self) {
        // SAFETY: The value is initialised (invariant) and dropped once, here.
        unsafe { ptr::drop_in_place(self.ptr.as_ptr()) };
        Self::free_block(self.ptr);
    }
}

impl<T: fmt::Debug, A: Allocator> fmt::Debug for Box<T, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A map from IDs (handles, keys; `u32` unless said) to values, in memory from `A`.
///
/// The driver's ID tables (a file's VMs and groups, the device's groups and bind queues) hold
/// tens to hundreds of entries, bounded by per-file limits, and are read far more often than
/// changed: a sorted vector with binary search is smaller and faster than a tree there, and its
/// growth is one fallible reservation.
pub struct IdMap<V, A: Allocator, K = u32> {
    entries: Vec<(K, V), A>,
}

impl<V, A: Allocator, K: Ord + Copy> IdMap<V, A, K> {
    /// An empty map; allocates nothing.
    pub const fn new() -> Self {
        IdMap {
            entries: Vec::new(),
        }
    }

    fn find(&self, id: K) -> core::result::Result<usize, usize> {
        self.entries.binary_search_by_key(&id, |(k, _)| *k)
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `id` has a value.
    pub fn contains_key(&self, id: K) -> bool {
        self.find(id).is_ok()
    }

    /// The value of `id`.
    pub fn get(&self, id: K) -> Option<&V> {
        self.find(id).ok().map(|i| &self.entries[i].1)
    }

    /// The value of `id`, mutably.
    pub fn get_mut(&mut self, id: K) -> Option<&mut V> {
        self.find(id).ok().map(|i| &mut self.entries[i].1)
    }

    /// Sets the value of `id`, returning the one it replaces; [`Error::NoMemory`] (and no
    /// change, `value` dropped) if a new entry cannot be stored.
    pub fn try_insert(&mut self, id: K, value: V) -> Result<Option<V>> {
        match self.find(id) {
            Ok(i) => Ok(Some(mem::replace(&mut self.entries[i].1, value))),
            Err(i) => self.entries.try_insert(i, (id, value)).map(|()| None),
        }
    }

    /// Keeps only the entries for which `keep` returns true.
    pub fn retain(&mut self, mut keep: impl FnMut(K, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| keep(*k, v));
    }

    /// Drops every entry; keeps the memory.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Removes and returns the value of `id`.
    pub fn remove(&mut self, id: K) -> Option<V> {
        let i = self.find(id).ok()?;
        self.entries.remove(i).map(|(_, v)| v)
    }

    /// The first entry whose ID is above `after` (the first of all for `None`): a walk over
    /// the map that lets its lock go between steps, without a copy of the map.
    pub fn next_after(&self, after: Option<K>) -> Option<(K, &V)> {
        let i = match after {
            None => 0,
            Some(k) => match self.find(k) {
                Ok(i) => i + 1,
                Err(i) => i,
            },
        };
        self.entries.get(i).map(|(k, v)| (*k, v))
    }

    /// The IDs, in increasing order.
    pub fn keys(&self) -> impl Iterator<Item = K> + '_ {
        self.entries.iter().map(|(k, _)| *k)
    }

    /// The values, by increasing ID.
    pub fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.entries.iter().map(|(_, v)| v)
    }

    /// The entries, by increasing ID.
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> + '_ {
        self.entries.iter().map(|(k, v)| (*k, v))
    }

    /// Takes the values out, by increasing ID, leaving the map empty.
    pub fn into_values(self) -> impl Iterator<Item = V> {
        self.entries.into_iter().map(|(_, v)| v)
    }
}

impl<V, A: Allocator> IdMap<V, A, u32> {
    /// The lowest ID in `from..=to` without a value.
    pub fn first_free(&self, from: u32, to: u32) -> Option<u32> {
        // Entries are sorted: walk them while they fill the range from its start.
        let mut next = from;
        let start = self.find(from).unwrap_or_else(|i| i);
        for (k, _) in &self.entries[start..] {
            if *k != next {
                break;
            }
            next = next.checked_add(1)?;
        }
        (next <= to).then_some(next)
    }
}

impl<V, A: Allocator, K> Default for IdMap<V, A, K> {
    fn default() -> Self {
        IdMap {
            entries: Vec::new(),
        }
    }
}

impl<V: fmt::Debug, A: Allocator, K: Ord + Copy + fmt::Debug> fmt::Debug for IdMap<V, A, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The largest count a reference count takes before it saturates.
const MAX_REFCOUNT: usize = isize::MAX as usize;
/// Where a saturated count is parked: far from both 0 and wrapping, so that racing increments
/// and decrements cannot bring it back to either.
const SATURATED: usize = MAX_REFCOUNT + (usize::MAX - MAX_REFCOUNT) / 2;

/// Adds one to `count`, saturating instead of overflowing.
fn count_up(count: &AtomicUsize) {
    // A new reference is made from an existing one, which keeps the object alive: the
    // increment needs no ordering.
    let old = count.fetch_add(1, Ordering::Relaxed);
    if old >= MAX_REFCOUNT {
        count.store(SATURATED, Ordering::Relaxed);
    }
}

/// Takes one from `count`; true if that was the last reference.
fn count_down(count: &AtomicUsize) -> bool {
    let old = count.fetch_sub(1, Ordering::Release);
    if old >= MAX_REFCOUNT {
        // Saturated: the object stays for good.
        count.store(SATURATED, Ordering::Relaxed);
        return false;
    }
    if old != 1 {
        return false;
    }
    // Everything other holders did before dropping their references happens before the
    // object is torn down.
    fence(Ordering::Acquire);
    true
}

/// What an [`Arc`] or [`Weak`] owns, for the drop check and auto traits: an `ArcInner<T>` from
/// `A`.
type Owns<T, A> = PhantomData<(ArcInner<T>, fn() -> A)>;

/// The block an [`Arc`] points to.
struct ArcInner<T> {
    /// Strong references.
    strong: AtomicUsize,
    /// Weak references, plus one held by all strong ones together.
    weak: AtomicUsize,
    value: T,
}

/// A shared reference to a `T` in memory from `A`, freed when the last reference goes.
///
/// Like `alloc`'s `Arc`, with a fallible [`try_new`](Self::try_new) and [`Weak`] references; the
/// kernel's `Arc` has no weak references, which the driver needs (an event source holds its
/// device weakly, so that dropping the device stops it).
///
/// # Invariants
///
/// `ptr` points to a live `ArcInner<T>` allocated from `A` whose `strong` count includes this
/// reference; `value` is initialised while `strong` is not 0.
pub struct Arc<T, A: Allocator> {
    ptr: NonNull<ArcInner<T>>,
    _owns: Owns<T, A>,
}

// SAFETY: An `Arc` hands out `&T` on any thread and may drop `T` on any thread.
unsafe impl<T: Send + Sync, A: Allocator> Send for Arc<T, A> {}
// SAFETY: As above.
unsafe impl<T: Send + Sync, A: Allocator> Sync for Arc<T, A> {}

impl<T, A: Allocator> Arc<T, A> {
    /// Moves `value` into a new shared block; [`Error::NoMemory`] (and `value` dropped) if
    /// there is no memory for it.
    pub fn try_new(value: T) -> Result<Self> {
        Self::try_new_or_back(value).map_err(|_| Error::NoMemory)
    }

    /// Moves `value` into a new shared block, or hands it back if there is no memory for it
    /// (for a value that must be undone, not just dropped, when it cannot be shared).
    pub fn try_new_or_back(value: T) -> core::result::Result<Self, T> {
        let Ok(ptr) = A::alloc(Layout::new::<ArcInner<T>>()) else {
            return Err(value);
        };
        let ptr = ptr.cast::<ArcInner<T>>();
        // SAFETY: The block is fresh, sized and aligned for an `ArcInner<T>`.
        unsafe {
            ptr.as_ptr().write(ArcInner {
                strong: AtomicUsize::new(1),
                weak: AtomicUsize::new(1),
                value,
            })
        };
        // INVARIANT: One strong reference, counted; the value is initialised.
        Ok(Arc {
            ptr,
            _owns: PhantomData,
        })
    }

    fn inner(&self) -> &ArcInner<T> {
        // SAFETY: The block is live while this strong reference exists (invariant).
        unsafe { self.ptr.as_ref() }
    }

    /// A weak reference to the same value.
    pub fn downgrade(this: &Self) -> Weak<T, A> {
        count_up(&this.inner().weak);
        // INVARIANT: The weak count now includes the new reference.
        Weak {
            ptr: this.ptr,
            _owns: PhantomData,
        }
    }

    /// Whether `a` and `b` are references to the same value.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }

    /// The number of strong references (a snapshot).
    pub fn strong_count(this: &Self) -> usize {
        this.inner().strong.load(Ordering::Relaxed)
    }
}

impl<T, A: Allocator> Clone for Arc<T, A> {
    fn clone(&self) -> Self {
        count_up(&self.inner().strong);
        // INVARIANT: The strong count includes the new reference.
        Arc {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T, A: Allocator> Deref for Arc<T, A> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.inner().value
    }
}

impl<T, A: Allocator> Drop for Arc<T, A> {
    fn drop(&mut self) {
        if !count_down(&self.inner().strong) {
            return;
        }
        // SAFETY: The block is live (this reference's share of the weak count keeps it); the
        // place is only computed, not read.
        let value = unsafe { ptr::addr_of_mut!((*self.ptr.as_ptr()).value) };
        // SAFETY: This was the last strong reference: nobody else reaches the value (weak
        // references only upgrade from a non-zero count), and it is dropped once.
        unsafe { ptr::drop_in_place(value) };
        // The strong references' shared weak reference goes with the last of them.
        drop(Weak::<T, A> {
            ptr: self.ptr,
            _owns: PhantomData,
        });
    }
}

impl<T: fmt::Debug, A: Allocator> fmt::Debug for Arc<T, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A reference to the value of an [`Arc`] that does not keep it alive; it
/// [`upgrade`](Self::upgrade)s to an `Arc` while the value lives.
///
/// # Invariants
///
/// `ptr` points to a live `ArcInner<T>` allocated from `A` whose `weak` count includes this
/// reference.
pub struct Weak<T, A: Allocator> {
    ptr: NonNull<ArcInner<T>>,
    _owns: Owns<T, A>,
}

// SAFETY: A `Weak` upgrades to an `Arc` on any thread.
unsafe impl<T: Send + Sync, A: Allocator> Send for Weak<T, A> {}
// SAFETY: As above.
unsafe impl<T: Send + Sync, A: Allocator> Sync for Weak<T, A> {}

impl<T, A: Allocator> Weak<T, A> {
    // A weak reference never makes a reference to the whole block: the value may be dropped
    // (through `&mut`) by another thread meanwhile. It reaches the counts only.

    fn strong(&self) -> &AtomicUsize {
        // SAFETY: The block is live while this weak reference exists (invariant); the place
        // is only computed.
        let p = unsafe { ptr::addr_of!((*self.ptr.as_ptr()).strong) };
        // SAFETY: The count is initialised and only ever accessed atomically.
        unsafe { &*p }
    }

    fn weak(&self) -> &AtomicUsize {
        // SAFETY: As in `strong`.
        let p = unsafe { ptr::addr_of!((*self.ptr.as_ptr()).weak) };
        // SAFETY: As in `strong`.
        unsafe { &*p }
    }

    /// A strong reference to the value, or `None` if it has been dropped.
    pub fn upgrade(&self) -> Option<Arc<T, A>> {
        let strong = self.strong();
        let mut n = strong.load(Ordering::Relaxed);
        loop {
            if n == 0 {
                return None;
            }
            if n >= MAX_REFCOUNT {
                // Saturated: the value stays for good.
                break;
            }
            // Acquire pairs with the release of the last drop: a value seen alive is whole.
            match strong.compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => n = now,
            }
        }
        // INVARIANT: The strong count includes the new reference (or is saturated).
        Some(Arc {
            ptr: self.ptr,
            _owns: PhantomData,
        })
    }
}

impl<T, A: Allocator> Clone for Weak<T, A> {
    fn clone(&self) -> Self {
        count_up(self.weak());
        // INVARIANT: The weak count includes the new reference.
        Weak {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T, A: Allocator> Drop for Weak<T, A> {
    fn drop(&mut self) {
        if !count_down(self.weak()) {
            return;
        }
        // SAFETY: The last reference of any kind is gone (the strong ones hold one weak
        // reference between them), so the value was dropped and nothing reaches the block; it
        // came from `A` with this layout.
        unsafe { A::free(self.ptr.cast(), Layout::new::<ArcInner<T>>()) };
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use drm_ctx::mem::Global;
    use std::sync::atomic::AtomicUsize as Counter;

    /// An allocator that fails when told to, and counts live blocks.
    struct Flaky;
    static LIVE: Counter = Counter::new(0);
    static FAIL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    // SAFETY: Forwards to `Global`, which keeps the contract.
    unsafe impl Allocator for Flaky {
        fn alloc(layout: Layout) -> drm_ctx::Result<NonNull<u8>> {
            if FAIL.load(Ordering::Relaxed) {
                return Err(drm_ctx::Error::NoMemory);
            }
            let p = Global::alloc(layout)?;
            LIVE.fetch_add(1, Ordering::Relaxed);
            Ok(p)
        }

        unsafe fn free(ptr: NonNull<u8>, layout: Layout) {
            LIVE.fetch_sub(1, Ordering::Relaxed);
            // SAFETY: Forwarded from our caller.
            unsafe { Global::free(ptr, layout) }
        }
    }

    /// Counts its live instances.
    struct Tracked<'a>(&'a Counter, u32);

    impl<'a> Tracked<'a> {
        fn new(c: &'a Counter, v: u32) -> Self {
            c.fetch_add(1, Ordering::Relaxed);
            Tracked(c, v)
        }
    }

    impl Drop for Tracked<'_> {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_vector_grows_shrinks_and_drops_each_element_once() {
        let live = Counter::new(0);
        let mut v = Vec::<Tracked<'_>, Global>::new();
        for i in 0..100 {
            v.try_push(Tracked::new(&live, i)).unwrap();
        }
        assert_eq!(live.load(Ordering::Relaxed), 100);
        assert_eq!(v.remove(0).map(|t| t.1), Some(0));
        assert_eq!(v.swap_remove(0).map(|t| t.1), Some(1));
        assert_eq!(v[0].1, 99);
        assert!(v.remove(98).is_none());
        v.try_insert(1, Tracked::new(&live, 500)).unwrap();
        assert_eq!(
            v.try_insert(v.len() + 1, Tracked::new(&live, 7)),
            Err(Error::Range)
        );
        assert_eq!(v[1].1, 500);
        v.retain(|t| t.1 % 2 == 0);
        assert!(v.iter().all(|t| t.1 % 2 == 0));
        assert_eq!(live.load(Ordering::Relaxed), v.len());
        let mut it = v.into_iter();
        let first = it.next().unwrap();
        assert_eq!(first.1, 500);
        drop(it);
        assert_eq!(live.load(Ordering::Relaxed), 1);
        drop(first);
        assert_eq!(live.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_failed_allocation_leaves_the_vector_as_it_was() {
        let _serial = SERIAL.lock().unwrap();
        let before = LIVE.load(Ordering::Relaxed);
        let mut v = Vec::<u64, Flaky>::new();
        v.try_extend_from_slice(&[1, 2, 3, 4]).unwrap();
        assert_eq!(v.capacity(), 4);
        FAIL.store(true, Ordering::Relaxed);
        assert_eq!(v.try_push(5), Err(Error::NoMemory));
        assert_eq!(v.try_insert(0, 5), Err(Error::NoMemory));
        assert_eq!(v.try_extend_from_slice(&[5, 6]), Err(Error::NoMemory));
        assert_eq!(Arc::<u8, Flaky>::try_new(1).err(), Some(Error::NoMemory));
        FAIL.store(false, Ordering::Relaxed);
        assert_eq!(&v[..], &[1, 2, 3, 4]);
        assert_eq!(v.try_reserve(usize::MAX), Err(Error::NoMemory));
        assert_eq!(
            Vec::<u64, Flaky>::try_with_capacity(usize::MAX / 4).err(),
            Some(Error::NoMemory)
        );
        v.try_push(5).unwrap();
        drop(v);
        assert_eq!(LIVE.load(Ordering::Relaxed), before);
    }

    #[test]
    fn zero_sized_elements_need_no_memory() {
        let _serial = SERIAL.lock().unwrap();
        FAIL.store(true, Ordering::Relaxed);
        let mut v = Vec::<(), Flaky>::new();
        let pushed = (0..1000).all(|_| v.try_push(()).is_ok());
        FAIL.store(false, Ordering::Relaxed);
        assert!(pushed);
        assert_eq!(v.len(), 1000);
        assert_eq!(v.pop(), Some(()));
    }

    #[test]
    fn a_resized_vector_clones_its_filler() {
        let mut v = Vec::<u8, Global>::try_from_slice(b"ab").unwrap();
        v.try_resize(4, b'z').unwrap();
        assert_eq!(&v[..], b"abzz");
        v.try_resize(1, 0).unwrap();
        assert_eq!(&v[..], b"a");
        v.clear();
        assert!(v.is_empty());
    }

    #[test]
    fn a_box_made_in_place_holds_its_value_and_a_failed_one_frees_its_block() {
        let _serial = SERIAL.lock().unwrap();
        let before = LIVE.load(Ordering::Relaxed);
        let live = Counter::new(0);
        let b = Box::<[Tracked<'_>; 3], Flaky>::try_new_in_place(|slot| {
            Ok(slot.write([0, 1, 2].map(|v| Tracked::new(&live, v))))
        })
        .unwrap();
        assert_eq!(b[2].1, 2);
        assert_eq!(live.load(Ordering::Relaxed), 3);
        drop(b);
        assert_eq!(live.load(Ordering::Relaxed), 0);
        assert_eq!(
            Box::<u64, Flaky>::try_new_in_place(|_| Err(Error::Busy)).err(),
            Some(Error::Busy)
        );
        // An initialiser that hands back some other value is refused.
        let elsewhere = std::boxed::Box::into_raw(std::boxed::Box::new(5u64));
        assert_eq!(
            Box::<u64, Flaky>::try_new_in_place(|_| {
                // SAFETY: `elsewhere` is a live allocation nothing else uses until it is freed
                // below.
                Ok(unsafe { &mut *elsewhere })
            })
            .err(),
            Some(Error::Invalid)
        );
        // SAFETY: From `Box::into_raw` above, freed once.
        drop(unsafe { std::boxed::Box::from_raw(elsewhere) });
        assert_eq!(LIVE.load(Ordering::Relaxed), before);
        let mut moved = Box::<u64, Flaky>::try_new(9).unwrap();
        *moved += 1;
        assert_eq!(*moved, 10);
        drop(moved);
        assert_eq!(LIVE.load(Ordering::Relaxed), before);
    }

    #[test]
    fn an_id_map_keeps_its_ids_sorted_and_finds_the_first_free_one() {
        let mut m = IdMap::<&str, Global>::new();
        assert_eq!(m.first_free(1, 3), Some(1));
        for id in [3, 1, 2, 7] {
            assert_eq!(m.try_insert(id, "x"), Ok(None));
        }
        assert_eq!(m.try_insert(2, "two"), Ok(Some("x")));
        assert_eq!(m.keys().collect::<std::vec::Vec<_>>(), [1, 2, 3, 7]);
        assert_eq!(m.next_after(None).map(|(k, _)| k), Some(1));
        assert_eq!(m.next_after(Some(3)).map(|(k, _)| k), Some(7));
        assert_eq!(m.next_after(Some(4)).map(|(k, _)| k), Some(7));
        assert_eq!(m.next_after(Some(7)), None);
        assert_eq!(m.get(2), Some(&"two"));
        assert_eq!(m.first_free(1, 8), Some(4));
        assert_eq!(m.first_free(1, 3), None);
        assert_eq!(m.first_free(5, 8), Some(5));
        assert_eq!(m.remove(1), Some("x"));
        assert_eq!(m.remove(1), None);
        assert_eq!(m.first_free(1, 3), Some(1));
        assert!(!m.contains_key(1) && m.contains_key(7));
        assert_eq!(m.len(), 3);
        assert_eq!(m.into_values().count(), 3);
    }

    #[test]
    fn a_full_id_range_has_no_free_id() {
        let mut m = IdMap::<(), Global>::new();
        m.try_insert(u32::MAX, ()).unwrap();
        assert_eq!(m.first_free(u32::MAX, u32::MAX), None);
        assert_eq!(m.first_free(u32::MAX - 1, u32::MAX), Some(u32::MAX - 1));
    }

    #[test]
    fn the_last_strong_reference_drops_the_value_and_the_last_reference_frees_the_block() {
        let _serial = SERIAL.lock().unwrap();
        let before = LIVE.load(Ordering::Relaxed);
        let live = Counter::new(0);
        let a = Arc::<_, Flaky>::try_new(Tracked::new(&live, 3)).unwrap();
        let b = a.clone();
        let w = Arc::downgrade(&a);
        assert_eq!(Arc::strong_count(&a), 2);
        assert!(Arc::ptr_eq(&a, &b));
        drop(a);
        assert_eq!(w.upgrade().map(|t| t.1), Some(3));
        drop(b);
        assert_eq!(live.load(Ordering::Relaxed), 0);
        assert!(w.upgrade().is_none());
        assert_eq!(LIVE.load(Ordering::Relaxed), before + 1);
        let w2 = w.clone();
        drop(w);
        drop(w2);
        assert_eq!(LIVE.load(Ordering::Relaxed), before);
    }

    #[test]
    fn references_race_across_threads_and_the_value_goes_once() {
        let live = Counter::new(0);
        let a = Arc::<_, Global>::try_new(Tracked::new(&live, 9)).unwrap();
        let w = Arc::downgrade(&a);
        std::thread::scope(|s| {
            for _ in 0..4 {
                let (a, w) = (a.clone(), w.clone());
                s.spawn(move || {
                    for _ in 0..if cfg!(miri) { 20 } else { 2000 } {
                        let c = a.clone();
                        if let Some(u) = w.upgrade() {
                            assert_eq!(u.1, 9);
                        }
                        drop(c);
                    }
                });
            }
            drop(a);
        });
        assert_eq!(live.load(Ordering::Relaxed), 0);
        assert!(w.upgrade().is_none());
    }

    #[test]
    fn a_saturated_count_never_frees() {
        let a = Arc::<u32, Global>::try_new(5).unwrap();
        a.inner().strong.store(MAX_REFCOUNT, Ordering::Relaxed);
        let b = a.clone();
        assert_eq!(Arc::strong_count(&a), SATURATED);
        let raw = a.ptr;
        drop(b);
        drop(a);
        // The count stays parked: the value lives on, never freed early.
        // SAFETY: The block is alive (the saturated count kept it); nothing else uses it.
        let inner = unsafe { raw.as_ref() };
        assert_eq!(inner.strong.load(Ordering::Relaxed), SATURATED);
        assert_eq!(inner.value, 5);
        // Give the block back to the leak checkers: one strong reference again, dropped.
        inner.strong.store(1, Ordering::Relaxed);
        drop(Arc::<u32, Global> {
            ptr: raw,
            _owns: PhantomData,
        });
    }
}
