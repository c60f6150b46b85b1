// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Power domains.
//!
//! A Mali GPU powers its blocks on demand, per *domain*: the L2 cache (with the MMU and the
//! memory interface behind it), the shader cores and the tiler. Each domain has a bit per
//! instance (`*_PRESENT` says which exist). The driver writes a bit mask to `*_PWRON` or
//! `*_PWROFF`; the requested instances then show in `*_PWRTRANS` while they change state and
//! in `*_READY` once powered. The GPU raises `POWER_CHANGED_SINGLE` each time a domain
//! finishes a transition and `POWER_CHANGED_ALL` when no transition is left.
//!
//! Shader cores and the tiler sit behind the L2: in the simulation they only finish powering
//! up once the L2 is ready, and the L2 only finishes powering down once they are all off.

/// A power domain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Domain {
    /// The L2 cache.
    L2,
    /// The shader cores.
    Shader,
    /// The tiler.
    Tiler,
}

/// State of one domain.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PowerDomain {
    pub(crate) present: u64,
    pub(crate) ready: u64,
    /// Instances asked to power on that are not ready yet.
    pub(crate) on: u64,
    /// Instances asked to power off that are still ready.
    pub(crate) off: u64,
    /// When the current transitions finish; `None` when none is scheduled (idle, blocked on
    /// another domain, or stuck by fault injection).
    pub(crate) deadline: Option<u64>,
}

impl PowerDomain {
    pub(crate) fn new(present: u64) -> Self {
        PowerDomain {
            present,
            ..PowerDomain::default()
        }
    }

    /// Bits changing state (`*_PWRTRANS`).
    pub(crate) fn trans(&self) -> u64 {
        self.on | self.off
    }

    /// Handles a write of `mask` to `*_PWRON` (`on`) or `*_PWROFF`; returns whether a
    /// transition was started.
    pub(crate) fn request(&mut self, mask: u64, on: bool) -> bool {
        let mask = mask & self.present;
        if on {
            self.off &= !mask;
            self.on |= mask & !self.ready;
        } else {
            self.on &= !mask;
            self.off |= mask & self.ready;
        }
        self.trans() != 0
    }

    /// Finishes the transitions that may finish: power-ons if `may_on`, power-offs if
    /// `may_off`. Returns whether anything changed.
    pub(crate) fn finish(&mut self, may_on: bool, may_off: bool) -> bool {
        let before = self.ready;
        let mut changed = false;
        if may_on && self.on != 0 {
            self.ready |= self.on;
            self.on = 0;
            changed = true;
        }
        if may_off && self.off != 0 {
            self.ready &= !self.off;
            self.off = 0;
            changed = true;
        }
        changed || before != self.ready
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn requests_only_touch_present_bits() {
        let mut d = PowerDomain::new(0b101);
        assert!(d.request(0b111, true));
        assert_eq!(d.trans(), 0b101);
        assert!(d.finish(true, true));
        assert_eq!((d.ready, d.trans()), (0b101, 0));
        assert!(!d.request(0b001, true), "already on");
        assert!(d.request(0b001, false));
        assert_eq!(d.trans(), 0b001);
        // A power-on request cancels a pending power-off.
        d.request(0b001, true);
        assert_eq!(d.trans(), 0);
        assert!(!d.finish(true, true));
    }
}
