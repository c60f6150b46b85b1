// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The driver's files form floors: a file names only modules on floors below its own.
//!
//! The test reads every file of `src/`, collects the `crate::<name>` paths of its code (use
//! declarations, paths in expressions and types, `crate::{a, b::c}` groups; comments are not
//! code and are skipped, test modules are code and are checked), maps each name to the module
//! that defines it (`Error` and `Result` live in `error`, the `dev_info!`/`dev_err!`/`lock_class!`
//! macros in `backend`) and fails, listing every offence, if a file names a module on its own floor or
//! above. Every file must sit on a floor and every floor's module must have a file. The floor
//! table of `lib.rs`'s module documentation must list the same floors in the same order.

use std::collections::BTreeMap;
use std::path::Path;

/// The floors, bottom first. A module may name modules of lower floors only.
const FLOORS: &[&[&str]] = &[
    // Definitions: the register map, the firmware-interface layout and instruction set, the
    // uAPI structs, the error type. They name nothing of the crate.
    &["error", "regs", "csf", "uapi"],
    // Containers over the environment's allocator: fallible vectors, shared references.
    &["env"],
    // The environment: the backend traits, logging, CPU access to DMA memory.
    &["backend"],
    // The device (probe, reset, power) and the host implementation of the environment.
    &["gpu", "host", "kernel"],
    // Memory: VMs (gpuvm + io-pgtable), then address spaces and MMU commands, then BOs.
    &["vm"],
    &["mmu"],
    &["gem"],
    // Tiler heaps: contexts and chunks in DMA memory mapped in a VM.
    &["heap"],
    // Firmware: the MCU and its interface.
    &["fw"],
    // Scheduling: what every queue shares (clock, sizes, syncobj fences), the bind queues,
    // then groups, rings, slots, interrupts, timeouts and reset, with the device state.
    &["job"],
    &["bindq"],
    // Power: idle power-down and wake of the GPU, below the scheduler that drives it.
    &["pm"],
    &["sched"],
    // Files: a client's VMs and groups.
    &["file"],
    // The uAPI layer: the ioctl handlers.
    &["ioctl"],
    // The DRM driver glue: probe and the drm-ctx `Driver`.
    &["driver"],
    // A Mesa-like client of the ioctls, for tests and the demo.
    &["umd"],
];

/// Which module defines a name used as `crate::<name>` (modules define themselves).
fn module_of(name: &str) -> &str {
    match name {
        "Error" | "Result" => "error",
        "dev_info" | "dev_err" | "lock_class" | "lock_class_nth" => "backend",
        m => m,
    }
}

/// The code of a file without its comments (line comments, doc comments, block comments).
fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut in_block = 0usize;
    for line in src.lines() {
        let b = line.as_bytes();
        let mut i = 0;
        let mut in_str = false;
        while i < b.len() {
            if in_block > 0 {
                if b[i..].starts_with(b"*/") {
                    in_block -= 1;
                    i += 2;
                } else if b[i..].starts_with(b"/*") {
                    in_block += 1;
                    i += 2;
                } else {
                    i += 1;
                }
                continue;
            }
            if in_str {
                // String contents are not code: blanked.
                if b[i] == b'\\' {
                    i += 1;
                    out.push(' ');
                } else if b[i] == b'"' {
                    in_str = false;
                    out.push('"');
                } else {
                    out.push(' ');
                }
                i += 1;
                continue;
            }
            if b[i..].starts_with(b"//") {
                break;
            }
            if b[i..].starts_with(b"/*") {
                in_block += 1;
                i += 2;
                continue;
            }
            // A char literal holding a quote does not open a string.
            if b[i..].starts_with(b"'\"'") {
                out.push_str("'\"'");
                i += 3;
                continue;
            }
            if b[i] == b'"' {
                in_str = true;
            }
            out.push(b[i] as char);
            i += 1;
        }
        out.push('\n');
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first path segments after every `crate::` of `code` (not `$crate::`, which a macro
/// uses for its own module), with the line they are on.
fn crate_refs(code: &str) -> Vec<(String, usize)> {
    let mut refs = Vec::new();
    for (n, _) in code.match_indices("crate::") {
        let before = code[..n].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == '$') {
            continue;
        }
        let line = code[..n].matches('\n').count() + 1;
        let rest = &code[n + "crate::".len()..];
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::{c, d}, e}`: the first segment of every top-level entry.
            let mut depth = 0usize;
            let mut entry = String::new();
            let mut first = true;
            for c in group.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        first = false;
                    }
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        if !entry.is_empty() {
                            refs.push((entry.clone(), line));
                        }
                        entry.clear();
                        first = true;
                    }
                    c if depth == 0 && first && is_ident(c) => entry.push(c),
                    _ if depth == 0 && !entry.is_empty() => first = false,
                    _ => {}
                }
            }
            if !entry.is_empty() {
                refs.push((entry, line));
            }
        } else {
            let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
            if !name.is_empty() {
                refs.push((name, line));
            }
        }
    }
    refs
}

/// The floor table of `lib.rs`'s documentation: lines `//! <n>  <a>, <b>  | <description>`
/// inside the block that follows the line naming the floors.
fn lib_floors(lib: &str) -> Vec<(usize, Vec<String>)> {
    let mut rows = Vec::new();
    for line in lib.lines() {
        let Some(doc) = line.strip_prefix("//!") else {
            continue;
        };
        let Some((left, _)) = doc.split_once('|') else {
            continue;
        };
        let mut words = left.split_whitespace();
        let Some(Ok(n)) = words.next().map(str::parse::<usize>) else {
            continue;
        };
        let mods = words
            .flat_map(|w| w.split(','))
            .filter(|m| !m.is_empty())
            .map(String::from)
            .collect();
        rows.push((n, mods));
    }
    rows
}

#[test]
fn files_form_floors() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut floor_of = BTreeMap::new();
    for (i, floor) in FLOORS.iter().enumerate() {
        for m in *floor {
            assert!(floor_of.insert(*m, i).is_none(), "{m} is on two floors");
        }
    }
    let mut offences = Vec::new();
    let mut files = Vec::new();
    // A module is `src/<m>.rs`, or a directory `src/<m>/` whose files all belong to it.
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            let m = path.file_stem().unwrap().to_str().unwrap().to_string();
            files.push((m, path));
        } else if path.is_dir() && path.join("mod.rs").exists() {
            let m = path.file_name().unwrap().to_str().unwrap().to_string();
            for f in std::fs::read_dir(&path).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "rs") {
                    files.push((m.clone(), f));
                }
            }
        }
    }
    files.sort();
    let mut seen = Vec::new();
    for (module, path) in &files {
        let module = module.clone();
        if module == "lib" {
            continue;
        }
        seen.push(module.clone());
        let Some(&own) = floor_of.get(module.as_str()) else {
            offences.push(format!("src/{module}.rs is on no floor"));
            continue;
        };
        let code = strip_comments(&std::fs::read_to_string(path).unwrap());
        for (name, line) in crate_refs(&code) {
            let target = module_of(&name);
            if target == module {
                continue;
            }
            match floor_of.get(target) {
                Some(&f) if f < own => {}
                Some(&f) => offences.push(format!(
                    "src/{module}.rs:{line} (floor {own}) names crate::{name}, which is on floor {f}"
                )),
                None => offences.push(format!(
                    "src/{module}.rs:{line} names crate::{name}, which is on no floor"
                )),
            }
        }
    }
    for m in floor_of.keys() {
        if !seen.iter().any(|s| s == m) {
            offences.push(format!(
                "floor module {m} has no file src/{m}.rs (or src/{m}/mod.rs)"
            ));
        }
    }
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut documented = lib_floors(&lib);
    documented.sort_by_key(|(n, _)| *n);
    let declared: Vec<(usize, Vec<String>)> = FLOORS
        .iter()
        .enumerate()
        .map(|(i, f)| (i, f.iter().map(|m| m.to_string()).collect()))
        .collect();
    if documented != declared {
        offences.push(format!(
            "the floor table of lib.rs's documentation says {documented:?}, the test {declared:?}"
        ));
    }
    assert!(
        offences.is_empty(),
        "the files do not form floors:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_reference_scanner_sees_groups_and_skips_comments_and_strings() {
    let code = strip_comments(
        "use crate::{dev_err, mmu::{self, AsSlots}, Error};\n\
         // crate::driver in a comment\n\
         let x = crate::fw::MCU; /* crate::sched */ let s = \"// crate::gem\";\n\
         $crate::backend::log();\n",
    );
    let names: Vec<String> = crate_refs(&code).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["dev_err", "mmu", "Error", "fw"]);
}
