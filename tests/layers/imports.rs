//! Which module of a crate names which, read from its source: the graph the no-cycle test of
//! `layers.rs` checks. Invariant: an edge is only what the text says (a `use` tree, a
//! `crate::`, `$crate::`, `super::` or `self::` path outside comments and literals), so a
//! cycle it reports is one a reader of the code can find at the place it names.
//!
//! Deliberately small: a tokenizer that knows comments, string, char and raw literals and
//! lifetimes, and a scan for paths. A method call or a glob re-export hides a dependency from
//! it; what it does see, it places exactly.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module, by its path from the crate root (empty for the root itself).
pub type Module = Vec<String>;

/// Where one module names a sibling: `file:line`.
pub type Place = String;

/// For each module, the edges between its children: which child names which, and where
/// first. An edge from a module's own code to a child, or from a child to its parent, is no
/// edge here: parents and children know each other in any Rust crate.
pub type Graph = BTreeMap<Module, BTreeMap<(String, String), Place>>;

/// A cycle among the children of one module, in order, with where each step is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    /// The module whose children form it.
    pub parent: Module,
    /// The children, each naming the next and the last naming the first.
    pub members: Vec<String>,
    /// Where each member names the next.
    pub places: Vec<Place>,
}

impl std::fmt::Display for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parent =
            if self.parent.is_empty() { "the crate root".to_owned() } else { self.parent.join("::") };
        write!(f, "among the modules of {parent}: ")?;
        for (i, member) in self.members.iter().enumerate() {
            let next = &self.members[(i + 1) % self.members.len()];
            write!(f, "{}{member} -> {next} ({})", if i == 0 { "" } else { ", " }, self.places[i])?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// Rust source as the tokens paths are made of, each with its line; comments, literals,
/// lifetimes and whitespace dropped.
fn lex(text: &str) -> Vec<(Token, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let (mut at, mut line) = (0, 1);
    let ident_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    // Skips to just after the closing quote of a string starting at `from` (escapes
    // honoured), counting lines.
    let skip_string = |from: usize, line: &mut usize| {
        let mut i = from;
        while i < chars.len() && chars[i] != '"' {
            if chars[i] == '\\' {
                i += 1;
            }
            if chars.get(i) == Some(&'\n') {
                *line += 1;
            }
            i += 1;
        }
        i + 1
    };
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        if c == '\n' {
            line += 1;
            at += 1;
        } else if c.is_whitespace() {
            at += 1;
        } else if c == '/' && next == Some('/') {
            while at < chars.len() && chars[at] != '\n' {
                at += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while at < chars.len() {
                match (chars[at], chars.get(at + 1)) {
                    ('/', Some('*')) => (depth, at) = (depth + 1, at + 2),
                    ('*', Some('/')) => (depth, at) = (depth - 1, at + 2),
                    ('\n', _) => (line, at) = (line + 1, at + 1),
                    _ => at += 1,
                }
                if depth == 0 {
                    break;
                }
            }
        } else if c == '"' {
            at = skip_string(at + 1, &mut line);
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a), which has no
            // closing quote.
            if next == Some('\\') {
                // Past the quote, the backslash and the escaped character (itself maybe a quote).
                at += 3;
                while at < chars.len() && chars[at] != '\'' {
                    at += 1;
                }
                at += 1;
            } else if chars.get(at + 2) == Some(&'\'') {
                at += 3;
            } else {
                at += 1;
                while at < chars.len() && ident_char(chars[at]) {
                    at += 1;
                }
            }
        } else if c.is_ascii_digit() {
            while at < chars.len()
                && (ident_char(chars[at]) || (chars[at] == '.' && chars.get(at + 1) != Some(&'.')))
            {
                at += 1;
            }
        } else if ident_char(c) {
            let start = at;
            while at < chars.len() && ident_char(chars[at]) {
                at += 1;
            }
            let word: String = chars[start..at].iter().collect();
            // Raw and byte strings: r"..", r#".."#, b"..", br#".."#.
            let hashes = chars[at..].iter().take_while(|c| **c == '#').count();
            if (word == "r" || word == "br") && chars.get(at + hashes) == Some(&'"') {
                let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
                at += hashes + 1;
                while at < chars.len() && !chars[at..].starts_with(&close) {
                    if chars[at] == '\n' {
                        line += 1;
                    }
                    at += 1;
                }
                at += close.len();
            } else if word == "b" && chars.get(at) == Some(&'"') {
                at = skip_string(at + 1, &mut line);
            } else {
                tokens.push((Token::Ident(word), line));
            }
        } else if c == ':' && next == Some(':') {
            tokens.push((Token::PathSep, line));
            at += 2;
        } else {
            tokens.push((Token::Punct(c), line));
            at += 1;
        }
    }
    tokens
}

fn ident(token: Option<&(Token, usize)>) -> Option<&str> {
    match token {
        Some((Token::Ident(name), _)) => Some(name),
        _ => None,
    }
}

fn punct(token: Option<&(Token, usize)>, c: char) -> bool {
    matches!(token, Some((Token::Punct(p), _)) if *p == c)
}

/// The paths of the use tree starting at `tokens[*at]`, each with `prefix` before it.
fn use_tree(tokens: &[(Token, usize)], at: &mut usize, prefix: Module, out: &mut Vec<Module>) {
    let mut path = prefix;
    loop {
        match tokens.get(*at) {
            Some((Token::Ident(word), _)) if word == "as" => *at += 2,
            Some((Token::Ident(name), _)) => {
                path.push(name.clone());
                *at += 1;
            }
            Some((Token::PathSep, _)) => *at += 1,
            Some((Token::Punct('*'), _)) => *at += 1,
            Some((Token::Punct('{'), _)) => {
                *at += 1;
                loop {
                    let before = *at;
                    use_tree(tokens, at, path.clone(), out);
                    if punct(tokens.get(*at), ',') {
                        *at += 1;
                    } else {
                        if punct(tokens.get(*at), '}') {
                            *at += 1;
                        }
                        break;
                    }
                    if *at == before {
                        break;
                    }
                }
                return;
            }
            _ => break,
        }
    }
    out.push(path);
}

/// One path a module's text names, as written.
struct Named {
    from: Module,
    path: Module,
    line: usize,
}

/// Every path the text of `module` names that starts at the crate, `super` or `self`, and
/// the inline modules (`mod name { .. }`) it declares.
fn named_paths(tokens: &[(Token, usize)], module: &Module, inline: &mut BTreeSet<Module>) -> Vec<Named> {
    let mut named = Vec::new();
    // The module the text is in, and the brace depths where inline modules close.
    let (mut current, mut depth, mut open) = (module.clone(), 0usize, Vec::<(Module, usize)>::new());
    let mut at = 0;
    while at < tokens.len() {
        let line = tokens[at].1;
        match &tokens[at].0 {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if open.last().is_some_and(|(_, closes)| *closes == depth) {
                    current = open.pop().map(|(outer, _)| outer).unwrap_or_default();
                }
            }
            Token::Ident(word) if word == "mod" => {
                if let Some(name) = ident(tokens.get(at + 1))
                    && punct(tokens.get(at + 2), '{')
                {
                    let inner = [current.clone(), vec![name.to_owned()]].concat();
                    inline.insert(inner.clone());
                    open.push((std::mem::replace(&mut current, inner), depth));
                    depth += 1;
                    at += 3;
                    continue;
                }
            }
            Token::Ident(word) if word == "use" => {
                let mut paths = Vec::new();
                at += 1;
                use_tree(tokens, &mut at, Vec::new(), &mut paths);
                named.extend(paths.into_iter().map(|path| Named { from: current.clone(), path, line }));
                continue;
            }
            Token::Ident(word)
                if matches!(word.as_str(), "crate" | "super" | "self")
                    && matches!(tokens.get(at + 1), Some((Token::PathSep, _)))
                    && !matches!(
                        at.checked_sub(1).and_then(|i| tokens.get(i)),
                        Some((Token::PathSep, _))
                    ) =>
            {
                let mut path = vec![word.clone()];
                at += 1;
                while matches!(tokens.get(at), Some((Token::PathSep, _)))
                    && let Some(name) = ident(tokens.get(at + 1))
                {
                    path.push(name.to_owned());
                    at += 2;
                }
                named.push(Named { from: current.clone(), path, line });
                continue;
            }
            _ => {}
        }
        at += 1;
    }
    named
}

/// What `path`, named in `from`, refers to from the crate root; `None` for a path that
/// starts elsewhere (another crate, a name in scope).
fn resolve(from: &Module, path: &[String]) -> Option<Module> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "super" | "self" => {
            let mut base = from.clone();
            let mut rest = path;
            while let Some((step, after)) = rest.split_first() {
                match step.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = after;
            }
            Some([base, rest.to_vec()].concat())
        }
        _ => None,
    }
}

/// The modules of the crate whose root is `root` (its `lib.rs`), each with its file, found
/// by following `mod name;` from the root.
fn module_files(root: &Path) -> BTreeMap<Module, PathBuf> {
    let mut files = BTreeMap::new();
    let mut todo = vec![(Module::new(), root.to_path_buf(), root.parent().expect("a folder").to_path_buf())];
    while let Some((module, file, children)) = todo.pop() {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let tokens = lex(&text);
        let mut depth = 0usize;
        for (i, (token, _)) in tokens.iter().enumerate() {
            match token {
                Token::Punct('{') => depth += 1,
                Token::Punct('}') => depth = depth.saturating_sub(1),
                Token::Ident(word) if word == "mod" && depth == 0 => {
                    let Some(name) = ident(tokens.get(i + 1)) else { continue };
                    if !punct(tokens.get(i + 2), ';') {
                        continue;
                    }
                    let flat = children.join(format!("{name}.rs"));
                    let nested = children.join(name).join("mod.rs");
                    let child_file = if flat.is_file() { flat } else { nested };
                    assert!(
                        child_file.is_file(),
                        "{} declares `mod {name};` but neither {name}.rs nor {name}/mod.rs is beside it",
                        file.display()
                    );
                    let child = [module.clone(), vec![name.to_owned()]].concat();
                    todo.push((child, child_file, children.join(name)));
                }
                _ => {}
            }
        }
        files.insert(module, file);
    }
    files
}

/// The graph of which module names which, between siblings at every level, of the crate
/// whose root file is `root`. Places are shown relative to `shown_from`.
pub fn graph(root: &Path, shown_from: &Path) -> Graph {
    let files = module_files(root);
    let mut known: BTreeSet<Module> = files.keys().cloned().collect();
    let mut named = Vec::new();
    for (module, file) in &files {
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let shown = file.strip_prefix(shown_from).unwrap_or(file).display().to_string();
        named.extend(named_paths(&lex(&text), module, &mut known).into_iter().map(|n| (n, shown.clone())));
    }
    let mut graph = Graph::new();
    for (Named { from, path, line }, file) in named {
        let Some(mut target) = resolve(&from, &path) else { continue };
        // An item's path names the module it is in.
        while !target.is_empty() && !known.contains(&target) {
            target.pop();
        }
        let shared = from.iter().zip(&target).take_while(|(a, b)| a == b).count();
        if let (Some(a), Some(b)) = (from.get(shared), target.get(shared)) {
            let edges = graph.entry(from[..shared].to_vec()).or_default();
            edges.entry((a.clone(), b.clone())).or_insert_with(|| format!("{file}:{line}"));
        }
    }
    graph
}

/// The cycles among the children of each module: one for each set of children that all
/// reach each other (a strongly connected component), so that every tangle is reported,
/// not only the first.
pub fn cycles(graph: &Graph) -> Vec<Cycle> {
    let mut found = Vec::new();
    for (parent, edges) in graph {
        let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (a, b) in edges.keys() {
            next.entry(a).or_default().insert(b);
            next.entry(b).or_default();
        }
        let reach: BTreeMap<&str, BTreeSet<&str>> =
            next.keys().map(|node| (*node, reached(node, &next))).collect();
        let mut placed = BTreeSet::new();
        for node in next.keys() {
            if placed.contains(node) {
                continue;
            }
            let tangle: BTreeSet<&str> =
                reach[node].iter().copied().filter(|other| reach[other].contains(node)).collect();
            placed.extend(tangle.iter().copied());
            if tangle.is_empty() {
                continue;
            }
            // A walk inside the tangle from any of its members comes back to the walk.
            let inside: BTreeMap<&str, BTreeSet<&str>> = tangle
                .iter()
                .map(|n| (*n, next[n].iter().copied().filter(|m| tangle.contains(m)).collect()))
                .collect();
            let mut path = vec![*node];
            while let Some(step) = inside[path[path.len() - 1]].iter().next().copied() {
                if let Some(start) = path.iter().position(|n| *n == step) {
                    path.drain(..start);
                    break;
                }
                path.push(step);
            }
            let places = (0..path.len())
                .map(|i| edges[&(path[i].to_owned(), path[(i + 1) % path.len()].to_owned())].clone())
                .collect();
            found.push(Cycle {
                parent: parent.clone(),
                members: path.into_iter().map(str::to_owned).collect(),
                places,
            });
        }
    }
    found
}

/// Every node `from` reaches by one edge or more.
fn reached<'a>(from: &'a str, next: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> BTreeSet<&'a str> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from];
    while let Some(node) = todo.pop() {
        for after in &next[node] {
            if seen.insert(*after) {
                todo.push(after);
            }
        }
    }
    seen
}
