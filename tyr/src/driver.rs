// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The DRM driver glue, the top floor: probe and the `drm-ctx` driver (panthor's
//! `panthor_probe` and `panthor_drm_driver`).
//!
//! [`probe`] runs the hardware bring-up ([`gpu::probe`]), then creates the DRM device through
//! `drm-ctx`'s typestate: the device is allocated unregistered, the GEM objects it needs
//! before userspace can see it (the firmware interface region) are created while the driver
//! data is built (the MCU started in address space 0, its interface read), and registration
//! comes last, handing back the `Registered` device that userspace opens.
//!
//! [`TyrDriver`]'s `drm::Driver` implementation names the driver's data ([`TyrData`]), objects
//! ([`TyrBo`]) and files ([`TyrFile`]) and lists the ioctl handlers of [`crate::ioctl`]. The
//! types and functions the driver is made of live on the floors below and are re-exported here
//! under their historical paths.

use drm_ctx::device;
use drm_ctx::drm::{self, gem, ioctl, AnyCtx};

use crate::backend::Backend;
use crate::fw::{start_mcu, Firmware, FwIface};
use crate::ioctl::*;
use crate::sched;
use crate::{dev_info, env, gpu, uapi, Result};

pub use crate::file::{
    vm_activate, vm_slot, TyrFile, MAX_GROUPS_PER_FILE, MAX_QUEUES_PER_FILE, MAX_VMS_PER_FILE,
};
pub use crate::fw::FW_INTERFACE_SIZE;
pub use crate::gem::{BoArgs, BoRef, FwBoRef, McuVm, TyrBo, TyrDevice, TyrDriver, TyrVm};
#[cfg(feature = "host")]
pub use crate::ioctl::mmap;
pub use crate::ioctl::{FlushIdPage, Mapping, MmapProt};
pub use crate::mmu::MCU_AS;
pub use crate::sched::{DevInner, TyrData};

/// Probes the GPU of `backend` and registers a DRM device for it under `parent`.
///
/// The firmware image is asked from the backend ([`Backend::request_firmware`]) and checked;
/// while the device is still unregistered, its sections are loaded into GEM objects and mapped
/// for the MCU in address space 0 (see [`crate::fw`]), and the MCU is started to learn the
/// command-stream interface; registration comes last.
///
/// # Errors
///
/// The probe's errors ([`Error::TimedOut`](crate::Error::TimedOut),
/// [`Error::UnknownGpu`](crate::Error::UnknownGpu)), the backend's if it has no firmware,
/// [`Error::Invalid`](crate::Error::Invalid) for a firmware image the driver refuses, the
/// MCU's ([`Error::NoDevice`](crate::Error::NoDevice) if it refuses its image), and
/// allocation failures.
pub fn probe<B: Backend>(
    parent: &device::Device,
    backend: B,
) -> Result<drm::Registration<TyrDriver<B>>> {
    let gpu_info = gpu::probe(&backend)?;
    let (path, file) = Firmware::request(&backend, &gpu_info)?;
    let unreg =
        drm::UnregisteredDevice::<TyrDriver<B>>::new_with_in::<B::DrmAlloc>(parent, |init| {
            let firmware = Firmware::load(&backend, path, file, |size, id| {
                gem::Object::<TyrBo<B>, AnyCtx>::new_for_init(
                    init,
                    size,
                    BoArgs::new(backend.dma().clone(), id, uapi::DRM_PANTHOR_BO_NO_MMAP, 0),
                )
                .map_err(Into::into)
            })?;
            // Made before the MCU runs: if it fails there is nothing to stop.
            let pm = crate::pm::Pm::new(&backend)?;
            let (mcu_vm, csif_info) = start_mcu(&backend, &gpu_info, &firmware)?;
            let fw = firmware.shared().obj.clone();
            let fw_iface = FwIface::read(
                backend.dma(),
                fw.dma_addr(),
                FW_INTERFACE_SIZE as u64,
                csif_info.csg_slot_count as usize,
                csif_info.cs_slot_count as usize,
            )?;
            sched::enable_irqs(&backend);
            let mut fw_objects = env::Vec::new();
            fw_objects.try_push(fw)?;
            Ok(device_state(
                backend, gpu_info, csif_info, fw_objects, mcu_vm, fw_iface, pm, firmware,
            )?)
        })?;
    let reg = drm::Registration::new(unreg, 0)?;
    let dev = reg.device();
    dev.backend
        .start_events(env::Arc::downgrade(dev.shared()))?;
    dev_info!(&dev.backend, "Tyr initialized correctly.");
    Ok(reg)
}

/// The device state, made once the firmware runs.
///
/// A function of its own, never inlined into [`probe`]: the state is a few KiB, and built
/// inline it would sit in the probe's frame while the firmware boots, whose polls step the
/// simulated GPU on the same 16 KiB kernel stack (see `xtask/src/frames.rs`).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn device_state<B: Backend>(
    backend: B,
    gpu_info: gpu::GpuInfo,
    csif_info: uapi::CsifInfo,
    fw_objects: env::Vec<drm_ctx::types::ARef<gem::Object<TyrBo<B>, AnyCtx>>, B::Alloc>,
    mcu_vm: McuVm<B>,
    fw_iface: FwIface<B::Alloc>,
    pm: crate::pm::Pm<B::Locks>,
    firmware: Firmware<B>,
) -> Result<TyrData<B>> {
    TyrData::new(DevInner::new(
        backend, gpu_info, csif_info, fw_objects, mcu_vm, fw_iface, pm, firmware,
    )?)
}

/// Suspends the device (system suspend, panthor's `panthor_device_suspend`): new jobs are
/// held in their rings and queues, the groups running on the GPU are suspended through the
/// firmware (their state saved for the resume), every group leaves its slot, the MCU is
/// halted and the GPU powered down (see [`crate::pm`]).
///
/// # Errors
///
/// [`Error::Busy`](crate::Error::Busy) if it is suspended or suspending already,
/// [`Error::TimedOut`](crate::Error::TimedOut) if the device's work item does not take the
/// suspend up, [`Error::NoDevice`](crate::Error::NoDevice) after an unplug, and the
/// power-down's errors; the device then runs on.
pub fn suspend<B: Backend>(dev: &TyrDevice<B>) -> Result {
    dev.shared().suspend()
}

/// Resumes a suspended device: the held jobs run, in submission order, once the scheduler has
/// powered the GPU up and started their groups again.
///
/// # Errors
///
/// [`Error::Invalid`](crate::Error::Invalid) if the device is not suspended,
/// [`Error::NoDevice`](crate::Error::NoDevice) after an unplug.
pub fn resume<B: Backend>(dev: &TyrDevice<B>) -> Result {
    dev.shared().resume()
}

impl<B: Backend> TyrDriver<B> {
    /// What `DRM_IOCTL_VERSION` reports: panthor's name and uAPI version, so Mesa picks it up.
    ///
    /// Minor 8, Linux 7.2's panthor: 1.1 (TIMESTAMP_INFO), 1.2 (GROUP_PRIORITIES_INFO,
    /// REALTIME), 1.3 (group state INNOCENT), 1.4 (BO_SET_LABEL), 1.5 (SET_USER_MMIO_OFFSET),
    /// 1.6 (the firmware's global counters enabled at every boot, `GLB_COUNTER_EN`, so that
    /// command streams sample the timestamp and cycle counters with `STORE_STATE`; see
    /// [`crate::fw::boot`]), 1.7 (`BO_WB_MMAP`, BO_SYNC, BO_QUERY_INFO,
    /// `gpu_info.selected_coherency`) and 1.8 (TIMESTAMP_INFO flags). Everything of 1.0 is
    /// served, tiler heaps (TILER_HEAP_CREATE/DESTROY) included.
    const DRIVER_INFO: drm::DriverInfo = drm::DriverInfo {
        name: c"panthor",
        desc: c"ARM Mali Tyr DRM driver",
        major: 1,
        minor: 8,
        patchlevel: 0,
    };
}

impl<B: Backend> drm::Driver for TyrDriver<B> {
    type Data = TyrData<B>;
    type Object = TyrBo<B>;
    type File = TyrFile<B>;
    const INFO: drm::DriverInfo = Self::DRIVER_INFO;
    const FEAT_RENDER: bool = true;

    drm_ctx::declare_drm_ioctls! {
        (uapi::DRM_IOCTL_PANTHOR_DEV_QUERY, uapi::DevQuery, ioctl::RENDER_ALLOW, dev_query::<B>),
        (uapi::DRM_IOCTL_PANTHOR_VM_CREATE, uapi::VmCreate, ioctl::RENDER_ALLOW, vm_create::<B>),
        (uapi::DRM_IOCTL_PANTHOR_VM_DESTROY, uapi::VmDestroy, ioctl::RENDER_ALLOW, vm_destroy::<B>),
        (uapi::DRM_IOCTL_PANTHOR_VM_BIND, uapi::VmBind, ioctl::RENDER_ALLOW, vm_bind::<B>),
        (uapi::DRM_IOCTL_PANTHOR_VM_GET_STATE, uapi::VmGetState, ioctl::RENDER_ALLOW, vm_get_state::<B>),
        (uapi::DRM_IOCTL_PANTHOR_BO_CREATE, uapi::BoCreate, ioctl::RENDER_ALLOW, bo_create::<B>),
        (uapi::DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, uapi::BoMmapOffset, ioctl::RENDER_ALLOW, bo_mmap_offset::<B>),
        (uapi::DRM_IOCTL_PANTHOR_GROUP_CREATE, uapi::GroupCreate, ioctl::RENDER_ALLOW, group_create::<B>),
        (uapi::DRM_IOCTL_PANTHOR_GROUP_DESTROY, uapi::GroupDestroy, ioctl::RENDER_ALLOW, group_destroy::<B>),
        (uapi::DRM_IOCTL_PANTHOR_GROUP_SUBMIT, uapi::GroupSubmit, ioctl::RENDER_ALLOW, group_submit::<B>),
        (uapi::DRM_IOCTL_PANTHOR_GROUP_GET_STATE, uapi::GroupGetState, ioctl::RENDER_ALLOW, group_get_state::<B>),
        (uapi::DRM_IOCTL_PANTHOR_TILER_HEAP_CREATE, uapi::TilerHeapCreate, ioctl::RENDER_ALLOW, tiler_heap_create::<B>),
        (uapi::DRM_IOCTL_PANTHOR_TILER_HEAP_DESTROY, uapi::TilerHeapDestroy, ioctl::RENDER_ALLOW, tiler_heap_destroy::<B>),
        (uapi::DRM_IOCTL_PANTHOR_BO_SET_LABEL, uapi::BoSetLabel, ioctl::RENDER_ALLOW, bo_set_label::<B>),
        (uapi::DRM_IOCTL_PANTHOR_SET_USER_MMIO_OFFSET, uapi::SetUserMmioOffset, ioctl::RENDER_ALLOW, set_user_mmio_offset::<B>),
        (uapi::DRM_IOCTL_PANTHOR_BO_SYNC, uapi::BoSync, ioctl::RENDER_ALLOW, bo_sync::<B>),
        (uapi::DRM_IOCTL_PANTHOR_BO_QUERY_INFO, uapi::BoQueryInfo, ioctl::RENDER_ALLOW, bo_query_info::<B>),
    }

    /// Stops the hardware ([`DevInner::quiesce`](crate::sched::DevInner::quiesce)).
    fn unplugged(dev: &TyrDevice<B>) {
        dev.quiesce();
    }

    /// The user MMIO pages, resolved as on the host (`ioctl::mmap_target`, which
    /// the host entry point `ioctl::mmap` uses too); the flush-ID page is the backend's
    /// ([`Backend::flush_id_page`]).
    fn mmap_own(
        file: &drm::File<TyrFile<B>>,
        req: &drm::MmapRequest,
    ) -> Option<drm_ctx::Result<gem::CpuPage>> {
        let prot = MmapProt {
            write: req.write,
            exec: req.exec,
            shared: req.shared,
        };
        match mmap_target(file, req.offset, req.len, prot) {
            Ok(MmapTarget::Bo) => None,
            Ok(MmapTarget::FlushId) => {
                let dev = file.device();
                Some(
                    dev.enter().and_then(|_entry| {
                        dev.backend.flush_id_page().ok_or(drm_ctx::Error::Invalid)
                    }),
                )
            }
            Err(e) => Some(Err(e.into())),
        }
    }
}

#[cfg(all(test, feature = "host"))]
mod tests {
    use super::*;

    /// Issue 20, suspected item: a reset takes every address space away (and every pin), so
    /// no VM is left waiting for its slot to go; the list of such "zombie" VMs must not keep
    /// them forever.
    #[test]
    #[cfg_attr(miri, ignore = "a probe and a GPU reset take minutes under Miri")]
    fn a_reset_forgets_zombie_vms() {
        let parent = drm_ctx::device::Device::new("mali").unwrap();
        let backend = crate::host::HostBackend::new(mali_sim::Config::g610());
        let reg = probe(&parent, backend).unwrap();
        let dev = reg.device().shared();
        // A VM destroyed while a group of it held a slot.
        crate::backend::Lock::guard(&dev.vm_zombie)
            .try_insert(0x1234, true)
            .unwrap();
        assert_eq!(dev.zombie_vm_count(), 1);
        dev.reset();
        assert_eq!(dev.zombie_vm_count(), 0, "a zombie VM outlived the reset");
    }

    #[cfg(feature = "host")]
    use drm_ctx::host::syncobj::SignalledFence;
    #[cfg(feature = "host")]
    use jobqueue::host::HostFence;
    #[cfg(feature = "host")]
    use std::sync::Arc;

    #[cfg(feature = "host")]
    fn op(flags: u32, handle: u32, point: u64) -> uapi::SyncOp {
        uapi::SyncOp {
            flags: flags | uapi::DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_TIMELINE_SYNCOBJ,
            handle,
            timeline_value: point,
        }
    }

    /// A syncobj destroyed between the collection of a call's signals and its commit gets the
    /// fence where nobody sees it, and a syncobj created meanwhile under the same handle gets
    /// nothing.
    #[cfg(feature = "host")]
    #[test]
    #[cfg_attr(miri, ignore = "a probe takes minutes under Miri")]
    fn a_reused_handle_gets_nothing_at_commit() {
        use drm_ctx::{device, drm::OpenOptions, host::Client};
        let parent = device::Device::new("mali").unwrap();
        let reg = probe(&parent, crate::host::HostBackend::g610()).unwrap();
        let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
        let file = client.file();
        let t = file.syncobjs();
        let h = t.create(None).unwrap();
        let kept = t.create(Some(Arc::new(SignalledFence).into())).unwrap();
        let syncs = [
            op(uapi::DRM_PANTHOR_SYNC_OP_SIGNAL, h, 1),
            op(uapi::DRM_PANTHOR_SYNC_OP_SIGNAL, h, 0),
            op(uapi::DRM_PANTHOR_SYNC_OP_SIGNAL, kept, 4),
        ];
        let mut ctx = crate::ioctl::SyncCtx::<crate::host::HostBackend>::new(file);
        ctx.collect_signals(&syncs).unwrap();
        let done = HostFence::new();
        ctx.set_signaller(&syncs, &done).unwrap();
        t.destroy(h).unwrap();
        assert_eq!(t.create(None), Ok(h));
        ctx.push();
        assert!(t.fence(h).unwrap().is_none());
        assert_eq!(t.query(kept, true), Ok(4));
    }
}
