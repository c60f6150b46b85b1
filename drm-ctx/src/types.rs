// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Reference counting and thread-safety markers.
//!
//! Objects of the DRM core (devices, GEM objects, parent devices) carry their own reference count,
//! the way C structures embed a `kref`. [`ARef`] is an owned pointer that holds one of those
//! references: cloning it takes another reference, dropping it gives one back, and the object is
//! released when the last reference is gone. It is the shape of the kernel's `ARef`, so driver
//! code reads the same against this crate and against the kernel crate.

use core::{fmt, marker::PhantomData, ops::Deref, ptr::NonNull};

/// Types whose instances are always reference counted and never owned directly.
///
/// # Safety
///
/// Implementers must ensure that:
/// - [`inc_ref`](Self::inc_ref) keeps the object alive (it stays valid at the same address) until
///   a matching [`dec_ref`](Self::dec_ref);
/// - the object is only freed once every reference taken is given back;
/// - a shared reference to the object implies that at least one reference is held.
pub unsafe trait AlwaysRefCounted {
    /// Takes one more reference on the object.
    fn inc_ref(&self);

    /// Gives back one reference, releasing the object if it was the last.
    ///
    /// # Safety
    ///
    /// The caller must own one reference on `obj` (from [`inc_ref`](Self::inc_ref) or from the
    /// constructor), and must not use `obj` after this call unless it still owns another one.
    unsafe fn dec_ref(obj: NonNull<Self>);
}

/// A pointer that owns one share of an object's embedded reference count.
///
/// # Invariants
///
/// `ptr` points to a valid `T` on which this `ARef` owns one reference.
///
/// # Examples
///
/// ```
/// use drm_ctx::{device, types::ARef};
///
/// let parent: ARef<device::Device> = device::Device::new("gpu0").unwrap();
/// let other = parent.clone();
/// assert_eq!(other.name(), "gpu0");
/// ```
pub struct ARef<T: AlwaysRefCounted> {
    ptr: NonNull<T>,
    _owns: PhantomData<T>,
}

// SAFETY: An `ARef<T>` behaves like `Arc<T>`: it can be moved to another thread if `T` may be
// shared and dropped (released) there, which is what `Send + Sync` of `T` promise.
unsafe impl<T: AlwaysRefCounted + Send + Sync> Send for ARef<T> {}
// SAFETY: Sharing an `ARef<T>` only gives out `&T` and clones; `T: Sync + Send` make both fine.
unsafe impl<T: AlwaysRefCounted + Send + Sync> Sync for ARef<T> {}

impl<T: AlwaysRefCounted> ARef<T> {
    /// Takes ownership of a reference the caller holds.
    ///
    /// # Safety
    ///
    /// `ptr` must point to a valid `T` on which the caller owns a reference; that reference is
    /// transferred to the returned `ARef`.
    pub unsafe fn from_raw(ptr: NonNull<T>) -> Self {
        // INVARIANT: The caller transfers one owned reference on a valid `T`.
        ARef {
            ptr,
            _owns: PhantomData,
        }
    }

    /// Gives up ownership of the reference without dropping it.
    pub fn into_raw(this: Self) -> NonNull<T> {
        let ptr = this.ptr;
        core::mem::forget(this);
        ptr
    }

    /// Returns whether two `ARef`s point to the same object.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }
}

impl<T: AlwaysRefCounted> Clone for ARef<T> {
    fn clone(&self) -> Self {
        ARef::from(&**self)
    }
}

impl<T: AlwaysRefCounted> From<&T> for ARef<T> {
    fn from(obj: &T) -> Self {
        obj.inc_ref();
        // SAFETY: We just took a reference on `obj`, which is valid as it is a reference.
        unsafe { ARef::from_raw(NonNull::from(obj)) }
    }
}

impl<T: AlwaysRefCounted> Deref for ARef<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: By the type invariant the object is valid while we hold our reference.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: AlwaysRefCounted> Drop for ARef<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariant we own one reference on `ptr`, given back here.
        unsafe { T::dec_ref(self.ptr) }
    }
}

impl<T: AlwaysRefCounted + fmt::Debug> fmt::Debug for ARef<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// A zero-sized marker that makes the containing type neither `Send` nor `Sync`.
#[derive(Clone, Copy, Default)]
pub struct NotThreadSafe(PhantomData<*mut ()>);

impl NotThreadSafe {
    /// The marker value.
    pub const fn new() -> Self {
        NotThreadSafe(PhantomData)
    }
}
