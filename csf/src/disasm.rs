// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The disassembler: [`Instr`]'s `Display` and [`Disasm`] for a whole stream.

use core::fmt;

use crate::operand::{Reg, Reg64};
use crate::{Instr, ShaderSelect};

/// `.srtN.spdN.tsdN.fauN`.
struct ShaderSelectView(ShaderSelect);

impl fmt::Display for ShaderSelectView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        write!(f, ".srt{}.spd{}.tsd{}.fau{}", s.srt, s.spd, s.tsd, s.fau)
    }
}

/// `[dN]`, `[dN + off]` or `[dN - off]`.
struct Addr(Reg64, i16);

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let off = i32::from(self.1);
        match off {
            0 => write!(f, "[{}]", self.0),
            o if o < 0 => write!(f, "[{} - {}]", self.0, -o),
            o => write!(f, "[{} + {}]", self.0, o),
        }
    }
}

/// The registers `base + i` of the set bits `i` of `mask`, as `r8:r9:r10`.
struct RegList(Reg, u16);

impl fmt::Display for RegList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.1 == 0 {
            return f.write_str("{}");
        }
        let mut first = true;
        for i in 0..16u16 {
            if self.1 & 1 << i != 0 {
                if !first {
                    f.write_str(":")?;
                }
                first = false;
                write!(f, "r{}", u16::from(self.0 .0) + i)?;
            }
        }
        Ok(())
    }
}

/// `.progress_inc` when set.
fn progress(f: &mut fmt::Formatter<'_>, on: bool) -> fmt::Result {
    if on {
        f.write_str(".progress_inc")?;
    }
    Ok(())
}

/// `, wait #0x.., signal #n`.
fn wait_signal(f: &mut fmt::Formatter<'_>, i: Instr) -> fmt::Result {
    if let Some(m) = i.wait_mask() {
        write!(f, ", wait #{:#x}", m.bits())?;
    }
    if let Some(s) = i.signal_slot() {
        write!(f, ", signal #{s}")?;
    }
    Ok(())
}

/// Disassembles one instruction, in a syntax close to Mesa's `pandecode`: the name, its
/// modifiers as `.suffixes`, then the operands (`rN` a register, `dN` a pair, `#` an
/// immediate, `[dN + off]` an address).
///
/// # Examples
///
/// ```
/// use csf::{Condition, Instr, Reg, Reg64};
/// assert_eq!(Instr::branch(Condition::Nequal, Reg(4), -3).to_string(), "BRANCH.ne r4, #-3");
/// assert_eq!(
///     Instr::load_multiple(Reg(8), Reg64(10), -4, 0b111).to_string(),
///     "LOAD_MULTIPLE r8:r9:r10, [d10 - 4]"
/// );
/// ```
impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.opcode().name())?;
        match *self {
            Self::Nop { payload } => {
                if payload.get() != 0 {
                    write!(f, " #{payload:#x}")?;
                }
            }
            Self::Move48 { dest, imm } => write!(f, " {dest}, #{imm:#x}")?,
            Self::Move32 { dest, imm } => write!(f, " {dest}, #{imm:#x}")?,
            Self::Wait {
                mask,
                progress_increment,
            } => {
                progress(f, progress_increment)?;
                write!(f, " #{:#x}", mask.bits())?;
            }
            Self::RunCompute {
                task_increment,
                task_axis,
                progress_increment,
                select,
            } => {
                progress(f, progress_increment)?;
                write!(
                    f,
                    ".{task_axis}{} #{task_increment}",
                    ShaderSelectView(select)
                )?;
            }
            Self::RunTiling {
                flags_override,
                progress_increment,
                select,
            } => {
                progress(f, progress_increment)?;
                write!(f, "{} #{flags_override:#x}", ShaderSelectView(select))?;
            }
            Self::RunIdvs {
                flags_override,
                progress_increment,
                malloc_enable,
                draw_id_register_enable,
                varying_srt_select,
                varying_fau_select,
                varying_tsd_select,
                fragment_srt_select,
                fragment_tsd_select,
                draw_id,
            } => {
                progress(f, progress_increment)?;
                for (on, name) in [
                    (malloc_enable, ".malloc"),
                    (varying_srt_select, ".varying_srt"),
                    (varying_fau_select, ".varying_fau"),
                    (varying_tsd_select, ".varying_tsd"),
                    (fragment_srt_select, ".frag_srt"),
                    (fragment_tsd_select, ".frag_tsd"),
                ] {
                    if on {
                        f.write_str(name)?;
                    }
                }
                write!(f, " #{flags_override:#x}")?;
                if draw_id_register_enable {
                    write!(f, ", draw_id {draw_id}")?;
                } else if draw_id.0 != 0 {
                    write!(f, ", draw_id {draw_id} (disabled)")?;
                }
            }
            Self::RunFragment {
                enable_tem,
                tile_order,
                progress_increment,
            } => {
                progress(f, progress_increment)?;
                if enable_tem {
                    f.write_str(".tem")?;
                }
                write!(f, ".{tile_order}")?;
            }
            Self::RunFullscreen {
                flags_override,
                progress_increment,
                dcd,
            } => {
                progress(f, progress_increment)?;
                write!(f, " #{flags_override:#x}, {dcd}")?;
            }
            Self::FinishTiling { progress_increment } => progress(f, progress_increment)?,
            Self::FinishFragment {
                increment_fragment_completed,
                last_heap_chunk,
                first_heap_chunk,
                ..
            } => {
                if increment_fragment_completed {
                    f.write_str(".frag_end")?;
                }
                write!(f, " {last_heap_chunk}, {first_heap_chunk}")?;
                wait_signal(f, *self)?;
            }
            Self::AddImmediate32 { dest, source, imm } => write!(f, " {dest}, {source}, #{imm}")?,
            Self::AddImmediate64 { dest, source, imm } => write!(f, " {dest}, {source}, #{imm}")?,
            Self::Umin32 {
                dest,
                source0,
                source1,
            } => write!(f, " {dest}, {source0}, {source1}")?,
            Self::LoadMultiple {
                base,
                address,
                offset,
                mask,
            }
            | Self::StoreMultiple {
                base,
                address,
                offset,
                mask,
            } => write!(f, " {}, {}", RegList(base, mask), Addr(address, offset))?,
            Self::Branch {
                condition,
                value,
                offset,
            } => write!(f, ".{condition} {value}, #{offset}")?,
            Self::SetSbEntry {
                endpoint_entry,
                other_entry,
            } => write!(f, " #{endpoint_entry}, #{other_entry}")?,
            Self::ProgressWait { queue, source } => write!(f, " {source}, #{queue}")?,
            Self::SetExceptionHandler {
                exception_type,
                address,
                length,
            } => write!(f, ".{exception_type} {address}, {length}")?,
            Self::Call { address, length } | Self::Jump { address, length } => {
                write!(f, " {address}, {length}")?;
            }
            Self::ReqResource {
                compute,
                fragment,
                tiler,
                idvs,
            } => {
                for (on, name) in [
                    (compute, ".compute"),
                    (fragment, ".fragment"),
                    (tiler, ".tiler"),
                    (idvs, ".idvs"),
                ] {
                    if on {
                        f.write_str(name)?;
                    }
                }
            }
            Self::FlushCache2 {
                l2_flush_mode,
                lsc_flush_mode,
                other_flush_mode,
                latest_flush_id,
                ..
            } => {
                write!(
                    f,
                    ".l2_{l2_flush_mode}.lsc_{lsc_flush_mode}.other_{other_flush_mode} \
                     {latest_flush_id}"
                )?;
                wait_signal(f, *self)?;
            }
            Self::SyncAdd32(s) | Self::SyncSet32(s) => {
                sync_op(f, s.scope.mnemonic(), s.error_propagate, s.address, s.data)?;
                wait_signal(f, *self)?;
            }
            Self::SyncAdd64(s) | Self::SyncSet64(s) => {
                sync_op(f, s.scope.mnemonic(), s.error_propagate, s.address, s.data)?;
                wait_signal(f, *self)?;
            }
            Self::SyncWait32(w) => {
                sync_wait(f, w.condition.mnemonic(), w.error_reject, w.address, w.data)?
            }
            Self::SyncWait64(w) => {
                sync_wait(f, w.condition.mnemonic(), w.error_reject, w.address, w.data)?
            }
            Self::StoreState {
                state,
                address,
                offset,
                ..
            } => {
                write!(f, ".{state} {}", Addr(address, offset))?;
                wait_signal(f, *self)?;
            }
            Self::ProtRegion { size } => write!(f, " #{size}")?,
            Self::ProgressStore { source } => write!(f, " {source}")?,
            Self::ProgressLoad { dest } => write!(f, " {dest}")?,
            Self::RunComputeIndirect {
                workgroups_per_task,
                progress_increment,
                select,
            } => {
                progress(f, progress_increment)?;
                write!(f, "{} #{workgroups_per_task}", ShaderSelectView(select))?;
            }
            Self::ErrorBarrier => {}
            Self::HeapSet { address } => write!(f, " {address}")?,
            Self::HeapOperation { operation, .. } => {
                write!(f, ".{operation}")?;
                // No operand precedes the wait mask: drop `wait_signal`'s leading comma.
                let mask = self.wait_mask().map_or(0, |m| m.bits());
                let slot = self.signal_slot().map_or(0, |s| s.get());
                write!(f, " wait #{mask:#x}, signal #{slot}")?;
            }
            Self::TracePoint {
                base_register,
                register_count,
                ..
            } => {
                write!(f, " {base_register}, #{register_count}")?;
                wait_signal(f, *self)?;
            }
        }
        Ok(())
    }
}

/// `.scope[.propagate] [address], data`.
fn sync_op(
    f: &mut fmt::Formatter<'_>,
    scope: &str,
    propagate: bool,
    address: Reg64,
    data: impl fmt::Display,
) -> fmt::Result {
    write!(f, ".{scope}")?;
    if propagate {
        f.write_str(".propagate")?;
    }
    write!(f, " [{address}], {data}")
}

/// `.cond[.reject] [address], data`.
fn sync_wait(
    f: &mut fmt::Formatter<'_>,
    cond: &str,
    reject: bool,
    address: Reg64,
    data: impl fmt::Display,
) -> fmt::Result {
    write!(f, ".{cond}")?;
    if reject {
        f.write_str(".reject")?;
    }
    write!(f, " [{address}], {data}")
}

/// A stream of instruction words that formats as a listing, one line per word: its address,
/// the raw word and the disassembly. Words that do not decode become `.word` lines with the
/// reason as a comment; branches get their target address as a comment.
///
/// It allocates nothing: format it wherever a [`fmt::Write`] or `std::io::Write` goes.
///
/// # Examples
///
/// ```
/// use csf::{Disasm, Instr, Reg, Condition};
/// let words = [
///     Instr::move32(Reg(4), 1).encode(),
///     10 << 56 | 7,
///     Instr::branch(Condition::Always, Reg(0), -3).encode(),
/// ];
/// let text = format!("{}", Disasm::new(&words, 0x1000));
/// let lines: Vec<&str> = text.lines().collect();
/// assert_eq!(lines[0], "0x0000000000001000: 0204000000000001  MOVE32 r4, #0x1");
/// assert_eq!(lines[1], "0x0000000000001008: 0a00000000000007  .word 0x0a00000000000007 // undefined opcode 10");
/// assert_eq!(lines[2], "0x0000000000001010: 160000006000fffd  BRANCH.always r0, #-3 // -> 0x0000000000001000");
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Disasm<'a> {
    words: &'a [u64],
    base: u64,
}

impl<'a> Disasm<'a> {
    /// A listing of `words`, the first at GPU address `base`.
    pub const fn new(words: &'a [u64], base: u64) -> Self {
        Self { words, base }
    }
}

impl fmt::Display for Disasm<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut addr = self.base;
        for &word in self.words {
            write!(f, "{addr:#018x}: {word:016x}  ")?;
            match Instr::decode(word) {
                Ok(i) => {
                    write!(f, "{i}")?;
                    if let Instr::Branch { offset, .. } = i {
                        let target = addr
                            .wrapping_add(8)
                            .wrapping_add_signed(i64::from(offset).wrapping_mul(8));
                        write!(f, " // -> {target:#018x}")?;
                    }
                }
                Err(e) => write!(f, ".word {word:#018x} // {e}")?,
            }
            f.write_str("\n")?;
            addr = addr.wrapping_add(8);
        }
        Ok(())
    }
}
