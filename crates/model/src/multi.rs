//! A directory of several checkpoints (SPEC §1: TF checkpoints, `torch.save` or safetensors
//! files of a training run), or a TF Serving base: the root lists one
//! directory per member (named by its base name or version) and a `latest` symlink to the
//! one the state file names (the highest version). Members are opened on first use
//! (`model::member`), so a directory of 500 checkpoints costs what its listing costs.

use std::sync::Arc;

use crate::{DirEntry, Document, Member, Model, ModelError, ModelSummary, Tensor};

pub struct MultiModel {
    /// `(name, member)`, sorted by name, names unique.
    children: Vec<(Vec<u8>, Arc<Member>)>,
    latest: Option<Vec<u8>>,
    /// A directory of models of any kinds (`MultiModel::collection`): its format is its
    /// members', and the files it skipped are its problems.
    collection: Option<Vec<String>>,
}

const LATEST: &[u8] = b"latest";

/// A member's model and the path inside it.
type Routed<'a> = (Arc<dyn Model>, &'a [Vec<u8>]);

impl MultiModel {
    /// `latest` is shown only if it names a child and no child is itself called `latest`.
    pub fn new(mut children: Vec<(Vec<u8>, Arc<Member>)>, latest: Option<Vec<u8>>) -> Self {
        children.sort_by(|a, b| a.0.cmp(&b.0));
        children.dedup_by(|a, b| a.0 == b.0);
        let latest = latest.filter(|l| {
            children.iter().any(|(n, _)| n == l) && !children.iter().any(|(n, _)| n == LATEST)
        });
        MultiModel {
            children,
            latest,
            collection: None,
        }
    }

    /// A directory holding models of any kinds side by side (files, model directories): named
    /// by its members' formats (`gguf+pytorch`), `skipped` (one line per file that looked like
    /// a model and is not one) its problems.
    pub fn collection(
        children: Vec<(Vec<u8>, Arc<Member>)>,
        latest: Option<Vec<u8>>,
        skipped: Vec<String>,
    ) -> Self {
        MultiModel {
            collection: Some(skipped),
            ..MultiModel::new(children, latest)
        }
    }

    fn child(&self, name: &[u8]) -> Result<Arc<dyn Model>, ModelError> {
        let at = self
            .children
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .map_err(|_| ModelError::NotFound(String::from_utf8_lossy(name).into_owned()))?;
        self.children[at].1.model()
    }

    /// Resolves the `latest` link when it is the first component.
    fn route<'a>(&'a self, path: &'a [Vec<u8>]) -> Result<Routed<'a>, ModelError> {
        let (first, rest) = path
            .split_first()
            .ok_or_else(|| ModelError::NotFound("root".into()))?;
        let name = match &self.latest {
            Some(target) if first == LATEST => target.as_slice(),
            _ => first.as_slice(),
        };
        Ok((self.child(name)?, rest))
    }
}

impl Model for MultiModel {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        if dir.is_empty() {
            let mut out: Vec<DirEntry> = self
                .children
                .iter()
                .map(|(n, _)| DirEntry::Dir(n.clone()))
                .collect();
            if let Some(target) = &self.latest {
                out.push(DirEntry::Symlink {
                    name: LATEST.to_vec(),
                    target: target.clone(),
                });
            }
            out.sort();
            return Ok(out);
        }
        let (model, rest) = self.route(dir)?;
        model.list_dir(rest)
    }

    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        let (model, rest) = self.route(path)?;
        model.tensor(rest)
    }

    fn table_parts(&self, path: &[Vec<u8>]) -> Option<usize> {
        let (model, rest) = self.route(path).ok()?;
        model.table_parts(rest)
    }

    fn table_part(&self, path: &[Vec<u8>], i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        let (model, rest) = self.route(path)?;
        model.table_part(rest, i)
    }

    fn hidden_tensors(&self, root: &[Vec<u8>]) -> Vec<Arc<dyn Tensor>> {
        match self.route(root) {
            Ok((model, rest)) => model.hidden_tensors(rest),
            Err(_) => Vec::new(),
        }
    }

    /// Each member's hash tables, under the member's name.
    fn unlisted_tables(&self) -> Result<Vec<Vec<Vec<u8>>>, ModelError> {
        let mut out = Vec::new();
        for (name, m) in &self.children {
            let Ok(model) = m.model() else { continue };
            for mut path in model.unlisted_tables()? {
                path.insert(0, name.clone());
                out.push(path);
            }
        }
        Ok(out)
    }

    fn model_roots(&self) -> Vec<Vec<Vec<u8>>> {
        self.children.iter().map(|(n, _)| vec![n.clone()]).collect()
    }

    fn members(&self) -> Option<Vec<(Vec<u8>, u64)>> {
        Some(
            self.children
                .iter()
                .map(|(n, m)| (n.clone(), m.id()))
                .collect(),
        )
    }

    fn member_opened(&self, name: &[u8]) -> Option<bool> {
        let at = self
            .children
            .binary_search_by(|(n, _)| n.as_slice().cmp(name))
            .ok()?;
        Some(self.children[at].1.is_open())
    }

    fn document(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Document>, ModelError> {
        let (model, rest) = self.route(path)?;
        model.document(rest)
    }

    fn summary(&self) -> Result<ModelSummary, ModelError> {
        let mut s = ModelSummary {
            format: "tf-checkpoint".into(),
            ..Default::default()
        };
        for (name, m) in &self.children {
            let c = match m.model() {
                Ok(m) => m.summary()?,
                Err(e) => ModelSummary {
                    problems: vec![e.to_string()],
                    ..Default::default()
                },
            };
            s.tensors += c.tensors;
            s.total_bytes = s.total_bytes.saturating_add(c.total_bytes);
            for (k, v) in &c.dtypes {
                *s.dtypes.entry(k.clone()).or_default() += v;
            }
            let name = String::from_utf8_lossy(name);
            s.problems
                .extend(c.problems.iter().map(|p| format!("{name}: {p}")));
            s.notes
                .extend(c.notes.iter().map(|p| format!("{name}: {p}")));
            s.parts.push((name.into_owned(), c));
        }
        // A collection (a run of torch.save or safetensors checkpoints, a zoo) says what its
        // members are; a TF directory (or Serving base) keeps its one name whatever its
        // members' forms.
        let mut formats: Vec<&str> = s.parts.iter().map(|(_, c)| c.format.as_str()).collect();
        formats.sort_unstable();
        formats.dedup();
        if let Some(skipped) = &self.collection {
            s.problems.extend(skipped.iter().cloned());
            if !formats.is_empty() {
                s.format = formats.join("+");
            }
        }
        Ok(s)
    }
}
