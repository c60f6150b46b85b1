// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A job on its way to the ring cannot gain dependencies (that would need new slots).

use jobqueue::host::{HostAlloc, HostFence};
use jobqueue::{
    Backend, FenceError, RunJob, SignalCtx, TimedOutJob, TimeoutAction,
};

struct Ring {
    extra: HostFence,
}

impl Backend for Ring {
    type Fence = HostFence;
    type Alloc = HostAlloc;
    type Payload = ();

    fn run_job(&mut self, job: RunJob<'_, ()>, _ctx: &SignalCtx<'_>) -> Result<HostFence, FenceError> {
        job.add_dependency(&self.extra).map_err(|_| FenceError::IO)?;
        Ok(HostFence::new())
    }

    fn timed_out(&mut self, _job: TimedOutJob<'_, ()>, _ctx: &SignalCtx<'_>) -> TimeoutAction {
        TimeoutAction::Fail
    }
}

fn main() {}
