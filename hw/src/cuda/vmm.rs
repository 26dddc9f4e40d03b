//! CUDA virtual memory: address reservations and physical mappings as owned values, the
//! create / map / set-access sequence written once ([`Mapping::new`]), the granularity asked
//! once ([`granularity`]), and the driver calls that `allocators::GrowableLayout` composes.

use std::sync::Arc;

use cudarc::driver::result::DriverError;
use cudarc::driver::sys;
use cudarc::driver::CudaContext;

use super::context::bind;
use super::driver::{self, is_out_of_memory};
use crate::error::{HwError, Result};

/// Device `device`'s memory, as the VMM calls name a place.
pub(super) fn device_location(device: i32) -> sys::CUmemLocation {
    // SAFETY: CUmemLocation is plain data; all-zero is a valid value, then set to the device.
    let mut location: sys::CUmemLocation = unsafe { std::mem::zeroed() };
    location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = device;
    location
}

/// Plain device memory on `device`, as cuMemCreate takes it.
fn pinned_device_prop(device: i32) -> sys::CUmemAllocationProp {
    // SAFETY: CUmemAllocationProp is plain data; all-zero is valid (no handle types, no flags).
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = device_location(device);
    prop
}

/// The smallest physical allocation the driver maps on `device`.
pub(super) fn granularity(device: i32) -> Result<u64> {
    let prop = pinned_device_prop(device);
    let mut granularity = 0usize;
    // SAFETY: writes one usize through a valid pointer; prop is initialised.
    unsafe {
        sys::cuMemGetAllocationGranularity(
            &mut granularity,
            &prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
        )
    }
    .result()
    .map_err(HwError::cuda("cuMemGetAllocationGranularity"))?;
    Ok(granularity as u64)
}

/// Reserved device addresses (cuMemAddressReserve), freed on drop.
pub(crate) struct Reservation {
    pub(super) base: u64,
    pub(super) bytes: u64,
    ctx: Arc<CudaContext>,
}

impl Reservation {
    pub(super) fn new(ctx: &Arc<CudaContext>, bytes: u64) -> std::result::Result<Reservation, DriverError> {
        ctx.bind_to_thread()?;
        let mut base: sys::CUdeviceptr = 0;
        // SAFETY: writes one address through a valid pointer; reserves address space only.
        driver::call(|| unsafe { sys::cuMemAddressReserve(&mut base, bytes as usize, 0, 0, 0) }.result())?;
        driver::made();
        Ok(Reservation {
            base,
            bytes,
            ctx: ctx.clone(),
        })
    }

    /// Whether `[addr, addr + bytes)` lies inside.
    pub(super) fn covers(&self, addr: u64, bytes: u64) -> bool {
        addr >= self.base && addr.saturating_add(bytes) <= self.base + self.bytes
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let _ = bind(&self.ctx);
        // SAFETY: the range came from cuMemAddressReserve and is freed once; every mapping in
        // it is a `Mapping` that borrowed nothing and was dropped first by its owner.
        let _ = unsafe { sys::cuMemAddressFree(self.base, self.bytes as usize) };
        driver::freed();
    }
}

/// Physical memory on one device mapped at `[addr, addr + bytes)` of a reservation, readable
/// and writable by the listed devices; unmapped and released on drop.
pub(crate) struct Mapping {
    pub(super) addr: u64,
    bytes: u64,
    handle: sys::CUmemGenericAllocationHandle,
    ctx: Arc<CudaContext>,
}

impl Mapping {
    /// cuMemCreate on `owner`, cuMemMap at `addr`, cuMemSetAccess for `access`: on any failure,
    /// what was done is undone and the driver's error returned. `addr` must lie in a
    /// reservation the caller holds, not mapped yet, in whole granules.
    pub(super) fn new(
        ctx: &Arc<CudaContext>,
        reservation: &Reservation,
        addr: u64,
        bytes: u64,
        owner: i32,
        access: &[i32],
    ) -> std::result::Result<Mapping, (&'static str, DriverError)> {
        if !reservation.covers(addr, bytes) {
            return Err(("cuMemMap", DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE)));
        }
        ctx.bind_to_thread().map_err(|e| ("cuCtxSetCurrent", e))?;
        let prop = pinned_device_prop(owner);
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: writes one handle through a valid pointer; prop is initialised.
        driver::call(|| unsafe { sys::cuMemCreate(&mut handle, bytes as usize, &prop, 0) }.result())
            .map_err(|e| ("cuMemCreate", e))?;
        // SAFETY: the range lies in the caller's reservation (checked) and is not mapped yet.
        if let Err(e) = driver::call(|| unsafe { sys::cuMemMap(addr, bytes as usize, 0, handle, 0) }.result()) {
            // SAFETY: the handle was just created and never mapped.
            let _ = unsafe { sys::cuMemRelease(handle) };
            return Err(("cuMemMap", e));
        }
        driver::made();
        // From here on the value owns the mapping: an early return unmaps and releases it.
        let mapping = Mapping {
            addr,
            bytes,
            handle,
            ctx: ctx.clone(),
        };
        let descriptors: Vec<sys::CUmemAccessDesc> = access
            .iter()
            .map(|&device| sys::CUmemAccessDesc {
                location: device_location(device),
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            })
            .collect();
        driver::call(|| {
            // SAFETY: the range is mapped; `descriptors.len()` descriptors are passed.
            unsafe { sys::cuMemSetAccess(addr, bytes as usize, descriptors.as_ptr(), descriptors.len()) }.result()
        })
        .map_err(|e| ("cuMemSetAccess", e))?;
        Ok(mapping)
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let _ = bind(&self.ctx);
        // SAFETY: mapped by Mapping::new with this handle, unmapped and released once; every
        // kernel that used it was synchronized (launches happen only inside Gpu::enqueue).
        unsafe {
            let _ = sys::cuMemUnmap(self.addr, self.bytes as usize);
            let _ = sys::cuMemRelease(self.handle);
        }
        driver::freed();
    }
}

/// The CUDA virtual memory calls on one device, for `allocators::GrowableLayout`, which owns
/// the sequence and its undo. Out of memory is an error like any other here: the layout undoes
/// the grow and the caller decides.
pub(crate) struct CudaVmm {
    granularity: u64,
    device: i32,
    ctx: Arc<CudaContext>,
}

impl CudaVmm {
    pub(crate) fn new(ctx: &Arc<CudaContext>) -> Result<CudaVmm> {
        bind(ctx)?;
        let device = ctx.cu_device();
        Ok(CudaVmm {
            granularity: granularity(device)?,
            device,
            ctx: ctx.clone(),
        })
    }

    pub(crate) fn granularity(&self) -> u64 {
        self.granularity
    }

    fn bind(&self) {
        let _ = bind(&self.ctx);
    }
}

/// The driver's error code decides what a failure is: out of memory, or anything else.
fn vmm_error(call: &'static str) -> impl FnOnce(DriverError) -> allocators::VmmError {
    move |e| {
        if is_out_of_memory(&e) {
            allocators::VmmError::out_of_memory(call)
        } else {
            allocators::VmmError::failed(call, HwError::Cuda { call, reason: e }.to_string())
        }
    }
}

impl allocators::VmmDriver for CudaVmm {
    fn reserve(&mut self, size: u64, at: Option<u64>) -> std::result::Result<u64, allocators::VmmError> {
        self.bind();
        let mut base: sys::CUdeviceptr = 0;
        // SAFETY: writes one address through a valid pointer; reserves address space only.
        driver::call(|| unsafe { sys::cuMemAddressReserve(&mut base, size as usize, 0, at.unwrap_or(0), 0) }.result())
            .map_err(vmm_error("cuMemAddressReserve"))?;
        driver::made();
        Ok(base)
    }
    fn free_range(&mut self, base: u64, size: u64) {
        self.bind();
        // SAFETY: the layout frees each range it reserved once, after unmapping it.
        let _ = unsafe { sys::cuMemAddressFree(base, size as usize) };
        driver::freed();
    }
    fn create(&mut self, size: u64) -> std::result::Result<u64, allocators::VmmError> {
        self.bind();
        let prop = pinned_device_prop(self.device);
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: writes one handle through a valid pointer; prop is initialised.
        driver::call(|| unsafe { sys::cuMemCreate(&mut handle, size as usize, &prop, 0) }.result())
            .map_err(vmm_error("cuMemCreate"))?;
        driver::made();
        Ok(handle)
    }
    fn release(&mut self, handle: u64) {
        self.bind();
        // SAFETY: the layout releases each handle it created once, after unmapping it.
        let _ = unsafe { sys::cuMemRelease(handle) };
        driver::freed();
    }
    fn map(&mut self, addr: u64, size: u64, handle: u64) -> std::result::Result<(), allocators::VmmError> {
        self.bind();
        // SAFETY: the layout maps whole chunks inside its own reservations, never twice.
        driver::call(|| unsafe { sys::cuMemMap(addr, size as usize, 0, handle, 0) }.result())
            .map_err(vmm_error("cuMemMap"))
    }
    fn unmap(&mut self, addr: u64, size: u64) {
        self.bind();
        // SAFETY: the layout unmaps only what it mapped; kernels that used it were synchronized
        // (GrowingBuffer launches only through Gpu::enqueue).
        let _ = unsafe { sys::cuMemUnmap(addr, size as usize) };
    }
    fn set_access(&mut self, addr: u64, size: u64) -> std::result::Result<(), allocators::VmmError> {
        self.bind();
        let access = sys::CUmemAccessDesc {
            location: device_location(self.device),
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the range is mapped (the layout calls this right after map); one descriptor.
        driver::call(|| unsafe { sys::cuMemSetAccess(addr, size as usize, &access, 1) }.result())
            .map_err(vmm_error("cuMemSetAccess"))
    }
}
