// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What every queue of the driver shares: the scheduler's clock, the number of job slots and
//! the job timeout, and the job fence as a syncobj holds it.
//!
//! GPU queues (`sched`) and bind queues (`bindq`), on the floors above, are both `jobqueue`
//! queues of [`JOB_SLOTS`] jobs on the backend's clock, and both publish their jobs' done
//! fences to syncobjs as [`JobSyncFence`], so that userspace orders binds and GPU jobs with
//! the same syncobjs.

use core::any::Any;
use core::task::Waker;
use core::time::Duration;

use drm_ctx::host::syncobj::{FenceRef, Registration, SignalledFence, SyncFence};
use jobqueue::host::HostFence;
use jobqueue::Fence as _;
use register::io::poll::PollClock;

use crate::{Error, Result};

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

/// A job fence as a syncobj holds it.
#[derive(Clone, Debug)]
pub struct JobSyncFence(pub HostFence);

impl SyncFence for JobSyncFence {
    fn status(&self) -> Option<core::result::Result<(), i32>> {
        self.0.status().map(|r| r.map_err(|e| e.to_errno()))
    }

    fn wake_on_signal(&self, waker: &Waker) -> Registration {
        let cb = HostFence::new_callback();
        match self.0.add_callback(&cb, waker) {
            jobqueue::AddCallback::Queued => {
                let fence = self.0.clone();
                Registration::new(move || {
                    fence.remove_callback(&cb);
                })
            }
            // A fresh node is never busy: the fence has signalled.
            jobqueue::AddCallback::Signalled(_) | jobqueue::AddCallback::Busy => {
                waker.wake_by_ref();
                Registration::done()
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The job fence behind a syncobj's fence ([`Error::Invalid`] for a foreign one).
pub(crate) fn job_fence(f: &FenceRef) -> Result<HostFence> {
    let any = f.as_any();
    if let Some(j) = any.downcast_ref::<JobSyncFence>() {
        return Ok(j.0.clone());
    }
    if any.downcast_ref::<SignalledFence>().is_some() {
        return Ok(HostFence::signalled(Ok(())));
    }
    Err(Error::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobqueue::SignalFence as _;

    #[test]
    fn a_syncobj_waiter_that_gives_up_leaves_nothing_on_the_job_fence() {
        let hw = HostFence::new();
        let fence = JobSyncFence(hw.clone());
        // A waiter polling a long job: each poll queues a callback and takes it back.
        for _ in 0..10 {
            let r = fence.wake_on_signal(Waker::noop());
            assert_eq!(hw.queued_callbacks(), 1);
            drop(r);
            assert_eq!(hw.queued_callbacks(), 0);
        }
        // Once the job is done the waiter is woken at once and nothing is queued.
        let kept = fence.wake_on_signal(Waker::noop());
        assert!(hw.signal(Ok(())));
        assert_eq!(hw.queued_callbacks(), 0);
        drop(kept);
        let late = fence.wake_on_signal(Waker::noop());
        assert_eq!(hw.queued_callbacks(), 0);
        drop(late);
        assert_eq!(fence.status(), Some(Ok(())));
    }
}
