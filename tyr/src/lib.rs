// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A thin Arm Mali CSF driver composed from the gpukit crates.
//!
//! The driver brings a Mali CSF GPU up ([`gpu`]: reset, L2, identification; [`fw`]: the MCU
//! and its interface), describes its registers with `register!` ([`regs`]), manages GPU
//! virtual memory with `gpuvm` and `io-pgtable` ([`vm`]: VMs and all-or-nothing VM_BIND;
//! [`mmu`]: address-space slots and MMU commands), runs GPU work through `jobqueue` onto the
//! firmware's command-stream rings ([`csf`]; `sched`, `submit`, `bindq`, feature `std`) and
//! serves the panthor uAPI ([`uapi`]) through the `drm-ctx` DRM core (`driver`, feature `std`).
//! Everything it needs from its environment goes through a [`backend::Backend`], as it would
//! on silicon; `host` (feature `host`) implements it over the simulated Mali-G610 of the
//! `gpukit-mali-sim` crate (`mali_sim`), which has its own view of the hardware and none of
//! the driver's, and `umd` is a Mesa-like client for tests and the demo.
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
//! The core (registers, probe, firmware interface, MMU, VM management, uAPI) is `no_std` and
//! allocates only through the backend and the storage traits it is given; the DRM glue needs
//! `drm-ctx`'s host core (feature `std`), whose handle tables and user-memory access exist only
//! there for now.

#![no_std]

#[cfg(all(feature = "kernel", not(gpukit_kernel)))]
compile_error!(
    "the `kernel` feature only builds inside a Linux tree: use `cargo xtask kernel-build`"
);

#[cfg(feature = "std")]
extern crate std;

pub mod backend;
#[cfg(feature = "std")]
pub mod bindq;
pub mod csf;
#[cfg(feature = "std")]
pub mod driver;
mod error;
pub mod fw;
pub mod gpu;
pub mod mmu;
pub mod regs;
#[cfg(feature = "std")]
pub mod sched;
#[cfg(feature = "std")]
pub mod submit;
pub mod uapi;
pub mod vm;

#[cfg(feature = "host")]
pub mod host;
#[cfg(feature = "host")]
pub mod umd;

pub use error::{Error, Result};
