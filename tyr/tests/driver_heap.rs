// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Tiler heaps end to end: `TILER_HEAP_CREATE`/`TILER_HEAP_DESTROY` with valid and malformed
//! arguments (the errno, and nothing changed), the chunk list in GPU memory, jobs whose
//! tiling grows a heap chunk by chunk through `TILER_OOM`, a job that needs more than
//! `max_chunks` failing while other groups keep working, a heap or VM destroyed under a job,
//! and VM destruction and file close releasing every chunk and context.

mod driver_common;
use driver_common::{errno, rig, Rig};
use mali_sim::{AccessType, PhysAddr};
use tyr::csf::instr;
use tyr::driver;
use tyr::uapi::*;
use tyr::umd::{Bo, Job, TilerHeap, Umd};

const EINVAL: i32 = -22;
const ENOENT: i32 = -2;
const ENOMEM: i32 = -12;
const EBUSY: i32 = -16;
const EFAULT: i32 = -14;
const WAIT: i64 = 600_000_000_000;
const K128: u32 = 128 << 10;
/// Words of tiler output a 128 KiB chunk holds (its 64-byte header excluded).
const WORDS_PER_CHUNK: u32 = (K128 - 64) / 8;

impl Rig {
    fn umd(&self) -> Umd {
        Umd::open(self.reg.device()).unwrap()
    }

    /// Live heap pools, heaps and chunks of the device.
    fn counts(&self) -> (usize, usize, usize) {
        self.reg.device().heaps.counts()
    }

    fn pages(&self) -> usize {
        self.reg.device().backend.gpu().memory().allocated_pages()
    }
}

/// Status of the fence a syncobj holds: `None` pending, `Some(0)` or `Some(-errno)`.
fn fence_status(umd: &Umd, h: u32) -> Option<i32> {
    let f = umd.client().file().syncobjs().fence(h).unwrap()?;
    f.status().map(|r| r.err().unwrap_or(0))
}

fn create(umd: &Umd, vm: u32, initial: u32, size: u32, max: u32, target: u32) -> i32 {
    errno(umd.tiler_heap_create(vm, initial, size, max, target))
}

fn destroy_raw(umd: &Umd, handle: u32, pad: u32) -> i32 {
    let mut a = TilerHeapDestroy { handle, pad };
    errno(umd.ioctl(DRM_IOCTL_PANTHOR_TILER_HEAP_DESTROY, &mut a))
}

/// Reads the u64 at `va` of VM `vm` through the simulated MMU (giving the VM an address
/// space).
fn gpu_rd64(rig: &Rig, umd: &Umd, vm: u32, va: u64) -> u64 {
    let dev = rig.reg.device();
    let slot = driver::vm_activate(dev, umd.client().file(), vm).unwrap();
    let gpu = dev.backend.gpu();
    let pa = gpu
        .with(|g| g.walk(slot, va, AccessType::Read))
        .unwrap_or_else(|f| panic!("{va:#x} is not mapped: {f:?}"))
        .pa;
    gpu.memory().read_u64(PhysAddr(pa.0)).unwrap()
}

/// The GPU never reached freed memory: a job using a destroyed heap takes a translation
/// fault (its chunks were unmapped first), not a bus error.
fn no_bus_errors(rig: &Rig) {
    let gpu = rig.reg.device().backend.gpu();
    gpu.with(|g| assert!(g.bus_errors().is_empty(), "{:?}", g.bus_errors()));
}

/// The chunk links of a heap's list, from its first chunk.
fn chunk_list(rig: &Rig, umd: &Umd, vm: u32, heap: &TilerHeap) -> Vec<u64> {
    let mut links = vec![heap.first_chunk_link()];
    loop {
        let next = gpu_rd64(rig, umd, vm, links.last().unwrap() & !0xfff);
        if next == 0 || links.len() > 64 {
            return links;
        }
        links.push(next);
    }
}

/// A VM with a 64 KiB BO mapped at `va`: code at offset 0, data at `DATA`.
struct Space {
    vm: u32,
    bo: Bo,
    va: u64,
}

const DATA: u64 = 0x8000;
/// Where tiling passes write their tiler and heap descriptors.
const DESC: u64 = 0xf000;

fn space(umd: &Umd, va: u64) -> Space {
    let vm = umd.vm_create().unwrap();
    let bo = umd.bo_create(0x10000).unwrap();
    umd.map(vm, &bo, va).unwrap();
    Space { vm, bo, va }
}

/// Writes `prog` at `code` in the space's BO, submits it as one job of queue 0 of `group`
/// signalling a new syncobj, which it returns.
fn submit(umd: &Umd, s: &Space, group: u32, code: u64, prog: &[u64]) -> u32 {
    umd.write_stream(&s.bo, code, prog).unwrap();
    let done = umd.syncobj_create(false).unwrap();
    let job = Job::new(0, s.va + code, 8 * prog.len() as u32).signal(done);
    umd.submit(group, &[job]).unwrap();
    done
}

/// A stream that stores `v` at the space's `DATA + off`.
fn store(s: &Space, off: u64, v: u32) -> [u64; 3] {
    [
        instr::move48(0, s.va + DATA + off),
        instr::move32(2, v),
        instr::store_multiple(2, 0, 0, 1),
    ]
}

#[test]
fn create_and_destroy_follow_panthor() {
    let rig = rig();
    let umd = rig.umd();
    let vm = umd.vm_create().unwrap();
    let vm2 = umd.vm_create().unwrap();
    let a = umd.tiler_heap_create(vm, 3, K128, 8, 4).unwrap();
    let b = umd.tiler_heap_create(vm, 1, 256 << 10, 1, 0).unwrap();
    let c = umd.tiler_heap_create(vm2, 2, 8 << 20, 2, 1).unwrap();
    assert_eq!(
        (a.handle, b.handle, c.handle),
        (vm << 16, vm << 16 | 1, vm2 << 16)
    );
    // Contexts one GPU cache line apart in the VM's kernel region, above userspace's range.
    assert_eq!(b.context_va, a.context_va + 64);
    assert!(a.context_va >= 1 << 47);
    assert_eq!(rig.counts(), (2, 3, 6));
    // The initial chunks are linked into a list in GPU memory; the context starts zeroed.
    let list = chunk_list(&rig, &umd, vm, &a);
    assert_eq!(list.len(), 3, "{list:x?}");
    assert!(list.iter().all(|l| l & 0xfff == u64::from(K128 >> 12)));
    assert_eq!(chunk_list(&rig, &umd, vm2, &c).len(), 2);
    assert_eq!(c.first_chunk_link() & 0xfff, 0x800);
    for off in (0..32).step_by(8) {
        assert_eq!(gpu_rd64(&rig, &umd, vm, a.context_va + off), 0);
    }
    // Destroying frees the index, which the next heap gets again (lowest first).
    let pages = rig.pages();
    umd.tiler_heap_destroy(&a).unwrap();
    assert_eq!(rig.counts(), (2, 2, 3));
    assert_eq!(pages - rig.pages(), 3 * (K128 as usize >> 12));
    assert_eq!(errno(umd.tiler_heap_destroy(&a)), EINVAL);
    let again = umd.tiler_heap_create(vm, 1, K128, 1, 0).unwrap();
    assert_eq!(again.handle, vm << 16);
    assert_eq!(again.context_va, a.context_va);
    umd.tiler_heap_destroy(&again).unwrap();
    umd.tiler_heap_destroy(&b).unwrap();
    umd.tiler_heap_destroy(&c).unwrap();
    // The pools stay (as panthor's) until their VM goes.
    assert_eq!(rig.counts(), (2, 0, 0));
}

#[test]
fn malformed_creates_and_destroys_change_nothing() {
    let rig = rig();
    let umd = rig.umd();
    let vm = umd.vm_create().unwrap();
    // A VM that never had a heap has no pool: ENOENT, as panthor answers.
    assert_eq!(destroy_raw(&umd, vm << 16, 0), ENOENT);
    let pages = rig.pages();
    let bad = [
        // (vm, initial, chunk size, max, errno)
        (0, 1, K128, 1, EINVAL),
        (vm + 7, 1, K128, 1, EINVAL),
        (vm, 0, K128, 1, EINVAL),
        (vm, 3, K128, 2, EINVAL),
        (vm, 1, K128 - 4096, 1, EINVAL),
        (vm, 1, (8 << 20) + 4096, 1, EINVAL),
        (vm, 1, K128 + 8, 1, EINVAL),
        (vm, 1, 0, 1, EINVAL),
        (vm, 1, u32::MAX, u32::MAX, EINVAL),
    ];
    for (v, initial, size, max, e) in bad {
        assert_eq!(
            create(&umd, v, initial, size, max, 0),
            e,
            "{v} {initial} {size:#x} {max}"
        );
        assert_eq!(rig.counts(), (0, 0, 0));
        assert_eq!(rig.pages(), pages);
    }
    // A valid create after all of that gets the first handle.
    let h = umd.tiler_heap_create(vm, 3, K128, 3, 0).unwrap();
    assert_eq!(h.handle, vm << 16);
    umd.tiler_heap_destroy(&h).unwrap();
    // Out of memory for the third chunk: ENOMEM, nothing left behind (the VM's page tables
    // for these addresses exist since the heap above).
    let pages = rig.pages();
    let mem = rig.reg.device().backend.gpu().memory();
    mem.set_page_limit(Some(pages + 1 + 2 * (K128 as usize >> 12)));
    assert_eq!(create(&umd, vm, 3, K128, 3, 0), ENOMEM);
    mem.set_page_limit(None);
    assert_eq!(rig.counts(), (1, 0, 0));
    assert_eq!(rig.pages(), pages);
    let h = umd.tiler_heap_create(vm, 1, K128, 1, 0).unwrap();
    assert_eq!(h.handle, vm << 16);
    let after = (rig.counts(), rig.pages());
    for (handle, pad, e) in [
        (vm << 16, 1, EINVAL),
        ((vm + 7) << 16, 0, EINVAL),
        (0, 0, EINVAL),
        (vm << 16 | 1, 0, EINVAL),
        (vm << 16 | 0xffff, 0, EINVAL),
    ] {
        assert_eq!(destroy_raw(&umd, handle, pad), e, "{handle:#x} {pad}");
        assert_eq!((rig.counts(), rig.pages()), after);
    }
    assert_eq!(destroy_raw(&umd, vm << 16, 0), 0);
}

#[test]
fn pool_and_file_limits() {
    let rig = rig();
    let umd = rig.umd();
    let vm = umd.vm_create().unwrap();
    // 128 heaps per VM, then EBUSY.
    let heaps: Vec<_> = (0..128)
        .map(|_| umd.tiler_heap_create(vm, 1, K128, 1, 0).unwrap())
        .collect();
    assert_eq!(heaps[127].handle, vm << 16 | 127);
    let full = (rig.counts(), rig.pages());
    assert_eq!(create(&umd, vm, 1, K128, 1, 0), EBUSY);
    assert_eq!((rig.counts(), rig.pages()), full);
    for h in &heaps {
        umd.tiler_heap_destroy(h).unwrap();
    }
    // The file's budget: 256 MiB of chunks over all its VMs, then ENOMEM.
    let vm2 = umd.vm_create().unwrap();
    let vm3 = umd.vm_create().unwrap();
    let h3 = umd.tiler_heap_create(vm3, 1, K128, 1, 0).unwrap();
    umd.tiler_heap_destroy(&h3).unwrap();
    let big = 8 << 20;
    umd.tiler_heap_create(vm, 16, big, 16, 0).unwrap();
    umd.tiler_heap_create(vm2, 16, big, 16, 0).unwrap();
    let at_budget = (rig.counts(), rig.pages());
    assert_eq!(create(&umd, vm3, 1, K128, 1, 0), ENOMEM);
    assert_eq!((rig.counts(), rig.pages()), at_budget);
    // Another client has a budget of its own.
    let other = rig.umd();
    let ovm = other.vm_create().unwrap();
    other.tiler_heap_create(ovm, 1, K128, 1, 0).unwrap();
    // Destroying a VM gives its heaps' bytes back to the file.
    let mut a = VmDestroy { id: vm2, pad: 0 };
    umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut a).unwrap();
    umd.tiler_heap_create(vm3, 1, K128, 1, 0).unwrap();
}

/// A job that tiles `words` words into `heap`, then stores 1 at `DATA`.
fn tiling_job(umd: &Umd, s: &Space, group: u32, heap: &TilerHeap, words: u32, tag: u64) -> u32 {
    let mut prog = heap.tile(s.va + DESC, words, tag).to_vec();
    prog.extend(store(s, 0, 1));
    submit(umd, s, group, 0, &prog)
}

#[test]
fn tiling_grows_the_heap_across_chunks() {
    let rig = rig();
    let umd = rig.umd();
    let s = space(&umd, 0x100_0000);
    let heap = umd.tiler_heap_create(s.vm, 1, K128, 4, 8).unwrap();
    let group = umd.group_create(s.vm, &[0x1000]).unwrap();
    let words = 2 * WORDS_PER_CHUNK + 10;
    let tag = 0x5000_0000;
    let done = tiling_job(&umd, &s, group, &heap, words, tag);
    umd.wait(&[done], WAIT).unwrap();
    assert_eq!(fence_status(&umd, done), Some(0));
    assert_eq!(umd.group_state(group).unwrap(), (0, 0));
    assert_eq!(s.bo.read_u32(DATA).unwrap(), 1);
    // Two chunks were added on the way, linked behind the first by the GPU.
    assert_eq!(rig.counts(), (1, 1, 3));
    let list = chunk_list(&rig, &umd, s.vm, &heap);
    assert_eq!(list.len(), 3, "{list:x?}");
    let word = |chunk: usize, i: u32| {
        gpu_rd64(
            &rig,
            &umd,
            s.vm,
            (list[chunk] & !0xfff) + 64 + 8 * u64::from(i),
        )
    };
    assert_eq!(word(0, 0), tag);
    assert_eq!(
        word(0, WORDS_PER_CHUNK - 1),
        tag + u64::from(WORDS_PER_CHUNK) - 1
    );
    assert_eq!(word(1, 0), tag + u64::from(WORDS_PER_CHUNK));
    assert_eq!(word(2, 9), tag + u64::from(words) - 1);
    assert_eq!(word(2, 10), 0);
    // A second pass goes on where the first stopped, in the last chunk.
    let done = tiling_job(&umd, &s, group, &heap, 4, 0x77);
    umd.wait(&[done], WAIT).unwrap();
    assert_eq!(word(2, 10), 0x77);
    assert_eq!(rig.counts(), (1, 1, 3));
}

#[test]
fn a_heap_that_may_not_grow_fails_its_job_only() {
    let rig = rig();
    let umd = rig.umd();
    let s = space(&umd, 0x100_0000);
    let t = space(&umd, 0x200_0000);
    // At max_chunks already, and one whose target of render passes in flight is 0.
    let capped = umd.tiler_heap_create(s.vm, 1, K128, 1, 8).unwrap();
    let no_target = umd.tiler_heap_create(s.vm, 1, K128, 8, 0).unwrap();
    let bad = umd.group_create(s.vm, &[0x1000]).unwrap();
    let bad2 = umd.group_create(s.vm, &[0x1000]).unwrap();
    let good = umd.group_create(t.vm, &[0x1000]).unwrap();
    let d1 = tiling_job(&umd, &s, bad, &capped, WORDS_PER_CHUNK + 1, 0);
    let d2 = {
        let mut prog = no_target.tile(s.va + DESC, WORDS_PER_CHUNK + 1, 0).to_vec();
        prog.extend(store(&s, 4, 1));
        submit(&umd, &s, bad2, 0x800, &prog)
    };
    let d3 = submit(&umd, &t, good, 0, &store(&t, 0, 7));
    umd.wait(&[d1, d2, d3], WAIT).unwrap();
    for (d, g) in [(d1, bad), (d2, bad2)] {
        assert_eq!(fence_status(&umd, d), Some(EFAULT));
        assert_eq!(
            umd.group_state(g).unwrap(),
            (DRM_PANTHOR_GROUP_STATE_FATAL_FAULT, 1)
        );
    }
    assert_eq!(s.bo.read_u32(DATA).unwrap(), 0, "the failed job stopped");
    assert!(rig
        .reg
        .device()
        .backend
        .log_lines()
        .iter()
        .any(|l| l.contains("fault 0x60")));
    // No chunk was added; the other VM's group is untouched and keeps working.
    assert_eq!(rig.counts(), (1, 2, 2));
    assert_eq!(fence_status(&umd, d3), Some(0));
    assert_eq!(t.bo.read_u32(DATA).unwrap(), 7);
    let d4 = submit(&umd, &t, good, 0x100, &store(&t, 4, 8));
    umd.wait(&[d4], WAIT).unwrap();
    assert_eq!(t.bo.read_u32(DATA + 4).unwrap(), 8);
    assert_eq!(umd.group_state(good).unwrap(), (0, 0));
}

/// A job of `group` that tiles a little into `heap`, run to completion: the heap's context
/// then points into its first chunk, where the next render pass would go on.
fn use_heap(umd: &Umd, s: &Space, group: u32, heap: &TilerHeap) {
    let done = submit(umd, s, group, 0, &heap.tile(s.va + DESC, 4, 0));
    umd.wait(&[done], WAIT).unwrap();
    assert_eq!(fence_status(umd, done), Some(0));
}

#[test]
fn destroying_a_heap_in_use_fails_its_jobs_and_frees_the_heap() {
    let rig = rig();
    let umd = rig.umd();
    let s = space(&umd, 0x100_0000);
    let heap = umd.tiler_heap_create(s.vm, 1, K128, 64, 64).unwrap();
    let group = umd.group_create(s.vm, &[0x1000]).unwrap();
    let pages = rig.pages();
    use_heap(&umd, &s, group, &heap);
    assert_ne!(gpu_rd64(&rig, &umd, s.vm, heap.context_va), 0);
    umd.tiler_heap_destroy(&heap).unwrap();
    assert_eq!(rig.counts(), (1, 0, 0));
    assert_eq!(pages - rig.pages(), K128 as usize >> 12);
    // The next pass of the render pass finds its chunks unmapped: a fault, not freed memory.
    let done = tiling_job(&umd, &s, group, &heap, 8, 0x10);
    umd.wait(&[done], WAIT).unwrap();
    assert_eq!(fence_status(&umd, done), Some(EFAULT));
    assert_eq!(s.bo.read_u32(DATA).unwrap(), 0);
    no_bus_errors(&rig);
    // Destroyed while a job tiles into it and grows it: the job faults, the ones queued
    // behind it are cancelled, and nothing of the heap stays. (The fault made VM s
    // unusable, as any page fault does: a new VM.)
    let s = space(&umd, 0x100_0000);
    let group = umd.group_create(s.vm, &[0x4000]).unwrap();
    let heap = umd.tiler_heap_create(s.vm, 1, K128, 64, 64).unwrap();
    let mut prog = Vec::new();
    for _ in 0..40 {
        prog.extend(heap.tile(s.va + DESC, WORDS_PER_CHUNK / 2, 0));
    }
    umd.write_stream(&s.bo, 0x1000, &prog).unwrap();
    let dones: Vec<u32> = (0..4).map(|_| umd.syncobj_create(false).unwrap()).collect();
    let jobs: Vec<Job> = dones
        .iter()
        .map(|d| Job::new(0, s.va + 0x1000, 8 * prog.len() as u32).signal(*d))
        .collect();
    umd.submit(group, &jobs).unwrap();
    // Once the first job has grown the heap twice, it is mid-way.
    while rig.counts().2 < 3 {
        std::thread::yield_now();
    }
    umd.tiler_heap_destroy(&heap).unwrap();
    umd.wait(&dones, WAIT).unwrap();
    let status: Vec<_> = dones.iter().map(|d| fence_status(&umd, *d)).collect();
    assert_eq!(status, [Some(EFAULT), Some(-125), Some(-125), Some(-125)]);
    no_bus_errors(&rig);
    assert_eq!(rig.counts(), (2, 0, 0));
}

#[test]
fn vm_destroy_and_file_close_release_everything() {
    let rig = rig();
    let base = rig.pages();
    {
        let umd = rig.umd();
        let s = space(&umd, 0x100_0000);
        let t = space(&umd, 0x100_0000);
        let hs = umd.tiler_heap_create(s.vm, 1, K128, 4, 8).unwrap();
        let ht = umd.tiler_heap_create(t.vm, 2, K128, 4, 8).unwrap();
        umd.tiler_heap_create(t.vm, 1, 1 << 20, 1, 8).unwrap();
        let gs = umd.group_create(s.vm, &[0x1000]).unwrap();
        let gt = umd.group_create(t.vm, &[0x1000]).unwrap();
        // The heap in VM t grows by a chunk, VM s's heap is in use, then the VMs go.
        let dt = tiling_job(&umd, &t, gt, &ht, 2 * WORDS_PER_CHUNK + 1, 0);
        umd.wait(&[dt], WAIT).unwrap();
        assert_eq!(rig.counts(), (2, 3, 5));
        use_heap(&umd, &s, gs, &hs);
        let mut a = VmDestroy { id: t.vm, pad: 0 };
        umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut a).unwrap();
        assert_eq!(rig.counts(), (1, 1, 1));
        a.id = s.vm;
        umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut a).unwrap();
        assert_eq!(rig.counts(), (0, 0, 0));
        // A job of the destroyed VM's group fails on the unmapped heap; nothing crashes.
        let ds = tiling_job(&umd, &s, gs, &hs, 8, 0x10);
        umd.wait(&[ds], WAIT).unwrap();
        assert_eq!(fence_status(&umd, ds), Some(EFAULT));
        no_bus_errors(&rig);
        // A second file's heaps go with the file.
        let other = rig.umd();
        let ovm = other.vm_create().unwrap();
        other.tiler_heap_create(ovm, 3, K128, 3, 0).unwrap();
        assert_eq!(rig.counts(), (1, 1, 3));
        drop(other);
        assert_eq!(rig.counts(), (0, 0, 0));
        // And this one's, heap pools included, when it closes.
        let u = space(&umd, 0x100_0000);
        umd.tiler_heap_create(u.vm, 2, K128, 2, 0).unwrap();
        assert_eq!(rig.counts(), (1, 1, 2));
    }
    assert_eq!(rig.counts(), (0, 0, 0));
    // The work item may still hold the last groups for a moment (a snapshot of the list).
    for _ in 0..2000 {
        if rig.pages() == base {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(rig.pages(), base, "every page of the clients is back");
    let gpu = rig.reg.device().backend.gpu().clone();
    drop(rig);
    assert_eq!(gpu.memory().allocated_pages(), 0);
}

#[test]
fn creates_race_with_destroys_and_vm_destruction() {
    let rig = rig();
    let base = rig.pages();
    {
        let umd = std::sync::Arc::new(rig.umd());
        for round in 0..32 {
            let vm = umd.vm_create().unwrap();
            let threads: Vec<_> = (0..3)
                .map(|t| {
                    let umd = umd.clone();
                    std::thread::spawn(move || {
                        let mut made = 0;
                        for i in 0..20 {
                            match umd.tiler_heap_create(vm, 1 + (i + t) % 3, K128, 4, 1) {
                                Ok(h) if i % 2 == 0 => {
                                    let e = errno(umd.tiler_heap_destroy(&h));
                                    // The VM may be gone meanwhile (EINVAL), or its heaps
                                    // only, after the call found the VM (ENOENT, as panthor
                                    // answers once the VM's pool is gone).
                                    assert!([0, EINVAL, ENOENT].contains(&e), "{e}");
                                }
                                Ok(_) => made += 1,
                                Err(e) => assert_eq!(e.to_errno(), EINVAL, "round {round}"),
                            }
                        }
                        made
                    })
                })
                .collect();
            std::thread::yield_now();
            let mut a = VmDestroy { id: vm, pad: 0 };
            umd.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut a).unwrap();
            for t in threads {
                t.join().unwrap();
            }
            // Whatever was made before the VM went went with it; nothing was made after.
            assert_eq!(rig.counts(), (0, 0, 0), "round {round}");
        }
        // Heaps in a VM that stays live, left to the file's close.
        let vm = umd.vm_create().unwrap();
        umd.tiler_heap_create(vm, 2, K128, 2, 0).unwrap();
        assert_eq!(rig.counts(), (1, 1, 2));
    }
    assert_eq!(rig.counts(), (0, 0, 0));
    assert_eq!(rig.pages(), base);
}

#[test]
fn a_heap_the_mmu_cannot_unmap_is_leaked_not_freed() {
    let rig = rig();
    let umd = rig.umd();
    let vm = umd.vm_create().unwrap();
    let heap = umd.tiler_heap_create(vm, 2, K128, 2, 0).unwrap();
    // The VM holds an address space and the MMU stops completing commands: the chunks
    // cannot be unmapped, so their memory must stay allocated (the GPU may still reach it).
    driver::vm_activate(rig.reg.device(), umd.client().file(), vm).unwrap();
    let gpu = rig.reg.device().backend.gpu();
    gpu.with(|g| g.faults_mut().mmu_command_stuck = true);
    let pages = rig.pages();
    umd.tiler_heap_destroy(&heap).unwrap();
    assert_eq!(rig.counts(), (1, 0, 0));
    assert_eq!(rig.pages(), pages, "nothing freed under a stuck MMU");
    gpu.with(|g| g.faults_mut().mmu_command_stuck = false);
}

#[test]
fn growth_without_memory_fails_the_job_with_the_oom_fault() {
    let rig = rig();
    let umd = rig.umd();
    let s = space(&umd, 0x100_0000);
    let heap = umd.tiler_heap_create(s.vm, 1, K128, 4, 8).unwrap();
    let group = umd.group_create(s.vm, &[0x1000]).unwrap();
    // The growth allocates on the way to the job's fence, from memory that fails rather than
    // waits: with none left, the stream gets 0 and faults with OUT_OF_MEMORY.
    let mem = rig.reg.device().backend.gpu().memory();
    mem.set_page_limit(Some(rig.pages()));
    let done = tiling_job(&umd, &s, group, &heap, WORDS_PER_CHUNK + 1, 0);
    umd.wait(&[done], WAIT).unwrap();
    mem.set_page_limit(None);
    assert_eq!(fence_status(&umd, done), Some(EFAULT));
    assert_eq!(
        umd.group_state(group).unwrap(),
        (DRM_PANTHOR_GROUP_STATE_FATAL_FAULT, 1)
    );
    assert!(rig
        .reg
        .device()
        .backend
        .log_lines()
        .iter()
        .any(|l| l.contains("fault 0x60")));
    assert_eq!(rig.counts(), (1, 1, 1));
    // With memory back, another VM's heap grows as usual.
    let t = space(&umd, 0x100_0000);
    let heap = umd.tiler_heap_create(t.vm, 1, K128, 4, 8).unwrap();
    let group = umd.group_create(t.vm, &[0x1000]).unwrap();
    let done = tiling_job(&umd, &t, group, &heap, WORDS_PER_CHUNK + 1, 0);
    umd.wait(&[done], WAIT).unwrap();
    assert_eq!(fence_status(&umd, done), Some(0));
    assert_eq!(rig.counts(), (2, 2, 3));
}
