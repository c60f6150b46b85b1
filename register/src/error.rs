// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Errors of register and I/O accesses.

use core::fmt;

/// What went wrong in a fallible register or I/O operation.
///
/// Every variant maps to a negative Linux errno through [`Error::to_errno`], so that a kernel
/// adapter (and a driver that reports errors to user space) gets the code the C drivers use.
///
/// # Examples
///
/// ```
/// use register::Error;
///
/// assert_eq!(Error::OutOfBounds.to_errno(), -22);
/// assert_eq!(Error::ValueTooWide.to_errno(), -75);
/// assert_eq!(Error::TimedOut.to_errno(), -110);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// An access would reach past the end of the I/O region (`EINVAL`).
    OutOfBounds,
    /// An access is not aligned to its own width (`EINVAL`).
    Misaligned,
    /// An index given at run time is past the end of a register array (`EINVAL`).
    IndexOutOfRange,
    /// A value does not fit in the bits of the field it is written to (`EOVERFLOW`).
    ValueTooWide,
    /// A polled condition did not become true in time (`ETIMEDOUT`).
    TimedOut,
}

/// `EINVAL`, negated.
const EINVAL: i32 = -22;
/// `EOVERFLOW`, negated.
const EOVERFLOW: i32 = -75;
/// `ETIMEDOUT`, negated.
const ETIMEDOUT: i32 = -110;

impl Error {
    /// Returns the negative Linux errno corresponding to this error.
    pub const fn to_errno(self) -> i32 {
        match self {
            Error::OutOfBounds | Error::Misaligned | Error::IndexOutOfRange => EINVAL,
            Error::ValueTooWide => EOVERFLOW,
            Error::TimedOut => ETIMEDOUT,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = match self {
            Error::OutOfBounds => "I/O access outside of the region",
            Error::Misaligned => "I/O access not aligned to its width",
            Error::IndexOutOfRange => "register array index out of range",
            Error::ValueTooWide => "value does not fit in the register field",
            Error::TimedOut => "timed out while polling",
        };
        f.write_str(msg)
    }
}

impl core::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use std::string::ToString;

    #[test]
    fn errno_and_display() {
        let all = [
            (Error::OutOfBounds, -22),
            (Error::Misaligned, -22),
            (Error::IndexOutOfRange, -22),
            (Error::ValueTooWide, -75),
            (Error::TimedOut, -110),
        ];
        for (e, errno) in all {
            assert_eq!(e.to_errno(), errno);
            assert!(!e.to_string().is_empty());
        }
    }
}

/// A field value that no variant of an enum declared with
/// [`bounded_enum!`](crate::bounded_enum!) names: the error of its `TryFrom`, holding the raw
/// value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct UnknownValue<T>(pub T);

impl<T> UnknownValue<T> {
    /// Returns the Linux errno value (negative): `-EINVAL`.
    pub const fn to_errno(&self) -> i32 {
        EINVAL
    }
}

impl<T: fmt::LowerHex> fmt::Display for UnknownValue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown field value {:#x}", self.0)
    }
}
