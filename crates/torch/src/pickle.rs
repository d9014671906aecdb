//! A pickle machine that never executes anything: it reads the opcodes of protocols 0–5 into
//! a graph of plain values. A global (`GLOBAL`, `STACK_GLOBAL`) is only its two names; a call
//! (`REDUCE`, `NEWOBJ`, `INST`, `OBJ`) is only the callee, its arguments and what `BUILD`,
//! `APPEND`s and `SETITEM`s add to its result. What a call means (a tensor, an ordered dict)
//! is decided afterwards by the caller (`walk.rs`), which understands a few callees and
//! reports every other as a problem; nothing is ever looked up or run.
//!
//! Invariants: every value is a node of one arena, added by one opcode, so the arena, the
//! stack and the memo each hold at most as many entries as the pickle has bytes; payloads
//! (strings, bytes) are bounded by the bytes left. Shared and cyclic values are shared node
//! ids, never copies.

use crate::codec::le::Le;
use std::collections::HashMap;

/// A node of the arena.
pub(crate) type Id = u32;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// An integer wider than 64 bits, as `LONG1`/`LONG4` give it: its byte count only.
    BigInt(usize),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Id>),
    Tuple(Vec<Id>),
    Dict(Vec<(Id, Id)>),
    Set(Vec<Id>),
    Global(String, String),
    /// A persistent id: a reference to something outside the pickle (a `torch.save` storage).
    Persistent(Id),
    /// A call the machine did not make.
    Call(Call),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Call {
    pub(crate) callee: Id,
    pub(crate) args: Id,
    /// What `BUILD` set (the object's state), if anything.
    pub(crate) state: Option<Id>,
    /// What `APPEND(S)` and `SETITEM(S)` added to the result.
    pub(crate) items: Vec<Id>,
    pub(crate) pairs: Vec<(Id, Id)>,
}

/// The values of one pickle; `root` is what `STOP` returned.
#[derive(Debug)]
pub(crate) struct Pickle {
    nodes: Vec<Value>,
    pub(crate) root: Id,
}

impl Pickle {
    pub(crate) fn get(&self, id: Id) -> &Value {
        &self.nodes[id as usize]
    }

    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Every value, in the order the machine made them.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Value> {
        self.nodes.iter()
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PickleError {
    #[error("the pickle ends before its STOP")]
    Truncated,
    #[error("pickle opcode {0:#04x} at byte {1} is not one this reader knows")]
    UnknownOpcode(u8, usize),
    #[error("pickle opcode {0} at byte {1}: {2}")]
    Bad(&'static str, usize, String),
}

/// Reads the pickle `data` into its values.
pub(crate) fn load(data: &[u8]) -> Result<Pickle, PickleError> {
    load_prefix(data).map(|(p, _)| p)
}

/// Reads the pickle at the start of `data` (a legacy `torch.save` file is several pickles in a
/// row, then raw storages); returns it and how many bytes it took.
pub(crate) fn load_prefix(data: &[u8]) -> Result<(Pickle, usize), PickleError> {
    Machine {
        le: Le::new(data),
        nodes: Vec::new(),
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    }
    .run()
}

struct Machine<'a> {
    /// The pickle's bytes and where the next opcode is.
    le: Le<'a>,
    nodes: Vec<Value>,
    stack: Vec<Id>,
    /// Stack lengths at each `MARK`.
    marks: Vec<usize>,
    memo: HashMap<u32, Id>,
}

impl Machine<'_> {
    fn run(mut self) -> Result<(Pickle, usize), PickleError> {
        loop {
            let at = self.le.pos();
            let op = self.take(1)?[0];
            let bad = |name: &'static str, why: &str| PickleError::Bad(name, at, why.into());
            match op {
                b'.' => {
                    let root = self.pop(at)?;
                    let end = self.le.pos();
                    let p = Pickle {
                        nodes: self.nodes,
                        root,
                    };
                    return Ok((p, end));
                }
                // PROTO n; FRAME n: framing only changes how a reader buffers.
                0x80 => {
                    self.take(1)?;
                }
                0x95 => {
                    self.take(8)?;
                }
                b'(' => self.marks.push(self.stack.len()),
                b'0' => {
                    self.pop(at)?;
                }
                b'1' => {
                    self.pop_mark(at)?;
                }
                b'2' => {
                    let top = self.top(at, "DUP")?;
                    self.stack.push(top);
                }
                b'N' => self.push(Value::None),
                0x88 => self.push(Value::Bool(true)),
                0x89 => self.push(Value::Bool(false)),
                b'J' => {
                    let v = i32::from_le_bytes(self.array()?);
                    self.push(Value::Int(v.into()));
                }
                b'K' => {
                    let v = self.take(1)?[0];
                    self.push(Value::Int(v.into()));
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.array()?);
                    self.push(Value::Int(v.into()));
                }
                0x8a => {
                    let n = self.take(1)?[0] as usize;
                    let v = long(self.take(n)?);
                    self.push(v);
                }
                0x8b => {
                    let n = i32::from_le_bytes(self.array()?);
                    let n = usize::try_from(n).map_err(|_| bad("LONG4", "negative length"))?;
                    let v = long(self.take(n)?);
                    self.push(v);
                }
                b'I' | b'L' => {
                    let line = self.line()?;
                    let text = line.trim_end_matches('L');
                    let v = match text {
                        "00" => Value::Bool(false),
                        "01" => Value::Bool(true),
                        _ => match text.parse::<i64>() {
                            Ok(v) => Value::Int(v),
                            Err(_) => Value::BigInt(text.len()),
                        },
                    };
                    self.push(v);
                }
                b'F' => {
                    let line = self.line()?;
                    let v = line
                        .trim()
                        .parse::<f64>()
                        .map_err(|_| bad("FLOAT", "not a number"))?;
                    self.push(Value::Float(v));
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.array()?);
                    self.push(Value::Float(v));
                }
                // Strings: BINUNICODE, SHORT_BINUNICODE, BINUNICODE8, UNICODE (raw-unicode-escape,
                // read as UTF-8), and the byte strings of protocol 0–2 (`str` of Python 2).
                b'X' | 0x8c | 0x8d | b'V' | b'T' | b'U' | b'S' => {
                    let bytes = match op {
                        b'X' | b'T' => self.counted::<4>()?,
                        0x8c | b'U' => self.counted::<1>()?,
                        0x8d => self.counted::<8>()?,
                        b'V' => self.line()?.into_bytes(),
                        _ => {
                            let line = self.line()?;
                            let t = line.trim();
                            t.get(1..t.len().saturating_sub(1))
                                .unwrap_or("")
                                .as_bytes()
                                .to_vec()
                        }
                    };
                    let s = String::from_utf8(bytes)
                        .map_err(|_| bad("a string opcode", "not UTF-8"))?;
                    self.push(Value::Str(s));
                }
                // BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8.
                b'B' | b'C' | 0x8e | 0x96 => {
                    let bytes = match op {
                        b'B' => self.counted::<4>()?,
                        b'C' => self.counted::<1>()?,
                        _ => self.counted::<8>()?,
                    };
                    self.push(Value::Bytes(bytes));
                }
                b']' => self.push(Value::List(Vec::new())),
                b')' => self.push(Value::Tuple(Vec::new())),
                b'}' => self.push(Value::Dict(Vec::new())),
                0x8f => self.push(Value::Set(Vec::new())),
                b'l' => {
                    let items = self.pop_mark(at)?;
                    self.push(Value::List(items));
                }
                b't' | 0x91 => {
                    let items = self.pop_mark(at)?;
                    self.push(match op {
                        b't' => Value::Tuple(items),
                        _ => Value::Set(items),
                    });
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let from = self
                        .stack
                        .len()
                        .checked_sub(n)
                        .ok_or_else(|| bad("TUPLE1-3", "stack too short"))?;
                    let items = self.stack.split_off(from);
                    self.push(Value::Tuple(items));
                }
                b'd' => {
                    let items = self.pop_mark(at)?;
                    let pairs = pairs(&items).ok_or_else(|| bad("DICT", "odd item count"))?;
                    self.push(Value::Dict(pairs));
                }
                b'a' => {
                    let v = self.pop(at)?;
                    self.extend(at, vec![v])?;
                }
                b'e' | 0x90 => {
                    let items = self.pop_mark(at)?;
                    self.extend(at, items)?;
                }
                b's' => {
                    let v = self.pop(at)?;
                    let k = self.pop(at)?;
                    self.set_items(at, vec![(k, v)])?;
                }
                b'u' => {
                    let items = self.pop_mark(at)?;
                    let p = pairs(&items).ok_or_else(|| bad("SETITEMS", "odd item count"))?;
                    self.set_items(at, p)?;
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.push(Value::Global(module, name));
                }
                0x93 => {
                    let name = self.pop_str(at)?;
                    let module = self.pop_str(at)?;
                    self.push(Value::Global(module, name));
                }
                b'R' | 0x81 => {
                    let args = self.pop(at)?;
                    let callee = self.pop(at)?;
                    self.call(callee, args);
                }
                0x92 => {
                    let _kwargs = self.pop(at)?;
                    let args = self.pop(at)?;
                    let callee = self.pop(at)?;
                    self.call(callee, args);
                }
                b'i' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let items = self.pop_mark(at)?;
                    let callee = self.add(Value::Global(module, name));
                    let args = self.add(Value::Tuple(items));
                    self.call(callee, args);
                }
                b'o' => {
                    let mut items = self.pop_mark(at)?.into_iter();
                    let callee = items.next().ok_or_else(|| bad("OBJ", "no class"))?;
                    let args = self.add(Value::Tuple(items.collect()));
                    self.call(callee, args);
                }
                b'b' => {
                    let state = self.pop(at)?;
                    let target = self.top(at, "BUILD")?;
                    // An ordered dict's state is its attributes (a state dict's `_metadata`):
                    // nothing a reader of its items needs.
                    if let Value::Call(c) = &mut self.nodes[target as usize] {
                        c.state = Some(state);
                    }
                }
                b'Q' => {
                    let pid = self.pop(at)?;
                    self.push(Value::Persistent(pid));
                }
                b'P' => {
                    let line = self.line()?;
                    let pid = self.add(Value::Str(line));
                    self.push(Value::Persistent(pid));
                }
                b'p' => {
                    let i = self
                        .line()?
                        .parse::<u32>()
                        .map_err(|_| bad("PUT", "not an index"))?;
                    self.put(at, i)?;
                }
                b'q' => {
                    let i = self.take(1)?[0];
                    self.put(at, i.into())?;
                }
                b'r' => {
                    let i = u32::from_le_bytes(self.array()?);
                    self.put(at, i)?;
                }
                0x94 => {
                    let i = u32::try_from(self.memo.len()).unwrap_or(u32::MAX);
                    self.put(at, i)?;
                }
                b'g' | b'h' | b'j' => {
                    let i = match op {
                        b'g' => self
                            .line()?
                            .parse::<u32>()
                            .map_err(|_| bad("GET", "not an index"))?,
                        b'h' => self.take(1)?[0].into(),
                        _ => u32::from_le_bytes(self.array()?),
                    };
                    let id = *self
                        .memo
                        .get(&i)
                        .ok_or_else(|| bad("GET", &format!("memo {i} is empty")))?;
                    self.stack.push(id);
                }
                // EXT1/2/4 name globals by a registry the reader would have to share; the
                // out-of-band buffers of protocol 5 are not in the file.
                0x82..=0x84 | 0x97 | 0x98 => {
                    return Err(bad(
                        "EXT/NEXT_BUFFER",
                        "refers to something outside the file",
                    ))
                }
                _ => return Err(PickleError::UnknownOpcode(op, at)),
            }
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], PickleError> {
        self.le.take(n).ok_or(PickleError::Truncated)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        self.le.array().ok_or(PickleError::Truncated)
    }

    /// A payload after its little-endian length of `N` bytes (bounded by the bytes left).
    fn counted<const N: usize>(&mut self) -> Result<Vec<u8>, PickleError> {
        let mut len = [0u8; 8];
        len[..N].copy_from_slice(self.take(N)?);
        let n = usize::try_from(u64::from_le_bytes(len)).map_err(|_| PickleError::Truncated)?;
        Ok(self.take(n)?.to_vec())
    }

    /// A line of a text opcode, without its `\n`.
    fn line(&mut self) -> Result<String, PickleError> {
        let rest = self.le.rest();
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or(PickleError::Truncated)?;
        self.le.skip(n + 1).ok_or(PickleError::Truncated)?;
        Ok(String::from_utf8_lossy(&rest[..n]).into_owned())
    }

    fn add(&mut self, v: Value) -> Id {
        // At most one node per byte of the pickle (plus those a text opcode adds), far below
        // u32::MAX for any pickle this reader accepts (`MAX_PICKLE`).
        self.nodes.push(v);
        (self.nodes.len() - 1) as Id
    }

    fn push(&mut self, v: Value) {
        let id = self.add(v);
        self.stack.push(id);
    }

    fn pop(&mut self, at: usize) -> Result<Id, PickleError> {
        // A value under the innermost mark belongs to the marked frame's caller.
        let floor = self.marks.last().copied().unwrap_or(0);
        if self.stack.len() <= floor {
            return Err(PickleError::Bad("a pop", at, "empty stack".into()));
        }
        Ok(self.stack.pop().expect("above the floor"))
    }

    /// The top of the stack, which must be above the innermost mark.
    fn top(&self, at: usize, what: &'static str) -> Result<Id, PickleError> {
        let floor = self.marks.last().copied().unwrap_or(0);
        match self.stack.len() > floor {
            true => Ok(self.stack[self.stack.len() - 1]),
            false => Err(PickleError::Bad(what, at, "empty stack".into())),
        }
    }

    fn pop_str(&mut self, at: usize) -> Result<String, PickleError> {
        let id = self.pop(at)?;
        match self.get(id) {
            Value::Str(s) => Ok(s.clone()),
            _ => Err(PickleError::Bad(
                "STACK_GLOBAL",
                at,
                "a name is not a string".into(),
            )),
        }
    }

    fn get(&self, id: Id) -> &Value {
        &self.nodes[id as usize]
    }

    fn pop_mark(&mut self, at: usize) -> Result<Vec<Id>, PickleError> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| PickleError::Bad("a marked opcode", at, "no MARK".into()))?;
        Ok(self.stack.split_off(m.min(self.stack.len())))
    }

    fn put(&mut self, at: usize, i: u32) -> Result<(), PickleError> {
        let top = self.top(at, "PUT")?;
        self.memo.insert(i, top);
        Ok(())
    }

    /// `callee(*args)`, recorded; `collections.OrderedDict()` is a dict at once, so its
    /// `SETITEMS` land as a dict's, and so is Python 2's `OrderedDict([[k, v], …])`.
    fn call(&mut self, callee: Id, args: Id) {
        let ordered_dict = matches!(self.get(callee),
            Value::Global(m, n) if m == "collections" && n == "OrderedDict");
        if ordered_dict {
            if let Some(pairs) = self.pairs_of(args) {
                return self.push(Value::Dict(pairs));
            }
        }
        self.push(Value::Call(Call {
            callee,
            args,
            state: None,
            items: Vec::new(),
            pairs: Vec::new(),
        }));
    }

    /// The pairs of `()` or `([[k, v], …],)` (each pair a list or a tuple of two).
    fn pairs_of(&self, args: Id) -> Option<Vec<(Id, Id)>> {
        let Value::Tuple(a) = self.get(args) else {
            return None;
        };
        match a.as_slice() {
            [] => Some(Vec::new()),
            [list] => match self.get(*list) {
                Value::List(items) | Value::Tuple(items) => items
                    .iter()
                    .map(|&p| match self.get(p) {
                        Value::List(kv) | Value::Tuple(kv) if kv.len() == 2 => Some((kv[0], kv[1])),
                        _ => None,
                    })
                    .collect(),
                _ => None,
            },
            _ => None,
        }
    }

    fn extend(&mut self, at: usize, items: Vec<Id>) -> Result<(), PickleError> {
        let top = self.top(at, "APPEND")?;
        match &mut self.nodes[top as usize] {
            Value::List(v) | Value::Set(v) => v.extend(items),
            Value::Call(c) => c.items.extend(items),
            _ => return Err(PickleError::Bad("APPEND", at, "not a list".into())),
        }
        Ok(())
    }

    fn set_items(&mut self, at: usize, items: Vec<(Id, Id)>) -> Result<(), PickleError> {
        let top = self.top(at, "SETITEM")?;
        match &mut self.nodes[top as usize] {
            Value::Dict(v) => v.extend(items),
            Value::Call(c) => c.pairs.extend(items),
            _ => return Err(PickleError::Bad("SETITEM", at, "not a dict".into())),
        }
        Ok(())
    }
}

/// A little-endian two's-complement integer of `LONG1`/`LONG4`.
fn long(bytes: &[u8]) -> Value {
    if bytes.len() > 8 {
        return Value::BigInt(bytes.len());
    }
    let mut v: i64 = 0;
    for (i, &b) in bytes.iter().enumerate() {
        v |= i64::from(b) << (8 * i);
    }
    // Sign-extend from the top byte given.
    let bits = 8 * bytes.len() as u32;
    if (1..64).contains(&bits) {
        v = (v << (64 - bits)) >> (64 - bits);
    }
    Value::Int(v)
}

fn pairs(items: &[Id]) -> Option<Vec<(Id, Id)>> {
    (items.len() % 2 == 0).then(|| items.chunks(2).map(|p| (p[0], p[1])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longs_are_sign_extended() {
        assert_eq!(long(&[]), Value::Int(0));
        assert_eq!(long(&[0xff]), Value::Int(-1));
        assert_eq!(long(&[0x80, 0x00]), Value::Int(128));
        assert_eq!(long(&[0; 8]), Value::Int(0));
        assert_eq!(long(&[0xff; 8]), Value::Int(-1));
        assert_eq!(long(&[0; 9]), Value::BigInt(9));
    }

    #[test]
    fn a_protocol_2_dict() {
        // pickle.dumps({'a': [1, 2.5, None], 'b': (True,)}, protocol=2)
        let p = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01G@\x04\x00\x00\x00\x00\x00\x00NeX\x01\x00\x00\x00bq\x03\x88\x85q\x04u.";
        let v = load(p).unwrap();
        let Value::Dict(items) = v.get(v.root) else {
            panic!("{:?}", v.get(v.root))
        };
        assert_eq!(items.len(), 2);
        assert_eq!(v.get(items[0].0), &Value::Str("a".into()));
        let Value::List(l) = v.get(items[0].1) else {
            panic!()
        };
        assert_eq!(v.get(l[1]), &Value::Float(2.5));
    }

    #[test]
    fn a_call_is_recorded_not_made() {
        // pickle.dumps of an object whose __reduce__ is (os.system, ('echo hi',)), protocol 2.
        let p = b"\x80\x02cposix\nsystem\nq\x00X\x07\x00\x00\x00echo hiq\x01\x85q\x02Rq\x03.";
        let v = load(p).unwrap();
        let Value::Call(c) = v.get(v.root) else {
            panic!()
        };
        assert_eq!(
            v.get(c.callee),
            &Value::Global("posix".into(), "system".into())
        );
    }

    #[test]
    fn damaged_pickles_are_errors() {
        for p in [
            &b""[..],
            b"\x80\x02",
            b"\x80\x02X\xff\xff\xff\xffab.",
            b"\x80\x02h\x05.",
            b"\x80\x02a.",
            b"\x80\x02\xfe.",
            b"(\x80\x02u.",
            b"\x80\x02K\x01K\x02u.",
        ] {
            assert!(load(p).is_err(), "{p:?}");
        }
    }

    #[test]
    fn a_cycle_is_a_shared_node() {
        // l = []; l.append(l); pickle.dumps(l, protocol=2)
        let p = b"\x80\x02]q\x00h\x00a.";
        let v = load(p).unwrap();
        assert_eq!(v.get(v.root), &Value::List(vec![v.root]));
    }
}
