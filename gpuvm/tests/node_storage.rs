// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The index's node storage: sizing, growth together with the VA storage, and refusal when
//! it cannot hold the nodes the VA slots may need.

mod common;

use common::*;
use gpuvm::{BoSlot, Error, Gpuvm, IndexNode, Mapping, VaSlot, VmConfig};

fn cfg() -> VmConfig {
    VmConfig::new(0, 1 << 30).align(P)
}

#[test]
fn needed_nodes_cover_the_worst_case_and_no_more() {
    assert_eq!(IndexNode::needed(0), 0);
    assert_eq!(IndexNode::needed(1), 1);
    assert_eq!(IndexNode::needed(15), 1);
    // From 16 keys on the tree may have two leaves and a root.
    assert_eq!(IndexNode::needed(16), 4);
    assert_eq!(IndexNode::needed(700), 101);
    for n in 1..2000 {
        assert!(IndexNode::needed(n) <= IndexNode::needed(n + 1));
        assert!(IndexNode::needed(n) <= n.max(1));
    }
}

#[test]
fn a_borrowed_slice_brings_no_nodes() {
    let mut vas: Vec<VaSlot<u32>> = (0..8).map(|_| VaSlot::new()).collect();
    let mut bos = [BoSlot::<Bo>::new()];
    let r = Gpuvm::new(cfg(), vas.as_mut_slice(), bos.as_mut_slice());
    assert!(matches!(r, Err(Error::NoMemory)));
    // An empty slice needs none.
    let r = Gpuvm::new(cfg(), &mut [] as &mut [VaSlot<u32>], bos.as_mut_slice());
    assert!(r.is_ok_and(|vm| vm.free_vas() == 0));
    // With nodes of its own the slice works.
    let mut nodes = [IndexNode::new(); 1];
    let mut vm = Gpuvm::with_nodes(
        cfg(),
        vas.as_mut_slice(),
        bos.as_mut_slice(),
        nodes.as_mut_slice(),
    )
    .unwrap();
    let b = bo(1);
    for i in 0..6 {
        vm.map(Mapping::new(2 * i * P, P, &b, 0), i as u32).unwrap();
    }
    assert_eq!(vm.len(), 6);
}

#[test]
fn with_nodes_grows_short_node_storage_or_refuses() {
    let vas = || VecStore::<VaSlot<u32>>::new(usize::MAX);
    let bos = || VecStore::<BoSlot<Bo>>::new(usize::MAX);
    // A VM without VA slots needs no nodes.
    assert!(Gpuvm::with_nodes(cfg(), vas(), bos(), VecStore::<IndexNode>::new(0)).is_ok());
    let mut v = vas();
    v.v.resize_with(100, VaSlot::new);
    let need = IndexNode::needed(100);
    let r = Gpuvm::with_nodes(cfg(), v, bos(), VecStore::<IndexNode>::new(need - 1));
    assert!(matches!(r, Err(Error::NoMemory)));
    let mut v = vas();
    v.v.resize_with(100, VaSlot::new);
    let vm = Gpuvm::with_nodes(cfg(), v, bos(), VecStore::<IndexNode>::new(need)).unwrap();
    assert_eq!(vm.free_vas(), 100);
}

#[test]
fn reserve_grows_nodes_first_and_changes_nothing_when_they_cannot_grow() {
    let nodes_limit = IndexNode::needed(200);
    let mut vm = Gpuvm::with_nodes(
        cfg(),
        VecStore::<VaSlot<u32>>::new(usize::MAX),
        VecStore::<BoSlot<Bo>>::new(usize::MAX),
        VecStore::<IndexNode>::new(nodes_limit),
    )
    .unwrap();
    vm.reserve(200, 1).unwrap();
    let b = bo(1);
    for i in 0..198u64 {
        vm.map(Mapping::new(2 * i * P, P, &b, 0), i as u32).unwrap();
    }
    assert_eq!(vm.free_vas(), 2);
    // More VA slots would need more nodes than the node storage can give: refused, and the
    // VA storage did not grow.
    assert_eq!(vm.reserve(400, 1), Err(Error::NoMemory));
    assert_eq!(vm.free_vas(), 2);
    assert_eq!(vm.len(), 198);
    // The VM still works in what it has.
    vm.unmap(0, 4 * P).unwrap();
    vm.map(Mapping::new(P, P, &b, 0), 7).unwrap();
    let starts: Vec<u64> = vm.iter().take(3).map(|v| v.addr()).collect();
    assert_eq!(starts, [P, 4 * P, 6 * P]);
}
