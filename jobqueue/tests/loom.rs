// SPDX-License-Identifier: GPL-2.0 OR MIT

//! loom models of the races between fence signals and the queue.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p gpukit-jobqueue --test loom --release`.
//! Under `cfg(loom)` the host fence and the test executor use loom's locks, so loom explores
//! the interleavings of a fence signalled on another thread with, respectively, dropping the
//! queue, submitting a job that depends on the fence, the job's timeout, and reusing a retired
//! job's callback node while its previous fence is still signalling.

#![cfg(loom)]

mod common;

use common::{Harness, TIMEOUT};
use jobqueue::host::HostFence;
use jobqueue::{Fence, FenceError, SignalFence};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

#[test]
fn dependency_signal_races_queue_drop() {
    model(|| {
        let mut h = Harness::<4>::new(4);
        let dep = HostFence::new();
        let done = h.submit(0, 1, &[&dep]);
        h.run();
        let d = dep.clone();
        let t = loom::thread::spawn(move || {
            d.signal(Ok(()));
        });
        drop(h);
        t.join().unwrap();
        assert_eq!(done.status(), Some(Err(FenceError::CANCELED)));
        assert_eq!(done.signal_calls(), 1);
        assert_eq!(dep.status(), Some(Ok(())));
    });
}

#[test]
fn hardware_signal_races_queue_drop() {
    model(|| {
        let mut h = Harness::<4>::new(4);
        let done = h.submit(0, 1, &[]);
        h.run();
        let hw = h.hw(0);
        let t = loom::thread::spawn(move || {
            hw.signal(Ok(()));
        });
        drop(h);
        t.join().unwrap();
        assert_eq!(done.status(), Some(Err(FenceError::CANCELED)));
        assert_eq!(done.signal_calls(), 1);
    });
}

#[test]
fn dependency_signal_races_submit() {
    model(|| {
        let mut h = Harness::<4>::new(4);
        let dep = HostFence::new();
        let d = dep.clone();
        let t = loom::thread::spawn(move || {
            d.signal(Ok(()));
        });
        let done = h.submit(0, 1, &[&dep]);
        h.run();
        t.join().unwrap();
        // No wake-up may be lost: whichever order, the job is now on the ring.
        h.run();
        assert_eq!(h.ring().first_runs(), vec![0]);
        h.hw(0).signal(Ok(()));
        h.run();
        assert_eq!(done.status(), Some(Ok(())));
    });
}

#[test]
fn hardware_signal_races_timeout() {
    model(|| {
        let mut h = Harness::<4>::new(4);
        let done = h.submit(0, 1, &[]);
        h.run();
        let hw = h.hw(0);
        let t = loom::thread::spawn(move || {
            hw.signal(Ok(()));
        });
        h.advance(TIMEOUT);
        t.join().unwrap();
        h.run();
        // Either the completion was seen first, or the timeout handler failed the job.
        let r = done.status().expect("done fence signalled");
        assert!(r == Ok(()) || r == Err(FenceError::TIMED_OUT), "{r:?}");
        assert_eq!(done.signal_calls(), 1);
        assert_eq!(h.q.credits_in_use(), 0);
        assert_eq!(h.q.pending_jobs(), 0);
    });
}

/// Counts its wakes.
struct Wakes(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Wakes {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn callback_removal_races_signal() {
    model(|| {
        let wakes = std::sync::Arc::new(Wakes(Default::default()));
        let waker = std::task::Waker::from(wakes.clone());
        let f = HostFence::new();
        let cb = HostFence::new_callback();
        let other = HostFence::new_callback();
        assert_eq!(
            f.add_callback(&other, &waker),
            jobqueue::AddCallback::Queued
        );
        assert_eq!(f.add_callback(&cb, &waker), jobqueue::AddCallback::Queued);
        let s = f.clone();
        let t = loom::thread::spawn(move || {
            s.signal(Ok(()));
        });
        let removed = f.remove_callback(&cb);
        t.join().unwrap();
        // A removed callback is never woken; one that was not removed is woken exactly once.
        let expected = if removed { 1 } else { 2 };
        assert_eq!(wakes.0.load(std::sync::atomic::Ordering::SeqCst), expected);
        assert_eq!(f.queued_callbacks(), 0);
        // Either way the node is free again.
        let g = HostFence::new();
        assert_eq!(g.add_callback(&cb, &waker), jobqueue::AddCallback::Queued);
    });
}

#[test]
fn reused_callback_node_races_its_previous_fence() {
    // One slot, so the second job is made from the first one's memory (`Queue::prepare`): its
    // dependency's callback node may still be on the first job's dependency, whose signal is
    // still waking it, when the queue arms it again. No wake-up may be lost either way.
    model(|| {
        let mut h = Harness::<1>::new(1);
        let (d0, d1) = (HostFence::new(), HostFence::new());
        let mut job =
            h.q.prepare(&h.alloc, jobqueue::Cost(1), jobqueue::MaxDeps(1), 0)
                .unwrap();
        job.add_dependency(&d0).unwrap();
        let done0 = h.q.reserve().unwrap().commit(job).done;
        h.run();
        let (s0, s1) = (d0.clone(), d1.clone());
        let t = loom::thread::spawn(move || {
            s0.signal(Ok(()));
            s1.signal(Ok(()));
        });
        while d0.status().is_none() {
            loom::thread::yield_now();
        }
        // Run now, as a work item run for any reason would, without waiting for `d0`'s
        // wake-up: the node may still be on `d0`'s list.
        h.q.run();
        h.hw(0).signal(Ok(()));
        h.run();
        assert_eq!(done0.status(), Some(Ok(())));
        let mut job =
            h.q.prepare(&h.alloc, jobqueue::Cost(1), jobqueue::MaxDeps(1), 1)
                .unwrap();
        job.add_dependency(&d1).unwrap();
        let done1 = h.q.reserve().unwrap().commit(job).done;
        h.run();
        t.join().unwrap();
        h.run();
        assert_eq!(h.ring().first_runs(), vec![0, 1]);
        h.hw(1).signal(Ok(()));
        h.run();
        assert_eq!(done1.status(), Some(Ok(())));
    });
}
