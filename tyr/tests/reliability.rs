// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Regression tests of issue 20 on the simulated G610: create/destroy races, per-file budgets
//! of device-wide pools, memory exhaustion. Every test counts what is left once clients close.
//! Then those of issue 37: allocations a client sizes (measured by this binary's allocator),
//! the page tables of huge binds, and memory the MMU may still reach after a failed update.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use drm_ctx::{device, drm::Registration, types::ARef};
use mali_sim::Config;
use tyr::backend::Lock as _;
use tyr::driver::{self, TyrDriver};
use tyr::host::HostBackend;
use tyr::uapi::*;
use tyr::umd::{Job, Umd};

type Drv = TyrDriver<HostBackend>;

const EBUSY: i32 = -16;
const ENOMEM: i32 = -12;
const ETIMEDOUT: i32 = -110;
/// Rounds of the races (each is a few milliseconds natively).
const ROUNDS: usize = if cfg!(miri) { 2 } else { 200 };

struct Rig {
    reg: Registration<Drv>,
    _parent: ARef<device::Device>,
}

fn rig() -> Rig {
    let parent = device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, HostBackend::new(Config::g610())).unwrap();
    Rig {
        reg,
        _parent: parent,
    }
}

/// The system allocator, recording the largest block each thread asks for.
struct Measured;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn record(size: usize) {
    let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
}

// SAFETY: Every call is forwarded to `System` with the same arguments; recording a size
// allocates nothing.
unsafe impl GlobalAlloc for Measured {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: The caller's guarantees, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        // SAFETY: The caller's guarantees, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: The caller's guarantees, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        // SAFETY: The caller's guarantees, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static MEASURED: Measured = Measured;

/// Runs `f` and returns what it returned and the largest block this thread asked for meanwhile
/// (whether or not the allocator gave it).
fn largest_block<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|l| l.set(0));
    let out = f();
    (out, LARGEST.with(Cell::get))
}

fn errno<T>(r: drm_ctx::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Defect 2: a GROUP_DESTROY that finds the handle while GROUP_CREATE is still running leaves
/// no group behind in the scheduler (nor its queue interfaces).
#[test]
#[cfg_attr(miri, ignore = "a race repeated hundreds of times")]
fn group_create_racing_group_destroy_leaks_nothing() {
    let r = rig();
    let dev = r.reg.device();
    let umd = Umd::open(dev).unwrap();
    let vm = umd.vm_create().unwrap();
    for _ in 0..ROUNDS {
        let start = Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                start.wait();
                let _ = umd.group_create(vm, &[0x1000]);
            });
            s.spawn(|| {
                start.wait();
                let t0 = Instant::now();
                // Destroys handle 1 as soon as it exists.
                while umd.group_destroy(1).is_err() && t0.elapsed() < Duration::from_secs(2) {
                    std::hint::spin_loop();
                }
            });
        });
        let _ = umd.group_destroy(1);
        assert_eq!(dev.sched.group_count(), 0, "a destroyed group stayed");
        assert_eq!(dev.sched.ifaces_in_use(), 0);
    }
}

/// Defect 2, deterministically: while the scheduler cannot take the group (its table is locked
/// here), the group's handle is not visible in the file, so no GROUP_DESTROY can find it.
#[test]
#[cfg_attr(miri, ignore = "waits on real time for a blocked thread")]
fn group_handle_is_published_after_the_scheduler_has_the_group() {
    let r = rig();
    let dev = r.reg.device();
    let umd = Umd::open(dev).unwrap();
    let vm = umd.vm_create().unwrap();
    let file = umd.client().file();
    std::thread::scope(|s| {
        let held = dev.sched.groups.guard();
        let creator = s.spawn(|| umd.group_create(vm, &[0x1000]));
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(500) {
            assert!(
                file.inner().group(1).is_none(),
                "handle published before the scheduler registered the group"
            );
            std::thread::yield_now();
        }
        drop(held);
        assert_eq!(creator.join().unwrap().unwrap(), 1);
    });
    assert_eq!(dev.sched.group_count(), 1);
    umd.group_destroy(1).unwrap();
    assert_eq!(dev.sched.group_count(), 0);
}

/// Defect 3 (queue interfaces): one client cannot take every queue interface of the device;
/// beyond its own budget it gets EBUSY and another client still creates groups.
#[test]
#[cfg_attr(miri, ignore = "creates a hundred groups")]
fn one_client_cannot_take_every_queue_interface() {
    let r = rig();
    let dev = r.reg.device();
    let greedy = Umd::open(dev).unwrap();
    let vm = greedy.vm_create().unwrap();
    let mut made = 0;
    let err = loop {
        match greedy.group_create(vm, &[0x1000; 8]) {
            Ok(_) => made += 1,
            Err(e) => break e.to_errno(),
        }
        assert!(made <= 96, "no limit before the device ran out");
    };
    assert_eq!(err, EBUSY);
    assert_eq!(made * 8, driver::MAX_QUEUES_PER_FILE);
    let other = Umd::open(dev).unwrap();
    let vm2 = other.vm_create().unwrap();
    other.group_create(vm2, &[0x1000; 8]).unwrap();
    // Destroying a group gives its queues back to the budget.
    greedy.group_destroy(1).unwrap();
    greedy.group_create(vm, &[0x1000; 8]).unwrap();
    drop(greedy);
    drop(other);
    assert_eq!(dev.sched.group_count(), 0);
    assert_eq!(dev.sched.ifaces_in_use(), 0);
}

/// Defect 4: a BO larger than the host can back (512 GiB, under the 1 TiB limit) fails with
/// ENOMEM, or succeeds where the host overcommits; the process never aborts.
#[test]
#[cfg_attr(miri, ignore = "Miri cannot allocate or fail 512 GiB")]
fn huge_bo_create_is_enomem_not_an_abort() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let before = r.reg.device().backend.gpu().memory().live_allocations();
    match umd.bo_create(512 << 30) {
        Ok(bo) => {
            let mut c = drm_ctx::drm::ioctl::DrmGemClose {
                handle: bo.handle,
                ..Default::default()
            };
            umd.ioctl(drm_ctx::drm::ioctl::DRM_IOCTL_GEM_CLOSE, &mut c)
                .unwrap();
            drop(bo);
        }
        Err(e) => assert_eq!(e.to_errno(), ENOMEM),
    }
    assert_eq!(
        r.reg.device().backend.gpu().memory().live_allocations(),
        before
    );
    // The device still works.
    umd.bo_create(4096).unwrap();
}

/// Defect 5: an asynchronous VM_BIND racing VM_DESTROY of its VM leaves no bind queue behind.
#[test]
#[cfg_attr(miri, ignore = "a race repeated hundreds of times")]
fn async_bind_racing_vm_destroy_leaves_no_bind_queue() {
    let r = rig();
    let dev = r.reg.device();
    let umd = Umd::open(dev).unwrap();
    let bo = umd.bo_create(0x1000).unwrap();
    for _ in 0..ROUNDS {
        let vm = umd.vm_create().unwrap();
        let op = VmBindOp {
            flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
            bo_handle: bo.handle,
            bo_offset: 0,
            va: 0x100_0000,
            size: 0x1000,
            syncs: ObjArray::default(),
        };
        let start = Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                start.wait();
                let _ = umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op]);
            });
            s.spawn(|| {
                start.wait();
                let mut d = VmDestroy { id: vm, pad: 0 };
                assert_eq!(errno(umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d)), 0);
            });
        });
        assert_eq!(
            dev.sched.bind_queue_count(),
            0,
            "a bind queue outlived its VM"
        );
    }
}

/// Suspected item: `VM_BIND` with a huge op count. Refuted as a defect: the kernel copy was
/// already a fallible reservation of `count × 48` bytes (never `× stride`), nothing is touched
/// before the ops are read, and the call fails with `ENOMEM` like panthor's `kvmalloc_array`
/// (now checked against the same `INT_MAX` bound, whatever the host's overcommit policy).
#[test]
fn vm_bind_with_a_huge_op_count_fails_cleanly() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let vm = umd.vm_create().unwrap();
    let one = umd
        .array(&[VmBindOp {
            flags: DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
            va: 0x100_0000,
            size: 0x1000,
            ..Default::default()
        }])
        .unwrap();
    for stride in [48, u32::MAX] {
        let mut a = VmBind {
            vm_id: vm,
            flags: 0,
            ops: ObjArray {
                stride,
                count: u32::MAX,
                array: one.array,
            },
        };
        let t0 = Instant::now();
        assert_eq!(errno(umd.ioctl(DRM_IOCTL_PANTHOR_VM_BIND, &mut a)), ENOMEM);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}

/// A small deterministic generator (xorshift64*), so that a failing round can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One client's random life: BOs, VMs, sync and async binds, groups, submissions, syncobjs,
/// and closing and reopening its file.
///
/// Returns how many calls succeeded.
fn client_life(dev: &tyr::driver::TyrDevice<HostBackend>, seed: u64, ops: usize) -> usize {
    let mut rng = Rng(seed | 1);
    let mut ok = 0;
    let mut umd = match Umd::open(dev) {
        Ok(u) => u,
        Err(_) => return ok, // unplugged already
    };
    let mut bos = Vec::new();
    let code = tyr::csf::instr::move32(2, 1);
    for _ in 0..ops {
        let vm = 1 + rng.below(3) as u32;
        let r: drm_ctx::Result<()> = match rng.below(10) {
            0 => umd.bo_create(0x1000 << rng.below(4)).map(|bo| {
                let _ = umd.write_stream(&bo, 0, &[code]);
                bos.push(bo);
            }),
            1 => umd.vm_create().map(|_| ()),
            2 => {
                let mut d = VmDestroy { id: vm, pad: 0 };
                umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d).map(|_| ())
            }
            3 | 4 => match bos.get(rng.below(bos.len().max(1) as u64) as usize) {
                Some(bo) => {
                    let op = VmBindOp {
                        flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
                        bo_handle: bo.handle,
                        bo_offset: 0,
                        va: 0x100_0000 + (rng.below(16) << 16),
                        size: 0x1000,
                        syncs: ObjArray::default(),
                    };
                    let flags = if rng.below(2) == 0 {
                        DRM_PANTHOR_VM_BIND_ASYNC
                    } else {
                        0
                    };
                    umd.bind(vm, flags, &[op])
                }
                None => Err(drm_ctx::Error::Invalid),
            },
            5 => umd.group_create(vm, &[0x1000; 2]).map(|_| ()),
            6 => umd.group_destroy(1 + rng.below(3) as u32),
            7 => {
                let va = 0x100_0000 + (rng.below(16) << 16);
                umd.submit(1 + rng.below(3) as u32, &[Job::new(0, va, 8)])
            }
            8 => umd.syncobj_create(rng.below(2) == 0).map(|h| {
                let _ = umd.wait(&[h], 0);
                let _ = umd.syncobj_destroy(h);
            }),
            _ => {
                bos.clear();
                drop(umd);
                umd = match Umd::open(dev) {
                    Ok(u) => u,
                    Err(_) => return ok,
                };
                Ok(())
            }
        };
        ok += usize::from(r.is_ok());
    }
    ok
}

/// Several clients create, destroy, bind, submit and close in parallel while the device is
/// unplugged at a random moment; once every client is gone nothing is left: no group, queue
/// interface, bind queue or zombie VM, and once the device is released no DMA page.
#[test]
#[cfg_attr(miri, ignore = "thousands of ioctls on several threads")]
fn parallel_clients_with_a_random_unplug_leak_nothing() {
    let rounds = 6u64;
    let mut total_ok = 0;
    for round in 0..rounds {
        let parent = device::Device::new("mali").unwrap();
        let reg = driver::probe(&parent, HostBackend::new(Config::g610())).unwrap();
        let memory = reg.device().backend.gpu().memory().clone();
        let dev = reg.device();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ round);
        // Some rounds never unplug: their clients close normally.
        let unplug_after = (round % 3 != 0).then(|| Duration::from_millis(rng.below(40)));
        let succeeded: usize = std::thread::scope(|s| {
            let clients: Vec<_> = (0..4)
                .map(|c| s.spawn(move || client_life(dev, round * 16 + c, 150)))
                .collect();
            if let Some(after) = unplug_after {
                s.spawn(move || {
                    std::thread::sleep(after);
                    dev.unplug();
                });
            }
            clients.into_iter().map(|c| c.join().unwrap()).sum()
        });
        total_ok += succeeded;
        assert!(dev.sched.group_count() == 0, "round {round}: groups left");
        assert_eq!(dev.sched.ifaces_in_use(), 0, "round {round}");
        assert_eq!(dev.sched.bind_queue_count(), 0, "round {round}");
        assert_eq!(dev.zombie_vm_count(), 0, "round {round}");
        drop(reg);
        drop(parent);
        let t0 = Instant::now();
        while memory.live_allocations() != 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "round {round}: {} DMA allocations left",
                memory.live_allocations()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // The clients did real work (most calls before the unplug succeed).
    eprintln!("{total_ok} of {} calls succeeded", rounds * 4 * 150);
    assert!(total_ok > 500, "only {total_ok} calls succeeded");
}

/// VMs and groups made and destroyed from four clients at once, in both orders (the VM first,
/// leaving a group on it; the group first), some clients closing with both still live: every
/// VM's device entry, every group and every registration of the scheduler's ordering room is
/// gone at the end, and no VM is left a zombie.
#[test]
#[cfg_attr(
    miri,
    ignore = "a probe and four threads of ioctls take minutes under Miri"
)]
fn vm_and_group_lifetimes_race_and_leave_nothing() {
    let r = rig();
    let dev = r.reg.device();
    let rounds = if cfg!(miri) { 2 } else { 40 };
    let start = Barrier::new(4);
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let start = &start;
            s.spawn(move || {
                let umd = Umd::open(dev).unwrap();
                start.wait();
                for i in 0..rounds {
                    let vm = umd.vm_create().unwrap();
                    let g = umd.group_create(vm, &[0x1000]).unwrap();
                    if (i + t) % 2 == 0 {
                        let mut d = VmDestroy { id: vm, pad: 0 };
                        assert_eq!(errno(umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d)), 0);
                        umd.group_destroy(g).unwrap();
                    } else {
                        umd.group_destroy(g).unwrap();
                        let mut d = VmDestroy { id: vm, pad: 0 };
                        assert_eq!(errno(umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d)), 0);
                    }
                }
                // Left to the file's close.
                let vm = umd.vm_create().unwrap();
                umd.group_create(vm, &[0x1000]).unwrap();
            });
        }
    });
    let shared = dev.shared();
    assert_eq!(shared.sched.group_count(), 0);
    assert_eq!(shared.sched.registered_groups(), 0);
    assert_eq!(shared.vm_count(), 0);
    assert_eq!(shared.zombie_vm_count(), 0);
}

// ---------------------------------------------------------------- issue 37

/// Issue 37, defect 1: TILER_HEAP_CREATE with `initial_chunk_count = max_chunks = u32::MAX`
/// and a valid chunk size is refused with ENOMEM (panthor's errno when its chunk allocations
/// run out) before anything is allocated for it: no 275 GB chunk table, no chunk, no pool.
#[test]
fn tiler_heap_create_with_u32_max_chunks_allocates_nothing() {
    let r = rig();
    let dev = r.reg.device();
    let umd = Umd::open(dev).unwrap();
    let vm = umd.vm_create().unwrap();
    let dma = dev.backend.gpu().memory().live_allocations();
    for size in [128 << 10, 8 << 20] {
        let (res, largest) =
            largest_block(|| umd.tiler_heap_create(vm, u32::MAX, size, u32::MAX, 0));
        assert_eq!(errno(res), ENOMEM, "chunk size {size}");
        eprintln!("chunk size {size}: largest block asked for {largest} bytes");
        assert!(
            largest < 1 << 20,
            "chunk size {size}: a {largest}-byte block was asked for"
        );
    }
    // Nothing was made: no pool, heap or chunk, no DMA memory, nothing taken from the budget.
    assert_eq!(dev.heaps.counts(), (0, 0, 0));
    assert_eq!(dev.backend.gpu().memory().live_allocations(), dma);
    assert_eq!(umd.client().file().inner().heap_budget.used(), 0);
    // Counts the budget holds are still made, up to the budget (256 MiB: 32 chunks of 8 MiB).
    umd.tiler_heap_create(vm, 16, 8 << 20, u32::MAX, 0).unwrap();
    assert_eq!(errno(umd.tiler_heap_create(vm, 17, 8 << 20, 17, 0)), ENOMEM);
    assert_eq!(dev.heaps.counts(), (1, 1, 16));
}

/// Pages of the kernel region of `vm` (48-bit VA: the top 256 MiB) that address space `slot`
/// maps, and how many of them map memory that is no longer allocated.
fn kernel_region_pages(dev: &tyr::driver::TyrDevice<HostBackend>, slot: usize) -> (usize, usize) {
    let gpu = dev.backend.gpu();
    let mem = gpu.memory().clone();
    let end = 1u64 << 48;
    gpu.with(|g| {
        let (mut mapped, mut freed) = (0, 0);
        for va in (end - (1 << 28)..end).step_by(4096) {
            if let Ok(t) = g.walk(slot, va, mali_sim::AccessType::Read) {
                mapped += 1;
                freed += usize::from(mem.allocation_of(t.pa).is_none());
            }
        }
        (mapped, freed)
    })
}

/// Issue 37, defect 4: a heap chunk whose map the MMU does not confirm (UNLOCK times out
/// after the page tables were written) is kept, not freed: afterwards no page of the VM maps
/// freed memory (before: the chunk's 2,048 pages did, read-write).
#[test]
#[cfg_attr(miri, ignore = "MMU timeouts poll the simulated clock 10^4 times")]
fn heap_chunk_whose_map_is_not_confirmed_is_kept() {
    let r = rig();
    let dev = r.reg.device();
    let umd = Umd::open(dev).unwrap();
    let vm = umd.vm_create().unwrap();
    let slot = driver::vm_activate(dev, umd.client().file(), vm).unwrap();
    // The pool (contexts) and a first heap, mapped normally.
    umd.tiler_heap_create(vm, 1, 128 << 10, 1, 0).unwrap();
    assert_eq!(kernel_region_pages(dev, slot).1, 0);
    let kept = tyr::vm::kept_pages();
    // The LOCK before the map completes, the UNLOCK after it never does.
    let gpu = dev.backend.gpu();
    gpu.with(|g| g.faults_mut().mmu_commands_before_stuck = Some(1));
    let e = errno(umd.tiler_heap_create(vm, 1, 8 << 20, 1, 0));
    gpu.with(|g| g.faults_mut().mmu_commands_before_stuck = None);
    assert_eq!(e, ETIMEDOUT);
    let (mapped, freed) = kernel_region_pages(dev, slot);
    eprintln!("after the stuck map: {mapped} kernel pages mapped, {freed} of them on freed memory");
    assert_eq!(freed, 0, "{freed} pages of the VM map freed memory");
    assert!(tyr::vm::kept_pages() >= kept + 2048);
}

/// Issue 37, defect 4: the same for a group's rings and sync page (129 pages).
#[test]
#[cfg_attr(miri, ignore = "MMU timeouts poll the simulated clock 10^4 times")]
fn group_memory_whose_map_is_not_confirmed_is_kept() {
    let r = rig();
    let dev = r.reg.device();
    let umd = Umd::open(dev).unwrap();
    let vm = umd.vm_create().unwrap();
    let slot = driver::vm_activate(dev, umd.client().file(), vm).unwrap();
    let kept = tyr::vm::kept_pages();
    let gpu = dev.backend.gpu();
    gpu.with(|g| g.faults_mut().mmu_commands_before_stuck = Some(1));
    let e = errno(umd.group_create(vm, &[0x1_0000; 8]));
    gpu.with(|g| g.faults_mut().mmu_commands_before_stuck = None);
    assert_eq!(e, ETIMEDOUT);
    let (mapped, freed) = kernel_region_pages(dev, slot);
    eprintln!("after the stuck map: {mapped} kernel pages mapped, {freed} of them on freed memory");
    assert_eq!(freed, 0, "{freed} pages of the VM map freed memory");
    assert!(tyr::vm::kept_pages() >= kept + 129);
    assert_eq!(dev.sched.group_count(), 0);
}

/// Issue 37, defect 2: with 3,072 timeline points pending (48 queues of 64 jobs, held back by
/// a point that other work holds), 63 jobs with 64 wait ops each on the last point. Each wait
/// unwraps into the 3,072 pending job fences; de-duplicated per timeline (the latest wins, as
/// `drm_sched_job_add_dependency` does), each job waits on 48 fences, one per queue, instead
/// of 196,608 (a 4.7 MB dependency table per job, 1.2 GB for the call before).
#[test]
#[cfg_attr(miri, ignore = "thousands of jobs")]
fn waits_on_a_long_pending_timeline_are_deduplicated() {
    use drm_ctx::host::syncobj::FenceRef;
    use jobqueue::host::HostFence;
    use jobqueue::SignalFence as _;
    use tyr::host::JobSyncFence;

    let r = rig();
    let dev = r.reg.device();
    let umd = Umd::open(dev).unwrap();
    let vm = umd.vm_create().unwrap();
    // Point 1 of `gate` is held back until the end.
    let gate = umd.syncobj_create(false).unwrap();
    let held = HostFence::new();
    {
        let t = umd.client().file().syncobjs();
        let f: FenceRef = std::sync::Arc::new(JobSyncFence(held.clone())).into();
        t.add_point(gate, t.alloc_point().unwrap(), f, 1).unwrap();
    }
    let tl = umd.syncobj_create(false).unwrap();
    let mut point = 0u64;
    for _ in 0..6 {
        let g = umd.group_create(vm, &[0x1000; 8]).unwrap();
        for q in 0..8 {
            let jobs: Vec<Job> = (0..64)
                .map(|_| {
                    point += 1;
                    Job::new(q, 0, 0)
                        .wait_point(gate, 1)
                        .signal_point(tl, point)
                })
                .collect();
            umd.submit(g, &jobs).unwrap();
        }
    }
    assert_eq!(point, 3072);
    let victim = umd.group_create(vm, &[0x1000]).unwrap();
    let done = umd.syncobj_create(false).unwrap();
    let jobs: Vec<Job> = (0..63)
        .map(|i| {
            // 64 sync ops a job at most: the last one signals `done` too.
            let mut j = Job::new(0, 0, 0);
            for _ in 0..64 - usize::from(i == 62) {
                j = j.wait_point(tl, point);
            }
            if i == 62 {
                j = j.signal(done);
            }
            j
        })
        .collect();
    let t0 = Instant::now();
    let (res, largest) = largest_block(|| umd.submit(victim, &jobs));
    let took = t0.elapsed();
    eprintln!(
        "63 jobs x 64 waits on point {point}: largest block {largest} bytes, submit took {took:?}"
    );
    res.unwrap();
    assert!(
        largest < 256 << 10,
        "a {largest}-byte block was asked for (dependency tables sized by pending points)"
    );
    // Everything still runs, in order, once the held point signals.
    assert!(held.signal(Ok(())));
    umd.wait(&[done], 60_000_000_000).unwrap();
    let f = umd.client().file().syncobjs().fence(done).unwrap().unwrap();
    assert_eq!(f.status(), Some(Ok(())));
}
