// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `jobqueue` submit / signal / complete / timeout / kill / drop sequences.
//!
//! Invariants checked from inside the backend and after every step: no job runs before all its
//! dependencies signalled successfully, first runs follow submission order, the credits of the
//! jobs on the ring never exceed the capacity, a job is accepted iff the queue is alive and has
//! a free slot, and once the queue is dropped every done fence has signalled (exactly once:
//! a second signal is refused).

#![no_main]

use std::time::Duration;

use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
use jobqueue::{Cost, MaxDeps, 
    Backend, Clock, Error, Fence, FenceError, PreparedJob, Queue, QueueConfig, RunJob, SignalCtx,
    SignalFence, TimedOutJob, TimeoutAction,
};
use libfuzzer_sys::fuzz_target;

const CAPACITY: u32 = 6;
const SLOTS: usize = 6;
const TIMEOUT: Duration = Duration::from_millis(10);
const MAX_EXTENSIONS: u32 = 1;

struct Payload {
    tag: usize,
    plan: u8,
    deps: Vec<HostFence>,
    cost: u32,
}

#[derive(Default)]
struct Ring {
    /// Tag, cost and hardware fence of every run.
    runs: Vec<(usize, u32, HostFence)>,
    /// Runs given up on (`Fail`, `Kill`): their credits are back although their hardware
    /// fence never signals.
    released: Vec<usize>,
    last_first_run: Option<usize>,
}

impl Backend for Ring {
    type Fence = HostFence;
    type Alloc = HostAlloc;
    type Payload = Payload;

    fn run_job(
        &mut self,
        job: RunJob<'_, Payload>,
        _ctx: &SignalCtx<'_>,
    ) -> Result<HostFence, FenceError> {
        let p = job.payload();
        assert!(
            p.deps.iter().all(|d| d.status() == Some(Ok(()))),
            "job {} ran before its dependencies",
            p.tag
        );
        let (tag, cost) = (p.tag, p.cost);
        if job.attempt() == 0 {
            assert!(
                self.last_first_run.is_none_or(|l| l < tag),
                "job {tag} ran out of order"
            );
            self.last_first_run = Some(tag);
        }
        let on_ring: u32 = self
            .runs
            .iter()
            .enumerate()
            .filter(|(i, (_, _, hw))| hw.status().is_none() && !self.released.contains(i))
            .map(|(_, (_, c, _))| c)
            .sum();
        assert!(on_ring + cost <= CAPACITY, "credits exceeded");
        let hw = HostFence::new();
        self.runs.push((tag, cost, hw.clone()));
        Ok(hw)
    }

    fn timed_out(
        &mut self,
        job: TimedOutJob<'_, Payload>,
        _ctx: &SignalCtx<'_>,
    ) -> TimeoutAction {
        let tag = job.payload().tag;
        let run = self.runs.iter().rposition(|(t, _, _)| *t == tag);
        match job.payload().plan % 4 {
            // Past the configured extensions an extension counts as `Fail`.
            0 if job.extensions() < MAX_EXTENSIONS => TimeoutAction::Extend(TIMEOUT),
            0 | 1 => {
                self.released.extend(run);
                TimeoutAction::Fail
            }
            2 => {
                for (_, _, hw) in &self.runs {
                    hw.signal(Err(FenceError::CANCELED));
                }
                TimeoutAction::Reset
            }
            _ => {
                self.released.extend(0..self.runs.len());
                TimeoutAction::Kill
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let exec = TestExecutor::new();
    let clock = ManualClock::new();
    let config = QueueConfig::new(CAPACITY)
        .with_timeout(TIMEOUT)
        .with_max_extensions(MAX_EXTENSIONS);
    let mut q: Queue<Ring, _, _, SLOTS> =
        Queue::new(Ring::default(), exec.clone(), clock.clone(), config).unwrap();
    let alloc = HostAlloc::new();
    let external: Vec<HostFence> = (0..4).map(|_| HostFence::new()).collect();
    let mut done: Vec<HostFence> = Vec::new();
    let mut killed = false;
    for step in data.chunks_exact(3).take(96) {
        let (a, b) = (step[1], step[2]);
        match step[0] % 5 {
            0 => {
                let cost = u32::from(a % 8);
                let mut deps = Vec::new();
                for bit in 0..4 {
                    if b & (1 << bit) != 0 {
                        deps.push(external[bit].clone());
                    }
                }
                if b & 0x30 != 0 {
                    let back = usize::from((b >> 4) & 3);
                    if let Some(f) = done.len().checked_sub(back).and_then(|i| done.get(i)) {
                        deps.push(f.clone());
                    }
                }
                let payload = Payload {
                    tag: done.len(),
                    plan: a >> 3,
                    deps: deps.clone(),
                    cost,
                };
                let Ok(mut job) = PreparedJob::new(&alloc, &config, Cost(cost), MaxDeps(deps.len()), payload)
                else {
                    assert!(cost == 0 || cost > CAPACITY, "a valid job was refused");
                    continue;
                };
                for f in &deps {
                    job.add_dependency(f).unwrap();
                }
                let pending = q.pending_jobs();
                match q.reserve() {
                    Ok(r) => {
                        assert!(!killed && pending < SLOTS);
                        done.push(r.commit(job).done);
                    }
                    Err(Error::Killed) => assert!(killed || q.is_killed()),
                    Err(Error::QueueFull) => assert!(pending >= SLOTS),
                    Err(e) => panic!("unexpected error {e}"),
                }
            }
            1 => {
                let r = if b & 1 == 0 {
                    Ok(())
                } else {
                    Err(FenceError::IO)
                };
                external[usize::from(a % 4)].signal(r);
            }
            2 => {
                let live: Vec<HostFence> = q
                    .backend()
                    .runs
                    .iter()
                    .filter(|(_, _, hw)| hw.status().is_none())
                    .map(|(_, _, hw)| hw.clone())
                    .collect();
                if !live.is_empty() {
                    let r = if b & 1 == 0 {
                        Ok(())
                    } else {
                        Err(FenceError::IO)
                    };
                    live[usize::from(a) % live.len()].signal(r);
                }
            }
            3 => {
                clock.advance(Duration::from_millis(u64::from(a % 32)));
                exec.fire_timers(clock.now());
            }
            _ => {
                if a % 8 == 0 {
                    q.kill();
                    killed = true;
                }
            }
        }
        killed |= q.is_killed();
        exec.run_until_idle(|| q.run());
    }
    drop(q);
    for f in &done {
        assert!(f.status().is_some(), "a done fence never signalled");
        assert!(!f.signal(Ok(())), "a done fence signalled twice");
    }
});
