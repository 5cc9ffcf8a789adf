#!/usr/bin/env python3
"""Generate the bundled example tasks, with data of known ground truth.

    python examples/generate.py            # (re)writes examples/tasks/ and examples/truth/
    python examples/generate.py --out DIR  # writes DIR/tasks/ and DIR/truth/

Everything is seeded and written with explicit number formats, and the XLSX/DOCX
containers are normalized (fixed zip timestamps and document dates), so a rerun with
the same library versions reproduces every byte.

Each task folder holds prompt.md, task.yaml and the attachments the agent sees. The
planted parameters, and the values the reference checks expect, go to
truth/<task_id>.json, outside the task folder, so an agent never sees them.

Each task's generator lives beside its reference solution, in
solutions/<task_id>/generate.py; task_files.py holds what they share.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Callable
from pathlib import Path

from solutions.dose_response_ic50 import generate as dose_response_ic50
from solutions.growth_curves import generate as growth_curves
from solutions.messy_export_cleanup import generate as messy_export_cleanup
from solutions.power_analysis_plan import generate as power_analysis_plan
from solutions.protocol_review import generate as protocol_review
from solutions.qpcr_ddct import generate as qpcr_ddct
from solutions.rnaseq_batch_de import generate as rnaseq_batch_de
from solutions.survey_paired import generate as survey_paired

GENERATORS: dict[str, Callable[[Path], None]] = {
    "qpcr_ddct": qpcr_ddct.generate,
    "dose_response_ic50": dose_response_ic50.generate,
    "rnaseq_batch_de": rnaseq_batch_de.generate,
    "growth_curves": growth_curves.generate,
    "survey_paired": survey_paired.generate,
    "protocol_review": protocol_review.generate,
    "messy_export_cleanup": messy_export_cleanup.generate,
    "power_analysis_plan": power_analysis_plan.generate,
}


def generate(root: Path) -> None:
    """Write every task folder under root/tasks and its truth file under root/truth."""
    for task_id, generate_task in GENERATORS.items():
        folder = root / "tasks" / task_id
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        generate_task(root)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    args = ap.parse_args()
    generate(args.out)
    print(
        f"wrote {len(GENERATORS)} tasks to {args.out / 'tasks'} and truth to {args.out / 'truth'}"
    )


if __name__ == "__main__":
    main()
