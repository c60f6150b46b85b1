// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Issue 37, item 3: huge binds. A `MAP_SPARSE` of 128 TiB took 8.7 s inside the call and 516 MiB
//! of page tables charged to nothing, with the device-wide address-space lock held all along
//! (another client's bind waited 8.7 s, another client's one-job submission 1.9 s instead of
//! 146 µs). Now a file's VMs hold at most `vm::MAX_PT_PAGES_PER_FILE` table pages (a bind
//! beyond fails with ENOMEM, changing nothing), and page tables are written in bounded steps
//! with the address-space lock let go between them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use drm_ctx::host::syncobj::FenceRef;
use drm_ctx::{device, drm::Registration, types::ARef};
use jobqueue::host::HostFence;
use mali_sim::Config;
use tyr::backend::Lock as _;
use tyr::driver::{self, TyrDriver};
use tyr::host::HostBackend;
use tyr::host::JobSyncFence;
use tyr::uapi::*;
use tyr::umd::{timeline_op, Job, Umd};

type Drv = TyrDriver<HostBackend>;

const ENOMEM: i32 = -12;
const TIB: u64 = 1 << 40;
const SPARSE: u32 = DRM_PANTHOR_VM_BIND_OP_TYPE_MAP
    | DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE
    | DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC;
/// The largest sparse range a file's budget admits, rounded down to TiB (15 TiB: 15,360
/// level-2 tables, 30 level-1 tables and the root, of 16,384 pages).
const LARGEST_ADMITTED: u64 = 15 * TIB;
/// Where the huge ranges start (1 GiB aligned).
const HUGE_VA: u64 = 1 << 40;
/// The sparse range the latency test binds: 3 TiB, 3,072 steps of 512 block entries (about
/// 5 s in a debug build).
const MEASURED: u64 = 3 * TIB;

/// The tests of this file run one at a time: the latency test measures waits of milliseconds
/// on a 2-core machine, which another test's terabyte bind running beside it would decide.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn rig() -> (Registration<Drv>, ARef<device::Device>) {
    let parent = device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, HostBackend::new(Config::g610())).unwrap();
    (reg, parent)
}

fn errno<T>(r: drm_ctx::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.to_errno(),
    }
}

fn sparse(va: u64, size: u64) -> VmBindOp {
    VmBindOp {
        flags: SPARSE,
        va,
        size,
        ..Default::default()
    }
}

fn unmap(va: u64, size: u64) -> VmBindOp {
    VmBindOp {
        flags: DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
        va,
        size,
        ..Default::default()
    }
}

fn mapping_count(umd: &Umd, vm: u32) -> usize {
    let vm = umd.client().file().inner().vm(vm).unwrap();
    let n = vm.guard().mapping_count();
    n
}

/// A client with a group, a BO and a syncobj, ready to bind and to submit one job.
struct Other {
    umd: Umd,
    vm: u32,
    bo: tyr::umd::Bo,
    group: u32,
}

impl Other {
    fn new(dev: &tyr::driver::TyrDevice<HostBackend>) -> Self {
        let umd = Umd::open(dev).unwrap();
        let vm = umd.vm_create().unwrap();
        let bo = umd.bo_create(0x1000).unwrap();
        let group = umd.group_create(vm, &[0x1000]).unwrap();
        let o = Other { umd, vm, bo, group };
        // Warm up: the first submission makes the group resident.
        o.bind_once(0);
        o.bind_once(DRM_PANTHOR_VM_BIND_ASYNC);
        o.submit_once();
        o
    }

    /// A map and unmap of one page, asynchronous (waited for on a syncobj) if `flags` says
    /// so; returns how long the map took.
    fn bind_once(&self, flags: u32) -> Duration {
        let mut op = VmBindOp {
            flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
            bo_handle: self.bo.handle,
            va: 0x100_0000,
            size: 0x1000,
            ..Default::default()
        };
        let t0 = Instant::now();
        if flags & DRM_PANTHOR_VM_BIND_ASYNC != 0 {
            let done = self.umd.syncobj_create(false).unwrap();
            op.syncs = self.umd.sync_ops(&[], &[done]).unwrap();
            self.umd.bind(self.vm, flags, &[op]).unwrap();
            self.umd.free_array(&op.syncs);
            self.umd.wait(&[done], 10_000_000_000).unwrap();
            self.umd.syncobj_destroy(done).unwrap();
        } else {
            self.umd.bind(self.vm, 0, &[op]).unwrap();
        }
        let took = t0.elapsed();
        self.umd
            .bind(self.vm, 0, &[unmap(0x100_0000, 0x1000)])
            .unwrap();
        took
    }

    /// Submits one job and waits for it; returns how long that took.
    fn submit_once(&self) -> Duration {
        let done = self.umd.syncobj_create(false).unwrap();
        let t0 = Instant::now();
        self.umd
            .submit(self.group, &[Job::new(0, 0, 0).signal(done)])
            .unwrap();
        self.umd.wait(&[done], 10_000_000_000).unwrap();
        let took = t0.elapsed();
        self.umd.syncobj_destroy(done).unwrap();
        took
    }
}

/// While one client's sparse bind runs, another client's bind (of the same kind: synchronous,
/// or asynchronous and waited for) and one-job submission each complete within 50 ms (the
/// bound of issue 37), and the test prints both worst cases. On the starting commit both waited for the whole bind (about a second for
/// 15 TiB in a release build).
///
/// The bind is of [`MEASURED`] rather than the largest range the budget admits, which takes
/// 27 s in a debug build: a step costs the same whatever the range, and 3 TiB gives seconds
/// of measurement (hundreds of binds and submissions) in a debug build. A 128 TiB bind is
/// refused at once (`sparse_bind_of_128_tib_is_enomem_and_changes_nothing`).
///
/// What keeps the waits short: the address-space lock is taken per step of 512 entries, host
/// locks are not starved by a thread that takes them again at once (`StdLocks`), and an
/// asynchronous bind runs on its VM's bind worker, not on the device's work item nor on
/// another VM's worker. Measured on
/// the otherwise idle 2-core machine: the other client's bind at most 11 ms and its
/// submission at most 20 ms (four runs); with `std` mutexes as the host's locks instead, 0.2
/// to 0.6 s and 0.1 to 0.6 s.
fn huge_sparse_bind_leaves_other_clients_responsive(flags: u32) {
    let _serial = serial();
    let (reg, _parent) = rig();
    let dev = reg.device();
    let other = Other::new(dev);
    let quiet_bind = other.bind_once(flags);
    let quiet_submit = other.submit_once();

    let huge = Umd::open(dev).unwrap();
    let vm = huge.vm_create().unwrap();
    let running = AtomicBool::new(true);
    let (mut binds, mut submits) = (Vec::new(), Vec::new());
    let huge_took = std::thread::scope(|s| {
        let t = s.spawn(|| {
            let t0 = Instant::now();
            let r = if flags & DRM_PANTHOR_VM_BIND_ASYNC != 0 {
                // Queued: done when its syncobj signals.
                let done = huge.syncobj_create(false).unwrap();
                let mut op = sparse(HUGE_VA, MEASURED);
                op.syncs = huge.sync_ops(&[], &[done]).unwrap();
                let r = errno(huge.bind(vm, flags, &[op]));
                huge.free_array(&op.syncs);
                if r == 0 {
                    errno(huge.wait(&[done], 600_000_000_000))
                } else {
                    r
                }
            } else {
                errno(huge.bind(vm, flags, &[sparse(HUGE_VA, MEASURED)]))
            };
            let took = t0.elapsed();
            running.store(false, Ordering::Release);
            (r, took)
        });
        // Let the bind get going, then measure the other client until it is over.
        std::thread::sleep(Duration::from_millis(20));
        while running.load(Ordering::Acquire) {
            binds.push(other.bind_once(flags));
            if !running.load(Ordering::Acquire) {
                break;
            }
            submits.push(other.submit_once());
        }
        t.join().unwrap()
    });
    let max = |v: &[Duration]| v.iter().max().copied().unwrap_or_default();
    let how = if flags & DRM_PANTHOR_VM_BIND_ASYNC != 0 {
        "asynchronous"
    } else {
        "synchronous"
    };
    println!(
        "{} TiB {how} sparse bind took {:?}; meanwhile the other client's bind took at most \
         {:?} ({} binds; {:?} when idle), its one-job submission at most {:?} ({} jobs; {:?} \
         when idle)",
        MEASURED / TIB,
        huge_took.1,
        max(&binds),
        binds.len(),
        quiet_bind,
        max(&submits),
        submits.len(),
        quiet_submit,
    );
    assert_eq!(huge_took.0, 0);
    assert!(
        !binds.is_empty() && !submits.is_empty(),
        "nothing measured during the bind"
    );
    assert!(
        max(&binds) < Duration::from_millis(50),
        "bind waited {:?}",
        max(&binds)
    );
    assert!(
        max(&submits) < Duration::from_millis(50),
        "submission waited {:?}",
        max(&submits)
    );
    assert_eq!(mapping_count(&huge, vm), 1);
}

/// [`huge_sparse_bind_leaves_other_clients_responsive`] with a synchronous bind.
#[test]
#[cfg_attr(miri, ignore = "a bind of terabytes")]
fn huge_synchronous_sparse_bind_leaves_other_clients_responsive() {
    huge_sparse_bind_leaves_other_clients_responsive(0);
}

/// [`huge_sparse_bind_leaves_other_clients_responsive`] with asynchronous binds (each VM's on
/// its own worker; before, a bind held the device's work item, and with it every submission
/// and every other VM's bind).
#[test]
#[cfg_attr(miri, ignore = "a bind of terabytes")]
fn huge_asynchronous_sparse_bind_leaves_other_clients_responsive() {
    huge_sparse_bind_leaves_other_clients_responsive(DRM_PANTHOR_VM_BIND_ASYNC);
}

/// A 128 TiB sparse bind is more than a file's page-table budget holds: ENOMEM before anything
/// changes (no mapping, no page table, the budget as it was), and quickly. On the starting
/// commit it succeeded after seconds, with 516 MiB of page tables.
#[test]
#[cfg_attr(miri, ignore = "a bind of terabytes")]
fn sparse_bind_of_128_tib_is_enomem_and_changes_nothing() {
    let _serial = serial();
    let (reg, _parent) = rig();
    let umd = Umd::open(reg.device()).unwrap();
    let vm = umd.vm_create().unwrap();
    // A small sparse range first, so that the file has its backing and the VM some tables.
    umd.bind(vm, 0, &[sparse(0x20_0000, 0x20_0000)]).unwrap();
    let pages = reg.device().backend.gpu().memory().live_allocations();
    let t0 = Instant::now();
    let r = errno(umd.bind(vm, 0, &[sparse(0, 128 * TIB)]));
    let took = t0.elapsed();
    println!("128 TiB sparse bind: errno {r} after {took:?}");
    assert_eq!(r, ENOMEM);
    assert!(took < Duration::from_millis(100), "took {took:?}");
    assert_eq!(mapping_count(&umd, vm), 1);
    assert_eq!(
        reg.device().backend.gpu().memory().live_allocations(),
        pages
    );
    // The same asynchronously: refused when queued.
    let r = errno(umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[sparse(0, 128 * TIB)]));
    assert_eq!(r, ENOMEM);
    assert_eq!(mapping_count(&umd, vm), 1);
    assert_eq!(
        reg.device().backend.gpu().memory().live_allocations(),
        pages
    );
    assert_eq!(umd.vm_state(vm).unwrap(), DRM_PANTHOR_VM_STATE_USABLE);
    // A range that fits still binds.
    umd.bind(vm, 0, &[sparse(HUGE_VA, TIB)]).unwrap();
    assert_eq!(mapping_count(&umd, vm), 2);
}

/// The budget comes back: a bind of the largest range admitted, its unmap, and the same bind
/// again succeed; the budget is shared by the file's VMs; destroying a VM and closing the file
/// return every page. (An unmap frees the tables it covers at their own level; tables it only
/// empties stay with the VM, as `io-pgtable-arm` keeps them, and are reused by the next bind
/// of the range: they go back to the budget with the VM.)
#[test]
#[cfg_attr(miri, ignore = "a bind of terabytes")]
fn page_table_budget_is_returned() {
    let _serial = serial();
    let (reg, _parent) = rig();
    let umd = Umd::open(reg.device()).unwrap();
    let budget = umd.client().file().inner().pt_budget.clone();
    assert_eq!(budget.limit(), tyr::vm::MAX_PT_PAGES_PER_FILE);
    let vm = umd.vm_create().unwrap();
    assert_eq!(budget.used(), 1, "the root table");
    let vm2 = umd.vm_create().unwrap();
    umd.bind(vm2, 0, &[sparse(HUGE_VA, LARGEST_ADMITTED)])
        .unwrap();
    let full = budget.used();
    assert!(full > 15_000, "{full}");
    // The other VM of the file cannot have a tenth as much.
    assert_eq!(
        errno(umd.bind(vm, 0, &[sparse(HUGE_VA, LARGEST_ADMITTED / 10)])),
        ENOMEM
    );
    assert_eq!(budget.used(), full);
    // Destroying the VM returns its pages.
    let mut d = VmDestroy { id: vm2, pad: 0 };
    assert_eq!(errno(umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d)), 0);
    assert_eq!(budget.used(), 1);
    // Bind, unbind, bind again, synchronously and asynchronously. (A bind sets aside the
    // tables of its worst case, not counting those the range still has, which an unmap
    // empties but keeps: 6 TiB twice fits.)
    let six = 6 * TIB;
    umd.bind(vm, 0, &[sparse(HUGE_VA, six)]).unwrap();
    let used = budget.used();
    for _ in 0..2 {
        umd.bind(vm, 0, &[unmap(HUGE_VA, six)]).unwrap();
        assert!(budget.used() <= used);
        umd.bind(vm, 0, &[sparse(HUGE_VA, six)]).unwrap();
        assert_eq!(budget.used(), used);
    }
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[unmap(HUGE_VA, six)])
        .unwrap();
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[sparse(HUGE_VA, six)])
        .unwrap();
    let t0 = Instant::now();
    while budget.used() != used && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(budget.used(), used);
    assert_eq!(mapping_count(&umd, vm), 1);
    drop(umd);
    assert_eq!(budget.used(), 0, "closing the file returned every page");
}

/// Four threads on two files race for their files' page-table budgets: each queues an
/// asynchronous sparse bind of 9 TiB behind a syncobj that never signals (the pages of its worst
/// case are charged when it is queued, and two of them do not fit in one file's budget), binds
/// and unbinds small sparse ranges and a BO synchronously on a second VM, then destroys both
/// VMs (which cancels the queued bind). Meanwhile a monitor checks that no file ever holds more
/// than its budget. At the end every budget is back to zero and no page-table page is left.
#[test]
#[cfg_attr(miri, ignore = "threads and terabytes")]
fn page_table_budget_races_leave_nothing_behind() {
    let _serial = serial();
    const HELD: u64 = 9 * TIB;
    const ROUNDS: usize = 12;
    let (reg, _parent) = rig();
    let dev = reg.device();
    let files = [Umd::open(dev).unwrap(), Umd::open(dev).unwrap()];
    let budgets: Vec<_> = files
        .iter()
        .map(|u| u.client().file().inner().pt_budget.clone())
        .collect();
    // Each file's sparse backing is made at its first sparse bind and kept: make it first.
    for umd in &files {
        let vm = umd.vm_create().unwrap();
        umd.bind(vm, 0, &[sparse(0x20_0000, 0x20_0000)]).unwrap();
        let mut d = VmDestroy { id: vm, pad: 0 };
        assert_eq!(errno(umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d)), 0);
    }
    // Per thread: its file, a gate that never signals and a BO.
    let mine: Vec<_> = (0..4)
        .map(|t| {
            let umd = &files[t % 2];
            let h = umd.syncobj_create(false).unwrap();
            let t = umd.client().file().syncobjs();
            let gate = HostFence::new();
            let f: FenceRef = Arc::new(JobSyncFence(gate.clone())).into();
            t.add_point(h, t.alloc_point().unwrap(), f, 1).unwrap();
            (umd, h, gate, umd.bo_create(0x1_0000).unwrap())
        })
        .collect();
    for b in &budgets {
        assert_eq!(b.used(), 0);
    }
    let memory = || dev.backend.gpu().memory().live_allocations();
    let pages = memory();

    let running = AtomicBool::new(true);
    let t0 = Instant::now();
    let (queued, refused, peak) = std::thread::scope(|s| {
        let monitor = s.spawn(|| {
            let mut peak = 0;
            while running.load(Ordering::Acquire) {
                for b in &budgets {
                    let used = b.used();
                    assert!(used <= b.limit(), "{used} pages over the budget");
                    peak = peak.max(used);
                }
                std::thread::yield_now();
            }
            peak
        });
        let workers: Vec<_> = mine
            .iter()
            .map(|(umd, gate, _held, bo)| {
                s.spawn(move || {
                    let (mut queued, mut refused) = (0, 0);
                    for round in 0..ROUNDS {
                        let held = umd.vm_create().unwrap();
                        let small = umd.vm_create().unwrap();
                        let op = VmBindOp {
                            syncs: umd.array(&[timeline_op(false, *gate, 1)]).unwrap(),
                            ..sparse(HUGE_VA, HELD)
                        };
                        match errno(umd.bind(held, DRM_PANTHOR_VM_BIND_ASYNC, &[op])) {
                            0 => queued += 1,
                            ENOMEM => refused += 1,
                            e => panic!("queued bind: errno {e}"),
                        }
                        umd.free_array(&op.syncs);
                        // Small synchronous binds and unbinds on the other VM.
                        let va = 0x1_0000_0000 + round as u64 * 0x4000_0000;
                        umd.bind(small, 0, &[sparse(va, 0x8000_0000)]).unwrap();
                        umd.map(small, bo, 0x100_0000).unwrap();
                        umd.bind(small, 0, &[unmap(va + 0x1000, 0x20_0000)])
                            .unwrap();
                        umd.bind(small, 0, &[unmap(0x100_0000, bo.size)]).unwrap();
                        // Destroyed in either order: the queued bind is cancelled.
                        let order = if round % 2 == 0 {
                            [held, small]
                        } else {
                            [small, held]
                        };
                        for id in order {
                            let mut d = VmDestroy { id, pad: 0 };
                            assert_eq!(errno(umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d)), 0);
                        }
                    }
                    (queued, refused)
                })
            })
            .collect();
        let results: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        running.store(false, Ordering::Release);
        let (mut queued, mut refused) = (0, 0);
        for r in results {
            let (q, r) = r.unwrap();
            queued += q;
            refused += r;
        }
        (queued, refused, monitor.join().unwrap())
    });
    println!(
        "{queued} huge binds queued, {refused} refused (ENOMEM), peak {peak} of {} pages, {:?}",
        tyr::vm::MAX_PT_PAGES_PER_FILE,
        t0.elapsed()
    );
    assert_eq!(queued + refused, 4 * ROUNDS);
    assert!(queued > 0);
    // Cancelled binds give their pages back once their jobs are dropped.
    let t1 = Instant::now();
    while budgets.iter().any(|b| b.used() != 0) && t1.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    for b in &budgets {
        assert_eq!(b.used(), 0, "the budget is back to zero");
    }
    assert_eq!(memory(), pages, "no page-table page left behind");
}

/// The threads of the host's bind workers (`tyr-binds`) now alive in this process.
fn bind_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.trim() == "tyr-binds")
                })
                .count()
        })
        .unwrap_or(0)
}

/// Waits up to 5 s for `bind_threads()` to come down to `n` (a worker ends just after its
/// queue goes); returns the last count.
fn bind_threads_settle(n: usize) -> usize {
    let t0 = Instant::now();
    loop {
        let now = bind_threads();
        if now <= n || t0.elapsed() > Duration::from_secs(5) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Bind workers are made with a VM's first asynchronous bind and go with the VM: four threads
/// on two files create VMs, queue asynchronous binds, and destroy the VMs (some with binds
/// still queued) or close their file, racing each other. Afterwards no bind queue and no
/// worker thread is left.
#[test]
#[cfg_attr(miri, ignore = "threads counted through /proc")]
fn bind_workers_race_vm_destroy_and_leave_none_behind() {
    let _serial = serial();
    let before = bind_threads_settle(0);
    let (reg, _parent) = rig();
    let dev = reg.device();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            s.spawn(move || {
                let umd = Umd::open(dev).unwrap();
                let bo = umd.bo_create(0x1000).unwrap();
                for round in 0..12u64 {
                    let vm = umd.vm_create().unwrap();
                    let done = umd.syncobj_create(false).unwrap();
                    for i in 0..4u64 {
                        let mut op = VmBindOp {
                            flags: DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
                            bo_handle: bo.handle,
                            va: 0x100_0000 + i * 0x1000,
                            size: 0x1000,
                            ..Default::default()
                        };
                        op.syncs = umd.sync_ops(&[], &[done]).unwrap();
                        let r = umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op]);
                        umd.free_array(&op.syncs);
                        r.unwrap();
                    }
                    if (t + round) % 2 == 0 {
                        umd.wait(&[done], 10_000_000_000).unwrap();
                    }
                    let mut d = VmDestroy { id: vm, pad: 0 };
                    assert_eq!(errno(umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d)), 0);
                    umd.syncobj_destroy(done).unwrap();
                }
                // The last round's VM is left to the file's close.
                let vm = umd.vm_create().unwrap();
                umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[unmap(0x100_0000, 0x1000)])
                    .unwrap();
            });
        }
    });
    assert_eq!(dev.shared().sched.bind_queue_count(), 0);
    assert_eq!(
        bind_threads_settle(before),
        before,
        "bind worker threads left"
    );
}
