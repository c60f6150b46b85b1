// SPDX-License-Identifier: GPL-2.0 OR MIT

//! KUnit suite `gpukit_gpuvm_vs_c`: this crate and the kernel's own
//! `drivers/gpu/drm/drm_gpuvm.c`, given the same random requests in one kernel.
//!
//! Both VMs span `[0, 4 GiB)`; requests fall in its first 64 MiB so that they overlap often.
//! Each step is a map (of one of four 16 MiB objects at a page offset, or sparse one time in
//! ten) or an unmap of a random range. The C side turns it into an ops list
//! (`drm_gpuvm_sm_map_ops_create` / `drm_gpuvm_sm_unmap_ops_create`) and applies it; this
//! crate runs `sm_map` / `sm_unmap` with a driver that records every op. The two streams must
//! be identical, op by op: kind, addresses, ranges, offsets, object, `keep`, and the remnants
//! of a remap. Starting from the same empty VM, identical streams keep identical trees.

use ::kernel::prelude::*;

#[kunit_tests(gpukit_gpuvm_vs_c)]
mod tests {
    use core::ffi::c_void;
    use core::ptr::NonNull;

    use ::kernel::alloc::VVec;
    use ::kernel::prelude::*;
    use gpuvm::{
        BoSlot, Error, GemObject, Gpuvm, IndexNode, Mapping, OpMap, OpMapped, OpRemap, OpRemapped,
        OpUnmap, OpUnmapped, SmOps, VaSlot, VmConfig,
    };

    /// One operation, as both sides report it (the layout of `struct gpukit_c_gpuva_op`).
    #[repr(C)]
    #[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
    struct Rec {
        kind: u32,
        keep: u32,
        addr: u64,
        range: u64,
        offset: u64,
        obj: u64,
        has_prev: u32,
        has_next: u32,
        prev_addr: u64,
        prev_range: u64,
        prev_offset: u64,
        next_addr: u64,
        next_range: u64,
        next_offset: u64,
    }

    // `kernel/vs_c.c`.
    extern "C" {
        fn gpukit_c_vm_new(start: u64, range: u64, objs: u32, obj_size: u64) -> *mut c_void;
        fn gpukit_c_vm_map(
            vm: *mut c_void,
            addr: u64,
            range: u64,
            obj: u32,
            offset: u64,
            ops: *mut Rec,
            cap: u32,
            n: *mut u32,
        ) -> core::ffi::c_int;
        fn gpukit_c_vm_unmap(
            vm: *mut c_void,
            addr: u64,
            range: u64,
            ops: *mut Rec,
            cap: u32,
            n: *mut u32,
        ) -> core::ffi::c_int;
        fn gpukit_c_vm_free(vm: *mut c_void);
        fn gpukit_c_vm_sm_map(
            vm: *mut c_void,
            addr: u64,
            range: u64,
            obj: u32,
            offset: u64,
        ) -> core::ffi::c_int;
        fn gpukit_c_vm_sm_unmap(vm: *mut c_void, addr: u64, range: u64) -> core::ffi::c_int;
    }

    const OBJS: u32 = 4;
    const OBJ_SIZE: u64 = 16 << 20;
    const PAGE: u64 = 4096;
    const CAP: usize = 64;

    /// The C VM.
    ///
    /// # Invariants
    ///
    /// `0` came from `gpukit_c_vm_new` and is freed only by `drop`.
    struct CVm(NonNull<c_void>);

    impl CVm {
        fn map(
            &self,
            addr: u64,
            range: u64,
            obj: u32,
            offset: u64,
            out: &mut [Rec; CAP],
        ) -> Result<usize> {
            let mut n = 0;
            // SAFETY: `self.0` is live (type invariant); `out` has room for `CAP` records.
            let ret = unsafe {
                gpukit_c_vm_map(
                    self.0.as_ptr(),
                    addr,
                    range,
                    obj,
                    offset,
                    out.as_mut_ptr(),
                    CAP as u32,
                    &mut n,
                )
            };
            if ret != 0 {
                return Err(::kernel::error::Error::from_errno(ret));
            }
            Ok(n as usize)
        }

        fn unmap(&self, addr: u64, range: u64, out: &mut [Rec; CAP]) -> Result<usize> {
            let mut n = 0;
            // SAFETY: As above.
            let ret = unsafe {
                gpukit_c_vm_unmap(
                    self.0.as_ptr(),
                    addr,
                    range,
                    out.as_mut_ptr(),
                    CAP as u32,
                    &mut n,
                )
            };
            if ret != 0 {
                return Err(::kernel::error::Error::from_errno(ret));
            }
            Ok(n as usize)
        }
    }

    impl Drop for CVm {
        fn drop(&mut self) {
            // SAFETY: `self.0` is live, freed once here.
            unsafe { gpukit_c_vm_free(self.0.as_ptr()) };
        }
    }

    #[derive(Clone)]
    struct Bo(u64);

    impl GemObject for Bo {
        fn id(&self) -> u64 {
            self.0
        }
        fn size(&self) -> u64 {
            OBJ_SIZE
        }
        fn resv_id(&self) -> u64 {
            0
        }
    }

    /// Records the ops it applies into a fixed array (nothing is allocated while applying).
    struct Recorder {
        ops: [Rec; CAP],
        len: usize,
    }

    impl Recorder {
        fn push(&mut self, r: Rec) -> core::result::Result<(), Error> {
            let slot = self.ops.get_mut(self.len).ok_or(Error::NoMemory)?;
            *slot = r;
            self.len += 1;
            Ok(())
        }
    }

    fn rec_of(m: &Mapping<'_, Bo>) -> Rec {
        Rec {
            addr: m.addr,
            range: m.range,
            offset: m.offset,
            obj: m.obj.map_or(0, |o| o.0),
            ..Rec::default()
        }
    }

    impl SmOps<Bo, u32> for Recorder {
        type Error = Error;

        fn sm_step_map<'op>(
            &mut self,
            op: OpMap<'op, Bo, u32>,
        ) -> core::result::Result<OpMapped<'op>, Error> {
            self.push(rec_of(&op.mapping()))?;
            Ok(op.insert(0))
        }

        fn sm_step_unmap<'op>(
            &mut self,
            op: OpUnmap<'op, Bo, u32>,
        ) -> core::result::Result<OpUnmapped<'op>, Error> {
            let r = Rec {
                kind: 1,
                keep: op.keep().into(),
                ..rec_of(&op.va().mapping())
            };
            self.push(r)?;
            Ok(op.remove().0)
        }

        fn sm_step_remap<'op>(
            &mut self,
            op: OpRemap<'op, Bo, u32>,
        ) -> core::result::Result<OpRemapped<'op>, Error> {
            let mut r = Rec {
                kind: 2,
                keep: op.keep().into(),
                ..rec_of(&op.va().mapping())
            };
            if let Some(p) = op.prev() {
                r.has_prev = 1;
                (r.prev_addr, r.prev_range, r.prev_offset) = (p.addr, p.range, p.offset);
            }
            if let Some(n) = op.next() {
                r.has_next = 1;
                (r.next_addr, r.next_range, r.next_offset) = (n.addr, n.range, n.offset);
            }
            self.push(r)?;
            Ok(op.remap(|old, _| *old).0)
        }
    }

    /// xorshift64*, reproducible from the seed printed with a failure.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    fn differential(seed: u64, steps: u32) -> Result<(u32, usize)> {
        const SLOTS: usize = 4096;
        let mut vas = KVec::with_capacity(SLOTS, GFP_KERNEL)?;
        for _ in 0..SLOTS {
            vas.push(VaSlot::<u32>::new(), GFP_KERNEL)?;
        }
        let mut bos = KVec::with_capacity(8, GFP_KERNEL)?;
        for _ in 0..8 {
            bos.push(BoSlot::<Bo>::new(), GFP_KERNEL)?;
        }
        let needed = IndexNode::needed(SLOTS);
        let mut nodes = KVec::with_capacity(needed, GFP_KERNEL)?;
        for _ in 0..needed {
            nodes.push(IndexNode::new(), GFP_KERNEL)?;
        }
        let mut vm = Gpuvm::with_nodes(
            VmConfig::new(0, 1 << 32),
            &mut vas[..],
            &mut bos[..],
            &mut nodes[..],
        )?;
        // SAFETY: Returns NULL or a new C VM, owned by `CVm` from here on.
        let c = NonNull::new(unsafe { gpukit_c_vm_new(0, 1 << 32, OBJS, OBJ_SIZE) })
            .map(CVm)
            .ok_or(ENOMEM)?;
        let objs = [Bo(1), Bo(2), Bo(3), Bo(4)];
        let mut rng = Rng(seed);
        // On the heap: two op arrays would take most of a kernel stack.
        let mut theirs = KBox::new([Rec::default(); CAP], GFP_KERNEL)?;
        let mut ours = KBox::new(
            Recorder {
                ops: [Rec::default(); CAP],
                len: 0,
            },
            GFP_KERNEL,
        )?;
        let mut ops_seen = 0;
        for step in 0..steps {
            let addr = rng.below(16 << 10) * PAGE;
            let range = (1 + rng.below(256)) * PAGE;
            ours.len = 0;
            let (ok, n) = if rng.below(10) < 7 {
                let sparse = rng.below(10) == 0;
                let o = rng.below(u64::from(OBJS)) as usize;
                let offset = if sparse {
                    0
                } else {
                    rng.below((OBJ_SIZE - range) / PAGE + 1) * PAGE
                };
                let req = if sparse {
                    Mapping::sparse(addr, range)
                } else {
                    Mapping::new(addr, range, &objs[o], offset)
                };
                let id = if sparse { 0 } else { o as u32 + 1 };
                let n = c.map(addr, range, id, offset, &mut theirs)?;
                (vm.sm_map(&mut *ours, req).is_ok(), n)
            } else {
                let n = c.unmap(addr, range, &mut theirs)?;
                (vm.sm_unmap(&mut *ours, addr, range).is_ok(), n)
            };
            ops_seen += n;
            if !ok || ours.len != n || ours.ops[..n] != theirs[..n] {
                pr_err!(
                    "gpuvm vs C: step {step} (seed {seed:#x}, request {addr:#x}+{range:#x}) differs\n"
                );
                for (i, (a, b)) in ours
                    .ops
                    .iter()
                    .zip(theirs.iter())
                    .take(n.max(ours.len))
                    .enumerate()
                {
                    pr_err!("  op {i}: rust {a:?}\n  op {i}: C    {b:?}\n");
                }
                return Err(EINVAL);
            }
        }
        // Unmapping everything, 1 MiB at a time, empties both with the same ops.
        for chunk in 0..(80u64 << 20) / (1 << 20) {
            ours.len = 0;
            let n = c.unmap(chunk << 20, 1 << 20, &mut theirs)?;
            vm.sm_unmap(&mut *ours, chunk << 20, 1 << 20)?;
            if ours.len != n || ours.ops[..n] != theirs[..n] {
                return Err(EINVAL);
            }
            ops_seen += n;
        }
        if vm.len() != 0 {
            return Err(EINVAL);
        }
        Ok((steps, ops_seen))
    }

    #[test]
    fn sm_map_and_sm_unmap_match_c() -> Result {
        let seed = 0x5eed_0003;
        let (steps, ops) = differential(seed, 3000)?;
        pr_info!(
            "differential: gpuvm: {steps} random requests ({ops} ops), seed {seed:#x}, identical\n"
        );
        assert!(ops > steps as usize);
        Ok(())
    }

    /// Nanoseconds on the monotonic clock.
    fn now_ns() -> i64 {
        // SAFETY: Reads the monotonic clock.
        unsafe { ::kernel::bindings::ktime_get() }
    }

    /// Applies every op at once (for building and measuring), counting nothing.
    struct Apply;

    impl SmOps<Bo, u32> for Apply {
        type Error = Error;

        fn sm_step_map<'op>(
            &mut self,
            op: OpMap<'op, Bo, u32>,
        ) -> core::result::Result<OpMapped<'op>, Error> {
            Ok(op.insert(0))
        }

        fn sm_step_unmap<'op>(
            &mut self,
            op: OpUnmap<'op, Bo, u32>,
        ) -> core::result::Result<OpUnmapped<'op>, Error> {
            Ok(op.remove().0)
        }

        fn sm_step_remap<'op>(
            &mut self,
            op: OpRemap<'op, Bo, u32>,
        ) -> core::result::Result<OpRemapped<'op>, Error> {
            Ok(op.remap(|old, _| *old).0)
        }
    }

    /// Unmap + map of one random 4K mapping among `n` live ones, both implementations in
    /// immediate mode (this crate's `sm_unmap`/`sm_map` on preallocated slots; C's
    /// `drm_gpuvm_sm_unmap`/`drm_gpuvm_sm_map` with callbacks that allocate and free their
    /// `struct drm_gpuva`s, as a C driver does). Returns ns per unmap + map for both, the best
    /// of three passes each.
    fn unmap_map_at(n: usize, rounds: u32) -> Result<(u64, u64)> {
        let slots = n + 8;
        let mut vas = VVec::with_capacity(slots, GFP_KERNEL)?;
        for _ in 0..slots {
            vas.push(VaSlot::<u32>::new(), GFP_KERNEL)?;
        }
        let mut bos = KVec::with_capacity(8, GFP_KERNEL)?;
        for _ in 0..8 {
            bos.push(BoSlot::<Bo>::new(), GFP_KERNEL)?;
        }
        let needed = IndexNode::needed(slots);
        let mut nodes = VVec::with_capacity(needed, GFP_KERNEL)?;
        for _ in 0..needed {
            nodes.push(IndexNode::new(), GFP_KERNEL)?;
        }
        let mut vm = Gpuvm::with_nodes(
            VmConfig::new(0, 1 << 47),
            &mut vas[..],
            &mut bos[..],
            &mut nodes[..],
        )?;
        // SAFETY: Returns NULL or a new C VM, owned by `CVm` from here on.
        let c = NonNull::new(unsafe { gpukit_c_vm_new(0, 1 << 47, OBJS, 1 << 40) })
            .map(CVm)
            .ok_or(ENOMEM)?;
        let bo = Bo(1);
        // Mappings of 4K every 8K, all at offset 0 of one object: with gaps between them,
        // nothing merges.
        let addr = |i: u64| i * 2 * PAGE;
        for i in 0..n as u64 {
            if let Err(e) = vm.map(Mapping::new(addr(i), PAGE, &bo, 0), 0) {
                pr_err!("gpuvm timing: map {i} of {n} failed: {e:?}\n");
                return Err(e.into());
            }
            // SAFETY: `c` is live.
            let r = unsafe { gpukit_c_vm_sm_map(c.0.as_ptr(), addr(i), PAGE, 1, 0) };
            if r != 0 {
                pr_err!("gpuvm timing: C map {i} of {n} failed: {r}\n");
                return Err(ENOMEM);
            }
        }
        let mut rng = Rng(0x5eed_0004 ^ n as u64);
        let picks: KVec<u64> = {
            let mut v = KVec::with_capacity(rounds as usize, GFP_KERNEL)?;
            for _ in 0..rounds {
                v.push(rng.below(n as u64), GFP_KERNEL)?;
            }
            v
        };
        // The same picks for both sides, once untimed (so that neither pays for the first run
        // of its code under QEMU's translator), then three timed passes with the sides
        // alternating; each side's best pass counts.
        let mut best = (u64::MAX, u64::MAX);
        for pass in 0..4 {
            let t0 = now_ns();
            for &i in picks.iter() {
                vm.sm_unmap(&mut Apply, addr(i), PAGE)?;
                vm.sm_map(&mut Apply, Mapping::new(addr(i), PAGE, &bo, 0))?;
            }
            let t1 = now_ns();
            for &i in picks.iter() {
                // SAFETY: `c` is live.
                let r = unsafe {
                    gpukit_c_vm_sm_unmap(c.0.as_ptr(), addr(i), PAGE)
                        | gpukit_c_vm_sm_map(c.0.as_ptr(), addr(i), PAGE, 1, 0)
                };
                if r != 0 {
                    return Err(ENOMEM);
                }
            }
            let t2 = now_ns();
            if pass > 0 {
                let per = |d: i64| (d.max(0) as u64) / u64::from(rounds);
                best = (best.0.min(per(t1 - t0)), best.1.min(per(t2 - t1)));
            }
        }
        if vm.len() != n {
            return Err(EINVAL);
        }
        Ok(best)
    }

    #[test]
    fn timing_unmap_map_against_c() -> Result {
        for (n, rounds) in [
            (1_000, 4_000),
            (10_000, 4_000),
            (100_000, 4_000),
            (1_000_000, 4_000),
        ] {
            let (rust, c) = unmap_map_at(n, rounds)?;
            let ratio_x100 = c * 100 / rust.max(1);
            pr_info!(
                "vs-C: gpuvm/unmap+map at {n} mappings: rust {rust} ns, C {c} ns, ratio {}.{:02}x\n",
                ratio_x100 / 100,
                ratio_x100 % 100
            );
        }
        Ok(())
    }
}
