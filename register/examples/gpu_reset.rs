// SPDX-License-Identifier: GPL-2.0 OR MIT

//! A GPU soft reset against a simulated Mali `GPU_CONTROL` block.
//!
//! The driver half declares four registers with `register!`, reads and decodes `GPU_ID`, issues
//! the soft-reset command and waits with `read_poll_timeout` for the `RESET_COMPLETED` interrupt
//! bit, then acknowledges it. The device half is a `DeviceModel` whose reset completes a fixed
//! simulated time after the command; time only moves when the driver sleeps on the
//! `ManualPollClock`. A `TraceLog` records every register access, which the example prints and
//! checks; a second reset with a device that never finishes shows the `ETIMEDOUT` path.

use core::cell::Cell;
use core::time::Duration;

use register::io::model::TraceLog;
use register::io::poll::{read_poll_timeout, ManualPollClock, PollClock};
use register::io::{AccessKind, AccessWidth, DeviceModel, Io, IoCapable, IoKnownSize, ModelRegion};
use register::{register, Error};

register! {
    @first_series
    /// GPU identification.
    pub GPU_ID(u32) @ 0x000 {
        31:28 arch_major; 27:24 arch_minor; 23:20 arch_rev; 19:16 prod_major;
        15:12 ver_major; 11:4 ver_minor; 3:0 ver_status;
    }
    /// Raw (unmasked) GPU interrupt status.
    pub GPU_IRQ_RAWSTAT(u32) @ 0x020 { 8:8 reset_completed => bool; 0:0 fault => bool; }
    /// Write 1 to clear a raw interrupt bit.
    pub GPU_IRQ_CLEAR(u32) @ 0x024 { 8:8 reset_completed => bool; 0:0 fault => bool; }
    /// Command register: a command type and its payload (type 1 = reset, payload 1 = soft).
    pub GPU_CMD(u32) @ 0x030 { 15:8 payload; 7:0 cmd_type; }
}

/// Polling interval of the reset wait.
const STEP: Duration = Duration::from_micros(50);

/// A GPU whose soft reset completes `latency` after the command, as seen on `clock`.
struct SimGpu<'a> {
    clock: &'a ManualPollClock,
    latency: Cell<Option<Duration>>,
    rawstat: Cell<u32>,
    reset_started: Cell<Option<Duration>>,
}

impl DeviceModel for SimGpu<'_> {
    fn read(&self, offset: usize, _width: AccessWidth) -> u64 {
        if let (Some(start), Some(latency)) = (self.reset_started.get(), self.latency.get()) {
            if self.clock.now_value() >= start + latency {
                self.reset_started.set(None);
                self.rawstat.set(self.rawstat.get() | 1 << 8);
            }
        }
        match offset {
            0x000 => 0xa867_0005, // Mali-G610 r0p0
            0x020 => u64::from(self.rawstat.get()),
            _ => 0,
        }
    }

    fn write(&self, offset: usize, _width: AccessWidth, value: u64) {
        match (offset, value) {
            (0x024, v) => self.rawstat.set(self.rawstat.get() & !(v as u32)),
            (0x030, 0x101) => self.reset_started.set(Some(self.clock.now_value())),
            _ => {}
        }
    }
}

/// Driver code: soft-reset the GPU and wait (50 us steps, 1 ms budget) for completion.
fn soft_reset<R>(io: &R, clock: &impl PollClock) -> Result<Duration, Error>
where
    R: Io + IoCapable<u32> + IoKnownSize,
{
    io.write_reg(GPU_IRQ_CLEAR::zeroed().with_reset_completed(true));
    io.write_reg(
        GPU_CMD::zeroed()
            .with_const_cmd_type::<1>()
            .with_const_payload::<1>(),
    );
    let start = clock.now();
    read_poll_timeout(
        clock,
        || Ok::<_, Error>(io.read(GPU_IRQ_RAWSTAT)),
        |s| s.reset_completed(),
        STEP,
        Duration::from_millis(1),
    )?;
    io.write_reg(GPU_IRQ_CLEAR::zeroed().with_reset_completed(true));
    Ok(clock.now() - start)
}

fn main() -> Result<(), String> {
    let clock = ManualPollClock::new();
    let latency = Duration::from_micros(250);
    let gpu = SimGpu {
        clock: &clock,
        latency: Cell::new(Some(latency)),
        rawstat: Cell::new(0),
        reset_started: Cell::new(None),
    };
    let io = ModelRegion::<_, 0x1000, _>::with_trace(gpu, TraceLog::new());

    let id = io.read(GPU_ID);
    println!(
        "GPU_ID {:#010x}: arch {}.{}.{}, product major {}, r{}p{} status {}",
        id.into_raw(),
        id.arch_major(),
        id.arch_minor(),
        id.arch_rev(),
        id.prod_major(),
        id.ver_major(),
        id.ver_minor(),
        id.ver_status()
    );
    if (
        id.arch_major().get(),
        id.prod_major().get(),
        id.ver_status().get(),
    ) != (10, 7, 5)
    {
        return Err(format!("GPU_ID decoded wrongly: {id:?}"));
    }

    let took = soft_reset(&io, &clock).map_err(|e| format!("soft reset failed: {e}"))?;
    println!("soft reset completed after {took:?} of simulated time (device latency {latency:?})");
    let trace = io.trace().take();
    if took < latency || took > latency + STEP {
        return Err(format!(
            "reset observed after {took:?}, expected about {latency:?}"
        ));
    }
    if io.read(GPU_IRQ_RAWSTAT).reset_completed() {
        return Err("RESET_COMPLETED still raised after the acknowledgement".into());
    }

    println!("access trace ({} accesses):", trace.len());
    let name = |off| match off {
        0x000 => "GPU_ID",
        0x020 => "GPU_IRQ_RAWSTAT",
        0x024 => "GPU_IRQ_CLEAR",
        0x030 => "GPU_CMD",
        _ => "?",
    };
    for (i, a) in trace.iter().enumerate() {
        let dir = if a.kind == AccessKind::Read {
            "read "
        } else {
            "write"
        };
        println!(
            "  {i:2}: {dir} {:<16} @ {:#05x} = {:#x}",
            name(a.offset),
            a.offset,
            a.value
        );
    }
    let cmd_writes: Vec<_> = trace.iter().filter(|a| a.offset == 0x030).collect();
    let polls = trace.iter().filter(|a| a.offset == 0x020).count();
    if cmd_writes.len() != 1
        || cmd_writes[0].value != 0x101
        || cmd_writes[0].kind != AccessKind::Write
    {
        return Err(format!(
            "expected one soft-reset command (0x101), got {cmd_writes:?}"
        ));
    }
    // One poll at the start and one per step until the latency has passed.
    let expected_polls = (latency.as_micros() / STEP.as_micros() + 1) as usize;
    if polls != expected_polls {
        return Err(format!("{polls} RAWSTAT reads, expected {expected_polls}"));
    }

    // A device that never completes its reset: the wait gives up with ETIMEDOUT.
    io.model().latency.set(None);
    match soft_reset(&io, &clock) {
        Err(e @ Error::TimedOut) => println!("hung device: {e} (errno {})", e.to_errno()),
        other => return Err(format!("hung device gave {other:?}, expected a timeout")),
    }
    println!("all checks passed");
    Ok(())
}
