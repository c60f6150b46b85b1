// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The simulated MCU firmware and command-stream engine (see [`crate::csf`]).

use pin_init::{init, init_array_from_fn};

use super::{AccessError, Data, Gpu};
use crate::csf::instr::{self, Op};
use crate::csf::{self, cs, csg, exception, glb, heap, ring, suspend};
use crate::list::FixedList;
use crate::mem::PhysMemory;
use crate::regs::{gpu_irq, mcu};
use crate::walk::{AccessType, Fault, FaultKind};

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
    /// Words written so far.
    done: u32,
    /// The heap's tiling passes started (this one included) and finished.
    vt_start: u32,
    vt_end: u32,
}

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
        }
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
}

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
    pub(super) fn init() -> impl pin_init::Init<Self> {
        init!(Self {
            booted: false,
            deadline: None,
            rr: 0,
            groups <- init_array_from_fn(|_| Group::init()),
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
        } = self;
        *booted = false;
        *deadline = None;
        *rr = 0;
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
                let injected = (st.hang, st.inject_fault);
                *st = Stream::default();
                if keep_injected {
                    (st.hang, st.inject_fault) = injected;
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
    },
    Call {
        addr: u64,
        len: u64,
    },
    Fault {
        code: u8,
        va: u64,
    },
    Fatal {
        code: u8,
    },
    /// The heap whose context is at `ctx` has no chunk left: raise `TILER_OOM`.
    TilerOom {
        ctx: u64,
        vt_start: u32,
        vt_end: u32,
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
        self.mcu_status = mcu::FATAL;
        self.gpu_irq.raise(gpu_irq::MCU_STATUS_CHANGED);
    }

    // ------------------------------------------------------------ boot

    /// Called when the MCU finishes starting: publishes the interface blocks.
    pub(super) fn mcu_boot(&mut self) {
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
            if self.glb_doorbell().is_err() {
                self.mcu_crash();
            }
        } else {
            // A user doorbell: wake every stream (the engine re-reads insert pointers).
            self.kick_engine();
        }
    }

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
                self.gpu_irq.raise(gpu_irq::MCU_STATUS_CHANGED);
                return Ok(());
            }
        }
        let db_req = self.mcu_rd32(input + glb::DOORBELL_REQ)?;
        let db_ack = self.mcu_rd32(output + glb::DOORBELL_ACK)?;
        let pending = (db_req ^ db_ack) & ((1 << csf::NUM_CSGS) - 1);
        if pending != 0 {
            for n in 0..csf::NUM_CSGS {
                if pending & (1 << n) != 0 {
                    self.csg_request(n)?;
                }
            }
            self.mcu_wr32(output + glb::DOORBELL_ACK, db_ack ^ pending)?;
        }
        Ok(())
    }

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
                        *s = Stream {
                            hang: s.hang,
                            ..Stream::default()
                        };
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
    fn suspend_group(&mut self, n: usize) -> Result<(), McuFault> {
        let buf = self.mcu_rd64(shared(csf::csg_input(n)) + csg::SUSPEND_BUF)?;
        for s in 0..csf::STREAMS_PER_CSG {
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
            *st = Stream {
                hang: st.hang,
                ..Stream::default()
            };
        }
        self.stop_streams_ack(n)
    }

    /// `STATE_RESUME` of CSG `n`: reloads every stream from the suspend buffer. A stream the
    /// driver asks to start (`CS_REQ` state `START`, as it programs a slot) finds its request
    /// already acknowledged, so that starting does not wipe what was restored.
    fn resume_group(&mut self, n: usize) -> Result<(), McuFault> {
        let buf = self.mcu_rd64(shared(csf::csg_input(n)) + csg::SUSPEND_BUF)?;
        for s in 0..csf::STREAMS_PER_CSG {
            let mut rec = [0u8; suspend::USED as usize];
            let at = buf.wrapping_add(s as u64 * suspend::STREAM_RECORD);
            self.mcu_read(at, &mut rec)?;
            let hang = self.csf.groups[n].streams[s].hang;
            let (mut st, extract) = load_stream(&rec, hang);
            let started = st.started;
            let input = shared(csf::cs_input(n, s));
            st.priority = (self.mcu_rd32(input + cs::CONFIG)? & cs::CONFIG_PRIORITY_MASK) as u8;
            self.csf.groups[n].streams[s] = st;
            let out = shared(csf::cs_output(n, s));
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
            let hang = stream.hang;
            *stream = Stream {
                started: req & cs::STATE_MASK == cs::STATE_START,
                hang,
                priority: (config & cs::CONFIG_PRIORITY_MASK) as u8,
                ..Stream::default()
            };
            self.mcu_wr32(output + cs::FAULT, 0)?;
            self.mcu_wr32(output + cs::FATAL, 0)?;
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
        if self.csf.booted && self.csf.deadline.is_none() {
            self.csf.deadline = self.after(self.cfg.timings.cs_step_ns.max(1));
        }
    }

    /// One engine step: every runnable stream executes up to [`BATCH`] instructions.
    pub(super) fn run_streams(&mut self) {
        if !self.csf.booted || self.mcu_status != mcu::ENABLED {
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
        if progressed || (synced && blocked) {
            self.kick_engine();
        }
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
            if st.status == StreamStatus::TilerOom {
                // Stalled, not idle, until the driver answers.
                r.busy = true;
                return Ok(r);
            }
        }
        let input = shared(csf::cs_input(n, s));
        let output = shared(csf::cs_output(n, s));
        let as_nr = (self.mcu_rd32(shared(csf::csg_input(n)) + csg::CONFIG)? & 0xf) as usize;
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
                    self.mcu_wr32(ring_out + ring::ACTIVE, 0)?;
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
            if r.mcu_fault {
                return Err(McuFault);
            }
            if !matches!(step, Step::Next | Step::Call { .. }) {
                self.mcu_wr64(output + cs::STATUS_CMD_PTR, pc)?;
            }
            match step {
                Step::Next | Step::Call { .. } => {
                    let st = &mut self.csf.groups[n].streams[s];
                    st.executed += 1;
                    let was_blocked = st.status == StreamStatus::Blocked;
                    st.status = StreamStatus::Ready;
                    r.progressed = true;
                    if from_ring {
                        let extract = self.mcu_rd64(ring_out + ring::EXTRACT)?;
                        self.mcu_wr64(ring_out + ring::EXTRACT, extract.wrapping_add(8))?;
                    } else if let Some(f) = self.csf.groups[n].streams[s].stack.last_mut() {
                        f.pc = f.pc.wrapping_add(8);
                    }
                    if was_blocked {
                        self.mcu_wr32(output + cs::STATUS_WAIT, 0)?;
                        self.mcu_wr32(output + cs::STATUS_BLOCKED_REASON, cs::BLOCKED_UNBLOCKED)?;
                    }
                    if let Step::Call { addr, len } = step {
                        let st = &mut self.csf.groups[n].streams[s];
                        let frame = Frame {
                            pc: addr,
                            end: addr.wrapping_add(len),
                        };
                        // The ring is the outermost level: calls nest `MAX_CALL_DEPTH - 1` deep.
                        if st.stack.len() >= csf::MAX_CALL_DEPTH - 1
                            || st.stack.push(frame).is_err()
                        {
                            self.stream_fatal(n, s, exception::CS_CALL_STACK_OVERFLOW, pc)?;
                            return Ok(r);
                        }
                    }
                }
                Step::Stall => {
                    // Woken again when an MMU command completes.
                    r.busy = true;
                    return Ok(r);
                }
                Step::Block { addr, value } => {
                    self.csf.groups[n].streams[s].status = StreamStatus::Blocked;
                    r.blocked = true;
                    self.mcu_wr32(output + cs::STATUS_WAIT, cs::STATUS_WAIT_SYNC)?;
                    self.mcu_wr64(output + cs::STATUS_WAIT_SYNC_PTR, addr)?;
                    self.mcu_wr32(output + cs::STATUS_WAIT_SYNC_VALUE, value as u32)?;
                    self.mcu_wr32(output + cs::STATUS_BLOCKED_REASON, cs::BLOCKED_SYNC_WAIT)?;
                    return Ok(r);
                }
                Step::Fault { code, va } => {
                    self.csf.groups[n].streams[s].status = StreamStatus::Faulted;
                    self.mcu_wr32(output + cs::FAULT, u32::from(code))?;
                    self.mcu_wr64(output + cs::FAULT_INFO, va)?;
                    self.cs_event(n, s, cs::FAULT_EVENT)?;
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
                } => {
                    self.csf.groups[n].streams[s].status = StreamStatus::TilerOom;
                    self.mcu_wr64(output + cs::HEAP_ADDRESS, ctx)?;
                    self.mcu_wr32(output + cs::HEAP_VT_START, vt_start)?;
                    self.mcu_wr32(output + cs::HEAP_VT_END, vt_end)?;
                    // No fragment work: every finished tiling pass has been rendered.
                    self.mcu_wr32(output + cs::HEAP_FRAG_END, vt_end)?;
                    self.cs_event(n, s, cs::TILER_OOM)?;
                    return Ok(r);
                }
            }
        }
        Ok(r)
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

    fn execute_inner(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        word: u64,
        r: &mut RunResult,
    ) -> Result<Step, Step> {
        let invalid = Step::Fatal {
            code: exception::CS_INSTR_INVALID,
        };
        let op = instr::decode(word).map_err(|_| invalid)?;
        let reg = |i: u8| Some(usize::from(i)).filter(|&i| i < csf::NUM_REGS);
        let pair =
            |i: u8| Some(usize::from(i)).filter(|&i| i.is_multiple_of(2) && i + 1 < csf::NUM_REGS);
        let regs = |gpu: &Self| gpu.csf.groups[n].streams[s].regs;
        let get64 = |gpu: &Self, i: usize| {
            let r = regs(gpu);
            u64::from(r[i]) | u64::from(r[i + 1]) << 32
        };
        match op {
            Op::Nop | Op::Wait { .. } => {}
            Op::Move48 { d, imm } => {
                let d = pair(d).ok_or(invalid)?;
                self.set64(n, s, d, imm);
            }
            Op::Move32 { r: d, imm } => {
                let d = reg(d).ok_or(invalid)?;
                self.csf.groups[n].streams[s].regs[d] = imm;
            }
            Op::AddImm32 { d, s: src, imm } => {
                let (d, src) = (reg(d).ok_or(invalid)?, reg(src).ok_or(invalid)?);
                let v = regs(self)[src].wrapping_add_signed(imm);
                self.csf.groups[n].streams[s].regs[d] = v;
            }
            Op::AddImm64 { d, s: src, imm } => {
                let (d, src) = (pair(d).ok_or(invalid)?, pair(src).ok_or(invalid)?);
                let v = get64(self, src).wrapping_add_signed(i64::from(imm));
                self.set64(n, s, d, v);
            }
            Op::LoadMultiple {
                base,
                addr,
                offset,
                mask,
            }
            | Op::StoreMultiple {
                base,
                addr,
                offset,
                mask,
            } => {
                let load = matches!(op, Op::LoadMultiple { .. });
                let base = reg(base).ok_or(invalid)?;
                let addr = pair(addr).ok_or(invalid)?;
                let va = get64(self, addr).wrapping_add_signed(i64::from(offset));
                if !va.is_multiple_of(4)
                    || base + (16 - mask.leading_zeros() as usize) > csf::NUM_REGS
                {
                    return Err(invalid);
                }
                for i in 0..16 {
                    if mask & (1 << i) == 0 {
                        continue;
                    }
                    let at = va.wrapping_add(4 * i as u64);
                    if load {
                        let v = self.stream_read(n, s, as_nr, at, 4)? as u32;
                        self.csf.groups[n].streams[s].regs[base + i] = v;
                    } else {
                        let v = u64::from(regs(self)[base + i]);
                        self.stream_write(n, s, as_nr, at, v, 4)?;
                    }
                }
            }
            Op::Call { addr, len } => {
                let addr = pair(addr).ok_or(invalid)?;
                let len_reg = reg(len).ok_or(invalid)?;
                let addr = get64(self, addr);
                let len = u64::from(regs(self)[len_reg]);
                if !addr.is_multiple_of(8) || !len.is_multiple_of(8) {
                    return Err(invalid);
                }
                return Ok(Step::Call { addr, len });
            }
            Op::SyncAdd32 { addr, data }
            | Op::SyncSet32 { addr, data }
            | Op::SyncAdd64 { addr, data }
            | Op::SyncSet64 { addr, data } => {
                let wide = matches!(op, Op::SyncAdd64 { .. } | Op::SyncSet64 { .. });
                let add = matches!(op, Op::SyncAdd32 { .. } | Op::SyncAdd64 { .. });
                let addr = get64(self, pair(addr).ok_or(invalid)?);
                let (len, data) = if wide {
                    (8, get64(self, pair(data).ok_or(invalid)?))
                } else {
                    (4, u64::from(regs(self)[reg(data).ok_or(invalid)?]))
                };
                if !addr.is_multiple_of(len as u64) {
                    return Err(invalid);
                }
                let v = if add {
                    let old = self.stream_read(n, s, as_nr, addr, len)?;
                    old.wrapping_add(data)
                } else {
                    data
                };
                self.stream_write(n, s, as_nr, addr, v, len)?;
                r.synced = true;
                if self.csg_event(n, csg::SYNC_UPDATE).is_err() {
                    r.mcu_fault = true;
                }
            }
            Op::SyncWait32 { cond, addr, data } | Op::SyncWait64 { cond, addr, data } => {
                let wide = matches!(op, Op::SyncWait64 { .. });
                let addr = get64(self, pair(addr).ok_or(invalid)?);
                let (len, value) = if wide {
                    (8, get64(self, pair(data).ok_or(invalid)?))
                } else {
                    (4, u64::from(regs(self)[reg(data).ok_or(invalid)?]))
                };
                if !addr.is_multiple_of(len as u64) {
                    return Err(invalid);
                }
                let mem = self.stream_read(n, s, as_nr, addr, len)?;
                if !cond.satisfied(mem, value) {
                    return Ok(Step::Block { addr, value });
                }
            }
            Op::StoreState {
                addr,
                state,
                offset,
            } => {
                let va =
                    get64(self, pair(addr).ok_or(invalid)?).wrapping_add_signed(i64::from(offset));
                let v = match state {
                    instr::STATE_TIMESTAMP => self.timestamp_now(),
                    instr::STATE_CYCLE_COUNT => self.cycles(),
                    _ => return Err(invalid),
                };
                if !va.is_multiple_of(8) {
                    return Err(invalid);
                }
                // Without COUNTER_EN the firmware gives streams no counter: 0 is stored.
                let v = if self.counters_enabled { v } else { 0 };
                self.stream_write(n, s, as_nr, va, v, 8)?;
            }
            Op::HeapSet { addr } => {
                let ctx = get64(self, pair(addr).ok_or(invalid)?);
                self.csf.groups[n].streams[s].heap_ctx = ctx;
            }
            Op::RunIdvs { first, count, tag } => {
                // Tiling runs on the tiler and the shader cores: powered off, they fault it.
                if !self.cores_powered() {
                    return Err(Step::Fault {
                        code: exception::CS_ENDPOINT_FAULT,
                        va: 0,
                    });
                }
                let first = get64(self, pair(first).ok_or(invalid)?);
                let count = regs(self)[reg(count).ok_or(invalid)?];
                let tag = get64(self, pair(tag).ok_or(invalid)?);
                let ctx = self.csf.groups[n].streams[s].heap_ctx;
                if ctx == 0 || !ctx.is_multiple_of(8) || count > heap::MAX_RUN_WORDS {
                    return Err(invalid);
                }
                return self.run_idvs(n, s, as_nr, ctx, first, count, tag);
            }
        }
        Ok(Step::Next)
    }

    /// `RUN_IDVS`: writes `count` words into the heap whose context is at `ctx` (see
    /// [`heap`]). Progress survives a stall or a `TILER_OOM` in the stream's state, so that
    /// executing the instruction again goes on where it stopped.
    #[allow(clippy::too_many_arguments)]
    fn run_idvs(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        ctx: u64,
        first: u64,
        count: u32,
        tag: u64,
    ) -> Result<Step, Step> {
        let mut run = match self.csf.groups[n].streams[s].tiler {
            Some(run) => run,
            None => {
                let link = self.stream_read(n, s, as_nr, ctx.wrapping_add(heap::CTX_CHUNK), 8)?;
                let top = self.stream_read(n, s, as_nr, ctx.wrapping_add(heap::CTX_TOP), 8)?;
                let vt = self.stream_read(n, s, as_nr, ctx.wrapping_add(heap::CTX_VT_START), 8)?;
                TilerRun {
                    link,
                    top,
                    done: 0,
                    vt_start: (vt as u32).wrapping_add(1),
                    vt_end: (vt >> 32) as u32,
                }
            }
        };
        let res = self.tile(n, s, as_nr, ctx, first, count, tag, &mut run);
        let st = &mut self.csf.groups[n].streams[s];
        st.tiler = Some(run);
        if !matches!(res, Ok(Step::Next)) {
            return res;
        }
        // Done: the context records where the next run starts and that this one finished.
        let vt = u64::from(run.vt_start) | u64::from(run.vt_start) << 32;
        self.stream_write(n, s, as_nr, ctx.wrapping_add(heap::CTX_CHUNK), run.link, 8)?;
        self.stream_write(n, s, as_nr, ctx.wrapping_add(heap::CTX_TOP), run.top, 8)?;
        self.stream_write(n, s, as_nr, ctx.wrapping_add(heap::CTX_VT_START), vt, 8)?;
        self.csf.groups[n].streams[s].tiler = None;
        Ok(Step::Next)
    }

    /// The word loop of [`run_idvs`](Self::run_idvs).
    #[allow(clippy::too_many_arguments)]
    fn tile(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        ctx: u64,
        first: u64,
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
                // An unused heap starts in its first chunk.
                if heap::link_size(first) <= heap::CHUNK_HEADER_SIZE {
                    return Err(oom(heap::link_addr(first)));
                }
                run.link = first;
                run.top = heap::link_addr(first).wrapping_add(heap::CHUNK_HEADER_SIZE);
            }
            let chunk = heap::link_addr(run.link);
            let end = chunk.wrapping_add(heap::link_size(run.link));
            if run.top.wrapping_add(8) > end {
                // This chunk is full: on to the next one, if any.
                let mut next = self.stream_read(n, s, as_nr, chunk, 8)?;
                if next == 0 {
                    match self.csf.groups[n].streams[s].oom_answer {
                        None => {
                            return Ok(Step::TilerOom {
                                ctx,
                                vt_start: run.vt_start,
                                vt_end: run.vt_end,
                            })
                        }
                        Some(0) => {
                            self.csf.groups[n].streams[s].oom_answer = None;
                            return Err(oom(ctx));
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
            let word = tag.wrapping_add(u64::from(run.done));
            self.stream_write(n, s, as_nr, run.top, word, 8)?;
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
        put(suspend::TILER + 20, &t.vt_start.to_le_bytes());
        put(suspend::TILER + 24, &t.vt_end.to_le_bytes());
    }
    if let Some(a) = st.oom_answer {
        flags |= suspend::OOM_ANSWER;
        put(suspend::OOM, &a.to_le_bytes());
    }
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

/// The stream a suspend record describes (keeping the slot's injected `hang`), and its ring
/// extract position. A record that makes no sense (a call stack deeper than the engine's)
/// gives a stream stopped by a fatal error.
fn load_stream(rec: &[u8; suspend::USED as usize], hang: bool) -> (Stream, u64) {
    let u32_at = |off: u64| {
        let at = off as usize;
        let mut b = [0u8; 4];
        b.copy_from_slice(&rec[at..at + 4]);
        u32::from_le_bytes(b)
    };
    let u64_at = |off: u64| u64::from(u32_at(off)) | u64::from(u32_at(off + 4)) << 32;
    let flags = u32_at(suspend::FLAGS);
    let mut st = Stream {
        started: flags & suspend::STARTED != 0,
        hang,
        heap_ctx: u64_at(suspend::HEAP_CTX),
        ..Stream::default()
    };
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
            vt_start: u32_at(suspend::TILER + 20),
            vt_end: u32_at(suspend::TILER + 24),
        });
    }
    if flags & suspend::OOM_ANSWER != 0 {
        st.oom_answer = Some(u64_at(suspend::OOM));
    }
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
    (st, u64_at(suspend::EXTRACT))
}

/// The source ID a stream's accesses carry in `AS_FAULTSTATUS`.
fn stream_source(n: usize, s: usize) -> u16 {
    (n * csf::STREAMS_PER_CSG + s) as u16
}

#[derive(Default)]
struct RunResult {
    mcu_fault: bool,
    progressed: bool,
    synced: bool,
    blocked: bool,
    busy: bool,
}

#[cfg(all(test, feature = "std"))]
#[path = "engine_tests.rs"]
mod tests;
