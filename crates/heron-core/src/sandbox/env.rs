//! The keys no child inherits: every variable of Heron's environment named like a key in
//! `HERON_HOME/.env` or whose value contains one of their values, and every variable whose
//! name says it holds a credential (`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`,
//! `ANTHROPIC_API_KEY`, ...): editors start agents with the user's shell environment, so
//! those are the user's keys too; and every variable whose value looks like one, whatever
//! its name (a private key, a token of a known shape, a JWT, a URL with a password, a
//! webhook URL). `sandbox_pass_env` in `config.toml` lets named ones through, whatever they
//! look like (never a `.env` key or its value). What a command sets itself (an MCP server's `env`) is its
//! definition's choice and is kept.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::config::Keys;
use crate::secret::Secret;

/// Values shorter than this are withheld only when a variable equals them exactly, so that
/// a short key does not strip every variable that happens to contain its letters (the same
/// floor as redaction).
const SHORTEST_CONTAINED: usize = 4;

/// Words of a variable's name (split on `_`, any case) that mark it as a credential
/// wherever they stand. Whole words only, so `TOKENIZERS_PARALLELISM` or `KEYMAP` pass.
/// `DSN` is a connection string that carries its key (`SENTRY_DSN`); `SECRETS` also takes
/// `SECRETS_DIR`, a folder's path and no secret, which costs a command little to miss
/// (`sandbox_pass_env` lets it through) where a `SECRETS` holding the secrets themselves
/// would cost the keys.
const CREDENTIAL_WORDS: [&str; 21] = [
    "KEY",
    "APIKEY",
    "TOKEN",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PGPASS",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "CREDS",
    "PAT",
    "JWT",
    "AUTH",
    "BEARER",
    "COOKIE",
    "COOKIES",
    "DSN",
    "WEBHOOK",
];

/// Parts of a name that mark a credential anywhere, even inside a word: a webhook's URL is
/// its own key (`SLACK_WEBHOOK_URL`, `DISCORDWEBHOOK`).
const CREDENTIAL_PARTS: [&str; 1] = ["WEBHOOK"];

/// Names with a credential word that hold none: the ssh agent's socket, which `git` and
/// `ssh` need to reach the agent (the keys stay in it).
const NOT_CREDENTIALS: [&str; 1] = ["SSH_AUTH_SOCK"];

/// Password managers' session variables (`BW_SESSION`, `OP_SESSION_<account>`).
const CREDENTIAL_PREFIXES: [&str; 2] = ["BW_SESSION", "OP_SESSION_"];

/// Endings of a name that mark a credential even inside a word (`PGPASSWORD`).
const CREDENTIAL_ENDINGS: [&str; 5] = ["PASSWORD", "PASSWD", "TOKEN", "SECRET", "APIKEY"];

/// Words that mark a credential only as the last of several (`MYSQL_PWD`): `PWD` alone is
/// the working folder.
const CREDENTIAL_LAST_WORDS: [&str; 1] = ["PWD"];

/// Key names and values kept out of children's environments.
#[derive(Debug, Clone, Default)]
pub struct Withheld {
    names: BTreeSet<String>,
    values: Vec<Secret>,
    /// Names that look like credentials but the user lets through.
    passed: BTreeSet<String>,
}

impl Withheld {
    /// Every name and non-empty value of `.env`; of the names that look like credentials,
    /// `passed` still reach children.
    pub fn from_keys(keys: &Keys, passed: &[String]) -> Self {
        let mut withheld = Self::new(keys.names().map(str::to_owned), keys.all().cloned());
        withheld.passed = passed.iter().filter(|name| !withheld.names.contains(*name)).cloned().collect();
        withheld
    }

    /// These names and values.
    fn new(names: impl IntoIterator<Item = String>, values: impl IntoIterator<Item = Secret>) -> Self {
        Self {
            names: names.into_iter().collect(),
            values: values.into_iter().filter(|v| !v.is_empty()).collect(),
            passed: BTreeSet::new(),
        }
    }

    /// Whether a variable must not reach a child.
    fn withholds(&self, name: &OsStr, value: &OsStr) -> bool {
        let value = value.as_bytes();
        let passed = name.to_str().is_some_and(|name| self.passed.contains(name));
        let named = name
            .to_str()
            .is_none_or(|name| self.names.contains(name) || (looks_like_a_credential(name) && !passed));
        named
            || (!passed && (holds_url_password(value) || looks_like_a_secret(value)))
            || self.values.iter().map(|secret| secret.expose().as_bytes()).any(|secret| {
                value == secret || (secret.len() >= SHORTEST_CONTAINED && contains(value, secret))
            })
    }

    /// Removes from `command` every inherited variable withheld; variables the command
    /// sets itself stay.
    pub(super) fn scrub(&self, command: &mut std::process::Command) {
        let own: BTreeSet<std::ffi::OsString> = command
            .get_envs()
            .filter(|(_, value)| value.is_some())
            .map(|(name, _)| name.to_os_string())
            .collect();
        for (name, value) in std::env::vars_os() {
            if !own.contains(&name) && self.withholds(&name, &value) {
                command.env_remove(&name);
            }
        }
    }
}

/// Whether a variable's name says it holds a credential (see [`CREDENTIAL_WORDS`] and the
/// lists after it).
fn looks_like_a_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if NOT_CREDENTIALS.contains(&upper.as_str()) {
        return false;
    }
    if CREDENTIAL_PREFIXES.iter().any(|prefix| upper.starts_with(prefix)) {
        return true;
    }
    let words: Vec<&str> = upper.split(['_', '-', '.']).filter(|word| !word.is_empty()).collect();
    words.iter().any(|word| CREDENTIAL_WORDS.contains(word))
        || CREDENTIAL_PARTS.iter().any(|part| upper.contains(part))
        || CREDENTIAL_ENDINGS.iter().any(|ending| upper.ends_with(ending))
        || (words.len() > 1 && words.last().is_some_and(|last| CREDENTIAL_LAST_WORDS.contains(last)))
}

/// Whether `value` holds a URL with a password in it (`postgres://user:pw@host/db`, an
/// `HTTPS_PROXY` with credentials): `scheme://`, then `user:password@` before any `/`.
fn holds_url_password(value: &[u8]) -> bool {
    let mut rest = value;
    while let Some(at) = rest.windows(3).position(|window| window == b"://") {
        rest = &rest[at + 3..];
        let authority = rest.split(|&b| b == b'/' || b == b'?' || b == b'#').next().unwrap_or_default();
        if let Some(userinfo) = authority.iter().rposition(|&b| b == b'@').map(|end| &authority[..end])
            && userinfo.iter().position(|&b| b == b':').is_some_and(|colon| colon + 1 < userinfo.len())
        {
            return true;
        }
    }
    false
}

/// Prefixes of tokens whose shape says what they are: OpenAI and Anthropic (`sk-`), Stripe,
/// GitHub, GitLab, Slack, Hugging Face, npm, PyPI, Google, AWS access key ids. Each must
/// start the value or follow a character that cannot be part of a token, and be followed
/// by at least [`TOKEN_TAIL`] token characters, so a path or a word that merely contains
/// the letters passes.
const TOKEN_PREFIXES: [&str; 21] = [
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxs-",
    "hf_",
    "npm_",
    "pypi-",
    "AIza",
    "AKIA",
    "ASIA",
];

/// The fewest token characters after a prefix.
const TOKEN_TAIL: usize = 16;

/// Hosts and paths whose URLs are their own keys: posting to one needs nothing else.
const WEBHOOKS: [&str; 5] = [
    "hooks.slack.com/",
    "discord.com/api/webhooks/",
    "discordapp.com/api/webhooks/",
    "webhook.office.com/",
    "outlook.office.com/webhook",
];

fn is_token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Whether `value` holds what a credential looks like: a private key, a token of a known
/// shape, a JWT, or a webhook URL.
fn looks_like_a_secret(value: &[u8]) -> bool {
    if contains(value, b"-----BEGIN") && contains(value, b"PRIVATE KEY") {
        return true;
    }
    if WEBHOOKS.iter().any(|hook| contains(value, hook.as_bytes())) {
        return true;
    }
    let token_at = |at: usize, prefix: &[u8]| {
        (at == 0 || !is_token_char(value[at - 1]))
            && value[at + prefix.len()..].iter().take_while(|&&b| is_token_char(b)).count() >= TOKEN_TAIL
    };
    let known = TOKEN_PREFIXES.iter().any(|prefix| {
        let prefix = prefix.as_bytes();
        value.windows(prefix.len()).enumerate().any(|(at, window)| window == prefix && token_at(at, prefix))
    });
    known || holds_jwt(value)
}

/// Whether `value` holds a JWT: `eyJ`, then three base64url parts joined by dots.
fn holds_jwt(value: &[u8]) -> bool {
    value.windows(3).enumerate().filter(|(_, w)| *w == b"eyJ").any(|(at, _)| {
        let token: Vec<&[u8]> = value[at..]
            .split(|&b| !(is_token_char(b) || b == b'.'))
            .next()
            .unwrap_or_default()
            .split(|&b| b == b'.')
            .collect();
        token.len() == 3 && token.iter().all(|part| part.len() >= 8)
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn withheld() -> Withheld {
        Withheld::new(["OPENAI_API_KEY".to_owned()], [Secret::new("sk-live-123456"), Secret::new("ab")])
    }

    #[test]
    fn a_key_name_or_a_key_value_is_withheld_and_nothing_else() {
        let w = withheld();
        assert!(w.withholds(OsStr::new("OPENAI_API_KEY"), OsStr::new("anything")));
        assert!(w.withholds(OsStr::new("COPY"), OsStr::new("sk-live-123456")));
        assert!(w.withholds(OsStr::new("URL"), OsStr::new("https://x/?key=sk-live-123456&a=1")));
        assert!(!w.withholds(OsStr::new("PATH"), OsStr::new("/usr/bin:/bin")));
    }

    #[test]
    fn a_value_that_looks_like_a_secret_is_withheld_whatever_its_name() {
        let w = Withheld::default();
        let held = |value: &str| w.withholds(OsStr::new("INNOCENT"), OsStr::new(value));
        for secret in [
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n-----END OPENSSH PRIVATE KEY-----",
            "sk-proj-abcdefghijklmnopqrstuvwx",
            "ghp_0123456789abcdefghijABCDEFGHIJ012345",
            "github_pat_11ABCDEFG0123456789_abcdefghij",
            "xoxb-123456789012-123456789012-abcdefghijkl",
            "AKIAIOSFODNN7EXAMPLEXX",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "https://hooks.slack.com/services/T000/B000/XXXXXXXX",
            "https://discord.com/api/webhooks/123/abc",
            "postgres://app:hunter2@db.internal/app",
            "Bearer sk-ant-api03-abcdefghijklmnopqrstu",
        ] {
            assert!(held(secret), "{secret}");
        }
        for ordinary in [
            "/usr/local/bin:/usr/bin:/bin",
            "en_US.UTF-8",
            "xterm-256color",
            "/home/me/desk-notes",
            "--task-size=16",
            "https://example.com/docs?page=2",
            "postgres://db.internal/app",
            "ask-me-later",
            "eyJ",
            "/tmp/sk-tmp",
        ] {
            assert!(!held(ordinary), "{ordinary}");
        }
        // What the user passes by name goes through, whatever it looks like.
        let passed = Withheld::from_keys(&Keys::default(), &["GH_TOKEN".to_owned()]);
        let token = OsStr::new("ghp_0123456789abcdefghijABCDEFGHIJ012345");
        assert!(!passed.withholds(OsStr::new("GH_TOKEN"), token));
        assert!(passed.withholds(OsStr::new("OTHER"), token));
    }

    #[test]
    fn a_variable_named_like_a_credential_is_withheld_unless_passed() {
        let w = Withheld::from_keys(
            &Keys::from_pairs([("LOCAL_KEY".to_owned(), "v".to_owned())]),
            &["GH_TOKEN".to_owned(), "LOCAL_KEY".to_owned()],
        );
        for name in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "ANTHROPIC_API_KEY",
            "npm_config__auth",
            "PGPASSWORD",
            "MYSQL_PWD",
            "DB_PASSWORD",
            "HF_TOKEN",
            "LOCAL_KEY",
            "stripe.secret",
            "DB_PASS",
            "GITHUB_PAT",
            "CI_JOB_JWT",
            "BW_SESSION",
            "OP_SESSION_my",
            "YARN_NPM_AUTH_IDENT",
            "DOCKER_AUTH_CONFIG",
            "SENTRY_DSN",
            "DATABASE_DSN",
            "SLACK_WEBHOOK_URL",
            "DISCORD_WEBHOOKS",
            "TEAMSWEBHOOKURL",
            "COOKIE",
            "SESSION_COOKIES",
            "BEARER",
            "API_BEARER",
            "PGPASS",
            "CREDS",
            "AWS_CREDS",
            "CREDENTIALS",
            "APP_SECRETS",
            "SECRETS_DIR",
        ] {
            assert!(w.withholds(OsStr::new(name), OsStr::new("x")), "{name} is withheld");
        }
        for name in [
            "PATH",
            "PWD",
            "OLDPWD",
            "TOKENIZERS_PARALLELISM",
            "KEYMAP",
            "SSH_AUTH_SOCK",
            "XAUTHORITY",
            "GH_TOKEN",
            "PGHOST",
            "PGPASSFILE",
            "DSNAME",
            "HOOKS",
        ] {
            assert!(!w.withholds(OsStr::new(name), OsStr::new("x")), "{name} passes");
        }
    }

    #[test]
    fn a_url_with_a_password_is_withheld_and_one_without_is_not() {
        let w = Withheld::default();
        for value in ["postgres://app:hunter2@db:5432/app", "http://u:p@proxy:3128", "x https://a:b@h"] {
            assert!(w.withholds(OsStr::new("DATABASE_URL"), OsStr::new(value)), "{value}");
        }
        for value in ["https://example.com/a:b@c", "ssh://git@github.com/x", "http://host:8080/", "u:p@host"]
        {
            assert!(!w.withholds(OsStr::new("URL"), OsStr::new(value)), "{value}");
        }
    }

    #[test]
    fn a_short_value_is_withheld_only_when_equal() {
        let w = withheld();
        assert!(w.withholds(OsStr::new("X"), OsStr::new("ab")));
        assert!(!w.withholds(OsStr::new("LANG"), OsStr::new("abc.UTF-8")));
    }

    #[test]
    fn what_a_command_sets_itself_is_kept() {
        let w = Withheld::new(["PATH".to_owned(), "HERON_TEST_OWN".to_owned()], []);
        let mut command = tokio::process::Command::new("env");
        command.env("HERON_TEST_OWN", "mine");
        w.scrub(command.as_std_mut());
        let envs: Vec<_> = command.as_std().get_envs().collect();
        assert!(envs.contains(&(OsStr::new("HERON_TEST_OWN"), Some(OsStr::new("mine")))), "{envs:?}");
        if std::env::var_os("PATH").is_some() {
            assert!(envs.contains(&(OsStr::new("PATH"), None)), "inherited PATH removed: {envs:?}");
        }
    }
}
