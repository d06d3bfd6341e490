//! What `heron conformance` prints about a run: a text table for people (the default), JUnit
//! XML for CI systems, or JSON for scripts. Every format carries the same facts per
//! scenario: its name, pass, fail or skip, the time, and the reason for a failure or a skip.

use serde_json::json;

use super::runner::Outcome;

/// How the results are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// A table, then each failure in full.
    #[default]
    Text,
    /// JUnit XML: a `testsuite` of `testcase`s with `failure` or `skipped`.
    Junit,
    /// One JSON object.
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(text: &str) -> Result<Format, String> {
        match text {
            "text" => Ok(Format::Text),
            "junit" => Ok(Format::Junit),
            "json" => Ok(Format::Json),
            _ => Err(format!("`{text}` is not a format (text, junit or json)")),
        }
    }
}

/// A scenario's result, as every format names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Pass,
    Update,
    Fail,
    Skip,
    Advice,
}

fn verdict(outcome: &Outcome) -> Verdict {
    match (&outcome.result, outcome.rewritten, &outcome.skipped) {
        // A recommendation not followed is advice: the spec does not require it.
        (Err(_), _, _) if outcome.recommendation => Verdict::Advice,
        (Err(_), _, _) => Verdict::Fail,
        (Ok(()), _, Some(_)) => Verdict::Skip,
        (Ok(()), true, None) => Verdict::Update,
        (Ok(()), false, None) => Verdict::Pass,
    }
}

/// One line on why a scenario failed or was skipped, empty when it passed; a failure names
/// what it enforces.
fn reason(outcome: &Outcome) -> String {
    let traced = outcome.spec.as_deref().map(|spec| format!(" [{spec}]")).unwrap_or_default();
    match (&outcome.result, &outcome.skipped) {
        (Err(failure), _) if outcome.recommendation => {
            format!("recommended, not required: line {}: {}{traced}", failure.line, failure.summary)
        }
        (Err(failure), _) => format!("line {}: {}{traced}", failure.line, failure.summary),
        (Ok(()), Some(why)) => why.clone(),
        (Ok(()), None) => String::new(),
    }
}

/// The counts a summary line shows: passed (updates included), failed, skipped.
fn counts(outcomes: &[Outcome]) -> (usize, usize, usize) {
    let count = |wanted: &[Verdict]| outcomes.iter().filter(|o| wanted.contains(&verdict(o))).count();
    (count(&[Verdict::Pass, Verdict::Update]), count(&[Verdict::Fail]), count(&[Verdict::Skip]))
}

/// How many recommendations were not followed.
fn advised(outcomes: &[Outcome]) -> usize {
    outcomes.iter().filter(|o| verdict(o) == Verdict::Advice).count()
}

/// Whether the run failed: a required check that failed, or with `strict` a recommendation
/// not followed too.
pub fn failed(outcomes: &[Outcome], strict: bool) -> bool {
    outcomes.iter().any(|o| o.result.is_err() && (strict || !o.recommendation))
}

/// `outcomes` as `--strict` reports them: a recommendation not followed is a failure.
pub fn strictly(outcomes: Vec<Outcome>) -> Vec<Outcome> {
    outcomes.into_iter().map(|outcome| Outcome { recommendation: false, ..outcome }).collect()
}

/// `outcomes` written in `format`; `suite` names the run (the profile, or `conformance`).
pub fn render(outcomes: &[Outcome], format: Format, suite: &str) -> String {
    match format {
        Format::Text => text(outcomes),
        Format::Junit => junit(outcomes, suite),
        Format::Json => json_report(outcomes, suite),
    }
}

/// The pass/fail table for `outcomes` with each failure's or skip's reason, a summary line,
/// then each failure in full.
pub fn text(outcomes: &[Outcome]) -> String {
    let width = outcomes.iter().map(|o| o.name.len()).max().unwrap_or(8).max(8);
    let mut out = format!("{:<6} {:<width$} {:>8}  reason\n", "result", "scenario", "time");
    for outcome in outcomes {
        let shown = match verdict(outcome) {
            Verdict::Pass => "pass",
            Verdict::Update => "update",
            Verdict::Fail => "FAIL",
            Verdict::Skip => "skip",
            Verdict::Advice => "advice",
        };
        let line = format!(
            "{shown:<6} {:<width$} {:>7.2}s  {}",
            outcome.name,
            outcome.elapsed.as_secs_f64(),
            reason(outcome)
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let (passed, failed, skipped) = counts(outcomes);
    let advice = match advised(outcomes) {
        0 => String::new(),
        n => format!(", {n} recommendation{} not followed", if n == 1 { "" } else { "s" }),
    };
    out.push_str(&format!("\n{passed} passed, {failed} failed, {skipped} skipped{advice}\n"));
    for outcome in outcomes {
        if let Err(failure) = &outcome.result {
            out.push_str(&format!("\n=== {} ===\n{failure}", outcome.name));
        }
    }
    out
}

/// `text` escaped for XML, and without the control characters XML 1.0 cannot carry (an
/// agent's stderr may hold any byte).
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c < ' ' || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML as CI systems read it: one `testsuite` named `suite`, a `testcase` per
/// scenario, `failure` with the one-line reason as its message and the full report as its
/// text, `skipped` with its reason.
pub fn junit(outcomes: &[Outcome], suite: &str) -> String {
    let (_, failed, skipped) = counts(outcomes);
    // A recommendation not followed is a skipped testcase, with the advice as its message.
    let skipped = skipped + advised(outcomes);
    let total: f64 = outcomes.iter().map(|o| o.elapsed.as_secs_f64()).sum();
    let suite = xml(suite);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"heron conformance\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" skipped=\"{skipped}\" time=\"{total:.3}\">\n",
        outcomes.len()
    ));
    out.push_str(&format!(
        "  <testsuite name=\"{suite}\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" skipped=\"{skipped}\" time=\"{total:.3}\">\n",
        outcomes.len()
    ));
    for outcome in outcomes {
        let open = format!(
            "    <testcase name=\"{}\" classname=\"conformance.{suite}\" time=\"{:.3}\"",
            xml(&outcome.name),
            outcome.elapsed.as_secs_f64()
        );
        match (&outcome.result, &outcome.skipped) {
            (Err(_), _) if outcome.recommendation => out.push_str(&format!(
                "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                xml(&reason(outcome))
            )),
            (Err(failure), _) => out.push_str(&format!(
                "{open}>\n      <failure message=\"{}\" type=\"mismatch\">{}</failure>\n    </testcase>\n",
                xml(&reason(outcome)),
                xml(&failure.to_string())
            )),
            (Ok(()), Some(why)) => out
                .push_str(&format!("{open}>\n      <skipped message=\"{}\"/>\n    </testcase>\n", xml(why))),
            (Ok(()), None) => out.push_str(&format!("{open}/>\n")),
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// One JSON object: the suite, the counts, and per scenario its name, result (`pass`,
/// `update`, `fail`, `skip`), seconds, reason and, for a failure, the line and full report.
pub fn json_report(outcomes: &[Outcome], suite: &str) -> String {
    let (passed, failed, skipped) = counts(outcomes);
    let scenarios: Vec<serde_json::Value> = outcomes
        .iter()
        .map(|outcome| {
            let result = match verdict(outcome) {
                Verdict::Pass => "pass",
                Verdict::Update => "update",
                Verdict::Fail => "fail",
                Verdict::Skip => "skip",
                Verdict::Advice => "advice",
            };
            let mut entry = json!({
                "name": outcome.name,
                "result": result,
                "seconds": outcome.elapsed.as_secs_f64(),
            });
            if let Some(map) = entry.as_object_mut() {
                if let Some(spec) = &outcome.spec {
                    map.insert("spec".into(), spec.clone().into());
                }
                let why = reason(outcome);
                if !why.is_empty() {
                    map.insert("reason".into(), why.into());
                }
                if let Err(failure) = &outcome.result {
                    map.insert("line".into(), failure.line.into());
                    map.insert("detail".into(), failure.to_string().into());
                }
            }
            entry
        })
        .collect();
    let report = json!({
        "suite": suite,
        "passed": passed,
        "failed": failed,
        "skipped": skipped,
        "advice": advised(outcomes),
        "scenarios": scenarios,
    });
    let mut out = serde_json::to_string_pretty(&report).unwrap_or_default();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::runner::Failure;

    fn outcomes() -> Vec<Outcome> {
        let failure = Failure {
            line: 4,
            summary: "the agent's message does not match (at $.error.code: expected -32002, got -32603)"
                .into(),
            detail: "expected <a> & \"b\"".into(),
            stderr: "bell \u{7} here".into(),
        };
        let outcome = |name: &str, result, skipped: Option<&str>| Outcome {
            name: name.into(),
            elapsed: Duration::from_millis(250),
            result,
            rewritten: false,
            skipped: skipped.map(str::to_owned),
            spec: Some("ACP v1 schema: RequestError".into()),
            recommendation: false,
        };
        vec![
            outcome("ok", Ok(()), None),
            outcome("broken", Err(failure), None),
            outcome("unserved", Ok(()), Some("the agent does not advertise agentCapabilities.loadSession")),
        ]
    }

    #[test]
    fn the_text_table_gives_each_failure_and_skip_its_reason() {
        let table = text(&outcomes());
        assert!(table.contains("FAIL   broken"), "{table}");
        assert!(table.contains("line 4: the agent's message does not match (at $.error.code"), "{table}");
        assert!(table.contains("skip   unserved"), "{table}");
        assert!(table.contains("does not advertise agentCapabilities.loadSession"), "{table}");
        assert!(table.contains("1 passed, 1 failed, 1 skipped"), "{table}");
        assert!(table.contains("=== broken ==="), "the failure in full: {table}");
    }

    #[test]
    fn a_recommendation_not_followed_is_advice_and_every_failure_names_what_it_enforces() {
        let mut all = outcomes();
        let mut advice = all[1].clone();
        advice.name = "advised".into();
        advice.recommendation = true;
        all.push(advice);
        let table = text(&all);
        assert!(table.contains("[ACP v1 schema: RequestError]"), "{table}");
        assert!(table.contains("advice advised"), "{table}");
        assert!(table.contains("1 passed, 1 failed, 1 skipped, 1 recommendation not followed"), "{table}");
        let report: serde_json::Value = serde_json::from_str(&json_report(&all, "acp")).expect("JSON");
        assert_eq!((report["failed"].as_u64(), report["advice"].as_u64()), (Some(1), Some(1)));
        assert_eq!(report["scenarios"][0]["spec"], "ACP v1 schema: RequestError");
        assert!(junit(&all, "acp").contains(r#"failures="1" errors="0" skipped="2""#));
        // Only the required check's failure fails the run, unless the run is strict.
        let (required, advised) = (vec![all[1].clone()], vec![all[3].clone()]);
        assert!(failed(&required, false) && !failed(&advised, false) && failed(&advised, true));
        let strict = text(&strictly(all));
        assert!(strict.contains("FAIL   advised") && strict.contains("2 failed"), "{strict}");
    }

    #[test]
    fn junit_has_a_testcase_per_scenario_with_failure_and_skipped_escaped() {
        let xml = junit(&outcomes(), "acp");
        assert!(xml.starts_with("<?xml"), "{xml}");
        assert!(
            xml.contains(r#"<testsuite name="acp" tests="3" failures="1" errors="0" skipped="1""#),
            "{xml}"
        );
        assert!(xml.contains(r#"<testcase name="ok" classname="conformance.acp" time="0.250"/>"#), "{xml}");
        assert!(xml.contains(r#"<failure message="line 4: the agent&apos;s message"#), "{xml}");
        assert!(xml.contains("expected &lt;a&gt; &amp; &quot;b&quot;"), "{xml}");
        assert!(xml.contains("bell \u{fffd} here") && !xml.contains('\u{7}'), "no raw control characters");
        assert!(xml.contains(r#"<skipped message="the agent does not advertise"#), "{xml}");
        assert_eq!(xml.matches("<testcase ").count(), 3);
    }

    #[test]
    fn json_names_each_result_and_counts_them() {
        let report: serde_json::Value = serde_json::from_str(&json_report(&outcomes(), "acp")).expect("JSON");
        assert_eq!(report["failed"], 1);
        assert_eq!(report["skipped"], 1);
        let results: Vec<&str> = report["scenarios"]
            .as_array()
            .expect("scenarios")
            .iter()
            .filter_map(|s| s["result"].as_str())
            .collect();
        assert_eq!(results, ["pass", "fail", "skip"]);
        assert_eq!(report["scenarios"][1]["line"], 4);
    }
}
