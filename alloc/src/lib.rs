//! vramlab's allocators: policies (PyTorch's caching allocator under any `PYTORCH_ALLOC_CONF`,
//! and others) as pure bookkeeping over address ranges a [`DeviceMemory`] hands out, the replay
//! of a trace through them, and the VMM growable buffer's layout. Both backends use them: `sim`
//! over [`SimDevice`], `hw` over real device memory.
//!
//! The same policy code runs over simulated memory ([`SimDevice`]) and, in `hw`, over real
//! device memory; a policy never knows which. Every policy is picked by name from
//! [`experiments::POLICIES`], its parameters given as data.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod best_fit;
mod binning;
mod buddy;
mod caching;
mod capacity;
mod choice;
mod device;
mod error;
mod front;
mod ordered_set;
mod period;
mod placement;
mod replay;
mod replayer;
mod simple;
mod slots;
mod tune;
mod vmm;

use experiments::{AllocBackend, AllocConf, BlockState, PolicySpec, PytorchStats, SegmentView, StartBlock, StartState};

pub use capacity::{min_capacity, min_capacity_of};
use choice::replay_devices;
pub use choice::{choose_policies, replay_choices, PolicyChoice};
use device::Metered;
pub use device::SimDevice;
pub use error::{BackendError, Error, Result};
pub use front::Replay;
pub use replay::{replay, replay_policy, ReplayHooks, ReplayOptions};
pub use tune::{rank, tune, tune_grid, tune_record, DEFAULT_TUNE_GRID};
pub use vmm::{GrowPath, GrowableLayout, SimVmm, VmmDriver, VmmError};

/// Where a policy gets memory from: physical allocations (cuMemAlloc), and virtual ranges
/// backed on demand (cuMemAddressReserve + cuMemCreate/cuMemMap/cuMemSetAccess).
pub trait DeviceMemory {
    /// Allocates `bytes` of device memory; `None` when the device cannot.
    fn allocate(&mut self, bytes: u64) -> Option<u64>;
    /// Returns an allocation made by [`DeviceMemory::allocate`].
    fn free(&mut self, addr: u64, bytes: u64);
    /// Allocates through the stream-ordered pool (cuMemAllocAsync); plain allocate where there is none.
    fn allocate_stream_ordered(&mut self, bytes: u64) -> Option<u64> {
        self.allocate(bytes)
    }
    /// Returns an allocation made by [`DeviceMemory::allocate_stream_ordered`].
    fn free_stream_ordered(&mut self, addr: u64, bytes: u64) {
        self.free(addr, bytes)
    }
    /// Takes over `bytes` of memory a recording's allocator held at `addr` before the trace
    /// began; the address it has here (the same where the device can honour it).
    fn adopt(&mut self, addr: u64, bytes: u64) -> Option<u64> {
        let _ = addr;
        self.allocate(bytes)
    }
    /// As [`DeviceMemory::adopt`], for an address range of an expandable segment.
    fn adopt_reservation(&mut self, addr: u64, bytes: u64) -> Option<u64> {
        let _ = addr;
        self.reserve(bytes)
    }
    /// Reserves `bytes` of virtual address space with no memory behind it.
    fn reserve(&mut self, bytes: u64) -> Option<u64>;
    /// Releases a reservation (which must be fully unmapped).
    fn release(&mut self, addr: u64, bytes: u64);
    /// Backs `[addr, addr + bytes)` of a reservation with memory; false when the device cannot.
    fn map(&mut self, addr: u64, bytes: u64) -> bool;
    /// Unmaps and frees the memory behind `[addr, addr + bytes)`.
    fn unmap(&mut self, addr: u64, bytes: u64);
    /// The device's memory size, bytes (sizes virtual reservations).
    fn total_bytes(&self) -> u64;
    /// A copy to go on from, where the device is the simulated one: the capacity searches start
    /// their probes from copies of a whole replay (see `capacity.rs`).
    fn resumable_copy(&self) -> Option<SimDevice> {
        None
    }
}

/// A block a policy handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Its first byte.
    pub addr: u64,
    /// Its size, after the policy's rounding (at least the request).
    pub size: u64,
}

/// Free memory a policy holds from the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FreeSpace {
    /// Bytes held and not handed out, that the policy could hand out.
    pub total: u64,
    /// The largest request the policy could satisfy from them.
    pub largest: u64,
}

impl FreeSpace {
    /// 1 - largest / total: 0 when all free memory is one block (or none is free).
    pub fn fragmentation(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            1.0 - self.largest as f64 / self.total as f64
        }
    }
}

/// A block live when a trace began, taken over by a policy: the trace's id for it, where it
/// lies, what was asked for, and whether the program had let go of it already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Adopted {
    /// The trace's id.
    pub id: u64,
    /// Where the policy has it.
    pub block: Block,
    /// Bytes asked for.
    pub requested: u64,
    /// Its stream.
    pub stream: u64,
    /// Let go of, waiting for its stream (`free_requested` before the trace began).
    pub pending: bool,
    /// The policy's handle for it (see [`Policy::allocate_handled`]).
    pub handle: u32,
}

/// The handle of a block whose policy gives none (see [`Policy::allocate_handled`]).
pub const NO_HANDLE: u32 = u32::MAX;

/// A request a policy could not satisfy, worded for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AllocError(pub String);

/// The limits on held device memory under which a policy decides as it did under its own over
/// some stretch of a replay: every limit `L` with `from <= L < below` (see
/// [`Policy::take_alike_limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlikeLimits {
    /// The least such limit: the most memory a granted device request held.
    pub from: u64,
    /// Every such limit lies below this: the least memory a refused device request would have held.
    pub below: u64,
}

impl AlikeLimits {
    /// Every limit (nothing decided yet).
    pub const ANY: AlikeLimits = AlikeLimits {
        from: 0,
        below: u64::MAX,
    };
    /// No limit known alike.
    pub const NONE: AlikeLimits = AlikeLimits {
        from: u64::MAX,
        below: 0,
    };

    /// Whether `limit` decides alike.
    pub fn contains(&self, limit: u64) -> bool {
        self.from <= limit && limit < self.below
    }

    /// The limits alike over both stretches.
    #[must_use]
    pub fn and(self, other: AlikeLimits) -> AlikeLimits {
        AlikeLimits {
            from: self.from.max(other.from),
            below: self.below.min(other.below),
        }
    }
}

/// An allocator policy.
pub trait Policy {
    /// Hands out a block of at least `size` bytes for `stream`.
    fn allocate(&mut self, device: &mut dyn DeviceMemory, size: u64, stream: u64) -> Result<Block, AllocError>;
    /// [`Policy::allocate`], with the policy's own handle for the block ([`NO_HANDLE`]: it has
    /// none), which [`Policy::free_requested_handled`] and [`Policy::free_handled`] take back
    /// with the block so that the policy finds it without searching by address (a replay's
    /// every free did, a tenth of `tune`'s time in issue 39).
    fn allocate_handled(
        &mut self,
        device: &mut dyn DeviceMemory,
        size: u64,
        stream: u64,
    ) -> Result<(Block, u32), AllocError> {
        self.allocate(device, size, stream).map(|block| (block, NO_HANDLE))
    }
    /// The program lets go of a block that stays in use a while longer (PyTorch's
    /// `free_requested`); [`Policy::free`] follows once it may be reused.
    fn free_requested(&mut self, _device: &mut dyn DeviceMemory, _block: Block) {}
    /// [`Policy::free_requested`] of a block and its handle (see [`Policy::allocate_handled`]).
    fn free_requested_handled(&mut self, device: &mut dyn DeviceMemory, block: Block, handle: u32) {
        let _ = handle;
        self.free_requested(device, block)
    }
    /// Takes back a block this policy handed out, now reusable.
    fn free(&mut self, device: &mut dyn DeviceMemory, block: Block);
    /// [`Policy::free`] of a block and its handle (see [`Policy::allocate_handled`]).
    fn free_handled(&mut self, device: &mut dyn DeviceMemory, block: Block, handle: u32) {
        let _ = handle;
        self.free(device, block)
    }
    /// Blocks let go of (see [`Policy::free_requested`]) that the policy finished on its own,
    /// before their [`Policy::free`] came (PyTorch synchronises every stream when it empties
    /// its cache); the caller must not free them again.
    fn drain_finished(&mut self) -> Vec<Block> {
        Vec::new()
    }
    /// Whether [`Policy::drain_finished`] may have blocks to give (a replay asks after every
    /// request; a policy that keeps them says when it has none, which saves the call).
    fn may_have_finished(&self) -> bool {
        true
    }
    /// Limits the device memory held to `capacity` bytes; true when the policy enforces the
    /// limit itself, by its own rule (PyTorch's `set_per_process_memory_fraction`), false when
    /// the device should refuse past it.
    fn limit_memory(&mut self, _capacity: u64) -> bool {
        false
    }
    /// A copy of the policy as it is now, for a replay to go on from. The smallest-capacity
    /// search starts each probe from the unlimited run where the probe's capacity would first
    /// refuse something, so a copy must only be offered while a capacity changes nothing before
    /// it refuses, or give in [`Policy::limit_needed`] the least capacity under which it has not
    /// (PyTorch's garbage collection acts relative to the cap). A policy whose
    /// [`Policy::limit_memory`] is true must give [`Policy::limit_needed`].
    fn resumable_copy(&self) -> Option<Box<dyn Policy>> {
        None
    }
    /// For a policy that limits memory itself: the smallest limit under which it would have
    /// done all it did so far (refused no device request, collected no garbage).
    fn limit_needed(&self) -> u64 {
        0
    }
    /// For a policy that limits memory itself: the limits under which it would have decided
    /// everything it decided since the last call as it did under its own (each device request
    /// granted or refused alike, garbage collected alike), and starts counting afresh; `None`
    /// where the policy cannot say. The capacity search uses it to answer a probe from another
    /// that was in the same state at the same event (see `capacity.rs`).
    fn take_alike_limits(&mut self) -> Option<AlikeLimits> {
        None
    }
    /// Appends its state as far as its later decisions can see it, so that two states that
    /// append the same decide alike from then on, given the same requests (see `period.rs`):
    /// blocks in address order, not their addresses (new device memory lies above all held);
    /// a handed-out block by `tag` of its address (`None`: not the program's). False where the
    /// policy cannot say (then nothing is concluded).
    fn canonical_state(&self, _tag: &mut dyn FnMut(u64) -> Option<u64>, _out: &mut Vec<u64>) -> bool {
        false
    }
    /// The policy's own statistics, for PyTorch's allocator.
    fn pytorch_stats(&self) -> Option<PytorchStats> {
        None
    }
    /// Its segments and their blocks now, as PyTorch's snapshot lists them (empty where the
    /// policy has no such notion).
    fn segments(&self) -> Vec<SegmentView> {
        Vec::new()
    }
    /// The free memory it holds.
    fn free_space(&self) -> FreeSpace;
    /// The alignment every block it hands out has.
    fn alignment(&self) -> u64;
    /// Returns every cached byte it can to the device, every pool's (after a replay).
    fn release_cached(&mut self, device: &mut dyn DeviceMemory);
    /// The program's `torch.cuda.empty_cache()` (PyTorch also synchronises every stream).
    fn empty_cache(&mut self, device: &mut dyn DeviceMemory) {
        self.release_cached(device)
    }
    /// Serves the next requests from pool family `pool` (0 the default pools; k a private pool
    /// of the trace's). Policies without pools ignore it.
    fn select_pool(&mut self, _pool: u32) {}
    /// The owner of private pool `pool` let go of it.
    fn release_pool(&mut self, _pool: u32) {}
    /// The program's `torch.cuda.reset_peak_memory_stats()`: each peak of
    /// [`Policy::pytorch_stats`] starts again from its current value. Policies without
    /// PyTorch's statistics ignore it.
    fn reset_peak_stats(&mut self) {}
    /// Takes over the state a trace began in (a snapshot whose start was lost); the live blocks,
    /// with their trace ids. A policy that does not know PyTorch's layout allocates each live
    /// block as a request, in address order.
    fn adopt(&mut self, device: &mut dyn DeviceMemory, start: &StartState) -> Result<Vec<Adopted>, AllocError> {
        let mut live: Vec<&StartBlock> = start.blocks().filter(|b| b.id.is_some()).collect();
        live.sort_by_key(|b| b.addr);
        live.into_iter()
            .map(|b| {
                let (block, handle) = self.allocate_handled(device, b.requested, b.stream)?;
                let pending = b.state == BlockState::Pending;
                if pending {
                    self.free_requested_handled(device, block, handle);
                }
                Ok(Adopted {
                    id: b.id.unwrap_or_default(),
                    block,
                    requested: b.requested,
                    stream: b.stream,
                    pending,
                    handle,
                })
            })
            .collect()
    }
    /// Policy-specific counts (hits, misses, splits ...).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// A policy's spec, read and checked: building from it cannot fail, so a choice validated once
/// builds a fresh policy for every replay and probe. Made by [`Recipe::of`] from the catalogue's
/// names ([`experiments::POLICIES`]), one arm per policy.
#[derive(Clone)]
pub struct Recipe(std::sync::Arc<dyn Fn() -> Box<dyn Policy> + Send + Sync>);

impl std::fmt::Debug for Recipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recipe")
    }
}

impl Recipe {
    fn new(build: impl Fn() -> Box<dyn Policy> + Send + Sync + 'static) -> Recipe {
        Recipe(std::sync::Arc::new(build))
    }

    /// A fresh policy.
    pub fn build(&self) -> Box<dyn Policy> {
        (self.0)()
    }

    /// Reads and checks the parameters of the policy `spec` names.
    pub fn of(spec: &PolicySpec) -> Result<Recipe, experiments::Error> {
        let power_of_two = |key: &str| -> Result<u64, experiments::Error> {
            let value = spec.bytes(key)?;
            if value.is_power_of_two() {
                Ok(value)
            } else {
                Err(experiments::Error::Invalid(format!(
                    "policy {}: {key} = {}: must be a power of two",
                    spec.name,
                    spec.param(key)
                )))
            }
        };
        let positive = |key: &str| -> Result<u64, experiments::Error> {
            match spec.bytes(key)? {
                0 => Err(experiments::Error::Invalid(format!(
                    "policy {}: {key} = 0: must be positive",
                    spec.name
                ))),
                value => Ok(value),
            }
        };
        Ok(match spec.name.as_str() {
            name @ ("cuda-malloc" | "cuda-malloc-async") => {
                let (round, stream_ordered) = (power_of_two("round")?, name == "cuda-malloc-async");
                Recipe::new(move || Box::new(simple::CudaMalloc::new(round, stream_ordered)))
            }
            "bump" => {
                let (arena, alignment) = (positive("arena")?, power_of_two("alignment")?);
                let reset = spec.bytes("reset_when_empty")? != 0;
                Recipe::new(move || Box::new(simple::Bump::new(arena, alignment, reset)))
            }
            "buckets" => {
                let min = power_of_two("min")?;
                Recipe::new(move || Box::new(simple::Buckets::new(min)))
            }
            "best-fit" => {
                let (grow_by, alignment) = (positive("grow_by")?, power_of_two("alignment")?);
                Recipe::new(move || Box::new(best_fit::BestFit::new(grow_by, alignment)))
            }
            "buddy" => {
                let (arena, min_block) = (power_of_two("arena")?, power_of_two("min_block")?);
                if min_block > arena {
                    return Err(experiments::Error::Invalid(format!(
                        "policy buddy: min_block = {} is larger than arena = {}",
                        spec.param("min_block"),
                        spec.param("arena")
                    )));
                }
                Recipe::new(move || Box::new(buddy::Buddy::new(arena, min_block)))
            }
            "binning" => {
                let (min_bin, max_bin) = (power_of_two("min_bin")?, power_of_two("max_bin")?);
                if min_bin > max_bin {
                    return Err(experiments::Error::Invalid(format!(
                        "policy binning: min_bin = {} is larger than max_bin = {}",
                        spec.param("min_bin"),
                        spec.param("max_bin")
                    )));
                }
                let large = PolicySpec::parse(spec.param("large"))?;
                if large.name == "binning" {
                    return Err(experiments::Error::Invalid(
                        "policy binning: large = binning would never end".into(),
                    ));
                }
                let (chunk, large) = (positive("chunk")?, Recipe::of(&large)?);
                Recipe::new(move || Box::new(binning::Binning::new(min_bin, max_bin, chunk, large.build())))
            }
            "caching" => {
                let conf = AllocConf {
                    max_split_size: match spec.param("max_split_size") {
                        "none" => u64::MAX,
                        _ => positive("max_split_size")?,
                    },
                    ..AllocConf::default()
                };
                Recipe::new(move || Box::new(caching::Caching::new(conf.clone(), PYTORCH_SMALL_PAGE)))
            }
            "expandable" => {
                let conf = AllocConf {
                    expandable_segments: true,
                    large_segment_size: positive("large_page")?,
                    ..AllocConf::default()
                };
                let small_page = positive("small_page")?;
                Recipe::new(move || Box::new(caching::Caching::new(conf.clone(), small_page)))
            }
            other => {
                return Err(experiments::Error::Unknown {
                    kind: "policy",
                    name: other.to_string(),
                    valid: experiments::POLICIES.iter().map(|p| p.name.to_string()).collect(),
                })
            }
        })
    }
}

/// Builds the policy a spec names, reading its parameters.
pub fn build_policy(spec: &PolicySpec) -> Result<Box<dyn Policy>, experiments::Error> {
    Ok(Recipe::of(spec)?.build())
}

/// Runs `work` with `token` current on this thread and on every thread its parallel parts run
/// on (a thread pool of the global pool's size, made for this call), so that cancelling the
/// token stops this call's work and no other call's.
pub fn run_cancellable<R: Send>(token: &experiments::cancel::Token, work: impl FnOnce() -> R + Send) -> R {
    let for_workers = token.clone();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(rayon::current_num_threads())
        .thread_name(|i| format!("vramlab-call-{i}"))
        .start_handler(move |_| experiments::cancel::set_current(Some(for_workers.clone())))
        .build();
    experiments::cancel::with_token(token, || match pool {
        Ok(pool) => pool.install(work),
        // Without a pool of its own, the parallel parts run on the global pool, where only
        // this thread's part sees the token.
        Err(_) => work(),
    })
}

/// The small pool's page under expandable segments (kSmallBuffer).
const PYTORCH_SMALL_PAGE: u64 = experiments::pytorch::SMALL_BUFFER;

/// PyTorch's allocator under a `PYTORCH_ALLOC_CONF`: the caching allocator with those
/// settings, or the driver's stream-ordered pool for `backend:cudaMallocAsync`.
pub fn build_pytorch_policy(conf: &AllocConf) -> Box<dyn Policy> {
    match conf.backend {
        AllocBackend::Native => Box::new(caching::Caching::new(conf.clone(), PYTORCH_SMALL_PAGE)),
        AllocBackend::CudaMallocAsync => Box::new(simple::CudaMalloc::new(1, true)),
    }
}

/// `value` rounded up to a multiple; saturates rather than wraps, so a request too large to
/// round stays too large for any device to hold and fails as a refused request.
fn round_up(value: u64, multiple: u64) -> u64 {
    value.div_ceil(multiple).saturating_mul(multiple)
}

#[cfg(test)]
mod tests;
