// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Model-based property test.
//!
//! Random sequences of submissions (random costs, dependencies on external fences and on
//! earlier jobs), external fence signals (with and without errors), hardware completions (in any
//! order, with and without errors), time steps that trigger timeouts (each job's handler
//! extends, fails or resets), and kills are applied both to the real queue and to a reference
//! model: a plain vector of jobs with the queue's rules written out as directly as possible.
//! After every step the two must agree on which jobs ran (and how often), the credits in use,
//! and the status of every done fence. Independently of the model, the backend checks that no
//! job runs before its dependencies signalled, that first runs follow submission order, and
//! that credits never exceed the capacity; at the end every done fence has signalled exactly
//! once.

use std::time::Duration;

use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
use jobqueue::{
    Backend, Clock, Cost, Error, Fence, FenceError, FenceResult, MaxDeps, PreparedJob, Queue,
    QueueConfig, RunJob, SignalCtx, SignalFence, TimedOutJob, TimeoutAction,
};
use proptest::prelude::*;

const CAPACITY: u32 = 6;
const SLOTS: usize = 6;
const MAX_EXT: u32 = 1;
const TIMEOUT: Duration = Duration::from_millis(10);
const EXTERNAL: usize = 4;

#[derive(Clone, Copy, Debug)]
enum Plan {
    Extend,
    Fail,
    Reset,
}

#[derive(Clone, Copy, Debug)]
enum DepRef {
    External(usize),
    /// The n-th most recently accepted job's done fence.
    Job(usize),
}

#[derive(Clone, Debug)]
enum Op {
    Submit {
        cost: u32,
        deps: Vec<DepRef>,
        plan: Plan,
        /// Committed with `commit_direct` (started at once when it can) rather than `commit`.
        direct: bool,
    },
    SignalExternal {
        index: usize,
        error: Option<i32>,
    },
    CompleteHw {
        pick: usize,
        error: Option<i32>,
    },
    Advance {
        ms: u64,
    },
    Kill,
}

/// Mostly success; otherwise one of a few distinct errnos, so that which error wins matters.
fn errno() -> impl Strategy<Value = Option<i32>> {
    prop_oneof![4 => Just(None), 1 => prop_oneof![Just(-5), Just(-19), Just(-71)].prop_map(Some)]
}

fn result_of(error: Option<i32>) -> FenceResult {
    match error.and_then(FenceError::new) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn op() -> impl Strategy<Value = Op> {
    let dep = prop_oneof![
        (0..EXTERNAL).prop_map(DepRef::External),
        (0..4usize).prop_map(DepRef::Job),
    ];
    let plan = prop_oneof![Just(Plan::Extend), Just(Plan::Fail), Just(Plan::Reset)];
    prop_oneof![
        8 => (0..=CAPACITY + 1, proptest::collection::vec(dep, 0..3), plan, any::<bool>())
            .prop_map(|(cost, deps, plan, direct)| Op::Submit { cost, deps, plan, direct }),
        3 => (0..EXTERNAL, errno())
            .prop_map(|(index, error)| Op::SignalExternal { index, error }),
        6 => (0..8usize, errno())
            .prop_map(|(pick, error)| Op::CompleteHw { pick, error }),
        3 => (1..15u64).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Kill),
    ]
}

struct Payload {
    tag: usize,
    plan: Plan,
    /// Each dependency, with the tag of its job when it is a done fence of this queue.
    deps: Vec<(Option<usize>, HostFence)>,
    cost: u32,
}

#[derive(Default)]
struct Ring {
    /// (tag, attempt, hardware fence) per run_job.
    runs: Vec<(usize, u32, HostFence)>,
    /// Rule breaks seen from inside the backend.
    violations: Vec<String>,
    last_first_run: Option<usize>,
    /// Whether the queue runs with pipelining (`QueueConfig::with_pipelining`).
    pipelined: bool,
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
        // A dependency is met when it signalled without an error, or, for the done fence of an
        // earlier job of this queue, once that job is on the ring (its latest run's hardware
        // fence has not failed).
        let met = |(own, d): &(Option<usize>, HostFence)| match d.status() {
            Some(r) => r.is_ok(),
            None => {
                self.pipelined
                    && own.is_some_and(|t| {
                        self.runs
                            .iter()
                            .rev()
                            .find(|(rt, _, _)| *rt == t)
                            .is_some_and(|(_, _, hw)| hw.status().is_none_or(|r| r.is_ok()))
                    })
            }
        };
        if !p.deps.iter().all(met) {
            self.violations
                .push(format!("job {} ran before its dependencies", p.tag));
        }
        let tag = p.tag;
        if job.attempt() == 0 {
            if self.last_first_run.is_some_and(|l| l >= tag) {
                self.violations.push(format!("job {tag} ran out of order"));
            }
            self.last_first_run = Some(tag);
        }
        let hw = HostFence::new();
        self.runs.push((tag, job.attempt(), hw.clone()));
        Ok(hw)
    }

    fn timed_out(&mut self, job: TimedOutJob<'_, Payload>, _ctx: &SignalCtx<'_>) -> TimeoutAction {
        match job.payload().plan {
            Plan::Extend => TimeoutAction::Extend(TIMEOUT),
            Plan::Fail => TimeoutAction::Fail,
            Plan::Reset => {
                // A reset loses everything on the ring: signal the lost hardware fences.
                for (_, _, hw) in &self.runs {
                    hw.signal(Err(FenceError::CANCELED));
                }
                TimeoutAction::Reset
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The reference model.

#[derive(Clone, Debug, PartialEq)]
enum MState {
    Waiting,
    Running {
        deadline: u64,
        extensions: u32,
        attempt: u32,
        hw_signalled: Option<FenceResult>,
    },
    Finished(FenceResult),
    Done(FenceResult),
}

#[derive(Clone, Debug)]
enum MDep {
    External(usize),
    Job(usize),
}

struct MJob {
    cost: u32,
    plan: Plan,
    deps: Vec<MDep>,
    state: MState,
}

#[derive(Default)]
struct Model {
    pipelined: bool,
    jobs: Vec<MJob>,
    external: [Option<FenceResult>; EXTERNAL],
    runs: Vec<(usize, u32)>,
    killed: bool,
    now: u64,
}

impl Model {
    fn dep_status(&self, d: &MDep) -> Option<FenceResult> {
        match d {
            MDep::External(i) => self.external[*i],
            MDep::Job(j) => match self.jobs[*j].state {
                MState::Done(r) => Some(r),
                // With pipelining, a job of the same queue on the ring (the ring runs jobs in
                // order) meets the dependency, unless it is already known to have failed.
                MState::Running {
                    hw_signalled: None | Some(Ok(())),
                    ..
                }
                | MState::Finished(Ok(()))
                    if self.pipelined =>
                {
                    Some(Ok(()))
                }
                _ => None,
            },
        }
    }

    fn pending(&self) -> usize {
        self.jobs
            .iter()
            .filter(|j| !matches!(j.state, MState::Done(_)))
            .count()
    }

    fn credits(&self) -> u32 {
        self.jobs
            .iter()
            .filter(|j| matches!(j.state, MState::Running { .. }))
            .map(|j| j.cost)
            .sum()
    }

    fn timeout_ns() -> u64 {
        TIMEOUT.as_nanos() as u64
    }

    /// Applies the queue's rules until nothing changes.
    fn settle(&mut self) {
        if self.killed {
            return;
        }
        let now = self.now;
        loop {
            let mut progress = false;
            for j in &mut self.jobs {
                if let MState::Running {
                    hw_signalled: Some(r),
                    ..
                } = j.state
                {
                    j.state = MState::Finished(r);
                    progress = true;
                }
            }
            for j in &mut self.jobs {
                match j.state {
                    MState::Done(_) => continue,
                    MState::Finished(r) => {
                        j.state = MState::Done(r);
                        progress = true;
                    }
                    _ => break,
                }
            }
            let expired = self.jobs.iter().position(
                |j| matches!(j.state, MState::Running { deadline, .. } if deadline <= now),
            );
            if let Some(g) = expired {
                let plan = self.jobs[g].plan;
                let MState::Running { extensions, .. } = self.jobs[g].state else {
                    unreachable!()
                };
                match plan {
                    Plan::Extend if extensions < MAX_EXT => {
                        if let MState::Running {
                            deadline,
                            extensions,
                            ..
                        } = &mut self.jobs[g].state
                        {
                            *deadline = now + Self::timeout_ns();
                            *extensions += 1;
                        }
                    }
                    Plan::Extend | Plan::Fail => {
                        self.jobs[g].state = MState::Finished(Err(FenceError::TIMED_OUT));
                    }
                    Plan::Reset => {
                        self.jobs[g].state = MState::Finished(Err(FenceError::TIMED_OUT));
                        for tag in 0..self.jobs.len() {
                            let MState::Running { attempt, .. } = self.jobs[tag].state else {
                                continue;
                            };
                            // A job on the ring behind a job of this queue it depends on that
                            // has failed meanwhile fails with that error instead of running
                            // again.
                            let failed = self.jobs[tag].deps.iter().find_map(|d| match d {
                                MDep::External(i) => self.external[*i].and_then(|r| r.err()),
                                MDep::Job(k) => match self.jobs[*k].state {
                                    MState::Finished(Err(e)) | MState::Done(Err(e)) => Some(e),
                                    _ => None,
                                },
                            });
                            if let Some(e) = failed {
                                self.jobs[tag].state = MState::Finished(Err(e));
                                continue;
                            }
                            self.jobs[tag].state = MState::Running {
                                deadline: now + Self::timeout_ns(),
                                extensions: 0,
                                attempt: attempt + 1,
                                hw_signalled: None,
                            };
                            self.runs.push((tag, attempt + 1));
                        }
                    }
                }
                continue;
            }
            if let Some(next) = self.jobs.iter().position(|j| j.state == MState::Waiting) {
                let statuses: Vec<_> = self.jobs[next]
                    .deps
                    .iter()
                    .map(|d| self.dep_status(d))
                    .collect();
                if statuses.iter().all(Option::is_some) {
                    let error = statuses.iter().flatten().find_map(|r| r.err());
                    if let Some(e) = error {
                        self.jobs[next].state = MState::Finished(Err(e));
                        progress = true;
                    } else if self.credits() + self.jobs[next].cost <= CAPACITY {
                        self.jobs[next].state = MState::Running {
                            deadline: now + Self::timeout_ns(),
                            extensions: 0,
                            attempt: 0,
                            hw_signalled: None,
                        };
                        self.runs.push((next, 0));
                        progress = true;
                    }
                }
            }
            if !progress {
                break;
            }
        }
    }

    fn kill(&mut self) {
        if self.killed {
            return;
        }
        self.killed = true;
        for j in &mut self.jobs {
            j.state = match j.state {
                MState::Done(r) | MState::Finished(r) => MState::Done(r),
                _ => MState::Done(Err(FenceError::CANCELED)),
            };
        }
    }
}

fn run_case(ops: Vec<Op>, pipelined: bool) -> Result<(), TestCaseError> {
    let exec = TestExecutor::new();
    let clock = ManualClock::new();
    let config = QueueConfig::new(CAPACITY)
        .with_timeout(TIMEOUT)
        .with_max_extensions(MAX_EXT)
        .with_pipelining(pipelined);
    let ring = Ring {
        pipelined,
        ..Ring::default()
    };
    let mut q: Queue<Ring, _, _, SLOTS> =
        Queue::new(ring, exec.clone(), clock.clone(), config).unwrap();
    let alloc = HostAlloc::new();
    let external: Vec<HostFence> = (0..EXTERNAL).map(|_| HostFence::new()).collect();
    let mut done: Vec<HostFence> = Vec::new();
    let mut model = Model {
        pipelined,
        ..Model::default()
    };

    for op in ops {
        match op {
            Op::Submit {
                cost,
                deps,
                plan,
                direct,
            } => {
                let fences: Vec<(Option<usize>, HostFence)> = deps
                    .iter()
                    .filter_map(|d| match *d {
                        DepRef::External(i) => Some((None, external[i].clone())),
                        DepRef::Job(k) => done
                            .len()
                            .checked_sub(k + 1)
                            .map(|j| (Some(j), done[j].clone())),
                    })
                    .collect();
                let mdeps: Vec<MDep> = deps
                    .iter()
                    .filter_map(|d| match *d {
                        DepRef::External(i) => Some(MDep::External(i)),
                        DepRef::Job(k) => done.len().checked_sub(k + 1).map(MDep::Job),
                    })
                    .collect();
                // The job waits for one pending done fence of this queue (they share its
                // timeline): the latest, in the place of the first (`add_dependency`).
                let mut all_fences = fences.clone();
                let latest = all_fences
                    .iter()
                    .filter(|(own, f)| own.is_some() && f.status().is_none())
                    .filter_map(|(own, _)| *own)
                    .max();
                let mut seen = false;
                let keep: Vec<bool> = all_fences
                    .iter()
                    .map(|(own, f)| {
                        if own.is_none() || f.status().is_some() {
                            return true;
                        }
                        !std::mem::replace(&mut seen, true)
                    })
                    .collect();
                let mut mdeps = mdeps;
                let mut fences = Vec::new();
                for (i, (own, f)) in all_fences.drain(..).enumerate() {
                    if keep[i] {
                        match (own, latest) {
                            (Some(_), Some(j)) if f.status().is_none() => {
                                fences.push((Some(j), done[j].clone()))
                            }
                            _ => fences.push((own, f)),
                        }
                    }
                }
                let mut i = 0;
                mdeps.retain(|_| {
                    i += 1;
                    keep[i - 1]
                });
                for m in mdeps.iter_mut() {
                    if let (MDep::Job(j), Some(l)) = (&*m, latest) {
                        if done[*j].status().is_none() {
                            *m = MDep::Job(l);
                        }
                    }
                }
                let tag = done.len();
                let payload = Payload {
                    tag,
                    plan,
                    deps: fences.clone(),
                    cost,
                };
                let prepared =
                    PreparedJob::new(&alloc, &config, Cost(cost), MaxDeps(fences.len()), payload);
                let mut job = match prepared {
                    Ok(job) => {
                        prop_assert!((1..=CAPACITY).contains(&cost));
                        job
                    }
                    Err(rej) => {
                        prop_assert!(cost == 0 || cost > CAPACITY);
                        prop_assert_eq!(rej.value.cost, cost);
                        continue;
                    }
                };
                for (_, f) in &fences {
                    job.add_dependency(f).unwrap();
                }
                match q.reserve() {
                    Ok(r) => {
                        prop_assert!(!model.killed && model.pending() < SLOTS);
                        let c = if direct {
                            r.commit_direct(job)
                        } else {
                            r.commit(job)
                        };
                        prop_assert_eq!(c.seqno, tag as u64 + 1);
                        done.push(c.done);
                        model.jobs.push(MJob {
                            cost,
                            plan,
                            deps: mdeps,
                            state: MState::Waiting,
                        });
                    }
                    Err(Error::Killed) => prop_assert!(model.killed),
                    Err(Error::QueueFull) => {
                        prop_assert!(!model.killed && model.pending() >= SLOTS)
                    }
                    Err(e) => prop_assert!(false, "unexpected error {e}"),
                }
            }
            Op::SignalExternal { index, error } => {
                let r = result_of(error);
                if external[index].signal(r) {
                    model.external[index] = Some(r);
                }
            }
            Op::CompleteHw { pick, error } => {
                let running: Vec<usize> = model
                    .jobs
                    .iter()
                    .enumerate()
                    .filter(|(_, j)| {
                        matches!(
                            j.state,
                            MState::Running {
                                hw_signalled: None,
                                ..
                            }
                        )
                    })
                    .map(|(i, _)| i)
                    .collect();
                if !running.is_empty() {
                    let tag = running[pick % running.len()];
                    let r = result_of(error);
                    let hw = &q
                        .backend()
                        .runs
                        .iter()
                        .rev()
                        .find(|(t, _, _)| *t == tag)
                        .expect("running job has a run")
                        .2;
                    prop_assert!(hw.signal(r));
                    if let MState::Running { hw_signalled, .. } = &mut model.jobs[tag].state {
                        *hw_signalled = Some(r);
                    }
                }
            }
            Op::Advance { ms } => {
                clock.advance(Duration::from_millis(ms));
                model.now = clock.now().as_nanos();
                exec.fire_timers(clock.now());
            }
            Op::Kill => {
                q.kill();
                model.kill();
            }
        }
        exec.run_until_idle(|| q.run());
        model.settle();

        // Compare.
        let ring = q.backend();
        prop_assert!(ring.violations.is_empty(), "{:?}", ring.violations);
        let real_runs: Vec<(usize, u32)> = ring.runs.iter().map(|(t, a, _)| (*t, *a)).collect();
        prop_assert_eq!(&real_runs, &model.runs);
        prop_assert!(q.credits_in_use() <= CAPACITY);
        prop_assert_eq!(q.credits_in_use(), model.credits());
        prop_assert_eq!(q.pending_jobs(), model.pending());
        for (tag, (d, j)) in done.iter().zip(&model.jobs).enumerate() {
            let expected = match j.state {
                MState::Done(r) => Some(r),
                _ => None,
            };
            prop_assert_eq!(d.status(), expected, "job {}", tag);
            prop_assert!(d.signal_calls() <= 1);
        }
    }

    // Teardown: everything signals, exactly once, in finite time.
    drop(q);
    model.kill();
    for (d, j) in done.iter().zip(&model.jobs) {
        let MState::Done(r) = j.state else {
            unreachable!()
        };
        prop_assert_eq!(d.status(), Some(r));
        prop_assert_eq!(d.signal_calls(), 1);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 512 },
        // Miri's isolation forbids the file system access persistence needs.
        failure_persistence: if cfg!(miri) {
            None
        } else {
            ProptestConfig::default().failure_persistence
        },
        ..ProptestConfig::default()
    })]

    #[test]
    fn queue_matches_model(
        ops in proptest::collection::vec(op(), 1..if cfg!(miri) { 20 } else { 60 }),
        pipelined in any::<bool>(),
    ) {
        run_case(ops, pipelined)?;
    }
}
