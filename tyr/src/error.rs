// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Errors of the driver.
//!
//! Every fallible operation of the driver returns [`Error`]. Errors of the crates it is built
//! from convert into it, and each variant maps to the negative Linux errno an ioctl returns to
//! userspace ([`Error::to_errno`]).

use core::fmt;

/// What went wrong in the driver.
///
/// # Examples
///
/// ```
/// use tyr::Error;
///
/// assert_eq!(Error::TimedOut.to_errno(), -110);
/// assert_eq!(Error::UnknownGpu { gpu_id: 0x9091_0000 }.to_errno(), -19);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// An argument is invalid (`EINVAL`).
    Invalid,
    /// Memory could not be allocated (`ENOMEM`).
    NoMemory,
    /// The hardware did not reach the expected state in time (`ETIMEDOUT`).
    TimedOut,
    /// The device is gone or was never there (`ENODEV`).
    NoDevice,
    /// The GPU reports an ID the driver has no model entry for (`ENODEV`).
    UnknownGpu {
        /// The raw `GPU_ID` register.
        gpu_id: u32,
    },
    /// No such object (`ENOENT`).
    NotFound,
    /// A user-memory access failed (`EFAULT`).
    Fault,
    /// A resource is busy (`EBUSY`).
    Busy,
    /// An identifier space is exhausted (`ENOSPC`).
    NoSpace,
    /// A value overflows (`EOVERFLOW`).
    Overflow,
    /// The range is already in use (`EEXIST`).
    Exists,
    /// A value is out of range (`ERANGE`).
    Range,
    /// The caller lacks the right (`EACCES`).
    Access,
    /// An argument is too long (`E2BIG`).
    TooBig,
    /// Another errno, stored negative.
    Other(i32),
}

/// The driver's result type.
pub type Result<T = (), E = Error> = ::core::result::Result<T, E>;

impl Error {
    /// Returns the negative Linux errno of this error.
    pub fn to_errno(self) -> i32 {
        match self {
            Error::Invalid => -22,
            Error::NoMemory => -12,
            Error::TimedOut => -110,
            Error::NoDevice | Error::UnknownGpu { .. } => -19,
            Error::NotFound => -2,
            Error::Fault => -14,
            Error::Busy => -16,
            Error::NoSpace => -28,
            Error::Overflow => -75,
            Error::Exists => -17,
            Error::Range => -34,
            Error::Access => -13,
            Error::TooBig => -7,
            Error::Other(e) if (-4095..0).contains(&e) => e,
            Error::Other(_) => -22,
        }
    }

    /// Returns the error for a negative errno (`Other` for the ones without a variant).
    pub fn from_errno(errno: i32) -> Error {
        match errno {
            -22 => Error::Invalid,
            -12 => Error::NoMemory,
            -110 => Error::TimedOut,
            -19 => Error::NoDevice,
            -2 => Error::NotFound,
            -14 => Error::Fault,
            -16 => Error::Busy,
            -28 => Error::NoSpace,
            -75 => Error::Overflow,
            -17 => Error::Exists,
            -34 => Error::Range,
            -13 => Error::Access,
            -7 => Error::TooBig,
            e => Error::Other(e),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid => f.write_str("invalid argument"),
            Error::NoMemory => f.write_str("out of memory"),
            Error::TimedOut => f.write_str("the GPU did not respond in time"),
            Error::NoDevice => f.write_str("no device"),
            Error::UnknownGpu { gpu_id } => write!(f, "unknown GPU (GPU_ID {gpu_id:#x})"),
            Error::NotFound => f.write_str("no such object"),
            Error::Fault => f.write_str("bad user memory"),
            Error::Busy => f.write_str("busy"),
            Error::NoSpace => f.write_str("identifier space exhausted"),
            Error::Overflow => f.write_str("value overflows"),
            Error::Exists => f.write_str("already exists"),
            Error::Range => f.write_str("value out of range"),
            Error::Access => f.write_str("permission denied"),
            Error::TooBig => f.write_str("argument too long"),
            Error::Other(e) => write!(f, "errno {e}"),
        }
    }
}

impl core::error::Error for Error {}

impl From<register::Error> for Error {
    fn from(e: register::Error) -> Self {
        match e {
            register::Error::TimedOut => Error::TimedOut,
            register::Error::ValueTooWide => Error::Overflow,
            _ => Error::Invalid,
        }
    }
}

impl From<io_pgtable::Error> for Error {
    fn from(e: io_pgtable::Error) -> Self {
        Error::from_errno(e.to_errno())
    }
}

impl From<gpuvm::Error> for Error {
    fn from(e: gpuvm::Error) -> Self {
        Error::from_errno(e.to_errno())
    }
}

impl From<drm_ctx::Error> for Error {
    fn from(e: drm_ctx::Error) -> Self {
        Error::from_errno(e.to_errno())
    }
}

impl From<Error> for drm_ctx::Error {
    fn from(e: Error) -> Self {
        drm_ctx::Error::from_errno(e.to_errno()).unwrap_or(drm_ctx::Error::Other(e.to_errno()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_round_trip() {
        for e in [
            Error::Invalid,
            Error::NoMemory,
            Error::TimedOut,
            Error::NoDevice,
            Error::NotFound,
            Error::Fault,
            Error::Busy,
            Error::NoSpace,
            Error::Overflow,
            Error::Exists,
            Error::Range,
            Error::Access,
            Error::TooBig,
            Error::Other(-5),
        ] {
            assert_eq!(Error::from_errno(e.to_errno()), e);
            assert_eq!(drm_ctx::Error::from(e).to_errno(), e.to_errno());
        }
        assert_eq!(Error::Other(7).to_errno(), -22);
        assert_eq!(Error::from(gpuvm::Error::KernelReserved), Error::Invalid);
        assert_eq!(Error::from(io_pgtable::Error::Exists), Error::Exists);
        assert_eq!(Error::from(register::Error::TimedOut), Error::TimedOut);
    }
}
