// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Errors of the DRM core and its typestate.
//!
//! Every fallible operation of this crate returns [`Error`]. Each variant corresponds to one Linux
//! errno, and [`Error::to_errno`] gives the negative value a system call would return, which is
//! what an ioctl handler hands back to userspace.

use core::fmt;

/// An error of the DRM core.
///
/// # Examples
///
/// ```
/// use drm_ctx::Error;
///
/// assert_eq!(Error::NoDevice.to_errno(), -19);
/// assert_eq!(Error::from_errno(-22), Some(Error::Invalid));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// An argument is invalid (`EINVAL`).
    Invalid,
    /// Memory could not be allocated (`ENOMEM`).
    NoMemory,
    /// The device was unplugged or never registered (`ENODEV`).
    NoDevice,
    /// No object has this handle (`ENOENT`).
    NotFound,
    /// A user-memory access failed (`EFAULT`).
    Fault,
    /// The caller is not allowed to perform this operation (`EACCES`).
    Access,
    /// The operation needs privileges the caller does not have (`EPERM`).
    Permission,
    /// The ioctl command does not belong to DRM (`ENOTTY`).
    NotTty,
    /// A resource is busy (`EBUSY`).
    Busy,
    /// An address space or identifier space is exhausted (`ENOSPC`).
    NoSpace,
    /// A value does not fit its destination (`ERANGE`).
    Range,
    /// A value overflows (`EOVERFLOW`).
    Overflow,
    /// The object already exists (`EEXIST`).
    Exists,
    /// Another errno, stored as the negative value (for example `Other(-5)` for `EIO`). A value
    /// outside `-4095..0` is not an errno and reports as `EINVAL`.
    Other(i32),
}

impl Error {
    /// Returns the negative Linux errno of this error.
    pub fn to_errno(self) -> i32 {
        match self {
            Error::Invalid => -22,
            Error::NoMemory => -12,
            Error::NoDevice => -19,
            Error::NotFound => -2,
            Error::Fault => -14,
            Error::Access => -13,
            Error::Permission => -1,
            Error::NotTty => -25,
            Error::Busy => -16,
            Error::NoSpace => -28,
            Error::Range => -34,
            Error::Overflow => -75,
            Error::Exists => -17,
            Error::Other(e) if (-4095..0).contains(&e) => e,
            Error::Other(_) => -22,
        }
    }

    /// Maps a negative errno back to an error; `None` for values that are not negative errnos.
    pub fn from_errno(errno: i32) -> Option<Error> {
        const KNOWN: [Error; 13] = [
            Error::Invalid,
            Error::NoMemory,
            Error::NoDevice,
            Error::NotFound,
            Error::Fault,
            Error::Access,
            Error::Permission,
            Error::NotTty,
            Error::Busy,
            Error::NoSpace,
            Error::Range,
            Error::Overflow,
            Error::Exists,
        ];
        if !(-4095..0).contains(&errno) {
            return None;
        }
        Some(
            KNOWN
                .iter()
                .copied()
                .find(|e| e.to_errno() == errno)
                .unwrap_or(Error::Other(errno)),
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Error::Invalid => "invalid argument",
            Error::NoMemory => "out of memory",
            Error::NoDevice => "no such device",
            Error::NotFound => "no such object",
            Error::Fault => "bad user address",
            Error::Access => "access denied",
            Error::Permission => "operation not permitted",
            Error::NotTty => "inappropriate ioctl for device",
            Error::Busy => "device or resource busy",
            Error::NoSpace => "no space left",
            Error::Range => "result out of range",
            Error::Overflow => "value too large",
            Error::Exists => "already exists",
            Error::Other(e) => return write!(f, "driver error {e}"),
        };
        f.write_str(s)
    }
}

impl core::error::Error for Error {}

/// The result type of this crate.
pub type Result<T = (), E = Error> = ::core::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_round_trip() {
        for e in [
            Error::Invalid,
            Error::NoMemory,
            Error::NoDevice,
            Error::NotFound,
            Error::Fault,
            Error::Access,
            Error::Permission,
            Error::NotTty,
            Error::Busy,
            Error::NoSpace,
            Error::Range,
            Error::Overflow,
            Error::Exists,
            Error::Other(-5),
        ] {
            assert_eq!(Error::from_errno(e.to_errno()), Some(e));
        }
        assert_eq!(Error::from_errno(0), None);
        assert_eq!(Error::from_errno(3), None);
        assert_eq!(Error::from_errno(-5000), None);
        assert_eq!(Error::Other(5).to_errno(), -22);
        assert_eq!(Error::Other(-5000).to_errno(), -22);
    }
}
