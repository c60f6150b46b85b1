// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A thin Arm Mali CSF driver composed from the gpukit crates.
//!
//! The driver brings a Mali CSF GPU up ([`gpu`]: reset, L2, identification; [`fw`]: the MCU
//! and its interface), describes its registers with `register!` ([`regs`]), manages GPU
//! virtual memory with `gpuvm` and `io-pgtable` ([`vm`]: VMs and all-or-nothing VM_BIND;
//! [`mmu`]: address-space slots and MMU commands; [`gem`]: buffer objects; [`heap`]: tiler
//! heaps), runs GPU work through `jobqueue` onto the firmware's command-stream rings
//! ([`csf`]; [`job`], [`bindq`], [`sched`]; [`pm`]: idle power-down, system suspend, frequency
//! scaling) and serves the panthor uAPI ([`uapi`]: the structs; [`ioctl`]: the handlers) through
//! the `drm-ctx` DRM core ([`file`](mod@file), [`driver`]). Everything it
//! needs from its environment goes through a [`backend::Backend`], as it would on silicon;
//! `host` (feature `host`) implements it over the simulated Mali-G610 of the `gpukit-mali-sim`
//! crate (`mali_sim`), which has its own view of the hardware and none of the driver's, and
//! `umd` is a Mesa-like client for tests and the demo.
//!
//! ```
//! # #[cfg(feature = "host")] {
//! use tyr::{driver, host::HostBackend, uapi};
//! use drm_ctx::{device, drm::OpenOptions, host::Client};
//!
//! let parent = device::Device::new("mali").unwrap();
//! let reg = driver::probe(&parent, HostBackend::g610()).unwrap();
//! let client = Client::open(reg.device(), OpenOptions::render()).unwrap();
//! let mut vm = uapi::VmCreate::default();
//! client.ioctl_arg(uapi::DRM_IOCTL_PANTHOR_VM_CREATE, &mut vm).unwrap();
//! assert_eq!(vm.id, 1);
//! # }
//! ```
//!
//! # Floors
//!
//! The files are arranged in floors, as panthor's are: a file uses only modules of the floors
//! below its own (`tests/floors.rs` checks it, with this table), so the uAPI layer calls down
//! into scheduling, which calls down into firmware, memory management and the device, and
//! nothing below calls up. Top first:
//!
//! ```text
//! 16  umd                       | a Mesa-like client of the ioctls (feature host)
//! 15  driver                    | probe; the drm-ctx Driver and its ioctl table (panthor_drv)
//! 14  ioctl                     | the ioctl handlers: argument checks, user copies (panthor_drv)
//! 13  file                      | a client's VMs and groups; group creation
//! 12  sched                     | device state, groups, rings, slots, IRQs, timeouts, reset
//! 11  pm                        | power: idle power-down and wake, accounting
//! 10  bindq                     | bind queues: asynchronous VM_BIND jobs
//!  9  job                       | what all queues share: clock, sizes, syncobj fences
//!  8  fw                        | the MCU and its interface (panthor_fw)
//!  7  heap                      | tiler heaps: contexts and chunk lists per VM (panthor_heap)
//!  6  gem                       | buffer objects (panthor_gem)
//!  5  mmu                       | address-space slots, MMU commands (panthor_mmu)
//!  4  vm                        | VMs: gpuvm + io-pgtable, all-or-nothing VM_BIND
//!  3  gpu, host, kernel         | probe, reset, power (panthor_gpu); the host and kernel backends
//!  2  backend                   | the environment: MMIO, DMA memory, IRQs, time, logging
//!  1  env                       | containers: fallible Vec, Arc and Weak over an allocator
//!  0  error, regs, csf, uapi    | definitions: errors, registers, CSF interface, uAPI structs
//! ```
//!
//! Where a floor needs something of a floor above, the lower floor defines a small trait that
//! the upper one implements: a VM updates the MMU through [`vm::MmuUpdate`] (implemented by
//! `mmu::AsUpdate`), a bind job reaches its device through `bindq::BindDevice`, and the
//! environment calls the driver through `backend::Events` (both implemented by the device state
//! in `sched`). `drm-ctx` ties the driver type to its data, objects and files: the floors below
//! `driver` name the driver type (`TyrDriver`, defined in `gem`), and only `driver` implements
//! `drm::Driver` for it, as panthor's `panthor_drv.c` alone defines its `drm_driver`. The
//! definitions of floor 0 are what panthor's headers are (`panthor_regs.h`, `panthor_drm.h`):
//! every floor may use them.
//!
//! The whole driver is `no_std` and allocates and locks only through the backend: its
//! bookkeeping lives in the [`env`](mod@env) containers (fallible `Vec`, `Box`, `Arc`/`Weak`, `IdMap`)
//! over the backend's allocator, its locks are the backend's [`backend::LockFamily`] (each made
//! with a lockdep class of its own place, [`lock_class!`]), its fences the backend's
//! (`jobqueue`'s host fences or `dma_fence`s). The same files build on a host (feature `std`),
//! in the kernel (`cargo xtask kernel-build`), where KUnit probes the driver and runs a job
//! through its ioctls, and with no features at all (`--target aarch64-unknown-none`): every
//! floor is there, since `drm-ctx`'s own core has files, GEM handles, syncobjs (fences it holds
//! as `drm_ctx::drm::syncobj::Fence`s) and user memory without `std` or `alloc`. Only the host
//! backend, `umd` and the host's `ioctl::mmap` entry need feature `host`.

#![no_std]

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);

#[cfg(feature = "std")]
extern crate std;

pub mod backend;
pub mod bindq;
pub mod csf;
pub mod driver;
pub mod env;
mod error;
pub mod file;
pub mod fw;
pub mod gem;
pub mod gpu;
pub mod heap;
pub mod ioctl;
pub mod job;
pub mod mmu;
pub mod pm;
pub mod regs;
pub mod sched;
pub mod uapi;
pub mod vm;

#[cfg(feature = "host")]
pub mod host;
#[cfg(all(feature = "kernel", gpukit_kernel))]
pub mod kernel;

/// The prefix of this crate's kernel log lines (`pr_info!` and its kin look it up here).
#[cfg(all(feature = "kernel", gpukit_kernel))]
const __LOG_PREFIX: &[u8] = b"tyr\0";
#[cfg(feature = "host")]
pub mod umd;

pub use error::{Error, Result};
