// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Starting the MCU and reading the firmware's interface.
//!
//! A CSF GPU is scheduled by firmware running on its microcontroller (MCU). The MCU sees
//! memory through address space 0, and driver and firmware share a region mapped there at
//! [`MCU_SHARED_REGION_START`]. Once enabled (`MCU_CONTROL`), the firmware publishes its
//! interface in that region: a global control block at its start (the number of command-stream
//! group slots and the distance between their blocks), one control block per group slot from
//! [`CSF_GROUP_CONTROL_OFFSET`] (the number of command streams per group), and one per
//! stream (work registers and scoreboards). The driver reports those numbers to userspace as
//! `CSIF_INFO`.
//!
//! With the DRM glue, `start_mcu` maps the firmware interface object in the
//! MCU's own VM (address space 0) and boots the MCU, and `FwIface` reads where the firmware put
//! the input and output blocks of the global interface, of each group slot and of each stream.
//!
//! Once the MCU runs, [`boot`] sets the global interface's `COUNTER_EN` request (a level the
//! firmware follows, as panthor has done since uAPI 1.6), so that command streams may sample the
//! GPU's timestamp and cycle counters with `STORE_STATE`; without it they read 0.
//!
//! Powering the GPU down stops the MCU first, as panthor's suspend does: [`halt`] asks the
//! firmware to halt (`GLB_HALT`), waits for `MCU_STATUS` to read halted, then disables the MCU.
//! Booting it again is a cold boot (the firmware forgets its groups); the driver clears its
//! requests first ([`clear_requests`]) so that they agree with the fresh acknowledgements.
//!
//! Before the MCU first starts, the driver loads the firmware image (`mali_csffw.bin` of the
//! GPU's architecture, in panthor's format: [`image`] parses it, [`Firmware`] maps its sections
//! into address space 0 with their protections and reloads them before later cold boots).

pub mod image;
mod load;

pub(crate) use load::start_mcu;
pub use load::{firmware_path, Firmware, FwPath, FwSection};

use core::time::Duration;

use register::io::poll::read_poll_timeout;
use register::io::Io;

use crate::backend::{Backend, DmaMemory};
use crate::csf::{cs, csg, glb};
use crate::regs::{mcu, DOORBELL, JOB_IRQ_CLEAR, JOB_IRQ_RAWSTAT, MCU_CONTROL, MCU_STATUS};
use crate::{dev_err, uapi, Error, Result};

/// Size of the firmware interface region allocated before registration.
pub const FW_INTERFACE_SIZE: usize = 0x1_0000;
/// MCU virtual address of the region shared with the firmware.
pub const MCU_SHARED_REGION_START: u64 = 0x0400_0000;
/// Offset of the first group control block in the shared region.
pub const CSF_GROUP_CONTROL_OFFSET: u64 = 0x1000;
/// Offset of a group's first stream control block from the group's block.
pub const CSF_STREAM_CONTROL_OFFSET: u64 = 0x40;
/// Most group slots a firmware may publish (panthor's `MAX_CSGS`).
pub const MAX_CSGS: usize = 31;
/// Most streams per group slot a firmware may publish (panthor's `MAX_CS_PER_CSG`).
pub const MAX_CS_PER_CSG: usize = 32;
/// Registers a command stream does not preserve across calls.
pub const CSF_UNPRESERVED_REG_COUNT: u32 = 4;
/// How long the MCU may take to start.
pub const MCU_BOOT_TIMEOUT: Duration = Duration::from_millis(100);

/// Global control block: number of group slots.
const GLB_GROUP_NUM: u64 = 0x10;
/// Global control block: distance between group control blocks.
pub(crate) const GLB_GROUP_STRIDE: u64 = 0x14;
/// Group control block: number of streams.
const CSG_STREAM_NUM: u64 = 0x14;
/// Group control block: distance between stream control blocks.
const CSG_STREAM_STRIDE: u64 = 0x18;
/// Stream control block: features.
const CS_FEATURES: u64 = 0x00;

/// Reads the 32-bit word at `offset` of the shared region (device address `base`, `size`
/// bytes).
fn rd32<D: DmaMemory>(dma: &D, base: u64, size: u64, offset: u64) -> Result<u32> {
    if offset.checked_add(4).is_none_or(|end| end > size) || !offset.is_multiple_of(4) {
        return Err(Error::Invalid);
    }
    let addr = base.checked_add(offset).ok_or(Error::Invalid)?;
    let word = dma.cpu_u64(addr & !7).ok_or(Error::Fault)?;
    // SAFETY: `cpu_u64` returned a pointer into the live shared region, valid for atomic
    // accesses (`DmaMemory` contract); the region outlives this call.
    let v = unsafe { word.as_ref() }.load(core::sync::atomic::Ordering::Acquire);
    Ok((v >> ((addr & 4) * 8)) as u32)
}

/// Writes the 32-bit word at `offset` of the shared region (device address `base`, `size`
/// bytes).
fn wr32<D: DmaMemory>(dma: &D, base: u64, size: u64, offset: u64, v: u32) -> Result {
    if offset.checked_add(4).is_none_or(|end| end > size) || !offset.is_multiple_of(4) {
        return Err(Error::Invalid);
    }
    let addr = base.checked_add(offset).ok_or(Error::Invalid)?;
    let word = dma.cpu_u64(addr & !7).ok_or(Error::Fault)?;
    // SAFETY: As in `rd32`: a live word of the shared region, valid for atomic accesses.
    let word = unsafe { word.as_ref() };
    let shift = (addr & 4) * 8;
    let mask = 0xffff_ffffu64 << shift;
    let _ = word.fetch_update(
        core::sync::atomic::Ordering::AcqRel,
        core::sync::atomic::Ordering::Acquire,
        |old| Some((old & !mask) | u64::from(v) << shift),
    );
    Ok(())
}

/// Offset in the shared region of the block whose MCU address the control word at `offset`
/// holds.
fn block<D: DmaMemory>(dma: &D, base: u64, size: u64, offset: u64) -> Result<u64> {
    let va = u64::from(rd32(dma, base, size, offset)?);
    let o = va
        .checked_sub(MCU_SHARED_REGION_START)
        .ok_or(Error::Invalid)?;
    if o.checked_add(0x20).is_none_or(|end| end > size) {
        return Err(Error::Invalid);
    }
    Ok(o)
}

/// Offsets of the global input and output blocks.
fn glb_blocks<D: DmaMemory>(dma: &D, base: u64, size: u64) -> Result<(u64, u64)> {
    Ok((
        block(dma, base, size, glb::INPUT_VA)?,
        block(dma, base, size, glb::OUTPUT_VA)?,
    ))
}

/// Sets the global request bits `set` and clears `clear` (level requests), rings the global
/// doorbell and waits until the firmware acknowledges them.
fn glb_update<B: Backend>(b: &B, base: u64, size: u64, set: u32, clear: u32) -> Result {
    let dma = b.dma();
    let (gin, gout) = glb_blocks(dma, base, size)?;
    let req = rd32(dma, base, size, gin + glb::REQ)?;
    let want = (req | set) & !clear;
    wr32(dma, base, size, gin + glb::REQ, want)?;
    if let Some(db) = DOORBELL::try_at(0) {
        b.io().write(db, DOORBELL::zeroed().with_ring(true));
    }
    let bits = set | clear;
    read_poll_timeout(
        b.clock(),
        || rd32(dma, base, size, gout + glb::REQ),
        |ack| ack & bits == want & bits,
        Duration::from_micros(10),
        MCU_BOOT_TIMEOUT,
    )
    .inspect_err(|_| dev_err!(b, "The firmware did not acknowledge {bits:#x}"))?;
    Ok(())
}

/// Clears every request word the driver writes (global, group and stream `REQ` and doorbell
/// words, stream interrupt acknowledgements) of the interface in the shared region, so that
/// they agree with what a freshly booted firmware acknowledges: every bit 0.
///
/// # Errors
///
/// [`Error::Invalid`] for an interface that does not fit the region.
pub fn clear_requests<D: DmaMemory>(dma: &D, base: u64, size: u64) -> Result {
    let (gin, _) = glb_blocks(dma, base, size)?;
    for off in [glb::REQ, glb::DOORBELL_REQ] {
        wr32(dma, base, size, gin + off, 0)?;
    }
    let groups = rd32(dma, base, size, GLB_GROUP_NUM)?.min(MAX_CSGS as u32);
    let stride = u64::from(rd32(dma, base, size, GLB_GROUP_STRIDE)?);
    for n in 0..u64::from(groups) {
        let c = CSF_GROUP_CONTROL_OFFSET + n * stride;
        let cin = block(dma, base, size, c + csg::INPUT_VA)?;
        for off in [csg::REQ, csg::DOORBELL_REQ, csg::CS_IRQ_ACK] {
            wr32(dma, base, size, cin + off, 0)?;
        }
        let streams = rd32(dma, base, size, c + CSG_STREAM_NUM)?.min(MAX_CS_PER_CSG as u32);
        let s_stride = u64::from(rd32(dma, base, size, c + CSG_STREAM_STRIDE)?);
        for s in 0..u64::from(streams) {
            let sc = c + CSF_STREAM_CONTROL_OFFSET + s * s_stride;
            let sin = block(dma, base, size, sc + cs::INPUT_VA)?;
            wr32(dma, base, size, sin + cs::REQ, 0)?;
        }
    }
    Ok(())
}

/// Halts the MCU and disables it (panthor's `panthor_fw_suspend`): the `GLB_HALT` request,
/// a wait for `MCU_STATUS` to read halted, then `MCU_CONTROL` disabled and a wait for it.
/// The firmware's interface must have been published ([`boot`]); nothing may run on the
/// firmware meanwhile (the caller has taken every group off its slot).
///
/// # Errors
///
/// [`Error::TimedOut`] if the MCU does not halt or stop.
pub fn halt<B: Backend>(b: &B, base: u64, size: u64) -> Result {
    let io = b.io();
    let dma = b.dma();
    let (gin, _) = glb_blocks(dma, base, size)?;
    let req = rd32(dma, base, size, gin + glb::REQ)?;
    wr32(dma, base, size, gin + glb::REQ, req | glb::REQ_HALT)?;
    if let Some(db) = DOORBELL::try_at(0) {
        io.write(db, DOORBELL::zeroed().with_ring(true));
    }
    let wait = |want: u32| {
        read_poll_timeout(
            b.clock(),
            || Ok::<_, Error>(io.read(MCU_STATUS).status().get()),
            |&s| s == want,
            Duration::from_micros(10),
            MCU_BOOT_TIMEOUT,
        )
    };
    wait(mcu::HALT).inspect_err(|_| dev_err!(b, "Timed out waiting for the MCU to halt"))?;
    io.write_reg(MCU_CONTROL::zeroed().with_const_request::<{ mcu::DISABLED }>());
    wait(mcu::DISABLED).inspect_err(|_| dev_err!(b, "Failed to stop the MCU"))?;
    Ok(())
}

/// Enables the MCU, whose shared region (`size` bytes of DMA memory at `base`) must already
/// be mapped at [`MCU_SHARED_REGION_START`] in address space 0, waits for it to run and reads
/// the interface it publishes.
///
/// # Errors
///
/// [`Error::TimedOut`] if the MCU does not start, [`Error::NoDevice`] if it stops with a fatal
/// error, [`Error::Invalid`] for an interface that does not fit the region.
pub fn boot<B: Backend>(b: &B, base: u64, size: u64) -> Result<uapi::CsifInfo> {
    let io = b.io();
    io.write_reg(MCU_CONTROL::zeroed().with_const_request::<{ mcu::ENABLED }>());
    let status = read_poll_timeout(
        b.clock(),
        || Ok::<_, Error>(io.read(MCU_STATUS).status().get()),
        |&s| s == mcu::ENABLED || s == mcu::FATAL,
        Duration::from_micros(10),
        MCU_BOOT_TIMEOUT,
    )
    .inspect_err(|_| {
        dev_err!(
            b,
            "Failed to boot MCU (status={:#x})",
            io.read(MCU_STATUS).status().get()
        )
    })?;
    if status == mcu::FATAL {
        dev_err!(b, "MCU stopped with a fatal error");
        return Err(Error::NoDevice);
    }
    // The boot raises the global job interrupt; acknowledge it.
    let glb = JOB_IRQ_RAWSTAT::zeroed().with_global(true).into_raw();
    io.write_reg(JOB_IRQ_CLEAR::from(glb));

    let dma = b.dma();
    let group_num = rd32(dma, base, size, GLB_GROUP_NUM)?;
    let group_stride = rd32(dma, base, size, GLB_GROUP_STRIDE)?;
    if group_num == 0 || group_num > 31 || group_stride == 0 {
        return Err(Error::Invalid);
    }
    let csg0 = CSF_GROUP_CONTROL_OFFSET;
    let stream_num = rd32(dma, base, size, csg0 + CSG_STREAM_NUM)?;
    if stream_num == 0 || stream_num as usize > MAX_CS_PER_CSG {
        return Err(Error::Invalid);
    }
    let _stream_stride = rd32(dma, base, size, csg0 + CSG_STREAM_STRIDE)?;
    // Streams may sample the GPU's counters (panthor's GLB_COUNTER_EN, uAPI 1.6); a halt
    // request left from before a cold boot is withdrawn.
    glb_update(b, base, size, glb::REQ_COUNTER_EN, glb::REQ_HALT)?;
    let features = rd32(
        dma,
        base,
        size,
        csg0 + CSF_STREAM_CONTROL_OFFSET + CS_FEATURES,
    )?;
    Ok(uapi::CsifInfo {
        csg_slot_count: group_num,
        cs_slot_count: stream_num,
        cs_reg_count: (features & 0xff) + 1,
        scoreboard_slot_count: (features >> 8) & 0xff,
        unpreserved_cs_reg_count: CSF_UNPRESERVED_REG_COUNT,
        pad: 0,
    })
}

pub use shared::FwIface;

/// What the DRM driver adds: the MCU's VM and the addresses of the interface blocks.
mod shared {
    use drm_ctx::mem::Allocator;

    use super::{
        CSF_GROUP_CONTROL_OFFSET, CSF_STREAM_CONTROL_OFFSET, GLB_GROUP_STRIDE, MAX_CSGS,
        MAX_CS_PER_CSG, MCU_SHARED_REGION_START,
    };
    use crate::backend::{DmaMemory, Words};
    use crate::csf::{cs, csg, glb};
    use crate::{env, Error, Result};

    /// Where the firmware's interface blocks are, as offsets in the firmware region (the
    /// tables in memory from `A`).
    #[derive(Debug)]
    pub struct FwIface<A: Allocator> {
        /// Device address of the firmware region.
        pub base: u64,
        /// Global input and output blocks.
        pub glb: (u64, u64),
        /// Per group slot: input and output blocks.
        pub csg: env::Vec<(u64, u64), A>,
        /// Per group slot and stream: input and output blocks.
        pub cs: env::Vec<env::Vec<(u64, u64), A>, A>,
    }

    impl<A: Allocator> FwIface<A> {
        /// Reads the block addresses the firmware published in the region at device address
        /// `base` (`size` bytes), for `groups` slots of `streams` streams.
        pub fn read<D: DmaMemory>(
            dma: &D,
            base: u64,
            size: u64,
            groups: usize,
            streams: usize,
        ) -> Result<Self> {
            // Faulty firmware must not make the probe loop or allocate without bound: the counts
            // are those panthor accepts, and every control block lies inside the region.
            if groups == 0 || groups > MAX_CSGS || streams == 0 || streams > MAX_CS_PER_CSG {
                return Err(Error::Invalid);
            }
            let w = Words(dma);
            let rd = |o: u64| {
                if o.checked_add(4).is_none_or(|end| end > size) {
                    return Err(Error::Invalid);
                }
                Ok(w.rd32(base + o))
            };
            let start = MCU_SHARED_REGION_START;
            let off = |va: u32| {
                let o = u64::from(va).checked_sub(start).ok_or(Error::Invalid)?;
                if o + 0x100 > size {
                    return Err(Error::Invalid);
                }
                Ok(o)
            };
            let glb = (off(rd(glb::INPUT_VA)?)?, off(rd(glb::OUTPUT_VA)?)?);
            let stride = u64::from(rd(GLB_GROUP_STRIDE)?);
            let mut csgs = env::Vec::try_with_capacity(groups)?;
            let mut css = env::Vec::try_with_capacity(groups)?;
            for n in 0..groups as u64 {
                let c = CSF_GROUP_CONTROL_OFFSET + n * stride;
                csgs.try_push((off(rd(c + csg::INPUT_VA)?)?, off(rd(c + csg::OUTPUT_VA)?)?))?;
                let s_stride = u64::from(rd(c + csg::STREAM_STRIDE)?);
                let mut streams_of = env::Vec::try_with_capacity(streams)?;
                for s in 0..streams as u64 {
                    let sc = c + CSF_STREAM_CONTROL_OFFSET + s * s_stride;
                    streams_of
                        .try_push((off(rd(sc + cs::INPUT_VA)?)?, off(rd(sc + cs::OUTPUT_VA)?)?))?;
                }
                css.try_push(streams_of)?;
            }
            Ok(FwIface {
                base,
                glb,
                csg: csgs,
                cs: css,
            })
        }
    }

    #[cfg(all(test, feature = "host"))]
    mod tests {
        use super::*;
        use crate::backend::DmaMemory;
        use crate::host::SimDma;
        use core::time::Duration;
        use mali_sim::{MemConfig, SimMemory};

        /// Issue 20, suspected item: firmware publishing absurd counts or strides (here a stream
        /// stride of 0 with 2^32 - 1 streams, every block valid) makes the probe fail at once
        /// instead of looping over billions of streams while allocating.
        #[test]
        fn faulty_firmware_interface_is_refused_quickly() {
            let mem = std::sync::Arc::new(SimMemory::new(MemConfig::default()));
            let dma = SimDma::new(mem);
            let size = 0x1_0000u64;
            let region = dma.alloc((size / 0x1000) as usize, 0x1000).unwrap();
            let base = region.addr;
            let w = Words(&dma);
            let va = (MCU_SHARED_REGION_START + 0x8000) as u32;
            w.wr32(base + glb::INPUT_VA, va);
            w.wr32(base + glb::OUTPUT_VA, va);
            w.wr32(base + GLB_GROUP_STRIDE, 0x100);
            for n in 0..31 {
                let c = base + CSF_GROUP_CONTROL_OFFSET + n * 0x100;
                w.wr32(c + csg::INPUT_VA, va);
                w.wr32(c + csg::OUTPUT_VA, va);
                w.wr32(c + csg::STREAM_STRIDE, 0);
                let sc = c + CSF_STREAM_CONTROL_OFFSET;
                w.wr32(sc + cs::INPUT_VA, va);
                w.wr32(sc + cs::OUTPUT_VA, va);
            }
            // A sane interface reads.
            let ok = FwIface::<drm_ctx::mem::Global>::read(&dma, base, size, 2, 8).unwrap();
            assert_eq!((ok.csg.len(), ok.cs[1].len()), (2, 8));
            let (tx, rx) = std::sync::mpsc::channel();
            let dma2 = dma.clone();
            std::thread::spawn(move || {
                let _ = tx.send(
                    FwIface::<drm_ctx::mem::Global>::read(&dma2, base, size, 31, u32::MAX as usize)
                        .err(),
                );
            });
            assert_eq!(
                rx.recv_timeout(Duration::from_secs(10)),
                Ok(Some(Error::Invalid)),
                "the probe did not refuse 2^32 - 1 streams"
            );
            // Control blocks past the region are refused too.
            w.wr32(base + GLB_GROUP_STRIDE, 0x1000_0000);
            assert_eq!(
                FwIface::<drm_ctx::mem::Global>::read(&dma, base, size, 2, 8).err(),
                Some(Error::Invalid)
            );
        }
    }
}
