//! Tests of the generator library: one test binary, one module per stage.

mod classified;
mod emit_shapes;
mod merge_and_table;
mod normalize_rules;
mod strip_rules;
mod vendored;
