// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The MCU's check of its image at a cold boot (see [`crate::firmware`]).

use super::Gpu;
use crate::csf;
use crate::firmware::{
    digest, CheckError, FlashedSection, DIGEST_START, SECTION_EX, SECTION_SHARED, SECTION_WR,
    SECTION_ZERO,
};
use crate::mem::{PhysAddr, PhysMemory};
use crate::walk::AccessType;

/// What the MCU remembers of its image between boots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct McuImage {
    /// Why the last cold boot failed its check, if it did.
    pub(super) failed: Option<CheckError>,
    /// Cold boots that passed the check.
    pub(super) boots: u64,
}

/// Bytes read from memory at a time.
const CHUNK: usize = 256;

impl<M: PhysMemory> Gpu<M> {
    /// Why the MCU refused to boot at its last cold boot (`None` if it booted, or has not
    /// tried): a section of its image ([`Config::firmware`](crate::Config::firmware)) not
    /// mapped in address space 0 as the image says, or not holding the image's bytes.
    pub fn firmware_check(&self) -> Option<CheckError> {
        self.mcu_image.failed
    }

    /// The check of a cold boot: `Ok` if the MCU may start. Records the failure; on success
    /// the firmware, now running, writes its boot count into its writable sections.
    pub(super) fn check_firmware(&mut self) -> Result<(), CheckError> {
        let r = self.check_sections();
        self.mcu_image.failed = r.err();
        if r.is_ok() {
            self.mcu_image.boots = self.mcu_image.boots.wrapping_add(1);
            self.dirty_sections();
        }
        r
    }

    fn check_sections(&mut self) -> Result<(), CheckError> {
        let Some(image) = self.cfg.firmware else {
            // No image: only the shared region must be there (writing the interface checks
            // the rest).
            return self
                .page(csf::SHARED_REGION_VA, true, None)
                .map(|_| ())
                .map_err(|_| CheckError::NoSharedRegion);
        };
        for s in image.sections() {
            self.check_section(s)?;
        }
        Ok(())
    }

    /// Translates page `va` of address space 0 for reading, recording the MMU fault the
    /// MCU's access would, and checks its permissions against `want_write` (and `want_exec`
    /// if given).
    fn page(
        &mut self,
        va: u64,
        want_write: bool,
        want_exec: Option<bool>,
    ) -> Result<PhysAddr, CheckError> {
        let t = self
            .translate_from(0, va, AccessType::Read, 0)
            .map_err(|_| CheckError::NotMapped { va })?;
        if t.perms.write != want_write || want_exec.is_some_and(|x| x != t.perms.exec) {
            return Err(CheckError::WrongPermissions { va });
        }
        Ok(t.pa)
    }

    fn check_section(&mut self, s: &FlashedSection) -> Result<(), CheckError> {
        let (start, end) = (u64::from(s.va_start), u64::from(s.va_end));
        let wr = s.flags & SECTION_WR != 0;
        let ex = s.flags & SECTION_EX != 0;
        let contents = s.flags & SECTION_SHARED == 0;
        let zero = s.flags & SECTION_ZERO != 0;
        let data_end = start + u64::from(s.data_len);
        let mut h = DIGEST_START;
        let mut buf = [0u8; CHUNK];
        let mut va = start;
        while va < end {
            let pa = self.page(va, wr, Some(ex))?;
            if contents {
                for off in (0..0x1000u64).step_by(CHUNK) {
                    let at = va + off;
                    let want_data = at < data_end;
                    if !want_data && !zero {
                        break;
                    }
                    let p = PhysAddr(pa.0 + off);
                    if self.mem.read_bytes(p, &mut buf).is_err() {
                        return Err(CheckError::NotMapped { va });
                    }
                    // The data part of this chunk, then the rest.
                    let n = (data_end.saturating_sub(at)).min(CHUNK as u64) as usize;
                    h = digest(h, &buf[..n]);
                    if zero && buf[n..].iter().any(|&b| b != 0) {
                        return Err(CheckError::NotZeroed { va });
                    }
                }
            }
            va += 0x1000;
        }
        if contents && h != s.digest {
            return Err(CheckError::WrongData { va: start });
        }
        Ok(())
    }

    /// The running firmware changes its data: the boot count goes into the last eight bytes
    /// of every writable, non-shared section.
    fn dirty_sections(&mut self) {
        let Some(image) = self.cfg.firmware else {
            return;
        };
        let boots = self.mcu_image.boots;
        for s in image.sections() {
            if s.flags & SECTION_WR != 0 && s.flags & SECTION_SHARED == 0 && s.va_end >= 8 {
                let _ = self.gpu_write(0, u64::from(s.va_end) - 8, &boots.to_le_bytes());
            }
        }
    }
}
