// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The driver's GEM objects, as the VM sees them.
//!
//! A GEM object is a buffer the GPU can map. The VM needs three facts about it: who it is (to
//! keep one VM-BO per object), how big it is (to refuse mappings past its end), and which
//! reservation object (`dma_resv`) protects it. Objects private to one VM share the VM's
//! reservation, so locking the VM locks them too; every other object is an *external object*,
//! which the VM keeps on a list so that a VM_BIND or a job submission can lock all of them.

/// A GEM object the VM can map.
///
/// Clones must denote the same object (a clone is a new reference, as `ARef` is in the kernel).
///
/// # Examples
///
/// ```
/// use gpuvm::GemObject;
///
/// #[derive(Clone)]
/// struct Bo {
///     handle: u64,
///     size: u64,
///     resv: u64,
/// }
///
/// impl GemObject for Bo {
///     fn id(&self) -> u64 {
///         self.handle
///     }
///     fn size(&self) -> u64 {
///         self.size
///     }
///     fn resv_id(&self) -> u64 {
///         self.resv
///     }
/// }
/// ```
pub trait GemObject: Clone {
    /// An identity, distinct for distinct live objects.
    fn id(&self) -> u64;

    /// The object size in bytes.
    fn size(&self) -> u64;

    /// The identity of the object's reservation object. Equal to the VM's own reservation id
    /// for VM-private objects; anything else makes the object external to the VM.
    fn resv_id(&self) -> u64;
}
