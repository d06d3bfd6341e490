-- Heron as a CodeCompanion ACP adapter. CodeCompanion starts `heron acp` and talks to it
-- over stdio; Heron brings its own tools, permissions and models (see `heron models`).
require("codecompanion").setup({
  adapters = {
    acp = {
      heron = function()
        local helpers = require("codecompanion.adapters.acp.helpers")
        return {
          name = "heron",
          formatted_name = "Heron",
          type = "acp",
          roles = { llm = "assistant", user = "user" },
          commands = {
            -- The model comes from default_model in HERON_HOME/config.toml.
            default = { "heron", "acp" },
            -- The built-in offline model: no key, no network.
            demo = { "heron", "acp", "--model", "demo/demo" },
          },
          defaults = {
            mcpServers = {},
            timeout = 20000, -- milliseconds to wait for Heron to start
          },
          parameters = {
            protocolVersion = 1,
            clientCapabilities = {
              fs = { readTextFile = true, writeTextFile = true },
            },
            clientInfo = { name = "CodeCompanion.nvim", version = "1.0.0" },
          },
          handlers = {
            setup = function(self)
              return true
            end,
            -- Keys live in HERON_HOME/.env, so there is nothing to log in to.
            auth = function(self)
              return true
            end,
            form_messages = function(self, messages, capabilities)
              return helpers.form_messages(self, messages, capabilities)
            end,
            on_exit = function(self, code) end,
          },
        }
      end,
    },
  },
  interactions = {
    chat = { adapter = "heron" },
  },
})
