// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The memory path through the ioctl layer only: DEV_QUERY, BO_CREATE, BO_MMAP_OFFSET,
//! VM_CREATE, VM_BIND (map, unmap, split), VM_GET_STATE, VM_DESTROY; after every bind the
//! simulator's MMU translates each page to the right BO page with the right permissions, and
//! unbound pages fault.

mod driver_common;

use std::collections::BTreeMap;

use driver_common::*;
use drm_ctx::drm::OpenOptions;
use drm_ctx::host::Client;
use mali_sim::{regs, AccessType};
use tyr::uapi::*;

const SZ_2M: u64 = 2 << 20;

#[test]
fn dev_query_reports_the_gpu() {
    let rig = rig();
    let mem = rig.client.mem();
    for (ty, size) in [
        (DRM_PANTHOR_DEV_QUERY_GPU_INFO, 112),
        (DRM_PANTHOR_DEV_QUERY_CSIF_INFO, 24),
        (DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO, 56),
        (DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO, 4),
    ] {
        let mut q = DevQuery {
            type_: ty,
            size: 0,
            pointer: 0,
        };
        assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), 0);
        assert_eq!(q.size, size);
    }

    let ptr = mem.alloc(112).unwrap();
    let mut q = DevQuery {
        type_: DRM_PANTHOR_DEV_QUERY_GPU_INFO,
        size: 112,
        pointer: ptr,
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), 0);
    let info: GpuInfo = drm_ctx::drm::ioctl::from_bytes(&mem.read_vec(ptr, 112).unwrap()).unwrap();
    assert_eq!(info.gpu_id, 0xa867_0005);
    assert_eq!(info.csf_id, 0x40a0_0101);
    assert_eq!(info.l2_features, 0x0712_0306);
    assert_eq!(info.tiler_features, 0x809);
    assert_eq!(info.mem_features, 0x301);
    assert_eq!(info.mmu_features, 0x2830);
    assert_eq!(info.max_threads, 0x800);
    assert_eq!(info.texture_features, [0xc1ff_ff9e, 0, 0, 0]);
    assert_eq!(info.as_present, 0xff);
    assert_eq!(info.shader_present, 0x5_0005);
    assert_eq!((info.l2_present, info.tiler_present), (1, 1));
    assert_eq!(info.core_features, 2);

    // A newer userspace with a bigger structure gets the tail zeroed.
    let big = mem.alloc_bytes(&[0xaa; 128]).unwrap();
    q.pointer = big;
    q.size = 128;
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), 0);
    let bytes = mem.read_vec(big, 128).unwrap();
    assert_eq!(&bytes[..4], &0xa867_0005u32.to_ne_bytes());
    assert!(bytes[112..].iter().all(|&b| b == 0));

    // Timestamps: flags 0 asks for the first version's fields.
    let mut ts = TimestampInfo::default();
    let tp = mem.alloc_bytes(drm_ctx::drm::ioctl::as_bytes(&ts)).unwrap();
    let mut q = DevQuery {
        type_: DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO,
        size: 56,
        pointer: tp,
    };
    rig.gpu().advance(1_000_000);
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), 0);
    ts = drm_ctx::drm::ioctl::from_bytes(&mem.read_vec(tp, 56).unwrap()).unwrap();
    assert_eq!(ts.timestamp_frequency, 24_000_000);
    assert!(ts.current_timestamp > 0);
    assert_eq!(ts.cycle_count, 0, "not asked for");
    assert_eq!(
        ts.flags,
        DRM_PANTHOR_TIMESTAMP_GPU | DRM_PANTHOR_TIMESTAMP_GPU_OFFSET | DRM_PANTHOR_TIMESTAMP_FREQ
    );

    let pp = mem.alloc(4).unwrap();
    let mut q = DevQuery {
        type_: DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO,
        size: 4,
        pointer: pp,
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), 0);
    assert_eq!(mem.read_vec(pp, 4).unwrap(), [0b0011, 0, 0, 0]);
    // HIGH and REALTIME are for the DRM master (panthor: or CAP_SYS_NICE, which the host DRM
    // core does not record).
    let admin = Client::open(
        rig.dev(),
        OpenOptions {
            node: drm_ctx::drm::Node::Primary,
            authenticated: true,
            master: true,
            sys_admin: false,
        },
    )
    .unwrap();
    let pp = admin.mem().alloc(4).unwrap();
    q.pointer = pp;
    assert_eq!(
        errno(admin.ioctl_arg(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q)),
        0
    );
    assert_eq!(admin.mem().read_vec(pp, 4).unwrap(), [0b1111, 0, 0, 0]);

    let cp = mem.alloc(24).unwrap();
    let mut q = DevQuery {
        type_: DRM_PANTHOR_DEV_QUERY_CSIF_INFO,
        size: 24,
        pointer: cp,
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), 0);
    let csif: CsifInfo = drm_ctx::drm::ioctl::from_bytes(&mem.read_vec(cp, 24).unwrap()).unwrap();
    assert_eq!(
        csif,
        CsifInfo {
            csg_slot_count: 8,
            cs_slot_count: 8,
            cs_reg_count: 96,
            scoreboard_slot_count: 8,
            unpreserved_cs_reg_count: 4,
            pad: 0,
        }
    );
}

#[test]
#[cfg_attr(miri, ignore)] // 2M-aligned BOs: over 1000 simulated frames to zero, minutes under Miri
fn bo_create_and_mmap_offset() {
    let rig = rig();
    let mut a = BoCreate {
        size: 5000,
        ..Default::default()
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_CREATE, &mut a), 0);
    assert_eq!((a.handle, a.size), (1, 8192));
    let mut o = BoMmapOffset {
        handle: 1,
        ..Default::default()
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut o), 0);
    assert!(o.offset >= 1 << 32 && o.offset.is_multiple_of(4096));
    let mapped = rig.client.mmap(o.offset, 8192).unwrap();
    assert_eq!(mapped.size(), 8192);
    // The same offset again.
    let first = o.offset;
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut o), 0);
    assert_eq!(o.offset, first);
    // Big objects are 2M aligned so that binds can use blocks.
    let big = rig.bo_create(4 * SZ_2M, 0).unwrap();
    assert_eq!(rig.bo_addr(big) % SZ_2M, 0);
    // NO_MMAP objects refuse an offset.
    let hidden = rig.bo_create(4096, DRM_PANTHOR_BO_NO_MMAP).unwrap();
    let mut o = BoMmapOffset {
        handle: hidden,
        ..Default::default()
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut o), -1);
}

/// Expected translation of every page, keyed by page address.
type Model = BTreeMap<u64, (u64, bool, bool)>;

fn model_map(m: &mut Model, va: u64, pa: u64, size: u64, write: bool, exec: bool) {
    for p in (0..size).step_by(4096) {
        m.insert(va + p, (pa + p, write, exec));
    }
}

fn model_unmap(m: &mut Model, va: u64, size: u64) {
    for p in (0..size).step_by(4096) {
        m.remove(&(va + p));
    }
}

fn check_window(rig: &Rig, slot: usize, m: &Model, start: u64, pages: u64) {
    for i in (0..pages).step_by(SWEEP) {
        let va = start + i * 4096;
        if let Err(e) = check_page(rig.gpu(), slot, va, m.get(&va).copied()) {
            panic!("{e}");
        }
    }
}

#[test]
#[cfg_attr(miri, ignore)] // 2M-aligned BOs: over 1000 simulated frames to zero, minutes under Miri
fn vm_create_bind_unbind_get_state_destroy() {
    let rig = rig();
    let small = rig.bo_create(4 * 4096, 0).unwrap();
    let big = rig.bo_create(2 * SZ_2M, 0).unwrap();
    let (small_pa, big_pa) = (rig.bo_addr(small), rig.bo_addr(big));

    let mut c = VmCreate::default();
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_VM_CREATE, &mut c), 0);
    assert_eq!(c.id, 1);
    assert_eq!(c.user_va_range, (1 << 48) - (1 << 28));
    let vm = c.id;
    assert_eq!(rig.vm_state(vm), Ok(DRM_PANTHOR_VM_STATE_USABLE));
    let slot = rig.activate(vm);
    assert_eq!(slot, 1, "address space 0 is the MCU's");
    let mut m = Model::new();

    // Map the small BO read-write and executable, the big one read-only, non-executable, at
    // a 2M-aligned address (2M blocks), in one call.
    let ops = [
        map_op(small, 0, 0x10_0000, 4 * 4096, 0),
        map_op(
            big,
            0,
            0x4000_0000,
            2 * SZ_2M,
            DRM_PANTHOR_VM_BIND_OP_MAP_READONLY | DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC,
        ),
    ];
    assert_eq!(rig.bind(vm, &ops), (0, 2));
    model_map(&mut m, 0x10_0000, small_pa, 4 * 4096, true, true);
    model_map(&mut m, 0x4000_0000, big_pa, 2 * SZ_2M, false, false);
    check_window(&rig, slot, &m, 0x10_0000 - 0x2000, 8);
    check_window(&rig, slot, &m, 0x4000_0000 - 0x1000, 2 * 512 + 2);
    rig.gpu().with(|g| {
        let t = g.walk(slot, 0x4000_0000, AccessType::Read).unwrap();
        assert_eq!((t.level, t.size), (2, SZ_2M), "a 2M block");
        let t = g.walk(slot, 0x10_1000, AccessType::Read).unwrap();
        assert_eq!((t.level, t.size), (3, 4096));
        // Writing the read-only mapping faults.
        assert!(g.translate(slot, 0x4000_0000, AccessType::Write).is_err());
    });

    // Map the small BO's last two pages a second time, elsewhere, with an offset.
    assert_eq!(
        rig.bind(
            vm,
            &[map_op(
                small,
                0x2000,
                0x20_0000,
                0x2000,
                DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC
            )]
        ),
        (0, 1)
    );
    model_map(&mut m, 0x20_0000, small_pa + 0x2000, 0x2000, true, false);
    check_window(&rig, slot, &m, 0x20_0000 - 0x1000, 4);

    // Unbind the middle of the small mapping (a remap with two remnants).
    assert_eq!(rig.bind(vm, &[unmap_op(0x10_1000, 0x2000)]), (0, 1));
    model_unmap(&mut m, 0x10_1000, 0x2000);
    check_window(&rig, slot, &m, 0x10_0000 - 0x2000, 8);

    // Unbind one page inside a 2M block: the rest of the block stays mapped (4K pages now).
    assert_eq!(rig.bind(vm, &[unmap_op(0x4000_3000, 0x1000)]), (0, 1));
    model_unmap(&mut m, 0x4000_3000, 0x1000);
    check_window(&rig, slot, &m, 0x4000_0000 - 0x1000, 2 * 512 + 2);

    // Map over an existing range: replaces it.
    assert_eq!(
        rig.bind(vm, &[map_op(small, 0, 0x4000_2000, 0x4000, 0)]),
        (0, 1)
    );
    model_unmap(&mut m, 0x4000_2000, 0x4000);
    model_map(&mut m, 0x4000_2000, small_pa, 0x4000, true, true);
    check_window(&rig, slot, &m, 0x4000_0000, 16);

    // Unmap everything.
    assert_eq!(rig.bind(vm, &[unmap_op(0, 1 << 40)]), (0, 1));
    m.clear();
    check_window(&rig, slot, &m, 0x10_0000, 8);
    check_window(&rig, slot, &m, 0x4000_0000, 2 * 512);
    assert_eq!(rig.vm_state(vm), Ok(DRM_PANTHOR_VM_STATE_USABLE));

    // Destroying the VM gives its address space up.
    let mut d = VmDestroy { id: vm, pad: 0 };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d), 0);
    assert_eq!(rig.vm_state(vm), Err(-22));
    assert_eq!(
        rig.gpu().read32(regs::as_reg(slot, regs::AS_TRANSCFG_LO)) & 0xf,
        1,
        "address space unmapped"
    );
    rig.gpu()
        .with(|g| assert!(g.bus_errors().is_empty(), "{:?}", g.bus_errors()));
}

#[test]
fn binds_before_activation_are_seen_after_it_and_slots_are_lru() {
    let rig = rig();
    let bo = rig.bo_create(4096, 0).unwrap();
    let pa = rig.bo_addr(bo);
    let vms: Vec<u32> = (0..8).map(|_| rig.vm_create()).collect();
    for (i, &vm) in vms.iter().enumerate() {
        assert_eq!(
            rig.bind(vm, &[map_op(bo, 0, 0x1000 * (i as u64 + 1), 0x1000, 0)]),
            (0, 1)
        );
    }
    // Seven address spaces (1 to 7) for eight VMs: the eighth takes the least recently used.
    for (i, &vm) in vms[..7].iter().enumerate() {
        assert_eq!(rig.activate(vm), i + 1);
    }
    assert_eq!(rig.activate(vms[0]), 1); // vms[1] is now the least recently used
    let slot = rig.activate(vms[7]);
    assert_eq!(slot, 2);
    assert_eq!(
        tyr::driver::vm_slot(rig.dev(), rig.client.file(), vms[1]),
        Ok(None)
    );
    check_page(rig.gpu(), slot, 0x8000, Some((pa, true, true))).unwrap();
    check_page(rig.gpu(), slot, 0x2000, None).unwrap();
    // The evicted VM comes back in another slot with its mappings.
    let slot = rig.activate(vms[1]);
    assert_eq!(slot, 3, "vms[2] was the least recently used");
    check_page(rig.gpu(), slot, 0x2000, Some((pa, true, true))).unwrap();
    // The MCU's address space was never touched.
    check_page(
        rig.gpu(),
        0,
        tyr::fw::MCU_SHARED_REGION_START,
        Some((rig.dev().fw_objects[0].dma_addr(), true, false)),
    )
    .unwrap();
}

#[test]
fn closing_the_file_releases_vms_and_slots() {
    let rig = rig();
    let client = Client::open(rig.dev(), OpenOptions::render()).unwrap();
    let mut c = VmCreate::default();
    assert_eq!(
        errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_VM_CREATE, &mut c)),
        0
    );
    let slot = tyr::driver::vm_activate(rig.dev(), client.file(), c.id).unwrap();
    let pages_before = rig.gpu().memory().allocated_pages();
    drop(client);
    assert_eq!(
        rig.gpu().read32(regs::as_reg(slot, regs::AS_TRANSCFG_LO)) & 0xf,
        1
    );
    assert!(
        rig.gpu().memory().allocated_pages() < pages_before,
        "page tables freed"
    );
}

#[test]
fn clients_bind_concurrently() {
    let rig = rig();
    let rounds = if cfg!(miri) { 2 } else { 20 };
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let dev = rig.dev();
            let gpu = rig.gpu().clone();
            s.spawn(move || {
                let client = Client::open(dev, OpenOptions::render()).unwrap();
                let mut c = BoCreate {
                    size: 8 * 4096,
                    ..Default::default()
                };
                assert_eq!(
                    errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_BO_CREATE, &mut c)),
                    0
                );
                let mut o = BoMmapOffset {
                    handle: c.handle,
                    ..Default::default()
                };
                assert_eq!(
                    errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut o)),
                    0
                );
                let pa = client.mmap(o.offset, 4096).unwrap().dma_addr();
                let mut v = VmCreate::default();
                assert_eq!(
                    errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_VM_CREATE, &mut v)),
                    0
                );
                let slot = tyr::driver::vm_activate(dev, client.file(), v.id).unwrap();
                let va = 0x100_0000 * (t + 1);
                for r in 0..rounds {
                    let op = map_op(c.handle, (r % 8) * 4096, va, 4096, 0);
                    let arr = client
                        .mem()
                        .alloc_bytes(drm_ctx::drm::ioctl::as_bytes(&op))
                        .unwrap();
                    let mut b = VmBind {
                        vm_id: v.id,
                        flags: 0,
                        ops: ObjArray {
                            stride: 48,
                            count: 1,
                            array: arr,
                        },
                    };
                    assert_eq!(
                        errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_VM_BIND, &mut b)),
                        0
                    );
                    check_page(&gpu, slot, va, Some((pa + (r % 8) * 4096, true, true))).unwrap();
                }
            });
        }
    });
    rig.gpu()
        .with(|g| assert!(g.bus_errors().is_empty(), "{:?}", g.bus_errors()));
}
