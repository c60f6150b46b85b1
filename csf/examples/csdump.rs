// SPDX-License-Identifier: GPL-2.0 OR MIT

//! Disassembles a Mali v10 command stream.
//!
//! ```text
//! cargo run -p gpukit-csf --example csdump -- [--base ADDR] FILE   # FILE: little-endian u64 words
//! cargo run -p gpukit-csf --example csdump -- -                    # the words from stdin
//! cargo run -p gpukit-csf --example csdump                         # a built-in sample stream
//! ```
//!
//! `ADDR` (decimal or `0x` hex) is the GPU address of the first word, for the listing's
//! addresses and branch targets. Undefined words are listed as `.word`, not refused.

use std::io::Read;
use std::process::ExitCode;

use csf::{
    Condition, Disasm, FlushMode, Imm48, Instr, OtherFlushMode, Reg, Reg64, Slot, SlotMask, SyncOp,
    WaitMask,
};

/// A stream like the ones a driver writes: panthor's ring prologue around a call, then a small
/// loop, and one word that is no instruction.
fn sample() -> Vec<u64> {
    let (addr, val) = (Reg64(92), Reg(94));
    let slot0 = Slot::of::<0>();
    let mut words: Vec<u64> = [
        Instr::move32(val, 0x42),
        Instr::flush_cache2(
            FlushMode::CleanInvalidate,
            FlushMode::CleanInvalidate,
            OtherFlushMode::Invalidate,
            val,
            SlotMask::NONE,
            slot0,
        ),
        Instr::move48(addr, Imm48::of::<0x80_0000_1000>()),
        Instr::move32(val, 0x40),
        Instr::wait(WaitMask::from_bits(1)), // the flush, on slot 0
        Instr::call(addr, val),
        Instr::move48(addr, Imm48::of::<0x80_0000_2000>()),
        Instr::move48(Reg64(94), Imm48::of::<1>()),
        Instr::wait(WaitMask::ALL),
        Instr::sync_add64(SyncOp::new(addr, Reg64(94)).propagate_error()),
        Instr::error_barrier(),
        Instr::move32(Reg(0), 3),
        Instr::add_imm32(Reg(0), Reg(0), -1),
        Instr::branch(Condition::Nequal, Reg(0), -2),
    ]
    .map(Instr::encode)
    .to_vec();
    words.push(0x0a00_0000_0000_0000);
    words
}

fn parse_addr(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut base = 0;
    let mut path = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--base" => {
                let v = args.next().ok_or("--base needs an address")?;
                base = parse_addr(&v).ok_or_else(|| format!("bad address `{v}`"))?;
            }
            "-h" | "--help" => {
                println!("usage: csdump [--base ADDR] [FILE | -]");
                return Ok(());
            }
            _ if path.is_none() => path = Some(a),
            _ => return Err(format!("unexpected argument `{a}`")),
        }
    }
    let words = match path.as_deref() {
        None => {
            println!("// no file given: a sample stream (usage: csdump [--base ADDR] [FILE | -])");
            sample()
        }
        Some(p) => {
            let mut bytes = Vec::new();
            if p == "-" {
                std::io::stdin().read_to_end(&mut bytes)
            } else {
                std::fs::File::open(p).and_then(|mut f| f.read_to_end(&mut bytes))
            }
            .map_err(|e| format!("{p}: {e}"))?;
            let chunks = bytes.chunks_exact(8);
            if !chunks.remainder().is_empty() {
                eprintln!(
                    "csdump: {p}: {} trailing bytes (not a whole word) left out",
                    chunks.remainder().len()
                );
            }
            chunks
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect()
        }
    };
    print!("{}", Disasm::new(&words, base));
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("csdump: {e}");
            ExitCode::FAILURE
        }
    }
}
