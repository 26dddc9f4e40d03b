//! PyTorch memory snapshots (`torch.cuda.memory._snapshot()`, pickled).
//!
//! `device_traces[d]` lists the allocator's events. An `alloc` is a request; `free_requested`
//! is the program letting go (it stops counting as allocated) and `free_completed` the moment
//! PyTorch can hand the memory out again (work on other streams has finished). An `oom` is a
//! request that failed, replayed as a request. `segment_alloc`, `segment_free`, `segment_map`
//! and `segment_unmap` are the recording allocator's own device operations, kept to check a
//! model of it; `allocator_settings` names the `PYTORCH_ALLOC_CONF` it ran under.

use std::io::Read;

use super::pickle::{self, EventSink, Pickle, Value};
use super::{DeviceAction, Pairing, RecordedOp, Trace, TraceSource};
use crate::error::{Error, Result};

/// Opens the snapshot's bytes from the start, as often as asked (a file, or memory).
pub(super) type Opener<'a> = dyn Fn() -> Result<Box<dyn Read + 'a>> + 'a;

/// Reads a snapshot streaming, in two passes: the first finds which memo entries the pickle
/// reads back, the second puts each device's events into its trace as the pickle is read,
/// keeping only those entries. A pickle that refers back to a streamed event anyway is read
/// again whole.
pub(super) fn import(name: &str, open: &Opener<'_>, device: Option<usize>, limit: u64) -> Result<Trace> {
    import_with(name, open, device, limit, true)
}

/// [`import`], streaming or (`stream` false) decoding the whole pickle first.
fn import_with(name: &str, open: &Opener<'_>, device: Option<usize>, limit: u64, stream: bool) -> Result<Trace> {
    let mut builders: Vec<(SnapshotBuilder, usize)> = Vec::new();
    let mut failure: Option<String> = None;
    let pickle_error = |e: pickle::PickleError| Error::Invalid(format!("{name}: byte {}: {}", e.at, e.message));
    let streamed = if stream {
        let mut sink = |d: usize, pickle: &Pickle, event: &Value| -> std::result::Result<(), String> {
            if builders.len() <= d {
                builders.resize_with(d + 1, || (SnapshotBuilder::new(), 0));
            }
            let (builder, count) = &mut builders[d];
            *count += 1;
            if device.is_some_and(|wanted| wanted != d) {
                return Ok(());
            }
            push_event(builder, pickle, event, d).inspect_err(|what| failure = Some(what.clone()))
        };
        let sink: &mut EventSink<'_> = &mut sink;
        let reads = pickle::scan_reads(open()?, limit).map_err(pickle_error)?;
        Some(pickle::decode(open()?, limit, Some((sink, &reads))))
    } else {
        None
    };
    let schema = |what: &str| Error::Invalid(format!("{name}: not a PyTorch memory snapshot: {what}"));
    if let Some(what) = failure {
        return Err(schema(&what));
    }
    let pickle = match streamed {
        Some(Ok(pickle)) => pickle,
        Some(Err(e)) if !e.needs_whole => return Err(pickle_error(e)),
        // Not streamed, or streaming reached something it had forgotten: read it whole.
        _ => {
            builders.clear();
            pickle::decode(open()?, limit, None).map_err(pickle_error)?
        }
    };
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
    // Streamed devices left empty lists behind; a pickle read whole still holds its events.
    for (d, trace) in traces.iter().enumerate() {
        let events = pickle
            .items(trace)
            .ok_or_else(|| schema(&format!("device_traces[{d}] is not a list")))?;
        if events.is_empty() {
            continue;
        }
        if builders.len() <= d {
            builders.resize_with(d + 1, || (SnapshotBuilder::new(), 0));
        }
        let (builder, count) = &mut builders[d];
        *count += events.len();
        if device.is_none_or(|wanted| wanted == d) {
            for event in events {
                push_event(builder, &pickle, event, d).map_err(|what| schema(&what))?;
            }
        }
    }
    let device = match device {
        Some(d) if d < traces.len() => d,
        Some(d) => {
            return Err(Error::Invalid(format!(
                "{name}: --device {d}: the snapshot has devices 0..{}",
                traces.len().saturating_sub(1)
            )))
        }
        None => builders
            .iter()
            .position(|(_, count)| *count > 0)
            .ok_or_else(|| schema("every device trace is empty (was _record_memory_history on?)"))?,
    };
    let builder = if device < builders.len() {
        builders.swap_remove(device).0
    } else {
        SnapshotBuilder::new()
    };
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

/// One event of `device_traces[device]`, the builder's next, into it; what is wrong with it
/// otherwise, named by its place.
fn push_event(
    builder: &mut SnapshotBuilder,
    pickle: &Pickle,
    event: &Value,
    device: usize,
) -> std::result::Result<(), String> {
    let index = builder.index;
    let field = |key: &str| -> std::result::Result<&Value, String> {
        pickle
            .get(event, key)
            .ok_or_else(|| format!("device_traces[{device}][{index}] has no '{key}'"))
    };
    let number = |key: &str| -> std::result::Result<u64, String> {
        match field(key)? {
            Value::Int(v) => {
                u64::try_from(*v).map_err(|_| format!("device_traces[{device}][{index}].{key} = {v} is negative"))
            }
            other => Err(format!(
                "device_traces[{device}][{index}].{key} is {} not an integer",
                kind(pickle, other)
            )),
        }
    };
    let action = match field("action")? {
        Value::Str(s) => s.clone(),
        other => {
            return Err(format!(
                "device_traces[{device}][{index}].action is {}",
                kind(pickle, other)
            ))
        }
    };
    if SnapshotBuilder::wants(&action) {
        // An `oom` event names the device's free bytes where others name an address.
        let addr = if &*action == "oom" { 0 } else { number("addr")? };
        builder.push(&action, addr, number("size")?, number("stream")?);
    } else {
        builder.skip();
    }
    Ok(())
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

    fn import_bytes(name: &str, bytes: &'static [u8]) -> Result<Trace> {
        import(name, &|| Ok(Box::new(bytes)), None, u64::MAX)
    }

    /// Streaming gives the trace that decoding the whole pickle gives, on real snapshots.
    #[test]
    fn streaming_reads_what_the_whole_pickle_holds() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/traces");
        for file in ["resnet18_default.pickle", "resnet18_expandable.pickle"] {
            let bytes = std::fs::read(format!("{dir}/{file}")).unwrap();
            let open = || -> Result<Box<dyn Read + '_>> { Ok(Box::new(&bytes[..])) };
            let streamed = import_with(file, &open, None, u64::MAX, true).unwrap();
            let whole = import_with(file, &open, None, u64::MAX, false).unwrap();
            assert!(streamed.events.len() > 20_000, "{file}");
            assert_eq!(streamed.events, whole.events, "{file}");
            assert_eq!(streamed.recorded_ops, whole.recorded_ops, "{file}");
            assert_eq!(streamed.allocator_settings, whole.allocator_settings, "{file}");
            assert_eq!(streamed.segment_sizes, whole.segment_sizes, "{file}");
        }
    }

    #[test]
    fn private_pools_are_refused_by_name() {
        // pickle.dumps({'segments': [{'segment_pool_id': (1, 0)}], 'device_traces': [[]]}, protocol=4)
        let bytes = b"\x80\x04\x95;\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x08segments\x94]\x94}\x94\x8c\x0fsegment_pool_id\x94K\x01K\x00\x86\x94sa\x8c\rdevice_traces\x94]\x94]\x94au.";
        let err = import_bytes("g.pickle", bytes).unwrap_err().to_string();
        assert!(err.contains("private memory pool [1, 0]"), "{err}");
    }

    #[test]
    fn a_dict_without_traces_is_named() {
        // pickle.dumps({'segments': []}, protocol=4)
        let bytes = b"\x80\x04\x95\x11\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94s.";
        let err = import_bytes("x.pickle", bytes).unwrap_err().to_string();
        assert_eq!(err, "x.pickle: not a PyTorch memory snapshot: no 'device_traces' list");
    }
}
