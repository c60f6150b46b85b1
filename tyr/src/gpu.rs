// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Bringing the GPU up: reset, power, identification.
//!
//! Before a Mali GPU can be used the driver puts it in a known state and finds out what it is:
//!
//! 1. a **soft reset** (`GPU_COMMAND`), after which the GPU raises `RESET_COMPLETED` in
//!    `GPU_IRQ_RAWSTAT`;
//! 2. powering on the **L2 cache** (`L2_PWRON`), which is ready once `L2_READY` shows it — the
//!    MMU and the firmware need the L2;
//! 3. reading the **identity and feature registers** into the [`GpuInfo`] that userspace later
//!    queries, and looking the model up by architecture and product ID;
//! 4. powering the **shader cores and the tiler**, which sit behind the L2: they may only be
//!    powered while the L2 is ready, and the L2 may only go once they are off.
//!
//! # Power domains
//!
//! Each domain (L2, shader cores, tiler) has a bit per instance: a mask written to `*_PWRON`
//! or `*_PWROFF` starts transitions, which show in `*_PWRTRANS` until they finish and in
//! `*_READY` once the instances are powered. As panthor's `panthor_gpu_block_power_on/off`,
//! every request first waits for the domain's earlier transitions to finish, then waits for its
//! own. [`power_on`] goes L2, then shader cores and tiler; [`power_off`] goes shader cores and
//! tiler, then L2 (the MCU must be stopped by then: it runs from the L2). The simulated GPU
//! refuses the other orders (a GPU fault), so a driver that gets it wrong fails its tests.
//!
//! Every wait polls with a timeout ([`read_poll_timeout`]) on the backend's clock, so a GPU
//! that never answers is reported as [`Error::TimedOut`] instead of hanging the probe.
//!
//! # Examples
//!
//! ```
//! # #[cfg(feature = "host")] {
//! use tyr::gpu;
//! use tyr::host::HostBackend;
//!
//! let backend = HostBackend::g610();
//! let info = gpu::probe(&backend).unwrap();
//! assert_eq!(info.model.name, "g610");
//! assert!(backend.log_lines()[0].starts_with("mali-g610 GPU_ID 0xa8670005"));
//! # }
//! ```

use core::time::Duration;

use register::io::poll::read_poll_timeout;
use register::io::Io;

use crate::backend::{Backend, Lock as _};
use crate::regs::*;
use crate::{dev_err, dev_info, uapi, Error, Result};

/// How often the probe polls.
pub const POLL_INTERVAL: Duration = Duration::from_millis(1);
/// How long the probe waits for a reset or a power transition.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// A GPU model the driver knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    /// Marketing name, without the `mali-` prefix.
    pub name: &'static str,
    /// `GPU_ID.arch_major`.
    pub arch_major: u32,
    /// `GPU_ID.prod_major`.
    pub prod_major: u32,
}

/// The models the driver supports.
pub const GPU_MODELS: &[Model] = &[
    // Valhall, product 7: the RK3588's GPU.
    Model::new("g610", 10, 7),
];

impl Model {
    const fn new(name: &'static str, arch_major: u32, prod_major: u32) -> Self {
        Model {
            name,
            arch_major,
            prod_major,
        }
    }
}

/// Looks a `GPU_ID` value up in [`GPU_MODELS`].
///
/// # Examples
///
/// ```
/// assert_eq!(tyr::gpu::lookup_model(0xa867_0005).map(|m| m.name), Some("g610"));
/// assert_eq!(tyr::gpu::lookup_model(0x9091_0000), None);
/// ```
pub fn lookup_model(gpu_id: u32) -> Option<&'static Model> {
    let id = GPU_ID::from(gpu_id);
    GPU_MODELS
        .iter()
        .find(|m| m.arch_major == id.arch_major().get() && m.prod_major == id.prod_major().get())
}

/// What the probe found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    /// The registers as userspace sees them (`DEV_QUERY` `GPU_INFO`).
    pub raw: uapi::GpuInfo,
    /// The model.
    pub model: &'static Model,
}

impl GpuInfo {
    /// Virtual address bits of the MMU.
    pub fn va_bits(&self) -> u32 {
        MMU_FEATURES::from(self.raw.mmu_features).va_bits().get()
    }

    /// Physical address bits of the MMU.
    pub fn pa_bits(&self) -> u32 {
        MMU_FEATURES::from(self.raw.mmu_features).pa_bits().get()
    }

    /// Number of address spaces (contiguous bits of `AS_PRESENT`, at most [`MAX_AS`]).
    pub fn num_as(&self) -> usize {
        (self.raw.as_present.trailing_ones() as usize).min(MAX_AS)
    }
}

/// Reads the identity and feature registers.
pub fn read_info<B: Backend>(b: &B) -> uapi::GpuInfo {
    let io = b.io();
    let mut texture_features = [0u32; 4];
    for (i, t) in texture_features.iter_mut().enumerate() {
        *t = TEXTURE_FEATURES::try_at(i)
            .and_then(|loc| io.try_read(loc).ok())
            .map_or(0, |r: TEXTURE_FEATURES| r.value().get());
    }
    // The raw value of a fixed register.
    macro_rules! raw {
        ($reg:ident) => {
            io.read($reg).into_raw()
        };
    }
    uapi::GpuInfo {
        gpu_id: raw!(GPU_ID),
        gpu_rev: raw!(REVIDR),
        csf_id: raw!(CSF_ID),
        l2_features: raw!(L2_FEATURES),
        tiler_features: raw!(TILER_FEATURES),
        mem_features: raw!(MEM_FEATURES),
        mmu_features: raw!(MMU_FEATURES),
        thread_features: raw!(THREAD_FEATURES),
        max_threads: raw!(THREAD_MAX_THREADS),
        thread_max_workgroup_size: raw!(THREAD_MAX_WORKGROUP_SIZE),
        thread_max_barrier_size: raw!(THREAD_MAX_BARRIER_SIZE),
        coherency_features: raw!(COHERENCY_FEATURES),
        texture_features,
        as_present: raw!(AS_PRESENT),
        selected_coherency: uapi::DRM_PANTHOR_GPU_COHERENCY_NONE,
        shader_present: raw!(SHADER_PRESENT),
        l2_present: raw!(L2_PRESENT),
        tiler_present: raw!(TILER_PRESENT),
        core_features: raw!(CORE_FEATURES),
        pad: 0,
        gpu_features: 0, // no GPU_FEATURES register before arch 11
    }
}

/// The `GPU_IRQ` bits that complete a GPU command someone waits for
/// ([`command_and_wait`]): `RESET_COMPLETED` (8) and `CLEAN_CACHES_COMPLETED` (17).
pub const GPU_COMMAND_ACKS: u32 = 1 << 8 | 1 << 17;

/// The `GPU_IRQ` bits the driver enables, as panthor does: `FAULT` (0), `PROTM_FAULT` (1),
/// and the completions of the commands it waits for ([`GPU_COMMAND_ACKS`]).
pub const GPU_IRQS: u32 = 1 << 0 | 1 << 1 | GPU_COMMAND_ACKS;

/// Issues `command`, which the GPU completes by raising `done` (one bit of
/// [`GPU_COMMAND_ACKS`]), and waits for that, polling every `interval` for at most `timeout`.
///
/// The completion comes one of two ways. Once the driver serves its interrupts, the GPU
/// line's handler ([`take_command_acks`]) clears the bit in `GPU_IRQ` and takes it out of the
/// pending commands ([`Backend::gpu_reqs`]); before that (the probe) or while the handler
/// cannot run (the driver's work is under way in the same thread of calls) the waiter finds
/// it in `GPU_IRQ_RAWSTAT` itself. Both look under the same lock, so a completion is taken
/// once. A command of the same kind already pending is not issued again: the caller waits
/// for that one (panthor's `pending_reqs`).
///
/// # Errors
///
/// [`Error::TimedOut`] if the command does not complete in time (it is no longer waited
/// for).
pub fn command_and_wait<B: Backend>(
    b: &B,
    done: u32,
    command: GPU_COMMAND,
    interval: Duration,
    timeout: Duration,
) -> Result {
    let io = b.io();
    b.gpu_reqs().with(|pending| {
        if *pending & done == 0 {
            *pending |= done;
            io.write_reg(GPU_IRQ_CLEAR::from(done));
            io.write_reg(command);
        }
    });
    let taken = || {
        b.gpu_reqs().with(|pending| {
            if *pending & done == 0 {
                return true;
            }
            if io.read(GPU_IRQ_RAWSTAT).into_raw() & done != 0 {
                *pending &= !done;
                io.write_reg(GPU_IRQ_CLEAR::from(done));
                return true;
            }
            false
        })
    };
    let waited = read_poll_timeout(
        b.clock(),
        || Ok::<_, Error>(taken()),
        |&t| t,
        interval,
        timeout,
    );
    if waited.is_err() {
        b.gpu_reqs().with(|pending| *pending &= !done);
    }
    waited.map(|_| ())
}

/// The GPU line's handler's part in [`command_and_wait`]: clears `status` (read from
/// `GPU_IRQ_STATUS`) in `GPU_IRQ` and takes the command completions in it out of the pending
/// commands, waking their waiters.
pub fn take_command_acks<B: Backend>(b: &B, status: u32) {
    b.gpu_reqs().with(|pending| {
        b.io().write_reg(GPU_IRQ_CLEAR::from(status));
        *pending &= !(status & GPU_COMMAND_ACKS);
    });
}

/// Soft-resets the GPU and waits for `RESET_COMPLETED` ([`command_and_wait`]).
///
/// # Errors
///
/// [`Error::TimedOut`] if the reset does not complete within [`POLL_TIMEOUT`].
pub fn soft_reset<B: Backend>(b: &B) -> Result {
    let done = GPU_IRQ_RAWSTAT::zeroed()
        .with_reset_completed(true)
        .into_raw();
    let command = GPU_COMMAND::zeroed()
        .with_const_code::<{ gpu_command::RESET }>()
        .with_const_payload::<{ gpu_command::RESET_SOFT }>();
    command_and_wait(b, done, command, POLL_INTERVAL, POLL_TIMEOUT)
        .inspect_err(|_| dev_err!(b, "GPU reset failed."))
}

/// Powers the L2 cache on and waits until it is ready.
///
/// # Errors
///
/// [`Error::TimedOut`] if the L2 is not ready within [`POLL_TIMEOUT`].
pub fn l2_power_on<B: Backend>(b: &B) -> Result {
    let io = b.io();
    let request = L2_PWRON_LO::zeroed().with_const_request::<1>();
    io.write_reg(request);
    read_poll_timeout(
        b.clock(),
        || Ok::<_, Error>(io.read(L2_READY_LO)),
        |s| s.ready().get() == 1,
        POLL_INTERVAL,
        POLL_TIMEOUT,
    )
    .inspect_err(|_| dev_err!(b, "Failed to power on the GPU."))?;
    Ok(())
}

/// One power domain's registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Domain {
    /// The L2 cache (and the MMU and memory interface behind it).
    L2,
    /// The shader cores.
    Shader,
    /// The tiler.
    Tiler,
}

/// Waits until none of `mask` of domain `d` is in a transition.
fn wait_settled<B: Backend>(b: &B, d: Domain, mask: u64) -> Result {
    let io = b.io();
    let trans = || {
        Ok::<_, Error>(match d {
            Domain::L2 => io.read(L2_PWRTRANS).transitioning().get(),
            Domain::Shader => io.read(SHADER_PWRTRANS).transitioning().get(),
            Domain::Tiler => io.read(TILER_PWRTRANS).transitioning().get(),
        })
    };
    read_poll_timeout(
        b.clock(),
        trans,
        |t| t & mask == 0,
        POWER_POLL_INTERVAL,
        POLL_TIMEOUT,
    )
    .map(|_| ())
    .inspect_err(|_| dev_err!(b, "timeout waiting on {d:?}:{mask:#x} power transition"))
}

/// Powers the instances `mask` of domain `d` on (`on`) or off and waits until they are
/// (panthor's `panthor_gpu_block_power_on/off`).
///
/// # Errors
///
/// [`Error::TimedOut`] if a transition does not finish within [`POLL_TIMEOUT`].
pub fn block_power<B: Backend>(b: &B, d: Domain, mask: u64, on: bool) -> Result {
    let io = b.io();
    wait_settled(b, d, mask)?;
    match (d, on) {
        (Domain::L2, true) => io.write_reg(L2_PWRON::zeroed().with_request(mask)),
        (Domain::Shader, true) => io.write_reg(SHADER_PWRON::zeroed().with_request(mask)),
        (Domain::Tiler, true) => io.write_reg(TILER_PWRON::zeroed().with_request(mask)),
        (Domain::L2, false) => io.write_reg(L2_PWROFF::zeroed().with_request(mask)),
        (Domain::Shader, false) => io.write_reg(SHADER_PWROFF::zeroed().with_request(mask)),
        (Domain::Tiler, false) => io.write_reg(TILER_PWROFF::zeroed().with_request(mask)),
    }
    let ready = || {
        Ok::<_, Error>(match d {
            Domain::L2 => io.read(L2_READY).ready().get(),
            Domain::Shader => io.read(SHADER_READY).ready().get(),
            Domain::Tiler => io.read(TILER_READY).ready().get(),
        })
    };
    read_poll_timeout(
        b.clock(),
        ready,
        |r| if on { r & mask == mask } else { r & mask == 0 },
        POWER_POLL_INTERVAL,
        POLL_TIMEOUT,
    )
    .inspect_err(|_| dev_err!(b, "timeout waiting on {d:?}:{mask:#x} readiness"))?;
    wait_settled(b, d, mask)
}

/// Powers the GPU up: the L2 first, then the shader cores and the tiler (every instance the
/// GPU has).
///
/// # Errors
///
/// [`Error::TimedOut`] if a domain does not come up.
pub fn power_on<B: Backend>(b: &B, info: &uapi::GpuInfo) -> Result {
    block_power(b, Domain::L2, info.l2_present, true)?;
    block_power(b, Domain::Shader, info.shader_present, true)?;
    block_power(b, Domain::Tiler, info.tiler_present, true)
}

/// Powers the GPU down: the shader cores and the tiler first, then the L2. The MCU must be
/// stopped already.
///
/// # Errors
///
/// [`Error::TimedOut`] if a domain does not go down.
pub fn power_off<B: Backend>(b: &B, info: &uapi::GpuInfo) -> Result {
    block_power(b, Domain::Shader, info.shader_present, false)?;
    block_power(b, Domain::Tiler, info.tiler_present, false)?;
    block_power(b, Domain::L2, info.l2_present, false)
}

/// How often a power transition is polled (panthor polls every 100 µs).
pub const POWER_POLL_INTERVAL: Duration = Duration::from_micros(1);

/// Logs what was found, in the words of Tyr.
fn log_info<B: Backend>(b: &B, info: &uapi::GpuInfo, name: &str) {
    let id = GPU_ID::from(info.gpu_id);
    dev_info!(
        b,
        "mali-{name} GPU_ID {:#x} major {:#x} minor {:#x} status {:#x}",
        info.gpu_id,
        id.ver_major().get(),
        id.ver_minor().get(),
        id.ver_status().get()
    );
    dev_info!(
        b,
        "Features: L2:0x{:x} Tiler:0x{:x} Mem:0x{:x} MMU:0x{:x} AS:0x{:x}",
        info.l2_features,
        info.tiler_features,
        info.mem_features,
        info.mmu_features,
        info.as_present
    );
    dev_info!(
        b,
        "shader_present={:#018x} l2_present={:#018x} tiler_present={:#018x}",
        info.shader_present,
        info.l2_present,
        info.tiler_present
    );
}

/// Runs the hardware part of the probe: reset, L2 power-on, identification, model lookup,
/// shader cores and tiler on.
///
/// # Errors
///
/// [`Error::TimedOut`] if the reset or the power-on never completes,
/// [`Error::UnknownGpu`] for a GPU that is not in [`GPU_MODELS`].
pub fn probe<B: Backend>(b: &B) -> Result<GpuInfo> {
    soft_reset(b)?;
    l2_power_on(b)?;
    let raw = read_info(b);
    let model = lookup_model(raw.gpu_id);
    log_info(b, &raw, model.map_or("unknown", |m| m.name));
    let Some(model) = model else {
        dev_err!(b, "Unsupported GPU (GPU_ID {:#x}).", raw.gpu_id);
        return Err(Error::UnknownGpu { gpu_id: raw.gpu_id });
    };
    power_on(b, &raw)?;
    Ok(GpuInfo { raw, model })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interrupt_masks_are_the_registers_bits() {
        let acks = GPU_IRQ_RAWSTAT::zeroed()
            .with_reset_completed(true)
            .with_clean_caches_completed(true)
            .into_raw();
        assert_eq!(GPU_COMMAND_ACKS, acks);
        let faults = GPU_IRQ_RAWSTAT::zeroed()
            .with_fault(true)
            .with_protected_fault(true)
            .into_raw();
        assert_eq!(GPU_IRQS, faults | acks);
    }
}
