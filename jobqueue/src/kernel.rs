// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Kernel adapters, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! # `dma_fence`
//!
//! In the kernel a fence is a `struct dma_fence`: a reference-counted object with a spinlock,
//! a list of callbacks, an error and a place on a *timeline* (a fence context number and a
//! sequence number that grows along it). Every kernel subsystem that waits for GPU work
//! speaks it: syncobjs, sync files, `dma_resv` reservation objects of shared buffers, other
//! drivers. Its rules are the ones [`fence`](crate::fence) states: a fence signals exactly once
//! and in finite time, and nothing on the way to signalling may allocate memory or wait on
//! another fence while holding a lock a waiter might hold. The kernel checks the last rule
//! with lockdep when the code that leads to a signal is marked with
//! `dma_fence_begin_signalling()`/`dma_fence_end_signalling()`.
//!
//! Linux 7.2 has no Rust abstraction of it, so this module provides a thin one over the C
//! API, with a small C file (`kernel/fence.c`) for what `bindings` cannot reach (inline
//! functions, and `dma_fence_ops` that carry per-queue names):
//!
//! - [`KernelFence`]: one reference to any `dma_fence`. Done fences made by the queue are
//!   plain `dma_fence`s that any kernel code can hold, wait on or put in a syncobj, and a
//!   dependency may be any driver's fence. Signalling takes the fence lock with interrupts
//!   disabled, so it works from a hard interrupt handler.
//! - [`KernelCallback`]: a preallocated `dma_fence_cb`, so that adding a callback never
//!   allocates.
//! - [`Timeline`]: one fence context with its driver and timeline names. Each queue has its
//!   own: a done fence gets the job's sequence number when the job is committed, so fences
//!   of one context signal in sequence order, as `dma_fence_is_later` and the syncobj and
//!   `dma_resv` code that uses it assume.
//! - [`KernelAlloc`]: done fences on a timeline, callback nodes and dependency tables
//!   (`KVec`) with the caller's GFP flags; used only while preparing jobs.
//! - [`KernelClock`]: the monotonic clock.
//! - [`Runner`] and [`WorkExecutor`]: the queue runs in a work item on the system workqueue,
//!   inside a `dma_fence` signalling section; the executor's `Waker` enqueues that work item,
//!   and a high-resolution timer armed for the queue's earliest job deadline (in hard-IRQ
//!   mode, where it only enqueues the work item) serves timeouts on time.

use core::alloc::Layout;
use core::cell::UnsafeCell;
use core::ffi::c_int;

use ::kernel::ffi::c_char;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::task::{RawWaker, RawWakerVTable, Waker};

use ::kernel::alloc::allocator::Kmalloc;
use ::kernel::alloc::{flags::__GFP_ZERO, Allocator as _, Flags, KVec, NumaNode};
use ::kernel::bindings;
use ::kernel::prelude::*;
use ::kernel::sync::{new_mutex, new_spinlock, Arc, ArcBorrow, Mutex, SpinLock};
use ::kernel::time::hrtimer::{
    AbsoluteHardMode, ArcHrTimerHandle, HrTimer, HrTimerCallback, HrTimerCallbackContext,
    HrTimerPointer, HrTimerRestart,
};
use ::kernel::time::{msecs_to_jiffies, Delta, Monotonic};
use ::kernel::types::Opaque;
use ::kernel::workqueue::{self, impl_has_work, new_work, Work, WorkItem};

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

// `kernel/fence.c`.
extern "C" {
    static gpukit_fence_size: usize;
    fn gpukit_fence_init(
        mem: *mut core::ffi::c_void,
        driver: *const c_char,
        timeline: *const c_char,
        context: u64,
        seqno: u64,
    ) -> *mut bindings::dma_fence;
    fn gpukit_fence_set_seqno(f: *mut bindings::dma_fence, seqno: u64);
    fn gpukit_fence_get(f: *mut bindings::dma_fence) -> *mut bindings::dma_fence;
    fn gpukit_fence_put(f: *mut bindings::dma_fence);
    fn gpukit_fence_is_signaled(f: *mut bindings::dma_fence) -> bool;
    fn gpukit_fence_signal(f: *mut bindings::dma_fence, error: c_int) -> bool;
    fn gpukit_fence_begin_signalling() -> bool;
    fn gpukit_fence_end_signalling(cookie: bool);
    fn gpukit_fence_context(f: *mut bindings::dma_fence) -> u64;
    fn gpukit_fence_seqno(f: *mut bindings::dma_fence) -> u64;
}

/// A fence context: the timeline a queue's done fences are ordered on, with the names
/// `dma_fence` reports for them (in debugfs, sync-file info and fence warnings).
///
/// Every queue needs a timeline of its own (a [`Runner`] makes one): two queues sharing one
/// would interleave their sequence numbers, and code that keeps only the latest fence of a
/// context (`dma_resv`, syncobj merging) would drop a pending fence.
#[derive(Clone, Copy, Debug)]
pub struct Timeline {
    context: u64,
    driver: &'static CStr,
    name: &'static CStr,
}

impl Timeline {
    /// Allocates a new fence context named `driver`/`name`.
    pub fn new(driver: &'static CStr, name: &'static CStr) -> Self {
        // SAFETY: `dma_fence_context_alloc` only advances a global counter.
        let context = unsafe { bindings::dma_fence_context_alloc(1) };
        Timeline {
            context,
            driver,
            name,
        }
    }

    /// The fence context number.
    pub fn context(&self) -> u64 {
        self.context
    }
}

/// One reference to a `struct dma_fence`; cloning takes another (`dma_fence_get`), dropping
/// gives it back (`dma_fence_put`).
///
/// It may refer to any driver's fence. [`SignalFence::signal`] is for fences the caller is
/// responsible for (the done fences a [`KernelAlloc`] makes, a driver's hardware fences made
/// with [`KernelFence::new`]); signalling another driver's fence is memory-safe but breaks
/// that driver's accounting.
///
/// # Invariants
///
/// `ptr` points to an initialised `dma_fence` of which this value owns one reference.
pub struct KernelFence {
    ptr: NonNull<bindings::dma_fence>,
}

// SAFETY: A `dma_fence` is reference counted atomically and all its state is behind its lock
// (or atomic flags), so references may be used and dropped on any thread.
unsafe impl Send for KernelFence {}
// SAFETY: Every method takes the fence lock or reads atomic state; see `Send`.
unsafe impl Sync for KernelFence {}

impl KernelFence {
    /// A pending fence on `timeline` with sequence number `seqno`, from `kmalloc(flags)`.
    ///
    /// Used for fences the driver signals itself (a ring's hardware fences); the queue's done
    /// fences come from a [`KernelAlloc`].
    pub fn new(timeline: &Timeline, seqno: u64, flags: Flags) -> Result<Self> {
        // SAFETY: A constant of the C side, written once at build time.
        let size = unsafe { gpukit_fence_size };
        let layout = Layout::from_size_align(size, 8).map_err(|_| EINVAL)?;
        let mem = Kmalloc::alloc(layout, flags | __GFP_ZERO, NumaNode::NO_NODE)?;
        // SAFETY: `mem` is `gpukit_fence_size` bytes of zeroed `kmalloc` memory, which the
        // fence owns from here on (its last `dma_fence_put` frees it with `kfree_rcu`); the
        // names are static NUL-terminated strings.
        let ptr = unsafe {
            gpukit_fence_init(
                mem.as_ptr().cast(),
                timeline.driver.as_char_ptr(),
                timeline.name.as_char_ptr(),
                timeline.context,
                seqno,
            )
        };
        // INVARIANT: `gpukit_fence_init` returns the initialised fence with one reference.
        NonNull::new(ptr)
            .map(|ptr| KernelFence { ptr })
            .ok_or(ENOMEM)
    }

    /// Takes over one reference to `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` points to an initialised `dma_fence` and the caller owns one reference to it,
    /// which it hands over.
    pub unsafe fn from_raw(ptr: NonNull<bindings::dma_fence>) -> Self {
        // INVARIANT: As the caller guarantees.
        KernelFence { ptr }
    }

    /// Takes a new reference to `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` points to an initialised `dma_fence` on which the caller holds a reference for
    /// the duration of this call.
    pub unsafe fn from_borrowed(ptr: NonNull<bindings::dma_fence>) -> Self {
        // SAFETY: The fence is alive (the caller's reference); `dma_fence_get` takes another.
        unsafe { gpukit_fence_get(ptr.as_ptr()) };
        // INVARIANT: The reference taken above belongs to the new value.
        KernelFence { ptr }
    }

    /// The `dma_fence` this refers to, valid while `self` lives.
    pub fn as_raw(&self) -> *mut bindings::dma_fence {
        self.ptr.as_ptr()
    }

    /// Gives up ownership of the reference without dropping it.
    pub fn into_raw(self) -> NonNull<bindings::dma_fence> {
        let ptr = self.ptr;
        core::mem::forget(self);
        ptr
    }

    /// Whether `self` and `other` are the same fence.
    pub fn ptr_eq(&self, other: &KernelFence) -> bool {
        self.ptr == other.ptr
    }

    /// The fence's context (its timeline) and sequence number.
    pub fn context_and_seqno(&self) -> (u64, u64) {
        // SAFETY: `self.ptr` is a live fence (type invariant).
        unsafe {
            (
                gpukit_fence_context(self.as_raw()),
                gpukit_fence_seqno(self.as_raw()),
            )
        }
    }

    /// Sleeps in `dma_fence_wait_timeout` until the fence signals or `timeout_ms` pass.
    ///
    /// `Ok(None)` on timeout, `Ok(Some(result))` once signalled, `Err(ERESTARTSYS)` when
    /// `interruptible` and a signal arrived. Must not be called in a signalling section (lockdep
    /// reports it) or in atomic context.
    pub fn wait(&self, interruptible: bool, timeout_ms: u32) -> Result<Option<FenceResult>> {
        let jiffies = isize::try_from(msecs_to_jiffies(timeout_ms)).unwrap_or(isize::MAX);
        // SAFETY: `self.ptr` is a live fence (type invariant); the call may sleep, which the
        // caller's context allows (documented above).
        let left =
            unsafe { bindings::dma_fence_wait_timeout(self.as_raw(), interruptible, jiffies) };
        if left < 0 {
            let errno = i32::try_from(left).unwrap_or(-(bindings::EINVAL as i32));
            return Err(::kernel::error::Error::from_errno(errno));
        }
        Ok(self.status())
    }

    /// [`wait`](Self::wait) without interruption, `None` on timeout.
    pub fn wait_timeout_ms(&self, timeout_ms: u32) -> Option<FenceResult> {
        self.wait(false, timeout_ms).ok().flatten()
    }
}

impl Clone for KernelFence {
    fn clone(&self) -> Self {
        // SAFETY: `self.ptr` is a live fence on which `self` holds a reference.
        unsafe { Self::from_borrowed(self.ptr) }
    }
}

impl Drop for KernelFence {
    fn drop(&mut self) {
        // SAFETY: `self` owns one reference (type invariant) and gives it back here.
        unsafe { gpukit_fence_put(self.as_raw()) };
    }
}

impl core::fmt::Debug for KernelFence {
    fn fmt(&self, out: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let (context, seqno) = self.context_and_seqno();
        out.debug_struct("KernelFence")
            .field("context", &context)
            .field("seqno", &seqno)
            .field("status", &self.status())
            .finish()
    }
}

/// What a [`KernelCallback`] is doing; guarded by its lock.
struct CbState {
    /// The fence the node was last queued on (compared by address only); null when idle.
    on: *const bindings::dma_fence,
}

/// A callback node. See [`KernelCallback`].
///
/// # Invariants
///
/// - While the node is queued on a fence (`state.on` non-null and `fired` false), that fence
///   holds one reference to the node's `Arc`, leaked by `add_callback` and reclaimed either by
///   [`fence_cb`] or by a successful `dma_fence_remove_callback` in `remove_callback`.
/// - `waker` is written only while the node is not queued (under `state`), read by exactly
///   one of [`fence_cb`] (under the fence lock, after the fence took the node off its list) or
///   `remove_callback` (after taking it off the list itself).
#[pin_data]
struct CallbackNode {
    #[pin]
    cb: Opaque<bindings::dma_fence_cb>,
    #[pin]
    state: SpinLock<CbState>,
    fired: AtomicBool,
    waker: UnsafeCell<Option<Waker>>,
}

// SAFETY: The raw pointer in `state` is only compared, never dereferenced; `cb` is only touched
// by the fence code under the fence lock; `waker` is handed from thread to thread under the
// discipline of the type invariants (a `Waker` is `Send`).
unsafe impl Send for CallbackNode {}
// SAFETY: See `Send`: shared access is serialised by `state`, the fence lock and `fired`.
unsafe impl Sync for CallbackNode {}

/// A preallocated `dma_fence_cb` for [`KernelFence`]: queued on at most one fence at a time,
/// reusable once that fence has signalled or the callback was taken back.
///
/// Adding and removing it take a plain spinlock of the node (around the fence's own lock), so
/// they are for process context; the callback itself may run in any context the fence
/// signals in, hard IRQ included, and only wakes the waker it was given.
#[derive(Clone)]
pub struct KernelCallback(Arc<CallbackNode>);

impl KernelCallback {
    /// Allocates a callback node.
    pub fn new(flags: Flags) -> Result<Self> {
        let node = Arc::pin_init(
            pin_init!(CallbackNode {
                cb: Opaque::zeroed(),
                state <- new_spinlock!(CbState { on: core::ptr::null() }),
                fired: AtomicBool::new(false),
                waker: UnsafeCell::new(None),
            }),
            flags,
        )?;
        Ok(KernelCallback(node))
    }
}

/// The `dma_fence_func_t` of every [`KernelCallback`]: runs under the fence lock, in whatever
/// context the fence signals (hard IRQ included), and only wakes a waker.
unsafe extern "C" fn fence_cb(_fence: *mut bindings::dma_fence, cb: *mut bindings::dma_fence_cb) {
    let cb = cb.cast::<Opaque<bindings::dma_fence_cb>>();
    // SAFETY: Every `dma_fence_cb` queued with this function is the `cb` field of a
    // `CallbackNode` inside an `Arc`.
    let node = unsafe { ::kernel::container_of!(cb, CallbackNode, cb) };
    // SAFETY: The fence took the node off its list before calling this, so by the type
    // invariants this call is the only one reading `waker` now.
    let waker = unsafe { (*(*node).waker.get()).take() };
    // SAFETY: `node` is alive: the fence holds the reference leaked when it was queued.
    unsafe { (*node).fired.store(true, Ordering::Release) };
    // SAFETY: That leaked reference is given back here (type invariant), exactly once.
    drop(unsafe { Arc::from_raw(node) });
    if let Some(w) = waker {
        w.wake();
    }
}

/// Maps `dma_fence_get_status`-style results onto [`FenceResult`].
fn result_of(errno: c_int) -> FenceResult {
    if errno < 0 {
        Err(FenceError::new(errno).unwrap_or(FenceError::IO))
    } else {
        Ok(())
    }
}

impl Fence for KernelFence {
    type Callback = KernelCallback;

    fn status(&self) -> Option<FenceResult> {
        // SAFETY: `self.ptr` is a live fence (type invariant).
        if !unsafe { gpukit_fence_is_signaled(self.as_raw()) } {
            return None;
        }
        // SAFETY: As above; the fence has signalled, so this reads its error.
        let status = unsafe { bindings::dma_fence_get_status(self.as_raw()) };
        Some(result_of(status))
    }

    fn add_callback(&self, cb: &KernelCallback, waker: &Waker) -> AddCallback {
        let node = &*cb.0;
        let mut state = node.state.lock();
        if !state.on.is_null() && !node.fired.load(Ordering::Acquire) {
            return AddCallback::Busy;
        }
        state.on = core::ptr::null();
        // SAFETY: The node is not queued (checked above under its lock, which every writer
        // holds), so nothing else reads or writes `waker` now.
        let stale = unsafe { (*node.waker.get()).replace(waker.clone()) };
        node.fired.store(false, Ordering::Relaxed);
        let leaked = Arc::into_raw(cb.0.clone());
        // SAFETY: `self.ptr` is a live fence; `node.cb` is pinned inside the `Arc` and not on
        // any list; the reference leaked above keeps it alive while queued.
        let ret = unsafe {
            bindings::dma_fence_add_callback(self.as_raw(), node.cb.get(), Some(fence_cb))
        };
        if ret == 0 {
            state.on = self.as_raw();
            drop(state);
            drop(stale);
            return AddCallback::Queued;
        }
        // Already signalled: nothing was queued, so the reference and the waker come back.
        // SAFETY: Not queued, see above.
        let ours = unsafe { (*node.waker.get()).take() };
        drop(state);
        // SAFETY: `leaked` was made by `Arc::into_raw` above and the fence did not take it.
        drop(unsafe { Arc::from_raw(leaked) });
        drop((stale, ours));
        AddCallback::Signalled(self.status().unwrap_or(Ok(())))
    }

    fn remove_callback(&self, cb: &KernelCallback) -> bool {
        let node = &*cb.0;
        let mut state = node.state.lock();
        if !core::ptr::eq(state.on, self.as_raw()) {
            return false;
        }
        state.on = core::ptr::null();
        if node.fired.load(Ordering::Acquire) {
            return false;
        }
        // SAFETY: `self.ptr` is live; the node was queued on exactly this fence and, as
        // `fired` is false, the fence still holds it (it cannot have been freed).
        let removed = unsafe { bindings::dma_fence_remove_callback(self.as_raw(), node.cb.get()) };
        if !removed {
            // The fence is signalling and its callback has run or is about to run.
            return false;
        }
        // SAFETY: The node is off the list: `fence_cb` will not run for this queueing, so this
        // is the only reader of `waker` (type invariants).
        let waker = unsafe { (*node.waker.get()).take() };
        drop(state);
        // SAFETY: The reference leaked when queuing is ours again (type invariants).
        drop(unsafe { Arc::from_raw(&*cb.0 as *const CallbackNode) });
        drop(waker);
        true
    }

    fn same_fence(&self, other: &Self) -> bool {
        self.as_raw() == other.as_raw()
    }
}

impl SignalFence for KernelFence {
    fn signal(&self, result: FenceResult) -> bool {
        let errno = match result {
            Ok(()) => 0,
            Err(e) => e.to_errno(),
        };
        // SAFETY: `self.ptr` is a live fence; `errno` is 0 or in -4095..=-1 (`FenceError`).
        unsafe { gpukit_fence_signal(self.as_raw(), errno) }
    }

    fn set_seqno(&self, seqno: u64) {
        // SAFETY: `self.ptr` is a live fence; the C side only writes fences of its own ops.
        unsafe { gpukit_fence_set_seqno(self.as_raw(), seqno) };
    }
}

/// A `dma_fence` signalling section: from creation to drop, lockdep treats the thread as one
/// that must make fences signal (no allocation that may reclaim, no lock held around a fence
/// wait). Sections nest; in atomic context they are no-ops, as in C.
pub struct SignallingSection {
    cookie: bool,
    _not_send: core::marker::PhantomData<*mut ()>,
}

impl SignallingSection {
    /// Enters a section (`dma_fence_begin_signalling`).
    pub fn begin() -> Self {
        // SAFETY: Only updates lockdep's state for the current thread.
        let cookie = unsafe { gpukit_fence_begin_signalling() };
        SignallingSection {
            cookie,
            _not_send: core::marker::PhantomData,
        }
    }
}

impl Drop for SignallingSection {
    fn drop(&mut self) {
        // SAFETY: `cookie` came from the matching `begin` on this thread (the type is `!Send`).
        unsafe { gpukit_fence_end_signalling(self.cookie) };
    }
}

/// Done fences on one [`Timeline`], callback nodes and dependency tables, from the kernel
/// allocator.
///
/// A done fence is made pending at sequence number 0 and given its job's sequence number
/// when the job is committed (`Queue::commit` calls [`SignalFence::set_seqno`]), so one
/// allocator must serve one queue: take it from the queue's [`Runner::allocator`].
pub struct KernelAlloc {
    timeline: Timeline,
    flags: Flags,
}

impl KernelAlloc {
    /// An allocator for a queue whose done fences live on `timeline`, allocating with `flags`
    /// (usually `GFP_KERNEL`: preparing a job is outside any signalling section).
    pub fn new(timeline: Timeline, flags: Flags) -> Self {
        KernelAlloc { timeline, flags }
    }

    /// The timeline its done fences are on.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }
}

impl Allocator<KernelFence> for KernelAlloc {
    type DepTable = KVec<DepSlot<KernelFence>>;

    fn try_new_fence(
        &self,
        _token: &AllocToken<'_>,
    ) -> core::result::Result<KernelFence, AllocError> {
        KernelFence::new(&self.timeline, 0, self.flags).map_err(|_| AllocError)
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

    /// The monotonic-clock instant of `at` on this clock.
    pub fn to_monotonic(&self, at: Instant) -> ::kernel::time::Instant<Monotonic> {
        let ns = i64::try_from(at.as_nanos()).unwrap_or(i64::MAX / 2);
        self.origin + Delta::from_nanos(ns)
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

/// The queue and the timer armed for it, under the runner's lock.
struct Slot<Q: RunQueue> {
    queue: Option<Q>,
    timer: Option<Armed<Q>>,
}

/// The armed deadline timer.
struct Armed<Q: RunQueue> {
    /// Dropping it cancels the timer.
    _handle: ArcHrTimerHandle<Runner<Q>>,
    deadline: Instant,
    /// `Runner::timer_fires` when it was armed: a timer that fired since is no longer armed.
    fires: u64,
}

/// The kernel's default system workqueue, `system_dfl_wq` (unbound). Linux 7.2's
/// `workqueue::system()` is `system_wq`, which 7.2 marks deprecated and warns about on first
/// use.
pub fn default_workqueue() -> &'static workqueue::Queue {
    // SAFETY: `system_dfl_wq` is set up at boot, before any initcall, and never freed.
    unsafe { workqueue::Queue::from_raw(bindings::system_dfl_wq) }
}

/// Owns a queue and runs it from a work item on the system workqueue (`system_dfl_wq`).
///
/// Each run happens inside a `dma_fence` signalling section ([`SignallingSection`]), with the
/// runner's lock held: whoever takes that lock (through [`Runner::with`], to submit jobs) must
/// not allocate memory that may reclaim or wait for a fence while holding it, and lockdep
/// reports a violation. Prepare jobs before taking it.
///
/// After each run a high-resolution timer (hard-IRQ mode, monotonic clock) is armed for the
/// queue's earliest deadline, or cancelled when there is none; its handler only enqueues the
/// work item, which then handles the timeout.
///
/// The queue holds the runner's [`WorkExecutor`] (a reference to the runner) and the runner holds
/// the queue: they keep each other alive until [`Runner::take`] hands the queue back, which a
/// driver does at teardown (dropping the returned queue cancels its pending jobs).
#[pin_data]
pub struct Runner<Q: RunQueue> {
    #[pin]
    work: Work<Runner<Q>, 1>,
    #[pin]
    timer: HrTimer<Runner<Q>>,
    #[pin]
    state: Mutex<Slot<Q>>,
    clock: KernelClock,
    timeline: Timeline,
    runs: AtomicU64,
    timer_fires: AtomicU64,
}

impl_has_work! {
    impl{Q: RunQueue} HasWork<Runner<Q>, 1> for Runner<Q> { self.work }
}

::kernel::impl_has_hr_timer! {
    impl{Q: RunQueue} HasHrTimer<Runner<Q>> for Runner<Q> {
        mode: AbsoluteHardMode<Monotonic>,
        field: self.timer
    }
}

impl<Q: RunQueue> WorkItem<1> for Runner<Q> {
    type Pointer = Arc<Runner<Q>>;

    fn run(this: Arc<Runner<Q>>) {
        Self::run_queue(this);
    }
}

impl<Q: RunQueue> HrTimerCallback for Runner<Q> {
    type Pointer<'a> = Arc<Runner<Q>>;

    fn run(
        this: ArcBorrow<'_, Runner<Q>>,
        _ctx: HrTimerCallbackContext<'_, Self>,
    ) -> HrTimerRestart {
        // Hard-IRQ context: only hand the work to the workqueue.
        this.timer_fires.fetch_add(1, Ordering::Relaxed);
        Self::schedule(this.into());
        HrTimerRestart::NoRestart
    }
}

impl<Q: RunQueue> Runner<Q> {
    const VTABLE: RawWakerVTable = RawWakerVTable::new(
        Self::w_clone,
        Self::w_wake,
        Self::w_wake_by_ref,
        Self::w_drop,
    );

    /// A runner with no queue yet, with a new [`Timeline`] named `driver`/`name` for the
    /// queue's done fences; `clock` must be the queue's clock (or a copy of it).
    pub fn new(
        clock: KernelClock,
        driver: &'static CStr,
        name: &'static CStr,
        flags: Flags,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Runner {
                work <- new_work!("gpukit::jobqueue::Runner::work"),
                timer <- HrTimer::new(),
                state <- new_mutex!(Slot { queue: None, timer: None }),
                clock,
                timeline: Timeline::new(driver, name),
                runs: AtomicU64::new(0),
                timer_fires: AtomicU64::new(0),
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

    /// The allocator for this runner's queue: done fences on the runner's timeline.
    pub fn allocator(&self, flags: Flags) -> KernelAlloc {
        KernelAlloc::new(self.timeline, flags)
    }

    /// The timeline of the queue's done fences.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// Hands the queue to the runner and schedules a first run.
    pub fn install(this: &Arc<Self>, queue: Q) {
        this.state.lock().queue = Some(queue);
        Self::schedule(this.clone());
    }

    /// Runs `f` on the queue under the runner's lock (`None` if there is no queue).
    ///
    /// `f` must not allocate or wait for fences (see the type's documentation).
    pub fn with<R>(&self, f: impl FnOnce(&mut Q) -> R) -> Option<R> {
        let mut guard = self.state.lock();
        Option::as_mut(&mut guard.queue).map(f)
    }

    /// Takes the queue back, e.g. to drop it (which cancels its pending jobs), and cancels the
    /// deadline timer. Work items still queued find no queue and do nothing.
    pub fn take(&self) -> Option<Q> {
        let (queue, timer) = {
            let mut guard = self.state.lock();
            (guard.queue.take(), guard.timer.take())
        };
        // Cancelling waits for a running timer handler; no need to hold the lock for that.
        drop(timer);
        queue
    }

    /// How many times the queue ran.
    pub fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }

    /// How many times the deadline timer fired.
    pub fn timer_fires(&self) -> u64 {
        self.timer_fires.load(Ordering::Relaxed)
    }

    fn schedule(this: Arc<Self>) {
        // Already pending: that run will see whatever this wake-up was for.
        let _ = default_workqueue().enqueue::<Arc<Self>, 1>(this);
    }

    fn run_queue(this: Arc<Self>) {
        let _section = SignallingSection::begin();
        let mut guard = this.state.lock();
        let slot = &mut *guard;
        let Some(q) = slot.queue.as_mut() else {
            return;
        };
        q.run();
        this.runs.fetch_add(1, Ordering::Relaxed);
        let deadline = q.next_deadline();
        let fires = this.timer_fires.load(Ordering::Relaxed);
        if let (Some(armed), Some(d)) = (&slot.timer, deadline) {
            if armed.deadline == d && armed.fires == fires {
                // Still armed for exactly this deadline.
                return;
            }
        }
        // There is one timer per runner: cancel it before arming it again. Cancelling waits
        // for a running handler, which only enqueues work, so this is fine under the lock.
        drop(slot.timer.take());
        if let Some(d) = deadline {
            let handle = this.clone().start(this.clock.to_monotonic(d));
            slot.timer = Some(Armed {
                _handle: handle,
                deadline: d,
                fires,
            });
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

/// The queue's executor: its waker schedules the runner's work item. Deadlines are armed by
/// the runner itself after each run (see [`Runner`]), so [`Executor::wake_at`] has nothing to
/// add: the queue only asks for it from inside a run, which the runner follows by arming its
/// timer for [`Queue::next_deadline`](crate::Queue::next_deadline).
pub struct WorkExecutor {
    waker: Waker,
}

impl Executor for WorkExecutor {
    fn waker(&self) -> &Waker {
        &self.waker
    }

    fn wake_at(&self, _deadline: Instant) {}
}

mod kunit;
#[cfg(CONFIG_GPUKIT_VS_C)]
mod vs_c;
