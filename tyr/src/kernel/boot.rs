// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Tyr at boot: the driver as a platform driver, bound to a platform device whose silicon is
//! the simulated Mali-G610, so that userspace finds a render node.
//!
//! Two ways lead to the probe. On arm64 the board's device tree has the GPU's node
//! (`xtask/src/dt.rs`), which the platform bus matches with [`TyrPlatform`]'s OF table
//! (`rockchip,rk3588-mali`, `arm,mali-valhall-csf`); the probe then takes the node's resources
//! ([`super::board`]) before it touches the GPU. On x86_64, which has no device tree, the boot
//! hook registers a platform device named `tyr` when `gpukit.boot=tyr` is on the command line,
//! which the bus matches by name; that device has no resources.
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
//! A real RK3588 would change only the backend: register accesses through the mapping of the
//! node's window instead of the simulator's model.
//!
//! The boot hook also publishes the backend's leak counters ([`live_counts`]) as
//! `/sys/kernel/tyr/live`, which the userspace test reads after unplugging the device.

use core::ffi::c_int;

use ::kernel::device::Core;
use ::kernel::prelude::*;
use ::kernel::{driver, platform, ThisModule};

use drm_ctx::drm;

#[cfg(all(CONFIG_OF, CONFIG_COMMON_CLK, CONFIG_REGULATOR, CONFIG_PM_OPP))]
use super::board::Board;
use super::{live_counts, KernelBackend};
use crate::gem::TyrDriver;

/// The platform driver.
pub struct TyrPlatform;

/// What the driver keeps for a bound device: the DRM registration, and the board's resources
/// when the device came from the device tree. Dropping it is the driver's remove: the DRM
/// device is unplugged (Tyr stops the GPU then, [`drm::Driver::unplugged`]), and the MMIO
/// goes as the bus takes it away at unbind ([`KernelBackend::revoke_io`]), so a register access
/// after the remove is a warning; then the board's clocks, supply and register window are
/// given back (the fields drop after [`Drop::drop`]).
pub struct TyrBound<'bound> {
    reg: drm::Registration<TyrDriver<KernelBackend>>,
    _board: BoardOf<'bound>,
}

/// The board's resources of a device bound by OF match (`None` for the device of the boot
/// hook).
#[cfg(all(CONFIG_OF, CONFIG_COMMON_CLK, CONFIG_REGULATOR, CONFIG_PM_OPP))]
type BoardOf<'bound> = Option<Board<'bound>>;
/// Without the device tree, clocks, regulators or operating points no device is bound by OF
/// match, and nothing is taken from a board.
#[cfg(not(all(CONFIG_OF, CONFIG_COMMON_CLK, CONFIG_REGULATOR, CONFIG_PM_OPP)))]
type BoardOf<'bound> = core::marker::PhantomData<&'bound ()>;

/// Takes the board's resources of a device the bus bound by OF match on `compatible`.
#[cfg(all(CONFIG_OF, CONFIG_COMMON_CLK, CONFIG_REGULATOR, CONFIG_PM_OPP))]
fn board<'bound>(
    pdev: &'bound platform::Device<Core<'_>>,
    compatible: Option<&CStr>,
) -> Result<BoardOf<'bound>> {
    compatible.map(|c| Board::take(pdev, c)).transpose()
}

/// Without the kernel options a board needs, a device matched by OF cannot be driven.
#[cfg(not(all(CONFIG_OF, CONFIG_COMMON_CLK, CONFIG_REGULATOR, CONFIG_PM_OPP)))]
fn board<'bound>(
    pdev: &'bound platform::Device<Core<'_>>,
    compatible: Option<&CStr>,
) -> Result<BoardOf<'bound>> {
    match compatible {
        None => Ok(core::marker::PhantomData),
        Some(_) => {
            dev_err!(
                pdev.as_ref(),
                "matched by OF, but built without CONFIG_OF, CONFIG_COMMON_CLK, \
                 CONFIG_REGULATOR and CONFIG_PM_OPP\n"
            );
            Err(ENODEV)
        }
    }
}

::kernel::of_device_table!(
    OF_TABLE,
    MODULE_OF_TABLE,
    <TyrPlatform as platform::Driver>::IdInfo,
    [
        (
            ::kernel::of::DeviceId::new(c"rockchip,rk3588-mali"),
            c"rockchip,rk3588-mali"
        ),
        (
            ::kernel::of::DeviceId::new(c"arm,mali-valhall-csf"),
            c"arm,mali-valhall-csf"
        ),
    ]
);

impl Drop for TyrBound<'_> {
    fn drop(&mut self) {
        let dev = self.reg.device();
        dev.unplug();
        dev.backend.revoke_io();
    }
}

impl platform::Driver for TyrPlatform {
    /// The `compatible` string the device was matched on.
    type IdInfo = &'static CStr;
    type Data<'bound> = TyrBound<'bound>;
    const OF_ID_TABLE: Option<::kernel::of::IdTable<Self::IdInfo>> = Some(&OF_TABLE);

    fn probe<'bound>(
        pdev: &'bound platform::Device<Core<'_>>,
        info: Option<&'bound &'static CStr>,
    ) -> impl PinInit<TyrBound<'bound>, Error> + 'bound {
        #[allow(unused_mut)]
        let mut board = board(pdev, info.copied())?;
        let dev: &::kernel::device::Device<Core<'_>> = pdev.as_ref();
        let parent = drm_ctx::device::Device::from_kernel(dev);
        // SAFETY: This is the device's probe: nothing allocates or maps its DMA memory yet.
        let backend = unsafe { KernelBackend::g610(dev) }.map_err(Error::from)?;
        // A board's lines reach the driver through the interrupt controller.
        #[cfg(all(CONFIG_OF, CONFIG_COMMON_CLK, CONFIG_REGULATOR, CONFIG_PM_OPP))]
        if let Some(b) = board.as_mut() {
            b.wire(pdev, &backend)?;
        }
        let reg = crate::driver::probe(parent, backend).map_err(Error::from)?;
        Ok(TyrBound { reg, _board: board })
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
