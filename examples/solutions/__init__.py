"""Reference solutions of the bundled example tasks, each beside its data generator."""
