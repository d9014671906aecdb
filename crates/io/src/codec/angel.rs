//! Angel's eight row formats (formats/angel.md §6): names, class names, kinds. The vocabulary
//! both sides share: the Angel reader decodes these formats, `modelfs`'s layouts and `.angel/`
//! view encode them, and neither may name the other.

/// Angel's eight file formats (SPEC §3, formats/angel.md §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AngelFormat {
    ValueText,
    ColIdValueText,
    RowIdColIdValueText,
    TextColumn,
    ValueBinary,
    ColIdValueBinary,
    RowIdColIdValueBinary,
    BinaryColumn,
}

impl AngelFormat {
    pub const ALL: [AngelFormat; 8] = [
        AngelFormat::ValueText,
        AngelFormat::ColIdValueText,
        AngelFormat::RowIdColIdValueText,
        AngelFormat::TextColumn,
        AngelFormat::ValueBinary,
        AngelFormat::ColIdValueBinary,
        AngelFormat::RowIdColIdValueBinary,
        AngelFormat::BinaryColumn,
    ];

    /// Layout / file suffix name: the format's class name without `RowFormat`/`Format`.
    pub fn name(self) -> &'static str {
        match self {
            AngelFormat::ValueText => "ValueText",
            AngelFormat::ColIdValueText => "ColIdValueText",
            AngelFormat::RowIdColIdValueText => "RowIdColIdValueText",
            AngelFormat::TextColumn => "TextColumn",
            AngelFormat::ValueBinary => "ValueBinary",
            AngelFormat::ColIdValueBinary => "ColIdValueBinary",
            AngelFormat::RowIdColIdValueBinary => "RowIdColIdValueBinary",
            AngelFormat::BinaryColumn => "BinaryColumn",
        }
    }

    /// Angel's simple class name (`ColIdValueTextRowFormat`, `TextColumnFormat`, …).
    pub fn class_name(self) -> &'static str {
        match self {
            AngelFormat::ValueText => "ValueTextRowFormat",
            AngelFormat::ColIdValueText => "ColIdValueTextRowFormat",
            AngelFormat::RowIdColIdValueText => "RowIdColIdValueTextRowFormat",
            AngelFormat::TextColumn => "TextColumnFormat",
            AngelFormat::ValueBinary => "ValueBinaryRowFormat",
            AngelFormat::ColIdValueBinary => "ColIdValueBinaryRowFormat",
            AngelFormat::RowIdColIdValueBinary => "RowIdColIdValueBinaryRowFormat",
            AngelFormat::BinaryColumn => "BinaryColumnFormat",
        }
    }

    pub fn from_class_name(simple: &str) -> Option<Self> {
        AngelFormat::ALL
            .into_iter()
            .find(|f| f.class_name() == simple)
    }

    /// `ValueText`/`ValueBinary`: values only, no ids (dense tensors only).
    pub fn is_value_only(self) -> bool {
        matches!(self, AngelFormat::ValueText | AngelFormat::ValueBinary)
    }

    /// `TextColumn`/`BinaryColumn`: one record per column.
    pub fn is_column(self) -> bool {
        matches!(self, AngelFormat::TextColumn | AngelFormat::BinaryColumn)
    }

    pub fn is_text(self) -> bool {
        matches!(
            self,
            AngelFormat::ValueText
                | AngelFormat::ColIdValueText
                | AngelFormat::RowIdColIdValueText
                | AngelFormat::TextColumn
        )
    }
}
