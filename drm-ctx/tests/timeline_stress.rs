// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Timelines under concurrency: submitters add points with pending fences, a "GPU" thread
//! signals them out of order, waiters block in `SYNCOBJ_TIMELINE_WAIT` (with and without
//! `WAIT_FOR_SUBMIT`), others poll with `SYNCOBJ_QUERY`, signal from the CPU and transfer points
//! between timelines. At the end every wait has succeeded, every timeline reports its newest
//! point, walking the chains has collected the signalled links, no waker is left on a fence,
//! and once the file is closed no chain link is alive.
//!
//! This binary holds one test, so that the count of live chain links is this test's alone.

mod common;

use common::manual::Manual;
use common::*;
use drm_ctx::drm::OpenOptions;
use drm_ctx::host::syncobj::*;
use drm_ctx::host::Client;
use drm_ctx::Error;
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

type C = Client<TestDriver>;

fn timeline_wait(client: &C, h: u32, p: u64, flags: u32) -> Result<u32, Error> {
    let mut a = DrmSyncobjTimelineWait {
        handles: client.mem().alloc_bytes(&h.to_le_bytes()).unwrap(),
        points: client.mem().alloc_bytes(&p.to_le_bytes()).unwrap(),
        timeout_nsec: monotonic_ns() + 60_000_000_000,
        count_handles: 1,
        flags,
        ..Default::default()
    };
    let r = client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &mut a);
    client.mem().free(a.handles).unwrap();
    client.mem().free(a.points).unwrap();
    r
}

fn query(client: &C, h: u32) -> u64 {
    let out = client.mem().alloc(8).unwrap();
    let mut a = DrmSyncobjTimelineArray {
        handles: client.mem().alloc_bytes(&h.to_le_bytes()).unwrap(),
        points: out,
        count_handles: 1,
        flags: 0,
    };
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_QUERY, &mut a).unwrap();
    let v = client.mem().read_vec(out, 8).unwrap();
    client.mem().free(a.handles).unwrap();
    client.mem().free(out).unwrap();
    u64::from_le_bytes(v.try_into().unwrap())
}

#[test]
#[cfg_attr(miri, ignore = "threads blocking on real time, too slow under Miri")]
fn waiters_and_signallers_leave_no_link_behind() {
    const TIMELINES: usize = 3;
    const POINTS: u64 = 300;
    const WAITERS: usize = 4;
    {
        let (_p, reg, _c) = registered();
        let client = Arc::new(Client::open(reg.device(), OpenOptions::render()).unwrap());
        let table = client.file().syncobjs();
        let tls: Vec<u32> = (0..TIMELINES)
            .map(|_| table.create(None).unwrap())
            .collect();
        // A timeline the CPU signals and points are transferred to.
        let cpu = table.create(None).unwrap();
        let all_fences: Arc<Mutex<Vec<Manual>>> = Arc::default();

        // The GPU: signals the fences it is given in batches, newest first.
        let (gpu_tx, gpu_rx) = mpsc::channel::<Manual>();
        let gpu = thread::spawn(move || {
            let mut batch = Vec::new();
            loop {
                match gpu_rx.recv_timeout(Duration::from_millis(1)) {
                    Ok(m) => {
                        batch.push(m);
                        if batch.len() < 7 {
                            continue;
                        }
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
                for m in batch.drain(..).rev() {
                    m.signal();
                }
            }
            for m in batch.drain(..).rev() {
                m.signal();
            }
        });

        let mut threads = Vec::new();
        // Submitters: one per timeline, points 1..=POINTS, preparing the link first.
        for &h in &tls {
            let client = client.clone();
            let gpu_tx = gpu_tx.clone();
            let all = all_fences.clone();
            threads.push(thread::spawn(move || {
                let t = client.file().syncobjs();
                for p in 1..=POINTS {
                    let link = t.alloc_point().unwrap();
                    let (m, f) = Manual::new();
                    all.lock().unwrap().push(m.clone());
                    t.add_point(h, link, f, p).unwrap();
                    gpu_tx.send(m).unwrap();
                    if p % 50 == 0 {
                        thread::yield_now();
                    }
                }
            }));
        }
        drop(gpu_tx);
        // Waiters: points of every timeline, waiting for submission when needed.
        for w in 0..WAITERS {
            let client = client.clone();
            let tls = tls.clone();
            threads.push(thread::spawn(move || {
                for i in 0..40u64 {
                    let h = tls[(w + i as usize) % TIMELINES];
                    let p = (i * 37 + w as u64 * 11) % POINTS + 1;
                    let flags = if i % 2 == 0 {
                        DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT
                    } else {
                        DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE
                    };
                    assert_eq!(timeline_wait(&client, h, p, flags), Ok(0));
                    if flags == DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT {
                        // Once point p has signalled, the timeline reports p or more.
                        assert!(query(&client, h) >= p);
                    }
                }
            }));
        }
        // The CPU: signals points of its own timeline and transfers submitted points there.
        {
            let client = client.clone();
            let tls = tls.clone();
            threads.push(thread::spawn(move || {
                let t = client.file().syncobjs();
                for p in 1..=100u64 {
                    let mut a = DrmSyncobjTransfer {
                        src_handle: tls[p as usize % TIMELINES],
                        dst_handle: cpu,
                        src_point: p,
                        dst_point: 2 * p,
                        flags: DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
                        pad: 0,
                    };
                    assert_eq!(client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TRANSFER, &mut a), Ok(0));
                    let link = t.alloc_point().unwrap();
                    t.add_point(cpu, link, Arc::new(SignalledFence).into(), 2 * p + 1)
                        .unwrap();
                }
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
        gpu.join().unwrap();

        for &h in &tls {
            assert_eq!(timeline_wait(&client, h, POINTS, 0), Ok(0));
            assert_eq!(query(&client, h), POINTS);
        }
        assert_eq!(timeline_wait(&client, cpu, 201, 0), Ok(0));
        assert_eq!(query(&client, cpu), 201);
        // The walks of the queries collected every signalled link: one per timeline is left
        // (and nothing else holds links).
        assert_eq!(live_chain_links(), TIMELINES + 1);
        for m in all_fences.lock().unwrap().iter() {
            assert_eq!(m.queued(), 0);
        }
        drop(client);
        drop(reg);
    }
    assert_eq!(live_chain_links(), 0);
}
