//! The test image catalogue (from the shared model crate) and its rendering for `crossconf images`.
//!
//! The catalogue itself lives in [`crossconf_model::images`] because the simulator builds its
//! image registry from it too; this module re-exports it under the harness's own path and adds
//! [`render_table`] and [`render_json`], which only the CLI needs.

mod render;

pub use crossconf_model::images::*;
pub use render::{render_json, render_table};
