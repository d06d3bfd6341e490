//! The servers `heron setup` knows: for each, the provider kind, endpoint, flavor, a first
//! model and the key's usual name, so that a user picks a name and pastes a key.

use heron_core::config::ProviderKind;
use heron_core::config::flavor::Flavor;

/// One server `heron setup` can configure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Preset {
    /// What `--preset` takes, and the provider's default name.
    pub name: &'static str,
    /// What it is, for the menu.
    pub about: &'static str,
    /// The API it speaks.
    pub kind: ProviderKind,
    /// The endpoint offered; `None` when only the user can know it (Azure, a custom server).
    pub base_url: Option<&'static str>,
    /// Written as `flavor` (`openai` kind), so a proxy in front keeps the server's shape.
    pub flavor: Option<Flavor>,
    /// The model offered first.
    pub model: Option<&'static str>,
    /// What the key is called in `.env`.
    pub key: Key,
}

/// The key a preset offers to store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// The server's usual name for it.
    Named(&'static str),
    /// `NAME_API_KEY`, after the provider's name.
    AfterProvider,
    /// None: the server runs keyless on this machine.
    Keyless,
}

/// Every preset, in menu order; the first is the default.
pub const PRESETS: [Preset; 10] = [
    Preset {
        name: "openai",
        about: "OpenAI, Chat Completions",
        kind: ProviderKind::Openai,
        base_url: Some("https://api.openai.com/v1"),
        flavor: Some(Flavor::Openai),
        model: Some("gpt-4.1-mini"),
        key: Key::Named("OPENAI_API_KEY"),
    },
    Preset {
        name: "openai-responses",
        about: "OpenAI, Responses API (reasoning models with tools)",
        kind: ProviderKind::OpenaiResponses,
        base_url: Some("https://api.openai.com/v1"),
        flavor: None,
        model: Some("o4-mini"),
        key: Key::Named("OPENAI_API_KEY"),
    },
    Preset {
        name: "anthropic",
        about: "Anthropic, Messages API",
        kind: ProviderKind::Anthropic,
        base_url: Some("https://api.anthropic.com/v1"),
        flavor: None,
        model: Some("claude-sonnet-4-5"),
        key: Key::Named("ANTHROPIC_API_KEY"),
    },
    Preset {
        name: "azure",
        about: "Azure OpenAI deployment",
        kind: ProviderKind::Openai,
        base_url: None,
        flavor: Some(Flavor::Azure),
        model: None,
        key: Key::Named("AZURE_OPENAI_API_KEY"),
    },
    Preset {
        name: "mistral",
        about: "Mistral La Plateforme",
        kind: ProviderKind::Openai,
        base_url: Some("https://api.mistral.ai/v1"),
        flavor: Some(Flavor::Mistral),
        model: Some("devstral-medium-latest"),
        key: Key::Named("MISTRAL_API_KEY"),
    },
    Preset {
        name: "deepseek",
        about: "DeepSeek",
        kind: ProviderKind::Openai,
        base_url: Some("https://api.deepseek.com"),
        flavor: Some(Flavor::Deepseek),
        model: Some("deepseek-chat"),
        key: Key::Named("DEEPSEEK_API_KEY"),
    },
    Preset {
        name: "openrouter",
        about: "OpenRouter",
        kind: ProviderKind::Openai,
        base_url: Some("https://openrouter.ai/api/v1"),
        flavor: Some(Flavor::Openrouter),
        model: Some("anthropic/claude-sonnet-4"),
        key: Key::Named("OPENROUTER_API_KEY"),
    },
    Preset {
        name: "ollama",
        about: "Ollama on this machine",
        kind: ProviderKind::Openai,
        base_url: Some("http://localhost:11434/v1"),
        flavor: Some(Flavor::Ollama),
        model: Some("qwen3:8b"),
        key: Key::Keyless,
    },
    Preset {
        name: "llamacpp",
        about: "llama.cpp's llama-server on this machine",
        kind: ProviderKind::Openai,
        base_url: Some("http://127.0.0.1:8080/v1"),
        flavor: Some(Flavor::Llamacpp),
        model: Some("local"),
        key: Key::Keyless,
    },
    Preset {
        name: "custom",
        about: "another OpenAI-compatible server (vLLM, LM Studio, LiteLLM, Groq, ...)",
        kind: ProviderKind::Openai,
        base_url: None,
        flavor: None,
        model: None,
        key: Key::AfterProvider,
    },
];

/// The preset called `name`.
pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|preset| preset.name == name)
}

/// The menu shown before asking which server: one line per preset.
pub fn menu() -> String {
    PRESETS.iter().map(|preset| format!("  {:<17} {}\n", preset.name, preset.about)).collect()
}

/// Every preset's name, for an error that lists them.
pub fn names() -> String {
    PRESETS.iter().map(|preset| preset.name).collect::<Vec<_>>().join(", ")
}

/// The flavor's name as `config.toml` spells it.
pub fn flavor_name(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Openai => "openai",
        Flavor::Azure => "azure",
        Flavor::Mistral => "mistral",
        Flavor::Deepseek => "deepseek",
        Flavor::Openrouter => "openrouter",
        Flavor::Ollama => "ollama",
        Flavor::Llamacpp => "llamacpp",
    }
}
