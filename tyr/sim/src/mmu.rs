// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Address spaces of the simulated MMU.
//!
//! A Mali GPU has a small number of hardware *address spaces* (the G610 has eight). Each is a
//! set of registers the driver programs with one GPU virtual memory space: `TRANSTAB` (the
//! physical address of the top-level page table), `MEMATTR` (eight memory-attribute bytes,
//! selected by the AttrIndx field of each page-table leaf) and `TRANSCFG` (the table format,
//! the input-address size and walk options). Writing these registers changes nothing by
//! itself: the driver then writes the `UPDATE` command to `AS_COMMAND`, which makes the MMU
//! latch the new values and drop every cached translation of the space. `AS_STATUS` bit 0
//! reads as one while a command runs; drivers wait for it to clear before and after each
//! command.
//!
//! Changing the tables of a live space follows a lock protocol: the driver writes a
//! naturally aligned power-of-two region to `LOCKADDR` (bits 5:0 hold `log2(size) - 1`, the
//! upper bits the base; 32 KiB is the smallest region), issues `LOCK` so that GPU accesses to
//! the region stall, edits the tables, and then issues `UNLOCK` (or `FLUSH_PT`/`FLUSH_MEM`,
//! which first flush caches): the MMU drops cached translations inside the region and
//! releases the stall.
//!
//! The simulated MMU keeps a translation lookaside buffer (TLB) per space, filled on every
//! successful translation and emptied by `UPDATE` (all of it) and by the unlock/flush
//! commands (the region). A driver that edits tables without that maintenance keeps seeing the
//! old translations, as on hardware. Like a hardware TLB it has a fixed number of entries
//! ([`TLB_ENTRIES`], fully associative); when all are taken, a new translation replaces one
//! of them in turn, which is the only other way an entry leaves it.
//!
//! When a translation fails the MMU records the fault in the space's `FAULTSTATUS`
//! (exception code, access type, source ID) and `FAULTADDRESS` and raises the space's bit in
//! `MMU_IRQ_RAWSTAT`. The registers keep the first fault until the driver clears that bit.

use pin_init::{init, init_array_from_fn};

use super::mem::PhysAddr;
use super::regs::as_cmd;
use super::walk::{AccessType, Fault, FaultKind, Translation, WalkConfig};

/// A locked (or flushed) region of an address space: `[base, base + size)`, naturally
/// aligned, `size` a power of two of at least 32 KiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LockRegion {
    /// First address of the region.
    pub base: u64,
    /// Last address of the region (inclusive, so the whole 64-bit space is representable).
    pub last: u64,
}

/// log2 of the smallest lock region.
pub const LOCK_REGION_MIN_SHIFT: u32 = 15;

impl LockRegion {
    /// Decodes a `LOCKADDR` value: bits 5:0 hold `log2(size) - 1` (values below 14 are
    /// raised to the 32 KiB minimum), the base is the value with the bits below the size
    /// cleared.
    ///
    /// # Examples
    ///
    /// ```
    /// use mali_sim::LockRegion;
    ///
    /// // A 2 MiB region at 0x20_0000 (log2 = 21, encoded 20).
    /// let r = LockRegion::decode(0x20_0000 | 20);
    /// assert_eq!((r.base, r.last), (0x20_0000, 0x3f_ffff));
    /// ```
    pub const fn decode(lockaddr: u64) -> Self {
        let mut shift = (lockaddr & 0x3f) as u32 + 1;
        if shift < LOCK_REGION_MIN_SHIFT {
            shift = LOCK_REGION_MIN_SHIFT;
        }
        let span = if shift >= 64 {
            u64::MAX
        } else {
            (1u64 << shift) - 1
        };
        let base = lockaddr & !span & !0xfff;
        LockRegion {
            base,
            last: base | span,
        }
    }

    /// Encodes the smallest region covering `[start, start + size)` the way panthor does
    /// (`None` for an empty or overflowing range).
    ///
    /// # Examples
    ///
    /// ```
    /// use mali_sim::LockRegion;
    ///
    /// // One page needs the 32 KiB minimum region.
    /// let v = LockRegion::encode(0x1234_5000, 0x1000).unwrap();
    /// assert_eq!(v, 0x1234_0000 | 14);
    /// assert!(LockRegion::decode(v).contains(0x1234_5fff));
    /// ```
    pub const fn encode(start: u64, size: u64) -> Option<u64> {
        if size == 0 {
            return None;
        }
        let end = match start.checked_add(size) {
            Some(e) => e,
            None => return None,
        };
        let differing = 64 - (start ^ (end - 1)).leading_zeros();
        let width = if differing > LOCK_REGION_MIN_SHIFT {
            differing
        } else {
            LOCK_REGION_MIN_SHIFT
        } - 1;
        let base = if width + 1 >= 64 {
            0
        } else {
            start & !((1u64 << (width + 1)) - 1)
        };
        Some(base | width as u64)
    }

    /// Whether `va` lies in the region.
    pub const fn contains(&self, va: u64) -> bool {
        self.base <= va && va <= self.last
    }
}

/// A command in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) cmd: u32,
    /// Completion time; `None` for a command that never completes (injected).
    pub(crate) done_at: Option<u64>,
    /// `LOCKADDR` when the command was issued.
    pub(crate) lockaddr: u64,
}

/// Counters of an address space's TLB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlbStats {
    /// Translations served from the TLB.
    pub hits: u64,
    /// Translations that walked the tables.
    pub misses: u64,
    /// Entries currently cached.
    pub entries: usize,
}

/// Entries of each address space's TLB.
pub const TLB_ENTRIES: usize = 64;

/// A cached leaf translation: the translation of the first byte of VA page `vpn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TlbEntry {
    vpn: u64,
    t: Translation,
}

/// One address space's registers and MMU state.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct AddressSpace {
    pub(crate) transtab: u64,
    pub(crate) memattr: u64,
    pub(crate) lockaddr: u64,
    pub(crate) transcfg: u64,
    pub(crate) faultstatus: u32,
    pub(crate) faultaddress: u64,
    pub(crate) faultextra: u64,
    /// The configuration latched by the last `UPDATE`.
    pub(crate) active: WalkConfig,
    pub(crate) pending: Option<Pending>,
    pub(crate) locked: Option<LockRegion>,
    /// Cached leaf translations, one per 4 KiB VA page; at most one entry per page.
    tlb: Tlb,
    hits: u64,
    misses: u64,
}

impl AddressSpace {
    /// Whether a command is running.
    pub(crate) fn busy(&self) -> bool {
        self.pending.is_some()
    }

    /// Applies the effect of a completed command.
    pub(crate) fn complete(&mut self, p: Pending, pa_bits: u32) {
        match p.cmd {
            as_cmd::UPDATE => {
                self.active = WalkConfig {
                    transtab: self.transtab,
                    memattr: self.memattr,
                    transcfg: self.transcfg,
                    pa_bits,
                };
                self.tlb.clear();
            }
            as_cmd::LOCK => self.locked = Some(LockRegion::decode(p.lockaddr)),
            as_cmd::UNLOCK | as_cmd::FLUSH_PT | as_cmd::FLUSH_MEM => {
                let region = self.locked.take().unwrap_or(LockRegion::decode(p.lockaddr));
                self.invalidate(region);
            }
            _ => {}
        }
    }

    fn invalidate(&mut self, r: LockRegion) {
        let (first, last) = (r.base >> 12, r.last >> 12);
        self.tlb.retain(|vpn| !(first..=last).contains(&vpn));
    }

    /// An address space out of reset, initialised in place.
    pub(crate) fn init() -> impl pin_init::Init<Self> {
        init!(Self {
            transtab: 0,
            memattr: 0,
            lockaddr: 0,
            transcfg: 0,
            faultstatus: 0,
            faultaddress: 0,
            faultextra: 0,
            active: WalkConfig::default(),
            pending: None,
            locked: None,
            tlb <- Tlb::init(),
            hits: 0,
            misses: 0,
        })
    }

    /// Resets registers and state as a GPU reset does, in place.
    pub(crate) fn reset(&mut self) {
        // Naming every field makes adding one without resetting it a compile error.
        let AddressSpace {
            transtab,
            memattr,
            lockaddr,
            transcfg,
            faultstatus,
            faultaddress,
            faultextra,
            active,
            pending,
            locked,
            tlb,
            hits,
            misses,
        } = self;
        for r in [
            transtab,
            memattr,
            lockaddr,
            transcfg,
            faultaddress,
            faultextra,
            hits,
            misses,
        ] {
            *r = 0;
        }
        *faultstatus = 0;
        *active = WalkConfig::default();
        *pending = None;
        *locked = None;
        tlb.clear();
    }

    pub(crate) fn tlb_stats(&self) -> TlbStats {
        TlbStats {
            hits: self.hits,
            misses: self.misses,
            entries: self.tlb.len(),
        }
    }

    /// Translates through the TLB, walking (and caching) on a miss.
    pub(crate) fn translate(
        &mut self,
        mem: &(impl super::PhysMemory + ?Sized),
        va: u64,
        access: AccessType,
    ) -> Result<Translation, Fault> {
        if let Some(t) = self.tlb.get(va >> 12) {
            self.hits += 1;
            if !t.perms.allows(access) {
                return Err(Fault {
                    kind: FaultKind::Permission { level: t.level },
                    va,
                    access,
                });
            }
            return Ok(Translation {
                pa: PhysAddr(t.pa.0 | (va & 0xfff)),
                ..*t
            });
        }
        self.misses += 1;
        let t = super::walk::walk(mem, &self.active, va, access)?;
        self.tlb.insert(
            va >> 12,
            Translation {
                pa: PhysAddr(t.pa.0 & !0xfff),
                ..t
            },
        );
        Ok(t)
    }
}

/// A fully associative TLB of [`TLB_ENTRIES`] entries: a new translation takes a free entry,
/// or, when none is free, replaces the entries in turn (round robin).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Tlb {
    entries: [Option<TlbEntry>; TLB_ENTRIES],
    /// Where the next insertion goes when no entry is free (the oldest entry).
    next: usize,
}

impl Tlb {
    /// An empty TLB, initialised in place.
    fn init() -> impl pin_init::Init<Self> {
        init!(Self {
            entries <- init_array_from_fn(|_| None),
            next: 0,
        })
    }

    fn get(&self, vpn: u64) -> Option<&Translation> {
        self.entries
            .iter()
            .flatten()
            .find(|e| e.vpn == vpn)
            .map(|e| &e.t)
    }

    fn insert(&mut self, vpn: u64, t: Translation) {
        let entry = Some(TlbEntry { vpn, t });
        let same = self
            .entries
            .iter()
            .position(|e| e.is_some_and(|e| e.vpn == vpn));
        let slot = same.or_else(|| self.entries.iter().position(Option::is_none));
        let i = slot.unwrap_or(self.next % TLB_ENTRIES);
        self.entries[i] = entry;
        if slot.is_none() {
            self.next = (i + 1) % TLB_ENTRIES;
        }
    }

    fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) {
        for e in &mut self.entries {
            if e.is_some_and(|x| !keep(x.vpn)) {
                *e = None;
            }
        }
    }

    fn clear(&mut self) {
        self.entries.fill(None);
        self.next = 0;
    }

    fn len(&self) -> usize {
        self.entries.iter().flatten().count()
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn lock_region_round_trip() {
        let cases = [
            (0x1000u64, 0x1000u64),
            (0x20_0000, 0x20_0000),
            (0x1f_f000, 0x2000),
            (0x7fff_f000, 0x1_0000_0000),
            (0, 1 << 48),
        ];
        for (start, size) in cases {
            let v = LockRegion::encode(start, size).unwrap();
            let r = LockRegion::decode(v);
            assert!(
                r.contains(start) && r.contains(start + size - 1),
                "{start:#x}+{size:#x}"
            );
            let span = r.last - r.base + 1;
            assert!(span.is_power_of_two() && span >= 1 << 15);
            assert_eq!(r.base % span, 0);
        }
        // Straddling a 2M boundary needs a 4M region.
        let r = LockRegion::decode(LockRegion::encode(0x1f_f000, 0x2000).unwrap());
        assert_eq!((r.base, r.last), (0, 0x3f_ffff));
        assert_eq!(LockRegion::encode(1, 0), None);
        assert_eq!(LockRegion::encode(u64::MAX, 2), None);
        // Whole-space region.
        let all = LockRegion::decode(63);
        assert_eq!((all.base, all.last), (0, u64::MAX));
        // Tiny encodings are raised to 32 KiB.
        let tiny = LockRegion::decode(0x1234_5000 | 3);
        assert_eq!((tiny.base, tiny.last), (0x1234_0000, 0x1234_7fff));
    }
}
