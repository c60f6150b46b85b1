// SPDX-License-Identifier: GPL-2.0 OR MIT

//! How the simulator locks state that several threads reach at once.
//!
//! On silicon, system RAM is reachable by the CPU and the GPU at the same time and the
//! memory controller serialises their accesses. The simulated RAM
//! ([`SimMemory`](crate::SimMemory)) is reached the same way: the driver allocates DMA memory
//! from it on its own threads while the GPU reads page tables from it on an executor's thread.
//! Its allocation table is therefore behind a lock, and which lock depends on where the
//! simulation runs: a `std` mutex on a host, a `kernel::sync` lock in Linux, a spinning lock
//! in firmware. The simulator names none of them: it is generic over a [`LockFamily`], which
//! says what lock wraps a value of any type, and it only ever locks through
//! [`Lock::with`] (no guard escapes, nothing is held across a call out of the simulator).
//!
//! [`StdLocks`] (feature `std`) is the family of `std::sync::Mutex`. A kernel family is a
//! thin adapter: `type Lock<T> = Pin<KBox<kernel::sync::Mutex<T>>>`, made with
//! `KBox::pin_init(new_mutex!(value), GFP_KERNEL)`, whose failure is what
//! [`Lock::new`] returns as [`SimError::OutOfMemory`].

use crate::SimError;

/// A lock owning a `T`.
pub trait Lock<T>: Sized {
    /// Wraps `value`; fails only if the lock itself needs memory and none is left.
    fn new(value: T) -> Result<Self, SimError>;

    /// Runs `f` with the value locked.
    ///
    /// The simulator never calls `with` again from inside `f` and never panics inside it.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

/// A kind of lock, for values of any type.
pub trait LockFamily {
    /// The lock of this family around a `T`.
    type Lock<T: Send>: Lock<T> + Send + Sync;
}

/// `std::sync::Mutex` locks.
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StdLocks;

#[cfg(feature = "std")]
impl LockFamily for StdLocks {
    type Lock<T: Send> = std::sync::Mutex<T>;
}

#[cfg(feature = "std")]
impl<T> Lock<T> for std::sync::Mutex<T> {
    fn new(value: T) -> Result<Self, SimError> {
        Ok(std::sync::Mutex::new(value))
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // Nothing panics while the simulator holds a lock, so a poisoned lock (a panic in a
        // caller's code elsewhere) still guards a consistent value.
        let mut guard = self
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }
}
