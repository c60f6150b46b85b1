// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Table formats.
//!
//! Two descriptor formats are supported, chosen by a type parameter of
//! [`PageTable`](crate::PageTable):
//!
//! - [`Arm64LpaeS1`] (Linux `ARM_64_LPAE_S1`): the AArch64 stage-1 VMSA format, used by SMMUs
//!   and by Mali CSF GPUs (panthor, Tyr) in their AArch64 address mode. 4K, 16K and 64K
//!   granules, 1 to 4 levels chosen from `ias`.
//! - [`ArmMaliLpae`] (Linux `ARM_MALI_LPAE`): the "LPAE" mode of older Mali (Midgard and early
//!   Bifrost, panfrost): 4K granule only, always four levels, leaves with block type at every
//!   level, stage-2-like read/write permission bits and no access flag.
//!
//! The register values a device needs differ per format, so they are methods of
//! `PageTable<Arm64LpaeS1, ..>` and `PageTable<ArmMaliLpae, ..>` only: asking a Mali LPAE
//! table for a TCR does not compile.

use crate::config::{Config, Geometry, SZ_1G, SZ_2M, SZ_4K};
use crate::prot::Quirks;
use crate::Error;

mod sealed {
    pub trait Sealed {}
}

/// A page-table format. Sealed: implemented by [`Arm64LpaeS1`] and [`ArmMaliLpae`].
pub trait Format: sealed::Sealed + 'static {
    /// Whether this is the Mali LPAE descriptor format.
    const MALI: bool;
    /// The Linux name of the format.
    const NAME: &'static str;

    /// Checks and restricts `cfg` as the format requires and computes the table geometry.
    #[doc(hidden)]
    fn prepare(cfg: &mut Config) -> Result<Geometry, Error>;
}

/// The AArch64 stage-1 format (`ARM_64_LPAE_S1`).
#[derive(Debug)]
pub enum Arm64LpaeS1 {}

/// The Mali LPAE format (`ARM_MALI_LPAE`).
#[derive(Debug)]
pub enum ArmMaliLpae {}

impl sealed::Sealed for Arm64LpaeS1 {}
impl sealed::Sealed for ArmMaliLpae {}

impl Format for Arm64LpaeS1 {
    const MALI: bool = false;
    const NAME: &'static str = "ARM_64_LPAE_S1";

    fn prepare(cfg: &mut Config) -> Result<Geometry, Error> {
        if cfg.quirks.bits() & !Quirks::all().bits() != 0 {
            return Err(Error::InvalidConfig);
        }
        if cfg.ias > 52 || cfg.oas > 52 {
            return Err(Error::InvalidConfig);
        }
        cfg.restrict_pgsizes();
        let geo = Geometry::new(cfg)?;
        if cfg.coherent_walk && cfg.quirks.contains(Quirks::ARM_OUTER_WBWA) {
            return Err(Error::InvalidConfig);
        }
        if !matches!(cfg.oas, 32 | 36 | 40 | 42 | 44 | 48 | 52) {
            return Err(Error::InvalidConfig);
        }
        Ok(geo)
    }
}

impl Format for ArmMaliLpae {
    const MALI: bool = true;
    const NAME: &'static str = "ARM_MALI_LPAE";

    fn prepare(cfg: &mut Config) -> Result<Geometry, Error> {
        if !cfg.quirks.is_empty() || cfg.ias > 48 || cfg.oas > 40 {
            return Err(Error::InvalidConfig);
        }
        cfg.pgsize_bitmap &= SZ_4K | SZ_2M | SZ_1G;
        cfg.restrict_pgsizes();
        let mut geo = Geometry::new(cfg)?;
        geo.force_level0();
        Ok(geo)
    }
}
