//! Which graph message a file holds and how it is written, from its first bytes: the text
//! format by its first field's name, the binary one by the tag its message starts with.

use super::pbtxt::parse::first_field;
use super::scan::GraphKind;

/// Bytes of a file's start that `sniff` looks at.
pub(crate) const HEAD: usize = 4096;

/// The message in `head` and whether it is text. `hint` is what the file's name says (`.pb`:
/// a `GraphDef`, `.meta`: a `MetaGraphDef`, `saved_model.pb`: a `SavedModel`); without one
/// only a text graph or a binary `GraphDef` whose first node starts with its name is taken.
pub(crate) fn sniff(head: &[u8], hint: Option<GraphKind>) -> Option<(GraphKind, bool)> {
    if let Some(name) = first_field(head) {
        return text_kind(name).map(|k| (k, true));
    }
    let Some(&first) = head.first() else {
        // An empty file is an empty message.
        return hint.map(|k| (k, false));
    };
    // Binary: the first byte must be the tag of one of the message's length-delimited fields
    // (GraphDef node/library/versions; MetaGraphDef 1..=7; SavedModel's version or graph).
    let plausible = |kind| match kind {
        GraphKind::GraphDef => matches!(first, 0x0a | 0x12 | 0x18 | 0x22),
        GraphKind::MetaGraphDef => first & 7 == 2 && (1..=7).contains(&(first >> 3)),
        GraphKind::SavedModel => matches!(first, 0x08 | 0x12),
    };
    match hint {
        Some(kind) => plausible(kind).then_some((kind, false)),
        None => starts_with_a_named_node(head).then_some((GraphKind::GraphDef, false)),
    }
}

/// The message whose field `name` is.
fn text_kind(name: &[u8]) -> Option<GraphKind> {
    match name {
        b"node" | b"library" | b"versions" | b"version" | b"debug_info" => {
            Some(GraphKind::GraphDef)
        }
        b"meta_info_def" | b"graph_def" | b"saver_def" | b"collection_def" | b"signature_def"
        | b"asset_file_def" | b"object_graph_def" => Some(GraphKind::MetaGraphDef),
        b"saved_model_schema_version" | b"meta_graphs" => Some(GraphKind::SavedModel),
        _ => None,
    }
}

/// `GraphDef.node` (tag 0x0a, a length that fits) whose first field is `NodeDef.name` (0x0a).
fn starts_with_a_named_node(head: &[u8]) -> bool {
    let Some((&0x0a, rest)) = head.split_first() else {
        return false;
    };
    let mut len = 0u64;
    for (i, &b) in rest.iter().take(10).enumerate() {
        len |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            let body = &rest[i + 1..];
            return len > 0 && body.first() == Some(&0x0a);
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_content() {
        let t = |s: &str, hint| sniff(s.as_bytes(), hint);
        assert_eq!(
            t("node {\n  name: \"a\"", None),
            Some((GraphKind::GraphDef, true))
        );
        assert_eq!(
            t("# comment\n\nmeta_graphs {", Some(GraphKind::GraphDef)),
            Some((GraphKind::SavedModel, true))
        );
        assert_eq!(
            t("saver_def <", None),
            Some((GraphKind::MetaGraphDef, true))
        );
        assert_eq!(t("hello: 1", None), None);
        assert_eq!(t("just some words", None), None);
        // Binary: a node named "x" of op "Const".
        let g = b"\x0a\x0c\x0a\x01x\x12\x05Const";
        assert_eq!(sniff(g, None), Some((GraphKind::GraphDef, false)));
        assert_eq!(sniff(b"\x0a\x00", None), None);
        assert_eq!(sniff(b"\x42\x01", Some(GraphKind::GraphDef)), None);
        assert_eq!(sniff(b"", None), None);
        assert_eq!(
            sniff(b"", Some(GraphKind::SavedModel)),
            Some((GraphKind::SavedModel, false))
        );
    }
}
