"""The second long-context study (results/long_context_2/PROTOCOL.md): its plan, step-time pilot and report."""
