//! `heron conformance [--profile P] [--agent CMD] [--format F] [FILES...]`: replays ACP
//! transcripts against Heron (this executable's `acp --validate` with each scenario's
//! arguments) or any agent command, reports pass, fail or skip per scenario (a table, JUnit
//! XML or JSON), and exits non-zero when a required check fails (with `--strict`, also when
//! a recommendation is not followed). `--profile acp` (or
//! `acp-v2`) without files runs that profile built into the binary.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::conformance::report::{self, Format};
use crate::conformance::{
    AgentCommand, Outcome, Profile, Scenario, bundled, run_file, run_text, runner::resolve_paths,
    transcript_files,
};

/// Options of `heron conformance`.
#[derive(Debug, Clone, Args)]
pub struct ConformanceArgs {
    /// Transcript files (`*.ndjson`) or directories of them; with `--profile acp` or
    /// `acp-v2` and none given, that profile built into this binary.
    #[arg(value_name = "FILES")]
    pub files: Vec<PathBuf>,
    /// Run only the scenarios of this profile: `acp` (what ACP v1 asks of any agent),
    /// `acp-v2` (the same for ACP v2, a draft) or `heron` (Heron's own behaviour).
    #[arg(long, value_name = "PROFILE", value_parser = str::parse::<Profile>)]
    pub profile: Option<Profile>,
    /// An agent command line to test instead of Heron, e.g. "other-agent --acp" (run with
    /// `sh -c`; the scenarios' Heron arguments are not passed). A relative program path, and
    /// any other word starting with `./` or `../`, is resolved against the current directory.
    #[arg(long, value_name = "CMD", conflicts_with = "recipe")]
    pub agent: Option<String>,
    /// A known agent's recipe (`conformance/agents/<agent>.toml`): its command line, and the
    /// environment and files that point it at the kit's model server, which runs beside it,
    /// so the scenarios that need a session get one with no credentials.
    #[arg(long, value_name = "FILE")]
    pub recipe: Option<PathBuf>,
    /// The folder the recipe's agent was installed into: its `{agents}` (a recipe that
    /// names its program by its own install prefix, as `scripts/conformance-matrix` runs it).
    #[arg(long, value_name = "DIR", requires = "recipe")]
    pub agents: Option<PathBuf>,
    /// How to report: `text` (a table), `junit` (JUnit XML for CI) or `json`.
    #[arg(long, value_name = "FORMAT", default_value = "text", value_parser = str::parse::<Format>)]
    pub format: Format,
    /// Count a recommendation not followed (a check the spec recommends but does not
    /// require) as a failure: in the report and in the exit status.
    #[arg(long)]
    pub strict: bool,
    /// Rewrite the expectations of failing transcripts from what the agent sent
    /// (also `UPDATE_TRANSCRIPTS=1`).
    #[arg(long, env = "UPDATE_TRANSCRIPTS", value_parser = clap::builder::BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub update: bool,
}

/// The agent under test: `--recipe`'s agent, `--agent`'s command line (its relative paths
/// resolved against the caller's directory), else this executable.
fn agent(args: &ConformanceArgs) -> Result<AgentCommand, String> {
    if let Some(path) = &args.recipe {
        let mut recipe = crate::conformance::recipe::Recipe::load(path)?;
        if let Some(dir) = &args.agents {
            let dir = std::fs::canonicalize(dir)
                .map_err(|e| format!("the agents folder {}: {e}", dir.display()))?;
            recipe.agents = Some(dir);
        }
        return Ok(AgentCommand::Recipe(std::sync::Arc::new(recipe)));
    }
    match &args.agent {
        Some(line) => {
            let cwd =
                std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}"))?;
            Ok(AgentCommand::Shell(resolve_paths(line, &cwd)))
        }
        None => std::env::current_exe()
            .map(AgentCommand::Heron)
            .map_err(|e| format!("cannot find this executable to test it: {e}")),
    }
}

/// Runs the files named, those of `--profile` only when it is given, or the built-in acp
/// profile when there are no files.
fn outcomes(args: &ConformanceArgs, agent: &AgentCommand) -> Result<Vec<Outcome>, String> {
    if args.files.is_empty() {
        return match args.profile {
            Some(Profile::Acp | Profile::AcpV2) if args.update => {
                Err("--update rewrites files; the built-in profiles have none (name the files)".into())
            }
            Some(Profile::Acp) => {
                Ok(bundled::ACP.iter().map(|(name, text)| run_text(name, text, agent)).collect())
            }
            Some(Profile::AcpV2) => {
                Ok(bundled::ACP_V2.iter().map(|(name, text)| run_text(name, text, agent)).collect())
            }
            _ => Err(
                "name transcript files or directories, or use --profile acp or acp-v2 for the built-in ones"
                    .into(),
            ),
        };
    }
    let files = transcript_files(&args.files).map_err(|e| format!("cannot list the transcripts: {e}"))?;
    let mut outcomes = Vec::new();
    for file in files {
        // A file that does not parse is run anyway when no profile is asked for, so its
        // error is reported in the table; with a profile it is run too, since its profile
        // cannot be told.
        let wanted = match (args.profile, Scenario::load(&file)) {
            (Some(profile), Ok(scenario)) => scenario.header.profile == profile,
            _ => true,
        };
        if wanted {
            outcomes.push(run_file(&file, agent, args.update));
        }
    }
    Ok(outcomes)
}

/// Runs `heron conformance`.
pub fn run(args: ConformanceArgs) -> ExitCode {
    let result = agent(&args).and_then(|agent| outcomes(&args, &agent));
    let outcomes = match result {
        Ok(outcomes) => outcomes,
        Err(err) => {
            eprintln!("heron: {err}");
            return ExitCode::FAILURE;
        }
    };
    let suite = args.profile.map_or("conformance", Profile::name);
    let outcomes = if args.strict { report::strictly(outcomes) } else { outcomes };
    // Advice is not a failure: only a required check that failed fails the run.
    let status = if report::failed(&outcomes, args.strict) { ExitCode::FAILURE } else { ExitCode::SUCCESS };
    super::after_output(super::write_stdout(&report::render(&outcomes, args.format, suite)), status)
}
