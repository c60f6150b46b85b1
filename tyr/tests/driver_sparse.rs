// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Sparse binds (`DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE`) through the ioctl layer: the range is
//! mapped onto the file's 2 MiB sparse backing, repeated every 2 MiB (page `va` onto byte
//! `va % 2M` of it), read-write and never executable, as the simulator's MMU sees it; GPU
//! writes into a sparse range land in the backing and reads of the same offset return them;
//! unmapping part of a sparse range or mapping a BO over part of it leaves the rest sparse;
//! malformed sparse ops are refused with panthor's errno and change nothing.

mod driver_common;

use driver_common::*;
use mali_sim::AccessType;
use tyr::backend::Lock as _;
use tyr::csf::instr;
use tyr::uapi::*;
use tyr::umd::{Job, Umd};
use tyr::vm::BoBacking;

const SZ_2M: u64 = 2 << 20;
const EINVAL: i32 = -22;
const WAIT: i64 = 600_000_000_000;
const KERNEL_START: u64 = (1 << 48) - (1 << 28);
const NOEXEC: u32 = DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC;
const SPARSE: u32 = DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE;

fn sparse_op(va: u64, size: u64, flags: u32) -> VmBindOp {
    map_op(0, 0, va, size, SPARSE | NOEXEC | flags)
}

/// Device address of the sparse backing of VM `vm` of `file`, if it has one.
fn backing_of(file: &tyr::driver::TyrFile<tyr::host::HostBackend>, vm: u32) -> Option<u64> {
    let vm = file.vm(vm).unwrap();
    let v = vm.guard();
    v.sparse_backing().map(BoBacking::dma_addr)
}

/// Every page of `[va, va + size)` (a sample under Miri) translates to the backing at
/// `backing`, at the page's offset in its 2M block, with write permission `write` and never
/// executable.
fn check_sparse(rig: &Rig, slot: usize, backing: u64, va: u64, size: u64, write: bool) {
    for p in (0..size / 4096).step_by(SWEEP) {
        let at = va + p * 4096;
        let pa = backing + at % SZ_2M;
        check_page(rig.gpu(), slot, at, Some((pa, write, false))).unwrap();
    }
}

fn check_unmapped(rig: &Rig, slot: usize, va: u64, size: u64) {
    for p in (0..size / 4096).step_by(SWEEP) {
        check_page(rig.gpu(), slot, va + p * 4096, None).unwrap();
    }
}

fn mapping_count(rig: &Rig, vm: u32) -> usize {
    let vm = rig.client.file().inner().vm(vm).unwrap();
    let n = vm.guard().mapping_count();
    n
}

#[test]
#[cfg_attr(miri, ignore)] // a 2M backing: over 1000 simulated frames to zero, minutes under Miri
fn a_sparse_bind_maps_every_page_onto_the_backing_modulo_2m() {
    let rig = rig();
    let vm = rig.vm_create();
    let slot = rig.activate(vm);
    assert_eq!(
        backing_of(rig.client.file().inner(), vm),
        None,
        "made lazily"
    );
    // From 12K below a 2M boundary to 20K past the second one after it: two partial blocks
    // at the edges, two whole blocks in the middle.
    let (va, size) = (0x4000_0000 - 0x3000, 2 * SZ_2M + 0x8000);
    assert_eq!(rig.bind(vm, &[sparse_op(va, size, 0)]), (0, 1));
    let backing = backing_of(rig.client.file().inner(), vm).unwrap();
    assert_eq!(backing % SZ_2M, 0);
    check_sparse(&rig, slot, backing, va, size, true);
    check_unmapped(&rig, slot, va - 0x2000, 0x2000);
    check_unmapped(&rig, slot, va + size, 0x2000);
    assert_eq!(mapping_count(&rig, vm), 1);
    rig.gpu().with(|g| {
        // The whole blocks are 2M blocks of the backing, the edges 4K pages.
        let t = g.walk(slot, 0x4000_0000, AccessType::Read).unwrap();
        assert_eq!((t.level, t.size), (2, SZ_2M));
        let t = g.walk(slot, 0x4000_0000 + SZ_2M, AccessType::Read).unwrap();
        assert_eq!((t.level, t.size), (2, SZ_2M));
        let t = g.walk(slot, va, AccessType::Read).unwrap();
        assert_eq!((t.level, t.size), (3, 4096));
        assert!(g.translate(slot, va, AccessType::Execute).is_err());
    });

    // A read-only sparse range elsewhere in the same VM uses the same backing, and a second
    // VM of the file too.
    assert_eq!(
        rig.bind(
            vm,
            &[sparse_op(
                0x8000_0000,
                0x4000,
                DRM_PANTHOR_VM_BIND_OP_MAP_READONLY
            )]
        ),
        (0, 1)
    );
    check_sparse(&rig, slot, backing, 0x8000_0000, 0x4000, false);
    rig.gpu().with(|g| {
        assert!(g.translate(slot, 0x8000_0000, AccessType::Write).is_err());
    });
    let other = rig.vm_create();
    let other_slot = rig.activate(other);
    assert_eq!(rig.bind(other, &[sparse_op(0x1000, 0x1000, 0)]), (0, 1));
    assert_eq!(backing_of(rig.client.file().inner(), other), Some(backing));
    check_sparse(&rig, other_slot, backing, 0x1000, 0x1000, true);

    // Uncached is allowed too; a sparse map over a sparse range replaces it.
    assert_eq!(
        rig.bind(
            vm,
            &[sparse_op(
                0x8000_0000,
                0x2000,
                DRM_PANTHOR_VM_BIND_OP_MAP_UNCACHED
            )]
        ),
        (0, 1)
    );
    check_sparse(&rig, slot, backing, 0x8000_0000, 0x2000, true);
    check_sparse(&rig, slot, backing, 0x8000_2000, 0x2000, false);

    // Unmapping everything leaves nothing; the VM stays usable.
    assert_eq!(rig.bind(vm, &[unmap_op(0, 1 << 40)]), (0, 1));
    check_unmapped(&rig, slot, va, size);
    check_unmapped(&rig, slot, 0x8000_0000, 0x4000);
    assert_eq!(mapping_count(&rig, vm), 0);
    assert_eq!(rig.vm_state(vm), Ok(DRM_PANTHOR_VM_STATE_USABLE));
    rig.gpu()
        .with(|g| assert!(g.bus_errors().is_empty(), "{:?}", g.bus_errors()));

    // The backing goes with the file and its VMs: every page comes back.
    let gpu = rig.gpu().clone();
    drop(rig);
    assert_eq!(gpu.memory().allocated_pages(), 0);
}

#[test]
#[cfg_attr(miri, ignore)] // a 2M backing: minutes under Miri
fn unmapping_the_middle_of_a_sparse_range_leaves_both_ends_sparse() {
    let rig = rig();
    let vm = rig.vm_create();
    let slot = rig.activate(vm);
    let (va, size) = (0x4000_0000, 4 * SZ_2M);
    assert_eq!(rig.bind(vm, &[sparse_op(va, size, 0)]), (0, 1));
    let backing = backing_of(rig.client.file().inner(), vm).unwrap();
    // A hole from inside the first block to inside the third one.
    let (hole, hole_size) = (va + SZ_2M - 0x3000, SZ_2M + 0x5000);
    assert_eq!(rig.bind(vm, &[unmap_op(hole, hole_size)]), (0, 1));
    assert_eq!(mapping_count(&rig, vm), 2);
    check_sparse(&rig, slot, backing, va, hole - va, true);
    check_unmapped(&rig, slot, hole, hole_size);
    let end = hole + hole_size;
    check_sparse(&rig, slot, backing, end, va + size - end, true);
    // One page out of a 2M block: the rest of the block stays sparse (4K pages now).
    let last = va + 3 * SZ_2M;
    assert_eq!(rig.bind(vm, &[unmap_op(last + 0x10_0000, 0x1000)]), (0, 1));
    assert_eq!(mapping_count(&rig, vm), 3);
    check_sparse(&rig, slot, backing, end, last + 0x10_0000 - end, true);
    check_unmapped(&rig, slot, last + 0x10_0000, 0x1000);
    check_sparse(
        &rig,
        slot,
        backing,
        last + 0x10_1000,
        0x10_0000 - 0x1000,
        true,
    );
    assert_eq!(rig.vm_state(vm), Ok(DRM_PANTHOR_VM_STATE_USABLE));
}

#[test]
#[cfg_attr(miri, ignore)] // a 2M backing: minutes under Miri
fn mapping_a_bo_over_part_of_a_sparse_range_splits_it() {
    let rig = rig();
    let bo = rig.bo_create(8 * 4096, 0).unwrap();
    let bo_pa = rig.bo_addr(bo);
    let vm = rig.vm_create();
    let slot = rig.activate(vm);
    let (va, size) = (0x4000_0000, 2 * SZ_2M);
    assert_eq!(rig.bind(vm, &[sparse_op(va, size, 0)]), (0, 1));
    let backing = backing_of(rig.client.file().inner(), vm).unwrap();
    // The BO across the boundary between the two blocks, executable.
    let at = va + SZ_2M - 0x4000;
    assert_eq!(rig.bind(vm, &[map_op(bo, 0, at, 8 * 4096, 0)]), (0, 1));
    assert_eq!(mapping_count(&rig, vm), 3);
    check_sparse(&rig, slot, backing, va, at - va, true);
    for p in 0..8 {
        let page = at + p * 4096;
        check_page(rig.gpu(), slot, page, Some((bo_pa + p * 4096, true, true))).unwrap();
    }
    check_sparse(
        &rig,
        slot,
        backing,
        at + 0x8000,
        va + size - at - 0x8000,
        true,
    );
    // At the start of the range, in the same call as a sparse map after it: both split it.
    let ops = [
        map_op(bo, 0x1000, va, 0x2000, NOEXEC),
        sparse_op(at, 0x2000, DRM_PANTHOR_VM_BIND_OP_MAP_READONLY),
    ];
    assert_eq!(rig.bind(vm, &ops), (0, 2));
    check_page(rig.gpu(), slot, va, Some((bo_pa + 0x1000, true, false))).unwrap();
    check_page(
        rig.gpu(),
        slot,
        va + 0x1000,
        Some((bo_pa + 0x2000, true, false)),
    )
    .unwrap();
    check_sparse(&rig, slot, backing, va + 0x2000, at - va - 0x2000, true);
    check_sparse(&rig, slot, backing, at, 0x2000, false);
    check_page(
        rig.gpu(),
        slot,
        at + 0x2000,
        Some((bo_pa + 0x2000, true, true)),
    )
    .unwrap();
    assert_eq!(mapping_count(&rig, vm), 5);
    rig.gpu()
        .with(|g| assert!(g.bus_errors().is_empty(), "{:?}", g.bus_errors()));
}

#[test]
#[cfg_attr(miri, ignore)] // a 2M backing: minutes under Miri
fn malformed_sparse_binds_are_refused_and_change_nothing() {
    let rig = rig();
    let bo = rig.bo_create(4096, 0).unwrap();
    let vm = rig.vm_create();
    let slot = rig.activate(vm);
    let good = sparse_op(0x20_0000, 0x1000, 0);
    let mut with_bo = good;
    with_bo.bo_handle = bo;
    let mut with_offset = good;
    with_offset.bo_offset = 0x1000;
    let mut executable = good;
    executable.flags &= !NOEXEC;
    let mut unknown = good;
    unknown.flags |= 1 << 4;
    let bad = [
        with_bo,
        with_offset,
        executable,
        unknown,
        sparse_op(0x20_0800, 0x1000, 0),
        sparse_op(0x20_0000, 0x1800, 0),
        sparse_op(KERNEL_START - 0x1000, 0x2000, 0),
        sparse_op(KERNEL_START, 0x1000, 0),
        sparse_op(1 << 48, 0x1000, 0),
        sparse_op(u64::MAX - 0xfff, 0x2000, 0),
    ];
    let pages = rig.gpu().memory().allocated_pages();
    for op in bad {
        assert_eq!(rig.bind(vm, &[op]), (EINVAL, 0), "{op:x?}");
        assert_eq!(rig.bind(vm, &[good, op]), (EINVAL, 1), "{op:x?}");
        // Asynchronously the same errno, and nothing queued.
        let mut a = rig.bind_raw(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[good, op]);
        a.1 = 0;
        assert_eq!(a, (EINVAL, 0), "{op:x?}");
        assert_eq!(rig.gpu().memory().allocated_pages(), pages, "{op:x?}");
        assert_eq!(backing_of(rig.client.file().inner(), vm), None);
        assert_eq!(mapping_count(&rig, vm), 0);
        check_unmapped(&rig, slot, 0x20_0000, 0x2000);
    }
    // A synchronous sparse op takes no syncs, as any other.
    let mut with_syncs = good;
    with_syncs.syncs.count = 1;
    assert_eq!(rig.bind(vm, &[good, with_syncs]), (EINVAL, 1));
    assert_eq!(rig.gpu().memory().allocated_pages(), pages);
    assert_eq!(rig.vm_state(vm), Ok(DRM_PANTHOR_VM_STATE_USABLE));
    // The good one alone works.
    assert_eq!(rig.bind(vm, &[good]), (0, 1));
    let backing = backing_of(rig.client.file().inner(), vm).unwrap();
    check_sparse(&rig, slot, backing, 0x20_0000, 0x1000, true);
}

#[test]
#[cfg_attr(miri, ignore)] // a 2M backing and GPU jobs: minutes under Miri
fn asynchronous_sparse_binds_and_gpu_writes_land_in_the_backing() {
    let rig = rig();
    let umd = Umd::open(rig.dev()).unwrap();
    let vm = umd.vm_create().unwrap();
    let code = umd.bo_create(0x1000).unwrap();
    let out = umd.bo_create(0x1000).unwrap();
    umd.map(vm, &code, 0x100_0000).unwrap();
    umd.map(vm, &out, 0x200_0000).unwrap();
    // Three 2M blocks of sparse range, bound asynchronously.
    let sparse = 0x4000_0000;
    let bound = umd.syncobj_create(false).unwrap();
    let mut op = sparse_op(sparse, 3 * SZ_2M, 0);
    op.syncs = umd.sync_ops(&[], &[bound]).unwrap();
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op]).unwrap();
    // A job writes 0xabcd at 0x1230 in the first block, reads the same offset in the third
    // block (the same byte of the backing) and copies what it read into `out`.
    let prog = [
        instr::move48(0, sparse + 0x1230),
        instr::move32(2, 0xabcd),
        instr::store_multiple(2, 0, 0, 1),
        instr::move48(4, sparse + 2 * SZ_2M + 0x1230),
        instr::load_multiple(6, 4, 0, 1),
        instr::wait(1),
        instr::move48(8, 0x200_0000),
        instr::store_multiple(6, 8, 0, 1),
    ];
    umd.write_stream(&code, 0, &prog).unwrap();
    let g = umd.group_create(vm, &[0x1000]).unwrap();
    let ran = umd.syncobj_create(false).unwrap();
    let len = (prog.len() * 8) as u32;
    umd.submit(g, &[Job::new(0, 0x100_0000, len).wait(bound).signal(ran)])
        .unwrap();
    umd.wait(&[ran], WAIT).unwrap();
    assert_eq!(
        out.read_u32(0).unwrap(),
        0xabcd,
        "read back through the range"
    );
    assert_eq!(umd.group_state(g).unwrap(), (0, 0));
    assert_eq!(umd.vm_state(vm).unwrap(), DRM_PANTHOR_VM_STATE_USABLE);

    // The write is in the backing, at the offset in the block.
    let file = umd.client().file().inner();
    let vmr = file.vm(vm).unwrap();
    let (backing, value) = {
        let v = vmr.guard();
        let b = v.sparse_backing().unwrap();
        let mut buf = [0; 4];
        b.0.cpu_read(0x1230, &mut buf).unwrap();
        (b.dma_addr(), u32::from_le_bytes(buf))
    };
    assert_eq!(value, 0xabcd);
    let slot = tyr::driver::vm_slot(rig.dev(), umd.client().file(), vm)
        .unwrap()
        .expect("the group's VM has an address space");
    check_sparse(&rig, slot, backing, sparse, 3 * SZ_2M, true);

    // An asynchronous unmap of the middle block, then of the rest.
    let cut = umd.syncobj_create(false).unwrap();
    let mut op = unmap_op(sparse + SZ_2M, SZ_2M);
    op.syncs = umd.sync_ops(&[ran], &[cut]).unwrap();
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op]).unwrap();
    umd.wait(&[cut], WAIT).unwrap();
    check_sparse(&rig, slot, backing, sparse, SZ_2M, true);
    check_unmapped(&rig, slot, sparse + SZ_2M, SZ_2M);
    check_sparse(&rig, slot, backing, sparse + 2 * SZ_2M, SZ_2M, true);
    assert!(!vmr.guard().has_reserved_binds());
}

#[test]
#[cfg_attr(miri, ignore)] // a 2M backing: minutes under Miri
fn no_memory_for_the_backing_fails_the_bind_and_changes_nothing() {
    let rig = rig();
    let bo = rig.bo_create(4096, 0).unwrap();
    let vm = rig.vm_create();
    let slot = rig.activate(vm);
    let mem = rig.gpu().memory();
    // Room for page tables, not for 2 MiB.
    let pages = mem.allocated_pages();
    mem.set_page_limit(Some(pages + 64));
    let ops = [
        map_op(bo, 0, 0x10_0000, 0x1000, 0),
        sparse_op(0x20_0000, 0x1000, 0),
    ];
    assert_eq!(rig.bind(vm, &ops), (-12, 1));
    let mut a = rig.bind_raw(vm, DRM_PANTHOR_VM_BIND_ASYNC, &ops);
    a.1 = 0;
    assert_eq!(a, (-12, 0));
    assert_eq!(mem.allocated_pages(), pages);
    assert_eq!(backing_of(rig.client.file().inner(), vm), None);
    assert_eq!(mapping_count(&rig, vm), 0);
    check_unmapped(&rig, slot, 0x10_0000, 0x1000);
    check_unmapped(&rig, slot, 0x20_0000, 0x1000);
    mem.set_page_limit(None);
    assert_eq!(rig.bind(vm, &ops), (0, 2));
    let backing = backing_of(rig.client.file().inner(), vm).unwrap();
    check_sparse(&rig, slot, backing, 0x20_0000, 0x1000, true);
    assert_eq!(rig.vm_state(vm), Ok(DRM_PANTHOR_VM_STATE_USABLE));
}
