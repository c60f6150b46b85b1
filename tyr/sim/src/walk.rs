// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The simulated MMU's page-table walker.
//!
//! A Mali CSF GPU translates the virtual addresses of its jobs with the Arm VMSAv8-64
//! *stage-1* format (the same tables a CPU uses, which is why Linux drives it with
//! `io-pgtable`'s `ARM_64_LPAE_S1`). With the 4 KiB granule, every table is one 4 KiB page of
//! 512 eight-byte descriptors and each level resolves 9 bits of the address: level 3 bits
//! 20:12, level 2 bits 29:21, level 1 bits 38:30, level 0 bits 47:39. How many levels are
//! used depends on the input-address size the address space is configured for (`INA_BITS`
//! of `TRANSCFG`): a 48-bit space starts at level 0, a 39-bit one at level 1, and so on.
//!
//! A descriptor's bit 0 says whether it is valid. At levels 0 to 2, bit 1 set makes it a
//! *table* descriptor pointing to the next level; bit 1 clear makes it a *block* (1 GiB at
//! level 1, 2 MiB at level 2; level 0 cannot hold blocks with this granule). At level 3 a
//! valid descriptor must have bit 1 set (a *page*). Leaf descriptors carry:
//!
//! | bits  | field     | meaning here                                              |
//! |-------|-----------|-----------------------------------------------------------|
//! | 4:2   | AttrIndx  | selects one of the eight `MEMATTR` bytes of the space     |
//! | 6     | AP\[1\]   | accessible to unprivileged accesses (all GPU accesses)    |
//! | 7     | AP\[2\]   | read-only                                                 |
//! | 10    | AF        | access flag: clear faults unless `DISABLE_AF_FAULT`       |
//! | 47:12 | OA        | output address (aligned to the page or block size)        |
//! | 53    | PXN       | privileged execute-never (ignored: the GPU is unprivileged)|
//! | 54    | UXN/XN    | execute-never                                             |
//!
//! The GPU is treated as an unprivileged (EL0-like) master: a leaf without AP\[1\] is not
//! accessible at all, and an instruction fetch needs read access as well as a clear XN.
//! `TRANSCFG.WXN` makes writable leaves non-executable; `XREADABLE` and the page-based
//! hardware attributes are not modelled.
//!
//! Table descriptors may restrict what lies below them (unless `DISABLE_HIER_AP`): bit 61
//! (APTable\[0\]) removes unprivileged access, bit 62 (APTable\[1\]) removes write access, bit
//! 60 (UXNTable) forbids execution.
//!
//! When a walk fails, the MMU reports one of the architectural *exception codes* Mali uses in
//! `AS_FAULTSTATUS` (and that panthor decodes by name):
//!
//! | code        | fault                                                              |
//! |-------------|--------------------------------------------------------------------|
//! | 0xC0 + n    | translation fault at level n: invalid (or reserved) descriptor     |
//! | 0xC8 + n    | permission fault at level n: the access is not allowed by the leaf |
//! | 0xD0 + n    | table walk bus fault at level n: the table's memory does not exist  |
//! | 0xD8 + n    | access flag fault at level n: the leaf's AF bit is clear           |
//! | 0xE0        | input address size fault: the VA has bits above `INA_BITS`         |
//! | 0xE4 + n    | output address size fault at level n: an address above the PA size |
//! | 0xE8 + n    | memory attribute fault at level n: the `MEMATTR` byte says "fault"  |
//!
//! Faults are checked in this order: translation, output address size, access flag, memory
//! attribute, permission.
//!
//! This walker is written from the architecture, independently of the crate that writes the
//! tables, so that each checks the other.
//!
//! # Examples
//!
//! A one-page mapping built by hand, in a 39-bit address space (three levels):
//!
//! ```
//! # #[cfg(feature = "std")] {
//! use mali_sim::walk::{self, AccessType, FaultKind, WalkConfig};
//! use mali_sim::{MemConfig, SimMemory};
//!
//! let mem = SimMemory::new(MemConfig::default());
//! let (l1, l2, l3, data) = (mem.alloc(1)?, mem.alloc(1)?, mem.alloc(1)?, mem.alloc(1)?);
//! mem.write_u64(l1, l2.0 | 0b11)?; // table descriptor, index 0
//! mem.write_u64(l2, l3.0 | 0b11)?; // table descriptor, index 0
//! // Page at VA 0x5000 (index 5): AF, AP[1] (unprivileged), read-only (AP[2]).
//! mem.write_u64(l3.offset(5 * 8).unwrap(), data.0 | 1 << 10 | 0b11 << 6 | 0b11)?;
//!
//! let cfg = WalkConfig::aarch64_4k(l1.0, 39);
//! let t = walk::walk(&mem, &cfg, 0x5123, AccessType::Read).unwrap();
//! assert_eq!(t.pa.0, data.0 + 0x123);
//! assert!(t.perms.read && !t.perms.write);
//! let f = walk::walk(&mem, &cfg, 0x5000, AccessType::Write).unwrap_err();
//! assert_eq!(f.kind, FaultKind::Permission { level: 3 });
//! assert_eq!(f.exception_code(), 0xCB);
//! # }
//! # Ok::<(), mali_sim::SimError>(())
//! ```

use core::fmt;

use super::mem::{PhysAddr, PhysMemory};

/// `TRANSCFG` address-space modes.
pub mod mode {
    /// Every access fails (the AS is disabled).
    pub const UNMAPPED: u64 = 1;
    /// Output address equals input address (deprecated by Arm).
    pub const IDENTITY: u64 = 2;
    /// AArch64 tables with the 4 KiB granule.
    pub const AARCH64_4K: u64 = 6;
    /// AArch64 tables with the 64 KiB granule (not simulated: accesses fault).
    pub const AARCH64_64K: u64 = 8;
}

/// `TRANSCFG` bit: ignore APTable/UXNTable of table descriptors.
pub const TRANSCFG_DISABLE_HIER_AP: u64 = 1 << 33;
/// `TRANSCFG` bit: do not fault on a clear access flag.
pub const TRANSCFG_DISABLE_AF_FAULT: u64 = 1 << 34;
/// `TRANSCFG` bit: writable pages are never executable.
pub const TRANSCFG_WXN: u64 = 1 << 35;

/// The kind of a GPU memory access, as encoded in `AS_FAULTSTATUS` bits 9:8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessType {
    /// An atomic read-modify-write.
    Atomic = 0,
    /// An instruction fetch.
    Execute = 1,
    /// A read.
    Read = 2,
    /// A write.
    Write = 3,
}

/// What a leaf permits to the GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Perms {
    /// Reads allowed.
    pub read: bool,
    /// Writes allowed.
    pub write: bool,
    /// Instruction fetches allowed.
    pub exec: bool,
}

impl Perms {
    /// Whether `access` is allowed.
    pub const fn allows(self, access: AccessType) -> bool {
        match access {
            AccessType::Read => self.read,
            AccessType::Write => self.write,
            AccessType::Execute => self.exec,
            AccessType::Atomic => self.read && self.write,
        }
    }
}

/// Why a translation failed; see the [module documentation](self) for the codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// The address space is disabled (mode `UNMAPPED`, an unsupported mode, or no such AS).
    /// Reported as a translation fault at level 0 with the decoder-fault bit set.
    Disabled,
    /// Invalid or reserved descriptor at `level`.
    Translation {
        /// Level of the descriptor.
        level: u8,
    },
    /// The leaf at `level` does not allow the access.
    Permission {
        /// Level of the leaf.
        level: u8,
    },
    /// The table at `level` lies in memory that does not exist.
    TableBus {
        /// Level of the table.
        level: u8,
        /// Address of the descriptor that could not be read.
        pa: PhysAddr,
    },
    /// The leaf at `level` has its access flag clear.
    AccessFlag {
        /// Level of the leaf.
        level: u8,
    },
    /// The virtual address is wider than the configured input size.
    AddressSizeIn,
    /// A table or output address at `level` is wider than the physical address size.
    AddressSizeOut {
        /// Level of the descriptor (or the start level, for `TRANSTAB`).
        level: u8,
    },
    /// The `MEMATTR` byte selected by the leaf at `level` is of the "fault" type.
    MemoryAttribute {
        /// Level of the leaf.
        level: u8,
    },
}

impl FaultKind {
    /// The architectural exception code.
    pub const fn exception_code(self) -> u8 {
        match self {
            FaultKind::Disabled => 0xC0,
            FaultKind::Translation { level } => 0xC0 + level,
            FaultKind::Permission { level } => 0xC8 + level,
            FaultKind::TableBus { level, .. } => 0xD0 + level,
            FaultKind::AccessFlag { level } => 0xD8 + level,
            FaultKind::AddressSizeIn => 0xE0,
            FaultKind::AddressSizeOut { level } => 0xE4 + level,
            FaultKind::MemoryAttribute { level } => 0xE8 + level,
        }
    }
}

/// A failed translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fault {
    /// What went wrong.
    pub kind: FaultKind,
    /// The virtual address that was translated.
    pub va: u64,
    /// The access that was attempted.
    pub access: AccessType,
}

/// `AS_FAULTSTATUS` bit 10: the fault was raised by the address decoder.
pub const FAULTSTATUS_DECODER_FAULT: u32 = 1 << 10;

impl Fault {
    /// The architectural exception code (`AS_FAULTSTATUS` bits 7:0).
    pub const fn exception_code(&self) -> u8 {
        self.kind.exception_code()
    }

    /// The `AS_FAULTSTATUS` value for this fault raised by `source_id`.
    ///
    /// # Examples
    ///
    /// ```
    /// use mali_sim::walk::{AccessType, Fault, FaultKind};
    ///
    /// let f = Fault { kind: FaultKind::Translation { level: 2 }, va: 0, access: AccessType::Write };
    /// assert_eq!(f.faultstatus(0x12), 0x0012_03c2);
    /// ```
    pub const fn faultstatus(&self, source_id: u16) -> u32 {
        let decoder = match self.kind {
            FaultKind::Disabled => FAULTSTATUS_DECODER_FAULT,
            _ => 0,
        };
        self.exception_code() as u32
            | (self.access as u32) << 8
            | decoder
            | (source_id as u32) << 16
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} on {:?} access at VA {:#x} (exception {:#x})",
            self.kind,
            self.access,
            self.va,
            self.exception_code()
        )
    }
}

/// A successful translation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Translation {
    /// The physical address of the byte at the translated VA.
    pub pa: PhysAddr,
    /// Level of the leaf (1: 1 GiB block, 2: 2 MiB block, 3: 4 KiB page).
    pub level: u8,
    /// Size of the leaf's mapping in bytes.
    pub size: u64,
    /// What the leaf (and the tables above it) permit.
    pub perms: Perms,
    /// The leaf's AttrIndx.
    pub attr_index: u8,
    /// The `MEMATTR` byte AttrIndx selected.
    pub memattr: u8,
}

/// The configuration a walk runs with: the values an AS latched at its last `UPDATE`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WalkConfig {
    /// `AS_TRANSTAB`: physical address of the start-level table.
    pub transtab: u64,
    /// `AS_MEMATTR`: eight attribute bytes indexed by AttrIndx.
    pub memattr: u64,
    /// `AS_TRANSCFG`.
    pub transcfg: u64,
    /// Physical address size of the GPU (`MMU_FEATURES` bits 15:8).
    pub pa_bits: u32,
}

impl WalkConfig {
    /// An AArch64 4K configuration with `va_bits` input bits, write-back memory attributes
    /// in every slot, and a 40-bit physical address size (what panthor programs).
    pub const fn aarch64_4k(transtab: u64, va_bits: u32) -> Self {
        WalkConfig {
            transtab,
            memattr: 0x8888_8888_8888_8888,
            transcfg: mode::AARCH64_4K | (55u64.wrapping_sub(va_bits as u64) & 0x1f) << 6,
            pa_bits: 40,
        }
    }

    /// The address-space mode (`TRANSCFG` bits 3:0).
    pub const fn mode(&self) -> u64 {
        self.transcfg & 0xf
    }

    /// The input-address size: `55 - INA_BITS` for the valid encodings 7 to 30, else 48.
    pub const fn va_bits(&self) -> u32 {
        let ina = ((self.transcfg >> 6) & 0x1f) as u32;
        if ina >= 7 && ina <= 30 {
            55 - ina
        } else {
            48
        }
    }

    /// The first level of the walk (0 to 2) for the 4K granule.
    pub const fn start_level(&self) -> u8 {
        let levels = (self.va_bits() - 12).div_ceil(9);
        (4 - levels) as u8
    }
}

const OA_MASK: u64 = 0x000f_ffff_ffff_f000;

fn level_shift(level: u8) -> u32 {
    12 + 9 * (3 - u32::from(level))
}

/// Walks the tables `cfg` describes for an `access` to `va`.
///
/// Reads descriptors from `mem` by physical address; nothing is cached and nothing is
/// recorded. This is the function the simulated MMU uses on a TLB miss.
pub fn walk<M: PhysMemory + ?Sized>(
    mem: &M,
    cfg: &WalkConfig,
    va: u64,
    access: AccessType,
) -> Result<Translation, Fault> {
    let fault = |kind| Fault { kind, va, access };
    let pa_limit = |addr: u64| cfg.pa_bits < 64 && addr >> cfg.pa_bits != 0;
    match cfg.mode() {
        mode::AARCH64_4K => {}
        mode::IDENTITY => {
            let va_bits = cfg.va_bits();
            if va >> va_bits != 0 {
                return Err(fault(FaultKind::AddressSizeIn));
            }
            if pa_limit(va) {
                return Err(fault(FaultKind::AddressSizeOut { level: 0 }));
            }
            return Ok(Translation {
                pa: PhysAddr(va),
                level: 0,
                size: 1 << va_bits,
                perms: Perms {
                    read: true,
                    write: true,
                    exec: true,
                },
                attr_index: 0,
                memattr: cfg.memattr as u8,
            });
        }
        _ => return Err(fault(FaultKind::Disabled)),
    }
    let va_bits = cfg.va_bits();
    if va >> va_bits != 0 {
        return Err(fault(FaultKind::AddressSizeIn));
    }
    let start = cfg.start_level();
    let top_bits = va_bits - level_shift(start);
    let top_bytes = 8u64 << top_bits;
    let mut table = cfg.transtab & !(top_bytes - 1) & !0xf;
    if pa_limit(table) {
        return Err(fault(FaultKind::AddressSizeOut { level: start }));
    }
    let hier = cfg.transcfg & TRANSCFG_DISABLE_HIER_AP == 0;
    let (mut no_unpriv, mut no_write, mut no_exec) = (false, false, false);
    let mut level = start;
    loop {
        let shift = level_shift(level);
        let bits = if level == start { top_bits } else { 9 };
        let index = (va >> shift) & ((1 << bits) - 1);
        let desc_pa = PhysAddr(table + index * 8);
        let desc = mem
            .read_u64(desc_pa)
            .map_err(|_| fault(FaultKind::TableBus { level, pa: desc_pa }))?;
        if desc & 1 == 0 {
            return Err(fault(FaultKind::Translation { level }));
        }
        let is_table_bit = desc & 2 != 0;
        if level < 3 && is_table_bit {
            let next = desc & OA_MASK;
            if pa_limit(next) {
                return Err(fault(FaultKind::AddressSizeOut { level }));
            }
            if hier {
                no_unpriv |= desc & (1 << 61) != 0;
                no_write |= desc & (1 << 62) != 0;
                no_exec |= desc & (1 << 60) != 0;
            }
            table = next;
            level += 1;
            continue;
        }
        if (level == 3 && !is_table_bit) || level == 0 {
            // Reserved encoding at level 3; no blocks at level 0 with the 4K granule.
            return Err(fault(FaultKind::Translation { level }));
        }
        let size = 1u64 << shift;
        let oa = desc & OA_MASK & !(size - 1);
        if pa_limit(oa) {
            return Err(fault(FaultKind::AddressSizeOut { level }));
        }
        if desc & (1 << 10) == 0 && cfg.transcfg & TRANSCFG_DISABLE_AF_FAULT == 0 {
            return Err(fault(FaultKind::AccessFlag { level }));
        }
        let attr_index = ((desc >> 2) & 7) as u8;
        let memattr = (cfg.memattr >> (8 * attr_index)) as u8;
        if memattr >> 6 == 3 {
            return Err(fault(FaultKind::MemoryAttribute { level }));
        }
        let read = desc & (1 << 6) != 0 && !no_unpriv;
        let write = read && desc & (1 << 7) == 0 && !no_write;
        let exec = read
            && desc & (1 << 54) == 0
            && !no_exec
            && !(write && cfg.transcfg & TRANSCFG_WXN != 0);
        let perms = Perms { read, write, exec };
        if !perms.allows(access) {
            return Err(fault(FaultKind::Permission { level }));
        }
        return Ok(Translation {
            pa: PhysAddr(oa | (va & (size - 1))),
            level,
            size,
            perms,
            attr_index,
            memattr,
        });
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::{MemConfig, SimMemory};

    const AF: u64 = 1 << 10;
    const UNPRIV: u64 = 1 << 6;
    const RDONLY: u64 = 1 << 7;
    const XN: u64 = 1 << 54;
    const TABLE: u64 = 0b11;
    const BLOCK: u64 = 0b01;
    const PAGE: u64 = 0b11;

    struct Tables {
        mem: SimMemory,
        l0: PhysAddr,
        l1: PhysAddr,
        l2: PhysAddr,
        l3: PhysAddr,
    }

    fn idx(va: u64, level: u8) -> u64 {
        (va >> level_shift(level)) & 511
    }

    fn set(mem: &SimMemory, table: PhysAddr, index: u64, desc: u64) {
        mem.write_u64(table.offset(index * 8).unwrap(), desc)
            .unwrap();
    }

    /// A 48-bit space with one chain of tables reaching VA 0x0000_0080_4020_1000.
    const VA: u64 = 0x0000_0080_4020_1000;

    fn build() -> Tables {
        let mem = SimMemory::new(MemConfig::default());
        let (l0, l1, l2, l3) = (
            mem.alloc(1).unwrap(),
            mem.alloc(1).unwrap(),
            mem.alloc(1).unwrap(),
            mem.alloc(1).unwrap(),
        );
        set(&mem, l0, idx(VA, 0), l1.0 | TABLE);
        set(&mem, l1, idx(VA, 1), l2.0 | TABLE);
        set(&mem, l2, idx(VA, 2), l3.0 | TABLE);
        Tables {
            mem,
            l0,
            l1,
            l2,
            l3,
        }
    }

    fn cfg(t: &Tables) -> WalkConfig {
        WalkConfig::aarch64_4k(t.l0.0, 48)
    }

    #[test]
    fn levels_from_input_size() {
        let lv = |bits| WalkConfig::aarch64_4k(0, bits).start_level();
        assert_eq!(lv(48), 0);
        assert_eq!(lv(40), 0);
        assert_eq!(lv(39), 1);
        assert_eq!(lv(31), 1);
        assert_eq!(lv(30), 2);
        assert_eq!(lv(25), 2);
        let c = WalkConfig {
            transcfg: mode::AARCH64_4K,
            ..WalkConfig::default()
        };
        assert_eq!(c.va_bits(), 48, "reset INA_BITS reads as 48 bits");
    }

    #[test]
    fn page_walk_through_every_level() {
        let t = build();
        let data = PhysAddr(0x1_2345_6000);
        set(&t.mem, t.l3, idx(VA, 3), data.0 | AF | UNPRIV | PAGE);
        let tr = walk(&t.mem, &cfg(&t), VA + 0xabc, AccessType::Write).unwrap();
        assert_eq!(tr.pa, PhysAddr(data.0 + 0xabc));
        assert_eq!((tr.level, tr.size), (3, 4096));
        assert_eq!(
            tr.perms,
            Perms {
                read: true,
                write: true,
                exec: true
            }
        );
        // The neighbouring page is invalid at level 3.
        let f = walk(&t.mem, &cfg(&t), VA + 0x1000, AccessType::Read).unwrap_err();
        assert_eq!(f.kind, FaultKind::Translation { level: 3 });
        assert_eq!(f.va, VA + 0x1000);
        assert_eq!(f.exception_code(), 0xC3);
        // Missing entries at each upper level.
        let miss = [
            (VA + (1 << 39), 0u8),
            (VA + (1 << 30), 1),
            (VA + (1 << 21), 2),
        ];
        for (va, level) in miss {
            let f = walk(&t.mem, &cfg(&t), va, AccessType::Read).unwrap_err();
            assert_eq!(f.kind, FaultKind::Translation { level }, "va {va:#x}");
            assert_eq!(f.exception_code(), 0xC0 + level);
        }
    }

    #[test]
    fn blocks_at_level_1_and_2() {
        let t = build();
        let va1 = VA + (1 << 30); // another level-1 slot: a 1G block
        let va1 = va1 & !((1 << 30) - 1);
        set(
            &t.mem,
            t.l1,
            idx(va1, 1),
            0x40_0000_0000 | AF | UNPRIV | BLOCK,
        );
        let tr = walk(&t.mem, &cfg(&t), va1 + 0x1234_5678, AccessType::Read).unwrap();
        assert_eq!(tr.pa.0, 0x40_0000_0000 + 0x1234_5678);
        assert_eq!((tr.level, tr.size), (1, 1 << 30));
        let va2 = (VA + (1 << 21)) & !((1 << 21) - 1);
        // Low OA bits of a block are ignored.
        set(
            &t.mem,
            t.l2,
            idx(va2, 2),
            0x8060_0000 | 0x5000 | AF | UNPRIV | BLOCK,
        );
        let tr = walk(&t.mem, &cfg(&t), va2 + 0x1f_fff8, AccessType::Read).unwrap();
        assert_eq!(tr.pa.0, 0x8060_0000 + 0x1f_fff8);
        assert_eq!((tr.level, tr.size), (2, 1 << 21));
        // A block at level 0 is reserved with the 4K granule.
        set(&t.mem, t.l0, 3, AF | UNPRIV | BLOCK);
        let f = walk(&t.mem, &cfg(&t), 3 << 39, AccessType::Read).unwrap_err();
        assert_eq!(f.kind, FaultKind::Translation { level: 0 });
        // Bit 1 clear at level 3 is reserved.
        set(&t.mem, t.l3, 7, 0x9000_0000 | AF | UNPRIV | 0b01);
        let f = walk(
            &t.mem,
            &cfg(&t),
            (VA & !0x1f_ffff) + 7 * 4096,
            AccessType::Read,
        );
        assert_eq!(f.unwrap_err().kind, FaultKind::Translation { level: 3 });
    }

    #[test]
    fn permissions() {
        let t = build();
        let page = |i: u64| (VA & !0x1f_ffff) + i * 4096;
        set(&t.mem, t.l3, 0, 0x9000_0000 | AF | UNPRIV | RDONLY | PAGE);
        set(&t.mem, t.l3, 1, 0x9000_1000 | AF | UNPRIV | XN | PAGE);
        set(&t.mem, t.l3, 2, 0x9000_2000 | AF | PAGE); // privileged only
        let c = cfg(&t);
        let ok = |i, a| walk(&t.mem, &c, page(i), a).is_ok();
        let perm = |i, a| walk(&t.mem, &c, page(i), a).unwrap_err().kind;
        assert!(ok(0, AccessType::Read) && ok(0, AccessType::Execute));
        assert_eq!(
            perm(0, AccessType::Write),
            FaultKind::Permission { level: 3 }
        );
        assert_eq!(
            perm(0, AccessType::Atomic),
            FaultKind::Permission { level: 3 }
        );
        assert!(ok(1, AccessType::Write) && ok(1, AccessType::Atomic));
        assert_eq!(
            perm(1, AccessType::Execute),
            FaultKind::Permission { level: 3 }
        );
        assert_eq!(
            perm(2, AccessType::Read),
            FaultKind::Permission { level: 3 }
        );
        // WXN makes the writable page non-executable.
        let wxn = WalkConfig {
            transcfg: c.transcfg | TRANSCFG_WXN,
            ..c
        };
        set(&t.mem, t.l3, 3, 0x9000_3000 | AF | UNPRIV | PAGE);
        assert!(walk(&t.mem, &c, page(3), AccessType::Execute).is_ok());
        let f = walk(&t.mem, &wxn, page(3), AccessType::Execute).unwrap_err();
        assert_eq!(f.kind, FaultKind::Permission { level: 3 });
        // Permission fault on a block reports the block's level.
        let blk = (VA + (5 << 21)) & !0x1f_ffff;
        set(
            &t.mem,
            t.l2,
            idx(blk, 2),
            0x8000_0000 | AF | UNPRIV | RDONLY | BLOCK,
        );
        let f = walk(&t.mem, &c, blk, AccessType::Write).unwrap_err();
        assert_eq!(f.kind, FaultKind::Permission { level: 2 });
        assert_eq!(f.faultstatus(7), 0xCA | 3 << 8 | 7 << 16);
    }

    #[test]
    fn hierarchical_table_permissions() {
        let t = build();
        set(&t.mem, t.l3, idx(VA, 3), 0x9000_0000 | AF | UNPRIV | PAGE);
        let c = cfg(&t);
        // APTable[1]: no writes below this level-2 entry.
        set(&t.mem, t.l2, idx(VA, 2), t.l3.0 | TABLE | 1 << 62);
        let tr = walk(&t.mem, &c, VA, AccessType::Read).unwrap();
        assert!(!tr.perms.write);
        assert_eq!(
            walk(&t.mem, &c, VA, AccessType::Write).unwrap_err().kind,
            FaultKind::Permission { level: 3 }
        );
        let flat = WalkConfig {
            transcfg: c.transcfg | TRANSCFG_DISABLE_HIER_AP,
            ..c
        };
        assert!(walk(&t.mem, &flat, VA, AccessType::Write).is_ok());
        // UXNTable and APTable[0] on the level-1 entry.
        set(&t.mem, t.l2, idx(VA, 2), t.l3.0 | TABLE);
        set(&t.mem, t.l1, idx(VA, 1), t.l2.0 | TABLE | 1 << 60);
        assert!(!walk(&t.mem, &c, VA, AccessType::Read).unwrap().perms.exec);
        set(&t.mem, t.l1, idx(VA, 1), t.l2.0 | TABLE | 1 << 61);
        assert_eq!(
            walk(&t.mem, &c, VA, AccessType::Read).unwrap_err().kind,
            FaultKind::Permission { level: 3 }
        );
    }

    #[test]
    fn access_flag_and_memattr_faults() {
        let t = build();
        set(&t.mem, t.l3, idx(VA, 3), 0x9000_0000 | UNPRIV | PAGE);
        let c = cfg(&t);
        let f = walk(&t.mem, &c, VA, AccessType::Read).unwrap_err();
        assert_eq!(f.kind, FaultKind::AccessFlag { level: 3 });
        assert_eq!(f.exception_code(), 0xDB);
        let no_af = WalkConfig {
            transcfg: c.transcfg | TRANSCFG_DISABLE_AF_FAULT,
            ..c
        };
        assert!(walk(&t.mem, &no_af, VA, AccessType::Read).is_ok());
        // AttrIndx 2 selects a "fault" memory type.
        set(
            &t.mem,
            t.l3,
            idx(VA, 3),
            0x9000_0000 | AF | UNPRIV | 2 << 2 | PAGE,
        );
        let fault_attr = WalkConfig {
            memattr: 0xc0 << 16,
            ..c
        };
        let f = walk(&t.mem, &fault_attr, VA, AccessType::Read).unwrap_err();
        assert_eq!(f.kind, FaultKind::MemoryAttribute { level: 3 });
        assert_eq!(f.exception_code(), 0xEB);
        let tr = walk(&t.mem, &c, VA, AccessType::Read).unwrap();
        assert_eq!((tr.attr_index, tr.memattr), (2, 0x88));
    }

    #[test]
    fn address_size_faults() {
        let t = build();
        let c = cfg(&t);
        let f = walk(&t.mem, &c, 1 << 48, AccessType::Read).unwrap_err();
        assert_eq!(f.kind, FaultKind::AddressSizeIn);
        assert_eq!(f.exception_code(), 0xE0);
        let small = WalkConfig::aarch64_4k(t.l1.0, 39);
        assert_eq!(
            walk(&t.mem, &small, 1 << 39, AccessType::Read)
                .unwrap_err()
                .kind,
            FaultKind::AddressSizeIn
        );
        // Output address above 40 bits in a page and in a table descriptor.
        set(&t.mem, t.l3, idx(VA, 3), (1 << 40) | AF | UNPRIV | PAGE);
        let f = walk(&t.mem, &c, VA, AccessType::Read).unwrap_err();
        assert_eq!(f.kind, FaultKind::AddressSizeOut { level: 3 });
        assert_eq!(f.exception_code(), 0xE7);
        set(&t.mem, t.l1, idx(VA, 1), (1 << 41) | TABLE);
        let f = walk(&t.mem, &c, VA, AccessType::Read).unwrap_err();
        assert_eq!(f.kind, FaultKind::AddressSizeOut { level: 1 });
        let bad_ttb = WalkConfig::aarch64_4k(1 << 45, 48);
        assert_eq!(
            walk(&t.mem, &bad_ttb, 0, AccessType::Read)
                .unwrap_err()
                .kind,
            FaultKind::AddressSizeOut { level: 0 }
        );
    }

    #[test]
    fn table_in_missing_memory() {
        let t = build();
        set(&t.mem, t.l2, idx(VA, 2), 0x7000_0000 | TABLE);
        let f = walk(&t.mem, &cfg(&t), VA, AccessType::Read).unwrap_err();
        assert_eq!(
            f.kind,
            FaultKind::TableBus {
                level: 3,
                pa: PhysAddr(0x7000_0000 + idx(VA, 3) * 8)
            }
        );
        assert_eq!(f.exception_code(), 0xD3);
    }

    #[test]
    fn small_spaces_start_lower() {
        let t = build();
        // 39 bits: the walk starts at level 1; 30 bits: at level 2 (both full tables).
        let va = 0x40_0000 + 0x3000;
        set(&t.mem, t.l1, 0, t.l2.0 | TABLE);
        set(&t.mem, t.l2, 2, t.l3.0 | TABLE);
        set(&t.mem, t.l3, 3, 0x9999_9000 | AF | UNPRIV | PAGE);
        let c39 = WalkConfig::aarch64_4k(t.l1.0, 39);
        assert_eq!(
            walk(&t.mem, &c39, va, AccessType::Read).unwrap().pa.0,
            0x9999_9000
        );
        let c30 = WalkConfig::aarch64_4k(t.l2.0, 30);
        assert_eq!(
            walk(&t.mem, &c30, va, AccessType::Read).unwrap().pa.0,
            0x9999_9000
        );
        // 40 bits: level 0 has only two entries, so bit 40 is out of range, bit 39 indexes.
        let c40 = WalkConfig::aarch64_4k(t.l0.0, 40);
        assert_eq!(
            walk(&t.mem, &c40, VA, AccessType::Read).unwrap_err().kind,
            FaultKind::Translation { level: 3 }
        );
    }

    #[test]
    fn disabled_and_identity_modes() {
        let t = build();
        for m in [0, mode::UNMAPPED, mode::AARCH64_64K, 0xf] {
            let c = WalkConfig {
                transcfg: m,
                ..cfg(&t)
            };
            let f = walk(&t.mem, &c, 0, AccessType::Read).unwrap_err();
            assert_eq!(f.kind, FaultKind::Disabled);
            assert_eq!(f.faultstatus(0), 0xC0 | 2 << 8 | FAULTSTATUS_DECODER_FAULT);
        }
        let id = WalkConfig {
            transcfg: mode::IDENTITY,
            ..cfg(&t)
        };
        assert_eq!(
            walk(&t.mem, &id, 0x1234, AccessType::Write).unwrap().pa.0,
            0x1234
        );
    }
}
