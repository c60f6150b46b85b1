// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Commit consumes the prepared job: it cannot be changed or committed again afterwards.

use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
use jobqueue::{Cost, MaxDeps, 
    Backend, FenceError, PreparedJob, Queue, QueueConfig, RunJob, SignalCtx, TimedOutJob,
    TimeoutAction,
};

struct Ring;

impl Backend for Ring {
    type Fence = HostFence;
    type Alloc = HostAlloc;
    type Payload = ();

    fn run_job(&mut self, _job: RunJob<'_, ()>, _ctx: &SignalCtx<'_>) -> Result<HostFence, FenceError> {
        Ok(HostFence::new())
    }

    fn timed_out(&mut self, _job: TimedOutJob<'_, ()>, _ctx: &SignalCtx<'_>) -> TimeoutAction {
        TimeoutAction::Fail
    }
}

fn main() {
    let config = QueueConfig::new(4);
    let mut q: Queue<Ring, _, _, 4> =
        Queue::new(Ring, TestExecutor::new(), ManualClock::new(), config).unwrap();
    let mut job = PreparedJob::new(&HostAlloc::new(), &config, Cost(1), MaxDeps(1), ()).unwrap();
    q.reserve().unwrap().commit(job);
    job.add_dependency(&HostFence::new()).unwrap();
}
