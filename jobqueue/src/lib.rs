// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Dependency-tracking job queue for firmware-scheduled GPUs.
//!
//! On GPUs whose firmware schedules work (Arm Mali CSF and most recent designs), the kernel no
//! longer decides which job runs next. It only has to make sure that a job enters the hardware
//! ring once everything it depends on has finished, in submission order, and without
//! overflowing the ring. This crate is that component (what the DRM community calls a job
//! queue, in place of `drm_gpu_scheduler`), written so that the classic failure modes cannot
//! happen: allocating memory on the way to signalling a fence, fences that never signal, and
//! objects freed while a fence callback still points at them.
//!
//! - [`fence`]: the [`Fence`] abstraction (status with error, preallocated callbacks);
//! - [`mem`]: the [`Allocator`] seam, usable only while preparing a job;
//! - [`job`]: [`PreparedJob`] (fallible, allocating) and [`Committed`];
//! - [`queue`]: the [`Queue`], the driver's [`Backend`], timeouts and teardown, and the memory
//!   of retired jobs that [`Queue::prepare`] reuses;
//! - [`exec`], [`time`]: the executor and clock seams (no threads of its own);
//! - `host` (feature `std`): host fences, allocator, clock and a deterministic executor;
//! - `kernel` (feature `kernel`, built inside a Linux tree by `cargo xtask kernel-build`):
//!   fences that are the kernel's `struct dma_fence` (one fence context per queue, signalling
//!   safe in hard-IRQ context), and a runner that drives the queue from a work item inside
//!   `dma_fence` signalling sections, with a high-resolution timer for timeouts.
//!
//! # Examples
//!
//! A driver's ring, a job with a dependency, and a job that hangs and times out, driven by the
//! host's deterministic executor and manual clock (in the kernel, the `kernel` module's runner
//! and timer do the driving):
//!
//! ```
//! use core::time::Duration;
//! use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
//! use jobqueue::{
//!     Backend, Clock, Cost, Error, Fence, FenceError, MaxDeps, PreparedJob, Queue, QueueConfig,
//!     RunJob, SignalCtx, SignalFence, TimedOutJob, TimeoutAction,
//! };
//!
//! /// The driver's ring: a job's payload says whether the "hardware" finishes it at once.
//! struct Ring;
//!
//! impl Backend for Ring {
//!     type Fence = HostFence;
//!     type Alloc = HostAlloc;
//!     type Payload = bool;
//!
//!     fn run_job(&mut self, job: RunJob<'_, bool>, _: &SignalCtx<'_>) -> Result<HostFence, FenceError> {
//!         // The hardware fence; a real driver rings a doorbell here (and must not allocate:
//!         // a fence for it would be prepared with the job).
//!         Ok(if *job.payload() { HostFence::signalled(Ok(())) } else { HostFence::new() })
//!     }
//!
//!     fn timed_out(&mut self, _: TimedOutJob<'_, bool>, _: &SignalCtx<'_>) -> TimeoutAction {
//!         TimeoutAction::Fail // the job fails with ETIMEDOUT
//!     }
//! }
//!
//! fn main() -> Result<(), Error> {
//!     let (exec, clock) = (TestExecutor::new(), ManualClock::new());
//!     let config = QueueConfig::new(8).with_timeout(Duration::from_millis(100));
//!     let mut q: Queue<Ring, _, _, 16> = Queue::new(Ring, exec.clone(), clock.clone(), config)?;
//!     let alloc = HostAlloc::new();
//!
//!     // 1. Prepare: may fail, allocates everything.
//!     let mut job = PreparedJob::new(&alloc, q.config(), Cost(2), MaxDeps(1), true)?;
//!     let dep = HostFence::new();
//!     job.add_dependency(&dep)?;
//!     // 2. Commit: cannot fail once the slot is reserved, allocates nothing.
//!     let done = q.reserve()?.commit(job).done;
//!     // 3. The executor's work item runs the queue: the job waits for its dependency.
//!     exec.run_until_idle(|| q.run());
//!     assert_eq!(done.status(), None);
//!     dep.signal(Ok(()));
//!     exec.run_until_idle(|| q.run());
//!     assert_eq!(done.status(), Some(Ok(())));
//!
//!     // A job whose hardware never finishes: when the clock passes its deadline, the
//!     // executor's timer fires, the queue runs, the driver's `timed_out` decides.
//!     let hung = PreparedJob::new(&alloc, q.config(), Cost(1), MaxDeps(0), false)?;
//!     let done = q.reserve()?.commit(hung).done;
//!     exec.run_until_idle(|| q.run());
//!     clock.advance(Duration::from_millis(150));
//!     assert!(exec.fire_timers(clock.now()));
//!     exec.run_until_idle(|| q.run());
//!     assert_eq!(done.status(), Some(Err(FenceError::TIMED_OUT)));
//!     Ok(())
//! }
//! ```
//!
//! # Features
//!
//! The default features are empty: the crate is `no_std` and uses no `alloc`. `std` adds the
//! `host` module and `kernel` the `kernel` module, both listed above.
#![cfg_attr(
    not(feature = "std"),
    doc = "",
    doc = "This documentation was built without `std`, so the `host` module is missing from it;",
    doc = "links to its items lead here."
)]

//! # Performance
//!
//! With the host backend, on a shared 2-core machine under load (medians of three runs, each
//! figure varying by up to a third between runs), a queue moves about 5.5 million jobs per
//! second without dependencies, 3.8 million with one and 1.9 million with four (prepare to done
//! fence, jobs prepared with [`Queue::prepare`] from the memory of retired jobs and committed
//! with [`Reservation::commit_direct`]), and the time from a dependency's signal to `run_job`
//! is about 100 to 125 ns. That is 1.8x, 1.9x and 1.65x the throughput of an async-task peer
//! in the same runs, and 1.7x its signal-to-run speed. The same runs measure the jobs' own
//! allocations and fences with [`PreparedJob::new`] and no queue at about 6.0, 3.1 and 1.5
//! million per second: with its memory reused, a job with dependencies now costs less through
//! the queue than allocating it did alone. The README has the table and the command
//! (`cargo xtask bench`, or `cargo bench -p gpukit-jobqueue --bench throughput`).
//!
//! Against the kernel's `drm_sched`, in the same kernel (suite `gpukit_jobqueue_vs_c`): the
//! same driver, whose `run_job` returns a signalled fence or one of a simulated ring that
//! completes a job every 10 us from a soft hrtimer, the same window of 32 unsignalled jobs,
//! both pipelining dependencies on their own jobs ([`QueueConfig::with_pipelining`]), three
//! alternating rounds with the best of each side. Under QEMU without KVM this compares the two
//! under identical conditions, not on hardware. Ratio = C time / Rust time, one run each (as
//! of commit `dc5f367`): `cargo xtask kernel-test` (lockdep, host clock), `cargo xtask
//! kernel-bench` (no checkers, QEMU's instruction counter as the clock) and `kernel-bench
//! --wall-clock`:
//!
//! | workload (2000 jobs)                         | kernel-test | kernel-bench (instructions) | kernel-bench --wall-clock |
//! |----------------------------------------------|------------:|----------------------------:|--------------------------:|
//! | independent / chain / fan-in of 4            | 2.60x / 2.12x / 1.49x | 1.87x / 1.60x / 1.15x | 1.81x / 1.64x / 1.21x |
//! | the same on the simulated ring               | 0.99x / 0.99x / 0.99x | 0.99x / 0.99x / 0.99x | 1.07x / 1.02x / 0.99x |
//! | dependency signal to `run_job` (median)      | 1.23x       | 1.07x                       | 1.15x                     |
//!
//! On the ring both run at the ring's speed (counted 0.9995-0.9998 of `drm_sched`'s throughput,
//! printed truncated): the ring never idles, and what is left is the first `run_job` and the
//! last done fence, which this queue signals from its work item, one wake-up after
//! `drm_sched` signals its own from the hardware fence's callback.

#![no_std]

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);

#[cfg(all(feature = "kernel", gpukit_kernel))]
pub mod kernel;

/// The prefix of this crate's kernel log lines (`pr_info!` and friends look for it here).
#[cfg(all(feature = "kernel", gpukit_kernel, CONFIG_GPUKIT_VS_C))]
const __LOG_PREFIX: &[u8] = b"gpukit_jobqueue\0";

pub mod error;
pub mod exec;
pub mod fence;
#[cfg(feature = "std")]
pub mod host;
pub mod job;
pub mod mem;
pub mod queue;
pub mod time;

pub use error::{Error, FenceError};
pub use exec::Executor;
pub use fence::{AddCallback, Fence, FenceResult, SignalFence};
pub use job::{Committed, Cost, MaxDeps, PreparedJob, QueueConfig, Rejected};
pub use mem::{AllocError, AllocToken, Allocator, DepSlot, Dependency};
pub use queue::{
    Backend, JobFor, Queue, Reservation, RunJob, SignalCtx, TimedOutJob, TimeoutAction,
};
pub use time::{Clock, Instant};
