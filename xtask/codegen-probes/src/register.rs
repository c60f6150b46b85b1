// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Probes for `register`: field accesses through `register!` types and `Mmio` against the
//! volatile loads, stores, shifts and masks a driver would write by hand.
//!
//! Every probe takes the base of a 4 KiB register window. The registers are:
//!
//! - `CTRL` at 0x100: `7:4 mode`, `0:0 enable`;
//! - `SCRATCH[64]` at 0x80 (overlapping nothing the probes use together);
//! - `CPU_CTL` at 0x10 from a base, with `Cpu1` at 0x200: `0:0 start`.

use core::ptr::NonNull;

use bounded::Bounded;
use register::io::{Io, Mmio, MmioRaw, RelaxedMmio};
use register::{register, RegisterBase};

register! {
    @first_series
    /// Control register.
    pub CTRL(u32) @ 0x100 {
        /// Operating mode.
        7:4 mode;
        /// Enable bit.
        0:0 enable => bool;
    }

    /// Scratch registers.
    pub SCRATCH(u32)[64] @ 0x80 {
        /// Value.
        31:0 value;
    }

    /// Per-CPU control, relative to a CPU block.
    pub CPU_CTL(u32) @ CpuBase + 0x10 {
        /// Start bit.
        0:0 start => bool;
    }
}

/// Family of the per-CPU register blocks.
pub struct CpuBase;

/// The block of CPU 1.
pub struct Cpu1;

impl RegisterBase<CpuBase> for Cpu1 {
    const BASE: usize = 0x200;
}

/// Size of the register window of every probe.
const WINDOW: usize = 0x1000;

/// Runs `f` on the window at `base` as an `Mmio`.
///
/// # Safety
///
/// `base` must point to `WINDOW` bytes valid for volatile accesses.
#[inline(always)]
unsafe fn with_mmio<R: Default>(base: NonNull<u8>, f: impl FnOnce(&Mmio<WINDOW>) -> R) -> R {
    match MmioRaw::<WINDOW>::new(base, WINDOW) {
        // SAFETY: The caller guarantees the window.
        Ok(raw) => f(unsafe { Mmio::from_raw(&raw) }),
        Err(_) => R::default(),
    }
}

/// Runs `f` on the window at `base` as a `RelaxedMmio`.
///
/// # Safety
///
/// `base` must point to `WINDOW` bytes valid for volatile accesses.
#[inline(always)]
unsafe fn with_relaxed<R: Default>(
    base: NonNull<u8>,
    f: impl FnOnce(&RelaxedMmio<WINDOW>) -> R,
) -> R {
    // SAFETY: Forwarded from the caller.
    unsafe { with_mmio(base, |io| f(io.relaxed())) }
}

/// The `u32` register at `offset` from `base`.
#[inline(always)]
fn reg(base: NonNull<u8>, offset: usize) -> *mut u32 {
    base.as_ptr().wrapping_add(offset).cast::<u32>()
}

/// What `Mmio` does after a read, written out.
#[inline(always)]
fn hand_barrier_after_read() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: A barrier instruction only.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
}

/// What `Mmio` does before a write, written out.
#[inline(always)]
fn hand_barrier_before_write() {
    #[cfg(target_arch = "aarch64")]
    // SAFETY: A barrier instruction only.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
}

/// Reads field `mode` of `CTRL`.
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_read_field_lib(base: NonNull<u8>) -> u32 {
    // SAFETY: Forwarded from the caller.
    unsafe { with_relaxed(base, |io| io.read(CTRL).mode().get()) }
}

/// Hand-written [`register_read_field_lib`].
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_read_field_hand(base: NonNull<u8>) -> u32 {
    // SAFETY: Guaranteed by the caller.
    let v = unsafe { reg(base, 0x100).read_volatile() };
    (v >> 4) & 0xf
}

/// Sets `CTRL.mode` to the constant 3, keeping the other bits.
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_rmw_const_lib(base: NonNull<u8>) {
    // SAFETY: Forwarded from the caller.
    unsafe { with_relaxed(base, |io| io.update(CTRL, |r| r.with_const_mode::<3>())) }
}

/// Hand-written [`register_rmw_const_lib`].
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_rmw_const_hand(base: NonNull<u8>) {
    let p = reg(base, 0x100);
    // SAFETY: Guaranteed by the caller.
    let old = unsafe { p.read_volatile() };
    // SAFETY: Guaranteed by the caller.
    unsafe { p.write_volatile((old & !0xf0) | 0x30) }
}

/// Sets `CTRL.mode` to a run-time `Bounded` value (seed-style accessors).
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_rmw_bounded_lib(base: NonNull<u8>, mode: u32) {
    let mode = Bounded::<u32, 4>::from_expr(mode & 0xf);
    // SAFETY: Forwarded from the caller.
    unsafe { with_relaxed(base, |io| CTRL::update(&io, |r| r.set_mode(mode))) }
}

/// Hand-written [`register_rmw_bounded_lib`].
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_rmw_bounded_hand(base: NonNull<u8>, mode: u32) {
    let p = reg(base, 0x100);
    // SAFETY: Guaranteed by the caller.
    let old = unsafe { p.read_volatile() };
    // SAFETY: Guaranteed by the caller.
    unsafe { p.write_volatile((old & !0xf0) | ((mode & 0xf) << 4)) }
}

/// Sets `CTRL.mode` to `mode` if it fits, leaving the register as read otherwise.
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_try_set_lib(base: NonNull<u8>, mode: u32) {
    // SAFETY: Forwarded from the caller.
    unsafe {
        with_relaxed(base, |io| {
            if let Ok(r) = io.read(CTRL).try_with_mode(mode) {
                io.write_reg(r);
            }
        })
    }
}

/// Hand-written [`register_try_set_lib`].
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_try_set_hand(base: NonNull<u8>, mode: u32) {
    let p = reg(base, 0x100);
    // SAFETY: Guaranteed by the caller.
    let old = unsafe { p.read_volatile() };
    if mode >> 4 == 0 {
        // SAFETY: Guaranteed by the caller.
        unsafe { p.write_volatile((old & !0xf0) | (mode << 4)) }
    }
}

/// Writes `value` to `SCRATCH[idx]` if `idx` is in range.
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_array_write_lib(base: NonNull<u8>, idx: usize, value: u32) {
    // SAFETY: Forwarded from the caller.
    unsafe {
        with_relaxed(base, |io| {
            if let Some(loc) = SCRATCH::try_at(idx) {
                io.write(loc, SCRATCH::from(value));
            }
        })
    }
}

/// Hand-written [`register_array_write_lib`].
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_array_write_hand(base: NonNull<u8>, idx: usize, value: u32) {
    if idx < 64 {
        // SAFETY: Guaranteed by the caller; the offset is inside the window.
        unsafe { reg(base, 0x80 + idx * 4).write_volatile(value) }
    }
}

/// Sets `CPU_CTL.start` of CPU 1 (a relative register).
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_relative_lib(base: NonNull<u8>) {
    // SAFETY: Forwarded from the caller.
    unsafe {
        with_relaxed(base, |io| {
            io.update(CPU_CTL::of::<Cpu1>(), |r| r.with_start(true))
        })
    }
}

/// Hand-written [`register_relative_lib`].
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_relative_hand(base: NonNull<u8>) {
    let p = reg(base, 0x210);
    // SAFETY: Guaranteed by the caller.
    let old = unsafe { p.read_volatile() };
    // SAFETY: Guaranteed by the caller.
    unsafe { p.write_volatile(old | 1) }
}

/// Sets `CTRL.enable` and `CTRL.mode` through `Mmio`, with its read and write barriers.
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_mmio_rmw_lib(base: NonNull<u8>, mode: u32) {
    let mode = Bounded::<u32, 4>::from_expr(mode & 0xf);
    // SAFETY: Forwarded from the caller.
    unsafe {
        with_mmio(base, |io| {
            io.update(CTRL, |r| r.with_enable(true).with_mode(mode))
        })
    }
}

/// Hand-written [`register_mmio_rmw_lib`].
///
/// # Safety
///
/// `base` must point to 4 KiB valid for volatile accesses.
#[no_mangle]
pub unsafe extern "C" fn register_mmio_rmw_hand(base: NonNull<u8>, mode: u32) {
    let p = reg(base, 0x100);
    // SAFETY: Guaranteed by the caller.
    let old = unsafe { p.read_volatile() };
    hand_barrier_after_read();
    let new = (old & !0xf1) | 1 | ((mode & 0xf) << 4);
    hand_barrier_before_write();
    // SAFETY: Guaranteed by the caller.
    unsafe { p.write_volatile(new) }
}
