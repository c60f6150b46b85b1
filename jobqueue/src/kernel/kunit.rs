// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_jobqueue`: `dma_fence`-backed fences and a queue driven by the system
//! workqueue, with lockdep checking the signalling sections.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_jobqueue)]
mod tests {
    use core::ptr::NonNull;
    use core::sync::atomic::{AtomicI32, Ordering};
    use core::task::Waker;
    use core::time::Duration;

    use crate::kernel::{KernelAlloc, KernelCallback, KernelClock, KernelFence, Runner};
    use crate::kernel::{Timeline, WorkExecutor};
    use crate::{
        AddCallback, Backend, Clock, Fence, FenceError, PreparedJob, Queue, QueueConfig, RunJob,
        SignalCtx, SignalFence, TimedOutJob, TimeoutAction,
    };
    use crate::{Cost, MaxDeps};
    use ::kernel::bindings;
    use ::kernel::prelude::*;
    use ::kernel::sync::{Arc, Completion};
    use ::kernel::time::Delta;
    use ::kernel::workqueue;

    // Test helpers of `kernel/fence.c`.
    extern "C" {
        fn gpukit_test_irq_queue(
            f: unsafe extern "C" fn(*mut core::ffi::c_void),
            data: *mut core::ffi::c_void,
        ) -> *mut core::ffi::c_void;
        fn gpukit_test_irq_done(t: *mut core::ffi::c_void) -> core::ffi::c_int;
        fn gpukit_test_irq_free(t: *mut core::ffi::c_void);
        fn gpukit_test_array_of_one(f: *mut bindings::dma_fence) -> *mut bindings::dma_fence;
    }

    /// A pretend hardware ring: hands out hardware fences prepared in advance (running a job
    /// must not allocate).
    struct Ring {
        hw: [Option<KernelFence>; 4],
        next: usize,
    }

    impl Ring {
        fn new() -> Result<Self> {
            let timeline = Timeline::new(c"gpukit-kunit", c"ring");
            let mut hw: [Option<KernelFence>; 4] = [None, None, None, None];
            for (seqno, f) in (1..).zip(&mut hw) {
                *f = Some(KernelFence::new(&timeline, seqno, GFP_KERNEL)?);
            }
            Ok(Ring { hw, next: 0 })
        }
    }

    impl Backend for Ring {
        type Fence = KernelFence;
        type Alloc = KernelAlloc;
        type Payload = u32;

        fn run_job(
            &mut self,
            _job: RunJob<'_, u32>,
            _ctx: &SignalCtx<'_>,
        ) -> core::result::Result<KernelFence, FenceError> {
            let f = self
                .hw
                .get(self.next)
                .cloned()
                .flatten()
                .ok_or(FenceError::IO)?;
            self.next += 1;
            Ok(f)
        }

        fn timed_out(&mut self, _job: TimedOutJob<'_, u32>, _ctx: &SignalCtx<'_>) -> TimeoutAction {
            TimeoutAction::Fail
        }
    }

    type Q = Queue<Ring, WorkExecutor, KernelClock, 8>;

    fn hw(runner: &Arc<Runner<Q>>, i: usize) -> Result<KernelFence> {
        runner
            .with(|q| q.backend().hw[i].clone())
            .flatten()
            .ok_or(EINVAL)
    }

    fn started(runner: &Arc<Runner<Q>>) -> usize {
        runner.with(|q| q.backend().next).unwrap_or(0)
    }

    fn sleep_ms(ms: i64) {
        ::kernel::time::delay::fsleep(Delta::from_millis(ms));
    }

    /// Waits (up to about a second) until `cond` holds, letting the workqueue run.
    fn settle(mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..100 {
            if cond() {
                return true;
            }
            sleep_ms(10);
        }
        cond()
    }

    fn new_queue(config: QueueConfig) -> Result<(Arc<Runner<Q>>, KernelAlloc)> {
        let clock = KernelClock::new();
        let runner = Runner::<Q>::new(clock, c"gpukit-kunit", c"queue", GFP_KERNEL)?;
        let q = Queue::new(Ring::new()?, Runner::executor(&runner), clock, config)?;
        Runner::install(&runner, q);
        let alloc = runner.allocator(GFP_KERNEL);
        Ok((runner, alloc))
    }

    /// Prepares a job (outside the runner's lock: preparing allocates) and commits it.
    fn submit(
        runner: &Arc<Runner<Q>>,
        job: PreparedJob<KernelFence, KernelAlloc, u32>,
    ) -> Result<KernelFence> {
        runner
            .with(|q| q.submit(job).map(|c| c.done))
            .ok_or(EINVAL)?
            .map_err(|r| r.error.into())
    }

    fn job(
        alloc: &KernelAlloc,
        config: &QueueConfig,
        deps: &[&KernelFence],
    ) -> Result<PreparedJob<KernelFence, KernelAlloc, u32>> {
        let mut job = PreparedJob::new(alloc, config, Cost(1), MaxDeps(deps.len()), 0u32)
            .map_err(|r| r.error)?;
        for d in deps {
            job.add_dependency(d)?;
        }
        Ok(job)
    }

    #[test]
    fn fence_signals_once_and_short_circuits() -> Result {
        let timeline = Timeline::new(c"gpukit-kunit", c"loose");
        let f = KernelFence::new(&timeline, 1, GFP_KERNEL)?;
        let cb = KernelCallback::new(GFP_KERNEL)?;
        assert_eq!(f.status(), None);
        assert_eq!(f.context_and_seqno(), (timeline.context(), 1));
        assert_eq!(f.add_callback(&cb, Waker::noop()), AddCallback::Queued);
        assert_eq!(f.add_callback(&cb, Waker::noop()), AddCallback::Busy);
        assert!(f.signal(Err(FenceError::IO)));
        assert!(!f.signal(Ok(())));
        assert_eq!(f.status(), Some(Err(FenceError::IO)));
        // The C view agrees: signalled, with the error.
        // SAFETY: `f` holds a reference to a live fence.
        assert_eq!(
            unsafe { bindings::dma_fence_get_status(f.as_raw()) },
            crate::error::EIO
        );
        assert_eq!(
            f.add_callback(&cb, Waker::noop()),
            AddCallback::Signalled(Err(FenceError::IO))
        );
        let e: ::kernel::error::Error = FenceError::CANCELED.into();
        assert_eq!(e.to_errno(), crate::error::ECANCELED);
        Ok(())
    }

    #[test]
    fn removed_callback_is_not_queued() -> Result {
        let timeline = Timeline::new(c"gpukit-kunit", c"loose");
        let f = KernelFence::new(&timeline, 1, GFP_KERNEL)?;
        let g = KernelFence::new(&timeline, 2, GFP_KERNEL)?;
        let a = KernelCallback::new(GFP_KERNEL)?;
        let b = KernelCallback::new(GFP_KERNEL)?;
        assert_eq!(f.add_callback(&a, Waker::noop()), AddCallback::Queued);
        assert_eq!(f.add_callback(&b, Waker::noop()), AddCallback::Queued);
        // Not queued on `g`: taking it back from there changes nothing.
        assert!(!g.remove_callback(&a));
        assert!(f.remove_callback(&a));
        assert!(!f.remove_callback(&a));
        assert!(f.remove_callback(&b));
        // Both are free to be queued again, on either fence.
        assert_eq!(g.add_callback(&a, Waker::noop()), AddCallback::Queued);
        assert_eq!(f.add_callback(&b, Waker::noop()), AddCallback::Queued);
        assert!(f.signal(Ok(())));
        assert!(!f.remove_callback(&b));
        // `b` fired: it can be queued on another fence.
        assert_eq!(g.add_callback(&b, Waker::noop()), AddCallback::Queued);
        // A node dropped while queued stays alive until its fence signals.
        drop(a);
        drop(b);
        assert!(g.signal(Ok(())));
        Ok(())
    }

    #[test]
    fn fence_wakes_a_sleeper_from_a_work_item() -> Result {
        let timeline = Timeline::new(c"gpukit-kunit", c"loose");
        let f = KernelFence::new(&timeline, 1, GFP_KERNEL)?;
        assert_eq!(f.wait_timeout_ms(20), None);
        let g = f.clone();
        crate::kernel::default_workqueue().try_spawn(GFP_KERNEL, move || {
            g.signal(Ok(()));
        })?;
        assert_eq!(f.wait_timeout_ms(2000), Some(Ok(())));
        Ok(())
    }

    #[test]
    fn done_fences_are_dma_fences_in_commit_order() -> Result {
        let config = QueueConfig::new(4);
        let (runner, alloc) = new_queue(config)?;
        let a = job(&alloc, &config, &[])?;
        let b = job(&alloc, &config, &[])?;
        // Committed in the other order than prepared: sequence numbers follow the commits.
        let done_b = submit(&runner, b)?;
        let done_a = submit(&runner, a)?;
        let context = runner.timeline().context();
        assert_eq!(done_b.context_and_seqno(), (context, 1));
        assert_eq!(done_a.context_and_seqno(), (context, 2));
        assert!(settle(|| started(&runner) == 2));
        hw(&runner, 0)?.signal(Ok(()));
        hw(&runner, 1)?.signal(Ok(()));
        assert_eq!(done_a.wait_timeout_ms(2000), Some(Ok(())));
        assert_eq!(done_b.status(), Some(Ok(())));
        drop(runner.take());
        Ok(())
    }

    /// What the waiting thread saw.
    #[pin_data]
    struct Waited {
        #[pin]
        done: Completion,
        result: AtomicI32,
    }

    #[test]
    fn done_fence_waited_with_dma_fence_wait_on_another_thread() -> Result {
        let config = QueueConfig::new(4);
        let (runner, alloc) = new_queue(config)?;
        let done = submit(&runner, job(&alloc, &config, &[])?)?;
        let waited = Arc::pin_init(
            pin_init!(Waited { done <- Completion::new(), result: AtomicI32::new(1) }),
            GFP_KERNEL,
        )?;
        let (fence, seen) = (done.clone(), waited.clone());
        // A kernel thread of the long-running workqueue sleeps in `dma_fence_wait_timeout`.
        workqueue::system_long().try_spawn(GFP_KERNEL, move || {
            let r = match fence.wait(false, 5000) {
                Ok(Some(Ok(()))) => 0,
                Ok(Some(Err(e))) => e.to_errno(),
                Ok(None) => 2,
                Err(e) => e.to_errno(),
            };
            seen.result.store(r, Ordering::Release);
            seen.done.complete_all();
        })?;
        assert!(settle(|| started(&runner) == 1));
        sleep_ms(20);
        // Still sleeping: the fence has not signalled.
        assert_eq!(waited.result.load(Ordering::Acquire), 1);
        hw(&runner, 0)?.signal(Err(FenceError::IO));
        waited.done.wait_for_completion();
        assert_eq!(waited.result.load(Ordering::Acquire), crate::error::EIO);
        drop(runner.take());
        Ok(())
    }

    /// Wraps `f` in a `dma_fence_array`: a fence of another implementation that signals, with
    /// `f`'s error, once `f` has.
    ///
    /// Signalling is enabled on the array at once, as a consumer that registers a callback
    /// does. Linux 7.2's array passes a member's error on only through its callbacks: when its
    /// `signaled` fast path notices the member first (`dma_fence_is_signaled` on an array whose
    /// signalling was never enabled), it signals without the error.
    fn foreign(f: &KernelFence) -> Result<KernelFence> {
        // SAFETY: `f` is live; the helper returns NULL or a new fence with one reference.
        let p = unsafe { gpukit_test_array_of_one(f.as_raw()) };
        // SAFETY: That reference is handed over.
        let array = NonNull::new(p)
            .map(|p| unsafe { KernelFence::from_raw(p) })
            .ok_or(ENOMEM)?;
        // SAFETY: `array` is live.
        unsafe { bindings::dma_fence_enable_sw_signaling(array.as_raw()) };
        Ok(array)
    }

    #[test]
    fn foreign_dependencies() -> Result {
        let config = QueueConfig::new(8);
        let (runner, alloc) = new_queue(config)?;
        let timeline = Timeline::new(c"gpukit-kunit", c"other-driver");

        // Signalled after submit.
        let inner = KernelFence::new(&timeline, 1, GFP_KERNEL)?;
        let outer = foreign(&inner)?;
        assert_ne!(outer.context_and_seqno().0, timeline.context());
        let done = submit(&runner, job(&alloc, &config, &[&outer])?)?;
        sleep_ms(30);
        assert_eq!(started(&runner), 0);
        inner.signal(Ok(()));
        assert!(settle(|| started(&runner) == 1));
        hw(&runner, 0)?.signal(Ok(()));
        assert_eq!(done.wait_timeout_ms(2000), Some(Ok(())));

        // Signalled with an error after submit: the job fails with it and never runs.
        let inner = KernelFence::new(&timeline, 2, GFP_KERNEL)?;
        let outer = foreign(&inner)?;
        let done = submit(&runner, job(&alloc, &config, &[&outer])?)?;
        inner.signal(Err(FenceError::new(-71).ok_or(EINVAL)?));
        let r = done.wait_timeout_ms(2000);
        assert_eq!(r.map(|r| r.map_err(|e| e.to_errno())), Some(Err(-71)));
        assert_eq!(started(&runner), 1);

        // Already signalled (the kernel's stub fence): needs no slot, runs at once.
        // SAFETY: `dma_fence_get_stub` returns a new reference to a signalled fence.
        let stub = NonNull::new(unsafe { bindings::dma_fence_get_stub() }).ok_or(EINVAL)?;
        // SAFETY: That reference is handed over.
        let stub = unsafe { KernelFence::from_raw(stub) };
        assert_eq!(stub.status(), Some(Ok(())));
        let mut j =
            PreparedJob::new(&alloc, &config, Cost(1), MaxDeps(0), 0u32).map_err(|r| r.error)?;
        j.add_dependency(&stub)?;
        assert_eq!(j.pending_dependencies(), 0);
        let done = submit(&runner, j)?;
        assert!(settle(|| started(&runner) == 2));
        hw(&runner, 1)?.signal(Ok(()));
        assert_eq!(done.wait_timeout_ms(2000), Some(Ok(())));

        // Already signalled with an error: no slot either, and the job fails with it.
        let inner = KernelFence::new(&timeline, 3, GFP_KERNEL)?;
        inner.signal(Err(FenceError::CANCELED));
        let outer = foreign(&inner)?;
        assert!(settle(|| outer.status().is_some()));
        assert_eq!(outer.status(), Some(Err(FenceError::CANCELED)));
        let mut j =
            PreparedJob::new(&alloc, &config, Cost(1), MaxDeps(0), 0u32).map_err(|r| r.error)?;
        j.add_dependency(&outer)?;
        let done = submit(&runner, j)?;
        assert_eq!(done.wait_timeout_ms(2000), Some(Err(FenceError::CANCELED)));
        assert_eq!(started(&runner), 2);
        drop(runner.take());
        Ok(())
    }

    /// The interrupt handler of the test: signals the hardware fence it is given.
    unsafe extern "C" fn signal_from_irq(data: *mut core::ffi::c_void) {
        // SAFETY: `data` is the `KernelFence` the test passed, alive until the irq_work was
        // synced.
        let fence = unsafe { &*data.cast::<KernelFence>() };
        fence.signal(Ok(()));
    }

    #[test]
    fn hardware_fence_signalled_from_hard_irq() -> Result {
        let config = QueueConfig::new(4);
        let (runner, alloc) = new_queue(config)?;
        let done = submit(&runner, job(&alloc, &config, &[])?)?;
        assert!(settle(|| started(&runner) == 1));
        let fence = hw(&runner, 0)?;
        let data = core::ptr::from_ref(&fence).cast_mut().cast();
        // SAFETY: `signal_from_irq` reads `fence`, which outlives the irq_work (synced by
        // `gpukit_test_irq_free` below).
        let irq = unsafe { gpukit_test_irq_queue(signal_from_irq, data) };
        if irq.is_null() {
            return Err(ENOMEM);
        }
        let finished = done.wait_timeout_ms(2000);
        // SAFETY: `irq` came from `gpukit_test_irq_queue`.
        let ran = unsafe { gpukit_test_irq_done(irq) };
        // SAFETY: As above; waits for the work to finish, then frees it.
        unsafe { gpukit_test_irq_free(irq) };
        assert_eq!(finished, Some(Ok(())));
        // It ran, in hard-IRQ context.
        assert_eq!(ran, 2);
        drop(runner.take());
        Ok(())
    }

    #[cfg(CONFIG_DRM)]
    #[test]
    fn done_fence_in_a_drm_syncobj() -> Result {
        extern "C" {
            fn gpukit_test_syncobj_create() -> *mut core::ffi::c_void;
            fn gpukit_test_syncobj_replace_fence(
                s: *mut core::ffi::c_void,
                f: *mut bindings::dma_fence,
            );
            fn gpukit_test_syncobj_fence_get(s: *mut core::ffi::c_void)
                -> *mut bindings::dma_fence;
            fn gpukit_test_syncobj_put(s: *mut core::ffi::c_void);
        }
        let config = QueueConfig::new(4);
        let (runner, alloc) = new_queue(config)?;
        let done = submit(&runner, job(&alloc, &config, &[])?)?;
        // SAFETY: Returns NULL or a syncobj with one reference, which this test owns.
        let syncobj = unsafe { gpukit_test_syncobj_create() };
        if syncobj.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: `syncobj` and `done` are live; the syncobj takes its own reference.
        unsafe { gpukit_test_syncobj_replace_fence(syncobj, done.as_raw()) };
        // SAFETY: `syncobj` is live; returns NULL or a new reference to its fence.
        let got = NonNull::new(unsafe { gpukit_test_syncobj_fence_get(syncobj) }).ok_or(EINVAL)?;
        // SAFETY: That reference is handed over.
        let got = unsafe { KernelFence::from_raw(got) };
        assert!(got.ptr_eq(&done));
        drop(done);
        assert!(settle(|| started(&runner) == 1));
        assert_eq!(got.wait_timeout_ms(20), None);
        hw(&runner, 0)?.signal(Ok(()));
        // Waited on through the syncobj's reference only.
        assert_eq!(got.wait_timeout_ms(2000), Some(Ok(())));
        // SAFETY: The test's syncobj reference is given back; it drops its fence reference.
        unsafe { gpukit_test_syncobj_put(syncobj) };
        drop(runner.take());
        Ok(())
    }

    #[test]
    fn job_waits_for_dependency_then_completes_with_hw_error() -> Result {
        let config = QueueConfig::new(4);
        let (runner, alloc) = new_queue(config)?;
        let dep = KernelFence::new(&Timeline::new(c"gpukit-kunit", c"dep"), 1, GFP_KERNEL)?;
        let mut job =
            PreparedJob::new(&alloc, &config, Cost(2), MaxDeps(1), 7u32).map_err(|r| r.error)?;
        job.add_dependency(&dep)?;
        let done = runner
            .with(|q| q.reserve().map(|r| r.commit(job).done))
            .ok_or(EINVAL)??;
        // Give the workqueue time to (wrongly) start it: it must wait for the dependency.
        sleep_ms(50);
        assert_eq!(started(&runner), 0);
        dep.signal(Ok(()));
        assert!(settle(|| started(&runner) == 1));
        hw(&runner, 0)?.signal(Err(FenceError::IO));
        assert_eq!(done.wait_timeout_ms(2000), Some(Err(FenceError::IO)));
        assert!(runner.runs() >= 2);
        drop(runner.take());
        Ok(())
    }

    #[test]
    fn credits_keep_jobs_in_order() -> Result {
        let config = QueueConfig::new(3);
        let (runner, alloc) = new_queue(config)?;
        let a =
            PreparedJob::new(&alloc, &config, Cost(2), MaxDeps(0), 1u32).map_err(|r| r.error)?;
        let b =
            PreparedJob::new(&alloc, &config, Cost(2), MaxDeps(0), 2u32).map_err(|r| r.error)?;
        let done_a = submit(&runner, a)?;
        let done_b = submit(&runner, b)?;
        assert!(settle(|| started(&runner) == 1));
        // Only 3 credits: the second job must wait for the first to finish.
        assert_eq!(started(&runner), 1);
        assert_eq!(runner.with(|q| q.credits_in_use()), Some(2));
        hw(&runner, 0)?.signal(Ok(()));
        assert_eq!(done_a.wait_timeout_ms(2000), Some(Ok(())));
        assert!(settle(|| started(&runner) == 2));
        hw(&runner, 1)?.signal(Ok(()));
        assert_eq!(done_b.wait_timeout_ms(2000), Some(Ok(())));
        drop(runner.take());
        Ok(())
    }

    #[test]
    fn timeout_fires_once_at_the_deadline() -> Result {
        let config = QueueConfig::new(4).with_timeout(Duration::from_millis(50));
        let (runner, alloc) = new_queue(config)?;
        let clock = KernelClock::new();
        let done = submit(&runner, job(&alloc, &config, &[])?)?;
        // The hardware never signals: the timeout handler fails the job.
        assert_eq!(done.wait_timeout_ms(3000), Some(Err(FenceError::TIMED_OUT)));
        let elapsed = clock.now().as_nanos();
        assert!(elapsed >= 50_000_000);
        // One timer, armed for the deadline, and no periodic polling in between: the queue ran
        // for the submission, the start and the timeout.
        assert_eq!(runner.timer_fires(), 1);
        assert!(runner.runs() <= 3);
        drop(runner.take());
        Ok(())
    }

    #[test]
    fn dropping_the_queue_cancels_pending_jobs() -> Result {
        let config = QueueConfig::new(4);
        let (runner, alloc) = new_queue(config)?;
        let dep = KernelFence::new(&Timeline::new(c"gpukit-kunit", c"dep"), 1, GFP_KERNEL)?;
        let done = submit(&runner, job(&alloc, &config, &[&dep])?)?;
        drop(runner.take());
        assert_eq!(done.status(), Some(Err(FenceError::CANCELED)));
        // The dependency signalling later pokes a runner with no queue: nothing happens.
        dep.signal(Ok(()));
        Ok(())
    }

    #[test]
    fn dropped_prepared_job_cancels_its_done_fence() -> Result {
        let config = QueueConfig::new(4);
        let (runner, alloc) = new_queue(config)?;
        let first = job(&alloc, &config, &[])?;
        let second = job(&alloc, &config, &[first.done_fence()])?;
        let first_done = first.done_fence().clone();
        drop(first);
        assert_eq!(first_done.status(), Some(Err(FenceError::CANCELED)));
        // A job of the same submission that depended on it fails without running.
        let done = submit(&runner, second)?;
        assert_eq!(done.wait_timeout_ms(2000), Some(Err(FenceError::CANCELED)));
        assert_eq!(started(&runner), 0);
        drop(runner.take());
        Ok(())
    }

    /// The check of the signalling annotations, proven to fire: allocating memory that may
    /// reclaim inside a signalling section is a lockdep report. Built only with
    /// `cargo xtask kernel-test --lockdep-canary`, whose run must then fail.
    #[cfg(gpukit_lockdep_canary)]
    #[test]
    fn lockdep_canary_allocates_in_a_signalling_section() -> Result {
        let section = crate::kernel::SignallingSection::begin();
        let v = KVec::<u64>::with_capacity(512, GFP_KERNEL)?;
        drop(section);
        drop(v);
        Ok(())
    }
}
