// SPDX-License-Identifier: GPL-2.0 OR MIT

use std::sync::Arc;

use crate::csf::{self, cs, csg, glb, ring};
use crate::regs::{self, as_cmd, as_reg, doorbell, mcu};
use crate::testutil::{HandTables, RW_PAGE};
use crate::{Config, Gpu, IrqLine, PhysAddr, SimMemory, WalkConfig};
use ::csf::WaitCondition as Condition;

/// A small assembler for the tests' streams, over the `csf` crate's encoders (register numbers
/// as plain integers, as the tests write them).
mod instr {
    use ::csf::{
        HeapOp, Imm48, Instr, Reg, Reg64, Slot, SlotMask, SyncOp, WaitCondition, WaitMask,
    };

    pub(super) const fn nop() -> u64 {
        Instr::nop().encode()
    }
    pub(super) const fn move48(d: u8, imm: u64) -> u64 {
        Instr::move48(Reg64(d), Imm48::from_low_bits(imm)).encode()
    }
    pub(super) const fn move32(r: u8, imm: u32) -> u64 {
        Instr::move32(Reg(r), imm).encode()
    }
    pub(super) const fn wait(mask: u8) -> u64 {
        Instr::wait(WaitMask::from_bits(mask)).encode()
    }
    pub(super) const fn add_imm32(d: u8, s: u8, imm: i32) -> u64 {
        Instr::add_imm32(Reg(d), Reg(s), imm).encode()
    }
    pub(super) const fn add_imm64(d: u8, s: u8, imm: i32) -> u64 {
        Instr::add_imm64(Reg64(d), Reg64(s), imm).encode()
    }
    pub(super) const fn load_multiple(base: u8, addr: u8, offset: i16, mask: u16) -> u64 {
        Instr::load_multiple(Reg(base), Reg64(addr), offset, mask).encode()
    }
    pub(super) const fn store_multiple(base: u8, addr: u8, offset: i16, mask: u16) -> u64 {
        Instr::store_multiple(Reg(base), Reg64(addr), offset, mask).encode()
    }
    pub(super) const fn call(addr: u8, len: u8) -> u64 {
        Instr::call(Reg64(addr), Reg(len)).encode()
    }
    pub(super) const fn sync_add64(addr: u8, data: u8) -> u64 {
        Instr::sync_add64(SyncOp::new(Reg64(addr), Reg64(data))).encode()
    }
    pub(super) const fn sync_set32(addr: u8, data: u8) -> u64 {
        Instr::sync_set32(SyncOp::new(Reg64(addr), Reg(data))).encode()
    }
    pub(super) const fn sync_wait64(cond: WaitCondition, addr: u8, data: u8) -> u64 {
        Instr::sync_wait64(cond, Reg64(addr), Reg64(data)).encode()
    }
    pub(super) const fn heap_set(addr: u8) -> u64 {
        Instr::heap_set(Reg64(addr)).encode()
    }
    /// `REQ_RESOURCE` of the IDVS endpoint alone.
    pub(super) const fn req_idvs() -> u64 {
        Instr::ReqResource {
            compute: false,
            fragment: false,
            tiler: false,
            idvs: true,
        }
        .encode()
    }
    /// `HEAP_OPERATION op` after the slots of `wait`, signalling slot 1.
    pub(super) const fn heap_op(operation: HeapOp, wait: u16) -> u64 {
        Instr::HeapOperation {
            operation,
            wait_mask: SlotMask::from_bits(wait),
            signal_slot: Slot::of::<1>(),
        }
        .encode()
    }
    /// `RUN_IDVS` with the tiler allocating from the heap.
    pub(super) const fn run_idvs() -> u64 {
        Instr::RunIdvs {
            flags_override: 0,
            progress_increment: false,
            malloc_enable: true,
            draw_id_register_enable: false,
            varying_srt_select: false,
            varying_fau_select: false,
            varying_tsd_select: false,
            fragment_srt_select: false,
            fragment_tsd_select: false,
            draw_id: Reg(0),
        }
        .encode()
    }
    /// A render pass's tiling as a stream writes it: the heap context in `d2`, the tiler
    /// context in `d40`, `count` entries from index `first`, the pass counted as started
    /// (waited for) and finished (once the tiling's endpoint entry, 0, drains). The
    /// `RUN_IDVS` is word 9.
    pub(super) const fn tile(ctx: u64, tiler_ctx: u64, count: u32, first: u32) -> [u64; 11] {
        [
            move48(2, ctx),
            heap_set(2),
            req_idvs(),
            move48(40, tiler_ctx),
            move32(33, count),
            move32(34, 1),
            move32(35, first),
            heap_op(HeapOp::VertexTilerStarted, 0),
            wait(0b10),
            run_idvs(),
            heap_op(HeapOp::VertexTilerCompleted, 0b1),
        ]
    }
}

/// MCU address of the queue's ring input/output words.
const QUEUE_IFACE: u64 = 0x0500_0000;
const RING_IN: u64 = QUEUE_IFACE;
const RING_OUT: u64 = QUEUE_IFACE + 0x100;
/// GPU addresses in the group's address space (AS 1).
const RING: u64 = 0x10_0000;
const DATA: u64 = 0x20_0000;
const CALLEE: u64 = 0x30_0000;
/// Two pages for heap chunks.
const HEAP: u64 = 0x40_0000;
/// Bytes of ring per stream (stream `s` uses `RING + s * RING_SIZE`).
const RING_SIZE: u64 = 0x400;

/// MCU address of CSG `n`'s input block.
fn ci_of(n: usize) -> u64 {
    Fw::shared(csf::csg_input(n))
}

struct Fw {
    gpu: Gpu,
    mem: Arc<SimMemory>,
    inserted: u64,
}

fn map_range(t: &HandTables, mem: &SimMemory, va: u64, pages: u64) {
    for i in 0..pages {
        let pa = mem.alloc(1).unwrap();
        t.map(mem, va + i * 4096, pa, RW_PAGE);
    }
}

fn enable_as(gpu: &mut Gpu, n: usize, root: PhysAddr) {
    gpu.write64(as_reg(n, regs::AS_TRANSTAB_LO), root.0);
    gpu.write64(as_reg(n, regs::AS_MEMATTR_LO), 0x8888_8888_8888_8888);
    gpu.write64(
        as_reg(n, regs::AS_TRANSCFG_LO),
        WalkConfig::aarch64_4k(0, 48).transcfg,
    );
    gpu.write32(as_reg(n, regs::AS_COMMAND), as_cmd::UPDATE);
}

impl Fw {
    /// A booted GPU with the shared region mapped in AS 0 and a group VM in AS 1.
    fn boot() -> Fw {
        let mut cfg = Config::g610();
        cfg.timings.mmu_command_ns = 0;
        Fw::boot_with(cfg)
    }

    /// [`Fw::boot`] with another configuration, and a firmware that serves every request
    /// within the doorbell's register write ([`Timings::fw_ack_ns`](crate::Timings::fw_ack_ns)
    /// and its jitter 0): the tests of the engine check what a request does, the tests of
    /// [`late`] how long it takes.
    fn boot_with(mut cfg: Config) -> Fw {
        cfg.timings.fw_ack_ns = 0;
        cfg.timings.fw_ack_jitter_ns = 0;
        Fw::boot_late(cfg)
    }

    /// [`Fw::boot`] with configuration `cfg` as it is (the firmware's latency included).
    fn boot_late(cfg: Config) -> Fw {
        let mut gpu = Gpu::new(cfg);
        let mem = gpu.memory().clone();
        let mcu_tables = HandTables::new(&mem);
        map_range(
            &mcu_tables,
            &mem,
            csf::SHARED_REGION_VA,
            csf::SHARED_REGION_SIZE / 4096,
        );
        map_range(&mcu_tables, &mem, QUEUE_IFACE, 1);
        let user = HandTables::new(&mem);
        map_range(&user, &mem, RING, 1);
        map_range(&user, &mem, DATA, 1);
        map_range(&user, &mem, CALLEE, 1);
        map_range(&user, &mem, HEAP, 2);
        enable_as(&mut gpu, 0, mcu_tables.root);
        enable_as(&mut gpu, 1, user.root);
        gpu.write32(regs::JOB_IRQ_MASK, u32::MAX);
        // The MCU needs the L2, and tiling needs the shader cores and the tiler.
        crate::gpu::tests::power_up(&mut gpu);
        gpu.write32(regs::MCU_CONTROL, mcu::ENABLED);
        gpu.advance(gpu.config().timings.mcu_ns);
        assert_eq!(gpu.read32(regs::MCU_STATUS), mcu::ENABLED);
        assert!(gpu.csf_booted());
        assert_eq!(gpu.read32(regs::JOB_IRQ_RAWSTAT), 1 << 31, "boot interrupt");
        gpu.write32(regs::JOB_IRQ_CLEAR, u32::MAX);
        Fw {
            gpu,
            mem,
            inserted: 0,
        }
    }

    fn pa(&self, as_nr: usize, va: u64) -> PhysAddr {
        self.gpu
            .walk(as_nr, va, crate::AccessType::Read)
            .unwrap()
            .pa
    }

    fn rd32(&self, va: u64) -> u32 {
        self.mem.read_u32(self.pa(0, va)).unwrap()
    }

    fn wr32(&self, va: u64, v: u32) {
        self.mem.write_u32(self.pa(0, va), v).unwrap()
    }

    fn rd64(&self, va: u64) -> u64 {
        self.mem.read_u64(self.pa(0, va)).unwrap()
    }

    fn wr64(&self, va: u64, v: u64) {
        self.mem.write_u64(self.pa(0, va), v).unwrap()
    }

    fn user_rd64(&self, va: u64) -> u64 {
        self.mem.read_u64(self.pa(1, va)).unwrap()
    }

    fn user_rd32(&self, va: u64) -> u32 {
        self.mem.read_u32(self.pa(1, va)).unwrap()
    }

    fn user_wr64(&self, va: u64, v: u64) {
        self.mem.write_u64(self.pa(1, va), v).unwrap()
    }

    fn shared(off: u64) -> u64 {
        csf::SHARED_REGION_VA + off
    }

    /// Toggles `bits` of the input word at `req` relative to the output word at `ack`.
    fn toggle(&self, req: u64, ack: u64, bits: u32) {
        let cur = self.rd32(req);
        let out = self.rd32(ack);
        self.wr32(req, (cur & !bits) | ((out ^ bits) & bits));
    }

    fn glb_doorbell_csg(&mut self, n: usize) {
        self.toggle(
            Fw::shared(csf::GLB_INPUT + glb::DOORBELL_REQ),
            Fw::shared(csf::GLB_OUTPUT + glb::DOORBELL_ACK),
            1 << n,
        );
        self.gpu.write32(doorbell(0), 1);
    }

    /// Starts CSG `n` on AS 1 with stream `s` on the ring.
    fn start_stream(&mut self, n: usize, s: usize) {
        self.start_stream_prio(n, s, 0);
    }

    /// [`Fw::start_stream`] with stream priority `prio` in the stream's `CONFIG`.
    fn start_stream_prio(&mut self, n: usize, s: usize, prio: u32) {
        self.request_start(n, s, prio);
        self.glb_doorbell_csg(n);
        let co = Fw::shared(csf::csg_output(n));
        let so = Fw::shared(csf::cs_output(n, s));
        assert_eq!(self.rd32(co + csg::ACK) & csg::STATE_MASK, csg::STATE_START);
        assert_eq!(self.rd32(so + cs::ACK) & cs::STATE_MASK, cs::STATE_START);
        assert_eq!(
            self.rd32(co + csg::DOORBELL_ACK),
            self.rd32(ci_of(n) + csg::DOORBELL_REQ)
        );
    }

    /// Writes the requests that start CSG `n` on AS 1 with stream `s` (priority `prio`) on the
    /// ring, without ringing the global doorbell.
    fn request_start(&mut self, n: usize, s: usize, prio: u32) {
        let ci = Fw::shared(csf::csg_input(n));
        let co = Fw::shared(csf::csg_output(n));
        let si = Fw::shared(csf::cs_input(n, s));
        let (ring_in, ring_out) = (RING_IN + 0x20 * s as u64, RING_OUT + 0x20 * s as u64);
        self.wr64(si + cs::RINGBUF_BASE, RING + RING_SIZE * s as u64);
        self.wr32(si + cs::RINGBUF_SIZE, RING_SIZE as u32);
        self.wr64(si + cs::RINGBUF_INPUT, ring_in);
        self.wr64(si + cs::RINGBUF_OUTPUT, ring_out);
        self.wr32(si + cs::CONFIG, 1 << 8 | prio);
        self.wr32(si + cs::ACK_IRQ_MASK, u32::MAX);
        let req = self.rd32(si + cs::REQ);
        self.wr32(si + cs::REQ, (req & !cs::STATE_MASK) | cs::STATE_START);
        self.wr32(ci + csg::CONFIG, 1);
        self.wr32(ci + csg::ACK_IRQ_MASK, u32::MAX);
        let req = self.rd32(ci + csg::REQ);
        self.wr32(ci + csg::REQ, (req & !csg::STATE_MASK) | csg::STATE_START);
        self.toggle(ci + csg::DOORBELL_REQ, co + csg::DOORBELL_ACK, 1 << s);
    }

    /// Appends instructions to stream `s`'s ring and rings its doorbell.
    fn submit(&mut self, s: usize, code: &[u64]) {
        let base = RING + RING_SIZE * s as u64;
        let ring_in = RING_IN + 0x20 * s as u64;
        let mut insert = self.rd64(ring_in + ring::INSERT);
        for w in code {
            self.user_wr64(base + (insert % RING_SIZE), *w);
            insert += 8;
        }
        self.wr64(ring_in + ring::INSERT, insert);
        self.inserted = insert;
        self.gpu.write32(doorbell(1), 1);
    }

    fn run(&mut self) {
        self.gpu.advance(100_000);
    }

    fn extract(&self, s: usize) -> u64 {
        self.rd64(RING_OUT + 0x20 * s as u64 + ring::EXTRACT)
    }
}

#[test]
fn boot_publishes_the_interface() {
    let fw = Fw::boot();
    let g = Fw::shared(csf::GLB_CONTROL);
    assert_eq!(fw.rd32(g + glb::VERSION), csf::IFACE_VERSION);
    assert_eq!(fw.rd32(g + glb::GROUP_NUM), 8);
    assert_eq!(fw.rd32(g + glb::GROUP_STRIDE), 0x1000);
    assert_eq!(
        u64::from(fw.rd32(g + glb::INPUT_VA)),
        Fw::shared(csf::GLB_INPUT)
    );
    let c = Fw::shared(csf::csg_control(3));
    assert_eq!(fw.rd32(c + csg::STREAM_NUM), 8);
    assert_eq!(
        u64::from(fw.rd32(c + csg::OUTPUT_VA)),
        Fw::shared(csf::csg_output(3))
    );
    let sc = Fw::shared(csf::cs_control(3, 7));
    assert_eq!((fw.rd32(sc + cs::FEATURES) & 0xff) + 1, 96);
    assert_eq!(
        u64::from(fw.rd32(sc + cs::INPUT_VA)),
        Fw::shared(csf::cs_input(3, 7))
    );
    // Every published block lies inside the shared region.
    assert!(csf::cs_output(7, 7) + 0xd8 <= csf::SHARED_REGION_SIZE);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the memory paths are covered by the others.
fn global_requests_are_acknowledged() {
    let mut fw = Fw::boot();
    let (i, o) = (Fw::shared(csf::GLB_INPUT), Fw::shared(csf::GLB_OUTPUT));
    fw.wr32(i + glb::ACK_IRQ_MASK, glb::REQ_PING);
    fw.toggle(i + glb::REQ, o + glb::ACK, glb::REQ_PING);
    assert!(!fw.gpu.irq_pending(IrqLine::Job));
    fw.gpu.write32(doorbell(0), 1);
    assert_eq!(fw.rd32(o + glb::ACK), fw.rd32(i + glb::REQ));
    assert!(fw.gpu.irq_pending(IrqLine::Job));
    assert_eq!(fw.gpu.read32(regs::JOB_IRQ_STATUS), 1 << 31);
    // Halting.
    fw.toggle(i + glb::REQ, o + glb::ACK, glb::REQ_HALT);
    fw.gpu.write32(doorbell(0), 1);
    assert_eq!(fw.gpu.read32(regs::MCU_STATUS), mcu::HALT);
}

#[test]
fn a_caller_driven_executor_runs_a_stream_to_completion() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    // Enough instructions for several engine steps (16 per step).
    let mut code = std::vec::Vec::new();
    code.push(instr::move48(10, DATA + 0x40));
    code.push(instr::move48(12, 1));
    for _ in 0..40 {
        code.push(instr::sync_add64(10, 12));
    }
    fw.submit(0, &code);
    let start = fw.gpu.now_ns();
    // No thread and no `advance`: the test is the executor, one step at a time.
    let (served, advanced) = crate::testutil::run_to_idle(&mut fw.gpu, 1_000);
    assert_eq!(fw.extract(0), fw.inserted);
    assert_eq!(fw.user_rd64(DATA + 0x40), 40);
    assert_eq!(fw.gpu.stream_instructions(0, 0), 42);
    assert!(
        served.contains(&IrqLine::Job),
        "the group's interrupt: {served:?}"
    );
    assert!(advanced >= 3, "42 instructions take several engine steps");
    let step_ns = fw.gpu.config().timings.cs_step_ns;
    assert_eq!(fw.gpu.now_ns() - start, advanced as u64 * step_ns);
    assert_eq!(fw.gpu.step(None), crate::Progress::Idle);
    assert!(fw.gpu.bus_errors().is_empty());
}

#[test]
fn a_reset_leaves_the_engine_as_new() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    fw.submit(0, &[instr::move48(2, DATA), instr::move32(4, 9)]);
    fw.run();
    let fresh = Gpu::g610();
    assert!(fw.gpu.csf != fresh.csf);
    fw.gpu.write32(regs::GPU_COMMAND, regs::gpu_cmd::SOFT_RESET);
    fw.gpu.advance(fw.gpu.config().timings.reset_ns);
    assert_eq!(fw.gpu.resets_completed(), 1);
    assert!(fw.gpu.csf == fresh.csf);
}

#[test]
fn stream_moves_stores_loads_and_signals() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    fw.submit(
        0,
        &[
            instr::move48(2, DATA),
            instr::move32(4, 0x1111),
            instr::move32(5, 0x2222),
            instr::store_multiple(4, 2, 0x10, 0b11),
            instr::load_multiple(6, 2, 0x10, 0b11),
            // Loads land when their scoreboard entry (the "other" one, 0) drains.
            instr::wait(1),
            instr::add_imm32(6, 6, -1),
            instr::add_imm64(8, 2, 0x100),
            instr::store_multiple(6, 8, 0, 0b1),
            instr::wait(0xff),
            instr::nop(),
            instr::move48(10, DATA + 0x80),
            instr::move48(12, 5),
            instr::sync_add64(10, 12),
            instr::sync_add64(10, 12),
            instr::move32(14, 7),
            instr::sync_set32(10, 14),
        ],
    );
    assert_eq!(fw.extract(0), 0, "nothing runs before time passes");
    fw.run();
    assert_eq!(fw.extract(0), fw.inserted);
    assert_eq!(fw.gpu.stream_instructions(0, 0), 17);
    assert_eq!(fw.user_rd64(DATA + 0x10), 0x2222_0000_1111);
    assert_eq!(fw.user_rd64(DATA + 0x100) as u32, 0x1110);
    assert_eq!(
        fw.user_rd64(DATA + 0x80),
        7,
        "set32 replaced the low half of 10"
    );
    // SYNC_UPDATE is pending in CSG 0's ACK, and the group's interrupt is up.
    let ack = fw.rd32(Fw::shared(csf::csg_output(0) + csg::ACK));
    let req = fw.rd32(Fw::shared(csf::csg_input(0) + csg::REQ));
    assert_ne!((ack ^ req) & csg::SYNC_UPDATE, 0);
    assert_ne!((ack ^ req) & csg::IDLE, 0, "the group went idle");
    assert_ne!(fw.gpu.read32(regs::JOB_IRQ_RAWSTAT) & 1, 0);
    assert!(fw.gpu.bus_errors().is_empty());
    // A status update reports the group idle.
    let (ci, co) = (
        Fw::shared(csf::csg_input(0)),
        Fw::shared(csf::csg_output(0)),
    );
    fw.toggle(ci + csg::REQ, co + csg::ACK, csg::STATUS_UPDATE);
    fw.glb_doorbell_csg(0);
    assert_eq!(fw.rd32(co + csg::STATUS_STATE), 1);
    // More work later continues from the extract pointer.
    fw.submit(
        0,
        &[instr::move32(20, 9), instr::store_multiple(20, 2, 0x20, 1)],
    );
    fw.run();
    assert_eq!(fw.user_rd64(DATA + 0x20) as u32, 9);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the memory paths are covered by the others.
fn call_runs_a_user_stream_and_overflow_is_fatal() {
    let mut fw = Fw::boot();
    let callee = [
        instr::move32(30, 0xcafe),
        instr::store_multiple(30, 2, 0x40, 1),
    ];
    for (i, w) in callee.iter().enumerate() {
        fw.user_wr64(CALLEE + 8 * i as u64, *w);
    }
    fw.start_stream(0, 0);
    fw.submit(
        0,
        &[
            instr::move48(2, DATA),
            instr::move48(40, CALLEE),
            instr::move32(42, 16),
            instr::call(40, 42),
            instr::move32(31, 0xbeef),
            instr::store_multiple(31, 2, 0x44, 1),
        ],
    );
    fw.run();
    assert_eq!(fw.user_rd64(DATA + 0x40), 0xbeef_0000_cafe);
    // A stream that calls itself overflows the call stack.
    let selfcall = [instr::call(40, 42)];
    fw.user_wr64(CALLEE + 0x100, selfcall[0]);
    fw.submit(
        0,
        &[
            instr::move48(40, CALLEE + 0x100),
            instr::move32(42, 8),
            instr::call(40, 42),
        ],
    );
    fw.run();
    assert!(fw.gpu.stream_faulted(0, 0));
    let so = Fw::shared(csf::cs_output(0, 0));
    assert_eq!(fw.rd32(so + cs::FATAL), 0x4a);
    let (ack, req) = (
        fw.rd32(so + cs::ACK),
        fw.rd32(Fw::shared(csf::cs_input(0, 0))),
    );
    assert_ne!((ack ^ req) & cs::FATAL_EVENT, 0);
    let irq_req = fw.rd32(Fw::shared(csf::csg_output(0) + csg::CS_IRQ_REQ));
    assert_eq!(irq_req & 1, 1);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the memory paths are covered by the others.
fn sync_wait_blocks_until_the_value_is_reached() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    fw.start_stream(0, 1);
    // Stream 1 waits until the counter exceeds 1, then stores a marker.
    fw.submit(
        1,
        &[
            instr::move48(2, DATA),
            instr::move48(4, DATA + 0x200),
            instr::move48(6, 1),
            instr::sync_wait64(Condition::Greater, 4, 6),
            instr::move32(8, 0x77),
            instr::store_multiple(8, 2, 0x300, 1),
        ],
    );
    fw.run();
    assert_eq!(fw.user_rd64(DATA + 0x300), 0);
    let so = Fw::shared(csf::cs_output(0, 1));
    assert_eq!(
        fw.rd32(so + cs::STATUS_BLOCKED_REASON),
        cs::BLOCKED_SYNC_WAIT
    );
    assert_eq!(fw.rd64(so + cs::STATUS_WAIT_SYNC_PTR), DATA + 0x200);
    // Stream 0 adds 1 twice; the second add releases stream 1.
    let add = [
        instr::move48(4, DATA + 0x200),
        instr::move48(6, 1),
        instr::sync_add64(4, 6),
    ];
    fw.submit(0, &add);
    fw.run();
    assert_eq!(fw.user_rd64(DATA + 0x300), 0);
    fw.submit(0, &add[2..]);
    fw.run();
    assert_eq!(fw.user_rd64(DATA + 0x300), 0x77);
    assert_eq!(
        fw.rd32(so + cs::STATUS_BLOCKED_REASON),
        cs::BLOCKED_UNBLOCKED
    );
    // The host can release a waiter too (write, then ring a doorbell).
    fw.submit(
        1,
        &[
            instr::move48(6, 10),
            instr::move48(16, 9),
            instr::sync_wait64(Condition::Greater, 4, 16),
            instr::store_multiple(6, 2, 0x308, 1),
        ],
    );
    fw.run();
    assert_eq!(fw.user_rd64(DATA + 0x308), 0);
    fw.user_wr64(DATA + 0x200, 10);
    fw.gpu.write32(doorbell(1), 1);
    fw.run();
    assert_eq!(fw.user_rd64(DATA + 0x308), 10);
}

#[test]
fn a_cpu_write_releases_a_sync_wait_within_a_poll_interval() {
    let mut fw = Fw::boot();
    let poll = fw.gpu.config().timings.sync_poll_ns;
    fw.start_stream(0, 0);
    fw.submit(
        0,
        &[
            instr::move48(2, DATA),
            instr::move48(4, DATA + 0x200),
            instr::move48(6, 0),
            instr::sync_wait64(Condition::Greater, 4, 6),
            instr::move32(8, 0x55),
            instr::store_multiple(8, 2, 0x300, 1),
        ],
    );
    fw.run();
    assert_eq!(fw.user_rd64(DATA + 0x300), 0);
    // Blocked: the firmware looks at the word again every poll interval, nothing more often.
    let next = fw.gpu.next_event_ns().expect("a poll of the blocked wait");
    assert!(next > fw.gpu.now_ns() && next <= fw.gpu.now_ns() + poll);
    // The CPU sets the word, with no doorbell: the next poll sees it.
    fw.user_wr64(DATA + 0x200, 1);
    let written = fw.gpu.now_ns();
    while fw.user_rd64(DATA + 0x300) == 0 {
        assert!(
            fw.gpu.now_ns() <= written + poll + 100_000,
            "the write was not seen"
        );
        fw.gpu.advance(10_000);
    }
    assert_eq!(fw.user_rd64(DATA + 0x300), 0x55);
    // Nothing is blocked any more: no poll is left scheduled.
    fw.run();
    assert_eq!(fw.gpu.next_event_ns(), None);
}

#[test]
fn unmapped_access_faults_the_stream() {
    let mut fw = Fw::boot();
    fw.start_stream(2, 0);
    fw.submit(
        0,
        &[
            instr::move48(2, 0x7000_0000),
            instr::store_multiple(4, 2, 8, 1),
            instr::move32(4, 1),
        ],
    );
    fw.run();
    assert!(fw.gpu.stream_faulted(2, 0));
    let so = Fw::shared(csf::cs_output(2, 0));
    assert_eq!(
        fw.rd32(so + cs::FAULT) & 0xff,
        0xC1,
        "level-1 translation fault"
    );
    assert_eq!(fw.rd64(so + cs::FAULT_INFO), 0x7000_0008);
    // A store is asynchronous: the stream went on, and the fault came when the store ran.
    assert_eq!(fw.extract(0), 24);
    // The MMU saw it in AS 1, from the stream's source ID.
    assert_ne!(fw.gpu.read32(regs::MMU_IRQ_RAWSTAT) & 0x2, 0);
    let status = fw.gpu.read32(as_reg(1, regs::AS_FAULTSTATUS));
    assert_eq!(
        (status & 0xff, (status >> 8) & 3, status >> 16),
        (0xC1, 3, 16)
    );
    assert_ne!(fw.gpu.read32(regs::JOB_IRQ_RAWSTAT) & (1 << 2), 0);
    // Restarting the stream clears the fault.
    let si = Fw::shared(csf::cs_input(2, 0));
    let ci = Fw::shared(csf::csg_input(2));
    let co = Fw::shared(csf::csg_output(2));
    let req = fw.rd32(si + cs::REQ);
    fw.wr32(si + cs::REQ, req & !cs::STATE_MASK);
    fw.toggle(ci + csg::DOORBELL_REQ, co + csg::DOORBELL_ACK, 1);
    fw.glb_doorbell_csg(2);
    assert!(!fw.gpu.stream_faulted(2, 0));
    assert_eq!(fw.rd32(so + cs::FAULT), 0);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the memory paths are covered by the others.
fn injected_access_fault_and_invalid_instruction() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    fw.gpu.inject_stream_access_fault(0, 0);
    fw.submit(
        0,
        &[instr::move48(2, DATA), instr::store_multiple(4, 2, 0, 1)],
    );
    fw.run();
    assert!(fw.gpu.stream_faulted(0, 0));
    let so = Fw::shared(csf::cs_output(0, 0));
    assert_eq!(fw.rd32(so + cs::FAULT), 0xC3);
    assert_eq!(fw.rd64(so + cs::FAULT_INFO), DATA);

    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    fw.submit(0, &[0xee00_0000_0000_0000, instr::move48(3, 1)]);
    fw.run();
    let so = Fw::shared(csf::cs_output(0, 0));
    assert_eq!(fw.rd32(so + cs::FATAL), 0x49);
    assert_eq!(fw.rd64(so + cs::FATAL_INFO), RING);
    // An odd register pair is invalid too.
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    fw.submit(0, &[instr::move48(3, 1)]);
    fw.run();
    assert_eq!(fw.rd32(Fw::shared(csf::cs_output(0, 0)) + cs::FATAL), 0x49);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the memory paths are covered by the others.
fn hanging_stream_never_finishes_until_reset() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    fw.gpu.set_stream_hang(0, 0, true);
    fw.submit(0, &[instr::move48(2, DATA), instr::sync_add64(2, 2)]);
    for _ in 0..100 {
        fw.run();
    }
    assert_eq!(fw.extract(0), 0);
    assert_eq!(fw.gpu.stream_instructions(0, 0), 0);
    // A reset takes the firmware down with everything else.
    fw.gpu.write32(regs::GPU_COMMAND, regs::gpu_cmd::SOFT_RESET);
    fw.gpu.advance(1_000_000);
    assert!(!fw.gpu.csf_booted());
    assert_eq!(fw.gpu.read32(regs::MCU_STATUS), mcu::DISABLED);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the memory paths are covered by the others.
fn terminated_group_stops_running() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    let ci = Fw::shared(csf::csg_input(0));
    let co = Fw::shared(csf::csg_output(0));
    let req = fw.rd32(ci + csg::REQ);
    fw.wr32(ci + csg::REQ, req & !csg::STATE_MASK);
    fw.glb_doorbell_csg(0);
    assert_eq!(
        fw.rd32(co + csg::ACK) & csg::STATE_MASK,
        csg::STATE_TERMINATE
    );
    fw.submit(0, &[instr::nop()]);
    fw.run();
    assert_eq!(fw.extract(0), 0);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the memory paths are covered by the others.
fn locked_region_stalls_streams_until_unlock() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    let lock = crate::LockRegion::encode(DATA, 0x1000).unwrap();
    fw.gpu.write64(as_reg(1, regs::AS_LOCKADDR_LO), lock);
    fw.gpu.write32(as_reg(1, regs::AS_COMMAND), as_cmd::LOCK);
    fw.submit(
        0,
        &[
            instr::move48(2, DATA),
            instr::move32(4, 5),
            instr::store_multiple(4, 2, 0, 1),
        ],
    );
    fw.run();
    assert_eq!(fw.user_rd64(DATA), 0, "the store waits for the unlock");
    // Issued, the store no longer holds the stream: its scoreboard entry does.
    assert_eq!(fw.extract(0), 24);
    let so = Fw::shared(csf::cs_output(0, 0));
    assert_eq!(fw.rd32(so + cs::STATUS_SCOREBOARDS), 1);
    fw.gpu.write32(as_reg(1, regs::AS_COMMAND), as_cmd::UNLOCK);
    fw.run();
    assert_eq!(fw.user_rd64(DATA), 5);
    assert_eq!(fw.rd32(so + cs::STATUS_SCOREBOARDS), 0);
}

#[derive(Clone, Debug)]
enum Alu {
    Move32(u8, u32),
    Move48(u8, u64),
    Add32(u8, u8, i32),
    Add64(u8, u8, i32),
}

fn alu() -> impl proptest::strategy::Strategy<Value = Alu> {
    use proptest::prelude::*;
    prop_oneof![
        (0u8..16, any::<u32>()).prop_map(|(r, v)| Alu::Move32(r, v)),
        (0u8..8, any::<u64>()).prop_map(|(r, v)| Alu::Move48(r * 2, v)),
        (0u8..16, 0u8..16, any::<i32>()).prop_map(|(d, s, v)| Alu::Add32(d, s, v)),
        (0u8..8, 0u8..8, any::<i32>()).prop_map(|(d, s, v)| Alu::Add64(d * 2, s * 2, v)),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(32))]

    /// Register arithmetic agrees with a reference interpreter; the result is stored to
    /// memory with STORE_MULTIPLE and read back.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn register_arithmetic_matches_model(prog in proptest::collection::vec(alu(), 1..40)) {
        let mut fw = Fw::boot();
        fw.start_stream(0, 0);
        let mut model = [0u32; 16];
        let mut code = std::vec::Vec::new();
        for op in &prog {
            match *op {
                Alu::Move32(r, v) => {
                    model[usize::from(r)] = v;
                    code.push(instr::move32(r, v));
                }
                Alu::Move48(r, v) => {
                    let v = v & 0xffff_ffff_ffff;
                    model[usize::from(r)] = v as u32;
                    model[usize::from(r) + 1] = (v >> 32) as u32;
                    code.push(instr::move48(r, v));
                }
                Alu::Add32(d, s, v) => {
                    model[usize::from(d)] = model[usize::from(s)].wrapping_add(v as u32);
                    code.push(instr::add_imm32(d, s, v));
                }
                Alu::Add64(d, s, v) => {
                    let (d, s) = (usize::from(d), usize::from(s));
                    let src = u64::from(model[s]) | u64::from(model[s + 1]) << 32;
                    let r = src.wrapping_add(i64::from(v) as u64);
                    model[d] = r as u32;
                    model[d + 1] = (r >> 32) as u32;
                    code.push(instr::add_imm64(d as u8, s as u8, v));
                }
            }
        }
        code.push(instr::move48(40, DATA));
        code.push(instr::store_multiple(0, 40, 0, 0xffff));
        fw.submit(0, &code);
        fw.run();
        proptest::prop_assert_eq!(fw.extract(0), fw.inserted);
        for (i, want) in model.iter().enumerate() {
            let word = fw.user_rd64(DATA + 8 * (i as u64 / 2));
            let got = if i % 2 == 0 { word as u32 } else { (word >> 32) as u32 };
            proptest::prop_assert_eq!(got, *want, "register {}", i);
        }
    }
}

/// The heap context of the tiler tests, and a chunk link of one page.
const CTX: u64 = DATA + 0x800;
/// A tiler context (64-byte aligned) and the heap descriptor it points to.
const TILER_CTX: u64 = DATA + 0xc00;
const HEAP_DESC: u64 = DATA + 0xc80;
const fn page_link(va: u64) -> u64 {
    va | 1
}

impl Fw {
    /// Writes a tiler context whose heap's first chunk is the page at `first`.
    fn tiler_context(&self, first: u64) {
        self.user_wr64(TILER_CTX + csf::heap::TILER_HEAP, HEAP_DESC);
        self.user_wr64(HEAP_DESC, 0x1000 << 32);
        self.user_wr64(HEAP_DESC + csf::heap::HEAP_BASE, first);
    }
}

impl Fw {
    /// Answers stream `s` of CSG `n`'s `TILER_OOM` with `link` (0: no memory), as a driver
    /// does: `HEAP_START`/`HEAP_END`, the acknowledgement, the stream's doorbell.
    fn answer_oom(&mut self, n: usize, s: usize, link: u64) {
        let si = Fw::shared(csf::cs_input(n, s));
        let so = Fw::shared(csf::cs_output(n, s));
        self.wr64(si + cs::HEAP_START, link);
        self.wr64(si + cs::HEAP_END, link);
        let ack = self.rd32(so + cs::ACK);
        let req = self.rd32(si + cs::REQ);
        self.wr32(si + cs::REQ, (req & !cs::TILER_OOM) | (ack & cs::TILER_OOM));
        let ci = Fw::shared(csf::csg_input(n));
        let co = Fw::shared(csf::csg_output(n));
        self.toggle(ci + csg::DOORBELL_REQ, co + csg::DOORBELL_ACK, 1 << s);
        self.glb_doorbell_csg(n);
    }

    /// Whether stream `s` of CSG `n` has an unacknowledged `TILER_OOM`.
    fn oom_pending(&self, n: usize, s: usize) -> bool {
        let ack = self.rd32(Fw::shared(csf::cs_output(n, s) + cs::ACK));
        let req = self.rd32(Fw::shared(csf::cs_input(n, s) + cs::REQ));
        (ack ^ req) & cs::TILER_OOM != 0
    }
}

#[test]
fn tiler_oom_waits_for_a_chunk_and_faults_without_one() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    // A heap three passes old whose only chunk has room for two more entries.
    fw.user_wr64(CTX + csf::heap::CTX_CHUNK, page_link(HEAP));
    fw.user_wr64(CTX + csf::heap::CTX_TOP, HEAP + 0x1000 - 16);
    fw.user_wr64(CTX + csf::heap::CTX_VT_START, 3 | 3 << 32);
    fw.user_wr64(CTX + csf::heap::CTX_FRAG_END, 3);
    fw.tiler_context(HEAP);
    let tile = |count: u32| {
        let mut p = instr::tile(CTX, TILER_CTX, count, 0x100).to_vec();
        p.extend([
            instr::move32(10, 0x77),
            instr::store_multiple(10, 2, 0x100, 1),
        ]);
        p
    };
    fw.submit(0, &tile(4));
    fw.run();
    assert!(fw.gpu.stream_waits_for_heap(0, 0));
    assert!(fw.oom_pending(0, 0));
    assert_eq!(fw.user_rd64(HEAP + 0x1000 - 16), 0x100);
    assert_eq!(fw.user_rd64(HEAP + 0x1000 - 8), 0x101);
    let so = Fw::shared(csf::cs_output(0, 0));
    assert_eq!(fw.rd64(so + cs::HEAP_ADDRESS), CTX);
    assert_eq!(fw.rd32(so + cs::HEAP_VT_START), 4);
    assert_eq!(fw.rd32(so + cs::HEAP_VT_END), 3);
    assert_eq!(fw.rd32(so + cs::HEAP_FRAG_END), 3);
    assert_eq!(fw.rd64(so + cs::STATUS_CMD_PTR), RING + 9 * 8);
    assert_eq!(
        fw.rd32(Fw::shared(csf::csg_output(0) + csg::CS_IRQ_REQ)) & 1,
        1
    );
    // Nothing moves until the driver answers.
    fw.run();
    assert!(fw.gpu.stream_waits_for_heap(0, 0));
    assert_eq!(fw.user_rd32(DATA + 0x900), 0);
    // A second chunk: linked behind the first, the run goes on in it.
    fw.answer_oom(0, 0, page_link(HEAP + 0x1000));
    fw.run();
    assert!(!fw.gpu.stream_waits_for_heap(0, 0));
    assert_eq!(fw.user_rd64(HEAP), page_link(HEAP + 0x1000));
    assert_eq!(fw.user_rd64(HEAP + 0x1040), 0x102);
    assert_eq!(fw.user_rd64(HEAP + 0x1048), 0x103);
    assert_eq!(fw.user_rd32(DATA + 0x900), 0x77);
    assert_eq!(
        fw.user_rd64(CTX + csf::heap::CTX_CHUNK),
        page_link(HEAP + 0x1000)
    );
    assert_eq!(fw.user_rd64(CTX + csf::heap::CTX_TOP), HEAP + 0x1050);
    assert_eq!(fw.user_rd64(CTX + csf::heap::CTX_VT_START), 4 | 4 << 32);
    // The second chunk nearly full and no memory to give: the stream faults.
    fw.user_wr64(CTX + csf::heap::CTX_TOP, HEAP + 0x2000 - 8);
    fw.submit(0, &tile(2));
    fw.run();
    assert!(fw.gpu.stream_waits_for_heap(0, 0));
    fw.answer_oom(0, 0, 0);
    fw.run();
    assert!(fw.gpu.stream_faulted(0, 0));
    assert_eq!(fw.rd32(so + cs::FAULT) & 0xff, 0x60);
    assert_eq!(fw.rd64(so + cs::FAULT_INFO), CTX);
    assert_eq!(fw.user_rd64(HEAP + 0x1000), 0, "nothing linked");
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the tiler's memory paths are covered by the OOM test.
fn tiling_follows_the_chunk_list_and_needs_a_heap_context() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    // A fresh heap of two linked chunks: the first run starts after the first chunk's header.
    fw.user_wr64(HEAP, page_link(HEAP + 0x1000));
    fw.tiler_context(HEAP);
    let tile = |count: u32, first: u32| instr::tile(CTX, TILER_CTX, count, first);
    fw.submit(0, &tile(2, 0x40));
    fw.run();
    assert_eq!(fw.user_rd64(HEAP + 0x40), 0x40);
    assert_eq!(fw.user_rd64(HEAP + 0x48), 0x41);
    assert_eq!(fw.user_rd64(CTX + csf::heap::CTX_CHUNK), page_link(HEAP));
    assert_eq!(fw.user_rd64(CTX + csf::heap::CTX_TOP), HEAP + 0x50);
    assert_eq!(fw.user_rd64(CTX + csf::heap::CTX_VT_START), 1 | 1 << 32);
    // With the first chunk (made) nearly full, the next run crosses into the linked one.
    fw.user_wr64(CTX + csf::heap::CTX_TOP, HEAP + 0xff8);
    fw.submit(0, &tile(3, 0x80));
    fw.run();
    assert!(!fw.gpu.stream_waits_for_heap(0, 0));
    assert!(!fw.gpu.stream_faulted(0, 0));
    assert_eq!(fw.user_rd64(HEAP + 0xff8), 0x80);
    assert_eq!(fw.user_rd64(HEAP + 0x1040), 0x81);
    assert_eq!(fw.user_rd64(HEAP + 0x1048), 0x82);
    assert_eq!(fw.user_rd64(CTX + csf::heap::CTX_TOP), HEAP + 0x1050);
    assert_eq!(fw.user_rd64(CTX + csf::heap::CTX_VT_START), 2 | 2 << 32);
    // Tiling without a heap context is an invalid instruction.
    fw.start_stream(0, 1);
    fw.submit(
        1,
        &[
            instr::req_idvs(),
            instr::move32(33, 1),
            instr::move32(34, 1),
            instr::run_idvs(),
        ],
    );
    fw.run();
    assert!(fw.gpu.stream_faulted(0, 1));
    let so = Fw::shared(csf::cs_output(0, 1));
    assert_eq!(fw.rd32(so + cs::FATAL) & 0xff, 0x49);
    // A context whose next free byte is the last word of the address space: the write
    // faults, nothing wraps.
    fw.user_wr64(CTX + csf::heap::CTX_TOP, u64::MAX - 7);
    fw.user_wr64(CTX + csf::heap::CTX_CHUNK, !0xfff | 1);
    fw.start_stream(0, 2);
    fw.submit(
        2,
        &[
            instr::move48(2, CTX),
            instr::heap_set(2),
            instr::req_idvs(),
            instr::move32(33, 2),
            instr::move32(34, 1),
            instr::run_idvs(),
        ],
    );
    fw.run();
    assert!(fw.gpu.stream_faulted(0, 2));
    let so = Fw::shared(csf::cs_output(0, 2));
    assert_eq!(fw.rd64(so + cs::FAULT_INFO), u64::MAX - 7);
}

/// `STORE_STATE` samples the counters only once the firmware acknowledged `COUNTER_EN`; tiling
/// with the cores powered off faults the stream; a stream doorbell to a disabled MCU is
/// reported.
#[test]
fn counters_need_counter_en_and_work_needs_powered_cores() {
    use ::csf::{Instr, Reg64, Slot, SlotMask, StateSel};
    const STATE_TIMESTAMP: StateSel = StateSel::Timestamp;
    const STATE_CYCLE_COUNT: StateSel = StateSel::CycleCount;
    let store = |state: StateSel, offset: i16| {
        Instr::store_state(state, Reg64(2), offset, SlotMask::NONE, Slot::ZERO).encode()
    };
    let mut fw = Fw::boot();
    fw.start_stream(1, 0);
    fw.submit(
        0,
        &[
            instr::move48(2, DATA),
            store(STATE_TIMESTAMP, 0),
            store(STATE_CYCLE_COUNT, 8),
        ],
    );
    fw.run();
    assert_eq!((fw.user_rd64(DATA), fw.user_rd64(DATA + 8)), (0, 0));
    // COUNTER_EN set and acknowledged: the stream sees the registers' values.
    let gi = Fw::shared(csf::GLB_INPUT + glb::REQ);
    fw.wr32(gi, fw.rd32(gi) | glb::REQ_COUNTER_EN);
    fw.gpu.write32(doorbell(0), 1);
    assert_ne!(
        fw.rd32(Fw::shared(csf::GLB_OUTPUT + glb::ACK)) & glb::REQ_COUNTER_EN,
        0
    );
    fw.gpu.advance(1_000_000);
    let before = (
        fw.gpu.read64(regs::TIMESTAMP_LO),
        fw.gpu.read64(regs::CYCLE_COUNT_LO),
    );
    fw.submit(
        0,
        &[
            instr::move48(2, DATA),
            store(STATE_TIMESTAMP, 0),
            store(STATE_CYCLE_COUNT, 8),
        ],
    );
    fw.run();
    let (ts, cy) = (fw.user_rd64(DATA), fw.user_rd64(DATA + 8));
    assert!(
        ts > before.0 && ts <= fw.gpu.read64(regs::TIMESTAMP_LO),
        "{ts} {before:?}"
    );
    assert!(cy > before.1 && cy <= fw.gpu.read64(regs::CYCLE_COUNT_LO));
    // A misaligned address is an invalid instruction.
    fw.submit(0, &[store(STATE_TIMESTAMP, 4)]);
    fw.run();
    assert!(fw.gpu.stream_faulted(1, 0));

    // Tiling with the shader cores off faults the stream with CS_ENDPOINT_FAULT.
    let mut fw = Fw::boot();
    fw.start_stream(1, 0);
    fw.gpu.write64(regs::SHADER_PWROFF_LO, u64::MAX);
    fw.gpu.advance(fw.gpu.config().timings.power_ns);
    fw.submit(
        0,
        &[
            instr::move48(2, HEAP),
            instr::heap_set(2),
            instr::req_idvs(),
            instr::move32(33, 1),
            instr::move32(34, 1),
            instr::run_idvs(),
        ],
    );
    fw.run();
    assert!(fw.gpu.stream_faulted(1, 0));
    let so = Fw::shared(csf::cs_output(1, 0));
    assert_eq!(
        fw.rd32(so + cs::FAULT) & 0xff,
        u32::from(csf::exception::CS_ENDPOINT_FAULT)
    );
    // A stream doorbell with the MCU disabled is a GPU fault.
    assert_eq!(fw.gpu.power_faults(), 0);
    fw.gpu.write32(regs::MCU_CONTROL, mcu::DISABLED);
    fw.gpu.write32(doorbell(1), 1);
    assert_eq!(fw.gpu.power_faults(), 1);
    assert_eq!(
        fw.gpu.read32(regs::GPU_FAULTSTATUS),
        crate::GPU_MCU_OFF_FAULT
    );
}

/// MCU address of a suspend buffer the tests map in AS 0.
const SUSPEND: u64 = 0x0600_0000;

impl Fw {
    /// Maps a suspend buffer at [`SUSPEND`] (fresh pages, zeroed).
    fn map_suspend_buf(&mut self) {
        let mcu = HandTables {
            root: PhysAddr(self.gpu.read64(as_reg(0, regs::AS_TRANSTAB_LO))),
        };
        map_range(&mcu, &self.mem, SUSPEND, csf::suspend::SIZE / 4096);
    }

    /// Requests `state` for CSG `n` with [`SUSPEND`] as its suspend buffer and waits for the
    /// acknowledgement (the firmware of [`Fw::boot_with`] answers within the doorbell).
    fn csg_state(&mut self, n: usize, state: u32) {
        let ci = Fw::shared(csf::csg_input(n));
        let co = Fw::shared(csf::csg_output(n));
        self.wr64(ci + csg::SUSPEND_BUF, SUSPEND);
        let req = self.rd32(ci + csg::REQ);
        self.wr32(ci + csg::REQ, (req & !csg::STATE_MASK) | state);
        self.glb_doorbell_csg(n);
        assert_eq!(self.rd32(co + csg::ACK) & csg::STATE_MASK, state);
    }

    /// Programs stream `s` of CSG `n` on stream `s`'s ring (as [`Fw::start_stream`] does) and
    /// resumes the group from [`SUSPEND`] on AS 1.
    fn resume_stream(&mut self, n: usize, s: usize) {
        let ci = Fw::shared(csf::csg_input(n));
        let co = Fw::shared(csf::csg_output(n));
        let si = Fw::shared(csf::cs_input(n, s));
        let (ring_in, ring_out) = (RING_IN + 0x20 * s as u64, RING_OUT + 0x20 * s as u64);
        self.wr64(si + cs::RINGBUF_BASE, RING + RING_SIZE * s as u64);
        self.wr32(si + cs::RINGBUF_SIZE, RING_SIZE as u32);
        self.wr64(si + cs::RINGBUF_INPUT, ring_in);
        self.wr64(si + cs::RINGBUF_OUTPUT, ring_out);
        let req = self.rd32(si + cs::REQ);
        self.wr32(si + cs::REQ, (req & !cs::STATE_MASK) | cs::STATE_START);
        self.wr32(ci + csg::CONFIG, 1);
        self.toggle(ci + csg::DOORBELL_REQ, co + csg::DOORBELL_ACK, 1 << s);
        self.csg_state(n, csg::STATE_RESUME);
    }

    /// Lets exactly one engine step run.
    fn step(&mut self) {
        let ns = self.gpu.config().timings.cs_step_ns;
        self.gpu.advance(ns);
    }
}

/// The program of the suspend tests: a call into a user stream that counts and stores, then a
/// sync wait on `DATA + 0x100`, then a marker store. Returns the callee's length in words.
fn suspend_program(fw: &mut Fw) -> u32 {
    let mut callee = std::vec::Vec::new();
    for i in 0..20 {
        callee.push(instr::add_imm32(4, 4, 3));
        callee.push(instr::store_multiple(4, 2, 0x200 + 4 * i, 1));
    }
    for (i, w) in callee.iter().enumerate() {
        fw.user_wr64(CALLEE + 8 * i as u64, *w);
    }
    let len = 8 * callee.len() as u32;
    fw.submit(
        0,
        &[
            instr::move48(2, DATA),
            instr::move32(4, 100),
            instr::move48(6, CALLEE),
            instr::move32(8, len),
            instr::call(6, 8),
            instr::store_multiple(4, 2, 0x40, 1),
            instr::move48(10, DATA + 0x100),
            instr::move48(12, 0),
            instr::sync_wait64(Condition::Greater, 10, 12),
            instr::move32(14, 0x77),
            instr::store_multiple(14, 2, 0x48, 1),
        ],
    );
    len
}

#[test]
fn suspended_group_resumes_on_another_slot_where_it_stopped() {
    let mut fw = Fw::boot();
    fw.map_suspend_buf();
    fw.start_stream(0, 0);
    suspend_program(&mut fw);
    // One step: the ring's first five instructions and eleven of the callee's, which issued
    // five stores that have not finished yet.
    fw.step();
    assert_eq!(fw.gpu.stream_instructions(0, 0), 16);
    assert_eq!(fw.user_rd32(DATA + 0x200), 0, "stores take time");
    fw.csg_state(0, csg::STATE_SUSPEND);
    // The suspend let the issued stores finish before it saved the stream.
    assert_eq!(
        fw.user_rd32(DATA + 0x200 + 4 * 4),
        115,
        "five counts stored"
    );
    assert_eq!(fw.user_rd32(DATA + 0x200 + 4 * 5), 0);
    let so = Fw::shared(csf::cs_output(0, 0));
    assert_eq!(
        fw.rd32(so + cs::ACK) & cs::STATE_MASK,
        0,
        "the stream stopped"
    );
    let saved = fw.extract(0);
    // Nothing runs while suspended, even with a doorbell.
    fw.gpu.write32(doorbell(1), 1);
    fw.run();
    assert_eq!(fw.user_rd32(DATA + 0x200 + 4 * 5), 0);
    assert_eq!(fw.extract(0), saved);
    // The firmware forgets the slot's stream; the suspend buffer has it.
    fw.wr64(RING_OUT + ring::EXTRACT, 0);
    fw.resume_stream(3, 0);
    fw.run();
    for i in 0..20 {
        assert_eq!(
            fw.user_rd32(DATA + 0x200 + 4 * i),
            103 + 3 * i as u32,
            "count {i}"
        );
    }
    assert_eq!(
        fw.user_rd32(DATA + 0x40),
        160,
        "registers survived the move"
    );
    assert_eq!(fw.user_rd32(DATA + 0x48), 0, "blocked on the sync wait");
    // Suspended while blocked, resumed on a third slot: the wait is still pending there.
    fw.csg_state(3, csg::STATE_SUSPEND);
    fw.resume_stream(5, 0);
    fw.run();
    assert_eq!(fw.user_rd32(DATA + 0x48), 0);
    fw.user_wr64(DATA + 0x100, 1);
    fw.gpu.write32(doorbell(1), 1);
    fw.run();
    assert_eq!(fw.user_rd32(DATA + 0x48), 0x77);
    assert_eq!(fw.extract(0), fw.inserted);
    assert!(fw.gpu.bus_errors().is_empty());
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the suspend test covers the same paths.
fn a_group_started_afresh_does_not_see_a_suspended_state() {
    let mut fw = Fw::boot();
    fw.map_suspend_buf();
    fw.start_stream(0, 0);
    suspend_program(&mut fw);
    fw.step();
    fw.csg_state(0, csg::STATE_SUSPEND);
    // START instead of RESUME: the stream goes on from the ring's extract with fresh state:
    // the callee is not continued (its frame was in the suspend buffer only) and the next
    // store, through a register pair now 0, faults once it runs, while the stream waits on
    // its sync object three instructions later.
    fw.start_stream(0, 0);
    fw.run();
    assert_eq!(fw.extract(0), 8 * 8, "the sync wait after the call");
    assert!(fw.gpu.stream_faulted(0, 0));
    assert_eq!(fw.gpu.stream_instructions(0, 0), 3);
    assert_eq!(fw.user_rd32(DATA + 0x200 + 4 * 5), 0);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the suspend test covers the same paths.
fn higher_priority_groups_run_first_and_equals_share() {
    let mut fw = Fw::boot();
    let prio = |fw: &Fw, n: usize, p: u32| {
        let ci = Fw::shared(csf::csg_input(n));
        fw.wr32(ci + csg::ENDPOINT_REQ, p << csg::EP_PRIORITY_SHIFT);
    };
    prio(&fw, 0, 3);
    prio(&fw, 1, 15);
    fw.start_stream(0, 0);
    fw.start_stream(1, 1);
    let work: std::vec::Vec<u64> = (0..40).map(|_| instr::add_imm32(4, 4, 1)).collect();
    fw.submit(0, &work);
    fw.submit(1, &work);
    // Two steps: only the high-priority group (slot 1) runs while it has work.
    fw.step();
    fw.step();
    assert_eq!(fw.gpu.stream_instructions(1, 1), 32);
    assert_eq!(fw.gpu.stream_instructions(0, 0), 0);
    fw.run();
    assert_eq!(fw.gpu.stream_instructions(1, 1), 40);
    assert_eq!(
        fw.gpu.stream_instructions(0, 0),
        40,
        "the low one ran once the high one was done"
    );
    // Equal priorities share every step. ENDPOINT_CONFIG makes the firmware read the field.
    let (ci, co) = (
        Fw::shared(csf::csg_input(0)),
        Fw::shared(csf::csg_output(0)),
    );
    prio(&fw, 0, 15);
    fw.toggle(ci + csg::REQ, co + csg::ACK, csg::ENDPOINT_CONFIG);
    fw.glb_doorbell_csg(0);
    fw.submit(0, &work);
    fw.submit(1, &work);
    fw.step();
    assert_eq!(fw.gpu.stream_instructions(1, 1), 56);
    assert_eq!(fw.gpu.stream_instructions(0, 0), 56);
}

#[test]
fn an_ignored_suspend_is_never_acknowledged_until_a_reset() {
    let mut fw = Fw::boot();
    fw.map_suspend_buf();
    fw.start_stream(0, 0);
    suspend_program(&mut fw);
    fw.gpu.set_csg_ignores(0, csg::STATE_SUSPEND, true);
    let ci = Fw::shared(csf::csg_input(0));
    let co = Fw::shared(csf::csg_output(0));
    fw.wr64(ci + csg::SUSPEND_BUF, SUSPEND);
    let req = fw.rd32(ci + csg::REQ);
    fw.wr32(ci + csg::REQ, (req & !csg::STATE_MASK) | csg::STATE_SUSPEND);
    fw.glb_doorbell_csg(0);
    assert_eq!(fw.rd32(co + csg::ACK) & csg::STATE_MASK, csg::STATE_START);
    // The group runs on: its user stream completes its counts.
    fw.run();
    assert_eq!(fw.user_rd32(DATA + 0x40), 160);
    // The request stays pending through another doorbell; a terminate is honoured.
    fw.glb_doorbell_csg(0);
    assert_eq!(fw.rd32(co + csg::ACK) & csg::STATE_MASK, csg::STATE_START);
    fw.csg_state(0, csg::STATE_TERMINATE);
    // A reset clears the injection with the rest of the firmware's state.
    fw.gpu.write32(regs::GPU_COMMAND, regs::gpu_cmd::SOFT_RESET);
    fw.gpu.advance(fw.gpu.config().timings.reset_ns);
    assert!(fw.gpu.csf == Gpu::g610().csf);
    assert!(fw.gpu.bus_errors().is_empty());
}

#[test]
fn streams_of_a_group_run_by_their_priority() {
    let mut fw = Fw::boot();
    // Stream 0 at priority 2, stream 1 at 9, each counting 40 and storing the count.
    fw.start_stream_prio(0, 0, 2);
    fw.start_stream_prio(0, 1, 9);
    let count = |s: u64| {
        let mut prog = std::vec![instr::move48(2, DATA + 0x100 * s), instr::move32(4, 0)];
        prog.extend((0..40).map(|_| instr::add_imm32(4, 4, 1)));
        prog.push(instr::store_multiple(4, 2, 0, 1));
        prog
    };
    fw.submit(0, &count(0));
    fw.submit(1, &count(1));
    // A step runs only the higher-priority stream while it has work.
    fw.step();
    assert_eq!(fw.gpu.stream_instructions(0, 1), 16);
    assert_eq!(fw.gpu.stream_instructions(0, 0), 0);
    fw.step();
    fw.step();
    assert_eq!(fw.gpu.stream_instructions(0, 1), 43, "stream 1 done first");
    assert_eq!(fw.gpu.stream_instructions(0, 0), 0);
    fw.step();
    fw.step();
    assert_eq!(fw.user_rd32(DATA + 0x100), 40, "its store finished");
    // Then the lower one runs.
    fw.run();
    assert_eq!(fw.user_rd32(DATA), 40);
    assert!(fw.gpu.bus_errors().is_empty());
}

/// `Stream::clear` (the in-place reset that keeps the simulator's frames small) leaves the same
/// stream `Stream::default` gives, with the slot's injected faults kept.
#[test]
fn a_cleared_stream_is_a_default_stream_keeping_its_injected_faults() {
    use super::sb::Deferred;
    use super::{Frame, Stream, StreamStatus, TilerRun};

    let mut st = Stream {
        started: true,
        status: StreamStatus::TilerOom,
        regs: [0xdead_beef; crate::csf::NUM_REGS],
        hang: true,
        inject_fault: true,
        executed: 7,
        priority: 3,
        heap_ctx: 0x1000,
        tiler: Some(TilerRun {
            link: 1,
            top: 2,
            done: 3,
            first: 4,
        }),
        oom_answer: Some(5),
        ..Stream::default()
    };
    assert!(st.stack.push(Frame { pc: 8, end: 16 }).is_ok());
    assert!(st.sb.issue(2, 0, Deferred::Work { progress: true }));
    st.sb.endpoint = 1;
    st.sb.other = 2;
    st.sb.reported = 3;
    st.progress = 9;
    st.error = true;
    st.resources = 0xf;
    st.handler = Some((0x2000, 64));
    assert_ne!(st, Stream::default());

    st.clear();
    let expected = Stream {
        hang: true,
        inject_fault: true,
        ..Stream::default()
    };
    assert_eq!(st, expected);
}

#[path = "isa_tests.rs"]
mod isa;

#[path = "late_tests.rs"]
mod late;
