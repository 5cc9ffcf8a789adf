"""Parts for testing Assay against its real pieces: the scripted stand-in model server
(`scripted`), a synthetic log and synthetic statistics tables (`synthetic_log`,
`synthetic_tables`), the pipeline helpers that start services on a real bus
(`pipeline`) and events built with the defaults tests share (`events`). It stands above the services and below the CLI: service tests import it
instead of the CLI or the benches, and `assay run`'s scripted demo uses its model server.
"""
