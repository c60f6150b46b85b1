// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Fences as the core's syncobjs hold them: counted references to fence objects whose
//! implementation owns the count, as `struct dma_fence` does with `dma_fence_get`/`put`.

use core::{any::Any, ptr::NonNull, task::Waker};

/// A fence object, as a syncobj holds it (the core's `struct dma_fence`).
///
/// The object counts its own references: [`get`](Self::get) takes one, [`put`](Self::put)
/// gives one back and frees the object when it was the last (through a pointer of its own
/// with the right to free it, not through the one it is given, which may come from a shared
/// reference). A [`FenceRef`] is one such
/// reference. Waiting is done with wakers: [`add_waker`](Self::add_waker) queues one to be
/// woken when the fence signals, and the [`Waiter`] it returns takes it back when dropped.
///
/// With feature `std`, any `host::syncobj::SyncFence` in an `Arc` becomes a fence with
/// `FenceRef::from_arc`.
///
/// # Safety
///
/// - Every `&Self` that safe code can obtain refers to an object whose lifetime this count
///   governs: after [`get`](Self::get) the object stays valid until a matching
///   [`put`](Self::put), from any thread.
/// - [`remove_waker`](Self::remove_waker) accepts every token this object handed to
///   [`Waiter::new`] in [`add_waker`](Self::add_waker), once.
pub unsafe trait Fence: Send + Sync + 'static {
    /// Takes a reference.
    fn get(&self);

    /// Gives a reference back (the object may be freed if it was the last).
    ///
    /// # Safety
    ///
    /// `this` points to a live fence on which the caller owns a reference taken with
    /// [`get`](Self::get) (or handed over with the object), and the caller does not use it
    /// afterwards unless it owns another.
    unsafe fn put(this: NonNull<Self>)
    where
        Self: Sized;

    /// `None` while pending; `Some(Ok(()))` or `Some(Err(errno))` (negative) once signalled.
    fn status(&self) -> Option<core::result::Result<(), i32>>;

    /// Arranges for `waker` to be woken once the fence (or, for a container fence, one of
    /// the fences it is made of) signals.
    ///
    /// `None` if nothing was queued: the fence has signalled (the waker is then woken at
    /// once) or queues nothing, or it could not queue the waker and woke it instead. Either
    /// way the caller looks at [`status`](Self::status) again when woken, and queues again
    /// if the fence is still pending.
    fn add_waker(&self, waker: &Waker) -> Option<Waiter>;

    /// Takes back the waker queued under `token` (if it is still queued).
    ///
    /// A token is a pointer so that an implementation may hand out the address of what it
    /// queued (a pointer keeps its provenance); one that counts instead makes its numbers into
    /// pointers without provenance (`core::ptr::without_provenance_mut`).
    ///
    /// # Safety
    ///
    /// `token` is one this object gave to [`Waiter::new`] and not taken back yet.
    unsafe fn remove_waker(&self, token: *mut ());

    /// The fence as `Any`, for drivers to downcast to their own type.
    fn as_any(&self) -> &dyn Any;
}

/// A counted reference to a [`Fence`] (`struct dma_fence *` with a reference).
///
/// # Invariants
///
/// `ptr` is to a live fence on which this value owns one reference, and `put` is the
/// [`Fence::put`] of its type.
pub struct FenceRef {
    ptr: NonNull<dyn Fence>,
    put: unsafe fn(NonNull<()>),
}

/// [`Fence::put`] of `T`, on a pointer without its type.
///
/// # Safety
///
/// As [`Fence::put`], `this` pointing to a `T`.
unsafe fn put_erased<T: Fence>(this: NonNull<()>) {
    // SAFETY: The caller passes a pointer to a `T` it owns a reference on.
    unsafe { T::put(this.cast()) }
}

// SAFETY: A `Fence` is `Send + Sync`; the reference may be given back from any thread.
unsafe impl Send for FenceRef {}
// SAFETY: As above.
unsafe impl Sync for FenceRef {}

impl FenceRef {
    /// A new reference to `fence`.
    pub fn new<T: Fence>(fence: &T) -> Self {
        fence.get();
        // SAFETY: We took a reference, handed over; `Fence` promises that the object stays
        // valid until it is given back.
        unsafe { Self::from_raw(NonNull::from(fence)) }
    }

    /// Adopts a reference.
    ///
    /// # Safety
    ///
    /// `fence` points to a live fence on which the caller owns one reference, which it hands
    /// over.
    pub unsafe fn from_raw<T: Fence>(fence: NonNull<T>) -> Self {
        let ptr: NonNull<dyn Fence> = fence;
        // INVARIANT: The caller hands over a reference; `put` is `T`'s.
        FenceRef {
            ptr,
            put: put_erased::<T>,
        }
    }

    /// The address of the fence object (its identity: [`ptr_eq`](Self::ptr_eq) compares these).
    pub fn as_ptr(this: &Self) -> *const () {
        this.ptr.as_ptr().cast::<()>().cast_const()
    }

    /// Whether `a` and `b` refer to the same fence object.
    pub fn ptr_eq(a: &FenceRef, b: &FenceRef) -> bool {
        core::ptr::eq(Self::as_ptr(a), Self::as_ptr(b))
    }

    /// A fence that has signalled (without error); allocates nothing.
    pub fn signalled() -> Self {
        FenceRef::new(&SignalledFence)
    }
}

impl Clone for FenceRef {
    fn clone(&self) -> Self {
        self.get();
        // INVARIANT: We took the reference the copy owns, on the same fence.
        FenceRef {
            ptr: self.ptr,
            put: self.put,
        }
    }
}

impl Drop for FenceRef {
    fn drop(&mut self) {
        // SAFETY: We own one reference on a fence of the type `put` is of (type invariant),
        // given back once, here.
        unsafe { (self.put)(self.ptr.cast()) }
    }
}

impl core::ops::Deref for FenceRef {
    type Target = dyn Fence;

    fn deref(&self) -> &(dyn Fence + 'static) {
        // SAFETY: The fence is alive while we own a reference (type invariant).
        unsafe { self.ptr.as_ref() }
    }
}

impl core::fmt::Debug for FenceRef {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.debug_struct("FenceRef")
            .field("status", &self.status())
            .finish()
    }
}

/// A waker queued on a fence by [`Fence::add_waker`]; dropping it takes the waker back off
/// the fence (if the fence has not woken it yet).
///
/// # Invariants
///
/// `token` was handed out by `fence`'s implementation and is taken back once, on drop.
#[must_use = "dropping the waiter takes the waker off the fence again"]
pub struct Waiter {
    fence: FenceRef,
    token: *mut (),
}

// SAFETY: The token is only handed back to the fence, which is `Send + Sync` and accepts its
// tokens from any thread (`Fence`'s contract does not tie them to one).
unsafe impl Send for Waiter {}
// SAFETY: A shared `Waiter` gives out only its fence, never the token.
unsafe impl Sync for Waiter {}

impl Waiter {
    /// The waker of `fence` queued under `token`, to be taken back with
    /// [`Fence::remove_waker`] when this drops.
    ///
    /// # Safety
    ///
    /// `fence`'s [`remove_waker`](Fence::remove_waker) must accept `token` (once).
    pub unsafe fn new<T: Fence>(fence: &T, token: *mut ()) -> Self {
        // INVARIANT: The caller promises `token` is `fence`'s.
        Waiter {
            fence: FenceRef::new(fence),
            token,
        }
    }

    /// The fence the waker is queued on (for a container fence, one of its parts).
    pub fn fence(&self) -> &FenceRef {
        &self.fence
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        // SAFETY: The token is the fence's, taken back once (type invariant).
        unsafe { self.fence.remove_waker(self.token) }
    }
}

impl core::fmt::Debug for Waiter {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        out.debug_struct("Waiter")
            .field("fence", &self.fence)
            .finish()
    }
}

/// A fence that was signalled when it was made (what `SYNCOBJ_SIGNAL` installs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalledFence;

// SAFETY: A `SignalledFence` has no size, so a reference to one stays valid for ever and needs
// no count; it never hands out a token.
unsafe impl Fence for SignalledFence {
    fn get(&self) {}

    unsafe fn put(_this: NonNull<Self>) {}

    fn status(&self) -> Option<core::result::Result<(), i32>> {
        Some(Ok(()))
    }

    fn add_waker(&self, waker: &Waker) -> Option<Waiter> {
        waker.wake_by_ref();
        None
    }

    unsafe fn remove_waker(&self, _token: *mut ()) {}

    fn as_any(&self) -> &dyn Any {
        self
    }
}
