// SPDX-License-Identifier: GPL-2.0 OR MIT

//! One test per opcode: the expected word is built by hand from the field positions of Mali
//! v10 (opcode in 63:56 and each field at its documented bits), with every field holding a
//! distinct non-zero value where the field allows it, so that a field moved, widened or
//! narrowed in the crate fails here. Then undefined opcodes and undefined enum values.

// The zero fields are written out (`(0 << 40)`) so that every field of a word is visible.
#![allow(clippy::identity_op)]

use csf::*;

/// `word` is the encoding of `instr`, and decodes to it.
#[track_caller]
fn check(word: u64, instr: Instr) {
    assert_eq!(
        instr.encode(),
        word,
        "encode of {instr:?}: {:#018x} != {word:#018x}",
        instr.encode()
    );
    assert_eq!(Instr::decode(word), Ok(instr), "decode of {word:#018x}");
}

fn slot(n: u8) -> Slot {
    Slot::new(n).unwrap()
}

fn sel(n: u8) -> Select {
    Select::new(n).unwrap()
}

fn shader_select(srt: u8, spd: u8, tsd: u8, fau: u8) -> ShaderSelect {
    ShaderSelect {
        srt: sel(srt),
        spd: sel(spd),
        tsd: sel(tsd),
        fau: sel(fau),
    }
}

#[test]
fn nop() {
    check(
        0x00ab_cdef_0123_4567,
        Instr::Nop {
            payload: NopPayload::new(0x00ab_cdef_0123_4567).unwrap(),
        },
    );
    check(0, Instr::nop());
}

#[test]
fn move48() {
    check(
        (1u64 << 56) | (90 << 48) | 0x1234_5678_9abc,
        Instr::move48(Reg64(90), Imm48::new(0x1234_5678_9abc).unwrap()),
    );
    check(
        (1u64 << 56) | (2 << 48) | 0xffff_ffff_ffff,
        Instr::move48(Reg64(2), Imm48::MAX),
    );
}

#[test]
fn move32() {
    check(
        (2u64 << 56) | (0x21 << 48) | 0xdead_beef,
        Instr::move32(Reg(0x21), 0xdead_beef),
    );
}

#[test]
fn wait() {
    check(
        (3u64 << 56) | (1 << 32) | (0xa5 << 16),
        Instr::Wait {
            mask: WaitMask::from_bits(0xa5),
            progress_increment: true,
        },
    );
    check(
        (3u64 << 56) | (0x80 << 16),
        Instr::wait(WaitMask::from_bits(0x80)),
    );
}

#[test]
fn run_compute() {
    check(
        (4u64 << 56)
            | (3 << 46)
            | (2 << 44)
            | (1 << 42)
            | (0 << 40)
            | (1 << 32)
            | (2 << 14)
            | 0x2abc,
        Instr::RunCompute {
            task_increment: TaskIncrement::new(0x2abc).unwrap(),
            task_axis: TaskAxis::Z,
            progress_increment: true,
            select: shader_select(0, 1, 2, 3),
        },
    );
    check(
        (4u64 << 56) | (1 << 46) | (3 << 44) | (2 << 42) | (1 << 40) | (1 << 14) | 0x3fff,
        Instr::RunCompute {
            task_increment: TaskIncrement::MAX,
            task_axis: TaskAxis::Y,
            progress_increment: false,
            select: shader_select(1, 2, 3, 1),
        },
    );
}

#[test]
fn run_tiling() {
    check(
        (5u64 << 56) | (2 << 46) | (3 << 44) | (0 << 42) | (1 << 40) | (1 << 32) | 0x8765_4321,
        Instr::RunTiling {
            flags_override: 0x8765_4321,
            progress_increment: true,
            select: shader_select(1, 0, 3, 2),
        },
    );
}

#[test]
fn run_idvs() {
    // Bits 39:32 = 1010_1101: progress, draw_id enable, varying SRT, varying TSD, fragment TSD.
    check(
        (6u64 << 56) | (7 << 40) | (0xad << 32) | 0x0102_0304,
        Instr::RunIdvs {
            flags_override: 0x0102_0304,
            progress_increment: true,
            malloc_enable: false,
            draw_id_register_enable: true,
            varying_srt_select: true,
            varying_fau_select: false,
            varying_tsd_select: true,
            fragment_srt_select: false,
            fragment_tsd_select: true,
            draw_id: Reg(7),
        },
    );
    // The complement: 0101_0010.
    check(
        (6u64 << 56) | (0x52 << 32),
        Instr::RunIdvs {
            flags_override: 0,
            progress_increment: false,
            malloc_enable: true,
            draw_id_register_enable: false,
            varying_srt_select: false,
            varying_fau_select: true,
            varying_tsd_select: false,
            fragment_srt_select: true,
            fragment_tsd_select: false,
            draw_id: Reg(0),
        },
    );
}

#[test]
fn run_fragment() {
    check(
        (7u64 << 56) | (1 << 32) | (6 << 4) | 1,
        Instr::RunFragment {
            enable_tem: true,
            tile_order: TileOrder::ReverseVertical,
            progress_increment: true,
        },
    );
    check(
        (7u64 << 56) | (5 << 4),
        Instr::RunFragment {
            enable_tem: false,
            tile_order: TileOrder::ReverseHorizontal,
            progress_increment: false,
        },
    );
}

#[test]
fn run_fullscreen() {
    check(
        (8u64 << 56) | (12 << 40) | (1 << 32) | 0xcafe_f00d,
        Instr::RunFullscreen {
            flags_override: 0xcafe_f00d,
            progress_increment: true,
            dcd: Reg64(12),
        },
    );
}

#[test]
fn finish_tiling() {
    check(
        (9u64 << 56) | (1 << 32),
        Instr::FinishTiling {
            progress_increment: true,
        },
    );
}

#[test]
fn finish_fragment() {
    check(
        (11u64 << 56) | (5 << 48) | (8 << 40) | (6 << 32) | (0x1234 << 16) | 1,
        Instr::FinishFragment {
            increment_fragment_completed: true,
            wait_mask: SlotMask::from_bits(0x1234),
            last_heap_chunk: Reg64(6),
            first_heap_chunk: Reg64(8),
            signal_slot: slot(5),
        },
    );
}

#[test]
fn add_immediate32() {
    check(
        (16u64 << 56) | (9 << 48) | (3 << 40) | 0xffff_fffb,
        Instr::add_imm32(Reg(9), Reg(3), -5),
    );
}

#[test]
fn add_immediate64() {
    check(
        (17u64 << 56) | (10 << 48) | (4 << 40) | 0xffff_ff00,
        Instr::add_imm64(Reg64(10), Reg64(4), -0x100),
    );
    check(
        (17u64 << 56) | (10 << 48) | (4 << 40) | 0x7fff_ffff,
        Instr::add_imm64(Reg64(10), Reg64(4), i32::MAX),
    );
}

#[test]
fn umin32() {
    check(
        (18u64 << 56) | (3 << 48) | (2 << 40) | (1 << 32),
        Instr::Umin32 {
            dest: Reg(3),
            source0: Reg(2),
            source1: Reg(1),
        },
    );
}

#[test]
fn load_multiple() {
    check(
        (20u64 << 56) | (8 << 48) | (10 << 40) | (0x0007 << 16) | 0xfffc,
        Instr::load_multiple(Reg(8), Reg64(10), -4, 0x0007),
    );
}

#[test]
fn store_multiple() {
    check(
        (21u64 << 56) | (40 << 48) | (2 << 40) | (0x8001 << 16) | 0x0020,
        Instr::store_multiple(Reg(40), Reg64(2), 0x20, 0x8001),
    );
}

#[test]
fn branch() {
    check(
        (22u64 << 56) | (4 << 40) | (3 << 28) | 0xfffd,
        Instr::branch(Condition::Nequal, Reg(4), -3),
    );
    check(
        (22u64 << 56) | (6 << 28) | 0x7fff,
        Instr::branch(Condition::Always, Reg(0), i16::MAX),
    );
}

#[test]
fn set_sb_entry() {
    check(
        (23u64 << 56) | (0xa << 4) | 3,
        Instr::set_sb_entry(slot(3), slot(0xa)),
    );
}

#[test]
fn progress_wait() {
    check(
        (24u64 << 56) | (6 << 40) | 0x13,
        Instr::ProgressWait {
            queue: ProgressQueue::new(0x13).unwrap(),
            source: Reg64(6),
        },
    );
}

#[test]
fn set_exception_handler() {
    check(
        (25u64 << 56) | (16 << 40) | (5 << 32) | 2,
        Instr::SetExceptionHandler {
            exception_type: ExceptionType::TilerOom,
            address: Reg64(16),
            length: Reg(5),
        },
    );
}

#[test]
fn call() {
    check(
        (32u64 << 56) | (92 << 40) | (94 << 32),
        Instr::call(Reg64(92), Reg(94)),
    );
}

#[test]
fn jump() {
    check(
        (33u64 << 56) | (20 << 40) | (23 << 32),
        Instr::jump(Reg64(20), Reg(23)),
    );
}

#[test]
fn req_resource() {
    check(
        (34u64 << 56) | 0b1011,
        Instr::ReqResource {
            compute: true,
            fragment: true,
            tiler: false,
            idvs: true,
        },
    );
    check(
        (34u64 << 56) | 0b0100,
        Instr::ReqResource {
            compute: false,
            fragment: false,
            tiler: true,
            idvs: false,
        },
    );
}

#[test]
fn flush_cache2() {
    check(
        (36u64 << 56) | (3 << 48) | (5 << 40) | (0x01 << 16) | 0x233,
        Instr::flush_cache2(
            FlushMode::CleanInvalidate,
            FlushMode::CleanInvalidate,
            OtherFlushMode::Invalidate,
            Reg(5),
            SlotMask::from_bits(1),
            slot(3),
        ),
    );
    // L2 and LSC apart.
    check(
        (36u64 << 56) | (0xf << 48) | (0xff << 40) | (0xfedc << 16) | 0x001,
        Instr::flush_cache2(
            FlushMode::Clean,
            FlushMode::None,
            OtherFlushMode::None,
            Reg(0xff),
            SlotMask::from_bits(0xfedc),
            slot(0xf),
        ),
    );
    check(
        (36u64 << 56) | 0x030,
        Instr::flush_cache2(
            FlushMode::None,
            FlushMode::CleanInvalidate,
            OtherFlushMode::None,
            Reg(0),
            SlotMask::NONE,
            slot(0),
        ),
    );
}

/// The fields of the sync operations (bit 0, scope 2:1, wait 31:16, data 39:32, address 47:40,
/// slot 51:48), for opcode `op`.
fn sync_word(
    op: u64,
    propagate: u64,
    scope: u64,
    wait: u64,
    data: u64,
    addr: u64,
    sig: u64,
) -> u64 {
    (op << 56) | (sig << 48) | (addr << 40) | (data << 32) | (wait << 16) | (scope << 1) | propagate
}

#[test]
fn sync_add32() {
    check(
        sync_word(37, 1, 2, 0x00f0, 7, 12, 6),
        Instr::sync_add32(
            SyncOp::new(Reg64(12), Reg(7))
                .propagate_error()
                .scope(SyncScope::Csg)
                .wait(SlotMask::from_bits(0x00f0))
                .signal(slot(6)),
        ),
    );
}

#[test]
fn sync_set32() {
    check(
        sync_word(38, 0, 0, 0x8000, 1, 2, 15),
        Instr::sync_set32(
            SyncOp::new(Reg64(2), Reg(1))
                .wait(SlotMask::from_bits(0x8000))
                .signal(slot(15)),
        ),
    );
}

#[test]
fn sync_add64() {
    check(
        sync_word(51, 1, 0, 0x0003, 94, 92, 1),
        Instr::sync_add64(
            SyncOp::new(Reg64(92), Reg64(94))
                .propagate_error()
                .wait(SlotMask::from_bits(3))
                .signal(slot(1)),
        ),
    );
}

#[test]
fn sync_set64() {
    check(
        sync_word(52, 0, 2, 0x0100, 4, 6, 8),
        Instr::sync_set64(
            SyncOp::new(Reg64(6), Reg64(4))
                .scope(SyncScope::Csg)
                .wait(SlotMask::from_bits(0x100))
                .signal(slot(8)),
        ),
    );
}

#[test]
fn sync_wait32() {
    check(
        (39u64 << 56) | (14 << 40) | (9 << 32) | (1 << 28) | 1,
        Instr::SyncWait32(SyncWait {
            address: Reg64(14),
            data: Reg(9),
            condition: WaitCondition::Greater,
            error_reject: true,
        }),
    );
    check(
        (39u64 << 56) | (2 << 40) | (3 << 32),
        Instr::sync_wait32(WaitCondition::Lequal, Reg64(2), Reg(3)),
    );
}

#[test]
fn sync_wait64() {
    check(
        (53u64 << 56) | (30 << 40) | (32 << 32) | (1 << 28),
        Instr::sync_wait64(WaitCondition::Greater, Reg64(30), Reg64(32)),
    );
    check(
        (53u64 << 56) | (4 << 40) | (2 << 32) | 1,
        Instr::SyncWait64(SyncWait {
            address: Reg64(4),
            data: Reg64(2),
            condition: WaitCondition::Lequal,
            error_reject: true,
        }),
    );
}

#[test]
fn store_state() {
    check(
        (40u64 << 56) | (7 << 48) | (20 << 40) | (1 << 32) | (0x0101 << 16) | 0x0018,
        Instr::store_state(
            StateSel::CycleCount,
            Reg64(20),
            0x18,
            SlotMask::from_bits(0x0101),
            slot(7),
        ),
    );
    check(
        (40u64 << 56) | (3 << 32) | 0x8000,
        Instr::store_state(
            StateSel::ErrorState,
            Reg64(0),
            i16::MIN,
            SlotMask::NONE,
            slot(0),
        ),
    );
}

#[test]
fn prot_region() {
    check((41u64 << 56) | 0x1234, Instr::ProtRegion { size: 0x1234 });
}

#[test]
fn progress_store() {
    check(
        (42u64 << 56) | (22 << 40),
        Instr::ProgressStore { source: Reg64(22) },
    );
}

#[test]
fn progress_load() {
    check(
        (43u64 << 56) | (24 << 48),
        Instr::ProgressLoad { dest: Reg64(24) },
    );
}

#[test]
fn run_compute_indirect() {
    check(
        (44u64 << 56) | (2 << 46) | (1 << 44) | (3 << 42) | (0 << 40) | (1 << 32) | 0xbeef,
        Instr::RunComputeIndirect {
            workgroups_per_task: 0xbeef,
            progress_increment: true,
            select: shader_select(0, 3, 1, 2),
        },
    );
}

#[test]
fn error_barrier() {
    check(47u64 << 56, Instr::error_barrier());
}

#[test]
fn heap_set() {
    check((48u64 << 56) | (26 << 40), Instr::heap_set(Reg64(26)));
}

#[test]
fn heap_operation() {
    check(
        (49u64 << 56) | (9 << 48) | (3 << 32) | (0x0f0f << 16),
        Instr::HeapOperation {
            operation: HeapOp::FragmentCompleted,
            wait_mask: SlotMask::from_bits(0x0f0f),
            signal_slot: slot(9),
        },
    );
    check(
        (49u64 << 56) | (1 << 32),
        Instr::HeapOperation {
            operation: HeapOp::VertexTilerCompleted,
            wait_mask: SlotMask::NONE,
            signal_slot: slot(0),
        },
    );
}

#[test]
fn trace_point() {
    check(
        (50u64 << 56) | (0xb << 48) | (5 << 40) | (30 << 32) | (0x00ff << 16),
        Instr::TracePoint {
            base_register: Reg(30),
            register_count: 5,
            wait_mask: SlotMask::from_bits(0xff),
            signal_slot: slot(0xb),
        },
    );
}

/// Bits outside an instruction's fields are ignored by decode and cleared by encode.
#[test]
fn ignored_bits() {
    let cases = [
        // WAIT: everything but 23:16 and 32.
        (
            (3u64 << 56) | 0x00ff_fffe_ffff_ffff,
            (3u64 << 56) | (0xff << 16),
        ),
        // CALL: everything but 47:32.
        ((32u64 << 56) | 0x00ff_0000_ffff_ffff, 32u64 << 56),
        // ERROR_BARRIER: all of 55:0.
        ((47u64 << 56) | 0x00ff_ffff_ffff_ffff, 47u64 << 56),
        // SYNC_WAIT32: 55:48, 27:1.
        ((39u64 << 56) | 0x00ff_0000_0fff_fffe, 39u64 << 56),
    ];
    for (word, clean) in cases {
        let i = Instr::decode(word).unwrap();
        assert_eq!(i.encode(), clean, "{word:#018x}");
        assert_eq!(Instr::decode(clean), Ok(i));
    }
}

/// The defined opcodes, written out by hand (not taken from `Opcode::ALL`).
const DEFINED: [u8; 39] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 16, 17, 18, 20, 21, 22, 23, 24, 25, 32, 33, 34, 36, 37, 38,
    39, 40, 41, 42, 43, 44, 47, 48, 49, 50, 51, 52, 53,
];

#[test]
fn every_undefined_opcode_is_refused() {
    for n in 0..=255u8 {
        let word = (u64::from(n) << 56) | 0x0012_3456_789a_bcde;
        let r = Instr::decode(word);
        if DEFINED.contains(&n) {
            let op = Opcode::from_u8(n).unwrap();
            assert_eq!(op as u8, n);
            // Defined opcodes may still refuse the junk in an enum field; never the opcode.
            assert_ne!(r, Err(DecodeError::UndefinedOpcode(n)));
        } else {
            assert_eq!(Opcode::from_u8(n), None);
            assert_eq!(r, Err(DecodeError::UndefinedOpcode(n)), "opcode {n}");
        }
    }
    assert_eq!(Opcode::ALL.len(), DEFINED.len());
    for (op, n) in Opcode::ALL.iter().zip(DEFINED) {
        assert_eq!(*op as u8, n);
    }
}

/// Every value of the `width`-bit field at `lo` of opcode `op` outside `defined` is refused
/// with `UndefinedField`, naming the field; the defined values decode.
#[track_caller]
fn undefined_values(op: u8, field: &'static str, lo: u32, width: u32, defined: &[u32]) {
    let opcode = Opcode::from_u8(op).unwrap();
    for v in 0..1u32 << width {
        let word = (u64::from(op) << 56) | (u64::from(v) << lo);
        let r = Instr::decode(word);
        if defined.contains(&v) {
            assert!(r.is_ok(), "{field} = {v}: {r:?}");
        } else {
            assert_eq!(
                r,
                Err(DecodeError::UndefinedField {
                    opcode,
                    field,
                    value: v,
                }),
                "{} {field} = {v}",
                opcode.name()
            );
        }
    }
}

#[test]
fn every_undefined_enum_value_is_refused() {
    undefined_values(4, "task_axis", 14, 2, &[0, 1, 2]);
    undefined_values(7, "tile_order", 4, 4, &[0, 1, 2, 5, 6]);
    undefined_values(22, "condition", 28, 3, &[0, 1, 2, 3, 4, 5, 6]);
    undefined_values(25, "exception_type", 0, 8, &[2]);
    undefined_values(36, "l2_flush_mode", 0, 4, &[0, 1, 3]);
    undefined_values(36, "lsc_flush_mode", 4, 4, &[0, 1, 3]);
    undefined_values(36, "other_flush_mode", 8, 4, &[0, 2]);
    for op in [37, 38, 51, 52] {
        undefined_values(op, "scope", 1, 2, &[0, 2]);
    }
    for op in [39, 53] {
        undefined_values(op, "condition", 28, 4, &[0, 1]);
    }
    undefined_values(40, "state", 32, 2, &[0, 1, 2, 3]);
    undefined_values(49, "operation", 32, 2, &[0, 1, 3]);
}

#[test]
fn enum_tables_match_the_hardware_numbers() {
    let pairs: [(&[u32], Vec<u32>); 10] = [
        (&[0, 1, 2], TaskAxis::ALL.iter().map(|v| v.bits()).collect()),
        (
            &[0, 1, 2, 5, 6],
            TileOrder::ALL.iter().map(|v| v.bits()).collect(),
        ),
        (
            &[0, 1, 2, 3, 4, 5, 6],
            Condition::ALL.iter().map(|v| v.bits()).collect(),
        ),
        (
            &[0, 1],
            WaitCondition::ALL.iter().map(|v| v.bits()).collect(),
        ),
        (
            &[0, 1, 3],
            FlushMode::ALL.iter().map(|v| v.bits()).collect(),
        ),
        (
            &[0, 2],
            OtherFlushMode::ALL.iter().map(|v| v.bits()).collect(),
        ),
        (&[0, 2], SyncScope::ALL.iter().map(|v| v.bits()).collect()),
        (
            &[0, 1, 2, 3],
            StateSel::ALL.iter().map(|v| v.bits()).collect(),
        ),
        (&[0, 1, 3], HeapOp::ALL.iter().map(|v| v.bits()).collect()),
        (&[2], ExceptionType::ALL.iter().map(|v| v.bits()).collect()),
    ];
    for (want, got) in pairs {
        assert_eq!(want, &got[..]);
    }
    assert_eq!(TileOrder::ReverseVertical.bits(), 6);
    assert_eq!(Condition::Gequal.bits(), 5);
    assert_eq!(StateSel::DisjointCount.bits(), 2);
}

#[test]
fn narrow_fields_refuse_what_they_cannot_encode() {
    assert_eq!(Imm48::new(1 << 48), None);
    assert_eq!(NopPayload::new(1 << 56), None);
    assert_eq!(TaskIncrement::new(1 << 14), None);
    assert_eq!(ProgressQueue::new(32), None);
    assert_eq!(Slot::new(16), None);
    assert_eq!(Select::new(4), None);
    assert_eq!(Slot::try_from(16u8), Err(16));
    assert_eq!(WaitMask::of(slot(8)), None);
    assert_eq!(
        WaitMask::try_from(SlotMask::from_bits(0x1ff)),
        Err(SlotMask::from_bits(0x1ff))
    );
    assert_eq!(
        WaitMask::try_from(SlotMask::from_bits(0xff)),
        Ok(WaitMask::ALL)
    );
}

#[test]
fn names() {
    let names: Vec<&str> = Opcode::ALL.iter().map(|o| o.name()).collect();
    assert_eq!(
        names,
        [
            "NOP",
            "MOVE48",
            "MOVE32",
            "WAIT",
            "RUN_COMPUTE",
            "RUN_TILING",
            "RUN_IDVS",
            "RUN_FRAGMENT",
            "RUN_FULLSCREEN",
            "FINISH_TILING",
            "FINISH_FRAGMENT",
            "ADD_IMMEDIATE32",
            "ADD_IMMEDIATE64",
            "UMIN32",
            "LOAD_MULTIPLE",
            "STORE_MULTIPLE",
            "BRANCH",
            "SET_SB_ENTRY",
            "PROGRESS_WAIT",
            "SET_EXCEPTION_HANDLER",
            "CALL",
            "JUMP",
            "REQ_RESOURCE",
            "FLUSH_CACHE2",
            "SYNC_ADD32",
            "SYNC_SET32",
            "SYNC_WAIT32",
            "STORE_STATE",
            "PROT_REGION",
            "PROGRESS_STORE",
            "PROGRESS_LOAD",
            "RUN_COMPUTE_INDIRECT",
            "ERROR_BARRIER",
            "HEAP_SET",
            "HEAP_OPERATION",
            "TRACE_POINT",
            "SYNC_ADD64",
            "SYNC_SET64",
            "SYNC_WAIT64",
        ]
    );
}
