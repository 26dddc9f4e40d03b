//! Allocation traces replayed by `sim`'s policies over real device memory, every block
//! stamped by a kernel when handed out and checked when freed.

use std::cell::RefCell;

use allocators::{build_policy, replay_policy, BackendError, Block, DeviceMemory, Policy, ReplayHooks, ReplayOptions};
use experiments::{BackendKind, PolicySpec, ReplayRecord, Trace};

use crate::cuda::{Gpu, Kernel, PolicyMemory};
use crate::error::{HwError, Result};

/// Lets the replay allocate through the memory while the hooks launch kernels on it; the two
/// never run at the same time.
struct Shared<'m, 'g>(&'m RefCell<PolicyMemory<'g>>);

impl DeviceMemory for Shared<'_, '_> {
    fn allocate(&mut self, bytes: u64) -> Option<u64> {
        self.0.borrow_mut().allocate(bytes)
    }
    fn free(&mut self, addr: u64, bytes: u64) {
        self.0.borrow_mut().free(addr, bytes)
    }
    fn allocate_stream_ordered(&mut self, bytes: u64) -> Option<u64> {
        self.0.borrow_mut().allocate_stream_ordered(bytes)
    }
    fn free_stream_ordered(&mut self, addr: u64, bytes: u64) {
        self.0.borrow_mut().free_stream_ordered(addr, bytes)
    }
    fn reserve(&mut self, bytes: u64) -> Option<u64> {
        self.0.borrow_mut().reserve(bytes)
    }
    fn release(&mut self, addr: u64, bytes: u64) {
        self.0.borrow_mut().release(addr, bytes)
    }
    fn map(&mut self, addr: u64, bytes: u64) -> bool {
        self.0.borrow_mut().map(addr, bytes)
    }
    fn unmap(&mut self, addr: u64, bytes: u64) {
        self.0.borrow_mut().unmap(addr, bytes)
    }
    fn total_bytes(&self) -> u64 {
        self.0.borrow().total_bytes()
    }
}

struct DeviceChecks<'m, 'g> {
    memory: &'m RefCell<PolicyMemory<'g>>,
    stamp: &'m Kernel,
    verify: &'m Kernel,
    blocks: u64,
    bytes: u64,
}

impl DeviceChecks<'_, '_> {
    fn fault(&self) -> Result<(), BackendError> {
        match self.memory.borrow_mut().take_fault() {
            Some(fault) => Err(fault.into()),
            None => Ok(()),
        }
    }
}

fn tag(id: u64) -> u32 {
    (id as u32).wrapping_mul(0x9e37_79b9) | 1
}

impl ReplayHooks for DeviceChecks<'_, '_> {
    fn allocated(&mut self, id: u64, block: Block) -> Result<(), BackendError> {
        self.fault()?;
        self.blocks += 1;
        self.bytes += block.size;
        Ok(self
            .memory
            .borrow()
            .stamp(self.stamp, block.addr, block.size, tag(id))?)
    }

    fn freeing(&mut self, id: u64, block: Block) -> Result<(), BackendError> {
        self.fault()?;
        Ok(self
            .memory
            .borrow()
            .verify(self.verify, block.addr, block.size, tag(id))?)
    }

    fn finish(&mut self) -> Result<Option<String>, BackendError> {
        self.fault()?;
        let bad = self.memory.borrow().mismatches()?;
        if bad > 0 {
            return Err(HwError::DataMismatch(format!(
                "{bad} words of {} blocks held another block's data when freed: the policy handed out overlapping blocks",
                self.blocks
            ))
            .into());
        }
        Ok(Some(format!(
            "{} blocks ({:.2} GB) stamped by a kernel and checked when freed: no overlap",
            self.blocks,
            self.bytes as f64 / 1e9
        )))
    }
}

/// Replays `trace` through each policy over this GPU's memory, one policy at a time, each
/// starting from an empty device pool of its own.
pub fn replay_on_gpu(
    trace: &Trace,
    specs: &[PolicySpec],
    capacity: Option<u64>,
    progress: &dyn Fn(&str),
) -> Result<ReplayRecord> {
    let mut policies = Vec::new();
    for spec in specs {
        policies.push((spec.label(), build_policy(spec).map_err(allocators::Error::Input)?));
    }
    let options = ReplayOptions {
        capacity,
        ..ReplayOptions::default()
    };
    replay_policies_on_gpu(trace, policies, options, progress)
}

/// As [`replay_on_gpu`], for any policies (vramlab's or your own), each with its label, under
/// `options` (the cap, and whether to keep every operation for the exports).
pub fn replay_policies_on_gpu(
    trace: &Trace,
    policies: Vec<(String, Box<dyn Policy>)>,
    options: ReplayOptions,
    progress: &dyn Fn(&str),
) -> Result<ReplayRecord> {
    let gpu = Gpu::open()?;
    let device = gpu.info()?;
    let module = gpu.compile("replay.cu", include_str!("../../kernels/replay.cu"))?;
    let (stamp, verify) = (module.kernel("stamp", 0)?, module.kernel("verify", 0)?);
    let mut results = Vec::new();
    for (label, policy) in policies {
        progress(&label);
        let memory = RefCell::new(PolicyMemory::new(&gpu, device.memory_bytes)?);
        let mut checks = DeviceChecks {
            memory: &memory,
            stamp: &stamp,
            verify: &verify,
            blocks: 0,
            bytes: 0,
        };
        let result = replay_policy(
            trace,
            &label,
            policy,
            &mut Shared(&memory),
            options,
            &mut checks,
            BackendKind::Hw,
        )?;
        results.push(result);
    }
    Ok(ReplayRecord::new(trace, options.capacity, device, results))
}
