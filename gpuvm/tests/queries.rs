// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Read-side queries: lookups, range iteration, driver data, VM-BO views.

mod common;

use common::*;
use gpuvm::Mapping;

#[test]
fn lookups_and_range_iteration() {
    let mut vm = vm();
    let (a, b) = (bo(1), bo(2));
    vm.map(Mapping::new(0, 2 * P, &a, 0), 10).unwrap();
    vm.map(Mapping::new(4 * P, P, &b, P), 20).unwrap();
    vm.map(Mapping::sparse(6 * P, 2 * P).with_flags(3), 30)
        .unwrap();

    assert_eq!(vm.find(0, 2 * P).map(|v| *v.data().unwrap()), Some(10));
    assert!(vm.find(0, P).is_none());
    assert!(vm.find(P, P).is_none());
    assert_eq!(vm.find_containing(P).map(|v| v.addr()), Some(0));
    assert!(vm.find_containing(3 * P).is_none());
    assert_eq!(vm.find_containing(7 * P).map(|v| v.flags()), Some(3));
    assert!(vm.find_containing(7 * P).unwrap().is_sparse());

    let starts =
        |addr, range| -> Vec<u64> { vm.iter_range(addr, range).map(|v| v.addr()).collect() };
    assert_eq!(starts(P, 4 * P), [0, 4 * P]);
    assert_eq!(starts(2 * P, 2 * P), [] as [u64; 0]);
    assert_eq!(starts(2 * P, 2 * P + 1), [4 * P]);
    assert_eq!(starts(0, 0), [] as [u64; 0]);
    assert_eq!(starts(0, u64::MAX), [0, 4 * P, 6 * P]);

    *vm.data_mut(4 * P).unwrap() = 21;
    assert_eq!(vm.find(4 * P, P).and_then(|v| v.data().copied()), Some(21));
    assert!(vm.data_mut(5 * P).is_none());

    let ids: Vec<u64> = vm.vm_bos().map(|b| b.obj().id).collect();
    assert_eq!(ids, [1, 2]);
    let bo_b = vm.vm_bo(&b).unwrap();
    assert_eq!(bo_b.va_count(), 1);
    assert!(!bo_b.is_extobj() && !bo_b.is_evicted());
    assert_eq!(bo_b.vas().map(|v| v.offset()).collect::<Vec<_>>(), [P]);
    assert_eq!(vm.va_range(), 0..1 << 30);
    assert!(vm.reserved_range().is_empty());
}

#[test]
fn vm_bo_lists_vas_in_creation_order() {
    let mut vm = vm();
    let a = bo(1);
    vm.map(Mapping::new(4 * P, P, &a, 0), 0).unwrap();
    vm.map(Mapping::new(0, P, &a, P), 0).unwrap();
    vm.map(Mapping::new(8 * P, P, &a, 2 * P), 0).unwrap();
    let order: Vec<u64> = vm.vm_bo(&a).unwrap().vas().map(|v| v.addr()).collect();
    assert_eq!(order, [4 * P, 0, 8 * P]);
}
