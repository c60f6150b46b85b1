// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A shareable handle to a simulated GPU.
//!
//! A driver's host backend needs the GPU from several places at once: the MMIO accessor,
//! the clock (whose delays advance simulated time), the interrupt source and the DMA
//! allocator. [`SharedGpu`] is a cloneable, thread-safe handle over one [`Gpu`] whose methods
//! take `&self`.

use std::sync::Arc;

use crate::lock::StdMutex;

use super::gpu::{Gpu, IrqLine, IrqLines, Progress};
use super::mem::SimMemory;

/// The GPU locked ([`SharedGpu::lock`]).
#[cfg(not(miri))]
pub type GpuGuard<'a> = parking_lot::MutexGuard<'a, Gpu>;
/// The GPU locked ([`SharedGpu::lock`]).
#[cfg(miri)]
pub type GpuGuard<'a> = std::sync::MutexGuard<'a, Gpu>;

/// A cloneable handle to one [`Gpu`].
///
/// # Examples
///
/// ```
/// use mali_sim::{regs, Gpu, SharedGpu};
///
/// let gpu = SharedGpu::new(Gpu::g610());
/// let mmio = gpu.clone();
/// mmio.write32(regs::L2_PWRON_LO, 1);
/// gpu.advance(1_000_000);
/// assert_eq!(mmio.read32(regs::L2_READY_LO), 1);
/// assert_eq!(gpu.now_ns(), 1_000_000);
/// ```
#[derive(Clone, Debug)]
pub struct SharedGpu {
    gpu: Arc<StdMutex<Gpu>>,
    mem: Arc<SimMemory>,
}

impl SharedGpu {
    /// Wraps `gpu`.
    pub fn new(gpu: Gpu) -> Self {
        let mem = gpu.memory().clone();
        SharedGpu {
            gpu: Arc::new(StdMutex::new(gpu)),
            mem,
        }
    }

    /// Locks the GPU for a sequence of calls.
    pub fn lock(&self) -> GpuGuard<'_> {
        #[cfg(not(miri))]
        return self.gpu.lock();
        // No method of `Gpu` panics, so a poisoned lock still guards a consistent GPU.
        #[cfg(miri)]
        return self
            .gpu
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }

    /// Runs `f` with the GPU locked.
    pub fn with<R>(&self, f: impl FnOnce(&mut Gpu) -> R) -> R {
        f(&mut self.lock())
    }

    /// The GPU's physical memory (usable without locking the GPU).
    pub fn memory(&self) -> &Arc<SimMemory> {
        &self.mem
    }

    /// [`Gpu::read32`].
    pub fn read32(&self, offset: usize) -> u32 {
        self.lock().read32(offset)
    }

    /// [`Gpu::write32`].
    pub fn write32(&self, offset: usize, value: u32) {
        self.lock().write32(offset, value)
    }

    /// [`Gpu::read64`].
    pub fn read64(&self, offset: usize) -> u64 {
        self.lock().read64(offset)
    }

    /// [`Gpu::write64`].
    pub fn write64(&self, offset: usize, value: u64) {
        self.lock().write64(offset, value)
    }

    /// [`Gpu::next_event_ns`].
    pub fn next_event_ns(&self) -> Option<u64> {
        self.lock().next_event_ns()
    }

    /// [`Gpu::now_ns`].
    pub fn now_ns(&self) -> u64 {
        self.lock().now_ns()
    }

    /// [`Gpu::advance`].
    pub fn advance(&self, ns: u64) {
        self.lock().advance(ns)
    }

    /// [`Gpu::irq_pending`].
    pub fn irq_pending(&self, line: IrqLine) -> bool {
        self.lock().irq_pending(line)
    }

    /// [`Gpu::asserted_lines`].
    pub fn asserted_lines(&self) -> IrqLines {
        self.lock().asserted_lines()
    }

    /// [`Gpu::step`], with the GPU locked for the step only.
    pub fn step(&self, limit_ns: Option<u64>) -> Progress {
        self.lock().step(limit_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync<T: Send + Sync>() {}

    #[test]
    fn handles_cross_threads() {
        send_sync::<SharedGpu>();
        send_sync::<Gpu>();
        send_sync::<SimMemory>();
        let gpu = SharedGpu::new(Gpu::g610());
        let other = gpu.clone();
        std::thread::spawn(move || other.advance(5)).join().unwrap();
        assert_eq!(gpu.now_ns(), 5);
        gpu.write64(crate::regs::L2_PWRON_LO, 1);
        assert_eq!(gpu.next_event_ns(), Some(5 + 5_000));
        assert_eq!(gpu.read64(crate::regs::L2_PWRTRANS_LO), 1);
        assert!(Arc::ptr_eq(gpu.memory(), gpu.lock().memory()));
        assert!(!gpu.irq_pending(IrqLine::Gpu));
        // The power-up completes on a step from another thread: the handle is an executor's.
        let other = gpu.clone();
        let step = std::thread::spawn(move || other.step(None)).join().unwrap();
        assert_eq!(step, Progress::Advanced { now_ns: 5 + 5_000 });
        assert_eq!(gpu.read64(crate::regs::L2_READY_LO), 1);
        assert_eq!(
            gpu.asserted_lines(),
            IrqLines::NONE,
            "the GPU interrupts are masked"
        );
        assert_eq!(gpu.step(None), Progress::Idle);
    }
}
