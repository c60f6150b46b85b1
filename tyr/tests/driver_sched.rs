// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Groups and submissions end to end, through the ioctl layer only: jobs that compute
//! something checkable, dependencies through syncobjs, many groups and VMs, timeouts with a
//! GPU reset (also one that fails once), page faults, an instruction the GPU does not run, and
//! the errors of malformed submissions.

use drm_ctx::device;
use drm_ctx::drm::Registration;
use drm_ctx::types::ARef;
use mali_sim::Config;
use tyr::backend::Lock as _;
use tyr::csf::instr;
use tyr::driver::{self, TyrDriver};
use tyr::host::{HostBackend, HostTime};
use tyr::uapi::*;
use tyr::umd::{Bo, Job, Umd};

const EINVAL: i32 = -22;
const ENOENT: i32 = -2;
const ECANCELED: i32 = -125;
const ENODEV: i32 = -19;
const EFAULT: i32 = -14;
const ETIMEDOUT: i32 = -110;
const WAIT: i64 = 600_000_000_000;
/// Scale of the longer scenarios (Miri interprets every simulated instruction).
const SCALE: u64 = if cfg!(miri) { 1 } else { 10 };

type Drv = TyrDriver<HostBackend>;

struct Rig {
    reg: Registration<Drv>,
    _parent: ARef<device::Device>,
}

fn rig() -> Rig {
    rig_on(HostBackend::new(Config::g610()))
}

/// A rig whose driver's deadlines are on simulated time: the hang tests go through the 5 s
/// job timeout as fast as the host computes it (`tests/driver_time.rs` times it on real time).
fn rig_simulated() -> Rig {
    rig_on(HostBackend::new(Config::g610()).with_time(HostTime::Simulated))
}

fn rig_on(backend: HostBackend) -> Rig {
    let parent = device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, backend).unwrap();
    Rig {
        reg,
        _parent: parent,
    }
}

fn errno<T>(r: drm_ctx::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Status of the fence a syncobj holds: `None` pending, `Some(0)` or `Some(-errno)`.
fn fence_status(umd: &Umd, h: u32) -> Option<i32> {
    let f = umd.client().file().syncobjs().fence(h).unwrap()?;
    f.status().map(|r| r.err().unwrap_or(0))
}

/// A VM with one BO mapped at `va`, holding code at offset 0 and data at `DATA`.
struct Space {
    vm: u32,
    bo: Bo,
    va: u64,
}

const DATA: u64 = 0x8000;

fn space(umd: &Umd, va: u64) -> Space {
    let vm = umd.vm_create().unwrap();
    let bo = umd.bo_create(0x10000).unwrap();
    umd.map(vm, &bo, va).unwrap();
    Space { vm, bo, va }
}

/// A stream at `code` that adds `add` to the u32 at `data` (load, add, store).
fn add_stream(umd: &Umd, s: &Space, code: u64, data: u64, add: i32) -> (u64, u32) {
    let prog = [
        instr::move48(0, s.va + data),
        instr::load_multiple(2, 0, 0, 1),
        instr::wait(1),
        instr::add_imm32(2, 2, add),
        instr::store_multiple(2, 0, 0, 1),
    ];
    umd.write_stream(&s.bo, code, &prog).unwrap();
    (s.va + code, (prog.len() * 8) as u32)
}

#[test]
fn chain_of_dependent_jobs_computes_in_order() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd, 0x100_0000);
    let g = umd.group_create(s.vm, &[0x1000, 0x1000]).unwrap();
    // value = ((0 + 1) * 2 ...) is built from adds: each job reads what the previous wrote.
    let mut prev = None;
    let mut last = 0;
    for i in 0..2 * SCALE {
        let (addr, size) = add_stream(&umd, &s, i * 64, DATA, i as i32 + 1);
        let done = umd.syncobj_create(false).unwrap();
        let mut job = Job::new((i % 2) as u32, addr, size).signal(done);
        if let Some(p) = prev {
            job = job.wait(p);
        }
        umd.submit(g, &[job]).unwrap();
        prev = Some(done);
        last = done;
    }
    umd.wait(&[last], WAIT).unwrap();
    assert_eq!(
        s.bo.read_u32(DATA).unwrap(),
        (1..=2 * SCALE as u32).sum::<u32>()
    );
    assert_eq!(fence_status(&umd, last), Some(0));
    assert_eq!(umd.group_state(g).unwrap(), (0, 0));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the chain test covers this path there"
)]
fn jobs_of_one_submission_depend_on_each_other_and_on_cpu_signals() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd, 0x200_0000);
    let g = umd.group_create(s.vm, &[0x1000, 0x2000, 0x4000]).unwrap();
    // Waiting on a syncobj that never received a fence is refused (binary syncobjs).
    let empty = umd.syncobj_create(false).unwrap();
    let (s1, n1) = add_stream(&umd, &s, 0, DATA, 5);
    assert_eq!(
        errno(umd.submit(g, &[Job::new(0, s1, n1).wait(empty)])),
        EINVAL
    );
    // A syncobj signalled from the CPU can be waited on.
    umd.syncobj_signal(&[empty]).unwrap();
    let a = umd.syncobj_create(false).unwrap();
    let b = umd.syncobj_create(false).unwrap();
    let (s2, n2) = add_stream(&umd, &s, 64, DATA + 4, 7);
    let copy = [
        instr::move48(0, s.va + DATA),
        instr::load_multiple(2, 0, 0, 1),
        instr::wait(1),
        instr::move48(4, s.va + DATA + 8),
        instr::store_multiple(2, 4, 0, 1),
    ];
    umd.write_stream(&s.bo, 128, &copy).unwrap();
    // Job 1 waits for the CPU's signal, job 2 (another queue) for job 1 through `a` in the
    // same submission, job 3 copies the result once both are done.
    umd.submit(
        g,
        &[
            Job::new(0, s1, n1).wait(empty).signal(a),
            Job::new(2, s2, n2).wait(a).signal(b),
            Job::new(1, s.va + 128, 40).wait(b).signal(b),
        ],
    )
    .unwrap();
    umd.wait(&[b], WAIT).unwrap();
    assert_eq!(s.bo.read_u32(DATA).unwrap(), 5);
    assert_eq!(s.bo.read_u32(DATA + 4).unwrap(), 7);
    assert_eq!(s.bo.read_u32(DATA + 8).unwrap(), 5);
    // A sync-only job (no stream) orders too.
    let c = umd.syncobj_create(false).unwrap();
    umd.submit(g, &[Job::new(1, 0, 0).wait(b).signal(c)])
        .unwrap();
    umd.wait(&[c], WAIT).unwrap();
    assert_eq!(fence_status(&umd, c), Some(0));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the chain test covers this path there"
)]
fn many_groups_and_vms_share_the_eight_slots() {
    let r = rig();
    let umds: Vec<Umd> = (0..3).map(|_| Umd::open(r.reg.device()).unwrap()).collect();
    let mut spaces = Vec::new();
    let mut work = Vec::new();
    for (c, umd) in umds.iter().enumerate() {
        for v in 0..(if cfg!(miri) { 1 } else { 3 }) {
            let s = space(umd, 0x400_0000 + v * 0x10_0000);
            for k in 0..2u64 {
                let g = umd.group_create(s.vm, &[0x1000]).unwrap();
                let mut last = 0;
                for j in 0..5u64 {
                    let (addr, size) = add_stream(umd, &s, (k * 8 + j) * 64, DATA + 4 * k, 3);
                    last = umd.syncobj_create(false).unwrap();
                    umd.submit(g, &[Job::new(0, addr, size).signal(last)])
                        .unwrap();
                }
                work.push((c, g, last));
            }
            spaces.push(s);
        }
    }
    // 18 groups in 9 VMs over 8 group slots and 7 address spaces: all of them finish.
    for (c, g, last) in &work {
        umds[*c].wait(&[*last], WAIT).unwrap();
        assert_eq!(umds[*c].group_state(*g).unwrap(), (0, 0));
    }
    for s in &spaces {
        assert_eq!(s.bo.read_u32(DATA).unwrap(), 15);
        assert_eq!(s.bo.read_u32(DATA + 4).unwrap(), 15);
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the chain test covers this path there"
)]
fn a_hanging_job_times_out_the_gpu_resets_and_innocent_groups_complete() {
    let modes: &[bool] = if cfg!(miri) { &[true] } else { &[false, true] };
    for &fail_reset_once in modes {
        let r = rig_simulated();
        let gpu = r.reg.device().backend.gpu().clone();
        let umd = Umd::open(r.reg.device()).unwrap();
        let s = space(&umd, 0x100_0000);
        let other = space(&umd, 0x200_0000);
        let guilty = umd.group_create(s.vm, &[0x1000]).unwrap();
        // The innocent group works on its second queue (stream 1 of its slot).
        let innocent = umd.group_create(other.vm, &[0x1000, 0x1000]).unwrap();
        if fail_reset_once {
            // Stream 0 hangs in every slot, wherever the groups land: the innocent group may
            // hold a slot at reset time and be given another afterwards.
            gpu.with(|g| (0..8).for_each(|n| g.set_stream_hang(n, 0, true)));
        } else {
            // The guilty group gets slot 0 (the first with work); its stream hangs.
            gpu.with(|g| g.set_stream_hang(0, 0, true));
        }
        if fail_reset_once {
            gpu.with(|g| g.fail_next_reset());
        }
        let (addr, size) = add_stream(&umd, &s, 0, DATA, 1);
        let hung = umd.syncobj_create(false).unwrap();
        let behind = umd.syncobj_create(false).unwrap();
        // Both in one submission: the timeout may come as soon as the first is on the ring.
        umd.submit(
            guilty,
            &[
                Job::new(0, addr, size).signal(hung),
                Job::new(0, addr, size).signal(behind),
            ],
        )
        .unwrap();
        // The innocent group has a long chain in flight when the reset comes.
        let mut chain = Vec::new();
        for j in 0..3 * SCALE {
            let (a, n) = add_stream(&umd, &other, j * 64, DATA, 2);
            let h = umd.syncobj_create(false).unwrap();
            let job = match chain.last() {
                Some(p) => Job::new(1, a, n).wait(*p),
                None => Job::new(1, a, n),
            };
            umd.submit(innocent, &[job.signal(h)]).unwrap();
            chain.push(h);
        }
        umd.wait(&[hung, behind], WAIT).unwrap();
        umd.wait(&chain, WAIT).unwrap();
        assert_eq!(fence_status(&umd, hung), Some(ETIMEDOUT));
        assert_eq!(fence_status(&umd, behind), Some(ECANCELED));
        for h in &chain {
            assert_eq!(fence_status(&umd, *h), Some(0));
        }
        // Replayed jobs ran exactly once from the GPU's point of view of the result.
        assert_eq!(other.bo.read_u32(DATA).unwrap(), 6 * SCALE as u32);
        assert_eq!(
            umd.group_state(guilty).unwrap().0 & DRM_PANTHOR_GROUP_STATE_TIMEDOUT,
            DRM_PANTHOR_GROUP_STATE_TIMEDOUT
        );
        assert_eq!(umd.group_state(innocent).unwrap(), (0, 0));
        // The guilty group refuses new work (EINVAL, as panthor); the innocent one goes on.
        assert_eq!(
            errno(umd.submit(guilty, &[Job::new(0, addr, size)])),
            EINVAL
        );
        let more = umd.syncobj_create(false).unwrap();
        let (a, n) = add_stream(&umd, &other, 0x4000, DATA, 100);
        umd.submit(innocent, &[Job::new(0, a, n).signal(more)])
            .unwrap();
        umd.wait(&[more], WAIT).unwrap();
        assert_eq!(other.bo.read_u32(DATA).unwrap(), 6 * SCALE as u32 + 100);
        let resets = r
            .reg
            .device()
            .sched
            .shared
            .resets
            .load(std::sync::atomic::Ordering::Acquire);
        assert_eq!(resets, 1);
        let completed = gpu.with(|g| g.resets_completed());
        // Probe's reset, then the recovery (whose first attempt may have been swallowed).
        assert_eq!(completed, 2);
        assert_eq!(umd.vm_state(s.vm).unwrap(), DRM_PANTHOR_VM_STATE_USABLE);
    }
}

/// A word whose opcode the architecture does not define (10, between `FINISH_TILING` and
/// `FINISH_FRAGMENT`) reaches the driver as a fatal stream error (`CS_INSTR_INVALID`), as on
/// silicon: the job fails, its group is marked faulty, other groups go on.
#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the chain test covers this path there"
)]
fn an_opcode_the_gpu_does_not_run_fails_the_job_and_its_group() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd, 0x100_0000);
    let bad_group = umd.group_create(s.vm, &[0x1000]).unwrap();
    let jump = 10u64 << 56;
    let prog = [
        instr::move48(0, s.va + DATA),
        instr::move32(2, 7),
        jump,
        instr::store_multiple(2, 0, 0, 1),
    ];
    umd.write_stream(&s.bo, 0, &prog).unwrap();
    let f = umd.syncobj_create(false).unwrap();
    umd.submit(bad_group, &[Job::new(0, s.va, 32).signal(f)])
        .unwrap();
    umd.wait(&[f], WAIT).unwrap();
    assert_eq!(fence_status(&umd, f), Some(EFAULT));
    assert_eq!(
        umd.group_state(bad_group).unwrap(),
        (DRM_PANTHOR_GROUP_STATE_FATAL_FAULT, 1 << 0)
    );
    // Nothing after the bad word ran.
    assert_eq!(s.bo.read_u32(DATA).unwrap(), 0);
    // The VM is not at fault and another group on it works.
    assert_eq!(umd.vm_state(s.vm).unwrap(), DRM_PANTHOR_VM_STATE_USABLE);
    let good_group = umd.group_create(s.vm, &[0x1000]).unwrap();
    let (a, n) = add_stream(&umd, &s, 0x100, DATA, 5);
    let ok = umd.syncobj_create(false).unwrap();
    umd.submit(good_group, &[Job::new(0, a, n).signal(ok)])
        .unwrap();
    umd.wait(&[ok], WAIT).unwrap();
    assert_eq!(fence_status(&umd, ok), Some(0));
    assert_eq!(s.bo.read_u32(DATA).unwrap(), 5);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the chain test covers this path there"
)]
fn a_page_fault_fails_the_job_and_makes_only_its_vm_unusable() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let bad = space(&umd, 0x100_0000);
    let good = space(&umd, 0x200_0000);
    let gb = umd.group_create(bad.vm, &[0x1000, 0x1000]).unwrap();
    let gg = umd.group_create(good.vm, &[0x1000]).unwrap();
    // A store to an address nothing maps.
    let prog = [
        instr::move48(0, 0x7000_0000),
        instr::move32(2, 1),
        instr::store_multiple(2, 0, 0, 1),
    ];
    umd.write_stream(&bad.bo, 0, &prog).unwrap();
    let f1 = umd.syncobj_create(false).unwrap();
    let f2 = umd.syncobj_create(false).unwrap();
    umd.submit(
        gb,
        &[
            Job::new(1, bad.va, 24).signal(f1),
            Job::new(1, bad.va, 24).signal(f2),
        ],
    )
    .unwrap();
    let (a, n) = add_stream(&umd, &good, 0, DATA, 9);
    let ok = umd.syncobj_create(false).unwrap();
    umd.submit(gg, &[Job::new(0, a, n).signal(ok)]).unwrap();
    umd.wait(&[f1, f2, ok], WAIT).unwrap();
    assert_eq!(fence_status(&umd, f1), Some(EFAULT));
    assert_eq!(fence_status(&umd, f2), Some(ECANCELED));
    assert_eq!(fence_status(&umd, ok), Some(0));
    assert_eq!(umd.vm_state(bad.vm).unwrap(), DRM_PANTHOR_VM_STATE_UNUSABLE);
    assert_eq!(umd.vm_state(good.vm).unwrap(), DRM_PANTHOR_VM_STATE_USABLE);
    assert_eq!(
        umd.group_state(gb).unwrap(),
        (DRM_PANTHOR_GROUP_STATE_FATAL_FAULT, 1 << 1)
    );
    assert_eq!(umd.group_state(gg).unwrap(), (0, 0));
    assert_eq!(errno(umd.submit(gb, &[Job::new(0, 0, 0)])), EINVAL);
    // A new group cannot be created on the unusable VM; the good VM goes on.
    assert_eq!(errno(umd.group_create(bad.vm, &[0x1000])), EINVAL);
    let ok2 = umd.syncobj_create(false).unwrap();
    umd.submit(gg, &[Job::new(0, a, n).signal(ok2)]).unwrap();
    umd.wait(&[ok2], WAIT).unwrap();
    assert_eq!(good.bo.read_u32(DATA).unwrap(), 18);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the chain test covers this path there"
)]
fn malformed_submissions_fail_with_the_right_errno_and_change_nothing() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd, 0x100_0000);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    let pending = umd.syncobj_create(false).unwrap();
    let sig = umd.syncobj_create(true).unwrap();
    let (a, n) = add_stream(&umd, &s, 0, DATA, 1);
    let cases: Vec<(&str, Job, i32)> = vec![
        ("unaligned stream", Job::new(0, a + 8, n), EINVAL),
        ("size not in instructions", Job::new(0, a, n + 4), EINVAL),
        ("address without size", Job::new(0, a, 0), EINVAL),
        (
            "too many instructions",
            Job::new(0, a, (1 << 20) + 8),
            EINVAL,
        ),
        ("unknown queue", Job::new(1, a, n), EINVAL),
        ("unknown wait syncobj", Job::new(0, a, n).wait(99), ENOENT),
        (
            "unknown signal syncobj",
            Job::new(0, a, n).signal(99),
            EINVAL,
        ),
        (
            "wait on an empty syncobj",
            Job::new(0, a, n).wait(pending),
            EINVAL,
        ),
    ];
    for (what, job, want) in cases {
        // A good job first in the same submission: nothing of it may remain either.
        let good = Job::new(0, a, n).wait(sig).signal(sig);
        assert_eq!(errno(umd.submit(g, &[good, job])), want, "{what}");
        assert_eq!(fence_status(&umd, sig), Some(0), "{what}");
    }
    // Bad arrays and fields.
    let mut arg = GroupSubmit {
        group_handle: g,
        pad: 1,
        queue_submits: ObjArray::default(),
    };
    assert_eq!(
        errno(umd.ioctl(DRM_IOCTL_PANTHOR_GROUP_SUBMIT, &mut arg)),
        EINVAL
    );
    arg.pad = 0;
    arg.queue_submits = ObjArray {
        stride: 8,
        count: 1,
        array: 0x1000,
    };
    assert_eq!(
        errno(umd.ioctl(DRM_IOCTL_PANTHOR_GROUP_SUBMIT, &mut arg)),
        EINVAL
    );
    arg.group_handle = 77;
    arg.queue_submits = ObjArray::default();
    assert_eq!(
        errno(umd.ioctl(DRM_IOCTL_PANTHOR_GROUP_SUBMIT, &mut arg)),
        EINVAL
    );
    // A binary sync op with a point is refused (timeline ops are tested in driver_timeline.rs).
    let mut bad_sync = umd.sync_ops(&[], &[sig]).unwrap();
    let op = SyncOp {
        flags: DRM_PANTHOR_SYNC_OP_SIGNAL | DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ,
        handle: sig,
        timeline_value: 1,
    };
    bad_sync = umd
        .array(&[op])
        .map(|a| ObjArray { ..a })
        .unwrap_or(bad_sync);
    let qs = QueueSubmit {
        queue_index: 0,
        stream_size: n,
        stream_addr: a,
        syncs: bad_sync,
        ..Default::default()
    };
    let mut arg = GroupSubmit {
        group_handle: g,
        pad: 0,
        queue_submits: umd.array(&[qs]).unwrap(),
    };
    assert_eq!(
        errno(umd.ioctl(DRM_IOCTL_PANTHOR_GROUP_SUBMIT, &mut arg)),
        EINVAL
    );
    // Nothing was queued by any of the above: the data is untouched after a real job.
    let done = umd.syncobj_create(false).unwrap();
    umd.submit(g, &[Job::new(0, a, n).signal(done)]).unwrap();
    umd.wait(&[done], WAIT).unwrap();
    assert_eq!(s.bo.read_u32(DATA).unwrap(), 1);
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the chain test covers this path there"
)]
fn destroyed_groups_and_unplugged_devices_refuse_work_and_signal_everything() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd, 0x100_0000);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    let (a, n) = add_stream(&umd, &s, 0, DATA, 1);
    let mut fences = Vec::new();
    for _ in 0..4 * SCALE {
        let h = umd.syncobj_create(false).unwrap();
        umd.submit(g, &[Job::new(0, a, n).signal(h)]).unwrap();
        fences.push(h);
    }
    umd.group_destroy(g).unwrap();
    // Whatever had not run is cancelled: every fence has signalled when destroy returns.
    for h in &fences {
        let st = fence_status(&umd, *h);
        assert!(st == Some(0) || st == Some(ECANCELED), "{st:?}");
    }
    assert_eq!(errno(umd.submit(g, &[Job::new(0, a, n)])), EINVAL);
    assert_eq!(errno(umd.group_destroy(g)), EINVAL);
    assert_eq!(errno(umd.group_state(g)), EINVAL);
    // Bad group creations.
    assert_eq!(errno(umd.group_create(s.vm, &[0x800])), EINVAL);
    assert_eq!(errno(umd.group_create(s.vm, &[0x3000])), EINVAL);
    assert_eq!(errno(umd.group_create(s.vm, &[0x2_0000])), EINVAL);
    assert_eq!(errno(umd.group_create(99, &[0x1000])), EINVAL);
    assert_eq!(errno(umd.group_create(s.vm, &[0x1000; 9])), EINVAL);
    assert_eq!(errno(umd.group_create(s.vm, &[])), EINVAL);
    // Work still queued when the device goes away is cancelled.
    let g2 = umd.group_create(s.vm, &[0x1000]).unwrap();
    let mut held = Vec::new();
    for _ in 0..4 * SCALE {
        let h = umd.syncobj_create(false).unwrap();
        umd.submit(g2, &[Job::new(0, a, n).signal(h)]).unwrap();
        held.push(umd.client().file().syncobjs().fence(h).unwrap().unwrap());
    }
    drop(umd);
    drop(r);
    for f in held {
        let st = f.status();
        assert!(st == Some(Ok(())) || st == Some(Err(ECANCELED)), "{st:?}");
    }
}

#[test]
fn calls_after_unplug_are_enodev() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd, 0x100_0000);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    r.reg.device().unplug();
    assert_eq!(errno(umd.submit(g, &[Job::new(0, 0, 0)])), ENODEV);
    assert_eq!(errno(umd.group_create(s.vm, &[0x1000])), ENODEV);
    assert_eq!(errno(umd.syncobj_create(false)), ENODEV);
}

/// The address spaces of the simulated GPU (after the MCU's) that have page tables.
fn mapped_address_spaces(r: &Rig) -> Vec<usize> {
    use mali_sim::regs::{as_reg, AS_TRANSTAB_LO};
    let gpu = r.reg.device().backend.gpu();
    let count = r.reg.device().gpu_info.num_as();
    (1..count)
        .filter(|&n| {
            let lo = gpu.read32(as_reg(n, AS_TRANSTAB_LO));
            let hi = gpu.read32(as_reg(n, AS_TRANSTAB_LO + 4));
            lo != 0 || hi != 0
        })
        .collect()
}

/// Unplug stops the hardware, as a driver's remove does after `drm_dev_unplug`: jobs still
/// queued are cancelled, the address spaces and the MCU are turned off; and once the bus has
/// taken the registers away, nothing touches them, not even the teardown of the file's
/// groups and VMs at its close and of the device at its last reference.
#[test]
fn unplug_stops_the_hardware_and_nothing_touches_it_afterwards() {
    use mali_sim::regs::{mcu, MCU_STATUS};
    let r = rig();
    // No idle power-down (the simulator's time jumps while the GPU idles): the MCU is
    // running and the VM holds its address space when the unplug comes.
    r.reg
        .device()
        .pm
        .set_idle_timeout(std::time::Duration::from_secs(3600));
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd, 0x100_0000);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    let (a, n) = add_stream(&umd, &s, 0, DATA, 1);
    let ran = umd.syncobj_create(false).unwrap();
    umd.submit(g, &[Job::new(0, a, n).signal(ran)]).unwrap();
    umd.wait(&[ran], WAIT).unwrap();
    // An asynchronous bind, so the VM has a bind queue when the unplug comes (its removal
    // once deadlocked on the bind-queue table's lock, see `BindQueues::remove_all`).
    let extra = umd.bo_create(0x1000).unwrap();
    let bound = umd.syncobj_create(false).unwrap();
    let op = bind_op(
        DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
        extra.handle,
        0x400_0000,
        extra.size,
        umd.sync_ops(&[], &[bound]).unwrap(),
    );
    umd.bind(s.vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op]).unwrap();
    umd.wait(&[bound], WAIT).unwrap();
    // More jobs, some still queued or running when the unplug comes.
    let mut fences = Vec::new();
    for _ in 0..4 * SCALE {
        let h = umd.syncobj_create(false).unwrap();
        umd.submit(g, &[Job::new(0, a, n).signal(h)]).unwrap();
        fences.push(umd.client().file().syncobjs().fence(h).unwrap().unwrap());
    }
    let gpu = r.reg.device().backend.gpu().clone();
    assert_eq!(gpu.read32(MCU_STATUS), mcu::ENABLED);
    assert!(
        !mapped_address_spaces(&r).is_empty(),
        "the job's VM has an address space"
    );

    r.reg.device().unplug();
    assert_eq!(gpu.read32(MCU_STATUS), mcu::DISABLED);
    assert_eq!(mapped_address_spaces(&r), Vec::<usize>::new());
    // Every job has finished or been cancelled by the time the unplug returns.
    for f in &fences {
        let st = f.status();
        assert!(st == Some(Ok(())) || st == Some(Err(ECANCELED)), "{st:?}");
    }
    assert_eq!(driver::suspend(r.reg.device()), Err(tyr::Error::NoDevice));

    r.reg.device().backend.revoke_io();
    // The register model outlives the backend, so it counts the device's release too.
    let mmio = tyr::backend::Backend::io(&r.reg.device().backend)
        .model()
        .clone();
    drop(umd);
    assert_eq!(
        mmio.late_accesses(),
        0,
        "the file's close touched the registers"
    );
    drop(s);
    drop(r);
    assert_eq!(
        mmio.late_accesses(),
        0,
        "the device's release touched the registers"
    );
}

fn bind_op(flags: u32, bo: u32, va: u64, size: u64, syncs: ObjArray) -> VmBindOp {
    VmBindOp {
        flags,
        bo_handle: bo,
        bo_offset: 0,
        va,
        size,
        syncs,
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the chain test covers this path there"
)]
fn asynchronous_binds_are_ordered_with_jobs_by_syncobjs() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let vm = umd.vm_create().unwrap();
    let code = umd.bo_create(0x1000).unwrap();
    let data = umd.bo_create(0x20_0000).unwrap();
    // The code is bound synchronously; the data asynchronously, then a job waits for the bind.
    umd.map(vm, &code, 0x100_0000).unwrap();
    let bound = umd.syncobj_create(false).unwrap();
    let op = bind_op(
        DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
        data.handle,
        0x4000_0000,
        data.size,
        umd.sync_ops(&[], &[bound]).unwrap(),
    );
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op]).unwrap();
    let prog = [
        instr::move48(0, 0x4000_0000 + 0x1f_f000),
        instr::move32(2, 0xabcd),
        instr::store_multiple(2, 0, 0, 1),
    ];
    umd.write_stream(&code, 0, &prog).unwrap();
    let g = umd.group_create(vm, &[0x1000]).unwrap();
    let ran = umd.syncobj_create(false).unwrap();
    umd.submit(g, &[Job::new(0, 0x100_0000, 24).wait(bound).signal(ran)])
        .unwrap();
    // Unmap the data once the job has run; a sync-only op in the same call signals after it.
    let unbound = umd.syncobj_create(false).unwrap();
    let after = umd.syncobj_create(false).unwrap();
    let ops = [
        bind_op(
            DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
            0,
            0x4000_0000,
            data.size,
            umd.sync_ops(&[ran], &[unbound]).unwrap(),
        ),
        bind_op(
            DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY,
            0,
            0,
            0,
            umd.sync_ops(&[unbound], &[after]).unwrap(),
        ),
    ];
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &ops).unwrap();
    umd.wait(&[after], WAIT).unwrap();
    for h in [bound, ran, unbound, after] {
        assert_eq!(fence_status(&umd, h), Some(0));
    }
    assert_eq!(data.read_u32(0x1f_f000).unwrap(), 0xabcd);
    let vmr = umd.client().file().inner().vm(vm).unwrap();
    let v = vmr.guard();
    assert_eq!(v.iova_to_phys(0x4000_0000), None);
    assert_eq!(v.mapping_count(), 1);
    assert!(!v.has_reserved_binds());
}

#[test]
#[cfg_attr(
    miri,
    ignore = "minutes under Miri; the chain test covers this path there"
)]
fn asynchronous_binds_check_everything_at_submission_and_change_nothing_on_error() {
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let vm = umd.vm_create().unwrap();
    let bo = umd.bo_create(0x4000).unwrap();
    let s = umd.syncobj_create(false).unwrap();
    let none = ObjArray::default();
    let good = bind_op(
        DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
        bo.handle,
        0x10_0000,
        0x4000,
        none,
    );
    let cases = [
        // A sync-only op must not name a range or an object.
        (
            bind_op(
                DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY,
                0,
                0x1000,
                0x1000,
                none,
            ),
            EINVAL,
        ),
        (
            bind_op(DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY, bo.handle, 0, 0, none),
            EINVAL,
        ),
        // Unknown syncobjs.
        (
            bind_op(
                DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
                0,
                0,
                0x1000,
                umd.sync_ops(&[55], &[]).unwrap(),
            ),
            ENOENT,
        ),
        (
            bind_op(
                DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
                0,
                0,
                0x1000,
                umd.sync_ops(&[], &[55]).unwrap(),
            ),
            EINVAL,
        ),
        // An object range that does not fit, an unaligned address.
        (
            bind_op(
                DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
                bo.handle,
                0x10_0000,
                0x8000,
                none,
            ),
            EINVAL,
        ),
        (
            bind_op(
                DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
                bo.handle,
                0x10_0800,
                0x1000,
                none,
            ),
            EINVAL,
        ),
    ];
    for (bad, want) in cases {
        let mut a = VmBind {
            vm_id: vm,
            flags: DRM_PANTHOR_VM_BIND_ASYNC,
            ops: umd.array(&[good, bad]).unwrap(),
        };
        assert_eq!(errno(umd.ioctl(DRM_IOCTL_PANTHOR_VM_BIND, &mut a)), want);
        // Unlike a synchronous bind, the count is left alone (as panthor does).
        assert_eq!(a.ops.count, 2);
        let vmr = umd.client().file().inner().vm(vm).unwrap();
        let v = vmr.guard();
        assert_eq!(v.mapping_count(), 0);
        assert!(!v.has_reserved_binds());
        assert_eq!(fence_status(&umd, s), None);
    }
    // Unknown flags of the call itself.
    let mut a = VmBind {
        vm_id: vm,
        flags: 1 << 7,
        ops: umd.array(&[good]).unwrap(),
    };
    assert_eq!(errno(umd.ioctl(DRM_IOCTL_PANTHOR_VM_BIND, &mut a)), EINVAL);
    // While a bind holds a reservation, a synchronous bind of the same VM is refused.
    let vmr = umd.client().file().inner().vm(vm).unwrap();
    let obj = {
        use drm_ctx::drm::gem;
        tyr::driver::BoRef(
            gem::Object::<tyr::driver::TyrBo<HostBackend>>::lookup_handle(
                umd.client().file(),
                bo.handle,
            )
            .unwrap(),
        )
    };
    let req = tyr::vm::BindReq::Map {
        va: 0x20_0000,
        size: 0x1000,
        obj: &obj,
        offset: 0,
        flags: 0,
    };
    let res = vmr.lock().reserve_bind(&[req]).unwrap();
    assert_eq!(errno(umd.map(vm, &bo, 0x10_0000)), -16);
    vmr.guard().release_bind(res);
    umd.map(vm, &bo, 0x10_0000).unwrap();
}

/// A slow firmware (10 ms per request hop) and a group destroyed while its stream runs a long
/// user stream. The firmware runs the group until it gets to the termination, and the stream
/// comes back to its ring (the group's memory) meanwhile: the destroy must wait for the
/// acknowledgement before it unmaps and frees the group's memory, or the GPU uses memory taken
/// from it (a page fault here; on silicon, memory given to someone else).
#[test]
#[cfg_attr(miri, ignore = "a 400,000-instruction user stream")]
fn a_group_destroyed_while_the_firmware_is_slow_frees_nothing_before_the_acknowledgement() {
    use csf::{Condition, Instr, Reg};
    const HOP_NS: u64 = 10_000_000;
    let mut cfg = Config::g610();
    cfg.timings.fw_ack_ns = HOP_NS;
    cfg.timings.fw_ack_jitter_ns = 0;
    let parent = device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, HostBackend::new(cfg)).unwrap();
    let dev = reg.device();
    let gpu = dev.backend.gpu().clone();
    let umd = Umd::open(dev).unwrap();
    let s = space(&umd, 0x100_0000);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    // 200,000 rounds of a two-instruction loop: 25,000 engine steps (2.5 ms), then the ring.
    let prog = [
        instr::move32(4, 200_000),
        instr::add_imm32(4, 4, -1),
        Instr::branch(Condition::Greater, Reg(4), -2).encode(),
    ];
    umd.write_stream(&s.bo, 0, &prog).unwrap();
    let done = umd.syncobj_create(false).unwrap();
    umd.submit(g, &[Job::new(0, s.va, 24).signal(done)])
        .unwrap();
    let running = || {
        gpu.with(|g| {
            (0..8)
                .map(|n| g.stream_instructions(n, 0))
                .max()
                .unwrap_or(0)
        })
    };
    let wall = std::time::Instant::now();
    while running() < 1_000 {
        assert!(wall.elapsed().as_secs() < 60, "the loop never ran");
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    assert!(running() < 300_000, "still in its loop when destroyed");
    let bufs = dev.suspend_bufs_in_use();
    let ifaces = dev.sched.ifaces_in_use();
    let t0 = gpu.with(|g| g.now_ns());
    umd.group_destroy(g).unwrap();
    let t1 = gpu.with(|g| g.now_ns());
    // Let the GPU settle: the firmware has served everything, the stream would have left its
    // loop long ago.
    while gpu.with(|g| g.fw_requests_pending() != 0 || g.now_ns() < t0 + 3 * HOP_NS) {
        assert!(wall.elapsed().as_secs() < 60, "the firmware never settled");
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    let faults: Vec<String> = dev
        .backend
        .log_lines()
        .into_iter()
        .filter(|l| l.contains("fault"))
        .collect();
    assert!(
        faults.is_empty(),
        "the GPU used the group's memory after it was freed: {faults:?}"
    );
    assert!(gpu.with(|g| g.bus_errors().is_empty()));
    // The destroy returned only after the acknowledgement (two hops), its memory freed then.
    assert!(t1 - t0 >= 2 * HOP_NS, "destroy took {} ns", t1 - t0);
    assert_eq!(dev.suspend_bufs_in_use(), bufs - 1);
    assert_eq!(dev.sched.ifaces_in_use(), ifaces - 1);
    assert_eq!(umd.vm_state(s.vm).unwrap(), DRM_PANTHOR_VM_STATE_USABLE);
}

/// A firmware that never acknowledges a group's termination: the destroy gives up after
/// panthor's 100 ms, asks for the GPU reset and keeps the group's memory until the reset has
/// taken the slot back from the firmware.
#[test]
#[cfg_attr(miri, ignore = "100 ms of simulated polling")]
fn a_termination_never_acknowledged_keeps_the_memory_until_the_reset() {
    use std::sync::atomic::Ordering;
    let r = rig();
    let dev = r.reg.device();
    let gpu = dev.backend.gpu().clone();
    gpu.with(|g| (0..8).for_each(|n| g.set_csg_ignores(n, 0, true)));
    let umd = Umd::open(dev).unwrap();
    let s = space(&umd, 0x100_0000);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    // The stream blocks on a sync object that never passes 5: the group stays resident.
    let prog = [
        instr::move48(0, s.va + DATA),
        instr::move48(2, 5),
        instr::sync_wait64(instr::Condition::Greater, 0, 2),
    ];
    umd.write_stream(&s.bo, 0, &prog).unwrap();
    umd.submit(g, &[Job::new(0, s.va, 24)]).unwrap();
    let wall = std::time::Instant::now();
    while gpu.with(|g| (0..8).all(|n| g.stream_instructions(n, 0) < 3)) {
        assert!(wall.elapsed().as_secs() < 60, "the stream never ran");
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    let bufs = dev.suspend_bufs_in_use();
    let t0 = gpu.with(|g| g.now_ns());
    umd.group_destroy(g).unwrap();
    assert!(
        gpu.with(|g| g.now_ns()) - t0 >= 100_000_000,
        "panthor's timeout"
    );
    assert!(dev
        .backend
        .log_lines()
        .iter()
        .any(|l| l.contains("did not acknowledge a termination")));
    // Until the reset, the memory stays; the reset frees it.
    let resets = &dev.sched.shared.resets;
    if resets.load(Ordering::Acquire) == 0 {
        assert_eq!(dev.suspend_bufs_in_use(), bufs, "held until the reset");
    }
    while resets.load(Ordering::Acquire) == 0 || dev.suspend_bufs_in_use() != bufs - 1 {
        assert!(
            wall.elapsed().as_secs() < 60,
            "the reset never freed the group's memory"
        );
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    assert_eq!(dev.sched.group_count(), 0);
    // The device goes on.
    let g2 = umd.group_create(s.vm, &[0x1000]).unwrap();
    let (a, n) = add_stream(&umd, &s, 0x100, DATA + 0x10, 3);
    let done = umd.syncobj_create(false).unwrap();
    umd.submit(g2, &[Job::new(0, a, n).signal(done)]).unwrap();
    umd.wait(&[done], WAIT).unwrap();
    assert_eq!(fence_status(&umd, done), Some(0));
}

/// Acknowledgements in any order: a firmware whose latency varies a lot from request to request
/// (1 to 61 us), groups started by the work item while the test's thread destroys others, so
/// that requests of several slots are in flight at once. Every surviving group finishes, no
/// request is lost (no reset), and the destroyed groups' memory is all given back.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn groups_started_and_destroyed_together_with_acknowledgements_in_any_order() {
    use std::sync::atomic::Ordering;
    for seed in 0..4u64 {
        let mut cfg = Config::g610();
        cfg.timings.fw_ack_ns = 1_000;
        cfg.timings.fw_ack_jitter_ns = 60_000;
        cfg.timings.fw_seed = seed;
        let parent = device::Device::new("mali").unwrap();
        let reg = driver::probe(&parent, HostBackend::new(cfg)).unwrap();
        let dev = reg.device();
        let umd = Umd::open(dev).unwrap();
        let s = space(&umd, 0x100_0000);
        let bufs = dev.suspend_bufs_in_use();
        let mut groups = Vec::new();
        for k in 0..12u64 {
            let g = umd.group_create(s.vm, &[0x1000]).unwrap();
            let mut last = 0;
            for j in 0..3u64 {
                let (addr, size) = add_stream(&umd, &s, (k * 4 + j) * 64, DATA + 4 * k, 1);
                last = umd.syncobj_create(false).unwrap();
                umd.submit(g, &[Job::new(0, addr, size).signal(last)])
                    .unwrap();
            }
            groups.push((k, g, last));
        }
        for (k, g, _) in &groups {
            if k % 2 == 1 {
                umd.group_destroy(*g).unwrap();
            }
        }
        for (k, g, last) in &groups {
            if k % 2 == 0 {
                umd.wait(&[*last], WAIT).unwrap();
                assert_eq!(fence_status(&umd, *last), Some(0), "seed {seed}");
                assert_eq!(s.bo.read_u32(DATA + 4 * k).unwrap(), 3);
                umd.group_destroy(*g).unwrap();
            }
        }
        let log = dev.backend.log_lines();
        assert_eq!(
            dev.sched.shared.resets.load(Ordering::Acquire),
            0,
            "seed {seed}: {log:?}"
        );
        assert_eq!(dev.suspend_bufs_in_use(), bufs, "seed {seed}");
        assert_eq!(dev.sched.group_count(), 0, "seed {seed}");
    }
}
