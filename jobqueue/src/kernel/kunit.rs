// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_jobqueue`: kernel fences and a queue driven by the system workqueue.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_jobqueue)]
mod tests {
    use core::task::Waker;
    use core::time::Duration;

    use crate::kernel::WorkExecutor;
    use crate::kernel::{KernelAlloc, KernelCallback, KernelClock, KernelFence, Runner};
    use crate::{
        AddCallback, Backend, Fence, FenceError, PreparedJob, Queue, QueueConfig, RunJob,
        SignalCtx, SignalFence, TimedOutJob, TimeoutAction,
    };
    use ::kernel::prelude::*;
    use ::kernel::sync::Arc;
    use ::kernel::workqueue;

    /// A pretend hardware ring: hands out hardware fences prepared in advance (running a job
    /// must not allocate).
    struct Ring {
        hw: [Option<KernelFence>; 4],
        next: usize,
    }

    impl Ring {
        fn new() -> Result<Self> {
            let mut hw: [Option<KernelFence>; 4] = [None, None, None, None];
            for f in &mut hw {
                *f = Some(KernelFence::new(GFP_KERNEL)?);
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

    fn hw(runner: &Arc<Runner<Q>>, i: usize) -> Option<KernelFence> {
        runner.with(|q| q.backend().hw[i].clone()).flatten()
    }

    fn started(runner: &Arc<Runner<Q>>) -> usize {
        runner.with(|q| q.backend().next).unwrap_or(0)
    }

    /// Waits (up to about a second) until `cond` holds, letting the workqueue run.
    fn settle(mut cond: impl FnMut() -> bool) -> bool {
        for _ in 0..100 {
            if cond() {
                return true;
            }
            ::kernel::time::delay::fsleep(::kernel::time::Delta::from_millis(10));
        }
        cond()
    }

    fn new_queue(config: QueueConfig) -> Result<(Arc<Runner<Q>>, KernelAlloc)> {
        let clock = KernelClock::new();
        let runner = Runner::<Q>::new(clock, GFP_KERNEL)?;
        let q = Queue::new(Ring::new()?, Runner::executor(&runner), clock, config)?;
        Runner::install(&runner, q);
        Ok((runner, KernelAlloc::new(GFP_KERNEL)))
    }

    #[test]
    fn fence_signals_once_and_short_circuits() -> Result {
        let f = KernelFence::new(GFP_KERNEL)?;
        let cb = KernelCallback::new(GFP_KERNEL)?;
        assert_eq!(f.status(), None);
        assert_eq!(f.add_callback(&cb, Waker::noop()), AddCallback::Queued);
        assert_eq!(f.add_callback(&cb, Waker::noop()), AddCallback::Busy);
        assert!(f.signal(Err(FenceError::IO)));
        assert!(!f.signal(Ok(())));
        assert_eq!(f.status(), Some(Err(FenceError::IO)));
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
        let f = KernelFence::new(GFP_KERNEL)?;
        let a = KernelCallback::new(GFP_KERNEL)?;
        let b = KernelCallback::new(GFP_KERNEL)?;
        assert_eq!(f.add_callback(&a, Waker::noop()), AddCallback::Queued);
        assert_eq!(f.add_callback(&b, Waker::noop()), AddCallback::Queued);
        // `a` is behind `b` in the list, `b` at its head.
        assert!(f.remove_callback(&a));
        assert!(!f.remove_callback(&a));
        assert!(f.remove_callback(&b));
        // Both are free to be queued again.
        assert_eq!(f.add_callback(&a, Waker::noop()), AddCallback::Queued);
        assert_eq!(f.add_callback(&b, Waker::noop()), AddCallback::Queued);
        assert!(f.signal(Ok(())));
        assert!(!f.remove_callback(&a));
        Ok(())
    }

    #[test]
    fn fence_wakes_a_sleeper_from_a_work_item() -> Result {
        let f = KernelFence::new(GFP_KERNEL)?;
        assert_eq!(f.wait_timeout_ms(20), None);
        let g = f.clone();
        workqueue::system().try_spawn(GFP_KERNEL, move || {
            g.signal(Ok(()));
        })?;
        assert_eq!(f.wait_timeout_ms(2000), Some(Ok(())));
        Ok(())
    }

    #[test]
    fn job_waits_for_dependency_then_completes_with_hw_error() -> Result {
        let config = QueueConfig::new(4);
        let (runner, alloc) = new_queue(config)?;
        let dep = KernelFence::new(GFP_KERNEL)?;
        let mut job = PreparedJob::new(&alloc, &config, 2, 1, 7u32).map_err(|r| r.error)?;
        job.add_dependency(&dep)?;
        let done = runner
            .with(|q| q.reserve().map(|r| r.commit(job).done))
            .ok_or(EINVAL)??;
        // Give the workqueue time to (wrongly) start it: it must wait for the dependency.
        ::kernel::time::delay::fsleep(::kernel::time::Delta::from_millis(50));
        assert_eq!(started(&runner), 0);
        dep.signal(Ok(()));
        assert!(settle(|| started(&runner) == 1));
        hw(&runner, 0).ok_or(EINVAL)?.signal(Err(FenceError::IO));
        assert_eq!(done.wait_timeout_ms(2000), Some(Err(FenceError::IO)));
        assert!(runner.runs() >= 2);
        drop(runner.take());
        Ok(())
    }

    #[test]
    fn credits_keep_jobs_in_order() -> Result {
        let config = QueueConfig::new(3);
        let (runner, alloc) = new_queue(config)?;
        let a = PreparedJob::new(&alloc, &config, 2, 0, 1u32).map_err(|r| r.error)?;
        let b = PreparedJob::new(&alloc, &config, 2, 0, 2u32).map_err(|r| r.error)?;
        let done_a = runner.with(|q| q.submit(a).map(|c| c.done)).ok_or(EINVAL)?;
        let done_b = runner.with(|q| q.submit(b).map(|c| c.done)).ok_or(EINVAL)?;
        let (Ok(done_a), Ok(done_b)) = (done_a, done_b) else {
            return Err(EINVAL);
        };
        assert!(settle(|| started(&runner) == 1));
        // Only 3 credits: the second job must wait for the first to finish.
        assert_eq!(started(&runner), 1);
        assert_eq!(runner.with(|q| q.credits_in_use()), Some(2));
        hw(&runner, 0).ok_or(EINVAL)?.signal(Ok(()));
        assert_eq!(done_a.wait_timeout_ms(2000), Some(Ok(())));
        assert!(settle(|| started(&runner) == 2));
        hw(&runner, 1).ok_or(EINVAL)?.signal(Ok(()));
        assert_eq!(done_b.wait_timeout_ms(2000), Some(Ok(())));
        drop(runner.take());
        Ok(())
    }

    #[test]
    fn timeout_fails_the_job_on_a_delayed_work_item() -> Result {
        let config = QueueConfig::new(4).with_timeout(Duration::from_millis(30));
        let (runner, alloc) = new_queue(config)?;
        let job = PreparedJob::new(&alloc, &config, 1, 0, 3u32).map_err(|r| r.error)?;
        let done = runner
            .with(|q| q.submit(job).map(|c| c.done))
            .ok_or(EINVAL)?;
        let Ok(done) = done else { return Err(EINVAL) };
        // The hardware never signals: the timeout handler fails the job.
        assert_eq!(done.wait_timeout_ms(3000), Some(Err(FenceError::TIMED_OUT)));
        drop(runner.take());
        Ok(())
    }

    #[test]
    fn dropping_the_queue_cancels_pending_jobs() -> Result {
        let config = QueueConfig::new(4);
        let (runner, alloc) = new_queue(config)?;
        let dep = KernelFence::new(GFP_KERNEL)?;
        let mut job = PreparedJob::new(&alloc, &config, 1, 1, 4u32).map_err(|r| r.error)?;
        job.add_dependency(&dep)?;
        let done = runner
            .with(|q| q.submit(job).map(|c| c.done))
            .ok_or(EINVAL)?;
        let Ok(done) = done else { return Err(EINVAL) };
        drop(runner.take());
        assert_eq!(done.status(), Some(Err(FenceError::CANCELED)));
        // The dependency signalling later pokes a runner with no queue: nothing happens.
        dep.signal(Ok(()));
        Ok(())
    }
}
