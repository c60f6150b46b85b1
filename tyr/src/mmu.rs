// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Address-space slots and MMU commands.
//!
//! The GPU's MMU translates through one of a few hardware *address spaces* (eight on a G610),
//! each a register set holding the page-table base (`TRANSTAB`), the memory attributes
//! (`MEMATTR`) and the translation configuration (`TRANSCFG`). There are usually more VMs than
//! address spaces, so VMs borrow a slot while the GPU needs them and the least recently used
//! VM loses its slot when all are taken ([`AsSlots`]).
//!
//! A slot is changed through `AS_COMMAND`; the MMU accepts one command at a time and reports
//! `AS_STATUS.ACTIVE` while it works, so every command waits for the slot to be idle before and
//! after ([`send_command`]). Page-table updates of a live address space follow panthor:
//!
//! 1. [`lock`] the smallest naturally aligned power-of-two region covering the update
//!    ([`regs::lock_region`](crate::regs::lock_region)) — the GPU stalls accesses to it;
//! 2. write the page tables;
//! 3. [`unlock`]: clean and invalidate the GPU caches, then `UNLOCK`, which drops the region's
//!    TLB entries and lets accesses go on.
//!
//! [`enable`] programs a slot and latches it with `UPDATE`; [`disable`] flushes the caches,
//! makes the slot fault every access and latches that.

use core::time::Duration;

use io_pgtable::regs::MaliAsRegs;
use register::io::poll::read_poll_timeout;
use register::io::Io;

use crate::backend::{Backend, Lock, LockGuard, LockOf};
use crate::regs::*;
use crate::vm::MmuUpdate;
use crate::{dev_err, Error, Result};

/// Poll interval of MMU waits.
pub const MMU_POLL_INTERVAL: Duration = Duration::from_micros(10);
/// Timeout of MMU waits.
pub const MMU_TIMEOUT: Duration = Duration::from_millis(100);

/// One slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    /// Key of the VM holding the slot.
    vm: Option<u64>,
    /// Value of the use counter at the last use.
    last_use: u64,
    /// Number of users that need the slot to stay (running groups); never evicted while > 0.
    pins: u32,
}

/// Which VM holds which address space, with least-recently-used replacement.
///
/// # Examples
///
/// ```
/// use tyr::mmu::AsSlots;
///
/// let mut slots = AsSlots::new(2);
/// assert_eq!(slots.acquire(10), (0, None));
/// assert_eq!(slots.acquire(11), (1, None));
/// assert_eq!(slots.acquire(10), (0, None)); // already there; now the most recent
/// assert_eq!(slots.acquire(12), (1, Some(11))); // 11 was the least recently used
/// assert_eq!(slots.slot_of(11), None);
/// // A pinned slot is never taken away.
/// slots.pin(10);
/// slots.pin(12);
/// assert_eq!(slots.try_acquire(13), None);
/// slots.unpin(12);
/// assert_eq!(slots.try_acquire(13), Some((1, Some(12))));
/// ```
#[derive(Clone, Debug)]
pub struct AsSlots {
    slots: [Slot; MAX_AS],
    first: usize,
    count: usize,
    tick: u64,
}

impl AsSlots {
    /// Slots for a GPU with `count` address spaces (at most [`MAX_AS`]).
    pub fn new(count: usize) -> Self {
        Self::with_reserved(count, 0)
    }

    /// Slots for a GPU with `count` address spaces of which the first `reserved` are not
    /// handed out (address space 0 belongs to the MCU on CSF GPUs).
    ///
    /// # Examples
    ///
    /// ```
    /// use tyr::mmu::AsSlots;
    ///
    /// let mut slots = AsSlots::with_reserved(8, 1);
    /// assert_eq!(slots.count(), 7);
    /// assert_eq!(slots.acquire(10), (1, None));
    /// ```
    pub fn with_reserved(count: usize, reserved: usize) -> Self {
        let count = count.min(MAX_AS);
        AsSlots {
            slots: [Slot::default(); MAX_AS],
            first: reserved.min(count),
            count,
            tick: 0,
        }
    }

    /// Number of slots handed out.
    pub fn count(&self) -> usize {
        self.count - self.first
    }

    /// The slot VM `vm` holds.
    pub fn slot_of(&self, vm: u64) -> Option<usize> {
        self.slots[self.first..self.count]
            .iter()
            .position(|s| s.vm == Some(vm))
            .map(|i| i + self.first)
    }

    /// Gives VM `vm` a slot (the one it has, a free one, or the least recently used unpinned
    /// one) and marks it used. Returns the slot and the VM that lost it, if any.
    ///
    /// With no slot at all (`count == 0`), or when every slot is pinned by other VMs, returns
    /// slot 0 of nothing; callers check [`count`](Self::count) first or use
    /// [`try_acquire`](Self::try_acquire).
    pub fn acquire(&mut self, vm: u64) -> (usize, Option<u64>) {
        self.try_acquire(vm).unwrap_or((0, None))
    }

    /// [`acquire`](Self::acquire), or `None` if there is no slot to give.
    pub fn try_acquire(&mut self, vm: u64) -> Option<(usize, Option<u64>)> {
        self.tick += 1;
        let slots = &mut self.slots[self.first..self.count];
        let i = match slots.iter().position(|s| s.vm == Some(vm)) {
            Some(i) => i,
            None => match slots.iter().position(|s| s.vm.is_none()) {
                Some(i) => i,
                None => {
                    slots
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.pins == 0)
                        .min_by_key(|(_, s)| s.last_use)?
                        .0
                }
            },
        };
        let slot = slots.get_mut(i)?;
        let evicted = slot.vm.filter(|&v| v != vm);
        let pins = if evicted.is_none() { slot.pins } else { 0 };
        *slot = Slot {
            vm: Some(vm),
            last_use: self.tick,
            pins,
        };
        Some((i + self.first, evicted))
    }

    /// Keeps `vm`'s slot from being evicted until a matching [`unpin`](Self::unpin); does
    /// nothing if it holds none.
    pub fn pin(&mut self, vm: u64) {
        if let Some(i) = self.slot_of(vm) {
            self.slots[i].pins = self.slots[i].pins.saturating_add(1);
        }
    }

    /// Undoes one [`pin`](Self::pin).
    pub fn unpin(&mut self, vm: u64) {
        if let Some(i) = self.slot_of(vm) {
            self.slots[i].pins = self.slots[i].pins.saturating_sub(1);
        }
    }

    /// Whether `vm` holds a slot that is pinned.
    pub fn is_pinned(&self, vm: u64) -> bool {
        self.slot_of(vm).is_some_and(|i| self.slots[i].pins > 0)
    }

    /// The VM holding address space `slot`, if any.
    pub fn vm_in(&self, slot: usize) -> Option<u64> {
        if (self.first..self.count).contains(&slot) {
            self.slots[slot].vm
        } else {
            None
        }
    }

    /// Forgets every assignment (after a GPU reset disabled all address spaces).
    pub fn clear(&mut self) {
        for s in &mut self.slots {
            *s = Slot::default();
        }
    }

    /// Takes the slot away from `vm`; returns it.
    pub fn release(&mut self, vm: u64) -> Option<usize> {
        let i = self.slot_of(vm)?;
        self.slots[i] = Slot::default();
        Some(i)
    }
}

fn as_loc<R>(f: fn(usize) -> Option<R>, slot: usize) -> Result<R> {
    f(slot).ok_or(Error::Invalid)
}

/// Waits until address space `slot` has no command in progress.
///
/// # Errors
///
/// [`Error::TimedOut`] after [`MMU_TIMEOUT`]; [`Error::Invalid`] for a bad slot.
pub fn wait_ready<B: Backend>(b: &B, slot: usize) -> Result {
    let io = b.io();
    let loc = as_loc(AS_STATUS::try_at, slot)?;
    read_poll_timeout(
        b.clock(),
        || Ok::<_, Error>(io.read(loc)),
        |s: &AS_STATUS| !s.active(),
        MMU_POLL_INTERVAL,
        MMU_TIMEOUT,
    )
    .inspect_err(|_| dev_err!(b, "AS_ACTIVE bit stuck on AS{}", slot))?;
    Ok(())
}

/// Sends `command` to address space `slot` once it is idle, and waits for it to finish.
pub fn send_command<B: Backend>(b: &B, slot: usize, command: u32) -> Result {
    wait_ready(b, slot)?;
    let cmd = AS_COMMAND::zeroed().try_with_command(command)?;
    b.io().write(as_loc(AS_COMMAND::try_at, slot)?, cmd);
    wait_ready(b, slot)
}

/// Cleans and invalidates the GPU caches and waits for `CLEAN_CACHES_COMPLETED`.
pub fn flush_caches<B: Backend>(b: &B) -> Result {
    use gpu_command::*;
    let done = GPU_IRQ_RAWSTAT::zeroed()
        .with_clean_caches_completed(true)
        .into_raw();
    let modes = (CACHE_CLEAN | CACHE_INV) | (CACHE_CLEAN | CACHE_INV) << 4 | CACHE_INV << 8;
    let command = GPU_COMMAND::zeroed()
        .with_const_code::<FLUSH_CACHES>()
        .try_with_payload(modes)?;
    crate::gpu::command_and_wait(b, done, command, MMU_POLL_INTERVAL, MMU_TIMEOUT)
        .inspect_err(|_| dev_err!(b, "Cache flush timed out"))
}

/// Programs address space `slot` with `regs`, unmasks its fault interrupt and latches the
/// configuration (`UPDATE`).
pub fn enable<B: Backend>(b: &B, slot: usize, regs: &MaliAsRegs) -> Result {
    let io = b.io();
    io.update(MMU_IRQ_MASK, |m| {
        MMU_IRQ_MASK::from(m.into_raw() | 1 << slot)
    });
    io.write(
        as_loc(AS_TRANSTAB::try_at, slot)?,
        AS_TRANSTAB::from(regs.transtab),
    );
    io.write(
        as_loc(AS_MEMATTR::try_at, slot)?,
        AS_MEMATTR::from(regs.memattr),
    );
    io.write(
        as_loc(AS_TRANSCFG::try_at, slot)?,
        AS_TRANSCFG::from(regs.transcfg),
    );
    send_command(b, slot, as_command::UPDATE)
}

/// Flushes the caches, unlocks a pending region and makes address space `slot` fault every
/// access.
pub fn disable<B: Backend>(b: &B, slot: usize, locked: bool) -> Result {
    let io = b.io();
    io.update(MMU_IRQ_MASK, |m| {
        MMU_IRQ_MASK::from(m.into_raw() & !(1 << slot))
    });
    flush_caches(b)?;
    if locked {
        send_command(b, slot, as_command::UNLOCK)?;
    }
    io.write(as_loc(AS_TRANSTAB::try_at, slot)?, AS_TRANSTAB::from(0));
    io.write(as_loc(AS_MEMATTR::try_at, slot)?, AS_MEMATTR::from(0));
    io.write(
        as_loc(AS_TRANSCFG::try_at, slot)?,
        AS_TRANSCFG::from(transcfg::ADRMODE_UNMAPPED),
    );
    send_command(b, slot, as_command::UPDATE)
}

/// Locks the region covering `[start, start + size)` of address space `slot`; returns the
/// region locked (`base`, `size`).
pub fn lock<B: Backend>(b: &B, slot: usize, start: u64, size: u64) -> Result<(u64, u64)> {
    let (value, base, len) = lock_region(start, size).ok_or(Error::Invalid)?;
    b.io()
        .write(as_loc(AS_LOCKADDR::try_at, slot)?, AS_LOCKADDR::from(value));
    send_command(b, slot, as_command::LOCK)?;
    Ok((base, len))
}

/// Makes page-table changes in the locked region visible: flushes the caches and unlocks
/// (which invalidates the region's TLB entries).
pub fn unlock<B: Backend>(b: &B, slot: usize) -> Result {
    flush_caches(b)?;
    send_command(b, slot, as_command::UNLOCK)
}

/// The address space of the MCU.
pub const MCU_AS: usize = 0;

/// MMU updates of a VM that may hold an address space.
pub(crate) struct AsUpdate<'a, B: Backend> {
    pub(crate) backend: &'a B,
    pub(crate) slot: Option<usize>,
}

impl<B: Backend> MmuUpdate for AsUpdate<'_, B> {
    fn lock(&mut self, start: u64, size: u64) -> Result {
        match self.slot {
            Some(s) => lock(self.backend, s, start, size).map(|_| ()),
            None => Ok(()),
        }
    }

    fn unlock(&mut self) -> Result {
        match self.slot {
            Some(s) => unlock(self.backend, s),
            None => Ok(()),
        }
    }
}

/// MMU updates of a bind into a VM that may hold an address space, made in steps: the
/// device-wide address-space lock is taken by each [`lock`](MmuUpdate::lock) (which finds the
/// VM's slot afresh: it may have gained or lost one since the last step) and let go by the
/// matching [`unlock`](MmuUpdate::unlock), so that it is never held across more than one
/// bounded step of a page-table update, and other clients' binds and submissions run between
/// steps.
pub(crate) struct AsStepUpdate<'a, B: Backend> {
    pub(crate) backend: &'a B,
    pub(crate) slots: &'a LockOf<B, AsSlots>,
    /// Key of the VM.
    pub(crate) key: u64,
    /// The slots' lock and the VM's slot, from `lock` to `unlock`.
    held: Option<(LockGuard<'a, B, AsSlots>, Option<usize>)>,
}

impl<'a, B: Backend> AsStepUpdate<'a, B> {
    pub(crate) fn new(backend: &'a B, slots: &'a LockOf<B, AsSlots>, key: u64) -> Self {
        AsStepUpdate {
            backend,
            slots,
            key,
            held: None,
        }
    }
}

impl<B: Backend> MmuUpdate for AsStepUpdate<'_, B> {
    fn lock(&mut self, start: u64, size: u64) -> Result {
        // A step that was never unlocked is ended first.
        let _ = self.unlock();
        let guard = self.slots.guard();
        let slot = guard.slot_of(self.key);
        let locked = match slot {
            Some(s) => lock(self.backend, s, start, size).map(|_| ()),
            None => Ok(()),
        };
        // Without a locked region there is nothing to unlock, but the slots stay locked until
        // `unlock` so that the step's page-table writes do not race with an activation.
        let slot = if locked.is_ok() { slot } else { None };
        self.held = Some((guard, slot));
        locked
    }

    fn unlock(&mut self) -> Result {
        match self.held.take() {
            Some((guard, slot)) => {
                let r = slot.map_or(Ok(()), |s| unlock(self.backend, s));
                drop(guard);
                self.backend.cond_resched();
                r
            }
            None => Ok(()),
        }
    }
}

#[cfg(all(test, feature = "host"))]
mod tests {
    use super::*;
    use crate::host::HostBackend;
    use mali_sim::{self as sim, LockRegion};

    fn enabled() -> HostBackend {
        let b = HostBackend::g610();
        let regs = MaliAsRegs {
            transtab: 0x8000_0000,
            memattr: 0x8888_8888_8888_8888,
            transcfg: 6 | (55 - 48) << 6,
        };
        enable(&b, 3, &regs).unwrap();
        b
    }

    #[test]
    fn enable_latches_the_configuration_and_disable_unmaps() {
        let b = enabled();
        let cfg = b.gpu().with(|g| g.active_config(3)).unwrap();
        assert_eq!(cfg.transtab & !0xfff, 0x8000_0000);
        assert_eq!(cfg.mode(), 6);
        assert_eq!(b.gpu().read32(sim::regs::MMU_IRQ_MASK), 1 << 3);
        disable(&b, 3, false).unwrap();
        let cfg = b.gpu().with(|g| g.active_config(3)).unwrap();
        assert_eq!(cfg.mode(), 1);
        assert_eq!(b.gpu().read32(sim::regs::MMU_IRQ_MASK), 0);
        b.gpu()
            .with(|g| assert!(g.bus_errors().is_empty(), "{:?}", g.bus_errors()));
    }

    #[test]
    fn lock_regions_are_what_the_hardware_locks() {
        let b = enabled();
        for (start, size) in [
            (0x1234_5000u64, 0x1000u64),
            (0x1f_f000, 0x2000),
            (0x4000_0000, 0x40_0000),
            (0x7f_ffff_f000, 0x1000),
            (0x10_0000, 0x3_0000),
        ] {
            let (base, len) = lock(&b, 3, start, size).unwrap();
            let locked = b.gpu().with(|g| g.locked_region(3)).unwrap();
            assert_eq!((locked.base, locked.last), (base, base + len - 1));
            assert!(locked.contains(start) && locked.contains(start + size - 1));
            // The simulator's own encoder (written from the same description) agrees.
            let v = LockRegion::encode(start, size).unwrap();
            assert_eq!(LockRegion::decode(v), locked);
            unlock(&b, 3).unwrap();
            assert_eq!(b.gpu().with(|g| g.locked_region(3)), None);
        }
        // The cache-flush interrupt was acknowledged each time.
        assert_eq!(
            b.gpu().read32(sim::regs::GPU_IRQ_RAWSTAT) & sim::regs::gpu_irq::CLEAN_CACHES_COMPLETED,
            0
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // 10^4 simulated polls
    fn stuck_commands_time_out() {
        let b = enabled();
        b.gpu().with(|g| g.faults_mut().mmu_command_stuck = true);
        assert_eq!(
            send_command(&b, 3, as_command::UPDATE),
            Err(Error::TimedOut)
        );
        assert_eq!(b.log_lines().last().unwrap(), "AS_ACTIVE bit stuck on AS3");
        assert_eq!(
            send_command(&b, 16, as_command::UPDATE),
            Err(Error::Invalid)
        );
    }

    #[test]
    fn slots_release_and_reuse() {
        let mut s = AsSlots::new(20);
        assert_eq!(s.count(), MAX_AS);
        let mut none = AsSlots::new(0);
        assert_eq!(none.acquire(1), (0, None));
        assert_eq!(none.slot_of(1), None);
        assert_eq!(s.acquire(7), (0, None));
        assert_eq!(s.release(7), Some(0));
        assert_eq!(s.release(7), None);
        assert_eq!(s.acquire(8), (0, None));
    }
}
