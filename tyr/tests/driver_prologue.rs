// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The instructions Tyr writes around each job in its queue's ring, judged by what the GPU
//! does with them: a job's fence signals only once every operation its stream started has
//! finished (the ring's `WAIT` for all scoreboard entries), the caches are flushed before the
//! job unless a flush happened since userspace sampled the flush ID (`FLUSH_CACHE2` with the
//! job's `latest_flush`), and a stream that dies is reported with the address of the
//! instruction that killed it. Each test fails if the ring job loses the piece it checks.

mod driver_common;

use csf::{Instr, Reg, Reg64, ShaderSelect, Slot, SlotMask, SyncOp, TaskAxis, TaskIncrement};
use driver_common::*;
use mali_sim::Config;
use tyr::csf::instr;
use tyr::umd::{Bo, Job, Umd};

const WAIT: i64 = 600_000_000_000;
const VA: u64 = 0x100_0000;
const DATA: u64 = 0x8000;

struct Space {
    vm: u32,
    bo: Bo,
}

fn space(umd: &Umd) -> Space {
    let vm = umd.vm_create().unwrap();
    let bo = umd.bo_create(0x10000).unwrap();
    umd.map(vm, &bo, VA).unwrap();
    Space { vm, bo }
}

/// Claims the compute endpoint and runs one task on it (its scoreboard entry, 0, stays busy
/// for the simulated GPU's `cs_work_ns`).
fn compute() -> [u64; 2] {
    [
        Instr::ReqResource {
            compute: true,
            fragment: false,
            tiler: false,
            idvs: false,
        }
        .encode(),
        Instr::RunCompute {
            task_increment: TaskIncrement::of::<1>(),
            task_axis: TaskAxis::X,
            progress_increment: false,
            select: ShaderSelect::default(),
        }
        .encode(),
    ]
}

/// Writes `prog` at `code` and submits it as one job of queue 0, returning its syncobj.
fn submit(umd: &Umd, s: &Space, group: u32, code: u64, prog: &[u64], job: fn(Job) -> Job) -> u32 {
    umd.write_stream(&s.bo, code, prog).unwrap();
    let done = umd.syncobj_create(false).unwrap();
    let j = job(Job::new(0, VA + code, 8 * prog.len() as u32).signal(done));
    umd.submit(group, &[j]).unwrap();
    done
}

/// A job whose stream ends with work in flight, and a store deferred until that work is done:
/// when its fence signals, the store has landed, and the driver's sync write was never early.
#[test]
fn a_job_fence_signals_only_once_its_work_has_drained() {
    let mut cfg = Config::g610();
    // Long enough that a fence signalled before the work ended could not be missed.
    cfg.timings.cs_work_ns = 2_000_000;
    let r = rig_with(cfg);
    let umd = Umd::open(r.dev()).unwrap();
    let s = space(&umd);
    let group = umd.group_create(s.vm, &[0x1000]).unwrap();
    let early = r.gpu().with(|g| g.early_signals());
    for k in 0..3u64 {
        let mut prog = vec![instr::move48(0, VA + DATA + 8 * k), instr::move32(2, 1)];
        prog.extend(compute());
        // Deferred until entry 0 (the work) drains, tracked on entry 1; the stream ends here.
        prog.push(
            Instr::sync_set32(
                SyncOp::new(Reg64(0), Reg(2))
                    .wait(SlotMask::from_bits(1))
                    .signal(Slot::of::<1>()),
            )
            .encode(),
        );
        let done = submit(&umd, &s, group, 0x100 * k, &prog, |j| j);
        umd.wait(&[done], WAIT).unwrap();
        assert_eq!(fence_status(&umd, done), Some(0), "job {k}");
        assert_eq!(
            s.bo.read_u32(DATA + 8 * k).unwrap(),
            1,
            "job {k}: signalled before its work"
        );
    }
    assert_eq!(
        r.gpu().with(|g| g.early_signals()),
        early,
        "the ring's sync add was early"
    );
    // The check sees early writes: a stream that signals its own object without waiting for
    // its work is counted, once per job, and the driver's write after it still is not.
    let mut prog = vec![instr::move48(0, VA + DATA + 0x100), instr::move32(2, 1)];
    prog.extend(compute());
    prog.push(instr::sync_set32(0, 2));
    let done = submit(&umd, &s, group, 0x400, &prog, |j| j);
    umd.wait(&[done], WAIT).unwrap();
    assert_eq!(r.gpu().with(|g| g.early_signals()), early + 1);
}

/// Each job flushes the GPU's caches before its stream runs, unless the flush ID userspace
/// passes says a flush has happened since it wrote the stream.
#[test]
fn a_job_flushes_the_caches_unless_a_flush_came_since() {
    let r = rig();
    let umd = Umd::open(r.dev()).unwrap();
    let s = space(&umd);
    let group = umd.group_create(s.vm, &[0x1000]).unwrap();
    let prog = [
        instr::move48(0, VA + DATA),
        instr::move32(2, 7),
        instr::store_multiple(2, 0, 0, 1),
    ];
    let id = umd.latest_flush_id().unwrap();
    // Submitted with the current ID: the job flushes.
    let done = submit(&umd, &s, group, 0, &prog, |j| j);
    umd.wait(&[done], WAIT).unwrap();
    let after = umd.latest_flush_id().unwrap();
    assert_eq!(after, id + 1, "the job did not flush");
    // A job written before that flush (its ID is the old one) needs none.
    umd.write_stream(&s.bo, 0x100, &prog).unwrap();
    let stale = umd.syncobj_create(false).unwrap();
    let job = Job::new(0, VA + 0x100, 24).signal(stale).flush_id(id);
    umd.submit(group, &[job]).unwrap();
    umd.wait(&[stale], WAIT).unwrap();
    assert_eq!(fence_status(&umd, stale), Some(0));
    assert_eq!(umd.latest_flush_id().unwrap(), after, "a needless flush");
    // And a job with the new ID flushes again.
    let done = submit(&umd, &s, group, 0x200, &prog, |j| j);
    umd.wait(&[done], WAIT).unwrap();
    assert_eq!(umd.latest_flush_id().unwrap(), after + 1);
}

/// A stream stopped by an instruction the GPU does not define is logged with that
/// instruction's address (the stream's `FATAL_INFO`), and its job fails.
#[test]
fn a_fatal_stream_error_names_the_instruction() {
    let r = rig();
    let umd = Umd::open(r.dev()).unwrap();
    let s = space(&umd);
    let group = umd.group_create(s.vm, &[0x1000]).unwrap();
    let prog = [instr::move48(0, VA + DATA), 10 << 56, instr::nop()];
    let done = submit(&umd, &s, group, 0x40, &prog, |j| j);
    umd.wait(&[done], WAIT).unwrap();
    assert_eq!(fence_status(&umd, done), Some(-14));
    let want = format!("fault 0x49 at {:#x}", VA + 0x48);
    let logs = r.dev().backend.log_lines();
    assert!(
        logs.iter().any(|l| l.contains(&want)),
        "{want} not in {logs:?}"
    );
}
