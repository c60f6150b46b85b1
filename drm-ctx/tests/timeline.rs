// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Timeline syncobjs of the host core: `SYNCOBJ_TIMELINE_WAIT`, `SYNCOBJ_QUERY`,
//! `SYNCOBJ_TRANSFER`, `SYNCOBJ_TIMELINE_SIGNAL`, the binary calls on timelines and the
//! driver-side points, each with valid and malformed input (expected values from Linux 7.2's
//! `drm_syncobj.c` and `dma-fence-chain.c`).

mod common;

use common::manual::Manual;
use common::*;
use drm_ctx::drm::ioctl::as_bytes;
use drm_ctx::drm::OpenOptions;
use drm_ctx::host::syncobj::*;
use drm_ctx::host::Client;
use drm_ctx::types::ARef;
use drm_ctx::Error;
use std::mem::offset_of;
use std::sync::{mpsc, Arc};
use std::task::Waker;
use std::time::Duration;

type C = Client<TestDriver>;

fn open() -> (
    ARef<drm_ctx::device::Device>,
    drm_ctx::drm::Registration<TestDriver>,
    Arc<C>,
) {
    let (p, reg, _c) = registered();
    let client = Arc::new(Client::open(reg.device(), OpenOptions::render()).unwrap());
    (p, reg, client)
}

fn create(client: &C) -> u32 {
    let mut c = DrmSyncobjCreate::default();
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_CREATE, &mut c).unwrap();
    c.handle
}

fn handles(client: &C, hs: &[u32]) -> u64 {
    let bytes: Vec<u8> = hs.iter().flat_map(|h| h.to_le_bytes()).collect();
    client.mem().alloc_bytes(&bytes).unwrap()
}

fn points(client: &C, ps: &[u64]) -> u64 {
    let bytes: Vec<u8> = ps.iter().flat_map(|p| p.to_le_bytes()).collect();
    client.mem().alloc_bytes(&bytes).unwrap()
}

fn signal(client: &C, hs: &[u32], ps: &[u64]) -> Result<u32, Error> {
    let mut a = DrmSyncobjTimelineArray {
        handles: handles(client, hs),
        points: points(client, ps),
        count_handles: hs.len() as u32,
        flags: 0,
    };
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &mut a)
}

fn query(client: &C, hs: &[u32], flags: u32) -> Result<Vec<u64>, Error> {
    let out = client.mem().alloc(hs.len() * 8).unwrap();
    let mut a = DrmSyncobjTimelineArray {
        handles: handles(client, hs),
        points: out,
        count_handles: hs.len() as u32,
        flags,
    };
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_QUERY, &mut a)?;
    let bytes = client.mem().read_vec(out, hs.len() * 8).unwrap();
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

fn q(client: &C, h: u32) -> u64 {
    query(client, &[h], 0).unwrap()[0]
}

fn twait_arg(
    client: &C,
    hs: &[u32],
    ps: &[u64],
    flags: u32,
    timeout: Duration,
) -> DrmSyncobjTimelineWait {
    DrmSyncobjTimelineWait {
        handles: handles(client, hs),
        points: points(client, ps),
        timeout_nsec: monotonic_ns() + timeout.as_nanos() as i64,
        count_handles: hs.len() as u32,
        flags,
        ..Default::default()
    }
}

fn twait(client: &C, hs: &[u32], ps: &[u64], flags: u32, timeout: Duration) -> Result<u32, Error> {
    let mut a = twait_arg(client, hs, ps, flags, timeout);
    client
        .ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &mut a)
        .map(|_| a.first_signaled)
}

fn transfer(client: &C, src: (u32, u64), dst: (u32, u64), flags: u32) -> Result<u32, Error> {
    let mut a = DrmSyncobjTransfer {
        src_handle: src.0,
        dst_handle: dst.0,
        src_point: src.1,
        dst_point: dst.1,
        flags,
        pad: 0,
    };
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TRANSFER, &mut a)
}

/// Adds point `p` with a fresh pending fence to syncobj `h` through the driver API.
fn add_pending(client: &C, h: u32, p: u64) -> Manual {
    let t = client.file().syncobjs();
    let (m, f) = Manual::new();
    let link = t.alloc_point().unwrap();
    t.add_point(h, link, f, p).unwrap();
    m
}

const ZERO: Duration = Duration::ZERO;
const SHORT: Duration = Duration::from_millis(5);

#[test]
fn ioctl_numbers_and_layouts_match_linux() {
    assert_eq!(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, 0xc030_64ca);
    assert_eq!(DRM_IOCTL_SYNCOBJ_QUERY, 0xc018_64cb);
    assert_eq!(DRM_IOCTL_SYNCOBJ_TRANSFER, 0xc020_64cc);
    assert_eq!(DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, 0xc018_64cd);
    assert_eq!(as_bytes(&DrmSyncobjTimelineWait::default()).len(), 48);
    assert_eq!(offset_of!(DrmSyncobjTimelineWait, points), 8);
    assert_eq!(offset_of!(DrmSyncobjTimelineWait, timeout_nsec), 16);
    assert_eq!(offset_of!(DrmSyncobjTimelineWait, count_handles), 24);
    assert_eq!(offset_of!(DrmSyncobjTimelineWait, flags), 28);
    assert_eq!(offset_of!(DrmSyncobjTimelineWait, first_signaled), 32);
    assert_eq!(offset_of!(DrmSyncobjTimelineWait, pad), 36);
    assert_eq!(offset_of!(DrmSyncobjTimelineWait, deadline_nsec), 40);
    assert_eq!(as_bytes(&DrmSyncobjTimelineArray::default()).len(), 24);
    assert_eq!(offset_of!(DrmSyncobjTimelineArray, points), 8);
    assert_eq!(offset_of!(DrmSyncobjTimelineArray, count_handles), 16);
    assert_eq!(offset_of!(DrmSyncobjTimelineArray, flags), 20);
    assert_eq!(as_bytes(&DrmSyncobjTransfer::default()).len(), 32);
    assert_eq!(offset_of!(DrmSyncobjTransfer, dst_handle), 4);
    assert_eq!(offset_of!(DrmSyncobjTransfer, src_point), 8);
    assert_eq!(offset_of!(DrmSyncobjTransfer, dst_point), 16);
    assert_eq!(offset_of!(DrmSyncobjTransfer, flags), 24);
    assert_eq!(offset_of!(DrmSyncobjTransfer, pad), 28);
    assert_eq!(DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE, 4);
    assert_eq!(DRM_SYNCOBJ_WAIT_FLAGS_WAIT_DEADLINE, 8);
    assert_eq!(DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED, 1);
}

#[test]
fn timeline_signal_adds_signalled_points() {
    let (_p, _reg, client) = open();
    let (a, b) = (create(&client), create(&client));
    assert_eq!(query(&client, &[a, b], 0), Ok(vec![0, 0]));
    assert_eq!(signal(&client, &[a, b], &[3, 9]), Ok(0));
    assert_eq!(query(&client, &[a, b], 0), Ok(vec![3, 9]));
    assert_eq!(signal(&client, &[a], &[5]), Ok(0));
    assert_eq!(q(&client, a), 5);
    assert_eq!(
        twait(
            &client,
            &[a, b],
            &[5, 9],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
            ZERO
        ),
        Ok(0)
    );
    // Malformed: flags, no handles, an unknown handle, unreadable points; nothing changes.
    let mut bad = DrmSyncobjTimelineArray {
        handles: handles(&client, &[a]),
        points: points(&client, &[7]),
        count_handles: 1,
        flags: 1,
    };
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &mut bad),
        Err(Error::Invalid)
    );
    bad.flags = 0;
    bad.count_handles = 0;
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &mut bad),
        Err(Error::Invalid)
    );
    assert_eq!(signal(&client, &[a, 77], &[7, 7]), Err(Error::NotFound));
    bad.count_handles = 1;
    bad.points = 0xdead_0000;
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &mut bad),
        Err(Error::Fault)
    );
    assert_eq!(query(&client, &[a, b], 1), Ok(vec![5, 9]));
    // A null points array reads as point 0, which the kernel adds as the newest point's number.
    bad.points = 0;
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL, &mut bad),
        Ok(0)
    );
    assert_eq!(query(&client, &[a], 1), Ok(vec![5]));
    assert_eq!(q(&client, a), 5);
}

#[test]
fn query_reports_the_last_signalled_and_submitted_points() {
    let (_p, _reg, client) = open();
    let h = create(&client);
    let m1 = add_pending(&client, h, 1);
    let m2 = add_pending(&client, h, 2);
    let m3 = add_pending(&client, h, 3);
    assert_eq!(q(&client, h), 0);
    assert_eq!(
        query(&client, &[h], DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED),
        Ok(vec![3])
    );
    // Point 2 signalled but point 1 not: nothing has signalled yet.
    m2.signal();
    assert_eq!(q(&client, h), 0);
    m1.signal();
    assert_eq!(q(&client, h), 2);
    m3.signal();
    assert_eq!(q(&client, h), 3);
    // A binary syncobj (with or without a fence) is at 0.
    let mut c = DrmSyncobjCreate {
        flags: DRM_SYNCOBJ_CREATE_SIGNALED,
        ..Default::default()
    };
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_CREATE, &mut c).unwrap();
    assert_eq!(query(&client, &[c.handle, h], 1), Ok(vec![0, 3]));
    // Malformed: unknown flags, no handles, an unknown handle, unwritable points.
    assert_eq!(query(&client, &[h], 2), Err(Error::Invalid));
    assert_eq!(query(&client, &[], 0), Err(Error::Invalid));
    assert_eq!(query(&client, &[h, 77], 0), Err(Error::NotFound));
    let mut a = DrmSyncobjTimelineArray {
        handles: handles(&client, &[h]),
        points: 0xdead_0000,
        count_handles: 1,
        flags: 0,
    };
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_QUERY, &mut a),
        Err(Error::Fault)
    );
    a.handles = 0xdead_0000;
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_QUERY, &mut a),
        Err(Error::Fault)
    );
}

#[test]
fn unordered_points_are_added_as_the_kernel_adds_them() {
    let (_p, _reg, client) = open();
    let h = create(&client);
    let m5 = add_pending(&client, h, 5);
    // Not above 5: added anyway, in a new context, numbered 5.
    let m3 = add_pending(&client, h, 3);
    assert_eq!(
        query(&client, &[h], DRM_SYNCOBJ_QUERY_FLAGS_LAST_SUBMITTED),
        Ok(vec![5])
    );
    assert_eq!(q(&client, h), 0);
    // Every point up to 5 is now the new link: it waits for both fences.
    assert_eq!(
        twait(&client, &[h], &[2], 0, ZERO),
        Err(Error::Other(ETIME))
    );
    m3.signal();
    assert_eq!(q(&client, h), 0);
    assert_eq!(
        twait(&client, &[h], &[2], 0, ZERO),
        Err(Error::Other(ETIME))
    );
    m5.signal();
    assert_eq!(q(&client, h), 5);
    assert_eq!(twait(&client, &[h], &[2], 0, ZERO), Ok(0));
    assert_eq!(twait(&client, &[h], &[6], 0, ZERO), Err(Error::Invalid));
}

#[test]
fn timeline_wait_for_points() {
    let (_p, _reg, client) = open();
    let h = create(&client);
    let m1 = add_pending(&client, h, 1);
    let m2 = add_pending(&client, h, 2);
    // Pending points time out, later points are not there yet.
    assert_eq!(
        twait(&client, &[h], &[1], 0, SHORT),
        Err(Error::Other(ETIME))
    );
    assert_eq!(twait(&client, &[h], &[3], 0, ZERO), Err(Error::Invalid));
    assert_eq!(
        twait(
            &client,
            &[h],
            &[3],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
            SHORT
        ),
        Err(Error::Other(ETIME))
    );
    // Available: submitted is enough.
    assert_eq!(
        twait(
            &client,
            &[h],
            &[2],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE,
            ZERO
        ),
        Ok(0)
    );
    assert_eq!(
        twait(
            &client,
            &[h],
            &[3],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE,
            SHORT
        ),
        Err(Error::Other(ETIME))
    );
    // Point 1 signals: point 1 is done, point 2 not; wait-any names the index.
    m1.signal();
    assert_eq!(twait(&client, &[h, h], &[2, 1], 0, ZERO), Ok(1));
    assert_eq!(
        twait(
            &client,
            &[h, h],
            &[2, 1],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
            ZERO
        ),
        Err(Error::Other(ETIME))
    );
    // A blocked wait-all is woken by the signal; it reports the one signalled on entry.
    let mut a = twait_arg(
        &client,
        &[h, h],
        &[2, 1],
        DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
        Duration::from_secs(20),
    );
    let c = client.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = c.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &mut a);
        let _ = tx.send(r.map(|_| a.first_signaled));
    });
    // Signal only once the waiter queued its waker on the fence: it surely entered before
    // (a sleep would not say so under a slow interpreter such as Miri).
    while m2.queued() == 0 {
        std::thread::yield_now();
    }
    assert!(rx.try_recv().is_err());
    m2.signal();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Ok(1)));
    // A wait-all with nothing signalled on entry reports u32::MAX, as the kernel's does.
    let m3 = add_pending(&client, h, 3);
    let m = m3.clone();
    let t = std::thread::spawn(move || {
        while m.queued() == 0 {
            std::thread::yield_now();
        }
        m.signal();
    });
    assert_eq!(
        twait(
            &client,
            &[h],
            &[3],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
            Duration::from_secs(20)
        ),
        Ok(u32::MAX)
    );
    t.join().unwrap();
    assert_eq!(m3.queued(), 0);
    // A wait for submission is woken when the point is added.
    let c = client.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        signal(&c, &[h], &[4]).unwrap();
    });
    assert_eq!(
        twait(
            &client,
            &[h],
            &[4],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
            Duration::from_secs(20)
        ),
        Ok(0)
    );
    t.join().unwrap();
}

#[test]
fn timeline_wait_rejects_malformed_input() {
    let (_p, _reg, client) = open();
    let h = create(&client);
    signal(&client, &[h], &[2]).unwrap();
    assert_eq!(
        twait(&client, &[h], &[2], 1 << 4, ZERO),
        Err(Error::Invalid)
    );
    assert_eq!(
        twait(&client, &[h, 9], &[2, 2], 0, ZERO),
        Err(Error::NotFound)
    );
    // No handles: nothing to wait for, first_signaled untouched.
    let mut a = twait_arg(&client, &[h], &[2], 0, ZERO);
    a.count_handles = 0;
    a.first_signaled = 42;
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &mut a),
        Ok(0)
    );
    assert_eq!(a.first_signaled, 42);
    a.count_handles = 1;
    a.points = 0xdead_0000;
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &mut a),
        Err(Error::Fault)
    );
    a.handles = 0xdead_0000;
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &mut a),
        Err(Error::Fault)
    );
    // A null points array waits for the syncobjs as a whole.
    let mut a = twait_arg(&client, &[h], &[], 0, ZERO);
    a.points = 0;
    a.count_handles = 1;
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &mut a),
        Ok(0)
    );
    // A point of a binary syncobj, or of one without a fence, is EINVAL.
    let b = create(&client);
    assert_eq!(twait(&client, &[b], &[1], 0, ZERO), Err(Error::Invalid));
    client
        .file()
        .syncobjs()
        .replace(b, Some(Arc::new(SignalledFence).into()))
        .unwrap();
    assert_eq!(twait(&client, &[b], &[1], 0, ZERO), Err(Error::Invalid));
    assert_eq!(twait(&client, &[b], &[0], 0, ZERO), Ok(0));
    // WAIT_DEADLINE is accepted.
    assert_eq!(
        twait(
            &client,
            &[h],
            &[1],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_DEADLINE,
            ZERO
        ),
        Ok(0)
    );
}

#[test]
fn transfer_between_binary_and_timeline() {
    let (_p, _reg, client) = open();
    let t = client.file().syncobjs();
    let (tl, bin, tl2) = (create(&client), create(&client), create(&client));
    let m1 = add_pending(&client, tl, 1);
    signal(&client, &[tl], &[2]).unwrap();
    // Timeline point to binary: the binary syncobj holds point 2's fence (waiting for 1 too).
    assert_eq!(transfer(&client, (tl, 2), (bin, 0), 0), Ok(0));
    let f = t.fence(bin).unwrap().unwrap();
    assert!(f.status().is_none());
    // Binary to timeline point, timeline to timeline.
    assert_eq!(transfer(&client, (bin, 0), (tl2, 5), 0), Ok(0));
    assert_eq!(transfer(&client, (tl, 1), (tl2, 6), 0), Ok(0));
    assert_eq!(query(&client, &[tl2], 1), Ok(vec![6]));
    assert_eq!(q(&client, tl2), 0);
    m1.signal();
    assert!(f.status().is_some());
    assert_eq!(q(&client, tl2), 6);
    assert_eq!(twait(&client, &[bin], &[0], 0, ZERO), Ok(0));
    // Malformed: pad, flags, unknown handles, a point not submitted; nothing changes.
    let mut a = DrmSyncobjTransfer {
        src_handle: tl,
        dst_handle: tl2,
        src_point: 1,
        dst_point: 9,
        flags: 0,
        pad: 1,
    };
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_TRANSFER, &mut a),
        Err(Error::Invalid)
    );
    assert_eq!(transfer(&client, (tl, 1), (tl2, 9), 1), Err(Error::Invalid));
    assert_eq!(
        transfer(&client, (77, 1), (tl2, 9), 0),
        Err(Error::NotFound)
    );
    assert_eq!(transfer(&client, (tl, 1), (77, 9), 0), Err(Error::NotFound));
    assert_eq!(transfer(&client, (tl, 3), (tl2, 9), 0), Err(Error::Invalid));
    let empty = create(&client);
    assert_eq!(
        transfer(&client, (empty, 0), (tl2, 9), 0),
        Err(Error::Invalid)
    );
    assert_eq!(query(&client, &[tl2], 1), Ok(vec![6]));
    // WAIT_FOR_SUBMIT waits for the source point to be added.
    let c = client.clone();
    let th = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        signal(&c, &[tl], &[3]).unwrap();
    });
    assert_eq!(
        transfer(
            &client,
            (tl, 3),
            (tl2, 7),
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT
        ),
        Ok(0)
    );
    th.join().unwrap();
    assert_eq!(query(&client, &[tl2], 0), Ok(vec![7]));
}

#[test]
fn binary_calls_on_a_timeline_syncobj() {
    let (_p, _reg, client) = open();
    let h = create(&client);
    let m1 = add_pending(&client, h, 1);
    signal(&client, &[h], &[2]).unwrap();
    let bwait = |flags| {
        let mut a = DrmSyncobjWait {
            handles: handles(&client, &[h]),
            timeout_nsec: monotonic_ns(),
            count_handles: 1,
            flags,
            ..Default::default()
        };
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_WAIT, &mut a)
    };
    // WAIT waits for every point.
    assert_eq!(bwait(0), Err(Error::Other(ETIME)));
    m1.signal();
    assert_eq!(bwait(0), Ok(0));
    // RESET drops the timeline; SIGNAL makes the syncobj binary again.
    let mut a = DrmSyncobjArray {
        handles: handles(&client, &[h]),
        count_handles: 1,
        pad: 0,
    };
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_RESET, &mut a).unwrap();
    assert_eq!(q(&client, h), 0);
    assert_eq!(bwait(0), Err(Error::Invalid));
    assert_eq!(twait(&client, &[h], &[1], 0, ZERO), Err(Error::Invalid));
    signal(&client, &[h], &[4]).unwrap();
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_SIGNAL, &mut a).unwrap();
    assert_eq!(q(&client, h), 0);
    assert_eq!(bwait(0), Ok(0));
    assert_eq!(bwait(DRM_SYNCOBJ_WAIT_FLAGS_WAIT_DEADLINE), Ok(0));
    // Binary WAIT takes no WAIT_AVAILABLE.
    assert_eq!(
        bwait(DRM_SYNCOBJ_WAIT_FLAGS_WAIT_AVAILABLE),
        Err(Error::Invalid)
    );
    // Points added after a binary fence wait for it too.
    let (m, f) = Manual::new();
    client.file().syncobjs().replace(h, Some(f)).unwrap();
    signal(&client, &[h], &[1]).unwrap();
    assert_eq!(q(&client, h), 0);
    assert_eq!(
        twait(&client, &[h], &[1], 0, ZERO),
        Err(Error::Other(ETIME))
    );
    m.signal();
    assert_eq!(q(&client, h), 1);
}

#[test]
fn driver_points_and_find_fence() {
    let (_p, _reg, client) = open();
    let t = client.file().syncobjs();
    let h = create(&client);
    // Links are set aside before the commit; an unknown handle at commit is ENOENT.
    let link = t.alloc_point().unwrap();
    assert_eq!(
        t.add_point(99, link, Arc::new(SignalledFence).into(), 1),
        Err(Error::NotFound)
    );
    let m1 = add_pending(&client, h, 1);
    let f1 = t.find_fence(h, 1, 0).unwrap();
    assert_eq!(
        f1.as_any()
            .downcast_ref::<ChainNode>()
            .map(ChainNode::seqno),
        Some(1)
    );
    assert!(f1.status().is_none());
    assert_eq!(t.find_fence(h, 2, 0).err(), Some(Error::Invalid));
    assert_eq!(
        t.find_fence(h, 1, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL).err(),
        Some(Error::Invalid)
    );
    assert_eq!(t.find_fence(99, 1, 0).err(), Some(Error::NotFound));
    // The whole timeline for point 0.
    let head = t.find_fence(h, 0, 0).unwrap();
    assert!(FenceRef::ptr_eq(&head, &t.fence(h).unwrap().unwrap()));
    // A signalled point gives a signalled fence.
    m1.signal();
    assert!(t.find_fence(h, 1, 0).unwrap().status().is_some());
    // WAIT_FOR_SUBMIT: woken by the point being added.
    let c = client.clone();
    let th = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        add_pending(&c, h, 2)
    });
    let f2 = t
        .find_fence(h, 2, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT)
        .unwrap();
    let m2 = th.join().unwrap();
    assert!(f2.status().is_none());
    m2.signal();
    assert!(f2.status().is_some());
}

/// As for `SYNCOBJ_WAIT`: a client blocked in `SYNCOBJ_TIMELINE_WAIT` does not hold up unplug,
/// and unplug does not end its wait.
#[test]
#[cfg_attr(miri, ignore = "waits on real time for a blocked thread")]
fn unplug_does_not_wait_for_a_blocked_timeline_wait() {
    let (_p, reg, client) = open();
    let h = create(&client);
    let mut a = twait_arg(
        &client,
        &[h],
        &[3],
        DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
        ZERO,
    );
    a.timeout_nsec = i64::MAX;
    let c = client.clone();
    let (tx, waiting) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(c.ioctl_arg(DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT, &mut a));
    });
    std::thread::sleep(Duration::from_millis(50));
    assert!(waiting.try_recv().is_err(), "the wait returned early");
    let dev: ARef<TestDevice> = reg.device().into();
    let (tx, unplugged) = mpsc::channel();
    std::thread::spawn(move || {
        dev.unplug();
        let _ = tx.send(());
    });
    unplugged
        .recv_timeout(Duration::from_secs(10))
        .expect("unplug blocked behind SYNCOBJ_TIMELINE_WAIT");
    std::thread::sleep(Duration::from_millis(50));
    assert!(waiting.try_recv().is_err(), "unplug ended the wait");
    assert_eq!(signal(&client, &[h], &[3]), Err(Error::NoDevice));
    let t = client.file().syncobjs();
    t.add_point(
        h,
        t.alloc_point().unwrap(),
        Arc::new(SignalledFence).into(),
        3,
    )
    .unwrap();
    assert_eq!(waiting.recv_timeout(Duration::from_secs(10)), Ok(Ok(0)));
}

/// A timeline whose points never signal keeps every link; dropping it frees them one after
/// the other rather than recursing once per link (here on a thread with a small stack).
#[test]
#[cfg_attr(miri, ignore = "thousands of links take too long under Miri")]
fn dropping_a_long_timeline_does_not_recurse() {
    let (_p, _reg, client) = open();
    let t = client.file().syncobjs();
    let h = create(&client);
    let (m, f) = Manual::new();
    // Adding a point walks the pending chain (as the kernel does), so keep it to a few
    // thousand points.
    for p in 1..=2_000 {
        t.add_point(h, t.alloc_point().unwrap(), f.clone(), p)
            .unwrap();
    }
    assert_eq!(q(&client, h), 0);
    assert_eq!(query(&client, &[h], 1), Ok(vec![2_000]));
    let c = client.clone();
    std::thread::Builder::new()
        .stack_size(64 * 1024)
        .spawn(move || {
            let mut d = DrmSyncobjDestroy { handle: h, pad: 0 };
            c.ioctl_arg(DRM_IOCTL_SYNCOBJ_DESTROY, &mut d).unwrap();
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(t.is_empty());
    drop(f);
    m.signal();
}

/// `for_each_unwrapped`: a point's link stands for the fences of its point and every earlier
/// one still pending; a plain fence for itself.
#[test]
fn unwrapping_a_point_gives_the_fences_it_waits_for() {
    let (_p, _reg, client) = open();
    let t = client.file().syncobjs();
    let h = create(&client);
    let m1 = add_pending(&client, h, 1);
    let m2 = add_pending(&client, h, 2);
    let m3 = add_pending(&client, h, 3);
    let parts = |f: &FenceRef| {
        let mut v = Vec::new();
        for_each_unwrapped(f, |x| v.push(x.clone()));
        v
    };
    // Point 2 waits for the fences of points 2 and 1, not 3.
    let two = parts(&t.find_fence(h, 2, 0).unwrap());
    assert_eq!(two.len(), 2);
    let queued = |m: &Manual| {
        let _r: Vec<Option<Waiter>> = two.iter().map(|f| f.add_waker(Waker::noop())).collect();
        m.queued()
    };
    assert_eq!((queued(&m1), queued(&m2), queued(&m3)), (1, 1, 0));
    // Once point 1 has signalled, the whole timeline is points 2 and 3.
    m1.signal();
    assert_eq!(parts(&t.fence(h).unwrap().unwrap()).len(), 2);
    // A plain fence is its own part.
    let (_m, plain) = Manual::new();
    let one = parts(&plain);
    assert_eq!(one.len(), 1);
    assert!(FenceRef::ptr_eq(&one[0], &plain));
    m2.signal();
    m3.signal();
    assert!(t.find_fence(h, 3, 0).unwrap().status().is_some());
}

/// Keys name one syncobj: a fence or point for a syncobj destroyed since (its handle perhaps
/// reused) goes nowhere.
#[test]
fn keyed_replace_and_add_point_reach_only_their_syncobj() {
    let (_p, _reg, client) = open();
    let t = client.file().syncobjs();
    let h = create(&client);
    let key = t.key(h).unwrap();
    assert_eq!(key.handle(), h);
    assert_eq!(t.key(99).err(), Some(Error::NotFound));
    t.add_point_keyed(
        key,
        t.alloc_point().unwrap(),
        Arc::new(SignalledFence).into(),
        2,
    )
    .unwrap();
    assert_eq!(q(&client, h), 2);
    t.replace_keyed(key, None).unwrap();
    assert!(t.fence(h).unwrap().is_none());
    // Destroyed, and the handle given to a new syncobj: nothing reaches the new one.
    t.destroy(h).unwrap();
    let again = create(&client);
    assert_eq!(again, h);
    assert_eq!(
        t.replace_keyed(key, Some(Arc::new(SignalledFence).into())),
        Err(Error::NotFound)
    );
    assert_eq!(
        t.add_point_keyed(
            key,
            t.alloc_point().unwrap(),
            Arc::new(SignalledFence).into(),
            3
        ),
        Err(Error::NotFound)
    );
    assert!(t.fence(again).unwrap().is_none());
    // The new syncobj has its own key.
    let k2 = t.key(again).unwrap();
    assert_ne!(k2, key);
    t.replace_keyed(k2, Some(Arc::new(SignalledFence).into()))
        .unwrap();
    assert!(t.fence(again).unwrap().is_some());
}
