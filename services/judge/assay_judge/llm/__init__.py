"""The LLM judge: an agent with read-only tools over sealed files that returns a validated verdict."""
