//! Which policies a replay runs: vramlab's by name, PyTorch's under settings strings, or, for
//! a snapshot that names them, the settings it was recorded with.

use experiments::{
    AllocBackend, AllocConf, BackendKind, DeviceInfo, PolicyResult, PolicySpec, ReplayRecord, TorchRelease, Trace,
    TraceEvent, TraceSource, POLICIES,
};
use rayon::prelude::*;

use super::capacity::{fitting_caps_of, Copier, ALWAYS_FITS_PROBES};
use super::period::LazyPeriod;
use super::replay::replay_leaving_copies;
use super::replayer::LiveBlocks;
use super::{build_pytorch_policy, Error, Policy, Recipe, ReplayOptions, SimDevice};

/// One policy a replay runs.
// A handful of choices per replay, each read once: their size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum PolicyChoice {
    /// One of vramlab's policies, by name with parameters, and read into a recipe.
    Named(PolicySpec, Recipe),
    /// PyTorch's allocator under a `PYTORCH_ALLOC_CONF`, as written and as parsed.
    Pytorch {
        /// The string as given (the label shows it).
        settings: String,
        /// What it means.
        conf: AllocConf,
    },
}

impl PolicyChoice {
    /// PyTorch 2.11's allocator under `settings`, or the parser's one-line error.
    pub fn pytorch(settings: &str) -> Result<PolicyChoice, experiments::Error> {
        PolicyChoice::pytorch_of(settings, TorchRelease::default())
    }

    /// PyTorch `release`'s allocator under `settings`, or the parser's one-line error.
    pub fn pytorch_of(settings: &str, release: TorchRelease) -> Result<PolicyChoice, experiments::Error> {
        Ok(PolicyChoice::Pytorch {
            settings: settings.to_string(),
            conf: AllocConf::parse_for(settings, release)?,
        })
    }

    /// The cap a replay of it runs under: `capacity`, or the one its settings set
    /// (`per_process_memory_fraction` of a device of `device_bytes`), whichever is smaller.
    pub fn capacity_under(&self, capacity: Option<u64>, device_bytes: u64) -> Option<u64> {
        let own = match self {
            PolicyChoice::Pytorch { conf, .. } => conf.fraction_cap(device_bytes),
            PolicyChoice::Named(..) => None,
        };
        match (capacity, own) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What a replay of it must say beside its figures (see [`AllocConf::replay_notes`]).
    pub fn notes(&self, device_bytes: u64) -> Vec<String> {
        match self {
            PolicyChoice::Pytorch { conf, .. } => conf
                .replay_notes(device_bytes)
                .into_iter()
                .map(|note| format!("{}: {note}", self.label()))
                .collect(),
            PolicyChoice::Named(..) => Vec::new(),
        }
    }

    /// How results name it.
    pub fn label(&self) -> String {
        match self {
            PolicyChoice::Named(spec, _) => spec.label(),
            PolicyChoice::Pytorch { settings, .. } => experiments::pytorch::alloc_conf_policy(settings),
        }
    }

    /// A fresh policy.
    pub fn build(&self) -> Box<dyn Policy> {
        match self {
            PolicyChoice::Named(_, recipe) => recipe.build(),
            PolicyChoice::Pytorch { conf, .. } => build_pytorch_policy(conf),
        }
    }

    /// Whether the only decision of its policy that depends on a cap is whether a device
    /// request fits under it (PyTorch's own allocator without a garbage-collection threshold,
    /// which acts relative to the cap, or expandable segments, which map less than they
    /// check): then one probe of the smallest-cap searches answers for a range of caps.
    pub(crate) fn decides_by_requests_alone(&self) -> bool {
        match self {
            PolicyChoice::Pytorch { conf, .. } => {
                conf.backend == AllocBackend::Native
                    && conf.garbage_collection_threshold == 0.0
                    && !conf.expandable_segments
            }
            PolicyChoice::Named(..) => false,
        }
    }

    /// Whether a replay of it under a cap it never needed decides every request as it would
    /// with no cap: PyTorch's own allocator, whose decisions that depend on the cap (a segment
    /// refused, garbage collected) its `limit_needed` covers. vramlab's policies are left out:
    /// some size what they take by the device they are given.
    pub(crate) fn replays_as_unlimited(&self) -> bool {
        matches!(self, PolicyChoice::Pytorch { conf, .. } if conf.backend == AllocBackend::Native)
    }

    /// Whether this replays `trace` under the settings it was recorded with (for a snapshot
    /// that does not name them, PyTorch's defaults, which the check then puts to the test).
    pub fn is_recording_of(&self, trace: &Trace) -> bool {
        match (self, &trace.allocator_settings) {
            (PolicyChoice::Pytorch { conf, .. }, Some(recorded)) => {
                AllocConf::parse_for(recorded, trace.torch.release).is_ok_and(|r| &r == conf)
            }
            (PolicyChoice::Pytorch { conf, .. }, None) => {
                trace.source == TraceSource::PytorchSnapshot
                    && *conf
                        == AllocConf {
                            release: trace.torch.release,
                            ..AllocConf::default()
                        }
            }
            _ => false,
        }
    }
}

/// The policies to run: `policy` (a comma-separated list, or `all`) and every `alloc_conf`;
/// with neither, a snapshot's own settings, or else every policy.
pub fn choose_policies(
    trace: &Trace,
    policy: Option<&str>,
    alloc_conf: &[String],
) -> Result<Vec<PolicyChoice>, experiments::Error> {
    let mut choices = Vec::new();
    // A snapshot is PyTorch's allocator at work: with no settings named, its defaults.
    let snapshot = trace.source == TraceSource::PytorchSnapshot;
    let named = match (policy, alloc_conf.is_empty(), &trace.allocator_settings) {
        (Some(policy), _, _) => Some(policy),
        (None, true, None) if !snapshot => Some("all"),
        _ => None,
    };
    if let Some(named) = named {
        let specs = if named == "all" {
            POLICIES
                .iter()
                .map(|p| PolicySpec::parse(p.name))
                .collect::<Result<Vec<_>, _>>()?
        } else {
            PolicySpec::parse_list(named)?
        };
        for spec in specs {
            let recipe = Recipe::of(&spec)?;
            choices.push(PolicyChoice::Named(spec, recipe));
        }
    }
    let own = (alloc_conf.is_empty() && policy.is_none())
        .then(|| match &trace.allocator_settings {
            Some(settings) => Some(settings.clone()),
            None => snapshot.then(String::new),
        })
        .flatten();
    for settings in alloc_conf.iter().cloned().chain(own) {
        choices.push(PolicyChoice::pytorch_of(&settings, trace.torch.release)?);
    }
    if choices.is_empty() {
        return Err(experiments::Error::Invalid("the policy list names no policy".into()));
    }
    Ok(choices)
}

/// Replays `trace` under every choice in parallel (simulated, under `options.capacity`), each with the smallest capacity
/// it fits under. A choice that is the trace's own recording is replayed over the addresses
/// its driver gave, and checked against every device operation it recorded.
pub fn replay_choices(
    trace: &Trace,
    choices: &[PolicyChoice],
    device_bytes: u64,
    options: ReplayOptions,
) -> Result<Vec<PolicyResult>, Error> {
    replay_each(trace, choices, device_bytes, options, false)
}

/// [`replay_choices`], with `always_fits` also the cap from which each choice fits at every
/// larger one (see [`crate::capacity::FittingCaps`]).
pub(crate) fn replay_each(
    trace: &Trace,
    choices: &[PolicyChoice],
    device_bytes: u64,
    options: ReplayOptions,
    always_fits: bool,
) -> Result<Vec<PolicyResult>, Error> {
    let sharing = choices.len() >= rayon::current_num_threads();
    replay_each_sharing(trace, choices, device_bytes, options, always_fits, sharing)
}

/// [`replay_each`]; `sharing`: where a choice's replay can make its capacity search's unlimited
/// run (see [`PolicyChoice::replays_as_unlimited`]), the search goes on from it instead of
/// replaying the trace once more beside the replay (worth it where every thread has choices of
/// its own to replay: one choice's search then no longer runs beside its replay).
pub(crate) fn replay_each_sharing(
    trace: &Trace,
    choices: &[PolicyChoice],
    device_bytes: u64,
    options: ReplayOptions,
    always_fits: bool,
    sharing: bool,
) -> Result<Vec<PolicyResult>, Error> {
    let releases_within_requests = trace
        .events
        .iter()
        .any(|e| matches!(e, TraceEvent::EmptyCache { within_request: true }));
    // How the trace repeats itself, found once for every choice's search.
    let period = LazyPeriod::new(trace);
    // The live blocks' table (where each block's entry is kept), made once for every replay.
    let live = LiveBlocks::for_trace(trace);
    choices
        .par_iter()
        .map(|choice| {
            let own = choice.is_recording_of(trace);
            let mut device = if own {
                SimDevice::following(device_bytes, trace)
            } else {
                SimDevice::new(device_bytes)
            };
            let options = ReplayOptions {
                check_recorded: own,
                capacity: choice.capacity_under(options.capacity, device_bytes),
                ..options
            };
            let scan = always_fits.then_some(ALWAYS_FITS_PROBES);
            let spans = choice.decides_by_requests_alone();
            let capped = options.capacity.is_some() || options.stop_at_first_failure;
            // Over a recording's addresses the replay does not decide as the search's fresh
            // device would; a recording that kept none leaves the device counting, as fresh.
            let shares = sharing
                && !device.follows_recording()
                && choice.replays_as_unlimited()
                && trace.start.is_none()
                && (capped || !releases_within_requests);
            let replay = |device: &mut SimDevice, copier| {
                replay_leaving_copies(
                    trace,
                    &choice.label(),
                    choice.build(),
                    device,
                    options,
                    &mut (),
                    BackendKind::Sim,
                    copier,
                    Some(&live),
                )
            };
            let search = |unlimited| {
                fitting_caps_of(
                    trace,
                    &|| choice.build(),
                    device_bytes,
                    scan,
                    spans,
                    unlimited,
                    Some(&period),
                    Some(&live),
                )
            };
            let (result, caps) = if shares {
                let (result, unlimited) = replay(&mut device, Some(Copier::new(trace)))?;
                (result, search(unlimited)?)
            } else {
                // The replay and the search for the smallest cap are independent: run them side by side.
                let (replayed, caps) =
                    rayon::join(|| replay(&mut device, None).map(|(result, _)| result), || search(None));
                (replayed?, caps?)
            };
            let mut result = result;
            result.min_capacity_bytes = caps.map(|caps| caps.smallest);
            if always_fits {
                result.always_fits_bytes = caps.map(|caps| caps.always);
                result.always_fits_exact = caps.map(|caps| caps.exact);
            }
            Ok(result)
        })
        .collect()
}

/// The cap a replay runs under: the one given, or else the device as the recording's
/// out-of-memory error showed it; with a sentence saying where an inferred cap came from.
pub(crate) fn replay_capacity(trace: &Trace, given: Option<u64>) -> (Option<u64>, Option<String>) {
    match (given, trace.capacity_from_oom()) {
        (Some(cap), _) => (Some(cap), None),
        (None, Some(cap)) => (Some(cap.bytes), Some(cap.explain())),
        (None, None) => (None, None),
    }
}

/// Says which release's rules PyTorch's allocator followed (where any choice is PyTorch's), and
/// what each setting does that the figures alone do not say.
pub(crate) fn note_release(record: &mut ReplayRecord, trace: &Trace, choices: &[PolicyChoice], device_bytes: u64) {
    if !choices.iter().any(|c| matches!(c, PolicyChoice::Pytorch { .. })) {
        return;
    }
    record.torch = Some(trace.torch.clone());
    record.notes.extend(trace.torch.warning.clone());
    for choice in choices {
        record.notes.extend(choice.notes(device_bytes));
    }
}

/// Replays every trace of a file (one per device of a snapshot) under the policies chosen for
/// it, as `vramlab replay` does: each device on its own, labelled, under `capacity` or the cap
/// its recorded out-of-memory error implies; devices without events are listed with a note.
pub(crate) fn replay_devices(
    traces: &[Trace],
    policy: Option<&str>,
    alloc_conf: &[String],
    capacity: Option<u64>,
    device_bytes: u64,
    options: ReplayOptions,
) -> Result<ReplayRecord, Error> {
    let mut records = Vec::with_capacity(traces.len());
    for trace in traces {
        if trace.is_empty() {
            let mut record = ReplayRecord::new(trace, None, DeviceInfo::default(), Vec::new());
            record.notes.push(format!(
                "device {} has no events in the snapshot: nothing to replay",
                trace.device
            ));
            records.push(record);
            continue;
        }
        let choices = choose_policies(trace, policy, alloc_conf)?;
        let (cap, source) = replay_capacity(trace, capacity);
        let results = replay_choices(
            trace,
            &choices,
            device_bytes,
            ReplayOptions {
                capacity: cap,
                ..options
            },
        )?;
        let mut record = ReplayRecord::new(trace, cap, DeviceInfo::default(), results);
        record.capacity_source = source;
        note_release(&mut record, trace, &choices, device_bytes);
        records.push(record);
    }
    Ok(ReplayRecord::of_devices(records)?)
}
