"""The runner: turns campaigns and tasks into runs, and drives each agent's loop in its sandbox."""
