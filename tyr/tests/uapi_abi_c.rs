// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The panthor uAPI as a C compiler sees it: every struct's size and field offsets and every
//! constant the driver defines, compared with Linux 7.2's `include/uapi/drm/panthor_drm.h`.
//!
//! The test writes a C program that includes the header and prints the same facts the Rust
//! side states, compiles it with the host's C compiler and compares the two, line by line. It
//! needs a Linux tree and a C compiler, so it is ignored in a plain `cargo test`;
//! `cargo xtask kernel-test` runs it with `LINUX_SRC` pointing at the tree it builds (and `CC`,
//! if set, naming the compiler):
//!
//! ```text
//! LINUX_SRC=/path/to/linux cargo test -p gpukit-tyr --features host --test uapi_abi_c -- --ignored
//! ```
//!
//! The unit tests of `tyr::uapi` pin the same sizes and offsets by hand; this one checks them
//! against the header itself, and that no struct of the header is missing here.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use tyr::uapi::*;

/// One struct: its C name, its Rust size, and (C field, Rust offset) for every field.
struct Layout {
    c_name: &'static str,
    size: usize,
    fields: Vec<(&'static str, usize)>,
}

/// `layout!(c_name, RustType, [rust_field (=> "c_field")?, ...])`.
macro_rules! layout {
    ($c:literal, $t:ty, [$($f:ident $(=> $cf:literal)?),* $(,)?]) => {
        Layout {
            c_name: $c,
            size: core::mem::size_of::<$t>(),
            fields: vec![$((layout!(@name $f $($cf)?), core::mem::offset_of!($t, $f))),*],
        }
    };
    (@name $f:ident $cf:literal) => { $cf };
    (@name $f:ident) => { stringify!($f) };
}

fn layouts() -> Vec<Layout> {
    vec![
        layout!("drm_panthor_obj_array", ObjArray, [stride, count, array]),
        layout!(
            "drm_panthor_sync_op",
            SyncOp,
            [flags, handle, timeline_value]
        ),
        layout!(
            "drm_panthor_gpu_info",
            GpuInfo,
            [
                gpu_id,
                gpu_rev,
                csf_id,
                l2_features,
                tiler_features,
                mem_features,
                mmu_features,
                thread_features,
                max_threads,
                thread_max_workgroup_size,
                thread_max_barrier_size,
                coherency_features,
                texture_features,
                as_present,
                selected_coherency,
                shader_present,
                l2_present,
                tiler_present,
                core_features,
                pad,
                gpu_features,
            ]
        ),
        layout!(
            "drm_panthor_csif_info",
            CsifInfo,
            [
                csg_slot_count,
                cs_slot_count,
                cs_reg_count,
                scoreboard_slot_count,
                unpreserved_cs_reg_count,
                pad,
            ]
        ),
        layout!(
            "drm_panthor_timestamp_info",
            TimestampInfo,
            [
                timestamp_frequency,
                current_timestamp,
                timestamp_offset,
                flags,
                duration_nsec,
                cycle_count,
                cpu_timestamp_sec,
                cpu_timestamp_nsec,
            ]
        ),
        layout!(
            "drm_panthor_group_priorities_info",
            GroupPrioritiesInfo,
            [allowed_mask, pad]
        ),
        layout!("drm_panthor_dev_query", DevQuery, [type_ => "type", size, pointer]),
        layout!(
            "drm_panthor_vm_create",
            VmCreate,
            [flags, id, user_va_range]
        ),
        layout!("drm_panthor_vm_destroy", VmDestroy, [id, pad]),
        layout!(
            "drm_panthor_vm_bind_op",
            VmBindOp,
            [flags, bo_handle, bo_offset, va, size, syncs]
        ),
        layout!("drm_panthor_vm_bind", VmBind, [vm_id, flags, ops]),
        layout!("drm_panthor_vm_get_state", VmGetState, [vm_id, state]),
        layout!(
            "drm_panthor_bo_create",
            BoCreate,
            [size, flags, exclusive_vm_id, handle, pad]
        ),
        layout!(
            "drm_panthor_bo_mmap_offset",
            BoMmapOffset,
            [handle, pad, offset]
        ),
        layout!(
            "drm_panthor_queue_create",
            QueueCreate,
            [priority, pad, ringbuf_size]
        ),
        layout!(
            "drm_panthor_group_create",
            GroupCreate,
            [
                queues,
                max_compute_cores,
                max_fragment_cores,
                max_tiler_cores,
                priority,
                pad,
                compute_core_mask,
                fragment_core_mask,
                tiler_core_mask,
                vm_id,
                group_handle,
            ]
        ),
        layout!(
            "drm_panthor_group_destroy",
            GroupDestroy,
            [group_handle, pad]
        ),
        layout!(
            "drm_panthor_queue_submit",
            QueueSubmit,
            [
                queue_index,
                stream_size,
                stream_addr,
                latest_flush,
                pad,
                syncs,
            ]
        ),
        layout!(
            "drm_panthor_group_submit",
            GroupSubmit,
            [group_handle, pad, queue_submits]
        ),
        layout!(
            "drm_panthor_group_get_state",
            GroupGetState,
            [group_handle, state, fatal_queues, pad]
        ),
        layout!(
            "drm_panthor_tiler_heap_create",
            TilerHeapCreate,
            [
                vm_id,
                initial_chunk_count,
                chunk_size,
                max_chunks,
                target_in_flight,
                handle,
                tiler_heap_ctx_gpu_va,
                first_heap_chunk_gpu_va,
            ]
        ),
        layout!(
            "drm_panthor_tiler_heap_destroy",
            TilerHeapDestroy,
            [handle, pad]
        ),
        layout!("drm_panthor_bo_set_label", BoSetLabel, [handle, pad, label]),
        layout!(
            "drm_panthor_set_user_mmio_offset",
            SetUserMmioOffset,
            [offset]
        ),
        layout!(
            "drm_panthor_bo_sync_op",
            BoSyncOp,
            [handle, type_ => "type", offset, size]
        ),
        layout!("drm_panthor_bo_sync", BoSync, [ops]),
        layout!(
            "drm_panthor_bo_query_info",
            BoQueryInfo,
            [handle, extra_flags, create_flags, pad]
        ),
    ]
}

/// `consts![NAME, ...]`: each constant's name, value and size in bytes.
macro_rules! consts {
    ($($n:ident),* $(,)?) => {
        vec![$((stringify!($n), u64::from($n), core::mem::size_of_val(&$n))),*]
    };
}

fn constants() -> Vec<(&'static str, u64, usize)> {
    consts![
        DRM_PANTHOR_DEV_QUERY_GPU_INFO,
        DRM_PANTHOR_DEV_QUERY_CSIF_INFO,
        DRM_PANTHOR_DEV_QUERY_TIMESTAMP_INFO,
        DRM_PANTHOR_DEV_QUERY_GROUP_PRIORITIES_INFO,
        DRM_PANTHOR_GPU_COHERENCY_NONE,
        DRM_PANTHOR_TIMESTAMP_GPU,
        DRM_PANTHOR_TIMESTAMP_CPU_TYPE_MASK,
        DRM_PANTHOR_TIMESTAMP_GPU_OFFSET,
        DRM_PANTHOR_TIMESTAMP_GPU_CYCLE_COUNT,
        DRM_PANTHOR_TIMESTAMP_FREQ,
        DRM_PANTHOR_TIMESTAMP_DURATION,
        DRM_PANTHOR_VM_BIND_OP_MAP_READONLY,
        DRM_PANTHOR_VM_BIND_OP_MAP_NOEXEC,
        DRM_PANTHOR_VM_BIND_OP_MAP_UNCACHED,
        DRM_PANTHOR_VM_BIND_OP_MAP_SPARSE,
        DRM_PANTHOR_VM_BIND_OP_TYPE_MASK,
        DRM_PANTHOR_VM_BIND_OP_TYPE_MAP,
        DRM_PANTHOR_VM_BIND_OP_TYPE_UNMAP,
        DRM_PANTHOR_VM_BIND_OP_TYPE_SYNC_ONLY,
        DRM_PANTHOR_VM_BIND_ASYNC,
        DRM_PANTHOR_VM_STATE_USABLE,
        DRM_PANTHOR_VM_STATE_UNUSABLE,
        DRM_PANTHOR_BO_NO_MMAP,
        DRM_PANTHOR_BO_WB_MMAP,
        DRM_PANTHOR_USER_MMIO_OFFSET_32BIT,
        DRM_PANTHOR_USER_MMIO_OFFSET_64BIT,
        DRM_PANTHOR_USER_MMIO_OFFSET,
        DRM_PANTHOR_USER_FLUSH_ID_MMIO_OFFSET,
        DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH,
        DRM_PANTHOR_BO_SYNC_CPU_CACHE_FLUSH_AND_INVALIDATE,
        DRM_PANTHOR_BO_IS_IMPORTED,
        DRM_PANTHOR_GROUP_STATE_TIMEDOUT,
        DRM_PANTHOR_GROUP_STATE_FATAL_FAULT,
        DRM_PANTHOR_GROUP_STATE_INNOCENT,
        DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_MASK,
        DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_SYNCOBJ,
        DRM_PANTHOR_SYNC_OP_HANDLE_TYPE_TIMELINE_SYNCOBJ,
        DRM_PANTHOR_SYNC_OP_WAIT,
        DRM_PANTHOR_SYNC_OP_SIGNAL,
        DRM_IOCTL_PANTHOR_DEV_QUERY,
        DRM_IOCTL_PANTHOR_VM_CREATE,
        DRM_IOCTL_PANTHOR_VM_DESTROY,
        DRM_IOCTL_PANTHOR_VM_BIND,
        DRM_IOCTL_PANTHOR_VM_GET_STATE,
        DRM_IOCTL_PANTHOR_BO_CREATE,
        DRM_IOCTL_PANTHOR_BO_MMAP_OFFSET,
        DRM_IOCTL_PANTHOR_GROUP_CREATE,
        DRM_IOCTL_PANTHOR_GROUP_DESTROY,
        DRM_IOCTL_PANTHOR_GROUP_SUBMIT,
        DRM_IOCTL_PANTHOR_GROUP_GET_STATE,
        DRM_IOCTL_PANTHOR_TILER_HEAP_CREATE,
        DRM_IOCTL_PANTHOR_TILER_HEAP_DESTROY,
        DRM_IOCTL_PANTHOR_BO_SET_LABEL,
        DRM_IOCTL_PANTHOR_SET_USER_MMIO_OFFSET,
        DRM_IOCTL_PANTHOR_BO_SYNC,
        DRM_IOCTL_PANTHOR_BO_QUERY_INFO,
    ]
}

/// The facts, one per line, as the Rust side states them.
fn rust_facts() -> String {
    let mut out = String::new();
    for l in layouts() {
        writeln!(out, "size {} {}", l.c_name, l.size).unwrap();
        for (f, off) in &l.fields {
            writeln!(out, "offset {}.{} {}", l.c_name, f, off).unwrap();
        }
    }
    for (n, v, _) in constants() {
        writeln!(out, "const {n} {v}").unwrap();
    }
    out
}

/// A C program that prints the same facts from the header.
fn c_program() -> String {
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdio.h>\n#include <drm/panthor_drm.h>\n\nint main(void)\n{\n",
    );
    for l in layouts() {
        writeln!(
            c,
            "\tprintf(\"size {0} %zu\\n\", sizeof(struct {0}));",
            l.c_name
        )
        .unwrap();
        for (f, _) in &l.fields {
            writeln!(
                c,
                "\tprintf(\"offset {0}.{1} %zu\\n\", offsetof(struct {0}, {1}));",
                l.c_name, f
            )
            .unwrap();
        }
    }
    // A C enumerator is an `int`: `1u << 31` reads back negative. The driver uses the bit
    // pattern in a field of the Rust constant's width, so the C value is compared at that
    // width.
    for (n, _, width) in constants() {
        let cast = if width == 8 {
            "unsigned long long"
        } else {
            "unsigned int"
        };
        writeln!(
            c,
            "\tprintf(\"const {n} %llu\\n\", (unsigned long long)({cast})({n}));"
        )
        .unwrap();
    }
    c.push_str("\treturn 0;\n}\n");
    c
}

/// The structs the header defines (`struct drm_panthor_... {` at the start of a line).
fn header_structs(header: &str) -> BTreeSet<String> {
    header
        .lines()
        .filter_map(|l| l.strip_prefix("struct "))
        .filter_map(|l| l.strip_suffix(" {"))
        .filter(|n| n.starts_with("drm_panthor_"))
        .map(String::from)
        .collect()
}

/// The uAPI include directory of the host's architecture in a Linux tree.
fn arch_uapi(linux: &Path) -> PathBuf {
    let arch = match std::env::consts::ARCH {
        "x86_64" | "x86" => "x86",
        "aarch64" => "arm64",
        "arm" => "arm",
        "riscv64" => "riscv",
        other => other,
    };
    linux.join("arch").join(arch).join("include").join("uapi")
}

#[test]
#[ignore = "needs a Linux 7.2 tree (LINUX_SRC) and a C compiler; cargo xtask kernel-test runs it"]
fn every_struct_and_constant_matches_the_c_header() {
    let linux = PathBuf::from(
        std::env::var_os("LINUX_SRC").expect("LINUX_SRC: the Linux tree whose header to check"),
    );
    let header_path = linux.join("include/uapi/drm/panthor_drm.h");
    let header = std::fs::read_to_string(&header_path)
        .unwrap_or_else(|e| panic!("{}: {e}", header_path.display()));

    // Every struct of the header is stated here, and nothing else.
    let ours: BTreeSet<String> = layouts().iter().map(|l| l.c_name.to_string()).collect();
    assert_eq!(
        header_structs(&header),
        ours,
        "the header's structs and the checked ones differ"
    );

    let dir = std::env::temp_dir().join(format!("gpukit-uapi-abi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("abi.c");
    let exe = dir.join("abi");
    std::fs::write(&src, c_program()).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    // The raw uAPI headers, as `make headers_install` would export them: no `__user`
    // annotation, and no warning about using unexported headers.
    let status = Command::new(&cc)
        .args([
            "-std=gnu11",
            "-Wall",
            "-Werror",
            "-D__EXPORTED_HEADERS__",
            "-D__user=",
        ])
        .arg("-I")
        .arg(linux.join("include/uapi"))
        .arg("-I")
        .arg(arch_uapi(&linux))
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(status.success(), "{cc} failed on {}", src.display());
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let c_facts = String::from_utf8(out.stdout).unwrap();
    let rust = rust_facts();
    let differ: Vec<String> = rust
        .lines()
        .zip(c_facts.lines())
        .filter(|(r, c)| r != c)
        .map(|(r, c)| format!("rust: {r}\n   C: {c}"))
        .collect();
    assert!(
        differ.is_empty() && rust.lines().count() == c_facts.lines().count(),
        "the Rust uAPI differs from panthor_drm.h:\n{}",
        differ.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "uapi-abi: {} structs, {} fields and {} constants identical to {}",
        layouts().len(),
        layouts().iter().map(|l| l.fields.len()).sum::<usize>(),
        constants().len(),
        header_path.display()
    );
}
