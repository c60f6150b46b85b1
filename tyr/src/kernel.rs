// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The kernel backend, compiled only inside a Linux tree (`cargo xtask kernel-build` passes
//! `--cfg gpukit_kernel --extern kernel`).
//!
//! Without a Mali board, the "silicon" under the driver in the kernel is the simulated
//! Mali-G610 of `gpukit-mali-sim`, compiled into the same kernel: [`KernelBackend`] implements
//! the driver's [`Backend`] bundle over it with the kernel's own mechanisms, as a platform
//! device with real MMIO would implement it over `kernel::io::Mmio`:
//!
//! - MMIO is a [`ModelRegion`] whose [`DeviceModel`] ([`SimModel`]) forwards every access to
//!   the simulated register file, split into the aligned 32-bit accesses the simulated bus
//!   carries (as the host backend does).
//! - The simulated GPU lives in `vmalloc` memory (it is about 74 KB), behind a kernel `Mutex`.
//! - The hardware's time is the simulator's ([`SimClock`]): poll loops read it and their
//!   sleeps advance it, so a reset or a power transition completes exactly when the simulated
//!   hardware says. The driver's deadlines (job timeouts, the scheduler's tick, the idle
//!   power-down) and the executor's timers are on the kernel's monotonic clock
//!   ([`KtimeClock`], `ktime_get`), as panthor's are, and so is a wait for the CPU's side (a
//!   system suspend waiting for the work item: [`KernelPollClock`], `fsleep`).
//!   `TIMESTAMP_INFO`'s CPU timestamps are `ktime_get_ts64` and `ktime_get_raw_ts64`.
//! - DMA memory is the DMA API's, coherent blocks on the GPU's `struct device` ([`KernelDma`]),
//!   and the simulated GPU's bus reaches exactly those blocks at their DMA addresses
//!   ([`dma::DmaBus`]): its MMU walks the driver's real page-table pages.
//! - Interrupts and deferred work are served by one work item on the system workqueue
//!   (`system_dfl_wq`), the [`EventPump`], the kernel's executor of the simulated GPU as the
//!   event thread is the host's: it calls the driver's interrupt handler while a line is
//!   asserted, its work when the executor is woken or a deadline has come, and otherwise steps
//!   the simulator, never further than real time: when the next simulated event or deadline
//!   lies ahead of `ktime_get`, the pump queues itself again as delayed work for then.
//! - Log lines go to the kernel log (`pr_info!`/`pr_err!`).
//!
//! - The driver's locks ([`KernelLocks`]) are kernel mutexes, and its containers
//!   ([`crate::env`](mod@crate::env)) take their memory from `kvmalloc` ([`KernelAlloc`]).
//!
//! - The queues' fences are `dma_fence`s ([`QueueFences`]: a done timeline and a ring timeline
//!   per queue), which the kernel's syncobjs hold as they are; a syncobj's fence of any driver
//!   becomes a dependency.
//!
//! The whole driver is built here. The KUnit suite probes it on a faux device and runs a job
//! through its ioctls; with `gpukit.boot=tyr` on the command line it registers at boot as a
//! platform driver ([`boot`]), which userspace drives through its render node. Buffer objects
//! lend their DMA memory to userspace mappings
//! ([`DmaMemory::cpu_page`](crate::backend::DmaMemory::cpu_page) of [`KernelDma`]), and
//! [`live_counts`] counts what the backend has alive. What a platform device with real MMIO
//! and a real IRQ line would change is this file only: `Io` over `kernel::io::Mmio`, the
//! interrupt handler on the IRQ line instead of the pump's polling, the pump's work item for
//! the deferred work alone, and the DMA memory without the simulated bus (and buffer objects
//! on shmem pages, see [`dma`]).

use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use core::task::{RawWaker, RawWakerVTable, Waker};
use core::time::Duration;

use ::kernel::alloc::VBox;
use ::kernel::device::Device;
use ::kernel::prelude::*;
use ::kernel::sync::{new_spinlock, Arc, ArcBorrow, Mutex, SpinLock};
use ::kernel::time::{delay::fsleep, ClockSource, Delta, Monotonic};
use ::kernel::workqueue::{
    impl_has_delayed_work, impl_has_work, new_delayed_work, new_work, DelayedWork, Work, WorkItem,
};
use ::kernel::{new_mutex, pr_err, pr_info};

use drm_ctx::drm::gem::CpuPage;
use jobqueue::kernel::KernelFence;
use mali_sim::kernel::KernelFrames;
use mali_sim::{Config, FrameAlloc, Gpu, IrqLine as SimIrqLine};
use register::io::model::{AccessWidth, DeviceModel, ModelRegion};
use register::io::poll::PollClock;
use register::kernel::KernelPollClock;

use crate::backend::{
    Backend, CpuClock, EventSink, Events, IrqLine, Lock, LockClass, LockFamily, LogLevel,
    WeakEvents,
};
use crate::{Error, Result};
use dma::{BusMemory, DmaBus, KernelDma};

impl From<Error> for ::kernel::error::Error {
    fn from(e: Error) -> Self {
        ::kernel::error::Error::from_errno(e.to_errno())
    }
}

/// The driver's bookkeeping memory: `kvmalloc(GFP_KERNEL)`, physically contiguous when the
/// slab has it and virtually contiguous otherwise, so that a long list (a VM's mappings) does
/// not need a high-order page.
pub struct KernelAlloc;

// SAFETY: `KVmalloc` returns blocks of at least `layout.size()` bytes aligned to
// `layout.align()` that stay ours until `KVmalloc::free` with the same layout.
unsafe impl drm_ctx::mem::Allocator for KernelAlloc {
    fn alloc(layout: core::alloc::Layout) -> drm_ctx::Result<NonNull<u8>> {
        use ::kernel::alloc::Allocator as _;
        ::kernel::alloc::allocator::KVmalloc::alloc(
            layout,
            ::kernel::alloc::flags::GFP_KERNEL,
            ::kernel::alloc::NumaNode::NO_NODE,
        )
        .map(|p| {
            LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
            p.cast::<u8>()
        })
        .map_err(|_| drm_ctx::Error::NoMemory)
    }

    unsafe fn free(ptr: NonNull<u8>, layout: core::alloc::Layout) {
        use ::kernel::alloc::Allocator as _;
        LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: The caller passes a block from `alloc` with the same layout.
        unsafe { ::kernel::alloc::allocator::KVmalloc::free(ptr, layout) }
    }
}

/// Blocks of [`KernelAlloc`] not freed yet, all devices together.
static LIVE_BLOCKS: AtomicUsize = AtomicUsize::new(0);
/// [`KernelBackend`]s alive (one per probed device, dropped with the device's driver data).
static LIVE_BACKENDS: AtomicUsize = AtomicUsize::new(0);

/// What the kernel backend has alive, all devices together: the leak counters a test reads
/// after a device is gone (every one must be back to 0 once the last device is released).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveCounts {
    /// Backends, that is devices whose driver data has not been dropped.
    pub devices: usize,
    /// GEM objects of drivers written against `drm-ctx` (Tyr's buffer objects).
    pub bos: usize,
    /// Blocks of the driver's bookkeeping memory ([`KernelAlloc`]).
    pub blocks: usize,
    /// Pages of GPU memory: the DMA API's blocks the backends hold, and the frames of the
    /// simulators' own tables.
    pub gpu_pages: usize,
}

/// The leak counters now.
pub fn live_counts() -> LiveCounts {
    LiveCounts {
        devices: LIVE_BACKENDS.load(Ordering::Relaxed),
        bos: drm_ctx::kernel::gem::live_objects(),
        blocks: LIVE_BLOCKS.load(Ordering::Relaxed),
        gpu_pages: dma::live_pages() + mali_sim::kernel::live_pages(),
    }
}

/// The simulated GPU of this backend.
pub type SimGpu = Gpu<BusMemory>;

/// The simulated GPU behind its lock, in `vmalloc` memory, with the page userspace maps as
/// its USER register page.
pub struct SimDevice {
    gpu: Pin<VBox<Mutex<SimGpu>>>,
    flush_page: FlushPage,
    /// The driver's MMIO is gone ([`KernelBackend::revoke_io`]).
    io_revoked: AtomicBool,
    /// Register accesses the driver made after that.
    late_io: AtomicU64,
    /// The interrupt numbers (the GIC's, from the device tree) the lines `job`, `mmu` and `gpu`
    /// are wired to, in [`ROUTED_LINES`] order; 0 while not wired (the event pump then calls
    /// the driver's handler itself).
    irq_numbers: [AtomicU32; 3],
    /// The wired lines asserted at the last look, a bit each in [`ROUTED_LINES`] order.
    asserted: AtomicU32,
}

/// The simulated GPU's lines in the order a board names them (`interrupt-names = "job",
/// "mmu", "gpu"`).
pub const ROUTED_LINES: [SimIrqLine; 3] = [SimIrqLine::Job, SimIrqLine::Mmu, SimIrqLine::Gpu];

extern "C" {
    /// Makes interrupt `irq` pending at its interrupt controller (`boot.c`).
    fn gpukit_tyr_irq_set_pending(irq: u32) -> core::ffi::c_int;
}

impl SimDevice {
    /// Whether a register access may go on. One that comes after the MMIO was revoked is
    /// counted and reported with a kernel warning (a driver touching a device it was unbound
    /// from), and reaches nothing.
    fn io_live(&self) -> bool {
        if self.io_revoked.load(Ordering::Acquire) {
            self.late_io.fetch_add(1, Ordering::Relaxed);
            ::kernel::warn_on!(true);
            return false;
        }
        true
    }

    /// Runs `f` on the simulated GPU, under its lock. Every change of the simulated GPU's
    /// state happens here, so the flush-ID page is brought up to date here, before the lock
    /// is released.
    ///
    /// Once the lines are wired to the interrupt controller ([`route_irqs`](Self::route_irqs)),
    /// this is also where the silicon drives its wires: a line that went from low to high
    /// while `f` ran is made pending at the controller (after the lock is let go), whose
    /// interrupt then reaches the driver's registered handler as a board's would.
    pub fn with<R>(&self, f: impl FnOnce(&mut SimGpu) -> R) -> R {
        note_stack();
        let mut guard = self.gpu.lock();
        let r = f(&mut guard);
        self.flush_page.set(guard.latest_flush_id());
        // Compared under the lock, so that the looks are in the order the state changed.
        let rising = if self.routed() {
            let now = line_bits(guard.asserted_lines());
            now & !self.asserted.swap(now, Ordering::AcqRel)
        } else {
            0
        };
        drop(guard);
        for (i, number) in self.irq_numbers.iter().enumerate() {
            if rising & (1 << i) != 0 {
                self.set_pending(number.load(Ordering::Acquire));
            }
        }
        r
    }

    /// Whether the lines are wired to the interrupt controller.
    pub fn routed(&self) -> bool {
        self.irq_numbers[0].load(Ordering::Acquire) != 0
    }

    /// Wires the lines `job`, `mmu` and `gpu` to interrupts `numbers` (nonzero) of the
    /// interrupt controller: from now on the simulated GPU raises them there, and the event
    /// pump no longer calls the driver's interrupt handler. Lines already asserted are raised
    /// at the next change of the GPU's state.
    fn route_irqs(&self, numbers: [u32; 3]) {
        for (slot, n) in self.irq_numbers.iter().zip(numbers) {
            slot.store(n, Ordering::Release);
        }
        self.asserted.store(0, Ordering::Release);
    }

    /// The line's level seen again by the interrupt controller when its handler is done: a
    /// level-triggered line still high (an event came while the handler ran) is pending again.
    fn line_still_high(&self, i: usize) {
        if !self.routed() {
            return;
        }
        let line = ROUTED_LINES[i];
        if self.with(|gpu| gpu.irq_pending(line)) {
            self.set_pending(self.irq_numbers[i].load(Ordering::Acquire));
        }
    }

    /// Makes every wired line that is high pending: the driver's events have just started,
    /// and interrupts that came before had nobody to serve them.
    fn raise_asserted(&self) {
        if !self.routed() {
            return;
        }
        for i in 0..ROUTED_LINES.len() {
            self.line_still_high(i);
        }
    }

    fn set_pending(&self, number: u32) {
        if number == 0 {
            return;
        }
        // SAFETY: A C function taking an interrupt number; it checks the number itself.
        let err = unsafe { gpukit_tyr_irq_set_pending(number) };
        if err != 0 {
            pr_err!("tyr: interrupt {number} cannot be made pending: {err}\n");
        }
    }
}

/// The asserted lines among `lines` as bits in [`ROUTED_LINES`] order.
fn line_bits(lines: mali_sim::IrqLines) -> u32 {
    ROUTED_LINES
        .iter()
        .enumerate()
        .filter(|(_, l)| lines.contains(**l))
        .fold(0, |m, (i, _)| m | 1 << i)
}

/// The fewest bytes of a task's kernel stack seen left where the simulated GPU runs (see
/// [`note_stack`]); `usize::MAX` until it has run on a task's stack.
static STACK_LEAST_LEFT: AtomicUsize = AtomicUsize::new(usize::MAX);

extern "C" {
    /// Bytes left on the current task's kernel stack below the caller, `usize::MAX` on
    /// another stack (`boot.c`).
    fn gpukit_tyr_stack_left() -> usize;
}

/// Notes how much of the current task's kernel stack is left here.
///
/// Silicon runs on its own; the simulated GPU runs on the thread that steps it, often the
/// driver's own (a probe or an ioctl polling a register), below every frame of the driver and
/// of the kernel above it. Called where the simulator is entered and at its deepest leaves (its
/// memory accesses), this records the least stack any such path left, which the userspace test
/// reads from `/sys/kernel/tyr/stack` and checks against a margin (a stack overflow in the
/// kernel is a panic, not an error).
#[inline]
pub(crate) fn note_stack() {
    // SAFETY: A C function without arguments or preconditions (`boot.c`).
    let left = unsafe { gpukit_tyr_stack_left() };
    STACK_LEAST_LEFT.fetch_min(left, Ordering::Relaxed);
}

/// The fewest bytes of a task's kernel stack seen left where the simulated GPU ran
/// (`usize::MAX`: it has not run on a task's stack yet).
pub fn stack_least_left() -> usize {
    STACK_LEAST_LEFT.load(Ordering::Relaxed)
}

/// A zeroed page of `vmalloc` memory whose first word mirrors the simulated GPU's
/// `LATEST_FLUSH_ID`: what userspace maps at `DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET`, where on
/// silicon it would map the GPU's USER register page.
///
/// # Invariants
///
/// `page` is a live page from [`KernelFrames`] owned by this value, reached only through
/// atomic accesses (by the kernel) and user mappings.
struct FlushPage {
    page: NonNull<AtomicU32>,
}

// SAFETY: The page is owned by the value and only reached atomically (type invariant).
unsafe impl Send for FlushPage {}
// SAFETY: See `Send`.
unsafe impl Sync for FlushPage {}

impl FlushPage {
    const ONE: core::num::NonZeroUsize = core::num::NonZeroUsize::MIN;

    fn new() -> Result<Self> {
        let page = KernelFrames::new(GFP_KERNEL)
            .alloc_zeroed(Self::ONE)
            .map_err(|_| Error::NoMemory)?;
        // INVARIANT: A zeroed page of our own, page aligned (so aligned for a `u32`).
        Ok(FlushPage { page: page.cast() })
    }

    fn set(&self, id: u32) {
        // SAFETY: The page is live and only reached atomically (type invariant).
        unsafe { self.page.as_ref() }.store(id, Ordering::Relaxed);
    }

    fn cpu_page(&self) -> Option<CpuPage> {
        // SAFETY: A whole page of `vmalloc` memory, page aligned, allocated until the value
        // is dropped with the simulated device, which the backend (and so the DRM device that
        // lends it to a mapping) holds.
        unsafe { CpuPage::new(self.page.cast()) }
    }
}

impl Drop for FlushPage {
    fn drop(&mut self) {
        // SAFETY: The page came from `KernelFrames::alloc_zeroed` of one page and nothing uses
        // it any more: the simulated device is gone, and with it every mapping's device.
        unsafe { KernelFrames::new(GFP_KERNEL).free(self.page.cast(), Self::ONE) };
    }
}

/// Register accesses to the simulated GPU. A write may start something in the simulated
/// hardware (a reset, a power transition, a doorbell), so it queues the event pump.
#[derive(Clone)]
pub struct SimModel {
    device: Arc<SimDevice>,
    pump: Arc<EventPump>,
}

impl DeviceModel for SimModel {
    fn read(&self, offset: usize, width: AccessWidth) -> u64 {
        if !self.device.io_live() {
            return 0;
        }
        // The counters that show time read as of now: simulated time first catches up with
        // the real time passed since the pump's anchor (the pump lets it lag while nothing is
        // due), running what falls due on the way; never past it.
        let limit = mali_sim::regs::reads_time(offset).then(|| {
            let sim0 = self.pump.anchor_sim.load(Ordering::Relaxed);
            let real0 = self.pump.anchor_ktime.load(Ordering::Relaxed);
            sim0.saturating_add(KtimeClock::now_ns().saturating_sub(real0))
        });
        let (value, moved) = self.device.with(|gpu| {
            let behind = limit.map_or(0, |l| l.saturating_sub(gpu.now_ns()));
            if behind > 0 {
                gpu.advance(behind);
            }
            (Self::read_gpu(gpu, offset, width), behind > 0)
        });
        if moved && self.pump.events.lock().is_some() {
            EventPump::schedule(self.pump.clone());
        }
        value
    }

    fn write(&self, offset: usize, width: AccessWidth, value: u64) {
        self.write_inner(offset, width, value)
    }
}

impl SimModel {
    fn read_gpu(gpu: &mut SimGpu, offset: usize, width: AccessWidth) -> u64 {
        match width {
            AccessWidth::U32 => u64::from(gpu.read32(offset)),
            AccessWidth::U64 => {
                let lo = u64::from(gpu.read32(offset));
                let hi = u64::from(gpu.read32(offset + 4));
                lo | hi << 32
            }
            AccessWidth::U8 | AccessWidth::U16 => {
                let word = gpu.read32(offset & !3);
                u64::from(word >> ((offset & 3) * 8))
            }
        }
    }

    fn write_inner(&self, offset: usize, width: AccessWidth, value: u64) {
        if !self.device.io_live() {
            return;
        }
        self.device.with(|gpu| match width {
            AccessWidth::U32 => gpu.write32(offset, value as u32),
            AccessWidth::U64 => {
                // Low half first, as the kernel's `gpu_write64` does.
                gpu.write32(offset, value as u32);
                gpu.write32(offset + 4, (value >> 32) as u32);
            }
            AccessWidth::U8 | AccessWidth::U16 => {
                let bits = width.bytes() * 8;
                let shift = (offset & 3) * 8;
                let mask = ((1u32 << bits) - 1) << shift;
                let old = gpu.read32(offset & !3);
                let new = (old & !mask) | (((value as u32) << shift) & mask);
                gpu.write32(offset & !3, new);
            }
        });
        // Only while the driver has events to run: until then nothing would be served.
        if self.pump.events.lock().is_some() {
            EventPump::schedule(self.pump.clone());
        }
    }
}

/// The MMIO region of the simulated GPU.
pub type SimIo = ModelRegion<SimModel, { mali_sim::regs::MMIO_SIZE }>;

/// The simulator's time as a [`PollClock`]: sleeping advances the simulation.
#[derive(Clone)]
pub struct SimClock(Arc<SimDevice>);

impl PollClock for SimClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.with(|gpu| gpu.now_ns()))
    }

    fn sleep(&self, duration: Duration) {
        let ns = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        self.0.with(|gpu| gpu.advance(ns));
    }

    fn relax(&self) {}
}

/// The kernel's monotonic clock (`ktime_get`, nanoseconds since boot) as the clock of the
/// driver's deadlines ([`Backend::timer_clock`]): the clock panthor's `jiffies` follow.
/// Sleeping on it is `fsleep`.
#[derive(Clone, Copy, Debug, Default)]
pub struct KtimeClock;

impl KtimeClock {
    fn now_ns() -> u64 {
        u64::try_from(Monotonic::ktime_get()).unwrap_or(0)
    }
}

impl PollClock for KtimeClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(Self::now_ns())
    }

    fn sleep(&self, duration: Duration) {
        fsleep(Delta::from_nanos(
            i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX),
        ));
    }
}

/// What the event pump owes the driver besides interrupts.
struct PumpState {
    /// The earliest deadline asked for with `wake_at`, in [`KtimeClock`] nanoseconds.
    timer: Option<u64>,
}

/// How many turns the event pump takes before it queues itself again and lets the workqueue
/// run other work.
const PUMP_BUDGET: usize = 256;

/// How far ahead of real time the pump may run the simulation rather than queue itself as
/// delayed work (whose delay is at least a jiffy): the gaps between a command-stream engine's
/// steps (100 ns of simulated time) are run through at once. As the host's event thread does.
const PUMP_LEAD_NS: u64 = 500_000;

/// How long `stop_events` waits for a call of the driver's events under way to finish.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The longest delay the pump queues itself with. A delayed work item that is pending cannot
/// be brought forward, so a pump that wants to run sooner than one it queued earlier runs
/// late by at most this.
const PUMP_MAX_DELAY_MS: u32 = 10;

/// The executor of the simulated GPU in the kernel: a work item on the system workqueue that
/// does what the host backend's event thread does.
///
/// Each turn it calls the driver's interrupt handler ([`Events::irq`]) while a line of the
/// simulated GPU is asserted, then the driver's work ([`Events::work`]) if the executor was
/// woken or a deadline of `wake_at` has come (on [`KtimeClock`]), and otherwise steps the
/// simulator ([`Gpu::step`]) towards its next event, never past the simulated time that
/// corresponds to `ktime_get` now (plus [`PUMP_LEAD_NS`]): simulated time never runs ahead of
/// real time by more than that by the pump's doing (time a poll loop's sleeps move it by is
/// taken as it is, and the pacing goes on from there). When the next event or deadline lies ahead in real time, the pump queues itself as
/// delayed work for then (its second work item, at most [`PUMP_MAX_DELAY_MS`] ahead); when
/// nothing is scheduled and nothing is owed the work item ends, and a wake-up, a deadline or a
/// register write queues it again. A stream blocked on a sync wait keeps an event scheduled
/// (the simulated firmware polls the memory it waits for, `Timings::sync_poll_ns`), so a CPU
/// write to that memory is seen within a poll interval.
#[pin_data]
pub struct EventPump {
    #[pin]
    work: Work<EventPump, 1>,
    /// The pump's later run, when it waits for real time to reach the simulation's next event.
    #[pin]
    later: DelayedWork<EventPump, 2>,
    /// Simulated and real ([`KtimeClock`]) nanoseconds at the point the pacing measures
    /// from; only the pump's run changes them (a work item does not run twice at once).
    anchor_sim: AtomicU64,
    anchor_ktime: AtomicU64,
    /// Simulated time where the pump's own last step left it: a later time was set by a poll
    /// loop.
    own_sim: AtomicU64,
    #[pin]
    events: SpinLock<Option<Arc<dyn EventSink>>>,
    #[pin]
    state: SpinLock<PumpState>,
    /// The task calling the driver's events, null when none is: what `stop_events` waits
    /// for.
    busy: AtomicPtr<core::ffi::c_void>,
    /// Held around each call of the driver's events, by the pump and by the interrupt
    /// threads of wired lines ([`GpuIrq`]): the driver's handlers run one at a time
    /// ([`Events`]'s contract), whoever calls them.
    #[pin]
    calls: Mutex<()>,
    /// The executor was woken: the driver's work runs next. An atomic, not part of `state`:
    /// wakers run where the pump's locks may not be taken (a fence callback under the fence's
    /// interrupt-safe lock, possibly in hard-IRQ context).
    pending: AtomicBool,
    device: Arc<SimDevice>,
    runs: AtomicU64,
}

impl_has_work! {
    impl HasWork<Self, 1> for EventPump { self.work }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self, 2> for EventPump { self.later }
}

impl WorkItem<2> for EventPump {
    type Pointer = Arc<EventPump>;

    fn run(this: Arc<EventPump>) {
        // The pump itself runs as its first work item, never twice at once.
        EventPump::schedule(this);
    }
}

/// What the pump does after a look at the simulated GPU.
enum PumpNext {
    /// Turn again at once.
    Again,
    /// Caught up with real time: the next simulated event, if any, is after now.
    Wait(Option<u64>),
}

impl WorkItem<1> for EventPump {
    type Pointer = Arc<EventPump>;

    fn run(this: Arc<EventPump>) {
        this.runs.fetch_add(1, Ordering::Relaxed);
        for _ in 0..PUMP_BUDGET {
            // Wired lines reach the driver through the interrupt controller, not from here.
            let routed = this.device.routed();
            // The handlers are held for one call of `irq` or `work`, not across a step.
            let mut again = false;
            let Some(alive) = this.call_events(&mut |events| {
                if !routed && this.device.with(|gpu| !gpu.asserted_lines().is_empty()) {
                    events.irq();
                    again = true;
                    return;
                }
                let now = KtimeClock::now_ns();
                let due = {
                    let mut s = this.state.lock();
                    let due = s.timer.is_some_and(|t| t <= now);
                    if due {
                        s.timer = None;
                    }
                    due
                };
                let owed = this.pending.swap(false, Ordering::AcqRel) || due;
                if owed {
                    events.work();
                    again = true;
                }
            }) else {
                return;
            };
            if !alive {
                // The driver is gone: nothing is left to serve.
                return;
            }
            if again {
                continue;
            }
            let timer = this.state.lock().timer;
            let now = KtimeClock::now_ns();
            let mut anchor = (
                this.anchor_sim.load(Ordering::Relaxed),
                this.anchor_ktime.load(Ordering::Relaxed),
            );
            let own = this.own_sim.load(Ordering::Relaxed);
            let (next, own) = this.device.with(|gpu| {
                let limit = |a: (u64, u64)| a.0.saturating_add(now.saturating_sub(a.1));
                if gpu.now_ns() != own && gpu.now_ns() > limit(anchor) {
                    // Moved by a poll loop: pace from here. (Never for the pump's own steps,
                    // whose lead would otherwise add up, step after step.)
                    anchor = (gpu.now_ns(), now);
                }
                let limit = limit(anchor);
                let next = gpu.next_event_ns();
                let what = if !routed && !gpu.asserted_lines().is_empty() {
                    PumpNext::Again
                } else if next.is_some_and(|e| e <= limit.saturating_add(PUMP_LEAD_NS)) {
                    // An event is due (or close enough): run it, and look again.
                    let _ = gpu.step(None);
                    PumpNext::Again
                } else {
                    // Nothing happens before real time reaches the next event: simulated time
                    // is brought up to real time and the pump waits. (Looking again at once
                    // would find real time a little further, step again, and so on, the pump
                    // spinning while the GPU is idle.)
                    if gpu.now_ns() < limit {
                        let _ = gpu.step(Some(limit));
                    }
                    PumpNext::Wait(next)
                };
                (what, gpu.now_ns())
            });
            this.own_sim.store(own, Ordering::Relaxed);
            this.anchor_sim.store(anchor.0, Ordering::Relaxed);
            this.anchor_ktime.store(anchor.1, Ordering::Relaxed);
            let PumpNext::Wait(next) = next else {
                continue;
            };
            // Caught up with real time: wait for it to reach the next event or deadline.
            let event_at = next.map(|e| {
                anchor
                    .1
                    .saturating_add(e.saturating_sub(anchor.0))
                    .saturating_sub(PUMP_LEAD_NS)
            });
            let at = [event_at, timer].into_iter().flatten().min();
            if this.pending.load(Ordering::Acquire) {
                continue;
            }
            let Some(at) = at else {
                // Nothing scheduled: anything that comes in later (a wake-up, a deadline, a
                // register write) queues the pump again.
                return;
            };
            let wait = at.saturating_sub(now);
            if wait == 0 {
                continue;
            }
            let ms = u32::try_from(wait.div_ceil(1_000_000))
                .unwrap_or(u32::MAX)
                .min(PUMP_MAX_DELAY_MS);
            let delay = ::kernel::time::msecs_to_jiffies(ms);
            // Already pending (queued by an earlier run for a later time, or the same): that
            // one runs the pump, at most `PUMP_MAX_DELAY_MS` late.
            let _ = jobqueue::kernel::default_workqueue()
                .enqueue_delayed::<Arc<Self>, 2>(this.clone(), delay);
            // A wake-up or register write since the look above queued the pump's first work
            // item (it is not queued while it runs): nothing is lost by ending here.
            return;
        }
        EventPump::schedule(this);
    }
}

impl EventPump {
    /// Calls `f` with the driver's events, one caller at a time (the pump, an interrupt
    /// thread): `None` without events (stopped, or not started), else whether the driver was
    /// still there.
    ///
    /// The driver's callbacks run without any of the pump's spinlocks held: they may write
    /// registers and wake the executor, which queue the pump again. The caller is marked busy
    /// under the events' lock: `stop_events`, which clears them under it, then waits for the
    /// call to finish.
    fn call_events(&self, f: &mut dyn FnMut(&dyn Events)) -> Option<bool> {
        let _one_at_a_time = self.calls.lock();
        let sink = {
            let events = self.events.lock();
            let sink = events.clone();
            if sink.is_some() {
                self.busy.store(
                    ::kernel::task::Task::current_raw().cast(),
                    Ordering::Release,
                );
            }
            sink
        }?;
        let alive = sink.with(f);
        // The last reference to the driver may go here; its teardown's `stop_events` runs on
        // this task and does not wait for itself.
        drop(sink);
        self.busy.store(core::ptr::null_mut(), Ordering::Release);
        Some(alive)
    }

    fn schedule(this: Arc<Self>) {
        // Already queued (not yet running): that run will see what this call was for. A run
        // under way does not count as queued, so nothing is lost.
        let _ = jobqueue::kernel::default_workqueue().enqueue::<Arc<Self>, 1>(this);
    }
}

impl PumpWake for EventPump {
    fn wake(this: Arc<Self>) {
        this.pending.store(true, Ordering::Release);
        Self::schedule(this);
    }
}

/// A work item an executor's [`Waker`] wakes: the event pump, a bind pump.
trait PumpWake: Send + Sync + Sized + 'static {
    /// Marks the pump woken and queues it.
    fn wake(this: Arc<Self>);
}

/// A [`Waker`] that owns one reference of an `Arc<P>` and wakes it with [`PumpWake::wake`].
fn pump_waker<P: PumpWake>(pump: &Arc<P>) -> Waker {
    let data = Arc::into_raw(pump.clone()).cast::<()>();
    // SAFETY: `data` is an `Arc<P>` reference now owned by the waker, and the vtable's
    // functions treat it as such.
    unsafe { Waker::from_raw(RawWaker::new(data, &PumpVtable::<P>::VTABLE)) }
}

/// The vtable of [`pump_waker`]'s wakers for pumps of type `P`.
struct PumpVtable<P>(core::marker::PhantomData<P>);

impl<P: PumpWake> PumpVtable<P> {
    const VTABLE: RawWakerVTable = RawWakerVTable::new(
        Self::w_clone,
        Self::w_wake,
        Self::w_wake_by_ref,
        Self::w_drop,
    );

    /// # Safety
    ///
    /// `data` came from `Arc::into_raw` of an `Arc<P>` that is still owned by a waker.
    unsafe fn w_clone(data: *const ()) -> RawWaker {
        // SAFETY: The caller's guarantee: `data` is a live `Arc<P>` we do not own.
        let borrowed = unsafe { ArcBorrow::<P>::from_raw(data.cast()) };
        let extra: Arc<P> = borrowed.into();
        RawWaker::new(Arc::into_raw(extra).cast(), &Self::VTABLE)
    }

    /// # Safety
    ///
    /// `data` came from `Arc::into_raw` of an `Arc<P>` owned by the waker consumed here.
    unsafe fn w_wake(data: *const ()) {
        // SAFETY: The caller's guarantee: the waker's reference is handed to us.
        P::wake(unsafe { Arc::from_raw(data.cast()) });
    }

    /// # Safety
    ///
    /// As for [`Self::w_clone`].
    unsafe fn w_wake_by_ref(data: *const ()) {
        // SAFETY: The caller's guarantee.
        let borrowed = unsafe { ArcBorrow::<P>::from_raw(data.cast()) };
        P::wake(borrowed.into());
    }

    /// # Safety
    ///
    /// As for [`Self::w_wake`].
    unsafe fn w_drop(data: *const ()) {
        // SAFETY: The caller's guarantee: the waker's reference is released here.
        drop(unsafe { Arc::<P>::from_raw(data.cast()) });
    }
}

/// The backend's executor: its waker and deadlines drive the [`EventPump`].
#[derive(Clone)]
pub struct KernelExec {
    pump: Arc<EventPump>,
    waker: Waker,
}

impl KernelExec {
    fn new(device: Arc<SimDevice>) -> Result<Self> {
        let pump = Arc::pin_init(
            pin_init!(EventPump {
                work <- new_work!("tyr::kernel::EventPump::work"),
                later <- new_delayed_work!("tyr::kernel::EventPump::later"),
                anchor_sim: AtomicU64::new(0),
                anchor_ktime: AtomicU64::new(KtimeClock::now_ns()),
                own_sim: AtomicU64::new(0),
                events <- new_spinlock!(None, "tyr::kernel::EventPump::events"),
                state <- new_spinlock!(
                    PumpState { timer: None },
                    "tyr::kernel::EventPump::state"
                ),
                busy: AtomicPtr::new(core::ptr::null_mut()),
                calls <- new_mutex!((), "tyr::kernel::EventPump::calls"),
                pending: AtomicBool::new(false),
                device,
                runs: AtomicU64::new(0),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| Error::NoMemory)?;
        let waker = pump_waker(&pump);
        Ok(KernelExec { pump, waker })
    }

    /// How many times the pump's work item has run.
    pub fn runs(&self) -> u64 {
        self.pump.runs.load(Ordering::Relaxed)
    }

    /// Queues the pump: something may have changed in the simulated GPU.
    fn kick(&self) {
        EventPump::schedule(self.pump.clone());
    }
}

impl jobqueue::Executor for KernelExec {
    fn waker(&self) -> &Waker {
        &self.waker
    }

    fn wake_at(&self, deadline: jobqueue::Instant) {
        {
            let mut s = self.pump.state.lock();
            let at = deadline.as_nanos();
            s.timer = Some(s.timer.map_or(at, |t| t.min(at)));
        }
        self.kick();
    }
}

/// One of the simulated GPU's interrupt lines as a board wires it: an interrupt of the
/// interrupt controller, which the simulated GPU raises ([`SimDevice::with`]) and whose
/// handler, registered with the kernel's IRQ API as panthor registers its own (a hard handler
/// that wakes a thread, `IRQF_ONESHOT` so that the line stays masked until the thread is done),
/// calls the driver's interrupt handler ([`Events::irq`]) in that thread.
///
/// The hard handler reads nothing: panthor's reads the block's `INT_STAT` and masks it in hard
/// interrupt context, but the simulated GPU's registers sit behind a sleeping lock (its model
/// may walk memory), so here the thread does all of it. When the thread is done, a line still
/// high (an event arrived while it ran) is pending again, as a level-triggered line is at the
/// controller.
pub struct GpuIrq {
    pump: Arc<EventPump>,
    /// The line, as an index into [`ROUTED_LINES`].
    line: usize,
}

impl ::kernel::irq::ThreadedHandler for GpuIrq {
    fn handle_threaded(&self, _dev: &Device<::kernel::device::Bound>) -> ::kernel::irq::IrqReturn {
        match self.pump.call_events(&mut |events| events.irq()) {
            Some(true) => {
                self.pump.device.line_still_high(self.line);
                ::kernel::irq::IrqReturn::Handled
            }
            // No driver to serve it (not started yet, or stopped): the line is left as it is,
            // and raised again when the driver's events start (`set_events`).
            Some(false) | None => ::kernel::irq::IrqReturn::None,
        }
    }
}

/// What the bind pumps of a backend share: the driver's events, while started.
#[pin_data]
pub struct BindShared {
    #[pin]
    events: SpinLock<Option<Arc<dyn EventSink>>>,
}

/// A VM's bind queue's executor in the kernel: a work item of its own on the system workqueue
/// (`system_dfl_wq`, unbound), which calls the driver's [`Events::bind_work`] for that VM when
/// woken or when a deadline of `wake_at` has come (on [`KtimeClock`]), never the event pump
/// nor another VM's pump: a bind that runs for long holds up neither interrupts, submissions
/// nor other VMs' binds, as panthor's per-VM bind schedulers run on a workqueue of their own.
#[pin_data]
pub struct BindPump {
    #[pin]
    work: Work<BindPump, 1>,
    /// The run for a deadline in the future.
    #[pin]
    later: DelayedWork<BindPump, 2>,
    /// The driver's events, shared by the backend's bind pumps.
    shared: Arc<BindShared>,
    /// The VM whose bind queue this pump runs.
    vm: u64,
    /// The earliest deadline, in [`KtimeClock`] nanoseconds.
    #[pin]
    timer: SpinLock<Option<u64>>,
    /// The task calling the driver's bind work, null when none is: what `stop_events` waits
    /// for.
    busy: AtomicPtr<core::ffi::c_void>,
    /// Woken: the bind work runs next (an atomic, as the event pump's: wakers run in fence
    /// callbacks, possibly in hard-IRQ context).
    pending: AtomicBool,
    /// Its executor's last clone is gone: the backend's list lets go of it.
    retired: AtomicBool,
    runs: AtomicU64,
}

impl_has_work! {
    impl HasWork<Self, 1> for BindPump { self.work }
}

impl_has_delayed_work! {
    impl HasDelayedWork<Self, 2> for BindPump { self.later }
}

impl WorkItem<2> for BindPump {
    type Pointer = Arc<BindPump>;

    fn run(this: Arc<BindPump>) {
        // The bind work runs as the first work item, never twice at once.
        BindPump::schedule(this);
    }
}

impl WorkItem<1> for BindPump {
    type Pointer = Arc<BindPump>;

    fn run(this: Arc<BindPump>) {
        this.runs.fetch_add(1, Ordering::Relaxed);
        for _ in 0..PUMP_BUDGET {
            // Marked busy under the events' lock, as the event pump does.
            let Some(sink) = ({
                let events = this.shared.events.lock();
                let sink = events.clone();
                if sink.is_some() {
                    this.busy.store(
                        ::kernel::task::Task::current_raw().cast(),
                        Ordering::Release,
                    );
                }
                sink
            }) else {
                return;
            };
            let now = KtimeClock::now_ns();
            let due = {
                let mut t = this.timer.lock();
                let due = t.is_some_and(|t| t <= now);
                if due {
                    *t = None;
                }
                due
            };
            let owed = this.pending.swap(false, Ordering::AcqRel) || due;
            let vm = this.vm;
            let alive = !owed || sink.with(&mut |events| events.bind_work(vm));
            // The driver's last reference may go here (see the event pump).
            drop(sink);
            this.busy.store(core::ptr::null_mut(), Ordering::Release);
            if !alive {
                return;
            }
            if owed {
                continue;
            }
            let Some(at) = *this.timer.lock() else {
                // Nothing owed, nothing scheduled: a wake-up or a deadline queues it again.
                return;
            };
            if this.pending.load(Ordering::Acquire) {
                continue;
            }
            let ms = u32::try_from(at.saturating_sub(now).div_ceil(1_000_000))
                .unwrap_or(u32::MAX)
                .min(PUMP_MAX_DELAY_MS);
            let delay = ::kernel::time::msecs_to_jiffies(ms);
            let _ = jobqueue::kernel::default_workqueue()
                .enqueue_delayed::<Arc<Self>, 2>(this.clone(), delay);
            return;
        }
        // Out of budget: let other work items in, and go on later.
        BindPump::schedule(this);
    }
}

impl BindPump {
    fn schedule(this: Arc<Self>) {
        // Already queued: that run sees what this call was for.
        let _ = jobqueue::kernel::default_workqueue().enqueue::<Arc<Self>, 1>(this);
    }
}

impl PumpWake for BindPump {
    fn wake(this: Arc<Self>) {
        this.pending.store(true, Ordering::Release);
        Self::schedule(this);
    }
}

/// The bind queues' executor: its waker and deadlines drive the [`BindPump`].
#[derive(Clone)]
pub struct KernelBindExec {
    pump: Arc<BindPump>,
    waker: Waker,
    /// Retires the pump when the last clone goes.
    _owner: Arc<BindRetire>,
}

/// Marks its pump retired when dropped (with the last clone of the pump's executor).
struct BindRetire(Arc<BindPump>);

impl Drop for BindRetire {
    fn drop(&mut self) {
        self.0.retired.store(true, Ordering::Release);
    }
}

impl KernelBindExec {
    fn new(shared: Arc<BindShared>, vm: u64) -> Result<Self> {
        let pump = Arc::pin_init(
            pin_init!(BindPump {
                work <- new_work!("tyr::kernel::BindPump::work"),
                later <- new_delayed_work!("tyr::kernel::BindPump::later"),
                shared,
                vm,
                timer <- new_spinlock!(None, "tyr::kernel::BindPump::timer"),
                busy: AtomicPtr::new(core::ptr::null_mut()),
                pending: AtomicBool::new(false),
                retired: AtomicBool::new(false),
                runs: AtomicU64::new(0),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| Error::NoMemory)?;
        let owner = Arc::new(BindRetire(pump.clone()), GFP_KERNEL).map_err(|_| Error::NoMemory)?;
        let waker = pump_waker(&pump);
        Ok(KernelBindExec {
            pump,
            waker,
            _owner: owner,
        })
    }

    /// How many times the bind pump's work item has run.
    pub fn runs(&self) -> u64 {
        self.pump.runs.load(Ordering::Relaxed)
    }
}

impl jobqueue::Executor for KernelBindExec {
    fn waker(&self) -> &Waker {
        &self.waker
    }

    fn wake_at(&self, deadline: jobqueue::Instant) {
        {
            let mut t = self.pump.timer.lock();
            let at = deadline.as_nanos();
            *t = Some(t.map_or(at, |old| old.min(at)));
        }
        BindPump::schedule(self.pump.clone());
    }
}

/// A firmware file in the kernel: the firmware loader's (`request_firmware`), or the
/// simulated MCU's own image when the loader has none.
pub enum KernelFirmware {
    /// From the firmware loader.
    File(::kernel::firmware::Firmware),
    /// Built into the simulator ([`mali_sim::firmware::IMAGE`]).
    Builtin(&'static [u8]),
}

impl core::ops::Deref for KernelFirmware {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            KernelFirmware::File(f) => f.data(),
            KernelFirmware::Builtin(b) => b,
        }
    }
}

/// Gives the simulated MCU the image the driver will find (see [`flash_source`]).
///
/// Never inlined: the image's section table is built here, in a frame of its own (see
/// `xtask/src/frames.rs`).
#[inline(never)]
fn flash_firmware(dev: &Device, cfg: &mut Config) {
    let path = crate::csf::firmware_path(cfg.identity.gpu_id);
    let image = flash_source(dev, path.as_str());
    cfg.firmware = mali_sim::firmware::Flashed::new(&image).ok();
}

/// The firmware file `path` from the firmware loader (`request_firmware`, without its warning:
/// the test kernel builds Arm's image in, see `xtask/KERNEL.md`), else the simulated MCU's own
/// image, which a simulated GPU can run as well. A path too long for the loader's name, or
/// holding a NUL, finds no file.
fn flash_source(dev: &Device, path: &str) -> KernelFirmware {
    let mut buf = [0u8; 64];
    let bytes = path.as_bytes();
    if bytes.len() < buf.len() && !bytes.contains(&0) {
        buf[..bytes.len()].copy_from_slice(bytes);
        if let Ok(name) = CStr::from_bytes_with_nul(&buf[..=bytes.len()]) {
            if let Ok(f) = ::kernel::firmware::Firmware::request_nowarn(name, dev) {
                return KernelFirmware::File(f);
            }
        }
    }
    pr_info!("tyr: no {path} from the firmware loader: the simulated MCU's own image\n");
    KernelFirmware::Builtin(&mali_sim::firmware::IMAGE)
}

/// [`Backend`] over the simulated Mali-G610 compiled into the kernel.
pub struct KernelBackend {
    device: Arc<SimDevice>,
    io: SimIo,
    clock: SimClock,
    timer_clock: KtimeClock,
    sys_clock: KernelPollClock,
    dma: KernelDma,
    exec: KernelExec,
    /// The bind pumps' events.
    bind_shared: Arc<BindShared>,
    /// The bind pumps made so far (those whose executor is gone are dropped when the next is
    /// made): what `stop_events` waits for.
    bind_pumps: Pin<KBox<Mutex<KVec<Arc<BindPump>>>>>,
    /// [`Backend::gpu_reqs`].
    gpu_reqs: KernelLock<u32>,
}

impl KernelBackend {
    /// A backend over a fresh simulated GPU of configuration `cfg` on the device `dev`, whose
    /// DMA memory (the DMA API's, on `dev`) is capped at `page_limit` pages when given.
    ///
    /// # Errors
    ///
    /// The DMA API's error if `dev`'s DMA masks cannot be set to the GPU's physical address
    /// width; [`Error::NoMemory`] if the simulator or its locks cannot be allocated.
    ///
    /// # Safety
    ///
    /// Nothing else allocates or maps DMA memory of `dev` during the call (its DMA masks are
    /// set): the caller is probing the device, or owns a device no driver uses.
    pub unsafe fn new(dev: &Device, cfg: Config, page_limit: Option<usize>) -> Result<Self> {
        // SAFETY: The caller's guarantee.
        unsafe { Self::new_inner(dev, cfg, page_limit, true) }
    }

    /// As [`new`](Self::new), but the MCU is given no image (unless `cfg` names one): it then
    /// checks only that its interface region is mapped when it starts. For tests that boot the
    /// firmware through page tables of their own rather than the driver's loader.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    ///
    /// # Safety
    ///
    /// As [`new`](Self::new).
    pub unsafe fn new_unflashed(
        dev: &Device,
        cfg: Config,
        page_limit: Option<usize>,
    ) -> Result<Self> {
        // SAFETY: The caller's guarantee.
        unsafe { Self::new_inner(dev, cfg, page_limit, false) }
    }

    /// # Safety
    ///
    /// As [`new`](Self::new).
    unsafe fn new_inner(
        dev: &Device,
        mut cfg: Config,
        page_limit: Option<usize>,
        flash: bool,
    ) -> Result<Self> {
        // The board's side of the firmware: the MCU is given the image the driver will find
        // (the firmware loader's file, else the simulator's own image), and refuses to start
        // unless the driver loaded exactly that.
        if flash && cfg.firmware.is_none() {
            flash_firmware(dev, &mut cfg);
        }
        // SAFETY: The caller's guarantee.
        let bus = unsafe { DmaBus::new(dev, cfg.identity.pa_bits(), page_limit) }?;
        let gpu = VBox::pin_init(
            new_mutex!(Gpu::init(cfg, BusMemory(bus.clone()))),
            GFP_KERNEL,
        )
        .map_err(|_| Error::NoMemory)?;
        let device = Arc::new(
            SimDevice {
                gpu,
                flush_page: FlushPage::new()?,
                io_revoked: AtomicBool::new(false),
                late_io: AtomicU64::new(0),
                irq_numbers: [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)],
                asserted: AtomicU32::new(0),
            },
            GFP_KERNEL,
        )
        .map_err(|_| Error::NoMemory)?;
        let exec = KernelExec::new(device.clone())?;
        let bind_shared = Arc::pin_init(
            pin_init!(BindShared {
                events <- new_spinlock!(None, "tyr::kernel::BindShared::events"),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| Error::NoMemory)?;
        let bind_pumps =
            KBox::pin_init(new_mutex!(KVec::new()), GFP_KERNEL).map_err(|_| Error::NoMemory)?;
        let gpu_reqs = Lock::new(0, crate::lock_class!(c"tyr_gpu_reqs"))?;
        LIVE_BACKENDS.fetch_add(1, Ordering::Relaxed);
        Ok(KernelBackend {
            io: ModelRegion::new(SimModel {
                device: device.clone(),
                pump: exec.pump.clone(),
            }),
            clock: SimClock(device.clone()),
            timer_clock: KtimeClock,
            sys_clock: KernelPollClock::new(),
            dma: KernelDma(bus),
            exec,
            bind_shared,
            bind_pumps,
            gpu_reqs,
            device,
        })
    }

    /// A simulated Mali-G610 on `dev`, its DMA memory uncapped.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new).
    ///
    /// # Safety
    ///
    /// As [`new`](Self::new).
    pub unsafe fn g610(dev: &Device) -> Result<Self> {
        // SAFETY: The caller's guarantee.
        unsafe { Self::new(dev, Config::g610(), None) }
    }

    /// The simulated GPU, for tests that play the hardware's part.
    pub fn device(&self) -> &SimDevice {
        &self.device
    }

    /// Takes the driver's MMIO away, as the platform bus does at unbind (a real driver's
    /// `Devres<IoMem>` is revoked then): from now on a register access reaches nothing, and
    /// each one is counted ([`late_io_accesses`](Self::late_io_accesses)) and reported with a
    /// kernel warning. The remove path calls it after the unplug.
    pub fn revoke_io(&self) {
        self.device.io_revoked.store(true, Ordering::Release);
    }

    /// How many register accesses the driver made after [`revoke_io`](Self::revoke_io).
    pub fn late_io_accesses(&self) -> u64 {
        self.device.late_io.load(Ordering::Relaxed)
    }

    /// The handler of line `line` (an index into [`ROUTED_LINES`]: `job`, `mmu`, `gpu`) for
    /// the interrupt it is wired to; register it before [`route_irqs`](Self::route_irqs).
    /// [`Error::Invalid`] for a line that is not one of the three.
    pub fn irq_handler(&self, line: usize) -> Result<GpuIrq> {
        if line >= ROUTED_LINES.len() {
            return Err(Error::Invalid);
        }
        Ok(GpuIrq {
            pump: self.exec.pump.clone(),
            line,
        })
    }

    /// Wires the simulated GPU's lines `job`, `mmu` and `gpu` to the interrupts `numbers` of
    /// the interrupt controller, whose handlers ([`irq_handler`](Self::irq_handler)) are
    /// registered: from now on interrupts reach the driver through the controller and the
    /// event pump only runs the simulated GPU's time and the driver's work. `EINVAL` for a
    /// zero number (nothing changed).
    pub fn route_irqs(&self, numbers: [u32; 3]) -> Result {
        if numbers.contains(&0) {
            return Err(Error::Invalid);
        }
        self.device.route_irqs(numbers);
        // A line asserted already is raised at the next change the pump makes.
        self.exec.kick();
        Ok(())
    }

    /// Has the event pump call `events` (replacing any earlier one) for the simulated GPU's
    /// interrupts and the executor's wake-ups, or stop calling them with `None`. A call
    /// already under way finishes with the events it took.
    pub fn set_events(&self, events: Option<Arc<dyn EventSink>>) {
        let start = events.is_some();
        *self.bind_shared.events.lock() = events.clone();
        *self.exec.pump.events.lock() = events;
        if start {
            // A line may be asserted already.
            self.device.raise_asserted();
            self.exec.kick();
        }
    }
}

impl Drop for KernelBackend {
    fn drop(&mut self) {
        // A queued or running pump keeps the simulated GPU alive through its own reference;
        // without events it stops at its next turn instead of serving a driver that is gone.
        self.set_events(None);
        LIVE_BACKENDS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A queue's fences in Linux: its done fences on a `dma_fence` timeline of their own (what
/// syncobjs and other drivers see), its hardware fences on another (what the ring signals).
pub struct QueueFences {
    done: jobqueue::kernel::KernelAlloc,
    hw: jobqueue::kernel::Timeline,
}

impl jobqueue::Allocator<KernelFence> for QueueFences {
    type DepTable = <jobqueue::kernel::KernelAlloc as jobqueue::Allocator<KernelFence>>::DepTable;

    fn try_new_fence(
        &self,
        token: &jobqueue::AllocToken<'_>,
    ) -> core::result::Result<KernelFence, jobqueue::AllocError> {
        jobqueue::Allocator::try_new_fence(&self.done, token)
    }

    fn try_new_callback(
        &self,
        token: &jobqueue::AllocToken<'_>,
    ) -> core::result::Result<jobqueue::kernel::KernelCallback, jobqueue::AllocError> {
        jobqueue::Allocator::try_new_callback(&self.done, token)
    }

    fn try_new_dep_table(
        &self,
        token: &jobqueue::AllocToken<'_>,
        len: usize,
    ) -> core::result::Result<Self::DepTable, jobqueue::AllocError> {
        jobqueue::Allocator::try_new_dep_table(&self.done, token, len)
    }
}

/// The kernel's sleeping locks: a `kernel::sync::Mutex` in a pinned allocation of its own, so
/// that the driver's state can hold one by value and make it fallibly (the kernel's mutexes
/// cannot move once initialised). Every lock of this family is of one lockdep class.
pub struct KernelLocks;

impl LockFamily for KernelLocks {
    type Lock<T: Send> = KernelLock<T>;
}

/// A lock of [`KernelLocks`].
pub struct KernelLock<T>(Pin<KBox<Mutex<Loose<T>>>>);

/// The value inside a [`KernelLock`]. The kernel's guard gives `&mut` access only to an
/// `Unpin` value; the driver never pins what it locks (no `Pin<&mut T>` is made of it), so the
/// wrapper is `Unpin` whatever `T` is.
struct Loose<T>(T);

impl<T> Unpin for Loose<T> {}

impl<T: Send> Lock<T> for KernelLock<T> {
    type Guard<'a>
        = KernelGuard<'a, T>
    where
        T: 'a;

    fn new(value: T, class: LockClass) -> Result<Self> {
        KBox::pin_init(Mutex::new(Loose(value), class.name, class.key), GFP_KERNEL)
            .map(KernelLock)
            .map_err(|_| Error::NoMemory)
    }

    fn guard(&self) -> KernelGuard<'_, T> {
        KernelGuard(self.0.lock())
    }
}

/// The guard of a [`KernelLock`]: the kernel mutex's own guard, dereferencing to the value.
pub struct KernelGuard<'a, T>(::kernel::sync::MutexGuard<'a, Loose<T>>);

impl<T> core::ops::Deref for KernelGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0 .0
    }
}

impl<T> core::ops::DerefMut for KernelGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0 .0
    }
}

impl Backend for KernelBackend {
    type Io = SimIo;
    type Clock = SimClock;
    type TimerClock = KtimeClock;
    type SysClock = KernelPollClock;
    type Exec = KernelExec;
    type BindExec = KernelBindExec;
    type Dma = KernelDma;
    type Fence = KernelFence;
    type JobAlloc = QueueFences;
    type DrmAlloc = drm_ctx::kernel::KernelAlloc;
    type Alloc = KernelAlloc;
    type Locks = KernelLocks;
    type Firmware = KernelFirmware;

    fn io(&self) -> &SimIo {
        &self.io
    }

    fn clock(&self) -> &SimClock {
        &self.clock
    }

    fn gpu_reqs(&self) -> &KernelLock<u32> {
        &self.gpu_reqs
    }

    fn timer_clock(&self) -> &KtimeClock {
        &self.timer_clock
    }

    fn cond_resched(&self) {
        // `cond_resched()` is a C macro: `__might_resched` (what `might_sleep` checks) and
        // `_cond_resched`, which calls `__cond_resched` (through a static call or key under
        // `PREEMPT_DYNAMIC`). `__cond_resched` is declared (and exported) only without full
        // preemption or with `PREEMPT_DYNAMIC`; under full preemption the macro does nothing
        // but the check, since the scheduler preempts the bind by itself.
        ::kernel::task::might_sleep();
        #[cfg(any(not(CONFIG_PREEMPTION), CONFIG_PREEMPT_DYNAMIC))]
        // SAFETY: Called from process context between two steps of a bind, where the only
        // locks held are mutexes (the VM's) and preemption is enabled (`might_sleep` checks
        // it): the kernel may schedule there.
        unsafe {
            ::kernel::bindings::__cond_resched();
        }
    }

    fn cpu_time(&self, clock: CpuClock) -> Duration {
        let mut ts = ::kernel::bindings::timespec64::default();
        match clock {
            // SAFETY: `ts` is a valid, writable `timespec64` for the duration of the call,
            // which reads the clock and may be called from any context but NMI.
            CpuClock::Monotonic => unsafe { ::kernel::bindings::ktime_get_ts64(&mut ts) },
            // SAFETY: As above.
            CpuClock::MonotonicRaw => unsafe { ::kernel::bindings::ktime_get_raw_ts64(&mut ts) },
        }
        Duration::new(
            u64::try_from(ts.tv_sec).unwrap_or(0),
            u32::try_from(ts.tv_nsec).unwrap_or(0),
        )
    }

    fn sys_clock(&self) -> &KernelPollClock {
        &self.sys_clock
    }

    fn dma(&self) -> &KernelDma {
        &self.dma
    }

    fn new_job_alloc(&self) -> Result<QueueFences> {
        Ok(QueueFences {
            done: jobqueue::kernel::KernelAlloc::new(
                jobqueue::kernel::Timeline::new(c"tyr", c"queue"),
                GFP_KERNEL,
            ),
            hw: jobqueue::kernel::Timeline::new(c"tyr", c"ring"),
        })
    }

    fn new_hw_fence(&self, alloc: &QueueFences) -> Result<KernelFence> {
        KernelFence::new(&alloc.hw, 0, GFP_KERNEL).map_err(|_| Error::NoMemory)
    }

    fn syncobj_fence(f: &KernelFence) -> Result<drm_ctx::kernel::DmaFence> {
        let raw = NonNull::new(f.as_raw()).ok_or(Error::Invalid)?;
        // SAFETY: `f` holds a reference to the live fence for the duration of the call.
        Ok(unsafe { drm_ctx::kernel::DmaFence::from_raw_get(raw) })
    }

    fn dependency(f: &drm_ctx::kernel::DmaFence) -> Result<KernelFence> {
        let raw = NonNull::new(f.as_raw()).ok_or(Error::Invalid)?;
        // SAFETY: `f` holds a reference to the live fence for the duration of the call. Any
        // driver's fence will do: the queue waits for it through its callbacks.
        Ok(unsafe { KernelFence::from_borrowed(raw) })
    }

    fn fence_timeline(f: &KernelFence) -> Option<(u64, u64)> {
        // The driver's done fences get their seqno (from 1) when their job is committed; a
        // fence still at 0 has no place to compare yet. (Seqnos are compared as 64-bit
        // numbers, as `dma_fence_is_later` does for the driver's own fences.)
        let (context, seqno) = f.context_and_seqno();
        (seqno != 0).then_some((context, seqno))
    }

    fn start_events<E: Events + 'static>(
        &self,
        events: crate::env::Weak<E, KernelAlloc>,
    ) -> Result {
        let sink: Arc<dyn EventSink> =
            Arc::new(WeakEvents(events), GFP_KERNEL).map_err(|_| Error::NoMemory)?;
        self.set_events(Some(sink));
        Ok(())
    }

    fn stop_events(&self) {
        self.set_events(None);
        // A call under way (it took the events before they were cleared) finishes before
        // this returns, as the host's event thread is joined: after it, nothing of the driver
        // touches the GPU (the remove path takes the MMIO away next). Not when the call is
        // this one (the driver's last reference went on the pump).
        let me: *mut core::ffi::c_void = ::kernel::task::Task::current_raw().cast();
        let wait = |busy: &AtomicPtr<core::ffi::c_void>, what: &str| {
            let mut waited = Duration::ZERO;
            loop {
                let task = busy.load(Ordering::Acquire);
                if task.is_null() || task == me {
                    return;
                }
                if waited >= STOP_WAIT {
                    pr_err!("tyr: the {what}'s call did not finish in {STOP_WAIT:?}\n");
                    return;
                }
                fsleep(Delta::from_micros(100));
                waited += Duration::from_micros(100);
            }
        };
        wait(&self.exec.pump.busy, "event pump");
        // Each bind pump in turn, the list's lock let go while waiting (a bind pump's call
        // may make a new bind executor).
        let mut i = 0;
        loop {
            let Some(pump) = self.bind_pumps.lock().get(i).cloned() else {
                break;
            };
            wait(&pump.busy, "bind pump");
            i += 1;
        }
    }

    fn irq_pending(&self, line: IrqLine) -> bool {
        let line = match line {
            IrqLine::Gpu => SimIrqLine::Gpu,
            IrqLine::Job => SimIrqLine::Job,
            IrqLine::Mmu => SimIrqLine::Mmu,
        };
        self.device.with(|gpu| gpu.irq_pending(line))
    }

    fn executor(&self) -> &KernelExec {
        &self.exec
    }

    fn new_bind_executor(&self, vm: u64) -> Result<KernelBindExec> {
        let exec = KernelBindExec::new(self.bind_shared.clone(), vm)?;
        let mut pumps = self.bind_pumps.lock();
        // A retired pump's executor is gone with its queue: a waker left in a fence callback
        // may still run it, and it then finds no queue for its VM.
        pumps.retain(|p| !p.retired.load(Ordering::Acquire));
        pumps
            .push(exec.pump.clone(), GFP_KERNEL)
            .map_err(|_| Error::NoMemory)?;
        Ok(exec)
    }

    fn timestamp_frequency(&self) -> u64 {
        self.device.with(|gpu| gpu.config().timings.timestamp_hz)
    }

    fn flush_id_page(&self) -> Option<CpuPage> {
        self.device.flush_page.cpu_page()
    }

    fn request_firmware(&self, path: &str) -> Result<KernelFirmware> {
        Ok(flash_source(self.dma.0.device(), path))
    }

    fn log(&self, level: LogLevel, args: fmt::Arguments<'_>) {
        match level {
            LogLevel::Info => pr_info!("{}\n", args),
            LogLevel::Err => pr_err!("{}\n", args),
        }
    }
}

#[cfg(all(CONFIG_OF, CONFIG_COMMON_CLK, CONFIG_REGULATOR, CONFIG_PM_OPP))]
pub mod board;
pub mod boot;
pub mod dma;
mod kunit;
