// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Every split/merge case of `drm_gpuvm.c`'s documentation, with the exact op sequence and
//! `keep` values the C implementation produces, plus the unmap cases.
//!
//! Diagram units are pages (`P`); `N` and `MO` are two different object offsets.

mod common;

use common::*;
use gpuvm::Mapping;

const N: u64 = 4 * P;
const MO: u64 = 9 * P;

fn a() -> Bo {
    bo(1)
}

fn b() -> Bo {
    bo(2)
}

/// One existing mapping `old`, then `req`: returns the ops and the resulting VAs.
fn case(old: &[(u64, u64, &Bo, u64)], req: Mapping<'_, Bo>) -> (Vec<Rec>, Vec<M>) {
    let mut vm = vm();
    for &(s, e, o, off) in old {
        vm.map(Mapping::new(s * P, (e - s) * P, o, off), 0).unwrap();
    }
    let ops = sm_map(&mut vm, req);
    (ops, vas(&vm))
}

fn mm(s: u64, e: u64, id: u64, off: u64) -> M {
    (s * P, (e - s) * P, Some(id), off)
}

#[test]
fn sm_map_case_01_identical_keeps_ptes() {
    let (a, _) = (a(), b());
    let (ops, res) = case(&[(0, 1, &a, N)], Mapping::new(0, P, &a, N));
    assert_eq!(
        ops,
        [Rec::Unmap(mm(0, 1, 1, N), true), Rec::Map(mm(0, 1, 1, N))]
    );
    assert_eq!(res, [mm(0, 1, 1, N)]);
}

#[test]
fn sm_map_case_02_identical_but_offset() {
    let a = a();
    let (ops, res) = case(&[(0, 1, &a, N)], Mapping::new(0, P, &a, MO));
    assert_eq!(
        ops,
        [Rec::Unmap(mm(0, 1, 1, N), false), Rec::Map(mm(0, 1, 1, MO))]
    );
    assert_eq!(res, [mm(0, 1, 1, MO)]);
}

#[test]
fn sm_map_case_03_identical_but_object() {
    let (a, b) = (a(), b());
    let (ops, res) = case(&[(0, 1, &a, N)], Mapping::new(0, P, &b, N));
    assert_eq!(
        ops,
        [Rec::Unmap(mm(0, 1, 1, N), false), Rec::Map(mm(0, 1, 2, N))]
    );
    assert_eq!(res, [mm(0, 1, 2, N)]);
}

#[test]
fn sm_map_case_04_old_left_aligned_subset() {
    let (a, b) = (a(), b());
    let (ops, res) = case(&[(0, 1, &a, N)], Mapping::new(0, 2 * P, &a, N));
    assert_eq!(
        ops,
        [Rec::Unmap(mm(0, 1, 1, N), true), Rec::Map(mm(0, 2, 1, N))]
    );
    assert_eq!(res, [mm(0, 2, 1, N)]);
    // Same result, but no keep, with another object or a non-contiguous offset.
    let (ops, _) = case(&[(0, 1, &a, N)], Mapping::new(0, 2 * P, &b, N));
    assert_eq!(
        ops,
        [Rec::Unmap(mm(0, 1, 1, N), false), Rec::Map(mm(0, 2, 2, N))]
    );
    let (ops, _) = case(&[(0, 1, &a, N)], Mapping::new(0, 2 * P, &a, MO));
    assert_eq!(
        ops,
        [Rec::Unmap(mm(0, 1, 1, N), false), Rec::Map(mm(0, 2, 1, MO))]
    );
}

#[test]
fn sm_map_case_05_req_left_aligned_subset_other_object() {
    let (a, b) = (a(), b());
    let (ops, res) = case(&[(0, 2, &a, N)], Mapping::new(0, P, &b, N));
    assert_eq!(
        ops,
        [
            Rec::Remap(mm(0, 2, 1, N), None, Some(mm(1, 2, 1, N + P)), false),
            Rec::Map(mm(0, 1, 2, N)),
        ]
    );
    assert_eq!(res, [mm(0, 1, 2, N), mm(1, 2, 1, N + P)]);
    // A non-contiguous offset of the same object: same ops, no keep.
    let (ops, _) = case(&[(0, 2, &a, N)], Mapping::new(0, P, &a, MO));
    assert_eq!(
        ops,
        [
            Rec::Remap(mm(0, 2, 1, N), None, Some(mm(1, 2, 1, N + P)), false),
            Rec::Map(mm(0, 1, 1, MO)),
        ]
    );
}

#[test]
fn sm_map_case_06_old_superset_left_keeps_ptes() {
    let a = a();
    let (ops, res) = case(&[(0, 2, &a, N)], Mapping::new(0, P, &a, N));
    assert_eq!(
        ops,
        [
            Rec::Remap(mm(0, 2, 1, N), None, Some(mm(1, 2, 1, N + P)), true),
            Rec::Map(mm(0, 1, 1, N)),
        ]
    );
    assert_eq!(res, [mm(0, 1, 1, N), mm(1, 2, 1, N + P)]);
}

#[test]
fn sm_map_case_07_req_right_aligned_subset_other_object() {
    let (a, b) = (a(), b());
    let (ops, res) = case(&[(0, 2, &a, N)], Mapping::new(P, P, &b, MO));
    assert_eq!(
        ops,
        [
            Rec::Remap(mm(0, 2, 1, N), Some(mm(0, 1, 1, N)), None, false),
            Rec::Map(mm(1, 2, 2, MO)),
        ]
    );
    assert_eq!(res, [mm(0, 1, 1, N), mm(1, 2, 2, MO)]);
}

#[test]
fn sm_map_case_08_old_superset_right_keeps_ptes() {
    let a = a();
    let (ops, res) = case(&[(0, 2, &a, N)], Mapping::new(P, P, &a, N + P));
    assert_eq!(
        ops,
        [
            Rec::Remap(mm(0, 2, 1, N), Some(mm(0, 1, 1, N)), None, true),
            Rec::Map(mm(1, 2, 1, N + P)),
        ]
    );
    assert_eq!(res, [mm(0, 1, 1, N), mm(1, 2, 1, N + P)]);
}

#[test]
fn sm_map_case_09_old_overlapped_at_end_other_object() {
    let (a, b) = (a(), b());
    let (ops, res) = case(&[(0, 2, &a, N)], Mapping::new(P, 2 * P, &b, MO));
    assert_eq!(
        ops,
        [
            Rec::Remap(mm(0, 2, 1, N), Some(mm(0, 1, 1, N)), None, false),
            Rec::Map(mm(1, 3, 2, MO)),
        ]
    );
    assert_eq!(res, [mm(0, 1, 1, N), mm(1, 3, 2, MO)]);
}

#[test]
fn sm_map_case_10_old_overlapped_at_end_contiguous_keeps_ptes() {
    let a = a();
    let (ops, res) = case(&[(0, 2, &a, N)], Mapping::new(P, 2 * P, &a, N + P));
    assert_eq!(
        ops,
        [
            Rec::Remap(mm(0, 2, 1, N), Some(mm(0, 1, 1, N)), None, true),
            Rec::Map(mm(1, 3, 1, N + P)),
        ]
    );
    assert_eq!(res, [mm(0, 1, 1, N), mm(1, 3, 1, N + P)]);
}

#[test]
fn sm_map_case_11_req_centered_subset_other_object() {
    let (a, b) = (a(), b());
    let (ops, res) = case(&[(0, 3, &a, N)], Mapping::new(P, P, &b, MO));
    assert_eq!(
        ops,
        [
            Rec::Remap(
                mm(0, 3, 1, N),
                Some(mm(0, 1, 1, N)),
                Some(mm(2, 3, 1, N + 2 * P)),
                false
            ),
            Rec::Map(mm(1, 2, 2, MO)),
        ]
    );
    assert_eq!(
        res,
        [mm(0, 1, 1, N), mm(1, 2, 2, MO), mm(2, 3, 1, N + 2 * P)]
    );
}

#[test]
fn sm_map_case_12_req_contiguous_centered_subset_keeps_ptes() {
    let a = a();
    let (ops, res) = case(&[(0, 3, &a, N)], Mapping::new(P, P, &a, N + P));
    assert_eq!(
        ops,
        [
            Rec::Remap(
                mm(0, 3, 1, N),
                Some(mm(0, 1, 1, N)),
                Some(mm(2, 3, 1, N + 2 * P)),
                true
            ),
            Rec::Map(mm(1, 2, 1, N + P)),
        ]
    );
    assert_eq!(
        res,
        [mm(0, 1, 1, N), mm(1, 2, 1, N + P), mm(2, 3, 1, N + 2 * P)]
    );
}

#[test]
fn sm_map_case_13_old_right_aligned_subset() {
    let (a, b) = (a(), b());
    let (ops, res) = case(&[(1, 2, &a, N + P)], Mapping::new(0, 2 * P, &a, N));
    assert_eq!(
        ops,
        [
            Rec::Unmap(mm(1, 2, 1, N + P), true),
            Rec::Map(mm(0, 2, 1, N))
        ]
    );
    assert_eq!(res, [mm(0, 2, 1, N)]);
    let (ops, _) = case(&[(1, 2, &a, N + P)], Mapping::new(0, 2 * P, &b, N));
    assert_eq!(
        ops,
        [
            Rec::Unmap(mm(1, 2, 1, N + P), false),
            Rec::Map(mm(0, 2, 2, N))
        ]
    );
    let (ops, _) = case(&[(1, 2, &a, N + P)], Mapping::new(0, 2 * P, &a, MO));
    assert_eq!(
        ops,
        [
            Rec::Unmap(mm(1, 2, 1, N + P), false),
            Rec::Map(mm(0, 2, 1, MO))
        ]
    );
}

#[test]
fn sm_map_case_14_old_centered_subset() {
    let (a, b) = (a(), b());
    let (ops, res) = case(&[(1, 2, &a, N + P)], Mapping::new(0, 3 * P, &a, N));
    assert_eq!(
        ops,
        [
            Rec::Unmap(mm(1, 2, 1, N + P), true),
            Rec::Map(mm(0, 3, 1, N))
        ]
    );
    assert_eq!(res, [mm(0, 3, 1, N)]);
    let (ops, _) = case(&[(1, 2, &a, N + P)], Mapping::new(0, 3 * P, &b, N));
    assert_eq!(
        ops,
        [
            Rec::Unmap(mm(1, 2, 1, N + P), false),
            Rec::Map(mm(0, 3, 2, N))
        ]
    );
}

#[test]
fn sm_map_case_15_old_overlapped_at_start_other_object() {
    let (a, b) = (a(), b());
    let (ops, res) = case(&[(1, 3, &a, N)], Mapping::new(0, 2 * P, &b, MO));
    assert_eq!(
        ops,
        [
            Rec::Remap(mm(1, 3, 1, N), None, Some(mm(2, 3, 1, N + P)), false),
            Rec::Map(mm(0, 2, 2, MO)),
        ]
    );
    assert_eq!(res, [mm(0, 2, 2, MO), mm(2, 3, 1, N + P)]);
}

#[test]
fn sm_map_into_empty_range_only_maps() {
    let (a, b) = (a(), b());
    let (ops, res) = case(
        &[(0, 1, &a, N), (3, 4, &a, N)],
        Mapping::new(P, 2 * P, &b, 0),
    );
    assert_eq!(ops, [Rec::Map(mm(1, 3, 2, 0))]);
    assert_eq!(res, [mm(0, 1, 1, N), mm(1, 3, 2, 0), mm(3, 4, 1, N)]);
}

#[test]
fn sm_map_spanning_many_remaps_first_and_last_unmaps_between() {
    let (a, b) = (a(), b());
    let old = [(0, 2, &a, 0), (2, 3, &b, 0), (3, 4, &a, 0), (4, 6, &b, P)];
    let (ops, res) = case(&old, Mapping::new(P, 4 * P, &a, P));
    assert_eq!(
        ops,
        [
            Rec::Remap(mm(0, 2, 1, 0), Some(mm(0, 1, 1, 0)), None, true),
            Rec::Unmap(mm(2, 3, 2, 0), false),
            Rec::Unmap(mm(3, 4, 1, 0), false),
            Rec::Remap(mm(4, 6, 2, P), None, Some(mm(5, 6, 2, 2 * P)), false),
            Rec::Map(mm(1, 5, 1, P)),
        ]
    );
    assert_eq!(res, [mm(0, 1, 1, 0), mm(1, 5, 1, P), mm(5, 6, 2, 2 * P)]);
}

#[test]
fn sm_map_sparse_never_keeps() {
    let mut vm = vm();
    vm.map(Mapping::sparse(0, 2 * P), 0).unwrap();
    let ops = sm_map(&mut vm, Mapping::sparse(0, 2 * P));
    assert_eq!(
        ops,
        [
            Rec::Unmap((0, 2 * P, None, 0), false),
            Rec::Map((0, 2 * P, None, 0))
        ]
    );
    let ops = sm_map(&mut vm, Mapping::sparse(P, P));
    assert_eq!(
        ops,
        [
            Rec::Remap((0, 2 * P, None, 0), Some((0, P, None, 0)), None, false),
            Rec::Map((P, P, None, 0)),
        ]
    );
}

#[test]
fn sm_unmap_case_exact() {
    let mut vm = vm();
    vm.map(Mapping::new(0, P, &a(), N), 0).unwrap();
    assert_eq!(sm_unmap(&mut vm, 0, P), [Rec::Unmap(mm(0, 1, 1, N), false)]);
    assert!(vm.is_empty());
    assert!(vm.vm_bo(&a()).is_none());
}

#[test]
fn sm_unmap_case_enclosed_mappings_in_order() {
    let mut vm = vm();
    let (a, b) = (a(), b());
    vm.map(Mapping::new(P, P, &a, 0), 0).unwrap();
    vm.map(Mapping::new(3 * P, 2 * P, &b, 0), 0).unwrap();
    vm.map(Mapping::sparse(6 * P, P), 0).unwrap();
    assert_eq!(
        sm_unmap(&mut vm, 0, 8 * P),
        [
            Rec::Unmap(mm(1, 2, 1, 0), false),
            Rec::Unmap(mm(3, 5, 2, 0), false),
            Rec::Unmap((6 * P, P, None, 0), false),
        ]
    );
    assert!(vm.is_empty());
}

#[test]
fn sm_unmap_case_centered_split() {
    let mut vm = vm();
    vm.map(Mapping::new(0, 3 * P, &a(), N), 0).unwrap();
    assert_eq!(
        sm_unmap(&mut vm, P, P),
        [Rec::Remap(
            mm(0, 3, 1, N),
            Some(mm(0, 1, 1, N)),
            Some(mm(2, 3, 1, N + 2 * P)),
            false
        )]
    );
    assert_eq!(vas(&vm), [mm(0, 1, 1, N), mm(2, 3, 1, N + 2 * P)]);
}

#[test]
fn sm_unmap_case_cut_end() {
    let mut vm = vm();
    vm.map(Mapping::new(0, 2 * P, &a(), N), 0).unwrap();
    assert_eq!(
        sm_unmap(&mut vm, P, 2 * P),
        [Rec::Remap(
            mm(0, 2, 1, N),
            Some(mm(0, 1, 1, N)),
            None,
            false
        )]
    );
}

#[test]
fn sm_unmap_case_cut_start() {
    let mut vm = vm();
    vm.map(Mapping::new(P, 2 * P, &a(), N), 0).unwrap();
    assert_eq!(
        sm_unmap(&mut vm, 0, 2 * P),
        [Rec::Remap(
            mm(1, 3, 1, N),
            None,
            Some(mm(2, 3, 1, N + P)),
            false
        )]
    );
}

#[test]
fn sm_unmap_case_spanning_remap_unmaps_remap() {
    let mut vm = vm();
    let (a, b) = (a(), b());
    vm.map(Mapping::new(0, 2 * P, &a, 0), 0).unwrap();
    vm.map(Mapping::new(2 * P, P, &b, 0), 0).unwrap();
    vm.map(Mapping::new(3 * P, 2 * P, &a, 2 * P), 0).unwrap();
    assert_eq!(
        sm_unmap(&mut vm, P, 3 * P),
        [
            Rec::Remap(mm(0, 2, 1, 0), Some(mm(0, 1, 1, 0)), None, false),
            Rec::Unmap(mm(2, 3, 2, 0), false),
            Rec::Remap(mm(3, 5, 1, 2 * P), None, Some(mm(4, 5, 1, 3 * P)), false),
        ]
    );
    assert!(vm.vm_bo(&b).is_none());
    assert_eq!(vm.vm_bo(&a).unwrap().va_count(), 2);
}

#[test]
fn sm_unmap_case_nothing_mapped_no_ops() {
    let mut vm = vm();
    vm.map(Mapping::new(0, P, &a(), 0), 0).unwrap();
    assert_eq!(sm_unmap(&mut vm, P, 4 * P), []);
    assert_eq!(vm.len(), 1);
}

#[test]
fn remap_pieces_inherit_flags_and_data() {
    let mut vm = vm();
    let a = a();
    let mut r = Recorder {
        tag: 7,
        ..Recorder::default()
    };
    vm.sm_map(&mut r, Mapping::new(0, 3 * P, &a, 0).with_flags(0x5))
        .unwrap();
    vm.unmap(P, P).unwrap();
    let got: Vec<_> = vm
        .iter()
        .map(|v| (v.addr(), v.flags(), *v.data().unwrap()))
        .collect();
    assert_eq!(got, [(0, 0x5, 7), (2 * P, 0x5, 7)]);
}

fn madvise(vm: &mut Vm, req: Mapping<'_, Bo>) -> Vec<Rec> {
    let mut r = Recorder::default();
    vm.reserve(2, 1).unwrap();
    vm.sm_madvise(&mut r, req).unwrap();
    r.ops
}

fn sp(s: u64, e: u64) -> M {
    (s * P, (e - s) * P, None, 0)
}

/// Three sparse VAs [0,4) [4,8) [8,12), offsets 0 (sparse VAs keep the offset they were given).
fn three_sparse() -> Vm {
    let mut vm = vm();
    for i in 0..3 {
        vm.map(Mapping::sparse(4 * i * P, 4 * P), 0).unwrap();
    }
    vm
}

#[test]
fn sm_madvise_case_1_inside_one_va() {
    let mut vm = vm();
    vm.map(Mapping::sparse(0, 4 * P), 0).unwrap();
    let ops = madvise(&mut vm, Mapping::sparse(P, 2 * P));
    assert_eq!(
        ops,
        [
            Rec::Remap(
                sp(0, 4),
                Some(sp(0, 1)),
                Some((3 * P, P, None, 3 * P)),
                false
            ),
            Rec::Map(sp(1, 3)),
        ]
    );
    assert_eq!(vas(&vm), [sp(0, 1), sp(1, 3), (3 * P, P, None, 3 * P)]);
}

#[test]
fn sm_madvise_case_2_spanning_three_vas() {
    let mut vm = three_sparse();
    let ops = madvise(&mut vm, Mapping::sparse(2 * P, 8 * P));
    assert_eq!(
        ops,
        [
            Rec::Remap(sp(0, 4), Some(sp(0, 2)), None, false),
            Rec::Map(sp(2, 4)),
            Rec::Remap(sp(8, 12), None, Some((10 * P, 2 * P, None, 2 * P)), false),
            Rec::Map(sp(8, 10)),
        ]
    );
    assert_eq!(
        vas(&vm),
        [
            sp(0, 2),
            sp(2, 4),
            sp(4, 8),
            sp(8, 10),
            (10 * P, 2 * P, None, 2 * P)
        ]
    );
}

#[test]
fn sm_madvise_case_3_start_on_boundary() {
    let mut vm = three_sparse();
    let ops = madvise(&mut vm, Mapping::sparse(0, 10 * P));
    assert_eq!(
        ops,
        [
            Rec::Remap(sp(8, 12), None, Some((10 * P, 2 * P, None, 2 * P)), false),
            Rec::Map(sp(8, 10)),
        ]
    );
}

#[test]
fn sm_madvise_case_3_end_on_boundary() {
    let mut vm = three_sparse();
    let ops = madvise(&mut vm, Mapping::sparse(2 * P, 6 * P));
    assert_eq!(
        ops,
        [
            Rec::Remap(sp(0, 4), Some(sp(0, 2)), None, false),
            Rec::Map(sp(2, 4)),
        ]
    );
}

#[test]
fn sm_madvise_case_4_aligned_no_ops() {
    let mut vm = three_sparse();
    assert_eq!(madvise(&mut vm, Mapping::sparse(4 * P, 8 * P)), []);
    assert_eq!(madvise(&mut vm, Mapping::sparse(4 * P, 4 * P)), []);
    assert_eq!(vm.len(), 3);
}

#[test]
fn sm_madvise_case_5_empty_no_ops() {
    let mut vm = vm();
    assert_eq!(madvise(&mut vm, Mapping::sparse(0, 4 * P)), []);
    assert!(vm.is_empty());
}

#[test]
fn sm_madvise_skips_object_backed_vas() {
    let mut vm = vm();
    vm.map(Mapping::new(0, 4 * P, &a(), 0), 0).unwrap();
    assert_eq!(madvise(&mut vm, Mapping::sparse(P, 2 * P)), []);
    assert_eq!(vas(&vm), [mm(0, 4, 1, 0)]);
}

#[test]
fn sm_madvise_va_sticking_out_at_end_only() {
    let mut vm = vm();
    vm.map(Mapping::sparse(0, 4 * P), 0).unwrap();
    let ops = madvise(&mut vm, Mapping::sparse(0, 2 * P));
    assert_eq!(
        ops,
        [
            Rec::Remap(sp(0, 4), None, Some((2 * P, 2 * P, None, 2 * P)), false),
            Rec::Map(sp(0, 2)),
        ]
    );
}
