// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Errors of the VA-space manager.

use core::fmt;

/// Why a request was refused.
///
/// A request that fails with any of these leaves the VM exactly as it was.
///
/// # Examples
///
/// ```
/// use gpuvm::Error;
///
/// assert_eq!(Error::Overflow.to_errno(), -75);
/// assert_eq!(Error::KernelReserved.to_errno(), -22);
/// assert_eq!(Error::NoMemory.to_errno(), -12);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The request covers zero bytes.
    ZeroRange,
    /// `addr + range` (or `offset + range`) does not fit in 64 bits.
    Overflow,
    /// The request reaches outside `[start, start + range)` of the VM.
    OutOfVm,
    /// The request overlaps the kernel-reserved region.
    KernelReserved,
    /// The address, range or object offset is not a multiple of the VM's alignment.
    Misaligned,
    /// `offset + range` goes past the end of the GEM object.
    OutOfObject,
    /// The VM configuration itself is invalid (alignment not a power of two, reserved region
    /// outside the VM, empty or overflowing VM).
    InvalidConfig,
    /// Not enough preallocated VA nodes, VM-BO slots or op entries, and the storage could not
    /// grow.
    NoMemory,
    /// The GEM object has no VM-BO in this VM.
    NotFound,
    /// A VM_BIND batch on this VM was leaked (`mem::forget`) before commit or drop; the VM
    /// refuses all changes from then on.
    Busy,
}

impl Error {
    /// The negative Linux errno for this error.
    pub fn to_errno(self) -> i32 {
        match self {
            Error::Overflow => -75,
            Error::NoMemory => -12,
            Error::NotFound => -2,
            Error::Busy => -16,
            Error::ZeroRange
            | Error::OutOfVm
            | Error::KernelReserved
            | Error::Misaligned
            | Error::OutOfObject
            | Error::InvalidConfig => -22,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::ZeroRange => "request covers zero bytes",
            Error::Overflow => "address or offset arithmetic overflows 64 bits",
            Error::OutOfVm => "request lies outside the VM's address range",
            Error::KernelReserved => "request overlaps the kernel-reserved region",
            Error::Misaligned => "address, range or offset not aligned to the VM's alignment",
            Error::OutOfObject => "request goes past the end of the GEM object",
            Error::InvalidConfig => "invalid VM configuration",
            Error::NoMemory => "out of preallocated VA nodes, VM-BO slots or op entries",
            Error::NotFound => "GEM object is not bound in this VM",
            Error::Busy => "a VM_BIND batch on this VM was leaked",
        })
    }
}

impl core::error::Error for Error {}
