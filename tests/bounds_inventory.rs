//! `docs/bounds.md`, the inventory of every input's bound, held to the code it describes.
//! This test owns three promises of that file: every file path it names exists; every test
//! it names is a `fn` of a test (under `tests/`, `crates/*/tests/`, or after a
//! `#[cfg(test)]` in the sources); and every source file that reads peer input, by the rule
//! of [`READS`], is named in some row or listed in [`OWN_DATA`] with why it reads only
//! Heron's own data. Rows may still say `none` (no bound, or no test that crosses it); each
//! such row must be listed under the file's Gaps, and the test prints how many there are.
//!
//! Everything is read as text from the repository: no external tool, no build of the code
//! it checks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The inventory, relative to the repository root.
const DOC: &str = "docs/bounds.md";

/// The columns of every table, in order.
const COLUMNS: [&str; 5] = ["input", "bound", "enforced in", "past it", "test"];

/// Where the ids of rows without a bound or a test must be listed.
const GAPS: &str = "## Gaps";

/// A source file "reads peer input" when its code (comment lines and its trailing
/// `#[cfg(test)] mod tests { ... }` left out) contains one of these: a JSON or TOML decode of
/// text it was handed, a whole-file or capped read, a read of a line, a chunk or a buffer
/// from a pipe, socket or HTTP body, a folder listing, or an environment variable. The rule
/// is over-broad on purpose (a decode of Heron's own JSON matches too): a file that matches
/// but reads only Heron's own data goes in [`OWN_DATA`] with its reason, so a new reader of
/// outside data cannot slip in without a row.
const READS: [&str; 21] = [
    "serde_json::from_str",
    "serde_json::from_slice",
    "serde_json::from_value",
    "serde_json::from_reader",
    "from_str::<",
    "Deserializer::from_str",
    "toml::from_str",
    "from_path_iter(",
    "read_to_string(",
    "fs::read(",
    "read_capped(",
    "read_to_end(",
    "read_line(",
    "next_line(",
    "fill_buf(",
    ".chunk()",
    "bytes_stream(",
    ".read(&mut ",
    "read_dir(",
    "env::var(",
    "env::var_os(",
];

/// Source files the rule matches that read only what Heron itself wrote or ships, each with
/// the reason. A file here must still match the rule, so the list cannot go stale silently.
const OWN_DATA: [(&str, &str); 9] = [
    (
        "crates/heron-codegen/src/lib.rs",
        "the build-time generator reads the ACP schema checked in under schema/",
    ),
    (
        "crates/heron-codegen/src/main.rs",
        "the generator's `check` reads the files checked in under generated/ to compare",
    ),
    ("crates/heron-codegen/src/types.rs", "decodes the schema definitions the generator itself normalized"),
    ("src/build.rs", "the build script reads Cargo's build environment"),
    ("src/cli/manifest.rs", "parses Heron's own Cargo.toml, compiled into the binary"),
    ("src/cli/doctor.rs", "parses the Zed settings snippet compiled into the binary"),
    ("crates/heron-protocol/src/schema.rs", "parses the ACP schema compiled into the binary"),
    (
        "crates/heron-core/src/sandbox/own.rs",
        "reads the kernel's /proc entries of Heron's own process and its parents",
    ),
    (
        "crates/heron-core/src/sandbox/support.rs",
        "reads only `CONFINED_VARIABLE`, which Heron sets on the children it confines",
    ),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `path` relative to the repository root, with `/` separators.
fn relative(path: &Path) -> String {
    let inside = path.strip_prefix(root()).unwrap_or(path);
    inside.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// Every `.rs` file below `dir`, sorted; none when `dir` does not exist.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The `src` folder of every crate of the workspace, and the binary's own.
fn source_roots() -> Vec<PathBuf> {
    let mut roots = vec![root().join("src")];
    let crates = std::fs::read_dir(root().join("crates")).expect("crates/ lists");
    let mut members: Vec<PathBuf> = crates.flatten().map(|e| e.path().join("src")).collect();
    members.sort();
    roots.extend(members);
    roots
}

/// The production code of a source file: without its trailing unit-test module (the first
/// `#[cfg(test)]` whose next line opens `mod tests`) and without comment lines, which may
/// name a read without making one.
fn production_code(text: &str) -> String {
    let mut cut = text.len();
    let mut from = 0;
    while let Some(at) = text[from..].find("#[cfg(test)]").map(|i| i + from) {
        let after = &text[at + "#[cfg(test)]".len()..];
        let next = after.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or_default();
        if next.contains("mod tests") && next.ends_with('{') {
            cut = at;
            break;
        }
        from = at + 1;
    }
    text[..cut].lines().filter(|line| !line.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
}

/// Whether a source file reads peer input, by [`READS`]. Unit-test files (`tests.rs`, a
/// `#[cfg(test)]` module of their parent) are tests, not sources.
fn reads_peer_input(path: &Path) -> bool {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return false;
    }
    let code = production_code(&read(path));
    READS.iter().any(|call| code.contains(call))
}

/// One row of a table: its id and its five cells.
#[derive(Debug)]
struct Row {
    id: String,
    cells: Vec<String>,
}

impl Row {
    fn cell(&self, column: &str) -> &str {
        let at = COLUMNS.iter().position(|c| *c == column).expect("a known column");
        &self.cells[at]
    }

    /// Whether the cell says there is none (no bound, or no test that crosses it).
    fn is_none(&self, column: &str) -> bool {
        self.cell(column).trim_start().starts_with("none")
    }

    /// The whole row, for failure messages.
    fn shown(&self) -> String {
        format!("{} ({})", self.id, self.cells[0])
    }
}

/// The text between backticks in `text`.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The repository paths a cell names: code spans that start at a top folder of the
/// repository (patterns such as `.heron/commands/*.md` are not paths).
fn paths_in(cell: &str) -> Vec<&str> {
    code_spans(cell)
        .into_iter()
        .filter(|span| ["src/", "crates/", "tests/", "docs/"].iter().any(|top| span.starts_with(top)))
        .filter(|span| !span.contains(['*', '<', ' ']))
        .collect()
}

/// The test names a test cell gives: code spans that are Rust identifiers.
fn test_names(cell: &str) -> Vec<&str> {
    code_spans(cell)
        .into_iter()
        .filter(|span| {
            span.contains('_')
                && span.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        })
        .collect()
}

/// The rows of every table of the inventory, each checked to have the inventory's columns.
fn rows(doc: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in doc.lines() {
        let Some(inner) = line.strip_prefix('|').and_then(|l| l.strip_suffix('|')) else {
            in_table = false;
            continue;
        };
        let cells: Vec<String> = inner.split(" | ").map(|c| c.trim().to_owned()).collect();
        if !in_table {
            assert_eq!(cells, COLUMNS, "a table of {DOC} must have the columns {COLUMNS:?}: {line}");
            in_table = true;
            continue;
        }
        if inner.chars().all(|ch| matches!(ch, '-' | '|' | ':' | ' ')) {
            continue;
        }
        assert_eq!(cells.len(), COLUMNS.len(), "a row of {DOC} has {} cells, not 5: {line}", cells.len());
        let id = cells[0]
            .strip_prefix("**")
            .and_then(|rest| rest.split_once("**"))
            .map(|(id, _)| id.to_owned())
            .unwrap_or_else(|| panic!("a row of {DOC} must start with its id in bold: {line}"));
        rows.push(Row { id, cells });
    }
    rows
}

/// The ids of rows a text names: a capital letter and digits, as a word.
fn ids_in(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| {
            let mut chars = word.chars();
            chars.next().is_some_and(|c| c.is_ascii_uppercase())
                && word.len() > 1
                && chars.all(|c| c.is_ascii_digit())
        })
        .map(str::to_owned)
        .collect()
}

/// The text of every file where a test may live, by path: integration tests whole, and in
/// the sources what follows the first `#[cfg(test)]` (unit-test files whole).
fn test_texts() -> BTreeMap<String, String> {
    let mut texts = BTreeMap::new();
    let mut test_dirs = vec![root().join("tests")];
    for member in std::fs::read_dir(root().join("crates")).expect("crates/ lists").flatten() {
        test_dirs.push(member.path().join("tests"));
    }
    for file in test_dirs.iter().flat_map(|dir| rust_files(dir)) {
        texts.insert(relative(&file), read(&file));
    }
    for file in source_roots().iter().flat_map(|dir| rust_files(dir)) {
        let text = read(&file);
        let tests = if file.file_name().is_some_and(|n| n == "tests.rs") {
            Some(text.as_str())
        } else {
            text.find("#[cfg(test)]").map(|at| &text[at..])
        };
        if let Some(tests) = tests {
            texts.insert(relative(&file), tests.to_owned());
        }
    }
    texts
}

/// Whether `text` defines a function called `name`.
fn defines(text: &str, name: &str) -> bool {
    text.contains(&format!("fn {name}("))
}

#[test]
fn every_input_that_reads_peer_input_has_a_row_and_every_named_path_and_test_exists() {
    let doc = read(&root().join(DOC));
    let rows = rows(&doc);
    assert!(!rows.is_empty(), "{DOC} has no rows");
    let mut problems = Vec::new();

    // Ids are unique: Gaps names rows by them.
    let mut seen = BTreeSet::new();
    for row in &rows {
        if !seen.insert(row.id.clone()) {
            problems.push(format!("the id {} is used twice", row.id));
        }
    }

    // (a) Every path named in any column exists, and every row says where it is enforced.
    for row in &rows {
        for path in row.cells.iter().flat_map(|cell| paths_in(cell)) {
            if !root().join(path).exists() {
                problems.push(format!("{}: `{path}` does not exist", row.shown()));
            }
        }
        if paths_in(row.cell("enforced in")).is_empty() {
            problems.push(format!("{}: the enforced-in column names no file", row.shown()));
        }
    }

    // (b) Every test named is a `fn` of a test, in the file its cell names when it names one.
    let tests = test_texts();
    for row in &rows {
        let cell = row.cell("test");
        let names = test_names(cell);
        if names.is_empty() && !row.is_none("test") && !cell.starts_with("see ") {
            problems.push(format!("{}: the test column names no test (or says `none`)", row.shown()));
        }
        let files = paths_in(cell);
        for name in names {
            let found = if files.is_empty() {
                tests.values().any(|text| defines(text, name))
            } else {
                files.iter().any(|file| tests.get(*file).is_some_and(|text| defines(text, name)))
            };
            if !found {
                problems.push(format!("{}: no test `fn {name}` in {files:?}", row.shown()));
            }
        }
    }

    // (c) Every source file that reads peer input is named in a row, or is Heron's own data.
    let named: BTreeSet<&str> =
        rows.iter().flat_map(|row| row.cells.iter()).flat_map(|c| paths_in(c)).collect();
    let own: BTreeMap<&str, &str> = OWN_DATA.into_iter().collect();
    let mut readers = BTreeSet::new();
    for file in source_roots().iter().flat_map(|dir| rust_files(dir)) {
        if !reads_peer_input(&file) {
            continue;
        }
        let path = relative(&file);
        if !named.contains(path.as_str()) && !own.contains_key(path.as_str()) {
            problems.push(format!(
                "{path} reads peer input (it calls one of READS) but no row of {DOC} names it; add a row, \
                 or add it to OWN_DATA with why it reads only Heron's own data"
            ));
        }
        readers.insert(path);
    }
    for (path, reason) in OWN_DATA {
        assert!(!reason.is_empty(), "{path} needs a reason");
        if !readers.contains(path) {
            problems.push(format!("OWN_DATA lists {path}, which no longer matches the rule: remove it"));
        }
    }

    // Rows without a bound or a test are listed under Gaps, and Gaps names only rows.
    let gaps = doc.split_once(GAPS).map(|(_, rest)| rest).unwrap_or_else(|| panic!("{DOC} has no {GAPS}"));
    let listed = ids_in(gaps);
    let (mut no_bound, mut no_test) = (0, 0);
    for row in &rows {
        let (bound, test) = (row.is_none("bound"), row.is_none("test"));
        no_bound += usize::from(bound);
        no_test += usize::from(test);
        if (bound || test) && !listed.contains(&row.id) {
            problems.push(format!("{} says `none` but is not listed under Gaps", row.shown()));
        }
    }
    for id in listed.difference(&seen) {
        problems.push(format!("Gaps names {id}, which is no row"));
    }

    eprintln!(
        "{DOC}: {} rows, {no_bound} without a bound, {no_test} without a test that crosses it; {} source \
         files read peer input ({} of them only Heron's own data)",
        rows.len(),
        readers.len(),
        OWN_DATA.len()
    );
    assert!(problems.is_empty(), "{DOC} is out of step with the code:\n- {}", problems.join("\n- "));
}

#[test]
fn the_rule_sees_reads_and_ignores_comments_and_the_test_module() {
    let code = "fn a() {\n    // serde_json::from_str is named here only\n}\n#[cfg(test)]\nmod tests {\n    \
                fn b() { std::fs::read_to_string(\"x\"); }\n}\n";
    let kept = production_code(code);
    assert!(!READS.iter().any(|call| kept.contains(call)), "{kept}");
    let reading = "#[cfg(test)]\nfn helper() {}\nfn c() { let _ = std::env::var(\"HOME\"); }\n";
    assert!(
        READS.iter().any(|call| production_code(reading).contains(call)),
        "a helper is not the test module"
    );
    assert_eq!(
        ids_in("E1, M10 and V2 (not MiB, nor X)"),
        BTreeSet::from(["E1".into(), "M10".into(), "V2".into()])
    );
    let cell = "`a_test_name` (`tests/acp_bounds.rs`); see `HERON_HOME/commands/*.md`";
    assert_eq!(paths_in(cell), ["tests/acp_bounds.rs"]);
    assert_eq!(test_names(cell), ["a_test_name"]);
}
