// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What every queue of the driver shares: the scheduler's clock, the number of job slots and
//! the job timeout, and the job fence as a syncobj holds it.
//!
//! GPU queues (`sched`) and bind queues (`bindq`), on the floors above, are both `jobqueue`
//! queues of [`JOB_SLOTS`] jobs on the clock of the driver's deadlines
//! ([`Backend::timer_clock`](crate::backend::Backend::timer_clock)) with the backend's fences
//! ([`Backend::Fence`](crate::backend::Backend::Fence)), and both publish their jobs' done
//! fences to syncobjs through the backend
//! ([`Backend::syncobj_fence`](crate::backend::Backend::syncobj_fence)), so that userspace
//! orders binds and GPU jobs with the same syncobjs.

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
