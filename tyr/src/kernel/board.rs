// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The GPU's resources as a board's device tree describes them.
//!
//! On an RK3588 board the GPU is a device-tree node (`compatible = "rockchip,rk3588-mali",
//! "arm,mali-valhall-csf"`) naming a 2 MiB register window (`reg`), three interrupt lines of
//! the GIC (`job`, `mmu`, `gpu`), three clocks (`core`, `coregroup`, `stacks`), a supply
//! (`mali-supply`) and a table of operating points (`operating-points-v2`). The platform bus
//! makes a platform device of the node and probes the driver whose OF match table names one of
//! its `compatible` strings; the driver takes each resource through the kernel's APIs before it
//! touches the GPU, and gives them back when it is unbound.
//!
//! [`Board::take`] does what panthor's probe does with them: it claims the register window
//! (requested exclusively and mapped: `/proc/iomem` shows it as the GPU's), looks the three
//! interrupts up by name, gets the clocks and enables them (`core` required, the other two
//! optional, as panthor), enables the supply, and adds the operating points from the tree. The
//! test board's node (`xtask/src/dt.rs`) adds these to QEMU's `virt` machine, whose GIC is
//! real and whose clocks and supply are the kernel's fixed-clock and fixed-regulator drivers.
//!
//! What stays simulated is the silicon: register accesses still reach the simulated GPU
//! through the `register` crate's `Io` traits (the backend's model region), not the mapping,
//! behind which `virt` has nothing.

use core::ffi::c_char;

use ::kernel::clk::{Clk, Hertz, OptionalClk};
use ::kernel::device::{Bound, Core};
use ::kernel::io::mem::ExclusiveIoMem;
use ::kernel::irq::{Flags, ThreadedRegistration};
use ::kernel::opp;
use ::kernel::platform;
use ::kernel::prelude::*;
use ::kernel::regulator::{Enabled, Regulator};
use ::kernel::sync::aref::ARef;

use super::{GpuIrq, KernelBackend};

/// The size of a Mali-G610's register window (RK3588's `reg`).
pub const MMIO_SIZE: usize = 0x20_0000;

/// The interrupt lines, by the names the binding gives them.
pub const IRQ_NAMES: [&CStr; 3] = [c"job", c"mmu", c"gpu"];

/// The names the lines' handlers carry (`/proc/interrupts`), as panthor's carry
/// `panthor-job` and so on.
pub const IRQ_LABELS: [&CStr; 3] = [c"tyr-job", c"tyr-mmu", c"tyr-gpu"];

extern "C" {
    /// Logs that `dev` was bound to its device-tree node (its full path) by OF match on
    /// `compatible` (`boot.c`).
    fn gpukit_tyr_log_of_match(dev: *mut core::ffi::c_void, compatible: *const c_char);
}

/// The GPU's clocks, enabled while the driver is bound.
struct Clocks {
    core: Clk,
    coregroup: OptionalClk,
    stacks: OptionalClk,
}

impl Drop for Clocks {
    fn drop(&mut self) {
        self.stacks.disable_unprepare();
        self.coregroup.disable_unprepare();
        self.core.disable_unprepare();
    }
}

/// What the board gave the driver for a bound GPU, given back when it is dropped (at
/// unbind, after the DRM device was unplugged): the supply is disabled after the clocks, the
/// register window released last.
pub struct Board<'bound> {
    /// The handlers registered for the three lines ([`wire`](Self::wire)); freed first.
    handlers: KVec<Pin<KBox<ThreadedRegistration<GpuIrq>>>>,
    /// The operating points added from the tree (removed when dropped).
    _opp: opp::Table,
    clocks: Clocks,
    _mali: Regulator<Enabled>,
    _mmio: ExclusiveIoMem<'bound, MMIO_SIZE>,
    /// The interrupt lines `job`, `mmu` and `gpu`.
    pub irqs: [u32; 3],
}

impl<'bound> Board<'bound> {
    /// Takes the resources of the GPU `pdev`, which the platform bus bound by OF match on
    /// `compatible`.
    ///
    /// # Errors
    ///
    /// `ENODEV` without a register window, `EBUSY` if someone else holds it, and the
    /// kernel's errors for a missing interrupt, clock, supply or operating-point table
    /// (`-EPROBE_DEFER` among them while a provider has not probed yet). Whatever was taken
    /// before the failure is given back.
    pub fn take(pdev: &'bound platform::Device<Core<'_>>, compatible: &CStr) -> Result<Self> {
        let bound: &'bound platform::Device<Bound> = pdev;
        let dev: &::kernel::device::Device<Bound> = bound.as_ref();
        let resource = bound.resource_by_index(0).ok_or(ENODEV)?;
        let (start, size) = (resource.start(), resource.size());
        if usize::try_from(size) != Ok(MMIO_SIZE) {
            dev_err!(
                dev,
                "register window of {size:#x} bytes, not the {MMIO_SIZE:#x} a Mali-G610 has\n"
            );
            return Err(EINVAL);
        }
        let mmio = bound
            .io_request_by_index(0)
            .ok_or(ENODEV)?
            .iomap_exclusive_sized::<MMIO_SIZE>()?;
        let mut irqs = [0; 3];
        for (irq, name) in irqs.iter_mut().zip(IRQ_NAMES) {
            *irq = bound.irq_by_name(name)?.irq();
        }
        let clocks = Clocks {
            core: Clk::get(dev, Some(c"core"))?,
            coregroup: OptionalClk::get(dev, Some(c"coregroup"))?,
            stacks: OptionalClk::get(dev, Some(c"stacks"))?,
        };
        clocks.core.prepare_enable()?;
        if let Err(e) = clocks.coregroup.prepare_enable() {
            clocks.core.disable_unprepare();
            return Err(e);
        }
        if let Err(e) = clocks.stacks.prepare_enable() {
            clocks.coregroup.disable_unprepare();
            clocks.core.disable_unprepare();
            return Err(e);
        }
        // From here on dropping `clocks` disables them.
        let mali = Regulator::<Enabled>::get(dev, c"mali")?;
        let microvolts = mali.get_voltage().map_or(0, |v| v.as_microvolts());
        let owner: ARef<::kernel::device::Device> = dev.into();
        let table = opp::Table::from_of(&owner, 0)?;
        let opps = table.opp_count()?;
        let Hertz(rate) = clocks.core.rate();
        // SAFETY: `dev` is a live device; `compatible` is a NUL-terminated string that outlives
        // the call.
        unsafe {
            gpukit_tyr_log_of_match(super::dma::raw_device(dev).cast(), compatible.as_char_ptr())
        };
        let [job, mmu, gpu] = irqs;
        dev_info!(
            dev,
            "MMIO {start:#x}+{size:#x}, IRQs job {job} mmu {mmu} gpu {gpu}, core clock {rate} \
             Hz, mali supply {microvolts} uV, {opps} operating points\n"
        );
        Ok(Board {
            handlers: KVec::new(),
            _opp: table,
            clocks,
            _mali: mali,
            _mmio: mmio,
            irqs,
        })
    }

    /// Registers the handlers of the GPU's three lines with the kernel's IRQ API (threaded,
    /// `IRQF_ONESHOT`, the trigger the tree gives: level-high) and has `backend` raise the
    /// lines there ([`KernelBackend::route_irqs`]) instead of its event pump calling the
    /// driver's handler.
    ///
    /// # Errors
    ///
    /// `ENOMEM`, and the kernel's errors of `request_threaded_irq`; the handlers registered
    /// before the failure stay registered until the board is dropped, and the lines are not
    /// routed.
    pub fn wire(
        &mut self,
        pdev: &'bound platform::Device<Core<'_>>,
        backend: &KernelBackend,
    ) -> Result {
        self.handlers.reserve(IRQ_NAMES.len(), GFP_KERNEL)?;
        for (i, (name, label)) in IRQ_NAMES.iter().zip(IRQ_LABELS).enumerate() {
            let handler = KBox::pin_init(
                pdev.request_threaded_irq_by_name(
                    Flags::ONESHOT,
                    name,
                    label,
                    backend.irq_handler(i).map_err(Error::from),
                ),
                GFP_KERNEL,
            )?;
            self.handlers.push(handler, GFP_KERNEL)?;
        }
        backend.route_irqs(self.irqs).map_err(Error::from)
    }

    /// The core clock's rate (Hz).
    pub fn core_rate(&self) -> u64 {
        let Hertz(rate) = self.clocks.core.rate();
        u64::try_from(rate).unwrap_or(u64::MAX)
    }
}
