// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A replay of what Mesa's panvk (through its `panthor_kmod` backend) asks of the kernel from
//! device creation to teardown, in its order, through ioctls and `mmap` only.
//!
//! The steps and the Mesa functions they stand for (`src/panfrost/lib/kmod/panthor_kmod.c`,
//! `src/panfrost/vulkan/csf/panvk_vX_queue.c`):
//!
//! 1. `panthor_kmod_dev_create` and the physical-device probe: `DEV_QUERY` of GPU_INFO,
//!    CSIF_INFO, TIMESTAMP_INFO and GROUP_PRIORITIES_INFO, each first with a null pointer for
//!    its size, then into a buffer of that size; the `LATEST_FLUSH_ID` page mapped from
//!    `DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET` (`panthor_kmod_get_flush_id` reads it for every
//!    queue submit's `latest_flush`).
//! 2. `panthor_kmod_vm_create` with `PAN_KMOD_VM_FLAG_TRACK_ACTIVITY`: the VM's timeline
//!    syncobj, created signalled, then `VM_CREATE`.
//! 3. `panthor_kmod_bo_alloc` (a BO private to the VM: `exclusive_vm_id`) and
//!    `panthor_kmod_bo_get_mmap_offset`, then the CPU mapping.
//! 4. `panthor_kmod_vm_bind` in `PAN_KMOD_VM_OP_MODE_ASYNC`: each op signals the next point
//!    of the VM's timeline (executable BOs mapped `READONLY`, the others `NOEXEC`).
//! 5. `panvk_per_arch(queue_init)`: the queue's own syncobj, `init_tiler` (TILER_HEAP_CREATE
//!    with 2 MiB chunks, 5 initial, 64 at most, 65535 render passes in flight), `create_group`
//!    (three queues, vertex/tiler, fragment and compute, 64 KiB rings, priority 1; every shader
//!    core for compute and fragment, one tiler), then `init_subqueue` for each: a first stream
//!    (which on the vertex/tiler and fragment subqueues sets the heap context with `HEAP_SET`)
//!    signalling the queue syncobj, waited for with `SYNCOBJ_WAIT`.
//! 6. `panvk_queue_submit` for each `vkQueueSubmit`, one `GROUP_SUBMIT`: a sync-only queue
//!    submit per subqueue used carrying the waits (`panvk_queue_submit_init_waits`; here the
//!    application's timeline semaphore at the previous point; for the first submit the VM's
//!    last bind point and a binary semaphore imported from another device, whose fence the
//!    test holds back until every submit is queued, so that a job running early shows), the
//!    command stream (`panvk_queue_submit_init_cmdbufs`), a sync-only queue submit per
//!    subqueue used signalling points 1, 2, ... of the queue syncobj
//!    (`panvk_queue_submit_init_signals`); then `panvk_queue_submit_process_signals`:
//!    `SYNCOBJ_TRANSFER` of the queue syncobj to the semaphore's next point, and
//!    `SYNCOBJ_RESET` of the queue syncobj. Submits alternate between the vertex/tiler and the
//!    compute subqueue, so only the timeline orders them; the vertex/tiler ones tile into the
//!    heap first (the first tiled word is copied out by the GPU and checked).
//! 7. `vkWaitSemaphores`: `SYNCOBJ_TIMELINE_WAIT` on the last point; the result is read in
//!    GPU memory through the CPU mapping, and `SYNCOBJ_QUERY` tells the last point.
//! 8. `panvk_per_arch(queue_check_status)`: `GROUP_GET_STATE` says the group is fine.
//! 9. Teardown, `panvk_per_arch(queue_finish)` then the device's: `GROUP_DESTROY`,
//!    `cleanup_tiler`'s TILER_HEAP_DESTROY, the queue syncobj destroyed, asynchronous unmaps
//!    signalling further VM points (waited for), then `VM_DESTROY`, the VM's syncobj
//!    destroyed, `GEM_CLOSE` of the BOs and the file closed.
//!    Nothing the client made is left alive: no syncobj, chain link, group, queue interface,
//!    bind queue, zombie VM, heap or DMA page.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drm_ctx::device;
use drm_ctx::drm::gem;
use drm_ctx::drm::ioctl::{as_bytes, from_bytes, DrmGemClose, IoctlArg, DRM_IOCTL_GEM_CLOSE};
use drm_ctx::host::syncobj::{self as so, live_chain_links};
use drm_ctx::types::ARef;
use jobqueue::host::HostFence;
use jobqueue::SignalFence as _;
use mali_sim::Config;
use tyr::csf::instr;
use tyr::driver::{self, TyrBo};
use tyr::host::HostBackend;
use tyr::host::JobSyncFence;
use tyr::ioctl::{Mapping, MmapProt};
use tyr::uapi::*;
use tyr::umd::{timeline_op, Umd};

const WAIT: i64 = 600_000_000_000;
/// Subqueues of a panvk queue (`enum panvk_subqueue_id`).
const VERTEX_TILER: u32 = 0;
const COMPUTE: u32 = 2;
const SUBQUEUES: u32 = 3;

const CODE_VA: u64 = 0x1000_0000;
const DATA_VA: u64 = 0x2000_0000;
const SUBMITS: u64 = 6;
/// Where the GPU copies the first word its tiling wrote into the heap, in the data BO.
const TILED: u64 = 0x900;
/// Where the tiling passes write their tiler and heap descriptors.
const TILER_DESC: u64 = 0xa00;
/// Tag of the words tiled by submit `k`: `TAG + k`, then `TAG + k + 1`, ...
const TAG: u64 = 0x7000;

/// `DEV_QUERY` as panvk's probe does it: the size first, then the object.
fn query<T: IoctlArg + Default>(umd: &Umd, type_: u32) -> T {
    let mut q = DevQuery {
        type_,
        size: 0,
        pointer: 0,
    };
    umd.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q).unwrap();
    assert_eq!(
        q.size as usize,
        core::mem::size_of::<T>(),
        "size of {type_}"
    );
    let mem = umd.client().mem();
    let ptr = mem.alloc_bytes(as_bytes(&T::default())).unwrap();
    q.pointer = ptr;
    umd.ioctl(DRM_IOCTL_PANTHOR_DEV_QUERY, &mut q).unwrap();
    let out = from_bytes(&mem.read_vec(ptr, q.size as usize).unwrap()).unwrap();
    mem.free(ptr).unwrap();
    out
}

fn syncobj_create(umd: &Umd, flags: u32) -> u32 {
    let mut a = so::DrmSyncobjCreate { handle: 0, flags };
    umd.ioctl(so::DRM_IOCTL_SYNCOBJ_CREATE, &mut a).unwrap();
    a.handle
}

/// `panthor_kmod_bo_alloc` for a BO private to `vm`, then its mmap offset and CPU mapping.
fn bo_alloc(umd: &Umd, vm: u32, size: u64) -> (u32, ARef<gem::Object<TyrBo<HostBackend>>>) {
    let mut c = BoCreate {
        size,
        exclusive_vm_id: vm,
        ..Default::default()
    };
    umd.ioctl(DRM_IOCTL_PANTHOR_BO_CREATE, &mut c).unwrap();
    let mut m = BoMmapOffset {
        handle: c.handle,
        ..Default::default()
    };
    umd.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut m).unwrap();
    let map = umd.client().mmap(m.offset, size as usize).unwrap();
    (c.handle, map)
}

fn bind_async(umd: &Umd, vm: u32, ops: &[VmBindOp]) {
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, ops).unwrap();
}

fn group_submit(umd: &Umd, group: u32, qsubmits: &[QueueSubmit]) {
    let mut a = GroupSubmit {
        group_handle: group,
        pad: 0,
        queue_submits: umd.array(qsubmits).unwrap(),
    };
    umd.ioctl(DRM_IOCTL_PANTHOR_GROUP_SUBMIT, &mut a).unwrap();
    umd.free_array(&a.queue_submits);
}

fn sync_only(umd: &Umd, queue: u32, ops: &[SyncOp]) -> QueueSubmit {
    QueueSubmit {
        queue_index: queue,
        syncs: umd.array(ops).unwrap(),
        ..Default::default()
    }
}

#[test]
fn panvk_device_queue_and_submissions_replay() {
    let parent = device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, HostBackend::new(Config::g610())).unwrap();
    let dev = reg.device();
    let memory = dev.backend.gpu().memory().clone();
    let dma_before = memory.live_allocations();
    let links_before = live_chain_links();
    let umd = Umd::open(dev).unwrap();

    // 1. Device queries, size first; the flush-ID page.
    let gpu: GpuInfo = query(&umd, DRM_PANTHOR_DEV_QUERY_GPU_INFO);
    assert_ne!(gpu.gpu_id, 0);
    assert_ne!(gpu.shader_present, 0);
    let csif: CsifInfo = query(&umd, DRM_PANTHOR_DEV_QUERY_CSIF_INFO);
    assert!(csif.cs_slot_count >= SUBQUEUES);
    let ts: TimestampInfo = query(&umd, DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO);
    assert_ne!(ts.timestamp_frequency, 0);
    let prio: GroupPrioritiesInfo = query(&umd, DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO);
    let medium = 1 << PANTHOR_GROUP_PRIORITY_MEDIUM;
    assert_eq!(prio.allowed_mask & medium, medium);
    let flush_page = match tyr::ioctl::mmap(
        umd.client().fd(),
        DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET,
        4096,
        MmapProt {
            shared: true,
            ..Default::default()
        },
    ) {
        Ok(Mapping::FlushId(p)) => p,
        _ => panic!("no flush-ID page"),
    };
    let flush_id = || flush_page.latest_flush_id().unwrap();

    // 2. The VM and its activity timeline (created signalled: point 0 is done).
    let vm_sync = syncobj_create(&umd, so::DRM_SYNCOBJ_CREATE_SIGNALED);
    let mut vm_point = 0u64;
    let va_bits = gpu.mmu_features & 0xff;
    let mut vc = VmCreate {
        user_va_range: 1 << (va_bits - 1),
        ..Default::default()
    };
    umd.ioctl(DRM_IOCTL_PANTHOR_VM_CREATE, &mut vc).unwrap();
    let vm = vc.id;

    // 3. Code and data BOs private to the VM, with their CPU mappings.
    let (code, code_map) = bo_alloc(&umd, vm, 0x10000);
    let (data, data_map) = bo_alloc(&umd, vm, 0x1000);

    // 4. Asynchronous binds, one VM point each.
    let mut map_op = |bo: u32, va: u64, size: u64, flags: u32| {
        vm_point += 1;
        VmBindOp {
            flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP | flags,
            bo_handle: bo,
            bo_offset: 0,
            va,
            size,
            syncs: umd.array(&[timeline_op(true, vm_sync, vm_point)]).unwrap(),
        }
    };
    let ops = [
        map_op(code, CODE_VA, 0x10000, DRM_PANTHOR_VM_BIND_OP_MAP_READONLY),
        map_op(data, DATA_VA, 0x1000, DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC),
    ];
    bind_async(&umd, vm, &ops);
    assert_eq!(umd.syncobj_query(&[vm_sync], true).unwrap(), [vm_point]);

    // 5. Queue init: the queue syncobj, the group, a first stream per subqueue.
    let queue_sync = syncobj_create(&umd, 0);
    let heap = umd.tiler_heap_create(vm, 5, 2 << 20, 64, 65535).unwrap();
    assert_eq!(dev.heaps.counts(), (1, 1, 5));
    let qc: Vec<QueueCreate> = (0..SUBQUEUES)
        .map(|_| QueueCreate {
            priority: 1,
            pad: [0; 3],
            ringbuf_size: 64 * 1024,
        })
        .collect();
    let mut gc = GroupCreate {
        queues: umd.array(&qc).unwrap(),
        max_compute_cores: gpu.shader_present.count_ones() as u8,
        max_fragment_cores: gpu.shader_present.count_ones() as u8,
        max_tiler_cores: 1,
        priority: PANTHOR_GROUP_PRIORITY_MEDIUM,
        compute_core_mask: gpu.shader_present,
        fragment_core_mask: gpu.shader_present,
        tiler_core_mask: 1,
        vm_id: vm,
        ..Default::default()
    };
    umd.ioctl(DRM_IOCTL_PANTHOR_GROUP_CREATE, &mut gc).unwrap();
    let group = gc.group_handle;
    let write = |off: u64, prog: &[u64]| {
        let bytes: Vec<u8> = prog.iter().flat_map(|i| i.to_le_bytes()).collect();
        code_map.cpu_write(off, &bytes).unwrap();
    };
    for sq in 0..SUBQUEUES {
        // Each subqueue's init stream marks its context word (panvk: context and heap set-up).
        let off = 0x100 * u64::from(sq);
        let mut prog = vec![
            instr::move48(0, DATA_VA + 0x800 + 4 * u64::from(sq)),
            instr::move32(2, 0x1000 + sq),
            instr::store_multiple(2, 0, 0, 1),
        ];
        if sq != COMPUTE {
            prog.extend([instr::move48(76, heap.context_va), instr::heap_set(76)]);
        }
        write(off, &prog);
        let signal = SyncOp {
            flags: DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ | DRM_PANTHOR_SYNC_OP_SIGNAL,
            handle: queue_sync,
            timeline_value: 0,
        };
        let mut qs = sync_only(&umd, sq, &[signal]);
        qs.stream_addr = CODE_VA + off;
        qs.stream_size = (prog.len() * 8) as u32;
        qs.latest_flush = flush_id();
        // The first stream also waits for the binds (the VM's last point).
        let wait_binds = sync_only(&umd, sq, &[timeline_op(false, vm_sync, vm_point)]);
        group_submit(&umd, group, &[wait_binds, qs]);
        umd.wait(&[queue_sync], WAIT).unwrap();
    }
    let mut ctx = [0u8; 12];
    data_map.cpu_read(0x800, &mut ctx).unwrap();
    assert_eq!(ctx, [0x00, 0x10, 0, 0, 0x01, 0x10, 0, 0, 0x02, 0x10, 0, 0]);

    // 6. vkQueueSubmits chained by the application's timeline semaphore. The first also
    // waits on a binary semaphore imported from another device (vkImportSemaphoreFdKHR: a
    // syncobj holding that device's fence), here a fence the test holds back: until it
    // signals, nothing may run.
    let sem = syncobj_create(&umd, 0);
    let imported = syncobj_create(&umd, 0);
    let other_device = HostFence::new();
    umd.client()
        .file()
        .syncobjs()
        .replace(
            imported,
            Some(Arc::new(JobSyncFence(other_device.clone())).into()),
        )
        .unwrap();
    for k in 0..SUBMITS {
        let sq = if k % 2 == 0 { COMPUTE } else { VERTEX_TILER };
        // Job k adds k + 1 to the counter and logs the running sum.
        let off = 0x1000 + 0x200 * k;
        // A vertex/tiler pass tiles 4 words tagged by its number; the GPU copies the first
        // word of the heap out to `TILED`.
        let tiling: Vec<u64> = if sq == VERTEX_TILER {
            let mut t = heap.tile(DATA_VA + TILER_DESC, 4, TAG + k).to_vec();
            t.extend([
                instr::move48(10, heap.first_chunk_va + 64),
                instr::load_multiple(12, 10, 0, 1),
                // The load lands when its scoreboard entry (0) drains.
                instr::wait(1),
                instr::move48(14, DATA_VA + TILED),
                instr::store_multiple(12, 14, 0, 1),
            ]);
            t
        } else {
            Vec::new()
        };
        let prog: Vec<u64> = tiling
            .into_iter()
            .chain([
                instr::move48(0, DATA_VA),
                instr::load_multiple(2, 0, 0, 1),
                instr::wait(1),
                instr::add_imm32(2, 2, k as i32 + 1),
                instr::store_multiple(2, 0, 0, 1),
                instr::move48(4, DATA_VA + 4 * (k + 1)),
                instr::store_multiple(2, 4, 0, 1),
            ])
            .collect();
        write(off, &prog);
        let waits = if k == 0 {
            vec![
                timeline_op(false, vm_sync, vm_point),
                SyncOp {
                    flags: DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ | DRM_PANTHOR_SYNC_OP_WAIT,
                    handle: imported,
                    timeline_value: 0,
                },
            ]
        } else {
            vec![timeline_op(false, sem, k)]
        };
        let cmd = QueueSubmit {
            queue_index: sq,
            stream_size: (prog.len() * 8) as u32,
            stream_addr: CODE_VA + off,
            latest_flush: flush_id(),
            ..Default::default()
        };
        let qsubmits = [
            sync_only(&umd, sq, &waits),
            cmd,
            sync_only(&umd, sq, &[timeline_op(true, queue_sync, 1)]),
        ];
        group_submit(&umd, group, &qsubmits);
        for q in &qsubmits {
            umd.free_array(&q.syncs);
        }
        let mut t = so::DrmSyncobjTransfer {
            src_handle: queue_sync,
            dst_handle: sem,
            src_point: 0,
            dst_point: k + 1,
            flags: 0,
            pad: 0,
        };
        umd.ioctl(so::DRM_IOCTL_SYNCOBJ_TRANSFER, &mut t).unwrap();
        let arr = umd.array(&[queue_sync]).unwrap();
        let mut r = so::DrmSyncobjArray {
            handles: arr.array,
            count_handles: 1,
            pad: 0,
        };
        umd.ioctl(so::DRM_IOCTL_SYNCOBJ_RESET, &mut r).unwrap();
        umd.free_array(&arr);
    }

    // Nothing ran ahead of the imported fence; then it signals.
    assert_eq!(
        umd.timeline_wait(
            &[sem],
            &[1],
            so::DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
            20_000_000
        ),
        Err(drm_ctx::Error::Other(so::ETIME))
    );
    let mut log = [0u8; 4 * (SUBMITS as usize + 1)];
    data_map.cpu_read(0, &mut log).unwrap();
    assert!(log.iter().all(|b| *b == 0), "jobs ran ahead: {log:?}");
    other_device.signal(Ok(()));

    // 7. vkWaitSemaphores on the last point; the results in GPU memory.
    umd.timeline_wait(
        &[sem],
        &[SUBMITS],
        so::DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
        WAIT,
    )
    .unwrap();
    assert_eq!(umd.syncobj_query(&[sem], false).unwrap(), [SUBMITS]);
    let mut sum = 0u32;
    for k in 0..SUBMITS {
        sum += k as u32 + 1;
        let mut b = [0u8; 4];
        data_map.cpu_read(4 * (k + 1), &mut b).unwrap();
        assert_eq!(u32::from_le_bytes(b), sum, "submit {k} ran out of order");
    }

    // The first tiling pass (submit 1) wrote the heap's first word.
    let mut b = [0u8; 4];
    data_map.cpu_read(TILED, &mut b).unwrap();
    assert_eq!(u64::from(u32::from_le_bytes(b)), TAG + 1);

    // 8. The queue's status.
    assert_eq!(umd.group_state(group).unwrap(), (0, 0));

    // 9. Teardown.
    umd.group_destroy(group).unwrap();
    umd.tiler_heap_destroy(&heap).unwrap();
    umd.syncobj_destroy(queue_sync).unwrap();
    umd.syncobj_destroy(sem).unwrap();
    umd.syncobj_destroy(imported).unwrap();
    let mut unmap_op = |va: u64, size: u64| {
        vm_point += 1;
        VmBindOp {
            flags: DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
            va,
            size,
            syncs: umd.array(&[timeline_op(true, vm_sync, vm_point)]).unwrap(),
            ..Default::default()
        }
    };
    let ops = [unmap_op(CODE_VA, 0x10000), unmap_op(DATA_VA, 0x1000)];
    bind_async(&umd, vm, &ops);
    umd.timeline_wait(
        &[vm_sync],
        &[vm_point],
        so::DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
        WAIT,
    )
    .unwrap();
    let mut vd = VmDestroy { id: vm, pad: 0 };
    umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut vd).unwrap();
    umd.syncobj_destroy(vm_sync).unwrap();
    drop((code_map, data_map, flush_page));
    for handle in [code, data] {
        let mut c = DrmGemClose {
            handle,
            ..Default::default()
        };
        umd.ioctl(DRM_IOCTL_GEM_CLOSE, &mut c).unwrap();
    }
    assert!(umd.client().file().syncobjs().is_empty());
    drop(umd);
    assert!(dev.sched.group_count() == 0);
    assert_eq!(dev.sched.ifaces_in_use(), 0);
    assert_eq!(dev.sched.bind_queue_count(), 0);
    assert_eq!(dev.zombie_vm_count(), 0);
    assert_eq!(dev.heaps.counts(), (0, 0, 0));
    assert_eq!(live_chain_links(), links_before);
    let t0 = Instant::now();
    while memory.live_allocations() != dma_before {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{} DMA allocations left",
            memory.live_allocations() - dma_before
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
