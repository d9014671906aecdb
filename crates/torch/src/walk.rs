//! What a `torch.save` pickle holds, read off the machine's values (`pickle.rs`) without
//! running anything: tensors (the calls of `torch._utils._rebuild_tensor_v2` and its kin on a
//! persistent storage id), the dicts, lists and tuples that hold tensors as directories, and
//! every other value as JSON in its dict's `__values__.json`. A call of anything this module
//! does not know (a class of the training script) is that entry's note; a call of what a
//! pickle scanner calls dangerous (`DANGEROUS`: `os.system`, `eval`) is its problem, and a
//! dangerous import anywhere in the pickle, even one no value uses, is the file's problem.
//!
//! Names are those `state_dict()` gives: a module's (or a TorchScript module's) parameters,
//! buffers and submodules are `backbone.0.weight`, one entry of the directory the module is
//! in, whether the file holds the module itself (`torch.save(model)`, TorchScript, a YOLO-style
//! `{"model": model}`) or its state dict; dicts, lists and tuples are directories.
//!
//! Invariants: the walk visits at most `budget` values (a pickle of shared values cannot make
//! it exponential) and nests at most `MAX_DEPTH` deep (cycles end there).

use std::collections::{BTreeMap, HashMap};

use super::pickle::{Call, Id, Pickle, Value};
use crate::codec::le;
use crate::model::{DType, Finding};

const MAX_DEPTH: usize = 64;
/// The key of an object's class in its directory's values (and of its problem: not run).
const CLASS: &str = "__class__";
/// The longest bytes value shown in full (as hex) in `__values__.json`.
const BYTES_SHOWN: usize = 64;

/// A tensor of the pickle: where its elements are and how they are laid out.
#[derive(Clone, Debug)]
pub(crate) struct TensorSpec {
    /// The storage's key (its member `data/<key>` of the archive), if the tensor has one.
    pub(crate) storage: String,
    pub(crate) dtype: DType,
    /// The dtype's name in torch (`float8_e4m3fn`), for the `.json`.
    pub(crate) torch_dtype: String,
    pub(crate) shape: Vec<u64>,
    pub(crate) stride: Vec<u64>,
    /// In elements of `dtype`.
    pub(crate) offset: u64,
    /// Damage: what is wrong with it (a layout that is not a tensor's).
    pub(crate) problem: Option<String>,
    /// What is not decoded (a dtype, a quantized or sparse tensor): a note, not a problem.
    pub(crate) note: Option<String>,
}

/// Everything found, by tree path (components).
#[derive(Default, Debug)]
pub(crate) struct Found {
    pub(crate) tensors: Vec<(Vec<String>, TensorSpec)>,
    /// A directory's plain values and its entries' problems and notes.
    pub(crate) values: BTreeMap<Vec<String>, Values>,
    /// The dangerous imports (`DANGEROUS`) of the pickle no entry's problem names.
    pub(crate) dangerous: Vec<String>,
}

#[derive(Default, Debug)]
pub(crate) struct Values {
    pub(crate) values: serde_json::Map<String, serde_json::Value>,
    /// Entries that fail a verdict: a dangerous call.
    pub(crate) problems: serde_json::Map<String, serde_json::Value>,
    /// Entries not run (a class modelfs does not know) or not read: notes.
    pub(crate) notes: serde_json::Map<String, serde_json::Value>,
}

/// What a pickle scanner (picklescan, modelscan, fickling) calls dangerous to import: whole
/// modules that reach the system, and the builtins that run code or walk to it
/// (`getattr` chains). Listed in README (Verdicts).
const DANGEROUS_MODULES: [&str; 27] = [
    "os",
    "posix",
    "nt",
    "subprocess",
    "sys",
    "socket",
    "shutil",
    "runpy",
    "pty",
    "commands",
    "webbrowser",
    "importlib",
    "ctypes",
    "code",
    "codeop",
    "marshal",
    "pickle",
    "_pickle",
    "dill",
    "bdb",
    "pdb",
    "multiprocessing",
    "asyncio",
    "requests",
    "urllib",
    "httplib",
    "ftplib",
];
/// Functions of otherwise harmless modules that run code or reach any attribute.
const DANGEROUS_NAMES: [(&str, &str); 16] = [
    ("builtins", "eval"),
    ("builtins", "exec"),
    ("builtins", "execfile"),
    ("builtins", "compile"),
    ("builtins", "open"),
    ("builtins", "getattr"),
    ("builtins", "setattr"),
    ("builtins", "delattr"),
    ("builtins", "apply"),
    ("builtins", "breakpoint"),
    ("builtins", "input"),
    ("builtins", "globals"),
    ("builtins", "vars"),
    ("operator", "attrgetter"),
    ("operator", "methodcaller"),
    ("numpy.testing._private.utils", "runstring"),
];

/// Whether importing `module.name` is what a pickle scanner calls dangerous.
pub(crate) fn dangerous(module: &str, name: &str) -> bool {
    let top = module.split('.').next().unwrap_or(module);
    let module = match module {
        "__builtin__" | "__builtins__" => "builtins",
        m => m,
    };
    DANGEROUS_MODULES.contains(&top)
        || DANGEROUS_NAMES.contains(&(module, name))
        // `getattr` chains reach anything through a dunder (`__class__.__base__…`).
        || (module == "builtins" && name.starts_with("__") && name != "__build_class__")
}

/// Reads the tensors and values of `p`; a bare tensor at the root is named `stem`.
pub fn walk(p: &Pickle, stem: &str) -> Found {
    let mut w = Walker {
        p,
        budget: p.len().saturating_mul(4).saturating_add(1024),
        holds: HashMap::new(),
        found: Found::default(),
    };
    let root = p.root;
    if w.tensor(root).is_some() || !w.holds_tensor(root, 0) {
        w.entry(&[], stem, root, 0);
    } else {
        w.container(&[], root, 0);
    }
    // Every import, reached or not (a scanner reads the opcodes, not the result).
    let named: Vec<&serde_json::Value> = w
        .found
        .values
        .values()
        .flat_map(|v| v.problems.values())
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    for v in p.values() {
        if let Value::Global(m, n) = v {
            let at = format!("{m}.{n}");
            let told = named
                .iter()
                .any(|t| t.as_str().is_some_and(|t| t.contains(&at)));
            if dangerous(m, n) && !told && seen.insert(at.clone()) {
                w.found.dangerous.push(format!(
                    "the pickle imports {at}, which a pickle scanner calls dangerous (never run here)"
                ));
            }
        }
    }
    w.found
}

struct Walker<'a> {
    p: &'a Pickle,
    budget: usize,
    /// Whether a value holds a tensor, by node (`holds_tensor`).
    holds: HashMap<Id, bool>,
    found: Found,
}

impl Walker<'_> {
    fn spend(&mut self) -> bool {
        self.budget = self.budget.saturating_sub(1);
        self.budget > 0
    }

    /// The entries of a dict, list, tuple or object that holds a tensor, as the directory
    /// `dir`.
    fn container(&mut self, dir: &[String], id: Id, depth: usize) {
        let entries: Vec<(Result<String, String>, Id)> = match self.p.get(id) {
            Value::Dict(pairs) => pairs.iter().map(|&(k, v)| (self.key(k), v)).collect(),
            Value::List(items) | Value::Tuple(items) => items
                .iter()
                .enumerate()
                .map(|(i, &v)| (Ok(i.to_string()), v))
                .collect(),
            Value::Call(c) => {
                let c = c.clone();
                return self.object_in(dir, "", &c, depth);
            }
            _ => return,
        };
        for (i, (key, v)) in entries.into_iter().enumerate() {
            match key {
                Ok(name) => self.entry(dir, &name, v, depth + 1),
                Err(why) => self.note(dir, &format!("#{i}"), why),
            }
        }
    }

    /// The entries of the object `c` in directory `dir`, each named `prefix` + its name: an
    /// attribute that is itself an object holding tensors (a submodule) is not a directory
    /// but more entries of `dir`, `prefix` + its name + `.`, as `state_dict()` names them.
    fn object_in(&mut self, dir: &[String], prefix: &str, c: &Call, depth: usize) {
        self.object(dir, prefix, c);
        for (i, (key, v, attribute)) in self.object_entries(c).into_iter().enumerate() {
            let name = match key {
                Ok(name) => format!("{prefix}{name}"),
                Err(why) => {
                    self.note(dir, &format!("{prefix}#{i}"), why);
                    continue;
                }
            };
            let sub = match self.p.get(v) {
                Value::Call(sub) if attribute && self.tensor(v).is_none() => Some(sub.clone()),
                _ => None,
            };
            match sub {
                Some(sub) if self.holds_tensor(v, 0) => {
                    if !self.spend() || depth > MAX_DEPTH {
                        let why = "nested too deep, or shared too often".to_string();
                        self.note(dir, &name, why);
                        continue;
                    }
                    self.object_in(dir, &format!("{name}."), &sub, depth + 1);
                }
                _ => self.entry(dir, &name, v, depth + 1),
            }
        }
    }

    /// The value `id` of entry `name` of directory `dir`.
    fn entry(&mut self, dir: &[String], name: &str, id: Id, depth: usize) {
        if !self.spend() || depth > MAX_DEPTH {
            return self.note(dir, name, "nested too deep, or shared too often".into());
        }
        let mut path = dir.to_vec();
        path.push(name.to_string());
        if let Some(t) = self.tensor(id) {
            return self.found.tensors.push((path, t));
        }
        if self.holds_tensor(id, 0) {
            return self.container(&path, id, depth);
        }
        let mut problems = Vec::new();
        let v = self.json(id, depth, &mut problems);
        // The gravest finding names the entry.
        match problems
            .iter()
            .find(|f| f.severity.fails())
            .or(problems.first())
        {
            Some(f) if f.severity.fails() => self.problem(dir, name, f.text.clone()),
            Some(f) => self.note(dir, name, f.text.clone()),
            None => {
                self.found
                    .values
                    .entry(dir.to_vec())
                    .or_default()
                    .values
                    .insert(name.to_string(), v);
            }
        }
    }

    /// An object whose class is not run (a pickled `nn.Module`, a TorchScript module): its
    /// class and plain attributes go to its directory's values, named `prefix` + their name,
    /// and the call is a note there (what the object would do when built is not known; its
    /// tensors are read all the same), or a problem when its class is dangerous.
    fn object(&mut self, dir: &[String], prefix: &str, c: &Call) {
        let (class, bad) = match self.p.get(c.callee) {
            Value::Global(m, n) => (format!("{m}.{n}"), dangerous(m, n)),
            other => (kind(other).to_string(), false),
        };
        let key = format!("{prefix}{CLASS}");
        let vals = self.found.values.entry(dir.to_vec()).or_default();
        vals.values.insert(key.clone(), class.clone().into());
        match bad {
            true => {
                let why = format!("an object of {class}: dangerous, not run");
                self.problem(dir, &key, why);
            }
            false => {
                let why =
                    format!("an object of {class}: not run (its tensors are read from its state)");
                self.note(dir, &key, why);
            }
        }
        if !self.is_module(c) {
            return; // its attributes are its entries
        }
        if let Some(attrs) = self.state_dict(c) {
            for (k, v) in attrs {
                let Ok(name) = self.key(k) else { continue };
                if !name.starts_with('_') && self.tensor(v).is_none() && !self.holds_tensor(v, 0) {
                    self.entry(dir, &format!("{prefix}{name}"), v, 0);
                }
            }
        }
    }

    /// An object's state as a dict: what `BUILD` set (or the dict of its `(state, slots)`).
    fn state_dict(&self, c: &Call) -> Option<Vec<(Id, Id)>> {
        let mut state = self.p.get(c.state?);
        if let Value::Tuple(parts) = state {
            state = self.p.get(*parts.first()?);
        }
        match state {
            Value::Dict(pairs) => Some(pairs.clone()),
            _ => None,
        }
    }

    /// Whether `c` is a pickled `nn.Module` (its state has `_parameters` and `_modules`).
    fn is_module(&self, c: &Call) -> bool {
        let Some(state) = self.state_dict(c) else {
            return false;
        };
        let has = |want: &str| {
            state
                .iter()
                .any(|&(k, _)| matches!(self.p.get(k), Value::Str(s) if s == want))
        };
        has("_parameters") && has("_modules")
    }

    /// The entries of an object that hold tensors, named as `state_dict()` names them: a
    /// module's parameters, persistent buffers and submodules; any other object's attributes
    /// (a TorchScript module's), and what a dict or list subclass was filled with. Each says
    /// whether it is an attribute (a submodule's entries are named after it with a `.`)
    /// or an item (a directory of its own, as a dict's).
    fn object_entries(&self, c: &Call) -> Vec<(Result<String, String>, Id, bool)> {
        let mut out: Vec<(Result<String, String>, Id, bool)> = Vec::new();
        let state = self.state_dict(c).unwrap_or_default();
        let field = |want: &str| {
            state.iter().find_map(|&(k, v)| match self.p.get(k) {
                Value::Str(s) if s == want => Some(v),
                _ => None,
            })
        };
        if self.is_module(c) {
            let skipped = field("_non_persistent_buffers_set")
                .map(|v| self.names_in(v))
                .unwrap_or_default();
            for (part, skip) in [
                ("_parameters", &[][..]),
                ("_buffers", &skipped[..]),
                ("_modules", &[][..]),
            ] {
                let Some(Value::Dict(pairs)) = field(part).map(|v| self.p.get(v)) else {
                    continue;
                };
                for &(k, v) in pairs {
                    let name = self.key(k);
                    let unsaved = matches!(&name, Ok(n) if skip.contains(n));
                    if self.p.get(v) != &Value::None && !unsaved {
                        out.push((name, v, true));
                    }
                }
            }
            return out;
        }
        out.extend(state.iter().map(|&(k, v)| (self.key(k), v, true)));
        out.extend(c.pairs.iter().map(|&(k, v)| (self.key(k), v, false)));
        out.extend(
            c.items
                .iter()
                .enumerate()
                .map(|(i, &v)| (Ok(i.to_string()), v, false)),
        );
        out
    }

    /// The strings of a set (`{…}`, or `set([…])` of protocol 2).
    fn names_in(&self, id: Id) -> Vec<String> {
        let items = match self.p.get(id) {
            Value::Set(items) | Value::List(items) | Value::Tuple(items) => items.clone(),
            Value::Call(c) => match self
                .tuple(c.args)
                .and_then(|a| a.first())
                .map(|&a| self.p.get(a))
            {
                Some(Value::List(items)) => items.clone(),
                _ => c.items.clone(),
            },
            _ => Vec::new(),
        };
        items
            .into_iter()
            .filter_map(|x| match self.p.get(x) {
                Value::Str(s) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    /// A problem of entry `name`: it fails a verdict.
    fn problem(&mut self, dir: &[String], name: &str, why: String) {
        let vals = self.found.values.entry(dir.to_vec()).or_default();
        vals.problems.insert(name.to_string(), why.into());
    }

    /// A note of entry `name`: not run or not read, which fails no verdict.
    fn note(&mut self, dir: &[String], name: &str, why: String) {
        let vals = self.found.values.entry(dir.to_vec()).or_default();
        vals.notes.insert(name.to_string(), why.into());
    }

    /// A dict key as a file name: strings as they are, numbers as Python prints them.
    fn key(&self, id: Id) -> Result<String, String> {
        Ok(match self.p.get(id) {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => if *b { "True" } else { "False" }.into(),
            Value::None => "None".into(),
            Value::Float(f) => f.to_string(),
            other => {
                return Err(format!(
                    "a key that is not a string or a number ({})",
                    kind(other)
                ))
            }
        })
    }

    /// Whether `id` is a dict, list or tuple with a tensor somewhere inside.
    fn holds_tensor(&mut self, id: Id, depth: usize) -> bool {
        if let Some(&h) = self.holds.get(&id) {
            return h;
        }
        if depth > MAX_DEPTH || !self.spend() {
            return false;
        }
        // A cycle back to `id` finds "no" while `id` is being decided.
        self.holds.insert(id, false);
        let children: Vec<Id> = match self.p.get(id) {
            Value::Dict(pairs) => pairs.iter().map(|&(_, v)| v).collect(),
            Value::List(items) | Value::Tuple(items) => items.clone(),
            Value::Call(c) if self.tensor(id).is_none() => {
                let c = c.clone();
                self.object_entries(&c)
                    .into_iter()
                    .map(|(_, v, _)| v)
                    .collect()
            }
            _ => Vec::new(),
        };
        let h = children
            .into_iter()
            .any(|c| self.tensor(c).is_some() || self.holds_tensor(c, depth + 1));
        self.holds.insert(id, h);
        h
    }

    /// The tensor `id` is, if it is a call that rebuilds one (with a problem where it cannot
    /// be read: a quantized or sparse tensor, an unknown dtype, a storage that is not one).
    fn tensor(&self, id: Id) -> Option<TensorSpec> {
        let Value::Call(c) = self.p.get(id) else {
            return None;
        };
        let (module, name) = self.global(c.callee)?;
        let args = self.tuple(c.args).unwrap_or(&[]);
        match (module, name) {
            ("torch._utils", "_rebuild_tensor_v2" | "_rebuild_tensor") => {
                Some(self.rebuilt(args, None))
            }
            ("torch._utils", "_rebuild_tensor_v3") => {
                Some(self.rebuilt(args, args.get(6).copied()))
            }
            ("torch._utils", "_rebuild_parameter" | "_rebuild_parameter_with_state") => {
                args.first().and_then(|&t| self.tensor(t))
            }
            // A tensor subclass: the rebuild call and its arguments, then the class.
            ("torch._tensor", "_rebuild_from_type_v2" | "_rebuild_from_type") => {
                let (&f, &a) = (args.first()?, args.get(2)?);
                let (fm, fname) = self.global(f)?;
                match (fm, fname) {
                    ("torch._utils", "_rebuild_tensor_v2" | "_rebuild_tensor") => {
                        Some(self.rebuilt(self.tuple(a).unwrap_or(&[]), None))
                    }
                    ("torch._utils", "_rebuild_tensor_v3") => {
                        let a = self.tuple(a).unwrap_or(&[]);
                        Some(self.rebuilt(a, a.get(6).copied()))
                    }
                    _ => Some(unread(format!(
                        "a tensor rebuilt by {fm}.{fname}: not read"
                    ))),
                }
            }
            ("torch._utils", other) if other.starts_with("_rebuild_") => Some(unread(format!(
                "a tensor rebuilt by torch._utils.{other} (quantized, sparse, nested or on a \
                 device without storage): not read"
            ))),
            _ => None,
        }
    }

    /// `_rebuild_tensor_v2(storage, storage_offset, size, stride, …)`; `dtype` is v3's own.
    fn rebuilt(&self, args: &[Id], dtype: Option<Id>) -> TensorSpec {
        let mut t = unread(String::new());
        t.note = None;
        let int = |i: usize| match args.get(i).map(|&a| self.p.get(a)) {
            Some(Value::Int(v)) => u64::try_from(*v).ok(),
            _ => None,
        };
        let ints = |i: usize| -> Option<Vec<u64>> {
            let items = self.tuple(*args.get(i)?)?;
            items
                .iter()
                .map(|&x| match self.p.get(x) {
                    Value::Int(v) => u64::try_from(*v).ok(),
                    _ => None,
                })
                .collect()
        };
        let (Some(offset), Some(shape), Some(stride)) = (int(1), ints(2), ints(3)) else {
            t.problem = Some("its size, stride or storage offset is not a tuple of counts".into());
            return t;
        };
        if shape.len() != stride.len() {
            t.problem = Some(format!(
                "{} sizes but {} strides",
                shape.len(),
                stride.len()
            ));
            return t;
        }
        (t.offset, t.shape, t.stride) = (offset, shape, stride);
        // The persistent id: ('storage', storage type, key, location, numel).
        let pid = match args.first().map(|&a| self.p.get(a)) {
            Some(Value::Persistent(pid)) => self.tuple(*pid).unwrap_or(&[]),
            _ => &[],
        };
        let key = match pid.get(2).map(|&k| self.p.get(k)) {
            Some(Value::Str(k)) => k.clone(),
            Some(Value::Int(k)) => k.to_string(),
            _ => {
                t.problem = Some("its storage is not a torch.save storage".into());
                return t;
            }
        };
        t.storage = key;
        // A legacy view of a storage: `(view key, offset in elements, size)`; the tensor's
        // offset is within the view.
        if let Some(Value::Tuple(view)) = pid.get(5).map(|&v| self.p.get(v)) {
            let at = match view.get(1).map(|&o| self.p.get(o)) {
                Some(Value::Int(o)) => u64::try_from(*o).ok(),
                _ => None,
            };
            match at.and_then(|o| t.offset.checked_add(o)) {
                Some(o) => t.offset = o,
                None => {
                    t.problem = Some("its storage view's offset is not a count".into());
                    return t;
                }
            }
        }
        let named = match dtype {
            Some(d) => self
                .global(d)
                .filter(|(m, _)| *m == "torch")
                .map(|(_, n)| n),
            None => pid
                .get(1)
                .and_then(|&s| self.global(s))
                .and_then(|(_, n)| storage_dtype(n)),
        };
        let Some(name) = named else {
            t.problem = Some("its dtype or storage type is not one torch saves".into());
            return t;
        };
        t.torch_dtype = name.to_string();
        match dtype_of(name) {
            Some(d) => t.dtype = d,
            None => t.note = Some(format!("dtype {name}: not decoded")),
        }
        t
    }

    fn global(&self, id: Id) -> Option<(&str, &str)> {
        match self.p.get(id) {
            Value::Global(m, n) => Some((m, n)),
            _ => None,
        }
    }

    fn tuple(&self, id: Id) -> Option<&[Id]> {
        match self.p.get(id) {
            Value::Tuple(items) => Some(items),
            _ => None,
        }
    }

    /// A plain value as JSON; what is not plain is pushed to `problems` (and shown as null).
    fn json(&mut self, id: Id, depth: usize, problems: &mut Vec<Finding>) -> serde_json::Value {
        use serde_json::Value as J;
        if depth > MAX_DEPTH || !self.spend() {
            problems.push(Finding::note("nested too deep, or shared too often"));
            return J::Null;
        }
        match self.p.get(id) {
            Value::None => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::BigInt(n) => J::String(format!("<an integer of {n} bytes>")),
            Value::Float(f) => match serde_json::Number::from_f64(*f) {
                Some(n) => J::Number(n),
                None => J::String(f.to_string()),
            },
            Value::Str(s) => J::String(s.clone()),
            Value::Bytes(b) => bytes_json(b),
            Value::List(items) | Value::Tuple(items) | Value::Set(items) => {
                let items = items.clone();
                J::Array(
                    items
                        .into_iter()
                        .map(|x| self.json(x, depth + 1, problems))
                        .collect(),
                )
            }
            Value::Dict(pairs) => {
                let pairs = pairs.clone();
                let mut m = serde_json::Map::new();
                for (k, v) in pairs {
                    match self.key(k) {
                        Ok(k) => {
                            let v = self.json(v, depth + 1, problems);
                            m.insert(k, v);
                        }
                        Err(why) => problems.push(Finding::note(why)),
                    }
                }
                J::Object(m)
            }
            Value::Global(m, n) => J::String(format!("{m}.{n}")),
            Value::Persistent(_) => {
                problems.push(Finding::note("a storage outside a tensor: not read"));
                J::Null
            }
            Value::Call(c) => {
                let c = c.clone();
                self.call_json(&c, depth, problems)
            }
        }
    }

    /// The few calls whose value is plain data (`torch.device('cpu')`, `torch.Size(…)`, a
    /// set, protocol 2's bytes, a numpy scalar); any other is a problem, named by its callee.
    fn call_json(
        &mut self,
        c: &Call,
        depth: usize,
        problems: &mut Vec<Finding>,
    ) -> serde_json::Value {
        let callee = match self.p.get(c.callee) {
            Value::Global(m, n) => (m.clone(), n.clone()),
            other => {
                problems.push(Finding::note(format!("a call of {}: not run", kind(other))));
                return serde_json::Value::Null;
            }
        };
        let args = self.tuple(c.args).unwrap_or(&[]).to_vec();
        match (callee.0.as_str(), callee.1.as_str(), args.as_slice()) {
            ("torch", "device" | "Size", [a, ..])
            | ("builtins" | "__builtin__", "set" | "frozenset" | "list" | "tuple", [a]) => {
                let parts: Vec<serde_json::Value> = std::iter::once(*a)
                    .chain(args.iter().skip(1).copied())
                    .map(|x| self.json(x, depth + 1, problems))
                    .collect();
                match parts.len() {
                    1 => parts.into_iter().next().unwrap_or_default(),
                    _ => serde_json::Value::Array(parts),
                }
            }
            // Protocol 2's bytes: `_codecs.encode(text, 'latin1')`.
            ("_codecs", "encode", [..]) => match self.latin1(c) {
                Some(b) => bytes_json(&b),
                None => {
                    problems.push(Finding::note("a call of _codecs.encode: not run"));
                    serde_json::Value::Null
                }
            },
            // A numpy scalar (`np.float64(0.5)` as a metric): its dtype and its bytes.
            ("numpy._core.multiarray" | "numpy.core.multiarray", "scalar", [dt, data]) => {
                match self.numpy_scalar(*dt, *data) {
                    Some(v) => v,
                    None => {
                        problems.push(Finding::note("a numpy scalar of a dtype not read"));
                        serde_json::Value::Null
                    }
                }
            }
            (m, n, _) if self.tensor_like(m, n) => {
                problems.push(Finding::note(
                    "a tensor inside a value that is not a dict, list or tuple: not read",
                ));
                serde_json::Value::Null
            }
            (m, n, _) if dangerous(m, n) => {
                problems.push(Finding::dangerous(format!(
                    "a call of {m}.{n}: dangerous (a pickle scanner says so), not run"
                )));
                serde_json::Value::Null
            }
            (m, n, _) => {
                problems.push(Finding::note(format!("a call of {m}.{n}: not run")));
                serde_json::Value::Null
            }
        }
    }

    /// The bytes of `_codecs.encode(text, 'latin1')` (each char one byte).
    fn latin1(&self, c: &Call) -> Option<Vec<u8>> {
        let args = self.tuple(c.args)?;
        let (Value::Str(text), Some(Value::Str(enc))) = (
            self.p.get(*args.first()?),
            args.get(1).map(|&e| self.p.get(e)),
        ) else {
            return None;
        };
        if !matches!(enc.as_str(), "latin1" | "latin-1" | "iso-8859-1") {
            return None;
        }
        text.chars()
            .map(|ch| u8::try_from(u32::from(ch)).ok())
            .collect()
    }

    /// `numpy.core.multiarray.scalar(numpy.dtype(code, …) + BUILD (3, order, …), bytes)`.
    fn numpy_scalar(&self, dt: Id, data: Id) -> Option<serde_json::Value> {
        let Value::Call(d) = self.p.get(dt) else {
            return None;
        };
        let (m, n) = self.global(d.callee)?;
        if (m, n) != ("numpy", "dtype") {
            return None;
        }
        let Value::Str(code) = self.p.get(*self.tuple(d.args)?.first()?) else {
            return None;
        };
        // The byte order is the second item of the dtype's state; '>' is big-endian.
        let big = d
            .state
            .and_then(|s| self.tuple(s))
            .and_then(|s| s.get(1))
            .is_some_and(|&o| self.p.get(o) == &Value::Str(">".into()));
        let mut b = match self.p.get(data) {
            Value::Bytes(b) => b.clone(),
            Value::Call(c) => self.latin1(c)?,
            _ => return None,
        };
        if big {
            b.reverse();
        }
        // The scalar's bytes, when they are exactly `n`.
        let exact = |n: usize| (b.len() == n).then_some(&b[..]);
        let float = |x: f64| match serde_json::Number::from_f64(x) {
            Some(n) => serde_json::Value::Number(n),
            // A NaN or infinity has no JSON number: its text.
            None => serde_json::Value::String(x.to_string()),
        };
        Some(match code.as_str() {
            "f8" => float(le::f64_at(exact(8)?, 0)?),
            "f4" => float(le::f32_at(exact(4)?, 0)?.into()),
            "i8" => le::i64_at(exact(8)?, 0)?.into(),
            "i4" => le::i32_at(exact(4)?, 0)?.into(),
            "i2" => le::i16_at(exact(2)?, 0)?.into(),
            "i1" => le::i8_at(exact(1)?, 0)?.into(),
            "u8" => le::u64_at(exact(8)?, 0)?.into(),
            "u4" => le::u32_at(exact(4)?, 0)?.into(),
            "u2" => le::u16_at(exact(2)?, 0)?.into(),
            "u1" => exact(1)?[0].into(),
            "b1" => (exact(1)?[0] != 0).into(),
            _ => return None,
        })
    }

    fn tensor_like(&self, module: &str, _name: &str) -> bool {
        module == "torch._utils" || module == "torch._tensor"
    }
}

/// Bytes as hex, or their length when long.
fn bytes_json(b: &[u8]) -> serde_json::Value {
    match b.len() <= BYTES_SHOWN {
        true => b
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<String>()
            .into(),
        false => format!("<{} bytes>", b.len()).into(),
    }
}

/// A tensor that is not read (a form modelfs does not decode), and why.
fn unread(why: String) -> TensorSpec {
    TensorSpec {
        storage: String::new(),
        dtype: DType::Opaque(0),
        torch_dtype: String::new(),
        shape: Vec::new(),
        stride: Vec::new(),
        offset: 0,
        problem: None,
        note: Some(why),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::None => "None",
        Value::Bool(_) => "a bool",
        Value::Int(_) | Value::BigInt(_) => "an int",
        Value::Float(_) => "a float",
        Value::Str(_) => "a string",
        Value::Bytes(_) => "bytes",
        Value::List(_) => "a list",
        Value::Tuple(_) => "a tuple",
        Value::Dict(_) => "a dict",
        Value::Set(_) => "a set",
        Value::Global(..) => "a global",
        Value::Persistent(_) => "a storage",
        Value::Call(_) => "a call",
    }
}

/// The dtype a legacy typed storage class holds (`torch.FloatStorage` → `float32`).
fn storage_dtype(class: &str) -> Option<&'static str> {
    Some(match class {
        "DoubleStorage" => "float64",
        "FloatStorage" => "float32",
        "HalfStorage" => "float16",
        "BFloat16Storage" => "bfloat16",
        "LongStorage" => "int64",
        "IntStorage" => "int32",
        "ShortStorage" => "int16",
        "CharStorage" => "int8",
        "ByteStorage" => "uint8",
        "BoolStorage" => "bool",
        "ComplexDoubleStorage" => "complex128",
        "ComplexFloatStorage" => "complex64",
        "QUInt8Storage" => "quint8",
        "QInt8Storage" => "qint8",
        "QInt32Storage" => "qint32",
        "QUInt4x2Storage" => "quint4x2",
        "QUInt2x4Storage" => "quint2x4",
        "UntypedStorage" => "uint8",
        _ => return None,
    })
}

/// The bytes of one element of a legacy typed storage class (`FloatStorage` → 4).
pub(crate) fn storage_width(class: &str) -> Option<u64> {
    if class == "UntypedStorage" {
        return Some(1);
    }
    let name = storage_dtype(class)?;
    Some(match name {
        "qint8" | "quint8" | "quint4x2" | "quint2x4" => 1,
        "qint32" => 4,
        _ => dtype_of(name)?.elem_size()? as u64,
    })
}

/// The model's dtype of a torch dtype name; `None` for those not decoded (complex32, float4
/// pairs, float8_e8m0fnu, bit and sub-byte types, quantized ones).
pub(crate) fn dtype_of(name: &str) -> Option<DType> {
    use DType::*;
    Some(match name {
        "float32" => F32,
        "float64" => F64,
        "float16" => F16,
        "bfloat16" => BF16,
        "complex64" => C64,
        "complex128" => C128,
        "int8" => I8,
        "int16" => I16,
        "int32" => I32,
        "int64" => I64,
        "uint8" => U8,
        "uint16" => U16,
        "uint32" => U32,
        "uint64" => U64,
        "bool" => Bool,
        // TF's float8 codes, as the safetensors reader gives them.
        "float8_e5m2" => Float8(24),
        "float8_e4m3fn" => Float8(25),
        "float8_e4m3fnuz" => Float8(26),
        "float8_e5m2fnuz" => Float8(28),
        _ => return None,
    })
}
