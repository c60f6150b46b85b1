// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What every queue of the driver shares: the scheduler's clock, the number of job slots and
//! the job timeout, and the job fence as a syncobj holds it.
//!
//! GPU queues (`sched`) and bind queues (`bindq`), on the floors above, are both `jobqueue`
//! queues of [`JOB_SLOTS`] jobs on the backend's clock with the backend's fences
//! ([`Backend::Fence`](crate::backend::Backend::Fence)), and both publish their jobs' done
//! fences to syncobjs through the backend
//! ([`Backend::syncobj_fence`](crate::backend::Backend::syncobj_fence)), so that userspace
//! orders binds and GPU jobs with the same syncobjs.

use core::time::Duration;

use register::io::poll::PollClock;

/// Job slots of one queue (jobs committed and not yet retired).
pub const JOB_SLOTS: usize = 64;
/// How long a job may stay on the ring before it times out (GPU time).
pub const JOB_TIMEOUT: Duration = Duration::from_millis(500);

/// The scheduler's clock: the backend's, in nanoseconds.
#[derive(Clone, Debug)]
pub struct SchedClock<C>(pub C);

impl<C: PollClock> jobqueue::Clock for SchedClock<C> {
    fn now(&self) -> jobqueue::Instant {
        jobqueue::Instant::from_duration(self.0.now())
    }
}
