// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The simulated MCU firmware and command-stream engine (see [`crate::csf`]).
//!
//! # Stack use
//!
//! On silicon the firmware runs on the MCU. The simulator runs it on whatever thread steps
//! simulated time: in the kernel build that is the driver's own thread, a probe or an ioctl
//! sleeping in a register poll, whose stack is 16 KiB on arm64 and x86_64, with the driver's
//! frames and the kernel's below it. So the firmware's request handlers and the stream engine
//! keep their frames apart (`#[inline(never)]` on each, so that only one of them is on the stack
//! at a time, not all of them inlined into one frame), and a stream is reset in place
//! ([`Stream::clear`]) rather than from a stream-sized temporary. `cargo xtask kernel-build`
//! checks every frame of the crates against a bound (its `frames` step).

use pin_init::{init, init_array_from_fn};

use super::{AccessError, Data, Gpu};
use ::csf::{
    ExceptionType, FlushMode, Instr, OtherFlushMode, Reg, Reg64, Slot, SlotMask, SyncOp, SyncScope,
    WaitCondition,
};

use crate::csf::{self, cs, csg, exception, glb, heap, ring, suspend};
use crate::list::FixedList;
use crate::mem::PhysMemory;
use crate::regs::{gpu_irq, mcu};
use crate::walk::{AccessType, Fault, FaultKind};

mod sb;

use crate::csf::SCOREBOARDS;
use sb::{Deferred, Scoreboard};

/// Instructions a stream executes per engine step.
const BATCH: usize = 16;
/// `JOB_IRQ` bit of the global interface.
const JOB_IRQ_GLB: u32 = 1 << 31;

/// The MCU could not reach the shared interface region.
#[derive(Clone, Copy, Debug)]
pub(super) struct McuFault;

/// Why a stream is not executing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum StreamStatus {
    /// Runs when it has work.
    #[default]
    Ready,
    /// Waiting on a sync object.
    Blocked,
    /// Stopped by a fault.
    Faulted,
    /// Stopped by a fatal error.
    Fatal,
    /// Waiting for the driver's answer to a `TILER_OOM` event.
    TilerOom,
}

/// A `RUN_IDVS` under way: where it writes next, kept across stalls and `TILER_OOM`s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TilerRun {
    /// Link of the chunk in use (0: the heap has not been used yet).
    link: u64,
    /// GPU address of the next free byte in it.
    top: u64,
    /// Entries written so far.
    done: u32,
    /// Link of the heap's first chunk, read from the tiler context's heap descriptor when the
    /// heap is unused (0 otherwise).
    first: u64,
}

/// `REQ_RESOURCE` bit: compute.
const RES_COMPUTE: u8 = 1 << 0;
/// `REQ_RESOURCE` bit: fragment.
const RES_FRAGMENT: u8 = 1 << 1;
/// `REQ_RESOURCE` bit: tiler.
const RES_TILER: u8 = 1 << 2;
/// `REQ_RESOURCE` bit: IDVS (vertex shading and tiling).
const RES_IDVS: u8 = 1 << 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    pc: u64,
    end: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Stream {
    started: bool,
    pub(super) status: StreamStatus,
    regs: [u32; csf::NUM_REGS],
    stack: FixedList<Frame, { csf::MAX_CALL_DEPTH }>,
    pub(super) hang: bool,
    pub(super) inject_fault: bool,
    pub(super) executed: u64,
    /// Priority from the stream's `CONFIG` (15 highest), read at start and at resume.
    priority: u8,
    /// GPU address of the heap context (`HEAP_SET`; 0: none).
    heap_ctx: u64,
    /// The `RUN_IDVS` in progress.
    tiler: Option<TilerRun>,
    /// The driver's answer to the last `TILER_OOM` (`HEAP_START`), not yet used.
    oom_answer: Option<u64>,
    /// Operations issued and not yet finished, and the entries they signal.
    sb: Scoreboard,
    /// The progress counter (`PROGRESS_*`, and work issued with "progress increment").
    progress: u64,
    /// The error state: set by a sync wait that inherits an object's error, cleared by
    /// `ERROR_BARRIER`; sync operations that propagate errors write it into their object.
    error: bool,
    /// Endpoints claimed with `REQ_RESOURCE` (bit 0 compute, 1 fragment, 2 tiler, 3 IDVS).
    resources: u8,
    /// The tiler out-of-memory handler (`SET_EXCEPTION_HANDLER`): address and length.
    handler: Option<(u64, u32)>,
}

impl Default for Stream {
    fn default() -> Self {
        Stream {
            started: false,
            status: StreamStatus::Ready,
            regs: [0; csf::NUM_REGS],
            stack: FixedList::new(),
            hang: false,
            inject_fault: false,
            executed: 0,
            priority: 0,
            heap_ctx: 0,
            tiler: None,
            oom_answer: None,
            sb: Scoreboard::default(),
            progress: 0,
            error: false,
            resources: 0,
            handler: None,
        }
    }
}

impl Stream {
    /// Makes the stream what [`Stream::default`] is, in place: no stream-sized temporary on
    /// the stack (the simulator runs on the caller's stack, a kernel thread's 16 KiB in the
    /// kernel build). The slot's injected faults (`hang`, `inject_fault`) are kept; callers
    /// that drop them say so.
    fn clear(&mut self) {
        // Naming every field makes adding one without clearing it a compile error.
        let Stream {
            started,
            status,
            regs,
            stack,
            hang: _,
            inject_fault: _,
            executed,
            priority,
            heap_ctx,
            tiler,
            oom_answer,
            sb,
            progress,
            error,
            resources,
            handler,
        } = self;
        *started = false;
        *status = StreamStatus::Ready;
        regs.fill(0);
        stack.clear();
        *executed = 0;
        *priority = 0;
        *heap_ctx = 0;
        *tiler = None;
        *oom_answer = None;
        sb.reset();
        *progress = 0;
        *error = false;
        *resources = 0;
        *handler = None;
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Group {
    running: bool,
    busy: bool,
    /// Priority from `ENDPOINT_REQ` (15 highest), read at start, resume and `ENDPOINT_CONFIG`.
    priority: u8,
    /// Injected: the state requests (a bit per `STATE_*` value) the firmware never does nor
    /// acknowledges for this slot, see [`Gpu::set_csg_ignores`].
    ignores: u8,
    pub(super) streams: [Stream; csf::STREAMS_PER_CSG],
}

/// Firmware and engine state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Csf {
    pub(super) booted: bool,
    pub(super) deadline: Option<u64>,
    /// The slot that goes first among groups of equal priority in the next engine step.
    rr: usize,
    pub(super) groups: [Group; csf::NUM_CSGS],
    /// A finishing operation wrote a sync object in this engine step.
    synced: bool,
    /// Doorbells the firmware has noticed and not served yet, with when it serves them: entry
    /// 0 the global interface's, entry `1 + n` CSG slot `n`'s. A doorbell rung again before
    /// its entry is served adds nothing: the firmware reads the request words when it serves
    /// them, so it sees the latest ones.
    fw_due: [Option<u64>; FW_QUEUE],
    /// State of the generator of the firmware's latency jitter (not firmware state: a reset
    /// keeps it).
    rng: u64,
}

/// Entries of [`Csf::fw_due`]: the global interface and every CSG slot.
const FW_QUEUE: usize = 1 + csf::NUM_CSGS;

impl Group {
    /// A stopped group, initialised in place (one stream at a time on the stack).
    fn init() -> impl pin_init::Init<Self> {
        init!(Self {
            running: false,
            busy: false,
            priority: 0,
            ignores: 0,
            streams <- init_array_from_fn(|_| Stream::default()),
        })
    }
}

impl Csf {
    /// Firmware and engine state out of reset, initialised in place.
    pub(super) fn init(seed: u64) -> impl pin_init::Init<Self> {
        init!(Self {
            booted: false,
            deadline: None,
            rr: 0,
            groups <- init_array_from_fn(|_| Group::init()),
            synced: false,
            fw_due: [None; FW_QUEUE],
            rng: seed,
        })
    }

    /// Resets the state as a GPU reset does, in place.
    /// Forgets the firmware's state: on a GPU reset (`keep_injected` false) and when the MCU is
    /// disabled (a cold boot follows; `keep_injected` true). The faults a test injected into a
    /// slot's streams ([`Gpu::set_stream_hang`], [`Gpu::inject_stream_access_fault`]) and groups
    /// ([`Gpu::set_csg_ignores`]) stand for the scenario, not for firmware state: an
    /// idle power cycle keeps them, a reset clears them.
    pub(super) fn reset(&mut self, keep_injected: bool) {
        // Naming every field makes adding one without resetting it a compile error.
        let Csf {
            booted,
            deadline,
            rr,
            groups,
            synced,
            fw_due,
            rng: _,
        } = self;
        *booted = false;
        *deadline = None;
        *rr = 0;
        *synced = false;
        // Requests the firmware had not served are lost with it.
        *fw_due = [None; FW_QUEUE];
        for g in groups {
            let Group {
                running,
                busy,
                priority,
                ignores,
                streams,
            } = g;
            *running = false;
            *busy = false;
            *priority = 0;
            if !keep_injected {
                *ignores = 0;
            }
            for st in streams {
                st.clear();
                if !keep_injected {
                    (st.hang, st.inject_fault) = (false, false);
                }
            }
        }
    }
}

/// What an instruction asks the engine to do next.
#[derive(Clone, Copy)]
enum Step {
    Next,
    /// The access falls in a locked region: retry after the unlock.
    Stall,
    Block {
        addr: u64,
        value: u64,
        /// `CS_STATUS_WAIT`'s condition and width bits for this wait.
        status: u32,
    },
    Call {
        addr: u64,
        len: u64,
    },
    /// Run the `len` bytes at `addr` instead of the rest of the current buffer.
    Jump {
        addr: u64,
        len: u64,
    },
    /// Go on `offset` instructions after the next one.
    Branch {
        offset: i16,
    },
    /// Waiting for the scoreboard slots of `mask` to drain.
    WaitSb {
        mask: u16,
    },
    /// Waiting for another stream's progress counter.
    WaitProgress,
    /// Call the exception handler at `addr`, then run the current instruction again.
    Exception {
        addr: u64,
        len: u64,
    },
    /// The MCU lost its interface memory.
    McuFault,
    Fault {
        code: u8,
        va: u64,
    },
    Fatal {
        code: u8,
    },
    /// The stream's queue of issued operations is full: retry once one finishes.
    Full,
    /// The heap whose context is at `ctx` has no chunk left: raise `TILER_OOM`.
    TilerOom {
        ctx: u64,
        vt_start: u32,
        vt_end: u32,
        frag_end: u32,
    },
}

fn shared(off: u64) -> u64 {
    csf::SHARED_REGION_VA + off
}

impl<M: PhysMemory> Gpu<M> {
    // ------------------------------------------------------------ MCU memory

    fn mcu_read(&mut self, va: u64, buf: &mut [u8]) -> Result<(), McuFault> {
        self.gpu_read(0, va, buf).map_err(|_| McuFault)
    }

    fn mcu_write(&mut self, va: u64, data: &[u8]) -> Result<(), McuFault> {
        self.gpu_write(0, va, data).map_err(|_| McuFault)
    }

    fn mcu_rd32(&mut self, va: u64) -> Result<u32, McuFault> {
        let mut b = [0; 4];
        self.mcu_read(va, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    fn mcu_wr32(&mut self, va: u64, v: u32) -> Result<(), McuFault> {
        self.mcu_write(va, &v.to_le_bytes())
    }

    fn mcu_rd64(&mut self, va: u64) -> Result<u64, McuFault> {
        let mut b = [0; 8];
        self.mcu_read(va, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn mcu_wr64(&mut self, va: u64, v: u64) -> Result<(), McuFault> {
        self.mcu_write(va, &v.to_le_bytes())
    }

    fn mcu_crash(&mut self) {
        self.csf.booted = false;
        self.csf.deadline = None;
        self.csf.fw_due = [None; FW_QUEUE];
        self.mcu_status = mcu::FATAL;
        self.gpu_irq.raise(gpu_irq::MCU_STATUS_CHANGED);
    }

    // ------------------------------------------------------------ boot

    /// Called when the MCU finishes starting: publishes the interface blocks.
    // Own frame, not the caller's: see "Stack use" in the module docs.
    #[inline(never)]
    pub(super) fn mcu_boot(&mut self) {
        // The MCU first checks the image it was given is in place (see `crate::firmware`).
        if self.check_firmware().is_err() {
            self.mcu_crash();
            return;
        }
        match self.publish_interfaces() {
            Ok(()) => {
                self.csf.booted = true;
                self.mcu_status = mcu::ENABLED;
                self.gpu_irq.raise(gpu_irq::MCU_STATUS_CHANGED);
                self.job_irq.raise(JOB_IRQ_GLB);
            }
            Err(McuFault) => self.mcu_crash(),
        }
    }

    fn publish_interfaces(&mut self) -> Result<(), McuFault> {
        let g = shared(csf::GLB_CONTROL);
        self.mcu_wr32(g + glb::VERSION, csf::IFACE_VERSION)?;
        self.mcu_wr32(g + glb::FEATURES, 0)?;
        self.mcu_wr32(g + glb::INPUT_VA, shared(csf::GLB_INPUT) as u32)?;
        self.mcu_wr32(g + glb::OUTPUT_VA, shared(csf::GLB_OUTPUT) as u32)?;
        self.mcu_wr32(g + glb::GROUP_NUM, csf::NUM_CSGS as u32)?;
        self.mcu_wr32(g + glb::GROUP_STRIDE, csf::GROUP_STRIDE as u32)?;
        self.mcu_wr32(g + glb::PERFCNT_SIZE, 0)?;
        self.mcu_wr32(g + glb::INSTR_FEATURES, 0)?;
        for n in 0..csf::NUM_CSGS {
            let c = shared(csf::csg_control(n));
            self.mcu_wr32(c + csg::FEATURES, 0)?;
            self.mcu_wr32(c + csg::INPUT_VA, shared(csf::csg_input(n)) as u32)?;
            self.mcu_wr32(c + csg::OUTPUT_VA, shared(csf::csg_output(n)) as u32)?;
            self.mcu_wr32(c + csg::SUSPEND_SIZE, suspend::SIZE as u32)?;
            self.mcu_wr32(c + csg::PROTM_SUSPEND_SIZE, 0x1000)?;
            self.mcu_wr32(c + csg::STREAM_NUM, csf::STREAMS_PER_CSG as u32)?;
            self.mcu_wr32(c + csg::STREAM_STRIDE, csf::STREAM_STRIDE as u32)?;
            for s in 0..csf::STREAMS_PER_CSG {
                let sc = shared(csf::cs_control(n, s));
                self.mcu_wr32(sc + cs::FEATURES, cs::FEATURES_VALUE)?;
                self.mcu_wr32(sc + cs::INPUT_VA, shared(csf::cs_input(n, s)) as u32)?;
                self.mcu_wr32(sc + cs::OUTPUT_VA, shared(csf::cs_output(n, s)) as u32)?;
                // A freshly booted firmware has acknowledged nothing: every stream stopped.
                self.mcu_wr32(shared(csf::cs_output(n, s)) + cs::ACK, 0)?;
            }
            let out = shared(csf::csg_output(n));
            for off in [csg::ACK, csg::DOORBELL_ACK, csg::CS_IRQ_REQ] {
                self.mcu_wr32(out + off, 0)?;
            }
        }
        let out = shared(csf::GLB_OUTPUT);
        self.mcu_wr32(out + glb::ACK, 0)?;
        self.mcu_wr32(out + glb::DOORBELL_ACK, 0)?;
        Ok(())
    }

    // ------------------------------------------------------------ doorbells

    /// Handles a ring of doorbell `n`.
    pub(super) fn csf_doorbell(&mut self, n: usize) {
        if !self.csf.booted || self.mcu_status != mcu::ENABLED {
            return;
        }
        if n == 0 {
            // The firmware gets to the global interface's requests later.
            self.fw_queue(0);
        } else {
            // A user doorbell: wake every stream (the engine re-reads insert pointers).
            self.kick_engine();
        }
    }

    /// The firmware's latency for one request: [`fw_ack_ns`](crate::Timings::fw_ack_ns) plus
    /// a draw of up to [`fw_ack_jitter_ns`](crate::Timings::fw_ack_jitter_ns) (splitmix64).
    fn fw_latency(&mut self) -> u64 {
        let t = &self.cfg.timings;
        let (base, jitter) = (t.fw_ack_ns, t.fw_ack_jitter_ns);
        if jitter == 0 {
            return base;
        }
        self.csf.rng = self.csf.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.csf.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        base.saturating_add(z % jitter.saturating_add(1).max(1))
    }

    /// Has the firmware notice a doorbell of entry `k` of [`Csf::fw_due`] (0: global, `1 + n`:
    /// CSG slot `n`): it serves it after [`fw_latency`](Self::fw_latency), or at once if that
    /// is 0. An entry already waiting keeps its time.
    fn fw_queue(&mut self, k: usize) {
        if k >= FW_QUEUE || self.csf.fw_due[k].is_some() {
            return;
        }
        match self.fw_latency() {
            0 => self.fw_serve(k),
            d => self.csf.fw_due[k] = self.after(d),
        }
    }

    /// Serves entry `k` of [`Csf::fw_due`]: reads the request words, does what they ask and
    /// acknowledges. A firmware that stopped (halted, disabled, crashed) serves nothing.
    fn fw_serve(&mut self, k: usize) {
        if !self.csf.booted || self.mcu_status != mcu::ENABLED {
            return;
        }
        let served = match k {
            0 => self.glb_doorbell(),
            k => self.csg_request(k - 1),
        };
        if served.is_err() {
            self.mcu_crash();
        }
    }

    /// When the firmware serves its next request, if one is waiting.
    pub(super) fn fw_next_event(&self) -> Option<u64> {
        self.csf.fw_due.iter().flatten().copied().min()
    }

    /// Serves every request that is due, the earliest first (entries due at the same time in
    /// the order of [`Csf::fw_due`]).
    // Own frame, not the caller's: see "Stack use" in the module docs.
    #[inline(never)]
    pub(super) fn fire_fw(&mut self) {
        loop {
            let now = self.now;
            let next = (0..FW_QUEUE)
                .filter_map(|k| self.csf.fw_due[k].filter(|&t| t <= now).map(|t| (t, k)))
                .min();
            let Some((_, k)) = next else {
                return;
            };
            self.csf.fw_due[k] = None;
            self.fw_serve(k);
        }
    }

    /// Requests rung through a doorbell that the firmware has not served yet: bit 0 for the
    /// global interface, bit `1 + n` for CSG slot `n`.
    pub fn fw_requests_pending(&self) -> u32 {
        (0..FW_QUEUE)
            .filter(|&k| self.csf.fw_due[k].is_some())
            .fold(0, |m, k| m | 1 << k)
    }

    // Own frame, not the caller's: see "Stack use" in the module docs.
    #[inline(never)]
    fn glb_doorbell(&mut self) -> Result<(), McuFault> {
        let (input, output) = (shared(csf::GLB_INPUT), shared(csf::GLB_OUTPUT));
        let req = self.mcu_rd32(input + glb::REQ)?;
        let ack = self.mcu_rd32(output + glb::ACK)?;
        let changed = (req ^ ack) & glb::REQ_MASK;
        if changed != 0 {
            let new_ack = (ack & !changed) | (req & changed);
            self.mcu_wr32(output + glb::ACK, new_ack)?;
            // COUNTER_EN is a level: streams see the counters while it reads acknowledged set.
            self.counters_enabled = new_ack & glb::REQ_COUNTER_EN != 0;
            let irq_mask = self.mcu_rd32(input + glb::ACK_IRQ_MASK)?;
            if changed & irq_mask != 0 {
                self.job_irq.raise(JOB_IRQ_GLB);
            }
            if changed & glb::REQ_HALT != 0 && req & glb::REQ_HALT != 0 {
                self.mcu_wr32(output + glb::HALT_STATUS, 0)?;
                self.mcu_status = mcu::HALT;
                self.csf.deadline = None;
                // A halted firmware serves nothing more.
                self.csf.fw_due = [None; FW_QUEUE];
                self.gpu_irq.raise(gpu_irq::MCU_STATUS_CHANGED);
                return Ok(());
            }
        }
        let db_req = self.mcu_rd32(input + glb::DOORBELL_REQ)?;
        let db_ack = self.mcu_rd32(output + glb::DOORBELL_ACK)?;
        let pending = (db_req ^ db_ack) & ((1 << csf::NUM_CSGS) - 1);
        if pending != 0 {
            // The doorbells are taken; each slot's requests are served in their own time.
            self.mcu_wr32(output + glb::DOORBELL_ACK, db_ack ^ pending)?;
            for n in 0..csf::NUM_CSGS {
                if pending & (1 << n) != 0 {
                    self.fw_queue(1 + n);
                    if !self.csf.booted {
                        // Served at once, it crashed the MCU: nothing more to do.
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    // Own frame, not the caller's: see "Stack use" in the module docs.
    #[inline(never)]
    fn csg_request(&mut self, n: usize) -> Result<(), McuFault> {
        let (input, output) = (shared(csf::csg_input(n)), shared(csf::csg_output(n)));
        let req = self.mcu_rd32(input + csg::REQ)?;
        let ack = self.mcu_rd32(output + csg::ACK)?;
        let mut changed = (req ^ ack) & csg::REQ_MASK;
        if changed & csg::STATE_MASK != 0
            && self.csf.groups[n].ignores & (1 << (req & csg::STATE_MASK)) != 0
        {
            // Neither done nor acknowledged: the request stays pending.
            changed &= !csg::STATE_MASK;
        }
        if changed & (csg::STATE_MASK | csg::ENDPOINT_CONFIG) != 0 {
            let ep = self.mcu_rd32(input + csg::ENDPOINT_REQ)?;
            self.csf.groups[n].priority = (ep >> csg::EP_PRIORITY_SHIFT) as u8 & 0xf;
        }
        if changed & csg::STATE_MASK != 0 {
            let group = &mut self.csf.groups[n];
            match req & csg::STATE_MASK {
                csg::STATE_START => group.running = true,
                csg::STATE_RESUME => {
                    self.resume_group(n)?;
                    self.csf.groups[n].running = true;
                }
                csg::STATE_SUSPEND => self.suspend_group(n)?,
                csg::STATE_TERMINATE => {
                    group.running = false;
                    group.busy = false;
                    for s in &mut group.streams {
                        s.clear();
                        s.inject_fault = false;
                    }
                    // Terminating a group stops its streams: their state reads STOP again.
                    self.stop_streams_ack(n)?;
                }
                _ => group.running = false,
            }
        }
        if changed & (csg::STATUS_UPDATE | csg::STATE_MASK) != 0 {
            let idle = !self.csf.groups[n].busy;
            self.mcu_wr32(output + csg::STATUS_STATE, u32::from(idle))?;
        }
        if changed != 0 {
            // Events raised while the request ran (a suspend lets sync operations finish) are
            // in `ACK` by now: only the requested bits change.
            let ack = self.mcu_rd32(output + csg::ACK)?;
            self.mcu_wr32(output + csg::ACK, (ack & !changed) | (req & changed))?;
            let irq_mask = self.mcu_rd32(input + csg::ACK_IRQ_MASK)?;
            if changed & irq_mask != 0 {
                self.job_irq.raise(1 << n);
            }
        }
        let db_req = self.mcu_rd32(input + csg::DOORBELL_REQ)?;
        let db_ack = self.mcu_rd32(output + csg::DOORBELL_ACK)?;
        let pending = (db_req ^ db_ack) & ((1 << csf::STREAMS_PER_CSG) - 1);
        if pending != 0 {
            for s in 0..csf::STREAMS_PER_CSG {
                if pending & (1 << s) != 0 {
                    self.cs_request(n, s)?;
                }
            }
            self.mcu_wr32(output + csg::DOORBELL_ACK, db_ack ^ pending)?;
        }
        self.kick_engine();
        Ok(())
    }

    /// `STATE_SUSPEND` of CSG `n`: saves every stream into the suspend buffer (see
    /// [`suspend`]), then stops the group and its streams. Streams only change state between
    /// two instructions, so the saved state is always at an instruction boundary; an
    /// instruction that was waiting (a sync wait, a stall, a `TILER_OOM`) runs again on resume.
    // Own frame, not the caller's: see "Stack use" in the module docs.
    #[inline(never)]
    fn suspend_group(&mut self, n: usize) -> Result<(), McuFault> {
        let buf = self.mcu_rd64(shared(csf::csg_input(n)) + csg::SUSPEND_BUF)?;
        let as_nr = (self.mcu_rd32(shared(csf::csg_input(n)) + csg::CONFIG)? & 0xf) as usize;
        for s in 0..csf::STREAMS_PER_CSG {
            // Work in flight finishes before the state is saved (see `sb`); an operation whose
            // access faults then is dropped.
            if !self.csf.groups[n].streams[s].sb.is_idle() {
                match self.sb_advance(n, s, as_nr, u64::MAX, true) {
                    Err(Step::McuFault) => return Err(McuFault),
                    Ok(()) | Err(_) => self.csf.groups[n].streams[s].sb.clear(),
                }
            }
            let ring_out = self.mcu_rd64(shared(csf::cs_input(n, s)) + cs::RINGBUF_OUTPUT)?;
            let st = &self.csf.groups[n].streams[s];
            let extract = if st.started {
                self.mcu_rd64(ring_out + ring::EXTRACT)?
            } else {
                0
            };
            let rec = save_stream(&self.csf.groups[n].streams[s], extract);
            let at = buf.wrapping_add(s as u64 * suspend::STREAM_RECORD);
            self.mcu_write(at, &rec)?;
        }
        let group = &mut self.csf.groups[n];
        group.running = false;
        group.busy = false;
        for st in &mut group.streams {
            st.clear();
            st.inject_fault = false;
        }
        self.stop_streams_ack(n)
    }

    /// `STATE_RESUME` of CSG `n`: reloads every stream from the suspend buffer. A stream the
    /// driver asks to start (`CS_REQ` state `START`, as it programs a slot) finds its request
    /// already acknowledged, so that starting does not wipe what was restored.
    // Own frame, not the caller's: see "Stack use" in the module docs.
    #[inline(never)]
    fn resume_group(&mut self, n: usize) -> Result<(), McuFault> {
        let buf = self.mcu_rd64(shared(csf::csg_input(n)) + csg::SUSPEND_BUF)?;
        for s in 0..csf::STREAMS_PER_CSG {
            let mut rec = [0u8; suspend::USED as usize];
            let at = buf.wrapping_add(s as u64 * suspend::STREAM_RECORD);
            self.mcu_read(at, &mut rec)?;
            let input = shared(csf::cs_input(n, s));
            let config = self.mcu_rd32(input + cs::CONFIG)?;
            let st = &mut self.csf.groups[n].streams[s];
            let extract = load_stream(&rec, st);
            let started = st.started;
            st.priority = (config & cs::CONFIG_PRIORITY_MASK) as u8;
            let out = shared(csf::cs_output(n, s));
            // The suspend let everything in flight finish: no entry is busy.
            self.mcu_wr32(out + cs::STATUS_SCOREBOARDS, 0)?;
            let req = self.mcu_rd32(input + cs::REQ)?;
            let ack = self.mcu_rd32(out + cs::ACK)?;
            if started && req & cs::STATE_MASK == cs::STATE_START {
                let ring_out = self.mcu_rd64(input + cs::RINGBUF_OUTPUT)?;
                self.mcu_wr64(ring_out + ring::EXTRACT, extract)?;
                self.mcu_wr32(out + cs::ACK, (ack & !cs::STATE_MASK) | cs::STATE_START)?;
            } else {
                self.csf.groups[n].streams[s].started = false;
            }
        }
        Ok(())
    }

    /// Makes the state of every stream of CSG `n` read `STOP` (the group no longer runs them).
    fn stop_streams_ack(&mut self, n: usize) -> Result<(), McuFault> {
        for s in 0..csf::STREAMS_PER_CSG {
            let out = shared(csf::cs_output(n, s));
            let ack = self.mcu_rd32(out + cs::ACK)?;
            self.mcu_wr32(out + cs::ACK, ack & !cs::STATE_MASK)?;
        }
        Ok(())
    }

    fn cs_request(&mut self, n: usize, s: usize) -> Result<(), McuFault> {
        let (input, output) = (shared(csf::cs_input(n, s)), shared(csf::cs_output(n, s)));
        let req = self.mcu_rd32(input + cs::REQ)?;
        let ack = self.mcu_rd32(output + cs::ACK)?;
        let changed = (req ^ ack) & cs::REQ_MASK;
        if changed & cs::STATE_MASK != 0 {
            let config = self.mcu_rd32(input + cs::CONFIG)?;
            let stream = &mut self.csf.groups[n].streams[s];
            stream.clear();
            stream.inject_fault = false;
            stream.started = req & cs::STATE_MASK == cs::STATE_START;
            stream.priority = (config & cs::CONFIG_PRIORITY_MASK) as u8;
            self.mcu_wr32(output + cs::FAULT, 0)?;
            self.mcu_wr32(output + cs::FATAL, 0)?;
            // Nothing of the stream's is in flight any more.
            self.mcu_wr32(output + cs::STATUS_SCOREBOARDS, 0)?;
        }
        // The driver acknowledged a `TILER_OOM`: its answer lets the stream go on.
        let stream = &self.csf.groups[n].streams[s];
        if stream.status == StreamStatus::TilerOom && (req ^ ack) & cs::TILER_OOM == 0 {
            let start = self.mcu_rd64(input + cs::HEAP_START)?;
            let stream = &mut self.csf.groups[n].streams[s];
            stream.oom_answer = Some(start);
            stream.status = StreamStatus::Ready;
        }
        if changed != 0 {
            self.mcu_wr32(output + cs::ACK, (ack & !changed) | (req & changed))?;
            let irq_mask = self.mcu_rd32(input + cs::ACK_IRQ_MASK)?;
            if changed & irq_mask != 0 {
                self.cs_irq(n, s)?;
            }
        }
        Ok(())
    }

    /// Toggles CSG `n`'s `CS_IRQ_REQ` bit for stream `s` and raises the group's interrupt.
    fn cs_irq(&mut self, n: usize, s: usize) -> Result<(), McuFault> {
        let output = shared(csf::csg_output(n));
        let irq_req = self.mcu_rd32(output + csg::CS_IRQ_REQ)?;
        let irq_ack = self.mcu_rd32(shared(csf::csg_input(n)) + csg::CS_IRQ_ACK)?;
        if (irq_req ^ irq_ack) & (1 << s) == 0 {
            self.mcu_wr32(output + csg::CS_IRQ_REQ, irq_req ^ (1 << s))?;
        }
        self.job_irq.raise(1 << n);
        Ok(())
    }

    /// Raises firmware event `bit` in CSG `n`'s `ACK` (unless already pending).
    fn csg_event(&mut self, n: usize, bit: u32) -> Result<(), McuFault> {
        let (input, output) = (shared(csf::csg_input(n)), shared(csf::csg_output(n)));
        let req = self.mcu_rd32(input + csg::REQ)?;
        let ack = self.mcu_rd32(output + csg::ACK)?;
        if (req ^ ack) & bit == 0 {
            self.mcu_wr32(output + csg::ACK, ack ^ bit)?;
        }
        if self.mcu_rd32(input + csg::ACK_IRQ_MASK)? & bit != 0 {
            self.job_irq.raise(1 << n);
        }
        Ok(())
    }

    /// Raises CS event `bit` (fault or fatal) for stream `s` of CSG `n`.
    fn cs_event(&mut self, n: usize, s: usize, bit: u32) -> Result<(), McuFault> {
        let (input, output) = (shared(csf::cs_input(n, s)), shared(csf::cs_output(n, s)));
        let req = self.mcu_rd32(input + cs::REQ)?;
        let ack = self.mcu_rd32(output + cs::ACK)?;
        if (req ^ ack) & bit == 0 {
            self.mcu_wr32(output + cs::ACK, ack ^ bit)?;
        }
        self.cs_irq(n, s)
    }

    // ------------------------------------------------------------ inspection, injection

    /// Whether the simulated firmware has booted (and not crashed or been reset since).
    pub fn csf_booted(&self) -> bool {
        self.csf.booted
    }

    /// Makes stream `s` of CSG slot `n` hang: once started it stays busy and executes
    /// nothing until the GPU is reset (or `hang` is cleared); disabling the MCU keeps it.
    /// Out-of-range indices are ignored.
    pub fn set_stream_hang(&mut self, n: usize, s: usize, hang: bool) {
        if let Some(st) = self
            .csf
            .groups
            .get_mut(n)
            .and_then(|g| g.streams.get_mut(s))
        {
            st.hang = hang;
        }
        if !hang {
            self.kick_engine();
        }
    }

    /// Makes the firmware ignore (`on`) the requests for `state` (a `csg::STATE_*` value) of
    /// CSG slot `n`: the group stays as it was and the request is never acknowledged, as with
    /// a firmware stuck on that slot. A GPU reset clears it; disabling the MCU keeps it.
    /// Out-of-range slots and states are ignored.
    pub fn set_csg_ignores(&mut self, n: usize, state: u32, on: bool) {
        if let Some(g) = self
            .csf
            .groups
            .get_mut(n)
            .filter(|_| state <= csg::STATE_MASK)
        {
            if on {
                g.ignores |= 1 << state;
            } else {
                g.ignores &= !(1 << state);
            }
        }
    }

    /// Makes the next memory access of stream `s` of CSG slot `n` fault as if its address
    /// were unmapped (a level-3 translation fault, recorded in the group's address space).
    pub fn inject_stream_access_fault(&mut self, n: usize, s: usize) {
        if let Some(st) = self
            .csf
            .groups
            .get_mut(n)
            .and_then(|g| g.streams.get_mut(s))
        {
            st.inject_fault = true;
        }
    }

    /// Sync objects written so far while work the same stream had issued before them was still
    /// in flight: a stream that signals without waiting for its work (see [`crate::csf`]'s
    /// scoreboards) signals early, and this counts it. Kept across resets.
    pub fn early_signals(&self) -> u64 {
        self.tallies.0
    }

    /// Instructions executed by stream `s` of CSG slot `n` since it was last started.
    pub fn stream_instructions(&self, n: usize, s: usize) -> u64 {
        self.csf
            .groups
            .get(n)
            .and_then(|g| g.streams.get(s))
            .map_or(0, |st| st.executed)
    }

    /// Whether stream `s` of CSG slot `n` is stopped by a fault or a fatal error.
    pub fn stream_faulted(&self, n: usize, s: usize) -> bool {
        self.csf
            .groups
            .get(n)
            .and_then(|g| g.streams.get(s))
            .is_some_and(|st| matches!(st.status, StreamStatus::Faulted | StreamStatus::Fatal))
    }

    /// Whether stream `s` of CSG slot `n` is stalled on a `TILER_OOM` the driver has not
    /// answered yet.
    pub fn stream_waits_for_heap(&self, n: usize, s: usize) -> bool {
        self.csf
            .groups
            .get(n)
            .and_then(|g| g.streams.get(s))
            .is_some_and(|st| st.status == StreamStatus::TilerOom)
    }

    // ------------------------------------------------------------ engine

    pub(super) fn kick_engine(&mut self) {
        if self.csf.booted {
            // A step due sooner (one already scheduled) stays; a poll of blocked streams
            // further away (`Timings::sync_poll_ns`) is brought forward.
            let step = self.now.saturating_add(self.cfg.timings.cs_step_ns.max(1));
            self.csf.deadline = Some(self.csf.deadline.map_or(step, |d| d.min(step)));
        }
    }

    /// One engine step: every runnable stream executes up to [`BATCH`] instructions.
    // Own frame, not the caller's: see "Stack use" in the module docs.
    #[inline(never)]
    pub(super) fn run_streams(&mut self) {
        if !self.csf.booted || self.mcu_status != mcu::ENABLED {
            return;
        }
        self.csf.synced = false;
        let now = self.now;
        if self.advance_scoreboards(now).is_err() {
            self.mcu_crash();
            return;
        }
        let mut progressed = false;
        let mut synced = false;
        let mut blocked = false;
        let first = self.csf.rr;
        self.csf.rr = (first + 1) % csf::NUM_CSGS;
        // Priority levels from the highest down; a level runs only if none above it moved.
        let mut level = self
            .csf
            .groups
            .iter()
            .filter(|g| g.running)
            .map(|g| g.priority)
            .max();
        while let Some(p) = level {
            for k in 0..csf::NUM_CSGS {
                let n = (first + k) % csf::NUM_CSGS;
                let g = &self.csf.groups[n];
                if !g.running || g.priority != p {
                    continue;
                }
                match self.run_group(n) {
                    Ok(r) => {
                        progressed |= r.progressed;
                        synced |= r.synced;
                        blocked |= r.blocked;
                    }
                    Err(McuFault) => {
                        self.mcu_crash();
                        return;
                    }
                }
            }
            if progressed {
                break;
            }
            level = self
                .csf
                .groups
                .iter()
                .filter(|g| g.running && g.priority < p)
                .map(|g| g.priority)
                .max();
        }
        // What the step's instructions issued and is done before the step ends finishes now.
        let end = now.saturating_add(self.cfg.timings.cs_step_ns.max(1) - 1);
        let pending = match self.advance_scoreboards(end) {
            Ok(p) => p,
            Err(McuFault) => {
                self.mcu_crash();
                return;
            }
        };
        synced |= self.csf.synced;
        if self.report_scoreboards().is_err() {
            self.mcu_crash();
            return;
        }
        if progressed || pending || (synced && blocked) {
            self.kick_engine();
        } else if blocked {
            // Only memory can unblock the waits now, and the CPU writes it without telling
            // the GPU: look again in a poll interval (see `Timings::sync_poll_ns`).
            self.csf.deadline = self.after(self.cfg.timings.sync_poll_ns.max(1));
        }
    }

    /// Publishes, in each started stream's `CS_STATUS_SCOREBOARDS`, the entries with
    /// operations in flight (written only when it changed).
    fn report_scoreboards(&mut self) -> Result<(), McuFault> {
        for n in 0..csf::NUM_CSGS {
            if !self.csf.groups[n].running {
                continue;
            }
            for s in 0..csf::STREAMS_PER_CSG {
                let st = &self.csf.groups[n].streams[s];
                let mask = st.sb.mask();
                if !st.started || mask == st.sb.reported {
                    continue;
                }
                let at = shared(csf::cs_output(n, s)) + cs::STATUS_SCOREBOARDS;
                self.mcu_wr32(at, u32::from(mask))?;
                self.csf.groups[n].streams[s].sb.reported = mask;
            }
        }
        Ok(())
    }

    /// Starts and finishes (those due by `horizon`) the operations the streams of running groups
    /// have in flight, as their endpoints work whatever the streams do (see [`sb`]). Returns
    /// whether any is left in flight.
    fn advance_scoreboards(&mut self, horizon: u64) -> Result<bool, McuFault> {
        let mut left = false;
        for n in 0..csf::NUM_CSGS {
            if !self.csf.groups[n].running {
                continue;
            }
            let mut as_nr = None;
            for s in 0..csf::STREAMS_PER_CSG {
                let st = &self.csf.groups[n].streams[s];
                if !st.started || st.sb.is_idle() {
                    continue;
                }
                let as_nr = match as_nr {
                    Some(a) => a,
                    None => {
                        let cfg = self.mcu_rd32(shared(csf::csg_input(n)) + csg::CONFIG)?;
                        *as_nr.insert((cfg & 0xf) as usize)
                    }
                };
                match self.sb_advance(n, s, as_nr, horizon, false) {
                    Ok(()) | Err(Step::Stall) => {}
                    Err(Step::Fault { code, va }) => {
                        let st = &mut self.csf.groups[n].streams[s];
                        if !matches!(st.status, StreamStatus::Faulted | StreamStatus::Fatal) {
                            self.stream_fault(n, s, code, va)?;
                        }
                        // The operation that faulted is dropped with the rest.
                        self.csf.groups[n].streams[s].sb.clear();
                    }
                    Err(_) => return Err(McuFault),
                }
                left |= !self.csf.groups[n].streams[s].sb.is_idle();
            }
        }
        Ok(left)
    }

    /// Runs the streams of CSG `n` for one step, by priority as [`Gpu::run_streams`] runs the
    /// groups (a level runs only if no stream above it moved), and raises `IDLE` when the group
    /// goes idle. A stream left out because one above it moved does not change the group's
    /// busy state: the group is busy anyway.
    fn run_group(&mut self, n: usize) -> Result<RunResult, McuFault> {
        let mut all = RunResult::default();
        let mut group_busy = false;
        let streams = &self.csf.groups[n].streams;
        let mut level = streams.iter().map(|st| st.priority).max();
        while let Some(p) = level {
            let mut moved = false;
            for s in 0..csf::STREAMS_PER_CSG {
                if self.csf.groups[n].streams[s].priority != p {
                    continue;
                }
                let r = self.run_stream(n, s)?;
                moved |= r.progressed;
                all.progressed |= r.progressed;
                all.synced |= r.synced;
                all.blocked |= r.blocked;
                group_busy |= r.busy;
            }
            if moved {
                break;
            }
            let streams = &self.csf.groups[n].streams;
            level = streams
                .iter()
                .map(|st| st.priority)
                .filter(|&q| q < p)
                .max();
        }
        let was_busy = core::mem::replace(&mut self.csf.groups[n].busy, group_busy);
        if was_busy && !group_busy {
            self.csg_event(n, csg::IDLE)?;
        }
        Ok(all)
    }

    fn run_stream(&mut self, n: usize, s: usize) -> Result<RunResult, McuFault> {
        let mut r = RunResult::default();
        {
            let st = &self.csf.groups[n].streams[s];
            if !st.started || st.hang {
                r.busy = st.started && st.hang;
                return Ok(r);
            }
            if matches!(st.status, StreamStatus::Faulted | StreamStatus::Fatal) {
                return Ok(r);
            }
        }
        let input = shared(csf::cs_input(n, s));
        let output = shared(csf::cs_output(n, s));
        let as_nr = (self.mcu_rd32(shared(csf::csg_input(n)) + csg::CONFIG)? & 0xf) as usize;
        if !self.csf.groups[n].streams[s].sb.is_idle() {
            r.busy = true;
            r.pending = true;
        }
        if self.csf.groups[n].streams[s].status == StreamStatus::TilerOom {
            // Stalled, not idle, until the driver answers.
            r.busy = true;
            return Ok(r);
        }
        let ring_base = self.mcu_rd64(input + cs::RINGBUF_BASE)?;
        let ring_size = u64::from(self.mcu_rd32(input + cs::RINGBUF_SIZE)?);
        let ring_in = self.mcu_rd64(input + cs::RINGBUF_INPUT)?;
        let ring_out = self.mcu_rd64(input + cs::RINGBUF_OUTPUT)?;
        for _ in 0..BATCH {
            // Where the next instruction comes from: the innermost call, or the ring.
            let from_ring = self.csf.groups[n].streams[s].stack.is_empty();
            let pc = if let Some(f) = self.csf.groups[n].streams[s].stack.last().copied() {
                if f.pc >= f.end {
                    self.csf.groups[n].streams[s].stack.pop();
                    continue;
                }
                f.pc
            } else {
                let insert = self.mcu_rd64(ring_in + ring::INSERT)?;
                let extract = self.mcu_rd64(ring_out + ring::EXTRACT)?;
                if extract >= insert {
                    if !r.pending {
                        self.mcu_wr32(ring_out + ring::ACTIVE, 0)?;
                    }
                    self.csf.groups[n].streams[s].status = StreamStatus::Ready;
                    return Ok(r);
                }
                if !ring_size.is_power_of_two() || ring_size < 8 {
                    self.stream_fatal(n, s, exception::CS_INSTR_INVALID, ring_base)?;
                    return Ok(r);
                }
                if !r.busy {
                    self.mcu_wr32(ring_out + ring::ACTIVE, 1)?;
                }
                ring_base.wrapping_add(extract & (ring_size - 1))
            };
            r.busy = true;
            let mut word = [0u8; 8];
            let fetched = self.stream_access(n, s, as_nr, pc, Data::Read(&mut word), true);
            let step = match fetched {
                Ok(()) => self.execute(n, s, as_nr, u64::from_le_bytes(word), &mut r),
                Err(step) => step,
            };
            if r.mcu_fault || matches!(step, Step::McuFault) {
                return Err(McuFault);
            }
            let moves = matches!(
                step,
                Step::Next | Step::Call { .. } | Step::Jump { .. } | Step::Branch { .. }
            );
            if !moves {
                self.mcu_wr64(output + cs::STATUS_CMD_PTR, pc)?;
            }
            match step {
                Step::Next | Step::Call { .. } | Step::Jump { .. } | Step::Branch { .. } => {
                    if let Step::Jump { .. } = step {
                        if from_ring {
                            // The ring is not a buffer one can leave: only calls can.
                            self.mcu_wr64(output + cs::STATUS_CMD_PTR, pc)?;
                            self.stream_fatal(n, s, exception::CS_INSTR_INVALID, pc)?;
                            return Ok(r);
                        }
                    }
                    let st = &mut self.csf.groups[n].streams[s];
                    st.executed += 1;
                    let was_blocked = st.status == StreamStatus::Blocked;
                    st.status = StreamStatus::Ready;
                    r.progressed = true;
                    // A taken branch moves `offset` instructions past the next one.
                    let advance = match step {
                        Step::Branch { offset } => 8u64.wrapping_add_signed(8 * i64::from(offset)),
                        _ => 8,
                    };
                    if from_ring {
                        let extract = self.mcu_rd64(ring_out + ring::EXTRACT)?;
                        self.mcu_wr64(ring_out + ring::EXTRACT, extract.wrapping_add(advance))?;
                    } else if let Some(f) = self.csf.groups[n].streams[s].stack.last_mut() {
                        f.pc = f.pc.wrapping_add(advance);
                    }
                    if was_blocked {
                        self.mcu_wr32(output + cs::STATUS_WAIT, 0)?;
                        self.mcu_wr32(output + cs::STATUS_BLOCKED_REASON, cs::BLOCKED_UNBLOCKED)?;
                    }
                    match step {
                        // The guard enters the callee; only a too-deep call lands here.
                        Step::Call { addr, len } if self.push_frame(n, s, addr, len).is_err() => {
                            self.stream_fatal(n, s, exception::CS_CALL_STACK_OVERFLOW, pc)?;
                            return Ok(r);
                        }
                        Step::Jump { addr, len } => {
                            let st = &mut self.csf.groups[n].streams[s];
                            if let Some(f) = st.stack.last_mut() {
                                *f = Frame {
                                    pc: addr,
                                    end: addr.wrapping_add(len),
                                };
                            }
                        }
                        _ => {}
                    }
                }
                Step::Exception { addr, len } => {
                    // The handler runs, then the instruction that raised the exception again.
                    if self.push_frame(n, s, addr, len).is_err() {
                        self.stream_fatal(n, s, exception::CS_CALL_STACK_OVERFLOW, pc)?;
                        return Ok(r);
                    }
                    self.csf.groups[n].streams[s].status = StreamStatus::Ready;
                    r.progressed = true;
                }
                Step::Stall => {
                    // Woken again when an MMU command completes.
                    r.busy = true;
                    return Ok(r);
                }
                Step::Full => {
                    // Issued operations fill the stream's queue: try again once one finishes.
                    r.busy = true;
                    r.pending = true;
                    return Ok(r);
                }
                Step::WaitSb { mask } => {
                    self.csf.groups[n].streams[s].status = StreamStatus::Blocked;
                    r.pending = true;
                    let status = u32::from(mask) | cs::STATUS_WAIT_SB_SRC_WAIT;
                    self.mcu_wr32(output + cs::STATUS_WAIT, status)?;
                    self.mcu_wr32(output + cs::STATUS_BLOCKED_REASON, cs::BLOCKED_SB_WAIT)?;
                    return Ok(r);
                }
                Step::WaitProgress => {
                    self.csf.groups[n].streams[s].status = StreamStatus::Blocked;
                    r.blocked = true;
                    r.pending = true;
                    self.mcu_wr32(output + cs::STATUS_WAIT, cs::STATUS_WAIT_PROGRESS)?;
                    self.mcu_wr32(
                        output + cs::STATUS_BLOCKED_REASON,
                        cs::BLOCKED_PROGRESS_WAIT,
                    )?;
                    return Ok(r);
                }
                Step::Block {
                    addr,
                    value,
                    status,
                } => {
                    self.csf.groups[n].streams[s].status = StreamStatus::Blocked;
                    r.blocked = true;
                    self.mcu_wr32(output + cs::STATUS_WAIT, cs::STATUS_WAIT_SYNC | status)?;
                    self.mcu_wr64(output + cs::STATUS_WAIT_SYNC_PTR, addr)?;
                    self.mcu_wr32(output + cs::STATUS_WAIT_SYNC_VALUE, value as u32)?;
                    let hi = (value >> 32) as u32;
                    self.mcu_wr32(output + cs::STATUS_WAIT_SYNC_VALUE_HI, hi)?;
                    self.mcu_wr32(output + cs::STATUS_BLOCKED_REASON, cs::BLOCKED_SYNC_WAIT)?;
                    return Ok(r);
                }
                Step::Fault { code, va } => {
                    self.stream_fault(n, s, code, va)?;
                    return Ok(r);
                }
                Step::Fatal { code } => {
                    self.stream_fatal(n, s, code, pc)?;
                    return Ok(r);
                }
                Step::TilerOom {
                    ctx,
                    vt_start,
                    vt_end,
                    frag_end,
                } => {
                    self.csf.groups[n].streams[s].status = StreamStatus::TilerOom;
                    self.mcu_wr64(output + cs::HEAP_ADDRESS, ctx)?;
                    self.mcu_wr32(output + cs::HEAP_VT_START, vt_start)?;
                    self.mcu_wr32(output + cs::HEAP_VT_END, vt_end)?;
                    self.mcu_wr32(output + cs::HEAP_FRAG_END, frag_end)?;
                    self.cs_event(n, s, cs::TILER_OOM)?;
                    return Ok(r);
                }
                Step::McuFault => return Err(McuFault),
            }
        }
        Ok(r)
    }

    /// Enters a buffer of instructions (a call or an exception handler); `Err` when that would
    /// nest deeper than the hardware's call stack (the ring is the outermost level: calls nest
    /// `MAX_CALL_DEPTH - 1` deep).
    fn push_frame(&mut self, n: usize, s: usize, addr: u64, len: u64) -> Result<(), ()> {
        let st = &mut self.csf.groups[n].streams[s];
        let frame = Frame {
            pc: addr,
            end: addr.wrapping_add(len),
        };
        if st.stack.len() >= csf::MAX_CALL_DEPTH - 1 {
            return Err(());
        }
        st.stack.push(frame).map_err(|_| ())
    }

    /// Stops stream `s` of group `n` with a fault at `va`.
    fn stream_fault(&mut self, n: usize, s: usize, code: u8, va: u64) -> Result<(), McuFault> {
        let output = shared(csf::cs_output(n, s));
        self.csf.groups[n].streams[s].status = StreamStatus::Faulted;
        self.mcu_wr32(output + cs::FAULT, u32::from(code))?;
        self.mcu_wr64(output + cs::FAULT_INFO, va)?;
        self.cs_event(n, s, cs::FAULT_EVENT)
    }

    fn stream_fatal(&mut self, n: usize, s: usize, code: u8, info: u64) -> Result<(), McuFault> {
        let output = shared(csf::cs_output(n, s));
        self.csf.groups[n].streams[s].status = StreamStatus::Fatal;
        self.mcu_wr32(output + cs::FATAL, u32::from(code))?;
        self.mcu_wr64(output + cs::FATAL_INFO, info)?;
        self.cs_event(n, s, cs::FATAL_EVENT)
    }

    /// A memory access of stream `s` of group `n`, through address space `as_nr`.
    fn stream_access(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        va: u64,
        data: Data<'_>,
        fetch: bool,
    ) -> Result<(), Step> {
        if self.is_locked(as_nr, va) {
            return Err(Step::Stall);
        }
        if !fetch && core::mem::take(&mut self.csf.groups[n].streams[s].inject_fault) {
            let access = match data {
                Data::Read(_) => AccessType::Read,
                Data::Write(_) => AccessType::Write,
            };
            let fault = Fault {
                kind: FaultKind::Translation { level: 3 },
                va,
                access,
            };
            self.record_mmu_fault(as_nr, fault, stream_source(n, s));
            return Err(Step::Fault {
                code: fault.exception_code(),
                va,
            });
        }
        self.stream_access_unlocked(n, s, as_nr, va, data)
    }

    /// A memory access of a stream, through a locked region too (what a suspend draining the
    /// stream's work does; [`Self::stream_access`] after its checks).
    fn stream_access_unlocked(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        va: u64,
        data: Data<'_>,
    ) -> Result<(), Step> {
        let res = self.gpu_access(as_nr, va, data, stream_source(n, s));
        res.map_err(|e| match e {
            AccessError::Mmu(f) => Step::Fault {
                code: f.exception_code(),
                va,
            },
            AccessError::Bus(_) => Step::Fault {
                code: exception::CS_BUS_FAULT,
                va,
            },
        })
    }

    fn stream_read(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        va: u64,
        len: usize,
    ) -> Result<u64, Step> {
        let mut b = [0u8; 8];
        self.stream_access(n, s, as_nr, va, Data::Read(&mut b[..len]), false)?;
        Ok(u64::from_le_bytes(b))
    }

    fn stream_write(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        va: u64,
        v: u64,
        len: usize,
    ) -> Result<(), Step> {
        let b = v.to_le_bytes();
        self.stream_access(n, s, as_nr, va, Data::Write(&b[..len]), false)
    }

    fn execute(&mut self, n: usize, s: usize, as_nr: usize, word: u64, r: &mut RunResult) -> Step {
        match self.execute_inner(n, s, as_nr, word, r) {
            Ok(step) | Err(step) => step,
        }
    }

    /// Runs one instruction. Operands are checked as the hardware checks them: a register
    /// past the stream's 96, an odd first register of a pair, a scoreboard entry past the 8 the
    /// stream has or a misaligned address make the instruction invalid.
    fn execute_inner(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        word: u64,
        r: &mut RunResult,
    ) -> Result<Step, Step> {
        const INVALID: Step = Step::Fatal {
            code: exception::CS_INSTR_INVALID,
        };
        let instr = Instr::decode(word).map_err(|_| INVALID)?;
        let reg = |i: Reg| {
            Some(usize::from(i.0))
                .filter(|&i| i < csf::NUM_REGS)
                .ok_or(INVALID)
        };
        let pair = |i: Reg64| {
            Some(usize::from(i.0))
                .filter(|&i| i.is_multiple_of(2) && i + 1 < csf::NUM_REGS)
                .ok_or(INVALID)
        };
        let slot = |sl: Slot| Some(sl.get()).filter(|&v| v < SCOREBOARDS).ok_or(INVALID);
        let mask = |m: SlotMask| {
            Some(m.bits())
                .filter(|&m| m >> SCOREBOARDS == 0)
                .ok_or(INVALID)
        };
        let get32 = |gpu: &Self, i: usize| gpu.csf.groups[n].streams[s].regs[i];
        let get64 = |gpu: &Self, i: usize| {
            let r = &gpu.csf.groups[n].streams[s].regs;
            u64::from(r[i]) | u64::from(r[i + 1]) << 32
        };
        match instr {
            Instr::Nop { .. } => {}
            Instr::Move48 { dest, imm } => {
                let d = pair(dest)?;
                self.set64(n, s, d, imm.get());
            }
            Instr::Move32 { dest, imm } => {
                let d = reg(dest)?;
                self.csf.groups[n].streams[s].regs[d] = imm;
            }
            Instr::Wait {
                mask: m,
                progress_increment,
            } => {
                let m = mask(SlotMask::from(m))?;
                if self.csf.groups[n].streams[s].sb.busy(m) {
                    return Ok(Step::WaitSb { mask: m });
                }
                if progress_increment {
                    let st = &mut self.csf.groups[n].streams[s];
                    st.progress = st.progress.wrapping_add(1);
                }
            }
            Instr::AddImmediate32 { dest, source, imm } => {
                let (d, src) = (reg(dest)?, reg(source)?);
                let v = get32(self, src).wrapping_add_signed(imm);
                self.csf.groups[n].streams[s].regs[d] = v;
            }
            Instr::AddImmediate64 { dest, source, imm } => {
                let (d, src) = (pair(dest)?, pair(source)?);
                let v = get64(self, src).wrapping_add_signed(i64::from(imm));
                self.set64(n, s, d, v);
            }
            Instr::Umin32 {
                dest,
                source0,
                source1,
            } => {
                let (d, a, b) = (reg(dest)?, reg(source0)?, reg(source1)?);
                let v = get32(self, a).min(get32(self, b));
                self.csf.groups[n].streams[s].regs[d] = v;
            }
            Instr::LoadMultiple {
                base,
                address,
                offset,
                mask: m,
            }
            | Instr::StoreMultiple {
                base,
                address,
                offset,
                mask: m,
            } => {
                let load = matches!(instr, Instr::LoadMultiple { .. });
                let (base, addr) = (reg(base)?, pair(address)?);
                let va = get64(self, addr).wrapping_add_signed(i64::from(offset));
                if !va.is_multiple_of(4) || base + (16 - m.leading_zeros() as usize) > csf::NUM_REGS
                {
                    return Err(INVALID);
                }
                let st = &self.csf.groups[n].streams[s];
                let what = if load {
                    Deferred::Load {
                        va,
                        base: base as u8,
                        mask: m,
                    }
                } else {
                    let mut vals = [0u32; 16];
                    for (i, v) in vals.iter_mut().enumerate() {
                        if m & (1 << i) != 0 {
                            *v = st.regs[base + i];
                        }
                    }
                    Deferred::Store { va, mask: m, vals }
                };
                let other = st.sb.other;
                return Ok(self.issue(n, s, as_nr, other, 0, what));
            }
            Instr::Branch {
                condition,
                value,
                offset,
            } => {
                // The register, as a signed 32-bit value, against 0.
                if condition.holds(get32(self, reg(value)?) as i32) {
                    return Ok(Step::Branch { offset });
                }
            }
            Instr::SetSbEntry {
                endpoint_entry,
                other_entry,
            } => {
                let (e, o) = (slot(endpoint_entry)?, slot(other_entry)?);
                let sb = &mut self.csf.groups[n].streams[s].sb;
                sb.endpoint = e;
                sb.other = o;
            }
            Instr::ProgressWait { queue, source } => {
                let q = usize::from(queue.get());
                let value = get64(self, pair(source)?);
                let Some(other) = self.csf.groups[n].streams.get(q) else {
                    return Err(INVALID);
                };
                if other.progress < value {
                    return Ok(Step::WaitProgress);
                }
            }
            Instr::ProgressStore { source } => {
                let v = get64(self, pair(source)?);
                self.csf.groups[n].streams[s].progress = v;
            }
            Instr::ProgressLoad { dest } => {
                let d = pair(dest)?;
                let v = self.csf.groups[n].streams[s].progress;
                self.set64(n, s, d, v);
            }
            Instr::SetExceptionHandler {
                exception_type: ExceptionType::TilerOom,
                address,
                length,
            } => {
                let addr = get64(self, pair(address)?);
                let len = get32(self, reg(length)?);
                if !addr.is_multiple_of(8) || !len.is_multiple_of(8) {
                    return Err(INVALID);
                }
                // A zero address or length removes the handler.
                self.csf.groups[n].streams[s].handler =
                    (addr != 0 && len != 0).then_some((addr, len));
            }
            Instr::Call { address, length } | Instr::Jump { address, length } => {
                let addr = get64(self, pair(address)?);
                let len = u64::from(get32(self, reg(length)?));
                if !addr.is_multiple_of(8) || !len.is_multiple_of(8) {
                    return Err(INVALID);
                }
                return Ok(match instr {
                    Instr::Call { .. } => Step::Call { addr, len },
                    _ => Step::Jump { addr, len },
                });
            }
            Instr::ReqResource {
                compute,
                fragment,
                tiler,
                idvs,
            } => {
                // The simulated GPU has one endpoint of each kind, granted at once.
                let claimed = [
                    (compute, RES_COMPUTE),
                    (fragment, RES_FRAGMENT),
                    (tiler, RES_TILER),
                    (idvs, RES_IDVS),
                ];
                self.csf.groups[n].streams[s].resources = claimed
                    .iter()
                    .filter(|(on, _)| *on)
                    .fold(0, |acc, (_, bit)| acc | bit);
            }
            Instr::FlushCache2 {
                l2_flush_mode,
                lsc_flush_mode,
                other_flush_mode,
                wait_mask,
                latest_flush_id,
                signal_slot,
            } => {
                let (m, sl) = (mask(wait_mask)?, slot(signal_slot)?);
                let id = get32(self, reg(latest_flush_id)?);
                let flush = l2_flush_mode != FlushMode::None
                    || lsc_flush_mode != FlushMode::None
                    || other_flush_mode != OtherFlushMode::None;
                return Ok(self.issue(n, s, as_nr, sl, m, Deferred::Flush { id, flush }));
            }
            Instr::SyncAdd32(op) | Instr::SyncSet32(op) => {
                let data = u64::from(get32(self, reg(op.data)?));
                let add = matches!(instr, Instr::SyncAdd32(_));
                return self.issue_sync(
                    n,
                    s,
                    as_nr,
                    get64(self, pair(op.address)?),
                    data,
                    false,
                    add,
                    op,
                );
            }
            Instr::SyncAdd64(op) | Instr::SyncSet64(op) => {
                let data = get64(self, pair(op.data)?);
                let add = matches!(instr, Instr::SyncAdd64(_));
                let va = get64(self, pair(op.address)?);
                let op = SyncOp {
                    address: op.address,
                    data: Reg(0),
                    scope: op.scope,
                    error_propagate: op.error_propagate,
                    wait_mask: op.wait_mask,
                    signal_slot: op.signal_slot,
                };
                return self.issue_sync(n, s, as_nr, va, data, true, add, op);
            }
            Instr::SyncWait32(w) => {
                let value = u64::from(get32(self, reg(w.data)?));
                let va = get64(self, pair(w.address)?);
                return self.sync_wait(n, s, as_nr, va, value, false, w.condition, w.error_reject);
            }
            Instr::SyncWait64(w) => {
                let value = get64(self, pair(w.data)?);
                let va = get64(self, pair(w.address)?);
                return self.sync_wait(n, s, as_nr, va, value, true, w.condition, w.error_reject);
            }
            Instr::StoreState {
                state,
                address,
                offset,
                wait_mask,
                signal_slot,
            } => {
                let (m, sl) = (mask(wait_mask)?, slot(signal_slot)?);
                let va = get64(self, pair(address)?).wrapping_add_signed(i64::from(offset));
                if !va.is_multiple_of(8) {
                    return Err(INVALID);
                }
                let sel = state as u8;
                return Ok(self.issue(n, s, as_nr, sl, m, Deferred::State { va, sel }));
            }
            Instr::ErrorBarrier => self.csf.groups[n].streams[s].error = false,
            Instr::HeapSet { address } => {
                let ctx = get64(self, pair(address)?);
                self.csf.groups[n].streams[s].heap_ctx = ctx;
            }
            Instr::HeapOperation {
                operation,
                wait_mask,
                signal_slot,
            } => {
                let (m, sl) = (mask(wait_mask)?, slot(signal_slot)?);
                let ctx = self.csf.groups[n].streams[s].heap_ctx;
                let field = sb::heap_counter(operation as u8).ok_or(INVALID)?;
                if ctx == 0 || !ctx.is_multiple_of(8) {
                    return Err(INVALID);
                }
                return Ok(self.issue(n, s, as_nr, sl, m, Deferred::HeapCount { ctx, field }));
            }
            Instr::TracePoint {
                base_register,
                register_count,
                wait_mask,
                signal_slot,
            } => {
                let (m, sl) = (mask(wait_mask)?, slot(signal_slot)?);
                let base = usize::from(base_register.0);
                if base + usize::from(register_count) > csf::NUM_REGS {
                    return Err(INVALID);
                }
                return Ok(self.issue(n, s, as_nr, sl, m, Deferred::Nothing));
            }
            Instr::ProtRegion { .. } => {
                // Protected mode is not simulated (the driver gives the firmware no
                // protected-mode suspend buffer to switch with).
                return Err(INVALID);
            }
            Instr::RunCompute {
                progress_increment, ..
            }
            | Instr::RunComputeIndirect {
                progress_increment, ..
            } => return self.run_work(n, s, as_nr, RES_COMPUTE, progress_increment),
            Instr::RunTiling {
                progress_increment, ..
            } => return self.run_work(n, s, as_nr, RES_TILER, progress_increment),
            Instr::RunFragment {
                progress_increment, ..
            } => return self.run_work(n, s, as_nr, RES_FRAGMENT, progress_increment),
            Instr::RunFullscreen {
                progress_increment,
                dcd,
                ..
            } => {
                pair(dcd)?;
                return self.run_work(n, s, as_nr, RES_FRAGMENT, progress_increment);
            }
            Instr::FinishTiling { progress_increment } => {
                if self.csf.groups[n].streams[s].resources & (RES_TILER | RES_IDVS) == 0 {
                    return Err(INVALID);
                }
                let e = self.csf.groups[n].streams[s].sb.endpoint;
                let what = Deferred::Work {
                    progress: progress_increment,
                };
                return Ok(self.issue(n, s, as_nr, e, 0, what));
            }
            Instr::FinishFragment {
                increment_fragment_completed,
                wait_mask,
                last_heap_chunk,
                first_heap_chunk,
                signal_slot,
            } => {
                let (m, sl) = (mask(wait_mask)?, slot(signal_slot)?);
                pair(last_heap_chunk)?;
                pair(first_heap_chunk)?;
                let st = &self.csf.groups[n].streams[s];
                if st.resources & RES_FRAGMENT == 0 {
                    return Err(INVALID);
                }
                let what = if increment_fragment_completed {
                    let ctx = st.heap_ctx;
                    if ctx == 0 || !ctx.is_multiple_of(8) {
                        return Err(INVALID);
                    }
                    Deferred::HeapCount {
                        ctx,
                        field: heap::CTX_FRAG_END,
                    }
                } else {
                    Deferred::Nothing
                };
                return Ok(self.issue(n, s, as_nr, sl, m, what));
            }
            Instr::RunIdvs {
                progress_increment,
                malloc_enable,
                draw_id_register_enable,
                draw_id,
                ..
            } => {
                let st = &self.csf.groups[n].streams[s];
                if st.resources & RES_IDVS == 0 {
                    return Err(INVALID);
                }
                if !st.sb.has_room() {
                    return Ok(Step::Full);
                }
                // Tiling runs on the tiler and the shader cores: powered off, they fault it.
                if !self.cores_powered() {
                    return Err(Step::Fault {
                        code: exception::CS_ENDPOINT_FAULT,
                        va: 0,
                    });
                }
                let tiler_ctx = get64(self, heap::SR_TILER_CTX);
                let indices = get32(self, heap::SR_INDEX_COUNT);
                let instances = get32(self, heap::SR_INSTANCE_COUNT);
                let first_index = get32(self, heap::SR_INDEX_OFFSET);
                let draw = if draw_id_register_enable {
                    get32(self, reg(draw_id)?)
                } else {
                    0
                };
                let entries = u64::from(indices) * u64::from(instances);
                if malloc_enable && entries > 0 {
                    let ctx = self.csf.groups[n].streams[s].heap_ctx;
                    if ctx == 0
                        || !ctx.is_multiple_of(8)
                        || entries > u64::from(heap::MAX_RUN_WORDS)
                    {
                        return Err(INVALID);
                    }
                    let tag = u64::from(draw) << 32 | u64::from(first_index);
                    let step = self.run_idvs(n, s, as_nr, ctx, tiler_ctx, entries as u32, tag)?;
                    if !matches!(step, Step::Next) {
                        return Ok(step);
                    }
                }
                let e = self.csf.groups[n].streams[s].sb.endpoint;
                let what = Deferred::Work {
                    progress: progress_increment,
                };
                return Ok(self.issue(n, s, as_nr, e, 0, what));
            }
        }
        let _ = r;
        Ok(Step::Next)
    }

    /// Issues `what` on `slot` once the slots of `waits` drain: the stream goes on at once
    /// (see [`sb`]), or stays on the instruction while its queue is full.
    fn issue(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        slot: u8,
        waits: u16,
        what: Deferred,
    ) -> Step {
        if !self.csf.groups[n].streams[s].sb.issue(slot, waits, what) {
            return Step::Full;
        }
        // It starts now unless older work on its wait slots holds it back, and what is due now
        // (a sync operation nothing holds back) takes effect at once.
        match self.sb_advance(n, s, as_nr, self.now, false) {
            Err(step @ (Step::Fault { .. } | Step::McuFault)) => step,
            // A write that stalls on a locked region stays in flight; the stream goes on.
            Ok(()) | Err(_) => Step::Next,
        }
    }

    /// `RUN_*` work on the endpoint `res` names, tracked on the stream's endpoint entry.
    fn run_work(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        res: u8,
        progress: bool,
    ) -> Result<Step, Step> {
        if self.csf.groups[n].streams[s].resources & res == 0 {
            return Err(Step::Fatal {
                code: exception::CS_INSTR_INVALID,
            });
        }
        if !self.cores_powered() {
            return Err(Step::Fault {
                code: exception::CS_ENDPOINT_FAULT,
                va: 0,
            });
        }
        let e = self.csf.groups[n].streams[s].sb.endpoint;
        Ok(self.issue(n, s, as_nr, e, 0, Deferred::Work { progress }))
    }

    /// `SYNC_ADD`/`SYNC_SET` of `data` at `va` (`wide`: 64-bit), as `op` asks.
    #[allow(clippy::too_many_arguments)]
    fn issue_sync(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        va: u64,
        data: u64,
        wide: bool,
        add: bool,
        op: SyncOp<Reg>,
    ) -> Result<Step, Step> {
        const INVALID: Step = Step::Fatal {
            code: exception::CS_INSTR_INVALID,
        };
        let slot = op.signal_slot.get();
        let waits = op.wait_mask.bits();
        if slot >= SCOREBOARDS || waits >> SCOREBOARDS != 0 {
            return Err(INVALID);
        }
        if !va.is_multiple_of(if wide { 8 } else { 4 }) {
            return Err(INVALID);
        }
        let what = Deferred::Sync {
            va,
            wide,
            add,
            data,
            propagate: op.error_propagate,
            system: op.scope == SyncScope::System,
        };
        Ok(self.issue(n, s, as_nr, slot, waits, what))
    }

    /// `SYNC_WAIT` until the object at `va` compares with `value` as `cond` says. The object's
    /// error word follows its value: a set one fails the stream with `CS_INHERIT_FAULT` when
    /// the wait rejects errors, and becomes the stream's error state otherwise.
    #[allow(clippy::too_many_arguments)]
    fn sync_wait(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        va: u64,
        value: u64,
        wide: bool,
        cond: WaitCondition,
        reject: bool,
    ) -> Result<Step, Step> {
        let len = if wide { 8 } else { 4 };
        if !va.is_multiple_of(len as u64) {
            return Err(Step::Fatal {
                code: exception::CS_INSTR_INVALID,
            });
        }
        let mem = self.stream_read(n, s, as_nr, va, len)?;
        if !cond.satisfied(mem, value) {
            let mut status = (cond as u32) << cs::STATUS_WAIT_SYNC_COND_SHIFT;
            if wide {
                status |= cs::STATUS_WAIT_SYNC_64B;
            }
            return Ok(Step::Block {
                addr: va,
                value,
                status,
            });
        }
        let error = self.stream_read(n, s, as_nr, va.wrapping_add(len as u64), 4)? != 0;
        if error {
            if reject {
                return Err(Step::Fault {
                    code: exception::CS_INHERIT_FAULT,
                    va,
                });
            }
            self.csf.groups[n].streams[s].error = true;
        }
        Ok(Step::Next)
    }

    /// `RUN_IDVS`'s tiling: writes `count` entries into the heap whose context is at `ctx`
    /// (see [`heap`]), the first chunk being the one the tiler context at `tiler_ctx` names.
    /// Progress survives a stall or a `TILER_OOM` in the stream's state, so that executing the
    /// instruction again goes on where it stopped.
    #[allow(clippy::too_many_arguments)]
    fn run_idvs(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        ctx: u64,
        tiler_ctx: u64,
        count: u32,
        tag: u64,
    ) -> Result<Step, Step> {
        let mut run = match self.csf.groups[n].streams[s].tiler {
            Some(run) => run,
            None => {
                let link = self.stream_read(n, s, as_nr, ctx.wrapping_add(heap::CTX_CHUNK), 8)?;
                let top = self.stream_read(n, s, as_nr, ctx.wrapping_add(heap::CTX_TOP), 8)?;
                TilerRun {
                    link,
                    top,
                    done: 0,
                    first: 0,
                }
            }
        };
        if run.link == 0 && run.first == 0 {
            // An unused heap starts in the chunk its descriptor names.
            run.first = self.first_chunk(n, s, as_nr, tiler_ctx)?;
        }
        let res = self.tile(n, s, as_nr, ctx, count, tag, &mut run);
        let st = &mut self.csf.groups[n].streams[s];
        st.tiler = Some(run);
        if !matches!(res, Ok(Step::Next)) {
            return res;
        }
        // Done: the context records where the next run starts.
        self.stream_write(n, s, as_nr, ctx.wrapping_add(heap::CTX_CHUNK), run.link, 8)?;
        self.stream_write(n, s, as_nr, ctx.wrapping_add(heap::CTX_TOP), run.top, 8)?;
        self.csf.groups[n].streams[s].tiler = None;
        Ok(Step::Next)
    }

    /// The link of the first chunk of the heap the tiler context at `tiler_ctx` uses: the
    /// context's heap descriptor holds the chunk's address and size.
    fn first_chunk(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        tiler_ctx: u64,
    ) -> Result<u64, Step> {
        if tiler_ctx == 0 || !tiler_ctx.is_multiple_of(64) {
            return Err(Step::Fatal {
                code: exception::CS_INSTR_INVALID,
            });
        }
        let desc = self.stream_read(n, s, as_nr, tiler_ctx.wrapping_add(heap::TILER_HEAP), 8)?;
        let size = self.stream_read(n, s, as_nr, desc.wrapping_add(heap::HEAP_SIZE), 4)?;
        let base = self.stream_read(n, s, as_nr, desc.wrapping_add(heap::HEAP_BASE), 8)?;
        Ok(base & !0xfff | (size >> 12) & 0xfff)
    }

    /// The entry loop of [`run_idvs`](Self::run_idvs).
    #[allow(clippy::too_many_arguments)]
    fn tile(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        ctx: u64,
        count: u32,
        tag: u64,
        run: &mut TilerRun,
    ) -> Result<Step, Step> {
        let oom = |va: u64| Step::Fault {
            code: exception::OUT_OF_MEMORY,
            va,
        };
        while run.done < count {
            if run.link == 0 {
                if heap::link_size(run.first) <= heap::CHUNK_HEADER_SIZE {
                    return Err(oom(heap::link_addr(run.first)));
                }
                run.link = run.first;
                run.top = heap::link_addr(run.first).wrapping_add(heap::CHUNK_HEADER_SIZE);
            }
            let chunk = heap::link_addr(run.link);
            let end = chunk.wrapping_add(heap::link_size(run.link));
            if run.top.wrapping_add(8) > end {
                // This chunk is full: on to the next one, if any.
                let mut next = self.stream_read(n, s, as_nr, chunk, 8)?;
                if next == 0 {
                    match self.csf.groups[n].streams[s].oom_answer {
                        None => {
                            let mut c = [0u8; 12];
                            let at = ctx.wrapping_add(heap::CTX_VT_START);
                            self.stream_access(n, s, as_nr, at, Data::Read(&mut c), false)?;
                            let word =
                                |i: usize| u32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
                            return Ok(Step::TilerOom {
                                ctx,
                                vt_start: word(0),
                                vt_end: word(4),
                                frag_end: word(8),
                            });
                        }
                        Some(0) => {
                            let st = &mut self.csf.groups[n].streams[s];
                            st.oom_answer = None;
                            // With a handler the stream renders what it has (incremental
                            // rendering), then tiles again; without one it cannot go on.
                            return match st.handler {
                                Some((addr, len)) => Ok(Step::Exception {
                                    addr,
                                    len: u64::from(len),
                                }),
                                None => Err(oom(ctx)),
                            };
                        }
                        Some(new) => {
                            // The driver's chunk joins the list behind the full one.
                            self.stream_write(n, s, as_nr, chunk, new, 8)?;
                            self.csf.groups[n].streams[s].oom_answer = None;
                            next = new;
                        }
                    }
                }
                if heap::link_size(next) <= heap::CHUNK_HEADER_SIZE {
                    return Err(oom(heap::link_addr(next)));
                }
                run.link = next;
                run.top = heap::link_addr(next).wrapping_add(heap::CHUNK_HEADER_SIZE);
                continue;
            }
            let entry = tag & !0xffff_ffff | u64::from((tag as u32).wrapping_add(run.done));
            self.stream_write(n, s, as_nr, run.top, entry, 8)?;
            run.top = run.top.wrapping_add(8);
            run.done += 1;
        }
        Ok(Step::Next)
    }

    fn set64(&mut self, n: usize, s: usize, d: usize, v: u64) {
        let regs = &mut self.csf.groups[n].streams[s].regs;
        regs[d] = v as u32;
        regs[d + 1] = (v >> 32) as u32;
    }
}

/// The suspend record of `st` (see [`suspend`]), whose ring extract position is `extract`.
fn save_stream(st: &Stream, extract: u64) -> [u8; suspend::USED as usize] {
    let mut rec = [0u8; suspend::USED as usize];
    let mut put = |off: u64, bytes: &[u8]| {
        let at = off as usize;
        rec[at..at + bytes.len()].copy_from_slice(bytes);
    };
    let status = match st.status {
        StreamStatus::Faulted => suspend::STATUS_FAULTED,
        StreamStatus::Fatal => suspend::STATUS_FATAL,
        StreamStatus::Ready | StreamStatus::Blocked | StreamStatus::TilerOom => {
            suspend::STATUS_READY
        }
    };
    let mut flags = status << 8;
    if st.started {
        flags |= suspend::STARTED;
    }
    if let Some(t) = st.tiler {
        flags |= suspend::TILER_RUN;
        put(suspend::TILER, &t.link.to_le_bytes());
        put(suspend::TILER + 8, &t.top.to_le_bytes());
        put(suspend::TILER + 16, &t.done.to_le_bytes());
        put(suspend::TILER + 24, &t.first.to_le_bytes());
    }
    if let Some(a) = st.oom_answer {
        flags |= suspend::OOM_ANSWER;
        put(suspend::OOM, &a.to_le_bytes());
    }
    if let Some((addr, len)) = st.handler {
        flags |= suspend::HANDLER;
        put(suspend::HANDLER_ADDR, &addr.to_le_bytes());
        put(suspend::HANDLER_LEN, &len.to_le_bytes());
    }
    let sb = u32::from(st.sb.endpoint)
        | u32::from(st.sb.other) << 8
        | u32::from(st.resources) << 16
        | u32::from(st.error) << 24;
    put(suspend::SB, &sb.to_le_bytes());
    put(suspend::PROGRESS, &st.progress.to_le_bytes());
    put(suspend::FLAGS, &flags.to_le_bytes());
    put(suspend::EXTRACT, &extract.to_le_bytes());
    put(suspend::HEAP_CTX, &st.heap_ctx.to_le_bytes());
    put(suspend::DEPTH, &(st.stack.len() as u32).to_le_bytes());
    for (i, f) in st.stack.iter().enumerate() {
        let at = suspend::FRAMES + 16 * i as u64;
        put(at, &f.pc.to_le_bytes());
        put(at + 8, &f.end.to_le_bytes());
    }
    for (i, r) in st.regs.iter().enumerate() {
        put(suspend::REGS + 4 * i as u64, &r.to_le_bytes());
    }
    rec
}

/// Makes `st` the stream a suspend record describes (keeping the slot's injected `hang`), and
/// returns its ring extract position. A record that makes no sense (a call stack deeper than the engine's)
/// gives a stream stopped by a fatal error.
fn load_stream(rec: &[u8; suspend::USED as usize], st: &mut Stream) -> u64 {
    let u32_at = |off: u64| {
        let at = off as usize;
        let mut b = [0u8; 4];
        b.copy_from_slice(&rec[at..at + 4]);
        u32::from_le_bytes(b)
    };
    let u64_at = |off: u64| u64::from(u32_at(off)) | u64::from(u32_at(off + 4)) << 32;
    let flags = u32_at(suspend::FLAGS);
    st.clear();
    st.inject_fault = false;
    st.started = flags & suspend::STARTED != 0;
    st.heap_ctx = u64_at(suspend::HEAP_CTX);
    st.status = match (flags >> 8) & 0xff {
        suspend::STATUS_READY => StreamStatus::Ready,
        suspend::STATUS_FAULTED => StreamStatus::Faulted,
        _ => StreamStatus::Fatal,
    };
    if flags & suspend::TILER_RUN != 0 {
        st.tiler = Some(TilerRun {
            link: u64_at(suspend::TILER),
            top: u64_at(suspend::TILER + 8),
            done: u32_at(suspend::TILER + 16),
            first: u64_at(suspend::TILER + 24),
        });
    }
    if flags & suspend::OOM_ANSWER != 0 {
        st.oom_answer = Some(u64_at(suspend::OOM));
    }
    if flags & suspend::HANDLER != 0 {
        st.handler = Some((u64_at(suspend::HANDLER_ADDR), u32_at(suspend::HANDLER_LEN)));
    }
    let sb = u32_at(suspend::SB);
    // A record naming entries the stream does not have is as bad as a too-deep stack.
    let (endpoint, other) = (sb as u8, (sb >> 8) as u8);
    if endpoint >= SCOREBOARDS || other >= SCOREBOARDS {
        st.status = StreamStatus::Fatal;
    } else {
        st.sb.endpoint = endpoint;
        st.sb.other = other;
    }
    st.resources = (sb >> 16) as u8 & 0xf;
    st.error = (sb >> 24) & 1 != 0;
    st.progress = u64_at(suspend::PROGRESS);
    let depth = u32_at(suspend::DEPTH) as usize;
    if depth >= csf::MAX_CALL_DEPTH {
        st.status = StreamStatus::Fatal;
    } else {
        for i in 0..depth {
            let at = suspend::FRAMES + 16 * i as u64;
            let frame = Frame {
                pc: u64_at(at),
                end: u64_at(at + 8),
            };
            // Room for `MAX_CALL_DEPTH` frames: `depth` is below it.
            let _ = st.stack.push(frame);
        }
    }
    for (i, r) in st.regs.iter_mut().enumerate() {
        *r = u32_at(suspend::REGS + 4 * i as u64);
    }
    u64_at(suspend::EXTRACT)
}

/// The source ID a stream's accesses carry in `AS_FAULTSTATUS`.
fn stream_source(n: usize, s: usize) -> u16 {
    (n * csf::STREAMS_PER_CSG + s) as u16
}

#[derive(Default)]
struct RunResult {
    mcu_fault: bool,
    /// Some stream has operations in flight: the engine must keep stepping.
    pending: bool,
    progressed: bool,
    synced: bool,
    blocked: bool,
    busy: bool,
}

#[cfg(all(test, feature = "std"))]
#[path = "engine_tests.rs"]
mod tests;
