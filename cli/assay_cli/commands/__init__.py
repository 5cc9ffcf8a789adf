"""The `assay` subcommands, one module each; importing a module registers its commands."""
