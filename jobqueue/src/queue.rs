// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The queue in front of one hardware ring.
//!
//! Firmware-scheduled GPUs (Mali CSF, recent NVIDIA and AMD parts) pick the next job themselves
//! once it sits in a ring buffer. What the kernel still has to do is hold a job back until every
//! fence it depends on has signalled, and until the ring has room for it. A [`Queue`] does just
//! that:
//!
//! - jobs enter the ring ([`Backend::run_job`]) strictly in commit order: a job whose
//!   dependencies are pending holds back every later job;
//! - a job enters only when its cost fits in the credits left on the ring; credits come back
//!   when the hardware fence returned by `run_job` signals;
//! - done fences signal in commit order, each with its job's result: the hardware fence's
//!   error, the first error among its dependencies (the job then never runs), `ETIMEDOUT` when
//!   the timeout handler gives up on it, or `ECANCELED` when the queue is killed or dropped;
//! - a job running longer than the configured timeout is handed to
//!   [`Backend::timed_out`], which may extend it (a bounded number of times), fail it, report a
//!   reset after which the other unfinished jobs on the ring are run again, or kill the queue.
//!   A job whose hardware fence has signalled by then is not timed out: one that finished
//!   before the handler was called is simply completed, and one whose fence signals success
//!   while the handler runs (a driver that processes completions there) keeps its success
//!   whatever the handler answers.
//!
//! All of this happens in [`Queue::run`], which the driver calls from a work item whenever the
//! [`Executor`] is woken. The queue never allocates there: it owns a fixed array of `N` job
//! slots, every job brings the rest of its memory from its preparation ([`PreparedJob::new`] or
//! [`Queue::prepare`]), and a retired job's memory moves into a store of the queue (at most `N`
//! jobs' worth) from which `Queue::prepare` takes it again. Code that the queue calls
//! on the way to signalling a fence (the [`Backend`] methods) receives a [`SignalCtx`], which
//! offers no allocation.
//!
//! Locking is the driver's: every method takes `&mut self`, so the queue is used from behind a
//! lock (kernel: a mutex; host: `std::sync::Mutex`). Fence callbacks never take that lock; they
//! only wake the executor, so a fence may signal on any thread at any time, including while the
//! queue is being dropped.

use core::marker::PhantomData;

use crate::error::{Error, FenceError};
use crate::exec::Executor;
use crate::fence::{AddCallback, Fence, FenceResult, SignalFence};
use crate::job::{Committed, Cost, JobParts, MaxDeps, PreparedJob, QueueConfig, Rejected};
use crate::mem::Allocator;
use crate::time::{Clock, Instant};

/// The job type a queue for backend `B` accepts.
pub type JobFor<B> =
    PreparedJob<<B as Backend>::Fence, <B as Backend>::Alloc, <B as Backend>::Payload>;

/// The memory of a job of a queue for backend `B`, kept for reuse.
type PartsFor<B> = JobParts<<B as Backend>::Fence, <B as Backend>::Alloc>;

/// Context handed to code in the fence-signalling path.
///
/// It deliberately offers nothing that allocates: no allocator, no
/// [`AllocToken`](crate::AllocToken), no way to add dependencies or submit jobs.
#[derive(Debug)]
pub struct SignalCtx<'a> {
    now: Instant,
    _scope: PhantomData<&'a mut ()>,
    _not_send: PhantomData<*mut ()>,
}

impl SignalCtx<'_> {
    fn new(now: Instant) -> Self {
        SignalCtx {
            now,
            _scope: PhantomData,
            _not_send: PhantomData,
        }
    }

    /// The time at which the queue started this round of work.
    pub fn now(&self) -> Instant {
        self.now
    }
}

/// A job being handed to the ring.
#[derive(Debug)]
pub struct RunJob<'a, P> {
    seqno: u64,
    cost: u32,
    attempt: u32,
    payload: &'a mut P,
}

impl<P> RunJob<'_, P> {
    /// The job's sequence number.
    pub fn seqno(&self) -> u64 {
        self.seqno
    }

    /// The job's cost in credits.
    pub fn cost(&self) -> u32 {
        self.cost
    }

    /// 0 the first time the job runs, then 1, 2, ... each time it is resubmitted after a reset.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The driver payload (as [`PreparedJob::payload`](crate::PreparedJob::payload)).
    pub fn payload(&self) -> &P {
        self.payload
    }

    /// The driver payload, to change (as [`PreparedJob::payload_mut`](crate::PreparedJob::payload_mut)).
    pub fn payload_mut(&mut self) -> &mut P {
        self.payload
    }
}

/// A job whose time on the ring ran out.
#[derive(Debug)]
pub struct TimedOutJob<'a, P> {
    seqno: u64,
    attempt: u32,
    extensions: u32,
    payload: &'a mut P,
}

impl<P> TimedOutJob<'_, P> {
    /// The job's sequence number.
    pub fn seqno(&self) -> u64 {
        self.seqno
    }

    /// How often the job has been resubmitted.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// How often this run of the job has already been extended.
    pub fn extensions(&self) -> u32 {
        self.extensions
    }

    /// The driver payload (as [`PreparedJob::payload`](crate::PreparedJob::payload)).
    pub fn payload(&self) -> &P {
        self.payload
    }

    /// The driver payload, to change (as [`PreparedJob::payload_mut`](crate::PreparedJob::payload_mut)).
    pub fn payload_mut(&mut self) -> &mut P {
        self.payload
    }
}

/// The driver's verdict on a timed-out job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutAction {
    /// The job is making progress: give it this much more time. Once the configured number of
    /// extensions is used up, this counts as [`TimeoutAction::Fail`].
    Extend(core::time::Duration),
    /// Give up on this job only: its done fence signals `ETIMEDOUT` and its credits return.
    /// The driver has made sure the hardware no longer touches it.
    Fail,
    /// The driver reset the ring. This job is guilty and fails with `ETIMEDOUT`; every other
    /// job still on the ring is innocent and is run again, in order (jobs whose hardware fence
    /// signalled before the timeout was handled count as completed). The driver should signal the hardware fences lost in the reset (with an error)
    /// before returning, so that their callback nodes can be reused.
    Reset,
    /// The device is gone: this job fails with `ETIMEDOUT` and the queue is killed.
    Kill,
}

/// What the driver provides to a queue: its fence type, allocator, payload and callbacks.
pub trait Backend {
    /// The fence type of dependencies, hardware fences and done fences.
    type Fence: SignalFence;
    /// The allocator jobs are prepared with.
    type Alloc: Allocator<Self::Fence>;
    /// Driver data carried by each job.
    type Payload;

    /// Puts `job` on the ring and returns the fence that signals when the hardware is done.
    ///
    /// Runs in the fence-signalling path: must not allocate or wait on other fences. An error
    /// means the job could not be started; it then completes with that error.
    fn run_job(
        &mut self,
        job: RunJob<'_, Self::Payload>,
        ctx: &SignalCtx<'_>,
    ) -> Result<Self::Fence, FenceError>;

    /// Decides what happens to a job that ran past its deadline.
    ///
    /// Runs in the fence-signalling path: must not allocate.
    fn timed_out(
        &mut self,
        job: TimedOutJob<'_, Self::Payload>,
        ctx: &SignalCtx<'_>,
    ) -> TimeoutAction;
}

enum State<F> {
    /// Committed, not yet on the ring.
    Waiting,
    /// On the ring, holding its credits.
    Running {
        hw: F,
        /// The job's callback node is queued on `hw` (see [`Queue::collect_completions`]).
        armed: bool,
        deadline: Instant,
        extensions: u32,
        attempt: u32,
    },
    /// Done (or failed); waiting for earlier jobs so its done fence signals in order.
    Finished(FenceResult),
}

struct Entry<B: Backend> {
    seqno: u64,
    cost: u32,
    job: JobFor<B>,
    state: State<B::Fence>,
}

impl<B: Backend> Entry<B> {
    /// Takes the job's callback back off its hardware fence, if the job is running.
    ///
    /// The queue calls this before it lets go of a hardware fence that has not signalled (a
    /// timeout, a reset, teardown): a fence must not be left holding a callback of a job that
    /// no longer waits for it, and with the kernel's `dma_fence` dropping the last reference
    /// of a fence that still has callbacks is a bug the kernel warns about.
    fn disarm(&self) {
        if let State::Running {
            hw, armed: true, ..
        } = &self.state
        {
            hw.remove_callback(&self.job.hw_cb);
        }
    }
}

/// A dependency-tracking queue in front of one hardware ring, with `N` job slots.
///
/// # Invariants
///
/// - The `len` occupied slots start at `head` and wrap around; all others are `None`.
/// - Of the occupied slots, the first `started` are running or finished, the rest are waiting.
/// - `credits` is the sum of the costs of the running jobs and never exceeds the capacity.
/// - The first `pooled` entries of `pool` are `Some`, the others `None`.
///
/// # Examples
///
/// ```
/// use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
/// use jobqueue::{
///     Backend, Fence, FenceError, PreparedJob, Queue, QueueConfig, RunJob, SignalCtx,
///     SignalFence, TimedOutJob, TimeoutAction,
/// };
/// use jobqueue::{Cost, MaxDeps};
///
/// struct Ring(Vec<HostFence>);
/// impl Backend for Ring {
///     type Fence = HostFence;
///     type Alloc = HostAlloc;
///     type Payload = &'static str;
///     fn run_job(&mut self, _: RunJob<'_, &'static str>, _: &SignalCtx<'_>)
///         -> Result<HostFence, FenceError> {
///         let hw = HostFence::new();
///         self.0.push(hw.clone()); // the test harness may allocate; a driver must not
///         Ok(hw)
///     }
///     fn timed_out(&mut self, _: TimedOutJob<'_, &'static str>, _: &SignalCtx<'_>)
///         -> TimeoutAction {
///         TimeoutAction::Fail
///     }
/// }
///
/// let exec = TestExecutor::new();
/// let config = QueueConfig::new(4);
/// let mut q: Queue<Ring, _, _, 8> =
///     Queue::new(Ring(Vec::new()), exec.clone(), ManualClock::new(), config).unwrap();
///
/// let dep = HostFence::new();
/// let mut job = PreparedJob::new(&HostAlloc::new(), &config, Cost(2), MaxDeps(1), "draw").unwrap();
/// job.add_dependency(&dep).unwrap();
/// let done = q.reserve().unwrap().commit(job).done;
///
/// exec.run_until_idle(|| q.run());
/// assert!(q.backend().0.is_empty()); // still waiting for `dep`
/// dep.signal(Ok(()));
/// exec.run_until_idle(|| q.run());
/// assert_eq!(q.backend().0.len(), 1);
/// q.backend().0[0].signal(Err(FenceError::IO));
/// exec.run_until_idle(|| q.run());
/// assert_eq!(done.status(), Some(Err(FenceError::IO)));
/// ```
pub struct Queue<B: Backend, X: Executor, C: Clock, const N: usize> {
    backend: B,
    exec: X,
    clock: C,
    config: QueueConfig,
    slots: [Option<Entry<B>>; N],
    /// The memory of retired jobs (or set aside by [`reserve_memory`](Self::reserve_memory)),
    /// for the jobs [`prepare`](Self::prepare) makes next: a stack, the most recent on top.
    pool: [Option<PartsFor<B>>; N],
    pooled: usize,
    head: usize,
    len: usize,
    started: usize,
    credits: u32,
    next_seqno: u64,
    killed: bool,
    /// A commit woke the executor and [`run`](Self::run) has not started since: later commits
    /// need not wake it again (the run to come sees them), so a submission of many jobs costs
    /// one wake-up.
    kicked: bool,
}

/// Room for one job in a queue, obtained with [`Queue::reserve`].
///
/// It borrows the queue, so nothing can happen between reserving and committing.
pub struct Reservation<'q, B: Backend, X: Executor, C: Clock, const N: usize> {
    queue: &'q mut Queue<B, X, C, N>,
}

fn slot<B: Backend, const N: usize>(
    slots: &mut [Option<Entry<B>>; N],
    head: usize,
    i: usize,
) -> Option<&mut Entry<B>> {
    // `N > 0` is checked by `Queue::new`; `checked_rem` keeps this free of panics regardless.
    let idx = head.wrapping_add(i).checked_rem(N)?;
    slots.get_mut(idx)?.as_mut()
}

/// The number of dependency slots in use of `e`'s job.
fn job_deps<B: Backend>(e: &Entry<B>) -> usize {
    e.job.n_deps
}

fn slot_ref<B: Backend, const N: usize>(
    slots: &[Option<Entry<B>>; N],
    head: usize,
    i: usize,
) -> Option<&Entry<B>> {
    let idx = head.wrapping_add(i).checked_rem(N)?;
    slots.get(idx)?.as_ref()
}

impl<B: Backend, X: Executor, C: Clock, const N: usize> Queue<B, X, C, N> {
    /// Creates an empty queue.
    ///
    /// Fails with [`Error::InvalidConfig`] if the capacity is zero or `N` is zero.
    pub fn new(backend: B, exec: X, clock: C, config: QueueConfig) -> Result<Self, Error> {
        if config.capacity() == 0 || N == 0 {
            return Err(Error::InvalidConfig);
        }
        Ok(Queue {
            backend,
            exec,
            clock,
            config,
            slots: core::array::from_fn(|_| None),
            pool: core::array::from_fn(|_| None),
            pooled: 0,
            head: 0,
            len: 0,
            started: 0,
            credits: 0,
            next_seqno: 1,
            killed: false,
            kicked: false,
        })
    }

    /// Makes a queue in place at `slot`, as [`new`](Self::new) makes one by value.
    ///
    /// A queue holds its `N` job slots inline, so a queue of many slots is large (tens of KiB
    /// for 64 slots of a driver's jobs) and moving one through a few stack frames overflows a
    /// kernel stack (16 KiB). This writes the queue's fields one by one into memory the caller
    /// set aside (a heap block), with no queue-sized temporary on the stack.
    ///
    /// On success the whole of `slot` is initialised and the returned reference points to it;
    /// on error `slot` is left uninitialised (and `backend`, `exec` and `clock` are dropped).
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    pub fn init_in_place(
        slot: &mut core::mem::MaybeUninit<Self>,
        backend: B,
        exec: X,
        clock: C,
        config: QueueConfig,
    ) -> Result<&mut Self, Error> {
        if config.capacity() == 0 || N == 0 {
            return Err(Error::InvalidConfig);
        }
        let q = slot.as_mut_ptr();
        // Writes field `$f` of the queue at `q` once.
        macro_rules! init {
            ($f:ident, $v:expr) => {{
                // SAFETY: `q` points to memory valid for a `Self` (`slot`'s); the field's place
                // is computed without reading or referencing the uninitialised memory.
                let place = unsafe { core::ptr::addr_of_mut!((*q).$f) };
                // SAFETY: The place is inside `slot` and written once, here.
                unsafe { place.write($v) };
            }};
        }
        init!(backend, backend);
        init!(exec, exec);
        init!(clock, clock);
        init!(config, config);
        init!(pooled, 0);
        init!(head, 0);
        init!(len, 0);
        init!(started, 0);
        init!(credits, 0);
        init!(next_seqno, 1);
        init!(killed, false);
        init!(kicked, false);
        // SAFETY: As in `init!`: the place of the slot array, only computed.
        let slots = unsafe { core::ptr::addr_of_mut!((*q).slots) }.cast::<Option<Entry<B>>>();
        for i in 0..N {
            let elem = slots.wrapping_add(i);
            // SAFETY: `i < N`: the element is inside the slot array, written once, here.
            unsafe { elem.write(None) };
        }
        // SAFETY: As in `init!`: the place of the pool array, only computed.
        let pool = unsafe { core::ptr::addr_of_mut!((*q).pool) }.cast::<Option<PartsFor<B>>>();
        for i in 0..N {
            let elem = pool.wrapping_add(i);
            // SAFETY: `i < N`: the element is inside the pool array, written once, here.
            unsafe { elem.write(None) };
        }
        // SAFETY: Every field was written above.
        Ok(unsafe { slot.assume_init_mut() })
    }

    /// The queue's configuration (pass it to [`PreparedJob::new`]).
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Credits held by jobs on the ring.
    pub fn credits_in_use(&self) -> u32 {
        self.credits
    }

    /// Committed jobs whose done fence has not signalled yet.
    pub fn pending_jobs(&self) -> usize {
        self.len
    }

    /// Whether the queue was killed.
    pub fn is_killed(&self) -> bool {
        self.killed
    }

    /// The driver backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The driver backend, mutably.
    pub fn backend_mut(&mut self) -> &mut B {
        &mut self.backend
    }

    /// The executor.
    pub fn executor(&self) -> &X {
        &self.exec
    }

    /// Reserves a slot for one job: the fallible, allocation-free step before commit.
    ///
    /// Fails with [`Error::Killed`] after [`kill`](Self::kill), or [`Error::QueueFull`] when
    /// all `N` slots hold jobs whose done fences have not signalled yet.
    pub fn reserve(&mut self) -> Result<Reservation<'_, B, X, C, N>, Error> {
        if self.killed {
            Err(Error::Killed)
        } else if self.len >= N {
            Err(Error::QueueFull)
        } else {
            Ok(Reservation { queue: self })
        }
    }

    /// Prepares a job as [`PreparedJob::new`] does, from memory this queue kept instead of new
    /// allocations where it can.
    ///
    /// When a job retires, the queue keeps its done fence, its hardware-fence callback node and
    /// its table of dependency slots (up to `N` jobs' worth, besides the `N` slots of the
    /// ring). This takes the most recently kept set whose table has room for `max_deps`,
    /// recycles its done fence if nobody holds it any more ([`SignalFence::try_recycle`]), and
    /// allocates through `alloc` only what it could not reuse; with nothing kept, it allocates
    /// everything, exactly as `PreparedJob::new`. Once the queue has retired as many jobs as
    /// it holds at a time, and their done fences have been let go, a steady stream of jobs
    /// allocates nothing. [`reserve_memory`](Self::reserve_memory) fills the store up front.
    ///
    /// Errors, and the payload handed back with them, are those of `PreparedJob::new`. A
    /// recycled done fence stays on the [timeline](crate::Fence::timeline) it was made on:
    /// prepare a queue's jobs with one allocator.
    ///
    /// # Examples
    ///
    /// ```
    /// # use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
    /// # use jobqueue::{Backend, FenceError, RunJob, SignalCtx, TimedOutJob, TimeoutAction};
    /// use jobqueue::{Cost, Fence, MaxDeps, Queue, QueueConfig};
    /// # struct Ring;
    /// # impl Backend for Ring {
    /// #     type Fence = HostFence;
    /// #     type Alloc = HostAlloc;
    /// #     type Payload = ();
    /// #     fn run_job(&mut self, _: RunJob<'_, ()>, _: &SignalCtx<'_>) -> Result<HostFence, FenceError> {
    /// #         Ok(HostFence::signalled(Ok(())))
    /// #     }
    /// #     fn timed_out(&mut self, _: TimedOutJob<'_, ()>, _: &SignalCtx<'_>) -> TimeoutAction {
    /// #         TimeoutAction::Fail
    /// #     }
    /// # }
    ///
    /// let (exec, alloc) = (TestExecutor::new(), HostAlloc::new());
    /// let mut q: Queue<Ring, _, _, 4> =
    ///     Queue::new(Ring, exec.clone(), ManualClock::new(), QueueConfig::new(4)).unwrap();
    /// // Set aside the memory of 4 jobs of up to 2 dependencies now ...
    /// q.reserve_memory(&alloc, 4, MaxDeps(2)).unwrap();
    /// for _ in 0..100 {
    ///     // ... and every job after that is made from it, and given back when it retires.
    ///     let job = q.prepare(&alloc, Cost(1), MaxDeps(2), ()).unwrap();
    ///     let done = q.reserve().unwrap().commit(job).done;
    ///     exec.run_until_idle(|| q.run());
    ///     assert_eq!(done.status(), Some(Ok(())));
    /// }
    /// ```
    pub fn prepare(
        &mut self,
        alloc: &B::Alloc,
        Cost(cost): Cost,
        MaxDeps(max_deps): MaxDeps,
        payload: B::Payload,
    ) -> Result<JobFor<B>, Rejected<B::Payload>> {
        if let Err(error) = self.config.check_cost(cost) {
            return Err(Rejected {
                error,
                value: payload,
            });
        }
        match self.take_parts(alloc, max_deps) {
            Ok(parts) => Ok(PreparedJob::from_parts(parts, cost, max_deps, payload)),
            Err(crate::mem::AllocError) => Err(Rejected {
                error: Error::NoMemory,
                value: payload,
            }),
        }
    }

    /// Allocates the memory of up to `jobs` jobs with room for `max_deps` dependencies each,
    /// for [`prepare`](Self::prepare) to use, so that the queue's first jobs do not allocate
    /// either. The store holds at most `N` jobs' worth; beyond that this allocates nothing.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`] when an allocation fails; what was allocated before stays in the
    /// store.
    pub fn reserve_memory(
        &mut self,
        alloc: &B::Alloc,
        jobs: usize,
        MaxDeps(max_deps): MaxDeps,
    ) -> Result<(), Error> {
        for _ in 0..jobs {
            if self.pooled >= N {
                break;
            }
            let parts = JobParts::alloc(alloc, max_deps).map_err(|_| Error::NoMemory)?;
            self.keep(parts);
        }
        Ok(())
    }

    /// How many jobs' worth of memory the queue keeps for [`prepare`](Self::prepare).
    pub fn kept_jobs(&self) -> usize {
        self.pooled
    }

    /// Takes the most recently kept parts with room for `max_deps` dependencies (or, failing
    /// that, the most recent ones with a new table), ready for a new job, or allocates them.
    fn take_parts(
        &mut self,
        alloc: &B::Alloc,
        max_deps: usize,
    ) -> Result<PartsFor<B>, crate::mem::AllocError> {
        let top = self.pooled.checked_sub(1);
        let Some(top) = top else {
            return JobParts::alloc(alloc, max_deps);
        };
        let fits = (0..=top).rev().find(|&i| {
            self.pool
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(|p| p.deps.len() >= max_deps)
        });
        let at = fits.unwrap_or(top);
        // Move the top into the hole, keeping the first `pooled` entries occupied.
        let last = self.pool.get_mut(top).and_then(Option::take);
        let taken = match self.pool.get_mut(at) {
            Some(hole) if at != top => core::mem::replace(hole, last),
            _ => last,
        };
        self.pooled = top;
        let Some(mut parts) = taken else {
            return JobParts::alloc(alloc, max_deps);
        };
        // A kept done fence is either fresh (`reserve_memory`) or the signalled fence of a
        // retired job, which is reused only if nobody holds it any more.
        let reuse = !parts.done.is_signalled() || parts.done.0.try_recycle();
        let renewed = (|| {
            if !reuse {
                parts.renew_fence(alloc)?;
            }
            if parts.deps.len() < max_deps {
                parts.renew_deps(alloc, max_deps)?;
            }
            Ok(())
        })();
        match renewed {
            Ok(()) => Ok(parts),
            Err(e) => {
                self.keep(parts);
                Err(e)
            }
        }
    }

    /// Keeps `parts` for a later job if there is room, or frees them.
    fn keep(&mut self, parts: PartsFor<B>) {
        if let Some(free) = self.pool.get_mut(self.pooled) {
            *free = Some(parts);
            self.pooled += 1;
        }
    }

    /// Reserves and commits in one go, handing the job back if no slot is available.
    pub fn submit(&mut self, job: JobFor<B>) -> Result<Committed<B::Fence>, Rejected<JobFor<B>>> {
        match self.reserve() {
            Ok(r) => Ok(r.commit(job)),
            Err(error) => Err(Rejected { error, value: job }),
        }
    }

    /// Does all the work that is due: notices completed hardware fences, returns credits,
    /// signals done fences in order, handles timeouts and moves ready jobs onto the ring.
    ///
    /// Call it from the executor's work item after each wake-up. Never allocates.
    pub fn run(&mut self) {
        // From here on this run sees every committed job: the next commit wakes again.
        self.kicked = false;
        if self.killed {
            return;
        }
        let now = self.clock.now();
        loop {
            let mut progress = self.collect_completions();
            progress |= self.retire();
            if let Some(i) = self.first_expired(now) {
                self.handle_timeout(i, now);
                if self.killed {
                    return;
                }
                continue;
            }
            // Start as many jobs as possible before scanning the ring again, so that one run
            // costs O(jobs) rather than O(jobs²).
            while self.start_next(now) {
                progress = true;
            }
            if !progress {
                break;
            }
        }
        if let Some(deadline) = self.next_deadline() {
            self.exec.wake_at(deadline);
        }
    }

    /// Wakes the executor unless a commit already did since the last run.
    fn kick(&mut self) {
        if !self.kicked {
            self.kicked = true;
            self.exec.waker().wake_by_ref();
        }
    }

    /// The earliest deadline of a job on the ring, if any.
    pub fn next_deadline(&self) -> Option<Instant> {
        let mut best: Option<Instant> = None;
        for i in 0..self.started {
            if let Some(Entry {
                state: State::Running { deadline, .. },
                ..
            }) = slot_ref(&self.slots, self.head, i)
            {
                best = Some(best.map_or(*deadline, |b| b.min(*deadline)));
            }
        }
        best
    }

    /// Kills the queue: every job not yet signalled completes, in order, with `ECANCELED`
    /// (jobs whose hardware fence already signalled keep their result), and no further jobs
    /// are accepted. Hardware fences still pending are simply forgotten; the driver stops the
    /// hardware. Idempotent.
    pub fn kill(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        for i in 0..self.len {
            let idx = match self.head.wrapping_add(i).checked_rem(N) {
                Some(idx) => idx,
                None => continue,
            };
            if let Some(entry) = self.slots.get_mut(idx).and_then(Option::take) {
                entry.disarm();
                let result = match entry.state {
                    State::Finished(r) => r,
                    _ => Err(FenceError::CANCELED),
                };
                entry.job.done.signal(result);
            }
        }
        self.head = 0;
        self.len = 0;
        self.started = 0;
        self.credits = 0;
    }

    /// Notices the hardware fences that have signalled.
    ///
    /// A job's callback node may still have been on its previous fence when the job went on
    /// the ring (`Busy`: that fence was signalled and still waking its callbacks, the queue's
    /// waker among them, so a run is due). The queue then queues it here, on that run.
    fn collect_completions(&mut self) -> bool {
        let mut progress = false;
        let waker = self.exec.waker();
        for i in 0..self.started {
            let Some(entry) = slot(&mut self.slots, self.head, i) else {
                continue;
            };
            if let State::Running { hw, armed, .. } = &mut entry.state {
                let mut status = hw.status();
                if status.is_none() && !*armed {
                    match hw.add_callback(&entry.job.hw_cb, waker) {
                        AddCallback::Queued => *armed = true,
                        AddCallback::Signalled(r) => status = Some(r),
                        AddCallback::Busy => {}
                    }
                }
                if let Some(result) = status {
                    self.credits = self.credits.saturating_sub(entry.cost);
                    entry.state = State::Finished(result);
                    progress = true;
                }
            }
        }
        progress
    }

    fn retire(&mut self) -> bool {
        let mut progress = false;
        while self.started > 0 {
            let Some(entry) = slot(&mut self.slots, self.head, 0) else {
                break;
            };
            let State::Finished(result) = entry.state else {
                break;
            };
            if let Some(entry) = self.slots.get_mut(self.head).and_then(Option::take) {
                entry.job.done.signal(result);
                // Nothing allocates here: the parts move into the store (or are freed when
                // it is full), and the payload is dropped as the job's end.
                let (parts, payload) = entry.job.into_parts();
                drop(payload);
                self.keep(parts);
            }
            self.head = (self.head + 1) % N;
            self.len -= 1;
            self.started -= 1;
            progress = true;
        }
        progress
    }

    fn first_expired(&self, now: Instant) -> Option<usize> {
        (0..self.started).find(|&i| {
            matches!(
                slot_ref(&self.slots, self.head, i),
                Some(Entry { state: State::Running { deadline, .. }, .. }) if *deadline <= now
            )
        })
    }

    fn handle_timeout(&mut self, i: usize, now: Instant) {
        let ctx = SignalCtx::new(now);
        let Some(entry) = slot(&mut self.slots, self.head, i) else {
            return;
        };
        let State::Running {
            hw,
            deadline,
            extensions,
            attempt,
            ..
        } = &mut entry.state
        else {
            return;
        };
        if hw.is_signalled() {
            // It finished after this run collected completions: not a timeout. The run's
            // next pass collects it.
            return;
        }
        let action = self.backend.timed_out(
            TimedOutJob {
                seqno: entry.seqno,
                attempt: *attempt,
                extensions: *extensions,
                payload: &mut entry.job.payload,
            },
            &ctx,
        );
        match action {
            TimeoutAction::Extend(by) if *extensions < self.config.max_extensions() => {
                *extensions += 1;
                *deadline = now.saturating_add(by);
                return;
            }
            TimeoutAction::Extend(_) | TimeoutAction::Fail => {}
            TimeoutAction::Reset => {
                self.fail_running(i);
                self.resubmit_innocent(now);
                return;
            }
            TimeoutAction::Kill => {
                self.fail_running(i);
                self.kill();
                return;
            }
        }
        self.fail_running(i);
    }

    /// Marks running job `i` as failed with `ETIMEDOUT` and returns its credits, unless its
    /// hardware fence signalled success in the meantime (the driver's timeout handler may
    /// process completions): then the job completed and keeps that result.
    fn fail_running(&mut self, i: usize) {
        if let Some(entry) = slot(&mut self.slots, self.head, i) {
            if let State::Running { hw, .. } = &entry.state {
                let result = match hw.status() {
                    Some(Ok(())) => Ok(()),
                    _ => Err(FenceError::TIMED_OUT),
                };
                entry.disarm();
                self.credits = self.credits.saturating_sub(entry.cost);
                entry.state = State::Finished(result);
            }
        }
    }

    fn resubmit_innocent(&mut self, now: Instant) {
        let ctx = SignalCtx::new(now);
        let waker = self.exec.waker();
        for i in 0..self.started {
            // A job that went on the ring behind an earlier job of this queue it depends on
            // (see `start_next`) does not run again when that job has failed meanwhile (the
            // guilty one, say): it fails with that error instead.
            let failed = self.failed_dependency(i);
            let Some(entry) = slot(&mut self.slots, self.head, i) else {
                continue;
            };
            // Completions seen before the timeout were collected already; whatever is still
            // running was lost in the reset, even if the driver has meanwhile signalled its
            // old hardware fence with an error.
            let State::Running { attempt, .. } = &entry.state else {
                continue;
            };
            let attempt = attempt.saturating_add(1);
            entry.disarm();
            if let Some(e) = failed {
                entry.state = State::Finished(Err(e));
                self.credits = self.credits.saturating_sub(entry.cost);
                continue;
            }
            let run = self.backend.run_job(
                RunJob {
                    seqno: entry.seqno,
                    cost: entry.cost,
                    attempt,
                    payload: &mut entry.job.payload,
                },
                &ctx,
            );
            entry.state = match run {
                Ok(hw) => match hw.add_callback(&entry.job.hw_cb, waker) {
                    AddCallback::Signalled(result) => State::Finished(result),
                    // `Busy`: the node still sits on a lost hardware fence that is signalling;
                    // the run its wake-up causes queues the node (`collect_completions`), and
                    // the deadline below wakes the queue in any case.
                    r @ (AddCallback::Queued | AddCallback::Busy) => State::Running {
                        hw,
                        armed: r == AddCallback::Queued,
                        deadline: now.saturating_add(self.config.timeout()),
                        extensions: 0,
                        attempt,
                    },
                },
                Err(e) => State::Finished(Err(e)),
            };
            if matches!(entry.state, State::Finished(_)) {
                self.credits = self.credits.saturating_sub(entry.cost);
            }
        }
    }

    /// The error of the first dependency (in the order they were added) of the job at ring
    /// position `i` that is known to have failed: signalled with an error, or the done fence
    /// of an earlier job of this queue that finished with one.
    fn failed_dependency(&self, i: usize) -> Option<FenceError> {
        let e = slot_ref(&self.slots, self.head, i)?;
        let deps = e.job.deps.iter().take(e.job.n_deps);
        deps.filter_map(|d| d.dep.as_ref())
            .find_map(|dep| match dep.fence.status() {
                Some(r) => r.err(),
                None => (0..i).find_map(|k| {
                    let other = slot_ref(&self.slots, self.head, k)?;
                    match other.state {
                        State::Finished(Err(err)) if other.job.done.same_fence(&dep.fence) => {
                            Some(err)
                        }
                        _ => None,
                    }
                }),
            })
    }

    /// Whether `fence` is the done fence of a job of this queue that is on the ring (and whose
    /// hardware fence has not failed, even if the queue has not collected that yet) or has
    /// finished without an error. Newest first: a job usually depends on a recent one.
    fn on_ring(&self, fence: &B::Fence) -> bool {
        (0..self.started).rev().any(|i| {
            slot_ref(&self.slots, self.head, i).is_some_and(|e| {
                e.job.done.same_fence(fence)
                    && match &e.state {
                        State::Running { hw, .. } => !matches!(hw.status(), Some(Err(_))),
                        State::Finished(r) => r.is_ok(),
                        State::Waiting => false,
                    }
            })
        })
    }

    /// Tries to move the first waiting job onto the ring (or fail it on a dependency error).
    fn start_next(&mut self, now: Instant) -> bool {
        if self.started >= self.len {
            return false;
        }
        let waker = self.exec.waker();
        // The dependencies are waited for one at a time, in the order they were added: a
        // callback goes on the first one still pending, and only when it fires does the
        // queue look further (as `drm_sched` does). Dependencies on earlier jobs of the same
        // ring have usually signalled by then, so a job waiting for several of them arms one
        // callback instead of one each. With pipelining (`QueueConfig::with_pipelining`), a
        // dependency on the done fence of one of this queue's own jobs is met once that job
        // is on the ring, which runs jobs in order (again as `drm_sched` does for its own
        // fences); one whose job is known to have failed is waited for, so its error still
        // reaches this job.
        let mut looks = 0usize;
        let first_error = loop {
            let Some(entry) = slot_ref(&self.slots, self.head, self.started) else {
                return false;
            };
            // Each further look follows a dependency found signalled while arming it, so one
            // per dependency is enough; a fence that says it signalled but then reports itself
            // pending again is left to the next wake-up.
            looks += 1;
            if looks > job_deps(entry) + 1 {
                return false;
            }
            let job = &entry.job;
            let mut first_error: Option<(usize, FenceError)> = None;
            let mut pending = None;
            for (k, dep_slot) in job.deps.iter().take(job.n_deps).enumerate() {
                let Some(dep) = dep_slot.dep.as_ref() else {
                    continue;
                };
                match dep.fence.status() {
                    Some(Err(e)) if first_error.is_none() => first_error = Some((k, e)),
                    Some(_) => {}
                    None if self.config.pipelined() && self.on_ring(&dep.fence) => {}
                    None => {
                        pending = Some(k);
                        break;
                    }
                }
            }
            let Some(k) = pending else {
                break first_error;
            };
            let Some(entry) = slot(&mut self.slots, self.head, self.started) else {
                return false;
            };
            let Some(dep_slot) = entry.job.deps.get_mut(k) else {
                return false;
            };
            let Some(dep) = dep_slot.dep.as_mut() else {
                return false;
            };
            if dep.armed {
                return false;
            }
            match dep.fence.add_callback(&dep_slot.cb, waker) {
                AddCallback::Queued => {
                    dep.armed = true;
                    return false;
                }
                // It signalled in the meantime: look again.
                AddCallback::Signalled(_) => {}
                // A fresh node is never busy; if it were, later wake-ups still re-poll.
                AddCallback::Busy => return false,
            }
        };
        let Some(entry) = slot(&mut self.slots, self.head, self.started) else {
            return false;
        };
        let job = &mut entry.job;
        // The earliest error in the order the dependencies were added wins.
        let error = match (job.dep_error, first_error) {
            (Some((at, e)), Some((k, e2))) => Some(if k < at { e2 } else { e }),
            (Some((_, e)), None) | (None, Some((_, e))) => Some(e),
            (None, None) => None,
        };
        if let Some(e) = error {
            entry.state = State::Finished(Err(e));
            self.started += 1;
            return true;
        }
        if self.credits.saturating_add(entry.cost) > self.config.capacity() {
            return false;
        }
        let ctx = SignalCtx::new(now);
        let run = self.backend.run_job(
            RunJob {
                seqno: entry.seqno,
                cost: entry.cost,
                attempt: 0,
                payload: &mut entry.job.payload,
            },
            &ctx,
        );
        entry.state = match run {
            Ok(hw) => match hw.add_callback(&entry.job.hw_cb, waker) {
                AddCallback::Signalled(result) => State::Finished(result),
                r @ (AddCallback::Queued | AddCallback::Busy) => {
                    self.credits += entry.cost;
                    State::Running {
                        hw,
                        armed: r == AddCallback::Queued,
                        deadline: now.saturating_add(self.config.timeout()),
                        extensions: 0,
                        attempt: 0,
                    }
                }
            },
            Err(e) => State::Finished(Err(e)),
        };
        self.started += 1;
        true
    }
}

impl<'q, B: Backend, X: Executor, C: Clock, const N: usize> Reservation<'q, B, X, C, N> {
    /// Commits `job`: assigns its sequence number and publishes its done fence. Cannot fail.
    ///
    /// A job prepared against a larger capacity than this queue's completes with `EINVAL`
    /// (in order, without running) instead of being refused here.
    ///
    /// The executor is woken to run the queue, once per batch: commits that follow one
    /// another with no [`Queue::run`] between them wake it only the first time.
    pub fn commit(self, job: JobFor<B>) -> Committed<B::Fence> {
        let q = self.queue;
        let c = Self::insert(q, job);
        q.kick();
        c
    }

    /// Commits `job` and, when it can start right away, hands it to [`Backend::run_job`]
    /// before returning, without a round trip through the executor.
    ///
    /// It starts here when no earlier job is still waiting, every dependency has already
    /// signalled and its credits fit on the ring: what [`Queue::run`] would do next. Otherwise
    /// this is [`commit`](Self::commit). Completion, ordering, credits and timeouts are the
    /// same either way; the executor is woken as by `commit` (once per batch), and that run
    /// arms the job's timeout.
    ///
    /// `run_job` then runs in the caller's context, which must therefore be one where the
    /// fence-signalling rules hold (the kernel: inside the driver's signalling section, with
    /// only the locks `run_job` may be called under).
    pub fn commit_direct(self, job: JobFor<B>) -> Committed<B::Fence> {
        let q = self.queue;
        let c = Self::insert(q, job);
        if q.started + 1 != q.len {
            // Earlier jobs are waiting: this one goes in order behind them.
            q.kick();
            return c;
        }
        q.start_next(q.clock.now());
        // A run still follows (one per batch of commits): it arms the timeout of a job that
        // started here (some executors arm timers only after a run, as the kernel's runner
        // does), retires one that finished at once, or starts one that could not start yet.
        q.kick();
        c
    }

    /// Assigns the sequence number and puts the job in the next slot.
    fn insert(q: &mut Queue<B, X, C, N>, job: JobFor<B>) -> Committed<B::Fence> {
        let seqno = q.next_seqno;
        q.next_seqno = q.next_seqno.wrapping_add(1);
        let mut job = job;
        if q.config.check_cost(job.cost).is_err() {
            job.dep_error = Some((0, FenceError::INVALID));
        }
        job.done.set_seqno(seqno);
        let done = (*job.done).clone();
        let cost = job.cost;
        let idx = (q.head + q.len) % N;
        if let Some(s) = q.slots.get_mut(idx) {
            *s = Some(Entry {
                seqno,
                cost,
                job,
                state: State::Waiting,
            });
            q.len += 1;
        }
        Committed { seqno, done }
    }
}

impl<B: Backend, X: Executor, C: Clock, const N: usize> Drop for Queue<B, X, C, N> {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    extern crate std;

    use super::*;
    use crate::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
    use std::vec::Vec;

    struct Ring(Vec<HostFence>);

    impl Backend for Ring {
        type Fence = HostFence;
        type Alloc = HostAlloc;
        type Payload = usize;

        fn run_job(
            &mut self,
            _job: RunJob<'_, usize>,
            _ctx: &SignalCtx<'_>,
        ) -> Result<HostFence, FenceError> {
            let hw = HostFence::new();
            self.0.push(hw.clone());
            Ok(hw)
        }

        fn timed_out(
            &mut self,
            _job: TimedOutJob<'_, usize>,
            _ctx: &SignalCtx<'_>,
        ) -> TimeoutAction {
            TimeoutAction::Fail
        }
    }

    impl<B: Backend, X: Executor, C: Clock, const N: usize> Queue<B, X, C, N> {
        /// Checks the type invariants.
        fn check(&self) {
            assert!(self.started <= self.len && self.len <= N && self.head < N);
            let mut credits = 0;
            for i in 0..N {
                let in_use = (i + N - self.head) % N < self.len;
                assert_eq!(self.slots[i].is_some(), in_use, "slot {i}");
            }
            for i in 0..self.len {
                let e = slot_ref(&self.slots, self.head, i).unwrap();
                match e.state {
                    State::Waiting => assert!(i >= self.started),
                    State::Running { .. } => {
                        assert!(i < self.started);
                        credits += e.cost;
                    }
                    State::Finished(_) => assert!(i < self.started),
                }
            }
            assert_eq!(credits, self.credits);
            assert!(self.credits <= self.config.capacity());
        }
    }

    #[test]
    fn ring_wraps_around_and_keeps_its_invariants() {
        let exec = TestExecutor::new();
        let config = QueueConfig::new(3);
        let mut q: Queue<Ring, _, _, 3> =
            Queue::new(Ring(Vec::new()), exec.clone(), ManualClock::new(), config).unwrap();
        let alloc = HostAlloc::new();
        let mut done = Vec::new();
        for round in 0..10 {
            while let Ok(r) = q.reserve() {
                let job = PreparedJob::new(&alloc, &config, Cost(1), MaxDeps(0), round).unwrap();
                done.push(r.commit(job).done);
                q.check();
            }
            exec.run_until_idle(|| q.run());
            q.check();
            // Complete one or two jobs per round so the head moves by varying amounts.
            let ring = &mut q.backend_mut().0;
            let n = ring.len().min(1 + round % 2);
            for hw in ring.drain(..n) {
                hw.signal(Ok(()));
            }
            exec.run_until_idle(|| q.run());
            q.check();
        }
        assert!(done.len() > 10);
        drop(q);
        assert!(done
            .iter()
            .all(|d| d.status().is_some() && d.signal_calls() == 1));
    }

    #[test]
    fn dependencies_are_waited_for_one_at_a_time_in_order() {
        let exec = TestExecutor::new();
        let config = QueueConfig::new(4);
        let mut q: Queue<Ring, _, _, 4> =
            Queue::new(Ring(Vec::new()), exec.clone(), ManualClock::new(), config).unwrap();
        let alloc = HostAlloc::new();
        let deps: Vec<HostFence> = (0..4).map(|_| HostFence::new()).collect();
        let mut job = PreparedJob::new(&alloc, &config, Cost(1), MaxDeps(4), 0).unwrap();
        for d in &deps {
            job.add_dependency(d).unwrap();
        }
        let done = q.submit(job).unwrap().done;
        exec.run_until_idle(|| q.run());
        let queued = || {
            deps.iter()
                .map(HostFence::queued_callbacks)
                .collect::<Vec<_>>()
        };
        assert_eq!(queued(), [1, 0, 0, 0]);
        // Later dependencies signalling first arm nothing and start nothing.
        deps[2].signal(Err(FenceError::IO));
        deps[3].signal(Ok(()));
        exec.run_until_idle(|| q.run());
        assert_eq!(queued(), [1, 0, 0, 0]);
        // The first one fires: the queue moves on to the second, the only one still pending.
        deps[0].signal(Ok(()));
        exec.run_until_idle(|| q.run());
        assert_eq!(queued(), [0, 1, 0, 0]);
        assert!(q.backend().0.is_empty() && done.status().is_none());
        // The last pending one signals: the job ends, without running, with the error of the
        // earliest failed dependency in the order they were added (the second, not the third,
        // which failed first in time).
        deps[1].signal(Err(FenceError::CANCELED));
        exec.run_until_idle(|| q.run());
        assert_eq!(queued(), [0, 0, 0, 0]);
        assert_eq!(done.status(), Some(Err(FenceError::CANCELED)));
        assert!(q.backend().0.is_empty());
    }

    /// The host allocator, counting the calls made to it.
    #[derive(Default)]
    struct CountingAlloc {
        inner: HostAlloc,
        calls: core::cell::Cell<usize>,
    }

    impl Allocator<HostFence> for CountingAlloc {
        type DepTable = <HostAlloc as Allocator<HostFence>>::DepTable;

        fn try_new_fence(
            &self,
            token: &crate::AllocToken<'_>,
        ) -> Result<HostFence, crate::AllocError> {
            self.calls.set(self.calls.get() + 1);
            self.inner.try_new_fence(token)
        }

        fn try_new_callback(
            &self,
            token: &crate::AllocToken<'_>,
        ) -> Result<crate::host::HostCallback, crate::AllocError> {
            self.calls.set(self.calls.get() + 1);
            self.inner.try_new_callback(token)
        }

        fn try_new_dep_table(
            &self,
            token: &crate::AllocToken<'_>,
            len: usize,
        ) -> Result<Self::DepTable, crate::AllocError> {
            self.calls.set(self.calls.get() + 1);
            self.inner.try_new_dep_table(token, len)
        }
    }

    /// `Ring` over the counting allocator.
    struct CountingRing(Ring);

    impl Backend for CountingRing {
        type Fence = HostFence;
        type Alloc = CountingAlloc;
        type Payload = usize;

        fn run_job(
            &mut self,
            job: RunJob<'_, usize>,
            ctx: &SignalCtx<'_>,
        ) -> Result<HostFence, FenceError> {
            self.0.run_job(job, ctx)
        }

        fn timed_out(&mut self, job: TimedOutJob<'_, usize>, ctx: &SignalCtx<'_>) -> TimeoutAction {
            self.0.timed_out(job, ctx)
        }
    }

    /// Runs `jobs` jobs of `deps` dependencies each through `q`, up to `batch` at a time, and
    /// checks that at most one callback of a waiting job is queued at any time.
    fn run_jobs<const N: usize>(
        q: &mut Queue<CountingRing, TestExecutor, ManualClock, N>,
        exec: &TestExecutor,
        alloc: &CountingAlloc,
        jobs: usize,
        deps: usize,
        batch: usize,
    ) {
        let mut left = jobs;
        while left > 0 {
            let n = left.min(batch);
            left -= n;
            let mut fences = Vec::new();
            let mut done = Vec::new();
            for tag in 0..n {
                let mut job = q.prepare(alloc, Cost(1), MaxDeps(deps), tag).unwrap();
                for _ in 0..deps {
                    let f = HostFence::new();
                    job.add_dependency(&f).unwrap();
                    fences.push(f);
                }
                done.push(q.reserve().unwrap().commit(job).done);
            }
            exec.run_until_idle(|| q.run());
            // Signal the dependencies from the last to the first, the order that would arm
            // the most callbacks if the queue armed one per dependency.
            for f in fences.iter().rev() {
                let armed: usize = fences.iter().map(HostFence::queued_callbacks).sum();
                assert!(armed <= 1, "{armed} callbacks queued");
                f.signal(Ok(()));
                exec.run_until_idle(|| q.run());
            }
            for hw in q.backend_mut().0 .0.drain(..) {
                hw.signal(Ok(()));
            }
            exec.run_until_idle(|| q.run());
            assert_eq!(q.pending_jobs(), 0);
            assert!(done.iter().all(|d| d.status() == Some(Ok(()))));
        }
    }

    #[test]
    fn retired_jobs_memory_is_reused() {
        let exec = TestExecutor::new();
        let config = QueueConfig::new(4);
        let mut q: Queue<CountingRing, _, _, 4> = Queue::new(
            CountingRing(Ring(Vec::new())),
            exec.clone(),
            ManualClock::new(),
            config,
        )
        .unwrap();
        let alloc = CountingAlloc::default();
        // Warm-up: the first batch allocates (fence, node, table per job) ...
        run_jobs(&mut q, &exec, &alloc, 4, 3, 4);
        assert_eq!(alloc.calls.get(), 4 * 3);
        assert_eq!(q.kept_jobs(), 4);
        // ... and then nothing, however many jobs follow, with fewer dependencies too.
        alloc.calls.set(0);
        run_jobs(&mut q, &exec, &alloc, 200, 3, 4);
        run_jobs(&mut q, &exec, &alloc, 50, 1, 3);
        run_jobs(&mut q, &exec, &alloc, 50, 0, 1);
        assert_eq!(alloc.calls.get(), 0);
        // More dependencies than the kept tables hold: a new table, the rest reused.
        run_jobs(&mut q, &exec, &alloc, 1, 5, 1);
        assert_eq!(alloc.calls.get(), 1);
        // A done fence still held by someone is not reused: a new one is allocated.
        let job = q.prepare(&alloc, Cost(1), MaxDeps(0), 0).unwrap();
        let held = q.reserve().unwrap().commit(job).done;
        exec.run_until_idle(|| q.run());
        q.backend_mut().0 .0.pop().unwrap().signal(Ok(()));
        exec.run_until_idle(|| q.run());
        let before = alloc.calls.get();
        let job = q.prepare(&alloc, Cost(1), MaxDeps(0), 0).unwrap();
        assert_eq!(alloc.calls.get(), before + 1);
        assert!(!job.done_fence().ptr_eq(&held));
        assert_eq!(held.status(), Some(Ok(())));
    }

    #[test]
    fn reserved_memory_serves_the_first_jobs() {
        let exec = TestExecutor::new();
        let config = QueueConfig::new(8);
        let mut q: Queue<CountingRing, _, _, 8> = Queue::new(
            CountingRing(Ring(Vec::new())),
            exec.clone(),
            ManualClock::new(),
            config,
        )
        .unwrap();
        let alloc = CountingAlloc::default();
        q.reserve_memory(&alloc, 100, MaxDeps(2)).unwrap();
        // Capped at the queue's size.
        assert_eq!(q.kept_jobs(), 8);
        assert_eq!(alloc.calls.get(), 8 * 3);
        alloc.calls.set(0);
        run_jobs(&mut q, &exec, &alloc, 64, 2, 8);
        assert_eq!(alloc.calls.get(), 0);
        // Out of memory while reserving is an error, not an abort; what was made stays.
        let mut q: Queue<CountingRing, _, _, 8> = Queue::new(
            CountingRing(Ring(Vec::new())),
            exec.clone(),
            ManualClock::new(),
            config,
        )
        .unwrap();
        let failing = CountingAlloc {
            inner: HostAlloc::failing_after(7),
            calls: Default::default(),
        };
        assert_eq!(
            q.reserve_memory(&failing, 4, MaxDeps(1)),
            Err(Error::NoMemory)
        );
        assert_eq!(q.kept_jobs(), 1);
        let r = q.prepare(&failing, Cost(1), MaxDeps(0), 9);
        assert!(r.is_ok(), "the kept job's memory needs no allocation");
        let r = q.prepare(&failing, Cost(1), MaxDeps(0), 9);
        let rejected = r.err().unwrap();
        assert_eq!((rejected.error, rejected.value), (Error::NoMemory, 9));
    }

    #[test]
    fn one_dependency_per_timeline() {
        let exec = TestExecutor::new();
        let config = QueueConfig::new(4);
        let mut q: Queue<Ring, _, _, 4> =
            Queue::new(Ring(Vec::new()), exec.clone(), ManualClock::new(), config).unwrap();
        let alloc = HostAlloc::new();
        let on = |seqno| {
            let f = HostFence::on_timeline(1_000_000);
            f.set_seqno(seqno);
            f
        };
        let (f3, f5, f4) = (on(3), on(5), on(4));
        let other = HostFence::on_timeline(1_000_001);
        other.set_seqno(1);
        let mut job = PreparedJob::new(&alloc, &config, Cost(1), MaxDeps(2), 0).unwrap();
        job.add_dependency(&f3).unwrap();
        // The later fence of the timeline takes the earlier one's slot; an earlier one adds
        // nothing.
        job.add_dependency(&f5).unwrap();
        job.add_dependency(&f4).unwrap();
        job.add_dependency(&f5).unwrap();
        assert_eq!(job.pending_dependencies(), 1);
        job.add_dependency(&other).unwrap();
        assert_eq!(job.pending_dependencies(), 2);
        // Fences with no place on a timeline each take a slot.
        assert_eq!(
            job.add_dependency(&HostFence::new()),
            Err(Error::TooManyDependencies)
        );
        let done = q.submit(job).unwrap().done;
        exec.run_until_idle(|| q.run());
        // It waits for `f5` (and `other`), not for `f3` or `f4`.
        assert_eq!(f3.queued_callbacks() + f4.queued_callbacks(), 0);
        assert_eq!(f5.queued_callbacks(), 1);
        f5.signal(Ok(()));
        exec.run_until_idle(|| q.run());
        assert_eq!(other.queued_callbacks(), 1);
        other.signal(Ok(()));
        exec.run_until_idle(|| q.run());
        assert_eq!(q.backend().0.len(), 1);
        q.backend_mut().0.pop().unwrap().signal(Ok(()));
        exec.run_until_idle(|| q.run());
        assert_eq!(done.status(), Some(Ok(())));
    }

    #[test]
    fn a_job_of_a_dropped_prepared_job_is_canceled_without_running() {
        let exec = TestExecutor::new();
        let config = QueueConfig::new(4);
        let mut q: Queue<Ring, _, _, 4> =
            Queue::new(Ring(Vec::new()), exec.clone(), ManualClock::new(), config).unwrap();
        let alloc = HostAlloc::new();
        let first = PreparedJob::new(&alloc, &config, Cost(1), MaxDeps(0), 1).unwrap();
        let mut second = PreparedJob::new(&alloc, &config, Cost(1), MaxDeps(1), 2).unwrap();
        second.add_dependency(first.done_fence()).unwrap();
        let first_done = first.done_fence().clone();
        // The submission fails between preparing and committing: the first job is dropped.
        drop(first);
        assert_eq!(first_done.status(), Some(Err(FenceError::CANCELED)));
        assert_eq!(first_done.signal_calls(), 1);
        let done = q.submit(second).unwrap().done;
        exec.run_until_idle(|| q.run());
        assert_eq!(done.status(), Some(Err(FenceError::CANCELED)));
        assert!(q.backend().0.is_empty());
    }
}
