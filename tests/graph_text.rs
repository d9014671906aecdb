//! `graph.pbtxt` against TensorFlow: for every graph fixture, the text modelfs serves and the
//! text TF's own `text_format.MessageToString` printed (recorded by scripts/gen-graph-fixtures)
//! describe the same `GraphDef`. Both are read by a small text-format reader here into trees
//! that compare field by field: strings by their unescaped bytes, numbers by value (floats as
//! float32 where the spellings differ), map entries in key order (TF prints maps sorted, the
//! wire keeps their order). CI never needs TensorFlow.

use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
enum V {
    Str(Vec<u8>),
    Int(i128),
    Float(f64),
    Ident(String),
    Msg(Fields),
}

/// A message: field name → values in order (map entries sorted by key).
type Fields = BTreeMap<String, Vec<V>>;

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn skip(&mut self) {
        while self.i < self.s.len() {
            match self.s[self.i] {
                b' ' | b'\n' | b'\t' | b'\r' => self.i += 1,
                b'#' => {
                    while self.i < self.s.len() && self.s[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip();
        self.s.get(self.i).copied()
    }

    fn word(&mut self) -> String {
        self.skip();
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || b"_.-+".contains(&self.s[self.i]))
        {
            self.i += 1;
        }
        assert!(self.i > start, "token expected at byte {start}");
        String::from_utf8(self.s[start..self.i].to_vec()).unwrap()
    }

    fn string(&mut self) -> Vec<u8> {
        self.skip();
        let quote = self.s[self.i];
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let c = self.s[self.i];
            self.i += 1;
            if c == quote {
                break;
            }
            if c != b'\\' {
                out.push(c);
                continue;
            }
            let e = self.s[self.i];
            self.i += 1;
            match e {
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'0'..=b'7' => {
                    let mut v = u32::from(e - b'0');
                    for _ in 0..2 {
                        match self.s[self.i] {
                            d @ b'0'..=b'7' => {
                                v = v * 8 + u32::from(d - b'0');
                                self.i += 1;
                            }
                            _ => break,
                        }
                    }
                    out.push(v as u8);
                }
                b'x' => {
                    let h = std::str::from_utf8(&self.s[self.i..self.i + 2]).unwrap();
                    out.push(u8::from_str_radix(h, 16).unwrap());
                    self.i += 2;
                }
                other => out.push(other),
            }
        }
        out
    }

    /// Fields until `}` or the end.
    fn message(&mut self) -> Fields {
        let mut f = Fields::new();
        while let Some(c) = self.peek() {
            if c == b'}' {
                self.i += 1;
                break;
            }
            let name = self.word();
            if self.peek() == Some(b':') {
                self.i += 1;
            }
            let v = match self.peek() {
                Some(b'{') => {
                    self.i += 1;
                    V::Msg(self.message())
                }
                Some(b'"') | Some(b'\'') => {
                    let mut s = self.string();
                    while matches!(self.peek(), Some(b'"') | Some(b'\'')) {
                        s.extend(self.string());
                    }
                    V::Str(s)
                }
                _ => {
                    let w = self.word();
                    if let Ok(i) = w.parse::<i128>() {
                        V::Int(i)
                    } else if let Ok(x) = w.trim_end_matches(['f', 'F']).parse::<f64>() {
                        V::Float(x)
                    } else {
                        V::Ident(w.to_ascii_lowercase())
                    }
                }
            };
            f.entry(name).or_default().push(v);
        }
        for vs in f.values_mut() {
            // A map: entries with a `key` (proto3 leaves a default key, `0` or `""`, out).
            let keyed = vs
                .iter()
                .any(|v| matches!(v, V::Msg(m) if m.contains_key("key")));
            if !keyed || !vs.iter().all(|v| matches!(v, V::Msg(_))) {
                continue;
            }
            let default = vs
                .iter()
                .find_map(|v| match v {
                    V::Msg(m) => m.get("key").and_then(|k| k.first()).map(default_of),
                    _ => None,
                })
                .unwrap_or(V::Int(0));
            for v in vs.iter_mut() {
                if let V::Msg(m) = v {
                    m.entry("key".into())
                        .or_insert_with(|| vec![default.clone()]);
                }
            }
            vs.sort_by_key(|v| match v {
                V::Msg(m) => format!("{:?}", m.get("key")),
                _ => String::new(),
            });
        }
        f
    }
}

/// The proto3 default of a field holding `v`'s kind of value.
fn default_of(v: &V) -> V {
    match v {
        V::Str(_) => V::Str(Vec::new()),
        V::Float(_) => V::Float(0.0),
        V::Ident(_) => V::Ident("false".into()),
        _ => V::Int(0),
    }
}

fn parse(text: &[u8]) -> Fields {
    Reader { s: text, i: 0 }.message()
}

/// Equal as values: a number spelt as an int or as a float (`1` / `1.0`), floats as float32
/// where float64 differs (a float field printed at float64 precision by one side).
fn same(a: &V, b: &V, at: &str) -> Result<(), String> {
    let num = |v: &V| match v {
        V::Int(i) => Some(*i as f64),
        V::Float(x) => Some(*x),
        V::Ident(w) if w == "inf" || w == "infinity" => Some(f64::INFINITY),
        V::Ident(w) if w == "-inf" || w == "-infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    };
    match (a, b) {
        (V::Msg(x), V::Msg(y)) => same_fields(x, y, at),
        (V::Int(x), V::Int(y)) if x == y => Ok(()),
        (V::Ident(x), V::Ident(y)) if x == y => Ok(()),
        (V::Str(x), V::Str(y)) if x == y => Ok(()),
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) if x == y || (x as f32).to_bits() == (y as f32).to_bits() => Ok(()),
            _ => Err(format!("{at}: {a:?} != {b:?}")),
        },
    }
}

fn same_fields(a: &Fields, b: &Fields, at: &str) -> Result<(), String> {
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for n in names {
        let (x, y) = (a.get(n.as_str()), b.get(n.as_str()));
        let (x, y) = (x.map_or(&[][..], |v| v), y.map_or(&[][..], |v| v));
        // proto3: a scalar at its default may be written or left out.
        let is_default = |v: &[V]| matches!(v, [d] if !matches!(d, V::Msg(_)) && same(d, &default_of(d), "").is_ok());
        if (x.is_empty() && is_default(y)) || (y.is_empty() && is_default(x)) {
            continue;
        }
        if x.len() != y.len() {
            return Err(format!("{at}/{n}: {} values != {}", x.len(), y.len()));
        }
        for (i, (p, q)) in x.iter().zip(y).enumerate() {
            same(p, q, &format!("{at}/{n}[{i}]"))?;
        }
    }
    Ok(())
}

fn cat(source: &Path, path: &str) -> Vec<u8> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_modelfs"))
        .arg("cat")
        .arg(source)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn graph_text_describes_the_graph_tensorflow_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/graphs");
    let cases = [
        ("tf1/frozen", "tf1/frozen/frozen.pb"),
        ("typed/graph.pb", "typed/graph.pb"),
        ("tf1/savedmodel", "tf1/savedmodel/saved_model.pb"),
        ("tf1/saver/model.ckpt", "tf1/saver/model.ckpt.meta"),
        ("tf2/savedmodel", "tf2/savedmodel/saved_model.pb"),
        // A text graph (issue 26 item 2): read into wire bytes and printed again.
        ("text/graph/graph.pbtxt", "text/graph/graph.pbtxt"),
    ];
    for (source, file) in cases {
        let want = std::fs::read(root.join(format!("{file}.expected/graph.pbtxt")))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let got = cat(&root.join(source), "graph.pbtxt");
        let (w, g) = (parse(&want), parse(&got));
        assert!(
            w.get("node").is_some_and(|n| !n.is_empty()),
            "{file}: no nodes"
        );
        if let Err(e) = same_fields(&w, &g, file) {
            panic!("{file}: {e}");
        }
    }
}

#[test]
fn the_reader_here_sees_differences() {
    let a = parse(b"node { name: \"x\" attr { key: \"b\" value { f: 0.1 } } attr { key: \"a\" value { i: 1 } } }");
    let b = parse(b"node { name: \"x\" attr { key: \"a\" value { i: 1 } } attr { key: \"b\" value { f: 0.10000000149011612 } } }");
    assert_eq!(same_fields(&a, &b, ""), Ok(()));
    for other in [
        &b"node { name: \"y\" attr { key: \"a\" value { i: 1 } } attr { key: \"b\" value { f: 0.1 } } }"[..],
        b"node { name: \"x\" attr { key: \"a\" value { i: 2 } } attr { key: \"b\" value { f: 0.1 } } }",
        b"node { name: \"x\" attr { key: \"a\" value { i: 1 } } }",
    ] {
        assert!(same_fields(&a, &parse(other), "").is_err());
    }
}
