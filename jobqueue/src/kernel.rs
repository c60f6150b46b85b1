// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Kernel adapters, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! Linux 7.2 has no Rust abstraction of `dma_fence`, so the kernel side of the crate's seams is
//! built from the kernel's own primitives:
//!
//! - [`KernelFence`]: a reference-counted fence (`kernel::sync::Arc`) whose state sits behind a
//!   `SpinLock`, with a `CondVar` for blocking waiters; callbacks are preallocated nodes linked
//!   into the fence, so neither adding a callback nor signalling allocates.
//! - [`KernelAlloc`]: fences, callback nodes and dependency tables (`KVec`) with the caller's
//!   GFP flags; used only while preparing jobs.
//! - [`KernelClock`]: the monotonic clock.
//! - [`Runner`] and [`WorkExecutor`]: the queue runs in a work item on the system workqueue; the
//!   executor's `Waker` enqueues it, and a delayed work item of the same runner handles
//!   timeouts. The runner owns the queue behind a `Mutex`, so exactly one `Queue::run` runs at a
//!   time.
//!
//! The fence lock is a plain `SpinLock`: Linux 7.2's Rust has no interrupt-disabling variant,
//! so these fences must be signalled from process or softirq-free context (a threaded
//! interrupt handler or a work item), not from a hard interrupt handler.

use core::sync::atomic::{AtomicU64, Ordering};
use core::task::{RawWaker, RawWakerVTable, Waker};

use ::kernel::alloc::{Flags, KVec};
use ::kernel::prelude::*;
use ::kernel::sync::{new_condvar, new_mutex, new_spinlock, Arc, ArcBorrow, CondVar, Mutex};
use ::kernel::sync::{CondVarTimeoutResult, SpinLock};
use ::kernel::time::{msecs_to_jiffies, Monotonic};
use ::kernel::workqueue::{self, impl_has_delayed_work, impl_has_work, new_delayed_work};
use ::kernel::workqueue::{new_work, DelayedWork, Work, WorkItem};

use crate::{
    AddCallback, AllocError, AllocToken, Allocator, Clock, DepSlot, Error, Executor, Fence,
    FenceError, FenceResult, Instant, SignalFence,
};

impl From<Error> for ::kernel::error::Error {
    fn from(e: Error) -> Self {
        ::kernel::error::Error::from_errno(e.to_errno())
    }
}

impl From<FenceError> for ::kernel::error::Error {
    fn from(e: FenceError) -> Self {
        ::kernel::error::Error::from_errno(e.to_errno())
    }
}

impl From<AllocError> for ::kernel::error::Error {
    fn from(_: AllocError) -> Self {
        ENOMEM
    }
}

struct Link {
    linked: bool,
    waker: Option<Waker>,
    next: Option<Arc<CallbackNode>>,
}

#[pin_data]
struct CallbackNode {
    #[pin]
    link: SpinLock<Link>,
}

/// A callback node for [`KernelFence`], reusable once the fence it was queued on signalled.
#[derive(Clone)]
pub struct KernelCallback(Arc<CallbackNode>);

impl KernelCallback {
    /// Allocates a callback node.
    pub fn new(flags: Flags) -> Result<Self> {
        let node = Arc::pin_init(
            pin_init!(CallbackNode {
                link <- new_spinlock!(Link { linked: false, waker: None, next: None }),
            }),
            flags,
        )?;
        Ok(KernelCallback(node))
    }
}

struct FenceState {
    result: Option<FenceResult>,
    /// Queued callback nodes, newest first.
    head: Option<Arc<CallbackNode>>,
}

#[pin_data(PinnedDrop)]
struct FenceInner {
    #[pin]
    state: SpinLock<FenceState>,
    #[pin]
    cond: CondVar,
}

#[pinned_drop]
impl PinnedDrop for FenceInner {
    fn drop(self: Pin<&mut Self>) {
        // Unlink iteratively, so that a long list cannot overflow the kernel stack.
        let mut next = self.state.lock().head.take();
        while let Some(node) = next {
            let mut link = node.link.lock();
            link.linked = false;
            link.waker = None;
            next = link.next.take();
        }
    }
}

/// A fence over the kernel's synchronisation primitives; cloning takes a reference.
#[derive(Clone)]
pub struct KernelFence(Arc<FenceInner>);

impl KernelFence {
    /// Allocates a pending fence.
    pub fn new(flags: Flags) -> Result<Self> {
        let inner = Arc::pin_init(
            pin_init!(FenceInner {
                state <- new_spinlock!(FenceState { result: None, head: None }),
                cond <- new_condvar!(),
            }),
            flags,
        )?;
        Ok(KernelFence(inner))
    }

    /// Sleeps until the fence signals or about `ms` milliseconds pass; `None` on timeout or
    /// when a signal interrupts the wait.
    pub fn wait_timeout_ms(&self, ms: u32) -> Option<FenceResult> {
        let mut left = msecs_to_jiffies(ms);
        let mut state = self.0.state.lock();
        loop {
            if let Some(r) = state.result {
                return Some(r);
            }
            match self.0.cond.wait_interruptible_timeout(&mut state, left) {
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                CondVarTimeoutResult::Timeout | CondVarTimeoutResult::Signal { .. } => {
                    return state.result;
                }
            }
        }
    }

    /// Whether `self` and `other` are the same fence.
    pub fn ptr_eq(&self, other: &KernelFence) -> bool {
        core::ptr::eq(&*self.0, &*other.0)
    }
}

impl Fence for KernelFence {
    type Callback = KernelCallback;

    fn status(&self) -> Option<FenceResult> {
        self.0.state.lock().result
    }

    fn add_callback(&self, cb: &KernelCallback, waker: &Waker) -> AddCallback {
        let mut state = self.0.state.lock();
        if let Some(r) = state.result {
            return AddCallback::Signalled(r);
        }
        let mut link = cb.0.link.lock();
        if link.linked {
            return AddCallback::Busy;
        }
        link.linked = true;
        link.waker = Some(waker.clone());
        link.next = state.head.take();
        drop(link);
        state.head = Some(cb.0.clone());
        AddCallback::Queued
    }

    fn remove_callback(&self, cb: &KernelCallback) -> bool {
        let mut state = self.0.state.lock();
        // Once signalled the list has been handed to `signal`, which unlinks every node.
        let Some(head) = state.head.clone() else {
            return false;
        };
        if Arc::ptr_eq(&head, &cb.0) {
            state.head = unlink(&head);
            return true;
        }
        // Under the fence lock no other thread changes this fence's links.
        let mut prev = head;
        loop {
            let next = prev.link.lock().next.clone();
            match next {
                Some(node) if Arc::ptr_eq(&node, &cb.0) => {
                    prev.link.lock().next = unlink(&node);
                    return true;
                }
                Some(node) => prev = node,
                None => return false,
            }
        }
    }
}

/// Marks `node` unqueued, drops its waker, and returns the node after it.
fn unlink(node: &CallbackNode) -> Option<Arc<CallbackNode>> {
    let mut link = node.link.lock();
    link.linked = false;
    link.waker = None;
    link.next.take()
}

impl SignalFence for KernelFence {
    fn signal(&self, result: FenceResult) -> bool {
        let mut next = {
            let mut state = self.0.state.lock();
            if state.result.is_some() {
                return false;
            }
            state.result = Some(result);
            state.head.take()
        };
        self.0.cond.notify_all();
        // Wake outside the fence lock: a waker may take other locks.
        while let Some(node) = next {
            let waker = {
                let mut link = node.link.lock();
                link.linked = false;
                next = link.next.take();
                link.waker.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        }
        true
    }
}

/// Fences, callback nodes and dependency tables from the kernel allocator.
pub struct KernelAlloc {
    flags: Flags,
}

impl KernelAlloc {
    /// An allocator using `flags` (usually `GFP_KERNEL`).
    pub fn new(flags: Flags) -> Self {
        KernelAlloc { flags }
    }
}

impl Allocator<KernelFence> for KernelAlloc {
    type DepTable = KVec<DepSlot<KernelFence>>;

    fn try_new_fence(
        &self,
        _token: &AllocToken<'_>,
    ) -> core::result::Result<KernelFence, AllocError> {
        KernelFence::new(self.flags).map_err(|_| AllocError)
    }

    fn try_new_callback(
        &self,
        _token: &AllocToken<'_>,
    ) -> core::result::Result<KernelCallback, AllocError> {
        KernelCallback::new(self.flags).map_err(|_| AllocError)
    }

    fn try_new_dep_table(
        &self,
        _token: &AllocToken<'_>,
        len: usize,
    ) -> core::result::Result<Self::DepTable, AllocError> {
        let mut table = KVec::with_capacity(len, self.flags).map_err(|_| AllocError)?;
        for _ in 0..len {
            let cb = KernelCallback::new(self.flags).map_err(|_| AllocError)?;
            table
                .push(DepSlot::new(cb), self.flags)
                .map_err(|_| AllocError)?;
        }
        Ok(table)
    }
}

/// The kernel's monotonic clock, counted from when the clock was made (clones share it).
#[derive(Clone, Copy)]
pub struct KernelClock {
    origin: ::kernel::time::Instant<Monotonic>,
}

impl KernelClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        KernelClock {
            origin: ::kernel::time::Instant::now(),
        }
    }
}

impl Default for KernelClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for KernelClock {
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(0))
    }
}

/// What a [`Runner`] drives: a queue (implemented for every `Queue` using [`WorkExecutor`] and
/// [`KernelClock`]).
pub trait RunQueue: Send + Unpin + 'static {
    /// One pass of the queue's work ([`Queue::run`](crate::Queue::run)).
    fn run(&mut self);

    /// When the queue next needs to run for a timeout.
    fn next_deadline(&self) -> Option<Instant>;
}

impl<B, const N: usize> RunQueue for crate::Queue<B, WorkExecutor, KernelClock, N>
where
    B: crate::Backend + Send + 'static,
    crate::Queue<B, WorkExecutor, KernelClock, N>: Send + Unpin,
{
    fn run(&mut self) {
        crate::Queue::run(self)
    }

    fn next_deadline(&self) -> Option<Instant> {
        crate::Queue::next_deadline(self)
    }
}

/// Owns a queue and runs it from work items on the system workqueue.
///
/// The queue holds the runner's [`WorkExecutor`] (a reference to the runner) and the runner holds
/// the queue: they keep each other alive until [`Runner::take`] hands the queue back, which a
/// driver does at teardown (dropping the returned queue cancels its pending jobs).
#[pin_data]
pub struct Runner<Q: RunQueue> {
    #[pin]
    work: Work<Runner<Q>, 1>,
    #[pin]
    timer: DelayedWork<Runner<Q>, 2>,
    #[pin]
    queue: Mutex<Option<Q>>,
    clock: KernelClock,
    runs: AtomicU64,
}

impl_has_work! {
    impl{Q: RunQueue} HasWork<Runner<Q>, 1> for Runner<Q> { self.work }
}

impl_has_delayed_work! {
    impl{Q: RunQueue} HasDelayedWork<Runner<Q>, 2> for Runner<Q> { self.timer }
}

impl<Q: RunQueue> WorkItem<1> for Runner<Q> {
    type Pointer = Arc<Runner<Q>>;

    fn run(this: Arc<Runner<Q>>) {
        Self::run_queue(this);
    }
}

impl<Q: RunQueue> WorkItem<2> for Runner<Q> {
    type Pointer = Arc<Runner<Q>>;

    fn run(this: Arc<Runner<Q>>) {
        Self::run_queue(this);
    }
}

/// Longest delay of the timeout work item: an earlier deadline requested while it is pending
/// is served at most this late (the queue re-arms it after every run).
const TICK_MS: u64 = 10;

impl<Q: RunQueue> Runner<Q> {
    const VTABLE: RawWakerVTable = RawWakerVTable::new(
        Self::w_clone,
        Self::w_wake,
        Self::w_wake_by_ref,
        Self::w_drop,
    );

    /// A runner with no queue yet; `clock` must be the queue's clock (or a copy of it).
    pub fn new(clock: KernelClock, flags: Flags) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Runner {
                work <- new_work!("gpukit::jobqueue::Runner::work"),
                timer <- new_delayed_work!("gpukit::jobqueue::Runner::timer"),
                queue <- new_mutex!(None),
                clock,
                runs: AtomicU64::new(0),
            }),
            flags,
        )
    }

    /// The executor to build the queue with.
    pub fn executor(this: &Arc<Self>) -> WorkExecutor {
        let data = Arc::into_raw(this.clone()).cast::<()>();
        // SAFETY: `data` owns one reference of an `Arc<Self>`, as `VTABLE`'s functions expect.
        let waker = unsafe { Waker::from_raw(RawWaker::new(data, &Self::VTABLE)) };
        WorkExecutor { waker }
    }

    /// Hands the queue to the runner and schedules a first run.
    pub fn install(this: &Arc<Self>, queue: Q) {
        *this.queue.lock() = Some(queue);
        Self::schedule(this.clone());
    }

    /// Runs `f` on the queue under the runner's lock (`None` if there is no queue).
    pub fn with<R>(&self, f: impl FnOnce(&mut Q) -> R) -> Option<R> {
        let mut guard = self.queue.lock();
        Option::as_mut(&mut *guard).map(f)
    }

    /// Takes the queue back, e.g. to drop it (which cancels its pending jobs). Work items
    /// still queued find no queue and do nothing.
    pub fn take(&self) -> Option<Q> {
        self.queue.lock().take()
    }

    /// How many times the queue ran.
    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }

    fn schedule(this: Arc<Self>) {
        // Already pending: that run will see whatever this wake-up was for.
        let _ = workqueue::system().enqueue::<Arc<Self>, 1>(this);
    }

    fn run_queue(this: Arc<Self>) {
        let deadline = {
            let mut guard = this.queue.lock();
            let Some(q) = Option::as_mut(&mut *guard) else {
                return;
            };
            q.run();
            this.runs.fetch_add(1, Ordering::Relaxed);
            q.next_deadline()
        };
        if let Some(deadline) = deadline {
            let now = this.clock.now().as_nanos();
            let ms = deadline.as_nanos().saturating_sub(now).div_ceil(1_000_000);
            let ms = u32::try_from(ms.clamp(1, TICK_MS)).unwrap_or(1);
            let _ = workqueue::system().enqueue_delayed::<Arc<Self>, 2>(this, msecs_to_jiffies(ms));
        }
    }

    unsafe fn w_clone(data: *const ()) -> RawWaker {
        // SAFETY: `data` is an `Arc<Self>` reference owned by the waker being cloned, which is
        // alive during this call.
        let borrowed = unsafe { ArcBorrow::<Self>::from_raw(data.cast()) };
        let extra: Arc<Self> = borrowed.into();
        RawWaker::new(Arc::into_raw(extra).cast(), &Self::VTABLE)
    }

    unsafe fn w_wake(data: *const ()) {
        // SAFETY: The waker owned this reference and is consumed by `wake`.
        Self::schedule(unsafe { Arc::from_raw(data.cast()) });
    }

    unsafe fn w_wake_by_ref(data: *const ()) {
        // SAFETY: As in `w_clone`.
        let borrowed = unsafe { ArcBorrow::<Self>::from_raw(data.cast()) };
        Self::schedule(borrowed.into());
    }

    unsafe fn w_drop(data: *const ()) {
        // SAFETY: The waker owned this reference and is being dropped.
        drop(unsafe { Arc::<Self>::from_raw(data.cast()) });
    }
}

/// The queue's executor: its waker schedules the runner's work item. Timeouts are served by
/// the runner itself after each run (see [`Runner`]), so [`Executor::wake_at`] only needs to
/// make sure a run happens, which the queue's own run already is.
pub struct WorkExecutor {
    waker: Waker,
}

impl Executor for WorkExecutor {
    fn waker(&self) -> &Waker {
        &self.waker
    }

    fn wake_at(&self, _deadline: Instant) {
        // `Queue::run` asks for this from inside a run; the runner reads `next_deadline()` right
        // after that run and arms its delayed work item. Nothing to do here.
    }
}

mod kunit;
