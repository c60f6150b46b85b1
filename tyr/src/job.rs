// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What every queue of the driver shares: the scheduler's clock, the number of job slots and
//! the job timeout, the job fence as a syncobj holds it, and where submitted jobs' time goes
//! ([`SubmitProfile`]).
//!
//! GPU queues (`sched`) and bind queues (`bindq`), on the floors above, are both `jobqueue`
//! queues of [`JOB_SLOTS`] jobs on the clock of the driver's deadlines
//! ([`Backend::timer_clock`](crate::backend::Backend::timer_clock)) with the backend's fences
//! ([`Backend::Fence`](crate::backend::Backend::Fence)), and both publish their jobs' done
//! fences to syncobjs through the backend
//! ([`Backend::syncobj_fence`](crate::backend::Backend::syncobj_fence)), so that userspace
//! orders binds and GPU jobs with the same syncobjs.

use core::sync::atomic::{AtomicU64, Ordering};
use core::time::Duration;

use register::io::poll::PollClock;

/// Job slots of one queue (jobs committed and not yet retired).
pub const JOB_SLOTS: usize = 64;
/// How long a queue may go without progress before its job times out: panthor's
/// `JOB_TIMEOUT_MS`, 5 s, measured as panthor measures it, on the kernel's clock
/// ([`Backend::timer_clock`](crate::backend::Backend::timer_clock): real time, never the
/// simulated GPU's), from the later of the job reaching the ring and the queue's last
/// completed job, and only while the group may run (see `sched`'s `GroupState::timeout_clock`).
pub const JOB_TIMEOUT: Duration = Duration::from_millis(5000);

/// The scheduler's clock: the clock of the driver's deadlines
/// ([`Backend::timer_clock`](crate::backend::Backend::timer_clock)), in nanoseconds.
#[derive(Clone, Debug)]
pub struct SchedClock<C>(pub C);

impl<C: PollClock> jobqueue::Clock for SchedClock<C> {
    fn now(&self) -> jobqueue::Instant {
        jobqueue::Instant::from_duration(self.0.now())
    }
}

/// Where submitted jobs' time goes, summed since the device was probed: nanoseconds on the
/// clock of the driver's deadlines, added with relaxed atomics (no lock, nothing allocated).
///
/// `GROUP_SUBMIT`'s own stages are counted per call; a job's later stages per job:
///
/// | stage | from | to |
/// |---|---|---|
/// | decode | the ioctl's entry | its arguments copied in and checked |
/// | prepare | then | every job prepared (syncobjs resolved, dependencies added, signals set) |
/// | commit | then | the jobs on their queues, the syncobjs updated, the work item woken |
/// | hand-off | a job on its queue | the work item running it (its dependencies met) |
/// | ring | `run_job`'s start | the job on the ring and the doorbell rung |
/// | GPU | the doorbell | the interrupt handler seeing the job complete |
///
/// What is left of a client's wait (the fence's signal reaching the waiter) is the client's to
/// measure: the demo prints it as the rest of its per-job time.
#[derive(Debug, Default)]
pub struct SubmitProfile {
    calls: AtomicU64,
    decode: AtomicU64,
    prepare: AtomicU64,
    commit: AtomicU64,
    runs: AtomicU64,
    handoff: AtomicU64,
    ring: AtomicU64,
    done: AtomicU64,
    gpu: AtomicU64,
}

/// A reading of a [`SubmitProfile`]: counts and summed nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubmitTimes {
    /// `GROUP_SUBMIT` calls that committed their jobs.
    pub calls: u64,
    /// Their decode, prepare and commit stages.
    pub decode_ns: u64,
    /// See [`SubmitProfile`].
    pub prepare_ns: u64,
    /// See [`SubmitProfile`].
    pub commit_ns: u64,
    /// Jobs the work item wrote to a ring.
    pub runs: u64,
    /// Their hand-off and ring stages.
    pub handoff_ns: u64,
    /// See [`SubmitProfile`].
    pub ring_ns: u64,
    /// Jobs seen complete by the interrupt handler.
    pub done: u64,
    /// Their GPU stage.
    pub gpu_ns: u64,
}

impl SubmitTimes {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &SubmitTimes) -> SubmitTimes {
        SubmitTimes {
            calls: self.calls.wrapping_sub(earlier.calls),
            decode_ns: self.decode_ns.wrapping_sub(earlier.decode_ns),
            prepare_ns: self.prepare_ns.wrapping_sub(earlier.prepare_ns),
            commit_ns: self.commit_ns.wrapping_sub(earlier.commit_ns),
            runs: self.runs.wrapping_sub(earlier.runs),
            handoff_ns: self.handoff_ns.wrapping_sub(earlier.handoff_ns),
            ring_ns: self.ring_ns.wrapping_sub(earlier.ring_ns),
            done: self.done.wrapping_sub(earlier.done),
            gpu_ns: self.gpu_ns.wrapping_sub(earlier.gpu_ns),
        }
    }

    /// Mean nanoseconds of `sum` over `count` (0 for none).
    pub fn mean(sum: u64, count: u64) -> u64 {
        sum.checked_div(count).unwrap_or(0)
    }
}

impl SubmitProfile {
    /// A `GROUP_SUBMIT` call's stages.
    pub fn add_call(&self, decode: u64, prepare: u64, commit: u64) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.decode.fetch_add(decode, Ordering::Relaxed);
        self.prepare.fetch_add(prepare, Ordering::Relaxed);
        self.commit.fetch_add(commit, Ordering::Relaxed);
    }

    /// A job's hand-off and ring stages.
    pub fn add_run(&self, handoff: u64, ring: u64) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.handoff.fetch_add(handoff, Ordering::Relaxed);
        self.ring.fetch_add(ring, Ordering::Relaxed);
    }

    /// `jobs` jobs seen complete, their GPU stages summing to `gpu`.
    pub fn add_done(&self, jobs: u64, gpu: u64) {
        self.done.fetch_add(jobs, Ordering::Relaxed);
        self.gpu.fetch_add(gpu, Ordering::Relaxed);
    }

    /// The sums so far.
    pub fn read(&self) -> SubmitTimes {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SubmitTimes {
            calls: r(&self.calls),
            decode_ns: r(&self.decode),
            prepare_ns: r(&self.prepare),
            commit_ns: r(&self.commit),
            runs: r(&self.runs),
            handoff_ns: r(&self.handoff),
            ring_ns: r(&self.ring),
            done: r(&self.done),
            gpu_ns: r(&self.gpu),
        }
    }
}
