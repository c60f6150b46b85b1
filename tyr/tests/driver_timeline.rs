// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Timeline syncobjs in GROUP_SUBMIT and asynchronous VM_BIND, through the ioctl layer only:
//! jobs and binds that signal points and wait on them (also on a point an earlier job of the
//! same call signals, and on one another queue's work holds back), results read in GPU memory
//! and through the DRM core's TIMELINE_WAIT and QUERY; then every malformed sync op with the
//! errno panthor and `drm_syncobj.c` give it, leaving every syncobj as it was (same fence, same
//! points) and no chain link behind.

mod driver_common;
use driver_common::{errno, rig};
use std::sync::{Arc, Mutex, MutexGuard};

use drm_ctx::host::syncobj::{self, live_chain_links, FenceRef};
use jobqueue::host::HostFence;
use jobqueue::SignalFence as _;
use tyr::backend::Lock as _;
use tyr::csf::instr;
use tyr::host::JobSyncFence;
use tyr::uapi::*;
use tyr::umd::{timeline_op, Bo, Job, Umd};

const EINVAL: i32 = -22;
const ENOENT: i32 = -2;
const WAIT: i64 = 600_000_000_000;
const WAIT_ALL: u32 = syncobj::DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL;

/// Chain links are counted process-wide: the tests of this file run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A VM with one BO mapped at `va`: code from offset 0, data from `DATA`.
struct Space {
    vm: u32,
    bo: Bo,
    va: u64,
}

const DATA: u64 = 0x8000;
const VA: u64 = 0x100_0000;

fn space(umd: &Umd) -> Space {
    let vm = umd.vm_create().unwrap();
    let bo = umd.bo_create(0x10000).unwrap();
    umd.map(vm, &bo, VA).unwrap();
    Space { vm, bo, va: VA }
}

/// Job `k`'s stream (at `k * 64`): adds `k + 1` to the counter at `DATA` and logs the new
/// value at `DATA + 4 * (k + 1)`, so the log tells in which order the jobs ran.
fn add_and_log(umd: &Umd, s: &Space, k: u64) -> (u64, u32) {
    let prog = [
        instr::move48(0, s.va + DATA),
        instr::load_multiple(2, 0, 0, 1),
        instr::wait(1),
        instr::add_imm32(2, 2, k as i32 + 1),
        instr::store_multiple(2, 0, 0, 1),
        instr::move48(4, s.va + DATA + 4 * (k + 1)),
        instr::store_multiple(2, 4, 0, 1),
    ];
    umd.write_stream(&s.bo, k * 64, &prog).unwrap();
    (s.va + k * 64, (prog.len() * 8) as u32)
}

fn job(umd: &Umd, s: &Space, queue: u32, k: u64) -> Job {
    let (addr, size) = add_and_log(umd, s, k);
    Job::new(queue, addr, size)
}

/// What `add_and_log` leaves after jobs `0..n` ran in order: the log of running sums.
fn check_in_order(s: &Space, n: u64) {
    let mut sum = 0;
    for k in 0..n {
        sum += k as u32 + 1;
        assert_eq!(
            s.bo.read_u32(DATA + 4 * (k + 1)).unwrap(),
            sum,
            "job {k} ran out of order"
        );
    }
    assert_eq!(s.bo.read_u32(DATA).unwrap(), sum);
}

/// Last signalled and last submitted point of `h`.
fn points(umd: &Umd, h: u32) -> (u64, u64) {
    (
        umd.syncobj_query(&[h], false).unwrap()[0],
        umd.syncobj_query(&[h], true).unwrap()[0],
    )
}

fn fence(umd: &Umd, h: u32) -> Option<FenceRef> {
    umd.client().file().syncobjs().fence(h).unwrap()
}

/// Adds point `p` to `h` held back by a fence the test signals (another queue's work, as the
/// driver's syncobjs see it).
fn held_point(umd: &Umd, h: u32, p: u64) -> HostFence {
    let t = umd.client().file().syncobjs();
    let gate = HostFence::new();
    let f: FenceRef = Arc::new(JobSyncFence(gate.clone())).into();
    t.add_point(h, t.alloc_point().unwrap(), f, p).unwrap();
    gate
}

#[test]
fn submissions_signal_and_wait_on_timeline_points() {
    let _s = serial();
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd);
    let g = umd.group_create(s.vm, &[0x1000, 0x1000]).unwrap();
    let t = umd.syncobj_create(false).unwrap();
    // One job per call, each waiting on the point of the one before.
    umd.submit(g, &[job(&umd, &s, 0, 0).signal_point(t, 1)])
        .unwrap();
    umd.submit(
        g,
        &[job(&umd, &s, 1, 1).wait_point(t, 1).signal_point(t, 2)],
    )
    .unwrap();
    // In one call: job 3 waits on the point job 2 signals, job 4 (the other queue) on job 3's.
    umd.submit(
        g,
        &[
            job(&umd, &s, 0, 2).wait_point(t, 2).signal_point(t, 3),
            job(&umd, &s, 0, 3).wait_point(t, 3).signal_point(t, 4),
            job(&umd, &s, 1, 4).wait_point(t, 4).signal_point(t, 5),
        ],
    )
    .unwrap();
    assert_eq!(points(&umd, t).1, 5);
    umd.timeline_wait(&[t], &[5], WAIT_ALL, WAIT).unwrap();
    check_in_order(&s, 5);
    assert_eq!(points(&umd, t), (5, 5));
    // A binary wait on the timeline waits for all of it; a timeline op on point 0 replaces the
    // fence as a binary one does.
    let b = umd.syncobj_create(false).unwrap();
    umd.submit(
        g,
        &[job(&umd, &s, 1, 5)
            .wait(t)
            .signal_point(t, 6)
            .signal_point(b, 0)],
    )
    .unwrap();
    umd.wait(&[b], WAIT).unwrap();
    umd.timeline_wait(&[t], &[6], WAIT_ALL, WAIT).unwrap();
    check_in_order(&s, 6);
    assert_eq!(points(&umd, b), (0, 0));
    assert_eq!(umd.group_state(g).unwrap(), (0, 0));
}

#[test]
fn a_job_waits_for_a_point_that_other_work_holds_back() {
    let _s = serial();
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd);
    let g = umd.group_create(s.vm, &[0x1000, 0x1000]).unwrap();
    let t = umd.syncobj_create(false).unwrap();
    // Points 1 and 3 signalled from the CPU, 2 held back: point 3 has not signalled until 2
    // has, and the job waits on 3.
    umd.timeline_signal(&[t], &[1]).unwrap();
    let gate = held_point(&umd, t, 2);
    umd.timeline_signal(&[t], &[3]).unwrap();
    umd.submit(
        g,
        &[job(&umd, &s, 0, 0).wait_point(t, 3).signal_point(t, 4)],
    )
    .unwrap();
    // A job on the other queue that waits for nothing runs meanwhile; the held one does not.
    let other = umd.syncobj_create(false).unwrap();
    let (addr, size) = {
        let prog = [
            instr::move48(0, s.va + DATA + 0x100),
            instr::move32(2, 7),
            instr::store_multiple(2, 0, 0, 1),
        ];
        umd.write_stream(&s.bo, 0x400, &prog).unwrap();
        (s.va + 0x400, 24)
    };
    umd.submit(g, &[Job::new(1, addr, size).signal(other)])
        .unwrap();
    umd.wait(&[other], WAIT).unwrap();
    assert_eq!(s.bo.read_u32(DATA + 0x100).unwrap(), 7);
    assert_eq!(s.bo.read_u32(DATA).unwrap(), 0);
    assert_eq!(points(&umd, t), (1, 4));
    // Point 4 is not reached within a short wait.
    assert_eq!(
        errno(umd.timeline_wait(&[t], &[4], WAIT_ALL, 20_000_000)),
        syncobj::ETIME
    );
    gate.signal(Ok(()));
    umd.timeline_wait(&[t], &[4], WAIT_ALL, WAIT).unwrap();
    check_in_order(&s, 1);
    assert_eq!(points(&umd, t), (4, 4));
}

/// A point whose fence failed fails the jobs waiting on it (as a failed binary wait does, the
/// jobqueue's rule); the points and syncobjs they signal still signal, with the error, and the
/// group lives on.
#[test]
fn a_failed_point_fails_the_jobs_waiting_on_it() {
    let _s = serial();
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    let t = umd.syncobj_create(false).unwrap();
    let b = umd.syncobj_create(false).unwrap();
    let gate = held_point(&umd, t, 1);
    umd.timeline_signal(&[t], &[2]).unwrap();
    // Waits on point 2, which stands for point 1's failing fence too.
    umd.submit(
        g,
        &[job(&umd, &s, 0, 0)
            .wait_point(t, 2)
            .signal_point(t, 3)
            .signal(b)],
    )
    .unwrap();
    gate.signal(Err(jobqueue::FenceError::IO));
    umd.timeline_wait(&[t], &[3], WAIT_ALL, WAIT).unwrap();
    let status = fence(&umd, b).unwrap().status();
    assert_eq!(status, Some(Err(-5)));
    assert_eq!(s.bo.read_u32(DATA).unwrap(), 0);
    assert_eq!(points(&umd, t), (3, 3));
    // A job waiting on the failed job's point fails in turn, as one waiting on `b` would.
    umd.submit(g, &[job(&umd, &s, 0, 0).wait_point(t, 3).signal(b)])
        .unwrap();
    umd.wait(&[b], WAIT).unwrap();
    assert_eq!(fence(&umd, b).unwrap().status(), Some(Err(-5)));
    // Once a later point is signalled, the failed ones are behind it: a job waiting on it
    // runs, and the group is fine.
    umd.timeline_signal(&[t], &[4]).unwrap();
    umd.submit(
        g,
        &[job(&umd, &s, 0, 0).wait_point(t, 4).signal_point(t, 5)],
    )
    .unwrap();
    umd.timeline_wait(&[t], &[5], WAIT_ALL, WAIT).unwrap();
    check_in_order(&s, 1);
    assert_eq!(umd.group_state(g).unwrap(), (0, 0));
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
fn asynchronous_binds_signal_and_wait_on_timeline_points() {
    let _s = serial();
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let vm = umd.vm_create().unwrap();
    let code = umd.bo_create(0x1000).unwrap();
    let data = umd.bo_create(0x20_0000).unwrap();
    umd.map(vm, &code, 0x100_0000).unwrap();
    let t = umd.syncobj_create(false).unwrap();
    // Point 1: the data is bound.
    let op = bind_op(
        DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
        data.handle,
        0x4000_0000,
        data.size,
        umd.array(&[timeline_op(true, t, 1)]).unwrap(),
    );
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[op]).unwrap();
    // Point 2: a job has written into it.
    let prog = [
        instr::move48(0, 0x4000_0000 + 0x1f_f000),
        instr::move32(2, 0xabcd),
        instr::store_multiple(2, 0, 0, 1),
    ];
    umd.write_stream(&code, 0, &prog).unwrap();
    let g = umd.group_create(vm, &[0x1000]).unwrap();
    umd.submit(
        g,
        &[Job::new(0, 0x100_0000, 24)
            .wait_point(t, 1)
            .signal_point(t, 2)],
    )
    .unwrap();
    // Points 3 and 4 in one call: the unmap once the job ran, then a sync-only op that waits
    // on the point the unmap (an earlier op of the same call) signals.
    let ops = [
        bind_op(
            DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
            0,
            0x4000_0000,
            data.size,
            umd.array(&[timeline_op(false, t, 2), timeline_op(true, t, 3)])
                .unwrap(),
        ),
        bind_op(
            DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY,
            0,
            0,
            0,
            umd.array(&[timeline_op(false, t, 3), timeline_op(true, t, 4)])
                .unwrap(),
        ),
    ];
    umd.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &ops).unwrap();
    assert_eq!(points(&umd, t).1, 4);
    umd.timeline_wait(&[t], &[4], WAIT_ALL, WAIT).unwrap();
    assert_eq!(points(&umd, t), (4, 4));
    assert_eq!(data.read_u32(0x1f_f000).unwrap(), 0xabcd);
    let vmr = umd.client().file().inner().vm(vm).unwrap();
    let v = vmr.guard();
    assert_eq!(v.iova_to_phys(0x4000_0000), None);
    assert_eq!(v.mapping_count(), 1);
    assert!(!v.has_reserved_binds());
}

/// A syncobj's state: its fence (by identity) and its last signalled and submitted points.
fn state(umd: &Umd, h: u32) -> (Option<usize>, (u64, u64)) {
    (
        fence(umd, h).map(|f| FenceRef::as_ptr(&f) as usize),
        points(umd, h),
    )
}

fn op(flags: u32, handle: u32, point: u64) -> SyncOp {
    SyncOp {
        flags,
        handle,
        timeline_value: point,
    }
}

const TL: u32 = DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_TIMELINE_SYNCOBJ;
const BIN: u32 = DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ;
const SIG: u32 = DRM_PANTHOR_SYNC_OP_SIGNAL;

/// Malformed sync ops of a second job (or op) after a good one that signals points; each case
/// with the errno panthor gives it.
fn malformed(t: u32, bin: u32, empty: u32) -> Vec<(&'static str, Vec<SyncOp>, Vec<SyncOp>, i32)> {
    vec![
        (
            "binary wait with a point",
            vec![],
            vec![op(BIN, bin, 1)],
            EINVAL,
        ),
        (
            "binary signal with a point",
            vec![],
            vec![op(BIN | SIG, bin, 1)],
            EINVAL,
        ),
        ("unknown handle type", vec![], vec![op(2, t, 1)], EINVAL),
        ("unknown flag", vec![], vec![op(TL | 1 << 8, t, 1)], EINVAL),
        (
            "signal of an unknown handle",
            vec![],
            vec![op(TL | SIG, 99, 7)],
            EINVAL,
        ),
        (
            "wait on an unknown handle",
            vec![],
            vec![op(TL, 99, 1)],
            ENOENT,
        ),
        (
            "wait on a point not submitted",
            vec![],
            vec![op(TL, t, 8)],
            EINVAL,
        ),
        (
            "wait on a point of a syncobj without fence",
            vec![],
            vec![op(TL, empty, 1)],
            EINVAL,
        ),
        (
            "wait on a point of a binary syncobj",
            vec![],
            vec![op(TL, bin, 1)],
            EINVAL,
        ),
        (
            "wait on a point only a later job signals",
            vec![op(TL, t, 9)],
            vec![op(TL | SIG, t, 9)],
            EINVAL,
        ),
        (
            // Signals are collected for every job before any wait is resolved.
            "unknown wait, then an unknown signal",
            vec![op(TL, 99, 1)],
            vec![op(TL | SIG, 98, 1)],
            EINVAL,
        ),
    ]
}

#[test]
fn malformed_timeline_sync_ops_fail_as_in_panthor_and_change_nothing() {
    let _s = serial();
    let r = rig();
    let umd = Umd::open(r.reg.device()).unwrap();
    let s = space(&umd);
    let g = umd.group_create(s.vm, &[0x1000]).unwrap();
    let t = umd.syncobj_create(false).unwrap();
    let bin = umd.syncobj_create(true).unwrap();
    let empty = umd.syncobj_create(false).unwrap();
    umd.timeline_signal(&[t], &[1]).unwrap();
    let gate = held_point(&umd, t, 2);
    let (a, n) = add_and_log(&umd, &s, 0);
    // (Querying unlinks point 1, which has signalled: count the links after it.)
    let before = [t, bin, empty].map(|h| state(&umd, h));
    let links = live_chain_links();
    let unchanged = |what: &str| {
        assert_eq!([t, bin, empty].map(|h| state(&umd, h)), before, "{what}");
        assert_eq!(live_chain_links(), links, "{what}: chain links left behind");
    };
    for (what, first, second, want) in malformed(t, bin, empty) {
        // GROUP_SUBMIT: a good job first that waits on point 2 and signals points 3 and 4,
        // the binary syncobj and the empty one.
        let mut good = Job::new(0, a, n)
            .wait_point(t, 2)
            .signal_point(t, 3)
            .signal_point(t, 4)
            .signal(bin)
            .signal(empty);
        good.points.extend(first.iter().copied());
        let mut bad = Job::new(0, a, n);
        bad.points.extend(second.iter().copied());
        assert_eq!(errno(umd.submit(g, &[good, bad])), want, "submit: {what}");
        unchanged(what);
        // Asynchronous VM_BIND: the same sync ops on two sync-only ops.
        let mut ops1 = vec![
            op(TL, t, 2),
            op(TL | SIG, t, 3),
            op(TL | SIG, t, 4),
            op(BIN | SIG, bin, 0),
        ];
        ops1.extend(first.iter().copied());
        let ops = [
            bind_op(
                DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY,
                0,
                0,
                0,
                umd.array(&ops1).unwrap(),
            ),
            bind_op(
                DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY,
                0,
                0,
                0,
                umd.array(&second).unwrap(),
            ),
        ];
        assert_eq!(
            errno(umd.bind(s.vm, DRM_PANTHOR_VM_BIND_ASYNC, &ops)),
            want,
            "bind: {what}"
        );
        unchanged(what);
    }
    // Nothing of the above was queued: once the gate opens, only a real job runs.
    gate.signal(Ok(()));
    umd.submit(g, &[Job::new(0, a, n).wait_point(t, 2).signal_point(t, 3)])
        .unwrap();
    umd.timeline_wait(&[t], &[3], WAIT_ALL, WAIT).unwrap();
    check_in_order(&s, 1);
    assert_eq!(points(&umd, t), (3, 3));
    assert_eq!(umd.group_state(g).unwrap(), (0, 0));
}

#[test]
fn no_chain_link_outlives_the_file_and_its_jobs() {
    let _s = serial();
    let links = live_chain_links();
    {
        let r = rig();
        let umd = Umd::open(r.reg.device()).unwrap();
        let s = space(&umd);
        let g = umd.group_create(s.vm, &[0x1000]).unwrap();
        let t = umd.syncobj_create(false).unwrap();
        for k in 0..4 {
            let mut j = job(&umd, &s, 0, k).signal_point(t, k + 1);
            if k > 0 {
                j = j.wait_point(t, k);
            }
            umd.submit(g, &[j]).unwrap();
        }
        umd.timeline_wait(&[t], &[4], WAIT_ALL, WAIT).unwrap();
        check_in_order(&s, 4);
        assert!(live_chain_links() > links);
        umd.group_destroy(g).unwrap();
        umd.syncobj_destroy(t).unwrap();
    }
    assert_eq!(live_chain_links(), links);
}
