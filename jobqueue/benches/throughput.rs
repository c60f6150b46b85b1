// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Jobs per second through one queue with 0, 1 and 4 dependencies each, and the latency from a
//! dependency's signal to `run_job`, side by side with a peer: the same work written as async
//! tasks on `futures`' `LocalPool`, with `futures::channel::oneshot` channels as fences (what a
//! driver could do with the async ecosystem instead of a job queue; it has no credits, no
//! in-order guarantee and no timeouts, so it does strictly less work).
//!
//! Run: `cargo bench -p gpukit-jobqueue --bench throughput`

use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures::channel::oneshot;
use futures::executor::LocalPool;
use futures::future::join_all;
use futures::task::LocalSpawnExt;
use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
use jobqueue::{
    Backend, Cost, FenceError, MaxDeps, PreparedJob, Queue, QueueConfig, RunJob, SignalCtx,
    SignalFence, TimedOutJob, TimeoutAction,
};

const BATCH: usize = 128;

#[derive(Default)]
struct Ring {
    hw: Vec<HostFence>,
    ran: usize,
}

impl Backend for Ring {
    type Fence = HostFence;
    type Alloc = HostAlloc;
    /// The job's hardware fence, allocated when the job is prepared (as a driver must: no
    /// allocation in `run_job`).
    type Payload = HostFence;

    fn run_job(
        &mut self,
        job: RunJob<'_, HostFence>,
        _: &SignalCtx<'_>,
    ) -> Result<HostFence, FenceError> {
        self.ran += 1;
        let hw = job.payload().clone();
        self.hw.push(hw.clone());
        Ok(hw)
    }

    fn timed_out(&mut self, _: TimedOutJob<'_, HostFence>, _: &SignalCtx<'_>) -> TimeoutAction {
        TimeoutAction::Fail
    }
}

type Q = Queue<Ring, TestExecutor, ManualClock, BATCH>;

fn new_queue() -> (Q, TestExecutor) {
    let exec = TestExecutor::new();
    let config = QueueConfig::new(BATCH as u32).with_timeout(Duration::from_secs(3600));
    let q = Queue::new(Ring::default(), exec.clone(), ManualClock::new(), config).unwrap();
    (q, exec)
}

/// Prepares, commits and completes `BATCH` jobs with `deps` pending dependencies each.
fn jobqueue_batch(q: &mut Q, exec: &TestExecutor, alloc: &HostAlloc, deps: usize) {
    let mut dep_fences = Vec::with_capacity(BATCH * deps);
    let mut done = Vec::with_capacity(BATCH);
    for _ in 0..BATCH {
        // Prepared from the memory the queue keeps from retired jobs (`Queue::prepare`).
        let mut job = q
            .prepare(alloc, Cost(1), MaxDeps(deps), HostFence::new())
            .unwrap();
        for _ in 0..deps {
            let f = HostFence::new();
            job.add_dependency(&f).unwrap();
            dep_fences.push(f);
        }
        // Jobs whose dependencies have all signalled start right here (`commit_direct`);
        // the others wait for the queue's run like any committed job.
        done.push(q.reserve().unwrap().commit_direct(job).done);
    }
    for f in &dep_fences {
        f.signal(Ok(()));
    }
    exec.run_until_idle(|| q.run());
    for hw in q.backend_mut().hw.drain(..) {
        hw.signal(Ok(()));
    }
    exec.run_until_idle(|| q.run());
    assert_eq!(q.pending_jobs(), 0);
    black_box(done);
}

/// The same with async tasks: each job awaits its dependencies, "runs", awaits its hardware
/// completion and then completes its done channel.
fn futures_batch(pool: &mut LocalPool, deps: usize) {
    let spawner = pool.spawner();
    let hw_senders: Rc<RefCell<Vec<oneshot::Sender<()>>>> = Rc::default();
    let mut dep_senders = Vec::with_capacity(BATCH * deps);
    let mut done = Vec::with_capacity(BATCH);
    for _ in 0..BATCH {
        let mut rx = Vec::with_capacity(deps);
        for _ in 0..deps {
            let (tx, r) = oneshot::channel::<()>();
            dep_senders.push(tx);
            rx.push(r);
        }
        let (done_tx, done_rx) = oneshot::channel::<()>();
        done.push(done_rx);
        let hw_senders = hw_senders.clone();
        spawner
            .spawn_local(async move {
                join_all(rx).await;
                let (hw_tx, hw_rx) = oneshot::channel::<()>();
                hw_senders.borrow_mut().push(hw_tx);
                let _ = hw_rx.await;
                let _ = done_tx.send(());
            })
            .unwrap();
    }
    for tx in dep_senders {
        let _ = tx.send(());
    }
    pool.run_until_stalled();
    for tx in hw_senders.borrow_mut().drain(..) {
        let _ = tx.send(());
    }
    pool.run_until_stalled();
    black_box(done);
}

fn throughput(c: &mut Criterion) {
    let mut g = c.benchmark_group("jobs");
    g.throughput(Throughput::Elements(BATCH as u64));
    for deps in [0usize, 1, 4] {
        g.bench_with_input(BenchmarkId::new("jobqueue", deps), &deps, |b, &deps| {
            let (mut q, exec) = new_queue();
            let alloc = HostAlloc::new();
            b.iter(|| jobqueue_batch(&mut q, &exec, &alloc, deps));
        });
        g.bench_with_input(
            BenchmarkId::new("futures-localpool", deps),
            &deps,
            |b, &deps| {
                let mut pool = LocalPool::new();
                b.iter(|| futures_batch(&mut pool, deps));
            },
        );
    }
    g.finish();
}

/// The floor of the throughput rows before the queue kept its jobs' memory: what every job
/// cost before any queue was involved.
///
/// Per job: the allocations of `PreparedJob::new` (done fence, hardware-fence callback node,
/// dependency table with a node per slot) through the same allocator, the benchmark's own
/// fences (the payload's hardware fence and the dependencies), signalling each of them once,
/// and freeing everything. No queue, no executor, no wake-up. The rows above take the first
/// three from the memory of retired jobs (`Queue::prepare`) instead.
fn floor(c: &mut Criterion) {
    let mut g = c.benchmark_group("jobs_floor");
    g.throughput(Throughput::Elements(BATCH as u64));
    let alloc = HostAlloc::new();
    let config = QueueConfig::new(BATCH as u32);
    for deps in [0usize, 1, 4] {
        g.bench_with_input(BenchmarkId::from_parameter(deps), &deps, |b, &deps| {
            b.iter(|| {
                let mut jobs = Vec::with_capacity(BATCH);
                let mut dep_fences = Vec::with_capacity(BATCH * deps);
                for _ in 0..BATCH {
                    let mut job = PreparedJob::<HostFence, HostAlloc, HostFence>::new(
                        &alloc,
                        &config,
                        Cost(1),
                        MaxDeps(deps),
                        HostFence::new(),
                    )
                    .unwrap();
                    for _ in 0..deps {
                        let f = HostFence::new();
                        job.add_dependency(&f).unwrap();
                        dep_fences.push(f);
                    }
                    jobs.push(job);
                }
                for f in &dep_fences {
                    f.signal(Ok(()));
                }
                for job in &jobs {
                    job.payload().signal(Ok(()));
                    job.done_fence().signal(Ok(()));
                }
                black_box(jobs);
            })
        });
    }
    g.finish();
}

fn latency(c: &mut Criterion) {
    let mut g = c.benchmark_group("signal_to_run");
    g.bench_function("jobqueue", |b| {
        let (mut q, exec) = new_queue();
        let alloc = HostAlloc::new();
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // Setup (not measured): one committed job waiting for one dependency.
                let dep = HostFence::new();
                let mut job = q
                    .prepare(&alloc, Cost(1), MaxDeps(1), HostFence::new())
                    .unwrap();
                job.add_dependency(&dep).unwrap();
                q.reserve().unwrap().commit(job);
                exec.run_until_idle(|| q.run());
                let before = q.backend().ran;
                // Measured: the signal, the wake-up and the queue run that calls `run_job`.
                let start = Instant::now();
                dep.signal(Ok(()));
                exec.run_until_idle(|| q.run());
                total += start.elapsed();
                assert_eq!(q.backend().ran, before + 1);
                // Retire the job (not measured) so the queue never fills.
                for hw in q.backend_mut().hw.drain(..) {
                    hw.signal(Ok(()));
                }
                exec.run_until_idle(|| q.run());
            }
            total
        });
    });
    g.bench_function("futures-localpool", |b| {
        let mut pool = LocalPool::new();
        let spawner = pool.spawner();
        let ran = Rc::new(RefCell::new(0usize));
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let (tx, rx) = oneshot::channel::<()>();
                let r = ran.clone();
                spawner
                    .spawn_local(async move {
                        let _ = rx.await;
                        *r.borrow_mut() += 1;
                    })
                    .unwrap();
                pool.run_until_stalled();
                let before = *ran.borrow();
                let start = Instant::now();
                let _ = tx.send(());
                pool.run_until_stalled();
                total += start.elapsed();
                assert_eq!(*ran.borrow(), before + 1);
            }
            total
        });
    });
    g.finish();
}

criterion_group!(benches, throughput, floor, latency);
criterion_main!(benches);
