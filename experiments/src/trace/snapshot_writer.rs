//! Writes a replay as a PyTorch memory snapshot (`segments`, `device_traces` and, where the
//! trace had them, the program's `external_annotations`, pickled), so a what-if replay opens in
//! PyTorch's memory_viz next to the real one. The pickle holds plain
//! data only (dicts, lists, strings, integers, booleans, None, tuples), protocol 2.

use std::path::Path;

use crate::error::Result;
use crate::files::write_atomically;
use crate::pytorch::TraceAction;
use crate::replay_record::ReplayedTrace;

/// A pickle being written: opcodes appended to a buffer.
pub(super) struct PickleWriter {
    out: Vec<u8>,
}

impl PickleWriter {
    pub(super) fn new() -> PickleWriter {
        PickleWriter { out: vec![0x80, 2] }
    }

    pub(super) fn str(&mut self, text: &str) {
        self.out.push(b'X');
        self.out.extend_from_slice(&(text.len() as u32).to_le_bytes());
        self.out.extend_from_slice(text.as_bytes());
    }

    pub(super) fn int(&mut self, value: u64) {
        if value <= i32::MAX as u64 {
            self.out.push(b'J');
            self.out.extend_from_slice(&(value as i32).to_le_bytes());
        } else {
            // LONG1: little-endian two's complement, with a zero byte so it reads as positive.
            let mut bytes = value.to_le_bytes().to_vec();
            while bytes.len() > 1 && bytes[bytes.len() - 1] == 0 && bytes[bytes.len() - 2] & 0x80 == 0 {
                bytes.pop();
            }
            if bytes[bytes.len() - 1] & 0x80 != 0 {
                bytes.push(0);
            }
            self.out.push(0x8a);
            self.out.push(bytes.len() as u8);
            self.out.extend_from_slice(&bytes);
        }
    }

    /// A signed integer (pool ids): BININT where it fits, else LONG1.
    pub(super) fn signed(&mut self, value: i64) {
        match i32::try_from(value) {
            Ok(small) => {
                self.out.push(b'J');
                self.out.extend_from_slice(&small.to_le_bytes());
            }
            Err(_) => {
                self.out.push(0x8a);
                self.out.push(8);
                self.out.extend_from_slice(&value.to_le_bytes());
            }
        }
    }

    pub(super) fn bool(&mut self, value: bool) {
        self.out.push(if value { 0x88 } else { 0x89 });
    }

    /// A dict: `fill` writes key, value pairs with [`PickleWriter::entry`].
    pub(super) fn dict(&mut self, fill: impl FnOnce(&mut PickleWriter)) {
        self.out.push(b'}');
        self.out.push(b'(');
        fill(self);
        self.out.push(b'u');
    }

    pub(super) fn entry(&mut self, key: &str, value: impl FnOnce(&mut PickleWriter)) {
        self.str(key);
        value(self);
    }

    /// A list of `items`, each written by `item`.
    pub(super) fn list<T>(&mut self, items: &[T], mut item: impl FnMut(&mut PickleWriter, &T)) {
        self.out.push(b']');
        for chunk in items.chunks(1000) {
            self.out.push(b'(');
            for x in chunk {
                item(self, x);
            }
            self.out.push(b'e');
        }
    }

    pub(super) fn finish(mut self) -> Vec<u8> {
        self.out.push(b'.');
        self.out
    }
}

/// The bytes of a snapshot of `replayed` on device 0, recorded under `settings`.
pub fn snapshot_bytes(replayed: &ReplayedTrace, settings: Option<&str>) -> Vec<u8> {
    let mut w = PickleWriter::new();
    w.dict(|w| {
        w.entry("segments", |w| {
            w.list(&replayed.segments, |w, seg| {
                let total: u64 = seg.blocks.iter().map(|b| b.size).sum();
                let allocated: u64 = seg
                    .blocks
                    .iter()
                    .filter(|b| b.state == "active_allocated")
                    .map(|b| b.size)
                    .sum();
                let active: Vec<_> = seg.blocks.iter().filter(|b| b.state != "inactive").collect();
                w.dict(|w| {
                    w.entry("device", |w| w.int(0));
                    w.entry("address", |w| w.int(seg.address));
                    w.entry("total_size", |w| w.int(total));
                    w.entry("allocated_size", |w| w.int(allocated));
                    w.entry("active_size", |w| w.int(active.iter().map(|b| b.size).sum()));
                    w.entry("requested_size", |w| {
                        w.int(active.iter().map(|b| b.requested_size).sum())
                    });
                    w.entry("stream", |w| w.int(seg.stream));
                    w.entry("segment_type", |w| w.str(if seg.is_large { "large" } else { "small" }));
                    let (first, second) = seg
                        .pool
                        .checked_sub(1)
                        .and_then(|k| replayed.pools.get(k as usize))
                        .copied()
                        .unwrap_or((0, 0));
                    w.entry("segment_pool_id", |w| {
                        w.signed(first);
                        w.signed(second);
                        w.out.push(0x86);
                    });
                    w.entry("is_expandable", |w| w.bool(seg.is_expandable));
                    w.entry("frames", |w| w.list::<u8>(&[], |_, _| {}));
                    w.entry("blocks", |w| {
                        w.list(&seg.blocks, |w, b| {
                            w.dict(|w| {
                                w.entry("address", |w| w.int(b.address));
                                w.entry("size", |w| w.int(b.size));
                                w.entry("requested_size", |w| w.int(b.requested_size));
                                w.entry("state", |w| w.str(&b.state));
                                w.entry("frames", |w| w.list::<u8>(&[], |_, _| {}));
                            })
                        })
                    });
                })
            })
        });
        w.entry("device_traces", |w| {
            w.list(&[()], |w, _| {
                // `retry` marks are vramlab's own (for the Perfetto export), not PyTorch actions.
                let events: Vec<_> = replayed
                    .events
                    .iter()
                    .filter(|e| e.action != TraceAction::Retry)
                    .collect();
                w.list(&events, |w, e| {
                    w.dict(|w| {
                        w.entry("action", |w| w.str(e.action.name()));
                        if e.action == TraceAction::Oom {
                            w.entry("device_free", |w| w.int(e.addr));
                        } else {
                            w.entry("addr", |w| w.int(e.addr));
                        }
                        w.entry("size", |w| w.int(e.size));
                        w.entry("stream", |w| w.int(e.stream));
                        // No clock in a replay: the trace event's index stands in for the time.
                        w.entry("time_us", |w| w.int(e.at as u64));
                        w.entry("frames", |w| w.list::<u8>(&[], |_, _| {}));
                    })
                })
            })
        });
        // The program's marks, on the replay's clock (PyTorch writes none where there are
        // none, and neither does this): a `START` at its event's index, so that it comes before
        // that event, an `END` at the one before, so that it comes after it (as the reader places
        // them).
        if !replayed.annotations.is_empty() {
            w.entry("external_annotations", |w| {
                w.list(&replayed.annotations, |w, a| {
                    w.dict(|w| {
                        w.entry("stage", |w| w.str(&a.stage));
                        w.entry("name", |w| w.str(&a.name));
                        w.entry("device", |w| w.int(0));
                        let time = if a.stage == "START" {
                            a.at
                        } else {
                            a.at.saturating_sub(1)
                        };
                        w.entry("time_us", |w| w.int(time as u64));
                    })
                })
            });
        }
        if let Some(settings) = settings {
            w.entry("allocator_settings", |w| {
                w.dict(|w| w.entry(super::snapshot::SETTINGS_KEYS[1], |w| w.str(settings)))
            });
        }
    });
    w.finish()
}

/// Writes [`snapshot_bytes`] to `path` (through a temporary file).
pub fn write_snapshot(path: &Path, replayed: &ReplayedTrace, settings: Option<&str>) -> Result<()> {
    write_atomically(path, &snapshot_bytes(replayed, settings))
}
