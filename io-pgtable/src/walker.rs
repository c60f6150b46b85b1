// SPDX-License-Identifier: GPL-2.0 OR MIT

//! An independent software table walker.
//!
//! This is what the translating hardware does with the register values: start at the base
//! register, take the index bits of the input address for each level, read the descriptor
//! from memory *by device address*, and stop at a leaf or fault. It shares no code with the
//! page-table implementation (it decodes from the register values alone) so tests can use it
//! as an oracle, and a device simulator (the simulated GPU MMU) can use it as its MMU.

use crate::regs::{MaliAsRegs, S1Regs};

/// Memory the walker reads descriptors from, by device address.
pub trait PhysMem {
    /// Reads the 64-bit little-endian word at `addr` (8-byte aligned), or `None` if there is
    /// no memory there (an external abort).
    fn read_u64(&self, addr: u64) -> Option<u64>;
}

impl<M: PhysMem + ?Sized> PhysMem for &M {
    fn read_u64(&self, addr: u64) -> Option<u64> {
        (**self).read_u64(addr)
    }
}

/// How to walk: the translation regime decoded from register values.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Regime {
    /// AArch64 VMSA stage 1 (SMMU, or Mali in AArch64 address mode).
    Aarch64 {
        /// Table base (device address).
        base: u64,
        /// Input address size in bits.
        ia_bits: u32,
        /// log2 of the granule (12, 14 or 16).
        granule_shift: u32,
        /// Upper-half (TTBR1) regime: input addresses have all bits above `ia_bits` set.
        upper: bool,
        /// Check the access flag (a walker without hardware AF management faults on AF=0).
        check_af: bool,
    },
    /// Mali LPAE (legacy) mode: 4K granule, four levels.
    MaliLegacy {
        /// Table base (device address).
        base: u64,
    },
}

impl Regime {
    /// Decodes stage-1 registers (the `TG` field in the `TG0` encoding, or `TG1` if `ttbr1`).
    pub fn from_s1(regs: &S1Regs, ttbr1: bool) -> Option<Regime> {
        let granule_shift = match (regs.tcr.tg, ttbr1) {
            (0, false) | (2, true) => 12,
            (2, false) | (1, true) => 14,
            (1, false) | (3, true) => 16,
            _ => return None,
        };
        Some(Regime::Aarch64 {
            base: regs.ttbr & !0xf,
            ia_bits: 64u32.checked_sub(u32::from(regs.tcr.tsz))?,
            granule_shift,
            upper: ttbr1,
            check_af: true,
        })
    }

    /// Decodes Mali address-space registers (`TRANSCFG` address mode and `INA_BITS`).
    pub fn from_mali(regs: &MaliAsRegs) -> Option<Regime> {
        match regs.transcfg & 0xf {
            0 if regs.transtab & 3 == 3 => Some(Regime::MaliLegacy {
                base: regs.transtab & !0xfff,
            }),
            6 | 8 => {
                let ina = ((regs.transcfg >> 6) & 0x3f) as u32;
                Some(Regime::Aarch64 {
                    base: regs.transtab & !0xf,
                    ia_bits: 55u32.checked_sub(ina)?,
                    granule_shift: if regs.transcfg & 0xf == 6 { 12 } else { 16 },
                    upper: false,
                    check_af: true,
                })
            }
            _ => None,
        }
    }
}

impl core::fmt::Debug for Regime {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        use crate::config::Hex;
        match *self {
            Regime::Aarch64 {
                base,
                ia_bits,
                granule_shift,
                upper,
                check_af,
            } => f
                .debug_struct("Aarch64")
                .field("base", &Hex(base))
                .field("ia_bits", &ia_bits)
                .field("granule_shift", &granule_shift)
                .field("upper", &upper)
                .field("check_af", &check_af)
                .finish(),
            Regime::MaliLegacy { base } => f
                .debug_struct("MaliLegacy")
                .field("base", &Hex(base))
                .finish(),
        }
    }
}

/// A successful translation (`Debug` prints addresses, size and descriptor in hex).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Translation {
    /// The output address.
    pub pa: u64,
    /// The level of the leaf.
    pub level: u32,
    /// Bytes the leaf maps.
    pub size: u64,
    /// The leaf descriptor.
    pub desc: u64,
}

impl core::fmt::Debug for Translation {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::result::Result<(), core::fmt::Error> {
        use crate::config::Hex;
        f.debug_struct("Translation")
            .field("pa", &Hex(self.pa))
            .field("level", &self.level)
            .field("size", &Hex(self.size))
            .field("desc", &Hex(self.desc))
            .finish()
    }
}

/// Why a walk failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The input address is outside the regime's input range.
    AddressSize,
    /// An invalid descriptor at `level`.
    Translation {
        /// Level of the invalid descriptor.
        level: u32,
    },
    /// A leaf without the access flag.
    AccessFlag {
        /// Level of the leaf.
        level: u32,
    },
    /// The memory read failed at `addr`.
    External {
        /// Device address that could not be read.
        addr: u64,
    },
}

/// Walks `regime`'s tables in `mem` for input address `va`.
///
/// # Examples
///
/// ```
/// use io_pgtable::{host::{Granule, HostAllocator}, walker, Arm64LpaeS1, Config, NoFlush, PageTable, Prot, SZ_2M, SZ_4K};
///
/// let mem = HostAllocator::new(Granule::Size4K, 8);
/// let mut pt = PageTable::<Arm64LpaeS1, _>::new(Config::new(SZ_4K | SZ_2M, 48, 40), &mem, NoFlush)?;
/// pt.map(0x20_0000, 0x1_0000_0000, SZ_2M, Prot::READ)?;
/// let regime = walker::Regime::from_s1(&pt.s1_regs(), false).unwrap();
/// let t = walker::walk(&mem, &regime, 0x20_1234).unwrap();
/// assert_eq!((t.pa, t.level, t.size), (0x1_0000_1234, 2, SZ_2M));
/// # Ok::<(), io_pgtable::Error>(())
/// ```
pub fn walk<M: PhysMem + ?Sized>(mem: &M, regime: &Regime, va: u64) -> Result<Translation, Fault> {
    match *regime {
        Regime::Aarch64 {
            base,
            ia_bits,
            granule_shift,
            upper,
            check_af,
        } => {
            if ia_bits <= granule_shift || ia_bits > 52 || !matches!(granule_shift, 12 | 14 | 16) {
                return Err(Fault::AddressSize);
            }
            let top = va >> ia_bits;
            let want = if upper { u64::MAX >> ia_bits } else { 0 };
            if top != want {
                return Err(Fault::AddressSize);
            }
            walk_generic(mem, base, va, ia_bits, granule_shift, false, check_af)
        }
        Regime::MaliLegacy { base } => walk_generic(mem, base, va, 48, 12, true, false),
    }
}

fn walk_generic<M: PhysMem + ?Sized>(
    mem: &M,
    base: u64,
    va: u64,
    ia_bits: u32,
    g: u32,
    mali: bool,
    check_af: bool,
) -> Result<Translation, Fault> {
    let stride = g - 3;
    // Number of levels: enough strides to cover the bits above the page offset; Mali
    // legacy always walks four.
    let levels = if mali {
        4
    } else {
        (ia_bits - g).div_ceil(stride)
    };
    let mut level = 4 - levels;
    let mut table = base;
    loop {
        let shift = g + stride * (3 - level);
        let width = if shift + stride > ia_bits {
            ia_bits - shift
        } else {
            stride
        };
        let index = (va >> shift) & ((1u64 << width) - 1);
        let addr = table + index * 8;
        let desc = mem.read_u64(addr).ok_or(Fault::External { addr })?;
        let kind = desc & 3;
        let is_leaf = if mali {
            kind == 1 && level > 0
        } else if level == 3 {
            kind == 3
        } else {
            kind == 1 && block_allowed(g, level)
        };
        if is_leaf {
            if check_af && desc & (1 << 10) == 0 {
                return Err(Fault::AccessFlag { level });
            }
            let size = 1u64 << shift;
            let oa = output_address(desc, g) & !(size - 1);
            return Ok(Translation {
                pa: oa | (va & (size - 1)),
                level,
                size,
                desc,
            });
        }
        if kind != 3 || level == 3 {
            return Err(Fault::Translation { level });
        }
        table = output_address(desc, g);
        level += 1;
    }
}

/// Levels at which a block descriptor is valid for a granule.
fn block_allowed(g: u32, level: u32) -> bool {
    match g {
        12 => level == 1 || level == 2,
        14 => level == 2,
        _ => level == 1 || level == 2,
    }
}

/// The address field of a descriptor; with 64K pages bits 15:12 hold address bits 51:48.
fn output_address(desc: u64, g: u32) -> u64 {
    let low = desc & 0x0000_ffff_ffff_f000 & !((1u64 << g) - 1);
    if g == 16 {
        low | (((desc >> 12) & 0xf) << 48)
    } else {
        low
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regs::Tcr;

    struct Flat(std::vec::Vec<u64>);

    impl PhysMem for Flat {
        fn read_u64(&self, addr: u64) -> Option<u64> {
            self.0.get(usize::try_from(addr / 8).ok()?).copied()
        }
    }

    #[test]
    fn bad_registers_do_not_panic() {
        let tcr = Tcr {
            ips: 0,
            tg: 0,
            sh: 0,
            orgn: 0,
            irgn: 0,
            tsz: 200,
        };
        let regs = S1Regs {
            ttbr: 0,
            tcr,
            mair: 0,
        };
        assert_eq!(Regime::from_s1(&regs, false), None);
        let mali = MaliAsRegs {
            transtab: 0,
            memattr: 0,
            transcfg: 6 | (50 << 6),
        };
        // INA_BITS 50: a 5-bit input range, which no walk can use.
        let r = Regime::from_mali(&mali).unwrap();
        assert_eq!(walk(&Flat(std::vec![]), &r, 0), Err(Fault::AddressSize));
        let too_wide = MaliAsRegs {
            transcfg: 6 | (63 << 6),
            ..mali
        };
        assert_eq!(Regime::from_mali(&too_wide), None);
        let unmapped = MaliAsRegs {
            transcfg: 1,
            ..mali
        };
        assert_eq!(Regime::from_mali(&unmapped), None);
    }

    #[test]
    fn hand_built_tables() {
        // 4K granule, 39-bit input: level 1 table at 0, level 2 at 0x1000, level 3 at 0x2000.
        let mut mem = std::vec![0u64; 3 * 512];
        mem[1] = 0x1000 | 3; // L1[1] -> L2
        mem[512 + 2] = 0x2000 | 3; // L2[2] -> L3
        mem[1024 + 5] = 0xabc_d000 | (1 << 10) | 3; // page
        mem[512 + 3] = 0x4000_0000 | (1 << 10) | 1; // 2M block
        mem[512 + 4] = 0x8000_0000 | 1; // block without AF
        let mem = Flat(mem);
        let regime = Regime::Aarch64 {
            base: 0,
            ia_bits: 39,
            granule_shift: 12,
            upper: false,
            check_af: true,
        };
        let va = (1 << 30) | (2 << 21) | (5 << 12) | 0x18;
        let t = walk(&mem, &regime, va).unwrap();
        assert_eq!((t.pa, t.level, t.size), (0xabc_d018, 3, 4096));
        let t = walk(&mem, &regime, (1 << 30) | (3 << 21) | 0x1234).unwrap();
        assert_eq!((t.pa, t.level), (0x4000_1234, 2));
        assert_eq!(
            walk(&mem, &regime, (1 << 30) | (4 << 21)),
            Err(Fault::AccessFlag { level: 2 })
        );
        assert_eq!(
            walk(&mem, &regime, (1 << 30) | (2 << 21)),
            Err(Fault::Translation { level: 3 })
        );
        assert_eq!(walk(&mem, &regime, 0), Err(Fault::Translation { level: 1 }));
        assert_eq!(walk(&mem, &regime, 1 << 39), Err(Fault::AddressSize));
    }
}
