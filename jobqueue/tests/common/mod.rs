// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A mock ring for the integration tests, in the spirit of the kernel's mock scheduler: it
//! records every `run_job`, hands out hardware fences the test signals, and answers timeouts
//! from a script.

#![allow(dead_code, unreachable_pub)]

use std::collections::VecDeque;
use std::time::Duration;

use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
use jobqueue::{
    Backend, Clock, Cost, FenceError, MaxDeps, PreparedJob, Queue, QueueConfig, RunJob, SignalCtx,
    TimedOutJob, TimeoutAction,
};

/// One `run_job` call.
#[derive(Clone, Debug)]
pub struct Run {
    pub seqno: u64,
    pub tag: u64,
    pub attempt: u32,
    pub hw: HostFence,
}

#[derive(Default)]
pub struct MockRing {
    /// Every `run_job`, in call order. Preallocated by tests that count allocations.
    pub runs: Vec<Run>,
    /// Hardware fences to hand out, so `run_job` does not allocate (used first if non-empty).
    pub fence_pool: VecDeque<HostFence>,
    /// Tags whose `run_job` fails with the given error.
    pub start_errors: Vec<(u64, FenceError)>,
    /// Answers to timeouts, in order; `Fail` once exhausted.
    pub timeout_script: VecDeque<TimeoutAction>,
    /// (seqno, tag, attempt, extensions) of every timeout.
    pub timeouts: Vec<(u64, u64, u32, u32)>,
    /// Signal every lost hardware fence with `ECANCELED` when answering `Reset`.
    pub cancel_on_reset: bool,
    /// Signal the timed-out job's hardware fence with success inside `timed_out`, as a
    /// driver whose handler processes completions finds a job that just finished.
    pub complete_in_timeout: bool,
}

impl MockRing {
    pub fn new() -> Self {
        Self::default()
    }

    /// The latest run of job `tag`.
    pub fn run_of(&self, tag: u64) -> Option<&Run> {
        self.runs.iter().rev().find(|r| r.tag == tag)
    }

    /// Tags of first runs, in order.
    pub fn first_runs(&self) -> Vec<u64> {
        self.runs
            .iter()
            .filter(|r| r.attempt == 0)
            .map(|r| r.tag)
            .collect()
    }
}

impl Backend for MockRing {
    type Fence = HostFence;
    type Alloc = HostAlloc;
    type Payload = u64;

    fn run_job(
        &mut self,
        job: RunJob<'_, u64>,
        _ctx: &SignalCtx<'_>,
    ) -> Result<HostFence, FenceError> {
        let tag = *job.payload();
        if let Some(&(_, e)) = self.start_errors.iter().find(|(t, _)| *t == tag) {
            return Err(e);
        }
        let hw = self.fence_pool.pop_front().unwrap_or_default();
        self.runs.push(Run {
            seqno: job.seqno(),
            tag,
            attempt: job.attempt(),
            hw: hw.clone(),
        });
        Ok(hw)
    }

    fn timed_out(&mut self, job: TimedOutJob<'_, u64>, _ctx: &SignalCtx<'_>) -> TimeoutAction {
        let tag = *job.payload();
        self.timeouts
            .push((job.seqno(), tag, job.attempt(), job.extensions()));
        if self.complete_in_timeout {
            use jobqueue::SignalFence;
            if let Some(r) = self.runs.iter().rev().find(|r| r.seqno == job.seqno()) {
                r.hw.signal(Ok(()));
            }
        }
        let action = self
            .timeout_script
            .pop_front()
            .unwrap_or(TimeoutAction::Fail);
        if action == TimeoutAction::Reset && self.cancel_on_reset {
            for r in &self.runs {
                use jobqueue::SignalFence;
                r.hw.signal(Err(FenceError::CANCELED));
            }
        }
        action
    }
}

pub const TIMEOUT: Duration = Duration::from_millis(100);

pub struct Harness<const N: usize> {
    pub q: Queue<MockRing, TestExecutor, ManualClock, N>,
    pub exec: TestExecutor,
    pub clock: ManualClock,
    pub alloc: HostAlloc,
}

impl<const N: usize> Harness<N> {
    pub fn new(capacity: u32) -> Self {
        Self::with_pipelining(capacity, false)
    }

    /// A harness whose queue has `QueueConfig::with_pipelining(pipelined)`.
    pub fn with_pipelining(capacity: u32, pipelined: bool) -> Self {
        let exec = TestExecutor::new();
        let clock = ManualClock::new();
        let config = QueueConfig::new(capacity)
            .with_timeout(TIMEOUT)
            .with_max_extensions(2)
            .with_pipelining(pipelined);
        let q = Queue::new(MockRing::new(), exec.clone(), clock.clone(), config).unwrap();
        Harness {
            q,
            exec,
            clock,
            alloc: HostAlloc::new(),
        }
    }

    /// Prepares and commits a job; returns its done fence.
    pub fn submit(&mut self, tag: u64, cost: u32, deps: &[&HostFence]) -> HostFence {
        let mut job = PreparedJob::new(
            &self.alloc,
            self.q.config(),
            Cost(cost),
            MaxDeps(deps.len()),
            tag,
        )
        .unwrap();
        for d in deps {
            job.add_dependency(d).unwrap();
        }
        self.q.reserve().unwrap().commit(job).done
    }

    /// Runs the queue until nothing is pending.
    pub fn run(&mut self) {
        let q = &mut self.q;
        self.exec.run_until_idle(|| q.run());
    }

    /// Advances time, fires due timers and runs the queue.
    pub fn advance(&mut self, d: Duration) {
        self.clock.advance(d);
        self.exec.fire_timers(self.clock.now());
        self.run();
    }

    pub fn ring(&self) -> &MockRing {
        self.q.backend()
    }

    pub fn hw(&self, tag: u64) -> HostFence {
        self.ring().run_of(tag).expect("job ran").hw.clone()
    }
}
