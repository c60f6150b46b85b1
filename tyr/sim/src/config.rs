// SPDX-License-Identifier: GPL-2.0 OR MIT

//! What the simulated GPU reports, how long things take, and which failures to inject.
//!
//! A driver learns what GPU it drives only from the identification and feature registers: the
//! `GPU_ID` register names the architecture (`arch_major` 10 is Valhall with the
//! command-stream frontend) and product (`prod_major` 7 is the G610), the feature registers
//! describe caches, tiler, MMU (48 VA bits, 40 PA bits, 8 address spaces) and the cores that
//! are fitted. [`Identity::g610`] holds the values of the 4-core G610 of the Rockchip RK3588.
//!
//! Operations that take time on hardware (a reset, a power transition, an MMU command, a
//! cache flush) complete after the [`Timings`] delays of *simulated* time, which only moves
//! when the user of the simulator advances it (see [`Gpu::advance`](super::Gpu::advance)).
//! A delay of zero completes the operation within the register write that started it.
//! The firmware, too, takes its time: it serves a request rung through a doorbell
//! [`Timings::fw_ack_ns`] later, plus a jitter that lets requests rung together be
//! acknowledged in either order.
//!
//! The GPU clock runs at one of a few operating points ([`Timings::opp_table`]); the SoC's
//! clock controller, not a GPU register, selects it
//! ([`Gpu::set_gpu_clock_hz`](super::Gpu::set_gpu_clock_hz)). The cycle counter follows the
//! clock; the system timestamp ticks at [`Timings::timestamp_hz`] whatever the clock.
//!
//! [`FaultInjection`] makes the simulated hardware misbehave in the ways a driver must
//! survive: an unknown GPU (via [`Identity::gpu_id`]), a reset that never completes or fails
//! once, a power domain that never comes up.

use super::firmware::Flashed;
use super::mem::MemConfig;

/// Identification and feature register values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `GPU_ID`.
    pub gpu_id: u32,
    /// `REVIDR`.
    pub revidr: u32,
    /// `CSF_ID`.
    pub csf_id: u32,
    /// `L2_FEATURES`.
    pub l2_features: u32,
    /// `CORE_FEATURES`.
    pub core_features: u32,
    /// `TILER_FEATURES`.
    pub tiler_features: u32,
    /// `MEM_FEATURES`.
    pub mem_features: u32,
    /// `MMU_FEATURES`.
    pub mmu_features: u32,
    /// `AS_PRESENT` (contiguous from bit 0; at most 16 address spaces).
    pub as_present: u32,
    /// `THREAD_MAX_THREADS`.
    pub thread_max_threads: u32,
    /// `THREAD_MAX_WORKGROUP_SIZE`.
    pub thread_max_workgroup_size: u32,
    /// `THREAD_MAX_BARRIER_SIZE`.
    pub thread_max_barrier_size: u32,
    /// `THREAD_FEATURES`.
    pub thread_features: u32,
    /// `TEXTURE_FEATURES_0..3`.
    pub texture_features: [u32; 4],
    /// `SHADER_PRESENT`.
    pub shader_present: u64,
    /// `TILER_PRESENT`.
    pub tiler_present: u64,
    /// `L2_PRESENT`.
    pub l2_present: u64,
    /// `COHERENCY_FEATURES`.
    pub coherency_features: u32,
}

impl Identity {
    /// The Mali-G610 MP4 of the RK3588 (`GPU_ID` 0xa8670005: arch 10.8.6, product 7,
    /// r0p0 status 5).
    pub const fn g610() -> Self {
        Identity {
            gpu_id: 0xa867_0005,
            revidr: 0,
            csf_id: 0x40a0_0101,
            l2_features: 0x0712_0306,
            core_features: 0x0000_0002,
            tiler_features: 0x0000_0809,
            mem_features: 0x0000_0301,
            mmu_features: 0x0000_2830,
            as_present: 0xff,
            thread_max_threads: 0x800,
            thread_max_workgroup_size: 0x400,
            thread_max_barrier_size: 0x400,
            thread_features: 0x0401_0000,
            texture_features: [0xc1ff_ff9e, 0, 0, 0],
            shader_present: 0x5_0005,
            tiler_present: 0x1,
            l2_present: 0x1,
            coherency_features: 0x1,
        }
    }

    /// Number of address spaces (`AS_PRESENT` is a contiguous mask from bit 0).
    pub const fn num_as(&self) -> usize {
        let n = self.as_present.trailing_ones() as usize;
        if n > 16 {
            16
        } else {
            n
        }
    }

    /// Physical address bits (`MMU_FEATURES` bits 15:8).
    pub const fn pa_bits(&self) -> u32 {
        (self.mmu_features >> 8) & 0xff
    }

    /// Virtual address bits (`MMU_FEATURES` bits 7:0).
    pub const fn va_bits(&self) -> u32 {
        self.mmu_features & 0xff
    }
}

/// Durations of simulated operations, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// From a reset command to `RESET_COMPLETED`.
    pub reset_ns: u64,
    /// From a power-on or power-off request to the end of the transition.
    pub power_ns: u64,
    /// How long an `AS_COMMAND` keeps `AS_STATUS.ACTIVE` set.
    pub mmu_command_ns: u64,
    /// From a cache maintenance command to `CLEAN_CACHES_COMPLETED`.
    pub cache_flush_ns: u64,
    /// From enabling the MCU to `MCU_STATUS` reading enabled.
    pub mcu_ns: u64,
    /// Duration of one command-stream engine step (every running stream executes up to 16
    /// instructions per step); at least 1.
    pub cs_step_ns: u64,
    /// How long work handed to an endpoint (`RUN_*`, `FINISH_TILING`) occupies its scoreboard
    /// entry.
    pub cs_work_ns: u64,
    /// How long a command stream's loads, stores and `STORE_STATE`s take once they start (a
    /// sync operation writes its object as soon as its wait mask allows).
    pub cs_mem_ns: u64,
    /// How often the firmware looks again at the memory a stream blocked on `SYNC_WAIT` waits
    /// for, while nothing on the GPU's side (a sync operation of another stream) makes it look
    /// sooner: a write the CPU makes to that memory is seen within this time. At least 1.
    ///
    /// The GPU cannot see a CPU store happen; it only reads memory. The simulated firmware
    /// polls the waits it holds, so a stream blocked on a word userspace sets later (a host
    /// `VkEvent`, a user-mode fence) goes on within one poll interval of the write, on
    /// whatever executes the simulation (whose pacing keeps simulated time behind real time:
    /// the interval is real time too, as far as the host keeps up).
    pub sync_poll_ns: u64,
    /// Frequency of the system timestamp counter (`TIMESTAMP`), in Hz.
    pub timestamp_hz: u64,
    /// GPU clock frequency at reset, which drives `CYCLE_COUNT`, in Hz.
    pub gpu_clock_hz: u64,
    /// The operating points the GPU clock may be set to
    /// ([`Gpu::set_gpu_clock_hz`](super::Gpu::set_gpu_clock_hz)), in Hz, slowest first.
    pub opp_table: [u64; OPP_COUNT],
    /// How long the firmware takes to get to a request rung through a doorbell, at least: the
    /// global interface's requests (doorbell 0) are served that long after the ring, and the
    /// requests of a group slot that long after the global interface passed its doorbell bit
    /// on (so a group's state change and its streams' requests take about twice as long).
    /// The request takes effect, and is acknowledged, when it is served (see [`crate::csf`]).
    /// 0 together with a zero [`fw_ack_jitter_ns`](Self::fw_ack_jitter_ns) serves every
    /// request within the register write that rings its doorbell, which real firmware never
    /// does (for the simulator's own unit tests of the engine).
    pub fw_ack_ns: u64,
    /// Up to how much longer each request takes, drawn per request (uniformly, from a
    /// generator seeded with [`fw_seed`](Self::fw_seed)): requests rung together may be
    /// acknowledged in any order.
    pub fw_ack_jitter_ns: u64,
    /// Seed of the firmware's latency jitter (any value): the same seed and the same
    /// accesses give the same order of acknowledgements.
    pub fw_seed: u64,
}

/// Number of operating points of [`Timings::opp_table`].
pub const OPP_COUNT: usize = 4;

impl Default for Timings {
    fn default() -> Self {
        Timings {
            reset_ns: 20_000,
            power_ns: 5_000,
            mmu_command_ns: 1_000,
            cache_flush_ns: 2_000,
            mcu_ns: 10_000,
            cs_step_ns: 100,
            cs_work_ns: 2_000,
            cs_mem_ns: 200,
            // 1 ms: a CPU write is seen within a millisecond, for a thousand wake-ups a
            // second of the simulation's executor while a stream waits.
            sync_poll_ns: 1_000_000,
            timestamp_hz: 24_000_000,
            gpu_clock_hz: 1_000_000_000,
            // A subset of the RK3588's G610 table.
            opp_table: [300_000_000, 500_000_000, 800_000_000, 1_000_000_000],
            // Real firmware answers in tens of microseconds: a global request within 10 to
            // 30 us, a group's within 20 to 60 us.
            fw_ack_ns: 10_000,
            fw_ack_jitter_ns: 20_000,
            fw_seed: 0x7459_725f_6677_6163,
        }
    }
}

/// Failures to inject.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultInjection {
    /// Reset commands are accepted but `RESET_COMPLETED` is never raised.
    pub reset_never_completes: bool,
    /// The first reset command never completes; later ones do.
    pub reset_fails_once: bool,
    /// Power-on requests for the L2 never finish (it stays in `PWRTRANS`).
    pub l2_never_powers_up: bool,
    /// Power-on requests for shader cores never finish.
    pub shader_never_powers_up: bool,
    /// Power-on requests for the tiler never finish.
    pub tiler_never_powers_up: bool,
    /// MMU commands never finish (`AS_STATUS.ACTIVE` stays set).
    pub mmu_command_stuck: bool,
    /// When set, that many more MMU commands (`AS_COMMAND` writes, every address space
    /// together) finish as usual and every later one never does, as with
    /// [`mmu_command_stuck`](Self::mmu_command_stuck): a `LOCK` that completes followed by an
    /// `UNLOCK` that hangs, for example.
    pub mmu_commands_before_stuck: Option<u32>,
}

/// Everything a [`Gpu`](super::Gpu) is created with.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "std")] {
/// use mali_sim::{Config, Gpu};
///
/// let mut cfg = Config::g610();
/// cfg.identity.gpu_id = 0xdead_0000; // an unknown GPU
/// cfg.faults.reset_never_completes = true;
/// let mut gpu = Gpu::new(cfg);
/// assert_eq!(gpu.read32(0), 0xdead_0000);
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Register values.
    pub identity: Identity,
    /// Operation durations.
    pub timings: Timings,
    /// Injected failures.
    pub faults: FaultInjection,
    /// Physical memory.
    pub memory: MemConfig,
    /// The firmware image the MCU was given, as it keeps it (see [`crate::firmware`]);
    /// `None` (the default) for an MCU that checks only that the shared region is mapped.
    pub firmware: Option<Flashed>,
}

impl Config {
    /// A Mali-G610 with default timings, no injected faults and unlimited memory.
    pub fn g610() -> Self {
        Config {
            identity: Identity::g610(),
            timings: Timings::default(),
            faults: FaultInjection::default(),
            memory: MemConfig::default(),
            firmware: None,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::g610()
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;

    #[test]
    fn g610_identity_decodes() {
        let id = Identity::g610();
        assert_eq!(id.gpu_id >> 28, 10, "arch_major");
        assert_eq!((id.gpu_id >> 16) & 0xf, 7, "prod_major");
        assert_eq!(id.num_as(), 8);
        assert_eq!(id.va_bits(), 48);
        assert_eq!(id.pa_bits(), 40);
        assert_eq!(id.shader_present.count_ones(), 4);
        let many = Identity {
            as_present: u32::MAX,
            ..id
        };
        assert_eq!(many.num_as(), 16);
    }
}
