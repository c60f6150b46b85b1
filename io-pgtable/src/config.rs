// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Page-table configuration and the geometry derived from it.
//!
//! An LPAE table translates an `ias`-bit input address (IOVA) into an `oas`-bit output
//! address in up to four levels, numbered 0 to 3. The translation *granule* (4K, 16K or 64K)
//! is the size of a table and of the smallest page; each level resolves `granule_shift - 3`
//! bits of the address. The first level in use is the *start level*: its table (the PGD) may
//! be smaller than a granule when `ias` leaves fewer bits for it. A leaf can sit at level 3
//! (a page) or higher (a block, e.g. 2M and 1G with a 4K granule).
//!
//! The caller proposes a [`Config`]; the format restricts it (as `io-pgtable-arm.c` does:
//! page sizes limited to those of one granule, address sizes capped) and the effective
//! configuration is what [`PageTable::cfg`](crate::PageTable::cfg) returns.

use crate::prot::Quirks;
use crate::Error;

/// 4 KiB.
pub const SZ_4K: u64 = 1 << 12;
/// 16 KiB.
pub const SZ_16K: u64 = 1 << 14;
/// 64 KiB.
pub const SZ_64K: u64 = 1 << 16;
/// 2 MiB.
pub const SZ_2M: u64 = 1 << 21;
/// 32 MiB.
pub const SZ_32M: u64 = 1 << 25;
/// 512 MiB.
pub const SZ_512M: u64 = 1 << 29;
/// 1 GiB.
pub const SZ_1G: u64 = 1 << 30;
/// 4 TiB (level-1 block of the 64K granule with a 52-bit output).
pub const SZ_4T: u64 = 1 << 42;

/// The CPU page size the granule choice prefers, as the C code prefers `PAGE_SIZE`.
pub const CPU_PAGE_SIZE: u64 = SZ_4K;

/// Deepest level number.
pub(crate) const MAX_LEVELS: u32 = 4;

/// The configuration a page table is created with.
///
/// # Examples
///
/// ```
/// use io_pgtable::{Config, SZ_2M, SZ_4K};
///
/// // What panthor asks for: 4K pages and 2M blocks, 48-bit VA, 40-bit PA.
/// let cfg = Config::new(SZ_4K | SZ_2M, 48, 40);
/// assert!(!cfg.coherent_walk);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Hardware quirks.
    pub quirks: Quirks,
    /// Supported page sizes, one bit per power of two.
    pub pgsize_bitmap: u64,
    /// Input (IOVA) address size in bits.
    pub ias: u32,
    /// Output (physical) address size in bits.
    pub oas: u32,
    /// Whether the walker snoops the CPU caches. When it does not, every PTE write is made
    /// visible through [`TableAlloc::sync_for_device`](crate::TableAlloc::sync_for_device).
    pub coherent_walk: bool,
}

/// Prints a `u64` in hex, an `Option<u64>` as `Some(0x..)`/`None` (`Debug` of addresses,
/// sizes, masks and descriptors).
pub(crate) struct Hex<T>(pub(crate) T);

impl core::fmt::Debug for Hex<u64> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        write!(f, "{:#x}", self.0)
    }
}

impl core::fmt::Debug for Hex<Option<u64>> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        match self.0 {
            Some(v) => write!(f, "Some({v:#x})"),
            None => f.write_str("None"),
        }
    }
}

/// The page-size bitmap in hex.
///
/// ```
/// use io_pgtable::{Config, SZ_2M, SZ_4K};
/// let cfg = Config::new(SZ_4K | SZ_2M, 48, 40);
/// assert!(format!("{cfg:?}").contains("pgsize_bitmap: 0x201000"));
/// ```
impl core::fmt::Debug for Config {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        f.debug_struct("Config")
            .field("quirks", &self.quirks)
            .field("pgsize_bitmap", &Hex(self.pgsize_bitmap))
            .field("ias", &self.ias)
            .field("oas", &self.oas)
            .field("coherent_walk", &self.coherent_walk)
            .finish()
    }
}

impl Config {
    /// A configuration without quirks and with a non-coherent walker.
    pub const fn new(pgsize_bitmap: u64, ias: u32, oas: u32) -> Self {
        Config {
            quirks: Quirks::empty(),
            pgsize_bitmap,
            ias,
            oas,
            coherent_walk: false,
        }
    }

    /// The same configuration with `coherent_walk` set to `coherent`.
    pub const fn coherent(mut self, coherent: bool) -> Self {
        self.coherent_walk = coherent;
        self
    }

    /// The same configuration with `quirks`.
    pub const fn with_quirks(mut self, quirks: Quirks) -> Self {
        self.quirks = quirks;
        self
    }

    /// Restricts the page sizes to one granule's, and caps the address sizes, exactly as the
    /// LPAE code does before it sizes a table.
    pub(crate) fn restrict_pgsizes(&mut self) {
        let below_page = self.pgsize_bitmap & (CPU_PAGE_SIZE - 1);
        let above_page = self.pgsize_bitmap & !(CPU_PAGE_SIZE - 1);
        let granule = if self.pgsize_bitmap & CPU_PAGE_SIZE != 0 {
            CPU_PAGE_SIZE
        } else if below_page != 0 {
            1 << (63 - below_page.leading_zeros())
        } else if above_page != 0 {
            1 << above_page.trailing_zeros()
        } else {
            0
        };
        let mut max_bits = 48;
        let sizes = match granule {
            SZ_4K => SZ_4K | SZ_2M | SZ_1G,
            SZ_16K => SZ_16K | SZ_32M,
            SZ_64K => {
                max_bits = 52;
                let mut s = SZ_64K | SZ_512M;
                if self.oas > 48 {
                    s |= SZ_4T;
                }
                s
            }
            _ => 0,
        };
        self.pgsize_bitmap &= sizes;
        self.ias = self.ias.min(max_bits);
        self.oas = self.oas.min(max_bits);
    }
}

/// The shape of a table: granule, levels and the size of the start-level table.
///
/// Every map and unmap asks the geometry, at each level of its walk, where the level's index
/// lies in the IOVA and which level a page size belongs to. These answers are computed once,
/// when the geometry is made, and kept as small tables indexed by level (or by log2 of a page
/// size), so that a walk step costs a load, a shift and a mask rather than a multiplication
/// and a comparison with the start level.
///
/// # Invariants
///
/// `granule_shift` is 12, 14 or 16; `start_level < 4`; `1 <= pgd_bits <= bits_per_level`
/// except for the Mali format with a forced level-0 start, where `pgd_bits` may be 0.
/// `shift`, `index_mask`, `entries` and `level_of_shift` hold what `Geometry::tables`
/// computes from the four fields above.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    granule_shift: u32,
    bits_per_level: u32,
    start_level: u32,
    pgd_bits: u32,
    /// `level_shift(l)` for every level `l`.
    shift: [u8; MAX_LEVELS as usize],
    /// The mask of a table index at each level (0 above the start level).
    index_mask: [u64; MAX_LEVELS as usize],
    /// `table_entries(l)` for every level.
    entries: [u32; MAX_LEVELS as usize],
    /// For each `s < 64`, the level at or below the start whose leaves are `1 << s` bytes,
    /// or [`NO_LEVEL`].
    level_of_shift: [u8; 64],
}

/// Marks a page-size shift no level of the geometry maps.
const NO_LEVEL: u8 = u8::MAX;

impl core::fmt::Debug for Geometry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        // The derived tables say nothing the four fields do not.
        f.debug_struct("Geometry")
            .field("granule_shift", &self.granule_shift)
            .field("bits_per_level", &self.bits_per_level)
            .field("start_level", &self.start_level)
            .field("pgd_bits", &self.pgd_bits)
            .finish()
    }
}

impl Geometry {
    /// Computes the geometry of an effective configuration.
    pub(crate) fn new(cfg: &Config) -> Result<Self, Error> {
        let granules = cfg.pgsize_bitmap & (SZ_4K | SZ_16K | SZ_64K);
        if granules == 0 {
            return Err(Error::InvalidConfig);
        }
        let granule_shift = cfg.pgsize_bitmap.trailing_zeros();
        if !matches!(granule_shift, 12 | 14 | 16) || cfg.ias > 52 || cfg.oas > 52 {
            return Err(Error::InvalidConfig);
        }
        // At least one level must be indexed.
        if cfg.ias <= granule_shift {
            return Err(Error::InvalidConfig);
        }
        let bits_per_level = granule_shift - 3;
        let va_bits = cfg.ias - granule_shift;
        let levels = va_bits.div_ceil(bits_per_level);
        if levels > MAX_LEVELS {
            return Err(Error::InvalidConfig);
        }
        let mut geo = Geometry {
            granule_shift,
            bits_per_level,
            start_level: MAX_LEVELS - levels,
            pgd_bits: va_bits - bits_per_level * (levels - 1),
            shift: [0; MAX_LEVELS as usize],
            index_mask: [0; MAX_LEVELS as usize],
            entries: [0; MAX_LEVELS as usize],
            level_of_shift: [NO_LEVEL; 64],
        };
        geo.tables();
        Ok(geo)
    }

    /// Fills the per-level tables from the four defining fields.
    fn tables(&mut self) {
        self.level_of_shift = [NO_LEVEL; 64];
        for lvl in 0..MAX_LEVELS {
            let l = lvl as usize;
            // At most 4 * 13 + 3 = 55: fits a `u8`, and is below 64.
            let shift = (MAX_LEVELS - lvl) * self.bits_per_level + 3;
            self.shift[l] = shift as u8;
            let bits = match lvl.cmp(&self.start_level) {
                core::cmp::Ordering::Less => {
                    self.index_mask[l] = 0;
                    self.entries[l] = 0;
                    continue;
                }
                core::cmp::Ordering::Equal => self.pgd_bits,
                core::cmp::Ordering::Greater => self.bits_per_level,
            };
            self.index_mask[l] = (1u64 << bits) - 1;
            self.entries[l] = 1 << bits;
            self.level_of_shift[shift as usize] = lvl as u8;
        }
    }

    /// Forces a full four-level walk (the Mali format's requirement).
    pub(crate) fn force_level0(&mut self) {
        if self.start_level > 0 {
            self.start_level = 0;
            self.pgd_bits = 0;
            self.tables();
        }
    }

    /// log2 of the granule.
    pub const fn granule_shift(&self) -> u32 {
        self.granule_shift
    }

    /// Granule size in bytes (the size of every table but the PGD).
    pub const fn granule(&self) -> u64 {
        1 << self.granule_shift
    }

    /// Address bits resolved per full level.
    pub const fn bits_per_level(&self) -> u32 {
        self.bits_per_level
    }

    /// The first level walked.
    pub const fn start_level(&self) -> u32 {
        self.start_level
    }

    /// Address bits resolved by the start-level table.
    pub const fn pgd_bits(&self) -> u32 {
        self.pgd_bits
    }

    /// Number of entries of a full table.
    pub const fn ptes_per_table(&self) -> usize {
        1 << self.bits_per_level
    }

    /// Number of entries of the start-level table.
    pub const fn pgd_entries(&self) -> usize {
        1 << self.pgd_bits
    }

    /// Entries of the table at `lvl`.
    pub(crate) const fn table_entries(&self, lvl: u32) -> usize {
        self.entries[(lvl & (MAX_LEVELS - 1)) as usize] as usize
    }

    /// Bytes allocated for the table at `lvl` (never less than 64, as the hardware needs).
    pub(crate) const fn table_bytes(&self, lvl: u32) -> usize {
        let b = self.table_entries(lvl) * 8;
        if b < 64 {
            64
        } else {
            b
        }
    }

    /// Shift of the address bits that index level `lvl`.
    ///
    /// `lvl` is taken modulo 4 (the levels are 0 to 3).
    pub const fn level_shift(&self, lvl: u32) -> u32 {
        self.shift[(lvl & (MAX_LEVELS - 1)) as usize] as u32
    }

    /// Size mapped by one leaf at level `lvl`.
    pub const fn block_size(&self, lvl: u32) -> u64 {
        1 << self.level_shift(lvl)
    }

    /// Index of `iova` in the table at `lvl`.
    pub(crate) const fn index(&self, iova: u64, lvl: u32) -> usize {
        let l = (lvl & (MAX_LEVELS - 1)) as usize;
        // Every shift is below 64 (see `tables`); the mask says so to the compiler too.
        ((iova >> (self.shift[l] & 63)) & self.index_mask[l]) as usize
    }

    /// The level whose leaves are `size` bytes, if any level at or below the start has it.
    pub(crate) fn level_of_size(&self, size: u64) -> Option<u32> {
        if !size.is_power_of_two() {
            return None;
        }
        // `trailing_zeros` of a non-zero `u64` is below 64.
        match self.level_of_shift[(size.trailing_zeros() & 63) as usize] {
            NO_LEVEL => None,
            lvl => Some(u32::from(lvl)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(bitmap: u64, ias: u32) -> Geometry {
        let mut c = Config::new(bitmap, ias, 48);
        c.restrict_pgsizes();
        Geometry::new(&c).unwrap()
    }

    #[test]
    fn levels_from_ias_4k() {
        let g = geo(SZ_4K | SZ_2M | SZ_1G, 48);
        assert_eq!((g.start_level(), g.pgd_bits()), (0, 9));
        let g = geo(SZ_4K, 39);
        assert_eq!((g.start_level(), g.pgd_bits()), (1, 9));
        let g = geo(SZ_4K, 32);
        assert_eq!((g.start_level(), g.pgd_bits()), (1, 2));
        assert_eq!(g.pgd_entries(), 4);
        assert_eq!(g.table_bytes(1), 64);
        let g = geo(SZ_4K, 30);
        assert_eq!((g.start_level(), g.pgd_bits()), (2, 9));
        let g = geo(SZ_4K, 21);
        assert_eq!((g.start_level(), g.pgd_bits()), (3, 9));
    }

    #[test]
    fn level_of_size_is_the_level_with_that_block_size() {
        for granule in [SZ_4K, SZ_16K, SZ_64K] {
            for ias in 16..=52 {
                let mut c = Config::new(granule | SZ_2M | SZ_32M | SZ_512M | SZ_1G, ias, 48);
                c.restrict_pgsizes();
                let Ok(g) = Geometry::new(&c) else { continue };
                let by_search =
                    |size: u64| (g.start_level..MAX_LEVELS).find(|&l| g.block_size(l) == size);
                for bit in 0..64 {
                    let size = 1u64 << bit;
                    for s in [size, size + 1, size.wrapping_sub(1), size | 0x1000] {
                        assert_eq!(g.level_of_size(s), by_search(s), "{g:?}, size {s:#x}");
                    }
                }
                assert_eq!(g.level_of_size(0), None);
            }
        }
    }

    #[test]
    fn block_sizes() {
        let g = geo(SZ_4K, 48);
        assert_eq!(g.block_size(3), SZ_4K);
        assert_eq!(g.block_size(2), SZ_2M);
        assert_eq!(g.block_size(1), SZ_1G);
        let g = geo(SZ_16K, 48);
        assert_eq!(g.block_size(2), SZ_32M);
        assert_eq!(g.start_level(), 0);
        assert_eq!(g.pgd_bits(), 1);
        let g = geo(SZ_64K, 48);
        assert_eq!(g.block_size(2), SZ_512M);
        assert_eq!(g.block_size(1), SZ_4T);
        assert_eq!((g.start_level(), g.pgd_bits()), (1, 6));
    }

    #[test]
    fn restrict_prefers_cpu_page() {
        let mut c = Config::new(SZ_4K | SZ_16K | SZ_64K | SZ_2M | SZ_32M, 52, 52);
        c.restrict_pgsizes();
        assert_eq!(c.pgsize_bitmap, SZ_4K | SZ_2M);
        assert_eq!((c.ias, c.oas), (48, 48));
        let mut c = Config::new(SZ_64K | SZ_512M | SZ_4T, 52, 52);
        c.restrict_pgsizes();
        assert_eq!(c.pgsize_bitmap, SZ_64K | SZ_512M | SZ_4T);
        assert_eq!((c.ias, c.oas), (52, 52));
        let mut c = Config::new(SZ_64K | SZ_4T, 52, 48);
        c.restrict_pgsizes();
        assert_eq!(c.pgsize_bitmap, SZ_64K);
    }

    #[test]
    fn rejects_bad_geometry() {
        assert_eq!(
            Geometry::new(&Config::new(SZ_2M, 48, 48)),
            Err(Error::InvalidConfig)
        );
        assert_eq!(
            Geometry::new(&Config::new(SZ_4K, 12, 48)),
            Err(Error::InvalidConfig)
        );
    }

    #[test]
    fn index_at_levels() {
        let g = geo(SZ_4K, 48);
        let va = (3 << 39) | (5 << 30) | (7 << 21) | (9 << 12) | 0x123;
        assert_eq!(g.index(va, 0), 3);
        assert_eq!(g.index(va, 1), 5);
        assert_eq!(g.index(va, 2), 7);
        assert_eq!(g.index(va, 3), 9);
    }
}
