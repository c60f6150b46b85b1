// SPDX-License-Identifier: GPL-2.0 OR MIT

//! DRM devices in the kernel: [`Device`] is a `kernel::drm::Device`, that is a
//! `struct drm_device` allocated by `__drm_dev_alloc` with the driver data next to it.
//!
//! A driver written against this crate implements [`Driver`]; [`KDriver<T>`] turns that into a
//! `kernel::drm::Driver` (the `struct drm_driver` vtable): its GEM objects are shmem objects
//! (`kernel::drm::gem::shmem`), its files carry the driver's file data, and its ioctl table is
//! built from [`Driver::IOCTLS`] at compile time, one C-callable entry per ioctl that hands the
//! argument `drm_ioctl` copied in to the driver's typed handler. The DRM core itself answers
//! `DRM_IOCTL_VERSION`, `GEM_CLOSE`, PRIME and the syncobj ioctls.
//!
//! Registration is `drm_dev_register`; dropping a [`Registration`] is `drm_dev_unplug`, which
//! waits for sections entered with [`Device::enter`] (`drm_dev_enter`) and makes every later
//! open, ioctl and mmap fail with `ENODEV`.

use core::{
    cell::UnsafeCell,
    ffi::{c_int, c_void},
    marker::PhantomData,
    mem::MaybeUninit,
    ops::Deref,
    ptr::NonNull,
    sync::atomic::{AtomicU8, Ordering},
};

use ::kernel::{
    bindings,
    drm::{self as kdrm, gem::shmem},
    prelude::GFP_KERNEL,
    sync::aref::AlwaysRefCounted as KRefCounted,
};

use super::{file::KFile, gem::KObject};
use crate::{
    device,
    drm::{self, ioctl, AnyCtx, DeviceCtx, Driver, File, Registered},
    types::{ARef, AlwaysRefCounted, NotThreadSafe},
    Error, Result,
};

// `struct drm_device` has a member of a type that is empty in this configuration
// (`sched_statistics`), which `improper_ctypes` flags; only pointers cross the boundary.
#[allow(improper_ctypes)]
extern "C" {
    fn gpukit_drm_adjust_driver(
        dev: *mut bindings::drm_device,
        fops: *const bindings::file_operations,
    ) -> c_int;
    /// The request of a VMA being set up (`vma` is a `struct vm_area_struct`, which passes
    /// untyped: the bindings see parts of it as opaque): offset, length and `MMAP_*` flags.
    fn gpukit_drm_mmap_request(vma: *mut c_void, offset: *mut u64, len: *mut usize) -> u32;
    /// Maps the page at kernel address `kaddr` as the whole of the one-page `vma`.
    fn gpukit_drm_map_own_page(vma: *mut c_void, kaddr: *mut c_void) -> c_int;
}

/// `gpukit_drm_mmap_request`'s flags.
const MMAP_WRITE: u32 = 1 << 0;
const MMAP_EXEC: u32 = 1 << 1;
const MMAP_SHARED: u32 = 1 << 2;

/// Converts a kernel error into this crate's.
pub(crate) fn from_kernel(e: ::kernel::error::Error) -> Error {
    let errno = e.to_errno();
    Error::from_errno(errno).unwrap_or(Error::Other(errno))
}

/// Converts a C return value (0 or a negative errno) into a `Result`.
pub(crate) fn check(ret: c_int) -> Result {
    if ret == 0 {
        Ok(())
    } else {
        Err(Error::from_errno(ret).unwrap_or(Error::Other(ret)))
    }
}

const BUILDING: u8 = 0;
const UNREGISTERED: u8 = 1;
const REGISTERED: u8 = 2;
const UNPLUGGED: u8 = 3;

/// What `kernel::drm::Device` holds next to the `struct drm_device`: the registration state
/// and the driver data, which the driver builds after allocation (it may create GEM objects for
/// that, which need the `struct drm_device`).
///
/// # Invariants
///
/// `data` is initialised once `state` is past `BUILDING` (stored with release ordering after
/// the data was written), and only then.
pub struct DevData<T: Driver> {
    state: AtomicU8,
    data: UnsafeCell<MaybeUninit<T::Data>>,
}

// SAFETY: The data is `Send + Sync` (`Driver::Data`'s bounds); it is written once, before any
// other thread can see the device, and only read afterwards.
unsafe impl<T: Driver> Send for DevData<T> {}
// SAFETY: See `Send`.
unsafe impl<T: Driver> Sync for DevData<T> {}

impl<T: Driver> DevData<T> {
    fn building() -> Self {
        DevData {
            state: AtomicU8::new(BUILDING),
            data: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    pub(crate) fn is_built(&self) -> bool {
        self.state.load(Ordering::Acquire) != BUILDING
    }
}

impl<T: Driver> Drop for DevData<T> {
    fn drop(&mut self) {
        if *self.state.get_mut() != BUILDING {
            // SAFETY: Past `BUILDING` the data is initialised (type invariant); this is the last
            // use of it (the device is being released).
            unsafe { self.data.get_mut().assume_init_drop() };
        }
    }
}

/// The `kernel::drm::Driver` of a driver `T` written against this crate.
pub struct KDriver<T: Driver>(PhantomData<T>);

#[::kernel::prelude::vtable]
impl<T: Driver> kdrm::Driver for KDriver<T> {
    type Data = DevData<T>;
    type Object<Ctx: kdrm::DeviceContext> = shmem::Object<KObject<T::Object>, Ctx>;
    type File = KFile<T::File>;

    const INFO: kdrm::DriverInfo = kdrm::DriverInfo {
        major: T::INFO.major,
        minor: T::INFO.minor,
        patchlevel: T::INFO.patchlevel,
        name: T::INFO.name,
        desc: T::INFO.desc,
    };

    const IOCTLS: &'static [kdrm::ioctl::DrmIoctlDescriptor] = IoctlTable::<T>::TABLE;

    const FEAT_RENDER: bool = T::FEAT_RENDER;
}

/// The file operations of `T`'s device files: those `kernel::drm` gives every driver (the DRM
/// core's `open`, `release`, `ioctl`, `poll`, `read`, no seeking, unsigned offsets), with an
/// `mmap` that offers the offset to the driver ([`Driver::mmap_own`]) before GEM.
/// `gpukit_drm_adjust_driver` checks, when a device is made, that every other member is the
/// one `kernel::drm` set.
struct Fops<T: Driver>(PhantomData<T>);

impl<T: Driver> Fops<T> {
    const FOPS: bindings::file_operations = {
        // SAFETY: `struct file_operations` is pointers, optional functions and integers, for
        // which all zeroes is a valid value (null, `None`, 0).
        let mut f: bindings::file_operations = unsafe { core::mem::zeroed() };
        f.owner = core::ptr::null_mut();
        f.open = Some(bindings::drm_open);
        f.release = Some(bindings::drm_release);
        f.unlocked_ioctl = Some(bindings::drm_ioctl);
        #[cfg(CONFIG_COMPAT)]
        {
            f.compat_ioctl = Some(bindings::drm_compat_ioctl);
        }
        f.poll = Some(bindings::drm_poll);
        f.read = Some(bindings::drm_read);
        f.llseek = Some(bindings::noop_llseek);
        f.mmap = Some(file_mmap::<T>);
        f.fop_flags = bindings::FOP_UNSIGNED_OFFSET;
        f
    };
}

/// `mmap` of a device file of `T`: the driver's own offsets first, then GEM's.
///
/// # Safety
///
/// Called by the VFS (`mmap_region`, through the file's `f_op`) with a DRM file of a device of
/// `T`, open (the VMA holds it), and the VMA being set up, under the process's mmap lock.
unsafe extern "C" fn file_mmap<T: Driver>(
    filp: *mut bindings::file,
    vma: *mut bindings::vm_area_struct,
) -> c_int {
    let (mut offset, mut len) = (0u64, 0usize);
    // SAFETY: `vma` is the VMA being set up, as the caller guarantees.
    let flags = unsafe { gpukit_drm_mmap_request(vma.cast(), &mut offset, &mut len) };
    let req = drm::MmapRequest {
        offset,
        len,
        write: flags & MMAP_WRITE != 0,
        exec: flags & MMAP_EXEC != 0,
        shared: flags & MMAP_SHARED != 0,
    };
    // SAFETY: An open DRM file's private data is its `struct drm_file` (`drm_open` set it).
    let raw_file = unsafe { (*filp).private_data }.cast::<bindings::drm_file>();
    // SAFETY: The file is open (the caller guarantees it) on a device of `T`, whose files'
    // private data is a `KFile` of `T::File`.
    let file = unsafe { File::<T::File>::from_raw(raw_file) };
    match T::mmap_own(file, &req) {
        // SAFETY: The caller's guarantees are `drm_gem_mmap`'s.
        None => unsafe { bindings::drm_gem_mmap(filp, vma) },
        Some(Err(e)) => e.to_errno(),
        // SAFETY: `vma` is being set up; by `CpuPage`'s invariants the page is a whole page of
        // kernel memory that stays allocated while the driver's object that lent it lives,
        // here the device, which the file (held by the mapping) keeps alive.
        Some(Ok(page)) => unsafe { gpukit_drm_map_own_page(vma.cast(), page.as_ptr().cast()) },
    }
}

/// The C ioctl table of `T`: entry `i` calls `T::IOCTLS[i]` through [`trampoline`].
struct IoctlTable<T: Driver>(PhantomData<T>);

/// One entry of [`IoctlTable`].
const fn entry<T: Driver, const I: usize>() -> bindings::drm_ioctl_desc {
    if I < T::IOCTLS.len() {
        let d = &T::IOCTLS[I];
        bindings::drm_ioctl_desc {
            cmd: d.cmd,
            flags: d.flags,
            func: Some(trampoline::<T, I>),
            name: d.name.as_ptr().cast(),
        }
    } else {
        bindings::drm_ioctl_desc {
            cmd: 0,
            flags: 0,
            func: None,
            name: core::ptr::null(),
        }
    }
}

macro_rules! table {
    ($($i:literal)*) => {
        impl<T: Driver> IoctlTable<T> {
            /// Every driver ioctl number the DRM core dispatches (`0x40..0xA0`).
            const ALL: [bindings::drm_ioctl_desc; 96] = [$(entry::<T, $i>()),*];
        }
    };
}

table!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63
    64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95
);

impl<T: Driver> IoctlTable<T> {
    /// The driver's entries (`validate_table` bounds their number by 96).
    const TABLE: &'static [bindings::drm_ioctl_desc] = {
        let () = ioctl::validate_table(T::IOCTLS);
        let all: &'static [bindings::drm_ioctl_desc] = &Self::ALL;
        all.split_at(T::IOCTLS.len()).0
    };
}

/// Entry `I` of the C ioctl table of `T`: `drm_ioctl` has copied the argument in (zero-extended
/// to the driver's size) and checked the permission flags; this runs the typed handler.
///
/// # Safety
///
/// Called by `drm_ioctl` for a file of a registered device of `T`, with `data` pointing to at
/// least `_IOC_SIZE` of the entry's command bytes, exclusively for this call.
unsafe extern "C" fn trampoline<T: Driver, const I: usize>(
    raw_dev: *mut bindings::drm_device,
    data: *mut c_void,
    raw_file: *mut bindings::drm_file,
) -> c_int {
    let Some(d) = T::IOCTLS.get(I) else {
        return Error::Invalid.to_errno();
    };
    // SAFETY: `drm_ioctl` holds the file, which holds the device; the device was registered
    // (ioctls only reach registered devices), so its data is built and `Registered` holds.
    let dev = unsafe { Device::<T>::from_raw(raw_dev) };
    // SAFETY: The file was opened on this driver's device, so its private data is a `KFile`.
    let file = unsafe { File::<T::File>::from_raw(raw_file) };
    // SAFETY: By the function's requirements `data` holds the argument, for this call only.
    let arg = unsafe { core::slice::from_raw_parts_mut(data.cast::<u8>(), ioctl::size(d.cmd)) };
    match d.handler.call(dev, arg, file) {
        Ok(v) => c_int::try_from(v).unwrap_or(Error::Range.to_errno()),
        Err(e) => e.to_errno(),
    }
}

/// A DRM device of driver `T`, known to have reached context `C`: a `kernel::drm::Device`.
///
/// It dereferences to the driver's data and is reference counted (`drm_dev_get`/`drm_dev_put`).
///
/// # Invariants
///
/// - The layout is that of `kernel::drm::Device<KDriver<T>, _>` for every `C` (transparent).
/// - The driver data is built (`DevData`) while a reference to a `Device` exists.
/// - The guarantees of `C` hold.
#[repr(transparent)]
pub struct Device<T: Driver, C: DeviceCtx = Registered>(kdrm::Device<KDriver<T>, C::Kernel>);

impl<T: Driver, C: DeviceCtx> Device<T, C> {
    /// The kernel's device.
    pub fn as_kernel(&self) -> &kdrm::Device<KDriver<T>, C::Kernel> {
        &self.0
    }

    /// The `struct drm_device`.
    pub fn as_raw(&self) -> *mut bindings::drm_device {
        // CAST: `kernel::drm::Device` is `repr(C)` with its `struct drm_device` first.
        core::ptr::from_ref(&self.0).cast_mut().cast()
    }

    /// This crate's view of a kernel device.
    ///
    /// # Safety
    ///
    /// The device's driver data must be built, and the guarantees of `C` hold.
    pub(crate) unsafe fn from_kernel(dev: &kdrm::Device<KDriver<T>, C::Kernel>) -> &Self {
        // CAST: Transparent wrapper.
        // SAFETY: The caller guarantees the invariants; the reference bounds the lifetime.
        unsafe { &*core::ptr::from_ref(dev).cast::<Self>() }
    }

    /// # Safety
    ///
    /// `ptr` is a live `struct drm_device` of `T` whose data is built and which stays alive for
    /// `'a`; the guarantees of `C` hold.
    pub(crate) unsafe fn from_raw<'a>(ptr: *mut bindings::drm_device) -> &'a Self {
        // SAFETY: Guaranteed by the caller.
        unsafe { Self::from_kernel(kdrm::Device::from_raw(ptr)) }
    }

    fn dev_data(&self) -> &DevData<T> {
        &self.0
    }

    /// The parent (bus) device.
    pub fn parent(&self) -> &device::Device {
        // SAFETY: `dev` of a live `struct drm_device` is its parent, which it holds a reference on.
        let parent = unsafe { (*self.as_raw()).dev };
        // SAFETY: As above: valid while the DRM device is.
        device::Device::from_kernel(unsafe {
            ::kernel::device::Device::<::kernel::device::Normal>::from_raw(parent)
        })
    }

    /// Returns whether the device is currently registered and not unplugged.
    pub fn is_registered(&self) -> bool {
        self.dev_data().state.load(Ordering::SeqCst) == REGISTERED
    }

    /// Returns whether the device has been unplugged.
    pub fn is_unplugged(&self) -> bool {
        self.dev_data().state.load(Ordering::SeqCst) == UNPLUGGED
    }

    /// Returns whether `self` and `other` are the same device.
    pub fn same_device<C2: DeviceCtx>(&self, other: &Device<T, C2>) -> bool {
        self.as_raw() == other.as_raw()
    }

    /// # Safety
    ///
    /// The device must satisfy the guarantees of `N`.
    unsafe fn cast_ctx<N: DeviceCtx>(&self) -> &Device<T, N> {
        // CAST: Same layout in every context (`kernel::drm::Device` promises it too).
        // SAFETY: The caller guarantees the context.
        unsafe { &*core::ptr::from_ref(self).cast::<Device<T, N>>() }
    }
}

impl<T: Driver> Device<T, AnyCtx> {
    /// Returns the device in the [`Registered`] context if it has been registered.
    pub fn as_registered(&self) -> Option<&Device<T, Registered>> {
        match self.dev_data().state.load(Ordering::SeqCst) {
            // SAFETY: It has been registered.
            REGISTERED | UNPLUGGED => Some(unsafe { self.cast_ctx() }),
            _ => None,
        }
    }

    /// Assumes the device has been registered with userspace.
    ///
    /// # Safety
    ///
    /// The device must have been registered before this call.
    pub unsafe fn assume_registered(&self) -> &Device<T, Registered> {
        // SAFETY: Guaranteed by the caller.
        unsafe { self.cast_ctx() }
    }
}

impl<T: Driver> Device<T, Registered> {
    /// Unplugs the device (`drm_dev_unplug`): waits for sections entered with
    /// [`enter`](Self::enter) to end; from then on opens, ioctls and mmaps fail with `ENODEV`.
    /// Open files, GEM objects and the driver data stay valid until their last reference goes.
    /// Unplugging twice is a no-op. Must not be called inside an [`enter`](Self::enter)
    /// section of the same device (it would wait for itself). The first unplug calls the
    /// driver's [`Driver::unplugged`] before it returns.
    pub fn unplug(&self) {
        if self.dev_data().state.swap(UNPLUGGED, Ordering::SeqCst) == REGISTERED {
            // SAFETY: The device is registered, and this is the only call that unplugs it.
            unsafe { bindings::drm_dev_unplug(self.as_raw()) };
            T::unplugged(self);
        }
    }

    /// Enters a section that must not overlap with unplug (`drm_dev_enter`): fails with
    /// [`Error::NoDevice`] once the device is unplugged.
    pub fn enter(&self) -> Result<EntryGuard<'_>> {
        let mut idx: c_int = 0;
        // SAFETY: The device is alive; `idx` receives the SRCU index for `drm_dev_exit`.
        if unsafe { bindings::drm_dev_enter(self.as_raw(), &mut idx) } {
            Ok(EntryGuard {
                idx,
                _p: PhantomData,
            })
        } else {
            Err(Error::NoDevice)
        }
    }
}

/// A section entered with [`Device::enter`]; `drm_dev_exit` when dropped.
pub struct EntryGuard<'a> {
    idx: c_int,
    _p: PhantomData<(&'a (), NotThreadSafe)>,
}

impl Drop for EntryGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: `idx` came from the `drm_dev_enter` that made this guard.
        unsafe { bindings::drm_dev_exit(self.idx) };
    }
}

impl<T: Driver, C: DeviceCtx> AsRef<Device<T, AnyCtx>> for Device<T, C> {
    fn as_ref(&self) -> &Device<T, AnyCtx> {
        // SAFETY: `AnyCtx` makes no guarantee.
        unsafe { self.cast_ctx() }
    }
}

impl<T: Driver, C: DeviceCtx> AsRef<device::Device> for Device<T, C> {
    fn as_ref(&self) -> &device::Device {
        self.parent()
    }
}

impl<T: Driver, C: DeviceCtx> Deref for Device<T, C> {
    type Target = T::Data;

    fn deref(&self) -> &T::Data {
        let d = self.dev_data();
        // SAFETY: The data is built while a `Device` reference exists (type invariant), and
        // only read from now on.
        unsafe { (*d.data.get()).assume_init_ref() }
    }
}

// SAFETY: `drm_dev_get`/`drm_dev_put` (the kernel's implementation) count the references; the
// device and its data are released with the last one.
unsafe impl<T: Driver, C: DeviceCtx> AlwaysRefCounted for Device<T, C> {
    fn inc_ref(&self) {
        self.0.inc_ref();
    }

    unsafe fn dec_ref(obj: NonNull<Self>) {
        // SAFETY: The caller owns a reference; the layout is transparent.
        unsafe { kdrm::Device::<KDriver<T>, C::Kernel>::dec_ref(obj.cast()) }
    }
}

/// A device under construction, handed to the initialiser of
/// [`UnregisteredDevice::new_with_in`]: the `struct drm_device` exists (GEM objects can be made
/// with it), the driver data does not yet.
pub struct DeviceInit<'a, T: Driver> {
    pub(crate) dev: &'a kdrm::Device<KDriver<T>, kdrm::Uninit>,
    _p: PhantomData<NotThreadSafe>,
}

impl<T: Driver> DeviceInit<'_, T> {
    /// The parent (bus) device.
    pub fn parent(&self) -> &device::Device {
        device::Device::from_kernel(self.dev.as_ref())
    }
}

/// A freshly allocated device that has never been registered with userspace.
///
/// # Invariants
///
/// The device in `self.0` has not been registered, and nothing else can register it.
pub struct UnregisteredDevice<T: Driver>(ARef<Device<T, AnyCtx>>, NotThreadSafe);

impl<T: Driver> Deref for UnregisteredDevice<T> {
    type Target = Device<T, AnyCtx>;

    fn deref(&self) -> &Device<T, AnyCtx> {
        &self.0
    }
}

impl<T: Driver> UnregisteredDevice<T> {
    /// Allocates a device for `parent` with driver data `data`. The allocator parameter is the
    /// host core's; in the kernel `__drm_dev_alloc` allocates (with `kmalloc`).
    pub fn new_in<A: crate::mem::Allocator>(
        parent: &device::Device,
        data: T::Data,
    ) -> Result<Self> {
        Self::new_with_in::<A>(parent, |_| Ok(data))
    }

    /// Allocates a device for `parent` and builds its driver data with `init`, which may
    /// already create GEM objects with the device. If `init` fails, the device is released
    /// and the error returned.
    pub fn new_with_in<A: crate::mem::Allocator>(
        parent: &device::Device,
        init: impl FnOnce(&DeviceInit<'_, T>) -> Result<T::Data>,
    ) -> Result<Self> {
        let unreg = kdrm::UnregisteredDevice::<KDriver<T>>::new(
            parent.as_kernel(),
            Ok::<_, ::kernel::error::Error>(DevData::building()),
        )
        .map_err(from_kernel)?;
        let kdev: &kdrm::Device<KDriver<T>, kdrm::Uninit> = &unreg;
        let raw: *mut bindings::drm_device = core::ptr::from_ref(kdev).cast_mut().cast();
        let fops: &'static bindings::file_operations = &Fops::<T>::FOPS;
        // SAFETY: The device is still private to this function (not registered); `fops` is a
        // static vtable.
        check(unsafe { gpukit_drm_adjust_driver(raw, fops) })?;
        let data = init(&DeviceInit {
            dev: kdev,
            _p: PhantomData,
        })?;
        let dd: &DevData<T> = kdev;
        // SAFETY: Nothing reads the data before `state` leaves `BUILDING`, and nothing else
        // writes it: the slot is ours.
        unsafe { (*dd.data.get()).write(data) };
        // INVARIANT: The data is initialised.
        dd.state.store(UNREGISTERED, Ordering::Release);
        let ptr = NonNull::from(kdev).cast::<Device<T, AnyCtx>>();
        // The kernel's handle owns one reference, which becomes ours.
        core::mem::forget(unreg);
        // SAFETY: We own that reference; the data is built; `AnyCtx` claims nothing.
        Ok(UnregisteredDevice(
            unsafe { ARef::from_raw(ptr) },
            NotThreadSafe::new(),
        ))
    }

    /// Registers the device (`drm_dev_register`) and returns it in the `Registered` context.
    fn register(self) -> Result<ARef<Device<T, Registered>>> {
        // SAFETY: By the type invariant the device is unregistered and only we can register it.
        check(unsafe { bindings::drm_dev_register(self.0.as_raw(), 0) })?;
        self.0.dev_data().state.store(REGISTERED, Ordering::SeqCst);
        let ptr = ARef::into_raw(self.0);
        // SAFETY: We own this reference; the layout is the same; it has just been registered.
        Ok(unsafe { ARef::from_raw(ptr.cast::<Device<T, Registered>>()) })
    }
}

/// The registration of a device with userspace; dropping it unplugs the device
/// (`drm_dev_unplug`).
///
/// # Invariants
///
/// The device has been registered by [`Registration::new`].
pub struct Registration<T: Driver>(ARef<Device<T>>);

impl<T: Driver> Registration<T> {
    /// Registers `drm` with userspace (`drm_dev_register`): `/dev/dri/renderD*` (with
    /// `FEAT_RENDER`) and `/dev/dri/card*` appear. `flags` must be zero.
    pub fn new(drm: UnregisteredDevice<T>, flags: usize) -> Result<Self> {
        const { ioctl::validate_table(T::IOCTLS) };
        if flags != 0 {
            return Err(Error::Invalid);
        }
        // INVARIANT: `register` registers the device.
        Ok(Registration(drm.register()?))
    }

    /// Registers `drm` and ties the registration to the binding of `dev` (a devres action):
    /// it is dropped, and the device unplugged, when the driver is unbound from `dev`.
    pub fn new_foreign_owned<'a>(
        drm: UnregisteredDevice<T>,
        dev: &'a device::Device<device::Bound>,
        flags: usize,
    ) -> Result<&'a Device<T>>
    where
        T::Data: 'static,
    {
        if !drm.parent().same_device(dev) {
            return Err(Error::Invalid);
        }
        let reg = Registration::new(drm, flags)?;
        let ptr = NonNull::from(reg.device());
        ::kernel::devres::register::<Registration<T>, ::kernel::error::Error>(
            dev.as_kernel_bound(),
            Ok::<Registration<T>, ::kernel::error::Error>(reg),
            GFP_KERNEL,
        )
        .map_err(from_kernel)?;
        // SAFETY: The registration owns a reference on the device and now lives in the devres
        // of `dev`, released only when the driver is unbound, which cannot happen while
        // `&'a Device<Bound>` exists.
        Ok(unsafe { ptr.as_ref() })
    }

    /// The registered device.
    pub fn device(&self) -> &Device<T> {
        &self.0
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        self.0.unplug();
    }
}
