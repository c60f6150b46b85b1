// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The host backend: the driver on the simulated Mali-G610.
//!
//! [`HostBackend`] implements the [`Backend`] bundle over the simulated GPU of the
//! `gpukit-mali-sim` crate ([`mali_sim`]), the only part of the driver that names it:
//!
//! - MMIO is a [`ModelRegion`] whose [`DeviceModel`] ([`SimModel`]) forwards every access to
//!   the simulated register file. The simulated bus carries aligned 32-bit accesses only, so
//!   64-bit accesses are split into their `_LO` and `_HI` halves (low half first, as the
//!   kernel's `gpu_write64` does) and narrower ones are done on the containing word.
//! - The hardware's time is the simulator's: [`SimClock`] reads the simulated time and its
//!   `sleep` advances it, so poll loops are deterministic. The driver's deadlines (job
//!   timeouts, the scheduler's tick, the idle power-down) are on [`HostTimerClock`]: by
//!   default ([`HostTime::Real`]) the host's monotonic clock, real time as in the kernel; a
//!   test may put them on simulated time ([`HostBackend::with_time`] with
//!   [`HostTime::Simulated`]) to go through long timeouts at once. `TIMESTAMP_INFO`'s CPU
//!   timestamps are the host's `CLOCK_MONOTONIC` and `CLOCK_MONOTONIC_RAW`.
//! - DMA memory comes from the simulator's physical memory ([`SimDma`]), whose CPU pointers
//!   stay valid until freed.
//! - Log lines are printed (with `TYR_LOG` set) and the latest [`LOG_LINES`] kept for tests
//!   ([`HostBackend::log_lines`]), in memory set aside when the backend is made: logging from
//!   the interrupt handler or a work item allocates nothing, as `dev_err!` does not in the
//!   kernel.
//! - Interrupts and deferred work run on one event thread per backend ([`HostExec`] is its
//!   workqueue side), the host's executor of the simulated GPU. The thread calls the driver's
//!   interrupt handler while a line is asserted and its work item after a wake-up or when a
//!   timer is due; when neither has anything to do it calls the simulator's executor entry
//!   point, [`Gpu::step`]. On real time the steps are paced: simulated time never runs ahead of
//!   real time by more than `PACE_LEAD` (0.5 ms, less than a thread's sleep is worth) by the
//!   thread's doing (it may fall behind while the host computes the GPU), and
//!   when the next simulated event lies ahead the thread sleeps until real time reaches it,
//!   woken earlier by a register write, a poll loop's sleep, a wake-up or a timer. So a job
//!   blocked on memory only the CPU writes waits in real time, and sees the write within the
//!   simulated firmware's poll of sync waits (`Timings::sync_poll_ns`, 1 ms), while the CPU
//!   cost of an idle or blocked GPU stays at one wake-up per poll interval (at most one per
//!   20 ms when nothing is scheduled). On simulated time ([`HostTime::Simulated`]) the steps
//!   jump to the next hardware event or timer, so jobs run and time out as fast as the host
//!   computes them. The simulator does not depend on the thread: any executor that makes the
//!   same calls (a kernel work item, a test's loop) drives it the same way.
//! - Each VM's bind queue runs on a thread of its own ([`HostBindExec`], from
//!   [`new_bind_executor`](Backend::new_bind_executor)), which calls the driver's
//!   [`Events::bind_work`] for that VM when woken or when one of its timers is due, as a
//!   kernel driver's bind jobs run on a workqueue apart from its scheduler's; the thread ends
//!   with the queue.
//!
//! # Examples
//!
//! ```
//! use register::io::Io;
//! use tyr::host::HostBackend;
//! use tyr::regs::GPU_ID;
//! use tyr::backend::Backend;
//!
//! let b = HostBackend::g610();
//! assert_eq!(b.io().read(GPU_ID).prod_major().get(), 7);
//! ```

use core::any::Any;
use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use core::task::Waker;
use core::time::Duration;
use std::string::String;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Wake;
use std::thread::{self, JoinHandle, ThreadId};
use std::vec::Vec;

use drm_ctx::host::syncobj::{FenceRef, Registration, SignalledFence, SyncFence};
use jobqueue::host::HostFence;
use jobqueue::{Executor, Fence as _};

use register::io::model::{AccessWidth, DeviceModel, ModelRegion};
use register::io::poll::{PollClock, StdPollClock};

use crate::backend::{
    Backend, CpuClock, DmaMemory, DmaRegion, EventSink, Events, IrqLine, LogLevel, WeakEvents,
    PAGE_SIZE,
};
use crate::{env, Error, Result};
use mali_sim::{self as sim, Config, Gpu, PhysAddr, SharedGpu, SimMemory};

/// Forwards register accesses to the simulated GPU, until the MMIO is revoked
/// ([`HostBackend::revoke_io`]): from then on an access reaches nothing (a read gives 0) and
/// is counted.
#[derive(Clone, Debug)]
pub struct SimModel {
    gpu: SharedGpu,
    revoked: Arc<Revoked>,
    /// The event thread to wake after a write (which may have started something in the
    /// simulated hardware), if the model belongs to a backend.
    kick: Option<Arc<EventShared>>,
}

/// Whether the MMIO is revoked, and the accesses made since.
#[derive(Debug, Default)]
struct Revoked {
    on: AtomicBool,
    late: AtomicU64,
}

impl SimModel {
    /// Accesses to the simulated GPU's registers.
    pub fn new(gpu: SharedGpu) -> Self {
        SimModel {
            gpu,
            revoked: Arc::new(Revoked::default()),
            kick: None,
        }
    }

    /// How many register accesses came after the MMIO was revoked
    /// ([`HostBackend::revoke_io`]); a clone of the model keeps counting after the backend
    /// is gone.
    pub fn late_accesses(&self) -> u64 {
        self.revoked.late.load(Ordering::Relaxed)
    }

    /// Whether the access may go on; counts it if the MMIO is revoked.
    fn live(&self) -> bool {
        if self.revoked.on.load(Ordering::Acquire) {
            self.revoked.late.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }
}

impl DeviceModel for SimModel {
    fn read(&self, offset: usize, width: AccessWidth) -> u64 {
        if !self.live() {
            return 0;
        }
        let gpu = &self.gpu;
        // The counters that show time read as of now: on real time, simulated time first
        // catches up with it (the event thread lets it lag while nothing is due).
        if let (Some(k), true) = (&self.kick, sim::regs::reads_time(offset)) {
            k.catch_up(gpu);
        }
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

    fn write(&self, offset: usize, width: AccessWidth, value: u64) {
        if !self.live() {
            return;
        }
        let gpu = &self.gpu;
        match width {
            AccessWidth::U32 => gpu.write32(offset, value as u32),
            AccessWidth::U64 => {
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
        }
        if let Some(k) = &self.kick {
            k.kick(&self.gpu);
        }
    }
}

/// The simulator's time as a [`PollClock`]: sleeping advances the simulation.
#[derive(Clone, Debug)]
pub struct SimClock {
    gpu: SharedGpu,
    /// The event thread to wake after a sleep (which may have raised an interrupt).
    kick: Option<Arc<EventShared>>,
}

impl SimClock {
    /// The time of `gpu`.
    pub fn new(gpu: SharedGpu) -> Self {
        SimClock { gpu, kick: None }
    }
}

impl PollClock for SimClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.gpu.now_ns())
    }

    fn sleep(&self, duration: Duration) {
        self.gpu
            .advance(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));
        if let Some(k) = &self.kick {
            k.kick(&self.gpu);
        }
    }

    fn relax(&self) {}
}

/// How a [`HostBackend`] keeps the time of the driver's deadlines
/// ([`Backend::timer_clock`]), and so how its event thread runs the simulation.
///
/// The default is [`Real`](Self::Real), except under Miri, whose clock is virtual (it moves
/// by a fixed amount per basic block interpreted, so "real" time there outruns the work done
/// and the paced simulation, with the driver's periodic timers, never catches up): there it is
/// [`Simulated`](Self::Simulated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostTime {
    /// Real time, as in the kernel (the default): the deadlines are on the host's monotonic
    /// clock ([`HostTimerClock`]), and the event thread paces the simulation so that its time
    /// never runs ahead of real time (by more than 0.5 ms, the gaps not worth a thread's sleep):
    /// when nothing is due before real time reaches the next
    /// simulated event, it sleeps until then (or until a register write, a wake-up or a timer
    /// comes). Simulated time may fall behind real time (the host computes the GPU slower than
    /// silicon runs it); it catches up whenever the GPU has nothing to do.
    Real,
    /// Simulated time, for tests that go through long timeouts: the deadlines are on the
    /// simulation's time, and the event thread lets it jump to the next hardware event or
    /// timer, so that a job times out as soon as the host has computed the 5 s of simulated
    /// time before it. Deterministic, but unlike anything the kernel does: a job that waits
    /// for the CPU can time out long before the CPU got to it.
    Simulated,
}

impl Default for HostTime {
    fn default() -> Self {
        if cfg!(miri) {
            HostTime::Simulated
        } else {
            HostTime::Real
        }
    }
}

/// The clock of a [`HostBackend`]'s deadlines ([`Backend::timer_clock`]): the host's
/// monotonic clock from when the backend was made, standing still while the system sleeps
/// ([`Backend::system_sleep`], as the kernel's monotonic clock stops in a system suspend),
/// or, with [`HostTime::Simulated`], the simulation's time. Sleeping on it sleeps the thread
/// either way (it never runs the simulation).
#[derive(Clone, Debug)]
pub struct HostTimerClock(TimerSource);

#[derive(Clone, Debug)]
enum TimerSource {
    Real(Arc<RealClock>),
    Sim(SharedGpu),
}

/// The host's monotonic clock less the time the system slept.
#[derive(Debug)]
struct RealClock {
    origin: std::time::Instant,
    sleep: Mutex<Slept>,
}

#[derive(Debug, Default)]
struct Slept {
    /// Since when the system sleeps (elapsed since the origin), if it does.
    since: Option<Duration>,
    /// How long it slept before.
    total: Duration,
}

impl RealClock {
    fn now(&self) -> Duration {
        let s = plock(&self.sleep);
        let at = s.since.unwrap_or_else(|| self.origin.elapsed());
        at.saturating_sub(s.total)
    }

    fn set_asleep(&self, asleep: bool) {
        let mut s = plock(&self.sleep);
        let t = self.origin.elapsed();
        match (asleep, s.since) {
            (true, None) => s.since = Some(t),
            (false, Some(since)) => {
                s.total = s.total.saturating_add(t.saturating_sub(since));
                s.since = None;
            }
            _ => {}
        }
    }
}

impl HostTimerClock {
    fn real() -> Self {
        HostTimerClock(TimerSource::Real(Arc::new(RealClock {
            origin: std::time::Instant::now(),
            sleep: Mutex::new(Slept::default()),
        })))
    }

    /// Whether the clock is real time ([`HostTime::Real`]).
    pub fn is_real(&self) -> bool {
        matches!(self.0, TimerSource::Real(_))
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.now().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl PollClock for HostTimerClock {
    fn now(&self) -> Duration {
        match &self.0 {
            TimerSource::Real(c) => c.now(),
            TimerSource::Sim(gpu) => Duration::from_nanos(gpu.now_ns()),
        }
    }

    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
}

/// The CPU clock `id` (`clock_gettime`), zero if the host does not have it.
fn clock_gettime(id: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` for the duration of the call.
    let r = unsafe { libc::clock_gettime(id, &mut ts) };
    if r != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// DMA memory from the simulator's physical memory.
///
/// The simulated CPU and GPU share one coherent view of memory, so cache maintenance changes
/// no byte; each request is recorded instead ([`SimDma::syncs`]), the latest [`SYNC_LOG`] of
/// them, so tests can check which ranges the driver asked to write back or drop.
#[derive(Clone, Debug)]
pub struct SimDma {
    mem: Arc<SimMemory>,
    syncs: Arc<Mutex<SyncRing>>,
}

/// How many of the latest cache maintenance requests a [`SimDma`] keeps.
pub const SYNC_LOG: usize = 64;

/// Which way a cache maintenance request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncDir {
    /// [`DmaMemory::sync_for_device`]: CPU cache lines written back.
    ForDevice,
    /// [`DmaMemory::sync_for_cpu`]: CPU cache lines dropped.
    ForCpu,
}

/// One recorded cache maintenance request: direction, device address, length in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncRecord {
    /// Direction.
    pub dir: SyncDir,
    /// Device address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: usize,
}

/// The latest [`SYNC_LOG`] requests, in storage allocated up front, and how many there were.
#[derive(Debug)]
struct SyncRing {
    slots: [SyncRecord; SYNC_LOG],
    total: u64,
}

impl SimDma {
    /// DMA memory over `mem`.
    pub fn new(mem: Arc<SimMemory>) -> Self {
        let empty = SyncRecord {
            dir: SyncDir::ForDevice,
            addr: 0,
            len: 0,
        };
        SimDma {
            mem,
            syncs: Arc::new(Mutex::new(SyncRing {
                slots: [empty; SYNC_LOG],
                total: 0,
            })),
        }
    }

    /// The simulator's memory.
    pub fn memory(&self) -> &Arc<SimMemory> {
        &self.mem
    }

    fn record(&self, dir: SyncDir, addr: u64, len: usize) {
        let mut r = plock(&self.syncs);
        let i = (r.total % SYNC_LOG as u64) as usize;
        r.slots[i] = SyncRecord { dir, addr, len };
        r.total = r.total.wrapping_add(1);
    }

    /// How many cache maintenance requests were made so far.
    pub fn sync_count(&self) -> u64 {
        plock(&self.syncs).total
    }

    /// The requests made since the count was `since` ([`sync_count`](Self::sync_count)),
    /// oldest first; at most the latest [`SYNC_LOG`].
    pub fn syncs(&self, since: u64) -> Vec<SyncRecord> {
        let r = plock(&self.syncs);
        let first = since.max(r.total.saturating_sub(SYNC_LOG as u64));
        (first..r.total)
            .map(|n| r.slots[(n % SYNC_LOG as u64) as usize])
            .collect()
    }
}

fn sim_err(e: sim::SimError) -> Error {
    Error::from_errno(e.to_errno())
}

// SAFETY: `SimMemory` allocations are zeroed, page aligned, disjoint and stay at a fixed host
// address until freed; `host_ptr_u64` returns a pointer into the live allocation holding the
// address (its storage is atomic words), and fails for anything else. Aligned blocks are carved
// from a larger allocation that is only freed as a whole.
unsafe impl DmaMemory for SimDma {
    fn alloc(&self, pages: usize, align: u64) -> Result<DmaRegion> {
        if pages == 0 || !align.is_power_of_two() {
            return Err(Error::Invalid);
        }
        let align = align.max(PAGE_SIZE);
        let extra = usize::try_from(align / PAGE_SIZE - 1).map_err(|_| Error::Invalid)?;
        let total = pages.checked_add(extra).ok_or(Error::NoMemory)?;
        let base = self.mem.alloc(total).map_err(sim_err)?;
        let addr = base.0.next_multiple_of(align);
        Ok(DmaRegion {
            addr,
            pages,
            cookie: base.0,
        })
    }

    unsafe fn free(&self, region: DmaRegion) {
        let _ = self.mem.free(PhysAddr(region.cookie));
    }

    fn alloc_page(&self) -> Result<u64> {
        self.mem.alloc_page().map(|p| p.0).map_err(sim_err)
    }

    unsafe fn free_page(&self, addr: u64) {
        let _ = self.mem.free(PhysAddr(addr));
    }

    fn cpu_u64(&self, addr: u64) -> Option<NonNull<AtomicU64>> {
        self.mem.host_ptr_u64(PhysAddr(addr)).ok()
    }

    fn sync_for_device(&self, addr: u64, len: usize) {
        self.record(SyncDir::ForDevice, addr, len);
    }

    fn sync_for_cpu(&self, addr: u64, len: usize) {
        self.record(SyncDir::ForCpu, addr, len);
    }
}

impl jobqueue::Clock for SimClock {
    fn now(&self) -> jobqueue::Instant {
        jobqueue::Instant::from_nanos(self.gpu.now_ns())
    }
}

fn plock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Default)]
struct EventState {
    /// The executor was woken.
    pending: bool,
    /// Earliest timer, in simulated nanoseconds.
    timer: Option<u64>,
    events: Option<Arc<dyn EventSink>>,
    stop: bool,
    /// The system sleeps ([`Backend::system_sleep`]): timers do not fire, time does not move
    /// through them.
    asleep: bool,
}

/// What the event thread and the executor share.
#[derive(Default)]
struct EventShared {
    state: Mutex<EventState>,
    cv: Condvar,
    /// The event thread is about to wait or waits: a change to the simulated GPU from another
    /// thread (a register write, a poll loop's sleep) must wake it ([`kick`](Self::kick)).
    sleeping: AtomicBool,
    /// While it waits: the simulated time of the next event it waits for (`u64::MAX` for
    /// none). Only an event before it, or a raised interrupt line, needs a kick.
    waits_for: AtomicU64,
    /// On real time: the clock and the simulated and real nanoseconds the pacing measures
    /// from (set by the event thread when it starts).
    pace: Mutex<Option<(HostTimerClock, u64, u64)>>,
}

impl fmt::Debug for EventShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventShared").finish_non_exhaustive()
    }
}

impl EventShared {
    /// On real time, moves simulated time up to the real time passed since the pacing's
    /// anchor (no further: never ahead of it), running what falls due on the way, and wakes
    /// the event thread if that raised an interrupt line or scheduled something.
    fn catch_up(&self, gpu: &SharedGpu) {
        let Some((timer, sim0, real0)) = plock(&self.pace).clone() else {
            return;
        };
        let limit = sim0.saturating_add(timer.now_ns().saturating_sub(real0));
        let moved = gpu.with(|g| {
            let behind = limit.saturating_sub(g.now_ns());
            if behind > 0 {
                g.advance(behind);
            }
            behind > 0
        });
        if moved {
            self.kick(gpu);
        }
    }

    /// Wakes the event thread if it waits: the simulated GPU changed under it.
    ///
    /// The thread sets `sleeping` under the state lock and then looks at the GPU once more
    /// before it waits; a change made before that look is seen by it, one made after it
    /// finds `sleeping` set and takes the lock, which the thread holds until it waits.
    fn kick(&self, gpu: &SharedGpu) {
        if self.sleeping.load(Ordering::SeqCst) {
            let waits_for = self.waits_for.load(Ordering::SeqCst);
            let (lines, next) = gpu.with(|g| (g.asserted_lines(), g.next_event_ns()));
            if lines.is_empty() && next.is_none_or(|n| n >= waits_for) {
                return;
            }
            drop(plock(&self.state));
            self.cv.notify_all();
        }
    }
}

impl Wake for EventShared {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        plock(&self.state).pending = true;
        self.cv.notify_all();
    }
}

/// The host's workqueue: waking it runs the driver's work item on the backend's event thread;
/// timers are instants of the backend's [`HostTimerClock`].
#[derive(Clone)]
pub struct HostExec {
    shared: Arc<EventShared>,
    waker: Waker,
}

impl fmt::Debug for HostExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostExec").finish_non_exhaustive()
    }
}

impl HostExec {
    fn new() -> Self {
        let shared = Arc::new(EventShared::default());
        let waker = Waker::from(shared.clone());
        HostExec { shared, waker }
    }
}

impl Executor for HostExec {
    fn waker(&self) -> &Waker {
        &self.waker
    }

    fn wake_at(&self, deadline: jobqueue::Instant) {
        let mut s = plock(&self.shared.state);
        let t = deadline.as_nanos();
        s.timer = Some(s.timer.map_or(t, |old| old.min(t)));
        drop(s);
        self.shared.cv.notify_all();
    }
}

/// How long a thread runs between two yields of [`Backend::cond_resched`] (the order of a
/// scheduler's time slice).
const RESCHED_SLICE: Duration = Duration::from_millis(2);

/// How long the idle event thread sleeps before looking again.
const IDLE_WAIT: Duration = Duration::from_millis(20);

/// How far ahead of real time the event thread may run the simulation rather than sleep: a
/// thread's sleep lasts at least the host's timer slack (50 us on Linux) and costs two
/// context switches, far more than the gaps between a command-stream engine's steps (100 ns
/// of simulated time), so events that close are run at once. Simulated time is never more than
/// this ahead of real time by the event thread's doing.
const PACE_LEAD: Duration = Duration::from_micros(500);

/// The event thread, the host's executor of the simulated GPU: interrupts first, then work
/// (after a wake-up or when a timer of the executor is due on `timer`, the driver's
/// deadlines' clock), then simulated time, which [`Gpu::step`] moves one event (or up to a
/// limit) at a time. A kernel work item runs the same turn.
///
/// On real time ([`HostTime::Real`]) the steps are paced: the thread lets simulated time move
/// by no more real time than has passed (plus [`PACE_LEAD`]), and waits for real time to reach
/// the next simulated event or timer. Time another thread moves it by (a poll loop's sleeps, a
/// test's `advance`) is taken as it is: the pacing goes on from there. On simulated time it jumps to them.
fn event_loop(gpu: SharedGpu, shared: Arc<EventShared>, timer: HostTimerClock) {
    let paced = timer.is_real();
    // Simulated and real time at the point the pacing measures from: simulated time may
    // reach `anchor.0` plus the real time passed since `anchor.1` (and the lead).
    let mut anchor = (gpu.now_ns(), timer.now_ns());
    // Simulated time where this thread's own last step left it: a later time was set by
    // another thread.
    let mut own = anchor.0;
    *plock(&shared.pace) = paced.then(|| (timer.clone(), anchor.0, anchor.1));
    loop {
        let sink = {
            let s = plock(&shared.state);
            if s.stop {
                return;
            }
            match &s.events {
                Some(e) => e.clone(),
                None => return,
            }
        };
        // The driver is held (strongly) for one turn of interrupt or work, not across a step.
        let mut again = false;
        let alive = sink.with(&mut |events| {
            if !gpu.asserted_lines().is_empty() {
                events.irq();
                again = true;
                return;
            }
            let now = timer.now_ns();
            let run = {
                let mut s = plock(&shared.state);
                if !s.asleep && s.timer.is_some_and(|t| t <= now) {
                    s.timer = None;
                    s.pending = true;
                }
                core::mem::take(&mut s.pending)
            };
            if run {
                events.work();
                again = true;
            }
        });
        if !alive {
            return;
        }
        if again {
            continue;
        }
        drop(sink);
        let deadline = {
            let s = plock(&shared.state);
            s.timer.filter(|_| !s.asleep)
        };
        if !paced {
            // Simulated time: the timer is in simulated nanoseconds, the step jumps to it.
            match gpu.step(deadline) {
                // A line came up (a register write from another thread): served next turn.
                sim::Progress::Irq(_) | sim::Progress::Advanced { .. } => {}
                sim::Progress::Idle => idle_wait(&gpu, &shared, None, IDLE_WAIT),
            }
            continue;
        }
        // Real time: step up to the simulated time that corresponds to now.
        let now = timer.now_ns();
        let next = {
            let mut g = gpu.lock();
            let limit = anchor.0.saturating_add(now.saturating_sub(anchor.1));
            if g.now_ns() != own && g.now_ns() > limit {
                // Moved past the limit by another thread (a poll loop's sleeps): pace from
                // there. Never for this thread's own steps, whose lead would otherwise add up,
                // step after step.
                anchor = (g.now_ns(), now);
                *plock(&shared.pace) = Some((timer.clone(), anchor.0, anchor.1));
            }
            let limit = anchor.0.saturating_add(now.saturating_sub(anchor.1));
            let lead = limit.saturating_add(PACE_LEAD.as_nanos() as u64);
            if !g.asserted_lines().is_empty() {
                continue;
            }
            let next = g.next_event_ns();
            if next.is_some_and(|e| e <= lead) {
                // An event is due (or close enough): run it, and look again.
                g.step(None);
                own = g.now_ns();
                continue;
            }
            // Nothing happens before real time reaches the next event: simulated time is
            // brought up to real time, and the thread waits. (Looking again at once instead
            // would find real time a little further, step again, and so on: a thread spinning
            // on a whole core while the GPU is idle.)
            if g.now_ns() < limit {
                g.step(Some(limit));
            }
            own = g.now_ns();
            next
        };
        // Caught up with real time: wait for it to reach the next event or timer.
        let until_event = next.map(|e| {
            let at = anchor.1.saturating_add(e.saturating_sub(anchor.0));
            Duration::from_nanos(at.saturating_sub(now)).saturating_sub(PACE_LEAD)
        });
        let until_timer = deadline.map(|t| Duration::from_nanos(t.saturating_sub(now)));
        let wait = [until_event, until_timer]
            .into_iter()
            .flatten()
            .fold(IDLE_WAIT, Duration::min);
        if wait.is_zero() {
            continue;
        }
        idle_wait(&gpu, &shared, Some(next), wait);
    }
}

/// Waits up to `wait` for a wake-up, a timer, a stop or (through
/// [`EventShared::kick`]) a change to the simulated GPU. `seen` is the next simulated event
/// the caller computed the wait from (`None`: the caller does not pace, and only a raised
/// interrupt line counts as a change).
fn idle_wait(gpu: &SharedGpu, shared: &EventShared, seen: Option<Option<u64>>, wait: Duration) {
    let s = plock(&shared.state);
    let waits_for = seen.flatten().unwrap_or(u64::MAX);
    shared.waits_for.store(waits_for, Ordering::SeqCst);
    shared.sleeping.store(true, Ordering::SeqCst);
    // A change made before `sleeping` was set is seen here; one made after it kicks.
    let changed = {
        let g = gpu.lock();
        !g.asserted_lines().is_empty() || seen.is_some_and(|n| n != g.next_event_ns())
    };
    // A wake-up or a timer that came in since is served at once.
    let timer_set = s.timer.is_some() && !s.asleep && seen.is_none();
    if !changed && !s.pending && !s.stop && !timer_set {
        let _ = shared.cv.wait_timeout(s, wait);
    }
    shared.sleeping.store(false, Ordering::SeqCst);
}

/// The threads of the bind queues ([`Backend::new_bind_executor`]), and what a new one
/// starts with.
#[derive(Default)]
struct BindThreads {
    threads: Vec<(Arc<EventShared>, EventThread)>,
    /// The driver's events, while started.
    events: Option<Arc<dyn EventSink>>,
    asleep: bool,
}

/// A VM's bind queue's executor: waking it runs the driver's bind work for that VM on a
/// thread of its own ([`Backend::new_bind_executor`]), which ends once the executor's last
/// clone is dropped (or the backend's events stop).
#[derive(Clone)]
pub struct HostBindExec {
    exec: HostExec,
    /// Stops the thread when the last clone goes.
    _owner: Arc<BindOwner>,
}

impl fmt::Debug for HostBindExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBindExec").finish_non_exhaustive()
    }
}

impl Executor for HostBindExec {
    fn waker(&self) -> &Waker {
        self.exec.waker()
    }

    fn wake_at(&self, deadline: jobqueue::Instant) {
        self.exec.wake_at(deadline);
    }
}

/// Stops a bind thread when the last clone of its executor goes.
struct BindOwner(Arc<EventShared>);

impl Drop for BindOwner {
    fn drop(&mut self) {
        plock(&self.0.state).stop = true;
        self.0.cv.notify_all();
    }
}

/// A bind thread: runs the driver's bind work for VM `vm` ([`Events::bind_work`]) whenever its
/// executor is woken or one of its timers (instants of `timer`) is due, apart from the event
/// thread and other VMs' bind threads, as a kernel driver's bind jobs run on a workqueue of
/// their own. It never moves simulated time.
fn bind_loop(shared: Arc<EventShared>, timer: HostTimerClock, vm: u64) {
    loop {
        let sink = {
            let mut s = plock(&shared.state);
            if s.stop {
                return;
            }
            let Some(sink) = s.events.clone() else {
                return;
            };
            let now = timer.now_ns();
            if !s.asleep && s.timer.is_some_and(|t| t <= now) {
                s.timer = None;
                s.pending = true;
            }
            if !core::mem::take(&mut s.pending) {
                // Nothing owed: wait for a wake-up, a stop or the timer (looking again at
                // least every `IDLE_WAIT`: on simulated time the timer's clock moves without
                // telling this thread).
                let wait = s.timer.filter(|_| !s.asleep).map_or(IDLE_WAIT, |t| {
                    Duration::from_nanos(t.saturating_sub(now)).min(IDLE_WAIT)
                });
                let _ = shared.cv.wait_timeout(s, wait);
                continue;
            }
            sink
        };
        // The driver is held (strongly) for one call.
        if !sink.with(&mut |events| events.bind_work(vm)) {
            return;
        }
    }
}

struct EventThread {
    handle: JoinHandle<()>,
    id: ThreadId,
}

/// The simulated G610's register window.
pub type SimIo = ModelRegion<SimModel, { sim::regs::MMIO_SIZE }>;

/// How many of the latest log lines a [`HostBackend`] keeps.
pub const LOG_LINES: usize = 256;

/// Room for one kept log line, in bytes. A line longer than `LOG_LINE_BYTES - CUT_MARK.len()`
/// is cut at a character boundary and ends in [`CUT_MARK`].
pub const LOG_LINE_BYTES: usize = 240;

/// What a cut log line ends in.
pub const CUT_MARK: &str = " [...]";

/// One kept log line.
struct Line {
    len: usize,
    bytes: [u8; LOG_LINE_BYTES],
}

impl Line {
    fn as_str(&self) -> &str {
        // Only whole characters are copied in (see `LineWriter`).
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

/// Formats into a [`Line`], cutting what does not fit.
struct LineWriter<'a> {
    line: &'a mut Line,
    cut: bool,
}

impl fmt::Write for LineWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.cut {
            return Ok(());
        }
        let room = LOG_LINE_BYTES - CUT_MARK.len() - self.line.len;
        let mut take = s.len().min(room);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        let at = self.line.len;
        self.line.bytes[at..at + take].copy_from_slice(&s.as_bytes()[..take]);
        self.line.len += take;
        if take < s.len() {
            let at = self.line.len;
            self.line.bytes[at..at + CUT_MARK.len()].copy_from_slice(CUT_MARK.as_bytes());
            self.line.len += CUT_MARK.len();
            self.cut = true;
        }
        Ok(())
    }
}

/// The latest [`LOG_LINES`] lines, in storage allocated up front.
struct LogRing {
    lines: Vec<Line>,
    /// Where the next line goes.
    next: usize,
    /// Lines kept (up to `LOG_LINES`).
    kept: usize,
}

impl LogRing {
    fn new() -> Self {
        let mut lines = Vec::with_capacity(LOG_LINES);
        lines.resize_with(LOG_LINES, || Line {
            len: 0,
            bytes: [0; LOG_LINE_BYTES],
        });
        LogRing {
            lines,
            next: 0,
            kept: 0,
        }
    }

    /// Formats `args` over the oldest line and returns it.
    fn push(&mut self, args: fmt::Arguments<'_>) -> &Line {
        let i = self.next;
        self.next = (i + 1) % LOG_LINES;
        self.kept = (self.kept + 1).min(LOG_LINES);
        let line = &mut self.lines[i];
        line.len = 0;
        // `LineWriter` never fails; a `Display` impl that does leaves what it wrote so far.
        let _ = fmt::write(&mut LineWriter { line, cut: false }, args);
        &self.lines[i]
    }

    /// The kept lines, oldest first.
    fn iter(&self) -> impl Iterator<Item = &str> {
        let first = (self.next + LOG_LINES - self.kept) % LOG_LINES;
        (0..self.kept).map(move |k| self.lines[(first + k) % LOG_LINES].as_str())
    }
}

/// The backend over the simulated Mali-G610.
pub struct HostBackend {
    gpu: SharedGpu,
    io: SimIo,
    clock: SimClock,
    timer: HostTimerClock,
    sys_clock: StdPollClock,
    dma: SimDma,
    exec: HostExec,
    thread: Mutex<Option<EventThread>>,
    /// The bind queues' threads, and what a new one starts with.
    binds: Mutex<BindThreads>,
    log: Mutex<LogRing>,
    echo: bool,
    /// The simulated GPU's operating points.
    opps: [u64; sim::OPP_COUNT],
    /// The firmware file the driver gets, and where it came from.
    firmware: HostFirmware,
    /// [`Backend::gpu_reqs`].
    gpu_reqs: crate::backend::LockOf<HostBackend, u32>,
}

impl fmt::Debug for HostBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostBackend").finish_non_exhaustive()
    }
}

impl Drop for HostBackend {
    fn drop(&mut self) {
        self.stop_events();
    }
}

impl HostBackend {
    /// A backend over a new simulated GPU with configuration `cfg`, with the firmware image
    /// [`HostFirmware::find`] chooses for it: the driver loads it and the MCU is given it
    /// (`cfg.firmware`, unless `cfg` already names one).
    pub fn new(mut cfg: Config) -> Self {
        let fw = HostFirmware::find(cfg.identity.gpu_id);
        if cfg.firmware.is_none() {
            cfg.firmware = sim::firmware::Flashed::new(&fw.bytes).ok();
        }
        Self::with_gpu_and_firmware(SharedGpu::new(Gpu::new(cfg)), fw)
    }

    /// A backend over a new simulated GPU with configuration `cfg` whose driver is given the
    /// image `driver` and whose MCU the image `mcu` (`None`: an MCU that checks only the
    /// shared region). Tests give the two different images to see the MCU refuse.
    pub fn with_images(mut cfg: Config, driver: Vec<u8>, mcu: Option<&[u8]>) -> Self {
        cfg.firmware = mcu.and_then(|m| sim::firmware::Flashed::new(m).ok());
        let fw = HostFirmware {
            path: String::from(crate::csf::firmware_path(cfg.identity.gpu_id).as_str()),
            bytes: driver.into(),
            origin: FirmwareOrigin::Given,
        };
        Self::with_gpu_and_firmware(SharedGpu::new(Gpu::new(cfg)), fw)
    }

    /// A backend over a new simulated GPU with configuration `cfg`, driver and MCU both given
    /// the image `image`.
    pub fn with_firmware(cfg: Config, image: Vec<u8>) -> Self {
        let mcu = image.clone();
        Self::with_images(cfg, image, Some(&mcu))
    }

    /// A backend over a new, fault-free Mali-G610.
    pub fn g610() -> Self {
        Self::new(Config::g610())
    }

    /// A backend over an existing simulated GPU (whose MCU has the image its configuration
    /// names, if any), on the default time ([`HostTime::Real`] but under Miri), the driver
    /// given the image
    /// [`HostFirmware::find`] chooses.
    pub fn with_gpu(gpu: SharedGpu) -> Self {
        let fw = HostFirmware::find(gpu.with(|g| g.config().identity.gpu_id));
        Self::with_gpu_and_firmware(gpu, fw)
    }

    fn with_gpu_and_firmware(gpu: SharedGpu, firmware: HostFirmware) -> Self {
        let opps = gpu.with(|g| g.config().timings.opp_table);
        let exec = HostExec::new();
        let kick = Some(exec.shared.clone());
        let mut model = SimModel::new(gpu.clone());
        model.kick = kick.clone();
        let b = HostBackend {
            opps,
            io: ModelRegion::new(model),
            clock: SimClock {
                gpu: gpu.clone(),
                kick,
            },
            timer: match HostTime::default() {
                HostTime::Real => HostTimerClock::real(),
                HostTime::Simulated => HostTimerClock(TimerSource::Sim(gpu.clone())),
            },
            sys_clock: StdPollClock::new(),
            dma: SimDma::new(gpu.memory().clone()),
            exec,
            thread: Mutex::new(None),
            binds: Mutex::new(BindThreads::default()),
            gpu,
            log: Mutex::new(LogRing::new()),
            echo: std::env::var_os("TYR_LOG").is_some(),
            firmware,
            // The host's locks are made infallibly (`Default`); the class is a name only.
            gpu_reqs: Default::default(),
        };
        // The backend's choice, not the driver's log: on the echo channel only.
        if b.echo {
            std::eprintln!(
                "tyr-host: firmware {} from {}",
                b.firmware.path,
                b.firmware.origin
            );
        }
        b
    }

    /// The firmware image the driver gets, and where it came from.
    pub fn firmware(&self) -> &HostFirmware {
        &self.firmware
    }

    /// The backend with its deadlines on `time` (before the driver is probed on it: the
    /// driver's timers are instants of the clock it finds).
    ///
    /// ```
    /// use tyr::backend::Backend;
    /// use tyr::host::{HostBackend, HostTime};
    ///
    /// let b = HostBackend::g610().with_time(HostTime::Simulated);
    /// assert!(!b.timer_clock().is_real());
    /// ```
    pub fn with_time(mut self, time: HostTime) -> Self {
        self.stop_events();
        self.timer = match time {
            HostTime::Real => HostTimerClock::real(),
            HostTime::Simulated => HostTimerClock(TimerSource::Sim(self.gpu.clone())),
        };
        self
    }

    /// The simulated GPU (for tests: walking its MMU, injecting faults).
    pub fn gpu(&self) -> &SharedGpu {
        &self.gpu
    }

    /// Takes the driver's MMIO away, as a bus does when the device is unbound (in Linux the
    /// driver's `Devres<IoMem>` is revoked at unbind): from now on the driver's register
    /// accesses reach nothing (reads give 0) and are counted
    /// ([`late_io_accesses`](Self::late_io_accesses)). A test calls it after the unplug, to
    /// check that nothing touches the hardware once the device is removed.
    pub fn revoke_io(&self) {
        self.io.model().revoked.on.store(true, Ordering::Release);
    }

    /// How many register accesses the driver made after [`revoke_io`](Self::revoke_io)
    /// (also [`SimModel::late_accesses`] of the backend's `io().model()`).
    pub fn late_io_accesses(&self) -> u64 {
        self.io.model().late_accesses()
    }

    /// The lines logged so far.
    pub fn log_lines(&self) -> Vec<String> {
        let log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        log.iter().map(String::from).collect()
    }
}

impl Backend for HostBackend {
    type Io = SimIo;
    type Clock = SimClock;
    type TimerClock = HostTimerClock;
    type SysClock = StdPollClock;
    type Exec = HostExec;
    type BindExec = HostBindExec;
    type Dma = SimDma;
    type Fence = jobqueue::host::HostFence;
    type JobAlloc = jobqueue::host::HostAlloc;
    type DrmAlloc = drm_ctx::mem::Global;
    type Alloc = drm_ctx::mem::Global;
    type Locks = crate::backend::StdLocks;
    type Firmware = Arc<[u8]>;

    fn io(&self) -> &SimIo {
        &self.io
    }

    fn clock(&self) -> &SimClock {
        &self.clock
    }

    fn gpu_reqs(&self) -> &crate::backend::LockOf<Self, u32> {
        &self.gpu_reqs
    }

    fn timer_clock(&self) -> &HostTimerClock {
        &self.timer
    }

    fn cpu_time(&self, clock: CpuClock) -> Duration {
        clock_gettime(match clock {
            CpuClock::Monotonic => libc::CLOCK_MONOTONIC,
            CpuClock::MonotonicRaw => libc::CLOCK_MONOTONIC_RAW,
        })
    }

    fn sys_clock(&self) -> &StdPollClock {
        &self.sys_clock
    }

    fn dma(&self) -> &SimDma {
        &self.dma
    }

    fn irq_pending(&self, line: IrqLine) -> bool {
        self.gpu.irq_pending(match line {
            IrqLine::Gpu => sim::IrqLine::Gpu,
            IrqLine::Job => sim::IrqLine::Job,
            IrqLine::Mmu => sim::IrqLine::Mmu,
        })
    }

    fn cond_resched(&self) {
        // The kernel's `cond_resched` gives the CPU away only when the scheduler asks for it
        // (the thread has had its slice); yielding at every call would hand it away after
        // each step of every small bind, which on a loaded machine costs a whole slice of
        // the other threads each time (the demo's binds fell to a few hundred per second).
        // So: yield once the thread has run `RESCHED_SLICE` since it last did. The host's
        // locks hand over to waiters by themselves (`StdLocks`).
        std::thread_local! {
            static LAST: core::cell::Cell<Option<std::time::Instant>> =
                const { core::cell::Cell::new(None) };
        }
        LAST.with(|last| {
            let now = std::time::Instant::now();
            match last.get() {
                Some(t) if now.duration_since(t) < RESCHED_SLICE => {}
                Some(_) => {
                    std::thread::yield_now();
                    last.set(Some(std::time::Instant::now()));
                }
                None => last.set(Some(now)),
            }
        });
    }

    fn executor(&self) -> &HostExec {
        &self.exec
    }

    fn new_bind_executor(&self, vm: u64) -> Result<HostBindExec> {
        let exec = HostExec::new();
        let mut binds = plock(&self.binds);
        // Threads whose executor went (their VM's queue with it) have ended.
        binds.threads.retain(|(_, t)| !t.handle.is_finished());
        {
            let mut s = plock(&exec.shared.state);
            s.events = binds.events.clone();
            s.stop = binds.events.is_none();
            s.asleep = binds.asleep;
        }
        let shared = exec.shared.clone();
        let timer = self.timer.clone();
        let handle = thread::Builder::new()
            .name("tyr-binds".into())
            .spawn(move || bind_loop(shared, timer, vm))
            .map_err(|_| Error::NoMemory)?;
        let id = handle.thread().id();
        binds
            .threads
            .push((exec.shared.clone(), EventThread { handle, id }));
        Ok(HostBindExec {
            _owner: Arc::new(BindOwner(exec.shared.clone())),
            exec,
        })
    }

    fn new_job_alloc(&self) -> Result<jobqueue::host::HostAlloc> {
        Ok(jobqueue::host::HostAlloc::new())
    }

    fn new_hw_fence(&self, _alloc: &jobqueue::host::HostAlloc) -> Result<HostFence> {
        Ok(HostFence::new())
    }

    fn syncobj_fence(f: &HostFence) -> Result<FenceRef> {
        Ok(Arc::new(JobSyncFence(f.clone())).into())
    }

    fn dependency(f: &FenceRef) -> Result<HostFence> {
        job_fence(f)
    }

    fn fence_timeline(f: &HostFence) -> Option<(u64, u64)> {
        f.timeline()
    }

    fn start_events<E: Events + 'static>(&self, events: env::Weak<E, Self::Alloc>) -> Result {
        self.stop_events();
        let sink: Arc<dyn EventSink> = Arc::new(WeakEvents(events));
        {
            let mut s = plock(&self.exec.shared.state);
            s.events = Some(sink.clone());
            s.stop = false;
            s.pending = true;
        }
        // Bind queues made from now on serve these events (those of before were stopped).
        plock(&self.binds).events = Some(sink);
        let gpu = self.gpu.clone();
        let shared = self.exec.shared.clone();
        let timer = self.timer.clone();
        let handle = thread::Builder::new()
            .name("tyr-events".into())
            .spawn(move || event_loop(gpu, shared, timer));
        match handle {
            Ok(handle) => {
                let id = handle.thread().id();
                *plock(&self.thread) = Some(EventThread { handle, id });
                Ok(())
            }
            Err(_) => {
                self.log(LogLevel::Err, format_args!("cannot start the event thread"));
                self.stop_events();
                Err(Error::NoMemory)
            }
        }
    }

    fn stop_events(&self) {
        {
            let mut s = plock(&self.exec.shared.state);
            s.stop = true;
            s.events = None;
        }
        self.exec.shared.cv.notify_all();
        let mut threads = {
            let mut binds = plock(&self.binds);
            binds.events = None;
            core::mem::take(&mut binds.threads)
        };
        for (shared, _) in &threads {
            {
                let mut s = plock(&shared.state);
                s.stop = true;
                s.events = None;
            }
            shared.cv.notify_all();
        }
        let event = plock(&self.thread).take();
        // The last reference to the driver may go away on one of the threads itself: it then
        // ends on its own once the current call returns.
        for t in event.into_iter().chain(threads.drain(..).map(|(_, t)| t)) {
            if t.id != thread::current().id() {
                let _ = t.handle.join();
            }
        }
    }

    fn request_firmware(&self, path: &str) -> Result<Arc<[u8]>> {
        if path == self.firmware.path {
            Ok(self.firmware.bytes.clone())
        } else {
            Err(Error::NotFound)
        }
    }

    fn log(&self, level: LogLevel, args: fmt::Arguments<'_>) {
        let mut log = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let line = log.push(args).as_str();
        if self.echo {
            let level = if level == LogLevel::Err {
                "error: "
            } else {
                ""
            };
            std::eprintln!("tyr: {level}{line}");
        }
    }

    fn timestamp_frequency(&self) -> u64 {
        self.gpu.with(|g| g.config().timings.timestamp_hz)
    }

    fn gpu_clock_rates(&self) -> &[u64] {
        &self.opps
    }

    fn system_sleep(&self, asleep: bool) {
        if let TimerSource::Real(c) = &self.timer.0 {
            c.set_asleep(asleep);
        }
        plock(&self.exec.shared.state).asleep = asleep;
        self.exec.shared.cv.notify_all();
        let mut binds = plock(&self.binds);
        binds.asleep = asleep;
        for (shared, _) in &binds.threads {
            plock(&shared.state).asleep = asleep;
            shared.cv.notify_all();
        }
    }

    fn set_gpu_clock_rate(&self, hz: u64) -> Result<()> {
        if self.gpu.with(|g| g.set_gpu_clock_hz(hz)) {
            Ok(())
        } else {
            Err(Error::Invalid)
        }
    }
}

// ---------------------------------------------------------------- firmware

/// Where the host backend's firmware image came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FirmwareOrigin {
    /// The directory `TYR_FIRMWARE_DIR` names.
    EnvDir(std::path::PathBuf),
    /// The project's firmware cache, `$XDG_CACHE_HOME/gpukit/firmware` (or
    /// `~/.cache/gpukit/firmware`), where `cargo xtask` puts Arm's image.
    Cache(std::path::PathBuf),
    /// The simulated MCU's own image ([`mali_sim::firmware::IMAGE`]).
    Simulator,
    /// An image the backend was made with ([`HostBackend::with_firmware`]).
    Given,
}

impl fmt::Display for FirmwareOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FirmwareOrigin::EnvDir(d) => write!(f, "TYR_FIRMWARE_DIR ({})", d.display()),
            FirmwareOrigin::Cache(d) => write!(f, "the firmware cache ({})", d.display()),
            FirmwareOrigin::Simulator => write!(f, "the gpukit simulated MCU image (built in)"),
            FirmwareOrigin::Given => write!(f, "the image the backend was made with"),
        }
    }
}

/// The firmware file the host backend hands the driver.
#[derive(Clone, Debug)]
pub struct HostFirmware {
    /// Its path in the firmware directory (what the driver asks for).
    pub path: String,
    /// Its bytes.
    pub bytes: Arc<[u8]>,
    /// Where it came from.
    pub origin: FirmwareOrigin,
}

impl HostFirmware {
    /// The image for the GPU whose `GPU_ID` is `gpu_id`, from the first place that has it:
    /// the directory `TYR_FIRMWARE_DIR` names, the project's firmware cache
    /// (`$XDG_CACHE_HOME/gpukit/firmware`, or `~/.cache/gpukit/firmware`), else the simulated
    /// MCU's own image, so that everything works offline. (Under Miri, always the last.)
    /// Files are read once per process.
    pub fn find(gpu_id: u32) -> Self {
        let path = String::from(crate::csf::firmware_path(gpu_id).as_str());
        let dirs = firmware_dirs();
        for origin in dirs {
            let dir = match &origin {
                FirmwareOrigin::EnvDir(d) | FirmwareOrigin::Cache(d) => d,
                _ => continue,
            };
            if let Some(bytes) = read_cached(&dir.join(&path)) {
                return HostFirmware {
                    path,
                    bytes,
                    origin,
                };
            }
        }
        HostFirmware {
            path,
            bytes: Arc::from(&mali_sim::firmware::IMAGE[..]),
            origin: FirmwareOrigin::Simulator,
        }
    }
}

/// The firmware directories to look in, in order.
fn firmware_dirs() -> Vec<FirmwareOrigin> {
    let mut dirs = Vec::new();
    if cfg!(miri) {
        return dirs;
    }
    if let Some(d) = std::env::var_os("TYR_FIRMWARE_DIR") {
        dirs.push(FirmwareOrigin::EnvDir(d.into()));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cache")));
    if let Some(c) = cache {
        dirs.push(FirmwareOrigin::Cache(c.join("gpukit/firmware")));
    }
    dirs
}

/// The file at `p`, read once per process.
fn read_cached(p: &std::path::Path) -> Option<Arc<[u8]>> {
    type Cache = Mutex<Vec<(std::path::PathBuf, Option<Arc<[u8]>>)>>;
    static FILES: Cache = Mutex::new(Vec::new());
    let mut files = plock(&FILES);
    if let Some((_, f)) = files.iter().find(|(q, _)| q == p) {
        return f.clone();
    }
    let f = std::fs::read(p).ok().map(Arc::from);
    files.push((p.to_path_buf(), f.clone()));
    f
}

// ---------------------------------------------------------------- job fences in syncobjs

/// A job fence as a syncobj holds it.
#[derive(Clone, Debug)]
pub struct JobSyncFence(pub HostFence);

impl SyncFence for JobSyncFence {
    fn status(&self) -> Option<core::result::Result<(), i32>> {
        self.0.status().map(|r| r.map_err(|e| e.to_errno()))
    }

    fn wake_on_signal(&self, waker: &Waker) -> Registration {
        let cb = HostFence::new_callback();
        match self.0.add_callback(&cb, waker) {
            jobqueue::AddCallback::Queued => {
                let fence = self.0.clone();
                Registration::new(move || {
                    fence.remove_callback(&cb);
                })
            }
            // A fresh node is never busy: the fence has signalled.
            jobqueue::AddCallback::Signalled(_) | jobqueue::AddCallback::Busy => {
                waker.wake_by_ref();
                Registration::done()
            }
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The job fence behind a syncobj's fence ([`Error::Invalid`] for a foreign one).
pub fn job_fence(f: &FenceRef) -> Result<HostFence> {
    let any = f.as_any();
    if let Some(j) = any.downcast_ref::<JobSyncFence>() {
        return Ok(j.0.clone());
    }
    if any.downcast_ref::<SignalledFence>().is_some() {
        return Ok(HostFence::signalled(Ok(())));
    }
    Err(Error::Invalid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobqueue::SignalFence as _;
    use register::io::Io;

    #[test]
    fn the_log_keeps_the_latest_lines_and_marks_cut_ones() {
        let mut log = LogRing::new();
        assert_eq!(log.iter().count(), 0);
        for i in 0..LOG_LINES + 3 {
            log.push(format_args!("line {i}"));
        }
        let kept: Vec<&str> = log.iter().collect();
        assert_eq!(kept.len(), LOG_LINES);
        assert_eq!(kept[0], "line 3");
        assert_eq!(kept[LOG_LINES - 1], std::format!("line {}", LOG_LINES + 2));
        // What fits is kept whole, even when written in pieces.
        let room = LOG_LINE_BYTES - CUT_MARK.len();
        let fits = "a".repeat(room - 1);
        assert_eq!(log.push(format_args!("{fits}{}", "b")).as_str().len(), room);
        // A longer line is cut before a character that does not fit, and says so.
        let long = std::format!("{}é and more", "x".repeat(room - 1));
        let cut = log.push(format_args!("{long}")).as_str();
        assert_eq!(cut, std::format!("{}{CUT_MARK}", "x".repeat(room - 1)));
        assert!(cut.len() <= LOG_LINE_BYTES);
    }

    #[test]
    fn wide_and_narrow_accesses_are_split() {
        let b = HostBackend::g610();
        b.io().write64(0x1234_5678_9abc_d000, 0x2400);
        assert_eq!(b.gpu().read32(0x2400), 0x9abc_d000);
        assert_eq!(b.gpu().read32(0x2404), 0x1234_5678);
        assert_eq!(b.io().read64(0x2400), 0x1234_5678_9abc_d000);
        assert_eq!(b.io().read8(0x3), 0xa8);
        assert_eq!(b.io().read16(0x2), 0xa867);
        b.gpu().with(|g| assert!(g.bus_errors().is_empty()));
    }

    #[test]
    fn aligned_dma_and_cpu_view() {
        let b = HostBackend::g610();
        let r = b.dma().alloc(3, 1 << 21).unwrap();
        assert_eq!(r.addr % (1 << 21), 0);
        assert!(b.dma().cpu_u64(r.addr + 2 * PAGE_SIZE + 8).is_some());
        // SAFETY: Not used afterwards.
        unsafe { b.dma().free(r) };
        assert!(b.dma().cpu_u64(r.addr).is_none());
        assert_eq!(b.dma().alloc(0, 4096), Err(Error::Invalid));
    }

    #[test]
    fn a_syncobj_waiter_that_gives_up_leaves_nothing_on_the_job_fence() {
        let hw = HostFence::new();
        let fence = JobSyncFence(hw.clone());
        // A waiter polling a long job: each poll queues a callback and takes it back.
        for _ in 0..10 {
            let r = fence.wake_on_signal(Waker::noop());
            assert_eq!(hw.queued_callbacks(), 1);
            drop(r);
            assert_eq!(hw.queued_callbacks(), 0);
        }
        // Once the job is done the waiter is woken at once and nothing is queued.
        let kept = fence.wake_on_signal(Waker::noop());
        assert!(hw.signal(Ok(())));
        assert_eq!(hw.queued_callbacks(), 0);
        drop(kept);
        let late = fence.wake_on_signal(Waker::noop());
        assert_eq!(hw.queued_callbacks(), 0);
        drop(late);
        assert_eq!(fence.status(), Some(Ok(())));
    }
}
