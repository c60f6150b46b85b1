// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The Tyr flow, release-exactly-once, ioctl dispatch and unplug.

#![cfg(feature = "std")]

mod common;

use common::*;
use drm_ctx::{
    device,
    drm::{self, gem, ioctl, AnyCtx, OpenOptions},
    host::Client,
    mem::Allocator,
    types::ARef,
    uaccess::UserMemory,
    Error, Result,
};
use std::sync::{
    atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst},
    Arc,
};

fn primary(authenticated: bool, master: bool, sys_admin: bool) -> OpenOptions {
    OpenOptions {
        authenticated,
        master,
        sys_admin,
        ..OpenOptions::primary()
    }
}

// ---------------------------------------------------------------- the Tyr flow

#[test]
fn tyr_flow_objects_before_registration_then_serve_ioctls() {
    let (parent, reg, c) = registered();
    // Two firmware objects were created while the driver data was being built.
    assert_eq!(Counters::get(&c.bo_news), 2);
    let dev = reg.device();
    assert_eq!(dev.firmware.len(), 2);
    assert_eq!(dev.firmware[1].size(), 3 * 4096);
    assert!(dev.firmware[0].device().unwrap().same_device(dev));

    let client = Client::open(dev, OpenOptions::render()).unwrap();
    let mut create = BoCreate {
        size: 5000,
        ..Default::default()
    };
    assert_eq!(client.ioctl_arg(BO_CREATE, &mut create), Ok(0));
    assert_eq!(create.handle, 1);
    let mut off = BoMmapOffset {
        handle: 1,
        ..Default::default()
    };
    assert_eq!(client.ioctl_arg(BO_MMAP_OFFSET, &mut off), Ok(0));
    assert!(off.offset >= 1 << 32);
    let mapped = client.mmap(off.offset, 8192).unwrap();
    assert_eq!(mapped.size(), 8192);
    assert_eq!(mapped.handle_count(), 1);

    let mut echo = Echo {
        input: 41,
        output: 0,
    };
    assert_eq!(client.ioctl_arg(ECHO, &mut echo), Ok(0));
    assert_eq!(echo.output, 42);

    drop(client);
    assert_eq!(Counters::get(&c.handle_closes), 1);
    assert_eq!(Counters::get(&c.file_closes), 1);
    // The mapping keeps the object alive after its handle is gone.
    assert_eq!(Counters::get(&c.bo_drops), 0);
    drop(mapped);
    assert_eq!(Counters::get(&c.bo_drops), 1);

    drop(reg);
    assert_eq!(Counters::get(&c.data_drops), 1);
    assert_eq!(Counters::get(&c.bo_drops), 3);
    drop(parent);
}

#[test]
fn foreign_owned_registration_follows_the_parent_binding() {
    let c = Arc::new(Counters::default());
    let parent = device::Device::new("mali").unwrap();
    let other = device::Device::new("other").unwrap();
    parent
        .probe(|pdev| {
            let unreg = unregistered(pdev, &c);
            // The wrong parent is refused.
            let wrong = other.probe(|odev| {
                let r = drm::Registration::new_foreign_owned(unreg, odev, 0).map(|_| ());
                assert_eq!(r, Err(Error::Invalid));
                Ok(())
            });
            assert_eq!(wrong, Ok(()));
            assert_eq!(Counters::get(&c.data_drops), 1);

            let unreg = unregistered(pdev, &c);
            let drm: &TestDevice = drm::Registration::new_foreign_owned(unreg, pdev, 0)?;
            assert!(drm.is_registered());
            Ok(ARef::from(drm))
        })
        .unwrap();
    let drm = parent.driver_data::<ARef<TestDevice>>().unwrap();
    let client = Client::open(&drm, OpenOptions::render()).unwrap();
    parent.unbind().unwrap();
    assert!(drm.is_unplugged());
    let mut echo = Echo::default();
    assert_eq!(client.ioctl_arg(ECHO, &mut echo), Err(Error::NoDevice));
    assert_eq!(Counters::get(&c.data_drops), 1);
    drop(drm);
    assert_eq!(
        Counters::get(&c.data_drops),
        1,
        "the client still holds the device"
    );
    drop(client);
    assert_eq!(Counters::get(&c.data_drops), 2);
    assert_eq!(Counters::get(&c.bo_drops), Counters::get(&c.bo_news));
}

#[test]
fn assume_and_as_registered() {
    let c = Arc::new(Counters::default());
    let parent = device::Device::new("p").unwrap();
    let unreg = unregistered(&parent, &c);
    assert!(unreg.as_registered().is_none());
    let any: ARef<TestDevice<AnyCtx>> = ARef::from(&*unreg);
    let reg = drm::Registration::new(unreg, 0).unwrap();
    let checked = any.as_registered().unwrap();
    assert!(checked.same_device(reg.device()));
    // SAFETY: The device was registered just above.
    let assumed = unsafe { any.assume_registered() };
    assert!(assumed.same_device(reg.device()));
    let back: &TestDevice<AnyCtx> = reg.device().as_ref();
    assert!(back.same_device(&*any));
}

#[test]
fn linux_names_of_the_contexts() {
    fn ctx_name<C: drm::DeviceContext>(_: &drm::Device<TestDriver, C>) -> &'static str {
        core::any::type_name::<C>()
    }
    let c = Arc::new(Counters::default());
    let parent = device::Device::new("p").unwrap();
    let unreg = unregistered(&parent, &c);
    let uninit: &drm::Device<TestDriver, drm::Uninit> = &unreg;
    assert!(ctx_name(uninit).ends_with("AnyCtx"));
    let reg = drm::Registration::new(unreg, 0).unwrap();
    assert!(ctx_name(reg.device()).ends_with("Registered"));
}

#[test]
fn registration_flags_must_be_zero() {
    let c = Arc::new(Counters::default());
    let parent = device::Device::new("p").unwrap();
    let r = drm::Registration::new(unregistered(&parent, &c), 1);
    assert!(matches!(r, Err(Error::Invalid)));
    assert_eq!(Counters::get(&c.data_drops), 1);
}

// ---------------------------------------------------------------- release exactly once

#[test]
fn data_dropped_exactly_once_at_the_last_reference() {
    let (parent, reg, c) = registered();
    let refs: Vec<ARef<TestDevice>> = (0..8).map(|_| ARef::from(reg.device())).collect();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let bo = gem::Object::<Bo>::new(reg.device(), 1, c.clone()).unwrap();
    drop(reg);
    let handles: Vec<_> = refs
        .into_iter()
        .map(|r| std::thread::spawn(move || drop(r)))
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        Counters::get(&c.data_drops),
        0,
        "the file still holds the device"
    );
    drop(client);
    assert_eq!(Counters::get(&c.data_drops), 1);
    // The object outlives the device's data; it no longer reaches the device.
    assert_eq!(bo.device().err(), Some(Error::NoDevice));
    assert_eq!(bo.size(), 4096);
    drop(bo);
    assert_eq!(Counters::get(&c.data_drops), 1);
    assert_eq!(Counters::get(&c.bo_drops), 3);
    drop(parent);
}

#[test]
fn failed_init_releases_the_device_and_escaped_objects_stay_valid() {
    let c = Arc::new(Counters::default());
    let parent = device::Device::new("p").unwrap();
    let mut escaped = None;
    let r = drm::UnregisteredDevice::<TestDriver>::new_with(&parent, |init| {
        assert!(init.parent().same_device(&*parent));
        let bo = gem::Object::<Bo, AnyCtx>::new_for_init(init, 4096, c.clone())?;
        let _dropped = gem::Object::<Bo, AnyCtx>::new_for_init(init, 4096, c.clone())?;
        escaped = Some(bo);
        Err(Error::Busy)
    });
    assert!(matches!(r, Err(Error::Busy)));
    assert_eq!(Counters::get(&c.data_drops), 0, "no data was ever built");
    assert_eq!(Counters::get(&c.bo_drops), 1);
    let bo = escaped.unwrap();
    assert_eq!(bo.device().err(), Some(Error::NoDevice));
    drop(bo);
    assert_eq!(Counters::get(&c.bo_drops), 2);
}

#[test]
fn zero_sized_objects_are_refused() {
    let (_parent, reg, c) = registered();
    let r = gem::Object::<Bo>::new(reg.device(), 0, c.clone());
    assert_eq!(r.err(), Some(Error::Invalid));
    let r = gem::Object::<Bo>::new(reg.device(), usize::MAX, c.clone());
    assert_eq!(r.err(), Some(Error::Invalid));
}

/// An allocator that fails after a number of allocations and counts what is live.
struct Limited;
static LIMITED_BUDGET: AtomicUsize = AtomicUsize::new(0);
static LIMITED_LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: Forwards to the global allocator.
unsafe impl Allocator for Limited {
    fn alloc(layout: std::alloc::Layout) -> Result<std::ptr::NonNull<u8>> {
        if LIMITED_BUDGET
            .fetch_update(SeqCst, SeqCst, |b| b.checked_sub(1))
            .is_err()
        {
            return Err(Error::NoMemory);
        }
        let p = <drm_ctx::mem::Global as Allocator>::alloc(layout)?;
        LIMITED_LIVE.fetch_add(1, SeqCst);
        Ok(p)
    }

    unsafe fn free(ptr: std::ptr::NonNull<u8>, layout: std::alloc::Layout) {
        LIMITED_LIVE.fetch_sub(1, SeqCst);
        // SAFETY: Forwarded from our caller.
        unsafe { <drm_ctx::mem::Global as Allocator>::free(ptr, layout) }
    }
}

#[test]
fn allocation_failure_is_an_error_and_nothing_leaks() {
    let c = Arc::new(Counters::default());
    // Budget: parent device, drm device, one object; the second object fails.
    LIMITED_BUDGET.store(3, SeqCst);
    let parent = device::Device::new_in::<Limited>("p").unwrap();
    let r = drm::UnregisteredDevice::<TestDriver>::new_with_in::<Limited>(&parent, |init| {
        let a = gem::Object::<Bo, AnyCtx>::new_for_init(init, 4096, c.clone())?;
        let b = gem::Object::<Bo, AnyCtx>::new_for_init(init, 4096, c.clone())?;
        Ok(Data {
            counters: c.clone(),
            firmware: vec![a, b],
        })
    });
    assert!(matches!(r, Err(Error::NoMemory)));
    assert_eq!(LIMITED_LIVE.load(SeqCst), 1, "only the parent is left");
    LIMITED_BUDGET.store(0, SeqCst);
    assert!(matches!(
        drm::UnregisteredDevice::<TestDriver>::new_in::<Limited>(
            &parent,
            Data {
                counters: c.clone(),
                firmware: vec![]
            }
        ),
        Err(Error::NoMemory)
    ));
    assert_eq!(
        Counters::get(&c.data_drops),
        1,
        "the data passed in is dropped"
    );
    drop(parent);
    assert_eq!(LIMITED_LIVE.load(SeqCst), 0);
}

// ---------------------------------------------------------------- ioctl dispatch

#[test]
fn unknown_commands() {
    let (_p, reg, _c) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let mut buf = [0u8; 16];
    // Not a DRM ioctl.
    let foreign = ioctl::ioc(
        ioctl::IOC_READ | ioctl::IOC_WRITE,
        u32::from(b'T'),
        0x40,
        16,
    );
    assert_eq!(client.ioctl(foreign, &mut buf), Err(Error::NotTty));
    // Driver number past the table.
    assert_eq!(
        client.ioctl(ioctl::IOWR::<Echo>(0x4c), &mut buf),
        Err(Error::Invalid)
    );
    // Beyond the driver range, and unimplemented core numbers.
    assert_eq!(
        client.ioctl(ioctl::IOWR::<Echo>(0xA0), &mut buf),
        Err(Error::Invalid)
    );
    assert_eq!(
        client.ioctl(ioctl::IOWR::<Echo>(0x01), &mut buf),
        Err(Error::Invalid)
    );
}

#[test]
fn direction_is_the_intersection_of_caller_and_driver() {
    let (_p, reg, _c) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let file = client.file();
    // Correct: STORE is write-only; the handler's change is not copied out.
    let mut v = 5u64;
    assert_eq!(client.ioctl_arg(STORE, &mut v), Ok(0));
    assert_eq!(v, 5);
    assert_eq!(file.inner().stored.load(SeqCst), 5);
    // STORE issued as read: nothing is copied in (the handler sees 0) nor out.
    let as_read = ioctl::ioc(ioctl::IOC_READ, ioctl::BASE, 0x44, 8);
    let mut v = 9u64;
    assert_eq!(client.ioctl_arg(as_read, &mut v), Ok(0));
    assert_eq!(v, 9);
    assert_eq!(file.inner().stored.load(SeqCst), 0);
    // LOAD issued as write: not copied in (the handler asserts it sees 0), not copied out.
    file.inner().stored.store(77, SeqCst);
    let as_write = ioctl::ioc(ioctl::IOC_WRITE, ioctl::BASE, 0x45, 8);
    let mut v = 3u64;
    assert_eq!(client.ioctl_arg(as_write, &mut v), Ok(0));
    assert_eq!(v, 3);
    let mut v = 3u64;
    assert_eq!(client.ioctl_arg(LOAD, &mut v), Ok(0));
    assert_eq!(v, 77);
    // ECHO without direction: the handler runs on zeros, nothing comes back.
    let mut e = Echo {
        input: 1,
        output: 1,
    };
    assert_eq!(
        client.ioctl_arg(ioctl::ioc(ioctl::IOC_NONE, ioctl::BASE, 0x40, 16), &mut e),
        Ok(0)
    );
    assert_eq!(
        e,
        Echo {
            input: 1,
            output: 1
        }
    );
}

#[test]
fn shorter_structs_are_zero_extended() {
    let (_p, reg, _c) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    // An "old" userspace knows only `input`: 8 bytes, mapped exactly (reading more would fault).
    let short = ioctl::ioc(ioctl::IOC_READ | ioctl::IOC_WRITE, ioctl::BASE, 0x40, 8);
    let mut buf = 41u64.to_ne_bytes();
    assert_eq!(client.ioctl(short, &mut buf), Ok(0));
    assert_eq!(u64::from_ne_bytes(buf), 41);
    // A short QUERY: `size` and `pad` are zero-extended, so a null pointer asks for the size.
    let short_query = ioctl::ioc(ioctl::IOC_READ | ioctl::IOC_WRITE, ioctl::BASE, 0x46, 8);
    let mut buf = 0u64.to_ne_bytes();
    assert_eq!(client.ioctl(short_query, &mut buf), Ok(0));
}

#[test]
fn longer_structs_are_accepted_as_drm_ioctl_does() {
    let (_p, reg, _c) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let long = ioctl::ioc(ioctl::IOC_READ | ioctl::IOC_WRITE, ioctl::BASE, 0x40, 24);
    let mut buf = [0u8; 24];
    buf[..8].copy_from_slice(&1u64.to_ne_bytes());
    assert_eq!(client.ioctl(long, &mut buf), Ok(0));
    assert_eq!(u64::from_ne_bytes(buf[8..16].try_into().unwrap()), 2);
    assert_eq!(&buf[16..], &[0; 8]);
    // Bytes past the driver's structure are not looked at (Linux's `drm_ioctl` does not check
    // them) and are copied back as they came.
    let mut buf = [0u8; 24];
    buf[..8].copy_from_slice(&5u64.to_ne_bytes());
    buf[23] = 1;
    assert_eq!(client.ioctl(long, &mut buf), Ok(0));
    assert_eq!(u64::from_ne_bytes(buf[8..16].try_into().unwrap()), 6);
    assert_eq!(buf[23], 1);
}

#[test]
fn permissions() {
    let (_p, reg, _c) = registered();
    let dev = reg.device();
    let render = Client::open(dev, OpenOptions::render()).unwrap();
    let plain = Client::open(dev, primary(false, false, false)).unwrap();
    let authed = Client::open(dev, primary(true, false, false)).unwrap();
    let master = Client::open(dev, primary(true, true, false)).unwrap();
    let admin = Client::open(dev, primary(false, false, true)).unwrap();
    let mut u = 0u32;
    let mut none: [u8; 0] = [];

    // Render clients only get RENDER_ALLOW ioctls.
    assert_eq!(render.ioctl_arg(MASTER_ONLY, &mut u), Err(Error::Access));
    assert_eq!(render.ioctl_arg(AUTH_ONLY, &mut u), Err(Error::Access));
    assert_eq!(render.ioctl(ROOT, &mut none), Err(Error::Access));
    let mut bo = BoCreate {
        size: 4096,
        ..Default::default()
    };
    assert_eq!(render.ioctl_arg(BO_CREATE, &mut bo), Ok(0));

    // AUTH needs authentication on the primary node.
    assert_eq!(plain.ioctl_arg(AUTH_ONLY, &mut u), Err(Error::Access));
    assert_eq!(plain.ioctl_arg(BO_CREATE, &mut bo), Err(Error::Access));
    assert_eq!(authed.ioctl_arg(AUTH_ONLY, &mut u), Ok(0));

    // MASTER needs the master.
    assert_eq!(authed.ioctl_arg(MASTER_ONLY, &mut u), Err(Error::Access));
    assert_eq!(master.ioctl_arg(MASTER_ONLY, &mut u), Ok(7));

    // ROOT_ONLY needs CAP_SYS_ADMIN.
    assert_eq!(master.ioctl(ROOT, &mut none), Err(Error::Access));
    assert_eq!(admin.ioctl(ROOT, &mut none), Ok(1));
}

#[test]
fn faults_errors_and_results() {
    let (_p, reg, _c) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    // An unmapped argument address.
    assert_eq!(client.fd().ioctl(ECHO, 0x10), Err(Error::Fault));
    // A pointer inside the argument that is unmapped.
    let mut q = Query {
        pointer: 0x20,
        size: 4,
        pad: 0,
    };
    assert_eq!(client.ioctl_arg(QUERY, &mut q), Err(Error::Fault));
    // ... and a good one.
    let out = client.mem().alloc(16).unwrap();
    let mut q = Query {
        pointer: out,
        size: 16,
        pad: 0,
    };
    assert_eq!(client.ioctl_arg(QUERY, &mut q), Ok(0));
    assert_eq!(q.size as usize, QUERY_BYTES.len());
    assert_eq!(
        client.mem().read_vec(out, QUERY_BYTES.len()).unwrap(),
        QUERY_BYTES
    );
    // A failing handler's argument is still copied out.
    let mut e = Echo::default();
    assert_eq!(client.ioctl_arg(FAILING, &mut e), Err(Error::Other(-5)));
    assert_eq!(e.output, 99);
    // A result that does not fit an int.
    let mut v = 0u32;
    assert_eq!(client.ioctl_arg(HUGE, &mut v), Err(Error::Range));
    assert_eq!(v, 5);
}

#[test]
fn core_version_ioctl() {
    let (_p, reg, _c) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let mut v = ioctl::DrmVersion::default();
    assert_eq!(client.ioctl_arg(ioctl::DRM_IOCTL_VERSION, &mut v), Ok(0));
    assert_eq!((v.version_major, v.version_minor), (1, 5));
    assert_eq!(v.name_len, 8);
    assert_eq!(v.desc_len, 11);
    assert_eq!(v.date_len, 1);
    // A name buffer too small gets the prefix, and the full length.
    let name = client.mem().alloc(3).unwrap();
    let mut v = ioctl::DrmVersion {
        name,
        name_len: 3,
        ..Default::default()
    };
    assert_eq!(client.ioctl_arg(ioctl::DRM_IOCTL_VERSION, &mut v), Ok(0));
    assert_eq!(client.mem().read_vec(name, 3).unwrap(), b"tyr");
    assert_eq!(v.name_len, 8);
    // An unmapped buffer faults.
    let mut v = ioctl::DrmVersion {
        desc: 0x30,
        desc_len: 4,
        ..Default::default()
    };
    assert_eq!(
        client.ioctl_arg(ioctl::DRM_IOCTL_VERSION, &mut v),
        Err(Error::Fault)
    );
}

// ---------------------------------------------------------------- handles and mmap

#[test]
fn handle_lifecycle() {
    let (_p, reg, c) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let file = client.file();
    let bo = gem::Object::<Bo>::new(reg.device(), 4096, c.clone()).unwrap();
    let h: Vec<u32> = (0..3).map(|_| bo.create_handle(file).unwrap()).collect();
    assert_eq!(h, [1, 2, 3]);
    assert_eq!(bo.handle_count(), 3);
    let mut close = ioctl::DrmGemClose { handle: 2, pad: 0 };
    assert_eq!(
        client.ioctl_arg(ioctl::DRM_IOCTL_GEM_CLOSE, &mut close),
        Ok(0)
    );
    assert_eq!(
        client.ioctl_arg(ioctl::DRM_IOCTL_GEM_CLOSE, &mut close),
        Err(Error::Invalid)
    );
    assert_eq!(
        gem::Object::<Bo>::lookup_handle(file, 2).err(),
        Some(Error::NotFound)
    );
    // The lowest free handle is reused.
    assert_eq!(bo.create_handle(file), Ok(2));
    let found = gem::Object::<Bo>::lookup_handle(file, 3).unwrap();
    assert!(ARef::ptr_eq(&found, &bo));
    assert_eq!(file.handles(), [1, 2, 3]);
    assert_eq!(Counters::get(&c.handle_opens), 4);
    drop(found);
    drop(bo);
    assert_eq!(Counters::get(&c.bo_drops), 0, "handles keep the object");
    drop(client);
    assert_eq!(Counters::get(&c.handle_closes), 4);
    assert_eq!(Counters::get(&c.bo_drops), 1);
}

#[test]
fn handles_of_another_device_are_refused() {
    let (_p1, reg1, c) = registered();
    let (_p2, reg2, _c2) = registered();
    let client2 = Client::open(reg2.device(), OpenOptions::render()).unwrap();
    let bo = gem::Object::<Bo>::new(reg1.device(), 4096, c.clone()).unwrap();
    assert_eq!(bo.create_handle(client2.file()), Err(Error::Invalid));
}

#[test]
fn mmap_offsets_and_access() {
    let (_p, reg, c) = registered();
    let a = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let b = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let bo = gem::Object::<Bo>::new(reg.device(), 2 * 4096, c.clone()).unwrap();
    let bo2 = gem::Object::<Bo>::new(reg.device(), 4096, c.clone()).unwrap();
    bo.create_handle(a.file()).unwrap();
    let off = bo.create_mmap_offset().unwrap();
    assert_eq!(bo.create_mmap_offset(), Ok(off), "stable");
    let off2 = bo2.create_mmap_offset().unwrap();
    assert_eq!(off2, off + 2 * 4096, "ranges do not overlap");
    assert!(ARef::ptr_eq(&a.mmap(off, 4096).unwrap(), &bo));
    assert_eq!(a.mmap(off, 3 * 4096).err(), Some(Error::Invalid));
    assert_eq!(a.mmap(off + 1, 4096).err(), Some(Error::Invalid));
    assert_eq!(a.mmap(off, 0).err(), Some(Error::Invalid));
    assert_eq!(a.mmap(0x1000, 4096).err(), Some(Error::Invalid));
    // `b` has no handle to the object.
    assert_eq!(b.mmap(off, 4096).err(), Some(Error::Access));
}

#[test]
fn failing_file_open() {
    let (_p, reg, c) = registered();
    c.fail_file_open.store(true, SeqCst);
    assert!(matches!(
        Client::open(reg.device(), OpenOptions::render()),
        Err(Error::Busy)
    ));
    assert_eq!(Counters::get(&c.file_closes), 0);
}

// ---------------------------------------------------------------- unplug

#[test]
fn unplug_with_open_files_and_live_objects() {
    let (parent, reg, c) = registered();
    let dev: ARef<TestDevice> = reg.device().into();
    let client = Client::open(&dev, OpenOptions::render()).unwrap();
    let mut create = BoCreate {
        size: 4096,
        ..Default::default()
    };
    client.ioctl_arg(BO_CREATE, &mut create).unwrap();
    let bo = gem::Object::<Bo>::lookup_handle(client.file(), create.handle).unwrap();
    let off = bo.create_mmap_offset().unwrap();

    assert_eq!(Counters::get(&c.unplugged), 0);
    drop(reg);
    assert!(dev.is_unplugged());
    // The driver heard of it once, when nothing could enter the device any more.
    assert_eq!(Counters::get(&c.unplugged), 1);
    assert_eq!(Counters::get(&c.unplugged_closed), 1);
    // Every userspace entry point is ENODEV now.
    let mut e = Echo::default();
    assert_eq!(client.ioctl_arg(ECHO, &mut e), Err(Error::NoDevice));
    let mut v = ioctl::DrmVersion::default();
    assert_eq!(
        client.ioctl_arg(ioctl::DRM_IOCTL_VERSION, &mut v),
        Err(Error::NoDevice)
    );
    assert_eq!(client.mmap(off, 4096).err(), Some(Error::NoDevice));
    assert_eq!(
        Client::open(&dev, OpenOptions::render()).err(),
        Some(Error::NoDevice)
    );
    assert_eq!(dev.enter().err(), Some(Error::NoDevice));
    dev.unplug(); // idempotent
    assert_eq!(Counters::get(&c.unplugged), 1);
    // Objects and files stay valid.
    assert_eq!(bo.size(), 4096);
    assert_eq!(client.file().handles(), [1]);
    assert_eq!(Counters::get(&c.data_drops), 0);
    drop(client);
    assert_eq!(Counters::get(&c.file_closes), 1);
    drop(dev);
    assert_eq!(Counters::get(&c.data_drops), 1);
    drop(bo);
    assert_eq!(Counters::get(&c.bo_drops), 3);
    drop(parent);
}

#[test]
fn unplug_from_inside_an_ioctl() {
    let (_p, reg, c) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let mut none: [u8; 0] = [];
    assert_eq!(client.ioctl(UNPLUG, &mut none), Ok(0));
    assert_eq!(client.ioctl(UNPLUG, &mut none), Err(Error::NoDevice));
    drop(reg);
    assert_eq!(Counters::get(&c.unplugged), 1);
}

#[test]
fn threads_issuing_ioctls_while_unplugged() {
    let threads = if cfg!(miri) { 2 } else { 4 };
    let warmup = if cfg!(miri) { 2 } else { 50 };
    let (_p, reg, c) = registered();
    let done = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
            let done = done.clone();
            let started = started.clone();
            std::thread::spawn(move || {
                let mut ok = 0u64;
                loop {
                    let after_unplug = done.load(SeqCst);
                    let mut e = Echo {
                        input: ok,
                        output: 0,
                    };
                    match client.ioctl_arg(ECHO, &mut e) {
                        Ok(0) => {
                            assert!(!after_unplug, "an ioctl started after unplug succeeded");
                            assert_eq!(e.output, ok + 1);
                            ok += 1;
                            if ok == warmup {
                                started.fetch_add(1, SeqCst);
                            }
                        }
                        Err(Error::NoDevice) => return ok,
                        other => panic!("unexpected {other:?}"),
                    }
                    std::thread::yield_now();
                }
            })
        })
        .collect();
    while started.load(SeqCst) < threads {
        std::thread::yield_now();
    }
    reg.device().unplug();
    done.store(true, SeqCst);
    for w in workers {
        assert!(w.join().unwrap() >= warmup);
    }
    assert_eq!(Counters::get(&c.file_closes), threads);
    drop(reg);
    assert_eq!(Counters::get(&c.data_drops), 1);
}

#[test]
fn user_space_bounds() {
    let mem = drm_ctx::host::UserSpace::new();
    let a = mem.alloc(4).unwrap();
    assert_eq!(mem.write(a, &[1, 2, 3, 4, 5]), Err(Error::Fault));
    assert_eq!(
        mem.read_vec(a, 4).unwrap(),
        [0; 4],
        "a failed write writes nothing"
    );
    assert_eq!(mem.write(0, &[]), Ok(()));
    mem.free(a).unwrap();
    assert_eq!(mem.free(a), Err(Error::Fault));
    assert_eq!(mem.read_vec(a, 1), Err(Error::Fault));
}

#[test]
fn concurrent_handles_and_mmap_offsets() {
    let threads = if cfg!(miri) { 2 } else { 4 };
    let per_thread = if cfg!(miri) { 3 } else { 50 };
    let (_p, reg, c) = registered();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    let bo = gem::Object::<Bo>::new(reg.device(), 4096, c.clone()).unwrap();
    let (handles, offsets): (Vec<Vec<u32>>, Vec<u64>) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let off = bo.create_mmap_offset().unwrap();
                    let mut mine = Vec::new();
                    for i in 0..per_thread {
                        let h = bo.create_handle(client.file()).unwrap();
                        if i % 2 == 0 {
                            client.file().close_handle(h).unwrap();
                        } else {
                            mine.push(h);
                        }
                    }
                    (mine, off)
                })
            })
            .collect();
        // Join only once all are running.
        workers.into_iter().map(|w| w.join().unwrap()).unzip()
    });
    // Every thread saw the same offset, and the surviving handles are distinct.
    assert!(offsets.iter().all(|o| *o == offsets[0]));
    let mut all: Vec<u32> = handles.into_iter().flatten().collect();
    all.sort_unstable();
    let n = all.len();
    all.dedup();
    assert_eq!(all.len(), n);
    assert_eq!(client.file().handles(), all);
    assert_eq!(bo.handle_count(), n);
}

#[test]
fn a_cpu_page_is_a_page_aligned_address() {
    let layout = std::alloc::Layout::from_size_align(2 * gem::PAGE_SIZE, gem::PAGE_SIZE).unwrap();
    // SAFETY: A non-zero size.
    let block = std::ptr::NonNull::new(unsafe { std::alloc::alloc(layout) }).unwrap();
    let (inside, next) = (
        block.map_addr(|a| a.checked_add(8).unwrap()),
        block.map_addr(|a| a.checked_add(gem::PAGE_SIZE).unwrap()),
    );
    // SAFETY: The block is allocated and outlives the pages made of it.
    let start = unsafe { gem::CpuPage::new(block) };
    // SAFETY: As above (8 bytes into it).
    let inside = unsafe { gem::CpuPage::new(inside) };
    // SAFETY: As above (its second page).
    let second = unsafe { gem::CpuPage::new(next) };
    assert_eq!(start.map(|p| p.as_ptr()), Some(block.as_ptr()));
    assert_eq!(inside, None);
    assert_eq!(second.map(|p| p.as_ptr()), Some(next.as_ptr()));
    // SAFETY: Allocated above with this layout.
    unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
}
