// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Errors of the simulator's host-side API.
//!
//! Register accesses never fail: like the hardware, the simulated GPU answers every MMIO
//! access and records the ones a real bus would reject as [`BusError`](super::BusError)s.
//! The errors here are for the *test and backend* API around it: memory allocation, physical
//! memory helpers and configuration.

use core::fmt;

use super::mem::PhysAddr;

/// An error of the simulator's host API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimError {
    /// The memory limit is reached (or the host allocator refused): nothing was allocated.
    OutOfMemory,
    /// A request for zero pages, or for more pages than the physical window can hold.
    InvalidSize,
    /// The physical range is not (entirely) inside one live allocation.
    BadAddress(PhysAddr),
    /// The address is not aligned as the access needs.
    Misaligned(PhysAddr),
    /// `free` (or `detach`) was given an address that is not the start of a live allocation
    /// of that kind.
    NotAllocated(PhysAddr),
    /// Memory attached at this address would overlap a live allocation.
    Occupied(PhysAddr),
    /// An address-space number the GPU does not have.
    NoSuchAddressSpace(usize),
}

impl SimError {
    /// The negative Linux errno closest to this error.
    ///
    /// # Examples
    ///
    /// ```
    /// use mali_sim::SimError;
    ///
    /// assert_eq!(SimError::OutOfMemory.to_errno(), -12);
    /// ```
    pub fn to_errno(self) -> i32 {
        match self {
            SimError::OutOfMemory => -12,
            SimError::InvalidSize => -22,
            SimError::BadAddress(_) => -14,
            SimError::Misaligned(_) => -22,
            SimError::NotAllocated(_) => -2,
            SimError::Occupied(_) => -17,
            SimError::NoSuchAddressSpace(_) => -19,
        }
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::OutOfMemory => write!(f, "simulated memory exhausted"),
            SimError::InvalidSize => write!(f, "invalid allocation size"),
            SimError::BadAddress(pa) => write!(f, "physical range at {pa} is not allocated"),
            SimError::Misaligned(pa) => write!(f, "physical address {pa} is misaligned"),
            SimError::NotAllocated(pa) => write!(f, "{pa} is not the start of an allocation"),
            SimError::Occupied(pa) => write!(f, "physical range at {pa} is already in use"),
            SimError::NoSuchAddressSpace(n) => write!(f, "the GPU has no address space {n}"),
        }
    }
}

impl core::error::Error for SimError {}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn errno_and_display() {
        let all = [
            (SimError::OutOfMemory, -12),
            (SimError::InvalidSize, -22),
            (SimError::BadAddress(PhysAddr(0x1000)), -14),
            (SimError::Misaligned(PhysAddr(0x1001)), -22),
            (SimError::NotAllocated(PhysAddr(0x2000)), -2),
            (SimError::NoSuchAddressSpace(9), -19),
        ];
        for (e, errno) in all {
            assert_eq!(e.to_errno(), errno);
            assert!(!e.to_string().is_empty());
        }
        assert!(SimError::BadAddress(PhysAddr(0x1000))
            .to_string()
            .contains("0x1000"));
    }
}
