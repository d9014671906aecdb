//! Encoders for Angel's eight formats as layouts (SPEC §3 "Angel layouts").

use std::sync::Arc;

use super::{AngelFormat, FileContent, LayoutCtx};
use crate::model::Tensor;

/// The content of Angel format `format` for `tensor`, or `None` if it cannot represent it.
pub fn open(
    format: AngelFormat,
    tensor: Arc<dyn Tensor>,
    ctx: &Arc<LayoutCtx>,
) -> Option<Arc<dyn FileContent>> {
    let _ = (format, tensor, ctx);
    None
}
