// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A test driver shaped like Tyr: firmware objects built before registration, a small uAPI.

#![allow(dead_code, unreachable_pub)]

pub mod manual;

use drm_ctx::{
    device,
    drm::{self, gem, ioctl, AnyCtx},
    types::ARef,
    Error, Result,
};
use std::sync::{
    atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst},
    Arc,
};

/// Everything the tests count.
#[derive(Default)]
pub struct Counters {
    pub data_drops: AtomicUsize,
    pub bo_news: AtomicUsize,
    pub bo_drops: AtomicUsize,
    pub file_opens: AtomicUsize,
    pub file_closes: AtomicUsize,
    pub file_drops: AtomicUsize,
    pub handle_opens: AtomicUsize,
    pub handle_closes: AtomicUsize,
    pub fail_file_open: std::sync::atomic::AtomicBool,
    /// Calls of `Driver::unplugged`.
    pub unplugged: AtomicUsize,
    /// Calls of `Driver::unplugged` in which `Device::enter` already failed with `ENODEV`.
    pub unplugged_closed: AtomicUsize,
}

impl Counters {
    pub fn get(c: &AtomicUsize) -> usize {
        c.load(SeqCst)
    }
}

pub struct TestDriver;

pub type TestDevice<C = drm::Registered> = drm::Device<TestDriver, C>;

pub struct Data {
    pub counters: Arc<Counters>,
    pub firmware: Vec<ARef<gem::Object<Bo, AnyCtx>>>,
}

impl Drop for Data {
    fn drop(&mut self) {
        self.counters.data_drops.fetch_add(1, SeqCst);
    }
}

pub struct Bo {
    pub counters: Arc<Counters>,
    pub size: usize,
}

impl Drop for Bo {
    fn drop(&mut self) {
        self.counters.bo_drops.fetch_add(1, SeqCst);
    }
}

impl gem::DriverObject for Bo {
    type Driver = TestDriver;
    type Args = Arc<Counters>;

    fn new(size: usize, counters: Arc<Counters>) -> Result<Self> {
        counters.bo_news.fetch_add(1, SeqCst);
        Ok(Bo { counters, size })
    }

    fn open(obj: &gem::Object<Self>, _file: &drm::File<TestFile>) -> Result {
        obj.counters.handle_opens.fetch_add(1, SeqCst);
        Ok(())
    }

    fn close(obj: &gem::Object<Self>, _file: &drm::File<TestFile>) {
        obj.counters.handle_closes.fetch_add(1, SeqCst);
    }
}

pub struct TestFile {
    pub counters: Arc<Counters>,
    pub stored: AtomicU64,
}

impl Drop for TestFile {
    fn drop(&mut self) {
        self.counters.file_drops.fetch_add(1, SeqCst);
    }
}

impl drm::DriverFile for TestFile {
    type Driver = TestDriver;

    fn open(device: &TestDevice) -> Result<Self> {
        if device.counters.fail_file_open.load(SeqCst) {
            return Err(Error::Busy);
        }
        device.counters.file_opens.fetch_add(1, SeqCst);
        Ok(TestFile {
            counters: device.counters.clone(),
            stored: AtomicU64::new(0),
        })
    }

    fn close(&self, _device: &TestDevice) {
        self.counters.file_closes.fetch_add(1, SeqCst);
    }
}

// ---- uAPI ----

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Echo {
    pub input: u64,
    pub output: u64,
}
// SAFETY: repr(C), two u64.
unsafe impl ioctl::IoctlArg for Echo {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoCreate {
    pub size: u64,
    pub handle: u32,
    pub pad: u32,
}
// SAFETY: repr(C), integers, explicit padding.
unsafe impl ioctl::IoctlArg for BoCreate {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BoMmapOffset {
    pub handle: u32,
    pub pad: u32,
    pub offset: u64,
}
// SAFETY: repr(C), integers, explicit padding.
unsafe impl ioctl::IoctlArg for BoMmapOffset {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Query {
    pub pointer: u64,
    pub size: u32,
    pub pad: u32,
}
// SAFETY: repr(C), integers, explicit padding.
unsafe impl ioctl::IoctlArg for Query {}

pub const ECHO: u32 = ioctl::IOWR::<Echo>(0x40);
pub const BO_CREATE: u32 = ioctl::IOWR::<BoCreate>(0x41);
pub const BO_MMAP_OFFSET: u32 = ioctl::IOWR::<BoMmapOffset>(0x42);
pub const MASTER_ONLY: u32 = ioctl::IOW::<u32>(0x43);
pub const STORE: u32 = ioctl::IOW::<u64>(0x44);
pub const LOAD: u32 = ioctl::IOR::<u64>(0x45);
pub const QUERY: u32 = ioctl::IOWR::<Query>(0x46);
pub const ROOT: u32 = ioctl::IO(0x47);
pub const HUGE: u32 = ioctl::IOR::<u32>(0x48);
pub const AUTH_ONLY: u32 = ioctl::IOW::<u32>(0x49);
pub const FAILING: u32 = ioctl::IOWR::<Echo>(0x4a);
pub const UNPLUG: u32 = ioctl::IO(0x4b);

/// The bytes QUERY writes to userspace.
pub const QUERY_BYTES: &[u8] = b"mali-g610";

fn echo(_: &TestDevice, arg: &mut Echo, _: &drm::File<TestFile>) -> Result<u32> {
    arg.output = arg.input.wrapping_add(1);
    Ok(0)
}

fn bo_create(dev: &TestDevice, arg: &mut BoCreate, file: &drm::File<TestFile>) -> Result<u32> {
    if arg.pad != 0 {
        return Err(Error::Invalid);
    }
    let size = usize::try_from(arg.size).map_err(|_| Error::Invalid)?;
    let bo = gem::Object::<Bo>::new(dev, size, dev.counters.clone())?;
    arg.handle = bo.create_handle(file)?;
    Ok(0)
}

fn bo_mmap_offset(
    _: &TestDevice,
    arg: &mut BoMmapOffset,
    file: &drm::File<TestFile>,
) -> Result<u32> {
    let bo = gem::Object::<Bo>::lookup_handle(file, arg.handle)?;
    arg.offset = bo.create_mmap_offset()?;
    Ok(0)
}

fn master_only(_: &TestDevice, _: &mut u32, _: &drm::File<TestFile>) -> Result<u32> {
    Ok(7)
}

fn store(_: &TestDevice, arg: &mut u64, file: &drm::File<TestFile>) -> Result<u32> {
    file.inner().stored.store(*arg, SeqCst);
    *arg = 0xdead; // not copied out: the command is write-only
    Ok(0)
}

fn load(_: &TestDevice, arg: &mut u64, file: &drm::File<TestFile>) -> Result<u32> {
    assert_eq!(*arg, 0, "a read-only argument is not copied in");
    *arg = file.inner().stored.load(SeqCst);
    Ok(0)
}

fn query(_: &TestDevice, arg: &mut Query, file: &drm::File<TestFile>) -> Result<u32> {
    if arg.pointer == 0 {
        arg.size = QUERY_BYTES.len() as u32;
        return Ok(0);
    }
    let n = (arg.size as usize).min(QUERY_BYTES.len());
    file.user().write(arg.pointer, &QUERY_BYTES[..n])?;
    arg.size = n as u32;
    Ok(0)
}

fn root(_: &TestDevice, _: &mut [u8; 0], _: &drm::File<TestFile>) -> Result<u32> {
    Ok(1)
}

fn huge(_: &TestDevice, arg: &mut u32, _: &drm::File<TestFile>) -> Result<u32> {
    *arg = 5;
    Ok(u32::MAX)
}

fn auth_only(_: &TestDevice, _: &mut u32, _: &drm::File<TestFile>) -> Result<u32> {
    Ok(0)
}

fn failing(_: &TestDevice, arg: &mut Echo, _: &drm::File<TestFile>) -> Result<u32> {
    arg.output = 99;
    Err(Error::Other(-5))
}

fn unplug_self(dev: &TestDevice, _: &mut [u8; 0], _: &drm::File<TestFile>) -> Result<u32> {
    dev.unplug();
    Ok(0)
}

impl drm::Driver for TestDriver {
    type Data = Data;
    type Object = Bo;
    type File = TestFile;
    const INFO: drm::DriverInfo = drm::DriverInfo {
        major: 1,
        minor: 5,
        patchlevel: 0,
        name: c"tyr-test",
        desc: c"test driver",
    };
    const FEAT_RENDER: bool = true;

    fn unplugged(dev: &TestDevice) {
        let c = &dev.counters;
        c.unplugged.fetch_add(1, SeqCst);
        if dev.enter().err() == Some(Error::NoDevice) {
            c.unplugged_closed.fetch_add(1, SeqCst);
        }
    }

    drm_ctx::declare_drm_ioctls! {
        (ECHO, Echo, ioctl::RENDER_ALLOW, echo),
        (BO_CREATE, BoCreate, ioctl::RENDER_ALLOW | ioctl::AUTH, bo_create),
        (BO_MMAP_OFFSET, BoMmapOffset, ioctl::RENDER_ALLOW, bo_mmap_offset),
        (MASTER_ONLY, u32, ioctl::MASTER, master_only),
        (STORE, u64, ioctl::RENDER_ALLOW, store),
        (LOAD, u64, ioctl::RENDER_ALLOW, load),
        (QUERY, Query, ioctl::RENDER_ALLOW, query),
        (ROOT, [u8; 0], ioctl::ROOT_ONLY | ioctl::RENDER_ALLOW, root),
        (HUGE, u32, ioctl::RENDER_ALLOW, huge),
        (AUTH_ONLY, u32, ioctl::AUTH, auth_only),
        (FAILING, Echo, ioctl::RENDER_ALLOW, failing),
        (UNPLUG, [u8; 0], ioctl::RENDER_ALLOW, unplug_self),
    }
}

/// Creates a parent device and a registered test device with two firmware objects created
/// before registration (the Tyr flow).
pub fn registered() -> (
    ARef<device::Device>,
    drm::Registration<TestDriver>,
    Arc<Counters>,
) {
    let counters = Arc::new(Counters::default());
    let parent = device::Device::new("mali").unwrap();
    let unreg = unregistered(&parent, &counters);
    let reg = drm::Registration::new(unreg, 0).unwrap();
    (parent, reg, counters)
}

pub fn unregistered(
    parent: &device::Device,
    counters: &Arc<Counters>,
) -> drm::UnregisteredDevice<TestDriver> {
    drm::UnregisteredDevice::<TestDriver>::new_with(parent, |init| {
        let mut firmware = Vec::new();
        for size in [4096, 3 * 4096] {
            firmware.push(gem::Object::<Bo, AnyCtx>::new_for_init(
                init,
                size,
                counters.clone(),
            )?);
        }
        Ok(Data {
            counters: counters.clone(),
            firmware,
        })
    })
    .unwrap()
}
