use super::*;

fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(crate::testing::fixtures_dir().join("tf/graphs").join(rel)).unwrap()
}

/// The `GraphDef`'s range in each graph fixture (a frozen graph, and one inside a SavedModel).
fn graphs() -> Vec<(Vec<u8>, Range<usize>)> {
    use crate::graph::scan::{scan, GraphKind};
    let mut out = Vec::new();
    for (rel, kind) in [
        ("tf1/frozen/frozen.pb", GraphKind::GraphDef),
        ("typed/graph.pb", GraphKind::GraphDef),
        ("tf2/savedmodel/saved_model.pb", GraphKind::SavedModel),
        ("tf1/saver/model.ckpt.meta", GraphKind::MetaGraphDef),
    ] {
        let buf = fixture(rel);
        let r = scan(&buf, kind).unwrap().metas[0].graph.clone().unwrap();
        out.push((buf.clone(), r.start as usize..r.end as usize));
    }
    out
}

fn text(buf: &[u8], graph: Range<usize>, size: usize) -> Vec<u8> {
    let c = Chunking::new(buf, graph, size).unwrap();
    let mut out = Vec::new();
    for k in 0..c.chunks() {
        c.render(buf, k, &mut out).unwrap();
    }
    out
}

#[test]
fn chunks_of_any_size_add_up_to_the_whole_text() {
    for (buf, graph) in graphs() {
        let whole = text(&buf, graph.clone(), usize::MAX / 2);
        assert!(whole.len() > 1000);
        for size in [1, 3, 7, 64, 1000, 4096] {
            assert!(
                text(&buf, graph.clone(), size) == whole,
                "chunk size {size}"
            );
        }
    }
}

#[test]
fn a_chunk_is_rendered_alone_and_chunks_match_the_size_formula() {
    let (buf, graph) = graphs().swap_remove(2);
    let c = Chunking::new(&buf, graph.clone(), 512).unwrap();
    assert_eq!(c.chunks(), ((graph.end - graph.start) / 512) as u64 + 1);
    let mut all = Vec::new();
    let mut parts = Vec::new();
    for k in (0..c.chunks()).rev() {
        let mut one = Vec::new();
        c.render(&buf, k, &mut one).unwrap();
        parts.push(one);
    }
    for p in parts.iter().rev() {
        all.extend_from_slice(p);
    }
    assert!(all == text(&buf, graph, 512));
}

#[test]
fn values_are_printed_so_they_read_back() {
    // node { name: "a\"\n\xff" attr { key: "f" value { f: 0.1 } } } plus a packed int list
    // and an unknown field 99.
    let mut attr_value = vec![0x25];
    attr_value.extend_from_slice(&0.1f32.to_le_bytes());
    let mut entry = vec![0x0a, 1, b'f', 0x12, attr_value.len() as u8];
    entry.extend_from_slice(&attr_value);
    let mut node = vec![0x0a, 4, b'a', b'"', b'\n', 0xff, 0x2a, entry.len() as u8];
    node.extend_from_slice(&entry);
    let mut buf = vec![0x0a, node.len() as u8];
    buf.extend_from_slice(&node);
    // versions { bad_consumers: [1, 300] } packed; then field 99 varint 5.
    buf.extend_from_slice(&[0x22, 5, 0x1a, 3, 1, 0xac, 0x02, 0x98, 0x06, 5]);
    let t = String::from_utf8(text(&buf, 0..buf.len(), 1 << 20)).unwrap();
    let want = "node {\n  name: \"a\\\"\\n\\377\"\n  attr {\n    key: \"f\"\n    value {\n      f: 0.1\n    }\n  }\n}\nversions {\n  bad_consumers: 1\n  bad_consumers: 300\n}\n# unknown field 99\n";
    assert_eq!(t, want);
    assert_eq!(text(&buf, 0..buf.len(), 2), want.as_bytes());
}

#[test]
fn floats_round_trip_and_specials_have_names() {
    assert_eq!(float32(f32::INFINITY), "inf");
    assert_eq!(float32(f32::NEG_INFINITY), "-inf");
    assert_eq!(float32(f32::NAN), "nan");
    for x in [0.1f32, 1e-45, 3.4028235e38, -0.0, 16777217.0] {
        assert_eq!(float32(x).parse::<f32>().unwrap().to_bits(), x.to_bits());
    }
    assert_eq!(float64(1e-300).parse::<f64>().unwrap(), 1e-300);
}

#[test]
fn bad_bytes_fail_instead_of_printing_garbage() {
    // A node whose length runs past the end; a packed double list of 5 bytes.
    for buf in [&[0x0a, 9, 0x0a][..], &[0x22, 3, 0x1a, 1][..]] {
        assert!(Chunking::new(buf, 0..buf.len(), 1)
            .and_then(|c| {
                let mut out = Vec::new();
                (0..c.chunks()).try_for_each(|k| c.render(buf, k, &mut out))
            })
            .is_err());
    }
}

/// Every fixture graph printed, read back by `parse` and printed again gives the same text:
/// the reader takes everything the printer writes (escapes, floats, enums, maps, nesting).
#[test]
fn printed_graphs_read_back_to_the_same_message() {
    for (buf, graph) in graphs() {
        let printed = text(&buf, graph, usize::MAX / 2);
        let wire = parse::encode(&printed, M::GraphDef).unwrap();
        let again = text(&wire, 0..wire.len(), usize::MAX / 2);
        assert!(
            again == printed,
            "{}",
            String::from_utf8_lossy(&again[..200])
        );
    }
}

#[test]
fn text_format_details() {
    use parse::encode;
    // Strings: both quotes, escapes, adjacent literals joined; separators; `<>`; comments.
    let wire = encode(
        b"# a comment\nnode < name: 'a\\'b' \"\\x41\\101\\n\" ; op: \"Const\", >\nversions { producer: 7 }",
        M::GraphDef,
    )
    .unwrap();
    assert_eq!(
        wire,
        b"\x0a\x0f\x0a\x06a'bAA\n\x12\x05Const\x22\x02\x08\x07"
    );
    // A list of messages, a negative int (sign-extended), an enum by name and by number.
    let wire = encode(
        b"node: [{name: \"x\"}, {name: \"y\"}] version: -1 node { attr { key: \"t\" value { type: DT_INT32 } } attr { key: \"u\" value { type: 9 } } }",
        M::GraphDef,
    )
    .unwrap();
    let again = text(&wire, 0..wire.len(), 1 << 20);
    let s = String::from_utf8(again).unwrap();
    assert!(s.contains("name: \"y\""), "{s}");
    assert!(s.contains("version: -1"), "{s}");
    assert!(
        s.contains("type: DT_INT32") && s.contains("type: DT_INT64"),
        "{s}"
    );
    // Unknown fields and `[type.url] { … }` expansions are read and left out.
    let wire = encode(
        b"meta_info_def { tags: \"serve\" stripped_op_list { op { name: \"Add\" } } any { [type.googleapis.com/x.Y] { z: 1 } } } saver_def { version: V2 }",
        M::MetaGraphDef,
    )
    .unwrap();
    assert_eq!(wire, b"\x0a\x07\x22\x05serve");
    // Floats as the printer writes them, and `inf`/`nan`/`1f`.
    let wire = encode(
        b"node { attr { key: \"f\" value { list { f: [0.1, -inf, nan, 1f, 2] } } } }",
        M::GraphDef,
    )
    .unwrap();
    let s = String::from_utf8(text(&wire, 0..wire.len(), 1 << 20)).unwrap();
    for f in ["f: 0.1", "f: -inf", "f: nan", "f: 1", "f: 2"] {
        assert!(s.contains(f), "{f}: {s}");
    }
}

#[test]
fn bad_text_is_an_error_with_its_line() {
    for (t, line) in [
        (&b"node {\n name: \"x\"\n"[..], 3),
        (b"node {\n name: x\n}", 2),
        (b"node {\n op: \"unterminated\n}", 2),
        (b"\n\nversion: \"s\"", 3),
        (b"node { name { } }", 1),
        (b"node \"x\"", 1),
        (b"version: 99999999999999999999", 1),
        (b"node { name: \"\\q\" }", 1),
    ] {
        let e = parse::encode(t, M::GraphDef).unwrap_err();
        assert_eq!(e.line, line, "{}: {e}", String::from_utf8_lossy(t));
    }
    // Nesting (here of fields left out) is bounded, not a stack overflow.
    let nested = |n: usize| format!("{}{}", "x { ".repeat(n), "} ".repeat(n));
    assert_eq!(
        parse::encode(nested(50).as_bytes(), M::GraphDef),
        Ok(Vec::new())
    );
    let e = parse::encode(nested(100_000).as_bytes(), M::GraphDef).unwrap_err();
    assert!(e.what.contains("nested"), "{e}");
}
