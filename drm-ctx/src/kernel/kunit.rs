// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_drm_ctx`: the typestate on the kernel's DRM core, with a faux device as
//! the parent (the userspace side is the sample driver's stage of `cargo xtask kernel-test`).

use ::kernel::prelude::*;

#[kunit_tests(gpukit_drm_ctx)]
mod tests {
    use core::sync::atomic::{AtomicUsize, Ordering};

    use crate::device;
    use crate::drm::{self, gem, AnyCtx};
    use crate::kernel::{KernelAlloc, KernelUserMemory};
    use crate::types::ARef;
    use crate::uaccess::UserMemory;
    use crate::Error;
    use ::kernel::prelude::*;

    static DROPPED: AtomicUsize = AtomicUsize::new(0);

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
}
