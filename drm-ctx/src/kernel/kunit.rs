// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_drm_ctx`: the typestate on the kernel's DRM core, with a faux device as
//! the parent (the userspace side is the sample driver's stage of `cargo xtask kernel-test`),
//! and the neutral syncobj API (`drm::syncobj`) on the kernel's syncobjs, through a file opened
//! the way `open()` would (`mock_drm_getfile`): the cases of `tests/syncobj_api.rs`.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_drm_ctx)]
mod tests {
    use core::ptr::NonNull;
    use core::sync::atomic::{AtomicUsize, Ordering};

    use crate::device;
    use crate::drm::syncobj::{
        for_each_unwrapped, ChainLink, SyncobjFence, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT,
    };
    use crate::drm::{self, gem, AnyCtx};
    use crate::kernel::{DmaFence, KernelAlloc, KernelUserMemory};
    use crate::types::ARef;
    use crate::uaccess::UserMemory;
    use crate::Error;
    use ::kernel::bindings;
    use ::kernel::prelude::*;

    static DROPPED: AtomicUsize = AtomicUsize::new(0);

    // The suite's helpers in `kernel/drm.c`; only pointers cross.
    #[allow(improper_ctypes)]
    extern "C" {
        fn gpukit_drm_test_open(dev: *mut bindings::drm_device) -> *mut bindings::file;
        fn gpukit_drm_test_open_err(file: *mut bindings::file) -> core::ffi::c_long;
        fn gpukit_drm_test_file(file: *mut bindings::file) -> *mut bindings::drm_file;
        fn gpukit_drm_test_close(file: *mut bindings::file);
        fn gpukit_drm_test_syncobj_destroy(
            file: *mut bindings::drm_file,
            handle: u32,
        ) -> core::ffi::c_int;
        fn gpukit_drm_test_fence_new() -> *mut bindings::dma_fence;
        fn gpukit_drm_test_fence_signal(fence: *mut bindings::dma_fence);
        fn gpukit_drm_test_fence_is_signaled(fence: *mut bindings::dma_fence) -> bool;
    }

    /// A file of a test device, opened as `open()` would and closed on drop.
    ///
    /// # Invariants
    ///
    /// `self.0` is a `struct file` from `gpukit_drm_test_open` this value owns, whose
    /// `struct drm_file` is of a device of `TestDriver`.
    struct Open(NonNull<bindings::file>);

    impl Open {
        fn new(dev: &drm::Device<TestDriver>) -> Result<Self> {
            // SAFETY: The device is registered and alive.
            let f = unsafe { gpukit_drm_test_open(dev.as_raw()) };
            // SAFETY: `f` is what `gpukit_drm_test_open` returned.
            let err = unsafe { gpukit_drm_test_open_err(f) };
            if err != 0 {
                return Err(::kernel::error::Error::from_errno(err as i32));
            }
            // INVARIANT: A file we own, opened on the device.
            NonNull::new(f).map(Open).ok_or(ENOMEM)
        }

        fn file(&self) -> &drm::File<TestFile> {
            // SAFETY: The file is open while `self` lives and its `struct drm_file` belongs to
            // a device of `TestDriver` (type invariant).
            unsafe { drm::File::from_raw(gpukit_drm_test_file(self.0.as_ptr())) }
        }

        fn destroy(&self, handle: u32) -> crate::Result {
            // SAFETY: The file is open (type invariant).
            let ret = unsafe {
                gpukit_drm_test_syncobj_destroy(gpukit_drm_test_file(self.0.as_ptr()), handle)
            };
            crate::kernel::drm::check(ret)
        }
    }

    impl Drop for Open {
        fn drop(&mut self) {
            // SAFETY: We own the file (type invariant).
            unsafe { gpukit_drm_test_close(self.0.as_ptr()) };
        }
    }

    /// A pending fence of the suite's own.
    fn pending() -> Result<DmaFence> {
        // SAFETY: Allocates a fence or returns null.
        let f = NonNull::new(unsafe { gpukit_drm_test_fence_new() }).ok_or(ENOMEM)?;
        // SAFETY: We own the one reference of the new fence.
        Ok(unsafe { DmaFence::from_raw(f) })
    }

    fn signal(f: &DmaFence) {
        // SAFETY: The fence is alive and one of `pending()`'s.
        unsafe { gpukit_drm_test_fence_signal(f.as_raw()) };
    }

    fn is_signaled(f: &DmaFence) -> bool {
        // SAFETY: The fence is alive.
        unsafe { gpukit_drm_test_fence_is_signaled(f.as_raw()) }
    }

    /// The seqno of a fence (a chain node's is its point).
    fn seqno(f: &DmaFence) -> u64 {
        // SAFETY: The fence is alive; `seqno` is set once at initialisation.
        unsafe { (*f.as_raw()).seqno }
    }

    fn same(a: &DmaFence, b: &DmaFence) -> bool {
        a.as_raw() == b.as_raw()
    }

    /// The leaves of `f`, with a reference each.
    fn leaves(f: &SyncobjFence) -> Result<KVec<DmaFence>> {
        let mut out = KVec::new();
        let mut res = Ok(());
        for_each_unwrapped(f, |leaf| {
            if res.is_ok() {
                res = out.push(leaf.clone(), GFP_KERNEL);
            }
        });
        res?;
        Ok(out)
    }

    /// A registered test device on a faux device named `name`.
    fn registered(
        name: &'static core::ffi::CStr,
    ) -> Result<(::kernel::faux::Registration, drm::Registration<TestDriver>)> {
        let faux = ::kernel::faux::Registration::new(name, None)?;
        let parent = device::Device::from_kernel(faux.as_ref());
        let unreg = drm::UnregisteredDevice::<TestDriver>::new_in::<KernelAlloc>(parent, Data)?;
        let reg = drm::Registration::new(unreg, 0)?;
        Ok((faux, reg))
    }

    struct TestDriver;
    struct Data;
    struct Bo;
    struct TestFile;

    impl Drop for Data {
        fn drop(&mut self) {
            DROPPED.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl drm::Driver for TestDriver {
        type Data = Data;
        type Object = Bo;
        type File = TestFile;
        const INFO: drm::DriverInfo = drm::DriverInfo {
            major: 1,
            minor: 0,
            patchlevel: 0,
            name: c"gpukit_kunit",
            desc: c"drm-ctx KUnit driver",
        };
        const IOCTLS: &'static [drm::ioctl::Descriptor<Self>] = &[];
    }

    impl gem::DriverObject for Bo {
        type Driver = TestDriver;
        type Args = ();

        fn new(_size: usize, _args: ()) -> crate::Result<Self> {
            Ok(Bo)
        }
    }

    impl drm::DriverFile for TestFile {
        type Driver = TestDriver;

        fn open(_device: &drm::Device<TestDriver>) -> crate::Result<Self> {
            Ok(TestFile)
        }
    }

    #[test]
    fn parent_is_the_kernel_device() -> Result {
        let faux = ::kernel::faux::Registration::new(c"gpukit-drm-ctx-kunit-0", None)?;
        let parent = device::Device::from_kernel(faux.as_ref());
        let second: ARef<device::Device> = parent.into();
        assert!(parent.same_device(&*second));
        let unreg = drm::UnregisteredDevice::<TestDriver>::new_in::<KernelAlloc>(parent, Data)?;
        assert!(unreg.parent().same_device(parent));
        Ok(())
    }

    #[test]
    fn objects_before_registration_then_registered_device() -> Result {
        let before = DROPPED.load(Ordering::SeqCst);
        let faux = ::kernel::faux::Registration::new(c"gpukit-drm-ctx-kunit-1", None)?;
        let parent = device::Device::from_kernel(faux.as_ref());
        let mut kept = None;
        let unreg =
            drm::UnregisteredDevice::<TestDriver>::new_with_in::<KernelAlloc>(parent, |init| {
                // Firmware-style object created before userspace can see the device; the
                // device's data does not exist yet.
                let fw = gem::Object::<Bo, AnyCtx>::new_for_init(init, 100, ())?;
                assert_eq!(fw.size(), 4096);
                assert_eq!(fw.device().err(), Some(Error::NoDevice));
                kept = Some(fw);
                Ok(Data)
            })?;
        assert!(!unreg.is_registered());
        assert!(unreg.as_registered().is_none());
        let fw = kept.ok_or(EINVAL)?;
        assert!(fw.device()?.same_device(&*unreg));
        // A kernel GEM object holds its device: drop it before expecting the data to go.
        drop(fw);
        let reg = drm::Registration::new(unreg, 0)?;
        let dev = reg.device();
        assert!(dev.is_registered());
        let bo = gem::Object::<Bo>::new(dev, 8192, ())?;
        assert_eq!(bo.size(), 8192);
        assert!(bo.belongs_to(dev));
        // (The shmem helper gives every object its offset at creation, so there is no
        // "before" to check here, unlike on the crate's own core.)
        let off = bo.create_mmap_offset()?;
        assert_eq!(off % 4096, 0);
        assert_eq!(bo.mmap_offset(), Some(off));
        assert_eq!(bo.create_mmap_offset()?, off);
        assert_eq!(bo.handle_count(), 0);
        {
            let _section = dev.enter()?;
        }
        let kept: ARef<drm::Device<TestDriver>> = dev.into();
        drop(bo);
        drop(reg);
        assert!(kept.is_unplugged());
        assert_eq!(kept.enter().err(), Some(Error::NoDevice));
        assert_eq!(DROPPED.load(Ordering::SeqCst), before);
        drop(kept);
        // The driver data went exactly once, with the last reference.
        assert_eq!(DROPPED.load(Ordering::SeqCst), before + 1);
        Ok(())
    }

    #[test]
    fn flags_and_sizes_are_checked() -> Result {
        let faux = ::kernel::faux::Registration::new(c"gpukit-drm-ctx-kunit-2", None)?;
        let parent = device::Device::from_kernel(faux.as_ref());
        let unreg = drm::UnregisteredDevice::<TestDriver>::new_in::<KernelAlloc>(parent, Data)?;
        assert_eq!(
            gem::Object::<Bo, AnyCtx>::new(&unreg, 0, ()).err(),
            Some(Error::Invalid)
        );
        let bad = drm::Registration::new(unreg, 1);
        assert_eq!(bad.err(), Some(Error::Invalid));
        Ok(())
    }

    #[test]
    fn user_copies_fault_on_kernel_addresses() {
        let mut buf = [0u8; 8];
        // Address 0 is never a valid user buffer: the kernel's copy routines refuse it.
        assert_eq!(KernelUserMemory.read(0, &mut buf), Err(Error::Fault));
        assert_eq!(KernelUserMemory.write(0, &buf), Err(Error::Fault));
        let e: ::kernel::error::Error = Error::Fault.into();
        assert_eq!(e.to_errno(), EFAULT.to_errno());
        let e: ::kernel::error::Error = Error::NoDevice.into();
        assert_eq!(e.to_errno(), ENODEV.to_errno());
    }

    #[test]
    fn syncobj_unknown_handles_are_enoent() -> Result {
        let (_faux, reg) = registered(c"gpukit-drm-ctx-kunit-3")?;
        let open = Open::new(reg.device())?;
        let file = open.file();
        assert_eq!(file.syncobj(0).err(), Some(Error::NotFound));
        assert_eq!(file.syncobj(1).err(), Some(Error::NotFound));
        assert_eq!(file.syncobj_fence(1, 0, 0).err(), Some(Error::NotFound));
        assert_eq!(
            file.syncobj_fence(1, 0, 1 << 7).err(),
            Some(Error::NotFound)
        );
        let h = file.create_syncobj(None)?;
        assert!(file.syncobj(h).is_ok());
        open.destroy(h)?;
        assert_eq!(open.destroy(h).err(), Some(Error::Invalid));
        assert_eq!(file.syncobj(h).err(), Some(Error::NotFound));
        Ok(())
    }

    #[test]
    fn syncobj_binary_fence_and_replace() -> Result {
        let (_faux, reg) = registered(c"gpukit-drm-ctx-kunit-4")?;
        let open = Open::new(reg.device())?;
        let file = open.file();
        let f = pending()?;
        let empty = file.create_syncobj(None)?;
        let full = file.create_syncobj(Some(&f))?;
        assert_eq!(file.syncobj_fence(empty, 0, 0).err(), Some(Error::Invalid));
        assert_eq!(file.syncobj_fence(full, 1, 0).err(), Some(Error::Invalid));
        assert_eq!(file.syncobj_fence(full, 0, 1).err(), Some(Error::Invalid));
        assert!(same(&file.syncobj_fence(full, 0, 0)?, &f));
        // A fence is there: WAIT_FOR_SUBMIT does not wait.
        let got = file.syncobj_fence(full, 0, DRM_SYNCOBJ_WAIT_FLAGS_WAIT_FOR_SUBMIT)?;
        assert!(same(&got, &f));
        let s = file.syncobj(full)?;
        assert!(s.fence().is_some_and(|x| same(&x, &f)));
        assert!(s.same_syncobj(&file.syncobj(full)?));
        assert!(!s.same_syncobj(&file.syncobj(empty)?));
        let e = file.syncobj(empty)?;
        e.replace_fence(Some(&f));
        assert!(same(&file.syncobj_fence(empty, 0, 0)?, &f));
        e.clone().replace_fence(None);
        assert_eq!(file.syncobj_fence(empty, 0, 0).err(), Some(Error::Invalid));
        signal(&f);
        Ok(())
    }

    #[test]
    fn syncobj_destroyed_handle_still_gets_the_fence_reused_one_untouched() -> Result {
        let (_faux, reg) = registered(c"gpukit-drm-ctx-kunit-5")?;
        let open = Open::new(reg.device())?;
        let file = open.file();
        let h = file.create_syncobj(None)?;
        let old = file.syncobj(h)?;
        let link = ChainLink::new()?;
        open.destroy(h)?;
        assert_eq!(file.syncobj(h).err(), Some(Error::NotFound));
        let again = file.create_syncobj(None)?;
        assert_eq!(again, h);
        let new = file.syncobj(again)?;
        assert!(!old.same_syncobj(&new));
        let f = pending()?;
        old.replace_fence(Some(&f));
        assert!(old.fence().is_some_and(|x| same(&x, &f)));
        old.add_point(link, &f, 5);
        assert!(old.fence().is_some_and(|x| seqno(&x) == 5));
        assert!(new.fence().is_none());
        assert_eq!(file.syncobj_fence(again, 0, 0).err(), Some(Error::Invalid));
        // An unused link is freed.
        drop(ChainLink::new()?);
        signal(&f);
        Ok(())
    }

    #[test]
    fn syncobj_timeline_points_in_order() -> Result {
        let (_faux, reg) = registered(c"gpukit-drm-ctx-kunit-6")?;
        let open = Open::new(reg.device())?;
        let file = open.file();
        let h = file.create_syncobj(None)?;
        let s = file.syncobj(h)?;
        let fences = [pending()?, pending()?, pending()?];
        // Prepare every link, then commit points 1, 2, 3.
        let links = [ChainLink::new()?, ChainLink::new()?, ChainLink::new()?];
        for (i, (link, f)) in links.into_iter().zip(&fences).enumerate() {
            s.add_point(link, f, i as u64 + 1);
        }
        assert!(s.fence().is_some_and(|x| seqno(&x) == 3));
        assert_eq!(seqno(&file.syncobj_fence(h, 0, 0)?), 3);
        for p in 1..=3u64 {
            let f = file.syncobj_fence(h, p, 0)?;
            assert_eq!(seqno(&f), p);
            assert!(!is_signaled(&f));
        }
        assert_eq!(file.syncobj_fence(h, 4, 0).err(), Some(Error::Invalid));
        signal(&fences[0]);
        assert!(is_signaled(&file.syncobj_fence(h, 1, 0)?));
        assert!(!is_signaled(&file.syncobj_fence(h, 2, 0)?));
        signal(&fences[1]);
        signal(&fences[2]);
        assert!(is_signaled(&file.syncobj_fence(h, 3, 0)?));
        Ok(())
    }

    #[test]
    fn syncobj_unwrapping_a_chain() -> Result {
        let (_faux, reg) = registered(c"gpukit-drm-ctx-kunit-7")?;
        let open = Open::new(reg.device())?;
        let file = open.file();
        let h = file.create_syncobj(None)?;
        let s = file.syncobj(h)?;
        let (f1, f2) = (pending()?, pending()?);
        s.add_point(ChainLink::new()?, &f1, 1);
        s.add_point(ChainLink::new()?, &f2, 2);
        let head = file.syncobj_fence(h, 0, 0)?;
        let got = leaves(&head)?;
        assert_eq!(got.len(), 2);
        assert!(same(&got[0], &f2) && same(&got[1], &f1));
        drop(got);
        // Point 1's fence signalled: its node is unlinked, only point 2's fence is left.
        signal(&f1);
        let got = leaves(&head)?;
        assert_eq!(got.len(), 1);
        assert!(same(&got[0], &f2));
        // A plain fence is its own leaf.
        let got = leaves(&f2)?;
        assert_eq!(got.len(), 1);
        assert!(same(&got[0], &f2));
        signal(&f2);
        Ok(())
    }
}
