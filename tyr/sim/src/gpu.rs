// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The simulated GPU: register file, time, interrupts, reset, power and MMU.

mod engine;
mod fwcheck;

use core::mem::MaybeUninit;

use pin_init::{init, init_array_from_fn};

use super::config::{Config, FaultInjection};
use super::list::FixedList;
use super::mem::{PhysAddr, PhysMemory};
use super::mmu::{AddressSpace, LockRegion, Pending, TlbStats};
use super::power::{Domain, PowerDomain};
use super::regs::{self, as_cmd, gpu_cmd, gpu_irq, gpu_status, mcu};
use super::walk::{AccessType, Fault, FaultKind, Translation, WalkConfig};
use super::SimError;

/// One of the GPU's three interrupt lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IrqLine {
    /// The GPU_CONTROL interrupt (`GPU_IRQ_*`).
    Gpu,
    /// The JOB_CONTROL interrupt (`JOB_IRQ_*`).
    Job,
    /// The MMU interrupt (`MMU_IRQ_*`).
    Mmu,
}

impl IrqLine {
    /// Every line, in the order an executor serves them.
    pub const ALL: [IrqLine; 3] = [IrqLine::Gpu, IrqLine::Job, IrqLine::Mmu];

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of interrupt lines.
///
/// # Examples
///
/// ```
/// use mali_sim::{IrqLine, IrqLines};
///
/// let l = IrqLines::NONE.with(IrqLine::Mmu);
/// assert!(l.contains(IrqLine::Mmu) && !l.contains(IrqLine::Gpu));
/// assert_eq!(l.iter().collect::<Vec<_>>(), [IrqLine::Mmu]);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IrqLines(u8);

impl IrqLines {
    /// No line.
    pub const NONE: IrqLines = IrqLines(0);

    /// This set and `line`.
    pub const fn with(self, line: IrqLine) -> IrqLines {
        IrqLines(self.0 | line.bit())
    }

    /// Whether `line` is in the set.
    pub const fn contains(self, line: IrqLine) -> bool {
        self.0 & line.bit() != 0
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The lines in the set, in [`IrqLine::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = IrqLine> {
        IrqLine::ALL.into_iter().filter(move |l| self.contains(*l))
    }
}

/// What one [`Gpu::step`] did: what the executor driving the GPU does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Progress {
    /// These interrupt lines are asserted, and time did not move: the executor runs the
    /// driver's interrupt handler (which clears or masks them) before stepping again.
    Irq(IrqLines),
    /// Simulated time moved to `now_ns` (the next event, or the caller's limit if that came
    /// first) and everything due by then completed.
    Advanced {
        /// The simulated time now.
        now_ns: u64,
    },
    /// No line is asserted and nothing is scheduled (nor was a limit given): the GPU waits
    /// for the driver, and stepping again changes nothing until the driver writes a register.
    Idle,
}

/// What was wrong with a register access (or a GPU memory access) the bus saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BusErrorKind {
    /// No register at this offset (or outside the MMIO window). Reads return 0.
    UnknownRegister,
    /// The offset is not 4-byte aligned. Reads return 0, writes are dropped.
    Misaligned,
    /// A write to a read-only register; it was ignored.
    ReadOnly,
    /// A value the register does not accept (an unknown command); it was ignored.
    InvalidValue,
    /// A command written while the previous one is still running; it was ignored.
    Busy,
    /// The GPU read or wrote physical memory that does not exist.
    UnbackedMemory {
        /// The physical address.
        pa: PhysAddr,
    },
}

/// A recorded bus error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BusError {
    /// Simulated time of the access.
    pub at_ns: u64,
    /// MMIO offset (0 for memory errors).
    pub offset: usize,
    /// The written value, `None` for a read.
    pub value: Option<u32>,
    /// What was wrong.
    pub kind: BusErrorKind,
}

/// What stopped a GPU memory access made through [`Gpu::gpu_read`]/[`Gpu::gpu_write`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessError {
    /// The MMU faulted (recorded in the address space's fault registers).
    Mmu(Fault),
    /// The translation succeeded but the physical memory does not exist (recorded as a GPU
    /// bus fault in `GPU_FAULTSTATUS`).
    Bus(PhysAddr),
}

/// The data of a GPU access: where a read goes or what a write stores.
enum Data<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

/// `GPU_FAULTSTATUS` exception code of a bus fault.
pub const GPU_BUS_FAULT: u32 = 0x80;
/// `GPU_FAULTSTATUS` exception code, the simulator's own (no Mali GPU reports it): a power
/// request out of order was refused (shader cores or tiler on while the L2 is not ready, the
/// L2 off while they are powered or the MCU runs, the MCU enabled while the L2 is not ready).
pub const GPU_POWER_ORDER_FAULT: u32 = 0x8e;
/// `GPU_FAULTSTATUS` exception code, the simulator's own: a command-stream doorbell rang
/// while the MCU was halted or disabled (work reached a firmware that is not running).
pub const GPU_MCU_OFF_FAULT: u32 = 0x8f;

/// An interrupt block: raw status and mask.
#[derive(Clone, Copy, Debug, Default)]
struct IrqBlock {
    rawstat: u32,
    mask: u32,
    /// Bits the block implements.
    valid: u32,
}

impl IrqBlock {
    fn new(valid: u32) -> Self {
        IrqBlock {
            valid,
            ..IrqBlock::default()
        }
    }

    fn status(&self) -> u32 {
        self.rawstat & self.mask
    }

    fn raise(&mut self, bits: u32) {
        self.rawstat |= bits & self.valid;
    }
}

/// The simulated Mali-G610.
///
/// See the [module documentation](super) for what it models. All methods take `&mut self`
/// (register reads may record bus errors); with `std`, share it between threads with
/// [`SharedGpu`](super::SharedGpu), elsewhere behind the environment's own lock.
///
/// # Examples
///
/// Enabling an address space on hand-written tables and translating through it:
///
/// ```
/// # #[cfg(feature = "std")] {
/// use mali_sim::regs::{as_cmd, as_reg, AS_COMMAND, AS_MEMATTR_LO, AS_TRANSCFG_LO, AS_TRANSTAB_LO};
/// use mali_sim::{AccessType, FaultKind, Gpu, PhysAddr, WalkConfig};
///
/// let mut gpu = Gpu::g610();
/// let mem = gpu.memory().clone();
/// // A 39-bit space (three levels) mapping VA 0x1000 to `page`, read-write.
/// let (l1, l2, l3, page) = (mem.alloc(1)?, mem.alloc(1)?, mem.alloc(1)?, mem.alloc(1)?);
/// mem.write_u64(l1, l2.0 | 0b11)?;
/// mem.write_u64(l2, l3.0 | 0b11)?;
/// mem.write_u64(PhysAddr(l3.0 + 8), page.0 | 1 << 10 | 1 << 6 | 0b11)?;
///
/// let cfg = WalkConfig::aarch64_4k(l1.0, 39);
/// gpu.write64(as_reg(2, AS_TRANSTAB_LO), cfg.transtab);
/// gpu.write64(as_reg(2, AS_MEMATTR_LO), cfg.memattr);
/// gpu.write64(as_reg(2, AS_TRANSCFG_LO), cfg.transcfg);
/// gpu.write32(as_reg(2, AS_COMMAND), as_cmd::UPDATE);
/// gpu.advance(10_000); // let the command finish
///
/// assert_eq!(gpu.translate(2, 0x1234, AccessType::Write), Ok(PhysAddr(page.0 + 0x234)));
/// let fault = gpu.translate(2, 0x2000, AccessType::Read).unwrap_err();
/// assert_eq!(fault.kind, FaultKind::Translation { level: 3 });
/// # }
/// # Ok::<(), mali_sim::SimError>(())
/// ```
#[derive(Debug)]
pub struct Gpu<
    #[cfg(feature = "std")] M: PhysMemory = std::sync::Arc<crate::SimMemory>,
    #[cfg(not(feature = "std"))] M: PhysMemory,
> {
    cfg: Config,
    mem: M,
    now: u64,
    gpu_irq: IrqBlock,
    job_irq: IrqBlock,
    mmu_irq: IrqBlock,
    reset_deadline: Option<u64>,
    reset_pending: bool,
    resets_started: u32,
    fail_next_reset: bool,
    resets_completed: u32,
    l2: PowerDomain,
    shader: PowerDomain,
    tiler: PowerDomain,
    flush_deadline: Option<u64>,
    latest_flush_id: u32,
    l2_config: u32,
    pwr_override: [u32; 2],
    coherency_enable: u32,
    timestamp_offset: u64,
    /// Simulated time of the last clock change (or reset), and the cycle count then.
    cycle_base: u64,
    cycle_base_count: u64,
    /// The GPU clock now (see [`set_gpu_clock_hz`](Self::set_gpu_clock_hz)).
    clock_hz: u64,
    /// The firmware acknowledged `COUNTER_EN`: streams may sample the counters.
    /// Counts kept across resets: `.0` the sync objects streams wrote while their older work
    /// was in flight (see [`Gpu::early_signals`]), `.1` the times the GPU's counters lost their
    /// continuity (resets, MCU cold boots), what `STORE_STATE` of the disjoint count stores.
    tallies: (u64, u64),
    pub(super) counters_enabled: bool,
    /// Power-order and powered-off faults reported so far.
    power_faults: u32,
    gpu_faultstatus: u32,
    gpu_faultaddress: u64,
    mcu_control: u32,
    mcu_status: u32,
    mcu_deadline: Option<u64>,
    /// The first `num_as` exist.
    address_spaces: [AddressSpace; regs::MMU_AS_SLOTS],
    num_as: usize,
    doorbells: [u64; regs::NUM_DOORBELLS],
    rung: FixedList<usize, RUNG_LOG>,
    bus_errors: FixedList<BusError, BUS_ERROR_LOG>,
    csf: engine::Csf,
    /// The MCU's image check.
    mcu_image: fwcheck::McuImage,
}

/// The "no coherency" protocol value of `COHERENCY_ENABLE`.
const COHERENCY_NONE: u32 = 31;

/// How many bus errors a GPU keeps (the first ones; later ones are counted).
pub const BUS_ERROR_LOG: usize = 64;
/// How many rung doorbells a GPU keeps between two
/// [`take_rung_doorbells`](Gpu::take_rung_doorbells) (the first ones; later ones are counted).
pub const RUNG_LOG: usize = 64;

#[cfg(feature = "std")]
impl Gpu {
    /// A GPU with its own memory, from the host's allocator (shared through an `Arc`).
    pub fn new(cfg: Config) -> Self {
        let mem = std::sync::Arc::new(crate::SimMemory::new(cfg.memory));
        Gpu::with_memory(cfg, mem)
    }

    /// A Mali-G610 with default configuration.
    pub fn g610() -> Self {
        Gpu::new(Config::g610())
    }
}

impl<M: PhysMemory> Gpu<M> {
    /// A GPU using `mem` as its physical memory (`cfg.memory` is ignored).
    ///
    /// `mem` may be a [`SimMemory`](crate::SimMemory) the GPU owns, a reference to one, or
    /// (with `std`) an `Arc` of one: whatever lets the driver's side reach the same memory.
    pub fn with_memory(cfg: Config, mem: M) -> Self {
        let mut slot = MaybeUninit::<Self>::uninit();
        // SAFETY: `slot` is valid for writes of a `Self` and nothing else reaches it.
        let done = unsafe { pin_init::Init::__init(Self::init(cfg, mem), slot.as_mut_ptr()) };
        match done {
            Ok(()) => {}
            Err(never) => match never {},
        }
        // SAFETY: The initializer returned `Ok`, so it wrote every field.
        unsafe { slot.assume_init() }
    }

    /// An in-place initializer of a GPU using `mem` as its physical memory (`cfg.memory` is
    /// ignored), the same GPU [`with_memory`](Self::with_memory) returns.
    ///
    /// The GPU's state is tens of KiB of fixed-size arrays (address spaces with their TLBs,
    /// command-stream groups, logs): too much for a kernel stack. A kernel makes it where it
    /// is to live, `VBox::init(Gpu::init(cfg, mem), GFP_KERNEL)?` (as the KUnit suite of
    /// module `kernel` does), and the largest temporary
    /// on its stack is then one command stream's state (under 1 KiB). A GPU reset also
    /// resets that state in place.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use core::mem::MaybeUninit;
    /// use mali_sim::{Config, Gpu, MemConfig, SimMemory};
    /// use pin_init::Init;
    ///
    /// let mem = SimMemory::new(MemConfig::default());
    /// let mut slot = Box::new(MaybeUninit::<Gpu<&SimMemory>>::uninit());
    /// // SAFETY: `slot` is valid for writes and nothing else reaches it.
    /// let done = unsafe { Gpu::init(Config::g610(), &mem).__init(slot.as_mut_ptr()) };
    /// assert!(done.is_ok());
    /// // SAFETY: The initializer returned `Ok`: the GPU is initialised.
    /// let mut gpu = unsafe { slot.assume_init() };
    /// assert_eq!(gpu.read32(mali_sim::regs::GPU_ID), 0xa867_0005);
    /// # }
    /// ```
    pub fn init(cfg: Config, mem: M) -> impl pin_init::Init<Self> {
        let id = cfg.identity;
        let clock_hz = cfg.timings.gpu_clock_hz;
        let num_as = id.num_as().min(regs::MMU_AS_SLOTS);
        let as_bits = if num_as >= 16 {
            0xffff
        } else {
            (1u32 << num_as) - 1
        };
        init!(Self {
            cfg,
            mem,
            now: 0,
            gpu_irq: IrqBlock::new(gpu_irq::ALL),
            job_irq: IrqBlock::new(u32::MAX),
            mmu_irq: IrqBlock::new(as_bits | as_bits << 16),
            reset_deadline: None,
            reset_pending: false,
            resets_started: 0,
            fail_next_reset: false,
            resets_completed: 0,
            l2: PowerDomain::new(id.l2_present),
            shader: PowerDomain::new(id.shader_present),
            tiler: PowerDomain::new(id.tiler_present),
            flush_deadline: None,
            latest_flush_id: 0,
            l2_config: 0,
            pwr_override: [0; 2],
            coherency_enable: COHERENCY_NONE,
            timestamp_offset: 0,
            cycle_base: 0,
            cycle_base_count: 0,
            clock_hz,
            counters_enabled: false,
            tallies: (0, 0),
            power_faults: 0,
            gpu_faultstatus: 0,
            gpu_faultaddress: 0,
            mcu_control: mcu::DISABLED,
            mcu_status: mcu::DISABLED,
            mcu_deadline: None,
            address_spaces <- init_array_from_fn(|_| AddressSpace::init()),
            num_as,
            doorbells: [0; regs::NUM_DOORBELLS],
            rung <- FixedList::init(),
            bus_errors <- FixedList::init(),
            csf <- engine::Csf::init(cfg.timings.fw_seed),
            mcu_image: fwcheck::McuImage::default(),
        })
    }

    /// The configuration the GPU was created with (with any later fault-injection changes).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The fault-injection switches, to change them at run time.
    pub fn faults_mut(&mut self) -> &mut FaultInjection {
        &mut self.cfg.faults
    }

    /// The physical memory the GPU reads and writes.
    pub fn memory(&self) -> &M {
        &self.mem
    }

    // ---------------------------------------------------------------- time

    /// Current simulated time in nanoseconds (starts at 0).
    pub fn now_ns(&self) -> u64 {
        self.now
    }

    /// What `LATEST_FLUSH_ID` reads now, without a bus access (what a backend that mirrors
    /// the USER page into memory userspace maps needs).
    pub fn latest_flush_id(&self) -> u32 {
        self.latest_flush_id
    }

    /// Lets `ns` nanoseconds of simulated time pass, completing every operation that falls
    /// due in order.
    pub fn advance(&mut self, ns: u64) {
        let target = self.now.saturating_add(ns);
        while let Some(t) = self.next_event_ns() {
            if t > target {
                break;
            }
            self.now = self.now.max(t);
            self.fire_due();
        }
        self.now = target;
    }

    /// Runs the GPU one step: the entry point of whatever executes the simulation (a host
    /// thread, a kernel work item, a test calling it in a loop).
    ///
    /// If an interrupt line is asserted, returns [`Progress::Irq`] without moving time, so
    /// that no event happens behind the back of an interrupt the driver has not seen. Otherwise
    /// moves simulated time to the next scheduled event or to `limit_ns` (the executor's own
    /// next timer, or the simulated time an executor that paces the GPU to real time lets it
    /// reach), whichever comes first, completing everything
    /// due by then ([`Progress::Advanced`]; a limit at or before the current time completes
    /// what is due without moving time). With nothing scheduled and no limit, returns
    /// [`Progress::Idle`].
    ///
    /// A step does a bounded amount of work (one event's worth), so an executor that must not
    /// run long (an atomic context, a work item sharing its worker) calls it once per turn.
    ///
    /// # Examples
    ///
    /// An executor that is the caller itself, handling the reset interrupt:
    ///
    /// ```
    /// # #[cfg(feature = "std")] {
    /// use mali_sim::regs::{self, gpu_irq};
    /// use mali_sim::{Gpu, IrqLine, Progress};
    ///
    /// let mut gpu = Gpu::g610();
    /// gpu.write32(regs::GPU_IRQ_MASK, gpu_irq::RESET_COMPLETED);
    /// gpu.write32(regs::GPU_COMMAND, regs::gpu_cmd::SOFT_RESET);
    /// let mut handled = 0;
    /// loop {
    ///     match gpu.step(None) {
    ///         Progress::Irq(lines) => {
    ///             assert!(lines.contains(IrqLine::Gpu));
    ///             let status = gpu.read32(regs::GPU_IRQ_STATUS);
    ///             gpu.write32(regs::GPU_IRQ_CLEAR, status);
    ///             handled += 1;
    ///         }
    ///         Progress::Advanced { .. } => {}
    ///         Progress::Idle => break,
    ///     }
    /// }
    /// assert_eq!((handled, gpu.resets_completed()), (1, 1));
    /// # }
    /// ```
    pub fn step(&mut self, limit_ns: Option<u64>) -> Progress {
        let lines = self.asserted_lines();
        if !lines.is_empty() {
            return Progress::Irq(lines);
        }
        let target = match (self.next_event_ns(), limit_ns) {
            (Some(a), Some(b)) => a.min(b),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => return Progress::Idle,
        };
        self.advance(target.saturating_sub(self.now));
        Progress::Advanced { now_ns: self.now }
    }

    /// When the next scheduled operation completes, if any.
    pub fn next_event_ns(&self) -> Option<u64> {
        let power = [self.l2.deadline, self.shader.deadline, self.tiler.deadline];
        let mmu = self
            .address_spaces
            .iter()
            .filter_map(|a| a.pending.and_then(|p| p.done_at));
        [
            self.reset_deadline,
            self.flush_deadline,
            self.mcu_deadline,
            self.csf.deadline,
            self.fw_next_event(),
        ]
        .into_iter()
        .chain(power)
        .flatten()
        .chain(mmu)
        .min()
    }

    fn due(&self, d: Option<u64>) -> bool {
        d.is_some_and(|t| t <= self.now)
    }

    fn after(&self, delay: u64) -> Option<u64> {
        Some(self.now.saturating_add(delay))
    }

    /// Completes everything due at `self.now`, in a fixed order.
    fn fire_due(&mut self) {
        if self.due(self.reset_deadline) {
            self.reset_deadline = None;
            self.complete_reset();
        }
        self.fire_power();
        if self.due(self.flush_deadline) {
            self.flush_deadline = None;
            self.latest_flush_id = self.latest_flush_id.wrapping_add(1);
            self.gpu_irq.raise(gpu_irq::CLEAN_CACHES_COMPLETED);
        }
        if self.due(self.mcu_deadline) {
            self.mcu_deadline = None;
            self.mcu_boot();
        }
        let pa_bits = self.cfg.identity.pa_bits();
        for n in 0..self.num_as {
            let a = &mut self.address_spaces[n];
            if let Some(p) = a.pending {
                if p.done_at.is_some_and(|t| t <= self.now) {
                    a.pending = None;
                    a.complete(p, pa_bits);
                    self.mmu_irq.raise(1 << (16 + n));
                    // Streams stalled on a locked region may continue.
                    self.kick_engine();
                }
            }
        }
        // The firmware serves its requests before the streams' next step.
        self.fire_fw();
        if self.due(self.csf.deadline) {
            self.csf.deadline = None;
            self.run_streams();
        }
    }

    // ---------------------------------------------------------------- reset

    fn start_reset(&mut self) {
        self.resets_started = self.resets_started.wrapping_add(1);
        self.reset_pending = true;
        let f = self.cfg.faults;
        let swallow = f.reset_never_completes
            || (f.reset_fails_once && self.resets_started == 1)
            || core::mem::take(&mut self.fail_next_reset);
        self.reset_deadline = if swallow {
            None
        } else {
            self.after(self.cfg.timings.reset_ns)
        };
    }

    // Own frame, not `fire_due`'s: see "Stack use" in the engine's module docs.
    #[inline(never)]
    fn complete_reset(&mut self) {
        let id = self.cfg.identity;
        self.reset_pending = false;
        self.resets_completed = self.resets_completed.wrapping_add(1);
        self.l2 = PowerDomain::new(id.l2_present);
        self.shader = PowerDomain::new(id.shader_present);
        self.tiler = PowerDomain::new(id.tiler_present);
        for a in &mut self.address_spaces[..self.num_as] {
            a.reset();
        }
        self.flush_deadline = None;
        self.mcu_deadline = None;
        self.mcu_control = mcu::DISABLED;
        self.mcu_status = mcu::DISABLED;
        self.l2_config = 0;
        self.pwr_override = [0; 2];
        self.coherency_enable = COHERENCY_NONE;
        self.timestamp_offset = 0;
        self.cycle_base = self.now;
        self.cycle_base_count = 0;
        self.counters_enabled = false;
        self.gpu_faultstatus = 0;
        self.gpu_faultaddress = 0;
        self.rung.clear();
        self.csf.reset(false);
        self.tallies.1 = self.tallies.1.wrapping_add(1);
        // The GPU mask survives so that RESET_COMPLETED can be delivered.
        self.gpu_irq.rawstat = 0;
        self.job_irq.rawstat = 0;
        self.job_irq.mask = 0;
        self.mmu_irq.rawstat = 0;
        self.mmu_irq.mask = 0;
        self.gpu_irq.raise(gpu_irq::RESET_COMPLETED);
    }

    /// Makes the next soft reset never complete (a reset that fails once, injected at run
    /// time: the driver has to time out and try again).
    pub fn fail_next_reset(&mut self) {
        self.fail_next_reset = true;
    }

    /// Number of resets that completed.
    pub fn resets_completed(&self) -> u32 {
        self.resets_completed
    }

    /// Whether a reset was requested and has not completed.
    pub fn reset_in_progress(&self) -> bool {
        self.reset_pending
    }

    // ---------------------------------------------------------------- power

    fn domain_mut(&mut self, d: Domain) -> &mut PowerDomain {
        match d {
            Domain::L2 => &mut self.l2,
            Domain::Shader => &mut self.shader,
            Domain::Tiler => &mut self.tiler,
        }
    }

    fn domain(&self, d: Domain) -> &PowerDomain {
        match d {
            Domain::L2 => &self.l2,
            Domain::Shader => &self.shader,
            Domain::Tiler => &self.tiler,
        }
    }

    /// Bits of `d` that are powered (`*_READY`).
    pub fn power_ready(&self, d: Domain) -> u64 {
        self.domain(d).ready
    }

    /// Bits of `d` in a transition (`*_PWRTRANS`).
    pub fn power_transitioning(&self, d: Domain) -> u64 {
        self.domain(d).trans()
    }

    fn power_request(&mut self, d: Domain, mask: u64, on: bool) {
        if mask & self.domain(d).present != 0 && !self.power_order_ok(d, on) {
            self.power_fault(GPU_POWER_ORDER_FAULT);
            return;
        }
        let delay = self.cfg.timings.power_ns;
        let deadline = self.after(delay);
        let dom = self.domain_mut(d);
        if dom.request(mask, on) && dom.deadline.is_none() {
            dom.deadline = deadline;
        }
    }

    /// Whether a power request of `d` respects the order the simulated GPU insists on: shader
    /// cores and tiler power on only while the L2 is ready (fully powered and not going off);
    /// the L2 powers off only once shader cores and tiler are off (none ready or changing)
    /// and the MCU is not running.
    fn power_order_ok(&self, d: Domain, on: bool) -> bool {
        match (d, on) {
            (Domain::L2, true) | (Domain::Shader | Domain::Tiler, false) => true,
            (Domain::Shader | Domain::Tiler, true) => {
                self.l2.ready == self.l2.present && self.l2.off == 0 && self.l2.on == 0
            }
            (Domain::L2, false) => {
                let cores = self.shader.ready | self.shader.trans() | self.tiler.ready;
                cores | self.tiler.trans() == 0
                    && matches!(self.mcu_status, mcu::DISABLED | mcu::HALT)
            }
        }
    }

    /// Reports a power fault: `code` in `GPU_FAULTSTATUS` (unless a fault is pending there),
    /// the `FAULT` interrupt bit, and one more in [`power_faults`](Self::power_faults).
    pub(super) fn power_fault(&mut self, code: u32) {
        self.power_faults = self.power_faults.saturating_add(1);
        if self.gpu_irq.rawstat & gpu_irq::FAULT == 0 {
            self.gpu_faultstatus = code;
            self.gpu_faultaddress = 0;
        }
        self.gpu_irq.raise(gpu_irq::FAULT);
    }

    /// How many power faults ([`GPU_POWER_ORDER_FAULT`], [`GPU_MCU_OFF_FAULT`]) the GPU
    /// reported since it was created (resets do not clear the count).
    pub fn power_faults(&self) -> u32 {
        self.power_faults
    }

    /// Whether shader cores and tiler are powered, as work that runs on them needs.
    pub(super) fn cores_powered(&self) -> bool {
        self.shader.ready != 0 && self.tiler.ready != 0
    }

    // ---------------------------------------------------------------- clock

    /// The GPU clock rate now, in Hz.
    pub fn gpu_clock_hz(&self) -> u64 {
        self.clock_hz
    }

    /// Sets the GPU clock to `hz`, as the SoC's clock controller would (the GPU has no
    /// register for it). The cycle counter keeps counting from where it was, at the new
    /// rate; the timestamp counter does not depend on the GPU clock. Rates of zero and rates
    /// the configuration's [`opp_table`](crate::Timings::opp_table) does not list are refused
    /// (`false`, nothing changes).
    pub fn set_gpu_clock_hz(&mut self, hz: u64) -> bool {
        if hz == 0 || !self.cfg.timings.opp_table.contains(&hz) {
            return false;
        }
        self.cycle_base_count = self.cycles();
        self.cycle_base = self.now;
        self.clock_hz = hz;
        true
    }

    fn stuck(&self, d: Domain) -> bool {
        let f = self.cfg.faults;
        match d {
            Domain::L2 => f.l2_never_powers_up,
            Domain::Shader => f.shader_never_powers_up,
            Domain::Tiler => f.tiler_never_powers_up,
        }
    }

    fn fire_power(&mut self) {
        let mut any = false;
        for d in [Domain::L2, Domain::Shader, Domain::Tiler] {
            if !self.due(self.domain(d).deadline) {
                continue;
            }
            let l2_ready = self.l2.ready != 0;
            let cores_busy =
                (self.shader.ready | self.shader.on | self.tiler.ready | self.tiler.on) != 0;
            let may_on = !self.stuck(d) && (d == Domain::L2 || l2_ready);
            let may_off = d != Domain::L2 || !cores_busy;
            let dom = self.domain_mut(d);
            dom.deadline = None;
            any |= dom.finish(may_on, may_off);
        }
        if !any {
            return;
        }
        self.gpu_irq.raise(gpu_irq::POWER_CHANGED_SINGLE);
        // Domains that waited for another one may proceed now.
        let retry = self.after(self.cfg.timings.power_ns);
        for d in [Domain::L2, Domain::Shader, Domain::Tiler] {
            let stuck = self.stuck(d);
            let dom = self.domain_mut(d);
            let can_progress = dom.off != 0 || (dom.on != 0 && !stuck);
            if dom.deadline.is_none() && can_progress {
                dom.deadline = retry;
            }
        }
        if self.l2.trans() | self.shader.trans() | self.tiler.trans() == 0 {
            self.gpu_irq.raise(gpu_irq::POWER_CHANGED_ALL);
        }
    }

    // ---------------------------------------------------------------- interrupts

    /// Whether interrupt line `line` is asserted (`STATUS != 0`).
    pub fn irq_pending(&self, line: IrqLine) -> bool {
        self.irq_status(line) != 0
    }

    /// The `STATUS` value of `line`'s interrupt block.
    pub fn irq_status(&self, line: IrqLine) -> u32 {
        match line {
            IrqLine::Gpu => self.gpu_irq.status(),
            IrqLine::Job => self.job_irq.status(),
            IrqLine::Mmu => self.mmu_irq.status(),
        }
    }

    /// The asserted interrupt lines (`STATUS != 0`).
    pub fn asserted_lines(&self) -> IrqLines {
        IrqLine::ALL
            .into_iter()
            .filter(|l| self.irq_pending(*l))
            .fold(IrqLines::NONE, IrqLines::with)
    }

    /// Raises bits in the job interrupt block (the firmware's side of `JOB_IRQ_RAWSTAT`).
    pub fn raise_job_irq(&mut self, bits: u32) {
        self.job_irq.raise(bits);
    }

    // ---------------------------------------------------------------- bus errors

    /// The first [`BUS_ERROR_LOG`] bus errors since creation (or the last
    /// [`take_bus_errors`](Self::take_bus_errors)).
    pub fn bus_errors(&self) -> &[BusError] {
        &self.bus_errors
    }

    /// How many bus errors happened after [`BUS_ERROR_LOG`] were kept (they are counted, not
    /// kept).
    pub fn bus_errors_dropped(&self) -> u64 {
        self.bus_errors.dropped()
    }

    /// Returns and forgets the recorded bus errors (with the count of dropped ones).
    pub fn take_bus_errors(&mut self) -> FixedList<BusError, BUS_ERROR_LOG> {
        core::mem::take(&mut self.bus_errors)
    }

    fn bus_error(&mut self, offset: usize, value: Option<u32>, kind: BusErrorKind) {
        // A full log counts the error instead (see `bus_errors_dropped`).
        let _ = self.bus_errors.push(BusError {
            at_ns: self.now,
            offset,
            value,
            kind,
        });
    }

    // ---------------------------------------------------------------- MMIO

    /// Reads the 32-bit register at `offset` in the MMIO window.
    ///
    /// Write-only registers read as zero. Unknown and misaligned offsets read as zero and are
    /// recorded as [`BusError`]s.
    pub fn read32(&mut self, offset: usize) -> u32 {
        if !offset.is_multiple_of(4) {
            self.bus_error(offset, None, BusErrorKind::Misaligned);
            return 0;
        }
        match self.read_reg(offset) {
            Some(v) => v,
            None => {
                self.bus_error(offset, None, BusErrorKind::UnknownRegister);
                0
            }
        }
    }

    /// Writes the 32-bit register at `offset` in the MMIO window.
    ///
    /// Writes to read-only, unknown or misaligned offsets, and unknown command values, are
    /// ignored and recorded as [`BusError`]s. Operations whose delay is zero complete before
    /// this returns.
    pub fn write32(&mut self, offset: usize, value: u32) {
        let res = if !offset.is_multiple_of(4) {
            Err(BusErrorKind::Misaligned)
        } else {
            self.write_reg(offset, value)
        };
        if let Err(kind) = res {
            self.bus_error(offset, Some(value), kind);
        }
        self.fire_due();
    }

    /// Reads a 64-bit register as two 32-bit reads, low half first.
    pub fn read64(&mut self, offset: usize) -> u64 {
        let lo = self.read32(offset);
        let hi = self.read32(offset.wrapping_add(4));
        u64::from(lo) | u64::from(hi) << 32
    }

    /// Writes a 64-bit register as two 32-bit writes, low half first.
    pub fn write64(&mut self, offset: usize, value: u64) {
        self.write32(offset, value as u32);
        self.write32(offset.wrapping_add(4), (value >> 32) as u32);
    }

    fn timestamp(&self) -> u64 {
        ticks_in(self.now, self.cfg.timings.timestamp_hz).wrapping_add(self.timestamp_offset)
    }

    /// `TIMESTAMP`: the system timestamp, independent of the GPU clock.
    pub(super) fn timestamp_now(&self) -> u64 {
        self.timestamp()
    }

    /// `CYCLE_COUNT`: the cycles counted at the last clock change plus those since, at the
    /// current rate.
    pub(super) fn cycles(&self) -> u64 {
        let ns = self.now - self.cycle_base;
        self.cycle_base_count
            .wrapping_add(ticks_in(ns, self.clock_hz))
    }

    fn gpu_status(&self) -> u32 {
        let mut s = 0;
        if self.l2.trans() | self.shader.trans() | self.tiler.trans() != 0 {
            s |= gpu_status::PWR_ACTIVE;
        }
        if self.mmu_irq.rawstat & 0xffff != 0 {
            s |= gpu_status::PAGE_FAULT;
        }
        if self.csf.deadline.is_some() {
            s |= gpu_status::ACTIVE;
        }
        s
    }

    fn read_reg(&self, offset: usize) -> Option<u32> {
        let id = &self.cfg.identity;
        let lo = |v: u64| v as u32;
        let hi = |v: u64| (v >> 32) as u32;
        let v = match offset {
            regs::GPU_ID => id.gpu_id,
            regs::L2_FEATURES => id.l2_features,
            regs::CORE_FEATURES => id.core_features,
            regs::TILER_FEATURES => id.tiler_features,
            regs::MEM_FEATURES => id.mem_features,
            regs::MMU_FEATURES => id.mmu_features,
            regs::AS_PRESENT => id.as_present,
            regs::CSF_ID => id.csf_id,
            regs::GPU_IRQ_RAWSTAT => self.gpu_irq.rawstat,
            regs::GPU_IRQ_MASK => self.gpu_irq.mask,
            regs::GPU_IRQ_STATUS => self.gpu_irq.status(),
            regs::GPU_IRQ_CLEAR | regs::GPU_COMMAND | regs::PWR_KEY => 0,
            regs::GPU_STATUS => self.gpu_status(),
            regs::GPU_FAULTSTATUS => self.gpu_faultstatus,
            regs::GPU_FAULTADDRESS_LO => lo(self.gpu_faultaddress),
            regs::GPU_FAULTADDRESS_HI => hi(self.gpu_faultaddress),
            regs::L2_CONFIG => self.l2_config,
            regs::PWR_OVERRIDE0 => self.pwr_override[0],
            regs::PWR_OVERRIDE1 => self.pwr_override[1],
            regs::TIMESTAMP_OFFSET_LO => lo(self.timestamp_offset),
            regs::TIMESTAMP_OFFSET_HI => hi(self.timestamp_offset),
            regs::CYCLE_COUNT_LO => lo(self.cycles()),
            regs::CYCLE_COUNT_HI => hi(self.cycles()),
            regs::TIMESTAMP_LO => lo(self.timestamp()),
            regs::TIMESTAMP_HI => hi(self.timestamp()),
            regs::THREAD_MAX_THREADS => id.thread_max_threads,
            regs::THREAD_MAX_WORKGROUP_SIZE => id.thread_max_workgroup_size,
            regs::THREAD_MAX_BARRIER_SIZE => id.thread_max_barrier_size,
            regs::THREAD_FEATURES => id.thread_features,
            0x0b0..=0x0bc => id.texture_features[(offset - regs::TEXTURE_FEATURES_0) / 4],
            0x100..=0x104 => half(id.shader_present, offset),
            0x110..=0x114 => half(id.tiler_present, offset),
            0x120..=0x124 => half(id.l2_present, offset),
            0x140..=0x144 => half(self.shader.ready, offset),
            0x150..=0x154 => half(self.tiler.ready, offset),
            0x160..=0x164 => half(self.l2.ready, offset),
            o if power_request_reg(o).is_some() => 0, // PWRON/PWROFF: write-only
            0x200..=0x204 => half(self.shader.trans(), offset),
            0x210..=0x214 => half(self.tiler.trans(), offset),
            0x220..=0x224 => half(self.l2.trans(), offset),
            0x240..=0x264 if (offset & 0xf) <= 4 => 0, // PWRACTIVE: nothing is busy
            regs::REVIDR => id.revidr,
            regs::COHERENCY_FEATURES => id.coherency_features,
            regs::COHERENCY_ENABLE => self.coherency_enable,
            regs::MCU_CONTROL => self.mcu_control,
            regs::MCU_STATUS => self.mcu_status,
            regs::JOB_IRQ_RAWSTAT => self.job_irq.rawstat,
            regs::JOB_IRQ_MASK => self.job_irq.mask,
            regs::JOB_IRQ_STATUS => self.job_irq.status(),
            regs::JOB_IRQ_CLEAR => 0,
            regs::MMU_IRQ_RAWSTAT => self.mmu_irq.rawstat,
            regs::MMU_IRQ_MASK => self.mmu_irq.mask,
            regs::MMU_IRQ_STATUS => self.mmu_irq.status(),
            regs::MMU_IRQ_CLEAR => 0,
            regs::LATEST_FLUSH_ID => self.latest_flush_id,
            o if (regs::MMU_AS_BASE
                ..regs::MMU_AS_BASE + regs::MMU_AS_SLOTS * regs::MMU_AS_STRIDE)
                .contains(&o) =>
            {
                let n = (o - regs::MMU_AS_BASE) / regs::MMU_AS_STRIDE;
                let a = self.address_spaces[..self.num_as].get(n)?;
                match (o - regs::MMU_AS_BASE) % regs::MMU_AS_STRIDE {
                    regs::AS_TRANSTAB_LO => lo(a.transtab),
                    regs::AS_TRANSTAB_HI => hi(a.transtab),
                    regs::AS_MEMATTR_LO => lo(a.memattr),
                    regs::AS_MEMATTR_HI => hi(a.memattr),
                    regs::AS_LOCKADDR_LO => lo(a.lockaddr),
                    regs::AS_LOCKADDR_HI => hi(a.lockaddr),
                    regs::AS_COMMAND => 0,
                    regs::AS_FAULTSTATUS => a.faultstatus,
                    regs::AS_FAULTADDRESS_LO => lo(a.faultaddress),
                    regs::AS_FAULTADDRESS_HI => hi(a.faultaddress),
                    regs::AS_STATUS => u32::from(a.busy()) * regs::AS_STATUS_ACTIVE,
                    regs::AS_TRANSCFG_LO => lo(a.transcfg),
                    regs::AS_TRANSCFG_HI => hi(a.transcfg),
                    regs::AS_FAULTEXTRA_LO => lo(a.faultextra),
                    regs::AS_FAULTEXTRA_HI => hi(a.faultextra),
                    _ => return None,
                }
            }
            o if doorbell_index(o).is_some() => 0,
            _ => return None,
        };
        Some(v)
    }

    fn write_reg(&mut self, offset: usize, v: u32) -> Result<(), BusErrorKind> {
        match offset {
            regs::GPU_IRQ_RAWSTAT => self.gpu_irq.raise(v),
            regs::GPU_IRQ_CLEAR => self.gpu_irq.rawstat &= !v,
            regs::GPU_IRQ_MASK => self.gpu_irq.mask = v & self.gpu_irq.valid,
            regs::GPU_COMMAND => self.gpu_command(v)?,
            regs::L2_CONFIG => self.l2_config = v,
            regs::PWR_KEY => {}
            regs::PWR_OVERRIDE0 => self.pwr_override[0] = v,
            regs::PWR_OVERRIDE1 => self.pwr_override[1] = v,
            regs::TIMESTAMP_OFFSET_LO => set_half(&mut self.timestamp_offset, false, v),
            regs::TIMESTAMP_OFFSET_HI => set_half(&mut self.timestamp_offset, true, v),
            o if power_request_reg(o).is_some() => {
                if let Some((d, on)) = power_request_reg(o) {
                    let mask = u64::from(v) << if o & 4 != 0 { 32 } else { 0 };
                    self.power_request(d, mask, on);
                }
            }
            regs::COHERENCY_ENABLE => match v {
                0 | 1 | COHERENCY_NONE => self.coherency_enable = v,
                _ => return Err(BusErrorKind::InvalidValue),
            },
            regs::MCU_CONTROL => self.mcu_control_write(v)?,
            regs::JOB_IRQ_RAWSTAT => self.job_irq.raise(v),
            regs::JOB_IRQ_CLEAR => self.job_irq.rawstat &= !v,
            regs::JOB_IRQ_MASK => self.job_irq.mask = v & self.job_irq.valid,
            regs::MMU_IRQ_RAWSTAT => self.mmu_irq.raise(v),
            regs::MMU_IRQ_CLEAR => self.mmu_irq.rawstat &= !v,
            regs::MMU_IRQ_MASK => self.mmu_irq.mask = v & self.mmu_irq.valid,
            o if (regs::MMU_AS_BASE
                ..regs::MMU_AS_BASE + regs::MMU_AS_SLOTS * regs::MMU_AS_STRIDE)
                .contains(&o) =>
            {
                let n = (o - regs::MMU_AS_BASE) / regs::MMU_AS_STRIDE;
                self.as_write(n, (o - regs::MMU_AS_BASE) % regs::MMU_AS_STRIDE, v)?;
            }
            o if doorbell_index(o).is_some() => {
                if let Some(n) = doorbell_index(o) {
                    if v & 1 != 0 {
                        if n != 0 && self.mcu_status != mcu::ENABLED {
                            self.power_fault(GPU_MCU_OFF_FAULT);
                        }
                        self.doorbells[n] = self.doorbells[n].wrapping_add(1);
                        // A full log counts the doorbell instead; its counter still moves.
                        let _ = self.rung.push(n);
                        self.csf_doorbell(n);
                    }
                }
            }
            o => {
                return Err(if self.read_reg(o).is_some() {
                    BusErrorKind::ReadOnly
                } else {
                    BusErrorKind::UnknownRegister
                })
            }
        }
        Ok(())
    }

    fn gpu_command(&mut self, v: u32) -> Result<(), BusErrorKind> {
        match v & 0xff {
            gpu_cmd::NOP => {}
            1 => match v {
                gpu_cmd::SOFT_RESET | gpu_cmd::HARD_RESET => self.start_reset(),
                _ => return Err(BusErrorKind::InvalidValue),
            },
            gpu_cmd::FLUSH_CACHES => {
                if v >> 20 != 0 {
                    return Err(BusErrorKind::InvalidValue);
                }
                if self.flush_deadline.is_some() {
                    return Err(BusErrorKind::Busy);
                }
                self.flush_deadline = self.after(self.cfg.timings.cache_flush_ns);
            }
            gpu_cmd::CLEAR_FAULT => {
                self.gpu_faultstatus = 0;
                self.gpu_faultaddress = 0;
            }
            _ => return Err(BusErrorKind::InvalidValue),
        }
        Ok(())
    }

    fn mcu_control_write(&mut self, v: u32) -> Result<(), BusErrorKind> {
        match v {
            mcu::DISABLED => {
                self.mcu_control = v;
                self.mcu_deadline = None;
                // A disabled MCU forgets its groups and streams: the next enable is a cold
                // boot, after which the driver starts its groups again.
                self.csf.reset(true);
                self.tallies.1 = self.tallies.1.wrapping_add(1);
                self.counters_enabled = false;
                if self.mcu_status != mcu::DISABLED {
                    self.mcu_status = mcu::DISABLED;
                    self.gpu_irq.raise(gpu_irq::MCU_STATUS_CHANGED);
                }
            }
            mcu::ENABLED | mcu::AUTO => {
                if self.l2.ready != self.l2.present || self.l2.off != 0 {
                    // The MCU runs from the L2: refused until the L2 is ready.
                    self.power_fault(GPU_POWER_ORDER_FAULT);
                    return Ok(());
                }
                self.mcu_control = v;
                if self.mcu_status != mcu::ENABLED
                    && !self.csf.booted
                    && self.mcu_deadline.is_none()
                {
                    self.mcu_deadline = self.after(self.cfg.timings.mcu_ns);
                }
            }
            _ => return Err(BusErrorKind::InvalidValue),
        }
        Ok(())
    }

    fn as_write(&mut self, n: usize, reg: usize, v: u32) -> Result<(), BusErrorKind> {
        let delay = self.cfg.timings.mmu_command_ns;
        let mut stuck = self.cfg.faults.mmu_command_stuck;
        if reg == regs::AS_COMMAND && n < self.num_as {
            if let Some(left) = self.cfg.faults.mmu_commands_before_stuck.as_mut() {
                stuck |= *left == 0;
                *left = left.saturating_sub(1);
            }
        }
        let done_at = if stuck { None } else { self.after(delay) };
        let a = self.address_spaces[..self.num_as]
            .get_mut(n)
            .ok_or(BusErrorKind::UnknownRegister)?;
        match reg {
            regs::AS_TRANSTAB_LO => set_half(&mut a.transtab, false, v),
            regs::AS_TRANSTAB_HI => set_half(&mut a.transtab, true, v),
            regs::AS_MEMATTR_LO => set_half(&mut a.memattr, false, v),
            regs::AS_MEMATTR_HI => set_half(&mut a.memattr, true, v),
            regs::AS_LOCKADDR_LO => set_half(&mut a.lockaddr, false, v),
            regs::AS_LOCKADDR_HI => set_half(&mut a.lockaddr, true, v),
            regs::AS_TRANSCFG_LO => set_half(&mut a.transcfg, false, v),
            regs::AS_TRANSCFG_HI => set_half(&mut a.transcfg, true, v),
            regs::AS_COMMAND => {
                if v > as_cmd::FLUSH_MEM {
                    return Err(BusErrorKind::InvalidValue);
                }
                if a.busy() {
                    return Err(BusErrorKind::Busy);
                }
                a.pending = Some(Pending {
                    cmd: v,
                    done_at,
                    lockaddr: a.lockaddr,
                });
            }
            regs::AS_FAULTSTATUS
            | regs::AS_FAULTADDRESS_LO
            | regs::AS_FAULTADDRESS_HI
            | regs::AS_STATUS
            | regs::AS_FAULTEXTRA_LO
            | regs::AS_FAULTEXTRA_HI => return Err(BusErrorKind::ReadOnly),
            _ => return Err(BusErrorKind::UnknownRegister),
        }
        Ok(())
    }

    // ---------------------------------------------------------------- doorbells

    /// How many times doorbell `n` was rung (0 for doorbells that do not exist).
    pub fn doorbell_count(&self, n: usize) -> u64 {
        self.doorbells.get(n).copied().unwrap_or(0)
    }

    /// The doorbells rung since the last call, in order (the first [`RUNG_LOG`] of them,
    /// with the count of later ones).
    pub fn take_rung_doorbells(&mut self) -> FixedList<usize, RUNG_LOG> {
        core::mem::take(&mut self.rung)
    }

    // ---------------------------------------------------------------- MMU

    /// Number of address spaces.
    pub fn num_address_spaces(&self) -> usize {
        self.num_as
    }

    /// The configuration address space `n` latched at its last `UPDATE`.
    pub fn active_config(&self, n: usize) -> Option<WalkConfig> {
        self.address_spaces[..self.num_as].get(n).map(|a| a.active)
    }

    /// The locked region of address space `n`, if a `LOCK` is in force.
    pub fn locked_region(&self, n: usize) -> Option<LockRegion> {
        self.address_spaces[..self.num_as]
            .get(n)
            .and_then(|a| a.locked)
    }

    /// Whether GPU accesses to `va` in address space `n` would stall on a locked region.
    pub fn is_locked(&self, n: usize, va: u64) -> bool {
        self.locked_region(n).is_some_and(|r| r.contains(va))
    }

    /// TLB counters of address space `n`.
    pub fn tlb_stats(&self, n: usize) -> Option<TlbStats> {
        self.address_spaces[..self.num_as]
            .get(n)
            .map(|a| a.tlb_stats())
    }

    /// Walks address space `n`'s tables (with its latched configuration) for an `access` to
    /// `va`, bypassing the TLB and recording nothing: the view of a checker.
    pub fn walk(&self, n: usize, va: u64, access: AccessType) -> Result<Translation, Fault> {
        match self.address_spaces[..self.num_as].get(n) {
            Some(a) => super::walk::walk(&self.mem, &a.active, va, access),
            None => Err(Fault {
                kind: FaultKind::Disabled,
                va,
                access,
            }),
        }
    }

    /// Translates `va` in address space `n` as a GPU access would: through the TLB, walking
    /// and caching on a miss. A fault is recorded in the space's `FAULTSTATUS` and
    /// `FAULTADDRESS` (unless an earlier fault is still pending there) and raises its bit in
    /// `MMU_IRQ_RAWSTAT`. An address space the GPU lacks yields a
    /// [`FaultKind::Disabled`] fault that is not recorded anywhere.
    ///
    /// Locked regions are not taken into account; see [`is_locked`](Self::is_locked).
    pub fn translate(&mut self, n: usize, va: u64, access: AccessType) -> Result<PhysAddr, Fault> {
        self.translate_from(n, va, access, 0).map(|t| t.pa)
    }

    /// [`translate`](Self::translate) for an access made by `source_id` (reported in
    /// `FAULTSTATUS` bits 31:16), returning the whole translation.
    pub fn translate_from(
        &mut self,
        n: usize,
        va: u64,
        access: AccessType,
        source_id: u16,
    ) -> Result<Translation, Fault> {
        let Some(a) = self.address_spaces[..self.num_as].get_mut(n) else {
            return Err(Fault {
                kind: FaultKind::Disabled,
                va,
                access,
            });
        };
        match a.translate(&self.mem, va, access) {
            Ok(t) => Ok(t),
            Err(f) => {
                self.record_mmu_fault(n, f, source_id);
                Err(f)
            }
        }
    }

    /// Records `fault` in address space `n` (first fault wins until its bit is cleared).
    fn record_mmu_fault(&mut self, n: usize, f: Fault, source_id: u16) {
        let Some(a) = self.address_spaces[..self.num_as].get_mut(n) else {
            return;
        };
        let bit = 1u32 << n;
        if self.mmu_irq.rawstat & bit == 0 {
            a.faultstatus = f.faultstatus(source_id);
            a.faultaddress = f.va;
            a.faultextra = 0;
        }
        self.mmu_irq.raise(bit);
        if let FaultKind::TableBus { pa, .. } = f.kind {
            self.bus_error(0, None, BusErrorKind::UnbackedMemory { pa });
        }
    }

    /// A GPU access of `data.len()` bytes (within one page) by `source_id`.
    fn gpu_access(
        &mut self,
        n: usize,
        va: u64,
        data: Data<'_>,
        source_id: u16,
    ) -> Result<(), AccessError> {
        let (access, len) = match &data {
            Data::Read(b) => (AccessType::Read, b.len()),
            Data::Write(b) => (AccessType::Write, b.len()),
        };
        let t = self
            .translate_from(n, va, access, source_id)
            .map_err(AccessError::Mmu)?;
        // An access may not cross a page: each page translates separately.
        let res = if (va & 0xfff) as usize + len > 0x1000 {
            Err(SimError::BadAddress(t.pa))
        } else {
            match data {
                Data::Read(b) => self.mem.read_bytes(t.pa, b),
                Data::Write(b) => self.mem.write_bytes(t.pa, b),
            }
        };
        res.map_err(|_| {
            self.gpu_fault(n, t.pa, access);
            AccessError::Bus(t.pa)
        })
    }

    fn gpu_fault(&mut self, n: usize, pa: PhysAddr, access: AccessType) {
        if self.gpu_irq.rawstat & gpu_irq::FAULT == 0 {
            // Exception, access type, address valid, JASID valid, JASID.
            self.gpu_faultstatus =
                GPU_BUS_FAULT | (access as u32) << 8 | 1 << 10 | 1 << 11 | ((n as u32) & 0xf) << 12;
            self.gpu_faultaddress = pa.0;
        }
        self.gpu_irq.raise(gpu_irq::FAULT);
        self.bus_error(0, None, BusErrorKind::UnbackedMemory { pa });
    }

    /// Reads `buf.len()` bytes (within one 4 KiB page) at `va` of address space `n` as the
    /// GPU would.
    pub fn gpu_read(&mut self, n: usize, va: u64, buf: &mut [u8]) -> Result<(), AccessError> {
        self.gpu_access(n, va, Data::Read(buf), 0)
    }

    /// Writes `data` (within one 4 KiB page) at `va` of address space `n` as the GPU would.
    pub fn gpu_write(&mut self, n: usize, va: u64, data: &[u8]) -> Result<(), AccessError> {
        self.gpu_access(n, va, Data::Write(data), 0)
    }

    /// Atomically adds `v` to the 64-bit word at an 8-byte aligned `va` of address space `n`
    /// and returns the old value.
    pub fn gpu_atomic_add_u64(&mut self, n: usize, va: u64, v: u64) -> Result<u64, AccessError> {
        let t = self
            .translate_from(n, va, AccessType::Atomic, 0)
            .map_err(AccessError::Mmu)?;
        let res = if va.is_multiple_of(8) {
            self.mem.fetch_add_u64(t.pa, v)
        } else {
            Err(SimError::Misaligned(t.pa))
        };
        res.map_err(|_| {
            self.gpu_fault(n, t.pa, AccessType::Atomic);
            AccessError::Bus(t.pa)
        })
    }
}

/// The low or high half of a 64-bit value, by register offset (bit 2).
fn half(v: u64, offset: usize) -> u32 {
    if offset & 4 != 0 {
        (v >> 32) as u32
    } else {
        v as u32
    }
}

fn set_half(r: &mut u64, high: bool, v: u32) {
    if high {
        *r = (*r & 0xffff_ffff) | u64::from(v) << 32;
    } else {
        *r = (*r & !0xffff_ffff) | u64::from(v);
    }
}

/// The domain and direction of a `*_PWRON`/`*_PWROFF` register half.
fn power_request_reg(offset: usize) -> Option<(Domain, bool)> {
    Some(match offset & !4 {
        regs::SHADER_PWRON_LO => (Domain::Shader, true),
        regs::TILER_PWRON_LO => (Domain::Tiler, true),
        regs::L2_PWRON_LO => (Domain::L2, true),
        regs::SHADER_PWROFF_LO => (Domain::Shader, false),
        regs::TILER_PWROFF_LO => (Domain::Tiler, false),
        regs::L2_PWROFF_LO => (Domain::L2, false),
        _ => return None,
    })
}

fn doorbell_index(offset: usize) -> Option<usize> {
    let rel = offset.checked_sub(regs::DOORBELL_BASE)?;
    (rel % regs::DOORBELL_STRIDE == 0 && offset < regs::MMIO_SIZE)
        .then_some(rel / regs::DOORBELL_STRIDE)
}

#[cfg(all(test, feature = "std"))]
#[path = "gpu_tests.rs"]
mod tests;

/// The ticks of a `hz` clock in `ns` nanoseconds, `ns * hz / 10^9` rounded down (modulo
/// 2^64), computed without a 128-bit division: the kernel provides no `__udivti3` on x86_64.
/// Whole seconds and the rest are scaled apart, and the rest's product is split at a whole
/// number of gigahertz so that no intermediate overflows.
fn ticks_in(ns: u64, hz: u64) -> u64 {
    const NS: u64 = 1_000_000_000;
    let (secs, rest) = (ns / NS, ns % NS);
    // `rest < 10^9` and `hz % NS < 10^9`: the last product is below 10^18.
    secs.wrapping_mul(hz)
        .wrapping_add(rest.wrapping_mul(hz / NS))
        .wrapping_add(rest * (hz % NS) / NS)
}

#[cfg(test)]
mod ticks_tests {
    use super::ticks_in;

    /// The 128-bit formula the simulator used before: the reference.
    fn by_u128(ns: u64, hz: u64) -> u64 {
        (u128::from(ns) * u128::from(hz) / 1_000_000_000) as u64
    }

    #[test]
    fn ticks_match_the_128_bit_formula() {
        let values = [
            0,
            1,
            999_999_999,
            1_000_000_000,
            1_000_000_001,
            24_000_000,
            1_000_000_000_000,
            u64::MAX / 3,
            u64::MAX - 1,
            u64::MAX,
        ];
        for &ns in &values {
            for &hz in &values {
                assert_eq!(ticks_in(ns, hz), by_u128(ns, hz), "ns {ns}, hz {hz}");
            }
        }
        // A pseudo-random sweep.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (ns, hz) = (x, x.rotate_left(29) >> (x % 40));
            assert_eq!(ticks_in(ns, hz), by_u128(ns, hz), "ns {ns}, hz {hz}");
        }
    }
}
