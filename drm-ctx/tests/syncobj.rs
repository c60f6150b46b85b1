// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The syncobj core ioctls of the host DRM core.

mod common;

use common::manual::Manual;
use common::*;
use drm_ctx::drm::ioctl::as_bytes;
use drm_ctx::drm::OpenOptions;
use drm_ctx::host::syncobj::*;
use drm_ctx::host::Client;
use drm_ctx::Error;
use std::sync::Arc;
use std::time::Duration;

fn handles(client: &Client<TestDriver>, hs: &[u32]) -> u64 {
    let bytes: Vec<u8> = hs.iter().flat_map(|h| h.to_le_bytes()).collect();
    client.mem().alloc_bytes(&bytes).unwrap()
}

fn wait(
    client: &Client<TestDriver>,
    hs: &[u32],
    flags: u32,
    timeout: Duration,
) -> Result<u32, Error> {
    let mut a = DrmSyncobjWait {
        handles: handles(client, hs),
        timeout_nsec: monotonic_ns() + timeout.as_nanos() as i64,
        count_handles: hs.len() as u32,
        flags,
        ..Default::default()
    };
    client
        .ioctl_arg(DRM_IOCTL_SYNCOBJ_WAIT, &mut a)
        .map(|_| a.first_signaled)
}

#[test]
fn ioctl_numbers_match_linux() {
    assert_eq!(DRM_IOCTL_SYNCOBJ_CREATE, 0xc008_64bf);
    assert_eq!(DRM_IOCTL_SYNCOBJ_DESTROY, 0xc008_64c0);
    assert_eq!(DRM_IOCTL_SYNCOBJ_WAIT, 0xc028_64c3);
    assert_eq!(DRM_IOCTL_SYNCOBJ_RESET, 0xc010_64c4);
    assert_eq!(DRM_IOCTL_SYNCOBJ_SIGNAL, 0xc010_64c5);
    assert_eq!(as_bytes(&DrmSyncobjWait::default()).len(), 40);
}

#[test]
fn create_signal_wait_reset_destroy() {
    let (_p, reg, _c) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let mut c = DrmSyncobjCreate::default();
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_CREATE, &mut c).unwrap();
    let empty = c.handle;
    let mut c = DrmSyncobjCreate {
        flags: DRM_SYNCOBJ_CREATE_SIGNALED,
        ..Default::default()
    };
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_CREATE, &mut c).unwrap();
    let signalled = c.handle;
    assert_eq!((empty, signalled), (1, 2));
    // No fence: EINVAL, unless waiting for submission (then it times out: ETIME).
    assert_eq!(
        wait(&client, &[empty], 0, Duration::ZERO),
        Err(Error::Invalid)
    );
    assert_eq!(
        wait(
            &client,
            &[empty],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
            Duration::from_millis(5)
        ),
        Err(Error::Other(ETIME))
    );
    assert_eq!(wait(&client, &[signalled], 0, Duration::ZERO), Ok(0));
    // Wait-any reports the first signalled; wait-all needs all.
    let file = client.file();
    let pending = Arc::new(Manual::default());
    file.syncobjs()
        .replace(empty, Some(pending.clone().into()))
        .unwrap();
    assert_eq!(wait(&client, &[empty, signalled], 0, Duration::ZERO), Ok(1));
    assert_eq!(
        wait(
            &client,
            &[empty, signalled],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
            Duration::from_millis(2)
        ),
        Err(Error::Other(ETIME))
    );
    // Waits that give up take their wakers back, however often they are repeated: polling
    // a pending fence with a deadline in the past leaves nothing queued on it.
    assert_eq!(pending.queued(), 0);
    for _ in 0..100 {
        assert_eq!(
            wait(&client, &[empty], 0, Duration::ZERO),
            Err(Error::Other(ETIME))
        );
    }
    assert_eq!(pending.queued(), 0);
    // A waiter is woken by the signal from another thread, which signals only once the
    // waiter has queued its waker on the fence: the wait surely entered before the signal
    // (a sleep would not say so under a slow interpreter such as Miri).
    let p2 = pending.clone();
    let t = std::thread::spawn(move || {
        while p2.queued() == 0 {
            std::thread::yield_now();
        }
        p2.signal();
    });
    // Wait-all reports, as the kernel does, the first syncobj already signalled on entry.
    assert_eq!(
        wait(
            &client,
            &[empty, signalled],
            DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
            Duration::from_secs(20)
        ),
        Ok(1)
    );
    t.join().unwrap();
    // Reset removes the fence, signal installs a signalled one; both all or nothing.
    let mut a = DrmSyncobjArray {
        handles: handles(&client, &[signalled, 9]),
        count_handles: 2,
        pad: 0,
    };
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_RESET, &mut a),
        Err(Error::NotFound)
    );
    assert!(file.syncobjs().fence(signalled).unwrap().is_some());
    a.count_handles = 1;
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_RESET, &mut a).unwrap();
    assert!(file.syncobjs().fence(signalled).unwrap().is_none());
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_SIGNAL, &mut a).unwrap();
    assert_eq!(wait(&client, &[signalled], 0, Duration::ZERO), Ok(0));
    // Bad arguments.
    a.count_handles = 0;
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_SIGNAL, &mut a),
        Err(Error::Invalid)
    );
    let mut c = DrmSyncobjCreate {
        flags: 2,
        ..Default::default()
    };
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_CREATE, &mut c),
        Err(Error::Invalid)
    );
    assert_eq!(
        wait(&client, &[77], 0, Duration::ZERO),
        Err(Error::NotFound)
    );
    assert_eq!(
        wait(&client, &[signalled], 1 << 5, Duration::ZERO),
        Err(Error::Invalid)
    );
    let mut d = DrmSyncobjDestroy {
        handle: empty,
        pad: 0,
    };
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_DESTROY, &mut d).unwrap();
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_DESTROY, &mut d),
        Err(Error::Invalid)
    );
    assert_eq!(file.syncobjs().len(), 1);
    // The lowest free handle is reused.
    let mut c = DrmSyncobjCreate::default();
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_CREATE, &mut c).unwrap();
    assert_eq!(c.handle, 1);
    // After unplug: ENODEV.
    reg.device().unplug();
    assert_eq!(
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_CREATE, &mut c),
        Err(Error::NoDevice)
    );
}
