//! The acp and acp-v2 profiles built into the binary: every `conformance/*.ndjson` whose
//! header says `"profile": "acp"` (or `"acp-v2"`), embedded at compile time, so `heron
//! conformance --profile acp` (or `acp-v2`) tests any agent without a checkout of the
//! transcripts. A test keeps these lists and the files' headers in step.

/// `(name, text)` of one embedded transcript per name, read from `conformance/NAME.ndjson`.
macro_rules! bundle {
    ($($name:ident),* $(,)?) => {
        &[$((stringify!($name), include_str!(concat!("../../../conformance/", stringify!($name), ".ndjson")))),*]
    };
}

/// The acp profile's transcripts, by name, in name order.
pub const ACP: &[(&str, &str)] = bundle!(
    acp_cancel_request,
    acp_cancel_request_running,
    acp_initialize,
    acp_initialize_newer_version,
    acp_invalid_params,
    acp_invalid_request,
    acp_parse_error,
    acp_permission_request,
    acp_prompt_turn,
    acp_session_cancel,
    acp_session_close,
    acp_session_list,
    acp_session_load,
    acp_session_load_unadvertised,
    acp_session_resume,
    acp_unknown_method,
    acp_unknown_session,
    acp_unknown_session_load,
);

/// The acp-v2 profile's transcripts (ACP v2, a draft), by name, in name order.
pub const ACP_V2: &[(&str, &str)] = bundle!(
    acp_v2_cancel_request,
    acp_v2_initialize,
    acp_v2_prompt_turn,
    acp_v2_session_cancel,
    acp_v2_unknown_session,
    acp_v2_unsupported_version,
    acp_v2_v1_methods_gone,
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Profile, Scenario};

    fn profile_files(profile: Profile) -> Vec<String> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../conformance");
        let files = crate::transcript_files(&[dir]).expect("conformance/ lists");
        files
            .iter()
            .map(|file| Scenario::load(file).unwrap_or_else(|e| panic!("{e}")))
            .filter(|scenario| scenario.header.profile == profile)
            .map(|scenario| scenario.name)
            .collect()
    }

    #[test]
    fn each_bundle_is_exactly_its_profile_files_in_name_order() {
        for (profile, bundle) in [(Profile::Acp, ACP), (Profile::AcpV2, ACP_V2)] {
            let bundled: Vec<&str> = bundle.iter().map(|(name, _)| *name).collect();
            assert_eq!(
                bundled,
                profile_files(profile),
                "list each {}-profile transcript in bundle!() in crates/heron-conformance/src/bundled.rs",
                profile.name()
            );
        }
    }

    #[test]
    fn every_bundled_transcript_parses_and_says_its_profile() {
        for (profile, bundle) in [(Profile::Acp, ACP), (Profile::AcpV2, ACP_V2)] {
            for (name, text) in bundle {
                let scenario = Scenario::parse(name, text).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(scenario.header.profile, profile, "{name}");
            }
        }
    }

    /// A check any agent is measured by names what it enforces, so an agent author reads
    /// the failure next to the spec, and a dispute is about the spec, not the kit.
    #[test]
    fn every_bundled_check_names_the_spec_it_enforces() {
        for (name, text) in ACP.iter().chain(ACP_V2) {
            let scenario = Scenario::parse(name, text).unwrap_or_else(|e| panic!("{e}"));
            let spec = scenario.header.spec.unwrap_or_default();
            assert!(
                spec.starts_with("ACP v1") || spec.starts_with("ACP v2"),
                "{name} names no spec: {spec:?}"
            );
        }
    }
}
