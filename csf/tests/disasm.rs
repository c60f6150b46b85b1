// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The disassembler, on panthor's ring prologue and on one sample of every opcode.

use csf::*;

/// The words panthor (and Tyr) write in front of each job on a queue's ring, with the
/// registers it uses on a Mali-G610 (96 registers, the last four unpreserved: `d92`, `r94`).
fn ring_prologue(flush_id: u32, start: u64, size: u32, sync: u64) -> [Instr; 11] {
    let (addr, val) = (Reg64(92), Reg(94));
    let slot0 = Slot::of::<0>();
    [
        Instr::move32(val, flush_id),
        Instr::flush_cache2(
            FlushMode::CleanInvalidate,
            FlushMode::CleanInvalidate,
            OtherFlushMode::Invalidate,
            val,
            SlotMask::NONE,
            slot0,
        ),
        Instr::move48(addr, Imm48::new(start).unwrap()),
        Instr::move32(val, size),
        Instr::wait(WaitMask::of(slot0).unwrap()),
        Instr::call(addr, val),
        Instr::move48(addr, Imm48::new(sync).unwrap()),
        Instr::move48(Reg64(94), Imm48::of::<1>()),
        Instr::wait(WaitMask::ALL),
        Instr::sync_add64(SyncOp::new(addr, Reg64(94)).propagate_error()),
        Instr::error_barrier(),
    ]
}

#[test]
fn ring_prologue_words() {
    // As panthor builds them, from the field positions.
    let (addr, val) = (92u64, 94u64);
    let want = [
        (2u64 << 56) | (val << 48) | 0x1234,
        (36u64 << 56) | (val << 40) | 0x233,
        (1u64 << 56) | (addr << 48) | 0x0080_0000_1000,
        (2u64 << 56) | (val << 48) | 0x200,
        (3u64 << 56) | (1 << 16),
        (32u64 << 56) | (addr << 40) | (val << 32),
        (1u64 << 56) | (addr << 48) | 0x0080_0000_2040,
        (1u64 << 56) | (val << 48) | 1,
        (3u64 << 56) | (0xff << 16),
        (51u64 << 56) | (addr << 40) | (val << 32) | 1,
        47u64 << 56,
    ];
    let prologue = ring_prologue(0x1234, 0x0080_0000_1000, 0x200, 0x0080_0000_2040);
    assert_eq!(prologue.map(|i| i.encode()), want);
}

#[test]
fn ring_prologue_listing() {
    let words =
        ring_prologue(0x1234, 0x0080_0000_1000, 0x200, 0x0080_0000_2040).map(|i| i.encode());
    let text = Disasm::new(&words, 0x0080_0010_0000).to_string();
    let want = "\
0x0000008000100000: 025e000000001234  MOVE32 r94, #0x1234
0x0000008000100008: 24005e0000000233  FLUSH_CACHE2.l2_clean_inv.lsc_clean_inv.other_inv r94, wait #0x0, signal #0
0x0000008000100010: 015c008000001000  MOVE48 d92, #0x8000001000
0x0000008000100018: 025e000000000200  MOVE32 r94, #0x200
0x0000008000100020: 0300000000010000  WAIT #0x1
0x0000008000100028: 20005c5e00000000  CALL d92, r94
0x0000008000100030: 015c008000002040  MOVE48 d92, #0x8000002040
0x0000008000100038: 015e000000000001  MOVE48 d94, #0x1
0x0000008000100040: 0300000000ff0000  WAIT #0xff
0x0000008000100048: 33005c5e00000001  SYNC_ADD64.system.propagate [d92], d94, wait #0x0, signal #0
0x0000008000100050: 2f00000000000000  ERROR_BARRIER
";
    assert_eq!(text, want);
}

#[test]
fn undefined_words_are_listed_not_refused() {
    let words = [
        10u64 << 56,
        (39u64 << 56) | (2 << 28),
        (36u64 << 56) | 0x002,
        u64::MAX,
        (22u64 << 56) | 0x0001,
    ];
    let text = Disasm::new(&words, 0).to_string();
    let want = "\
0x0000000000000000: 0a00000000000000  .word 0x0a00000000000000 // undefined opcode 10
0x0000000000000008: 2700000020000000  .word 0x2700000020000000 // SYNC_WAIT32: undefined value 2 in field `condition`
0x0000000000000010: 2400000000000002  .word 0x2400000000000002 // FLUSH_CACHE2: undefined value 2 in field `l2_flush_mode`
0x0000000000000018: ffffffffffffffff  .word 0xffffffffffffffff // undefined opcode 255
0x0000000000000020: 1600000000000001  BRANCH.le r0, #1 // -> 0x0000000000000030
";
    assert_eq!(text, want);
}

#[test]
fn every_opcode_disassembles() {
    let s = |n| Slot::new(n).unwrap();
    let sel = |n| Select::new(n).unwrap();
    let select = ShaderSelect {
        srt: sel(0),
        spd: sel(1),
        tsd: sel(2),
        fau: sel(3),
    };
    let cases: Vec<(Instr, &str)> = vec![
        (Instr::nop(), "NOP"),
        (
            Instr::Nop {
                payload: NopPayload::of::<0xabc>(),
            },
            "NOP #0xabc",
        ),
        (
            Instr::move48(Reg64(2), Imm48::of::<0x1234>()),
            "MOVE48 d2, #0x1234",
        ),
        (Instr::move32(Reg(3), 0xffff_ffff), "MOVE32 r3, #0xffffffff"),
        (
            Instr::Wait {
                mask: WaitMask::from_bits(3),
                progress_increment: true,
            },
            "WAIT.progress_inc #0x3",
        ),
        (
            Instr::RunCompute {
                task_increment: TaskIncrement::of::<64>(),
                task_axis: TaskAxis::Y,
                progress_increment: false,
                select,
            },
            "RUN_COMPUTE.y.srt0.spd1.tsd2.fau3 #64",
        ),
        (
            Instr::RunTiling {
                flags_override: 0x10,
                progress_increment: true,
                select,
            },
            "RUN_TILING.progress_inc.srt0.spd1.tsd2.fau3 #0x10",
        ),
        (
            Instr::RunIdvs {
                flags_override: 0,
                progress_increment: false,
                malloc_enable: true,
                draw_id_register_enable: true,
                varying_srt_select: false,
                varying_fau_select: true,
                varying_tsd_select: false,
                fragment_srt_select: false,
                fragment_tsd_select: true,
                draw_id: Reg(40),
            },
            "RUN_IDVS.malloc.varying_fau.frag_tsd #0x0, draw_id r40",
        ),
        (
            Instr::RunFragment {
                enable_tem: true,
                tile_order: TileOrder::ZOrder,
                progress_increment: false,
            },
            "RUN_FRAGMENT.tem.z_order",
        ),
        (
            Instr::RunFullscreen {
                flags_override: 2,
                progress_increment: false,
                dcd: Reg64(6),
            },
            "RUN_FULLSCREEN #0x2, d6",
        ),
        (
            Instr::FinishTiling {
                progress_increment: true,
            },
            "FINISH_TILING.progress_inc",
        ),
        (
            Instr::FinishFragment {
                increment_fragment_completed: true,
                wait_mask: SlotMask::from_bits(0x12),
                last_heap_chunk: Reg64(2),
                first_heap_chunk: Reg64(4),
                signal_slot: s(3),
            },
            "FINISH_FRAGMENT.frag_end d2, d4, wait #0x12, signal #3",
        ),
        (
            Instr::add_imm32(Reg(1), Reg(2), -4),
            "ADD_IMMEDIATE32 r1, r2, #-4",
        ),
        (
            Instr::add_imm64(Reg64(0), Reg64(2), 16),
            "ADD_IMMEDIATE64 d0, d2, #16",
        ),
        (
            Instr::Umin32 {
                dest: Reg(1),
                source0: Reg(2),
                source1: Reg(3),
            },
            "UMIN32 r1, r2, r3",
        ),
        (
            Instr::load_multiple(Reg(8), Reg64(10), -4, 0b111),
            "LOAD_MULTIPLE r8:r9:r10, [d10 - 4]",
        ),
        (
            Instr::store_multiple(Reg(254), Reg64(0), 0, 0b1001),
            "STORE_MULTIPLE r254:r257, [d0]",
        ),
        (
            Instr::store_multiple(Reg(4), Reg64(0), i16::MIN, 0),
            "STORE_MULTIPLE {}, [d0 - 32768]",
        ),
        (
            Instr::branch(Condition::Nequal, Reg(4), -3),
            "BRANCH.ne r4, #-3",
        ),
        (Instr::set_sb_entry(s(1), s(2)), "SET_SB_ENTRY #1, #2"),
        (
            Instr::ProgressWait {
                queue: ProgressQueue::of::<31>(),
                source: Reg64(8),
            },
            "PROGRESS_WAIT d8, #31",
        ),
        (
            Instr::SetExceptionHandler {
                exception_type: ExceptionType::TilerOom,
                address: Reg64(2),
                length: Reg(4),
            },
            "SET_EXCEPTION_HANDLER.tiler_oom d2, r4",
        ),
        (Instr::call(Reg64(92), Reg(94)), "CALL d92, r94"),
        (Instr::jump(Reg64(0), Reg(2)), "JUMP d0, r2"),
        (
            Instr::ReqResource {
                compute: true,
                fragment: false,
                tiler: true,
                idvs: true,
            },
            "REQ_RESOURCE.compute.tiler.idvs",
        ),
        (
            Instr::flush_cache2(
                FlushMode::Clean,
                FlushMode::None,
                OtherFlushMode::None,
                Reg(7),
                SlotMask::from_bits(0xff),
                s(5),
            ),
            "FLUSH_CACHE2.l2_clean.lsc_none.other_none r7, wait #0xff, signal #5",
        ),
        (
            Instr::sync_add32(SyncOp::new(Reg64(0), Reg(2)).scope(SyncScope::Csg)),
            "SYNC_ADD32.csg [d0], r2, wait #0x0, signal #0",
        ),
        (
            Instr::sync_set32(SyncOp::new(Reg64(0), Reg(2)).signal(s(15))),
            "SYNC_SET32.system [d0], r2, wait #0x0, signal #15",
        ),
        (
            Instr::SyncWait32(SyncWait {
                address: Reg64(4),
                data: Reg(6),
                condition: WaitCondition::Greater,
                error_reject: true,
            }),
            "SYNC_WAIT32.gt.reject [d4], r6",
        ),
        (
            Instr::store_state(StateSel::Timestamp, Reg64(2), 8, SlotMask::NONE, s(0)),
            "STORE_STATE.timestamp [d2 + 8], wait #0x0, signal #0",
        ),
        (Instr::ProtRegion { size: 16 }, "PROT_REGION #16"),
        (
            Instr::ProgressStore { source: Reg64(2) },
            "PROGRESS_STORE d2",
        ),
        (Instr::ProgressLoad { dest: Reg64(4) }, "PROGRESS_LOAD d4"),
        (
            Instr::RunComputeIndirect {
                workgroups_per_task: 8,
                progress_increment: false,
                select,
            },
            "RUN_COMPUTE_INDIRECT.srt0.spd1.tsd2.fau3 #8",
        ),
        (Instr::error_barrier(), "ERROR_BARRIER"),
        (Instr::heap_set(Reg64(10)), "HEAP_SET d10"),
        (
            Instr::HeapOperation {
                operation: HeapOp::VertexTilerCompleted,
                wait_mask: SlotMask::from_bits(1),
                signal_slot: s(2),
            },
            "HEAP_OPERATION.vt_completed wait #0x1, signal #2",
        ),
        (
            Instr::TracePoint {
                base_register: Reg(10),
                register_count: 3,
                wait_mask: SlotMask::NONE,
                signal_slot: s(0),
            },
            "TRACE_POINT r10, #3, wait #0x0, signal #0",
        ),
        (
            Instr::sync_add64(SyncOp::new(Reg64(0), Reg64(2)).propagate_error()),
            "SYNC_ADD64.system.propagate [d0], d2, wait #0x0, signal #0",
        ),
        (
            Instr::sync_set64(SyncOp::new(Reg64(0), Reg64(2)).wait(SlotMask::from_bits(4))),
            "SYNC_SET64.system [d0], d2, wait #0x4, signal #0",
        ),
        (
            Instr::sync_wait64(WaitCondition::Lequal, Reg64(0), Reg64(2)),
            "SYNC_WAIT64.le [d0], d2",
        ),
    ];
    let mut seen = std::collections::BTreeSet::new();
    for (i, want) in cases {
        assert_eq!(i.to_string(), want);
        seen.insert(i.opcode());
    }
    assert_eq!(seen.len(), Opcode::ALL.len());
}
