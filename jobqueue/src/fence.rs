// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Fences: one-shot completion events with an optional error.
//!
//! A fence starts out pending and is signalled exactly once, either successfully or with a
//! [`FenceError`]. GPU drivers use them for everything that completes asynchronously: the
//! hardware fence a ring hands back for a job, the *done* fence userspace waits on, and the
//! dependencies a job must wait for. The kernel's `dma_fence` is the model, and its rules apply
//! here too:
//!
//! - a fence signals in finite time (no fence may wait on something userspace controls
//!   without bound);
//! - the code that makes a fence signal must not allocate memory, because the allocator may
//!   wait for memory to be freed by the very job the fence belongs to.
//!
//! Interest in a fence is registered with a *callback*: a [`Waker`] stored in a callback node
//! that was allocated in advance (see [`Allocator`](crate::Allocator)), so registering never
//! allocates. Registering on a fence that has already signalled does not queue anything: the
//! caller is told the result right away ([`AddCallback::Signalled`]). A callback node sits in at
//! most one fence at a time; once that fence has signalled, the node can be reused.
//!
//! The queue only uses callbacks to be woken up: after a wake-up it re-reads the
//! [`status`](Fence::status) of the fences it cares about. Spurious wake-ups are therefore
//! harmless, and a callback that fires after its queue is gone only pokes an idle work item.

use core::task::Waker;

use crate::error::FenceError;

/// The outcome of a signalled fence.
pub type FenceResult = Result<(), FenceError>;

/// What happened when a callback was added to a fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddCallback {
    /// The callback is queued; its waker is woken when the fence signals.
    Queued,
    /// The fence had already signalled with this result; nothing was queued.
    Signalled(FenceResult),
    /// The callback node is still queued on a fence that has not signalled; nothing was queued.
    Busy,
}

/// A fence that can be observed.
///
/// Cloning a fence takes another reference to the same event (like `dma_fence_get`); it must not
/// allocate.
///
/// # Examples
///
/// ```
/// use core::task::Waker;
/// use jobqueue::{AddCallback, Fence, SignalFence};
/// use jobqueue::host::HostFence;
///
/// let fence = HostFence::new();
/// let cb = HostFence::new_callback();
/// assert_eq!(fence.add_callback(&cb, Waker::noop()), AddCallback::Queued);
/// assert!(fence.signal(Ok(())));
/// // Once signalled, adding a callback reports the result instead of queuing.
/// assert_eq!(fence.add_callback(&cb, Waker::noop()), AddCallback::Signalled(Ok(())));
/// ```
pub trait Fence: Clone + Send + Sync {
    /// Preallocated storage for one callback registration.
    type Callback: Send + Sync;

    /// Returns `None` while pending, the result once signalled.
    fn status(&self) -> Option<FenceResult>;

    /// Queues `waker` to be woken when the fence signals, using the storage of `cb`.
    ///
    /// Must not allocate. The waker is woken at most once per registration.
    fn add_callback(&self, cb: &Self::Callback, waker: &Waker) -> AddCallback;

    /// Takes `cb` off this fence if it is still queued here, dropping its waker unwoken.
    ///
    /// Returns `true` if it was queued on this fence; `false` if the fence has signalled (the
    /// waker was or is being woken) or `cb` is not queued here. Afterwards `cb` can be queued
    /// again. This is what a waiter that gives up (a timeout, a cancelled job) calls so that
    /// a long-pending fence does not collect stale callbacks. Must not allocate.
    ///
    /// # Examples
    ///
    /// ```
    /// use core::task::Waker;
    /// use jobqueue::{AddCallback, Fence, SignalFence};
    /// use jobqueue::host::HostFence;
    ///
    /// let fence = HostFence::new();
    /// let cb = HostFence::new_callback();
    /// assert_eq!(fence.add_callback(&cb, Waker::noop()), AddCallback::Queued);
    /// assert!(fence.remove_callback(&cb));
    /// assert!(!fence.remove_callback(&cb)); // no longer queued
    /// assert_eq!(fence.add_callback(&cb, Waker::noop()), AddCallback::Queued);
    /// ```
    fn remove_callback(&self, cb: &Self::Callback) -> bool;

    /// Returns `true` once the fence has signalled.
    fn is_signalled(&self) -> bool {
        self.status().is_some()
    }

    /// Whether `self` and `other` are references to the same fence.
    ///
    /// The queue uses it to recognise a dependency on the done fence of one of its own jobs,
    /// which is met as soon as that job is on the ring (see [`Queue`](crate::Queue)). The
    /// default, `false`, only costs that shortcut.
    fn same_fence(&self, other: &Self) -> bool {
        let _ = other;
        false
    }

    /// The fence's timeline and its place on it, like a `dma_fence`'s context and seqno:
    /// `None` for a fence that has no place (yet).
    ///
    /// Fences of one timeline must signal in the order of their places, and places compare as
    /// plain integers (a timeline whose numbers wrap around must not report them). A job then
    /// only needs to wait for the latest fence of each timeline:
    /// [`PreparedJob::add_dependency`](crate::PreparedJob::add_dependency) keeps one dependency
    /// per timeline, as `drm_sched_job_add_dependency` does. The default, `None`, only costs
    /// that saving.
    fn timeline(&self) -> Option<(u64, u64)> {
        None
    }
}

/// A fence that can be signalled by its owner.
pub trait SignalFence: Fence {
    /// Signals the fence with `result` and wakes every queued callback.
    ///
    /// Returns `false`, changing nothing, if the fence had already signalled. Must not allocate.
    fn signal(&self, result: FenceResult) -> bool;

    /// Records the fence's sequence number on its queue's timeline.
    ///
    /// The queue calls this once, when the job the fence belongs to is committed (its done
    /// fence exists from preparation on, before the order of commits is known). Fences that
    /// carry a place on a timeline, as the kernel's `dma_fence` does, store it; the default
    /// does nothing. Must not allocate.
    fn set_seqno(&self, seqno: u64) {
        let _ = seqno;
    }

    /// Makes the fence a new, pending fence again, if this is its only reference.
    ///
    /// A queue keeps the done fences of its retired jobs and, when it prepares a job
    /// ([`Queue::prepare`](crate::Queue::prepare)), asks the kept fence to be recycled instead of
    /// allocating a new one. An implementation returns `true` only when nobody else can observe
    /// the fence (no clone, no callback, no waiter), after resetting it to the state of a fresh
    /// fence of the same timeline without a place on it; otherwise it returns `false` and
    /// changes nothing. The default never recycles (fences such as `dma_fence`, which readers
    /// may reach without a reference, cannot be). Never called in a signalling path.
    fn try_recycle(&mut self) -> bool {
        false
    }
}
