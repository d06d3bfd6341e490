//! The acp profile built into the binary: every `conformance/*.ndjson` whose header says
//! `"profile": "acp"`, embedded at compile time, so `heron conformance --profile acp` tests
//! any agent without a checkout of the transcripts. A test keeps this list and the files'
//! headers in step.

/// `(name, text)` of one embedded transcript per name, read from `conformance/NAME.ndjson`.
macro_rules! bundle {
    ($($name:ident),* $(,)?) => {
        &[$((stringify!($name), include_str!(concat!("../../conformance/", stringify!($name), ".ndjson")))),*]
    };
}

/// The acp profile's transcripts, by name, in name order.
pub const ACP: &[(&str, &str)] = bundle!(
    acp_cancel_request,
    acp_initialize,
    acp_initialize_newer_version,
    acp_invalid_params,
    acp_invalid_request,
    acp_parse_error,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::format::{Profile, Scenario};

    #[test]
    fn the_bundle_is_exactly_the_acp_profile_files_in_name_order() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance");
        let files = crate::conformance::transcript_files(&[dir]).expect("conformance/ lists");
        let acp: Vec<String> = files
            .iter()
            .map(|file| Scenario::load(file).unwrap_or_else(|e| panic!("{e}")))
            .filter(|scenario| scenario.header.profile == Profile::Acp)
            .map(|scenario| scenario.name)
            .collect();
        let bundled: Vec<&str> = ACP.iter().map(|(name, _)| *name).collect();
        assert_eq!(
            bundled, acp,
            "list each acp-profile transcript in bundle!() in src/conformance/bundled.rs"
        );
    }

    #[test]
    fn every_bundled_transcript_parses_and_says_it_is_acp() {
        for (name, text) in ACP {
            let scenario = Scenario::parse(name, text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(scenario.header.profile, Profile::Acp, "{name}");
        }
    }
}
