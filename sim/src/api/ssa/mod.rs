//! Server-side apply and `metadata.managedFields`, as kube-apiserver 1.33 keeps them with
//! structured-merge-diff.
//!
//! `fieldset` holds the path sets and their FieldsV1 form, `schema` the list and map types of
//! built-in kinds, `walk` the typed operations (field set, compare, merge, remove), `managed`
//! the managedFields entries and their bookkeeping, `scale` their view through `/scale`, and `fieldmanager` the two entry points the
//! write handlers call: [`track_update`] for every create, update and patch, and [`apply`] for
//! `application/apply-patch+yaml`.

mod fieldmanager;
mod fieldset;
mod managed;
mod scale;
mod schema;
mod walk;

pub use fieldmanager::{
    Tracking, apply, manager_of, parse_apply_body, strict_yaml_error, track_update, undeclared_error,
};
pub use scale::{apply_scale, to_subresource};
