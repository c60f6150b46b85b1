// SPDX-License-Identifier: GPL-2.0 OR MIT

//! LPAE descriptor layout.
//!
//! Every table entry is a 64-bit descriptor. Bits 1:0 give its type: 0 (or any value with bit
//! 0 clear) is invalid, `0b01` a block, `0b11` a table above level 3 and a page at level 3.
//! The Mali LPAE format differs: its leaves use `0b01` at every level, level 3 included, and
//! `0b11` is never valid at level 3.
//!
//! A leaf carries the output address (bits 47:12; with the 64K granule, output bits 51:48 sit
//! in descriptor bits 15:12) and the attributes:
//!
//! | bits  | stage 1 (`ARM_64_LPAE_S1`)             | Mali LPAE                   |
//! |-------|----------------------------------------|-----------------------------|
//! | 4:2   | `AttrIndx` into MAIR                   | index into MEMATTR          |
//! | 5     | NS (with the `ARM_NS` quirk)           | -                           |
//! | 6     | AP\[1\]: unprivileged access allowed   | read allowed                |
//! | 7     | AP\[2\]: read-only                     | write allowed               |
//! | 9:8   | shareability (IS for cacheable, else OS) | always OS                 |
//! | 10    | access flag (always set)               | - (no access flag)          |
//! | 11    | nG (always set)                        | -                           |
//! | 51    | DBM (with the `ARM_HD` quirk)          | -                           |
//! | 54:53 | XN (both bits, for `NOEXEC`)           | XN                          |
//! | 55    | software: this table entry was synced for a non-coherent walker |  |

use crate::prot::{Prot, Quirks};

/// Mask of the descriptor type bits.
pub const TYPE_MASK: u64 = 0b11;
/// Block type (and Mali leaf type at every level).
pub const TYPE_BLOCK: u64 = 0b01;
/// Table type (above level 3) and page type (level 3, stage 1).
pub const TYPE_TABLE: u64 = 0b11;
/// Page type at level 3.
pub const TYPE_PAGE: u64 = 0b11;

/// Output address bits.
pub const ADDR_MASK: u64 = 0x0000_ffff_ffff_f000;

/// NSTable (table descriptors).
pub const NSTABLE: u64 = 1 << 63;
/// Execute-never (UXN and PXN).
pub const XN: u64 = 3 << 53;
/// Dirty-bit modifier.
pub const DBM: u64 = 1 << 51;
/// Access flag.
pub const AF: u64 = 1 << 10;
/// Non-global.
pub const NG: u64 = 1 << 11;
/// Outer shareable.
pub const SH_OS: u64 = 2 << 8;
/// Inner shareable.
pub const SH_IS: u64 = 3 << 8;
/// Shareability field mask.
pub const SH_MASK: u64 = 3 << 8;
/// Non-secure output.
pub const NS: u64 = 1 << 5;
/// AP\[1\]: unprivileged access.
pub const AP_UNPRIV: u64 = 1 << 6;
/// AP\[2\]: read-only.
pub const AP_RDONLY: u64 = 1 << 7;
/// Mali: read permission.
pub const MALI_READ: u64 = 1 << 6;
/// Mali: write permission.
pub const MALI_WRITE: u64 = 1 << 7;
/// Software bit: the table entry has been synced for a non-coherent walker.
pub const SW_SYNC: u64 = 1 << 55;
/// Shift of the `AttrIndx` field.
pub const ATTRINDX_SHIFT: u32 = 2;
/// `AttrIndx` field mask.
pub const ATTRINDX_MASK: u64 = 7 << ATTRINDX_SHIFT;

/// MAIR index of normal non-cacheable memory.
pub const ATTR_IDX_NC: u64 = 0;
/// MAIR index of normal write-back cacheable memory.
pub const ATTR_IDX_CACHE: u64 = 1;
/// MAIR index of device memory.
pub const ATTR_IDX_DEV: u64 = 2;
/// MAIR index of inner non-cacheable, outer write-back memory.
pub const ATTR_IDX_INC_OCACHE: u64 = 3;

/// The descriptor type bits.
#[inline]
pub const fn pte_type(pte: u64) -> u64 {
    pte & TYPE_MASK
}

/// Whether `pte` is a leaf (page or block) at `lvl`.
#[inline]
pub const fn is_leaf(pte: u64, lvl: u32, mali: bool) -> bool {
    if lvl == 3 && !mali {
        pte_type(pte) == TYPE_PAGE
    } else {
        pte_type(pte) == TYPE_BLOCK
    }
}

/// Whether `pte` points to a next-level table.
#[inline]
pub const fn is_table(pte: u64, lvl: u32) -> bool {
    lvl != 3 && pte_type(pte) == TYPE_TABLE
}

/// The type bits of a leaf at `lvl`.
#[inline]
pub const fn leaf_type(lvl: u32, mali: bool) -> u64 {
    if lvl == 3 && !mali {
        TYPE_PAGE
    } else {
        TYPE_BLOCK
    }
}

/// Encodes an output (or table) address; for the 64K granule bits 51:48 fold into 15:12.
#[inline]
pub const fn paddr_to_pte(paddr: u64) -> u64 {
    (paddr | (paddr >> 36)) & ADDR_MASK
}

/// Decodes the output address of a descriptor.
#[inline]
pub const fn pte_to_paddr(pte: u64, granule_shift: u32) -> u64 {
    let a = pte & ADDR_MASK;
    if granule_shift < 16 {
        a
    } else {
        (a | (a << 36)) & (ADDR_MASK << 4)
    }
}

/// The attribute bits (everything but type and address) of a leaf with protection `prot`.
#[inline(always)]
pub fn prot_to_pte(prot: Prot, mali: bool, quirks: Quirks) -> u64 {
    let mut pte = if mali {
        let mut p = 0;
        if prot.contains(Prot::READ) {
            p |= MALI_READ;
        }
        if prot.contains(Prot::WRITE) {
            p |= MALI_WRITE;
        }
        p
    } else {
        let mut p = NG;
        if !prot.contains(Prot::WRITE) && prot.contains(Prot::READ) {
            p |= AP_RDONLY;
        } else if quirks.contains(Quirks::ARM_HD) {
            p |= DBM;
        }
        if !prot.contains(Prot::PRIV) {
            p |= AP_UNPRIV;
        }
        p
    };
    if prot.contains(Prot::MMIO) {
        pte |= ATTR_IDX_DEV << ATTRINDX_SHIFT;
    } else if prot.contains(Prot::CACHE) {
        pte |= ATTR_IDX_CACHE << ATTRINDX_SHIFT;
    }
    if prot.contains(Prot::CACHE) && !mali {
        pte |= SH_IS;
    } else {
        pte |= SH_OS;
    }
    if prot.contains(Prot::NOEXEC) {
        pte |= XN;
    }
    if quirks.contains(Quirks::ARM_NS) {
        pte |= NS;
    }
    if !mali {
        pte |= AF;
    }
    pte
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s1_bits() {
        let q = Quirks::empty();
        let rw = prot_to_pte(Prot::READ | Prot::WRITE, false, q);
        assert_eq!(rw, NG | AP_UNPRIV | SH_OS | AF);
        let ro = prot_to_pte(Prot::READ, false, q);
        assert_eq!(ro, NG | AP_RDONLY | AP_UNPRIV | SH_OS | AF);
        let wo_priv = prot_to_pte(Prot::WRITE | Prot::PRIV, false, q);
        assert_eq!(wo_priv, NG | SH_OS | AF);
        let cached = prot_to_pte(Prot::READ | Prot::CACHE | Prot::NOEXEC, false, q);
        assert_eq!(
            cached,
            NG | AP_RDONLY | AP_UNPRIV | (1 << 2) | SH_IS | XN | AF
        );
        let mmio = prot_to_pte(
            Prot::READ | Prot::WRITE | Prot::MMIO | Prot::CACHE,
            false,
            q,
        );
        assert_eq!(mmio & ATTRINDX_MASK, 2 << 2);
        let hd = prot_to_pte(
            Prot::READ | Prot::WRITE,
            false,
            Quirks::ARM_HD | Quirks::ARM_NS,
        );
        assert_eq!(hd, NG | DBM | AP_UNPRIV | SH_OS | AF | NS);
    }

    #[test]
    fn mali_bits() {
        let q = Quirks::empty();
        let rw = prot_to_pte(Prot::READ | Prot::WRITE | Prot::CACHE, true, q);
        assert_eq!(rw, MALI_READ | MALI_WRITE | (1 << 2) | SH_OS);
        assert_eq!(rw & AF, 0);
        let ro = prot_to_pte(Prot::READ | Prot::NOEXEC, true, q);
        assert_eq!(ro, MALI_READ | SH_OS | XN);
    }

    #[test]
    fn address_folding() {
        let pa = 0x000f_1234_5678_0000;
        let pte = paddr_to_pte(pa);
        assert_eq!(pte & 0xf000, 0xf000);
        assert_eq!(pte_to_paddr(pte, 16), pa);
        assert_eq!(pte_to_paddr(paddr_to_pte(0x1234_5000), 12), 0x1234_5000);
    }

    #[test]
    fn leaf_and_table_types() {
        assert!(is_leaf(TYPE_PAGE, 3, false));
        assert!(!is_leaf(TYPE_BLOCK, 3, false));
        assert!(is_leaf(TYPE_BLOCK, 3, true));
        assert!(!is_table(TYPE_TABLE, 3));
        assert!(is_table(TYPE_TABLE, 2));
        assert!(is_leaf(TYPE_BLOCK, 2, false));
    }
}
