//! PyTorch memory snapshots (`torch.cuda.memory._snapshot()`, pickled).
//!
//! `device_traces[d]` lists the allocator's events. An `alloc` is a request; `free_requested`
//! is the program letting go (it stops counting as allocated) and `free_completed` the moment
//! PyTorch can hand the memory out again (work on other streams has finished). An `oom` is a
//! request that failed, replayed as a request. `segment_alloc`, `segment_free`, `segment_map`
//! and `segment_unmap` are the recording allocator's own device operations, kept to check a
//! model of it; `allocator_settings` names the `PYTORCH_ALLOC_CONF` it ran under.

use super::pickle::{self, Pickle, Value};
use super::{DeviceAction, Pairing, RecordedOp, Trace, TraceSource};
use crate::error::{Error, Result};

pub(super) fn import(name: &str, bytes: &[u8], device: Option<usize>) -> Result<Trace> {
    let pickle = pickle::decode(bytes).map_err(|e| Error::Invalid(format!("{name}: byte {}: {}", e.at, e.message)))?;
    let schema = |what: &str| Error::Invalid(format!("{name}: not a PyTorch memory snapshot: {what}"));
    let root = pickle.root.as_ref().ok_or_else(|| schema("empty pickle"))?;
    // Events name no pool: a private pool's (CUDA graphs, MemPool) would be replayed in the
    // default pools, which is not what PyTorch did. Refused by name instead.
    if let Some(segments) = pickle.get(root, "segments").and_then(|v| pickle.items(v)) {
        for segment in segments {
            let pool = pickle.get(segment, "segment_pool_id").and_then(|v| pickle.items(v));
            let ids: Vec<i128> = pool
                .unwrap_or_default()
                .iter()
                .filter_map(|v| match v {
                    Value::Int(i) => Some(*i),
                    _ => None,
                })
                .collect();
            refuse_private_pool(name, &ids)?;
        }
    }
    let traces = pickle
        .get(root, "device_traces")
        .and_then(|v| pickle.items(v))
        .ok_or_else(|| schema("no 'device_traces' list"))?;
    let device = match device {
        Some(d) if d < traces.len() => d,
        Some(d) => {
            return Err(Error::Invalid(format!(
                "{name}: --device {d}: the snapshot has devices 0..{}",
                traces.len().saturating_sub(1)
            )))
        }
        None => traces
            .iter()
            .position(|t| pickle.items(t).is_some_and(|events| !events.is_empty()))
            .ok_or_else(|| schema("every device trace is empty (was _record_memory_history on?)"))?,
    };
    let events = pickle
        .items(&traces[device])
        .ok_or_else(|| schema(&format!("device_traces[{device}] is not a list")))?;

    let mut builder = SnapshotBuilder::new();
    for (index, event) in events.iter().enumerate() {
        let field = |key: &str| -> Result<&Value> {
            pickle
                .get(event, key)
                .ok_or_else(|| schema(&format!("device_traces[{device}][{index}] has no '{key}'")))
        };
        let number = |key: &str| -> Result<u64> {
            match field(key)? {
                Value::Int(v) => u64::try_from(*v)
                    .map_err(|_| schema(&format!("device_traces[{device}][{index}].{key} = {v} is negative"))),
                other => Err(schema(&format!(
                    "device_traces[{device}][{index}].{key} is {} not an integer",
                    kind(&pickle, other)
                ))),
            }
        };
        let action = match field("action")? {
            Value::Str(s) => s.clone(),
            other => {
                return Err(schema(&format!(
                    "device_traces[{device}][{index}].action is {}",
                    kind(&pickle, other)
                )))
            }
        };
        if SnapshotBuilder::wants(&action) {
            // An `oom` event names the device's free bytes where others name an address.
            let addr = if &*action == "oom" { 0 } else { number("addr")? };
            builder.push(&action, addr, number("size")?, number("stream")?);
        } else {
            builder.skip();
        }
    }
    let settings = pickle
        .get(root, "allocator_settings")
        .and_then(|settings| match settings {
            Value::Str(text) => Some(text.to_string()),
            dict => SETTINGS_KEYS.iter().find_map(|key| match pickle.get(dict, key) {
                Some(Value::Str(text)) => Some(text.to_string()),
                _ => None,
            }),
        });
    Ok(builder.finish(name, settings))
}

/// A segment's `segment_pool_id`: anything but (0, 0) is a private pool (CUDA graphs,
/// `torch.cuda.MemPool`). Its events do not say which pool they use, so replaying them in the
/// default pools would not be what PyTorch did: such a snapshot is refused by name.
pub fn refuse_private_pool(name: &str, pool_id: &[i128]) -> Result<()> {
    if pool_id.iter().any(|&i| i != 0) {
        return Err(Error::Invalid(format!(
            "{name}: segments of private memory pool {pool_id:?} (CUDA graphs or torch.cuda.MemPool): vramlab replays the default pools only, and the trace's events do not say which pool they use"
        )));
    }
    Ok(())
}

/// Where a snapshot's `allocator_settings` dict keeps the settings string.
pub const SETTINGS_KEYS: [&str; 2] = ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"];

/// Builds a [`Trace`] from a PyTorch snapshot's device-trace events, in order, whatever read
/// them (the pickle reader here, or a Python binding walking the dict PyTorch returned).
pub struct SnapshotBuilder {
    pairing: Pairing,
    segment_sizes: Vec<u64>,
    recorded_ops: Vec<RecordedOp>,
    index: usize,
}

impl Default for SnapshotBuilder {
    fn default() -> Self {
        SnapshotBuilder::new()
    }
}

impl SnapshotBuilder {
    /// An empty trace.
    pub fn new() -> SnapshotBuilder {
        SnapshotBuilder {
            pairing: Pairing::default(),
            segment_sizes: Vec::new(),
            recorded_ops: Vec::new(),
            index: 0,
        }
    }

    /// Whether an event with this `action` carries addresses and sizes the replay uses (the
    /// others, `snapshot`, `user_defined`..., are only counted).
    pub fn wants(action: &str) -> bool {
        matches!(
            action,
            "alloc"
                | "free_requested"
                | "free_completed"
                | "segment_alloc"
                | "segment_map"
                | "segment_free"
                | "segment_unmap"
                | "oom"
        )
    }

    /// An event this reader passes over (it still counts in event indices).
    pub fn skip(&mut self) {
        self.index += 1;
    }

    /// The next event of the device trace (`addr` is ignored for `oom`).
    pub fn push(&mut self, action: &str, addr: u64, size: u64, stream: u64) {
        let index = self.index;
        self.index += 1;
        let record = |ops: &mut Vec<RecordedOp>, at, action, addr| ops.push(RecordedOp { at, action, size, addr });
        let at = self.pairing.events.len();
        match action {
            "alloc" => self.pairing.alloc(index, addr, size, stream),
            "free_requested" => self.pairing.free_requested(index, addr),
            "free_completed" => self.pairing.free(index, addr, Some(size)),
            "segment_alloc" => {
                self.segment_sizes.push(size);
                record(&mut self.recorded_ops, at, DeviceAction::SegmentAlloc, addr);
            }
            "segment_map" => {
                self.segment_sizes.push(size);
                record(&mut self.recorded_ops, at, DeviceAction::SegmentMap, addr);
            }
            "segment_free" => record(&mut self.recorded_ops, at, DeviceAction::SegmentFree, addr),
            "segment_unmap" => record(&mut self.recorded_ops, at, DeviceAction::SegmentUnmap, addr),
            "oom" => {
                record(&mut self.recorded_ops, at, DeviceAction::Oom, 0);
                self.pairing.failed_alloc(size, stream);
            }
            _ => {}
        }
    }

    /// The trace, named `name`, recorded under `allocator_settings` when known.
    pub fn finish(self, name: &str, allocator_settings: Option<String>) -> Trace {
        let mut trace = self
            .pairing
            .finish(name.to_string(), TraceSource::PytorchSnapshot, self.segment_sizes);
        trace.recorded_ops = self.recorded_ops;
        trace.allocator_settings = allocator_settings;
        trace
    }
}

fn kind(pickle: &Pickle, value: &Value) -> &'static str {
    match value {
        Value::None => "None",
        Value::Bool(_) => "a bool",
        Value::Int(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Str(_) => "a string",
        Value::Bytes(_) => "bytes",
        Value::Dict(_) => "a dict",
        _ if pickle.items(value).is_some() => "a list",
        _ => "a value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_pools_are_refused_by_name() {
        // pickle.dumps({'segments': [{'segment_pool_id': (1, 0)}], 'device_traces': [[]]}, protocol=4)
        let bytes = b"\x80\x04\x95;\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94}\x94\x8c\x0fsegment_pool_id\x94K\x01K\x00\x86\x94sa\x8c\rdevice_traces\x94]\x94]\x94au.";
        let err = import("g.pickle", bytes, None).unwrap_err().to_string();
        assert!(err.contains("private memory pool [1, 0]"), "{err}");
    }

    #[test]
    fn a_dict_without_traces_is_named() {
        // pickle.dumps({'segments': []}, protocol=4)
        let bytes = b"\x80\x04\x95\x11\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94s.";
        let err = import("x.pickle", bytes, None).unwrap_err().to_string();
        assert_eq!(err, "x.pickle: not a PyTorch memory snapshot: no 'device_traces' list");
    }
}
