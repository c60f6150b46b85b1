// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Scoreboards: the asynchronous half of the command-stream engine.
//!
//! # The hardware
//!
//! A command stream does not wait for the work it starts. Instructions that hand work to an
//! endpoint (`RUN_*`, `FINISH_*`), move memory (`LOAD_MULTIPLE`, `STORE_MULTIPLE`) or write a
//! result (`SYNC_ADD`, `SYNC_SET`, `STORE_STATE`, `FLUSH_CACHE2`, `HEAP_OPERATION`,
//! `TRACE_POINT`) only *issue* it and go on with the next instruction. Each issued operation is
//! counted on a *scoreboard entry* (slot): the run and finish instructions on the stream's
//! endpoint entry, loads and stores on its "other" entry (both chosen with `SET_SB_ENTRY`), the
//! rest on the slot their `signal_slot` field names. A `WAIT` with a mask of slots stops the
//! stream until every operation issued on those slots has finished; the `wait_mask` of an
//! asynchronous instruction defers *that operation* (not the stream) until the named slots
//! drain. So a stream that signals a sync object without waiting for its work signals early,
//! and a register loaded by `LOAD_MULTIPLE` holds its old value until the load's slot drains.
//!
//! # The simulation
//!
//! Each stream keeps up to [`MAX_PENDING`](crate::csf::MAX_PENDING) operations in flight, in issue order; issuing one
//! more stalls the stream until one finishes, as a full hardware queue would. An operation
//! starts once every operation issued before it on a slot of its wait mask has finished, and
//! finishes a fixed time later: [`Timings::cs_work_ns`](crate::Timings::cs_work_ns) for work on
//! an endpoint, [`Timings::cache_flush_ns`](crate::Timings::cache_flush_ns) for a cache flush,
//! [`Timings::cs_mem_ns`](crate::Timings::cs_mem_ns) for loads, stores and `STORE_STATE`; a sync
//! operation writes its object as soon as its wait mask allows (at once if nothing holds it
//! back: a stream that signals while its work runs signals early, at the instruction). Its effect (the memory or
//! registers it writes) happens when it finishes. Work on an endpoint runs no shader: it only
//! occupies its slot for its duration. The engine moves in steps of
//! [`Timings::cs_step_ns`](crate::Timings::cs_step_ns): an operation due before a step ends
//! finishes at the end of that step (after the streams' instructions of the step), one due
//! later in the step it falls in.
//!
//! A group suspended with operations in flight lets them finish first (in issue order, at
//! once: the time the firmware would wait is not modelled), so that the suspend buffer holds
//! no half-done work.

use super::{Data, Gpu, Step};
use crate::csf::{heap, MAX_PENDING};
use crate::mem::PhysMemory;

/// What an operation does when it finishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deferred {
    /// Work on an endpoint; `progress`: bump the stream's progress counter when done.
    Work { progress: bool },
    /// `STORE_MULTIPLE`: the registers as they were at issue.
    Store { va: u64, mask: u16, vals: [u32; 16] },
    /// `LOAD_MULTIPLE`: registers `base + i` from memory.
    Load { va: u64, base: u8, mask: u16 },
    /// `SYNC_ADD`/`SYNC_SET`: `wide` for the 64-bit forms.
    Sync {
        va: u64,
        wide: bool,
        add: bool,
        data: u64,
        propagate: bool,
        system: bool,
    },
    /// `STORE_STATE` of the state `sel` selects.
    State { va: u64, sel: u8 },
    /// `FLUSH_CACHE2`: `id` is the flush ID the stream passed; `flush` false when every mode
    /// is "none".
    Flush { id: u32, flush: bool },
    /// `HEAP_OPERATION` (or `FINISH_FRAGMENT`'s "fragment completed"): bump the `u32` counter at
    /// `field` of the heap context `ctx`.
    HeapCount { ctx: u64, field: u64 },
    /// Waits and signals, writes nothing (`TRACE_POINT`: the firmware enables no trace buffer).
    Nothing,
}

/// One operation in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    seq: u32,
    slot: u8,
    waits: u16,
    /// When it finishes; `None` while it waits for its `waits` slots.
    done_at: Option<u64>,
    /// Whether the flush ID said the caches need no flush (decided when it starts).
    skipped: bool,
    what: Deferred,
}

/// A stream's scoreboard: its entries and the operations counted on them.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct Scoreboard {
    ops: [Option<Pending>; MAX_PENDING],
    next_seq: u32,
    /// The entry run and finish instructions signal (`SET_SB_ENTRY`).
    pub(crate) endpoint: u8,
    /// The entry loads and stores signal (`SET_SB_ENTRY`).
    pub(crate) other: u8,
    /// What `CS_STATUS_SCOREBOARDS` was last set to.
    pub(crate) reported: u16,
}

impl Scoreboard {
    /// Whether any operation is in flight on a slot of `mask`.
    pub(crate) fn busy(&self, mask: u16) -> bool {
        self.ops.iter().flatten().any(|p| mask & (1 << p.slot) != 0)
    }

    /// The entries with operations in flight, a bit each.
    pub(crate) fn mask(&self) -> u16 {
        self.ops.iter().flatten().fold(0, |m, p| m | 1 << p.slot)
    }

    /// Whether nothing is in flight.
    pub(crate) fn is_idle(&self) -> bool {
        self.ops.iter().all(Option::is_none)
    }

    /// Whether another operation can be issued now.
    pub(crate) fn has_room(&self) -> bool {
        self.ops.iter().any(Option::is_none)
    }

    /// Issues `what` on `slot`, to start once the slots of `waits` drain. The caller has
    /// checked [`has_room`](Self::has_room); without room nothing is issued and `false` comes
    /// back.
    pub(crate) fn issue(&mut self, slot: u8, waits: u16, what: Deferred) -> bool {
        let Some(free) = self.ops.iter_mut().find(|o| o.is_none()) else {
            return false;
        };
        *free = Some(Pending {
            seq: self.next_seq,
            slot,
            waits,
            done_at: None,
            skipped: false,
            what,
        });
        self.next_seq = self.next_seq.wrapping_add(1);
        true
    }

    /// Forgets everything in flight (a terminate or a reset).
    pub(crate) fn clear(&mut self) {
        self.ops = [None; MAX_PENDING];
    }

    /// Makes the scoreboard what [`Scoreboard::default`] is, in place (see `Stream::clear`).
    pub(crate) fn reset(&mut self) {
        // Naming every field makes adding one without resetting it a compile error.
        let Scoreboard {
            ops,
            next_seq,
            endpoint,
            other,
            reported,
        } = self;
        ops.fill(None);
        *next_seq = 0;
        *endpoint = 0;
        *other = 0;
        *reported = 0;
    }

    /// The index of the oldest operation satisfying `f`.
    fn oldest(&self, f: impl Fn(&Pending) -> bool) -> Option<usize> {
        self.ops
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.as_ref().filter(|p| f(p)).map(|p| (i, p.seq)))
            .min_by_key(|&(_, seq)| seq.wrapping_sub(self.next_seq))
            .map(|(i, _)| i)
    }

    /// Whether `p` must still wait: something issued before it on one of its slots is in
    /// flight. Sequence numbers compare relative to the next one, so that wrapping is harmless.
    fn held(&self, p: &Pending) -> bool {
        let age = |seq: u32| seq.wrapping_sub(self.next_seq);
        self.ops
            .iter()
            .flatten()
            .any(|q| p.waits & (1 << q.slot) != 0 && age(q.seq) < age(p.seq))
    }

    /// Whether something issued before `p` is still in flight.
    fn older_in_flight(&self, p: &Pending) -> bool {
        let age = |seq: u32| seq.wrapping_sub(self.next_seq);
        self.ops.iter().flatten().any(|q| age(q.seq) < age(p.seq))
    }
}

impl<M: PhysMemory> Gpu<M> {
    fn op_latency(&self, what: &Deferred) -> u64 {
        let t = &self.cfg.timings;
        match what {
            Deferred::Work { .. } => t.cs_work_ns,
            Deferred::Flush { .. } => t.cache_flush_ns,
            // A sync operation's write happens as soon as its wait allows.
            Deferred::Sync { .. } => 0,
            _ => t.cs_mem_ns,
        }
    }

    /// Starts what may start and finishes what is due by `horizon`, for stream `s` of group
    /// `n` whose accesses go through address space `as_nr`. With `drain`, everything finishes
    /// now, in issue order (a suspend). An access that stalls on a locked region leaves its
    /// operation in flight; one that faults stops here with the fault.
    pub(super) fn sb_advance(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        horizon: u64,
        drain: bool,
    ) -> Result<(), Step> {
        loop {
            self.sb_start(n, s, drain);
            // Finish the oldest due operation, then look again: it may release others.
            let sb = &self.csf.groups[n].streams[s].sb;
            let due = sb.oldest(|p| p.done_at.is_some_and(|t| drain || t <= horizon));
            let Some(i) = due else { return Ok(()) };
            let Some(p) = sb.ops[i] else { return Ok(()) };
            let early = sb.older_in_flight(&p);
            self.finish_op(n, s, as_nr, &p, early, drain)?;
            self.csf.groups[n].streams[s].sb.ops[i] = None;
        }
    }

    /// Starts, oldest first, the operations of stream `s` of group `n` that nothing issued
    /// before them holds back (with `drain`, to finish now).
    pub(super) fn sb_start(&mut self, n: usize, s: usize, drain: bool) {
        let now = self.now;
        for i in 0..MAX_PENDING {
            let sb = &self.csf.groups[n].streams[s].sb;
            let Some(p) = sb.ops[i] else { continue };
            if p.done_at.is_some() || sb.held(&p) {
                continue;
            }
            let skipped = match p.what {
                // A flush is pointless if one finished after the stream sampled the ID: the
                // 24-bit IDs are compared modulo their range.
                Deferred::Flush { id, flush } => {
                    let since = self.latest_flush_id.wrapping_sub(id) & 0xff_ffff;
                    !flush || (1..0x80_0000).contains(&since)
                }
                _ => false,
            };
            let latency = if skipped { 0 } else { self.op_latency(&p.what) };
            let op = self.csf.groups[n].streams[s].sb.ops[i].as_mut();
            if let Some(op) = op {
                op.done_at = Some(if drain {
                    now
                } else {
                    now.saturating_add(latency)
                });
                op.skipped = skipped;
            }
        }
    }

    /// The effect of `p` as it finishes. `early`: something issued before it is still in
    /// flight (counted for a sync write, see [`Gpu::early_signals`]).
    fn finish_op(
        &mut self,
        n: usize,
        s: usize,
        as_nr: usize,
        p: &Pending,
        early: bool,
        drain: bool,
    ) -> Result<(), Step> {
        // A suspend drains through the lock: the firmware's wait for the work is not modelled.
        let access = |gpu: &mut Self, va: u64, data: Data<'_>| {
            if drain {
                gpu.stream_access_unlocked(n, s, as_nr, va, data)
            } else {
                gpu.stream_access(n, s, as_nr, va, data, false)
            }
        };
        match p.what {
            Deferred::Work { progress } => {
                if progress {
                    let st = &mut self.csf.groups[n].streams[s];
                    st.progress = st.progress.wrapping_add(1);
                }
            }
            Deferred::Store { va, mask, vals } => {
                for (i, v) in vals.iter().enumerate() {
                    if mask & (1 << i) != 0 {
                        let at = va.wrapping_add(4 * i as u64);
                        access(self, at, Data::Write(&v.to_le_bytes()))?;
                    }
                }
            }
            Deferred::Load { va, base, mask } => {
                let mut vals = [0u32; 16];
                for (i, v) in vals.iter_mut().enumerate() {
                    if mask & (1 << i) != 0 {
                        let mut b = [0u8; 4];
                        access(self, va.wrapping_add(4 * i as u64), Data::Read(&mut b))?;
                        *v = u32::from_le_bytes(b);
                    }
                }
                let regs = &mut self.csf.groups[n].streams[s].regs;
                for (i, v) in vals.iter().enumerate() {
                    if mask & (1 << i) != 0 {
                        if let Some(r) = regs.get_mut(usize::from(base) + i) {
                            *r = *v;
                        }
                    }
                }
            }
            Deferred::Sync {
                va,
                wide,
                add,
                data,
                propagate,
                system,
            } => {
                let len = if wide { 8 } else { 4 };
                let mut b = [0u8; 8];
                let value = if add {
                    access(self, va, Data::Read(&mut b[..len]))?;
                    u64::from_le_bytes(b).wrapping_add(data)
                } else {
                    data
                };
                access(self, va, Data::Write(&value.to_le_bytes()[..len]))?;
                if propagate {
                    // The object's error word follows its value.
                    let error = u32::from(self.csf.groups[n].streams[s].error);
                    let at = va.wrapping_add(len as u64);
                    access(self, at, Data::Write(&error.to_le_bytes()))?;
                }
                if early {
                    self.tallies.0 = self.tallies.0.saturating_add(1);
                }
                if system && self.csg_event(n, crate::csf::csg::SYNC_UPDATE).is_err() {
                    return Err(Step::McuFault);
                }
                self.csf.synced = true;
            }
            Deferred::State { va, sel } => {
                let v = match sel {
                    0 => self.timestamp_now(),
                    1 => self.cycles(),
                    2 => self.tallies.1,
                    _ => u64::from(self.csf.groups[n].streams[s].error),
                };
                // Without COUNTER_EN the firmware gives streams no counter: 0 is stored.
                let v = if sel > 1 || self.counters_enabled {
                    v
                } else {
                    0
                };
                access(self, va, Data::Write(&v.to_le_bytes()))?;
            }
            Deferred::Flush { .. } => {
                if !p.skipped {
                    self.latest_flush_id = self.latest_flush_id.wrapping_add(1);
                }
            }
            Deferred::HeapCount { ctx, field } => {
                let at = ctx.wrapping_add(field);
                let mut b = [0u8; 4];
                access(self, at, Data::Read(&mut b))?;
                let v = u32::from_le_bytes(b).wrapping_add(1);
                access(self, at, Data::Write(&v.to_le_bytes()))?;
            }
            Deferred::Nothing => {}
        }
        Ok(())
    }
}

/// The heap-context counter a `HEAP_OPERATION` bumps, by operation number.
pub(super) const fn heap_counter(op: u8) -> Option<u64> {
    match op {
        0 => Some(heap::CTX_VT_START),
        1 => Some(heap::CTX_VT_END),
        3 => Some(heap::CTX_FRAG_END),
        _ => None,
    }
}
