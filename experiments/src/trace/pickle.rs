//! A reader for the plain-data subset of Python's pickle format (protocols 2 to 5).
//!
//! PyTorch memory snapshots are pickled dicts, lists, strings and numbers. Reading them needs no
//! Python object model, and must not have one: a pickle that names a class or a function is
//! refused, so a trace file can never run code.

use std::collections::HashMap;
use std::rc::Rc;

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
    List(usize),
    Tuple(usize),
    Dict(usize),
}

/// A decoded pickle: the root value and the containers it refers to.
#[derive(Debug, Default)]
pub(crate) struct Pickle {
    lists: Vec<Vec<Value>>,
    dicts: Vec<Vec<(Value, Value)>>,
    /// For dicts of many entries: string key -> the entry holding it (the last, as in Python),
    /// so a wide dict referenced many times over is not searched entry by entry each time.
    indexes: std::collections::HashMap<usize, std::collections::HashMap<Rc<str>, usize>>,
    /// The root value.
    pub(crate) root: Option<Value>,
}

impl Pickle {
    /// The items of a list or tuple.
    pub(crate) fn items(&self, value: &Value) -> Option<&[Value]> {
        match value {
            Value::List(i) | Value::Tuple(i) => Some(&self.lists[*i]),
            _ => None,
        }
    }

    /// The value stored under a string key of a dict (the last assignment, as in Python).
    pub(crate) fn get(&self, value: &Value, key: &str) -> Option<&Value> {
        let Value::Dict(i) = value else { return None };
        let entries = &self.dicts[*i];
        match self.indexes.get(i) {
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
        for (i, entries) in self.dicts.iter().enumerate().filter(|(_, e)| e.len() > WIDE) {
            let index = entries
                .iter()
                .enumerate()
                .filter_map(|(at, (k, _))| match k {
                    Value::Str(s) => Some((s.clone(), at)),
                    _ => None,
                })
                .collect();
            self.indexes.insert(i, index);
        }
    }
}

/// Why a pickle could not be read; `at` is the byte offset of the opcode at fault.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PickleError {
    pub(crate) at: usize,
    pub(crate) message: String,
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
    op_at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let end = self.pos.checked_add(n).filter(|&end| end <= self.bytes.len());
        match end {
            Some(end) => {
                let slice = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(slice)
            }
            None => Err(self.error(format!(
                "truncated pickle: needs {n} more bytes at byte {}, the file has {}",
                self.pos,
                self.bytes.len()
            ))),
        }
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn uint(&mut self, n: usize) -> Result<u64, PickleError> {
        let bytes = self.take(n)?;
        Ok(bytes.iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn length(&mut self, n: usize) -> Result<usize, PickleError> {
        let len = self.uint(n)?;
        usize::try_from(len).map_err(|_| self.error(format!("length {len} does not fit in memory")))
    }

    fn text(&mut self, n: usize) -> Result<Rc<str>, PickleError> {
        let bytes = self.take(n)?;
        std::str::from_utf8(bytes)
            .map(Rc::from)
            .map_err(|_| self.error("string is not valid UTF-8".to_string()))
    }

    fn error(&self, message: String) -> PickleError {
        PickleError {
            at: self.op_at,
            message,
        }
    }
}

/// Decodes `bytes` as a pickle of plain data.
pub(crate) fn decode(bytes: &[u8]) -> Result<Pickle, PickleError> {
    let mut out = Pickle::default();
    let mut reader = Reader {
        bytes,
        pos: 0,
        op_at: 0,
    };
    let mut stack: Vec<Value> = Vec::new();
    let mut marks: Vec<usize> = Vec::new();
    let mut memo: HashMap<u64, Value> = HashMap::new();

    loop {
        if reader.pos >= bytes.len() {
            return Err(PickleError {
                at: reader.pos,
                message: format!(
                    "truncated pickle: no STOP opcode before the end ({} bytes)",
                    bytes.len()
                ),
            });
        }
        reader.op_at = reader.pos;
        let op = reader.u8()?;
        match op {
            0x80 => {
                let proto = reader.u8()?;
                if !(2..=5).contains(&proto) {
                    return Err(reader.error(format!("pickle protocol {proto} is not supported (2 to 5 are)")));
                }
            }
            0x95 => {
                reader.take(8)?;
            }
            b'.' => {
                let root = stack
                    .pop()
                    .ok_or_else(|| reader.error("STOP with an empty stack".into()))?;
                out.root = Some(root);
                out.index_wide_dicts();
                return Ok(out);
            }
            b'(' => marks.push(stack.len()),
            b'}' => {
                out.dicts.push(Vec::new());
                stack.push(Value::Dict(out.dicts.len() - 1));
            }
            b']' => {
                out.lists.push(Vec::new());
                stack.push(Value::List(out.lists.len() - 1));
            }
            b')' => {
                out.lists.push(Vec::new());
                stack.push(Value::Tuple(out.lists.len() - 1));
            }
            0x8f => {
                // EMPTY_SET: read as a list; snapshots do not use sets, but they are plain data.
                out.lists.push(Vec::new());
                stack.push(Value::List(out.lists.len() - 1));
            }
            b'l' | b't' | 0x91 => {
                let items = pop_mark(&mut reader, &mut stack, &mut marks)?;
                out.lists.push(items);
                let index = out.lists.len() - 1;
                stack.push(if op == b't' {
                    Value::Tuple(index)
                } else {
                    Value::List(index)
                });
            }
            b'd' => {
                let items = pop_mark(&mut reader, &mut stack, &mut marks)?;
                let pairs = pairs(&reader, items)?;
                out.dicts.push(pairs);
                stack.push(Value::Dict(out.dicts.len() - 1));
            }
            0x85..=0x87 => {
                let n = usize::from(op - 0x84);
                if stack.len() < n {
                    return Err(reader.error("TUPLE with too few items on the stack".into()));
                }
                let items = stack.split_off(stack.len() - n);
                out.lists.push(items);
                stack.push(Value::Tuple(out.lists.len() - 1));
            }
            b'a' => {
                let item = pop(&reader, &mut stack)?;
                let list = top_list(&reader, &stack)?;
                out.lists[list].push(item);
            }
            b'e' | 0x90 => {
                let items = pop_mark(&mut reader, &mut stack, &mut marks)?;
                let list = top_list(&reader, &stack)?;
                out.lists[list].extend(items);
            }
            b's' => {
                let value = pop(&reader, &mut stack)?;
                let key = pop(&reader, &mut stack)?;
                let dict = top_dict(&reader, &stack)?;
                out.dicts[dict].push((key, value));
            }
            b'u' => {
                let items = pop_mark(&mut reader, &mut stack, &mut marks)?;
                let pairs = pairs(&reader, items)?;
                let dict = top_dict(&reader, &stack)?;
                out.dicts[dict].extend(pairs);
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
                let raw = reader.take(8)?;
                let mut be = [0u8; 8];
                be.copy_from_slice(raw);
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
            0x94 => {
                let top = stack
                    .last()
                    .ok_or_else(|| reader.error("MEMOIZE with an empty stack".into()))?;
                memo.insert(memo.len() as u64, top.clone());
            }
            b'q' | b'r' => {
                let key = if op == b'q' { reader.uint(1)? } else { reader.uint(4)? };
                let top = stack
                    .last()
                    .ok_or_else(|| reader.error("PUT with an empty stack".into()))?;
                memo.insert(key, top.clone());
            }
            b'h' | b'j' => {
                let key = if op == b'h' { reader.uint(1)? } else { reader.uint(4)? };
                let value = memo
                    .get(&key)
                    .cloned()
                    .ok_or_else(|| reader.error(format!("memo entry {key} read before it was written")))?;
                stack.push(value);
            }
            b'0' => {
                pop(&reader, &mut stack)?;
            }
            b'1' => {
                pop_mark(&mut reader, &mut stack, &mut marks)?;
            }
            b'2' => {
                let top = stack
                    .last()
                    .cloned()
                    .ok_or_else(|| reader.error("DUP with an empty stack".into()))?;
                stack.push(top);
            }
            other => {
                let what = match other {
                    b'c' | 0x93 => " (a class or function reference)",
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

fn pop(reader: &Reader<'_>, stack: &mut Vec<Value>) -> Result<Value, PickleError> {
    stack
        .pop()
        .ok_or_else(|| reader.error("opcode needs a value but the stack is empty".into()))
}

fn pop_mark(
    reader: &mut Reader<'_>,
    stack: &mut Vec<Value>,
    marks: &mut Vec<usize>,
) -> Result<Vec<Value>, PickleError> {
    let mark = marks
        .pop()
        .ok_or_else(|| reader.error("opcode needs a MARK but there is none".into()))?;
    if mark > stack.len() {
        return Err(reader.error("MARK points past the stack".into()));
    }
    Ok(stack.split_off(mark))
}

fn pairs(reader: &Reader<'_>, items: Vec<Value>) -> Result<Vec<(Value, Value)>, PickleError> {
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

fn top_list(reader: &Reader<'_>, stack: &[Value]) -> Result<usize, PickleError> {
    match stack.last() {
        Some(Value::List(i)) => Ok(*i),
        _ => Err(reader.error("APPEND to something that is not a list".into())),
    }
}

fn top_dict(reader: &Reader<'_>, stack: &[Value]) -> Result<usize, PickleError> {
    match stack.last() {
        Some(Value::Dict(i)) => Ok(*i),
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
        let pickle = decode(SAMPLE).unwrap();
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
            let err = decode(&SAMPLE[..len]).unwrap_err();
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
        let pickle = decode(&bytes).unwrap();
        let root = pickle.root.as_ref().unwrap();
        assert_eq!(pickle.get(root, "k3"), Some(&Value::Str("last".into())));
        assert_eq!(pickle.get(root, "k19"), Some(&Value::Int(19)));
        assert_eq!(pickle.get(root, "k20"), None);
    }

    #[test]
    fn refuses_code() {
        // pickle.dumps(print, protocol=4): a reference to a builtin.
        let bytes = b"\x80\x04\x95\x16\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x05print\x94\x93\x94.";
        let err = decode(bytes).unwrap_err();
        assert!(err.message.contains("0x93"), "{}", err.message);
    }
}
