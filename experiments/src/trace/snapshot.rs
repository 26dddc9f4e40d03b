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

    let mut pairing = Pairing::default();
    let mut segment_sizes = Vec::new();
    let mut recorded_ops = Vec::new();
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
        let mut record = |action, size, addr| {
            recorded_ops.push(RecordedOp {
                at: pairing.events.len(),
                action,
                size,
                addr,
            })
        };
        match &*action {
            "alloc" => pairing.alloc(index, number("addr")?, number("size")?, number("stream")?),
            "free_requested" => pairing.free_requested(index, number("addr")?),
            "free_completed" => pairing.free(index, number("addr")?, Some(number("size")?)),
            "segment_alloc" => {
                segment_sizes.push(number("size")?);
                record(DeviceAction::SegmentAlloc, number("size")?, number("addr")?);
            }
            "segment_map" => {
                segment_sizes.push(number("size")?);
                record(DeviceAction::SegmentMap, number("size")?, number("addr")?);
            }
            "segment_free" => record(DeviceAction::SegmentFree, number("size")?, number("addr")?),
            "segment_unmap" => record(DeviceAction::SegmentUnmap, number("size")?, number("addr")?),
            "oom" => {
                let size = number("size")?;
                record(DeviceAction::Oom, size, 0);
                pairing.failed_alloc(size, number("stream")?);
            }
            _ => {}
        }
    }
    let mut trace = pairing.finish(name.to_string(), TraceSource::PytorchSnapshot, segment_sizes);
    trace.recorded_ops = recorded_ops;
    trace.allocator_settings = pickle
        .get(root, "allocator_settings")
        .and_then(|settings| match settings {
            Value::Str(text) => Some(text.to_string()),
            dict => ["PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"]
                .iter()
                .find_map(|key| match pickle.get(dict, key) {
                    Some(Value::Str(text)) => Some(text.to_string()),
                    _ => None,
                }),
        });
    Ok(trace)
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
    fn a_dict_without_traces_is_named() {
        // pickle.dumps({'segments': []}, protocol=4)
        let bytes = b"\x80\x04\x95\x11\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94s.";
        let err = import("x.pickle", bytes, None).unwrap_err().to_string();
        assert_eq!(err, "x.pickle: not a PyTorch memory snapshot: no 'device_traces' list");
    }
}
