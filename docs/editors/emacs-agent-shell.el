;;; Heron in agent-shell: `heron acp' speaks ACP on stdio.  -*- lexical-binding: t; -*-

(require 'agent-shell)

(defun heron-agent-shell-config ()
  "An agent-shell configuration that starts `heron acp'."
  (agent-shell-make-agent-config
   :identifier 'heron
   :mode-line-name "Heron"
   :buffer-name "Heron"
   :shell-prompt "Heron> "
   :shell-prompt-regexp "Heron> "
   :client-maker
   (lambda (buffer)
     (acp-make-client :command "heron"
                      :command-params '("acp")
                      ;; Keep PATH and HOME: Heron finds ~/.heron through HOME.
                      :environment-variables
                      (agent-shell-make-environment-variables :inherit-env t)
                      :context-buffer buffer))))

;; Offer Heron in M-x agent-shell beside the built-in agents.  The list gets the
;; configuration itself: older agent-shell releases read every entry as a configuration,
;; newer ones also take a function that makes one.
(add-to-list 'agent-shell-agent-configs (heron-agent-shell-config))

(defun heron-agent-shell ()
  "Start a new Heron session in agent-shell."
  (interactive)
  (agent-shell-start :config (heron-agent-shell-config)))
