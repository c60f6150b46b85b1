// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Two GPU queues with cross-queue dependencies, credits, a hardware fault and a hang.
//!
//! A Mali-style driver has one queue per hardware ring: here a geometry queue and a fragment
//! queue, each with a ring of 4 credits. Fragment jobs depend on the geometry jobs whose output
//! they read. The queue holds every job back until its dependencies have signalled and its
//! cost fits the free credits, then hands it to the driver's `run_job` in commit order. A
//! simulated ring completes jobs step by step: one geometry job faults (`EIO`), so the
//! fragment job depending on it fails with the same error without ever running; another hangs
//! and is failed by the timeout handler (`ETIMEDOUT`). Every done fence is checked against the
//! result computed from the job table.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
use jobqueue::time::Clock;
use jobqueue::*;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Hw {
    Completes,
    Faults,
    Hangs,
}

/// The job's payload: its name, how the hardware will treat it, its preallocated ring fence,
/// and (for checking only) the done fences it depends on.
struct Work {
    name: &'static str,
    hw: Hw,
    fence: HostFence,
    waits_for: Vec<HostFence>,
}

/// A hardware ring: records what it was given (vectors preallocated, no allocation in run_job).
struct Ring {
    on_ring: Vec<(Hw, HostFence)>,
    log: Rc<RefCell<Vec<&'static str>>>,
    started_too_early: usize,
}

type GpuQueue = Queue<Ring, TestExecutor, ManualClock, 8>;

impl Backend for Ring {
    type Fence = HostFence;
    type Alloc = HostAlloc;
    type Payload = Work;
    fn run_job(
        &mut self,
        job: RunJob<'_, Work>,
        _: &SignalCtx<'_>,
    ) -> Result<HostFence, FenceError> {
        let w = job.payload();
        if !w.waits_for.iter().all(|f| f.status() == Some(Ok(()))) {
            self.started_too_early += 1;
        }
        self.log.borrow_mut().push(w.name);
        self.on_ring.push((w.hw, w.fence.clone()));
        Ok(w.fence.clone())
    }
    fn timed_out(&mut self, job: TimedOutJob<'_, Work>, _: &SignalCtx<'_>) -> TimeoutAction {
        println!(
            "  timeout: {} hung; the driver stops it and fails it",
            job.payload().name
        );
        TimeoutAction::Fail
    }
}

/// Completes every job on the ring that the hardware finishes.
fn hardware_step(ring: &mut Ring) {
    for (hw, fence) in ring.on_ring.drain(..).filter(|(hw, _)| *hw != Hw::Hangs) {
        fence.signal(if hw == Hw::Faults {
            Err(FenceError::IO)
        } else {
            Ok(())
        });
    }
}

fn main() -> Result<(), String> {
    const TIMEOUT: Duration = Duration::from_millis(10);
    // (name, queue, cost, dependencies, hardware behaviour), in commit order.
    let jobs: [(&str, usize, u32, &[usize], Hw); 6] = [
        ("geom-1", 0, 2, &[], Hw::Completes),
        ("geom-2", 0, 2, &[], Hw::Faults),
        ("geom-3", 0, 3, &[], Hw::Hangs),
        ("frag-1", 1, 2, &[0], Hw::Completes),
        ("frag-2", 1, 2, &[1], Hw::Completes),
        ("frag-3", 1, 3, &[3], Hw::Completes),
    ];
    let (exec, clock, alloc) = (TestExecutor::new(), ManualClock::new(), HostAlloc::new());
    let log = Rc::new(RefCell::new(Vec::with_capacity(jobs.len())));
    let config = QueueConfig::new(4).with_timeout(TIMEOUT);
    let new_queue = || {
        let ring = Ring {
            on_ring: Vec::with_capacity(8),
            log: log.clone(),
            started_too_early: 0,
        };
        GpuQueue::new(ring, exec.clone(), clock.clone(), config).map_err(|e| e.to_string())
    };
    let mut queues = [new_queue()?, new_queue()?];

    let mut done: Vec<HostFence> = Vec::new();
    for &(name, q, cost, deps, hw) in &jobs {
        let waits_for = deps.iter().map(|&d| done[d].clone()).collect();
        let work = Work {
            name,
            hw,
            fence: HostFence::new(),
            waits_for,
        };
        let mut job = PreparedJob::new(
            &alloc,
            queues[q].config(),
            Cost(cost),
            MaxDeps(deps.len()),
            work,
        )
        .map_err(|r| r.error.to_string())?;
        for &d in deps {
            job.add_dependency(&done[d]).map_err(|e| e.to_string())?;
        }
        let slot = queues[q].reserve().map_err(|e| e.to_string())?;
        done.push(slot.commit(job).done);
        let names: Vec<_> = deps.iter().map(|&d| jobs[d].0).collect();
        println!("committed {name} on queue {q}: cost {cost}, waits for {names:?}");
    }

    let run =
        |queues: &mut [GpuQueue; 2]| exec.run_until_idle(|| queues.iter_mut().for_each(Queue::run));
    run(&mut queues);
    for step in 1..=3 {
        let credits = queues.each_ref().map(|q| q.credits_in_use());
        println!(
            "step {step}: ran so far {:?}, credits in use {credits:?}",
            log.borrow()
        );
        if credits.iter().any(|&c| c > config.capacity()) {
            return Err(format!("credits {credits:?} exceed the capacity"));
        }
        queues
            .iter_mut()
            .for_each(|q| hardware_step(q.backend_mut()));
        run(&mut queues);
    }
    clock.advance(TIMEOUT * 2);
    exec.fire_timers(clock.now());
    run(&mut queues);

    // Expected results, from the table: a failed dependency's error wins, then the hardware's.
    let mut expected: Vec<FenceResult> = Vec::new();
    let mut ok = true;
    for (i, &(name, _, _, deps, hw)) in jobs.iter().enumerate() {
        let want = match (deps.iter().find_map(|&d| expected[d].err()), hw) {
            (Some(e), _) => Err(e),
            (None, Hw::Completes) => Ok(()),
            (None, Hw::Faults) => Err(FenceError::IO),
            (None, Hw::Hangs) => Err(FenceError::TIMED_OUT),
        };
        let got = done[i].status();
        let ran = log.borrow().contains(&name);
        let shown = match got {
            Some(Ok(())) => "ok".to_string(),
            Some(Err(e)) => format!("error {}", e.to_errno()),
            None => "still pending".to_string(),
        };
        println!("  {name}: done fence {shown:<10} ran on the ring: {ran}");
        ok &= got == Some(want) && ran == deps.iter().all(|&d| expected[d].is_ok());
        expected.push(want);
    }
    println!("run order: {}", log.borrow().join(" -> "));
    let early: usize = queues.iter().map(|q| q.backend().started_too_early).sum();
    if !ok || early != 0 || queues.iter().any(|q| q.pending_jobs() != 0) {
        return Err("a done fence or the run order does not match the job table".into());
    }
    println!("all checks passed");
    Ok(())
}
