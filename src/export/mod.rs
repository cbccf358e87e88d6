//! The JSON export: typed documents (also the source of the JSON Schema in
//! `docs/export.schema.json`) and their construction from the store.
//!
//! Field names carry their unit. A reading that is not known is `null`, never
//! a made-up zero. The full document's types are in `document`, the summary
//! view in `summary`, and how a snapshot is made from the store in `build`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod build;
mod document;
mod summary;
#[cfg(test)]
mod tests;

pub use build::{Streamed, answered, snapshot};
pub use document::*;
pub use summary::*;

/// What `export` writes: a full `Snapshot` (`--view full`, the default) or a
/// `Summary` (`--view summary`). Only for the schema: a reader knows which
/// it asked for, and a summary says so in its `view` field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Document {
    Full(Snapshot),
    Summary(Summary),
}

/// The JSON Schema of the export's documents (a full snapshot or a
/// summary), as committed in `docs/export.schema.json`.
pub fn schema_json() -> String {
    let schema = schemars::schema_for!(Document);
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}
