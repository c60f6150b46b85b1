// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The sample driver in the kernel (`cargo xtask kernel-build` builds this crate into the
//! test kernel with `CONFIG_GPUKIT_SAMPLE_DRM`).
//!
//! At boot (`late_initcall`, from `init.c`) it creates a faux device `gpukit-sample`, and binds
//! the driver of `driver.rs` to it: a render node appears (`/dev/dri/renderD128` in the test
//! VM). Its environment: `jobqueue`'s `dma_fence`s, a queue run from a work item (`Runner`),
//! done fences put into syncobjs as they are.

#![no_std]

/// Prefix of this crate's kernel log lines.
const __LOG_PREFIX: &[u8] = b"gpukit_sample\0";

#[path = "driver.rs"]
mod driver;

/// The kernel environment of the sample driver.
mod env {
    use core::ptr::NonNull;

    use ::kernel::{prelude::*, sync::Arc};
    use drm_ctx::{drm::SyncobjFence, kernel::DmaFence, Error, Result};
    use jobqueue::kernel::{KernelAlloc, KernelClock, KernelFence, Runner, Timeline, WorkExecutor};
    use jobqueue::{Committed, PreparedJob, Queue, QueueConfig, SignalFence as _};

    pub(crate) type Alloc = drm_ctx::kernel::KernelAlloc;
    pub(crate) type Fence = KernelFence;
    pub(crate) type JobAlloc = KernelAlloc;

    type Q = Queue<super::driver::Ring, WorkExecutor, KernelClock, 8>;

    /// The hardware fences' timeline (one fence context for the pretend ring).
    fn ring() -> Timeline {
        Timeline::new(c"gpukit_sample", c"ring")
    }

    pub(crate) fn signalled_fence() -> Result<Fence> {
        let f = KernelFence::new(&ring(), 0, GFP_KERNEL).map_err(|_| Error::NoMemory)?;
        f.signal(Ok(()));
        Ok(f)
    }

    pub(crate) fn syncobj_fence(done: &Fence) -> Result<SyncobjFence> {
        let raw = NonNull::new(done.as_raw()).ok_or(Error::Invalid)?;
        // SAFETY: `done` holds a reference to the fence for the duration of the call.
        Ok(unsafe { DmaFence::from_raw_get(raw) })
    }

    /// The device's queue, run from a work item.
    pub(crate) struct Jobs {
        runner: Arc<Runner<Q>>,
        alloc: KernelAlloc,
    }

    impl Jobs {
        pub(crate) fn new(config: QueueConfig) -> Result<Self> {
            let clock = KernelClock::new();
            let runner = Runner::<Q>::new(clock, c"gpukit_sample", c"jobs", GFP_KERNEL)
                .map_err(|_| Error::NoMemory)?;
            let q = Queue::new(super::driver::Ring, Runner::executor(&runner), clock, config)
                .map_err(|_| Error::NoMemory)?;
            Runner::install(&runner, q);
            let alloc = runner.allocator(GFP_KERNEL);
            Ok(Jobs { runner, alloc })
        }

        pub(crate) fn alloc(&self) -> &JobAlloc {
            &self.alloc
        }

        pub(crate) fn submit(
            &self,
            job: PreparedJob<Fence, JobAlloc, Fence>,
        ) -> core::result::Result<Committed<Fence>, jobqueue::Error> {
            self.runner
                .with(|q| q.submit(job).map_err(|r| r.error))
                .unwrap_or(Err(jobqueue::Error::Killed))
        }
    }

    impl Drop for Jobs {
        fn drop(&mut self) {
            // Dropping the queue cancels what is still pending (ECANCELED).
            drop(self.runner.take());
        }
    }
}

/// Creates the faux device and binds the driver to it; called once at boot from `init.c`.
#[no_mangle]
pub extern "C" fn gpukit_sample_init() -> core::ffi::c_int {
    match init() {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

fn init() -> drm_ctx::Result {
    let faux = ::kernel::faux::Registration::new(c"gpukit-sample", None)?;
    let parent = drm_ctx::device::Device::from_kernel(faux.as_ref());
    // SAFETY: `faux_device_create` returns only once the faux driver is bound to the device,
    // and it stays bound until the registration is dropped, which never happens (below).
    let bound = unsafe { parent.assume_bound() };
    let drm = driver::probe(bound)?;
    ::kernel::pr_info!(
        "registered a render node on faux device gpukit-sample ({} ioctls)\n",
        <driver::SampleDriver as drm_ctx::drm::Driver>::IOCTLS.len()
    );
    let _ = drm;
    // Built in, with no exit: the device lives as long as the kernel.
    core::mem::forget(faux);
    Ok(())
}
