// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Rejected requests change nothing; failed or dropped VM_BIND batches leave the VM exactly as
//! it was; a driver error in immediate mode keeps the VM consistent.

mod common;

use common::*;
use gpuvm::{BoSlot, Error, Gpuvm, Mapping, Op, OpEntry, VaSlot, VmConfig};

fn populated() -> Vm {
    let cfg = VmConfig::new(0x10_0000, 0x100 * P)
        .reserve(0x10_0000 + 0xf0 * P, 0x10 * P)
        .align(P)
        .resv_id(0);
    let mut vm = vm_with(cfg, usize::MAX);
    let ext = Bo {
        id: 3,
        size: 16 * P,
        resv: 5,
    };
    vm.map(Mapping::new(0x10_0000, 4 * P, &bo(1), 0), 1)
        .unwrap();
    vm.map(Mapping::new(0x10_0000 + 8 * P, 4 * P, &ext, 0), 2)
        .unwrap();
    vm.map(Mapping::sparse(0x10_0000 + 16 * P, 2 * P), 3)
        .unwrap();
    vm.bo_evict(&ext, true).unwrap();
    vm
}

#[test]
fn invalid_requests_are_rejected_precisely_and_change_nothing() {
    let mut vm = populated();
    let before = snapshot(&vm);
    let base = 0x10_0000;
    let small = Bo {
        id: 9,
        size: 2 * P,
        resv: 0,
    };
    let a = bo(1);
    let cases: [(Mapping<'_, Bo>, Error); 9] = [
        (Mapping::new(base, 0, &a, 0), Error::ZeroRange),
        (
            Mapping::new(u64::MAX - P + 1, 2 * P, &a, 0),
            Error::Overflow,
        ),
        (Mapping::new(base - P, 2 * P, &a, 0), Error::OutOfVm),
        (Mapping::new(base + 0xff * P, 2 * P, &a, 0), Error::OutOfVm),
        (
            Mapping::new(base + 0xef * P, 2 * P, &a, 0),
            Error::KernelReserved,
        ),
        (Mapping::new(base + 1, P, &a, 0), Error::Misaligned),
        (Mapping::new(base, P, &a, 0x800), Error::Misaligned),
        (Mapping::new(base, 4 * P, &small, 0), Error::OutOfObject),
        (Mapping::new(base, P, &a, u64::MAX - P + 1), Error::Overflow),
    ];
    for (req, err) in cases {
        let mut r = Recorder::default();
        assert_eq!(vm.sm_map(&mut r, req), Err(err), "{req:?}");
        assert!(r.ops.is_empty());
        assert_eq!(vm.map(req, 0), Err(err));
        let mut ops = ops_buf();
        let mut bind = vm.bind(&mut ops).unwrap();
        assert_eq!(bind.map(req), Err(err));
        assert!(bind.is_empty());
        drop(bind);
        assert_eq!(snapshot(&vm), before);
    }
    for (addr, range, err) in [
        (base, 0, Error::ZeroRange),
        (u64::MAX, 1 + P, Error::Overflow),
        (0, P, Error::OutOfVm),
        (base + 0xf8 * P, P, Error::KernelReserved),
        (base, 0x10, Error::Misaligned),
    ] {
        let mut r = Recorder::default();
        assert_eq!(vm.sm_unmap(&mut r, addr, range), Err(err));
        assert_eq!(vm.unmap(addr, range), Err(err));
        let mut ops = ops_buf();
        let mut bind = vm.bind(&mut ops).unwrap();
        assert_eq!(bind.unmap(addr, range), Err(err));
        drop(bind);
        assert_eq!(snapshot(&vm), before);
    }
    assert_eq!(Error::Overflow.to_errno(), -75);
    assert_eq!(Error::OutOfVm.to_errno(), -22);
}

#[test]
fn invalid_configs_are_rejected() {
    let new = |cfg| Gpuvm::<Bo, u32, _, _>::new(cfg, [VaSlot::new()], [BoSlot::new()]).err();
    assert_eq!(new(VmConfig::new(0, 0)), Some(Error::InvalidConfig));
    assert_eq!(new(VmConfig::new(u64::MAX, 2)), Some(Error::InvalidConfig));
    assert_eq!(
        new(VmConfig::new(0, P).align(3)),
        Some(Error::InvalidConfig)
    );
    assert_eq!(
        new(VmConfig::new(P, P).reserve(0, P)),
        Some(Error::InvalidConfig)
    );
    assert_eq!(new(VmConfig::new(0, 4 * P).reserve(P, P)), None);
}

#[test]
fn exhausted_pools_refuse_before_any_op() {
    let va_slots: [VaSlot<u32>; 3] = core::array::from_fn(|_| VaSlot::new());
    let bo_slots: [BoSlot<Bo>; 1] = [BoSlot::new()];
    let mut vm = Gpuvm::new(VmConfig::new(0, 1 << 20), va_slots, bo_slots).unwrap();
    let list = |vm: &Gpuvm<Bo, u32, _, _>| -> Vec<(u64, u64)> {
        vm.iter().map(|v| (v.addr(), v.range())).collect()
    };
    let (a, b) = (bo(1), bo(2));
    vm.map(Mapping::new(0, 4 * P, &a, 0), 1).unwrap();
    // Object b would need a second VM-BO slot.
    let mut r = Recorder::default();
    assert_eq!(
        vm.sm_map(&mut r, Mapping::new(P, P, &b, 0)),
        Err(Error::NoMemory)
    );
    assert!(r.ops.is_empty());
    // Splitting in the middle needs two free VA slots; there are two.
    vm.map(Mapping::new(P, P, &a, 0), 1).unwrap();
    assert_eq!(vm.len(), 3);
    assert_eq!(vm.free_vas(), 0);
    let before = list(&vm);
    assert_eq!(
        vm.sm_map(&mut r, Mapping::new(0, P, &a, 0)),
        Err(Error::NoMemory)
    );
    assert_eq!(vm.sm_unmap(&mut r, 0, P), Err(Error::NoMemory));
    assert!(r.ops.is_empty());
    assert_eq!(list(&vm), before);
}

#[test]
fn dropped_batch_leaves_vm_exactly_as_it_was() {
    let mut vm = populated();
    let before = snapshot(&vm);
    let base = 0x10_0000;
    let (a, c) = (bo(1), bo(7));
    let mut ops = ops_buf();
    let mut bind = vm.bind(&mut ops).unwrap();
    bind.map(Mapping::new(base + 2 * P, 10 * P, &c, 0)).unwrap();
    bind.unmap(base, 3 * P).unwrap();
    bind.map(Mapping::new(base + 20 * P, P, &a, P)).unwrap();
    bind.unmap(base + 4 * P, 4 * P).unwrap(); // removes part of the VA planned first
    assert!(bind.len() >= 6);
    // The planned state is visible to later requests and to the driver.
    assert!(bind.vm().vm_bo(&c).is_some());
    let free = bind.vm().free_vas();
    drop(bind);
    assert_eq!(snapshot(&vm), before);
    assert!(vm.vm_bo(&c).is_none());
    // Every slot the batch took went back to the pool.
    assert_eq!(vm.free_vas(), free + 6);
}

#[test]
fn failed_request_in_batch_keeps_earlier_ones_and_drop_restores() {
    let mut vm = populated();
    let before = snapshot(&vm);
    let base = 0x10_0000;
    let a = bo(1);
    // Room for three op entries only.
    let mut ops = VecStore::<OpEntry>::new(3);
    let mut bind = vm.bind(&mut ops).unwrap();
    bind.map(Mapping::new(base + 2 * P, 8 * P, &a, 0)).unwrap(); // remap, remap, map
    let planned: Vec<Rec> = bind.ops().map(|o| rec(&o)).collect();
    assert_eq!(planned.len(), 3);
    assert_eq!(bind.unmap(base, 16 * P), Err(Error::NoMemory));
    assert_eq!(bind.ops().map(|o| rec(&o)).collect::<Vec<_>>(), planned);
    assert!(matches!(bind.ops().last(), Some(Op::Map(_))));
    drop(bind);
    assert_eq!(snapshot(&vm), before);
}

#[test]
fn committed_batch_equals_sequential_immediate_requests() {
    let base = 0x10_0000;
    let (a, c) = (bo(1), bo(7));
    let mut seq = populated();
    let mut want = Vec::new();
    want.extend(sm_map(&mut seq, Mapping::new(base + 2 * P, 10 * P, &c, 0)));
    want.extend(sm_unmap(&mut seq, base, 3 * P));
    want.extend(sm_map(&mut seq, Mapping::new(base + 20 * P, P, &a, P)));
    want.extend(sm_unmap(&mut seq, base + 4 * P, 4 * P));

    let mut vm = populated();
    let mut ops = ops_buf();
    let mut bind = vm.bind(&mut ops).unwrap();
    bind.map(Mapping::new(base + 2 * P, 10 * P, &c, 0)).unwrap();
    bind.unmap(base, 3 * P).unwrap();
    bind.map(Mapping::new(base + 20 * P, P, &a, P)).unwrap();
    bind.unmap(base + 4 * P, 4 * P).unwrap();
    let planned: Vec<Rec> = bind.ops().map(|o| rec(&o)).collect();
    assert_eq!(planned, want);
    let mut d = Committer {
        tags: vec![0, 0],
        ..Committer::default()
    };
    bind.commit(&mut d);
    assert_eq!(d.ops, want);
    assert_eq!(snapshot(&vm).vas, snapshot(&seq).vas);
    assert_eq!(snapshot(&vm).bos, snapshot(&seq).bos);
    assert_eq!(snapshot(&vm).extobjs, snapshot(&seq).extobjs);
}

#[test]
fn leaked_batch_makes_the_vm_refuse_changes() {
    let mut vm = populated();
    let mut ops = ops_buf();
    let mut bind = vm.bind(&mut ops).unwrap();
    bind.unmap(0x10_0000, P).unwrap();
    core::mem::forget(bind);
    assert_eq!(vm.unmap(0x10_0000, P), Err(Error::Busy));
    let mut r = Recorder::default();
    assert_eq!(
        vm.sm_map(&mut r, Mapping::sparse(0x10_0000, P)),
        Err(Error::Busy)
    );
    let mut ops = ops_buf();
    assert!(matches!(vm.bind(&mut ops), Err(Error::Busy)));
}

#[test]
fn driver_error_stops_walk_with_consistent_state() {
    let mut vm = populated();
    let base = 0x10_0000;
    let c = bo(7);
    // The request overlaps the first two VAs: remap/unmap, unmap, then map. Fail at op 1.
    vm.reserve(2, 1).unwrap();
    let mut r = Recorder {
        fail_at: Some(1),
        ..Recorder::default()
    };
    assert_eq!(
        vm.sm_map(&mut r, Mapping::new(base + 2 * P, 8 * P, &c, 0)),
        Err(Error::Busy)
    );
    assert_eq!(r.ops.len(), 1);
    // The first op was applied, nothing else; the VM-BO created for `c` is gone again.
    assert_eq!(
        vas(&vm),
        [
            (base, 2 * P, Some(1), 0),
            (base + 8 * P, 4 * P, Some(3), 0),
            (base + 16 * P, 2 * P, None, 0),
        ]
    );
    assert!(vm.vm_bo(&c).is_none());
    assert_eq!(vm.vm_bo(&bo(1)).unwrap().va_count(), 1);
}

#[test]
fn extobj_and_evicted_lists_follow_the_vm_bos() {
    let mut vm = populated();
    let ext = Bo {
        id: 3,
        size: 16 * P,
        resv: 5,
    };
    assert!(vm.is_extobj(&ext));
    assert!(!vm.is_extobj(&bo(1)));
    assert_eq!(vm.extobjs().map(|o| o.id).collect::<Vec<_>>(), [3]);
    assert_eq!(vm.evicted().map(|o| o.id).collect::<Vec<_>>(), [3]);
    assert_eq!(vm.bo_evict(&bo(42), true), Err(Error::NotFound));
    // A failing validate keeps the object on the list.
    assert_eq!(vm.validate(|_| Err::<(), _>(-5)), Err(-5));
    assert_eq!(vm.evicted().count(), 1);
    vm.validate(|_| Ok::<(), ()>(())).unwrap();
    assert_eq!(vm.evicted().count(), 0);
    vm.bo_evict(&ext, true).unwrap();
    // Unmapping the last VA of the object drops its VM-BO from every list.
    vm.unmap(0x10_0000 + 8 * P, 4 * P).unwrap();
    assert!(vm.vm_bo(&ext).is_none());
    assert_eq!(vm.extobjs().count(), 0);
    assert_eq!(vm.evicted().count(), 0);
}
