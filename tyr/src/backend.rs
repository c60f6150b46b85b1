// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What the driver needs from its environment.
//!
//! The driver logic is the same wherever it runs; only the services below it differ. A
//! [`Backend`] bundles them:
//!
//! - **MMIO**: the GPU's register window as an [`Io`] region, through which the
//!   [`regs`](crate::regs) declarations are read and written. A kernel backend passes its
//!   `Mmio` mapping, the host backend a region that forwards every access to the simulated GPU.
//! - **DMA memory** ([`DmaMemory`]): zeroed, page-granular memory with a device address the GPU
//!   uses and a CPU view the driver writes page tables through (`dma_alloc_coherent` in Linux).
//! - **Interrupts**: whether an interrupt line is asserted ([`IrqLine`]).
//! - **Time**, three clocks:
//!   - the hardware's ([`Backend::clock`]), a [`PollClock`] for the poll loops that wait for
//!     register state (over a simulated GPU, the simulation's time, which their sleeps
//!     advance);
//!   - the driver's deadlines' ([`Backend::timer_clock`]): the job timeout, the scheduler's
//!     tick, the idle power-down and the governor's periods, and the executor's timers
//!     ([`jobqueue::Executor::wake_at`]). It is the clock the kernel would measure them on
//!     (`ktime_get`, whose `jiffies` panthor's delayed works count), on the host `Instant`,
//!     never the simulation's: a job that waits for something the CPU does must not time out
//!     because the simulated GPU had nothing to do and its time jumped ahead. A host test may
//!     put it on simulated time instead (`host::HostTime::Simulated`), to go through long
//!     timeouts without waiting for them;
//!   - the system's monotonic clock ([`Backend::sys_clock`]) for the waits on the CPU's side,
//!     for the driver's own work item;
//!
//!   and the CPU clocks userspace reads ([`Backend::cpu_time`]), for `TIMESTAMP_INFO`.
//! - **DRM core**: the memory the DRM core allocates devices and GEM objects from
//!   ([`drm_ctx::mem::Allocator`]); the DRM core itself is `drm-ctx`'s.
//! - **Fences**: the job queues' fences ([`Backend::Fence`]) and their conversions to and from
//!   the fences syncobjs hold ([`Backend::syncobj_fence`], [`Backend::dependency`]):
//!   `drm_ctx::drm::syncobj::FenceRef`s over a [`Fence`](drm_ctx::drm::syncobj::Fence) the
//!   backend implements (the host: `FenceRef::from_arc` of its job fences), `struct dma_fence`s
//!   in Linux.
//! - **Firmware files**: the MCU's image, by path ([`Backend::request_firmware`]).
//! - **Logging**: the `dev_info!`/`dev_err!` of the environment.
//! - **Interrupts and deferred work**: the environment calls the driver's
//!   [`Events`] when an interrupt line is asserted (the threaded interrupt handler) and when the
//!   [`Executor`](jobqueue::Executor) it lends the job queues was woken (the work item of a
//!   workqueue); both run on the environment's thread, never concurrently with each other.
//!   Each VM's bind queue has an executor of its own ([`Backend::new_bind_executor`]), whose
//!   wake-ups run [`Events::bind_work`] on a worker of their own, concurrently with the rest.
//!
//! `host::HostBackend` (feature `host`) implements the bundle over the simulated Mali-G610.

use core::fmt;
use core::ops::DerefMut;
use core::ptr::NonNull;
use core::sync::atomic::AtomicU64;
use core::sync::atomic::Ordering;

use register::io::poll::PollClock;
use register::io::{Io, IoCapable, IoKnownSize};

use crate::Result;

/// One of the GPU's interrupt lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IrqLine {
    /// GPU_CONTROL interrupts.
    Gpu,
    /// JOB_CONTROL interrupts.
    Job,
    /// MMU_CONTROL interrupts.
    Mmu,
}

/// Severity of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LogLevel {
    /// Normal information (`dev_info!`).
    Info,
    /// An error (`dev_err!`).
    Err,
}

/// A CPU clock userspace can read (`DEV_QUERY(TIMESTAMP_INFO)` samples one next to the GPU's
/// timestamp, as `DRM_PANTHOR_TIMESTAMP_CPU_*` asks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CpuClock {
    /// `CLOCK_MONOTONIC` (`ktime_get_ts64` in the kernel).
    Monotonic,
    /// `CLOCK_MONOTONIC_RAW` (`ktime_get_raw_ts64`): the same clock without NTP's slewing.
    MonotonicRaw,
}

/// Size of a DMA page.
pub const PAGE_SIZE: u64 = 4096;

/// A block of DMA memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaRegion {
    /// Device address of the first byte, aligned as requested.
    pub addr: u64,
    /// Number of pages usable from `addr`.
    pub pages: usize,
    /// What [`DmaMemory::free`] needs to release the block.
    pub cookie: u64,
}

impl DmaRegion {
    /// Size in bytes.
    pub const fn size(&self) -> u64 {
        (self.pages as u64).wrapping_mul(PAGE_SIZE)
    }
}

/// DMA memory: blocks the GPU reaches by device address and the CPU through its own view.
///
/// # Safety
///
/// Implementations must guarantee that every block returned by [`alloc`](Self::alloc) or
/// [`alloc_page`](Self::alloc_page) is zeroed, page aligned (at least), disjoint from every other
/// live block, and stays allocated until it is freed; and that
/// [`cpu_u64`](Self::cpu_u64)`(a)`, for an 8-byte aligned address `a` inside a live block,
/// returns a pointer valid for atomic accesses from any thread until that block is freed.
pub unsafe trait DmaMemory: Send + Sync {
    /// Allocates `pages` zeroed pages whose device address is a multiple of `align` (a power
    /// of two, at least [`PAGE_SIZE`]).
    fn alloc(&self, pages: usize, align: u64) -> Result<DmaRegion>;

    /// Frees a block.
    ///
    /// # Safety
    ///
    /// `region` came from [`alloc`](Self::alloc) of this memory and is not used afterwards
    /// (no CPU pointer into it is dereferenced again).
    unsafe fn free(&self, region: DmaRegion);

    /// Allocates one zeroed page and returns its device address.
    fn alloc_page(&self) -> Result<u64>;

    /// Frees a page from [`alloc_page`](Self::alloc_page).
    ///
    /// # Safety
    ///
    /// `addr` came from [`alloc_page`](Self::alloc_page) and is not used afterwards.
    unsafe fn free_page(&self, addr: u64);

    /// The CPU view of the 64-bit word at device address `addr`, or `None` if the address is
    /// not inside a live block.
    fn cpu_u64(&self, addr: u64) -> Option<NonNull<AtomicU64>>;

    /// Makes CPU writes to `len` bytes at `addr` visible to the GPU (a no-op on coherent
    /// systems): the CPU cache lines of the range are written back.
    fn sync_for_device(&self, addr: u64, len: usize);

    /// The CPU page at device address `addr` (page aligned, inside a live block), as a GEM
    /// object lends it to userspace mappings; `None` if the memory cannot be mapped into a
    /// process (the default) or `addr` is not such an address.
    ///
    /// Implemented where buffer objects' memory is what userspace `mmap()`s: in Linux, where
    /// a mapping of a buffer object inserts these pages ([`drm_ctx::drm::gem::CpuPage`]). The
    /// host DRM core hands the object to its client instead.
    fn cpu_page(&self, _addr: u64) -> Option<drm_ctx::drm::gem::CpuPage> {
        None
    }

    /// Makes GPU writes to `len` bytes at `addr` visible to the CPU: the CPU cache lines of
    /// the range are dropped, so the next CPU read fetches memory.
    ///
    /// The default does nothing, which is right only for memory the CPU and the GPU see
    /// coherently; memory behind CPU caches the GPU does not snoop must implement it.
    fn sync_for_cpu(&self, addr: u64, len: usize) {
        let _ = (addr, len);
    }
}

/// Where in the driver a lock is made, for the kernel's lock validator.
///
/// Lockdep checks the order in which classes of locks are taken, a class being the place that
/// initialises a lock: a file's VM table and the device's VM states are two classes, so taking
/// one inside the other is a nesting lockdep records (and would report if it were ever taken
/// the other way round), not a lock taken twice. Every place that makes a lock names its class
/// with [`lock_class!`](crate::lock_class); outside Linux the class is only a name.
#[derive(Clone, Copy)]
pub struct LockClass {
    /// The lock's name in the validator's reports.
    pub name: &'static core::ffi::CStr,
    /// The class key: one static per place that makes locks.
    #[cfg(gpukit_kernel)]
    pub key: core::pin::Pin<&'static ::kernel::sync::LockClassKey>,
}

impl fmt::Debug for LockClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LockClass").field(&self.name).finish()
    }
}

/// The [`LockClass`] of the place that uses it, named `$name` (a C string literal).
#[cfg(gpukit_kernel)]
#[macro_export]
macro_rules! lock_class {
    ($name:literal) => {
        $crate::backend::LockClass {
            name: $name,
            key: ::kernel::static_lock_class!(),
        }
    };
}

/// The [`LockClass`] of the place that uses it, named `$name` (a C string literal).
#[cfg(not(gpukit_kernel))]
#[macro_export]
macro_rules! lock_class {
    ($name:literal) => {
        $crate::backend::LockClass { name: $name }
    };
}

/// The [`LockClass`] of member `$index` of a family of at most `$count` locks made at the same
/// place and taken together, in increasing index order (a group's queues, which the scheduler
/// locks all at once to evict an idle group), named `$name`.
///
/// Lockdep reports a lock taken while another of its class is held as possible recursive
/// locking; one class per member turns that into an order it checks (member 0 before 1 ...).
/// Members from `$count` on share the classes of the first ones (`$index % $count`).
#[cfg(gpukit_kernel)]
#[macro_export]
macro_rules! lock_class_nth {
    ($name:literal, $index:expr, $count:expr) => {{
        static KEYS: [::kernel::sync::LockClassKey; $count] = [const {
            // SAFETY: The keys are in static memory, pinned below and never dropped.
            unsafe { ::kernel::sync::LockClassKey::new_static() }
        }; $count];
        $crate::backend::LockClass {
            name: $name,
            key: ::kernel::prelude::Pin::static_ref(&KEYS[($index) % $count]),
        }
    }};
}

/// The [`LockClass`] of member `$index` of a family of at most `$count` locks made at the same
/// place and taken together, in increasing index order, named `$name` (outside Linux only the
/// name).
#[cfg(not(gpukit_kernel))]
#[macro_export]
macro_rules! lock_class_nth {
    ($name:literal, $index:expr, $count:expr) => {{
        let _ = ($index, $count);
        $crate::backend::LockClass { name: $name }
    }};
}

/// A lock owning a `T`, from the environment's [`LockFamily`].
///
/// The same driver code holds a `parking_lot` mutex on a host (`StdLocks`, feature `std`) and a
/// `kernel::sync::Mutex` in Linux.
/// [`with`](Lock::with) runs a closure with the value locked; [`guard`](Lock::guard) hands out
/// a guard for code that keeps the value locked across calls (a VM during a whole bind).
pub trait Lock<T>: Sized + Send + Sync {
    /// The value, locked until the guard drops.
    type Guard<'a>: DerefMut<Target = T>
    where
        Self: 'a;

    /// Wraps `value` in a lock of class `class` (see [`lock_class!`](crate::lock_class)).
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`](crate::Error::NoMemory) if the lock needs memory of its own (a
    /// kernel mutex lives in a pinned allocation) and there is none.
    fn new(value: T, class: LockClass) -> crate::Result<Self>;

    /// Locks the value (sleeping while another holder has it). The holder must not lock the
    /// same lock again.
    fn guard(&self) -> Self::Guard<'_>;

    /// Runs `f` with the value locked. `f` must not lock the same lock again.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.guard())
    }
}

/// The lock of backend `B`'s family around a `T`.
pub type LockOf<B, T> = <<B as Backend>::Locks as LockFamily>::Lock<T>;

/// The guard of a [`LockOf`].
pub type LockGuard<'a, B, T> = <LockOf<B, T> as Lock<T>>::Guard<'a>;

/// A kind of sleeping lock, for values of any type (the environment's mutex).
pub trait LockFamily: 'static {
    /// The lock of this family around a `T`.
    type Lock<T: Send>: Lock<T>;
}

/// The host's family of sleeping locks: `parking_lot`'s mutex.
///
/// Chosen over `std::sync::Mutex` for the property the kernel's mutex has and the driver
/// relies on: a thread that lets go of a lock and takes it again at once (a huge bind, one
/// bounded step at a time) cannot keep a waiter out for long. The kernel's mutex hands the
/// lock to a waiter that has waited (its handoff); `parking_lot`'s hands it to the next waiter
/// at least every half millisecond (its eventual fairness). A `std` mutex on Linux hands it to
/// whoever takes it first, which on a busy 2-core machine kept another client's bind out for
/// 0.2-0.6 s while a 3 TiB sparse bind ran (`bind_budget`'s latency test).
///
/// Under Miri the family is `std::sync::Mutex`: `parking_lot`'s queue of parked threads keeps
/// pointers in integers, which Miri's strict-provenance mode (CI's) refuses, and fairness is
/// not what Miri checks. Code that names the lock's type rather than [`Lock::guard`] would
/// build on one and not the other.
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StdLocks;

#[cfg(all(feature = "std", not(miri)))]
impl LockFamily for StdLocks {
    type Lock<T: Send> = parking_lot::Mutex<T>;
}

#[cfg(all(feature = "std", miri))]
impl LockFamily for StdLocks {
    type Lock<T: Send> = std::sync::Mutex<T>;
}

#[cfg(all(feature = "std", miri))]
impl<T: Send> Lock<T> for std::sync::Mutex<T> {
    type Guard<'a>
        = std::sync::MutexGuard<'a, T>
    where
        T: 'a;

    fn new(value: T, _class: LockClass) -> crate::Result<Self> {
        Ok(std::sync::Mutex::new(value))
    }

    fn guard(&self) -> std::sync::MutexGuard<'_, T> {
        // The driver does not panic while it holds a lock; a poisoned lock (a panic in a
        // caller's code) still guards a consistent value.
        self.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(all(feature = "std", not(miri)))]
impl<T: Send> Lock<T> for parking_lot::Mutex<T> {
    type Guard<'a>
        = parking_lot::MutexGuard<'a, T>
    where
        T: 'a;

    fn new(value: T, _class: LockClass) -> crate::Result<Self> {
        Ok(parking_lot::Mutex::new(value))
    }

    fn guard(&self) -> parking_lot::MutexGuard<'_, T> {
        self.lock()
    }
}

/// What the driver runs in response to the environment: its interrupt handler, its work item
/// and its bind work item.
///
/// The environment calls [`irq`](Self::irq) and [`work`](Self::work) one call at a time
/// (from one thread, or, in the kernel on a board, from the event pump and the interrupt
/// threads under one lock), and [`bind_work`](Self::bind_work) for a VM from a worker of that VM's bind executor
/// (one call at a time per VM), so that a long page-table update holds up neither interrupts,
/// submissions and scheduling nor other VMs' binds (panthor runs `VM_BIND` jobs on a
/// scheduler per VM, on a workqueue of their own).
pub trait Events: Send + Sync {
    /// An interrupt line is asserted; the handler reads and clears its status.
    fn irq(&self);

    /// The executor was woken (or a timer it was given expired): run the job queues.
    fn work(&self);

    /// The bind executor of the VM with key `vm` ([`Backend::new_bind_executor`]) was woken
    /// (or a timer it was given expired): run that VM's bind queue. Nothing by default.
    fn bind_work(&self, vm: u64) {
        let _ = vm;
    }
}

/// The driver's event handlers as the environment holds them between calls: whatever their
/// type, and (through [`WeakEvents`]) weakly, so that the environment never keeps a driver
/// alive that is otherwise gone.
pub trait EventSink: Send + Sync {
    /// Runs `f` on the handlers if they are still there; false if they are gone.
    fn with(&self, f: &mut dyn FnMut(&dyn Events)) -> bool;
}

/// Handlers held by value are always there.
impl<E: Events> EventSink for E {
    fn with(&self, f: &mut dyn FnMut(&dyn Events)) -> bool {
        f(self);
        true
    }
}

/// Handlers held weakly: gone once the last strong reference to them is.
pub struct WeakEvents<E, A: drm_ctx::mem::Allocator>(pub crate::env::Weak<E, A>);

impl<E: Events + 'static, A: drm_ctx::mem::Allocator> EventSink for WeakEvents<E, A> {
    fn with(&self, f: &mut dyn FnMut(&dyn Events)) -> bool {
        match self.0.upgrade() {
            Some(e) => {
                f(&*e);
                true
            }
            None => false,
        }
    }
}

/// The environment of the driver.
pub trait Backend: Send + Sync + 'static {
    /// The MMIO region of the GPU.
    type Io: Io + IoKnownSize + IoCapable<u32> + IoCapable<u64>;
    /// The clock poll loops use (the hardware's time).
    type Clock: PollClock + Clone + Send + Sync + 'static;
    /// The clock of the driver's deadlines and the executor's timers
    /// ([`timer_clock`](Self::timer_clock)).
    type TimerClock: PollClock + Clone + Send + Sync + 'static;
    /// The system's monotonic clock ([`sys_clock`](Self::sys_clock)).
    type SysClock: PollClock + Send + Sync + 'static;
    /// The workqueue the job queues run on.
    type Exec: jobqueue::Executor + Clone + Send + Sync + 'static;
    /// The executor of a VM's bind queue: its wake-ups and timers run [`Events::bind_work`]
    /// for that VM on a worker of its own, apart from [`Events::work`] and from other VMs'.
    type BindExec: jobqueue::Executor + Clone + Send + Sync + 'static;
    /// DMA memory (cloned into every object that owns some).
    type Dma: DmaMemory + Clone + 'static;
    /// Memory of the DRM core.
    type DrmAlloc: drm_ctx::mem::Allocator;
    /// The fences of the driver's queues (`jobqueue`'s): a job's done fence, which syncobjs
    /// hold, and its hardware fence, which the ring signals. Host fences on a host, `struct
    /// dma_fence` in Linux.
    type Fence: jobqueue::SignalFence + 'static;
    /// Fences and job memory for one queue ([`new_job_alloc`](Self::new_job_alloc)): in Linux
    /// each queue's done fences are a `dma_fence` timeline of their own, and its hardware
    /// fences another.
    type JobAlloc: jobqueue::Allocator<Self::Fence> + Send + Sync + 'static;
    /// The memory of the driver's own bookkeeping ([`env`](mod@crate::env) containers: lists of
    /// VMs, groups and mappings, shared objects); `kvmalloc` in the kernel.
    type Alloc: drm_ctx::mem::Allocator;
    /// The locks of the driver's state that is not `std`-only (power management).
    type Locks: LockFamily;
    /// A firmware file ([`request_firmware`](Self::request_firmware)), kept as long as the
    /// driver keeps the firmware it loaded: `struct firmware` in Linux.
    type Firmware: core::ops::Deref<Target = [u8]> + Send + Sync + 'static;

    /// The register window.
    fn io(&self) -> &Self::Io;

    /// The hardware's clock: what poll loops for register state read and sleep on. Over a
    /// simulated GPU, the simulation's time.
    fn clock(&self) -> &Self::Clock;

    /// The GPU commands a caller waits for whose completion the interrupt handler has not
    /// taken yet: `GPU_IRQ` bits (`RESET_COMPLETED`, `CLEAN_CACHES_COMPLETED`), 0 at first,
    /// under a lock the handler and the waiters share (panthor's `pending_reqs` and
    /// `reqs_lock`; see [`crate::gpu::command_and_wait`]). One per device.
    fn gpu_reqs(&self) -> &LockOf<Self, u32>;

    /// The clock of the deadlines the driver sets itself: the job timeout, the scheduler's
    /// tick, the idle power-down, the governor's periods. The executor's timers
    /// ([`jobqueue::Executor::wake_at`]) are instants of this clock, and the job queues
    /// measure their timeouts on it. In the kernel `ktime_get` (the clock behind the `jiffies`
    /// panthor's delayed works count), on the host the monotonic clock by default: real time,
    /// whatever the simulated GPU does. Sleeping on it waits for real (it does not run the
    /// hardware).
    fn timer_clock(&self) -> &Self::TimerClock;

    /// The time of the CPU clock `clock`, as userspace reads it (`clock_gettime`): the
    /// kernel's `ktime_get_ts64` or `ktime_get_raw_ts64`, the host's own clocks.
    fn cpu_time(&self, clock: CpuClock) -> core::time::Duration;

    /// The system's monotonic clock (in the kernel, `ktime_get` and `fsleep`), which a thread
    /// measures and sleeps on while it waits for something the CPU does: for the driver's work
    /// item to run. Waits for the hardware use [`clock`](Self::clock) instead. The two may be
    /// one clock on real hardware; over a simulated GPU they are not: the simulation's time
    /// moves only when the simulation runs, and sleeping on it moves it (runs the GPU) rather
    /// than letting another thread run.
    fn sys_clock(&self) -> &Self::SysClock;

    /// DMA memory.
    fn dma(&self) -> &Self::Dma;

    /// Fences and job memory for a new queue.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`](crate::Error::NoMemory).
    fn new_job_alloc(&self) -> Result<Self::JobAlloc>;

    /// A pending hardware fence for a job of the queue whose allocator is `alloc`, made when
    /// the job is submitted so that running it allocates nothing.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`](crate::Error::NoMemory).
    fn new_hw_fence(&self, alloc: &Self::JobAlloc) -> Result<Self::Fence>;

    /// A job's done fence as a syncobj holds it (what `GROUP_SUBMIT` and `VM_BIND` signal).
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`](crate::Error::NoMemory).
    fn syncobj_fence(f: &Self::Fence) -> Result<drm_ctx::drm::SyncobjFence>;

    /// The fence a job waits for when it waits on `f`, one fence a syncobj's fence is made of
    /// (a leaf: chains and arrays are unwrapped before).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`](crate::Error::Invalid) for a fence the backend cannot wait for.
    fn dependency(f: &drm_ctx::drm::SyncobjFence) -> Result<Self::Fence>;

    /// A fence's timeline and place on it (a `dma_fence`'s context and seqno), `None` for a
    /// fence on no timeline or without a place yet (the done fence of a job not committed).
    /// Of two fences of one timeline the later signals last, so a job that waits on both
    /// needs to wait only on the later one (`drm_sched_job_add_dependency`'s rule).
    fn fence_timeline(f: &Self::Fence) -> Option<(u64, u64)>;

    /// Whether `line` is asserted.
    fn irq_pending(&self, line: IrqLine) -> bool;

    /// The executor job queues are created with.
    fn executor(&self) -> &Self::Exec;

    /// A new executor for the bind queue of the VM with key `vm`: its wake-ups and timers run
    /// [`Events::bind_work`]`(vm)` (while the events are started) on a worker of its own,
    /// never the thread or work item [`executor`](Self::executor) serves nor another VM's, so
    /// that a bind running for long (a huge sparse range, applied in bounded steps) holds up
    /// no interrupt, submission, scheduling or other VM's bind. The worker goes when the
    /// executor's last clone is dropped. After [`stop_events`](Self::stop_events) its
    /// wake-ups run nothing; whether a later [`start_events`](Self::start_events) serves it
    /// again is the backend's choice (the host's does not, the kernel's does): the driver
    /// starts the events once, at probe, before it makes any bind queue.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`](crate::Error::NoMemory) (or the environment's error) if no worker
    /// can be made.
    fn new_bind_executor(&self, vm: u64) -> Result<Self::BindExec>;

    /// Offers the CPU to other threads between two steps of a long update (a huge bind), after
    /// the device-wide locks were let go, when the thread has run long enough that the
    /// scheduler would rather run another. Does nothing by default; the kernel calls
    /// `__cond_resched` (what the C macro `cond_resched()` calls), the host yields once per
    /// 2 ms of running.
    fn cond_resched(&self) {}

    /// Starts calling `events` on interrupts and executor wake-ups, until
    /// [`stop_events`](Self::stop_events) or until `events` is gone.
    ///
    /// # Errors
    ///
    /// [`Error::NoMemory`](crate::Error::NoMemory) (or the environment's error) if the events
    /// cannot be served.
    fn start_events<E: Events + 'static>(&self, events: crate::env::Weak<E, Self::Alloc>)
        -> Result;

    /// Stops calling the events (the bind work too): none starts after this returns, and none
    /// is running either when it returns (unless it is called from one: the driver's last
    /// reference may go in one).
    fn stop_events(&self);

    /// The firmware file at `path` in the environment's firmware directory (what
    /// `request_firmware` finds in Linux): for the MCU,
    /// `arm/mali/arch<major>.<minor>/mali_csffw.bin` ([`crate::csf::firmware_path`]).
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`](crate::Error::NotFound) (or the environment's error) if there is
    /// no such file.
    fn request_firmware(&self, path: &str) -> Result<Self::Firmware>;

    /// Writes a log line.
    fn log(&self, level: LogLevel, args: fmt::Arguments<'_>);

    /// Frequency, in Hz, of the system counter the GPU's `TIMESTAMP` register follows (what
    /// panthor reports from the CPU's architected timer, `CNTFRQ`), or 0 if unknown, which is
    /// panthor's answer without an architected timer and the default.
    fn timestamp_frequency(&self) -> u64 {
        0
    }

    /// The page userspace maps at `DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET`, whose first word
    /// reads as the GPU's `LATEST_FLUSH_ID`, for the DRM core to map read-only
    /// ([`drm_ctx::drm::Driver::mmap_own`]); it stays allocated as long as the backend. `None`
    /// (the default) where the backend has none: on the host, whose DRM core leaves that
    /// offset to the driver's own entry point (`ioctl::mmap`, which reads the register).
    ///
    /// On silicon this page is the GPU's USER register page itself (MMIO, mapped uncached
    /// through `io_remap_pfn_range`), which a [`drm_ctx::drm::gem::CpuPage`] of kernel memory
    /// cannot name; a backend over a simulator keeps a page of memory equal to it.
    fn flush_id_page(&self) -> Option<drm_ctx::drm::gem::CpuPage> {
        None
    }

    /// The rates, in Hz, the GPU clock can be set to (its operating points), slowest first;
    /// empty (the default) if the environment cannot change it.
    fn gpu_clock_rates(&self) -> &[u64] {
        &[]
    }

    /// Sets the GPU clock to `hz`, one of [`gpu_clock_rates`](Self::gpu_clock_rates).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`](crate::Error::Invalid) for a rate the clock does not have (the
    /// default refuses every rate).
    fn set_gpu_clock_rate(&self, hz: u64) -> crate::Result {
        let _ = hz;
        Err(crate::Error::Invalid)
    }

    /// The system goes to sleep (`true`) or wakes up: while it sleeps, time does not pass for
    /// the driver's timers (as the kernel's monotonic clock stops in a system suspend). The
    /// default does nothing (the kernel's clock stops by itself); the host backend's timer
    /// clock stands still meanwhile and its timers do not fire.
    fn system_sleep(&self, asleep: bool) {
        let _ = asleep;
    }
}

/// 32- and 64-bit CPU accesses to DMA memory by device address (little-endian words).
///
/// Crate-internal: an access is only sound while the memory it touches stays allocated, which
/// the driver guarantees for the memory it owns (the firmware region, a live group's rings and
/// sync objects) but which a safe public API could not promise (another thread may free a block
/// between the look-up of its CPU view and the access).
///
/// ```compile_fail
/// # // Not reachable from outside the crate (issue 20).
/// use tyr::backend::Words;
/// ```
pub(crate) struct Words<'a, D: DmaMemory>(pub(crate) &'a D);

impl<D: DmaMemory> Words<'_, D> {
    fn word(&self, addr: u64) -> Option<&AtomicU64> {
        let p = self.0.cpu_u64(addr & !7)?;
        // SAFETY: `cpu_u64` returned a pointer into a live block, valid for atomic accesses
        // (`DmaMemory` contract); the caller keeps the block alive while it uses the words.
        Some(unsafe { p.as_ref() })
    }

    /// The 32-bit word at `addr` (0 if the address is not in live memory).
    pub(crate) fn rd32(&self, addr: u64) -> u32 {
        self.word(addr).map_or(0, |w| {
            (w.load(Ordering::Acquire) >> ((addr & 4) * 8)) as u32
        })
    }

    /// The 64-bit word at `addr & !7` (0 if the address is not in live memory).
    pub(crate) fn rd64_at(&self, addr: u64) -> u64 {
        self.word(addr).map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Replaces the bits `mask` of the 64-bit word at `addr & !7` with those of `v`, in one
    /// atomic update (nothing if the address is not in live memory).
    pub(crate) fn update64(&self, addr: u64, mask: u64, v: u64) {
        if let Some(w) = self.word(addr) {
            let _ = w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                Some((old & !mask) | (v & mask))
            });
        }
    }

    /// Writes the 32-bit word at `addr` (nothing if the address is not in live memory).
    pub(crate) fn wr32(&self, addr: u64, v: u32) {
        if let Some(w) = self.word(addr) {
            let shift = (addr & 4) * 8;
            let mask = 0xffff_ffffu64 << shift;
            let _ = w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                Some((old & !mask) | (u64::from(v) << shift))
            });
        }
    }

    /// The 64-bit word at `addr` (0 if the address is not in live memory).
    pub(crate) fn rd64(&self, addr: u64) -> u64 {
        self.word(addr).map_or(0, |w| w.load(Ordering::Acquire))
    }

    /// Writes the 64-bit word at `addr` (nothing if the address is not in live memory).
    pub(crate) fn wr64(&self, addr: u64, v: u64) {
        if let Some(w) = self.word(addr) {
            w.store(v, Ordering::Release);
        }
    }
}

/// `dev_info!`: logs an information line through a [`Backend`].
#[macro_export]
macro_rules! dev_info {
    ($backend:expr, $($arg:tt)*) => {
        $crate::backend::Backend::log($backend, $crate::backend::LogLevel::Info, format_args!($($arg)*))
    };
}

/// `dev_err!`: logs an error line through a [`Backend`].
#[macro_export]
macro_rules! dev_err {
    ($backend:expr, $($arg:tt)*) => {
        $crate::backend::Backend::log($backend, $crate::backend::LogLevel::Err, format_args!($($arg)*))
    };
}
