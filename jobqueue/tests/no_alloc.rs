// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Nothing allocates after commit.
//!
//! A counting global allocator counts the allocations made by this thread. All jobs are
//! prepared first (that is where memory may be allocated); then every step on the way to
//! signalling their done fences is taken with the counter armed: commit, running the queue,
//! dependency and hardware signals (also from another thread), timeouts with extension, failure
//! and reset with resubmission, and finally killing and dropping the queue. A second test shows
//! that a warm queue (`Queue::prepare`, reusing retired jobs' memory) does not allocate even to
//! prepare its jobs.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::{Harness, TIMEOUT};
use jobqueue::host::HostFence;
use jobqueue::{Cost, Fence, FenceError, MaxDeps, PreparedJob, SignalFence, TimeoutAction};

struct Counting;

thread_local! {
    // Per thread, so that tests running in parallel do not see each other's allocations.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn count() {
    if ARMED.with(Cell::get) {
        ALLOCS.with(|n| n.set(n.get() + 1));
    }
}

// SAFETY: every method forwards to the system allocator with the caller's arguments, so the
// `GlobalAlloc` contract is upheld by `System`; counting touches only
// const-initialised thread-locals without destructors, which do not allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with counting armed and returns how many allocations it made on this thread.
fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCS.with(Cell::get);
    ARMED.with(|a| a.set(true));
    f();
    ARMED.with(|a| a.set(false));
    ALLOCS.with(Cell::get) - before
}

#[test]
fn counter_sees_allocations() {
    // The checker itself must be able to fail.
    let n = allocations_in(|| drop(std::hint::black_box(Box::new(7u64))));
    assert_eq!(n, 1);
}

#[test]
#[cfg_attr(miri, ignore)]
fn nothing_allocates_between_commit_and_signal() {
    const JOBS: u64 = 8;
    let mut h = Harness::<16>::new(4);
    {
        let ring = h.q.backend_mut();
        ring.runs.reserve(64);
        ring.timeouts.reserve(64);
        ring.fence_pool = (0..64).map(|_| HostFence::new()).collect();
        ring.timeout_script.extend([
            TimeoutAction::Extend(TIMEOUT),
            TimeoutAction::Fail,
            TimeoutAction::Reset,
        ]);
        ring.cancel_on_reset = true;
    }
    let deps: Vec<HostFence> = (0..JOBS).map(|_| HostFence::new()).collect();
    let mut prepared = Vec::with_capacity(JOBS as usize);
    for tag in 0..JOBS {
        let mut job = PreparedJob::new(
            &h.alloc,
            h.q.config(),
            Cost(1 + (tag % 2) as u32),
            MaxDeps(2),
            tag,
        )
        .unwrap();
        job.add_dependency(&deps[tag as usize]).unwrap();
        prepared.push(job);
    }
    let mut done = Vec::with_capacity(JOBS as usize);
    let mut hw = Vec::with_capacity(64);
    let signaller_fences: Vec<HostFence> = deps[4..].to_vec();
    let (go_tx, go_rx) = std::sync::mpsc::sync_channel::<()>(1);
    let signaller = std::thread::spawn(move || {
        go_rx.recv().unwrap();
        for d in &signaller_fences {
            d.signal(Ok(()));
        }
    });

    let n = allocations_in(|| {
        // Every step below is in the signalling path or is the infallible commit.
        for job in prepared.drain(..) {
            done.push(h.q.reserve().unwrap().commit(job).done);
        }
        h.run();
        deps[0].signal(Ok(()));
        h.run();
        deps[1].signal(Err(FenceError::IO));
        deps[2].signal(Ok(()));
        deps[3].signal(Ok(()));
        h.run();
        // Jobs 0, 2 and 3 are on the ring and expire together: job 0 is extended, job 2
        // fails, job 3 is guilty of a reset, which resubmits job 0.
        h.advance(TIMEOUT);
        // The resubmitted job 0 times out again and fails.
        h.advance(TIMEOUT);
        hw.extend(h.ring().runs.iter().map(|r| r.hw.clone()));
        for f in &hw {
            f.signal(Ok(()));
        }
        h.run();
        go_tx.send(()).unwrap();
        // Dependencies 4.. are signalled on the other thread.
        let start = std::time::Instant::now();
        while h.q.pending_jobs() > 0 && start.elapsed().as_secs() < 20 {
            if h.exec.wait_pending(std::time::Duration::from_millis(10)) {
                h.run();
            }
            hw.clear();
            hw.extend(h.ring().runs.iter().map(|r| r.hw.clone()));
            for f in &hw {
                f.signal(Ok(()));
            }
            h.run();
        }
        h.q.kill();
        drop(h);
    });
    signaller.join().unwrap();
    assert_eq!(n, 0, "allocations after commit");
    assert_eq!(done[0].status(), Some(Err(FenceError::TIMED_OUT)));
    assert_eq!(done[1].status(), Some(Err(FenceError::IO)));
    assert_eq!(done[2].status(), Some(Err(FenceError::TIMED_OUT)));
    assert_eq!(done[3].status(), Some(Err(FenceError::TIMED_OUT)));
    assert!(done[4..].iter().all(|d| d.status() == Some(Ok(()))));
    for d in &done {
        assert!(d.status().is_some());
        assert_eq!(d.signal_calls(), 1);
    }
}

#[test]
#[cfg_attr(miri, ignore)]
fn a_warm_queue_prepares_its_jobs_without_allocating() {
    // Jobs with two dependencies each, four at a time: prepared with `Queue::prepare`, their
    // dependencies added, committed, run, completed, retired. After one round of warm-up the
    // queue's store of retired jobs' memory serves every later job, and the whole cycle,
    // preparation included, makes no allocation at all.
    const JOBS: usize = 4;
    const ROUNDS: usize = 50;
    let mut h = Harness::<JOBS>::new(JOBS as u32);
    {
        let ring = h.q.backend_mut();
        ring.runs.reserve(JOBS * (ROUNDS + 1));
        ring.fence_pool = (0..JOBS * (ROUNDS + 1)).map(|_| HostFence::new()).collect();
    }
    let mut deps = (0..2 * JOBS * (ROUNDS + 1))
        .map(|_| HostFence::new())
        .collect::<Vec<_>>();
    let mut done = Vec::with_capacity(JOBS);
    let round = |h: &mut Harness<JOBS>, deps: &mut Vec<HostFence>, done: &mut Vec<HostFence>| {
        let mut mine: [Option<HostFence>; 2 * JOBS] = Default::default();
        for (tag, pair) in mine.chunks_mut(2).enumerate() {
            let alloc = &h.alloc;
            let mut job = h.q.prepare(alloc, Cost(1), MaxDeps(2), tag as u64).unwrap();
            for d in pair.iter_mut() {
                let f = deps.pop().unwrap();
                job.add_dependency(&f).unwrap();
                *d = Some(f);
            }
            done.push(h.q.reserve().unwrap().commit(job).done);
        }
        h.run();
        for f in mine.iter().flatten() {
            f.signal(Ok(()));
        }
        h.run();
        let runs = h.ring().runs.len();
        for r in &h.ring().runs[runs - JOBS..] {
            r.hw.signal(Ok(()));
        }
        h.run();
        assert!(done.iter().all(|d| d.status() == Some(Ok(()))));
        done.clear();
    };
    round(&mut h, &mut deps, &mut done);
    let n = allocations_in(|| {
        for _ in 0..ROUNDS {
            round(&mut h, &mut deps, &mut done);
        }
    });
    assert_eq!(n, 0, "{n} allocations after warm-up");
    assert_eq!(h.q.pending_jobs(), 0);
}
