// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Protection flags and configuration quirks.
//!
//! An IOMMU mapping carries access permissions and a memory type. Drivers describe them in the
//! format-independent [`Prot`] flags (the `IOMMU_*` values of Linux, bit for bit), and the
//! page-table format turns them into descriptor bits: access-permission bits, the `AttrIndx`
//! index into the MAIR, shareability and execute-never.
//!
//! [`Quirks`] adjust the format for particular hardware (the `IO_PGTABLE_QUIRK_*` values of
//! Linux, bit for bit, restricted to those the LPAE stage-1 format accepts).

use bitflags::bitflags;

bitflags! {
    /// Access and memory-type flags of a mapping.
    ///
    /// The bit values are those of Linux's `IOMMU_READ` ... `IOMMU_PRIV`, so a kernel caller
    /// can convert with [`Prot::from_bits_truncate`].
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::Prot;
    ///
    /// let rw = Prot::READ | Prot::WRITE | Prot::CACHE;
    /// assert_eq!(rw.bits(), 0b111);
    /// ```
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct Prot: u32 {
        /// The device may read.
        const READ = 1 << 0;
        /// The device may write.
        const WRITE = 1 << 1;
        /// Normal write-back cacheable memory, coherent with the CPU caches.
        const CACHE = 1 << 2;
        /// The device may not execute from the mapping.
        const NOEXEC = 1 << 3;
        /// Device (MMIO) memory, for example an interrupt doorbell.
        const MMIO = 1 << 4;
        /// Privileged-only mapping (no unprivileged access in stage 1).
        const PRIV = 1 << 5;
    }
}

bitflags! {
    /// Hardware quirks of a page-table configuration.
    ///
    /// Bit values are those of Linux's `IO_PGTABLE_QUIRK_*`. `ARM_64_LPAE_S1` accepts all of
    /// these; `ARM_MALI_LPAE` accepts none.
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::Quirks;
    ///
    /// assert_eq!(Quirks::NO_WARN.bits(), 1 << 9);
    /// ```
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct Quirks: u32 {
        /// Set the NS bit in leaf entries and NSTable in table entries.
        const ARM_NS = 1 << 0;
        /// The table translates the upper half of a split address space (TTBR1): IOVAs have
        /// all bits above `ias` set.
        const ARM_TTBR1 = 1 << 5;
        /// Use write-back write-allocate outer cacheability for the walker even though it is
        /// not coherent.
        const ARM_OUTER_WBWA = 1 << 6;
        /// Hardware dirty tracking: writable leaves get the DBM bit.
        const ARM_HD = 1 << 7;
        /// Do not warn about conflicting mappings (this crate never warns; accepted for
        /// compatibility).
        const NO_WARN = 1 << 9;
    }
}
