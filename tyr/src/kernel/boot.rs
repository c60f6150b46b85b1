// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Tyr at boot: the driver as a platform driver, bound to a platform device whose silicon is
//! the simulated Mali-G610, so that userspace finds a render node.
//!
//! A Mali GPU on an SoC is a platform device: the firmware (device tree or ACPI) describes it,
//! the platform bus matches it with the driver that names it, and the driver's probe gets the
//! device bound. Unbinding it (`/sys/bus/platform/drivers/tyr/unbind`, or the device going
//! away) runs the driver's remove, after which the device's resources are released. This
//! module takes that path with a device nobody describes: the boot hook (`boot.c`, a
//! `late_initcall`, active with `gpukit.boot=tyr` on the kernel command line) registers the
//! driver [`TyrPlatform`] under the name `tyr` and then a platform device of the same name,
//! which the platform bus matches by name. Probe is [`crate::driver::probe`] over a
//! [`KernelBackend`] of its own; the driver's data is the DRM registration, whose drop on
//! unbind unplugs the DRM device (open files then get `ENODEV`; the device's memory goes with
//! the last file).
//!
//! A real RK3588 would change only the probe: an OF match on `rockchip,rk3588-mali` and a
//! backend over the device's MMIO resource, clocks, regulators and IRQ lines.
//!
//! The boot hook also publishes the backend's leak counters ([`live_counts`]) as
//! `/sys/kernel/tyr/live`, which the userspace test reads after unplugging the device.

use core::ffi::c_int;

use ::kernel::device::Core;
use ::kernel::prelude::*;
use ::kernel::{driver, platform, ThisModule};

use drm_ctx::drm;

use super::{live_counts, KernelBackend};
use crate::gem::TyrDriver;

/// The platform driver.
pub struct TyrPlatform;

/// What the driver keeps for a bound device: the DRM registration. Dropping it is the
/// driver's remove: the DRM device is unplugged (Tyr stops the GPU then,
/// [`drm::Driver::unplugged`]), and the MMIO goes as the bus takes it away at unbind
/// ([`KernelBackend::revoke_io`]), so a register access after the remove is a warning.
pub struct TyrBound {
    reg: drm::Registration<TyrDriver<KernelBackend>>,
}

impl Drop for TyrBound {
    fn drop(&mut self) {
        let dev = self.reg.device();
        dev.unplug();
        dev.backend.revoke_io();
    }
}

impl platform::Driver for TyrPlatform {
    type IdInfo = ();
    type Data<'bound> = TyrBound;

    fn probe<'bound>(
        pdev: &'bound platform::Device<Core<'_>>,
        _info: Option<&'bound ()>,
    ) -> impl PinInit<TyrBound, Error> + 'bound {
        let dev: &::kernel::device::Device<Core<'_>> = pdev.as_ref();
        let parent = drm_ctx::device::Device::from_kernel(dev);
        // SAFETY: This is the device's probe: nothing allocates or maps its DMA memory yet.
        unsafe { KernelBackend::g610(dev) }
            .and_then(|backend| crate::driver::probe(parent, backend))
            .map(|reg| TyrBound { reg })
            .map_err(Error::from)
    }
}

/// The module the driver belongs to: none, it is built in.
// SAFETY: A null module pointer is what built-in code has for `THIS_MODULE`.
static BUILT_IN: ThisModule = unsafe { ThisModule::from_ptr(core::ptr::null_mut()) };

/// Registers [`TyrPlatform`] as the platform driver `tyr`, for good (the kernel never
/// unregisters a built-in driver). Called once by the boot hook, before it registers the
/// device. Returns 0 or a negative errno.
#[no_mangle]
pub extern "C" fn gpukit_tyr_register_driver() -> c_int {
    let reg = KBox::pin_init(
        driver::Registration::<platform::Adapter<TyrPlatform>>::new(c"tyr", &BUILT_IN),
        GFP_KERNEL,
    );
    match reg {
        Ok(reg) => {
            // Registered for the kernel's lifetime: the registration must never be dropped.
            core::mem::forget(reg);
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// The fewest bytes of a task's kernel stack seen left where the simulated GPU ran
/// ([`crate::kernel::stack_least_left`]), for `/sys/kernel/tyr/stack`.
#[no_mangle]
pub extern "C" fn gpukit_tyr_stack_least_left() -> usize {
    crate::kernel::stack_least_left()
}

/// Writes the leak counters ([`live_counts`]) to `out[0..4]`: devices, buffer objects, blocks
/// of the driver's memory, pages of the simulated GPUs' memory.
///
/// # Safety
///
/// `out` must be valid for writing four `usize`s.
#[no_mangle]
pub unsafe extern "C" fn gpukit_tyr_live_counts(out: *mut usize) {
    let c = live_counts();
    for (i, v) in [c.devices, c.bos, c.blocks, c.gpu_pages]
        .into_iter()
        .enumerate()
    {
        // SAFETY: `i < 4`, and the caller gives room for four values.
        unsafe { out.add(i).write(v) };
    }
}
