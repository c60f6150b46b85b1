// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Jobs and the first, fallible half of submission.
//!
//! Submitting a job is split in two, as in the kernel's scheduler (`drm_sched_job_init` then
//! `drm_sched_job_arm`/`drm_sched_entity_push_job`):
//!
//! 1. **Prepare** ([`PreparedJob::new`] or [`Queue::prepare`](crate::Queue::prepare), then
//!    [`PreparedJob::add_dependency`]): may fail, may sleep, and obtains all the memory the job
//!    will ever need: its done fence, a slot for each dependency and a callback node per slot,
//!    and the callback node for the hardware fence (`PreparedJob::new` allocates them;
//!    `Queue::prepare` reuses those of a retired job where it can). Nothing is visible to
//!    anyone yet; dropping the prepared job undoes everything.
//! 2. **Commit** ([`Reservation::commit`](crate::Reservation::commit)): cannot fail, assigns the
//!    sequence number, and publishes the done fence. From here on, the job only moves through
//!    memory it already owns.
//!
//! A job's done fence is only handed out at commit. A job can therefore depend only on jobs
//! committed before it, so dependencies never form a cycle.

use core::time::Duration;

use crate::error::{Error, FenceError};
use crate::fence::SignalFence;
use crate::mem::{AllocError, AllocToken, Allocator, Dependency};

/// Static parameters of a queue.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use jobqueue::QueueConfig;
///
/// let config = QueueConfig::new(64)
///     .with_timeout(Duration::from_millis(500))
///     .with_max_extensions(2);
/// assert_eq!(config.capacity(), 64);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    capacity: u32,
    timeout: Duration,
    max_extensions: u32,
    pipelined: bool,
}

impl QueueConfig {
    /// A queue whose ring holds `capacity` credits, with a 1 s job timeout and up to 3
    /// extensions.
    pub const fn new(capacity: u32) -> Self {
        QueueConfig {
            capacity,
            timeout: Duration::from_secs(1),
            max_extensions: 3,
            pipelined: false,
        }
    }

    /// Sets how long a job may run on the ring before the timeout handler is called.
    pub const fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets how often a timeout handler may extend one run of a job before the job fails.
    ///
    /// This bound is what keeps a driver that always extends from leaving a done fence pending
    /// forever.
    pub const fn with_max_extensions(mut self, max_extensions: u32) -> Self {
        self.max_extensions = max_extensions;
        self
    }

    /// Sets whether a dependency on the done fence of an earlier job of the same queue is met
    /// as soon as that job is on the ring (`true`), or only when its done fence signals (the
    /// default).
    ///
    /// Turn it on for a ring that runs its jobs strictly one after the other (a CSF queue whose
    /// jobs each end by waiting for their own work, as panthor's do): a job behind its
    /// dependency on that ring cannot overtake it, so waiting for the done fence only leaves
    /// the ring idle between the two. `drm_sched` does the same for fences of its own
    /// scheduler. A job on the ring whose dependency then fails before it completes is not
    /// run again after a reset: it fails with the dependency's error.
    pub const fn with_pipelining(mut self, pipelined: bool) -> Self {
        self.pipelined = pipelined;
        self
    }

    /// Whether dependencies on this queue's own jobs are met once those are on the ring.
    pub const fn pipelined(&self) -> bool {
        self.pipelined
    }

    /// Total credits of the ring.
    pub const fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The per-job timeout.
    pub const fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The maximum number of extensions per run of a job.
    pub const fn max_extensions(&self) -> u32 {
        self.max_extensions
    }

    /// Checks `cost` against this configuration.
    pub fn check_cost(&self, cost: u32) -> Result<(), Error> {
        if cost == 0 {
            Err(Error::ZeroCost)
        } else if cost > self.capacity {
            Err(Error::CostTooHigh {
                cost,
                capacity: self.capacity,
            })
        } else {
            Ok(())
        }
    }
}

/// A job's cost: the credits of the ring it occupies while it runs (see [`QueueConfig::new`]).
///
/// A type of its own, like [`MaxDeps`], so that [`PreparedJob::new`]'s two numbers cannot be
/// swapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cost(pub u32);

/// How many pending dependencies a job has room for ([`PreparedJob::add_dependency`] fails
/// beyond that; dependencies already signalled take no room, nor do those on the timeline of
/// one already added).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MaxDeps(pub usize);

/// A job that was refused, handed back with its payload so nothing is lost.
///
/// It displays as its error and converts into it, so `?` works where the value is not needed:
///
/// ```
/// use jobqueue::host::{HostAlloc, HostFence};
/// use jobqueue::{Error, PreparedJob, QueueConfig};
/// use jobqueue::{Cost, MaxDeps};
///
/// fn prepare(alloc: &HostAlloc) -> Result<PreparedJob<HostFence, HostAlloc, u32>, Error> {
///     // Five credits on a ring of four: refused, and `?` keeps the error.
///     Ok(PreparedJob::new(alloc, &QueueConfig::new(4), Cost(5), MaxDeps(0), 7)?)
/// }
///
/// let e = prepare(&HostAlloc::new()).err();
/// assert_eq!(e, Some(Error::CostTooHigh { cost: 5, capacity: 4 }));
/// ```
#[derive(Debug)]
pub struct Rejected<T> {
    /// Why it was refused.
    pub error: Error,
    /// What was handed in.
    pub value: T,
}

impl<T> core::fmt::Display for Rejected<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        write!(f, "refused: {}", self.error)
    }
}

impl<T: core::fmt::Debug> core::error::Error for Rejected<T> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<T> From<Rejected<T>> for Error {
    fn from(r: Rejected<T>) -> Self {
        r.error
    }
}

/// A job's done fence while the job is owned by the crate: if the job is dropped before its
/// fence signalled (a prepared job that is never committed, an entry freed by teardown), the
/// fence signals `ECANCELED`, so nobody who took a reference to it waits forever.
pub(crate) struct DoneFence<F: SignalFence>(pub(crate) F);

impl<F: SignalFence> core::ops::Deref for DoneFence<F> {
    type Target = F;

    fn deref(&self) -> &F {
        &self.0
    }
}

impl<F: SignalFence> Drop for DoneFence<F> {
    fn drop(&mut self) {
        if !self.0.is_signalled() {
            self.0.signal(Err(FenceError::CANCELED));
        }
    }
}

/// The memory of one job apart from its payload: done fence, callback node for the hardware
/// fence, dependency slots. A queue keeps those of retired jobs for the jobs it prepares next
/// ([`Queue::prepare`](crate::Queue::prepare)).
pub(crate) struct JobParts<F: SignalFence, A: Allocator<F>> {
    pub(crate) done: DoneFence<F>,
    pub(crate) hw_cb: F::Callback,
    pub(crate) deps: A::DepTable,
}

impl<F: SignalFence, A: Allocator<F>> JobParts<F, A> {
    /// Allocates the parts of a job with room for `max_deps` dependencies.
    pub(crate) fn alloc(alloc: &A, max_deps: usize) -> Result<Self, AllocError> {
        AllocToken::scope(|token| {
            let done = DoneFence(alloc.try_new_fence(token)?);
            let hw_cb = alloc.try_new_callback(token)?;
            let deps = alloc.try_new_dep_table(token, max_deps)?;
            Ok(JobParts { done, hw_cb, deps })
        })
    }

    /// Allocates a new done fence in place of the current one.
    pub(crate) fn renew_fence(&mut self, alloc: &A) -> Result<(), AllocError> {
        let done = AllocToken::scope(|token| alloc.try_new_fence(token))?;
        self.done = DoneFence(done);
        Ok(())
    }

    /// Allocates a new table of `max_deps` dependency slots in place of the current one.
    pub(crate) fn renew_deps(&mut self, alloc: &A, max_deps: usize) -> Result<(), AllocError> {
        self.deps = AllocToken::scope(|token| alloc.try_new_dep_table(token, max_deps))?;
        Ok(())
    }
}

/// A fully allocated job that has not been committed yet.
///
/// Dropping it releases everything it allocated. Its done fence, which later jobs of the same
/// submission may already wait for, then signals `ECANCELED`.
pub struct PreparedJob<F: SignalFence, A: Allocator<F>, P> {
    pub(crate) cost: u32,
    pub(crate) payload: P,
    pub(crate) done: DoneFence<F>,
    pub(crate) hw_cb: F::Callback,
    /// At least `max_deps` slots: a recycled table may be longer.
    pub(crate) deps: A::DepTable,
    pub(crate) max_deps: usize,
    pub(crate) n_deps: usize,
    /// The first dependency error seen while adding dependencies, with the number of slots
    /// that were in use at that time (so the order of errors follows the order of addition).
    pub(crate) dep_error: Option<(usize, FenceError)>,
}

impl<F: SignalFence, A: Allocator<F>, P> PreparedJob<F, A, P> {
    /// Prepares a job of `cost` credits with room for `max_deps` pending dependencies.
    ///
    /// All memory the job needs is allocated here. A cost of zero or above the capacity of
    /// `config` is refused, as is any allocation failure; the payload is handed back then.
    ///
    /// # Examples
    ///
    /// ```
    /// use jobqueue::host::{HostAlloc, HostFence};
    /// use jobqueue::{Cost, Error, MaxDeps, PreparedJob, QueueConfig};
    ///
    /// let alloc = HostAlloc::new();
    /// let config = QueueConfig::new(4);
    /// let r = PreparedJob::<HostFence, HostAlloc, &str>::new(&alloc, &config, Cost(5), MaxDeps(0), "big");
    /// let rejected = r.err().unwrap();
    /// assert_eq!(rejected.error, Error::CostTooHigh { cost: 5, capacity: 4 });
    /// assert_eq!(rejected.value, "big");
    /// ```
    pub fn new(
        alloc: &A,
        config: &QueueConfig,
        Cost(cost): Cost,
        MaxDeps(max_deps): MaxDeps,
        payload: P,
    ) -> Result<Self, Rejected<P>> {
        if let Err(error) = config.check_cost(cost) {
            return Err(Rejected {
                error,
                value: payload,
            });
        }
        match JobParts::alloc(alloc, max_deps) {
            Ok(parts) => Ok(Self::from_parts(parts, cost, max_deps, payload)),
            Err(AllocError) => Err(Rejected {
                error: Error::NoMemory,
                value: payload,
            }),
        }
    }

    /// A job made of `parts`, whose table has at least `max_deps` empty slots.
    pub(crate) fn from_parts(
        parts: JobParts<F, A>,
        cost: u32,
        max_deps: usize,
        payload: P,
    ) -> Self {
        PreparedJob {
            cost,
            payload,
            done: parts.done,
            hw_cb: parts.hw_cb,
            deps: parts.deps,
            max_deps,
            n_deps: 0,
            dep_error: None,
        }
    }

    /// Takes the job apart: its parts, emptied for another job, and its payload.
    pub(crate) fn into_parts(self) -> (JobParts<F, A>, P) {
        let PreparedJob {
            payload,
            done,
            hw_cb,
            mut deps,
            n_deps,
            ..
        } = self;
        for slot in deps.iter_mut().take(n_deps) {
            slot.clear();
        }
        (JobParts { done, hw_cb, deps }, payload)
    }

    /// The fence that signals when the job completes (its done fence).
    ///
    /// It exists from preparation on, so that later jobs of the same submission can depend on
    /// this one before anything is committed. It signals once the job has been committed and
    /// has finished, or with `ECANCELED` when the prepared job is dropped instead. Publish it
    /// outside the driver (a syncobj, a `dma_resv`) only after the commit, which gives it its
    /// place on the queue's timeline.
    ///
    /// # Examples
    ///
    /// ```
    /// use jobqueue::host::{HostAlloc, HostFence};
    /// use jobqueue::{Fence, FenceError, PreparedJob, QueueConfig};
    /// use jobqueue::{Cost, MaxDeps};
    ///
    /// let job = PreparedJob::<HostFence, HostAlloc, ()>::new(
    ///     &HostAlloc::new(), &QueueConfig::new(4), Cost(1), MaxDeps(0), ()).unwrap();
    /// let done = job.done_fence().clone();
    /// drop(job);
    /// assert_eq!(done.status(), Some(Err(FenceError::CANCELED)));
    /// ```
    pub fn done_fence(&self) -> &F {
        &self.done
    }

    /// Makes the job wait for `fence`.
    ///
    /// A fence that already signalled successfully needs no slot. One that already signalled
    /// with an error needs none either: the job will fail with that error (unless a dependency
    /// added earlier fails too) and never reach the ring. A pending fence on the
    /// [timeline](crate::Fence::timeline) of a pending dependency already added needs none:
    /// the later of the two on that timeline is kept, in the earlier one's slot (as
    /// `drm_sched_job_add_dependency` does). Any other pending fence takes a slot; when all
    /// slots are in use this fails with [`Error::TooManyDependencies`] and changes nothing.
    ///
    /// # Examples
    ///
    /// ```
    /// use jobqueue::host::{HostAlloc, HostFence};
    /// use jobqueue::{Error, PreparedJob, QueueConfig};
    /// use jobqueue::{Cost, MaxDeps};
    ///
    /// let alloc = HostAlloc::new();
    /// let mut job =
    ///     PreparedJob::<HostFence, HostAlloc, ()>::new(&alloc, &QueueConfig::new(4), Cost(1), MaxDeps(1), ())
    ///         .unwrap();
    /// job.add_dependency(&HostFence::new()).unwrap();
    /// assert_eq!(job.add_dependency(&HostFence::new()), Err(Error::TooManyDependencies));
    /// assert_eq!(job.pending_dependencies(), 1);
    /// ```
    pub fn add_dependency(&mut self, fence: &F) -> Result<(), Error> {
        match fence.status() {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => {
                if self.dep_error.is_none() {
                    self.dep_error = Some((self.n_deps, e));
                }
                Ok(())
            }
            None => {
                if let Some((context, seqno)) = fence.timeline() {
                    let same_timeline = self.deps.iter_mut().take(self.n_deps).find_map(|s| {
                        let dep = s.dep.as_mut()?;
                        let (c, s) = dep.fence.timeline()?;
                        (c == context).then_some((dep, s))
                    });
                    if let Some((dep, known)) = same_timeline {
                        if seqno > known {
                            dep.fence = fence.clone();
                        }
                        return Ok(());
                    }
                }
                if self.n_deps >= self.max_deps {
                    return Err(Error::TooManyDependencies);
                }
                let slot = self
                    .deps
                    .get_mut(self.n_deps)
                    .ok_or(Error::TooManyDependencies)?;
                slot.dep = Some(Dependency {
                    fence: fence.clone(),
                    armed: false,
                });
                self.n_deps += 1;
                Ok(())
            }
        }
    }

    /// The number of dependency slots in use.
    pub fn pending_dependencies(&self) -> usize {
        self.n_deps
    }

    /// The job's cost in credits.
    pub fn cost(&self) -> u32 {
        self.cost
    }

    /// The driver payload.
    pub fn payload(&self) -> &P {
        &self.payload
    }

    /// The driver payload, mutably.
    pub fn payload_mut(&mut self) -> &mut P {
        &mut self.payload
    }

    /// Gives the payload back, releasing everything else.
    pub fn into_payload(self) -> P {
        self.payload
    }
}

impl<F: SignalFence, A: Allocator<F>, P: core::fmt::Debug> core::fmt::Debug
    for PreparedJob<F, A, P>
{
    fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
        f.debug_struct("PreparedJob")
            .field("cost", &self.cost)
            .field("payload", &self.payload)
            .field("pending_dependencies", &self.n_deps)
            .finish_non_exhaustive()
    }
}

/// What commit hands back: the job's sequence number and its now public done fence.
#[derive(Clone, Debug)]
pub struct Committed<F> {
    /// Sequence number, starting at 1 and increasing by one per commit.
    pub seqno: u64,
    /// Signals once the job has completed, failed or been canceled.
    pub done: F,
}
