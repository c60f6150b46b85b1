// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The Tyr probe flow: GEM objects before registration, ioctls after, `ENODEV` after unplug.
//!
//! A Mali driver such as Tyr must load the GPU firmware into GEM objects while it is still
//! building its driver data, that is before the DRM device is registered with userspace. The
//! device-context typestate makes that explicit: probe allocates an `UnregisteredDevice`, whose
//! objects live in the `AnyCtx` context (they cannot get handles or mmap offsets, which only
//! exist once userspace can see the device), then `Registration::new_foreign_owned` registers it
//! for as long as the platform device stays bound. A Mesa-like `Client` then opens the render
//! node through the host DRM core and issues a driver ioctl by number. Unbinding the platform
//! device unplugs the DRM device: the same ioctl now fails with `ENODEV`.

use drm_ctx::drm::{self, gem, ioctl, AnyCtx, OpenOptions};
use drm_ctx::{device, host::Client, types::ARef, Error, Result};

struct TyrDemo;
struct Bo;
struct TyrFile;

/// Driver data, built before registration: the GPU ID and the firmware sections.
struct Data {
    gpu_id: u32,
    firmware: Vec<ARef<gem::Object<Bo, AnyCtx>>>,
}

/// The `DEV_QUERY` ioctl argument (written by the driver).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct DevQuery {
    gpu_id: u32,
    fw_sections: u32,
    fw_bytes: u64,
}
// SAFETY: `repr(C)`, only integers, no padding (4 + 4 + 8 bytes).
unsafe impl ioctl::IoctlArg for DevQuery {}

/// `DRM_IOCTL_TYR_DEV_QUERY`: the first driver command (`DRM_COMMAND_BASE` is 0x40).
const DEV_QUERY: u32 = ioctl::IOWR::<DevQuery>(0x40);

fn dev_query(
    dev: &drm::Device<TyrDemo>,
    arg: &mut DevQuery,
    _: &drm::File<TyrFile>,
) -> Result<u32> {
    arg.gpu_id = dev.gpu_id;
    arg.fw_sections = dev.firmware.len() as u32;
    arg.fw_bytes = dev.firmware.iter().map(|o| o.size() as u64).sum();
    Ok(0)
}

impl drm::Driver for TyrDemo {
    type Data = Data;
    type Object = Bo;
    type File = TyrFile;
    const INFO: drm::DriverInfo = drm::DriverInfo {
        major: 1,
        minor: 0,
        patchlevel: 0,
        name: c"tyr",
        desc: c"Arm Mali (demo)",
    };
    const FEAT_RENDER: bool = true;
    drm_ctx::declare_drm_ioctls! {
        (DEV_QUERY, DevQuery, ioctl::RENDER_ALLOW, dev_query),
    }
}

impl gem::DriverObject for Bo {
    type Driver = TyrDemo;
    type Args = ();
    fn new(_size: usize, _args: ()) -> Result<Self> {
        Ok(Bo)
    }
}

impl drm::DriverFile for TyrFile {
    type Driver = TyrDemo;
    fn open(_device: &drm::Device<TyrDemo>) -> Result<Self> {
        Ok(TyrFile)
    }
}

fn main() -> std::result::Result<(), String> {
    let pdev = device::Device::new("fb000000.gpu").map_err(|e| e.to_string())?;
    let fw_sizes = [0x1_0000usize, 0x4000, 0x2000];
    pdev.probe(|dev: &device::Device<device::Core>| {
        let unreg = drm::UnregisteredDevice::<TyrDemo>::new_with(dev, |init| {
            let mut firmware = Vec::new();
            for size in fw_sizes {
                firmware.push(gem::Object::<Bo, AnyCtx>::new_for_init(init, size, ())?);
            }
            Ok(Data {
                gpu_id: 0xa867_0005,
                firmware,
            })
        })?;
        println!(
            "probe: {} firmware objects allocated, device registered: {}",
            unreg.firmware.len(),
            unreg.is_registered()
        );
        let drm = drm::Registration::new_foreign_owned(unreg, dev, 0)?;
        println!(
            "probe: registered, device registered: {}",
            drm.is_registered()
        );
        Ok(ARef::<drm::Device<TyrDemo>>::from(drm))
    })
    .map_err(|e| format!("probe: {e}"))?;
    let drm = pdev
        .driver_data::<ARef<drm::Device<TyrDemo>>>()
        .ok_or("no driver data")?;

    let client = Client::open(&drm, OpenOptions::render()).map_err(|e| e.to_string())?;
    let mut q = DevQuery::default();
    let ret = client
        .ioctl_arg(DEV_QUERY, &mut q)
        .map_err(|e| format!("DEV_QUERY: {e}"))?;
    println!(
        "ioctl {DEV_QUERY:#010x} (DEV_QUERY) -> {ret}: GPU_ID {:#010x}, {} firmware sections, \
         {} bytes",
        q.gpu_id, q.fw_sections, q.fw_bytes
    );
    let fw_bytes: usize = fw_sizes.iter().sum();
    if (q.gpu_id, q.fw_sections as usize, q.fw_bytes)
        != (0xa867_0005, fw_sizes.len(), fw_bytes as u64)
    {
        return Err("DEV_QUERY returned data that does not match the probe".into());
    }

    pdev.unbind().map_err(|e| e.to_string())?; // the platform driver goes away: hot unplug
    println!("unbound: device unplugged: {}", drm.is_unplugged());
    match client.ioctl_arg(DEV_QUERY, &mut q) {
        Err(e @ Error::NoDevice) => println!("ioctl after unplug -> {e} ({})", e.to_errno()),
        other => {
            return Err(format!(
                "ioctl after unplug gave {other:?}, expected ENODEV"
            ))
        }
    }
    match Client::open(&drm, OpenOptions::render()) {
        Err(e @ Error::NoDevice) => println!("open after unplug -> {e} ({})", e.to_errno()),
        Err(e) => return Err(format!("open after unplug: {e}, expected ENODEV")),
        Ok(_) => return Err("open after unplug succeeded".into()),
    }
    // Userspace's file and the firmware objects stay valid until their last reference goes.
    let fw_total: usize = drm.firmware.iter().map(|o| o.size()).sum();
    println!("after unplug the firmware objects ({fw_total} bytes) are still there");
    if fw_total != fw_bytes {
        return Err("firmware objects changed".into());
    }
    println!("all checks passed");
    Ok(())
}
