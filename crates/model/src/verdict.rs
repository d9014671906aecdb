//! The one rule of every verdict (`verify`, `check`, `info`, the Python API), whatever the
//! format:
//! - **damage** fails it (exit 2): a checksum that does not match, an extent past the data, a
//!   truncated file, data that cannot be read;
//! - **dangerous** fails it too: a pickle that imports what a pickle scanner calls dangerous
//!   (modelfs runs nothing, but whoever loads the file with `torch.load` would);
//! - a **note** does not: a class modelfs does not run (a pickled `nn.Module`, a TorchScript
//!   module, an `omegaconf` config) or a dtype or encoding it does not decode (GGUF's IQ
//!   blocks, safetensors `F4`): the file may be whole, modelfs only does not read that part.
//!
//! A tensor's `TensorMeta::problem` is damage, its `TensorMeta::note` a note;
//! `ModelSummary::problems` fail, `ModelSummary::notes` do not.

/// How grave a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Damage,
    Dangerous,
    Note,
}

impl Severity {
    /// Whether a finding of this severity fails a verdict (exit 2).
    pub fn fails(self) -> bool {
        self != Severity::Note
    }
}

/// One thing a reader found, and how grave it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub text: String,
}

impl Finding {
    pub fn damage(text: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Damage,
            text: text.into(),
        }
    }

    pub fn dangerous(text: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Dangerous,
            text: text.into(),
        }
    }

    pub fn note(text: impl Into<String>) -> Finding {
        Finding {
            severity: Severity::Note,
            text: text.into(),
        }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_notes_pass() {
        assert!(Finding::damage("crc").severity.fails());
        assert!(Finding::dangerous("os.system").severity.fails());
        assert!(!Finding::note("not run").severity.fails());
    }
}
