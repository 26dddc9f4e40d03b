//! Device memory of one GPU that another reads.

use std::sync::Arc;

use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;
use cudarc::driver::CudaContext;

use super::context::{bind, Gpu};
use super::memory::{DeviceBuffer, DeviceSpan};
use super::vmm::{granularity, Mapping, Reservation};
use crate::error::{HwError, Result};

/// Device memory of one GPU made readable by another: one physical allocation mapped with
/// access for both devices (VMM), or a cuMemAlloc buffer with peer access enabled from the
/// reader's context. Every part frees itself in its owner's context on drop.
pub(crate) struct PeerBuffer {
    /// The mapping goes before the reservation it lies in (fields drop in order).
    _mapping: Option<Mapping>,
    _reservation: Option<Reservation>,
    _plain: Option<DeviceBuffer>,
    owner: Arc<CudaContext>,
    ptr: u64,
    bytes: usize,
}

impl PeerBuffer {
    /// `bytes` on `owner`'s device, readable from `reader`'s.
    pub(crate) fn new(owner: &Gpu, reader: &Gpu, bytes: usize, vmm: bool) -> Result<PeerBuffer> {
        let (own, read) = (owner.ctx.cu_device(), reader.ctx.cu_device());
        let mut can = 0;
        // SAFETY: writes one int through a valid pointer; both are valid device handles.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, read, own) }
            .result()
            .map_err(HwError::cuda("cuDeviceCanAccessPeer"))?;
        if can == 0 {
            return Err(HwError::Unsupported(
                "the second GPU cannot access the first's memory (no peer path)".into(),
            ));
        }
        if !vmm {
            let plain = DeviceBuffer::new(&owner.ctx, bytes).map_err(HwError::cuda("cuMemAlloc"))?;
            bind(&reader.ctx)?;
            // SAFETY: both contexts are alive; enabling an already enabled peer is reported and ignored.
            let enabled = unsafe { sys::cuCtxEnablePeerAccess(owner.ctx.cu_ctx(), 0) };
            if enabled != sys::CUresult::CUDA_SUCCESS
                && enabled != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
            {
                return Err(HwError::Cuda {
                    call: "cuCtxEnablePeerAccess",
                    reason: DriverError(enabled),
                });
            }
            return Ok(PeerBuffer {
                ptr: plain.ptr,
                _mapping: None,
                _reservation: None,
                _plain: Some(plain),
                owner: owner.ctx.clone(),
                bytes,
            });
        }
        bind(&owner.ctx)?;
        let g = granularity(own)? as usize;
        let size = bytes.div_ceil(g) * g;
        let reservation = Reservation::new(&owner.ctx, size as u64).map_err(HwError::cuda("cuMemAddressReserve"))?;
        let mapping = Mapping::new(
            &owner.ctx,
            &reservation,
            reservation.base,
            size as u64,
            own,
            &[own, read],
        )
        .map_err(|(call, reason)| HwError::Cuda { call, reason })?;
        Ok(PeerBuffer {
            ptr: reservation.base,
            _mapping: Some(mapping),
            _reservation: Some(reservation),
            _plain: None,
            owner: owner.ctx.clone(),
            bytes: size,
        })
    }

    /// Sets every byte (in the owner's context, synchronously).
    pub(crate) fn fill(&self, byte: u8) -> Result<()> {
        bind(&self.owner)?;
        // SAFETY: the range is a live allocation (or mapping) of `bytes` bytes owned by self.
        unsafe { sys::cuMemsetD8_v2(self.ptr, byte, self.bytes) }
            .result()
            .map_err(HwError::cuda("cuMemsetD8"))?;
        result::ctx::synchronize().map_err(HwError::cuda("cuCtxSynchronize"))
    }

    /// The whole buffer, for a kernel argument on the reader.
    pub(crate) fn span(&self) -> DeviceSpan<'_> {
        DeviceSpan::held(self.ptr, self.bytes as u64)
    }
}

impl Drop for PeerBuffer {
    fn drop(&mut self) {
        // Every kernel that read it finished (enqueue synchronizes); the parts free themselves.
        let _ = bind(&self.owner);
        let _ = result::ctx::synchronize();
    }
}
