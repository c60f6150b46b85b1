// SPDX-License-Identifier: GPL-2.0 OR MIT

//! How the simulator locks state that several threads reach at once.
//!
//! On silicon, system RAM is reachable by the CPU and the GPU at the same time and the
//! memory controller serialises their accesses. The simulated RAM
//! ([`SimMemory`](crate::SimMemory)) is reached the same way: the driver allocates DMA memory
//! from it on its own threads while the GPU reads page tables from it on an executor's thread.
//! Its allocation table is therefore behind a lock, and which lock depends on where the
//! simulation runs: a `parking_lot` mutex on a host, a `kernel::sync` lock in Linux, a
//! spinning lock in firmware. The simulator names none of them: it is generic over a [`LockFamily`], which
//! says what lock wraps a value of any type, and it only ever locks through
//! [`Lock::with`] (no guard escapes, nothing is held across a call out of the simulator).
//!
//! [`StdLocks`] (feature `std`) is the family of `parking_lot::Mutex`. A memory controller
//! arbitrates between the CPU and the GPU fairly; so does it (it hands the lock to a waiter at
//! least every half millisecond), where a `std::sync::Mutex` lets a thread that takes the lock
//! again at once (a page-table writer looking up table after table) keep the others out for
//! tens of milliseconds. A kernel family is a
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

/// `parking_lot::Mutex` locks (fair in the long run, see the module's documentation), and
/// `std::sync::Mutex` under Miri ([`StdMutex`]).
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StdLocks;

/// The host's mutex: `parking_lot`'s, or under Miri `std`'s (`parking_lot`'s queue of parked
/// threads keeps pointers in integers, which Miri's strict-provenance mode refuses; fairness is
/// not what Miri checks).
#[cfg(all(feature = "std", not(miri)))]
pub type StdMutex<T> = parking_lot::Mutex<T>;
/// The host's mutex: `parking_lot`'s, or under Miri `std`'s (`parking_lot`'s queue of parked
/// threads keeps pointers in integers, which Miri's strict-provenance mode refuses; fairness is
/// not what Miri checks).
#[cfg(all(feature = "std", miri))]
pub type StdMutex<T> = std::sync::Mutex<T>;

#[cfg(feature = "std")]
impl LockFamily for StdLocks {
    type Lock<T: Send> = StdMutex<T>;
}

#[cfg(all(feature = "std", miri))]
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

#[cfg(all(feature = "std", not(miri)))]
impl<T> Lock<T> for parking_lot::Mutex<T> {
    fn new(value: T) -> Result<Self, SimError> {
        Ok(parking_lot::Mutex::new(value))
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.lock())
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use core::cell::UnsafeCell;
    use core::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::{MemConfig, SimMemory, StdFrames};

    /// A lock family an environment without `std` could bring: a spinning lock.
    struct SpinLocks;

    /// # Invariants
    ///
    /// `value` is only accessed by the holder of `locked`.
    struct Spin<T> {
        locked: AtomicBool,
        value: UnsafeCell<T>,
    }

    // SAFETY: `value` is only reached by the one holder of the lock (type invariant), so
    // sharing the lock hands the `T` from thread to thread, which `T: Send` allows.
    unsafe impl<T: Send> Sync for Spin<T> {}

    impl<T> Lock<T> for Spin<T> {
        fn new(value: T) -> Result<Self, SimError> {
            Ok(Spin {
                locked: AtomicBool::new(false),
                value: UnsafeCell::new(value),
            })
        }

        fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            while self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                std::thread::yield_now();
            }
            // SAFETY: This thread holds the lock, so nothing else reaches `value` until the
            // release below (type invariant).
            let r = f(unsafe { &mut *self.value.get() });
            self.locked.store(false, Ordering::Release);
            r
        }
    }

    impl LockFamily for SpinLocks {
        type Lock<T: Send> = Spin<T>;
    }

    #[test]
    fn memory_works_under_an_environments_own_lock() {
        let mem =
            SimMemory::<StdFrames, SpinLocks>::with_alloc(MemConfig::default(), StdFrames).unwrap();
        let per_thread = if cfg!(miri) { 4 } else { 64 };
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let mem = &mem;
                s.spawn(move || {
                    for i in 0..per_thread {
                        let pa = mem.alloc(1).unwrap();
                        mem.write_u64(pa, t << 32 | i).unwrap();
                        assert_eq!(mem.read_u64(pa), Ok(t << 32 | i));
                        if i % 2 == 0 {
                            assert_eq!(mem.free(pa), Ok(1));
                        }
                    }
                });
            }
        });
        assert_eq!(mem.live_allocations(), per_thread as usize);
        assert_eq!(mem.total_allocations(), 2 * per_thread);
    }
}
