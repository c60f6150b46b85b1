// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A backend cannot allocate through the allocator seam while running a job: the signalling
//! context offers no allocation token.

use jobqueue::host::{HostAlloc, HostFence};
use jobqueue::{
    Allocator, Backend, FenceError, RunJob, SignalCtx, TimedOutJob, TimeoutAction,
};

struct Ring {
    alloc: HostAlloc,
}

impl Backend for Ring {
    type Fence = HostFence;
    type Alloc = HostAlloc;
    type Payload = ();

    fn run_job(&mut self, _job: RunJob<'_, ()>, ctx: &SignalCtx<'_>) -> Result<HostFence, FenceError> {
        self.alloc.try_new_fence(ctx.alloc_token()).map_err(|_| FenceError::IO)
    }

    fn timed_out(&mut self, _job: TimedOutJob<'_, ()>, _ctx: &SignalCtx<'_>) -> TimeoutAction {
        TimeoutAction::Fail
    }
}

fn main() {}
