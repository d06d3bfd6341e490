//! Integration tests of the generated protocol layer: one test binary, one module per concern.

mod doc_examples;
mod generated_drift;
mod legacy;
mod lenient;
mod tagged;
mod v2_messages;
mod v2_surface;
