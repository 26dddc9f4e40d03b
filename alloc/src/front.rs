//! The replay and the tune that `vramlab replay`, `vramlab tune` and Python's `vramlab.replay`
//! and `vramlab.tune` run: one front for all of them, so the choice of device, the cap and its
//! checks, the device's size and the policies chosen cannot drift between them.

use experiments::{Profile, ReplayRecord, Trace, TraceSource, DEFAULT_PROFILE};

use super::{replay_devices, tune_record, Error, PolicyChoice, ReplayOptions};

/// One input's replay, set up step by step:
/// `Replay::new(traces, device)?.capacity(cap)?.policies(policy, alloc_conf).run()`, or
/// `.tune(grid)`.
#[derive(Debug, Clone)]
pub struct Replay {
    traces: Vec<Trace>,
    capacity: Option<u64>,
    policy: Option<String>,
    alloc_conf: Vec<String>,
    device_bytes: u64,
    keep_events: bool,
}

impl Replay {
    /// Every device of one input (as [`Trace::load_input`] reads it), or with `device` only
    /// that one; refused where there is nothing to replay. The device's size, which sizes the
    /// address range expandable segments reserve, is the built-in profile's.
    pub fn new(traces: Vec<Trace>, device: Option<usize>) -> Result<Replay, Error> {
        let traces = match device {
            Some(d) => {
                let name = traces.first().map_or_else(String::new, |t| format!("{}: ", t.name));
                let trace = traces.into_iter().find(|t| t.device == d && !t.is_empty());
                vec![trace.ok_or_else(|| {
                    experiments::Error::Trace(format!(
                        "{name}device {d} has no events in the snapshot (nothing to replay)"
                    ))
                })?]
            }
            None => traces,
        };
        if traces.iter().all(Trace::is_empty) {
            return Err(experiments::Error::Trace(match traces.first() {
                Some(t) if t.source == TraceSource::PytorchSnapshot => format!(
                    "{}: not a PyTorch memory snapshot: every device trace is empty (was _record_memory_history on?)",
                    t.name
                ),
                Some(t) => match t.warnings.examples.first() {
                    // Every row was skipped: say why the first was.
                    Some(first) => format!(
                        "{}: the trace has no events: its {} records were all skipped; the first: {first}",
                        t.name, t.warnings.count
                    ),
                    None => format!("{}: the trace has no events", t.name),
                },
                None => "the trace has no device to replay".to_string(),
            })
            .into());
        }
        Ok(Replay {
            traces,
            capacity: None,
            policy: None,
            alloc_conf: Vec::new(),
            device_bytes: Profile::find(DEFAULT_PROFILE)?.device.memory_bytes,
            keep_events: false,
        })
    }

    /// Names the PyTorch release whose allocator rules the replay follows (`2.15`; `None`: the
    /// one each snapshot shows, or 2.11), refused where a snapshot shows a later one; a
    /// release newer than any known is replayed under the newest, with a warning in the record.
    pub fn torch(mut self, release: Option<&str>) -> Result<Replay, Error> {
        for trace in &mut self.traces {
            trace.name_release(release)?;
        }
        Ok(self)
    }

    /// Refuses device memory beyond `capacity` bytes (what `set_per_process_memory_fraction`
    /// sets); none: the cap a recorded out-of-memory error implies, if any.
    pub fn capacity(mut self, capacity: Option<u64>) -> Result<Replay, Error> {
        if capacity == Some(0) {
            return Err(experiments::Error::Settings("capacity 0: must be positive".into()).into());
        }
        self.capacity = capacity;
        Ok(self)
    }

    /// The policies: vramlab's by name (`policy`, comma-separated, or `all`) and PyTorch's under
    /// each `PYTORCH_ALLOC_CONF` string; with neither, a snapshot's own settings.
    pub fn policies(mut self, policy: Option<&str>, alloc_conf: &[String]) -> Replay {
        self.policy = policy.map(str::to_string);
        self.alloc_conf = alloc_conf.to_vec();
        self
    }

    /// The device's size (which sizes the address range expandable segments reserve), where a
    /// GPU is named (`--gpu`); none: the built-in profile's.
    pub fn device_bytes(mut self, bytes: Option<u64>) -> Replay {
        if let Some(bytes) = bytes {
            self.device_bytes = bytes;
        }
        self
    }

    /// Keeps every operation, and a finer timeline, for the exports.
    pub fn keep_events(mut self, keep: bool) -> Replay {
        self.keep_events = keep;
        self
    }

    /// The first device with events: the one a single-trace view shows.
    pub fn trace(&self) -> &Trace {
        self.traces
            .iter()
            .find(|t| !t.is_empty())
            .expect("Replay::new refuses inputs with nothing to replay")
    }

    /// The policies [`Replay::run`] replays the first device under.
    pub fn choices(&self) -> Result<Vec<PolicyChoice>, Error> {
        Ok(super::choose_policies(
            self.trace(),
            self.policy.as_deref(),
            &self.alloc_conf,
        )?)
    }

    /// How each replay runs: the cap given (a device's inferred cap is its own), the
    /// exports' wishes.
    pub fn options(&self) -> ReplayOptions {
        ReplayOptions {
            capacity: self.capacity,
            record_events: self.keep_events,
            timeline_points: if self.keep_events { 20_000 } else { 2000 },
            ..ReplayOptions::default()
        }
    }

    /// Every device replayed under its policies in simulation, each with the smallest cap it
    /// fits under, labelled by device.
    pub fn run(&self) -> Result<ReplayRecord, Error> {
        replay_devices(
            &self.traces,
            self.policy.as_deref(),
            &self.alloc_conf,
            self.capacity,
            self.device_bytes,
            self.options(),
        )
    }

    /// The first device under every setting of `grid` (the default grid when empty), ranked,
    /// with the verdicts and the post-mortem.
    pub fn tune(&self, grid: &[String]) -> Result<ReplayRecord, Error> {
        tune_record(self.trace(), grid, self.capacity, self.device_bytes)
    }
}
