"""The bundled example tasks' data generators and agents' messages (the careful analysis
itself, solve.py, is kept once, in references/<task_id>/)."""
