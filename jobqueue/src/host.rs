// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Host implementations of the environment traits (feature `std`).
//!
//! - [`HostFence`]: a fence usable from any thread, with blocking waits;
//! - [`HostAlloc`]: the allocator seam over the global allocator, with optional failure
//!   injection for testing out-of-memory paths;
//! - [`ManualClock`]: a clock tests move by hand;
//! - [`TestExecutor`]: a deterministic executor: wake-ups and due timers set a flag, and the
//!   test decides when the queue's work runs.

extern crate std;

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use core::task::Waker;
use core::time::Duration;
use std::boxed::Box;
use std::sync::Arc;
use std::task::Wake;

// Under `--cfg loom` the locks are loom's, so that loom can explore every interleaving of
// fence signals, callback registration and executor wake-ups.
#[cfg(not(loom))]
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize as WaiterCount};
#[cfg(loom)]
use loom::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize as WaiterCount};
#[cfg(loom)]
use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::error::FenceError;
use crate::exec::Executor;
use crate::fence::{AddCallback, Fence, FenceResult, SignalFence};
use crate::mem::{AllocError, AllocToken, Allocator, DepSlot};
use crate::time::{Clock, Instant};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves the data consistent (every critical
    // section is a few assignments), so poisoning is ignored.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits on `cond` while `pred` holds, at most `timeout` (loom: without a time limit).
///
/// `waiters` counts the threads waiting, so that the signalling side only pays for a
/// notification (a system call) when somebody actually waits.
fn wait_while<'a, T>(
    cond: &Condvar,
    mut guard: MutexGuard<'a, T>,
    timeout: Duration,
    waiters: fn(&mut T) -> &mut usize,
    pred: impl FnMut(&mut T) -> bool,
) -> MutexGuard<'a, T> {
    *waiters(&mut guard) += 1;
    #[cfg(not(loom))]
    let mut guard = {
        cond.wait_timeout_while(guard, timeout, pred)
            .unwrap_or_else(|e| e.into_inner())
            .0
    };
    #[cfg(loom)]
    {
        let _ = timeout;
        let mut pred = pred;
        while pred(&mut guard) {
            guard = cond.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }
    *waiters(&mut guard) -= 1;
    guard
}

#[derive(Default)]
struct Link {
    linked: bool,
    waker: Option<Waker>,
    next: Option<Arc<CallbackNode>>,
}

#[derive(Default)]
struct CallbackNode {
    link: Mutex<Link>,
}

/// A callback node for [`HostFence`]; reusable once the fence it was queued on has signalled.
#[derive(Clone, Default)]
pub struct HostCallback(Arc<CallbackNode>);

impl core::fmt::Debug for HostCallback {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        f.debug_struct("HostCallback").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct FenceState {
    result: Option<FenceResult>,
    /// Singly linked list of queued callback nodes, newest first.
    head: Option<Arc<CallbackNode>>,
    /// Threads blocked in `wait`/`wait_timeout`.
    waiters: usize,
    /// Calls of `signal`, successful or not.
    signal_calls: usize,
}

#[derive(Default)]
struct FenceInner {
    state: Mutex<FenceState>,
    /// The result as [`encode`] writes it, stored under the lock when the fence signals, so
    /// that [`Fence::status`] is one atomic load: polling a dependency takes no lock.
    settled: AtomicI32,
    cond: Condvar,
    /// The timeline the fence belongs to (its allocator's), 0 for none.
    context: u64,
    /// Its place on the timeline ([`SignalFence::set_seqno`]), 0 until it has one.
    seqno: AtomicU64,
}

/// 0 while pending, 1 for success, the (negative) errno for an error.
fn encode(result: FenceResult) -> i32 {
    match result {
        Ok(()) => 1,
        Err(e) => e.to_errno(),
    }
}

fn decode(v: i32) -> Option<FenceResult> {
    match v {
        0 => None,
        1 => Some(Ok(())),
        // Only `encode` writes the value, from a valid `FenceError`.
        e => Some(Err(FenceError::new(e).unwrap_or(FenceError::IO))),
    }
}

impl Drop for FenceInner {
    fn drop(&mut self) {
        // Unlink iteratively so a long callback list cannot overflow the stack.
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut next = state.head.take();
        while let Some(node) = next {
            let mut link = lock(&node.link);
            link.linked = false;
            link.waker = None;
            next = link.next.take();
        }
    }
}

/// A fence for the host: cheap to clone, usable from any thread.
///
/// # Examples
///
/// ```
/// use jobqueue::host::HostFence;
/// use jobqueue::{Fence, FenceError, SignalFence};
///
/// let f = HostFence::new();
/// let f2 = f.clone();
/// let t = std::thread::spawn(move || f2.signal(Err(FenceError::IO)));
/// assert_eq!(f.wait(), Err(FenceError::IO));
/// assert!(t.join().unwrap());
/// assert!(!f.signal(Ok(()))); // only the first signal counts
/// ```
#[derive(Clone, Default)]
pub struct HostFence(Arc<FenceInner>);

impl core::fmt::Debug for HostFence {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        f.debug_struct("HostFence")
            .field("status", &self.status())
            .finish()
    }
}

impl HostFence {
    /// A new pending fence.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new fence that has already signalled with `result`.
    pub fn signalled(result: FenceResult) -> Self {
        let f = Self::new();
        f.signal(result);
        f
    }

    /// A new callback node.
    pub fn new_callback() -> HostCallback {
        HostCallback::default()
    }

    /// Blocks until the fence signals and returns its result.
    pub fn wait(&self) -> FenceResult {
        let mut state = lock(&self.0.state);
        state.waiters += 1;
        let result = loop {
            if let Some(r) = state.result {
                break r;
            }
            state = self.0.cond.wait(state).unwrap_or_else(|e| e.into_inner());
        };
        state.waiters -= 1;
        result
    }

    /// Blocks until the fence signals or `timeout` passes; `None` on timeout.
    pub fn wait_timeout(&self, timeout: Duration) -> Option<FenceResult> {
        let state = lock(&self.0.state);
        wait_while(
            &self.0.cond,
            state,
            timeout,
            |s| &mut s.waiters,
            |s| s.result.is_none(),
        )
        .result
    }

    /// How often [`signal`](SignalFence::signal) was called, successful or not (for tests that
    /// check a fence is signalled exactly once).
    pub fn signal_calls(&self) -> usize {
        lock(&self.0.state).signal_calls
    }

    /// How many callbacks are queued on the fence, waiting for it to signal (for tests that
    /// check waiters that give up take their callbacks back). Walks the list.
    pub fn queued_callbacks(&self) -> usize {
        let state = lock(&self.0.state);
        let mut n = 0;
        let mut cur = state.head.clone();
        while let Some(node) = cur {
            n += 1;
            cur = lock(&node.link).next.clone();
        }
        n
    }

    /// A new pending fence on timeline `context` (0 for none), as the fences of a
    /// [`HostAlloc`] are: the queue gives it its sequence number when its job is committed.
    pub fn on_timeline(context: u64) -> Self {
        HostFence(Arc::new(FenceInner {
            state: Mutex::default(),
            settled: AtomicI32::new(0),
            cond: Condvar::new(),
            context,
            seqno: AtomicU64::new(0),
        }))
    }

    /// The fence's timeline and its place on it, as a kernel `dma_fence`'s context and seqno:
    /// `None` for a fence on no timeline or not placed yet (its job not committed). Fences of
    /// one timeline signal in the order of their places.
    ///
    /// # Examples
    ///
    /// ```
    /// use jobqueue::host::HostFence;
    /// use jobqueue::SignalFence;
    ///
    /// let f = HostFence::on_timeline(7);
    /// assert_eq!(f.timeline(), None);
    /// f.set_seqno(3);
    /// assert_eq!(f.timeline(), Some((7, 3)));
    /// assert_eq!(HostFence::new().timeline(), None);
    /// ```
    pub fn timeline(&self) -> Option<(u64, u64)> {
        let seqno = self.0.seqno.load(Ordering::Acquire);
        (self.0.context != 0 && seqno != 0).then_some((self.0.context, seqno))
    }

    /// Whether `self` and `other` are the same fence.
    pub fn ptr_eq(&self, other: &HostFence) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Fence for HostFence {
    type Callback = HostCallback;

    fn status(&self) -> Option<FenceResult> {
        // Acquire: whoever sees the result also sees what the signaller did before.
        decode(self.0.settled.load(Ordering::Acquire))
    }

    fn add_callback(&self, cb: &HostCallback, waker: &Waker) -> AddCallback {
        let mut state = lock(&self.0.state);
        if let Some(r) = state.result {
            return AddCallback::Signalled(r);
        }
        let mut link = lock(&cb.0.link);
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

    fn remove_callback(&self, cb: &HostCallback) -> bool {
        let mut state = lock(&self.0.state);
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
            let next = lock(&prev.link).next.clone();
            match next {
                Some(node) if Arc::ptr_eq(&node, &cb.0) => {
                    lock(&prev.link).next = unlink(&node);
                    return true;
                }
                Some(node) => prev = node,
                None => return false,
            }
        }
    }

    fn same_fence(&self, other: &Self) -> bool {
        self.ptr_eq(other)
    }

    fn timeline(&self) -> Option<(u64, u64)> {
        HostFence::timeline(self)
    }
}

/// Marks `node` unqueued, drops its waker, and returns the node after it.
fn unlink(node: &CallbackNode) -> Option<Arc<CallbackNode>> {
    let mut link = lock(&node.link);
    link.linked = false;
    link.waker = None;
    link.next.take()
}

impl SignalFence for HostFence {
    fn set_seqno(&self, seqno: u64) {
        self.0.seqno.store(seqno, Ordering::Release);
    }

    fn try_recycle(&mut self) -> bool {
        // The only reference (no clone, nobody waiting: a waiter holds a clone), so nothing
        // else can observe the reset.
        let Some(inner) = Arc::get_mut(&mut self.0) else {
            return false;
        };
        let state = inner.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if state.head.is_some() {
            // Callbacks queued by former clones: leave them to be woken by a signal.
            return false;
        }
        state.result = None;
        state.waiters = 0;
        state.signal_calls = 0;
        inner.settled.store(0, Ordering::Relaxed);
        inner.seqno.store(0, Ordering::Relaxed);
        true
    }

    fn signal(&self, result: FenceResult) -> bool {
        let (mut next, notify) = {
            let mut state = lock(&self.0.state);
            state.signal_calls += 1;
            if state.result.is_some() {
                return false;
            }
            state.result = Some(result);
            self.0.settled.store(encode(result), Ordering::Release);
            (state.head.take(), state.waiters > 0)
        };
        if notify {
            self.0.cond.notify_all();
        }
        // Wake outside the fence lock: a waker may do anything that does not wait on us.
        while let Some(node) = next {
            let waker = {
                let mut link = lock(&node.link);
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

/// The allocator seam over the global allocator.
///
/// [`HostAlloc::failing_after`] makes every allocation after the first `n` fail, to test
/// out-of-memory handling.
///
/// Each allocator is a timeline of its own (a `dma_fence` context): its fences carry its
/// number and, once their jobs are committed, their sequence numbers ([`HostFence::timeline`]).
#[derive(Debug)]
pub struct HostAlloc {
    budget: Option<AtomicUsize>,
    context: u64,
}

/// The last timeline number handed out.
static CONTEXTS: AtomicU64 = AtomicU64::new(0);

fn new_context() -> u64 {
    CONTEXTS.fetch_add(1, Ordering::Relaxed) + 1
}

impl Default for HostAlloc {
    fn default() -> Self {
        HostAlloc {
            budget: None,
            context: new_context(),
        }
    }
}

impl HostAlloc {
    /// An allocator that never fails (short of the process running out of memory).
    pub fn new() -> Self {
        Self::default()
    }

    /// An allocator that grants `n` allocations and fails all later ones.
    pub fn failing_after(n: usize) -> Self {
        HostAlloc {
            budget: Some(AtomicUsize::new(n)),
            context: new_context(),
        }
    }

    /// The timeline of the fences this allocator makes.
    pub fn context(&self) -> u64 {
        self.context
    }

    fn take(&self) -> Result<(), AllocError> {
        match &self.budget {
            None => Ok(()),
            Some(b) => b
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .map(|_| ())
                .map_err(|_| AllocError),
        }
    }
}

impl Allocator<HostFence> for HostAlloc {
    type DepTable = Box<[DepSlot<HostFence>]>;

    fn try_new_fence(&self, _token: &AllocToken<'_>) -> Result<HostFence, AllocError> {
        self.take()?;
        Ok(HostFence::on_timeline(self.context))
    }

    fn try_new_callback(&self, _token: &AllocToken<'_>) -> Result<HostCallback, AllocError> {
        self.take()?;
        Ok(HostCallback::default())
    }

    fn try_new_dep_table(
        &self,
        _token: &AllocToken<'_>,
        len: usize,
    ) -> Result<Self::DepTable, AllocError> {
        self.take()?;
        let mut v = std::vec::Vec::new();
        v.try_reserve_exact(len).map_err(|_| AllocError)?;
        for _ in 0..len {
            self.take()?;
            v.push(DepSlot::new(HostCallback::default()));
        }
        Ok(v.into_boxed_slice())
    }
}

/// A clock that only moves when told to; clones share the same time.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use jobqueue::host::ManualClock;
/// use jobqueue::Clock;
///
/// let c = ManualClock::new();
/// c.advance(Duration::from_millis(2));
/// assert_eq!(c.now().as_nanos(), 2_000_000);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `d` (saturating).
    pub fn advance(&self, d: Duration) {
        let now = Instant::from_nanos(self.0.load(Ordering::SeqCst));
        self.0
            .store(now.saturating_add(d).as_nanos(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.0.load(Ordering::SeqCst))
    }
}

/// No timer requested (`ExecShared::timer`).
const NO_TIMER: u64 = u64::MAX;

struct ExecShared {
    /// Held by threads in `wait_pending` from counting themselves to sleeping, and taken by
    /// the wake-up that sees one counted, so that it notifies only once they sleep.
    lock: Mutex<()>,
    cond: Condvar,
    /// A wake-up is pending. Set without the lock, so that waking an executor costs two atomic
    /// operations (this flag and `wakes`); only a wake-up that finds threads in `wait_pending`
    /// takes the lock.
    pending: AtomicBool,
    /// Threads in `wait_pending`.
    waiters: WaiterCount,
    wakes: AtomicU64,
    /// The earliest requested timer in nanoseconds, `NO_TIMER` for none. The test drives the
    /// timers, so a deadline at the very end of time counts as none.
    timer: AtomicU64,
}

impl Default for ExecShared {
    fn default() -> Self {
        ExecShared {
            lock: Mutex::new(()),
            cond: Condvar::new(),
            pending: AtomicBool::new(false),
            waiters: WaiterCount::new(0),
            wakes: AtomicU64::new(0),
            timer: AtomicU64::new(NO_TIMER),
        }
    }
}

impl Wake for ExecShared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::Relaxed);
        // An RMW even when the flag is already set: the consumer's `take_pending` then reads
        // this write (or a later one), so its run sees everything done before this wake-up.
        if self.pending.swap(true, Ordering::SeqCst) {
            // Already pending: the wake-up that set it notified any waiter.
            return;
        }
        // A waiter counts itself, then checks `pending`, under the lock; all four accesses
        // are sequentially consistent, so either it sees the flag set or this sees it counted.
        // It sleeps by the time this gets the lock.
        if self.waiters.load(Ordering::SeqCst) > 0 {
            drop(lock(&self.lock));
            self.cond.notify_all();
        }
    }
}

/// A deterministic executor for tests: the work item runs only when the test says so.
///
/// Waking sets a flag; [`run_until_idle`](Self::run_until_idle) calls the work function while
/// the flag is set. Timers are kept as the earliest requested deadline and fire from
/// [`fire_timers`](Self::fire_timers). Clones share state. Wakers may be woken from any thread;
/// [`wait_pending`](Self::wait_pending) blocks until that happens.
#[derive(Clone)]
pub struct TestExecutor {
    shared: Arc<ExecShared>,
    waker: Waker,
}

impl core::fmt::Debug for TestExecutor {
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        f.debug_struct("TestExecutor").finish_non_exhaustive()
    }
}

impl Default for TestExecutor {
    fn default() -> Self {
        Self::new()
    }
}

impl TestExecutor {
    /// A new idle executor.
    pub fn new() -> Self {
        let shared = Arc::new(ExecShared::default());
        let waker = Waker::from(shared.clone());
        TestExecutor { shared, waker }
    }

    /// Clears the pending flag and returns whether it was set.
    pub fn take_pending(&self) -> bool {
        self.shared.pending.swap(false, Ordering::SeqCst)
    }

    /// Whether a wake-up is pending.
    pub fn is_pending(&self) -> bool {
        self.shared.pending.load(Ordering::SeqCst)
    }

    /// How many wake-ups happened so far.
    pub fn wakes(&self) -> u64 {
        self.shared.wakes.load(Ordering::Relaxed)
    }

    /// The earliest requested timer, if any.
    pub fn timer(&self) -> Option<Instant> {
        let t = self.shared.timer.load(Ordering::SeqCst);
        (t != NO_TIMER).then(|| Instant::from_nanos(t))
    }

    /// Runs `work` while wake-ups are pending (at most 10 000 rounds, against livelock);
    /// returns the number of rounds.
    pub fn run_until_idle(&self, mut work: impl FnMut()) -> usize {
        let mut rounds = 0;
        while rounds < 10_000 && self.take_pending() {
            work();
            rounds += 1;
        }
        rounds
    }

    /// Fires the timer if it is due at `now`: clears it and marks work pending.
    pub fn fire_timers(&self, now: Instant) -> bool {
        let timer = &self.shared.timer;
        let due = timer
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                (t != NO_TIMER && t <= now.as_nanos()).then_some(NO_TIMER)
            })
            .is_ok();
        if due {
            self.shared.pending.store(true, Ordering::SeqCst);
        }
        due
    }

    /// Blocks until a wake-up is pending or `timeout` passes; returns whether one is pending.
    pub fn wait_pending(&self, timeout: Duration) -> bool {
        let shared = &*self.shared;
        let guard = lock(&shared.lock);
        shared.waiters.fetch_add(1, Ordering::SeqCst);
        #[cfg(not(loom))]
        let guard = {
            let pending = || !shared.pending.load(Ordering::SeqCst);
            shared
                .cond
                .wait_timeout_while(guard, timeout, |_| pending())
                .unwrap_or_else(|e| e.into_inner())
                .0
        };
        #[cfg(loom)]
        let guard = {
            let _ = timeout;
            let mut guard = guard;
            while !shared.pending.load(Ordering::SeqCst) {
                guard = shared.cond.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            guard
        };
        shared.waiters.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
        shared.pending.load(Ordering::SeqCst)
    }
}

impl Executor for TestExecutor {
    fn waker(&self) -> &Waker {
        &self.waker
    }

    fn wake_at(&self, deadline: Instant) {
        let d = deadline.as_nanos();
        // Usually the same deadline again: a load, no write.
        if d < self.shared.timer.load(Ordering::SeqCst) {
            self.shared.timer.fetch_min(d, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FenceError;
    use std::sync::atomic::AtomicUsize;
    use std::vec::Vec;

    /// A waker that counts how often it was woken.
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn counter() -> (Arc<Counter>, Waker) {
        let c = Arc::new(Counter(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    #[test]
    fn callback_fires_once_and_node_is_reusable() {
        let (count, waker) = counter();
        let a = HostFence::new();
        let b = HostFence::new();
        let cb = HostFence::new_callback();
        assert_eq!(a.add_callback(&cb, &waker), AddCallback::Queued);
        // Still queued on `a`: cannot be queued on `b` too.
        assert_eq!(b.add_callback(&cb, &waker), AddCallback::Busy);
        assert!(a.signal(Ok(())));
        assert!(!a.signal(Err(FenceError::IO)));
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert_eq!(a.status(), Some(Ok(())));
        assert_eq!(a.signal_calls(), 2);
        // Free again after `a` signalled.
        assert_eq!(b.add_callback(&cb, &waker), AddCallback::Queued);
        b.signal(Err(FenceError::CANCELED));
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
        assert_eq!(
            b.add_callback(&cb, &waker),
            AddCallback::Signalled(Err(FenceError::CANCELED))
        );
        assert_eq!(count.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn every_queued_callback_fires() {
        let (count, waker) = counter();
        let f = HostFence::new();
        let cbs: Vec<_> = (0..100).map(|_| HostFence::new_callback()).collect();
        for cb in &cbs {
            assert_eq!(f.add_callback(cb, &waker), AddCallback::Queued);
        }
        f.signal(Ok(()));
        assert_eq!(count.0.load(Ordering::SeqCst), 100);
    }

    #[test]
    fn removed_callbacks_are_not_woken() {
        let (count, waker) = counter();
        let f = HostFence::new();
        let cbs: Vec<_> = (0..5).map(|_| HostFence::new_callback()).collect();
        for cb in &cbs {
            assert_eq!(f.add_callback(cb, &waker), AddCallback::Queued);
        }
        // The list is newest first: take off the newest, one in the middle and the oldest.
        for i in [4, 2, 0] {
            assert!(f.remove_callback(&cbs[i]));
            assert!(!f.remove_callback(&cbs[i]));
        }
        assert_eq!(f.queued_callbacks(), 2);
        // A node queued elsewhere is not this fence's to remove.
        let other = HostFence::new();
        let stranger = HostFence::new_callback();
        assert_eq!(other.add_callback(&stranger, &waker), AddCallback::Queued);
        assert!(!f.remove_callback(&stranger));
        assert_eq!(other.queued_callbacks(), 1);
        // A removed node can be queued again, here or elsewhere.
        assert_eq!(f.add_callback(&cbs[4], &waker), AddCallback::Queued);
        assert_eq!(other.add_callback(&cbs[0], &waker), AddCallback::Queued);
        f.signal(Ok(()));
        // cbs[1], cbs[3] and cbs[4] fired; the removed ones did not.
        assert_eq!(count.0.load(Ordering::SeqCst), 3);
        assert_eq!(f.queued_callbacks(), 0);
        // After the signal there is nothing to remove.
        assert!(!f.remove_callback(&cbs[1]));
        other.signal(Ok(()));
        assert_eq!(count.0.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn dropping_a_pending_fence_frees_its_nodes() {
        let (count, waker) = counter();
        let cb = HostFence::new_callback();
        {
            let f = HostFence::new();
            assert_eq!(f.add_callback(&cb, &waker), AddCallback::Queued);
        }
        // The node is released (and reusable); the waker was never woken.
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        let g = HostFence::new();
        assert_eq!(g.add_callback(&cb, &waker), AddCallback::Queued);
        // Only the executor's waker is left holding the counter, plus ours.
        drop(g);
        assert_eq!(Arc::strong_count(&count), 2);
    }

    #[test]
    fn long_callback_chain_drops_without_recursion() {
        let f = HostFence::new();
        for _ in 0..if cfg!(miri) { 1_000 } else { 200_000 } {
            f.add_callback(&HostFence::new_callback(), Waker::noop());
        }
        drop(f);
    }

    #[test]
    fn wait_timeout_on_pending_fence() {
        let f = HostFence::new();
        assert_eq!(f.wait_timeout(Duration::from_millis(1)), None);
        f.signal(Err(FenceError::IO));
        assert_eq!(f.wait_timeout(Duration::ZERO), Some(Err(FenceError::IO)));
        assert_eq!(f.wait(), Err(FenceError::IO));
    }

    #[test]
    fn add_callback_races_signal() {
        // Either the callback is queued and then woken exactly once, or the caller is told the
        // fence had signalled; never both, never neither.
        for _ in 0..if cfg!(miri) { 3 } else { 200 } {
            let f = HostFence::new();
            let f2 = f.clone();
            let t = std::thread::spawn(move || f2.signal(Ok(())));
            let (count, waker) = counter();
            let cb = HostFence::new_callback();
            let r = f.add_callback(&cb, &waker);
            assert!(t.join().unwrap());
            let woken = count.0.load(Ordering::SeqCst);
            match r {
                AddCallback::Queued => assert_eq!(woken, 1),
                AddCallback::Signalled(Ok(())) => assert_eq!(woken, 0),
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn failing_allocator_counts_down() {
        let a = HostAlloc::failing_after(2);
        AllocToken::scope(|t| {
            assert!(a.try_new_fence(t).is_ok());
            assert!(a.try_new_callback(t).is_ok());
            assert_eq!(a.try_new_fence(t).err(), Some(AllocError));
            assert_eq!(a.try_new_dep_table(t, 0).err(), Some(AllocError));
        });
        AllocToken::scope(|t| {
            let table = HostAlloc::new().try_new_dep_table(t, 3).unwrap();
            assert_eq!(table.len(), 3);
            assert!(table.iter().all(|s| s.dep.is_none()));
        });
    }

    #[test]
    fn executor_timers_keep_the_earliest() {
        let e = TestExecutor::new();
        e.wake_at(Instant::from_nanos(50));
        e.wake_at(Instant::from_nanos(80));
        e.wake_at(Instant::from_nanos(30));
        assert_eq!(e.timer(), Some(Instant::from_nanos(30)));
        assert!(!e.fire_timers(Instant::from_nanos(29)));
        assert!(e.fire_timers(Instant::from_nanos(30)));
        assert!(e.take_pending());
        assert_eq!(e.timer(), None);
        assert_eq!(e.run_until_idle(|| {}), 0);
        e.waker().wake_by_ref();
        assert_eq!(e.wakes(), 1);
        assert!(e.wait_pending(Duration::ZERO));
    }
}
