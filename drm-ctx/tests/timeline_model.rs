// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A timeline syncobj against a reference model: random points added (by a driver with pending
//! fences, or by `TIMELINE_SIGNAL` already signalled, in order or not), fences signalled in any
//! order, and after every step `SYNCOBJ_QUERY` and `SYNCOBJ_TIMELINE_WAIT` (plain and
//! `WAIT_AVAILABLE`) compared with what the model says Linux answers.
//!
//! The model is a list of links `(point, context, signalled)`:
//!
//! - a point above the newest continues its context; one that is not starts a new context and
//!   carries the newest point's number (`dma_fence_chain_init`);
//! - point `p > 0` is available if the timeline has links and `p` is at most the newest point;
//!   it has signalled once every link up to the earliest link of the newest context whose point
//!   is at least `p` has; point 0 is the whole timeline;
//! - the query reports the point of the link before the earliest pending one (0 if that is the
//!   first), or the newest point if none is pending. With points added out of order the kernel's
//!   answer depends on how far earlier walks collected the chain, so the model checks the query
//!   only while points were added in order.
//!
//! This binary holds one test, so that the count of live chain links is this test's alone:
//! every case ends with none.

mod common;

use common::manual::Manual;
use common::*;
use drm_ctx::drm::OpenOptions;
use drm_ctx::host::syncobj::*;
use drm_ctx::host::Client;
use drm_ctx::uaccess::UserMemory;
use drm_ctx::Error;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Adds a point `step` above (or, with `back`, at most `step` below) the newest one; with a
    /// pending fence through the driver API, or already signalled through `TIMELINE_SIGNAL`.
    Add {
        step: u64,
        back: bool,
        pending: bool,
    },
    /// Signals the `n`-th pending fence (modulo their number).
    Signal(usize),
    /// Waits (poll) for point `k % (newest + 2)`.
    Wait { k: u64, available: bool },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..4u64, prop::bool::weighted(0.25), any::<bool>())
            .prop_map(|(step, back, pending)| Op::Add { step, back, pending }),
        3 => any::<usize>().prop_map(Op::Signal),
        3 => (any::<u64>(), any::<bool>()).prop_map(|(k, available)| Op::Wait { k, available }),
    ]
}

struct Link {
    seqno: u64,
    context: u32,
    /// Index into the model's fences.
    fence: usize,
}

#[derive(Default)]
struct Model {
    links: Vec<Link>,
    fences: Vec<(Option<Manual>, bool)>,
    contexts: u32,
    ordered: bool,
}

impl Model {
    fn newest(&self) -> u64 {
        self.links.last().map_or(0, |l| l.seqno)
    }

    fn add(&mut self, req: u64, fence: usize) {
        let (seqno, context) = match self.links.last() {
            Some(l) if req > l.seqno => (req, l.context),
            Some(l) => {
                self.ordered = false;
                self.contexts += 1;
                (l.seqno, self.contexts)
            }
            None => {
                self.contexts += 1;
                (req, self.contexts)
            }
        };
        self.links.push(Link {
            seqno,
            context,
            fence,
        });
    }

    fn done(&self, upto: usize) -> bool {
        self.links[..=upto].iter().all(|l| self.fences[l.fence].1)
    }

    fn available(&self, p: u64) -> bool {
        !self.links.is_empty() && p <= self.newest()
    }

    fn signalled(&self, p: u64) -> bool {
        let n = self.links.len();
        if p == 0 {
            return self.done(n - 1);
        }
        let head = self.links[n - 1].context;
        let at = (0..n)
            .find(|&i| self.links[i].context == head && self.links[i].seqno >= p)
            .unwrap_or(n - 1);
        self.done(at)
    }

    fn query(&self) -> u64 {
        match self.links.iter().position(|l| !self.fences[l.fence].1) {
            None => self.newest(),
            Some(0) => 0,
            Some(k) => self.links[k - 1].seqno,
        }
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    {
        let (_p, _reg, _c) = registered();
        let client = Client::open(_reg.device(), OpenOptions::render()).unwrap();
        let mem = client.mem();
        let table = client.file().syncobjs();
        let h = table.create(None).unwrap();
        let hbuf = mem.alloc_bytes(&h.to_le_bytes()).unwrap();
        let pbuf = mem.alloc(8).unwrap();
        let mut m = Model {
            ordered: true,
            ..Model::default()
        };
        for op in ops {
            match op {
                Op::Add {
                    step,
                    back,
                    pending,
                } => {
                    let req = if back {
                        m.newest().saturating_sub(step)
                    } else {
                        m.newest() + step
                    };
                    if pending {
                        let (man, f) = Manual::new();
                        let link = table.alloc_point().unwrap();
                        table.add_point(h, link, f, req).unwrap();
                        m.fences.push((Some(man), false));
                    } else {
                        mem.write(pbuf, &req.to_le_bytes()).unwrap();
                        let mut a = DrmSyncobjTimelineArray {
                            handles: hbuf,
                            points: pbuf,
                            count_handles: 1,
                            flags: 0,
                        };
                        client
                            .ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &mut a)
                            .unwrap();
                        m.fences.push((None, true));
                    }
                    let fence = m.fences.len() - 1;
                    m.add(req, fence);
                }
                Op::Signal(n) => {
                    let pending: Vec<usize> =
                        (0..m.fences.len()).filter(|&i| !m.fences[i].1).collect();
                    if let Some(&i) = pending.get(n % pending.len().max(1)) {
                        if let (Some(man), done) = &mut m.fences[i] {
                            man.signal();
                            *done = true;
                        }
                    }
                }
                Op::Wait { k, available } => {
                    let p = k % (m.newest() + 2);
                    mem.write(pbuf, &p.to_le_bytes()).unwrap();
                    let mut a = DrmSyncobjTimelineWait {
                        handles: hbuf,
                        points: pbuf,
                        timeout_nsec: 0,
                        count_handles: 1,
                        flags: if available {
                            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE
                        } else {
                            0
                        },
                        ..Default::default()
                    };
                    let got = client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &mut a);
                    let want = match (m.available(p), available) {
                        (true, true) => Ok(0),
                        (false, true) => Err(Error::Other(ETIME)),
                        (false, false) => Err(Error::Invalid),
                        (true, false) if m.signalled(p) => Ok(0),
                        (true, false) => Err(Error::Other(ETIME)),
                    };
                    prop_assert_eq!(got, want, "wait for point {}", p);
                }
            }
            // After every step: the query, and the newest point submitted.
            let mut a = DrmSyncobjTimelineArray {
                handles: hbuf,
                points: pbuf,
                count_handles: 1,
                flags: DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED,
            };
            client.ioctl_arg(DRM_IOCTL_SYNCOBJ_QUERY, &mut a).unwrap();
            prop_assert_eq!(mem.read_vec(pbuf, 8).unwrap(), m.newest().to_le_bytes());
            a.flags = 0;
            client.ioctl_arg(DRM_IOCTL_SYNCOBJ_QUERY, &mut a).unwrap();
            let got = u64::from_le_bytes(mem.read_vec(pbuf, 8).unwrap().try_into().unwrap());
            if m.ordered {
                prop_assert_eq!(got, m.query());
            } else {
                prop_assert!(got <= m.newest());
            }
            prop_assert_eq!(table.query(h, true), Ok(m.newest()));
        }
        // Polling waits left no waker behind on the pending fences.
        for (man, _) in &m.fences {
            if let Some(man) = man {
                prop_assert_eq!(man.queued(), 0);
            }
        }
    }
    prop_assert_eq!(live_chain_links(), 0);
    Ok(())
}

proptest! {
    // Under Miri: few cases, and no failure file (Miri isolates the file system).
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: if cfg!(miri) {
            None
        } else {
            Some(Box::new(proptest::test_runner::FileFailurePersistence::default()))
        },
        ..ProptestConfig::default()
    })]

    #[test]
    fn timeline_matches_the_model(ops in prop::collection::vec(op(), 1..40)) {
        run(ops)?;
    }
}
