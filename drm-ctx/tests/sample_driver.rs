// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The sample driver (`sample/driver.rs`, the same file the kernel builds) against the host DRM
//! core, with the checks the kernel's userspace stage makes through `/dev/dri/renderD128`.

#[path = "../sample/driver.rs"]
#[allow(dead_code)]
mod driver;

/// The host environment of the sample driver: `jobqueue`'s host fences and a deterministic
/// executor run right after each submission.
mod env {
    use std::sync::{Arc, Mutex};

    use drm_ctx::{
        drm::SyncobjFence,
        host::syncobj::{Registration, SyncFence},
        Result,
    };
    use jobqueue::host::{HostAlloc, HostFence, ManualClock, TestExecutor};
    use jobqueue::{AddCallback, Committed, Fence as _, PreparedJob, Queue, QueueConfig};

    pub(crate) type Alloc = drm_ctx::mem::Global;
    pub(crate) type Fence = HostFence;
    pub(crate) type JobAlloc = HostAlloc;

    pub(crate) fn signalled_fence() -> Result<Fence> {
        Ok(HostFence::signalled(Ok(())))
    }

    /// A done fence as a syncobj holds it.
    struct Done(HostFence);

    impl SyncFence for Done {
        fn status(&self) -> Option<core::result::Result<(), i32>> {
            self.0.status().map(|r| r.map_err(|e| e.to_errno()))
        }

        fn wake_on_signal(&self, waker: &core::task::Waker) -> Registration {
            let cb = HostFence::new_callback();
            match self.0.add_callback(&cb, waker) {
                AddCallback::Queued => {
                    let fence = self.0.clone();
                    Registration::new(move || {
                        fence.remove_callback(&cb);
                    })
                }
                AddCallback::Signalled(_) | AddCallback::Busy => {
                    waker.wake_by_ref();
                    Registration::done()
                }
            }
        }

        fn as_any(&self) -> &dyn core::any::Any {
            self
        }
    }

    pub(crate) fn syncobj_fence(done: &Fence) -> Result<SyncobjFence> {
        Ok(Arc::new(Done(done.clone())).into())
    }

    type Q = Queue<super::driver::Ring, TestExecutor, ManualClock, 8>;

    pub(crate) struct Jobs {
        alloc: HostAlloc,
        exec: TestExecutor,
        queue: Mutex<Q>,
    }

    impl Jobs {
        pub(crate) fn new(config: QueueConfig) -> Result<Self> {
            let exec = TestExecutor::new();
            let queue = Queue::new(
                super::driver::Ring,
                exec.clone(),
                ManualClock::new(),
                config,
            )
            .map_err(|_| drm_ctx::Error::NoMemory)?;
            Ok(Jobs {
                alloc: HostAlloc::new(),
                exec,
                queue: Mutex::new(queue),
            })
        }

        pub(crate) fn alloc(&self) -> &JobAlloc {
            &self.alloc
        }

        pub(crate) fn submit(
            &self,
            job: PreparedJob<Fence, JobAlloc, Fence>,
        ) -> core::result::Result<Committed<Fence>, jobqueue::Error> {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            let c = q.submit(job).map_err(|r| r.error)?;
            self.exec.run_until_idle(|| q.run());
            Ok(c)
        }
    }
}

use driver::*;
use drm_ctx::{
    device,
    drm::{ioctl, Device, OpenOptions},
    host::{syncobj::*, Client},
    types::ARef,
    Error,
};

/// The parent's binding keeps the DRM device (and the device its parent): unbind at the end,
/// as the driver core does at removal, or both stay.
struct Bound(ARef<device::Device>);

impl Drop for Bound {
    fn drop(&mut self) {
        if self.0.is_bound() {
            self.0.unbind().unwrap();
        }
    }
}

fn open() -> (Bound, ARef<Device<SampleDriver>>, Client<SampleDriver>) {
    let pdev = device::Device::new("gpukit-sample").unwrap();
    pdev.probe(|dev| driver::probe(dev).map(ARef::from))
        .unwrap();
    let drm = pdev
        .driver_data::<ARef<Device<SampleDriver>>>()
        .unwrap()
        .as_ref()
        .clone();
    let client = Client::open(&drm, OpenOptions::render()).unwrap();
    (Bound(pdev), drm, client)
}

fn wait(client: &Client<SampleDriver>, handle: u32) -> Result<u32, Error> {
    let h = client.mem().alloc_bytes(&handle.to_ne_bytes()).unwrap();
    let mut w = DrmSyncobjWait {
        handles: h,
        timeout_nsec: monotonic_ns() + 5_000_000_000,
        count_handles: 1,
        flags: DRM_SYNCOBJ_WAIT_FLAGS_WAIT_ALL,
        ..Default::default()
    };
    client.ioctl_arg(DRM_IOCTL_SYNCOBJ_WAIT, &mut w)
}

#[test]
fn version_bo_mmap_submit_and_close() {
    let (_pdev, _drm, client) = open();
    let mut v = ioctl::DrmVersion::default();
    client.ioctl_arg(ioctl::DRM_IOCTL_VERSION, &mut v).unwrap();
    assert_eq!((v.version_major, v.version_minor, v.name_len), (1, 0, 13));

    let mut bo = BoCreate {
        size: 8192,
        ..Default::default()
    };
    client.ioctl_arg(BO_CREATE, &mut bo).unwrap();
    assert_ne!(bo.handle, 0);
    let mut off = BoMmapOffset {
        handle: bo.handle,
        ..Default::default()
    };
    client.ioctl_arg(BO_MMAP_OFFSET, &mut off).unwrap();
    assert_eq!(off.offset % 4096, 0);
    assert_eq!(client.mmap(off.offset, 8192).unwrap().size(), 8192);

    let mut seqnos = Vec::new();
    for _ in 0..2 {
        let mut s = Submit::default();
        client.ioctl_arg(SUBMIT, &mut s).unwrap();
        assert_eq!(wait(&client, s.syncobj), Ok(0));
        let mut d = DrmSyncobjDestroy {
            handle: s.syncobj,
            pad: 0,
        };
        client.ioctl_arg(DRM_IOCTL_SYNCOBJ_DESTROY, &mut d).unwrap();
        assert_eq!(
            client.ioctl_arg(DRM_IOCTL_SYNCOBJ_DESTROY, &mut d),
            Err(Error::Invalid)
        );
        seqnos.push(s.seqno);
    }
    assert!(seqnos[1] > seqnos[0]);

    let mut c = ioctl::DrmGemClose {
        handle: bo.handle,
        pad: 0,
    };
    client
        .ioctl_arg(ioctl::DRM_IOCTL_GEM_CLOSE, &mut c)
        .unwrap();
    assert_eq!(
        client.ioctl_arg(ioctl::DRM_IOCTL_GEM_CLOSE, &mut c),
        Err(Error::Invalid)
    );
    assert_eq!(
        client.ioctl_arg(BO_MMAP_OFFSET, &mut off),
        Err(Error::NotFound)
    );
}

#[test]
fn bad_input_gets_the_errno_the_kernel_run_expects() {
    let (_pdev, _drm, client) = open();
    let bo = |size, flags| {
        let mut a = BoCreate {
            size,
            flags,
            handle: 0,
        };
        client.ioctl_arg(BO_CREATE, &mut a).map(|_| a.handle)
    };
    assert_eq!(bo(0, 0), Err(Error::Invalid));
    assert_eq!(bo(4096, 1), Err(Error::Invalid));
    assert_eq!(bo(1 << 40, 0), Err(Error::Overflow));
    let mut off = BoMmapOffset {
        handle: 0xdead,
        pad: 0,
        offset: 0,
    };
    assert_eq!(
        client.ioctl_arg(BO_MMAP_OFFSET, &mut off),
        Err(Error::NotFound)
    );
    off.pad = 1;
    assert_eq!(
        client.ioctl_arg(BO_MMAP_OFFSET, &mut off),
        Err(Error::Invalid)
    );
    let mut s = Submit {
        flags: 1,
        ..Default::default()
    };
    assert_eq!(client.ioctl_arg(SUBMIT, &mut s), Err(Error::Invalid));
    let unknown = ioctl::IOWR::<[u64; 2]>(0x4f);
    assert_eq!(client.ioctl(unknown, &mut [0; 16]), Err(Error::Invalid));
    let not_drm = ioctl::ioc(3, u32::from(b'x'), 0x40, 16);
    assert_eq!(client.ioctl(not_drm, &mut [0; 16]), Err(Error::NotTty));
    assert_eq!(wait(&client, 0x77), Err(Error::NotFound));
    // A short BO_CREATE (only `size`): zero-extended, so it succeeds; the handle is not
    // copied back (it lies beyond what userspace passed).
    let short = ioctl::ioc(3, ioctl::BASE, 0x40, 8);
    let mut buf = 4096u64.to_ne_bytes();
    assert_eq!(client.ioctl(short, &mut buf), Ok(0));
    assert_eq!(u64::from_ne_bytes(buf), 4096);
}

#[test]
fn the_device_goes_with_its_parent_binding() {
    let (pdev, drm, client) = open();
    pdev.0.unbind().unwrap();
    assert!(drm.is_unplugged());
    let mut s = Submit::default();
    assert_eq!(client.ioctl_arg(SUBMIT, &mut s), Err(Error::NoDevice));
}
