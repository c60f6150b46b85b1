// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The panthor + syncobj ioctl surface on the simulated G610, from three files at once.
//!
//! The input is a program: each step picks a client and an ioctl (or a raw ioctl with fuzzed
//! bytes, or closing and reopening the client). Invariants: nothing panics; every error is a
//! plain errno; a failing GROUP_CREATE/BO_CREATE/VM_CREATE leaves the file's objects as they
//! were; and once every client is closed, nothing is left: no group, no queue interface, no bind
//! queue, no zombie VM, and the simulator holds only the memory it held after probe.

#![no_main]

use drm_ctx::drm::ioctl::{DrmGemClose, DRM_IOCTL_GEM_CLOSE, IOWR};
use drm_ctx::{device, host::syncobj::*};
use libfuzzer_sys::fuzz_target;
use tyr::driver;
use tyr::host::HostBackend;
use mali_sim::Config;
use tyr::uapi::*;
use tyr::umd::Umd;

/// Reads the program.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }
    fn u32(&mut self) -> u32 {
        let mut v = 0u32;
        for _ in 0..4 {
            v = v << 8 | u32::from(self.u8().unwrap_or(0));
        }
        v
    }
    fn small(&mut self) -> u32 {
        u32::from(self.u8().unwrap_or(0) % 8)
    }
}

fn errno<T>(r: drm_ctx::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => {
            let n = e.to_errno();
            assert!((-4095..0).contains(&n), "not an errno: {n}");
            n
        }
    }
}

fn groups(u: &Umd) -> usize {
    (1..=8)
        .filter(|h| u.client().file().inner().group(*h).is_some())
        .count()
}

fuzz_target!(|data: &[u8]| {
    let parent = device::Device::new("mali").unwrap();
    // 256 MiB of simulated memory: larger requests fail with ENOMEM before the host allocates.
    let mut cfg = Config::g610();
    cfg.memory.page_limit = Some(65536);
    let reg = driver::probe(&parent, HostBackend::new(cfg)).unwrap();
    let dev = reg.device();
    let memory = dev.backend.gpu().memory().clone();
    let baseline = memory.live_allocations();
    let mut clients: Vec<Umd> = (0..3).map(|_| Umd::open(dev).unwrap()).collect();
    let mut input = Input(data);
    let mut steps = 0;
    while let Some(op) = input.u8() {
        steps += 1;
        if steps > 64 {
            break;
        }
        let c = usize::from(op >> 5) % clients.len();
        let u = &clients[c];
        match op & 0x1f {
            0 => {
                let size = u64::from(input.u32() & 0x3f_ffff) + 1;
                let _ = errno(u.bo_create(size));
            }
            1 => {
                let mut a = DrmGemClose {
                    handle: input.small(),
                    pad: 0,
                };
                let _ = errno(u.ioctl(DRM_IOCTL_GEM_CLOSE, &mut a));
            }
            2 => {
                let mut a = BoMmapOffset {
                    handle: input.small(),
                    ..Default::default()
                };
                if errno(u.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut a)) == 0 {
                    let _ = u.client().mmap(a.offset, 4096);
                }
            }
            3 => {
                let _ = errno(u.vm_create());
            }
            4 => {
                let mut a = VmDestroy {
                    id: input.small(),
                    pad: 0,
                };
                let _ = errno(u.ioctl(DRM_IOCTL_PANTHOR_VM_DESTROY, &mut a));
            }
            5 | 6 => {
                let flags = if op & 0x1f == 6 {
                    DRM_PANTHOR_VM_BIND_ASYNC
                } else {
                    0
                };
                let kind = input.u8().unwrap_or(0);
                let bind = VmBindOp {
                    flags: u32::from(kind & 3),
                    bo_handle: input.small(),
                    bo_offset: u64::from(input.u8().unwrap_or(0) & 3) << 12,
                    va: u64::from(input.u8().unwrap_or(0)) << 16,
                    size: u64::from(input.u8().unwrap_or(0) & 0x1f) << 12,
                    syncs: ObjArray::default(),
                };
                let _ = errno(u.bind(input.small(), flags, &[bind]));
            }
            7 => {
                let before = groups(u);
                let n = (input.small() as usize % 8) + 1;
                let ring = 0x1000u32 << (input.u8().unwrap_or(0) % 3);
                let r = u.group_create(input.small(), &vec![ring; n]);
                if r.is_err() {
                    assert_eq!(groups(u), before, "a failed GROUP_CREATE changed the file");
                }
                let _ = errno(r);
            }
            8 => {
                let _ = errno(u.group_destroy(input.small()));
            }
            9 => {
                let _ = errno(u.group_state(input.small()));
            }
            10 => {
                let _ = errno(u.syncobj_create(input.u8().unwrap_or(0) & 1 == 1));
            }
            11 => {
                let _ = errno(u.syncobj_destroy(input.small()));
            }
            12 => {
                let _ = errno(u.syncobj_signal(&[input.small()]));
            }
            13 => {
                // A wait that gives up at once (deadline in the past).
                let _ = errno(u.wait(&[input.small(), input.small()], 0));
            }
            14 => {
                let mut a = DrmSyncobjArray {
                    handles: 0,
                    count_handles: input.u32(),
                    pad: 0,
                };
                let _ = errno(u.ioctl(DRM_IOCTL_SYNCOBJ_RESET, &mut a));
            }
            15 => {
                // Close the file and open a new one.
                clients[c] = Umd::open(dev).unwrap();
            }
            _ => {
                // A raw ioctl: any driver number, 8 to 64 bytes of fuzzed argument.
                let nr = 0x40 + u32::from(input.u8().unwrap_or(0) % 16);
                let len = 8 * (1 + usize::from(input.u8().unwrap_or(0) % 8));
                let mut buf: Vec<u8> = (0..len).map(|_| input.u8().unwrap_or(0)).collect();
                let cmd = IOWR::<[u8; 8]>(nr) & !(0x3fff << 16) | ((len as u32) << 16);
                let _ = errno(u.client().ioctl(cmd, &mut buf));
            }
        }
    }
    drop(clients);
    assert!(
        dev.sched.group_count() == 0,
        "a group outlived its file"
    );
    assert_eq!(dev.sched.ifaces_in_use(), 0, "queue interfaces leaked");
    assert_eq!(
        dev.sched.bind_queue_count(),
        0,
        "a bind queue outlived its VM"
    );
    assert_eq!(dev.zombie_vm_count(), 0, "a zombie VM outlived its file");
    // Once the device is gone (its event thread stopped), every page of DMA memory is free.
    drop(reg);
    drop(parent);
    let t0 = std::time::Instant::now();
    while memory.live_allocations() != 0 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(5),
            "DMA memory leaked: {} allocations left (after probe: {baseline})",
            memory.live_allocations()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
});
