// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The ioctls after GROUP_GET_STATE in panthor's table (BO_SET_LABEL, SET_USER_MMIO_OFFSET,
//! BO_SYNC, BO_QUERY_INFO; the tiler-heap pair only keeps the numbering), the user MMIO page
//! with `LATEST_FLUSH_ID`, the TIMESTAMP_INFO and GROUP_PRIORITIES_INFO queries and the group
//! priorities GROUP_CREATE allows. Each call is tried with valid input and with malformed input,
//! which must get panthor's errno and change nothing.

mod driver_common;

use driver_common::*;
use drm_ctx::drm::{ioctl, Node, OpenOptions};
use drm_ctx::host::Client;
use mali_sim::{regs, Config};
use tyr::driver::{self, Mapping, MmapProt};
use tyr::host::{SyncDir, SyncRecord};
use tyr::uapi::*;

const EINVAL: i32 = -22;
const ENOENT: i32 = -2;
const EFAULT: i32 = -14;
const EACCES: i32 = -13;
const ENOMEM: i32 = -12;
const ENODEV: i32 = -19;
const E2BIG: i32 = -7;

// ---------------------------------------------------------------- BO_SET_LABEL

fn label_of(rig: &Rig, handle: u32) -> Option<Vec<u8>> {
    rig.bo(handle).with_label(|l| l.map(<[u8]>::to_vec))
}

/// Issues BO_SET_LABEL with the label at `ptr` (0 for none).
fn set_label_at(rig: &Rig, handle: u32, pad: u32, ptr: u64) -> i32 {
    let mut a = BoSetLabel {
        handle,
        pad,
        label: ptr,
    };
    rig.ioctl(DRM_IOCTL_PANTHOR_BO_SET_LABEL, &mut a)
}

/// Places `text` followed by a NUL in user memory and labels the BO with it.
fn set_label(rig: &Rig, handle: u32, text: &[u8]) -> i32 {
    let mut bytes = text.to_vec();
    bytes.push(0);
    let ptr = rig.client.mem().alloc_bytes(&bytes).unwrap();
    set_label_at(rig, handle, 0, ptr)
}

#[test]
fn bo_set_label_sets_replaces_and_clears() {
    let rig = rig();
    let bo = rig.bo_create(4096, 0).unwrap();
    let other = rig.bo_create(4096, 0).unwrap();
    assert_eq!(label_of(&rig, bo), None, "a new BO has no label");

    assert_eq!(set_label(&rig, bo, b"vertex buffer"), 0);
    assert_eq!(label_of(&rig, bo).as_deref(), Some(&b"vertex buffer"[..]));
    assert_eq!(label_of(&rig, other), None, "only the named BO is labelled");

    // Replaced by a shorter one: nothing of the old label is left.
    assert_eq!(set_label(&rig, bo, b"ubo"), 0);
    assert_eq!(label_of(&rig, bo).as_deref(), Some(&b"ubo"[..]));

    // An empty string is a label, a null pointer removes it.
    assert_eq!(set_label(&rig, bo, b""), 0);
    assert_eq!(label_of(&rig, bo).as_deref(), Some(&b""[..]));
    assert_eq!(set_label_at(&rig, bo, 0, 0), 0);
    assert_eq!(label_of(&rig, bo), None);

    // The longest label: 4095 bytes and the NUL; bytes after the NUL are not read.
    let long = vec![b'x'; PANTHOR_BO_LABEL_MAXLEN - 1];
    assert_eq!(set_label(&rig, bo, &long), 0);
    assert_eq!(label_of(&rig, bo).as_deref(), Some(&long[..]));
    let ptr = rig.client.mem().alloc_bytes(b"abc\0def\0").unwrap();
    assert_eq!(set_label_at(&rig, bo, 0, ptr), 0);
    assert_eq!(label_of(&rig, bo).as_deref(), Some(&b"abc"[..]));

    // The label stays with the object: a second handle to it (through a new lookup) sees it.
    let obj = rig.bo(bo);
    assert_eq!(obj.with_label(|l| l.map(<[u8]>::len)), Some(3));
}

#[test]
fn bo_set_label_bad_input_changes_nothing() {
    let rig = rig();
    let bo = rig.bo_create(4096, 0).unwrap();
    assert_eq!(set_label(&rig, bo, b"kept"), 0);
    let kept = Some(b"kept".to_vec());
    let mem = rig.client.mem();
    let good = mem.alloc_bytes(b"new\0").unwrap();

    // Padding must be zero.
    assert_eq!(set_label_at(&rig, bo, 1, good), EINVAL);
    assert_eq!(label_of(&rig, bo), kept);
    // Unknown handles.
    for h in [0, bo + 1, u32::MAX] {
        assert_eq!(set_label_at(&rig, h, 0, good), ENOENT, "handle {h}");
    }
    assert_eq!(label_of(&rig, bo), kept);
    // No NUL within 4096 bytes: too long (panthor turns strndup_user's EINVAL into E2BIG).
    let too_long = mem
        .alloc_bytes(&vec![b'y'; PANTHOR_BO_LABEL_MAXLEN + 16])
        .unwrap();
    assert_eq!(set_label_at(&rig, bo, 0, too_long), E2BIG);
    let exactly = mem
        .alloc_bytes(&vec![b'y'; PANTHOR_BO_LABEL_MAXLEN])
        .unwrap();
    assert_eq!(set_label_at(&rig, bo, 0, exactly), E2BIG);
    assert_eq!(label_of(&rig, bo), kept);
    // Unreadable: an address nothing is mapped at, and a string running off its region.
    assert_eq!(set_label_at(&rig, bo, 0, 0x10), EFAULT);
    let unterminated = mem.alloc_bytes(b"abc").unwrap();
    assert_eq!(set_label_at(&rig, bo, 0, unterminated), EFAULT);
    assert_eq!(set_label_at(&rig, bo, 0, u64::MAX - 1), EFAULT);
    assert_eq!(label_of(&rig, bo), kept);
}

// ---------------------------------------------------------------- BO_QUERY_INFO, BO_CREATE flags

#[test]
fn bo_query_info_reports_the_creation_flags() {
    let rig = rig();
    for flags in [0, DRM_PANTHOR_BO_NO_MMAP, DRM_PANTHOR_BO_WB_MMAP] {
        let bo = rig.bo_create(4096, flags).unwrap();
        let mut q = BoQueryInfo {
            handle: bo,
            extra_flags: 0xdead,
            create_flags: 0xbeef,
            pad: 0x1234,
        };
        assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_QUERY_INFO, &mut q), 0);
        assert_eq!(
            q,
            BoQueryInfo {
                handle: bo,
                extra_flags: 0,
                create_flags: flags,
                pad: 0,
            },
            "flags {flags:#x}: not imported, creation flags back, pad zeroed"
        );
    }
    // Unknown handles: ENOENT and the argument as it was.
    for h in [0, 99, u32::MAX] {
        let before = BoQueryInfo {
            handle: h,
            extra_flags: 7,
            create_flags: 7,
            pad: 7,
        };
        let mut q = before;
        assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_QUERY_INFO, &mut q), ENOENT);
        assert_eq!(q, before);
    }
}

#[test]
fn bo_create_wb_mmap_follows_panthor() {
    let rig = rig();
    let wb = rig.bo_create(4096, DRM_PANTHOR_BO_WB_MMAP).unwrap();
    assert_eq!(rig.bo(wb).flags(), DRM_PANTHOR_BO_WB_MMAP);
    // A write-back mapping of a never-mapped BO makes no sense; unknown flags are refused.
    for flags in [
        DRM_PANTHOR_BO_WB_MMAP | DRM_PANTHOR_BO_NO_MMAP,
        1 << 2,
        DRM_PANTHOR_BO_WB_MMAP | 1 << 31,
    ] {
        let mut a = BoCreate {
            size: 4096,
            flags,
            ..Default::default()
        };
        assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_CREATE, &mut a), EINVAL);
        assert_eq!(a.handle, 0, "no handle for flags {flags:#x}");
    }
    assert_eq!(rig.client.file().handles(), vec![wb]);
}

// ---------------------------------------------------------------- BO_SYNC

fn sync_op(handle: u32, type_: u32, offset: u64, size: u64) -> BoSyncOp {
    BoSyncOp {
        handle,
        type_,
        offset,
        size,
    }
}

/// Issues BO_SYNC with `ops` laid out with `stride` bytes each (zero-filled past the struct).
fn bo_sync_strided(rig: &Rig, ops: &[BoSyncOp], stride: u32) -> i32 {
    let mut bytes = Vec::new();
    for op in ops {
        let mut one = ioctl::as_bytes(op).to_vec();
        one.resize(stride as usize, 0);
        bytes.extend_from_slice(&one);
    }
    let array = if bytes.is_empty() {
        0
    } else {
        rig.client.mem().alloc_bytes(&bytes).unwrap()
    };
    let mut a = BoSync {
        ops: ObjArray {
            stride,
            count: ops.len() as u32,
            array,
        },
    };
    rig.ioctl(DRM_IOCTL_PANTHOR_BO_SYNC, &mut a)
}

fn bo_sync(rig: &Rig, ops: &[BoSyncOp]) -> i32 {
    bo_sync_strided(rig, ops, 24)
}

/// The cache maintenance the DMA memory was asked for since `since`.
fn syncs_since(rig: &Rig, since: u64) -> Vec<SyncRecord> {
    use tyr::backend::Backend;
    rig.dev().backend.dma().syncs(since)
}

fn sync_count(rig: &Rig) -> u64 {
    use tyr::backend::Backend;
    rig.dev().backend.dma().sync_count()
}

fn rec(dir: SyncDir, addr: u64, len: usize) -> SyncRecord {
    SyncRecord { dir, addr, len }
}

#[test]
fn bo_sync_maintains_the_cpu_caches_of_write_back_bos() {
    use SyncDir::{ForCpu, ForDevice};
    let rig = rig();
    let wb = rig.bo_create(3 * 4096, DRM_PANTHOR_BO_WB_MMAP).unwrap();
    let wc = rig.bo_create(4096, 0).unwrap();
    let wb_pa = rig.bo(wb).dma_addr();
    let wb2 = rig.bo_create(4096, DRM_PANTHOR_BO_WB_MMAP).unwrap();
    let wb2_pa = rig.bo(wb2).dma_addr();

    // A flush writes the range back; a flush-and-invalidate also drops it.
    let n = sync_count(&rig);
    assert_eq!(
        bo_sync(
            &rig,
            &[
                sync_op(wb, DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH, 100, 200),
                sync_op(
                    wb2,
                    DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH_AND_INVALIDATE,
                    0,
                    4096
                ),
                sync_op(
                    wb,
                    DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH_AND_INVALIDATE,
                    8192,
                    4096
                ),
            ]
        ),
        0
    );
    assert_eq!(
        syncs_since(&rig, n),
        vec![
            rec(ForDevice, wb_pa + 100, 200),
            rec(ForDevice, wb2_pa, 4096),
            rec(ForCpu, wb2_pa, 4096),
            rec(ForDevice, wb_pa + 8192, 4096),
            rec(ForCpu, wb_pa + 8192, 4096),
        ]
    );

    // A write-combined BO (the GPU is not IO-coherent) and empty ranges need nothing.
    let n = sync_count(&rig);
    assert_eq!(
        bo_sync(
            &rig,
            &[
                sync_op(
                    wc,
                    DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH_AND_INVALIDATE,
                    0,
                    4096
                ),
                sync_op(wb, DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH, 3 * 4096, 0),
            ]
        ),
        0
    );
    assert_eq!(syncs_since(&rig, n), vec![]);

    // A longer (newer) op struct with a zero tail is accepted.
    let n = sync_count(&rig);
    assert_eq!(
        bo_sync_strided(
            &rig,
            &[sync_op(wb, DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH, 0, 64)],
            32
        ),
        0
    );
    assert_eq!(syncs_since(&rig, n), vec![rec(ForDevice, wb_pa, 64)]);

    // No op at all: nothing read, even from a bad address.
    let mut a = BoSync {
        ops: ObjArray {
            stride: 0,
            count: 0,
            array: 0x10,
        },
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_SYNC, &mut a), 0);
}

#[test]
fn bo_sync_bad_input_syncs_nothing() {
    let rig = rig();
    let wb = rig.bo_create(4096, DRM_PANTHOR_BO_WB_MMAP).unwrap();
    let good = sync_op(wb, DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH, 0, 4096);
    let n = sync_count(&rig);
    // Each bad op comes after a good one: the good one must not be applied either.
    for (bad, want) in [
        (sync_op(wb + 1, 0, 0, 4096), ENOENT),
        (sync_op(0, 0, 0, 4096), ENOENT),
        (sync_op(wb, 2, 0, 4096), EINVAL),
        (sync_op(wb, u32::MAX, 0, 4096), EINVAL),
        (sync_op(wb, 0, 1, 4096), EINVAL),
        (sync_op(wb, 0, 4096, 1), EINVAL),
        (sync_op(wb, 0, 0, 4097), EINVAL),
        (sync_op(wb, 0, u64::MAX, 2), EINVAL),
        (sync_op(wb, 1, 2, u64::MAX), EINVAL),
    ] {
        assert_eq!(bo_sync(&rig, &[good, bad]), want, "{bad:?}");
    }
    // A stride below the op's size; a longer op with a non-zero tail.
    assert_eq!(bo_sync_strided(&rig, &[good], 16), EINVAL);
    let mut bytes = ioctl::as_bytes(&good).to_vec();
    bytes.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
    let array = rig.client.mem().alloc_bytes(&bytes).unwrap();
    let mut a = BoSync {
        ops: ObjArray {
            stride: 32,
            count: 1,
            array,
        },
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_SYNC, &mut a), E2BIG);
    // An array nobody mapped, and one longer than the memory behind it.
    a.ops = ObjArray {
        stride: 24,
        count: 1,
        array: 0x10,
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_SYNC, &mut a), EFAULT);
    let one = rig
        .client
        .mem()
        .alloc_bytes(ioctl::as_bytes(&good))
        .unwrap();
    a.ops = ObjArray {
        stride: 24,
        count: 2,
        array: one,
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_SYNC, &mut a), EFAULT);
    // More ops than panthor would copy (over INT_MAX bytes): ENOMEM before reading any.
    a.ops = ObjArray {
        stride: 24,
        count: u32::MAX,
        array: one,
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_SYNC, &mut a), ENOMEM);
    assert_eq!(
        syncs_since(&rig, n),
        vec![],
        "a refused call synced something"
    );
}

// ---------------------------------------------------------------- user MMIO

const SHARED_RO: MmapProt = MmapProt {
    write: false,
    exec: false,
    shared: true,
};

fn flush_id_via_mmap(rig: &Rig, offset: u64) -> Result<u32, i32> {
    match driver::mmap(rig.client.fd(), offset, 4096, SHARED_RO) {
        Ok(Mapping::FlushId(page)) => page.latest_flush_id().map_err(|e| e.to_errno()),
        Ok(Mapping::Bo(_)) => panic!("offset {offset:#x} mapped a BO"),
        Err(e) => Err(e.to_errno()),
    }
}

fn set_user_mmio_offset(rig: &Rig, offset: u64) -> i32 {
    let mut a = SetUserMmioOffset { offset };
    rig.ioctl(DRM_IOCTL_PANTHOR_SET_USER_MMIO_OFFSET, &mut a)
}

#[test]
fn user_mmio_offset_default_and_change() {
    let rig = rig();
    let file = rig.client.file().inner();
    // A 64-bit client starts at the 64-bit offset.
    assert_eq!(file.user_mmio_offset(), DRM_PANTHOR_USER_MMIO_OFFSET_64BIT);
    let id = rig.gpu().read32(regs::LATEST_FLUSH_ID);
    assert_eq!(
        flush_id_via_mmap(&rig, DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET),
        Ok(id)
    );
    // Below the user MMIO offset there is no flush-ID page.
    assert_eq!(
        flush_id_via_mmap(&rig, DRM_PANTHOR_USER_MMIO_OFFSET_32BIT),
        Err(EINVAL)
    );

    // A 32-bit client (or an emulator running one) moves it down.
    assert_eq!(
        set_user_mmio_offset(&rig, DRM_PANTHOR_USER_MMIO_OFFSET_32BIT),
        0
    );
    assert_eq!(file.user_mmio_offset(), DRM_PANTHOR_USER_MMIO_OFFSET_32BIT);
    assert_eq!(
        flush_id_via_mmap(&rig, DRM_PANTHOR_USER_MMIO_OFFSET_32BIT),
        Ok(id)
    );
    // The 64-bit offset is now a page far into the user MMIO range, which has nothing there.
    assert_eq!(
        flush_id_via_mmap(&rig, DRM_PANTHOR_USER_MMIO_OFFSET_64BIT),
        Err(EINVAL)
    );
    // Other files keep their own offset.
    let other = Client::open(rig.dev(), OpenOptions::render()).unwrap();
    assert_eq!(
        other.file().inner().user_mmio_offset(),
        DRM_PANTHOR_USER_MMIO_OFFSET_64BIT
    );

    // Only the two offsets of the header are accepted.
    for bad in [
        0,
        4096,
        DRM_PANTHOR_USER_MMIO_OFFSET_32BIT + 4096,
        DRM_PANTHOR_USER_MMIO_OFFSET_64BIT - 4096,
        1 << 44,
        u64::MAX,
    ] {
        assert_eq!(set_user_mmio_offset(&rig, bad), EINVAL, "{bad:#x}");
        assert_eq!(file.user_mmio_offset(), DRM_PANTHOR_USER_MMIO_OFFSET_32BIT);
    }
    assert_eq!(
        set_user_mmio_offset(&rig, DRM_PANTHOR_USER_MMIO_OFFSET_64BIT),
        0
    );
    assert_eq!(
        flush_id_via_mmap(&rig, DRM_PANTHOR_USER_MMIO_OFFSET_64BIT),
        Ok(id)
    );
}

#[test]
fn flush_id_page_mapping_rules() {
    let rig = rig();
    let fd = rig.client.fd();
    let at = DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET;
    let map = |offset, len, prot| {
        driver::mmap(fd, offset, len, prot)
            .map(|_| ())
            .map_err(|e| e.to_errno())
    };
    assert_eq!(map(at, 4096, SHARED_RO), Ok(()));
    // One page, shared, neither writable nor executable.
    for (len, prot) in [
        (8192, SHARED_RO),
        (4095, SHARED_RO),
        (
            4096,
            MmapProt {
                write: true,
                ..SHARED_RO
            },
        ),
        (
            4096,
            MmapProt {
                exec: true,
                ..SHARED_RO
            },
        ),
        (
            4096,
            MmapProt {
                shared: false,
                ..SHARED_RO
            },
        ),
    ] {
        assert_eq!(map(at, len, prot), Err(EINVAL), "len {len}, {prot:?}");
    }
    // The user MMIO range has no second page.
    assert_eq!(map(at + 4096, 4096, SHARED_RO), Err(EINVAL));
    assert_eq!(map(!4095, 4096, SHARED_RO), Err(EINVAL));

    // Offsets below it are BOs, as the DRM core maps them.
    let bo = rig.bo_create(4096, 0).unwrap();
    let mut o = BoMmapOffset {
        handle: bo,
        ..Default::default()
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut o), 0);
    match driver::mmap(fd, o.offset, 4096, SHARED_RO) {
        Ok(Mapping::Bo(obj)) => assert_eq!(obj.dma_addr(), rig.bo(bo).dma_addr()),
        _ => panic!("the BO's offset did not map the BO"),
    }
    assert_eq!(map(o.offset + 4096, 4096, SHARED_RO), Err(EINVAL));
}

#[test]
fn flush_id_moves_with_the_gpu_cache_flushes() {
    let rig = rig();
    let page = match driver::mmap(
        rig.client.fd(),
        DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET,
        4096,
        SHARED_RO,
    ) {
        Ok(Mapping::FlushId(p)) => p,
        _ => panic!("no flush-ID page"),
    };
    let bo = rig.bo_create(4096, 0).unwrap();
    let idle_vm = rig.vm_create();
    let before = page.latest_flush_id().unwrap();
    assert_eq!(before, rig.gpu().read32(regs::LATEST_FLUSH_ID));

    // A bind into a VM without an address space touches no GPU cache.
    assert_eq!(
        rig.bind(idle_vm, &[map_op(bo, 0, 0x10_0000, 4096, 0)]),
        (0, 1)
    );
    assert_eq!(page.latest_flush_id().unwrap(), before);

    // A bind into an active VM flushes the GPU caches before unlocking the region.
    let vm = rig.vm_create();
    rig.activate(vm);
    let active = page.latest_flush_id().unwrap();
    assert_eq!(rig.bind(vm, &[map_op(bo, 0, 0x10_0000, 4096, 0)]), (0, 1));
    let after = page.latest_flush_id().unwrap();
    assert_ne!(after, active, "the flush ID did not move with the flush");
    assert_eq!(after, rig.gpu().read32(regs::LATEST_FLUSH_ID));

    // Once the device is unplugged the page is gone.
    let Rig {
        client,
        reg,
        parent: _parent,
    } = rig;
    let page = match driver::mmap(
        client.fd(),
        DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET,
        4096,
        SHARED_RO,
    ) {
        Ok(Mapping::FlushId(p)) => p,
        _ => panic!("no flush-ID page"),
    };
    drop(reg);
    assert_eq!(
        page.latest_flush_id().map_err(|e| e.to_errno()),
        Err(ENODEV)
    );
    assert!(matches!(
        driver::mmap(
            client.fd(),
            DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET,
            4096,
            SHARED_RO
        ),
        Err(tyr::Error::NoDevice)
    ));
}

// ---------------------------------------------------------------- TIMESTAMP_INFO

fn timestamp_info(rig: &Rig, flags: u32) -> Result<TimestampInfo, i32> {
    let mem = rig.client.mem();
    let info = TimestampInfo {
        flags,
        ..Default::default()
    };
    let ptr = mem.alloc_bytes(ioctl::as_bytes(&info)).unwrap();
    let mut q = DevQuery {
        type_: DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO,
        size: 56,
        pointer: ptr,
    };
    match rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q) {
        0 => Ok(ioctl::from_bytes(&mem.read_vec(ptr, 56).unwrap()).unwrap()),
        e => Err(e),
    }
}

fn sim_u64(rig: &Rig, lo: usize) -> u64 {
    rig.gpu()
        .with(|g| u64::from(g.read32(lo)) | u64::from(g.read32(lo + 4)) << 32)
}

#[test]
fn timestamp_info_reads_the_gpu_counters() {
    let mut cfg = Config::g610();
    cfg.timings.timestamp_hz = 19_200_000;
    let rig = rig_with(cfg);
    rig.gpu().write32(regs::TIMESTAMP_OFFSET_LO, 0x1234_5678);
    rig.gpu().write32(regs::TIMESTAMP_OFFSET_HI, 0x9);
    rig.gpu().advance(5_000_000);

    let all = DRM_PANTHOR_TIMESTAMP_GPU
        | DRM_PANTHOR_TIMESTAMP_GPU_OFFSET
        | DRM_PANTHOR_TIMESTAMP_FREQ
        | DRM_PANTHOR_TIMESTAMP_GPU_CYCLE_COUNT
        | DRM_PANTHOR_TIMESTAMP_DURATION
        | 1 << 1; // CPU_MONOTONIC
    let ts_before = sim_u64(&rig, regs::TIMESTAMP_LO);
    let cc_before = sim_u64(&rig, regs::CYCLE_COUNT_LO);
    let info = timestamp_info(&rig, all).unwrap();
    let ts_after = sim_u64(&rig, regs::TIMESTAMP_LO);
    let cc_after = sim_u64(&rig, regs::CYCLE_COUNT_LO);
    assert_eq!(info.flags, all);
    // The frequency of the counter the simulator was configured with, not a constant.
    assert_eq!(info.timestamp_frequency, 19_200_000);
    assert_eq!(info.timestamp_offset, 0x9_1234_5678);
    assert!(
        (ts_before..=ts_after).contains(&info.current_timestamp),
        "{ts_before} <= {} <= {ts_after}",
        info.current_timestamp
    );
    assert!(
        info.current_timestamp >= 0x9_1234_5678,
        "the offset is part of TIMESTAMP"
    );
    assert!((cc_before..=cc_after).contains(&info.cycle_count));
    assert!(info.cycle_count > 0);
    assert!(info.cpu_timestamp_sec != 0 || info.cpu_timestamp_nsec != 0);

    // What is not asked for is zero.
    let only_freq = timestamp_info(&rig, DRM_PANTHOR_TIMESTAMP_FREQ).unwrap();
    assert_eq!(
        only_freq,
        TimestampInfo {
            timestamp_frequency: 19_200_000,
            flags: DRM_PANTHOR_TIMESTAMP_FREQ,
            ..Default::default()
        }
    );

    // Unknown flags and CPU clock types: EINVAL, the user buffer untouched.
    for bad in [1 << 8, 3 << 1, 7 << 1, 1 << 31] {
        let info = TimestampInfo {
            flags: bad,
            ..Default::default()
        };
        let bytes = ioctl::as_bytes(&info).to_vec();
        assert_eq!(timestamp_raw(&rig, &bytes), (EINVAL, bytes), "{bad:#x}");
    }
    // Sizes: below the first version's 16 bytes is EINVAL; a longer structure must have a zero
    // tail (E2BIG otherwise, untouched) and gets it back zeroed.
    let first = timestamp_raw(&rig, &[0; 8]);
    assert_eq!(first, (EINVAL, vec![0; 8]));
    let mut long = vec![0u8; 64];
    long[60] = 1;
    assert_eq!(timestamp_raw(&rig, &long), (E2BIG, long.clone()));
    long[60] = 0;
    let (e, back) = timestamp_raw(&rig, &long);
    assert_eq!(e, 0);
    assert_eq!(back[56..], [0; 8]);
    let info: TimestampInfo = ioctl::from_bytes(&back[..56]).unwrap();
    assert_eq!(
        info.timestamp_frequency, 19_200_000,
        "flags 0: the first version's fields"
    );
    // The first version's 16 bytes: frequency and current timestamp only.
    let (e, back) = timestamp_raw(&rig, &[0; 16]);
    assert_eq!(e, 0);
    assert_eq!(back[..8], 19_200_000u64.to_ne_bytes());
    assert_ne!(back[8..16], [0; 8]);
}

/// TIMESTAMP_INFO with a user buffer holding `bytes` (its size is the query's); the errno and
/// the buffer after the call.
fn timestamp_raw(rig: &Rig, bytes: &[u8]) -> (i32, Vec<u8>) {
    let mem = rig.client.mem();
    let ptr = mem.alloc_bytes(bytes).unwrap();
    let mut q = DevQuery {
        type_: DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO,
        size: bytes.len() as u32,
        pointer: ptr,
    };
    let e = rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q);
    (e, mem.read_vec(ptr, bytes.len()).unwrap())
}

#[test]
fn group_priorities_info_sizes() {
    let rig = rig();
    let mem = rig.client.mem();
    // Below the structure's 4 bytes: EINVAL, nothing written.
    let p = mem.alloc_bytes(&[0xaa; 3]).unwrap();
    let mut q = DevQuery {
        type_: DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO,
        size: 3,
        pointer: p,
    };
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), EINVAL);
    assert_eq!(mem.read_vec(p, 3).unwrap(), [0xaa; 3]);
    // Longer: the mask, then zeros.
    let p = mem.alloc_bytes(&[0xaa; 12]).unwrap();
    q.size = 12;
    q.pointer = p;
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), 0);
    let mut want = [0u8; 12];
    want[0] = 0b0011;
    assert_eq!(mem.read_vec(p, 12).unwrap(), want);
    // An unmapped buffer.
    q.pointer = 0x10;
    q.size = 4;
    assert_eq!(rig.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q), EFAULT);
}

// ---------------------------------------------------------------- group priorities

fn priorities(client: &Client<tyr::driver::TyrDriver<tyr::host::HostBackend>>) -> u8 {
    let p = client.mem().alloc(4).unwrap();
    let mut q = DevQuery {
        type_: DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO,
        size: 4,
        pointer: p,
    };
    assert_eq!(
        errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q)),
        0
    );
    let b = client.mem().read_vec(p, 4).unwrap();
    assert_eq!(&b[1..], [0, 0, 0], "padding not zero");
    b[0]
}

/// GROUP_CREATE of a one-queue group in a new VM of `client`; the errno and the handle.
fn group_create(
    client: &Client<tyr::driver::TyrDriver<tyr::host::HostBackend>>,
    priority: u8,
    queues: u32,
) -> (i32, u32) {
    let mut v = VmCreate::default();
    assert_eq!(
        errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_VM_CREATE, &mut v)),
        0
    );
    let q = QueueCreate {
        priority: 0,
        pad: [0; 3],
        ringbuf_size: 4096,
    };
    let array = client.mem().alloc_bytes(ioctl::as_bytes(&q)).unwrap();
    let mut a = GroupCreate {
        queues: ObjArray {
            stride: 8,
            count: queues,
            array,
        },
        max_compute_cores: 1,
        max_fragment_cores: 1,
        max_tiler_cores: 1,
        priority,
        compute_core_mask: 1,
        fragment_core_mask: 1,
        tiler_core_mask: 1,
        vm_id: v.id,
        ..Default::default()
    };
    let e = errno(client.ioctl_arg(DRM_IOCTL_PANTHOR_GROUP_CREATE, &mut a));
    (e, a.group_handle)
}

#[test]
#[cfg_attr(miri, ignore)] // group creation boots rings through the simulated firmware
fn group_priorities_follow_drm_master() {
    let rig = rig();
    let render = &rig.client;
    let master = Client::open(
        rig.dev(),
        OpenOptions {
            node: Node::Primary,
            authenticated: true,
            master: true,
            sys_admin: false,
        },
    )
    .unwrap();
    // CAP_SYS_ADMIN is not what panthor asks for (CAP_SYS_NICE, which the host DRM core does
    // not record): such a client gets the everyday priorities only.
    let admin = Client::open(
        rig.dev(),
        OpenOptions {
            sys_admin: true,
            ..OpenOptions::render()
        },
    )
    .unwrap();
    let low_medium = 1 << PANTHOR_GROUP_PRIORITY_LOW | 1 << PANTHOR_GROUP_PRIORITY_MEDIUM;
    assert_eq!(priorities(render), low_medium);
    assert_eq!(priorities(&admin), low_medium);
    assert_eq!(priorities(&master), 0b1111);

    // GROUP_CREATE refuses what the mask does not allow, with EACCES, and creates nothing.
    for prio in [PANTHOR_GROUP_PRIORITY_HIGH, PANTHOR_GROUP_PRIORITY_REALTIME] {
        assert_eq!(group_create(render, prio, 1), (EACCES, 0));
        assert_eq!(group_create(&admin, prio, 1), (EACCES, 0));
    }
    // Unknown priorities are invalid for everyone; a bad queue count is checked first.
    assert_eq!(group_create(&master, 4, 1), (EINVAL, 0));
    assert_eq!(group_create(render, u8::MAX, 1), (EINVAL, 0));
    assert_eq!(
        group_create(render, PANTHOR_GROUP_PRIORITY_HIGH, 0),
        (EINVAL, 0)
    );
    let mut s = GroupGetState {
        group_handle: 1,
        ..Default::default()
    };
    assert_eq!(
        errno(render.ioctl_arg(DRM_IOCTL_PANTHOR_GROUP_GET_STATE, &mut s)),
        EINVAL
    );
    // What the mask allows works: the first group of each file gets handle 1.
    assert_eq!(
        group_create(render, PANTHOR_GROUP_PRIORITY_MEDIUM, 1),
        (0, 1)
    );
    assert_eq!(group_create(&admin, PANTHOR_GROUP_PRIORITY_LOW, 1), (0, 1));
    assert_eq!(
        group_create(&master, PANTHOR_GROUP_PRIORITY_REALTIME, 1),
        (0, 1)
    );
    assert_eq!(
        group_create(&master, PANTHOR_GROUP_PRIORITY_HIGH, 1),
        (0, 2)
    );
}

// ---------------------------------------------------------------- the table

#[test]
fn every_panthor_ioctl_has_its_number() {
    let rig = rig();
    // The tiler heap entries sit at their numbers (an all-zero argument names VM 0, which no
    // file has: EINVAL; driver_heap.rs tests them properly), keeping the later ones in place.
    let mut h = TilerHeapCreate::default();
    assert_eq!(
        rig.ioctl(DRM_IOCTL_PANTHOR_TILER_HEAP_CREATE, &mut h),
        EINVAL
    );
    let mut d = TilerHeapDestroy::default();
    assert_eq!(
        rig.ioctl(DRM_IOCTL_PANTHOR_TILER_HEAP_DESTROY, &mut d),
        EINVAL
    );
    // One past the last panthor ioctl is unknown.
    let past = ioctl::IOWR::<BoQueryInfo>(ioctl::COMMAND_BASE + nr::BO_QUERY_INFO + 1);
    let mut q = BoQueryInfo::default();
    assert_eq!(rig.ioctl(past, &mut q), EINVAL);
    // Version: panthor's name, uAPI 1.8 (Linux 7.2's).
    let mut v = ioctl::DrmVersion::default();
    assert_eq!(rig.ioctl(ioctl::DRM_IOCTL_VERSION, &mut v), 0);
    assert_eq!((v.version_major, v.version_minor), (1, 8));
}

// ---------------------------------------------------------------- BO_SYNC against a model

mod bo_sync_model {
    use super::*;
    use proptest::prelude::*;

    /// One op: which BO (0: write-back, 3 pages; 1: write-combined, 1 page; 2: no such
    /// handle), the type, and the range.
    type Op = (usize, u32, u64, u64);

    fn op() -> impl Strategy<Value = Op> {
        (
            0usize..3,
            prop_oneof![8 => 0u32..2, 1 => 2u32..5, 1 => Just(u32::MAX)],
            prop_oneof![8 => 0u64..3 * 4096, 1 => Just(u64::MAX - 8)],
            prop_oneof![8 => 0u64..3 * 4096 + 16, 1 => Just(u64::MAX)],
        )
    }

    fn cases() -> ProptestConfig {
        let mut cfg = ProptestConfig::with_cases(if cfg!(miri) { 2 } else { 128 });
        cfg.failure_persistence = None;
        cfg
    }

    proptest! {
        #![proptest_config(cases())]

        /// Any mix of valid and invalid ops: the first bad op's errno and nothing synced, or
        /// exactly the write-back ranges asked for, in order.
        #[test]
        fn bo_sync_matches_the_model(ops in proptest::collection::vec(op(), 1..6)) {
            let rig = rig();
            let wb = rig.bo_create(3 * 4096, DRM_PANTHOR_BO_WB_MMAP).unwrap();
            let wc = rig.bo_create(4096, 0).unwrap();
            let sizes = [3 * 4096u64, 4096];
            let pa = rig.bo(wb).dma_addr();
            let mut expect = Vec::new();
            let mut errno = 0;
            let mut uapi_ops = Vec::new();
            for &(bo, type_, offset, size) in &ops {
                let handle = [wb, wc, wc + 100][bo];
                uapi_ops.push(sync_op(handle, type_, offset, size));
                if errno != 0 {
                    continue;
                }
                let in_range = offset.checked_add(size).is_some_and(|e| bo < 2 && e <= sizes[bo]);
                errno = if bo == 2 {
                    ENOENT
                } else if !in_range || type_ > 1 {
                    EINVAL
                } else {
                    0
                };
                if errno == 0 && bo == 0 && size > 0 {
                    expect.push(rec(SyncDir::ForDevice, pa + offset, size as usize));
                    if type_ == DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH_AND_INVALIDATE {
                        expect.push(rec(SyncDir::ForCpu, pa + offset, size as usize));
                    }
                }
            }
            if errno != 0 {
                expect.clear();
            }
            let n = sync_count(&rig);
            prop_assert_eq!(bo_sync(&rig, &uapi_ops), errno);
            prop_assert_eq!(syncs_since(&rig, n), expect);
        }
    }
}
