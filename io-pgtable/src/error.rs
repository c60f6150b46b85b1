// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Errors of the page-table operations.
//!
//! Every failure of this crate is one [`Error`] value. [`Error::to_errno`] gives the negative
//! Linux errno a kernel caller would return for it (the values `io-pgtable-arm.c` returns where
//! it has an equivalent).

use core::fmt;

/// What went wrong in a page-table operation.
///
/// # Examples
///
/// ```
/// use io_pgtable::Error;
///
/// assert_eq!(Error::Exists.to_errno(), -17);
/// assert_eq!(Error::NoMemory.to_errno(), -12);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Error {
    /// The configuration cannot be used with the format (page sizes, address sizes, quirks).
    InvalidConfig,
    /// The page size is zero, not a power of two in the table's `pgsize_bitmap`, or the
    /// page count is zero where a non-empty request is required.
    InvalidPageSize,
    /// The protection carries neither `READ` nor `WRITE`.
    InvalidProt,
    /// The IOVA or the physical address is not aligned to the page size.
    Misaligned,
    /// The IOVA range does not fit in `ias` bits, or the physical range in `oas` bits.
    OutOfRange,
    /// Part of the range is already mapped: unmap it first.
    Exists,
    /// The request would unmap only part of a larger block mapping; blocks are never split.
    PartialBlock,
    /// The table allocator had no memory for a new table.
    NoMemory,
    /// The register values asked for do not exist for this configuration (for example the
    /// Mali AArch64 address-space registers for a 16K granule).
    Unsupported,
}

impl Error {
    /// The negative Linux errno that corresponds to this error.
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::Error;
    ///
    /// assert_eq!(Error::OutOfRange.to_errno(), -34);
    /// assert_eq!(Error::Misaligned.to_errno(), -22);
    /// ```
    pub fn to_errno(self) -> i32 {
        match self {
            Error::InvalidConfig
            | Error::InvalidPageSize
            | Error::InvalidProt
            | Error::Misaligned
            | Error::PartialBlock
            | Error::Unsupported => -22,
            Error::OutOfRange => -34,
            Error::Exists => -17,
            Error::NoMemory => -12,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = match self {
            Error::InvalidConfig => "page-table configuration not supported by the format",
            Error::InvalidPageSize => "page size or page count not supported",
            Error::InvalidProt => "protection must include READ or WRITE",
            Error::Misaligned => "address not aligned to the page size",
            Error::OutOfRange => "address range exceeds the input or output address size",
            Error::Exists => "range already mapped",
            Error::PartialBlock => "cannot unmap part of a block mapping",
            Error::NoMemory => "out of page-table memory",
            Error::Unsupported => "register values not defined for this configuration",
        };
        f.write_str(msg)
    }
}

impl core::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_values() {
        assert_eq!(Error::InvalidConfig.to_errno(), -22);
        assert_eq!(Error::InvalidPageSize.to_errno(), -22);
        assert_eq!(Error::InvalidProt.to_errno(), -22);
        assert_eq!(Error::PartialBlock.to_errno(), -22);
        assert_eq!(Error::Unsupported.to_errno(), -22);
        assert_eq!(Error::OutOfRange.to_errno(), -34);
        assert_eq!(Error::Exists.to_errno(), -17);
        assert_eq!(Error::NoMemory.to_errno(), -12);
    }

    #[test]
    fn display_is_nonempty() {
        extern crate std;
        use std::string::ToString;
        assert_eq!(Error::Exists.to_string(), "range already mapped");
    }
}
