//! A reader for the plain-data subset of Python's pickle format (protocols 2 to 5).
//!
//! PyTorch memory snapshots are pickled dicts, lists, strings and numbers. Reading them needs no
//! Python object model, and must not have one: a pickle that names a class or a function is
//! refused, so a trace file can never run code.
//!
//! The input is read as a stream, through a window of a few megabytes, and a snapshot's device
//! traces are handed over event by event as the pickle builds them ([`EventSink`]). A first pass
//! ([`scan_reads`]) finds which memo entries the pickle reads back; the second makes no memo
//! entry nothing reads, and forgets each batch of events (the pickler appends them 1,000 at a
//! time) once the sink has it, unless a container made in the batch is read back (Python's
//! pickler shares equal objects, such as stack frames, through its memo). Should a forgotten
//! container be reached anyway (a pickle that fills an older container from inside a batch),
//! decoding stops with [`PickleError::needs_whole`] and the caller decodes again keeping
//! everything.

use std::io::Read;
use std::rc::Rc;

use rustc_hash::FxHashMap as HashMap;

/// One pickled value. Containers live in the [`Pickle`]'s arena and are named by index, so the
/// memo can share them the way Python does (a dict filled after it was memoised stays one dict).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    List(Ref),
    Tuple(Ref),
    Dict(Ref),
    /// The class `collections.OrderedDict`, the one class this reader knows: calling it with
    /// no arguments (REDUCE, as Python pickles an `OrderedDict`) makes an empty dict, whose
    /// items SETITEMS then adds. Snapshots a program builds with `OrderedDict`s are read as the
    /// dicts they are.
    OrderedDictClass,
    /// An event dict the fast path read ([`Fast`]): on the stack only, between its batch's MARK
    /// and APPENDS; anything else that reaches the stack first makes it a [`Value::Dict`].
    Event(u32),
}

/// A container of the arena: its slot, and the generation it was made in (a slot a streamed
/// batch gave back is used again by later containers, of a later generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ref {
    slot: u32,
    generation: u32,
}

/// A decoded pickle: the root value and the containers it refers to.
#[derive(Debug, Default)]
pub(crate) struct Pickle {
    lists: Vec<(u32, Vec<Value>)>,
    dicts: Vec<(u32, Vec<(Value, Value)>)>,
    /// Bumped each time a streamed batch is forgotten.
    generation: u32,
    /// For dicts of many entries: string key -> the entry holding it (the last, as in Python),
    /// so a wide dict referenced many times over is not searched entry by entry each time.
    indexes: HashMap<u32, HashMap<Rc<str>, usize>>,
    /// The root value.
    pub(crate) root: Option<Value>,
    /// The lists of devices whose traces were streamed to the sink: a snapshot's events are
    /// those of the one list its root dict names `device_traces` (the last such key, as in
    /// Python), and nothing else may have been streamed.
    pub(crate) streamed_into: Vec<Ref>,
    /// Values the arena holds: each container counts one, a list item one, a dict entry two.
    held: u64,
}

impl Pickle {
    /// The items of a list or tuple.
    pub(crate) fn items(&self, value: &Value) -> Option<&[Value]> {
        match value {
            Value::List(r) | Value::Tuple(r) => self.list(*r),
            _ => None,
        }
    }

    /// Whether Python could use `value` as a dict key: lists and dicts cannot be, nor tuples
    /// holding them (a key nested deeper than Python's own recursion allows is refused too).
    fn hashable(&self, value: &Value, depth: u32) -> bool {
        match value {
            Value::List(_) | Value::Dict(_) => false,
            Value::Tuple(r) => {
                depth < 1000
                    && self
                        .list(*r)
                        .is_some_and(|items| items.iter().all(|v| self.hashable(v, depth + 1)))
            }
            _ => true,
        }
    }

    fn list(&self, r: Ref) -> Option<&[Value]> {
        self.lists
            .get(r.slot as usize)
            .filter(|(generation, _)| *generation == r.generation)
            .map(|(_, items)| items.as_slice())
    }

    fn list_mut(&mut self, r: Ref) -> Option<&mut Vec<Value>> {
        self.lists
            .get_mut(r.slot as usize)
            .filter(|(generation, _)| *generation == r.generation)
            .map(|(_, items)| items)
    }

    fn dict_mut(&mut self, r: Ref) -> Option<&mut Vec<(Value, Value)>> {
        self.dicts
            .get_mut(r.slot as usize)
            .filter(|(generation, _)| *generation == r.generation)
            .map(|(_, entries)| entries)
    }

    fn new_list(&mut self, items: Vec<Value>) -> Ref {
        self.held += 1 + items.len() as u64;
        self.lists.push((self.generation, items));
        Ref {
            slot: (self.lists.len() - 1) as u32,
            generation: self.generation,
        }
    }

    fn new_dict(&mut self, entries: Vec<(Value, Value)>) -> Ref {
        self.held += 1 + 2 * entries.len() as u64;
        self.dicts.push((self.generation, entries));
        Ref {
            slot: (self.dicts.len() - 1) as u32,
            generation: self.generation,
        }
    }

    /// The value stored under a string key of a dict (the last assignment, as in Python).
    pub(crate) fn get(&self, value: &Value, key: &str) -> Option<&Value> {
        let Value::Dict(r) = value else { return None };
        let (generation, entries) = self.dicts.get(r.slot as usize)?;
        if *generation != r.generation {
            return None;
        }
        match self.indexes.get(&r.slot) {
            Some(index) => index.get(key).map(|&at| &entries[at].1),
            None => entries
                .iter()
                .rev()
                .find(|(k, _)| matches!(k, Value::Str(s) if &**s == key))
                .map(|(_, v)| v),
        }
    }

    /// Indexes every dict of more than a few entries by its string keys.
    fn index_wide_dicts(&mut self) {
        const WIDE: usize = 16;
        for (slot, (_, entries)) in self.dicts.iter().enumerate().filter(|(_, (_, e))| e.len() > WIDE) {
            let index = entries
                .iter()
                .enumerate()
                .filter_map(|(at, (k, _))| match k {
                    Value::Str(s) => Some((s.clone(), at)),
                    _ => None,
                })
                .collect();
            self.indexes.insert(slot as u32, index);
        }
    }

    /// Gives back every container made since `mark` (a streamed batch, read and done with).
    fn forget_since(&mut self, mark: &Mark) {
        let lists: usize = self.lists[mark.lists.min(self.lists.len())..]
            .iter()
            .map(|(_, l)| 1 + l.len())
            .sum();
        let dicts: usize = self.dicts[mark.dicts.min(self.dicts.len())..]
            .iter()
            .map(|(_, d)| 1 + 2 * d.len())
            .sum();
        self.held = self.held.saturating_sub((lists + dicts) as u64);
        self.lists.truncate(mark.lists);
        self.dicts.truncate(mark.dicts);
        self.generation = self.generation.wrapping_add(1);
    }
}

/// Why a pickle could not be read; `at` is the byte offset of the opcode at fault.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PickleError {
    pub(crate) at: u64,
    pub(crate) message: String,
    /// Streaming forgot something the pickle refers to later: decode again keeping everything.
    pub(crate) needs_whole: bool,
}

/// Where the events of a snapshot's device traces go as they are read: `device` is the index
/// in `device_traces`, `event` the item (valid only during the call).
pub(crate) type EventSink<'s> = dyn FnMut(usize, Event<'_>) -> Result<(), String> + 's;

/// One item of a device's trace as the sink sees it: a value of the pickle, or an event dict
/// the fast path read, with where among the values the last assignment of each of [`FIELDS`] is.
#[derive(Clone, Copy)]
pub(crate) enum Event<'a> {
    Value(&'a Pickle, &'a Value),
    Fields(&'a Pickle, &'a [Value], &'a [u32; FIELDS.len()]),
}

/// The keys the snapshot reader asks an event for, found as the fast path reads each event.
pub(crate) const FIELDS: [&str; 6] = ["action", "addr", "size", "stream", "device_free", "time_us"];
/// Places in [`FIELDS`].
pub(crate) const ACTION: usize = 0;
/// See [`ACTION`].
pub(crate) const ADDR: usize = 1;
/// See [`ACTION`].
pub(crate) const SIZE: usize = 2;
/// See [`ACTION`].
pub(crate) const STREAM: usize = 3;
/// See [`ACTION`].
pub(crate) const DEVICE_FREE: usize = 4;
/// See [`ACTION`].
pub(crate) const TIME_US: usize = 5;

/// No entry holds the field.
pub(crate) const ABSENT: u32 = u32::MAX;

impl<'a> Event<'a> {
    /// The pickle the event's values refer to.
    pub(crate) fn pickle(&self) -> &'a Pickle {
        match *self {
            Event::Value(pickle, _) | Event::Fields(pickle, ..) => pickle,
        }
    }

    /// Whether the item is a dict.
    pub(crate) fn is_dict(&self) -> bool {
        matches!(self, Event::Fields(..) | Event::Value(_, Value::Dict(_)))
    }

    /// The value of a string key, one of [`FIELDS`] (the last assignment, as in Python), as
    /// [`Pickle::get`].
    #[cfg(test)]
    pub(crate) fn get(&self, key: &str) -> Option<&'a Value> {
        match *self {
            Event::Value(pickle, value) => pickle.get(value, key),
            Event::Fields(_, values, fields) => {
                let field = FIELDS.iter().position(|f| *f == key);
                debug_assert!(field.is_some(), "{key} is not among FIELDS");
                values.get(fields[field?] as usize)
            }
        }
    }

    /// The value of `FIELDS[field]` (the last assignment, as in Python).
    #[inline]
    pub(crate) fn field(&self, field: usize) -> Option<&'a Value> {
        match *self {
            Event::Value(pickle, value) => pickle.get(value, FIELDS[field]),
            Event::Fields(_, values, fields) => values.get(fields[field] as usize),
        }
    }

    /// The item as a value of its pickle (an event the fast path read has none).
    pub(crate) fn value(&self) -> Option<&'a Value> {
        match *self {
            Event::Value(_, value) => Some(value),
            Event::Fields(..) => None,
        }
    }
}

/// The values a pickle may build unless `VRAMLAB_MAX_PICKLE_VALUES` says more: about 4 GiB of
/// them. A real snapshot read whole builds about one value for every 3-4 bytes, and streamed,
/// far fewer (its events are not kept); a pickle of memo references or empty lists builds one
/// for every 1-2 bytes, so no ratio to the input tells them apart: a budget in memory does.
pub(crate) const DEFAULT_MAX_VALUES: u64 = 128 << 20;

/// Memory a value takes: the enum itself, or its share of a dict entry or an arena slot.
const VALUE_BYTES: u64 = std::mem::size_of::<Value>() as u64;

/// Bytes read from the source at a time.
const WINDOW: usize = 4 << 20;

/// Bytes the window holds at least, where the input has them, when an event is read without the
/// opcodes (an event of the usual shape takes a few hundred).
const EDGE: usize = 64 << 10;

struct Reader<R> {
    source: R,
    buf: Vec<u8>,
    /// The unread bytes are `buf[lo..hi]`; `buf[lo]` is byte `pos` of the input.
    lo: usize,
    hi: usize,
    pos: u64,
    op_at: u64,
    eof: bool,
    /// The most bytes the input may hold.
    limit: u64,
}

impl<R: Read> Reader<R> {
    fn new(source: R, limit: u64) -> Self {
        Reader {
            source,
            buf: Vec::new(),
            lo: 0,
            hi: 0,
            pos: 0,
            op_at: 0,
            eof: false,
            limit,
        }
    }

    /// Reads until `n` bytes are unread or the input ends.
    #[cold]
    #[inline(never)]
    fn fill(&mut self, n: usize) -> Result<(), PickleError> {
        if self.hi - self.lo >= n || self.eof {
            return Ok(());
        }
        self.buf.copy_within(self.lo..self.hi, 0);
        self.hi -= self.lo;
        self.lo = 0;
        while self.hi < n {
            if self.hi == self.buf.len() {
                // Grows with what arrives, so a length field larger than the input cannot make
                // it ask for that much memory up front.
                let grown = (self.buf.len() * 2).clamp(WINDOW, n.max(WINDOW));
                self.buf.resize(grown, 0);
            }
            let read = self.source.read(&mut self.buf[self.hi..]).map_err(|e| PickleError {
                at: self.pos,
                message: format!("reading byte {}: {e}", self.pos + self.hi as u64),
                needs_whole: false,
            })?;
            if read == 0 {
                self.eof = true;
                break;
            }
            self.hi += read;
            if self.pos + self.hi as u64 > self.limit {
                return Err(self.error(format!(
                    "larger than {} (set VRAMLAB_MAX_TRACE_BYTES to read more)",
                    crate::units::format_bytes(self.limit)
                )));
            }
        }
        Ok(())
    }

    #[inline]
    fn take(&mut self, n: usize) -> Result<&[u8], PickleError> {
        if self.hi - self.lo < n {
            self.fill(n)?;
        }
        if self.hi - self.lo < n {
            return Err(self.error(format!(
                "truncated pickle: needs {n} more bytes at byte {}, the file has {}",
                self.pos,
                self.pos + (self.hi - self.lo) as u64
            )));
        }
        let start = self.lo;
        self.lo += n;
        self.pos += n as u64;
        Ok(&self.buf[start..start + n])
    }

    /// Fails as [`Reader::take`] would where fewer than `n` bytes follow, taking none.
    fn require(&mut self, n: usize) -> Result<(), PickleError> {
        self.fill(n)?;
        if self.hi - self.lo < n {
            return Err(self.error(format!(
                "truncated pickle: a frame of {n} bytes at byte {}, the file has {}",
                self.pos,
                self.pos + (self.hi - self.lo) as u64
            )));
        }
        Ok(())
    }

    #[inline]
    fn at_end(&mut self) -> Result<bool, PickleError> {
        if self.hi == self.lo {
            self.fill(1)?;
        }
        Ok(self.hi == self.lo)
    }

    #[inline]
    fn u8(&mut self) -> Result<u8, PickleError> {
        if self.hi > self.lo {
            let b = self.buf[self.lo];
            self.lo += 1;
            self.pos += 1;
            return Ok(b);
        }
        Ok(self.take(1)?[0])
    }

    #[inline]
    fn uint(&mut self, n: usize) -> Result<u64, PickleError> {
        let bytes = self.take(n)?;
        Ok(bytes.iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn length(&mut self, n: usize) -> Result<usize, PickleError> {
        let len = self.uint(n)?;
        usize::try_from(len).map_err(|_| self.error(format!("length {len} does not fit in memory")))
    }

    /// A line of GLOBAL's argument (a module or a name), without its newline: at most 256
    /// bytes, UTF-8.
    fn line(&mut self) -> Result<String, PickleError> {
        let mut bytes = Vec::new();
        loop {
            match self.take(1)?[0] {
                b'\n' => break,
                _ if bytes.len() == 256 => return Err(self.error("a GLOBAL name longer than 256 bytes".into())),
                b => bytes.push(b),
            }
        }
        String::from_utf8(bytes).map_err(|_| self.error("a GLOBAL name is not valid UTF-8".into()))
    }

    fn text(&mut self, n: usize) -> Result<Rc<str>, PickleError> {
        let text = std::str::from_utf8(self.take(n)?).map(Rc::from).ok();
        text.ok_or_else(|| self.error("string is not valid UTF-8".to_string()))
    }
}

impl<R> Reader<R> {
    fn error(&self, message: String) -> PickleError {
        PickleError {
            at: self.op_at,
            message,
            needs_whole: false,
        }
    }
}

/// The memo: keys below 256 (those BINGET reads) in a table, the rest hashed; each value with
/// the place among [`FIELDS`] of the key it is, where it is one (found once, not at each read).
#[derive(Default)]
struct Memo {
    small: Vec<Option<(Value, Option<usize>)>>,
    small_len: usize,
    large: HashMap<u64, (Value, Option<usize>)>,
}

/// The place among [`FIELDS`] of a string.
fn field_of(value: &Value) -> Option<usize> {
    match value {
        Value::Str(s) => FIELDS.iter().position(|f| **f == **s),
        _ => None,
    }
}

impl Memo {
    #[inline]
    fn get_field(&self, key: u64) -> Option<(&Value, Option<usize>)> {
        let entry = if key < 256 {
            self.small.get(key as usize)?.as_ref()
        } else {
            self.large.get(&key)
        };
        entry.map(|(value, field)| (value, *field))
    }

    #[inline]
    fn get(&self, key: u64) -> Option<&Value> {
        self.get_field(key).map(|(value, _)| value)
    }

    fn insert(&mut self, key: u64, value: Value) {
        let field = field_of(&value);
        let entry = (value, field);
        if key < 256 {
            if self.small.is_empty() {
                self.small.resize(256, None);
            }
            let slot = &mut self.small[key as usize];
            self.small_len += usize::from(slot.is_none());
            *slot = Some(entry);
        } else {
            self.large.insert(key, entry);
        }
    }

    fn len(&self) -> usize {
        self.small_len + self.large.len()
    }
}

/// Where a MARK was set: the stack's length then, and (for streaming) how far the memo and the
/// arenas had come, so that a batch of events can be forgotten whole once it is read.
#[derive(Clone, Copy)]
struct Mark {
    stack: usize,
    memo: u64,
    lists: usize,
    dicts: usize,
}

/// Memo keys a pickle reads back (BINGET / LONG_BINGET), found by a first pass over its
/// opcodes that builds nothing: what streaming must keep; everything else it may forget.
#[derive(Debug, Default)]
pub(crate) struct ReadKeys {
    bits: Vec<u64>,
    /// Keys far beyond any the pickle could have made one by one (an explicit LONG_BINPUT key):
    /// a bitmap reaching them would cost memory out of all proportion to the input.
    sparse: rustc_hash::FxHashSet<u64>,
}

impl ReadKeys {
    /// `read_so_far` bounds the keys MEMOIZE could have numbered (one per byte at most).
    fn insert(&mut self, key: u64, read_so_far: u64) {
        if key > read_so_far.saturating_add(4096) {
            self.sparse.insert(key);
            return;
        }
        let word = (key / 64) as usize;
        if self.bits.len() <= word {
            self.bits.resize(word + 1, 0);
        }
        self.bits[word] |= 1 << (key % 64);
    }

    fn contains(&self, key: u64) -> bool {
        self.bits
            .get((key / 64) as usize)
            .is_some_and(|w| w & (1 << (key % 64)) != 0)
            || (!self.sparse.is_empty() && self.sparse.contains(&key))
    }
}

/// The first pass: every memo key the pickle reads. It stops quietly at anything it does not
/// know (the second pass reports it) and fails only where reading fails.
pub(crate) fn scan_reads(source: impl Read, limit: u64) -> Result<ReadKeys, PickleError> {
    let mut reader = Reader::new(source, limit);
    let mut keys = ReadKeys::default();
    loop {
        // The opcodes wholly inside the window, read from it directly; the rest (one at the
        // window's edge, a long string, STOP, an opcode it does not know) one by one below.
        let window = &reader.buf[reader.lo..reader.hi];
        let mut i = 0;
        while let Some(&op) = window.get(i) {
            let u32_at = |at: usize| {
                window
                    .get(at..at + 4)
                    .map(|b| u32::from_le_bytes(b.try_into().unwrap_or([0; 4])))
            };
            let len = match op {
                b'h' if i + 2 <= window.len() => {
                    keys.insert(u64::from(window[i + 1]), reader.pos + i as u64 + 2);
                    2
                }
                b'j' => match u32_at(i + 1) {
                    Some(key) => {
                        keys.insert(u64::from(key), reader.pos + i as u64 + 5);
                        5
                    }
                    None => break,
                },
                0x80 | b'K' | b'q' => 2,
                b'M' => 3,
                b'J' | b'r' => 5,
                0x95 | b'G' => 9,
                0x8a | 0x8c | b'C' => match window.get(i + 1) {
                    Some(&n) => 2 + usize::from(n),
                    None => break,
                },
                0x8b | b'X' | b'B' => match u32_at(i + 1) {
                    Some(n) => 5 + n as usize,
                    None => break,
                },
                op if takes_no_argument(op) => 1,
                _ => break,
            };
            if i + len > window.len() {
                break;
            }
            i += len;
        }
        reader.lo += i;
        reader.pos += i as u64;
        if reader.at_end()? {
            break;
        }
        let skip = match reader.u8()? {
            b'h' => {
                let key = reader.uint(1)?;
                keys.insert(key, reader.pos);
                0
            }
            b'j' => {
                let key = reader.uint(4)?;
                keys.insert(key, reader.pos);
                0
            }
            0x80 | b'K' | b'q' => 1,
            b'M' => 2,
            b'J' | b'r' => 4,
            0x95 | b'G' => 8,
            0x8a | 0x8c | b'C' => reader.uint(1)? as usize,
            0x8b | b'X' | b'B' => reader.uint(4)? as usize,
            0x8d | 0x8e => reader.length(8)?,
            b'c' => {
                reader.line()?;
                reader.line()?;
                0
            }
            b'.' => break,
            op if takes_no_argument(op) => 0,
            _ => break,
        };
        reader.take(skip)?;
    }
    Ok(keys)
}

/// Decodes a pickle of plain data read from `source` (at most `limit` bytes). With a `sink`
/// (and the keys [`scan_reads`] found), the events of a snapshot's `device_traces` go to it
/// batch by batch and are not kept (the device lists come out empty): a memo entry nothing
/// reads is never made, and a batch none of whose containers is read back is forgotten whole.
/// Without one, everything is kept.
pub(crate) fn decode(
    source: impl Read,
    limit: u64,
    max_values: u64,
    mut sink: Option<(&mut EventSink<'_>, &ReadKeys)>,
) -> Result<Pickle, PickleError> {
    let mut out = Pickle::default();
    let mut reader = Reader::new(source, limit);
    let mut stack: Vec<Value> = Vec::new();
    let mut marks: Vec<Mark> = Vec::new();
    let mut memo = Memo::default();
    let mut memo_next: u64 = 0;
    let mut fast = Fast::default();
    // Where the current frame ends (a byte of the file): an opcode may not run past it, as
    // Python's unpickler reads a frame whole and then its opcodes from it.
    let mut frame_end: Option<u64> = None;

    loop {
        if reader.at_end()? {
            return Err(PickleError {
                at: reader.pos,
                message: format!("truncated pickle: no STOP opcode before the end ({} bytes)", reader.pos),
                needs_whole: false,
            });
        }
        // Every opcode makes at most one value, so checking before each bounds what is built.
        let values = out.held + fast.held + (stack.len() + marks.len() + memo.len()) as u64;
        if values > max_values {
            return Err(reader.error(format!(
                "the pickle builds more than {max_values} values (about {} of memory) by byte {} (set VRAMLAB_MAX_PICKLE_VALUES to allow more)",
                crate::units::format_bytes(max_values.saturating_mul(VALUE_BYTES)),
                reader.pos
            )));
        }
        reader.op_at = reader.pos;
        match frame_end {
            Some(end) if reader.pos == end => frame_end = None,
            Some(end) if reader.pos > end => return Err(past_frame(&reader, end)),
            _ => {}
        }
        // A device's event, streamed, read without the opcodes where it has the usual shape.
        if let Some((_, reads)) = sink.as_ref() {
            if reader.hi > reader.lo
                && reader.buf[reader.lo] == b'}'
                && marks
                    .last()
                    .is_some_and(|m| device_trace(&out, &stack[..m.stack.min(stack.len())]).is_some())
            {
                // Only what the window holds: an event at its edge goes to the opcodes, which
                // read on as they always have (so a failing read fails where it did).
                // An opcode makes two values at most (a container, and its place on the
                // stack): an event of no more than half the room left cannot pass the budget.
                let room = usize::try_from((max_values - values) / 2).unwrap_or(usize::MAX);
                // An event cut by the window's edge is read once the window has moved on:
                // falling to the opcodes would make every event of the batch so far the
                // arena's (a third of a 10 M-event snapshot's, at 4 MiB windows).
                if reader.hi - reader.lo < EDGE && !reader.eof {
                    reader.fill(EDGE)?;
                }
                let bytes = &reader.buf[reader.lo..reader.hi.min(reader.lo.saturating_add(room))];
                let mut frame = frame_end.map(|end| (end - reader.pos) as usize);
                if let Some(used) = fast_event(bytes, &mut memo, &mut memo_next, reads, &mut fast, &mut frame) {
                    frame_end = frame.map(|end| reader.pos + end as u64);
                    reader.lo += used;
                    reader.pos += used as u64;
                    stack.push(Value::Event(fast.events.len() as u32 - 1));
                    continue;
                }
            }
        }
        let op = reader.u8()?;
        if !fast.events.is_empty() {
            // Only the batch's APPENDS (and FRAME, which touches nothing) take events as they are.
            let appends = op == b'e'
                && sink.is_some()
                && marks
                    .last()
                    .is_some_and(|m| device_trace(&out, &stack[..m.stack.min(stack.len())]).is_some());
            if !appends && op != 0x95 {
                fast.materialise(&mut out, &mut stack, &memo);
            }
        }
        // A MARK starts a new stack in Python's unpickler: what lies below it cannot be taken,
        // memoised or appended to until the mark is popped ("unexpected MARK found").
        let fence = |k: usize| marks.len().checked_sub(k).map_or(0, |i| marks[i].stack);
        let below_mark = match op {
            0x94 | b'q' | b'r' | b'2' | 0x85 => stack.len() < fence(1) + 1,
            0x86 | b'a' => stack.len() < fence(1) + 2,
            0x87 | b's' => stack.len() < fence(1) + 3,
            // The list or dict the marked items go to lies between the two last marks.
            b'e' | b'u' => fence(1) < fence(2) + 1,
            _ => false,
        };
        if below_mark && !marks.is_empty() {
            return Err(reader.error(format!(
                "opcode 0x{op:02x} takes a value from below a MARK (Python: unexpected MARK found)"
            )));
        }
        match op {
            0x80 => {
                let proto = reader.u8()?;
                if !(2..=5).contains(&proto) {
                    return Err(reader.error(format!("pickle protocol {proto} is not supported (2 to 5 are)")));
                }
            }
            0x95 => {
                // Python's unpickler reads a frame whole: one that claims more bytes than follow
                // is "pickle data was truncated", wherever the STOP is.
                if let Some(end) = frame_end {
                    return Err(reader.error(format!(
                        "a frame begins at byte {} before the frame ending at byte {end} ends (Python: beginning of a new frame before end of current frame)",
                        reader.op_at
                    )));
                }
                let len = reader.length(8)?;
                reader.require(len)?;
                frame_end = Some(reader.pos + len as u64);
            }
            b'.' => {
                if let Some(end) = frame_end.filter(|&end| reader.pos > end) {
                    return Err(past_frame(&reader, end));
                }
                let root = stack
                    .pop()
                    .ok_or_else(|| reader.error("STOP with an empty stack".into()))?;
                out.root = Some(root);
                out.index_wide_dicts();
                return Ok(out);
            }
            b'(' => marks.push(Mark {
                stack: stack.len(),
                memo: memo_next,
                lists: out.lists.len(),
                dicts: out.dicts.len(),
            }),
            b'}' => {
                let r = out.new_dict(Vec::new());
                stack.push(Value::Dict(r));
            }
            0x8f..=0x91 => {
                // Python's sets hash and merge their items, and take ADDITEMS where a list takes
                // APPENDS; a snapshot holds none, so they are refused rather than read otherwise.
                return Err(reader.error("a set, which PyTorch's memory snapshots do not hold".into()));
            }
            b']' => {
                let r = out.new_list(Vec::new());
                stack.push(Value::List(r));
            }
            b')' => {
                let r = out.new_list(Vec::new());
                stack.push(Value::Tuple(r));
            }
            b'l' | b't' => {
                let (items, _) = pop_mark(&reader, &mut stack, &mut marks)?;
                let r = out.new_list(items);
                stack.push(if op == b't' { Value::Tuple(r) } else { Value::List(r) });
            }
            b'd' => {
                let (items, _) = pop_mark(&reader, &mut stack, &mut marks)?;
                let pairs = pairs(&reader, items)?;
                if pairs.iter().any(|(key, _)| !out.hashable(key, 0)) {
                    return Err(unhashable(&reader));
                }
                let r = out.new_dict(pairs);
                stack.push(Value::Dict(r));
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if stack.len() < n {
                    return Err(reader.error("TUPLE with too few items on the stack".into()));
                }
                let items = stack.split_off(stack.len() - n);
                let r = out.new_list(items);
                stack.push(Value::Tuple(r));
            }
            b'a' | b'e' => {
                let (items, mark) = if op == b'a' {
                    (vec![pop(&reader, &mut stack)?], None)
                } else {
                    let (items, mark) = pop_mark(&reader, &mut stack, &mut marks)?;
                    (items, Some(mark))
                };
                let list = top_list(&reader, &stack)?;
                match (sink.as_mut(), device_trace(&out, &stack)) {
                    (Some((sink, reads)), Some((device, devices))) => {
                        if !out.streamed_into.contains(&devices) {
                            out.streamed_into.push(devices);
                        }
                        if crate::cancel::requested() {
                            return Err(reader.error("cancelled".into()));
                        }
                        for item in &items {
                            let event = match *item {
                                Value::Event(i) => {
                                    let (values, fields) = fast.event(i);
                                    Event::Fields(&out, values, fields)
                                }
                                ref value => Event::Value(&out, value),
                            };
                            sink(device, event).map_err(|message| reader.error(message))?;
                        }
                        drop(items);
                        // The fast path's events are the arena's only where the batch is kept.
                        let kept_fast = std::mem::take(&mut fast.held);
                        fast.clear();
                        // A batch read whole (MARK ... APPENDS) is forgotten when no container
                        // it made is read back later: they all belong to its events.
                        if let Some(mark) = mark {
                            let shared = (mark.memo..memo_next).any(|key| {
                                reads.contains(key)
                                    && matches!(memo.get(key), Some(Value::List(_) | Value::Tuple(_) | Value::Dict(_)))
                            });
                            if shared {
                                out.held += kept_fast;
                            } else {
                                out.forget_since(&mark);
                            }
                        } else {
                            out.held += kept_fast;
                        }
                    }
                    _ => {
                        out.held += items.len() as u64;
                        out.list_mut(list).ok_or_else(|| stale(&reader))?.extend(items);
                    }
                }
            }
            b's' => {
                let value = pop(&reader, &mut stack)?;
                let key = pop(&reader, &mut stack)?;
                let dict = top_dict(&reader, &stack)?;
                if !out.hashable(&key, 0) {
                    return Err(unhashable(&reader));
                }
                out.held += 2;
                out.dict_mut(dict).ok_or_else(|| stale(&reader))?.push((key, value));
            }
            b'u' => {
                // The items go from the stack straight into the dict below them.
                let mark = marks
                    .pop()
                    .ok_or_else(|| reader.error("opcode needs a MARK but there is none".into()))?;
                if mark.stack > stack.len() || mark.stack == 0 {
                    return Err(reader.error("SETITEMS with no dict below its MARK".into()));
                }
                if !(stack.len() - mark.stack).is_multiple_of(2) {
                    return Err(reader.error("dict items come in an odd number".into()));
                }
                let dict = top_dict(&reader, &stack[..mark.stack])?;
                if stack[mark.stack..].iter().step_by(2).any(|key| !out.hashable(key, 0)) {
                    return Err(unhashable(&reader));
                }
                out.held += (stack.len() - mark.stack) as u64;
                let entries = out.dict_mut(dict).ok_or_else(|| stale(&reader))?;
                entries.reserve((stack.len() - mark.stack) / 2);
                let mut items = stack.drain(mark.stack..);
                while let (Some(key), Some(value)) = (items.next(), items.next()) {
                    entries.push((key, value));
                }
            }
            b'J' => {
                let v = reader.uint(4)? as u32 as i32;
                stack.push(Value::Int(i128::from(v)));
            }
            b'K' => stack.push(Value::Int(i128::from(reader.u8()?))),
            b'M' => stack.push(Value::Int(i128::from(reader.uint(2)?))),
            0x8a | 0x8b => {
                let n = if op == 0x8a {
                    reader.length(1)?
                } else {
                    reader.length(4)?
                };
                if n > 16 {
                    return Err(reader.error(format!("integer of {n} bytes is too large")));
                }
                let bytes = reader.take(n)?;
                let mut v: i128 = 0;
                for (i, &b) in bytes.iter().enumerate() {
                    v |= i128::from(b) << (8 * i);
                }
                if n > 0 && n < 16 && bytes[n - 1] & 0x80 != 0 {
                    v -= 1i128 << (8 * n);
                }
                stack.push(Value::Int(v));
            }
            b'G' => {
                let mut be = [0u8; 8];
                be.copy_from_slice(reader.take(8)?);
                stack.push(Value::Float(f64::from_be_bytes(be)));
            }
            b'N' => stack.push(Value::None),
            0x88 => stack.push(Value::Bool(true)),
            0x89 => stack.push(Value::Bool(false)),
            0x8c => {
                let n = reader.length(1)?;
                stack.push(Value::Str(reader.text(n)?));
            }
            b'X' => {
                let n = reader.length(4)?;
                stack.push(Value::Str(reader.text(n)?));
            }
            0x8d => {
                let n = reader.length(8)?;
                stack.push(Value::Str(reader.text(n)?));
            }
            b'C' | b'B' | 0x8e => {
                let n = match op {
                    b'C' => reader.length(1)?,
                    b'B' => reader.length(4)?,
                    _ => reader.length(8)?,
                };
                stack.push(Value::Bytes(Rc::from(reader.take(n)?)));
            }
            0x94 | b'q' | b'r' => {
                let key = match op {
                    0x94 => memo_next,
                    b'q' => reader.uint(1)?,
                    _ => reader.uint(4)?,
                };
                let top = stack
                    .last()
                    .ok_or_else(|| reader.error("MEMOIZE with an empty stack".into()))?;
                // Streaming keeps only what will be read back.
                if sink.as_ref().is_none_or(|(_, reads)| reads.contains(key)) {
                    memo.insert(key, top.clone());
                }
                memo_next = memo_next.max(key + 1);
            }
            b'h' | b'j' => {
                let key = if op == b'h' { reader.uint(1)? } else { reader.uint(4)? };
                let value = match memo.get(key) {
                    Some(value) => value.clone(),
                    None => return Err(reader.error(format!("memo entry {key} read before it was written"))),
                };
                stack.push(value);
            }
            b'0' => {
                // Python's POP takes the mark itself where nothing lies above it.
                if !marks.is_empty() && stack.len() == marks[marks.len() - 1].stack {
                    marks.pop();
                } else {
                    pop(&reader, &mut stack)?;
                }
            }
            b'1' => {
                pop_mark(&reader, &mut stack, &mut marks)?;
            }
            b'2' => {
                let top = stack
                    .last()
                    .cloned()
                    .ok_or_else(|| reader.error("DUP with an empty stack".into()))?;
                stack.push(top);
            }
            b'c' | 0x93 => {
                let (module, name) = if op == b'c' {
                    (reader.line()?, reader.line()?)
                } else {
                    let name = pop(&reader, &mut stack)?;
                    let module = pop(&reader, &mut stack)?;
                    match (module, name) {
                        (Value::Str(module), Value::Str(name)) => (module.to_string(), name.to_string()),
                        _ => return Err(reader.error("STACK_GLOBAL of something other than two strings".into())),
                    }
                };
                if (module.as_str(), name.as_str()) != ("collections", "OrderedDict") {
                    return Err(reader.error(format!(
                        "a reference to {}.{} (a class or function): vramlab reads plain data only (dicts, OrderedDicts, lists, tuples, strings, numbers)",
                        crate::files::error_line(&module.chars().take(100).collect::<String>()),
                        crate::files::error_line(&name.chars().take(100).collect::<String>()),
                    )));
                }
                stack.push(Value::OrderedDictClass);
            }
            b'R' => {
                let args = pop(&reader, &mut stack)?;
                let callable = pop(&reader, &mut stack)?;
                let no_args = matches!(args, Value::Tuple(r) if out.list(r).is_some_and(|items| items.is_empty()));
                if !matches!(callable, Value::OrderedDictClass) || !no_args {
                    return Err(reader.error(
                        "unsupported pickle opcode 0x52 (builds an object): vramlab reads plain data only".into(),
                    ));
                }
                let r = out.new_dict(Vec::new());
                stack.push(Value::Dict(r));
            }
            other => {
                let what = match other {
                    b'R' | 0x81 | 0x92 | b'b' | b'i' | b'o' => " (builds an object)",
                    b'P' | b'Q' => " (a persistent id)",
                    _ => "",
                };
                return Err(reader.error(format!(
                    "unsupported pickle opcode 0x{other:02x}{what}: vramlab reads plain data only"
                )));
            }
        }
    }
}

/// The event dicts of the batch being read that [`fast_event`] read: for each its bytes and the
/// values of [`FIELDS`] it gives. They stand on the stack as [`Value::Event`]s until the batch's
/// APPENDS hands them to the sink; any other opcode that comes first makes them the arena's
/// dicts ([`Fast::materialise`], reading their bytes again), as the opcodes would have.
#[derive(Default)]
struct Fast {
    /// The events' bytes, one after another.
    bytes: Vec<u8>,
    /// The values of their fields, one after another.
    values: Vec<Value>,
    events: Vec<FastEvent>,
    /// Values the events would hold in the arena had their opcodes been run one by one.
    held: u64,
    /// Memo entries an event being read makes (written only once it is read whole).
    memo_writes: Vec<(u64, Value)>,
    /// Keys and values read again, in turn, for [`Fast::materialise`].
    entries: Vec<Value>,
}

struct FastEvent {
    bytes: (u32, u32),
    /// Where in `values` each field's value is.
    fields: [u32; FIELDS.len()],
}

/// Where an EMPTY_LIST stands among a fast event's entries until it is made in the arena.
const EMPTY_LIST: Value = Value::List(Ref {
    slot: u32::MAX,
    generation: u32::MAX,
});

impl Fast {
    fn event(&self, i: u32) -> (&[Value], &[u32; FIELDS.len()]) {
        (&self.values, &self.events[i as usize].fields)
    }

    /// Makes every event on the stack the dict (and empty lists) of the arena its opcodes would
    /// have made, in the same order, counted as they would have been. Its bytes read again give
    /// the same values: every memo entry they read was there before the event, and no event
    /// read this way writes over one (see [`fast_entries`]).
    #[cold]
    #[inline(never)]
    fn materialise(&mut self, out: &mut Pickle, stack: &mut [Value], memo: &Memo) {
        for value in stack.iter_mut().rev() {
            let Value::Event(i) = *value else { break };
            let (from, to) = self.events[i as usize].bytes;
            self.entries.clear();
            let read = fast_entries::<true>(
                &self.bytes[from as usize..to as usize],
                memo,
                0,
                &ReadKeys::default(),
                &mut self.memo_writes,
                &mut self.entries,
                &mut None,
            );
            debug_assert!(read.is_some(), "an event read once reads again");
            // The dict is made before its lists, as its EMPTY_DICT comes first.
            let dict = out.new_dict(Vec::new());
            let mut items = self.entries.drain(..);
            let mut entries = Vec::with_capacity(items.len() / 2);
            while let (Some(k), Some(v)) = (items.next(), items.next()) {
                let v = match v {
                    EMPTY_LIST => Value::List(out.new_list(Vec::new())),
                    v => v,
                };
                entries.push((k, v));
            }
            drop(items);
            out.held += 2 * entries.len() as u64;
            if let Some(slot) = out.dict_mut(dict) {
                *slot = entries;
            }
            *value = Value::Dict(dict);
        }
        self.clear();
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.values.clear();
        self.events.clear();
        self.held = 0;
    }
}

/// Reads one event dict from `bytes`, which begin with its EMPTY_DICT, if it has the plain
/// shape Python's pickler gives a snapshot's events: `} [memo] ( key value [memo] ... u` with
/// scalar keys and values (memo reads of scalars included) and empty lists as values of keys
/// other than [`FIELDS`], no container of it read back later. Its bytes, with the event added to
/// `fast` and its memo entries made; `None`, with nothing changed, where the opcodes must read it.
/// `frame_end`: where the current frame ends, counted from the event's first byte; moved on
/// past a FRAME inside the event (see [`fast_entries`]).
fn fast_event(
    bytes: &[u8],
    memo: &mut Memo,
    memo_next: &mut u64,
    reads: &ReadKeys,
    fast: &mut Fast,
    frame_end: &mut Option<usize>,
) -> Option<usize> {
    let start = fast.values.len();
    fast.memo_writes.clear();
    let mut frame = *frame_end;
    match fast_entries::<false>(
        bytes,
        memo,
        *memo_next,
        reads,
        &mut fast.memo_writes,
        &mut fast.values,
        &mut frame,
    ) {
        Some(read) => {
            let from = fast.bytes.len();
            fast.bytes.extend_from_slice(&bytes[..read.used]);
            let mut fields = read.fields;
            for field in &mut fields {
                if *field != ABSENT {
                    *field += start as u32;
                }
            }
            fast.held += 1 + read.lists + 2 * read.pairs;
            fast.events.push(FastEvent {
                bytes: (from as u32, fast.bytes.len() as u32),
                fields,
            });
            for (key, value) in fast.memo_writes.drain(..) {
                memo.insert(key, value);
            }
            *memo_next = read.next;
            *frame_end = frame;
            Some(read.used)
        }
        None => {
            fast.values.truncate(start);
            None
        }
    }
}

/// What [`fast_entries`] read.
struct FastRead {
    used: usize,
    /// The next memo key.
    next: u64,
    lists: u64,
    pairs: u64,
    /// Where each field's value went among the values pushed (relative to the first).
    fields: [u32; FIELDS.len()],
}

/// [`fast_event`]'s reading. `ENTRIES` false: the values of [`FIELDS`] go to `out`, memo
/// entries read back to `memo_writes` (none may write over one already made). `ENTRIES` true
/// (the bytes of an event read before, read again): every key and value goes to `out`, in
/// turn, and no memo entry is made. Each value kept is built in place in `out`: moved through
/// the stack, a 32-byte value cost more than reading it. `frame_end` (with `ENTRIES` false):
/// where the current frame ends, from `bytes`' start; an opcode that runs past it, or a FRAME
/// before it, is left to the opcodes, which refuse it as Python does.
#[inline(always)]
fn fast_entries<const ENTRIES: bool>(
    bytes: &[u8],
    memo: &Memo,
    memo_next: u64,
    reads: &ReadKeys,
    memo_writes: &mut Vec<(u64, Value)>,
    out: &mut Vec<Value>,
    frame_end: &mut Option<usize>,
) -> Option<FastRead> {
    let start = out.len();
    let mut next = memo_next;
    let mut i = 1;
    let u32_at = |i: usize| -> Option<u32> { Some(u32::from_le_bytes(bytes.get(i..i + 4)?.try_into().ok()?)) };
    // The memo keys given to the value just read: `$kept`, the value where it was kept (a memo
    // entry read back needs it).
    macro_rules! memoize {
        ($kept:expr) => {
            loop {
                let key = match *bytes.get(i)? {
                    0x94 => {
                        i += 1;
                        next
                    }
                    b'q' => {
                        i += 2;
                        u64::from(*bytes.get(i - 1)?)
                    }
                    b'r' => {
                        i += 5;
                        u64::from(u32_at(i - 4)?)
                    }
                    // A FRAME (the main loop's to read) or any other opcode ends the keys.
                    _ => break,
                };
                if !ENTRIES && reads.contains(key) {
                    if memo.get(key).is_some() || memo_writes.iter().any(|(k, _)| *k == key) {
                        return None;
                    }
                    // A value not kept is read again by the opcodes where it is read back.
                    let kept: Option<&Value> = $kept;
                    let value = kept.filter(|v| **v != EMPTY_LIST)?;
                    memo_writes.push((key, value.clone()));
                }
                next = next.max(key + 1);
            }
        };
    }
    memoize!(None);
    if *bytes.get(i)? != b'(' {
        return None;
    }
    i += 1;
    let (mut lists, mut pairs) = (0, 0);
    let mut fields = [ABSENT; FIELDS.len()];
    // The key read, waiting for its value: its place among FIELDS.
    let mut key: Option<Option<usize>> = None;
    loop {
        let op = *bytes.get(i)?;
        if !ENTRIES {
            match *frame_end {
                Some(end) if i == end => *frame_end = None,
                Some(end) if i > end => return None,
                _ => {}
            }
        }
        i += 1;
        // Whether the value is kept (a key is looked at only for its place among FIELDS).
        let want = ENTRIES || matches!(key, Some(Some(_)));
        let before = out.len();
        let mut field = None;
        match op {
            b'u' if key.is_none() => break,
            b'h' | b'j' => {
                let at = if op == b'h' {
                    i += 1;
                    u64::from(*bytes.get(i - 1)?)
                } else {
                    i += 4;
                    u64::from(u32_at(i - 4)?)
                };
                let value = match memo_writes.iter().rev().find(|(k, _)| *k == at) {
                    Some((_, value)) => {
                        field = field_of(value);
                        value
                    }
                    None => {
                        let (value, of) = memo.get_field(at)?;
                        field = of;
                        value
                    }
                };
                if matches!(
                    value,
                    Value::List(_) | Value::Tuple(_) | Value::Dict(_) | Value::Event(_)
                ) {
                    return None;
                }
                if want {
                    out.push(value.clone());
                }
            }
            0x8c | b'X' => {
                let n = if op == 0x8c {
                    i += 1;
                    usize::from(*bytes.get(i - 1)?)
                } else {
                    i += 4;
                    u32_at(i - 4)? as usize
                };
                let text = std::str::from_utf8(bytes.get(i..i.checked_add(n)?)?).ok()?;
                i += n;
                field = FIELDS.iter().position(|f| *f == text);
                if want {
                    out.push(Value::Str(Rc::from(text)));
                }
            }
            b'K' => {
                i += 1;
                let v = *bytes.get(i - 1)?;
                if want {
                    out.push(Value::Int(i128::from(v)));
                }
            }
            b'M' => {
                i += 2;
                let v = u16::from_le_bytes(bytes.get(i - 2..i)?.try_into().ok()?);
                if want {
                    out.push(Value::Int(i128::from(v)));
                }
            }
            b'J' => {
                i += 4;
                let v = u32_at(i - 4)? as i32;
                if want {
                    out.push(Value::Int(i128::from(v)));
                }
            }
            0x8a => {
                let n = usize::from(*bytes.get(i)?);
                if n > 16 {
                    return None;
                }
                let digits = bytes.get(i + 1..i + 1 + n)?;
                i += 1 + n;
                if want {
                    let mut v: i128 = 0;
                    for (at, &b) in digits.iter().enumerate() {
                        v |= i128::from(b) << (8 * at);
                    }
                    if n > 0 && n < 16 && digits[n - 1] & 0x80 != 0 {
                        v -= 1i128 << (8 * n);
                    }
                    out.push(Value::Int(v));
                }
            }
            b'G' => {
                i += 8;
                let v = f64::from_be_bytes(bytes.get(i - 8..i)?.try_into().ok()?);
                if want {
                    out.push(Value::Float(v));
                }
            }
            b'N' | 0x88 | 0x89 => {
                if want {
                    out.push(match op {
                        b'N' => Value::None,
                        b => Value::Bool(b == 0x88),
                    });
                }
            }
            // An empty list (memoised, never read back) as the value of a key no field names.
            b']' if key == Some(None) => {
                lists += 1;
                if want {
                    out.push(EMPTY_LIST);
                }
            }
            0x95 => {
                // Python's pickler starts a frame before any object, so one comes inside an
                // event at every 64 KiB. Its bytes must follow, as Python's unpickler checks: a
                // frame reaching past the bytes at hand goes to the opcodes (read again, the
                // event's own bytes have passed this check once).
                let len = u64::from_le_bytes(bytes.get(i..i + 8)?.try_into().ok()?);
                i += 8;
                if !ENTRIES && (((bytes.len() - i) as u64) < len || frame_end.is_some()) {
                    return None;
                }
                if !ENTRIES {
                    *frame_end = Some(i + len as usize);
                }
                continue;
            }
            _ => return None,
        }
        memoize!(out[before..].first());
        match key.take() {
            None => key = Some(field),
            Some(key_field) => {
                pairs += 1;
                if let (false, Some(field)) = (ENTRIES, key_field) {
                    fields[field] = (before - start) as u32;
                }
            }
        }
    }
    if !ENTRIES && frame_end.is_some_and(|end| i > end) {
        return None;
    }
    Some(FastRead {
        used: i,
        next,
        lists,
        pairs,
        fields,
    })
}

/// The opcode before the one at `reader.op_at` ran past the end of its frame, at `end`.
fn past_frame<R>(reader: &Reader<R>, end: u64) -> PickleError {
    PickleError {
        at: reader.op_at,
        message: format!(
            "an opcode runs past the end of its frame at byte {end} (Python: pickle exhausted before end of frame)"
        ),
        needs_whole: false,
    }
}

/// The pickle refers to something a streamed batch forgot.
fn stale<R>(reader: &Reader<R>) -> PickleError {
    PickleError {
        at: reader.op_at,
        message: "refers back to a streamed event".into(),
        needs_whole: true,
    }
}

/// Whether the list on top of the stack is one device's trace: the stack then ends with
/// `'device_traces'`, the list of devices being filled, and this list.
fn device_trace(out: &Pickle, stack: &[Value]) -> Option<(usize, Ref)> {
    let [.., Value::Str(key), Value::List(devices), Value::List(_)] = stack else {
        return None;
    };
    (&**key == "device_traces").then(|| (out.list(*devices).map_or(0, <[Value]>::len), *devices))
}

fn pop<R>(reader: &Reader<R>, stack: &mut Vec<Value>) -> Result<Value, PickleError> {
    stack
        .pop()
        .ok_or_else(|| reader.error("opcode needs a value but the stack is empty".into()))
}

fn pop_mark<R>(
    reader: &Reader<R>,
    stack: &mut Vec<Value>,
    marks: &mut Vec<Mark>,
) -> Result<(Vec<Value>, Mark), PickleError> {
    let mark = marks
        .pop()
        .ok_or_else(|| reader.error("opcode needs a MARK but there is none".into()))?;
    if mark.stack > stack.len() {
        return Err(reader.error("MARK points past the stack".into()));
    }
    Ok((stack.split_off(mark.stack), mark))
}

fn pairs<R>(reader: &Reader<R>, items: Vec<Value>) -> Result<Vec<(Value, Value)>, PickleError> {
    if !items.len().is_multiple_of(2) {
        return Err(reader.error("dict items come in an odd number".into()));
    }
    let mut iter = items.into_iter();
    let mut out = Vec::new();
    while let (Some(k), Some(v)) = (iter.next(), iter.next()) {
        out.push((k, v));
    }
    Ok(out)
}

/// Python refuses a list or dict as a key ("unhashable type"); so does vramlab.
fn unhashable<R>(reader: &Reader<R>) -> PickleError {
    reader.error("a dict key is a list or a dict, which Python cannot hash".into())
}

/// The opcodes the first pass steps over without reading an argument (both of its readers, the
/// window's and the one opcode at a time, ask the same question).
const fn takes_no_argument(op: u8) -> bool {
    matches!(
        op,
        b'(' | b'}' | b']' | b')' | 0x8f | b'l' | b't' | 0x91 | b'd' | 0x85
            ..=0x87 | b'a' | b'e' | 0x90 | b's' | b'u' | b'N' | 0x88 | 0x89 | 0x94 | b'0' | b'1' | b'2' | 0x93 | b'R'
    )
}

fn top_list<R>(reader: &Reader<R>, stack: &[Value]) -> Result<Ref, PickleError> {
    match stack.last() {
        Some(Value::List(r)) => Ok(*r),
        _ => Err(reader.error("APPEND to something that is not a list".into())),
    }
}

fn top_dict<R>(reader: &Reader<R>, stack: &[Value]) -> Result<Ref, PickleError> {
    match stack.last() {
        Some(Value::Dict(r)) => Ok(*r),
        _ => Err(reader.error("SETITEM on something that is not a dict".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // pickle.dumps({'a': [1, -2, 300, 2**40], 'b': 'x', 'c': None, 'd': 1.5}, protocol=4)
    const SAMPLE: &[u8] = b"\x80\x04\x959\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(K\x01J\xfe\xff\xff\xffM,\x01\x8a\x06\x00\x00\x00\x00\x00\x01e\x8c\x01b\x94\x8c\x01x\x94\x8c\x01c\x94N\x8c\x01d\x94G?\xf8\x00\x00\x00\x00\x00\x00u.";

    #[test]
    fn reads_plain_data() {
        let pickle = decode(SAMPLE, u64::MAX, u64::MAX, None).unwrap();
        let root = pickle.root.clone().unwrap();
        let a = pickle.items(pickle.get(&root, "a").unwrap()).unwrap();
        assert_eq!(
            a,
            &[Value::Int(1), Value::Int(-2), Value::Int(300), Value::Int(1 << 40)]
        );
        assert_eq!(pickle.get(&root, "b"), Some(&Value::Str(Rc::from("x"))));
        assert_eq!(pickle.get(&root, "c"), Some(&Value::None));
        assert_eq!(pickle.get(&root, "d"), Some(&Value::Float(1.5)));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        for len in 0..SAMPLE.len() {
            let err = decode(&SAMPLE[..len], u64::MAX, u64::MAX, None).unwrap_err();
            assert!(err.message.contains("truncated"), "{len}: {}", err.message);
        }
    }

    /// pickle.dumps({**{f"k{i}": i for i in range(20)}, "k3": "last"}): a duplicate key keeps
    /// its last value, in a dict wide enough to be indexed as in one that is not.
    #[test]
    fn the_last_assignment_of_a_key_wins() {
        let mut bytes = vec![0x80, 4, b'}', b'('];
        for i in 0..20 {
            let key = format!("k{i}");
            bytes.extend([0x8c, key.len() as u8]);
            bytes.extend(key.as_bytes());
            bytes.extend([b'K', i as u8]);
        }
        bytes.extend([0x8c, 2, b'k', b'3', 0x8c, 4]);
        bytes.extend(b"last");
        bytes.extend([b'u', b'.']);
        let pickle = decode(&bytes[..], u64::MAX, u64::MAX, None).unwrap();
        let root = pickle.root.as_ref().unwrap();
        assert_eq!(pickle.get(root, "k3"), Some(&Value::Str("last".into())));
        assert_eq!(pickle.get(root, "k19"), Some(&Value::Int(19)));
        assert_eq!(pickle.get(root, "k20"), None);
    }

    /// A protocol-4 style snapshot of `events` events in batches of 1,000, every container and
    /// string memoised as Python's pickler does; event 0's `frames` list is read back by the
    /// last event, across batches.
    fn snapshot_pickle(events: u32) -> Vec<u8> {
        snapshot_pickle_with(events, |_, _| {})
    }

    /// [`snapshot_pickle`], with `after(i, bytes)` written after event `i`'s SETITEMS.
    fn snapshot_pickle_with(events: u32, after: impl Fn(u32, &mut Vec<u8>)) -> Vec<u8> {
        let mut out = vec![0x80, 4];
        let mut memo = 0u32;
        let mut memoize = |out: &mut Vec<u8>| {
            out.push(0x94);
            memo += 1;
            memo - 1
        };
        let text = |out: &mut Vec<u8>, text: &str| {
            out.push(0x8c);
            out.push(text.len() as u8);
            out.extend(text.as_bytes());
        };
        out.push(b'}');
        memoize(&mut out);
        out.push(b'(');
        text(&mut out, "device_traces");
        memoize(&mut out);
        out.push(b']');
        memoize(&mut out);
        out.push(b']');
        memoize(&mut out);
        let mut frames = 0;
        for i in 0..events {
            if i % 1000 == 0 {
                out.push(b'(');
            }
            out.push(b'}');
            memoize(&mut out);
            out.push(b'(');
            for (key, value) in [("action", "alloc"), ("compile_context", "N/A")] {
                text(&mut out, key);
                memoize(&mut out);
                text(&mut out, value);
                memoize(&mut out);
            }
            for (key, value) in [("addr", 4096 * u64::from(i + 1)), ("size", 512), ("stream", 0)] {
                text(&mut out, key);
                memoize(&mut out);
                out.push(0x8a);
                out.push(8);
                out.extend(value.to_le_bytes());
            }
            text(&mut out, "frames");
            memoize(&mut out);
            if i == 0 {
                out.push(b']');
                frames = memoize(&mut out);
                out.extend([b'K', 7, b'a']);
            } else if i == events - 1 {
                out.push(b'j');
                out.extend(frames.to_le_bytes());
            } else {
                out.push(b']');
                memoize(&mut out);
            }
            out.push(b'u');
            after(i, &mut out);
            if i % 1000 == 999 || i == events - 1 {
                out.push(b'e');
            }
        }
        out.extend([b'a', b'u', b'.']);
        out
    }

    fn pickle_items(pickle: &Pickle, value: &Value) -> Vec<Value> {
        pickle.items(value).unwrap().to_vec()
    }

    #[test]
    fn streamed_events_are_forgotten_unless_read_back() {
        let bytes = snapshot_pickle(5_500);
        let reads = scan_reads(&bytes[..], u64::MAX).unwrap();
        let mut seen = Vec::new();
        let mut sink = |device: usize, event: Event<'_>| -> Result<(), String> {
            let addr = match event.get("addr") {
                Some(Value::Int(a)) => *a,
                other => return Err(format!("addr {other:?}")),
            };
            // The fast path's events give FIELDS only; those with a frame are read by opcodes.
            let frames = match event.value() {
                Some(value) => pickle_items(event.pickle(), event.pickle().get(value, "frames").unwrap()),
                None => Vec::new(),
            };
            seen.push((device, addr, frames));
            Ok(())
        };
        let streamed = decode(&bytes[..], u64::MAX, u64::MAX, Some((&mut sink, &reads))).unwrap();
        assert_eq!(seen.len(), 5_500);
        assert!(seen
            .iter()
            .enumerate()
            .all(|(i, (d, addr, _))| *d == 0 && *addr == 4096 * (i as i128 + 1)));
        // The last event reads event 0's frames list, kept because the first pass saw it read.
        assert_eq!(seen[0].2, [Value::Int(7)]);
        assert_eq!(seen[5_499].2, [Value::Int(7)]);
        // Kept: the root, the device lists and event 0's batch (which made the shared list);
        // every other batch was forgotten.
        assert!(streamed.dicts.len() <= 1 + 1_000, "{} dicts kept", streamed.dicts.len());
        let whole = decode(&bytes[..], u64::MAX, u64::MAX, None).unwrap();
        assert!(whole.dicts.len() > 5_500);
        // Streaming gives back what each batch built, so it reads within half of what the
        // whole pickle holds.
        let budget = whole.held / 2;
        let mut count = 0;
        let mut counting = |_: usize, _: Event<'_>| -> Result<(), String> {
            count += 1;
            Ok(())
        };
        decode(&bytes[..], u64::MAX, budget, Some((&mut counting, &reads))).unwrap();
        assert_eq!(count, 5_500);
        let err = decode(&bytes[..], u64::MAX, budget, None).unwrap_err();
        assert!(err.message.contains("VRAMLAB_MAX_PICKLE_VALUES"), "{}", err.message);
        let traces = whole.get(whole.root.as_ref().unwrap(), "device_traces").unwrap();
        let device = &whole.items(traces).unwrap()[0];
        assert_eq!(whole.items(device).unwrap().len(), 5_500);
    }

    /// Opcodes that reach events the fast path read (a DUP and a POP, a SETITEM onto the last
    /// event) leave what the opcodes alone give.
    #[test]
    fn events_read_fast_are_those_the_opcodes_give() {
        let dup_pop = |i: u32, out: &mut Vec<u8>| {
            if i % 700 == 3 {
                out.extend([b'2', b'0']);
            }
        };
        let setitem = |i: u32, out: &mut Vec<u8>| {
            if i % 900 == 5 {
                out.extend([0x8c, 4]);
                out.extend(b"addr");
                out.extend([b'K', 9, b's']);
            }
        };
        type Hook<'h> = &'h dyn Fn(u32, &mut Vec<u8>);
        let hooks: [(&str, Hook<'_>); 2] = [("DUP POP", &dup_pop), ("SETITEM", &setitem)];
        for (what, hook) in hooks {
            let bytes = snapshot_pickle_with(3_500, hook);
            let reads = scan_reads(&bytes[..], u64::MAX).unwrap();
            let mut streamed = Vec::new();
            let mut sink = |_: usize, event: Event<'_>| -> Result<(), String> {
                streamed.push(event.get("addr").cloned());
                Ok(())
            };
            decode(&bytes[..], u64::MAX, u64::MAX, Some((&mut sink, &reads))).unwrap();
            let whole = decode(&bytes[..], u64::MAX, u64::MAX, None).unwrap();
            let traces = whole.get(whole.root.as_ref().unwrap(), "device_traces").unwrap();
            let device = &whole.items(traces).unwrap()[0];
            let opcodes: Vec<Option<Value>> = whole
                .items(device)
                .unwrap()
                .iter()
                .map(|event| whole.get(event, "addr").cloned())
                .collect();
            assert_eq!(streamed.len(), 3_500, "{what}");
            assert_eq!(streamed, opcodes, "{what}");
            assert!(streamed.contains(&Some(Value::Int(9))) == (what == "SETITEM"), "{what}");
        }
    }

    /// Python's pickler starts a new frame before any object once the current one is full, so
    /// FRAME opcodes come inside events (before a key, after a memoised value): such events are
    /// read as the opcodes read them, and a frame claiming more bytes than follow is the same
    /// error whichever reads it.
    #[test]
    fn events_with_a_frame_inside_are_read_as_the_opcodes_read_them() {
        let plain = snapshot_pickle(3_500);
        // Before "addr" (after the memoised value before it) and before "stream" (after one
        // that is not).
        let mut places: Vec<usize> = [&b"\x8c\x04addr"[..], &b"\x8c\x06stream"[..]]
            .iter()
            .flat_map(|key| {
                plain
                    .windows(key.len())
                    .enumerate()
                    .filter(move |(_, w)| w == key)
                    .map(|(at, _)| at)
                    .step_by(7)
            })
            .collect();
        places.sort_unstable();
        assert!(places.len() > 900);
        // Each frame runs to the next (as Python's pickler writes them), the last to the end,
        // or `overclaim` bytes past it.
        let framed = |overclaim: u64| {
            let mut bytes = plain.clone();
            for (n, &at) in places.iter().enumerate().rev() {
                let len = match places.get(n + 1) {
                    Some(&next) => (next - at) as u64,
                    None => (bytes.len() - at) as u64 + overclaim,
                };
                let mut frame = vec![0x95];
                frame.extend(len.to_le_bytes());
                bytes.splice(at..at, frame);
            }
            bytes
        };
        let streamed = |bytes: &[u8]| {
            let reads = scan_reads(bytes, u64::MAX).unwrap();
            let mut streamed = Vec::new();
            let mut sink = |_: usize, event: Event<'_>| -> Result<(), String> {
                streamed.push((event.get("addr").cloned(), event.get("stream").cloned()));
                Ok(())
            };
            decode(bytes, u64::MAX, u64::MAX, Some((&mut sink, &reads))).map(|_| streamed)
        };
        let bytes = framed(0);
        let whole = decode(&bytes[..], u64::MAX, u64::MAX, None).unwrap();
        let traces = whole.get(whole.root.as_ref().unwrap(), "device_traces").unwrap();
        let device = &whole.items(traces).unwrap()[0];
        let opcodes: Vec<(Option<Value>, Option<Value>)> = whole
            .items(device)
            .unwrap()
            .iter()
            .map(|event| (whole.get(event, "addr").cloned(), whole.get(event, "stream").cloned()))
            .collect();
        assert_eq!(streamed(&bytes).unwrap(), opcodes);
        assert_eq!(streamed(&plain).unwrap(), opcodes);
        let overclaimed = framed(1);
        let fast = streamed(&overclaimed).unwrap_err();
        let slow = decode(&overclaimed[..], u64::MAX, u64::MAX, None).unwrap_err();
        assert!(
            fast.message.contains("truncated pickle: a frame of"),
            "{}",
            fast.message
        );
        assert_eq!((fast.at, fast.message), (slow.at, slow.message));
        // A frame ending inside an event's opcode, or a frame begun inside another: Python's
        // unpickler refuses both, streamed or not (issue 40, the snapshot_differential finding).
        let mut straddled = bytes.clone();
        let second = places[1] + 9;
        straddled[second + 1..second + 9].copy_from_slice(&((places[2] - places[1]) as u64 - 3).to_le_bytes());
        let mut nested = bytes.clone();
        nested[second + 1..second + 9].copy_from_slice(&((places[2] - places[1]) as u64 + 3).to_le_bytes());
        for (bad, says) in [
            (straddled, "past the end of its frame"),
            (nested, "before the frame ending"),
        ] {
            let fast = streamed(&bad).unwrap_err();
            let slow = decode(&bad[..], u64::MAX, u64::MAX, None).unwrap_err();
            assert!(fast.message.contains(says), "{}", fast.message);
            assert_eq!((fast.at, fast.message), (slow.at, slow.message));
        }
    }

    /// Found by `snapshot_differential` (fuzz/RECORD.md): vramlab read pickles whose frames
    /// Python's unpickler refuses, as `pickle.loads` of a whole buffer does not look at frames
    /// but `pickle.load` of a file and the reference unpickler do. Each case as Python answers it.
    #[test]
    fn frames_are_read_as_pythons_unpickler_reads_them() {
        let frame = |n: u64| [&[0x95u8][..], &n.to_le_bytes()].concat();
        let pickle = |parts: &[&[u8]]| [&[0x80u8, 4][..], &parts.concat()].concat();
        let one = b"J\x01\x00\x00\x00";
        // pickle.load: 1; the frame ends right after the value, STOP outside it.
        for ok in [pickle(&[&frame(6), one, b"."]), pickle(&[&frame(5), one, b"."])] {
            let read = decode(&ok[..], u64::MAX, u64::MAX, None).unwrap();
            assert_eq!(read.root, Some(Value::Int(1)));
        }
        // "pickle exhausted before end of frame": the int's bytes run past the frame.
        let straddle = pickle(&[&frame(3), one, b"."]);
        let err = decode(&straddle[..], u64::MAX, u64::MAX, None).unwrap_err();
        assert!(
            err.message.contains("runs past the end of its frame at byte 14"),
            "{}",
            err.message
        );
        // "beginning of a new frame before end of current frame".
        let nested = pickle(&[&frame(15), one, &frame(1), b"."]);
        let err = decode(&nested[..], u64::MAX, u64::MAX, None).unwrap_err();
        assert!(
            err.message
                .contains("a frame begins at byte 16 before the frame ending at byte 26"),
            "{}",
            err.message
        );
    }

    /// Found by `snapshot_differential`: a MARK starts a new stack in Python's unpickler, so
    /// an opcode may not take, memoise or append to what lies below it ("unexpected MARK
    /// found"); vramlab's one stack let it. POP with nothing above a mark pops the mark.
    #[test]
    fn nothing_below_a_mark_is_taken() {
        for (bad, op) in [
            (&b"\x80\x04]((\x94e."[..], "0x94"),
            (&b"\x80\x04K\x01(\x85."[..], "0x85"),
            (&b"\x80\x04](K\x01a."[..], "0x61"),
            (&b"\x80\x04}(K\x01K\x02s."[..], "0x73"),
            (&b"\x80\x04K\x01(\x32."[..], "0x32"),
            (&b"\x80\x04((K\x01e."[..], "0x65"),
        ] {
            let err = decode(bad, u64::MAX, u64::MAX, None).unwrap_err();
            assert!(
                err.message
                    .contains(&format!("opcode {op} takes a value from below a MARK")),
                "{}",
                err.message
            );
        }
        // pickle.loads: [1], the mark popped by POP.
        let read = decode(&b"\x80\x04](0K\x01a."[..], u64::MAX, u64::MAX, None).unwrap();
        let root = read.root.as_ref().unwrap();
        assert_eq!(read.items(root).unwrap(), &[Value::Int(1)]);
    }

    #[test]
    fn refuses_code() {
        // pickle.dumps(print, protocol=4): a reference to a builtin.
        let bytes = b"\x80\x04\x95\x16\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x05print\x94\x93\x94.";
        let err = decode(&bytes[..], u64::MAX, u64::MAX, None).unwrap_err();
        assert!(
            err.message
                .contains("a reference to builtins.print (a class or function)"),
            "{}",
            err.message
        );
    }

    /// Pickles that build a value or more for every byte or two: many copies of the top of the
    /// stack, memo references, empty lists, marks.
    #[test]
    fn bounds_the_values_it_builds() {
        let bombs: [(&str, &[u8], &[u8]); 4] = [
            ("DUP", b"K\x01", b"2"),
            ("memo reads", b"K\x01\x94", b"h\x00"),
            ("empty lists", b"", b"]"),
            ("marks", b"", b"("),
        ];
        for (what, head, unit) in bombs {
            let mut bytes = b"\x80\x04".to_vec();
            bytes.extend_from_slice(head);
            for _ in 0..10_000 {
                bytes.extend_from_slice(unit);
            }
            let err = decode(&bytes[..], u64::MAX, 1_000, None).unwrap_err();
            assert!(err.message.contains("more than 1000 values"), "{what}: {}", err.message);
            assert!(err.at < 3_000, "{what}: refused only at byte {}", err.at);
            let err = decode(&bytes[..], u64::MAX, 100_000, None).unwrap_err();
            assert!(!err.message.contains("values"), "{what}: {}", err.message);
        }
    }

    /// A memo key beyond anything the pickle could have numbered (LONG_BINGET 2**32 - 1) is kept
    /// aside, not in a bitmap of half a gigabyte.
    #[test]
    fn far_memo_keys_cost_no_memory() {
        let bytes = b"\x80\x04K\x01r\xff\xff\xff\xff0j\xff\xff\xff\xff.";
        let keys = scan_reads(&bytes[..], u64::MAX).unwrap();
        assert!(keys.bits.len() < 1_000, "{} words", keys.bits.len());
        assert!(keys.contains(u64::from(u32::MAX)));
        assert!(!keys.contains(0));
        let pickle = decode(&bytes[..], u64::MAX, u64::MAX, None).unwrap();
        assert_eq!(pickle.root, Some(Value::Int(1)));
    }

    /// Where Python's `pickle.loads` refuses, so does the reader (each case found by the
    /// `snapshot_differential` fuzz target): a frame longer than what follows, a list or dict as
    /// a key, and sets, which a snapshot never holds.
    #[test]
    fn refuses_what_python_refuses() {
        let refused = |bytes: &[u8]| decode(bytes, u64::MAX, u64::MAX, None).map(|_| ()).unwrap_err().message;
        // FRAME of 100 bytes, then a whole pickle of 3: Python says "pickle data was truncated".
        let short_frame = b"\x80\x04\x95\x64\x00\x00\x00\x00\x00\x00\x00K\x01.";
        assert!(refused(short_frame).contains("frame of 100 bytes"));
        // {[]: 1} as SETITEM, as SETITEMS and as DICT; {(1, []): 1} too.
        for bytes in [
            &b"\x80\x02}]K\x01s."[..],
            b"\x80\x02}(]K\x01u.",
            b"\x80\x02(}K\x01d.",
            b"\x80\x02}K\x01]\x86K\x01s.",
        ] {
            assert!(refused(bytes).contains("cannot hash"), "{bytes:?}");
        }
        // {(1, 2): 1} is a valid key.
        assert!(decode(&b"\x80\x02}K\x01K\x02\x86K\x01s."[..], u64::MAX, u64::MAX, None).is_ok());
        for bytes in [&b"\x80\x04\x8f."[..], b"\x80\x04(K\x01\x91."] {
            assert!(refused(bytes).contains("a set"), "{bytes:?}");
        }
    }
}
