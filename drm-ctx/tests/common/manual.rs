// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A fence the tests signal by hand, counting the wakers queued on it.

use drm_ctx::host::syncobj::{FenceRef, Registration, SyncFence};
use std::any::Any;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

/// A fence signalled by [`Manual::signal`].
#[derive(Clone, Default)]
pub struct Manual(Arc<ManualState>);

#[derive(Default)]
pub struct ManualState {
    done: AtomicBool,
    wakers: Mutex<Vec<(u64, Waker)>>,
    next_id: AtomicU64,
}

impl Manual {
    /// A pending fence and the same fence as a syncobj holds it.
    pub fn new() -> (Manual, FenceRef) {
        let m = Manual::default();
        let f = FenceRef::from(Arc::new(m.clone()));
        (m, f)
    }

    pub fn signal(&self) {
        self.0.done.store(true, Ordering::SeqCst);
        let woken: Vec<_> = self.0.wakers.lock().unwrap().drain(..).collect();
        for (_, w) in woken {
            w.wake();
        }
    }

    /// Wakers queued and not taken back.
    pub fn queued(&self) -> usize {
        self.0.wakers.lock().unwrap().len()
    }
}

impl SyncFence for Manual {
    fn status(&self) -> Option<Result<(), i32>> {
        self.0.done.load(Ordering::SeqCst).then_some(Ok(()))
    }
    fn wake_on_signal(&self, waker: &Waker) -> Registration {
        let mut w = self.0.wakers.lock().unwrap();
        if self.0.done.load(Ordering::SeqCst) {
            waker.wake_by_ref();
            return Registration::done();
        }
        let id = self.0.next_id.fetch_add(1, Ordering::SeqCst);
        w.push((id, waker.clone()));
        let state = self.0.clone();
        Registration::new(move || state.wakers.lock().unwrap().retain(|(i, _)| *i != id))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
