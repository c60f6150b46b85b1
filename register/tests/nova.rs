// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A sample of nova-core's registers, declared through a driver-specific wrapper macro (as
//! nova-core's `nv_reg!` does), used against a small simulated GPU in both accessor styles.

use core::cell::{Cell, RefCell};
use core::time::Duration;
use std::collections::BTreeMap;
use std::ops::Deref;

use bounded::Bounded;
use register::io::poll::{read_poll_timeout, ManualPollClock};
use register::io::{AccessWidth, DeviceModel, Io, ModelRegion};
use register::{Error, RegisterBase};

/// nova-core's register macro: every register is 32 bits wide and crate-visible.
macro_rules! nv_reg {
    (
        $(
            $(#[$meta:meta])*
            $reg:ident
            $([ $count:expr $(; $step:expr)? ])?
            $(@ $at:literal)?
            $(@ $family:ident + $rel:literal)?
            $(=> $target:ident $(+ $target_rel:ident)? $([$target_idx:expr])? )?
            { $($body:tt)* }
        )*
    ) => {
        $(
            ::register::register!(
                @reg [first_series]
                $(#[$meta])*
                pub(crate) $reg(u32)
                $([$count $(; $step)?])?
                $(@ $at)?
                $(@ $family + $rel)?
                $(=> $target $(+ $target_rel)? $([$target_idx])?)?
                { $($body)* }
            );
        )*
    };
}

/// GPU architectures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Architecture {
    Turing = 0x16,
    Ampere = 0x17,
    Ada = 0x19,
}

/// An architecture value the driver does not know.
#[derive(Debug, PartialEq, Eq)]
struct UnknownArchitecture(u32);

impl TryFrom<Bounded<u32, 6>> for Architecture {
    type Error = UnknownArchitecture;

    fn try_from(value: Bounded<u32, 6>) -> Result<Self, Self::Error> {
        match value.get() {
            0x16 => Ok(Architecture::Turing),
            0x17 => Ok(Architecture::Ampere),
            0x19 => Ok(Architecture::Ada),
            other => Err(UnknownArchitecture(other)),
        }
    }
}

impl From<Architecture> for Bounded<u32, 6> {
    fn from(value: Architecture) -> Self {
        match value {
            Architecture::Turing => Bounded::<u32, 6>::new::<0x16>(),
            Architecture::Ampere => Bounded::<u32, 6>::new::<0x17>(),
            Architecture::Ada => Bounded::<u32, 6>::new::<0x19>(),
        }
    }
}

/// Size of a falcon DMA transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DmaTrfCmdSize {
    Size256B = 0x6,
}

impl TryFrom<Bounded<u32, 3>> for DmaTrfCmdSize {
    type Error = Error;

    fn try_from(value: Bounded<u32, 3>) -> Result<Self, Error> {
        match value.get() {
            0x6 => Ok(DmaTrfCmdSize::Size256B),
            _ => Err(Error::OutOfBounds),
        }
    }
}

impl From<DmaTrfCmdSize> for Bounded<u32, 3> {
    fn from(value: DmaTrfCmdSize) -> Self {
        match value {
            DmaTrfCmdSize::Size256B => Bounded::<u32, 3>::new::<0x6>(),
        }
    }
}

/// Memory type of a falcon FBIF aperture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FalconFbifMemType {
    Virtual,
    Physical,
}

impl From<Bounded<u32, 1>> for FalconFbifMemType {
    fn from(value: Bounded<u32, 1>) -> Self {
        if value.into_bool() {
            FalconFbifMemType::Physical
        } else {
            FalconFbifMemType::Virtual
        }
    }
}

impl From<FalconFbifMemType> for Bounded<u32, 1> {
    fn from(value: FalconFbifMemType) -> Self {
        Bounded::from(value == FalconFbifMemType::Physical)
    }
}

nv_reg! {
    /// Basic revision information about the GPU.
    NV_PMC_BOOT_0 @ 0x00000000 {
        /// Minor revision of the chip.
        3:0     minor_revision;
        /// Major revision of the chip.
        7:4     major_revision;
        /// MSB of the architecture.
        8:8     architecture_1;
        /// Implementation version of the architecture.
        23:20   implementation;
        /// Lower bits of the architecture.
        28:24   architecture_0;
    }

    /// Extended architecture information.
    NV_PMC_BOOT_42 @ 0x00000a00 {
        15:12   minor_revision;
        19:16   major_revision;
        23:20   implementation;
        29:24   architecture ?=> Architecture;
    }

    NV_PBUS_SW_SCRATCH[64] @ 0x00001400 {}

    /// Scratch register 0xe, used as the FRTS firmware error code.
    NV_PBUS_SW_SCRATCH_0E_FRTS_ERR => NV_PBUS_SW_SCRATCH[0xe] {
        31:16   frts_err_code;
    }

    NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE @ 0x00100ce0 {
        3:0     lower_scale;
        9:4     lower_mag;
        30:30   ecc_mode_enabled => bool;
    }

    NV_AON_SCRATCH_05[1] @ 0x00118234 {}

    NV_GFW_BOOT_PROGRESS => NV_AON_SCRATCH_05[0] {
        /// Progress of GFW boot (0xff means completed).
        7:0    progress;
    }

    NV_AON_SCRATCH_42 @ 0x001183a4 {
        31:0    value;
    }

    NV_FB_USABLE_MIB => NV_AON_SCRATCH_42 {
        /// Usable framebuffer size, in megabytes.
        31:0    value;
    }
}

/// Base family of the falcon registers.
pub(crate) struct PFalconBase;

nv_reg! {
    NV_PFALCON_FALCON_IRQSCLR @ PFalconBase + 0x00000004 {
        4:4     halt => bool;
        6:6     swgen0 => bool;
    }

    NV_PFALCON_FALCON_MAILBOX0 @ PFalconBase + 0x00000040 {
        31:0    value => u32;
    }

    NV_PFALCON_FALCON_HWCFG2 @ PFalconBase + 0x000000f4 {
        10:10   riscv => bool;
        /// Set to 0 after memory scrubbing is completed.
        12:12   mem_scrubbing => bool;
        /// Signal indicating that reset is completed (GA102+).
        31:31   reset_ready => bool;
    }

    NV_PFALCON_FALCON_CPUCTL @ PFalconBase + 0x00000100 {
        1:1     startcpu => bool;
        4:4     halted => bool;
        6:6     alias_en => bool;
    }

    NV_PFALCON_FALCON_DMATRFCMD @ PFalconBase + 0x00000118 {
        0:0     full => bool;
        1:1     idle => bool;
        3:2     sec;
        4:4     imem => bool;
        5:5     is_write => bool;
        10:8    size ?=> DmaTrfCmdSize;
        14:12   ctxdma;
        16:16   set_dmtag;
    }

    NV_PFALCON_FALCON_DMATRFBASE1 @ PFalconBase + 0x00000128 {
        8:0     base;
    }

    NV_PFALCON_FALCON_CPUCTL_ALIAS @ PFalconBase + 0x00000130 {
        1:1     startcpu => bool;
    }

    NV_PFALCON_FBIF_TRANSCFG[8] @ PFalconBase + 0x00000600 {
        1:0     target;
        2:2     mem_type => FalconFbifMemType;
    }
}

/// The GSP falcon.
struct Gsp;
impl RegisterBase<PFalconBase> for Gsp {
    const BASE: usize = 0x0011_0000;
}

/// The SEC2 falcon.
struct Sec2;
impl RegisterBase<PFalconBase> for Sec2 {
    const BASE: usize = 0x0084_0000;
}

/// A few behaviours of an Ampere GPU at register level.
#[derive(Default)]
struct SimGpu {
    regs: RefCell<BTreeMap<usize, u32>>,
    /// Reads of HWCFG2 left before memory scrubbing of the GSP completes.
    scrub_reads_left: Cell<u32>,
}

impl SimGpu {
    fn ampere() -> Self {
        let gpu = SimGpu::default();
        {
            let mut regs = gpu.regs.borrow_mut();
            regs.insert(0x0, 0x1700_00a1);
            regs.insert(0xa00, 0x170a_0000);
            regs.insert(0x0011_0000 + 0xf4, 1 << 12);
        }
        gpu.scrub_reads_left.set(3);
        gpu
    }
}

impl DeviceModel for SimGpu {
    fn read(&self, offset: usize, width: AccessWidth) -> u64 {
        assert_eq!(width, AccessWidth::U32, "nova registers are 32-bit");
        if offset == 0x0011_0000 + 0xf4 {
            let left = self.scrub_reads_left.get();
            if left == 0 {
                self.regs.borrow_mut().insert(offset, 0);
            } else {
                self.scrub_reads_left.set(left - 1);
            }
        }
        u64::from(*self.regs.borrow().get(&offset).unwrap_or(&0))
    }

    fn write(&self, offset: usize, width: AccessWidth, value: u64) {
        assert_eq!(width, AccessWidth::U32, "nova registers are 32-bit");
        let mut value = value as u32;
        // Writing 1 to CPUCTL.startcpu (directly or through the alias) starts the CPU, which
        // runs and halts at once.
        let falcon_base = offset & !0xfff;
        if offset & 0xfff == 0x100 || offset & 0xfff == 0x130 {
            if value & 0x2 != 0 {
                self.regs.borrow_mut().insert(falcon_base + 0x100, 1 << 4);
            }
            if offset & 0xfff == 0x130 {
                return;
            }
            value = 1 << 4;
        }
        self.regs.borrow_mut().insert(offset, value);
    }
}

/// BAR0 of the GPU: 16 MiB of registers.
struct Bar0(ModelRegion<SimGpu, 0x0100_0000>);

impl Deref for Bar0 {
    type Target = ModelRegion<SimGpu, 0x0100_0000>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

fn bar0() -> Bar0 {
    Bar0(ModelRegion::new(SimGpu::ampere()))
}

#[test]
fn chipset_identification() {
    let bar = &bar0();
    let boot0 = NV_PMC_BOOT_0::read(bar);
    assert_eq!(boot0.major_revision().get(), 0xa);
    assert_eq!(boot0.minor_revision().get(), 0x1);
    assert_eq!(boot0.architecture_0().get(), 0x17);
    let boot42 = NV_PMC_BOOT_42::read(bar);
    assert_eq!(boot42.architecture(), Ok(Architecture::Ampere));
    assert_eq!(boot42.major_revision(), 0xa);
    let minor: Bounded<u8, 4> = boot42.minor_revision().cast();
    assert_eq!(minor, 0);

    // The same through the Linux 7.2 accessors.
    assert_eq!(
        bar.read(NV_PMC_BOOT_42).architecture(),
        Ok(Architecture::Ampere)
    );
    assert_eq!(bar.read(NV_PMC_BOOT_0).as_raw(), 0x1700_00a1);

    // An unknown architecture is reported by the fallible getter.
    bar.write_reg(NV_PMC_BOOT_42::zeroed().with_architecture(Architecture::Ada));
    assert_eq!(
        bar.read(NV_PMC_BOOT_42).architecture(),
        Ok(Architecture::Ada)
    );
    bar.write_reg(NV_PMC_BOOT_42::from(0x3f00_0000));
    assert_eq!(
        NV_PMC_BOOT_42::read(bar).architecture(),
        Err(UnknownArchitecture(0x3f))
    );
}

#[test]
fn scratch_array_and_alias() {
    let bar = &bar0();
    NV_PBUS_SW_SCRATCH::from(0xdead_0000).write(bar, 0xe);
    assert_eq!(
        NV_PBUS_SW_SCRATCH_0E_FRTS_ERR::read(bar).frts_err_code(),
        0xdead
    );
    assert_eq!(
        bar.read(NV_PBUS_SW_SCRATCH_0E_FRTS_ERR)
            .frts_err_code()
            .get(),
        0xdead
    );
    assert_eq!(NV_PBUS_SW_SCRATCH::OFFSET + 0xe * 4, 0x1438);
    assert_eq!(NV_PBUS_SW_SCRATCH_0E_FRTS_ERR::OFFSET, 0x1438);
    assert_eq!(
        NV_PBUS_SW_SCRATCH::try_read(bar, 64).err(),
        Some(Error::IndexOutOfRange)
    );

    bar.write_reg(NV_GFW_BOOT_PROGRESS::zeroed().with_progress(0xffu8));
    assert_eq!(bar.read(NV_AON_SCRATCH_05::at(0)).as_raw(), 0xff);

    NV_AON_SCRATCH_42::from(4096).write(bar);
    assert_eq!(NV_FB_USABLE_MIB::read(bar).value(), 4096);

    let range = NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE::zeroed()
        .set_ecc_mode_enabled(true)
        .try_set_lower_mag(0x3fu32)
        .unwrap();
    range.write(bar);
    assert!(bar
        .read(NV_PFB_PRI_MMU_LOCAL_MEMORY_RANGE)
        .ecc_mode_enabled());
    assert_eq!(
        range.try_set_lower_mag(0x40u32).err(),
        Some(Error::ValueTooWide)
    );
}

#[test]
fn falcon_registers_relative_to_each_engine() {
    let bar = &bar0();

    // Seed style: the engine is a base argument.
    NV_PFALCON_FALCON_MAILBOX0::zeroed()
        .set_value(0x1234)
        .write(bar, &Gsp);
    NV_PFALCON_FALCON_MAILBOX0::zeroed()
        .set_value(0x5678)
        .write(bar, &Sec2);
    assert_eq!(NV_PFALCON_FALCON_MAILBOX0::read(bar, &Gsp).value(), 0x1234);
    assert_eq!(bar.read32(0x0084_0040), 0x5678);

    // Linux 7.2 style.
    assert_eq!(
        bar.read(NV_PFALCON_FALCON_MAILBOX0::of::<Sec2>()).value(),
        0x5678
    );
    bar.write(
        NV_PFALCON_FALCON_IRQSCLR::of::<Gsp>(),
        NV_PFALCON_FALCON_IRQSCLR::zeroed()
            .with_halt(true)
            .with_swgen0(true),
    );
    assert_eq!(bar.read32(0x0011_0004), 0x50);

    // Start the CPU through the alias register, then check that it halted.
    NV_PFALCON_FALCON_CPUCTL_ALIAS::zeroed()
        .set_startcpu(true)
        .write(bar, &Gsp);
    assert!(NV_PFALCON_FALCON_CPUCTL::read(bar, &Gsp).halted());
    assert!(!bar.read(NV_PFALCON_FALCON_CPUCTL::of::<Sec2>()).halted());
    bar.update(NV_PFALCON_FALCON_CPUCTL::of::<Sec2>(), |r| {
        r.with_startcpu(true)
    });
    assert!(bar.read(NV_PFALCON_FALCON_CPUCTL::of::<Sec2>()).halted());

    // DMA command with a fallibly converted field and a bool passed to a 2-bit field.
    let cmd = NV_PFALCON_FALCON_DMATRFCMD::zeroed()
        .set_imem(true)
        .set_sec(true)
        .set_size(DmaTrfCmdSize::Size256B);
    cmd.write(bar, &Gsp);
    let back = bar.read(NV_PFALCON_FALCON_DMATRFCMD::of::<Gsp>());
    assert_eq!(back.size(), Ok(DmaTrfCmdSize::Size256B));
    assert_eq!(back.sec(), 1);
    assert_eq!(back.as_raw(), 0x614);
    assert_eq!(
        NV_PFALCON_FALCON_DMATRFCMD::from(0x700).size(),
        Err(Error::OutOfBounds)
    );

    // A value computed at run time, checked on the way in.
    let dma_start: u64 = 0x0000_0123_0000_0000;
    let base1 = NV_PFALCON_FALCON_DMATRFBASE1::zeroed()
        .try_set_base(dma_start >> 32)
        .unwrap();
    base1.write(bar, &Sec2);
    assert_eq!(bar.read32(0x0084_0128), 0x123);
    assert_eq!(
        base1.try_set_base(dma_start >> 24).err(),
        Some(Error::ValueTooWide)
    );

    // A relative array.
    NV_PFALCON_FBIF_TRANSCFG::update(bar, &Gsp, 2, |r| {
        r.set_target(Bounded::<u32, 2>::new::<1>())
            .set_mem_type(FalconFbifMemType::Physical)
    });
    let transcfg = bar.read(NV_PFALCON_FBIF_TRANSCFG::of::<Gsp>().at(2));
    assert_eq!(transcfg.mem_type(), FalconFbifMemType::Physical);
    assert_eq!(transcfg.target(), 1);
    assert_eq!(bar.read32(0x0011_0608), 0x5);
    assert!(NV_PFALCON_FBIF_TRANSCFG::try_read(bar, &Gsp, 8).is_err());
}

#[test]
fn wait_for_memory_scrubbing() {
    let bar = &bar0();
    let clock = ManualPollClock::new();
    let hwcfg2 = read_poll_timeout(
        &clock,
        || Ok::<_, Error>(NV_PFALCON_FALCON_HWCFG2::read(bar, &Gsp)),
        |r| !r.mem_scrubbing(),
        Duration::from_millis(10),
        Duration::from_millis(100),
    )
    .unwrap();
    assert!(!hwcfg2.mem_scrubbing());
    assert_eq!(clock.now_value(), Duration::from_millis(30));

    // SEC2 never reports `reset_ready` in this model: the wait times out.
    let r = read_poll_timeout(
        &clock,
        || Ok::<_, Error>(bar.read(NV_PFALCON_FALCON_HWCFG2::of::<Sec2>())),
        |r| r.reset_ready(),
        Duration::from_millis(10),
        Duration::from_millis(100),
    );
    assert_eq!(r.err(), Some(Error::TimedOut));
    assert_eq!(Error::TimedOut.to_errno(), -110);
}

#[test]
fn debug_output_lists_every_field() {
    let s = format!("{:?}", NV_PFALCON_FALCON_CPUCTL::from(0x50));
    assert_eq!(
        s,
        "NV_PFALCON_FALCON_CPUCTL { <raw>: 0x50, startcpu: false, halted: true, alias_en: true }"
    );
}
