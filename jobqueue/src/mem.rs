// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The allocation seam: every byte a job needs is obtained while it is prepared.
//!
//! A job's done fence, its table of dependency slots and the callback nodes that let the queue
//! be woken by fences come from an [`Allocator`] the driver supplies (kernel: `KBox`/`dma_fence`
//! allocation with `GFP_KERNEL`; host: the global allocator), when the job is prepared:
//! [`PreparedJob::new`](crate::PreparedJob::new) allocates all of them;
//! [`Queue::prepare`](crate::Queue::prepare) first reuses what a retired job of the queue left
//! behind and allocates only the rest. Once a job is committed, nothing on the way to
//! signalling its done fence allocates again; when it retires, its memory goes back to its
//! queue (moved, not freed, up to the queue's size).
//!
//! The allocator's methods demand an [`AllocToken`], which only the job preparation code of this
//! crate can create. Code running in the signalling path (the driver's `run_job` and timeout
//! handlers, which receive a [`SignalCtx`](crate::SignalCtx)) has no way to produce one, so
//! calling the allocator from there does not compile.

use core::marker::PhantomData;
use core::ops::DerefMut;

use crate::fence::{Fence, SignalFence};

/// Allocation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocError;

/// Proof that the caller is preparing a job, i.e. is outside the fence-signalling path.
///
/// It cannot be constructed outside this crate, and it is neither `Send` nor `Sync`.
#[derive(Debug)]
pub struct AllocToken<'a> {
    _scope: PhantomData<&'a mut ()>,
    _not_send: PhantomData<*mut ()>,
}

impl AllocToken<'_> {
    /// Runs `f` with a token; only job preparation calls this.
    pub(crate) fn scope<R>(f: impl for<'t> FnOnce(&AllocToken<'t>) -> R) -> R {
        let token = AllocToken {
            _scope: PhantomData,
            _not_send: PhantomData,
        };
        f(&token)
    }
}

/// One dependency of a job: the fence to wait for and the node used to be woken by it.
#[derive(Debug)]
pub struct Dependency<F: Fence> {
    pub(crate) fence: F,
    pub(crate) armed: bool,
}

impl<F: Fence> Dependency<F> {
    /// The fence this dependency waits for.
    pub fn fence(&self) -> &F {
        &self.fence
    }
}

/// A dependency slot: storage for one dependency plus its preallocated callback node.
#[derive(Debug)]
pub struct DepSlot<F: Fence> {
    pub(crate) dep: Option<Dependency<F>>,
    pub(crate) cb: F::Callback,
}

impl<F: Fence> DepSlot<F> {
    /// Creates an empty slot around a callback node.
    pub fn new(cb: F::Callback) -> Self {
        DepSlot { dep: None, cb }
    }
}

impl<F: Fence> DepSlot<F> {
    /// Empties the slot, taking its callback back off a fence that has not signalled, so that
    /// the slot can serve another job.
    pub(crate) fn clear(&mut self) {
        // A job done with before its dependency signalled (its queue was killed, it failed on
        // another dependency, it went on the ring behind a job of its own queue) takes its
        // callback back, so the fence neither keeps the node nor wakes a queue that no longer
        // waits for it.
        if let Some(dep) = self.dep.take() {
            if dep.armed {
                dep.fence.remove_callback(&self.cb);
            }
        }
    }
}

impl<F: Fence> Drop for DepSlot<F> {
    fn drop(&mut self) {
        self.clear();
    }
}

/// Supplies the memory a job needs; used only while preparing jobs.
///
/// # Examples
///
/// ```
/// use jobqueue::host::{HostAlloc, HostFence};
/// use jobqueue::{PreparedJob, QueueConfig};
/// use jobqueue::{Cost, MaxDeps};
///
/// let alloc = HostAlloc::new();
/// let config = QueueConfig::new(8);
/// // Preparing is where the allocator is used; a failure is a plain error.
/// let job = PreparedJob::<HostFence, HostAlloc, u32>::new(&alloc, &config, Cost(1), MaxDeps(2), 7).unwrap();
/// assert_eq!(job.pending_dependencies(), 0);
/// ```
pub trait Allocator<F: SignalFence> {
    /// A table of dependency slots (kernel: `KVec`; host: a boxed slice).
    type DepTable: DerefMut<Target = [DepSlot<F>]> + Send;

    /// Allocates a new, pending fence that will become a job's done fence.
    fn try_new_fence(&self, token: &AllocToken<'_>) -> Result<F, AllocError>;

    /// Allocates a callback node for fences of type `F`.
    fn try_new_callback(&self, token: &AllocToken<'_>) -> Result<F::Callback, AllocError>;

    /// Allocates a table of `len` dependency slots, each with its own callback node.
    fn try_new_dep_table(
        &self,
        token: &AllocToken<'_>,
        len: usize,
    ) -> Result<Self::DepTable, AllocError>;
}
