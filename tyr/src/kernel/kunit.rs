// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_tyr`: the driver's probe and its deferred work inside the kernel, on
//! the simulated Mali-G610 compiled into the same kernel.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_tyr)]
mod tests {
    use crate::backend::{Backend, DmaMemory, Events, IrqLine};
    use crate::kernel::KernelBackend;
    use crate::regs::{GPU_IRQ_RAWSTAT, L2_READY_LO};
    use crate::{gpu, Error};
    use ::kernel::prelude::*;
    use ::kernel::sync::Arc;
    use core::sync::atomic::{AtomicU64, Ordering};
    use register::io::Io;

    #[test]
    fn probe_resets_powers_and_identifies_the_g610() -> Result {
        let b = KernelBackend::g610()?;
        let info = gpu::probe(&b).map_err(|_| EIO)?;
        assert_eq!(info.model.name, "g610");
        assert_eq!(info.raw.gpu_id, 0xa867_0005);
        // The reset and the power-on really happened in the simulated hardware.
        assert_eq!(b.device().with(|g| g.resets_completed()), 1);
        assert_eq!(b.io().read(L2_READY_LO).ready().get(), 1);
        assert!(info.num_as() >= 1);
        // The reset's completion is latched in the raw interrupt status (no handler runs yet
        // to acknowledge it).
        assert_ne!(b.io().read(GPU_IRQ_RAWSTAT).as_raw(), 0);
        assert!(!b.irq_pending(IrqLine::Mmu));
        Ok(())
    }

    #[test]
    fn a_reset_that_never_completes_times_out() -> Result {
        let b = KernelBackend::g610()?;
        b.device().with(|g| g.fail_next_reset());
        assert_eq!(gpu::probe(&b).map(|_| ()), Err(Error::TimedOut));
        Ok(())
    }

    #[test]
    fn dma_memory_is_the_simulators_and_runs_out_cleanly() -> Result {
        let b = KernelBackend::new(mali_sim::Config::g610(), Some(8))?;
        let dma = b.dma();
        let r = dma.alloc(2, 0x4000).map_err(|_| ENOMEM)?;
        assert_eq!(r.addr % 0x4000, 0);
        let word = dma.cpu_u64(r.addr + 8).ok_or(EINVAL)?;
        // SAFETY: `word` points into the live region `r`, valid for atomic accesses.
        unsafe { word.as_ref() }.store(0x1234, Ordering::Relaxed);
        let mut back = [0u8; 8];
        b.device()
            .with(|g| {
                mali_sim::PhysMemory::read_bytes(
                    g.memory(),
                    mali_sim::PhysAddr(r.addr + 8),
                    &mut back,
                )
            })
            .map_err(|_| EIO)?;
        assert_eq!(u64::from_le_bytes(back), 0x1234);
        // Past the simulator's page limit: an error, and nothing else changes.
        assert_eq!(dma.alloc(16, 0x1000), Err(Error::NoMemory));
        // SAFETY: `r` came from `alloc` and nothing uses it any more.
        unsafe { dma.free(r) };
        Ok(())
    }

    struct Counter(AtomicU64);

    impl Events for Counter {
        fn irq(&self) {}

        fn work(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn waking_the_executor_runs_the_drivers_work_on_the_workqueue() -> Result {
        let b = KernelBackend::g610()?;
        let counter = Arc::new(Counter(AtomicU64::new(0)), GFP_KERNEL)?;
        let events: Arc<dyn Events> = counter.clone();
        b.set_events(Some(events));
        jobqueue::Executor::waker(b.executor()).wake_by_ref();
        // The work item runs on the system workqueue: wait for it, a second at most.
        let mut waited = 0;
        while counter.0.load(Ordering::Relaxed) == 0 {
            if waited == 100 {
                return Err(ETIMEDOUT);
            }
            ::kernel::time::delay::fsleep(::kernel::time::Delta::from_millis(10));
            waited += 1;
        }
        assert!(b.executor().runs() >= 1);
        b.set_events(None);
        Ok(())
    }
}
