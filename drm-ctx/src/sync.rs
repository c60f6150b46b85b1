// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Locks and waiter lists of the crate's own core, without `std`.
//!
//! The core's critical sections are short (a handle table look-up, swapping the fence of a
//! syncobj, unlinking a chain node), so a spin lock serves them everywhere. With `std` a
//! waiting thread yields its time slice instead of spinning, which keeps a host test with more
//! threads than cores moving.

use crate::{mem::MemOps, vec::MemVec, Result};
use core::{
    cell::UnsafeCell,
    ops::{Deref, DerefMut},
    sync::atomic::{AtomicBool, AtomicU64, Ordering},
    task::Waker,
};

/// Lets another thread run (or spins, without `std`) while a lock is contended.
pub(crate) fn relax() {
    #[cfg(feature = "std")]
    std::thread::yield_now();
    #[cfg(not(feature = "std"))]
    core::hint::spin_loop();
}

/// A spin lock owning a `T`.
///
/// # Invariants
///
/// `value` is only accessed through a [`SpinGuard`], and at most one guard exists at a time:
/// `locked` is true exactly while one does.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: The lock hands the value to one thread at a time; it moves between threads with the
// lock, so `T: Send` is enough for both.
unsafe impl<T: Send> Send for SpinLock<T> {}
// SAFETY: See `Send`.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// A lock around `value`, unlocked.
    pub(crate) const fn new(value: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Locks the value until the guard drops. The holder must not lock it again.
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            relax();
        }
        // INVARIANT: We set `locked`; the guard is the only one.
        SpinGuard(self)
    }

    /// The value, through a unique reference to the lock (no locking needed).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// The value of a [`SpinLock`], locked until this drops.
pub(crate) struct SpinGuard<'a, T>(&'a SpinLock<T>);

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: The guard is the only access to the value while it exists (type invariant of
        // `SpinLock`).
        unsafe { &*self.0.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: As in `deref`, and the guard is borrowed uniquely.
        unsafe { &mut *self.0.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.0.locked.store(false, Ordering::Release);
    }
}

/// Wakers of waiting callers, each taken back when its [`WakerEntry`] is dropped.
///
/// Only waits that sleep (feature `std`) queue wakers; without `std` the list stays empty.
#[cfg_attr(not(feature = "std"), allow(dead_code))]
pub(crate) struct WakerList {
    list: SpinLock<MemVec<(u64, Waker)>>,
    next: AtomicU64,
}

impl WakerList {
    /// An empty list whose entries come from `mem`.
    pub(crate) const fn new(mem: MemOps) -> Self {
        Self {
            list: SpinLock::new(MemVec::new(mem)),
            next: AtomicU64::new(0),
        }
    }

    #[cfg_attr(not(feature = "std"), allow(dead_code))]
    /// Queues `waker` until the returned entry is dropped; [`Error::NoMemory`](crate::Error)
    /// if the list cannot grow.
    pub(crate) fn add(&self, waker: &Waker) -> Result<WakerEntry<'_>> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.list.lock().try_push((id, waker.clone()))?;
        Ok(WakerEntry { list: self, id })
    }

    /// Wakes every queued waker (they stay queued).
    pub(crate) fn wake_all(&self) {
        for (_, w) in self.list.lock().iter() {
            w.wake_by_ref();
        }
    }
}

/// A waker queued on a [`WakerList`].
#[cfg_attr(not(feature = "std"), allow(dead_code))]
pub(crate) struct WakerEntry<'a> {
    list: &'a WakerList,
    id: u64,
}

impl Drop for WakerEntry<'_> {
    fn drop(&mut self) {
        let gone = {
            let mut list = self.list.list.lock();
            list.iter()
                .position(|(i, _)| *i == self.id)
                .map(|at| list.swap_remove(at))
        };
        // The waker is dropped unlocked (dropping one may run anything).
        drop(gone);
    }
}
