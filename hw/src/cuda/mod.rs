//! The one place vramlab touches the CUDA driver's raw API (through cudarc's `result`/`sys`
//! layers), and the only module of the workspace with `unsafe` code. Everything outside it is
//! safe code over these types:
//!
//! - [`context`]: an opened GPU, its streams and events; every call binds the GPU's own context
//!   first, so two GPUs in one thread never act on each other's memory.
//! - [`memory`]: every allocation (device, pinned, managed, VMM reservations and mappings) is
//!   a value that frees itself on drop, in its own context, so no error path leaks.
//! - [`launch`] and [`kernels`]: kernels run only through [`Queue::launch`], which checks the
//!   arguments against the kernel's declared parameter list and its bounds before the driver
//!   sees them; device memory is passed as borrowed buffers, never as bare addresses.
//! - [`policy_memory`], [`growing`], [`cross_device`]: device memory as the allocator replay, the
//!   growth family and the peer family use it.
//!
//! Allocation goes straight to cuMemAlloc / cuMemAllocHost (flags 0, plain pinned memory),
//! never through cudarc's stream-ordered pool, so what is timed is the plain driver path.
//! Asynchronous work is only issued inside [`Gpu::enqueue`], which synchronizes the context
//! before it returns: no copy or kernel can outlive the buffers it borrowed.

mod context;
mod cross_device;
mod driver;
mod growing;
mod kernels;
mod launch;
mod memory;
mod policy_memory;
mod vmm;

pub use context::driver_present;
pub(crate) use context::{Event, Gpu, Stream};
pub(crate) use cross_device::PeerBuffer;
pub(crate) use growing::{BackedBy, GrowingBuffer};
pub(crate) use launch::{kernel_for_width, Arg, Kernel, LaunchConfig, Queue};
pub(crate) use memory::{DeviceBuffer, HostBuffer, ManagedBuffer};
pub(crate) use policy_memory::PolicyMemory;
