// SPDX-License-Identifier: GPL-2.0 OR MIT

//! `sm_map` / `sm_unmap` throughput with 10^3, 10^5 and 10^6 existing mappings, side by side
//! with `rangemap::RangeMap` doing the same insert / remove sequence.
//!
//! Run with `cargo bench -p gpukit-gpuvm --bench sm`.
//!
//! The VM holds `n` one-page mappings of one object, one every two pages. Each `map` iteration
//! maps one page over a randomly chosen existing mapping (one unmap op plus one map op, applied
//! by the driver callbacks); each `unmap_map` iteration unmaps a randomly chosen mapping and
//! maps it back (two requests). `RangeMap` gets the same `insert` / `remove` calls on the same
//! ranges, from the same random sequence, so both hold `n` mappings throughout. The
//! `*_map_seq` cases do what `map` does, but walk the existing mappings in address order
//! instead of picking them at random.
//!
//! The gpuvm side does more than `RangeMap` for the same request: besides the index it keeps
//! the object's VM-BO and its list of VAs (unlinking a VA writes its two list neighbours, which
//! after the random churn are at random places) and runs the driver callbacks with their
//! proof tokens. Driver data is a `u64` (56-byte VA slots); the index nodes sit in their own
//! storage, sized with `IndexNode::needed`.
//!
//! `chain_floor` is not a VA manager: it measures what this machine's memory charges for the
//! one thing every random request of a manager with drm_gpuvm's data model has to do. Finding
//! and unlinking a VA means reading an index leaf, then the VA record the leaf names, then
//! writing the VA's two neighbours on its VM-BO's list, whose places the record holds: three
//! dependent cache-line accesses, the last two in parallel. `chain_floor` does exactly that
//! over arrays as large as the VM's at `n` (one 64-byte line per leaf of 16 VAs, one per VA
//! record, random links), and nothing else: no search inside the leaf, no inner levels, no ops.
//! Each access depends on the one before, and each iteration on the last, as the requests of
//! a VM_BIND do when each op is far longer than the CPU can look ahead.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use gpuvm::{
    BoSlot, Error, GemObject, Gpuvm, IndexNode, Mapping, OpMap, OpMapped, OpRemap, OpRemapped,
    OpUnmap, OpUnmapped, SmOps, VaSlot, VmConfig,
};
use rangemap::RangeMap;

const P: u64 = 0x1000;

#[derive(Clone)]
struct Bo(u64);

impl GemObject for Bo {
    fn id(&self) -> u64 {
        self.0
    }
    fn size(&self) -> u64 {
        1 << 40
    }
    fn resv_id(&self) -> u64 {
        0
    }
}

/// Applies every op, as a driver without page tables would.
struct Apply;

impl SmOps<Bo, u64> for Apply {
    type Error = Error;
    fn sm_step_map<'op>(&mut self, op: OpMap<'op, Bo, u64>) -> Result<OpMapped<'op>, Error> {
        let tag = op.addr();
        Ok(op.insert(tag))
    }
    fn sm_step_unmap<'op>(&mut self, op: OpUnmap<'op, Bo, u64>) -> Result<OpUnmapped<'op>, Error> {
        Ok(op.remove().0)
    }
    fn sm_step_remap<'op>(&mut self, op: OpRemap<'op, Bo, u64>) -> Result<OpRemapped<'op>, Error> {
        Ok(op.remap(|d, _| *d).0)
    }
}

/// A small deterministic generator (64-bit LCG).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn bench(c: &mut Criterion) {
    let bo = Bo(1);
    let mut group = c.benchmark_group("sm");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in [1_000u64, 100_000, 1_000_000] {
        let mut vas: Vec<VaSlot<u64>> = (0..n + 8).map(|_| VaSlot::new()).collect();
        let mut bos: Vec<BoSlot<Bo>> = (0..2).map(|_| BoSlot::new()).collect();
        let mut nodes = vec![IndexNode::new(); IndexNode::needed(vas.len())];
        let mut vm = Gpuvm::with_nodes(
            VmConfig::new(0, 1 << 48).align(P),
            vas.as_mut_slice(),
            bos.as_mut_slice(),
            nodes.as_mut_slice(),
        )
        .unwrap();
        let mut rm = RangeMap::new();
        for i in 0..n {
            vm.sm_map(&mut Apply, Mapping::new(2 * i * P, P, &bo, 2 * i * P))
                .unwrap();
            rm.insert(2 * i * P..2 * i * P + P, 2 * i * P);
        }
        assert_eq!(vm.len() as u64, n);

        let mut rng = Lcg(1);
        group.bench_function(BenchmarkId::new("gpuvm_map", n), |b| {
            b.iter(|| {
                let a = 2 * rng.below(n) * P;
                vm.sm_map(&mut Apply, Mapping::new(a, P, &bo, a)).unwrap();
            })
        });
        let mut rng = Lcg(1);
        group.bench_function(BenchmarkId::new("rangemap_map", n), |b| {
            b.iter(|| {
                let a = 2 * rng.below(n) * P;
                rm.insert(a..a + P, a);
            })
        });
        let mut rng = Lcg(2);
        group.bench_function(BenchmarkId::new("gpuvm_unmap_map", n), |b| {
            b.iter(|| {
                let a = 2 * rng.below(n) * P;
                vm.sm_unmap(&mut Apply, a, P).unwrap();
                vm.sm_map(&mut Apply, Mapping::new(a, P, &bo, a)).unwrap();
            })
        });
        let mut rng = Lcg(2);
        group.bench_function(BenchmarkId::new("rangemap_unmap_map", n), |b| {
            b.iter(|| {
                let a = 2 * rng.below(n) * P;
                rm.remove(a..a + P);
                rm.insert(a..a + P, a);
            })
        });
        let mut i = 0;
        group.bench_function(BenchmarkId::new("gpuvm_map_seq", n), |b| {
            b.iter(|| {
                let a = 2 * (i % n) * P;
                i += 1;
                vm.sm_map(&mut Apply, Mapping::new(a, P, &bo, a)).unwrap();
            })
        });
        let mut i = 0;
        group.bench_function(BenchmarkId::new("rangemap_map_seq", n), |b| {
            b.iter(|| {
                let a = 2 * (i % n) * P;
                i += 1;
                rm.insert(a..a + P, a);
            })
        });
        assert_eq!(vm.len() as u64, n);
        black_box(rm.iter().count());
        drop((vas, nodes, rm));

        let leaves = (n / 16).max(1);
        let mut rng = Lcg(3);
        let leaf: Vec<[u64; 8]> = (0..leaves).map(|_| [rng.below(n); 8]).collect();
        let mut rec: Vec<[u64; 8]> = (0..n)
            .map(|_| [rng.below(n), rng.below(n), 0, 0, 0, 0, 0, 0])
            .collect();
        let mut rng = Lcg(4);
        let mut carry = 0u64;
        group.bench_function(BenchmarkId::new("chain_floor", n), |b| {
            b.iter(|| {
                let l = (rng.below(leaves) ^ (carry & 1)) as usize % leaf.len();
                let va = leaf[l][0] as usize;
                let [prev, next, ..] = rec[va];
                rec[prev as usize][2] += 1;
                rec[next as usize][3] += 1;
                carry = rec[prev as usize][2] ^ rec[next as usize][3];
            })
        });
        black_box(rec.len());
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
