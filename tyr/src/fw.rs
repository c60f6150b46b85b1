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
//! Loading a firmware image into its sections is not done here: the simulated MCU needs none.

use core::time::Duration;

use register::io::poll::read_poll_timeout;
use register::io::Io;

use crate::backend::{Backend, DmaMemory};
use crate::regs::{mcu, JOB_IRQ_CLEAR, JOB_IRQ_RAWSTAT, MCU_CONTROL, MCU_STATUS};
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
