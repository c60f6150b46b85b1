// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Fair scheduling and priorities through the ioctl layer: more groups with work than the
//! eight group slots, rotated by the scheduler's tick (suspended into their suspend buffers and
//! resumed on whichever slot is free) until every job is done, with the results checked in GPU
//! memory; a `REALTIME` group preempting `LOW` groups that hold every slot; priorities deciding
//! who runs; a job that waits forever still timing out while the others finish.
//!
//! The engine runs at 100 µs of simulated time per step, so jobs last milliseconds and chains
//! of them many scheduler ticks (10 ms).

mod driver_common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use driver_common::*;
use drm_ctx::drm::OpenOptions;
use jobqueue::host::HostFence;
use jobqueue::SignalFence as _;
use tyr::backend::Lock as _;
use tyr::csf::instr;
use tyr::host::JobSyncFence;
use tyr::sched::TICK_PERIOD;
use tyr::uapi::*;
use tyr::umd::{spin_stream, Bo, Job, Umd};

const ETIMEDOUT: i32 = -110;

/// Held by each test for its whole run: the tests of this file run one at a time.
///
/// They run on simulated time ([`HostTime::Simulated`](tyr::host::HostTime)), where a device's
/// event thread jumps simulated time to the next event or timer whenever it finds nothing to
/// do, and they check scheduling against that time (ticks, timeouts, groups taking slots). Run
/// in parallel on a 2-core machine, 15 of them (each with its event and bind threads, and test
/// threads polling) failed in 3 to 5 runs out of 8, on this commit and on session 15's
/// (312021e): groups that never took the slots within 60 s, firmware acknowledgements and
/// jobs timing out, `ETIMEDOUT` creating a group. Run one at a time, they failed in none of 12.
/// The likely cause is the weakness that mode documents: with the CPU shared by 15 devices, a
/// test's thread is off the CPU while its device's event thread jumps ahead, and the driver's
/// deadlines pass before the CPU side did its part. Not confirmed (see the session 16 note).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
const WAIT: i64 = 600_000_000_000;
/// Offset of the data words in a group's object (streams before it).
const DATA: u64 = 0xc000;
const RING: u32 = 0x1000;

/// A group with its own object (streams and data) mapped at `va` in `vm`.
struct Grp {
    handle: u32,
    bo: Bo,
    va: u64,
    /// Bytes of stream written so far.
    code: u64,
    /// Done syncobjs of its jobs, in order.
    jobs: Vec<u32>,
    /// Streams written and not submitted yet (address, bytes).
    staged: Vec<(u64, u32)>,
}

fn group(umd: &Umd, vm: u32, va: u64, prio: u8) -> Grp {
    group_q(umd, vm, va, prio, 1)
}

fn group_q(umd: &Umd, vm: u32, va: u64, prio: u8, queues: usize) -> Grp {
    group_with(umd, vm, va, prio, &vec![(RING, 0); queues])
}

/// A group with one queue per `(ring size, queue priority)` and its own object at `va`.
fn group_with(umd: &Umd, vm: u32, va: u64, prio: u8, queues: &[(u32, u8)]) -> Grp {
    let bo = umd.bo_create(0x10000).unwrap();
    umd.map(vm, &bo, va).unwrap();
    let handle = umd.group_create_queues(vm, queues, prio).unwrap();
    Grp {
        handle,
        bo,
        va,
        code: 0,
        jobs: Vec::new(),
        staged: Vec::new(),
    }
}

impl Grp {
    /// Writes `prog` as a new stream; its address and size.
    fn write(&mut self, umd: &Umd, prog: &[u64]) -> (u64, u32) {
        let at = self.code;
        umd.write_stream(&self.bo, at, prog).unwrap();
        // Streams start 64-byte aligned, as the uAPI wants.
        self.code += (8 * prog.len() as u64).next_multiple_of(64);
        assert!(self.code <= DATA, "streams overflow into the data");
        (self.va + at, 8 * prog.len() as u32)
    }

    /// Writes `prog` to be submitted by [`Grp::submit_staged`].
    fn stage(&mut self, umd: &Umd, prog: &[u64]) {
        let s = self.write(umd, prog);
        self.staged.push(s);
    }

    /// Stages job `j` of a spinning chain (it stores `[spin, value(j)]` at `DATA + 8 * j`).
    fn stage_spin(&mut self, umd: &Umd, j: u64, spin: u32) {
        let prog = spin_stream(self.va + DATA + 8 * j, value(self.handle, j), spin);
        self.stage(umd, &prog);
    }

    /// Submits the staged streams, each a job on queue 0 waiting on `wait`.
    fn submit_staged(&mut self, umd: &Umd, wait: Option<u32>) {
        for (addr, size) in std::mem::take(&mut self.staged) {
            self.submit_at(umd, 0, addr, size, wait);
        }
    }

    fn submit_at(&mut self, umd: &Umd, queue: u32, addr: u64, size: u32, wait: Option<u32>) -> u32 {
        let done = umd.syncobj_create(false).unwrap();
        let mut job = Job::new(queue, addr, size).signal(done);
        if let Some(w) = wait {
            job = job.wait(w);
        }
        if let Err(e) = umd.submit(self.handle, &[job]) {
            panic!(
                "submit to group {}: {e:?}, state {:?}",
                self.handle,
                umd.group_state(self.handle)
            );
        }
        self.jobs.push(done);
        done
    }

    /// Waits for every job of the group, then checks them as [`Grp::check_spins`] does.
    fn finish(&self, umd: &Umd, n: u64, spin: u32) {
        umd.wait(&self.jobs, WAIT).unwrap();
        self.check_spins(umd, n, spin);
    }

    /// Checks that spinning jobs `0..n` all succeeded and left their words.
    fn check_spins(&self, umd: &Umd, n: u64, spin: u32) {
        for j in 0..n {
            assert_eq!(
                fence_status(umd, self.jobs[j as usize]),
                Some(0),
                "group {} job {j}",
                self.handle
            );
            assert_eq!(
                self.bo.read_u32(DATA + 8 * j).unwrap(),
                spin,
                "group {} job {j}",
                self.handle
            );
            assert_eq!(
                self.bo.read_u32(DATA + 8 * j + 4).unwrap(),
                value(self.handle, j),
                "group {} job {j}",
                self.handle
            );
        }
        assert_eq!(umd.group_state(self.handle).unwrap(), (0, 0));
    }
}

/// Groups of `umd` in `vm` of priority `prio`, the one of index `k` with its object at
/// `base + k MiB`.
fn groups_of(umd: &Umd, vm: u32, base: u64, ks: std::ops::Range<u64>, prio: u8) -> Vec<Grp> {
    ks.map(|k| group(umd, vm, base + k * 0x10_0000, prio))
        .collect()
}

/// Stages spinning jobs `0..jobs` ([`Grp::stage_spin`]) on every group of `groups`.
fn stage_spins(groups: &mut [Grp], umd: &Umd, jobs: u64, spin: u32) {
    for g in groups {
        for j in 0..jobs {
            g.stage_spin(umd, j, spin);
        }
    }
}

/// A gate: a group running a chain of `jobs` spinning jobs (about 9 ms of simulated time
/// each). Jobs submitted while it runs and waiting on its last job ([`Gate::go`]) reach their
/// rings at the same moment. (A gate blocked on memory would not do: the simulated clock jumps
/// over idle time, and its job would time out.)
struct Gate {
    go: u32,
    _grp: Grp,
}

fn gate(umd: &Umd, vm: u32, va: u64, jobs: u64) -> Gate {
    let mut grp = group(umd, vm, va, PANTHOR_GROUP_PRIORITY_MEDIUM);
    // One stream, run `jobs` times.
    let prog = spin_stream(va + DATA, 1, 1500);
    let (addr, size) = grp.write(umd, &prog);
    let mut go = 0;
    for _ in 0..jobs {
        go = grp.submit_at(umd, 0, addr, size, None);
    }
    Gate { go, _grp: grp }
}

/// The word job `j` of group `g` stores.
fn value(g: u32, j: u64) -> u32 {
    0x5000_0000 | g << 12 | j as u32
}

/// A device with the slow engine (see [`slow_engine_config`]), its deadlines on simulated
/// time: the jobs' lengths and the scheduler's ticks are compared in one time, and the hang
/// tests go through the 5 s job timeout as fast as the host computes it.
fn fair_rig() -> Rig {
    let r = rig_simulated(slow_engine_config());
    // No idle power-down while a test sets its work up: these tests count resets.
    r.dev()
        .pm
        .set_idle_timeout(std::time::Duration::from_secs(3600));
    r
}

fn master(r: &Rig) -> Umd {
    let opts = OpenOptions {
        master: true,
        ..OpenOptions::primary()
    };
    Umd::open_with(r.dev(), opts).unwrap()
}

fn stat(r: &Rig, f: impl Fn(&tyr::sched::Sched<tyr::host::HostBackend>) -> u64) -> u64 {
    f(&r.dev().sched)
}

fn resets(r: &Rig) -> u32 {
    let n = r.dev().sched.shared.resets.load(Ordering::Acquire);
    if n != 0 {
        for l in r.dev().backend.log_lines().iter().take(40) {
            eprintln!("{l}");
        }
    }
    n
}

fn resident(r: &Rig) -> usize {
    r.dev()
        .sched
        .slots
        .guard()
        .iter()
        .filter(|s| s.is_some())
        .count()
}

/// (a) Three times more groups with work than slots, each a chain of jobs that needs several
/// ticks of slot time: every job completes with its result in memory, none times out, no
/// reset; the groups were rotated (suspended and resumed) to get there.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn three_times_more_groups_than_slots_all_finish() {
    let _serial = serial();
    let r = fair_rig();
    const JOBS: u64 = 8;
    const SPIN: u32 = 600;
    let umds: Vec<Umd> = (0..3).map(|_| Umd::open(r.dev()).unwrap()).collect();
    let mut groups = Vec::new();
    let mut vms = Vec::new();
    for umd in &umds {
        let mut first = 0;
        for v in 0..2u64 {
            let vm = umd.vm_create().unwrap();
            if v == 0 {
                first = vm;
            }
            let mut four = groups_of(umd, vm, 0x100_0000, 0..4, PANTHOR_GROUP_PRIORITY_MEDIUM);
            stage_spins(&mut four, umd, JOBS, SPIN);
            groups.extend(four);
        }
        vms.push(first);
    }
    assert_eq!(groups.len(), 24);
    // Every group gets its whole chain at once: 24 groups want the 8 slots.
    let gates: Vec<Gate> = umds
        .iter()
        .zip(&vms)
        .map(|(u, vm)| gate(u, *vm, 0x800_0000, 3))
        .collect();
    for (i, g) in groups.iter_mut().enumerate() {
        g.submit_staged(&umds[i / 8], Some(gates[i / 8].go));
    }
    for (i, g) in groups.iter().enumerate() {
        if umds[i / 8].wait(&g.jobs, 20_000_000_000).is_err() {
            let dev = r.dev();
            eprintln!("slots {:?}", dev.sched.slots.guard());
            for gg in dev.sched.live_groups() {
                eprintln!(
                    "key {} slot {} wants {} dead {} susp {}",
                    gg.key,
                    gg.state.slot.load(Ordering::Acquire),
                    gg.state.wants_slot.load(Ordering::Acquire),
                    gg.state.dead.load(Ordering::Acquire),
                    gg.state.suspended.load(Ordering::Acquire)
                );
            }
            for l in dev.backend.log_lines().iter().take(20) {
                eprintln!("{l}");
            }
            panic!("stuck at group {i}");
        }
    }
    for (i, g) in groups.iter().enumerate() {
        g.check_spins(&umds[i / 8], JOBS, SPIN);
    }
    assert_eq!(resets(&r), 0);
    // Each group needed about three ticks of slot time; 24 groups over 8 slots.
    assert!(stat(&r, |s| s.ticks.load(Ordering::Acquire)) >= 6);
    assert!(stat(&r, |s| s.suspends.load(Ordering::Acquire)) >= 16);
    assert!(stat(&r, |s| s.resumes.load(Ordering::Acquire)) >= 16);
}

/// (b) `LOW` groups hold all eight slots with long chains; a `REALTIME` group's job starts
/// within one tick of becoming ready (in simulated time): the scheduler preempts at once.
///
/// Nothing here depends on how fast the host runs the simulated GPU against the test thread:
/// the `LOW` chains wait for a syncobj the test signals once everything is submitted, and the
/// `REALTIME` job waits for the end of the second job of the first `LOW` chain, so that it
/// becomes ready in the middle of the `LOW` work, whatever the host's timing. The jobs' GPU
/// timestamps then show that every `LOW` group had started before that moment and was still
/// at work when the `REALTIME` job started.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn a_realtime_job_starts_within_a_tick_while_low_groups_hold_every_slot() {
    let _serial = serial();
    let r = fair_rig();
    // One client (a master, for REALTIME) for every group: the REALTIME job waits on a syncobj
    // of a LOW job.
    let boss = master(&r);
    const JOBS: u64 = 10;
    const SPIN: u32 = 500;
    /// The job of `low[0]` whose end makes the REALTIME job ready.
    const RELEASE: u64 = 1;
    /// Where a LOW group notes the GPU timestamp when its chain starts, and when it ends.
    const STARTED: u64 = DATA + 0x800;
    const ENDED: u64 = DATA + 0x808;
    /// Where `low[0]` notes it at the end of job `RELEASE`.
    const RELEASED: u64 = DATA + 0x810;
    let vm = boss.vm_create().unwrap();
    let mut low = groups_of(&boss, vm, 0x100_0000, 0..8, PANTHOR_GROUP_PRIORITY_LOW);
    for (k, g) in low.iter_mut().enumerate() {
        for j in 0..JOBS {
            let mut prog = Vec::new();
            if j == 0 {
                prog.extend([
                    instr::move48(4, g.va + STARTED),
                    instr::store_state(4, instr::STATE_TIMESTAMP, 0),
                ]);
            }
            prog.extend(spin_stream(g.va + DATA + 8 * j, value(g.handle, j), SPIN));
            let stamp = match j {
                _ if j == JOBS - 1 => Some(ENDED),
                RELEASE if k == 0 => Some(RELEASED),
                _ => None,
            };
            if let Some(at) = stamp {
                prog.extend([
                    instr::move48(4, g.va + at),
                    instr::store_state(4, instr::STATE_TIMESTAMP, 0),
                ]);
            }
            g.stage(&boss, &prog);
        }
    }
    // Every LOW chain reaches its ring when the test says: their first jobs wait on a fence
    // the test signals (as another device's work would, as the driver sees it).
    let go = boss.syncobj_create(false).unwrap();
    let gate = HostFence::new();
    boss.client()
        .file()
        .syncobjs()
        .replace(go, Some(Arc::new(JobSyncFence(gate.clone())).into()))
        .unwrap();
    for g in &mut low {
        g.submit_staged(&boss, Some(go));
    }
    let rvm = boss.vm_create().unwrap();
    let mut rt = group(&boss, rvm, 0x100_0000, PANTHOR_GROUP_PRIORITY_REALTIME);
    let marker = 0xfeed_0001;
    // The job notes the GPU timestamp when it starts, then a marker.
    let prog = [
        instr::move48(0, rt.va + DATA),
        instr::store_state(0, instr::STATE_TIMESTAMP, 8),
        instr::move32(2, marker),
        instr::store_multiple(2, 0, 0, 1),
    ];
    let (addr, size) = rt.write(&boss, &prog);
    let done = rt.submit_at(&boss, 0, addr, size, Some(low[0].jobs[RELEASE as usize]));
    let suspends = stat(&r, |s| s.suspends.load(Ordering::Acquire));
    gate.signal(Ok(()));
    boss.wait(&[done], WAIT).unwrap();
    assert_eq!(fence_status(&boss, done), Some(0));
    assert_eq!(rt.bo.read_u32(DATA).unwrap(), marker);
    let started = rt.bo.read_u64(DATA + 8).unwrap();
    for g in &low {
        g.finish(&boss, JOBS, SPIN);
    }
    let released = low[0].bo.read_u64(RELEASED).unwrap();
    assert!(
        released != 0 && released < started,
        "the REALTIME job started at {started}, before it was ready at {released}"
    );
    // The LOW groups held every slot when the REALTIME job became ready (each had started and
    // had work left; eight groups with work, eight slots), and still had work when it started.
    for g in &low {
        let (from, to) = (
            g.bo.read_u64(STARTED).unwrap(),
            g.bo.read_u64(ENDED).unwrap(),
        );
        assert!(
            from != 0 && from < released && started < to,
            "LOW group {} ran from {from} to {to}; the REALTIME job was ready at {released} \
             and started at {started}",
            g.handle
        );
    }
    // So the scheduler had to suspend one of them.
    assert!(stat(&r, |s| s.suspends.load(Ordering::Acquire)) > suspends);
    let hz = slow_engine_config().timings.timestamp_hz;
    let waited = started.saturating_sub(released) * 1_000_000_000 / hz;
    assert!(
        waited <= TICK_PERIOD.as_nanos() as u64,
        "the REALTIME job waited {waited} ns"
    );
    assert_eq!(resets(&r), 0);
}

/// (c) Sixteen groups, eight `HIGH` and eight `LOW` (created first), get work at the same
/// moment. No `LOW` job may run an instruction before every `HIGH` chain is done: each `LOW`
/// job first copies the `HIGH` groups' last words, which must all be there. The `HIGH` chains
/// have different lengths, so `LOW` groups get the slots of the first `HIGH` groups done while
/// others still run: only the CSG priority keeps them from running then.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn priorities_decide_who_runs() {
    let _serial = serial();
    let r = fair_rig();
    let boss = master(&r);
    const JOBS: u64 = 4;
    const SPIN: u32 = 300;
    let vm = boss.vm_create().unwrap();
    // One object every group can read: the HIGH groups' "done" words.
    let shared = boss.bo_create(0x1000).unwrap();
    let shared_va = 0x80_0000;
    boss.map(vm, &shared, shared_va).unwrap();
    let mut low = groups_of(&boss, vm, 0x100_0000, 0..8, PANTHOR_GROUP_PRIORITY_LOW);
    let mut high = groups_of(&boss, vm, 0x200_0000, 0..8, PANTHOR_GROUP_PRIORITY_HIGH);
    for g in &mut low {
        for j in 0..JOBS {
            // Copy the eight done words into this job's log, then spin.
            let log = g.va + DATA + 0x800 + 0x20 * j;
            let mut prog = vec![
                instr::move48(0, shared_va),
                instr::load_multiple(16, 0, 0, 0xff),
                instr::wait(1),
                instr::move48(4, log),
                instr::store_multiple(16, 4, 0, 0xff),
            ];
            prog.extend(spin_stream(g.va + DATA + 8 * j, value(g.handle, j), SPIN));
            g.stage(&boss, &prog);
        }
    }
    for (h, g) in high.iter_mut().enumerate() {
        for j in 0..JOBS + h as u64 {
            g.stage_spin(&boss, j, SPIN);
        }
        // The last job says the chain is done.
        let prog = [
            instr::move48(0, shared_va + 4 * h as u64),
            instr::move32(2, 1),
            instr::store_multiple(2, 0, 0, 1),
        ];
        g.stage(&boss, &prog);
    }
    let gate = gate(&boss, vm, 0x300_0000, 8);
    for g in low.iter_mut().chain(high.iter_mut()) {
        g.submit_staged(&boss, Some(gate.go));
    }
    assert_eq!(
        fence_status(&boss, gate.go),
        None,
        "the gate closed too early"
    );
    for g in high.iter().chain(&low) {
        boss.wait(&g.jobs, WAIT).unwrap();
    }
    for (h, g) in high.iter().enumerate() {
        g.check_spins(&boss, JOBS + h as u64, SPIN);
    }
    for g in &low {
        g.check_spins(&boss, JOBS, SPIN);
        for j in 0..JOBS {
            for h in 0..8 {
                let w = g.bo.read_u32(DATA + 0x800 + 0x20 * j + 4 * h).unwrap();
                assert_eq!(
                    w, 1,
                    "LOW group {} job {j} ran before HIGH group {h} was done",
                    g.handle
                );
            }
        }
    }
    assert_eq!(resets(&r), 0);
}

/// (d) A job that waits forever on a sync object, among more groups with work than slots:
/// it still times out (its group's clock runs while it holds a slot, and while it waits for
/// one with nothing inside the group able to unblock it), only its group dies, every other
/// job completes.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn a_job_waiting_forever_times_out_and_only_its_group_dies() {
    let _serial = serial();
    let r = fair_rig();
    let umd = Umd::open(r.dev()).unwrap();
    const JOBS: u64 = 8;
    const SPIN: u32 = 600;
    let vm = umd.vm_create().unwrap();
    let gpu = r.gpu().clone();
    let mut hung = group(&umd, vm, 0x100_0000, PANTHOR_GROUP_PRIORITY_MEDIUM);
    // Waits until the word at DATA exceeds 0, which nothing ever writes.
    let prog = [
        instr::move48(0, hung.va + DATA),
        instr::move48(2, 0),
        instr::sync_wait64(instr::Condition::Greater, 0, 2),
    ];
    hung.stage(&umd, &prog);
    let mut others = groups_of(&umd, vm, 0x100_0000, 1..9, PANTHOR_GROUP_PRIORITY_MEDIUM);
    stage_spins(&mut others, &umd, JOBS, SPIN);
    let gate = gate(&umd, vm, 0x300_0000, 3);
    let t0 = gpu.now_ns();
    hung.submit_staged(&umd, Some(gate.go));
    for g in &mut others {
        g.submit_staged(&umd, Some(gate.go));
    }
    let stuck = hung.jobs[0];
    // A minute of real time is plenty (the hang is found after 5 s of simulated time, the
    // driver's deadlines being on it here).
    umd.wait(&[stuck], 60_000_000_000)
        .expect("the hang was never found");
    assert_eq!(fence_status(&umd, stuck), Some(ETIMEDOUT));
    let took = gpu.now_ns() - t0;
    let limit = tyr::sched::JOB_TIMEOUT.as_nanos() as u64 + 1_000_000_000;
    assert!(took < limit, "the hang took {took} ns to be found");
    assert_eq!(
        umd.group_state(hung.handle).unwrap().0 & DRM_PANTHOR_GROUP_STATE_TIMEDOUT,
        DRM_PANTHOR_GROUP_STATE_TIMEDOUT
    );
    for g in &others {
        g.finish(&umd, JOBS, SPIN);
    }
    // A reset if the hung group held a slot when its time ran out, none if it was suspended.
    assert!(resets(&r) <= 1);
}

/// (e) Single jobs long enough to be suspended in the middle (about two ticks each), twelve
/// groups for eight slots: groups are suspended mid-stream and resumed on other slots, and
/// every register the stream set before the suspend is there after it.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn groups_suspended_mid_job_resume_on_other_slots_with_their_state() {
    let _serial = serial();
    let r = fair_rig();
    let umd = Umd::open(r.dev()).unwrap();
    const SPIN: u32 = 3000;
    let vm = umd.vm_create().unwrap();
    let mut groups = groups_of(&umd, vm, 0x100_0000, 0..12, PANTHOR_GROUP_PRIORITY_MEDIUM);
    // Which slot a resumed group gets depends on which slots the rotation freed: a round may
    // happen to put every group back where it was, so up to two rounds (one in twenty single
    // rounds moved nothing, with other tests running beside it; two rounds' streams fill the
    // groups' code space).
    //
    // A round tests something only if the gate was still closed when the last group's job was
    // in: on a loaded host the gate's chain may finish first, and groups then start one by one
    // as their jobs arrive, without competing for the slots (one full run of this file in
    // thirty, on two cores with the other tests beside it, saw fewer than four suspends).
    let mut gates = Vec::new();
    let mut held_rounds = 0;
    for round in 0..2u64 {
        for g in &mut groups {
            g.stage_spin(&umd, round, SPIN);
        }
        let gate = gate(&umd, vm, 0x300_0000 + round * 0x10_0000, 4);
        let suspends = stat(&r, |s| s.suspends.load(Ordering::Acquire));
        for g in &mut groups {
            g.submit_staged(&umd, Some(gate.go));
        }
        let held = fence_status(&umd, gate.go).is_none();
        gates.push(gate);
        for g in &groups {
            g.finish(&umd, round + 1, SPIN);
        }
        if held {
            held_rounds += 1;
            // Twelve groups for eight slots at once: at least four are suspended for others.
            assert!(stat(&r, |s| s.suspends.load(Ordering::Acquire)) >= suspends + 4);
        }
        if held_rounds >= 1 && stat(&r, |s| s.moves.load(Ordering::Acquire)) >= 1 {
            break;
        }
    }
    assert!(
        held_rounds >= 1,
        "in every round the gate opened before all jobs were submitted"
    );
    assert!(stat(&r, |s| s.moves.load(Ordering::Acquire)) >= 1);
    assert_eq!(resets(&r), 0);
}

/// A GPU reset while groups are suspended: a `HIGH` group (always resident) whose stream
/// hangs times out among twelve `MEDIUM` groups rotating through the remaining slots with
/// long jobs. The reset drops every suspend buffer; the suspended groups are replayed from
/// their unfinished job like the resident ones, and every result is right.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn a_reset_replays_suspended_groups() {
    let _serial = serial();
    // A hundred times slower still (10 ms a step): the MEDIUM chains outlast the hang's
    // timeout (5 s).
    let mut cfg = slow_engine_config();
    cfg.timings.cs_step_ns = 10_000_000;
    let r = rig_simulated(cfg);
    r.dev()
        .pm
        .set_idle_timeout(std::time::Duration::from_secs(3600));
    let boss = master(&r);
    const SPIN: u32 = 3000;
    const JOBS: u64 = 2;
    let vm = boss.vm_create().unwrap();
    let mut groups = groups_of(&boss, vm, 0x100_0000, 0..12, PANTHOR_GROUP_PRIORITY_MEDIUM);
    stage_spins(&mut groups, &boss, JOBS, SPIN);
    // The guilty group runs on its second queue, whose stream hangs in every slot.
    let mut guilty = group_q(&boss, vm, 0x200_0000, PANTHOR_GROUP_PRIORITY_HIGH, 2);
    r.gpu()
        .with(|g| (0..8).for_each(|n| g.set_stream_hang(n, 1, true)));
    let (addr, size) = guilty.write(&boss, &spin_stream(guilty.va + DATA, 1, 10));
    let gate = gate(&boss, vm, 0x300_0000, 2);
    for g in &mut groups {
        g.submit_staged(&boss, Some(gate.go));
    }
    let hung = guilty.submit_at(&boss, 1, addr, size, Some(gate.go));
    boss.wait(&[hung], 60_000_000_000)
        .expect("the hang was never found");
    assert_eq!(fence_status(&boss, hung), Some(ETIMEDOUT));
    let pending = groups
        .iter()
        .filter(|g| fence_status(&boss, g.jobs[JOBS as usize - 1]).is_none())
        .count();
    assert!(
        pending >= 8,
        "only {pending} groups still had work at the reset"
    );
    for g in &groups {
        g.finish(&boss, JOBS, SPIN);
    }
    assert!(stat(&r, |s| s.suspends.load(Ordering::Acquire)) >= 4);
    // The work item resets right after it failed the job.
    let t0 = std::time::Instant::now();
    while r.dev().sched.shared.resets.load(Ordering::Acquire) == 0 && t0.elapsed().as_secs() < 10 {
        std::thread::yield_now();
    }
    assert_eq!(resets(&r), 1, "the hung group held its slot");
}

/// Destroying groups while some are suspended, then closing the client and unplugging the
/// device while others are: every fence signals (done or `ECANCELED`), and every suspend
/// buffer goes back to the pool.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn suspended_groups_are_destroyed_and_unplugged_with_every_fence_signalled() {
    let _serial = serial();
    const ECANCELED: i32 = -125;
    const SPIN: u32 = 2500;
    let r = fair_rig();
    let umd = Umd::open(r.dev()).unwrap();
    let vm = umd.vm_create().unwrap();
    let mut groups = groups_of(&umd, vm, 0x100_0000, 0..12, PANTHOR_GROUP_PRIORITY_MEDIUM);
    stage_spins(&mut groups, &umd, 2, SPIN);
    let gate = gate(&umd, vm, 0x300_0000, 2);
    for g in &mut groups {
        g.submit_staged(&umd, Some(gate.go));
    }
    // Once groups rotate, destroy half of them (those suspended at that moment among them).
    let dev = r.dev().shared().clone();
    let t0 = std::time::Instant::now();
    while stat(&r, |s| s.suspends.load(Ordering::Acquire)) < 4 {
        assert!(t0.elapsed().as_secs() < 60, "no group was ever suspended");
        std::thread::yield_now();
    }
    for v in groups.drain(..6) {
        umd.group_destroy(v.handle).unwrap();
        for h in &v.jobs {
            let st = fence_status(&umd, *h);
            assert!(st == Some(0) || st == Some(ECANCELED), "{st:?}");
        }
    }
    // Unplug with groups suspended: every fence signals.
    let held: Vec<_> = groups
        .iter()
        .flat_map(|g| g.jobs.iter())
        .map(|h| umd.client().file().syncobjs().fence(*h).unwrap().unwrap())
        .collect();
    assert!(dev.suspend_bufs_in_use() >= 6);
    // The client goes (its groups with it, suspended ones included), then the device.
    drop(groups);
    drop(gate);
    drop(umd);
    assert_eq!(dev.suspend_bufs_in_use(), 0, "every suspend buffer is back");
    drop(dev);
    drop(r);
    for f in held {
        let st = f.status();
        assert!(st == Some(Ok(())) || st == Some(Err(ECANCELED)), "{st:?}");
    }
}

/// Suspend buffers are per group, from a window that grows a block at a time: a client that
/// creates all the groups its share of the queue interfaces allows takes one block, and another
/// client's groups still get buffers and are time-sliced. A group whose buffer cannot be had
/// (no memory for a new block) is refused with `ENOMEM` and leaves nothing behind.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn one_client_cannot_take_the_suspend_buffers_others_need() {
    let _serial = serial();
    const JOBS: u64 = 4;
    const SPIN: u32 = 600;
    let r = fair_rig();
    let dev = r.dev().shared().clone();
    let greedy = Umd::open(r.dev()).unwrap();
    let gvm = greedy.vm_create().unwrap();
    let mut hoard = Vec::new();
    loop {
        match greedy.group_create(gvm, &[RING]) {
            Ok(h) => hoard.push(h),
            Err(e) => {
                assert_eq!(
                    e.to_errno(),
                    -16,
                    "EBUSY: the file's share of queue interfaces"
                );
                break;
            }
        }
    }
    assert_eq!(hoard.len(), tyr::file::MAX_QUEUES_PER_FILE);
    assert_eq!(dev.suspend_bufs_in_use(), hoard.len());
    assert_eq!(
        dev.suspend_blocks(),
        1,
        "128 buffers of 8 KiB fill one block"
    );

    // No memory for a second block: the next group is refused and leaves nothing behind.
    let other = Umd::open(r.dev()).unwrap();
    let vm = other.vm_create().unwrap();
    let mem = r.gpu().memory();
    let pages = mem.allocated_pages();
    // In a VM of its own, whose page tables go with it.
    let vm2 = other.vm_create().unwrap();
    mem.set_page_limit(Some(mem.allocated_pages() + 16));
    assert_eq!(errno(other.group_create(vm2, &[RING])), -12, "ENOMEM");
    mem.set_page_limit(None);
    let mut d = VmDestroy { id: vm2, pad: 0 };
    other.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut d).unwrap();
    assert_eq!(
        mem.allocated_pages(),
        pages,
        "nothing of the refused group stays"
    );
    assert_eq!(dev.suspend_bufs_in_use(), hoard.len());
    assert_eq!(dev.suspend_blocks(), 1);

    // With memory, the other client's groups get buffers in a new block and share the slots
    // by time-slicing while the greedy client's groups sit idle.
    let mut groups = groups_of(&other, vm, 0x100_0000, 0..12, PANTHOR_GROUP_PRIORITY_MEDIUM);
    stage_spins(&mut groups, &other, JOBS, SPIN);
    assert_eq!(dev.suspend_blocks(), 2);
    assert_eq!(dev.suspend_bufs_in_use(), hoard.len() + groups.len());
    let gate = gate(&other, vm, 0x800_0000, 2);
    assert_eq!(dev.suspend_bufs_in_use(), hoard.len() + groups.len() + 1);
    for g in &mut groups {
        g.submit_staged(&other, Some(gate.go));
    }
    for g in &groups {
        g.finish(&other, JOBS, SPIN);
    }
    assert_eq!(resets(&r), 0);
    assert!(stat(&r, |s| s.suspends.load(Ordering::Acquire)) >= 4);

    // Every place goes back; the blocks stay for the next groups.
    for h in hoard {
        greedy.group_destroy(h).unwrap();
    }
    drop(groups);
    drop(gate);
    drop(other);
    assert_eq!(dev.suspend_bufs_in_use(), 0);
    assert_eq!(dev.suspend_blocks(), 2);
}

/// Ten groups with chains of spinning jobs, all held back by a gate: the rig, the client, the
/// groups and the gate's last job.
fn busy_groups(n: u64, jobs: u64, spin: u32) -> (Rig, Umd, Vec<Grp>, Gate) {
    let r = fair_rig();
    let umd = Umd::open(r.dev()).unwrap();
    let vm = umd.vm_create().unwrap();
    let mut groups = groups_of(&umd, vm, 0x100_0000, 0..n, PANTHOR_GROUP_PRIORITY_MEDIUM);
    stage_spins(&mut groups, &umd, jobs, spin);
    let gate = gate(&umd, vm, 0x800_0000, 1);
    for g in &mut groups {
        g.submit_staged(&umd, Some(gate.go));
    }
    umd.wait(&[gate.go], WAIT).unwrap();
    // Every slot taken by a group in the middle of its first job.
    let t0 = std::time::Instant::now();
    while resident(&r) < 8 {
        assert!(
            t0.elapsed().as_secs() < 60,
            "the groups never took the slots"
        );
        std::thread::yield_now();
    }
    (r, umd, groups, gate)
}

/// A system suspend while every slot runs a group in the middle of a job: the groups are
/// suspended through the firmware (their state saved), nothing runs while the device sleeps,
/// and after the resume every job completes with the result a run without the suspend gives,
/// in order, without a reset.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn a_system_suspend_saves_running_groups_and_the_resume_continues_them() {
    let _serial = serial();
    const JOBS: u64 = 2;
    const SPIN: u32 = 3000;
    let (r, umd, groups, _gate) = busy_groups(10, JOBS, SPIN);
    let suspends = stat(&r, |s| s.suspends.load(Ordering::Acquire));
    let resumes = stat(&r, |s| s.resumes.load(Ordering::Acquire));
    tyr::driver::suspend(r.dev()).unwrap();
    let saved = stat(&r, |s| s.suspends.load(Ordering::Acquire)) - suspends;
    // All eight resident groups have work when the suspend is asked for; the simulated GPU
    // runs on its own meanwhile (the rest of the work takes about 70 ms of host time), so on a
    // busy host some may finish first.
    assert!(saved >= 1, "no group was saved");
    assert!(!r.dev().pm.is_powered());
    assert_eq!(resident(&r), 0);
    let pending = |groups: &[Grp]| {
        groups
            .iter()
            .flat_map(|g| &g.jobs)
            .filter(|h| fence_status(&umd, **h).is_none())
            .count()
    };
    let before = pending(&groups);
    assert!(before >= saved as usize, "{before} jobs pending");
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(
        pending(&groups),
        before,
        "nothing runs while the device sleeps"
    );
    tyr::driver::resume(r.dev()).unwrap();
    for g in &groups {
        g.finish(&umd, JOBS, SPIN);
    }
    assert_eq!(resets(&r), 0);
    assert!(stat(&r, |s| s.resumes.load(Ordering::Acquire)) - resumes >= saved);
}

/// A system suspend the firmware does not acknowledge for the groups on the GPU escalates to a
/// reset: the suspend still succeeds, and after the resume every job runs again from the
/// start of the one it was in, with the right result.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn a_system_suspend_the_firmware_ignores_resets_and_loses_nothing() {
    let _serial = serial();
    const JOBS: u64 = 2;
    const SPIN: u32 = 3000;
    // The reset needs a resident group still in its work when the suspend comes. The
    // simulated GPU runs on its own, and on a loaded host it has finished every group's work
    // before the test thread asks for the suspend in about one run in three: then nothing is
    // suspended (and nothing escalates), and the scenario is run again on a fresh device.
    for _ in 0..5 {
        let (r, umd, groups, _gate) = busy_groups(10, JOBS, SPIN);
        r.gpu().with(|g| {
            (0..8).for_each(|n| g.set_csg_ignores(n, mali_sim::csf::csg::STATE_SUSPEND, true))
        });
        // Counted by the system suspend only: a time-slicing suspend the firmware acknowledged
        // before it began ignoring them may still complete on the work item around here (one
        // run of this file in about forty saw `suspends` move).
        let saves = stat(&r, |s| s.sleep_saves.load(Ordering::Acquire));
        tyr::driver::suspend(r.dev()).unwrap();
        let escalated = resets(&r);
        assert!(!r.dev().pm.is_powered());
        // A firmware that ignores suspends never saves a group.
        assert_eq!(stat(&r, |s| s.sleep_saves.load(Ordering::Acquire)), saves);
        tyr::driver::resume(r.dev()).unwrap();
        for g in &groups {
            g.finish(&umd, JOBS, SPIN);
        }
        assert_eq!(resets(&r), escalated, "a reset after the resume");
        match escalated {
            1 => return,
            0 => continue,
            n => panic!("{n} resets for one stuck suspend"),
        }
    }
    panic!(
        "in five runs every group finished before the suspend: the stuck suspend was never tested"
    );
}

/// A time-slicing suspend the firmware does not acknowledge: the GPU is reset (no group is
/// blamed: the waiting groups' and the resident groups' jobs all complete, with the right
/// results).
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn a_rotation_the_firmware_ignores_resets_and_every_group_finishes() {
    let _serial = serial();
    const JOBS: u64 = 2;
    const SPIN: u32 = 3000;
    let (r, umd, groups, _gate) = busy_groups(10, JOBS, SPIN);
    r.gpu().with(|g| {
        (0..8).for_each(|n| g.set_csg_ignores(n, mali_sim::csf::csg::STATE_SUSPEND, true))
    });
    for g in &groups {
        g.finish(&umd, JOBS, SPIN);
    }
    assert_eq!(resets(&r), 1, "the stuck rotation was reset once");
}

/// System suspends and resumes in a loop while four threads submit chains of jobs to their own
/// groups (twelve groups in all, more than the slots): every suspend succeeds or says the
/// device is busy, and in the end every job has completed with its result, in order. At least
/// three suspend cycles complete while the threads are half-way through their submissions
/// (each waits for them there), however fast the host runs the simulated GPU.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn system_suspends_race_with_submissions_and_lose_nothing() {
    let _serial = serial();
    const JOBS: u64 = 12;
    const SPIN: u32 = 40;
    const CYCLES: usize = 3;
    let r = fair_rig();
    let dev = r.dev();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let cycles = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|t| {
        let cycles = &cycles;
        let workers: Vec<_> = (0..4u64)
            .map(|w| {
                t.spawn(move || {
                    let umd = Umd::open(dev).unwrap();
                    let vm = umd.vm_create().unwrap();
                    let mut groups =
                        groups_of(&umd, vm, 0x100_0000, 0..3, PANTHOR_GROUP_PRIORITY_MEDIUM);
                    for j in 0..JOBS {
                        for g in &mut groups {
                            g.stage_spin(&umd, j, SPIN + w as u32);
                            let after = g.jobs.last().copied();
                            g.submit_staged(&umd, after);
                        }
                        if j == JOBS / 2 {
                            // Half of each chain is in: the rest follows only after
                            // `CYCLES` suspend cycles, which race with the jobs in flight and
                            // with the other workers' submissions.
                            let t0 = std::time::Instant::now();
                            while cycles.load(Ordering::Acquire) < CYCLES {
                                assert!(t0.elapsed().as_secs() < 60, "no suspend cycles");
                                std::thread::sleep(std::time::Duration::from_micros(100));
                            }
                        }
                    }
                    for g in &groups {
                        g.finish(&umd, JOBS, SPIN + w as u32);
                    }
                })
            })
            .collect();
        let sleeper = t.spawn(|| {
            while !stop.load(Ordering::Acquire) {
                match tyr::driver::suspend(dev) {
                    Ok(()) => {
                        std::thread::sleep(std::time::Duration::from_micros(300));
                        tyr::driver::resume(dev).unwrap();
                        cycles.fetch_add(1, Ordering::AcqRel);
                    }
                    Err(e) => panic!("suspend: {e:?}"),
                }
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        });
        // Every worker is joined before the sleeper is stopped, and the sleeper stopped before
        // a worker's failure is reported: a failure ends the test instead of leaving the sleeper
        // cycling forever.
        let done: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
        stop.store(true, Ordering::Release);
        sleeper.join().unwrap();
        for d in done {
            d.unwrap();
        }
        let cycles = cycles.load(Ordering::Acquire);
        assert!(cycles >= CYCLES, "only {cycles} suspend cycles");
    });
    assert!(!dev.pm.is_suspended());
    assert_eq!(resets(&r), 0);
}

/// Queue priorities inside a group (`drm_panthor_queue_create::priority`, carried to the
/// stream's `CS_CONFIG`): two jobs released at the same moment on two queues of one group, the
/// one on the higher-priority queue runs first, whichever queue that is.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn a_higher_priority_queue_of_a_group_runs_first() {
    let _serial = serial();
    const SPIN: u32 = 2000;
    let r = fair_rig();
    let umd = Umd::open(r.dev()).unwrap();
    let vm = umd.vm_create().unwrap();
    for (k, prios) in [(0u64, [2u8, 9]), (1, [12, 3])] {
        let mut g = group_with(
            &umd,
            vm,
            0x100_0000 + k * 0x10_0000,
            PANTHOR_GROUP_PRIORITY_MEDIUM,
            &[(RING, prios[0]), (RING, prios[1])],
        );
        let (handle, va) = (g.handle, g.va);
        let mut jobs = Vec::new();
        let mut done = [0; 2];
        for (q, d) in done.iter_mut().enumerate() {
            let q64 = q as u64;
            let mut prog = spin_stream(va + DATA + 8 * q64, value(handle, q64), SPIN);
            // Then the time the job ended.
            prog.push(instr::move48(0, va + DATA + 0x100 + 8 * q64));
            prog.push(instr::store_state(0, instr::STATE_TIMESTAMP, 0));
            let (addr, size) = g.write(&umd, &prog);
            *d = umd.syncobj_create(false).unwrap();
            jobs.push(Job::new(q as u32, addr, size).signal(*d));
        }
        // One GROUP_SUBMIT: both jobs reach their rings in the same turn of the work item.
        umd.submit(handle, &jobs).unwrap();
        umd.wait(&done, WAIT).unwrap();
        let ended = |q: u64| g.bo.read_u64(DATA + 0x100 + 8 * q).unwrap();
        let (high, low) = if prios[0] > prios[1] { (0, 1) } else { (1, 0) };
        assert!(
            ended(high) < ended(low),
            "queue priorities {prios:?}: the higher queue's job did not end first ({} vs {})",
            ended(low),
            ended(high)
        );
        for q in 0..2u64 {
            assert_eq!(fence_status(&umd, done[q as usize]), Some(0));
            assert_eq!(g.bo.read_u32(DATA + 8 * q).unwrap(), SPIN);
            assert_eq!(g.bo.read_u32(DATA + 8 * q + 4).unwrap(), value(handle, q));
        }
    }
    assert_eq!(resets(&r), 0);
}

/// Four clients create and destroy groups from their own threads while the window of suspend
/// buffers grows past its first block: every group gets a distinct buffer, none is lost, and
/// when all groups are gone every place is back.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn suspend_buffers_race_with_group_creation_and_destruction() {
    let _serial = serial();
    let r = fair_rig();
    let dev = r.dev();
    // The buffers of the live groups of every thread.
    let live = std::sync::Mutex::new(std::collections::HashSet::new());
    let peak = std::sync::Barrier::new(4);
    std::thread::scope(|t| {
        for _ in 0..4 {
            t.spawn(|| {
                let umd = Umd::open(dev).unwrap();
                let vm = umd.vm_create().unwrap();
                let file = umd.client().file().inner();
                for _ in 0..3 {
                    // 40 groups each, more than the first block holds together.
                    let groups: Vec<(u32, u64)> = (0..40)
                        .map(|_| {
                            let h = umd.group_create(vm, &[RING]).unwrap();
                            let va = file.group(h).unwrap().suspend_va();
                            assert_ne!(va, 0);
                            assert!(live.lock().unwrap().insert(va), "{va:#x} given twice");
                            (h, va)
                        })
                        .collect();
                    // All 160 live at once: the window has grown by then.
                    peak.wait();
                    for (h, va) in groups {
                        live.lock().unwrap().remove(&va);
                        umd.group_destroy(h).unwrap();
                    }
                }
            });
        }
    });
    let shared = dev.shared();
    assert_eq!(shared.suspend_bufs_in_use(), 0);
    assert_eq!(shared.suspend_blocks(), 2);
}

/// A start the firmware does not acknowledge: the driver does not count the slot as running
/// but resets the GPU at once (not after a job timeout), and the group runs after the reset.
#[test]
#[cfg_attr(miri, ignore = "minutes under Miri")]
fn a_start_the_firmware_ignores_resets_at_once() {
    let _serial = serial();
    const SPIN: u32 = 100;
    let r = fair_rig();
    let umd = Umd::open(r.dev()).unwrap();
    let vm = umd.vm_create().unwrap();
    r.gpu()
        .with(|g| (0..8).for_each(|n| g.set_csg_ignores(n, mali_sim::csf::csg::STATE_START, true)));
    let mut g = group(&umd, vm, 0x100_0000, PANTHOR_GROUP_PRIORITY_MEDIUM);
    g.stage_spin(&umd, 0, SPIN);
    g.submit_staged(&umd, None);
    g.finish(&umd, 1, SPIN);
    assert_eq!(resets(&r), 1);
    let log = r.dev().backend.log_lines();
    assert!(
        log.iter()
            .any(|l| l.contains("did not acknowledge a start")),
        "{log:?}"
    );
    assert!(!log.iter().any(|l| l.contains("timed out")), "{log:?}");
}
