//! Simulated device memory, and the meter every replay puts between a policy and its device.

use experiments::{DeviceAction, RecordedOp, Trace};

use super::placement::Placement;
use super::DeviceMemory;

/// Device memory that exists only as numbers. Without a recording's addresses, a segment goes
/// where the CUDA driver of a fresh process would put it (`alloc/src/placement.rs`): the order
/// of segments in the address space decides which of two equal free blocks best fit reuses.
/// Reservations (expandable segments) get counted addresses, each above the one before.
#[derive(Debug, Clone)]
pub struct SimDevice {
    next_addr: u64,
    /// Where segments go while the device follows no recording (`None` once it has followed
    /// one: what it hands out after a recording's addresses part from the replay is counted).
    placement: Option<Placement>,
    total: u64,
    /// Bytes allocated or mapped and not yet given back.
    held: u64,
    /// Addresses the driver gave a recording's segments, in order, still to hand out.
    recorded: std::collections::VecDeque<(u64, u64)>,
    /// Recorded addresses handed out and not given back (first address -> end), so that one is
    /// never handed out again while in use: once a replay's decisions part from the
    /// recording's, the driver's addresses no longer fit them. Counted addresses lie above
    /// every recorded one and never meet them.
    in_use: std::collections::BTreeMap<u64, u64>,
}

impl SimDevice {
    /// Alignment of every simulated allocation and reservation (the VMM granularity).
    pub const GRANULE: u64 = experiments::VMM_GRANULE;

    /// A device with `total` bytes: it refuses to hold more (a cap below that is the meter's).
    pub fn new(total: u64) -> SimDevice {
        SimDevice {
            next_addr: 1 << 40,
            placement: Some(Placement::new()),
            total,
            held: 0,
            recorded: Default::default(),
            in_use: Default::default(),
        }
    }

    /// Whether it still has a recording's addresses to hand out (otherwise it is, and stays,
    /// a device that counts them).
    pub(crate) fn follows_recording(&self) -> bool {
        !self.recorded.is_empty()
    }

    /// Appends what of its state can decide anything later: what it holds, and where its
    /// placement would put the next segments (counted addresses, each above every one before,
    /// decide nothing). False while it follows a recording or holds memory the trace began
    /// with.
    pub(crate) fn canonical_state(&self, out: &mut Vec<u64>) -> bool {
        if !self.recorded.is_empty() || !self.in_use.is_empty() {
            return false;
        }
        out.push(self.held);
        if let Some(placement) = &self.placement {
            placement.canonical_state(out);
        }
        true
    }

    /// A device that hands out the addresses a recording's driver gave its segments, in the
    /// order it gave them, for as long as the allocations asked for are the recorded sizes
    /// (then counted addresses again). Where equal-size free blocks lie in different segments,
    /// best fit takes the lowest address, so replaying a trace exactly needs the driver's
    /// placement, which no rule of the allocator decides.
    pub fn following(total: u64, trace: &Trace) -> SimDevice {
        let mut device = SimDevice::new(total);
        device.recorded = trace
            .recorded_ops
            .iter()
            .filter(|op| op.action == DeviceAction::SegmentAlloc && op.addr != 0)
            .map(|op| (op.size, op.addr))
            .collect();
        if device.follows_recording() {
            device.placement = None;
        }
        // Counted addresses start past every recorded one, so the two never meet.
        let recorded_end = trace
            .recorded_ops
            .iter()
            .filter(|op| op.action != DeviceAction::Oom)
            .map(|op| op.addr.saturating_add(op.size))
            .max()
            .unwrap_or(0);
        device.skip_past(recorded_end);
        device
    }

    /// Counts addresses from past `end` on.
    fn skip_past(&mut self, end: u64) {
        let next = super::round_up(end, Self::GRANULE).saturating_add(Self::GRANULE);
        self.next_addr = self.next_addr.max(next);
    }

    fn carve(&mut self, bytes: u64) -> u64 {
        let addr = self.next_addr;
        // A gap of one granule keeps separate allocations from ever touching.
        self.next_addr = self
            .next_addr
            .saturating_add(super::round_up(bytes.max(1), Self::GRANULE))
            .saturating_add(Self::GRANULE);
        addr
    }

    /// Whether `[addr, addr + bytes)` meets a range in use.
    fn overlaps(&self, addr: u64, bytes: u64) -> bool {
        overlaps(&self.in_use, addr, bytes)
    }

    /// Where memory held before a trace began goes: its recorded address unless that is in
    /// use, remembered while it is held, and counted addresses from past it on.
    fn place_adopted(&mut self, addr: u64, bytes: u64) -> u64 {
        let addr = if self.overlaps(addr, bytes) {
            self.carve(bytes)
        } else {
            addr
        };
        self.skip_past(addr.saturating_add(bytes));
        self.in_use.insert(addr, addr.saturating_add(bytes));
        addr
    }

    /// Takes `bytes` of the device's memory, if it has them.
    fn take(&mut self, bytes: u64) -> bool {
        match self.held.checked_add(bytes) {
            Some(held) if held <= self.total => {
                self.held = held;
                true
            }
            _ => false,
        }
    }
}

impl DeviceMemory for SimDevice {
    fn resumable_copy(&self) -> Option<SimDevice> {
        Some(self.clone())
    }
    fn adopt(&mut self, addr: u64, bytes: u64) -> Option<u64> {
        if !self.take(bytes) {
            return None;
        }
        Some(self.place_adopted(addr, bytes))
    }
    fn adopt_reservation(&mut self, addr: u64, bytes: u64) -> Option<u64> {
        Some(self.place_adopted(addr, bytes))
    }
    fn allocate(&mut self, bytes: u64) -> Option<u64> {
        if !self.take(bytes) {
            return None;
        }
        let addr = match self.recorded.front() {
            Some(&(size, addr)) if size == bytes && !self.overlaps(addr, bytes) => {
                self.recorded.pop_front();
                self.in_use.insert(addr, addr.saturating_add(bytes));
                addr
            }
            Some(_) => {
                self.recorded.clear();
                self.carve(bytes)
            }
            None => match &mut self.placement {
                Some(placement) => {
                    let in_use = &self.in_use;
                    placement.place(bytes, &|addr, bytes| overlaps(in_use, addr, bytes))
                }
                None => self.carve(bytes),
            },
        };
        Some(addr)
    }
    fn free(&mut self, addr: u64, bytes: u64) {
        let adopted = !self.in_use.is_empty() && self.in_use.remove(&addr).is_some();
        if let Some(placement) = &mut self.placement {
            if !adopted {
                placement.release(addr, bytes);
            }
        }
        self.held -= bytes;
    }
    fn reserve(&mut self, bytes: u64) -> Option<u64> {
        Some(self.carve(bytes))
    }
    fn release(&mut self, addr: u64, _bytes: u64) {
        if !self.in_use.is_empty() {
            self.in_use.remove(&addr);
        }
    }
    fn map(&mut self, _addr: u64, bytes: u64) -> bool {
        self.take(bytes)
    }
    fn unmap(&mut self, _addr: u64, bytes: u64) {
        self.held -= bytes;
    }
    fn total_bytes(&self) -> u64 {
        self.total
    }
}

/// Whether `[addr, addr + bytes)` meets a range of `in_use` (first address -> end).
fn overlaps(in_use: &std::collections::BTreeMap<u64, u64>, addr: u64, bytes: u64) -> bool {
    let end = addr.saturating_add(bytes.max(1));
    in_use
        .range(..end)
        .next_back()
        .is_some_and(|(_, &used_end)| used_end > addr)
}

/// Counts what a policy takes from a device and enforces a capacity, so the figures of every
/// policy are measured the same way and no policy reports its own.
pub(crate) struct Metered<'d> {
    device: &'d mut dyn DeviceMemory,
    capacity: u64,
    counts: MeterCounts,
    sizes: Vec<u64>,
    /// The index of the trace event being replayed, stamped on every operation logged.
    pub(crate) at: usize,
    ops: Vec<RecordedOp>,
    /// Taking over a trace's starting state: memory is held, but no operation is logged or
    /// counted (it happened before the trace).
    priming: bool,
    /// Whether operations and sizes are kept (a probe wants only the counts).
    logging: bool,
}

/// The meter's running figures, which a probe carries from one stretch of events to the next.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MeterCounts {
    /// Bytes of device memory held now (allocations plus mapped ranges).
    pub(crate) reserved: u64,
    /// The most ever held.
    pub(crate) peak_reserved: u64,
    /// The smallest capacity that would have refused none of the requests so far.
    pub(crate) needed: u64,
    /// Allocation and map calls that succeeded.
    pub(crate) allocations: u64,
    /// Free and unmap calls.
    pub(crate) frees: u64,
}

impl<'d> Metered<'d> {
    /// Meters `device`, refusing anything that would hold more than `capacity` bytes, and
    /// keeping every operation.
    pub(crate) fn new(device: &'d mut dyn DeviceMemory, capacity: Option<u64>) -> Metered<'d> {
        Metered::resume(device, capacity, MeterCounts::default(), true)
    }

    /// Meters `device` from `counts` on; `logging`: keep every operation and size.
    pub(crate) fn resume(
        device: &'d mut dyn DeviceMemory,
        capacity: Option<u64>,
        counts: MeterCounts,
        logging: bool,
    ) -> Metered<'d> {
        Metered {
            device,
            capacity: capacity.unwrap_or(u64::MAX),
            counts,
            sizes: Vec::new(),
            at: 0,
            ops: Vec::new(),
            priming: false,
            logging,
        }
    }

    /// The running figures.
    pub(crate) fn counts(&self) -> MeterCounts {
        self.counts
    }

    /// The device metered.
    pub(crate) fn device(&self) -> &dyn DeviceMemory {
        &*self.device
    }

    /// Bytes held now.
    pub(crate) fn reserved(&self) -> u64 {
        self.counts.reserved
    }

    /// Every operation so far, in order.
    pub(crate) fn ops(&self) -> &[RecordedOp] {
        &self.ops
    }

    /// Sizes of successful allocations and maps, in order.
    #[cfg(test)]
    pub(crate) fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// Sizes of successful allocations and maps, in order.
    pub(crate) fn into_sizes(self) -> Vec<u64> {
        self.sizes
    }

    /// Logs a request the policy refused, where the recording would show its out-of-memory
    /// error, with the bytes the device then had free (the cap, or the device where it is
    /// smaller, less what is held), as PyTorch records them in the error's `device_free`.
    pub(crate) fn log_refusal(&mut self, size: u64, stream: u64) {
        if self.logging {
            let free = self
                .capacity
                .min(self.device.total_bytes())
                .saturating_sub(self.counts.reserved);
            self.ops.push(RecordedOp {
                at: self.at,
                action: DeviceAction::Oom,
                size,
                addr: free,
                stream,
            });
        }
    }

    /// While true, memory is held but nothing is logged or counted (a trace's starting state).
    pub(crate) fn set_priming(&mut self, priming: bool) {
        self.priming = priming;
    }

    fn log(&mut self, action: DeviceAction, size: u64, addr: u64) {
        if self.priming || !self.logging {
            return;
        }
        self.ops.push(RecordedOp {
            at: self.at,
            action,
            size,
            addr,
            stream: 0,
        });
    }

    fn admit(&mut self, bytes: u64) -> bool {
        let total = self.counts.reserved.checked_add(bytes);
        self.counts.needed = self.counts.needed.max(total.unwrap_or(u64::MAX));
        total.is_some_and(|total| total <= self.capacity)
    }

    fn took(&mut self, bytes: u64) {
        let counts = &mut self.counts;
        counts.reserved += bytes;
        counts.peak_reserved = counts.peak_reserved.max(counts.reserved);
        if !self.priming {
            counts.allocations += 1;
            if self.logging {
                self.sizes.push(bytes);
            }
        }
    }

    fn gave_back(&mut self, bytes: u64) {
        self.counts.reserved -= bytes;
        self.counts.frees += 1;
    }
}

impl DeviceMemory for Metered<'_> {
    fn adopt(&mut self, addr: u64, bytes: u64) -> Option<u64> {
        // What was held before the trace is held whatever the cap: a cap below it shows as the
        // smallest capacity the trace needs, not as a refusal of the past.
        self.admit(bytes);
        let addr = self.device.adopt(addr, bytes)?;
        self.took(bytes);
        Some(addr)
    }
    fn adopt_reservation(&mut self, addr: u64, bytes: u64) -> Option<u64> {
        self.device.adopt_reservation(addr, bytes)
    }
    fn allocate(&mut self, bytes: u64) -> Option<u64> {
        if !self.admit(bytes) {
            return None;
        }
        let addr = self.device.allocate(bytes)?;
        self.took(bytes);
        self.log(DeviceAction::SegmentAlloc, bytes, addr);
        Some(addr)
    }
    fn free(&mut self, addr: u64, bytes: u64) {
        self.device.free(addr, bytes);
        self.gave_back(bytes);
        self.log(DeviceAction::SegmentFree, bytes, addr);
    }
    fn allocate_stream_ordered(&mut self, bytes: u64) -> Option<u64> {
        if !self.admit(bytes) {
            return None;
        }
        let addr = self.device.allocate_stream_ordered(bytes)?;
        self.took(bytes);
        self.log(DeviceAction::SegmentAlloc, bytes, addr);
        Some(addr)
    }
    fn free_stream_ordered(&mut self, addr: u64, bytes: u64) {
        self.device.free_stream_ordered(addr, bytes);
        self.gave_back(bytes);
        self.log(DeviceAction::SegmentFree, bytes, addr);
    }
    fn reserve(&mut self, bytes: u64) -> Option<u64> {
        self.device.reserve(bytes)
    }
    fn release(&mut self, addr: u64, bytes: u64) {
        self.device.release(addr, bytes)
    }
    fn map(&mut self, addr: u64, bytes: u64) -> bool {
        if (!self.admit(bytes) && !self.priming) || !self.device.map(addr, bytes) {
            return false;
        }
        self.took(bytes);
        self.log(DeviceAction::SegmentMap, bytes, addr);
        true
    }
    fn unmap(&mut self, addr: u64, bytes: u64) {
        self.device.unmap(addr, bytes);
        self.gave_back(bytes);
        self.log(DeviceAction::SegmentUnmap, bytes, addr);
    }
    fn total_bytes(&self) -> u64 {
        self.device.total_bytes()
    }
}
