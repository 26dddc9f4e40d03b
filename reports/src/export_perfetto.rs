//! Exports a replay in the Trace Event Format that ui.perfetto.dev and chrome://tracing open:
//! one process per policy, a counter track of allocated and reserved bytes, and instant events
//! for device allocations, frees, mappings, synchronising retries and out-of-memory, and for the
//! phases the program marked (a snapshot's `external_annotations`).

use std::path::Path;

use experiments::{write_atomically, ReplayRecord};
use serde_json::{json, Value};

use crate::error::Result;

/// The Trace Event Format document for `record` (its results must carry `replayed` events for
/// the instants; their timelines give the counters). Time is the trace event's index.
pub fn perfetto_json(record: &ReplayRecord) -> Value {
    let mut events = Vec::new();
    for (i, result) in record.results.iter().enumerate() {
        let pid = i + 1;
        events.push(json!({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": result.policy}}));
        events.push(json!({"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"sort_index": i}}));
        for point in &result.timeline {
            events.push(json!({
                "ph": "C", "name": "memory (bytes)", "pid": pid, "ts": point.event,
                "args": {"allocated": point.allocated, "reserved": point.reserved},
            }));
        }
        let replayed = result.replayed.iter().flat_map(|r| &r.events);
        for e in replayed.filter(|e| !e.action.is_block()) {
            events.push(json!({
                "ph": "i", "s": "p", "name": e.action.name(), "pid": pid, "tid": 0, "ts": e.at,
                "args": {"bytes": e.size, "addr": format!("{:#x}", e.addr), "stream": e.stream},
            }));
        }
        // The phases the program marked (its snapshot's `external_annotations`), where its
        // events are: `START Optimizer.step#AdamW.step` and its `END`.
        for a in result.replayed.iter().flat_map(|r| &r.annotations) {
            let name = if a.stage.is_empty() {
                a.name.clone()
            } else {
                format!("{} {}", a.stage, a.name)
            };
            events.push(json!({
                "ph": "i", "s": "p", "name": name, "cat": "annotation", "pid": pid, "tid": 0, "ts": a.at,
                "args": {"stage": a.stage, "annotation": a.name, "time_us": a.time_us},
            }));
        }
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "producer": "vramlab replay",
            "trace": record.trace,
            "time": "the trace event's index (a replay has no clock): 1 us = 1 event",
        },
    })
}

/// Writes [`perfetto_json`] to `path` (through a temporary file).
pub fn write_perfetto(path: &Path, record: &ReplayRecord) -> Result<()> {
    let text = serde_json::to_vec(&perfetto_json(record)).expect("plain JSON values serialise");
    write_atomically(path, &text)?;
    Ok(())
}
