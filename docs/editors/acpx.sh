#!/usr/bin/env bash
# Heron from a terminal through acpx, which starts `heron acp` and drives it over ACP.
set -euo pipefail

# One prompt in a throwaway session.
acpx --agent "heron acp" exec "Summarise what this repository does"

# A session that lives on, scoped to the current directory.
acpx --agent "heron acp" sessions new
acpx --agent "heron acp" "Find the failing test and explain why it fails"

# The offline demo model, every permission question answered yes.
acpx --approve-all --agent "heron acp --model demo/demo" exec "Look around and leave a note"

# Answers by rule: acpx matches a rule against a request's kind (read, search, edit,
# execute) or the first word of its title (Create, Write, Edit, Run), not against Heron's
# tool names (`write_file` matches nothing). A rule answers the permission question only:
# acpx's mode still decides its own file writes and terminals. Here all is approved but
# commands.
acpx --approve-all --agent "heron acp" --policy '{"autoDeny": ["execute"]}' exec "Fix the typos in README.md"
