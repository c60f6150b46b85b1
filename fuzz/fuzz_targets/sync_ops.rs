// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Sync-op arrays on the simulated G610: GROUP_SUBMITs and asynchronous VM_BINDs whose jobs wait
//! on and signal binary and timeline syncobjs, mixed with CPU timeline signals, points held back
//! by fences the program releases later (pending chains many points long), binds and submits
//! without syncs.
//!
//! Each sync op is built from the input: any handle of a small set (some not syncobjs), flags
//! that are right or wrong, points that go forwards, backwards, stay, are 0 or `u64::MAX`.
//! Invariants: nothing panics; every error is a plain errno; a call that fails changes no
//! syncobj (same fence, same points); every call returns in bounded time; once the held points
//! are released and the client closed, every job has finished, no chain link is left, nothing
//! of the scheduler is left and the simulator holds only what it held after probe.

#![no_main]

use std::sync::Arc;
use std::time::{Duration, Instant};

use drm_ctx::device;
use drm_ctx::host::syncobj::{live_chain_links, FenceRef};
use jobqueue::host::HostFence;
use jobqueue::SignalFence as _;
use libfuzzer_sys::fuzz_target;
use mali_sim::Config;
use tyr::driver;
use tyr::host::{HostBackend, JobSyncFence};
use tyr::uapi::*;
use tyr::umd::{Job, Umd};

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn done(&self) -> bool {
        self.0.is_empty()
    }
}

fn errno<T>(r: drm_ctx::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => {
            let n = e.to_errno();
            assert!((-4095..0).contains(&n), "not an errno: {n}");
            n
        }
    }
}

/// What a failing call must leave alone: each handle's fence (by identity) and points.
/// What a failed call must leave as it was, per handle: the fence the syncobj holds and the
/// last point submitted to it. (The last point *signalled* is not compared: it moves on its
/// own as jobs submitted earlier finish, whatever the failed call did.)
fn snapshot(u: &Umd, handles: &[u32]) -> Vec<(Option<usize>, u64)> {
    let t = u.client().file().syncobjs();
    handles
        .iter()
        .map(|&h| {
            let f = t
                .fence(h)
                .ok()
                .flatten()
                .map(|f| FenceRef::as_ptr(&f) as usize);
            let last = u.syncobj_query(&[h], true).map_or(0, |v| v[0]);
            (f, last)
        })
        .collect()
}

/// The stream every job runs: one instruction.
const CODE_VA: u64 = 0x100_0000;

fuzz_target!(|data: &[u8]| {
    let parent = device::Device::new("mali").unwrap();
    let mut cfg = Config::g610();
    cfg.memory.page_limit = Some(65536);
    let reg = driver::probe(&parent, HostBackend::new(cfg)).unwrap();
    let dev = reg.device();
    let memory = dev.backend.gpu().memory().clone();
    let links = live_chain_links();
    let u = Umd::open(dev).unwrap();
    let vm = u.vm_create().unwrap();
    let bo = u.bo_create(0x10000).unwrap();
    u.write_stream(&bo, 0, &[tyr::csf::instr::move32(2, 1)])
        .unwrap();
    u.map(vm, &bo, CODE_VA).unwrap();
    let group = u.group_create(vm, &[0x1000, 0x1000]).unwrap();
    // Handles 1..=4 are syncobjs (two timelines, two binary), 5 is a timeline made later, and
    // 0 and 9 are never syncobjs.
    let mut handles = vec![
        u.syncobj_create(false).unwrap(),
        u.syncobj_create(false).unwrap(),
        u.syncobj_create(true).unwrap(),
        u.syncobj_create(false).unwrap(),
    ];
    let pick = |b: u8, hs: &[u32]| match b % 8 {
        0 => 0,
        7 => 9,
        i => hs.get(usize::from(i) - 1).copied().unwrap_or(0),
    };
    let mut held: Vec<HostFence> = Vec::new();
    let mut next_point = [1u64; 8];
    let mut input = Input(data);
    let mut steps = 0;
    while !input.done() && steps < 48 {
        steps += 1;
        let op = input.u8();
        match op % 6 {
            0 | 1 => {
                // A submit of 1..=4 jobs, each with up to 8 sync ops.
                let n = 1 + usize::from(input.u8() % 4);
                let mut jobs = Vec::new();
                for _ in 0..n {
                    let mut j = if input.u8() & 1 == 0 {
                        Job::new(u32::from(input.u8() % 3), CODE_VA, 8)
                    } else {
                        Job::new(0, 0, 0)
                    };
                    for _ in 0..input.u8() % 9 {
                        let b = input.u8();
                        let h = pick(input.u8(), &handles);
                        let k = usize::from(h as u8 % 8);
                        let point = match input.u8() % 6 {
                            0 => 0,
                            1 => u64::MAX,
                            2 => next_point[k].saturating_sub(2),
                            3 => next_point[k].saturating_sub(1),
                            _ => {
                                next_point[k] += 1;
                                next_point[k]
                            }
                        };
                        let mut flags = if b & 1 == 0 {
                            DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_TIMELINE_SYNCOBJ
                        } else {
                            DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ
                        };
                        if b & 2 != 0 {
                            flags |= DRM_PANTHOR_SYNC_OP_SIGNAL;
                        }
                        if b & 0xf0 == 0xf0 {
                            flags |= 1 << (b & 0x1f); // maybe an unknown flag
                        }
                        j.points.push(SyncOp {
                            flags,
                            handle: h,
                            timeline_value: point,
                        });
                    }
                    jobs.push(j);
                }
                let before = snapshot(&u, &handles);
                let t0 = Instant::now();
                let r = errno(u.submit(group, &jobs));
                assert!(
                    t0.elapsed() < Duration::from_secs(5),
                    "a submit took {:?}",
                    t0.elapsed()
                );
                if r != 0 {
                    assert_eq!(
                        snapshot(&u, &handles),
                        before,
                        "a failed submit ({r}) changed a syncobj"
                    );
                }
            }
            2 => {
                // An asynchronous bind (map, unmap or sync-only) with up to 4 sync ops.
                let mut syncs = Vec::new();
                for _ in 0..input.u8() % 5 {
                    let b = input.u8();
                    let h = pick(input.u8(), &handles);
                    let k = usize::from(h as u8 % 8);
                    next_point[k] += u64::from(b >> 6);
                    syncs.push(SyncOp {
                        flags: if b & 1 == 0 {
                            DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_TIMELINE_SYNCOBJ
                        } else {
                            DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ
                        } | if b & 2 != 0 {
                            DRM_PANTHOR_SYNC_OP_SIGNAL
                        } else {
                            0
                        },
                        handle: h,
                        timeline_value: if b & 4 != 0 { next_point[k] } else { 0 },
                    });
                }
                let syncs = u.array(&syncs).unwrap_or_default();
                let kind = input.u8() % 3;
                let bind = VmBindOp {
                    flags: match kind {
                        0 => DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
                        1 => DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
                        _ => DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY,
                    },
                    bo_handle: if kind == 0 { bo.handle } else { 0 },
                    bo_offset: 0,
                    va: if kind == 2 {
                        0
                    } else {
                        0x200_0000 + (u64::from(input.u8() % 4) << 16)
                    },
                    size: if kind == 2 { 0 } else { 0x1000 },
                    syncs,
                };
                let before = snapshot(&u, &handles);
                let r = errno(u.bind(vm, DRM_PANTHOR_VM_BIND_ASYNC, &[bind]));
                if r != 0 {
                    assert_eq!(
                        snapshot(&u, &handles),
                        before,
                        "a failed bind ({r}) changed a syncobj"
                    );
                }
            }
            3 => {
                // A CPU signal of a timeline point (maybe backwards).
                let h = pick(input.u8(), &handles);
                let k = usize::from(h as u8 % 8);
                let p = match input.u8() % 3 {
                    0 => next_point[k].saturating_sub(1),
                    1 => u64::MAX,
                    _ => {
                        next_point[k] += 1;
                        next_point[k]
                    }
                };
                let _ = errno(u.timeline_signal(&[h], &[p]));
            }
            4 => {
                // A point held back by a fence released later, or a release.
                if input.u8() & 1 == 0 || held.is_empty() {
                    let h = pick(input.u8(), &handles);
                    let k = usize::from(h as u8 % 8);
                    next_point[k] += 1;
                    let gate = HostFence::new();
                    let t = u.client().file().syncobjs();
                    let f: FenceRef = Arc::new(JobSyncFence(gate.clone())).into();
                    if let Ok(link) = t.alloc_point() {
                        if t.add_point(h, link, f, next_point[k]).is_ok() {
                            held.push(gate);
                        }
                    }
                } else {
                    let i = usize::from(input.u8()) % held.len();
                    let ok = input.u8() & 1 == 0;
                    held.swap_remove(i).signal(if ok {
                        Ok(())
                    } else {
                        Err(jobqueue::FenceError::IO)
                    });
                }
            }
            _ => {
                // A timeline made or destroyed.
                if handles.len() < 5 {
                    if let Ok(h) = u.syncobj_create(false) {
                        handles.push(h);
                    }
                } else if let Some(h) = handles.pop() {
                    let _ = errno(u.syncobj_destroy(h));
                }
            }
        }
    }
    for gate in held {
        gate.signal(Ok(()));
    }
    drop(bo);
    drop(u);
    assert_eq!(dev.sched.group_count(), 0, "a group outlived its file");
    assert_eq!(
        dev.sched.bind_queue_count(),
        0,
        "a bind queue outlived its VM"
    );
    drop(reg);
    drop(parent);
    let t0 = Instant::now();
    while memory.live_allocations() != 0 || live_chain_links() != links {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "left: {} DMA allocations, {} chain links (before: {links})",
            memory.live_allocations(),
            live_chain_links()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
});
