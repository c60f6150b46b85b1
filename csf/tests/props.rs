// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Property tests: every valid instruction survives encode then decode, and no word makes the
//! decoder or the disassembler panic.

use std::fmt::Write as _;

use csf::*;
use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::Union;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: if cfg!(miri) { 8 } else { 4096 },
        // Miri's isolation forbids the file access that failure persistence needs.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn reg() -> impl Strategy<Value = Reg> {
    any::<u8>().prop_map(Reg)
}

fn pair() -> impl Strategy<Value = Reg64> {
    any::<u8>().prop_map(Reg64)
}

fn slot() -> impl Strategy<Value = Slot> {
    (0..=Slot::MAX.get()).prop_filter_map("slot", Slot::new)
}

fn mask() -> impl Strategy<Value = SlotMask> {
    any::<u16>().prop_map(SlotMask::from_bits)
}

fn shader_select() -> impl Strategy<Value = ShaderSelect> {
    let s = || (0..=Select::MAX.get()).prop_filter_map("select", Select::new);
    (s(), s(), s(), s()).prop_map(|(srt, spd, tsd, fau)| ShaderSelect { srt, spd, tsd, fau })
}

fn sync_op<D: Clone + std::fmt::Debug>(
    data: impl Strategy<Value = D>,
) -> impl Strategy<Value = SyncOp<D>> {
    (
        pair(),
        data,
        select(SyncScope::ALL),
        any::<bool>(),
        mask(),
        slot(),
    )
        .prop_map(
            |(address, data, scope, error_propagate, wait_mask, signal_slot)| SyncOp {
                address,
                data,
                scope,
                error_propagate,
                wait_mask,
                signal_slot,
            },
        )
}

fn sync_wait<D: Clone + std::fmt::Debug>(
    data: impl Strategy<Value = D>,
) -> impl Strategy<Value = SyncWait<D>> {
    (pair(), data, select(WaitCondition::ALL), any::<bool>()).prop_map(
        |(address, data, condition, error_reject)| SyncWait {
            address,
            data,
            condition,
            error_reject,
        },
    )
}

/// Every variant of [`Instr`], each field anywhere in its range.
fn instr() -> impl Strategy<Value = Instr> {
    let b = any::<bool>;
    Union::new(vec![
        (0..=NopPayload::MAX.get())
            .prop_filter_map("payload", NopPayload::new)
            .prop_map(|payload| Instr::Nop { payload })
            .boxed(),
        (
            pair(),
            (0..=Imm48::MAX.get()).prop_filter_map("imm", Imm48::new),
        )
            .prop_map(|(dest, imm)| Instr::Move48 { dest, imm })
            .boxed(),
        (reg(), any::<u32>())
            .prop_map(|(dest, imm)| Instr::Move32 { dest, imm })
            .boxed(),
        (any::<u8>(), b())
            .prop_map(|(m, progress_increment)| Instr::Wait {
                mask: WaitMask::from_bits(m),
                progress_increment,
            })
            .boxed(),
        (
            (0..=TaskIncrement::MAX.get()).prop_filter_map("inc", TaskIncrement::new),
            select(TaskAxis::ALL),
            b(),
            shader_select(),
        )
            .prop_map(
                |(task_increment, task_axis, progress_increment, select)| Instr::RunCompute {
                    task_increment,
                    task_axis,
                    progress_increment,
                    select,
                },
            )
            .boxed(),
        (any::<u32>(), b(), shader_select())
            .prop_map(
                |(flags_override, progress_increment, select)| Instr::RunTiling {
                    flags_override,
                    progress_increment,
                    select,
                },
            )
            .boxed(),
        (any::<u32>(), any::<[bool; 8]>(), reg())
            .prop_map(|(flags_override, f, draw_id)| Instr::RunIdvs {
                flags_override,
                progress_increment: f[0],
                malloc_enable: f[1],
                draw_id_register_enable: f[2],
                varying_srt_select: f[3],
                varying_fau_select: f[4],
                varying_tsd_select: f[5],
                fragment_srt_select: f[6],
                fragment_tsd_select: f[7],
                draw_id,
            })
            .boxed(),
        (b(), select(TileOrder::ALL), b())
            .prop_map(
                |(enable_tem, tile_order, progress_increment)| Instr::RunFragment {
                    enable_tem,
                    tile_order,
                    progress_increment,
                },
            )
            .boxed(),
        (any::<u32>(), b(), pair())
            .prop_map(
                |(flags_override, progress_increment, dcd)| Instr::RunFullscreen {
                    flags_override,
                    progress_increment,
                    dcd,
                },
            )
            .boxed(),
        b().prop_map(|progress_increment| Instr::FinishTiling { progress_increment })
            .boxed(),
        (b(), mask(), pair(), pair(), slot())
            .prop_map(
                |(inc, wait_mask, last, first, signal_slot)| Instr::FinishFragment {
                    increment_fragment_completed: inc,
                    wait_mask,
                    last_heap_chunk: last,
                    first_heap_chunk: first,
                    signal_slot,
                },
            )
            .boxed(),
        (reg(), reg(), any::<i32>())
            .prop_map(|(dest, source, imm)| Instr::AddImmediate32 { dest, source, imm })
            .boxed(),
        (pair(), pair(), any::<i32>())
            .prop_map(|(dest, source, imm)| Instr::AddImmediate64 { dest, source, imm })
            .boxed(),
        (reg(), reg(), reg())
            .prop_map(|(dest, source0, source1)| Instr::Umin32 {
                dest,
                source0,
                source1,
            })
            .boxed(),
        (reg(), pair(), any::<i16>(), any::<u16>())
            .prop_map(|(base, address, offset, mask)| Instr::LoadMultiple {
                base,
                address,
                offset,
                mask,
            })
            .boxed(),
        (reg(), pair(), any::<i16>(), any::<u16>())
            .prop_map(|(base, address, offset, mask)| Instr::StoreMultiple {
                base,
                address,
                offset,
                mask,
            })
            .boxed(),
        (select(Condition::ALL), reg(), any::<i16>())
            .prop_map(|(condition, value, offset)| Instr::Branch {
                condition,
                value,
                offset,
            })
            .boxed(),
        (slot(), slot())
            .prop_map(|(endpoint_entry, other_entry)| Instr::SetSbEntry {
                endpoint_entry,
                other_entry,
            })
            .boxed(),
        (
            (0..=ProgressQueue::MAX.get()).prop_filter_map("queue", ProgressQueue::new),
            pair(),
        )
            .prop_map(|(queue, source)| Instr::ProgressWait { queue, source })
            .boxed(),
        (select(ExceptionType::ALL), pair(), reg())
            .prop_map(
                |(exception_type, address, length)| Instr::SetExceptionHandler {
                    exception_type,
                    address,
                    length,
                },
            )
            .boxed(),
        (pair(), reg())
            .prop_map(|(address, length)| Instr::Call { address, length })
            .boxed(),
        (pair(), reg())
            .prop_map(|(address, length)| Instr::Jump { address, length })
            .boxed(),
        any::<[bool; 4]>()
            .prop_map(|f| Instr::ReqResource {
                compute: f[0],
                fragment: f[1],
                tiler: f[2],
                idvs: f[3],
            })
            .boxed(),
        (
            select(FlushMode::ALL),
            select(FlushMode::ALL),
            select(OtherFlushMode::ALL),
            mask(),
            reg(),
            slot(),
        )
            .prop_map(|(l2, lsc, other, wait_mask, id, signal_slot)| {
                Instr::flush_cache2(l2, lsc, other, id, wait_mask, signal_slot)
            })
            .boxed(),
        sync_op(reg()).prop_map(Instr::SyncAdd32).boxed(),
        sync_op(reg()).prop_map(Instr::SyncSet32).boxed(),
        sync_wait(reg()).prop_map(Instr::SyncWait32).boxed(),
        (select(StateSel::ALL), pair(), any::<i16>(), mask(), slot())
            .prop_map(
                |(state, address, offset, wait_mask, signal_slot)| Instr::StoreState {
                    state,
                    address,
                    offset,
                    wait_mask,
                    signal_slot,
                },
            )
            .boxed(),
        any::<u16>()
            .prop_map(|size| Instr::ProtRegion { size })
            .boxed(),
        pair()
            .prop_map(|source| Instr::ProgressStore { source })
            .boxed(),
        pair().prop_map(|dest| Instr::ProgressLoad { dest }).boxed(),
        (any::<u16>(), b(), shader_select())
            .prop_map(|(workgroups_per_task, progress_increment, select)| {
                Instr::RunComputeIndirect {
                    workgroups_per_task,
                    progress_increment,
                    select,
                }
            })
            .boxed(),
        Just(Instr::ErrorBarrier).boxed(),
        pair()
            .prop_map(|address| Instr::HeapSet { address })
            .boxed(),
        (select(HeapOp::ALL), mask(), slot())
            .prop_map(|(operation, wait_mask, signal_slot)| Instr::HeapOperation {
                operation,
                wait_mask,
                signal_slot,
            })
            .boxed(),
        (reg(), any::<u8>(), mask(), slot())
            .prop_map(
                |(base_register, register_count, wait_mask, signal_slot)| Instr::TracePoint {
                    base_register,
                    register_count,
                    wait_mask,
                    signal_slot,
                },
            )
            .boxed(),
        sync_op(pair()).prop_map(Instr::SyncAdd64).boxed(),
        sync_op(pair()).prop_map(Instr::SyncSet64).boxed(),
        sync_wait(pair()).prop_map(Instr::SyncWait64).boxed(),
    ])
}

/// The strategy above has one arm per opcode.
#[test]
fn the_strategy_covers_every_opcode() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut seen = std::collections::BTreeSet::new();
    let mut runner = TestRunner::deterministic();
    let s = instr();
    for _ in 0..if cfg!(miri) { 200 } else { 20_000 } {
        seen.insert(s.new_tree(&mut runner).unwrap().current().opcode());
        if seen.len() == Opcode::ALL.len() {
            break;
        }
    }
    if !cfg!(miri) {
        assert_eq!(seen.len(), Opcode::ALL.len(), "{seen:?}");
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn encode_then_decode_gives_the_instruction(i in instr()) {
        let w = i.encode();
        prop_assert_eq!(Instr::decode(w), Ok(i));
        prop_assert_eq!((w >> 56) as u8, i.opcode() as u8);
        let mut s = String::new();
        write!(s, "{i}").unwrap();
        prop_assert!(s.starts_with(i.opcode().name()));
    }

    #[test]
    fn any_word_decodes_without_panic_to_a_fixed_point(w in any::<u64>()) {
        match Instr::decode(w) {
            Ok(i) => {
                let clean = i.encode();
                // Encoding keeps the opcode and sets no bit the word did not have.
                prop_assert_eq!(clean >> 56, w >> 56);
                prop_assert_eq!(clean & !w, 0);
                prop_assert_eq!(Instr::decode(clean), Ok(i));
                prop_assert_eq!(Instr::decode(clean).map(|j| j.encode()), Ok(clean));
            }
            Err(DecodeError::UndefinedOpcode(n)) => {
                prop_assert_eq!(u64::from(n), w >> 56);
                prop_assert_eq!(Opcode::from_u8(n), None);
            }
            Err(DecodeError::UndefinedField { opcode, .. }) => {
                prop_assert_eq!(opcode as u64, w >> 56);
            }
        }
    }

    /// Words with a defined opcode (the low 56 bits arbitrary), which reach every decoder arm.
    #[test]
    fn defined_opcodes_with_any_fields(op in select(Opcode::ALL), low in 0..1u64 << 56) {
        let w = (op as u64) << 56 | low;
        if let Ok(i) = Instr::decode(w) {
            prop_assert_eq!(i.opcode(), op);
            prop_assert_eq!(Instr::decode(i.encode()), Ok(i));
            prop_assert_eq!(i.encode() & !w, 0);
        }
    }

    #[test]
    fn a_listing_of_any_words_has_one_line_per_word(words in proptest::collection::vec(any::<u64>(), 0..32), base in any::<u64>()) {
        let text = Disasm::new(&words, base).to_string();
        prop_assert_eq!(text.lines().count(), words.len());
    }
}
