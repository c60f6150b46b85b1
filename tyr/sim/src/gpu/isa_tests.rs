// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The instruction set as the hardware's rules give it: branches and counted loops, jumps,
//! scoreboards (asynchronous loads, stores, sync operations and endpoint work, `WAIT`, wait
//! masks, `SET_SB_ENTRY`), flush IDs, progress counters, the error state, the tiler's
//! exception handler, and the stream faults undefined instructions and fields get.

use ::csf::{
    Condition, ExceptionType, FlushMode, HeapOp, Imm48, Instr, OtherFlushMode, ProgressQueue, Reg,
    Reg64, ShaderSelect, Slot, SlotMask, SyncOp, SyncScope, TaskAxis, TaskIncrement, WaitCondition,
};

use std::vec;
use std::vec::Vec;

use super::{instr, page_link, Fw, CALLEE, CTX, DATA, HEAP, RING, TILER_CTX};
use crate::csf::{self, cs, exception};
use crate::regs;

fn enc(i: Instr) -> u64 {
    i.encode()
}

/// `RUN_COMPUTE` of one task, tracked on the endpoint entry.
fn run_compute(progress_increment: bool) -> u64 {
    enc(Instr::RunCompute {
        task_increment: TaskIncrement::of::<1>(),
        task_axis: TaskAxis::X,
        progress_increment,
        select: ShaderSelect::default(),
    })
}

/// `REQ_RESOURCE` of the compute endpoint.
fn req_compute() -> u64 {
    enc(Instr::ReqResource {
        compute: true,
        fragment: false,
        tiler: false,
        idvs: false,
    })
}

/// `SYNC_SET32 [addr], data` after the slots of `wait`, signalling `slot`.
fn sync_set32(addr: u8, data: u8, wait: u16, slot: Slot) -> u64 {
    enc(Instr::sync_set32(
        SyncOp::new(Reg64(addr), Reg(data))
            .wait(SlotMask::from_bits(wait))
            .signal(slot),
    ))
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the scoreboard's paths run there in two tests.
fn branches_take_every_condition_and_count_loops() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    let mut code = vec![instr::move48(0, DATA)];
    // Every condition against a negative, a zero and a positive register: the instruction
    // after a taken branch is skipped, so r7 stays 0 exactly when the branch was taken.
    let conds = [
        Condition::Lequal,
        Condition::Greater,
        Condition::Equal,
        Condition::Nequal,
        Condition::Less,
        Condition::Gequal,
        Condition::Always,
    ];
    let values = [-1i32, 0, 1];
    let mut expect = Vec::new();
    for (c, &cond) in conds.iter().enumerate() {
        for (v, &value) in values.iter().enumerate() {
            let off = (8 * (3 * c + v)) as i16;
            code.extend([
                instr::move32(6, value as u32),
                instr::move32(7, 0),
                enc(Instr::branch(cond, Reg(6), 1)),
                instr::move32(7, 1),
                instr::store_multiple(7, 0, 0x100 + off, 1),
            ]);
            let taken = match cond {
                Condition::Lequal => value <= 0,
                Condition::Greater => value > 0,
                Condition::Equal => value == 0,
                Condition::Nequal => value != 0,
                Condition::Less => value < 0,
                Condition::Gequal => value >= 0,
                Condition::Always => true,
            };
            expect.push((0x100 + off as u64, u32::from(!taken)));
        }
    }
    // A counted loop: five rounds of r5 += 3, back while the counter is above 0.
    code.extend([
        instr::move32(4, 5),
        instr::move32(5, 0),
        instr::add_imm32(5, 5, 3),
        instr::add_imm32(4, 4, -1),
        enc(Instr::branch(Condition::Greater, Reg(4), -3)),
        instr::store_multiple(5, 0, 0x200, 1),
        // UMIN32 compares unsigned.
        instr::move32(8, 7),
        instr::move32(9, 0xffff_fff0),
        enc(Instr::Umin32 {
            dest: Reg(10),
            source0: Reg(8),
            source1: Reg(9),
        }),
        instr::store_multiple(10, 0, 0x208, 1),
    ]);
    fw.submit(0, &code);
    fw.run();
    assert_eq!(fw.extract(0), fw.inserted);
    for (off, want) in expect {
        assert_eq!(fw.user_rd32(DATA + off), want, "case at {off:#x}");
    }
    assert_eq!(fw.user_rd32(DATA + 0x200), 15, "five rounds");
    assert_eq!(fw.user_rd32(DATA + 0x208), 7);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the scoreboard's paths run there in two tests.
fn a_jump_continues_in_another_buffer_but_not_from_the_ring() {
    let mut fw = Fw::boot();
    // Callee A jumps to B; B's end returns to the ring, after A's call.
    let b = CALLEE + 0x100;
    let callee_a = [
        instr::move32(8, 1),
        instr::move48(20, b),
        instr::move32(22, 16),
        enc(Instr::jump(Reg64(20), Reg(22))),
        instr::move32(8, 99),
    ];
    let callee_b = [instr::add_imm32(8, 8, 10), instr::nop()];
    for (i, w) in callee_a.iter().enumerate() {
        fw.user_wr64(CALLEE + 8 * i as u64, *w);
    }
    for (i, w) in callee_b.iter().enumerate() {
        fw.user_wr64(b + 8 * i as u64, *w);
    }
    fw.start_stream(0, 0);
    fw.submit(
        0,
        &[
            instr::move48(0, DATA),
            instr::move48(24, CALLEE),
            instr::move32(26, 8 * callee_a.len() as u32),
            instr::call(24, 26),
            instr::store_multiple(8, 0, 0, 1),
        ],
    );
    fw.run();
    assert_eq!(fw.user_rd32(DATA), 11);
    assert!(!fw.gpu.stream_faulted(0, 0));
    // A jump in the ring itself is invalid: the ring is left only by calls.
    fw.submit(0, &[enc(Instr::jump(Reg64(20), Reg(22)))]);
    fw.run();
    let so = Fw::shared(csf::cs_output(0, 0));
    assert_eq!(
        fw.rd32(so + cs::FATAL),
        u32::from(exception::CS_INSTR_INVALID)
    );
    assert_eq!(fw.rd64(so + cs::FATAL_INFO), RING + 5 * 8);
}

#[test]
fn loads_land_when_their_entry_drains() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    fw.user_wr64(DATA + 0x10, 0x55);
    fw.submit(
        0,
        &[
            instr::move48(0, DATA),
            instr::move32(2, 0),
            instr::load_multiple(2, 0, 0x10, 1),
            // No wait: the store takes r2 as it is, before the load landed.
            instr::store_multiple(2, 0, 0x20, 1),
            instr::wait(1),
            instr::store_multiple(2, 0, 0x28, 1),
            // Loads (and stores) on entry 3: waiting for entry 0 is not waiting for them.
            enc(Instr::set_sb_entry(Slot::of::<0>(), Slot::of::<3>())),
            instr::wait(1),
            instr::move32(3, 0),
            instr::load_multiple(3, 0, 0x10, 1),
            instr::wait(1),
            instr::store_multiple(3, 0, 0x30, 1),
            instr::wait(1 << 3),
            instr::store_multiple(3, 0, 0x38, 1),
        ],
    );
    fw.run();
    assert_eq!(fw.extract(0), fw.inserted);
    assert_eq!(fw.user_rd32(DATA + 0x20), 0, "stale before the wait");
    assert_eq!(fw.user_rd32(DATA + 0x28), 0x55);
    assert_eq!(
        fw.user_rd32(DATA + 0x30),
        0,
        "entry 0 drained, entry 3 not yet"
    );
    assert_eq!(fw.user_rd32(DATA + 0x38), 0x55);
}

#[test]
fn a_stream_that_signals_without_waiting_for_its_work_signals_early() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    let early_before = fw.gpu.early_signals();
    fw.submit(
        0,
        &[
            instr::move48(0, DATA),
            instr::move48(2, DATA + 8),
            instr::move32(4, 1),
            req_compute(),
            run_compute(false),
            // Signals at once: the work on the endpoint entry (0) is still running.
            sync_set32(0, 4, 0, Slot::of::<1>()),
            // Waits for entry 0 first: signals once the work is done.
            sync_set32(2, 4, 0b1, Slot::of::<2>()),
        ],
    );
    // Half the work's time: the first object is written, the second not yet.
    fw.gpu.advance(fw.gpu.config().timings.cs_work_ns / 2);
    assert_eq!(fw.user_rd32(DATA), 1, "signalled early");
    assert_eq!(fw.user_rd32(DATA + 8), 0, "waits for the work");
    assert_eq!(fw.gpu.early_signals(), early_before + 1);
    fw.run();
    assert_eq!(fw.user_rd32(DATA + 8), 1);
    assert_eq!(
        fw.gpu.early_signals(),
        early_before + 1,
        "the second was not early"
    );
    // Work without its endpoint claimed is an invalid instruction.
    fw.start_stream(0, 1);
    fw.submit(1, &[run_compute(false)]);
    fw.run();
    let so = Fw::shared(csf::cs_output(0, 1));
    assert_eq!(
        fw.rd32(so + cs::FATAL),
        u32::from(exception::CS_INSTR_INVALID)
    );
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the scoreboard's paths run there in two tests.
fn a_wait_reports_its_entries_until_they_drain() {
    let mut cfg = crate::Config::g610();
    cfg.timings.mmu_command_ns = 0;
    cfg.timings.cs_work_ns = 50_000;
    let mut fw = Fw::boot_with(cfg);
    fw.start_stream(0, 0);
    fw.submit(
        0,
        &[
            req_compute(),
            run_compute(true),
            instr::wait(1),
            instr::move48(0, DATA),
            enc(Instr::ProgressLoad { dest: Reg64(2) }),
            instr::store_multiple(2, 0, 0, 0b11),
        ],
    );
    fw.gpu.advance(10_000);
    let so = Fw::shared(csf::cs_output(0, 0));
    assert_eq!(fw.rd32(so + cs::STATUS_BLOCKED_REASON), cs::BLOCKED_SB_WAIT);
    assert_eq!(
        fw.rd32(so + cs::STATUS_WAIT),
        1 | cs::STATUS_WAIT_SB_SRC_WAIT
    );
    assert_eq!(fw.rd32(so + cs::STATUS_SCOREBOARDS), 1);
    fw.run();
    assert_eq!(
        fw.rd32(so + cs::STATUS_BLOCKED_REASON),
        cs::BLOCKED_UNBLOCKED
    );
    assert_eq!(fw.rd32(so + cs::STATUS_SCOREBOARDS), 0);
    assert_eq!(fw.user_rd64(DATA), 1, "the work counted its progress");
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the scoreboard's paths run there in two tests.
fn progress_waits_order_two_streams() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    fw.start_stream(0, 1);
    // Stream 1 waits until stream 0's progress reaches 2, then stores a marker.
    fw.submit(
        1,
        &[
            instr::move48(0, DATA),
            instr::move48(4, 2),
            enc(Instr::ProgressWait {
                queue: ProgressQueue::of::<0>(),
                source: Reg64(4),
            }),
            instr::move32(6, 0x77),
            instr::store_multiple(6, 0, 0x40, 1),
        ],
    );
    fw.run();
    let so = Fw::shared(csf::cs_output(0, 1));
    assert_eq!(
        fw.rd32(so + cs::STATUS_BLOCKED_REASON),
        cs::BLOCKED_PROGRESS_WAIT
    );
    assert_eq!(fw.user_rd32(DATA + 0x40), 0);
    // Progress 1 from a store, then one more from work issued with "progress increment".
    fw.submit(
        0,
        &[
            instr::move48(4, 1),
            enc(Instr::ProgressStore { source: Reg64(4) }),
            req_compute(),
            run_compute(true),
        ],
    );
    fw.run();
    assert_eq!(fw.user_rd32(DATA + 0x40), 0x77);
    // A queue the group does not have is an invalid instruction.
    fw.submit(
        1,
        &[enc(Instr::ProgressWait {
            queue: ProgressQueue::of::<31>(),
            source: Reg64(4),
        })],
    );
    fw.run();
    assert_eq!(
        fw.rd32(so + cs::FATAL),
        u32::from(exception::CS_INSTR_INVALID)
    );
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the scoreboard's paths run there in two tests.
fn a_flush_is_skipped_when_one_happened_since_its_id() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    let id = fw.gpu.read32(regs::LATEST_FLUSH_ID);
    let flush = |l2| {
        enc(Instr::flush_cache2(
            l2,
            FlushMode::CleanInvalidate,
            OtherFlushMode::Invalidate,
            Reg(10),
            SlotMask::NONE,
            Slot::of::<0>(),
        ))
    };
    fw.submit(
        0,
        &[
            instr::move32(10, id),
            flush(FlushMode::CleanInvalidate),
            instr::wait(1),
        ],
    );
    fw.run();
    assert_eq!(fw.gpu.read32(regs::LATEST_FLUSH_ID), id + 1, "flushed");
    // The same ID again: a flush has happened since, nothing to do.
    fw.submit(0, &[flush(FlushMode::CleanInvalidate), instr::wait(1)]);
    fw.run();
    assert_eq!(fw.gpu.read32(regs::LATEST_FLUSH_ID), id + 1, "skipped");
    // With the new ID it flushes again; a flush of nothing does not count.
    fw.submit(
        0,
        &[instr::move32(10, id + 1), flush(FlushMode::CleanInvalidate)],
    );
    fw.run();
    assert_eq!(fw.gpu.read32(regs::LATEST_FLUSH_ID), id + 2);
    fw.submit(
        0,
        &[
            instr::move32(10, id + 2),
            enc(Instr::flush_cache2(
                FlushMode::None,
                FlushMode::None,
                OtherFlushMode::None,
                Reg(10),
                SlotMask::NONE,
                Slot::of::<0>(),
            )),
        ],
    );
    fw.run();
    assert_eq!(fw.gpu.read32(regs::LATEST_FLUSH_ID), id + 2);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the scoreboard's paths run there in two tests.
fn errors_propagate_through_sync_objects_until_a_barrier() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    // A 64-bit sync object whose error word (at +8) is set, already past the wait's value.
    fw.user_wr64(DATA, 5);
    fw.user_wr64(DATA + 8, 1);
    let set_propagate = |addr: u8| {
        enc(Instr::sync_set64(
            SyncOp::new(Reg64(addr), Reg64(4)).propagate_error(),
        ))
    };
    fw.submit(
        0,
        &[
            instr::move48(0, DATA),
            instr::move48(2, DATA + 0x20),
            instr::move48(4, 1),
            enc(Instr::sync_wait64(
                WaitCondition::Greater,
                Reg64(0),
                Reg64(4),
            )),
            // The stream inherited the error: a propagating write carries it.
            set_propagate(2),
            instr::wait(1),
            enc(Instr::error_barrier()),
            instr::move48(2, DATA + 0x40),
            set_propagate(2),
            instr::move48(6, DATA + 0x60),
            enc(Instr::store_state(
                ::csf::StateSel::ErrorState,
                Reg64(6),
                0,
                SlotMask::NONE,
                Slot::of::<1>(),
            )),
        ],
    );
    fw.run();
    assert!(!fw.gpu.stream_faulted(0, 0));
    assert_eq!(fw.user_rd64(DATA + 0x20), 1);
    assert_eq!(fw.user_rd32(DATA + 0x28), 1, "error propagated");
    assert_eq!(fw.user_rd32(DATA + 0x48), 0, "cleared by the barrier");
    assert_eq!(fw.user_rd64(DATA + 0x60), 0);
    // A wait that rejects errors fails the stream instead.
    fw.submit(
        0,
        &[enc(Instr::SyncWait64(::csf::SyncWait {
            address: Reg64(0),
            data: Reg64(4),
            condition: WaitCondition::Greater,
            error_reject: true,
        }))],
    );
    fw.run();
    let so = Fw::shared(csf::cs_output(0, 0));
    assert_eq!(
        fw.rd32(so + cs::FAULT) & 0xff,
        u32::from(exception::CS_INHERIT_FAULT)
    );
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the scoreboard's paths run there in two tests.
fn the_tiler_oom_handler_renders_and_the_tiling_goes_on() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    // A used heap whose only chunk has room for one more entry.
    fw.user_wr64(CTX + csf::heap::CTX_CHUNK, page_link(HEAP));
    fw.user_wr64(CTX + csf::heap::CTX_TOP, HEAP + 0x1000 - 8);
    fw.tiler_context(HEAP);
    // The handler stands for an incremental render: it counts a fragment pass done and
    // leaves a mark.
    let handler = [
        enc(Instr::HeapOperation {
            operation: HeapOp::FragmentCompleted,
            wait_mask: SlotMask::NONE,
            signal_slot: Slot::of::<2>(),
        }),
        instr::move32(30, 0xabc),
        instr::move48(28, DATA),
        instr::store_multiple(30, 28, 0x80, 1),
    ];
    for (i, w) in handler.iter().enumerate() {
        fw.user_wr64(CALLEE + 8 * i as u64, *w);
    }
    let mut prog = vec![
        instr::move48(50, CALLEE),
        instr::move32(52, 8 * handler.len() as u32),
        enc(Instr::SetExceptionHandler {
            exception_type: ExceptionType::TilerOom,
            address: Reg64(50),
            length: Reg(52),
        }),
    ];
    prog.extend(instr::tile(CTX, TILER_CTX, 3, 0x500));
    fw.submit(0, &prog);
    fw.run();
    assert!(fw.oom_pending(0, 0));
    // No memory: the handler runs, then the tiling again, which runs out again.
    fw.answer_oom(0, 0, 0);
    fw.run();
    assert_eq!(fw.user_rd32(DATA + 0x80), 0xabc, "the handler ran");
    assert_eq!(fw.user_rd32(CTX + csf::heap::CTX_FRAG_END), 1);
    assert!(!fw.gpu.stream_faulted(0, 0));
    assert!(fw.oom_pending(0, 0));
    // A chunk this time: the tiling finishes in it.
    fw.answer_oom(0, 0, page_link(HEAP + 0x1000));
    fw.run();
    assert!(!fw.gpu.stream_faulted(0, 0));
    assert_eq!(fw.extract(0), fw.inserted);
    assert_eq!(fw.user_rd64(HEAP + 0x1000 - 8), 0x500);
    assert_eq!(fw.user_rd64(HEAP + 0x1040), 0x501);
    assert_eq!(fw.user_rd64(HEAP + 0x1048), 0x502);
}

#[test]
#[cfg_attr(miri, ignore)] // One boot per case.
fn undefined_instructions_and_fields_stop_the_stream() {
    let sync = u64::from(::csf::Opcode::SyncAdd32 as u8) << 56;
    let cases: [(&str, u64); 11] = [
        ("opcode 10", 10 << 56),
        ("opcode 19", 19 << 56),
        ("opcode 255", 0xff << 56),
        ("SYNC_WAIT64.eq", 53 << 56 | 2 << 28),
        ("BRANCH condition 7", 22 << 56 | 7 << 28),
        ("FLUSH_CACHE2 L2 mode 2", 36 << 56 | 2),
        ("SYNC_ADD32 scope 1", sync | 1 << 1),
        ("a signal slot past the 8 entries", sync | 8 << 48),
        ("a wait mask past the 8 entries", sync | 0x100 << 16),
        ("PROT_REGION (no protected mode)", 41 << 56 | 1),
        ("SET_SB_ENTRY past the 8 entries", 23 << 56 | 9),
    ];
    for (what, word) in cases {
        let mut fw = Fw::boot();
        fw.start_stream(0, 0);
        fw.submit(0, &[instr::move48(0, DATA), word]);
        fw.run();
        let so = Fw::shared(csf::cs_output(0, 0));
        assert_eq!(
            fw.rd32(so + cs::FATAL),
            u32::from(exception::CS_INSTR_INVALID),
            "{what}"
        );
        assert_eq!(fw.rd64(so + cs::FATAL_INFO), RING + 8, "{what}");
    }
    // The same words, well formed, run.
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    fw.submit(
        0,
        &[
            instr::move48(0, DATA),
            instr::move32(2, 1),
            enc(Instr::sync_add32(
                SyncOp::new(Reg64(0), Reg(2)).scope(SyncScope::Csg),
            )),
            instr::wait(1),
            enc(Instr::move48(Reg64(4), Imm48::of::<0>())),
        ],
    );
    fw.run();
    assert!(!fw.gpu.stream_faulted(0, 0));
    assert_eq!(fw.user_rd32(DATA), 1);
}

#[test]
#[cfg_attr(miri, ignore)] // Slow under Miri; the scoreboard's paths run there in two tests.
fn every_run_and_finish_instruction_works_on_its_entry() {
    let mut fw = Fw::boot();
    fw.start_stream(0, 0);
    let sel = ShaderSelect::default();
    let claim_all = enc(Instr::ReqResource {
        compute: true,
        fragment: true,
        tiler: true,
        idvs: true,
    });
    let runs = [
        run_compute(true),
        enc(Instr::RunComputeIndirect {
            workgroups_per_task: 4,
            progress_increment: true,
            select: sel,
        }),
        enc(Instr::RunTiling {
            flags_override: 0,
            progress_increment: true,
            select: sel,
        }),
        enc(Instr::RunFragment {
            enable_tem: false,
            tile_order: ::csf::TileOrder::ZOrder,
            progress_increment: true,
        }),
        enc(Instr::RunFullscreen {
            flags_override: 0,
            progress_increment: true,
            dcd: Reg64(20),
        }),
        enc(Instr::FinishTiling {
            progress_increment: true,
        }),
    ];
    let mut prog = vec![
        instr::move48(0, DATA),
        instr::move48(2, CTX),
        instr::heap_set(2),
    ];
    prog.push(claim_all);
    prog.extend(runs);
    prog.extend([
        // The fragment pass of the heap's render pass, once the work above drained.
        enc(Instr::FinishFragment {
            increment_fragment_completed: true,
            wait_mask: SlotMask::from_bits(1),
            last_heap_chunk: Reg64(4),
            first_heap_chunk: Reg64(6),
            signal_slot: Slot::of::<1>(),
        }),
        enc(Instr::TracePoint {
            base_register: Reg(0),
            register_count: 4,
            wait_mask: SlotMask::from_bits(1),
            signal_slot: Slot::of::<2>(),
        }),
        enc(Instr::store_state(
            ::csf::StateSel::DisjointCount,
            Reg64(0),
            0x10,
            SlotMask::NONE,
            Slot::of::<1>(),
        )),
        instr::wait(0b111),
        enc(Instr::ProgressLoad { dest: Reg64(8) }),
        instr::store_multiple(8, 0, 0, 0b11),
    ]);
    fw.submit(0, &prog);
    // While the work runs, its entry is busy.
    fw.gpu.advance(fw.gpu.config().timings.cs_step_ns);
    let so = Fw::shared(csf::cs_output(0, 0));
    assert_ne!(fw.rd32(so + cs::STATUS_SCOREBOARDS) & 1, 0);
    fw.run();
    assert!(!fw.gpu.stream_faulted(0, 0));
    assert_eq!(fw.extract(0), fw.inserted);
    assert_eq!(
        fw.user_rd64(DATA),
        6,
        "every run and finish counted its progress"
    );
    assert_eq!(fw.user_rd32(CTX + csf::heap::CTX_FRAG_END), 1);
    // No reset and no MCU power cycle yet: the counters never lost their continuity.
    assert_eq!(fw.user_rd64(DATA + 0x10), 0);
    assert_eq!(fw.rd32(so + cs::STATUS_SCOREBOARDS), 0);
    // The entry of each kind must be claimed: a fragment run after claiming compute alone.
    fw.submit(
        0,
        &[
            req_compute(),
            enc(Instr::RunFragment {
                enable_tem: false,
                tile_order: ::csf::TileOrder::ZOrder,
                progress_increment: false,
            }),
        ],
    );
    fw.run();
    assert_eq!(
        fw.rd32(so + cs::FATAL),
        u32::from(exception::CS_INSTR_INVALID)
    );
}
