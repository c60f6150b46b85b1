// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The backend-neutral syncobj API (`drm::syncobj`, `File::syncobj`, `File::syncobj_fence`) on
//! the host core; `src/kernel/kunit.rs` runs the same cases on the kernel's syncobjs.

mod common;

use common::manual::Manual;
use common::*;
use drm_ctx::drm::syncobj::{
    for_each_unwrapped, ChainLink, SyncobjFence, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
};
use drm_ctx::drm::OpenOptions;
use drm_ctx::host::syncobj::{
    self as hs, monotonic_ns, ChainNode, DrmSyncobjWait, SignalledFence, DRM_IOCTL_SYNCOBJ_WAIT,
};
use drm_ctx::host::Client;
use drm_ctx::types::ARef;
use drm_ctx::Error;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

type C = Client<TestDriver>;

fn open() -> (
    ARef<drm_ctx::device::Device>,
    drm_ctx::drm::Registration<TestDriver>,
    Arc<C>,
) {
    let (p, reg, _c) = registered();
    let c = Arc::new(Client::open(reg.device(), OpenOptions::render()).unwrap());
    (p, reg, c)
}

fn same(a: &SyncobjFence, b: &SyncobjFence) -> bool {
    SyncobjFence::ptr_eq(a, b)
}

fn seqno(f: &SyncobjFence) -> Option<u64> {
    f.as_any().downcast_ref::<ChainNode>().map(ChainNode::seqno)
}

fn leaves(f: &SyncobjFence) -> Vec<SyncobjFence> {
    let mut out = Vec::new();
    for_each_unwrapped(f, |leaf| out.push(leaf.clone()));
    out
}

#[test]
fn flag_matches_the_uapi() {
    assert_eq!(
        DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
        hs::DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT
    );
}

#[test]
fn unknown_handles_are_enoent() {
    let (_p, _r, c) = open();
    let file = c.file();
    assert_eq!(file.syncobj(0).err(), Some(Error::NotFound));
    assert_eq!(file.syncobj(1).err(), Some(Error::NotFound));
    assert_eq!(file.syncobj_fence(1, 0, 0).err(), Some(Error::NotFound));
    // The handle is looked up before the flags are checked (as `drm_syncobj_find_fence`).
    assert_eq!(
        file.syncobj_fence(1, 0, 1 << 7).err(),
        Some(Error::NotFound)
    );
    assert_eq!(Error::NotFound.to_errno(), -2);
    let h = file.create_syncobj(None).unwrap();
    file.syncobjs().destroy(h).unwrap();
    assert_eq!(file.syncobj(h).err(), Some(Error::NotFound));
}

#[test]
fn binary_fence_lookup() {
    let (_p, _r, c) = open();
    let file = c.file();
    let (_m, f) = Manual::new();
    let empty = file.create_syncobj(None).unwrap();
    let full = file.create_syncobj(Some(&f)).unwrap();
    // No fence, a point on a binary syncobj, unknown flags: EINVAL.
    assert_eq!(file.syncobj_fence(empty, 0, 0).err(), Some(Error::Invalid));
    assert_eq!(file.syncobj_fence(full, 1, 0).err(), Some(Error::Invalid));
    assert_eq!(
        file.syncobj_fence(full, 0, 1 << 0).err(),
        Some(Error::Invalid)
    );
    assert!(same(&file.syncobj_fence(full, 0, 0).unwrap(), &f));
    assert!(same(
        &file
            .syncobj_fence(full, 0, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT)
            .unwrap(),
        &f
    ));
    let s = file.syncobj(full).unwrap();
    assert!(same(&s.fence().unwrap(), &f));
    assert!(s.same_syncobj(&file.syncobj(full).unwrap()));
    assert!(!s.same_syncobj(&file.syncobj(empty).unwrap()));
}

#[test]
fn replace_fence_installs_and_empties() {
    let (_p, _r, c) = open();
    let file = c.file();
    let h = file.create_syncobj(None).unwrap();
    let s = file.syncobj(h).unwrap();
    let (_m, f) = Manual::new();
    s.replace_fence(Some(&f));
    assert!(same(&file.syncobj_fence(h, 0, 0).unwrap(), &f));
    assert!(same(&file.syncobjs().fence(h).unwrap().unwrap(), &f));
    let clone = s.clone();
    clone.replace_fence(None);
    assert_eq!(file.syncobj_fence(h, 0, 0).err(), Some(Error::Invalid));
    assert!(s.fence().is_none());
}

#[test]
fn destroyed_handle_still_gets_the_fence() {
    let (_p, _r, c) = open();
    let file = c.file();
    let h = file.create_syncobj(None).unwrap();
    let s = file.syncobj(h).unwrap();
    let link = ChainLink::new().unwrap();
    file.syncobjs().destroy(h).unwrap();
    assert_eq!(file.syncobj(h).err(), Some(Error::NotFound));
    let (_m, f) = Manual::new();
    s.replace_fence(Some(&f));
    assert!(same(&s.fence().unwrap(), &f));
    s.add_point(link, &f, 1);
    assert_eq!(seqno(&s.fence().unwrap()), Some(1));
    assert!(file.syncobjs().is_empty());
}

#[test]
fn reused_handle_is_not_touched() {
    let (_p, _r, c) = open();
    let file = c.file();
    let h = file.create_syncobj(None).unwrap();
    let old = file.syncobj(h).unwrap();
    let link = ChainLink::new().unwrap();
    file.syncobjs().destroy(h).unwrap();
    let again = file.create_syncobj(None).unwrap();
    assert_eq!(again, h);
    let new = file.syncobj(again).unwrap();
    assert!(!old.same_syncobj(&new));
    let f: SyncobjFence = Arc::new(SignalledFence).into();
    old.replace_fence(Some(&f));
    old.add_point(link, &f, 5);
    assert!(new.fence().is_none());
    assert_eq!(file.syncobj_fence(again, 0, 0).err(), Some(Error::Invalid));
    assert_eq!(file.syncobjs().query(again, true), Ok(0));
}

#[test]
fn timeline_points_in_order() {
    let (_p, _r, c) = open();
    let file = c.file();
    let h = file.create_syncobj(None).unwrap();
    let s = file.syncobj(h).unwrap();
    let fences: Vec<(Manual, SyncobjFence)> = (0..3).map(|_| Manual::new()).collect();
    // Prepare: every link first.
    let links: Vec<ChainLink> = (0..3).map(|_| ChainLink::new().unwrap()).collect();
    // Commit: points 1, 2, 3.
    for (i, (link, (_, f))) in links.into_iter().zip(&fences).enumerate() {
        s.add_point(link, f, i as u64 + 1);
    }
    assert_eq!(file.syncobjs().query(h, true), Ok(3));
    assert_eq!(file.syncobjs().query(h, false), Ok(0));
    assert_eq!(seqno(&s.fence().unwrap()), Some(3));
    assert_eq!(seqno(&file.syncobj_fence(h, 0, 0).unwrap()), Some(3));
    for p in 1..=3 {
        let f = file.syncobj_fence(h, p, 0).unwrap();
        assert_eq!(seqno(&f), Some(p), "point {p}");
        assert!(f.status().is_none());
    }
    assert_eq!(file.syncobj_fence(h, 4, 0).err(), Some(Error::Invalid));
    // Point 1 signals: its fence is a signalled one; point 2 still waits.
    fences[0].0.signal();
    assert!(file.syncobj_fence(h, 1, 0).unwrap().status().is_some());
    assert!(file.syncobj_fence(h, 2, 0).unwrap().status().is_none());
    assert_eq!(file.syncobjs().query(h, false), Ok(1));
    fences[1].0.signal();
    fences[2].0.signal();
    assert!(file.syncobj_fence(h, 3, 0).unwrap().status().is_some());
    assert_eq!(file.syncobjs().query(h, false), Ok(3));
}

#[test]
fn unwrapping_a_chain() {
    let (_p, _r, c) = open();
    let file = c.file();
    let h = file.create_syncobj(None).unwrap();
    let s = file.syncobj(h).unwrap();
    let (m1, f1) = Manual::new();
    let (_m2, f2) = Manual::new();
    s.add_point(ChainLink::new().unwrap(), &f1, 1);
    s.add_point(ChainLink::new().unwrap(), &f2, 2);
    let head = file.syncobj_fence(h, 0, 0).unwrap();
    let got = leaves(&head);
    assert_eq!(got.len(), 2);
    assert!(same(&got[0], &f2) && same(&got[1], &f1));
    // Point 1's fence signalled: its node is unlinked, only point 2's fence is left.
    m1.signal();
    let got = leaves(&head);
    assert_eq!(got.len(), 1);
    assert!(same(&got[0], &f2));
    // The fence of point 1 now is a signalled leaf of its own; a plain fence is its own leaf.
    let p1 = file.syncobj_fence(h, 1, 0).unwrap();
    assert_eq!(leaves(&p1).len(), 1);
    let got = leaves(&f2);
    assert_eq!(got.len(), 1);
    assert!(same(&got[0], &f2));
}

#[test]
fn wait_for_submit_sees_a_fence_replaced_through_a_reference() {
    let (_p, _r, c) = open();
    let file = c.file();
    let h = file.create_syncobj(None).unwrap();
    let s = file.syncobj(h).unwrap();
    let f: SyncobjFence = Arc::new(SignalledFence).into();
    let setter = {
        let f = f.clone();
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(30));
            s.replace_fence(Some(&f));
        })
    };
    let got = file
        .syncobj_fence(h, 0, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT)
        .unwrap();
    assert!(same(&got, &f));
    setter.join().unwrap();
}

#[test]
fn a_wait_ioctl_is_woken_by_add_point_after_the_handle_is_destroyed() {
    let (_p, _r, c) = open();
    let h = c.file().create_syncobj(None).unwrap();
    let s = c.file().syncobj(h).unwrap();
    let handles = c.mem().alloc_bytes(&h.to_le_bytes()).unwrap();
    // (No other test of this binary waits through the ioctls.)
    let passes = hs::wait_passes();
    let waiter = {
        let c = c.clone();
        thread::spawn(move || {
            let mut a = DrmSyncobjWait {
                handles,
                timeout_nsec: monotonic_ns() + 10_000_000_000,
                count_handles: 1,
                flags: DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
                ..Default::default()
            };
            let start = monotonic_ns();
            c.ioctl_arg(DRM_IOCTL_SYNCOBJ_WAIT, &mut a).unwrap();
            monotonic_ns() - start
        })
    };
    // Once the wait has looked at its syncobj, it holds it.
    while hs::wait_passes() == passes {
        thread::sleep(Duration::from_millis(1));
    }
    // The wait holds the syncobj: destroying the handle does not end it, and a driver that
    // looked the syncobj up may still signal it.
    c.file().syncobjs().destroy(h).unwrap();
    let f: SyncobjFence = Arc::new(SignalledFence).into();
    s.add_point(ChainLink::new().unwrap(), &f, 1);
    let waited = waiter.join().unwrap();
    assert!(waited < 5_000_000_000, "waited {waited} ns");
}

#[test]
fn references_outlive_the_file() {
    let (_p, _r, c) = open();
    let h = c.file().create_syncobj(None).unwrap();
    let s = c.file().syncobj(h).unwrap();
    drop(c);
    let f: SyncobjFence = Arc::new(SignalledFence).into();
    s.replace_fence(Some(&f));
    assert!(same(&s.fence().unwrap(), &f));
    drop(s);
}
