// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Bad input through the ioctl layer gets panthor's errno and changes nothing: the VM's
//! translations (checked page by page in the simulator's MMU), its state and the memory in use
//! are the same before and after.

mod driver_common;

use driver_common::*;
use drm_ctx::drm::ioctl;
use mali_sim::Config;
use tyr::backend::Lock as _;
use tyr::uapi::*;

const EINVAL: i32 = -22;
const ENOENT: i32 = -2;
const EPERM: i32 = -1;
const ENODEV: i32 = -19;
const ENOMEM: i32 = -12;
const EBUSY: i32 = -16;
const ETIMEDOUT: i32 = -110;
const E2BIG: i32 = -7;
const KERNEL_START: u64 = (1 << 48) - (1 << 28);

/// A VM with one mapping, active in an address space, and a snapshot to compare with.
struct Fixture {
    rig: Rig,
    vm: u32,
    bo: u32,
    bo_pa: u64,
    slot: usize,
}

impl Fixture {
    fn new(cfg: Config) -> Self {
        let rig = rig_with(cfg);
        let bo = rig.bo_create(8 * 4096, 0).unwrap();
        let bo_pa = rig.bo_addr(bo);
        let vm = rig.vm_create();
        let slot = rig.activate(vm);
        assert_eq!(
            rig.bind(vm, &[map_op(bo, 0, 0x10_0000, 4 * 4096, 0)]),
            (0, 1)
        );
        let f = Fixture {
            rig,
            vm,
            bo,
            bo_pa,
            slot,
        };
        f.check_unchanged();
        f
    }

    /// The one mapping is there, nothing else is, and no page-table memory leaked.
    fn check_unchanged(&self) {
        for i in 0..16u64 {
            let va = 0x10_0000 - 0x4000 + i * 4096;
            let expect = (4..8)
                .contains(&i)
                .then(|| (self.bo_pa + (i - 4) * 4096, true, true));
            check_page(self.rig.gpu(), self.slot, va, expect).unwrap();
        }
        for va in [0x20_0000, 0x4000_0000, KERNEL_START, KERNEL_START - 4096] {
            check_page(self.rig.gpu(), self.slot, va, None).unwrap();
        }
        assert_eq!(self.rig.vm_state(self.vm), Ok(DRM_PANTHOR_VM_STATE_USABLE));
        let vm = self.rig.client.file().inner().vm(self.vm).unwrap();
        assert_eq!(vm.guard().mapping_count(), 1);
    }

    /// `ops` fail with `errno` at op `index`, and change nothing.
    fn refused(&self, ops: &[VmBindOp], errno: i32, index: u32) {
        let pages = self.rig.gpu().memory().allocated_pages();
        assert_eq!(self.rig.bind(self.vm, ops), (errno, index), "{ops:x?}");
        assert_eq!(
            self.rig.gpu().memory().allocated_pages(),
            pages,
            "memory leaked"
        );
        self.check_unchanged();
    }
}

fn ok_op() -> VmBindOp {
    // A valid op that must not be applied when a later one fails.
    unmap_op(0x10_0000, 0x1000)
}

#[test]
fn unaligned_binds() {
    let f = Fixture::new(Config::g610());
    for op in [
        map_op(f.bo, 0, 0x20_0800, 0x1000, 0),
        map_op(f.bo, 0, 0x20_0000, 0x1800, 0),
        map_op(f.bo, 0x10, 0x20_0000, 0x1000, 0),
        unmap_op(0x10_0800, 0x1000),
        unmap_op(0x10_0000, 0x800),
    ] {
        f.refused(&[op], EINVAL, 0);
        f.refused(&[ok_op(), op], EINVAL, 1);
    }
}

#[test]
#[cfg_attr(miri, ignore)] // same paths as `unaligned_binds`; slow under Miri
fn out_of_range_and_kernel_region_binds() {
    let f = Fixture::new(Config::g610());
    for op in [
        map_op(f.bo, 0, KERNEL_START, 0x1000, 0),
        map_op(f.bo, 0, KERNEL_START - 0x1000, 0x2000, 0),
        map_op(f.bo, 0, 1 << 48, 0x1000, 0),
        map_op(f.bo, 0, u64::MAX - 0xfff, 0x1000, 0),
        map_op(f.bo, 0, 0xffff_ffff_ffff_f000, 0x2000, 0),
        unmap_op(KERNEL_START, 0x1000),
        unmap_op(0, 1 << 48),
        unmap_op(0xffff_ffff_ffff_f000, 0x2000),
    ] {
        f.refused(&[op], EINVAL, 0);
        f.refused(&[ok_op(), ok_op(), op], EINVAL, 2);
    }
}

#[test]
#[cfg_attr(miri, ignore)] // same paths as `unaligned_binds`; slow under Miri
fn bo_offsets_and_sizes_past_the_end() {
    let f = Fixture::new(Config::g610());
    for op in [
        map_op(f.bo, 0, 0x20_0000, 9 * 4096, 0),
        map_op(f.bo, 8 * 4096, 0x20_0000, 0x1000, 0),
        map_op(f.bo, 4 * 4096, 0x20_0000, 5 * 4096, 0),
        map_op(f.bo, u64::MAX - 0xfff, 0x20_0000, 0x1000, 0),
    ] {
        f.refused(&[op], EINVAL, 0);
        f.refused(&[ok_op(), op], EINVAL, 1);
    }
    // The exact end is fine.
    assert_eq!(
        f.rig
            .bind(f.vm, &[map_op(f.bo, 4 * 4096, 0x20_0000, 4 * 4096, 0)]),
        (0, 1)
    );
}

#[test]
fn unknown_handles_and_ids() {
    let f = Fixture::new(Config::g610());
    f.refused(&[map_op(99, 0, 0x20_0000, 0x1000, 0)], EINVAL, 0);
    f.refused(&[ok_op(), map_op(0, 0, 0x20_0000, 0x1000, 0)], EINVAL, 1);
    assert_eq!(f.rig.bind(7, &[ok_op()]), (EINVAL, 1));
    assert_eq!(f.rig.vm_state(7), Err(EINVAL));
    let mut d = VmDestroy { id: 7, pad: 0 };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d), EINVAL);
    let mut o = BoMmapOffset {
        handle: 42,
        ..Default::default()
    };
    assert_eq!(
        f.rig.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut o),
        ENOENT
    );
    let mut c = BoCreate {
        size: 4096,
        exclusive_vm_id: 9,
        ..Default::default()
    };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_BO_CREATE, &mut c), EINVAL);
    // A BO private to another VM cannot be bound here.
    let other = f.rig.vm_create();
    let mut c = BoCreate {
        size: 4096,
        exclusive_vm_id: other,
        ..Default::default()
    };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_BO_CREATE, &mut c), 0);
    f.refused(&[map_op(c.handle, 0, 0x20_0000, 0x1000, 0)], EINVAL, 0);
    assert_eq!(
        f.rig
            .bind(other, &[map_op(c.handle, 0, 0x20_0000, 0x1000, 0)]),
        (0, 1)
    );
    f.check_unchanged();
}

#[test]
#[cfg_attr(miri, ignore)] // same paths as `unaligned_binds`; slow under Miri
fn bad_flags() {
    let f = Fixture::new(Config::g610());
    let mut sparse = map_op(
        f.bo,
        0,
        0x20_0000,
        0x1000,
        DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE,
    );
    f.refused(&[sparse], EINVAL, 0);
    sparse.flags = DRM_PANTHOR_VM_BIND_OP_TYPE_MAP | 1 << 10;
    f.refused(&[ok_op(), sparse], EINVAL, 1);
    let mut unmap = unmap_op(0x10_0000, 0x1000);
    unmap.flags |= DRM_PANTHOR_VM_BIND_OP_MAP_READONLY;
    f.refused(&[unmap], EINVAL, 0);
    let mut unmap = unmap_op(0x10_0000, 0x1000);
    unmap.bo_handle = f.bo;
    f.refused(&[unmap], EINVAL, 0);
    let mut unmap = unmap_op(0x10_0000, 0x1000);
    unmap.bo_offset = 0x1000;
    f.refused(&[unmap], EINVAL, 0);
    let mut bad_type = ok_op();
    bad_type.flags = 3 << 28;
    f.refused(&[bad_type], EINVAL, 0);
    let mut sync_only = ok_op();
    sync_only.flags = DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY;
    f.refused(&[sync_only], EINVAL, 0);
    let mut with_syncs = ok_op();
    with_syncs.syncs.count = 1;
    f.refused(&[with_syncs], EINVAL, 0);
    // Synchronous SYNC_ONLY without a size does nothing, successfully.
    let nothing = VmBindOp {
        flags: DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY,
        ..Default::default()
    };
    assert_eq!(f.rig.bind(f.vm, &[nothing]), (0, 1));
    // Unknown VM_BIND flags (asynchronous binds are tested in driver_sched.rs).
    assert_eq!(f.rig.bind_raw(f.vm, 1 << 5, &[ok_op()]).0, EINVAL);
    f.check_unchanged();

    let mut c = VmCreate {
        flags: 1,
        ..Default::default()
    };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_VM_CREATE, &mut c), EINVAL);
    let mut c = VmCreate {
        user_va_range: 1 << 48,
        ..Default::default()
    };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_VM_CREATE, &mut c), EINVAL);
    for (size, flags, pad) in [
        (4096, 1 << 2, 0),
        (4096, DRM_PANTHOR_BO_NO_MMAP | DRM_PANTHOR_BO_WB_MMAP, 0),
        (4096, 0, 1),
        (0, 0, 0),
    ] {
        let mut c = BoCreate {
            size,
            flags,
            pad,
            ..Default::default()
        };
        assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_BO_CREATE, &mut c), EINVAL);
        assert_eq!(c.handle, 0);
    }
    let mut o = BoMmapOffset {
        handle: f.bo,
        pad: 1,
        offset: 0,
    };
    assert_eq!(
        f.rig.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut o),
        EINVAL
    );
    let hidden = f.rig.bo_create(4096, DRM_PANTHOR_BO_NO_MMAP).unwrap();
    o = BoMmapOffset {
        handle: hidden,
        ..Default::default()
    };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut o), EPERM);
    let mut d = VmDestroy { id: f.vm, pad: 1 };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d), EINVAL);
    let mut q = DevQuery {
        type_: 4,
        size: 0,
        pointer: 0,
    };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), EINVAL);
    for flags in [1 << 8, 3 << 1] {
        let info = TimestampInfo {
            flags,
            ..Default::default()
        };
        let tp = f
            .rig
            .client
            .mem()
            .alloc_bytes(ioctl::as_bytes(&info))
            .unwrap();
        let mut q = DevQuery {
            type_: DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO,
            size: 56,
            pointer: tp,
        };
        assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), EINVAL);
    }
    f.check_unchanged();
}

/// The same command number with another argument size.
fn resized(cmd: u32, size: usize) -> u32 {
    ioctl::ioc(ioctl::dir(cmd), ioctl::ty(cmd), ioctl::nr(cmd), size)
}

#[test]
fn short_and_long_structs() {
    let f = Fixture::new(Config::g610());
    let c = &f.rig.client;
    // A short VM_CREATE (flags and id only) is zero-extended: the default range.
    let mut short = [0u8; 8];
    assert_eq!(
        errno(c.ioctl(resized(DRM_IOCTL_PANTHOR_VM_CREATE, 8), &mut short)),
        0
    );
    assert_eq!(u32::from_ne_bytes(short[4..8].try_into().unwrap()), 2);
    // A long one works whatever its extra bytes hold: as Linux's `drm_ioctl`, the core does not
    // look at them and copies them back unchanged.
    let mut long = [0u8; 24];
    long[20] = 1;
    assert_eq!(
        errno(c.ioctl(resized(DRM_IOCTL_PANTHOR_VM_CREATE, 24), &mut long)),
        0
    );
    assert_eq!(u32::from_ne_bytes(long[4..8].try_into().unwrap()), 3);
    assert_eq!(long[20], 1);

    // Bind ops with a stride below the minimum are refused, longer ones need zero tails.
    let op = ok_op();
    let mut bytes = ioctl::as_bytes(&op).to_vec();
    bytes.extend_from_slice(&[0; 8]);
    let arr = c.mem().alloc_bytes(&bytes).unwrap();
    let pages = f.rig.gpu().memory().allocated_pages();
    for (stride, errno_) in [(40, EINVAL), (0, EINVAL)] {
        let mut b = VmBind {
            vm_id: f.vm,
            flags: 0,
            ops: ObjArray {
                stride,
                count: 1,
                array: arr,
            },
        };
        assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_VM_BIND, &mut b), errno_);
    }
    bytes[50] = 1;
    let arr_bad = c.mem().alloc_bytes(&bytes).unwrap();
    let mut b = VmBind {
        vm_id: f.vm,
        flags: 0,
        ops: ObjArray {
            stride: 56,
            count: 1,
            array: arr_bad,
        },
    };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_VM_BIND, &mut b), E2BIG);
    // An array pointer into unmapped user memory.
    b.ops.array = 0xdead_0000;
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_VM_BIND, &mut b), -14);
    assert_eq!(f.rig.gpu().memory().allocated_pages(), pages);
    f.check_unchanged();

    // DEV_QUERY into memory the caller does not have.
    let mut q = DevQuery {
        type_: DRM_PANTHOR_DEV_QUERY_GPU_INFO,
        size: 112,
        pointer: 0xdead_0000,
    };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), -14);

    // DEV_QUERY into a buffer smaller than the minimum.
    let p = c.mem().alloc(112).unwrap();
    let mut q = DevQuery {
        type_: DRM_PANTHOR_DEV_QUERY_GPU_INFO,
        size: 95,
        pointer: p,
    };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), EINVAL);
    assert!(c.mem().read_vec(p, 112).unwrap().iter().all(|&b| b == 0));
    // The minimum (the first version of the structure) is enough.
    q.size = 96;
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), 0);
    let got = c.mem().read_vec(p, 112).unwrap();
    assert_eq!(&got[..4], &0xa867_0005u32.to_ne_bytes());
    assert!(got[96..].iter().all(|&b| b == 0));

    // With the stride of the structure extended by zeros, the op applies.
    bytes[50] = 0;
    let arr = c.mem().alloc_bytes(&bytes).unwrap();
    let mut b = VmBind {
        vm_id: f.vm,
        flags: 0,
        ops: ObjArray {
            stride: 56,
            count: 1,
            array: arr,
        },
    };
    assert_eq!(f.rig.ioctl(DRM_IOCTL_PANTHOR_VM_BIND, &mut b), 0);
    check_page(f.rig.gpu(), f.slot, 0x10_0000, None).unwrap();
}

#[test]
fn too_many_vms() {
    let rig = rig();
    for i in 1..=32 {
        assert_eq!(rig.vm_create(), i);
    }
    let mut c = VmCreate::default();
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_VM_CREATE, &mut c), EBUSY);
    let mut d = VmDestroy { id: 5, pad: 0 };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d), 0);
    assert_eq!(rig.vm_create(), 5, "the lowest free ID");
}

#[test]
fn out_of_memory_for_page_tables_changes_nothing() {
    let f = Fixture::new(Config::g610());
    let mem = f.rig.gpu().memory();
    mem.set_page_limit(Some(mem.allocated_pages() + 1));
    // A map needing three new tables (far from the existing ones) cannot get them.
    f.refused(
        &[ok_op(), map_op(f.bo, 0, 0x80_0000_0000, 0x1000, 0)],
        ENOMEM,
        1,
    );
    mem.set_page_limit(None);
    assert_eq!(
        f.rig
            .bind(f.vm, &[map_op(f.bo, 0, 0x80_0000_0000, 0x1000, 0)]),
        (0, 1)
    );
}

#[test]
// The wait polls 10^4 times (10 us for 100 ms of simulated time): minutes under Miri; the same
// code runs natively and its unit test in `mmu` covers the register sequence.
#[cfg_attr(miri, ignore)]
fn stuck_mmu_times_out_before_anything_changes() {
    let f = Fixture::new(Config::g610());
    f.rig
        .gpu()
        .with(|g| g.faults_mut().mmu_command_stuck = true);
    f.refused(&[map_op(f.bo, 0, 0x20_0000, 0x1000, 0)], ETIMEDOUT, 0);
    assert!(f
        .rig
        .dev()
        .backend
        .log_lines()
        .iter()
        .any(|l| l.starts_with("AS_ACTIVE bit stuck")));
}

#[test]
fn calls_after_unplug() {
    let f = Fixture::new(Config::g610());
    let Fixture { rig, vm, bo, .. } = f;
    let Rig {
        client,
        reg,
        parent: _parent,
    } = rig;
    drop(reg);
    let mut q = DevQuery::default();
    assert_eq!(
        errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q)),
        ENODEV
    );
    let mut c = BoCreate {
        size: 4096,
        ..Default::default()
    };
    assert_eq!(
        errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_BO_CREATE, &mut c)),
        ENODEV
    );
    let mut v = VmCreate::default();
    assert_eq!(
        errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_VM_CREATE, &mut v)),
        ENODEV
    );
    let mut s = VmGetState {
        vm_id: vm,
        state: 0,
    };
    assert_eq!(
        errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_VM_GET_STATE, &mut s)),
        ENODEV
    );
    let mut o = BoMmapOffset {
        handle: bo,
        ..Default::default()
    };
    assert_eq!(
        errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut o)),
        ENODEV
    );
    let mut b = VmBind {
        vm_id: vm,
        ..Default::default()
    };
    assert_eq!(
        errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_VM_BIND, &mut b)),
        ENODEV
    );
    // Closing the file after unplug still releases everything.
    drop(client);
}
