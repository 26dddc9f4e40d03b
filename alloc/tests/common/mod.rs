//! What the tests on recordings share: a trace replayed under the settings it names (PyTorch's
//! defaults where it names none), over the addresses its driver gave.

use allocators::{build_pytorch_policy, replay_policy, ReplayOptions, SimDevice};
use experiments::{AllocConf, BackendKind, PolicyResult, Trace};

/// `trace` replayed as it was recorded, under `capacity`; checked against the recording, or
/// (`record`) keeping every operation and a timeline point per event instead.
pub(crate) fn replay_own(trace: &Trace, capacity: Option<u64>, record: bool) -> PolicyResult {
    let conf = AllocConf::parse(trace.allocator_settings.as_deref().unwrap_or("")).unwrap();
    let options = ReplayOptions {
        capacity,
        timeline_points: if record { usize::MAX } else { 0 },
        time_ops: false,
        check_recorded: !record,
        stop_at_first_failure: false,
        record_events: record,
    };
    let mut device = SimDevice::following(80 << 30, trace);
    replay_policy(
        trace,
        &trace.name,
        build_pytorch_policy(&conf),
        &mut device,
        options,
        &mut (),
        BackendKind::Sim,
    )
    .unwrap()
}
