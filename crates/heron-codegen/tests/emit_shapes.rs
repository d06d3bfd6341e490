//! Tests the Rust `heron_codegen::emit` writes for Heron's own unions.

use heron_codegen::emit::unions;
use heron_codegen::normalize::{Fallback, TaggedVariant, UnionSpec};

/// The emitted tokens as text with all whitespace removed, so assertions do not depend on
/// how `proc_macro2` spaces tokens.
fn compact(spec: UnionSpec) -> String {
    unions(&[spec]).to_string().split_whitespace().collect()
}

fn variant(value: &str, payload: Option<&str>) -> TaggedVariant {
    TaggedVariant { value: value.into(), payload: payload.map(Into::into), doc: String::new() }
}

/// `SessionUpdate`-like: two tagged variants, one fallback, open or closed.
fn update(open: bool) -> UnionSpec {
    UnionSpec::Tagged {
        name: "Update".into(),
        doc: "A session update.".into(),
        tag: "sessionUpdate".into(),
        variants: vec![variant("agent_message_chunk", Some("ContentChunk")), variant("stopped", None)],
        fallbacks: vec![Fallback {
            variant: "Legacy".into(),
            payload: "LegacyUpdate".into(),
            doc: String::new(),
        }],
        open,
    }
}

/// `ContentBlock`-like: closed, no fallback, so it gets the unbuffered reading.
fn block() -> UnionSpec {
    UnionSpec::Tagged {
        name: "Block".into(),
        doc: "A block.".into(),
        tag: "type".into(),
        variants: vec![variant("text", Some("TextBlock")), variant("empty", None)],
        fallbacks: Vec::new(),
        open: false,
    }
}

fn severity() -> UnionSpec {
    UnionSpec::OpenString {
        name: "Severity".into(),
        doc: "How bad it is.".into(),
        values: vec![("info".into(), "Just so you know.".into()), ("needs_attention".into(), String::new())],
    }
}

/// The byte offset of `needle` in `haystack`, failing the test when it is absent.
fn at(haystack: &str, needle: &str) -> usize {
    haystack.find(needle).unwrap_or_else(|| panic!("`{needle}` not in `{haystack}`"))
}

// Tagged unions.

#[test]
fn tagged_union_is_internally_tagged_by_its_tag_property() {
    assert!(compact(update(false)).contains(r#"#[serde(tag="sessionUpdate")]pubenumUpdate{"#));
}

#[test]
fn tagged_variant_is_renamed_to_its_wire_value_and_wraps_its_payload() {
    assert!(
        compact(update(false))
            .contains(r#"#[serde(rename="agent_message_chunk")]AgentMessageChunk(ContentChunk),"#)
    );
}

#[test]
fn tag_only_variant_is_a_unit_variant() {
    assert!(compact(update(false)).contains(r#"#[serde(rename="stopped")]Stopped,"#));
}

#[test]
fn fallback_is_an_untagged_variant_after_the_tagged_ones() {
    let code = compact(update(false));
    let fallback = at(&code, "#[serde(untagged)]Legacy(LegacyUpdate),");
    assert!(at(&code, "Stopped,") < fallback, "{code}");
}

#[test]
fn open_union_ends_with_an_untagged_other_map() {
    let code = compact(update(true));
    let other = "#[serde(untagged)]Other(::serde_json::Map<::std::string::String,::serde_json::Value>),}";
    assert!(at(&code, other) > at(&code, "Legacy(LegacyUpdate),"), "{code}");
}

#[test]
fn closed_union_has_no_other_variant() {
    assert!(!compact(update(false)).contains("Other("));
}

#[test]
fn tagged_union_carries_its_doc() {
    assert!(compact(update(false)).contains(r#"#[doc="Asessionupdate."]"#));
}

#[test]
fn union_with_fallbacks_keeps_the_derived_deserialize() {
    let code = compact(update(false));
    assert!(
        code.contains("::serde::Serialize,::serde::Deserialize)]#[serde(tag=\"sessionUpdate\")]"),
        "{code}"
    );
    assert!(!code.contains("TaggedUnion") && !code.contains("modbuffered"), "{code}");
}

// Closed tagged unions: derived `Serialize`, `Deserialize` through the runtime.

#[test]
fn closed_union_derives_serialize_only_and_keeps_its_tag_and_renames() {
    let code = compact(block());
    let public = r#"#[derive(Debug,Clone,PartialEq,::serde::Serialize)]#[serde(tag="type")]pubenumBlock{"#;
    assert!(code.contains(public), "{code}");
    assert!(
        code.contains(r#"#[serde(rename="text")]Text(TextBlock),#[serde(rename="empty")]Empty,}"#),
        "{code}"
    );
}

#[test]
fn closed_union_deserializes_through_the_runtime() {
    let code = compact(block());
    let deserialize = "impl<'de>::serde::Deserialize<'de>forBlock{fndeserialize<D:::serde::Deserializer<'de>>(\
                       deserializer:D)->::std::result::Result<Self,D::Error>{crate::runtime::\
                       deserialize_tagged(deserializer)}}";
    assert!(code.contains(deserialize), "{code}");
    assert!(code.contains(r#"implcrate::runtime::TaggedUnionforBlock{constTAG:&'staticstr="type";"#));
    assert!(code.contains(r#"constEXPECTING:&'staticstr="internallytaggedenumBlock";"#), "{code}");
}

#[test]
fn closed_union_reads_payload_variants_from_the_body_and_skips_it_for_unit_variants() {
    let code = compact(block());
    assert!(code.contains("buffered::BlockTag::Text=>body.payload().map(Self::Text),"), "{code}");
    assert!(code.contains("buffered::BlockTag::Empty=>body.unit().map(|()|Self::Empty),"), "{code}");
}

#[test]
fn closed_union_twin_in_buffered_keeps_serde_derive_under_the_same_name() {
    let code = compact(block());
    let twin = r#"pubmodbuffered{#[derive(::serde::Deserialize)]#[serde(tag="type")]pubenumBlock{#[serde(rename="text")]Text(super::TextBlock),#[serde(rename="empty")]Empty,}"#;
    assert!(code.contains(twin), "{code}");
    let tag = r#"#[derive(::serde::Deserialize)]#[serde(variant_identifier)]pubenumBlockTag{#[serde(rename="text")]Text,#[serde(rename="empty")]Empty,}"#;
    assert!(code.contains(tag), "{code}");
    assert!(code.contains("impl::std::convert::From<buffered::Block>forBlock{"), "{code}");
}

#[test]
fn one_buffered_module_holds_every_twin() {
    let code: String = unions(&[block(), update(true), block()]).to_string().split_whitespace().collect();
    assert_eq!(code.matches("pubmodbuffered").count(), 1, "{code}");
    assert_eq!(code.matches("pubenumBlockTag").count(), 2, "{code}");
}

// Open string enums.

#[test]
fn open_string_enum_keeps_unknown_values_in_an_untagged_other_string() {
    let code = compact(severity());
    assert!(code.contains("#[serde(untagged)]Other(::std::string::String),}"), "{code}");
}

#[test]
fn open_string_enum_renames_each_known_value() {
    let code = compact(severity());
    assert!(code.contains(r#"#[serde(rename="info")]Info,"#), "{code}");
    assert!(code.contains(r#"#[serde(rename="needs_attention")]NeedsAttention,"#), "{code}");
}

#[test]
fn open_string_as_str_returns_the_wire_value_of_every_variant() {
    let code = compact(severity());
    let body = r#"pubfnas_str(&self)->&str{matchself{Self::Info=>"info",Self::NeedsAttention=>"needs_attention",Self::Other(value)=>value,}}"#;
    assert!(code.contains(body), "{code}");
}

#[test]
fn a_known_value_called_other_leaves_the_catch_all_unknown() {
    let kind = UnionSpec::OpenString {
        name: "Kind".into(),
        doc: String::new(),
        values: vec![("read".into(), String::new()), ("other".into(), String::new())],
    };
    let code = compact(kind);
    assert!(code.contains(r#"#[serde(rename="other")]Other,"#), "{code}");
    assert!(code.contains("#[serde(untagged)]Unknown(::std::string::String),}"), "{code}");
    assert!(code.contains("Self::Unknown(value)=>value,"), "{code}");
}

#[test]
fn emitted_unions_parse_as_rust_items() {
    let tokens = unions(&[update(true), severity()]);
    let file: syn::File = syn::parse2(tokens).expect("parses");
    assert_eq!(file.items.len(), 3, "two enums and one impl");
}

#[test]
fn emitted_closed_union_parses_as_rust_items() {
    let file: syn::File = syn::parse2(unions(&[block()])).expect("parses");
    assert_eq!(file.items.len(), 5, "the enum, three impls and the buffered module");
}
