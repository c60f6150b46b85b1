// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Shared set-up of the driver tests: a probed device on the simulated G610 and a client
//! that talks to it through ioctls only.

#![allow(dead_code, unreachable_pub)]

use drm_ctx::drm::{self, gem, ioctl::IoctlArg, OpenOptions};
use drm_ctx::{device, host::Client, types::ARef};
use mali_sim::{AccessType, Config, SharedGpu};
use tyr::driver::{self, TyrBo, TyrDevice, TyrDriver};
use tyr::host::{HostBackend, HostTime};
use tyr::uapi::{self, *};

pub type Drv = TyrDriver<HostBackend>;

/// Stride of page sweeps: every page natively, a sample under Miri.
pub const SWEEP: usize = if cfg!(miri) { 37 } else { 1 };

pub struct Rig {
    pub client: Client<Drv>,
    pub reg: drm::Registration<Drv>,
    pub parent: ARef<device::Device>,
}

pub fn rig() -> Rig {
    rig_with(Config::g610())
}

pub fn rig_with(cfg: Config) -> Rig {
    rig_on(HostBackend::new(cfg))
}

/// A rig whose driver's deadlines are on simulated time ([`HostTime::Simulated`]): the
/// simulation jumps to the next event or timer, so a test goes through job timeouts (5 s)
/// as fast as the host computes them.
#[allow(dead_code)]
pub fn rig_simulated(cfg: Config) -> Rig {
    rig_on(HostBackend::new(cfg).with_time(HostTime::Simulated))
}

fn rig_on(backend: HostBackend) -> Rig {
    let parent = device::Device::new("mali").unwrap();
    let reg = driver::probe(&parent, backend).unwrap();
    let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
    Rig {
        client,
        reg,
        parent,
    }
}

pub fn errno<T>(r: drm_ctx::Result<T>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(e) => e.to_errno(),
    }
}

impl Rig {
    pub fn dev(&self) -> &TyrDevice<HostBackend> {
        self.reg.device()
    }

    pub fn gpu(&self) -> &SharedGpu {
        self.dev().backend.gpu()
    }

    pub fn ioctl<A: IoctlArg>(&self, cmd: u32, arg: &mut A) -> i32 {
        errno(self.client.ioctl_arg(cmd, arg))
    }

    pub fn bo_create(&self, size: u64, flags: u32) -> Result<u32, i32> {
        let mut a = BoCreate {
            size,
            flags,
            ..Default::default()
        };
        match self.ioctl(DRM_IOCTL_PANTHOR_BO_CREATE, &mut a) {
            0 => Ok(a.handle),
            e => Err(e),
        }
    }

    /// The device address of a BO, found through its mmap offset (as a CPU mapping would).
    pub fn bo_addr(&self, handle: u32) -> u64 {
        let mut a = BoMmapOffset {
            handle,
            ..Default::default()
        };
        assert_eq!(self.ioctl(DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET, &mut a), 0);
        let obj = self.client.mmap(a.offset, 4096).unwrap();
        obj.dma_addr()
    }

    pub fn bo(&self, handle: u32) -> ARef<gem::Object<TyrBo<HostBackend>>> {
        gem::Object::<TyrBo<HostBackend>>::lookup_handle(self.client.file(), handle).unwrap()
    }

    pub fn vm_create(&self) -> u32 {
        let mut a = VmCreate::default();
        assert_eq!(self.ioctl(DRM_IOCTL_PANTHOR_VM_CREATE, &mut a), 0);
        a.id
    }

    pub fn activate(&self, vm: u32) -> usize {
        driver::vm_activate(self.dev(), self.client.file(), vm).unwrap()
    }

    /// Issues VM_BIND with `ops` (stride 48); returns the errno and the `ops.count` after.
    pub fn bind(&self, vm: u32, ops: &[VmBindOp]) -> (i32, u32) {
        self.bind_raw(vm, 0, ops)
    }

    pub fn bind_raw(&self, vm: u32, flags: u32, ops: &[VmBindOp]) -> (i32, u32) {
        let mut bytes = Vec::new();
        for op in ops {
            bytes.extend_from_slice(drm_ctx::drm::ioctl::as_bytes(op));
        }
        let array = if bytes.is_empty() {
            0
        } else {
            self.client.mem().alloc_bytes(&bytes).unwrap()
        };
        let mut a = VmBind {
            vm_id: vm,
            flags,
            ops: ObjArray {
                stride: 48,
                count: ops.len() as u32,
                array,
            },
        };
        let e = self.ioctl(DRM_IOCTL_PANTHOR_VM_BIND, &mut a);
        (e, a.ops.count)
    }

    pub fn vm_state(&self, vm: u32) -> Result<u32, i32> {
        let mut a = VmGetState {
            vm_id: vm,
            state: 99,
        };
        match self.ioctl(DRM_IOCTL_PANTHOR_VM_GET_STATE, &mut a) {
            0 => Ok(a.state),
            e => Err(e),
        }
    }
}

pub fn map_op(handle: u32, bo_offset: u64, va: u64, size: u64, flags: u32) -> VmBindOp {
    VmBindOp {
        flags: uapi::DRM_PANTHOR_VM_BIND_OP_TYPE_MAP | flags,
        bo_handle: handle,
        bo_offset,
        va,
        size,
        syncs: ObjArray::default(),
    }
}

pub fn unmap_op(va: u64, size: u64) -> VmBindOp {
    VmBindOp {
        flags: uapi::DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
        va,
        size,
        ..Default::default()
    }
}

/// What a page should translate to: physical page, writable, executable.
pub type Expect = Option<(u64, bool, bool)>;

/// Checks one page through the simulator's MMU: the translation (through its TLB, so stale
/// entries would show) and the permissions (from its walker).
pub fn check_page(gpu: &SharedGpu, slot: usize, va: u64, expect: Expect) -> Result<(), String> {
    gpu.with(|g| {
        let t = g.translate(slot, va + 0x18, AccessType::Read);
        let w = g.walk(slot, va, AccessType::Read);
        match expect {
            Some((pa, write, exec)) => {
                let got = t.map_err(|f| format!("{va:#x}: fault {f:?}, expected {pa:#x}"))?;
                if got.0 != pa + 0x18 {
                    return Err(format!(
                        "{va:#x}: translated to {:#x}, expected {pa:#x}",
                        got.0
                    ));
                }
                let w = w.map_err(|f| format!("{va:#x}: walker fault {f:?}"))?;
                if (w.perms.read, w.perms.write, w.perms.exec) != (true, write, exec) {
                    return Err(format!(
                        "{va:#x}: perms {:?}, expected w={write} x={exec}",
                        w.perms
                    ));
                }
                Ok(())
            }
            None => match (t, w) {
                (Err(_), Err(_)) => Ok(()),
                (t, w) => Err(format!("{va:#x}: expected a fault, got {t:?} / {w:?}")),
            },
        }
    })
}

// ---------------------------------------------------------------- scheduling workloads

/// A G610 whose command-stream engine takes 100 µs of simulated time per step (16
/// instructions per stream), so that a job of a few hundred instructions lasts milliseconds and
/// a chain of them outlasts the scheduler's 10 ms tick.
pub fn slow_engine_config() -> Config {
    let mut cfg = Config::g610();
    cfg.timings.cs_step_ns = 100_000;
    cfg
}

/// Status of the fence a syncobj of `umd` holds: `None` pending, `Some(0)` or `Some(-errno)`.
pub fn fence_status(umd: &tyr::umd::Umd, h: u32) -> Option<i32> {
    let f = umd.client().file().syncobjs().fence(h).unwrap()?;
    f.status().map(|r| r.err().unwrap_or(0))
}

/// The git sha a firmware image's build-info text carries (`git_sha: <sha>`, NUL-terminated),
/// found in the bytes without the driver's parser: an independent witness of which file was
/// loaded.
pub fn build_info_sha(image: &[u8]) -> String {
    let key = b"git_sha: ";
    let at = image
        .windows(key.len())
        .position(|w| w == key)
        .expect("the image has build info")
        + key.len();
    let end = at + image[at..].iter().position(|&c| c == 0).unwrap();
    std::str::from_utf8(&image[at..end])
        .unwrap()
        .trim()
        .to_string()
}
