// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Errors of the job queue and of fences.
//!
//! Two kinds of failure exist. [`Error`] is returned synchronously to the caller of a queue
//! operation (preparing or reserving a job). [`FenceError`] travels asynchronously: it is the
//! error a fence signals with, such as a hardware fault reported by the driver, a timeout, or the
//! cancellation of a job when its queue is torn down. Both map onto negative Linux errno values.

use core::fmt;
use core::num::NonZeroI32;

/// `EPERM`: operation not permitted.
pub const EPERM: i32 = -1;
/// `ENOENT`: no such entry.
pub const ENOENT: i32 = -2;
/// `EIO`: input/output error (what a faulting job commonly reports).
pub const EIO: i32 = -5;
/// `ENOMEM`: out of memory.
pub const ENOMEM: i32 = -12;
/// `EBUSY`: resource busy.
pub const EBUSY: i32 = -16;
/// `ENODEV`: no such device.
pub const ENODEV: i32 = -19;
/// `EINVAL`: invalid argument.
pub const EINVAL: i32 = -22;
/// `ENOSPC`: no space left.
pub const ENOSPC: i32 = -28;
/// `ETIMEDOUT`: timed out.
pub const ETIMEDOUT: i32 = -110;
/// `ECANCELED`: operation canceled.
pub const ECANCELED: i32 = -125;

/// Synchronous errors of the queue API.
///
/// # Examples
///
/// ```
/// use jobqueue::Error;
///
/// assert_eq!(Error::NoMemory.to_errno(), -12);
/// assert_eq!(Error::QueueFull.to_errno(), -16);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// An allocation made while preparing a job failed (`ENOMEM`).
    NoMemory,
    /// A job with a cost of zero credits was prepared (`EINVAL`).
    ZeroCost,
    /// A job costs more credits than the ring can ever hold (`EINVAL`).
    CostTooHigh {
        /// The credits the job asked for.
        cost: u32,
        /// The total credit capacity of the queue.
        capacity: u32,
    },
    /// More dependencies were added than were prepared for (`ENOSPC`).
    TooManyDependencies,
    /// Every job slot of the queue is occupied (`EBUSY`); retry once jobs complete.
    QueueFull,
    /// The queue has been killed and accepts no more jobs (`ENODEV`).
    Killed,
    /// The configuration is unusable, e.g. a capacity of zero credits (`EINVAL`).
    InvalidConfig,
}

impl Error {
    /// Returns the negative Linux errno value matching this error.
    pub fn to_errno(self) -> i32 {
        match self {
            Error::NoMemory => ENOMEM,
            Error::ZeroCost | Error::CostTooHigh { .. } | Error::InvalidConfig => EINVAL,
            Error::TooManyDependencies => ENOSPC,
            Error::QueueFull => EBUSY,
            Error::Killed => ENODEV,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoMemory => f.write_str("out of memory while preparing a job"),
            Error::ZeroCost => f.write_str("a job must cost at least one credit"),
            Error::CostTooHigh { cost, capacity } => write!(
                f,
                "job costs {cost} credits but the queue only has {capacity}"
            ),
            Error::TooManyDependencies => {
                f.write_str("more dependencies than slots prepared for the job")
            }
            Error::QueueFull => f.write_str("all job slots of the queue are in use"),
            Error::Killed => f.write_str("the queue has been killed"),
            Error::InvalidConfig => f.write_str("invalid queue configuration"),
        }
    }
}

impl core::error::Error for Error {}

/// The error a fence signals with: a negative errno in `-4095..=-1`.
///
/// # Examples
///
/// ```
/// use jobqueue::FenceError;
///
/// let e = FenceError::new(-5).unwrap();
/// assert_eq!(e.to_errno(), -5);
/// assert_eq!(FenceError::new(0), None);
/// assert_eq!(FenceError::TIMED_OUT.to_errno(), -110);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FenceError(NonZeroI32);

impl FenceError {
    /// The job was canceled because its queue was killed or dropped (`ECANCELED`).
    pub const CANCELED: FenceError = FenceError::from_const(ECANCELED);
    /// The job exceeded its time budget (`ETIMEDOUT`).
    pub const TIMED_OUT: FenceError = FenceError::from_const(ETIMEDOUT);
    /// The job was invalid for the queue it was committed to (`EINVAL`).
    pub const INVALID: FenceError = FenceError::from_const(EINVAL);
    /// The hardware reported a fault while running the job (`EIO`).
    pub const IO: FenceError = FenceError::from_const(EIO);

    const fn from_const(errno: i32) -> Self {
        match Self::new(errno) {
            Some(e) => e,
            None => panic!("not a negative errno"),
        }
    }

    /// Builds a fence error from a negative errno; `None` unless `errno` is in `-4095..=-1`.
    pub const fn new(errno: i32) -> Option<Self> {
        if errno < 0 && errno >= -4095 {
            match NonZeroI32::new(errno) {
                Some(v) => Some(FenceError(v)),
                None => None,
            }
        } else {
            None
        }
    }

    /// Returns the negative errno value.
    pub const fn to_errno(self) -> i32 {
        self.0.get()
    }
}

impl From<Error> for FenceError {
    fn from(e: Error) -> Self {
        FenceError::from_const(e.to_errno())
    }
}

impl fmt::Display for FenceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fence signalled with errno {}", self.0)
    }
}

impl core::error::Error for FenceError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping() {
        assert_eq!(Error::ZeroCost.to_errno(), EINVAL);
        assert_eq!(
            Error::CostTooHigh {
                cost: 5,
                capacity: 4
            }
            .to_errno(),
            EINVAL
        );
        assert_eq!(Error::TooManyDependencies.to_errno(), ENOSPC);
        assert_eq!(Error::Killed.to_errno(), ENODEV);
        assert_eq!(FenceError::from(Error::NoMemory).to_errno(), ENOMEM);
        assert_eq!(FenceError::CANCELED.to_errno(), ECANCELED);
    }

    #[test]
    fn fence_error_range() {
        assert!(FenceError::new(1).is_none());
        assert!(FenceError::new(-4096).is_none());
        assert!(FenceError::new(-4095).is_some());
        assert!(FenceError::new(i32::MIN).is_none());
    }
}
