// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The arm64 test board's device tree: QEMU's `virt` machine with a Mali-G610 node shaped like
//! RK3588's.
//!
//! On an Arm board the kernel learns what hardware there is from a device tree the boot
//! firmware hands it: one node per device, with its `compatible` strings (which driver binds),
//! its register window (`reg`), its interrupt lines on the interrupt controller
//! (`interrupts`, `interrupt-names`), its clocks and power supplies (phandles to their
//! providers' nodes) and its operating points. The platform bus makes a platform device of the
//! GPU's node, and a driver whose OF match table names one of its `compatible` strings probes
//! it, taking each resource through the kernel's APIs.
//!
//! QEMU's `virt` machine writes its own tree (CPUs, memory, the GICv3, the PL011 UART, ...),
//! which `-machine dumpdtb=FILE` saves. [`board_dtb`] dumps it with the same machine options
//! as the boots, decompiles it with `dtc`, adds [`GPU_NODES`] (dtc merges a second root block
//! into the first), compiles it again and leaves the result in the cache for `-dtb`. Nothing
//! behind the GPU's `reg` window is emulated: the register accesses of Tyr's kernel backend go
//! to the simulated GPU (the one seam, see `tyr/src/kernel.rs`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::kernel::Arch;

/// The GPU's node as the kernel names it.
pub(crate) const GPU_NODE_PATH: &str = "/gpu@c000000";

/// What the board adds to `virt`'s tree: the GPU, its three clocks, its supply and its
/// operating points.
///
/// - `reg`: 2 MiB at `0x0c000000`, in the window `virt` keeps for devices added at run time
///   (none are), as RK3588's GPU has 2 MiB at `0xfb000000`.
/// - `interrupts`: GIC SPIs 92, 93 and 94, level-high, named `job`, `mmu` and `gpu`: RK3588's
///   numbers, unused on `virt` (its UART, RTC, PCIe, GPIO and virtio-mmio lines are SPIs 1 to
///   47; its dynamic devices' lines start at 112). `virt`'s GICv3 takes three cells and is the
///   root's `interrupt-parent`.
/// - `clocks`: fixed clocks `core`, `coregroup` and `stacks` at 1 GHz, the simulated GPU's
///   clock at reset (RK3588 takes them from its clock unit).
/// - `mali-supply`: a fixed 850 mV regulator, the top of every operating point's range.
/// - `operating-points-v2`: RK3588's GPU table, 300 MHz to 1 GHz (`rk3588-opp.dtsi`).
pub(crate) const GPU_NODES: &str = r#"
/ {
	gpu_core_clk: clock-gpu-core {
		compatible = "fixed-clock";
		#clock-cells = <0>;
		clock-frequency = <1000000000>;
		clock-output-names = "gpu_core";
	};

	gpu_coregroup_clk: clock-gpu-coregroup {
		compatible = "fixed-clock";
		#clock-cells = <0>;
		clock-frequency = <1000000000>;
		clock-output-names = "gpu_coregroup";
	};

	gpu_stacks_clk: clock-gpu-stacks {
		compatible = "fixed-clock";
		#clock-cells = <0>;
		clock-frequency = <1000000000>;
		clock-output-names = "gpu_stacks";
	};

	vdd_gpu: regulator-vdd-gpu {
		compatible = "regulator-fixed";
		regulator-name = "vdd_gpu";
		regulator-min-microvolt = <850000>;
		regulator-max-microvolt = <850000>;
	};

	gpu_opp_table: opp-table-gpu {
		compatible = "operating-points-v2";

		opp-300000000 {
			opp-hz = /bits/ 64 <300000000>;
			opp-microvolt = <675000 675000 850000>;
		};
		opp-400000000 {
			opp-hz = /bits/ 64 <400000000>;
			opp-microvolt = <675000 675000 850000>;
		};
		opp-500000000 {
			opp-hz = /bits/ 64 <500000000>;
			opp-microvolt = <675000 675000 850000>;
		};
		opp-600000000 {
			opp-hz = /bits/ 64 <600000000>;
			opp-microvolt = <675000 675000 850000>;
		};
		opp-700000000 {
			opp-hz = /bits/ 64 <700000000>;
			opp-microvolt = <700000 700000 850000>;
		};
		opp-800000000 {
			opp-hz = /bits/ 64 <800000000>;
			opp-microvolt = <750000 750000 850000>;
		};
		opp-900000000 {
			opp-hz = /bits/ 64 <900000000>;
			opp-microvolt = <800000 800000 850000>;
		};
		opp-1000000000 {
			opp-hz = /bits/ 64 <1000000000>;
			opp-microvolt = <850000 850000 850000>;
		};
	};

	gpu@c000000 {
		compatible = "rockchip,rk3588-mali", "arm,mali-valhall-csf";
		reg = <0x0 0x0c000000 0x0 0x200000>;
		interrupts = <0 92 4>, <0 93 4>, <0 94 4>;
		interrupt-names = "job", "mmu", "gpu";
		clocks = <&gpu_core_clk>, <&gpu_coregroup_clk>, <&gpu_stacks_clk>;
		clock-names = "core", "coregroup", "stacks";
		mali-supply = <&vdd_gpu>;
		operating-points-v2 = <&gpu_opp_table>;
	};
};
"#;

/// Runs `cmd`, failing with its stderr.
fn run(mut cmd: Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    eprintln!("$ {shown}");
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{shown} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The board's device tree blob in `cache` (`board.dtb`), made from `virt`'s own with the
/// options `machine` and `memory` (MiB) and `cpus` the boots use, plus [`GPU_NODES`]. Made on
/// every call: it takes well under a second, and a QEMU update may change `virt`'s tree.
pub(crate) fn board_dtb(cache: &Path, memory: &str, cpus: &str) -> Result<PathBuf, String> {
    let (qemu, package) = Arch::Arm64.qemu();
    let machine = Arch::Arm64.machine();
    let virt = cache.join("virt.dtb");
    // `-M virt,...,dumpdtb=FILE`: QEMU writes the tree it would give the kernel and exits.
    let mut dump = Command::new(qemu);
    let mut args: Vec<String> = machine.iter().map(|s| (*s).to_string()).collect();
    let m = args
        .iter()
        .position(|a| a == "-M")
        .ok_or("the arm64 machine options have no -M")?;
    args[m + 1] = format!("{},dumpdtb={}", args[m + 1], virt.display());
    dump.args(["-accel", "tcg"])
        .args(&args)
        .args(["-m", memory, "-smp", cpus, "-nographic"]);
    run(dump).map_err(|e| format!("{e} (Debian package {package})"))?;
    let dts = cache.join("board.dts");
    let mut decompile = Command::new("dtc");
    decompile
        .args(["-q", "-I", "dtb", "-O", "dts", "-o"])
        .arg(&dts)
        .arg(&virt);
    run(decompile).map_err(|e| format!("{e} (Debian package device-tree-compiler)"))?;
    let mut text = fs::read_to_string(&dts).map_err(|e| format!("{}: {e}", dts.display()))?;
    text.push_str(GPU_NODES);
    fs::write(&dts, text).map_err(|e| format!("{}: {e}", dts.display()))?;
    let dtb = cache.join("board.dtb");
    let mut compile = Command::new("dtc");
    compile
        .args(["-q", "-I", "dts", "-O", "dtb", "-o"])
        .arg(&dtb)
        .arg(&dts);
    run(compile)?;
    Ok(dtb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gpu_node_is_shaped_like_rk3588s() {
        let node = GPU_NODES
            .split("gpu@c000000 {")
            .nth(1)
            .expect("the GPU's node");
        for want in [
            r#"compatible = "rockchip,rk3588-mali", "arm,mali-valhall-csf";"#,
            r#"interrupt-names = "job", "mmu", "gpu";"#,
            r#"clock-names = "core", "coregroup", "stacks";"#,
            "mali-supply = <&vdd_gpu>;",
            "operating-points-v2 = <&gpu_opp_table>;",
            "reg = <0x0 0x0c000000 0x0 0x200000>;",
        ] {
            assert!(node.contains(want), "{want}");
        }
        assert_eq!(GPU_NODE_PATH, "/gpu@c000000");
        // Eight operating points, each with a voltage range the 850 mV supply is in.
        assert_eq!(GPU_NODES.matches("opp-hz = /bits/ 64").count(), 8);
        assert_eq!(GPU_NODES.matches(" 850000>;").count(), 8);
        assert!(GPU_NODES.contains("regulator-min-microvolt = <850000>;"));
        assert!(GPU_NODES.contains("regulator-max-microvolt = <850000>;"));
    }
}
