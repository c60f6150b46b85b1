// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A host DRM core: what a test or a simulator runs a driver against.
//!
//! It plays the part of the kernel's DRM core and of userspace around a driver written against
//! [`drm`](crate::drm):
//!
//! - [`Fd`] is an open file as userspace holds it: [`Fd::ioctl`] dispatches a command the way
//!   `drm_ioctl` does, [`Fd::mmap`] resolves a fake offset to a GEM object.
//! - [`UserSpace`] is a simulated process address space, the [`UserMemory`] ioctl arguments and
//!   the pointers inside them are read from.
//! - [`Client`] combines both into what a Mesa-like test client needs: issue an ioctl by number
//!   with a byte buffer.
//!
//! # Ioctl dispatch
//!
//! [`Fd::ioctl`] follows `drm_ioctl`:
//!
//! 1. An unplugged device fails every call with `ENODEV`.
//! 2. A type other than `'d'` is `ENOTTY`; an unknown number is `EINVAL`.
//! 3. The argument is copied in only if both the caller's and the driver's command have the
//!    write direction, out only if both have the read direction. The caller's size may differ
//!    from the driver's: a shorter structure (older userspace) is zero-extended; of a longer one
//!    (newer userspace) the handler sees the driver's part, and the bytes beyond it are copied
//!    back unchanged.
//! 4. The permission flags are checked against the file (`EACCES`).
//! 5. The handler runs on the kernel copy; the copy is written back even if the handler failed,
//!    and a fault on the way out is `EFAULT`.
//!
//! The core ioctls `DRM_IOCTL_VERSION`, `DRM_IOCTL_GEM_CLOSE` and the syncobj calls
//! ([`syncobj`]: create, destroy, wait, reset, signal, and for timelines timeline wait, query,
//! transfer, timeline signal) are implemented; the other core numbers (among them `GET_CAP`)
//! are `EINVAL`.

pub mod syncobj;

use crate::{
    drm::{
        gem::Object,
        ioctl::{self, DrmGemClose, DrmVersion, Handler},
        Device, Driver, File, OpenOptions, Registered,
    },
    types::ARef,
    uaccess::UserMemory,
    Error, Result,
};
use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, MutexGuard,
    },
    vec::Vec,
};

/// A simulated user address space: regions of bytes at fixed addresses.
///
/// # Examples
///
/// ```
/// use drm_ctx::{host::UserSpace, uaccess::UserMemory, Error};
///
/// let mem = UserSpace::new();
/// let addr = mem.alloc_bytes(&[1, 2, 3]).unwrap();
/// let mut buf = [0; 2];
/// mem.read(addr + 1, &mut buf).unwrap();
/// assert_eq!(buf, [2, 3]);
/// assert_eq!(mem.read(addr + 2, &mut buf), Err(Error::Fault));
/// ```
pub struct UserSpace {
    regions: Mutex<BTreeMap<u64, Vec<u8>>>,
    next: AtomicU64,
}

impl UserSpace {
    /// Creates an empty address space.
    pub fn new() -> Arc<UserSpace> {
        Arc::new(UserSpace {
            regions: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0x1000_0000),
        })
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, Vec<u8>>> {
        self.regions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Maps `len` zeroed bytes and returns their address. Regions are separated by an unmapped
    /// gap, so running off the end of one faults.
    pub fn alloc(&self, len: usize) -> Result<u64> {
        let mut v = Vec::new();
        v.try_reserve_exact(len).map_err(|_| Error::NoMemory)?;
        v.resize(len, 0);
        let span = (len as u64).div_ceil(0x1000).max(1) * 0x1000 + 0x1000;
        let addr = self.next.fetch_add(span, Ordering::Relaxed);
        self.lock().insert(addr, v);
        Ok(addr)
    }

    /// Maps a copy of `data` and returns its address.
    pub fn alloc_bytes(&self, data: &[u8]) -> Result<u64> {
        let addr = self.alloc(data.len())?;
        self.write(addr, data)?;
        Ok(addr)
    }

    /// Unmaps the region at `addr` ([`Error::Fault`] if there is none).
    pub fn free(&self, addr: u64) -> Result {
        self.lock().remove(&addr).map(|_| ()).ok_or(Error::Fault)
    }

    /// Copies `len` bytes from `addr`.
    pub fn read_vec(&self, addr: u64, len: usize) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        v.try_reserve_exact(len).map_err(|_| Error::NoMemory)?;
        v.resize(len, 0);
        self.read(addr, &mut v)?;
        Ok(v)
    }

    fn with_range<R>(
        &self,
        addr: u64,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<Option<R>> {
        if len == 0 {
            return Ok(None);
        }
        let mut regions = self.lock();
        let (base, bytes) = regions.range_mut(..=addr).next_back().ok_or(Error::Fault)?;
        let start = usize::try_from(addr - base).map_err(|_| Error::Fault)?;
        let end = start.checked_add(len).ok_or(Error::Fault)?;
        let window = bytes.get_mut(start..end).ok_or(Error::Fault)?;
        Ok(Some(f(window)))
    }
}

impl UserMemory for UserSpace {
    fn read(&self, addr: u64, buf: &mut [u8]) -> Result {
        self.with_range(addr, buf.len(), |w| buf.copy_from_slice(w))
            .map(|_| ())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result {
        self.with_range(addr, data.len(), |w| w.copy_from_slice(data))
            .map(|_| ())
    }
}

/// An open file of a registered device, as userspace holds it (a file descriptor).
///
/// Closing it (dropping it) closes every GEM handle of the file and runs the driver's close
/// callback.
pub struct Fd<T: Driver> {
    file: File<T::File>,
}

impl<T: Driver> Device<T, Registered> {
    /// Opens the device (userspace `open()` of a node); [`Error::NoDevice`] once unplugged or
    /// for a render node of a driver without one.
    pub fn open(&self, opts: OpenOptions, user: Arc<dyn UserMemory>) -> Result<Fd<T>> {
        let _entry = self.enter()?;
        Ok(Fd {
            file: File::open(self, opts, user)?,
        })
    }
}

/// Runs `f` on the typed kernel copy of an argument and writes it back.
fn typed<A: ioctl::IoctlArg>(
    karg: &mut [u8],
    f: impl FnOnce(&mut A) -> Result<u32>,
) -> Result<u32> {
    let mut a: A = ioctl::from_bytes(karg).ok_or(Error::Invalid)?;
    let r = f(&mut a);
    karg.copy_from_slice(ioctl::as_bytes(&a));
    r
}

enum Target<T: Driver + 'static> {
    Driver(&'static dyn Handler<T>),
    Version,
    GemClose,
    SyncobjCreate,
    SyncobjDestroy,
    SyncobjWait,
    SyncobjReset,
    SyncobjSignal,
    SyncobjTimelineWait,
    SyncobjQuery,
    SyncobjTransfer,
    SyncobjTimelineSignal,
}

/// Copies `value` into a user buffer the way `DRM_IOCTL_VERSION` does: as much as fits, and the
/// full length in `len`.
fn copy_field(user: &dyn UserMemory, buf: u64, len: &mut u64, value: &[u8]) -> Result {
    let n = usize::try_from(*len).unwrap_or(usize::MAX).min(value.len());
    *len = value.len() as u64;
    if n > 0 && buf != 0 {
        user.write(buf, &value[..n])?;
    }
    Ok(())
}

impl<T: Driver> Fd<T> {
    /// The file, as ioctl handlers see it.
    pub fn file(&self) -> &File<T::File> {
        &self.file
    }

    /// Issues ioctl `cmd` with its argument at user address `arg` (see the
    /// [module documentation](self) for the rules). Returns the handler's non-negative result;
    /// [`Error::Range`] if it does not fit an `int`.
    pub fn ioctl(&self, cmd: u32, arg: u64) -> Result<u32> {
        let dev = self.file.device();
        // As `drm_ioctl`: refused once unplugged, but the handler does not run inside a
        // `drm_dev_enter` section (drivers enter one around what must stop at unplug), so a
        // blocking ioctl does not hold up unplugging.
        if !dev.is_registered() {
            return Err(Error::NoDevice);
        }
        if ioctl::ty(cmd) != ioctl::BASE {
            return Err(Error::NotTty);
        }
        let nr = ioctl::nr(cmd);
        let (kcmd, flags, target) = if (ioctl::COMMAND_BASE..ioctl::COMMAND_END).contains(&nr) {
            let d = T::IOCTLS
                .get((nr - ioctl::COMMAND_BASE) as usize)
                .ok_or(Error::Invalid)?;
            (d.cmd, d.flags, Target::Driver(d.handler))
        } else {
            match nr {
                0x00 => (
                    ioctl::DRM_IOCTL_VERSION,
                    ioctl::RENDER_ALLOW,
                    Target::Version,
                ),
                0x09 => (
                    ioctl::DRM_IOCTL_GEM_CLOSE,
                    ioctl::RENDER_ALLOW,
                    Target::GemClose,
                ),
                0xBF => (
                    syncobj::DRM_IOCTL_SYNCOBJ_CREATE,
                    ioctl::RENDER_ALLOW,
                    Target::SyncobjCreate,
                ),
                0xC0 => (
                    syncobj::DRM_IOCTL_SYNCOBJ_DESTROY,
                    ioctl::RENDER_ALLOW,
                    Target::SyncobjDestroy,
                ),
                0xC3 => (
                    syncobj::DRM_IOCTL_SYNCOBJ_WAIT,
                    ioctl::RENDER_ALLOW,
                    Target::SyncobjWait,
                ),
                0xC4 => (
                    syncobj::DRM_IOCTL_SYNCOBJ_RESET,
                    ioctl::RENDER_ALLOW,
                    Target::SyncobjReset,
                ),
                0xC5 => (
                    syncobj::DRM_IOCTL_SYNCOBJ_SIGNAL,
                    ioctl::RENDER_ALLOW,
                    Target::SyncobjSignal,
                ),
                0xCA => (
                    syncobj::DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT,
                    ioctl::RENDER_ALLOW,
                    Target::SyncobjTimelineWait,
                ),
                0xCB => (
                    syncobj::DRM_IOCTL_SYNCOBJ_QUERY,
                    ioctl::RENDER_ALLOW,
                    Target::SyncobjQuery,
                ),
                0xCC => (
                    syncobj::DRM_IOCTL_SYNCOBJ_TRANSFER,
                    ioctl::RENDER_ALLOW,
                    Target::SyncobjTransfer,
                ),
                0xCD => (
                    syncobj::DRM_IOCTL_SYNCOBJ_TIMELINE_SIGNAL,
                    ioctl::RENDER_ALLOW,
                    Target::SyncobjTimelineSignal,
                ),
                _ => return Err(Error::Invalid),
            }
        };

        let drv_size = ioctl::size(kcmd);
        let user_size = ioctl::size(cmd);
        let both = ioctl::dir(cmd) & ioctl::dir(kcmd);
        let in_size = if both & ioctl::IOC_WRITE != 0 {
            user_size
        } else {
            0
        };
        let out_size = if both & ioctl::IOC_READ != 0 {
            user_size
        } else {
            0
        };
        let ksize = in_size.max(out_size).max(drv_size);
        let mut kdata = Vec::new();
        kdata
            .try_reserve_exact(ksize)
            .map_err(|_| Error::NoMemory)?;
        kdata.resize(ksize, 0);

        let user = self.file.user();
        user.read(arg, &mut kdata[..in_size])?;

        let ret = ioctl::permit(flags, &self.file.options()).and_then(|()| {
            let karg = &mut kdata[..drv_size];
            match target {
                Target::Driver(h) => h.call(dev, karg, &self.file),
                Target::Version => self.version(karg),
                Target::GemClose => self.gem_close(karg),
                Target::SyncobjCreate => typed(karg, |a| syncobj::create(self.file.syncobjs(), a)),
                Target::SyncobjDestroy => {
                    typed(karg, |a| syncobj::destroy(self.file.syncobjs(), a))
                }
                Target::SyncobjWait => typed(karg, |a| {
                    syncobj::wait(self.file.syncobjs(), self.file.user(), a)
                }),
                Target::SyncobjReset => typed(karg, |a| {
                    syncobj::reset_or_signal(self.file.syncobjs(), self.file.user(), a, false)
                }),
                Target::SyncobjSignal => typed(karg, |a| {
                    syncobj::reset_or_signal(self.file.syncobjs(), self.file.user(), a, true)
                }),
                Target::SyncobjTimelineWait => typed(karg, |a| {
                    syncobj::timeline_wait(self.file.syncobjs(), self.file.user(), a)
                }),
                Target::SyncobjQuery => typed(karg, |a| {
                    syncobj::query(self.file.syncobjs(), self.file.user(), a)
                }),
                Target::SyncobjTransfer => {
                    typed(karg, |a| syncobj::transfer(self.file.syncobjs(), a))
                }
                Target::SyncobjTimelineSignal => typed(karg, |a| {
                    syncobj::timeline_signal(self.file.syncobjs(), self.file.user(), a)
                }),
            }
        });

        user.write(arg, &kdata[..out_size])?;
        let v = ret?;
        if v > i32::MAX as u32 {
            return Err(Error::Range);
        }
        Ok(v)
    }

    fn version(&self, karg: &mut [u8]) -> Result<u32> {
        let mut v: DrmVersion = ioctl::from_bytes(karg).ok_or(Error::Invalid)?;
        let info = T::INFO;
        v.version_major = info.major;
        v.version_minor = info.minor;
        v.version_patchlevel = info.patchlevel;
        let user = self.file.user();
        let res = copy_field(user, v.name, &mut v.name_len, info.name.to_bytes())
            .and_then(|()| copy_field(user, v.date, &mut v.date_len, b"0"))
            .and_then(|()| copy_field(user, v.desc, &mut v.desc_len, info.desc.to_bytes()));
        karg.copy_from_slice(ioctl::as_bytes(&v));
        res.map(|()| 0)
    }

    fn gem_close(&self, karg: &mut [u8]) -> Result<u32> {
        let c: DrmGemClose = ioctl::from_bytes(karg).ok_or(Error::Invalid)?;
        self.file.close_handle(c.handle)?;
        Ok(0)
    }

    /// Maps `len` bytes at fake offset `offset` (userspace `mmap()` on the file); returns the
    /// object, which the mapping keeps alive.
    ///
    /// [`Error::Invalid`] for a zero length, an unaligned or unknown offset or a length beyond
    /// the object; [`Error::Access`] if the offset belongs to an object this file has no handle
    /// for; [`Error::NoDevice`] once unplugged.
    pub fn mmap(&self, offset: u64, len: usize) -> Result<ARef<Object<T::Object>>> {
        let dev = self.file.device();
        let _entry = dev.enter()?;
        if len == 0 || !offset.is_multiple_of(4096) {
            return Err(Error::Invalid);
        }
        match self.file.lookup_mmap(offset) {
            Some(obj) if len <= obj.size() => Ok(obj),
            Some(_) => Err(Error::Invalid),
            None if dev.raw().mmap_page_allocated(offset >> 12) => Err(Error::Access),
            None => Err(Error::Invalid),
        }
    }
}

/// A userspace test client: a file of a device plus its own address space, issuing ioctls by
/// number with byte buffers the way Mesa does.
///
/// # Examples
///
/// ```
/// use drm_ctx::{drm::{self, ioctl, OpenOptions}, host::Client};
/// # use drm_ctx::doc_driver::DocDriver;
///
/// let parent = drm_ctx::device::Device::new("gpu").unwrap();
/// let reg = drm::Registration::new(drm::UnregisteredDevice::<DocDriver>::new(&parent, 0).unwrap(), 0)
///     .unwrap();
/// let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
/// let mut v = ioctl::DrmVersion::default();
/// client.ioctl_arg(ioctl::DRM_IOCTL_VERSION, &mut v).unwrap();
/// assert_eq!(v.name_len, 3); // "doc"
/// ```
pub struct Client<T: Driver> {
    fd: Fd<T>,
    mem: Arc<UserSpace>,
}

impl<T: Driver> Client<T> {
    /// Opens `dev` with a fresh address space.
    pub fn open(dev: &Device<T>, opts: OpenOptions) -> Result<Self> {
        let mem = UserSpace::new();
        let fd = dev.open(opts, mem.clone())?;
        Ok(Client { fd, mem })
    }

    /// The file descriptor.
    pub fn fd(&self) -> &Fd<T> {
        &self.fd
    }

    /// The file, as ioctl handlers see it.
    pub fn file(&self) -> &File<T::File> {
        self.fd.file()
    }

    /// The client's address space (to place buffers that arguments point to).
    pub fn mem(&self) -> &Arc<UserSpace> {
        &self.mem
    }

    /// Issues `cmd` with `buf` as the argument: `buf` is placed in user memory, and read back
    /// after the call (whatever its outcome).
    pub fn ioctl(&self, cmd: u32, buf: &mut [u8]) -> Result<u32> {
        let addr = self.mem.alloc_bytes(buf)?;
        let ret = self.fd.ioctl(cmd, addr);
        let back = self.mem.read(addr, buf);
        let freed = self.mem.free(addr);
        let v = ret?;
        back?;
        freed?;
        Ok(v)
    }

    /// Issues `cmd` with a typed argument.
    pub fn ioctl_arg<A: ioctl::IoctlArg>(&self, cmd: u32, arg: &mut A) -> Result<u32> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(ioctl::as_bytes(arg));
        let ret = self.ioctl(cmd, &mut bytes);
        if let Some(v) = ioctl::from_bytes(&bytes) {
            *arg = v;
        }
        ret
    }

    /// Maps `len` bytes at fake offset `offset` (see [`Fd::mmap`]).
    pub fn mmap(&self, offset: u64, len: usize) -> Result<ARef<Object<T::Object>>> {
        self.fd.mmap(offset, len)
    }
}
