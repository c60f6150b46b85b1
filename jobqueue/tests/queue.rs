// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Behaviour of the queue: ordering, dependencies, credits, errors, timeouts, teardown.

mod common;

use std::time::Duration;

use common::{Harness, MockRing, TIMEOUT};
use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
use jobqueue::{
    Cost, Error, Executor, Fence, FenceError, MaxDeps, PreparedJob, Queue, QueueConfig,
    SignalFence, TimeoutAction,
};

fn ok(f: &HostFence) {
    assert!(f.signal(Ok(())));
}

#[test]
fn runs_in_submission_order_and_signals_done() {
    let mut h = Harness::<8>::new(16);
    let done: Vec<_> = (0..5).map(|t| h.submit(t, 1, &[])).collect();
    h.run();
    assert_eq!(h.ring().first_runs(), vec![0, 1, 2, 3, 4]);
    let seqnos: Vec<_> = h.ring().runs.iter().map(|r| r.seqno).collect();
    assert_eq!(seqnos, vec![1, 2, 3, 4, 5]);
    for t in 0..5 {
        ok(&h.hw(t));
    }
    h.run();
    for d in &done {
        assert_eq!(d.status(), Some(Ok(())));
        assert_eq!(d.signal_calls(), 1);
    }
    assert_eq!(h.q.pending_jobs(), 0);
    assert_eq!(h.q.credits_in_use(), 0);
}

#[test]
fn blocked_head_holds_back_later_ready_jobs() {
    let mut h = Harness::<8>::new(16);
    let dep = HostFence::new();
    h.submit(0, 1, &[&dep]);
    h.submit(1, 1, &[]);
    h.submit(2, 1, &[]);
    h.run();
    assert!(h.ring().runs.is_empty());
    ok(&dep);
    assert!(
        h.exec.is_pending(),
        "the dependency's callback must wake the queue"
    );
    h.run();
    assert_eq!(h.ring().first_runs(), vec![0, 1, 2]);
}

#[test]
fn waits_for_every_dependency() {
    let mut h = Harness::<8>::new(16);
    let deps: Vec<_> = (0..4).map(|_| HostFence::new()).collect();
    let refs: Vec<_> = deps.iter().collect();
    h.submit(7, 1, &refs);
    for d in &deps[..3] {
        ok(d);
        h.run();
        assert!(h.ring().runs.is_empty());
    }
    ok(&deps[3]);
    h.run();
    assert_eq!(h.ring().first_runs(), vec![7]);
}

#[test]
fn already_signalled_dependency_takes_no_slot() {
    let h = Harness::<8>::new(16);
    let mut job = PreparedJob::<HostFence, HostAlloc, u64>::new(
        &h.alloc,
        h.q.config(),
        Cost(1),
        MaxDeps(0),
        1,
    )
    .unwrap();
    job.add_dependency(&HostFence::signalled(Ok(()))).unwrap();
    assert_eq!(job.pending_dependencies(), 0);
    assert_eq!(
        job.add_dependency(&HostFence::new()),
        Err(Error::TooManyDependencies)
    );
}

#[test]
fn dependency_on_done_fence_of_earlier_job() {
    let mut h = Harness::<8>::new(16);
    let a = h.submit(0, 1, &[]);
    let b = h.submit(1, 1, &[&a]);
    h.run();
    // Job 1 waits for job 0's done fence, not just its place in line.
    assert_eq!(h.ring().first_runs(), vec![0]);
    ok(&h.hw(0));
    h.run();
    assert_eq!(h.ring().first_runs(), vec![0, 1]);
    ok(&h.hw(1));
    h.run();
    assert_eq!(b.status(), Some(Ok(())));
}

#[test]
fn pipelined_dependency_on_an_earlier_job_is_met_on_the_ring() {
    let mut h = Harness::<8>::with_pipelining(16, true);
    let a = h.submit(0, 1, &[]);
    let b = h.submit(1, 1, &[&a]);
    let foreign = HostFence::new();
    let c = h.submit(2, 1, &[&b, &foreign]);
    h.run();
    // Job 1 goes on the ring right behind job 0; job 2 still waits for a fence of elsewhere.
    assert_eq!(h.ring().first_runs(), vec![0, 1]);
    assert_eq!(a.status(), None);
    foreign.signal(Ok(()));
    h.run();
    assert_eq!(h.ring().first_runs(), vec![0, 1, 2]);
    for i in 0..3 {
        ok(&h.hw(i));
    }
    h.run();
    assert_eq!(c.status(), Some(Ok(())));
}

#[test]
fn pipelined_dependency_whose_hardware_failed_before_a_run_is_waited_for() {
    let mut h = Harness::<8>::with_pipelining(16, true);
    let a = h.submit(0, 1, &[]);
    h.run();
    // Job 0's hardware fails; before the queue runs again, job 1 is committed directly.
    h.hw(0).signal(Err(FenceError::IO));
    let mut job = PreparedJob::new(&h.alloc, h.q.config(), Cost(1), MaxDeps(1), 1).unwrap();
    job.add_dependency(&a).unwrap();
    let b = h.q.reserve().unwrap().commit_direct(job).done;
    assert_eq!(h.ring().first_runs(), vec![0]);
    h.run();
    assert_eq!(h.ring().first_runs(), vec![0]);
    assert_eq!(a.status(), Some(Err(FenceError::IO)));
    assert_eq!(b.status(), Some(Err(FenceError::IO)));
}

#[test]
fn pipelined_dependency_that_failed_first_is_waited_for() {
    let mut h = Harness::<8>::with_pipelining(16, true);
    let a = h.submit(0, 1, &[]);
    h.run();
    // Job 0's failure is known before job 1 could start: job 1 gets its error, without running.
    h.hw(0).signal(Err(FenceError::IO));
    let b = h.submit(1, 1, &[&a]);
    h.run();
    assert_eq!(h.ring().first_runs(), vec![0]);
    assert_eq!(b.status(), Some(Err(FenceError::IO)));
}

#[test]
fn dependency_signalled_from_another_thread() {
    let mut h = Harness::<8>::new(16);
    let dep = HostFence::new();
    let done = h.submit(0, 1, &[&dep]);
    h.run();
    let d2 = dep.clone();
    let t = std::thread::spawn(move || d2.signal(Ok(())));
    assert!(h.exec.wait_pending(Duration::from_secs(10)));
    t.join().unwrap();
    h.run();
    let hw = h.hw(0);
    let t = std::thread::spawn(move || hw.signal(Ok(())));
    assert!(h.exec.wait_pending(Duration::from_secs(10)));
    t.join().unwrap();
    h.run();
    assert_eq!(done.wait(), Ok(()));
}

#[test]
fn credits_limit_what_enters_the_ring() {
    let mut h = Harness::<8>::new(4);
    h.submit(0, 3, &[]);
    h.submit(1, 2, &[]);
    h.submit(2, 1, &[]);
    h.run();
    assert_eq!(h.ring().first_runs(), vec![0]);
    assert_eq!(h.q.credits_in_use(), 3);
    ok(&h.hw(0));
    h.run();
    assert_eq!(h.ring().first_runs(), vec![0, 1, 2]);
    assert_eq!(h.q.credits_in_use(), 3);
    ok(&h.hw(2));
    h.run();
    assert_eq!(
        h.q.credits_in_use(),
        2,
        "credits return on the hardware signal"
    );
}

#[test]
fn cost_checks_at_prepare() {
    let alloc = HostAlloc::new();
    let config = QueueConfig::new(4);
    let r = PreparedJob::<HostFence, HostAlloc, u64>::new(&alloc, &config, Cost(5), MaxDeps(0), 9);
    let rej = r.unwrap_err();
    assert_eq!(
        rej.error,
        Error::CostTooHigh {
            cost: 5,
            capacity: 4
        }
    );
    assert_eq!(rej.value, 9);
    let r = PreparedJob::<HostFence, HostAlloc, u64>::new(&alloc, &config, Cost(0), MaxDeps(0), 9);
    assert_eq!(r.unwrap_err().error, Error::ZeroCost);
    assert!(
        PreparedJob::<HostFence, HostAlloc, u64>::new(&alloc, &config, Cost(4), MaxDeps(0), 9)
            .is_ok()
    );
}

#[test]
fn job_prepared_for_a_bigger_queue_fails_with_einval() {
    let mut h = Harness::<8>::new(2);
    let big = QueueConfig::new(100);
    let job = PreparedJob::new(&h.alloc, &big, Cost(50), MaxDeps(0), 1).unwrap();
    let done = h.q.reserve().unwrap().commit(job).done;
    let next = h.submit(2, 1, &[]);
    h.run();
    assert_eq!(done.status(), Some(Err(FenceError::INVALID)));
    assert_eq!(h.ring().first_runs(), vec![2]);
    ok(&h.hw(2));
    h.run();
    assert_eq!(next.status(), Some(Ok(())));
}

#[test]
fn invalid_configs_are_refused() {
    let r = Queue::<MockRing, _, _, 4>::new(
        MockRing::new(),
        TestExecutor::new(),
        ManualClock::new(),
        QueueConfig::new(0),
    );
    assert_eq!(r.err().map(|e| e.to_errno()), Some(-22));
    let r = Queue::<MockRing, _, _, 0>::new(
        MockRing::new(),
        TestExecutor::new(),
        ManualClock::new(),
        QueueConfig::new(1),
    );
    assert!(matches!(r, Err(Error::InvalidConfig)));
}

#[test]
fn out_of_memory_at_every_step_of_prepare() {
    let config = QueueConfig::new(4);
    // A job with 3 dependency slots needs 1 fence + 1 callback + 1 table + 3 slot nodes.
    for budget in 0..6 {
        let alloc = HostAlloc::failing_after(budget);
        let r = PreparedJob::<HostFence, HostAlloc, String>::new(
            &alloc,
            &config,
            Cost(1),
            MaxDeps(3),
            "payload".to_string(),
        );
        let rej = r.unwrap_err();
        assert_eq!(rej.error, Error::NoMemory);
        assert_eq!(rej.error.to_errno(), -12);
        assert_eq!(rej.value, "payload");
    }
    let alloc = HostAlloc::failing_after(6);
    assert!(
        PreparedJob::<HostFence, HostAlloc, ()>::new(&alloc, &config, Cost(1), MaxDeps(3), ())
            .is_ok()
    );
}

#[test]
fn queue_full_hands_the_job_back() {
    let mut h = Harness::<2>::new(8);
    h.submit(0, 1, &[]);
    h.submit(1, 1, &[]);
    assert_eq!(h.q.reserve().err(), Some(Error::QueueFull));
    let job = PreparedJob::new(&h.alloc, h.q.config(), Cost(1), MaxDeps(0), 2).unwrap();
    let rej = h.q.submit(job).unwrap_err();
    assert_eq!(rej.error, Error::QueueFull);
    assert_eq!(*rej.value.payload(), 2);
    h.run();
    ok(&h.hw(0));
    h.run();
    let c = h.q.submit(rej.value).unwrap();
    assert_eq!(c.seqno, 3);
    h.run();
    assert_eq!(h.ring().first_runs(), vec![0, 1, 2]);
}

#[test]
fn hardware_error_propagates_to_done_fence() {
    let mut h = Harness::<8>::new(8);
    let d0 = h.submit(0, 1, &[]);
    let d1 = h.submit(1, 1, &[]);
    h.run();
    h.hw(0).signal(Err(FenceError::IO));
    ok(&h.hw(1));
    h.run();
    assert_eq!(d0.status(), Some(Err(FenceError::IO)));
    assert_eq!(d1.status(), Some(Ok(())));
}

#[test]
fn run_job_error_completes_the_job_without_credits() {
    let mut h = Harness::<8>::new(8);
    let e = FenceError::new(-19).unwrap();
    h.q.backend_mut().start_errors.push((0, e));
    let d0 = h.submit(0, 8, &[]);
    let d1 = h.submit(1, 8, &[]);
    h.run();
    assert_eq!(d0.status(), Some(Err(e)));
    assert_eq!(h.ring().first_runs(), vec![1]);
    ok(&h.hw(1));
    h.run();
    assert_eq!(d1.status(), Some(Ok(())));
}

#[test]
fn dependency_error_fails_the_job_without_running_it() {
    let mut h = Harness::<8>::new(8);
    let a = HostFence::new();
    let b = HostFence::new();
    let d0 = h.submit(0, 1, &[&a, &b]);
    let d1 = h.submit(1, 1, &[]);
    b.signal(Err(FenceError::IO));
    h.run();
    assert!(d0.status().is_none(), "waits for all dependencies");
    a.signal(Err(FenceError::TIMED_OUT));
    h.run();
    // `a` was added first, so its error wins even though `b` failed earlier.
    assert_eq!(d0.status(), Some(Err(FenceError::TIMED_OUT)));
    assert_eq!(h.ring().first_runs(), vec![1]);
    ok(&h.hw(1));
    h.run();
    assert_eq!(d1.status(), Some(Ok(())));
}

#[test]
fn already_failed_dependency_orders_after_earlier_slots() {
    let mut h = Harness::<8>::new(8);
    let pending = HostFence::new();
    let failed = HostFence::signalled(Err(FenceError::IO));
    let d = h.submit(0, 1, &[&pending, &failed]);
    pending.signal(Err(FenceError::CANCELED));
    h.run();
    assert_eq!(d.status(), Some(Err(FenceError::CANCELED)));
    let d = h.submit(
        1,
        1,
        &[&failed, &HostFence::signalled(Err(FenceError::CANCELED))],
    );
    h.run();
    assert_eq!(d.status(), Some(Err(FenceError::IO)));
}

#[test]
fn done_fences_signal_in_order_even_if_hardware_does_not() {
    let mut h = Harness::<8>::new(8);
    let d0 = h.submit(0, 1, &[]);
    let d1 = h.submit(1, 1, &[]);
    h.run();
    ok(&h.hw(1));
    h.run();
    assert!(d1.status().is_none());
    assert_eq!(h.q.credits_in_use(), 1);
    ok(&h.hw(0));
    h.run();
    assert_eq!(d0.status(), Some(Ok(())));
    assert_eq!(d1.status(), Some(Ok(())));
}

#[test]
fn timeout_fail_returns_credits_and_signals_etimedout() {
    let mut h = Harness::<8>::new(1);
    let d0 = h.submit(0, 1, &[]);
    let d1 = h.submit(1, 1, &[]);
    h.run();
    assert_eq!(h.exec.timer().map(|t| t.as_nanos()), Some(100_000_000));
    h.advance(TIMEOUT / 2);
    assert!(h.ring().timeouts.is_empty());
    h.advance(TIMEOUT);
    assert_eq!(h.ring().timeouts, vec![(1, 0, 0, 0)]);
    assert_eq!(d0.status(), Some(Err(FenceError::TIMED_OUT)));
    assert_eq!(d0.status().unwrap().unwrap_err().to_errno(), -110);
    assert_eq!(h.ring().first_runs(), vec![0, 1]);
    // The late hardware signal of the failed job changes nothing.
    ok(&h.hw(0));
    h.run();
    assert_eq!(d0.signal_calls(), 1);
    ok(&h.hw(1));
    h.run();
    assert_eq!(d1.status(), Some(Ok(())));
}

#[test]
fn timeout_extensions_are_bounded() {
    let mut h = Harness::<8>::new(1);
    h.q.backend_mut().timeout_script =
        std::iter::repeat_n(TimeoutAction::Extend(TIMEOUT), 10).collect();
    let d0 = h.submit(0, 1, &[]);
    h.run();
    for _ in 0..2 {
        h.advance(TIMEOUT);
        assert!(d0.status().is_none());
    }
    h.advance(TIMEOUT);
    // max_extensions = 2: the third `Extend` counts as a failure.
    assert_eq!(d0.status(), Some(Err(FenceError::TIMED_OUT)));
    let ext: Vec<_> = h.ring().timeouts.iter().map(|t| t.3).collect();
    assert_eq!(ext, vec![0, 1, 2]);
}

#[test]
fn timeout_extension_then_completion() {
    let mut h = Harness::<8>::new(1);
    h.q.backend_mut()
        .timeout_script
        .push_back(TimeoutAction::Extend(TIMEOUT));
    let d0 = h.submit(0, 1, &[]);
    h.run();
    h.advance(TIMEOUT);
    assert_eq!(h.ring().timeouts.len(), 1);
    ok(&h.hw(0));
    h.run();
    assert_eq!(d0.status(), Some(Ok(())));
}

#[test]
fn reset_fails_guilty_and_resubmits_innocent_jobs() {
    let mut h = Harness::<8>::new(8);
    h.q.backend_mut()
        .timeout_script
        .push_back(TimeoutAction::Reset);
    h.q.backend_mut().cancel_on_reset = true;
    let d0 = h.submit(0, 1, &[]);
    let d1 = h.submit(1, 1, &[]);
    let d2 = h.submit(2, 1, &[]);
    let d3 = h.submit(3, 1, &[]);
    h.run();
    ok(&h.hw(1)); // completed before the hang was noticed
    h.run();
    h.advance(TIMEOUT);
    assert_eq!(d0.status(), Some(Err(FenceError::TIMED_OUT)));
    let resubmitted: Vec<_> = h
        .ring()
        .runs
        .iter()
        .filter(|r| r.attempt == 1)
        .map(|r| r.tag)
        .collect();
    assert_eq!(resubmitted, vec![2, 3]);
    assert_eq!(h.q.credits_in_use(), 2);
    ok(&h.hw(2));
    ok(&h.hw(3));
    h.run();
    assert_eq!(d1.status(), Some(Ok(())));
    assert_eq!(d2.status(), Some(Ok(())));
    assert_eq!(d3.status(), Some(Ok(())));
    assert_eq!(h.q.credits_in_use(), 0);
}

#[test]
fn reset_without_signalling_lost_fences_still_completes() {
    // The driver forgets to signal the lost hardware fences: the callback nodes stay busy, so
    // the queue falls back to polling at the next deadline.
    let mut h = Harness::<8>::new(8);
    h.q.backend_mut()
        .timeout_script
        .push_back(TimeoutAction::Reset);
    let d0 = h.submit(0, 1, &[]);
    let d1 = h.submit(1, 1, &[]);
    h.run();
    h.advance(TIMEOUT);
    assert_eq!(d0.status(), Some(Err(FenceError::TIMED_OUT)));
    ok(&h.hw(1));
    h.run();
    h.advance(TIMEOUT);
    assert_eq!(d1.status(), Some(Ok(())));
}

#[test]
fn timeout_kill_cancels_everything() {
    let mut h = Harness::<8>::new(1);
    h.q.backend_mut()
        .timeout_script
        .push_back(TimeoutAction::Kill);
    let d0 = h.submit(0, 1, &[]);
    let d1 = h.submit(1, 1, &[]);
    h.run();
    h.advance(TIMEOUT);
    assert!(h.q.is_killed());
    assert_eq!(d0.status(), Some(Err(FenceError::TIMED_OUT)));
    assert_eq!(d1.status(), Some(Err(FenceError::CANCELED)));
}

#[test]
fn waiting_jobs_do_not_time_out() {
    let mut h = Harness::<8>::new(1);
    let dep = HostFence::new();
    let d0 = h.submit(0, 1, &[&dep]);
    h.run();
    assert_eq!(h.exec.timer(), None);
    h.advance(TIMEOUT * 10);
    assert!(d0.status().is_none());
    ok(&dep);
    h.run();
    // The timeout counts from the moment the job entered the ring.
    assert_eq!(h.exec.timer().map(|t| t.as_nanos()), Some(11 * 100_000_000));
}

#[test]
fn kill_cancels_in_order_and_refuses_new_jobs() {
    let mut h = Harness::<8>::new(2);
    let dep = HostFence::new();
    let d0 = h.submit(0, 1, &[]);
    let d1 = h.submit(1, 1, &[]);
    let d2 = h.submit(2, 1, &[&dep]);
    h.run();
    ok(&h.hw(1));
    h.run();
    h.q.kill();
    assert_eq!(d0.status(), Some(Err(FenceError::CANCELED)));
    // Its hardware had finished: it keeps its own result.
    assert_eq!(d1.status(), Some(Ok(())));
    assert_eq!(d2.status(), Some(Err(FenceError::CANCELED)));
    assert_eq!(h.q.reserve().err(), Some(Error::Killed));
    assert_eq!(Error::Killed.to_errno(), -19);
    h.q.kill();
    ok(&dep);
    ok(&h.hw(0));
    h.run();
    for d in [&d0, &d1, &d2] {
        assert_eq!(d.signal_calls(), 1);
    }
}

#[test]
fn dropping_the_queue_cancels_and_fences_outlive_it() {
    let mut h = Harness::<8>::new(2);
    let dep = HostFence::new();
    let d0 = h.submit(0, 1, &[]);
    let d1 = h.submit(1, 1, &[&dep]);
    h.run();
    let hw0 = h.hw(0);
    let exec = h.exec.clone();
    assert_eq!(dep.queued_callbacks(), 1);
    drop(h);
    assert_eq!(d0.status(), Some(Err(FenceError::CANCELED)));
    assert_eq!(d1.status(), Some(Err(FenceError::CANCELED)));
    // The waiting job took its callback off its dependency when it was freed.
    assert_eq!(dep.queued_callbacks(), 0);
    // The running job took its callback off its hardware fence too (with a kernel
    // `dma_fence`, a fence released with callbacks still queued is a bug the kernel warns
    // about): signalling either fence later pokes nobody.
    assert_eq!(hw0.queued_callbacks(), 0);
    assert!(!exec.is_pending());
    ok(&hw0);
    ok(&dep);
    assert!(!exec.is_pending());
}

#[test]
fn fences_signal_on_other_threads_while_the_queue_drops() {
    for round in 0..if cfg!(miri) { 2 } else { 50 } {
        let mut h = Harness::<8>::new(4);
        let deps: Vec<_> = (0..4).map(|_| HostFence::new()).collect();
        let mut dones = Vec::new();
        for (t, d) in deps.iter().enumerate() {
            dones.push(h.submit(t as u64, 1, &[d]));
        }
        ok(&deps[0]);
        h.run();
        let hw0 = h.hw(0);
        let signaller = {
            let deps = deps.clone();
            std::thread::spawn(move || {
                hw0.signal(Ok(()));
                for d in &deps[1..] {
                    d.signal(Ok(()));
                }
            })
        };
        if round % 2 == 0 {
            h.run();
        }
        drop(h);
        signaller.join().unwrap();
        for d in &dones {
            assert!(d.status().is_some());
            assert_eq!(d.signal_calls(), 1);
        }
    }
}

#[test]
fn commit_wakes_the_executor_and_seqnos_increase() {
    let mut h = Harness::<8>::new(2);
    assert!(!h.exec.is_pending());
    let job = PreparedJob::new(&h.alloc, h.q.config(), Cost(1), MaxDeps(0), 0).unwrap();
    let c = h.q.reserve().unwrap().commit(job);
    assert_eq!(c.seqno, 1);
    assert!(h.exec.is_pending());
    let job = PreparedJob::new(&h.alloc, h.q.config(), Cost(1), MaxDeps(0), 0).unwrap();
    assert_eq!(h.q.submit(job).unwrap().seqno, 2);
    h.exec.take_pending();
    h.q.executor().waker().wake_by_ref();
    assert!(h.exec.is_pending(), "the queue's executor is the harness's");
}

#[test]
fn queue_and_fences_can_cross_threads() {
    fn assert_send<T: Send>() {}
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send::<Queue<MockRing, TestExecutor, ManualClock, 4>>();
    assert_send::<PreparedJob<HostFence, HostAlloc, u64>>();
    assert_send_sync::<HostFence>();
    // A queue behind a mutex, run from another thread, as a workqueue would.
    let mut h = Harness::<4>::new(2);
    let done = h.submit(0, 1, &[]);
    let exec = h.exec.clone();
    let shared = std::sync::Arc::new(std::sync::Mutex::new(h));
    let worker = {
        let shared = shared.clone();
        std::thread::spawn(move || {
            let mut h = shared.lock().unwrap();
            let q = &mut h.q;
            exec.run_until_idle(|| q.run());
            h.hw(0)
        })
    };
    let hw = worker.join().unwrap();
    ok(&hw);
    shared.lock().unwrap().run();
    assert_eq!(done.status(), Some(Ok(())));
}

#[test]
fn dependency_across_queues_propagates_errors() {
    let mut render = Harness::<4>::new(4);
    let mut compute = Harness::<4>::new(4);
    let r0 = render.submit(0, 1, &[]);
    let c0 = compute.submit(10, 1, &[&r0]);
    render.run();
    compute.run();
    assert!(compute.ring().runs.is_empty());
    render.hw(0).signal(Err(FenceError::IO));
    render.run();
    assert!(
        compute.exec.is_pending(),
        "the other queue's done fence wakes this one"
    );
    compute.run();
    assert!(
        compute.ring().runs.is_empty(),
        "a failed dependency keeps the job off the ring"
    );
    assert_eq!(c0.status(), Some(Err(FenceError::IO)));
}

#[test]
fn a_job_that_finishes_inside_the_timeout_handler_is_not_timed_out() {
    for action in [
        TimeoutAction::Fail,
        TimeoutAction::Reset,
        TimeoutAction::Kill,
    ] {
        let mut h = Harness::<8>::new(4);
        h.q.backend_mut().complete_in_timeout = true;
        h.q.backend_mut().timeout_script.push_back(action);
        let done = h.submit(1, 1, &[]);
        h.run();
        h.advance(TIMEOUT);
        // The handler ran, found the job complete, and the job keeps its success.
        assert_eq!(h.q.backend().timeouts.len(), 1, "{action:?}");
        assert_eq!(done.status(), Some(Ok(())), "{action:?}");
    }
}

/// Prepares a job of cost 1 with `deps` and commits it with `commit_direct`.
fn submit_direct<const N: usize>(h: &mut Harness<N>, tag: u64, deps: &[&HostFence]) -> HostFence {
    let mut job =
        PreparedJob::new(&h.alloc, h.q.config(), Cost(1), MaxDeps(deps.len()), tag).unwrap();
    for d in deps {
        job.add_dependency(d).unwrap();
    }
    h.q.reserve().unwrap().commit_direct(job).done
}

#[test]
fn commit_direct_runs_a_ready_job_at_once_and_keeps_order_and_timeouts() {
    let mut h = Harness::<8>::new(2);
    // Nothing waits and nothing is pending: it starts inside the commit, before any run.
    let first = submit_direct(&mut h, 1, &[]);
    assert!(h.ring().run_of(1).is_some());
    // The run that follows (one wake-up per batch) arms its timeout.
    assert!(h.exec.is_pending());
    h.run();
    assert!(h.exec.timer().is_some());
    // A job with a pending dependency waits, and a ready job behind it waits too (order).
    let dep = HostFence::new();
    let second = submit_direct(&mut h, 2, &[&dep]);
    let third = submit_direct(&mut h, 3, &[]);
    assert!(h.ring().run_of(2).is_none() && h.ring().run_of(3).is_none());
    dep.signal(Ok(()));
    h.run();
    assert!(h.ring().run_of(2).is_some());
    // Credits: two on the ring, so the third waits for one to come back.
    assert!(h.ring().run_of(3).is_none());
    h.hw(1).signal(Ok(()));
    h.run();
    assert_eq!(first.status(), Some(Ok(())));
    assert!(h.ring().run_of(3).is_some());
    // The timeout still fires for jobs started either way.
    h.advance(TIMEOUT * 2);
    assert_eq!(second.status(), Some(Err(FenceError::TIMED_OUT)));
    assert_eq!(third.status(), Some(Err(FenceError::TIMED_OUT)));
}

#[test]
fn commits_without_a_run_between_them_wake_the_executor_once() {
    let mut h = Harness::<8>::new(8);
    let before = h.exec.wakes();
    let done: Vec<HostFence> = (0..5).map(|t| h.submit(t, 1, &[])).collect();
    assert_eq!(h.exec.wakes(), before + 1);
    h.run();
    assert!((0..5).all(|t| h.ring().run_of(t).is_some()));
    // After a run, the next commit wakes again.
    h.submit(5, 1, &[]);
    assert_eq!(h.exec.wakes(), before + 2);
    h.run();
    for t in 0..6 {
        h.hw(t).signal(Ok(()));
    }
    h.run();
    assert!(done.iter().all(|d| d.status() == Some(Ok(()))));
}

/// A queue made in place (in a heap block, as a kernel driver makes one too large for its
/// stack) runs jobs as one made by value; a refused configuration leaves the block untouched.
#[test]
fn a_queue_made_in_place_runs_jobs_and_a_refused_one_leaves_its_slot() {
    let exec = TestExecutor::new();
    let alloc = HostAlloc::new();
    let mut slot = Box::new(core::mem::MaybeUninit::<
        Queue<MockRing, TestExecutor, ManualClock, 8>,
    >::uninit());
    let q = Queue::init_in_place(
        &mut slot,
        MockRing::new(),
        exec.clone(),
        ManualClock::new(),
        QueueConfig::new(4).with_timeout(common::TIMEOUT),
    )
    .unwrap();
    assert_eq!(q.pending_jobs(), 0);
    let job = PreparedJob::new(&alloc, q.config(), Cost(1), MaxDeps(0), 7u64).unwrap();
    let done = q.reserve().unwrap().commit(job).done;
    exec.run_until_idle(|| q.run());
    assert_eq!(q.backend().first_runs(), vec![7]);
    ok(&q.backend().runs[0].hw);
    exec.run_until_idle(|| q.run());
    assert_eq!(done.status(), Some(Ok(())));
    // SAFETY: `init_in_place` succeeded: the slot holds a queue, dropped once here.
    unsafe { slot.assume_init_drop() };

    let mut empty = Box::new(core::mem::MaybeUninit::<
        Queue<MockRing, TestExecutor, ManualClock, 8>,
    >::uninit());
    let r = Queue::init_in_place(
        &mut empty,
        MockRing::new(),
        TestExecutor::new(),
        ManualClock::new(),
        QueueConfig::new(0),
    );
    assert!(matches!(r, Err(Error::InvalidConfig)));
}
