// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Register values for the translating device.
//!
//! Once a table exists, the device must be told where it is and how to walk it:
//!
//! - An SMMU or CPU-style stage-1 walker takes a base (`TTBR`), a control register (`TCR`:
//!   input size, granule, walk cacheability and shareability, output size) and the memory
//!   attributes the `AttrIndx` of each leaf selects (`MAIR`). See [`S1Regs`].
//! - A Mali GPU has one set per address space: `AS_TRANSTAB` (base), `AS_MEMATTR` (eight
//!   attribute bytes in Mali's own encoding) and `AS_TRANSCFG` (address mode, input size, walk
//!   attributes). For CSF GPUs panthor derives them from the stage-1 values
//!   ([`PageTable::mali_as_regs`]); the older LPAE mode has its own
//!   ([`PageTable::mali_lpae_regs`]). See [`MaliAsRegs`].

use crate::config::{SZ_16K, SZ_4K, SZ_64K};
use crate::flush::FlushOps;
use crate::format::{Arm64LpaeS1, ArmMaliLpae};
use crate::memory::TableAlloc;
use crate::prot::Quirks;
use crate::{Error, PageTable};

/// TCR shareability: outer shareable.
pub const TCR_SH_OS: u8 = 2;
/// TCR shareability: inner shareable.
pub const TCR_SH_IS: u8 = 3;
/// TCR cacheability: non-cacheable.
pub const TCR_RGN_NC: u8 = 0;
/// TCR cacheability: write-back read/write-allocate.
pub const TCR_RGN_WBWA: u8 = 1;

/// MAIR attribute: device nGnRE.
pub const MAIR_ATTR_DEVICE: u8 = 0x04;
/// MAIR attribute: normal non-cacheable.
pub const MAIR_ATTR_NC: u8 = 0x44;
/// MAIR attribute: normal inner non-cacheable, outer write-back RWA.
pub const MAIR_ATTR_INC_OWBRWA: u8 = 0xf4;
/// MAIR attribute: normal write-back RWA.
pub const MAIR_ATTR_WBRWA: u8 = 0xff;

/// Mali LPAE `TRANSTAB`: table walk address mode.
pub const MALI_TRANSTAB_ADRMODE_TABLE: u64 = 3;
/// Mali LPAE `TRANSTAB`: walk reads are inner cacheable.
pub const MALI_TRANSTAB_READ_INNER: u64 = 1 << 2;
/// Mali LPAE `TRANSTAB`: walks are outer shareable.
pub const MALI_TRANSTAB_SHARE_OUTER: u64 = 1 << 4;
/// Mali LPAE `MEMATTR` byte: implementation-defined caching.
pub const MALI_MEMATTR_IMP_DEF: u64 = 0x88;
/// Mali LPAE `MEMATTR` byte: write-allocate.
pub const MALI_MEMATTR_WRITE_ALLOC: u64 = 0x8d;

/// `AS_TRANSCFG.ADRMODE`: legacy (LPAE) mode.
pub const TRANSCFG_ADRMODE_LEGACY: u64 = 0;
/// `AS_TRANSCFG.ADRMODE`: AArch64 with 4K granule.
pub const TRANSCFG_ADRMODE_AARCH64_4K: u64 = 6;
/// `AS_TRANSCFG.ADRMODE`: AArch64 with 64K granule.
pub const TRANSCFG_ADRMODE_AARCH64_64K: u64 = 8;
/// Shift of `AS_TRANSCFG.INA_BITS` (holds `55 - va_bits`).
pub const TRANSCFG_INA_BITS_SHIFT: u32 = 6;
/// `AS_TRANSCFG`: table walks are write-back cacheable.
pub const TRANSCFG_PTW_MEMATTR_WB: u64 = 2 << 24;
/// `AS_TRANSCFG`: table walks are outer shareable.
pub const TRANSCFG_PTW_SH_OS: u64 = 2 << 28;
/// `AS_TRANSCFG`: table walks read-allocate.
pub const TRANSCFG_PTW_RA: u64 = 1 << 30;

/// The stage-1 translation control fields (Linux's `arm_lpae_s1_cfg.tcr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tcr {
    /// Output size code (`IPS`/`PS`): 0 = 32 bits ... 5 = 48 bits, 6 = 52 bits.
    pub ips: u8,
    /// Granule code, in the `TG0` encoding (or `TG1` with the TTBR1 quirk).
    pub tg: u8,
    /// Shareability of table walks.
    pub sh: u8,
    /// Outer cacheability of table walks.
    pub orgn: u8,
    /// Inner cacheability of table walks.
    pub irgn: u8,
    /// `64 - ias`.
    pub tsz: u8,
}

impl Tcr {
    /// Packs the fields into an AArch64 `TCR_EL1`-layout value: the `TTBR0` fields with
    /// `EPD1` set, or with `ttbr1` the `TTBR1` fields with `EPD0` set; `IPS` at 34:32.
    pub const fn to_tcr_el1(&self, ttbr1: bool) -> u64 {
        let fields = (self.tsz as u64 & 0x3f)
            | ((self.irgn as u64 & 3) << 8)
            | ((self.orgn as u64 & 3) << 10)
            | ((self.sh as u64 & 3) << 12)
            | ((self.tg as u64 & 3) << 14);
        let ips = (self.ips as u64 & 7) << 32;
        if ttbr1 {
            (fields << 16) | (1 << 7) | ips
        } else {
            fields | (1 << 23) | ips
        }
    }
}

/// Stage-1 register values (Linux's `arm_lpae_s1_cfg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct S1Regs {
    /// Translation table base: device address of the start-level table.
    pub ttbr: u64,
    /// Translation control fields.
    pub tcr: Tcr,
    /// Memory attribute indirection: attribute byte `i` is selected by `AttrIndx == i`.
    pub mair: u64,
}

/// Mali address-space register values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaliAsRegs {
    /// `AS_TRANSTAB`.
    pub transtab: u64,
    /// `AS_MEMATTR`.
    pub memattr: u64,
    /// `AS_TRANSCFG`.
    pub transcfg: u64,
}

/// The stage-1 MAIR value: index 0 non-cacheable, 1 write-back, 2 device, 3 inner
/// non-cacheable outer write-back.
pub const S1_MAIR: u64 = (MAIR_ATTR_NC as u64)
    | ((MAIR_ATTR_WBRWA as u64) << 8)
    | ((MAIR_ATTR_DEVICE as u64) << 16)
    | ((MAIR_ATTR_INC_OWBRWA as u64) << 24);

/// Converts a MAIR value to Mali's `AS_MEMATTR` encoding, as panthor does: only attributes
/// that are write-back both inside and outside stay cacheable (keeping their allocation
/// hints); everything else, device memory included, becomes non-cacheable. Cacheable
/// attributes use the CPU's inner shareability domain when the GPU is `coherent`, and the
/// GPU-internal one otherwise.
///
/// # Examples
///
/// ```
/// use io_pgtable::regs::{mair_to_memattr, S1_MAIR};
///
/// assert_eq!(mair_to_memattr(S1_MAIR, false), 0x4c4c_4c4c_8c4c_8f4c);
/// assert_eq!(mair_to_memattr(S1_MAIR, true), 0x4c4c_4c4c_9c4c_9f4c);
/// ```
pub const fn mair_to_memattr(mair: u64, coherent: bool) -> u64 {
    const NC: u64 = 1 << 6;
    const WB: u64 = 2 << 6;
    const ALLOC_EXPLICIT: u64 = 3 << 2;
    const SH_CPU_INNER: u64 = 1 << 4;
    let mut out = 0;
    let mut i = 0;
    while i < 8 {
        let attr = (mair >> (8 * i)) & 0xff;
        let (outer, inner) = (attr >> 4, attr & 0xf);
        let byte = if outer & 3 == 0 || outer & 4 == 0 || inner & 4 == 0 {
            NC | ALLOC_EXPLICIT
        } else {
            let mut b = WB | ALLOC_EXPLICIT | (inner & 1) | (inner & 2);
            if coherent {
                b |= SH_CPU_INNER;
            }
            b
        };
        out |= byte << (8 * i);
        i += 1;
    }
    out
}

impl<A: TableAlloc, T: FlushOps> PageTable<Arm64LpaeS1, A, T> {
    /// The stage-1 register values, as `arm_64_lpae_alloc_pgtable_s1()` computes them.
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::{host::{Granule, HostAllocator}, Arm64LpaeS1, Config, NoFlush, PageTable, SZ_2M, SZ_4K};
    ///
    /// let mem = HostAllocator::new(Granule::Size4K, 1);
    /// let pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 48, 40).coherent(true), &mem, NoFlush)?;
    /// let regs = pt.s1_regs();
    /// assert_eq!(regs.ttbr, pt.root_dev_addr());
    /// assert_eq!((regs.tcr.tsz, regs.tcr.ips, regs.tcr.tg, regs.tcr.sh), (16, 2, 0, 3));
    /// assert_eq!(regs.mair, 0xf404_ff44);
    /// # Ok::<(), io_pgtable::Error>(())
    /// ```
    pub fn s1_regs(&self) -> S1Regs {
        let cfg = self.cfg();
        let (sh, irgn, orgn) = if cfg.coherent_walk {
            (TCR_SH_IS, TCR_RGN_WBWA, TCR_RGN_WBWA)
        } else if cfg.quirks.contains(Quirks::ARM_OUTER_WBWA) {
            (TCR_SH_OS, TCR_RGN_NC, TCR_RGN_WBWA)
        } else {
            (TCR_SH_OS, TCR_RGN_NC, TCR_RGN_NC)
        };
        let ttbr1 = cfg.quirks.contains(Quirks::ARM_TTBR1);
        let tg = match (self.geometry().granule(), ttbr1) {
            (SZ_4K, false) => 0,
            (SZ_64K, false) => 1,
            (SZ_16K, false) => 2,
            (SZ_16K, true) => 1,
            (SZ_4K, true) => 2,
            _ => 3,
        };
        // The format only accepts these output sizes.
        let ips = match cfg.oas {
            32 => 0,
            36 => 1,
            40 => 2,
            42 => 3,
            44 => 4,
            48 => 5,
            _ => 6,
        };
        S1Regs {
            ttbr: self.root_dev_addr(),
            tcr: Tcr {
                ips,
                tg,
                sh,
                orgn,
                irgn,
                tsz: (64 - cfg.ias) as u8,
            },
            mair: S1_MAIR,
        }
    }

    /// The Mali CSF address-space registers for this table, as panthor computes them:
    /// `TRANSTAB` is the TTBR, `MEMATTR` the MAIR converted by [`mair_to_memattr`], and
    /// `TRANSCFG` selects the AArch64 4K mode with `INA_BITS = 55 - ias`, write-back
    /// read-allocating walks, outer shareable when the walk is coherent.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] unless the granule is 4K (the only AArch64 mode panthor uses),
    /// or with the TTBR1 quirk.
    pub fn mali_as_regs(&self) -> Result<MaliAsRegs, Error> {
        let cfg = self.cfg();
        if self.geometry().granule() != SZ_4K || cfg.quirks.contains(Quirks::ARM_TTBR1) {
            return Err(Error::Unsupported);
        }
        let mut transcfg = TRANSCFG_PTW_MEMATTR_WB
            | TRANSCFG_PTW_RA
            | TRANSCFG_ADRMODE_AARCH64_4K
            | (u64::from(55 - cfg.ias) << TRANSCFG_INA_BITS_SHIFT);
        if cfg.coherent_walk {
            transcfg |= TRANSCFG_PTW_SH_OS;
        }
        Ok(MaliAsRegs {
            transtab: self.root_dev_addr(),
            memattr: mair_to_memattr(S1_MAIR, cfg.coherent_walk),
            transcfg,
        })
    }
}

impl<A: TableAlloc, T: FlushOps> PageTable<ArmMaliLpae, A, T> {
    /// The Mali LPAE address-space registers, as `arm_mali_lpae_alloc_pgtable()` and
    /// panfrost compute them (`TRANSCFG` in legacy mode).
    ///
    /// # Examples
    ///
    /// ```
    /// use io_pgtable::{host::{Granule, HostAllocator}, ArmMaliLpae, Config, NoFlush, PageTable, SZ_4K};
    ///
    /// let mem = HostAllocator::new(Granule::Size4K, 1);
    /// let pt = PageTable::<ArmMaliLpae, _>::new(Config::new(SZ_4K, 48, 40), &mem, NoFlush)?;
    /// let regs = pt.mali_lpae_regs();
    /// assert_eq!(regs.transtab, pt.root_dev_addr() | 0b111);
    /// assert_eq!(regs.memattr, 0x88_8d_88);
    /// # Ok::<(), io_pgtable::Error>(())
    /// ```
    pub fn mali_lpae_regs(&self) -> MaliAsRegs {
        let mut transtab =
            self.root_dev_addr() | MALI_TRANSTAB_READ_INNER | MALI_TRANSTAB_ADRMODE_TABLE;
        if self.cfg().coherent_walk {
            transtab |= MALI_TRANSTAB_SHARE_OUTER;
        }
        MaliAsRegs {
            transtab,
            memattr: MALI_MEMATTR_IMP_DEF
                | (MALI_MEMATTR_WRITE_ALLOC << 8)
                | (MALI_MEMATTR_IMP_DEF << 16),
            transcfg: TRANSCFG_ADRMODE_LEGACY,
        }
    }
}
